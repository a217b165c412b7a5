/* test_emu_blas.cc -- unit test of the CUDA emulator's fake cuBLAS (emu_cublas.cc) and fake
 * cub (cub/cub.cuh), without the emulator's runtime: this file supplies emu::enqueue (runs
 * the work at once, or records it while `g_capture` is set, for a replay), emu::device_range
 * (a small registry of test allocations) and emu::note (kept for the checks).
 * Checked against independent references: every GEMM type combination and transpose
 * core/cuda/blas.cu uses (plus op C), leading dims with padding, strided batches (stride 0
 * broadcast), alpha / beta (beta 0 does not read C; alpha 0 does not read A, B), the conversions' rounding at known bit
 * patterns, TF32 input rounding, cuBLAS's argument checks and statuses, the device-range
 * checks, captured GEMMs replaying the alpha of the call; cub's two-phase protocol, the
 * exclusive sum, and the segmented stable sort in cub's radix key order for every key type
 * core/cuda/sort.cu sorts. Prints "N passed, N failed" (tests/run.sh reads it).
 * Build: g++ -std=c++17 -I/usr/local/cuda/include -Itests/emu tests/emu/test_emu_blas.cc
 *        tests/emu/emu_cublas.cc
 */
#include "../cuda_host/host_check.h"
#include "emu.h"
#include <cub/cub.cuh>
#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

/* ---- stand-ins for the emulator's runtime ------------------------------------------------- */

static std::map<uintptr_t, size_t> g_alloc;
static bool g_capture;
static std::vector<std::function<void()>> g_graph;
static std::string g_note;
static int g_enqueued;
static cudaStream_t g_last_stream;

namespace emu {
void enqueue(cudaStream_t s, const char *, std::function<void()> work)
{
    g_enqueued++, g_last_stream = s;
    if (g_capture) g_graph.push_back(std::move(work));
    else work();
}

bool device_range(const void *p, size_t nbytes, const char *what)
{
    uintptr_t a = (uintptr_t)p;
    auto it = g_alloc.upper_bound(a);
    if (it != g_alloc.begin()) {
        --it;
        if (a >= it->first && a + nbytes <= it->first + it->second) return true;
    }
    note("%s: [%p, +%zu) is not inside one device allocation", what, p, nbytes);
    return false;
}

/* what the emulator's runtime answers while a capture forbids the call (set by the test) */
static bool g_forbid_alloc, g_forbid_wait;
bool capture_forbids(const char *) { return g_forbid_alloc; }
bool device_wait_forbidden(const char *) { return g_forbid_wait; }
static bool g_full; /* the device has no room for cuBLAS's workspace */
bool device_room(size_t) { return !g_full; }

void note(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_note = buf;
    if (getenv("EMU_TEST_VERBOSE")) fprintf(stderr, "emu: %s\n", buf);
}
} // namespace emu

static void *dalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    g_alloc[(uintptr_t)p] = bytes;
    return p;
}
static void dfree(void *p)
{
    g_alloc.erase((uintptr_t)p);
    free(p);
}

static void replay()
{
    for (auto &w : g_graph) w();
    g_graph.clear();
}

/* ---- element formats (written independently of emu_cublas.cc) ----------------------------- */

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
/* Exact for the values the tests store (normal halves / bf16 with short mantissas). */
static uint16_t to_half_exact(float f)
{
    if (f == 0) return signbit(f) ? 0x8000 : 0;
    if (fabsf(f) < ldexpf(1, -14)) return (uint16_t)((f < 0 ? 0x8000 : 0) | (uint16_t)(fabsf(f) * 16777216.0f));
    int e;
    float m = frexpf(fabsf(f), &e); /* f = m 2^e, m in [0.5, 1) */
    uint16_t mant = (uint16_t)((m * 2 - 1) * 1024);
    return (uint16_t)((f < 0 ? 0x8000 : 0) | ((unsigned)(e - 1 + 15) << 10) | mant);
}
static float from_half(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(1024 + m), e - 25);
    return h & 0x8000 ? -v : v;
}
static uint16_t to_bf16_exact(float f) { return (uint16_t)(fbits(f) >> 16); }
static float from_bf16(uint16_t b) { return bitsf((uint32_t)b << 16); }

/* A host buffer of n elements of type t holding the given (exactly representable) values. */
static std::vector<char> pack(cudaDataType_t t, const std::vector<double> &v)
{
    size_t es = t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
    std::vector<char> out(v.size() * es);
    for (size_t i = 0; i < v.size(); i++) {
        if (t == CUDA_R_64F) memcpy(&out[i * 8], &v[i], 8);
        else if (t == CUDA_R_32F) {
            float f = (float)v[i];
            memcpy(&out[i * 4], &f, 4);
        } else {
            uint16_t h = t == CUDA_R_16F ? to_half_exact((float)v[i]) : to_bf16_exact((float)v[i]);
            memcpy(&out[i * 2], &h, 2);
        }
    }
    return out;
}
static double unpack1(cudaDataType_t t, const char *p, size_t i)
{
    if (t == CUDA_R_64F) {
        double d;
        memcpy(&d, p + i * 8, 8);
        return d;
    }
    if (t == CUDA_R_32F) {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + i * 2, 2);
    return t == CUDA_R_16F ? from_half(h) : from_bf16(h);
}
static size_t esz(cudaDataType_t t) { return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2; }

/* ---- GEMM against a naive column-major reference ------------------------------------------ */

struct combo {
    cudaDataType_t ab, c;
    cublasComputeType_t ct;
    const char *name;
};

/* Small integers (and halves) make every product and sum exact in every type, so the
 * results must match the reference exactly; bf16 results stay below 256. */
static double small_val(bool tiny) { return tiny ? (double)(rint_(5) - 2) : (double)(rint_(9) - 4) * 0.5; }

static void check_gemm(cublasHandle_t h, const combo &cb, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, int pad, int batch, bool strided, long long sa_extra, double alpha, double beta,
                       bool nan_c)
{
    bool tiny = cb.ab == CUDA_R_16BF || cb.c == CUDA_R_16BF;
    bool TA = ta != CUBLAS_OP_N, TB = tb != CUBLAS_OP_N;
    int ar = TA ? k : m, ac = TA ? m : k, br = TB ? n : k, bc = TB ? k : n;
    int lda = std::max(1, ar) + pad, ldb = std::max(1, br) + pad, ldc = std::max(1, m) + pad;
    long long sa = sa_extra < 0 ? 0 : (long long)lda * ac + sa_extra, sb = (long long)ldb * bc + 1,
              sc = (long long)ldc * n + 2;
    size_t na = (size_t)(sa * (batch - 1) + (long long)lda * ac), nb = (size_t)(sb * (batch - 1) + (long long)ldb * bc),
           nc = (size_t)(sc * (batch - 1) + (long long)ldc * n);
    std::vector<double> A(na), B(nb), C(nc);
    for (auto &x : A) x = small_val(tiny);
    for (auto &x : B) x = small_val(tiny);
    for (auto &x : C) x = nan_c ? NAN : small_val(tiny);
    std::vector<char> ha = pack(cb.ab, A), hb = pack(cb.ab, B), hc = pack(cb.c, C);
    void *da = dalloc(ha.size()), *db = dalloc(hb.size()), *dc = dalloc(hc.size());
    if (na) memcpy(da, ha.data(), ha.size());
    if (nb) memcpy(db, hb.data(), hb.size());
    memcpy(dc, hc.data(), hc.size());
    /* the scale type: double for 64F, half for 16F, float otherwise */
    bool dbl = cb.ct == CUBLAS_COMPUTE_64F, half = cb.ct == CUBLAS_COMPUTE_16F;
    float fa = (float)alpha, fb = (float)beta;
    uint16_t ha_ = to_half_exact(fa), hb_ = to_half_exact(fb);
    const void *pa = dbl ? (const void *)&alpha : half ? (const void *)&ha_ : &fa,
               *pb = dbl ? (const void *)&beta : half ? (const void *)&hb_ : &fb;
    cublasStatus_t st =
        strided ? cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, pa, da, cb.ab, lda, sa, db, cb.ab, ldb, sb, pb, dc,
                                             cb.c, ldc, sc, batch, cb.ct, CUBLAS_GEMM_DEFAULT)
                : cublasGemmEx(h, ta, tb, m, n, k, pa, da, cb.ab, lda, db, cb.ab, ldb, pb, dc, cb.c, ldc, cb.ct,
                               CUBLAS_GEMM_DEFAULT);
    EXPECT(st == CUBLAS_STATUS_SUCCESS, "%s gemm status %d", cb.name, (int)st);
    int bad = 0;
    std::vector<bool> touched(nc, false);
    for (int q = 0; q < batch; q++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int l = 0; l < k; l++) {
                    double x = A[(size_t)(q * sa + (TA ? l + (long long)i * lda : i + (long long)l * lda))];
                    double y = B[(size_t)(q * sb + (TB ? j + (long long)l * ldb : l + (long long)j * ldb))];
                    s += x * y;
                }
                size_t ci = (size_t)(q * sc + i + (long long)j * ldc);
                double want = alpha * s + (beta != 0 ? beta * C[ci] : 0);
                double got = unpack1(cb.c, (const char *)dc, ci);
                touched[ci] = true;
                if (!(got == want) && bad++ < 3)
                    EXPECT(false, "%s ta%d tb%d m%d n%d k%d batch%d [%d,%d,%d]: got %g want %g", cb.name, (int)ta,
                           (int)tb, m, n, k, batch, q, i, j, got, want);
            }
    EXPECT(bad == 0, "%s: %d wrong elements", cb.name, bad);
    /* padding rows / gaps between the batch's matrices are untouched */
    int moved = 0;
    for (size_t i = 0; i < nc; i++)
        if (!touched[i] && memcmp((const char *)dc + i * esz(cb.c), &hc[i * esz(cb.c)], esz(cb.c)) != 0) moved++;
    EXPECT(moved == 0, "%s: %d elements outside C written", cb.name, moved);
    dfree(da), dfree(db), dfree(dc);
}

static const combo k_combos[] = {
    {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "f32"},
    {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, "f32/tf32"},
    {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, "f64"},
    {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, "f16"},
    {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16"},
    {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "f16->f32"},
    {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, "bf16->f32"},
    {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, "f16/16F"},
};

static void test_gemm_values(cublasHandle_t h)
{
    const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
    for (const combo &cb : k_combos)
        for (cublasOperation_t ta : ops)
            for (cublasOperation_t tb : ops) {
                check_gemm(h, cb, ta, tb, 3, 4, 5, 0, 1, false, 0, 1, 0, false);
                check_gemm(h, cb, ta, tb, 5, 2, 3, 2, 1, false, 0, 2, 0, true); /* beta 0: NaN C never read */
                check_gemm(h, cb, ta, tb, 4, 3, 2, 1, 1, false, 0, -1, 0.5, false);
                check_gemm(h, cb, ta, tb, 1, 1, 7, 0, 1, false, 0, 1, 1, false);   /* dot */
                check_gemm(h, cb, ta, tb, 6, 1, 4, 0, 1, false, 0, 1, 0, false);   /* mv */
                check_gemm(h, cb, ta, tb, 3, 4, 1, 1, 1, false, 0, 1, 1, false);   /* addr: k = 1 */
                check_gemm(h, cb, ta, tb, 3, 2, 4, 1, 3, true, 0, 1, 0.5, false); /* bmm */
                check_gemm(h, cb, ta, tb, 2, 3, 2, 0, 4, true, -1, 1, 0, true);   /* stride 0: broadcast A */
            }
    /* k = 0: C = beta C (beta 0: zeros, NaN not read) */
    for (const combo &cb : k_combos) {
        check_gemm(h, cb, CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 0, 0, 1, false, 0, 1, 0, true);
        check_gemm(h, cb, CUBLAS_OP_N, CUBLAS_OP_T, 3, 2, 0, 1, 2, true, 0, 1, 0.5, false);
    }
}

/* 1x1x1 products alpha * 1 * 1 stored in C's type: the store's rounding at known bits. */
static uint32_t store_bits(cublasHandle_t h, cudaDataType_t ab, cudaDataType_t c, cublasComputeType_t ct, float alpha,
                           float a = 1)
{
    std::vector<char> ha = pack(ab, {a}), hb = pack(ab, {1.0});
    void *da = dalloc(ha.size()), *db = dalloc(hb.size()), *dc = dalloc(8);
    memcpy(da, ha.data(), ha.size()), memcpy(db, hb.data(), hb.size()), memset(dc, 0x55, 8);
    float beta = 0;
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, da, ab, 1, db, ab, 1, &beta, dc, c, 1,
                                     ct, CUBLAS_GEMM_DEFAULT);
    EXPECT(st == CUBLAS_STATUS_SUCCESS, "store_bits status %d", (int)st);
    uint32_t r = 0;
    memcpy(&r, dc, esz(c));
    dfree(da), dfree(db), dfree(dc);
    return r;
}

static void test_rounding(cublasHandle_t h)
{
    struct {
        float v;
        uint32_t want;
    } half_cases[] = {
        {1.0f, 0x3c00}, {1 + ldexpf(1, -11), 0x3c00}, {1 + 3 * ldexpf(1, -11), 0x3c02}, {65504, 0x7bff},
        {65519, 0x7bff}, {65520, 0x7c00}, {-1e10f, 0xfc00}, {ldexpf(1, -24), 0x0001}, {ldexpf(1, -25), 0x0000},
        {3 * ldexpf(1, -25), 0x0002}, {ldexpf(1, -14), 0x0400}, {ldexpf(1023, -24), 0x03ff}, {-2, 0xc000},
        {ldexpf(2047, -25), 0x0400}, /* rounds up out of the subnormals */
    };
    for (auto &c : half_cases) {
        uint32_t got = store_bits(h, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, c.v);
        EXPECT(got == c.want, "half(%a) = %04x, want %04x", c.v, got, c.want);
    }
    uint32_t hn = store_bits(h, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, NAN);
    EXPECT((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "half(NaN) = %04x", hn);
    struct {
        float v;
        uint32_t want;
    } bf_cases[] = {{1.0f, 0x3f80}, {1 + ldexpf(1, -8), 0x3f80}, {1 + 3 * ldexpf(1, -8), 0x3f82}, {-3.0f, 0xc040},
                    {bitsf(0x7f7fffff), 0x7f80}};
    for (auto &c : bf_cases) {
        uint32_t got = store_bits(h, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, c.v);
        EXPECT(got == c.want, "bf16(%a) = %04x, want %04x", c.v, got, c.want);
    }
    uint32_t bn = store_bits(h, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, NAN);
    EXPECT((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0, "bf16(NaN) = %04x", bn);
    /* half inputs are read exactly (subnormal input) */
    uint32_t sub = store_bits(h, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, ldexpf(3, -24));
    EXPECT(bitsf(sub) == ldexpf(3, -24), "half subnormal input read as %a", bitsf(sub));
    /* TF32 rounds the inputs (10 mantissa bits, ties away); exact FP32 does not */
    float x = 1 + ldexpf(1, -12), y = 1 + ldexpf(1, -11), z = 1 + 3 * ldexpf(1, -11);
    EXPECT(bitsf(store_bits(h, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, x)) == x, "f32 keeps %a", x);
    EXPECT(bitsf(store_bits(h, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 1, x)) == 1, "tf32(%a)", x);
    EXPECT(bitsf(store_bits(h, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 1, y)) == 1 + ldexpf(1, -10),
           "tf32(%a) ties away", y);
    EXPECT(bitsf(store_bits(h, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 1, z)) == 1 + ldexpf(1, -9),
           "tf32(%a)", z);
    /* f64: alpha is read as a double (a float read would give a different value) */
    {
        double A = 1, B = 1, alpha = 1 + ldexp(1, -40), beta = 0, C = 7;
        void *da = dalloc(8), *db = dalloc(8), *dc = dalloc(8);
        memcpy(da, &A, 8), memcpy(db, &B, 8), memcpy(dc, &C, 8);
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, da, CUDA_R_64F, 1, db, CUDA_R_64F, 1, &beta, dc,
                     CUDA_R_64F, 1, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
        memcpy(&C, dc, 8);
        EXPECT(C == alpha, "f64 alpha: got %a want %a", C, alpha);
        dfree(da), dfree(db), dfree(dc);
    }
}

/* alpha == 0: A and B are not read (NaN there does not reach C): C = beta C. */
static void test_alpha_zero(cublasHandle_t h)
{
    for (const combo &cb : k_combos) {
        std::vector<double> a(4, NAN), c = {1, -2, 3, 4};
        std::vector<char> ha = pack(cb.ab, a), hc = pack(cb.c, c);
        void *da = dalloc(ha.size()), *dc = dalloc(hc.size());
        memcpy(da, ha.data(), ha.size()), memcpy(dc, hc.data(), hc.size());
        double al = 0, be = 0.5;
        float fal = 0, fbe = 0.5;
        uint16_t hal = 0, hbe = 0x3800; /* 0.5 */
        bool dbl = cb.ct == CUBLAS_COMPUTE_64F, half = cb.ct == CUBLAS_COMPUTE_16F;
        const void *pa = dbl ? (const void *)&al : half ? (const void *)&hal : &fal,
                   *pb = dbl ? (const void *)&be : half ? (const void *)&hbe : &fbe;
        EXPECT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, pa, da, cb.ab, 2, da, cb.ab, 2, pb, dc, cb.c, 2,
                            cb.ct, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
               "%s alpha 0", cb.name);
        bool ok = true;
        for (int i = 0; i < 4; i++) ok = ok && unpack1(cb.c, (const char *)dc, i) == 0.5 * c[i];
        EXPECT(ok, "%s alpha 0: C = beta C without A's NaN: %g %g", cb.name, unpack1(cb.c, (const char *)dc, 0),
               unpack1(cb.c, (const char *)dc, 1));
        dfree(da), dfree(dc);
    }
}

/* ---- argument checks ------------------------------------------------------------------------ */

static void test_args(cublasHandle_t h)
{
    float A[64], one = 1, zero = 0;
    void *da = dalloc(16 * 4), *db = dalloc(16 * 4), *dc = dalloc(16 * 4);
    memset(dc, 0, 64);
    auto ex = [&](cublasHandle_t hh, cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc,
                  cudaDataType_t t = CUDA_R_32F, cudaDataType_t tc = CUDA_R_32F,
                  cublasComputeType_t ct = CUBLAS_COMPUTE_32F, const void *a = nullptr,
                  cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT) {
        return cublasGemmEx(hh, ta, CUBLAS_OP_N, m, n, k, &one, a ? a : da, t, lda, db, t, ldb, &zero, dc, tc, ldc, ct,
                            algo);
    };
    g_enqueued = 0;
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_SUCCESS, "valid call");
    EXPECT(g_enqueued == 1, "valid call enqueued %d", g_enqueued);
    g_enqueued = 0, emu::g_full = true; /* no room for the workspace: nothing runs */
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_ALLOC_FAILED && g_enqueued == 0, "device full");
    EXPECT(g_note.find("workspace") != std::string::npos, "note names the workspace: %s", g_note.c_str());
    emu::g_full = false;
    EXPECT(ex(h, CUBLAS_OP_N, -1, 4, 4, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "m < 0");
    EXPECT(g_note.find("m=-1") != std::string::npos, "note names m: %s", g_note.c_str());
    EXPECT(ex(h, CUBLAS_OP_N, 4, -1, 4, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "n < 0");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, -1, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "k < 0");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 3, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "lda < m (N)");
    EXPECT(g_note.find("lda 3") != std::string::npos, "note names lda: %s", g_note.c_str());
    EXPECT(ex(h, CUBLAS_OP_T, 4, 4, 2, 2, 2, 4) == CUBLAS_STATUS_SUCCESS, "lda = k (T) fine");
    g_enqueued = 0;
    EXPECT(ex(h, CUBLAS_OP_T, 2, 4, 4, 3, 4, 2) == CUBLAS_STATUS_INVALID_VALUE, "lda < k (T)");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 3, 4) == CUBLAS_STATUS_INVALID_VALUE, "ldb < k");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 3) == CUBLAS_STATUS_INVALID_VALUE, "ldc < m");
    EXPECT(ex(h, CUBLAS_OP_N, 0, 0, 0, 0, 1, 1) == CUBLAS_STATUS_INVALID_VALUE, "lda 0 < max(1, m)");
    EXPECT(ex(h, (cublasOperation_t)7, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "bad transa");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, nullptr,
              (cublasGemmAlgo_t)12345) == CUBLAS_STATUS_NOT_SUPPORTED,
           "bad algo");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_64F) ==
               CUBLAS_STATUS_NOT_SUPPORTED,
           "f32 with 64F compute");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_16BF, CUDA_R_16F) == CUBLAS_STATUS_NOT_SUPPORTED, "bf16 -> f16");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_32F) ==
               CUBLAS_STATUS_NOT_SUPPORTED,
           "f64 with 32F compute");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32I) ==
               CUBLAS_STATUS_NOT_SUPPORTED,
           "32I compute");
    EXPECT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, da, CUDA_R_32F, 4, db, CUDA_R_16F, 4, &zero, dc,
                        CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED,
           "Atype != Btype");
    EXPECT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, nullptr, da, CUDA_R_32F, 4, db, CUDA_R_32F, 4, &zero, dc,
                        CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE,
           "alpha NULL");
    EXPECT(ex(nullptr, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_NOT_INITIALIZED, "NULL handle");
    EXPECT(g_enqueued == 0, "failed calls enqueued %d", g_enqueued);
    /* device ranges: A one element short, A on the host, C too long */
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 5, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "A range (lda 5 needs 19 floats)");
    EXPECT(g_note.find("cublasGemmEx A") != std::string::npos, "note names A: %s", g_note.c_str());
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A) ==
               CUBLAS_STATUS_INVALID_VALUE,
           "A on the host");
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 4, 4, 4, 5) == CUBLAS_STATUS_INVALID_VALUE, "C range (ldc 5)");
    EXPECT(g_note.find("cublasGemmEx C") != std::string::npos, "note names C: %s", g_note.c_str());
    EXPECT(ex(h, CUBLAS_OP_N, 4, 4, 0, 4, 4, 4, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A) == CUBLAS_STATUS_SUCCESS,
           "k = 0: A is not read, so not checked");
    EXPECT(ex(h, CUBLAS_OP_N, 0, 4, 4, 1, 4, 1, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A) == CUBLAS_STATUS_SUCCESS,
           "m = 0: nothing touched");
    /* strided batched: batchCount < 0; the last matrix beyond the allocation */
    auto sb = [&](int batch, long long sa, long long sc) {
        return cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, da, CUDA_R_32F, 2, sa, db,
                                          CUDA_R_32F, 2, 4, &zero, dc, CUDA_R_32F, 2, sc, batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT);
    };
    g_enqueued = 0;
    EXPECT(sb(-1, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "batchCount < 0");
    EXPECT(sb(5, 4, 4) == CUBLAS_STATUS_INVALID_VALUE, "batch 5 x 4 floats > 16");
    EXPECT(g_note.find("cublasGemmStridedBatchedEx A") != std::string::npos, "note: %s", g_note.c_str());
    EXPECT(sb(4, 4, 5) == CUBLAS_STATUS_INVALID_VALUE, "C stride 5: 19 floats > 16");
    EXPECT(g_enqueued == 0, "failed batched calls enqueued %d", g_enqueued);
    EXPECT(sb(4, 4, 4) == CUBLAS_STATUS_SUCCESS, "batch 4 fits");
    EXPECT(sb(0, 4, 4) == CUBLAS_STATUS_SUCCESS && g_enqueued == 1, "batch 0: success, no work");
    g_note.clear();
    EXPECT(sb(2, 4, 0) == CUBLAS_STATUS_SUCCESS, "overlapping C batch still runs");
    EXPECT(g_note.find("overlap") != std::string::npos, "overlapping C noted: %s", g_note.c_str());
    /* handles */
    cublasHandle_t h2;
    EXPECT(cublasCreate(&h2) == CUBLAS_STATUS_SUCCESS, "create");
    EXPECT(cublasSetMathMode(h2, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ==
               CUBLAS_STATUS_SUCCESS,
           "math mode with DISALLOW_REDUCED_PRECISION_REDUCTION");
    EXPECT(cublasSetMathMode(h2, (cublasMath_t)5) == CUBLAS_STATUS_INVALID_VALUE, "bad math mode");
    /* a capture that forbids allocating forbids cublasCreate; one that forbids waiting for
     * the device forbids cublasDestroy, which leaves the handle alive */
    cublasHandle_t h3 = (cublasHandle_t)&g_note;
    emu::g_forbid_alloc = true;
    EXPECT(cublasCreate(&h3) == CUBLAS_STATUS_NOT_INITIALIZED && h3 == nullptr, "create refused in a capture");
    emu::g_forbid_alloc = false, emu::g_forbid_wait = true;
    EXPECT(cublasDestroy(h2) == CUBLAS_STATUS_INTERNAL_ERROR, "destroy refused in a capture");
    EXPECT(cublasSetStream(h2, nullptr) == CUBLAS_STATUS_SUCCESS, "the handle survives a refused destroy");
    emu::g_forbid_wait = false;
    EXPECT(cublasDestroy(h2) == CUBLAS_STATUS_SUCCESS, "destroy");
    EXPECT(cublasSetStream(h2, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED, "destroyed handle refused");
    EXPECT(ex(h2, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_NOT_INITIALIZED, "gemm on a destroyed handle");
    EXPECT(cublasDestroy(h2) == CUBLAS_STATUS_NOT_INITIALIZED, "double destroy");
    EXPECT(cublasSetStream(nullptr, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED, "NULL handle set stream");
    EXPECT(strcmp(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE") == 0,
           "status string");
    dfree(da), dfree(db), dfree(dc);
}

/* A captured GEMM runs at replay, on the handle's stream, with the alpha of the call. */
static void test_capture(cublasHandle_t h)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {9, 9, 9, 9};
    void *da = dalloc(16), *db = dalloc(16), *dc = dalloc(16);
    memcpy(da, a, 16), memcpy(db, b, 16), memcpy(dc, c, 16);
    cudaStream_t s = (cudaStream_t)0x1234;
    EXPECT(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS, "set stream");
    float alpha = 2, beta = 0;
    g_capture = true;
    EXPECT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, da, CUDA_R_32F, 2, db, CUDA_R_32F, 2, &beta, dc,
                        CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
           "captured gemm");
    g_capture = false;
    EXPECT(g_last_stream == s, "enqueued on the handle's stream");
    alpha = 5;
    EXPECT(((float *)dc)[0] == 9, "nothing ran during capture");
    replay();
    const float *r = (const float *)dc;
    EXPECT(r[0] == 2 && r[1] == 4 && r[2] == 6 && r[3] == 8, "replay used alpha 2: %g %g %g %g", r[0], r[1], r[2], r[3]);
    cublasSetStream(h, nullptr);
    dfree(da), dfree(db), dfree(dc);
}

/* ---- cub ------------------------------------------------------------------------------------ */

static void test_scan()
{
    for (int64_t n : {0, 1, 7, 1000, 5000}) {
        int64_t *d = (int64_t *)dalloc(sizeof(int64_t) * (size_t)n);
        std::vector<int64_t> in((size_t)n);
        for (auto &x : in) x = rint_(2);
        if (n) memcpy(d, in.data(), sizeof(int64_t) * (size_t)n);
        size_t bytes = 0;
        EXPECT(cub::DeviceScan::ExclusiveSum(nullptr, bytes, d, d, n, (cudaStream_t)0) == cudaSuccess && bytes > 0,
               "sizing: %zu", bytes);
        void *t = dalloc(bytes);
        EXPECT(cub::DeviceScan::ExclusiveSum(t, bytes, d, d, n) == cudaSuccess, "in-place scan n=%lld", (long long)n);
        int64_t acc = 0, bad = 0;
        for (int64_t i = 0; i < n; i++) bad += d[i] != acc, acc += in[(size_t)i];
        EXPECT(bad == 0, "exclusive sum n=%lld: %lld wrong", (long long)n, (long long)bad);
        dfree(t), dfree(d);
    }
    /* separate in / out, int32 (accumulates as int), the in-place overload */
    int32_t *in = (int32_t *)dalloc(40), *out = (int32_t *)dalloc(40);
    for (int i = 0; i < 10; i++) in[i] = i + 1;
    size_t bytes = 0;
    cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, 10);
    void *t = dalloc(bytes);
    EXPECT(cub::DeviceScan::ExclusiveSum(t, bytes, in, out, 10) == cudaSuccess, "out of place");
    EXPECT(out[0] == 0 && out[9] == 45 && in[9] == 10, "out[9] = %d", out[9]);
    EXPECT(cub::DeviceScan::ExclusiveSum(t, bytes, in, 10) == cudaSuccess && in[0] == 0 && in[9] == 45,
           "in-place overload: in[9] = %d", in[9]);
    /* protocol errors */
    size_t small = bytes - 1;
    EXPECT(cub::DeviceScan::ExclusiveSum(t, small, in, out, 10) == cudaErrorInvalidValue, "temp smaller than asked");
    char host_tmp[4096];
    size_t hb = bytes;
    EXPECT(cub::DeviceScan::ExclusiveSum(host_tmp, hb, in, out, 10) == cudaErrorInvalidValue, "temp on the host");
    int32_t host_out[10];
    g_enqueued = 0;
    EXPECT(cub::DeviceScan::ExclusiveSum(t, bytes, in, host_out, 10) == cudaErrorInvalidValue, "d_out on the host");
    EXPECT(cub::DeviceScan::ExclusiveSum(t, bytes, in, out, 11) == cudaErrorInvalidValue, "n beyond the buffers");
    EXPECT(g_enqueued == 0, "failed scans enqueued %d", g_enqueued);
    dfree(t), dfree(in), dfree(out);
}

/* The radix order, written as a value order: NaNs with the sign set first (larger
 * magnitude bits first), then numbers by value (-0 == +0), then sign-clear NaNs by bits. */
template <class K> static bool ref_less(K a, K b)
{
    if constexpr (std::is_floating_point_v<K>) {
        auto cls = [](K v) { return v != v ? (signbit(v) ? 0 : 2) : 1; };
        int ca = cls(a), cb = cls(b);
        if (ca != cb) return ca < cb;
        if (ca == 1) return a < b;
        uint64_t ua = 0, ub = 0;
        memcpy(&ua, &a, sizeof a), memcpy(&ub, &b, sizeof b);
        return ca == 0 ? ua > ub : ua < ub;
    } else {
        return a < b;
    }
}

template <class K> static K rnd_key()
{
    if constexpr (std::is_floating_point_v<K>) {
        switch (rint_(12)) {
        case 0: return (K)NAN;
        case 1: return -(K)NAN;
        case 2: return (K)INFINITY;
        case 3: return -(K)INFINITY;
        case 4: return (K)0.0;
        case 5: return -(K)0.0;
        default: return (K)(rint_(40) - 20) * (K)0.25;
        }
    } else {
        return (K)rnd();
    }
}

template <class K> static void check_sort(const char *name)
{
    const int64_t n = 3000;
    /* contiguous segments (sort.cu's ob / ob + 1 form), one empty */
    std::vector<int64_t> offs = {0, 1000, 1000, 1, 2500, 3000};
    std::sort(offs.begin(), offs.end());
    /* separate begin / end arrays: gaps, a reversed (empty) segment */
    std::vector<int64_t> beg = {0, 1200, 2000, 2990}, end = {1000, 1700, 1900, 3000};
    /* form 2: cub::DeviceRadixSort, all n items as one segment (sort_pairs.h's one row) */
    for (int form = 0; form < 3; form++) {
        int64_t nseg = form == 0 ? (int64_t)offs.size() - 1 : form == 1 ? (int64_t)beg.size() : 1;
        K *kin = (K *)dalloc(sizeof(K) * n), *kout = (K *)dalloc(sizeof(K) * n);
        int64_t *vin = (int64_t *)dalloc(8 * n), *vout = (int64_t *)dalloc(8 * n);
        int64_t *ob = (int64_t *)dalloc(8 * offs.size()), *db = (int64_t *)dalloc(8 * 4), *de = (int64_t *)dalloc(8 * 4);
        memcpy(ob, offs.data(), 8 * offs.size()), memcpy(db, beg.data(), 32), memcpy(de, end.data(), 32);
        /* few distinct integer keys so that stability matters */
        for (int64_t i = 0; i < n; i++) {
            K k = rnd_key<K>();
            if constexpr (!std::is_floating_point_v<K>) k = (K)(k % 7);
            kin[i] = k, vin[i] = i;
        }
        memset(kout, 0x5a, sizeof(K) * n), memset(vout, 0x5a, 8 * n);
        std::vector<char> kout0((char *)kout, (char *)kout + sizeof(K) * n);
        size_t bytes = 0;
        auto run = [&](void *t) {
            return form == 0 ? cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vout, n, nseg, ob,
                                                                         ob + 1, (cudaStream_t)0)
                   : form == 1 ? cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vout, n, nseg, db, de)
                               : cub::DeviceRadixSort::SortPairs(t, bytes, kin, kout, vin, vout, n);
        };
        cudaError_t e = run(nullptr);
        EXPECT(e == cudaSuccess && bytes > 0, "%s sizing", name);
        void *t = dalloc(bytes);
        e = run(t);
        EXPECT(e == cudaSuccess, "%s sort", name);
        std::vector<bool> in_seg(n, false);
        int bad = 0;
        for (int64_t s = 0; s < nseg; s++) {
            int64_t b = form == 0 ? offs[s] : form == 1 ? beg[s] : 0, en = form == 0 ? offs[s + 1] : form == 1 ? end[s] : n;
            if (en <= b) continue;
            std::vector<int64_t> want;
            for (int64_t i = b; i < en; i++) want.push_back(i), in_seg[i] = true;
            std::stable_sort(want.begin(), want.end(), [&](int64_t x, int64_t y) { return ref_less(kin[x], kin[y]); });
            for (int64_t i = b; i < en; i++) {
                int64_t p = want[(size_t)(i - b)];
                if ((vout[i] != p || memcmp(&kout[i], &kin[p], sizeof(K)) != 0) && bad++ < 3)
                    EXPECT(false, "%s form %d seg %lld at %lld: value %lld want %lld", name, form, (long long)s,
                           (long long)i, (long long)vout[i], (long long)p);
            }
        }
        EXPECT(bad == 0, "%s form %d: %d misplaced", name, form, bad);
        int touched = 0;
        for (int64_t i = 0; i < n; i++)
            if (!in_seg[i] && (memcmp(&kout[i], &kout0[i * sizeof(K)], sizeof(K)) != 0 || vout[i] != 0x5a5a5a5a5a5a5a5a))
                touched++;
        EXPECT(touched == 0, "%s form %d: %d items outside the segments written", name, form, touched);
        if (form == 0) {
            /* outputs must not overlap inputs; a too-small temp is refused */
            EXPECT(cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kin, vin, vout, n, nseg, ob, ob + 1) ==
                       cudaErrorInvalidValue,
                   "%s keys in place refused", name);
            EXPECT(cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vin + 1, n - 1, nseg, ob,
                                                             ob + 1) == cudaErrorInvalidValue,
                   "%s values overlapping refused", name);
            size_t small = bytes - 1;
            EXPECT(cub::DeviceSegmentedSort::StableSortPairs(t, small, kin, kout, vin, vout, n, nseg, ob, ob + 1) ==
                       cudaErrorInvalidValue,
                   "%s small temp refused", name);
            EXPECT(cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vout, n + 1, nseg, ob, ob + 1) ==
                       cudaErrorInvalidValue,
                   "%s num_items beyond the buffers refused", name);
        }
        if (form == 2) {
            EXPECT(cub::DeviceRadixSort::SortPairs(t, bytes, kin, kin, vin, vout, n) == cudaErrorInvalidValue,
                   "%s radix keys in place refused", name);
            size_t small = bytes - 1;
            EXPECT(cub::DeviceRadixSort::SortPairs(t, small, kin, kout, vin, vout, n) == cudaErrorInvalidValue,
                   "%s radix small temp refused", name);
            EXPECT(cub::DeviceRadixSort::SortPairs(t, bytes, kin, kout, vin, vout, n, 0, (int)sizeof(K) * 8 + 1) ==
                       cudaErrorInvalidValue,
                   "%s radix end_bit past the key refused", name);
        }
        dfree(t), dfree(kin), dfree(kout), dfree(vin), dfree(vout), dfree(ob), dfree(db), dfree(de);
    }
}

static void test_sort()
{
    check_sort<float>("float");
    check_sort<double>("double");
    check_sort<uint8_t>("u8");
    check_sort<int8_t>("i8");
    check_sort<int16_t>("i16");
    check_sort<int32_t>("i32");
    check_sort<int64_t>("i64");
    /* -0.0 and +0.0 are equivalent (input order kept, bits kept); NaN places */
    float keys[8] = {0.0f, -0.0f, NAN, -NAN, -INFINITY, 0.0f, -0.0f, INFINITY};
    float *kin = (float *)dalloc(32), *kout = (float *)dalloc(32);
    int64_t *vin = (int64_t *)dalloc(64), *vout = (int64_t *)dalloc(64), *off = (int64_t *)dalloc(16);
    memcpy(kin, keys, 32);
    for (int i = 0; i < 8; i++) vin[i] = i;
    off[0] = 0, off[1] = 8;
    size_t bytes = 0;
    cub::DeviceSegmentedSort::StableSortPairs(nullptr, bytes, kin, kout, vin, vout, 8, 1, off, off + 1);
    void *t = dalloc(bytes);
    EXPECT(cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vout, 8, 1, off, off + 1) == cudaSuccess,
           "zeros sort");
    int64_t want[8] = {3, 4, 0, 1, 5, 6, 7, 2};
    bool ok = true;
    for (int i = 0; i < 8; i++) ok = ok && vout[i] == want[i];
    EXPECT(ok, "order %lld %lld %lld %lld %lld %lld %lld %lld", (long long)vout[0], (long long)vout[1],
           (long long)vout[2], (long long)vout[3], (long long)vout[4], (long long)vout[5], (long long)vout[6],
           (long long)vout[7]);
    EXPECT(signbit(kout[3]) && !signbit(kout[2]), "zero bits kept");
    /* a segment beyond num_items: noted, skipped (a GPU would run out of bounds) */
    off[1] = 9;
    g_note.clear();
    EXPECT(cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vout, 8, 1, off, off + 1) == cudaSuccess,
           "call itself succeeds");
    EXPECT(g_note.find("outside") != std::string::npos, "bad segment noted: %s", g_note.c_str());
    dfree(t), dfree(kin), dfree(kout), dfree(vin), dfree(vout), dfree(off);
    /* the radix sort on bits [0, 2) only: 5 2 7 1 have digits 1 2 3 1, so 5 1 2 7 (stable) */
    int32_t *ki = (int32_t *)dalloc(16), *ko = (int32_t *)dalloc(16);
    int64_t *vi = (int64_t *)dalloc(32), *vo = (int64_t *)dalloc(32);
    const int32_t k4[4] = {5, 2, 7, 1};
    memcpy(ki, k4, 16);
    for (int i = 0; i < 4; i++) vi[i] = i;
    bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, ki, ko, vi, vo, 4, 0, 2);
    t = dalloc(bytes);
    EXPECT(cub::DeviceRadixSort::SortPairs(t, bytes, ki, ko, vi, vo, 4, 0, 2) == cudaSuccess, "radix bit range");
    EXPECT(vo[0] == 0 && vo[1] == 3 && vo[2] == 1 && vo[3] == 2 && ko[1] == 1,
           "radix bits [0, 2): %lld %lld %lld %lld", (long long)vo[0], (long long)vo[1], (long long)vo[2],
           (long long)vo[3]);
    dfree(t), dfree(ki), dfree(ko), dfree(vi), dfree(vo);
}

int main()
{
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    EXPECT(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS, "math mode");
    test_gemm_values(h);
    test_rounding(h);
    test_alpha_zero(h);
    test_args(h);
    test_capture(h);
    cublasDestroy(h);
    test_scan();
    test_sort();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
