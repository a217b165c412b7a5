/* test_softmax_backward.c -- softmax_backward and log_softmax_backward (core/cpu/softmax.c):
 * both CPU paths (rows when dim is the last one, blocks of slices otherwise, more than one
 * block per outer index) against plain double loops of the formulas, for float64 and
 * float32; strided operands and results; f16/bf16 against float32; results independent
 * of the thread count; in place; softmax's and log_softmax's gradients through the engine are
 * exactly the ops' results; bad input. (Finite-difference checks of the rules are in
 * test_nn_ops.c and test_grad_second.c; PyTorch goldens in tests/golden/ops.golden.) */
#include "ctest.h"
#include "gradcheck.h"
#include "internal.h"
#include <math.h>

static uint64_t seed = 501;
static tc_tensor *R(tc_dtype dt, int nd, const int64_t *sz, double lo, double hi)
{
    return ct_keep(gc_rand(dt, nd, sz, lo, hi, seed++));
}

static tc_tensor *run2(tc_op op, const tc_tensor *a, const tc_tensor *b, int64_t dim)
{
    const tc_tensor *in[2] = {a, b};
    tc_tensor *out[1] = {NULL};
    if (tc_op_run(op, in, b ? 2 : 1, P(.i = {dim}), out, 1)) {
        printf("  %s failed: %s\n", tc_op_info(op)->name, tc_last_error());
        return NULL;
    }
    return ct_keep(out[0]);
}

static tc_tensor *as(const tc_tensor *t, tc_dtype dt)
{
    tc_tensor *r = NULL;
    if (tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){t}, 1, P(.i = {dt}), &r, 1)) return NULL;
    return ct_keep(r);
}

/* The formulas in double over row-major (outer, n, inner): softmax gx = y (g - sum(g y)),
 * log_softmax gx = g - exp(y) sum(g). Returns the largest relative error of got. */
static double worst_error(bool lg, const tc_tensor *g, const tc_tensor *y, const tc_tensor *got, int dim)
{
    int64_t n = g->size[dim], inner = 1, numel = tc_tensor_numel(g);
    for (int d = dim + 1; d < g->ndim; d++) inner *= g->size[d];
    double worst = 0;
    for (int64_t o = 0; o < numel / (n * inner); o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (o * n + k) * inner + i;
                s += lg ? ct_at(g, at) : ct_at(g, at) * ct_at(y, at);
            }
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (o * n + k) * inner + i;
                double gv = ct_at(g, at), yv = ct_at(y, at);
                double want = lg ? gv - exp(yv) * s : yv * (gv - s);
                double err = fabs(ct_at(got, at) - want) / (fabs(want) > 1 ? fabs(want) : 1);
                if (!(err <= worst)) worst = err; /* NaN counts as the worst */
            }
        }
    return worst;
}

TEST(softmax_backward_matches_the_formula)
{
    /* rows (dim last, long enough for the sum lanes and a tail), blocks (inner 300 > the
     * 256 slices of one block), a size-1 dim, dim first */
    struct { int nd; int64_t sz[3]; int dim; } cases[] = {
        {2, {3, 1037}, 1}, {3, {2, 5, 300}, 1}, {3, {3, 4, 5}, 0}, {3, {3, 4, 5}, 2}, {3, {4, 1, 3}, 1}, {1, {7}, 0},
    };
    const tc_dtype dts[] = {TC_F64, TC_F32};
    for (int c = 0; c < (int)(sizeof cases / sizeof *cases); c++)
        for (int t = 0; t < 2; t++)
            for (int lg = 0; lg < 2; lg++) {
                tc_tensor *x = R(dts[t], cases[c].nd, cases[c].sz, -4, 4), *g = R(dts[t], cases[c].nd, cases[c].sz, -1, 1);
                tc_tensor *y = run2(lg ? TC_OP_LOG_SOFTMAX : TC_OP_SOFTMAX, x, NULL, cases[c].dim);
                tc_tensor *gx = run2(lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD, g, y, cases[c].dim);
                CHECK(gx && gx->dtype == (int)dts[t] && tc_same_shape(gx, g));
                if (!gx) continue;
                double err = worst_error(lg, g, y, gx, cases[c].dim), tol = t ? 2e-6 : 1e-13;
                if (!(err <= tol)) {
                    printf("  case %d %s %s: error %g\n", c, tc_dtype_name(dts[t]), lg ? "log" : "softmax", err);
                    CHECK(!"softmax backward matches the formula");
                }
            }
    ct_drop();
}

TEST(softmax_backward_strided_half_threads)
{
    /* transposed operands and a transposed result agree exactly with the contiguous call */
    tc_tensor *gb = R(TC_F64, 3, SZ(5, 4, 3), -1, 1), *xb = R(TC_F64, 3, SZ(5, 4, 3), -3, 3);
    tc_tensor *g = ct_keep(ct_transposed(gb, 0, 2)), *x = ct_keep(ct_transposed(xb, 0, 2));
    for (int lg = 0; lg < 2; lg++)
        for (int dim = 0; dim < 3; dim++) {
            tc_op fw = lg ? TC_OP_LOG_SOFTMAX : TC_OP_SOFTMAX, bw = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
            tc_tensor *y = run2(fw, x, NULL, dim), *yc = as(y, TC_F64), *gc = as(g, TC_F64);
            tc_tensor *ref = run2(bw, gc, yc, dim), *got = run2(bw, g, y, dim);
            tc_tensor *base = NULL;
            CHECK_OK(tc_tensor_new(TC_F64, 3, SZ(5, 4, 3), &base));
            ct_keep(base);
            tc_tensor *res = ct_keep(ct_transposed(base, 0, 2)), *out[1] = {res};
            CHECK_OK(tc_op_run(bw, (const tc_tensor *const[]){g, y}, 2, P(.i = {dim}), out, 1));
            CHECK(ref && got && out[0] == res);
            if (!ref || !got) continue;
            int bad = 0;
            for (int64_t i = 0; i < 60; i++) bad += ct_at(ref, i) != ct_at(got, i) || ct_at(ref, i) != ct_at(res, i);
            CHECK(bad == 0);
        }
    /* in place: the result over g (each element is read before it is written) */
    for (int lg = 0; lg < 2; lg++) {
        tc_op bw = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
        tc_tensor *gi = as(gb, TC_F64), *yi = R(TC_F64, 3, SZ(5, 4, 3), -3, 0);
        tc_tensor *ref = run2(bw, gi, yi, 1), *out[1] = {gi};
        CHECK_OK(tc_op_run(bw, (const tc_tensor *const[]){gi, yi}, 2, P(.i = {1}), out, 1));
        CHECK(ref && out[0] == gi);
        if (ref) CHECK(memcmp(tc_tensor_data(ref), tc_tensor_data(gi), 60 * sizeof(double)) == 0);
    }
    /* f16 / bf16 compute in f32 and round once */
    tc_tensor *x32 = R(TC_F32, 2, SZ(6, 33), -3, 3), *g32 = R(TC_F32, 2, SZ(6, 33), -1, 1);
    const tc_dtype halves[] = {TC_F16, TC_BF16};
    for (int h = 0; h < 2; h++)
        for (int lg = 0; lg < 2; lg++) {
            tc_op fw = lg ? TC_OP_LOG_SOFTMAX : TC_OP_SOFTMAX, bw = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
            tc_tensor *yh = run2(fw, as(x32, halves[h]), NULL, 1), *gh = as(g32, halves[h]);
            tc_tensor *got = run2(bw, gh, yh, 1), *ref = run2(bw, as(gh, TC_F32), as(yh, TC_F32), 1);
            CHECK(got && got->dtype == (int)halves[h] && ref);
            if (!got || !ref) continue;
            double tol = halves[h] == TC_F16 ? 2e-3 : 1.6e-2;
            int bad = 0;
            for (int64_t i = 0; i < tc_tensor_numel(ref); i++)
                bad += !(fabs(ct_at(got, i) - ct_at(ref, i)) <= tol * (1 + fabs(ct_at(ref, i))));
            CHECK(bad == 0);
        }
    /* the thread count does not change a bit: rows and blocks, big enough to be split */
    int nt = tc_get_num_threads();
    struct { int64_t sz[2]; int dim; } big[] = {{{512, 700}, 1}, {{700, 512}, 0}};
    for (int c = 0; c < 2; c++)
        for (int lg = 0; lg < 2; lg++) {
            tc_op bw = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
            tc_tensor *gg = R(TC_F32, 2, big[c].sz, -1, 1), *yy = R(TC_F32, 2, big[c].sz, -6, 0);
            tc_set_num_threads(1);
            tc_tensor *a = run2(bw, gg, yy, big[c].dim);
            tc_set_num_threads(3);
            tc_tensor *b = run2(bw, gg, yy, big[c].dim);
            tc_set_num_threads(nt);
            CHECK(a && b);
            if (a && b) CHECK(memcmp(tc_tensor_data(a), tc_tensor_data(b), (size_t)tc_tensor_numel(a) * 4) == 0);
        }
    ct_drop();
}

/* The gradients of softmax and log_softmax are the backward ops' results, bit for bit
 * (the rules run the op, not a composition that would round differently). */
TEST(softmax_backward_is_the_rule)
{
    for (int lg = 0; lg < 2; lg++)
        for (int dim = 0; dim < 2; dim++) {
            tc_op fw = lg ? TC_OP_LOG_SOFTMAX : TC_OP_SOFTMAX, bw = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
            tc_tensor *x = R(TC_F32, 2, SZ(7, 9), -3, 3), *g = R(TC_F32, 2, SZ(7, 9), -1, 1), *leaf = NULL;
            CHECK_OK(tc_tensor_detach(x, &leaf));
            ct_keep(leaf);
            CHECK_OK(tc_tensor_set_requires_grad(leaf, 1));
            tc_tensor *y = run2(fw, leaf, NULL, dim), *gx[1] = {NULL};
            CHECK(y != NULL);
            if (!y) continue;
            CHECK_OK(tc_autograd_grad((const tc_tensor *const[]){y}, (const tc_tensor *const[]){g}, 1,
                                      (const tc_tensor *const[]){leaf}, 1, 0, 0, 0, gx));
            ct_keep(gx[0]);
            tc_tensor *yd = NULL;
            CHECK_OK(tc_tensor_detach(y, &yd));
            ct_keep(yd);
            tc_tensor *ref = run2(bw, g, yd, dim);
            CHECK(ref && gx[0] && tc_same_shape(ref, gx[0]));
            if (ref && gx[0]) CHECK(memcmp(tc_tensor_data(ref), tc_tensor_data(gx[0]), 63 * 4) == 0);
        }
    ct_drop();
}

TEST(softmax_backward_bad_input)
{
    tc_tensor *g = R(TC_F64, 2, SZ(3, 4), -1, 1), *y = R(TC_F64, 2, SZ(3, 4), 0, 1);
    tc_tensor *o[1] = {NULL};
#define BW(op, a, b, d) tc_op_run(TC_OP_##op, (const tc_tensor *const[]){a, b}, 2, P(.i = {d}), o, 1)
    CHECK_ERR(BW(SOFTMAX_BACKWARD, g, R(TC_F64, 2, SZ(4, 3), 0, 1), 1), TC_ERR_SHAPE,
              "softmax_backward: gradOutput (3,4) and output (4,3) differ in size");
    CHECK_ERR(BW(LOG_SOFTMAX_BACKWARD, g, R(TC_F32, 2, SZ(3, 4), 0, 1), 1), TC_ERR_DTYPE,
              "log_softmax_backward: dtypes differ (float64 input 1, float32 input 2)");
    CHECK_ERR(BW(SOFTMAX_BACKWARD, g, y, 2), TC_ERR_INDEX, "softmax_backward: dim 2 out of range");
    CHECK_ERR(BW(LOG_SOFTMAX_BACKWARD, g, y, -3), TC_ERR_INDEX, "log_softmax_backward: dim -3 out of range");
    tc_tensor *gi = ct_keep(ct_arange(TC_I64, 2, SZ(3, 4))), *yi = ct_keep(ct_arange(TC_I64, 2, SZ(3, 4)));
    CHECK_ERR(BW(SOFTMAX_BACKWARD, gi, yi, 1), TC_ERR_DTYPE, "softmax_backward");
    CHECK_ERR(tc_op_run(TC_OP_SOFTMAX_BACKWARD, (const tc_tensor *const[]){g, NULL}, 2, P(.i = {1}), o, 1), TC_ERR_ARG,
              "softmax_backward: input 2 is NULL");
    CHECK_ERR(tc_op_run(TC_OP_SOFTMAX_BACKWARD, (const tc_tensor *const[]){g}, 1, P(.i = {1}), o, 1), TC_ERR_ARG,
              "softmax_backward");
    CHECK(o[0] == NULL);
    /* a failed call leaves a given result as it was */
    tc_tensor *given = R(TC_F64, 1, SZ(5), 0, 1);
    double before = ct_at(given, 0);
    o[0] = given;
    CHECK_ERR(BW(SOFTMAX_BACKWARD, g, y, 5), TC_ERR_INDEX, "dim 5");
    CHECK(o[0] == given && ct_shape_is(given, 1, SZ(5)) && ct_at(given, 0) == before);
#undef BW
    ct_drop();
}
