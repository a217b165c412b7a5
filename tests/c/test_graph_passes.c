/* test_graph_passes.c -- dead-code elimination, CSE and constant folding
 * (core/graph/{dce,cse,fold}.c; simplification is in test_graph_simplify.c, helpers in
 * graph_test_util.h) on small hand-built graphs, and the whole pipeline: node
 * counts and the node list after each pass, the report line, results identical before and
 * after (a small interpreter runs the live nodes with tc_op_exec), and the cases that must
 * NOT change (random nodes, externals, float x*0, add with a scale, as_strided readers). */
#include "graph_test_util.h"

/* ---- dce ----------------------------------------------------------------------------------- */

TEST(graph_dce_removes_unread_chains)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3));
    int32_t a = op1(g, TC_OP_EXP, x, NULL);
    int32_t b = op1(g, TC_OP_NEG, a, NULL);                       /* read only by dead nodes */
    int32_t t = op1(g, TC_OP_TRANSPOSE, b, P(.i = {0, 1}));       /* dead view */
    op1(g, TC_OP_SIN, t, NULL);                                   /* dead */
    int32_t y = op1(g, TC_OP_TANH, x, NULL);
    CHECK(y >= 0);
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK(tc_graph_live_nodes(g) == 5);
    tc_tensor *in = ct_arange(TC_F32, 2, SZ(2, 3));
    CHECK(same_results(g, tc_pass_dce, &in, NULL));
    CHECK(tc_graph_live_nodes(g) == 1 && g->nnodes == 1 && g->nodes[0].op == TC_OP_TANH);
    CHECK(g->nvals == 2); /* x and tanh's result: compaction dropped the rest */
    CHECK(dump_has(g, "%1 = tanh(%0)") && dump_has(g, "return %1"));
    CHECK(report_has(g, "dce        nodes 5 -> 1 (4 removed)"));
    /* a second run finds nothing and compacts nothing */
    CHECK_OK(tc_pass_dce(g));
    CHECK(g->nnodes == 1 && report_has(g, "nodes 1 -> 1"));
    tc_tensor_release(in);
    tc_graph_free(g);
    (void)a;
}

/* Unused random nodes stay: removing one would shift every later draw (eager draws it). */
TEST(graph_dce_keeps_unused_random_nodes)
{
    tc_generator *gen;
    CHECK_OK(tc_generator_new(1, &gen));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    tc_params up = {.s = {0, 1}, .gen = gen};
    int32_t p = cst(g, TC_F32, 1, SZ(4), VALS(0.5, 0.5, 0.5, 0.5));
    int32_t mask = node_typed(g, TC_OP_BERNOULLI, &p, 1, &up, TC_F32, 1, SZ(4)); /* unused dropout mask */
    int32_t scaled = op2(g, TC_OP_MUL, mask, p, NULL);                           /* unused, not random */
    int32_t u = node_typed(g, TC_OP_UNIFORM, NULL, 0, &up, TC_F32, 1, SZ(4));
    CHECK(scaled >= 0 && u >= 0);
    CHECK_OK(tc_graph_mark_output(g, u));
    CHECK(same_results(g, tc_pass_dce, NULL, gen));
    CHECK(tc_graph_live_nodes(g) == 2 && count_op(g, TC_OP_BERNOULLI) == 1 && count_op(g, TC_OP_MUL) == 0);
    CHECK(report_has(g, "3 -> 2") && report_has(g, "1 unused random node kept"));
    /* and the graph's uniform draws what eager draws after the mask */
    tc_tensor *r[1] = {NULL}, *pt = g->nodes[0].nin ? g->vals[g->nodes[0].in[0]].t : NULL, *m = NULL, *e = NULL;
    CHECK(pt != NULL);
    if (!pt) return;
    tc_generator_seed(gen, 7);
    CHECK_OK(interp(g, NULL, r));
    tc_generator_seed(gen, 7);
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(4), &m));
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(4), &e));
    const tc_tensor *pin[1] = {pt};
    CHECK_OK(tc_op_exec(TC_OP_BERNOULLI, pin, 1, &up, &m, 1));
    CHECK_OK(tc_op_exec(TC_OP_UNIFORM, NULL, 0, &up, &e, 1));
    CHECK(same_bits(r[0], e));
    tc_tensor_release(r[0]), tc_tensor_release(m), tc_tensor_release(e);
    tc_graph_free(g);
    tc_generator_free(gen);
}

TEST(graph_dce_keeps_write_back_sources)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    tc_tensor *w = ct_arange(TC_F32, 1, SZ(3));
    int32_t x = input(g, TC_F32, 1, SZ(3)), e = ext(g, w);
    int32_t upd = op2(g, TC_OP_ADD, e, x, P(.s = {-0.5}));  /* w:add(-0.5, x), written back */
    op1(g, TC_OP_EXP, upd, NULL);                            /* dead */
    int32_t y = op1(g, TC_OP_SUM, x, P(.i = {-1}));
    CHECK_OK(tc_graph_add_writeback(g, e, upd));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_pass_dce(g));
    CHECK(tc_graph_live_nodes(g) == 2 && count_op(g, TC_OP_ADD) == 1 && count_op(g, TC_OP_EXP) == 0);
    CHECK(g->nwb == 1 && g->vals[g->wb_val[0]].producer >= 0 && g->vals[g->wb_ext[0]].t == w);
    CHECK(dump_has(g, "write %1 <- %2"));
    CHECK_ERR(tc_pass_dce(NULL), TC_ERR_ARG, "dce");
    tc_graph_free(g);
    tc_tensor_release(w);
}

/* ---- cse ----------------------------------------------------------------------------------- */

TEST(graph_cse_merges_equal_nodes_in_either_order)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3)), y = input(g, TC_F32, 2, SZ(2, 3));
    int32_t a1 = op2(g, TC_OP_ADD, x, y, P(.s = {1}));
    int32_t a2 = op2(g, TC_OP_ADD, y, x, P(.s = {1})); /* add with scale 1 commutes */
    int32_t m1 = op2(g, TC_OP_MUL, a1, x, NULL);
    int32_t m2 = op2(g, TC_OP_MUL, x, a2, NULL);      /* merges once a2 is a1 */
    int32_t t1 = op1(g, TC_OP_TRANSPOSE, m1, P(.i = {0, 1}));
    int32_t t2 = op1(g, TC_OP_TRANSPOSE, m2, P(.i = {0, 1}));
    int32_t s = op2(g, TC_OP_SUB, t1, t2, P(.s = {1}));
    CHECK(s >= 0);
    CHECK_OK(tc_graph_mark_output(g, s));
    CHECK_OK(tc_graph_mark_output(g, t2));
    tc_tensor *in[2] = {ct_arange(TC_F32, 2, SZ(2, 3)), ct_from(TC_F32, 2, SZ(2, 3), VALS(1, -2, 3.5, 0.25, 1e30, -7))};
    CHECK(tc_graph_live_nodes(g) == 7);
    CHECK(same_results(g, tc_pass_cse, in, NULL));
    CHECK(tc_graph_live_nodes(g) == 4);
    CHECK(count_op(g, TC_OP_ADD) == 1 && count_op(g, TC_OP_MUL) == 1 && count_op(g, TC_OP_TRANSPOSE) == 1);
    CHECK(g->nodes[3].op == TC_OP_SUB && g->nodes[3].in[0] == g->nodes[3].in[1]);
    CHECK(g->outputs[1] == g->nodes[2].out[0]); /* the output now reads the surviving transpose */
    CHECK(report_has(g, "cse        nodes 7 -> 4 (3 removed)"));
    tc_tensor_release(in[0]), tc_tensor_release(in[1]);
    tc_graph_free(g);
}

/* A view of a merged value views the survivor's buffer (memory planning reads view_of). */
TEST(graph_cse_views_follow_the_survivor)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3));
    int32_t e1 = op1(g, TC_OP_EXP, x, NULL), e2 = op1(g, TC_OP_EXP, x, NULL);
    int32_t v = op1(g, TC_OP_TRANSPOSE, op1(g, TC_OP_NARROW, e2, P(.i = {1, 1, 2})), P(.i = {0, 1}));
    CHECK_OK(tc_graph_mark_output(g, e1));
    CHECK_OK(tc_graph_mark_output(g, v));
    CHECK(g->vals[v].view_of == e2);
    CHECK_OK(tc_pass_cse(g));
    CHECK(tc_graph_live_nodes(g) == 3 && g->vals[g->outputs[1]].view_of == g->outputs[0]);
    CHECK(g->vals[g->nodes[1].out[0]].view_of == g->outputs[0]);
    tc_graph_free(g);
}

/* add computes a + s0*b: with s0 != 1 the operand order matters. */
TEST(graph_cse_add_with_scale_does_not_commute)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 1, SZ(3)), y = input(g, TC_F32, 1, SZ(3));
    int32_t a1 = op2(g, TC_OP_ADD, x, y, P(.s = {2}));
    int32_t a2 = op2(g, TC_OP_ADD, y, x, P(.s = {2}));
    int32_t a3 = op2(g, TC_OP_ADD, x, y, P(.s = {-2}));  /* other params */
    int32_t r1 = op1(g, TC_OP_SUM, a1, P(.i = {0}));
    int32_t r2 = op1(g, TC_OP_SUM, a1, P(.i = {-1}));   /* other dim */
    int32_t lt1 = op2(g, TC_OP_LT, x, y, NULL), lt2 = op2(g, TC_OP_LT, y, x, NULL); /* not commutative */
    int32_t outs[] = {a1, a2, a3, r1, r2, lt1, lt2};
    for (int i = 0; i < 7; i++) CHECK_OK(tc_graph_mark_output(g, outs[i]));
    tc_tensor *in[2] = {ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)), ct_from(TC_F32, 1, SZ(3), VALS(10, 20, 30))};
    CHECK(same_results(g, tc_pass_cse, in, NULL));
    CHECK(tc_graph_live_nodes(g) == 7 && count_op(g, TC_OP_ADD) == 3);
    tc_tensor *r[7] = {0};
    CHECK_OK(interp(g, in, r));
    CHECK(SAME(r[0], 21, 42, 63) && SAME(r[1], 12, 24, 36));
    for (int i = 0; i < 7; i++) tc_tensor_release(r[i]);
    tc_tensor_release(in[0]), tc_tensor_release(in[1]);
    tc_graph_free(g);
}

/* cmax(+0, -0) is -0 but cmax(-0, +0) is +0: floats do not commute, integers do. */
TEST(graph_cse_cmax_commutes_only_for_integers)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 1, SZ(2)), y = input(g, TC_F32, 1, SZ(2));
    int32_t i = input(g, TC_I32, 1, SZ(2)), j = input(g, TC_I32, 1, SZ(2));
    int32_t o[4] = {op2(g, TC_OP_MAXIMUM, x, y, NULL), op2(g, TC_OP_MAXIMUM, y, x, NULL),
                    op2(g, TC_OP_MAXIMUM, i, j, NULL), op2(g, TC_OP_MAXIMUM, j, i, NULL)};
    for (int k = 0; k < 4; k++) CHECK_OK(tc_graph_mark_output(g, o[k]));
    tc_tensor *in[4] = {ct_from(TC_F32, 1, SZ(2), VALS(0.0, -0.0)), ct_from(TC_F32, 1, SZ(2), VALS(-0.0, 0.0)),
                        ct_from(TC_I32, 1, SZ(2), VALS(1, 5)), ct_from(TC_I32, 1, SZ(2), VALS(3, 2))};
    CHECK(same_results(g, tc_pass_cse, in, NULL));
    CHECK(tc_graph_live_nodes(g) == 3 && g->outputs[2] == g->outputs[3] && g->outputs[0] != g->outputs[1]);
    /* the float pair really differs in the sign of zero */
    tc_tensor *r[4] = {0};
    CHECK_OK(interp(g, in, r));
    CHECK(signbit(ct_at(r[0], 0)) && !signbit(ct_at(r[1], 0)));
    for (int k = 0; k < 4; k++) tc_tensor_release(r[k]), tc_tensor_release(in[k]);
    tc_graph_free(g);
}

TEST(graph_cse_never_merges_random_nodes)
{
    tc_generator *gen;
    CHECK_OK(tc_generator_new(3, &gen));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    tc_params up = {.s = {0, 1}, .gen = gen};
    int32_t p = input(g, TC_F32, 1, SZ(5));
    int32_t m1 = node_typed(g, TC_OP_BERNOULLI, &p, 1, &up, TC_F32, 1, SZ(5));
    int32_t m2 = node_typed(g, TC_OP_BERNOULLI, &p, 1, &up, TC_F32, 1, SZ(5));
    int32_t u1 = node_typed(g, TC_OP_UNIFORM, NULL, 0, &up, TC_F32, 1, SZ(5));
    int32_t u2 = node_typed(g, TC_OP_UNIFORM, NULL, 0, &up, TC_F32, 1, SZ(5));
    int32_t s1 = op2(g, TC_OP_ADD, m1, u1, P(.s = {1})), s2 = op2(g, TC_OP_ADD, m2, u2, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, s1));
    CHECK_OK(tc_graph_mark_output(g, s2));
    tc_tensor *in = ct_from(TC_F32, 1, SZ(5), VALS(0.5, 0.5, 0.5, 0.5, 0.5));
    CHECK(same_results(g, tc_pass_cse, &in, gen));
    CHECK(tc_graph_live_nodes(g) == 6 && count_op(g, TC_OP_UNIFORM) == 2 && count_op(g, TC_OP_BERNOULLI) == 2);
    tc_tensor *r[2] = {0};
    tc_generator_seed(gen, 7);
    CHECK_OK(interp(g, &in, r));
    CHECK(!same_bits(r[0], r[1])); /* two draws, two results */
    tc_tensor_release(r[0]), tc_tensor_release(r[1]), tc_tensor_release(in);
    tc_graph_free(g);
    tc_generator_free(gen);
}

/* x + 5 written twice snapshots two 0-dim constants: merged by value, then the adds merge.
 * Constants differing only in the sign of zero stay apart; so do copies to other types. */
TEST(graph_cse_merges_equal_constants)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F64, 1, SZ(2));
    int32_t c1 = cst(g, TC_F64, 0, NULL, VALS(5)), c2 = cst(g, TC_F64, 0, NULL, VALS(5));
    int32_t z1 = cst(g, TC_F64, 0, NULL, VALS(0.0)), z2 = cst(g, TC_F64, 0, NULL, VALS(-0.0));
    int32_t o[6] = {op2(g, TC_OP_ADD, x, c1, P(.s = {1})), op2(g, TC_OP_ADD, x, c2, P(.s = {1})),
                    op2(g, TC_OP_DIV, c1, z1, NULL), op2(g, TC_OP_DIV, c1, z2, NULL),
                    node_typed(g, TC_OP_COPY, &x, 1, P(.i = {-1}), TC_F32, 1, SZ(2)),
                    node_typed(g, TC_OP_COPY, &x, 1, P(.i = {-1}), TC_I32, 1, SZ(2))};
    for (int k = 0; k < 6; k++) CHECK_OK(tc_graph_mark_output(g, o[k]));
    tc_tensor *in = ct_from(TC_F64, 1, SZ(2), VALS(1.5, -2));
    CHECK(same_results(g, tc_pass_cse, &in, NULL));
    CHECK(tc_graph_live_nodes(g) == 5 && g->outputs[0] == g->outputs[1] && g->outputs[2] != g->outputs[3]);
    CHECK(g->outputs[4] != g->outputs[5]);
    CHECK(report_has(g, "1 equal constants merged"));
    tc_tensor *r[6] = {0};
    CHECK_OK(interp(g, &in, r));
    CHECK(SAME(r[0], 6.5, 3) && SAME(r[2], INFINITY) && SAME(r[3], -INFINITY));
    for (int k = 0; k < 6; k++) tc_tensor_release(r[k]);
    tc_tensor_release(in);
    tc_graph_free(g);
}

/* ---- fold ---------------------------------------------------------------------------------- */

/* fill -> add -> exp on constants fold into one constant; the node reading an input stays. */
TEST(graph_fold_constant_chains)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 1, SZ(3));
    int32_t c = cst(g, TC_F32, 1, SZ(3), VALS(1, 2, 3));
    int32_t f = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {0.5}), TC_F32, 1, SZ(3));
    int32_t s = op2(g, TC_OP_ADD, c, f, P(.s = {2}));       /* c + 2*0.5 */
    int32_t e = op1(g, TC_OP_EXP, s, NULL);
    int32_t mx[2];
    CHECK_OK(tc_graph_add_op(g, TC_OP_MAX, &e, 1, P(.i = {0}), mx)); /* two results */
    int32_t y = op2(g, TC_OP_MUL, x, e, NULL);
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_graph_mark_output(g, mx[1]));
    tc_tensor *in = ct_from(TC_F32, 1, SZ(3), VALS(1, -1, 0.5));
    CHECK(tc_graph_live_nodes(g) == 5);
    CHECK(same_results(g, tc_pass_fold, &in, NULL));
    CHECK(tc_graph_live_nodes(g) == 1 && g->nodes[0].op == TC_OP_MUL);
    const tc_gval *k = &g->vals[g->nodes[0].in[1]];
    CHECK(k->kind == TC_GV_CONST && k->t && ct_near(ct_at(k->t, 2), exp(4.0), 1e-6));
    CHECK(g->vals[g->outputs[1]].kind == TC_GV_CONST && ct_at(g->vals[g->outputs[1]].t, 0) == 2); /* argmax */
    CHECK(report_has(g, "fold       nodes 5 -> 1 (4 removed)"));
    CHECK(dump_has(g, "const"));
    tc_tensor_release(in);
    tc_graph_free(g);
}

/* Externals change between runs, random nodes draw at run time: neither folds. */
TEST(graph_fold_leaves_externals_and_random)
{
    tc_generator *gen;
    CHECK_OK(tc_generator_new(5, &gen));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    tc_tensor *w = ct_arange(TC_F32, 1, SZ(4));
    int32_t e = ext(g, w);
    int32_t a = op1(g, TC_OP_EXP, e, NULL);
    int32_t u = node_typed(g, TC_OP_UNIFORM, NULL, 0, P(.s = {0, 1}, .gen = gen), TC_F32, 1, SZ(4));
    int32_t c = cst(g, TC_F32, 1, SZ(4), VALS(0.2, 0.4, 0.6, 0.8));
    int32_t b = node_typed(g, TC_OP_BERNOULLI, &c, 1, P(.gen = gen), TC_F32, 1, SZ(4)); /* const input */
    int32_t s = op2(g, TC_OP_ADD, a, u, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, s));
    CHECK_OK(tc_graph_mark_output(g, b));
    CHECK(same_results(g, tc_pass_fold, NULL, gen));
    CHECK(tc_graph_live_nodes(g) == 4 && count_op(g, TC_OP_EXP) == 1 && count_op(g, TC_OP_UNIFORM) == 1);
    /* the external is read when run: a changed parameter changes the result */
    tc_tensor *r[2] = {0};
    ((float *)tc_tensor_data(w))[0] = 100;
    CHECK_OK(interp(g, NULL, r));
    CHECK(ct_at(r[0], 0) > 1e40);
    tc_tensor_release(r[0]), tc_tensor_release(r[1]);
    tc_graph_free(g);
    tc_tensor_release(w);
    tc_generator_free(gen);
}

/* Views of constants fold into contiguous copies; views that would grow the data, and any
 * view read by as_strided (absolute offsets into the storage), stay views. */
TEST(graph_fold_views_of_constants)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(3, 2));
    int32_t c = cst(g, TC_F32, 2, SZ(2, 3), VALS(1, 2, 3, 4, 5, 6));
    int32_t t = op1(g, TC_OP_TRANSPOSE, c, P(.i = {0, 1}));         /* (3,2) */
    int32_t n2 = op1(g, TC_OP_NARROW, c, P(.i = {1, 1, 2}));        /* (2,2): 2 3 / 5 6 */
    int32_t sq = op1(g, TC_OP_SELECT, n2, P(.i = {0, 1}));          /* 5 6 */
    int32_t ex = op1(g, TC_OP_EXPAND, n2, P(.nshape = 3, .shape = {4, 2, 2})); /* grows: stays a view */
    int32_t z = op1(g, TC_OP_SUM, ex, P(.i = {0}));
    int32_t n1 = op1(g, TC_OP_NARROW, c, P(.i = {1, 1, 2}));
    /* as_strided addresses the storage: offset 0 reads 1 4 / 2 5 whatever its input's offset
     * (built typed: shape inference runs it on a (2,2) dummy too small for these strides) */
    int32_t sv = node_typed(g, TC_OP_AS_STRIDED, &n1, 1, P(.nshape = 4, .shape = {2, 2, 1, 3}), TC_F32, 2, SZ(2, 2));
    int32_t y = op2(g, TC_OP_MUL, x, t, NULL);
    int32_t o[4] = {y, sv, z, sq};
    for (int k = 0; k < 4; k++) CHECK_OK(tc_graph_mark_output(g, o[k]));
    tc_tensor *in = ct_arange(TC_F32, 2, SZ(3, 2));
    CHECK(same_results(g, tc_pass_fold, &in, NULL));
    /* transpose, narrow n2 and select folded; expand, sum, narrow n1, as_strided stay */
    CHECK(tc_graph_live_nodes(g) == 5 && count_op(g, TC_OP_MUL) == 1 && count_op(g, TC_OP_NARROW) == 1);
    CHECK(count_op(g, TC_OP_TRANSPOSE) == 0 && count_op(g, TC_OP_SELECT) == 0 && count_op(g, TC_OP_AS_STRIDED) == 1);
    const tc_tensor *kt = NULL;
    for (int k = 0; k < g->nnodes; k++)
        if (g->nodes[k].op == TC_OP_MUL) kt = g->vals[g->nodes[k].in[1]].t;
    CHECK(kt && tc_tensor_is_contiguous(kt) && SAME(kt, 1, 4, 2, 5, 3, 6));
    const tc_gval *sqv = &g->vals[g->outputs[3]];
    CHECK(sqv->kind == TC_GV_CONST && SAME(sqv->t, 5, 6));
    tc_tensor *r[4] = {0};
    CHECK_OK(interp(g, &in, r));
    CHECK(SAME(r[1], 1, 4, 2, 5) && SAME(r[2], 8, 12, 20, 24));
    for (int k = 0; k < 4; k++) tc_tensor_release(r[k]);
    tc_tensor_release(in);
    tc_graph_free(g);

    /* expand of a constant feeding an input-dependent node: kept as a view (no growth) */
    CHECK_OK(tc_graph_new(&g));
    x = input(g, TC_F32, 2, SZ(4, 3));
    c = cst(g, TC_F32, 1, SZ(3), VALS(1, 2, 3));
    ex = op1(g, TC_OP_EXPAND, c, P(.nshape = 2, .shape = {4, 3}));
    CHECK_OK(tc_graph_mark_output(g, op2(g, TC_OP_ADD, x, ex, P(.s = {1}))));
    CHECK_OK(tc_pass_fold(g));
    CHECK(tc_graph_live_nodes(g) == 2 && count_op(g, TC_OP_EXPAND) == 1);
    tc_graph_free(g);
}

TEST(graph_fold_size_limit_and_errors)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_I32, 1, SZ(2));
    int32_t big = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {1}), TC_F32, 1, SZ(5 << 20)); /* 20 MB */
    int32_t sb = op1(g, TC_OP_SUM, big, P(.i = {-1}));
    int32_t a = cst(g, TC_I32, 1, SZ(2), VALS(7, 8)), zero = cst(g, TC_I32, 1, SZ(2), VALS(1, 0));
    int32_t d = op2(g, TC_OP_DIV, a, zero, NULL); /* integer division by zero: an error at run time */
    int32_t y = op2(g, TC_OP_ADD, x, d, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, sb));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_pass_fold(g));
    CHECK(tc_graph_live_nodes(g) == 4);
    CHECK(report_has(g, "1 left (over 16 MB, or fills over 64 KB)") && report_has(g, "1 left (error when folding)"));
    CHECK(strcmp(tc_last_error(), "") == 0 || !strstr(tc_last_error(), "div")); /* no error left behind */
    CHECK_ERR(tc_pass_fold(NULL), TC_ERR_ARG, "fold");
    tc_graph_free(g);
}

/* ---- the pipeline ------------------------------------------------------------------------------ */

/* Every pass of tc_graph_compile on one graph with something for each: the executor's
 * results equal the interpreter's on the graph as built, and the report has a line each. */
TEST(graph_passes_whole_pipeline_matches)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    tc_tensor *w = ct_from(TC_F32, 2, SZ(3, 4), VALS(0.5, -1, 2, 0, 1, 1, -3, 0.25, 4, -2, 1, 1));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3)), e = ext(g, w);
    int32_t c = cst(g, TC_F32, 1, SZ(4), VALS(1, 2, 3, 4));
    int32_t f = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {1}), TC_F32, 0, NULL);
    int32_t cexp = op1(g, TC_OP_EXP, c, NULL);                          /* fold */
    int32_t mm1 = op2(g, TC_OP_MM, x, e, NULL), mm2 = op2(g, TC_OP_MM, x, e, NULL); /* cse */
    int32_t one = op2(g, TC_OP_MUL, mm2, f, NULL);                      /* simplify: x*1 */
    int32_t s = op2(g, TC_OP_ADD, mm1, one, P(.s = {1}));
    int32_t t = op1(g, TC_OP_TRANSPOSE, op1(g, TC_OP_TRANSPOSE, s, P(.i = {0, 1})), P(.i = {1, 0}));
    int32_t y = op1(g, TC_OP_TANH, op2(g, TC_OP_MUL, t, cexp, NULL), NULL);
    op1(g, TC_OP_SIGMOID, y, NULL);                                     /* dce */
    CHECK_OK(tc_graph_mark_output(g, y));
    tc_tensor *in = ct_from(TC_F32, 2, SZ(2, 3), VALS(0.1, -0.2, 0.3, 1, 2, -1)), *want = NULL, *got = NULL;
    CHECK_OK(interp(g, &in, &want));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    CHECK(tc_graph_num_nodes(g) <= 4); /* mm, add, mul, tanh (or fewer once fused) */
    CHECK(count_op(g, TC_OP_MM) == 1 && count_op(g, TC_OP_TRANSPOSE) == 0 && count_op(g, TC_OP_SIGMOID) == 0);
    CHECK(report_has(g, "dce") && report_has(g, "fold") && report_has(g, "simplify") && report_has(g, "cse"));
    const tc_tensor *ins[1] = {in};
    CHECK_OK(tc_graph_run(g, ins, 1, &got, 1));
    CHECK(same_bits(want, got));
    tc_tensor_release(want), tc_tensor_release(got), tc_tensor_release(in);
    tc_graph_free(g);
    tc_tensor_release(w);
}

/* Fills above 64 KB stay nodes (a constant would hold the memory for the graph's life);
 * small ones fold. */
TEST(graph_fold_leaves_big_fills)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t small = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {2}), TC_F32, 1, SZ(16));
    int32_t big = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {0}), TC_F32, 1, SZ(32768)); /* 128 KB */
    CHECK_OK(tc_graph_mark_output(g, small));
    CHECK_OK(tc_graph_mark_output(g, big));
    CHECK_OK(tc_pass_fold(g));
    CHECK(tc_graph_live_nodes(g) == 1 && g->nodes[0].op == TC_OP_FILL);
    CHECK(g->vals[g->outputs[0]].kind == TC_GV_CONST && g->vals[g->outputs[1]].kind == TC_GV_OP);
    tc_graph_free(g);
}
