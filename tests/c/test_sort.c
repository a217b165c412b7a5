/* test_sort.c -- the sort kind: sort, topk, kthvalue, median, mode. Expected values come
 * from PyTorch 1.13 (stable sort; the calls are written next to each table); dims and
 * indices are 0-based as in the C API. */
#include "ctest.h"


/* (values, indices) = op(x; i0..i3) */
static tc_status run2(tc_op op, const tc_tensor *x, int64_t i0, int64_t i1, int64_t i2, int64_t i3, tc_tensor **v,
                      tc_tensor **ix)
{
    tc_params p = {.i = {i0, i1, i2, i3}};
    tc_tensor *out[2] = {*v, *ix};
    tc_status s = tc_op_run(op, &x, 1, &p, out, 2);
    *v = out[0], *ix = out[1];
    return s;
}

static void release(tc_tensor *a, tc_tensor *b, tc_tensor *c, tc_tensor *d)
{
    tc_tensor_release(a), tc_tensor_release(b), tc_tensor_release(c), tc_tensor_release(d);
}

static tc_tensor *transposed(const tc_tensor *t)
{
    tc_params p = {.i = {0, 1}};
    tc_tensor *v = NULL;
    return tc_op_run(TC_OP_TRANSPOSE, &t, 1, &p, &v, 1) ? NULL : v;
}

TEST(sort_nan_ties_stable)
{
    tc_tensor *x = ct_from(TC_F32, 2, SZ(2, 6), VALS(3, NAN, 1, 2, 1, -0.0, 5, 4, 4, NAN, NAN, 0));
    tc_tensor *v = NULL, *i = NULL, *dv = NULL, *di = NULL;
    CHECK_OK(run2(TC_OP_SORT, x, -1, 0, 0, 0, &v, &i)); /* torch.sort(x, dim=-1, stable=True) */
    CHECK(v->dtype == TC_F32 && i->dtype == TC_I64 && ct_shape_is(v, 2, SZ(2, 6)) && ct_shape_is(i, 2, SZ(2, 6)));
    CHECK(SAME(v, -0.0, 1, 1, 2, 3, NAN, 0, 4, 4, 5, NAN, NAN));
    CHECK(SAME(i, 5, 2, 4, 3, 0, 1, 5, 1, 2, 0, 3, 4));
    CHECK_OK(run2(TC_OP_SORT, x, 1, 1, 0, 0, &dv, &di)); /* descending=True */
    CHECK(SAME(dv, NAN, 3, 2, 1, 1, -0.0, NAN, NAN, 5, 4, 4, 0));
    CHECK(SAME(di, 1, 0, 3, 2, 4, 5, 3, 4, 0, 1, 2, 5));
    release(x, v, i, dv);
    tc_tensor_release(di);
}

TEST(sort_int_dim0_noncontiguous)
{
    tc_tensor *y = ct_from(TC_I32, 2, SZ(3, 2), VALS(4, 1, 2, 2, 9, -3)), *yt = transposed(y);
    tc_tensor *v = NULL, *i = NULL, *tv = NULL, *ti = NULL;
    CHECK_OK(run2(TC_OP_SORT, y, 0, 0, 0, 0, &v, &i)); /* torch.sort(y, dim=0, stable=True) */
    CHECK(v->dtype == TC_I32 && SAME(v, 2, -3, 4, 1, 9, 2) && SAME(i, 1, 2, 0, 0, 2, 1));
    CHECK_OK(run2(TC_OP_SORT, yt, -1, 1, 0, 0, &tv, &ti)); /* sort(y.t(), 1, descending) */
    CHECK(SAME(tv, 9, 4, 2, 2, 1, -3) && SAME(ti, 2, 0, 1, 1, 0, 2));
    release(y, yt, v, i);
    release(tv, ti, NULL, NULL);
}

TEST(sort_given_results_and_inplace)
{
    /* Torch7's x:sort() writes into x itself: the row must be read before it is written */
    tc_tensor *x = ct_from(TC_F64, 1, SZ(5), VALS(3, 1, 2, 5, 4)), *i = ct_arange(TC_I64, 1, SZ(2));
    tc_tensor *v = x;
    CHECK_OK(run2(TC_OP_SORT, x, 0, 0, 0, 0, &v, &i));
    CHECK(v == x && SAME(x, 1, 2, 3, 4, 5) && SAME(i, 1, 2, 0, 4, 3));
    tc_tensor *wrong = ct_arange(TC_I32, 1, SZ(5)), *ok = NULL;
    CHECK_ERR(run2(TC_OP_SORT, x, 0, 0, 0, 0, &ok, &wrong), TC_ERR_DTYPE, "sort: result 2 is int32, expected int64");
    CHECK(ok == NULL);
    release(x, i, wrong, NULL);
}

TEST(sort_half_and_scalar)
{
    tc_tensor *h = ct_from(TC_F16, 1, SZ(4), VALS(0.5, -2, 65504, 0.25)), *v = NULL, *i = NULL;
    CHECK_OK(run2(TC_OP_SORT, h, 0, 1, 0, 0, &v, &i));
    CHECK(v->dtype == TC_F16 && SAME(v, 65504, 0.5, 0.25, -2) && SAME(i, 2, 0, 3, 1));
    tc_tensor *s = NULL, *sv = NULL, *si = NULL;
    tc_tensor_new(TC_F32, 0, SZ(1), /* sizes unused */ &s);
    tc_tensor_set_value(s, NULL, 5);
    CHECK_OK(run2(TC_OP_SORT, s, -1, 0, 0, 0, &sv, &si)); /* a 0-dim tensor sorts to itself */
    CHECK(sv->ndim == 0 && si->ndim == 0 && SAME(sv, 5) && SAME(si, 0));
    release(h, v, i, s);
    release(sv, si, NULL, NULL);
}

/* Many long rows: the blocks run on several threads. Checks order and that every index
 * points at its value. */
TEST(sort_large_parallel)
{
    int64_t rows = 64, n = 4099;
    tc_tensor *x = NULL, *v = NULL, *i = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 2, SZ(rows, n), &x));
    float *d = tc_tensor_data(x);
    uint32_t r = 12345;
    for (int64_t k = 0; k < rows * n; k++) {
        r = r * 1664525u + 1013904223u;
        d[k] = (float)(r >> 20) - 2048; /* many duplicates */
    }
    CHECK_OK(run2(TC_OP_SORT, x, 1, 0, 0, 0, &v, &i));
    const float *sv = tc_tensor_data(v);
    const int64_t *si = tc_tensor_data(i);
    int bad = 0;
    for (int64_t row = 0; row < rows; row++)
        for (int64_t k = 0; k < n; k++) {
            int64_t at = row * n + k;
            if (si[at] < 0 || si[at] >= n || d[row * n + si[at]] != sv[at]) bad++;
            if (k > 0 && (sv[at - 1] > sv[at] || (sv[at - 1] == sv[at] && si[at - 1] >= si[at]))) bad++;
        }
    CHECK(bad == 0);
    release(x, v, i, NULL);
}

TEST(topk_values)
{
    tc_tensor *z = ct_from(TC_F32, 2, SZ(2, 5), VALS(1, 7, 3, 9, 5, 2, 8, 6, 0, 4));
    tc_tensor *v = NULL, *i = NULL, *sv = NULL, *si = NULL, *zv = NULL, *zi = NULL;
    CHECK_OK(run2(TC_OP_TOPK, z, 1, 2, 1, 1, &v, &i)); /* topk(z, 2, dim=1) */
    CHECK(ct_shape_is(v, 2, SZ(2, 2)) && SAME(v, 9, 7, 8, 6) && SAME(i, 3, 1, 1, 2));
    CHECK_OK(run2(TC_OP_TOPK, z, -1, 3, 0, 1, &sv, &si)); /* largest=False */
    CHECK(SAME(sv, 1, 3, 5, 0, 2, 4) && SAME(si, 0, 2, 4, 3, 0, 4));
    tc_tensor *zt = transposed(z), *tv = NULL, *ti = NULL;
    CHECK_OK(run2(TC_OP_TOPK, zt, 1, 1, 1, 1, &tv, &ti)); /* topk(z, 1, dim=0) seen transposed */
    CHECK(ct_shape_is(tv, 2, SZ(5, 1)) && SAME(tv, 2, 8, 6, 9, 5) && SAME(ti, 1, 1, 1, 0, 0));
    CHECK_OK(run2(TC_OP_TOPK, z, 1, 0, 1, 1, &zv, &zi));
    CHECK(ct_shape_is(zv, 2, SZ(2, 0)) && ct_shape_is(zi, 2, SZ(2, 0)));
    tc_tensor *iz = ct_from(TC_I8, 1, SZ(4), VALS(-3, 7, -3, 1)), *iv = NULL, *ii = NULL;
    CHECK_OK(run2(TC_OP_TOPK, iz, 0, 2, 0, 1, &iv, &ii)); /* ties go to the lower index */
    CHECK(SAME(iv, -3, -3) && SAME(ii, 0, 2));
    release(z, v, i, sv);
    release(si, zv, zi, zt);
    release(tv, ti, iz, iv);
    tc_tensor_release(ii);
}

TEST(topk_kthvalue_errors)
{
    tc_tensor *z = ct_arange(TC_F32, 2, SZ(2, 5)), *v = NULL, *i = NULL, *b = ct_from(TC_BOOL, 1, SZ(2), VALS(1, 0));
    CHECK_ERR(run2(TC_OP_TOPK, z, 1, 6, 1, 1, &v, &i), TC_ERR_INDEX, "topk: k 6 out of range for dim 1 of size 5");
    CHECK_ERR(run2(TC_OP_TOPK, z, 0, -1, 1, 1, &v, &i), TC_ERR_INDEX, "topk: k -1 out of range for dim 0 of size 2");
    CHECK_ERR(run2(TC_OP_KTHVALUE, z, 1, 6, 0, 0, &v, &i), TC_ERR_INDEX, "kthvalue: k 6 out of range for dim 1 of size 5");
    CHECK_ERR(run2(TC_OP_KTHVALUE, z, 1, 0, 0, 0, &v, &i), TC_ERR_INDEX, "kthvalue: k 0 out of range");
    CHECK_ERR(run2(TC_OP_SORT, z, 2, 0, 0, 0, &v, &i), TC_ERR_INDEX, "sort: dim 2 out of range for a 2-dim tensor");
    CHECK_ERR(run2(TC_OP_SORT, b, 0, 0, 0, 0, &v, &i), TC_ERR_DTYPE, "sort: bool tensors are not supported");
    tc_tensor *e = NULL;
    tc_tensor_new(TC_F32, 2, SZ(3, 0), &e);
    CHECK_ERR(run2(TC_OP_MEDIAN, e, 1, 0, 0, 0, &v, &i), TC_ERR_SHAPE, "median: dim 1 has no elements");
    CHECK_ERR(run2(TC_OP_MODE, e, -1, 0, 0, 0, &v, &i), TC_ERR_SHAPE, "mode: dim 1 has no elements");
    CHECK(v == NULL && i == NULL);
    release(z, b, e, NULL);
}

TEST(kthvalue_values)
{
    tc_tensor *z = ct_from(TC_F64, 2, SZ(2, 5), VALS(1, 7, 3, 9, 5, 2, 8, 6, 0, 4));
    tc_tensor *v = NULL, *i = NULL, *kv = NULL, *ki = NULL;
    CHECK_OK(run2(TC_OP_KTHVALUE, z, 1, 2, 0, 0, &v, &i)); /* kthvalue(z, 2, dim=1) */
    CHECK(ct_shape_is(v, 1, SZ(2)) && SAME(v, 3, 2) && SAME(i, 2, 0));
    CHECK_OK(run2(TC_OP_KTHVALUE, z, -2, 1, 1, 0, &kv, &ki)); /* k=1, dim=0, keepdim */
    CHECK(ct_shape_is(kv, 2, SZ(1, 5)) && ct_shape_is(ki, 2, SZ(1, 5)));
    CHECK(SAME(kv, 1, 7, 3, 0, 4) && SAME(ki, 0, 0, 0, 1, 1));
    tc_tensor *n = ct_from(TC_F32, 1, SZ(3), VALS(2, NAN, 1)), *nv = NULL, *ni = NULL;
    CHECK_OK(run2(TC_OP_KTHVALUE, n, 0, 3, 0, 0, &nv, &ni)); /* NaN is the largest */
    CHECK(nv->ndim == 0 && SAME(nv, NAN) && SAME(ni, 1));
    release(z, v, i, kv);
    release(ki, n, nv, ni);
}

TEST(median_values)
{
    tc_tensor *m = ct_from(TC_F32, 2, SZ(3, 4), VALS(3, 1, 4, 2, NAN, 1, 2, NAN, 5, 6, 7, 8));
    tc_tensor *v = NULL, *i = NULL, *kv = NULL, *ki = NULL;
    CHECK_OK(run2(TC_OP_MEDIAN, m, 1, 0, 0, 0, &v, &i)); /* median(m, 1): lower middle, NaN wins */
    CHECK(SAME(v, 2, NAN, 6) && SAME(i, 3, 0, 1));
    tc_tensor *q = ct_from(TC_I64, 2, SZ(2, 3), VALS(3, 1, 2, 9, 8, 7)), *qt = transposed(q);
    CHECK_OK(run2(TC_OP_MEDIAN, qt, 1, 1, 0, 0, &kv, &ki)); /* median(q, 0, keepdim) seen transposed */
    CHECK(ct_shape_is(kv, 2, SZ(3, 1)) && SAME(kv, 3, 1, 2) && SAME(ki, 0, 0, 0));
    release(m, v, i, q);
    release(qt, kv, ki, NULL);
}

TEST(mode_values)
{
    tc_tensor *md = ct_from(TC_I64, 2, SZ(2, 5), VALS(2, 1, 2, 1, 3, 5, 5, 4, 4, 4)), *v = NULL, *i = NULL;
    CHECK_OK(run2(TC_OP_MODE, md, 1, 0, 0, 0, &v, &i)); /* mode(md, 1): smallest on ties, last index */
    CHECK(SAME(v, 1, 4) && SAME(i, 3, 4));
    tc_tensor *f = ct_from(TC_F32, 2, SZ(3, 2), VALS(1, 2, 1, 3, 2, 3)), *fv = NULL, *fi = NULL;
    CHECK_OK(run2(TC_OP_MODE, f, 0, 1, 0, 0, &fv, &fi)); /* mode(f, 0, keepdim=True) */
    CHECK(ct_shape_is(fv, 2, SZ(1, 2)) && SAME(fv, 1, 3) && SAME(fi, 1, 2));
    /* NaN never equals NaN, so NaNs do not form a run (PyTorch's kernel compares with ==) */
    tc_tensor *n = ct_from(TC_F64, 1, SZ(5), VALS(3, NAN, 1, NAN, 2)), *nv = NULL, *ni = NULL;
    CHECK_OK(run2(TC_OP_MODE, n, 0, 0, 0, 0, &nv, &ni));
    CHECK(SAME(nv, 1) && SAME(ni, 2));
    release(md, v, i, f);
    release(fv, fi, n, nv);
    tc_tensor_release(ni);
}
