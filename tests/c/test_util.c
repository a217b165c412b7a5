/* test_util.c -- helpers for building small tensors in C tests. */
#include "ctest.h"

tc_tensor *ct_from(tc_dtype dt, int ndim, const int64_t *sizes, const double *values)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, ndim, sizes, &t)) return NULL;
    int64_t n = tc_tensor_numel(t), idx[TC_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = ndim - 1; d >= 0; d--) idx[d] = r % sizes[d], r /= sizes[d];
        tc_tensor_set_value(t, idx, values[i]);
    }
    return t;
}

tc_tensor *ct_arange(tc_dtype dt, int ndim, const int64_t *sizes)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, ndim, sizes, &t)) return NULL;
    int64_t n = tc_tensor_numel(t), idx[TC_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = ndim - 1; d >= 0; d--) idx[d] = r % sizes[d], r /= sizes[d];
        tc_tensor_set_value(t, idx, (double)i);
    }
    return t;
}

double ct_at(const tc_tensor *t, int64_t flat)
{
    int64_t idx[TC_MAX_DIMS] = {0}, r = flat;
    for (int d = t->ndim - 1; d >= 0; d--) idx[d] = r % t->size[d], r /= t->size[d];
    double v = NAN;
    tc_tensor_get(t, idx, &v);
    return v;
}

tc_status ct_run1(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, const tc_params *p,
                  tc_tensor **out)
{
    const tc_tensor *in[3] = {a, b, c};
    int n = c ? 3 : b ? 2 : a ? 1 : 0;
    return tc_op_run(op, in, n, p, out, 1);
}
