/* capture.c -- a compiled graph's run captured as a CUDA graph and replayed (PyTorch's
 * torch.cuda.graphs: static inputs and outputs).
 *
 * tc_graph_capture checks that every step can be captured (no host reads of device values:
 * index ops check their indices on the device while captured, masks counted on the host
 * are refused; random draws from one generator only, none on the host; no control flow, no
 * output that would need a fresh copy per run), makes
 * every allocation the run needs (the member-by-member fallback of fused groups, the fresh
 * results: they become the static outputs, device mirrors of host scalars), then runs the
 * graph inside tc_cuda_graph_begin/end (core/cuda_stream.c): the steps and write-backs only
 * launch work. The graph must have run once before (the warm-up, as PyTorch asks: NVRTC
 * compiles, cuDNN picks algorithms, the caches fill outside the capture).
 * A replay recomputes the static outputs from whatever the static inputs hold and updates
 * the captured tensors (parameters) in place. Random ops draw fresh numbers at each replay,
 * those a run would draw: the capture's generator is the one the graph's random nodes
 * draw from (core/cuda_stream.c reserves the replay's slots from it).
 *
 * The capture holds references to every piece of memory the recorded work touches (the
 * arena, the plan's headers and temporaries, the captured tensors, the static inputs and
 * outputs), so freeing or recompiling the graph cannot leave a replay writing freed memory.
 * Captured tensors are read at the addresses they had: a parameter re-pointed to other
 * memory after the capture is not seen (capture again). Captured 0-dim CPU tensors get
 * device mirrors refreshed before each replay (make_mirrors).
 *
 * NOTE: never run on a GPU; over the mock backend (which records and replays its calls)
 * tests/c/test_graph_cuda_capture.c runs it end to end.
 */
#include "exec.h"
#include <stdio.h>
#include <stdlib.h>

struct tc_captured_graph {
    tc_cuda_graph *cg;
    int32_t *mir_val, nmir; /* 0-dim CPU captured tensors read by device steps ... */
    tc_tensor **mir;        /* ... and their device mirrors, refreshed before each replay */
    const tc_tensor **mir_src;
    tc_tensor **keep;
    int32_t nkeep, capkeep;
    tc_storage *arena;
    tc_storage **wb_targets; /* storages written back: their versions move at each replay */
    int32_t nwb;
};

static tc_status keep(tc_captured_graph *c, tc_tensor *t)
{
    if (!t) return TC_OK;
    if (c->nkeep == c->capkeep) {
        int32_t cap = c->capkeep ? c->capkeep * 2 : 64;
        tc_tensor **k = realloc(c->keep, sizeof *k * (size_t)cap);
        if (!k) return tc_set_error(TC_ERR_MEMORY, "graph capture: out of memory");
        c->keep = k, c->capkeep = cap;
    }
    tc_tensor_retain(t);
    c->keep[c->nkeep++] = t;
    return TC_OK;
}

static tc_status keep_cb(void *c, tc_tensor *t) { return keep(c, t); }

/* A captured 0-dim CPU tensor (an optimizer's per-step scalar: the learning rate, Adam's
 * bias corrections) joins device ops through a host-to-device copy of its value. A capture
 * would record the value it had then; instead the captured steps read a device mirror of
 * it, which every replay refreshes from the host first (outside the graph). */
static tc_status make_mirrors(const tc_graph *g, const plan *pl, tc_captured_graph *c)
{
    c->mir_val = malloc(sizeof(int32_t) * ((size_t)pl->next + 1));
    c->mir = calloc((size_t)pl->next + 1, sizeof *c->mir);
    c->mir_src = calloc((size_t)pl->next + 1, sizeof *c->mir_src);
    if (!c->mir_val || !c->mir || !c->mir_src) return tc_set_error(TC_ERR_MEMORY, "graph capture: out of memory");
    for (int32_t i = 0; i < pl->next; i++) {
        int32_t v = pl->ext[i];
        const tc_tensor *t = g->vals[v].t;
        if (t->device == pl->device) continue;
        TRY(tc_tensor_to(t, pl->device, -1, &c->mir[c->nmir]));
        c->mir_src[c->nmir] = t;
        c->mir_val[c->nmir++] = v;
    }
    return TC_OK;
}

void tc_graph_capture_free(tc_captured_graph *c)
{
    if (!c) return;
    tc_cuda_graph_free(c->cg);
    for (int32_t i = 0; i < c->nmir; i++) tc_tensor_release(c->mir[i]);
    free(c->mir_val), free(c->mir), free(c->mir_src);
    for (int32_t i = 0; i < c->nkeep; i++) tc_tensor_release(c->keep[i]);
    for (int32_t i = 0; i < c->nwb; i++) tc_storage_release(c->wb_targets[i]);
    tc_storage_release(c->arena);
    free(c->keep), free(c->wb_targets), free(c);
}

/* Index ops whose only host read is the bounds check: inside a capture their kernels check
 * on the device instead and a bad index surfaces at the next host wait (docs/cuda.md).
 * masked_fill reads nothing on the host. masked_copy, masked_select and nonzero count their
 * masks on the host (result sizes): those stay uncapturable. */
static bool index_capturable(int op)
{
    switch (op) {
    case TC_OP_INDEX_SELECT:
    case TC_OP_INDEX_COPY:
    case TC_OP_INDEX_ADD:
    case TC_OP_INDEX_FILL:
    case TC_OP_GATHER:
    case TC_OP_SCATTER:
    case TC_OP_SCATTER_ADD:
    case TC_OP_SCATTER_FILL:
    case TC_OP_MASKED_FILL: return true;
    default: return false;
    }
}

/* The first step or output that cannot be captured, as an error naming it. */
static tc_status refuse_uncapturable(const tc_graph *g, const plan *pl)
{
    for (int32_t i = 0; i < pl->nsteps; i++) {
        const step *s = &pl->steps[i];
        if (s->mode == S_DGROUP || s->mode == S_VIEW) continue;
        const tc_gnode *nd = &g->nodes[s->node];
        int kind = nd->op < TC_OP_COUNT ? tc_op_info((tc_op)nd->op)->kind : -1;
        const char *why = s->mode == S_CONTROL      ? "reads its predicate on the host"
                          : kind == TC_KIND_INDEX && !index_capturable(nd->op) ? "counts a mask on the host"
                          : nd->op == TC_OP_RANDPERM || nd->op == TC_OP_MULTINOMIAL ? "waits for the device"
                                                   : NULL;
        if (why)
            return tc_set_error(TC_ERR_UNSUPPORTED,
                                "graph capture: node %d (%s%s%s) %s, which a CUDA graph cannot capture; run this graph "
                                "without capturing it",
                                s->node, tc_graph_op_name(nd->op), nd->where ? ", traced at " : "",
                                nd->where ? nd->where : "", why);
    }
    for (int32_t i = 0; i < pl->nouts; i++)
        if (pl->outs[i].mode == O_CLONE || pl->outs[i].mode == O_CONTROL)
            return tc_set_error(TC_ERR_UNSUPPORTED,
                                "graph capture: output %d is a constant, or a captured tensor's value before its "
                                "update, which needs a new copy at every run; return a computed value instead", i + 1);
    return TC_OK;
}

/* The generator the random steps draw from (NULL: the process default, or none draws); a
 * CUDA graph's draws all come from one generator. */
static tc_status capture_generator(const tc_graph *g, const plan *pl, tc_generator **gen)
{
    int32_t first = -1;
    *gen = NULL;
    for (int32_t i = 0; i < pl->nsteps; i++) {
        const step *s = &pl->steps[i];
        if (s->mode == S_DGROUP || s->mode == S_VIEW || s->mode == S_CONTROL) continue;
        const tc_gnode *nd = &g->nodes[s->node];
        if (nd->op >= TC_OP_COUNT || tc_op_info((tc_op)nd->op)->kind != TC_KIND_RANDOM) continue;
        tc_generator *ng = nd->p.gen ? nd->p.gen : tc_generator_default();
        if (first >= 0 && ng != *gen)
            return tc_set_error(TC_ERR_UNSUPPORTED,
                                "graph capture: node %d (%s) draws from another generator than node %d (%s); the "
                                "draws of a CUDA graph come from one generator",
                                s->node, tc_graph_op_name(nd->op), first, tc_graph_op_name(g->nodes[first].op));
        if (first < 0) first = s->node, *gen = ng;
    }
    return TC_OK;
}

tc_status tc_graph_capture(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout,
                           tc_captured_graph **out)
{
    if (!g || !out) return tc_set_error(TC_ERR_ARG, "graph capture: NULL argument");
    *out = NULL;
    if (!g->compiled) TRY(tc_graph_compile(g, TC_PASS_ALL));
    plan *pl = g->plan;
    if (!pl) return tc_set_error(TC_ERR_INTERNAL, "graph capture: the graph has no runtime plan");
    if (pl->device == TC_CPU)
        return tc_set_error(TC_ERR_DEVICE, "graph capture: the graph runs on cpu; CUDA graphs capture device work "
                                           "(trace it with CUDA tensors)");
    if (nout != g->noutputs || (nout && !outputs))
        return tc_set_error(TC_ERR_ARG, "graph capture: the graph returns %d outputs, got %d slots", g->noutputs, nout);
    TRY(refuse_uncapturable(g, pl));
    tc_generator *gen;
    TRY(capture_generator(g, pl, &gen));
    if (pl->nruns == 0)
        return tc_set_error(TC_ERR_ARG, "graph capture: run the graph once before capturing it (a warm-up: kernels "
                                        "compile and caches fill outside the capture)");
    TRY(tc_gexec_dgroups_ready(g, pl));
    tc_captured_graph *c = calloc(1, sizeof *c);
    if (!c) return tc_set_error(TC_ERR_MEMORY, "graph capture: out of memory");
    tc_status st = make_mirrors(g, pl, c);
    if (st) {
        tc_graph_capture_free(c);
        return st;
    }
    tc_tensor *res[64], **r = nout <= 64 ? res : calloc((size_t)nout, sizeof *r);
    if (!r) {
        tc_graph_capture_free(c);
        return tc_set_error(TC_ERR_MEMORY, "graph capture: out of memory");
    }
    /* the recorded steps read the device mirrors of the host scalars */
    for (int32_t i = 0; i < c->nmir; i++) pl->rt[c->mir_val[i]] = c->mir[i];
    tc_cuda_set_capture_generator(gen); /* read when the capture begins */
    st = tc_gexec_run_capture(g, inputs, nin, r, nout, &c->cg);
    tc_cuda_set_capture_generator(NULL);
    for (int32_t i = 0; i < c->nmir; i++) pl->rt[c->mir_val[i]] = g->vals[c->mir_val[i]].t;
    int nres = st == TC_OK ? nout : 0;
    /* what the recorded work touches lives as long as the capture */
    c->arena = pl->arena;
    tc_storage_retain(c->arena);
    for (int32_t v = 0; v < pl->nvals && st == TC_OK; v++) st = keep(c, pl->own[v]);
    for (int32_t i = 0; i < pl->nwb && st == TC_OK; i++) st = keep(c, pl->wb[i].snap);
    for (int32_t i = 0; i < pl->next && st == TC_OK; i++) st = keep(c, g->vals[pl->ext[i]].t);
    for (int32_t v = 0; v < g->nvals && st == TC_OK; v++)
        if (g->vals[v].kind == TC_GV_CONST) st = keep(c, g->vals[v].t);
    for (int i = 0; i < nin && st == TC_OK; i++) st = keep(c, (tc_tensor *)inputs[i]);
    for (int i = 0; i < nres && st == TC_OK; i++) st = keep(c, r[i]);
    if (st == TC_OK) st = tc_gexec_keep_temps(pl, c, keep_cb);
    if (st == TC_OK && g->nwb) {
        c->wb_targets = calloc((size_t)g->nwb, sizeof *c->wb_targets);
        if (!c->wb_targets) st = tc_set_error(TC_ERR_MEMORY, "graph capture: out of memory");
        for (int32_t i = 0; i < g->nwb && st == TC_OK; i++) {
            tc_storage *s = g->vals[g->wb_ext[i]].t->storage;
            tc_storage_retain(s);
            c->wb_targets[c->nwb++] = s;
        }
    }
    if (st) {
        for (int i = 0; i < nres; i++) tc_tensor_release(r[i]);
        tc_graph_capture_free(c);
    } else {
        memcpy(outputs, r, sizeof *r * (size_t)nout);
        *out = c;
    }
    if (r != res) free(r);
    return st;
}

tc_status tc_graph_replay(tc_captured_graph *c)
{
    if (!c || !c->cg) return tc_set_error(TC_ERR_ARG, "graph replay: NULL capture");
    static const tc_params cp = {.i = {-1, 0, 0, 0}};
    for (int32_t i = 0; i < c->nmir; i++) { /* the host scalars' values now, queued ahead of the graph */
        const tc_tensor *src = c->mir_src[i];
        tc_tensor *dst[1] = {c->mir[i]};
        if (src->dtype == dst[0]->dtype && tc_tensor_is_contiguous(src) && tc_tensor_is_contiguous(dst[0]))
            TRY(tc_cuda_scalars_copy(dst[0]->device, tc_base(dst[0]), tc_base(src),
                                     (size_t)(tc_tensor_numel(src) * tc_elsize(src->dtype))));
        else
            TRY(tc_op_exec(TC_OP_COPY, &c->mir_src[i], 1, &cp, dst, 1));
    }
    TRY(tc_cuda_graph_replay(c->cg));
    for (int32_t i = 0; i < c->nwb; i++)
        if (c->wb_targets[i]) c->wb_targets[i]->version++; /* the captured tensors changed */
    return TC_OK;
}
