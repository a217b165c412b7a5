/* test_graph_trace_shape.c -- shape-only traces (tc_trace_shape_only): the graph recorded
 * without computing anything gives the same numbers as eager mode when it runs, the trace
 * itself writes no captured tensor and draws no random number, its results read as
 * dynamic, and what needs values (data-dependent sizes, control flow) fails the trace. */
#include "trace_test_util.h"
#include "tocha_control.h"

/* One training step on captured w: loss = sum(tanh(x @ w)); w -= 0.5 * dloss/dw. */
static tc_status train_step(const tc_tensor *x, tc_tensor *w, tc_tensor **loss)
{
    tc_tensor *y = NULL, *t = NULL, *gw = NULL;
    tc_status s = ct_run1(TC_OP_MM, x, w, NULL, NULL, &y);
    if (s == TC_OK) s = ct_run1(TC_OP_TANH, y, NULL, NULL, NULL, &t);
    if (s == TC_OK) s = ct_run1(TC_OP_SUM, t, NULL, NULL, SUM_ALL, loss);
    if (s == TC_OK) s = tc_autograd_backward((const tc_tensor *const *)loss, NULL, 1, 0, 0);
    if (s == TC_OK) gw = tc_tensor_grad(w);
    if (s == TC_OK) s = tc_tensor_set_grad(w, NULL);
    if (s == TC_OK) {
        int was = tc_grad_enabled();
        tc_set_grad_enabled(0); /* the update is not recorded by autograd (an optimizer's) */
        s = op2_(TC_OP_SUB, w, gw, P(.s = {.5}));
        tc_set_grad_enabled(was);
    }
    tc_tensor_release(y), tc_tensor_release(t), tc_tensor_release(gw);
    return s;
}

TEST(graph_trace_shape_only_step_matches_eager)
{
    static const double W0[] = {.1, .2, .3, .4, -.1, -.2, -.3, -.4, .5, 0, .5, 0};
    tc_tensor *x = ct_keep(ct_from(TC_F64, 2, SZ(2, 3), VALS(1, -2, .5, 3, .25, -1)));
    tc_tensor *w = ct_keep(ct_from(TC_F64, 2, SZ(3, 4), W0));
    tc_tensor *we = ct_keep(ct_from(TC_F64, 2, SZ(3, 4), W0));
    CHECK_OK(tc_tensor_set_requires_grad(w, 1));
    CHECK_OK(tc_tensor_set_requires_grad(we, 1));
    tc_graph *g = NULL;
    tc_tensor *l = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_shape_only(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    CHECK_OK(train_step(x, w, &l));
    ct_keep(l);
    CHECK(tc_trace_is_dynamic(l) == 1);
    CHECK_OK(tc_trace_output(g, l));
    CHECK_OK(tc_trace_end(g));
    CHECK(ct_same_vals(w, W0, 12)); /* the trace updated nothing */
    CHECK(count_op(g, TC_OP_MM) >= 2 && count_op(g, TC_OP_TANH) == 1);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    for (int step = 0; step < 3; step++) { /* the graph runs the traced step, then the next ones */
        tc_tensor *o = NULL, *le = NULL;
        CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, &o, 1));
        ct_keep(o);
        CHECK_OK(train_step(x, we, &le));
        ct_keep(le);
        CHECK(same_tensor(o, le) && same_tensor(w, we));
    }
    tc_graph_free(g);
    ct_drop();
}

/* random ops: nothing is drawn while tracing; runs draw what eager mode draws */
TEST(graph_trace_shape_only_draws_nothing)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(5)));
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_new(7, &gen));
    unsigned char before[256], after[256];
    size_t n = tc_generator_get_state(gen, before, sizeof before);
    CHECK(n > 0 && n <= sizeof before);
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_shape_only(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *r = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(5), &r));
    ct_keep(r);
    tc_tensor *ro[1] = {r};
    CHECK_OK(tc_op_run(TC_OP_NORMAL, NULL, 0, P(.s = {0, 1}, .gen = gen), ro, 1));
    tc_tensor *y = ct_keep(op2(TC_OP_ADD, x, r, P(.s = {1})));
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    CHECK(tc_generator_get_state(gen, after, sizeof after) == n && memcmp(before, after, n) == 0);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *o = NULL;
    CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, &o, 1));
    ct_keep(o);
    tc_generator_seed(gen, 7);
    tc_tensor *e = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(5), &e));
    ct_keep(e);
    tc_tensor *eo[1] = {e};
    CHECK_OK(tc_op_run(TC_OP_NORMAL, NULL, 0, P(.s = {0, 1}, .gen = gen), eo, 1));
    tc_tensor *ye = ct_keep(op2(TC_OP_ADD, x, e, P(.s = {1})));
    CHECK(same_tensor(o, ye));
    tc_graph_free(g);
    tc_generator_free(gen);
    ct_drop();
}

/* results of calls on constants read as dynamic too (they were not computed) */
TEST(graph_trace_shape_only_constants_are_dynamic)
{
    for (int shape_only = 0; shape_only < 2; shape_only++) {
        tc_graph *g = NULL;
        CHECK_OK(tc_trace_begin(&g));
        CHECK_OK(tc_trace_shape_only(g, shape_only));
        tc_tensor *c = NULL;
        CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(4), &c));
        ct_keep(c);
        tc_tensor *co[1] = {c};
        CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {2}), co, 1));
        CHECK(tc_trace_is_dynamic(c) == shape_only);
        if (!shape_only) CHECK(SAME(c, 2, 2, 2, 2)); /* a computing trace's constant is real */
        CHECK_OK(tc_trace_end(g));
        tc_graph_free(g);
    }
    ct_drop();
}

TEST(graph_trace_shape_only_refusals)
{
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(1, -1, 2, -2)));
    tc_tensor *m = ct_keep(ct_from(TC_BOOL, 1, SZ(4), VALS(1, 0, 1, 0)));
    /* a data-dependent size needs the values: the trace fails, naming the op */
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_shape_only(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *zero = ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(0, 0, 0, 0)));
    tc_tensor *pos = ct_keep(op2(TC_OP_GT, x, zero, NULL));
    CHECK(pos != NULL);
    tc_tensor *r = NULL;
    CHECK_ERR(ct_run1(TC_OP_MASKED_SELECT, x, pos, NULL, NULL, &r), TC_ERR_UNSUPPORTED, "shape-only");
    CHECK(r == NULL);
    CHECK(count_op(g, TC_OP_MASKED_SELECT) == 0); /* the call's error, like any op's: nothing recorded */
    CHECK_OK(tc_trace_end(g));
    tc_graph_free(g);
    /* on a constant (a fill, not computed) and a captured mask: the same */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_shape_only(g, 1));
    tc_tensor *c = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(4), &c));
    ct_keep(c);
    tc_tensor *co[1] = {c};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {2}), co, 1));
    CHECK_ERR(ct_run1(TC_OP_MASKED_SELECT, c, m, NULL, NULL, &r), TC_ERR_UNSUPPORTED, "shape-only");
    tc_trace_end(g);
    tc_graph_free(g);
    /* control flow runs its branches on the operands' values */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_shape_only(g, 1));
    tc_graph *sub = NULL;
    CHECK_ERR(tc_control_sub_begin(&sub), TC_ERR_UNSUPPORTED, "shape-only");
    CHECK(sub == NULL && tc_trace_current() == g);
    /* only before the first recorded call; bad arguments */
    tc_tensor *y = ct_keep(op2(TC_OP_ADD, x, x, P(.s = {1})));
    CHECK(y != NULL);
    CHECK_ERR(tc_trace_shape_only(g, 0), TC_ERR_ARG, "before the first recorded call");
    CHECK_OK(tc_trace_end(g));
    CHECK_ERR(tc_trace_shape_only(g, 1), TC_ERR_ARG, "not being traced");
    CHECK_ERR(tc_trace_shape_only(NULL, 1), TC_ERR_ARG, "NULL graph");
    tc_graph_free(g);
    /* outside traces the dispatcher computes as ever */
    tc_tensor *z = ct_keep(op2(TC_OP_ADD, x, x, P(.s = {1})));
    CHECK(z && SAME(z, 2, -2, 4, -4));
    ct_drop();
}
