/* simplify.c -- algebraic simplification with eager's exact results: rewrites that give
 * the same dtype, the same sizes and the same values (bitwise, but for the sign of a zero
 * sum: see x+0, and the rounding of the matmul sums) as running the ops would.
 *
 *   x*1, 1*x, x/1 -> x        the operand is known to hold only ones: a constant (every
 *   x+0, 0+x, x-0 -> x        element checked), a fill, or a view / copy of one; scalars
 *                             travel as 0-dim constants broadcast against x. add/sub compute
 *                             a +- s0*b: x+0 needs s0 finite, 0+x needs s0 == 1.
 *   x*0 -> zeros              integer types only: for floats inf*0 and NaN*0 are NaN.
 *   neg(neg(x)) -> x
 *   transpose(transpose(x)) with the same two dims, permute(permute(x)) composing to the
 *   identity -> x (the same header: sizes, strides, offset).
 *   identity views -> x       transpose(d, d), the identity permutation, narrow over a whole
 *                             dim, expand / squeeze that change nothing, and a view of a
 *                             contiguous x to its own sizes.
 *   reshape chains            view / squeeze / unsqueeze of view / squeeze / unsqueeze ... of
 *                             a contiguous root become one view of the root.
 *   copy(x) -> x              same dtype and sizes, x contiguous (a later view op needs the
 *                             strides copy would give).
 *   cat(0, a, 0) + cat(b, 0)  -> cat(b, a, 0): sums of cats along one dim whose non-zero
 *                             pieces do not overlap. Inside a trace, the gradient of each
 *                             narrow/select of a sequence is a full-size cat of zeros and
 *                             the slice's gradient, summed one by one: O(T^2) bytes for T
 *                             steps, O(T) after this rule.
 *   x + mm(A, B) -> addmm     and x + mm(A, B)^T -> addmm(x, B^T, A^T), or addmm(Q, A, B)^T
 *                             when x = Q^T: one gemm that adds x (see matmul_sum; not
 *                             bitwise: gemm rounds its own way). The nodes this appends are
 *                             placed by tc_graph_compact (TC_GN_PLACE).
 * A rule only applies when the result's dtype and sizes equal the value that replaces it
 * (broadcasting may make x+0 larger than x: left alone).
 *
 * NOTE: x+0 with x = -0.0 gives +0.0 in eager and -0.0 here; they compare equal and no
 * float formula in ops.def tells them apart except 1/x's sign of infinity.
 *
 * Replacing a value by an existing one can make a graph output an INPUT, EXTERNAL or
 * CONST value, or the same value twice: the executor hands out fresh results. Two hazards
 * are avoided here: (1) a graph output or write-back source is never replaced by (a view
 * of) an external that is written back, since write-backs run after the nodes and the
 * output would read the updated tensor (or depend on write-back order); (2) a value read
 * (directly or through views) by as_strided, which addresses its input's storage at
 * absolute offsets, is only replaced by a value over the same buffer. And a value that a
 * view op reshapes (directly or through views) is only replaced by a contiguous value or
 * its own header: x*1 -> x with x transposed would make a later view fail.
 *
 * Nodes left unread by the rewrites are removed (not random ones: see dce.c); the report
 * note counts each rule ("x*1: 2, transpose^2: 1").
 */
#include "graph.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { R_MUL1, R_DIV1, R_ADD0, R_SUB0, R_MUL0, R_NEG2, R_TR2, R_PERM2, R_VIEWID, R_CHAIN, R_COPY, R_CATADD,
       R_ADDMM, R_ADDMM_T, R_COUNT };
static const char *const rule_name[R_COUNT] = {"x*1",         "x/1",       "x+0",     "x-0",
                                               "x*0 (int)",   "neg^2",     "transpose^2", "permute^2",
                                               "identity view", "reshape chain", "copy of contiguous",
                                               "sum of disjoint cats", "x+mm", "x+mm^T"};

typedef struct sctx {
    tc_graph *g;
    int32_t nv0;      /* values before the pass (newer ones: constants and rewrite nodes) */
    int32_t cap;      /* values the arrays below have room for (they grow with the graph) */
    int32_t *rep;     /* value -> the value that replaces it */
    int32_t *uses;    /* readers at the start, plus those taken over by replacement */
    int8_t *uni;      /* 0: all zeros, 1: all ones, -1: neither, -2: not yet known */
    bool *contig;     /* known contiguous (canonical strides, size-1 dims aside) */
    bool *strided;    /* read by as_strided, directly or through views */
    bool *reshaped;   /* read by view (reshape), directly or through views: strides matter */
    bool *exposed;    /* a graph output or a write-back source */
    bool *wb_target;  /* an external that a write-back updates */
    int count[R_COUNT];
} sctx;

static bool is_view_op(int32_t op)
{
    return op >= 0 && op < TC_OP_COUNT && tc_op_info((tc_op)op)->kind == TC_KIND_VIEW;
}

static bool is_reshape(int32_t op) { return op == TC_OP_VIEW || op == TC_OP_SQUEEZE || op == TC_OP_UNSQUEEZE; }

/* The live node producing v, or NULL. */
static tc_gnode *producer(const sctx *c, int32_t v)
{
    if (v < 0 || v >= c->g->nvals || c->g->vals[v].kind != TC_GV_OP) return NULL;
    tc_gnode *nd = &c->g->nodes[c->g->vals[v].producer];
    return (nd->flags & TC_GN_DEAD) ? NULL : nd;
}

static bool same_type(const tc_graph *g, int32_t a, int32_t b)
{
    const tc_gval *x = &g->vals[a], *y = &g->vals[b];
    return x->dtype == y->dtype && x->ndim == y->ndim &&
           memcmp(x->size, y->size, sizeof(int64_t) * (size_t)x->ndim) == 0;
}

static bool same_sizes(const tc_gval *x, const tc_gval *y)
{
    return x->ndim == y->ndim && memcmp(x->size, y->size, sizeof(int64_t) * (size_t)x->ndim) == 0;
}

static int wrap(int64_t d, int ndim)
{
    int64_t n = ndim > 0 ? ndim : 1;
    d = d < 0 ? d + n : d;
    return d < 0 || d >= n ? -1 : (int)d;
}

/* Grows one per-value array from c->cap to cap entries (zeroing the new ones). */
static bool regrow(void **arr, size_t el, int32_t old, int32_t cap)
{
    char *p = realloc(*arr, el * (size_t)(cap + 1));
    if (!p) return false;
    memset(p + el * (size_t)old, 0, el * (size_t)(cap + 1 - old));
    *arr = p;
    return true;
}

/* Makes the per-value arrays cover the values the pass added since (constants, the nodes
 * of the matmul rules), knowing nothing of them yet: contiguous when a contiguous
 * constant (the caller marks op results). */
static tc_status cover(sctx *c, int32_t from)
{
    int32_t nv = c->g->nvals;
    if (nv > c->cap) {
        int32_t cap = nv > 2 * c->cap ? nv : 2 * c->cap;
        bool ok = regrow((void **)&c->rep, sizeof *c->rep, c->cap, cap) &&
                  regrow((void **)&c->uses, sizeof *c->uses, c->cap, cap) &&
                  regrow((void **)&c->uni, sizeof *c->uni, c->cap, cap) &&
                  regrow((void **)&c->contig, sizeof *c->contig, c->cap, cap) &&
                  regrow((void **)&c->strided, sizeof *c->strided, c->cap, cap) &&
                  regrow((void **)&c->reshaped, sizeof *c->reshaped, c->cap, cap) &&
                  regrow((void **)&c->exposed, sizeof *c->exposed, c->cap, cap) &&
                  regrow((void **)&c->wb_target, sizeof *c->wb_target, c->cap, cap);
        if (!ok) return tc_set_error(TC_ERR_MEMORY, "simplify: out of memory for %d values", (int)nv);
        c->cap = cap;
    }
    for (int32_t v = from; v < nv; v++) {
        const tc_gval *x = &c->g->vals[v];
        c->rep[v] = v, c->uni[v] = -2, c->uses[v] = 0;
        c->contig[v] = x->kind == TC_GV_CONST && x->t && tc_tensor_is_contiguous(x->t);
        c->strided[v] = c->reshaped[v] = c->exposed[v] = c->wb_target[v] = false;
    }
    return TC_OK;
}

/* ---- what is known about values --------------------------------------------------------- */

/* 0 when every element of t is zero (either sign), 1 when every one is one, else -1. */
static int tensor_uniform(const tc_tensor *t)
{
    int64_t n = tc_tensor_numel(t);
    if (n <= 0 || !t->storage || t->storage->device != TC_CPU) return -1;
    const char *base = tc_base(t);
    int64_t el = tc_elsize(t->dtype), idx[TC_MAX_DIMS] = {0}, off = 0;
    double first = tc_load_as_double(t->dtype, base);
    if (first != 0 && first != 1) return -1;
    for (int64_t k = 0; k < n; k++) {
        if (tc_load_as_double(t->dtype, base + off * el) != first) return -1;
        for (int d = t->ndim - 1; d >= 0; d--) { /* next index, row-major */
            off += t->stride[d];
            if (++idx[d] < t->size[d]) break;
            off -= t->stride[d] * t->size[d];
            idx[d] = 0;
        }
    }
    return (int)first;
}

/* Whether every element of v is 0 (returns 0), 1 (returns 1), or neither / unknown (-1). */
static int uniform(sctx *c, int32_t v)
{
    if (v < 0) return -1;
    if (c->uni[v] != -2) return c->uni[v];
    const tc_gval *x = &c->g->vals[v];
    int u = -1;
    if (x->kind == TC_GV_CONST && x->t) {
        u = tensor_uniform(x->t);
    } else if (x->kind == TC_GV_OP) {
        const tc_gnode *nd = producer(c, v);
        if (nd && nd->op == TC_OP_FILL && nd->nin == 0 && (nd->p.s[0] == 0 || nd->p.s[0] == 1))
            u = (int)nd->p.s[0];
        else if (nd && nd->nin >= 1 && nd->in[0] >= 0 && v == nd->out[0] &&
                 ((is_view_op(nd->op) && nd->op != TC_OP_AS_STRIDED) || nd->op == TC_OP_COPY) &&
                 tc_graph_val_bytes(c->g, v) > 0)
            u = uniform(c, nd->in[0]); /* views and conversions of zeros / ones (as_strided may
                                          reach storage outside its input's elements) */
    }
    c->uni[v] = (int8_t)u;
    return u;
}

static bool contig_of(const sctx *c, int32_t v) { return c->contig[v]; }

static bool identity_view(const sctx *c, const tc_gnode *nd);

/* Whether view node nd (inputs already redirected) gives a contiguous result. */
static bool view_contig(const sctx *c, const tc_gnode *nd)
{
    int32_t in = nd->in[0];
    if (in < 0 || !contig_of(c, in)) return false;
    const tc_gval *x = &c->g->vals[in];
    switch (nd->op) {
    case TC_OP_VIEW:
    case TC_OP_SQUEEZE:
    case TC_OP_UNSQUEEZE: return true;
    case TC_OP_NARROW:
    case TC_OP_SELECT: { /* contiguous when every dim before the cut has size 1 */
        int d = wrap(nd->p.i[0], x->ndim);
        if (d < 0) return false;
        for (int k = 0; k < d; k++)
            if (x->size[k] != 1) return false;
        return true;
    }
    default: return identity_view(c, nd);
    }
}

/* Whether view node nd returns its input's header unchanged. */
static bool identity_view(const sctx *c, const tc_gnode *nd)
{
    int32_t in = nd->in[0];
    if (in < 0) return false;
    const tc_gval *x = &c->g->vals[in], *y = &c->g->vals[nd->out[0]];
    const tc_params *p = &nd->p;
    switch (nd->op) {
    case TC_OP_TRANSPOSE: return wrap(p->i[0], x->ndim) >= 0 && wrap(p->i[0], x->ndim) == wrap(p->i[1], x->ndim);
    case TC_OP_PERMUTE:
        if (p->nshape != x->ndim) return false;
        for (int k = 0; k < x->ndim; k++)
            if (wrap(p->shape[k], x->ndim) != k) return false;
        return true;
    case TC_OP_NARROW: {
        int d = wrap(p->i[0], x->ndim);
        return x->ndim > 0 && d >= 0 && p->i[1] == 0 && p->i[2] == x->size[d];
    }
    case TC_OP_EXPAND:
    case TC_OP_SQUEEZE: return same_sizes(x, y);
    case TC_OP_VIEW: return same_sizes(x, y) && contig_of(c, in);
    default: return false;
    }
}

/* ---- rewriting ------------------------------------------------------------------------- */

static int32_t root_of(const tc_graph *g, int32_t v)
{
    return g->vals[v].view_of >= 0 ? g->vals[v].view_of : v;
}

/* Redirects old's readers to nv (see the banner for the two hazards). same_buffer: nv is
 * old's header over the same storage and offset. */
static bool replace(sctx *c, int32_t old, int32_t nv, bool same_buffer, int rule)
{
    if (old < 0 || old >= c->g->nvals || nv < 0) return false;
    if (!same_buffer && c->strided[old]) return false;
    if (!same_buffer && c->reshaped[old] && !contig_of(c, nv)) return false; /* view would fail */
    if (c->exposed[old]) {
        int32_t r = root_of(c->g, nv);
        if (c->wb_target[r] && r != root_of(c->g, old)) return false;
    }
    c->rep[old] = nv;
    /* nv takes over old's readers */
    c->strided[nv] |= c->strided[old];
    c->reshaped[nv] |= c->reshaped[old];
    c->exposed[nv] |= c->exposed[old];
    c->uses[nv] += c->uses[old];
    c->count[rule]++;
    return true;
}

/* Integer x*0: the result is zeros of the result's type (an operand already shaped so, or
 * a new constant). */
static tc_status zeros_for(sctx *c, int32_t out, int32_t z)
{
    if (c->strided[out]) return TC_OK;
    if (same_type(c->g, out, z)) {
        replace(c, out, z, false, R_MUL0);
        return TC_OK;
    }
    int64_t bytes = tc_graph_val_bytes(c->g, out);
    if (bytes > ((int64_t)16 << 20)) return TC_OK;
    const tc_gval *x = &c->g->vals[out];
    tc_tensor *t;
    TRY(tc_tensor_new((tc_dtype)x->dtype, x->ndim, x->size, &t));
    if (bytes > 0) memset(tc_base(t), 0, (size_t)bytes);
    int32_t id;
    tc_status s = tc_graph_add_const(c->g, t, &id);
    tc_tensor_release(t);
    if (s == TC_OK) s = cover(c, id);
    if (s == TC_OK) replace(c, out, id, false, R_MUL0);
    return s;
}

static bool is_int(int dt) { return !tc_dtype_is_float((tc_dtype)dt) && dt != TC_BOOL; }

/* The arithmetic rules on node nd (inputs redirected). */
static tc_status arith(sctx *c, tc_gnode *nd)
{
    if (nd->nin != 2 || nd->in[0] < 0 || nd->in[1] < 0) return TC_OK;
    int32_t a = nd->in[0], b = nd->in[1], out = nd->out[0];
    switch (nd->op) {
    case TC_OP_MUL:
        if (uniform(c, b) == 1 && same_type(c->g, out, a)) replace(c, out, a, false, R_MUL1);
        else if (uniform(c, a) == 1 && same_type(c->g, out, b)) replace(c, out, b, false, R_MUL1);
        else if (is_int(c->g->vals[out].dtype) && uniform(c, b) == 0) return zeros_for(c, out, b);
        else if (is_int(c->g->vals[out].dtype) && uniform(c, a) == 0) return zeros_for(c, out, a);
        break;
    case TC_OP_DIV:
        if (uniform(c, b) == 1 && same_type(c->g, out, a)) replace(c, out, a, false, R_DIV1);
        break;
    case TC_OP_ADD: /* a + s0*b */
        if (isfinite(nd->p.s[0]) && uniform(c, b) == 0 && same_type(c->g, out, a)) replace(c, out, a, false, R_ADD0);
        else if (nd->p.s[0] == 1 && uniform(c, a) == 0 && same_type(c->g, out, b)) replace(c, out, b, false, R_ADD0);
        break;
    case TC_OP_SUB: /* a - s0*b */
        if (isfinite(nd->p.s[0]) && uniform(c, b) == 0 && same_type(c->g, out, a)) replace(c, out, a, false, R_SUB0);
        break;
    default: break;
    }
    return TC_OK;
}

/* The rules on view nodes and neg / copy. */
static void structural(sctx *c, tc_gnode *nd)
{
    if (nd->nin < 1 || nd->in[0] < 0) return;
    int32_t in = nd->in[0], out = nd->out[0];
    tc_gnode *m = producer(c, in);
    if (nd->op == TC_OP_NEG && m && m->op == TC_OP_NEG && m->in[0] >= 0) {
        replace(c, out, m->in[0], false, R_NEG2);
        return;
    }
    if (nd->op == TC_OP_COPY) {
        /* (a copy across devices is no identity) */
        if (same_type(c->g, out, in) && contig_of(c, in) && c->g->vals[out].device == c->g->vals[in].device)
            replace(c, out, in, false, R_COPY);
        return;
    }
    if (!is_view_op(nd->op)) return;
    if (identity_view(c, nd)) {
        replace(c, out, in, true, R_VIEWID);
        return;
    }
    int nd_in = c->g->vals[in].ndim;
    if (nd->op == TC_OP_TRANSPOSE && m && m->op == TC_OP_TRANSPOSE && m->in[0] >= 0) {
        int a1 = wrap(m->p.i[0], nd_in), b1 = wrap(m->p.i[1], nd_in);
        int a2 = wrap(nd->p.i[0], nd_in), b2 = wrap(nd->p.i[1], nd_in);
        if (a1 >= 0 && b1 >= 0 && ((a1 == a2 && b1 == b2) || (a1 == b2 && b1 == a2)))
            replace(c, out, m->in[0], true, R_TR2);
        return;
    }
    if (nd->op == TC_OP_PERMUTE && m && m->op == TC_OP_PERMUTE && m->in[0] >= 0 && nd->p.nshape == nd_in &&
        m->p.nshape == nd_in) {
        for (int k = 0; k < nd_in; k++) { /* out dim k is x dim p[q[k]] */
            int q = wrap(nd->p.shape[k], nd_in);
            if (q < 0 || wrap(m->p.shape[q], nd_in) != k) return;
        }
        replace(c, out, m->in[0], true, R_PERM2);
        return;
    }
    if (is_reshape(nd->op) && m && is_reshape(m->op)) {
        int32_t root = m->in[0];
        for (tc_gnode *r = producer(c, root); r && is_reshape(r->op) && r->in[0] >= 0; r = producer(c, root))
            root = r->in[0];
        if (root < 0 || !contig_of(c, root)) return;
        const tc_gval *y = &c->g->vals[out];
        tc_params p = {.nshape = y->ndim};
        memcpy(p.shape, y->size, sizeof(int64_t) * (size_t)y->ndim);
        nd->op = TC_OP_VIEW, nd->in[0] = root, nd->p = p;
        c->count[R_CHAIN]++;
        if (same_sizes(y, &c->g->vals[root])) replace(c, out, root, true, R_VIEWID);
    }
}


/* ---- sums of disjoint cats ------------------------------------------------------------------ */

enum { MAX_PIECES = 512 };
typedef struct piece {
    int64_t lo, hi; /* extent along the cat dim */
    int32_t v;
    bool zero;
} piece;

/* The pieces of v when a cat along dim produced it (empty pieces skipped); -1 otherwise. */
static int cat_pieces(sctx *c, int32_t v, int dim, piece *ps, int cap)
{
    const tc_gnode *nd = producer(c, v);
    const tc_gval *x = &c->g->vals[v];
    if (!nd || nd->op != TC_OP_CAT || wrap(nd->p.i[0], x->ndim) != dim) return -1;
    int64_t at = 0;
    int n = 0;
    for (int i = 0; i < nd->nin; i++) {
        int32_t in = nd->in[i];
        if (in < 0 || c->g->vals[in].ndim != x->ndim || c->g->vals[in].dtype != x->dtype) return -1;
        int64_t len = c->g->vals[in].size[dim];
        if (len == 0) continue;
        if (n == cap) return -1;
        ps[n++] = (piece){at, at + len, in, uniform(c, in) == 0};
        at += len;
    }
    return at == x->size[dim] ? n : -1;
}

static int by_start(const void *a, const void *b)
{
    int64_t x = ((const piece *)a)->lo, y = ((const piece *)b)->lo;
    return x < y ? -1 : x > y;
}

/* A zero value shaped like out with len along dim: a zero piece of the inputs (a and b's
 * pieces, na + nb of them from zs), or a new constant (up to 1 MB; else *id = -1). */
static tc_status zero_piece(sctx *c, int32_t out, int dim, int64_t len, const piece *zs, int nz, int32_t *id)
{
    for (int k = 0; k < nz; k++)
        if (zs[k].zero && zs[k].hi - zs[k].lo == len) return *id = zs[k].v, TC_OK;
    *id = -1;
    const tc_gval *x = &c->g->vals[out];
    if (x->size[dim] > 0 && tc_graph_val_bytes(c->g, out) / x->size[dim] * len > ((int64_t)1 << 20)) return TC_OK;
    int64_t sizes[TC_MAX_DIMS];
    memcpy(sizes, x->size, sizeof sizes);
    sizes[dim] = len;
    tc_tensor *t;
    TRY(tc_tensor_new((tc_dtype)x->dtype, x->ndim, sizes, &t));
    int64_t bytes = tc_tensor_numel(t) * tc_elsize(x->dtype);
    if (bytes > 0) memset(tc_base(t), 0, (size_t)bytes);
    tc_status s = tc_graph_add_const(c->g, t, id);
    tc_tensor_release(t);
    return s ? s : cover(c, *id);
}

/* add(a, b) (s0 = 1, no broadcasting) of two cats along one dim whose non-zero pieces are
 * disjoint becomes one cat of those pieces with zeros between: the node is rewritten in
 * place (its pieces all come before it). */
static tc_status disjoint_cats(sctx *c, tc_gnode *nd)
{
    if (nd->op != TC_OP_ADD || nd->nin != 2 || nd->p.s[0] != 1 || nd->in[0] < 0 || nd->in[1] < 0) return TC_OK;
    int32_t a = nd->in[0], b = nd->in[1], out = nd->out[0];
    if (!same_type(c->g, out, a) || !same_type(c->g, out, b)) return TC_OK;
    const tc_gnode *pa = producer(c, a);
    const tc_gval *y = &c->g->vals[out];
    if (!pa || pa->op != TC_OP_CAT || y->ndim == 0) return TC_OK;
    int dim = wrap(pa->p.i[0], y->ndim);
    piece *all = malloc(sizeof(piece) * 4 * MAX_PIECES);
    if (!all) return tc_set_error(TC_ERR_MEMORY, "simplify: out of memory");
    piece *pb = all + MAX_PIECES, *nz = all + 2 * MAX_PIECES, *res = all + 3 * MAX_PIECES;
    int na = dim < 0 ? -1 : cat_pieces(c, a, dim, all, MAX_PIECES);
    int nb = na < 0 ? -1 : cat_pieces(c, b, dim, pb, MAX_PIECES);
    tc_status s = TC_OK;
    int nn = 0, nr = 0;
    if (nb < 0) goto done;
    for (int k = 0; k < na; k++)
        if (!all[k].zero) nz[nn++] = all[k];
    for (int k = 0; k < nb; k++)
        if (!pb[k].zero) nz[nn++] = pb[k];
    qsort(nz, (size_t)nn, sizeof *nz, by_start);
    for (int k = 0; k + 1 < nn; k++)
        if (nz[k].hi > nz[k + 1].lo) goto done; /* overlapping: a real sum */
    memmove(all + na, pb, sizeof(piece) * (size_t)nb); /* zero pieces of both, for zero_piece */
    int64_t at = 0;
    for (int k = 0; k <= nn && s == TC_OK && nr < MAX_PIECES - 1; k++) {
        int64_t lo = k < nn ? nz[k].lo : y->size[dim];
        if (lo > at) {
            int32_t z;
            s = zero_piece(c, out, dim, lo - at, all, na + nb, &z);
            if (s == TC_OK && z < 0) goto done; /* no zero piece to hand: left as a sum */
            if (s == TC_OK) res[nr++] = (piece){at, lo, z, true};
            at = lo;
        }
        if (k < nn) res[nr++] = nz[k], at = nz[k].hi;
    }
    if (s || at != y->size[dim]) goto done;
    int32_t *ins = tc_graph_alloc(c->g, sizeof(int32_t) * (size_t)nr);
    if (!ins) {
        s = TC_ERR_MEMORY;
        goto done;
    }
    for (int k = 0; k < nr; k++) ins[k] = res[k].v;
    nd->op = TC_OP_CAT, nd->in = ins, nd->nin = nr, nd->flags &= ~(uint32_t)TC_GN_WAS_INPLACE;
    memset(&nd->p, 0, sizeof nd->p);
    nd->p.i[0] = dim;
    c->count[R_CATADD]++;
done:
    free(all);
    return s;
}

/* ---- accumulated matrix products ------------------------------------------------------- */

/* Whether nd swaps the two dims of a matrix (x:t()). */
static bool is_t(const sctx *c, const tc_gnode *nd)
{
    if (!nd || nd->op != TC_OP_TRANSPOSE || nd->nin != 1 || nd->in[0] < 0 || c->g->vals[nd->in[0]].ndim != 2)
        return false;
    int a = wrap(nd->p.i[0], 2), b = wrap(nd->p.i[1], 2);
    return a >= 0 && b >= 0 && a != b;
}

/* v = mm(A, B), or v = transpose(mm(A, B)) (*tr), read by one node only (the product
 * too): then folding it into that node's addmm computes it once, as before. */
static bool lone_product(const sctx *c, int32_t v, int32_t *a, int32_t *b, bool *tr)
{
    const tc_gnode *nd = producer(c, v);
    *tr = is_t(c, nd);
    if (*tr) {
        if (c->uses[v] != 1) return false;
        v = nd->in[0], nd = producer(c, v);
    }
    if (!nd || nd->op != TC_OP_MM || nd->nin != 2 || nd->in[0] < 0 || nd->in[1] < 0 || c->uses[v] != 1) return false;
    *a = nd->in[0], *b = nd->in[1];
    return true;
}

/* Appends node op(in) after the graph's last node, to be placed where its inputs are ready
 * (TC_GN_PLACE); *out its result, of like's dtype with sizes (rows, cols) -- known here, so
 * no shape inference on dummy tensors the size of the operands. */
static tc_status append(sctx *c, tc_op op, const int32_t *in, int nin, const tc_params *p, const char *where,
                        int32_t like, int64_t rows, int64_t cols, int32_t *out)
{
    int32_t nv = c->g->nvals, dts[1] = {c->g->vals[like].dtype}, nds[1] = {2};
    int64_t sz[1][TC_MAX_DIMS] = {{rows, cols}};
    TRY(tc_graph_add_node(c->g, op, in, nin, p, 1, dts, nds, (const int64_t(*)[TC_MAX_DIMS])sz, out));
    tc_gnode *nd = &c->g->nodes[c->g->nnodes - 1];
    nd->flags |= TC_GN_PLACE, nd->where = where;
    TRY(cover(c, nv));
    c->contig[*out] = !is_view_op(op);
    for (int i = 0; i < nin; i++) c->uses[in[i]]++;
    return TC_OK;
}

/* v^T of a matrix v: what a transpose node made v from, else a new transpose view. */
static tc_status transposed(sctx *c, int32_t v, const char *where, int32_t *out)
{
    const tc_gnode *nd = producer(c, v);
    if (is_t(c, nd)) return *out = nd->in[0], TC_OK;
    tc_params p = {0};
    p.i[1] = 1;
    const tc_gval *x = &c->g->vals[v];
    return append(c, TC_OP_TRANSPOSE, &v, 1, &p, where, v, x->size[1], x->size[0], out);
}

/* The sum of a value and a matrix product read only there, as one addmm:
 *   add(X, mm(A, B)) {s0}, add(mm(A, B), X) {s0}, sub(X, mm(A, B)) {s0}
 *     -> addmm(X, A, B) {beta, alpha}: (1, s0), (s0, 1), (1, -s0);
 *   the same with mm(A, B)^T: (AB)^T = B^T A^T, so addmm(X, B^T, A^T) (views; BLAS takes
 *     transposed operands as they are), or when X = Q^T itself, addmm(Q, A, B)^T: a chain
 *     acc = acc + (A_t B_t)^T (the weight gradient of a matmul repeated over time steps,
 *     accumulated) then runs in the products' own layout, and a transpose of the final sum
 *     cancels with the view of it (transpose^2).
 * The sum no longer reads a product result: the in-place pass lets each addmm of a chain
 * write over the previous sum (gemm with beta = 1: how eager accumulates gradients). Only
 * for f32 / f64 (BLAS) without broadcasting of the product, s0 finite and non-zero (addmm
 * never reads what a zero weight multiplies: NaN would not propagate). Rounding: gemm adds
 * X in its own order (within float tolerance of the separate ops, not bitwise). */
static tc_status matmul_sum(sctx *c, int32_t n)
{
    const tc_gnode *nd = &c->g->nodes[n];
    if ((nd->op != TC_OP_ADD && nd->op != TC_OP_SUB) || nd->nin != 2 || nd->in[0] < 0 || nd->in[1] < 0) return TC_OK;
    int32_t out = nd->out[0], x = nd->in[0], pv = nd->in[1], a, b;
    double s0 = nd->p.s[0], beta = 1, alpha = nd->op == TC_OP_SUB ? -s0 : s0;
    int dt = c->g->vals[out].dtype;
    if ((dt != TC_F32 && dt != TC_F64) || !isfinite(s0) || s0 == 0 || c->strided[out]) return TC_OK;
    bool tr;
    if (!lone_product(c, pv, &a, &b, &tr) || !same_type(c->g, out, pv)) {
        if (nd->op != TC_OP_ADD) return TC_OK;
        x = nd->in[1], pv = nd->in[0], beta = s0, alpha = 1; /* out = P + s0 X */
        if (!lone_product(c, pv, &a, &b, &tr) || !same_type(c->g, out, pv)) return TC_OK;
    }
    if (x == pv || c->g->vals[x].dtype != dt) return TC_OK;
    const char *where = nd->where;
    const tc_gnode *xt = producer(c, x);
    int64_t rows = c->g->vals[out].size[0], cols = c->g->vals[out].size[1];
    tc_params p = {0};
    p.s[0] = beta, p.s[1] = alpha;
    int32_t res, m;
    if (tr && is_t(c, xt) && same_type(c->g, out, x) && !c->reshaped[out]) {
        int32_t in[3] = {xt->in[0], a, b};
        TRY(append(c, TC_OP_ADDMM, in, 3, &p, where, out, cols, rows, &m));
        TRY(transposed(c, m, where, &res));
        replace(c, out, res, false, R_ADDMM_T);
    } else {
        int32_t in[3] = {x, a, b};
        if (tr) TRY(transposed(c, b, where, &in[1]));
        if (tr) TRY(transposed(c, a, where, &in[2]));
        TRY(append(c, TC_OP_ADDMM, in, 3, &p, where, out, rows, cols, &res));
        replace(c, out, res, false, tr ? R_ADDMM_T : R_ADDMM);
    }
    return TC_OK; /* not replaced (cannot happen: checked above): the new nodes go unread */
}

/* ---- the pass ----------------------------------------------------------------------------- */

/* Removes nodes whose results the rewrites left unread (backward, so chains go at once):
 * nodes that were read before the pass, and nodes the pass added. */
static int drop_orphans(tc_graph *g, const int32_t *uses_before, int32_t nv0)
{
    tc_graph_count_uses(g);
    int dropped = 0;
    for (int n = g->nnodes - 1; n >= 0; n--) {
        tc_gnode *nd = &g->nodes[n];
        if ((nd->flags & (TC_GN_DEAD | TC_GN_RANDOM)) || nd->op < 0 || nd->op >= TC_OP_COUNT) continue;
        if (tc_op_info((tc_op)nd->op)->kind == TC_KIND_RANDOM) continue;
        bool unread = true, was_read = false;
        for (int o = 0; o < nd->nout; o++) {
            unread &= g->vals[nd->out[o]].nuses == 0;
            was_read |= nd->out[o] >= nv0 || uses_before[nd->out[o]] > 0;
        }
        if (!unread || !was_read) continue;
        nd->flags |= TC_GN_DEAD;
        dropped++;
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0) g->vals[nd->in[i]].nuses--;
    }
    return dropped;
}

tc_status tc_pass_simplify(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "simplify: NULL graph");
    int before = tc_graph_live_nodes(g);
    sctx c = {.g = g, .nv0 = g->nvals};
    int32_t *uses_before = malloc(((size_t)g->nvals + 1) * sizeof *uses_before);
    tc_status s = uses_before ? cover(&c, 0) : tc_set_error(TC_ERR_MEMORY, "simplify: out of memory");
    if (s) goto done;
    tc_graph_count_uses(g);
    for (int v = 0; v < g->nvals; v++) c.uses[v] = uses_before[v] = g->vals[v].nuses;
    for (int i = 0; i < g->noutputs; i++) c.exposed[g->outputs[i]] = true;
    for (int i = 0; i < g->nwb; i++) c.exposed[g->wb_val[i]] = true, c.wb_target[g->wb_ext[i]] = true;
    for (int n = g->nnodes - 1; n >= 0; n--) {
        const tc_gnode *nd = &g->nodes[n];
        if ((nd->flags & TC_GN_DEAD) || nd->nin < 1 || nd->in[0] < 0) continue;
        if (nd->op == TC_OP_AS_STRIDED || (is_view_op(nd->op) && c.strided[nd->out[0]])) c.strided[nd->in[0]] = true;
        if (nd->op == TC_OP_VIEW || (is_view_op(nd->op) && c.reshaped[nd->out[0]])) c.reshaped[nd->in[0]] = true;
    }

    /* only the nodes there at the start are visited: nodes the rules append come after */
    int nnodes = g->nnodes;
    for (int n = 0; n < nnodes && s == TC_OK; n++) {
        tc_gnode *nd = &g->nodes[n]; /* NOTE: appending nodes may move g->nodes */
        if (nd->flags & TC_GN_DEAD) continue;
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0) nd->in[i] = c.rep[nd->in[i]];
        if (nd->op < 0 || nd->op >= TC_OP_COUNT || nd->nout < 1) continue;
        bool view = is_view_op(nd->op);
        for (int o = 0; o < nd->nout; o++) c.contig[nd->out[o]] = view ? view_contig(&c, nd) : true;
        if (nd->flags & TC_GN_RANDOM) continue;
        int32_t out = nd->out[0];
        structural(&c, nd);
        if (c.rep[out] == out) s = arith(&c, nd);
        if (s == TC_OK && c.rep[out] == out) s = disjoint_cats(&c, &g->nodes[n]);
        if (s == TC_OK && c.rep[out] == out) s = matmul_sum(&c, n);
    }
    /* even after a failure: redirect what was decided, so the graph stays consistent */
    for (int i = 0; i < g->noutputs; i++) g->outputs[i] = c.rep[g->outputs[i]];
    for (int i = 0; i < g->nwb; i++) g->wb_val[i] = c.rep[g->wb_val[i]];
    int changed = 0;
    for (int r = 0; r < R_COUNT; r++) changed += c.count[r];
    int dropped = drop_orphans(g, uses_before, c.nv0);
    tc_graph_fix_view_roots(g); /* views of merged or replaced values */
    tc_status err = s;
    s = changed || dropped || g->nvals > c.nv0 ? tc_graph_compact(g) : TC_OK;
    if (err) s = err;
    if (s == TC_OK) {
        tc_gpass_stat st = {.pass = "simplify", .nodes_before = before, .nodes_after = tc_graph_live_nodes(g)};
        size_t k = 0;
        for (int r = 0; r < R_COUNT; r++) {
            if (!c.count[r] || k >= sizeof st.note) continue;
            int w = snprintf(st.note + k, sizeof st.note - k, "%s%s: %d", k ? ", " : "", rule_name[r], c.count[r]);
            if (w > 0) k += (size_t)w;
        }
        s = tc_graph_add_stat(g, &st);
    }
done:
    free(c.rep), free(c.uses), free(c.uni), free(c.contig), free(c.strided), free(c.reshaped), free(c.exposed),
        free(c.wb_target), free(uses_before);
    return s;
}
