/* test_graph_passes.c -- dead-code elimination, CSE, constant folding and algebraic
 * simplification (core/graph/{dce,cse,fold,simplify}.c) on small hand-built graphs: node
 * counts and the node list after each pass, the report line, results identical before and
 * after (a small interpreter runs the live nodes with tc_op_exec), and the cases that must
 * NOT change (random nodes, externals, float x*0, add with a scale, as_strided readers). */
#include "ctest.h"
#include "graph/graph.h"
#include <stdio.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* A node with explicit result type (fill and random ops take their shape from the result). */
static int32_t node_typed(tc_graph *g, tc_op op, const int32_t *in, int nin, const tc_params *p, tc_dtype dt,
                          int ndim, const int64_t *sizes)
{
    int32_t dts[1] = {dt}, nds[1] = {ndim}, out = -1;
    int64_t sz[1][TC_MAX_DIMS] = {{0}};
    if (ndim) memcpy(sz[0], sizes, sizeof(int64_t) * (size_t)ndim);
    if (tc_graph_add_node(g, op, in, nin, p, 1, dts, nds, (const int64_t(*)[TC_MAX_DIMS])sz, &out)) return -1;
    return out;
}

/* A node with inferred result types; returns its first result. */
static int32_t op1(tc_graph *g, tc_op op, int32_t a, const tc_params *p)
{
    int32_t out[2] = {-1, -1};
    return tc_graph_add_op(g, op, &a, 1, p, out) ? -1 : out[0];
}

static int32_t op2(tc_graph *g, tc_op op, int32_t a, int32_t b, const tc_params *p)
{
    int32_t in[2] = {a, b}, out[2] = {-1, -1};
    return tc_graph_add_op(g, op, in, 2, p, out) ? -1 : out[0];
}

/* A constant from values (the graph retains it; our reference is dropped). */
static int32_t cst(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes, const double *vals)
{
    tc_tensor *t = ct_from(dt, ndim, sizes, vals);
    int32_t id = -1;
    if (t && tc_graph_add_const(g, t, &id)) id = -1;
    tc_tensor_release(t);
    return id;
}

static int32_t ext(tc_graph *g, tc_tensor *t)
{
    int32_t id = -1;
    return tc_graph_add_external(g, t, &id) ? -1 : id;
}

static int32_t input(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes)
{
    int32_t id = -1;
    return tc_graph_add_input(g, dt, ndim, sizes, &id) ? -1 : id;
}

/* Runs g's live nodes in order with tc_op_exec (no executor needed): res[i] receives a
 * contiguous copy of output i. */
static tc_status interp(const tc_graph *g, tc_tensor *const *inputs, tc_tensor **res)
{
    tc_tensor **vt = calloc((size_t)g->nvals + 1, sizeof *vt);
    if (!vt) return TC_ERR_MEMORY;
    tc_status s = TC_OK;
    for (int v = 0; v < g->nvals; v++) {
        const tc_gval *x = &g->vals[v];
        if (x->kind == TC_GV_INPUT) vt[v] = inputs[x->arg];
        else if (x->kind != TC_GV_OP) vt[v] = x->t;
        if (vt[v]) tc_tensor_retain(vt[v]);
    }
    for (int n = 0; n < g->nnodes && s == TC_OK; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        const tc_opinfo *info = tc_op_info((tc_op)nd->op);
        const tc_tensor *ins[8] = {0};
        for (int i = 0; i < nd->nin; i++) ins[i] = nd->in[i] >= 0 ? vt[nd->in[i]] : NULL;
        tc_tensor *out[2] = {NULL, NULL};
        for (int o = 0; o < nd->nout && info->kind != TC_KIND_VIEW; o++) {
            const tc_gval *x = &g->vals[nd->out[o]];
            if ((s = tc_tensor_new((tc_dtype)x->dtype, x->ndim, x->size, &out[o]))) break;
        }
        if (s == TC_OK) s = tc_op_exec((tc_op)nd->op, ins, nd->nin, &nd->p, out, info->nout);
        for (int o = 0; o < 2; o++) {
            if (s == TC_OK && o < nd->nout) vt[nd->out[o]] = out[o];
            else tc_tensor_release(out[o]);
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        res[i] = NULL;
        const tc_tensor *src = vt[g->outputs[i]];
        if (s == TC_OK && !src) s = tc_set_error(TC_ERR_INTERNAL, "interp: output %d not computed", i);
        if (s == TC_OK) s = tc_tensor_new((tc_dtype)src->dtype, src->ndim, src->size, &res[i]);
        if (s == TC_OK) s = tc_op_exec(TC_OP_COPY, &src, 1, P(.i = {-1}), &res[i], 1);
    }
    for (int v = 0; v < g->nvals; v++) tc_tensor_release(vt[v]);
    free(vt);
    return s;
}

/* Bitwise equality of two contiguous tensors. */
static int same_bits(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d]) return 0;
    size_t n = (size_t)(tc_tensor_numel(a) * (int64_t)tc_dtype_size((tc_dtype)a->dtype));
    return n == 0 || memcmp(tc_tensor_data(a), tc_tensor_data(b), n) == 0;
}

/* Runs g before and after pass (same inputs, generator reseeded): 1 when every output is
 * bitwise the same. */
static int same_results(tc_graph *g, tc_status (*pass)(tc_graph *), tc_tensor *const *inputs, tc_generator *gen)
{
    tc_tensor *r0[8] = {0}, *r1[8] = {0};
    int n = g->noutputs, ok = n <= 8;
    if (gen) tc_generator_seed(gen, 7);
    if (interp(g, inputs, r0)) ok = 0, printf("    before: %s\n", tc_last_error());
    if (ok && pass(g)) ok = 0, printf("    pass: %s\n", tc_last_error());
    if (gen) tc_generator_seed(gen, 7);
    if (ok && interp(g, inputs, r1)) ok = 0, printf("    after: %s\n", tc_last_error());
    for (int i = 0; ok && i < n; i++)
        if (!same_bits(r0[i], r1[i])) ok = 0, printf("    output %d differs\n", i);
    for (int i = 0; i < n; i++) tc_tensor_release(r0[i]), tc_tensor_release(r1[i]);
    return ok;
}

static int dump_has(const tc_graph *g, const char *text)
{
    static char buf[8192];
    if (tc_graph_dump(g, buf, sizeof buf, NULL)) return 0;
    int ok = strstr(buf, text) != NULL;
    if (!ok) printf("    dump lacks '%s':\n%s", text, buf);
    return ok;
}

static int report_has(const tc_graph *g, const char *text)
{
    static char buf[4096];
    if (tc_graph_report(g, buf, sizeof buf, NULL)) return 0;
    int ok = strstr(buf, text) != NULL;
    if (!ok) printf("    report lacks '%s':\n%s", text, buf);
    return ok;
}

static int count_op(const tc_graph *g, tc_op op)
{
    int k = 0;
    for (int n = 0; n < g->nnodes; n++) k += !(g->nodes[n].flags & TC_GN_DEAD) && g->nodes[n].op == (int32_t)op;
    return k;
}


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
