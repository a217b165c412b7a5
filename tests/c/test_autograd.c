/* test_autograd.c -- the autograd engine through its public C API (core/tocha_autograd.h):
 * recording, backward/grad, accumulation, in-place and version errors, the second-backward
 * error, hooks, retain_grad, unused inputs, double backward, a 100k-op chain, anomaly
 * mode, and that every node is freed. Gradients are checked against closed forms. */
#include "ctest.h"

static const tc_params SUM_ALL = {.i = {-1, 0}};

static tc_tensor *leaf(int nd, const int64_t *sz, const double *v)
{
    tc_tensor *t = ct_from(TC_F64, nd, sz, v);
    if (t) tc_tensor_set_requires_grad(t, 1);
    return t;
}

static tc_tensor *op1(tc_op op, const tc_tensor *a, const tc_params *p)
{
    tc_tensor *r = NULL;
    return ct_run1(op, a, NULL, NULL, p, &r) ? NULL : r;
}

static tc_tensor *op2(tc_op op, const tc_tensor *a, const tc_tensor *b)
{
    tc_tensor *r = NULL;
    tc_params p = {.s = {1, 0}};
    return ct_run1(op, a, b, NULL, &p, &r) ? NULL : r;
}

static tc_status backward1(const tc_tensor *root, int retain)
{
    const tc_tensor *roots[1] = {root};
    return tc_autograd_backward(roots, NULL, 1, retain, 0);
}

static void rel(tc_tensor *a, tc_tensor *b, tc_tensor *c, tc_tensor *d)
{
    tc_tensor_release(a), tc_tensor_release(b), tc_tensor_release(c), tc_tensor_release(d);
}

TEST(autograd_chain_and_flags)
{
    int64_t live0 = tc_autograd_live_nodes();
    tc_tensor *x = leaf(1, SZ(3), VALS(0.5, -1, 2));
    CHECK(tc_tensor_requires_grad(x) && tc_tensor_is_leaf(x) && !tc_tensor_grad_fn_name(x));
    tc_tensor *e = op1(TC_OP_EXP, x, NULL);     /* e = exp(x) */
    tc_tensor *m = op2(TC_OP_MUL, e, x);        /* m = x exp(x) */
    tc_tensor *s = op1(TC_OP_SUM, m, &SUM_ALL); /* s = sum */
    CHECK(s && tc_tensor_requires_grad(s) && !tc_tensor_is_leaf(s));
    CHECK(s && strcmp(tc_tensor_grad_fn_name(s), "SumBackward") == 0);
    CHECK(m && strcmp(tc_tensor_grad_fn_name(m), "MulBackward") == 0);
    CHECK_OK(backward1(s, 0));
    tc_tensor *g = tc_tensor_grad(x);
    CHECK(g && !tc_tensor_requires_grad(g) && tc_tensor_is_contiguous(g));
    double xs[3] = {0.5, -1, 2};
    for (int i = 0; i < 3 && g; i++) CHECK_NEAR(ct_at(g, i), (1 + xs[i]) * exp(xs[i]), 1e-12);
    CHECK(!tc_tensor_grad(e)); /* non-leaves keep no gradient by default */
    rel(g, e, m, s);
    tc_tensor_release(x);
    CHECK(tc_autograd_live_nodes() == live0);
}

TEST(autograd_broadcast_and_accumulate)
{
    tc_tensor *a = leaf(2, SZ(2, 3), VALS(1, 2, 3, 4, 5, 6));
    tc_tensor *b = leaf(1, SZ(3), VALS(10, 20, 30));
    tc_tensor *c = op2(TC_OP_MUL, a, b); /* (2,3) * (3) */
    tc_tensor *s = op1(TC_OP_SUM, c, &SUM_ALL);
    CHECK_OK(backward1(s, 1));
    tc_tensor *gb = tc_tensor_grad(b), *ga = tc_tensor_grad(a);
    CHECK(ct_shape_is(gb, 1, SZ(3)) && SAME(gb, 5, 7, 9));
    CHECK(ct_shape_is(ga, 2, SZ(2, 3)) && SAME(ga, 10, 20, 30, 10, 20, 30));
    /* a second backward (graph retained) accumulates in place into the same tensor */
    CHECK_OK(backward1(s, 0));
    tc_tensor *gb2 = tc_tensor_grad(b);
    CHECK(gb2 == gb && SAME(gb, 10, 14, 18));
    /* grad() leaves .grad alone and returns only what is asked */
    tc_tensor *c2 = op2(TC_OP_MUL, a, b), *s2 = op1(TC_OP_SUM, c2, &SUM_ALL), *r[1] = {NULL};
    const tc_tensor *outs[1] = {s2}, *ins[1] = {b};
    CHECK_OK(tc_autograd_grad(outs, NULL, 1, ins, 1, 0, 0, 0, r));
    CHECK(SAME(r[0], 5, 7, 9) && SAME(gb, 10, 14, 18));
    rel(gb2, r[0], c2, s2);
    rel(a, b, c, s);
    rel(gb, ga, NULL, NULL);
}

TEST(autograd_explicit_gradient_and_bad_roots)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2));
    tc_tensor *y = op2(TC_OP_MUL, x, x);
    /* implicit gradient only for one element */
    CHECK_ERR(backward1(y, 1), TC_ERR_SHAPE, "implicitly created only for single-element outputs");
    tc_tensor *g = ct_from(TC_F64, 1, SZ(2), VALS(1, 10)), *bad = ct_from(TC_F64, 1, SZ(3), VALS(1, 1, 1));
    const tc_tensor *roots[1] = {y}, *grads[1] = {bad};
    CHECK_ERR(tc_autograd_backward(roots, grads, 1, 1, 0), TC_ERR_SHAPE, "gradient 1 has size (3)");
    CHECK(tc_tensor_grad(x) == NULL); /* failed calls leave .grad alone */
    grads[0] = g;
    CHECK_OK(tc_autograd_backward(roots, grads, 1, 0, 0));
    tc_tensor *gx = tc_tensor_grad(x);
    CHECK(SAME(gx, 2, 40));
    /* roots that do not require grad */
    roots[0] = g;
    CHECK_ERR(tc_autograd_backward(roots, NULL, 1, 0, 0), TC_ERR_ARG, "does not require grad");
    CHECK_ERR(tc_autograd_backward(NULL, NULL, 0, 0, 0), TC_ERR_ARG, "backward: no output given");
    /* only float tensors can require grad */
    tc_tensor *i = ct_from(TC_I64, 1, SZ(2), VALS(1, 2));
    CHECK_ERR(tc_tensor_set_requires_grad(i, 1), TC_ERR_DTYPE, "only floating point tensors");
    /* non-leaves cannot drop the flag */
    CHECK_ERR(tc_tensor_set_requires_grad(y, 0), TC_ERR_ARG, "leaf");
    rel(x, y, g, bad);
    rel(gx, i, NULL, NULL);
}

TEST(autograd_set_grad_and_detach)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2));
    tc_tensor *g = ct_from(TC_F64, 1, SZ(2), VALS(100, 200)), *bad = ct_from(TC_F32, 1, SZ(2), VALS(0, 0));
    CHECK_ERR(tc_tensor_set_grad(x, bad), TC_ERR_DTYPE, "grad: assigned gradient is float32");
    CHECK_OK(tc_tensor_set_grad(x, g));
    tc_tensor *y = op2(TC_OP_MUL, x, x), *s = op1(TC_OP_SUM, y, &SUM_ALL);
    CHECK_OK(backward1(s, 0));
    CHECK(SAME(g, 102, 204)); /* accumulated into the assigned tensor itself */
    tc_tensor *d = NULL;
    CHECK_OK(tc_tensor_detach(y, &d));
    CHECK(d && !tc_tensor_requires_grad(d) && d->storage == y->storage);
    CHECK_OK(tc_tensor_set_grad(x, NULL));
    CHECK(tc_tensor_grad(x) == NULL);
    rel(x, g, bad, y);
    rel(s, d, NULL, NULL);
}

TEST(autograd_inplace_errors_and_rebase)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2)), *one = ct_from(TC_F64, 1, SZ(2), VALS(1, 1));
    /* in place on a leaf that requires grad: refused before anything runs */
    tc_tensor *out[1] = {x};
    const tc_tensor *in[2] = {x, one};
    tc_params p = {.s = {1, 0}};
    int64_t v0 = x->storage->version;
    CHECK_ERR(tc_op_run(TC_OP_ADD, in, 2, &p, out, 1), TC_ERR_ARG, "add: a leaf tensor that requires grad");
    CHECK(SAME(x, 1, 2) && x->storage->version == v0);
    /* ... allowed under no_grad */
    int prev = tc_set_grad_enabled(0);
    CHECK(prev == 1 && !tc_grad_enabled());
    CHECK_OK(tc_op_run(TC_OP_ADD, in, 2, &p, out, 1));
    tc_set_grad_enabled(1);
    CHECK(SAME(x, 2, 3) && x->storage->version == v0 + 1);
    /* a view of a tensor that requires grad cannot be written */
    tc_tensor *y = op2(TC_OP_MUL, x, one);
    tc_params np = {.i = {0, 0, 1}};
    tc_tensor *v = op1(TC_OP_NARROW, y, &np);
    tc_tensor *vo[1] = {v};
    tc_params fp = {.s = {7, 0}};
    CHECK_ERR(tc_op_run(TC_OP_FILL, NULL, 0, &fp, vo, 1), TC_ERR_ARG, "fill: writing in place into a view");
    CHECK(SAME(y, 2, 3));
    /* in place on a non-leaf: history is rebased onto the new node */
    tc_tensor *yo[1] = {y};
    const tc_tensor *yin[2] = {y, one};
    CHECK_OK(tc_op_run(TC_OP_ADD, yin, 2, &p, yo, 1));
    CHECK(strcmp(tc_tensor_grad_fn_name(y), "AddBackward") == 0);
    /* z = y * y in place: both saved inputs are overwritten, so they are saved as copies */
    const tc_tensor *zin[2] = {y, y};
    CHECK_OK(tc_op_run(TC_OP_MUL, zin, 2, NULL, yo, 1)); /* y = (x + 1)^2 */
    tc_tensor *s = op1(TC_OP_SUM, y, &SUM_ALL);
    CHECK_OK(backward1(s, 0));
    tc_tensor *g = tc_tensor_grad(x);
    CHECK(SAME(g, 6, 8)); /* 2 (x + 1) at x = (2, 3) */
    rel(x, one, y, v);
    rel(s, g, NULL, NULL);
}

TEST(autograd_version_and_second_backward_errors)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2)), *w = ct_from(TC_F64, 1, SZ(2), VALS(3, 4));
    tc_tensor *y = op2(TC_OP_MUL, x, w), *s = op1(TC_OP_SUM, y, &SUM_ALL);
    /* w (saved by mul for x's gradient) is modified after the forward */
    tc_tensor *wo[1] = {w};
    tc_params fp = {.s = {0, 0}};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, &fp, wo, 1));
    CHECK_ERR(backward1(s, 1), TC_ERR_ARG, "needed by MulBackward was modified in place (version ");
    CHECK(tc_tensor_grad(x) == NULL);
    /* second backward without retain_graph */
    tc_tensor *y2 = op2(TC_OP_MUL, x, x), *s2 = op1(TC_OP_SUM, y2, &SUM_ALL);
    CHECK_OK(backward1(s2, 0));
    CHECK_ERR(backward1(s2, 0), TC_ERR_ARG, "MulBackward: trying to backward through the graph a second time");
    tc_tensor *g = tc_tensor_grad(x);
    CHECK(SAME(g, 2, 4)); /* the failed second pass changed nothing */
    rel(x, w, y, s);
    rel(y2, s2, g, NULL);
}

/* A C hook runner: id 1 doubles the gradient, id 2 counts, id 3 fails. */
static int hook_calls;
static tc_status tc_g_scale_for_test(tc_tensor *g, double v, tc_tensor **out)
{
    tc_tensor *two = ct_from((tc_dtype)g->dtype, 0, NULL, VALS(v));
    *out = NULL;
    tc_status s = ct_run1(TC_OP_MUL, g, two, NULL, NULL, out);
    tc_tensor_release(two);
    return s;
}
static tc_status test_hook_runner(int64_t id, tc_tensor *grad, tc_tensor **rep)
{
    hook_calls++;
    if (id == 1) return tc_g_scale_for_test(grad, 2.0, rep);
    if (id == 3) return tc_set_error(TC_ERR_ARG, "hook 3 says no");
    return TC_OK;
}

TEST(autograd_hooks_and_retain_grad)
{
    tc_autograd_set_hook_runner(test_hook_runner);
    hook_calls = 0;
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2));
    tc_tensor *y = op2(TC_OP_MUL, x, x);
    CHECK_OK(tc_tensor_retain_grad(y));
    CHECK_OK(tc_tensor_add_hook(y, 1)); /* doubles dL/dy before it flows on */
    CHECK_OK(tc_tensor_add_hook(x, 2));
    tc_tensor *s = op1(TC_OP_SUM, y, &SUM_ALL);
    CHECK_OK(backward1(s, 1));
    tc_tensor *gy = tc_tensor_grad(y), *gx = tc_tensor_grad(x);
    CHECK(SAME(gy, 2, 2));  /* retained after the hook */
    CHECK(SAME(gx, 4, 8));  /* 2 * 2x */
    CHECK(hook_calls == 2);
    CHECK(tc_tensor_remove_hook(y, 1) == 1 && tc_tensor_remove_hook(y, 1) == 0);
    CHECK_OK(tc_tensor_add_hook(x, 3));
    CHECK_ERR(backward1(s, 1), TC_ERR_ARG, "hook 3 says no");
    tc_tensor *gx2 = tc_tensor_grad(x);
    CHECK(SAME(gx2, 4, 8)); /* not accumulated: the pass failed */
    tc_tensor *i = ct_from(TC_F64, 1, SZ(1), VALS(1));
    CHECK_ERR(tc_tensor_add_hook(i, 5), TC_ERR_ARG, "does not require grad");
    tc_autograd_set_hook_runner(NULL);
    rel(x, y, s, gy);
    rel(gx, gx2, i, NULL);
}

TEST(autograd_grad_unused_inputs)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2)), *z = leaf(1, SZ(2), VALS(5, 6));
    tc_tensor *y = op2(TC_OP_MUL, x, x), *s = op1(TC_OP_SUM, y, &SUM_ALL);
    const tc_tensor *outs[1] = {s}, *ins[2] = {x, z};
    tc_tensor *r[2] = {NULL, NULL};
    CHECK_ERR(tc_autograd_grad(outs, NULL, 1, ins, 2, 1, 0, 0, r), TC_ERR_ARG, "input 2 does not reach the outputs");
    CHECK(r[0] == NULL && r[1] == NULL);
    CHECK_OK(tc_autograd_grad(outs, NULL, 1, ins, 2, 1, 0, 1, r));
    CHECK(SAME(r[0], 2, 4) && r[1] == NULL);
    CHECK(tc_tensor_grad(x) == NULL);
    /* the gradient with respect to a non-leaf, stopping there */
    const tc_tensor *ins2[1] = {y};
    tc_tensor *r2[1] = {NULL};
    CHECK_OK(tc_autograd_grad(outs, NULL, 1, ins2, 1, 0, 0, 0, r2));
    CHECK(SAME(r2[0], 1, 1));
    rel(x, z, y, s);
    rel(r[0], r2[0], NULL, NULL);
}

TEST(autograd_double_backward_cube)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(2, -3));
    tc_tensor *x2 = op2(TC_OP_MUL, x, x), *x3 = op2(TC_OP_MUL, x2, x), *s = op1(TC_OP_SUM, x3, &SUM_ALL);
    const tc_tensor *outs[1] = {s}, *ins[1] = {x};
    tc_tensor *g[1] = {NULL};
    CHECK_OK(tc_autograd_grad(outs, NULL, 1, ins, 1, 1, 1, 0, g)); /* 3x^2, with history */
    CHECK(g[0] && tc_tensor_requires_grad(g[0]) && SAME(g[0], 12, 27));
    tc_tensor *gs = op1(TC_OP_SUM, g[0], &SUM_ALL);
    const tc_tensor *outs2[1] = {gs};
    tc_tensor *gg[1] = {NULL};
    CHECK_OK(tc_autograd_grad(outs2, NULL, 1, ins, 1, 1, 0, 0, gg)); /* 6x; retains the forward graph it crosses */
    CHECK(gg[0] && SAME(gg[0], 12, -18));
    /* backward with create_graph leaves a .grad with history */
    CHECK_OK(tc_autograd_backward(outs, NULL, 1, 1, 1));
    tc_tensor *xg = tc_tensor_grad(x);
    CHECK(xg && tc_tensor_requires_grad(xg));
    rel(x, x2, x3, s);
    rel(g[0], gs, gg[0], xg);
}

TEST(autograd_long_chain_no_recursion)
{
    int64_t live0 = tc_autograd_live_nodes();
    tc_tensor *x = leaf(1, SZ(1), VALS(1.5));
    tc_tensor *cur = x;
    tc_tensor_retain(cur);
    for (int i = 0; i < 100000 && cur; i++) {
        tc_tensor *next = op1(TC_OP_NEG, cur, NULL);
        tc_tensor_release(cur);
        cur = next;
    }
    CHECK(cur != NULL);
    if (!cur) return;
    CHECK(tc_autograd_live_nodes() >= live0 + 100000);
    CHECK_OK(backward1(cur, 0));
    tc_tensor *g = tc_tensor_grad(x);
    CHECK(SAME(g, 1)); /* an even number of negations */
    tc_tensor_release(cur); /* frees 100k nodes without recursing */
    CHECK(tc_autograd_live_nodes() == live0 + 1); /* x's accumulate node */
    rel(g, x, NULL, NULL);
    CHECK(tc_autograd_live_nodes() == live0);
}

TEST(autograd_no_grad_and_non_float_outputs)
{
    tc_tensor *x = leaf(2, SZ(2, 2), VALS(1, 5, 3, 2));
    int prev = tc_set_grad_enabled(0);
    tc_tensor *y = op2(TC_OP_MUL, x, x);
    tc_set_grad_enabled(prev);
    CHECK(y && !tc_tensor_requires_grad(y) && !tc_tensor_grad_fn_name(y));
    tc_params mp = {.i = {1, 0}};
    tc_tensor *res[2] = {NULL, NULL};
    const tc_tensor *in[1] = {x};
    CHECK_OK(tc_op_run(TC_OP_MAX, in, 1, &mp, res, 2));
    CHECK(tc_tensor_requires_grad(res[0]) && !tc_tensor_requires_grad(res[1]));
    tc_tensor *cmp = op2(TC_OP_GT, x, x);
    CHECK(cmp && !tc_tensor_requires_grad(cmp));
    rel(x, y, res[0], res[1]);
    rel(cmp, NULL, NULL, NULL);
}

TEST(autograd_anomaly_mode)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(-1, 4));
    CHECK(tc_autograd_set_anomaly(1) == 0);
    tc_tensor *r = NULL;
    CHECK_ERR(ct_run1(TC_OP_LOG, x, NULL, NULL, NULL, &r), TC_ERR_ARG, "anomaly: log produced NaN");
    CHECK(r == NULL);
    /* d sqrt(x)/dx at 0 times a zero gradient: 0 * inf = NaN inside SqrtBackward */
    tc_tensor *z = leaf(1, SZ(1), VALS(0)), *zero = ct_from(TC_F64, 1, SZ(1), VALS(0));
    tc_tensor *sq = op1(TC_OP_SQRT, z, NULL), *m = op2(TC_OP_MUL, sq, zero);
    CHECK_ERR(backward1(m, 0), TC_ERR_ARG, "anomaly: SqrtBackward produced NaN");
    tc_autograd_set_anomaly(0);
    rel(x, z, zero, sq);
    rel(m, NULL, NULL, NULL);
}

TEST(autograd_saved_output_no_cycle_and_double_backward)
{
    int64_t live0 = tc_autograd_live_nodes();
    tc_tensor *x = leaf(1, SZ(2), VALS(0.5, -1));
    tc_tensor *e = op1(TC_OP_EXP, x, NULL); /* ExpBackward saves its output */
    tc_tensor *s = op1(TC_OP_SUM, e, &SUM_ALL);
    const tc_tensor *outs[1] = {s}, *ins[1] = {x};
    tc_tensor *g[1] = {NULL}, *gg[1] = {NULL};
    CHECK_OK(tc_autograd_grad(outs, NULL, 1, ins, 1, 1, 1, 0, g)); /* exp(x), with history through the output */
    tc_tensor *gs = op1(TC_OP_SUM, g[0], &SUM_ALL);
    const tc_tensor *outs2[1] = {gs};
    CHECK_OK(tc_autograd_grad(outs2, NULL, 1, ins, 1, 0, 0, 0, gg));
    CHECK(gg[0] && ct_near(ct_at(gg[0], 0), exp(0.5), 1e-12) && ct_near(ct_at(gg[0], 1), exp(-1), 1e-12));
    rel(x, e, s, g[0]);
    rel(gs, gg[0], NULL, NULL);
    CHECK(tc_autograd_live_nodes() == live0); /* nothing kept alive by a node -> output -> node loop */
}

#include <pthread.h>
static void *thread_grad_mode(void *arg)
{
    *(int *)arg = tc_grad_enabled();
    return NULL;
}

TEST(autograd_grad_mode_is_per_thread)
{
    int prev = tc_set_grad_enabled(0), other = -1;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, thread_grad_mode, &other) == 0);
    pthread_join(th, NULL);
    CHECK(other == 1 && tc_grad_enabled() == 0);
    tc_set_grad_enabled(prev);
}

TEST(autograd_failed_recording_changes_nothing)
{
    tc_tensor *x = leaf(1, SZ(2), VALS(1, 2)), *one = ct_from(TC_F64, 1, SZ(2), VALS(1, 1));
    tc_tensor *y = op2(TC_OP_MUL, x, one);
    int64_t v0 = y->storage->version;
    tc_tensor *yo[1] = {y};
    const tc_tensor *yin[2] = {y, y};
    tc_debug_fail_alloc_after(1); /* the node allocation fails */
    CHECK_ERR(tc_op_run(TC_OP_MUL, yin, 2, NULL, yo, 1), TC_ERR_MEMORY, "out of memory");
    tc_debug_fail_alloc_after(2); /* the saved copy of the overwritten input fails */
    CHECK_ERR(tc_op_run(TC_OP_MUL, yin, 2, NULL, yo, 1), TC_ERR_MEMORY, "out of memory");
    tc_debug_fail_alloc_after(0);
    CHECK(SAME(y, 1, 2) && y->storage->version == v0 && strcmp(tc_tensor_grad_fn_name(y), "MulBackward") == 0);
    rel(x, one, y, NULL);
}
