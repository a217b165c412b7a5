/* emu_cudnn.cc -- the CUDA emulator's cuDNN 9 (tests only; emu.h): handles, tensor, filter,
 * convolution and pooling descriptors, the convolutions (forward, backward data, backward
 * filter, their algorithm queries and workspace sizes), batch normalization (training,
 * inference, backward), softmax and pooling, as plain loops over host memory that follow
 * NVIDIA's cuDNN 9 API reference. The RNN and dropout API is in emu_cudnn_rnn.cc.
 *
 * Every call first checks what cuDNN documents (descriptors set and consistent, shapes,
 * types, workspace size) and answers CUDNN_STATUS_BAD_PARAM / NOT_SUPPORTED with an
 * emu::note naming the call and the values; then checks that each tensor's touched extent
 * (through its strides) lies in one live device allocation (emu::device_range); only then
 * it enqueues the computation on the handle's stream (emu::enqueue), capturing every value
 * it needs, so a captured graph computes at replay. Results are computed in double,
 * rounded once to the tensor's type (half / bfloat16 by their bits), and blended as
 * y = alpha * result + beta * y, y not read when beta == 0. All algorithms compute the
 * same thing; their workspace sizes are invented but checked, and the workspace is
 * scribbled over so nothing can rely on its contents.
 */
#include "emu_cudnn_impl.h"
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

using namespace emu_dnn;


namespace emu_dnn {

const char *dims_str(const cudnnTensorStruct &d, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < d.nd && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, i ? ",%d" : "%d", d.dim[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

void run(cudnnHandle_t h, const char *fn, std::function<void()> work)
{
    static const bool trace = getenv("TOCHA_CUDA_EMU_DNN_TRACE") != NULL;
    if (trace) emu::note("%s (handle %p, stream %p)", fn, (void *)h, (void *)h->stream);
    emu::enqueue(h->stream, fn, std::move(work));
}

bool handle_ok(cudnnHandle_t h, const char *fn)
{
    if (h && h->magic == EMU_DNN_MAGIC) return true;
    emu::note("%s: handle %p is not a live cudnnHandle_t", fn, (void *)h);
    return false;
}

bool tensor_ok(const cudnnTensorStruct *t, const char *fn, const char *which)
{
    if (t && t->magic == EMU_DNN_MAGIC && t->set) return true;
    emu::note("%s: %s descriptor %p is %s", fn, which, (const void *)t,
              t && t->magic == EMU_DNN_MAGIC ? "not set" : "not a live tensor descriptor");
    return false;
}

bool tensor_mem_ok(const cudnnTensorStruct &t, const void *p, const char *fn, const char *which)
{
    if (numel(t) == 0) return true;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", fn, which);
    if (!p) {
        emu::note("%s is NULL", what);
        return false;
    }
    return emu::device_range(p, extent_bytes(t), what);
}

} // namespace emu_dnn

/* ---- handles, errors --------------------------------------------------------------------- */

extern "C" const char *cudnnGetErrorString(cudnnStatus_t st)
{
    switch (st) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: break;
    }
    switch (CUDNN_STATUS_CATEGORY((int)st)) {
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM (sub-code)";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED (sub-code)";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR (sub-code)";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED (sub-code)";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

extern "C" cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    if (!h) return BAD("cudnnCreate: handle pointer is NULL");
    /* it allocates device resources and, as cuBLAS's, may not run inside a capture that
     * forbids cudaMalloc (emu.h) */
    *h = nullptr;
    if (emu::capture_forbids("cudnnCreate (allocates device memory)")) return CUDNN_STATUS_INTERNAL_ERROR;
    *h = new cudnnContext{EMU_DNN_MAGIC, (cudaStream_t)0};
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    if (!handle_ok(h, "cudnnDestroy")) return CUDNN_STATUS_BAD_PARAM;
    /* releasing the handle's resources waits for the device, as cublasDestroy does */
    if (emu::device_wait_forbidden("cudnnDestroy (synchronizes the device)")) return CUDNN_STATUS_INTERNAL_ERROR;
    h->magic = 0;
    delete h;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    if (!handle_ok(h, "cudnnSetStream")) return CUDNN_STATUS_BAD_PARAM;
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- tensor and filter descriptors ------------------------------------------------------------- */

extern "C" cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    return create_desc(d, "cudnnCreateTensorDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyTensorDescriptor");
}
extern "C" cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    return create_desc(d, "cudnnCreateFilterDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyFilterDescriptor");
}
extern "C" cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    cudnnStatus_t st = create_desc(d, "cudnnCreateConvolutionDescriptor");
    if (st == CUDNN_STATUS_SUCCESS) (*d)->groups = 1, (*d)->math = CUDNN_DEFAULT_MATH;
    return st;
}
extern "C" cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyConvolutionDescriptor");
}
static cudnnStatus_t emu_cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nb,
                                                    const int dimA[], const int strideA[])
{
    const char *fn = "cudnnSetTensorNdDescriptor";
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live tensor descriptor", fn, (void *)d);
    if (nb > CUDNN_DIM_MAX) return UNSUP("%s: nbDims %d > CUDNN_DIM_MAX", fn, nb);
    if (nb < 1 || !dimA || !strideA) return BAD("%s: nbDims %d (or NULL arrays)", fn, nb);
    if (!elsize(t)) return UNSUP("%s: data type %d is not emulated", fn, (int)t);
    for (int i = 0; i < nb; i++)
        if (dimA[i] <= 0 || strideA[i] <= 0)
            return BAD("%s: dim %d is %d, stride %d (both must be > 0)", fn, i, dimA[i], strideA[i]);
    int64_t extent = 1;
    for (int i = 0; i < nb; i++) extent += (int64_t)(dimA[i] - 1) * strideA[i];
    if (extent * (int64_t)elsize(t) > ((int64_t)1 << 31)) return UNSUP("%s: tensor spans more than 2 GiB", fn);
    d->set = true, d->dt = t, d->nd = nb;
    for (int i = 0; i < nb; i++) d->dim[i] = dimA[i], d->stride[i] = strideA[i];
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nb,
                                                    const int dimA[], const int strideA[])
{
    return second_opinion("cudnnSetTensorNdDescriptor", emu_cudnnSetTensorNdDescriptor(d, t, nb, dimA, strideA),
                          [&](const real_cudnn &r) { return real_set_tensor_nd(r, t, nb, dimA, strideA); });
}

static cudnnStatus_t emu_cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f,
                                                    cudnnDataType_t t, int n, int c, int h, int w)
{
    const char *fn = "cudnnSetTensor4dDescriptor";
    int dims[4] = {n, c, h, w}, st[4];
    if (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC)
        return UNSUP("%s: format %d (only NCHW and NHWC are emulated)", fn, (int)f);
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return BAD("%s: dims (%d,%d,%d,%d) must be > 0", fn, n, c, h, w);
    if ((int64_t)c * h * w > INT_MAX) /* the strides are ints */
        return UNSUP("%s: dims (%d,%d,%d,%d): a stride beyond int", fn, n, c, h, w);
    if (f == CUDNN_TENSOR_NCHW) st[3] = 1, st[2] = w, st[1] = h * w, st[0] = c * h * w;
    else st[1] = 1, st[3] = c, st[2] = w * c, st[0] = h * w * c;
    return emu_cudnnSetTensorNdDescriptor(d, t, 4, dims, st);
}
extern "C" cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f,
                                                    cudnnDataType_t t, int n, int c, int h, int w)
{
    return second_opinion("cudnnSetTensor4dDescriptor", emu_cudnnSetTensor4dDescriptor(d, f, t, n, c, h, w),
                          [&](const real_cudnn &r) { return real_set_tensor_4d(r, f, t, n, c, h, w); });
}

static cudnnStatus_t emu_cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                                    cudnnTensorFormat_t f, int k, int c, int h, int w)
{
    const char *fn = "cudnnSetFilter4dDescriptor";
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live filter descriptor", fn, (void *)d);
    if (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC) return UNSUP("%s: format %d", fn, (int)f);
    if (!elsize(t)) return UNSUP("%s: data type %d is not emulated", fn, (int)t);
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return BAD("%s: dims (%d,%d,%d,%d) must be > 0", fn, k, c, h, w);
    d->set = true, d->dt = t, d->fmt = f, d->nd = 4;
    d->dim[0] = k, d->dim[1] = c, d->dim[2] = h, d->dim[3] = w;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                                    cudnnTensorFormat_t f, int k, int c, int h, int w)
{
    return second_opinion("cudnnSetFilter4dDescriptor", emu_cudnnSetFilter4dDescriptor(d, t, f, k, c, h, w),
                          [&](const real_cudnn &r) { return real_set_filter_4d(r, t, f, k, c, h, w); });
}

/* A filter as a tensor with its format's packed strides (k, c, h, w order). */
static cudnnTensorStruct filter_tensor(const cudnnFilterStruct &f)
{
    cudnnTensorStruct t;
    memset(&t, 0, sizeof t);
    t.magic = EMU_DNN_MAGIC, t.set = true, t.dt = f.dt, t.nd = 4;
    int k = f.dim[0], c = f.dim[1], h = f.dim[2], w = f.dim[3];
    (void)k;
    for (int i = 0; i < 4; i++) t.dim[i] = f.dim[i];
    if (f.fmt == CUDNN_TENSOR_NHWC) t.stride[1] = 1, t.stride[3] = c, t.stride[2] = w * c, t.stride[0] = h * w * c;
    else t.stride[3] = 1, t.stride[2] = w, t.stride[1] = h * w, t.stride[0] = c * h * w;
    return t;
}

/* ---- convolution descriptor ------------------------------------------------------------------- */

static cudnnStatus_t emu_cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u,
                                                         int v, int dh, int dw, cudnnConvolutionMode_t mode,
                                                         cudnnDataType_t ct)
{
    const char *fn = "cudnnSetConvolution2dDescriptor";
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live convolution descriptor", fn, (void *)d);
    if (ph < 0 || pw < 0 || u <= 0 || v <= 0 || dh <= 0 || dw <= 0)
        return BAD("%s: padding %dx%d stride %dx%d dilation %dx%d", fn, ph, pw, u, v, dh, dw);
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return BAD("%s: mode %d", fn, (int)mode);
    if (!elsize(ct)) return BAD("%s: compute type %d", fn, (int)ct);
    d->set = true, d->pad[0] = ph, d->pad[1] = pw, d->str[0] = u, d->str[1] = v, d->dil[0] = dh, d->dil[1] = dw;
    d->mode = mode, d->compute = ct;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u,
                                                         int v, int dh, int dw, cudnnConvolutionMode_t mode,
                                                         cudnnDataType_t ct)
{
    cudnnConvolutionStruct cv{};
    cv.pad[0] = ph, cv.pad[1] = pw, cv.str[0] = u, cv.str[1] = v, cv.dil[0] = dh, cv.dil[1] = dw, cv.mode = mode;
    cv.compute = ct;
    return second_opinion("cudnnSetConvolution2dDescriptor", emu_cudnnSetConvolution2dDescriptor(d, ph, pw, u, v, dh, dw, mode, ct),
                          [&](const real_cudnn &r) { return real_set_conv_2d(r, cv); });
}

static cudnnStatus_t emu_cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("cudnnSetConvolutionGroupCount: %p is not live", (void *)d);
    if (g < 1) return BAD("cudnnSetConvolutionGroupCount: groupCount %d", g);
    d->groups = g;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
    return second_opinion("cudnnSetConvolutionGroupCount", emu_cudnnSetConvolutionGroupCount(d, g),
                          [&](const real_cudnn &r) { return real_set_conv_groups(r, g); });
}

static cudnnStatus_t emu_cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("cudnnSetConvolutionMathType: %p is not live", (void *)d);
    if (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
        m != CUDNN_FMA_MATH)
        return BAD("cudnnSetConvolutionMathType: math type %d", (int)m);
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    return second_opinion("cudnnSetConvolutionMathType", emu_cudnnSetConvolutionMathType(d, m),
                          [&](const real_cudnn &r) { return real_set_conv_math(r, m); });
}

/* The convolution's geometry: x (N,C,H,W), filter (K,C/G,R,S), y (N,K,P,Q). */
struct conv_geom {
    cudnnTensorStruct x, y, w; /* w: the filter as a packed tensor */
    cudnnConvolutionStruct cv;
    int N, C, H, W, K, Cg, R, S, P, Q, G;
};

static cudnnStatus_t out_dims(const char *fn, const cudnnConvolutionStruct *cv, const cudnnTensorStruct *x,
                              const cudnnFilterStruct *f, int *P, int *Q)
{
    if (!cv || cv->magic != EMU_DNN_MAGIC || !cv->set) return BAD("%s: convolution descriptor not set", fn);
    if (!tensor_ok(x, fn, "input")) return CUDNN_STATUS_BAD_PARAM;
    if (!f || f->magic != EMU_DNN_MAGIC || !f->set) return BAD("%s: filter descriptor not set", fn);
    if (x->nd != 4 || f->nd != 4) return BAD("%s: %d-D input / %d-D filter for a 2-D convolution", fn, x->nd, f->nd);
    if (x->dim[1] != f->dim[1] * cv->groups)
        return BAD("%s: input has %d channels, filter %d per group x %d groups", fn, x->dim[1], f->dim[1], cv->groups);
    if (f->dim[0] % cv->groups) return BAD("%s: %d filters do not split into %d groups", fn, f->dim[0], cv->groups);
    int eh = (f->dim[2] - 1) * cv->dil[0] + 1, ew = (f->dim[3] - 1) * cv->dil[1] + 1;
    int ih = x->dim[2] + 2 * cv->pad[0], iw = x->dim[3] + 2 * cv->pad[1];
    if (eh > ih || ew > iw)
        return BAD("%s: dilated filter %dx%d is larger than the padded input %dx%d", fn, eh, ew, ih, iw);
    *P = 1 + (ih - eh) / cv->str[0], *Q = 1 + (iw - ew) / cv->str[1];
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t emu_cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cv,
                                                               const cudnnTensorDescriptor_t x,
                                                               const cudnnFilterDescriptor_t f, int *n, int *c, int *h,
                                                               int *w)
{
    int P, Q;
    cudnnStatus_t st = out_dims("cudnnGetConvolution2dForwardOutputDim", cv, x, f, &P, &Q);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!n || !c || !h || !w) return BAD("cudnnGetConvolution2dForwardOutputDim: NULL result pointer");
    *n = x->dim[0], *c = f->dim[0], *h = P, *w = Q;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cv,
                                                               const cudnnTensorDescriptor_t x,
                                                               const cudnnFilterDescriptor_t f, int *n, int *c, int *h,
                                                               int *w)
{
    const char *fn = "cudnnGetConvolution2dForwardOutputDim";
    cudnnStatus_t st = emu_cudnnGetConvolution2dForwardOutputDim(cv, x, f, n, c, h, w);
    if (st != CUDNN_STATUS_SUCCESS) return st; /* its descriptors are not all set: nothing to ask */
    int dims[4] = {*n, *c, *h, *w};
    st = second_opinion_conv_dims(fn, st, *cv, *x, *f, dims);
    *n = dims[0], *c = dims[1], *h = dims[2], *w = dims[3];
    return st;
}

/* Every check a convolution call makes on its descriptors (fn names it). */
static cudnnStatus_t conv_check(const char *fn, const cudnnTensorStruct *x, const cudnnFilterStruct *f,
                                const cudnnConvolutionStruct *cv, const cudnnTensorStruct *y, conv_geom *g)
{
    int P, Q;
    cudnnStatus_t st = out_dims(fn, cv, x, f, &P, &Q);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!tensor_ok(y, fn, "output")) return CUDNN_STATUS_BAD_PARAM;
    char a[64], b[64];
    if (y->nd != 4 || y->dim[0] != x->dim[0] || y->dim[1] != f->dim[0] || y->dim[2] != P || y->dim[3] != Q)
        return BAD("%s: output %s, but input %s with filter (%d,%d,%d,%d) gives (%d,%d,%d,%d)", fn,
                   dims_str(*y, a, sizeof a), dims_str(*x, b, sizeof b), f->dim[0], f->dim[1], f->dim[2], f->dim[3],
                   x->dim[0], f->dim[0], P, Q);
    if (x->dt != y->dt || x->dt != f->dt)
        return BAD("%s: input %s, filter %s, output %s: the types must agree", fn, type_name(x->dt),
                   type_name(f->dt), type_name(y->dt));
    cudnnDataType_t t = x->dt, ct = cv->compute;
    bool ok = t == CUDNN_DATA_DOUBLE ? ct == CUDNN_DATA_DOUBLE
              : t == CUDNN_DATA_FLOAT ? ct == CUDNN_DATA_FLOAT
              : t == CUDNN_DATA_HALF ? (ct == CUDNN_DATA_FLOAT || ct == CUDNN_DATA_HALF)
              : t == CUDNN_DATA_BFLOAT16 ? ct == CUDNN_DATA_FLOAT
                                         : false;
    if (!ok) return UNSUP("%s: %s data with %s compute type is not a supported configuration", fn, type_name(t),
                          type_name(ct));
    g->x = *x, g->y = *y, g->w = filter_tensor(*f), g->cv = *cv;
    g->N = x->dim[0], g->C = x->dim[1], g->H = x->dim[2], g->W = x->dim[3];
    g->K = f->dim[0], g->Cg = f->dim[1], g->R = f->dim[2], g->S = f->dim[3], g->P = P, g->Q = Q, g->G = cv->groups;
    return CUDNN_STATUS_SUCCESS;
}

enum { C_FWD, C_BWD_DATA, C_BWD_FILTER };

/* Tensor t's elements as dense doubles in logical row-major order (the inputs are read
 * once, through their strides, before the loops). */
static std::vector<double> dense(const cudnnTensorStruct &t, const void *p)
{
    std::vector<double> v((size_t)numel(t));
    for (size_t i = 0; i < v.size(); i++) v[i] = load(t.dt, p, offset_of(t, (int64_t)i));
    return v;
}

/* The result of direction dir, in double, logical row-major over its tensor (y, x or the
 * filter): y[n,k,p,q] = sum over the group's channels c and the taps (r, s) of
 * x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw] * w[k, c, r', s'] (r' = r for
 * cross-correlation, R-1-r for convolution); the backward directions are its adjoints. */
static void conv_compute(int dir, const conv_geom &g, const void *xp, const void *wp, const void *yp,
                         std::vector<double> &acc)
{
    int Kg = g.K / g.G;
    bool flip = g.cv.mode == CUDNN_CONVOLUTION;
    std::vector<double> X, Wt, Y;
    if (dir != C_BWD_DATA) X = dense(g.x, xp);
    if (dir != C_BWD_FILTER) Wt = dense(g.w, wp);
    if (dir != C_FWD) Y = dense(g.y, yp);
    acc.assign((size_t)(dir == C_FWD ? numel(g.y) : dir == C_BWD_DATA ? numel(g.x) : numel(g.w)), 0.0);
    for (int n = 0; n < g.N; n++)
        for (int k = 0; k < g.K; k++) {
            int grp = k / Kg;
            for (int p = 0; p < g.P; p++)
                for (int q = 0; q < g.Q; q++) {
                    size_t yl = (((size_t)n * g.K + k) * g.P + p) * g.Q + q;
                    double dy = dir == C_FWD ? 0 : Y[yl], sum = 0;
                    for (int c = 0; c < g.Cg; c++) {
                        int ch = grp * g.Cg + c;
                        for (int r = 0; r < g.R; r++) {
                            int ih = p * g.cv.str[0] - g.cv.pad[0] + r * g.cv.dil[0];
                            if (ih < 0 || ih >= g.H) continue;
                            int fr = flip ? g.R - 1 - r : r;
                            size_t xrow = (((size_t)n * g.C + ch) * g.H + ih) * g.W;
                            size_t wrow = (((size_t)k * g.Cg + c) * g.R + fr) * g.S;
                            for (int s = 0; s < g.S; s++) {
                                int iw = q * g.cv.str[1] - g.cv.pad[1] + s * g.cv.dil[1];
                                if (iw < 0 || iw >= g.W) continue;
                                size_t xl = xrow + (size_t)iw, wl = wrow + (size_t)(flip ? g.S - 1 - s : s);
                                if (dir == C_FWD) sum += X[xl] * Wt[wl];
                                else if (dir == C_BWD_DATA) acc[xl] += Wt[wl] * dy;
                                else acc[wl] += X[xl] * dy;
                            }
                        }
                    }
                    if (dir == C_FWD) acc[yl] = sum;
                }
        }
}

/* The algorithms offered per direction, the heuristic's order, and their workspaces. */
static const int fwd_algos[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                CUDNN_CONVOLUTION_FWD_ALGO_GEMM};
static const int bwd_data_algos[] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
static const int bwd_filter_algos[] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3};

static const int *algo_list(int dir, int *n)
{
    if (dir == C_FWD) return *n = 3, fwd_algos;
    if (dir == C_BWD_DATA) return *n = 2, bwd_data_algos;
    return *n = 3, bwd_filter_algos;
}

/* Workspace of algo for g; false when the direction does not offer algo. */
static bool algo_ws(int dir, int algo, const conv_geom &g, size_t *bytes)
{
    size_t es = elsize(g.x.dt), tab = (size_t)g.Cg * g.R * g.S * sizeof(int);
    int n;
    const int *l = algo_list(dir, &n);
    if (std::find(l, l + n, algo) == l + n) return false;
    *bytes = 0;
    if (dir == C_FWD && algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) *bytes = tab;
    if (dir == C_FWD && algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM) *bytes = tab * g.P * g.Q / sizeof(int) * es;
    if (dir == C_BWD_DATA && algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1) *bytes = tab;
    if (dir == C_BWD_FILTER && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1) *bytes = tab;
    if (dir == C_BWD_FILTER && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3) *bytes = (size_t)g.K * 16;
    return true;
}

static const char *conv_fn[] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                "cudnnConvolutionBackwardFilter"};

/* Checks the memory and enqueues one direction: res = alpha * conv + beta * res. */
static cudnnStatus_t conv_run(const char *fn, cudnnHandle_t h, int dir, const conv_geom &g, int algo, const void *xp,
                              const void *wp, const void *yp, void *res, void *ws, size_t wsb, double alpha,
                              double beta)
{
    size_t need;
    if (!algo_ws(dir, algo, g, &need)) return UNSUP("%s: algorithm %d is not offered for this convolution", fn, algo);
    if (wsb < need) return BAD("%s: workspace of %zu bytes, algorithm %d needs %zu", fn, wsb, algo, need);
    if (need > 0 && !ws) return BAD("%s: workspace pointer is NULL, %zu bytes needed", fn, need);
    if (wsb > 0 && ws && !emu::device_range(ws, wsb, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (!tensor_mem_ok(g.x, dir == C_BWD_DATA ? res : xp, fn, dir == C_BWD_DATA ? "dx" : "x") ||
        !tensor_mem_ok(g.w, dir == C_BWD_FILTER ? res : wp, fn, dir == C_BWD_FILTER ? "dw" : "w") ||
        !tensor_mem_ok(g.y, dir == C_FWD ? res : yp, fn, dir == C_FWD ? "y" : "dy"))
        return CUDNN_STATUS_BAD_PARAM;
    static const char *const math_name[] = {"DEFAULT", "TENSOR_OP", "ALLOW_CONVERSION", "FMA"};
    char counted[96];
    snprintf(counted, sizeof counted, "cudnn convolution, math %s", math_name[g.cv.math]); /* for tests */
    emu::count_call(counted);
    run(h, fn, [=]() {
        std::vector<double> acc;
        conv_compute(dir, g, xp, wp, yp, acc);
        const cudnnTensorStruct &R = dir == C_FWD ? g.y : dir == C_BWD_DATA ? g.x : g.w;
        for (size_t i = 0; i < acc.size(); i++) blend(R.dt, res, offset_of(R, (int64_t)i), acc[i], alpha, beta);
        if (ws && need) memset(ws, 0xa5, need); /* nobody may rely on the workspace */
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                                 const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                                 const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,
                                                 void *ws, size_t wsb, const void *beta,
                                                 const cudnnTensorDescriptor_t yd, void *y)
{
    const char *fn = conv_fn[C_FWD];
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, xd, wd, cd, yd, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    return conv_run(fn, h, C_FWD, g, algo, x, w, NULL, y, ws, wsb, scalar(g.x.dt, alpha), scalar(g.x.dt, beta));
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                                      const cudnnFilterDescriptor_t wd, const void *w,
                                                      const cudnnTensorDescriptor_t dyd, const void *dy,
                                                      const cudnnConvolutionDescriptor_t cd,
                                                      cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t wsb,
                                                      const void *beta, const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *fn = conv_fn[C_BWD_DATA];
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, dxd, wd, cd, dyd, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    return conv_run(fn, h, C_BWD_DATA, g, algo, NULL, w, dy, dx, ws, wsb, scalar(g.x.dt, alpha), scalar(g.x.dt, beta));
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                                        const cudnnTensorDescriptor_t xd, const void *x,
                                                        const cudnnTensorDescriptor_t dyd, const void *dy,
                                                        const cudnnConvolutionDescriptor_t cd,
                                                        cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t wsb,
                                                        const void *beta, const cudnnFilterDescriptor_t dwd, void *dw)
{
    const char *fn = conv_fn[C_BWD_FILTER];
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, xd, dwd, cd, dyd, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    return conv_run(fn, h, C_BWD_FILTER, g, algo, x, NULL, dy, dw, ws, wsb, scalar(g.x.dt, alpha),
                    scalar(g.x.dt, beta));
}

/* ---- algorithm queries ------------------------------------------------------------------------- */

/* The math type an algorithm is listed with. cuDNN lists tensor-core versions of algorithms
 * with their own math type, which the caller must set on the descriptor to run that
 * version; the emulator's listing: FMA under an FMA descriptor, DEFAULT for double,
 * TENSOR_OP for the half types, and for float TENSOR_OP except the first algorithm of the
 * list, listed with ..._ALLOW_CONVERSION (down-conversion to half, which a caller wanting
 * float32 must not take) -- so tests see that the caller sets the type it may use. */
static cudnnMathType_t listed_math(const conv_geom &g, int index)
{
    if (g.cv.math == CUDNN_FMA_MATH) return CUDNN_FMA_MATH;
    if (g.x.dt == CUDNN_DATA_DOUBLE) return CUDNN_DEFAULT_MATH;
    if (g.x.dt != CUDNN_DATA_FLOAT) return CUDNN_TENSOR_OP_MATH;
    return index == 0 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_TENSOR_OP_MATH;
}

template <class Perf, class Algo>
static void fill_perf(Perf *p, int algo, cudnnStatus_t st, float ms, size_t mem, int dir, const conv_geom &g, int index)
{
    memset(p, 0, sizeof *p);
    p->algo = (Algo)algo, p->status = st, p->time = ms, p->memory = mem;
    bool atomic = (dir == C_BWD_DATA && algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) ||
                  (dir == C_BWD_FILTER && (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
                                           algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3));
    p->determinism = atomic ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
    p->mathType = listed_math(g, index);
}

/* Get*_v7: every offered algorithm, in preference order, status success, time -1. */
template <class Perf, class Algo>
static cudnnStatus_t get_v7(const char *fn, int dir, const conv_geom &g, int req, int *ret, Perf *perf)
{
    if (req <= 0 || !ret || !perf) return BAD("%s: requestedAlgoCount %d (or NULL results)", fn, req);
    int n;
    const int *l = algo_list(dir, &n);
    *ret = std::min(req, n);
    for (int i = 0; i < *ret; i++) {
        size_t ws = 0;
        algo_ws(dir, l[i], g, &ws);
        fill_perf<Perf, Algo>(&perf[i], l[i], CUDNN_STATUS_SUCCESS, -1.0f, ws, dir, g, i);
    }
    return CUDNN_STATUS_SUCCESS;
}

/* Find*Ex: runs every offered algorithm on the caller's buffers (the result is
 * overwritten, alpha 1 beta 0), fixed times 0.1 ms, 0.2 ms, ... in preference order; one
 * whose workspace exceeds the one given is reported with an allocation-failure status. */
template <class Perf, class Algo>
static cudnnStatus_t find_ex(const char *fn, cudnnHandle_t h, int dir, const conv_geom &g, const void *xp,
                             const void *wp, const void *yp, void *res, int req, int *ret, Perf *perf, void *ws,
                             size_t wsb)
{
    if (req <= 0 || !ret || !perf) return BAD("%s: requestedAlgoCount %d (or NULL results)", fn, req);
    int n;
    const int *l = algo_list(dir, &n);
    std::vector<Perf> ok, failed;
    for (int i = 0; i < n; i++) {
        size_t need = 0;
        algo_ws(dir, l[i], g, &need);
        Perf p;
        if (need > wsb) {
            fill_perf<Perf, Algo>(&p, l[i], CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, -1.0f, need, dir, g, i);
            failed.push_back(p);
            continue;
        }
        cudnnStatus_t st = conv_run(fn, h, dir, g, l[i], xp, wp, yp, res, ws, wsb, 1.0, 0.0);
        if (st != CUDNN_STATUS_SUCCESS) return st; /* the buffers themselves are wrong */
        fill_perf<Perf, Algo>(&p, l[i], CUDNN_STATUS_SUCCESS, 0.1f * (float)(i + 1), need, dir, g, i);
        ok.push_back(p);
    }
    ok.insert(ok.end(), failed.begin(), failed.end());
    *ret = std::min(req, (int)ok.size());
    for (int i = 0; i < *ret; i++) perf[i] = ok[(size_t)i];
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                                const cudnnFilterDescriptor_t wd,
                                                                const cudnnConvolutionDescriptor_t cd,
                                                                const cudnnTensorDescriptor_t yd, const int req,
                                                                int *ret, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    const char *fn = "cudnnGetConvolutionForwardAlgorithm_v7";
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, xd, wd, cd, yd, &g);
    return st ? st : get_v7<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(fn, C_FWD, g, req, ret, perf);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t wd,
                                                                     const cudnnTensorDescriptor_t dyd,
                                                                     const cudnnConvolutionDescriptor_t cd,
                                                                     const cudnnTensorDescriptor_t dxd, const int req,
                                                                     int *ret, cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    const char *fn = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, dxd, wd, cd, dyd, &g);
    return st ? st
              : get_v7<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(fn, C_BWD_DATA, g, req, ret,
                                                                                         perf);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd, const int req, int *ret,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    const char *fn = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, xd, dwd, cd, dyd, &g);
    return st ? st
              : get_v7<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(fn, C_BWD_FILTER, g, req,
                                                                                             ret, perf);
}

extern "C" cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x, const cudnnFilterDescriptor_t wd, const void *w,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t yd, void *y, const int req, int *ret,
    cudnnConvolutionFwdAlgoPerf_t *perf, void *ws, size_t wsb)
{
    const char *fn = "cudnnFindConvolutionForwardAlgorithmEx";
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, xd, wd, cd, yd, &g);
    return st ? st
              : find_ex<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(fn, h, C_FWD, g, x, w, NULL, y, req,
                                                                                  ret, perf, ws, wsb);
}

extern "C" cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const void *w, const cudnnTensorDescriptor_t dyd, const void *dy,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dxd, void *dx, const int req, int *ret,
    cudnnConvolutionBwdDataAlgoPerf_t *perf, void *ws, size_t wsb)
{
    const char *fn = "cudnnFindConvolutionBackwardDataAlgorithmEx";
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, dxd, wd, cd, dyd, &g);
    return st ? st
              : find_ex<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
                    fn, h, C_BWD_DATA, g, NULL, w, dy, dx, req, ret, perf, ws, wsb);
}

extern "C" cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd, void *dw, const int req, int *ret,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf, void *ws, size_t wsb)
{
    const char *fn = "cudnnFindConvolutionBackwardFilterAlgorithmEx";
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, xd, dwd, cd, dyd, &g);
    return st ? st
              : find_ex<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
                    fn, h, C_BWD_FILTER, g, x, NULL, dy, dw, req, ret, perf, ws, wsb);
}

static cudnnStatus_t ws_query(const char *fn, cudnnHandle_t h, int dir, const cudnnTensorStruct *x,
                              const cudnnFilterStruct *f, const cudnnConvolutionStruct *cv, const cudnnTensorStruct *y,
                              int algo, size_t *bytes)
{
    conv_geom g;
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_check(fn, x, f, cv, y, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bytes) return BAD("%s: sizeInBytes is NULL", fn);
    if (!algo_ws(dir, algo, g, bytes)) return UNSUP("%s: algorithm %d is not offered for this convolution", fn, algo);
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                                 const cudnnFilterDescriptor_t wd,
                                                                 const cudnnConvolutionDescriptor_t cd,
                                                                 const cudnnTensorDescriptor_t yd,
                                                                 cudnnConvolutionFwdAlgo_t algo, size_t *bytes)
{
    return ws_query("cudnnGetConvolutionForwardWorkspaceSize", h, C_FWD, xd, wd, cd, yd, (int)algo, bytes);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t wd,
                                                                      const cudnnTensorDescriptor_t dyd,
                                                                      const cudnnConvolutionDescriptor_t cd,
                                                                      const cudnnTensorDescriptor_t dxd,
                                                                      cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    return ws_query("cudnnGetConvolutionBackwardDataWorkspaceSize", h, C_BWD_DATA, dxd, wd, cd, dyd, (int)algo, bytes);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t *bytes)
{
    return ws_query("cudnnGetConvolutionBackwardFilterWorkspaceSize", h, C_BWD_FILTER, xd, dwd, cd, dyd, (int)algo,
                    bytes);
}

