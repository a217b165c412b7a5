/* test_graph_fuse.c -- elementwise fusion (core/graph/fuse.c) and the block-wise CPU
 * evaluation of fused groups (core/graph/fused.c) on graphs built by hand: which nodes
 * form groups, which values are group inputs and outputs, where dependencies forbid a
 * group, and that a fused run is bitwise the eager one (elementwise and trailing
 * sums/means alike) for any thread count. The graphs run through a small node-by-node
 * runner here (eager: every node through tc_op_run; fused: groups through tc_fused_eval).
 */
#include "ctest.h"
#include "graph/graph.h"
#include <stdlib.h>

/* ---- building -------------------------------------------------------------------------- */

static int build_failed; /* set by the helpers below; tests CHECK it */

static int32_t input(tc_graph *g, tc_dtype dt, int nd, const int64_t *sz)
{
    int32_t id = -1;
    if (tc_graph_add_input(g, dt, nd, sz, &id)) build_failed = 1, printf("  input: %s\n", tc_last_error());
    return id;
}

/* A captured tensor (EXTERNAL) or a constant; the graph keeps its own reference. */
static int32_t tensor_val(tc_graph *g, tc_tensor *t, int is_const)
{
    int32_t id = -1;
    if (!t || (is_const ? tc_graph_add_const(g, t, &id) : tc_graph_add_external(g, t, &id)))
        build_failed = 1, printf("  tensor value: %s\n", tc_last_error());
    tc_tensor_release(t);
    return id;
}

static int32_t scalar(tc_graph *g, tc_dtype dt, double v) { return tensor_val(g, ct_from(dt, 0, NULL, VALS(v)), 1); }

static int32_t op(tc_graph *g, tc_op o, int32_t a, int32_t b, int32_t c, const tc_params *p)
{
    int32_t in[3] = {a, b, c}, out[2] = {-1, -1};
    int n = c >= 0 ? 3 : b >= 0 ? 2 : a >= 0 ? 1 : 0;
    tc_params none = {0};
    if (tc_graph_add_op(g, o, in, n, p ? p : &none, out)) build_failed = 1, printf("  op: %s\n", tc_last_error());
    return out[0];
}
#define OP1(g, o, a, p) op((g), (o), (a), -1, -1, (p))
#define OP2(g, o, a, b, p) op((g), (o), (a), (b), -1, (p))

/* A node with explicitly given output (random ops: their shape comes from the tensor
 * they fill). */
static int32_t op_shaped(tc_graph *g, tc_op o, const int32_t *in, int nin, tc_dtype dt, int nd, const int64_t *sz)
{
    int32_t out = -1, dts[1] = {dt}, nds[1] = {nd};
    int64_t sizes[1][TC_MAX_DIMS] = {{0}};
    memcpy(sizes[0], sz, sizeof(int64_t) * (size_t)nd);
    tc_params p = {.s = {0.25, 1}};
    if (tc_graph_add_node(g, o, in, nin, &p, 1, dts, nds, (const int64_t(*)[TC_MAX_DIMS])sizes, &out))
        build_failed = 1, printf("  node: %s\n", tc_last_error());
    return out;
}

/* ---- running ----------------------------------------------------------------------------- */

/* Runs g node by node; fused: each group through tc_fused_eval at its last member. Random
 * nodes draw from one generator seeded the same on every run. outputs: new references. */
static tc_status run_graph(tc_graph *g, tc_tensor *const *inputs, int fused, tc_tensor **outputs)
{
    tc_tensor **rt = calloc((size_t)g->nvals, sizeof *rt);
    tc_generator *gen = NULL;
    tc_status s = tc_generator_new(1234, &gen);
    if (!rt) s = TC_ERR_MEMORY;
    for (int i = 0; s == TC_OK && i < g->ninputs; i++) tc_tensor_retain(rt[g->inputs[i]] = inputs[i]);
    for (int v = 0; s == TC_OK && v < g->nvals; v++)
        if (g->vals[v].kind == TC_GV_EXTERNAL || g->vals[v].kind == TC_GV_CONST) tc_tensor_retain(rt[v] = g->vals[v].t);
    for (int n = 0; s == TC_OK && n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (fused && nd->group >= 0) {
            const tc_ggroup *grp = &g->groups[nd->group];
            if (grp->nodes[grp->nnodes - 1] != n) continue;
            for (int o = 0; s == TC_OK && o < grp->nouts; o++) {
                const tc_gval *v = &g->vals[grp->outs[o]];
                s = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &rt[grp->outs[o]]);
            }
            if (s == TC_OK) s = tc_fused_eval(g, grp, rt);
            continue;
        }
        const tc_tensor *ins[8] = {0};
        for (int i = 0; i < nd->nin && i < 8; i++) ins[i] = nd->in[i] >= 0 ? rt[nd->in[i]] : NULL;
        tc_tensor *res[2] = {NULL, NULL};
        tc_params p = nd->p;
        if (nd->flags & TC_GN_RANDOM) {
            const tc_gval *v = &g->vals[nd->out[0]];
            p.gen = gen;
            s = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &res[0]);
        }
        if (s == TC_OK) s = tc_op_run((tc_op)nd->op, ins, nd->nin, &p, res, nd->nout);
        for (int o = 0; o < nd->nout; o++) rt[nd->out[o]] = res[o];
    }
    for (int i = 0; s == TC_OK && i < g->noutputs; i++) {
        outputs[i] = rt[g->outputs[i]];
        tc_tensor_retain(outputs[i]);
    }
    if (rt)
        for (int v = 0; v < g->nvals; v++) tc_tensor_release(rt[v]);
    free(rt);
    tc_generator_free(gen);
    return s;
}

/* Same dtype, sizes and bytes (both contiguous). */
static int same_bits(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim || !tc_tensor_is_contiguous(a) ||
        !tc_tensor_is_contiguous(b))
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d]) return 0;
    size_t n = (size_t)tc_tensor_numel(a) * (a->dtype == TC_F64 ? 8 : a->dtype == TC_F32 ? 4 : 1);
    if (memcmp(tc_tensor_data(a), tc_tensor_data(b), n) == 0) return 1;
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (ct_at(a, i) != ct_at(b, i)) {
            printf("  first difference at %lld: %.17g vs %.17g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            break;
        }
    return 0;
}

/* Runs g eagerly, then fuses it and runs the groups with 1 and 2 threads; every output
 * must be bitwise the eager one. Returns 1 when they all are. */
static int fused_matches_eager(tc_graph *g, tc_tensor *const *inputs)
{
    enum { MAXO = 4 };
    tc_tensor *ref[MAXO] = {0}, *got[MAXO] = {0};
    int ok = g->noutputs <= MAXO && run_graph(g, inputs, 0, ref) == TC_OK;
    if (!ok) printf("  eager run: %s\n", tc_last_error());
    if (ok && tc_pass_fuse(g) != TC_OK) ok = 0, printf("  fuse: %s\n", tc_last_error());
    int saved = tc_get_num_threads();
    for (int nt = 1; ok && nt <= 2; nt++) {
        tc_set_num_threads(nt);
        if (run_graph(g, inputs, 1, got) != TC_OK) {
            ok = 0, printf("  fused run (%d threads): %s\n", nt, tc_last_error());
            break;
        }
        for (int i = 0; i < g->noutputs; i++) {
            if (!same_bits(ref[i], got[i])) ok = 0, printf("  output %d differs with %d threads\n", i, nt);
            tc_tensor_release(got[i]);
            got[i] = NULL;
        }
    }
    tc_set_num_threads(saved);
    for (int i = 0; i < MAXO; i++) tc_tensor_release(ref[i]);
    return ok;
}

static tc_tensor *uniform(tc_dtype dt, int nd, const int64_t *sz, double lo, double hi, uint64_t seed)
{
    tc_tensor *t = NULL;
    tc_generator *gen = NULL;
    if (tc_tensor_new(dt, nd, sz, &t) || tc_generator_new(seed, &gen)) return t;
    tc_params p = {.s = {lo, hi}, .gen = gen};
    tc_op_run(TC_OP_UNIFORM, NULL, 0, &p, &t, 1);
    tc_generator_free(gen);
    return t;
}

static int in_list(const int32_t *l, int n, int32_t v)
{
    for (int i = 0; i < n; i++)
        if (l[i] == v) return 1;
    return 0;
}

static int group_of(const tc_graph *g, int32_t v) { return g->nodes[g->vals[v].producer].group; }

/* ---- the 8-op chain (bench/tocha/ewchain.lua) ------------------------------------------- */

/* z = exp(tanh(sqrt(abs(x * 1.5 + 0.5)) * x - 1)) over n floats. */
static int32_t ewchain(tc_graph *g, int64_t n, int32_t *x)
{
    *x = input(g, TC_F32, 1, &n);
    int32_t z = OP2(g, TC_OP_MUL, *x, scalar(g, TC_F32, 1.5), NULL);
    z = OP2(g, TC_OP_ADD, z, scalar(g, TC_F32, 0.5), P(.s = {1}));
    z = OP1(g, TC_OP_ABS, z, NULL);
    z = OP1(g, TC_OP_SQRT, z, NULL);
    z = OP2(g, TC_OP_MUL, z, *x, NULL);
    z = OP2(g, TC_OP_SUB, z, scalar(g, TC_F32, 1), P(.s = {1}));
    z = OP1(g, TC_OP_TANH, z, NULL);
    z = OP1(g, TC_OP_EXP, z, NULL);
    return z;
}

TEST(graph_fuse_chain_of_8_on_1m_is_one_exact_group)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int64_t n = 1 << 20;
    int32_t x, z = ewchain(g, n, &x);
    CHECK_OK(tc_graph_mark_output(g, z));
    CHECK(!build_failed);
    tc_tensor *xt = uniform(TC_F32, 1, &n, 0.1, 1, 7);
    CHECK(fused_matches_eager(g, &xt));
    CHECK(g->ngroups == 1);
    if (g->ngroups == 1) {
        const tc_ggroup *grp = &g->groups[0];
        CHECK(grp->nnodes == 8 && grp->nouts == 1 && grp->outs[0] == z);
        CHECK(grp->nins == 4 && in_list(grp->ins, grp->nins, x)); /* x and three constants */
    }
    for (int i = 0; i < g->nnodes; i++) CHECK(g->nodes[i].group == 0);
    char buf[2048];
    CHECK_OK(tc_graph_report(g, buf, sizeof buf, NULL));
    CHECK(strstr(buf, "fuse") && strstr(buf, "1 groups (8 nodes)"));
    CHECK_OK(tc_graph_dump(g, buf, sizeof buf, NULL));
    CHECK(strstr(buf, "[group 0]") != NULL);
    /* running the pass again gives the same groups */
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 8);
    tc_tensor_release(xt);
    tc_graph_free(g);
}

/* ---- broadcasting, masks, where, conversion, strided inputs ------------------------------ */

TEST(graph_fuse_broadcast_inputs_exact)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int64_t R = 100, C = 333;
    int32_t x = input(g, TC_F32, 2, SZ(R, C));
    int32_t row = tensor_val(g, uniform(TC_F32, 1, SZ(C), -1, 1, 3), 0); /* a captured row vector */
    int32_t col = input(g, TC_F32, 2, SZ(R, 1));
    int32_t xt = input(g, TC_F32, 2, SZ(C, R));
    int32_t y1 = OP2(g, TC_OP_MUL, x, row, NULL);
    int32_t y2 = OP2(g, TC_OP_ADD, y1, scalar(g, TC_F32, 0.25), P(.s = {1}));
    int32_t tv = OP1(g, TC_OP_TRANSPOSE, xt, P(.i = {0, 1})); /* between members, reads none */
    int32_t y3 = OP2(g, TC_OP_SUB, y2, col, P(.s = {0.5}));
    int32_t m = OP2(g, TC_OP_GT, y3, scalar(g, TC_F32, 0), NULL);
    int32_t y4 = op(g, TC_OP_WHERE, m, y3, y1, NULL);
    int32_t y5 = OP1(g, TC_OP_TANH, y4, NULL);
    int32_t y6 = OP2(g, TC_OP_ADD, y5, tv, P(.s = {1})); /* a transposed (strided) input */
    int32_t y7 = OP1(g, TC_OP_COPY, y6, P(.i = {TC_F64}));
    int32_t y8 = OP2(g, TC_OP_MUL, y7, scalar(g, TC_F64, 1.0 / 3), NULL);
    CHECK_OK(tc_graph_mark_output(g, y8));
    CHECK(!build_failed);
    CHECK(g->vals[m].dtype == TC_U8 && g->vals[y8].dtype == TC_F64);
    tc_tensor *ins[3] = {uniform(TC_F32, 2, SZ(R, C), -2, 2, 11), uniform(TC_F32, 2, SZ(R, 1), -1, 1, 12),
                         uniform(TC_F32, 2, SZ(C, R), -1, 1, 13)};
    CHECK(fused_matches_eager(g, ins));
    CHECK(g->ngroups == 1 && group_of(g, tv) == -1);
    if (g->ngroups == 1) {
        const tc_ggroup *grp = &g->groups[0];
        CHECK(grp->nnodes == 9 && grp->nouts == 1 && grp->outs[0] == y8);
        CHECK(in_list(grp->ins, grp->nins, row) && in_list(grp->ins, grp->nins, col) && in_list(grp->ins, grp->nins, tv));
        CHECK(!in_list(grp->ins, grp->nins, y1) && !in_list(grp->ins, grp->nins, m));
    }
    for (int i = 0; i < 3; i++) tc_tensor_release(ins[i]);
    tc_graph_free(g);
}

/* ---- outputs read outside the group -------------------------------------------------------- */

TEST(graph_fuse_value_read_outside_is_output)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int32_t x = input(g, TC_F32, 2, SZ(64, 64));
    int32_t w = tensor_val(g, uniform(TC_F32, 2, SZ(64, 64), -0.1, 0.1, 5), 0);
    int32_t a1 = OP2(g, TC_OP_MUL, x, scalar(g, TC_F32, 0.5), NULL);
    int32_t a2 = OP1(g, TC_OP_EXP, a1, NULL);
    int32_t a3 = OP2(g, TC_OP_ADD, a2, x, P(.s = {1}));
    int32_t mm = OP2(g, TC_OP_MM, a2, w, NULL); /* reads a2 after the last member */
    int32_t b1 = OP2(g, TC_OP_ADD, mm, a3, P(.s = {2}));
    int32_t b2 = OP1(g, TC_OP_NEG, b1, NULL);
    CHECK_OK(tc_graph_mark_output(g, b2));
    CHECK_OK(tc_graph_mark_output(g, a1)); /* a graph output inside the group */
    CHECK(!build_failed);
    tc_tensor *xt = uniform(TC_F32, 2, SZ(64, 64), -1, 1, 21);
    CHECK(fused_matches_eager(g, &xt));
    CHECK(g->ngroups == 2);
    int ga = group_of(g, a1), gb = group_of(g, b1);
    CHECK(ga >= 0 && ga == group_of(g, a2) && ga == group_of(g, a3));
    CHECK(gb >= 0 && gb != ga && gb == group_of(g, b2) && group_of(g, mm) == -1);
    if (ga >= 0 && gb >= 0) {
        const tc_ggroup *A = &g->groups[ga], *B = &g->groups[gb];
        CHECK(A->nouts == 3 && in_list(A->outs, A->nouts, a1) && in_list(A->outs, A->nouts, a2) &&
              in_list(A->outs, A->nouts, a3));
        CHECK(B->nouts == 1 && B->outs[0] == b2); /* b1 lives only inside */
        CHECK(in_list(B->ins, B->nins, mm) && in_list(B->ins, B->nins, a3));
    }
    tc_tensor_release(xt);
    tc_graph_free(g);
}

/* ---- reductions at the end ---------------------------------------------------------------- */

/* x -> x*1.5 -> tanh -> reduce(op, dim, keepdim); b also a graph output when shared. */
static void check_tail(int *ctest_failed, tc_dtype dt, int nd, const int64_t *sz, tc_op red, int dim, int keep,
                       int shared, int fused_expected)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int32_t x = input(g, dt, nd, sz);
    int32_t a = OP2(g, TC_OP_MUL, x, scalar(g, dt, 1.5), NULL);
    int32_t b = OP1(g, TC_OP_TANH, a, NULL);
    int32_t s = OP1(g, red, b, P(.i = {dim, keep}));
    CHECK_OK(tc_graph_mark_output(g, s));
    if (shared) CHECK_OK(tc_graph_mark_output(g, b));
    CHECK(!build_failed);
    tc_tensor *xt = uniform(dt, nd, sz, -1, 1, 31);
    CHECK(fused_matches_eager(g, &xt));
    CHECK(g->ngroups == 1);
    if (g->ngroups == 1) {
        const tc_ggroup *grp = &g->groups[0];
        CHECK(grp->nnodes == (fused_expected ? 3 : 2));
        CHECK(group_of(g, s) == (fused_expected ? 0 : -1));
        CHECK(grp->nouts == (fused_expected ? 1 + shared : 1));
        CHECK(in_list(grp->outs, grp->nouts, fused_expected ? s : b));
    }
    tc_tensor_release(xt);
    tc_graph_free(g);
}

TEST(graph_fuse_trailing_reduction_exact)
{
    int64_t n1 = (5 << 20) + 3; /* > 256 chunks: chunks of 20481, odd: lane tails everywhere */
    check_tail(ctest_failed, TC_F32, 1, &n1, TC_OP_SUM, -1, 0, 0, 1);
    check_tail(ctest_failed, TC_F32, 1, &n1, TC_OP_MEAN, -1, 0, 1, 1);
    check_tail(ctest_failed, TC_F64, 2, SZ(300, 77), TC_OP_SUM, -1, 1, 0, 1); /* keepdim: (1,1) */
    check_tail(ctest_failed, TC_F64, 2, SZ(1000, 37), TC_OP_MEAN, 1, 0, 0, 1); /* rows */
    check_tail(ctest_failed, TC_F32, 3, SZ(7, 50, 129), TC_OP_SUM, 2, 1, 1, 1);
    check_tail(ctest_failed, TC_F32, 2, SZ(3, 200003), TC_OP_SUM, 1, 0, 0, 1); /* few long rows: split */
    check_tail(ctest_failed, TC_F32, 2, SZ(1000, 37), TC_OP_SUM, 0, 0, 0, 0);   /* not the last dim */
    check_tail(ctest_failed, TC_F32, 0, NULL, TC_OP_SUM, -1, 0, 0, 1);         /* a 0-d value */
}

/* ---- random nodes ------------------------------------------------------------------------- */

TEST(graph_fuse_random_node_breaks_group)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int64_t n = 5000;
    int32_t x = input(g, TC_F32, 1, &n);
    int32_t a1 = OP2(g, TC_OP_MUL, x, scalar(g, TC_F32, 2), NULL);
    int32_t a2 = OP1(g, TC_OP_SIGMOID, a1, NULL);
    int32_t m = op_shaped(g, TC_OP_BERNOULLI, &a2, 1, TC_F32, 1, &n); /* reads a2 */
    int32_t b1 = OP2(g, TC_OP_MUL, a2, m, NULL);
    int32_t b2 = OP2(g, TC_OP_ADD, b1, scalar(g, TC_F32, 1), P(.s = {1}));
    /* a draw that reads no member does not split a chain */
    int32_t c1 = OP1(g, TC_OP_NEG, b2, NULL);
    int32_t r = op_shaped(g, TC_OP_UNIFORM, NULL, 0, TC_F32, 1, &n);
    int32_t c2 = OP2(g, TC_OP_MUL, c1, r, NULL);
    int32_t c3 = OP1(g, TC_OP_EXP, c2, NULL);
    CHECK_OK(tc_graph_mark_output(g, c3));
    CHECK(!build_failed);
    CHECK(g->nodes[g->vals[m].producer].flags & TC_GN_RANDOM);
    tc_tensor *xt = uniform(TC_F32, 1, &n, -1, 1, 41);
    CHECK(fused_matches_eager(g, &xt));
    CHECK(g->ngroups == 2);
    CHECK(group_of(g, m) == -1 && group_of(g, r) == -1);
    int ga = group_of(g, a1), gb = group_of(g, b1);
    CHECK(ga >= 0 && ga == group_of(g, a2) && gb >= 0 && gb != ga);
    CHECK(gb == group_of(g, b2) && gb == group_of(g, c1) && gb == group_of(g, c3));
    if (ga >= 0 && gb >= 0) {
        CHECK(g->groups[ga].nouts == 1 && g->groups[ga].outs[0] == a2);
        CHECK(in_list(g->groups[gb].ins, g->groups[gb].nins, m) && in_list(g->groups[gb].ins, g->groups[gb].nins, r));
    }
    tc_tensor_release(xt);
    tc_graph_free(g);
}

/* A copy from a value on another device (a download into a CPU graph, as tracing
 * tc_tensor_to(d, TC_CPU) records it) never joins a group: a CPU group's loops would read
 * the device memory directly (a crash on a GPU; the emulator's guard found it). */
TEST(graph_fuse_cross_device_copy_not_fused)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int64_t n = 64;
    int32_t x = input(g, TC_F32, 1, &n), d = input(g, TC_F32, 1, &n);
    g->vals[d].device = TC_DEVICE_CUDA(0);
    int32_t c = OP1(g, TC_OP_COPY, d, NULL);
    g->vals[c].device = TC_CPU;
    int32_t y = OP2(g, TC_OP_ADD, x, c, P(.s = {1}));
    int32_t z = OP1(g, TC_OP_EXP, y, NULL);
    CHECK_OK(tc_graph_mark_output(g, z));
    CHECK(!build_failed);
    CHECK_OK(tc_pass_fuse(g));
    CHECK(group_of(g, c) == -1);
    int gy = group_of(g, y);
    CHECK(gy >= 0 && gy == group_of(g, z));
    if (gy >= 0) CHECK(in_list(g->groups[gy].ins, g->groups[gy].nins, c));
    /* the same copy of a CPU value joins */
    g->vals[d].device = TC_CPU;
    CHECK_OK(tc_pass_fuse(g));
    CHECK(group_of(g, c) >= 0 && group_of(g, c) == group_of(g, z));
    tc_graph_free(g);
}

/* ---- dependencies -------------------------------------------------------------------------- */

TEST(graph_fuse_dependency_illegal_cases_not_fused)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int32_t x = input(g, TC_F32, 2, SZ(50, 40));
    int32_t y = input(g, TC_F32, 2, SZ(50, 40));
    int32_t w = tensor_val(g, uniform(TC_F32, 2, SZ(40, 40), -0.2, 0.2, 6), 0);
    /* s reads a2 between a2 and b1: {a1,a2,b1,b2} would run b's part before s exists */
    int32_t a1 = OP2(g, TC_OP_MUL, x, scalar(g, TC_F32, 2), NULL);
    int32_t a2 = OP1(g, TC_OP_EXP, a1, NULL);
    int32_t s = OP1(g, TC_OP_SUM, a2, P(.i = {0})); /* not fusable: dim 0 */
    int32_t b1 = OP2(g, TC_OP_ADD, a2, s, P(.s = {1}));
    int32_t b2 = OP1(g, TC_OP_NEG, b1, NULL);
    int32_t bs = OP1(g, TC_OP_SUM, b2, P(.i = {0})); /* closes b's group */
    /* p's group is closed by mm before r reads p; q's chain takes r */
    int32_t p = OP1(g, TC_OP_TANH, y, NULL);
    int32_t q = OP1(g, TC_OP_SIGMOID, y, NULL);
    int32_t pm = OP2(g, TC_OP_MM, p, w, NULL);
    int32_t r = OP2(g, TC_OP_SUB, q, p, P(.s = {1}));
    int32_t r2 = OP2(g, TC_OP_MUL, r, pm, NULL);
    int32_t rs = OP1(g, TC_OP_SUM, r2, P(.i = {0})); /* closes q's group */
    /* two open chains read together merge: u and v into one group with their sum */
    int32_t u = OP1(g, TC_OP_SQUARE, x, NULL);
    int32_t v = OP1(g, TC_OP_ABS, y, NULL);
    int32_t uv = OP2(g, TC_OP_ADD, u, v, P(.s = {1}));
    int32_t o1 = OP2(g, TC_OP_ADD, uv, r2, P(.s = {1}));
    int32_t o2 = OP2(g, TC_OP_ADD, o1, bs, P(.s = {1}));
    int32_t o3 = OP2(g, TC_OP_ADD, o2, rs, P(.s = {-1}));
    CHECK_OK(tc_graph_mark_output(g, o3));
    CHECK(!build_failed);
    tc_tensor *ins[2] = {uniform(TC_F32, 2, SZ(50, 40), -1, 1, 51), uniform(TC_F32, 2, SZ(50, 40), -1, 1, 52)};
    CHECK(fused_matches_eager(g, ins));
    CHECK(g->ngroups == 4);
    int ga = group_of(g, a1), gb = group_of(g, b1);
    CHECK(ga >= 0 && ga == group_of(g, a2) && group_of(g, s) == -1);
    CHECK(gb >= 0 && gb != ga && gb == group_of(g, b2) && group_of(g, bs) == -1);
    CHECK(group_of(g, p) == -1 && group_of(g, pm) == -1); /* tanh alone is no group */
    int gq = group_of(g, q);
    CHECK(gq >= 0 && gq == group_of(g, r) && gq == group_of(g, r2) && group_of(g, rs) == -1);
    int gu = group_of(g, u);
    CHECK(gu >= 0 && gu == group_of(g, v) && gu == group_of(g, uv) && gu == group_of(g, o1));
    CHECK(gu == group_of(g, o2) && gu == group_of(g, o3));
    CHECK(gu != gq && gu != gb && gq != gb && gq != ga);
    if (gu >= 0) CHECK(g->groups[gu].nnodes == 6 && g->groups[gu].nouts == 1);
    /* every group's inputs are made before its last member; every member value read by a
     * later non-member is an output */
    for (int k = 0; k < g->ngroups; k++) {
        const tc_ggroup *grp = &g->groups[k];
        int lastn = grp->nodes[grp->nnodes - 1];
        for (int i = 0; i < grp->nins; i++) {
            const tc_gval *iv = &g->vals[grp->ins[i]];
            CHECK(iv->kind != TC_GV_OP || iv->producer < lastn);
            CHECK(iv->kind != TC_GV_OP || g->nodes[iv->producer].group != k);
        }
        for (int n = 0; n < g->nnodes; n++)
            for (int i = 0; g->nodes[n].group != k && i < g->nodes[n].nin; i++) {
                int32_t vv = g->nodes[n].in[i];
                if (vv >= 0 && g->vals[vv].kind == TC_GV_OP && g->nodes[g->vals[vv].producer].group == k) {
                    CHECK(n > lastn);
                    CHECK(in_list(grp->outs, grp->nouts, vv));
                }
            }
    }
    for (int i = 0; i < 2; i++) tc_tensor_release(ins[i]);
    tc_graph_free(g);
}

/* ---- bad input --------------------------------------------------------------------------- */

TEST(graph_fuse_eval_bad_input)
{
    CHECK_ERR(tc_pass_fuse(NULL), TC_ERR_ARG, "fuse");
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int32_t x = input(g, TC_F32, 2, SZ(4, 5));
    int32_t a = OP1(g, TC_OP_NEG, x, NULL);
    int32_t b = OP1(g, TC_OP_EXP, a, NULL);
    CHECK_OK(tc_graph_mark_output(g, b));
    CHECK(!build_failed);
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1);
    if (g->ngroups != 1) {
        tc_graph_free(g);
        return;
    }
    tc_tensor *rt[3] = {NULL, NULL, NULL};
    tc_tensor *xv = ct_arange(TC_F32, 2, SZ(4, 5)), *wrong = ct_arange(TC_F32, 2, SZ(3, 5));
    tc_tensor *out = ct_arange(TC_F32, 2, SZ(4, 5)), *before = ct_arange(TC_F32, 2, SZ(4, 5));
    CHECK_ERR(tc_fused_eval(g, &g->groups[0], rt), TC_ERR_ARG, "not bound");
    rt[x] = xv;
    CHECK_ERR(tc_fused_eval(g, &g->groups[0], rt), TC_ERR_ARG, "output");
    rt[b] = out;
    rt[x] = wrong;
    CHECK_ERR(tc_fused_eval(g, &g->groups[0], rt), TC_ERR_ARG, "broadcastable");
    CHECK(same_bits(out, before)); /* a failed call wrote nothing */
    rt[x] = xv;
    CHECK_OK(tc_fused_eval(g, &g->groups[0], rt));
    CHECK_NEAR(ct_at(out, 7), exp(-7.0), 1e-6);
    CHECK_ERR(tc_fused_eval(NULL, &g->groups[0], rt), TC_ERR_ARG, "NULL");
    tc_tensor_release(xv);
    tc_tensor_release(wrong);
    tc_tensor_release(out);
    tc_tensor_release(before);
    tc_graph_free(g);
}

/* ---- through the compiler and the executor ------------------------------------------------- */

/* Eager node-by-node results vs tc_graph_compile (every pass) + tc_graph_run, 1 and 2
 * threads; *groups receives the group count after compiling. */
static int compiled_matches_eager(tc_graph *g, tc_tensor *const *inputs, int *groups)
{
    enum { MAXO = 4 };
    tc_tensor *ref[MAXO] = {0}, *got[MAXO] = {0};
    int ok = g->noutputs <= MAXO && run_graph(g, inputs, 0, ref) == TC_OK;
    if (ok && tc_graph_compile(g, TC_PASS_ALL) != TC_OK) ok = 0, printf("  compile: %s\n", tc_last_error());
    *groups = g->ngroups;
    int saved = tc_get_num_threads();
    for (int nt = 1; ok && nt <= 2; nt++) {
        tc_set_num_threads(nt);
        for (int rep = 0; ok && rep < 2; rep++) { /* a second run reuses the plan */
            if (tc_graph_run(g, (const tc_tensor *const *)inputs, g->ninputs, got, g->noutputs) != TC_OK) {
                ok = 0, printf("  run (%d threads): %s\n", nt, tc_last_error());
                break;
            }
            for (int i = 0; i < g->noutputs; i++) {
                if (!same_bits(ref[i], got[i])) ok = 0, printf("  compiled output %d differs (%d threads)\n", i, nt);
                tc_tensor_release(got[i]);
                got[i] = NULL;
            }
        }
    }
    tc_set_num_threads(saved);
    for (int i = 0; i < MAXO; i++) tc_tensor_release(ref[i]);
    return ok;
}

TEST(graph_fuse_compiled_run_matches_eager)
{
    /* the 8-op chain with a trailing sum, the chain's value also returned */
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int64_t n = 300000;
    int32_t x, z = ewchain(g, n, &x);
    int32_t s = OP1(g, TC_OP_SUM, z, P(.i = {-1}));
    CHECK_OK(tc_graph_mark_output(g, s));
    CHECK_OK(tc_graph_mark_output(g, z));
    CHECK(!build_failed);
    tc_tensor *xt = uniform(TC_F32, 1, &n, 0.1, 1, 61);
    int groups = -1;
    CHECK(compiled_matches_eager(g, &xt, &groups));
    CHECK(groups == 1 && g->groups[0].nnodes == 9 && g->groups[0].nouts == 2);
    tc_tensor_release(xt);
    tc_graph_free(g);

    /* groups split by a matrix product, broadcast inputs, a row mean at the end */
    CHECK_OK(tc_graph_new(&g));
    build_failed = 0;
    int32_t a = input(g, TC_F32, 2, SZ(128, 96));
    int32_t w = tensor_val(g, uniform(TC_F32, 2, SZ(96, 96), -0.1, 0.1, 62), 0);
    int32_t bias = tensor_val(g, uniform(TC_F32, 1, SZ(96), -1, 1, 63), 0);
    int32_t h = OP2(g, TC_OP_MM, a, w, NULL);
    int32_t h1 = OP2(g, TC_OP_ADD, h, bias, P(.s = {1}));
    int32_t h2 = OP1(g, TC_OP_SIGMOID, h1, NULL);
    int32_t h3 = OP2(g, TC_OP_MUL, h2, a, NULL);
    int32_t m = OP1(g, TC_OP_MEAN, h3, P(.i = {1, 1}));
    int32_t h4 = OP2(g, TC_OP_MM, h2, w, NULL); /* h2 read outside: a group output */
    int32_t h5 = OP2(g, TC_OP_SUB, h4, m, P(.s = {1}));
    int32_t h6 = OP1(g, TC_OP_TANH, h5, NULL);
    CHECK_OK(tc_graph_mark_output(g, h6));
    CHECK(!build_failed);
    tc_tensor *at = uniform(TC_F32, 2, SZ(128, 96), -1, 1, 64);
    CHECK(compiled_matches_eager(g, &at, &groups));
    CHECK(groups == 2);
    tc_tensor_release(at);
    tc_graph_free(g);
}
