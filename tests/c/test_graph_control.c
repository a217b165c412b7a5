/* test_graph_control.c -- COND and WHILE nodes (core/graph/control.c) on graphs built by
 * hand: the branch is chosen per run from the predicate tensor, a loop runs a
 * data-dependent number of times (zero included), and tc_graph_add_control refuses
 * subgraphs that do not fit the node (sizes, dtypes, counts, predicate) leaving the caller
 * owner of them. Gradients (core/graph/control_grad.c, core/autograd): a custom autograd
 * node with three outputs, a WHILE_GRAD node built by hand (the VJP applied once per
 * iteration, last first), and a cloned graph's cond replayed with autograd on. */
#include "ctest.h"
#include "graph/control.h"
#include <math.h>

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

/* A graph of two (f64, 1) inputs (a, b): a < b when less, else in[twice] + in[twice]: x + x
 * for (x, lim) (a while body with a loop invariant), g + g for (x, g) (the VJP of the body
 * x -> x + x). */
static tc_graph *pair_graph(bool less, int twice)
{
    tc_graph *g = NULL;
    int64_t one = 1;
    int32_t in[2], y;
    tc_params p = {.s = {1}};
    tc_status s = tc_graph_new(&g);
    if (!s) s = tc_graph_add_input(g, TC_F64, 1, &one, &in[0]);
    if (!s) s = tc_graph_add_input(g, TC_F64, 1, &one, &in[1]);
    int32_t xx[2] = {in[twice], in[twice]};
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
    tc_graph *sub[2] = {pair_graph(true, 0), pair_graph(false, 0)};
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

/* ---- gradients ------------------------------------------------------------------------------- */

/* A custom node y_k = x * (k + 1), k = 0..2: its backward gives sum_k (k + 1) g_k. ctx counts
 * backward calls [0] and releases [1]. */
static tc_status scale_back(void *ctx, const tc_node *n, const tc_tensor *const *gout, const bool *needs,
                            tc_tensor **gin)
{
    int *count = ctx;
    count[0]++;
    tc_tensor *acc = NULL;
    for (int k = 0; k < 3; k++) {
        if (!gout[k]) continue;
        tc_tensor *t = NULL, *sum = NULL;
        TRY(tc_g_scale(gout[k], k + 1, &t));
        if (!acc) {
            acc = t;
            continue;
        }
        tc_status s = tc_g_ew(TC_OP_ADD, acc, t, NULL, 1, 0, &sum);
        tc_tensor_release(acc), tc_tensor_release(t);
        if (s) return s;
        acc = sum;
    }
    if (needs[0]) gin[0] = acc;
    else tc_tensor_release(acc);
    return TC_OK;
}

static void scale_release(void *ctx) { ((int *)ctx)[1]++; }

static const tc_custom_fn scale_fn = {"ScaleBackward", scale_back, scale_release};

TEST(graph_control_custom_autograd_node_with_three_outputs)
{
    int64_t two = 2;
    double xv[2] = {1.5, -2};
    int64_t nodes0 = tc_autograd_live_nodes();
    static int count[2];
    count[0] = count[1] = 0;
    tc_tensor *x = ct_keep(ct_from(TC_F64, 1, &two, xv)), *y[3] = {NULL, NULL, NULL};
    CHECK_OK(tc_tensor_set_requires_grad(x, 1));
    for (int k = 0; k < 3; k++) {
        int prev = tc_set_grad_enabled(0);
        CHECK_OK(tc_g_scale(x, k + 1, &y[k]));
        tc_set_grad_enabled(prev);
        ct_keep(y[k]);
    }
    tc_edge e;
    CHECK_OK(tc_edge_of(x, &e));
    const tc_tensor *in[1] = {x};
    CHECK_OK(tc_autograd_custom(&scale_fn, count, in, &e, 1, y, 3));
    for (int k = 0; k < 3; k++) CHECK(tc_tensor_requires_grad(y[k]));
    CHECK(strcmp(tc_tensor_grad_fn_name(y[2]), "ScaleBackward") == 0);
    /* grad of (y1, y2) with seeds 1: 2 + 3 per element; the third output (index 2 > 1) works */
    double ones[2] = {1, 1};
    const tc_tensor *outs[2] = {y[1], y[2]}, *seeds[2] = {ct_keep(ct_from(TC_F64, 1, &two, ones)), NULL};
    seeds[1] = seeds[0];
    tc_tensor *gx = NULL;
    CHECK_OK(tc_autograd_grad(outs, seeds, 2, in, 1, 1, 0, 0, &gx));
    CHECK(SAME(gx, 5, 5));
    tc_tensor_release(gx);
    /* backward through y0 and y2 without retain_graph: x.grad = 1 + 3; then the ctx is freed */
    const tc_tensor *outs2[2] = {y[0], y[2]};
    CHECK_OK(tc_autograd_backward(outs2, seeds, 2, 0, 0));
    tc_tensor *g = tc_tensor_grad(x);
    CHECK(g && SAME(g, 4, 4));
    tc_tensor_release(g);
    CHECK(count[0] == 2 && count[1] == 1);
    CHECK_ERR(tc_autograd_backward(outs2, seeds, 2, 0, 0), TC_ERR_ARG,
              "ScaleBackward: trying to backward through the graph a second time");
    /* bad calls release ctx and say why */
    CHECK_ERR(tc_autograd_custom(&scale_fn, count, in, &e, 1, y, 0), TC_ERR_ARG,
              "autograd: bad custom node (1 inputs, 0 outputs)");
    CHECK(count[1] == 2);
    ct_drop();
    CHECK(tc_autograd_live_nodes() == nodes0);
}

TEST(graph_control_while_grad_applies_the_vjp_per_iteration)
{
    int64_t one = 1;
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t in[2], r = -1;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &in[0]));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &in[1]));
    int nodes = g->nnodes;
    /* a vjp returning a (3) gradient for a (1) state is refused, the caller keeps the graphs */
    tc_graph *bad[3] = {less_graph(100), double_graph(), NULL};
    int32_t vx, vgi, vy;
    tc_params sh = {.nshape = 1, .shape = {3}};
    CHECK_OK(tc_graph_new(&bad[2]));
    CHECK_OK(tc_graph_add_input(bad[2], TC_F64, 1, &one, &vx));
    CHECK_OK(tc_graph_add_input(bad[2], TC_F64, 1, &one, &vgi));
    CHECK_OK(tc_graph_add_op(bad[2], TC_OP_EXPAND, &vgi, 1, &sh, &vy));
    CHECK_OK(tc_graph_mark_output(bad[2], vy));
    CHECK_ERR(tc_graph_add_control(g, TC_GOP_WHILE_GRAD, in, 2, bad, 3, &r), TC_ERR_SHAPE,
              "while_grad: the vjp turns gradient 1 from float64(1) into float64(3)");
    CHECK(g->nnodes == nodes);
    for (int s = 0; s < 3; s++) tc_graph_free(bad[s]);
    /* x -> x + x while x < 100; d(final)/d(x0) = 2^N */
    tc_graph *sub[3] = {less_graph(100), double_graph(), pair_graph(false, 1)};
    CHECK_OK(tc_graph_add_control(g, TC_GOP_WHILE_GRAD, in, 2, sub, 3, &r));
    CHECK_OK(tc_graph_mark_output(g, r));
    CHECK(strcmp(tc_graph_op_name(TC_GOP_WHILE_GRAD), "while_grad") == 0);
    double starts[3] = {1, 30, 250}, seed = 0.5, want[3] = {64, 2, 0.5}; /* 7, 2 and 0 iterations */
    for (int k = 0; k < 3; k++) {
        const tc_tensor *args[2] = {ct_keep(ct_from(TC_F64, 1, &one, &starts[k])),
                                    ct_keep(ct_from(TC_F64, 1, &one, &seed))};
        tc_tensor *out = NULL;
        CHECK_OK(tc_graph_run(g, args, 2, &out, 1));
        CHECK_NEAR(ct_at(out, 0), want[k], 0);
        tc_tensor_release(out);
    }
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_control_clone_and_replay_a_cond_with_gradients)
{
    int64_t three = 3, one = 1;
    int64_t nodes0 = tc_autograd_live_nodes();
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t p, x, r;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &p));
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &three, &x));
    tc_graph *sub[2] = {unary_graph(TC_OP_EXP, 3), unary_graph(TC_OP_NEG, 3)};
    int32_t in[2] = {p, x};
    CHECK_OK(tc_graph_add_control(g, TC_GOP_COND, in, 2, sub, 2, &r));
    CHECK_OK(tc_graph_mark_output(g, r));
    tc_graph *c = NULL;
    CHECK_OK(tc_control_clone(g, &c));
    CHECK(c->nnodes == 1 && c->nodes[0].nsub == 2 && c->nodes[0].sub[0] != sub[0]);
    tc_graph_free(g); /* the clone owns its own subgraphs */
    double xv[3] = {0.5, -1, 2}, t = 1, f = 0;
    tc_tensor *xt = ct_keep(ct_from(TC_F64, 1, &three, xv));
    const tc_tensor *args[2] = {ct_keep(ct_from(TC_F64, 1, &one, &t)), xt};
    tc_tensor *out = NULL;
    CHECK_OK(tc_graph_run(c, args, 2, &out, 1));
    for (int i = 0; i < 3; i++) CHECK_NEAR(ct_at(out, i), exp(xv[i]), 1e-15);
    tc_tensor_release(out);
    /* replayed with x requiring grad (no trace): the cond node gets a CondBackward */
    CHECK_OK(tc_tensor_set_requires_grad(xt, 1));
    for (int k = 0; k < 2; k++) {
        args[0] = ct_keep(ct_from(TC_F64, 1, &one, k ? &f : &t));
        out = NULL;
        CHECK_OK(tc_control_replay(c, (tc_tensor *const *)args, &out));
        CHECK(strcmp(tc_tensor_grad_fn_name(out), "CondBackward") == 0);
        double ones[3] = {1, 1, 1};
        const tc_tensor *seed[1] = {ct_keep(ct_from(TC_F64, 1, &three, ones))}, *outs[1] = {out};
        const tc_tensor *wrt[1] = {xt};
        tc_tensor *gx = NULL;
        CHECK_OK(tc_autograd_grad(outs, seed, 1, wrt, 1, 0, 0, 0, &gx));
        for (int i = 0; i < 3; i++) CHECK_NEAR(ct_at(gx, i), k ? -1 : exp(xv[i]), 1e-15);
        tc_tensor_release(gx), tc_tensor_release(out);
    }
    tc_graph_free(c);
    ct_drop();
    CHECK(tc_autograd_live_nodes() == nodes0);
}

TEST(graph_control_dead_node_frees_its_subgraphs)
{
    int64_t one = 1;
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t x, r, y;
    tc_params p = {.s = {1}};
    CHECK_OK(tc_graph_add_input(g, TC_F64, 1, &one, &x));
    tc_graph *sub[2] = {less_graph(100), double_graph()}; /* the condition holds a constant tensor */
    CHECK_OK(tc_graph_add_control(g, TC_GOP_WHILE, &x, 1, sub, 2, &r));
    int32_t xx[2] = {x, x};
    CHECK_OK(tc_graph_add_op(g, TC_OP_ADD, xx, 2, &p, &y));
    CHECK_OK(tc_graph_mark_output(g, y)); /* the loop's result is unused: dce drops the node */
    tc_memstats before, after;
    tc_memory_stats(&before);
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_memory_stats(&after);
    CHECK(tc_graph_live_nodes(g) == 1);
    CHECK(after.tensors_live < before.tensors_live); /* the condition's constant went with it */
    tc_graph_free(g);
    /* an unused subgraph is freed directly, its constant too; NULL is accepted, as free() */
    tc_graph *unused = less_graph(100);
    CHECK(unused != NULL);
    tc_memory_stats(&before);
    tc_control_sub_free(unused);
    tc_memory_stats(&after);
    CHECK(after.tensors_live < before.tensors_live);
    tc_control_sub_free(NULL);
}
