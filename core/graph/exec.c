/* exec.c -- runs a compiled graph: one C call, no Lua, no per-node dispatch.
 *
 * tc_graph_exec_prepare turns the planned graph into a runtime (g->plan):
 *   - one arena storage of g->planned_bytes, and one tensor header per arena value at its
 *     planned offset (made once, reused by every run);
 *   - rt[v], the header every value is read through: arena headers, the captured and
 *     constant tensors themselves, view headers, and per-run slots for the caller's
 *     inputs, fresh graph outputs and control results;
 *   - a list of steps, one per node that does work, each holding a ready tc_kcall whose
 *     input and output slots are refilled from rt[] (a few loads) before the kernel of
 *     tc_cpu_backend is called directly: shapes and dtypes were checked once here, so the
 *     dispatcher's checks, prepare step and allocation are skipped. Tiny elementwise
 *     steps try tc_cpu_ew_fast first, as the dispatcher does. Index and random ops keep a
 *     prepare step per run (it checks index values and data-dependent sizes).
 * Views: a view whose memory is the arena or a constant is built once here; a view of a
 * per-run tensor (an input, a captured tensor, a graph output) is rebuilt per run into a
 * header of the plan, from the geometry cached for the base's strides (the view code runs
 * again only when those change), and its storage is borrowed for the run only.
 * Fused groups run at their last member (tc_fused_eval); control nodes through
 * tc_control_run. Write-backs copy into the captured tensors at the end (or were computed
 * there, inplace.c) and bump their storage versions.
 *
 * What the caller gets (PyTorch's rules): a fresh tensor for an op result; the same
 * tensor for an input or a captured tensor returned as is; a new header on the same
 * memory for a view of an input, a captured tensor or a result; a copy where sharing
 * would be wrong (a constant, or a captured tensor's old value that a write-back
 * overwrites). A run allocates only those; a failed run releases them and sets no output.
 * A graph's plan is mutable state: one run at a time per graph (checked).
 */
#include "exec.h"
#include <stdio.h>
#include <stdlib.h>

static const tc_params copy_params = {.i = {-1, 0, 0, 0}};

/* ---- freeing ------------------------------------------------------------------------------- */

void tc_graph_exec_free(tc_graph *g)
{
    plan *pl = g ? g->plan : NULL;
    if (!pl) return;
    for (int32_t i = 0; i < pl->ndyn; i++)
        if (pl->own[pl->dyn[i]]) pl->own[pl->dyn[i]]->storage = NULL; /* borrowed */
    if (pl->own)
        for (int32_t v = 0; v < pl->nvals; v++) tc_tensor_release(pl->own[v]);
    for (int32_t i = 0; i < pl->nsteps; i++) free(pl->steps[i].in);
    for (int32_t i = 0; i < pl->nwb; i++) tc_tensor_release(pl->wb[i].snap);
    tc_gexec_cuda_free(pl);
    tc_storage_release(pl->arena);
    if (pl->recycle)
        for (int32_t i = 0; i < pl->nfresh; i++) tc_storage_release(pl->recycle[i]);
    free(pl->recycle);
    free(pl->rt), free(pl->own), free(pl->bind), free(pl->steps), free(pl->fresh), free(pl->dyn), free(pl->ctl);
    free(pl->ext), free(pl->wb), free(pl->direct_ext), free(pl->ext_stor), free(pl->ext_off), free(pl->outs);
    free(pl);
    g->plan = NULL;
}

/* ---- preparing ------------------------------------------------------------------------------ */

static const char *shape_of_val(const tc_graph *g, int32_t v, char *buf)
{
    const tc_gval *x = &g->vals[v];
    char sz[TC_SHAPE_BUF];
    snprintf(buf, TC_SHAPE_BUF + 16, "%s %s", tc_dtype_name((tc_dtype)x->dtype),
             tc_sizes_str(x->ndim, x->size, sz, sizeof sz));
    return buf;
}

/* The node's output types by the op's shape rules on headers of the graph's types must be
 * what the graph says: then calling the kernel with those headers is what the dispatcher
 * would have done. (Not for index and random ops: their rules read data; they keep the
 * check per run.) */
static tc_status check_node_types(const tc_graph *g, int32_t n, int *nout)
{
    const tc_gnode *nd = &g->nodes[n];
    tc_tensor hin[64], hout[2];
    const tc_tensor *in[64];
    tc_tensor *out[2] = {NULL, NULL};
    if (nd->nin > 64) return tc_set_error(TC_ERR_ARG, "graph: node %d (%s) has too many inputs", n, tc_graph_op_name(nd->op));
    /* shape rules want tensors with memory; these kinds never read it */
    tc_storage stand_in = {.data = NULL, .nbytes = INT64_MAX / 4, .refcount = 1, .device = TC_CPU};
    for (int32_t i = 0; i < nd->nin; i++) {
        in[i] = NULL;
        if (nd->in[i] < 0) continue;
        tc_graph_val_shape(g, nd->in[i], &hin[i]);
        hin[i].storage = &stand_in, in[i] = &hin[i];
    }
    for (int32_t o = 0; o < nd->nout; o++) {
        tc_graph_val_shape(g, nd->out[o], &hout[o]);
        hout[o].storage = &stand_in, out[o] = &hout[o];
    }
    tc_outspec spec;
    TRY(tc_op_prepare((tc_op)nd->op, in, nd->nin, &nd->p, out, tc_op_info((tc_op)nd->op)->nout, &spec));
    *nout = spec.nout; /* max/min over all elements give no indices */
    for (int32_t o = 0; o < spec.nout && o < nd->nout; o++) {
        const tc_gval *x = &g->vals[nd->out[o]];
        if (spec.dtype[o] != x->dtype || spec.ndim[o] != x->ndim ||
            memcmp(spec.size[o], x->size, sizeof(int64_t) * (size_t)x->ndim) != 0) {
            char b1[TC_SHAPE_BUF + 16], b2[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_INTERNAL, "graph: node %d (%s) gives %s %s but the graph says %s", n,
                                tc_graph_op_name(nd->op), tc_dtype_name((tc_dtype)spec.dtype[o]),
                                tc_sizes_str(spec.ndim[o], spec.size[o], b2, sizeof b2), shape_of_val(g, nd->out[o], b1));
        }
    }
    return TC_OK;
}

static tc_status add_step(const tc_graph *g, plan *pl, int32_t n, int mode)
{
    const tc_gnode *nd = &g->nodes[n];
    step *s = &pl->steps[pl->nsteps++];
    memset(s, 0, sizeof *s);
    s->mode = (uint8_t)mode, s->node = n, s->nin = nd->nin, s->nout = nd->nout, s->vin = nd->in, s->vout = nd->out;
    s->p = nd->p;
    s->in = calloc((size_t)nd->nin + (size_t)(nd->nout > 2 ? nd->nout : 2), sizeof(void *));
    if (!s->in) return tc_set_error(TC_ERR_MEMORY, "graph: out of memory preparing node %d", n);
    s->out = (tc_tensor **)(s->in + nd->nin);
    if (nd->op < TC_OP_COUNT) {
        s->kern = tc_cpu_backend.kernels[nd->op];
        s->k = (tc_kcall){.op = (tc_op)nd->op, .info = tc_op_info((tc_op)nd->op), .in = s->in, .nin = nd->nin,
                          .p = &s->p, .out = s->out, .nout = nd->nout};
        if (mode != S_VIEW && !s->kern) s->mode = S_EXEC; /* the dispatcher reports "not available" */
        for (int32_t i = 0; i < nd->nin && pl->device == TC_CPU && (mode == S_KERNEL || mode == S_EW); i++)
            if (nd->in[i] >= 0 && g->vals[nd->in[i]].device != TC_CPU) s->mode = S_EXEC; /* a download */
        if (pl->device != TC_CPU && (mode == S_KERNEL || mode == S_EW || mode == S_CHECKED)) { /* the CPU kernels never see device memory */
            s->kern = NULL;
            /* the dispatcher checks index values itself; only data-dependent sizes need a
             * look first (a given result of another size would be resized out of the arena) */
            s->mode = nd->op == TC_OP_MASKED_SELECT || nd->op == TC_OP_NONZERO ? S_DCHECKED : S_EXEC;
        }
    }
    return TC_OK;
}

static tc_status prepare_views_and_headers(tc_graph *g, plan *pl, int32_t n)
{
    const tc_gnode *nd = &g->nodes[n];
    int32_t v = nd->out[0], base = nd->in[0];
    uint8_t rb = pl->bind[pl->info->root[v]];
    if (rb == TC_GB_ARENA || rb == TC_GB_CONST) { /* fixed memory: build the header once */
        const tc_tensor *in[1] = {pl->rt[base]};
        tc_kcall k = {.op = (tc_op)nd->op, .info = tc_op_info((tc_op)nd->op), .in = in, .nin = 1, .p = &nd->p};
        TRY(tc_view_run(&k, &pl->own[v]));
        pl->rt[v] = pl->own[v];
        return TC_OK;
    }
    TRY(tc_tensor_new_empty_on(g->vals[base].device, (tc_dtype)g->vals[v].dtype, &pl->own[v]));
    pl->rt[v] = pl->own[v];
    pl->dyn[pl->ndyn++] = v;
    return add_step(g, pl, n, S_VIEW);
}

static bool has_writeback(const tc_graph *g, int32_t ext)
{
    for (int32_t i = 0; i < g->nwb; i++)
        if (g->wb_ext[i] == ext) return true;
    return false;
}

static int output_mode(const tc_graph *g, const plan *pl, int32_t v)
{
    int32_t r = pl->info->root[v];
    switch (pl->bind[v]) {
    case TC_GB_INPUT: return O_RETAIN;
    case TC_GB_EXTERNAL: return has_writeback(g, v) ? O_CLONE : O_RETAIN;
    case TC_GB_FRESH: return O_FRESH;
    case TC_GB_CONTROL: return O_CONTROL;
    case TC_GB_VIEW:
        switch (pl->bind[r]) {
        case TC_GB_FRESH:
        case TC_GB_INPUT: return O_ALIAS;
        case TC_GB_EXTERNAL: return has_writeback(g, r) ? O_CLONE : O_ALIAS;
        case TC_GB_CONTROL: return O_CONTROL;
        default: return O_CLONE;
        }
    default: return O_CLONE; /* constants: the caller must not write into the graph's data */
    }
}

/* Whether a write-back source may read memory that an earlier write-back overwrites. */
static bool source_may_alias_target(const plan *pl, int32_t v)
{
    uint8_t b = pl->bind[pl->info->root[v]];
    return b == TC_GB_INPUT || b == TC_GB_EXTERNAL || b == TC_GB_CONTROL;
}

static tc_status prepare(tc_graph *g, plan *pl)
{
    const tc_gplan_info *a = pl->info;
    int32_t nv = g->nvals, nn = g->nnodes;
    pl->nvals = nv;
    pl->rt = calloc((size_t)nv + 1, sizeof *pl->rt);
    pl->own = calloc((size_t)nv + 1, sizeof *pl->own);
    pl->bind = malloc((size_t)nv + 1);
    pl->steps = calloc((size_t)nn + (size_t)g->ngroups + 1, sizeof *pl->steps);
    pl->fresh = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    pl->recycle = calloc((size_t)(nv + 1), sizeof(tc_storage *));
    pl->dyn = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    pl->ctl = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    pl->ext = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    pl->wb = calloc((size_t)g->nwb + 1, sizeof *pl->wb);
    pl->direct_ext = malloc(sizeof(int32_t) * (size_t)(g->nwb + 1));
    pl->ext_stor = calloc((size_t)nv + 1, sizeof *pl->ext_stor); /* NULL: checked at the first run */
    pl->ext_off = calloc((size_t)nv + 1, sizeof *pl->ext_off);
    pl->outs = calloc((size_t)g->noutputs + 1, sizeof *pl->outs);
    if (!pl->rt || !pl->own || !pl->bind || !pl->steps || !pl->fresh || !pl->recycle || !pl->dyn || !pl->ctl || !pl->ext || !pl->wb ||
        !pl->direct_ext || !pl->ext_stor || !pl->ext_off || !pl->outs)
        return tc_set_error(TC_ERR_MEMORY, "graph: out of memory preparing the run");
    memcpy(pl->bind, a->bind, (size_t)nv);
    TRY(tc_graph_check_device(g, &pl->device));
    g->device = pl->device;
    if (pl->device == TC_CPU) TRY(tc_storage_alloc(g->planned_bytes, &pl->arena));
    else TRY(tc_storage_new_on(pl->device, g->planned_bytes, &pl->arena));

    /* headers of values with fixed memory */
    for (int32_t v = 0; v < nv; v++) {
        const tc_gval *x = &g->vals[v];
        switch (pl->bind[v]) {
        case TC_GB_EXTERNAL:
            pl->ext[pl->next++] = v;
            /* fall through */
        case TC_GB_CONST: pl->rt[v] = x->t; break;
        case TC_GB_ARENA: {
            int64_t es = tc_elsize(x->dtype);
            if (x->offset < 0 || x->offset % es || x->offset + tc_graph_val_bytes(g, v) > g->planned_bytes)
                return tc_set_error(TC_ERR_INTERNAL, "graph: value %%%d has no valid place in the arena", v);
            TRY(tc_tensor_new_view(pl->arena, (tc_dtype)x->dtype, x->offset / es, x->ndim, x->size, NULL, &pl->own[v]));
            pl->rt[v] = pl->own[v];
            break;
        }
        case TC_GB_FRESH: pl->fresh[pl->nfresh++] = v; break;
        case TC_GB_CONTROL: pl->ctl[pl->nctl++] = v; break;
        case TC_GB_WRITEBACK: {
            int32_t e = a->wb_of[v];
            if (e < 0 || !g->vals[e].t || !tc_tensor_is_contiguous(g->vals[e].t))
                return tc_set_error(TC_ERR_INTERNAL, "graph: value %%%d is planned in a captured tensor it cannot use", v);
            pl->rt[v] = g->vals[e].t;
            pl->direct_ext[pl->ndirect++] = e;
            break;
        }
        default: break;
        }
    }

    /* the steps, in node order; a fused group runs at its last member */
    for (int32_t n = 0; n < nn; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (a->pos[n] < 0) continue;
        bool grouped = nd->group >= 0 && nd->group < g->ngroups;
        int kind = nd->op < TC_OP_COUNT ? tc_op_info((tc_op)nd->op)->kind : -1;
        if (kind == TC_KIND_VIEW) {
            if (pl->bind[nd->out[0]] == TC_GB_VIEW) TRY(prepare_views_and_headers(g, pl, n));
        } else if (nd->op >= TC_OP_COUNT) {
            TRY(add_step(g, pl, n, S_CONTROL));
        } else if (nd->flags & TC_GN_CAT_PLACED) {
            /* memplan.c placed its inputs inside its result: nothing is left to do */
        } else if (!grouped) {
            int mode = kind == TC_KIND_INDEX || kind == TC_KIND_RANDOM ? S_CHECKED : kind == TC_KIND_EW ? S_EW : S_KERNEL;
            int nout = nd->nout;
            if (mode != S_CHECKED) TRY(check_node_types(g, n, &nout));
            TRY(add_step(g, pl, n, mode));
            pl->steps[pl->nsteps - 1].k.nout = nout;
        }
        if (grouped && a->glast[nd->group] == n && pl->device == TC_CPU) {
            TRY(add_step(g, pl, n, S_GROUP));
            pl->steps[pl->nsteps - 1].node = nd->group; /* S_GROUP: node holds the group id */
        } else if (grouped && a->glast[nd->group] == n) {
            int32_t idx;
            TRY(tc_gexec_dgroup_prepare(g, pl, nd->group, &idx));
            TRY(add_step(g, pl, n, S_DGROUP));
            pl->steps[pl->nsteps - 1].node = idx; /* S_DGROUP: node holds the index in pl->dg */
        }
    }

    /* write-backs */
    pl->nwb = g->nwb; /* (their snapshots are released by tc_graph_exec_free if this fails) */
    for (int32_t i = 0; i < g->nwb; i++) {
        wbstep *w = &pl->wb[i];
        int32_t src = g->wb_val[i], e = g->wb_ext[i];
        w->src = src, w->ext = e;
        w->direct = pl->bind[src] == TC_GB_WRITEBACK && a->wb_of[src] == e;
        if (tc_numel_of(g->vals[src].ndim, g->vals[src].size) != tc_numel_of(g->vals[e].ndim, g->vals[e].size))
            return tc_set_error(TC_ERR_INTERNAL, "graph: write-back of %%%d into %%%d changes the element count", src, e);
        w->k = (tc_kcall){.op = TC_OP_COPY, .info = tc_op_info(TC_OP_COPY), .in = w->in, .nin = 1, .p = &copy_params,
                          .out = w->out, .nout = 1};
        if (!w->direct && source_may_alias_target(pl, src)) {
            const tc_gval *x = &g->vals[src];
            TRY(tc_tensor_alloc_on(pl->device, (tc_dtype)x->dtype, x->ndim, x->size, &w->snap));
            w->ksnap = w->k;
            w->ksnap.in = w->snap_in, w->ksnap.out = w->snap_out;
        }
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        pl->outs[i].val = g->outputs[i];
        pl->outs[i].mode = (uint8_t)output_mode(g, pl, g->outputs[i]);
    }
    pl->nouts = g->noutputs;
    return TC_OK;
}

tc_status tc_graph_exec_prepare(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "graph: NULL graph");
    tc_graph_exec_free(g);
    tc_graph_fix_view_roots(g);
    tc_gplan_info a;
    TRY(tc_gplan_analyse(g, &a));
    plan *pl = calloc(1, sizeof *pl);
    if (!pl) {
        tc_gplan_info_free(&a);
        return tc_set_error(TC_ERR_MEMORY, "graph: out of memory preparing the run");
    }
    pl->info = &a;
    g->plan = pl;
    tc_status s = prepare(g, pl);
    pl->info = NULL;
    tc_gplan_info_free(&a);
    if (s) tc_graph_exec_free(g);
    return s;
}

/* ---- running --------------------------------------------------------------------------------- */

static tc_status bad_input(const tc_graph *g, int i, const tc_tensor *t)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF + 16];
    const tc_gval *x = &g->vals[g->inputs[i]];
    if (!t) return tc_set_error(TC_ERR_ARG, "graph run: input %d is NULL", i + 1);
    if (t->device != g->vals[g->inputs[i]].device) {
        char d1[16], d2[16];
        return tc_set_error(TC_ERR_DEVICE,
                            "graph run: input %d (%s %s) is on %s but the graph runs on %s (it was traced with "
                            "tensors there); move it with :cuda()/:float(), or trace again",
                            i + 1, tc_dtype_name((tc_dtype)t->dtype), tc_shape_str(t, b1, sizeof b1),
                            tc_device_str(t->device, d1, sizeof d1),
                            tc_device_str(g->vals[g->inputs[i]].device, d2, sizeof d2));
    }
    return tc_set_error(x->dtype != t->dtype ? TC_ERR_DTYPE : TC_ERR_SHAPE,
                        "graph run: input %d is %s %s but the graph was traced with %s", i + 1,
                        tc_dtype_name((tc_dtype)t->dtype), tc_shape_str(t, b1, sizeof b1),
                        shape_of_val(g, g->inputs[i], b2));
}

static inline bool same_type(const tc_gval *x, const tc_tensor *t)
{
    return t->dtype == x->dtype && t->ndim == x->ndim &&
           memcmp(t->size, x->size, sizeof(int64_t) * (size_t)x->ndim) == 0;
}

/* Captured tensors are read by reference, so their headers may have changed since the
 * trace (resize, set): their types must be the same, and the ones the graph writes before
 * the end must still be contiguous and share no memory with an input or (when a header
 * moved since the last run) with another captured tensor. */
static tc_status check_captures(const tc_graph *g, plan *pl, const tc_tensor *const *inputs)
{
    bool moved = false;
    for (int32_t i = 0; i < pl->next; i++) {
        int32_t v = pl->ext[i];
        const tc_tensor *t = g->vals[v].t;
        if (pl->ext_stor[i] != t->storage || pl->ext_off[i] != t->offset) moved = true;
        if (t->device != g->vals[v].device) {
            char d1[16], d2[16];
            return tc_set_error(TC_ERR_DEVICE, "graph run: captured tensor %%%d is now on %s but was on %s when traced; "
                                "trace again", v, tc_device_str(t->device, d1, sizeof d1),
                                tc_device_str(g->vals[v].device, d2, sizeof d2));
        }
        if (!same_type(&g->vals[v], t)) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF + 16];
            return tc_set_error(TC_ERR_SHAPE, "graph run: captured tensor %%%d is now %s %s but was %s when traced; trace again",
                                v, tc_dtype_name((tc_dtype)t->dtype), tc_shape_str(t, b1, sizeof b1),
                                shape_of_val(g, v, b2));
        }
    }
    for (int32_t d = 0; d < pl->ndirect; d++) {
        int32_t e = pl->direct_ext[d];
        const tc_tensor *t = g->vals[e].t;
        if (!t->storage || !tc_tensor_is_contiguous(t))
            return tc_set_error(TC_ERR_ARG,
                                "graph run: captured tensor %%%d is no longer contiguous, but the graph updates it in place; "
                                "trace again", e);
        int64_t lo, hi, l2, h2;
        tc_gplan_span(t, &lo, &hi);
        for (int32_t i = 0; i < g->ninputs; i++) {
            if (inputs[i]->storage != t->storage) continue;
            tc_gplan_span(inputs[i], &l2, &h2);
            if (l2 < hi && lo < h2)
                return tc_set_error(TC_ERR_ARG,
                                    "graph run: input %d shares memory with captured tensor %%%d, which the graph updates "
                                    "in place; pass a copy", i + 1, e);
        }
        if (!moved) continue;
        for (int32_t j = 0; j < pl->next; j++) {
            const tc_tensor *x = g->vals[pl->ext[j]].t;
            if (pl->ext[j] == e || x->storage != t->storage) continue;
            tc_gplan_span(x, &l2, &h2);
            if (l2 < hi && lo < h2)
                return tc_set_error(TC_ERR_ARG,
                                    "graph run: captured tensors %%%d and %%%d now share memory, but the graph updates "
                                    "%%%d in place; trace again", e, pl->ext[j], e);
        }
    }
    for (int32_t i = 0; i < pl->next && moved; i++)
        pl->ext_stor[i] = g->vals[pl->ext[i]].t->storage, pl->ext_off[i] = g->vals[pl->ext[i]].t->offset;
    return TC_OK;
}

static inline void fill(step *s, tc_tensor *const *rt)
{
    for (int32_t i = 0; i < s->nin; i++) s->in[i] = s->vin[i] >= 0 ? rt[s->vin[i]] : NULL;
    for (int32_t o = 0; o < s->nout; o++) s->out[o] = s->vout[o] >= 0 ? rt[s->vout[o]] : NULL;
}

/* A view of a per-run base: from the cached geometry when the base has the same strides. */
static tc_status run_view(step *s, tc_tensor *const *rt)
{
    const tc_tensor *base = rt[s->vin[0]];
    tc_tensor *h = rt[s->vout[0]];
    bool hit = s->vc_ok && base->ndim == s->vc_ndim &&
               memcmp(base->stride, s->vc_stride, sizeof(int64_t) * (size_t)base->ndim) == 0;
    if (!hit) {
        const tc_tensor *in[1] = {base};
        tc_kcall k = s->k;
        k.in = in;
        tc_tensor *v;
        TRY(tc_view_run(&k, &v));
        h->ndim = v->ndim;
        memcpy(h->size, v->size, sizeof h->size);
        memcpy(h->stride, v->stride, sizeof h->stride);
        s->vc_absolute = s->k.op == TC_OP_AS_STRIDED;
        s->vc_delta = s->vc_absolute ? v->offset : v->offset - base->offset;
        s->vc_ndim = base->ndim;
        memcpy(s->vc_stride, base->stride, sizeof s->vc_stride);
        s->vc_ok = true;
        tc_tensor_release(v);
    }
    h->storage = base->storage; /* borrowed for this run */
    h->offset = s->vc_absolute ? s->vc_delta : base->offset + s->vc_delta;
    return TC_OK;
}

static tc_status run_checked(const tc_graph *g, step *s)
{
    tc_outspec spec;
    TRY(tc_op_prepare(s->k.op, s->in, s->nin, s->k.p, s->out, s->k.info->nout, &spec));
    for (int32_t o = 0; o < spec.nout && o < s->nout; o++) {
        const tc_tensor *t = s->out[o];
        if (spec.ndim[o] != t->ndim || memcmp(spec.size[o], t->size, sizeof(int64_t) * (size_t)t->ndim) != 0) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_SHAPE,
                                "%s: gives %s on this run but %s when traced (its result size depends on the data, "
                                "which a compiled graph cannot follow)", tc_graph_op_name(s->k.op),
                                tc_sizes_str(spec.ndim[o], spec.size[o], b1, sizeof b1), tc_shape_str(t, b2, sizeof b2));
        }
    }
    (void)g;
    s->k.nout = spec.nout;
    return s->kern(&s->k);
}

/* The node's results are new references (possibly to the headers it was given), held in
 * rt[] until the end of the run. */
static tc_status run_control(const tc_graph *g, plan *pl, step *s)
{
    tc_tensor **res = s->out;
    for (int32_t o = 0; o < s->nout; o++) res[o] = NULL;
    TRY(tc_control_run(&g->nodes[s->node], (tc_tensor *const *)s->in, res));
    tc_status st = TC_OK;
    for (int32_t o = 0; o < s->nout && st == TC_OK; o++) {
        int32_t v = s->vout[o];
        if (v >= 0 && (!res[o] || !same_type(&g->vals[v], res[o]))) {
            char b[TC_SHAPE_BUF + 16];
            st = tc_set_error(TC_ERR_SHAPE, "%s: result %d is not the %s it was when traced",
                              tc_graph_op_name(g->nodes[s->node].op), o + 1, shape_of_val(g, v, b));
        }
    }
    for (int32_t o = 0; o < s->nout; o++) {
        if (st == TC_OK && s->vout[o] >= 0) pl->rt[s->vout[o]] = res[o];
        else tc_tensor_release(res[o]);
        res[o] = NULL;
    }
    return st;
}

static tc_status run_steps(tc_graph *g, plan *pl)
{
    tc_tensor **rt = pl->rt;
    tc_status st = TC_OK;
    step *s = pl->steps, *end = pl->steps + pl->nsteps;
    for (; s < end; s++) {
        switch (s->mode) {
        case S_EW:
            fill(s, rt);
            if (tc_cpu_ew_fast(s->k.op, s->k.info, s->in, s->nin, &s->p, s->out[0])) continue;
            st = s->kern(&s->k);
            break;
        case S_KERNEL:
            fill(s, rt);
            st = s->kern(&s->k);
            break;
        case S_CHECKED:
            fill(s, rt);
            st = run_checked(g, s);
            break;
        case S_EXEC:
            fill(s, rt);
            st = tc_op_exec(s->k.op, s->in, s->nin, &s->p, s->out, s->k.info->nout);
            break;
        case S_VIEW: st = run_view(s, rt); break;
        case S_GROUP: st = tc_fused_eval(g, &g->groups[s->node], rt); break;
        case S_DCHECKED:
            fill(s, rt);
            st = tc_gexec_dchecked_run(s);
            break;
        case S_DGROUP: st = tc_gexec_dgroup_run(g, pl, s->node); break;
        case S_CONTROL:
            fill(s, rt);
            st = run_control(g, pl, s);
            break;
        }
        if (st) break;
    }
    if (st == TC_OK) return TC_OK;
    /* name where it failed (the kernel's message names the op and the sizes) */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    const tc_gnode *nd = s->mode == S_GROUP || s->mode == S_DGROUP ? NULL : &g->nodes[s->node];
    if (!nd) return tc_set_error(st, "%s [fused group %d of the compiled graph]", msg,
                                 s->mode == S_GROUP ? s->node : tc_gexec_dgroup_group(pl, s->node));
    return tc_set_error(st, "%s [node %d of the compiled graph%s%s]", msg, s->node, nd->where ? ", traced at " : "",
                        nd->where ? nd->where : "");
}

/* Releases what a run made, and unbinds the per-run headers. */
static void end_run(plan *pl)
{
    for (int32_t i = 0; i < pl->nfresh; i++) {
        tc_tensor_release(pl->rt[pl->fresh[i]]);
        pl->rt[pl->fresh[i]] = NULL;
    }
    for (int32_t i = 0; i < pl->nctl; i++) {
        tc_tensor_release(pl->rt[pl->ctl[i]]);
        pl->rt[pl->ctl[i]] = NULL;
    }
    for (int32_t i = 0; i < pl->ndyn; i++) pl->own[pl->dyn[i]]->storage = NULL;
}

static tc_status clone(const tc_tensor *t, tc_tensor **out)
{
    *out = NULL;
    return tc_op_exec(TC_OP_COPY, &t, 1, &copy_params, out, 1);
}

static tc_status make_output(const plan *pl, const outstep *o, const tc_tensor *const *inputs, const tc_graph *g,
                             tc_tensor **res)
{
    tc_tensor *t = pl->rt[o->val];
    switch (o->mode) {
    case O_RETAIN:
        t = g->vals[o->val].kind == TC_GV_INPUT ? (tc_tensor *)inputs[g->vals[o->val].arg] : t;
        /* fall through */
    case O_FRESH: tc_tensor_retain(t), *res = t; return TC_OK;
    case O_ALIAS: return tc_tensor_alias(t, res);
    case O_CONTROL: return t->storage == pl->arena ? clone(t, res) : tc_tensor_alias(t, res);
    default: return clone(t, res);
    }
}

/* A fresh result of the last run whose storage nobody else holds any more (the caller
 * freed it) is reused: a big result then costs no new pages (no page faults, no zeroing). */
static tc_status alloc_result(const tc_graph *g, plan *pl, int32_t i)
{
    const tc_gval *x = &g->vals[pl->fresh[i]];
    tc_tensor **slot = &pl->rt[pl->fresh[i]];
    tc_storage *old = pl->recycle[i];
    int64_t bytes = tc_numel_of(x->ndim, x->size) * tc_elsize(x->dtype);
    if (old && __atomic_load_n(&old->refcount, __ATOMIC_ACQUIRE) == 1 && old->nbytes >= bytes && bytes > 0) {
        int64_t strides[TC_MAX_DIMS];
        tc_contiguous_strides(x->ndim, x->size, strides);
        if (tc_tensor_new_view(old, (tc_dtype)x->dtype, 0, x->ndim, x->size, strides, slot) == TC_OK) return TC_OK;
        tc_clear_error();
    }
    tc_status st = pl->device == TC_CPU ? tc_tensor_alloc((tc_dtype)x->dtype, x->ndim, x->size, slot)
                                        : tc_tensor_alloc_on(pl->device, (tc_dtype)x->dtype, x->ndim, x->size, slot);
    if (st) st = tc_set_error(st, "graph run: out of memory for result %%%d", pl->fresh[i]);
    return st;
}

static void keep_for_reuse(plan *pl)
{
    for (int32_t i = 0; i < pl->nfresh; i++) {
        tc_tensor *t = pl->rt[pl->fresh[i]];
        if (!t || !t->storage || t->storage == pl->recycle[i]) continue;
        tc_storage_release(pl->recycle[i]);
        tc_storage_retain(t->storage);
        pl->recycle[i] = t->storage;
    }
}

static tc_status write_back(plan *pl)
{
    for (int32_t i = 0; i < pl->nwb; i++) { /* sources that may read a target: copied aside first */
        wbstep *w = &pl->wb[i];
        if (!w->snap) continue;
        w->snap_in[0] = pl->rt[w->src], w->snap_out[0] = w->snap;
        if (pl->device != TC_CPU) TRY(tc_op_exec(TC_OP_COPY, w->snap_in, 1, &copy_params, w->snap_out, 1));
        else TRY(tc_cpu_backend.kernels[TC_OP_COPY](&w->ksnap));
    }
    for (int32_t i = 0; i < pl->nwb; i++) {
        wbstep *w = &pl->wb[i];
        tc_tensor *dst = pl->rt[w->ext];
        if (!w->direct) {
            w->in[0] = w->snap ? w->snap : pl->rt[w->src], w->out[0] = dst;
            if (pl->device != TC_CPU) TRY(tc_op_exec(TC_OP_COPY, w->in, 1, &copy_params, w->out, 1));
            else TRY(tc_cpu_backend.kernels[TC_OP_COPY](&w->k));
        }
        if (dst->storage) dst->storage->version++;
    }
    return TC_OK;
}

/* One run; with cg (capture.c) the steps and write-backs are captured into a CUDA graph
 * instead: everything that allocates (fresh results) happens before the capture begins. */
static tc_status run_graph(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout,
                           tc_cuda_graph **cg)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "graph run: NULL graph");
    if (tc_trace_active)
        return tc_set_error(TC_ERR_ARG, "graph run: cannot run a compiled graph while tracing (its ops would not be "
                                        "recorded); call the eager function inside traced code");
    if (!g->compiled) TRY(tc_graph_compile(g, TC_PASS_ALL));
    plan *pl = g->plan;
    if (!pl) return tc_set_error(TC_ERR_INTERNAL, "graph run: the graph has no runtime plan");
    if (nin != g->ninputs)
        return tc_set_error(TC_ERR_ARG, "graph run: the graph takes %d inputs, got %d", g->ninputs, nin);
    if (nout != g->noutputs)
        return tc_set_error(TC_ERR_ARG, "graph run: the graph returns %d outputs, got %d slots", g->noutputs, nout);
    if ((nin && !inputs) || (nout && !outputs)) return tc_set_error(TC_ERR_ARG, "graph run: NULL input or output list");
    for (int i = 0; i < nin; i++) {
        const tc_tensor *t = inputs[i];
        if (!t || !same_type(&g->vals[g->inputs[i]], t) || t->device != g->vals[g->inputs[i]].device)
            return bad_input(g, i, t);
    }
    if (__atomic_exchange_n(&pl->running, 1, __ATOMIC_ACQUIRE))
        return tc_set_error(TC_ERR_ARG, "graph run: this graph is already running (one run at a time per graph)");
    tc_status st = check_captures(g, pl, inputs);
    for (int i = 0; i < nin && st == TC_OK; i++) pl->rt[g->inputs[i]] = (tc_tensor *)inputs[i];
    for (int32_t i = 0; i < pl->nfresh && st == TC_OK; i++) st = alloc_result(g, pl, i);
    int grad = tc_set_grad_enabled(0);
    if (cg && st == TC_OK) {
        st = tc_cuda_graph_begin(TC_DEVICE_ORDINAL(pl->device), NULL);
        if (st == TC_OK) {
            pl->capturing = 1;
            st = run_steps(g, pl);
            if (st == TC_OK) st = write_back(pl);
            char msg[512];
            snprintf(msg, sizeof msg, "%s", st ? tc_last_error() : "");
            tc_status e = tc_cuda_graph_end(TC_DEVICE_ORDINAL(pl->device), cg); /* always ends it */
            pl->capturing = 0;
            if (st) st = tc_set_error(st, "graph capture: %s", msg);
            else st = e;
        }
    } else if (st == TC_OK) {
        st = run_steps(g, pl);
    }
    tc_set_grad_enabled(grad);

    tc_tensor *res[64], **made = nout <= 64 ? res : calloc((size_t)nout, sizeof *made);
    if (!made && st == TC_OK) st = tc_set_error(TC_ERR_MEMORY, "graph run: out of memory for %d outputs", nout);
    int nmade = 0;
    while (st == TC_OK && nmade < nout) {
        made[nmade] = NULL;
        st = make_output(pl, &pl->outs[nmade], inputs, g, &made[nmade]);
        nmade++; /* a failed one is NULL or released below */
    }
    if (st == TC_OK && !cg) st = write_back(pl);
    if (st == TC_OK && !cg) keep_for_reuse(pl);
    if (st == TC_OK) pl->nruns++;
    if (st == TC_OK) memcpy(outputs, made, sizeof *made * (size_t)nout);
    else if (made)
        for (int i = 0; i < nmade; i++) tc_tensor_release(made[i]);
    if (made != res) free(made);
    for (int i = 0; i < nin; i++) pl->rt[g->inputs[i]] = NULL;
    end_run(pl);
    __atomic_store_n(&pl->running, 0, __ATOMIC_RELEASE);
    return st;
}

tc_status tc_graph_run(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout)
{
    return run_graph(g, inputs, nin, outputs, nout, NULL);
}

tc_status tc_gexec_run_capture(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout,
                               tc_cuda_graph **cg)
{
    if (!cg) return tc_set_error(TC_ERR_ARG, "graph capture: NULL result");
    *cg = NULL;
    return run_graph(g, inputs, nin, outputs, nout, cg);
}
