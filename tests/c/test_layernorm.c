/* test_layernorm.c -- the layer_norm op and its backward (core/cpu/layernorm.c, shape_bn.c,
 * the rule in rules_ln.c): both results against a plain float64 loop, with and without
 * weight and bias, one or two normalised dims, many rows (the backward's weight sums go by
 * chunks); strided and in-place operands; thread-count independence; half precision beside
 * float32 or half weights; finite-difference checks of the rule (GC weights stats too, so
 * the composed form is checked with stats' gradient); the fused backward against the
 * composed one; empty sizes; bad input. (PyTorch goldens for both ops are in
 * tests/golden/ops.golden; second derivatives in test_grad_second.c.) */
#include "ctest.h"
#include "gradcheck.h"
#include "internal.h"
#include <math.h>

static uint64_t seed = 7301;
static tc_tensor *R(int nd, const int64_t *sz, double lo, double hi)
{
    return ct_keep(gc_rand(TC_F64, nd, sz, lo, hi, seed++));
}

static tc_tensor *as(const tc_tensor *t, int dt)
{
    tc_tensor *r = NULL;
    tc_op_run(TC_OP_COPY, &t, 1, P(.i = {dt}), &r, 1);
    return ct_keep(r);
}

/* layer_norm's two results (kept; *y may be a given result tensor), NULLs with the error
 * printed on failure. */
static void ln(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b, int nd, double eps, tc_tensor **y,
               tc_tensor **stats)
{
    tc_tensor *res[2] = {*y, NULL};
    if (tc_op_run(TC_OP_LAYER_NORM, (const tc_tensor *const[]){x, w, b}, 3, P(.s = {eps}, .i = {nd}), res, 2))
        printf("  layer_norm failed: %s\n", tc_last_error());
    if (res[0] != *y) ct_keep(res[0]);
    *y = res[0], *stats = ct_keep(res[1]);
}

static void ln_bw(const tc_tensor *g, const tc_tensor *x, const tc_tensor *w, const tc_tensor *stats, int nd,
                  tc_tensor **gx, tc_tensor **gwb)
{
    tc_tensor *res[2] = {NULL, NULL};
    if (tc_op_run(TC_OP_LAYER_NORM_BACKWARD, (const tc_tensor *const[]){g, x, w, stats}, 4, P(.s = {1e-5}, .i = {nd}),
                  res, 2))
        printf("  layer_norm_backward failed: %s\n", tc_last_error());
    *gx = ct_keep(res[0]), *gwb = ct_keep(res[1]);
}

/* Whether y, stats (and, given g, the backward's gx, gwb) match the float64 loop over the
 * M rows of K values of x. */
static bool matches_loop(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b, int64_t M, int64_t K, double eps,
                         const tc_tensor *y, const tc_tensor *stats, const tc_tensor *g, const tc_tensor *gx,
                         const tc_tensor *gwb, double tol)
{
    bool ok = y && stats && (!g || (gx && gwb));
    double gws[512] = {0}, gbs[512] = {0};
    for (int64_t r = 0; ok && r < M; r++) {
        double mean = 0, var = 0, sh = 0, shx = 0;
        for (int64_t i = 0; i < K; i++) mean += ct_at(x, r * K + i) / (double)K;
        for (int64_t i = 0; i < K; i++) var += pow(ct_at(x, r * K + i) - mean, 2) / (double)K;
        double rstd = 1 / sqrt(var + eps);
        ok = ct_near(ct_at(stats, r), mean, tol) && ct_near(ct_at(stats, M + r), rstd, tol);
        for (int64_t i = 0; ok && i < K; i++) {
            double xh = (ct_at(x, r * K + i) - mean) * rstd;
            double want = xh * (w ? ct_at(w, i) : 1) + (b ? ct_at(b, i) : 0);
            ok = ct_near(ct_at(y, r * K + i), want, tol);
            if (!g) continue;
            double gv = ct_at(g, r * K + i), h = gv * (w ? ct_at(w, i) : 1);
            sh += h, shx += h * xh, gws[i] += gv * xh, gbs[i] += gv;
        }
        for (int64_t i = 0; g && ok && i < K; i++) {
            double xh = (ct_at(x, r * K + i) - mean) * rstd, h = ct_at(g, r * K + i) * (w ? ct_at(w, i) : 1);
            ok = ct_near(ct_at(gx, r * K + i), rstd * (h - sh / (double)K - xh * shx / (double)K), tol);
        }
    }
    for (int64_t i = 0; g && ok && i < K; i++) ok = ct_near(ct_at(gwb, i), gws[i], tol) && ct_near(ct_at(gwb, K + i), gbs[i], tol);
    if (!ok) printf("  layer_norm differs from the float64 loop (M %lld, K %lld)\n", (long long)M, (long long)K);
    return ok;
}

TEST(layer_norm_matches_loop)
{
    /* (M rows, normalised sizes): one or two normalised dims, long rows, many rows */
    static const int64_t cases[4][4] = {{5, 1, 7}, {6, 2, 4, 9}, {2, 1, 300}, {130, 1, 33}};
    for (int c = 0; c < 4; c++) {
        const int64_t *z = cases[c];
        int nd = (int)z[1];
        int64_t sz[3] = {z[0], z[2], nd == 2 ? z[3] : 0}, K = nd == 2 ? z[2] * z[3] : z[2];
        tc_tensor *x = R(1 + nd, sz, -3, 3), *w = R(nd, sz + 1, 0.5, 1.5), *b = R(nd, sz + 1, -1, 1);
        tc_tensor *g = R(1 + nd, sz, -1, 1);
        for (int affine = 0; affine < 4; affine++) { /* both, weight only, bias only, none */
            const tc_tensor *wa = affine == 0 || affine == 1 ? w : NULL, *ba = affine == 0 || affine == 2 ? b : NULL;
            for (int f32 = 0; f32 < 2; f32++) {
                const tc_tensor *xx = f32 ? as(x, TC_F32) : x, *gg = f32 ? as(g, TC_F32) : g;
                const tc_tensor *ww = f32 && wa ? as(wa, TC_F32) : wa, *bb = f32 && ba ? as(ba, TC_F32) : ba;
                tc_tensor *y = NULL, *stats, *gx, *gwb;
                ln(xx, ww, bb, nd, 1e-5, &y, &stats);
                ln_bw(gg, xx, ww, stats, nd, &gx, &gwb);
                CHECK(matches_loop(xx, ww, bb, z[0], K, 1e-5, y, stats, gg, gx, gwb, f32 ? 2e-5 : 1e-11));
            }
        }
    }
    ct_drop();
}

TEST(layer_norm_layouts_threads_half)
{
    tc_tensor *x = R(2, SZ(200, 33), -3, 3), *w = R(1, SZ(33), 0.5, 1.5), *b = R(1, SZ(33), -1, 1);
    tc_tensor *g = R(2, SZ(200, 33), -1, 1), *y = NULL, *stats, *gx, *gwb;
    ln(x, w, b, 1, 1e-5, &y, &stats);
    ln_bw(g, x, w, stats, 1, &gx, &gwb);
    CHECK(matches_loop(x, w, b, 200, 33, 1e-5, y, stats, g, gx, gwb, 1e-11));
    /* a strided input, a strided result, and a result that is x itself */
    tc_tensor *xt = ct_keep(ct_transposed(as(ct_keep(ct_transposed(x, 0, 1)), TC_F64), 0, 1)), *y2 = NULL, *s2;
    ln(xt, w, b, 1, 1e-5, &y2, &s2);
    CHECK(ct_close_all(y2, y, 0) && ct_close_all(s2, stats, 0));
    tc_tensor *ys = ct_keep(ct_transposed(as(ct_keep(ct_transposed(x, 0, 1)), TC_F64), 0, 1)), *s3;
    tc_tensor *given = ys;
    ln(x, w, b, 1, 1e-5, &given, &s3);
    CHECK(given == ys && ct_close_all(ys, y, 0));
    tc_tensor *xc = as(x, TC_F64), *alias = xc, *s4;
    ln(xc, w, b, 1, 1e-5, &alias, &s4);
    CHECK(alias == xc && ct_close_all(xc, y, 0));
    /* the thread count changes nothing, forward or backward (the weight sums go by chunks) */
    int nt = tc_get_num_threads();
    for (int pass = 0; pass < 2; pass++) {
        tc_set_num_threads(pass ? (nt > 1 ? nt : 4) : 1);
        tc_tensor *yp = NULL, *sp, *gxp, *gwbp;
        ln(x, w, b, 1, 1e-5, &yp, &sp);
        ln_bw(g, x, w, sp, 1, &gxp, &gwbp);
        CHECK(ct_close_all(yp, y, 0) && ct_close_all(gxp, gx, 0) && ct_close_all(gwbp, gwb, 0));
    }
    tc_set_num_threads(nt);
    /* half inputs compute in float32: y and gx in the input's dtype, stats and gwb float32;
     * the weight float32 (autocast, mixed) or half (model:half()) */
    static const int hdt[2] = {TC_F16, TC_BF16};
    for (int h = 0; h < 2; h++)
        for (int half_w = 0; half_w < 2; half_w++) {
            int wdt = half_w ? hdt[h] : TC_F32;
            tc_tensor *xh = as(x, hdt[h]), *gh = as(g, hdt[h]), *wh = as(w, wdt), *bh = as(b, wdt);
            tc_tensor *yh = NULL, *sh, *gxh, *gwbh;
            ln(xh, wh, bh, 1, 1e-5, &yh, &sh);
            ln_bw(gh, xh, wh, sh, 1, &gxh, &gwbh);
            CHECK(yh && yh->dtype == hdt[h] && sh && sh->dtype == TC_F32);
            CHECK(gxh && gxh->dtype == hdt[h] && gwbh && gwbh->dtype == TC_F32);
            double tol = h ? 4e-2 : 5e-3;
            CHECK(matches_loop(xh, wh, bh, 200, 33, 1e-5, yh, sh, gh, gxh, gwbh, tol));
        }
    ct_drop();
}

/* The rule's fused path (layer_norm_backward, grad mode off) against its composed one (grad
 * mode on), y's gradient only; with and without weight and bias. */
TEST(layer_norm_fused_backward_matches_composed)
{
    tc_tensor *x = R(3, SZ(4, 3, 5), -2, 2), *w = R(2, SZ(3, 5), 0.5, 1.5), *b = R(2, SZ(3, 5), -1, 1);
    tc_tensor *g = R(3, SZ(4, 3, 5), -1, 1);
    for (int affine = 0; affine < 2; affine++) {
        const tc_tensor *in[3] = {x, affine ? w : NULL, affine ? b : NULL}, *gout[2] = {g, NULL};
        tc_tensor *fused[3] = {0}, *comp[3] = {0};
        for (int mode = 0; mode < 2; mode++) {
            int was = tc_set_grad_enabled(mode);
            CHECK_OK(gc_run_rule(TC_OP_LAYER_NORM, in, 3, P(.s = {1e-5}, .i = {2}), gout, NULL, mode ? comp : fused));
            tc_set_grad_enabled(was);
        }
        for (int i = 0; i < 3; i++) {
            CHECK(!fused[i] == !in[i] && !comp[i] == !in[i]);
            if (in[i]) CHECK(ct_close_all(ct_keep(fused[i]), ct_keep(comp[i]), 1e-11));
            if (fused[i]) CHECK(ct_shape_is(fused[i], in[i]->ndim, in[i]->size));
        }
    }
    ct_drop();
}

TEST(layer_norm_rule_gradcheck)
{
    /* GC weights both results, so this checks the composed form with stats' gradient too */
    tc_tensor *x = R(2, SZ(3, 5), -2, 2), *w = R(1, SZ(5), 0.5, 1.5), *b = R(1, SZ(5), -1, 1);
    GC(LAYER_NORM, P(.s = {1e-5}, .i = {1}), x, w, b);
    tc_tensor *x3 = R(3, SZ(2, 3, 4), -2, 2), *w2 = R(2, SZ(3, 4), 0.5, 1.5), *b2 = R(2, SZ(3, 4), -1, 1);
    GC(LAYER_NORM, P(.s = {1e-3}, .i = {2}), x3, w2, b2);
    tc_tensor *xt = ct_keep(ct_transposed(R(2, SZ(5, 3), -2, 2), 0, 1)); /* a strided x (3,5) */
    GC(LAYER_NORM, P(.s = {1e-5}, .i = {1}), xt, w, b);
    ct_drop();
}

TEST(layer_norm_empty_sizes)
{
    /* no row: empty y and stats; the weight sums of no rows are zeros */
    tc_tensor *x = R(2, SZ(0, 4), -1, 1), *w = R(1, SZ(4), 0.5, 1.5), *b = R(1, SZ(4), -1, 1), *y = NULL, *stats;
    ln(x, w, b, 1, 1e-5, &y, &stats);
    CHECK(ct_shape_is(y, 2, SZ(0, 4)) && ct_shape_is(stats, 2, SZ(2, 0)));
    tc_tensor *gx, *gwb;
    ln_bw(x, x, w, stats, 1, &gx, &gwb);
    CHECK(ct_shape_is(gx, 2, SZ(0, 4)) && ct_shape_is(gwb, 2, SZ(2, 4)));
    for (int64_t i = 0; gwb && i < 8; i++) CHECK(ct_at(gwb, i) == 0);
    /* one value per row: y is the bias (x - mean = 0) */
    tc_tensor *x1 = R(2, SZ(3, 1), -1, 1), *w1 = R(1, SZ(1), 0.5, 1.5), *b1 = R(1, SZ(1), -1, 1), *y1 = NULL, *s1;
    ln(x1, w1, b1, 1, 1e-5, &y1, &s1);
    for (int64_t r = 0; y1 && r < 3; r++) CHECK(ct_at(y1, r) == ct_at(b1, 0));
    ct_drop();
}

TEST(layer_norm_bad_input)
{
    tc_tensor *x = R(2, SZ(3, 4), -1, 1), *w = R(1, SZ(4), 0.5, 1.5), *b = R(1, SZ(4), -1, 1), *out[2] = {NULL, NULL};
    tc_tensor *w5 = R(1, SZ(5), 0.5, 1.5), *w34 = R(2, SZ(3, 4), 0.5, 1.5), *wf = as(w, TC_F32), *x0 = R(2, SZ(3, 0), 0, 1);
    tc_tensor *xi = as(x, TC_I32), *xh = as(x, TC_F16), *wh = as(w, TC_F16);
#define LN(a, ww, bb, pp) tc_op_run(TC_OP_LAYER_NORM, (const tc_tensor *const[]){a, ww, bb}, 3, pp, out, 2)
    CHECK_ERR(LN(x, w, b, P(.s = {1e-5}, .i = {0})), TC_ERR_ARG,
              "layer_norm: normalised dims (i0 = 0) must be 1 to the 2 dims of input (3,4)");
    CHECK_ERR(LN(x, w, b, P(.s = {1e-5}, .i = {3})), TC_ERR_ARG, "(i0 = 3) must be 1 to the 2 dims");
    CHECK_ERR(LN(x, w5, b, P(.s = {1e-5}, .i = {1})), TC_ERR_SHAPE,
              "layer_norm: weight (5) must have the last 1 sizes of input (3,4)");
    CHECK_ERR(LN(x, w, w34, P(.s = {1e-5}, .i = {1})), TC_ERR_SHAPE, "layer_norm: bias (3,4) must have the last 1 sizes");
    CHECK_ERR(LN(x, wf, b, P(.s = {1e-5}, .i = {1})), TC_ERR_DTYPE, "layer_norm: weight is float32 but input (3,4) is float64");
    CHECK_ERR(LN(xh, as(w, TC_F32), wh, P(.s = {1e-5}, .i = {1})), TC_ERR_DTYPE,
              "layer_norm: bias is float16 but weight is float32");
    CHECK_ERR(LN(x, w, b, P(.s = {-1}, .i = {1})), TC_ERR_ARG, "layer_norm: eps must be a number >= 0, got -1");
    CHECK_ERR(LN(x, w, b, P(.s = {NAN}, .i = {1})), TC_ERR_ARG, "eps must be a number >= 0");
    CHECK_ERR(LN(x0, NULL, NULL, P(.s = {1e-5}, .i = {1})), TC_ERR_SHAPE,
              "layer_norm: normalising 1 dims of input (3,0) leaves rows with no values");
    CHECK_ERR(LN(xi, NULL, NULL, P(.s = {1e-5}, .i = {1})), TC_ERR_DTYPE, "layer_norm");
    CHECK_ERR(LN(NULL, w, b, P(.s = {1e-5}, .i = {1})), TC_ERR_ARG, "layer_norm: input 1 is NULL");
    CHECK(out[0] == NULL && out[1] == NULL);
    tc_tensor *y = NULL, *stats;
    ln(x, w, b, 1, 1e-5, &y, &stats);
    tc_tensor *sf = as(stats, TC_F32), *s4 = R(2, SZ(2, 4), 0, 1), *g43 = R(2, SZ(4, 3), 0, 1), *gf = as(x, TC_F32);
#define LNB(g, xx, ww, st) \
    tc_op_run(TC_OP_LAYER_NORM_BACKWARD, (const tc_tensor *const[]){g, xx, ww, st}, 4, P(.s = {1e-5}, .i = {1}), out, 2)
    CHECK_ERR(LNB(g43, x, w, stats), TC_ERR_SHAPE, "layer_norm_backward: gradOutput (4,3) must have the size of input (3,4)");
    CHECK_ERR(LNB(gf, x, w, stats), TC_ERR_DTYPE, "layer_norm_backward: gradOutput is float32 but input is float64");
    CHECK_ERR(LNB(x, x, w, s4), TC_ERR_SHAPE,
              "layer_norm_backward: stats (2,4) must be (2,3) (mean and rstd of the rows of input (3,4))");
    CHECK_ERR(LNB(x, x, w, sf), TC_ERR_DTYPE, "layer_norm_backward: stats are float32, expected float64 for a float64 input");
    CHECK_ERR(LNB(x, x, w5, stats), TC_ERR_SHAPE, "layer_norm_backward: weight (5) must have the last 1 sizes");
    CHECK_ERR(LNB(x, x, w, NULL), TC_ERR_ARG, "layer_norm_backward: stats (input 4) is NULL");
    CHECK(out[0] == NULL && out[1] == NULL);
#undef LN
#undef LNB
    ct_drop();
}
