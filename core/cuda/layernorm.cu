/* layernorm.cu -- the CUDA kernels of layer_norm and layer_norm_backward (the NORM kind,
 * ops.def; cu_op_norm in dnn_bn.cu hands them here). CPU twin: core/cpu/layernorm.c.
 *
 * x (made dense) is (M, K): M rows of K values, each normalised on its own.
 *   forward   one warp per row (LN_ROWS rows a block, grid-stride over rows): the lanes sum
 *             the row (a shuffle tree adds the lanes), then the squared deviations from the
 *             mean (two passes: no cancellation), then write y = (x - mean) rstd w + b and the
 *             row's mean and rstd. The row is read three times; after the first, from cache.
 *   backward  two or three kernels, no atomics, so the sums do not depend on timing:
 *             gx     one warp per row, as the forward: sh = sum h and shx = sum h xhat
 *                    (h = g w, xhat = (x - mean) rstd), then gx = h rstd + xhat (-rstd shx
 *                    / K) - rstd sh / K;
 *             gwb    the weight and bias gradients sum g xhat and g over the rows: a block
 *                    takes 32 columns of one chunk of rows (32 x 8 threads, reads coalesced
 *                    along the row), its 8 row lanes added in a fixed order into the chunk's
 *                    partial sums; a last kernel adds the chunks in order (skipped when there
 *                    is one chunk: the block writes the result itself).
 * The chunk count is fixed by M alone, not by the device, so every GPU gives the same bits.
 * Every kernel computes in float (double for f64), reading f16/bf16 through ld(); the
 * weight and bias are x's dtype or float32 beside a half x (the W parameter). Strided
 * operands are made dense first, and a result that overlaps an input goes through scratch
 * (dense_call.h).
 * NOTE: compiled with nvcc 13 but never run on a GPU (docs/cuda.md); over the emulator
 * every golden case runs through them.
 */
#include "dense_call.h"
#include <math.h>

using namespace tck;

namespace {

enum { LN_THREADS = 128, LN_ROWS = LN_THREADS / 32 }; /* a warp per row */
enum { GW_COLS = 32, GW_LANES = 8 };                  /* the gwb kernel's block: 32 columns x 8 row lanes */

struct lnargs {
    int64_t M, K;
    double eps;
};

template <class C> __device__ __forceinline__ C warp_sum(C v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <int DT, class W>
__global__ void __launch_bounds__(LN_THREADS) ln_forward_kernel(const typename dt<DT>::S *x, const W *w, const W *b,
                                                                typename dt<DT>::S *y, typename dt<DT>::C *stats,
                                                                lnargs a)
{
    using C = typename dt<DT>::C;
    const int lane = threadIdx.x % 32;
    /* r is the same for the whole warp, so every lane takes part in each shuffle */
    for (int64_t r = blockIdx.x * (int64_t)LN_ROWS + threadIdx.x / 32; r < a.M; r += (int64_t)gridDim.x * LN_ROWS) {
        const auto *xr = x + r * a.K;
        C s = 0;
        for (int64_t i = lane; i < a.K; i += 32) s += (C)ld(xr + i);
        const C mean = warp_sum(s) / (C)a.K;
        C q = 0;
        for (int64_t i = lane; i < a.K; i += 32) {
            C d = (C)ld(xr + i) - mean;
            q += d * d;
        }
        const C rstd = (C)1 / sqrt(warp_sum(q) / (C)a.K + (C)a.eps);
        auto *yr = y + r * a.K;
        for (int64_t i = lane; i < a.K; i += 32) {
            C v = ((C)ld(xr + i) - mean) * rstd;
            if (w) v *= (C)ld(w + i);
            if (b) v += (C)ld(b + i);
            st(yr + i, v);
        }
        if (lane == 0) stats[r] = mean, stats[a.M + r] = rstd;
    }
}

template <int DT, class W>
__global__ void __launch_bounds__(LN_THREADS)
    ln_backward_gx_kernel(const typename dt<DT>::S *g, const typename dt<DT>::S *x, const W *w,
                          const typename dt<DT>::C *stats, typename dt<DT>::S *gx, lnargs a)
{
    using C = typename dt<DT>::C;
    const int lane = threadIdx.x % 32;
    for (int64_t r = blockIdx.x * (int64_t)LN_ROWS + threadIdx.x / 32; r < a.M; r += (int64_t)gridDim.x * LN_ROWS) {
        const auto *xr = x + r * a.K, *gr = g + r * a.K;
        const C mean = stats[r], rstd = stats[a.M + r];
        C sh = 0, shx = 0;
        for (int64_t i = lane; i < a.K; i += 32) {
            C h = (C)ld(gr + i);
            if (w) h *= (C)ld(w + i);
            sh += h, shx += h * (((C)ld(xr + i) - mean) * rstd);
        }
        sh = warp_sum(sh), shx = warp_sum(shx);
        const C k2 = -rstd * shx / (C)a.K, k3 = -rstd * sh / (C)a.K;
        auto *out = gx + r * a.K;
        for (int64_t i = lane; i < a.K; i += 32) {
            C h = (C)ld(gr + i);
            if (w) h *= (C)ld(w + i);
            st(out + i, h * rstd + ((C)ld(xr + i) - mean) * rstd * k2 + k3);
        }
    }
}

/* Chunk `chunk` (rows [chunk * rows, ...)) of the weight / bias sums, for 32 columns per block;
 * grid: ncb column blocks per chunk. part: (nchunks, 2, K), or the (2, K) result itself. */
template <int DT>
__global__ void __launch_bounds__(GW_COLS *GW_LANES)
    ln_backward_gwb_kernel(const typename dt<DT>::S *g, const typename dt<DT>::S *x, const typename dt<DT>::C *stats,
                           typename dt<DT>::C *part, int64_t rows, int64_t ncb, lnargs a)
{
    using C = typename dt<DT>::C;
    __shared__ C sw[GW_LANES][GW_COLS], sb[GW_LANES][GW_COLS];
    const int64_t chunk = blockIdx.x / ncb, col = (blockIdx.x % ncb) * GW_COLS + threadIdx.x % GW_COLS;
    const int tc = threadIdx.x % GW_COLS, tl = threadIdx.x / GW_COLS;
    const int64_t r0 = chunk * rows, r1 = r0 + rows < a.M ? r0 + rows : a.M;
    C aw = 0, ab = 0;
    if (col < a.K)
        for (int64_t r = r0 + tl; r < r1; r += GW_LANES) {
            C gv = (C)ld(g + r * a.K + col);
            aw += gv * (((C)ld(x + r * a.K + col) - stats[r]) * stats[a.M + r]);
            ab += gv;
        }
    sw[tl][tc] = aw, sb[tl][tc] = ab;
    __syncthreads();
    if (tl != 0 || col >= a.K) return;
    C tw = 0, tb = 0;
#pragma unroll
    for (int l = 0; l < GW_LANES; l++) tw += sw[l][tc], tb += sb[l][tc];
    part[chunk * 2 * a.K + col] = tw;
    part[chunk * 2 * a.K + a.K + col] = tb;
}

/* gwb[i] = sum over the chunks of part[c][i], in chunk order (i < 2K). */
template <class C> __global__ void ln_sum_chunks_kernel(const C *part, C *gwb, int64_t nchunks, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        C s = 0;
        for (int64_t c = 0; c < nchunks; c++) s += part[c * n + i];
        gwb[i] = s;
    }
}

/* Rows per chunk of the weight / bias sums: at least 128, at most 128 chunks. */
static int64_t chunk_rows(int64_t M)
{
    int64_t rows = (M + 127) / 128;
    return rows > 128 ? rows : 128;
}

template <int DT, class W> static tc_status launch(int dev, const tc_cuda_call *c, dense_call &d, lnargs a)
{
    using S = typename dt<DT>::S;
    using C = typename dt<DT>::C;
    cudaStream_t st = cu_stream();
    unsigned row_blocks = cu_blocks_for(a.M, LN_ROWS);
    if (c->op == TC_OP_LAYER_NORM) {
        ln_forward_kernel<DT, W><<<row_blocks, LN_THREADS, 0, st>>>((const S *)d.in[0].data, (const W *)d.in[1].data,
                                                                    (const W *)d.in[2].data, (S *)d.out[0].data,
                                                                    (C *)d.out[1].data, a);
        return launched(c);
    }
    const S *g = (const S *)d.in[0].data, *x = (const S *)d.in[1].data;
    const C *stats = (const C *)d.in[3].data;
    ln_backward_gx_kernel<DT, W><<<row_blocks, LN_THREADS, 0, st>>>(g, x, (const W *)d.in[2].data, stats,
                                                                    (S *)d.out[0].data, a);
    if (tc_status s = launched(c)) return s;
    int64_t rows = chunk_rows(a.M), nchunks = (a.M + rows - 1) / rows, ncb = (a.K + GW_COLS - 1) / GW_COLS;
    C *gwb = (C *)d.out[1].data;
    scratch part(dev);
    if (nchunks > 1)
        if (tc_status s = part.get((size_t)(nchunks * 2 * a.K) * sizeof(C), "layer_norm_backward")) return s;
    ln_backward_gwb_kernel<DT><<<(unsigned)(nchunks * ncb), GW_COLS * GW_LANES, 0, st>>>(
        g, x, stats, nchunks > 1 ? part.as<C>() : gwb, rows, ncb, a);
    if (tc_status s = launched(c)) return s;
    if (nchunks == 1) return TC_OK;
    ln_sum_chunks_kernel<C><<<cu_blocks_for(2 * a.K, BLOCK), BLOCK, 0, st>>>(part.as<C>(), gwb, nchunks, 2 * a.K);
    return launched(c);
}

} /* namespace */

tc_status cu_op_layer_norm(int dev, const tc_cuda_call *c)
{
    bool bw = c->op == TC_OP_LAYER_NORM_BACKWARD;
    const char *what = cu_op_name(c->op);
    if (c->nin != (bw ? 4 : 3) || c->nout != 2) return cu_fail(TC_ERR_ARG, "%s: bad call", what);
    const tc_cuda_view &x = c->in[bw], &w = c->in[bw + 1];
    int d0 = x.dtype, wdt = w.data ? w.dtype : !bw && c->in[2].data ? c->in[2].dtype : d0;
    if (d0 != TC_F32 && d0 != TC_F64 && d0 != TC_F16 && d0 != TC_BF16) return cu_unsupported(c);
    int64_t nd = c->params.i[0];
    if (nd < 1 || nd > x.ndim) return cu_fail(TC_ERR_ARG, "%s: bad normalised dims %lld", what, (long long)nd);
    lnargs a{1, 1, c->params.s[0]};
    for (int i = 0; i < x.ndim; i++) (i < x.ndim - nd ? a.M : a.K) *= x.size[i];
    if (bw && a.M == 0) return cu_strided_scale(&c->out[1], 0, what); /* sums of no rows */
    if (a.M == 0 || a.K == 0) return TC_OK;
    int64_t ncb = (a.K + GW_COLS - 1) / GW_COLS;
    if (ncb * ((a.M + chunk_rows(a.M) - 1) / chunk_rows(a.M)) > INT32_MAX)
        return cu_fail(TC_ERR_UNSUPPORTED, "%s: %lld rows of %lld values exceed one grid", what, (long long)a.M,
                       (long long)a.K);
    dense_call d(dev);
    if (tc_status s = d.make(c)) return s;
    tc_status s = with_float_dtype(d0, c, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        using S = typename dt<DT>::S;
        using C = typename dt<DT>::C;
        return wdt == d0 ? launch<DT, S>(dev, c, d, a) : launch<DT, C>(dev, c, d, a);
    });
    return s ? s : d.finish(c);
}
