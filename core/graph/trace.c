/* trace.c -- the tracer: while a trace is active on this thread, tc_op_run sends every call
 * here (tc_trace_op_run), which runs it as usual (through autograd when wanted) and records
 * it as one graph node (tocha_graph.h, graph.h).
 *
 * Values are SSA. A tensor is keyed by (storage, storage version, dtype, offset, sizes,
 * strides): every write through tc_op_run bumps the version, so an in-place call yields a
 * new key and is recorded as an out-of-place node (TC_GN_WAS_INPLACE). Alias headers with
 * the same geometry (autograd's saved tensors) share the key, so they are found. The trace
 * retains every storage it keyed, so no address is reused while recording.
 *
 * A tensor read but never seen is captured: an EXTERNAL value holding an alias header
 * (read by reference at each run; the Lua header may later be resized, the alias is not).
 * The binding's scratch scalars (TC_TF_SCRATCH) are snapshotted as CONST values.
 *
 * Writes are checked BEFORE the call runs, so a refused write changes nothing:
 *   - into a captured storage: a write-back (allowed with tc_trace_allow_mutation), else
 *     "tracing mutates a captured tensor";
 *   - into a graph input: refused (inputs are not written back);
 *   - into a view of a buffer (a header whose geometry differs from the buffer's value): the
 *     op's node gives the view's new elements, then index_copy splices them into the
 *     buffer's value (a new value of the whole buffer); refused when that value is not one
 *     contiguous tensor or the view overlaps itself;
 *   - into an unseen header whose storage is unknown: a fresh value when the storage was
 *     never written by an op (version 0: torch.zeros allocates, then fills), else captured.
 * An unseen header on a buffer the trace owns (the binding makes x[i], sub, squeeze headers
 * without view ops) is named by view nodes from the buffer's root value (trace_view.c);
 * as_strided calls are recorded in its relative mode (an absolute offset would read the
 * wrong place once the buffer lives in the arena);
 * when the root is stale (the buffer was written since through another header) or no view
 * op chain gives those elements, the read is refused ("stale view"). An unseen header on a
 * captured buffer is another external, unless it overlaps a region the trace wrote.
 *
 * A call that fails leaves the graph as it was: values and keys created while looking up
 * its inputs are undone from a journal (nested recorded calls included).
 *
 * Shape-only traces (tc_trace_shape_only) run no kernel: every call but a view is
 * recorded with its results allocated and never written (their pages are never touched),
 * nothing captured is written, and no random number is drawn. The results are marked
 * dynamic, so Lua cannot read one without a graph break. Skipping even the calls on
 * constants matters: the gradient rules' zero-filled buffers alone touched 178 MB while
 * an LSTM LM step was traced. The dispatcher sees the skip through tc_exec_shape_only.
 */
#include "trace_state.h"
#include <stdio.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

_Thread_local struct tc_graph *tc_trace_active;
/* The graph whose call is executing on this thread (tc_trace_exec_nested records into it). */
static _Thread_local tc_graph *executing;

/* ---- creating values for tensors the trace has not seen -------------------------------------- */

static tc_status new_external(tc_graph *g, tstate *S, const tc_tensor *t, int32_t *id)
{
    tc_tensor *a;
    TRY(tc_tensor_alias(t, &a));
    tc_status s = tc_graph_add_external(g, a, id);
    tc_tensor_release(a);
    if (s) return s;
    vkey k;
    tc_trace_key(t, &k);
    sentry *e;
    TRY(tc_trace_facts_set(S, *id, true, *id));
    TRY(tc_trace_sto_get(S, t->storage, &e));
    e->captured = 1;
    return tc_trace_map_put(S, &k, *id);
}

/* A CONST holding a copy of t's values now (scratch scalars change outside tc_op_run); a
 * tensor without storage has no values and is aliased. */
static tc_status new_snapshot(tc_graph *g, tstate *S, const tc_tensor *t, int32_t *id)
{
    tc_tensor *c;
    if (!t->storage) TRY(tc_tensor_alias(t, &c));
    else TRY(tc_tensor_alloc((tc_dtype)t->dtype, t->ndim, t->size, &c));
    tc_tensor *res[1] = {c};
    tc_params p = {.i = {-1}};
    bool skipping = tc_exec_shape_only; /* a constant's values are real, even inside a skipped call */
    tc_exec_shape_only = false;
    tc_status s = t->storage && tc_tensor_numel(t) ? tc_op_exec(TC_OP_COPY, &t, 1, &p, res, 1) : TC_OK;
    tc_exec_shape_only = skipping;
    if (s == TC_OK) s = tc_graph_add_const(g, c, id);
    tc_tensor_release(c);
    if (s) return s;
    return tc_trace_facts_set(S, *id, false, -1);
}

static tc_status stale_error(const char *opname, const char *what, const tc_tensor *t)
{
    char b[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_ARG,
                        "%s: %s (size %s) views the buffer of a traced tensor through a header the trace cannot "
                        "name (a view made before that buffer was written in place, or one made without a view "
                        "op); take views with narrow/select/view after the last in-place write, or clone() first",
                        opname, what, tc_shape_str(t, b, sizeof b));
}

/* Makes value v (keyed by k) the root of its buffer: later headers on that buffer that no
 * op made are derived from it (trace_view.c). */
static void set_root(sentry *e, int32_t v, const vkey *k)
{
    if (!e || e->captured) return;
    e->root = v, e->rootkey = *k;
}

/* The root of e as a header (no reference taken), or NULL when stale or missing. */
static const tc_tensor *root_header(const sentry *e, tc_tensor *hdr)
{
    if (!e || e->captured || e->root < 0 || e->rootkey.version != e->s->version) return NULL;
    memset(hdr, 0, sizeof *hdr);
    hdr->refcount = 1, hdr->dtype = e->rootkey.dtype, hdr->ndim = e->rootkey.ndim, hdr->offset = e->rootkey.offset;
    memcpy(hdr->size, e->rootkey.size, sizeof hdr->size);
    memcpy(hdr->stride, e->rootkey.stride, sizeof hdr->stride);
    hdr->storage = e->s;
    return hdr;
}

/* An unseen header t on a buffer the trace owns: the view nodes naming it, from the root. */
static tc_status derive(tc_graph *g, tstate *S, const sentry *e, const tc_tensor *t, int32_t *id)
{
    tc_tensor hdr;
    const tc_tensor *r = root_header(e, &hdr);
    int32_t nv = g->nvals, nn = g->nnodes, root = e ? e->root : -1;
    if (!r) return TC_ERR_ARG;
    TRY(tc_trace_derive_view(g, root, r, t, id));
    for (int32_t v = nv; v < g->nvals; v++) TRY(tc_trace_facts_set(S, v, S->dyn[root], -1));
    if (S->loc && !S->loc_arena) S->loc_arena = tc_graph_strdup(g, S->loc);
    for (int32_t n = nn; n < g->nnodes; n++) g->nodes[n].where = S->loc_arena;
    vkey k;
    tc_trace_key(t, &k);
    return tc_trace_map_put(S, &k, *id);
}

/* The value of t, created for a tensor never seen. what names t in messages. */
static tc_status lookup(tc_graph *g, tstate *S, const tc_tensor *t, const char *opname, const char *what,
                        int32_t *id)
{
    if (t->flags & TC_TF_SCRATCH) return new_snapshot(g, S, t, id);
    vkey k;
    tc_trace_key(t, &k);
    if ((*id = tc_trace_map_find(S, &k)) >= 0) return TC_OK;
    if (!t->storage) { /* no elements: a constant, shared by equal empty headers */
        TRY(new_snapshot(g, S, t, id));
        return tc_trace_map_put(S, &k, *id);
    }
    const sentry *e = tc_trace_sto_find(S, t->storage);
    if (e && !e->captured) {
        tc_status s = derive(g, S, e, t, id);
        return s == TC_ERR_ARG ? stale_error(opname, what, t) : s;
    }
    if (e && tc_trace_overlaps_written(e, t)) return stale_error(opname, what, t);
    return new_external(g, S, t, id);
}

/* ---- errors and rollback ---------------------------------------------------------------------- */

static tc_status fail(tc_graph *g, tc_status s)
{
    if (!g->trace_error) {
        g->trace_error = s;
        snprintf(ST(g)->err, sizeof ST(g)->err, "%s", tc_last_error());
    }
    return s;
}

typedef struct mark {
    int32_t nv, nn, njk, njs;
} mark;

static void rollback(tc_graph *g, tstate *S, const mark *m)
{
    for (int32_t i = S->njk - 1; i >= m->njk; i--) tc_trace_map_del(S, &S->jkeys[i]);
    for (int32_t i = S->njs - 1; i >= m->njs; i--) {
        sentry *e = tc_trace_sto_find(S, S->jsto[i]);
        if (!e) continue;
        tc_storage_release(e->s);
        e->state = 2, e->s = NULL;
    }
    S->njk = m->njk, S->njs = m->njs;
    for (int32_t v = m->nv; v < g->nvals; v++) {
        tc_tensor_release(g->vals[v].t);
        g->vals[v].t = NULL;
        if (v < S->capv) S->dyn[v] = 1, S->home[v] = -1;
    }
    g->nvals = m->nv, g->nnodes = m->nn;
}

/* ---- writes ------------------------------------------------------------------------------------ */

enum { W_FRESH, W_INTERNAL, W_CAPTURED, W_VIEW };

typedef struct wplan {
    int kind;
    int32_t home;   /* W_CAPTURED: the external written; W_VIEW: the external holding the
                       base, or -1 */
    tc_storage *s0; /* the storage before the call */
    int32_t base;   /* W_VIEW: the value of the whole buffer the view is part of */
    vkey bkey;      /* W_VIEW: its geometry */
} wplan;

static tc_status view_write_error(const char *opname, const tc_tensor *t)
{
    char b[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_ARG,
                        "tracing writes into a view: %s writes %s, a view of another traced value's buffer that "
                        "the graph cannot update (its base is not one contiguous tensor, or the view overlaps "
                        "itself); build the result out of place (e.g. torch.cat) or clone() the view first",
                        opname, tc_shape_str(t, b, sizeof b));
}

/* A write into t, a view of value v's buffer: recorded as the op producing the view's new
 * elements, then a splice of them into the buffer's value (splice below). Needs the
 * buffer's current value as one contiguous tensor. */
static tc_status plan_view_write(tc_graph *g, tstate *S, const char *opname, const tc_tensor *t, int32_t v, wplan *w)
{
    char b[TC_SHAPE_BUF];
    /* no element twice: sorted by stride, each stride passes the span of the smaller ones */
    int64_t st[TC_MAX_DIMS], sz[TC_MAX_DIMS], span = 0;
    int nd = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] == 1) continue;
        int j = nd++;
        for (; j > 0 && st[j - 1] > t->stride[d]; j--) st[j] = st[j - 1], sz[j] = sz[j - 1];
        st[j] = t->stride[d], sz[j] = t->size[d];
    }
    for (int k = 0; k < nd; k++) {
        if (st[k] <= span) return view_write_error(opname, t);
        span += (sz[k] - 1) * st[k];
    }
    const sentry *e = tc_trace_sto_find(S, t->storage);
    tc_tensor hdr;
    const tc_tensor *base = NULL;
    int32_t bval = -1, base0 = g->vals[v].view_of;
    if (e && !e->captured) {
        base = root_header(e, &hdr);
        bval = base ? e->root : -1;
        if (base && g->vals[bval].kind == TC_GV_INPUT)
            return tc_set_error(TC_ERR_ARG,
                                "tracing mutates graph input %d: %s writes %s, a view of it (inputs are not written "
                                "back; clone() it first)",
                                g->vals[bval].arg + 1, opname, tc_shape_str(t, b, sizeof b));
    } else if (e && S->home[base0] >= 0) {
        w->home = S->home[base0];
        base = g->vals[w->home].t;
        vkey k;
        tc_trace_key(base, &k);
        bval = tc_trace_map_find(S, &k);
        if (bval >= 0 && !g->allow_mutation)
            return tc_set_error(TC_ERR_ARG,
                                "tracing mutates a captured tensor: %s writes %s, a view of it (captured tensors "
                                "are read by reference at each run; pass it as an input or allow mutation)",
                                opname, tc_shape_str(t, b, sizeof b));
    }
    if (!base || bval < 0 || base->dtype != t->dtype || !tc_tensor_is_contiguous(base))
        return view_write_error(opname, t);
    w->kind = W_VIEW, w->base = bval;
    tc_trace_key(base, &w->bkey);
    return TC_OK;
}

/* Classifies a write into out (a given result slot) before the call runs; refuses the
 * writes the graph cannot express. */
static tc_status plan_write(tc_graph *g, tstate *S, const char *opname, const tc_tensor *t, wplan *w)
{
    char b[TC_SHAPE_BUF];
    w->kind = W_FRESH, w->home = -1, w->s0 = t->storage;
    if (!t->storage) return TC_OK;
    vkey k;
    tc_trace_key(t, &k);
    int32_t v = tc_trace_map_find(S, &k);
    sentry *e = tc_trace_sto_find(S, t->storage);
    if (v < 0) {
        if (!e && t->storage->version == 0) return TC_OK; /* never written by an op: a new buffer */
        if (e && !e->captured) {
            tc_status s = derive(g, S, e, t, &v);
            if (s) return s == TC_ERR_ARG ? stale_error(opname, "the result", t) : s;
        } else if (e && tc_trace_overlaps_written(e, t)) return stale_error(opname, "the result", t);
        else TRY(new_external(g, S, t, &v));
    }
    const tc_gval *x = &g->vals[v];
    if (x->kind == TC_GV_INPUT)
        return tc_set_error(TC_ERR_ARG,
                            "tracing mutates graph input %d: %s writes %s (inputs are not written back; clone() "
                            "it first, or return the new value)",
                            x->arg + 1, opname, tc_shape_str(t, b, sizeof b));
    if (x->view_of >= 0) return plan_view_write(g, S, opname, t, v, w);
    if (x->kind == TC_GV_CONST) return TC_OK;
    if (S->home[v] >= 0) {
        if (!g->allow_mutation)
            return tc_set_error(TC_ERR_ARG,
                                "tracing mutates a captured tensor: %s writes %s (captured tensors are read by "
                                "reference at each run; pass it as an input or allow mutation)",
                                opname, tc_shape_str(t, b, sizeof b));
        w->kind = W_CAPTURED, w->home = S->home[v];
        return TC_OK;
    }
    w->kind = W_INTERNAL;
    return TC_OK;
}

static bool same_geometry(const tc_tensor *a, const tc_tensor *b)
{
    if (a->storage != b->storage || a->dtype != b->dtype || a->ndim != b->ndim || a->offset != b->offset) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d] || a->stride[d] != b->stride[d]) return false;
    return true;
}

static tc_status add_view(tc_graph *g, int32_t in, int nd, const int64_t *sizes, int32_t *out)
{
    tc_params p = {.nshape = nd};
    memcpy(p.shape, sizes, sizeof(int64_t) * (size_t)nd);
    int32_t dt = g->vals[in].dtype;
    int64_t sz[1][TC_MAX_DIMS] = {{0}};
    memcpy(sz[0], sizes, sizeof(int64_t) * (size_t)nd);
    return tc_graph_add_node(g, TC_OP_VIEW, &in, 1, &p, 1, &dt, &nd, (const int64_t(*)[TC_MAX_DIMS])sz, out);
}

/* After a write into view t (now value v): the buffer's new value is
 *   view(index_copy(view(base, [n]), idx, view(v, [m])), base sizes)
 * with idx (a constant) the flat positions of t's elements in the base. */
static tc_status splice(tc_graph *g, tstate *S, const tc_tensor *t, const wplan *w, int32_t v)
{
    tc_tensor b;
    memset(&b, 0, sizeof b);
    b.refcount = 1, b.dtype = w->bkey.dtype, b.ndim = w->bkey.ndim, b.offset = w->bkey.offset;
    memcpy(b.size, w->bkey.size, sizeof b.size);
    memcpy(b.stride, w->bkey.stride, sizeof b.stride);
    b.storage = t->storage;
    int64_t n = tc_tensor_numel(&b), m = tc_tensor_numel(t), es = tc_elsize(t->dtype);
    int32_t nv = g->nvals, nn = g->nnodes, ci, flat, src, nb, nbase;
    tc_tensor *idx;
    TRY(tc_tensor_alloc(TC_I64, 1, &m, &idx));
    int64_t *pos = tc_tensor_data(idx);
    tc_elem_iter it;
    tc_elem_iter_init(&it, t);
    char *ptr, *data = t->storage->data;
    for (int64_t k = 0; (ptr = tc_elem_iter_next(&it)) != NULL && k < m; k++) pos[k] = (ptr - data) / es - b.offset;
    tc_status s = TC_OK;
    if (t->device != TC_CPU) { /* index_copy on a device takes its index there */
        tc_tensor *di = NULL;
        bool skipping = tc_exec_shape_only; /* a constant: real values */
        tc_exec_shape_only = false;
        s = tc_tensor_to(idx, t->device, -1, &di);
        tc_exec_shape_only = skipping;
        tc_tensor_release(idx);
        idx = di;
    }
    if (s == TC_OK) s = tc_graph_add_const(g, idx, &ci);
    tc_tensor_release(idx);
    if (s) return s;
    int32_t ins[3];
    int32_t dt = t->dtype, one = 1;
    int64_t nsz[1][TC_MAX_DIMS] = {{n}};
    TRY(add_view(g, w->base, 1, &n, &flat));
    TRY(add_view(g, v, 1, &m, &src));
    ins[0] = flat, ins[1] = ci, ins[2] = src;
    TRY(tc_graph_add_node(g, TC_OP_INDEX_COPY, ins, 3, &(tc_params){.i = {0}}, 1, &dt, &one,
                          (const int64_t(*)[TC_MAX_DIMS])nsz, &nb));
    TRY(add_view(g, nb, b.ndim, b.size, &nbase));
    bool dyn = S->dyn[w->base] || S->dyn[v];
    for (int32_t x = nv; x < g->nvals; x++) TRY(tc_trace_facts_set(S, x, x == ci ? false : dyn, -1));
    S->dyn[flat] = S->dyn[w->base], S->dyn[src] = S->dyn[v];
    for (int32_t x = nn; x < g->nnodes; x++) g->nodes[x].where = S->loc_arena;
    vkey k;
    tc_trace_key(&b, &k);
    sentry *e = tc_trace_sto_find(S, t->storage);
    if (w->home >= 0) {
        TRY(tc_graph_add_writeback(g, w->home, nbase));
        S->home[nbase] = w->home;
        if (e) {
            int64_t lo, hi;
            tc_trace_span(&b, &lo, &hi);
            e->written = 1, e->wlo = lo, e->whi = hi;
        }
    } else if (e) {
        e->written = 1;
        set_root(e, nbase, &k);
    }
    return tc_trace_map_put(S, &k, nbase);
}

/* After the call: t (result slot o) now holds value v. */
static tc_status key_result(tc_graph *g, tstate *S, const char *opname, const tc_tensor *t, const wplan *w,
                            int32_t v)
{
    vkey k;
    tc_trace_key(t, &k);
    if (w && w->kind == W_VIEW) {
        TRY(splice(g, S, t, w, v));
    } else if (w && w->kind == W_CAPTURED) {
        const tc_tensor *ext = g->vals[w->home].t;
        if (!same_geometry(t, ext)) {
            char b[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_ARG,
                                "tracing mutates a captured tensor: %s resizes or re-points %s (a write-back needs "
                                "the captured tensor's own geometry); write into a tensor of the right size",
                                opname, tc_shape_str(t, b, sizeof b));
        }
        TRY(tc_graph_add_writeback(g, w->home, v));
        S->home[v] = w->home;
        sentry *e = tc_trace_sto_find(S, t->storage);
        int64_t lo, hi;
        tc_trace_span(t, &lo, &hi);
        if (e) {
            if (!e->written || e->wlo >= e->whi) e->wlo = lo, e->whi = hi;
            else e->wlo = lo < e->wlo ? lo : e->wlo, e->whi = hi > e->whi ? hi : e->whi;
            e->written = 1;
        }
    } else if (t->storage) {
        sentry *e;
        TRY(tc_trace_sto_get(S, t->storage, &e));
        if (w && w->kind == W_INTERNAL && t->storage == w->s0) e->written = 1;
        if (w) set_root(e, v, &k); /* a view result leaves its buffer's root as it was */
    }
    return tc_trace_map_put(S, &k, v);
}

/* ---- the dispatcher hook ----------------------------------------------------------------------- */

static tc_status exec_call(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                           int nout, bool autograd_ok)
{
    if (autograd_ok && tc_autograd_wanted(in, nin, out, nout)) return tc_autograd_op_run(op, in, nin, p, out, nout);
    return tc_op_exec(op, in, nin, p, out, nout);
}

/* Runs the call with the trace disabled for nested calls; records it into g. */
static tc_status trace_run(tc_graph *g, tc_op op, const tc_tensor *const *in, int nin, const tc_params *p,
                           tc_tensor **out, int nout, bool autograd_ok)
{
    tstate *S = ST(g);
    const tc_opinfo *info = tc_op_info(op);
    tc_graph *prev_active = tc_trace_active, *prev_exec = executing;
    if (!S || g->trace_error || !info || !out || nout != info->nout || nout > 2 || nin < 0 || (nin > 0 && !in)) {
        tc_trace_active = NULL; /* a bad call is reported by the dispatcher; nothing to record */
        tc_status s = exec_call(op, in, nin, p, out, nout, autograd_ok);
        tc_trace_active = prev_active;
        return s;
    }
    int32_t small[16], *ids = nin <= 16 ? small : malloc(sizeof(int32_t) * (size_t)nin);
    if (!ids) return tc_set_error(TC_ERR_MEMORY, "%s: out of memory tracing", info->name);
    mark m = {g->nvals, g->nnodes, S->njk, S->njs};
    S->depth++;
    bool view = info->kind == TC_KIND_VIEW;
    tc_status s = TC_OK;
    char what[32];
    for (int i = 0; i < nin && s == TC_OK; i++) {
        ids[i] = -1;
        snprintf(what, sizeof what, "input %d", i + 1);
        if (in[i]) s = lookup(g, S, in[i], info->name, what, &ids[i]);
    }
    wplan w[2] = {{.kind = W_FRESH, .home = -1}, {.kind = W_FRESH, .home = -1}};
    bool inplace = false;
    for (int o = 0; o < nout && s == TC_OK && !view; o++) {
        if (!out[o]) continue;
        s = plan_write(g, S, info->name, out[o], &w[o]);
        for (int i = 0; i < nin && w[o].kind != W_VIEW; i++)
            inplace = inplace || (in[i] && in[i]->storage && in[i]->storage == w[o].s0);
    }
    if (s) { /* a refused write or a failed lookup: nothing ran */
        rollback(g, S, &m);
        s = fail(g, s);
        goto done;
    }
    tc_tensor *given[2] = {out[0], nout > 1 ? out[1] : NULL};
    bool skip = S->shape_only && !view, prev_skip = tc_exec_shape_only;
    tc_trace_active = NULL, executing = g, tc_exec_shape_only = skip;
    s = exec_call(op, in, nin, p, out, nout, autograd_ok);
    tc_trace_active = prev_active, executing = prev_exec, tc_exec_shape_only = prev_skip;
    if (s) { /* the op's own error: unchanged, and the graph as it was */
        if (!g->trace_error) rollback(g, S, &m);
        goto done;
    }
    if (g->trace_error) { /* a nested recording failed */
        s = tc_set_error(g->trace_error, "%s", S->err);
        goto drop_results;
    }
    int32_t outs[2] = {-1, -1};
    if (view) {
        vkey k;
        tc_trace_key(out[0], &k);
        if (tc_trace_map_find(S, &k) >= 0) goto done; /* the same elements as a value already known */
    }
    int32_t dts[2] = {0}, nds[2] = {0};
    int64_t sz[2][TC_MAX_DIMS] = {{0}};
    int nrec = nout > 1 && !out[1] ? 1 : nout;
    for (int o = 0; o < nrec; o++) {
        dts[o] = out[o]->dtype, nds[o] = out[o]->ndim;
        memcpy(sz[o], out[o]->size, sizeof(int64_t) * (size_t)out[o]->ndim);
    }
    tc_params rel;
    if (op == TC_OP_AS_STRIDED && p && !p->i[1] && in[0]) { /* absolute offset -> relative mode, */
        rel = *p;                                          /* so the graph does not depend on  */
        rel.i[0] -= in[0]->offset, rel.i[1] = 1;           /* where the buffer lives           */
        p = &rel;
    }
    s = tc_graph_add_node(g, op, ids, nin, p, nrec, dts, nds, (const int64_t(*)[TC_MAX_DIMS])sz, outs);
    if (s == TC_OK) {
        tc_gnode *nd = &g->nodes[g->nnodes - 1];
        if (inplace) nd->flags |= TC_GN_WAS_INPLACE;
        if (S->loc && !S->loc_arena) S->loc_arena = tc_graph_strdup(g, S->loc);
        nd->where = S->loc_arena;
        for (int o = 0; o < nrec; o++) { /* where the results really are (a copy may cross) */
            g->vals[outs[o]].device = out[o]->device;
            if (TC_DEVICE_IS_CUDA(out[o]->device) && g->device == TC_CPU) g->device = out[o]->device;
        }
    }
    bool dyn = skip || info->kind == TC_KIND_RANDOM;
    for (int i = 0; i < nin; i++) dyn = dyn || (ids[i] >= 0 && S->dyn[ids[i]]);
    for (int o = 0; o < nrec && s == TC_OK; o++) {
        s = tc_trace_facts_set(S, outs[o], dyn, -1);
        if (s == TC_OK) s = key_result(g, S, info->name, out[o], view ? NULL : &w[o], outs[o]);
    }
    if (s == TC_OK) goto done;
    s = fail(g, s);
drop_results: /* the caller gets an error: it must not receive new tensors */
    for (int o = 0; o < nout; o++)
        if (!given[o] && out[o]) {
            tc_tensor_release(out[o]);
            out[o] = NULL;
        }
done:
    S->depth--;
    if (S->depth == 0) {
        S->njk = S->njs = 0;
        /* The trace holds every storage it has seen until a sweep lets go of those only it
         * holds: sweep every 256 calls, or sooner once 8 MB were taken on since the last
         * sweep (an LSTM step's trace peaked at twice the eager step's memory with calls
         * alone counted). */
        if (++S->since_sweep >= 256 || S->retained_bytes >= ((int64_t)8 << 20))
            tc_trace_sweep(S), S->since_sweep = 0, S->retained_bytes = 0;
    }
    if (ids != small) free(ids);
    return s;
}

tc_status tc_trace_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                          int nout)
{
    return trace_run(tc_trace_active, op, in, nin, p, out, nout, true);
}

tc_status tc_trace_exec_nested(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                               int nout)
{
    tc_graph *g = executing;
    if (!g || !g->trace_state) return tc_op_exec(op, in, nin, p, out, nout);
    return trace_run(g, op, in, nin, p, out, nout, false);
}

/* ---- the public API ------------------------------------------------------------------------------ */

tc_status tc_trace_begin(tc_graph **out)
{
    if (!out) return tc_set_error(TC_ERR_ARG, "trace begin: NULL result");
    if (tc_trace_active)
        return tc_set_error(TC_ERR_ARG, "trace begin: a trace is already active on this thread (end it first)");
    tc_graph *g;
    TRY(tc_graph_new(&g));
    tstate *S = calloc(1, sizeof *S);
    if (!S) {
        tc_graph_free(g);
        return tc_set_error(TC_ERR_MEMORY, "trace begin: out of memory");
    }
    g->trace_state = S;
    tc_trace_active = g;
    *out = g;
    return TC_OK;
}

tc_status tc_trace_input(tc_graph *g, const tc_tensor *t)
{
    if (!g || !t) return tc_set_error(TC_ERR_ARG, "trace input: NULL argument");
    tstate *S = ST(g);
    if (!S) return tc_set_error(TC_ERR_ARG, "trace input: the graph is not being traced");
    int n = g->ninputs + 1;
    vkey k;
    tc_trace_key(t, &k);
    int32_t v = tc_trace_map_find(S, &k);
    if (v >= 0 || tc_trace_sto_find(S, t->storage))
        return tc_set_error(TC_ERR_ARG,
                            "trace input %d: this tensor (or another view of its storage) was already %s; declare "
                            "every input before the traced ops use it, and pass distinct tensors",
                            n, v >= 0 && g->vals[v].kind == TC_GV_INPUT ? "declared as an input" : "used by the trace");
    int32_t id;
    TRY(tc_graph_add_input(g, (tc_dtype)t->dtype, t->ndim, t->size, &id));
    g->vals[id].device = t->device;
    if (TC_DEVICE_IS_CUDA(t->device) && g->device == TC_CPU) g->device = t->device;
    TRY(tc_trace_facts_set(S, id, true, -1));
    if (t->storage) {
        sentry *e;
        TRY(tc_trace_sto_get(S, t->storage, &e));
        set_root(e, id, &k);
    }
    return tc_trace_map_put(S, &k, id);
}

tc_status tc_trace_output(tc_graph *g, const tc_tensor *t)
{
    if (!g || !t) return tc_set_error(TC_ERR_ARG, "trace output: NULL argument");
    if (!ST(g)) return tc_set_error(TC_ERR_ARG, "trace output: the graph is not being traced");
    if (g->trace_error) return tc_set_error(g->trace_error, "trace output: %s", ST(g)->err);
    int32_t v;
    char what[32];
    snprintf(what, sizeof what, "result %d", g->noutputs + 1);
    TRY(lookup(g, ST(g), t, "trace output", what, &v));
    return tc_graph_mark_output(g, v);
}

tc_status tc_trace_allow_mutation(tc_graph *g, int allow)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "trace allow_mutation: NULL graph");
    g->allow_mutation = allow != 0;
    return TC_OK;
}

void tc_trace_free_state(tc_graph *g)
{
    tstate *S = g ? ST(g) : NULL;
    if (!S) return;
    for (int64_t i = 0; i < S->stocap; i++)
        if (S->sto[i].state == 1) tc_storage_release(S->sto[i].s);
    free(S->map), free(S->sto), free(S->dyn), free(S->home), free(S->loc), free(S->jkeys), free(S->jsto);
    free(S);
    g->trace_state = NULL;
    if (tc_trace_active == g) tc_trace_active = NULL;
}

tc_status tc_trace_shape_only(tc_graph *g, int on)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "trace shape_only: NULL graph");
    tstate *S = ST(g);
    if (!S) return tc_set_error(TC_ERR_ARG, "trace shape_only: the graph is not being traced");
    if (g->nnodes > 0)
        return tc_set_error(TC_ERR_ARG, "trace shape_only: set it before the first recorded call (%d recorded)",
                            (int)g->nnodes);
    S->shape_only = on != 0;
#if defined(__GLIBC__)
    /* A shape-only trace is meant to cost little memory, but the tracer's own tables come
     * on top of what the heap holds: the eager steps before it freed their activations into
     * glibc's heap, which keeps them. Hand those pages back first (the LSTM LM of `make
     * bench` peaked 8 MB higher while tracing without this). */
    if (S->shape_only) malloc_trim(0);
#endif
    return TC_OK;
}

bool tc_trace_is_shape_only(const tc_graph *g) { return g && ST(g) && ST(g)->shape_only; }

tc_status tc_trace_end(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "trace end: NULL graph");
    if (!ST(g)) return tc_set_error(TC_ERR_ARG, "trace end: the graph is not being traced");
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ST(g)->err);
    tc_trace_free_state(g);
    if (g->trace_error) return tc_set_error(g->trace_error, "%s", msg);
    return TC_OK;
}

tc_graph *tc_trace_current(void) { return tc_trace_active; }

int tc_trace_is_dynamic(const tc_tensor *t)
{
    tc_graph *g = tc_trace_active;
    tstate *S = g ? ST(g) : NULL;
    if (!S || !t || (t->flags & TC_TF_SCRATCH) || !t->storage) return 0;
    vkey k;
    tc_trace_key(t, &k);
    int32_t v = tc_trace_map_find(S, &k);
    if (v >= 0) return S->dyn[v];
    /* unseen: a header on a traced buffer is as dynamic as the buffer; otherwise a captured
     * tensor (it can change between runs) or a header the trace cannot name */
    tc_tensor hdr;
    const sentry *e = tc_trace_sto_find(S, t->storage);
    return root_header(e, &hdr) ? S->dyn[e->root] : 1;
}

int tc_trace_knows(const tc_tensor *t)
{
    tc_graph *g = tc_trace_active;
    tstate *S = g ? ST(g) : NULL;
    return S && t && t->storage && tc_trace_sto_find(S, t->storage) ? 1 : 0;
}

tc_status tc_trace_set_location(const char *text)
{
    tc_graph *g = tc_trace_active;
    tstate *S = g ? ST(g) : NULL;
    if (!S) return TC_OK;
    if (!text) {
        free(S->loc);
        S->loc = NULL, S->loc_arena = NULL;
        return TC_OK;
    }
    if (S->loc && strcmp(S->loc, text) == 0) return TC_OK;
    size_t n = strlen(text) + 1;
    char *c = malloc(n);
    if (!c) return tc_set_error(TC_ERR_MEMORY, "trace: out of memory for a location");
    memcpy(c, text, n);
    free(S->loc);
    S->loc = c, S->loc_arena = NULL;
    return TC_OK;
}

/* ---- trace.h ------------------------------------------------------------------------------------- */

tc_status tc_trace_lookup(tc_graph *g, const tc_tensor *t, int32_t *val)
{
    if (!g || !t || !val) return tc_set_error(TC_ERR_ARG, "trace lookup: NULL argument");
    if (!ST(g)) return tc_set_error(TC_ERR_ARG, "trace lookup: the graph is not being traced");
    return lookup(g, ST(g), t, "trace", "a tensor", val);
}

int32_t tc_trace_find(tc_graph *g, const tc_tensor *t)
{
    if (!g || !t || !ST(g)) return -1;
    vkey k;
    tc_trace_key(t, &k);
    return tc_trace_map_find(ST(g), &k);
}

tc_status tc_trace_bind(tc_graph *g, const tc_tensor *t, int32_t val)
{
    if (!g || !t) return tc_set_error(TC_ERR_ARG, "trace bind: NULL argument");
    tstate *S = ST(g);
    if (!S) return tc_set_error(TC_ERR_ARG, "trace bind: the graph is not being traced");
    if (val < 0 || val >= g->nvals) return tc_set_error(TC_ERR_ARG, "trace bind: %d is no value", val);
    const tc_gval *x = &g->vals[val];
    bool ok = x->dtype == t->dtype && x->ndim == t->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = x->size[d] == t->size[d];
    if (!ok) {
        char b[TC_SHAPE_BUF];
        return tc_set_error(TC_ERR_SHAPE, "trace bind: the tensor (%s %s) does not match value %%%d",
                            tc_dtype_name((tc_dtype)t->dtype), tc_shape_str(t, b, sizeof b), val);
    }
    TRY(tc_trace_facts_reserve(S, g->nvals));
    if (x->kind == TC_GV_OP && g->nodes[x->producer].op >= TC_OP_COUNT) { /* a control-flow node */
        const tc_gnode *n = &g->nodes[x->producer];
        bool dyn = false;
        for (int i = 0; i < n->nin; i++) dyn = dyn || (n->in[i] >= 0 && S->dyn[n->in[i]]);
        S->dyn[val] = dyn, S->home[val] = -1;
    }
    vkey k;
    tc_trace_key(t, &k);
    if (t->storage) {
        sentry *e;
        TRY(tc_trace_sto_get(S, t->storage, &e));
        if (x->view_of < 0) set_root(e, val, &k);
    }
    return tc_trace_map_put(S, &k, val);
}

tc_graph *tc_trace_suspend(void)
{
    tc_graph *g = tc_trace_active;
    tc_trace_active = NULL;
    return g;
}

void tc_trace_resume(tc_graph *g)
{
    if (g && g->trace_state) tc_trace_active = g;
}
