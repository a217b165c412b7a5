/* test_emu_cudnn.cc -- unit test of the emulator's fake cuDNN (emu_cudnn*.cc), alone:
 * this file defines its own emu::enqueue (runs at once, or records while `capturing`,
 * run by replay()), emu::device_range (a registry of dmalloc'ed blocks) and emu::note.
 * Results are compared with naive references written here independently (direct loops),
 * and the backward ops with adjoint identities (<conv(x, w), dy> = <x, dgrad(w, dy)> =
 * <w, wgrad(x, dy)>) and finite differences, through strided descriptors, groups,
 * dilation, both convolution modes, NHWC filters, alpha / beta and f64 / f32 / f16.
 * Build and run (from the repository root):
 *   g++ -std=c++17 -O1 -I/usr/local/cuda/include -Itests/emu -Wno-deprecated-declarations \
 *       tests/emu/test_emu_cudnn.cc tests/emu/test_emu_cudnn_rnn.cc tests/emu/emu_cudnn.cc \
 *       tests/emu/emu_cudnn_ops.cc tests/emu/emu_cudnn_rnn.cc -o /tmp/test_emu_cudnn && /tmp/test_emu_cudnn
 * Prints "N passed, N failed"; exits non-zero on a failure.
 */
#include "test_emu_cudnn.h"

/* ---- stubs of the emulator's runtime ---------------------------------------------------------- */

static std::map<const char *, size_t> g_blocks; /* live "device" blocks */
static bool capturing;
static std::vector<std::function<void()>> recorded;
static int notes;
static bool quiet = true;

namespace emu {
void enqueue(cudaStream_t, const char *, std::function<void()> work)
{
    if (capturing) recorded.push_back(work);
    else work();
}
bool device_range(const void *p, size_t n, const char *what)
{
    const char *c = (const char *)p;
    for (auto &b : g_blocks)
        if (c >= b.first && c + n <= b.first + b.second) return true;
    if (!quiet) fprintf(stderr, "emu: %s: %p + %zu is not device memory\n", what, p, n);
    notes++;
    return false;
}
/* what the emulator's runtime answers while a capture forbids the call (set by the test) */
static bool forbid_alloc, forbid_wait;
bool capture_forbids(const char *) { return forbid_alloc; }
bool device_wait_forbidden(const char *) { return forbid_wait; }
void count_call(const char *) {}
void note(const char *fmt, ...)
{
    notes++;
    if (quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}
} // namespace emu

void *dmalloc(size_t n)
{
    char *p = (char *)calloc(n ? n : 1, 1);
    g_blocks[p] = n;
    return p;
}
void dfree(void *p)
{
    g_blocks.erase((const char *)p);
    free(p);
}
static void replay()
{
    for (auto &w : recorded) w();
    recorded.clear();
}

int passed, failed;
static unsigned rng = 12345;
double rnd()
{
    rng = rng * 1103515245u + 12345u;
    return ((rng >> 8) & 0xffff) / 32768.0 - 1.0;
}

/* ---- convolution ---------------------------------------------------------------------------- */

struct conv_case {
    int N, C, H, W, K, R, S, G, ph, pw, sh, sw, dh, dw;
    cudnnConvolutionMode_t mode;
    cudnnTensorFormat_t ffmt;
};

/* The filter as a (K, Cg, R, S) logical array of values in its format. */
static double fval(const void *w, cudnnDataType_t t, const conv_case &c, int k, int ci, int r, int s)
{
    int Cg = c.C / c.G;
    int64_t o = c.ffmt == CUDNN_TENSOR_NCHW ? (((int64_t)k * Cg + ci) * c.R + r) * c.S + s
                                            : (((int64_t)k * c.R + r) * c.S + s) * Cg + ci;
    return emu_dnn::load(t, w, o);
}

static void test_conv(const conv_case &c, cudnnDataType_t t, double tol)
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    int Cg = c.C / c.G, P = (c.H + 2 * c.ph - ((c.R - 1) * c.dh + 1)) / c.sh + 1,
        Q = (c.W + 2 * c.pw - ((c.S - 1) * c.dw + 1)) / c.sw + 1;
    T x(t, {c.N, c.C, c.H, c.W}, 3), y(t, {c.N, c.K, P, Q}, 2), dy(t, {c.N, c.K, P, Q}, 1), dx(t, {c.N, c.C, c.H, c.W});
    size_t wn = (size_t)c.K * Cg * c.R * c.S, es = emu_dnn::elsize(t);
    void *w = dmalloc(wn * es), *dw = dmalloc(wn * es);
    for (size_t i = 0; i < wn; i++) emu_dnn::store(t, w, (int64_t)i, rnd());
    x.fill(), y.fill(), dy.fill(), dx.fill();
    cudnnFilterDescriptor_t fd;
    cudnnConvolutionDescriptor_t cd;
    OK(cudnnCreateFilterDescriptor(&fd));
    OK(cudnnSetFilter4dDescriptor(fd, t, c.ffmt, c.K, Cg, c.R, c.S));
    OK(cudnnCreateConvolutionDescriptor(&cd));
    cudnnDataType_t ct = t == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    OK(cudnnSetConvolution2dDescriptor(cd, c.ph, c.pw, c.sh, c.sw, c.dh, c.dw, c.mode, ct));
    OK(cudnnSetConvolutionGroupCount(cd, c.G));
    int on, oc, oh, ow;
    OK(cudnnGetConvolution2dForwardOutputDim(cd, x.d, fd, &on, &oc, &oh, &ow));
    CHECK(on == c.N && oc == c.K && oh == P && ow == Q, "output dim (%d,%d,%d,%d) want (%d,%d,%d,%d)", on, oc, oh,
          ow, c.N, c.K, P, Q);

    /* reference forward, blended: y = 0.5 conv + 2 y0 */
    std::vector<double> y0 = y.vals(), ref(y0.size());
    int Kg = c.K / c.G;
    for (int n = 0; n < c.N; n++)
        for (int k = 0; k < c.K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double s = 0;
                    for (int ci = 0; ci < Cg; ci++)
                        for (int r = 0; r < c.R; r++)
                            for (int u = 0; u < c.S; u++) {
                                int ih = p * c.sh - c.ph + r * c.dh, iw = q * c.sw - c.pw + u * c.dw;
                                if (ih < 0 || iw < 0 || ih >= c.H || iw >= c.W) continue;
                                int fr = c.mode == CUDNN_CONVOLUTION ? c.R - 1 - r : r;
                                int fu = c.mode == CUDNN_CONVOLUTION ? c.S - 1 - u : u;
                                s += x.at4(n, (k / Kg) * Cg + ci, ih, iw) * fval(w, t, c, k, ci, fr, fu);
                            }
                    size_t i = (((size_t)n * c.K + k) * P + p) * Q + q;
                    ref[i] = 0.5 * s + 2 * y0[i];
                }
    float fa = 0.5f, fb = 2, f1 = 1, f0 = 0;
    double da = 0.5, db = 2, d1 = 1, d0 = 0;
    bool dbl = t == CUDNN_DATA_DOUBLE;
    const void *pa = dbl ? (void *)&da : (void *)&fa, *pb = dbl ? (void *)&db : (void *)&fb;
    const void *one = dbl ? (void *)&d1 : (void *)&f1, *zero = dbl ? (void *)&d0 : (void *)&f0;

    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int got = 0;
    OK(cudnnGetConvolutionForwardAlgorithm_v7(h, x.d, fd, cd, y.d, 8, &got, perf));
    CHECK(got >= 2 && perf[0].status == CUDNN_STATUS_SUCCESS, "v7 gave %d algos", got);
    /* the listing's math types (emu_cudnn.cc, listed_math): the descriptor's default math */
    cudnnMathType_t m0 = t == CUDNN_DATA_DOUBLE  ? CUDNN_DEFAULT_MATH
                         : t == CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                 : CUDNN_TENSOR_OP_MATH;
    CHECK(perf[0].mathType == m0 && perf[1].mathType == (t == CUDNN_DATA_DOUBLE ? m0 : CUDNN_TENSOR_OP_MATH),
          "%s listed with math %d, %d", emu_dnn::type_name(t), (int)perf[0].mathType, (int)perf[1].mathType);
    OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    OK(cudnnGetConvolutionForwardAlgorithm_v7(h, x.d, fd, cd, y.d, 8, &got, perf));
    CHECK(perf[0].mathType == CUDNN_FMA_MATH && perf[1].mathType == CUDNN_FMA_MATH, "FMA descriptor listing");
    OK(cudnnSetConvolutionMathType(cd, CUDNN_DEFAULT_MATH));
    size_t wsb = 0;
    OK(cudnnGetConvolutionForwardWorkspaceSize(h, x.d, fd, cd, y.d, perf[0].algo, &wsb));
    CHECK(wsb == perf[0].memory, "workspace %zu vs perf memory %zu", wsb, perf[0].memory);
    void *ws = dmalloc(wsb + 64);
    OK(cudnnConvolutionForward(h, pa, x.d, x.p, fd, w, cd, perf[0].algo, ws, wsb, pb, y.d, y.p));
    CHECK(maxdiff(y.vals(), ref) < tol, "%s conv forward differs by %g", emu_dnn::type_name(t),
          maxdiff(y.vals(), ref));
    /* every algorithm computes the same (beta = 0: y is not read) */
    for (int a = 1; a < got; a++) {
        size_t need = 0;
        OK(cudnnGetConvolutionForwardWorkspaceSize(h, x.d, fd, cd, y.d, perf[a].algo, &need));
        void *ws2 = need ? dmalloc(need) : NULL;
        for (int64_t i = 0; i < y.n(); i++) y.set(i, NAN);
        OK(cudnnConvolutionForward(h, one, x.d, x.p, fd, w, cd, perf[a].algo, ws2, need, zero, y.d, y.p));
        std::vector<double> r2 = ref;
        for (size_t i = 0; i < r2.size(); i++) r2[i] = (ref[i] - 2 * y0[i]) * 2;
        CHECK(maxdiff(y.vals(), r2) < tol, "algo %d differs by %g", (int)perf[a].algo, maxdiff(y.vals(), r2));
        if (ws2) dfree(ws2);
    }

    /* adjoint identities: <conv(x,w), dy> = <x, dgrad(w,dy)> = <w, wgrad(x,dy)> */
    if (t != CUDNN_DATA_HALF) {
        OK(cudnnConvolutionForward(h, one, x.d, x.p, fd, w, cd, perf[0].algo, ws, wsb, zero, y.d, y.p));
        double lhs = dot(y.vals(), dy.vals());
        cudnnConvolutionBwdDataAlgoPerf_t bp[8];
        OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, fd, dy.d, cd, dx.d, 8, &got, bp));
        size_t need = 0;
        OK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, fd, dy.d, cd, dx.d, bp[0].algo, &need));
        void *ws2 = dmalloc(need + 1);
        OK(cudnnConvolutionBackwardData(h, one, fd, w, dy.d, dy.p, cd, bp[0].algo, ws2, need, zero, dx.d, dx.p));
        double r1 = dot(x.vals(), dx.vals());
        CHECK(fabs(lhs - r1) < tol * (1 + fabs(lhs)) * 10, "dgrad adjoint %g vs %g", lhs, r1);
        /* beta = 1 adds */
        std::vector<double> dx1 = dx.vals();
        OK(cudnnConvolutionBackwardData(h, one, fd, w, dy.d, dy.p, cd, bp[0].algo, ws2, need, one, dx.d, dx.p));
        std::vector<double> dx2 = dx.vals();
        for (auto &v : dx1) v *= 2;
        CHECK(maxdiff(dx2, dx1) < tol, "dgrad beta=1");
        dfree(ws2);
        cudnnConvolutionBwdFilterAlgoPerf_t fp[8];
        OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x.d, dy.d, cd, fd, 8, &got, fp));
        for (int a = 0; a < got; a++) {
            OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x.d, dy.d, cd, fd, fp[a].algo, &need));
            ws2 = dmalloc(need + 1);
            OK(cudnnConvolutionBackwardFilter(h, one, x.d, x.p, dy.d, dy.p, cd, fp[a].algo, ws2, need, zero, fd, dw));
            double r2 = 0;
            for (size_t i = 0; i < wn; i++) r2 += emu_dnn::load(t, w, (int64_t)i) * emu_dnn::load(t, dw, (int64_t)i);
            CHECK(fabs(lhs - r2) < tol * (1 + fabs(lhs)) * 10, "wgrad algo %d adjoint %g vs %g", (int)fp[a].algo, lhs,
                  r2);
            dfree(ws2);
        }
        /* Find*Ex with no workspace: the algorithms needing one are reported failed, last */
        cudnnConvolutionFwdAlgoPerf_t pf[8];
        OK(cudnnFindConvolutionForwardAlgorithmEx(h, x.d, x.p, fd, w, cd, y.d, y.p, 8, &got, pf, NULL, 0));
        bool order = got == 3;
        for (int a = 1; a < got; a++)
            if (pf[a - 1].status != CUDNN_STATUS_SUCCESS && pf[a].status == CUDNN_STATUS_SUCCESS) order = false;
        CHECK(order && pf[0].status == CUDNN_STATUS_SUCCESS && pf[0].memory == 0 && pf[0].time > 0,
              "find ex: %d results, first status %d memory %zu", got, (int)pf[0].status, pf[0].memory);
        CHECK(fabs(dot(y.vals(), dy.vals()) - lhs) < tol * (1 + fabs(lhs)) * 10, "find ex wrote y");
    }

    /* argument checks */
    quiet = true;
    int before = notes;
    CHECK(cudnnConvolutionForward(h, one, x.d, x.p, fd, w, cd, perf[0].algo, ws, wsb, zero, dx.d, dx.p) ==
              CUDNN_STATUS_BAD_PARAM, "mismatched y accepted");
    if (wsb > 0)
        CHECK(cudnnConvolutionForward(h, one, x.d, x.p, fd, w, cd, perf[0].algo, ws, wsb - 1, zero, y.d, y.p) ==
                  CUDNN_STATUS_BAD_PARAM, "short workspace accepted");
    char host[64];
    if (wsb > 0)
        CHECK(cudnnConvolutionForward(h, one, x.d, x.p, fd, w, cd, perf[0].algo, host, wsb, zero, y.d, y.p) ==
                  CUDNN_STATUS_BAD_PARAM, "host workspace accepted");
    CHECK(cudnnConvolutionForward(h, one, x.d, (char *)x.p + x.bytes - es, fd, w, cd, perf[0].algo, ws, wsb, zero, y.d, y.p) ==
              CUDNN_STATUS_BAD_PARAM, "x past its allocation accepted");
    CHECK(cudnnConvolutionForward(h, one, x.d, x.p, fd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_FFT, ws, wsb, zero, y.d,
                                  y.p) == CUDNN_STATUS_NOT_SUPPORTED, "unoffered algorithm accepted");
    CHECK(notes > before, "no notes for failed calls");
    dfree(ws), dfree(w), dfree(dw);
    cudnnDestroyFilterDescriptor(fd);
    cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroy(h);
}

static void test_conv_all()
{
    conv_case cs[] = {
        {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
        {2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 2, 3, 2, 1, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
        {1, 6, 8, 8, 6, 2, 3, 3, 0, 2, 1, 2, 1, 2, CUDNN_CONVOLUTION, CUDNN_TENSOR_NHWC},
        {3, 2, 5, 5, 2, 5, 5, 2, 0, 0, 1, 1, 1, 1, CUDNN_CONVOLUTION, CUDNN_TENSOR_NCHW},
    };
    for (auto &c : cs) {
        test_conv(c, CUDNN_DATA_DOUBLE, 1e-12);
        test_conv(c, CUDNN_DATA_FLOAT, 1e-5);
    }
    test_conv(cs[1], CUDNN_DATA_HALF, 2e-2);
    test_conv(cs[0], CUDNN_DATA_BFLOAT16, 5e-2);
}

/* ---- half / bfloat16 bits --------------------------------------------------------------------- */

static void test_bits()
{
    using namespace emu_dnn;
    struct { float f; uint16_t h; } hs[] = {{1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {1e6f, 0x7c00},
                                            {0.333333343f, 0x3555}, {5.9604645e-08f, 0x0001}, {0, 0},
                                            {6.1035156e-05f, 0x0400}, {1.00048828125f, 0x3c00} /* tie: even */,
                                            {1.00146484375f, 0x3c02} /* tie: to even up */};
    for (auto &e : hs) CHECK(float_to_half(e.f) == e.h, "half(%g) = %04x want %04x", e.f, float_to_half(e.f), e.h);
    for (int b = 0; b < 0x7c00; b += 37) CHECK(float_to_half(half_to_float((uint16_t)b)) == b, "half round trip %x", b);
    CHECK(float_to_bf16(1.0f) == 0x3f80 && bf16_to_float(0x4049) == 3.140625f, "bf16");
}

/* ---- batch norm -------------------------------------------------------------------------------- */

static void test_bn(cudnnBatchNormMode_t mode)
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    const int N = 3, C = 2, H = 3, W = 2;
    bool sp = mode == CUDNN_BATCHNORM_SPATIAL;
    T x(CUDNN_DATA_DOUBLE, {N, C, H, W}, 1), y(CUDNN_DATA_DOUBLE, {N, C, H, W}, 2);
    T bn(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W});
    T sc(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W}), bi(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W});
    T rm(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W}), rv(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W});
    T sm(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W}), si(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W});
    x.fill(), sc.fill(), bi.fill(), rm.fill();
    for (int64_t i = 0; i < rv.n(); i++) rv.set(i, 1 + 0.5 * rnd());
    std::vector<double> rm0 = rm.vals(), rv0 = rv.vals();
    double one = 1, zero = 0, eps = 1e-3, fac = 0.25;
    OK(cudnnBatchNormalizationForwardTraining(h, mode, &one, &zero, x.d, x.p, y.d, y.p, bn.d, sc.p, bi.p, fac, rm.p,
                                              rv.p, eps, sm.p, si.p));
    int F = (int)bn.n(), M = (int)(x.n() / F);
    std::vector<double> mean(F, 0), var(F, 0);
    auto feat = [&](int64_t i) { int64_t w = i % W, hh = i / W % H, c = i / (W * H) % C; return sp ? c : (c * H + hh) * W + w; };
    for (int64_t i = 0; i < x.n(); i++) mean[feat(i)] += x.get(i) / M;
    for (int64_t i = 0; i < x.n(); i++) var[feat(i)] += pow(x.get(i) - mean[feat(i)], 2) / M;
    double e = 0;
    for (int64_t i = 0; i < x.n(); i++) {
        int f = (int)feat(i);
        e = std::max(e, fabs(y.get(i) - (sc.get(f) * (x.get(i) - mean[f]) / sqrt(var[f] + eps) + bi.get(f))));
    }
    CHECK(e < 1e-12, "bn training y differs by %g", e);
    e = 0;
    for (int f = 0; f < F; f++) {
        e = std::max(e, fabs(sm.get(f) - mean[f]) + fabs(si.get(f) - 1 / sqrt(var[f] + eps)));
        e = std::max(e, fabs(rm.get(f) - (0.75 * rm0[f] + 0.25 * mean[f])));
        e = std::max(e, fabs(rv.get(f) - (0.75 * rv0[f] + 0.25 * var[f] * M / (M - 1)))); /* unbiased */
    }
    CHECK(e < 1e-12, "bn saved / running statistics differ by %g", e);

    /* inference with the running statistics, alpha 2 beta 1 */
    std::vector<double> y0 = y.vals();
    double two = 2;
    OK(cudnnBatchNormalizationForwardInference(h, mode, &two, &one, x.d, x.p, y.d, y.p, bn.d, sc.p, bi.p, rm.p, rv.p,
                                               eps));
    e = 0;
    for (int64_t i = 0; i < x.n(); i++) {
        int f = (int)feat(i);
        double r = sc.get(f) * (x.get(i) - rm.get(f)) / sqrt(rv.get(f) + eps) + bi.get(f);
        e = std::max(e, fabs(y.get(i) - (2 * r + y0[(size_t)i])));
    }
    CHECK(e < 1e-12, "bn inference differs by %g", e);

    /* backward vs finite differences of L = sum(r * y(x, scale, bias)) */
    T r(CUDNN_DATA_DOUBLE, {N, C, H, W}), dx(CUDNN_DATA_DOUBLE, {N, C, H, W}, 1);
    T ds(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W}), db(CUDNN_DATA_DOUBLE, {1, C, sp ? 1 : H, sp ? 1 : W});
    r.fill();
    OK(cudnnBatchNormalizationBackward(h, mode, &one, &zero, &one, &zero, x.d, x.p, r.d, r.p, dx.d, dx.p, bn.d, sc.p,
                                       ds.p, db.p, eps, sm.p, si.p));
    std::vector<double> gx = dx.vals(), gs = ds.vals(), gb = db.vals();
    /* the same without the saved statistics (recomputed), beta 1 for the parameter grads */
    OK(cudnnBatchNormalizationBackward(h, mode, &one, &zero, &one, &one, x.d, x.p, r.d, r.p, dx.d, dx.p, bn.d, sc.p,
                                       ds.p, db.p, eps, NULL, NULL));
    CHECK(maxdiff(dx.vals(), gx) < 1e-12, "bn backward without saved statistics");
    std::vector<double> gs2 = gs;
    for (auto &v : gs2) v *= 2;
    CHECK(maxdiff(ds.vals(), gs2) < 1e-12, "bn backward betaParamDiff");
    auto loss = [&]() {
        OK(cudnnBatchNormalizationForwardTraining(h, mode, &one, &zero, x.d, x.p, y.d, y.p, bn.d, sc.p, bi.p, 0, NULL,
                                                  NULL, eps, NULL, NULL));
        return dot(y.vals(), r.vals());
    };
    double hh = 1e-6;
    e = 0;
    for (int64_t i = 0; i < x.n(); i += 5) {
        double v = x.get(i);
        x.set(i, v + hh);
        double lp = loss();
        x.set(i, v - hh);
        double lm = loss();
        x.set(i, v);
        e = std::max(e, fabs((lp - lm) / (2 * hh) - gx[(size_t)i]));
    }
    for (int f = 0; f < F; f++) {
        double v = sc.get(f);
        sc.set(f, v + hh);
        double lp = loss();
        sc.set(f, v - hh);
        double lm = loss();
        sc.set(f, v);
        e = std::max(e, fabs((lp - lm) / (2 * hh) - gs[f]));
        v = bi.get(f);
        bi.set(f, v + hh);
        lp = loss();
        bi.set(f, v - hh);
        lm = loss();
        bi.set(f, v);
        e = std::max(e, fabs((lp - lm) / (2 * hh) - gb[f]));
    }
    CHECK(e < 1e-6, "bn backward vs finite differences: %g", e);

    /* checks: a float scale tensor with double data, a wrong per-channel shape */
    T bad(CUDNN_DATA_FLOAT, {1, C, 1, 1}), bad2(CUDNN_DATA_DOUBLE, {1, C + 1, 1, 1});
    CHECK(cudnnBatchNormalizationForwardInference(h, mode, &one, &zero, x.d, x.p, y.d, y.p, bad.d, sc.p, bi.p, rm.p,
                                                  rv.p, eps) == CUDNN_STATUS_BAD_PARAM, "float bn tensor accepted");
    CHECK(cudnnBatchNormalizationForwardInference(h, mode, &one, &zero, x.d, x.p, y.d, y.p, bad2.d, sc.p, bi.p, rm.p,
                                                  rv.p, eps) == CUDNN_STATUS_BAD_PARAM, "bad bn shape accepted");
    cudnnDestroy(h);
}

/* ---- softmax --------------------------------------------------------------------------------- */

static void test_softmax(cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode, cudnnDataType_t t, double tol)
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    const int N = 2, C = 5, H = 3, W = 2;
    T x(t, {N, C, H, W}, 2), y(t, {N, C, H, W}, 1), dy(t, {N, C, H, W}), dx(t, {N, C, H, W}, 3);
    x.fill(), dy.fill();
    for (int64_t i = 0; i < x.n(); i++) x.set(i, 3 * x.get(i));
    float f1 = 1, f0 = 0;
    double d1 = 1, d0 = 0;
    const void *one = t == CUDNN_DATA_DOUBLE ? (void *)&d1 : (void *)&f1;
    const void *zero = t == CUDNN_DATA_DOUBLE ? (void *)&d0 : (void *)&f0;
    OK(cudnnSoftmaxForward(h, algo, mode, one, x.d, x.p, zero, y.d, y.p));
    std::vector<double> ref((size_t)x.n());
    bool inst = mode == CUDNN_SOFTMAX_MODE_INSTANCE;
    for (int n = 0; n < N; n++)
        for (int s = 0; s < (inst ? 1 : H * W); s++) {
            std::vector<int64_t> idx;
            for (int c = 0; c < C; c++)
                for (int q = 0; q < (inst ? H * W : 1); q++) idx.push_back(((int64_t)n * C + c) * H * W + (inst ? q : s));
            double sum = 0;
            for (auto i : idx) sum += exp(x.get(i));
            for (auto i : idx) ref[(size_t)i] = algo == CUDNN_SOFTMAX_LOG ? x.get(i) - log(sum) : exp(x.get(i)) / sum;
        }
    CHECK(maxdiff(y.vals(), ref) < tol, "softmax algo %d mode %d %s differs by %g", (int)algo, (int)mode,
          emu_dnn::type_name(t), maxdiff(y.vals(), ref));
    OK(cudnnSoftmaxBackward(h, algo, mode, one, y.d, y.p, dy.d, dy.p, zero, dx.d, dx.p));
    if (t == CUDNN_DATA_DOUBLE) { /* finite differences of sum(dy * y(x)) */
        double e = 0, hh = 1e-6;
        std::vector<double> g = dx.vals();
        for (int64_t i = 0; i < x.n(); i += 3) {
            double v = x.get(i);
            x.set(i, v + hh);
            OK(cudnnSoftmaxForward(h, algo, mode, one, x.d, x.p, zero, y.d, y.p));
            double lp = dot(y.vals(), dy.vals());
            x.set(i, v - hh);
            OK(cudnnSoftmaxForward(h, algo, mode, one, x.d, x.p, zero, y.d, y.p));
            double lm = dot(y.vals(), dy.vals());
            x.set(i, v);
            e = std::max(e, fabs((lp - lm) / (2 * hh) - g[(size_t)i]));
        }
        CHECK(e < 1e-6, "softmax backward algo %d mode %d vs finite differences: %g", (int)algo, (int)mode, e);
    }
    T other(t, {N, C + 1, H, W});
    CHECK(cudnnSoftmaxForward(h, algo, mode, one, x.d, x.p, zero, other.d, other.p) == CUDNN_STATUS_BAD_PARAM,
          "softmax with mismatched y accepted");
    cudnnDestroy(h);
}

/* ---- pooling --------------------------------------------------------------------------------- */

static void test_pool(cudnnPoolingMode_t mode, int k, int pad, int s)
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    const int N = 2, C = 2, H = 7, W = 6;
    int P = (H + 2 * pad - k) / s + 1, Q = (W + 2 * pad - k) / s + 1;
    T x(CUDNN_DATA_DOUBLE, {N, C, H, W}, 1), y(CUDNN_DATA_DOUBLE, {N, C, P, Q}, 2);
    T dy(CUDNN_DATA_DOUBLE, {N, C, P, Q}), dx(CUDNN_DATA_DOUBLE, {N, C, H, W}, 1);
    x.fill(), dy.fill();
    cudnnPoolingDescriptor_t pd;
    OK(cudnnCreatePoolingDescriptor(&pd));
    OK(cudnnSetPooling2dDescriptor(pd, mode, CUDNN_PROPAGATE_NAN, k, k, pad, pad, s, s));
    double one = 1, zero = 0;
    OK(cudnnPoolingForward(h, pd, &one, x.d, x.p, &zero, y.d, y.p));
    std::vector<double> ref((size_t)y.n());
    bool mx = mode == CUDNN_POOLING_MAX || mode == CUDNN_POOLING_MAX_DETERMINISTIC;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double acc = mx ? -1e300 : 0;
                    int cnt = 0;
                    for (int i = p * s - pad; i < p * s - pad + k; i++)
                        for (int j = q * s - pad; j < q * s - pad + k; j++) {
                            if (i < 0 || j < 0 || i >= H || j >= W) continue;
                            double v = x.at4(n, c, i, j);
                            acc = mx ? std::max(acc, v) : acc + v, cnt++;
                        }
                    double div = mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? k * k : cnt;
                    ref[(((size_t)n * C + c) * P + p) * Q + q] = mx ? acc : acc / div;
                }
    CHECK(maxdiff(y.vals(), ref) < 1e-12, "pooling mode %d differs by %g", (int)mode, maxdiff(y.vals(), ref));
    OK(cudnnPoolingBackward(h, pd, &one, y.d, y.p, dy.d, dy.p, x.d, x.p, &zero, dx.d, dx.p));
    double e = 0, hh = 1e-7; /* piecewise linear: finite differences are exact away from ties */
    std::vector<double> g = dx.vals();
    for (int64_t i = 0; i < x.n(); i++) {
        double v = x.get(i);
        x.set(i, v + hh);
        OK(cudnnPoolingForward(h, pd, &one, x.d, x.p, &zero, y.d, y.p));
        double lp = dot(y.vals(), dy.vals());
        x.set(i, v - hh);
        OK(cudnnPoolingForward(h, pd, &one, x.d, x.p, &zero, y.d, y.p));
        double lm = dot(y.vals(), dy.vals());
        x.set(i, v);
        e = std::max(e, fabs((lp - lm) / (2 * hh) - g[(size_t)i]));
    }
    CHECK(e < 1e-6, "pooling backward mode %d vs finite differences: %g", (int)mode, e);
    T bad(CUDNN_DATA_DOUBLE, {N, C, P + 1, Q});
    CHECK(cudnnPoolingForward(h, pd, &one, x.d, x.p, &zero, bad.d, bad.p) == CUDNN_STATUS_BAD_PARAM,
          "pooling into a wrong shape accepted");
    cudnnDestroyPoolingDescriptor(pd);
    cudnnDestroy(h);
}

/* ---- capture: the work runs at replay, after the descriptors are gone -------------------------- */

static void test_capture()
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    T *x = new T(CUDNN_DATA_FLOAT, {1, 3, 1, 1}), *y = new T(CUDNN_DATA_FLOAT, {1, 3, 1, 1});
    x->set(0, 1), x->set(1, 2), x->set(2, 3);
    void *yp = dmalloc(12);
    float one = 1, zero = 0;
    capturing = true;
    OK(cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, x->d, x->p, &zero, y->d, yp));
    capturing = false;
    float *out = (float *)yp;
    CHECK(out[0] == 0 && out[1] == 0, "captured work ran before replay");
    cudnnDestroyTensorDescriptor(y->d);
    y->d = NULL;
    replay();
    double s = exp(1.0) + exp(2.0) + exp(3.0);
    CHECK(fabs(out[2] - exp(3.0) / s) < 1e-6, "replayed softmax %g", out[2]);
    delete x;
    delete y;
    dfree(yp);
    /* a capture that forbids allocating forbids cudnnCreate; one that forbids waiting for
     * the device forbids cudnnDestroy, which leaves the handle alive */
    cudnnHandle_t h2 = (cudnnHandle_t)&notes;
    emu::forbid_alloc = true;
    CHECK(cudnnCreate(&h2) == CUDNN_STATUS_INTERNAL_ERROR && h2 == NULL, "create refused in a capture");
    emu::forbid_alloc = false, emu::forbid_wait = true;
    CHECK(cudnnDestroy(h) == CUDNN_STATUS_INTERNAL_ERROR, "destroy refused in a capture");
    OK(cudnnSetStream(h, NULL)); /* still alive */
    emu::forbid_wait = false;
    OK(cudnnDestroy(h));
}

/* NHWC tensors (cudnnSetTensor4dDescriptor's format) give the NCHW results. */
static void test_nhwc()
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    const int N = 2, C = 3, H = 5, W = 4, K = 2;
    T x(CUDNN_DATA_FLOAT, {N, C, H, W}), y(CUDNN_DATA_FLOAT, {N, K, H, W});
    x.fill();
    cudnnTensorDescriptor_t xn, yn;
    OK(cudnnCreateTensorDescriptor(&xn));
    OK(cudnnCreateTensorDescriptor(&yn));
    OK(cudnnSetTensor4dDescriptor(xn, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, C, H, W));
    OK(cudnnSetTensor4dDescriptor(yn, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, K, H, W));
    float *xp = (float *)dmalloc(4 * (size_t)x.n()), *yp = (float *)dmalloc(4 * (size_t)y.n());
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) xp[((n * H + i) * W + j) * C + c] = (float)x.at4(n, c, i, j);
    void *w = dmalloc(4 * K * C * 9);
    for (int i = 0; i < K * C * 9; i++) ((float *)w)[i] = (float)rnd();
    cudnnFilterDescriptor_t fd;
    cudnnConvolutionDescriptor_t cd;
    OK(cudnnCreateFilterDescriptor(&fd));
    OK(cudnnSetFilter4dDescriptor(fd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, 3, 3));
    OK(cudnnCreateConvolutionDescriptor(&cd));
    OK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    float one = 1, zero = 0;
    OK(cudnnConvolutionForward(h, &one, x.d, x.p, fd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero,
                               y.d, y.p));
    OK(cudnnConvolutionForward(h, &one, xn, xp, fd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero,
                               yn, yp));
    double e = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) e = std::max(e, fabs(yp[((n * H + i) * W + j) * K + k] - y.at4(n, k, i, j)));
    CHECK(e < 1e-6, "NHWC convolution differs by %g", e);
    /* softmax over C of NHWC data */
    OK(cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, xn, xp, &zero, xn, xp));
    double sum = 0;
    for (int c = 0; c < C; c++) sum += xp[((1 * H + 2) * W + 3) * C + c];
    CHECK(fabs(sum - 1) < 1e-6, "NHWC channel softmax sums to %g", sum);
    dfree(xp), dfree(yp), dfree(w);
    cudnnDestroyTensorDescriptor(xn), cudnnDestroyTensorDescriptor(yn);
    cudnnDestroyFilterDescriptor(fd), cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroy(h);
}

/* Batch norm of 5-D half data (float per-channel tensors), against double arithmetic. */
static void test_bn_half()
{
    cudnnHandle_t h;
    OK(cudnnCreate(&h));
    const int N = 2, C = 3, D = 2, H = 3, W = 2;
    T x(CUDNN_DATA_HALF, {N, C, D, H, W}), y(CUDNN_DATA_HALF, {N, C, D, H, W});
    T sc(CUDNN_DATA_FLOAT, {1, C, 1, 1, 1}), bi(CUDNN_DATA_FLOAT, {1, C, 1, 1, 1});
    T sm(CUDNN_DATA_FLOAT, {1, C, 1, 1, 1}), si(CUDNN_DATA_FLOAT, {1, C, 1, 1, 1});
    x.fill(), sc.fill(), bi.fill();
    float one = 1, zero = 0;
    OK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x.d, x.p, y.d, y.p, sc.d, sc.p,
                                              bi.p, 0, NULL, NULL, 1e-5, sm.p, si.p));
    double e = 0;
    int M = N * D * H * W;
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < x.n(); i++)
            if (i / (D * H * W) % C == c) m += x.get(i) / M;
        for (int64_t i = 0; i < x.n(); i++)
            if (i / (D * H * W) % C == c) v += (x.get(i) - m) * (x.get(i) - m) / M;
        for (int64_t i = 0; i < x.n(); i++)
            if (i / (D * H * W) % C == c)
                e = std::max(e, fabs(y.get(i) - (sc.get(c) * (x.get(i) - m) / sqrt(v + 1e-5) + bi.get(c))));
        e = std::max(e, fabs(sm.get(c) - m) * 100);
    }
    CHECK(e < 1e-2, "half 5-D batch norm differs by %g", e);
    T bad(CUDNN_DATA_HALF, {1, C, 1, 1, 1});
    CHECK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x.d, x.p, y.d, y.p, bad.d,
                                                 sc.p, bi.p, 0, NULL, NULL, 1e-5, NULL, NULL) == CUDNN_STATUS_BAD_PARAM,
          "half per-channel tensors accepted");
    cudnnDestroy(h);
}

/* The real cuDNN's opinion on the descriptors the calls above set (emu_cudnn_real.cc): with
 * the library at hand, the valid ones took, none it refuses; the counts of the calls only
 * the emulator refused (its argument checks above, where cuDNN may be laxer) are printed. */
extern "C" size_t tc_cuda_emu_real_cudnn(long long *checked, long long *gpu_differs, long long *emu_stricter);
static void test_real_second_opinion()
{
    long long checked = 0, differs = 0, stricter = 0;
    size_t version = tc_cuda_emu_real_cudnn(&checked, &differs, &stricter);
    if (!version) {
        printf("real cuDNN: none loaded (no second opinion on descriptors)\n");
        return;
    }
    CHECK(checked > 100, "descriptor calls put to the real cuDNN");
    CHECK(differs == 0, "descriptors the real cuDNN refuses, or sizes it gives otherwise");
    printf("real cuDNN %zu: %lld descriptor calls checked, %lld it refused that the emulator took, %lld the emulator "
           "refused that it took\n", version, checked, differs, stricter);
}

int main()
{
    test_bits();
    test_conv_all();
    test_bn(CUDNN_BATCHNORM_SPATIAL);
    test_bn(CUDNN_BATCHNORM_PER_ACTIVATION);
    for (auto a : {CUDNN_SOFTMAX_FAST, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_LOG})
        for (auto m : {CUDNN_SOFTMAX_MODE_INSTANCE, CUDNN_SOFTMAX_MODE_CHANNEL}) {
            test_softmax(a, m, CUDNN_DATA_DOUBLE, 1e-12);
            test_softmax(a, m, CUDNN_DATA_FLOAT, 1e-6);
        }
    test_softmax(CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_CHANNEL, CUDNN_DATA_HALF, 4e-3);
    test_pool(CUDNN_POOLING_MAX, 3, 1, 2);
    test_pool(CUDNN_POOLING_MAX_DETERMINISTIC, 2, 0, 2);
    test_pool(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, 3, 1, 2);
    test_pool(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, 3, 1, 2);
    test_pool(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, 2, 1, 1);
    test_nhwc();
    test_bn_half();
    test_capture();
    test_rnn_all();
    test_real_second_opinion();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

