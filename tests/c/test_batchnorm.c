/* test_batchnorm.c -- batch_norm and batch_norm_backward (core/cpu/batchnorm.c, shape_bn.c,
 * the rule in rules_nn.c): float64 finite-difference checks of the rule in training and
 * evaluation for 2-D to 5-D inputs (the stats output included), the fused backward against
 * the rule's composed form (create_graph) and a missing weight against ones, strided and
 * in-place operands, thread-count independence, half precision, and bad input.
 * (PyTorch goldens for both ops are in tests/golden/ops.golden.) */
#include "ctest.h"
#include "gradcheck.h"
#include "internal.h"
#include <math.h>

static uint64_t seed = 901;
static tc_tensor *R(int nd, const int64_t *sz, double lo, double hi)
{
    return ct_keep(gc_rand(TC_F64, nd, sz, lo, hi, seed++));
}

/* batch_norm's two results (kept), or NULLs with the error printed. */
static void bn(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b, const tc_tensor *rm, const tc_tensor *rv,
               int train, double eps, tc_tensor **y, tc_tensor **stats)
{
    const tc_tensor *in[5] = {x, w, b, rm, rv};
    tc_tensor *out[2] = {NULL, NULL};
    if (tc_op_run(TC_OP_BATCH_NORM, in, 5, P(.s = {eps}, .i = {train}), out, 2))
        printf("  batch_norm failed: %s\n", tc_last_error());
    *y = ct_keep(out[0]), *stats = ct_keep(out[1]);
}

TEST(bn_rule_gradcheck)
{
    static const int64_t shapes[4][5] = {{5, 3}, {2, 3, 5}, {2, 2, 3, 4}, {2, 2, 2, 2, 3}};
    for (int s = 0; s < 4; s++) {
        int nd = s + 2;
        int64_t C = shapes[s][1];
        tc_tensor *x = R(nd, shapes[s], -2, 2), *w = R(1, SZ(C), 0.5, 1.5), *b = R(1, SZ(C), -1, 1);
        tc_tensor *rm = R(1, SZ(C), -0.5, 0.5), *rv = R(1, SZ(C), 0.5, 2);
        /* grad mode off: the rule's fused path (batch_norm_backward), on: its composed form */
        for (int mode = 0; mode < 2; mode++) {
            int was = tc_set_grad_enabled(mode);
            for (int train = 0; train < 2; train++) GC(BATCH_NORM, P(.s = {1e-3}, .i = {train}), x, w, b, rm, rv);
            tc_set_grad_enabled(was);
        }
    }
    /* a strided input */
    tc_tensor *xt = ct_keep(ct_transposed(R(3, SZ(4, 5, 3), -2, 2), 1, 2)), *w = R(1, SZ(3), 0.5, 1.5);
    tc_tensor *b = R(1, SZ(3), -1, 1), *rm = R(1, SZ(3), -0.5, 0.5), *rv = R(1, SZ(3), 0.5, 2);
    int was = tc_set_grad_enabled(0);
    GC(BATCH_NORM, P(.s = {1e-5}, .i = {1}), xt, w, b, rm, rv);
    tc_set_grad_enabled(was);
    GC(BATCH_NORM, P(.s = {1e-5}, .i = {1}), xt, w, b, rm, rv);
    ct_drop();
}

/* Gradients of sum(y * G) for x, w, b through the engine; create_graph selects the rule's
 * composed form. w, b may be NULL. */
static bool engine_grads(const tc_tensor *x0, const tc_tensor *w0, const tc_tensor *b0, const tc_tensor *rm,
                         const tc_tensor *rv, int train, const tc_tensor *G, int create, tc_tensor **g)
{
    tc_tensor *x = NULL, *w = NULL, *b = NULL;
    tc_params cp = {.i = {-1}};
    tc_op_run(TC_OP_COPY, &x0, 1, &cp, &x, 1);
    if (w0) tc_op_run(TC_OP_COPY, &w0, 1, &cp, &w, 1);
    if (b0) tc_op_run(TC_OP_COPY, &b0, 1, &cp, &b, 1);
    ct_keep(x), ct_keep(w), ct_keep(b);
    tc_tensor_set_requires_grad(x, 1);
    if (w) tc_tensor_set_requires_grad(w, 1);
    if (b) tc_tensor_set_requires_grad(b, 1);
    tc_tensor *y, *stats;
    bn(x, w, b, rm, rv, train, 1e-5, &y, &stats);
    const tc_tensor *ins[3] = {x, w ? w : x, b ? b : x};
    int n = w ? 3 : 1;
    tc_tensor *res[3] = {NULL, NULL, NULL};
    tc_status s = y ? tc_autograd_grad((const tc_tensor *const[]){y}, &G, 1, ins, n, 0, create, 0, res) : TC_ERR_ARG;
    if (s) printf("  grad failed: %s\n", tc_last_error());
    for (int i = 0; i < 3; i++) g[i] = ct_keep(res[i]);
    return s == TC_OK;
}

TEST(bn_fused_matches_composed)
{
    for (int train = 0; train < 2; train++) {
        tc_tensor *x = R(4, SZ(3, 4, 5, 2), -2, 2), *w = R(1, SZ(4), 0.5, 1.5), *b = R(1, SZ(4), -1, 1);
        tc_tensor *rm = R(1, SZ(4), -0.5, 0.5), *rv = R(1, SZ(4), 0.5, 2), *G = R(4, SZ(3, 4, 5, 2), -1, 1);
        tc_tensor *ga[3], *gb[3], *gn[3], *ones = NULL;
        CHECK(engine_grads(x, w, b, rm, rv, train, G, 0, ga));
        CHECK(engine_grads(x, w, b, rm, rv, train, G, 1, gb));
        for (int i = 0; i < 3; i++) CHECK(ct_close_all(ga[i], gb[i], 1e-10));
        /* no weight and bias: as weight ones (and the x gradient alone) */
        tc_tensor_new(TC_F64, 1, SZ(4), &ones);
        ct_keep(ones);
        tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {1}), &ones, 1);
        CHECK(engine_grads(x, NULL, NULL, rm, rv, train, G, 0, gn));
        CHECK(engine_grads(x, ones, NULL, rm, rv, train, G, 0, ga));
        CHECK(ct_close_all(gn[0], ga[0], 1e-12));
        CHECK(engine_grads(x, NULL, NULL, rm, rv, train, G, 1, gb));
        CHECK(ct_close_all(gn[0], gb[0], 1e-10));
    }
    ct_drop();
}

TEST(bn_forward_layouts_threads_half)
{
    /* (N, C) columns path with more channels than one block, and the channel path */
    static const int64_t shapes[2][4] = {{9, 130}, {4, 3, 40, 7}};
    for (int s = 0; s < 2; s++) {
        int nd = s == 0 ? 2 : 4;
        int64_t C = shapes[s][1];
        tc_tensor *x = R(nd, shapes[s], -3, 3), *w = R(1, SZ(C), 0.5, 1.5), *b = R(1, SZ(C), -1, 1);
        tc_tensor *y1, *s1, *y2, *s2;
        int nt = tc_get_num_threads();
        tc_set_num_threads(1);
        bn(x, w, b, NULL, NULL, 1, 1e-5, &y1, &s1);
        tc_set_num_threads(nt > 1 ? nt : 4);
        bn(x, w, b, NULL, NULL, 1, 1e-5, &y2, &s2);
        tc_set_num_threads(nt);
        CHECK(ct_close_all(y1, y2, 0) && ct_close_all(s1, s2, 0));
        /* y has zero mean and unit biased variance per channel (weight 1, bias 0) */
        tc_tensor *yn, *sn;
        bn(x, NULL, NULL, NULL, NULL, 1, 0, &yn, &sn);
        int64_t N = shapes[s][0], S = tc_tensor_numel(x) / (N * C);
        for (int64_t c = 0; c < C && yn; c++) {
            double m = 0, q = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) {
                    double v = ct_at(yn, (n * C + c) * S + i);
                    m += v, q += v * v;
                }
            CHECK_NEAR(m / (double)(N * S), 0, 1e-12);
            CHECK_NEAR(q / (double)(N * S), 1, 1e-10);
        }
        /* in place: y written over x */
        tc_tensor *xc = NULL, *out[2] = {NULL, NULL};
        tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {-1}), &xc, 1);
        ct_keep(xc);
        out[0] = xc;
        CHECK_OK(tc_op_run(TC_OP_BATCH_NORM, (const tc_tensor *const[]){xc, w, b, NULL, NULL}, 5,
                           P(.s = {1e-5}, .i = {1}), out, 2));
        ct_keep(out[1]);
        CHECK(out[0] == xc && ct_close_all(xc, y1, 0));
        /* half input with float32 weight: f32 statistics, close to the float64 result */
        tc_tensor *xh = NULL, *wf = NULL, *bf = NULL, *yh, *sh;
        tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {TC_F16}), &xh, 1);
        tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){w}, 1, P(.i = {TC_F32}), &wf, 1);
        tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){b}, 1, P(.i = {TC_F32}), &bf, 1);
        ct_keep(xh), ct_keep(wf), ct_keep(bf);
        bn(xh, wf, bf, NULL, NULL, 1, 1e-5, &yh, &sh);
        CHECK(yh && yh->dtype == TC_F16 && sh && sh->dtype == TC_F32);
        CHECK(ct_close_all(yh, y1, 5e-3));
    }
    ct_drop();
}

TEST(bn_bad_input)
{
    tc_tensor *x = R(3, SZ(2, 3, 4), -1, 1), *c3 = R(1, SZ(3), 0.5, 1), *c4 = R(1, SZ(4), 0.5, 1);
    tc_tensor *v = R(1, SZ(6), 0, 1), *st = R(2, SZ(2, 3), 0.5, 1), *out[2] = {NULL, NULL};
    tc_tensor *xf = NULL;
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, P(.i = {TC_F32}), &xf, 1);
    ct_keep(xf);
#define BN(a, w, b, rm, rv, pp) tc_op_run(TC_OP_BATCH_NORM, (const tc_tensor *const[]){a, w, b, rm, rv}, 5, pp, out, 2)
    CHECK_ERR(BN(v, NULL, NULL, NULL, NULL, P(.i = {1})), TC_ERR_SHAPE,
              "batch_norm: input must be 2-D to 5-D (N,C,...), got (6)");
    CHECK_ERR(BN(x, c4, NULL, NULL, NULL, P(.i = {1})), TC_ERR_SHAPE,
              "batch_norm: weight (4) must be 1-D of size 3 (the channels of input (2,3,4))");
    CHECK_ERR(BN(x, c3, c4, NULL, NULL, P(.i = {1})), TC_ERR_SHAPE, "batch_norm: bias (4) must be 1-D of size 3");
    CHECK_ERR(BN(x, NULL, NULL, c3, NULL, P(.i = {0})), TC_ERR_ARG,
              "batch_norm: evaluation (i0 = 0) needs running_mean and running_var");
    CHECK_ERR(BN(x, NULL, NULL, c3, st, P(.i = {0})), TC_ERR_SHAPE, "batch_norm: running_var (2,3) must be 1-D");
    CHECK_ERR(BN(x, NULL, NULL, NULL, NULL, P(.s = {-1}, .i = {1})), TC_ERR_ARG,
              "batch_norm: eps must be a number >= 0");
    CHECK_ERR(BN(xf, c3, NULL, NULL, NULL, P(.i = {1})), TC_ERR_DTYPE,
              "batch_norm: weight is float64 but input (2,3,4) is float32");
    tc_tensor *empty = NULL;
    tc_tensor_new(TC_F64, 3, SZ(0, 3, 4), &empty);
    ct_keep(empty);
    CHECK_ERR(BN(empty, NULL, NULL, NULL, NULL, P(.i = {1})), TC_ERR_SHAPE,
              "batch_norm: training needs at least one value per channel, got input (0,3,4)");
    CHECK_OK(BN(empty, NULL, NULL, c3, c3, P(.i = {0}))); /* evaluation of an empty batch is fine */
    CHECK(ct_shape_is(out[0], 3, SZ(0, 3, 4)));
    ct_keep(out[0]), ct_keep(out[1]);
    out[0] = out[1] = NULL;
#define BNB(g, a, w, s)                                                                                          \
    tc_op_run(TC_OP_BATCH_NORM_BACKWARD, (const tc_tensor *const[]){g, a, w, s}, 4, P(.i = {1}), out, 2)
    CHECK_ERR(BNB(c3, x, NULL, st), TC_ERR_SHAPE,
              "batch_norm_backward: gradOutput (3) must have the size of input (2,3,4)");
    CHECK_ERR(BNB(x, x, NULL, c3), TC_ERR_SHAPE,
              "batch_norm_backward: stats (3) must be (2,3) (mean and invstd of the channels of input (2,3,4))");
    CHECK_ERR(BNB(x, x, NULL, NULL), TC_ERR_ARG, "batch_norm_backward: stats (input 4) is NULL");
    CHECK_ERR(BNB(xf, x, NULL, st), TC_ERR_DTYPE, "batch_norm_backward: gradOutput is float32 but input is float64");
    CHECK_ERR(tc_op_run(TC_OP_BATCH_NORM_BACKWARD, (const tc_tensor *const[]){x, x, NULL, st}, 4,
                        P(.s = {-1}, .i = {1}), out, 2),
              TC_ERR_ARG, "batch_norm_backward: eps must be a number >= 0, got -1");
    CHECK(out[0] == NULL && out[1] == NULL);
#undef BN
#undef BNB
    ct_drop();
}
