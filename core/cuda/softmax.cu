/* softmax.cu -- CUDA softmax and log_softmax along one dim, and their backward ops
 * softmax_backward / log_softmax_backward (CPU: core/cpu/softmax.c; see the backward
 * section below).
 *
 * Numerically stable as on the CPU: each line's max is subtracted before exp; the max
 * ignores NaN (x > m), so a NaN reaches the sum through exp and makes the whole line NaN,
 * as in PyTorch. float32 and the half types compute in float (the sum too, as the CPU's
 * float lanes do), float64 in double; half results round once, at the store.
 *   softmax:     y = exp(x - m) * (1 / sum)
 *   log_softmax: y = x - (m + log(sum))
 * Lines are the elements along dim; the other dims are coalesced over input and output.
 * A group of G threads (a power of two up to a block) takes one line through three passes
 * (max, sum of exp, write), merging lanes in a fixed shared-memory tree; when dim is outer
 * to a contiguous dim, one thread takes a line so neighbouring threads read neighbouring
 * addresses. Each element is read and written by the same thread in the last pass, so the
 * in-place form (out = in) is safe. A causal softmax (ops.def: i1, the last dim) walks row i
 * of each (L, S) matrix over its first i + 1 elements only and stores 0 after them.
 * ops.cu gives a call to cuDNN first (dnn_softmax.cu) where dnn_select.h says cuDNN takes it
 * and torch.backends.cudnn.enabled is on; these kernels run every other call.
 * NOTE: the backward kernel is compiled with nvcc 13 but has never run on a GPU (docs/cuda.md).
 */
#include "kern.h"
#include <math.h>

using namespace tck;

namespace {

struct op_max {
    template <class C> __device__ C operator()(C a, C b) const { return b > a ? b : a; }
};
struct op_add {
    template <class C> __device__ C operator()(C a, C b) const { return a + b; }
};

/* The group's lanes merged in a fixed tree; every thread of the block calls it. */
template <class C, class Op> __device__ C group_red(C *sm, C v, int G, int lane, Op op)
{
    if (G == 1) return v;
    __syncthreads();
    sm[threadIdx.x] = v;
    for (int s = G / 2; s > 0; s >>= 1) {
        __syncthreads();
        if (lane < s) sm[threadIdx.x] = op(sm[threadIdx.x], sm[threadIdx.x + s]);
    }
    __syncthreads();
    return sm[threadIdx.x - lane];
}

__device__ __forceinline__ float exp_c(float v) { return expf(v); }
__device__ __forceinline__ double exp_c(double v) { return exp(v); }

struct sargs {
    int64_t nlines, n, xs, ys; /* lines, their length, strides along dim */
    int64_t rows;              /* causal softmax: L, the rows of each (L, n) matrix; else 0 */
    int G;
    bool log;
};

template <int DT>
__global__ void __launch_bounds__(BLOCK) softmax_kernel(const typename dt<DT>::S *x, typename dt<DT>::S *y, geo<2> lg,
                                                        sargs a)
{
    using C = typename dt<DT>::C;
    __shared__ C sm[BLOCK];
    const int G = a.G, lane = (int)threadIdx.x & (G - 1), gpb = BLOCK / G;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < a.nlines; base += (int64_t)gridDim.x * gpb) {
        const int64_t li = base + (int64_t)threadIdx.x / G;
        const int64_t end = li < a.nlines ? a.n : 0; /* a dead lane walks nothing */
        /* causal: line li is row li % rows of its matrix (the last dim is the line, so lines
         * run row-major over the other dims); it keeps its first row + 1 elements */
        const int64_t live = a.rows && li % a.rows + 1 < end ? li % a.rows + 1 : end;
        int64_t off[2];
        geo_offsets(lg, li < a.nlines ? li : 0, off);
        const typename dt<DT>::S *xp = x + off[0];
        typename dt<DT>::S *yp = y + off[1];
        C m = -INFINITY;
        for (int64_t k = lane; k < live; k += G) {
            C v = ld(xp + k * a.xs);
            m = v > m ? v : m;
        }
        m = group_red(sm, m, G, lane, op_max{});
        C s = 0;
        for (int64_t k = lane; k < live; k += G) s += exp_c((C)ld(xp + k * a.xs) - m);
        s = group_red(sm, s, G, lane, op_add{});
        if (a.log) {
            C shift = m + (C)log((double)s);
            for (int64_t k = lane; k < live; k += G) st(yp + k * a.ys, (C)ld(xp + k * a.xs) - shift);
        } else {
            C inv = (C)1 / s;
            for (int64_t k = lane; k < live; k += G) st(yp + k * a.ys, exp_c((C)ld(xp + k * a.xs) - m) * inv);
        }
        for (int64_t k = live + lane; k < end; k += G) st(yp + k * a.ys, (C)0);
    }
}

} /* namespace */

/* ---- backward: softmax_backward(g, y), log_softmax_backward(g, y) ----------------------------
 * One group of G threads per line as in the forward; the line's sum is accumulated in
 * double for every dtype (as the CPU's), merged in the same fixed tree, then each thread
 * writes the elements it read:
 *   softmax:     gx = y * (g - sum(g * y))
 *   log_softmax: gx = g - exp(y) * sum(g)
 * Every read of a line happens before the tree merge's barriers and every write after
 * them, so gx may be g or y itself. The causal softmax_backward (i1) reads row i of each
 * (L, S) matrix over its first i + 1 elements only and stores 0 after them. */

namespace {

struct bargs {
    int64_t nlines, n, gs, ys, os; /* lines, their length, strides along dim of g, y, gx */
    int64_t rows;                  /* causal softmax_backward: L, as sargs's; else 0 */
    int G;
    bool log;
};

template <int DT>
__global__ void __launch_bounds__(BLOCK) softmax_backward_kernel(const typename dt<DT>::S *g,
                                                                 const typename dt<DT>::S *y,
                                                                 typename dt<DT>::S *gx, geo<3> lg, bargs a)
{
    using C = typename dt<DT>::C;
    __shared__ double sm[BLOCK];
    const int G = a.G, lane = (int)threadIdx.x & (G - 1), gpb = BLOCK / G;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < a.nlines; base += (int64_t)gridDim.x * gpb) {
        const int64_t li = base + (int64_t)threadIdx.x / G;
        const int64_t end = li < a.nlines ? a.n : 0; /* a dead lane walks nothing */
        const int64_t live = a.rows && li % a.rows + 1 < end ? li % a.rows + 1 : end; /* as the forward's */
        int64_t off[3];
        geo_offsets(lg, li < a.nlines ? li : 0, off);
        const typename dt<DT>::S *gp = g + off[0], *yp = y + off[1];
        typename dt<DT>::S *op = gx + off[2];
        double s = 0;
        for (int64_t k = lane; k < live; k += G) {
            double gv = (double)(C)ld(gp + k * a.gs);
            s += a.log ? gv : gv * (double)(C)ld(yp + k * a.ys);
        }
        s = group_red(sm, s, G, lane, op_add{});
        const C sc = (C)s;
        for (int64_t k = lane; k < live; k += G) {
            C gv = (C)ld(gp + k * a.gs), yv = (C)ld(yp + k * a.ys);
            st(op + k * a.os, a.log ? gv - exp_c(yv) * sc : yv * (gv - sc));
        }
        for (int64_t k = live + lane; k < end; k += G) st(op + k * a.os, (C)0);
    }
}

} /* namespace */

/* The call's dim (params.i[0], negative from the end) for an ndim-dim tensor (0-dim: one line
 * of one), or a TC_ERR_INDEX failure naming it. */
static tc_status line_dim(const tc_cuda_call *c, int ndim, int *d)
{
    int nd = ndim > 0 ? ndim : 1;
    int64_t dim = c->params.i[0];
    if (dim < 0) dim += nd;
    if (dim < 0 || dim >= nd)
        return cu_fail(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim input", cu_op_name(c->op),
                       (long long)c->params.i[0], ndim);
    *d = (int)dim;
    return TC_OK;
}

/* A causal call's (ops.def: softmax's and softmax_backward's i1) rows L of each trailing
 * (L, S) matrix in *rows, else 0; a TC_ERR_ARG failure for a causal flag other than 1 or a
 * line dim other than the last of at least 2. */
static tc_status causal_rows(const tc_cuda_call *c, const tc_cuda_view &x, int d, int64_t *rows)
{
    *rows = 0;
    if (!c->params.i[1]) return TC_OK;
    if (c->params.i[1] != 1 || x.ndim < 2 || d != x.ndim - 1)
        return cu_fail(TC_ERR_ARG, "%s: causal (i1 = %lld) needs 1 and the last dim of at least 2, got dim %d of %d",
                       cu_op_name(c->op), (long long)c->params.i[1], d, x.ndim);
    *rows = x.size[x.ndim - 2];
    return TC_OK;
}

/* Threads per line of n elements (stride along the line: step; innermost stride of the
 * other dims: inner): one where the line's dim is outer to a contiguous dim (coalesced
 * across lines), else up to a block along the line. */
static int threads_per_line(int64_t step, int other_nd, int64_t inner, int64_t nlines, int64_t n)
{
    bool cols = step != 1 && other_nd > 0 && inner == 1 && nlines >= 32;
    int G = 1;
    if (!cols)
        while (G < BLOCK && (int64_t)G * 2 <= n) G *= 2;
    return G;
}

static tc_status softmax_backward(int dev, const tc_cuda_call *c)
{
    if (c->nin < 2 || c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(c->op));
    const tc_cuda_view &g = c->in[0], &y = c->in[1], &o = c->out[0];
    int d0 = g.dtype;
    if (d0 != TC_F32 && d0 != TC_F64 && d0 != TC_F16 && d0 != TC_BF16) return cu_unsupported(c);
    if (y.dtype != d0 || o.dtype != d0 || y.ndim != g.ndim || o.ndim != g.ndim || y.numel != g.numel ||
        o.numel != g.numel)
        return cu_fail(TC_ERR_ARG, "%s: gradOutput, output and result differ in dtype or size", cu_op_name(c->op));
    if (g.numel == 0) return TC_OK;
    if (!g.data || !y.data || !o.data) return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(c->op));
    int d = 0;
    if (tc_status s = line_dim(c, g.ndim, &d)) return s;
    bargs a{};
    a.log = c->op == TC_OP_LOG_SOFTMAX_BACKWARD;
    geo<3> lg{};
    if (g.ndim == 0) {
        a.n = 1, a.gs = a.ys = a.os = 0;
    } else {
        a.n = g.size[d], a.gs = g.stride[d], a.ys = y.stride[d], a.os = o.stride[d];
        lg.nd = strides_without(g, d, lg.size, lg.st[0]);
        strides_without(y, d, nullptr, lg.st[1]);
        strides_without(o, d, nullptr, lg.st[2]);
    }
    a.nlines = g.numel / a.n;
    if (c->op == TC_OP_SOFTMAX_BACKWARD)
        if (tc_status s = causal_rows(c, g, d, &a.rows)) return s;
    geo_coalesce(lg);
    a.G = threads_per_line(a.gs, lg.nd, lg.nd > 0 ? lg.st[0][lg.nd - 1] : 0, a.nlines, a.n);
    return with_float_dtype(d0, c, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        using S = typename dt<DT>::S;
        softmax_backward_kernel<DT><<<grid_for(dev, a.nlines * a.G), BLOCK, 0, cu_stream()>>>(
            (const S *)g.data, (const S *)y.data, (S *)o.data, lg, a);
        return launched(c);
    });
}

tc_status cu_op_softmax(int dev, const tc_cuda_call *c)
{
    if (c->op == TC_OP_SOFTMAX_BACKWARD || c->op == TC_OP_LOG_SOFTMAX_BACKWARD) return softmax_backward(dev, c);
    if (c->nin < 1 || c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(c->op));
    const tc_cuda_view &x = c->in[0], &y = c->out[0];
    int d0 = x.dtype;
    if (d0 != TC_F32 && d0 != TC_F64 && d0 != TC_F16 && d0 != TC_BF16) return cu_unsupported(c);
    if (x.numel == 0) return TC_OK;
    if (!x.data || !y.data) return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(c->op));
    int d = 0;
    if (tc_status s = line_dim(c, x.ndim, &d)) return s;
    sargs a{};
    a.log = c->op == TC_OP_LOG_SOFTMAX;
    geo<2> lg{};
    if (x.ndim == 0) {
        a.n = 1, a.xs = 0, a.ys = 0;
    } else {
        a.n = x.size[d], a.xs = x.stride[d], a.ys = y.stride[d];
        lg.nd = strides_without(x, d, lg.size, lg.st[0]);
        strides_without(y, d, nullptr, lg.st[1]);
    }
    a.nlines = x.numel / a.n;
    if (c->op == TC_OP_SOFTMAX)
        if (tc_status s = causal_rows(c, x, d, &a.rows)) return s;
    geo_coalesce(lg);
    a.G = threads_per_line(a.xs, lg.nd, lg.nd > 0 ? lg.st[0][lg.nd - 1] : 0, a.nlines, a.n);
    return with_float_dtype(d0, c, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        using S = typename dt<DT>::S;
        softmax_kernel<DT><<<grid_for(dev, a.nlines * a.G), BLOCK, 0, cu_stream()>>>((const S *)x.data, (S *)y.data, lg, a);
        return launched(c);
    });
}
