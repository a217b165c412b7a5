/* attention_tc.cu -- the ATTN kind's (ops.def) kernels on tensor cores: fused scaled
 * dot-product attention and its backward, flash-attention 2 style, every product a warp-wide
 * mma.sync (mma.h) with float accumulators. float16 / bfloat16 always (from compute
 * capability 8.0), float32 when TF32 is allowed (torch.backends.cuda.matmul.allow_tf32) and
 * E, Ev <= 64: its operands rounded to TF32, as cuBLAS's TF32 products round them. One
 * source for all three: frag<H> (mma.h) says how an element type fills the fragments. The
 * CUDA-core kernels and the op's entry are in attention.cu, which states the algorithm;
 * CPU twin: core/cpu/attention.c.
 *
 * A block is 4 warps. Each warp owns 16 rows (queries in the forward and dq kernels, keys in
 * dkdv) and keeps them as A fragments in registers; the block streams 64-row tiles of the
 * other side through shared memory (rows padded by 16 bytes, so the fragment loads of the 8
 * row groups fall in different banks):
 *   forward  S = Q K^T, online softmax on S's D fragments (row max and sum over the 4 lanes
 *            of a row with shuffles), O += P V with P's fragments rounded to the operands'
 *            type as A;
 *   dq       S = Q K^T, dP = dO V^T, dS = P (dP - D_i), dQ += dS K;
 *   dkdv     the transposed products: S^T = K Q^T, dP^T = V dO^T, dV += P^T dO,
 *            dK += dS^T Q (32-query tiles when a 64-wide row is over 128 bytes, to keep the
 *            accumulators in registers).
 * The softmax runs in base 2 (scores times scale log2 e, exp2f); lse is stored in base e.
 * P and dS are rounded to the operands' type before their products, as in FlashAttention;
 * everything else accumulates in float, and results round once at the store.
 * NOTE: compiled with nvcc 13 but never run on a GPU (docs/cuda.md); over the emulator the
 * same kernels run with mma.h's shuffled products, which follow the instructions' fragment
 * layouts, against every golden and CPU case.
 */
#include "attention.h"
#include "mma.h"
#include <math.h>

using namespace tck;

namespace {

constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
constexpr int WARPS = 4, ROWS = 16 * WARPS, KT = 64; /* rows per block; key tile */

/* The tiles' element type of H and a tile row's padding (16 bytes). */
template <class H> using elem = typename frag<H>::T;
template <class H> constexpr int pad = 16 / (int)sizeof(elem<H>);

/* The A fragments of rows [r0, r0 + 16) of the (R, C) row-major m, columns [0, D) (zeros
 * past R and C). */
template <class H, int D>
__device__ __forceinline__ void load_rows_a(uint32_t (*f)[4], const H *m, int64_t r0, int64_t R, int64_t C)
{
    using F = frag<H>;
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    auto at = [&](int64_t r, int64_t c) -> uint32_t { return r < R && c < C ? F::bits(m[r * C + c]) : 0u; };
#pragma unroll
    for (int kk = 0; kk < D / F::K; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) {
            int64_t r = r0 + g + 8 * (x & 1), c = kk * F::K + F::EPR * t + F::K / 2 * (x >> 1);
            if constexpr (F::EPR == 2) f[kk][x] = pack2(at(r, c), at(r, c + 1));
            else f[kk][x] = at(r, c);
        }
}

/* Rows [r0, r0 + NR) of the (R, C) row-major m into tile (zeros past R and C): 16-byte copies
 * when a row is exactly the tile's width and m is 16-byte aligned (a view's offset may not
 * be). */
template <class H, int D, int NR>
__device__ __forceinline__ void load_tile(elem<H> (*tile)[D + pad<H>], const H *m, int64_t r0, int64_t R, int64_t C)
{
    using F = frag<H>;
    constexpr int V = 16 / (int)sizeof(H); /* elements per 16 bytes */
    if (C == D && reinterpret_cast<uintptr_t>(m) % 16 == 0) {
        for (int x = threadIdx.x; x < NR * D / V; x += blockDim.x) {
            int r = x / (D / V), c = x % (D / V) * V;
            if (r0 + r < R) F::tile16(&tile[r][c], m + (r0 + r) * C + c);
            else
                for (int e = 0; e < V; e++) tile[r][c + e] = elem<H>(0.0f);
        }
        return;
    }
    for (int x = threadIdx.x; x < NR * D; x += blockDim.x) {
        int r = x / D, c = x % D;
        tile[r][c] = r0 + r < R && c < C ? F::to_tile(m[(r0 + r) * C + c]) : elem<H>(0.0f);
    }
}

/* The block's next key tile: keys [j0, j0 + KT) of k and v into ks and vs, between barriers
 * (every warp calls it). Returns whether the warp's rows attend any of them (j0 < mine). */
template <class H, int D>
__device__ __forceinline__ bool next_kv_tile(elem<H> (*ks)[D + pad<H>], elem<H> (*vs)[D + pad<H>], const H *kn,
                                             const H *vn, int64_t j0, int64_t mine, const aargs &a)
{
    __syncthreads();
    load_tile<H, D, KT>(ks, kn, j0, a.S, a.E);
    load_tile<H, D, KT>(vs, vn, j0, a.S, a.Ev);
    __syncthreads();
    return j0 < mine;
}

/* d[nt] += A (16 x D) times rows [8 nt, 8 nt + 8) of tile, transposed: the scores of the
 * warp's 16 rows against the tile's NT * 8 rows. */
template <class H, int D, int NT>
__device__ __forceinline__ void times_rows(float (*d)[4], const uint32_t (*a)[4], const elem<H> (*tile)[D + pad<H>])
{
    using F = frag<H>;
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int kk = 0; kk < D / F::K; kk++) {
            const elem<H> *row = tile[nt * 8 + g] + kk * F::K + F::EPR * t;
            uint32_t b[2] = {F::reg(row), F::reg(row + F::K / 2)};
            F::mma(d[nt], a[kk], b);
        }
}

/* acc (16 x D) += P (16 x K KN, as D fragments p) times rows [0, K KN) of tile. */
template <class H, int D, int KN>
__device__ __forceinline__ void accumulate(float (*acc)[4], const float (*p)[4], const elem<H> (*tile)[D + pad<H>])
{
    using F = frag<H>;
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int kk = 0; kk < KN; kk++) {
        uint32_t a[4];
        F::a_from_d(a, p, kk);
        const elem<H> *rows = tile[kk * F::K + 2 * t];
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++) {
            uint32_t b[2];
            F::template b_rows<D + pad<H>>(b, rows, nt * 8 + g);
            F::mma(acc[nt], a, b);
        }
    }
}

/* Sum (or max) of v over the 4 lanes holding a row's fragments. */
__device__ __forceinline__ float row_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float row_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

template <class H, int D>
__global__ void __launch_bounds__(128) attn_forward_tc(const H *q, const H *k, const H *v, H *out, float *lse, aargs a)
{
    __shared__ __align__(16) elem<H> ks[KT][D + pad<H>], vs[KT][D + pad<H>];
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const int64_t n = blockIdx.x / a.nqb, i0 = (blockIdx.x % a.nqb) * (int64_t)ROWS, r0 = i0 + warp * 16;
    const int64_t live[2] = {live_keys(a, r0 + g), live_keys(a, r0 + g + 8)};
    const int64_t nkeys = block_keys(a, i0, ROWS), mine = r0 < a.L ? block_keys(a, r0, 16) : 0;
    const H *kn = k + n * a.S * a.E, *vn = v + n * a.S * a.Ev;
    uint32_t qa[D / frag<H>::K][4];
    load_rows_a<H, D>(qa, q + n * a.L * a.E, r0, a.L, a.E);
    const float sl = (float)a.scale * LOG2E;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}, o[D / 8][4] = {};
    for (int64_t j0 = 0; j0 < nkeys; j0 += KT) {
        if (!next_kv_tile<H, D>(ks, vs, kn, vn, j0, mine, a)) continue;
        float s[KT / 8][4] = {};
        times_rows<H, D, KT / 8>(s, qa, ks);
        float mt[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int64_t j = j0 + nt * 8 + 2 * t + (e & 1);
                s[nt][e] = j < live[e / 2] ? s[nt][e] * sl : -INFINITY;
                mt[e / 2] = fmaxf(mt[e / 2], s[nt][e]); /* NaN never wins: it reaches l through exp2 */
            }
        float base[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mt[h] = row_max(mt[h]);
            base[h] = mt[h] == -INFINITY ? 0.f : mt[h]; /* m = -inf: alpha 0, o and l are 0 */
            float alpha = exp2f(m[h] - base[h]);
            l[h] *= alpha, m[h] = mt[h];
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++) o[nt][2 * h] *= alpha, o[nt][2 * h + 1] *= alpha;
        }
#pragma unroll
        for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[nt][e] = exp2f(s[nt][e] - base[e / 2]), l[e / 2] += s[nt][e];
        accumulate<H, D, KT / frag<H>::K>(o, s, vs);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t i = r0 + g + 8 * h;
        float sum = row_sum(l[h]);
        if (i >= a.L) continue;
        float inv = 1.0f / sum;
        H *op = out + (n * a.L + i) * a.Ev;
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++)
                if (nt * 8 + 2 * t + c < a.Ev) st(op + nt * 8 + 2 * t + c, o[nt][2 * h + c] * inv);
        if (t == 0) lse[n * a.L + i] = m[h] * LN2 + logf(sum);
    }
}

/* gq, and D_i = sum(gout * out) per query row into drow for the dkdv kernel. */
template <class H, int D>
__global__ void __launch_bounds__(128) attn_dq_tc(const H *gout, const H *q, const H *k, const H *v, const H *out,
                                                  const float *lse, H *gq, float *drow, aargs a)
{
    __shared__ __align__(16) elem<H> ks[KT][D + pad<H>], vs[KT][D + pad<H>];
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const int64_t n = blockIdx.x / a.nqb, i0 = (blockIdx.x % a.nqb) * (int64_t)ROWS, r0 = i0 + warp * 16;
    const int64_t live[2] = {live_keys(a, r0 + g), live_keys(a, r0 + g + 8)};
    const int64_t nkeys = block_keys(a, i0, ROWS), mine = r0 < a.L ? block_keys(a, r0, 16) : 0;
    const H *kn = k + n * a.S * a.E, *vn = v + n * a.S * a.Ev;
    uint32_t qa[D / frag<H>::K][4], ga[D / frag<H>::K][4];
    load_rows_a<H, D>(qa, q + n * a.L * a.E, r0, a.L, a.E);
    load_rows_a<H, D>(ga, gout + n * a.L * a.Ev, r0, a.L, a.Ev);
    float di[2], lse2[2];
#pragma unroll
    for (int h = 0; h < 2; h++) { /* each lane's columns of gout, then the row's 4 lanes */
        int64_t i = r0 + g + 8 * h, row = n * a.L + i;
        float acc = 0;
        for (int64_t c = 2 * t; i < a.L && c < a.Ev; c += 8)
            for (int64_t e = c; e < c + 2 && e < a.Ev; e++) acc += ld(gout + row * a.Ev + e) * ld(out + row * a.Ev + e);
        di[h] = row_sum(acc);
        lse2[h] = i < a.L ? lse[row] * LOG2E : 0.f;
        if (i < a.L && t == 0) drow[row] = di[h];
    }
    const float sl = (float)a.scale * LOG2E;
    float dq[D / 8][4] = {};
    for (int64_t j0 = 0; j0 < nkeys; j0 += KT) {
        if (!next_kv_tile<H, D>(ks, vs, kn, vn, j0, mine, a)) continue;
        float s[KT / 8][4] = {}, dp[KT / 8][4] = {};
        times_rows<H, D, KT / 8>(s, qa, ks);
        times_rows<H, D, KT / 8>(dp, ga, vs);
#pragma unroll
        for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int64_t j = j0 + nt * 8 + 2 * t + (e & 1);
                float p = j < live[e / 2] ? exp2f(s[nt][e] * sl - lse2[e / 2]) : 0.f;
                s[nt][e] = p * (dp[nt][e] - di[e / 2]);
            }
        accumulate<H, D, KT / frag<H>::K>(dq, s, ks);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t i = r0 + g + 8 * h;
        if (i >= a.L) continue;
        H *gp = gq + (n * a.L + i) * a.E;
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++)
                if (nt * 8 + 2 * t + c < a.E) st(gp + nt * 8 + 2 * t + c, dq[nt][2 * h + c] * (float)a.scale);
    }
}

/* gk and gv of 64 key rows per block (16 per warp); grid: nkb blocks per problem. */
template <class H, int D>
__global__ void __launch_bounds__(128) attn_dkdv_tc(const H *gout, const H *q, const H *k, const H *v,
                                                    const float *lse, const float *drow, H *gkv, int64_t nkb, aargs a)
{
    constexpr int QT = D * sizeof(elem<H>) <= 128 ? 64 : 32; /* query tile */
    __shared__ __align__(16) elem<H> qs[QT][D + pad<H>], gs[QT][D + pad<H>];
    __shared__ float ls[QT], ds[QT];
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const int64_t n = blockIdx.x / nkb, j0 = (blockIdx.x % nkb) * (int64_t)ROWS, c0 = j0 + warp * 16;
    const H *qn = q + n * a.L * a.E, *gn = gout + n * a.L * a.Ev;
    uint32_t ka[D / frag<H>::K][4], va[D / frag<H>::K][4];
    load_rows_a<H, D>(ka, k + n * a.S * a.E, c0, a.S, a.E);
    load_rows_a<H, D>(va, v + n * a.S * a.Ev, c0, a.S, a.Ev);
    const float sl = (float)a.scale * LOG2E;
    float dk[D / 8][4] = {}, dv[D / 8][4] = {};
    /* causal: queries before j0 attend none of these keys */
    for (int64_t i0 = a.causal ? j0 / QT * QT : 0; i0 < a.L; i0 += QT) {
        __syncthreads();
        load_tile<H, D, QT>(qs, qn, i0, a.L, a.E);
        load_tile<H, D, QT>(gs, gn, i0, a.L, a.Ev);
        for (int r = threadIdx.x; r < QT; r += blockDim.x) {
            bool in = i0 + r < a.L;
            ls[r] = in ? lse[n * a.L + i0 + r] * LOG2E : 0.f, ds[r] = in ? drow[n * a.L + i0 + r] : 0.f;
        }
        __syncthreads();
        if (c0 >= a.S || (a.causal && i0 + QT <= c0)) continue; /* no key here, or no query reaches them */
        float s[QT / 8][4] = {}, dp[QT / 8][4] = {};
        times_rows<H, D, QT / 8>(s, ka, qs);
        times_rows<H, D, QT / 8>(dp, va, gs);
#pragma unroll
        for (int nt = 0; nt < QT / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int col = nt * 8 + 2 * t + (e & 1);
                int64_t i = i0 + col, j = c0 + g + 8 * (e / 2);
                bool on = i < a.L && j < a.S && !(a.causal && j > i);
                float p = on ? exp2f(s[nt][e] * sl - ls[col]) : 0.f;
                s[nt][e] = p, dp[nt][e] = p * (dp[nt][e] - ds[col]);
            }
        accumulate<H, D, QT / frag<H>::K>(dv, s, gs);
        accumulate<H, D, QT / frag<H>::K>(dk, dp, qs);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t j = c0 + g + 8 * h;
        if (j >= a.S) continue;
        H *gp = gkv + (n * a.S + j) * (a.E + a.Ev);
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                int e = nt * 8 + 2 * t + c;
                if (e < a.E) st(gp + e, dk[nt][2 * h + c] * (float)a.scale);
                if (e < a.Ev) st(gp + a.E + e, dv[nt][2 * h + c]);
            }
    }
}

template <class H, int D> tc_status launch_tc(int dev, const tc_cuda_call *c, dense_call &x, const aargs &a)
{
    cudaStream_t st = cu_stream();
    if (c->op == TC_OP_ATTENTION) {
        if (a.N * a.L == 0) return TC_OK;
        attn_forward_tc<H, D><<<(unsigned)(a.N * a.nqb), 128, 0, st>>>(
            (const H *)x.in[0].data, (const H *)x.in[1].data, (const H *)x.in[2].data, (H *)x.out[0].data,
            (float *)x.out[1].data, a);
        return launched(c);
    }
    if (a.N * a.S == 0) return TC_OK; /* gq has no elements either (L = 0 or N = 0) */
    scratch drow(dev);
    if (a.L > 0) {
        if (tc_status s = drow.get((size_t)(a.N * a.L) * sizeof(float), "attention_backward")) return s;
        attn_dq_tc<H, D><<<(unsigned)(a.N * a.nqb), 128, 0, st>>>(
            (const H *)x.in[0].data, (const H *)x.in[1].data, (const H *)x.in[2].data, (const H *)x.in[3].data,
            (const H *)x.in[4].data, (const float *)x.in[5].data, (H *)x.out[0].data, drow.as<float>(), a);
        if (tc_status s = launched(c)) return s;
    }
    int64_t nkb = (a.S + ROWS - 1) / ROWS;
    attn_dkdv_tc<H, D><<<(unsigned)(a.N * nkb), 128, 0, st>>>(
        (const H *)x.in[0].data, (const H *)x.in[1].data, (const H *)x.in[2].data, (const H *)x.in[3].data,
        (const float *)x.in[5].data, drow.as<float>(), (H *)x.out[1].data, nkb, a);
    return launched(c);
}

} /* namespace */

tc_status tck::attn_tensor_cores(int dev, const tc_cuda_call *c, dense_call &x, const aargs &a, int64_t wide)
{
    switch (c->in[c->op == TC_OP_ATTENTION_BACKWARD].dtype) {
    case TC_F16: return wide <= 64 ? launch_tc<__half, 64>(dev, c, x, a) : launch_tc<__half, 128>(dev, c, x, a);
    case TC_BF16:
        return wide <= 64 ? launch_tc<__nv_bfloat16, 64>(dev, c, x, a) : launch_tc<__nv_bfloat16, 128>(dev, c, x, a);
    case TC_F32:
        if (wide <= 64) return launch_tc<float, 64>(dev, c, x, a);
        break;
    }
    return cu_fail(TC_ERR_ARG, "%s: no tensor-core kernel for %s with feature size %lld", cu_op_name(c->op),
                   cu_dtype_name(c->in[c->op == TC_OP_ATTENTION_BACKWARD].dtype), (long long)wide);
}
