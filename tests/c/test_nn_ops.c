/* test_nn_ops.c -- the nn ops (conv2d, conv_transpose2d, conv2d_weight, pooling, softmax and
 * its backward ops; more on those in test_softmax_backward.c):
 * finite-difference checks of every rule in rules_nn.c (float64), a naive reference
 * convolution on both CPU paths (chunked small products and OpenBLAS-threaded large ones),
 * the adjoint identities tying the three conv ops together, thread-count independence,
 * strided operands and results, half precision, the causal softmax against an explicit
 * -inf mask, and bad input for every op.
 * (PyTorch goldens for all of them are in tests/golden/ops.golden.) */
#include "ctest.h"
#include "gradcheck.h"
#include "internal.h"
#include <stdlib.h>

static uint64_t seed = 77;
static tc_tensor *R(int nd, const int64_t *sz) { return ct_keep(gc_rand(TC_F64, nd, sz, -1, 1, seed++)); }

/* Runs a one-result op; NULL (and the error printed) on failure. */
static tc_tensor *run(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, int nin,
                      const tc_params *p)
{
    const tc_tensor *in[3] = {a, b, c};
    tc_tensor *out[2] = {NULL, NULL};
    if (tc_op_run(op, in, nin, p, out, tc_op_info(op)->nout)) {
        printf("  %s failed: %s\n", tc_op_info(op)->name, tc_last_error());
        return NULL;
    }
    ct_keep(out[1]);
    return ct_keep(out[0]);
}

static double dotp(const tc_tensor *a, const tc_tensor *b)
{
    double s = 0;
    int64_t n = tc_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) s += ct_at(a, i) * ct_at(b, i);
    return s;
}

static bool close_all(const tc_tensor *a, const tc_tensor *b, double tol)
{
    if (!a || !b || !tc_same_shape(a, b)) return false;
    int64_t n = tc_tensor_numel(a);
    for (int64_t i = 0; i < n; i++)
        if (!ct_near(ct_at(a, i), ct_at(b, i), tol)) {
            printf("  element %lld: %.12g vs %.12g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            return false;
        }
    return true;
}

/* ---- gradient rules ------------------------------------------------------------------------- */

TEST(nn_rules_conv)
{
    /* groups 2, strides, padding, dilation; bias */
    tc_tensor *x = R(4, SZ(2, 4, 5, 6)), *w = R(4, SZ(6, 2, 3, 2)), *b = R(1, SZ(6));
    GC(CONV2D, P(.nshape = 6, .shape = {2, 1, 1, 0, 1, 2}, .i = {2}), x, w, b);
    /* a strided input, 1x1 kernel (the no-im2col path), more samples than chunks */
    tc_tensor *xs = ct_keep(ct_transposed(R(4, SZ(17, 3, 4, 5)), 2, 3)), *w1 = R(4, SZ(2, 3, 1, 1)), *b2 = R(1, SZ(2));
    GC(CONV2D, P(.nshape = 6, .shape = {1, 1, 0, 0, 1, 1}, .i = {1}), xs, w1, b2);
    /* transposed: stride 2 with output padding 1; and output padding 1 >= stride 1 (< dilation 2) */
    tc_tensor *xt = R(4, SZ(2, 4, 3, 3)), *wt = R(4, SZ(4, 3, 3, 3)), *bt = R(1, SZ(6));
    GC(CONV_TRANSPOSE2D, P(.nshape = 8, .shape = {2, 2, 1, 1, 1, 1, 1, 1}, .i = {2}), xt, wt, bt);
    tc_tensor *wt2 = R(4, SZ(4, 2, 2, 3)), *bt2 = R(1, SZ(2));
    GC(CONV_TRANSPOSE2D, P(.nshape = 8, .shape = {1, 2, 0, 1, 2, 1, 1, 0}, .i = {1}), xt, wt2, bt2);
    /* the weight gradient, as an op of (x, gout) */
    tc_tensor *go = R(4, SZ(2, 6, 3, 4));
    GC(CONV2D_WEIGHT, P(.nshape = 8, .shape = {2, 1, 1, 0, 1, 2, 3, 2}, .i = {2}), x, go);
    ct_drop();
}

TEST(nn_rules_pool_softmax)
{
    tc_tensor *x = R(4, SZ(2, 3, 7, 6)), *x3 = R(3, SZ(3, 7, 5));
    GC(MAX_POOL2D, P(.nshape = 8, .shape = {3, 2, 2, 2, 1, 1, 1, 1}), x);
    GC(MAX_POOL2D, P(.nshape = 8, .shape = {2, 3, 2, 2, 1, 1, 2, 1}, .i = {1}), x3);
    GC(ADAPTIVE_MAX_POOL2D, P(.nshape = 2, .shape = {3, 4}), x);
    for (int ceil = 0; ceil < 2; ceil++)
        for (int incl = 0; incl < 2; incl++) {
            GC(AVG_POOL2D, P(.nshape = 6, .shape = {3, 2, 2, 3, 1, 1}, .i = {ceil, incl}), x);
            tc_tensor *y = run(TC_OP_AVG_POOL2D, x, NULL, NULL, 1, P(.nshape = 6, .shape = {3, 2, 2, 3, 1, 1}, .i = {ceil, incl}));
            if (!y) continue;
            tc_tensor *g = R(y->ndim, y->size);
            GC(AVG_POOL2D_BACKWARD, P(.nshape = 8, .shape = {3, 2, 2, 3, 1, 1, 7, 6}, .i = {ceil, incl}), g);
        }
    GC(ADAPTIVE_AVG_POOL2D, P(.nshape = 2, .shape = {3, 4}), x);
    GC(ADAPTIVE_AVG_POOL2D, P(.nshape = 2, .shape = {2, 2}), x3);
    GC(ADAPTIVE_AVG_POOL2D_BACKWARD, P(.nshape = 2, .shape = {7, 5}), R(4, SZ(2, 3, 3, 4)));
    tc_tensor *s = R(3, SZ(3, 4, 5)), *st = ct_keep(ct_transposed(s, 0, 2));
    for (int d = -1; d < 3; d++) {
        GC(SOFTMAX, P(.i = {d}), s);
        GC(LOG_SOFTMAX, P(.i = {d}), st);
    }
    /* the backward ops of (g, y), y a free input (any values; a strided one) */
    tc_tensor *sg = R(3, SZ(3, 4, 5)), *sy = ct_keep(ct_transposed(R(3, SZ(5, 4, 3)), 0, 2));
    for (int d = -1; d < 3; d++) {
        GC(SOFTMAX_BACKWARD, P(.i = {d}), sg, sy);
        GC(LOG_SOFTMAX_BACKWARD, P(.i = {d}), sg, sy);
    }
    GC(SOFTMAX_BACKWARD, P(.i = {0}), R(0, NULL), R(0, NULL));
    GC(LOG_SOFTMAX_BACKWARD, P(.i = {0}), R(0, NULL), R(0, NULL));
    /* causal softmax (i1): square, wide and tall trailing matrices, a strided input */
    GC(SOFTMAX, P(.i = {2, 1}), s);
    GC(SOFTMAX, P(.i = {-1, 1}), R(2, SZ(5, 3)));
    GC(SOFTMAX, P(.i = {-1, 1}), ct_keep(ct_transposed(R(3, SZ(2, 4, 4)), 1, 2)));
    /* its backward op (i1), y free (nonzero in the left-out part, which the op ignores) */
    GC(SOFTMAX_BACKWARD, P(.i = {2, 1}), sg, sy);
    GC(SOFTMAX_BACKWARD, P(.i = {-1, 1}), R(2, SZ(5, 3)), R(2, SZ(5, 3)));
    GC(SOFTMAX_BACKWARD, P(.i = {-1, 1}), R(2, SZ(3, 5)), ct_keep(ct_transposed(R(2, SZ(5, 3)), 0, 1)));
    ct_drop();
}

/* ---- the CPU conv kernels against a naive loop -------------------------------------------------- */

/* out (N,O,Ho,Wo) = conv2d(x, w, b) in plain loops over contiguous f64 tensors. */
static tc_tensor *naive_conv(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b, const int64_t *g, int64_t G)
{
    int64_t N = x->size[0], C = x->size[1], H = x->size[2], W = x->size[3];
    int64_t O = w->size[0], Cg = w->size[1], kH = w->size[2], kW = w->size[3], Og = O / G;
    int64_t Ho = (H + 2 * g[2] - g[4] * (kH - 1) - 1) / g[0] + 1, Wo = (W + 2 * g[3] - g[5] * (kW - 1) - 1) / g[1] + 1;
    (void)C;
    tc_tensor *out;
    if (tc_tensor_new(TC_F64, 4, SZ(N, O, Ho, Wo), &out)) return NULL;
    const double *X = tc_tensor_data(x), *Wt = tc_tensor_data(w), *B = b ? tc_tensor_data(b) : NULL;
    double *Y = tc_tensor_data(out);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < Ho; i++)
                for (int64_t j = 0; j < Wo; j++) {
                    double s = B ? B[o] : 0;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t ki = 0; ki < kH; ki++)
                            for (int64_t kj = 0; kj < kW; kj++) {
                                int64_t ih = i * g[0] - g[2] + ki * g[4], iw = j * g[1] - g[3] + kj * g[5];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int64_t ci = (o / Og) * Cg + c;
                                s += X[((n * x->size[1] + ci) * H + ih) * W + iw] * Wt[((o * Cg + c) * kH + ki) * kW + kj];
                            }
                    Y[((n * O + o) * Ho + i) * Wo + j] = s;
                }
    return ct_keep(out);
}

/* conv2d against the loops, and <conv2d(x,w), g> = <x, convT(g,w)> = <w, conv2d_weight(x,g)>. */
static bool conv_case(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t kH, int64_t kW, int64_t G,
                      const int64_t *geom, bool bias)
{
    tc_tensor *x = R(4, SZ(N, C, H, W)), *w = R(4, SZ(O, C / G, kH, kW)), *b = bias ? R(1, SZ(O)) : NULL;
    tc_params p = {.nshape = 6, .i = {G}};
    memcpy(p.shape, geom, 6 * sizeof(int64_t));
    tc_tensor *y = run(TC_OP_CONV2D, x, w, b, 3, &p), *ref = naive_conv(x, w, b, geom, G);
    if (!y || !close_all(y, ref, 1e-12)) return false;
    tc_tensor *g = R(4, y->size);
    tc_params pt = p, pw = p;
    pt.nshape = pw.nshape = 8;
    pt.shape[6] = H - ((y->size[2] - 1) * geom[0] - 2 * geom[2] + geom[4] * (kH - 1) + 1);
    pt.shape[7] = W - ((y->size[3] - 1) * geom[1] - 2 * geom[3] + geom[5] * (kW - 1) + 1);
    pw.shape[6] = kH, pw.shape[7] = kW;
    tc_tensor *y0 = bias ? run(TC_OP_CONV2D, x, w, NULL, 3, &p) : y;
    tc_tensor *gx = run(TC_OP_CONV_TRANSPOSE2D, g, w, NULL, 3, &pt), *gw = run(TC_OP_CONV2D_WEIGHT, x, g, NULL, 2, &pw);
    if (!y0 || !gx || !gw || !tc_same_shape(gx, x) || !tc_same_shape(gw, w)) return false;
    double a = dotp(y0, g), bx = dotp(x, gx), bw = dotp(w, gw);
    if (!ct_near(a, bx, 1e-10) || !ct_near(a, bw, 1e-10)) {
        printf("  adjoints differ: %.15g %.15g %.15g\n", a, bx, bw);
        return false;
    }
    return true;
}

TEST(nn_conv_matches_loops_on_both_paths)
{
    /* small per-sample products: chunks of samples over the thread pool */
    CHECK(conv_case(9, 4, 7, 6, 6, 3, 2, 2, SZ(2, 1, 1, 0, 1, 2), true));
    CHECK(conv_case(3, 3, 5, 5, 4, 1, 1, 1, SZ(1, 1, 0, 0, 1, 1), false));
    CHECK(conv_case(1, 3, 6, 6, 3, 3, 3, 3, SZ(1, 1, 1, 1, 1, 1), true)); /* depthwise */
    /* stride 1: through a zero-padded plane (unequal padding), and a plane too large for it */
    CHECK(conv_case(2, 3, 9, 8, 4, 5, 3, 1, SZ(1, 1, 2, 1, 1, 1), true));
    CHECK(conv_case(1, 2, 70, 66, 2, 3, 3, 1, SZ(1, 1, 1, 1, 1, 1), false));
    /* large ones (over OpenBLAS's single-thread size): samples in turn, threaded gemm */
    CHECK(conv_case(3, 16, 12, 12, 32, 3, 3, 1, SZ(1, 1, 1, 1, 1, 1), true));
    CHECK(conv_case(2, 16, 13, 11, 32, 3, 3, 2, SZ(2, 1, 2, 1, 1, 2), false));
    CHECK(conv_case(2, 64, 12, 12, 64, 1, 1, 1, SZ(1, 1, 0, 0, 1, 1), true));
    ct_drop();
}

TEST(nn_conv_weight_same_for_any_thread_count)
{
    int nt = tc_get_num_threads();
    tc_tensor *x = R(4, SZ(13, 3, 9, 9)), *g = R(4, SZ(13, 5, 7, 7));
    tc_params p = {.nshape = 8, .shape = {1, 1, 0, 0, 1, 1, 3, 3}, .i = {1}};
    tc_set_num_threads(1);
    tc_tensor *a = run(TC_OP_CONV2D_WEIGHT, x, g, NULL, 2, &p);
    tc_set_num_threads(3);
    tc_tensor *b = run(TC_OP_CONV2D_WEIGHT, x, g, NULL, 2, &p);
    tc_set_num_threads(nt);
    CHECK(a && b && close_all(a, b, 0));
    ct_drop();
}

/* ---- layouts, dtypes, results ------------------------------------------------------------------------ */

TEST(nn_ops_strided_results_and_half)
{
    /* softmax into a transposed (non-contiguous) result of the right size */
    tc_tensor *x = R(2, SZ(3, 5)), *base = NULL;
    CHECK_OK(tc_tensor_new(TC_F64, 2, SZ(5, 3), &base));
    ct_keep(base);
    tc_tensor *res = ct_keep(ct_transposed(base, 0, 1));
    tc_tensor *out[1] = {res};
    CHECK_OK(tc_op_run(TC_OP_SOFTMAX, (const tc_tensor *const[]){x}, 1, P(.i = {1}), out, 1));
    tc_tensor *ref = run(TC_OP_SOFTMAX, x, NULL, NULL, 1, P(.i = {1}));
    CHECK(out[0] == res && close_all(res, ref, 0));
    /* max_pool2d into given results of the wrong size: resized */
    tc_tensor *v = NULL, *ix = NULL, *px = R(4, SZ(1, 2, 4, 4));
    CHECK_OK(tc_tensor_new(TC_F64, 1, SZ(3), &v));
    CHECK_OK(tc_tensor_new(TC_I64, 1, SZ(3), &ix));
    ct_keep(v), ct_keep(ix);
    tc_tensor *outs[2] = {v, ix};
    CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *const[]){px}, 1,
                       P(.nshape = 8, .shape = {2, 2, 2, 2, 0, 0, 1, 1}), outs, 2));
    CHECK(ct_shape_is(v, 4, SZ(1, 2, 2, 2)) && ct_shape_is(ix, 4, SZ(1, 2, 2, 2)));
    /* half precision computes in f32 */
    tc_tensor *xf = NULL, *wf = NULL, *xh = NULL, *wh = NULL, *cx = R(4, SZ(2, 3, 6, 6)), *cw = R(4, SZ(4, 3, 3, 3));
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){cx}, 1, P(.i = {TC_F32}), &xf, 1);
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){cw}, 1, P(.i = {TC_F32}), &wf, 1);
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){cx}, 1, P(.i = {TC_F16}), &xh, 1);
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){cw}, 1, P(.i = {TC_F16}), &wh, 1);
    ct_keep(xf), ct_keep(wf), ct_keep(xh), ct_keep(wh);
    tc_params cp = {.nshape = 6, .shape = {1, 1, 1, 1, 1, 1}, .i = {1}};
    tc_tensor *yf = run(TC_OP_CONV2D, xf, wf, NULL, 3, &cp), *yh = run(TC_OP_CONV2D, xh, wh, NULL, 3, &cp);
    CHECK(yh && yh->dtype == TC_F16);
    if (yf && yh)
        for (int64_t i = 0; i < tc_tensor_numel(yf); i++)
            if (fabs(ct_at(yf, i) - ct_at(yh, i)) > 2e-2 * (1 + fabs(ct_at(yf, i)))) {
                CHECK(!"f16 conv2d matches f32");
                break;
            }
    ct_drop();
}

/* The causal softmax (i1) is softmax with -inf added above each trailing matrix's diagonal:
 * float64 and float32 (several sum lanes), a strided input, float16 (computed in float32),
 * leading dims, wide and tall matrices; the masked entries are exactly 0. */
static tc_tensor *masked_above_diagonal(const tc_tensor *x)
{
    tc_tensor *m = NULL;
    if (tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {-1}), &m, 1)) return NULL;
    int64_t L = x->size[x->ndim - 2], S = x->size[x->ndim - 1], n = tc_tensor_numel(x);
    double *d = (double *)tc_base(m); /* a new contiguous float64 tensor */
    for (int64_t k = 0; k < n; k++)
        if (k % S > (k / S) % L) d[k] = -INFINITY;
    return ct_keep(m);
}

TEST(nn_ops_causal_softmax)
{
    const int64_t *shapes[] = {SZ(2, 3, 7, 7), SZ(5, 40), SZ(40, 5), SZ(1, 1)};
    const int nds[] = {4, 2, 2, 2};
    for (int c = 0; c < 4; c++) {
        tc_tensor *x = R(nds[c], shapes[c]);
        tc_tensor *want = run(TC_OP_SOFTMAX, masked_above_diagonal(x), NULL, NULL, 1, P(.i = {-1}));
        tc_tensor *y = run(TC_OP_SOFTMAX, x, NULL, NULL, 1, P(.i = {-1, 1}));
        CHECK(close_all(y, want, 1e-15));
        int64_t L = x->size[x->ndim - 2], S = x->size[x->ndim - 1];
        for (int64_t k = 0; y && k < tc_tensor_numel(y); k++)
            if (k % S > (k / S) % L && ct_at(y, k) != 0) {
                CHECK(!"masked entries are 0");
                break;
            }
        for (int dt = 0; dt < 2; dt++) { /* float32, float16: within their rounding of the f64 result */
            tc_tensor *xl = NULL;
            CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {dt ? TC_F16 : TC_F32}), &xl, 1));
            ct_keep(xl);
            tc_tensor *yl = run(TC_OP_SOFTMAX, xl, NULL, NULL, 1, P(.i = {nds[c] - 1, 1}));
            CHECK(yl && yl->dtype == xl->dtype);
            for (int64_t k = 0; yl && k < tc_tensor_numel(yl); k++)
                if (fabs(ct_at(yl, k) - ct_at(want, k)) > (dt ? 1e-3 : 1e-6)) {
                    CHECK(!"float32 / float16 causal softmax matches float64");
                    break;
                }
        }
    }
    /* a transposed input: the rows are its own, not its memory's */
    tc_tensor *xt = ct_keep(ct_transposed(R(3, SZ(2, 6, 4)), 1, 2));
    CHECK(close_all(run(TC_OP_SOFTMAX, xt, NULL, NULL, 1, P(.i = {2, 1})),
                    run(TC_OP_SOFTMAX, masked_above_diagonal(xt), NULL, NULL, 1, P(.i = {2})), 1e-15));
    ct_drop();
}

/* The causal softmax_backward (i1) on a causal y gives the full backward's gradient, reading
 * neither g nor y in the left-out part: NaN there in g leaves gx finite, with 0s there. */
TEST(nn_ops_causal_softmax_backward)
{
    const int64_t *shapes[] = {SZ(2, 3, 7, 7), SZ(5, 40), SZ(40, 5)};
    const int nds[] = {4, 2, 2};
    for (int c = 0; c < 3; c++) {
        for (int dt = 0; dt < 3; dt++) { /* float64, float32, float16 (computed in float32) */
            int dtype = dt == 0 ? TC_F64 : dt == 1 ? TC_F32 : TC_F16;
            tc_tensor *x = R(nds[c], shapes[c]), *g = R(nds[c], shapes[c]), *xl = NULL, *gl = NULL, *gn = NULL;
            CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {dtype}), &xl, 1));
            CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){g}, 1, P(.i = {dtype}), &gl, 1));
            ct_keep(xl), ct_keep(gl);
            tc_tensor *y = run(TC_OP_SOFTMAX, xl, NULL, NULL, 1, P(.i = {-1, 1}));
            tc_tensor *want = run(TC_OP_SOFTMAX_BACKWARD, gl, y, NULL, 2, P(.i = {-1}));
            int64_t L = x->size[x->ndim - 2], S = x->size[x->ndim - 1], n = tc_tensor_numel(x);
            double *gd = (double *)tc_base(g); /* R's tensors are new contiguous float64 ones */
            for (int64_t k = 0; k < n; k++) /* NaN in g where y is 0: the full formula's own NaN */
                if (k % S > (k / S) % L) gd[k] = NAN;
            CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){g}, 1, P(.i = {dtype}), &gn, 1));
            ct_keep(gn);
            tc_tensor *gx = run(TC_OP_SOFTMAX_BACKWARD, gn, y, NULL, 2, P(.i = {-1, 1}));
            CHECK(gx && gx->dtype == dtype);
            for (int64_t k = 0; gx && want && k < n; k++) {
                bool left_out = k % S > (k / S) % L;
                /* (the row sums add the same terms in another lane order: a last-bit change) */
                if (left_out ? ct_at(gx, k) != 0 : fabs(ct_at(gx, k) - ct_at(want, k)) > 1e-14) {
                    CHECK(!"causal softmax_backward: the full backward's values, 0 where left out");
                    break;
                }
            }
        }
    }
    ct_drop();
}

/* ---- bad input ---------------------------------------------------------------------------------------- */

TEST(nn_ops_bad_input)
{
    tc_tensor *x = R(4, SZ(2, 3, 5, 5)), *w = R(4, SZ(4, 3, 3, 3)), *b = R(1, SZ(4));
    const int64_t *g = SZ(1, 1, 0, 0, 1, 1);
    tc_params p = {.nshape = 6, .i = {1}};
    memcpy(p.shape, g, sizeof(int64_t) * 6);
    tc_tensor *o1[1] = {NULL}, *o2[2] = {NULL, NULL};
#define CONV(xx, ww, bb, pp) tc_op_run(TC_OP_CONV2D, (const tc_tensor *const[]){xx, ww, bb}, 3, pp, o1, 1)
    CHECK_ERR(CONV(x, R(4, SZ(4, 2, 3, 3)), NULL, &p), TC_ERR_SHAPE, "conv2d: input (2,3,5,5) has 3 channels but weight (4,2,3,3)");
    CHECK_ERR(CONV(x, w, R(1, SZ(3)), &p), TC_ERR_SHAPE, "conv2d: bias (3) must be 1-D of size 4");
    CHECK_ERR(CONV(x, R(4, SZ(4, 3, 7, 3)), NULL, &p), TC_ERR_SHAPE, "conv2d: kernel 7x3 (dilation 1x1) is larger than the padded input 5x5");
    CHECK_ERR(CONV(R(3, SZ(3, 5, 5)), w, b, &p), TC_ERR_SHAPE, "conv2d: input must be 4-D");
    tc_params pg = p;
    pg.i[0] = 2;
    CHECK_ERR(CONV(R(4, SZ(2, 4, 5, 5)), R(4, SZ(3, 2, 3, 3)), NULL, &pg), TC_ERR_SHAPE, "conv2d: 2 groups do not divide the 3 output");
    pg.i[0] = 0;
    CHECK_ERR(CONV(x, w, b, &pg), TC_ERR_ARG, "conv2d: groups must be >= 1");
    tc_params ps = p;
    ps.shape[0] = 0;
    CHECK_ERR(CONV(x, w, b, &ps), TC_ERR_ARG, "conv2d: stride must be >= 1");
    ps = p, ps.nshape = 4;
    CHECK_ERR(CONV(x, w, b, &ps), TC_ERR_ARG, "conv2d: expects 6 geometry numbers");
    tc_tensor *xf = NULL;
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {TC_F32}), &xf, 1);
    ct_keep(xf);
    CHECK_ERR(CONV(xf, w, b, &p), TC_ERR_DTYPE, "conv2d: dtypes differ");
    CHECK_ERR(tc_op_run(TC_OP_CONV2D, (const tc_tensor *const[]){x, NULL, b}, 3, &p, o1, 1), TC_ERR_ARG,
              "conv2d: input 2 is NULL");
    CHECK(o1[0] == NULL);
    /* a failed call leaves a given result as it was */
    tc_tensor *given = R(1, SZ(7));
    o1[0] = given;
    CHECK_ERR(CONV(x, R(4, SZ(4, 2, 3, 3)), NULL, &p), TC_ERR_SHAPE, "channels");
    CHECK(o1[0] == given && ct_shape_is(given, 1, SZ(7)));
    o1[0] = NULL;

    tc_params pt = {.nshape = 8, .shape = {2, 2, 0, 0, 1, 1, 2, 0}, .i = {1}};
    CHECK_ERR(tc_op_run(TC_OP_CONV_TRANSPOSE2D, (const tc_tensor *const[]){R(4, SZ(2, 4, 3, 3)), w, NULL}, 3, &pt, o1, 1),
              TC_ERR_ARG, "conv_transpose2d: output padding (2,0) must be smaller than the stride");
    pt.shape[6] = 0;
    CHECK_ERR(tc_op_run(TC_OP_CONV_TRANSPOSE2D, (const tc_tensor *const[]){x, w, NULL}, 3, &pt, o1, 1), TC_ERR_SHAPE,
              "conv_transpose2d: input (2,3,5,5) has 3 channels but weight (4,3,3,3)");
    tc_params pw = {.nshape = 8, .shape = {1, 1, 0, 0, 1, 1, 3, 3}, .i = {1}};
    CHECK_ERR(tc_op_run(TC_OP_CONV2D_WEIGHT, (const tc_tensor *const[]){x, R(4, SZ(2, 4, 4, 3))}, 2, &pw, o1, 1),
              TC_ERR_SHAPE, "conv2d_weight: gradOutput (2,4,4,3) does not match the conv2d output (2,4,3,3)");

#define POOL(op, xx, pp, n) tc_op_run(TC_OP_##op, (const tc_tensor *const[]){xx}, 1, pp, o2, n)
    CHECK_ERR(POOL(MAX_POOL2D, x, P(.nshape = 8, .shape = {7, 7, 1, 1, 0, 0, 1, 1}), 2), TC_ERR_SHAPE,
              "max_pool2d: kernel 7x7 (dilation 1x1) is larger than the padded input 5x5");
    CHECK_ERR(POOL(MAX_POOL2D, x, P(.nshape = 8, .shape = {2, 2, 1, 1, 2, 0, 1, 1}), 2), TC_ERR_ARG,
              "max_pool2d: padding (2,0) must be at most half the kernel (2,2)");
    CHECK_ERR(POOL(MAX_POOL2D, R(2, SZ(5, 5)), P(.nshape = 8, .shape = {2, 2, 1, 1, 0, 0, 1, 1}), 2), TC_ERR_SHAPE,
              "max_pool2d: input must be 3-D to 4-D, got (5,5)");
    CHECK_ERR(POOL(AVG_POOL2D, x, P(.nshape = 6, .shape = {0, 2, 1, 1, 0, 0}), 1), TC_ERR_ARG,
              "avg_pool2d: kernel size must be >= 1");
    CHECK_ERR(POOL(AVG_POOL2D, x, P(.nshape = 8, .shape = {2, 2, 1, 1, 0, 0}), 1), TC_ERR_ARG,
              "avg_pool2d: expects 6 geometry numbers");
    CHECK_ERR(POOL(AVG_POOL2D_BACKWARD, R(4, SZ(2, 3, 2, 2)), P(.nshape = 8, .shape = {2, 2, 2, 2, 0, 0, 5, 6}), 1),
              TC_ERR_SHAPE, "avg_pool2d_backward: gradOutput (2,3,2,2) does not match the pooled size 2x3");
    CHECK_ERR(POOL(ADAPTIVE_AVG_POOL2D, x, P(.nshape = 2, .shape = {0, 2}), 1), TC_ERR_ARG,
              "adaptive_avg_pool2d: output size must be >= 1");
    CHECK_ERR(POOL(ADAPTIVE_MAX_POOL2D, x, P(.nshape = 1, .shape = {2}), 2), TC_ERR_ARG,
              "adaptive_max_pool2d: expects 2 geometry numbers");
    CHECK_ERR(POOL(ADAPTIVE_AVG_POOL2D_BACKWARD, R(1, SZ(4)), P(.nshape = 2, .shape = {2, 2}), 1), TC_ERR_SHAPE,
              "adaptive_avg_pool2d_backward: gradOutput must be 3-D to 4-D");
    CHECK_ERR(POOL(SOFTMAX, x, P(.i = {4}), 1), TC_ERR_INDEX, "softmax: dim 4 out of range");
    CHECK_ERR(POOL(LOG_SOFTMAX, x, P(.i = {-5}), 1), TC_ERR_INDEX, "log_softmax: dim -5 out of range");
    CHECK_ERR(POOL(SOFTMAX, x, P(.i = {3, 2}), 1), TC_ERR_ARG, "softmax: causal (i1) must be 0 or 1, got 2");
    CHECK_ERR(POOL(SOFTMAX, x, P(.i = {2, 1}), 1), TC_ERR_SHAPE,
              "softmax: causal needs the last dim of an input of at least 2 dims, got dim 2 of (2,3,5,5)");
    CHECK_ERR(POOL(SOFTMAX, R(1, SZ(4)), P(.i = {0, 1}), 1), TC_ERR_SHAPE,
              "softmax: causal needs the last dim of an input of at least 2 dims, got dim 0 of (4)");
    const tc_tensor *gy[2] = {x, x};
    CHECK_ERR(tc_op_run(TC_OP_SOFTMAX_BACKWARD, gy, 2, P(.i = {3, -1}), o2, 1), TC_ERR_ARG,
              "softmax_backward: causal (i1) must be 0 or 1, got -1");
    CHECK_ERR(tc_op_run(TC_OP_SOFTMAX_BACKWARD, gy, 2, P(.i = {1, 1}), o2, 1), TC_ERR_SHAPE,
              "softmax_backward: causal needs the last dim of an input of at least 2 dims, got dim 1 of (2,3,5,5)");
    CHECK(o2[0] == NULL);
    CHECK_OK(POOL(LOG_SOFTMAX, R(1, SZ(4)), P(.i = {0, 1}), 1)); /* log_softmax reads no i1 */
    ct_keep(o2[0]);
    o2[0] = NULL;
    CHECK(o2[0] == NULL && o2[1] == NULL);

    /* a rule handed a gradient of the wrong size refuses it */
    tc_tensor *gin[3] = {NULL, NULL, NULL};
    const tc_tensor *bad[1] = {R(4, SZ(2, 4, 2, 2))};
    CHECK_ERR(gc_run_rule(TC_OP_CONV2D, (const tc_tensor *const[]){x, w, b}, 3, &p, bad, NULL, gin), TC_ERR_SHAPE,
              "conv2d backward: gradient of output 1");
    CHECK(!gin[0] && !gin[1] && !gin[2]);
#undef CONV
#undef POOL
    ct_drop();
}
