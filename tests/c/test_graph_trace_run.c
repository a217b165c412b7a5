/* test_graph_trace_run.c -- traced graphs run through the compiler and executor give
 * eager mode's numbers: a forward+backward, write-backs into captured tensors, random ops
 * (the same draws), writes through views of captured tensors, location-independent
 * as_strided views, and the tracer dropping storages that died while tracing. */
#include "trace_test_util.h"

/* ---- running traced graphs: the same numbers as eager mode ---------------------------- */

/* loss = sum(tanh(x @ W)), backward: the graph returns loss and dW for any x */
static tc_status fwd_bwd(const tc_tensor *x, tc_tensor *w, tc_tensor **loss, tc_tensor **gw)
{
    tc_tensor *y = NULL, *t = NULL;
    tc_status s = ct_run1(TC_OP_MM, x, w, NULL, NULL, &y);
    if (s == TC_OK) s = ct_run1(TC_OP_TANH, y, NULL, NULL, NULL, &t);
    if (s == TC_OK) s = ct_run1(TC_OP_SUM, t, NULL, NULL, SUM_ALL, loss);
    if (s == TC_OK) s = tc_autograd_backward((const tc_tensor *const *)loss, NULL, 1, 0, 0);
    if (s == TC_OK) *gw = tc_tensor_grad(w);
    if (s == TC_OK) s = tc_tensor_set_grad(w, NULL);
    tc_tensor_release(y), tc_tensor_release(t);
    return s;
}

TEST(graph_trace_run_forward_backward_matches_eager)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_tensor *w = ct_keep(ct_from(TC_F32, 2, SZ(3, 4), VALS(.1, .2, .3, .4, -.1, -.2, -.3, -.4, .5, 0, .5, 0)));
    CHECK_OK(tc_tensor_set_requires_grad(w, 1));
    tc_graph *g = NULL;
    tc_tensor *l = NULL, *gw = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    CHECK_OK(fwd_bwd(x, w, &l, &gw));
    ct_keep(l), ct_keep(gw);
    CHECK_OK(tc_trace_output(g, l));
    CHECK_OK(tc_trace_output(g, gw));
    CHECK_OK(tc_trace_end(g));
    for (int passes = 0; passes < 2; passes++) {
        if (passes == 1) {
            tc_graph_free(g);
            g = NULL;
            CHECK_OK(tc_trace_begin(&g));
            CHECK_OK(tc_trace_input(g, x));
            tc_tensor *l2 = NULL, *gw2 = NULL;
            CHECK_OK(fwd_bwd(x, w, &l2, &gw2));
            ct_keep(l2), ct_keep(gw2);
            CHECK_OK(tc_trace_output(g, l2));
            CHECK_OK(tc_trace_output(g, gw2));
            CHECK_OK(tc_trace_end(g));
        }
        CHECK_OK(tc_graph_compile(g, passes ? TC_PASS_ALL : 0));
        /* new inputs, and a changed captured W: read by reference */
        tc_tensor *x2 = ct_keep(ct_from(TC_F32, 2, SZ(2, 3), VALS(1, -2, .5, 3, .25, -1)));
        int64_t i0[2] = {0, 0};
        CHECK_OK(tc_tensor_set_value(w, i0, .7 + passes));
        tc_tensor *outs[2] = {NULL, NULL};
        CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x2, 1, outs, 2));
        ct_keep(outs[0]), ct_keep(outs[1]);
        tc_tensor *el = NULL, *egw = NULL;
        CHECK_OK(fwd_bwd(x2, w, &el, &egw));
        ct_keep(el), ct_keep(egw);
        CHECK(same_tensor(outs[0], el) && same_tensor(outs[1], egw));
    }
    tc_graph_free(g);
    ct_drop();
}

/* a training-style update of captured tensors: w -= 0.5 * (w * x), twice */
TEST(graph_trace_run_writebacks_match_eager)
{
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(.5, -1, 2)));
    tc_tensor *w = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)));
    tc_tensor *we = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *d = ct_keep(op2(TC_OP_MUL, w, x, NULL));
    CHECK_OK(op2_(TC_OP_SUB, w, d, P(.s = {.5})));
    tc_tensor *n = ct_keep(op1(TC_OP_SUM, w, SUM_ALL));
    CHECK_OK(tc_trace_output(g, n));
    CHECK_OK(tc_trace_end(g));
    /* eager copy of the same step for the reference */
    tc_tensor *de = ct_keep(op2(TC_OP_MUL, we, x, NULL));
    CHECK_OK(op2_(TC_OP_SUB, we, de, P(.s = {.5})));
    CHECK(same_tensor(w, we));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    for (int step = 0; step < 2; step++) {
        tc_tensor *o = NULL;
        CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, &o, 1));
        ct_keep(o);
        tc_tensor *de2 = ct_keep(op2(TC_OP_MUL, we, x, NULL));
        CHECK_OK(op2_(TC_OP_SUB, we, de2, P(.s = {.5})));
        tc_tensor *ne = ct_keep(op1(TC_OP_SUM, we, SUM_ALL));
        CHECK(same_tensor(w, we) && same_tensor(o, ne));
    }
    tc_graph_free(g);
    ct_drop();
}

/* random ops draw from the generator at run time, in the eager order */
TEST(graph_trace_run_random_matches_eager)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(5)));
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_new(7, &gen));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *r = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(5), &r));
    ct_keep(r);
    tc_tensor *ro[1] = {r};
    CHECK_OK(tc_op_run(TC_OP_NORMAL, NULL, 0, P(.s = {0, 1}, .gen = gen), ro, 1));
    CHECK(tc_trace_is_dynamic(r) == 1);
    tc_tensor *y = ct_keep(op2(TC_OP_ADD, x, r, P(.s = {1})));
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    CHECK(g->nodes[0].op == TC_OP_NORMAL && (g->nodes[0].flags & TC_GN_RANDOM));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    for (int k = 0; k < 2; k++) {
        tc_generator_seed(gen, 11 + k);
        tc_tensor *o = NULL;
        CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, &o, 1));
        ct_keep(o);
        tc_generator_seed(gen, 11 + k);
        tc_tensor *e = NULL;
        CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(5), &e));
        ct_keep(e);
        tc_tensor *eo[1] = {e};
        CHECK_OK(tc_op_run(TC_OP_NORMAL, NULL, 0, P(.s = {0, 1}, .gen = gen), eo, 1));
        tc_tensor *ye = ct_keep(op2(TC_OP_ADD, x, e, P(.s = {1})));
        CHECK(same_tensor(o, ye));
    }
    tc_graph_free(g);
    tc_generator_free(gen);
    ct_drop();
}

/* a write into a view of a captured tensor: a write-back of the whole tensor */
TEST(graph_trace_view_write_into_captured)
{
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)));
    tc_tensor *w = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *row = ct_keep(op1(TC_OP_SELECT, w, P(.i = {0, 1})));
    CHECK_ERR(op2_(TC_OP_ADD, row, x, P(.s = {1})), TC_ERR_ARG, "tracing mutates a captured tensor: add writes (3), a view of it");
    CHECK(SAME(w, 0, 1, 2, 3, 4, 5));
    tc_graph_free(g);
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    row = ct_keep(op1(TC_OP_SELECT, w, P(.i = {0, 1})));
    CHECK_OK(op2_(TC_OP_ADD, row, x, P(.s = {1})));
    tc_tensor *sm = ct_keep(op1(TC_OP_SUM, w, SUM_ALL));
    CHECK_OK(tc_trace_output(g, sm));
    CHECK_OK(tc_trace_end(g));
    CHECK(SAME(w, 0, 1, 2, 4, 6, 8) && tc_tensor_item(sm) == 21);
    CHECK(g->nwb == 1 && g->vals[g->wb_ext[0]].t->storage == w->storage);
    CHECK(g->nodes[g->wb_val[0] >= 0 ? g->vals[g->wb_val[0]].producer : 0].op == TC_OP_VIEW);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *o = NULL;
    CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, &o, 1));
    ct_keep(o);
    CHECK(SAME(w, 0, 1, 2, 5, 8, 11) && o && tc_tensor_item(o) == 27);
    tc_graph_free(g);
    ct_drop();
}

/* as_strided takes an absolute offset: recorded in its relative mode (i1 = 1), so the graph
 * reads the right elements when that buffer lives at another place at run time */
TEST(graph_trace_as_strided_is_location_independent)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(3, 4)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *a = ct_keep(op1(TC_OP_NEG, x, NULL));
    tc_tensor *b = ct_keep(op1(TC_OP_EXP, a, NULL)); /* a second buffer, so b sits after a */
    tc_tensor *s1 = ct_keep(op1(TC_OP_AS_STRIDED, b, P(.i = {5}, .nshape = 4, .shape = {2, 2, 4, 1})));
    tc_tensor *s2 = ct_keep(op1(TC_OP_AS_STRIDED, b, P(.i = {0}, .nshape = 2, .shape = {3, 5})));
    tc_tensor *r1 = ct_keep(op1(TC_OP_NEG, s1, NULL));
    tc_tensor *r2 = ct_keep(op1(TC_OP_NEG, s2, NULL));
    CHECK_OK(tc_trace_output(g, r1));
    CHECK_OK(tc_trace_output(g, r2));
    CHECK_OK(tc_trace_output(g, a));
    CHECK_OK(tc_trace_end(g));
    CHECK(count_op(g, TC_OP_AS_STRIDED) == 2);
    for (int n = 0; n < g->nnodes; n++)
        if (g->nodes[n].op == TC_OP_AS_STRIDED) CHECK(g->nodes[n].p.i[1] == 1 && g->nodes[n].in[0] == g->nodes[1].out[0]);
    CHECK(g->nodes[2].p.i[0] == 5 - b->offset);
    CHECK_NEAR(ct_at(r1, 3), -exp(-10.0), 1e-9);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *x2 = ct_keep(ct_from(TC_F32, 2, SZ(3, 4), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)));
    tc_tensor *outs[3] = {NULL, NULL, NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x2, 1, outs, 3));
    ct_keep(outs[0]), ct_keep(outs[1]), ct_keep(outs[2]);
    tc_tensor *ea = ct_keep(op1(TC_OP_NEG, x2, NULL)), *eb = ct_keep(op1(TC_OP_EXP, ea, NULL));
    tc_tensor *e1 = ct_keep(op1(TC_OP_NEG, ct_keep(op1(TC_OP_AS_STRIDED, eb, P(.i = {5}, .nshape = 4, .shape = {2, 2, 4, 1}))), NULL));
    tc_tensor *e2 = ct_keep(op1(TC_OP_NEG, ct_keep(op1(TC_OP_AS_STRIDED, eb, P(.i = {0}, .nshape = 2, .shape = {3, 5}))), NULL));
    CHECK(same_tensor(outs[0], e1) && same_tensor(outs[1], e2) && same_tensor(outs[2], ea));
    tc_graph_free(g);
    ct_drop();
}

/* a long trace does not keep its dead temporaries: storages only the trace holds are
 * dropped (keys first, so a reused address cannot match a dead key) */
TEST(graph_trace_drops_dead_storages)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F64, 1, SZ(1000)));
    tc_memstats m0, m1;
    tc_memory_stats(&m0);
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = NULL;
    CHECK_OK(ct_run1(TC_OP_MUL, x, x, NULL, NULL, &y));
    for (int k = 0; k < 1500 && y; k++) {
        tc_tensor *z = NULL;
        CHECK_OK(ct_run1(TC_OP_ADD, y, x, NULL, P(.s = {1}), &z));
        tc_tensor_release(y);
        y = z;
    }
    tc_memory_stats(&m1);
    CHECK(m1.storages_live - m0.storages_live < 400);
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    ct_keep(y);
    CHECK(g->nnodes == 1501 && ct_at(y, 3) == 9 + 1500 * 3);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *o = NULL;
    CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, &o, 1));
    ct_keep(o);
    CHECK(same_tensor(o, y));
    tc_graph_free(g);
    ct_drop();
}
