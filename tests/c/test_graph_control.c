/* test_graph_control.c -- COND and WHILE nodes (core/graph/control.c) on graphs built by
 * hand: the branch is chosen per run from the predicate tensor, a loop runs a
 * data-dependent number of times (zero included), and tc_graph_add_control refuses
 * subgraphs that do not fit the node (sizes, dtypes, counts, predicate) leaving the caller
 * owner of them. */
#include "ctest.h"
#include "graph/control.h"

/* A graph x (f64, n) -> op(x) (one-input elementwise op). */
static tc_graph *unary_graph(tc_op op, int64_t n)
{
    tc_graph *g = NULL;
    int32_t x, y;
    if (tc_graph_new(&g) || tc_graph_add_input(g, TC_F64, 1, &n, &x) || tc_graph_add_op(g, op, &x, 1, NULL, &y) ||
        tc_graph_mark_output(g, y)) {
        printf("    unary_graph: %s\n", tc_last_error());
        tc_graph_free(g);
        return NULL;
    }
    return g;
}

/* A graph x (f64, 1) -> x < limit (uint8, 1). */
static tc_graph *less_graph(double limit)
{
    tc_graph *g = NULL;
    int64_t one = 1;
    int32_t x, c, y;
    tc_tensor *lim = ct_from(TC_F64, 1, &one, &limit);
    tc_status s = tc_graph_new(&g);
    if (!s)
        s = tc_graph_add_input(g, TC_F64, 1, &one, &x);
    if (!s)
        s = tc_graph_add_const(g, lim, &c);
    int32_t in[2] = {x, c};
    if (!s)
        s = tc_graph_add_op(g, TC_OP_LT, in, 2, NULL, &y);
    if (!s)
        s = tc_graph_mark_output(g, y);
    tc_tensor_release(lim);
    if (s) {
        printf("    less_graph: %s\n", tc_last_error());
        tc_graph_free(g);
        return NULL;
    }
    return g;
}

/* A graph x (f64, 1) -> x + x. */
static tc_graph *double_graph(void)
{
    tc_graph *g = NULL;
    int64_t one = 1;
    int32_t x, y;
    tc_params p = {.s = {1}};
    tc_status s = tc_graph_new(&g);
    if (!s)
        s = tc_graph_add_input(g, TC_F64, 1, &one, &x);
    int32_t in[2] = {x, x};
    if (!s)
        s = tc_graph_add_op(g, TC_OP_ADD, in, 2, &p, &y);
    if (!s)
        s = tc_graph_mark_output(g, y);
    if (s) {
        printf("    double_graph: %s\n", tc_last_error());
        tc_graph_free(g);
        return NULL;
    }
    return g;
}

TEST(graph_control_cond_picks_the_branch_per_run)
{
    int64_t three = 3, one = 1;
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t p, x, r;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &p));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &three, &x));
    tc_graph *sub[2] = {unary_graph(TC_OP_EXP, 3), unary_graph(TC_OP_NEG, 3)};
    int32_t in[2] = {p, x};
    CHECK_OK(tc_graph_add_control(g, TC_GOP_COND, in, 2, sub, 2, &r));
    CHECK_OK(tc_graph_mark_output(g, r));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    double xv[3] = {0.5, -1, 2}, t = 1, f = 0;
    tc_tensor *xt = ct_keep(ct_from(TC_F64, 1, &three, xv));
    const tc_tensor *ins[2] = {ct_keep(ct_from(TC_F64, 1, &one, &t)), xt};
    tc_tensor *out = NULL;
    CHECK_OK(tc_graph_run(g, ins, 2, &out, 1));
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(ct_at(out, i), exp(xv[i]), 1e-15);
    tc_tensor_release(out);
    ins[0] = ct_keep(ct_from(TC_F64, 1, &one, &f));
    CHECK_OK(tc_graph_run(g, ins, 2, &out, 1));
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(ct_at(out, i), -xv[i], 0);
    tc_tensor_release(out);
    /* a predicate of the wrong size at run time is refused by the input check */
    int64_t two = 2;
    double tt[2] = {1, 1};
    ins[0] = ct_keep(ct_from(TC_F64, 1, &two, tt));
    out = NULL;
    CHECK(tc_graph_run(g, ins, 2, &out, 1) != TC_OK);
    CHECK(out == NULL);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_control_while_runs_a_data_dependent_trip_count)
{
    int64_t one = 1;
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t x, r;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &x));
    tc_graph *sub[2] = {less_graph(100), double_graph()};
    CHECK_OK(tc_graph_add_control(g, TC_GOP_WHILE, &x, 1, sub, 2, &r));
    CHECK_OK(tc_graph_mark_output(g, r));
    double starts[3] = {1, 30, 250}, want[3] = {128, 120, 250};
    for (int k = 0; k < 3; k++) {
        const tc_tensor *in[1] = {ct_keep(ct_from(TC_F64, 1, &one, &starts[k]))};
        tc_tensor *out = NULL;
        CHECK_OK(tc_graph_run(g, in, 1, &out, 1));
        CHECK_NEAR(ct_at(out, 0), want[k], 0);
        tc_tensor_release(out);
    }
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_control_add_refuses_mismatched_subgraphs)
{
    int64_t three = 3, one = 1;
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t p, p3, x, y, r = -1;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &p));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &three, &p3));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &three, &x));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &y));
    int nodes = g->nnodes;

    /* an else branch taking (1) where the operand is (3) */
    tc_graph *a[2] = {unary_graph(TC_OP_EXP, 3), unary_graph(TC_OP_NEG, 3)};
    tc_graph *b[2] = {unary_graph(TC_OP_EXP, 1), unary_graph(TC_OP_NEG, 1)};
    tc_graph *mixed[2] = {a[0], b[1]};
    int32_t in[2] = {p, x};
    CHECK_ERR(tc_graph_add_control(g, TC_GOP_COND, in, 2, mixed, 2, &r), TC_ERR_SHAPE,
              "cond: input 1 of the else branch is float64(1), the node gives it float64(3)");
    /* a predicate with 3 elements */
    int32_t in3[2] = {p3, x};
    CHECK_ERR(tc_graph_add_control(g, TC_GOP_COND, in3, 2, a, 2, &r), TC_ERR_SHAPE,
              "cond: the predicate must have one element, got float64(3)");
    /* a while whose condition takes (1) for a state of (3) */
    tc_graph *w[2] = {less_graph(10), a[0]};
    CHECK_ERR(tc_graph_add_control(g, TC_GOP_WHILE, &x, 1, w, 2, &r), TC_ERR_SHAPE,
              "while: input 1 of the condition is float64(1), the node gives it float64(3)");
    /* a body that changes the state's dtype: (f64) -> (uint8) */
    tc_graph *bad = less_graph(5), *w3[2] = {w[0], bad};
    CHECK_ERR(tc_graph_add_control(g, TC_GOP_WHILE, &y, 1, w3, 2, &r), TC_ERR_SHAPE,
              "while: the body turns state 1 from float64(1) into uint8(1)");
    tc_graph_free(bad);
    tc_graph *w2[2] = {w[0], b[0]};
    CHECK_OK(tc_graph_add_control(g, TC_GOP_WHILE, &y, 1, w2, 2, &r)); /* fits: g owns w[0], b[0] */
    CHECK(g->nnodes == nodes + 1);
    /* the refused calls added nothing and left the subgraphs to the caller */
    tc_graph_free(a[0]), tc_graph_free(a[1]), tc_graph_free(b[1]);
    tc_graph_free(g);
    ct_drop();
}

/* A graph (x, lim) (f64, 1) -> x < lim, or -> x + x (a while with a loop invariant). */
static tc_graph *pair_graph(bool less)
{
    tc_graph *g = NULL;
    int64_t one = 1;
    int32_t in[2], y;
    tc_params p = {.s = {1}};
    tc_status s = tc_graph_new(&g);
    if (!s) s = tc_graph_add_input(g, TC_F64, 1, &one, &in[0]);
    if (!s) s = tc_graph_add_input(g, TC_F64, 1, &one, &in[1]);
    int32_t xx[2] = {in[0], in[0]};
    if (!s) s = less ? tc_graph_add_op(g, TC_OP_LT, in, 2, NULL, &y) : tc_graph_add_op(g, TC_OP_ADD, xx, 2, &p, &y);
    if (!s) s = tc_graph_mark_output(g, y);
    if (s) {
        printf("    pair_graph: %s\n", tc_last_error());
        tc_graph_free(g);
        return NULL;
    }
    return g;
}

TEST(graph_control_while_reads_loop_invariants)
{
    int64_t one = 1;
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t in[2], r[2] = {-1, -1};
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &in[0]));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &in[1]));
    tc_graph *sub[2] = {pair_graph(true), pair_graph(false)};
    CHECK_OK(tc_graph_add_control(g, TC_GOP_WHILE, in, 2, sub, 2, r));
    CHECK(g->nodes[g->nnodes - 1].nout == 1); /* the state; the bound is read only */
    CHECK_OK(tc_graph_mark_output(g, r[0]));
    double x = 3, lims[2] = {50, 2}, want[2] = {96, 3};
    for (int k = 0; k < 2; k++) {
        const tc_tensor *args[2] = {ct_keep(ct_from(TC_F64, 1, &one, &x)), ct_keep(ct_from(TC_F64, 1, &one, &lims[k]))};
        tc_tensor *out = NULL;
        CHECK_OK(tc_graph_run(g, args, 2, &out, 1));
        CHECK_NEAR(ct_at(out, 0), want[k], 0);
        tc_tensor_release(out);
    }
    tc_graph_free(g);
    ct_drop();
}
