/* test_graph_simplify.c -- algebraic simplification (core/graph/simplify.c) on small
 * hand-built graphs: each rule, the report line, results identical before and after, and
 * the rewrites that must not happen (float x*0, broadcasting x+0, layouts, write-backs,
 * as_strided readers, overlapping cats). Helpers: graph_test_util.h. */
#include "graph_test_util.h"

/* ---- simplify ------------------------------------------------------------------------------ */

/* x*1, 1*x, x/1, x+0, 0+x, x-0 with 0-dim scalar constants (how the binding passes numbers),
 * a full constant of ones, and a fill of zeros. */
TEST(graph_simplify_identities_of_arithmetic)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3));
    int32_t one = cst(g, TC_F32, 0, NULL, VALS(1)), zero = cst(g, TC_F32, 0, NULL, VALS(-0.0));
    int32_t ones = cst(g, TC_F32, 1, SZ(3), VALS(1, 1, 1));
    int32_t zf = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {0}), TC_F32, 2, SZ(2, 3));
    int32_t a = op2(g, TC_OP_MUL, x, one, NULL);           /* x*1 */
    int32_t b = op2(g, TC_OP_MUL, ones, a, NULL);          /* 1*x, broadcast ones */
    int32_t c = op2(g, TC_OP_DIV, b, one, NULL);           /* x/1 */
    int32_t d = op2(g, TC_OP_ADD, c, zero, P(.s = {3}));   /* x + 3*0 */
    int32_t e = op2(g, TC_OP_ADD, zf, d, P(.s = {1}));     /* 0 + x */
    int32_t f = op2(g, TC_OP_SUB, e, zf, P(.s = {1}));     /* x - 0 */
    int32_t y = op1(g, TC_OP_TANH, f, NULL);
    CHECK_OK(tc_graph_mark_output(g, y));
    tc_tensor *in = ct_from(TC_F32, 2, SZ(2, 3), VALS(-0.0, 1, -2.5, INFINITY, NAN, 3e38));
    CHECK(tc_graph_live_nodes(g) == 8);
    CHECK(same_results(g, tc_pass_simplify, &in, NULL));
    CHECK(tc_graph_live_nodes(g) == 1 && g->nodes[0].op == TC_OP_TANH && g->nodes[0].in[0] == x);
    CHECK(report_has(g, "simplify   nodes 8 -> 1 (7 removed), x*1: 2, x/1: 1, x+0: 2, x-0: 1"));
    CHECK(dump_has(g, "tanh(%0)"));
    tc_tensor_release(in);
    tc_graph_free(g);
}

/* Ones reached through views (a filled scalar viewed and expanded, as autograd's rules
 * make them) count; as_strided does not (it may address storage outside its input). A view
 * of the replaced product then views x itself (view_of: memory planning relies on it). */
TEST(graph_simplify_ones_through_views)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F64, 2, SZ(8, 1));
    int32_t f = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {1}), TC_F64, 0, NULL);
    int32_t v = op1(g, TC_OP_VIEW, f, P(.nshape = 2, .shape = {1, 1}));
    int32_t ex = op1(g, TC_OP_EXPAND, v, P(.nshape = 2, .shape = {8, 1}));
    int32_t m = op2(g, TC_OP_MUL, ex, x, NULL);
    int32_t t = op1(g, TC_OP_TRANSPOSE, m, P(.i = {0, 1}));
    /* a constant whose tensor views the first two elements (1 1) of a storage holding 1 1 5 */
    tc_tensor *full = ct_from(TC_F64, 1, SZ(3), VALS(1, 1, 5)), *part = NULL;
    CHECK_OK(tc_op_exec(TC_OP_NARROW, (const tc_tensor *const *)&full, 1, P(.i = {0, 0, 2}), &part, 1));
    int32_t c = -1;
    CHECK_OK(tc_graph_add_const(g, part, &c));
    tc_tensor_release(part), tc_tensor_release(full);
    int32_t n = op1(g, TC_OP_NARROW, c, P(.i = {0, 0, 2}));                 /* 1 1 */
    int32_t as = node_typed(g, TC_OP_AS_STRIDED, &n, 1, P(.nshape = 2, .shape = {2, 1}, .i = {1}), TC_F64, 1, SZ(2));
    int32_t y = input(g, TC_F64, 1, SZ(2));
    int32_t m2 = op2(g, TC_OP_MUL, y, as, NULL);                            /* y * (1 5): stays */
    CHECK_OK(tc_graph_mark_output(g, t));
    CHECK_OK(tc_graph_mark_output(g, m2));
    tc_tensor *in[2] = {ct_arange(TC_F64, 2, SZ(8, 1)), ct_from(TC_F64, 1, SZ(2), VALS(3, 4))};
    CHECK(same_results(g, tc_pass_simplify, in, NULL));
    CHECK(count_op(g, TC_OP_MUL) == 1 && count_op(g, TC_OP_EXPAND) == 0 && count_op(g, TC_OP_FILL) == 0);
    const tc_gnode *tn = &g->nodes[g->vals[g->outputs[0]].producer];
    CHECK(tn->op == TC_OP_TRANSPOSE && tn->in[0] == x && g->vals[g->outputs[0]].view_of == x);
    tc_tensor *r[2] = {0};
    CHECK_OK(interp(g, in, r));
    CHECK(SAME(r[1], 3, 20));
    tc_tensor_release(r[0]), tc_tensor_release(r[1]), tc_tensor_release(in[0]), tc_tensor_release(in[1]);
    tc_graph_free(g);
}

/* What must stay: float x*0 (inf*0 and NaN*0 are NaN), x+0 that broadcasts x larger,
 * 0 + s0*x with s0 != 1, x*c with c not all ones, ones that are an input. */
TEST(graph_simplify_leaves_inexact_rewrites)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 1, SZ(3)), o = input(g, TC_F32, 0, NULL);
    int32_t zero = cst(g, TC_F32, 0, NULL, VALS(0)), zeros23 = cst(g, TC_F32, 2, SZ(2, 3), VALS(0, 0, 0, 0, 0, 0));
    int32_t almost = cst(g, TC_F32, 1, SZ(3), VALS(1, 1, 1.0000001));
    int32_t outs[] = {op2(g, TC_OP_MUL, x, zero, NULL), op2(g, TC_OP_ADD, x, zeros23, P(.s = {1})),
                      op2(g, TC_OP_ADD, zero, x, P(.s = {2})), op2(g, TC_OP_MUL, x, almost, NULL),
                      op2(g, TC_OP_MUL, x, o, NULL), op2(g, TC_OP_ADD, x, zero, P(.s = {INFINITY}))};
    for (int k = 0; k < 6; k++) CHECK_OK(tc_graph_mark_output(g, outs[k]));
    tc_tensor *in[2] = {ct_from(TC_F32, 1, SZ(3), VALS(INFINITY, NAN, 2)), ct_from(TC_F32, 0, NULL, VALS(1))};
    CHECK(same_results(g, tc_pass_simplify, in, NULL));
    CHECK(tc_graph_live_nodes(g) == 6 && report_has(g, "nodes 6 -> 6"));
    tc_tensor *r[6] = {0};
    CHECK_OK(interp(g, in, r));
    CHECK(isnan(ct_at(r[0], 0)) && isnan(ct_at(r[0], 1)) && ct_at(r[0], 2) == 0); /* why float x*0 stays */
    for (int k = 0; k < 6; k++) tc_tensor_release(r[k]);
    tc_tensor_release(in[0]), tc_tensor_release(in[1]);
    tc_graph_free(g);
}

/* Integer x*0 is zeros: the zero operand when it has the result's shape, else a new constant. */
TEST(graph_simplify_integer_times_zero)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_I64, 1, SZ(3));
    int32_t z0 = cst(g, TC_I64, 0, NULL, VALS(0)), z3 = cst(g, TC_I64, 1, SZ(3), VALS(0, 0, 0));
    int32_t a = op2(g, TC_OP_MUL, x, z0, NULL), b = op2(g, TC_OP_MUL, z3, x, NULL);
    CHECK_OK(tc_graph_mark_output(g, op2(g, TC_OP_ADD, a, x, P(.s = {1}))));
    CHECK_OK(tc_graph_mark_output(g, b));
    tc_tensor *in = ct_from(TC_I64, 1, SZ(3), VALS(5, -9, 1e15));
    CHECK(same_results(g, tc_pass_simplify, &in, NULL));
    CHECK(count_op(g, TC_OP_MUL) == 0 && g->vals[g->outputs[1]].kind == TC_GV_CONST);
    CHECK(report_has(g, "x*0 (int): 2") && report_has(g, "x+0: 1")); /* and the add of zeros went too */
    CHECK(tc_graph_live_nodes(g) == 0 && g->outputs[0] == x);        /* an output may be an input */
    tc_tensor_release(in);
    tc_graph_free(g);
}

TEST(graph_simplify_neg_transpose_permute_pairs)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 3, SZ(2, 3, 4));
    int32_t n = op1(g, TC_OP_NEG, op1(g, TC_OP_NEG, x, NULL), NULL);
    int32_t t = op1(g, TC_OP_TRANSPOSE, op1(g, TC_OP_TRANSPOSE, n, P(.i = {0, 2})), P(.i = {-1, 0}));
    int32_t p1 = op1(g, TC_OP_PERMUTE, t, P(.nshape = 3, .shape = {1, 2, 0}));  /* (3,4,2) */
    int32_t p2 = op1(g, TC_OP_PERMUTE, p1, P(.nshape = 3, .shape = {2, 0, 1})); /* back */
    int32_t t3 = op1(g, TC_OP_TRANSPOSE, op1(g, TC_OP_TRANSPOSE, p2, P(.i = {0, 1})), P(.i = {1, 2})); /* not a pair */
    int32_t y = op1(g, TC_OP_EXP, t3, NULL);
    CHECK_OK(tc_graph_mark_output(g, y));
    tc_tensor *in = ct_arange(TC_F32, 3, SZ(2, 3, 4));
    CHECK(same_results(g, tc_pass_simplify, &in, NULL));
    CHECK(tc_graph_live_nodes(g) == 3 && count_op(g, TC_OP_TRANSPOSE) == 2 && count_op(g, TC_OP_NEG) == 0);
    CHECK(g->nodes[0].op == TC_OP_TRANSPOSE && g->nodes[0].in[0] == x);
    CHECK(report_has(g, "neg^2: 1, transpose^2: 1, permute^2: 1"));
    tc_tensor_release(in);
    tc_graph_free(g);
}

/* view / squeeze / unsqueeze chains of a contiguous value become one view; a chain back to
 * the root's sizes disappears; identity views go; copy of a contiguous value goes. */
TEST(graph_simplify_views_and_copies)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 6));
    int32_t r = op1(g, TC_OP_EXP, x, NULL); /* a fresh contiguous value */
    int32_t v1 = op1(g, TC_OP_VIEW, r, P(.nshape = 3, .shape = {3, 4, 1}));
    int32_t v2 = op1(g, TC_OP_SQUEEZE, v1, P(.i = {-1}));
    int32_t v3 = op1(g, TC_OP_UNSQUEEZE, v2, P(.i = {0}));          /* (1,3,4) */
    int32_t back = op1(g, TC_OP_VIEW, v3, P(.nshape = 2, .shape = {2, -1})); /* root's sizes */
    int32_t id1 = op1(g, TC_OP_NARROW, back, P(.i = {1, 0, 6}));
    int32_t id2 = op1(g, TC_OP_TRANSPOSE, id1, P(.i = {1, 1}));
    int32_t id3 = op1(g, TC_OP_EXPAND, id2, P(.nshape = 2, .shape = {-1, 6}));
    int32_t cp = node_typed(g, TC_OP_COPY, &id3, 1, P(.i = {-1}), TC_F32, 2, SZ(2, 6));
    int32_t tr = op1(g, TC_OP_TRANSPOSE, r, P(.i = {0, 1}));
    int32_t cpt = node_typed(g, TC_OP_COPY, &tr, 1, P(.i = {-1}), TC_F32, 2, SZ(6, 2)); /* stays */
    int32_t vt = op1(g, TC_OP_VIEW, cpt, P(.nshape = 1, .shape = {12}));
    int32_t o[3] = {cp, v3, vt};
    for (int k = 0; k < 3; k++) CHECK_OK(tc_graph_mark_output(g, o[k]));
    tc_tensor *in = ct_arange(TC_F32, 2, SZ(2, 6));
    CHECK(same_results(g, tc_pass_simplify, &in, NULL));
    CHECK(g->outputs[0] == r);                                /* back, identity views, copy: gone */
    const tc_gnode *pv = &g->nodes[g->vals[g->outputs[1]].producer];
    CHECK(pv->op == TC_OP_VIEW && pv->in[0] == r && pv->p.nshape == 3);  /* one view of the root */
    CHECK(count_op(g, TC_OP_COPY) == 1 && count_op(g, TC_OP_SQUEEZE) == 0 && count_op(g, TC_OP_NARROW) == 0);
    CHECK(tc_graph_live_nodes(g) == 5); /* exp, view, transpose, copy, view */
    CHECK(report_has(g, "identity view: 4") && report_has(g, "reshape chain: 3") &&
          report_has(g, "copy of contiguous: 1"));
    tc_tensor_release(in);
    tc_graph_free(g);
}

/* An input's layout is not known (callers may pass strided tensors): its view chains stay. */
TEST(graph_simplify_keeps_view_chains_of_inputs)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 6));
    int32_t flat = op1(g, TC_OP_VIEW, x, P(.nshape = 1, .shape = {12}));
    int32_t v = op1(g, TC_OP_VIEW, flat, P(.nshape = 2, .shape = {2, 6}));
    int32_t c = node_typed(g, TC_OP_COPY, &x, 1, P(.i = {-1}), TC_F32, 2, SZ(2, 6));
    int32_t same = op1(g, TC_OP_VIEW, x, P(.nshape = 2, .shape = {2, 6})); /* x's strides unknown */
    CHECK_OK(tc_graph_mark_output(g, v));
    CHECK_OK(tc_graph_mark_output(g, c));
    CHECK_OK(tc_graph_mark_output(g, same));
    CHECK_OK(tc_pass_simplify(g));
    CHECK(tc_graph_live_nodes(g) == 4 && report_has(g, "nodes 4 -> 4"));
    tc_graph_free(g);
}

/* x*1 -> x when x is a transposed view would make the later view fail: left alone. */
TEST(graph_simplify_keeps_layout_for_views)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3));
    int32_t t = op1(g, TC_OP_TRANSPOSE, op1(g, TC_OP_EXP, x, NULL), P(.i = {0, 1})); /* (3,2) strided */
    int32_t one = cst(g, TC_F32, 0, NULL, VALS(1));
    int32_t m = op2(g, TC_OP_MUL, t, one, NULL), m2 = op2(g, TC_OP_MUL, t, one, NULL);
    int32_t v = op1(g, TC_OP_VIEW, op1(g, TC_OP_NARROW, m, P(.i = {0, 0, 2})), P(.nshape = 1, .shape = {4}));
    int32_t s = op1(g, TC_OP_SUM, m2, P(.i = {0}));                 /* no view: m2 -> t is fine */
    CHECK_OK(tc_graph_mark_output(g, v));
    CHECK_OK(tc_graph_mark_output(g, s));
    tc_tensor *in = ct_arange(TC_F32, 2, SZ(2, 3));
    CHECK(same_results(g, tc_pass_simplify, &in, NULL));
    CHECK(count_op(g, TC_OP_MUL) == 1 && report_has(g, "x*1: 1"));
    tc_tensor_release(in);
    tc_graph_free(g);
}

/* Hazards: a graph output is not redirected to an external that a write-back updates (the
 * output would read the updated tensor), and a value read by as_strided keeps its buffer. */
TEST(graph_simplify_respects_write_backs_and_as_strided)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    tc_tensor *w = ct_from(TC_F32, 1, SZ(4), VALS(1, 2, 3, 4)), *w2 = ct_from(TC_F32, 1, SZ(4), VALS(5, 6, 7, 8));
    int32_t e = ext(g, w), e2 = ext(g, w2), one = cst(g, TC_F32, 0, NULL, VALS(1));
    int32_t snap = op2(g, TC_OP_MUL, e, one, NULL);        /* the old w, returned */
    int32_t upd = op2(g, TC_OP_ADD, e, e, P(.s = {1}));
    CHECK_OK(tc_graph_add_writeback(g, e, upd));
    int32_t snap2 = op2(g, TC_OP_MUL, e2, one, NULL);      /* e2 is not written: fine */
    int32_t r = op1(g, TC_OP_EXP, e2, NULL);
    int32_t cp = node_typed(g, TC_OP_COPY, &r, 1, P(.i = {-1}), TC_F32, 1, SZ(4));
    int32_t n = op1(g, TC_OP_NARROW, cp, P(.i = {0, 1, 2}));
    int32_t as = node_typed(g, TC_OP_AS_STRIDED, &n, 1, P(.nshape = 2, .shape = {2, 1}), TC_F32, 1, SZ(2));
    int32_t o[3] = {snap, snap2, as};
    for (int k = 0; k < 3; k++) CHECK_OK(tc_graph_mark_output(g, o[k]));
    CHECK(same_results(g, tc_pass_simplify, NULL, NULL));
    CHECK(g->outputs[0] != e && count_op(g, TC_OP_MUL) == 1 && g->outputs[1] == e2);
    CHECK(count_op(g, TC_OP_COPY) == 1); /* as_strided reads copy's buffer from offset 0 */
    CHECK_ERR(tc_pass_simplify(NULL), TC_ERR_ARG, "simplify");
    tc_graph_free(g);
    tc_tensor_release(w), tc_tensor_release(w2);
}

/* The gradient of per-step slices, as a trace records it: cat(zeros, g_t, zeros) summed
 * step by step. The sums become one cat of the slices (each element written once); an
 * overlapping sum stays a sum. Results are the same bits. */
TEST(graph_simplify_sums_of_disjoint_cats)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t s0 = input(g, TC_F32, 2, SZ(1, 3)), s1 = input(g, TC_F32, 2, SZ(1, 3)), s2 = input(g, TC_F32, 2, SZ(1, 3));
    int32_t z1 = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {0}), TC_F32, 2, SZ(1, 3));
    int32_t z2 = node_typed(g, TC_OP_FILL, NULL, 0, P(.s = {0}), TC_F32, 2, SZ(2, 3));
    int32_t a_in[2] = {s0, z2}, b_in[3] = {z1, s1, z1}, c_in[2] = {z2, s2}, o_in[2] = {s1, s2};
    int32_t a, b, c, o;
    CHECK_OK(tc_graph_add_op(g, TC_OP_CAT, a_in, 2, NULL, &a));
    CHECK_OK(tc_graph_add_op(g, TC_OP_CAT, b_in, 3, NULL, &b));
    CHECK_OK(tc_graph_add_op(g, TC_OP_CAT, c_in, 2, NULL, &c));
    int32_t ab = op2(g, TC_OP_ADD, a, b, P(.s = {1}));
    int32_t abc = op2(g, TC_OP_ADD, ab, c, P(.s = {1}));
    CHECK_OK(tc_graph_add_op(g, TC_OP_CAT, o_in, 2, NULL, &o)); /* rows 0-1: overlaps a */
    int32_t overlap = op2(g, TC_OP_ADD, abc, op2(g, TC_OP_CAT, o, z1, NULL) < 0 ? -1 : g->nvals - 1, P(.s = {1}));
    CHECK(overlap >= 0);
    CHECK_OK(tc_graph_mark_output(g, abc));
    CHECK_OK(tc_graph_mark_output(g, overlap));
    tc_tensor *in[3] = {ct_from(TC_F32, 2, SZ(1, 3), VALS(1, -2, 3)), ct_from(TC_F32, 2, SZ(1, 3), VALS(4, 5, -6)),
                        ct_from(TC_F32, 2, SZ(1, 3), VALS(7, 8, 9))};
    CHECK(same_results(g, tc_pass_simplify, in, NULL));
    CHECK(report_has(g, "sum of disjoint cats: 2"));
    /* abc is now cat(s0, s1, s2); the overlapping sum is still an add */
    const tc_gnode *p = &g->nodes[g->vals[g->outputs[0]].producer];
    CHECK(p->op == TC_OP_CAT && p->nin == 3 && p->in[0] == s0 && p->in[1] == s1 && p->in[2] == s2);
    CHECK(g->nodes[g->vals[g->outputs[1]].producer].op == TC_OP_ADD);
    for (int i = 0; i < 3; i++) tc_tensor_release(in[i]);
    tc_graph_free(g);
}


/* ---- sums with a matrix product: addmm ------------------------------------------------- */

/* add(X, mm(A, B)) {s0}, add(mm(A, B), X) {s0}, sub(X, mm(A, B)) {s0} become one addmm with
 * (beta, alpha) = (1, s0), (s0, 1), (1, -s0). Left alone: a product read twice (it would be
 * computed twice), one the sum broadcasts, integer types, a zero weight (addmm would not
 * read what it multiplies, so NaN would not propagate). Integer values: sums are exact. */
TEST(graph_simplify_matmul_sums_become_addmm)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x = input(g, TC_F32, 2, SZ(2, 3)), a = input(g, TC_F32, 2, SZ(2, 4)), b = input(g, TC_F32, 2, SZ(4, 3));
    int32_t a1 = input(g, TC_F32, 2, SZ(1, 4)), xi = input(g, TC_I64, 2, SZ(2, 3)), ai = input(g, TC_I64, 2, SZ(2, 4));
    int32_t bi = input(g, TC_I64, 2, SZ(4, 3));
    int32_t o1 = op2(g, TC_OP_ADD, x, op2(g, TC_OP_MM, a, b, NULL), P(.s = {2}));
    int32_t o2 = op2(g, TC_OP_ADD, op2(g, TC_OP_MM, a, b, NULL), x, P(.s = {3}));
    int32_t o3 = op2(g, TC_OP_SUB, x, op2(g, TC_OP_MM, a, b, NULL), P(.s = {1}));
    int32_t shared = op2(g, TC_OP_MM, a, b, NULL);
    int32_t o4 = op2(g, TC_OP_ADD, x, shared, P(.s = {1}));                          /* mm read twice */
    int32_t o5 = op2(g, TC_OP_ADD, x, op2(g, TC_OP_MM, a1, b, NULL), P(.s = {1}));    /* (1,3) broadcast */
    int32_t o6 = op2(g, TC_OP_ADD, xi, op2(g, TC_OP_MM, ai, bi, NULL), P(.s = {1}));  /* integers */
    int32_t o7 = op2(g, TC_OP_ADD, x, op2(g, TC_OP_MM, a, b, NULL), P(.s = {0}));    /* zero weight */
    int32_t o[8] = {o1, o2, o3, o4, shared, o5, o6, o7};
    for (int k = 0; k < 8; k++) CHECK_OK(tc_graph_mark_output(g, o[k]));
    tc_tensor *in[7] = {ct_from(TC_F32, 2, SZ(2, 3), VALS(1, -2, 3, 4, 5, NAN)), ct_arange(TC_F32, 2, SZ(2, 4)),
                        ct_from(TC_F32, 2, SZ(4, 3), VALS(1, 0, -1, 2, 1, 0, 0, 3, 1, -2, 1, 1)),
                        ct_from(TC_F32, 2, SZ(1, 4), VALS(1, 2, 3, 4)), ct_arange(TC_I64, 2, SZ(2, 3)),
                        ct_arange(TC_I64, 2, SZ(2, 4)), ct_arange(TC_I64, 2, SZ(4, 3))};
    CHECK(same_results(g, tc_pass_simplify, in, NULL));
    CHECK(count_op(g, TC_OP_ADDMM) == 3 && count_op(g, TC_OP_MM) == 4 && report_has(g, "x+mm: 3"));
    const double want[3][2] = {{1, 2}, {3, 1}, {1, -1}}; /* beta, alpha */
    for (int k = 0; k < 3; k++) {
        const tc_gnode *p = &g->nodes[g->vals[g->outputs[k]].producer];
        CHECK(p->op == TC_OP_ADDMM && p->in[0] == x && p->in[1] == a && p->in[2] == b);
        CHECK(p->p.s[0] == want[k][0] && p->p.s[1] == want[k][1]);
    }
    tc_tensor *r[8] = {0};
    CHECK_OK(interp(g, in, r));
    /* x + 2 a b: row 0 of a b is (0,1,2,3) b = (-4, 10, 5) */
    CHECK(ct_at(r[0], 0) == -7 && ct_at(r[0], 1) == 18 && ct_at(r[0], 2) == 13 && isnan(ct_at(r[0], 5)));
    CHECK(ct_at(r[1], 0) == 3 * 1 - 4 && ct_at(r[2], 1) == -2 - 10); /* mm + 3 x, x - mm */
    CHECK(isnan(ct_at(r[7], 5)) && ct_at(r[7], 0) == 1); /* o7 = x + 0 * mm: NaN in x stays */
    for (int k = 0; k < 8; k++) tc_tensor_release(r[k]);
    for (int i = 0; i < 7; i++) tc_tensor_release(in[i]);
    tc_graph_free(g);
}

/* A weight gradient accumulated over time steps, as a trace of x:t() products records it:
 * acc = (A1 B1)^T + (A2 B2)^T + (A3 B3)^T, A_t = G_t^T, returned transposed back. It becomes
 * acc' = addmm(addmm(A1 B1, A2, B2), A3, B3) in the products' layout (the final transpose
 * cancels), with the new nodes ordered before the node reading them; each addmm of the
 * chain then overwrites the previous sum (in place). A sum with an X that is no transpose
 * becomes addmm(X, B^T, A^T) (A^T is G itself). */
TEST(graph_simplify_transposed_matmul_chain)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t G[4], H[4], T[4];
    for (int t = 0; t < 4; t++) {
        G[t] = input(g, TC_F32, 2, SZ(2, 5));
        H[t] = input(g, TC_F32, 2, SZ(2, 3));
    }
    int32_t x = input(g, TC_F32, 2, SZ(3, 5));
    for (int t = 0; t < 4; t++) {
        int32_t at = op1(g, TC_OP_TRANSPOSE, G[t], P(.i = {0, 1}));                  /* (5,2) */
        T[t] = op1(g, TC_OP_TRANSPOSE, op2(g, TC_OP_MM, at, H[t], NULL), P(.i = {1, 0})); /* (3,5) */
    }
    int32_t acc = op2(g, TC_OP_ADD, op2(g, TC_OP_ADD, T[0], T[1], P(.s = {1})), T[2], P(.s = {1}));
    int32_t y = op1(g, TC_OP_NEG, op1(g, TC_OP_TRANSPOSE, acc, P(.i = {0, 1})), NULL); /* (5,3) */
    int32_t z = op2(g, TC_OP_ADD, x, T[3], P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_graph_mark_output(g, z));
    tc_tensor *in[9];
    for (int i = 0; i < 8; i++) {
        in[i] = ct_arange(TC_F32, 2, i % 2 ? SZ(2, 3) : SZ(2, 5));
        float *d = tc_tensor_data(in[i]);
        for (int k = 0; k < (i % 2 ? 6 : 10); k++) d[k] = (float)((k * 7 + i * 3) % 5 - 2);
    }
    in[8] = ct_arange(TC_F32, 2, SZ(3, 5));
    CHECK(same_results(g, tc_pass_simplify, in, NULL)); /* interp runs the nodes in order */
    CHECK(count_op(g, TC_OP_MM) == 1 && count_op(g, TC_OP_ADDMM) == 3 && count_op(g, TC_OP_ADD) == 0);
    CHECK(report_has(g, "transpose^2: 1") && report_has(g, "x+mm^T: 3"));
    const tc_gnode *neg = &g->nodes[g->vals[g->outputs[0]].producer]; /* ids renumbered: no y */
    CHECK(neg->op == TC_OP_NEG);
    const tc_gnode *last = &g->nodes[g->vals[neg->in[0]].producer];
    CHECK(last->op == TC_OP_ADDMM && last->in[2] == H[2]);
    const tc_gnode *first = &g->nodes[g->vals[last->in[0]].producer];
    CHECK(first->op == TC_OP_ADDMM && first->in[2] == H[1] && g->nodes[g->vals[first->in[0]].producer].op == TC_OP_MM);
    const tc_gnode *za = &g->nodes[g->vals[g->outputs[1]].producer];
    CHECK(za->op == TC_OP_ADDMM && za->in[0] == x && za->in[2] == G[3]);
    CHECK(g->nodes[g->vals[za->in[1]].producer].op == TC_OP_TRANSPOSE); /* H3^T, a new view */
    /* in place: the chain accumulates into one buffer; x (an input) is not overwritten */
    CHECK_OK(tc_pass_inplace(g));
    CHECK((first->flags & TC_GN_INPLACE) && first->inplace == 0 && (last->flags & TC_GN_INPLACE));
    CHECK(!(za->flags & TC_GN_INPLACE));
    for (int i = 0; i < 9; i++) tc_tensor_release(in[i]);
    tc_graph_free(g);
}

/* The compiled graph (every pass, the executor) gives the sums of the chain above. */
TEST(graph_simplify_matmul_chain_compiled)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t G[3], H[3], T[3];
    for (int t = 0; t < 3; t++) G[t] = input(g, TC_F64, 2, SZ(2, 4)), H[t] = input(g, TC_F64, 2, SZ(2, 3));
    for (int t = 0; t < 3; t++)
        T[t] = op1(g, TC_OP_TRANSPOSE, op2(g, TC_OP_MM, op1(g, TC_OP_TRANSPOSE, G[t], P(.i = {0, 1})), H[t], NULL),
                   P(.i = {0, 1}));
    int32_t acc = op2(g, TC_OP_ADD, op2(g, TC_OP_ADD, T[0], T[1], P(.s = {1})), T[2], P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_TRANSPOSE, acc, P(.i = {0, 1}))));
    const tc_tensor *in[6];
    tc_tensor *own[6], *ref[1] = {0}, *out[1] = {0};
    for (int i = 0; i < 6; i++) in[i] = own[i] = ct_arange(TC_F64, 2, i % 2 ? SZ(2, 3) : SZ(2, 4));
    CHECK_OK(interp(g, own, ref));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    CHECK(count_op(g, TC_OP_ADDMM) == 2 && count_op(g, TC_OP_ADD) == 0);
    for (int run = 0; run < 2; run++) {
        CHECK_OK(tc_graph_run(g, in, 6, out, 1));
        CHECK(same_bits(out[0], ref[0]));
        tc_tensor_release(out[0]);
    }
    tc_tensor_release(ref[0]);
    for (int i = 0; i < 6; i++) tc_tensor_release(own[i]);
    tc_graph_free(g);
}
