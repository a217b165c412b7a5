/* matmul.c -- CPU matrix products: dot mv mm bmm addmv addmm addr baddbmm addbmm.
 *
 * res = beta * M + alpha * (A @ B), Torch7's formula (s0 = beta, s1 = alpha; the plain
 * products dot/mv/mm/bmm use beta 0, alpha 1). float/double go to OpenBLAS (?dot, ?gemv,
 * ?ger, ?gemm); integer types run one plain strided loop; f16/bf16 compute in f32.
 * OpenBLAS runs single-threaded: large products are split over our pool here (gemm.h).
 *
 * Layout: BLAS reads a row-major matrix with unit column stride and a leading dimension
 * (the row stride). A matrix with unit *row* stride is the transpose of such a matrix, so
 * it goes to BLAS with CblasTrans and no copy (x:t(), a narrowed column block). Only an
 * operand that is neither (both strides > 1, a broadcast stride 0, a leading dimension
 * shorter than a row) is copied to contiguous memory first.
 *
 * The result is computed into D: the result tensor itself when BLAS can write it and it
 * overlaps neither A nor B, else a contiguous temporary copied back at the end. D starts
 * as M (copied in, unless M *is* D: the in-place addmm) and BLAS weighs it by beta. With
 * beta == 0 M is never read: BLAS's contract is that gemm/gemv do not read C when beta is
 * 0, and ger / empty products zero D themselves, so NaN in M or in D cannot leak.
 */
#include "gemm.h"
#include <cblas.h>
#include <limits.h>

/* ---- operand geometry ---------------------------------------------------------------- */

/* One matrix of an operand (rows, cols); strides in elements; bs steps between batches. */
typedef struct mat {
    char *p;
    int64_t rows, cols;
    int64_t rs, cs, bs;
} mat;

static mat mat_t(mat x)
{
    return (mat){x.p, x.cols, x.rows, x.cs, x.rs, x.bs};
}

/* The last two dims of t; the dim before them (if any) is the batch. */
static mat mat_of(const tc_tensor *t)
{
    int d = t->ndim - 2;
    return (mat){tc_base(t), t->size[d], t->size[d + 1], t->stride[d], t->stride[d + 1], d > 0 ? t->stride[d - 1] : 0};
}

/* A vector as a (n,1) column or a (1,n) row; a 0-d tensor as a (1,1) matrix. */
static mat col_of(const tc_tensor *t)
{
    if (t->ndim == 0) return (mat){tc_base(t), 1, 1, 0, 0, 0};
    return (mat){tc_base(t), t->size[0], 1, t->stride[0], 0, 0};
}

static mat row_of(const tc_tensor *t)
{
    return mat_t(col_of(t));
}

static int64_t max1(int64_t n) { return n > 1 ? n : 1; }

/* How row-major BLAS reads x: 'N' with leading dimension *ld (unit column stride), 'T'
 * (unit row stride: x is the transpose of a row-major (cols, rows) matrix), or 0 when
 * neither. A size-1 dim's stride never matters, so a row or column always fits. */
static char layout(const mat *x, int64_t *ld)
{
    int64_t nr = x->rows, nc = x->cols;
    if (nr == 0 || nc == 0) {
        *ld = max1(nc);
        return 'N';
    }
    int64_t ldn = nr == 1 ? max1(nc) : x->rs;
    if ((nc == 1 || x->cs == 1) && ldn >= max1(nc) && ldn <= INT_MAX) {
        *ld = ldn;
        return 'N';
    }
    int64_t ldt = nc == 1 ? max1(nr) : x->cs;
    if ((nr == 1 || x->rs == 1) && ldt >= max1(nr) && ldt <= INT_MAX) {
        *ld = ldt;
        return 'T';
    }
    return 0;
}

/* BLAS increments must be positive (a negative one walks from the other end). */
static bool vec_ok(const tc_tensor *t)
{
    return t->size[0] <= 1 || (t->stride[0] >= 1 && t->stride[0] <= INT_MAX);
}

static int vinc(const tc_tensor *t)
{
    return t->size[0] <= 1 ? 1 : (int)t->stride[0];
}

/* Whether BLAS can read (or write) t as it is: vectors and the matrices of the last two dims. */
static bool blas_ok(const tc_tensor *t)
{
    if (t->ndim == 0) return true;
    if (t->ndim == 1) return vec_ok(t);
    mat x = mat_of(t);
    int64_t ld;
    return layout(&x, &ld) != 0;
}

/* A result written element by element must not have two elements at one address. */
static bool self_overlaps(const tc_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->size[d] > 1 && t->stride[d] == 0) return true;
    return false;
}

/* Whether the byte ranges two tensors span intersect (a conservative aliasing test). */
static bool overlap(const tc_tensor *a, const tc_tensor *b)
{
    if (tc_tensor_numel(a) == 0 || tc_tensor_numel(b) == 0) return false;
    uintptr_t lo[2], hi[2];
    const tc_tensor *t[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        int64_t es = tc_elsize(t[i]->dtype), l = 0, h = 0;
        for (int d = 0; d < t[i]->ndim; d++) {
            int64_t span = (t[i]->size[d] - 1) * t[i]->stride[d];
            if (span < 0) l += span;
            else h += span;
        }
        lo[i] = (uintptr_t)tc_base(t[i]) + (uintptr_t)(l * es);
        hi[i] = (uintptr_t)tc_base(t[i]) + (uintptr_t)((h + 1) * es);
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

/* M is exactly D's elements (in-place addmm: out == M), so D already holds M. */
static bool same_view(const tc_tensor *m, const tc_tensor *d)
{
    if (tc_base(m) != tc_base(d) || m->ndim != d->ndim) return false;
    for (int i = 0; i < d->ndim; i++)
        if (m->size[i] != d->size[i] || (d->size[i] > 1 && m->stride[i] != d->stride[i])) return false;
    return true;
}

/* ---- element loops for tc_cpu_foreach: copy (broadcasting), zero, scale ------------- */

#define COPY_LOOP(N, T)                                                                     \
    static void copy_##N(char **pp, const int64_t *st, int64_t n, double s0, double s1)     \
    {                                                                                       \
        if (st[0] == N && st[1] == N) {                                                     \
            memcpy(pp[0], pp[1], (size_t)(n * N));                                          \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++) *(T *)(pp[0] + i * st[0]) = *(const T *)(pp[1] + i * st[1]); \
    }
COPY_LOOP(1, uint8_t)
COPY_LOOP(2, uint16_t)
COPY_LOOP(4, uint32_t)
COPY_LOOP(8, uint64_t)

/* s0 carries the element size. All-zero bytes are 0 in every dtype. */
static void zero_loop(char **pp, const int64_t *st, int64_t n, double s0, double s1)
{
    size_t es = (size_t)s0;
    if (st[0] == (int64_t)es) {
        memset(pp[0], 0, n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++) memset(pp[0] + i * st[0], 0, es);
}

#define SCALE_LOOP(sfx, T)                                                                  \
    static void scale_##sfx(char **pp, const int64_t *st, int64_t n, double s0, double s1)  \
    {                                                                                       \
        const T w = (T)s0;                                                                  \
        for (int64_t i = 0; i < n; i++) *(T *)(pp[0] + i * st[0]) = w * *(const T *)(pp[1] + i * st[1]); \
    }
SCALE_LOOP(f32, float)
SCALE_LOOP(f64, double)

/* dst = src, src broadcast to dst's shape; same dtype. */
static void copy_into(tc_tensor *dst, const tc_tensor *src)
{
    size_t es = (size_t)tc_elsize(dst->dtype);
    tc_loop_fn fn = es == 1 ? copy_1 : es == 2 ? copy_2 : es == 4 ? copy_4 : copy_8;
    tc_cpu_foreach(dst, &src, 1, fn, 0, 0);
}

/* D = w * D for the float types, with w == 0 giving zeros whatever D held (NaN included). */
static void scale_by(tc_tensor *d, double w)
{
    if (w == 0) {
        tc_cpu_foreach(d, NULL, 0, zero_loop, (double)tc_elsize(d->dtype), 0);
    } else if (w != 1) {
        const tc_tensor *self = d;
        tc_cpu_foreach(d, &self, 1, d->dtype == TC_F32 ? scale_f32 : scale_f64, w, 0);
    }
}

static tc_status contiguous_copy(const tc_tensor *t, tc_tensor **out)
{
    TRY(tc_tensor_alloc((tc_dtype)t->dtype, t->ndim, t->size, out));
    copy_into(*out, t);
    return TC_OK;
}

/* ---- BLAS paths (f32, f64) ------------------------------------------------------------- */

static void blas_dot(int dt, const tc_tensor *x, const tc_tensor *y, tc_tensor *d)
{
    int n = (int)x->size[0];
    if (dt == TC_F32)
        *(float *)tc_base(d) = cblas_sdot(n, (const float *)tc_base(x), vinc(x), (const float *)tc_base(y), vinc(y));
    else
        *(double *)tc_base(d) =
            cblas_ddot(n, (const double *)tc_base(x), vinc(x), (const double *)tc_base(y), vinc(y));
}

/* y (n) = alpha A (n,k) x (k) + cbeta y. */
static void blas_gemv(int dt, const tc_tensor *A, const tc_tensor *x, tc_tensor *y, double alpha, double cbeta)
{
    mat a = mat_of(A);
    /* NOTE: gemv with no columns returns without scaling y, and some OpenBLAS versions
     * scale by 0 as 0 * y (NaN stays): zeroing here costs O(n) next to the O(n k) product. */
    if (a.cols == 0 || cbeta == 0) scale_by(y, a.cols == 0 ? cbeta : 0);
    if (a.cols == 0) return;
    int64_t ld;
    bool n = layout(&a, &ld) == 'N';
    enum CBLAS_TRANSPOSE tr = n ? CblasNoTrans : CblasTrans;
    int rows = (int)(n ? a.rows : a.cols), cols = (int)(n ? a.cols : a.rows);
    if (dt == TC_F32)
        cblas_sgemv(CblasRowMajor, tr, rows, cols, (float)alpha, (const float *)a.p, (int)ld,
                    (const float *)tc_base(x), vinc(x), (float)cbeta, (float *)tc_base(y), vinc(y));
    else
        cblas_dgemv(CblasRowMajor, tr, rows, cols, alpha, (const double *)a.p, (int)ld, (const double *)tc_base(x),
                    vinc(x), cbeta, (double *)tc_base(y), vinc(y));
}

/* D (n,m) = cbeta D + alpha x y^T; ger has no beta, so D is scaled first. */
static void blas_ger(int dt, const tc_tensor *x, const tc_tensor *y, tc_tensor *D, double alpha, double cbeta)
{
    scale_by(D, cbeta);
    mat d = mat_of(D);
    int64_t ld;
    if (layout(&d, &ld) == 'T') { /* D^T += alpha y x^T */
        const tc_tensor *t = x;
        x = y, y = t;
        d = mat_t(d);
    }
    if (dt == TC_F32)
        cblas_sger(CblasRowMajor, (int)d.rows, (int)d.cols, (float)alpha, (const float *)tc_base(x), vinc(x),
                   (const float *)tc_base(y), vinc(y), (float *)d.p, (int)ld);
    else
        cblas_dger(CblasRowMajor, (int)d.rows, (int)d.cols, alpha, (const double *)tc_base(x), vinc(x),
                   (const double *)tc_base(y), vinc(y), (double *)d.p, (int)ld);
}

/* A batch of gemm calls, everything resolved once; batch strides in bytes (cbs 0 when
 * the products are summed into one C: addbmm). */
typedef struct gemm_job {
    int dt;
    enum CBLAS_TRANSPOSE ta, tb;
    int n, m, k, lda, ldb, ldc;
    const char *a, *b;
    char *c;
    int64_t abs, bbs, cbs;
    double alpha;
} gemm_job;

static void gemm_at(const gemm_job *j, int64_t i, double beta)
{
    const char *a = j->a + i * j->abs, *b = j->b + i * j->bbs;
    char *c = j->c + i * j->cbs;
    if (j->dt == TC_F32)
        cblas_sgemm(CblasRowMajor, j->ta, j->tb, j->n, j->m, j->k, (float)j->alpha, (const float *)a, j->lda,
                    (const float *)b, j->ldb, (float)beta, (float *)c, j->ldc);
    else
        cblas_dgemm(CblasRowMajor, j->ta, j->tb, j->n, j->m, j->k, j->alpha, (const double *)a, j->lda,
                    (const double *)b, j->ldb, beta, (double *)c, j->ldc);
}

/* ---- gemm over the pool (gemm.h): OpenBLAS single-threaded, products split by us -------- */

/* Products (all of a batch together) below this many multiply-adds stay on the calling
 * thread: a pool handshake costs about as much. No part gets fewer than SPLIT_MIN rows or
 * columns, and parts are cut at multiples of 16 (the kernels' register blocks). */
#define SPLIT_MNK (1 << 20)
#define SPLIT_MIN 32

static int64_t cut(int64_t len, int64_t p, int64_t parts)
{
    if (p >= parts) return len;
    int64_t x = (len * p / parts + 8) / 16 * 16;
    return x > len ? len : x;
}

/* Part p of `parts` of product i: a block of C's rows (by_rows) or columns. */
static void gemm_part(const gemm_job *j, int64_t i, double beta, bool by_rows, int64_t p, int64_t parts)
{
    int64_t len = by_rows ? j->n : j->m, b0 = cut(len, p, parts), b1 = cut(len, p + 1, parts);
    if (b0 >= b1) return;
    int64_t es = j->dt == TC_F32 ? 4 : 8;
    gemm_job s = *j;
    if (by_rows) { /* rows of A (A^T stored: its columns) and of C */
        s.n = (int)(b1 - b0);
        s.a += (j->ta == CblasNoTrans ? b0 * j->lda : b0) * es;
        s.c += b0 * j->ldc * es;
    } else {       /* columns of B (B^T stored: its rows) and of C */
        s.m = (int)(b1 - b0);
        s.b += (j->tb == CblasNoTrans ? b0 : b0 * j->ldb) * es;
        s.c += b0 * es;
    }
    gemm_at(&s, i, beta);
}

typedef struct split_job {
    const gemm_job *j;
    double cbeta;
    int64_t batch, parts;
    bool by_rows, sum;
} split_job;

/* Units: (product, part) pairs; for a sum (addbmm) a unit is a part, over which the
 * batch is added in order (the same order whatever the thread count). */
static void split_range(void *ctx, int64_t u0, int64_t u1)
{
    const split_job *s = ctx;
    for (int64_t u = u0; u < u1; u++) {
        if (s->sum)
            for (int64_t i = 0; i < s->batch; i++) gemm_part(s->j, i, i > 0 ? 1.0 : s->cbeta, s->by_rows, u, s->parts);
        else
            gemm_part(s->j, u / s->parts, s->cbeta, s->by_rows, u % s->parts, s->parts);
    }
}

/* The batch of products of j: spread over the pool by product when there are enough of
 * them, else each product cut into blocks of rows or columns (whichever C has more). */
static void run_gemms(const gemm_job *j, int64_t batch, bool sum, double cbeta)
{
    int nt = tc_get_num_threads();
    split_job s = {.j = j, .cbeta = cbeta, .batch = batch, .parts = 1, .by_rows = j->n >= j->m, .sum = sum};
    double work = (double)j->n * (double)j->m * (double)j->k * (double)batch;
    int64_t units = sum ? 1 : batch;
    if (nt >= 2 && work >= SPLIT_MNK && (sum || batch < nt)) {
        int64_t most = (s.by_rows ? j->n : j->m) / SPLIT_MIN;
        s.parts = most < nt ? (most > 1 ? most : 1) : nt;
        units *= s.parts;
    }
    if (nt < 2 || work < SPLIT_MNK || units < 2) {
        for (int64_t i = 0; i < batch; i++) gemm_at(j, i, sum && i > 0 ? 1.0 : cbeta);
        return;
    }
    tc_parallel_for(units, 1, split_range, &s);
}

void tc_cpu_gemm(int dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    tc_cpu_blas_single_thread();
    gemm_job j = {.dt = dt,
                  .ta = ta ? CblasTrans : CblasNoTrans,
                  .tb = tb ? CblasTrans : CblasNoTrans,
                  .n = (int)m, .m = (int)n, .k = (int)k,
                  .lda = (int)lda, .ldb = (int)ldb, .ldc = (int)ldc,
                  .a = a, .b = b, .c = c, .alpha = alpha};
    run_gemms(&j, 1, false, beta);
}

/* D = cbeta D + alpha A B for mm (2-D), bmm (3-D), or addbmm (sum: A, B 3-D, D 2-D). */
static void blas_gemm(int dt, const tc_tensor *A, const tc_tensor *B, tc_tensor *D, bool sum, double alpha,
                      double cbeta)
{
    mat a = mat_of(A), b = mat_of(B), c = mat_of(D);
    int64_t batch = A->ndim == 3 ? A->size[0] : 1, es = tc_elsize(dt);
    if (a.cols == 0 || batch == 0) { /* no products: D = beta M */
        scale_by(D, cbeta);
        return;
    }
    int64_t lda, ldb, ldc;
    if (layout(&c, &ldc) != 'N') { /* BLAS writes row-major C: compute C^T = B^T A^T */
        mat t = mat_t(a);
        a = mat_t(b), b = t, c = mat_t(c);
        layout(&c, &ldc);
    }
    char la = layout(&a, &lda), lb = layout(&b, &ldb);
    gemm_job j = {.dt = dt,
                  .ta = la == 'N' ? CblasNoTrans : CblasTrans,
                  .tb = lb == 'N' ? CblasNoTrans : CblasTrans,
                  .n = (int)c.rows, .m = (int)c.cols, .k = (int)a.cols,
                  .lda = (int)lda, .ldb = (int)ldb, .ldc = (int)ldc,
                  .a = a.p, .b = b.p, .c = c.p,
                  .abs = a.bs * es, .bbs = b.bs * es, .cbs = sum ? 0 : c.bs * es,
                  .alpha = alpha};
    run_gemms(&j, batch, sum, cbeta);
}

/* ---- integer path: one strided loop for every op ------------------------------------- */

/* C[b] = beta C[b] + alpha A[b] B[b] (or the sum over b into one C), in wrapping 64-bit
 * arithmetic truncated to the element type: what a loop in T gives, without signed
 * overflow being undefined. */
typedef struct int_job {
    mat a, b, c;
    int64_t batch;
    bool sum;
    int64_t alpha, beta;
} int_job;

#define INT_ROWS(E, T, sfx)                                                                 \
    static void int_rows_##sfx(void *ctx, int64_t begin, int64_t end)                       \
    {                                                                                       \
        const int_job *j = ctx;                                                             \
        int64_t nk = j->a.cols, nb = j->sum ? j->batch : 1;                                 \
        for (int64_t r = begin; r < end; r++) {                                             \
            int64_t bi = j->sum ? 0 : r / j->c.rows, i = j->sum ? r : r % j->c.rows;        \
            for (int64_t col = 0; col < j->c.cols; col++) {                                 \
                uint64_t acc = 0;                                                           \
                for (int64_t q = bi; q < bi + nb; q++) {                                    \
                    const T *pa = (const T *)j->a.p + q * j->a.bs + i * j->a.rs;            \
                    const T *pb = (const T *)j->b.p + q * j->b.bs + col * j->b.cs;          \
                    for (int64_t kk = 0; kk < nk; kk++)                                     \
                        acc += (uint64_t)(int64_t)pa[kk * j->a.cs] * (uint64_t)(int64_t)pb[kk * j->b.rs]; \
                }                                                                           \
                T *pc = (T *)j->c.p + bi * j->c.bs + i * j->c.rs + col * j->c.cs;           \
                uint64_t v = (uint64_t)j->alpha * acc;                                      \
                if (j->beta) v += (uint64_t)j->beta * (uint64_t)(int64_t)*pc;               \
                *pc = (T)v;                                                                 \
            }                                                                               \
        }                                                                                   \
    }
TC_FOR_EACH_INT(INT_ROWS)

static const tc_range_fn int_rows[TC_DTYPE_COUNT] = {
#define INT_ENTRY(E, T, sfx) [E] = int_rows_##sfx,
    TC_FOR_EACH_INT(INT_ENTRY)
#undef INT_ENTRY
};

/* Integer weights: Torch7 converts them to the element type (truncation); saturate so an
 * out-of-range double is not undefined behaviour. */
static int64_t to_i64(double v)
{
    return v != v ? 0 : v <= -9.2e18 ? INT64_MIN : v >= 9.2e18 ? INT64_MAX : (int64_t)v;
}

static void int_product(tc_op op, const tc_tensor *A, const tc_tensor *B, tc_tensor *D, double alpha, double cbeta)
{
    int_job j = {.batch = 1, .alpha = to_i64(alpha), .beta = to_i64(cbeta)};
    switch (op) {
    case TC_OP_DOT: j.a = row_of(A), j.b = col_of(B), j.c = col_of(D); break;
    case TC_OP_MV:
    case TC_OP_ADDMV: j.a = mat_of(A), j.b = col_of(B), j.c = col_of(D); break;
    case TC_OP_ADDR: j.a = col_of(A), j.b = row_of(B), j.c = mat_of(D); break;
    default:
        j.a = mat_of(A), j.b = mat_of(B), j.c = mat_of(D);
        j.batch = A->ndim == 3 ? A->size[0] : 1;
        j.sum = op == TC_OP_ADDBMM;
        break;
    }
    int64_t rows = j.sum ? j.c.rows : j.batch * j.c.rows;
    int64_t work = j.c.cols * (j.a.cols * (j.sum ? j.batch : 1) + 1);
    tc_parallel_for(rows, work > 0 ? TC_PARALLEL_GRAIN / work + 1 : 1, int_rows[D->dtype], &j);
}

/* ---- the kernel ------------------------------------------------------------------------- */

tc_status tc_cpu_matmul(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_matmul);
    tc_cpu_blas_single_thread();
    tc_op op = k->op;
    bool add = k->nin == 3;
    const tc_tensor *M = add ? k->in[0] : NULL, *A = k->in[add ? 1 : 0], *B = k->in[add ? 2 : 1];
    double beta = add ? k->p->s[0] : 0, alpha = add ? k->p->s[1] : 1;
    tc_tensor *out = k->out[0];
    int dt = out->dtype;
    bool blas = dt == TC_F32 || dt == TC_F64;
    if (!blas && !int_rows[dt])
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: no CPU kernel for %s", k->info->name, tc_dtype_name((tc_dtype)dt));
    if (tc_tensor_numel(out) == 0) return TC_OK;

    /* Everything that can fail (allocation) happens before the result is written. */
    tc_tensor *tmp[3] = {NULL, NULL, NULL};
    tc_status s = TC_OK;
    if (blas && !blas_ok(A)) {
        if ((s = contiguous_copy(A, &tmp[0]))) goto done;
        A = tmp[0];
    }
    if (blas && !blas_ok(B)) {
        if ((s = contiguous_copy(B, &tmp[1]))) goto done;
        B = tmp[1];
    }
    bool m_read = M && beta != 0;
    tc_tensor *D = out;
    if ((blas && !blas_ok(out)) || self_overlaps(out) || overlap(out, A) || overlap(out, B) ||
        (m_read && overlap(out, M) && !same_view(M, out))) {
        if ((s = tc_tensor_alloc((tc_dtype)dt, out->ndim, out->size, &tmp[2]))) goto done;
        D = tmp[2];
    }
    /* cbeta: the weight of D's current content in the result (0: D is not read). */
    double cbeta = m_read ? beta : 0;
    if (m_read && !same_view(M, D)) copy_into(D, M);

    if (!blas) {
        int_product(op, A, B, D, alpha, cbeta);
    } else {
        switch (op) {
        case TC_OP_DOT: blas_dot(dt, A, B, D); break;
        case TC_OP_MV:
        case TC_OP_ADDMV: blas_gemv(dt, A, B, D, alpha, cbeta); break;
        case TC_OP_ADDR: blas_ger(dt, A, B, D, alpha, cbeta); break;
        default: blas_gemm(dt, A, B, D, op == TC_OP_ADDBMM, alpha, cbeta); break;
        }
    }
    if (D != out) copy_into(out, D);
done:
    for (int i = 0; i < 3; i++) tc_tensor_release(tmp[i]);
    return s;
}
