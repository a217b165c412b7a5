/* pool.cu -- pooling on the device: max_pool2d (values + int64 indices), avg_pool2d and
 * its backward, adaptive_avg_pool2d and its backward, adaptive_max_pool2d.
 *
 * Direct kernels, one thread per result element, with the element math of pool_geom.h
 * (shared with a host test against the CPU kernels): cuDNN gives no indices and its
 * average-pooling divisor rules are not PyTorch's ceil_mode ones, so values and indices
 * here match core/cpu/pool.c exactly instead. Every leading dim is a plane index ((N,C,H,W)
 * is N*C planes); views are read and written through their strides, so no copies. The
 * backward ops gather, per input element, the terms the CPU scatter-adds (same order, no
 * atomics). f16/bf16 compute in float and round at the store, as the CPU does.
 * ops.cu gives avg_pool2d and its backward to cuDNN first (dnn_pool.cu) where dnn_select.h
 * says cuDNN computes them exactly and torch.backends.cudnn.enabled is on (no ceil_mode
 * window past the padded plane, contiguous); these kernels run every other call.
 */
#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define POOL_FN __device__ __forceinline__
#include "pool_geom.h"

__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ double widen(double v) { return v; }
__device__ __forceinline__ void store(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(double *p, double v) { *p = v; }

/* A view's planes: plane p starts at (p / inner) * s0 + (p % inner) * s1 (3-D views: inner
 * 1, s1 0); element (h, w) of a plane at h * sh + w * sw. */
struct pview {
    char *p;
    int64_t inner, s0, s1, sh, sw;
};

static pview pview_of(const tc_cuda_view *v)
{
    int nd = v->ndim;
    pview r = {(char *)v->data, 1, v->stride[0], 0, v->stride[nd - 2], v->stride[nd - 1]};
    if (nd == 4) r.inner = v->size[1], r.s1 = v->stride[1];
    return r;
}

__device__ __forceinline__ int64_t plane_at(const pview &v, int64_t p) { return (p / v.inner) * v.s0 + (p % v.inner) * v.s1; }

/* Loads element (h, w) of one plane, widened to C. */
template <class S, class C> struct loader {
    const S *p;
    int64_t sh, sw;
    __device__ C operator()(int64_t h, int64_t w) const { return widen(p[h * sh + w * sw]); }
};

/* One thread per result element: planes x rows x cols of the result (the output plane for
 * the forward ops, the input-gradient plane for the backward ones). */
template <class S, class C>
__global__ void pool_kernel(int op, pool_geom g, pview in, pview out, pview ind, int64_t planes)
{
    bool back = op == TC_OP_AVG_POOL2D_BACKWARD || op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    int64_t rows = back ? g.H : g.Ho, cols = back ? g.W : g.Wo, n = planes * rows * cols;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = t % cols, i = t / cols % rows, p = t / cols / rows;
        loader<S, C> ld = {(const S *)in.p + plane_at(in, p), in.sh, in.sw};
        S *o = (S *)out.p + plane_at(out, p) + i * out.sh + j * out.sw;
        int64_t at = 0;
        C v;
        switch (op) {
        case TC_OP_MAX_POOL2D: v = pg_max_at<C>(g, ld, i, j, &at); break;
        case TC_OP_AVG_POOL2D: v = pg_avg_at<C>(g, ld, i, j); break;
        case TC_OP_ADAPTIVE_AVG_POOL2D: v = pg_adaptive_at<C>(g, ld, i, j, (int64_t *)NULL); break;
        case TC_OP_ADAPTIVE_MAX_POOL2D: v = pg_adaptive_at<C>(g, ld, i, j, &at); break;
        case TC_OP_AVG_POOL2D_BACKWARD: v = pg_avg_back_at<C>(g, ld, i, j); break;
        default: v = pg_adaptive_back_at<C>(g, ld, i, j); break;
        }
        store(o, v);
        if (ind.p) ((int64_t *)ind.p)[plane_at(ind, p) + i * ind.sh + j * ind.sw] = at;
    }
}

tc_status cu_op_pool(int, const tc_cuda_call *c)
{
    const tc_cuda_view *x = &c->in[0], *out = &c->out[0];
    int dt = x->dtype, nd = x->ndim;
    if (dt != TC_F32 && dt != TC_F64 && dt != TC_F16 && dt != TC_BF16) return cu_unsupported(c);
    if (out->numel == 0) return TC_OK;
    if (nd != 3 && nd != 4)
        return cu_fail(TC_ERR_INTERNAL, "%s: %d-D input reached the kernel", cu_op_name(c->op), nd);
    const int64_t *sh = c->params.shape;
    bool back = c->op == TC_OP_AVG_POOL2D_BACKWARD || c->op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    /* the "input" plane is the larger side: for the backward ops it is the result */
    const tc_cuda_view *big = back ? out : x, *small = back ? x : out;
    pool_geom g = {};
    g.H = big->size[nd - 2], g.W = big->size[nd - 1], g.Ho = small->size[nd - 2], g.Wo = small->size[nd - 1];
    g.dH = g.dW = 1;
    if (c->op == TC_OP_MAX_POOL2D || c->op == TC_OP_AVG_POOL2D || c->op == TC_OP_AVG_POOL2D_BACKWARD) {
        g.kH = sh[0], g.kW = sh[1], g.sH = sh[2], g.sW = sh[3], g.pH = sh[4], g.pW = sh[5];
        if (c->op == TC_OP_MAX_POOL2D) g.dH = sh[6], g.dW = sh[7];
        g.include_pad = c->params.i[1] != 0;
    }
    int64_t planes = out->numel / (out->size[nd - 2] * out->size[nd - 1]);
    pview in = pview_of(x), o = pview_of(out), ind = {};
    if (c->nout > 1 && c->out[1].data) ind = pview_of(&c->out[1]);
    int64_t n = out->numel, blocks = (n + 255) / 256;
    unsigned grid = (unsigned)(blocks > 65536 ? 65536 : blocks);
    switch (dt) {
    case TC_F32: pool_kernel<float, float><<<grid, 256, 0, cu_stream()>>>(c->op, g, in, o, ind, planes); break;
    case TC_F64: pool_kernel<double, double><<<grid, 256, 0, cu_stream()>>>(c->op, g, in, o, ind, planes); break;
    case TC_F16: pool_kernel<__half, float><<<grid, 256, 0, cu_stream()>>>(c->op, g, in, o, ind, planes); break;
    default: pool_kernel<__nv_bfloat16, float><<<grid, 256, 0, cu_stream()>>>(c->op, g, in, o, ind, planes); break;
    }
    return cu_check(cudaGetLastError(), cu_op_name(c->op));
}
