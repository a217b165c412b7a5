/* emu_cublas.cc -- the CUDA emulator's cuBLAS (tests only; emu.h says what the emulator is):
 * the handle calls and the two GEMMs core/cuda/blas.cu makes, as plain host loops with
 * cuBLAS's documented semantics and argument checks.
 *
 *   C = alpha op(A) op(B) + beta C, column-major, op(A) m x k, op(B) k x n, C m x n;
 *   beta == 0: C is not read (NaN in C does not propagate), as cuBLAS documents;
 *   k == 0 or alpha == 0: A and B are not read (reference BLAS's quick return): C = beta C;
 *   alpha / beta: host pointer mode (the only mode a handle of this emulator has), copied
 *   at the call, so a captured GEMM replays the values of its capture;
 *   a GEMM needs EMU_CUBLAS_WORKSPACE bytes of free device memory (cuBLAS's default
 *   workspace, taken stream-ordered when none is bound), else CUBLAS_STATUS_ALLOC_FAILED.
 * Type combinations (cublasGemmEx's table): 64F compute over f64; 32F (and PEDANTIC,
 * FAST_16F/16BF/TF32) over f32 -> f32, f16 -> f16|f32, bf16 -> bf16|f32; 16F compute over
 * f16. Inputs are widened to the compute type and each product accumulated there in k
 * order with a fused multiply-add (as GPU GEMM kernels accumulate), the result rounded once to C's type (round to nearest even). FAST_TF32 rounds the
 * inputs to TF32 (10 mantissa bits, as the tensor cores' conversion), so a test that
 * expects exact FP32 with TF32 allowed fails here as it would on a GPU. The integer and
 * complex combinations cuBLAS has are answered NOT_SUPPORTED with a note (not emulated).
 * Every range a call reads or writes is checked against the live device allocations
 * (emu::device_range) before anything runs; the loops themselves run through emu::enqueue
 * on the handle's stream.
 */
#include "emu.h"
#include <cublas_v2.h>

#define EMU_CUBLAS_WORKSPACE (4 << 20) /* cuBLAS's default workspace before Hopper: 4 MiB */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <mutex>
#include <set>

struct cublasContext {
    cudaStream_t stream;
    cublasMath_t mode;
};

namespace {

/* Live handles: a destroyed or made-up handle is refused (NOT_INITIALIZED), where real
 * cuBLAS would crash or silently misbehave. */
std::mutex g_mu;
std::set<cublasHandle_t> g_live;

bool live(cublasHandle_t h, const char *fn)
{
    if (!h) {
        emu::note("%s: handle is NULL", fn);
        return false;
    }
    std::lock_guard<std::mutex> l(g_mu);
    if (g_live.count(h)) return true;
    emu::note("%s: handle %p is not a live cuBLAS handle (destroyed, or never created)", fn, (void *)h);
    return false;
}

/* ---- element conversions (bit level, so they do not depend on cuda_fp16's host code) ---- */

float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint32_t bits_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float half_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return f32_of_bits(sign | 0x7f800000u | (m << 13)); /* inf / NaN (payload kept) */
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* zero or subnormal: exact */
        return sign ? -v : v;
    }
    return f32_of_bits(sign | ((e + 112) << 23) | (m << 13));
}

/* Round to nearest even; overflow to inf; subnormals; NaN stays NaN (quiet). */
uint16_t f32_to_half(float f)
{
    uint32_t u = bits_of_f32(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        float v = f32_of_bits(a) * 16777216.0f; /* in units of 2^-24, exact (power of 2) */
        float r = nearbyintf(v);                /* the default mode: to nearest even */
        return (uint16_t)(sign | (uint32_t)r);  /* r == 1024 is the smallest normal: right */
    }
    uint32_t mant = a + 0xfffu + ((a >> 13) & 1u); /* round the 13 dropped bits, ties to even */
    return (uint16_t)(sign | (((mant >> 13) - (112u << 10)) & 0x7fffu));
}

float bf16_to_f32(uint16_t b) { return f32_of_bits((uint32_t)b << 16); }

uint16_t f32_to_bf16(float f)
{
    uint32_t u = bits_of_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* TF32: 10 explicit mantissa bits, to nearest with ties away from zero (cvt.rna.tf32). */
float tf32_round(float f)
{
    uint32_t u = bits_of_f32(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return f; /* inf / NaN */
    u += 0x1000u;
    return f32_of_bits(u & 0xffffe000u);
}

/* ---- the computation --------------------------------------------------------------------- */

enum class acc { f64, f32, tf32, f16 };

struct gemm {
    bool ta, tb;
    int m, n, k;
    const char *a, *b;
    char *c;
    cudaDataType_t at, ct;
    int64_t lda, ldb, ldc;
    long long sa, sb, sc;
    int batch;
    acc mode;
    double alpha, beta; /* the host values, widened (exact for float / half) */
};

size_t esize(cudaDataType_t t)
{
    switch (t) {
    case CUDA_R_64F: return 8;
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
    }
}

double load(const char *p, cudaDataType_t t, int64_t i)
{
    switch (t) {
    case CUDA_R_64F: {
        double v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    case CUDA_R_32F: {
        float v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    case CUDA_R_16F:
    case CUDA_R_16BF: {
        uint16_t v;
        memcpy(&v, p + i * 2, 2);
        return t == CUDA_R_16F ? half_to_f32(v) : bf16_to_f32(v);
    }
    default: return 0;
    }
}

/* v is exactly representable in the compute type (see run): stores round once. */
void store(char *p, cudaDataType_t t, int64_t i, double v)
{
    switch (t) {
    case CUDA_R_64F: memcpy(p + i * 8, &v, 8); break;
    case CUDA_R_32F: {
        float f = (float)v;
        memcpy(p + i * 4, &f, 4);
        break;
    }
    case CUDA_R_16F:
    case CUDA_R_16BF: {
        uint16_t h = t == CUDA_R_16F ? f32_to_half((float)v) : f32_to_bf16((float)v);
        memcpy(p + i * 2, &h, 2);
        break;
    }
    default: break;
    }
}

/* Element (r, c) of op(X), X column-major with leading dim ld. */
inline int64_t at_op(bool t, int64_t r, int64_t c, int64_t ld) { return t ? c + r * ld : r + c * ld; }

float f16r(float v) { return half_to_f32(f32_to_half(v)); }

/* One matrix: C = alpha op(A) op(B) + beta C in g.mode's arithmetic. With k == 0 or
 * alpha == 0 the product is not formed (reference BLAS's quick return: A and B are not
 * read, so their NaN / inf do not reach C, and C = beta C). */
void run_one(const gemm &g, const char *a, const char *b, char *c)
{
    if (g.k == 0 || g.alpha == 0) {
        for (int64_t j = 0; j < g.n; j++)
            for (int64_t i = 0; i < g.m; i++) {
                int64_t ci = i + j * g.ldc;
                double v = g.beta == 0 ? 0 : g.beta * load(c, g.ct, ci);
                if (g.mode != acc::f64) v = (float)v;
                store(c, g.ct, ci, g.mode == acc::f16 ? f16r((float)v) : v);
            }
        return;
    }
    for (int64_t j = 0; j < g.n; j++)
        for (int64_t i = 0; i < g.m; i++) {
            int64_t ci = i + j * g.ldc;
            double r;
            if (g.mode == acc::f64) {
                double s = 0;
                for (int64_t l = 0; l < g.k; l++)
                    s = fma(load(a, g.at, at_op(g.ta, i, l, g.lda)), load(b, g.at, at_op(g.tb, l, j, g.ldb)), s);
                r = g.alpha * s;
                if (g.beta != 0) r += g.beta * load(c, g.ct, ci);
            } else if (g.mode == acc::f16) {
                float s = 0, al = (float)g.alpha, be = (float)g.beta;
                for (int64_t l = 0; l < g.k; l++)
                    s = f16r(fmaf((float)load(a, g.at, at_op(g.ta, i, l, g.lda)),
                                  (float)load(b, g.at, at_op(g.tb, l, j, g.ldb)), s));
                float v = f16r(al * s);
                if (be != 0) v = f16r(fmaf(be, (float)load(c, g.ct, ci), v));
                r = v;
            } else {
                bool tf = g.mode == acc::tf32;
                float s = 0, al = (float)g.alpha, be = (float)g.beta;
                for (int64_t l = 0; l < g.k; l++) {
                    float x = (float)load(a, g.at, at_op(g.ta, i, l, g.lda));
                    float y = (float)load(b, g.at, at_op(g.tb, l, j, g.ldb));
                    if (tf) x = tf32_round(x), y = tf32_round(y);
                    s = fmaf(x, y, s);
                }
                float v = al * s;
                if (be != 0) v += be * (float)load(c, g.ct, ci);
                r = v;
            }
            store(c, g.ct, ci, r);
        }
}

void run(const gemm &g)
{
    size_t ea = esize(g.at), ec = esize(g.ct);
    for (int q = 0; q < g.batch; q++)
        run_one(g, g.a + q * g.sa * (long long)ea, g.b + q * g.sb * (long long)ea, g.c + q * g.sc * (long long)ec);
}

/* ---- argument checks ----------------------------------------------------------------------- */

/* The compute arithmetic of (computeType, Atype = Btype, Ctype), or false: cuBLAS has no such
 * combination, or it is one (integer, complex) this emulator does not implement. */
bool combo(cublasComputeType_t ct, cudaDataType_t ab, cudaDataType_t c, acc *mode, bool *dbl_scale, bool *half_scale,
           const char *fn)
{
    *dbl_scale = *half_scale = false;
    switch (ct) {
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
        *mode = acc::f64, *dbl_scale = true;
        return ab == CUDA_R_64F && c == CUDA_R_64F;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        *mode = acc::f32;
        return (ab == CUDA_R_32F && c == CUDA_R_32F) || (ab == CUDA_R_16F && (c == CUDA_R_16F || c == CUDA_R_32F)) ||
               (ab == CUDA_R_16BF && (c == CUDA_R_16BF || c == CUDA_R_32F));
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        /* FAST_16F / 16BF may also use TF32 (cublas_api.h): emulated as TF32, the mildest */
        *mode = acc::tf32;
        return ab == CUDA_R_32F && c == CUDA_R_32F;
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        *mode = acc::f16, *half_scale = true;
        return ab == CUDA_R_16F && c == CUDA_R_16F;
    default:
        emu::note("%s: computeType %d is not emulated (integer / emulated-precision compute)", fn, (int)ct);
        return false;
    }
}

bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

bool algo_ok(cublasGemmAlgo_t a)
{
    int v = (int)a;
    return (v >= CUBLAS_GEMM_DEFAULT && v <= CUBLAS_GEMM_ALGO23) ||
           (v >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && v <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

/* [p + lo, p + hi) in elements of es bytes, for `batch` column-major r x c matrices with
 * leading dim ld, stride apart (a negative or zero stride is allowed: the span covers it). */
bool matrix_range(const void *p, size_t es, int64_t r, int64_t c, int64_t ld, long long stride, int batch,
                  const char *what)
{
    if (r == 0 || c == 0 || batch == 0) return true;
    int64_t one = (c - 1) * ld + r, last = (int64_t)(batch - 1) * stride;
    int64_t lo = last < 0 ? last : 0, hi = (last > 0 ? last : 0) + one;
    return emu::device_range((const char *)p + lo * (int64_t)es, (size_t)(hi - lo) * es, what);
}

/* The shared body of both GEMMs (fn names the entry point in diagnostics). */
cublasStatus_t gemm_call(const char *fn, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                         int m, int n, int k, const void *alpha, const void *A, cudaDataType_t Atype, int lda,
                         long long strideA, const void *B, cudaDataType_t Btype, int ldb, long long strideB,
                         const void *beta, void *C, cudaDataType_t Ctype, int ldc, long long strideC, int batchCount,
                         cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    if (!live(handle, fn)) return CUBLAS_STATUS_NOT_INITIALIZED;
    bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    int64_t arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        emu::note(__VA_ARGS__);                                                                                        \
        return CUBLAS_STATUS_INVALID_VALUE;                                                                            \
    } while (0)
    if (!op_ok(transa)) BAD("%s: transa %d is not CUBLAS_OP_N/T/C", fn, (int)transa);
    if (!op_ok(transb)) BAD("%s: transb %d is not CUBLAS_OP_N/T/C", fn, (int)transb);
    if (m < 0 || n < 0 || k < 0) BAD("%s: negative size m=%d n=%d k=%d", fn, m, n, k);
    if (batchCount < 0) BAD("%s: batchCount %d < 0", fn, batchCount);
    if (lda < (arows > 1 ? arows : 1))
        BAD("%s: lda %d < max(1, %lld) (rows of A as stored, transa %d)", fn, lda, (long long)arows, (int)transa);
    if (ldb < (brows > 1 ? brows : 1))
        BAD("%s: ldb %d < max(1, %lld) (rows of B as stored, transb %d)", fn, ldb, (long long)brows, (int)transb);
    if (ldc < (m > 1 ? m : 1)) BAD("%s: ldc %d < max(1, m = %d)", fn, ldc, m);
    if (!alpha || !beta) BAD("%s: alpha %p / beta %p is NULL", fn, alpha, beta);
    acc mode;
    bool dbl, half;
    if (Atype != Btype || !combo(computeType, Atype, Ctype, &mode, &dbl, &half, fn)) {
        emu::note("%s: Atype %d Btype %d Ctype %d with computeType %d is not a supported combination", fn, (int)Atype,
                  (int)Btype, (int)Ctype, (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!algo_ok(algo)) {
        emu::note("%s: algo %d is not a cublasGemmAlgo_t", fn, (int)algo);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS; /* nothing to write */
    size_t ea = esize(Atype), ec = esize(Ctype);
    char wa[64], wb[64], wc[64];
    snprintf(wa, sizeof wa, "%s A", fn), snprintf(wb, sizeof wb, "%s B", fn), snprintf(wc, sizeof wc, "%s C", fn);
    if (k > 0 && (!matrix_range(A, ea, arows, acols, lda, strideA, batchCount, wa) ||
                  !matrix_range(B, ea, brows, bcols, ldb, strideB, batchCount, wb)))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!matrix_range(C, ec, m, n, ldc, strideC, batchCount, wc)) return CUBLAS_STATUS_INVALID_VALUE;
    if (batchCount > 1 && strideC < (long long)(n - 1) * ldc + m && strideC > -((long long)(n - 1) * ldc + m))
        emu::note("%s: strideC %lld < one C matrix (%lld elements): the batch's results overlap (undefined on a GPU)",
                  fn, strideC, (long long)(n - 1) * ldc + m);
#undef BAD
    /* With no workspace bound, cuBLAS (12.2 and later) takes one stream-ordered from the
     * device's free memory (cudaMallocAsync), outside tocha's caching allocator: when that
     * allocator's cache holds the rest of the device, the call fails (PyTorch met this). */
    if (!emu::device_room(EMU_CUBLAS_WORKSPACE)) {
        emu::note("%s: no room for cuBLAS's %d-byte workspace on the device", fn, EMU_CUBLAS_WORKSPACE);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    gemm g;
    g.ta = ta, g.tb = tb, g.m = m, g.n = n, g.k = k;
    g.a = (const char *)A, g.b = (const char *)B, g.c = (char *)C;
    g.at = Atype, g.ct = Ctype, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.sa = strideA, g.sb = strideB, g.sc = strideC, g.batch = batchCount, g.mode = mode;
    if (dbl) {
        g.alpha = *(const double *)alpha, g.beta = *(const double *)beta;
    } else if (half) {
        g.alpha = half_to_f32(*(const uint16_t *)alpha), g.beta = half_to_f32(*(const uint16_t *)beta);
    } else {
        g.alpha = *(const float *)alpha, g.beta = *(const float *)beta;
    }
    emu::enqueue(handle->stream, fn, [g] { run(g); });
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

/* ---- the library's entry points (the names cublas_api.h declares) ------------------------- */

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) {
        emu::note("cublasCreate_v2: handle pointer is NULL");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    /* "allocates hardware resources on the host and device" (cuBLAS guide): a cudaMalloc,
     * which an open capture may forbid (emu.h) */
    *handle = nullptr;
    if (emu::capture_forbids("cublasCreate_v2 (allocates device memory)")) return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasHandle_t h = new cublasContext{nullptr, CUBLAS_DEFAULT_MATH};
    std::lock_guard<std::mutex> l(g_mu);
    g_live.insert(h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle)
{
    if (!live(handle, "cublasDestroy_v2")) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* "will implicitly call cublasDeviceSynchronize()" (cuBLAS guide) */
    if (emu::device_wait_forbidden("cublasDestroy_v2 (synchronizes the device)")) return CUBLAS_STATUS_INTERNAL_ERROR;
    {
        std::lock_guard<std::mutex> l(g_mu);
        g_live.erase(handle);
    }
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    if (!live(handle, "cublasSetStream_v2")) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!live(handle, "cublasSetMathMode")) return CUBLAS_STATUS_NOT_INITIALIZED;
    unsigned base = (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
        base != CUBLAS_TF32_TENSOR_OP_MATH && base != CUBLAS_FP32_EMULATED_BF16X9_MATH &&
        base != CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH) {
        emu::note("cublasSetMathMode: mode %d is not a cublasMath_t", (int)mode);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    /* Kept, not applied: the GEMMs tocha calls choose their arithmetic by computeType, and
     * the emulator reduces in the compute type anyway (DISALLOW_REDUCED_PRECISION_REDUCTION). */
    handle->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "<unrecognized cuBLAS status>";
    }
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo)
{
    return gemm_call("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta,
                     C, Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                       cublasOperation_t transb, int m, int n, int k,
                                                       const void *alpha, const void *A, cudaDataType Atype, int lda,
                                                       long long int strideA, const void *B, cudaDataType Btype,
                                                       int ldb, long long int strideB, const void *beta, void *C,
                                                       cudaDataType Ctype, int ldc, long long int strideC,
                                                       int batchCount, cublasComputeType_t computeType,
                                                       cublasGemmAlgo_t algo)
{
    return gemm_call("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B,
                     Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

} /* extern "C" */
