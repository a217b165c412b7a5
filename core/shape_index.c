/* shape_index.c -- the prepare step of the index, join (cat) and sort kinds: dims, index
 * dtypes, the sizes operands must agree on, and the output sizes.
 *
 * Index VALUES are checked here too, not in the kernels: the dispatcher resizes a given
 * result before the kernel runs, so an out-of-range index found later would leave that
 * result changed. Data-dependent sizes (masked_select, nonzero) and masked_copy's source
 * length need the mask counted here for the same reason. Both read the data on the host,
 * so they are done for CPU tensors only; a device backend checks in its own kernels.
 * Device index values are checked on a host copy, except while a CUDA graph is captured
 * (index_values): then the kernels check and report later (docs/cuda.md).
 *
 * A Torch7 empty tensor (ndim 0, no storage) is treated as the 1-D size-0 tensor (0):
 * every shape below goes through eff_shape so that no kernel sees a "0-d with no data".
 */
#include "internal.h"
#include <stdio.h>

/* ---- shared helpers ----------------------------------------------------------------------- */

static bool is_t7_empty(const tc_tensor *t) { return t->ndim == 0 && !t->storage; }

/* t's sizes, with the Torch7 empty tensor read as (0). */
static int eff_shape(const tc_tensor *t, int64_t *sizes)
{
    if (is_t7_empty(t)) {
        sizes[0] = 0;
        return 1;
    }
    memcpy(sizes, t->size, sizeof(int64_t) * (size_t)t->ndim);
    return t->ndim;
}

/* Size of dim d (a 0-d tensor is one element along its only dim). */
static int64_t dim_size(const tc_tensor *t, int d)
{
    if (t->ndim == 0) return t->storage ? 1 : 0;
    return t->size[d];
}


static void spec_set(tc_outspec *spec, int o, int dtype, int ndim, const int64_t *sizes)
{
    if (spec->nout < o + 1) spec->nout = o + 1;
    spec->dtype[o] = dtype;
    spec->ndim[o] = ndim;
    memcpy(spec->size[o], sizes, sizeof(int64_t) * (size_t)ndim);
}

bool tc_elem_nonzero(int dt, const void *p)
{
    switch (dt) {
    case TC_F32: return *(const float *)p != 0; /* NaN != 0: counts as set */
    case TC_F64: return *(const double *)p != 0;
    case TC_F16:
    case TC_BF16: return (*(const uint16_t *)p & 0x7fff) != 0; /* -0 is zero */
    case TC_U8:
    case TC_I8:
    case TC_BOOL: return *(const uint8_t *)p != 0;
    case TC_I16: return *(const int16_t *)p != 0;
    case TC_I32: return *(const int32_t *)p != 0;
    default: return *(const int64_t *)p != 0;
    }
}

int64_t tc_count_nonzero(const tc_tensor *t, int ndim, const int64_t *sizes)
{
    if (!t->storage || tc_numel_of(ndim, sizes) == 0) return 0;
    tc_tensor e = *t; /* t seen at the broadcast shape: a walk-only header, not refcounted */
    int64_t st[TC_MAX_DIMS];
    tc_broadcast_strides(t, ndim, sizes, st);
    e.ndim = ndim;
    memcpy(e.size, sizes, sizeof(int64_t) * (size_t)ndim);
    memcpy(e.stride, st, sizeof(int64_t) * (size_t)ndim);
    tc_elem_iter it;
    tc_elem_iter_init(&it, &e);
    int64_t n = 0;
    for (char *p; (p = tc_elem_iter_next(&it));) n += tc_elem_nonzero(t->dtype, p);
    return n;
}

/* ---- index kind ------------------------------------------------------------------------------ */

static tc_status index_dtype(const char *op, const tc_tensor *idx)
{
    if (idx->dtype != TC_I64)
        return tc_set_error(TC_ERR_DTYPE, "%s: index tensor must be int64, got %s", op,
                            tc_dtype_name((tc_dtype)idx->dtype));
    return TC_OK;
}

static tc_status vector_index(const char *op, const tc_tensor *idx)
{
    TRY(index_dtype(op, idx));
    char b[TC_SHAPE_BUF];
    if (idx->ndim > 1)
        return tc_set_error(TC_ERR_SHAPE, "%s: index must be 0-dim or 1-dim, got %s", op, tc_shape_str(idx, b, sizeof b));
    return TC_OK;
}

/* Every index value lies in [0, size) of dim d. */
static tc_status index_values(const char *op, const tc_tensor *idx, int d, int64_t size)
{
    if (!idx->storage || tc_exec_shape_only) return TC_OK;
    /* While this thread captures a CUDA graph on idx's device, the kernel checks instead
     * (a graph cannot wait for values): a bad index is skipped and reported at the host's
     * next wait for the device (cuda_api.h, devcheck_take). Only the index kernels of the
     * CUDA backend do this: a host fallback is refused during a capture anyway. */
    if (idx->device != TC_CPU && tc_cuda_is_capturing(TC_DEVICE_ORDINAL(idx->device))) return TC_OK;
    if (idx->device != TC_CPU) { /* device indices: checked on a host copy (one sync) */
        tc_tensor *h;
        TRY(tc_host_values_for(op, idx, &h));
        tc_status s = index_values(op, h, d, size);
        tc_tensor_release(h);
        return s;
    }
    if (tc_tensor_is_contiguous(idx)) { /* the common case: one branch-light pass */
        const int64_t *v = (const int64_t *)tc_base(idx);
        int64_t n = tc_tensor_numel(idx), bad = 0;
        for (int64_t i = 0; i < n; i++) bad |= (uint64_t)v[i] >= (uint64_t)size;
        if (!bad) return TC_OK; /* else the walk below finds and reports the first one */
    }
    tc_elem_iter it;
    tc_elem_iter_init(&it, idx);
    for (char *p; (p = tc_elem_iter_next(&it));) {
        int64_t v = *(const int64_t *)p;
        if (v < 0 || v >= size)
            return tc_set_error(TC_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", op, (long long)v,
                                d, (long long)size);
    }
    return TC_OK;
}

static tc_status same_dtype2(const char *op, const char *what, const tc_tensor *t, const tc_tensor *dst)
{
    if (t->dtype != dst->dtype)
        return tc_set_error(TC_ERR_DTYPE, "%s: %s is %s but the destination is %s", op, what,
                            tc_dtype_name((tc_dtype)t->dtype), tc_dtype_name((tc_dtype)dst->dtype));
    return TC_OK;
}

static tc_status mask_dtype(const char *op, const tc_tensor *mask)
{
    if (mask->dtype != TC_U8 && mask->dtype != TC_BOOL)
        return tc_set_error(TC_ERR_DTYPE, "%s: mask must be uint8 or bool, got %s", op,
                            tc_dtype_name((tc_dtype)mask->dtype));
    return TC_OK;
}

/* The result of an "out is dst" op: a tensor like dst. */
static void spec_like(tc_outspec *spec, const tc_tensor *dst)
{
    int64_t sz[TC_MAX_DIMS];
    int nd = eff_shape(dst, sz);
    spec_set(spec, 0, dst->dtype, nd, sz);
}

/* index_copy / index_add: src is dst with size n (the index count) along d. */
static tc_status index_copy_shapes(const char *op, const tc_tensor *dst, const tc_tensor *src, int d, int64_t n)
{
    int64_t ds[TC_MAX_DIMS], ss[TC_MAX_DIMS];
    int dn = eff_shape(dst, ds), sn = eff_shape(src, ss);
    bool ok;
    if (dst->ndim == 0 && dst->storage) {
        ok = n == 1 && tc_numel_of(sn, ss) == 1 && sn <= 1;
    } else {
        ok = sn == dn && ss[d] == n;
        for (int i = 0; ok && i < dn; i++)
            if (i != d && ss[i] != ds[i]) ok = false;
    }
    if (ok) return TC_OK;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE, "%s: source %s does not fit destination %s with %lld indices along dim %d", op,
                        tc_sizes_str(sn, ss, b1, sizeof b1), tc_sizes_str(dn, ds, b2, sizeof b2), (long long)n, d);
}

/* gather / scatter: idx has t's rank and is no larger than t in every dim but d (all dims
 * when d < 0). */
static tc_status fits_within(const char *op, const char *iname, const tc_tensor *idx, const char *tname,
                             const tc_tensor *t, int d)
{
    int64_t is[TC_MAX_DIMS], ts[TC_MAX_DIMS];
    int in = eff_shape(idx, is), tn = eff_shape(t, ts);
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (idx->ndim != t->ndim && !(tc_numel_of(in, is) == 0 && in == 1))
        return tc_set_error(TC_ERR_SHAPE, "%s: %s %s and %s %s must have the same number of dims", op, iname,
                            tc_sizes_str(in, is, b1, sizeof b1), tname, tc_sizes_str(tn, ts, b2, sizeof b2));
    for (int i = 0; i < in && idx->ndim == t->ndim; i++)
        if (i != d && is[i] > ts[i])
            return tc_set_error(TC_ERR_SHAPE, "%s: %s %s is larger than %s %s at dim %d", op, iname,
                                tc_sizes_str(in, is, b1, sizeof b1), tname, tc_sizes_str(tn, ts, b2, sizeof b2), i);
    return TC_OK;
}

/* mask broadcasts to dst without growing it. */
static tc_status mask_fits(const char *op, const tc_tensor *mask, const tc_tensor *dst)
{
    int64_t ds[TC_MAX_DIMS], ms[TC_MAX_DIMS];
    int dn = eff_shape(dst, ds), mn = eff_shape(mask, ms);
    bool ok = mn <= dn;
    for (int i = 0; ok && i < mn; i++) {
        int64_t m = ms[i], s = ds[dn - mn + i];
        if (m != s && m != 1) ok = false;
    }
    if (ok && is_t7_empty(mask) && tc_numel_of(dn, ds) != 0) ok = false;
    if (ok) return TC_OK;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE, "%s: mask %s does not broadcast to the destination %s", op,
                        tc_sizes_str(mn, ms, b1, sizeof b1), tc_sizes_str(dn, ds, b2, sizeof b2));
}

/* How many elements of t broadcast to (nd, sz) are set: a result size, computed on the host
 * (device values are copied over first). */
static tc_status count_set(const char *op, const tc_tensor *t, int nd, const int64_t *sz, int64_t *n)
{
    if (tc_exec_shape_only)
        return tc_set_error(TC_ERR_UNSUPPORTED,
                            "%s: the result's size depends on values that a shape-only trace does not compute", op);
    tc_tensor *h;
    TRY(tc_host_values_for(op, t, &h));
    *n = tc_count_nonzero(h, nd, sz);
    tc_tensor_release(h);
    return TC_OK;
}

tc_status tc_prepare_index(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    const tc_tensor *a = k->in[0], *b = k->nin > 1 ? k->in[1] : NULL, *c = k->nin > 2 ? k->in[2] : NULL;
    int64_t sz[TC_MAX_DIMS];
    int d = 0;
    switch (k->op) {
    case TC_OP_INDEX_SELECT: { /* (src, idx) */
        TRY(tc_wrap_dim(op, k->p->i[0], a->ndim, &d));
        TRY(vector_index(op, b));
        int64_t n = tc_tensor_numel(b);
        if (a->ndim == 0 && a->storage && n != 1)
            return tc_set_error(TC_ERR_SHAPE, "%s: a 0-dim source takes exactly one index, got %lld", op, (long long)n);
        TRY(index_values(op, b, d, dim_size(a, d)));
        int nd = eff_shape(a, sz);
        if (nd > 0) sz[d] = n;
        spec_set(spec, 0, a->dtype, nd, sz);
        return TC_OK;
    }
    case TC_OP_INDEX_COPY:
    case TC_OP_INDEX_ADD: /* (dst, idx, src) */
        TRY(tc_wrap_dim(op, k->p->i[0], a->ndim, &d));
        TRY(vector_index(op, b));
        TRY(same_dtype2(op, "source", c, a));
        TRY(index_copy_shapes(op, a, c, d, tc_tensor_numel(b)));
        TRY(index_values(op, b, d, dim_size(a, d)));
        spec_like(spec, a);
        return TC_OK;
    case TC_OP_INDEX_FILL: /* (dst, idx; s0) */
        TRY(tc_wrap_dim(op, k->p->i[0], a->ndim, &d));
        TRY(vector_index(op, b));
        TRY(index_values(op, b, d, dim_size(a, d)));
        spec_like(spec, a);
        return TC_OK;
    case TC_OP_GATHER: { /* (src, idx) -> idx's shape */
        TRY(tc_wrap_dim(op, k->p->i[0], a->ndim, &d));
        TRY(index_dtype(op, b));
        TRY(fits_within(op, "index", b, "source", a, d));
        TRY(index_values(op, b, d, dim_size(a, d)));
        int nd = eff_shape(b, sz);
        spec_set(spec, 0, a->dtype, nd, sz);
        return TC_OK;
    }
    case TC_OP_SCATTER:
    case TC_OP_SCATTER_ADD: /* (dst, idx, src) */
        TRY(tc_wrap_dim(op, k->p->i[0], a->ndim, &d));
        TRY(index_dtype(op, b));
        TRY(same_dtype2(op, "source", c, a));
        TRY(fits_within(op, "index", b, "destination", a, d));
        TRY(fits_within(op, "index", b, "source", c, -1));
        TRY(index_values(op, b, d, dim_size(a, d)));
        spec_like(spec, a);
        return TC_OK;
    case TC_OP_SCATTER_FILL:
        TRY(tc_wrap_dim(op, k->p->i[0], a->ndim, &d));
        TRY(index_dtype(op, b));
        TRY(fits_within(op, "index", b, "destination", a, d));
        TRY(index_values(op, b, d, dim_size(a, d)));
        spec_like(spec, a);
        return TC_OK;
    case TC_OP_MASKED_FILL: /* (dst, mask; s0) */
        TRY(mask_dtype(op, b));
        TRY(mask_fits(op, b, a));
        spec_like(spec, a);
        return TC_OK;
    case TC_OP_MASKED_COPY: { /* (dst, mask, src): src's elements in order, one per set element */
        TRY(mask_dtype(op, b));
        TRY(same_dtype2(op, "source", c, a));
        TRY(mask_fits(op, b, a));
        int nd = eff_shape(a, sz);
        int64_t set = 0, have = tc_tensor_numel(c);
        TRY(count_set(op, b, nd, sz, &set));
        if (have < set)
            return tc_set_error(TC_ERR_SHAPE, "%s: mask has %lld set elements but the source has only %lld", op,
                                (long long)set, (long long)have);
        spec_like(spec, a);
        return TC_OK;
    }
    case TC_OP_MASKED_SELECT: { /* (src, mask) broadcast together -> (count) */
        TRY(mask_dtype(op, b));
        int64_t as[TC_MAX_DIMS], ms[TC_MAX_DIMS];
        tc_tensor ea = *a, eb = *b; /* (0)-shaped stand-ins for Torch7 empties */
        ea.ndim = eff_shape(a, as), eb.ndim = eff_shape(b, ms);
        memcpy(ea.size, as, sizeof as), memcpy(eb.size, ms, sizeof ms);
        const tc_tensor *pair[2] = {&ea, &eb};
        int nd;
        TRY(tc_broadcast_shapes(op, pair, 2, &nd, sz));
        int64_t n = 0;
        TRY(count_set(op, b, nd, sz, &n));
        spec_set(spec, 0, a->dtype, 1, &n);
        return TC_OK;
    }
    case TC_OP_NONZERO: { /* (src) -> (count, ndim) int64 */
        int nd = eff_shape(a, sz);
        int64_t out[2] = {0, a->ndim};
        TRY(count_set(op, a, nd, sz, &out[0]));
        spec_set(spec, 0, TC_I64, 2, out);
        return TC_OK;
    }
    default: return tc_set_error(TC_ERR_INTERNAL, "%s: not an index op", op);
    }
}

/* ---- join kind (cat) --------------------------------------------------------------------------- */

/* Torch7 lets a 1-D empty tensor (and its dimensionless empty tensor) join anything. */
static bool cat_skips(const tc_tensor *t) { return is_t7_empty(t) || (t->ndim == 1 && t->size[0] == 0); }

tc_status tc_prepare_join(const tc_kcall *k, tc_outspec *spec)
{
    const tc_tensor *ref = NULL;
    int ri = -1;
    for (int i = 0; i < k->nin && !ref; i++)
        if (!cat_skips(k->in[i])) ref = k->in[i], ri = i;
    int64_t dim = k->p->i[0];
    if (!ref) { /* nothing but empties: an empty (0) result */
        int d;
        TRY(tc_wrap_dim("cat", dim, 1, &d));
        int64_t z = 0;
        spec_set(spec, 0, k->in[0]->dtype, 1, &z);
        return TC_OK;
    }
    int nd = ref->ndim;
    if (nd == 0)
        return tc_set_error(TC_ERR_SHAPE, "cat: input %d is 0-dim and cannot be concatenated", ri + 1);
    int64_t d = dim < 0 ? dim + nd : dim;
    if (d == nd)
        return tc_set_error(TC_ERR_INDEX,
                            "cat: dim %lld out of range for %d-dim tensors (joining along a new dim is not "
                            "supported: unsqueeze the inputs first)",
                            (long long)dim, nd);
    if (d < 0 || d > nd)
        return tc_set_error(TC_ERR_INDEX, "cat: dim %lld out of range for %d-dim tensors", (long long)dim, nd);
    int64_t sz[TC_MAX_DIMS];
    memcpy(sz, ref->size, sizeof(int64_t) * (size_t)nd);
    sz[d] = 0;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    for (int i = 0; i < k->nin; i++) {
        const tc_tensor *t = k->in[i];
        if (cat_skips(t)) continue;
        if (t->dtype != ref->dtype)
            return tc_set_error(TC_ERR_DTYPE, "cat: input %d is %s but input %d is %s", ri + 1,
                                tc_dtype_name((tc_dtype)ref->dtype), i + 1, tc_dtype_name((tc_dtype)t->dtype));
        bool ok = t->ndim == nd;
        for (int j = 0; ok && j < nd; j++)
            if (j != d && t->size[j] != ref->size[j]) ok = false;
        if (!ok)
            return tc_set_error(TC_ERR_SHAPE, "cat: sizes of input %d %s and input %d %s differ outside dim %lld",
                                ri + 1, tc_shape_str(ref, b1, sizeof b1), i + 1, tc_shape_str(t, b2, sizeof b2),
                                (long long)d);
        sz[d] += t->size[d];
    }
    spec_set(spec, 0, ref->dtype, nd, sz);
    return TC_OK;
}

/* ---- sort kind ------------------------------------------------------------------------------------ */

tc_status tc_prepare_sort(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    const tc_tensor *x = k->in[0];
    int d;
    TRY(tc_wrap_dim(op, k->p->i[0], x->ndim, &d));
    int64_t sz[TC_MAX_DIMS];
    int nd = eff_shape(x, sz);
    bool scalar = x->ndim == 0 && x->storage;
    int64_t n = scalar ? 1 : sz[d];
    int64_t kk = k->p->i[1];
    bool keepdim = false;
    switch (k->op) {
    case TC_OP_SORT: break;
    case TC_OP_TOPK:
        if (kk < 0 || kk > n)
            return tc_set_error(TC_ERR_INDEX, "topk: k %lld out of range for dim %d of size %lld", (long long)kk, d,
                                (long long)n);
        if (!scalar) sz[d] = kk; /* a 0-dim input gives a 0-dim result, as PyTorch */
        break;
    case TC_OP_KTHVALUE:
        if (kk < 1 || kk > n)
            return tc_set_error(TC_ERR_INDEX, "kthvalue: k %lld out of range for dim %d of size %lld (k counts from 1)",
                                (long long)kk, d, (long long)n);
        keepdim = k->p->i[2] != 0;
        goto reduce;
    case TC_OP_MEDIAN:
    case TC_OP_MODE:
        if (n == 0) return tc_set_error(TC_ERR_SHAPE, "%s: dim %d has no elements", op, d);
        keepdim = k->p->i[1] != 0;
    reduce:
        if (scalar) break;
        if (keepdim) {
            sz[d] = 1;
        } else {
            for (int i = d; i + 1 < nd; i++) sz[i] = sz[i + 1];
            nd--;
        }
        break;
    default: return tc_set_error(TC_ERR_INTERNAL, "%s: not a sort op", op);
    }
    spec_set(spec, 0, x->dtype, nd, sz);
    spec_set(spec, 1, TC_I64, nd, sz);
    return TC_OK;
}
