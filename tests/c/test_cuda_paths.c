/* test_cuda_paths.c -- device kernel paths that the golden cases and the per-dtype tables
 * never reach, each checked against the CPU. A coverage build of the CUDA emulator (gcov
 * over the C tests and the CUDA specs, 2026-11-24) showed them never run:
 *   - cumsum / cumprod over lines longer than 32: the block scan (tiles of 1024 with a carry,
 *     warp shuffles), and few long lines cut into chunks (chunk totals, their prefix, then
 *     the scan of each chunk from its start) -- the golden cases' lines are all short;
 *   - var / std reduced by several blocks per output (a first pass for the means), and norm
 *     with p = -inf (min |x|);
 *   - index_add / scatter_add in float16, bfloat16 and the integer types (atomics; the 1- and
 *     2-byte ones by compare-and-swap on the 4-byte word holding them);
 *   - nonzero and masked_select of float16 / bfloat16 / bool inputs, index_fill and
 *     masked_fill of the value into every non-float type (saturating, NaN to 0);
 *   - cat into a result that one of its inputs overlaps (built aside), where on 1- and
 *     2-byte types, bfloat16 pooling;
 *   - integer products in 1- to 4-byte types (our kernel), float products of operands
 *     cuBLAS cannot take as they are (copied dense) into a strided result (computed aside);
 *   - cudnn.benchmark's timed search for the backward-data and backward-filter convolutions,
 *     and a convolution into a strided result.
 *   - every random sampler into every dtype it takes: float16 / bfloat16 (rounded below the
 *     top of uniform's range), the narrow integers and bool, random()'s full ranges.
 * (A copy between unrelated shapes of one element count is checked too; libtocha gives the
 * backend a contiguous source re-read in the result's shape, so copy.cu's own gather for a
 * strided one is reached only by a direct backend call.)
 *
 * Each runs the op on the host tensors and on device copies and compares dtype, shape and
 * every element; over a real backend no call may fall back to the host. Named cuda_dev_*:
 * runs on a GPU and over the emulator; over the mock backend (host fallback, no kernels)
 * and without a device it says so and checks nothing.
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include <math.h>
#include <stdbool.h>

#define DEV TC_DEVICE_CUDA(0)

/* A host tensor of dtype dt and sizes sz whose element i (row-major) is f(i). */
static tc_tensor *made(tc_dtype dt, int nd, const int64_t *sz, double (*f)(int64_t))
{
    tc_tensor *d = NULL, *r = NULL;
    if (tc_tensor_new(TC_F64, nd, sz, &d) != TC_OK) return NULL;
    for (int64_t i = 0; i < tc_tensor_numel(d); i++) ((double *)tc_tensor_data(d))[i] = f(i);
    if (tc_tensor_to(d, TC_CPU, dt, &r) != TC_OK) printf("  made: %s\n", tc_last_error());
    tc_tensor_release(d);
    return ct_keep(r);
}

/* 1 when host tensor got equals want in dtype, shape and each element (within tol,
 * relative: ct_near; 0: equal); else says where not. */
static int same_tensor(const char *what, const tc_tensor *got, const tc_tensor *want, double tol)
{
    if (!got || !want || got->dtype != want->dtype || got->ndim != want->ndim) {
        printf("  %s: dtype or rank differs from the CPU's\n", what);
        return 0;
    }
    for (int d = 0; d < want->ndim; d++)
        if (got->size[d] != want->size[d]) {
            printf("  %s: size %d is %lld, the CPU's %lld\n", what, d, (long long)got->size[d], (long long)want->size[d]);
            return 0;
        }
    for (int64_t i = 0; i < tc_tensor_numel(want); i++) {
        double g = ct_at(got, i), w = ct_at(want, i);
        if (tol == 0 ? !(g == w || (isnan(g) && isnan(w))) : !ct_near(g, w, tol)) {
            printf("  %s: element %lld is %.10g on the device, %.10g on the CPU\n", what, (long long)i, g, w);
            return 0;
        }
    }
    return 1;
}

/* Runs o(a, b, c; p) on the host tensors and on device copies of them (NULL stays NULL); 1
 * when the device's result, copied back, is the CPU's (same_tensor) and no call fell back
 * to the host. */
static int matches_cpu(const char *what, tc_op o, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c,
                       const tc_params *p, double tol)
{
    tc_tensor *want = NULL, *got = NULL;
    if (ct_run1(o, a, b, c, p, &want)) {
        printf("  %s on the CPU: %s\n", what, tc_last_error());
        return 0;
    }
    ct_keep(want);
    tc_tensor *da = a ? ct_to(a, DEV) : NULL, *db = b ? ct_to(b, DEV) : NULL, *dc = c ? ct_to(c, DEV) : NULL;
    if ((a && !da) || (b && !db) || (c && !dc)) return 0;
    int64_t fallbacks = tc_cuda_host_fallbacks(o);
    if (ct_run1(o, da, db, dc, p, &got)) {
        printf("  %s on the device: %s\n", what, tc_last_error());
        return 0;
    }
    ct_keep(got);
    if (tc_cuda_host_fallbacks(o) != fallbacks) {
        printf("  %s ran on the host\n", what);
        return 0;
    }
    return same_tensor(what, ct_to(got, TC_CPU), want, tol);
}

static double wave(int64_t i) { return sin(0.7 * (double)i); }
static double near_one(int64_t i) { return 1.0 + 0.01 * sin(0.7 * (double)i); }
static double small_int(int64_t i) { return (double)((i * 7) % 11) - 5; }
static double sign_run(int64_t i) { return i % 3 == 0 ? -1 : 1; }
static double spread(int64_t i) { return 3 * sin(0.37 * (double)i) + 0.5; }
static double ten(int64_t i) { return 10 + 0 * (double)i; }
static double five(int64_t i) { return 5 + 0 * (double)i; }
static double ninety_up(int64_t i) { return 90 + (double)i; }
static double forty_up(int64_t i) { return 40 + (double)i; }

/* cumsum and cumprod along lines longer than a warp: one block per line (several tiles
 * carried over), few long lines in chunks, and lines down the columns of a wide matrix. */
TEST(cuda_dev_scan_long_lines)
{
    if (!ct_cuda_kernels("the scan kernels")) return;
    static const struct {
        int64_t rows, cols;
        int dim;
    } shapes[] = {{2, 20000, 1}, {40, 1500, 1}, {1100, 50, 0}, {50, 1100, 0}};
    static const struct {
        tc_dtype dt;
        double tol;
    } types[] = {{TC_F32, 1e-6}, {TC_F64, 1e-12}, {TC_I64, 0}, {TC_I32, 0}, {TC_F16, 2e-3}, {TC_BF16, 1e-2}};
    long long chunked = ct_cuda_emu_launches("chunk_total_kernel"), blocks = ct_cuda_emu_launches("scan_block_kernel");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (int prod = 0; prod < 2; prod++) {
                tc_dtype dt = types[t].dt;
                bool integer = dt == TC_I64 || dt == TC_I32;
                tc_op o = prod ? TC_OP_CUMPROD : TC_OP_CUMSUM;
                const int64_t *sz = SZ(shapes[s].rows, shapes[s].cols);
                char what[96];
                snprintf(what, sizeof what, "%s of %s (%lld, %lld) along %d", tc_op_info(o)->name, tc_dtype_name(dt),
                         (long long)sz[0], (long long)sz[1], shapes[s].dim);
                tc_tensor *x = made(dt, 2, sz, integer ? (prod ? sign_run : small_int) : (prod ? near_one : wave));
                CHECK(matches_cpu(what, o, x, NULL, NULL, P(.i = {shapes[s].dim}), types[t].tol * (prod ? 10 : 1)));
                ct_drop();
            }
    if (chunked >= 0) { /* over the emulator: the paths above ran */
        CHECK(ct_cuda_emu_launches("chunk_total_kernel") > chunked);
        CHECK(ct_cuda_emu_launches("scan_block_kernel") > blocks);
    }
}

/* var and std of many elements per output (several blocks each: the means first), and norm
 * with p = -inf, over everything and along a long dim. */
TEST(cuda_dev_reduce_long_var_and_min_abs)
{
    if (!ct_cuda_kernels("the reduction kernels")) return;
    static const struct {
        tc_dtype dt;
        double tol;
    } types[] = {{TC_F32, 1e-5}, {TC_F64, 1e-12}, {TC_F16, 2e-3}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        tc_dtype dt = types[t].dt;
        tc_tensor *x = made(dt, 2, SZ(3, 100000), spread);
        static const struct {
            tc_op op;
            int dim, unbiased;
        } calls[] = {{TC_OP_VAR, -1, 1}, {TC_OP_VAR, -1, 0}, {TC_OP_STD, -1, 1},
                     {TC_OP_VAR, 1, 1},  {TC_OP_STD, 1, 0},  {TC_OP_MEAN, -1, 0}};
        for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s of %s (3, 100000), dim %d, unbiased %d", tc_op_info(calls[k].op)->name,
                     tc_dtype_name(dt), calls[k].dim, calls[k].unbiased);
            CHECK(matches_cpu(what, calls[k].op, x, NULL, NULL, P(.i = {calls[k].dim, 0, calls[k].unbiased}),
                              types[t].tol));
        }
        for (int dim = -1; dim <= 1; dim++) {
            char what[64];
            snprintf(what, sizeof what, "norm(-inf) of %s, dim %d", tc_dtype_name(dt), dim);
            CHECK(matches_cpu(what, TC_OP_NORM, x, NULL, NULL, P(.s = {-INFINITY}, .i = {dim, 0}), 0));
        }
        ct_drop();
    }
}

/* index_add and scatter_add with repeated indices in every type they take: the adds of one
 * destination element meet in atomics (narrow types by compare-and-swap on the word). Small
 * integers, exact in every type; uint8 and int8 wrap as on the CPU. */
TEST(cuda_dev_index_add_every_type)
{
    if (!ct_cuda_kernels("the index kernels")) return;
    static const tc_dtype types[] = {TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_F16, TC_BF16, TC_F32, TC_F64};
    tc_tensor *idx = ct_keep(ct_from(TC_I64, 1, SZ(5), VALS(1, 4, 1, 1, 5)));
    tc_tensor *sidx = ct_keep(ct_from(TC_I64, 2, SZ(2, 6), VALS(0, 3, 3, 8, 3, 0, 7, 7, 7, 7, 1, 2)));
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        tc_dtype dt = types[t];
        bool narrow = dt == TC_U8 || dt == TC_I8;
        tc_tensor *dst = made(dt, 2, SZ(6, 7), small_int), *src = made(dt, 2, SZ(5, 7), small_int);
        if (narrow) { /* sums past the type's range: 10 + 3 x (90..124) for uint8, 5 + 3 x (40..74) for int8 */
            dst = made(dt, 2, SZ(6, 7), dt == TC_U8 ? ten : five);
            src = made(dt, 2, SZ(5, 7), dt == TC_U8 ? ninety_up : forty_up);
        }
        char what[64];
        snprintf(what, sizeof what, "index_add of %s", tc_dtype_name(dt));
        CHECK(matches_cpu(what, TC_OP_INDEX_ADD, dst, idx, src, P(.i = {0}), 0));
        tc_tensor *sdst = made(dt, 2, SZ(2, 9), small_int), *ssrc = made(dt, 2, SZ(2, 6), small_int);
        snprintf(what, sizeof what, "scatter_add of %s", tc_dtype_name(dt));
        CHECK(matches_cpu(what, TC_OP_SCATTER_ADD, sdst, sidx, ssrc, P(.i = {1}), 0));
    }
    ct_drop();
}

static double zeros_and_values(int64_t i) { return i % 3 == 0 ? (i % 2 ? -0.0 : 0.0) : (double)(i % 17) - 8; }
static double every_other(int64_t i) { return (double)((i / 2 + i) % 2); }

/* Fills of out-of-range and fractional values into each non-float type (the value converted
 * once, saturating, NaN to 0), nonzero of half and bool inputs (-0 is zero), masked_select
 * of halves. */
TEST(cuda_dev_fill_and_mask_types)
{
    if (!ct_cuda_kernels("the index kernels")) return;
    static const tc_dtype types[] = {TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL, TC_F16, TC_BF16};
    static const double values[] = {300.7, -5.5, 1e10, -1e19, NAN, 0.25};
    tc_tensor *idx = ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(3, 0)));
    tc_tensor *mask = made(TC_BOOL, 2, SZ(4, 5), every_other);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        tc_dtype dt = types[t];
        tc_tensor *x = made(dt, 2, SZ(4, 5), zeros_and_values);
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            char what[80];
            snprintf(what, sizeof what, "index_fill of %g into %s", values[v], tc_dtype_name(dt));
            CHECK(matches_cpu(what, TC_OP_INDEX_FILL, x, idx, NULL, P(.s = {values[v]}, .i = {1}), 0));
            snprintf(what, sizeof what, "masked_fill of %g into %s", values[v], tc_dtype_name(dt));
            CHECK(matches_cpu(what, TC_OP_MASKED_FILL, x, mask, NULL, P(.s = {values[v]}), 0));
        }
        char what[64];
        snprintf(what, sizeof what, "nonzero of %s", tc_dtype_name(dt));
        CHECK(matches_cpu(what, TC_OP_NONZERO, x, NULL, NULL, NULL, 0));
        snprintf(what, sizeof what, "masked_select of %s", tc_dtype_name(dt));
        CHECK(matches_cpu(what, TC_OP_MASKED_SELECT, x, mask, NULL, NULL, 0));
    }
    ct_drop();
}

/* cat of rows 2..5 and 0..1 of base (10 x 4) into its rows 4..9: the first input overlaps
 * the result without being its slice, so the device builds the result aside. */
static tc_status cat_over_own_rows(tc_tensor *base)
{
    tc_tensor *mid = ct_view_at(base, 8, 2, SZ(4, 4), SZ(4, 1)), *top = ct_view_at(base, 0, 2, SZ(2, 4), SZ(4, 1));
    tc_tensor *out = ct_view_at(base, 16, 2, SZ(6, 4), SZ(4, 1));
    return tc_op_run(TC_OP_CAT, (const tc_tensor *const[]){mid, top}, 2, P(.i = {0}), &out, 1);
}

/* copy of a transposed (4, 6) into a (3, 8) result (the same 24 elements in row-major order,
 * also converting), cat over its own rows, where on 1- and 2-byte types. */
TEST(cuda_dev_copy_cat_where_paths)
{
    if (!ct_cuda_kernels("the copy kernels")) return;
    tc_tensor *x = made(TC_F16, 2, SZ(4, 6), wave), *xt = ct_keep(ct_transposed(x, 0, 1));
    for (int k = 0; k < 2; k++) {
        tc_dtype to = k ? TC_F32 : TC_F16;
        tc_tensor *want = made(to, 2, SZ(3, 8), ten), *dx = ct_to(x, DEV);
        tc_tensor *dxt = dx ? ct_keep(ct_transposed(dx, 0, 1)) : NULL, *got = NULL;
        if (!dxt) break;
        CHECK_OK(tc_tensor_to(want, DEV, -1, &got));
        ct_keep(got);
        CHECK_OK(ct_run1(TC_OP_COPY, xt, NULL, NULL, P(.i = {-1}), &want));
        CHECK_OK(ct_run1(TC_OP_COPY, dxt, NULL, NULL, P(.i = {-1}), &got));
        CHECK(same_tensor(k ? "copy of float16 (6, 4) into float32 (3, 8)" : "copy of (6, 4) into (3, 8)",
                          ct_to(got, TC_CPU), want, 0));
    }

    tc_tensor *base = made(TC_F32, 2, SZ(10, 4), wave), *dbase = ct_to(base, DEV);
    if (dbase) {
        CHECK_OK(cat_over_own_rows(base));
        CHECK_OK(cat_over_own_rows(dbase));
        CHECK(same_tensor("cat into rows an input overlaps", ct_to(dbase, TC_CPU), base, 0));
    }

    static const tc_dtype types[] = {TC_U8, TC_I8, TC_BOOL, TC_I16, TC_F16, TC_BF16};
    tc_tensor *cond = made(TC_BOOL, 2, SZ(3, 1), every_other);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        tc_tensor *a = made(types[t], 2, SZ(3, 5), zeros_and_values), *b = made(types[t], 1, SZ(5), every_other);
        char what[48];
        snprintf(what, sizeof what, "where over %s", tc_dtype_name(types[t]));
        CHECK(matches_cpu(what, TC_OP_WHERE, cond, a, b, NULL, 0));
    }
    ct_drop();
}

/* max_pool2d (values and indices), avg_pool2d and adaptive_avg_pool2d of bfloat16 images. */
TEST(cuda_dev_pool_bfloat16)
{
    if (!ct_cuda_kernels("the pooling kernels")) return;
    tc_tensor *x = made(TC_BF16, 4, SZ(2, 3, 9, 9), spread), *dx = ct_to(x, DEV);
    if (!dx) return;
    const tc_params *mp = P(.nshape = 8, .shape = {3, 3, 2, 2, 1, 1, 1, 1});
    tc_tensor *want[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
    CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *const[]){x}, 1, mp, want, 2));
    CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *const[]){dx}, 1, mp, got, 2));
    for (int k = 0; k < 2; k++) ct_keep(want[k]), ct_keep(got[k]);
    CHECK(same_tensor("max_pool2d of bfloat16", ct_to(got[0], TC_CPU), want[0], 0));
    CHECK(same_tensor("max_pool2d's indices", ct_to(got[1], TC_CPU), want[1], 0));
    CHECK(matches_cpu("avg_pool2d of bfloat16", TC_OP_AVG_POOL2D, x, NULL, NULL,
                      P(.nshape = 6, .shape = {3, 3, 2, 2, 1, 1}, .i = {1, 0}), 0));
    CHECK(matches_cpu("adaptive_avg_pool2d of bfloat16", TC_OP_ADAPTIVE_AVG_POOL2D, x, NULL, NULL,
                      P(.nshape = 2, .shape = {4, 5}), 0));
    ct_drop();
}

static double tiny_int(int64_t i) { return (double)((i * 5) % 3) - 1; }
static double tiny_uint(int64_t i) { return (double)((i * 5) % 3); }

/* Integer products in every integer type (our kernel: cuBLAS has none), float products
 * whose operands are not dense or transposed-dense (copied dense first) and whose result is
 * a strided view (computed aside, then copied in). */
TEST(cuda_dev_matmul_int_and_strided)
{
    if (!ct_cuda_kernels("the matmul paths")) return;
    static const tc_dtype types[] = {TC_U8, TC_I8, TC_I16, TC_I32, TC_I64};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        tc_dtype dt = types[t];
        tc_tensor *a = made(dt, 2, SZ(5, 7), dt == TC_U8 ? tiny_uint : tiny_int);
        tc_tensor *b = made(dt, 2, SZ(7, 4), dt == TC_U8 ? tiny_uint : tiny_int);
        char what[32];
        snprintf(what, sizeof what, "mm of %s", tc_dtype_name(dt));
        CHECK(matches_cpu(what, TC_OP_MM, a, b, NULL, NULL, 0));
    }
    /* A: every other column of a (5, 14) buffer; B: (7, 4) at strides (12, 3) in a (21, 4) one */
    tc_tensor *wa = made(TC_F32, 2, SZ(5, 14), wave), *wb = made(TC_F32, 2, SZ(21, 4), spread);
    tc_tensor *dwa = ct_to(wa, DEV), *dwb = ct_to(wb, DEV);
    tc_tensor *buf = made(TC_F32, 2, SZ(5, 8), wave), *dbuf = ct_to(buf, DEV);
    if (!dwa || !dwb || !dbuf) return;
    tc_tensor *a = ct_view_at(wa, 0, 2, SZ(5, 7), SZ(14, 2)), *b = ct_view_at(wb, 0, 2, SZ(7, 4), SZ(12, 3));
    tc_tensor *da = ct_view_at(dwa, 0, 2, SZ(5, 7), SZ(14, 2)), *db = ct_view_at(dwb, 0, 2, SZ(7, 4), SZ(12, 3));
    tc_tensor *out = ct_view_at(buf, 1, 2, SZ(5, 4), SZ(8, 2)), *dout = ct_view_at(dbuf, 1, 2, SZ(5, 4), SZ(8, 2));
    CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &out));
    CHECK_OK(ct_run1(TC_OP_MM, da, db, NULL, NULL, &dout));
    CHECK(same_tensor("mm of strided operands into a strided result", ct_to(dbuf, TC_CPU), buf, 1e-5));
    ct_drop();
}

/* With cudnn.benchmark on, the timed algorithm search of the two backward convolutions
 * (conv_transpose2d: backward data; conv2d_weight: backward filter); a forward convolution
 * into a strided result (computed aside). */
TEST(cuda_dev_conv_search_and_strided_result)
{
    if (!ct_cuda_kernels("the convolution paths")) return;
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_CUDNN_BENCHMARK, 1));
    /* x (2, 3, 7, 7); w (4, 3, 3, 3): conv2d's (O, C, kH, kW), conv_transpose2d's (Ci, O, kH, kW) */
    tc_tensor *x = made(TC_F32, 4, SZ(2, 3, 7, 7), wave), *w = made(TC_F32, 4, SZ(4, 3, 3, 3), spread);
    tc_tensor *g = made(TC_F32, 4, SZ(2, 4, 4, 4), wave);
    tc_tensor *b3 = made(TC_F32, 1, SZ(3), spread), *b4 = made(TC_F32, 1, SZ(4), wave);
    CHECK(matches_cpu("conv_transpose2d, searched", TC_OP_CONV_TRANSPOSE2D, g, w, b3,
                      P(.nshape = 8, .shape = {2, 2, 1, 1, 1, 1, 0, 0}, .i = {1}), 1e-4));
    CHECK(matches_cpu("conv2d_weight, searched", TC_OP_CONV2D_WEIGHT, x, g, NULL,
                      P(.nshape = 8, .shape = {2, 2, 1, 1, 1, 1, 3, 3}, .i = {1}), 1e-4));
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_CUDNN_BENCHMARK, 0));
    tc_tensor *dx = ct_to(x, DEV), *dw = ct_to(w, DEV), *db4 = ct_to(b4, DEV);
    tc_tensor *buf = made(TC_F32, 4, SZ(2, 4, 4, 8), wave), *dbuf = ct_to(buf, DEV);
    if (!dx || !dw || !db4 || !dbuf) return;
    const int64_t *st = SZ(128, 32, 8, 2); /* every other column of buf */
    tc_tensor *out = ct_view_at(buf, 0, 4, SZ(2, 4, 4, 4), st), *dout = ct_view_at(dbuf, 0, 4, SZ(2, 4, 4, 4), st);
    const tc_params *cp = P(.nshape = 6, .shape = {2, 2, 1, 1, 1, 1}, .i = {1});
    CHECK_OK(ct_run1(TC_OP_CONV2D, x, w, b4, cp, &out));
    CHECK_OK(ct_run1(TC_OP_CONV2D, dx, dw, db4, cp, &dout));
    CHECK(same_tensor("conv2d into a strided result", ct_to(dbuf, TC_CPU), buf, 1e-4));
    ct_drop();
}

/* Every random sampler, seeded alike, into every dtype on the CPU and on the device: the
 * same refusals and, where both run, the same values (the same Philox slots; results
 * rounded and stored as cpu/random.c does). */
TEST(cuda_dev_random_every_dtype)
{
    if (!ct_cuda_kernels("the random kernels")) return;
    static const tc_dtype types[] = {TC_F32, TC_F64, TC_F16, TC_BF16, TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL};
    static const struct {
        tc_op op;
        double s0, s1;
    } samplers[] = {{TC_OP_UNIFORM, -2, 3},      {TC_OP_UNIFORM, 0, 1},     {TC_OP_NORMAL, 1, 2},
                    {TC_OP_BERNOULLI, 0.4, 0},   {TC_OP_RANDOM, 2, 100},    {TC_OP_RANDOM, 0, 0},
                    {TC_OP_EXPONENTIAL, 1.5, 0}, {TC_OP_CAUCHY, 0, 1},      {TC_OP_LOG_NORMAL, 0, 0.5},
                    {TC_OP_GEOMETRIC, 0.3, 0}};
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(3, &g));
    int ran = 0, refused = 0;
    for (size_t k = 0; k < sizeof samplers / sizeof samplers[0]; k++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            tc_tensor *c = NULL, *d = NULL;
            CHECK_OK(tc_tensor_new(types[t], 1, SZ(37), &c));
            CHECK_OK(tc_tensor_new_on(DEV, types[t], 1, SZ(37), &d));
            ct_keep(c), ct_keep(d);
            tc_params p = {.s = {samplers[k].s0, samplers[k].s1}, .gen = g};
            const tc_tensor *none[1] = {NULL};
            int nin = samplers[k].op == TC_OP_BERNOULLI; /* its probability tensor is optional */
            char what[96];
            snprintf(what, sizeof what, "%s(%g, %g) into %s", tc_op_info(samplers[k].op)->name, samplers[k].s0,
                     samplers[k].s1, tc_dtype_name(types[t]));
            int64_t fallbacks = tc_cuda_host_fallbacks(samplers[k].op);
            tc_generator_seed(g, 5);
            tc_status sc = tc_op_run(samplers[k].op, none, nin, &p, &c, 1);
            tc_generator_seed(g, 5);
            tc_status sd = tc_op_run(samplers[k].op, none, nin, &p, &d, 1);
            if (sc != TC_OK || sd != TC_OK) {
                if (sc != sd) printf("  %s: status %d on the CPU, %d on the device\n", what, (int)sc, (int)sd);
                CHECK(sc == sd);
                refused++;
                continue;
            }
            CHECK(tc_cuda_host_fallbacks(samplers[k].op) == fallbacks);
            CHECK(same_tensor(what, ct_to(d, TC_CPU), c, 0));
            ran++;
        }
    printf("  %d sampler and dtype pairs equal on the device and the CPU, %d refused by both\n", ran, refused);
    CHECK(ran >= 60);
    tc_generator_free(g);
    ct_drop();
}
