/* dnn_rnn.cu -- the recurrent ops on the device (rnn, rnn_backward; ops.def) through cuDNN
 * 9's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8 with a
 * cudnnRNNDescriptor_t set by cudnnSetRNNDescriptor_v8). NEVER RUN ON A GPU (docs/cuda.md):
 * written against the cuDNN 9 headers and compiled with nvcc; over the mock backend these
 * ops run through libtocha's host fallback.
 *
 * cuDNN keeps its own opaque reserve space, while rnn's second result is a defined tensor
 * (the gates and LSTM cell states, ops.def), so the two sides meet like this:
 *   rnn           y = cudnnRNNForward (inference); the reserve is then computed from y
 *                 without a recurrence: the pre-activations of every step are two big
 *                 products (x W_ih^T and [h0; y[0..T-2]] W_hh^T, cuBLAS through
 *                 cu_op_matmul) and one kernel activates them (LSTM: and scans c over t).
 *   rnn_backward  cudnnRNNForward (training) again for cuDNN's reserve space, then
 *                 BackwardData_v8 (dx, dhx, dcx) and BackwardWeights_v8 (the weight
 *                 space's gradient, unpacked into the flat result). cuDNN takes a gradient
 *                 of y and of the final states only: a reserve gradient anywhere but the
 *                 LSTM's c_T (the final cell state) is TC_ERR_UNSUPPORTED (host fallback),
 *                 checked on the device first.
 * The weight space is built from the separate weights through cudnnGetRNNWeightParams:
 * cuDNN's gate order per layer is PyTorch's (LSTM i f g o, GRU r z n), W_ih matrices first
 * (linLayerID 0..G-1), then W_hh (G..2G-1), each gate's rows a dense (H, I) or (H, H)
 * block, biases likewise (CUDNN_RNN_DOUBLE_BIAS; a missing one is zeros).
 * dtypes: float32 (FMA math, exact FP32, unless set_flag(TF32)) and float64; float16 and
 * bfloat16 through float32 copies, as the CPU computes them (with_f32); sizes beyond
 * cuDNN's int are TC_ERR_UNSUPPORTED. Work goes on the current stream.
 */
#include "dnn_handle.h"
#include "strided.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { M_TANH = 0, M_RELU = 1, M_LSTM = 2, M_GRU = 3 };

/* ---- messages (cuDNN handles: dnn_handle.h) ----------------------------------------------- */

struct rctx {
    const char *op;
    char what[200];
};

static tc_status rnn_fail(const rctx *x, cudnnStatus_t st, const char *call) { return cu_dnn_status(st, x->what, call); }

/* ---- geometry and scratch -------------------------------------------------------------------- */

struct geom {
    int dt, mode;
    int64_t T, N, I, H, G, GH, S, R, es;
};

/* Device blocks freed together (stream-ordered, so kernels queued on them finish first). */
struct pool {
    int dev;
    void *p[32];
    int n = 0;
    explicit pool(int d) : dev(d) {}
    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;
    ~pool()
    {
        for (int i = 0; i < n; i++) (void)cu_scratch_free(dev, p[i]);
    }
    tc_status get(size_t nbytes, void **out)
    {
        *out = NULL;
        if (nbytes == 0) return TC_OK;
        if (n == 32) return cu_fail(TC_ERR_INTERNAL, "rnn: too many scratch blocks");
        tc_status s = cu_scratch_alloc(dev, nbytes, out);
        if (!s) p[n++] = *out;
        return s;
    }
    /* in as a dense view (a scratch copy when strided); absent views stay absent */
    tc_status dense(const tc_cuda_view *in, tc_cuda_view *use, const char *op)
    {
        *use = *in;
        if (!in->data || cu_view_is_dense(in)) return TC_OK;
        void *tmp = NULL;
        tc_status s = cu_dense_input(dev, in, use, &tmp, op);
        if (tmp) p[n++] = tmp; /* n < 32: callers stay well below */
        return s;
    }
};

/* A (rows, cols) row-major matrix view over data with row stride ld. */
static tc_cuda_view mat(void *data, int dt, int64_t rows, int64_t cols, int64_t ld)
{
    tc_cuda_view v;
    memset(&v, 0, sizeof v);
    v.data = rows * cols > 0 ? data : NULL;
    v.dtype = dt, v.ndim = 2;
    v.size[0] = rows, v.size[1] = cols, v.stride[0] = ld, v.stride[1] = 1;
    v.numel = rows * cols;
    return v;
}

/* w (rows, cols) seen transposed: (cols, rows). */
static tc_cuda_view transposed(const tc_cuda_view &w)
{
    tc_cuda_view t = w;
    t.size[0] = w.size[1], t.size[1] = w.size[0];
    t.stride[0] = w.stride[1], t.stride[1] = w.stride[0];
    return t;
}

/* c = a b, or c += a b (acc): through the matmul launcher (cuBLAS). */
static tc_status gemm(int dev, const tc_cuda_view &a, const tc_cuda_view &b, const tc_cuda_view &c, bool acc)
{
    if (c.numel == 0) return TC_OK;
    tc_cuda_view in[3] = {c, a, b};
    tc_cuda_call k;
    memset(&k, 0, sizeof k);
    k.op = acc ? TC_OP_ADDMM : TC_OP_MM;
    k.nin = acc ? 3 : 2, k.nout = 1;
    k.in = acc ? in : in + 1;
    k.out[0] = c;
    k.params.s[0] = 1, k.params.s[1] = 1; /* beta, alpha (addmm) */
    return cu_op_matmul(dev, &k);
}

/* ---- kernels -------------------------------------------------------------------------------- */

template <class F> __device__ __forceinline__ F sigm(F x) { return F(1) / (F(1) + exp(-x)); }

/* LSTM reserve rows (T*N, 5H): the gate columns hold x W_ih^T + h W_hh^T; add the biases,
 * activate in place and run the cell state over t. One thread per (n, j). */
template <class F>
__global__ void lstm_reserve(F *res, const F *bi, const F *bh, const F *c0, int64_t T, int64_t N, int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * H; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = e / H, j = e % H;
        F c = c0 ? c0[e] : F(0);
        for (int64_t t = 0; t < T; t++) {
            F *r = res + (t * N + n) * 5 * H;
            F v[4];
            for (int k = 0; k < 4; k++) v[k] = r[k * H + j] + (bi ? bi[k * H + j] : F(0)) + (bh ? bh[k * H + j] : F(0));
            F i = sigm(v[0]), f = sigm(v[1]), g = tanh(v[2]), o = sigm(v[3]);
            c = f * c + i * g;
            r[j] = i, r[H + j] = f, r[2 * H + j] = g, r[3 * H + j] = o, r[4 * H + j] = c;
        }
    }
}

/* GRU reserve rows (T*N, 4H): r z n columns hold x W_ih^T, B (T*N, 3H) holds h W_hh^T. */
template <class F>
__global__ void gru_reserve(F *res, const F *B, const F *bi, const F *bh, int64_t rows, int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * H; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = e / H, j = e % H;
        F *r = res + q * 4 * H;
        const F *b = B + q * 3 * H;
        F x[3], h[3];
        for (int k = 0; k < 3; k++) {
            x[k] = r[k * H + j] + (bi ? bi[k * H + j] : F(0));
            h[k] = b[k * H + j] + (bh ? bh[k * H + j] : F(0));
        }
        F rr = sigm(x[0] + h[0]), z = sigm(x[1] + h[1]), nn = tanh(x[2] + rr * h[2]);
        r[j] = rr, r[H + j] = z, r[2 * H + j] = nn, r[3 * H + j] = h[2];
    }
}

/* *flag = 1 when a dense (T*N, R) reserve gradient is non-zero outside the columns
 * [keep0, keep0 + H) of its last N rows (keep0 < 0: anywhere). */
template <class F>
__global__ void reserve_grad_elsewhere(const F *d, int64_t rows, int64_t R, int64_t last0, int64_t keep0, int64_t H,
                                       int *flag)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * R; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = e / R, c = e % R;
        bool kept = keep0 >= 0 && q >= last0 && c >= keep0 && c < keep0 + H;
        if (!kept && d[e] != F(0)) *flag = 1;
    }
}

__global__ void fill_lengths(int32_t *p, int64_t n, int32_t v)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) p[e] = v;
}

/* ---- cuDNN descriptors ------------------------------------------------------------------------- */

struct descs {
    cudnnRNNDescriptor_t rnn = NULL;
    cudnnDropoutDescriptor_t drop = NULL;
    cudnnRNNDataDescriptor_t xd = NULL, yd = NULL;
    cudnnTensorDescriptor_t hd = NULL, md = NULL, bd = NULL;
    ~descs()
    {
        if (rnn) cudnnDestroyRNNDescriptor(rnn);
        if (drop) cudnnDestroyDropoutDescriptor(drop);
        if (xd) cudnnDestroyRNNDataDescriptor(xd);
        if (yd) cudnnDestroyRNNDataDescriptor(yd);
        if (hd) cudnnDestroyTensorDescriptor(hd);
        if (md) cudnnDestroyTensorDescriptor(md);
        if (bd) cudnnDestroyTensorDescriptor(bd);
    }
};

#define TRY_DNN(call)                                                                           \
    do {                                                                                        \
        cudnnStatus_t st_ = (call);                                                             \
        if (st_ != CUDNN_STATUS_SUCCESS) return rnn_fail(x, st_, #call);                        \
    } while (0)

static tc_status descs_make(const rctx *x, cudnnHandle_t h, const geom &g, bool bias, descs *d)
{
    cudnnDataType_t t = g.dt == TC_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnMathType_t math = g.dt == TC_F32 && !cu_allow_tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    cudnnRNNMode_t cell = g.mode == M_LSTM ? CUDNN_LSTM : g.mode == M_GRU ? CUDNN_GRU
                          : g.mode == M_RELU ? CUDNN_RNN_RELU : CUDNN_RNN_TANH;
    TRY_DNN(cudnnCreateDropoutDescriptor(&d->drop));
    TRY_DNN(cudnnSetDropoutDescriptor(d->drop, h, 0.0f, NULL, 0, 0)); /* one layer: no dropout */
    TRY_DNN(cudnnCreateRNNDescriptor(&d->rnn));
    TRY_DNN(cudnnSetRNNDescriptor_v8(d->rnn, CUDNN_RNN_ALGO_STANDARD, cell,
                                     bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS, CUDNN_UNIDIRECTIONAL,
                                     CUDNN_LINEAR_INPUT, t, t, math, (int32_t)g.I, (int32_t)g.H, (int32_t)g.H, 1,
                                     d->drop, CUDNN_RNN_PADDED_IO_DISABLED));
    /* every sequence has all T steps: (T, N, features) in time-major order, which is the
     * packed layout (the unpacked ones need CUDNN_RNN_PADDED_IO_ENABLED; found by the fake
     * cuDNN of tests/emu, which follows the API reference) */
    int lens[1024], *lp = lens;
    if (g.N > 1024 && !(lp = (int *)malloc(sizeof(int) * (size_t)g.N)))
        return cu_fail(TC_ERR_MEMORY, "%s: out of host memory for the sequence lengths", x->what);
    for (int64_t n = 0; n < g.N; n++) lp[n] = (int)g.T;
    cudnnStatus_t st = cudnnCreateRNNDataDescriptor(&d->xd);
    if (!st) st = cudnnCreateRNNDataDescriptor(&d->yd);
    if (!st)
        st = cudnnSetRNNDataDescriptor(d->xd, t, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, (int)g.T, (int)g.N,
                                       (int)g.I, lp, NULL);
    if (!st)
        st = cudnnSetRNNDataDescriptor(d->yd, t, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, (int)g.T, (int)g.N,
                                       (int)g.H, lp, NULL);
    if (lp != lens) free(lp);
    if (st) return rnn_fail(x, st, "cudnnSetRNNDataDescriptor");
    int dims[3] = {1, (int)g.N, (int)g.H}, strides[3] = {(int)(g.N * g.H), (int)g.H, 1};
    TRY_DNN(cudnnCreateTensorDescriptor(&d->hd));
    TRY_DNN(cudnnSetTensorNdDescriptor(d->hd, t, 3, dims, strides));
    TRY_DNN(cudnnCreateTensorDescriptor(&d->md));
    TRY_DNN(cudnnCreateTensorDescriptor(&d->bd));
    return TC_OK;
}

/* Copies between the separate weights and cuDNN's weight space: to_space packs w_ih,
 * w_hh and the bias pair b (2, GH) or NULL into space; otherwise unpacks the space (a
 * gradient) into w_ih, w_hh and b. Matrices and biases of gate k are rows [kH, (k+1)H). */
static tc_status weights_copy(const rctx *x, cudnnHandle_t h, const geom &g, descs *d, size_t wsize, void *space,
                              char *w_ih, char *w_hh, char *b, bool to_space)
{
    cudaStream_t s = cu_stream();
    for (int id = 0; id < 2 * g.G; id++) {
        void *m = NULL, *bb = NULL;
        TRY_DNN(cudnnGetRNNWeightParams(h, d->rnn, 0, wsize, space, id, d->md, &m, d->bd, &bb));
        bool in = id < g.G;
        int64_t k = in ? id : id - g.G, cols = in ? g.I : g.H;
        char *w = (in ? w_ih : w_hh) + k * g.H * cols * g.es;
        size_t mbytes = (size_t)(g.H * cols * g.es), bbytes = (size_t)(g.H * g.es);
        cudaError_t e = cudaSuccess;
        if (m && mbytes) e = cudaMemcpyAsync(to_space ? m : w, to_space ? w : m, mbytes, cudaMemcpyDeviceToDevice, s);
        if (!e && bb && b) {
            char *bp = b + ((in ? 0 : g.GH) + k * g.H) * g.es;
            e = cudaMemcpyAsync(to_space ? bb : bp, to_space ? bp : bb, bbytes, cudaMemcpyDeviceToDevice, s);
        }
        if (e) return cu_check(e, x->what);
    }
    return TC_OK;
}

/* ---- rnn ----------------------------------------------------------------------------------- */

static tc_status forward(int dev, const tc_cuda_call *c, const geom &g, const rctx *x)
{
    pool P(dev);
    tc_cuda_view X, hx, wi, wh, bi, bh;
    tc_status s;
    if ((s = P.dense(&c->in[0], &X, x->op)) || (s = P.dense(&c->in[1], &hx, x->op)) ||
        (s = P.dense(&c->in[2], &wi, x->op)) || (s = P.dense(&c->in[3], &wh, x->op)) ||
        (s = P.dense(&c->in[4], &bi, x->op)) || (s = P.dense(&c->in[5], &bh, x->op)))
        return s;
    /* results: dense, or computed in scratch and copied out */
    tc_cuda_view Y = c->out[0], RS = c->out[1];
    void *yt = NULL, *rt = NULL;
    if (!cu_view_is_dense(&Y) && ((s = P.get((size_t)(Y.numel * g.es), &yt)))) return s;
    if (yt) Y = cu_view_dense(&c->out[0], yt);
    if (!cu_view_is_dense(&RS) && ((s = P.get((size_t)(RS.numel * g.es), &rt)))) return s;
    if (rt) RS = cu_view_dense(&c->out[1], rt);
    bool bias = bi.data || bh.data;

    cudnnHandle_t h = NULL;
    if ((s = cu_dnn_handle_get(dev, &h, x->what))) return s;
    {
        descs d;
        size_t wsize = 0, ws = 0, rs = 0;
        void *space = NULL, *work = NULL, *bpair = NULL;
        int32_t *lens = NULL;
        if ((s = descs_make(x, h, g, bias, &d))) goto out;
        if ((s = P.get((size_t)(g.N * sizeof(int32_t)), (void **)&lens))) goto out;
        fill_lengths<<<cu_blocks_for(g.N, 256), 256, 0, cu_stream()>>>(lens, g.N, (int32_t)g.T);
        {
            cudnnStatus_t st = cudnnGetRNNWeightSpaceSize(h, d.rnn, &wsize);
            if (!st) st = cudnnGetRNNTempSpaceSizes(h, d.rnn, CUDNN_FWD_MODE_INFERENCE, d.xd, &ws, &rs);
            if (st) {
                s = rnn_fail(x, st, "sizes");
                goto out;
            }
        }
        if ((s = P.get(wsize, &space)) || (s = P.get(ws, &work))) goto out;
        if (bias) { /* the pair {b_ih; b_hh}, zeros for a missing one */
            if ((s = P.get((size_t)(2 * g.GH * g.es), &bpair))) goto out;
            if ((s = cu_check(cudaMemsetAsync(bpair, 0, (size_t)(2 * g.GH * g.es), cu_stream()), x->what))) goto out;
            if (bi.data && (s = cu_check(cudaMemcpyAsync(bpair, bi.data, (size_t)(g.GH * g.es),
                                                         cudaMemcpyDeviceToDevice, cu_stream()), x->what)))
                goto out;
            if (bh.data && (s = cu_check(cudaMemcpyAsync((char *)bpair + g.GH * g.es, bh.data, (size_t)(g.GH * g.es),
                                                         cudaMemcpyDeviceToDevice, cu_stream()), x->what)))
                goto out;
        }
        if ((s = weights_copy(x, h, g, &d, wsize, space, (char *)wi.data, (char *)wh.data, (char *)bpair, true)))
            goto out;
        {
            void *c0 = hx.data && g.mode == M_LSTM ? (char *)hx.data + g.N * g.H * g.es : NULL;
            cudnnStatus_t st = cudnnRNNForward(h, d.rnn, CUDNN_FWD_MODE_INFERENCE, lens, d.xd, X.data, d.yd, Y.data,
                                               d.hd, hx.data, NULL, d.hd, c0, NULL, wsize, space, ws, work, 0, NULL);
            if (st) {
                s = rnn_fail(x, st, "cudnnRNNForward");
                goto out;
            }
        }
        /* the reserve from y: pre-activations by two products, then the gate kernel */
        if (g.mode == M_LSTM || g.mode == M_GRU) {
            int64_t TN = g.T * g.N, NH = g.N * g.H, gc = g.GH;
            tc_cuda_view A = mat(RS.data, g.dt, TN, gc, g.R), WiT = transposed(wi), WhT = transposed(wh);
            void *B = NULL;
            tc_cuda_view Bv = A; /* LSTM: the recurrent part adds into the gate columns */
            if (g.mode == M_GRU) {
                if ((s = P.get((size_t)(TN * gc * g.es), &B))) goto out;
                Bv = mat(B, g.dt, TN, gc, gc);
            }
            if ((s = gemm(dev, mat(X.data, g.dt, TN, g.I, g.I), WiT, A, false))) goto out;
            tc_cuda_view B0 = mat(Bv.data, g.dt, g.N, gc, Bv.stride[0]);
            tc_cuda_view B1 = mat((char *)Bv.data + g.N * Bv.stride[0] * g.es, g.dt, TN - g.N, gc, Bv.stride[0]);
            bool acc = g.mode == M_LSTM;
            if (hx.data) s = gemm(dev, mat(hx.data, g.dt, g.N, g.H, g.H), WhT, B0, acc);
            else if (!acc) s = cu_strided_scale(&B0, 0, x->op);
            if (!s) s = gemm(dev, mat(Y.data, g.dt, TN - g.N, g.H, g.H), WhT, B1, acc);
            if (s) goto out;
            const char *bip = (const char *)bi.data, *bhp = (const char *)bh.data;
            const char *c0 = hx.data ? (const char *)hx.data + NH * g.es : NULL;
            if (g.dt == TC_F32) {
                if (g.mode == M_LSTM)
                    lstm_reserve<float><<<cu_blocks_for(NH, 256), 256, 0, cu_stream()>>>(
                        (float *)RS.data, (const float *)bip, (const float *)bhp, (const float *)c0, g.T, g.N, g.H);
                else
                    gru_reserve<float><<<cu_blocks_for(TN * g.H, 256), 256, 0, cu_stream()>>>(
                        (float *)RS.data, (const float *)B, (const float *)bip, (const float *)bhp, TN, g.H);
            } else {
                if (g.mode == M_LSTM)
                    lstm_reserve<double><<<cu_blocks_for(NH, 256), 256, 0, cu_stream()>>>(
                        (double *)RS.data, (const double *)bip, (const double *)bhp, (const double *)c0, g.T, g.N,
                        g.H);
                else
                    gru_reserve<double><<<cu_blocks_for(TN * g.H, 256), 256, 0, cu_stream()>>>(
                        (double *)RS.data, (const double *)B, (const double *)bip, (const double *)bhp, TN, g.H);
            }
            if ((s = cu_check(cudaGetLastError(), x->what))) goto out;
        }
        if (yt) s = cu_strided_copy(&c->out[0], &Y, x->op);
        if (!s && rt) s = cu_strided_copy(&c->out[1], &RS, x->op);
    out:;
    }
    cu_dnn_handle_put(dev, h);
    return s;
}

/* ---- rnn_backward ---------------------------------------------------------------------------- */

/* Whether the reserve gradient has values cuDNN cannot take (anything but LSTM's c_T). */
static tc_status reserve_grad_fits(const geom &g, const tc_cuda_view &dr, const rctx *x, pool &P, bool *fits)
{
    *fits = true;
    if (!dr.data || dr.numel == 0) return TC_OK;
    int *flag = NULL, host = 0;
    tc_status s = P.get(sizeof(int), (void **)&flag);
    if (!s) s = cu_check(cudaMemsetAsync(flag, 0, sizeof(int), cu_stream()), x->what);
    if (s) return s;
    int64_t rows = g.T * g.N, keep = g.mode == M_LSTM ? 4 * g.H : -1;
    if (g.dt == TC_F32)
        reserve_grad_elsewhere<float><<<cu_blocks_for(dr.numel, 256), 256, 0, cu_stream()>>>(
            (const float *)dr.data, rows, g.R, rows - g.N, keep, g.H, flag);
    else
        reserve_grad_elsewhere<double><<<cu_blocks_for(dr.numel, 256), 256, 0, cu_stream()>>>(
            (const double *)dr.data, rows, g.R, rows - g.N, keep, g.H, flag);
    if ((s = cu_check(cudaGetLastError(), x->what))) return s;
    if ((s = cu_check(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, cu_stream()), x->what)))
        return s;
    if ((s = cu_check(cudaStreamSynchronize(cu_stream()), x->what))) return s;
    *fits = host == 0;
    return TC_OK;
}

static tc_status backward(int dev, const tc_cuda_call *c, const geom &g, const rctx *x)
{
    pool P(dev);
    tc_cuda_view X, hx, wi, wh, b, Y, dy, dr;
    tc_status s;
    if ((s = P.dense(&c->in[0], &X, x->op)) || (s = P.dense(&c->in[1], &hx, x->op)) ||
        (s = P.dense(&c->in[2], &wi, x->op)) || (s = P.dense(&c->in[3], &wh, x->op)) ||
        (s = P.dense(&c->in[4], &b, x->op)) || (s = P.dense(&c->in[5], &Y, x->op)) ||
        (s = P.dense(&c->in[7], &dy, x->op)) || (s = P.dense(&c->in[8], &dr, x->op)))
        return s;
    /* The check below reads a flag back on the host: a wait that a graph capture cannot
     * record. Without a reserve gradient (the usual case: no loss on the final cell state)
     * there is nothing to check. */
    if (dr.data && dr.numel > 0 && cu_capturing(dev))
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "%s: cannot check the gradient of the final states on the host while a CUDA graph is being "
                       "captured on cuda:%d; capture a step whose loss does not use the final cell state, or run it "
                       "outside the capture",
                       x->what, dev);
    bool fits;
    if ((s = reserve_grad_fits(g, dr, x, P, &fits))) return s;
    if (!fits)
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: a gradient of the reserve other than the final cell state does not "
                       "fit cuDNN", x->what);
    tc_cuda_view DX = c->out[0], FL = c->out[1];
    void *dxt = NULL, *flt = NULL;
    if (!cu_view_is_dense(&DX) && ((s = P.get((size_t)(DX.numel * g.es), &dxt)))) return s;
    if (dxt) DX = cu_view_dense(&c->out[0], dxt);
    if (!cu_view_is_dense(&FL) && ((s = P.get((size_t)(FL.numel * g.es), &flt)))) return s;
    if (flt) FL = cu_view_dense(&c->out[1], flt);
    int64_t NH = g.N * g.H, TNH = g.T * NH;
    char *dhx = (char *)FL.data, *dw_ih = dhx + g.S * NH * g.es, *dw_hh = dw_ih + g.GH * g.I * g.es;
    char *db = b.data ? dw_hh + g.GH * g.H * g.es : NULL;

    cudnnHandle_t h = NULL;
    if ((s = cu_dnn_handle_get(dev, &h, x->what))) return s;
    {
        descs d;
        size_t wsize = 0, ws = 0, rs = 0;
        void *space = NULL, *dspace = NULL, *work = NULL, *reserve = NULL, *y2 = NULL, *zdy = NULL, *dcy = NULL;
        int32_t *lens = NULL;
        const void *c0 = hx.data && g.mode == M_LSTM ? (const char *)hx.data + NH * g.es : NULL;
        if ((s = descs_make(x, h, g, b.data != NULL, &d))) goto out;
        if ((s = P.get((size_t)(g.N * sizeof(int32_t)), (void **)&lens))) goto out;
        fill_lengths<<<cu_blocks_for(g.N, 256), 256, 0, cu_stream()>>>(lens, g.N, (int32_t)g.T);
        {
            cudnnStatus_t st = cudnnGetRNNWeightSpaceSize(h, d.rnn, &wsize);
            if (!st) st = cudnnGetRNNTempSpaceSizes(h, d.rnn, CUDNN_FWD_MODE_TRAINING, d.xd, &ws, &rs);
            if (st) {
                s = rnn_fail(x, st, "sizes");
                goto out;
            }
        }
        if ((s = P.get(wsize, &space)) || (s = P.get(wsize, &dspace)) || (s = P.get(ws, &work)) ||
            (s = P.get(rs, &reserve)) || (s = P.get((size_t)(TNH * g.es), &y2)))
            goto out;
        if ((s = weights_copy(x, h, g, &d, wsize, space, (char *)wi.data, (char *)wh.data, (char *)b.data, true)))
            goto out;
        /* cuDNN's reserve space: the forward once more, in training mode */
        {
            cudnnStatus_t st = cudnnRNNForward(h, d.rnn, CUDNN_FWD_MODE_TRAINING, lens, d.xd, X.data, d.yd, y2, d.hd,
                                               hx.data, NULL, d.hd, c0, NULL, wsize, space, ws, work, rs, reserve);
            if (st) {
                s = rnn_fail(x, st, "cudnnRNNForward (training)");
                goto out;
            }
        }
        if (!dy.data) { /* no gradient of y: zeros */
            if ((s = P.get((size_t)(TNH * g.es), &zdy))) goto out;
            if ((s = cu_check(cudaMemsetAsync(zdy, 0, (size_t)(TNH * g.es), cu_stream()), x->what))) goto out;
        }
        if (dr.data && g.mode == M_LSTM) { /* dc_T: the last step's c columns of the reserve gradient */
            if ((s = P.get((size_t)(NH * g.es), &dcy))) goto out;
            tc_cuda_view src = mat((char *)dr.data + ((g.T - 1) * g.N * g.R + 4 * g.H) * g.es, g.dt, g.N, g.H, g.R);
            tc_cuda_view dst = mat(dcy, g.dt, g.N, g.H, g.H);
            if ((s = cu_strided_copy(&dst, &src, x->op))) goto out;
        }
        {
            void *dcx = g.mode == M_LSTM ? dhx + NH * g.es : NULL;
            cudnnStatus_t st = cudnnRNNBackwardData_v8(h, d.rnn, lens, d.yd, y2, dy.data ? dy.data : zdy, d.xd,
                                                       DX.data, d.hd, hx.data, NULL, dhx, d.hd, c0, dcy, dcx, wsize,
                                                       space, ws, work, rs, reserve);
            /* cudnnRNNBackwardWeights_v8 supports only CUDNN_WGRAD_MODE_ADD: it adds into dspace */
            if (!st && (s = cu_check(cudaMemsetAsync(dspace, 0, wsize, cu_stream()), x->what))) goto out;
            if (!st)
                st = cudnnRNNBackwardWeights_v8(h, d.rnn, CUDNN_WGRAD_MODE_ADD, lens, d.xd, X.data, d.hd, hx.data,
                                                d.yd, y2, wsize, dspace, ws, work, rs, reserve);
            if (st) {
                s = rnn_fail(x, st, "cudnnRNNBackwardData_v8 / BackwardWeights_v8");
                goto out;
            }
        }
        if ((s = weights_copy(x, h, g, &d, wsize, dspace, dw_ih, dw_hh, db, false))) goto out;
        if (dxt) s = cu_strided_copy(&c->out[0], &DX, x->op);
        if (!s && flt) s = cu_strided_copy(&c->out[1], &FL, x->op);
    out:;
    }
    cu_dnn_handle_put(dev, h);
    return s;
}

/* ---- half types --------------------------------------------------------------------------- */

static bool is_half(int dt) { return dt == TC_F16 || dt == TC_BF16; }

/* v converted into a fresh float32 scratch copy (dense), kept in tmp[*nt]. */
static tc_status to_f32_scratch(int dev, int op, const tc_cuda_view *v, tc_cuda_view *use, void **tmp, int *nt)
{
    *use = *v;
    use->dtype = TC_F32;
    if (!v->data || v->numel == 0) return TC_OK; /* absent or empty: nothing to convert */
    void *t = NULL;
    tc_status s = cu_scratch_alloc(dev, (size_t)v->numel * sizeof(float), &t);
    if (s) return s;
    tmp[(*nt)++] = t;
    *use = cu_view_dense(v, t);
    use->dtype = TC_F32;
    return cu_convert_view(dev, op, use, v);
}

/* A float16 / bfloat16 call as the CPU computes it (tc_cpu_with_f32): every half tensor
 * converted to float32 scratch, the float32 path (cuDNN), the results rounded back into the
 * half outputs. cuDNN's own half RNN would round inside the recurrence instead, and the
 * results would not be the CPU's. */
static tc_status with_f32(int dev, const tc_cuda_call *c)
{
    enum { MAXIN = 9 };
    tc_cuda_view in[MAXIN];
    void *tmp[MAXIN + 2];
    int nt = 0;
    tc_status s = TC_OK;
    tc_cuda_call c32 = *c;
    if (c->nin > MAXIN || c->nout > 2) return cu_fail(TC_ERR_INTERNAL, "%s: %d inputs", cu_op_name(c->op), c->nin);
    for (int i = 0; i < c->nin && !s; i++) s = to_f32_scratch(dev, c->op, &c->in[i], &in[i], tmp, &nt);
    for (int o = 0; o < c->nout && !s; o++) {
        c32.out[o] = cu_view_dense(&c->out[o], NULL);
        c32.out[o].dtype = TC_F32;
        if (c->out[o].numel == 0) continue;
        s = cu_scratch_alloc(dev, (size_t)c->out[o].numel * sizeof(float), &c32.out[o].data);
        if (!s) tmp[nt++] = c32.out[o].data;
    }
    c32.in = in;
    if (!s) s = cu_op_rnn(dev, &c32);
    for (int o = 0; o < c->nout && !s; o++) {
        if (c->out[o].numel == 0) continue;
        s = cu_convert_view(dev, c->op, &c->out[o], &c32.out[o]);
    }
    for (int i = 0; i < nt; i++) cu_scratch_free(dev, tmp[i]); /* reused only after this work, on this stream */
    return s;
}

/* ---- the launcher ---------------------------------------------------------------------------- */

tc_status cu_op_rnn(int dev, const tc_cuda_call *c)
{
    int dt = c->in[0].dtype;
    if (dt != TC_F32 && dt != TC_F64 && !is_half(dt)) return cu_unsupported(c);
    geom g;
    g.dt = dt, g.mode = (int)c->params.i[0];
    g.T = c->in[0].size[0], g.N = c->in[0].size[1], g.I = c->in[0].size[2], g.H = c->in[3].size[1];
    g.G = g.mode == M_LSTM ? 4 : g.mode == M_GRU ? 3 : 1;
    g.GH = g.G * g.H, g.S = g.mode == M_LSTM ? 2 : 1;
    g.R = g.mode == M_LSTM ? 5 * g.H : g.mode == M_GRU ? 4 * g.H : 0;
    g.es = (int64_t)cu_elsize(dt);
    rctx x;
    x.op = cu_op_name(c->op);
    snprintf(x.what, sizeof x.what, "%s: x (%lld,%lld,%lld), hidden %lld, %s %s", x.op, (long long)g.T,
             (long long)g.N, (long long)g.I, (long long)g.H,
             g.mode == M_LSTM ? "LSTM" : g.mode == M_GRU ? "GRU" : g.mode == M_RELU ? "RNN relu" : "RNN tanh",
             cu_dtype_name(dt));
    if (g.T == 0 || g.N == 0) /* nothing to run: cuDNN refuses empty sequences; the host has it */
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: empty sequence or batch", x.what);
    /* every count cuDNN takes as an int: T*N rows, the gates, the hidden state's stride */
    if (g.T * g.N > INT_MAX || g.GH > INT_MAX || g.I > INT_MAX || g.N * g.H > INT_MAX)
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: sizes beyond cuDNN's int", x.what);
    if (is_half(dt)) return with_f32(dev, c);
    return c->op == TC_OP_RNN ? forward(dev, c, g, &x) : backward(dev, c, g, &x);
}
