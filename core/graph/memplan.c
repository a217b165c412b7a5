/* memplan.c -- memory planning: liveness over the execution order, and one arena in which
 * the intermediate values take byte ranges that are reused once their values are dead.
 *
 * The analysis (tc_gplan_analyse, shared with inplace.c and exec.c through plan.h) says
 * where every value's memory comes from and how long it must live. Only TC_GB_ARENA
 * values (op results that are not views, graph outputs, control results, fused-group
 * internals or values written straight into a captured tensor) take arena space. Why
 * those are excluded: a view shares its root's buffer (so it extends the root's life
 * instead); a graph output belongs to the caller and must survive the next run; a
 * control node returns references of its own; a fused group keeps its internal values in
 * cache-sized blocks.
 *
 * Planning walks the positions in order. At each position it first gives buffers to the
 * values produced there (while the inputs of that step are still live: a kernel must
 * never write into a buffer it is reading, except for the planned in-place case), then
 * frees the buffers whose last reader ran there. A buffer is the best-fitting free range,
 * else the arena grows; freed ranges are merged with their neighbours. An in-place node
 * (TC_GN_INPLACE, chosen by inplace.c and checked again here) hands the range of its
 * input to its output instead of taking a new one.
 */
#include "plan.h"
#include <stdio.h>
#include <stdlib.h>

/* ---- the analysis ---------------------------------------------------------------------- */

void tc_gplan_info_free(tc_gplan_info *a)
{
    free(a->pos), free(a->end), free(a->root), free(a->bind), free(a->wb_of), free(a->glast);
    memset(a, 0, sizeof *a);
}

static bool is_view_node(const tc_gnode *n)
{
    return n->op < TC_OP_COUNT && tc_op_info((tc_op)n->op)->kind == TC_KIND_VIEW;
}

static bool in_list(const int32_t *xs, int32_t n, int32_t x)
{
    for (int32_t i = 0; i < n; i++)
        if (xs[i] == x) return true;
    return false;
}

/* Group of the node producing v's memory, or -1. */
static int32_t group_of_root(const tc_graph *g, const tc_gplan_info *a, int32_t v)
{
    const tc_gval *r = &g->vals[a->root[v]];
    return r->kind == TC_GV_OP && r->producer >= 0 ? g->nodes[r->producer].group : -1;
}


tc_status tc_gplan_analyse(const tc_graph *g, tc_gplan_info *a)
{
    memset(a, 0, sizeof *a);
    int32_t nn = g->nnodes, nv = g->nvals, ng = g->ngroups;
    a->nnodes = nn, a->nvals = nv;
    a->pos = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    a->end = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    a->root = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    a->wb_of = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    a->glast = malloc(sizeof(int32_t) * (size_t)(ng + 1));
    a->bind = calloc((size_t)nv + 1, 1);
    uint8_t *fresh = calloc((size_t)nv + 1, 1);
    if (!a->pos || !a->end || !a->root || !a->wb_of || !a->glast || !a->bind || !fresh) {
        free(fresh);
        tc_gplan_info_free(a);
        return tc_set_error(TC_ERR_MEMORY, "graph plan: out of memory for %d values", (int)nv);
    }
    tc_status s = TC_OK;
    for (int32_t gi = 0; gi < ng; gi++) {
        a->glast[gi] = -1;
        for (int32_t i = 0; i < g->groups[gi].nnodes; i++) {
            int32_t m = g->groups[gi].nodes[i];
            if (m >= 0 && m < nn && !(g->nodes[m].flags & TC_GN_DEAD) && m > a->glast[gi]) a->glast[gi] = m;
        }
    }
    for (int32_t n = 0; n < nn; n++) {
        const tc_gnode *nd = &g->nodes[n];
        bool grouped = nd->group >= 0 && nd->group < ng && !is_view_node(nd);
        a->pos[n] = (nd->flags & TC_GN_DEAD) ? -1 : grouped ? a->glast[nd->group] : n;
    }
    for (int32_t v = 0; v < nv; v++) {
        a->root[v] = g->vals[v].view_of >= 0 ? g->vals[v].view_of : v;
        a->wb_of[v] = -1;
    }
    for (int32_t i = 0; i < g->nwb; i++)
        if (a->wb_of[g->wb_val[i]] < 0) a->wb_of[g->wb_val[i]] = g->wb_ext[i];
    for (int32_t i = 0; i < g->noutputs; i++) fresh[a->root[g->outputs[i]]] = 1;

    /* bindings: roots first (every view's root has a smaller id than the view) */
    for (int32_t v = 0; v < nv; v++) {
        const tc_gval *x = &g->vals[v];
        uint8_t b;
        if (x->kind == TC_GV_INPUT) b = TC_GB_INPUT;
        else if (x->kind == TC_GV_EXTERNAL) b = TC_GB_EXTERNAL;
        else if (x->kind == TC_GV_CONST) b = TC_GB_CONST;
        else if (x->producer < 0 || x->producer >= nn || (g->nodes[x->producer].flags & TC_GN_DEAD)) b = TC_GB_UNUSED;
        else if (g->nodes[x->producer].op >= TC_OP_COUNT) b = TC_GB_CONTROL;
        else if (is_view_node(&g->nodes[x->producer]) && x->view_of >= 0)
            b = a->bind[x->view_of] == TC_GB_INTERNAL ? TC_GB_INTERNAL : TC_GB_VIEW;
        else if (x->offset == TC_GOFF_WRITEBACK) b = TC_GB_WRITEBACK;
        else if (fresh[v]) b = TC_GB_FRESH;
        else {
            int32_t gi = g->nodes[x->producer].group;
            b = gi >= 0 && gi < ng && !in_list(g->groups[gi].outs, g->groups[gi].nouts, v) ? TC_GB_INTERNAL
                                                                                           : TC_GB_ARENA;
        }
        a->bind[v] = b;
        a->end[v] = x->kind == TC_GV_OP && b != TC_GB_UNUSED ? a->pos[x->producer] : -1;
    }
    free(fresh);

    /* liveness, and the checks that the order and the groups are consistent */
    for (int32_t n = 0; n < nn && s == TC_OK; n++) {
        const tc_gnode *nd = &g->nodes[n];
        int32_t p = a->pos[n];
        if (p < 0) continue;
        for (int32_t i = 0; i < nd->nin && s == TC_OK; i++) {
            int32_t u = nd->in[i];
            if (u < 0) continue;
            const tc_gval *x = &g->vals[u];
            if (x->kind == TC_GV_OP) {
                int32_t pp = x->producer >= 0 ? a->pos[x->producer] : -1;
                bool same_group = nd->group >= 0 && nd->group == g->nodes[x->producer].group;
                if (pp < 0 || pp > p || (pp == p && !same_group && x->producer != n))
                    s = tc_set_error(TC_ERR_INTERNAL, "graph plan: node %d (%s) reads %%%d before it is computed%s", n,
                                     tc_graph_op_name(nd->op), u, nd->group >= 0 ? " (check the fused groups)" : "");
            }
            if (s == TC_OK && a->bind[u] == TC_GB_INTERNAL && nd->group != group_of_root(g, a, u))
                s = tc_set_error(TC_ERR_INTERNAL,
                                 "graph plan: node %d (%s) reads %%%d, internal to fused group %d, from outside it", n,
                                 tc_graph_op_name(nd->op), u, group_of_root(g, a, u));
            int32_t r = a->root[u];
            int32_t e = nd->op >= TC_OP_COUNT ? nn : p; /* a control node may hand its inputs back */
            if (a->end[r] < e) a->end[r] = e;
            if (a->end[u] < e) a->end[u] = e;
        }
    }
    for (int32_t i = 0; i < g->noutputs + g->nwb && s == TC_OK; i++) {
        int32_t u = i < g->noutputs ? g->outputs[i] : g->wb_val[i - g->noutputs];
        if (a->bind[u] == TC_GB_INTERNAL || a->bind[u] == TC_GB_UNUSED)
            s = tc_set_error(TC_ERR_INTERNAL, "graph plan: %%%d is %s but %s", u,
                             i < g->noutputs ? "a graph output" : "written back",
                             a->bind[u] == TC_GB_UNUSED ? "its node is dead" : "not an output of its fused group");
        a->end[a->root[u]] = nn, a->end[u] = nn;
    }
    if (s) tc_gplan_info_free(a);
    return s;
}

int tc_gplan_reads_memory_of(const tc_graph *g, const tc_gplan_info *a, int32_t n, int32_t v)
{
    const tc_gnode *nd = &g->nodes[n];
    for (int32_t i = 0; i < nd->nin; i++)
        if (nd->in[i] >= 0 && a->root[nd->in[i]] == a->root[v]) return 1;
    return 0;
}

/* ---- the free list ---------------------------------------------------------------------- */

typedef struct range {
    int64_t off, size;
} range;

typedef struct freelist {
    range *r; /* free ranges sorted by offset, never adjacent (merged) */
    int32_t n;
    int64_t top; /* arena size so far */
} freelist;

static int64_t take(freelist *f, int64_t size)
{
    int32_t best = -1;
    for (int32_t i = 0; i < f->n; i++)
        if (f->r[i].size >= size && (best < 0 || f->r[i].size < f->r[best].size)) best = i;
    if (best >= 0) {
        int64_t off = f->r[best].off;
        f->r[best].off += size, f->r[best].size -= size;
        if (f->r[best].size == 0) {
            memmove(&f->r[best], &f->r[best + 1], sizeof(range) * (size_t)(f->n - best - 1));
            f->n--;
        }
        return off;
    }
    /* no range fits: grow the arena, starting inside a free range that ends at the top */
    if (f->n > 0 && f->r[f->n - 1].off + f->r[f->n - 1].size == f->top) {
        int64_t off = f->r[f->n - 1].off;
        f->n--;
        f->top = off + size;
        return off;
    }
    int64_t off = f->top;
    f->top += size;
    return off;
}

static void give(freelist *f, int64_t off, int64_t size)
{
    int32_t i = 0;
    while (i < f->n && f->r[i].off < off) i++;
    memmove(&f->r[i + 1], &f->r[i], sizeof(range) * (size_t)(f->n - i));
    f->r[i] = (range){off, size};
    f->n++;
    if (i + 1 < f->n && f->r[i].off + f->r[i].size == f->r[i + 1].off) { /* merge with the next */
        f->r[i].size += f->r[i + 1].size;
        memmove(&f->r[i + 1], &f->r[i + 2], sizeof(range) * (size_t)(f->n - i - 2));
        f->n--;
    }
    if (i > 0 && f->r[i - 1].off + f->r[i - 1].size == f->r[i].off) { /* and the previous */
        f->r[i - 1].size += f->r[i].size;
        memmove(&f->r[i], &f->r[i + 1], sizeof(range) * (size_t)(f->n - i - 1));
        f->n--;
    }
}

static int64_t aligned_bytes(const tc_graph *g, int32_t v)
{
    int64_t b = tc_graph_val_bytes(g, v);
    return (b + TC_GPLAN_ALIGN - 1) / TC_GPLAN_ALIGN * TC_GPLAN_ALIGN;
}

/* ---- a second placement: biggest buffers first ---------------------------------------------- */

/* One arena buffer: a value's bytes, or a chain of in-place values sharing them, with the
 * positions it is live at (closed: a buffer dying at p and one made at p differ). */
typedef struct pbuf {
    int64_t size, off;
    int32_t start, end, id;
} pbuf;

static int by_size_desc(const void *x, const void *y)
{
    const pbuf *a = x, *b = y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->start != b->start ? (a->start < b->start ? -1 : 1) : (a->id < b->id ? -1 : a->id > b->id);
}

static int by_offset(const void *x, const void *y)
{
    const pbuf *a = *(pbuf *const *)x, *b = *(pbuf *const *)y;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Greedy by size (TensorFlow Lite's arena planner): buffers biggest first, each at the
 * lowest offset where it meets no placed buffer live at the same time. For the LSTM LM of
 * `make bench` it packs the activations kept for backward into 1.6 MB less than the
 * in-order free list, whose ranges fragment as buffers of many sizes die out of order.
 * Quadratic in the buffers, so large graphs skip it. Returns the arena size, or -1. */
enum { BY_SIZE_MAX_BUFFERS = 16384 };

static int64_t place_by_size(pbuf *b, int32_t nb, pbuf **tmp)
{
    qsort(b, (size_t)nb, sizeof *b, by_size_desc);
    int64_t top = 0;
    for (int32_t i = 0; i < nb; i++) {
        int32_t nc = 0;
        for (int32_t j = 0; j < i; j++)
            if (b[j].start <= b[i].end && b[i].start <= b[j].end) tmp[nc++] = &b[j];
        qsort(tmp, (size_t)nc, sizeof *tmp, by_offset);
        int64_t off = 0;
        for (int32_t k = 0; k < nc && off + b[i].size > tmp[k]->off; k++)
            if (tmp[k]->off + tmp[k]->size > off) off = tmp[k]->off + tmp[k]->size;
        b[i].off = off;
        if (off + b[i].size > top) top = off + b[i].size;
    }
    return top;
}

/* Cats built in place: a cat whose slices are contiguous runs of its result (all dims before
 * the cat dim have size 1) and whose inputs are arena values of their own gets its inputs
 * placed inside its result, so the kernel that makes an input writes its slice and the cat
 * has nothing left to do (TC_GN_CAT_PLACED: the executor skips it). A recurrent net's
 * per-step outputs are the case: before, the steps' outputs and their cat were both live.
 * Not for values a planned in-place node reuses or overwrites, views, or a value in two
 * cats. host[v] = the cat result v lives in (-1: none), at hoff[v] bytes. */
static int32_t place_cats(tc_graph *g, const tc_gplan_info *a, int32_t *host, int64_t *hoff, uint8_t *touched)
{
    int32_t nn = g->nnodes, nv = g->nvals, ncats = 0;
    for (int32_t v = 0; v < nv; v++) host[v] = -1, hoff[v] = 0, touched[v] = 0;
    for (int32_t n = 0; n < nn; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (a->pos[n] < 0 || !(nd->flags & TC_GN_INPLACE) || nd->inplace < 0 || nd->inplace >= nd->nin) continue;
        if (nd->in[nd->inplace] >= 0) touched[nd->in[nd->inplace]] = 1;
        if (nd->out[0] >= 0) touched[nd->out[0]] = 1;
    }
    for (int32_t n = 0; n < nn; n++) {
        tc_gnode *nd = &g->nodes[n];
        nd->flags &= ~(uint32_t)TC_GN_CAT_PLACED;
        if (nd->op != TC_OP_CAT || a->pos[n] < 0 || nd->group >= 0 || nd->nout < 1 || nd->nin < 1) continue;
        int32_t v = nd->out[0];
        const tc_gval *x = v >= 0 ? &g->vals[v] : NULL;
        if (!x || a->bind[v] != TC_GB_ARENA || touched[v] || x->ndim < 1) continue;
        int64_t dim = nd->p.i[0] < 0 ? nd->p.i[0] + x->ndim : nd->p.i[0];
        bool ok = dim >= 0 && dim < x->ndim;
        for (int64_t d = 0; ok && d < dim; d++) ok = x->size[d] == 1;
        int64_t total = 0;
        for (int i = 0; ok && i < nd->nin; i++) {
            int32_t u = nd->in[i];
            ok = u >= 0 && u != v && a->bind[u] == TC_GB_ARENA && g->vals[u].view_of < 0 && !touched[u] &&
                 host[u] < 0 && g->vals[u].dtype == x->dtype;
            for (int j = 0; ok && j < i; j++) ok = nd->in[j] != u;
            if (ok) total += tc_graph_val_bytes(g, u);
        }
        if (!ok || total != tc_graph_val_bytes(g, v)) continue;
        int64_t off = 0;
        for (int i = 0; i < nd->nin; i++) {
            int32_t u = nd->in[i];
            host[u] = v, hoff[u] = off;
            off += tc_graph_val_bytes(g, u);
        }
        nd->flags |= TC_GN_CAT_PLACED;
        ncats++;
    }
    return ncats;
}

/* The plan again, biggest buffers first, with cats built in place: kept when cats were
 * placed (their copies and double lives are gone) or when it is smaller than the in-order
 * plan. */
static tc_status replan(tc_graph *g, const tc_gplan_info *a, const int32_t *run_start, const int32_t *run,
                        int32_t *ncats)
{
    int32_t nn = g->nnodes, nv = g->nvals;
    int32_t *host = malloc(sizeof(int32_t) * (size_t)(nv + 1)), *bufof = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    int64_t *hoff = malloc(sizeof(int64_t) * (size_t)(nv + 1));
    uint8_t *touched = malloc((size_t)nv + 1);
    pbuf *bufs = malloc(sizeof(pbuf) * (size_t)(nv + 1));
    pbuf **conflicts = malloc(sizeof(pbuf *) * (size_t)(nv + 1));
    int64_t *offs = malloc(sizeof(int64_t) * (size_t)(nv + 1));
    *ncats = 0;
    if (!host || !bufof || !hoff || !touched || !bufs || !conflicts || !offs) {
        free(host), free(bufof), free(hoff), free(touched), free(bufs), free(conflicts), free(offs);
        return tc_set_error(TC_ERR_MEMORY, "memplan: out of memory for %d values", (int)nv);
    }
    *ncats = place_cats(g, a, host, hoff, touched);
    /* the outermost cat each value lives in, and where in it */
    for (int32_t v = 0; v < nv; v++) {
        bufof[v] = -1;
        int32_t r = v;
        int64_t off = 0;
        for (int k = 0; host[r] >= 0 && k < nv; k++) off += hoff[r], r = host[r];
        host[v] = r, hoff[v] = off;
    }
    int32_t nb = 0;
    for (int32_t p = 0; p < nn; p++)
        for (int32_t i = run_start[p]; i < run_start[p + 1]; i++) {
            const tc_gnode *nd = &g->nodes[run[i]];
            for (int o = 0; o < nd->nout; o++) {
                int32_t v = nd->out[o];
                if (v < 0 || a->bind[v] != TC_GB_ARENA) continue;
                int32_t r = host[v];
                if (o == 0 && (nd->flags & TC_GN_INPLACE)) r = host[nd->in[nd->inplace]], hoff[v] = 0;
                if (bufof[r] < 0) {
                    bufof[r] = nb;
                    bufs[nb] = (pbuf){.size = aligned_bytes(g, r), .start = p, .end = a->end[r], .id = nb};
                    nb++;
                }
                pbuf *b = &bufs[bufof[r]];
                if (b->start > p) b->start = p;
                if (b->end < a->end[v]) b->end = a->end[v];
                bufof[v] = bufof[r];
            }
        }
    int64_t top = nb <= BY_SIZE_MAX_BUFFERS ? place_by_size(bufs, nb, conflicts) : -1;
    if (top >= 0 && (*ncats > 0 || top < g->planned_bytes)) {
        for (int32_t i = 0; i < nb; i++) offs[bufs[i].id] = bufs[i].off;
        for (int32_t v = 0; v < nv; v++)
            if (a->bind[v] == TC_GB_ARENA && bufof[v] >= 0) g->vals[v].offset = offs[bufof[v]] + hoff[v];
        g->planned_bytes = top;
    } else {
        for (int32_t n = 0; n < nn; n++) g->nodes[n].flags &= ~(uint32_t)TC_GN_CAT_PLACED;
        *ncats = 0;
    }
    free(host), free(bufof), free(hoff), free(touched), free(bufs), free(conflicts), free(offs);
    return TC_OK;
}

/* ---- the pass ------------------------------------------------------------------------------ */

/* Keeps node n's TC_GN_INPLACE only where it is still valid: both buffers in the arena,
 * the same size, and the input's last reader is n's position. */
static bool inplace_valid(const tc_graph *g, const tc_gplan_info *a, int32_t n)
{
    const tc_gnode *nd = &g->nodes[n];
    if (nd->inplace < 0 || nd->inplace >= nd->nin || nd->nout < 1) return false;
    int32_t u = nd->in[nd->inplace], o = nd->out[0];
    return u >= 0 && o >= 0 && a->bind[u] == TC_GB_ARENA && a->bind[o] == TC_GB_ARENA &&
           a->end[u] == a->pos[n] && aligned_bytes(g, u) == aligned_bytes(g, o);
}

tc_status tc_pass_memplan(tc_graph *g)
{
    tc_graph_fix_view_roots(g);
    tc_gplan_info a;
    TRY(tc_gplan_analyse(g, &a));
    int32_t nn = g->nnodes, nv = g->nvals;
    /* positions -> the nodes running there and the values dying there (counting sort) */
    int32_t *run_start = calloc((size_t)nn + 2, sizeof(int32_t)), *run = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    int32_t *die_start = calloc((size_t)nn + 2, sizeof(int32_t)), *die = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    uint8_t *moved = calloc((size_t)nv + 1, 1);
    freelist f = {malloc(sizeof(range) * (size_t)(nv + 1)), 0, 0};
    if (!run_start || !run || !die_start || !die || !moved || !f.r) {
        free(run_start), free(run), free(die_start), free(die), free(moved), free(f.r);
        tc_gplan_info_free(&a);
        return tc_set_error(TC_ERR_MEMORY, "memplan: out of memory for %d values", (int)nv);
    }
    for (int32_t n = 0; n < nn; n++)
        if (a.pos[n] >= 0) run_start[a.pos[n] + 1]++;
    for (int32_t v = 0; v < nv; v++)
        if (a.bind[v] == TC_GB_ARENA && a.end[v] < nn) die_start[a.end[v] + 1]++;
    for (int32_t p = 0; p <= nn; p++) run_start[p + 1] += run_start[p], die_start[p + 1] += die_start[p];
    {
        int32_t *fill = calloc((size_t)nn + 1, sizeof(int32_t)), *dfill = calloc((size_t)nn + 1, sizeof(int32_t));
        if (!fill || !dfill) {
            free(fill), free(dfill);
            free(run_start), free(run), free(die_start), free(die), free(moved), free(f.r);
            tc_gplan_info_free(&a);
            return tc_set_error(TC_ERR_MEMORY, "memplan: out of memory");
        }
        for (int32_t n = 0; n < nn; n++)
            if (a.pos[n] >= 0) run[run_start[a.pos[n]] + fill[a.pos[n]]++] = n;
        for (int32_t v = 0; v < nv; v++)
            if (a.bind[v] == TC_GB_ARENA && a.end[v] < nn) die[die_start[a.end[v]] + dfill[a.end[v]]++] = v;
        free(fill), free(dfill);
    }

    int64_t unplanned = 0;
    int32_t nbuf = 0, ninplace = 0;
    for (int32_t v = 0; v < nv; v++)
        if (g->vals[v].offset != TC_GOFF_WRITEBACK || a.bind[v] != TC_GB_WRITEBACK) g->vals[v].offset = TC_GOFF_NONE;
    for (int32_t p = 0; p < nn; p++) {
        for (int32_t i = run_start[p]; i < run_start[p + 1]; i++) {
            tc_gnode *nd = &g->nodes[run[i]];
            if ((nd->flags & TC_GN_INPLACE) && !inplace_valid(g, &a, run[i])) nd->flags &= ~(uint32_t)TC_GN_INPLACE;
            for (int o = 0; o < nd->nout; o++) {
                int32_t v = nd->out[o];
                if (v < 0 || a.bind[v] != TC_GB_ARENA) continue;
                int64_t size = aligned_bytes(g, v);
                unplanned += size, nbuf++;
                if (o == 0 && (nd->flags & TC_GN_INPLACE)) {
                    int32_t u = nd->in[nd->inplace];
                    g->vals[v].offset = g->vals[u].offset;
                    moved[u] = 1, ninplace++;
                } else {
                    g->vals[v].offset = size ? take(&f, size) : 0;
                }
            }
        }
        for (int32_t i = die_start[p]; i < die_start[p + 1]; i++) {
            int32_t v = die[i];
            int64_t size = aligned_bytes(g, v);
            if (!moved[v] && size) give(&f, g->vals[v].offset, size);
        }
    }
    g->planned_bytes = f.top;
    int32_t ncats = 0;
    tc_status st2 = replan(g, &a, run_start, run, &ncats);
    if (st2) {
        free(run_start), free(run), free(die_start), free(die), free(moved), free(f.r);
        tc_gplan_info_free(&a);
        return st2;
    }
    g->unplanned_bytes = unplanned;
    free(run_start), free(run), free(die_start), free(die), free(moved), free(f.r);
    tc_gplan_info_free(&a);

    tc_gpass_stat st = {.pass = "memplan", .bytes_planned = g->planned_bytes, .bytes_unplanned = unplanned};
    st.nodes_before = st.nodes_after = tc_graph_live_nodes(g);
    snprintf(st.note, sizeof st.note, "%d buffers in the arena, %d reused in place, %d cats built in place", (int)nbuf,
             (int)ninplace, (int)ncats);
    return tc_graph_add_stat(g, &st);
}
