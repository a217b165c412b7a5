/* test_emu_cudnn_rnn.cc -- the RNN part of the fake cuDNN's unit test (test_emu_cudnn.cc
 * has the stubs, the build line and main): LSTM, GRU and the plain cells, one to three
 * layers, one or two directions, every bias mode and data layout with uneven lengths.
 * cudnnRNNForward against a reference written here that reads the weights through
 * cudnnGetRNNWeightParams (so the weight-space layout is checked too), then
 * cudnnRNNBackwardData_v8 / BackwardWeights_v8 against finite differences of
 * <y, wy> + <hy, wh> + <cy, wc>, and the documented refusals.
 */
#include "test_emu_cudnn.h"
/* ---- RNN ---------------------------------------------------------------------------------- */

/* A configured RNN with its buffers; every sequence layout as asked. */
struct rnn_case {
    cudnnRNNMode_t cell;
    cudnnRNNBiasMode_t bias;
    int L, D, I, H, T, N;
    cudnnRNNDataLayout_t layout;
    std::vector<int> lens;
};

struct rnn_setup {
    rnn_case k;
    cudnnHandle_t h;
    cudnnRNNDescriptor_t r;
    cudnnDropoutDescriptor_t drop;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd;
    size_t wb, wsb, rsb;
    void *w, *ws, *rs, *x, *y, *hx, *cx, *hy, *cy, *lens;
    size_t xn, yn, sn;
    int G;
};

static int64_t pos(const rnn_case &k, int t, int n, int V)
{
    if (t >= k.lens[(size_t)n]) return -1;
    if (k.layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED) return ((int64_t)t * k.N + n) * V;
    if (k.layout == CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED) return ((int64_t)n * k.T + t) * V;
    int64_t b = 0;
    for (int u = 0; u < t; u++)
        for (int m = 0; m < k.N; m++) b += k.lens[(size_t)m] > u;
    return (b + n) * V;
}

static void rnn_make(rnn_setup &s, const rnn_case &k)
{
    s.k = k;
    s.G = k.cell == CUDNN_LSTM ? 4 : k.cell == CUDNN_GRU ? 3 : 1;
    OK(cudnnCreate(&s.h));
    OK(cudnnCreateDropoutDescriptor(&s.drop));
    OK(cudnnSetDropoutDescriptor(s.drop, s.h, 0.0f, NULL, 0, 0));
    OK(cudnnCreateRNNDescriptor(&s.r));
    OK(cudnnSetRNNDescriptor_v8(s.r, CUDNN_RNN_ALGO_STANDARD, k.cell, k.bias,
                                k.D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH, k.I, k.H, k.H, k.L, s.drop,
                                CUDNN_RNN_PADDED_IO_ENABLED));
    OK(cudnnCreateRNNDataDescriptor(&s.xd));
    OK(cudnnCreateRNNDataDescriptor(&s.yd));
    double fill = -7;
    OK(cudnnSetRNNDataDescriptor(s.xd, CUDNN_DATA_DOUBLE, k.layout, k.T, k.N, k.I, k.lens.data(), NULL));
    OK(cudnnSetRNNDataDescriptor(s.yd, CUDNN_DATA_DOUBLE, k.layout, k.T, k.N, k.D * k.H, k.lens.data(), &fill));
    int dims[3] = {k.L * k.D, k.N, k.H}, st[3] = {k.N * k.H, k.H, 1};
    OK(cudnnCreateTensorDescriptor(&s.hd));
    OK(cudnnSetTensorNdDescriptor(s.hd, CUDNN_DATA_DOUBLE, 3, dims, st));
    OK(cudnnGetRNNWeightSpaceSize(s.h, s.r, &s.wb));
    OK(cudnnGetRNNTempSpaceSizes(s.h, s.r, CUDNN_FWD_MODE_TRAINING, s.xd, &s.wsb, &s.rsb));
    s.xn = (size_t)k.T * k.N * k.I, s.yn = (size_t)k.T * k.N * k.D * k.H, s.sn = (size_t)k.L * k.D * k.N * k.H;
    s.w = dmalloc(s.wb), s.ws = dmalloc(s.wsb), s.rs = dmalloc(s.rsb);
    s.x = dmalloc(s.xn * 8), s.y = dmalloc(s.yn * 8), s.hx = dmalloc(s.sn * 8), s.cx = dmalloc(s.sn * 8);
    s.hy = dmalloc(s.sn * 8), s.cy = dmalloc(s.sn * 8), s.lens = dmalloc(4 * (size_t)k.N);
    memcpy(s.lens, k.lens.data(), 4 * (size_t)k.N);
    for (size_t i = 0; i < s.wb / 8; i++) ((double *)s.w)[i] = 0.6 * rnd();
    for (size_t i = 0; i < s.xn; i++) ((double *)s.x)[i] = rnd();
    for (size_t i = 0; i < s.sn; i++) ((double *)s.hx)[i] = 0.5 * rnd(), ((double *)s.cx)[i] = 0.5 * rnd();
}

static void rnn_free(rnn_setup &s)
{
    for (void *p : {s.w, s.ws, s.rs, s.x, s.y, s.hx, s.cx, s.hy, s.cy, s.lens}) dfree(p);
    cudnnDestroyRNNDataDescriptor(s.xd), cudnnDestroyRNNDataDescriptor(s.yd);
    cudnnDestroyTensorDescriptor(s.hd);
    cudnnDestroyRNNDescriptor(s.r), cudnnDestroyDropoutDescriptor(s.drop);
    cudnnDestroy(s.h);
}

static cudnnStatus_t rnn_fwd(rnn_setup &s, bool training)
{
    return cudnnRNNForward(s.h, s.r, training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                           (const int32_t *)s.lens, s.xd, s.x, s.yd, s.y, s.hd, s.hx, s.hy, s.hd, s.cx, s.cy, s.wb, s.w,
                           s.wsb, s.ws, s.rsb, s.rs);
}

/* Reference forward through the weights cudnnGetRNNWeightParams points at. */
static void rnn_reference(rnn_setup &s, std::vector<double> &y, std::vector<double> &hy, std::vector<double> &cy)
{
    const rnn_case &k = s.k;
    int H = k.H, G = s.G;
    cudnnTensorDescriptor_t md, bd;
    cudnnCreateTensorDescriptor(&md), cudnnCreateTensorDescriptor(&bd);
    std::vector<double> in((size_t)k.T * k.N * k.I, 0.0);
    for (int t = 0; t < k.T; t++)
        for (int n = 0; n < k.N; n++)
            if (pos(k, t, n, k.I) >= 0)
                for (int i = 0; i < k.I; i++) in[((size_t)t * k.N + n) * k.I + i] = ((double *)s.x)[pos(k, t, n, k.I) + i];
    hy.assign(s.sn, 0), cy.assign(s.sn, 0);
    for (int l = 0; l < k.L; l++) {
        int Iin = l == 0 ? k.I : k.D * H;
        std::vector<double> out((size_t)k.T * k.N * k.D * H, 0.0);
        for (int d = 0; d < k.D; d++) {
            int pl = l * k.D + d;
            double *Wm[8], *Bm[8];
            for (int id = 0; id < 2 * G; id++) {
                void *m, *b;
                OK(cudnnGetRNNWeightParams(s.h, s.r, pl, s.wb, s.w, id, md, &m, bd, &b));
                Wm[id] = (double *)m, Bm[id] = (double *)b;
                CHECK(md->nd == 3 && md->dim[1] == H && md->dim[2] == (id < G ? Iin : H), "matrix descriptor");
                bool has = k.bias == CUDNN_RNN_DOUBLE_BIAS || (id < G ? k.bias == CUDNN_RNN_SINGLE_INP_BIAS
                                                                      : k.bias == CUDNN_RNN_SINGLE_REC_BIAS);
                CHECK((b != NULL) == has, "bias %d presence", id);
            }
            for (int n = 0; n < k.N; n++) {
                std::vector<double> h(H), c(H);
                for (int j = 0; j < H; j++)
                    h[j] = ((double *)s.hx)[((size_t)pl * k.N + n) * H + j], c[j] = ((double *)s.cx)[((size_t)pl * k.N + n) * H + j];
                int len = k.lens[(size_t)n];
                for (int q = 0; q < len; q++) {
                    int t = d ? len - 1 - q : q;
                    const double *xv = &in[((size_t)t * k.N + n) * Iin];
                    auto lin = [&](int id, const double *v, int cols, int j) {
                        double a = Bm[id] ? Bm[id][j] : 0;
                        for (int i = 0; i < cols; i++) a += Wm[id][j * cols + i] * v[i];
                        return a;
                    };
                    std::vector<double> hn(H);
                    for (int j = 0; j < H; j++) {
                        if (k.cell == CUDNN_LSTM) {
                            double ig = 1 / (1 + exp(-(lin(0, xv, Iin, j) + lin(4, h.data(), H, j))));
                            double fg = 1 / (1 + exp(-(lin(1, xv, Iin, j) + lin(5, h.data(), H, j))));
                            double gg = tanh(lin(2, xv, Iin, j) + lin(6, h.data(), H, j));
                            double og = 1 / (1 + exp(-(lin(3, xv, Iin, j) + lin(7, h.data(), H, j))));
                            c[j] = fg * c[j] + ig * gg;
                            hn[j] = og * tanh(c[j]);
                        } else if (k.cell == CUDNN_GRU) {
                            double r = 1 / (1 + exp(-(lin(0, xv, Iin, j) + lin(3, h.data(), H, j))));
                            double z = 1 / (1 + exp(-(lin(1, xv, Iin, j) + lin(4, h.data(), H, j))));
                            double nn = tanh(lin(2, xv, Iin, j) + r * lin(5, h.data(), H, j));
                            hn[j] = (1 - z) * nn + z * h[j];
                        } else {
                            double a = lin(0, xv, Iin, j) + lin(1, h.data(), H, j);
                            hn[j] = k.cell == CUDNN_RNN_RELU ? std::max(a, 0.0) : tanh(a);
                        }
                    }
                    h = hn;
                    for (int j = 0; j < H; j++) out[((size_t)t * k.N + n) * k.D * H + d * H + j] = h[j];
                }
                for (int j = 0; j < H; j++) hy[((size_t)pl * k.N + n) * H + j] = h[j], cy[((size_t)pl * k.N + n) * H + j] = c[j];
            }
        }
        in = out;
    }
    y.assign(s.yn, -7);
    for (int t = 0; t < k.T; t++)
        for (int n = 0; n < k.N; n++) {
            int64_t p = pos(k, t, n, k.D * H);
            if (p >= 0)
                for (int i = 0; i < k.D * H; i++) y[(size_t)p + i] = in[((size_t)t * k.N + n) * k.D * H + i];
        }
    cudnnDestroyTensorDescriptor(md), cudnnDestroyTensorDescriptor(bd);
}

static void test_rnn(const rnn_case &k)
{
    rnn_setup s;
    rnn_make(s, k);
    bool lstm = k.cell == CUDNN_LSTM;
    const char *name = k.cell == CUDNN_LSTM ? "LSTM" : k.cell == CUDNN_GRU ? "GRU" : k.cell == CUDNN_RNN_RELU ? "relu" : "tanh";
    size_t yvalid = 0;
    for (int l : k.lens) yvalid += (size_t)l;
    size_t ycount = k.layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED ? yvalid * k.D * k.H : s.yn;
    for (size_t i = 0; i < s.yn; i++) ((double *)s.y)[i] = -7; /* packed: the tail past the data stays */
    OK(rnn_fwd(s, false));
    std::vector<double> ry, rhy, rcy;
    rnn_reference(s, ry, rhy, rcy);
    std::vector<double> gy((double *)s.y, (double *)s.y + ycount), ghy((double *)s.hy, (double *)s.hy + s.sn);
    ry.resize(ycount);
    CHECK(maxdiff(gy, ry) < 1e-12, "%s L%d D%d forward y differs by %g", name, k.L, k.D, maxdiff(gy, ry));
    CHECK(maxdiff(ghy, rhy) < 1e-12, "%s hy differs by %g", name, maxdiff(ghy, rhy));
    if (lstm) {
        std::vector<double> gcy((double *)s.cy, (double *)s.cy + s.sn);
        CHECK(maxdiff(gcy, rcy) < 1e-12, "LSTM cy differs by %g", maxdiff(gcy, rcy));
    }
    /* L = <y, ry> + <hy, rh> + <cy, rc>; the backward calls against finite differences */
    std::vector<double> wy(s.yn), wh(s.sn), wc(s.sn);
    for (auto *v : {&wy, &wh, &wc})
        for (auto &e : *v) e = rnd();
    auto loss = [&]() {
        OK(rnn_fwd(s, false));
        double L = 0;
        for (size_t i = 0; i < ycount; i++) L += wy[i] * ((double *)s.y)[i];
        for (size_t i = 0; i < s.sn; i++) L += wh[i] * ((double *)s.hy)[i] + (lstm ? wc[i] * ((double *)s.cy)[i] : 0);
        return L;
    };
    void *dy = dmalloc(s.yn * 8), *dx = dmalloc(s.xn * 8), *dhy = dmalloc(s.sn * 8), *dcy = dmalloc(s.sn * 8);
    void *dhx = dmalloc(s.sn * 8), *dcx = dmalloc(s.sn * 8), *dw = dmalloc(s.wb);
    memcpy(dy, wy.data(), s.yn * 8), memcpy(dhy, wh.data(), s.sn * 8), memcpy(dcy, wc.data(), s.sn * 8);
    OK(rnn_fwd(s, true));
    OK(cudnnRNNBackwardData_v8(s.h, s.r, (const int32_t *)s.lens, s.yd, s.y, dy, s.xd, dx, s.hd, s.hx, dhy, dhx, s.hd,
                               s.cx, dcy, dcx, s.wb, s.w, s.wsb, s.ws, s.rsb, s.rs));
    for (size_t i = 0; i < s.wb / 8; i++) ((double *)dw)[i] = 1.0; /* ADD mode adds onto this */
    OK(cudnnRNNBackwardWeights_v8(s.h, s.r, CUDNN_WGRAD_MODE_ADD, (const int32_t *)s.lens, s.xd, s.x, s.hd, s.hx, s.yd,
                                  s.y, s.wb, dw, s.wsb, s.ws, s.rsb, s.rs));
    double e = 0, hh = 1e-6;
    auto fd = [&](double *p, double grad) {
        double v = *p;
        *p = v + hh;
        double lp = loss();
        *p = v - hh;
        double lm = loss();
        *p = v;
        e = std::max(e, fabs((lp - lm) / (2 * hh) - grad) / (1 + fabs(grad)));
    };
    for (int t = 0; t < k.T; t++)
        for (int n = 0; n < k.N; n++) {
            int64_t p = pos(k, t, n, k.I);
            if (p >= 0) fd((double *)s.x + p + (t + n) % k.I, ((double *)dx)[p + (t + n) % k.I]);
        }
    double ex = e;
    e = 0;
    for (size_t i = 0; i < s.sn; i += 3) {
        fd((double *)s.hx + i, ((double *)dhx)[i]);
        if (lstm) fd((double *)s.cx + i, ((double *)dcx)[i]);
    }
    double eh = e;
    e = 0;
    for (size_t i = 0; i < s.wb / 8; i += s.wb / 8 < 400 ? 1 : 7) fd((double *)s.w + i, ((double *)dw)[i] - 1.0);
    CHECK(ex < 1e-6 && eh < 1e-6 && e < 1e-6, "%s L%d D%d bias %d layout %d: finite differences dx %g dhx/dcx %g dw %g",
          name, k.L, k.D, (int)k.bias, (int)k.layout, ex, eh, e);

    /* checks: WGRAD_MODE_SET, a short workspace, padded layouts without padded IO */
    CHECK(cudnnRNNBackwardWeights_v8(s.h, s.r, CUDNN_WGRAD_MODE_SET, (const int32_t *)s.lens, s.xd, s.x, s.hd, s.hx,
                                     s.yd, s.y, s.wb, dw, s.wsb, s.ws, s.rsb, s.rs) == CUDNN_STATUS_NOT_SUPPORTED,
          "WGRAD_MODE_SET accepted");
    CHECK(cudnnRNNForward(s.h, s.r, CUDNN_FWD_MODE_TRAINING, (const int32_t *)s.lens, s.xd, s.x, s.yd, s.y, s.hd, s.hx,
                          s.hy, s.hd, s.cx, s.cy, s.wb, s.w, s.wsb, s.ws, s.rsb - 8, s.rs) == CUDNN_STATUS_BAD_PARAM,
          "short reserve accepted");
    if (k.layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED) {
        OK(cudnnSetRNNDescriptor_v8(s.r, CUDNN_RNN_ALGO_STANDARD, k.cell, k.bias,
                                    k.D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                    CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH, k.I, k.H, k.H, k.L, s.drop,
                                    CUDNN_RNN_PADDED_IO_DISABLED));
        CHECK(rnn_fwd(s, false) == CUDNN_STATUS_BAD_PARAM, "unpacked layout without padded IO accepted");
    }
    for (void *p : {dy, dx, dhy, dcy, dhx, dcx, dw}) dfree(p);
    rnn_free(s);
}

void test_rnn_all()
{
    auto SM = CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, BM = CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
         PK = CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED;
    test_rnn({CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, 1, 1, 3, 4, 5, 2, SM, {5, 5}});
    test_rnn({CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS, 1, 1, 3, 4, 5, 2, SM, {5, 5}});
    test_rnn({CUDNN_RNN_TANH, CUDNN_RNN_DOUBLE_BIAS, 1, 1, 3, 4, 4, 3, SM, {4, 4, 4}});
    test_rnn({CUDNN_RNN_RELU, CUDNN_RNN_SINGLE_INP_BIAS, 1, 1, 3, 4, 4, 2, SM, {4, 4}});
    test_rnn({CUDNN_LSTM, CUDNN_RNN_SINGLE_REC_BIAS, 2, 2, 3, 3, 4, 3, BM, {4, 2, 3}});
    test_rnn({CUDNN_GRU, CUDNN_RNN_NO_BIAS, 2, 2, 2, 3, 4, 3, PK, {4, 3, 1}});
    test_rnn({CUDNN_RNN_TANH, CUDNN_RNN_DOUBLE_BIAS, 3, 1, 2, 3, 3, 2, SM, {3, 1}});
}

