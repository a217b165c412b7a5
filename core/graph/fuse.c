/* fuse.c -- elementwise fusion: groups of elementwise nodes (and one reduction at the end)
 * that the executor runs as one unit, block by block (fused.c), so values made and used
 * inside a group never travel to memory.
 *
 * What joins a group:
 *   members    elementwise ops with a float computing dtype (f32/f64; comparisons give
 *              uint8 masks), copy between f32/f64/uint8/bool, where(mask, a, b); in a
 *              graph on a CUDA device f16/bf16 too (see member_float). Every
 *              member's result has the group's iteration shape; inputs from outside may
 *              broadcast to it. Random nodes never join (TC_GN_RANDOM), nor a node
 *              reading a value on another device than its result's (a download or an
 *              upload: a group's code reads its inputs' memory directly, which a CPU
 *              loop cannot do for device memory nor a device kernel for host memory;
 *              a 0-dim CPU constant read on the device is the exception, exec_cuda.c
 *              copies it there once).
 *   reduction  sum or mean over all elements or along the last dim of a member's value may
 *              join as the last member; the group is closed after it.
 * Legality: a group runs at the position of its last member. That is only valid when no
 * node outside the group, placed between its first and last member, reads a member's value
 * (it would run before the value exists). The pass walks the nodes in order keeping groups
 * "open"; the moment an outside node reads a value of an open group that group is closed,
 * so later nodes never join it. A node reading values of several open groups of its shape
 * merges them (none of them read the others: that read would have closed the reader's
 * source). Values a group reads from outside are its inputs; member values read by any
 * other node, by a graph output or by a write-back are its outputs (the last member's value
 * always is). A group of one node is no group.
 *
 * For the executor and the memory plan the group behaves as ONE node at the position of its
 * last member, reading grp->ins there and writing grp->outs there; a member value that is
 * not in grp->outs needs no buffer (fused.c keeps it in per-thread scratch). An output may
 * take the buffer of a contiguous input of the same element size and the full iteration
 * size (fused.c reads each block of every input before writing that block of any output). No pass after
 * this one may compact the graph: tc_graph_compact drops the groups.
 */
#include "fuse.h"
#include "../cpu/loops.h"
#include "graph.h"
#include <stdio.h>
#include <stdlib.h>

typedef struct tgroup {
    int32_t nodes[TC_FUSE_MAX_MEMBERS], nnodes;
    int32_t ins[TC_FUSE_MAX_INS], nins;
    int32_t ndim;
    int64_t size[TC_MAX_DIMS];
    bool open, reduced, gone; /* gone: merged into another group */
} tgroup;

typedef struct fstate {
    tc_graph *g;
    tgroup *gr;
    int32_t ngr;
    int32_t *owner; /* value id -> temporary group whose member made it, or -1 */
} fstate;

static bool is_half(int dt) { return dt == TC_F16 || dt == TC_BF16; }
/* The float dtypes members compute in: f32/f64, and f16/bf16 in a graph on a CUDA device.
 * The CPU's fused loops (fused.c) have none for halves; a device group runs as one
 * generated kernel (cuda_codegen.c, which rounds each member's half result as eager mode
 * rounds each op's, so the numbers are eager's) or member by member (exec_cuda.c). */
static bool member_float(const tc_graph *g, int dt)
{
    return dt == TC_F32 || dt == TC_F64 || (g->device != TC_CPU && is_half(dt));
}
static bool is_fusable_dtype(const tc_graph *g, int dt) { return member_float(g, dt) || dt == TC_U8 || dt == TC_BOOL; }

/* Whether shape (nd, sz) broadcasts to (ond, osz) without changing it. */
static bool broadcasts_to(int nd, const int64_t *sz, int ond, const int64_t *osz)
{
    if (nd > ond) return false;
    for (int d = 0; d < nd; d++) {
        int64_t a = sz[nd - 1 - d], b = osz[ond - 1 - d];
        if (a != b && a != 1) return false;
    }
    return true;
}

static bool same_shape(const tc_gval *v, int nd, const int64_t *sz)
{
    return v->ndim == nd && memcmp(v->size, sz, sizeof(int64_t) * (size_t)nd) == 0;
}

/* Whether every input of n lives where n's result does (or is a 0-dim CPU value, which a
 * device group gets as a device copy): a group reads its inputs' memory directly. */
static bool inputs_on_result_device(const tc_graph *g, const tc_gnode *n)
{
    int32_t dev = g->vals[n->out[0]].device;
    for (int i = 0; i < n->nin; i++) {
        const tc_gval *x = &g->vals[n->in[i]];
        if (x->device != dev && !(x->device == TC_CPU && x->ndim == 0 && dev != TC_CPU)) return false;
    }
    return true;
}

/* An elementwise node that may be a member (its output defines or must match the shape). */
static bool ew_member(const tc_graph *g, const tc_gnode *n)
{
    if ((n->flags & (TC_GN_RANDOM | TC_GN_DEAD)) || n->op < 0 || n->op >= TC_OP_COUNT || n->nout != 1 || n->out[0] < 0)
        return false;
    const tc_opinfo *info = tc_op_info((tc_op)n->op);
    const tc_gval *o = &g->vals[n->out[0]];
    if (tc_numel_of(o->ndim, o->size) == 0) return false;
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] < 0) return false;
    if (!inputs_on_result_device(g, n)) return false;
    for (int i = 0; i < n->nin; i++)
        if (!broadcasts_to(g->vals[n->in[i]].ndim, g->vals[n->in[i]].size, o->ndim, o->size)) return false;
    switch (info->kind) {
    case TC_KIND_EW: {
        if (info->nin < 1 || n->nin != info->nin || !(info->flags & TC_OPF_FLT)) return false;
        int dt = g->vals[n->in[0]].dtype;
        if (!member_float(g, dt)) return false;
        for (int i = 1; i < n->nin; i++)
            if (g->vals[n->in[i]].dtype != dt) return false;
        if (o->dtype != ((info->flags & TC_OPF_CMP) ? TC_U8 : dt)) return false;
        int ldt = is_half(dt) ? TC_F32 : dt; /* a half op computes by the float formula */
        return tc_cpu_ew_loop((tc_op)n->op, ldt, o->dtype == dt ? ldt : o->dtype) != NULL;
    }
    case TC_KIND_CONVERT:
        return n->nin == 1 && is_fusable_dtype(g, g->vals[n->in[0]].dtype) && is_fusable_dtype(g, o->dtype);
    case TC_KIND_SELECT: {
        if (n->nin != 3) return false;
        int m = g->vals[n->in[0]].dtype, a = g->vals[n->in[1]].dtype, b = g->vals[n->in[2]].dtype;
        return (m == TC_U8 || m == TC_BOOL) && member_float(g, a) && a == b && o->dtype == a;
    }
    default: return false;
    }
}

/* sum/mean of a float value over all elements or along its last dim. */
static bool tail_reduction(const tc_graph *g, const tc_gnode *n)
{
    if ((n->flags & (TC_GN_RANDOM | TC_GN_DEAD)) || (n->op != TC_OP_SUM && n->op != TC_OP_MEAN) || n->nin != 1 ||
        n->nout != 1 || n->in[0] < 0 || n->out[0] < 0 || !inputs_on_result_device(g, n))
        return false;
    const tc_gval *x = &g->vals[n->in[0]];
    int64_t dim = n->p.i[0];
    bool all = dim == -1 || x->ndim == 0, last = x->ndim > 0 && dim == x->ndim - 1;
    return member_float(g, x->dtype) && g->vals[n->out[0]].dtype == x->dtype && (all || last);
}

/* Adds v to the group's outside inputs unless present; false when the list is full. */
static bool add_in(tgroup *t, int32_t v)
{
    for (int i = 0; i < t->nins; i++)
        if (t->ins[i] == v) return true;
    if (t->nins == TC_FUSE_MAX_INS) return false;
    t->ins[t->nins++] = v;
    return true;
}

/* Whether node n can join open group t: room, and its outside inputs fit. */
static bool fits(const fstate *s, const tgroup *t, const tc_gnode *n, int gi)
{
    if (t->nnodes >= TC_FUSE_MAX_MEMBERS) return false;
    int extra = 0;
    for (int i = 0; i < n->nin; i++) {
        int32_t v = n->in[i];
        if (s->owner[v] == gi) continue;
        bool have = false;
        for (int k = 0; k < t->nins && !have; k++) have = t->ins[k] == v;
        for (int k = 0; k < i && !have; k++) have = n->in[k] == v;
        extra += !have;
    }
    return t->nins + extra <= TC_FUSE_MAX_INS;
}

static void add_member(fstate *s, int gi, int32_t node)
{
    tgroup *t = &s->gr[gi];
    const tc_gnode *n = &s->g->nodes[node];
    for (int i = 0; i < n->nin; i++)
        if (s->owner[n->in[i]] != gi) add_in(t, n->in[i]); /* room checked by fits() */
    t->nodes[t->nnodes++] = node;
    s->owner[n->out[0]] = gi;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Merges open group b into a when both fit in one; returns whether it did. */
static bool merge(fstate *s, int a, int b)
{
    tgroup *ta = &s->gr[a], *tb = &s->gr[b];
    if (ta->nnodes + tb->nnodes > TC_FUSE_MAX_MEMBERS) return false;
    int32_t ins[TC_FUSE_MAX_INS];
    int nins = ta->nins;
    memcpy(ins, ta->ins, sizeof(int32_t) * (size_t)nins);
    for (int i = 0; i < tb->nins; i++) {
        bool have = false;
        for (int k = 0; k < nins && !have; k++) have = ins[k] == tb->ins[i];
        if (have) continue;
        if (nins == TC_FUSE_MAX_INS) return false;
        ins[nins++] = tb->ins[i];
    }
    memcpy(ta->ins, ins, sizeof(int32_t) * (size_t)nins);
    ta->nins = nins;
    for (int i = 0; i < tb->nnodes; i++) {
        ta->nodes[ta->nnodes++] = tb->nodes[i];
        s->owner[s->g->nodes[tb->nodes[i]].out[0]] = a;
    }
    qsort(ta->nodes, (size_t)ta->nnodes, sizeof(int32_t), cmp_i32);
    tb->gone = true, tb->open = false, tb->nnodes = 0;
    return true;
}

static tc_status new_group(fstate *s, int32_t node, int *gi)
{
    const tc_gval *o = &s->g->vals[s->g->nodes[node].out[0]];
    tgroup *t = &s->gr[s->ngr];
    memset(t, 0, sizeof *t);
    t->open = true;
    t->ndim = o->ndim;
    memcpy(t->size, o->size, sizeof t->size);
    *gi = s->ngr++;
    add_member(s, *gi, node);
    return TC_OK;
}

/* One node of the walk: join, merge, close, or start a group. */
static tc_status visit(fstate *s, int32_t node)
{
    tc_graph *g = s->g;
    const tc_gnode *n = &g->nodes[node];
    bool member = ew_member(g, n), reduce = !member && tail_reduction(g, n);
    const tc_gval *o = n->nout > 0 && n->out[0] >= 0 ? &g->vals[n->out[0]] : NULL;
    int cand = -1;
    if (member) {
        for (int i = 0; i < n->nin && cand < 0; i++) {
            int gi = s->owner[n->in[i]];
            if (gi >= 0 && s->gr[gi].open && !s->gr[gi].reduced && same_shape(o, s->gr[gi].ndim, s->gr[gi].size) &&
                fits(s, &s->gr[gi], n, gi))
                cand = gi;
        }
        /* other open groups of the same shape read by n merge into cand */
        for (int i = 0; i < n->nin && cand >= 0; i++) {
            int gi = s->owner[n->in[i]];
            if (gi >= 0 && gi != cand && s->gr[gi].open && same_shape(o, s->gr[gi].ndim, s->gr[gi].size))
                merge(s, cand, gi);
        }
        if (cand >= 0 && !fits(s, &s->gr[cand], n, cand)) cand = -1; /* a merge took the room */
    } else if (reduce) {
        int gi = s->owner[n->in[0]];
        if (gi >= 0 && s->gr[gi].open && !s->gr[gi].reduced && s->gr[gi].nnodes < TC_FUSE_MAX_MEMBERS) cand = gi;
    }
    /* every other group n reads from is read from outside: it is complete */
    for (int i = 0; i < n->nin; i++) {
        int32_t v = n->in[i];
        if (v < 0) continue;
        int gi = s->owner[v];
        if (gi >= 0 && gi != cand) s->gr[gi].open = false;
    }
    if (cand >= 0) {
        add_member(s, cand, node);
        if (reduce) s->gr[cand].reduced = true, s->gr[cand].open = false;
        if (s->gr[cand].nnodes == TC_FUSE_MAX_MEMBERS) s->gr[cand].open = false;
        return TC_OK;
    }
    if (member) {
        int gi;
        TRY(new_group(s, node, &gi));
    }
    return TC_OK;
}

/* Writes temporary group t as g->groups[id]: members, inputs, outputs; tags the nodes. */
static tc_status emit(fstate *s, const tgroup *t, int id, const int32_t *inner_uses)
{
    tc_graph *g = s->g;
    tc_ggroup *gg = &g->groups[id];
    memset(gg, 0, sizeof *gg);
    gg->nodes = tc_graph_alloc(g, sizeof(int32_t) * (size_t)t->nnodes);
    gg->ins = tc_graph_alloc(g, sizeof(int32_t) * (size_t)(t->nins ? t->nins : 1));
    gg->outs = tc_graph_alloc(g, sizeof(int32_t) * (size_t)t->nnodes);
    if (!gg->nodes || !gg->ins || !gg->outs) return TC_ERR_MEMORY;
    memcpy(gg->nodes, t->nodes, sizeof(int32_t) * (size_t)t->nnodes);
    gg->nnodes = t->nnodes;
    memcpy(gg->ins, t->ins, sizeof(int32_t) * (size_t)t->nins);
    gg->nins = t->nins;
    for (int i = 0; i < t->nnodes; i++) {
        int32_t v = g->nodes[t->nodes[i]].out[0];
        bool last = i == t->nnodes - 1;
        if (last || g->vals[v].nuses > inner_uses[v]) gg->outs[gg->nouts++] = v;
    }
    return TC_OK;
}

tc_status tc_pass_fuse(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "fuse: NULL graph");
    /* a second run starts over */
    for (int n = 0; n < g->nnodes; n++) g->nodes[n].group = -1;
    g->ngroups = 0;
    tc_graph_count_uses(g);
    int live = tc_graph_live_nodes(g);
    fstate s = {.g = g};
    s.owner = malloc(sizeof(int32_t) * (size_t)(g->nvals + 1));
    s.gr = malloc(sizeof(tgroup) * (size_t)(g->nnodes + 1));
    int32_t *inner = calloc((size_t)g->nvals + 1, sizeof(int32_t));
    tc_status st = TC_OK;
    if (!s.owner || !s.gr || !inner) {
        st = tc_set_error(TC_ERR_MEMORY, "fuse: out of memory for %d nodes", g->nnodes);
        goto done;
    }
    for (int v = 0; v < g->nvals; v++) s.owner[v] = -1;
    for (int n = 0; n < g->nnodes && st == TC_OK; n++)
        if (!(g->nodes[n].flags & TC_GN_DEAD)) st = visit(&s, n);
    if (st) goto done;

    /* reads of member values by members of the same group, to tell outputs apart */
    int ngroups = 0, nmembers = 0;
    for (int i = 0; i < s.ngr; i++) {
        const tgroup *t = &s.gr[i];
        if (t->gone || t->nnodes < 2) continue;
        ngroups++, nmembers += t->nnodes;
        for (int k = 0; k < t->nnodes; k++) {
            const tc_gnode *n = &g->nodes[t->nodes[k]];
            for (int j = 0; j < n->nin; j++)
                if (s.owner[n->in[j]] == i) inner[n->in[j]]++;
        }
    }
    if (ngroups > g->capgroups) {
        tc_ggroup *p = realloc(g->groups, sizeof(tc_ggroup) * (size_t)ngroups);
        if (!p) {
            st = tc_set_error(TC_ERR_MEMORY, "fuse: out of memory for %d groups", ngroups);
            goto done;
        }
        g->groups = p, g->capgroups = ngroups;
    }
    int id = 0;
    for (int i = 0; i < s.ngr && st == TC_OK; i++) {
        const tgroup *t = &s.gr[i];
        if (t->gone || t->nnodes < 2) continue;
        st = emit(&s, t, id, inner);
        if (st == TC_OK)
            for (int k = 0; k < t->nnodes; k++) g->nodes[t->nodes[k]].group = id;
        id++;
    }
    if (st) {
        for (int n = 0; n < g->nnodes; n++) g->nodes[n].group = -1;
        goto done;
    }
    g->ngroups = ngroups;
    tc_gpass_stat stat = {.pass = "fuse", .nodes_before = live, .nodes_after = live, .groups = ngroups};
    snprintf(stat.note, sizeof stat.note, "%d groups (%d nodes)", ngroups, nmembers);
    st = tc_graph_add_stat(g, &stat);
done:
    free(s.owner), free(s.gr), free(inner);
    return st;
}
