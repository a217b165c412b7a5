/* optim.cu -- the CUDA kernels of adam_step, sgd_step, rmsprop_step, adagrad_step,
 * adamax_step and adadelta_step (the OPTIM kind, ops.def): one parameter's optimizer update
 * in one pass, a thread per element (grid-stride), instead of one kernel per tensor op of
 * the composed update. CPU twin: core/cpu/optim.c.
 *
 * Each element is computed with the CPU kernel's operations in its order and type (float,
 * double for f64; f16/bf16 loaded as float and rounded once at the store), and this file is
 * built without fused multiply-adds (Makefile), so a device step gives the CPU step's bits.
 * The per-step scalars are read from the device copy of scal when the kernel runs: a CUDA
 * graph replays with the values of the replay (capture.c refreshes that copy first).
 * Results may be the inputs themselves (dense_call's elementwise mode): element i of every
 * operand is read before element i of a result is written.
 * NOTE: compiled with nvcc 13 but never run on a GPU (docs/cuda.md); over the emulator
 * every golden case runs through them.
 */
#include "dense_call.h"
#include <math.h>

using namespace tck;

namespace {

struct optargs {
    int64_t n;
    double a, b; /* adam, adamax: beta1, beta2; sgd: momentum, dampening; rmsprop: alpha,
                  * momentum; adadelta: rho */
    /* adam: amsgrad; sgd: nesterov; rmsprop: centered (0 or 1). A full word, not a bool: the
     * struct is passed by value and has no padding bytes, whose stack garbage could look
     * like a device pointer to a checker of kernel arguments (the emulator's is one). */
    int64_t flag;
};

/* s holds m, v (and vmax) one after the other, n values each; so does so */
template <int DT>
__global__ void adam_kernel(const typename dt<DT>::S *x, const typename dt<DT>::S *g, const typename dt<DT>::S *s,
                            typename dt<DT>::S *xo, typename dt<DT>::S *so, const double *scal, optargs a)
{
    using C = typename dt<DT>::C;
    const C step = (C)scal[0], eps = (C)scal[1], keep = (C)scal[2], wd = (C)scal[3];
    const C c1 = (C)(1 - a.a), b2 = (C)a.b, c2 = (C)(1 - a.b);
    const int64_t n = a.n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        C xv = (C)ld(x + i), d = (C)ld(g + i), mv = (C)ld(s + i);
        if (wd != 0) d = d + wd * xv;
        C m1 = mv + c1 * (d - mv);
        C v1 = (C)ld(s + n + i) * b2;
        v1 = v1 + c2 * d * d;
        C src = v1;
        if (a.flag) {
            C vm = (C)ld(s + 2 * n + i);
            src = (vm > v1 || vm != vm) ? vm : v1;
            st(so + 2 * n + i, src);
        }
        C den = sqrt(src) + eps;
        st(xo + i, xv * keep + (m1 * step) / den);
        st(so + i, m1);
        st(so + n + i, v1);
    }
}

template <int DT>
__global__ void sgd_kernel(const typename dt<DT>::S *x, const typename dt<DT>::S *g, const typename dt<DT>::S *buf,
                           typename dt<DT>::S *xo, typename dt<DT>::S *bo, const double *scal, optargs a)
{
    using C = typename dt<DT>::C;
    const C neglr = (C)scal[0], wd = (C)scal[1], mom = (C)a.a, c = (C)(1 - a.b);
    const bool plain = a.b == 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        C xv = (C)ld(x + i), d = (C)ld(g + i), bv = (C)ld(buf + i);
        if (wd != 0) d = d + wd * xv;
        C b1 = plain ? d + mom * bv : bv * mom + c * d;
        C step = a.flag ? d + mom * b1 : b1;
        st(xo + i, xv + neglr * step);
        st(bo + i, b1);
    }
}

/* s holds sq, then ga (centered), then buf (momentum), n values each; so does so */
template <int DT>
__global__ void rmsprop_kernel(const typename dt<DT>::S *x, const typename dt<DT>::S *g, const typename dt<DT>::S *s,
                               typename dt<DT>::S *xo, typename dt<DT>::S *so, const double *scal, optargs a)
{
    using C = typename dt<DT>::C;
    const C neglr = (C)scal[0], eps = (C)scal[1], wd = (C)scal[2];
    const C alpha = (C)a.a, c = (C)(1 - a.a), mom = (C)a.b, neg1 = (C)-1;
    const bool momentum = a.b > 0;
    const int64_t n = a.n, ga_row = a.flag ? n : 0, buf_row = ga_row + n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        C xv = (C)ld(x + i), d = (C)ld(g + i);
        if (wd != 0) d = d + wd * xv;
        C sq1 = (C)ld(s + i) * alpha;
        sq1 = sq1 + c * d * d;
        C den = sq1;
        if (a.flag) {
            C ga1 = (C)ld(s + ga_row + i) * alpha;
            ga1 = ga1 + c * d;
            den = den + neg1 * ga1 * ga1;
            st(so + ga_row + i, ga1);
        }
        den = sqrt(den) + eps;
        if (momentum) {
            C b1 = (C)ld(s + buf_row + i) * mom;
            b1 = b1 + d / den;
            st(xo + i, xv + neglr * b1);
            st(so + buf_row + i, b1);
        } else {
            st(xo + i, xv + (d * neglr) / den);
        }
        st(so + i, sq1);
    }
}

template <int DT>
__global__ void adagrad_kernel(const typename dt<DT>::S *x, const typename dt<DT>::S *g, const typename dt<DT>::S *sum,
                               typename dt<DT>::S *xo, typename dt<DT>::S *so, const double *scal, optargs a)
{
    using C = typename dt<DT>::C;
    const C neglr = (C)scal[0], eps = (C)scal[1], wd = (C)scal[2];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        C xv = (C)ld(x + i), d = (C)ld(g + i);
        if (wd != 0) d = d + wd * xv;
        C s1 = (C)ld(sum + i) + d * d;
        C den = sqrt(s1) + eps;
        st(xo + i, xv + (d * neglr) / den);
        st(so + i, s1);
    }
}

/* s holds m, then u, n values each; so does so */
template <int DT>
__global__ void adamax_kernel(const typename dt<DT>::S *x, const typename dt<DT>::S *g, const typename dt<DT>::S *s,
                              typename dt<DT>::S *xo, typename dt<DT>::S *so, const double *scal, optargs a)
{
    using C = typename dt<DT>::C;
    const C step = (C)scal[0], eps = (C)scal[1], wd = (C)scal[2];
    const C b1 = (C)a.a, c1 = (C)(1 - a.a), b2 = (C)a.b;
    const int64_t n = a.n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        C xv = (C)ld(x + i), d = (C)ld(g + i);
        if (wd != 0) d = d + wd * xv;
        C m1 = (C)ld(s + i) * b1;
        m1 = m1 + c1 * d;
        C t = fabs(d) + eps;
        C u1 = (C)ld(s + n + i) * b2;
        u1 = (u1 > t || u1 != u1) ? u1 : t;
        st(xo + i, xv + (m1 * step) / u1);
        st(so + i, m1);
        st(so + n + i, u1);
    }
}

/* s holds sq, then acc, n values each; so does so */
template <int DT>
__global__ void adadelta_kernel(const typename dt<DT>::S *x, const typename dt<DT>::S *g, const typename dt<DT>::S *s,
                                typename dt<DT>::S *xo, typename dt<DT>::S *so, const double *scal, optargs a)
{
    using C = typename dt<DT>::C;
    const C neglr = (C)scal[0], eps = (C)scal[1], wd = (C)scal[2];
    const C rho = (C)a.a, c = (C)(1 - a.a);
    const int64_t n = a.n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        C xv = (C)ld(x + i), d = (C)ld(g + i), av = (C)ld(s + n + i);
        if (wd != 0) d = d + wd * xv;
        C sq1 = (C)ld(s + i) * rho;
        sq1 = sq1 + c * d * d;
        C std = sqrt(sq1 + eps);
        C delta = sqrt(av + eps) / std * d;
        st(xo + i, xv + neglr * delta);
        C a1 = av * rho;
        st(so + n + i, a1 + c * delta * delta);
        st(so + i, sq1);
    }
}

} /* namespace */

tc_status cu_op_optim(int dev, const tc_cuda_call *c)
{
    const char *what = cu_op_name(c->op);
    if (c->nin != 4 || c->nout != 2) return cu_fail(TC_ERR_ARG, "%s: bad call", what);
    int d0 = c->in[0].dtype;
    if (d0 != TC_F32 && d0 != TC_F64 && d0 != TC_F16 && d0 != TC_BF16) return cu_unsupported(c);
    optargs a{c->in[0].numel, c->params.s[0], c->params.s[1], c->params.i[0] != 0 ? 1 : 0};
    if (a.n == 0) return TC_OK;
    dense_call d(dev);
    if (tc_status s = d.make(c, true)) return s;
    tc_status s = with_float_dtype(d0, c, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        using S = typename dt<DT>::S;
        const S *x = (const S *)d.in[0].data, *g = (const S *)d.in[1].data, *sin = (const S *)d.in[2].data;
        S *xo = (S *)d.out[0].data, *so = (S *)d.out[1].data;
        const double *scal = (const double *)d.in[3].data;
        const unsigned grid = grid_for(dev, a.n);
        switch (c->op) {
        case TC_OP_ADAM_STEP: adam_kernel<DT><<<grid, BLOCK, 0, cu_stream()>>>(x, g, sin, xo, so, scal, a); break;
        case TC_OP_SGD_STEP: sgd_kernel<DT><<<grid, BLOCK, 0, cu_stream()>>>(x, g, sin, xo, so, scal, a); break;
        case TC_OP_RMSPROP_STEP: rmsprop_kernel<DT><<<grid, BLOCK, 0, cu_stream()>>>(x, g, sin, xo, so, scal, a); break;
        case TC_OP_ADAGRAD_STEP: adagrad_kernel<DT><<<grid, BLOCK, 0, cu_stream()>>>(x, g, sin, xo, so, scal, a); break;
        case TC_OP_ADAMAX_STEP: adamax_kernel<DT><<<grid, BLOCK, 0, cu_stream()>>>(x, g, sin, xo, so, scal, a); break;
        default: adadelta_kernel<DT><<<grid, BLOCK, 0, cu_stream()>>>(x, g, sin, xo, so, scal, a); break;
        }
        return launched(c);
    });
    return s ? s : d.finish(c);
}
