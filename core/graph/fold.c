/* fold.c -- constant folding: a node whose inputs are all constants (or that has none,
 * like fill) is run now, with the same kernels eager mode uses, and its results become
 * CONST values. One forward sweep: a folded result is a constant for the nodes after it.
 *
 * Never folded: random nodes (they draw at run time, in order, like eager), control-flow
 * nodes, anything reading an INPUT or EXTERNAL value (externals are read by reference and
 * change between runs: parameters, optimizer state), and results above 16 MB (a constant
 * lives as long as the graph; the report notes how many were left), and fills above 64 KB.
 *
 * Device graphs fold too: results are allocated on the node's device (vals[].device) and
 * computed there through the dispatcher, so a constant stays where the graph runs.
 *
 * View nodes of constants fold into contiguous copies, except views that would grow the
 * data (expand, overlapping unfold, as_strided): those stay cheap headers at run time.
 * NOTE: as_strided reads its input's storage at absolute offsets, so a view whose value
 * reaches an as_strided (directly or through other views) is never replaced by a copy;
 * and later folds evaluate on the real view of the original constant, never on the
 * copy, so a folded as_strided reads what eager read.
 */
#include "graph.h"
#include <stdio.h>
#include <stdlib.h>

#define FOLD_MAX_BYTES ((int64_t)16 << 20)
/* A fill costs as much to run as its constant costs to read, and a constant holds memory
 * as long as the graph: fills above this stay nodes (the arena reuses their buffers;
 * simplify still sees them as zeros / ones). Autograd's zero blocks (the gradient of each
 * slice of a sequence) would otherwise pile up as constants. */
#define FOLD_MAX_FILL_BYTES ((int64_t)64 << 10)

static bool foldable(const tc_gnode *nd)
{
    if (nd->flags & (TC_GN_DEAD | TC_GN_RANDOM)) return false;
    if (nd->op < 0 || nd->op >= TC_OP_COUNT || nd->nsub > 0 || nd->nout < 1) return false;
    return tc_op_info((tc_op)nd->op)->kind != TC_KIND_RANDOM;
}

static bool is_view(const tc_gnode *nd)
{
    return nd->op >= 0 && nd->op < TC_OP_COUNT && tc_op_info((tc_op)nd->op)->kind == TC_KIND_VIEW;
}

static bool matches(const tc_graph *g, int32_t v, const tc_tensor *t)
{
    const tc_gval *x = &g->vals[v];
    return t && t->dtype == x->dtype && t->ndim == x->ndim &&
           memcmp(t->size, x->size, sizeof(int64_t) * (size_t)x->ndim) == 0;
}

/* Runs nd on ins (real tensors). res[o] receives a new contiguous tensor per output;
 * *view (views only) the view itself, for later folds to evaluate on. */
static tc_status eval_node(const tc_graph *g, const tc_gnode *nd, const tc_tensor *const *ins, tc_tensor **res,
                           tc_tensor **view)
{
    const tc_opinfo *info = tc_op_info((tc_op)nd->op);
    tc_tensor *out[2] = {NULL, NULL};
    tc_status s;
    if (info->kind == TC_KIND_VIEW) {
        TRY(tc_op_exec((tc_op)nd->op, ins, nd->nin, &nd->p, out, 1));
        if (!matches(g, nd->out[0], out[0])) {
            tc_tensor_release(out[0]);
            return tc_set_error(TC_ERR_INTERNAL, "fold: %s gave other sizes than traced", info->name);
        }
        const tc_gval *x = &g->vals[nd->out[0]];
        tc_params cp = {.i = {-1}};
        s = tc_tensor_new_on(x->device, (tc_dtype)x->dtype, x->ndim, x->size, &res[0]);
        if (s == TC_OK) s = tc_op_exec(TC_OP_COPY, (const tc_tensor *const *)out, 1, &cp, res, 1);
        if (s) {
            tc_tensor_release(res[0]), res[0] = NULL;
            tc_tensor_release(out[0]);
            return s;
        }
        *view = out[0];
        return TC_OK;
    }
    /* results preallocated with the traced dtypes and sizes: fill takes its shape from its
     * result, copy its dtype, and "out is dst" index ops copy dst first */
    for (int o = 0; o < nd->nout && o < info->nout; o++) {
        const tc_gval *x = &g->vals[nd->out[o]];
        s = tc_tensor_new_on(x->device, (tc_dtype)x->dtype, x->ndim, x->size, &out[o]);
        if (s) {
            tc_tensor_release(out[0]);
            return s;
        }
    }
    s = tc_op_exec((tc_op)nd->op, ins, nd->nin, &nd->p, out, info->nout);
    for (int o = 0; o < 2; o++) {
        if (s == TC_OK && o < nd->nout && !matches(g, nd->out[o], out[o]))
            s = tc_set_error(TC_ERR_INTERNAL, "fold: %s gave other sizes than traced", info->name);
    }
    for (int o = 0; o < 2; o++) {
        if (s == TC_OK && o < nd->nout) res[o] = out[o];
        else tc_tensor_release(out[o]);
    }
    return s;
}


tc_status tc_pass_fold(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "fold: NULL graph");
    int before = tc_graph_live_nodes(g), nnodes = g->nnodes;
    int32_t nv0 = g->nvals;
    int32_t *rep = malloc(sizeof(int32_t) * ((size_t)nv0 + 1));
    tc_tensor **ev = calloc((size_t)nv0 + 1, sizeof *ev); /* folded OP values: what later folds read */
    bool *strided = calloc((size_t)nv0 + 1, sizeof *strided); /* reaches an as_strided */
    tc_status s = TC_OK;
    if (!rep || !ev || !strided) {
        s = tc_set_error(TC_ERR_MEMORY, "fold: out of memory for %d values", nv0);
        goto done;
    }
    for (int v = 0; v < nv0; v++) rep[v] = v;
    for (int n = nnodes - 1; n >= 0; n--) {
        const tc_gnode *nd = &g->nodes[n];
        if ((nd->flags & TC_GN_DEAD) || nd->nin < 1 || nd->in[0] < 0) continue;
        if (nd->op == TC_OP_AS_STRIDED || (is_view(nd) && strided[nd->out[0]])) strided[nd->in[0]] = true;
    }

    int folded = 0, too_big = 0, failed = 0;
    for (int n = 0; n < nnodes; n++) {
        tc_gnode *nd = &g->nodes[n];
        if (!foldable(nd)) continue;
        const tc_tensor *ins[64];
        bool all_const = nd->nin <= 64;
        int64_t in_elems = 0, bytes = 0;
        for (int i = 0; all_const && i < nd->nin; i++) {
            int32_t v = nd->in[i];
            if (v < 0) {
                ins[i] = NULL;
                continue;
            }
            if (ev[v]) ins[i] = ev[v];
            else if (g->vals[v].kind == TC_GV_CONST && g->vals[v].t) ins[i] = g->vals[v].t;
            else all_const = false;
            if (all_const) in_elems += tc_numel_of(g->vals[v].ndim, g->vals[v].size);
        }
        if (!all_const) continue;
        for (int o = 0; o < nd->nout; o++) bytes += tc_graph_val_bytes(g, nd->out[o]);
        const tc_gval *y = &g->vals[nd->out[0]];
        if (is_view(nd) && (strided[nd->out[0]] || tc_numel_of(y->ndim, y->size) > in_elems)) continue;
        if (bytes > FOLD_MAX_BYTES || (nd->op == TC_OP_FILL && nd->nin == 0 && bytes > FOLD_MAX_FILL_BYTES)) {
            too_big++;
            continue;
        }
        tc_tensor *res[2] = {NULL, NULL}, *view = NULL;
        s = eval_node(g, nd, ins, res, &view);
        if (s == TC_ERR_MEMORY) break;
        if (s) { /* e.g. a hand-built integer division by zero: it fails at run time, with context */
            tc_clear_error();
            s = TC_OK;
            failed++;
            continue;
        }
        for (int o = 0; o < nd->nout; o++) {
            int32_t id;
            tc_status s2 = s ? s : tc_graph_add_const(g, res[o], &id);
            if (s2 == TC_OK) {
                rep[nd->out[o]] = id;
                ev[nd->out[o]] = view ? view : res[o];
                if (view) tc_tensor_retain(view);
                else tc_tensor_retain(res[o]);
            }
            s = s2;
            tc_tensor_release(res[o]);
        }
        tc_tensor_release(view);
        if (s) break; /* the outputs already made constants are redirected below */
        nd->flags |= TC_GN_DEAD;
        folded++;
    }
    /* Even after a failure the graph must stay consistent: redirect, then compact. */
    for (int n = 0; n < nnodes; n++) {
        tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0 && nd->in[i] < nv0) nd->in[i] = rep[nd->in[i]];
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] < nv0) g->outputs[i] = rep[g->outputs[i]];
    for (int i = 0; i < g->nwb; i++)
        if (g->wb_val[i] < nv0) g->wb_val[i] = rep[g->wb_val[i]];
    tc_graph_fix_view_roots(g); /* views of merged or replaced values */
    tc_status err = s;
    s = folded ? tc_graph_compact(g) : TC_OK;
    if (err) s = err;
    if (s == TC_OK) {
        tc_gpass_stat st = {.pass = "fold", .nodes_before = before, .nodes_after = tc_graph_live_nodes(g)};
        int k = 0;
        if (too_big) k += snprintf(st.note, sizeof st.note, "%d left (over 16 MB, or fills over 64 KB)", too_big);
        if (failed)
            snprintf(st.note + k, sizeof st.note - (size_t)k, "%s%d left (error when folding)", k ? ", " : "", failed);
        s = tc_graph_add_stat(g, &st);
    }
done:
    if (ev)
        for (int v = 0; v < nv0; v++) tc_tensor_release(ev[v]);
    free(rep), free(ev), free(strided);
    return s;
}
