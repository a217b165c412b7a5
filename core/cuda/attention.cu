/* attention.cu -- the CUDA kernels of the ATTN kind (ops.def): fused scaled dot-product
 * attention and its backward, flash-attention style: the (L, S) scores and weights are never
 * written to memory, only lse (one number per query) is kept between the passes. CPU twin:
 * core/cpu/attention.c.
 *
 *   forward   a few lanes per query row (cfg below), 128 threads a block; the block walks
 *             the keys a tile at a time (K and V tiles in shared memory) with a running max
 *             m, sum l and output accumulator o in registers (online softmax): per tile
 *             m' = max(m, scores),
 *             o = o e^(m - m') + sum_j e^(s_j - m') v_j, l likewise; out = o / l and
 *             lse = m + log l at the end.
 *   backward  two kernels, no atomics, so the sums do not depend on timing:
 *             dq    lanes per query row: D = sum(gout * out) (kept for the next kernel),
 *                   then over the key tiles P = e^(s - lse), dS = P (gout.v - D),
 *                   gq = scale sum_j dS k_j;
 *             dkdv  lanes per key row (its k and v rows in shared memory): over tiles of
 *                   queries, gv = sum_i P g_i and gk = scale sum_i dS q_i.
 * These kernels run float32 and float64 (computing in their own type), and float16 and
 * bfloat16 (computing in float) on GPUs before compute capability 8.0; from 8.0 on, the
 * half types run the same algorithm on tensor cores (attention_tc.cu), and so does float32
 * in TF32 when the TF32 flag is on and E, Ev <= 64. Sizes go through a compile-time
 * bucket D >= max(E, Ev) (64 or 128; larger feature sizes are TC_ERR_UNSUPPORTED, which
 * runs the CPU kernel on the host). A causal call bounds each
 * block's key range by its last query and leaves keys j > i out of row i. Strided operands
 * are made dense first; a result that overlaps an input is computed into scratch and copied
 * (dense_call.h).
 * These are plain CUDA-core kernels: correct and memory-lean, their speed against cuBLAS
 * products plus the softmax passes has not been measured on a GPU.
 * NOTE: compiled with nvcc 13 but never run on a GPU (docs/cuda.md); over the emulator
 * every golden case runs through them.
 */
#include "attention.h"
#include <math.h>

using namespace tck;

namespace {

/* Block geometry for bucket D and compute type C. A row (a query's in the forward and dq
 * kernels, a key's in dkdv) is split over TPR neighbouring lanes of a warp, each keeping
 * F = D / TPR of its features in registers: features e = f * TPR + lane, so neighbouring
 * lanes read neighbouring words of a shared tile. F is 32 floats or 16 doubles, so q, gout
 * and an accumulator slice fit in registers; with whole rows per thread ptxas (nvcc 13,
 * sm_90) spilled 1.6 KB per thread in float32's 64 bucket and 10 to 67 KB in the 128
 * bucket and float64. A row's dot products add the lanes' partial sums by shuffles
 * (row_sum), which leaves the same bits in every lane. 128 threads a block: BR rows, and
 * BC-key tiles (forward, dq) or QT-query tiles (dkdv) in shared memory, under 48 KB. */
template <int D, class C> struct cfg {
    static constexpr int ROW = D * (int)sizeof(C);
    static constexpr int TPR = ROW / 128, F = D / TPR, THREADS = 128, BR = THREADS / TPR;
    static constexpr int BC = ROW <= 256 ? 32 : 16;
    static constexpr int QT = ROW <= 256 ? 16 : ROW <= 512 ? 8 : 4;
    static_assert(TPR >= 2 && TPR <= 32 && 32 % TPR == 0, "a row's lanes share one warp");
};

/* x summed over the TPR lanes of the caller's row (every lane of the warp takes part). */
template <int TPR, class C> __device__ __forceinline__ C row_sum(C x)
{
#pragma unroll
    for (int o = TPR / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* Rows [j0, j0 + nb) of the (S, E) k and (S, Ev) v of problem n into BC x D tiles (zeros
 * past nb and past E / Ev, so every dot product can run over all D). */
template <int BC, int D, class S, class C>
__device__ void load_kv_tile(C (*ks)[D], C (*vs)[D], const S *k, const S *v, const aargs &a, int64_t n,
                             int64_t j0, int64_t nb)
{
    for (int t = threadIdx.x; t < BC * D; t += blockDim.x) {
        int r = t / D, e = t % D;
        int64_t j = n * a.S + j0 + r;
        ks[r][e] = r < nb && e < a.E ? (C)ld(k + j * a.E + e) : (C)0;
        vs[r][e] = r < nb && e < a.Ev ? (C)ld(v + j * a.Ev + e) : (C)0;
    }
}

template <int DT, int D>
__global__ void __launch_bounds__(128) attn_forward_kernel(const typename dt<DT>::S *q, const typename dt<DT>::S *k,
                                                           const typename dt<DT>::S *v, typename dt<DT>::S *out,
                                                           typename dt<DT>::C *lse, aargs a)
{
    using C = typename dt<DT>::C;
    using G = cfg<D, C>;
    constexpr int T = G::TPR, F = G::F;
    __shared__ C ks[G::BC][D], vs[G::BC][D];
    const int lane = threadIdx.x % T;
    const int64_t n = blockIdx.x / a.nqb, i0 = (blockIdx.x % a.nqb) * (int64_t)G::BR, i = i0 + threadIdx.x / T;
    const int64_t live = live_keys(a, i), nkeys = block_keys(a, i0, G::BR);
    C qr[F], o[F];
    const auto *qp = q + (n * a.L + (i < a.L ? i : 0)) * a.E;
#pragma unroll
    for (int f = 0; f < F; f++) {
        int e = f * T + lane;
        qr[f] = i < a.L && e < a.E ? (C)ld(qp + e) * (C)a.scale : (C)0, o[f] = 0;
    }
    C m = -INFINITY, l = 0;
    for (int64_t j0 = 0; j0 < nkeys; j0 += G::BC) {
        __syncthreads();
        load_kv_tile<G::BC, D>(ks, vs, k, v, a, n, j0, nkeys - j0 < G::BC ? nkeys - j0 : G::BC);
        __syncthreads();
        C s[G::BC], mt = m;
#pragma unroll
        for (int c = 0; c < G::BC; c++) {
            C acc = 0;
#pragma unroll
            for (int f = 0; f < F; f++) acc += qr[f] * ks[c][f * T + lane];
            acc = row_sum<T>(acc);
            s[c] = acc;
            if (j0 + c < live && acc > mt) mt = acc; /* NaN never wins: it reaches l through exp */
        }
        C base = mt == -INFINITY ? (C)0 : mt, alpha = exp(m - base); /* m = -inf: alpha 0, o and l are 0 */
        l *= alpha;
#pragma unroll
        for (int f = 0; f < F; f++) o[f] *= alpha;
#pragma unroll
        for (int c = 0; c < G::BC; c++) {
            if (j0 + c >= live) continue;
            C p = exp(s[c] - base);
            l += p;
#pragma unroll
            for (int f = 0; f < F; f++) o[f] += p * vs[c][f * T + lane];
        }
        m = mt;
    }
    if (i >= a.L) return;
    C inv = (C)1 / l;
    auto *op = out + (n * a.L + i) * a.Ev;
#pragma unroll
    for (int f = 0; f < F; f++)
        if (f * T + lane < a.Ev) st(op + f * T + lane, o[f] * inv);
    if (lane == 0) lse[n * a.L + i] = m + log(l);
}

/* gq, and D = sum(gout * out) per query row into drow for the dkdv kernel. */
template <int DT, int D>
__global__ void __launch_bounds__(128) attn_dq_kernel(const typename dt<DT>::S *g, const typename dt<DT>::S *q,
                                                      const typename dt<DT>::S *k, const typename dt<DT>::S *v,
                                                      const typename dt<DT>::S *out, const typename dt<DT>::C *lse,
                                                      typename dt<DT>::S *gq, typename dt<DT>::C *drow, aargs a)
{
    using C = typename dt<DT>::C;
    using G = cfg<D, C>;
    constexpr int T = G::TPR, F = G::F;
    __shared__ C ks[G::BC][D], vs[G::BC][D];
    const int lane = threadIdx.x % T;
    const int64_t n = blockIdx.x / a.nqb, i0 = (blockIdx.x % a.nqb) * (int64_t)G::BR, i = i0 + threadIdx.x / T;
    const int64_t live = live_keys(a, i), nkeys = block_keys(a, i0, G::BR);
    const int64_t row = n * a.L + (i < a.L ? i : 0);
    C qr[F], gr[F], dq[F], Di = 0;
#pragma unroll
    for (int f = 0; f < F; f++) {
        int e = f * T + lane;
        qr[f] = i < a.L && e < a.E ? (C)ld(q + row * a.E + e) * (C)a.scale : (C)0;
        gr[f] = i < a.L && e < a.Ev ? (C)ld(g + row * a.Ev + e) : (C)0;
        if (i < a.L && e < a.Ev) Di += gr[f] * (C)ld(out + row * a.Ev + e);
        dq[f] = 0;
    }
    Di = row_sum<T>(Di);
    if (i < a.L && lane == 0) drow[row] = Di;
    const C li = i < a.L ? lse[row] : (C)0;
    for (int64_t j0 = 0; j0 < nkeys; j0 += G::BC) {
        __syncthreads();
        load_kv_tile<G::BC, D>(ks, vs, k, v, a, n, j0, nkeys - j0 < G::BC ? nkeys - j0 : G::BC);
        __syncthreads();
#pragma unroll
        for (int c = 0; c < G::BC; c++) {
            C s = 0, dp = 0;
#pragma unroll
            for (int f = 0; f < F; f++) s += qr[f] * ks[c][f * T + lane], dp += gr[f] * vs[c][f * T + lane];
            s = row_sum<T>(s), dp = row_sum<T>(dp); /* the whole warp, before any row skips a key */
            if (j0 + c >= live) continue;
            C ds = exp(s - li) * (dp - Di);
#pragma unroll
            for (int f = 0; f < F; f++) dq[f] += ds * ks[c][f * T + lane];
        }
    }
    if (i >= a.L) return;
#pragma unroll
    for (int f = 0; f < F; f++)
        if (f * T + lane < a.E) st(gq + row * a.E + f * T + lane, dq[f] * (C)a.scale);
}

/* gk and gv of BR key rows per block; grid: ceil(S / BR) blocks per problem. */
template <int DT, int D>
__global__ void __launch_bounds__(128) attn_dkdv_kernel(const typename dt<DT>::S *g, const typename dt<DT>::S *q,
                                                        const typename dt<DT>::S *k, const typename dt<DT>::S *v,
                                                        const typename dt<DT>::C *lse, const typename dt<DT>::C *drow,
                                                        typename dt<DT>::S *gkv, int64_t nkb, aargs a)
{
    using C = typename dt<DT>::C;
    using G = cfg<D, C>;
    constexpr int T = G::TPR, F = G::F, KR = G::BR, QT = G::QT;
    /* the block's key rows, padded by T words so that the lanes of a warp's rows, each
     * reading its own row's slice, hit distinct banks */
    __shared__ C kr[KR][D + T], vr[KR][D + T];
    __shared__ C qs[QT][D], gs[QT][D], ls[QT], ds[QT];
    const int lane = threadIdx.x % T, rk = threadIdx.x / T;
    const int64_t n = blockIdx.x / nkb, j0 = (blockIdx.x % nkb) * (int64_t)KR, j = j0 + rk;
    for (int t = threadIdx.x; t < KR * D; t += blockDim.x) {
        int r = t / D, e = t % D;
        int64_t jj = j0 + r, off = n * a.S + jj;
        kr[r][e] = jj < a.S && e < a.E ? (C)ld(k + off * a.E + e) : (C)0;
        vr[r][e] = jj < a.S && e < a.Ev ? (C)ld(v + off * a.Ev + e) : (C)0;
    }
    C dk[F], dv[F];
#pragma unroll
    for (int f = 0; f < F; f++) dk[f] = 0, dv[f] = 0;
    /* causal: queries before j0 attend none of these keys */
    for (int64_t i0 = a.causal ? j0 / QT * QT : 0; i0 < a.L; i0 += QT) {
        __syncthreads();
        for (int t = threadIdx.x; t < QT * D; t += blockDim.x) {
            int r = t / D, e = t % D;
            int64_t ii = i0 + r, row = n * a.L + ii;
            qs[r][e] = ii < a.L && e < a.E ? (C)ld(q + row * a.E + e) : (C)0;
            gs[r][e] = ii < a.L && e < a.Ev ? (C)ld(g + row * a.Ev + e) : (C)0;
            if (e == 0) ls[r] = ii < a.L ? lse[row] : (C)0, ds[r] = ii < a.L ? drow[row] : (C)0;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < QT; r++) {
            int64_t ii = i0 + r;
            C s = 0, dp = 0;
#pragma unroll
            for (int f = 0; f < F; f++)
                s += qs[r][f * T + lane] * kr[rk][f * T + lane], dp += gs[r][f * T + lane] * vr[rk][f * T + lane];
            s = row_sum<T>(s), dp = row_sum<T>(dp); /* the whole warp, before any row skips a query */
            if (j >= a.S || ii >= a.L || (a.causal && j > ii)) continue;
            C p = exp(s * (C)a.scale - ls[r]), dsv = p * (dp - ds[r]);
#pragma unroll
            for (int f = 0; f < F; f++) dv[f] += p * gs[r][f * T + lane], dk[f] += dsv * qs[r][f * T + lane];
        }
    }
    if (j >= a.S) return;
    auto *gp = gkv + (n * a.S + j) * (a.E + a.Ev);
#pragma unroll
    for (int f = 0; f < F; f++) {
        int e = f * T + lane;
        if (e < a.E) st(gp + e, dk[f] * (C)a.scale);
        if (e < a.Ev) st(gp + a.E + e, dv[f]);
    }
}

/* ---- host side -------------------------------------------------------------------------- */

template <int DT, int D> static tc_status launch(int dev, const tc_cuda_call *c, dense_call &x, aargs a)
{
    using S = typename dt<DT>::S;
    using C = typename dt<DT>::C;
    using G = cfg<D, C>;
    cudaStream_t st = cu_stream();
    a.nqb = (a.L + G::BR - 1) / G::BR; /* this bucket's query rows a block, not the tensor cores' 64 */
    int64_t nkb = (a.S + G::BR - 1) / G::BR;
    if (a.N * a.nqb > INT32_MAX || a.N * nkb > INT32_MAX)
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: %lld problems of %lld queries and %lld keys exceed one grid",
                       cu_op_name(c->op), (long long)a.N, (long long)a.L, (long long)a.S);
    if (c->op == TC_OP_ATTENTION) {
        if (a.N * a.L == 0) return TC_OK;
        attn_forward_kernel<DT, D><<<(unsigned)(a.N * a.nqb), G::THREADS, 0, st>>>(
            (const S *)x.in[0].data, (const S *)x.in[1].data, (const S *)x.in[2].data, (S *)x.out[0].data,
            (C *)x.out[1].data, a);
        return launched(c);
    }
    if (a.N * a.S == 0) return TC_OK; /* gq has no elements either (L = 0 or N = 0) */
    scratch drow(dev);
    if (a.L > 0) {
        if (tc_status s = drow.get((size_t)(a.N * a.L) * sizeof(C), "attention_backward")) return s;
        attn_dq_kernel<DT, D><<<(unsigned)(a.N * a.nqb), G::THREADS, 0, st>>>(
            (const S *)x.in[0].data, (const S *)x.in[1].data, (const S *)x.in[2].data, (const S *)x.in[3].data,
            (const S *)x.in[4].data, (const C *)x.in[5].data, (S *)x.out[0].data, drow.as<C>(), a);
        if (tc_status s = launched(c)) return s;
    }
    attn_dkdv_kernel<DT, D><<<(unsigned)(a.N * nkb), G::THREADS, 0, st>>>(
        (const S *)x.in[0].data, (const S *)x.in[1].data, (const S *)x.in[2].data, (const S *)x.in[3].data,
        (const C *)x.in[5].data, drow.as<C>(), (S *)x.out[1].data, nkb, a);
    return launched(c);
}

/* Whether device dev has the mma.sync of attention_tc.cu (compute capability 8.0
 * and later), read once per device. Older GPUs run the CUDA-core kernels here: there the
 * tensor-core kernels would compute each product with warp shuffles (mma.h), far slower. */
bool has_mma(int dev)
{
    enum { MAXDEV = 64 };
    static int cache[MAXDEV]; /* 0: not read yet, 1: no, 2: yes; a racing first read writes the same */
    int v = dev >= 0 && dev < MAXDEV ? __atomic_load_n(&cache[dev], __ATOMIC_RELAXED) : 0;
    if (!v) {
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            (void)cudaGetLastError(), major = 0; /* unknown: the CUDA-core kernels run anywhere */
        v = major >= 8 ? 2 : 1;
        if (dev >= 0 && dev < MAXDEV) __atomic_store_n(&cache[dev], v, __ATOMIC_RELAXED);
    }
    return v == 2;
}

} /* namespace */

tc_status cu_op_attn(int dev, const tc_cuda_call *c)
{
    bool bwd = c->op == TC_OP_ATTENTION_BACKWARD;
    if (c->nin != (bwd ? 6 : 3) || c->nout != 2) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(c->op));
    const tc_cuda_view &q = c->in[bwd], &k = c->in[bwd + 1], &v = c->in[bwd + 2];
    int d0 = q.dtype;
    if (d0 != TC_F32 && d0 != TC_F64 && d0 != TC_F16 && d0 != TC_BF16) return cu_unsupported(c);
    if (q.ndim != 3 || k.ndim != 3 || v.ndim != 3)
        return cu_fail(TC_ERR_ARG, "%s: query, key and value must be 3-D", cu_op_name(c->op));
    aargs a{};
    a.N = q.size[0], a.L = q.size[1], a.E = q.size[2], a.S = k.size[1], a.Ev = v.size[2];
    a.scale = c->params.s[0], a.causal = c->params.i[0] != 0;
    a.nqb = (a.L + 63) / 64;
    int64_t wide = a.E > a.Ev ? a.E : a.Ev;
    if (wide > 128)
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: no CUDA kernel for feature sizes above 128 (E %lld, Ev %lld)",
                       cu_op_name(c->op), (long long)a.E, (long long)a.Ev);
    if (a.N * (a.L + a.S) == 0) return TC_OK;
    if (a.N * a.nqb > INT32_MAX || a.N * a.S > INT32_MAX)
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: %lld problems of %lld queries and %lld keys exceed one grid",
                       cu_op_name(c->op), (long long)a.N, (long long)a.L, (long long)a.S);
    dense_call x(dev);
    if (tc_status s = x.make(c)) return s;
    tc_status s = with_float_dtype(d0, c, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        if constexpr (DT == TC_F16 || DT == TC_BF16)
            if (has_mma(dev)) return attn_tensor_cores(dev, c, x, a, wide);
        /* float32 in TF32 only where the flag allows it (as for cuBLAS's products), and only
         * the 64 bucket: a 128-wide float row does not leave the tiles and fragments room */
        if constexpr (DT == TC_F32)
            if (cu_allow_tf32 && wide <= 64 && has_mma(dev)) return attn_tensor_cores(dev, c, x, a, wide);
        return wide <= 64 ? launch<DT, 64>(dev, c, x, a) : launch<DT, 128>(dev, c, x, a);
    });
    return s ? s : x.finish(c);
}
