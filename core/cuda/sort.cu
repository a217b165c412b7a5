/* sort.cu -- CUDA kernels of the sort kind: sort, topk, kthvalue, median, mode
 * (CPU: core/cpu/sort.c; prepare: core/shape_index.c).
 *
 * The order is the CPU's, which is total: NaN ranks above every number, and equal values
 * go by their position along dim (the lower first), in both directions. Any correct sort
 * under a total order gives one answer, so these kernels reproduce the CPU's results
 * exactly (values are copied from the input at the chosen positions, so -0.0 and NaN
 * payloads survive). Every op sorts the whole row and picks from it:
 *   sort      all n in order (i1: descending)
 *   topk      the first k in descending (i2 = largest) or ascending order (always sorted)
 *   kthvalue  ascending position k - 1
 *   median    ascending position (n - 1) / 2, or the first NaN (by position) if any, which
 *             after the sort is the first NaN of the sorted row
 *   mode      the longest run of equal values in the ascending row (the smallest value on
 *             ties), reported at the run's last pair, i.e. the value's last position
 * Rows up to MAXP elements: one block per row, a bitonic sort of (value, position) pairs in
 * shared memory, padded to a power of two with pairs that rank last. Longer rows: keys
 * copied into scratch (floats canonicalised: every NaN to one +NaN, -0.0 to +0.0, so the
 * radix order equals the CPU's; negated or complemented for a descending order),
 * cub's stable pair sort (equal keys keep position order; sort_pairs.h: one row over the
 * whole GPU, several rows by cub's segmented sort), then the picks. The scratch takes about
 * 36 bytes per element with cub's, so many long rows go in chunks of LONG_CHUNK elements
 * (whole rows): topk over GPT-2's logits at batch 16 x 1024 would otherwise want 30 GB.
 * f16/bf16 sort as float (exact). An input sharing memory with an output (an in-place
 * sort) is sorted from a private copy in scratch.
 */
#include "kern.h"
#include "sort_pairs.h"
#include "strided.h"
#include <stdlib.h>

using namespace tck;

namespace {

enum { MAXP = 2048 };
/* Elements per pass of the long-row sort (whole rows, at least one): 64M, about 2.3 GB of
 * scratch with cub's, and enough to fill the GPU. TOCHA_CUDA_SORT_CHUNK (elements) lowers it
 * for tests, whose devices are small. */
constexpr int64_t LONG_CHUNK = (int64_t)1 << 26;
int64_t long_chunk()
{
    const char *e = getenv("TOCHA_CUDA_SORT_CHUNK");
    long long v = e && *e ? atoll(e) : 0;
    return v > 0 ? (int64_t)v : LONG_CHUNK;
}

/* a (value va at position ia) ranks before b: the CPU's asc_/desc_ comparators. */
template <class C> __host__ __device__ inline bool rank_before(C va, int64_t ia, C vb, int64_t ib, bool desc)
{
    bool an = va != va, bn = vb != vb; /* NaN; always false for integers */
    if (desc) {
        if (va > vb) return true;
        if (vb > va) return false;
        return an != bn ? an : ia < ib;
    }
    if (va < vb) return true;
    if (vb < va) return false;
    return an != bn ? bn : ia < ib;
}

/* One compare-exchange of the bitonic network (stage k, partner l > i): whether the pairs
 * at i and l swap so that blocks with (i & k) == 0 end up ascending in rank_before's order
 * and the others descending. Padding (position >= n) ranks after every real pair. */
template <class C>
__host__ __device__ inline bool bitonic_swap(const C *key, const int32_t *pos, int64_t i, int64_t l, int64_t k,
                                             int64_t n, bool desc)
{
    bool pi = pos[i] >= n, pl = pos[l] >= n;
    bool l_first = pi || pl ? (pi && !pl) || (pi && pl && pos[l] < pos[i])
                            : rank_before(key[l], (int64_t)pos[l], key[i], (int64_t)pos[i], desc);
    return (i & k) == 0 ? l_first : !l_first;
}

struct sortargs {
    int op;
    bool desc;
    int64_t n, rows, k;   /* k: topk's count or kthvalue's rank */
    int64_t xs, vs, is;   /* strides along dim: input, values, indices */
    int64_t P;            /* block path: the padded row length */
};

/* Pairs written per row and the op's direction. */
__host__ __device__ inline int64_t out_count(const sortargs &a) { return a.op == TC_OP_SORT ? a.n : a.op == TC_OP_TOPK ? a.k : 1; }

/* Position in the sorted row of the single pair that kthvalue/median/mode report; key(i)
 * reads the sorted row (ascending). */
template <class C, class Key> __host__ __device__ inline int64_t pick_one(const sortargs &a, Key key)
{
    const int64_t n = a.n;
    if (a.op == TC_OP_KTHVALUE) return a.k - 1;
    if (a.op == TC_OP_MEDIAN) {
        C last = key(n - 1);
        if (last == last) return (n - 1) / 2;
        int64_t lo = 0, hi = n - 1; /* the first NaN: NaNs close the ascending row */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            C v = key(mid);
            if (v != v) hi = mid;
            else lo = mid + 1;
        }
        return lo;
    }
    int64_t len = 0, best = 0, run = 1; /* mode */
    for (int64_t i = 0; i < n; i++, run++) {
        if (i + 1 < n && key(i) == key(i + 1)) continue;
        if (run > len) len = run, best = i;
        run = 0;
    }
    return best;
}

/* The block sort's shared memory: P int32 positions, then P keys from this byte offset,
 * 16-byte aligned. (Positions after 1- or 2-byte keys, as they once were, are misaligned
 * for P < 4: a fatal error on a GPU that the emulator, on x86, cannot show.) */
__host__ __device__ inline int64_t keys_at(int64_t P) { return (P * (int64_t)sizeof(int32_t) + 15) / 16 * 16; }

template <int DT>
__global__ void sort_block_kernel(const typename dt<DT>::S *x, typename dt<DT>::S *vals, int64_t *idx, geo<3> rg,
                                  sortargs a)
{
    using C = typename dt<DT>::C;
    extern __shared__ __align__(16) unsigned char smraw[];
    int32_t *pos = (int32_t *)smraw;
    C *key = (C *)(smraw + keys_at(a.P));
    __shared__ int64_t one;
    const int64_t n = a.n, P = a.P, T = blockDim.x;
    const bool desc = a.op == TC_OP_SORT || a.op == TC_OP_TOPK ? a.desc : false;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        int64_t off[3];
        geo_offsets(rg, row, off);
        const typename dt<DT>::S *xp = x + off[0];
        for (int64_t i = threadIdx.x; i < P; i += T) {
            key[i] = i < n ? (C)ld(xp + i * a.xs) : (C)0;
            pos[i] = (int32_t)i;
        }
        __syncthreads();
        for (int64_t k = 2; k <= P; k <<= 1) {
            for (int64_t j = k >> 1; j > 0; j >>= 1) {
                for (int64_t i = threadIdx.x; i < P; i += T) {
                    int64_t l = i ^ j;
                    if (l > i && bitonic_swap(key, pos, i, l, k, n, desc)) {
                        C tk = key[i];
                        key[i] = key[l], key[l] = tk;
                        int32_t tp = pos[i];
                        pos[i] = pos[l], pos[l] = tp;
                    }
                }
                __syncthreads();
            }
        }
        int64_t first = 0, count = out_count(a);
        if (a.op != TC_OP_SORT && a.op != TC_OP_TOPK) {
            if (threadIdx.x == 0) one = pick_one<C>(a, [&](int64_t i) { return key[i]; });
            __syncthreads();
            first = one;
        }
        for (int64_t q = threadIdx.x; q < count; q += T) {
            int64_t p = pos[first + q];
            vals[off[1] + q * a.vs] = xp[p * a.xs];
            idx[off[2] + q * a.is] = p;
        }
        __syncthreads(); /* the row's shared memory is read before the next row loads */
    }
}

/* ---- long rows: cub's segmented sort ------------------------------------------------------- */

template <class C> __host__ __device__ inline C canon(C v)
{
    if constexpr (std::is_floating_point_v<C>) {
        if (v != v) return (C)NAN; /* the positive quiet NaN */
        if (v == 0) return (C)0;   /* -0.0 ranks with +0.0 */
    }
    return v;
}

/* The descending order as an ascending one: negated floats (the canonical +NaN becomes one
 * -NaN, first; all zeros one -0.0), complemented integers (~ reverses every integer order).
 * Ties still keep position order, which both directions want. */
template <class C> __host__ __device__ inline C flip(C v)
{
    if constexpr (std::is_floating_point_v<C>) return -v;
    else return (C)~v;
}

/* The long-row kernels work on a.rows rows from row0 on (one chunk): their scratch holds
 * those rows only. */
template <int DT>
__global__ void load_keys(const typename dt<DT>::S *x, geo<3> rg, sortargs a, int64_t row0, bool desc,
                          typename dt<DT>::C *keys, int64_t *ix)
{
    const int64_t total = a.rows * a.n, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        int64_t row = e / a.n, i = e % a.n, off[3];
        geo_offsets(rg, row0 + row, off);
        typename dt<DT>::C k = canon((typename dt<DT>::C)ld(x + off[0] + i * a.xs));
        keys[e] = desc ? flip(k) : k;
        ix[e] = i;
    }
}

__global__ void seg_offsets(int64_t *offs, int64_t rows, int64_t n)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r <= rows; r += step) offs[r] = r * n;
}

/* sort / topk / kthvalue: pair first + q of each sorted row, q < count. */
template <class S>
__global__ void write_many(const S *x, S *vals, int64_t *idx, geo<3> rg, sortargs a, int64_t row0, const int64_t *six,
                           int64_t first, int64_t count)
{
    const int64_t total = a.rows * count, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        int64_t row = e / count, q = e % count, off[3];
        geo_offsets(rg, row0 + row, off);
        int64_t p = six[row * a.n + first + q];
        vals[off[1] + q * a.vs] = x[off[0] + p * a.xs];
        idx[off[2] + q * a.is] = p;
    }
}

/* median / mode: one thread per row finds its pair in the sorted keys. */
template <class S, class C>
__global__ void write_one(const S *x, S *vals, int64_t *idx, geo<3> rg, sortargs a, int64_t row0, const C *keys,
                          const int64_t *six)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < a.rows; row += step) {
        const C *kr = keys + row * a.n;
        int64_t q = pick_one<C>(a, [&](int64_t i) { return kr[i]; }), off[3];
        geo_offsets(rg, row0 + row, off);
        int64_t p = six[row * a.n + q];
        vals[off[1]] = x[off[0] + p * a.xs];
        idx[off[2]] = p;
    }
}

template <int DT> tc_status sort_long(int dev, const tc_cuda_call *c, const geo<3> &rg, const sortargs &a)
{
    using S = typename dt<DT>::S;
    using C = typename dt<DT>::C;
    const char *name = cu_op_name(c->op);
    const S *x = (const S *)c->in[0].data;
    S *vals = (S *)c->out[0].data;
    int64_t *idx = (int64_t *)c->out[1].data;
    const int64_t chunk = long_chunk(), per = a.n < chunk ? chunk / a.n : 1; /* rows per chunk */
    /* cub's segmented sort copies group sizes to the host and waits when it has many
     * segments (more than 500 in CCCL 3: cccl issue 5661), which a capture cannot record;
     * chunks of one row each take the radix sort, which does not */
    if (a.rows > 1 && per > 1 && cu_capturing(dev))
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "%s: cannot sort %lld rows of %lld elements while a CUDA graph is being captured on cuda:%d "
                       "(cub's segmented sort may wait on the host); sort rows of at most %d, one row, or outside the "
                       "capture",
                       name, (long long)a.rows, (long long)a.n, dev, (int)MAXP);
    sortargs ch = a;
    ch.rows = a.rows < per ? a.rows : per;
    const int64_t total = ch.rows * a.n; /* a chunk's elements; later chunks are no larger */
    scratch kin(dev), kout(dev), iin(dev), iout(dev), offs(dev);
    tc_status s;
    if ((s = kin.get(sizeof(C) * (size_t)total, name)) || (s = kout.get(sizeof(C) * (size_t)total, name)) ||
        (s = iin.get(sizeof(int64_t) * (size_t)total, name)) || (s = iout.get(sizeof(int64_t) * (size_t)total, name)))
        return s;
    if (ch.rows > 1) { /* the segment starts, the same for every chunk (one row needs none) */
        if ((s = offs.get(sizeof(int64_t) * (size_t)(ch.rows + 1), name))) return s;
        seg_offsets<<<grid_for(dev, ch.rows + 1), BLOCK, 0, cu_stream()>>>(offs.as<int64_t>(), ch.rows, a.n);
        if ((s = launched(c))) return s;
    }
    const bool desc = (c->op == TC_OP_SORT || c->op == TC_OP_TOPK) && a.desc;
    const int64_t count = out_count(a), first = c->op == TC_OP_KTHVALUE ? a.k - 1 : 0;
    for (int64_t row0 = 0; row0 < a.rows; row0 += ch.rows) {
        ch.rows = a.rows - row0 < per ? a.rows - row0 : per;
        load_keys<DT><<<grid_for(dev, ch.rows * a.n), BLOCK, 0, cu_stream()>>>(x, rg, ch, row0, desc, kin.as<C>(),
                                                                                 iin.as<int64_t>());
        if ((s = launched(c))) return s;
        scratch tmp(dev); /* cub's own; freed stream-ordered after each chunk */
        if ((s = sort_pairs<C>(tmp, kin.as<C>(), kout.as<C>(), iin.as<int64_t>(), iout.as<int64_t>(), ch.rows, a.n,
                               offs.as<int64_t>(), name)))
            return s;
        if (c->op == TC_OP_MEDIAN || c->op == TC_OP_MODE)
            write_one<S, C><<<grid_for(dev, ch.rows), BLOCK, 0, cu_stream()>>>(x, vals, idx, rg, ch, row0, kout.as<C>(),
                                                                               iout.as<int64_t>());
        else if (count > 0)
            write_many<S><<<grid_for(dev, ch.rows * count), BLOCK, 0, cu_stream()>>>(x, vals, idx, rg, ch, row0,
                                                                                   iout.as<int64_t>(), first, count);
        if ((s = launched(c))) return s;
    }
    return TC_OK;
}

/* Strides of an output over x's nd dims: its own, or 0 at dim where dim was dropped. */
void out_strides(const tc_cuda_view &o, int nd, int dim, int64_t *st)
{
    for (int d = 0, od = 0; d < nd; d++) {
        if (o.ndim == nd) st[d] = o.stride[d];
        else st[d] = d == dim ? 0 : o.stride[od++];
    }
}

} /* namespace */

tc_status cu_op_sort(int dev, const tc_cuda_call *c)
{
    if (c->nin < 1 || c->nout < 2) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(c->op));
    if (c->in[0].dtype == TC_BOOL) return cu_unsupported(c);
    /* An output sharing memory with x (an in-place sort): the call reads a private copy. */
    scratch aside(dev);
    tc_cuda_view xcopy;
    tc_cuda_call cc;
    if (views_overlap(c->out[0], c->in[0]) || views_overlap(c->out[1], c->in[0])) {
        if (tc_status s = cu_private_copy(dev, &c->in[0], &xcopy, &aside.p, cu_op_name(c->op))) return s;
        cc = *c, cc.in = &xcopy, c = &cc;
    }
    const tc_cuda_view &x = c->in[0], &v = c->out[0], &ix = c->out[1];
    if (v.numel == 0 || x.numel == 0) return TC_OK;
    if (!x.data || !v.data || !ix.data) return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(c->op));
    const tc_params &p = c->params;
    int nd = x.ndim > 0 ? x.ndim : 1;
    int64_t dim = p.i[0] < 0 ? p.i[0] + nd : p.i[0];
    if (dim < 0 || dim >= nd)
        return cu_fail(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim input", cu_op_name(c->op),
                       (long long)p.i[0], x.ndim);
    int d = (int)dim;
    int64_t size[MAXD], xst[MAXD], vst[MAXD], ist[MAXD];
    for (int i = 0; i < nd; i++) size[i] = x.ndim ? x.size[i] : 1, xst[i] = x.ndim ? x.stride[i] : 0;
    out_strides(v, nd, d, vst);
    out_strides(ix, nd, d, ist);
    sortargs a{};
    a.op = c->op;
    a.n = size[d];
    a.xs = xst[d], a.vs = vst[d], a.is = ist[d];
    a.rows = x.numel / a.n;
    if (c->op == TC_OP_SORT) a.desc = p.i[1] != 0;
    if (c->op == TC_OP_TOPK) a.desc = p.i[2] != 0, a.k = x.ndim ? p.i[1] : 1; /* 0-dim: one pair, as the CPU */
    if (c->op == TC_OP_KTHVALUE) a.k = p.i[1];
    if ((c->op == TC_OP_TOPK && (a.k < 0 || a.k > a.n)) || (c->op == TC_OP_KTHVALUE && (a.k < 1 || a.k > a.n)))
        return cu_fail(TC_ERR_INDEX, "%s: k %lld out of range for a dim of size %lld", cu_op_name(c->op),
                       (long long)a.k, (long long)a.n);
    if (out_count(a) == 0) return TC_OK;
    geo<3> rg{};
    for (int i = 0; i < nd; i++) {
        if (i == d) continue;
        rg.size[rg.nd] = size[i];
        rg.st[0][rg.nd] = xst[i], rg.st[1][rg.nd] = vst[i], rg.st[2][rg.nd] = ist[i];
        rg.nd++;
    }
    geo_coalesce(rg);
    return with_dtype(x.dtype, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        if constexpr (DT == TC_BOOL) {
            return cu_unsupported(c);
        } else {
            using S = typename dt<DT>::S;
            using C = typename dt<DT>::C;
            if (a.n > MAXP) return sort_long<DT>(dev, c, rg, a);
            sortargs b = a;
            b.P = 1;
            while (b.P < a.n) b.P *= 2;
            int threads = (int)(b.P / 2 < 32 ? 32 : b.P / 2 > BLOCK ? BLOCK : b.P / 2);
            size_t smem = (size_t)keys_at(b.P) + (size_t)b.P * sizeof(C);
            unsigned grid = (unsigned)(a.rows < (int64_t)sm_count(dev) * 32 ? a.rows : (int64_t)sm_count(dev) * 32);
            sort_block_kernel<DT><<<grid, threads, smem, cu_stream()>>>((const S *)x.data, (S *)v.data, (int64_t *)ix.data, rg, b);
            return launched(c);
        }
    });
}
