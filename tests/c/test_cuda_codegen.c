/* test_cuda_codegen.c -- the fused-group CUDA kernel generator (core/graph/cuda_codegen.c),
 * its NVRTC compile cache (core/graph/nvrtc.c) and the launcher (core/graph/cuda_launch.c).
 *
 * Graphs are built by hand and fused by the real pass (or, for dtypes the CPU pass does
 * not fuse, grouped by hand); each group's kernel text is checked for what must be in it
 * (the ops.def formulas, the index math of broadcast and strided inputs, the reduction)
 * and compiled with NVRTC to PTX for compute_90, which must name the entry point. Kernels
 * without a block reduction are also built with the host c++ and run against eager. No
 * GPU is needed: where libnvrtc is missing the compile steps print "SKIP nvrtc: <why>" and
 * the text checks still run. The GPU branch of cuda_codegen_gpu_launch has never run.
 */
#include "graph/cuda_codegen.h"
#include "graph_test_util.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#define ARCH "compute_90"

/* NVRTC present? The first call also keeps the cache in memory only, so tests
 * never write to the user's cache directory. */
static int have_nvrtc(void)
{
    static int configured;
    if (!configured) configured = 1, tc_nvrtc_cache_reset("");
    char why[1024];
    int ok = tc_nvrtc_available(why, sizeof why);
    if (!ok) printf("  SKIP nvrtc: %s\n", why);
    return ok;
}

static int has(const char *text, const char *want)
{
    int ok = text && strstr(text, want) != NULL;
    if (!ok) printf("    text lacks '%s'\n", want);
    return ok;
}

/* Compiles k for ARCH; 1 when the PTX has k's entry point (or NVRTC is absent).
 */
static int compiles(const tc_cuda_kernel *k)
{
    if (!have_nvrtc()) return 1;
    char *ptx = NULL;
    if (tc_cuda_kernel_ptx(k, ARCH, &ptx) != TC_OK) {
        printf("    %s\n    source:\n%s\n", tc_last_error(), k->src);
        return 0;
    }
    if (getenv("TC_DUMP_KERNELS")) printf("---- %s\n%s\n---- PTX\n%s\n", k->label, k->src, ptx);
    char entry[64];
    snprintf(entry, sizeof entry, ".entry %s(", k->name);
    int ok = strstr(ptx, entry) != NULL && strstr(ptx, ".target sm_90") != NULL;
    if (!ok) printf("    PTX lacks '%s' or the target\n", entry);
    free(ptx);
    return ok;
}

/* A group made by hand of the nodes producing member values mv[0..n) (in
 * order): inputs are the values they read from outside, outputs the last value
 * and extra[0..nextra). */
static int hand_group(tc_graph *g, const int32_t *mv, int n, const int32_t *extra, int nextra)
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

static int32_t op3(tc_graph *g, tc_op op, int32_t a, int32_t b, int32_t c, const tc_params *p)
{
    int32_t in[3] = {a, b, c}, out[2] = {-1, -1};
    return tc_graph_add_op(g, op, in, 3, p, out) ? -1 : out[0];
}

static int32_t scalar_const(tc_graph *g, tc_dtype dt, double v) { return cst(g, dt, 0, NULL, VALS(v)); }

/* ---- elementwise chains -------------------------------------------------------------- */

/* z = exp(tanh(sqrt(abs(x * 1.5 + 0.5)) * x - 1)): eight members, one group. */
static tc_graph *ewchain_graph(int64_t n)
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

TEST(cuda_codegen_chain_of_8)
{
    tc_graph *g = ewchain_graph(1 << 20);
    CHECK(g != NULL);
    if (!g) return;
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 8);
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    /* every member's formula, as ops.def spells it (tc_op_info holds the
     * stringified text) */
    static const tc_op ops[] = {TC_OP_MUL, TC_OP_ADD, TC_OP_ABS, TC_OP_SQRT, TC_OP_SUB, TC_OP_TANH, TC_OP_EXP};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) CHECK(has(k.src, tc_op_info(ops[i])->formula));
    CHECK(has(k.src, "op_tanh_f32(float a, float b, float c, float p0, float p1)"));
    CHECK(has(k.src, "const float x0 = in0[i];")); /* x: contiguous, read at i */
    CHECK(has(k.src, "const float x1 = in1[0];")); /* the 1.5: one element */
    CHECK(has(k.src, "out0[i] = v7;"));
    CHECK(has(k.src, "0x3ff0000000000000LL")); /* add's alpha 1, exactly */
    CHECK(!strstr(k.src, "tc_idx c0"));        /* no coordinates: nothing broadcasts */
    CHECK(has(k.src, "typedef unsigned int tc_idx;"));
    CHECK(k.reduce == TC_CUDA_RED_NONE && k.n == (1 << 20) && k.nins == 4 && k.nouts == 1);
    CHECK(strncmp(k.name, "tc_fused_", 9) == 0 && strlen(k.name) == 25);
    CHECK(has(k.label, "fused group 0 (mul add abs sqrt mul sub tanh exp)"));
    CHECK(tc_cuda_kernel_grid(&k, 132) == 132 * 16 && tc_cuda_kernel_grid(&k, 10000) == (1 << 20) / 256);

    /* the same graph built again gives the same text and name */
    tc_graph *g2 = ewchain_graph(1 << 20);
    tc_cuda_kernel k2;
    CHECK(g2 && tc_cuda_codegen(g2, 0, NULL, &k2) == TC_OK);
    CHECK(k2.src && strcmp(k.src, k2.src) == 0 && strcmp(k.name, k2.name) == 0);
    tc_cuda_kernel_free(&k2);
    tc_graph_free(g2);
    /* another size is another kernel */
    tc_graph *g3 = ewchain_graph(1000);
    CHECK(g3 && tc_cuda_codegen(g3, 0, NULL, &k2) == TC_OK);
    CHECK(k2.src && strcmp(k.name, k2.name) != 0);
    tc_cuda_kernel_free(&k2);
    tc_graph_free(g3);

    CHECK(compiles(&k));
    if (tc_nvrtc_available(NULL, 0)) { /* float formulas stay float: no double arithmetic */
        char *ptx = NULL;
        CHECK_OK(tc_cuda_kernel_ptx(&k, ARCH, &ptx));
        CHECK(ptx && !strstr(ptx, ".f64"));
        free(ptx);
    }
    tc_cuda_kernel_free(&k);
    CHECK(k.src == NULL);
    tc_graph_free(g);
}

/* x (4,3,8) + y (4,1,8), times z (8), sigmoid: broadcast inputs index by
 * coordinates. */
TEST(cuda_codegen_broadcast_binary)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 3, SZ(4, 3, 8)), y = input(g, TC_F32, 3, SZ(4, 1, 8)), z = input(g, TC_F32, 1, SZ(8));
    int32_t v = op2(g, TC_OP_ADD, x, y, P(.s = {2}));
    v = op2(g, TC_OP_MUL, v, z, P(.s = {0}));
    v = op1(g, TC_OP_SIGMOID, v, P(.s = {0}));
    CHECK(v >= 0);
    CHECK_OK(tc_graph_mark_output(g, v));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nins == 3);
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    CHECK(has(k.src, tc_op_info(TC_OP_SIGMOID)->formula));
    CHECK(has(k.src, "coordinates over the coalesced dims 4 x 3 x 8"));
    CHECK(has(k.src, "const tc_idx c2 = r % 8u;"));
    CHECK(has(k.src, "const tc_idx c1 = r % 3u;"));
    CHECK(has(k.src, "const float x0 = in0[i];"));                   /* x: contiguous */
    CHECK(has(k.src, "const float x1 = in1[c0 * (tc_idx)8 + c2];")); /* y: dim 1 broadcast */
    CHECK(has(k.src, "const float x2 = in2[c2];"));                  /* z: the last dim only */
    CHECK(has(k.src, "0x4000000000000000LL"));                       /* add's alpha 2 */
    CHECK(compiles(&k));
    tc_cuda_kernel_free(&k);

    /* x bound as a permuted view: strides (24,1,3) at its sizes (4,3,8) */
    const int64_t xs[3] = {24, 1, 3}, *strides[3] = {xs, NULL, NULL};
    CHECK_OK(tc_cuda_codegen(g, 0, strides, &k));
    CHECK(has(k.src, "const float x0 = in0[c0 * (tc_idx)24 + c1 + c2 * (tc_idx)3];"));
    CHECK(compiles(&k));
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

/* Adjacent dims that step evenly merge: (64,1,128) against (64,32,128) needs
 * two coordinates, and a row vector against a matrix one. */
TEST(cuda_codegen_coalesces_dims)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F64, 4, SZ(2, 3, 5, 7)), y = input(g, TC_F64, 4, SZ(1, 1, 5, 7));
    int32_t v = op2(g, TC_OP_SUB, x, y, P(.s = {1}));
    v = op1(g, TC_OP_SQUARE, v, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, v));
    CHECK_OK(tc_pass_fuse(g));
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    CHECK(has(k.src, "coordinates over the coalesced dims 6 x 35"));
    CHECK(has(k.src, "const double x1 = in1[c1];"));
    CHECK(has(k.src, "op_square_f64(double a"));
    CHECK(compiles(&k));
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

/* Scalar parameters, a comparison (uint8 result), where, and copies between
 * dtypes. */
TEST(cuda_codegen_params_compare_where_copy)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F64, 2, SZ(16, 16)), y = input(g, TC_F64, 2, SZ(16, 16));
    int32_t c = op1(g, TC_OP_CLAMP, x, P(.s = {-1, 2.5}));
    int32_t a = op2(g, TC_OP_ADD, c, y, P(.s = {0.1}));
    int32_t m = op2(g, TC_OP_GT, a, x, P(.s = {0}));
    int32_t w = op3(g, TC_OP_WHERE, m, a, y, P(.s = {0}));
    int32_t f = op1(g, TC_OP_COPY, w, P(.i = {TC_F32}));
    int32_t r = op1(g, TC_OP_COPY, f, P(.i = {TC_U8}));
    CHECK(r >= 0 && g->vals[f].dtype == TC_F32 && g->vals[r].dtype == TC_U8 && g->vals[m].dtype == TC_U8);
    CHECK_OK(tc_graph_mark_output(g, m));
    CHECK_OK(tc_graph_mark_output(g, r));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 6 && g->groups[0].nouts == 2);
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    CHECK(has(k.src, tc_op_info(TC_OP_CLAMP)->formula));
    CHECK(has(k.src, tc_op_info(TC_OP_GT)->formula));
    CHECK(has(k.src, "static __device__ __forceinline__ unsigned char op_gt_f64(double a"));
    CHECK(has(k.src, "0xbff0000000000000LL")); /* clamp's -1 */
    CHECK(has(k.src, "0x4004000000000000LL")); /* clamp's 2.5 */
    CHECK(has(k.src, "0x3fb999999999999aLL")); /* add's 0.1, every bit */
    CHECK(has(k.src, "const double v3 = v2 ? v1 : x1; /* where */"));
    CHECK(has(k.src, "tc_cvt_f32((double)v3)"));
    CHECK(has(k.src, "tc_cvt_u8(double v) { return v != v ? (unsigned char)0")); /* saturating,
                                                                                    NaN -> 0 */
    CHECK(has(k.src, "unsigned char *out0") && has(k.src, "unsigned char *out1"));
    CHECK(compiles(&k));
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

/* f16 and bf16 load into float and round at the store (grouped by hand: the CPU
 * pass fuses f32/f64 only). */
TEST(cuda_codegen_half_types)
{
    for (int pass = 0; pass < 2; pass++) {
        tc_dtype dt = pass ? TC_BF16 : TC_F16;
        const char *ld = pass ? "tc_bf2f" : "tc_h2f", *st = pass ? "tc_f2bf" : "tc_f2h";
        tc_graph *g;
        CHECK_OK(tc_graph_new(&g));
        int32_t x = input(g, dt, 2, SZ(16, 32)), y = input(g, dt, 1, SZ(32));
        int32_t mv[3];
        mv[0] = op2(g, TC_OP_MUL, x, y, P(.s = {0}));
        mv[1] = op1(g, TC_OP_TANH, mv[0], P(.s = {0}));
        mv[2] = op2(g, TC_OP_ADD, mv[1], x, P(.s = {1}));
        CHECK(mv[2] >= 0 && g->vals[mv[2]].dtype == (int)dt);
        CHECK_OK(tc_graph_mark_output(g, mv[2]));
        CHECK(hand_group(g, mv, 3, NULL, 0) == 0);
        tc_cuda_kernel k;
        CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
        char want[96];
        snprintf(want, sizeof want, "const float x0 = %s(in0[i]);", ld);
        CHECK(has(k.src, want));
        snprintf(want, sizeof want, "const float x1 = %s(in1[c1]);", ld);
        CHECK(has(k.src, want));
        snprintf(want, sizeof want, "out0[i] = %s(v2);", st);
        CHECK(has(k.src, want));
        CHECK(has(k.src, "op_tanh_f32(float a")); /* computed in float */
        CHECK(has(k.src, "const unsigned short *in0"));
        CHECK(compiles(&k));
        tc_cuda_kernel_free(&k);
        tc_graph_free(g);
    }
}

/* ---- trailing reductions ------------------------------------------------------------- */

TEST(cuda_codegen_trailing_sum_all)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(100, 37)), y = input(g, TC_F32, 1, SZ(37));
    int32_t v = op1(g, TC_OP_SQUARE, x, P(.s = {0}));
    v = op2(g, TC_OP_MUL, v, y, P(.s = {0}));
    int32_t s = op1(g, TC_OP_SUM, v, P(.i = {-1, 0}));
    CHECK(s >= 0 && g->vals[s].ndim == 0);
    CHECK_OK(tc_graph_mark_output(g, s));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 3);
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    CHECK(k.reduce == TC_CUDA_RED_ALL && k.rows == 1 && k.nouts == 1);
    CHECK(has(k.src, "float *out0, double *part, unsigned int *count)"));
    CHECK(has(k.src, "s += (double)v1;"));
    CHECK(has(k.src, "tc_block_sum(double v)"));
    CHECK(has(k.src, "atomicAdd(count, 1u) == gridDim.x - 1"));
    CHECK(has(k.src, "out0[0] = ((float)s);"));
    CHECK(!strstr(k.src, "out0[i]")); /* the sum is the only output */
    CHECK(has(k.src, "const float x1 = in1[c1];"));
    CHECK(compiles(&k));
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

TEST(cuda_codegen_trailing_mean_rows)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F64, 2, SZ(64, 100));
    int32_t e = op1(g, TC_OP_EXP, x, P(.s = {0}));
    int32_t h = op2(g, TC_OP_MUL, e, scalar_const(g, TC_F64, 0.5), P(.s = {0}));
    int32_t r = op1(g, TC_OP_MEAN, h, P(.i = {1, 0}));
    CHECK(r >= 0 && g->vals[r].ndim == 1 && g->vals[r].size[0] == 64);
    CHECK_OK(tc_graph_mark_output(g, r));
    CHECK_OK(tc_graph_mark_output(g, e)); /* an elementwise output as well */
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 3 && g->groups[0].nouts == 2);
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    CHECK(k.reduce == TC_CUDA_RED_ROWS && k.rows == 64 && k.n == 6400);
    CHECK(has(k.src, "row < (tc_idx)64u"));
    CHECK(has(k.src, "const tc_idx i = row * (tc_idx)100u + j;"));
    CHECK(has(k.src, "s / 100.0"));
    CHECK(has(k.src, "out0[i] = v0;")); /* exp's value, stored as it is made */
    CHECK(!strstr(k.src, "part"));
    CHECK(tc_cuda_kernel_grid(&k, 132) == 64);
    CHECK(compiles(&k));
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

/* ---- every formula ------------------------------------------------------------------- */

/* Each float elementwise op of ops.def, alone in a group on f32 and on f64, and
 * each integer formula that needs no scalar_math.h helper on int32: all must
 * compile. One kernel per dtype holds every op (a member per op, up to the
 * group limit). */
TEST(cuda_codegen_every_formula_compiles)
{
    static const tc_dtype dts[] = {TC_F32, TC_F64, TC_I32};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        tc_dtype dt = dts[di];
        bool flt = dt != TC_I32;
        int32_t ops[TC_OP_COUNT];
        int nops = 0;
        for (int op = 0; op < TC_OP_COUNT; op++) {
            const tc_opinfo *info = tc_op_info((tc_op)op);
            if (info->kind != TC_KIND_EW || info->nin < 1) continue;
            if (!(info->flags & (flt ? TC_OPF_FLT : TC_OPF_INT))) continue;
            if (!flt && strstr(info->int_formula, "tc_")) continue; /* refused: see below */
            ops[nops++] = op;
        }
        CHECK(nops > (flt ? 45 : 20));
        for (int start = 0; start < nops; start += 30) { /* groups of up to 30 */
            tc_graph *g;
            CHECK_OK(tc_graph_new(&g));
            int32_t in[3] = {input(g, dt, 2, SZ(8, 16)), input(g, dt, 1, SZ(16)), input(g, dt, 2, SZ(8, 1))};
            int32_t mv[32], extra[32];
            int n = 0;
            for (int i = start; i < nops && i < start + 30; i++) {
                const tc_opinfo *info = tc_op_info((tc_op)ops[i]);
                int32_t a = n && !(tc_op_info((tc_op)ops[i - 1])->flags & TC_OPF_CMP) ? mv[n - 1] : in[0];
                int32_t args[3] = {a, in[1], in[2]}, out[2] = {-1, -1};
                if (tc_graph_add_op(g, (tc_op)ops[i], args, info->nin, P(.s = {0.5, 2}), out)) {
                    printf("    %s: %s\n", info->name, tc_last_error());
                    CHECK(0);
                    break;
                }
                mv[n++] = out[0];
            }
            /* every value is an output, so every member's code is live */
            for (int i = 0; i < n - 1; i++) extra[i] = mv[i];
            CHECK(n > 0 && hand_group(g, mv, n, extra, n - 1) == 0);
            tc_cuda_kernel k;
            if (n > 0 && tc_cuda_codegen(g, 0, NULL, &k) == TC_OK) {
                for (int i = start; i < start + n; i++) {
                    const tc_opinfo *info = tc_op_info((tc_op)ops[i]);
                    CHECK(has(k.src, flt ? info->formula : info->int_formula));
                }
                CHECK(compiles(&k));
                tc_cuda_kernel_free(&k);
            } else {
                printf("    %s\n", tc_last_error());
                CHECK(0);
            }
            tc_graph_free(g);
        }
    }
}

/* ---- refusals ------------------------------------------------------------------------ */

TEST(cuda_codegen_refuses_with_reasons)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(4, 8));
    int32_t mv[2];
    mv[0] = op1(g, TC_OP_EXP, x, P(.s = {0}));
    mv[1] = op1(g, TC_OP_CUMSUM, mv[0], P(.i = {1}));
    CHECK(hand_group(g, mv, 2, NULL, 0) == 0);
    tc_cuda_kernel k;
    CHECK_ERR(tc_cuda_codegen(g, 0, NULL, &k), TC_ERR_UNSUPPORTED,
              "fused group 0 (exp cumsum): member 1 (cumsum) is not elementwise: "
              "ops.def gives it no formula");
    CHECK(k.src == NULL);
    CHECK_ERR(tc_cuda_codegen(g, 1, NULL, &k), TC_ERR_ARG, "group 1 out of range (the graph has 1)");
    CHECK_ERR(tc_cuda_codegen(NULL, 0, NULL, &k), TC_ERR_ARG, "NULL graph");
    CHECK_ERR(tc_cuda_codegen(g, 0, NULL, NULL), TC_ERR_ARG, "NULL result");
    tc_graph_free(g);

    /* a sum over dim 0: not a trailing reduction the kernel can do */
    CHECK_OK(tc_graph_new(&g));
    x = input(g, TC_F32, 2, SZ(4, 8));
    mv[0] = op1(g, TC_OP_NEG, x, P(.s = {0}));
    mv[1] = op1(g, TC_OP_SUM, mv[0], P(.i = {0, 0}));
    CHECK(hand_group(g, mv, 2, NULL, 0) == 0);
    CHECK_ERR(tc_cuda_codegen(g, 0, NULL, &k), TC_ERR_UNSUPPORTED, "sum over dim 0 of 2 dims");
    tc_graph_free(g);

    /* integer division needs tc_idiv from scalar_math.h */
    CHECK_OK(tc_graph_new(&g));
    x = input(g, TC_I32, 1, SZ(8));
    int32_t y = input(g, TC_I32, 1, SZ(8));
    mv[0] = op2(g, TC_OP_DIV, x, y, P(.s = {0}));
    mv[1] = op1(g, TC_OP_NEG, mv[0], P(.s = {0}));
    CHECK(hand_group(g, mv, 2, NULL, 0) == 0);
    CHECK_ERR(tc_cuda_codegen(g, 0, NULL, &k), TC_ERR_UNSUPPORTED,
              "member 0 (div) on int32: its formula calls tc_idiv");
    tc_graph_free(g);
}

/* ---- NVRTC and its cache ------------------------------------------------------------- */

TEST(cuda_codegen_nvrtc_errors)
{
    char why[1024];
    CHECK(tc_nvrtc_probe("/nonexistent/libnvrtc.so", why, sizeof why) == 0);
    CHECK(has(why, "libnvrtc not loaded from /nonexistent/libnvrtc.so"));
    CHECK(tc_nvrtc_probe("libm.so.6", why, sizeof why) == 0); /* loads, but is not NVRTC */
    CHECK(has(why, "is not libnvrtc: it lacks nvrtcVersion"));
    char *ptx = (char *)1;
    CHECK_ERR(tc_nvrtc_compile("x", "k", "sm_90", "test kernel", &ptx), TC_ERR_ARG, "'sm_90' is not compute_XY");
    CHECK(ptx == NULL);
    if (!have_nvrtc()) return;
    CHECK_ERR(
        tc_nvrtc_compile("extern \"C\" __global__ void k() { undefined_thing(); }", "k", ARCH, "test kernel", &ptx),
        TC_ERR_UNSUPPORTED, "nvrtc: compiling test kernel for compute_90 failed");
    CHECK(has(tc_last_error(), "undefined_thing"));
    CHECK(has(tc_nvrtc_last_log(), "error"));
    CHECK(ptx == NULL);
}

TEST(cuda_codegen_nvrtc_cache)
{
    if (!have_nvrtc()) return;
    char dir[] = "/tmp/tocha_nvrtc_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/cache", dir);
    tc_graph *g = ewchain_graph(4096);
    CHECK(g != NULL);
    if (!g) return;
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    tc_nvrtc_stats st;
    char *p1 = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL;
    CHECK_OK(tc_nvrtc_cache_reset(""));          /* memory only */
    CHECK_OK(tc_cuda_kernel_ptx(&k, ARCH, &p1)); /* compiles */
    CHECK_OK(tc_cuda_kernel_ptx(&k, ARCH, &p2)); /* from memory */
    tc_nvrtc_get_stats(&st);
    CHECK(st.compiles == 1 && st.mem_hits == 1 && st.disk_hits == 0 && st.disk_writes == 0);
    CHECK(p1 && p2 && p1 != p2 && strcmp(p1, p2) == 0);
    /* another arch is another entry */
    char *p5 = NULL;
    CHECK_OK(tc_cuda_kernel_ptx(&k, "compute_80", &p5));
    CHECK(p5 && strstr(p5, ".target sm_80"));
    free(p5);

    CHECK_OK(tc_nvrtc_cache_reset(sub)); /* a fresh process, as far as the cache knows */
    CHECK_OK(tc_cuda_kernel_ptx(&k, ARCH, &p3));
    tc_nvrtc_get_stats(&st);
    CHECK(st.compiles == 1 && st.disk_writes == 1);
    CHECK_OK(tc_nvrtc_cache_reset(sub));
    CHECK_OK(tc_cuda_kernel_ptx(&k, ARCH, &p4)); /* from the file */
    tc_nvrtc_get_stats(&st);
    CHECK(st.compiles == 0 && st.disk_hits == 1);
    CHECK(p3 && p4 && strcmp(p1, p3) == 0 && strcmp(p3, p4) == 0);

    /* a damaged file is ignored (compiled again and rewritten) */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "for f in %s/*.ptx; do printf 'junk' > \"$f\"; done", sub);
    CHECK(system(cmd) == 0);
    CHECK_OK(tc_nvrtc_cache_reset(sub));
    free(p4), p4 = NULL;
    CHECK_OK(tc_cuda_kernel_ptx(&k, ARCH, &p4));
    tc_nvrtc_get_stats(&st);
    CHECK(st.compiles == 1 && st.disk_hits == 0 && st.disk_writes == 1);
    CHECK(p4 && strcmp(p1, p4) == 0);

    free(p1), free(p2), free(p3), free(p4);
    CHECK_OK(tc_nvrtc_cache_reset(""));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

/* ---- running a generated kernel on the host -------------------------------------------
 * No GPU here, but a kernel without a block reduction or half conversions (whose helpers
 * are PTX asm) is plain C++ once __global__ and the thread indices are defined: compiled
 * with the host's c++ and run block by block, thread by thread, it must give what eager
 * mode gives. This checks the index math, the formula expansion, parameters, where and
 * conversions numerically, not just as text. Skipped when no c++ is on the PATH. */

static const char emu_shim[] = "#include <cmath>\n#include <cstring>\nusing namespace std;\n"
                               "struct tc_dim3 { unsigned int x, y, z; };\n"
                               "static tc_dim3 blockIdx, blockDim, gridDim, threadIdx;\n"
                               "#define __global__\n#define __device__\n#define __forceinline__ "
                               "inline\n#define __launch_bounds__(n)\n"
                               "static inline double __longlong_as_double(long long b) { double d; "
                               "memcpy(&d, &b, 8); return d; }\n";

/* Builds k into a shared object under dir with a driver tc_emulate(args, grid)
 * that runs every (block, thread) in turn; returns its dlopen handle or NULL.
 */
static void *emu_build(const tc_cuda_kernel *k, const char *dir)
{
    const char *open = strstr(k->src, k->name);
    open = open ? strchr(open, '(') : NULL;
    const char *close = open ? strchr(open, ')') : NULL;
    if (!close) return NULL;
    char params[2048], call[4096] = "";
    snprintf(params, sizeof params, "%.*s", (int)(close - open - 1), open + 1);
    int argi = 0;
    for (char *save = NULL, *p = strtok_r(params, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *star = strrchr(p, '*');
        if (!star) return NULL;
        size_t at = strlen(call);
        snprintf(call + at, sizeof call - at, "%s(%.*s)a[%d]", argi ? ", " : "", (int)(star - p + 1), p, argi);
        argi++;
    }
    char path[256], so[256], cmd[1024];
    snprintf(path, sizeof path, "%s/%s.cpp", dir, k->name);
    snprintf(so, sizeof so, "%s/%s.so", dir, k->name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "%s\n%s\n", emu_shim, k->src);
    fprintf(f,
            "extern \"C\" void tc_emulate(void **a, unsigned int grid)\n{\n"
            "    gridDim.x = grid, blockDim.x = %d;\n"
            "    for (blockIdx.x = 0; blockIdx.x < grid; blockIdx.x++)\n"
            "        for (threadIdx.x = 0; threadIdx.x < blockDim.x; "
            "threadIdx.x++) %s(%s);\n}\n",
            TC_CUDA_FUSED_BLOCK, k->name, call);
    fclose(f);
    snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1 -ffp-contract=off -fPIC -shared -w -o %s %s", so, path);
    if (system(cmd) != 0) {
        printf("    host c++ could not build:\n%s\n", k->src);
        return NULL;
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) printf("    dlopen: %s\n", dlerror());
    return h;
}

/* Runs group 0 of g on the host with the kernel made for layouts in_strides,
 * reading each group input from ins_data[k] (laid out accordingly), and
 * compares every group output with eager's (interp) within tol (relative; exact
 * for integer results). */
static int emu_matches_eager(tc_graph *g, const int64_t *const *in_strides, tc_tensor *const *inputs,
                             const void *const *ins_data, double tol, const char *dir)
{
    tc_cuda_kernel k;
    if (tc_cuda_codegen(g, 0, in_strides, &k) != TC_OK) {
        printf("    codegen: %s\n", tc_last_error());
        return 0;
    }
    const tc_ggroup *grp = &g->groups[0];
    tc_tensor *ref[8] = {0}, *got[8] = {0};
    int ok = g->noutputs <= 8 && grp->nouts <= 8 && interp(g, inputs, ref) == TC_OK;
    void *h = ok ? emu_build(&k, dir) : NULL;
    void *sym = h ? dlsym(h, "tc_emulate") : NULL;
    ok = ok && sym;
    void *args[64];
    for (int i = 0; ok && i < grp->nins; i++) args[i] = (void *)ins_data[i];
    for (int o = 0; ok && o < grp->nouts; o++) {
        const tc_gval *v = &g->vals[grp->outs[o]];
        ok = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &got[o]) == TC_OK;
        if (ok) args[grp->nins + o] = tc_tensor_data(got[o]);
    }
    if (ok) {
        void (*run)(void **, unsigned int);
        memcpy(&run, &sym, sizeof run);
        run(args, (unsigned int)tc_cuda_kernel_grid(&k, 1)); /* 16 blocks: the grid-stride loop turns */
    }
    for (int o = 0; ok && o < grp->nouts; o++) {
        int gi = -1;
        for (int i = 0; i < g->noutputs; i++)
            if (g->outputs[i] == grp->outs[o]) gi = i;
        if (gi < 0) continue;
        bool exact = !tc_dtype_is_float((tc_dtype)got[o]->dtype);
        for (int64_t e = 0; e < tc_tensor_numel(got[o]) && ok; e++) {
            double a = ct_at(got[o], e), b = ct_at(ref[gi], e);
            if (exact ? a != b : !ct_near(a, b, tol))
                ok = 0, printf("    output %d element %lld: kernel %.17g, eager %.17g\n", o, (long long)e, a, b);
        }
    }
    for (int i = 0; i < 8; i++) tc_tensor_release(ref[i]), tc_tensor_release(got[i]);
    tc_cuda_kernel_free(&k);
    return ok;
}

static int have_cxx(void)
{
    int ok = system("command -v c++ > /dev/null 2>&1") == 0;
    if (!ok) printf("  SKIP host run: no c++ compiler\n");
    return ok;
}

static tc_tensor *ramp(tc_dtype dt, int nd, const int64_t *sz, double scale, double shift)
{
    tc_tensor *t = ct_arange(dt, nd, sz);
    if (!t) return NULL;
    int64_t n = tc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = sin((double)i * 0.37) * scale + shift; /* varied, signs mixed */
        if (dt == TC_F32)
            ((float *)tc_tensor_data(t))[i] = (float)v;
        else
            ((double *)tc_tensor_data(t))[i] = v;
    }
    return t;
}

TEST(cuda_codegen_host_run_matches_eager)
{
    if (!have_cxx()) return;
    char dir[] = "/tmp/tocha_emu_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    /* broadcast, a permuted input, parameters, a comparison, where and
     * conversions; (64,33,40) elements: more than 16 blocks of 256 threads cover,
     * so the loop strides */
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    const int64_t *S = SZ(64, 33, 40);
    int32_t x = input(g, TC_F32, 3, S), y = input(g, TC_F32, 3, SZ(64, 1, 40)), z = input(g, TC_F32, 1, SZ(40));
    int32_t v = op2(g, TC_OP_ADD, x, y, P(.s = {0.75}));
    v = op1(g, TC_OP_CLAMP, v, P(.s = {-1.25, 1.5}));
    int32_t m = op2(g, TC_OP_LT, v, z, P(.s = {0}));
    int32_t w = op3(g, TC_OP_WHERE, m, v, z, P(.s = {0}));
    int32_t s = op1(g, TC_OP_SIGMOID, w, P(.s = {0}));
    int32_t q = op2(g, TC_OP_MUL, s, x, P(.s = {0}));
    int32_t d = op1(g, TC_OP_COPY, q, P(.i = {TC_F64}));
    int32_t u = op1(g, TC_OP_COPY, op2(g, TC_OP_MUL, w, scalar_const(g, TC_F32, 100), P(.s = {0})), P(.i = {TC_U8}));
    CHECK(u >= 0);
    CHECK_OK(tc_graph_mark_output(g, m));
    CHECK_OK(tc_graph_mark_output(g, d));
    CHECK_OK(tc_graph_mark_output(g, u));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 9);
    tc_tensor *xt = ramp(TC_F32, 3, S, 2, 0), *yt = ramp(TC_F32, 3, SZ(64, 1, 40), 1, 0.1),
              *zt = ramp(TC_F32, 1, SZ(40), 1, -0.2);
    tc_tensor *ins[3] = {xt, yt, zt};
    /* group inputs in the group's order: x, y, z, then the constant 100 */
    const tc_ggroup *grp = &g->groups[0];
    CHECK(grp->nins == 4 && grp->ins[0] == x && grp->ins[1] == y && grp->ins[2] == z);
    const void *data[4] = {tc_tensor_data(xt), tc_tensor_data(yt), tc_tensor_data(zt),
                           tc_tensor_data(g->vals[grp->ins[3]].t)};
    CHECK(emu_matches_eager(g, NULL, ins, data, 1e-6, dir));

    /* x read through a permuted layout: the same values stored as (64,40,33) */
    tc_tensor *xv = ct_transposed(xt, 1, 2), *xp = NULL;
    CHECK(xv && tc_tensor_new(TC_F32, 3, SZ(64, 40, 33), &xp) == TC_OK);
    const tc_tensor *src = xv;
    CHECK_OK(tc_op_exec(TC_OP_COPY, &src, 1, P(.i = {-1}), &xp, 1));
    const int64_t xs[3] = {40 * 33, 1, 33}, *strides[4] = {xs, NULL, NULL, NULL};
    data[0] = tc_tensor_data(xp);
    CHECK(emu_matches_eager(g, strides, ins, data, 1e-6, dir));
    tc_tensor_release(xv), tc_tensor_release(xp);
    tc_tensor_release(xt), tc_tensor_release(yt), tc_tensor_release(zt);
    tc_graph_free(g);

    /* float64, three-input ops, a leading broadcast: exact but for exp */
    CHECK_OK(tc_graph_new(&g));
    int32_t a = input(g, TC_F64, 2, SZ(300, 7)), b = input(g, TC_F64, 2, SZ(300, 1)), c = input(g, TC_F64, 1, SZ(7));
    int32_t e = op3(g, TC_OP_ADDCMUL, a, b, c, P(.s = {-0.5}));
    e = op3(g, TC_OP_LERP, e, a, c, P(.s = {0}));
    e = op2(g, TC_OP_MAXIMUM, e, b, P(.s = {0}));
    e = op1(g, TC_OP_EXP, e, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1);
    tc_tensor *at = ramp(TC_F64, 2, SZ(300, 7), 1, 0), *bt = ramp(TC_F64, 2, SZ(300, 1), 1, 0.5),
              *ctt = ramp(TC_F64, 1, SZ(7), 0.5, 0.25);
    tc_tensor *ins2[3] = {at, bt, ctt};
    const void *data2[3] = {tc_tensor_data(at), tc_tensor_data(bt), tc_tensor_data(ctt)};
    CHECK(g->groups[0].nins == 3 && g->groups[0].ins[0] == a && g->groups[0].ins[1] == b);
    CHECK(emu_matches_eager(g, NULL, ins2, data2, 1e-15, dir));
    tc_tensor_release(at), tc_tensor_release(bt), tc_tensor_release(ctt);
    tc_graph_free(g);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* ---- launching (core/graph/cuda_launch.c) ---------------------------------------------
 * NOTE: the GPU branch below has never run (written on a machine without a GPU). Without a
 * driver it checks the failure message; with a GPU it runs kernels against eager. */

#include "cuda/cuda_api.h"

/* Runs group 0 of g on device 0 through tc_cuda_fused_launch (twice: the second
 * run must give the same bits, which also checks RED_ALL's counter is left at
 * zero) and compares each graph output the group makes with eager's within tol.
 */
static int gpu_matches_eager(tc_graph *g, tc_tensor *const *inputs, double tol)
{
    const tc_cuda_api *api = NULL;
    if (tc_cuda_api_get(&api) != TC_OK) return 0;
    tc_cuda_kernel k;
    if (tc_cuda_codegen(g, 0, NULL, &k) != TC_OK) return printf("    %s\n", tc_last_error()), 0;
    const tc_ggroup *grp = &g->groups[0];
    tc_tensor *ref[8] = {0}, *got[2][8] = {{0}};
    void *din[32] = {0}, *dout[32] = {0};
    int ok = g->noutputs <= 8 && grp->nouts <= 8 && interp(g, inputs, ref) == TC_OK;
    for (int i = 0; ok && i < grp->nins; i++) {
        const tc_gval *v = &g->vals[grp->ins[i]];
        const tc_tensor *t = v->kind == TC_GV_INPUT ? inputs[v->arg] : v->t;
        size_t nb = (size_t)tc_graph_val_bytes(g, grp->ins[i]);
        ok = tc_tensor_is_contiguous(t) && api->alloc(0, nb, &din[i]) == TC_OK &&
             api->copy_h2d(0, din[i], tc_tensor_data(t), nb) == TC_OK;
    }
    for (int o = 0; ok && o < grp->nouts; o++)
        ok = api->alloc(0, (size_t)tc_graph_val_bytes(g, grp->outs[o]), &dout[o]) == TC_OK;
    for (int run = 0; ok && run < 2; run++) {
        if (tc_cuda_fused_launch(0, &k, din, dout) != TC_OK || api->synchronize(0) != TC_OK) {
            printf("    run %d: %s / %s\n", run, tc_last_error(), api->last_error());
            ok = 0;
        }
        for (int o = 0; ok && o < grp->nouts; o++) {
            const tc_gval *v = &g->vals[grp->outs[o]];
            ok = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &got[run][o]) == TC_OK &&
                 api->copy_d2h(0, tc_tensor_data(got[run][o]), dout[o], (size_t)tc_graph_val_bytes(g, grp->outs[o])) ==
                     TC_OK;
        }
    }
    for (int o = 0; ok && o < grp->nouts; o++) {
        size_t nb = (size_t)tc_graph_val_bytes(g, grp->outs[o]);
        if (memcmp(tc_tensor_data(got[0][o]), tc_tensor_data(got[1][o]), nb) != 0) ok = 0, printf("    runs differ\n");
        int gi = -1;
        for (int i = 0; i < g->noutputs; i++)
            if (g->outputs[i] == grp->outs[o]) gi = i;
        for (int64_t e = 0; gi >= 0 && ok && e < tc_tensor_numel(got[0][o]); e++)
            if (!ct_near(ct_at(got[0][o], e), ct_at(ref[gi], e), tol))
                ok = 0, printf("    output %d element %lld: gpu %.17g, eager %.17g\n", o, (long long)e,
                               ct_at(got[0][o], e), ct_at(ref[gi], e));
    }
    for (int i = 0; i < 32; i++) api->release(0, din[i]), api->release(0, dout[i]);
    for (int i = 0; i < 8; i++) tc_tensor_release(ref[i]), tc_tensor_release(got[0][i]), tc_tensor_release(got[1][i]);
    tc_cuda_kernel_free(&k);
    return ok;
}

TEST(cuda_codegen_gpu_launch)
{
    char why[1024];
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        /* no driver at all: the launch says so, naming the kernel */
        tc_graph *g = ewchain_graph(256);
        tc_cuda_kernel k;
        CHECK(g && tc_cuda_codegen(g, 0, NULL, &k) == TC_OK);
        void *ptrs[8] = {0};
        CHECK_ERR(tc_cuda_fused_launch(0, &k, ptrs, ptrs), TC_ERR_DEVICE,
                  "cuda launch: fused group 0 (mul add abs sqrt mul sub tanh exp): "
                  "no CUDA driver");
        CHECK_ERR(tc_cuda_fused_launch(0, NULL, ptrs, ptrs), TC_ERR_ARG, "no generated kernel");
        tc_cuda_kernel_free(&k);
        tc_graph_free(g);
        return;
    }
    /* a real backend on a real device only: the mock backend's "device memory" is
     * host memory, which a launched kernel must never be handed */
    char name[256] = "";
    const tc_cuda_api *api = NULL;
    if (!tc_cuda_available(why, sizeof why) || tc_cuda_api_get(&api) != TC_OK ||
        api->device_name(0, name, sizeof name) != TC_OK || strstr(name, "mock")) {
        printf("  SKIP gpu launch: %s\n", why[0] ? why : name);
        return;
    }
    /* NEVER RUN YET: the first GPU this meets is its first test */
    int64_t n = 1 << 20;
    tc_graph *g = ewchain_graph(n);
    tc_tensor *x = ramp(TC_F32, 1, &n, 1, 1.1);
    CHECK(g && gpu_matches_eager(g, &x, 1e-5));
    tc_tensor_release(x);
    tc_graph_free(g);

    CHECK_OK(tc_graph_new(&g)); /* sum of everything */
    int32_t xi = input(g, TC_F32, 2, SZ(1000, 37)), yi = input(g, TC_F32, 1, SZ(37));
    int32_t v = op2(g, TC_OP_MUL, op1(g, TC_OP_SQUARE, xi, P(.s = {0})), yi, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_SUM, v, P(.i = {-1, 0}))));
    CHECK_OK(tc_pass_fuse(g));
    tc_tensor *xs = ramp(TC_F32, 2, SZ(1000, 37), 1, 0), *ys = ramp(TC_F32, 1, SZ(37), 1, 0), *in2[2] = {xs, ys};
    CHECK(g->ngroups == 1 && gpu_matches_eager(g, in2, 1e-6));
    tc_tensor_release(xs), tc_tensor_release(ys);
    tc_graph_free(g);

    CHECK_OK(tc_graph_new(&g)); /* row means, with an elementwise output */
    xi = input(g, TC_F64, 2, SZ(64, 1000));
    int32_t e = op1(g, TC_OP_EXP, xi, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_MEAN, e, P(.i = {1, 0}))));
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_pass_fuse(g));
    xs = ramp(TC_F64, 2, SZ(64, 1000), 1, 0);
    CHECK(g->ngroups == 1 && gpu_matches_eager(g, &xs, 1e-13));
    tc_tensor_release(xs);
    tc_graph_free(g);
}
