/* test_index.c -- the index kind (index_select/copy/add/fill, gather, scatter*, masked_*,
 * nonzero) and the join kind (cat). Expected values come from PyTorch 1.13 (the calls are
 * written next to each table); dims and indices are 0-based as in the C API. */
#include "ctest.h"

/* t's elements in row-major order equal v[0..n) (NaN matches NaN). */

static tc_tensor *idx1(int n, const double *v) { return ct_from(TC_I64, 1, SZ(n), v); }

static tc_tensor *transposed(const tc_tensor *t)
{
    tc_params p = {.i = {0, 1}};
    tc_tensor *v = NULL;
    return tc_op_run(TC_OP_TRANSPOSE, &t, 1, &p, &v, 1) ? NULL : v;
}

static void release(tc_tensor *a, tc_tensor *b, tc_tensor *c, tc_tensor *d)
{
    tc_tensor_release(a), tc_tensor_release(b), tc_tensor_release(c), tc_tensor_release(d);
}

/* ---- index_select ------------------------------------------------------------------------- */

TEST(index_select_values)
{
    tc_tensor *x = ct_arange(TC_F32, 2, SZ(3, 4)), *i0 = idx1(3, VALS(2, 0, 2)), *i1 = idx1(2, VALS(3, 1));
    tc_tensor *a = NULL, *b = NULL;
    tc_params p = {.i = {0}};
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, x, i0, NULL, &p, &a));
    CHECK(ct_shape_is(a, 2, SZ(3, 4)));
    CHECK(SAME(a, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11)); /* x.index_select(0, [2,0,2]) */
    p.i[0] = -1;
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, x, i1, NULL, &p, &b));
    CHECK(ct_shape_is(b, 2, SZ(3, 2)));
    CHECK(SAME(b, 3, 1, 7, 5, 11, 9)); /* x.index_select(-1, [3,1]) */
    release(x, i0, i1, a);
    tc_tensor_release(b);
}

TEST(index_select_noncontiguous_int)
{
    tc_tensor *x = ct_arange(TC_I16, 2, SZ(3, 4)), *xt = transposed(x), *i = idx1(2, VALS(2, 0)), *a = NULL;
    tc_params p = {.i = {1}};
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, xt, i, NULL, &p, &a));
    CHECK(a->dtype == TC_I16 && ct_shape_is(a, 2, SZ(4, 2)));
    CHECK(SAME(a, 8, 0, 9, 1, 10, 2, 11, 3)); /* x.t().index_select(1, [2,0]) */
    /* a given result of the wrong size is resized */
    tc_tensor *r = ct_arange(TC_I16, 1, SZ(3));
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, xt, i, NULL, &p, &r));
    CHECK(ct_shape_is(r, 2, SZ(4, 2)) && SAME(r, 8, 0, 9, 1, 10, 2, 11, 3));
    release(x, xt, i, a);
    tc_tensor_release(r);
}

TEST(index_select_half_and_bool)
{
    tc_tensor *h = ct_from(TC_F16, 1, SZ(4), VALS(0.5, -1.5, 2.25, 8)), *i = idx1(3, VALS(3, 3, 1)), *a = NULL;
    tc_params p = {.i = {0}};
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, h, i, NULL, &p, &a));
    CHECK(a->dtype == TC_F16 && SAME(a, 8, 8, -1.5));
    tc_tensor *bo = ct_from(TC_BOOL, 1, SZ(4), VALS(1, 0, 0, 1)), *b = NULL;
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, bo, i, NULL, &p, &b));
    CHECK(b->dtype == TC_BOOL && SAME(b, 1, 1, 0));
    release(h, i, a, bo);
    tc_tensor_release(b);
}

TEST(index_select_errors)
{
    tc_tensor *x = ct_arange(TC_F32, 2, SZ(5, 2)), *bad = idx1(3, VALS(1, 7, 0));
    tc_tensor *wrong = ct_from(TC_I32, 1, SZ(2), VALS(0, 1)), *two = ct_from(TC_I64, 2, SZ(1, 2), VALS(0, 1));
    tc_tensor *r = ct_arange(TC_F32, 1, SZ(3));
    tc_params p = {.i = {0}};
    CHECK_ERR(ct_run1(TC_OP_INDEX_SELECT, x, bad, NULL, &p, &r), TC_ERR_INDEX,
              "index_select: index 7 out of range for dim 0 of size 5");
    CHECK(ct_shape_is(r, 1, SZ(3)) && SAME(r, 0, 1, 2)); /* the given result is untouched */
    tc_tensor *o = NULL;
    CHECK_ERR(ct_run1(TC_OP_INDEX_SELECT, x, wrong, NULL, &p, &o), TC_ERR_DTYPE, "index tensor must be int64, got int32");
    CHECK_ERR(ct_run1(TC_OP_INDEX_SELECT, x, two, NULL, &p, &o), TC_ERR_SHAPE, "index must be 0-dim or 1-dim");
    p.i[0] = 2;
    CHECK_ERR(ct_run1(TC_OP_INDEX_SELECT, x, wrong, NULL, &p, &o), TC_ERR_INDEX, "dim 2 out of range");
    CHECK(o == NULL);
    release(x, bad, wrong, two);
    tc_tensor_release(r);
}

/* ---- index_copy / index_add / index_fill -------------------------------------------------- */

TEST(index_copy_functional_and_inplace)
{
    tc_tensor *d = ct_from(TC_F64, 2, SZ(3, 4), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    tc_tensor *i = idx1(2, VALS(2, 0)), *s = ct_arange(TC_F64, 2, SZ(2, 4)), *o = NULL;
    tc_params p = {.i = {0}};
    CHECK_OK(ct_run1(TC_OP_INDEX_COPY, d, i, s, &p, &o));
    CHECK(o != d && SAME(o, 4, 5, 6, 7, 0, 0, 0, 0, 0, 1, 2, 3)); /* d.index_copy(0, [2,0], s) */
    CHECK(SAME(d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));            /* functional: dst kept */
    tc_tensor *s1 = ct_arange(TC_F64, 2, SZ(3, 2)), *i1 = idx1(2, VALS(3, 0)), *inplace = d;
    p.i[0] = -1;
    CHECK_OK(ct_run1(TC_OP_INDEX_COPY, d, i1, s1, &p, &inplace));
    CHECK(inplace == d && SAME(d, 1, 0, 0, 0, 3, 0, 0, 2, 5, 0, 0, 4)); /* d.index_copy_(-1, [3,0], s1) */
    release(d, i, s, o);
    release(s1, i1, NULL, NULL);
}

TEST(index_copy_noncontiguous_dst)
{
    /* dst is the transpose of a (4,3): writes go through its strides */
    tc_tensor *base = ct_from(TC_F32, 2, SZ(4, 3), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    tc_tensor *d = transposed(base), *i = idx1(2, VALS(2, 0)), *s = ct_arange(TC_F32, 2, SZ(2, 4)), *io = d;
    tc_params p = {.i = {0}};
    CHECK_OK(ct_run1(TC_OP_INDEX_COPY, d, i, s, &p, &io));
    CHECK(SAME(d, 4, 5, 6, 7, 0, 0, 0, 0, 0, 1, 2, 3));
    CHECK(SAME(base, 4, 0, 0, 5, 0, 1, 6, 0, 2, 7, 0, 3)); /* seen from the (4,3) storage */
    release(base, d, i, s);
}

TEST(index_copy_errors_leave_dst)
{
    tc_tensor *d = ct_arange(TC_F32, 2, SZ(3, 4)), *i = idx1(2, VALS(0, 3)), *s = ct_arange(TC_F32, 2, SZ(2, 4));
    tc_tensor *io = d, *s2 = ct_arange(TC_F32, 2, SZ(2, 3)), *si = ct_arange(TC_I32, 2, SZ(2, 4));
    tc_params p = {.i = {0}};
    CHECK_ERR(ct_run1(TC_OP_INDEX_COPY, d, i, s, &p, &io), TC_ERR_INDEX,
              "index_copy: index 3 out of range for dim 0 of size 3");
    CHECK(SAME(d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    tc_tensor *ok = idx1(2, VALS(0, 1));
    CHECK_ERR(ct_run1(TC_OP_INDEX_COPY, d, ok, s2, &p, &io), TC_ERR_SHAPE,
              "source (2,3) does not fit destination (3,4) with 2 indices along dim 0");
    CHECK_ERR(ct_run1(TC_OP_INDEX_COPY, d, ok, si, &p, &io), TC_ERR_DTYPE, "source is int32 but the destination is float32");
    CHECK_ERR(ct_run1(TC_OP_INDEX_ADD, d, i, s, &p, &io), TC_ERR_INDEX, "index_add: index 3 out of range for dim 0 of size 3");
    CHECK_ERR(ct_run1(TC_OP_INDEX_FILL, d, i, NULL, &p, &io), TC_ERR_INDEX,
              "index_fill: index 3 out of range for dim 0 of size 3");
    CHECK(SAME(d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    release(d, i, s, s2);
    release(si, ok, NULL, NULL);
}

TEST(index_add_duplicates)
{
    tc_tensor *d = ct_from(TC_I32, 2, SZ(2, 3), VALS(1, 1, 1, 1, 1, 1)), *i = idx1(3, VALS(0, 0, 2));
    tc_tensor *s = ct_arange(TC_I32, 2, SZ(2, 3)), *o = NULL, *io = d;
    tc_params p = {.i = {1}};
    CHECK_OK(ct_run1(TC_OP_INDEX_ADD, d, i, s, &p, &o));
    CHECK(SAME(o, 2, 1, 3, 8, 1, 6)); /* ones.index_add(1, [0,0,2], arange(6).view(2,3)) */
    CHECK_OK(ct_run1(TC_OP_INDEX_ADD, d, i, s, &p, &io));
    CHECK_OK(ct_run1(TC_OP_INDEX_ADD, d, i, s, &p, &io));
    CHECK(SAME(d, 3, 1, 5, 15, 1, 11));
    /* f16 adds in f32 */
    tc_tensor *h = ct_from(TC_F16, 1, SZ(3), VALS(0.5, 1, 2)), *hs = ct_from(TC_F16, 1, SZ(2), VALS(0.25, 4)), *ho = NULL;
    tc_tensor *hi = idx1(2, VALS(2, 2));
    p.i[0] = 0;
    CHECK_OK(ct_run1(TC_OP_INDEX_ADD, h, hi, hs, &p, &ho));
    CHECK(ho->dtype == TC_F16 && SAME(ho, 0.5, 1, 6.25));
    release(d, i, s, o);
    release(h, hs, ho, hi);
}

TEST(index_fill_values)
{
    tc_tensor *d = ct_arange(TC_I64, 2, SZ(2, 4)), *i = idx1(2, VALS(1, 3)), *o = NULL;
    tc_params p = {.i = {-1}, .s = {-7}};
    CHECK_OK(ct_run1(TC_OP_INDEX_FILL, d, i, NULL, &p, &o));
    CHECK(SAME(o, 0, -7, 2, -7, 4, -7, 6, -7)); /* arange(8).view(2,4).index_fill(1, [1,3], -7) */
    CHECK(SAME(d, 0, 1, 2, 3, 4, 5, 6, 7));
    tc_tensor *f = ct_arange(TC_F32, 2, SZ(3, 2)), *ft = transposed(f), *io = ft, *i0 = idx1(1, VALS(2));
    p.i[0] = 1, p.s[0] = 0.5;
    CHECK_OK(ct_run1(TC_OP_INDEX_FILL, ft, i0, NULL, &p, &io));
    CHECK(SAME(f, 0, 1, 2, 3, 0.5, 0.5));
    release(d, i, o, f);
    release(ft, i0, NULL, NULL);
}

/* ---- gather / scatter ------------------------------------------------------------------------- */

TEST(gather_values)
{
    tc_tensor *x = ct_arange(TC_F32, 2, SZ(3, 4)), *xt = transposed(x);
    tc_tensor *i1 = ct_from(TC_I64, 2, SZ(2, 2), VALS(0, 3, 1, 1));
    tc_tensor *i0 = ct_from(TC_I64, 2, SZ(2, 4), VALS(2, 0, 1, 2, 0, 0, 0, 1));
    tc_tensor *it = ct_from(TC_I64, 2, SZ(2, 3), VALS(2, 0, 1, 0, 2, 1));
    tc_tensor *a = NULL, *b = NULL, *c = NULL;
    tc_params p = {.i = {1}};
    CHECK_OK(ct_run1(TC_OP_GATHER, x, i1, NULL, &p, &a));
    CHECK(ct_shape_is(a, 2, SZ(2, 2)) && SAME(a, 0, 3, 5, 5)); /* gather(x, 1, [[0,3],[1,1]]) */
    p.i[0] = -2;
    CHECK_OK(ct_run1(TC_OP_GATHER, x, i0, NULL, &p, &b));
    CHECK(SAME(b, 8, 1, 6, 11, 0, 1, 2, 7));
    CHECK_OK(ct_run1(TC_OP_GATHER, xt, it, NULL, &p, &c)); /* gather(x.t(), 0, ...) */
    CHECK(SAME(c, 2, 4, 9, 0, 6, 9));
    release(x, xt, i1, i0);
    release(it, a, b, c);
}

TEST(gather_errors)
{
    tc_tensor *x = ct_arange(TC_F32, 2, SZ(3, 4)), *bad = ct_from(TC_I64, 2, SZ(1, 2), VALS(0, 4));
    tc_tensor *big = ct_from(TC_I64, 2, SZ(4, 1), VALS(0, 0, 0, 0)), *flat = idx1(2, VALS(0, 1)), *o = NULL;
    tc_params p = {.i = {1}};
    CHECK_ERR(ct_run1(TC_OP_GATHER, x, bad, NULL, &p, &o), TC_ERR_INDEX, "gather: index 4 out of range for dim 1 of size 4");
    CHECK_ERR(ct_run1(TC_OP_GATHER, x, big, NULL, &p, &o), TC_ERR_SHAPE, "index (4,1) is larger than source (3,4) at dim 0");
    CHECK_ERR(ct_run1(TC_OP_GATHER, x, flat, NULL, &p, &o), TC_ERR_SHAPE, "must have the same number of dims");
    CHECK(o == NULL);
    release(x, bad, big, flat);
}

TEST(scatter_values)
{
    tc_tensor *z = ct_from(TC_F32, 2, SZ(3, 4), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    tc_tensor *src = ct_from(TC_F32, 2, SZ(3, 4), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
    tc_tensor *i = ct_from(TC_I64, 2, SZ(1, 3), VALS(2, 0, 1)), *o = NULL;
    tc_params p = {.i = {0}};
    CHECK_OK(ct_run1(TC_OP_SCATTER, z, i, src, &p, &o));
    CHECK(SAME(o, 0, 2, 0, 0, 0, 0, 3, 0, 1, 0, 0, 0)); /* zeros.scatter(0, [[2,0,1]], src) */
    CHECK(SAME(z, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    tc_tensor *l = ct_from(TC_I64, 2, SZ(2, 4), VALS(0, 0, 0, 0, 0, 0, 0, 0)), *ia = ct_from(TC_I64, 2, SZ(2, 3), VALS(0, 0, 3, 1, 1, 1));
    tc_tensor *sa = ct_from(TC_I64, 2, SZ(2, 3), VALS(1, 2, 3, 4, 5, 6)), *io = l;
    p.i[0] = 1;
    CHECK_OK(ct_run1(TC_OP_SCATTER_ADD, l, ia, sa, &p, &io));
    CHECK(io == l && SAME(l, 3, 0, 0, 3, 0, 15, 0, 0)); /* scatter_add(1, [[0,0,3],[1,1,1]], 1..6) */
    tc_tensor *f = ct_from(TC_F64, 2, SZ(2, 3), VALS(0, 0, 0, 0, 0, 0)), *fi = ct_from(TC_I64, 2, SZ(2, 1), VALS(2, 0));
    tc_tensor *fo = NULL;
    tc_params pf = {.i = {-1}, .s = {5.5}};
    CHECK_OK(ct_run1(TC_OP_SCATTER_FILL, f, fi, NULL, &pf, &fo));
    CHECK(SAME(fo, 0, 0, 5.5, 5.5, 0, 0));
    release(z, src, i, o);
    release(l, ia, sa, f);
    release(fi, fo, NULL, NULL);
}

TEST(scatter_noncontiguous_and_errors)
{
    /* dst is a transposed (4,3) zero tensor: scatter along dim 1 of the (3,4) view */
    tc_tensor *base = ct_from(TC_F32, 2, SZ(4, 3), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), *d = transposed(base);
    tc_tensor *i = ct_from(TC_I64, 2, SZ(3, 1), VALS(3, 0, 2)), *s = ct_from(TC_F32, 2, SZ(3, 1), VALS(7, 8, 9)), *io = d;
    tc_params p = {.i = {1}};
    CHECK_OK(ct_run1(TC_OP_SCATTER, d, i, s, &p, &io));
    CHECK(SAME(d, 0, 0, 0, 7, 8, 0, 0, 0, 0, 0, 9, 0));
    tc_tensor *bad = ct_from(TC_I64, 2, SZ(3, 1), VALS(0, 9, 1));
    CHECK_ERR(ct_run1(TC_OP_SCATTER, d, bad, s, &p, &io), TC_ERR_INDEX, "scatter: index 9 out of range for dim 1 of size 4");
    CHECK_ERR(ct_run1(TC_OP_SCATTER_ADD, d, bad, s, &p, &io), TC_ERR_INDEX, "scatter_add: index 9 out of range");
    CHECK_ERR(ct_run1(TC_OP_SCATTER_FILL, d, bad, NULL, &p, &io), TC_ERR_INDEX, "scatter_fill: index 9 out of range");
    CHECK(SAME(d, 0, 0, 0, 7, 8, 0, 0, 0, 0, 0, 9, 0)); /* unchanged by the failures */
    tc_tensor *fi = ct_from(TC_F32, 2, SZ(3, 1), VALS(0, 1, 1));
    CHECK_ERR(ct_run1(TC_OP_SCATTER, d, fi, s, &p, &io), TC_ERR_DTYPE, "scatter: index tensor must be int64, got float32");
    tc_tensor *small = ct_from(TC_F32, 2, SZ(2, 1), VALS(1, 2));
    CHECK_ERR(ct_run1(TC_OP_SCATTER, d, i, small, &p, &io), TC_ERR_SHAPE, "index (3,1) is larger than source (2,1) at dim 0");
    release(base, d, i, s);
    release(bad, fi, small, NULL);
}

/* An index that aliases the destination's memory is read before anything is written. */
TEST(scatter_index_aliases_dst)
{
    tc_tensor *d = ct_from(TC_I64, 1, SZ(3), VALS(2, 0, 1)), *io = d;
    tc_params p = {.i = {0}};
    CHECK_OK(ct_run1(TC_OP_SCATTER, d, d, d, &p, &io));
    CHECK(SAME(d, 0, 1, 2)); /* d[d[i]] = d[i] with the old d */
    tc_tensor_release(d);
}

/* ---- masked ops and nonzero ------------------------------------------------------------------ */

TEST(masked_fill_broadcast)
{
    tc_tensor *d = ct_from(TC_F32, 2, SZ(2, 2), VALS(1, 2, 3, 4)), *m = ct_from(TC_BOOL, 1, SZ(2), VALS(1, 0)), *o = NULL;
    tc_params p = {.s = {9}};
    CHECK_OK(ct_run1(TC_OP_MASKED_FILL, d, m, NULL, &p, &o));
    CHECK(SAME(o, 9, 2, 9, 4)); /* masked_fill([True, False], 9) */
    CHECK(SAME(d, 1, 2, 3, 4));
    tc_tensor *mu = ct_from(TC_U8, 2, SZ(2, 2), VALS(0, 3, 0, 1)), *di = ct_arange(TC_I8, 2, SZ(2, 2)), *dt = transposed(di);
    tc_tensor *io = dt;
    p.s[0] = -5;
    CHECK_OK(ct_run1(TC_OP_MASKED_FILL, dt, mu, NULL, &p, &io));
    CHECK(SAME(dt, 0, -5, 1, -5));
    CHECK(SAME(di, 0, 1, -5, -5));
    release(d, m, o, mu);
    release(di, dt, NULL, NULL);
}

TEST(masked_fill_large_parallel)
{
    int64_t n = 300000;
    tc_tensor *d = ct_arange(TC_F64, 2, SZ(n / 100, 100)), *io = d;
    tc_tensor *m = ct_arange(TC_U8, 1, SZ(100)); /* 0, 1, 2, ...: every column but the first is set */
    tc_params p = {.s = {-1}};
    CHECK_OK(ct_run1(TC_OP_MASKED_FILL, d, m, NULL, &p, &io));
    int bad = 0;
    for (int64_t i = 0; i < n; i += 997)
        if (ct_at(d, i) != (i % 100 == 0 ? (double)i : -1)) bad++;
    CHECK(bad == 0);
    release(d, m, NULL, NULL);
}

TEST(masked_copy_order_and_errors)
{
    tc_tensor *d = ct_from(TC_F32, 2, SZ(2, 3), VALS(0, 0, 0, 0, 0, 0));
    tc_tensor *m = ct_from(TC_BOOL, 2, SZ(2, 3), VALS(1, 0, 1, 0, 1, 1)), *s = ct_from(TC_F32, 1, SZ(5), VALS(10, 11, 12, 13, 14));
    tc_tensor *o = NULL, *io = d;
    CHECK_OK(ct_run1(TC_OP_MASKED_COPY, d, m, s, NULL, &o));
    CHECK(SAME(o, 10, 0, 11, 0, 12, 13)); /* masked_scatter(m, [10..14]) */
    CHECK(SAME(d, 0, 0, 0, 0, 0, 0));
    tc_tensor *st = ct_from(TC_F32, 2, SZ(2, 2), VALS(1, 2, 3, 4)), *stt = transposed(st); /* read as 1 3 2 4 */
    CHECK_OK(ct_run1(TC_OP_MASKED_COPY, d, m, stt, NULL, &io));
    CHECK(SAME(d, 1, 0, 3, 0, 2, 4));
    tc_tensor *few = ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)), *mf = ct_from(TC_F32, 2, SZ(2, 3), VALS(1, 0, 1, 0, 1, 1));
    tc_tensor *mbad = ct_from(TC_BOOL, 1, SZ(2), VALS(1, 1));
    CHECK_ERR(ct_run1(TC_OP_MASKED_COPY, d, m, few, NULL, &io), TC_ERR_SHAPE,
              "masked_copy: mask has 4 set elements but the source has only 3");
    CHECK_ERR(ct_run1(TC_OP_MASKED_COPY, d, mf, s, NULL, &io), TC_ERR_DTYPE, "masked_copy: mask must be uint8 or bool, got float32");
    CHECK_ERR(ct_run1(TC_OP_MASKED_FILL, d, mbad, NULL, NULL, &io), TC_ERR_SHAPE,
              "masked_fill: mask (2) does not broadcast to the destination (2,3)");
    CHECK(SAME(d, 1, 0, 3, 0, 2, 4));
    release(d, m, s, o);
    release(st, stt, few, mf);
    tc_tensor_release(mbad);
}

TEST(masked_select_broadcast)
{
    tc_tensor *x = ct_arange(TC_F64, 2, SZ(2, 3)), *xt = transposed(x), *m = ct_from(TC_BOOL, 2, SZ(3, 1), VALS(1, 0, 1));
    tc_tensor *o = NULL, *o2 = NULL, *bm = ct_from(TC_BOOL, 2, SZ(2, 1), VALS(1, 0)), *v = ct_arange(TC_I32, 1, SZ(3));
    CHECK_OK(ct_run1(TC_OP_MASKED_SELECT, xt, m, NULL, NULL, &o));
    CHECK(ct_shape_is(o, 1, SZ(4)) && SAME(o, 0, 3, 2, 5)); /* masked_select(x.t(), [[1],[0],[1]]) */
    CHECK_OK(ct_run1(TC_OP_MASKED_SELECT, v, bm, NULL, NULL, &o2)); /* grows to (2,3) */
    CHECK(o2->dtype == TC_I32 && SAME(o2, 0, 1, 2));
    tc_tensor *bad = ct_from(TC_BOOL, 1, SZ(4), VALS(1, 1, 1, 1)), *o3 = NULL;
    CHECK_ERR(ct_run1(TC_OP_MASKED_SELECT, x, bad, NULL, NULL, &o3), TC_ERR_SHAPE, "cannot broadcast");
    CHECK(o3 == NULL);
    release(x, xt, m, o);
    release(o2, bm, v, bad);
}

TEST(nonzero_values)
{
    tc_tensor *x = ct_from(TC_F32, 2, SZ(2, 3), VALS(0, 1, 0, NAN, -0.0, 2)), *o = NULL;
    CHECK_OK(ct_run1(TC_OP_NONZERO, x, NULL, NULL, NULL, &o));
    CHECK(o->dtype == TC_I64 && ct_shape_is(o, 2, SZ(3, 2)) && SAME(o, 0, 1, 1, 0, 1, 2)); /* NaN counts, -0 not */
    tc_tensor *xt = transposed(x), *ot = NULL;
    CHECK_OK(ct_run1(TC_OP_NONZERO, xt, NULL, NULL, NULL, &ot));
    CHECK(ct_shape_is(ot, 2, SZ(3, 2)) && SAME(ot, 0, 1, 1, 0, 2, 1));
    tc_tensor *s = NULL, *os = NULL, *z = ct_from(TC_I32, 1, SZ(4), VALS(0, 0, 0, 0)), *oz = NULL;
    tc_tensor_new(TC_I16, 0, SZ(1), /* sizes unused */ &s);
    tc_tensor_set_value(s, NULL, 3);
    CHECK_OK(ct_run1(TC_OP_NONZERO, s, NULL, NULL, NULL, &os));
    CHECK(ct_shape_is(os, 2, SZ(1, 0)));
    CHECK_OK(ct_run1(TC_OP_NONZERO, z, NULL, NULL, NULL, &oz));
    CHECK(ct_shape_is(oz, 2, SZ(0, 1)));
    tc_tensor *h = ct_from(TC_BF16, 1, SZ(3), VALS(-0.0, 0.5, 0)), *oh = NULL;
    CHECK_OK(ct_run1(TC_OP_NONZERO, h, NULL, NULL, NULL, &oh));
    CHECK(SAME(oh, 1));
    release(x, o, xt, ot);
    release(s, os, z, oz);
    release(h, oh, NULL, NULL);
}

/* ---- cat ------------------------------------------------------------------------------------ */

static tc_status cat(const tc_tensor **ts, int n, int64_t dim, tc_tensor **out)
{
    tc_params p = {.i = {dim}};
    return tc_op_run(TC_OP_CAT, ts, n, &p, out, 1);
}

TEST(cat_values)
{
    tc_tensor *a = ct_arange(TC_F32, 2, SZ(2, 3)), *b = ct_from(TC_F32, 2, SZ(1, 3), VALS(-1, -2, -3));
    tc_tensor *o = NULL, *o1 = NULL;
    const tc_tensor *ab[2] = {a, b};
    CHECK_OK(cat(ab, 2, 0, &o));
    CHECK(ct_shape_is(o, 2, SZ(3, 3)) && SAME(o, 0, 1, 2, 3, 4, 5, -1, -2, -3));
    /* dim -1 with a transposed input: cat([a, x.t()], 1) with x (2,2) */
    tc_tensor *x = ct_from(TC_F32, 2, SZ(2, 2), VALS(7, 8, 9, 10)), *xt = transposed(x);
    const tc_tensor *axa[3] = {a, xt, a};
    CHECK_OK(cat(axa, 3, -1, &o1));
    CHECK(ct_shape_is(o1, 2, SZ(2, 8)) && SAME(o1, 0, 1, 2, 7, 9, 0, 1, 2, 3, 4, 5, 8, 10, 3, 4, 5));
    release(a, b, o, o1);
    release(x, xt, NULL, NULL);
}

TEST(cat_empties_and_ints)
{
    tc_tensor *e1 = NULL, *e0 = NULL, *a = ct_arange(TC_I64, 2, SZ(2, 2)), *o = NULL, *oe = NULL;
    tc_tensor_new(TC_I64, 1, SZ(0), &e1);
    tc_tensor_new_empty(TC_F64, &e0); /* Torch7's torch.Tensor(): skipped whatever its type */
    const tc_tensor *ts[4] = {e1, a, e0, a};
    CHECK_OK(cat(ts, 4, 1, &o));
    CHECK(o->dtype == TC_I64 && ct_shape_is(o, 2, SZ(2, 4)) && SAME(o, 0, 1, 0, 1, 2, 3, 2, 3));
    const tc_tensor *only[2] = {e1, e1};
    CHECK_OK(cat(only, 2, 0, &oe));
    CHECK(ct_shape_is(oe, 1, SZ(0)));
    /* the result may share memory with an input: built aside, then copied. r is big[0:2]
     * and the result a header over all of big, so writing 7 first would clobber r. */
    tc_tensor *big = ct_from(TC_I64, 1, SZ(4), VALS(5, 6, 0, 0)), *r2 = ct_from(TC_I64, 1, SZ(1), VALS(7));
    tc_tensor *al = NULL, *r = NULL;
    tc_params np = {.i = {0, 0, 2}};
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const *)&big, 1, &np, &r, 1));
    tc_tensor_alias(big, &al);
    const tc_tensor *rr[2] = {r2, r};
    CHECK_OK(cat(rr, 2, 0, &al));
    CHECK(al->storage == big->storage && SAME(al, 7, 5, 6));
    tc_tensor_release(big);
    release(e1, e0, a, o);
    release(oe, r, r2, al);
}

TEST(cat_errors)
{
    tc_tensor *a = ct_arange(TC_F32, 2, SZ(2, 3)), *b = ct_arange(TC_F32, 2, SZ(2, 4)), *c = ct_arange(TC_I32, 2, SZ(2, 3));
    tc_tensor *s = NULL, *o = NULL, *v = ct_arange(TC_F32, 1, SZ(3));
    tc_tensor_new(TC_F32, 0, SZ(1), /* sizes unused */ &s);
    const tc_tensor *ab[2] = {a, b}, *ac[2] = {a, c}, *as[2] = {s, a}, *av[2] = {a, v};
    CHECK_ERR(cat(ab, 2, 0, &o), TC_ERR_SHAPE, "cat: sizes of input 1 (2,3) and input 2 (2,4) differ outside dim 0");
    CHECK_ERR(cat(ac, 2, 0, &o), TC_ERR_DTYPE, "cat: input 1 is float32 but input 2 is int32");
    CHECK_ERR(cat(ab, 2, 2, &o), TC_ERR_INDEX, "joining along a new dim is not supported");
    CHECK_ERR(cat(ab, 2, -4, &o), TC_ERR_INDEX, "cat: dim -4 out of range for 2-dim tensors");
    CHECK_ERR(cat(as, 2, 0, &o), TC_ERR_SHAPE, "cat: input 1 is 0-dim");
    CHECK_ERR(cat(av, 2, 0, &o), TC_ERR_SHAPE, "input 2 (3) differ");
    CHECK(o == NULL);
    release(a, b, c, s);
    tc_tensor_release(v);
}
