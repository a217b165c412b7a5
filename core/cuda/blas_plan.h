/* blas_plan.h -- how a row-major strided matrix product becomes one column-major cuBLAS
 * call (blas.cu). Plain host C++ with no CUDA include, so a host test can check the mapping
 * by emulating the call (tests/cuda_host/test_cuda_plan.cpp).
 *
 * The layout rules are core/cpu/matmul.c's: a matrix with unit column stride is row-major
 * with leading dimension = its row stride ('N'); one with unit row stride is the transpose
 * of such a matrix ('T'); anything else (both strides > 1, broadcast stride 0, negative
 * strides, a leading dimension shorter than a row) is copied to a dense matrix first.
 * A row-major C (n,m) with leading dimension ldc is the column-major C^T (m,n) with the
 * same ldc, so C = op(A) op(B) runs as cuBLAS C^T = op(B)^T op(A)^T: cuBLAS's A is our B.
 */
#ifndef TC_CUDA_BLAS_PLAN_H
#define TC_CUDA_BLAS_PLAN_H

#include <limits.h>
#include <stdint.h>

/* One matrix of an operand: rows x cols, strides in elements; bs steps between the
 * matrices of a batch. */
struct mm_mat {
    char *p;
    int64_t rows, cols, rs, cs, bs;
};

/* One cuBLAS (strided batched) call in cuBLAS's own terms: C (m x n, column-major, ldc)
 * = alpha op(A) op(B) + beta C with op(A) m x k and op(B) k x n; batch strides in elements. */
struct mm_call {
    bool ta, tb; /* op(A) = A^T, op(B) = B^T */
    int m, n, k;
    int64_t lda, ldb, ldc;
    const char *a, *b;
    char *c;
    int64_t sa, sb, sc;
};

static inline mm_mat mm_t(mm_mat x) { return mm_mat{x.p, x.cols, x.rows, x.cs, x.rs, x.bs}; }
static inline int64_t mm_max1(int64_t n) { return n > 1 ? n : 1; }

/* 'N' (row-major, *ld = row stride), 'T' (transposed row-major, *ld = column stride), or 0
 * (needs a dense copy). A size-1 dim's stride never matters. */
static inline char mm_layout(const mm_mat *x, int64_t *ld)
{
    int64_t nr = x->rows, nc = x->cols;
    if (nr == 0 || nc == 0) {
        *ld = mm_max1(nc);
        return 'N';
    }
    int64_t ldn = nr == 1 ? mm_max1(nc) : x->rs;
    if ((nc == 1 || x->cs == 1) && ldn >= mm_max1(nc) && ldn <= INT_MAX) {
        *ld = ldn;
        return 'N';
    }
    int64_t ldt = nc == 1 ? mm_max1(nr) : x->cs;
    if ((nr == 1 || x->rs == 1) && ldt >= mm_max1(nr) && ldt <= INT_MAX) {
        *ld = ldt;
        return 'T';
    }
    return 0;
}

/* Whether cuBLAS can read x (every matrix of a batch of `batch`) as it is. Batch strides
 * must not be negative (cuBLAS documents none). */
static inline bool mm_readable(const mm_mat *x, int64_t batch)
{
    int64_t ld;
    return mm_layout(x, &ld) != 0 && (batch <= 1 || x->bs >= 0);
}

/* Whether cuBLAS can write c: readable, and no two elements of the batch share an address
 * (a broadcast stride, or matrices of the batch overlapping one another). */
static inline bool mm_writable(const mm_mat *c, int64_t batch)
{
    int64_t ld;
    char l = mm_layout(c, &ld);
    if (!l || (batch > 1 && c->bs < 0)) return false;
    if (batch > 1 && c->rows * c->cols > 0) {
        /* the span of one matrix: its last element's offset + 1 */
        int64_t span = (l == 'N' ? (c->rows - 1) * ld + c->cols : (c->cols - 1) * ld + c->rows);
        if (c->bs < span) return false;
    }
    return true;
}

/* The call computing C (n,m) = A (n,k) @ B (k,m), each matrix of a batch, for readable a, b
 * and writable c (a layout within one matrix never overlaps itself: ld >= the row). */
static inline mm_call mm_plan(mm_mat a, mm_mat b, mm_mat c)
{
    int64_t lda = 0, ldb = 0, ldc = 0;
    if (mm_layout(&c, &ldc) != 'N') { /* C is stored transposed: compute C^T = B^T A^T */
        mm_mat t = mm_t(a);
        a = mm_t(b), b = t, c = mm_t(c);
        mm_layout(&c, &ldc);
    }
    char la = mm_layout(&a, &lda), lb = mm_layout(&b, &ldb);
    mm_call r;
    /* row-major C (n,m) = opA(A) opB(B)  <=>  column-major C^T (m,n) = opB(B)^T opA(A)^T */
    r.ta = lb == 'T', r.tb = la == 'T';
    r.m = (int)c.cols, r.n = (int)c.rows, r.k = (int)a.cols;
    r.a = b.p, r.lda = ldb, r.sa = b.bs;
    r.b = a.p, r.ldb = lda, r.sb = a.bs;
    r.c = c.p, r.ldc = ldc, r.sc = c.bs;
    return r;
}

/* ---- integer products (no cuBLAS): one result element ------------------------------------ */

/* Element t of C[b] = beta C[b] + alpha A[b] B[b] (t runs over batch x rows x cols; with
 * sum, over rows x cols of the one C the batch is added into), in wrapping 64-bit
 * arithmetic truncated to T: core/cpu/matmul.c's int_rows (wrapping products make the
 * summation order irrelevant). Any strides. MM_FN: the includer's qualifiers (blas.cu:
 * __device__; a host test: static inline). */
#ifdef MM_FN
template <class T>
MM_FN void mm_int_at(const mm_mat &a, const mm_mat &b, const mm_mat &c, int64_t batch, bool sum, int64_t alpha,
                     int64_t beta, int64_t t)
{
    int64_t nb = sum ? batch : 1, col = t % c.cols, r = t / c.cols;
    int64_t bi = sum ? 0 : r / c.rows, i = sum ? r : r % c.rows;
    uint64_t acc = 0;
    for (int64_t q = bi; q < bi + nb; q++) {
        const T *pa = (const T *)a.p + q * a.bs + i * a.rs, *pb = (const T *)b.p + q * b.bs + col * b.cs;
        for (int64_t kk = 0; kk < a.cols; kk++) acc += (uint64_t)(int64_t)pa[kk * a.cs] * (uint64_t)(int64_t)pb[kk * b.rs];
    }
    T *pc = (T *)c.p + bi * c.bs + i * c.rs + col * c.cs;
    uint64_t v = (uint64_t)alpha * acc;
    if (beta) v += (uint64_t)beta * (uint64_t)(int64_t)*pc;
    *pc = (T)v;
}
#endif

#endif /* TC_CUDA_BLAS_PLAN_H */
