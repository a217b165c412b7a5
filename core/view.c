/* view.c -- view ops (narrow, select, transpose, permute, view, expand, squeeze, unsqueeze,
 * unfold, as_strided): each makes a new header over the input's storage; no data moves and
 * no backend is involved, so one implementation serves every device. */
#include "internal.h"
#include <stdio.h>

typedef struct geom {
    int ndim;
    int64_t offset;
    int64_t size[TC_MAX_DIMS];
    int64_t stride[TC_MAX_DIMS];
} geom;

static void geom_of(const tc_tensor *t, geom *g)
{
    g->ndim = t->ndim;
    g->offset = t->offset;
    memcpy(g->size, t->size, sizeof g->size);
    memcpy(g->stride, t->stride, sizeof g->stride);
}

static tc_status narrow(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    int d;
    TRY(tc_wrap_dim(op, p->i[0], t->ndim, &d));
    int64_t start = p->i[1], len = p->i[2];
    if (t->ndim == 0) return tc_set_error(TC_ERR_SHAPE, "%s: cannot narrow a 0-dim tensor", op);
    if (start < 0 || len < 0 || start + len > t->size[d])
        return tc_set_error(TC_ERR_INDEX, "%s: range [%lld, %lld) out of bounds for dim %d of size %lld", op,
                            (long long)start, (long long)(start + len), d, (long long)t->size[d]);
    g->offset += start * g->stride[d];
    g->size[d] = len;
    return TC_OK;
}

static tc_status select_(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    if (t->ndim == 0) return tc_set_error(TC_ERR_SHAPE, "%s: cannot select from a 0-dim tensor", op);
    int d;
    TRY(tc_wrap_dim(op, p->i[0], t->ndim, &d));
    int64_t i = p->i[1];
    if (i < 0) i += t->size[d];
    if (i < 0 || i >= t->size[d])
        return tc_set_error(TC_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", op,
                            (long long)p->i[1], d, (long long)t->size[d]);
    g->offset += i * g->stride[d];
    for (int k = d; k + 1 < g->ndim; k++) {
        g->size[k] = g->size[k + 1];
        g->stride[k] = g->stride[k + 1];
    }
    g->ndim--;
    return TC_OK;
}

static tc_status transpose(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    int a, b;
    TRY(tc_wrap_dim(op, p->i[0], t->ndim, &a));
    TRY(tc_wrap_dim(op, p->i[1], t->ndim, &b));
    if (t->ndim == 0) return TC_OK;
    int64_t s = g->size[a], st = g->stride[a];
    g->size[a] = g->size[b], g->stride[a] = g->stride[b];
    g->size[b] = s, g->stride[b] = st;
    return TC_OK;
}

static tc_status permute(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    if (p->nshape != t->ndim)
        return tc_set_error(TC_ERR_ARG, "%s: %d dims given for a %d-dim tensor", op, p->nshape, t->ndim);
    bool seen[TC_MAX_DIMS] = {0};
    for (int k = 0; k < t->ndim; k++) {
        int d;
        TRY(tc_wrap_dim(op, p->shape[k], t->ndim, &d));
        if (seen[d]) return tc_set_error(TC_ERR_ARG, "%s: dim %d repeated", op, d);
        seen[d] = true;
        g->size[k] = t->size[d];
        g->stride[k] = t->stride[d];
    }
    return TC_OK;
}

/* view: sizes may contain one -1 (inferred). Succeeds when each new dim can be made from
 * runs of old dims that are contiguous among themselves (PyTorch's rule), so views of
 * transposed tensors work where the memory allows. */
static tc_status view(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    int nd = p->nshape;
    if (nd < 0 || nd > TC_MAX_DIMS) return tc_set_error(TC_ERR_ARG, "%s: %d dims", op, nd);
    int64_t sizes[TC_MAX_DIMS], numel = tc_numel_of(t->ndim, t->size), known = 1;
    int infer = -1;
    for (int k = 0; k < nd; k++) {
        sizes[k] = p->shape[k];
        if (sizes[k] == -1) {
            if (infer >= 0) return tc_set_error(TC_ERR_ARG, "%s: only one size may be -1", op);
            infer = k;
        } else if (sizes[k] < 0) {
            return tc_set_error(TC_ERR_SHAPE, "%s: negative size in %s", op, tc_sizes_str(nd, sizes, b1, sizeof b1));
        } else {
            known *= sizes[k];
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return tc_set_error(TC_ERR_SHAPE, "%s: cannot view %s as %s", op, tc_shape_str(t, b1, sizeof b1),
                                tc_sizes_str(nd, p->shape, b2, sizeof b2));
        sizes[infer] = numel / known;
        known *= sizes[infer];
    }
    if (known != numel)
        return tc_set_error(TC_ERR_SHAPE, "%s: cannot view %s (%lld elements) as %s (%lld elements)", op,
                            tc_shape_str(t, b1, sizeof b1), (long long)numel, tc_sizes_str(nd, sizes, b2, sizeof b2),
                            (long long)known);
    int64_t strides[TC_MAX_DIMS];
    if (numel <= 1) {
        tc_contiguous_strides(nd, sizes, strides);
    } else {
        /* Old dims split into chunks that are contiguous among themselves; each chunk must
         * be covered exactly by a run of new dims (PyTorch's computeStride rule). */
        int view_d = nd - 1;
        int64_t chunk_base = t->stride[t->ndim - 1], tensor_numel = 1, view_numel = 1;
        for (int td = t->ndim - 1; td >= 0; td--) {
            tensor_numel *= t->size[td];
            bool chunk_end = td == 0 || (t->size[td - 1] != 1 && t->stride[td - 1] != tensor_numel * chunk_base);
            if (!chunk_end) continue;
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) break;
            if (td > 0) {
                chunk_base = t->stride[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
        if (view_d != -1 || view_numel != tensor_numel)
            return tc_set_error(TC_ERR_SHAPE,
                                "%s: cannot view %s (strides not compatible) as %s; call contiguous() first", op,
                                tc_shape_str(t, b1, sizeof b1), tc_sizes_str(nd, sizes, b2, sizeof b2));
    }
    g->ndim = nd;
    memcpy(g->size, sizes, sizeof(int64_t) * (size_t)nd);
    memcpy(g->stride, strides, sizeof(int64_t) * (size_t)nd);
    return TC_OK;
}

static tc_status expand(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    int nd = p->nshape;
    if (nd < t->ndim || nd > TC_MAX_DIMS)
        return tc_set_error(TC_ERR_SHAPE, "%s: cannot expand %s to %d dims", op, tc_shape_str(t, b1, sizeof b1), nd);
    int lead = nd - t->ndim;
    for (int k = 0; k < nd; k++) {
        int td = k - lead;
        int64_t want = p->shape[k];
        int64_t have = td >= 0 ? t->size[td] : 1;
        if (want == -1) {
            if (td < 0) return tc_set_error(TC_ERR_SHAPE, "%s: -1 not allowed for a new leading dim", op);
            want = have;
        }
        if (want < 0 || (have != want && have != 1))
            return tc_set_error(TC_ERR_SHAPE, "%s: cannot expand %s to %s", op, tc_shape_str(t, b1, sizeof b1),
                                tc_sizes_str(nd, p->shape, b2, sizeof b2));
        g->size[k] = want;
        g->stride[k] = (td < 0 || have != want) ? 0 : t->stride[td];
    }
    g->ndim = nd;
    return TC_OK;
}

static tc_status squeeze(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    int only = -1;
    if (p->i[0] >= 0 || p->i[0] < -1) TRY(tc_wrap_dim(op, p->i[0], t->ndim, &only));
    int nd = 0;
    for (int d = 0; d < t->ndim; d++) {
        bool drop = t->size[d] == 1 && (only < 0 || only == d);
        if (drop) continue;
        g->size[nd] = t->size[d];
        g->stride[nd] = t->stride[d];
        nd++;
    }
    g->ndim = nd;
    return TC_OK;
}

static tc_status unsqueeze(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    if (t->ndim >= TC_MAX_DIMS) return tc_set_error(TC_ERR_SHAPE, "%s: already %d dims", op, TC_MAX_DIMS);
    int64_t dim = p->i[0] < 0 ? p->i[0] + t->ndim + 1 : p->i[0];
    if (dim < 0 || dim > t->ndim)
        return tc_set_error(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim tensor", op, (long long)p->i[0],
                            t->ndim);
    for (int k = t->ndim; k > dim; k--) {
        g->size[k] = g->size[k - 1];
        g->stride[k] = g->stride[k - 1];
    }
    g->size[dim] = 1;
    g->stride[dim] = dim + 1 < t->ndim + 1 && dim < t->ndim ? t->stride[dim] * t->size[dim] : 1;
    g->ndim = t->ndim + 1;
    return TC_OK;
}

/* unfold(dim, size, step): a new last dim of `size` elements; dim gets (n - size)/step + 1. */
static tc_status unfold(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    if (t->ndim >= TC_MAX_DIMS) return tc_set_error(TC_ERR_SHAPE, "%s: already %d dims", op, TC_MAX_DIMS);
    int d;
    TRY(tc_wrap_dim(op, p->i[0], t->ndim, &d));
    int64_t size = p->i[1], step = p->i[2], n = t->ndim ? t->size[d] : 1;
    if (size < 0 || size > n || step <= 0)
        return tc_set_error(TC_ERR_ARG, "%s: size %lld and step %lld do not fit dim %d of size %lld", op,
                            (long long)size, (long long)step, d, (long long)n);
    g->ndim = t->ndim + 1;
    g->size[t->ndim] = size;
    g->stride[t->ndim] = t->ndim ? t->stride[d] : 1;
    if (t->ndim) {
        g->size[d] = (n - size) / step + 1;
        g->stride[d] = t->stride[d] * step;
    }
    return TC_OK;
}

static tc_status as_strided(const char *op, const tc_tensor *t, const tc_params *p, geom *g)
{
    if (p->nshape % 2 || p->nshape / 2 > TC_MAX_DIMS)
        return tc_set_error(TC_ERR_ARG, "%s: shape must hold sizes then strides", op);
    g->ndim = p->nshape / 2;
    g->offset = p->i[1] ? t->offset + p->i[0] : p->i[0]; /* i1: relative to the input's offset */
    for (int k = 0; k < g->ndim; k++) {
        g->size[k] = p->shape[k];
        g->stride[k] = p->shape[g->ndim + k];
    }
    return TC_OK;
}

tc_status tc_view_run(const tc_kcall *k, tc_tensor **out)
{
    const tc_tensor *t = k->in[0];
    const char *op = k->info->name;
    geom g;
    geom_of(t, &g);
    switch (k->op) {
    case TC_OP_NARROW: TRY(narrow(op, t, k->p, &g)); break;
    case TC_OP_SELECT: TRY(select_(op, t, k->p, &g)); break;
    case TC_OP_TRANSPOSE: TRY(transpose(op, t, k->p, &g)); break;
    case TC_OP_PERMUTE: TRY(permute(op, t, k->p, &g)); break;
    case TC_OP_VIEW: TRY(view(op, t, k->p, &g)); break;
    case TC_OP_EXPAND: TRY(expand(op, t, k->p, &g)); break;
    case TC_OP_SQUEEZE: TRY(squeeze(op, t, k->p, &g)); break;
    case TC_OP_UNSQUEEZE: TRY(unsqueeze(op, t, k->p, &g)); break;
    case TC_OP_UNFOLD: TRY(unfold(op, t, k->p, &g)); break;
    case TC_OP_AS_STRIDED: TRY(as_strided(op, t, k->p, &g)); break;
    default: return tc_set_error(TC_ERR_INTERNAL, "%s: not a view op", op);
    }
    if (!t->storage && tc_numel_of(g.ndim, g.size) > 0)
        return tc_set_error(TC_ERR_SHAPE, "%s: the input tensor is empty", op);
    if (!t->storage) return tc_tensor_new_empty_on(t->device, (tc_dtype)t->dtype, out);
    return tc_tensor_new_view(t->storage, (tc_dtype)t->dtype, g.offset, g.ndim, g.size, g.stride, out);
}
