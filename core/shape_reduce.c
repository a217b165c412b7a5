/* shape_reduce.c -- the prepare step of the reduce and scan kinds: dim rules, output dtypes
 * and sizes, and every check that can fail, so a kernel of these kinds never fails.
 *
 * Reductions (ops.def): i0 = dim, i1 = keepdim. Because i0 = -1 means "every element", the
 * last dim is named by its non-negative index; dims below -1 count from the end as in
 * PyTorch (-2 is the second-to-last). A full reduction gives a 0-dim result, or with
 * keepdim an all-ones shape of the input's rank. A 0-dim input (or Torch7's empty tensor)
 * reduced along dim 0 is a full reduction.
 *
 * Output dtypes, PyTorch's choices: sum and prod of integer or bool inputs give int64 (an
 * int8 sum would overflow at once); float inputs keep their dtype. max/min keep the input
 * dtype and add int64 indices (only along a dim). all/any take uint8 or bool and give uint8.
 */
#include "internal.h"
#include <math.h>
#include <stdio.h>

static void spec_set(tc_outspec *spec, int o, int dtype, int ndim, const int64_t *sizes)
{
    spec->dtype[o] = dtype;
    spec->ndim[o] = ndim;
    memcpy(spec->size[o], sizes, sizeof(int64_t) * (size_t)ndim);
}

static int reduce_out_dtype(tc_op op, int dt)
{
    switch (op) {
    case TC_OP_SUM:
    case TC_OP_PROD: return tc_dtype_is_float((tc_dtype)dt) ? dt : TC_I64;
    case TC_OP_ALL:
    case TC_OP_ANY: return TC_U8;
    default: return dt;
    }
}

tc_status tc_prepare_reduce(const tc_kcall *k, tc_outspec *spec)
{
    const char *name = k->info->name;
    const tc_tensor *x = k->in[0];
    const tc_params *p = k->p;
    char buf[TC_SHAPE_BUF];
    int64_t dim = p->i[0];
    bool keep = p->i[1] != 0;
    tc_op op = k->op;

    if ((op == TC_OP_ALL || op == TC_OP_ANY) && x->dtype != TC_U8 && x->dtype != TC_BOOL)
        return tc_set_error(TC_ERR_DTYPE, "%s: input must be uint8 or bool, got %s", name,
                            tc_dtype_name((tc_dtype)x->dtype));
    if (op == TC_OP_NORM && isnan(p->s[0])) return tc_set_error(TC_ERR_ARG, "norm: p is NaN");

    bool all = dim == -1 || (x->ndim == 0 && dim == 0);
    int d = 0;
    if (!all) {
        int64_t w = dim < -1 ? dim + x->ndim : dim;
        if (w < 0 || w >= x->ndim)
            return tc_set_error(TC_ERR_INDEX, "%s: dim %lld out of range for the %d-dim tensor %s (-1 reduces all)",
                                name, (long long)dim, x->ndim, tc_shape_str(x, buf, sizeof buf));
        d = (int)w;
    }
    bool with_index = op == TC_OP_MAX || op == TC_OP_MIN;
    if (with_index) {
        if (all && tc_tensor_numel(x) == 0)
            return tc_set_error(TC_ERR_SHAPE, "%s: cannot reduce an empty dim: %s has no elements", name,
                                tc_shape_str(x, buf, sizeof buf));
        if (!all && x->size[d] == 0)
            return tc_set_error(TC_ERR_SHAPE, "%s: cannot reduce an empty dim: dim %d of %s has size 0", name, d,
                                tc_shape_str(x, buf, sizeof buf));
    }

    int nd = 0;
    int64_t sz[TC_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        if (all || i == d) {
            if (keep) sz[nd++] = 1;
        } else {
            sz[nd++] = x->size[i];
        }
    }
    spec->nout = with_index && !all ? 2 : 1;
    spec_set(spec, 0, reduce_out_dtype(op, x->dtype), nd, sz);
    if (spec->nout == 2) spec_set(spec, 1, TC_I64, nd, sz);
    return TC_OK;
}

/* Scans: i0 = dim (negative counts from the end); the result has the input's shape and
 * dtype (Torch7's cumsum keeps the type; integer sums wrap). */
tc_status tc_prepare_scan(const tc_kcall *k, tc_outspec *spec)
{
    const tc_tensor *x = k->in[0];
    int64_t dim = k->p->i[0], n = x->ndim > 0 ? x->ndim : 1;
    if (dim < -n || dim >= n) {
        char buf[TC_SHAPE_BUF];
        return tc_set_error(TC_ERR_INDEX, "%s: dim %lld out of range for the %d-dim tensor %s", k->info->name,
                            (long long)dim, x->ndim, tc_shape_str(x, buf, sizeof buf));
    }
    spec->nout = 1;
    spec_set(spec, 0, x->dtype, x->ndim, x->size);
    return TC_OK;
}
