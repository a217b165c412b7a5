/* graph_test_util.h -- helpers shared by the graph pass tests (test_graph_passes.c,
 * test_graph_simplify.c): building nodes by hand, constants, inputs, a small interpreter
 * that runs a graph's live nodes with tc_op_exec, and checks on the dump and report. */
#ifndef GRAPH_TEST_UTIL_H
#define GRAPH_TEST_UTIL_H
#include "ctest.h"
#include "graph/graph.h"
#include <stdio.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* A node with explicit result type (fill and random ops take their shape from the result). */
static inline int32_t node_typed(tc_graph *g, tc_op op, const int32_t *in, int nin, const tc_params *p, tc_dtype dt,
                          int ndim, const int64_t *sizes)
{
    int32_t dts[1] = {dt}, nds[1] = {ndim}, out = -1;
    int64_t sz[1][TC_MAX_DIMS] = {{0}};
    if (ndim) memcpy(sz[0], sizes, sizeof(int64_t) * (size_t)ndim);
    if (tc_graph_add_node(g, op, in, nin, p, 1, dts, nds, (const int64_t(*)[TC_MAX_DIMS])sz, &out)) return -1;
    return out;
}

/* A node with inferred result types; returns its first result. */
static inline int32_t op1(tc_graph *g, tc_op op, int32_t a, const tc_params *p)
{
    int32_t out[2] = {-1, -1};
    return tc_graph_add_op(g, op, &a, 1, p, out) ? -1 : out[0];
}

static inline int32_t op2(tc_graph *g, tc_op op, int32_t a, int32_t b, const tc_params *p)
{
    int32_t in[2] = {a, b}, out[2] = {-1, -1};
    return tc_graph_add_op(g, op, in, 2, p, out) ? -1 : out[0];
}

/* A constant from values (the graph retains it; our reference is dropped). */
static inline int32_t cst(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes, const double *vals)
{
    tc_tensor *t = ct_from(dt, ndim, sizes, vals);
    int32_t id = -1;
    if (t && tc_graph_add_const(g, t, &id)) id = -1;
    tc_tensor_release(t);
    return id;
}

static inline int32_t ext(tc_graph *g, tc_tensor *t)
{
    int32_t id = -1;
    return tc_graph_add_external(g, t, &id) ? -1 : id;
}

static inline int32_t input(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes)
{
    int32_t id = -1;
    return tc_graph_add_input(g, dt, ndim, sizes, &id) ? -1 : id;
}

/* Runs g's live nodes in order with tc_op_exec (no executor needed): res[i] receives a
 * contiguous copy of output i. */
static inline tc_status interp(const tc_graph *g, tc_tensor *const *inputs, tc_tensor **res)
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
static inline int same_bits(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d]) return 0;
    size_t n = (size_t)(tc_tensor_numel(a) * (int64_t)tc_dtype_size((tc_dtype)a->dtype));
    return n == 0 || memcmp(tc_tensor_data(a), tc_tensor_data(b), n) == 0;
}

/* Runs g before and after pass (same inputs, generator reseeded): 1 when every output is
 * bitwise the same. */
static inline int same_results(tc_graph *g, tc_status (*pass)(tc_graph *), tc_tensor *const *inputs, tc_generator *gen)
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

static inline int dump_has(const tc_graph *g, const char *text)
{
    static char buf[8192];
    if (tc_graph_dump(g, buf, sizeof buf, NULL)) return 0;
    int ok = strstr(buf, text) != NULL;
    if (!ok) printf("    dump lacks '%s':\n%s", text, buf);
    return ok;
}

static inline int report_has(const tc_graph *g, const char *text)
{
    static char buf[4096];
    if (tc_graph_report(g, buf, sizeof buf, NULL)) return 0;
    int ok = strstr(buf, text) != NULL;
    if (!ok) printf("    report lacks '%s':\n%s", text, buf);
    return ok;
}

static inline int count_op(const tc_graph *g, tc_op op)
{
    int k = 0;
    for (int n = 0; n < g->nnodes; n++) k += !(g->nodes[n].flags & TC_GN_DEAD) && g->nodes[n].op == (int32_t)op;
    return k;
}


#endif /* GRAPH_TEST_UTIL_H */
