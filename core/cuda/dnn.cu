/* dnn.cu -- the convolutions on the device (conv2d, conv_transpose2d, conv2d_weight)
 * through cuDNN 9's convolution API (cudnnConvolutionForward / BackwardData /
 * BackwardFilter).
 *
 * The three ops are one convolution seen from three sides (as in core/cpu/conv.c): the
 * "image" (N, C, H, W) is conv2d's input, the "columns" (N, O, Ho, Wo) its output, the
 * filter (O, C/G, kH, kW) its weight, cross-correlation with stride, padding, dilation and
 * groups from the params (ops.def: shape = {sH,sW, pH,pW, dH,dW, ...}, i0 = groups).
 *   conv2d            columns = Forward(image, filter)           (+ bias per O)
 *   conv_transpose2d  image   = BackwardData(filter, columns)    (+ bias per image channel)
 *   conv2d_weight     filter  = BackwardFilter(image, columns)
 * A bias is broadcast into the result first and cuDNN adds onto it (beta = 1), so f16 /
 * bf16 results are rounded once, from float, as on the CPU.
 *
 * Layouts: cuDNN gets dense NCHW tensors; strided inputs go through a dense scratch copy
 * and a strided result is computed in scratch and copied back (strided.cu).
 * dtypes: f32 (FMA math, exact FP32, unless set_flag(TF32): CUDNN_DEFAULT_MATH lets TF32
 * tensor cores in), f64, f16 / bf16 (float compute, tensor cores).
 * Algorithms: cuDNN's heuristic order by default, the first that runs with a workspace we
 * can allocate; with set_flag(CUDNN_BENCHMARK) cudnnFind*AlgorithmEx times them once per
 * (device, op, dtype, shapes, params, math) and the winner is cached (g_cache). Each runs
 * with the math type cuDNN listed it with (as PyTorch does: the type picks the tensor-core
 * or plain version of an algorithm), except that exact float32 stays FMA and a type that
 * converts float32 operands to half is never set (use_math).
 * Failures: cuDNN refusing a configuration (its BAD_PARAM and NOT_SUPPORTED categories:
 * shapes or sizes beyond its limits, conv_transpose2d's output padding >= the stride) is
 * TC_ERR_UNSUPPORTED, so libtocha's host fallback (the CPU kernel accepts every
 * configuration prepare validated) can take over; allocation failures are TC_ERR_MEMORY;
 * anything else (initialisation, execution) TC_ERR_DEVICE. Messages name the op, the
 * shapes, the dtype and cudnnGetErrorString.
 */
#include "dnn_handle.h"
#include "strided.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum dir { FWD, BWD_DATA, BWD_FILTER };

#define MAX_DEVICES 64
#define POOL_KEEP 16 /* idle handles kept per device; more are destroyed when returned ... */
#define POOL_MAX 64  /* ... but not while the thread captures (cudnnDestroy waits for the device) */
#define MAX_ALGOS 16
#define CACHE_SIZE 256
#define FIND_WORKSPACE_MAX ((size_t)1 << 30) /* the most cudnnFind* may try algorithms with */

/* ---- handles (one per concurrent caller and device, as blas.cu; dnn_handle.h) ------------------------ */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t g_idle[MAX_DEVICES][POOL_MAX];
static int g_nidle[MAX_DEVICES];

/* The message prefix: op, shapes, dtype ("conv2d (2,3,5,5) * (4,3,3,3) float32"). */
struct ctx {
    const char *op;
    char what[200];
};

tc_status cu_dnn_status(cudnnStatus_t st, const char *what, const char *call)
{
    int cat = CUDNN_STATUS_CATEGORY((int)st);
    tc_status code = cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED ? TC_ERR_UNSUPPORTED
                     : st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                               st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                         ? TC_ERR_MEMORY
                         : TC_ERR_DEVICE;
    (void)cudaGetLastError();
    return cu_fail(code, "%s: %s: cuDNN %s", what, call, cudnnGetErrorString(st));
}

static tc_status dnn_fail(const ctx *x, cudnnStatus_t st, const char *call) { return cu_dnn_status(st, x->what, call); }

tc_status cu_dnn_handle_get(int dev, cudnnHandle_t *h, const char *what)
{
    if (dev < 0 || dev >= MAX_DEVICES) return cu_fail(TC_ERR_ARG, "%s: device %d is beyond cuDNN's pool", what, dev);
    pthread_mutex_lock(&g_mu);
    *h = g_nidle[dev] > 0 ? g_idle[dev][--g_nidle[dev]] : NULL;
    pthread_mutex_unlock(&g_mu);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (!*h) { /* it allocates device memory: allowed inside this thread's capture (cuda_internal.h) */
        cu_relaxed_capture relaxed;
        st = cudnnCreate(h);
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        *h = NULL;
        return cu_dnn_status(st, what, "cudnnCreate");
    }
    if ((st = cudnnSetStream(*h, cu_stream())) != CUDNN_STATUS_SUCCESS) {
        cudnnDestroy(*h);
        *h = NULL;
        return cu_dnn_status(st, what, "cudnnSetStream");
    }
    return TC_OK;
}

void cu_dnn_handle_put(int dev, cudnnHandle_t h)
{
    bool capturing = cu_capturing_any();
    pthread_mutex_lock(&g_mu);
    bool keep = g_nidle[dev] < (capturing ? POOL_MAX : POOL_KEEP);
    if (keep) g_idle[dev][g_nidle[dev]++] = h;
    pthread_mutex_unlock(&g_mu);
    if (!keep) cudnnDestroy(h);
}

void cu_dnn_warm(int dev)
{
    cudnnHandle_t h; /* an idle one taken and given back, or one made now and kept */
    if (cu_dnn_handle_get(dev, &h, "cuDNN handle") == TC_OK) cu_dnn_handle_put(dev, h);
}

/* ---- the benchmark cache ------------------------------------------------------------------ */

/* Everything an algorithm's speed and validity depend on; zero-filled, compared bytewise. */
struct key {
    int dev, dir, dtype, math;
    int img[4], cols[4], filt[4], conv[7];
};

static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
/* An algorithm and the math type cuDNN listed it with: cuDNN lists tensor-core and plain
 * versions of one algorithm separately, and runs the version the descriptor's math type
 * names, so the type goes onto the descriptor with the algorithm (use_math). */
struct choice {
    int algo, math;
};

static struct {
    key k;
    choice c;
    bool used;
} g_cache[CACHE_SIZE];
static int g_cache_next; /* the slot a new entry takes (oldest first once full) */

static bool cache_get(const key *k, choice *c)
{
    bool hit = false;
    pthread_mutex_lock(&g_cache_mu);
    for (int i = 0; i < CACHE_SIZE && !hit; i++)
        if (g_cache[i].used && !memcmp(&g_cache[i].k, k, sizeof *k)) *c = g_cache[i].c, hit = true;
    pthread_mutex_unlock(&g_cache_mu);
    return hit;
}

static void cache_put(const key *k, choice c)
{
    pthread_mutex_lock(&g_cache_mu);
    g_cache[g_cache_next].k = *k;
    g_cache[g_cache_next].c = c;
    g_cache[g_cache_next].used = true;
    g_cache_next = (g_cache_next + 1) % CACHE_SIZE;
    pthread_mutex_unlock(&g_cache_mu);
}

/* ---- descriptors ---------------------------------------------------------------------------- */

struct descs {
    cudnnTensorDescriptor_t img, cols;
    cudnnFilterDescriptor_t filt;
    cudnnConvolutionDescriptor_t conv;
};

static void descs_free(descs *d)
{
    if (d->img) cudnnDestroyTensorDescriptor(d->img);
    if (d->cols) cudnnDestroyTensorDescriptor(d->cols);
    if (d->filt) cudnnDestroyFilterDescriptor(d->filt);
    if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

static tc_status descs_make(const ctx *x, const key *k, descs *d)
{
    cudnnDataType_t t = k->dtype == TC_F64 ? CUDNN_DATA_DOUBLE
                        : k->dtype == TC_F16 ? CUDNN_DATA_HALF
                        : k->dtype == TC_BF16 ? CUDNN_DATA_BFLOAT16
                                              : CUDNN_DATA_FLOAT;
    cudnnDataType_t ct = k->dtype == TC_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnStatus_t st;
#define TRY_DNN(call)                                                                        \
    if ((st = (call)) != CUDNN_STATUS_SUCCESS) return dnn_fail(x, st, #call)
    TRY_DNN(cudnnCreateTensorDescriptor(&d->img));
    TRY_DNN(cudnnCreateTensorDescriptor(&d->cols));
    TRY_DNN(cudnnCreateFilterDescriptor(&d->filt));
    TRY_DNN(cudnnCreateConvolutionDescriptor(&d->conv));
    TRY_DNN(cudnnSetTensor4dDescriptor(d->img, CUDNN_TENSOR_NCHW, t, k->img[0], k->img[1], k->img[2], k->img[3]));
    TRY_DNN(cudnnSetTensor4dDescriptor(d->cols, CUDNN_TENSOR_NCHW, t, k->cols[0], k->cols[1], k->cols[2], k->cols[3]));
    TRY_DNN(cudnnSetFilter4dDescriptor(d->filt, t, CUDNN_TENSOR_NCHW, k->filt[0], k->filt[1], k->filt[2], k->filt[3]));
    const int *c = k->conv; /* sH sW pH pW dH dW G */
    TRY_DNN(cudnnSetConvolution2dDescriptor(d->conv, c[2], c[3], c[0], c[1], c[4], c[5], CUDNN_CROSS_CORRELATION, ct));
    TRY_DNN(cudnnSetConvolutionGroupCount(d->conv, c[6]));
    TRY_DNN(cudnnSetConvolutionMathType(d->conv, (cudnnMathType_t)k->math));
    /* cuDNN must see the same columns size: conv_transpose2d's output padding can make
     * the image one that a forward convolution maps to more columns */
    int n, o, ho, wo;
    TRY_DNN(cudnnGetConvolution2dForwardOutputDim(d->conv, d->img, d->filt, &n, &o, &ho, &wo));
#undef TRY_DNN
    if (n != k->cols[0] || o != k->cols[1] || ho != k->cols[2] || wo != k->cols[3])
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: cuDNN maps the image to (%d,%d,%d,%d), not (%d,%d,%d,%d) (output "
                       "padding >= stride)", x->what, n, o, ho, wo, k->cols[0], k->cols[1], k->cols[2], k->cols[3]);
    return TC_OK;
}

/* ---- one direction, three spellings ----------------------------------------------------------- */

struct bufs {
    void *img, *cols, *filt;
};

/* cuDNN's heuristic preference list (algorithms it says can run). */
static cudnnStatus_t heuristic(cudnnHandle_t h, int dir, const descs *d, choice *c, int *n)
{
    int got = 0;
    cudnnStatus_t st;
    *n = 0;
    if (dir == FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        st = cudnnGetConvolutionForwardAlgorithm_v7(h, d->img, d->filt, d->conv, d->cols, MAX_ALGOS, &got, p);
        for (int i = 0; i < got && st == CUDNN_STATUS_SUCCESS; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS) c[(*n)++] = choice{(int)p[i].algo, (int)p[i].mathType};
    } else if (dir == BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        st = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->filt, d->cols, d->conv, d->img, MAX_ALGOS, &got, p);
        for (int i = 0; i < got && st == CUDNN_STATUS_SUCCESS; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS) c[(*n)++] = choice{(int)p[i].algo, (int)p[i].mathType};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->img, d->cols, d->conv, d->filt, MAX_ALGOS, &got, p);
        for (int i = 0; i < got && st == CUDNN_STATUS_SUCCESS; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS) c[(*n)++] = choice{(int)p[i].algo, (int)p[i].mathType};
    }
    return st;
}

static cudnnStatus_t ws_size(cudnnHandle_t h, int dir, const descs *d, int algo, size_t *bytes)
{
    if (dir == FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(h, d->img, d->filt, d->conv, d->cols,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (dir == BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->filt, d->cols, d->conv, d->img,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->img, d->cols, d->conv, d->filt,
                                                          (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
}

/* result = conv + beta * result (the result is the side dir computes). */
static cudnnStatus_t execute(cudnnHandle_t h, int dir, const descs *d, const bufs *b, int algo, void *ws,
                             size_t wsb, bool dbl, double beta)
{
    float fa = 1, fb = (float)beta;
    double da = 1, db = beta;
    const void *pa = dbl ? (const void *)&da : &fa, *pb = dbl ? (const void *)&db : &fb;
    if (dir == FWD)
        return cudnnConvolutionForward(h, pa, d->img, b->img, d->filt, b->filt, d->conv,
                                       (cudnnConvolutionFwdAlgo_t)algo, ws, wsb, pb, d->cols, b->cols);
    if (dir == BWD_DATA)
        return cudnnConvolutionBackwardData(h, pa, d->filt, b->filt, d->cols, b->cols, d->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)algo, ws, wsb, pb, d->img, b->img);
    return cudnnConvolutionBackwardFilter(h, pa, d->img, b->img, d->cols, b->cols, d->conv,
                                          (cudnnConvolutionBwdFilterAlgo_t)algo, ws, wsb, pb, d->filt, b->filt);
}

/* Times the algorithms on the real buffers (the result side is overwritten) and gives
 * the fastest that succeeded, or false. */
static bool find_fastest(cudnnHandle_t h, int dir, const descs *d, const bufs *b, void *ws, size_t wsb, choice *best)
{
    int got = 0;
    cudnnStatus_t st;
    if (dir == FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        st = cudnnFindConvolutionForwardAlgorithmEx(h, d->img, b->img, d->filt, b->filt, d->conv, d->cols, b->cols,
                                                    MAX_ALGOS, &got, p, ws, wsb);
        for (int i = 0; i < got && st == CUDNN_STATUS_SUCCESS; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS) return *best = choice{(int)p[i].algo, (int)p[i].mathType}, true;
    } else if (dir == BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        st = cudnnFindConvolutionBackwardDataAlgorithmEx(h, d->filt, b->filt, d->cols, b->cols, d->conv, d->img,
                                                         b->img, MAX_ALGOS, &got, p, ws, wsb);
        for (int i = 0; i < got && st == CUDNN_STATUS_SUCCESS; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS) return *best = choice{(int)p[i].algo, (int)p[i].mathType}, true;
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        st = cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d->img, b->img, d->cols, b->cols, d->conv, d->filt,
                                                           b->filt, MAX_ALGOS, &got, p, ws, wsb);
        for (int i = 0; i < got && st == CUDNN_STATUS_SUCCESS; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS) return *best = choice{(int)p[i].algo, (int)p[i].mathType}, true;
    }
    (void)cudaGetLastError();
    return false;
}

/* The benchmark winner for k, found now (workspace: the largest any candidate asks for, up
 * to FIND_WORKSPACE_MAX, halved while it cannot be allocated). False: keep the heuristic. */
static bool benchmark(int dev, cudnnHandle_t h, const key *k, const descs *d, const bufs *b, const choice *cand,
                      int ncand, choice *best)
{
    if (cache_get(k, best)) return true;
    /* Timing candidates waits for the device, which a graph capture cannot record: a
     * capture keeps the heuristic's choice (benchmark once outside the capture to cache). */
    if (cu_capturing(dev)) return false;
    size_t most = 0;
    for (int i = 0; i < ncand; i++) {
        size_t sz = 0;
        if (ws_size(h, k->dir, d, cand[i].algo, &sz) == CUDNN_STATUS_SUCCESS && sz > most) most = sz;
    }
    if (most > FIND_WORKSPACE_MAX) most = FIND_WORKSPACE_MAX;
    void *ws = NULL;
    while (most > 0 && cu_scratch_alloc(dev, most, &ws) != TC_OK) most /= 2, ws = NULL;
    bool ok = find_fastest(h, k->dir, d, b, ws, most, best);
    if (ws) cu_scratch_free(dev, ws);
    if (ok) cache_put(k, *best);
    return ok;
}

/* The math type c runs with: the one cuDNN listed it with, except that exact float32 (TF32
 * off: k->math is CUDNN_FMA_MATH) always stays FMA, and a type that lets cuDNN convert
 * float32 operands down to half (..._ALLOW_CONVERSION) is never taken. */
static cudnnMathType_t use_math(const key *k, choice c)
{
    if (k->math == CUDNN_FMA_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return (cudnnMathType_t)k->math;
    return (cudnnMathType_t)c.math;
}

/* ---- the launcher ---------------------------------------------------------------------------- */

/* result[n, ch, :, :] = bias[ch] for a dense (N, Cb, H, W) result (the bias view is 1-D). */
static tc_status fill_bias(const tc_cuda_view *res, const tc_cuda_view *bias, const char *op)
{
    tc_cuda_view b4 = *bias;
    b4.ndim = 4;
    for (int d = 0; d < 4; d++) b4.size[d] = d == 1 ? bias->size[0] : 1, b4.stride[d] = 0;
    b4.stride[1] = bias->stride[0];
    return cu_strided_copy(res, &b4, op);
}

static void dims_of(const tc_cuda_view *v, int *d)
{
    for (int i = 0; i < 4; i++) d[i] = (int)v->size[i];
}

static void shape_str(const tc_cuda_view *v, char *buf, size_t cap)
{
    snprintf(buf, cap, "(%lld,%lld,%lld,%lld)", (long long)v->size[0], (long long)v->size[1], (long long)v->size[2],
             (long long)v->size[3]);
}

tc_status cu_op_conv(int dev, const tc_cuda_call *c)
{
    int dt = c->out[0].dtype;
    if (dt != TC_F32 && dt != TC_F64 && dt != TC_F16 && dt != TC_BF16) return cu_unsupported(c);
    int dir = c->op == TC_OP_CONV2D ? FWD : c->op == TC_OP_CONV_TRANSPOSE2D ? BWD_DATA : BWD_FILTER;
    const tc_cuda_view *out = &c->out[0];
    const tc_cuda_view *bias = c->nin > 2 && c->in[2].data && c->in[2].numel > 0 ? &c->in[2] : NULL;
    ctx x;
    x.op = cu_op_name(c->op);
    {
        char s0[64], s1[64];
        shape_str(&c->in[0], s0, sizeof s0), shape_str(&c->in[1], s1, sizeof s1);
        snprintf(x.what, sizeof x.what, "%s: input %s and %s %s %s", x.op, s0,
                 dir == BWD_FILTER ? "gradOutput" : "weight", s1, cu_dtype_name(dt));
    }
    if (out->numel == 0) return TC_OK;
    if (c->in[0].numel == 0) /* an empty batch: the weight gradient is a sum of nothing */
        return cu_strided_scale(out, 0, x.op);
    for (int i = 0; i < 2; i++)
        for (int d = 0; d < 4; d++)
            if (c->in[i].size[d] > INT_MAX || out->size[d] > INT_MAX)
                return cu_fail(TC_ERR_UNSUPPORTED, "%s: sizes beyond cuDNN's int", x.what);

    /* dense operands; the result in scratch when it is strided */
    void *tmp[2] = {NULL, NULL}, *otmp = NULL;
    tc_cuda_view in0, in1, res = *out;
    tc_status s;
    if ((s = cu_dense_input(dev, &c->in[0], &in0, &tmp[0], x.op))) goto done;
    if ((s = cu_dense_input(dev, &c->in[1], &in1, &tmp[1], x.op))) goto done;
    if (!cu_view_is_dense(out)) {
        if ((s = cu_scratch_alloc(dev, (size_t)out->numel * cu_elsize(dt), &otmp))) goto done;
        res = cu_view_dense(out, otmp);
    }
    {
        /* image / columns / filter: whichever of x, w, out plays each part */
        const tc_cuda_view *img = &in0, *cols = &res, *filt = &in1;
        if (dir == BWD_DATA) img = &res, cols = &in0;
        if (dir == BWD_FILTER) cols = &in1, filt = &res;
        key k;
        memset(&k, 0, sizeof k);
        k.dev = dev, k.dir = dir, k.dtype = dt;
        k.math = dt == TC_F32 ? (cu_allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)
                 : dt == TC_F64 ? CUDNN_DEFAULT_MATH
                                : CUDNN_TENSOR_OP_MATH;
        dims_of(img, k.img), dims_of(cols, k.cols), dims_of(filt, k.filt);
        for (int i = 0; i < 6; i++) k.conv[i] = (int)c->params.shape[i];
        k.conv[6] = (int)c->params.i[0];
        bufs b = {img->data, cols->data, filt->data};

        descs d;
        memset(&d, 0, sizeof d);
        cudnnHandle_t h = NULL;
        choice cand[MAX_ALGOS], best;
        int ncand = 0;
        cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
        if ((s = descs_make(&x, &k, &d))) goto release;
        if ((s = cu_dnn_handle_get(dev, &h, x.what))) goto release;
        if ((st = heuristic(h, dir, &d, cand, &ncand)) != CUDNN_STATUS_SUCCESS) {
            s = dnn_fail(&x, st, "choosing an algorithm");
            goto release;
        }
        if (ncand == 0) {
            s = cu_fail(TC_ERR_UNSUPPORTED, "%s: cuDNN has no algorithm for this configuration", x.what);
            goto release;
        }
        /* Find writes the result side: before the bias goes in */
        if (cu_cudnn_benchmark && benchmark(dev, h, &k, &d, &b, cand, ncand, &best)) {
            memmove(cand + 1, cand, sizeof(choice) * (size_t)(ncand < MAX_ALGOS ? ncand : MAX_ALGOS - 1));
            cand[0] = best;
            if (ncand < MAX_ALGOS) ncand++;
        }
        if (bias && (s = fill_bias(&res, bias, x.op))) goto release;
        /* the first candidate that runs with a workspace we can get */
        s = TC_ERR_UNSUPPORTED;
        for (int i = 0; i < ncand; i++) {
            size_t wsb = 0;
            void *ws = NULL;
            if ((st = cudnnSetConvolutionMathType(d.conv, use_math(&k, cand[i]))) != CUDNN_STATUS_SUCCESS ||
                (st = ws_size(h, dir, &d, cand[i].algo, &wsb)) != CUDNN_STATUS_SUCCESS) {
                s = dnn_fail(&x, st, "workspace size");
                continue;
            }
            if (wsb > 0 && (s = cu_scratch_alloc(dev, wsb, &ws)) != TC_OK) continue;
            st = execute(h, dir, &d, &b, cand[i].algo, ws, wsb, dt == TC_F64, bias ? 1.0 : 0.0);
            if (ws) cu_scratch_free(dev, ws);
            s = st == CUDNN_STATUS_SUCCESS ? TC_OK : dnn_fail(&x, st, "convolution");
            int cat = CUDNN_STATUS_CATEGORY((int)st);
            if (!s || (cat != CUDNN_STATUS_BAD_PARAM && cat != CUDNN_STATUS_NOT_SUPPORTED)) break;
        }
        if (!s) s = cu_check(cudaGetLastError(), x.what);
    release:
        if (h) cu_dnn_handle_put(dev, h);
        descs_free(&d);
    }
    if (!s && otmp) s = cu_strided_copy(out, &res, x.op);
done:
    for (int i = 0; i < 2; i++)
        if (tmp[i]) cu_scratch_free(dev, tmp[i]);
    if (otmp) cu_scratch_free(dev, otmp);
    return s;
}
