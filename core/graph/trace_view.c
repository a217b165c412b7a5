/* trace_view.c -- naming views the tracer did not see being made.
 *
 * The Lua binding builds some views straight from the storage, without a view op (x[i],
 * x[{...}], sub, squeeze, unsqueeze: cheaper headers). When a traced op reads such a header
 * on a buffer the trace owns, the tracer asks here for a chain of logical view ops
 * (narrow, select, permute, unsqueeze; or view-narrow-view for a contiguous piece of a
 * contiguous buffer) that turns the buffer's value (the "root": an input or an op result,
 * at the buffer's current version) into exactly that header. Logical ops, not as_strided:
 * at run time the root lives in an arena or is a caller's tensor with its own offset, and
 * the chain gives the same elements wherever it lives. The chain is checked against the
 * header's real geometry before it is kept. Any other header of a contiguous root (a
 * diagonal) is an as_strided view in its relative mode (offset from the input's).
 */
#include "trace.h"

/* Adds view op `op` on value *cur (current geometry *hdr) and advances both. */
static tc_status step(tc_graph *g, tc_op op, const tc_params *p, int32_t *cur, tc_tensor **hdr)
{
    tc_tensor *res[1] = {NULL};
    TRY(tc_op_exec(op, (const tc_tensor *const *)hdr, 1, p, res, 1));
    int32_t dt = res[0]->dtype, nd = res[0]->ndim, out = -1;
    int64_t sz[1][TC_MAX_DIMS] = {{0}};
    memcpy(sz[0], res[0]->size, sizeof(int64_t) * (size_t)nd);
    tc_status s = tc_graph_add_node(g, op, cur, 1, p, 1, &dt, &nd, (const int64_t(*)[TC_MAX_DIMS])sz, &out);
    if (s) {
        tc_tensor_release(res[0]);
        return s;
    }
    tc_tensor_release(*hdr);
    *hdr = res[0];
    *cur = out;
    return TC_OK;
}

/* The plan of case A: which root dim each non-unit dim of t comes from, and where each
 * root dim starts. false when t is not such a slice of the root. */
static bool plan_slices(const tc_tensor *r, const tc_tensor *t, int match[TC_MAX_DIMS], int64_t start[TC_MAX_DIMS])
{
    bool used[TC_MAX_DIMS] = {0};
    for (int j = 0; j < t->ndim; j++) {
        match[j] = -1;
        if (t->size[j] == 1) continue;
        for (int d = 0; d < r->ndim && match[j] < 0; d++)
            if (!used[d] && r->size[d] > 1 && r->stride[d] == t->stride[j] && r->size[d] >= t->size[j])
                match[j] = d, used[d] = true;
        if (match[j] < 0) return false;
    }
    /* offset: mixed radix over the root's dims, largest stride first (dense, positive) */
    int64_t diff = t->offset - r->offset;
    if (diff < 0) return false;
    bool done[TC_MAX_DIMS] = {0};
    for (int d = 0; d < r->ndim; d++) start[d] = 0;
    for (int k = 0; k < r->ndim; k++) {
        int best = -1;
        for (int d = 0; d < r->ndim; d++)
            if (!done[d] && r->size[d] > 1 && (best < 0 || r->stride[d] > r->stride[best])) best = d;
        if (best < 0) break;
        done[best] = true;
        if (r->stride[best] <= 0) return false;
        start[best] = diff / r->stride[best];
        diff -= start[best] * r->stride[best];
    }
    if (diff != 0) return false;
    for (int d = 0; d < r->ndim; d++) {
        int j = -1;
        for (int k = 0; k < t->ndim; k++)
            if (match[k] == d) j = k;
        if (j >= 0 ? start[d] + t->size[j] > r->size[d] : start[d] >= r->size[d]) return false;
    }
    return true;
}

static tc_status emit_slices(tc_graph *g, const tc_tensor *t, const int *match, const int64_t *start, int32_t *cur,
                             tc_tensor **hdr)
{
    int rd = (*hdr)->ndim;
    int jof[TC_MAX_DIMS]; /* root dim -> t dim, or -1 */
    for (int d = 0; d < rd; d++) jof[d] = -1;
    for (int j = 0; j < t->ndim; j++)
        if (match[j] >= 0) jof[match[j]] = j;
    for (int d = 0; d < rd; d++)
        if (jof[d] >= 0 && (start[d] != 0 || t->size[jof[d]] != (*hdr)->size[d]))
            TRY(step(g, TC_OP_NARROW, &(tc_params){.i = {d, start[d], t->size[jof[d]]}}, cur, hdr));
    for (int d = rd - 1; d >= 0; d--)
        if (jof[d] < 0) TRY(step(g, TC_OP_SELECT, &(tc_params){.i = {d, start[d]}}, cur, hdr));
    /* the kept root dims are now in root order; t wants them in its own order */
    tc_params pp = {0};
    int pos[TC_MAX_DIMS], n = 0;
    for (int d = 0; d < rd; d++)
        if (jof[d] >= 0) pos[d] = n++;
    bool identity = true;
    for (int j = 0; j < t->ndim; j++)
        if (match[j] >= 0) {
            pp.shape[pp.nshape] = pos[match[j]];
            identity = identity && pp.shape[pp.nshape] == pp.nshape;
            pp.nshape++;
        }
    if (!identity) TRY(step(g, TC_OP_PERMUTE, &pp, cur, hdr));
    for (int j = 0; j < t->ndim; j++)
        if (match[j] < 0) TRY(step(g, TC_OP_UNSQUEEZE, &(tc_params){.i = {j}}, cur, hdr));
    return TC_OK;
}

/* Case B: t a contiguous piece of a contiguous root: view flat, narrow, view as t. */
static tc_status emit_flat(tc_graph *g, const tc_tensor *t, int32_t *cur, tc_tensor **hdr)
{
    int64_t n = tc_tensor_numel(*hdr);
    TRY(step(g, TC_OP_VIEW, &(tc_params){.nshape = 1, .shape = {n}}, cur, hdr));
    TRY(step(g, TC_OP_NARROW, &(tc_params){.i = {0, t->offset - (*hdr)->offset, tc_tensor_numel(t)}}, cur, hdr));
    tc_params p = {.nshape = t->ndim};
    for (int d = 0; d < t->ndim; d++) p.shape[d] = t->size[d];
    return step(g, TC_OP_VIEW, &p, cur, hdr);
}

/* Case C, any other header of a contiguous root (a diagonal): as_strided in its relative
 * mode (i1 = 1: offset from the input's), so the view follows the root wherever it lives. */
static tc_status emit_strided(tc_graph *g, const tc_tensor *t, int32_t *cur, tc_tensor **hdr)
{
    tc_params p = {.i = {t->offset - (*hdr)->offset, 1}, .nshape = 2 * t->ndim};
    for (int d = 0; d < t->ndim; d++) p.shape[d] = t->size[d], p.shape[t->ndim + d] = t->stride[d];
    return step(g, TC_OP_AS_STRIDED, &p, cur, hdr);
}

static bool same_elements(const tc_tensor *a, const tc_tensor *t)
{
    if (a->dtype != t->dtype || a->ndim != t->ndim || a->offset != t->offset || a->storage != t->storage) return false;
    for (int d = 0; d < t->ndim; d++)
        if (a->size[d] != t->size[d] || (t->size[d] > 1 && a->stride[d] != t->stride[d])) return false;
    return true;
}

tc_status tc_trace_derive_view(tc_graph *g, int32_t root, const tc_tensor *r, const tc_tensor *t, int32_t *val)
{
    if (r->dtype != t->dtype || r->storage != t->storage || !t->storage) return TC_ERR_ARG;
    int32_t nv = g->nvals, nn = g->nnodes;
    int match[TC_MAX_DIMS];
    int64_t start[TC_MAX_DIMS];
    bool a = plan_slices(r, t, match, start), rc = tc_tensor_is_contiguous(r);
    bool b = !a && rc && tc_tensor_is_contiguous(t) && t->offset >= r->offset &&
             t->offset + tc_tensor_numel(t) <= r->offset + tc_tensor_numel(r);
    if (!a && !b && !rc) return TC_ERR_ARG;
    tc_tensor *hdr;
    TRY(tc_tensor_alias(r, &hdr));
    int32_t cur = root;
    tc_status s = a ? emit_slices(g, t, match, start, &cur, &hdr)
                  : b ? emit_flat(g, t, &cur, &hdr)
                      : emit_strided(g, t, &cur, &hdr);
    if (s == TC_OK && !same_elements(hdr, t)) s = TC_ERR_ARG;
    tc_tensor_release(hdr);
    if (s) { /* no chain: leave the graph as it was */
        g->nvals = nv, g->nnodes = nn;
        return s == TC_ERR_MEMORY ? s : TC_ERR_ARG;
    }
    *val = cur;
    return TC_OK;
}
