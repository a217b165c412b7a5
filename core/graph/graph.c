/* graph.c -- the graph IR's storage: building graphs, rewriting uses, compaction, the
 * text and Graphviz forms, the per-pass report, and the compile pipeline that runs the
 * passes in order (see graph.h for the data model).
 */
#include "graph.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* ---- arena ------------------------------------------------------------------------------ */

struct tc_garena_block {
    tc_garena_block *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

void *tc_graph_alloc(tc_graph *g, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    tc_garena_block *b = g->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 8192 ? n : 8192;
        b = tc_malloc(sizeof *b + cap, "graph arena");
        if (!b) return NULL;
        b->next = g->arena, b->used = 0, b->cap = cap;
        g->arena = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *tc_graph_strdup(tc_graph *g, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tc_graph_alloc(g, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Grows *arr (elements of size el) to hold need elements. */
static tc_status grow(void **arr, int32_t *cap, int32_t need, size_t el, const char *what)
{
    if (need <= *cap) return TC_OK;
    int32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * el);
    if (!p) return tc_set_error(TC_ERR_MEMORY, "graph: out of memory for %s", what);
    *arr = p, *cap = nc;
    return TC_OK;
}
#define GROW(arr, cap, need, what) grow((void **)&(arr), &(cap), (need), sizeof *(arr), what)

/* ---- building ---------------------------------------------------------------------------- */

tc_status tc_graph_new(tc_graph **out)
{
    tc_graph *g = tc_malloc(sizeof *g, "graph");
    if (!g) return TC_ERR_MEMORY;
    memset(g, 0, sizeof *g);
    *out = g;
    return TC_OK;
}

static tc_status new_val(tc_graph *g, int kind, int dt, int ndim, const int64_t *sizes, int32_t *id)
{
    if (ndim < 0 || ndim > TC_MAX_DIMS) return tc_set_error(TC_ERR_ARG, "graph: %d dims", ndim);
    TRY(GROW(g->vals, g->capvals, g->nvals + 1, "values"));
    tc_gval *v = &g->vals[g->nvals];
    memset(v, 0, sizeof *v);
    v->kind = kind, v->producer = -1, v->arg = -1, v->dtype = dt, v->ndim = ndim;
    v->view_of = -1, v->offset = -1;
    if (ndim) memcpy(v->size, sizes, sizeof(int64_t) * (size_t)ndim);
    *id = g->nvals++;
    return TC_OK;
}

tc_status tc_graph_add_input(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes, int32_t *id)
{
    TRY(GROW(g->inputs, g->capinputs, g->ninputs + 1, "inputs"));
    TRY(new_val(g, TC_GV_INPUT, dt, ndim, sizes, id));
    g->vals[*id].arg = g->ninputs;
    g->inputs[g->ninputs++] = *id;
    return TC_OK;
}

static tc_status add_tensor_val(tc_graph *g, int kind, tc_tensor *t, int32_t *id)
{
    if (!t) return tc_set_error(TC_ERR_ARG, "graph: NULL tensor");
    TRY(new_val(g, kind, t->dtype, t->ndim, t->size, id));
    tc_tensor_retain(t);
    g->vals[*id].t = t;
    return TC_OK;
}

tc_status tc_graph_add_external(tc_graph *g, tc_tensor *t, int32_t *id)
{
    TRY(add_tensor_val(g, TC_GV_EXTERNAL, t, id));
    g->vals[*id].device = t->device;
    return TC_OK;
}

tc_status tc_graph_add_const(tc_graph *g, tc_tensor *t, int32_t *id)
{
    TRY(add_tensor_val(g, TC_GV_CONST, t, id));
    g->vals[*id].device = t->device;
    return TC_OK;
}

tc_status tc_graph_add_node(tc_graph *g, int32_t op, const int32_t *in, int nin, const tc_params *p, int nout,
                            const int32_t *dtypes, const int32_t *ndims, const int64_t (*sizes)[TC_MAX_DIMS],
                            int32_t *outs)
{
    if (nout < 0 || nin < 0 || (op < TC_OP_COUNT && nout > 2)) return tc_set_error(TC_ERR_ARG, "graph: bad node arity");
    for (int i = 0; i < nin; i++)
        if (in[i] < -1 || in[i] >= g->nvals) return tc_set_error(TC_ERR_ARG, "graph: input %d is no value", i);
    TRY(GROW(g->nodes, g->capnodes, g->nnodes + 1, "nodes"));
    int32_t *ins = nin ? tc_graph_alloc(g, sizeof(int32_t) * (size_t)nin) : NULL;
    if (nin && !ins) return TC_ERR_MEMORY;
    if (nin) memcpy(ins, in, sizeof(int32_t) * (size_t)nin);
    int32_t *ids = tc_graph_alloc(g, sizeof(int32_t) * (size_t)(nout > 2 ? nout : 2));
    if (!ids) return TC_ERR_MEMORY;
    ids[0] = ids[1] = -1;
    int32_t nid = g->nnodes, nvals0 = g->nvals;
    /* the dispatcher's rule: the device of the first input that is not a 0-dim CPU tensor
     * (the tracer then records the real results' devices, which differ for copies) */
    int32_t dev = -1;
    for (int i = 0; i < nin && dev < 0; i++)
        if (in[i] >= 0 && !(g->vals[in[i]].device == TC_CPU && g->vals[in[i]].ndim == 0)) dev = g->vals[in[i]].device;
    for (int i = 0; i < nin && dev < 0; i++)
        if (in[i] >= 0) dev = g->vals[in[i]].device;
    if (dev < 0) dev = g->device;
    for (int o = 0; o < nout; o++) {
        tc_status s = new_val(g, TC_GV_OP, dtypes[o], ndims[o], sizes[o], &ids[o]);
        if (s) {
            g->nvals = nvals0; /* a failed add adds nothing */
            return s;
        }
        g->vals[ids[o]].producer = nid, g->vals[ids[o]].slot = o, g->vals[ids[o]].device = dev;
    }
    tc_gnode *n = &g->nodes[g->nnodes++];
    memset(n, 0, sizeof *n);
    n->op = op, n->nin = nin, n->nout = nout, n->in = ins, n->out = ids, n->group = -1, n->inplace = -1;
    if (p) n->p = *p;
    if (op < TC_OP_COUNT && tc_op_info((tc_op)op)->kind == TC_KIND_RANDOM) n->flags |= TC_GN_RANDOM;
    if (op < TC_OP_COUNT && tc_op_info((tc_op)op)->kind == TC_KIND_VIEW && nin > 0 && ids[0] >= 0) {
        int32_t base = in[0];
        g->vals[ids[0]].view_of = g->vals[base].view_of >= 0 ? g->vals[base].view_of : base;
    }
    if (outs)
        for (int o = 0; o < nout; o++) outs[o] = ids[o];
    return TC_OK;
}

/* Zero-filled CPU tensor with v's dtype and sizes (shape inference for hand-built nodes). */
static tc_status dummy_of(const tc_graph *g, int32_t v, tc_tensor **out)
{
    const tc_gval *x = &g->vals[v];
    tc_status s = tc_tensor_new((tc_dtype)x->dtype, x->ndim, x->size, out);
    if (s) return s;
    int64_t n = tc_graph_val_bytes(g, v);
    if (n > 0) memset(tc_base(*out), 0, (size_t)n);
    return TC_OK;
}

tc_status tc_graph_add_op(tc_graph *g, tc_op op, const int32_t *in, int nin, const tc_params *p, int32_t *outs)
{
    const tc_opinfo *info = tc_op_info(op);
    if (!info) return tc_set_error(TC_ERR_ARG, "graph: unknown op %d", (int)op);
    if (nin > 64) return tc_set_error(TC_ERR_ARG, "%s: too many inputs for a graph node", info->name);
    tc_tensor *dummies[64] = {0}, *res[2] = {NULL, NULL};
    tc_status s = TC_OK;
    for (int i = 0; i < nin && s == TC_OK; i++) {
        if (in[i] < -1 || in[i] >= g->nvals) s = tc_set_error(TC_ERR_ARG, "%s: input %d is no value", info->name, i);
        else if (in[i] >= 0) s = dummy_of(g, in[i], &dummies[i]);
    }
    int32_t dts[2] = {0}, nds[2] = {0};
    int64_t sz[2][TC_MAX_DIMS] = {{0}};
    if (s == TC_OK && info->kind == TC_KIND_VIEW) {
        s = tc_op_exec(op, (const tc_tensor *const *)dummies, nin, p, res, info->nout);
        if (s == TC_OK) {
            dts[0] = res[0]->dtype, nds[0] = res[0]->ndim;
            memcpy(sz[0], res[0]->size, sizeof sz[0]);
        }
    } else if (s == TC_OK) {
        tc_outspec spec;
        s = tc_op_prepare(op, (const tc_tensor *const *)dummies, nin, p, NULL, info->nout, &spec);
        for (int o = 0; s == TC_OK && o < spec.nout; o++) {
            dts[o] = spec.dtype[o], nds[o] = spec.ndim[o];
            memcpy(sz[o], spec.size[o], sizeof sz[o]);
        }
    }
    for (int i = 0; i < nin; i++) tc_tensor_release(dummies[i]);
    tc_tensor_release(res[0]);
    if (s) return s;
    return tc_graph_add_node(g, op, in, nin, p, info->nout, dts, nds, (const int64_t(*)[TC_MAX_DIMS])sz, outs);
}

tc_status tc_graph_mark_output(tc_graph *g, int32_t val)
{
    if (val < 0 || val >= g->nvals) return tc_set_error(TC_ERR_ARG, "graph: output %d is no value", val);
    TRY(GROW(g->outputs, g->capoutputs, g->noutputs + 1, "outputs"));
    g->outputs[g->noutputs++] = val;
    return TC_OK;
}

tc_status tc_graph_add_writeback(tc_graph *g, int32_t ext_val, int32_t val)
{
    if (ext_val < 0 || ext_val >= g->nvals || g->vals[ext_val].kind != TC_GV_EXTERNAL || val < 0 || val >= g->nvals)
        return tc_set_error(TC_ERR_ARG, "graph: bad write-back %d <- %d", ext_val, val);
    for (int i = 0; i < g->nwb; i++)
        if (g->wb_ext[i] == ext_val) { /* a later write replaces the earlier one */
            g->wb_val[i] = val;
            return TC_OK;
        }
    int32_t cap = g->capwb;
    TRY(GROW(g->wb_ext, cap, g->nwb + 1, "write-backs"));
    TRY(GROW(g->wb_val, g->capwb, g->nwb + 1, "write-backs"));
    g->wb_ext[g->nwb] = ext_val, g->wb_val[g->nwb] = val, g->nwb++;
    return TC_OK;
}

/* ---- editing and analysis ------------------------------------------------------------------ */

void tc_graph_replace_uses(tc_graph *g, int32_t old_val, int32_t new_val)
{
    for (int n = 0; n < g->nnodes; n++) {
        tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] == old_val) nd->in[i] = new_val;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == old_val) g->outputs[i] = new_val;
    for (int i = 0; i < g->nwb; i++)
        if (g->wb_val[i] == old_val) g->wb_val[i] = new_val;
}

void tc_graph_fix_view_roots(tc_graph *g)
{
    for (int32_t v = 0; v < g->nvals; v++) g->vals[v].view_of = -1;
    for (int32_t n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if ((nd->flags & TC_GN_DEAD) || nd->op < 0 || nd->op >= TC_OP_COUNT || nd->nin < 1 || nd->in[0] < 0 ||
            nd->out[0] < 0 || tc_op_info((tc_op)nd->op)->kind != TC_KIND_VIEW)
            continue;
        int32_t base = nd->in[0];
        g->vals[nd->out[0]].view_of = g->vals[base].view_of >= 0 ? g->vals[base].view_of : base;
    }
}

void tc_graph_count_uses(tc_graph *g)
{
    for (int v = 0; v < g->nvals; v++) g->vals[v].nuses = 0;
    for (int n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0) g->vals[nd->in[i]].nuses++;
    }
    for (int i = 0; i < g->noutputs; i++) g->vals[g->outputs[i]].nuses++;
    for (int i = 0; i < g->nwb; i++) g->vals[g->wb_val[i]].nuses++, g->vals[g->wb_ext[i]].nuses++;
}

/* ---- execution order ------------------------------------------------------------------ */

static bool live(const tc_graph *g, int32_t n) { return !(g->nodes[n].flags & TC_GN_DEAD); }

/* The live node producing value v, or -1 (inputs, externals, constants, dead producers). */
static int32_t live_producer(const tc_graph *g, int32_t v)
{
    if (v < 0 || g->vals[v].kind != TC_GV_OP) return -1;
    int32_t p = g->vals[v].producer;
    return p >= 0 && p < g->nnodes && live(g, p) ? p : -1;
}

/* Whether the live nodes need re-sorting: one is TC_GN_PLACE, or reads a result of a node
 * that comes at or after it. */
static bool needs_sort(const tc_graph *g)
{
    for (int32_t n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (!live(g, n)) continue;
        if (nd->flags & TC_GN_PLACE) return true;
        for (int i = 0; i < nd->nin; i++)
            if (live_producer(g, nd->in[i]) >= n) return true;
    }
    return false;
}

/* A binary min-heap of node ids by (key, id). */
typedef struct nheap {
    int32_t *id, n;
    const int64_t *key;
} nheap;

static bool before(const nheap *h, int32_t a, int32_t b)
{
    return h->key[a] < h->key[b] || (h->key[a] == h->key[b] && a < b);
}

static void heap_push(nheap *h, int32_t x)
{
    int32_t i = h->n++;
    for (; i > 0 && before(h, x, h->id[(i - 1) / 2]); i = (i - 1) / 2) h->id[i] = h->id[(i - 1) / 2];
    h->id[i] = x;
}

static int32_t heap_pop(nheap *h)
{
    int32_t top = h->id[0], x = h->id[--h->n], i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(h, h->id[c + 1], h->id[c])) c++;
        if (!before(h, h->id[c], x)) break;
        h->id[i] = h->id[c], i = c;
    }
    if (h->n) h->id[i] = x;
    return top;
}

/* order[k] = the live node that runs k-th (*nlive of them): Kahn's algorithm taking, among
 * the nodes whose inputs are ready, the one with the lowest key. A node's key is its id,
 * so nodes keep their order wherever it is valid (random nodes draw in the traced order);
 * a TC_GN_PLACE node's key is the largest key among its inputs' producers, so it runs as
 * soon as they have (an accumulation rewritten by simplify consumes each step's operands
 * where the step's product was, instead of keeping them all live to the end). */
static tc_status topo_order(const tc_graph *g, int32_t *order, int32_t *nlive)
{
    int32_t nn = g->nnodes, nedge = 0;
    for (int32_t n = 0; n < nn; n++)
        if (live(g, n)) nedge += g->nodes[n].nin;
    int64_t *key = malloc(sizeof(int64_t) * (size_t)(nn + 1));
    int32_t *indeg = calloc((size_t)nn + 1, sizeof(int32_t)), *start = calloc((size_t)nn + 2, sizeof(int32_t));
    int32_t *succ = malloc(sizeof(int32_t) * (size_t)(nedge + 1)), *heap = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    tc_status s = TC_OK;
    if (!key || !indeg || !start || !succ || !heap) {
        s = tc_set_error(TC_ERR_MEMORY, "graph: out of memory ordering %d nodes", (int)nn);
        goto done;
    }
    /* keys, and the edges producer -> reader in CSR form (start[p]..start[p+1]) */
    for (int32_t n = 0; n < nn; n++) {
        const tc_gnode *nd = &g->nodes[n];
        key[n] = n;
        if (!live(g, n)) continue;
        if (nd->flags & TC_GN_PLACE) key[n] = -1;
        for (int i = 0; i < nd->nin; i++) {
            int32_t p = live_producer(g, nd->in[i]);
            if (p < 0) continue;
            indeg[n]++, start[p + 1]++;
            int64_t kp = p < n ? key[p] : p; /* a producer placed later: its id for now */
            if ((nd->flags & TC_GN_PLACE) && kp > key[n]) key[n] = kp;
        }
    }
    for (int32_t n = 0; n < nn; n++) start[n + 1] += start[n];
    for (int32_t n = 0; n < nn; n++) heap[n] = start[n]; /* the heap array as the fill cursor */
    for (int32_t n = 0; n < nn; n++) {
        if (!live(g, n)) continue;
        const tc_gnode *nd = &g->nodes[n];
        for (int i = 0; i < nd->nin; i++) {
            int32_t p = live_producer(g, nd->in[i]);
            if (p >= 0) succ[heap[p]++] = n;
        }
    }
    nheap h = {heap, 0, key};
    int32_t k = 0, total = 0;
    for (int32_t n = 0; n < nn; n++)
        if (live(g, n)) {
            total++;
            if (!indeg[n]) heap_push(&h, n);
        }
    while (h.n) {
        int32_t n = heap_pop(&h);
        order[k++] = n;
        for (int32_t e = start[n]; e < start[n + 1]; e++)
            if (--indeg[succ[e]] == 0) heap_push(&h, succ[e]);
    }
    *nlive = k;
    if (k < total)
        s = tc_set_error(TC_ERR_INTERNAL, "graph: %d nodes read each other's results (a cycle)", (int)(total - k));
done:
    free(key), free(indeg), free(start), free(succ), free(heap);
    return s;
}

tc_status tc_graph_compact(tc_graph *g)
{
    tc_graph_count_uses(g);
    int32_t *vmap = malloc(sizeof(int32_t) * (size_t)(g->nvals + 1));
    int32_t *nmap = malloc(sizeof(int32_t) * (size_t)(g->nnodes + 1));
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(g->nnodes + 1));
    tc_gnode *nodes = NULL;
    if (!vmap || !nmap || !order) {
        free(vmap), free(nmap), free(order);
        return tc_set_error(TC_ERR_MEMORY, "graph: out of memory compacting");
    }
    /* nodes: nmap[n] = n's place in the new order (-1: dropped) */
    int32_t nn = 0;
    if (needs_sort(g)) {
        nodes = malloc(sizeof(tc_gnode) * (size_t)(g->capnodes + 1));
        tc_status s = nodes ? topo_order(g, order, &nn) : tc_set_error(TC_ERR_MEMORY, "graph: out of memory sorting");
        if (s) {
            free(vmap), free(nmap), free(order), free(nodes);
            return s;
        }
        for (int n = 0; n < g->nnodes; n++) nmap[n] = -1;
        for (int32_t k = 0; k < nn; k++) nmap[order[k]] = k;
    } else {
        for (int n = 0; n < g->nnodes; n++) nmap[n] = (g->nodes[n].flags & TC_GN_DEAD) ? -1 : nn++;
    }
    for (int n = 0; n < g->nnodes; n++) /* a dropped control node takes its subgraphs along */
        if (nmap[n] < 0)
            for (int s = 0; s < g->nodes[n].nsub; s++) tc_graph_free(g->nodes[n].sub[s]), g->nodes[n].sub[s] = NULL;
    /* values: keep inputs, externals, and values read or produced by a live node */
    int32_t nv = 0;
    for (int v = 0; v < g->nvals; v++) {
        const tc_gval *x = &g->vals[v];
        bool keep = x->kind == TC_GV_INPUT || x->kind == TC_GV_EXTERNAL || x->nuses > 0 ||
                    (x->kind == TC_GV_OP && nmap[x->producer] >= 0);
        vmap[v] = keep ? nv++ : -1;
    }
    for (int v = 0; v < g->nvals; v++) {
        if (vmap[v] < 0) {
            tc_tensor_release(g->vals[v].t);
            continue;
        }
        tc_gval x = g->vals[v];
        if (x.kind == TC_GV_OP) x.producer = nmap[x.producer];
        if (x.view_of >= 0) x.view_of = vmap[x.view_of];
        g->vals[vmap[v]] = x;
    }
    g->nvals = nv;
    /* moving forward in place is safe without a sort (nmap[n] <= n); a sort fills a new array */
    tc_gnode *dst = nodes ? nodes : g->nodes;
    for (int n = 0; n < g->nnodes; n++) {
        if (nmap[n] < 0) continue;
        tc_gnode x = g->nodes[n];
        for (int i = 0; i < x.nin; i++)
            if (x.in[i] >= 0) x.in[i] = vmap[x.in[i]];
        for (int o = 0; o < x.nout; o++) x.out[o] = vmap[x.out[o]];
        x.group = -1;
        x.flags &= ~(uint32_t)TC_GN_PLACE;
        dst[nmap[n]] = x;
    }
    if (nodes) free(g->nodes), g->nodes = nodes;
    g->nnodes = nn;
    for (int i = 0; i < g->ninputs; i++) g->inputs[i] = vmap[g->inputs[i]];
    for (int i = 0; i < g->noutputs; i++) g->outputs[i] = vmap[g->outputs[i]];
    for (int i = 0; i < g->nwb; i++) g->wb_ext[i] = vmap[g->wb_ext[i]], g->wb_val[i] = vmap[g->wb_val[i]];
    g->ngroups = 0;
    free(vmap), free(nmap), free(order);
    tc_graph_fix_view_roots(g); /* a pass may have redirected a view's input */
    tc_graph_count_uses(g);
    for (int v = 0; v < g->nvals; v++)
        if (g->vals[v].kind == TC_GV_OP && g->vals[v].producer < 0)
            return tc_set_error(TC_ERR_INTERNAL, "graph: value %%%d is read after its node was removed", v);
    return TC_OK;
}

tc_status tc_graph_add_stat(tc_graph *g, const tc_gpass_stat *st)
{
    TRY(GROW(g->stats, g->capstats, g->nstats + 1, "the report"));
    g->stats[g->nstats++] = *st;
    return TC_OK;
}

int tc_graph_live_nodes(const tc_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !(g->nodes[i].flags & TC_GN_DEAD);
    return n;
}

void tc_graph_val_shape(const tc_graph *g, int32_t v, tc_tensor *hdr)
{
    const tc_gval *x = &g->vals[v];
    memset(hdr, 0, sizeof *hdr);
    hdr->refcount = 1, hdr->dtype = x->dtype, hdr->ndim = x->ndim;
    memcpy(hdr->size, x->size, sizeof hdr->size);
    tc_contiguous_strides(x->ndim, x->size, hdr->stride);
}

int64_t tc_graph_val_bytes(const tc_graph *g, int32_t v)
{
    const tc_gval *x = &g->vals[v];
    return tc_numel_of(x->ndim, x->size) * tc_elsize(x->dtype);
}

const char *tc_graph_op_name(int32_t op)
{
    if (op == TC_GOP_COND) return "cond";
    if (op == TC_GOP_WHILE) return "while";
    if (op == TC_GOP_WHILE_GRAD) return "while_grad";
    const tc_opinfo *info = tc_op_info((tc_op)op);
    return info ? info->name : "?";
}

/* ---- public queries -------------------------------------------------------------------------- */

int tc_graph_num_inputs(const tc_graph *g) { return g ? g->ninputs : 0; }
int tc_graph_num_outputs(const tc_graph *g) { return g ? g->noutputs : 0; }
int tc_graph_num_nodes(const tc_graph *g) { return g ? tc_graph_live_nodes(g) : 0; }
int64_t tc_graph_planned_bytes(const tc_graph *g) { return g && g->compiled ? g->planned_bytes : 0; }
int64_t tc_graph_unplanned_bytes(const tc_graph *g) { return g && g->compiled ? g->unplanned_bytes : 0; }

void tc_graph_free(tc_graph *g)
{
    if (!g) return;
    tc_trace_free_state(g);
    tc_graph_exec_free(g);
    for (int v = 0; v < g->nvals; v++) tc_tensor_release(g->vals[v].t);
    for (int n = 0; n < g->nnodes; n++)
        for (int s = 0; s < g->nodes[n].nsub; s++) tc_graph_free(g->nodes[n].sub[s]);
    free(g->nodes), free(g->vals), free(g->inputs), free(g->outputs), free(g->wb_ext), free(g->wb_val);
    free(g->groups), free(g->stats);
    for (tc_garena_block *b = g->arena, *nx; b; b = nx) nx = b->next, free(b);
    free(g);
}

/* ---- text forms ----------------------------------------------------------------------------- */

/* A growing text buffer that writes into (buf, cap) and counts what did not fit. */
typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = t->len < t->cap ? t->buf + t->len : NULL;
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

static tc_status finish(text *t, size_t *needed)
{
    if (needed) *needed = t->len + 1;
    if (t->cap) t->buf[t->len < t->cap ? t->len : t->cap - 1] = 0;
    return TC_OK;
}

static void put_type(text *t, const tc_graph *g, int32_t v)
{
    const tc_gval *x = &g->vals[v];
    put(t, "%s(", tc_dtype_name((tc_dtype)x->dtype));
    for (int d = 0; d < x->ndim; d++) put(t, d ? ",%lld" : "%lld", (long long)x->size[d]);
    put(t, ")");
}

static void put_params(text *t, const tc_gnode *n)
{
    const tc_params *p = &n->p;
    bool any = p->s[0] != 0 || p->s[1] != 0 || p->nshape > 0;
    for (int i = 0; i < 4; i++) any |= p->i[i] != 0;
    if (!any) return;
    put(t, " {");
    const char *sep = "";
    for (int i = 0; i < 2; i++)
        if (p->s[i] != 0) put(t, "%ss%d=%.9g", sep, i, p->s[i]), sep = " ";
    for (int i = 0; i < 4; i++)
        if (p->i[i] != 0) put(t, "%si%d=%lld", sep, i, (long long)p->i[i]), sep = " ";
    if (p->nshape > 0) {
        put(t, "%sshape=[", sep);
        for (int i = 0; i < p->nshape && i < 2 * TC_MAX_DIMS; i++) put(t, i ? ",%lld" : "%lld", (long long)p->shape[i]);
        put(t, "]");
    }
    put(t, "}");
}

static const char *kind_name(int k)
{
    static const char *names[] = {"input", "external", "const", "op"};
    return k >= 0 && k < 4 ? names[k] : "?";
}

tc_status tc_graph_dump(const tc_graph *g, char *buf, size_t cap, size_t *needed)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "graph dump: NULL graph");
    text t = {buf, cap, 0};
    put(&t, "graph: %d inputs, %d nodes, %d outputs%s\n", g->ninputs, tc_graph_live_nodes(g), g->noutputs,
        g->compiled ? " (compiled)" : "");
    for (int v = 0; v < g->nvals; v++) {
        const tc_gval *x = &g->vals[v];
        if (x->kind == TC_GV_OP) continue;
        put(&t, "  %%%d : ", v);
        put_type(&t, g, v);
        put(&t, " %s", kind_name(x->kind));
        if (x->kind == TC_GV_INPUT) put(&t, " %d", x->arg + 1);
        put(&t, "\n");
    }
    for (int n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        put(&t, "  ");
        for (int o = 0; o < nd->nout; o++) put(&t, o ? ", %%%d" : "%%%d", nd->out[o]);
        put(&t, " = %s(", tc_graph_op_name(nd->op));
        for (int i = 0; i < nd->nin; i++) {
            if (nd->in[i] < 0) put(&t, i ? ", -" : "-");
            else put(&t, i ? ", %%%d" : "%%%d", nd->in[i]);
        }
        put(&t, ")");
        put_params(&t, nd);
        put(&t, " : ");
        for (int o = 0; o < nd->nout; o++) {
            if (o) put(&t, ", ");
            put_type(&t, g, nd->out[o]);
        }
        if (nd->group >= 0) put(&t, "  [group %d]", nd->group);
        if (nd->flags & TC_GN_INPLACE) put(&t, "  [in place of %%%d]", nd->in[nd->inplace]);
        if (nd->out[0] >= 0 && g->vals[nd->out[0]].offset >= 0)
            put(&t, "  @%lld", (long long)g->vals[nd->out[0]].offset);
        if (nd->where) put(&t, "  # %s", nd->where);
        put(&t, "\n");
    }
    for (int i = 0; i < g->nwb; i++) put(&t, "  write %%%d <- %%%d\n", g->wb_ext[i], g->wb_val[i]);
    put(&t, "  return");
    for (int i = 0; i < g->noutputs; i++) put(&t, i ? ", %%%d" : " %%%d", g->outputs[i]);
    put(&t, "\n");
    return finish(&t, needed);
}

tc_status tc_graph_report(const tc_graph *g, char *buf, size_t cap, size_t *needed)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "graph report: NULL graph");
    text t = {buf, cap, 0};
    for (int i = 0; i < g->nstats; i++) {
        const tc_gpass_stat *s = &g->stats[i];
        put(&t, "%-10s nodes %d -> %d", s->pass, s->nodes_before, s->nodes_after);
        if (s->nodes_before > s->nodes_after) put(&t, " (%d removed)", s->nodes_before - s->nodes_after);
        if (s->groups) put(&t, ", %d groups fused", s->groups);
        if (s->bytes_planned || s->bytes_unplanned)
            put(&t, ", %lld bytes planned (%lld without reuse)", (long long)s->bytes_planned,
                (long long)s->bytes_unplanned);
        if (s->note[0]) put(&t, ", %s", s->note);
        put(&t, "\n");
    }
    return finish(&t, needed);
}

tc_status tc_graph_dot(const tc_graph *g, const char *path)
{
    if (!g || !path) return tc_set_error(TC_ERR_ARG, "graph dot: NULL argument");
    char tmp[4096];
    int k = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (k < 0 || (size_t)k >= sizeof tmp) return tc_set_error(TC_ERR_ARG, "graph dot: path too long");
    FILE *f = fopen(tmp, "w");
    if (!f) return tc_set_error(TC_ERR_IO, "graph dot: cannot write %s", path);
    fprintf(f, "digraph tocha {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    for (int v = 0; v < g->nvals; v++) {
        const tc_gval *x = &g->vals[v];
        if (x->kind == TC_GV_OP) continue;
        char ty[256];
        text t = {ty, sizeof ty, 0};
        put_type(&t, g, v);
        finish(&t, NULL);
        fprintf(f, "  v%d [shape=ellipse, label=\"%%%d %s\\n%s\"%s];\n", v, v, kind_name(x->kind), ty,
                x->kind == TC_GV_INPUT ? ", style=filled, fillcolor=lightblue" : "");
    }
    /* fused groups as clusters */
    for (int gi = -1; gi < g->ngroups; gi++) {
        if (gi >= 0) fprintf(f, "  subgraph cluster_%d {\n    label=\"fused group %d\"; style=dashed;\n", gi, gi);
        for (int n = 0; n < g->nnodes; n++) {
            const tc_gnode *nd = &g->nodes[n];
            if ((nd->flags & TC_GN_DEAD) || nd->group != gi) continue;
            char ty[256];
            text t = {ty, sizeof ty, 0};
            if (nd->nout > 0) put_type(&t, g, nd->out[0]);
            finish(&t, NULL);
            fprintf(f, "  %sn%d [shape=box, label=\"%s\\n%s\"];\n", gi >= 0 ? "  " : "", n,
                    tc_graph_op_name(nd->op), ty);
        }
        if (gi >= 0) fprintf(f, "  }\n");
    }
    for (int n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        for (int i = 0; i < nd->nin; i++) {
            int32_t v = nd->in[i];
            if (v < 0) continue;
            const tc_gval *x = &g->vals[v];
            if (x->kind == TC_GV_OP) fprintf(f, "  n%d -> n%d [label=\"%%%d\"];\n", x->producer, n, v);
            else fprintf(f, "  v%d -> n%d;\n", v, n);
        }
    }
    fprintf(f, "  out [shape=doublecircle, label=\"return\"];\n");
    for (int i = 0; i < g->noutputs; i++) {
        const tc_gval *x = &g->vals[g->outputs[i]];
        if (x->kind == TC_GV_OP) fprintf(f, "  n%d -> out;\n", x->producer);
        else fprintf(f, "  v%d -> out;\n", g->outputs[i]);
    }
    for (int i = 0; i < g->nwb; i++) {
        const tc_gval *x = &g->vals[g->wb_val[i]];
        if (x->kind == TC_GV_OP) fprintf(f, "  n%d -> v%d [style=dotted, label=\"write\"];\n", x->producer, g->wb_ext[i]);
    }
    fprintf(f, "}\n");
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        remove(tmp);
        return tc_set_error(TC_ERR_IO, "graph dot: error writing %s", path);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return tc_set_error(TC_ERR_IO, "graph dot: cannot rename onto %s", path);
    }
    return TC_OK;
}

/* ---- the pipeline ----------------------------------------------------------------------------- */

/* The node and value arrays grew by doubling while tracing, and the passes removed many
 * entries: gives the unused tails back before the plan is made (the LSTM LM's graph kept
 * 8192 node and 16384 value slots for 5457 and 5533). Nothing is appended after compiling. */
static void shrink_to_fit(tc_graph *g)
{
    int32_t nn = g->nnodes > 0 ? g->nnodes : 1, nv = g->nvals > 0 ? g->nvals : 1;
    if (nn < g->capnodes) {
        tc_gnode *p = realloc(g->nodes, sizeof *p * (size_t)nn);
        if (p) g->nodes = p, g->capnodes = nn;
    }
    if (nv < g->capvals) {
        tc_gval *p = realloc(g->vals, sizeof *p * (size_t)nv);
        if (p) g->vals = p, g->capvals = nv;
    }
}

tc_status tc_graph_compile(tc_graph *g, unsigned passes)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "graph compile: NULL graph");
    if (g->trace_error) return tc_set_error(TC_ERR_ARG, "graph compile: the trace failed; trace again");
    if (g->trace_state) return tc_set_error(TC_ERR_ARG, "graph compile: the graph is still being traced");
    if (g->compiled) return TC_OK;
    /* Cheap cleanups first so folding and CSE see fewer nodes; DCE again after them. */
    if (passes & TC_PASS_DCE) TRY(tc_pass_dce(g));
    if (passes & TC_PASS_FOLD) TRY(tc_pass_fold(g));
    if (passes & TC_PASS_SIMPLIFY) TRY(tc_pass_simplify(g));
    if (passes & TC_PASS_CSE) TRY(tc_pass_cse(g));
    if (passes & TC_PASS_DCE) TRY(tc_pass_dce(g));
    if (passes & TC_PASS_FUSE) TRY(tc_pass_fuse(g));
    if (passes & TC_PASS_INPLACE) TRY(tc_pass_inplace(g));
    TRY(tc_pass_memplan(g));
    shrink_to_fit(g);
#if defined(__GLIBC__)
    /* Tracing ran a whole eager step and the passes folded constants: what they freed
     * stays in glibc's heap, and the plan's arena would come on top of it. Handing the free
     * pages back now keeps a compiled step's peak memory near the eager step's (the LSTM LM
     * of `make bench` peaked 27 MB higher without this). */
    malloc_trim(0);
#endif
    TRY(tc_graph_exec_prepare(g));
    g->compiled = true;
    return TC_OK;
}
