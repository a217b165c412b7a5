/* blas.cu -- the matrix products on the device (dot mv mm bmm addmv addmm addr baddbmm
 * addbmm) through cuBLAS, and the backend's switches (set_flag: TF32, cuDNN benchmark, cuDNN
 * for softmax / pooling).
 *
 * Every op is one formula, res = beta M + alpha (A @ B) (ops.def; s0 = beta, s1 = alpha,
 * plain products beta 0 alpha 1), computed as core/cpu/matmul.c does: vectors are (n,1)
 * columns or (1,n) rows, so dot, mv and addr are 1-row / 1-column / k = 1 products and
 * every op is one cublasGemmEx (or GemmStridedBatchedEx for bmm / baddbmm; addbmm adds its
 * batch into one C, one call per matrix in batch order). Layouts follow blas_plan.h;
 * operands cuBLAS cannot read are copied to dense scratch first (strided.cu).
 *
 * The result is computed into D: the result itself when cuBLAS can write it and it
 * overlaps neither A nor B (nor M, unless M *is* it: the in-place addmm), else a dense
 * scratch copied back at the end. D starts as M (broadcast in) and cuBLAS weighs it by
 * beta; with beta == 0 M is never read (cuBLAS does not read C when beta is 0), so NaN in M
 * cannot leak, as on the CPU.
 *
 * dtypes: f32 (exact FP32 unless set_flag(TF32): CUBLAS_COMPUTE_32F_FAST_TF32), f64,
 * f16 / bf16 with FP32 accumulation and reductions (rounded once at the store, as the CPU
 * computes in f32; addbmm sums its batch into a float32 scratch C, then rounds: a half C
 * would be rounded after every matrix, which the emulator, tests/emu, showed). Integer dtypes (u8 i8 i16 i32 i64) run a plain kernel with the CPU's
 * wrapping 64-bit arithmetic (int_product), bit-identical to the CPU.
 * Handles: one per (device, concurrent caller), kept in a small per-device pool, since a
 * cuBLAS handle must not be used by two threads at once.
 */
#define MM_FN __device__ __forceinline__
#include "blas_plan.h"
#include "dnn_select.h"
#include "strided.h"
#include <cublas_v2.h>
#include <pthread.h>

/* ---- switches ------------------------------------------------------------------------- */

int cu_allow_tf32 = 0, cu_cudnn_benchmark = 0;
int cu_cudnn_enabled = 1; /* as libtocha's default for TC_CUDA_FLAG_CUDNN */

tc_status cu_set_flag(int flag, int64_t value)
{
    if (flag == TC_CUDA_FLAG_TF32) cu_allow_tf32 = value != 0;
    else if (flag == TC_CUDA_FLAG_CUDNN_BENCHMARK) cu_cudnn_benchmark = value != 0;
    else if (flag == TC_CUDA_FLAG_CUDNN) cu_cudnn_enabled = value != 0;
    else return cu_fail(TC_ERR_ARG, "cuda set_flag: flag %d is not the backend's", flag);
    return TC_OK;
}

/* ---- handles ---------------------------------------------------------------------------- */

#define MAX_DEVICES 64
#define POOL_KEEP 16 /* idle handles kept per device; more are destroyed when returned ... */
#define POOL_MAX 64  /* ... but not while the thread captures (cublasDestroy waits for the device) */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t g_idle[MAX_DEVICES][POOL_MAX];
static int g_nidle[MAX_DEVICES];

static tc_status blas_fail(cublasStatus_t st, const char *op, const char *what)
{
    tc_status code = st == CUBLAS_STATUS_ALLOC_FAILED    ? TC_ERR_MEMORY
                     : st == CUBLAS_STATUS_NOT_SUPPORTED ? TC_ERR_UNSUPPORTED
                     : st == CUBLAS_STATUS_ARCH_MISMATCH ? TC_ERR_UNSUPPORTED
                                                         : TC_ERR_DEVICE;
    (void)cudaGetLastError(); /* a failed launch inside cuBLAS must not be reported twice */
    return cu_fail(code, "%s: %s: %s", op, what, cublasGetStatusString(st));
}

/* The handle's work goes on the calling thread's current stream (handles are shared
 * between threads through the pool, so the stream is set at every checkout). Since CUDA
 * 12.2 cuBLAS takes its workspace stream-ordered (cudaMallocAsync), which graph capture
 * records, so no workspace of our own is bound; but that memory comes from outside the
 * caching allocator, so a GEMM that fails for lack of it runs again once the cache has
 * been given back to the device (run_gemm), as the allocator's own retry does. */
static tc_status bind_stream(cublasHandle_t h, const char *op)
{
    cublasStatus_t st = cublasSetStream(h, cu_stream());
    return st == CUBLAS_STATUS_SUCCESS ? TC_OK : blas_fail(st, op, "cublasSetStream");
}

/* A handle for dev (current on this thread), from the pool or new, bound to the current
 * stream. */
static tc_status handle_get(int dev, cublasHandle_t *h, const char *op)
{
    if (dev < 0 || dev >= MAX_DEVICES) return cu_fail(TC_ERR_ARG, "%s: device %d is beyond cuBLAS's pool", op, dev);
    pthread_mutex_lock(&g_mu);
    *h = g_nidle[dev] > 0 ? g_idle[dev][--g_nidle[dev]] : NULL;
    pthread_mutex_unlock(&g_mu);
    if (*h) {
        tc_status s = bind_stream(*h, op);
        if (s) {
            cublasDestroy(*h);
            *h = NULL;
        }
        return s;
    }
    cublasStatus_t st;
    { /* it allocates device memory: allowed inside this thread's capture (cuda_internal.h) */
        cu_relaxed_capture relaxed;
        st = cublasCreate(h);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        *h = NULL;
        return blas_fail(st, op, "cublasCreate");
    }
    /* Reductions (split-K) in the compute type, never in f16/bf16: one rounding at the
     * store, as the CPU's f32 computation. TF32 is chosen per call by the compute type. */
    st = cublasSetMathMode(*h, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (st != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(*h);
        return blas_fail(st, op, "cublasSetMathMode");
    }
    tc_status s = bind_stream(*h, op);
    if (s) {
        cublasDestroy(*h);
        *h = NULL;
    }
    return s;
}

static void handle_put(int dev, cublasHandle_t h)
{
    bool capturing = cu_capturing_any();
    pthread_mutex_lock(&g_mu);
    bool keep = g_nidle[dev] < (capturing ? POOL_MAX : POOL_KEEP);
    if (keep) g_idle[dev][g_nidle[dev]++] = h;
    pthread_mutex_unlock(&g_mu);
    if (!keep) cublasDestroy(h);
}

void cu_blas_warm(int dev)
{
    cublasHandle_t h; /* an idle one taken and given back, or one made now and kept */
    if (handle_get(dev, &h, "cuBLAS handle") == TC_OK) handle_put(dev, h);
}

/* ---- operands ----------------------------------------------------------------------------- */

/* The last two dims of v (the dim before them, if any, is the batch). */
static mm_mat mat_of(const tc_cuda_view *v)
{
    int d = v->ndim - 2;
    return mm_mat{(char *)v->data, v->size[d], v->size[d + 1], v->stride[d], v->stride[d + 1],
                  d > 0 ? v->stride[d - 1] : 0};
}

/* A vector as an (n,1) column, a 0-d tensor as (1,1); rows are their transpose. */
static mm_mat col_of(const tc_cuda_view *v)
{
    if (v->ndim == 0) return mm_mat{(char *)v->data, 1, 1, 0, 0, 0};
    return mm_mat{(char *)v->data, v->size[0], 1, v->stride[0], 0, 0};
}

enum role { MAT, COL, ROW };

static mm_mat operand(const tc_cuda_view *v, role r)
{
    return r == MAT ? mat_of(v) : r == COL ? col_of(v) : mm_t(col_of(v));
}

/* Whether the byte ranges two views span intersect (conservative aliasing test). */
static bool overlap(const tc_cuda_view *a, const tc_cuda_view *b)
{
    if (a->numel == 0 || b->numel == 0) return false;
    uintptr_t lo[2], hi[2];
    const tc_cuda_view *t[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        int64_t es = (int64_t)cu_elsize(t[i]->dtype), l = 0, h = 0;
        for (int d = 0; d < t[i]->ndim; d++) {
            int64_t span = (t[i]->size[d] - 1) * t[i]->stride[d];
            if (span < 0) l += span;
            else h += span;
        }
        lo[i] = (uintptr_t)t[i]->data + (uintptr_t)(l * es);
        hi[i] = (uintptr_t)t[i]->data + (uintptr_t)((h + 1) * es);
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

/* m is exactly d's elements (in-place addmm: out == M), so d already holds M. */
static bool same_view(const tc_cuda_view *m, const tc_cuda_view *d)
{
    if (m->data != d->data || m->ndim != d->ndim) return false;
    for (int i = 0; i < d->ndim; i++)
        if (m->size[i] != d->size[i] || (d->size[i] > 1 && m->stride[i] != d->stride[i])) return false;
    return true;
}

/* ---- the products ------------------------------------------------------------------------- */

struct gemm_types {
    cudaDataType_t t;
    cublasComputeType_t ct;
    bool dbl; /* alpha/beta are doubles (else floats) */
};

static bool types_of(int dt, gemm_types *g)
{
    switch (dt) {
    case TC_F32: *g = {CUDA_R_32F, cu_allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false}; return true;
    case TC_F64: *g = {CUDA_R_64F, CUBLAS_COMPUTE_64F, true}; return true;
    case TC_F16: *g = {CUDA_R_16F, CUBLAS_COMPUTE_32F, false}; return true;
    case TC_BF16: *g = {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false}; return true;
    default: return false;
    }
}

/* A cuBLAS call, made again once if it failed for lack of device memory and the cache
 * could be given back (not while capturing). A failed call has queued nothing. */
template <class F> static cublasStatus_t with_memory_retry(int dev, F call)
{
    cublasStatus_t st = call();
    if (st == CUBLAS_STATUS_ALLOC_FAILED && !cu_capturing_any() && cu_release_cache(dev) == TC_OK) st = call();
    return st;
}

/* One planned call over `batch` matrices (sum: added into one C in batch order, the first
 * weighted by beta, the rest by 1). */
static tc_status run_gemm(int dev, cublasHandle_t h, const gemm_types *ty, int64_t es, const mm_call *g,
                          int64_t batch, bool sum, double alpha, double beta, cudaDataType_t ctype, const char *op)
{
    cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    float fa = (float)alpha, fb = (float)beta, one_f = 1;
    double one_d = 1;
    const void *pa = ty->dbl ? (const void *)&alpha : &fa;
    cublasStatus_t st;
    if (!sum && batch > 1) {
        const void *pb = ty->dbl ? (const void *)&beta : &fb;
        st = with_memory_retry(dev, [&] {
            return cublasGemmStridedBatchedEx(h, ta, tb, g->m, g->n, g->k, pa, g->a, ty->t, (int)g->lda, g->sa, g->b,
                                              ty->t, (int)g->ldb, g->sb, pb, g->c, ctype, (int)g->ldc, g->sc,
                                              (int)batch, ty->ct, CUBLAS_GEMM_DEFAULT);
        });
        return st == CUBLAS_STATUS_SUCCESS ? TC_OK : blas_fail(st, op, "cublasGemmStridedBatchedEx");
    }
    for (int64_t i = 0; i < batch; i++) {
        const void *pb = i > 0 ? (ty->dbl ? (const void *)&one_d : &one_f) : ty->dbl ? (const void *)&beta : &fb;
        st = with_memory_retry(dev, [&] {
            return cublasGemmEx(h, ta, tb, g->m, g->n, g->k, pa, g->a + i * g->sa * es, ty->t, (int)g->lda,
                                g->b + i * g->sb * es, ty->t, (int)g->ldb, pb, g->c, ctype, (int)g->ldc, ty->ct,
                                CUBLAS_GEMM_DEFAULT);
        });
        if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(st, op, "cublasGemmEx");
    }
    return TC_OK;
}

/* ---- integer products: one thread per result element ------------------------------------ */

/* mm_int_at (blas_plan.h) for every result element. */
template <class T>
__global__ void int_product(mm_mat a, mm_mat b, mm_mat c, int64_t batch, bool sum, int64_t alpha, int64_t beta)
{
    int64_t n = (sum ? c.rows : batch * c.rows) * c.cols;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x)
        mm_int_at<T>(a, b, c, batch, sum, alpha, beta, t);
}

/* Integer weights: Torch7 converts them to the element type (truncation); saturated so an
 * out-of-range double is not undefined behaviour (as the CPU). */
static int64_t to_i64(double v)
{
    return v != v ? 0 : v <= -9.2e18 ? INT64_MIN : v >= 9.2e18 ? INT64_MAX : (int64_t)v;
}

static tc_status run_int(int dt, const mm_mat &a, const mm_mat &b, const mm_mat &c, int64_t batch, bool sum,
                         double alpha, double beta, const char *op)
{
    int64_t n = (sum ? c.rows : batch * c.rows) * c.cols;
    unsigned g = cu_blocks_for(n, 256);
    int64_t ia = to_i64(alpha), ib = to_i64(beta);
    switch (dt) {
    case TC_U8: int_product<uint8_t><<<g, 256, 0, cu_stream()>>>(a, b, c, batch, sum, ia, ib); break;
    case TC_I8: int_product<int8_t><<<g, 256, 0, cu_stream()>>>(a, b, c, batch, sum, ia, ib); break;
    case TC_I16: int_product<int16_t><<<g, 256, 0, cu_stream()>>>(a, b, c, batch, sum, ia, ib); break;
    case TC_I32: int_product<int32_t><<<g, 256, 0, cu_stream()>>>(a, b, c, batch, sum, ia, ib); break;
    case TC_I64: int_product<int64_t><<<g, 256, 0, cu_stream()>>>(a, b, c, batch, sum, ia, ib); break;
    default: return cu_fail(TC_ERR_INTERNAL, "%s: integer product of dtype %d", op, dt);
    }
    return cu_check(cudaGetLastError(), op);
}

static bool is_int(int dt) { return dt == TC_U8 || dt == TC_I8 || dt == TC_I16 || dt == TC_I32 || dt == TC_I64; }

tc_status cu_op_matmul(int dev, const tc_cuda_call *c)
{
    const char *op = cu_op_name(c->op);
    bool add = c->nin == 3;
    const tc_cuda_view *M = add ? &c->in[0] : NULL;
    tc_cuda_view A = c->in[add ? 1 : 0], B = c->in[add ? 2 : 1];
    const tc_cuda_view *out = &c->out[0];
    int dt = out->dtype;
    gemm_types ty = {};
    bool ints = is_int(dt);
    if (!ints && !types_of(dt, &ty)) return cu_unsupported(c);
    if (out->numel == 0) return TC_OK;
    double beta = add ? c->params.s[0] : 0, alpha = add ? c->params.s[1] : 1;
    int64_t es = (int64_t)cu_elsize(dt);

    role ra = MAT, rb = MAT, rc = MAT;
    switch (c->op) {
    case TC_OP_DOT: ra = ROW, rb = COL, rc = COL; break;
    case TC_OP_MV:
    case TC_OP_ADDMV: rb = COL, rc = COL; break;
    case TC_OP_ADDR: ra = COL, rb = ROW; break;
    default: break;
    }
    bool sum = c->op == TC_OP_ADDBMM;
    int64_t batch = A.ndim == 3 ? A.size[0] : 1, cbatch = sum ? 1 : batch;
    if (batch > INT_MAX) return cu_fail(TC_ERR_UNSUPPORTED, "%s: batch %lld exceeds cuBLAS's int", op, (long long)batch);

    void *tmp[4] = {NULL, NULL, NULL, NULL};
    tc_status s = TC_OK;
    tc_cuda_view D = *out;
    bool m_read = M && beta != 0;
    mm_mat a = operand(&A, ra), b = operand(&B, rb), d;
    /* Everything that can fail (allocation) happens before the result is written. The
     * integer kernel reads any strides; cuBLAS needs the layouts of blas_plan.h. */
    if (!ints && !mm_readable(&a, batch)) {
        if ((s = cu_dense_input(dev, &c->in[add ? 1 : 0], &A, &tmp[0], op))) goto done;
        a = operand(&A, ra);
    }
    if (!ints && !mm_readable(&b, batch)) {
        if ((s = cu_dense_input(dev, &c->in[add ? 2 : 1], &B, &tmp[1], op))) goto done;
        b = operand(&B, rb);
    }
    d = operand(out, rc);
    if (!mm_writable(&d, cbatch) || overlap(out, &A) || overlap(out, &B) ||
        (m_read && overlap(out, M) && !same_view(M, out))) {
        if ((s = cu_scratch_alloc(dev, (size_t)(out->numel * es), &tmp[2]))) goto done;
        D = cu_view_dense(out, tmp[2]);
        d = operand(&D, rc);
    }
    /* cbeta: the weight of D's current content in the result (0: D is not read) */
    {
        double cbeta = m_read ? beta : 0;
        if (m_read && !same_view(M, &D) && (s = cu_strided_copy(&D, M, op))) goto done;
        if (ints) {
            if ((s = run_int(dt, a, b, d, batch, sum, alpha, cbeta, op))) goto done;
        } else if (a.cols == 0 || batch == 0) { /* no products: D = beta M */
            if ((s = cu_strided_scale(&D, cbeta, op))) goto done;
        } else {
            /* half addbmm: the batch is summed into a float32 scratch C and rounded once, as
             * the CPU does (into a half C, every matrix of the batch would round it) */
            bool widen = sum && batch > 1 && (dt == TC_F16 || dt == TC_BF16);
            tc_cuda_view D32 = D;
            mm_mat dc = d;
            if (widen) {
                if ((s = cu_scratch_alloc(dev, (size_t)out->numel * 4, &tmp[3]))) goto done;
                D32 = cu_view_dense(&D, tmp[3]);
                D32.dtype = TC_F32;
                if (cbeta != 0 && (s = cu_convert_view(dev, c->op, &D32, &D))) goto done;
                dc = operand(&D32, rc);
            }
            mm_call g = mm_plan(a, b, dc);
            cublasHandle_t h;
            if ((s = handle_get(dev, &h, op))) goto done;
            s = run_gemm(dev, h, &ty, es, &g, batch, sum, alpha, cbeta, widen ? CUDA_R_32F : ty.t, op);
            handle_put(dev, h);
            if (s) goto done;
            if (widen && (s = cu_convert_view(dev, c->op, &D, &D32))) goto done;
        }
        if (tmp[2]) s = cu_strided_copy(out, &D, op);
    }
done:
    /* Blocks go back to the cache at once: later work on the default stream is ordered
     * after the queued kernels that use them. */
    for (int i = 0; i < 4; i++)
        if (tmp[i]) cu_scratch_free(dev, tmp[i]);
    return s;
}
