/* dnn_select.h -- which softmax / log_softmax and pooling calls the CUDA backend hands to
 * cuDNN (dnn_softmax.cu, dnn_pool.cu) instead of its own kernels (softmax.cu, pool.cu).
 *
 * The decision is plain C11 that nvcc also compiles (as cu_elem.h): the .cu files cannot
 * run without a GPU, but these rules can, so tests/c/test_cuda_dnn_select.c checks each of
 * them on the host. A call is taken only where cuDNN computes exactly the op's semantics:
 *   - the switch TC_CUDA_FLAG_CUDNN (torch.backends.cudnn.enabled) is on;
 *   - softmax / log_softmax and their backward ops (cudnnSoftmaxBackward on (gradOutput,
 *     output)): any dim, as the NCHW tensor (outer, dim, inner, 1) in
 *     CUDNN_SOFTMAX_MODE_CHANNEL (not the causal softmax or its backward: cuDNN's has no
 *     mask, and our causal backward reads half of what cuDNN's would); avg_pool2d and
 *     avg_pool2d_backward: 3-D (C,H,W) or 4-D (N,C,H,W) planes. Max pooling stays with our kernels: the op returns argmax indices
 *     (Torch7 / PyTorch) that cuDNN's pooling does not produce, and cuDNN's max backward
 *     works from (x, y, dy), not from indices. Adaptive pooling has uneven windows, which
 *     a cuDNN pooling descriptor (one window, one stride) cannot express;
 *   - float32, float64, float16, bfloat16 (cuDNN refusing one at run time also falls back);
 *   - contiguous (row-major dense) input and output, not the same memory (cuDNN does not
 *     promise in-place softmax), every size and the element count within cuDNN's int;
 *   - pooling: the pooled size is cuDNN's 1 + (H + 2p - k) / s on both axes. ceil_mode
 *     that adds a window gives a larger size and stays with our kernel (its last window,
 *     clipped, has PyTorch's own divisor); ceil_mode that adds none is the same pooling.
 *     Without an extra window every window lies inside the padded plane, so
 *     count_include_pad's divisor is kH*kW (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING)
 *     and the other divisor the in-plane count (..._EXCLUDE_PADDING), as in PyTorch.
 *     (avg_pool2d has no dilation, which cuDNN's pooling lacks; max_pool2d's is moot.)
 * Anything else answers a reason other than CU_DNN_TAKE and runs our kernel; so does a
 * configuration cuDNN itself refuses (its BAD_PARAM / NOT_SUPPORTED statuses).
 */
#ifndef TC_CUDA_DNN_SELECT_H
#define TC_CUDA_DNN_SELECT_H

#include "cuda_api.h"
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Why a call does (CU_DNN_TAKE) or does not go to cuDNN. */
typedef enum cu_dnn_pick {
    CU_DNN_TAKE = 0,
    CU_DNN_OFF,      /* TC_CUDA_FLAG_CUDNN is off */
    CU_DNN_OP,       /* no cuDNN form: max pooling (indices), adaptive pooling, other ops */
    CU_DNN_DTYPE,    /* not a float type */
    CU_DNN_EMPTY,    /* nothing to compute (our launcher returns at once) */
    CU_DNN_ARG,      /* a call our launcher rejects with its own message (bad dim, rank) */
    CU_DNN_LAYOUT,   /* input or output not contiguous, or in place */
    CU_DNN_SIZE,     /* a size or an element count beyond int */
    CU_DNN_GEOMETRY, /* the pooled size is not cuDNN's floor formula (ceil_mode's extra window) */
} cu_dnn_pick;

/* softmax / log_softmax (backward: their backward ops) as the NCHW tensor (n, c, h, 1): n
 * lines before dim, c = size of dim, h elements after it; log: CUDNN_SOFTMAX_LOG, else
 * CUDNN_SOFTMAX_ACCURATE. */
typedef struct cu_dnn_softmax_plan {
    int n, c, h;
    bool log, backward;
} cu_dnn_softmax_plan;

/* avg_pool2d (backward: false) and avg_pool2d_backward as NCHW tensors (n, c, h, w) for
 * the plane pooled (the forward's input, the backward's result) and (n, c, ho, wo) for
 * the pooled one; a 3-D (C,H,W) call has n = 1. */
typedef struct cu_dnn_pool_plan {
    int n, c, h, w, ho, wo;
    int kh, kw, sh, sw, ph, pw;
    bool include_pad, backward;
} cu_dnn_pool_plan;

static inline bool cu_dnn_float(int dt) { return dt == TC_F32 || dt == TC_F64 || dt == TC_F16 || dt == TC_BF16; }

/* Row-major dense: each dim's stride is the product of the sizes after it (dims of size 1
 * may have any stride: they are never stepped over). */
static inline bool cu_dnn_contiguous(const tc_cuda_view *v)
{
    int64_t want = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->size[d] != 1 && v->stride[d] != want) return false;
        want *= v->size[d];
    }
    return true;
}

static inline bool cu_dnn_fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

static inline cu_dnn_pick cu_dnn_softmax_pick(bool enabled, const tc_cuda_call *c, cu_dnn_softmax_plan *p)
{
    if (!enabled) return CU_DNN_OFF;
    bool back = c->op == TC_OP_SOFTMAX_BACKWARD || c->op == TC_OP_LOG_SOFTMAX_BACKWARD;
    if (!back && c->op != TC_OP_SOFTMAX && c->op != TC_OP_LOG_SOFTMAX) return CU_DNN_OP;
    /* causal: cuDNN has no mask (and our backward reads only the live half of each row) */
    if ((c->op == TC_OP_SOFTMAX || c->op == TC_OP_SOFTMAX_BACKWARD) && c->params.i[1]) return CU_DNN_OP;
    if (c->nin < (back ? 2 : 1) || c->nout < 1) return CU_DNN_ARG;
    /* x: the input (backward: gradOutput), y: the result, f: the backward's forward output */
    const tc_cuda_view *x = &c->in[0], *y = &c->out[0], *f = back ? &c->in[1] : &c->in[0];
    if (!cu_dnn_float(x->dtype) || y->dtype != x->dtype || f->dtype != x->dtype) return CU_DNN_DTYPE;
    if (x->numel == 0) return CU_DNN_EMPTY;
    int nd = x->ndim > 0 ? x->ndim : 1;
    int64_t dim = c->params.i[0];
    if (dim < 0) dim += nd;
    if (dim < 0 || dim >= nd || y->numel != x->numel || f->numel != x->numel || f->ndim != x->ndim) return CU_DNN_ARG;
    for (int d = 0; d < x->ndim; d++)
        if (f->size[d] != x->size[d]) return CU_DNN_ARG;
    if (!cu_dnn_contiguous(x) || !cu_dnn_contiguous(y) || !cu_dnn_contiguous(f) || x->data == y->data ||
        f->data == y->data)
        return CU_DNN_LAYOUT;
    if (!cu_dnn_fits(x->numel)) return CU_DNN_SIZE;
    int64_t outer = 1, inner = 1, n = x->ndim > 0 ? x->size[dim] : 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < dim) outer *= x->size[d];
        if (d > dim) inner *= x->size[d];
    }
    p->n = (int)outer, p->c = (int)n, p->h = (int)inner; /* each <= numel <= INT_MAX */
    p->log = c->op == TC_OP_LOG_SOFTMAX || c->op == TC_OP_LOG_SOFTMAX_BACKWARD;
    p->backward = back;
    return CU_DNN_TAKE;
}

/* cuDNN's pooled size, floor((in + 2p - k) / s) + 1; -1 when the window does not fit. */
static inline int64_t cu_dnn_pooled(int64_t in, int64_t k, int64_t pad, int64_t s)
{
    int64_t num = in + 2 * pad - k;
    return num < 0 || s < 1 ? -1 : num / s + 1;
}

static inline cu_dnn_pick cu_dnn_pool_pick(bool enabled, const tc_cuda_call *c, cu_dnn_pool_plan *p)
{
    if (!enabled) return CU_DNN_OFF;
    if (c->op != TC_OP_AVG_POOL2D && c->op != TC_OP_AVG_POOL2D_BACKWARD) return CU_DNN_OP;
    if (c->nin < 1 || c->nout < 1) return CU_DNN_ARG;
    const tc_cuda_view *x = &c->in[0], *y = &c->out[0];
    if (!cu_dnn_float(x->dtype) || y->dtype != x->dtype) return CU_DNN_DTYPE;
    if (x->numel == 0 || y->numel == 0) return CU_DNN_EMPTY;
    int nd = x->ndim;
    if ((nd != 3 && nd != 4) || y->ndim != nd) return CU_DNN_ARG;
    if (!cu_dnn_contiguous(x) || !cu_dnn_contiguous(y) || x->data == y->data) return CU_DNN_LAYOUT;
    bool back = c->op == TC_OP_AVG_POOL2D_BACKWARD;
    const tc_cuda_view *big = back ? y : x, *small = back ? x : y; /* the plane pooled, the pooled plane */
    const int64_t *g = c->params.shape; /* kH,kW, sH,sW, pH,pW (ops.def) */
    if (!cu_dnn_fits(x->numel) || !cu_dnn_fits(y->numel)) return CU_DNN_SIZE;
    for (int i = 0; i < 6; i++)
        if (!cu_dnn_fits(g[i])) return CU_DNN_SIZE;
    int64_t H = big->size[nd - 2], W = big->size[nd - 1], Ho = small->size[nd - 2], Wo = small->size[nd - 1];
    if (cu_dnn_pooled(H, g[0], g[4], g[2]) != Ho || cu_dnn_pooled(W, g[1], g[5], g[3]) != Wo)
        return CU_DNN_GEOMETRY;
    p->n = nd == 4 ? (int)big->size[0] : 1;
    p->c = (int)big->size[nd - 3];
    p->h = (int)H, p->w = (int)W, p->ho = (int)Ho, p->wo = (int)Wo;
    p->kh = (int)g[0], p->kw = (int)g[1], p->sh = (int)g[2], p->sw = (int)g[3], p->ph = (int)g[4], p->pw = (int)g[5];
    p->include_pad = c->params.i[1] != 0;
    p->backward = back;
    return CU_DNN_TAKE;
}

/* "(2,3,4)" into buf (messages of the cuDNN paths); "()" for a 0-dim view. */
static inline const char *cu_dnn_sizes(const tc_cuda_view *v, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap == 0) return buf;
    buf[0] = 0;
    n += (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < v->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%lld" : "%lld", (long long)v->size[d]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

#ifdef __CUDACC__
#include "dnn_handle.h"
/* The cuDNN type of a float dtype (cu_dnn_float). */
static inline cudnnDataType_t cu_dnn_type(int dt)
{
    return dt == TC_F64 ? CUDNN_DATA_DOUBLE : dt == TC_F16 ? CUDNN_DATA_HALF : dt == TC_BF16 ? CUDNN_DATA_BFLOAT16
                                                                                           : CUDNN_DATA_FLOAT;
}
/* Whether a cuDNN status refuses the configuration (its BAD_PARAM and NOT_SUPPORTED
 * categories), rather than failing to run it. */
static inline bool cu_dnn_refused(cudnnStatus_t st)
{
    int cat = CUDNN_STATUS_CATEGORY((int)st);
    return cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED;
}
/* TC_CUDA_FLAG_CUDNN as set_flag stored it (blas.cu; on unless turned off). */
CU_HIDDEN extern int cu_cudnn_enabled;
/* The cuDNN paths: *done is true when cuDNN computed the call; false, with TC_OK, when
 * the call is not one cuDNN takes (the pick above, or cuDNN refusing it at run time) and
 * our kernel must run it; any other cuDNN or CUDA failure is returned, its message naming
 * the op, the shapes and the dtype. */
CU_HIDDEN tc_status cu_dnn_softmax(int dev, const tc_cuda_call *c, bool *done); /* dnn_softmax.cu */
CU_HIDDEN tc_status cu_dnn_pool(int dev, const tc_cuda_call *c, bool *done);    /* dnn_pool.cu */
#endif

#endif /* TC_CUDA_DNN_SELECT_H */
