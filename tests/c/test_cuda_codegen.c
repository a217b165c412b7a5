/* test_cuda_codegen.c -- the fused-group CUDA kernel generator (core/graph/cuda_codegen.c),
 * its NVRTC compile cache (core/graph/nvrtc.c) and the launcher (core/graph/cuda_launch.c).
 *
 * Graphs are built by hand and fused by the real pass (or, for dtypes the CPU pass does
 * not fuse, grouped by hand); each group's kernel text is checked for what must be in it
 * (the ops.def formulas, the index math of broadcast and strided inputs, the reduction)
 * and compiled with NVRTC to PTX for compute_90 and compute_75 (the oldest GPUs the backend
 * runs on), which must name the entry point, and to a cubin for sm_90 (an ELF file, cached
 * byte for byte: cuda_codegen_nvrtc_cubin). Kernels without a block reduction are also
 * built with the host c++ and run against eager. No GPU is needed: where libnvrtc is
 * missing the compile steps print "SKIP nvrtc: <why>" and the text checks still run.
 * Launches (test_cuda_codegen_run.c's cuda_codegen_gpu_*) run over the CUDA emulator; never
 * on a GPU.
 */
#include "graph/cuda_codegen.h"
#include "graph_test_util.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_codegen_test_util.h"

/* ---- elementwise chains -------------------------------------------------------------- */

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
        int nops = generated_formula_ops(flt, ops); /* integer helpers are refused: see below */
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
    size_t n = 7;
    CHECK_ERR(tc_nvrtc_compile_image("x", "k", "gfx90", "test kernel", &ptx, &n), TC_ERR_ARG,
              "architecture 'gfx90' is neither compute_XY (PTX) nor sm_XY (a cubin)");
    CHECK(ptx == NULL && n == 0);
    CHECK_ERR(tc_nvrtc_compile_image("x", "k", "sm_90", "test kernel", &ptx, NULL), TC_ERR_ARG, "NULL result");
    CHECK_ERR(tc_cuda_kernel_image(NULL, "sm_90", &ptx, &n), TC_ERR_ARG, "nvrtc: no generated kernel");
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

/* A cubin (sm_XY): the machine code cuda_launch.c loads first (the driver need not compile
 * it, so an NVRTC newer than the driver does not matter). With the real NVRTC it is an ELF
 * file, NUL bytes and all, and the disk cache keeps it byte for byte. */
TEST(cuda_codegen_nvrtc_cubin)
{
    if (!have_nvrtc()) return;
    char dir[] = "/tmp/tocha_nvrtc_cubin_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tc_graph *g = ewchain_graph(4096);
    CHECK(g != NULL);
    if (!g) return;
    tc_cuda_kernel k;
    CHECK_OK(tc_cuda_codegen(g, 0, NULL, &k));
    char *c1 = NULL, *c2 = NULL, *ptx = NULL;
    size_t n1 = 0, n2 = 0, np = 0;
    tc_nvrtc_stats st;
    CHECK_OK(tc_nvrtc_cache_reset(dir));
    CHECK_OK(tc_cuda_kernel_image(&k, "sm_90", &c1, &n1));
    CHECK_OK(tc_cuda_kernel_image(&k, ARCH, &ptx, &np)); /* PTX: its own entry, its text length */
    CHECK(ptx && np == strlen(ptx) && has(ptx, ".target sm_90"));
    if (c1 && !getenv("TOCHA_NVRTC_LIB")) /* the real NVRTC: machine code in an ELF file */
        CHECK(n1 > 64 && memcmp(c1, "\x7f" "ELF", 4) == 0 && strlen(c1) < n1);
    CHECK_OK(tc_nvrtc_cache_reset(dir)); /* a fresh process: the cubin comes from its file */
    CHECK_OK(tc_cuda_kernel_image(&k, "sm_90", &c2, &n2));
    tc_nvrtc_get_stats(&st);
    CHECK(st.compiles == 0 && st.disk_hits == 1);
    CHECK(c1 && c2 && n1 == n2 && memcmp(c1, c2, n1) == 0);
    free(c1), free(c2), free(ptx);
    CHECK_OK(tc_nvrtc_cache_reset(""));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    tc_cuda_kernel_free(&k);
    tc_graph_free(g);
}

/* tc_nvrtc_arch_for with the NVRTC found (the real one here; the emulator's list is
 * checked by cuda_codegen_gpu_ptx_fallback): a GPU it knows compiles for itself, one newer
 * than it for the newest architecture it knows below, one older than all it knows for none.
 * sm_90 is known to every NVRTC from 11.8 on; 91 and 1000 to none. */
TEST(cuda_codegen_nvrtc_arch_for)
{
    if (!have_nvrtc()) return;
    if (tc_nvrtc_arch_for(91) == 91) {
        printf("  SKIP: this NVRTC cannot list its architectures (nvrtcGetSupportedArchs is 11.2 on)\n");
        return;
    }
    CHECK(tc_nvrtc_arch_for(90) == 90);
    CHECK(tc_nvrtc_arch_for(91) == 90);
    int newest = tc_nvrtc_arch_for(1000);
    CHECK(newest >= 90 && newest < 1000 && tc_nvrtc_arch_for(newest) == newest);
    CHECK(tc_nvrtc_arch_for(newest + 1) == newest);
    CHECK(tc_nvrtc_arch_for(10) == 0); /* sm_10: below everything */
    CHECK(tc_nvrtc_arch_for(0) == 0 && tc_nvrtc_arch_for(-5) == 0);
}
