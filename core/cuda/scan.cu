/* scan.cu -- CUDA kernels of the scan kind: cumsum and cumprod along a dim
 * (CPU: core/cpu/scan.c; prepare: core/shape_reduce.c).
 *
 * The running value is a double for float inputs (f16/bf16 widen through float) and a
 * uint64 for integers (wrapping, so integer results are exact in any order), stored in the
 * input type at each step; half types round through float as the CPU's float32 detour
 * does. Lines (the elements along dim) are laid out over the other dims, coalesced.
 *   thread per line  short lines, or dim outer to a contiguous dim (neighbouring threads
 *                    read neighbouring addresses): a plain sequential scan, the CPU's
 *                    order exactly, so even float results match bit for bit;
 *   block per line   long lines: tiles of BLOCK*ITEMS elements, each thread scanning ITEMS
 *                    neighbours and a block-wide scan of the thread totals, with a carry
 *                    from tile to tile;
 *   chunks           few long lines: each line is cut into chunks, the chunk totals are
 *                    folded by separate blocks, prefixed per line, and every chunk is then
 *                    scanned from its start value in parallel (as the CPU's chunked driver).
 * Float sums in the block paths associate differently from the CPU: rounding-level
 * differences. Each element is read before its slot is written (by the same block), so
 * the in-place form (out = in) is safe.
 */
#include "kern.h"

using namespace tck;

namespace {

enum { ITEMS = 4, TILE = BLOCK * ITEMS, NWARPS = BLOCK / 32 };

/* The accumulator of dtype DT: double for floats, uint64 for integers. */
template <int DT> using acc_of = std::conditional_t<dt<DT>::FL, double, unsigned long long>;

template <int DT, class S> __device__ __forceinline__ acc_of<DT> lift(const S *p)
{
    if constexpr (dt<DT>::FL) return (double)ld(p);
    else return (unsigned long long)(int64_t)ld(p);
}

template <bool PROD, class A> __device__ __forceinline__ A op(A a, A b) { return PROD ? a * b : a + b; }
template <bool PROD, class A> __device__ __forceinline__ A ident() { return PROD ? (A)1 : (A)0; }

struct scargs {
    int64_t nlines, n, xs, ys; /* lines, their length, strides along dim */
    int64_t nch, chunk;        /* chunks per line and their length (1 and n when unsplit) */
};

/* One thread scans a whole line, in order. */
template <int DT, bool PROD>
__global__ void scan_line_kernel(const typename dt<DT>::S *x, typename dt<DT>::S *y, geo<2> lg, scargs a)
{
    using A = acc_of<DT>;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t li = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; li < a.nlines; li += step) {
        int64_t off[2];
        geo_offsets(lg, li, off);
        const typename dt<DT>::S *xp = x + off[0];
        typename dt<DT>::S *yp = y + off[1];
        A acc = ident<PROD, A>();
        for (int64_t k = 0; k < a.n; k++) {
            acc = op<PROD>(acc, lift<DT>(xp + k * a.xs));
            st(yp + k * a.ys, acc);
        }
    }
}

/* Exclusive scan of v over the block's threads in thread order; *total gets the block's
 * total. Every thread calls it. */
template <bool PROD, class A> __device__ A block_excl(A v, A *wsm, A *total)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    A inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        A t = __shfl_up_sync(full, inc, o);
        if (lane >= o) inc = op<PROD>(t, inc);
    }
    if (lane == 31) wsm[w] = inc;
    __syncthreads();
    if (w == 0) {
        A wi = lane < NWARPS ? wsm[lane] : ident<PROD, A>();
        for (int o = 1; o < 32; o <<= 1) {
            A t = __shfl_up_sync(full, wi, o);
            if (lane >= o) wi = op<PROD>(t, wi);
        }
        if (lane < NWARPS) wsm[lane] = wi; /* inclusive over warps */
    }
    __syncthreads();
    A before = w > 0 ? wsm[w - 1] : ident<PROD, A>();
    A prev = __shfl_up_sync(full, inc, 1);
    if (lane == 0) prev = ident<PROD, A>();
    *total = wsm[NWARPS - 1];
    __syncthreads(); /* wsm is free for the next call */
    return op<PROD>(before, prev);
}

/* Block u scans chunk u % nch of line u / nch from start[u] (the identity when start is
 * NULL), a tile at a time. */
template <int DT, bool PROD>
__global__ void __launch_bounds__(BLOCK)
    scan_block_kernel(const typename dt<DT>::S *x, typename dt<DT>::S *y, geo<2> lg, scargs a, const acc_of<DT> *start)
{
    using A = acc_of<DT>;
    __shared__ A wsm[NWARPS];
    const int64_t units = a.nlines * a.nch;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        int64_t off[2];
        geo_offsets(lg, u / a.nch, off);
        const typename dt<DT>::S *xp = x + off[0];
        typename dt<DT>::S *yp = y + off[1];
        const int64_t r0 = (u % a.nch) * a.chunk, r1 = a.n < r0 + a.chunk ? a.n : r0 + a.chunk;
        A carry = start ? start[u] : ident<PROD, A>();
        for (int64_t t0 = r0; t0 < r1; t0 += TILE) {
            const int64_t k0 = t0 + (int64_t)threadIdx.x * ITEMS;
            A p[ITEMS];
            A run = ident<PROD, A>();
            for (int j = 0; j < ITEMS; j++) {
                if (k0 + j < r1) run = op<PROD>(run, lift<DT>(xp + (k0 + j) * a.xs));
                p[j] = run;
            }
            A total;
            A before = op<PROD>(carry, block_excl<PROD>(run, wsm, &total));
            for (int j = 0; j < ITEMS; j++)
                if (k0 + j < r1) st(yp + (k0 + j) * a.ys, op<PROD>(before, p[j]));
            carry = op<PROD>(carry, total);
        }
    }
}

/* Chunk totals: block u folds chunk u (a fixed tree over the block). */
template <int DT, bool PROD>
__global__ void __launch_bounds__(BLOCK) chunk_total_kernel(const typename dt<DT>::S *x, geo<2> lg, scargs a, acc_of<DT> *tot)
{
    using A = acc_of<DT>;
    __shared__ A sm[BLOCK];
    const int64_t units = a.nlines * a.nch;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        int64_t off[2];
        geo_offsets(lg, u / a.nch, off);
        const typename dt<DT>::S *xp = x + off[0];
        const int64_t r0 = (u % a.nch) * a.chunk, r1 = a.n < r0 + a.chunk ? a.n : r0 + a.chunk;
        A v = ident<PROD, A>();
        for (int64_t k = r0 + threadIdx.x; k < r1; k += BLOCK) v = op<PROD>(v, lift<DT>(xp + k * a.xs));
        __syncthreads();
        sm[threadIdx.x] = v;
        for (int s = BLOCK / 2; s > 0; s >>= 1) {
            __syncthreads();
            if ((int)threadIdx.x < s) sm[threadIdx.x] = op<PROD>(sm[threadIdx.x], sm[threadIdx.x + s]);
        }
        if (threadIdx.x == 0) tot[u] = sm[0];
    }
}

/* Per line: the chunk totals turned into each chunk's start value (exclusive, in order). */
template <int DT, bool PROD> __global__ void chunk_prefix_kernel(scargs a, acc_of<DT> *tot)
{
    using A = acc_of<DT>;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t li = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; li < a.nlines; li += step) {
        A run = ident<PROD, A>();
        for (int64_t ch = 0; ch < a.nch; ch++) {
            A t = tot[li * a.nch + ch];
            tot[li * a.nch + ch] = run;
            run = op<PROD>(run, t);
        }
    }
}

template <int DT, bool PROD> tc_status run_scan(int dev, const tc_cuda_call *c, const geo<2> &lg, scargs a, bool per_line)
{
    using S = typename dt<DT>::S;
    using A = acc_of<DT>;
    const S *x = (const S *)c->in[0].data;
    S *y = (S *)c->out[0].data;
    if (per_line) {
        scan_line_kernel<DT, PROD><<<grid_for(dev, a.nlines), BLOCK, 0, cu_stream()>>>(x, y, lg, a);
        return launched(c);
    }
    int64_t units = a.nlines * a.nch;
    unsigned grid = (unsigned)(units < (int64_t)sm_count(dev) * 16 ? units : (int64_t)sm_count(dev) * 16);
    scratch tot(dev);
    if (a.nch > 1) {
        tc_status s = tot.get(sizeof(A) * (size_t)units, cu_op_name(c->op));
        if (s) return s;
        chunk_total_kernel<DT, PROD><<<grid, BLOCK, 0, cu_stream()>>>(x, lg, a, tot.as<A>());
        if ((s = launched(c))) return s;
        chunk_prefix_kernel<DT, PROD><<<grid_for(dev, a.nlines), BLOCK, 0, cu_stream()>>>(a, tot.as<A>());
        if ((s = launched(c))) return s;
    }
    scan_block_kernel<DT, PROD><<<grid, BLOCK, 0, cu_stream()>>>(x, y, lg, a, a.nch > 1 ? tot.as<A>() : nullptr);
    return launched(c);
}

} /* namespace */

tc_status cu_op_scan(int dev, const tc_cuda_call *c)
{
    if (c->nin < 1 || c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(c->op));
    const tc_cuda_view &x = c->in[0], &y = c->out[0];
    if (x.dtype == TC_BOOL) return cu_unsupported(c);
    if (x.numel == 0) return TC_OK;
    if (!x.data || !y.data) return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(c->op));
    if (views_overlap(x, y) && !same_view(x, y)) return cu_unsupported(c);
    int nd = x.ndim > 0 ? x.ndim : 1;
    int64_t dim = c->params.i[0];
    if (dim < 0) dim += nd;
    if (dim < 0 || dim >= nd)
        return cu_fail(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim input", cu_op_name(c->op),
                       (long long)c->params.i[0], x.ndim);
    int d = (int)dim;
    scargs a{};
    geo<2> lg{};
    if (x.ndim == 0) {
        a.n = 1, a.xs = 0, a.ys = 0;
    } else {
        a.n = x.size[d], a.xs = x.stride[d], a.ys = y.stride[d];
        lg.nd = strides_without(x, d, lg.size, lg.st[0]);
        strides_without(y, d, nullptr, lg.st[1]);
    }
    a.nlines = x.numel / a.n;
    geo_coalesce(lg);
    bool cols = a.xs != 1 && lg.nd > 0 && lg.st[0][lg.nd - 1] == 1 && a.nlines >= 1024;
    bool per_line = cols || a.n <= 32;
    a.nch = 1, a.chunk = a.n;
    int64_t sms = sm_count(dev);
    if (!per_line && a.nlines < 2 * sms && a.n > 4 * TILE) { /* few long lines: chunks */
        int64_t want = (4 * sms + a.nlines - 1) / a.nlines, most = a.n / (4 * TILE);
        a.nch = want < most ? want : most;
        if (a.nch > 1024) a.nch = 1024;
        if (a.nch < 1) a.nch = 1;
        a.chunk = (a.n + a.nch - 1) / a.nch;
        a.nch = (a.n + a.chunk - 1) / a.chunk;
    }
    bool prod = c->op == TC_OP_CUMPROD;
    return with_dtype(x.dtype, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        if constexpr (DT == TC_BOOL) {
            return cu_unsupported(c);
        } else {
            return prod ? run_scan<DT, true>(dev, c, lg, a, per_line) : run_scan<DT, false>(dev, c, lg, a, per_line);
        }
    });
}
