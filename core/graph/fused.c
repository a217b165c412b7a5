/* fused.c -- CPU evaluation of a fused elementwise group (groups come from fuse.c).
 *
 * The group's iteration space is its members' common shape, walked flat in row-major
 * order and cut into blocks of a few thousand elements. For each block every member runs
 * its own eager loop function (tc_cpu_ew_loop: the same formula code, dtype and
 * parameters as eager mode, so results are bitwise the same) on scratch slots that stay in
 * L1/L2; only the group's outputs are written to memory. Inputs from outside are read in
 * place when they are contiguous at the iteration shape, as one element when they hold
 * one, and otherwise gathered per block through their broadcast strides.
 *
 * Scratch: each thread's part of the work keeps its slots in one array on its stack (no
 * allocation per call). Slots are shared by values whose lifetimes do not overlap, so a
 * chain of any length needs two. Group outputs stay in their slot until the block ends
 * and are copied out then; the last member writes straight into its output. Writing only
 * after every member has read the block makes an output that takes the buffer of a
 * same-shape input (an in-place plan) safe.
 *
 * A trailing sum/mean folds the last value block by block exactly as reduce.c folds the
 * materialised tensor: the same fixed segments (whole rows, or chunks of 16384 elements /
 * at most 256 per row for full reductions and a few long rows), eight double lanes per
 * segment merged in order, segments combined in order. So the result is bitwise eager's,
 * whatever the thread count.
 */
#include "fuse.h"
#include "../cpu/loops.h"
#include "graph.h"
#include <ctype.h>

/* Per-thread scratch budget and the block length. On the 8-op chain over 16M floats (two
 * f32 slots, one thread) blocks of 1024 to 16384 elements all ran in 150-200 ms of CPU
 * time, within the noise of a shared machine: the chain is bound by its tanh and exp, not
 * by memory, once intermediates stay in cache. 4096 keeps such a chain's slots (32 KB) in
 * L1; the stack array bounds what one block may take (64 slots of doubles: 192 elements). */
#define SCRATCH_BYTES (96 * 1024)
#define BLOCK_MAX 4096
#define NSLOTS (TC_FUSE_MAX_MEMBERS + TC_FUSE_MAX_INS)
/* reduce.c's geometry, reproduced so a fused fold splits where the eager one does */
#define LANES 8
#define SPLIT_CHUNK 16384
#define SPLIT_MAX 256
#define SPLIT_ROWS 16

enum { IN_FLAT, IN_SCALAR, IN_GATHER };
enum { OP_SLOT, OP_IN, OP_OUT };

typedef struct opnd {
    int16_t kind, idx; /* OP_SLOT: slot number; OP_IN: input; OP_OUT: output */
} opnd;

/* An operand's byte strides over the flat iteration space, dims merged where it allows. */
typedef struct walk {
    int nd;
    int64_t size[TC_MAX_DIMS], st[TC_MAX_DIMS];
} walk;

typedef struct fin {
    const char *base;
    int64_t es;
    int mode, slot;
    walk w;
} fin;

typedef struct fout {
    char *base;
    int64_t es;
    int slot; /* -1: written directly by its member */
} fout;

typedef struct fstep {
    tc_loop_fn fn;
    double s0, s1;
    int nargs; /* output + inputs */
    opnd a[4];
    int64_t es[4];
} fstep;

typedef struct fplan {
    int nsteps, nins, nouts, nslots;
    fstep step[TC_FUSE_MAX_MEMBERS];
    fin in[TC_FUSE_MAX_INS];
    fout out[TC_FUSE_MAX_MEMBERS];
    int64_t n, block, slot_bytes, grain;
    /* trailing reduction over segments: rows of L elements, each cut into nc chunks */
    bool reduce, mean, split;
    int rdt, odt, rslot;
    char *rout;
    int64_t L, rows, chunk, nc, nseg;
    double *part; /* split: one partial per segment */
} fplan;

/* ---- planning ------------------------------------------------------------------------------- */

static bool broadcasts_to(const tc_tensor *t, int nd, const int64_t *sz)
{
    if (t->ndim > nd) return false;
    for (int d = 0; d < t->ndim; d++) {
        int64_t a = t->size[t->ndim - 1 - d], b = sz[nd - 1 - d];
        if (a != b && a != 1) return false;
    }
    return true;
}

/* t's byte strides at the iteration shape, size-1 dims dropped, mergeable dims merged. */
static void make_walk(const tc_tensor *t, int nd, const int64_t *sz, walk *w)
{
    int64_t st[TC_MAX_DIMS], es = tc_elsize(t->dtype);
    tc_broadcast_strides(t, nd, sz, st);
    w->nd = 0;
    for (int d = 0; d < nd; d++) {
        if (sz[d] == 1) continue;
        if (w->nd > 0 && w->st[w->nd - 1] == st[d] * es * sz[d]) {
            w->size[w->nd - 1] *= sz[d];
            w->st[w->nd - 1] = st[d] * es;
            continue;
        }
        w->size[w->nd] = sz[d], w->st[w->nd] = st[d] * es;
        w->nd++;
    }
    if (w->nd == 0) w->nd = 1, w->size[0] = 1, w->st[0] = 0;
}

/* Whether a formula calls a function (exp, tanh, ...): such a member costs several
 * nanoseconds an element, which lowers the grain at which the pool pays off. */
static bool calls_function(const char *f)
{
    for (const char *p = f; p && *p; p++)
        if (*p == '(' && p > f && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) return true;
    return false;
}

static int member_step(const tc_graph *g, const tc_ggroup *grp, int nsteps, int32_t v)
{
    for (int i = 0; i < nsteps; i++)
        if (g->nodes[grp->nodes[i]].out[0] == v) return i;
    return -1;
}

static int find_in(const tc_ggroup *grp, int32_t v)
{
    for (int k = 0; k < grp->nins; k++)
        if (grp->ins[k] == v) return k;
    return -1;
}

#define BAD(...) tc_set_error(TC_ERR_ARG, "fused group: " __VA_ARGS__)

/* Slots: values held in scratch are member results (except a directly written one) and
 * gathered inputs. Each lives from the step that makes it to its last reader; outputs and
 * the reduction's input live to the end of the block. */
static void assign_slots(fplan *pl, const int *first_in, const int *last_in, const int *last_val, bool *held)
{
    int holder[NSLOTS]; /* step after which the slot is free again; -2: free */
    int nslots = 0;
    for (int s = 0; s < NSLOTS; s++) holder[s] = -2;
    for (int i = 0; i < pl->nsteps; i++) {
        /* free what died at earlier steps */
        for (int s = 0; s < nslots; s++)
            if (holder[s] >= 0 && holder[s] < i) holder[s] = -2;
        for (int k = 0; k < pl->nins; k++) {
            if (pl->in[k].mode != IN_GATHER || first_in[k] != i) continue;
            int s = 0;
            while (holder[s] != -2) s++;
            holder[s] = last_in[k], pl->in[k].slot = s;
            if (s + 1 > nslots) nslots = s + 1;
        }
        if (!held[i]) continue;
        int s = 0;
        while (holder[s] != -2) s++;
        holder[s] = last_val[i];
        if (s + 1 > nslots) nslots = s + 1;
        pl->step[i].a[0] = (opnd){OP_SLOT, (int16_t)s};
    }
    pl->nslots = nslots;
}

static tc_status plan_group(const tc_graph *g, const tc_ggroup *grp, tc_tensor *const *rt, fplan *pl)
{
    if (grp->nnodes < 1 || grp->nnodes > TC_FUSE_MAX_MEMBERS || grp->nins > TC_FUSE_MAX_INS || grp->nouts < 1 ||
        grp->nouts > TC_FUSE_MAX_MEMBERS)
        return BAD("%d members, %d inputs, %d outputs is beyond the evaluator's limits", grp->nnodes, grp->nins,
                   grp->nouts);
    /* no memset: the plan is ~9 KB and small groups run often; every field read later is
     * set below */
    pl->nslots = 0, pl->reduce = pl->mean = pl->split = false, pl->part = NULL;
    const tc_gnode *last = &g->nodes[grp->nodes[grp->nnodes - 1]];
    pl->reduce = last->op == TC_OP_SUM || last->op == TC_OP_MEAN;
    pl->nsteps = grp->nnodes - (pl->reduce ? 1 : 0);
    if (pl->nsteps < 1) return BAD("no elementwise member");
    const tc_gval *shape = &g->vals[g->nodes[grp->nodes[0]].out[0]];
    int nd = shape->ndim;
    const int64_t *sz = shape->size;
    pl->n = tc_numel_of(nd, sz);
    pl->nins = grp->nins, pl->nouts = grp->nouts;

    int first_in[TC_FUSE_MAX_INS], last_in[TC_FUSE_MAX_INS], last_val[TC_FUSE_MAX_MEMBERS];
    bool held[TC_FUSE_MAX_MEMBERS];
    for (int k = 0; k < grp->nins; k++) {
        int32_t v = grp->ins[k];
        const tc_tensor *t = v >= 0 && v < g->nvals ? rt[v] : NULL;
        if (!t || !t->storage) return BAD("input %%%d is not bound", v);
        if (t->dtype != g->vals[v].dtype || !broadcasts_to(t, nd, sz)) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
            return BAD("input %%%d is %s %s, not %s broadcastable to %s", v, tc_dtype_name((tc_dtype)t->dtype),
                       tc_shape_str(t, b1, sizeof b1), tc_dtype_name((tc_dtype)g->vals[v].dtype),
                       tc_sizes_str(nd, sz, b2, sizeof b2));
        }
        fin *f = &pl->in[k];
        f->base = tc_base(t), f->es = tc_elsize(t->dtype), f->slot = -1;
        int64_t tn = tc_tensor_numel(t);
        f->mode = tn == 1 ? IN_SCALAR : tn == pl->n && tc_tensor_is_contiguous(t) ? IN_FLAT : IN_GATHER;
        if (f->mode == IN_GATHER) make_walk(t, nd, sz, &f->w);
        first_in[k] = -1, last_in[k] = -1;
    }
    for (int o = 0; o < grp->nouts; o++) {
        int32_t v = grp->outs[o];
        tc_tensor *t = v >= 0 && v < g->nvals ? rt[v] : NULL;
        if (!t || !t->storage) return BAD("output %%%d has no tensor", v);
        if (t->dtype != g->vals[v].dtype || tc_tensor_numel(t) != tc_numel_of(g->vals[v].ndim, g->vals[v].size) ||
            !tc_tensor_is_contiguous(t))
            return BAD("output %%%d must be a contiguous %s tensor of %lld elements", v,
                       tc_dtype_name((tc_dtype)g->vals[v].dtype),
                       (long long)tc_numel_of(g->vals[v].ndim, g->vals[v].size));
        pl->out[o] = (fout){tc_base(t), tc_elsize(t->dtype), -1};
    }

    int64_t maxes = 1;
    double cost = 0;
    for (int i = 0; i < pl->nsteps; i++) {
        const tc_gnode *n = &g->nodes[grp->nodes[i]];
        const tc_opinfo *info = n->op >= 0 && n->op < TC_OP_COUNT ? tc_op_info((tc_op)n->op) : NULL;
        const tc_gval *ov = n->out[0] >= 0 ? &g->vals[n->out[0]] : NULL;
        if (!info || n->nout != 1 || !ov || n->nin < 1 || n->nin > 3 || ov->ndim != nd ||
            memcmp(ov->size, sz, sizeof(int64_t) * (size_t)nd) != 0)
            return BAD("member %d (%s) is not an elementwise op of the group's shape", i, tc_graph_op_name(n->op));
        fstep *s = &pl->step[i];
        int idt = info->kind == TC_KIND_SELECT ? ov->dtype : g->vals[n->in[0]].dtype;
        s->fn = info->kind == TC_KIND_EW || info->kind == TC_KIND_CONVERT || info->kind == TC_KIND_SELECT
                    ? tc_cpu_ew_loop((tc_op)n->op, idt, ov->dtype)
                    : NULL;
        if (!s->fn)
            return BAD("no CPU loop for member %s on %s", info->name, tc_dtype_name((tc_dtype)idt));
        s->s0 = info->kind == TC_KIND_EW ? n->p.s[0] : 0, s->s1 = info->kind == TC_KIND_EW ? n->p.s[1] : 0;
        cost += info->kind == TC_KIND_EW && calls_function(info->formula) ? 4 : 1;
        s->nargs = 1 + n->nin;
        s->es[0] = tc_elsize(ov->dtype);
        last_val[i] = i;
        int o = -1;
        for (int k = 0; k < grp->nouts && o < 0; k++)
            if (grp->outs[k] == n->out[0]) o = k;
        held[i] = !(o >= 0 && i == grp->nnodes - 1); /* the last member writes its output */
        if (!held[i]) s->a[0] = (opnd){OP_OUT, (int16_t)o};
        if (held[i] && o >= 0) last_val[i] = pl->nsteps; /* copied out at the block's end */
        if (held[i] && s->es[0] > maxes) maxes = s->es[0];
        for (int j = 0; j < n->nin; j++) {
            int32_t v = n->in[j];
            int m = v >= 0 ? member_step(g, grp, i, v) : -1, k = m < 0 && v >= 0 ? find_in(grp, v) : -1;
            if (m < 0 && k < 0) return BAD("member %s reads %%%d, neither a member's value nor an input", info->name, v);
            s->es[1 + j] = tc_elsize(g->vals[v].dtype);
            if (m >= 0) {
                s->a[1 + j] = (opnd){OP_SLOT, (int16_t)m}; /* a step number until slots are known */
                if (last_val[m] < i) last_val[m] = i;
            } else {
                s->a[1 + j] = (opnd){OP_IN, (int16_t)k};
                if (first_in[k] < 0) first_in[k] = i;
                last_in[k] = i;
                if (pl->in[k].mode == IN_GATHER && pl->in[k].es > maxes) maxes = pl->in[k].es;
            }
        }
    }
    if (pl->reduce) {
        int m = last->nin == 1 ? member_step(g, grp, pl->nsteps, last->in[0]) : -1;
        if (m < 0 || !held[m]) return BAD("%s does not reduce a member's value", tc_graph_op_name(last->op));
        last_val[m] = pl->nsteps;
    }
    assign_slots(pl, first_in, last_in, last_val, held);
    /* member inputs named steps; turn them into those steps' slots */
    for (int i = 0; i < pl->nsteps; i++)
        for (int j = 1; j < pl->step[i].nargs; j++)
            if (pl->step[i].a[j].kind == OP_SLOT) pl->step[i].a[j] = pl->step[pl->step[i].a[j].idx].a[0];
    for (int o = 0; o < grp->nouts; o++) {
        int m = member_step(g, grp, pl->nsteps, grp->outs[o]);
        if (m >= 0 && held[m]) pl->out[o].slot = pl->step[m].a[0].idx;
    }

    int64_t per = pl->nslots ? SCRATCH_BYTES / (pl->nslots * maxes) : BLOCK_MAX;
    pl->block = per < BLOCK_MAX ? per / 64 * 64 : BLOCK_MAX;
    if (pl->block < 64) pl->block = 64;
    pl->slot_bytes = pl->block * maxes;
    int64_t grain = (int64_t)(TC_EW_GRAIN_CHEAP / (cost > 1 ? cost : 1));
    pl->grain = grain < pl->block ? pl->block : grain;

    if (pl->reduce) {
        const tc_gval *x = &g->vals[last->in[0]];
        int32_t rv = last->out[0];
        int o = -1;
        for (int k = 0; k < grp->nouts && o < 0; k++)
            if (grp->outs[k] == rv) o = k;
        if (o < 0) return BAD("the result of %s is not an output", tc_graph_op_name(last->op));
        pl->rslot = pl->step[member_step(g, grp, pl->nsteps, last->in[0])].a[0].idx;
        pl->rdt = x->dtype, pl->odt = g->vals[rv].dtype, pl->rout = pl->out[o].base;
        pl->mean = last->op == TC_OP_MEAN;
        bool all = last->p.i[0] == -1 || nd == 0;
        if (!all && last->p.i[0] != nd - 1) return BAD("%s is not over all elements or the last dim", tc_graph_op_name(last->op));
        if (pl->rdt != pl->odt || (pl->rdt != TC_F32 && pl->rdt != TC_F64))
            return BAD("%s of %s is not a float reduction", tc_graph_op_name(last->op), tc_dtype_name((tc_dtype)pl->rdt));
        pl->L = all ? pl->n : sz[nd - 1];
        pl->rows = all ? 1 : pl->L ? pl->n / pl->L : tc_numel_of(nd - 1, sz);
        pl->split = all || (pl->rows < SPLIT_ROWS && pl->L >= 2 * TC_PARALLEL_GRAIN);
        pl->chunk = pl->L;
        if (pl->split) {
            pl->chunk = SPLIT_CHUNK;
            if ((pl->L + pl->chunk - 1) / pl->chunk > SPLIT_MAX) pl->chunk = (pl->L + SPLIT_MAX - 1) / SPLIT_MAX;
        }
        pl->nc = pl->L ? (pl->L + pl->chunk - 1) / pl->chunk : 0;
        pl->nseg = pl->rows * pl->nc;
    }
    return TC_OK;
}

/* ---- one block ------------------------------------------------------------------------------- */

/* Copies n elements of es bytes, source stride st (0: one element repeated). */
static void copy_run(char *dst, const char *src, int64_t n, int64_t st, int64_t es)
{
    if (st == es) {
        memcpy(dst, src, (size_t)(n * es));
        return;
    }
    switch (es) {
    case 4: {
        uint32_t *restrict d = (uint32_t *)dst;
        if (st == 0) { /* a broadcast element: a fill the compiler vectorises */
            uint32_t v;
            memcpy(&v, src, 4);
            for (int64_t i = 0; i < n; i++) d[i] = v;
            break;
        }
        for (int64_t i = 0; i < n; i++) memcpy(&d[i], src + i * st, 4);
        break;
    }
    case 8: {
        uint64_t *d = (uint64_t *)dst;
        for (int64_t i = 0; i < n; i++) memcpy(&d[i], src + i * st, 8);
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * es, src + i * st, (size_t)es);
        break;
    }
}

/* Elements [b, b+n) of a broadcast or strided input, packed into dst. */
static void gather(const fin *f, int64_t b, int64_t n, char *dst)
{
    const walk *w = &f->w;
    int nd = w->nd, in = nd - 1;
    int64_t idx[TC_MAX_DIMS], rem = b;
    const char *p = f->base;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % w->size[d];
        rem /= w->size[d];
        p += idx[d] * w->st[d];
    }
    while (n > 0) {
        int64_t len = w->size[in] - idx[in];
        if (len > n) len = n;
        copy_run(dst, p, len, w->st[in], f->es);
        dst += len * f->es, n -= len;
        if (n == 0) break;
        p += len * w->st[in];
        idx[in] += len;
        for (int d = in; d > 0 && idx[d] == w->size[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            p += w->st[d - 1] - w->size[d] * w->st[d];
        }
    }
}

/* The fold of one reduction segment in progress: reduce.c's eight lanes (element k of the
 * segment goes to lane k % 8 below the last multiple of 8, the rest to lane 0). */
typedef struct rstate {
    double l[LANES];
    int64_t seg, segb, sege, k, main_end;
} rstate;

static void seg_start(const fplan *pl, rstate *r, int64_t s)
{
    int64_t row = s / pl->nc, c = s % pl->nc, end = (c + 1) * pl->chunk < pl->L ? (c + 1) * pl->chunk : pl->L;
    r->seg = s, r->segb = row * pl->L + c * pl->chunk, r->sege = row * pl->L + end;
    r->k = 0, r->main_end = (r->sege - r->segb) / LANES * LANES;
    for (int j = 0; j < LANES; j++) r->l[j] = 0.0;
}

#define FOLD_PIECE(NAME, T)                                                                 \
    static void NAME(rstate *r, const char *p, int64_t n)                                   \
    {                                                                                       \
        const T *x = (const T *)p;                                                          \
        int64_t i = 0, k = r->k;                                                            \
        for (; i < n && k < r->main_end && (k % LANES); i++, k++) r->l[k % LANES] += (double)x[i]; \
        int64_t body = (n - i < r->main_end - k ? n - i : r->main_end - k) / LANES * LANES;  \
        double l[LANES];                                                                    \
        memcpy(l, r->l, sizeof l);                                                          \
        for (int64_t q = 0; q < body; q += LANES)                                           \
            for (int j = 0; j < LANES; j++) l[j] += (double)x[i + q + j];                   \
        memcpy(r->l, l, sizeof l);                                                          \
        i += body, k += body;                                                               \
        for (; i < n && k < r->main_end; i++, k++) r->l[k % LANES] += (double)x[i];         \
        for (; i < n; i++, k++) r->l[0] += (double)x[i];                                    \
        r->k = k;                                                                           \
    }
FOLD_PIECE(fold_f32, float)
FOLD_PIECE(fold_f64, double)

static void put_result(const fplan *pl, int64_t row, double d)
{
    if (pl->mean) d /= (double)pl->L;
    if (pl->odt == TC_F32) ((float *)pl->rout)[row] = (float)d;
    else ((double *)pl->rout)[row] = d;
}

static void seg_finish(const fplan *pl, const rstate *r)
{
    double d = 0.0;
    for (int j = 0; j < LANES; j++) d = d + r->l[j];
    if (pl->split) pl->part[r->seg] = d;
    else put_result(pl, r->seg, d);
}

/* Folds the reduction input's block [b, e) into the segments it covers. */
static void fold_block(const fplan *pl, rstate *r, const char *x, int64_t b, int64_t e)
{
    int64_t es = tc_elsize(pl->rdt);
    for (int64_t pos = b; pos < e;) {
        int64_t stop = e < r->sege ? e : r->sege;
        if (pl->rdt == TC_F32) fold_f32(r, x + (pos - b) * es, stop - pos);
        else fold_f64(r, x + (pos - b) * es, stop - pos);
        pos = stop;
        if (pos == r->sege) {
            seg_finish(pl, r);
            if (r->seg + 1 < pl->nseg) seg_start(pl, r, r->seg + 1);
        }
    }
}

static void run_block(const fplan *pl, char *scratch, int64_t b, int64_t e, rstate *r)
{
    int64_t n = e - b;
    bool gathered[TC_FUSE_MAX_INS] = {false};
    for (int i = 0; i < pl->nsteps; i++) {
        const fstep *s = &pl->step[i];
        char *pp[4];
        int64_t st[4];
        for (int a = 0; a < s->nargs; a++) {
            opnd o = s->a[a];
            st[a] = s->es[a];
            if (o.kind == OP_SLOT) {
                pp[a] = scratch + o.idx * pl->slot_bytes;
            } else if (o.kind == OP_OUT) {
                pp[a] = pl->out[o.idx].base + b * pl->out[o.idx].es;
            } else {
                const fin *f = &pl->in[o.idx];
                if (f->mode == IN_FLAT) {
                    pp[a] = (char *)f->base + b * f->es;
                } else if (f->mode == IN_SCALAR) {
                    pp[a] = (char *)f->base, st[a] = 0;
                } else {
                    pp[a] = scratch + f->slot * pl->slot_bytes;
                    if (!gathered[o.idx]) gather(f, b, n, pp[a]), gathered[o.idx] = true;
                }
            }
        }
        s->fn(pp, st, n, s->s0, s->s1);
    }
    if (pl->reduce) fold_block(pl, r, scratch + pl->rslot * pl->slot_bytes, b, e);
    for (int o = 0; o < pl->nouts; o++) {
        const fout *f = &pl->out[o];
        if (f->slot >= 0) memcpy(f->base + b * f->es, scratch + f->slot * pl->slot_bytes, (size_t)(n * f->es));
    }
}

/* ---- the parallel drivers ------------------------------------------------------------------- */

static void ew_range(void *ctx, int64_t begin, int64_t end)
{
    const fplan *pl = ctx;
    _Alignas(64) char scratch[SCRATCH_BYTES];
    for (int64_t b = begin; b < end; b += pl->block) run_block(pl, scratch, b, b + pl->block < end ? b + pl->block : end, NULL);
}

/* Segments [s0, s1) are one contiguous flat span; blocks start at its beginning. */
static void seg_range(void *ctx, int64_t s0, int64_t s1)
{
    const fplan *pl = ctx;
    _Alignas(64) char scratch[SCRATCH_BYTES];
    rstate r, last;
    seg_start(pl, &last, s1 - 1);
    seg_start(pl, &r, s0);
    int64_t begin = r.segb, end = last.sege;
    for (int64_t b = begin; b < end; b += pl->block) run_block(pl, scratch, b, b + pl->block < end ? b + pl->block : end, &r);
}

tc_status tc_fused_eval(const tc_graph *g, const tc_ggroup *grp, tc_tensor *const *rt)
{
    if (!g || !grp || !rt) return tc_set_error(TC_ERR_ARG, "fused group: NULL argument");
    fplan pl;
    TRY(plan_group(g, grp, rt, &pl));
    if (!pl.reduce) {
        if (pl.n > 0) tc_parallel_for(pl.n, pl.grain, ew_range, &pl);
        return TC_OK;
    }
    double part[SPLIT_ROWS * SPLIT_MAX];
    pl.part = part;
    if (pl.n == 0) { /* empty rows: sum 0, mean NaN, as reduce.c */
        for (int64_t r = 0; r < pl.rows; r++) put_result(&pl, r, 0.0);
        return TC_OK;
    }
    tc_parallel_for(pl.nseg, (pl.grain + pl.chunk - 1) / pl.chunk, seg_range, &pl);
    if (pl.split)
        for (int64_t r = 0; r < pl.rows; r++) {
            double d = 0.0;
            for (int64_t c = 0; c < pl.nc; c++) d += part[r * pl.nc + c];
            put_result(&pl, r, d);
        }
    return TC_OK;
}
