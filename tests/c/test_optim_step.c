/* test_optim_step.c -- the optimizer step ops adam_step, sgd_step, rmsprop_step,
 * adagrad_step, adamax_step and adadelta_step (core/cpu/optim.c, shape_optim.c): in float32 and float64 each gives the bits
 * of the composed update (the tensor ops lua/optim runs with fused = false: lerp, mul,
 * addcmul, sqrt, add, addcdiv), on
 * sizes that take the threaded path too; in place (x and the state as the out slots) and
 * into new tensors, which leave the inputs alone; strided operands; half precision against
 * a float64 loop; bad input, after which nothing has changed. (PyTorch goldens for the ops
 * are in tests/golden/ops.golden; the device twin is in test_cuda_device.c.) */
#include "ctest.h"
#include "gradcheck.h"
#include "internal.h"
#include <math.h>

static uint64_t seed = 9401;
static tc_tensor *R(int dt, int nd, const int64_t *sz, double lo, double hi)
{
    tc_tensor *t = gc_rand(TC_F64, nd, sz, lo, hi, seed++), *r = NULL;
    if (dt == TC_F64) return ct_keep(t);
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){t}, 1, P(.i = {dt}), &r, 1);
    tc_tensor_release(t);
    return ct_keep(r);
}

static tc_tensor *num(int dt, double v) { return ct_keep(ct_from((tc_dtype)dt, 0, NULL, VALS(v))); }

static tc_tensor *op(tc_op o, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, const tc_params *p)
{
    tc_tensor *r = NULL;
    if (ct_run1(o, a, b, c, p, &r)) printf("  %s failed: %s\n", tc_op_info(o)->name, tc_last_error());
    return ct_keep(r);
}

static tc_tensor *clone(const tc_tensor *t)
{
    tc_tensor *r = NULL;
    tc_op_run(TC_OP_COPY, &t, 1, P(.i = {-1}), &r, 1);
    return ct_keep(r);
}

static tc_tensor *row(const tc_tensor *st, int64_t r)
{
    tc_tensor *v = NULL;
    tc_op_run(TC_OP_SELECT, &st, 1, P(.i = {0, r}), &v, 1);
    return ct_keep(v);
}

/* The composed Adam update (lua/optim/adam.lua with fused = false) of copies of x and the
 * state rows: x2, m1, v1 and vmax1 (amsgrad). */
static void adam_composed(const tc_tensor *x, const tc_tensor *g, const tc_tensor *st, const double *sc, double b1,
                          double b2, bool ams, tc_tensor **res)
{
    int dt = x->dtype;
    const tc_tensor *d = g, *xk = x;
    if (sc[3] != 0) d = op(TC_OP_ADD, g, x, NULL, P(.s = {sc[3]}));
    if (sc[2] != 1) xk = op(TC_OP_MUL, x, num(dt, sc[2]), NULL, NULL);
    tc_tensor *m1 = op(TC_OP_LERP, row(st, 0), d, num(dt, 1 - b1), NULL);
    tc_tensor *v1 = op(TC_OP_ADDCMUL, op(TC_OP_MUL, row(st, 1), num(dt, b2), NULL, NULL), d, d, P(.s = {1 - b2}));
    tc_tensor *src = ams ? op(TC_OP_MAXIMUM, row(st, 2), v1, NULL, NULL) : v1;
    tc_tensor *den = op(TC_OP_ADD, op(TC_OP_SQRT, src, NULL, NULL, NULL), num(dt, sc[1]), NULL, P(.s = {1}));
    tc_tensor *step = op(TC_OP_MUL, m1, num(dt, sc[0]), NULL, NULL);
    res[0] = op(TC_OP_ADDCDIV, xk, step, den, P(.s = {1}));
    res[1] = m1, res[2] = v1, res[3] = ams ? src : NULL;
}

/* The composed SGD update (lua/optim/sgd.lua after its first step): x2, buf1. */
static void sgd_composed(const tc_tensor *x, const tc_tensor *g, const tc_tensor *buf, const double *sc, double mom,
                         double damp, bool nesterov, tc_tensor **res)
{
    int dt = x->dtype;
    const tc_tensor *d = sc[1] != 0 ? op(TC_OP_ADD, g, x, NULL, P(.s = {sc[1]})) : g;
    tc_tensor *b1 = damp == 0 ? op(TC_OP_ADD, d, buf, NULL, P(.s = {mom}))
                              : op(TC_OP_ADD, op(TC_OP_MUL, buf, num(dt, mom), NULL, NULL), d, NULL, P(.s = {1 - damp}));
    const tc_tensor *step = nesterov ? op(TC_OP_ADD, d, b1, NULL, P(.s = {mom})) : b1;
    res[0] = op(TC_OP_ADDCMUL, x, num(dt, sc[0]), step, P(.s = {1}));
    res[1] = b1;
}

/* The composed RMSprop update (lua/optim/rmsprop.lua with fused = false) of copies of x and
 * the state rows sq, ga (centered), buf (momentum): x2 and the new rows. */
static void rmsprop_composed(const tc_tensor *x, const tc_tensor *g, const tc_tensor *st, const double *sc,
                             double alpha, double mom, bool centered, tc_tensor **res)
{
    int dt = x->dtype;
    const tc_tensor *d = sc[2] != 0 ? op(TC_OP_ADD, g, x, NULL, P(.s = {sc[2]})) : g;
    tc_tensor *sq = op(TC_OP_ADDCMUL, op(TC_OP_MUL, row(st, 0), num(dt, alpha), NULL, NULL), d, d, P(.s = {1 - alpha}));
    tc_tensor *den = sq;
    int r = 1;
    res[1] = sq, res[2] = res[3] = NULL;
    if (centered) {
        tc_tensor *ga = op(TC_OP_ADD, op(TC_OP_MUL, row(st, 1), num(dt, alpha), NULL, NULL), d, NULL, P(.s = {1 - alpha}));
        den = op(TC_OP_ADDCMUL, den, ga, ga, P(.s = {-1}));
        res[1 + r++] = ga;
    }
    den = op(TC_OP_ADD, op(TC_OP_SQRT, den, NULL, NULL, NULL), num(dt, sc[1]), NULL, P(.s = {1}));
    if (mom > 0) {
        tc_tensor *buf = op(TC_OP_ADDCDIV, op(TC_OP_MUL, row(st, r), num(dt, mom), NULL, NULL), d, den, P(.s = {1}));
        res[0] = op(TC_OP_ADDCMUL, x, num(dt, sc[0]), buf, P(.s = {1}));
        res[1 + r] = buf;
    } else {
        res[0] = op(TC_OP_ADDCDIV, x, op(TC_OP_MUL, d, num(dt, sc[0]), NULL, NULL), den, P(.s = {1}));
    }
}

/* The composed Adagrad update (lua/optim/adagrad.lua with fused = false): x2, sum1. */
static void adagrad_composed(const tc_tensor *x, const tc_tensor *g, const tc_tensor *sum, const double *sc,
                             tc_tensor **res)
{
    int dt = x->dtype;
    const tc_tensor *d = sc[2] != 0 ? op(TC_OP_ADD, g, x, NULL, P(.s = {sc[2]})) : g;
    res[1] = op(TC_OP_ADDCMUL, sum, d, d, P(.s = {1}));
    tc_tensor *den = op(TC_OP_ADD, op(TC_OP_SQRT, res[1], NULL, NULL, NULL), num(dt, sc[1]), NULL, P(.s = {1}));
    res[0] = op(TC_OP_ADDCDIV, x, op(TC_OP_MUL, d, num(dt, sc[0]), NULL, NULL), den, P(.s = {1}));
}

/* The composed Adamax update (lua/optim/adam.lua's adamax with fused = false): x2, m1, u1. */
static void adamax_composed(const tc_tensor *x, const tc_tensor *g, const tc_tensor *st, const double *sc, double b1,
                            double b2, tc_tensor **res)
{
    int dt = x->dtype;
    const tc_tensor *d = sc[2] != 0 ? op(TC_OP_ADD, g, x, NULL, P(.s = {sc[2]})) : g;
    res[1] = op(TC_OP_ADD, op(TC_OP_MUL, row(st, 0), num(dt, b1), NULL, NULL), d, NULL, P(.s = {1 - b1}));
    tc_tensor *t = op(TC_OP_ADD, op(TC_OP_ABS, d, NULL, NULL, NULL), num(dt, sc[1]), NULL, P(.s = {1}));
    res[2] = op(TC_OP_MAXIMUM, op(TC_OP_MUL, row(st, 1), num(dt, b2), NULL, NULL), t, NULL, NULL);
    res[0] = op(TC_OP_ADDCDIV, x, op(TC_OP_MUL, res[1], num(dt, sc[0]), NULL, NULL), res[2], P(.s = {1}));
}

/* The composed Adadelta update (lua/optim/adagrad.lua's adadelta with fused = false): x2,
 * sq1, acc1. */
static void adadelta_composed(const tc_tensor *x, const tc_tensor *g, const tc_tensor *st, const double *sc,
                              double rho, tc_tensor **res)
{
    int dt = x->dtype;
    const tc_tensor *d = sc[2] != 0 ? op(TC_OP_ADD, g, x, NULL, P(.s = {sc[2]})) : g;
    const tc_tensor *eps = num(dt, sc[1]), *r = num(dt, rho);
    res[1] = op(TC_OP_ADDCMUL, op(TC_OP_MUL, row(st, 0), r, NULL, NULL), d, d, P(.s = {1 - rho}));
    tc_tensor *std = op(TC_OP_SQRT, op(TC_OP_ADD, res[1], eps, NULL, P(.s = {1})), NULL, NULL, NULL);
    tc_tensor *delta = op(TC_OP_SQRT, op(TC_OP_ADD, row(st, 1), eps, NULL, P(.s = {1})), NULL, NULL, NULL);
    delta = op(TC_OP_MUL, op(TC_OP_DIV, delta, std, NULL, NULL), d, NULL, NULL);
    res[0] = op(TC_OP_ADDCMUL, x, num(dt, sc[0]), delta, P(.s = {1}));
    res[2] = op(TC_OP_ADDCMUL, op(TC_OP_MUL, row(st, 1), r, NULL, NULL), delta, delta, P(.s = {1 - rho}));
}

static tc_tensor *scal(int n, const double *v) { return ct_keep(ct_from(TC_F64, 1, SZ(n), v)); }

/* runs the op with out slots o0, o1 (NULL: new results, kept) */
static tc_status step(tc_op o, const tc_tensor *x, const tc_tensor *g, const tc_tensor *st, const tc_tensor *sc,
                      const tc_params *p, tc_tensor **o0, tc_tensor **o1)
{
    tc_tensor *res[2] = {*o0, *o1};
    bool fresh0 = !*o0, fresh1 = !*o1;
    tc_status s = tc_op_run(o, (const tc_tensor *const[]){x, g, st, sc}, 4, p, res, 2);
    if (!s && fresh0) ct_keep(res[0]);
    if (!s && fresh1) ct_keep(res[1]);
    *o0 = res[0], *o1 = res[1];
    return s;
}

TEST(adam_step_gives_the_composed_bits)
{
    static const struct { double sc[4], b1, b2; bool ams; } cfg[] = {
        {{-0.01, 1e-8, 1, 0}, 0.9, 0.999, false},    /* Adam */
        {{-0.02, 3e-7, 1, 0.1}, 0.8, 0.99, false},   /* Adam's decay through the gradient */
        {{-0.01, 1e-8, 0.999, 0}, 0.9, 0.999, false}, /* AdamW */
        {{-0.05, 1e-6, 0.99, 0}, 0.9, 0.95, true},   /* AdamW, amsgrad */
        {{-0.05, 1e-6, 1, 0.01}, 0.5, 0.9, true},    /* Adam, amsgrad */
    };
    for (int dt = TC_F32; dt <= TC_F64; dt++)
        for (int64_t n = 7; n <= 100003; n += 99996) /* 100003: several threads' ranges */
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                int K = cfg[c].ams ? 3 : 2;
                tc_tensor *x = R(dt, 1, SZ(n), -2, 2), *g = R(dt, 1, SZ(n), -2, 2), *st = R(dt, 2, SZ(K, n), 0, 0.5);
                tc_tensor *want[4];
                adam_composed(x, g, st, cfg[c].sc, cfg[c].b1, cfg[c].b2, cfg[c].ams, want);
                const tc_params p = {.s = {cfg[c].b1, cfg[c].b2}, .i = {cfg[c].ams}};
                tc_tensor *x2 = clone(x), *st2 = clone(st), *o0 = x2, *o1 = st2;
                CHECK_OK(step(TC_OP_ADAM_STEP, x2, g, st2, scal(4, cfg[c].sc), &p, &o0, &o1));
                CHECK(o0 == x2 && o1 == st2);
                bool same = ct_close_all(x2, want[0], 0);
                for (int r = 0; r < K; r++) same = same && ct_close_all(row(st2, r), want[1 + r], 0);
                if (!same) printf("  adam_step %s n %lld config %zu\n", tc_dtype_name((tc_dtype)dt), (long long)n, c);
                CHECK(same);
                ct_drop();
            }
}

TEST(sgd_step_gives_the_composed_bits)
{
    static const struct { double sc[2], mom, damp; bool nesterov; } cfg[] = {
        {{-0.1, 0}, 0.9, 0, false}, {{-0.05, 1e-2}, 0.9, 0, true}, {{-0.1, 1e-3}, 0.5, 0.3, false},
        {{-0.1, 0}, 0.9, 0.9, false}, /* Torch7's default dampening = momentum */
    };
    for (int dt = TC_F32; dt <= TC_F64; dt++)
        for (int64_t n = 5; n <= 100005; n += 100000)
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                tc_tensor *x = R(dt, 1, SZ(n), -2, 2), *g = R(dt, 1, SZ(n), -2, 2), *buf = R(dt, 1, SZ(n), -1, 1);
                tc_tensor *want[2];
                sgd_composed(x, g, buf, cfg[c].sc, cfg[c].mom, cfg[c].damp, cfg[c].nesterov, want);
                const tc_params p = {.s = {cfg[c].mom, cfg[c].damp}, .i = {cfg[c].nesterov}};
                tc_tensor *x2 = clone(x), *b2 = clone(buf), *o0 = x2, *o1 = b2;
                CHECK_OK(step(TC_OP_SGD_STEP, x2, g, b2, scal(2, cfg[c].sc), &p, &o0, &o1));
                bool same = ct_close_all(x2, want[0], 0) && ct_close_all(b2, want[1], 0);
                if (!same) printf("  sgd_step %s n %lld config %zu\n", tc_dtype_name((tc_dtype)dt), (long long)n, c);
                CHECK(same);
                ct_drop();
            }
}

TEST(rmsprop_step_gives_the_composed_bits)
{
    static const struct { double sc[3], alpha, mom; bool centered; } cfg[] = {
        {{-0.01, 1e-8, 0}, 0.99, 0, false},      /* PyTorch's defaults */
        {{-0.02, 1e-6, 0.1}, 0.9, 0, true},      /* decay, centered */
        {{-0.01, 1e-8, 0}, 0.99, 0.9, false},    /* momentum */
        {{-0.05, 1e-8, 1e-2}, 0.8, 0.5, true},   /* all three rows */
    };
    for (int dt = TC_F32; dt <= TC_F64; dt++)
        for (int64_t n = 7; n <= 100003; n += 99996)
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                int K = 1 + cfg[c].centered + (cfg[c].mom > 0);
                tc_tensor *x = R(dt, 1, SZ(n), -2, 2), *g = R(dt, 1, SZ(n), -2, 2), *st = R(dt, 2, SZ(K, n), 0.3, 0.6);
                if (cfg[c].centered) { /* ga in [-0.5, 0.5]: ga^2 stays below sq, as in a real run */
                    tc_tensor *ga = row(st, 1), *src = R(dt, 1, SZ(n), -0.5, 0.5), *o = ga;
                    CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){src}, 1, P(.i = {-1}), &o, 1));
                }
                tc_tensor *want[4];
                rmsprop_composed(x, g, st, cfg[c].sc, cfg[c].alpha, cfg[c].mom, cfg[c].centered, want);
                const tc_params p = {.s = {cfg[c].alpha, cfg[c].mom}, .i = {cfg[c].centered}};
                tc_tensor *x2 = clone(x), *st2 = clone(st), *o0 = x2, *o1 = st2;
                CHECK_OK(step(TC_OP_RMSPROP_STEP, x2, g, st2, scal(3, cfg[c].sc), &p, &o0, &o1));
                CHECK(o0 == x2 && o1 == st2);
                bool same = ct_close_all(x2, want[0], 0);
                for (int r = 0; r < K; r++) same = same && ct_close_all(row(st2, r), want[1 + r], 0);
                if (!same) printf("  rmsprop_step %s n %lld config %zu\n", tc_dtype_name((tc_dtype)dt), (long long)n, c);
                CHECK(same);
                ct_drop();
            }
}

TEST(adagrad_step_gives_the_composed_bits)
{
    static const double cfg[][3] = {{-0.01, 1e-10, 0}, {-0.05, 1e-6, 0.1}};
    for (int dt = TC_F32; dt <= TC_F64; dt++)
        for (int64_t n = 5; n <= 100005; n += 100000)
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                tc_tensor *x = R(dt, 1, SZ(n), -2, 2), *g = R(dt, 1, SZ(n), -2, 2), *sum = R(dt, 1, SZ(n), 0, 2);
                tc_tensor *want[2];
                adagrad_composed(x, g, sum, cfg[c], want);
                tc_tensor *x2 = clone(x), *s2 = clone(sum), *o0 = x2, *o1 = s2;
                CHECK_OK(step(TC_OP_ADAGRAD_STEP, x2, g, s2, scal(3, cfg[c]), NULL, &o0, &o1));
                bool same = ct_close_all(x2, want[0], 0) && ct_close_all(s2, want[1], 0);
                if (!same) printf("  adagrad_step %s n %lld config %zu\n", tc_dtype_name((tc_dtype)dt), (long long)n, c);
                CHECK(same);
                ct_drop();
            }
}

/* Adamax (s0, s1 = beta1, beta2) and Adadelta (s0 = rho): state (2, n) in place. */
TEST(adamax_and_adadelta_steps_give_the_composed_bits)
{
    static const struct { tc_op op; double sc[3], a, b; } cfg[] = {
        {TC_OP_ADAMAX_STEP, {-0.002 / (1 - 0.9), 1e-38, 0}, 0.9, 0.999}, /* Torch7's defaults, t = 1 */
        {TC_OP_ADAMAX_STEP, {-0.05, 1e-8, 0.1}, 0.8, 0.99},              /* decay */
        {TC_OP_ADADELTA_STEP, {-1, 1e-6, 0}, 0.9, 0},                    /* the defaults */
        {TC_OP_ADADELTA_STEP, {-0.5, 1e-4, 1e-2}, 0.95, 0},              /* decay */
    };
    for (int dt = TC_F32; dt <= TC_F64; dt++)
        for (int64_t n = 7; n <= 100003; n += 99996)
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                bool adamax = cfg[c].op == TC_OP_ADAMAX_STEP;
                tc_tensor *x = R(dt, 1, SZ(n), -2, 2), *g = R(dt, 1, SZ(n), -2, 2);
                tc_tensor *st = R(dt, 2, SZ(2, n), adamax ? -0.5 : 0, 0.5), *want[3];
                if (adamax) { /* u >= 0 */
                    tc_tensor *u = row(st, 1), *src = R(dt, 1, SZ(n), 0, 1), *o = u;
                    CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){src}, 1, P(.i = {-1}), &o, 1));
                    adamax_composed(x, g, st, cfg[c].sc, cfg[c].a, cfg[c].b, want);
                } else {
                    adadelta_composed(x, g, st, cfg[c].sc, cfg[c].a, want);
                }
                const tc_params p = {.s = {cfg[c].a, cfg[c].b}};
                tc_tensor *x2 = clone(x), *st2 = clone(st), *o0 = x2, *o1 = st2;
                CHECK_OK(step(cfg[c].op, x2, g, st2, scal(3, cfg[c].sc), &p, &o0, &o1));
                CHECK(o0 == x2 && o1 == st2);
                bool same = ct_close_all(x2, want[0], 0) && ct_close_all(row(st2, 0), want[1], 0) &&
                            ct_close_all(row(st2, 1), want[2], 0);
                if (!same)
                    printf("  %s %s n %lld config %zu\n", tc_op_info(cfg[c].op)->name, tc_dtype_name((tc_dtype)dt),
                           (long long)n, c);
                CHECK(same);
                ct_drop();
            }
}

/* New results leave x and the state alone and equal the in-place step; transposed x and g
 * (strided operands) give the same values as their contiguous copies. */
TEST(optim_step_new_results_and_strided)
{
    const double sc[4] = {-0.01, 1e-8, 0.99, 0};
    const tc_params p = {.s = {0.9, 0.999}, .i = {1}};
    tc_tensor *x = R(TC_F32, 2, SZ(6, 9), -2, 2), *g = R(TC_F32, 2, SZ(6, 9), -2, 2), *st = R(TC_F32, 2, SZ(3, 54), 0, 1);
    tc_tensor *x0 = clone(x), *st0 = clone(st), *n0 = NULL, *n1 = NULL;
    CHECK_OK(step(TC_OP_ADAM_STEP, x, g, st, scal(4, sc), &p, &n0, &n1));
    CHECK(ct_close_all(x, x0, 0) && ct_close_all(st, st0, 0)); /* inputs untouched */
    CHECK(ct_shape_is(n0, 2, SZ(6, 9)) && ct_shape_is(n1, 2, SZ(3, 54)));
    tc_tensor *o0 = x, *o1 = st;
    CHECK_OK(step(TC_OP_ADAM_STEP, x, g, st, scal(4, sc), &p, &o0, &o1));
    CHECK(ct_close_all(x, n0, 0) && ct_close_all(st, n1, 0));
    /* x^T, g^T (9,6) against contiguous copies of them; the state is element-aligned with the
     * row-major order of x^T */
    tc_tensor *xt = ct_keep(ct_transposed(x0, 0, 1)), *gt = ct_keep(ct_transposed(g, 0, 1));
    tc_tensor *xc = clone(xt), *gc = clone(gt), *a0 = NULL, *a1 = NULL, *b0 = NULL, *b1 = NULL;
    CHECK_OK(step(TC_OP_ADAM_STEP, xt, gt, st0, scal(4, sc), &p, &a0, &a1));
    CHECK_OK(step(TC_OP_ADAM_STEP, xc, gc, st0, scal(4, sc), &p, &b0, &b1));
    CHECK(ct_close_all(a0, b0, 0) && ct_close_all(a1, b1, 0));
    tc_tensor *bt = ct_keep(ct_transposed(clone(x0), 0, 1)), *bc = clone(bt); /* (9,6) strided, and dense */
    tc_tensor *buf = R(TC_F32, 2, SZ(9, 6), -1, 1), *q0 = bt, *q1 = NULL, *w0 = NULL, *w1 = NULL;
    const double ss[2] = {-0.1, 1e-3};
    CHECK_OK(step(TC_OP_SGD_STEP, bt, gt, buf, scal(2, ss), P(.s = {0.9}), &q0, &q1)); /* in place through a view */
    CHECK_OK(step(TC_OP_SGD_STEP, bc, gc, buf, scal(2, ss), P(.s = {0.9}), &w0, &w1));
    CHECK(ct_close_all(bt, w0, 0) && ct_close_all(q1, w1, 0));
    ct_drop();
}

/* f16 and bf16 compute in float32 and round once: near a float64 loop over the same values. */
TEST(optim_step_half)
{
    const double sc[4] = {-0.01, 1e-8, 0.999, 0}, b1 = 0.9, b2 = 0.999;
    const tc_params p = {.s = {b1, b2}};
    for (int dt = TC_F16; dt <= TC_BF16; dt++) {
        int64_t n = 300;
        tc_tensor *x = R(dt, 1, SZ(n), -2, 2), *g = R(dt, 1, SZ(n), -2, 2), *st = R(dt, 2, SZ(2, n), 0, 0.5);
        double xv[300], gv[300], mv[300], vv[300];
        for (int64_t i = 0; i < n; i++) xv[i] = ct_at(x, i), gv[i] = ct_at(g, i), mv[i] = ct_at(st, i), vv[i] = ct_at(st, n + i);
        tc_tensor *o0 = x, *o1 = st;
        CHECK_OK(step(TC_OP_ADAM_STEP, x, g, st, scal(4, sc), &p, &o0, &o1));
        double tol = dt == TC_F16 ? 2e-3 : 1e-2;
        bool ok = true;
        for (int64_t i = 0; ok && i < n; i++) {
            double m1 = mv[i] + (1 - b1) * (gv[i] - mv[i]), v1 = b2 * vv[i] + (1 - b2) * gv[i] * gv[i];
            double x1 = xv[i] * sc[2] + sc[0] * m1 / (sqrt(v1) + sc[1]);
            ok = ct_near(ct_at(x, i), x1, tol) && ct_near(ct_at(st, i), m1, tol) && ct_near(ct_at(st, n + i), v1, tol);
            if (!ok) printf("  %s element %lld: x %g (want %g)\n", tc_dtype_name((tc_dtype)dt), (long long)i, ct_at(x, i), x1);
        }
        CHECK(ok);
    }
    ct_drop();
}

TEST(optim_step_bad_input)
{
    const double sc4[4] = {-0.01, 1e-8, 1, 0}, sc2[2] = {-0.1, 0};
    tc_tensor *x = R(TC_F32, 2, SZ(2, 3), -1, 1), *g = R(TC_F32, 2, SZ(2, 3), -1, 1), *st = R(TC_F32, 2, SZ(2, 6), 0, 1);
    tc_tensor *x0 = clone(x), *st0 = clone(st), *s4 = scal(4, sc4), *s2 = scal(2, sc2);
    tc_tensor *g32 = R(TC_F32, 2, SZ(3, 2), -1, 1), *gd = R(TC_F64, 2, SZ(2, 3), -1, 1), *st3 = R(TC_F32, 2, SZ(3, 6), 0, 1);
    tc_tensor *std_ = R(TC_F64, 2, SZ(2, 6), 0, 1), *sf = R(TC_F32, 1, SZ(4), 0, 1), *buf = R(TC_F32, 2, SZ(2, 3), 0, 1);
    tc_tensor *xi = R(TC_I32, 2, SZ(2, 3), -1, 1), *sti = R(TC_I32, 2, SZ(2, 6), 0, 1), *gi = R(TC_I32, 2, SZ(2, 3), -1, 1);
    const tc_params pa = {.s = {0.9, 0.999}};
#define ADAM(a, b, c, d, pp) step(TC_OP_ADAM_STEP, a, b, c, d, pp, &o0, &o1)
    tc_tensor *o0 = x, *o1 = st;
    CHECK_ERR(ADAM(x, g32, st, s4, &pa), TC_ERR_SHAPE, "adam_step: gradient (3,2) must have the size of x (2,3)");
    CHECK_ERR(ADAM(x, gd, st, s4, &pa), TC_ERR_DTYPE, "adam_step: gradient is float64 but x is float32");
    CHECK_ERR(ADAM(x, g, st3, s4, &pa), TC_ERR_SHAPE, "adam_step: state (3,6) must be (2,6) (m, v of x (2,3))");
    CHECK_ERR(ADAM(x, g, st, s4, P(.s = {0.9, 0.999}, .i = {1})), TC_ERR_SHAPE,
              "adam_step: state (2,6) must be (3,6) (m, v and vmax of x (2,3))");
    CHECK_ERR(ADAM(x, g, std_, s4, &pa), TC_ERR_DTYPE, "adam_step: state is float64 but x is float32");
    CHECK_ERR(ADAM(x, g, st, s2, &pa), TC_ERR_SHAPE, "adam_step: scal (2) must be a vector of 4 per-step scalars");
    CHECK_ERR(ADAM(x, g, st, sf, &pa), TC_ERR_DTYPE, "adam_step: scal is float32, expected float64");
    CHECK_ERR(ADAM(x, g, st, s4, P(.s = {1, 0.999})), TC_ERR_ARG, "adam_step: beta1 must be in [0, 1), got 1");
    CHECK_ERR(ADAM(x, g, st, s4, P(.s = {0.9, NAN})), TC_ERR_ARG, "adam_step: beta2 must be in [0, 1), got nan");
    CHECK_ERR(ADAM(x, g, st, s4, P(.s = {0.9, 0.99}, .i = {2})), TC_ERR_ARG, "adam_step: amsgrad must be 0 or 1, got 2");
    CHECK_ERR(ADAM(xi, gi, sti, s4, &pa), TC_ERR_DTYPE, "adam_step");
    CHECK_ERR(ADAM(NULL, g, st, s4, &pa), TC_ERR_ARG, "adam_step: input 1 is NULL");
    CHECK_ERR(ADAM(x, g, st, NULL, &pa), TC_ERR_ARG, "adam_step: input 4 is NULL");
#define SGD(a, b, c, d, pp) step(TC_OP_SGD_STEP, a, b, c, d, pp, &o0, &o1)
    CHECK_ERR(SGD(x, g, st, s2, P(.s = {0.9})), TC_ERR_SHAPE, "sgd_step: momentum buffer (2,6) must have the size of x (2,3)");
    CHECK_ERR(SGD(x, g, buf, s4, P(.s = {0.9})), TC_ERR_SHAPE, "sgd_step: scal (4) must be a vector of 2 per-step scalars (-lr, wd)");
    CHECK_ERR(SGD(x, g, buf, s2, P(.s = {-0.5})), TC_ERR_ARG, "sgd_step: momentum must be a number >= 0, got -0.5");
    CHECK_ERR(SGD(x, g, buf, s2, P(.s = {0.9, INFINITY})), TC_ERR_ARG, "sgd_step: dampening must be a finite number, got inf");
    CHECK_ERR(SGD(x, g, buf, s2, P(.s = {0.9}, .i = {3})), TC_ERR_ARG, "sgd_step: nesterov must be 0 or 1, got 3");
    const double sc3[3] = {-0.01, 1e-8, 0};
    tc_tensor *s3 = scal(3, sc3), *st1 = R(TC_F32, 2, SZ(1, 6), 0, 1);
#define RMS(a, b, c, d, pp) step(TC_OP_RMSPROP_STEP, a, b, c, d, pp, &o0, &o1)
    o0 = x, o1 = st1;
    CHECK_ERR(RMS(x, g, st1, s3, P(.s = {0.99}, .i = {1})), TC_ERR_SHAPE,
              "rmsprop_step: state (1,6) must be (2,6) (sq and ga of x (2,3))");
    CHECK_ERR(RMS(x, g, st1, s3, P(.s = {0.99, 0.9}, .i = {1})), TC_ERR_SHAPE,
              "rmsprop_step: state (1,6) must be (3,6) (sq, ga and buf of x (2,3))");
    CHECK_ERR(RMS(x, g, st, s3, P(.s = {0.99})), TC_ERR_SHAPE, "rmsprop_step: state (2,6) must be (1,6) (sq of x (2,3))");
    CHECK_ERR(RMS(x, g, st1, s4, P(.s = {0.99})), TC_ERR_SHAPE,
              "rmsprop_step: scal (4) must be a vector of 3 per-step scalars (-lr, eps, wd)");
    CHECK_ERR(RMS(x, g, st1, s3, P(.s = {NAN})), TC_ERR_ARG, "rmsprop_step: alpha must be a finite number, got nan");
    CHECK_ERR(RMS(x, g, st1, s3, P(.s = {0.99, -1})), TC_ERR_ARG, "rmsprop_step: momentum must be a number >= 0, got -1");
    CHECK_ERR(RMS(x, g, st1, s3, P(.s = {0.99}, .i = {-1})), TC_ERR_ARG, "rmsprop_step: centered must be 0 or 1, got -1");
    CHECK_ERR(RMS(x, gd, st1, s3, P(.s = {0.99})), TC_ERR_DTYPE, "rmsprop_step: gradient is float64 but x is float32");
#define ADAGRAD(a, b, c, d) step(TC_OP_ADAGRAD_STEP, a, b, c, d, NULL, &o0, &o1)
    o0 = x, o1 = buf;
    CHECK_ERR(ADAGRAD(x, g, st, s3), TC_ERR_SHAPE, "adagrad_step: sum (2,6) must have the size of x (2,3)");
    CHECK_ERR(ADAGRAD(x, g32, buf, s3), TC_ERR_SHAPE, "adagrad_step: gradient (3,2) must have the size of x (2,3)");
    CHECK_ERR(ADAGRAD(x, g, buf, s2), TC_ERR_SHAPE,
              "adagrad_step: scal (2) must be a vector of 3 per-step scalars (-clr, eps, wd)");
    CHECK_ERR(ADAGRAD(x, g, buf, ct_keep(ct_from(TC_F32, 1, SZ(3), sc3))), TC_ERR_DTYPE,
              "adagrad_step: scal is float32, expected float64");
    CHECK_ERR(ADAGRAD(xi, gi, gi, s3), TC_ERR_DTYPE, "adagrad_step");
    CHECK_ERR(ADAGRAD(x, g, NULL, s3), TC_ERR_ARG, "adagrad_step: input 3 is NULL");
#define ADAMAX(a, b, c, d, pp) step(TC_OP_ADAMAX_STEP, a, b, c, d, pp, &o0, &o1)
    o0 = x, o1 = st;
    CHECK_ERR(ADAMAX(x, g, st1, s3, &pa), TC_ERR_SHAPE, "adamax_step: state (1,6) must be (2,6) (m and u of x (2,3))");
    CHECK_ERR(ADAMAX(x, g, st, s4, &pa), TC_ERR_SHAPE,
              "adamax_step: scal (4) must be a vector of 3 per-step scalars (step, eps, wd)");
    CHECK_ERR(ADAMAX(x, g, st, s3, P(.s = {-0.1, 0.999})), TC_ERR_ARG, "adamax_step: beta1 must be in [0, 1), got -0.1");
    CHECK_ERR(ADAMAX(x, g, st, s3, P(.s = {0.9, 1})), TC_ERR_ARG, "adamax_step: beta2 must be in [0, 1), got 1");
    CHECK_ERR(ADAMAX(x, g, std_, s3, &pa), TC_ERR_DTYPE, "adamax_step: state is float64 but x is float32");
#define ADADELTA(a, b, c, d, pp) step(TC_OP_ADADELTA_STEP, a, b, c, d, pp, &o0, &o1)
    CHECK_ERR(ADADELTA(x, g, st3, s3, P(.s = {0.9})), TC_ERR_SHAPE,
              "adadelta_step: state (3,6) must be (2,6) (sq and acc of x (2,3))");
    CHECK_ERR(ADADELTA(x, g, st, s3, P(.s = {INFINITY})), TC_ERR_ARG, "adadelta_step: rho must be a finite number, got inf");
    CHECK_ERR(ADADELTA(x, g, st, ct_keep(ct_from(TC_F32, 1, SZ(3), sc3)), P(.s = {0.9})), TC_ERR_DTYPE,
              "adadelta_step: scal is float32, expected float64");
    CHECK_ERR(ADADELTA(x, g32, st, s3, P(.s = {0.9})), TC_ERR_SHAPE,
              "adadelta_step: gradient (3,2) must have the size of x (2,3)");
    CHECK_ERR(ADADELTA(xi, gi, sti, s3, P(.s = {0.9})), TC_ERR_DTYPE, "adadelta_step");
    /* an out slot of the wrong size cannot take an in-place result */
    tc_tensor *small = R(TC_F32, 1, SZ(6), 0, 1);
    o0 = small, o1 = buf;
    CHECK_ERR(SGD(small, g, buf, s2, P(.s = {0.9})), TC_ERR_SHAPE, "sgd_step: gradient (2,3) must have the size of x (6)");
    CHECK(o0 == small && o1 == buf);
    CHECK(ct_close_all(x, x0, 0) && ct_close_all(st, st0, 0)); /* nothing changed */
#undef ADAM
#undef SGD
#undef RMS
#undef ADAGRAD
#undef ADAMAX
#undef ADADELTA
    ct_drop();
}
