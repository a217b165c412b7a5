/* test_autocast.c -- mixed precision (core/autocast.c): the casts autocast makes per op
 * class (matrix products and convolutions in half, reductions and exp/log-like ops in
 * float32, mixed inputs promoted, a given result fixing the dtype), gradients reaching
 * float32 parameters in float32 and close to the float32 ones, nested set/restore, bad
 * dtypes, thread-locality, the cast cache, a trace recording the casts, and the fused
 * unscale-and-check of dynamic loss scaling (tc_amp_unscale), also on device tensors. */
#include "ctest.h"
#include "trace_test_util.h"
#include <pthread.h>

/* A failed call must not leave autocast on for the tests that follow. */
#define AC_OK(expr)                                                                         \
    do {                                                                                    \
        tc_status s2_ = (expr);                                                             \
        if (s2_ != TC_OK) {                                                                 \
            printf("  FAIL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #expr, (int)s2_, tc_last_error()); \
            *ctest_failed = 1;                                                              \
            tc_autocast_set(0, TC_F16, NULL, NULL);                                         \
            tc_set_grad_enabled(1);                                                         \
            ct_drop();                                                                      \
            return;                                                                         \
        }                                                                                   \
    } while (0)

static tc_tensor *run2(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_params *p)
{
    tc_tensor *r = NULL;
    return ct_run1(op, a, b, NULL, p, &r) ? NULL : r;
}

static tc_tensor *rnd(tc_dtype dt, int nd, const int64_t *sz, double lo, double hi)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, nd, sz, &t)) return NULL;
    tc_op_run(TC_OP_UNIFORM, NULL, 0, P(.s = {lo, hi}), &t, 1);
    return t;
}

static tc_tensor *cast(const tc_tensor *t, tc_dtype dt)
{
    tc_tensor *r = NULL;
    return tc_op_run(TC_OP_COPY, &t, 1, P(.i = {dt}), &r, 1) ? NULL : r;
}

/* max |a - b| / max |b|, both read as doubles */
static double rel_err(const tc_tensor *a, const tc_tensor *b)
{
    double d = 0, m = 0;
    for (int64_t i = 0; i < tc_tensor_numel(b); i++) {
        d = fmax(d, fabs(ct_at(a, i) - ct_at(b, i)));
        m = fmax(m, fabs(ct_at(b, i)));
    }
    return m > 0 ? d / m : d;
}

TEST(autocast_policy_lists)
{
    CHECK(tc_autocast_policy(TC_OP_MM) == TC_AUTOCAST_LOWER);
    CHECK(tc_autocast_policy(TC_OP_ADDMM) == TC_AUTOCAST_LOWER);
    CHECK(tc_autocast_policy(TC_OP_CONV2D_WEIGHT) == TC_AUTOCAST_LOWER);
    CHECK(tc_autocast_policy(TC_OP_SUM) == TC_AUTOCAST_FP32);
    CHECK(tc_autocast_policy(TC_OP_LOG_SOFTMAX) == TC_AUTOCAST_FP32);
    CHECK(tc_autocast_policy(TC_OP_POW) == TC_AUTOCAST_FP32);
    CHECK(tc_autocast_policy(TC_OP_EXP) == TC_AUTOCAST_FP32);
    CHECK(tc_autocast_policy(TC_OP_ADD) == TC_AUTOCAST_PROMOTE);
    CHECK(tc_autocast_policy(TC_OP_CAT) == TC_AUTOCAST_PROMOTE);
    CHECK(tc_autocast_policy(TC_OP_TANH) == TC_AUTOCAST_PROMOTE); /* one input: never mixed */
    CHECK(tc_autocast_policy(TC_OP_COPY) == TC_AUTOCAST_NONE);
    CHECK(tc_autocast_policy(TC_OP_NARROW) == TC_AUTOCAST_NONE);
    CHECK(tc_autocast_policy(TC_OP_UNIFORM) == TC_AUTOCAST_NONE);
    CHECK(tc_autocast_policy(TC_OP_BATCH_NORM) == TC_AUTOCAST_NONE);
    CHECK(tc_autocast_policy(TC_OP_BATCH_NORM_BACKWARD) == TC_AUTOCAST_NONE);
    CHECK(tc_autocast_policy(-1) == TC_AUTOCAST_NONE && tc_autocast_policy(TC_OP_COUNT) == TC_AUTOCAST_NONE);
}

TEST(autocast_set_restores_and_rejects_bad_dtypes)
{
    int pe = -1, pd = -1, pe2 = -1, pd2 = -1;
    CHECK(tc_autocast_enabled() == 0);
    CHECK_OK(tc_autocast_set(1, TC_BF16, &pe, &pd));
    CHECK(pe == 0 && tc_autocast_enabled() == 1 && tc_autocast_dtype() == TC_BF16);
    CHECK_OK(tc_autocast_set(0, TC_F16, &pe2, &pd2)); /* a nested disabled region */
    CHECK(pe2 == 1 && pd2 == TC_BF16 && tc_autocast_enabled() == 0);
    CHECK_OK(tc_autocast_set(pe2, pd2, NULL, NULL)); /* its exit */
    CHECK(tc_autocast_enabled() == 1 && tc_autocast_dtype() == TC_BF16);
    CHECK_ERR(tc_autocast_set(1, TC_F32, NULL, NULL), TC_ERR_ARG,
              "autocast: dtype must be float16 or bfloat16, got float32");
    CHECK_ERR(tc_autocast_set(1, 99, &pe2, NULL), TC_ERR_ARG, "got an unknown dtype (99)");
    CHECK(tc_autocast_enabled() == 1 && tc_autocast_dtype() == TC_BF16); /* unchanged */
    CHECK_OK(tc_autocast_set(pe, pd, NULL, NULL));
    CHECK(tc_autocast_enabled() == 0 && tc_autocast_dtype() == pd);
}

TEST(autocast_matmul_and_conv_run_in_half)
{
    tc_tensor *a = ct_keep(rnd(TC_F32, 2, SZ(5, 7), -1, 1)), *b = ct_keep(rnd(TC_F32, 2, SZ(7, 3), -1, 1));
    tc_tensor *ref = ct_keep(run2(TC_OP_MM, a, b, NULL));
    tc_tensor *x = ct_keep(rnd(TC_F32, 4, SZ(2, 3, 6, 6), -1, 1)), *w = ct_keep(rnd(TC_F32, 4, SZ(4, 3, 3, 3), -1, 1));
    tc_params cp = {.nshape = 6, .shape = {1, 1, 1, 1, 1, 1}, .i = {1}};
    const tc_tensor *cin[3] = {x, w, NULL};
    tc_tensor *cref = NULL;
    CHECK_OK(tc_op_run(TC_OP_CONV2D, cin, 3, &cp, &cref, 1));
    ct_keep(cref);
    tc_tensor *a64 = ct_keep(cast(a, TC_F64)), *b64 = ct_keep(cast(b, TC_F64));
    tc_tensor *ai = ct_keep(ct_arange(TC_I64, 2, SZ(2, 2)));
    for (int k = 0; k < 2; k++) {
        int dt = k ? TC_BF16 : TC_F16;
        AC_OK(tc_autocast_set(1, dt, NULL, NULL));
        tc_tensor *y = ct_keep(run2(TC_OP_MM, a, b, NULL));
        tc_tensor *y64 = ct_keep(run2(TC_OP_MM, a64, b64, NULL));
        tc_tensor *yi = ct_keep(run2(TC_OP_MM, ai, ai, NULL));
        tc_tensor *c = NULL;
        AC_OK(tc_op_run(TC_OP_CONV2D, cin, 3, &cp, &c, 1));
        ct_keep(c);
        tc_autocast_set(0, TC_F16, NULL, NULL);
        CHECK(y && y->dtype == dt && ct_shape_is(y, 2, SZ(5, 3)));
        CHECK(y && rel_err(y, ref) < (dt == TC_F16 ? 4e-3 : 3e-2) && rel_err(y, ref) > 0);
        CHECK(c && c->dtype == dt && rel_err(c, cref) < (dt == TC_F16 ? 4e-3 : 3e-2));
        CHECK(y64 && y64->dtype == TC_F64); /* float64 is never lowered */
        CHECK(yi && yi->dtype == TC_I64 && ct_at(yi, 3) == 11);
    }
    ct_drop();
}

TEST(autocast_fp32_ops_and_untouched_ops)
{
    tc_tensor *h = ct_keep(cast(ct_keep(rnd(TC_F32, 2, SZ(4, 6), 0.5, 2)), TC_BF16));
    tc_tensor *d = ct_keep(rnd(TC_F64, 1, SZ(5), 0, 1));
    AC_OK(tc_autocast_set(1, TC_F16, NULL, NULL));
    tc_tensor *s = ct_keep(run2(TC_OP_SUM, h, NULL, P(.i = {-1, 0})));
    tc_tensor *e = ct_keep(run2(TC_OP_EXP, h, NULL, NULL));
    tc_tensor *l = ct_keep(run2(TC_OP_LOG_SOFTMAX, h, NULL, P(.i = {1})));
    tc_tensor *m = ct_keep(run2(TC_OP_MEAN, h, NULL, P(.i = {0, 1})));
    tc_tensor *t = ct_keep(run2(TC_OP_TANH, h, NULL, NULL));
    tc_tensor *sd = ct_keep(run2(TC_OP_SUM, d, NULL, P(.i = {-1, 0})));
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(s && s->dtype == TC_F32 && s->ndim == 0);
    CHECK(e && e->dtype == TC_F32 && l && l->dtype == TC_F32 && m && m->dtype == TC_F32);
    CHECK(t && t->dtype == TC_BF16); /* not listed: stays in its dtype */
    CHECK(sd && sd->dtype == TC_F64);
    /* the float32 sum of the bf16 values, exactly what a float32 copy gives */
    tc_tensor *h32 = ct_keep(cast(h, TC_F32));
    tc_tensor *s32 = ct_keep(run2(TC_OP_SUM, h32, NULL, P(.i = {-1, 0})));
    CHECK(s && s32 && ct_at(s, 0) == ct_at(s32, 0));
    ct_drop();
}

/* A half activation normalised with float32 weights stays half (PyTorch's autocast lists
 * no batch norm), with the values of the same call outside autocast. */
TEST(autocast_batch_norm_keeps_the_input_dtype)
{
    tc_tensor *x = ct_keep(cast(ct_keep(rnd(TC_F32, 4, SZ(2, 3, 2, 2), -1, 1)), TC_F16));
    tc_tensor *w = ct_keep(rnd(TC_F32, 1, SZ(3), 0.5, 1.5));
    tc_tensor *b = ct_keep(rnd(TC_F32, 1, SZ(3), -0.5, 0.5));
    const tc_tensor *in[5] = {x, w, b, NULL, NULL};
    tc_tensor *ac[2] = {NULL, NULL}, *plain[2] = {NULL, NULL};
    const tc_params p = {.s = {1e-5}, .i = {1}};
    AC_OK(tc_autocast_set(1, TC_F16, NULL, NULL));
    tc_status s = tc_op_run(TC_OP_BATCH_NORM, in, 5, &p, ac, 2);
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(s == TC_OK);
    CHECK(tc_op_run(TC_OP_BATCH_NORM, in, 5, &p, plain, 2) == TC_OK);
    for (int i = 0; i < 2; i++) ct_keep(ac[i]), ct_keep(plain[i]);
    CHECK(ac[0] && ac[0]->dtype == TC_F16 && ac[1] && ac[1]->dtype == TC_F32);
    CHECK(ac[0] && plain[0] && rel_err(ac[0], plain[0]) == 0);
    ct_drop();
}

TEST(autocast_promotes_mixed_inputs)
{
    tc_tensor *h = ct_keep(cast(ct_keep(rnd(TC_F32, 2, SZ(2, 3), -1, 1)), TC_F16));
    tc_tensor *f = ct_keep(rnd(TC_F32, 1, SZ(3), -1, 1));
    tc_tensor *f23 = ct_keep(rnd(TC_F32, 2, SZ(2, 3), -1, 1));
    tc_tensor *b = ct_keep(cast(ct_keep(rnd(TC_F32, 2, SZ(2, 3), -1, 1)), TC_BF16));
    tc_tensor *z = ct_keep(ct_from(TC_F32, 0, NULL, VALS(2)));
    tc_tensor *cond = ct_keep(ct_from(TC_U8, 1, SZ(3), VALS(1, 0, 1)));
    AC_OK(tc_autocast_set(1, TC_F16, NULL, NULL));
    tc_tensor *y = ct_keep(run2(TC_OP_ADD, h, f, P(.s = {1})));   /* half + float32 bias */
    tc_tensor *y2 = ct_keep(run2(TC_OP_MUL, h, z, NULL));         /* half * 0-dim float32 */
    tc_tensor *y3 = ct_keep(run2(TC_OP_ADD, h, b, P(.s = {1})));  /* float16 + bfloat16 */
    tc_tensor *lt = ct_keep(run2(TC_OP_LT, h, f, NULL));
    const tc_tensor *cin[2] = {h, f23};
    tc_tensor *c = NULL;
    AC_OK(tc_op_run(TC_OP_CAT, cin, 2, P(.i = {0}), &c, 1));
    ct_keep(c);
    const tc_tensor *win[3] = {cond, h, f};
    tc_tensor *w = NULL;
    AC_OK(tc_op_run(TC_OP_WHERE, win, 3, NULL, &w, 1));
    ct_keep(w);
    /* in place: the result's dtype decides (Torch7's x:add(y)) */
    tc_tensor *hx = ct_keep(cast(h, TC_F16)), *fx = ct_keep(cast(f23, TC_F32));
    AC_OK(op2_(TC_OP_ADD, fx, h, P(.s = {1})));
    AC_OK(op2_(TC_OP_ADD, hx, f23, P(.s = {1})));
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(y && y->dtype == TC_F32 && ct_shape_is(y, 2, SZ(2, 3)));
    CHECK(y && fabs(ct_at(y, 4) - (ct_at(h, 4) + ct_at(f, 1))) < 1e-6);
    CHECK(y2 && y2->dtype == TC_F16 && ct_at(y2, 1) == 2 * ct_at(h, 1));
    CHECK(y3 && y3->dtype == TC_F32);
    CHECK(lt && lt->dtype == TC_U8);
    CHECK(c && c->dtype == TC_F32 && ct_shape_is(c, 2, SZ(4, 3)) && ct_at(c, 0) == ct_at(h, 0));
    CHECK(w && w->dtype == TC_F32 && ct_at(w, 4) == ct_at(f, 1) && ct_at(w, 3) == ct_at(h, 3));
    CHECK(fx->dtype == TC_F32 && fabs(ct_at(fx, 2) - (ct_at(f23, 2) + ct_at(h, 2))) < 1e-6);
    CHECK(hx->dtype == TC_F16 && fabs(ct_at(hx, 2) - (ct_at(h, 2) + ct_at(f23, 2))) < 2e-3);
    /* without autocast, mixing stays an error */
    CHECK_ERR(ct_run1(TC_OP_ADD, h, f, NULL, P(.s = {1}), &(tc_tensor *){NULL}), TC_ERR_DTYPE, "dtypes differ");
    ct_drop();
}

TEST(autocast_given_result_fixes_the_dtype)
{
    /* gradWeight:addmm(gout^T, x) with half operands accumulates in float32 */
    tc_tensor *gw = ct_keep(ct_from(TC_F32, 2, SZ(2, 2), VALS(0.25, 0, 0, 0)));
    tc_tensor *a = ct_keep(cast(ct_keep(ct_from(TC_F32, 2, SZ(2, 2), VALS(1, 2, 3, 4))), TC_F16));
    AC_OK(tc_autocast_set(1, TC_BF16, NULL, NULL));
    const tc_tensor *in[3] = {gw, a, a};
    tc_tensor *out[1] = {gw};
    AC_OK(tc_op_run(TC_OP_ADDMM, in, 3, P(.s = {1, 1e-3}), out, 1));
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(gw->dtype == TC_F32);
    /* 0.25 + 1e-3 * 7 = 0.257: in bf16 the sum would round to 0.2578125 */
    CHECK_NEAR(ct_at(gw, 0), 0.257, 1e-6);
    CHECK_NEAR(ct_at(gw, 3), 0.022, 1e-6);
    ct_drop();
}

/* loss = sum(tanh(x W) * c): returns W's gradient (a new reference), or NULL. */
static tc_tensor *linear_grad(tc_tensor *x, tc_tensor *W, tc_tensor *c, tc_tensor **loss_out)
{
    tc_tensor_set_grad(W, NULL);
    tc_tensor *y = run2(TC_OP_MM, x, W, NULL);
    tc_tensor *t = y ? run2(TC_OP_TANH, y, NULL, NULL) : NULL;
    tc_tensor *m = t ? run2(TC_OP_MUL, t, c, NULL) : NULL;
    tc_tensor *l = m ? run2(TC_OP_SUM, m, NULL, P(.i = {-1, 0})) : NULL;
    tc_status s = l ? tc_autograd_backward((const tc_tensor *const[]){l}, NULL, 1, 0, 0) : TC_ERR_INTERNAL;
    tc_tensor_release(y), tc_tensor_release(t), tc_tensor_release(m);
    *loss_out = l;
    return s ? NULL : tc_tensor_grad(W);
}

TEST(autocast_gradients_reach_float32_parameters)
{
    tc_tensor *x = ct_keep(rnd(TC_F32, 2, SZ(8, 16), -1, 1));
    tc_tensor *W = ct_keep(rnd(TC_F32, 2, SZ(16, 5), -0.3, 0.3));
    tc_tensor *c = ct_keep(rnd(TC_F32, 1, SZ(5), -1, 1));
    tc_tensor_set_requires_grad(W, 1);
    tc_tensor *l32 = NULL, *g32 = ct_keep(linear_grad(x, W, c, &l32));
    ct_keep(l32);
    for (int k = 0; k < 2; k++) {
        int dt = k ? TC_BF16 : TC_F16;
        AC_OK(tc_autocast_set(1, dt, NULL, NULL));
        tc_tensor *l = NULL, *g = ct_keep(linear_grad(x, W, c, &l));
        ct_keep(l);
        tc_autocast_set(0, TC_F16, NULL, NULL);
        CHECK(g && g->dtype == TC_F32 && ct_shape_is(g, 2, SZ(16, 5)));
        CHECK(l && l->dtype == TC_F32); /* sum is a float32 op */
        double tol = dt == TC_F16 ? 5e-3 : 4e-2;
        CHECK(g && rel_err(g, g32) < tol && rel_err(g, g32) > 0);
        CHECK(l && fabs(ct_at(l, 0) - ct_at(l32, 0)) < tol * (1 + fabs(ct_at(l32, 0))));
    }
    ct_drop();
}

TEST(autocast_cast_cache_reuses_parameter_casts)
{
    tc_tensor *x = ct_keep(rnd(TC_F32, 2, SZ(3, 4), -1, 1));
    tc_tensor *W = ct_keep(rnd(TC_F32, 2, SZ(4, 4), -1, 1));
    tc_tensor_set_requires_grad(W, 1);
    AC_OK(tc_autocast_set(1, TC_BF16, NULL, NULL));
    tc_tensor *y1 = ct_keep(run2(TC_OP_MM, x, W, NULL));
    CHECK(tc_autocast_cache_size() == 1); /* W cast; x is not a parameter */
    tc_tensor *y2 = ct_keep(run2(TC_OP_MM, y1, W, NULL));
    CHECK(tc_autocast_cache_size() == 1);
    /* both products read the one cast: gradients accumulate through one CopyBackward */
    tc_tensor *l = ct_keep(run2(TC_OP_SUM, y2, NULL, P(.i = {-1, 0})));
    AC_OK(tc_autograd_backward((const tc_tensor *const[]){l}, NULL, 1, 0, 0));
    tc_tensor *g1 = ct_keep(tc_tensor_grad(W));
    CHECK(g1 && g1->dtype == TC_F32);
    /* a second step in the same region reuses the cast after its backward ran */
    tc_tensor *y3 = ct_keep(run2(TC_OP_MM, x, W, NULL));
    tc_tensor *l3 = ct_keep(run2(TC_OP_SUM, y3, NULL, P(.i = {-1, 0})));
    tc_tensor_set_grad(W, NULL);
    AC_OK(tc_autograd_backward((const tc_tensor *const[]){l3}, NULL, 1, 0, 0));
    CHECK(ct_keep(tc_tensor_grad(W)) != NULL);
    /* an update of W (a write: the version moves) makes the next product recast it */
    int prev = tc_set_grad_enabled(0);
    AC_OK(op2_(TC_OP_MUL, W, ct_keep(ct_from(TC_F32, 0, NULL, VALS(2))), NULL));
    tc_set_grad_enabled(prev);
    tc_tensor *y4 = ct_keep(run2(TC_OP_MM, x, W, NULL));
    CHECK(tc_autocast_cache_size() == 1);
    CHECK(y3 && y4 && fabs(ct_at(y4, 0) - 2 * ct_at(y3, 0)) < 1e-6 * (1 + fabs(ct_at(y3, 0))));
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(tc_autocast_cache_size() == 0); /* leaving autocast empties it */
    CHECK(tc_autocast_set_cache_enabled(0) == 1);
    AC_OK(tc_autocast_set(1, TC_BF16, NULL, NULL));
    ct_keep(run2(TC_OP_MM, x, W, NULL));
    CHECK(tc_autocast_cache_size() == 0);
    tc_autocast_set(0, TC_F16, NULL, NULL);
    tc_autocast_set_cache_enabled(1);
    ct_drop();
}

typedef struct {
    int enabled_seen;
    int dtype_seen;
} thread_probe;

static void *probe_thread(void *arg)
{
    thread_probe *tp = arg;
    tc_tensor *a = ct_arange(TC_F32, 2, SZ(2, 2)), *y = NULL;
    const tc_tensor *in[2] = {a, a};
    tc_op_run(TC_OP_MM, in, 2, NULL, &y, 1);
    tp->enabled_seen = tc_autocast_enabled();
    tp->dtype_seen = y ? y->dtype : -1;
    tc_autocast_set(1, TC_F16, NULL, NULL); /* must not leak into the main thread */
    tc_tensor_release(a), tc_tensor_release(y);
    tc_autocast_set(0, TC_F16, NULL, NULL);
    return NULL;
}

TEST(autocast_is_per_thread)
{
    thread_probe tp = {-1, -1};
    AC_OK(tc_autocast_set(1, TC_BF16, NULL, NULL));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, probe_thread, &tp) == 0);
    pthread_join(th, NULL);
    CHECK(tc_autocast_enabled() == 1 && tc_autocast_dtype() == TC_BF16);
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(tp.enabled_seen == 0 && tp.dtype_seen == TC_F32);
}

TEST(autocast_trace_records_the_casts)
{
    tc_tensor *x = ct_keep(rnd(TC_F32, 2, SZ(2, 3), -1, 1));
    tc_tensor *w = ct_keep(rnd(TC_F32, 2, SZ(3, 4), -1, 1));
    tc_tensor *b = ct_keep(rnd(TC_F32, 1, SZ(4), -1, 1));
    tc_tensor_set_requires_grad(w, 1);
    tc_graph *g = NULL;
    AC_OK(tc_autocast_set(1, TC_BF16, NULL, NULL));
    AC_OK(tc_trace_begin(&g));
    tc_status s = tc_trace_input(g, x);
    tc_tensor *y = ct_keep(run2(TC_OP_MM, x, w, NULL));
    tc_tensor *z = ct_keep(run2(TC_OP_ADD, y, b, P(.s = {1})));
    tc_tensor *l = ct_keep(run2(TC_OP_SUM, z, NULL, P(.i = {-1, 0})));
    if (!s && l) s = tc_trace_output(g, l);
    tc_status s2 = tc_trace_end(g);
    int cached = tc_autocast_cache_size();
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(s == TC_OK && s2 == TC_OK && l);
    CHECK(cached == 0); /* no cache while recording */
    /* copy x, copy w -> mm (bf16); copy mm -> add (float32 with the bias); sum */
    CHECK(count_op(g, TC_OP_COPY) == 3 && count_op(g, TC_OP_MM) == 1);
    CHECK(dump_has(g, "mm(") && dump_has(g, ": bfloat16(2,4)"));
    CHECK(l && l->dtype == TC_F32 && z && z->dtype == TC_F32);
    tc_graph_free(g);
    ct_drop();
}

TEST(autocast_amp_unscale_checks_finiteness)
{
    tc_tensor *g1 = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(4, -8, 2)));
    tc_tensor *g2 = ct_keep(cast(ct_keep(ct_from(TC_F32, 2, SZ(1, 2), VALS(-16, 1))), TC_F16));
    double m = -1;
    CHECK_OK(tc_amp_unscale((tc_tensor *const[]){g1, NULL, g2}, 3, 0.25, &m));
    CHECK(m == 4 && SAME(g1, 1, -2, 0.5) && SAME(g2, -4, 0.25));
    tc_tensor *gi = ct_keep(ct_from(TC_F32, 1, SZ(2), VALS(1, INFINITY)));
    CHECK_OK(tc_amp_unscale((tc_tensor *const[]){g1, gi}, 2, 1, &m));
    CHECK(isinf(m));
    tc_tensor *gn = ct_keep(ct_from(TC_F32, 1, SZ(2), VALS(NAN, 1)));
    CHECK_OK(tc_amp_unscale((tc_tensor *const[]){gn, g1}, 2, 0.5, &m));
    CHECK(m != m);
    /* the scale of 2^-k is exact, also for values of every magnitude */
    tc_tensor *ge = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(3.0e30, 1.1754944e-38 * 1024, -0.1)));
    double before[3] = {ct_at(ge, 0), ct_at(ge, 1), ct_at(ge, 2)};
    CHECK_OK(tc_amp_unscale((tc_tensor *const[]){ge}, 1, 1.0 / 1024, &m));
    for (int i = 0; i < 3; i++) CHECK(ct_at(ge, i) == before[i] / 1024);
    tc_tensor *gint = ct_keep(ct_from(TC_I32, 1, SZ(2), VALS(1, 2)));
    CHECK_ERR(tc_amp_unscale((tc_tensor *const[]){gint}, 1, 1, &m), TC_ERR_DTYPE, "gradient 1 is int32");
    CHECK_ERR(tc_amp_unscale(NULL, 1, 1, &m), TC_ERR_ARG, "amp_unscale");
    ct_drop();
}

/* Device tensors (named cuda_dev_* so tests/run.sh also runs it over the mock backend):
 * autocast casts on the device, and tc_amp_unscale reads one number back. */
TEST(cuda_dev_autocast_and_amp_unscale)
{
    char why[512];
    if (!tc_cuda_available(why, sizeof why) || tc_cuda_device_count() < 1) {
        printf("  skip: no CUDA device (%s)\n", why);
        return;
    }
    const int dev = TC_DEVICE_CUDA(0);
    tc_tensor *a = ct_keep(rnd(TC_F32, 2, SZ(4, 5), -1, 1)), *b = ct_keep(rnd(TC_F32, 2, SZ(5, 3), -1, 1));
    tc_tensor *ref = ct_keep(run2(TC_OP_MM, a, b, NULL));
    tc_tensor *da = NULL, *db = NULL, *dy = NULL, *hy = NULL;
    CHECK_OK(tc_tensor_to(a, dev, -1, &da));
    ct_keep(da);
    CHECK_OK(tc_tensor_to(b, dev, -1, &db));
    ct_keep(db);
    AC_OK(tc_autocast_set(1, TC_F16, NULL, NULL));
    dy = ct_keep(run2(TC_OP_MM, da, db, NULL));
    tc_autocast_set(0, TC_F16, NULL, NULL);
    CHECK(dy && dy->device == dev && dy->dtype == TC_F16);
    if (dy) CHECK_OK(tc_tensor_to(dy, TC_CPU, -1, &hy));
    ct_keep(hy);
    CHECK(hy && rel_err(hy, ref) < 4e-3);
    tc_tensor *g = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(4, -8, 2))), *dg = NULL, *hg = NULL;
    CHECK_OK(tc_tensor_to(g, dev, -1, &dg));
    ct_keep(dg);
    double m = -1;
    CHECK_OK(tc_amp_unscale((tc_tensor *const[]){dg}, 1, 0.5, &m));
    CHECK_OK(tc_tensor_to(dg, TC_CPU, -1, &hg));
    ct_keep(hg);
    CHECK(m == 4 && SAME(hg, 2, -4, 1));
    tc_tensor *gi = ct_keep(ct_from(TC_F32, 1, SZ(2), VALS(1, INFINITY))), *dgi = NULL;
    CHECK_OK(tc_tensor_to(gi, dev, -1, &dgi));
    ct_keep(dgi);
    CHECK_OK(tc_amp_unscale((tc_tensor *const[]){g, dg, dgi}, 3, 1, &m)); /* host and device together */
    CHECK(isinf(m));
    ct_drop();
}
