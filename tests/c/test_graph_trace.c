/* test_graph_trace.c -- the tracer (core/graph/trace.c): recording real op calls into the
 * graph IR. Node lists and value kinds of small traced functions, SSA of in-place calls,
 * captured tensors (externals), constants and scratch snapshots, write-backs and the
 * mutation / view / stale-header errors, a traced forward+backward (the gradient rules'
 * ops are recorded), locations, suspension, and failed calls leaving the graph unchanged. */
#include "trace_test_util.h"

TEST(graph_trace_records_a_small_function)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_tensor *w = ct_keep(ct_arange(TC_F32, 2, SZ(3, 4)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK(tc_trace_current() == g);
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = ct_keep(op2(TC_OP_MM, x, w, NULL));
    tc_tensor *t = ct_keep(op1(TC_OP_TANH, y, NULL));
    tc_tensor *s = ct_keep(op1(TC_OP_SUM, t, SUM_ALL));
    CHECK(s != NULL);
    CHECK_OK(tc_trace_output(g, s));
    CHECK_OK(tc_trace_end(g));
    CHECK(tc_trace_current() == NULL && g->trace_state == NULL);
    /* the ops ran for real */
    CHECK(ct_shape_is(y, 2, SZ(2, 4)) && ct_at(y, 0) == 20 && ct_at(y, 7) == 92);
    CHECK(g->nnodes == 3 && g->ninputs == 1 && g->noutputs == 1);
    CHECK(g->nodes[0].op == TC_OP_MM && g->nodes[1].op == TC_OP_TANH && g->nodes[2].op == TC_OP_SUM);
    CHECK(g->vals[g->inputs[0]].kind == TC_GV_INPUT);
    int32_t wv = g->nodes[0].in[1];
    CHECK(g->vals[wv].kind == TC_GV_EXTERNAL && g->vals[wv].t && g->vals[wv].t->storage == w->storage);
    CHECK(g->nodes[1].in[0] == g->nodes[0].out[0] && g->nodes[2].in[0] == g->nodes[1].out[0]);
    CHECK(g->outputs[0] == g->nodes[2].out[0] && g->vals[g->outputs[0]].ndim == 0);
    CHECK(g->nodes[2].p.i[0] == -1);
    CHECK(dump_has(g, "%2 = mm(%0, %1) : float32(2,4)"));
    CHECK(dump_has(g, "%1 : float32(3,4) external"));
    CHECK(dump_has(g, "return %4"));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_inplace_is_ssa)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(4)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = ct_keep(op1(TC_OP_EXP, x, NULL));
    CHECK_OK(op2_(TC_OP_ADD, y, x, P(.s = {2})));  /* y += 2x */
    CHECK_OK(op2_(TC_OP_MUL, y, y, NULL));         /* y *= y */
    tc_tensor *z = ct_keep(op1(TC_OP_NEG, y, NULL));
    CHECK_OK(tc_trace_output(g, z));
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    CHECK(g->nnodes == 4);
    const tc_gnode *n = g->nodes;
    CHECK(n[1].op == TC_OP_ADD && (n[1].flags & TC_GN_WAS_INPLACE) && !(n[0].flags & TC_GN_WAS_INPLACE));
    CHECK(n[1].in[0] == n[0].out[0] && n[1].in[1] == g->inputs[0]);
    CHECK(n[2].in[0] == n[1].out[0] && n[2].in[1] == n[1].out[0] && (n[2].flags & TC_GN_WAS_INPLACE));
    CHECK(n[3].in[0] == n[2].out[0]);
    CHECK(g->outputs[1] == n[2].out[0]);
    CHECK(n[1].p.s[0] == 2);
    double e1 = exp(1.0) + 2;
    CHECK_NEAR(ct_at(z, 1), -(e1 * e1), 1e-4);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_externals_constants_and_dynamic)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_tensor *w = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    CHECK(tc_trace_is_dynamic(x) == 0); /* no trace */
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    CHECK(tc_trace_is_dynamic(x) == 1 && tc_trace_is_dynamic(w) == 1);
    /* torch.zeros: a new tensor, then fill in place: a constant value */
    tc_tensor *z = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(3), &z));
    ct_keep(z);
    tc_tensor *zo[1] = {z};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {5}), zo, 1));
    CHECK(tc_trace_is_dynamic(z) == 0);
    tc_tensor *z2 = ct_keep(op1(TC_OP_EXP, z, NULL));
    CHECK(tc_trace_is_dynamic(z2) == 0);
    tc_tensor *a = ct_keep(op2(TC_OP_MUL, x, w, NULL));
    tc_tensor *b = ct_keep(op2(TC_OP_ADD, a, w, P(.s = {1})));
    tc_tensor *c = ct_keep(op2(TC_OP_ADD, b, z, P(.s = {1})));
    CHECK(tc_trace_is_dynamic(c) == 1 && tc_trace_is_dynamic(a) == 1);
    /* an alias header of w is the same captured value */
    tc_tensor *wa = NULL;
    CHECK_OK(tc_tensor_alias(w, &wa));
    ct_keep(wa);
    tc_tensor *d = ct_keep(op2(TC_OP_SUB, c, wa, P(.s = {1})));
    CHECK_OK(tc_trace_output(g, d));
    CHECK_OK(tc_trace_end(g));
    CHECK(tc_trace_is_dynamic(c) == 0); /* no trace any more */
    int ext = 0;
    for (int v = 0; v < g->nvals; v++) ext += g->vals[v].kind == TC_GV_EXTERNAL;
    CHECK(ext == 1);
    CHECK(g->nodes[0].op == TC_OP_FILL && g->nodes[0].nin == 0 && g->nodes[0].p.s[0] == 5);
    CHECK(g->nodes[2].in[1] == g->nodes[3].in[1] && g->nodes[3].in[1] == g->nodes[5].in[1]);
    CHECK(g->nodes[4].in[1] == g->nodes[0].out[0]);
    CHECK(ct_at(d, 2) == 2 * 2 + 5);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_scratch_is_snapshotted)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_tensor *sc = ct_keep(ct_from(TC_F32, 0, NULL, VALS(3)));
    sc->flags |= TC_TF_SCRATCH;
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    CHECK(tc_trace_is_dynamic(sc) == 0);
    tc_tensor *a = ct_keep(op2(TC_OP_MUL, x, sc, NULL));
    int64_t idx0[1] = {0};
    CHECK_OK(tc_tensor_set_value(sc, idx0, 5)); /* the binding reuses its scalar */
    tc_tensor *b = ct_keep(op2(TC_OP_MUL, a, sc, NULL));
    CHECK_OK(tc_trace_output(g, b));
    CHECK_OK(tc_trace_end(g));
    const tc_gval *c0 = &g->vals[g->nodes[0].in[1]], *c1 = &g->vals[g->nodes[1].in[1]];
    CHECK(c0->kind == TC_GV_CONST && c1->kind == TC_GV_CONST && c0 != c1);
    CHECK(c0->t != sc && tc_tensor_item(c0->t) == 3 && tc_tensor_item(c1->t) == 5);
    CHECK(ct_at(b, 2) == 30);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_mutation_of_captured)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_tensor *w = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(10, 20, 30)));
    tc_graph *g = NULL;
    /* refused by default: nothing written, the graph unchanged, the trace failed */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    int32_t nv = g->nvals;
    CHECK_ERR(op2_(TC_OP_ADD, w, x, P(.s = {1})), TC_ERR_ARG, "tracing mutates a captured tensor: add writes (3)");
    CHECK(SAME(w, 10, 20, 30));
    CHECK(g->nnodes == 0 && g->nvals == nv && g->nwb == 0);
    CHECK_ERR(tc_trace_end(g), TC_ERR_ARG, "tracing mutates a captured tensor");
    CHECK(tc_trace_current() == NULL);
    tc_graph_free(g);
    /* allowed: a write-back of the last value */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    CHECK_OK(op2_(TC_OP_ADD, w, x, P(.s = {1})));
    CHECK_OK(op2_(TC_OP_MUL, w, w, NULL));
    tc_tensor *r = ct_keep(op1(TC_OP_NEG, w, NULL));
    CHECK_OK(tc_trace_output(g, r));
    /* a captured tensor only written (a .grad zeroed in place) is a write-back too */
    tc_tensor *gr = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 1, 1)));
    tc_tensor *go[1] = {gr};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {0}), go, 1));
    CHECK_OK(tc_trace_end(g));
    CHECK(SAME(w, 100, 441, 1024) && SAME(gr, 0, 0, 0));
    CHECK(g->nnodes == 4 && g->nwb == 2);
    int32_t ext = g->nodes[0].in[0];
    CHECK(g->vals[ext].kind == TC_GV_EXTERNAL && g->vals[ext].t->storage == w->storage);
    CHECK(g->wb_ext[0] == ext && g->wb_val[0] == g->nodes[1].out[0]);
    CHECK(g->vals[g->wb_ext[1]].t->storage == gr->storage && g->wb_val[1] == g->nodes[3].out[0]);
    CHECK(g->nodes[2].in[0] == g->nodes[1].out[0]);
    CHECK(dump_has(g, "write %1 <- %3"));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_refuses_view_input_and_stale_writes)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_graph *g = NULL;
    /* a write into a view of another value: the view's new elements are spliced into the
     * buffer's value with index_copy */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = ct_keep(op1(TC_OP_EXP, x, NULL));
    tc_tensor *v = ct_keep(op1(TC_OP_NARROW, y, P(.i = {1, 1, 2})));
    CHECK(v && g->nnodes == 2 && g->vals[g->nodes[1].out[0]].view_of == g->nodes[0].out[0]);
    tc_tensor *vo[1] = {v};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {-1}), vo, 1));
    tc_tensor *s = ct_keep(op1(TC_OP_NEG, y, NULL));
    CHECK_OK(tc_trace_output(g, s));
    CHECK_OK(tc_trace_output(g, v));
    CHECK_OK(tc_trace_end(g));
    CHECK(g->nnodes == 8 && g->nodes[2].op == TC_OP_FILL && !(g->nodes[2].flags & TC_GN_WAS_INPLACE));
    const tc_gnode *ic = &g->nodes[5];
    CHECK(ic->op == TC_OP_INDEX_COPY && g->vals[ic->in[1]].kind == TC_GV_CONST);
    const tc_tensor *pos = ic->nin == 3 ? g->vals[ic->in[1]].t : NULL;
    CHECK(pos && SAME(pos, 1, 2, 4, 5));
    CHECK(g->nodes[7].in[0] == g->nodes[6].out[0] && g->nodes[6].op == TC_OP_VIEW);
    CHECK(g->outputs[1] == g->nodes[2].out[0]);
    CHECK(ct_at(s, 1) == 1 && ct_at(s, 2) == 1 && ct_at(s, 4) == 1 && ct_at(s, 5) == 1);
    CHECK_NEAR(ct_at(s, 3), -exp(3.0), 1e-4);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *outs[2] = {NULL, NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *const *)&x, 1, outs, 2));
    ct_keep(outs[0]), ct_keep(outs[1]);
    CHECK(outs[0] && ct_at(outs[0], 0) == -1 && ct_at(outs[0], 1) == 1 && ct_at(outs[0], 5) == 1);
    CHECK(outs[0] && ct_at(outs[0], 3) == ct_at(s, 3) && outs[1] && SAME(outs[1], -1, -1, -1, -1));
    tc_graph_free(g);
    /* views that cannot be spliced: one overlapping itself, one of a non-contiguous value */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    y = ct_keep(op1(TC_OP_EXP, x, NULL));
    tc_tensor *ex = ct_keep(op1(TC_OP_EXPAND, ct_keep(op1(TC_OP_SELECT, y, P(.i = {0, 0}))), P(.nshape = 2, .shape = {2, 3})));
    tc_tensor *eo[1] = {ex};
    double before = ct_at(y, 1);
    CHECK_ERR(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {0}), eo, 1), TC_ERR_ARG, "tracing writes into a view: fill writes (2,3)");
    CHECK(ct_at(y, 1) == before);
    tc_graph_free(g); /* frees a graph still being traced: ends it */
    CHECK(tc_trace_current() == NULL);
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *xn = ct_keep(op1(TC_OP_NARROW, x, P(.i = {0, 1, 1})));
    CHECK_ERR(op2_(TC_OP_NEG, xn, NULL, NULL), TC_ERR_ARG, "tracing mutates graph input 1: neg writes (1,3), a view of it");
    tc_graph_free(g);
    /* a write into a graph input */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    CHECK_ERR(op2_(TC_OP_EXP, x, NULL, NULL), TC_ERR_ARG, "tracing mutates graph input 1: exp writes (2,3)");
    tc_graph_free(g);
    /* a view taken before its buffer was written in place, read afterwards: named from the
     * buffer's new value, as eager mode sees it */
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    y = ct_keep(op1(TC_OP_EXP, x, NULL));
    v = ct_keep(op1(TC_OP_NARROW, y, P(.i = {1, 1, 2})));
    CHECK_OK(op2_(TC_OP_ADD, y, x, P(.s = {1})));
    tc_tensor *nv = ct_keep(op1(TC_OP_NEG, v, NULL));
    CHECK(nv && g->nnodes == 5 && g->nodes[3].op == TC_OP_NARROW && g->nodes[3].in[0] == g->nodes[2].out[0]);
    CHECK(g->nodes[3].p.i[0] == 1 && g->nodes[3].p.i[1] == 1 && g->nodes[3].p.i[2] == 2);
    CHECK(g->nodes[4].in[0] == g->nodes[3].out[0]);
    CHECK_NEAR(ct_at(nv, 3), -(exp(5.0) + 5), 1e-3);
    /* a buffer written outside tc_op_run (the version moved, no node says how): refused */
    int64_t i00[2] = {0, 0};
    CHECK_OK(tc_tensor_set_value(y, i00, 7));
    tc_tensor *bad = op1(TC_OP_NEG, v, NULL);
    CHECK(bad == NULL);
    tc_tensor_release(bad);
    CHECK(strstr(tc_last_error(), "neg: input 1 (size (2,2)) views the buffer of a traced tensor") != NULL);
    CHECK(g->trace_error == TC_ERR_ARG);
    /* after the failure ops run eagerly and are not recorded */
    int nn = g->nnodes;
    tc_tensor *n2 = ct_keep(op1(TC_OP_NEG, y, NULL));
    CHECK(n2 && g->nnodes == nn);
    CHECK_ERR(tc_trace_end(g), TC_ERR_ARG, "views the buffer of a traced tensor");
    CHECK(tc_graph_compile(g, TC_PASS_ALL) != TC_OK);
    tc_graph_free(g);
    ct_drop();
}

/* headers the binding makes without view ops (x[i], sub, squeeze/unsqueeze, a reshape) */
static tc_tensor *hdr_view(const tc_tensor *t, int64_t off, int nd, const int64_t *sz, const int64_t *st)
{
    tc_tensor *v = NULL;
    return tc_tensor_new_view(t->storage, (tc_dtype)t->dtype, off, nd, sz, st, &v) ? NULL : v;
}

TEST(graph_trace_names_views_made_without_ops)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 3, SZ(2, 3, 4)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = ct_keep(op1(TC_OP_NEG, x, NULL)); /* y[i][j][k] = -(12i + 4j + k) */
    CHECK(tc_trace_is_dynamic(ct_keep(hdr_view(y, 12, 2, SZ(3, 4), SZ(4, 1)))) == 1);
    struct {
        int64_t off;
        int nd;
        int64_t sz[3], st[3];
        tc_op first; /* the first view node expected */
        double v0;   /* element 0 of the view */
    } cases[] = {
        {12, 2, {3, 4}, {4, 1}, TC_OP_SELECT, -12},           /* y[2] */
        {12 + 4 + 1, 2, {2, 2}, {4, 1}, TC_OP_NARROW, -17},   /* y[2][{{2,3},{2,3}}] */
        {2, 2, {2, 3}, {12, 4}, TC_OP_SELECT, -2},            /* y[{{},{},3}] */
        {0, 3, {4, 3, 2}, {1, 4, 12}, TC_OP_PERMUTE, 0},      /* a reversed-dims header */
        {12, 3, {3, 1, 4}, {4, 4, 1}, TC_OP_SELECT, -12},     /* y[2]:unsqueeze(2) */
        {4, 2, {4, 3}, {3, 1}, TC_OP_VIEW, -4},               /* elements 4..15 as (4,3) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tc_tensor *h = ct_keep(hdr_view(y, cases[c].off, cases[c].nd, cases[c].sz, cases[c].st));
        int nn = g->nnodes;
        tc_tensor *r = ct_keep(op1(TC_OP_ABS, h, NULL));
        CHECK(r != NULL && g->trace_error == TC_OK);
        if (!r) break;
        CHECK(g->nnodes > nn + 1 && g->nodes[nn].op == (int32_t)cases[c].first);
        CHECK(g->nodes[g->nnodes - 1].op == TC_OP_ABS && ct_at(r, 0) == -cases[c].v0);
        CHECK(g->vals[g->nodes[g->nnodes - 2].out[0]].view_of == g->nodes[0].out[0]);
        if (!(g->nnodes > nn + 1 && g->nodes[nn].op == (int32_t)cases[c].first)) printf("  case %d\n", (int)c);
    }
    /* a header no view op chain makes (a diagonal; overlapping strides): a relative
     * as_strided view, and a write through the diagonal is spliced back into the buffer */
    tc_tensor *dg = ct_keep(hdr_view(y, 0, 1, SZ(2), SZ(12 + 4 + 1)));
    int nn = g->nnodes;
    tc_tensor *da = ct_keep(op1(TC_OP_ABS, dg, NULL));
    CHECK(da && SAME(da, 0, 17) && g->nodes[nn].op == TC_OP_AS_STRIDED && g->nodes[nn].p.i[1] == 1);
    CHECK(g->nodes[nn].p.i[0] == 0 && g->nodes[nn].p.nshape == 2 && g->nodes[nn].p.shape[1] == 17);
    tc_tensor *o = ct_keep(hdr_view(y, 0, 2, SZ(3, 4), SZ(1, 1)));
    tc_tensor *oa = ct_keep(op1(TC_OP_ABS, o, NULL));
    CHECK(oa && ct_at(oa, 0) == 0 && ct_at(oa, 5) == 2 && ct_at(oa, 11) == 5);
    tc_tensor *dgo[1] = {dg};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {9}), dgo, 1));
    tc_tensor *ya = ct_keep(op1(TC_OP_ABS, y, NULL));
    CHECK(ya && ct_at(ya, 0) == 9 && ct_at(ya, 17) == 9 && ct_at(ya, 1) == 1);
    CHECK(g->nodes[g->nnodes - 3].op == TC_OP_INDEX_COPY && g->nodes[g->nnodes - 1].in[0] == g->nodes[g->nnodes - 2].out[0]);
    tc_tensor *oo[1] = {o};
    CHECK_ERR(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {0}), oo, 1), TC_ERR_ARG, "tracing writes into a view: fill writes (3,4)");
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_captured_regions)
{
    /* two parameters in one flat buffer: writing one leaves the other readable */
    tc_tensor *flat = ct_keep(ct_arange(TC_F32, 1, SZ(6)));
    tc_tensor *p1 = ct_keep(hdr_view(flat, 0, 1, SZ(3), SZ(1)));
    tc_tensor *p2 = ct_keep(hdr_view(flat, 3, 1, SZ(3), SZ(1)));
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *a = ct_keep(op2(TC_OP_MUL, p1, x, NULL));
    CHECK_OK(op2_(TC_OP_ADD, p1, x, P(.s = {1})));
    tc_tensor *b = ct_keep(op2(TC_OP_MUL, p2, a, NULL)); /* p2 unseen until now: fine */
    CHECK(b != NULL && g->nwb == 1);
    tc_tensor *all = ct_keep(hdr_view(flat, 0, 1, SZ(6), SZ(1)));
    tc_tensor *bad = op1(TC_OP_NEG, all, NULL); /* overlaps the written p1 */
    CHECK(bad == NULL && strstr(tc_last_error(), "neg: input 1 (size (6)) views the buffer"));
    tc_tensor_release(bad);
    CHECK_ERR(tc_trace_end(g), TC_ERR_ARG, "views the buffer");
    int ext = 0;
    for (int v = 0; v < g->nvals; v++) ext += g->vals[v].kind == TC_GV_EXTERNAL;
    CHECK(ext == 2);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_begin_input_output_errors)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_graph *g = NULL, *h = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_ERR(tc_trace_begin(&h), TC_ERR_ARG, "a trace is already active");
    CHECK(h == NULL && tc_trace_current() == g);
    tc_tensor *y = ct_keep(op1(TC_OP_EXP, x, NULL));
    CHECK_ERR(tc_trace_input(g, x), TC_ERR_ARG, "trace input 1: this tensor (or another view of its storage) was already used");
    CHECK(y != NULL);
    tc_tensor *z = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    CHECK_OK(tc_trace_input(g, z));
    CHECK_ERR(tc_trace_input(g, z), TC_ERR_ARG, "already declared as an input");
    CHECK_ERR(tc_trace_output(g, NULL), TC_ERR_ARG, "NULL");
    CHECK_OK(tc_trace_end(g));
    CHECK_ERR(tc_trace_end(g), TC_ERR_ARG, "not being traced");
    CHECK_ERR(tc_trace_input(g, z), TC_ERR_ARG, "not being traced");
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_failed_op_leaves_graph_unchanged)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_tensor *w = ct_keep(ct_arange(TC_F32, 2, SZ(4, 5)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = ct_keep(op1(TC_OP_EXP, x, NULL));
    int32_t nv = g->nvals, nn = g->nnodes;
    tc_tensor *r = NULL;
    CHECK_ERR(ct_run1(TC_OP_MM, y, w, NULL, NULL, &r), TC_ERR_SHAPE, "mm");
    CHECK(r == NULL && g->nvals == nv && g->nnodes == nn && g->trace_error == TC_OK);
    /* w was not kept as an external: a later use makes exactly one */
    tc_tensor *wt = ct_keep(ct_transposed(w, 0, 1));
    CHECK(wt && g->nvals == nv + 2 && g->vals[nv].kind == TC_GV_EXTERNAL);
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_views_locations_suspend)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    CHECK_OK(tc_trace_set_location("f.lua:3"));
    tc_tensor *t = ct_keep(ct_transposed(x, 0, 1));
    tc_tensor *tt = ct_keep(ct_transposed(t, 0, 1)); /* x's own geometry: no new value */
    tc_tensor *e = ct_keep(op1(TC_OP_EXP, tt, NULL));
    CHECK_OK(tc_trace_set_location("f.lua:4"));
    tc_graph *s = tc_trace_suspend();
    CHECK(s == g && tc_trace_current() == NULL);
    tc_tensor *hidden = ct_keep(op1(TC_OP_NEG, e, NULL)); /* not recorded */
    tc_trace_resume(s);
    CHECK(tc_trace_current() == g && hidden != NULL);
    tc_tensor *f = ct_keep(op2(TC_OP_ADD, e, t, P(.s = {1})));
    CHECK(f == NULL); /* (2,3) + (3,2): a shape error, nothing recorded */
    tc_tensor *f2 = ct_keep(op1(TC_OP_SIGMOID, t, NULL));
    CHECK_OK(tc_trace_output(g, e));
    CHECK_OK(tc_trace_output(g, f2));
    CHECK_OK(tc_trace_end(g));
    CHECK(g->nnodes == 3);
    CHECK(g->nodes[0].op == TC_OP_TRANSPOSE && g->nodes[1].op == TC_OP_EXP && g->nodes[2].op == TC_OP_SIGMOID);
    CHECK(g->nodes[1].in[0] == g->inputs[0]);
    CHECK(g->nodes[2].in[0] == g->nodes[0].out[0] && g->vals[g->nodes[0].out[0]].view_of == g->inputs[0]);
    CHECK(g->nodes[0].where == g->nodes[1].where && strcmp(g->nodes[0].where, "f.lua:3") == 0);
    CHECK(strcmp(g->nodes[2].where, "f.lua:4") == 0);
    CHECK(dump_has(g, "sigmoid(%1) : float32(3,2)  # f.lua:4"));
    tc_graph_free(g);
    ct_drop();
}

/* loss = sum(tanh(x @ W)); backward inside the trace records the rules' ops */
TEST(graph_trace_forward_and_backward)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3)));
    tc_tensor *w = ct_keep(ct_from(TC_F32, 2, SZ(3, 4), VALS(.1, .2, .3, .4, -.1, -.2, -.3, -.4, .5, 0, .5, 0)));
    CHECK_OK(tc_tensor_set_requires_grad(w, 1));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = ct_keep(op2(TC_OP_MM, x, w, NULL));
    tc_tensor *t = ct_keep(op1(TC_OP_TANH, y, NULL));
    tc_tensor *l = ct_keep(op1(TC_OP_SUM, t, SUM_ALL));
    CHECK(l && (l->flags & TC_TF_REQUIRES_GRAD));
    int nfwd = g->nnodes;
    CHECK_OK(tc_autograd_backward((const tc_tensor *const *)&l, NULL, 1, 0, 0));
    tc_tensor *gw = ct_keep(tc_tensor_grad(w));
    CHECK(gw != NULL);
    CHECK_OK(tc_trace_output(g, l));
    CHECK_OK(tc_trace_output(g, gw));
    CHECK_OK(tc_trace_end(g));
    CHECK(nfwd == 3 && g->nnodes > nfwd);
    CHECK(count_op(g, TC_OP_MM) == 2 && count_op(g, TC_OP_TRANSPOSE) >= 1);
    /* the gradient's mm reads a transposed view of the input x, and the seed is a fill */
    int found = 0;
    for (int i = nfwd; i < g->nnodes; i++) {
        const tc_gnode *n = &g->nodes[i];
        if (n->op != TC_OP_MM) continue;
        const tc_gval *a = &g->vals[n->in[0]];
        found = a->kind == TC_GV_OP && g->nodes[a->producer].op == TC_OP_TRANSPOSE &&
                g->nodes[a->producer].in[0] == g->inputs[0];
    }
    CHECK(found);
    CHECK(count_op(g, TC_OP_FILL) >= 1);
    /* saved tensors and the seed are known values: W is the only captured tensor, besides the
     * 0-dim constants a rule builds by hand (tc_g_scalar) until gops.c flags them scratch */
    int ext = 0, extw = 0;
    for (int v = 0; v < g->nvals; v++) {
        const tc_gval *x = &g->vals[v];
        if (x->kind != TC_GV_EXTERNAL) continue;
        if (x->t->storage == w->storage) extw++;
        else ext += x->ndim != 0 || tc_tensor_item(x->t) != 1;
    }
    CHECK(extw == 1 && ext == 0);
    CHECK(g->nodes[nfwd].op == TC_OP_FILL && g->nodes[nfwd].nin == 0 && g->nodes[nfwd].p.s[0] == 1);
    const tc_gval *go = &g->vals[g->outputs[1]];
    CHECK(go->kind == TC_GV_OP && go->ndim == 2 && go->size[0] == 3 && go->size[1] == 4);
    /* eager gradient: gW = x^T (1 - tanh(y)^2) */
    double want = 0;
    for (int r = 0; r < 2; r++) {
        double th = tanh(ct_at(y, r * 4 + 1));
        want += ct_at(x, r * 3 + 2) * (1 - th * th);
    }
    CHECK_NEAR(ct_at(gw, 2 * 4 + 1), want, 1e-5);
    tc_graph_free(g);
    ct_drop();
}

/* an in-place call overwriting an input its gradient rule saves: autograd's copy is recorded */
TEST(graph_trace_records_autograd_saved_copies)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_tensor *w = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(.5, 1, 2)));
    CHECK_OK(tc_tensor_set_requires_grad(w, 1));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *a = ct_keep(op1(TC_OP_NEG, w, NULL));
    CHECK_OK(op2_(TC_OP_MUL, a, x, NULL)); /* a *= x: mul saves a, which it overwrites */
    tc_tensor *l = ct_keep(op1(TC_OP_SUM, a, SUM_ALL));
    CHECK_OK(tc_autograd_backward((const tc_tensor *const *)&l, NULL, 1, 0, 0));
    tc_tensor *gw = ct_keep(tc_tensor_grad(w));
    CHECK_OK(tc_trace_output(g, gw));
    CHECK_OK(tc_trace_end(g));
    CHECK(g->nodes[1].op == TC_OP_COPY && g->nodes[1].in[0] == g->nodes[0].out[0]);
    CHECK(g->nodes[2].op == TC_OP_MUL && (g->nodes[2].flags & TC_GN_WAS_INPLACE));
    int ext = 0;
    for (int v = 0; v < g->nvals; v++) ext += g->vals[v].kind == TC_GV_EXTERNAL;
    CHECK(ext == 1);
    CHECK(SAME(gw, 0, -1, -2));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_trace_lookup_bind_find)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_tensor *c = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    CHECK(tc_trace_find(g, x) == g->inputs[0] && tc_trace_find(g, c) == -1);
    CHECK(tc_trace_knows(x) == 1 && tc_trace_knows(c) == 0);
    int32_t v = -1, v2 = -1;
    CHECK_OK(tc_trace_lookup(g, c, &v));
    CHECK_OK(tc_trace_lookup(g, c, &v2));
    CHECK(v >= 0 && v == v2 && g->vals[v].kind == TC_GV_EXTERNAL);
    /* a value some non-op node produced, bound to a tensor */
    int32_t out = -1;
    CHECK_OK(tc_graph_add_op(g, TC_OP_NEG, &v, 1, NULL, &out));
    tc_tensor *r = ct_keep(ct_arange(TC_F32, 1, SZ(3)));
    CHECK_OK(tc_trace_bind(g, r, out));
    CHECK(tc_trace_find(g, r) == out);
    tc_tensor *bad = ct_keep(ct_arange(TC_F32, 1, SZ(4)));
    CHECK_ERR(tc_trace_bind(g, bad, out), TC_ERR_SHAPE, "does not match");
    tc_tensor *e = ct_keep(op1(TC_OP_EXP, r, NULL));
    CHECK(e && g->nodes[g->nnodes - 1].in[0] == out);
    CHECK(tc_trace_knows(c) == 1 && tc_trace_knows(e) == 1);
    CHECK_OK(tc_trace_end(g));
    CHECK(tc_trace_knows(x) == 0);
    tc_graph_free(g);
    ct_drop();
}
