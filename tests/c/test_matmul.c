/* test_matmul.c -- the matrix-product kind: dot mv mm bmm addmv addmm addr baddbmm addbmm.
 *
 * Small cases compare against literal values (checked with PyTorch 1.13); larger and
 * strided ones against a naive double-precision loop over the logical elements. The
 * no-copy claims are tested with allocation fault injection: a call that must not
 * allocate still succeeds when the next allocation is set to fail.
 */
#include "ctest.h"
#include <float.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------------------- */

static const double A23[] = {1, 2, 3, 4, 5, 6};
static const double B34[] = {1, 0, -1, 2, 2, 1, 0, -1, 0, 3, 1, 1};
static const double AB24[] = {5, 11, 2, 3, 14, 23, 2, 9};

static const tc_dtype all_types[] = {TC_F32, TC_F64, TC_I64};

static tc_params ba(double beta, double alpha)
{
    tc_params p = {.s = {beta, alpha}};
    return p;
}

/* Number of elements of t (row-major) farther than tol from want; prints the first. */
static int mismatches(const tc_tensor *t, const double *want, int64_t n, double tol)
{
    int bad = 0;
    if (tc_tensor_numel(t) != n) {
        printf("  numel %lld, expected %lld\n", (long long)tc_tensor_numel(t), (long long)n);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) {
        double g = ct_at(t, i);
        if (!(fabs(g - want[i]) <= tol)) {
            if (!bad) printf("  element %lld = %.9g, expected %.9g\n", (long long)i, g, want[i]);
            bad++;
        }
    }
    return bad;
}
#define CHECK_VALUES(t, want, n, tol) CHECK(mismatches((t), (want), (n), (tol)) == 0)

/* Deterministic values: floats in [-1, 1), integers in [-5, 5]. */
static tc_tensor *rnd(tc_dtype dt, int nd, const int64_t *sz, unsigned seed)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    uint32_t x = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = tc_dtype_is_float(dt) ? (double)(x >> 8) / (1 << 23) - 1.0 : (double)((x >> 16) % 11) - 5;
    }
    tc_tensor *t = ct_from(dt, nd, sz, v);
    free(v);
    return t;
}

static tc_tensor *filled(tc_dtype dt, int nd, const int64_t *sz, double value)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, nd, sz, &t)) return NULL;
    tc_params p = {.s = {value}};
    tc_op_run(TC_OP_FILL, NULL, 0, &p, &t, 1);
    return t;
}

/* A view of base's storage with explicit geometry. */
static tc_tensor *view(const tc_tensor *base, int64_t off, int nd, const int64_t *sz, const int64_t *st)
{
    tc_tensor *t = NULL;
    tc_tensor_new_view(base->storage, (tc_dtype)base->dtype, off, nd, sz, st, &t);
    return t;
}

static int64_t numel(int nd, const int64_t *sz)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    return n;
}

/* Element of M broadcast to the result size (nd, sz) at row-major flat index f. */
static double m_at(const tc_tensor *M, int nd, const int64_t *sz, int64_t f)
{
    int64_t idx[TC_MAX_DIMS], mflat = 0;
    for (int d = nd - 1; d >= 0; d--) idx[d] = f % sz[d], f /= sz[d];
    for (int d = 0; d < M->ndim; d++) {
        int64_t i = M->size[d] == 1 ? 0 : idx[nd - M->ndim + d];
        mflat = mflat * M->size[d] + i;
    }
    return ct_at(M, mflat);
}

/* Naive reference over logical elements: res = beta M + alpha (A @ B), for every op.
 * Vectors are (n,1) or (1,m) matrices, so one flat formula covers them all. absum gets
 * sum |alpha a b| per element (for error bounds); either output may be NULL. */
static void reference(tc_op op, const tc_tensor *M, const tc_tensor *A, const tc_tensor *B, double beta,
                      double alpha, int nd, const int64_t *sz, double *res, double *absum)
{
    int64_t k = op == TC_OP_DOT ? A->size[0]
                : op == TC_OP_ADDR ? 1
                : A->ndim == 3   ? A->size[2]
                                 : A->size[1];
    int64_t batch = A->ndim == 3 ? A->size[0] : 1;
    int64_t n = nd == 0 ? 1 : nd == 1 ? sz[0] : sz[nd - 2], m = nd >= 2 ? sz[nd - 1] : 1;
    int sum = op == TC_OP_ADDBMM;
    int64_t total = numel(nd, sz);
    for (int64_t f = 0; f < total; f++) {
        int64_t bo = f / (n * m), i = f / m % n, j = f % m;
        double acc = 0, aacc = 0;
        for (int64_t bi = sum ? 0 : bo; bi < (sum ? batch : bo + 1); bi++)
            for (int64_t q = 0; q < k; q++) {
                double t = ct_at(A, bi * n * k + i * k + q) * ct_at(B, bi * k * m + q * m + j);
                acc += t;
                aacc += fabs(t);
            }
        double r = alpha * acc;
        if (M && beta != 0) r += beta * m_at(M, nd, sz, f);
        if (res) res[f] = r;
        if (absum) absum[f] = fabs(alpha) * aacc;
    }
}

/* Mismatches of out against the reference, with tolerance rel * (1 + |want|). */
static int check_ref(tc_op op, const tc_tensor *M, const tc_tensor *A, const tc_tensor *B, double beta,
                     double alpha, const tc_tensor *out, double rel)
{
    int64_t n = tc_tensor_numel(out);
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    reference(op, M, A, B, beta, alpha, out->ndim, out->size, want, NULL);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = ct_at(out, i);
        if (!(fabs(g - want[i]) <= rel * (1 + fabs(want[i])))) {
            if (!bad) printf("  %s: element %lld = %.9g, expected %.9g\n", tc_op_info(op)->name, (long long)i, g, want[i]);
            bad++;
        }
    }
    free(want);
    return bad;
}

/* ---- values -------------------------------------------------------------------------- */

TEST(matmul_mm_addmm_values)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *a = ct_from(dt, 2, SZ(2, 3), A23), *b = ct_from(dt, 2, SZ(3, 4), B34), *r = NULL;
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
        CHECK(r->ndim == 2 && r->size[0] == 2 && r->size[1] == 4 && r->dtype == (int32_t)dt);
        CHECK_VALUES(r, AB24, 8, 0);
        tc_tensor_release(r);

        tc_tensor *m = ct_from(dt, 2, SZ(2, 4), VALS(1, 1, 1, 1, 2, 2, 2, 2));
        r = NULL;
        tc_params p = dt == TC_I64 ? ba(3, 2) : ba(0.5, 2);
        CHECK_OK(ct_run1(TC_OP_ADDMM, m, a, b, &p, &r));
        if (dt == TC_I64) CHECK_VALUES(r, VALS(13, 25, 7, 9, 34, 52, 10, 24), 8, 0);
        else CHECK_VALUES(r, VALS(10.5, 22.5, 4.5, 6.5, 29, 47, 5, 19), 8, 0);
        tc_tensor_release(r);
        tc_tensor_release(m), tc_tensor_release(a), tc_tensor_release(b);
    }
}

TEST(matmul_dot_mv_addmv_values)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *x = ct_from(dt, 1, SZ(3), VALS(1, 2, 3)), *y = ct_from(dt, 1, SZ(3), VALS(4, 5, 6)), *r = NULL;
        CHECK_OK(ct_run1(TC_OP_DOT, x, y, NULL, NULL, &r));
        CHECK(r->ndim == 0);
        CHECK_NEAR(tc_tensor_item(r), 32, 0);
        tc_tensor_release(r);

        tc_tensor *a = ct_from(dt, 2, SZ(2, 3), A23), *v = ct_from(dt, 1, SZ(3), VALS(1, -1, 2));
        r = NULL;
        CHECK_OK(ct_run1(TC_OP_MV, a, v, NULL, NULL, &r));
        CHECK(r->ndim == 1 && r->size[0] == 2);
        CHECK_VALUES(r, VALS(5, 11), 2, 0);
        tc_tensor_release(r);
        tc_tensor *m = ct_from(dt, 1, SZ(2), VALS(10, 20));
        tc_params p = ba(2, -1);
        r = NULL;
        CHECK_OK(ct_run1(TC_OP_ADDMV, m, a, v, &p, &r));
        CHECK_VALUES(r, VALS(15, 29), 2, 0);
        tc_tensor_release(r);
        tc_tensor_release(m), tc_tensor_release(a), tc_tensor_release(v);
        tc_tensor_release(x), tc_tensor_release(y);
    }
}

TEST(matmul_addr_values)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *m = filled(dt, 2, SZ(2, 3), 1), *x = ct_from(dt, 1, SZ(2), VALS(1, 2));
        tc_tensor *y = ct_from(dt, 1, SZ(3), VALS(3, 4, 5)), *r = NULL;
        tc_params p = ba(1, 2);
        CHECK_OK(ct_run1(TC_OP_ADDR, m, x, y, &p, &r));
        CHECK(r->ndim == 2 && r->size[0] == 2 && r->size[1] == 3);
        CHECK_VALUES(r, VALS(7, 9, 11, 13, 17, 21), 6, 0);
        tc_tensor_release(r), tc_tensor_release(m), tc_tensor_release(x), tc_tensor_release(y);
    }
}

TEST(matmul_batched_values)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *a = ct_from(dt, 3, SZ(2, 2, 2), VALS(1, 2, 3, 4, 0, 1, 1, 0));
        tc_tensor *b = ct_from(dt, 3, SZ(2, 2, 2), VALS(1, 0, 0, 1, 2, 3, 4, 5)), *r = NULL;
        CHECK_OK(ct_run1(TC_OP_BMM, a, b, NULL, NULL, &r));
        CHECK(r->ndim == 3 && r->size[0] == 2);
        CHECK_VALUES(r, VALS(1, 2, 3, 4, 4, 5, 2, 3), 8, 0);
        tc_tensor_release(r);

        tc_tensor *m3 = filled(dt, 3, SZ(2, 2, 2), 1);
        tc_params p = ba(3, 1);
        r = NULL;
        CHECK_OK(ct_run1(TC_OP_BADDBMM, m3, a, b, &p, &r));
        CHECK_VALUES(r, VALS(4, 5, 6, 7, 7, 8, 5, 6), 8, 0);
        tc_tensor_release(r);

        tc_tensor *m2 = ct_from(dt, 2, SZ(2, 2), VALS(1, 2, 3, 4));
        p = dt == TC_I64 ? ba(-1, 2) : ba(-1, 0.5);
        r = NULL;
        CHECK_OK(ct_run1(TC_OP_ADDBMM, m2, a, b, &p, &r));
        CHECK(r->ndim == 2 && r->size[0] == 2 && r->size[1] == 2);
        if (dt == TC_I64) CHECK_VALUES(r, VALS(9, 12, 7, 10), 4, 0);
        else CHECK_VALUES(r, VALS(1.5, 1.5, -0.5, -0.5), 4, 0);
        tc_tensor_release(r);
        tc_tensor_release(m3), tc_tensor_release(m2), tc_tensor_release(a), tc_tensor_release(b);
    }
}

/* Small integer types wrap like a loop in the element type (values from PyTorch). */
TEST(matmul_integer_wraparound)
{
    tc_tensor *a = ct_from(TC_I8, 2, SZ(2, 2), VALS(100, 27, -128, 127));
    tc_tensor *b = ct_from(TC_I8, 2, SZ(2, 2), VALS(3, 1, 2, -1)), *r = NULL;
    CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
    CHECK_VALUES(r, VALS(98, 73, 126, 1), 4, 0);
    tc_tensor_release(r), tc_tensor_release(a), tc_tensor_release(b);
    a = ct_from(TC_U8, 2, SZ(1, 2), VALS(200, 17)), b = ct_from(TC_U8, 2, SZ(2, 1), VALS(2, 16)), r = NULL;
    CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
    CHECK_VALUES(r, VALS(160), 1, 0);
    tc_tensor_release(r), tc_tensor_release(a), tc_tensor_release(b);
    a = ct_from(TC_I32, 2, SZ(1, 2), VALS(2147483647, 2)), b = ct_from(TC_I32, 2, SZ(2, 1), VALS(2, 3)), r = NULL;
    CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
    CHECK_VALUES(r, VALS(4), 1, 0);
    tc_tensor_release(r), tc_tensor_release(a), tc_tensor_release(b);
}

TEST(matmul_half_types)
{
    tc_dtype hs[2] = {TC_F16, TC_BF16};
    for (int t = 0; t < 2; t++) {
        tc_tensor *a = ct_from(hs[t], 2, SZ(2, 3), A23), *b = ct_from(hs[t], 2, SZ(3, 4), B34);
        tc_tensor *m = ct_from(hs[t], 1, SZ(4), VALS(10, 20, 30, 40)), *r = NULL;
        tc_params p = ba(1, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMM, m, a, b, &p, &r));
        CHECK(r->dtype == (int32_t)hs[t]);
        CHECK_VALUES(r, VALS(15, 31, 32, 43, 24, 43, 32, 49), 8, 0);
        /* in place through the f32 detour: r = 0 * r + 1 * A B */
        p = ba(0, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMM, r, a, b, &p, &r));
        CHECK_VALUES(r, AB24, 8, 0);
        tc_tensor_release(r), tc_tensor_release(m), tc_tensor_release(a), tc_tensor_release(b);
    }
}

/* ---- layouts: transposed operands go to BLAS as they are ---------------------------- */

TEST(matmul_transposed_inputs_no_copy)
{
    tc_dtype fts[2] = {TC_F32, TC_F64};
    for (int t = 0; t < 2; t++) {
        tc_dtype dt = fts[t];
        /* A (5,7) as the transpose of a (7,5) block, B (7,6) as the transpose of (6,7) */
        tc_tensor *ab = rnd(dt, 2, SZ(7, 5), 1), *bb = rnd(dt, 2, SZ(6, 7), 2);
        tc_tensor *a = view(ab, 0, 2, SZ(5, 7), SZ(1, 5)), *b = view(bb, 0, 2, SZ(7, 6), SZ(1, 7));
        tc_tensor *out = filled(dt, 2, SZ(5, 6), 0);
        tc_debug_fail_alloc_after(1); /* any allocation (a copy, a temporary) fails */
        tc_status s = ct_run1(TC_OP_MM, a, b, NULL, NULL, &out);
        tc_debug_fail_alloc_after(0);
        CHECK_OK(s);
        CHECK(check_ref(TC_OP_MM, NULL, a, b, 0, 1, out, 1e-5) == 0);

        /* the result itself transposed: BLAS computes C^T = B^T A^T into it */
        tc_tensor *ob = filled(dt, 2, SZ(6, 5), 0), *ot = view(ob, 0, 2, SZ(5, 6), SZ(1, 5));
        tc_params p = ba(0.5, 2);
        tc_tensor *m = rnd(dt, 2, SZ(5, 6), 3);
        tc_debug_fail_alloc_after(1);
        s = ct_run1(TC_OP_ADDMM, m, a, b, &p, &ot);
        tc_debug_fail_alloc_after(0);
        CHECK_OK(s);
        CHECK(check_ref(TC_OP_ADDMM, m, a, b, 0.5, 2, ot, 1e-5) == 0);

        /* a column block of a wider matrix: leading dimension > row length */
        tc_tensor *wide = rnd(dt, 2, SZ(5, 10), 4), *blk = view(wide, 2, 2, SZ(5, 7), SZ(10, 1));
        tc_debug_fail_alloc_after(1);
        s = ct_run1(TC_OP_MM, blk, b, NULL, NULL, &out);
        tc_debug_fail_alloc_after(0);
        CHECK_OK(s);
        CHECK(check_ref(TC_OP_MM, NULL, blk, b, 0, 1, out, 1e-5) == 0);

        /* mv with a transposed matrix, addr into a transposed result */
        tc_tensor *v = rnd(dt, 1, SZ(7), 5), *y = filled(dt, 1, SZ(5), 0);
        tc_debug_fail_alloc_after(1);
        s = ct_run1(TC_OP_MV, a, v, NULL, NULL, &y);
        tc_debug_fail_alloc_after(0);
        CHECK_OK(s);
        CHECK(check_ref(TC_OP_MV, NULL, a, v, 0, 1, y, 1e-5) == 0);
        tc_tensor *x6 = rnd(dt, 1, SZ(6), 6);
        p = ba(1, -1);
        tc_debug_fail_alloc_after(1);
        s = ct_run1(TC_OP_ADDR, ot, y, x6, &p, &ot); /* in place, transposed: ot += -y x6^T */
        tc_debug_fail_alloc_after(0);
        CHECK_OK(s);
        double want[30];
        reference(TC_OP_ADDMM, m, a, b, 0.5, 2, 2, SZ(5, 6), want, NULL);
        for (int i = 0; i < 30; i++) want[i] -= ct_at(y, i / 6) * ct_at(x6, i % 6);
        CHECK_VALUES(ot, want, 30, 1e-5);

        /* bmm with each matrix of B transposed: (3,7,6) viewed from (3,6,7) */
        tc_tensor *a3 = rnd(dt, 3, SZ(3, 5, 7), 7), *b3b = rnd(dt, 3, SZ(3, 6, 7), 8);
        tc_tensor *b3 = view(b3b, 0, 3, SZ(3, 7, 6), SZ(42, 1, 7)), *o3 = filled(dt, 3, SZ(3, 5, 6), 0);
        tc_debug_fail_alloc_after(1);
        s = ct_run1(TC_OP_BMM, a3, b3, NULL, NULL, &o3);
        tc_debug_fail_alloc_after(0);
        CHECK_OK(s);
        CHECK(check_ref(TC_OP_BMM, NULL, a3, b3, 0, 1, o3, 1e-5) == 0);

        /* control: both strides > 1 must be copied, so the same call now fails to allocate,
         * and the failed call leaves the result as it was */
        tc_tensor *sb = rnd(dt, 2, SZ(10, 7), 9), *s2 = view(sb, 0, 2, SZ(5, 7), SZ(14, 2));
        double before = ct_at(out, 3);
        tc_debug_fail_alloc_after(1);
        CHECK_ERR(ct_run1(TC_OP_MM, s2, b, NULL, NULL, &out), TC_ERR_MEMORY, "out of memory");
        tc_debug_fail_alloc_after(0);
        CHECK(ct_at(out, 3) == before);
        CHECK_OK(ct_run1(TC_OP_MM, s2, b, NULL, NULL, &out));
        CHECK(check_ref(TC_OP_MM, NULL, s2, b, 0, 1, out, 1e-5) == 0);

        tc_tensor *all[] = {ab, bb, a, b, out, ob, ot, m, wide, blk, v, y, x6, a3, b3b, b3, o3, sb, s2};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* Operands BLAS cannot take (strides > 1 both ways, broadcast stride 0, negative vector
 * strides) are copied and give the same numbers; integers take any strides directly. */
TEST(matmul_strided_operands)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *ab = rnd(dt, 2, SZ(8, 10), 11), *a = view(ab, 1, 2, SZ(4, 5), SZ(20, 2));
        tc_tensor *bb = rnd(dt, 2, SZ(15, 3), 12), *b = view(bb, 0, 2, SZ(5, 3), SZ(9, 0)); /* column broadcast */
        tc_tensor *r = NULL;
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
        CHECK(check_ref(TC_OP_MM, NULL, a, b, 0, 1, r, 1e-6) == 0);
        tc_tensor_release(r);

        tc_tensor *vb = rnd(dt, 1, SZ(12), 13), *v = view(vb, 10, 1, SZ(5), SZ(-2)), *e = view(vb, 3, 1, SZ(5), SZ(0));
        r = NULL;
        CHECK_OK(ct_run1(TC_OP_MV, a, v, NULL, NULL, &r));
        CHECK(check_ref(TC_OP_MV, NULL, a, v, 0, 1, r, 1e-6) == 0);
        tc_tensor_release(r), r = NULL;
        CHECK_OK(ct_run1(TC_OP_DOT, v, e, NULL, NULL, &r));
        CHECK(check_ref(TC_OP_DOT, NULL, v, e, 0, 1, r, 1e-6) == 0);
        tc_tensor_release(r), r = NULL;
        tc_tensor *m = rnd(dt, 2, SZ(5, 5), 14);
        tc_params p = ba(2, 3);
        CHECK_OK(ct_run1(TC_OP_ADDR, m, v, e, &p, &r));
        CHECK(check_ref(TC_OP_ADDR, m, v, e, 2, 3, r, 1e-6) == 0);
        tc_tensor_release(r);
        tc_tensor *all[] = {ab, a, bb, b, vb, v, e, m};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* A result tensor BLAS cannot write (every other column) gets a temporary and a copy
 * back; the elements between its columns stay untouched. */
TEST(matmul_noncontiguous_result)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *a = rnd(dt, 2, SZ(4, 6), 21), *b = rnd(dt, 2, SZ(6, 5), 22);
        tc_tensor *base = filled(dt, 2, SZ(4, 10), 7), *out = view(base, 1, 2, SZ(4, 5), SZ(10, 2));
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &out));
        CHECK(check_ref(TC_OP_MM, NULL, a, b, 0, 1, out, 1e-6) == 0);
        int untouched = 1;
        for (int64_t i = 0; i < 40; i += 2) untouched &= ct_at(base, i) == 7;
        CHECK(untouched);
        /* in place on that view: out = 2 out + A B, reading M through the same view */
        double want[20];
        reference(TC_OP_MM, NULL, a, b, 0, 1, 2, SZ(4, 5), want, NULL);
        for (int i = 0; i < 20; i++) want[i] *= 3;
        tc_params p = ba(2, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMM, out, a, b, &p, &out));
        CHECK_VALUES(out, want, 20, 1e-5);

        /* batched result with a non-contiguous batch dim and rows */
        tc_tensor *a3 = rnd(dt, 3, SZ(3, 2, 4), 23), *b3 = rnd(dt, 3, SZ(3, 4, 3), 24);
        tc_tensor *base3 = filled(dt, 3, SZ(6, 2, 6), 7), *o3 = view(base3, 0, 3, SZ(3, 2, 3), SZ(24, 6, 2));
        CHECK_OK(ct_run1(TC_OP_BMM, a3, b3, NULL, NULL, &o3));
        CHECK(check_ref(TC_OP_BMM, NULL, a3, b3, 0, 1, o3, 1e-6) == 0);
        CHECK(ct_at(base3, 1) == 7 && ct_at(base3, 12) == 7);
        /* a vector result with stride 3 */
        tc_tensor *vb = filled(dt, 1, SZ(12), 7), *y = view(vb, 0, 1, SZ(4), SZ(3)), *x = rnd(dt, 1, SZ(6), 25);
        CHECK_OK(ct_run1(TC_OP_MV, a, x, NULL, NULL, &y));
        CHECK(check_ref(TC_OP_MV, NULL, a, x, 0, 1, y, 1e-6) == 0);
        CHECK(ct_at(vb, 1) == 7 && ct_at(vb, 11) == 7);
        tc_tensor *all[] = {a, b, base, out, a3, b3, base3, o3, vb, y, x};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* The result aliasing a product operand: computed aside, then copied in. */
TEST(matmul_inplace_and_aliasing)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *a = rnd(dt, 2, SZ(4, 4), 31), *b = rnd(dt, 2, SZ(4, 4), 32), *a0 = NULL, *r = NULL;
        tc_params same = {.i = {-1}}; /* copy keeps the dtype */
        CHECK_OK(ct_run1(TC_OP_COPY, a, NULL, NULL, &same, &a0));
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &a)); /* a = a b */
        CHECK(check_ref(TC_OP_MM, NULL, a0, b, 0, 1, a, 1e-6) == 0);
        /* addmm in place on M: r = -1 r + 2 a0 b  ==  a0 b */
        tc_params p = ba(-1, 2);
        CHECK_OK(ct_run1(TC_OP_ADDMM, r, a0, b, &p, &r));
        CHECK(check_ref(TC_OP_MM, NULL, a0, b, 0, 1, r, 1e-6) == 0);
        /* addmv with the result being the vector operand */
        tc_tensor *x = rnd(dt, 1, SZ(4), 33), *x0 = NULL;
        CHECK_OK(ct_run1(TC_OP_COPY, x, NULL, NULL, &same, &x0));
        p = ba(1, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMV, x, b, x, &p, &x)); /* x = x + b x */
        CHECK(check_ref(TC_OP_ADDMV, x0, b, x0, 1, 1, x, 1e-6) == 0);
        tc_tensor *all[] = {a, b, a0, r, x, x0};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* ---- beta, broadcasting, empty products ---------------------------------------------- */

/* beta == 0: M is not read, so NaN in M (or in the result being overwritten) vanishes. */
TEST(matmul_beta_zero_ignores_nan)
{
    tc_dtype fts[2] = {TC_F32, TC_F64};
    for (int t = 0; t < 2; t++) {
        tc_dtype dt = fts[t];
        tc_tensor *a = ct_from(dt, 2, SZ(2, 3), A23), *b = ct_from(dt, 2, SZ(3, 4), B34);
        tc_tensor *nan24 = filled(dt, 2, SZ(2, 4), NAN), *r = NULL;
        tc_params p = ba(0, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMM, nan24, a, b, &p, &r));
        CHECK_VALUES(r, AB24, 8, 0);
        tc_tensor_release(r);
        CHECK_OK(ct_run1(TC_OP_ADDMM, nan24, a, b, &p, &nan24)); /* in place */
        CHECK_VALUES(nan24, AB24, 8, 0);
        tc_tensor *o = filled(dt, 2, SZ(2, 4), NAN); /* plain mm over a NaN-filled result */
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &o));
        CHECK_VALUES(o, AB24, 8, 0);

        tc_tensor *v = ct_from(dt, 1, SZ(3), VALS(1, -1, 2)), *nan2 = filled(dt, 1, SZ(2), NAN);
        CHECK_OK(ct_run1(TC_OP_ADDMV, nan2, a, v, &p, &nan2));
        CHECK_VALUES(nan2, VALS(5, 11), 2, 0);

        tc_tensor *x = ct_from(dt, 1, SZ(2), VALS(1, 2)), *y = ct_from(dt, 1, SZ(3), VALS(3, 4, 5));
        tc_tensor *nan23 = filled(dt, 2, SZ(2, 3), NAN);
        p = ba(0, 2);
        CHECK_OK(ct_run1(TC_OP_ADDR, nan23, x, y, &p, &nan23));
        CHECK_VALUES(nan23, VALS(6, 8, 10, 12, 16, 20), 6, 0);

        tc_tensor *a3 = ct_from(dt, 3, SZ(2, 2, 2), VALS(1, 2, 3, 4, 0, 1, 1, 0));
        tc_tensor *b3 = ct_from(dt, 3, SZ(2, 2, 2), VALS(1, 0, 0, 1, 2, 3, 4, 5));
        tc_tensor *nan222 = filled(dt, 3, SZ(2, 2, 2), NAN), *nan22 = filled(dt, 2, SZ(2, 2), NAN);
        p = ba(0, 1);
        r = NULL;
        CHECK_OK(ct_run1(TC_OP_BADDBMM, nan222, a3, b3, &p, &r));
        CHECK_VALUES(r, VALS(1, 2, 3, 4, 4, 5, 2, 3), 8, 0);
        tc_tensor_release(r);
        CHECK_OK(ct_run1(TC_OP_ADDBMM, nan22, a3, b3, &p, &nan22));
        CHECK_VALUES(nan22, VALS(5, 7, 5, 7), 4, 0);
        tc_tensor *all[] = {a, b, nan24, o, v, nan2, x, y, nan23, a3, b3, nan222, nan22};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* M broadcasts to the result: a bias row, a column, a scalar, a matrix over a batch. */
TEST(matmul_broadcast_m)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        tc_tensor *a = ct_from(dt, 2, SZ(2, 3), A23), *b = ct_from(dt, 2, SZ(3, 4), B34), *r = NULL;
        tc_tensor *bias = ct_from(dt, 1, SZ(4), VALS(10, 20, 30, 40));
        tc_params p = ba(1, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMM, bias, a, b, &p, &r));
        CHECK_VALUES(r, VALS(15, 31, 32, 43, 24, 43, 32, 49), 8, 0);
        tc_tensor_release(r), r = NULL;
        tc_tensor *col = ct_from(dt, 2, SZ(2, 1), VALS(1, 2));
        p = ba(3, 2);
        CHECK_OK(ct_run1(TC_OP_ADDMM, col, a, b, &p, &r));
        CHECK_VALUES(r, VALS(13, 25, 7, 9, 34, 52, 10, 24), 8, 0);
        tc_tensor_release(r), r = NULL;
        tc_tensor *sc = ct_from(dt, 0, SZ(1), VALS(5)); /* 0-d; sizes non-NULL: tensor.c memcpys them */
        tc_tensor *v = ct_from(dt, 1, SZ(3), VALS(1, -1, 2));
        p = ba(2, 1);
        CHECK_OK(ct_run1(TC_OP_ADDMV, sc, a, v, &p, &r));
        CHECK_VALUES(r, VALS(15, 21), 2, 0);
        tc_tensor_release(r), r = NULL;
        tc_tensor *y = ct_from(dt, 1, SZ(3), VALS(3, 4, 5)), *x = ct_from(dt, 1, SZ(2), VALS(1, 2));
        tc_tensor *row3 = ct_from(dt, 1, SZ(3), VALS(1, 2, 3));
        p = ba(1, 1);
        CHECK_OK(ct_run1(TC_OP_ADDR, row3, x, y, &p, &r));
        CHECK_VALUES(r, VALS(4, 6, 8, 7, 10, 13), 6, 0);
        tc_tensor_release(r), r = NULL;

        tc_tensor *a3 = rnd(dt, 3, SZ(3, 2, 4), 41), *b3 = rnd(dt, 3, SZ(3, 4, 5), 42);
        tc_tensor *m25 = rnd(dt, 2, SZ(2, 5), 43), *m15 = rnd(dt, 2, SZ(1, 5), 44);
        p = ba(2, 1);
        CHECK_OK(ct_run1(TC_OP_BADDBMM, m25, a3, b3, &p, &r));
        CHECK(r->ndim == 3 && r->size[0] == 3);
        CHECK(check_ref(TC_OP_BADDBMM, m25, a3, b3, 2, 1, r, 1e-6) == 0);
        tc_tensor_release(r), r = NULL;
        CHECK_OK(ct_run1(TC_OP_ADDBMM, m15, a3, b3, &p, &r));
        CHECK(check_ref(TC_OP_ADDBMM, m15, a3, b3, 2, 1, r, 1e-6) == 0);
        tc_tensor_release(r);
        tc_tensor *all[] = {a, b, bias, col, sc, v, y, x, row3, a3, b3, m25, m15};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* k == 0 (and addbmm over an empty batch): the product is zero, the result beta * M. */
TEST(matmul_empty_inner_dim)
{
    for (int t = 0; t < 3; t++) {
        tc_dtype dt = all_types[t];
        double junk = dt == TC_I64 ? 99 : NAN;
        tc_tensor *a = filled(dt, 2, SZ(3, 0), 0), *b = filled(dt, 2, SZ(0, 4), 0);
        tc_tensor *out = filled(dt, 2, SZ(3, 4), junk);
        CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &out));
        double zeros[12] = {0}, twos[12];
        CHECK_VALUES(out, zeros, 12, 0);
        tc_tensor *m = rnd(dt, 2, SZ(3, 4), 51), *r = NULL;
        tc_params p = ba(2, 5);
        CHECK_OK(ct_run1(TC_OP_ADDMM, m, a, b, &p, &r));
        for (int i = 0; i < 12; i++) twos[i] = 2 * ct_at(m, i);
        CHECK_VALUES(r, twos, 12, 0);
        tc_tensor_release(r), r = NULL;

        tc_tensor *v0 = filled(dt, 1, SZ(0), 0), *m3 = ct_from(dt, 1, SZ(3), VALS(1, 2, 3));
        CHECK_OK(ct_run1(TC_OP_ADDMV, m3, a, v0, &p, &r));
        CHECK_VALUES(r, VALS(2, 4, 6), 3, 0);
        tc_tensor_release(r), r = NULL;
        CHECK_OK(ct_run1(TC_OP_DOT, v0, v0, NULL, NULL, &r));
        CHECK(r->ndim == 0 && tc_tensor_item(r) == 0);
        tc_tensor_release(r), r = NULL;

        tc_tensor *a3 = filled(dt, 3, SZ(2, 3, 0), 0), *b3 = filled(dt, 3, SZ(2, 0, 4), 0);
        tc_tensor *o3 = filled(dt, 3, SZ(2, 3, 4), junk);
        CHECK_OK(ct_run1(TC_OP_BMM, a3, b3, NULL, NULL, &o3));
        double z24[24] = {0};
        CHECK_VALUES(o3, z24, 24, 0);
        /* addbmm over zero batches, into M itself */
        tc_tensor *ae = filled(dt, 3, SZ(0, 3, 2), 0), *be = filled(dt, 3, SZ(0, 2, 4), 0);
        p = ba(2, 1);
        CHECK_OK(ct_run1(TC_OP_ADDBMM, m, ae, be, &p, &m));
        CHECK_VALUES(m, twos, 12, 0);

        /* zero-size result dims: nothing to compute */
        tc_tensor *e03 = filled(dt, 2, SZ(0, 3), 0), *b34 = ct_from(dt, 2, SZ(3, 4), B34);
        CHECK_OK(ct_run1(TC_OP_MM, e03, b34, NULL, NULL, &r));
        CHECK(r->ndim == 2 && r->size[0] == 0 && r->size[1] == 4);
        tc_tensor_release(r);
        tc_tensor *all[] = {a, b, out, m, v0, m3, a3, b3, o3, ae, be, e03, b34};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* ---- size: BLAS against a naive double loop ------------------------------------------ */

/* Each element must be within the recursive-summation bound k * eps * sum |a b|. */
TEST(matmul_sgemm_256x300x200)
{
    tc_tensor *a = rnd(TC_F32, 2, SZ(256, 300), 61), *b = rnd(TC_F32, 2, SZ(300, 200), 62), *r = NULL;
    CHECK_OK(ct_run1(TC_OP_MM, a, b, NULL, NULL, &r));
    int64_t n = 256 * 200;
    double *want = malloc(sizeof(double) * n), *abs = malloc(sizeof(double) * n);
    reference(TC_OP_MM, NULL, a, b, 0, 1, 2, SZ(256, 200), want, abs);
    int bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(ct_at(r, i) - want[i]), bound = 300 * FLT_EPSILON * abs[i];
        if (!(err <= bound)) bad++;
        if (err / (abs[i] + 1e-30) > worst) worst = err / (abs[i] + 1e-30);
    }
    if (bad) printf("  %d elements beyond the bound (worst relative error %.3g)\n", bad, worst);
    CHECK(bad == 0);
    free(want), free(abs);
    tc_tensor_release(a), tc_tensor_release(b), tc_tensor_release(r);
}

/* Many small products and a few large ones, batched. */
TEST(matmul_bmm_many_and_large)
{
    tc_dtype fts[2] = {TC_F32, TC_F64};
    for (int t = 0; t < 2; t++) {
        tc_tensor *a = rnd(fts[t], 3, SZ(64, 8, 9), 71), *b = rnd(fts[t], 3, SZ(64, 9, 7), 72), *r = NULL;
        CHECK_OK(ct_run1(TC_OP_BMM, a, b, NULL, NULL, &r));
        CHECK(check_ref(TC_OP_BMM, NULL, a, b, 0, 1, r, 1e-5) == 0);
        tc_tensor_release(r), r = NULL;
        tc_tensor *m = rnd(fts[t], 2, SZ(8, 7), 73);
        tc_params p = ba(0.5, 1.5);
        CHECK_OK(ct_run1(TC_OP_ADDBMM, m, a, b, &p, &r));
        CHECK(check_ref(TC_OP_ADDBMM, m, a, b, 0.5, 1.5, r, 1e-4) == 0);
        tc_tensor_release(r), r = NULL;
        tc_tensor *al = rnd(fts[t], 3, SZ(2, 70, 80), 74), *bl = rnd(fts[t], 3, SZ(2, 80, 90), 75);
        tc_tensor *ml = rnd(fts[t], 3, SZ(2, 70, 90), 76);
        CHECK_OK(ct_run1(TC_OP_BADDBMM, ml, al, bl, &p, &r));
        CHECK(check_ref(TC_OP_BADDBMM, ml, al, bl, 0.5, 1.5, r, 1e-4) == 0);
        tc_tensor_release(r);
        tc_tensor *all[] = {a, b, m, al, bl, ml};
        tc_tensor_release_many(all, sizeof all / sizeof *all);
    }
}

/* ---- bad input --------------------------------------------------------------------------- */

TEST(matmul_bad_input)
{
    tc_tensor *m2 = filled(TC_F32, 2, SZ(2, 3), 1), *m3 = filled(TC_F32, 2, SZ(4, 5), 1);
    tc_tensor *v3 = filled(TC_F32, 1, SZ(3), 1), *v4 = filled(TC_F32, 1, SZ(4), 1);
    tc_tensor *b3 = filled(TC_F32, 3, SZ(2, 3, 4), 1), *b3x = filled(TC_F32, 3, SZ(3, 4, 5), 1);
    tc_tensor *b3y = filled(TC_F32, 3, SZ(2, 5, 6), 1), *d2 = filled(TC_F64, 2, SZ(3, 4), 1);
    tc_tensor *i2 = filled(TC_I64, 2, SZ(3, 4), 1), *bo = filled(TC_BOOL, 2, SZ(2, 2), 1);
    tc_tensor *out = filled(TC_F32, 2, SZ(2, 2), 42), *r = NULL;
    tc_tensor *m34 = filled(TC_F32, 2, SZ(3, 4), 1), *b3d = filled(TC_F64, 3, SZ(2, 4, 5), 1);
    tc_params p = ba(1, 1);

    CHECK_ERR(ct_run1(TC_OP_DOT, v3, v4, NULL, NULL, &r), TC_ERR_SHAPE, "dot: (3) . (4): sizes 3 and 4 differ");
    CHECK_ERR(ct_run1(TC_OP_DOT, m2, v3, NULL, NULL, &r), TC_ERR_SHAPE, "dot: expects two 1-D tensors, got (2,3) and (3)");
    CHECK_ERR(ct_run1(TC_OP_MV, m2, v4, NULL, NULL, &r), TC_ERR_SHAPE, "mv: (2,3) x (4): inner sizes 3 and 4 differ");
    CHECK_ERR(ct_run1(TC_OP_MV, v3, v3, NULL, NULL, &r), TC_ERR_SHAPE, "mv: expects a 2-D matrix and a 1-D vector, got (3) and (3)");
    CHECK_ERR(ct_run1(TC_OP_MM, m2, m3, NULL, NULL, &r), TC_ERR_SHAPE, "mm: (2,3) x (4,5): inner sizes 3 and 4 differ");
    CHECK_ERR(ct_run1(TC_OP_MM, m2, v3, NULL, NULL, &r), TC_ERR_SHAPE, "mm: expects two 2-D matrices, got (2,3) and (3)");
    CHECK_ERR(ct_run1(TC_OP_BMM, b3, b3x, NULL, NULL, &r), TC_ERR_SHAPE, "bmm: (2,3,4) x (3,4,5): batch sizes 2 and 3 differ");
    CHECK_ERR(ct_run1(TC_OP_BMM, b3, b3y, NULL, NULL, &r), TC_ERR_SHAPE, "bmm: (2,3,4) x (2,5,6): inner sizes 4 and 5 differ");
    CHECK_ERR(ct_run1(TC_OP_BMM, m2, b3, NULL, NULL, &r), TC_ERR_SHAPE, "bmm: expects two 3-D batches of matrices, got (2,3) and (2,3,4)");
    CHECK_ERR(ct_run1(TC_OP_ADDMV, v4, m2, v3, &p, &r), TC_ERR_SHAPE, "addmv: M (4) cannot be broadcast to the result size (2) of (2,3) and (3)");
    CHECK_ERR(ct_run1(TC_OP_ADDMV, v3, m2, m2, &p, &r), TC_ERR_SHAPE, "addmv: expects a 2-D matrix and a 1-D vector, got (2,3) and (2,3)");
    CHECK_ERR(ct_run1(TC_OP_ADDMM, m3, m2, d2, &p, &r), TC_ERR_DTYPE, "addmm: dtypes differ (float32 and float64)");
    CHECK_ERR(ct_run1(TC_OP_ADDMM, m3, m2, m3, &p, &r), TC_ERR_SHAPE, "addmm: (2,3) x (4,5): inner sizes 3 and 4 differ");
    CHECK_ERR(ct_run1(TC_OP_ADDMM, v3, m2, m34, &p, &r), TC_ERR_SHAPE, "addmm: M (3) cannot be broadcast to the result size (2,4) of (2,3) and (3,4)");
    CHECK_ERR(ct_run1(TC_OP_ADDR, m3, v3, v4, &p, &r), TC_ERR_SHAPE, "addr: M (4,5) cannot be broadcast to the result size (3,4) of (3) and (4)");
    CHECK_ERR(ct_run1(TC_OP_ADDR, m3, m2, v4, &p, &r), TC_ERR_SHAPE, "addr: expects two 1-D vectors, got (2,3) and (4)");
    CHECK_ERR(ct_run1(TC_OP_BADDBMM, m3, b3, b3y, &p, &r), TC_ERR_SHAPE, "baddbmm: (2,3,4) x (2,5,6): inner sizes 4 and 5 differ");
    CHECK_ERR(ct_run1(TC_OP_BADDBMM, m3, b3, b3, &p, &r), TC_ERR_SHAPE, "baddbmm: (2,3,4) x (2,3,4): inner sizes 4 and 3 differ");
    CHECK_ERR(ct_run1(TC_OP_ADDBMM, m3, b3x, b3x, &p, &r), TC_ERR_SHAPE, "addbmm: (3,4,5) x (3,4,5): inner sizes 5 and 4 differ");
    CHECK_ERR(ct_run1(TC_OP_ADDBMM, m3, m2, b3, &p, &r), TC_ERR_SHAPE, "addbmm: expects two 3-D batches of matrices, got (2,3) and (2,3,4)");
    CHECK_ERR(ct_run1(TC_OP_DOT, v3, i2, NULL, NULL, &r), TC_ERR_DTYPE, "dot: dtypes differ (float32 and int64)");
    CHECK_ERR(ct_run1(TC_OP_MV, d2, v4, NULL, NULL, &r), TC_ERR_DTYPE, "mv: dtypes differ (float64 and float32)");
    CHECK_ERR(ct_run1(TC_OP_MM, m2, i2, NULL, NULL, &r), TC_ERR_DTYPE, "mm: dtypes differ (float32 and int64)");
    CHECK_ERR(ct_run1(TC_OP_BMM, b3, b3d, NULL, NULL, &r), TC_ERR_DTYPE, "bmm: dtypes differ (float32 and float64)");
    CHECK_ERR(ct_run1(TC_OP_ADDR, m2, v3, i2, &p, &r), TC_ERR_DTYPE, "addr: dtypes differ (float32 and int64)");
    CHECK_ERR(ct_run1(TC_OP_ADDMV, d2, m2, v3, &p, &r), TC_ERR_DTYPE, "addmv: dtypes differ (float64 and float32)");
    CHECK_ERR(ct_run1(TC_OP_BADDBMM, i2, b3, b3, &p, &r), TC_ERR_DTYPE, "baddbmm: dtypes differ (int64 and float32)");
    CHECK_ERR(ct_run1(TC_OP_ADDBMM, m3, b3, i2, &p, &r), TC_ERR_DTYPE, "addbmm: dtypes differ (float32 and int64)");
    CHECK_ERR(ct_run1(TC_OP_MM, bo, bo, NULL, NULL, &r), TC_ERR_DTYPE, "mm: bool tensors are not supported");
    CHECK(r == NULL);
    /* a given result of the wrong dtype; a failed call leaves it as it was */
    tc_tensor *o64 = filled(TC_F64, 2, SZ(2, 4), 42);
    CHECK_ERR(ct_run1(TC_OP_MM, m2, m3, NULL, NULL, &out), TC_ERR_SHAPE, "mm: (2,3) x (4,5)");
    CHECK(out->size[0] == 2 && out->size[1] == 2 && ct_at(out, 0) == 42);
    CHECK_ERR(ct_run1(TC_OP_MM, m2, m34, NULL, NULL, &o64), TC_ERR_DTYPE, "mm: result 1 is float64, expected float32");
    CHECK(ct_at(o64, 0) == 42);
    /* an in-place M must already have the result's size, even where it broadcasts */
    CHECK_ERR(ct_run1(TC_OP_ADDMM, out, m2, m34, &p, &out), TC_ERR_SHAPE, "addmm: M (2,2) cannot be broadcast");
    tc_tensor *row = filled(TC_F32, 2, SZ(1, 4), 42);
    CHECK_ERR(ct_run1(TC_OP_ADDMM, row, m2, m34, &p, &row), TC_ERR_SHAPE, "cannot hold the result size (2,4)");
    CHECK(row->size[0] == 1 && ct_at(row, 3) == 42);
    /* a storage-less (empty) M */
    tc_tensor *empty = NULL;
    CHECK_OK(tc_tensor_new_empty(TC_F32, &empty));
    CHECK_ERR(ct_run1(TC_OP_ADDMM, empty, m2, m34, &p, &r), TC_ERR_SHAPE, "addmm: M is an empty tensor");
    tc_tensor *all[] = {m2, m3, v3, v4, b3, b3x, b3y, d2, i2, bo, out, o64, m34, b3d, row, empty};
    tc_tensor_release_many(all, sizeof all / sizeof *all);
}
