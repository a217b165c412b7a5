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

tc_tensor *ct_transposed(const tc_tensor *t, int a, int b)
{
    tc_params p = {.i = {a, b}};
    tc_tensor *v = NULL;
    tc_op_run(TC_OP_TRANSPOSE, &t, 1, &p, &v, 1);
    return v;
}

int ct_shape_is(const tc_tensor *t, int nd, const int64_t *sz)
{
    if (!t || t->ndim != nd) return 0;
    for (int d = 0; d < nd; d++)
        if (t->size[d] != sz[d]) return 0;
    return 1;
}

int ct_near(double got, double want, double tol)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

int ct_same_vals(const tc_tensor *t, const double *v, int64_t n)
{
    if (!t || tc_tensor_numel(t) != n) {
        printf("    %lld elements, expected %lld\n", t ? (long long)tc_tensor_numel(t) : -1LL, (long long)n);
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        double a = ct_at(t, i);
        if (!(a == v[i] || (a != a && v[i] != v[i]))) {
            printf("    element %lld is %g, expected %g\n", (long long)i, a, v[i]);
            return 0;
        }
    }
    return 1;
}

static tc_tensor *pool[1024];
static int npool;

tc_tensor *ct_keep(tc_tensor *t)
{
    if (t && npool < (int)(sizeof pool / sizeof *pool)) pool[npool++] = t;
    return t;
}

void ct_drop(void)
{
    for (int i = 0; i < npool; i++) tc_tensor_release(pool[i]);
    npool = 0;
}

int ct_close_all(const tc_tensor *a, const tc_tensor *b, double tol)
{
    if (!a || !b || !ct_shape_is(b, a->ndim, a->size)) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (!ct_near(ct_at(a, i), ct_at(b, i), tol)) {
            printf("  element %lld: %.12g vs %.12g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            return 0;
        }
    return 1;
}
