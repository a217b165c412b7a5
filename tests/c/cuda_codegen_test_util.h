/* cuda_codegen_test_util.h -- what the fused-kernel generator tests share
 * (test_cuda_codegen.c: text and NVRTC; test_cuda_codegen_run.c: kernels run on the host
 * and launched): NVRTC detection, text checks, hand-made groups, the 8-op chain graph. */
#ifndef CUDA_CODEGEN_TEST_UTIL_H
#define CUDA_CODEGEN_TEST_UTIL_H
#include "graph/cuda_codegen.h"
#include "graph_test_util.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#define ARCH "compute_90"
/* The oldest GPUs the backend runs on (the Makefile's CUDA_PTX): graph mode compiles its
 * kernels for the device's own compute capability, so they must compile for this one too. */
#define ARCH_OLDEST "compute_75"

/* NVRTC present? The first call also keeps the cache in memory only, so tests
 * never write to the user's cache directory. */
static inline int have_nvrtc(void)
{
    static int configured;
    if (!configured) configured = 1, tc_nvrtc_cache_reset("");
    char why[1024];
    int ok = tc_nvrtc_available(why, sizeof why);
    if (!ok) printf("  SKIP nvrtc: %s\n", why);
    return ok;
}

static inline int has(const char *text, const char *want)
{
    int ok = text && strstr(text, want) != NULL;
    if (!ok) printf("    text lacks '%s'\n", want);
    return ok;
}

/* Compiles k for arch ("compute_90"); 1 when the PTX has k's entry point and targets arch. */
static inline int compiles_for(const tc_cuda_kernel *k, const char *arch)
{
    char *ptx = NULL;
    if (tc_cuda_kernel_ptx(k, arch, &ptx) != TC_OK) {
        printf("    %s: %s\n    source:\n%s\n", arch, tc_last_error(), k->src);
        return 0;
    }
    if (getenv("TC_DUMP_KERNELS")) printf("---- %s (%s)\n%s\n---- PTX\n%s\n", k->label, arch, k->src, ptx);
    char entry[64], target[32];
    snprintf(entry, sizeof entry, ".entry %s(", k->name);
    snprintf(target, sizeof target, ".target sm_%s\n", arch + strlen("compute_"));
    int ok = strstr(ptx, entry) != NULL && strstr(ptx, target) != NULL;
    if (!ok) printf("    %s: PTX lacks '%s' or '.target sm_%s'\n", arch, entry, arch + strlen("compute_"));
    free(ptx);
    return ok;
}

/* Compiles k for ARCH and ARCH_OLDEST; 1 when both succeed (or NVRTC is absent). */
static inline int compiles(const tc_cuda_kernel *k)
{
    if (!have_nvrtc()) return 1;
    return compiles_for(k, ARCH) & compiles_for(k, ARCH_OLDEST);
}

/* A group made by hand of the nodes producing member values mv[0..n) (in
 * order): inputs are the values they read from outside, outputs the last value
 * and extra[0..nextra). */
static inline int hand_group(tc_graph *g, const int32_t *mv, int n, const int32_t *extra, int nextra)
{
    tc_ggroup *grp = realloc(g->groups, sizeof *grp);
    if (!grp) return -1;
    g->groups = grp, g->capgroups = 1, g->ngroups = 1;
    grp->nodes = tc_graph_alloc(g, sizeof(int32_t) * 32);
    grp->ins = tc_graph_alloc(g, sizeof(int32_t) * 32);
    grp->outs = tc_graph_alloc(g, sizeof(int32_t) * 32);
    if (!grp->nodes || !grp->ins || !grp->outs) return -1;
    grp->nnodes = grp->nins = grp->nouts = 0;
    for (int i = 0; i < n; i++) {
        const tc_gnode *nd = &g->nodes[g->vals[mv[i]].producer];
        grp->nodes[grp->nnodes++] = g->vals[mv[i]].producer;
        for (int j = 0; j < nd->nin; j++) {
            int inner = 0, seen = 0;
            for (int m = 0; m < i; m++) inner |= mv[m] == nd->in[j];
            for (int k = 0; k < grp->nins; k++) seen |= grp->ins[k] == nd->in[j];
            if (!inner && !seen) grp->ins[grp->nins++] = nd->in[j];
        }
    }
    for (int e = 0; e < nextra; e++) grp->outs[grp->nouts++] = extra[e];
    grp->outs[grp->nouts++] = mv[n - 1];
    return 0;
}

/* The elementwise ops whose formula a generated kernel carries, into ops[]: the float ones
 * (flt) or the integer ones without a scalar_math.h helper (the codegen refuses those);
 * their count. */
static inline int generated_formula_ops(bool flt, int32_t *ops)
{
    int nops = 0;
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        if (info->kind != TC_KIND_EW || info->nin < 1) continue;
        if (!(info->flags & (flt ? TC_OPF_FLT : TC_OPF_INT))) continue;
        if (!flt && strstr(info->int_formula, "tc_")) continue;
        ops[nops++] = op;
    }
    return nops;
}

static inline int32_t op3(tc_graph *g, tc_op op, int32_t a, int32_t b, int32_t c, const tc_params *p)
{
    int32_t in[3] = {a, b, c}, out[2] = {-1, -1};
    return tc_graph_add_op(g, op, in, 3, p, out) ? -1 : out[0];
}

static inline int32_t scalar_const(tc_graph *g, tc_dtype dt, double v) { return cst(g, dt, 0, NULL, VALS(v)); }

/* z = exp(tanh(sqrt(abs(x * 1.5 + 0.5)) * x - 1)): eight members, one group. */
static inline tc_graph *ewchain_graph(int64_t n)
{
    tc_graph *g = NULL;
    if (tc_graph_new(&g)) return NULL;
    int32_t x = input(g, TC_F32, 1, &n);
    int32_t z = op2(g, TC_OP_MUL, x, scalar_const(g, TC_F32, 1.5), P(.s = {0}));
    z = op2(g, TC_OP_ADD, z, scalar_const(g, TC_F32, 0.5), P(.s = {1}));
    z = op1(g, TC_OP_ABS, z, P(.s = {0}));
    z = op1(g, TC_OP_SQRT, z, P(.s = {0}));
    z = op2(g, TC_OP_MUL, z, x, P(.s = {0}));
    z = op2(g, TC_OP_SUB, z, scalar_const(g, TC_F32, 1), P(.s = {1}));
    z = op1(g, TC_OP_TANH, z, P(.s = {0}));
    z = op1(g, TC_OP_EXP, z, P(.s = {0}));
    if (z < 0 || tc_graph_mark_output(g, z) || tc_pass_fuse(g)) {
        tc_graph_free(g);
        return NULL;
    }
    return g;
}

#endif
