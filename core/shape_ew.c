/* shape_ew.c -- shape rules shared by all kinds (broadcasting, dim wrapping) and the
 * prepare step of the elementwise, convert and where kinds. */
#include "internal.h"
#include <stdio.h>

bool tc_same_shape(const tc_tensor *a, const tc_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d]) return false;
    return true;
}

tc_status tc_wrap_dim(const char *opname, int64_t dim, int ndim, int *out)
{
    int64_t n = ndim > 0 ? ndim : 1;
    int64_t d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n)
        return tc_set_error(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim tensor", opname,
                            (long long)dim, ndim);
    *out = (int)d;
    return TC_OK;
}

/* Numpy broadcasting: align trailing dims; a size-1 dim stretches. opname NULL: probe only
 * (no error text). */
tc_status tc_broadcast_shapes(const char *opname, const tc_tensor *const *ts, int n, int *ndim, int64_t *sizes)
{
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->ndim > nd) nd = ts[i]->ndim;
    for (int d = 0; d < nd; d++) sizes[d] = 1;
    for (int i = 0; i < n; i++) {
        const tc_tensor *t = ts[i];
        if (!t) continue;
        for (int d = 0; d < t->ndim; d++) {
            int od = nd - t->ndim + d;
            int64_t s = t->size[d];
            if (s == sizes[od] || s == 1) continue;
            if (sizes[od] == 1) {
                sizes[od] = s;
                continue;
            }
            if (!opname) return TC_ERR_SHAPE;
            char msg[4 * TC_SHAPE_BUF], buf[TC_SHAPE_BUF];
            size_t m = 0;
            for (int j = 0; j < n; j++)
                if (ts[j]) m += (size_t)snprintf(msg + m, sizeof msg - m, "%s%s", m ? " and " : "",
                                                tc_shape_str(ts[j], buf, sizeof buf));
            return tc_set_error(TC_ERR_SHAPE, "%s: sizes %s cannot broadcast (dim %d: %lld vs %lld)", opname,
                                msg, od, (long long)sizes[od], (long long)s);
        }
    }
    *ndim = nd;
    return TC_OK;
}

void tc_broadcast_strides(const tc_tensor *t, int ndim, const int64_t *sizes, int64_t *strides)
{
    int lead = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        int td = d - lead;
        strides[d] = (td < 0 || (t->size[td] == 1 && sizes[d] != 1)) ? 0 : t->stride[td];
    }
}

static tc_status same_dtype(const tc_kcall *k, int first, int count)
{
    const tc_tensor *ref = k->in[first];
    for (int i = first + 1; i < first + count; i++)
        if (k->in[i] && k->in[i]->dtype != ref->dtype)
            return tc_set_error(TC_ERR_DTYPE, "%s: dtypes differ (%s and %s)", k->info->name,
                                tc_dtype_name((tc_dtype)ref->dtype), tc_dtype_name((tc_dtype)k->in[i]->dtype));
    return TC_OK;
}

static void spec_one(tc_outspec *spec, int dtype, int ndim, const int64_t *sizes)
{
    spec->nout = 1;
    spec->dtype[0] = dtype;
    spec->ndim[0] = ndim;
    memcpy(spec->size[0], sizes, sizeof(int64_t) * (size_t)ndim);
}

tc_status tc_prepare_ew(const tc_kcall *k, tc_outspec *spec)
{
    if (k->info->nin == 0) { /* fill: the given output keeps its shape */
        const tc_tensor *o = k->out[0];
        if (!o) return tc_set_error(TC_ERR_ARG, "%s: needs a result tensor to fill", k->info->name);
        spec_one(spec, o->dtype, o->ndim, o->size);
        return TC_OK;
    }
    TRY(same_dtype(k, 0, k->nin));
    int odt = (k->info->flags & TC_OPF_CMP) ? TC_U8 : k->in[0]->dtype;
    const tc_tensor *a = k->in[0];
    bool same = true; /* the common case: no broadcasting, or only 0-dim scalars */
    for (int i = 1; i < k->nin; i++)
        if (!tc_same_shape(k->in[i], a) && k->in[i]->ndim != 0) same = false;
    if (same) {
        spec_one(spec, odt, a->ndim, a->size);
        return TC_OK;
    }
    int nd;
    int64_t sz[TC_MAX_DIMS];
    TRY(tc_broadcast_shapes(k->info->name, k->in, k->nin, &nd, sz));
    spec_one(spec, odt, nd, sz);
    return TC_OK;
}

/* copy: the result keeps a given output's shape when the element counts match (Torch7's
 * copy), otherwise the input's; dtype from the output, or i0 when >= 0. */
tc_status tc_prepare_convert(const tc_kcall *k, tc_outspec *spec)
{
    const tc_tensor *src = k->in[0], *o = k->out[0];
    if (o) {
        int64_t no = tc_tensor_numel(o), ns = tc_tensor_numel(src);
        const tc_tensor *pair[2] = {o, src};
        int nd;
        int64_t sz[TC_MAX_DIMS];
        bool expands = tc_broadcast_shapes(NULL, pair, 2, &nd, sz) == TC_OK && nd == o->ndim &&
                       memcmp(sz, o->size, sizeof(int64_t) * (size_t)nd) == 0;
        if (no != ns && !expands) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_SHAPE, "copy: cannot copy %s (%lld elements) into %s (%lld elements)",
                                tc_shape_str(src, b1, sizeof b1), (long long)ns, tc_shape_str(o, b2, sizeof b2),
                                (long long)no);
        }
        spec_one(spec, o->dtype, o->ndim, o->size);
        return TC_OK;
    }
    int64_t dt = k->p->i[0];
    if (dt >= TC_DTYPE_COUNT) return tc_set_error(TC_ERR_DTYPE, "copy: invalid dtype %lld", (long long)dt);
    spec_one(spec, dt >= 0 ? (int)dt : src->dtype, src->ndim, src->size);
    return TC_OK;
}

tc_status tc_prepare_select(const tc_kcall *k, tc_outspec *spec)
{
    const tc_tensor *c = k->in[0];
    if (c->dtype != TC_U8 && c->dtype != TC_BOOL)
        return tc_set_error(TC_ERR_DTYPE, "where: condition must be uint8 or bool, got %s",
                            tc_dtype_name((tc_dtype)c->dtype));
    TRY(same_dtype(k, 1, 2));
    int nd;
    int64_t sz[TC_MAX_DIMS];
    TRY(tc_broadcast_shapes("where", k->in, 3, &nd, sz));
    spec_one(spec, k->in[1]->dtype, nd, sz);
    return TC_OK;
}
