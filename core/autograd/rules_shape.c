/* rules_shape.c -- gradient rules of the view ops, the index family and cat (see grad.h).
 *
 * Views that keep every element (transpose, permute, view, squeeze, unsqueeze) map the
 * gradient back with the inverse view. Views that drop elements (narrow, select) build
 * their gradient OUT OF PLACE (cat with zero blocks): the engine forbids writes into views
 * of grad-requiring tensors, and a fresh tensor never aliases anything. Overlapping views
 * (expand, unfold, as_strided) sum the gradient of every output element that reads the
 * same input element: expand with tc_g_sum_to, unfold and as_strided with an index_add of
 * the flattened gradient (the index is a constant computed from the shapes alone).
 * Index ops follow PyTorch 1.13: overwritten destination elements get no gradient, sources
 * get the gradient gathered from where they were written.
 */
#include "grad.h"
#include <stdlib.h>

#define G0 (c->gout[0])
#define X0 (c->in[0])
#define X1 (c->in[1])
#define M(i) (&c->meta[i])

static const tc_tensor *run(tc_garena *A, tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *x,
                            int64_t i0, double s0)
{
    const tc_tensor *in[3] = {a, b, x};
    int n = x ? 3 : b ? 2 : 1;
    tc_params p = {.s = {s0}, .i = {i0}};
    return tc_ga_op(A, op, in, n, &p);
}

static const tc_tensor *view_op(tc_garena *A, tc_op op, const tc_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    tc_params p = {.i = {i0, i1, i2}};
    return tc_ga_op(A, op, &t, 1, &p);
}

static int wrap(int64_t d, int ndim) { return (int)(d < 0 ? d + (ndim > 0 ? ndim : 1) : d); }

/* ---- views that keep every element -------------------------------------------------------- */

TC_GRAD_RULE(transpose_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    int nd = M(0)->ndim;
    if (nd == 0) tc_ga_out(A, tc_ga_reshape(A, G0, M(0)), &gin[0]);
    else tc_ga_out(A, view_op(A, TC_OP_TRANSPOSE, G0, wrap(c->p->i[0], nd), wrap(c->p->i[1], nd), 0), &gin[0]);
    return tc_ga_done(A);
}

/* permute by the inverse permutation */
TC_GRAD_RULE(permute_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    int nd = M(0)->ndim;
    tc_params p = {.nshape = nd};
    for (int k = 0; k < nd; k++) p.shape[wrap(c->p->shape[k], nd)] = k;
    tc_ga_out(A, tc_ga_op(A, TC_OP_PERMUTE, &G0, 1, &p), &gin[0]);
    return tc_ga_done(A);
}

/* view, squeeze: the gradient reshaped to the input's sizes (a view when g allows). */
TC_GRAD_RULE(reshape_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_ga_out(A, tc_ga_reshape(A, G0, M(0)), &gin[0]);
    return tc_ga_done(A);
}

/* unsqueeze: squeeze that dim again (a view for any strides) */
TC_GRAD_RULE(unsqueeze_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    int64_t d = c->p->i[0] < 0 ? c->p->i[0] + M(0)->ndim + 1 : c->p->i[0];
    tc_ga_out(A, view_op(A, TC_OP_SQUEEZE, G0, d, 0, 0), &gin[0]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(expand_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_ga_out(A, tc_ga_sum_to(A, G0, M(0)), &gin[0]);
    return tc_ga_done(A);
}

/* ---- views that drop elements -------------------------------------------------------------- */

/* g placed at [start, start + len) of dim d in zeros of m's sizes: cat(zeros, g, zeros). */
static const tc_tensor *embed(tc_garena *A, const tc_tmeta *m, const tc_tensor *g, int d, int64_t start)
{
    if (A->err || !g) return NULL;
    const tc_tensor *parts[3];
    int n = 0;
    int64_t len = g->size[d], after = m->size[d] - start - len;
    tc_tmeta z = *m;
    if (start > 0) {
        z.size[d] = start;
        parts[n++] = tc_ga_full(A, &z, 0);
    }
    parts[n++] = g;
    if (after > 0) {
        z.size[d] = after;
        parts[n++] = tc_ga_full(A, &z, 0);
    }
    if (n == 1) return tc_ga_reshape(A, g, m);
    tc_params p = {.i = {d}};
    return tc_ga_op(A, TC_OP_CAT, parts, n, &p);
}

TC_GRAD_RULE(narrow_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    int d = wrap(c->p->i[0], M(0)->ndim);
    tc_ga_out(A, embed(A, M(0), G0, d, c->p->i[1]), &gin[0]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(select_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = M(0);
    int d = wrap(c->p->i[0], m->ndim);
    int64_t i = c->p->i[1] < 0 ? c->p->i[1] + m->size[d] : c->p->i[1];
    tc_ga_out(A, embed(A, m, view_op(A, TC_OP_UNSQUEEZE, G0, d, 0, 0), d, i), &gin[0]);
    return tc_ga_done(A);
}

/* ---- overlapping views: index_add of the flattened gradient ----------------------------- */

/* gin = zeros(numel(m) + 1) index_add'ed at pos (one entry per element of g, row-major;
 * pos = numel(m) for elements that map to no input element), trimmed and reshaped to m. */
static const tc_tensor *gather_back(tc_garena *A, const tc_tmeta *m, const tc_tensor *g, const int64_t *pos)
{
    if (A->err || !g) return NULL;
    int64_t n_in = tc_numel_of(m->ndim, m->size), n_out = tc_tensor_numel(g);
    tc_tmeta flat = {.dtype = m->dtype, .ndim = 1, .device = g->device, .size = {n_in + 1}},
             gflat = {.dtype = g->dtype, .ndim = 1, .device = g->device, .size = {n_out}};
    tc_tensor *idx = NULL;
    tc_status s = tc_g_index(g->device, pos, n_out, &idx);
    if (!tc_ga_keep(A, s, idx)) return NULL;
    const tc_tensor *acc = run(A, TC_OP_INDEX_ADD, tc_ga_full(A, &flat, 0), idx, tc_ga_reshape(A, g, &gflat), 0, 0);
    return tc_ga_reshape(A, view_op(A, TC_OP_NARROW, acc, 0, 0, n_in), m);
}

/* unfold(d, size, step): output element (o..., j) reads input element o with
 * o_d -> o_d * step + j. */
TC_GRAD_RULE(unfold_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = M(0), *om = &c->out_meta[0];
    if (m->ndim == 0) {
        if (tc_numel_of(om->ndim, om->size) == 1) tc_ga_out(A, tc_ga_reshape(A, G0, m), &gin[0]);
        return tc_ga_done(A);
    }
    int d = wrap(c->p->i[0], m->ndim), nd = m->ndim;
    int64_t step = c->p->i[2], n_out = tc_numel_of(om->ndim, om->size), cs[TC_MAX_DIMS];
    tc_contiguous_strides(nd, m->size, cs);
    int64_t *pos = tc_malloc(sizeof(int64_t) * (size_t)(n_out ? n_out : 1), "unfold backward index");
    if (!pos) {
        tc_ga_done(A);
        return TC_ERR_MEMORY;
    }
    int64_t ix[TC_MAX_DIMS + 1] = {0};
    for (int64_t e = 0; e < n_out; e++) {
        int64_t p = 0;
        for (int k = 0; k < nd; k++) p += (k == d ? ix[k] * step : ix[k]) * cs[k];
        pos[e] = p + ix[nd] * cs[d];
        for (int k = nd; k >= 0 && ++ix[k] == om->size[k]; k--) ix[k] = 0;
    }
    tc_ga_out(A, gather_back(A, m, G0, pos), &gin[0]);
    free(pos);
    return tc_ga_done(A);
}

/* as_strided(sizes, strides, offset) reads storage positions; each maps back to the input
 * element at that position (the input's own strides and offset, hence the saved input).
 * Positions outside the input get no gradient; an input that overlaps itself is refused. */
TC_GRAD_RULE(as_strided_rule, TC_SAVE_IN0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *x = X0;
    const tc_tmeta *om = &c->out_meta[0];
    int64_t n_in = tc_tensor_numel(x), n_out = tc_numel_of(om->ndim, om->size);
    int64_t lo = x->offset;
    int64_t hi = lo;
    for (int k = 0; k < x->ndim; k++) {
        if (x->size[k] == 0) continue;
        int64_t span = (x->size[k] - 1) * x->stride[k];
        if (span < 0) lo += span;
        else hi += span;
    }
    int64_t range = n_in ? hi - lo + 1 : 1;
    int64_t *slot = tc_malloc(sizeof(int64_t) * (size_t)range, "as_strided backward map");
    int64_t *pos = slot ? tc_malloc(sizeof(int64_t) * (size_t)(n_out ? n_out : 1), "as_strided backward index") : NULL;
    if (!pos) {
        free(slot);
        tc_ga_done(A);
        return TC_ERR_MEMORY;
    }
    for (int64_t r = 0; r < range; r++) slot[r] = n_in; /* no input element there */
    int64_t ix[TC_MAX_DIMS] = {0};
    tc_status s = TC_OK;
    for (int64_t e = 0; e < n_in && !s; e++) {
        int64_t p = x->offset;
        for (int k = 0; k < x->ndim; k++) p += ix[k] * x->stride[k];
        if (slot[p - lo] != n_in)
            s = tc_set_error(TC_ERR_UNSUPPORTED, "as_strided backward: the input overlaps itself (element %lld)",
                             (long long)e);
        slot[p - lo] = e;
        for (int k = x->ndim - 1; k >= 0 && ++ix[k] == x->size[k]; k--) ix[k] = 0;
    }
    int nd = om->ndim;
    const int64_t *st = c->p->shape + nd;
    int64_t ox[TC_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n_out && !s; e++) {
        int64_t p = c->p->i[1] ? x->offset + c->p->i[0] : c->p->i[0];
        for (int k = 0; k < nd; k++) p += ox[k] * st[k];
        pos[e] = (p >= lo && p <= hi) ? slot[p - lo] : n_in;
        for (int k = nd - 1; k >= 0 && ++ox[k] == om->size[k]; k--) ox[k] = 0;
    }
    if (!s) tc_ga_out(A, gather_back(A, M(0), G0, pos), &gin[0]);
    free(slot);
    free(pos);
    tc_status e = tc_ga_done(A);
    return s ? s : e;
}

/* ---- index family -------------------------------------------------------------------------- */

static int idx_dim(const tc_grad_ctx *c) { return wrap(c->p->i[0], M(0)->ndim); }

/* index_select(src, idx): index_add g into zeros */
TC_GRAD_RULE(index_select_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (M(0)->ndim == 0) tc_ga_out(A, tc_ga_reshape(A, G0, M(0)), &gin[0]);
    else tc_ga_out(A, run(A, TC_OP_INDEX_ADD, tc_ga_full(A, M(0), 0), X1, G0, idx_dim(c), 0), &gin[0]);
    return tc_ga_done(A);
}

/* The rows of g that the source of index_copy / index_add went to, as the source's sizes. */
static void index_source_grad(tc_garena *A, const tc_grad_ctx *c, tc_tensor **gin)
{
    if (!c->needs[2]) return;
    const tc_tensor *r = M(0)->ndim == 0 ? G0 : run(A, TC_OP_INDEX_SELECT, G0, X1, NULL, idx_dim(c), 0);
    tc_ga_out(A, tc_ga_reshape(A, r, M(2)), &gin[2]);
}

TC_GRAD_RULE(index_copy_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) tc_ga_out(A, run(A, TC_OP_INDEX_FILL, G0, X1, NULL, idx_dim(c), 0), &gin[0]);
    index_source_grad(A, c, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(index_add_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) tc_ga_out(A, G0, &gin[0]);
    index_source_grad(A, c, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(index_fill_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_ga_out(A, run(A, TC_OP_INDEX_FILL, G0, X1, NULL, idx_dim(c), 0), &gin[0]);
    return tc_ga_done(A);
}

/* gather(src, idx): scatter_add g into zeros */
TC_GRAD_RULE(gather_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_ga_out(A, run(A, TC_OP_SCATTER_ADD, tc_ga_full(A, M(0), 0), X1, G0, idx_dim(c), 0), &gin[0]);
    return tc_ga_done(A);
}

/* The source of scatter / scatter_add: g gathered at idx, zero-padded where the source is
 * larger than the index (those elements were never written). */
static void scatter_source_grad(tc_garena *A, const tc_grad_ctx *c, tc_tensor **gin)
{
    if (!c->needs[2] || A->err) return;
    const tc_tensor *r = run(A, TC_OP_GATHER, G0, X1, NULL, idx_dim(c), 0);
    tc_tensor *t = NULL;
    tc_status s = r ? tc_g_pad_to(r, M(2), &t) : TC_OK;
    tc_ga_out(A, tc_ga_keep(A, s, t), &gin[2]);
}

TC_GRAD_RULE(scatter_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) tc_ga_out(A, run(A, TC_OP_SCATTER_FILL, G0, X1, NULL, idx_dim(c), 0), &gin[0]);
    scatter_source_grad(A, c, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(scatter_add_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) tc_ga_out(A, G0, &gin[0]);
    scatter_source_grad(A, c, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(scatter_fill_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_ga_out(A, run(A, TC_OP_SCATTER_FILL, G0, X1, NULL, idx_dim(c), 0), &gin[0]);
    return tc_ga_done(A);
}

/* masked_fill(dst, mask): g with the filled elements zeroed */
TC_GRAD_RULE(masked_fill_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_ga_out(A, run(A, TC_OP_MASKED_FILL, G0, X1, NULL, 0, 0), &gin[0]);
    return tc_ga_done(A);
}

/* masked_copy(dst, mask, src) (PyTorch's masked_scatter): dst as masked_fill; the source's
 * first count(mask) elements get g's masked elements in order, the rest zero. */
TC_GRAD_RULE(masked_copy_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) tc_ga_out(A, run(A, TC_OP_MASKED_FILL, G0, X1, NULL, 0, 0), &gin[0]);
    if (c->needs[2]) {
        const tc_tensor *sel = run(A, TC_OP_MASKED_SELECT, G0, X1, NULL, 0, 0);
        tc_tmeta flat = {.dtype = M(2)->dtype, .ndim = 1, .device = M(2)->device,
                         .size = {tc_numel_of(M(2)->ndim, M(2)->size)}};
        tc_tensor *t = NULL;
        tc_status s = sel ? tc_g_pad_to(sel, &flat, &t) : TC_OK;
        tc_ga_out(A, tc_ga_reshape(A, tc_ga_keep(A, s, t), M(2)), &gin[2]);
    }
    return tc_ga_done(A);
}

/* masked_select(src, mask) -> 1-D: g written back at the mask's positions (src and mask
 * broadcast together, so the result is summed back to src's sizes). */
TC_GRAD_RULE(masked_select_rule, TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = M(0);
    const tc_tensor *mask = X1;
    tc_tmeta b = *m; /* the broadcast shape of src and mask */
    int nd = m->ndim > mask->ndim ? m->ndim : mask->ndim;
    b.ndim = nd;
    for (int k = 0; k < nd; k++) {
        int ks = k - (nd - m->ndim), km = k - (nd - mask->ndim);
        int64_t ss = ks >= 0 ? m->size[ks] : 1, ms = km >= 0 ? mask->size[km] : 1;
        b.size[k] = ss == 1 ? ms : ss;
    }
    const tc_tensor *full = run(A, TC_OP_MASKED_COPY, tc_ga_full(A, &b, 0), mask, G0, 0, 0);
    tc_ga_out(A, tc_ga_sum_to(A, full, m), &gin[0]);
    return tc_ga_done(A);
}

/* cat: each input gets its slice of g (a view); Torch7's skipped empties get zeros. No
 * arena here: the number of inputs is unbounded (an RNN joins every time step). */
TC_GRAD_RULE(cat_rule, 0)
{
    const tc_tmeta *om = &c->out_meta[0];
    int d = wrap(c->p->i[0], om->ndim);
    int64_t at = 0;
    for (int i = 0; i < c->nin; i++) {
        const tc_tmeta *m = &c->meta[i];
        bool skipped = m->ndim == 0 || (m->ndim == 1 && m->size[0] == 0 && om->ndim != 1);
        int64_t len = skipped ? 0 : m->size[d];
        if (c->needs[i]) {
            tc_status s = (skipped || tc_numel_of(m->ndim, m->size) == 0) ? tc_g_full(m, 0, &gin[i])
                                                                          : tc_g_narrow(G0, d, at, len, &gin[i]);
            if (s) return s; /* tc_g_end releases what was stored */
        }
        at += len;
    }
    return TC_OK;
}

void tc_grad_rules_shape(tc_grad_rule *t)
{
    TC_GRAD_REG(t, NARROW, narrow_rule);
    TC_GRAD_REG(t, SELECT, select_rule);
    TC_GRAD_REG(t, TRANSPOSE, transpose_rule);
    TC_GRAD_REG(t, PERMUTE, permute_rule);
    TC_GRAD_REG(t, VIEW, reshape_rule);
    TC_GRAD_REG(t, EXPAND, expand_rule);
    TC_GRAD_REG(t, SQUEEZE, reshape_rule);
    TC_GRAD_REG(t, UNSQUEEZE, unsqueeze_rule);
    TC_GRAD_REG(t, UNFOLD, unfold_rule);
    TC_GRAD_REG(t, AS_STRIDED, as_strided_rule);
    TC_GRAD_REG(t, INDEX_SELECT, index_select_rule);
    TC_GRAD_REG(t, INDEX_COPY, index_copy_rule);
    TC_GRAD_REG(t, INDEX_ADD, index_add_rule);
    TC_GRAD_REG(t, INDEX_FILL, index_fill_rule);
    TC_GRAD_REG(t, GATHER, gather_rule);
    TC_GRAD_REG(t, SCATTER, scatter_rule);
    TC_GRAD_REG(t, SCATTER_ADD, scatter_add_rule);
    TC_GRAD_REG(t, SCATTER_FILL, scatter_fill_rule);
    TC_GRAD_REG(t, MASKED_FILL, masked_fill_rule);
    TC_GRAD_REG(t, MASKED_COPY, masked_copy_rule);
    TC_GRAD_REG(t, MASKED_SELECT, masked_select_rule);
    TC_GRAD_REG(t, CAT, cat_rule);
}
