/* index.cu -- CUDA kernels of the index kind: index_select/copy/add/fill, gather,
 * scatter/scatter_add/scatter_fill, masked_fill/copy/select and nonzero
 * (CPU: core/cpu/index.c; shapes and params: core/shape_index.c, ops.def).
 *
 * As on the CPU, one loop shape L and up to four operands describe each op: W (written),
 * R (read), I (the int64 index, or the mask) and, for the ops whose duplicates must resolve
 * like the CPU's, W's row-major element number. An "indirect" operand has stride 0 along
 * dim in L; its position there is the index value times its own stride along dim.
 *   index_select  L = out     W out, R src (indirect), I idx along dim
 *   index_copy    L = src     W dst (indirect), R src, I idx along dim
 *   index_add/fill            likewise (fill: L = dst with idx's length along dim, no R)
 *   gather        L = idx     W out, R src (indirect), I idx
 *   scatter(_add/_fill) L = idx  W dst (indirect), R src, I idx
 * One thread per element of L. The copies move elements by size (1/2/4/8 bytes).
 *
 * Duplicates. index_add and scatter_add add atomically (float adds then land in any order:
 * sums differ from the CPU's by rounding only; f16/bf16 use the hardware's half atomics,
 * which round after each add where the CPU rounds once through float32; integers wrap and
 * are exact, int8/uint8/int16 through a compare-and-swap on the enclosing 32-bit word).
 * index_copy and scatter write, on the CPU, in L's row-major order, so the LAST writer of
 * an element wins. Here the same: a first pass takes the largest position aiming at each
 * destination (atomicMax into a table in scratch), the second lets only that writer store.
 * index_copy writes whole slices, and the last writer of slice v is the last index entry
 * equal to v: the table has one entry per slice (the dst's size along dim), filled by a
 * pass over the index alone. scatter's writers are elements: the table has one entry per
 * (idx position outside dim, value along dim), never more than dst's elements. With no
 * possible duplicate (index_copy of at most one index, scatter with idx one long along
 * dim: a max/min-over-dim backward, a one-hot) there is no table and one pass.
 * Results equal the CPU's exactly, duplicates or not.
 *
 * Masked ops: masked_fill is one pass. masked_copy, masked_select and nonzero place the
 * k-th selected element at k: a flag per element of L, an exclusive prefix sum over them
 * (cub::DeviceScan, in place; 4 bytes an element, 8 past 2^32 elements) and a pass that
 * writes each selected element at its prefix. Their
 * result sizes were counted on the host (shape_index.c); the kernels trust them.
 *
 * Index values are bounds-checked on the host (shape_index.c), except in work captured in a
 * CUDA graph (a graph cannot wait for the host): there the check is the kernel's. A value
 * outside the dim is skipped (nothing outside the tensors is read or written) and the first
 * such value is recorded in the device's error word (cuda_api.h version 5, stream.cu), which
 * libtocha reads at its next wait for the device and reports (docs/cuda.md).
 * "out is dst" ops copy dst into out first unless they run in place. An input sharing
 * memory with the output (other than the dst an in-place op updates) is read from a private
 * copy in scratch, so no thread reads what another has written: the CPU's result, where
 * every input is read before the result changes.
 */
#include "kern.h"
#include "strided.h"
#include <cub/cub.cuh>
#include <string.h>

using namespace tck;

namespace {

enum { K_COPY, K_ADD, K_FILL };
enum { OW, OR, OI, OL };

struct ixargs {
    int64_t n;                /* elements of L */
    int64_t wdim, rdim, ldim; /* strides along dim of the indirect W, R and W's element number */
    bool w_ind, r_ind;
    int64_t vmax;   /* size of the indexed dim: a value outside [0, vmax) is skipped */
    uint64_t fill;  /* K_FILL: the value's bytes */
    long long *win; /* last-writer rule: the winners' table, or NULL */
    bool win_slice; /* index_copy: win[v] is the last index position equal to v (off[OL]) */
    tc_cuda_devcheck *err; /* the device's error word (NULL before its first capture) */
    int32_t op, dim;       /* what a bad index records there */
};

/* The first bad index of the device wins the word; later ones leave it. */
__device__ void note_bad_index(const ixargs &a, int64_t v)
{
    if (!a.err || atomicCAS((int *)&a.err->op, -1, (int)a.op) != -1) return;
    a.err->dim = a.dim;
    a.err->value = v;
    a.err->size = a.vmax;
}

/* ---- atomic adds per storage type ------------------------------------------------------- */

__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(__half *p, __half v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(__nv_bfloat16 *p, __nv_bfloat16 v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
__device__ __forceinline__ void atomic_add(int64_t *p, int64_t v)
{
    atomicAdd((unsigned long long *)p, (unsigned long long)v); /* two's complement: wraps */
}
/* 1- and 2-byte integers: add inside the aligned 32-bit word holding them. The word lies
 * inside the allocation (device blocks are 512-byte aligned and sized). */
template <class T> __device__ void atomic_add_narrow(T *p, T v)
{
    uintptr_t a = (uintptr_t)p;
    unsigned int *w = (unsigned int *)(a & ~(uintptr_t)3);
    unsigned int shift = (unsigned int)(a & 3) * 8u;
    unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int add = (unsigned int)(uint64_t)(int64_t)v;
    unsigned int old = *w, assumed;
    do {
        assumed = old;
        unsigned int cur = (assumed & mask) >> shift;
        unsigned int nv = ((cur + add) << shift) & mask;
        old = atomicCAS(w, assumed, (assumed & ~mask) | nv);
    } while (old != assumed);
}
__device__ __forceinline__ void atomic_add(uint8_t *p, uint8_t v) { atomic_add_narrow(p, v); }
__device__ __forceinline__ void atomic_add(int8_t *p, int8_t v) { atomic_add_narrow(p, v); }
__device__ __forceinline__ void atomic_add(int16_t *p, int16_t v) { atomic_add_narrow(p, v); }

/* ---- kernels ------------------------------------------------------------------------------ */

/* T: the storage type (K_ADD) or an unsigned type of the element's size (moves). */
template <class T, int KIND>
__global__ void ix_kernel(T *w, const T *r, const int64_t *idx, geo<4> L, ixargs a, int pass)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < a.n; lin += step) {
        int64_t off[4];
        geo_offsets(L, lin, off);
        int64_t v = idx[off[OI]];
        if ((uint64_t)v >= (uint64_t)a.vmax) {
            if (pass == 1) note_bad_index(a, v); /* the last pass only: once per element */
            continue;
        }
        if (a.win) {
            long long *slot = a.win + (a.win_slice ? v : off[OL] + v * a.ldim);
            long long mine = a.win_slice ? (long long)off[OL] : (long long)lin;
            if (pass == 0) {
                atomicMax(slot, mine);
                continue;
            }
            if (*slot != mine) continue; /* a later position writes this element */
        }
        T *wp = w + off[OW] + (a.w_ind ? v * a.wdim : 0);
        if constexpr (KIND == K_FILL) {
            T fv;
            memcpy(&fv, &a.fill, sizeof fv);
            *wp = fv;
        } else {
            const T *rp = r + off[OR] + (a.r_ind ? v * a.rdim : 0);
            if constexpr (KIND == K_COPY) *wp = *rp;
            else atomic_add(wp, *rp);
        }
    }
}

/* index_copy's first pass: win[v] = the last position of the n-entry index holding v. */
__global__ void last_index_kernel(const int64_t *idx, int64_t n, int64_t ist, int64_t vmax, long long *win)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t v = idx[i * ist];
        if ((uint64_t)v < (uint64_t)vmax) atomicMax(win + v, (long long)i);
    }
}

/* out = in, same dtype and shape (the copy of dst into a separate out). */
template <class T> __global__ void copy_kernel(T *w, const T *r, geo<2> L, int64_t n)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < n; lin += step) {
        int64_t off[2];
        geo_offsets(L, lin, off);
        w[off[0]] = r[off[1]];
    }
}

template <class T> __global__ void mfill_kernel(T *w, const uint8_t *m, geo<2> L, int64_t n, uint64_t fill)
{
    T fv;
    memcpy(&fv, &fill, sizeof fv);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < n; lin += step) {
        int64_t off[2];
        geo_offsets(L, lin, off);
        if (m[off[1]]) w[off[0]] = fv;
    }
}

/* flags[lin] = 1 where the mask (operand 0 of L) is set. P: the flags' and their prefix's
 * type (with_pos). */
template <class P> __global__ void mask_flags(const uint8_t *m, geo<1> L, int64_t n, P *flags)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < n; lin += step) {
        int64_t off[1];
        geo_offsets(L, lin, off);
        flags[lin] = m[off[0]] != 0;
    }
}

/* masked_copy: the k-th set element of dst (L's order) takes src's k-th element (src's own
 * row-major order, shape sg). pos: the exclusive prefix of the flags. */
template <class T, class P>
__global__ void mcopy_kernel(T *w, const uint8_t *m, geo<2> L, int64_t n, const P *pos, const T *src, geo<1> sg)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < n; lin += step) {
        int64_t off[2];
        geo_offsets(L, lin, off);
        if (m[off[1]]) w[off[0]] = src[flat_offset((int64_t)pos[lin], sg.nd, sg.size, sg.st[0])];
    }
}

/* masked_select: out[pos] = src where the mask is set (L: src and mask broadcast). */
template <class T, class P>
__global__ void mselect_kernel(T *out, int64_t ost, const T *src, const uint8_t *m, geo<2> L, int64_t n, const P *pos)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < n; lin += step) {
        int64_t off[2];
        geo_offsets(L, lin, off);
        if (m[off[1]]) out[(int64_t)pos[lin] * ost] = src[off[0]];
    }
}

/* tc_elem_nonzero: NaN counts as set; -0 of the half types is zero (bits & 0x7fff). */
template <class S> __device__ __forceinline__ bool nonzero_at(const S *p) { return *p != 0; }
__device__ __forceinline__ bool nonzero_at(const __half *p) { return (__half_as_ushort(*p) & 0x7fff) != 0; }
__device__ __forceinline__ bool nonzero_at(const __nv_bfloat16 *p) { return (__bfloat16_as_ushort(*p) & 0x7fff) != 0; }
__device__ __forceinline__ bool nonzero_at(const bool *p) { return *(const uint8_t *)p != 0; }

/* nonzero: pass 0 writes the flags, pass 1 the multi-index rows (g: x's own dims,
 * uncoalesced, so positions decompose into coordinates). */
template <class S, class P>
__global__ void nonzero_kernel(const S *x, geo<1> g, int64_t n, P *pos, int pass, int64_t *out, int64_t ost, int64_t cst)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; lin < n; lin += step) {
        int64_t off[1];
        geo_offsets(g, lin, off);
        bool set = nonzero_at(x + off[0]);
        if (pass == 0) {
            pos[lin] = set;
            continue;
        }
        if (!set) continue;
        int64_t *row = out + (int64_t)pos[lin] * ost, rem = lin;
        for (int d = g.nd - 1; d >= 0; d--) {
            row[d * cst] = rem % g.size[d];
            rem /= g.size[d];
        }
    }
}

/* ---- host side -------------------------------------------------------------------------------- */

/* A 0-dim view as the 1-dim view of its one element (stride 0); the CPU loops it as (1). */
tc_cuda_view norm(const tc_cuda_view &v)
{
    tc_cuda_view r = v;
    if (r.ndim == 0) r.ndim = 1, r.size[0] = r.numel = v.data ? 1 : 0, r.stride[0] = 0;
    return r;
}

bool writes_dst(int op)
{
    switch (op) {
    case TC_OP_INDEX_COPY:
    case TC_OP_INDEX_ADD:
    case TC_OP_INDEX_FILL:
    case TC_OP_SCATTER:
    case TC_OP_SCATTER_ADD:
    case TC_OP_SCATTER_FILL:
    case TC_OP_MASKED_FILL:
    case TC_OP_MASKED_COPY: return true;
    default: return false;
    }
}

int64_t numel_of(int nd, const int64_t *sz)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    return n;
}

/* The fill value's bytes in dtype d, as tc_store_double (core/dtype.c) stores them. */
uint64_t fill_bits(int d, double v)
{
    auto sat = [](double x, double lo, double hi) -> int64_t {
        if (x != x) return 0;
        if (x <= lo) return (int64_t)lo;
        if (x >= hi) return (int64_t)hi;
        return (int64_t)x;
    };
    uint64_t b = 0;
    switch (d) {
    case TC_F32: { float f = (float)v; memcpy(&b, &f, 4); break; }
    case TC_F64: memcpy(&b, &v, 8); break;
    case TC_F16: { __half h = __float2half_rn((float)v); memcpy(&b, &h, 2); break; }
    case TC_BF16: { __nv_bfloat16 h = __float2bfloat16_rn((float)v); memcpy(&b, &h, 2); break; }
    case TC_U8: b = (uint8_t)sat(v, 0, 255); break;
    case TC_I8: b = (uint8_t)(int8_t)sat(v, -128, 127); break;
    case TC_I16: b = (uint16_t)(int16_t)sat(v, -32768, 32767); break;
    case TC_I32: b = (uint32_t)(int32_t)sat(v, -2147483648.0, 2147483647.0); break;
    case TC_I64: b = (uint64_t)sat(v, -9223372036854775808.0, 9223372036854774784.0); break;
    default: b = v != 0; break;
    }
    return b;
}

/* Calls f((T *)0) with T the unsigned type of es bytes. */
template <class F> tc_status with_size(size_t es, F &&f)
{
    switch (es) {
    case 1: return f((uint8_t *)nullptr);
    case 2: return f((uint16_t *)nullptr);
    case 4: return f((uint32_t *)nullptr);
    default: return f((uint64_t *)nullptr);
    }
}

/* Broadcast strides of mask m (right-aligned) over the nd-dim shape sz. */
void bcast_strides(const tc_cuda_view &m, int nd, const int64_t *sz, int64_t *st)
{
    for (int d = 0; d < nd; d++) {
        int md = d - (nd - m.ndim);
        st[d] = md < 0 || m.size[md] == 1 || sz[d] == 1 ? 0 : m.stride[md];
    }
}

struct ixcall {
    int dev;
    const tc_cuda_call *c;
    int elem_dt;
};

/* Row-major element strides of a shape (the last-writer table's). */
void contig_strides(int nd, const int64_t *sz, int64_t *st)
{
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) st[d] = s, s *= sz[d];
}

/* What the ix kernels run for one index_* / gather / scatter call (host-testable). */
struct ixplan {
    geo<4> L;
    ixargs a;
    int kind;
    bool last;         /* the last-writer rule (index_copy, scatter with possible duplicates) */
    int64_t win_numel; /* its table's entries */
    const void *r;
    const int64_t *idx;
    int64_t idx_n, idx_st; /* index_copy: the index's entries and stride (the table's pass) */
};

/* Runs the ix kernel family over P.L (not yet coalesced): one pass, or the two of the
 * last-writer rule when P.last is set. */
tc_status run_ix(const ixcall &x, void *w, const ixplan &P)
{
    geo<4> L = P.L;
    ixargs a = P.a;
    a.n = numel_of(L.nd, L.size);
    if (a.n == 0) return TC_OK;
    geo_coalesce(L);
    scratch win(x.dev);
    int first = 1; /* the first ix_kernel pass: 0 fills the table, 1 writes */
    if (P.last) {
        size_t bytes = sizeof(long long) * (size_t)P.win_numel;
        tc_status s = win.get(bytes, cu_op_name(x.c->op));
        if (s) return s;
        if ((s = cu_check(cudaMemsetAsync(win.p, 0xff, bytes, cu_stream()), "index: memset"))) return s;
        a.win = win.as<long long>();
        if (a.win_slice) {
            last_index_kernel<<<grid_for(x.dev, P.idx_n), BLOCK, 0, cu_stream()>>>(P.idx, P.idx_n, P.idx_st, a.vmax,
                                                                                  a.win);
            if ((s = launched(x.c))) return s;
        } else {
            first = 0;
        }
    }
    unsigned grid = grid_for(x.dev, a.n);
    const void *r = P.r;
    const int64_t *idx = P.idx;
    if (P.kind == K_ADD) {
        return with_dtype(x.elem_dt, [&](auto tag) -> tc_status {
            constexpr int DT = decltype(tag)::value;
            if constexpr (DT == TC_BOOL) {
                return cu_unsupported(x.c);
            } else {
                using S = typename dt<DT>::S;
                ix_kernel<S, K_ADD><<<grid, BLOCK, 0, cu_stream()>>>((S *)w, (const S *)r, idx, L, a, 1);
                return launched(x.c);
            }
        });
    }
    return with_size(elsize(x.elem_dt), [&](auto tp) -> tc_status {
        using T = std::remove_pointer_t<decltype(tp)>;
        for (int pass = first; pass < 2; pass++) {
            if (P.kind == K_FILL) ix_kernel<T, K_FILL><<<grid, BLOCK, 0, cu_stream()>>>((T *)w, (const T *)r, idx, L, a, pass);
            else ix_kernel<T, K_COPY><<<grid, BLOCK, 0, cu_stream()>>>((T *)w, (const T *)r, idx, L, a, pass);
            tc_status s = launched(x.c);
            if (s) return s;
        }
        return TC_OK;
    });
}

ixplan plan_ix(int op, int d, const tc_cuda_view &out, const tc_cuda_view *in, double value)
{
    const tc_cuda_view &a0 = in[0], &ix = in[1];
    ixplan P{};
    geo<4> &L = P.L;
    ixargs &a = P.a;
    int &kind = P.kind;
    bool &last = P.last;
    const void *&r = P.r;
    const int64_t *&idx = P.idx;
    kind = K_COPY;
    idx = (const int64_t *)ix.data;
    int64_t ist = ix.ndim ? ix.stride[0] : 0; /* index_*: idx is 0- or 1-dim */
    switch (op) {
    case TC_OP_INDEX_SELECT: /* L = out; R = src indirect; I along dim */
        L.nd = out.ndim;
        for (int i = 0; i < L.nd; i++) {
            L.size[i] = out.size[i];
            L.st[OW][i] = out.stride[i];
            L.st[OR][i] = i == d ? 0 : a0.stride[i];
            L.st[OI][i] = i == d ? ist : 0;
        }
        a.r_ind = true, a.rdim = a0.stride[d], a.vmax = a0.size[d];
        r = a0.data;
        break;
    case TC_OP_INDEX_COPY:
    case TC_OP_INDEX_ADD:
    case TC_OP_INDEX_FILL: { /* L = src (fill: dst with idx's length); W = dst indirect */
        const tc_cuda_view *src = op == TC_OP_INDEX_FILL ? nullptr : &in[2];
        L.nd = out.ndim;
        for (int i = 0; i < L.nd; i++) {
            L.size[i] = src ? src->size[i] : (i == d ? ix.numel : out.size[i]);
            L.st[OW][i] = i == d ? 0 : out.stride[i];
            L.st[OR][i] = src ? src->stride[i] : 0;
            L.st[OI][i] = i == d ? ist : 0;
            L.st[OL][i] = i == d ? 1 : 0; /* the index position: the table's value */
        }
        a.w_ind = true, a.wdim = out.stride[d], a.vmax = out.size[d];
        kind = op == TC_OP_INDEX_ADD ? K_ADD : op == TC_OP_INDEX_FILL ? K_FILL : K_COPY;
        last = op == TC_OP_INDEX_COPY && ix.numel > 1;
        a.win_slice = true, P.win_numel = out.size[d], P.idx_n = ix.numel, P.idx_st = ist;
        r = src ? src->data : nullptr;
        break;
    }
    case TC_OP_GATHER: /* L = idx; R = src indirect */
        L.nd = ix.ndim;
        for (int i = 0; i < L.nd; i++) {
            L.size[i] = ix.size[i];
            L.st[OW][i] = out.stride[i];
            L.st[OR][i] = i == d ? 0 : a0.stride[i];
            L.st[OI][i] = ix.stride[i];
        }
        a.r_ind = true, a.rdim = a0.stride[d], a.vmax = a0.size[d];
        r = a0.data;
        break;
    default: { /* scatter, scatter_add, scatter_fill: L = idx; W = dst indirect */
        const tc_cuda_view *src = op == TC_OP_SCATTER_FILL ? nullptr : &in[2];
        int64_t tsz[MAXD], tst[MAXD]; /* the table: idx's shape, dst's size along dim */
        L.nd = ix.ndim;
        for (int i = 0; i < L.nd; i++) tsz[i] = i == d ? out.size[d] : ix.size[i];
        contig_strides(L.nd, tsz, tst);
        for (int i = 0; i < L.nd; i++) {
            L.size[i] = ix.size[i];
            L.st[OW][i] = i == d ? 0 : out.stride[i];
            L.st[OR][i] = src ? src->stride[i] : 0;
            L.st[OI][i] = ix.stride[i];
            L.st[OL][i] = i == d ? 0 : tst[i];
        }
        a.w_ind = true, a.wdim = out.stride[d], a.ldim = L.nd ? tst[d] : 0, a.vmax = out.size[d];
        kind = op == TC_OP_SCATTER_ADD ? K_ADD : op == TC_OP_SCATTER_FILL ? K_FILL : K_COPY;
        last = op == TC_OP_SCATTER && L.nd > 0 && ix.size[d] > 1;
        P.win_numel = numel_of(L.nd, tsz);
        r = src ? src->data : nullptr;
        break;
    }
    }
    if (kind == K_FILL) a.fill = fill_bits(out.dtype, value);
    return P;
}

tc_status index_family(const ixcall &x, int op, int d, const tc_cuda_view &out, const tc_cuda_view *in, double value)
{
    ixplan P = plan_ix(op, d, out, in, value);
    P.a.err = cu_devcheck_word(x.dev), P.a.op = op, P.a.dim = d;
    if (numel_of(P.L.nd, P.L.size) > 0 && (!P.idx || (P.kind != K_FILL && !P.r)))
        return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(op));
    return run_ix(x, out.data, P);
}

/* Calls f((P *)0) with P the type of the masked ops' flags and positions over n elements:
 * 32-bit while every count fits (half the scratch of 64-bit ones), else int64_t. */
template <class F> tc_status with_pos(int64_t n, F &&f)
{
    if (n <= (int64_t)UINT32_MAX) return f((uint32_t *)nullptr);
    return f((int64_t *)nullptr);
}

/* Exclusive prefix sum of n flags, in place. */
template <class P> tc_status prefix(const ixcall &x, P *flags, int64_t n)
{
    size_t bytes = 0;
    tc_status s = cu_check(cub::DeviceScan::ExclusiveSum(nullptr, bytes, flags, flags, n, cu_stream()), cu_op_name(x.c->op));
    if (s) return s;
    scratch tmp(x.dev);
    if ((s = tmp.get(bytes ? bytes : 1, cu_op_name(x.c->op)))) return s;
    return cu_check(cub::DeviceScan::ExclusiveSum(tmp.p, bytes, flags, flags, n, cu_stream()), cu_op_name(x.c->op));
}

/* The loop of a masked op: [0] the data operand (dst, or src for masked_select), [1] the
 * mask, broadcast (host-testable). */
geo<2> plan_masked(int op, const tc_cuda_view &out, const tc_cuda_view *in)
{
    const tc_cuda_view &a0 = in[0], &m = in[1];
    geo<2> L{};
    if (op == TC_OP_MASKED_SELECT) { /* L = src and mask broadcast together */
        L.nd = a0.ndim > m.ndim ? a0.ndim : m.ndim;
        for (int i = 0; i < L.nd; i++) {
            int ai = i - (L.nd - a0.ndim), mi = i - (L.nd - m.ndim);
            int64_t as = ai >= 0 ? a0.size[ai] : 1, ms = mi >= 0 ? m.size[mi] : 1;
            L.size[i] = as == 1 ? ms : as;
        }
        bcast_strides(a0, L.nd, L.size, L.st[0]);
    } else { /* L = dst */
        L.nd = out.ndim;
        for (int i = 0; i < L.nd; i++) L.size[i] = out.size[i], L.st[0][i] = out.stride[i];
    }
    bcast_strides(m, L.nd, L.size, L.st[1]);
    return L;
}

tc_status masked_family(const ixcall &x, int op, const tc_cuda_view &out, const tc_cuda_view *in, double value)
{
    const tc_cuda_view &m = in[1];
    geo<2> L = plan_masked(op, out, in);
    int64_t n = numel_of(L.nd, L.size);
    /* masked_copy from an empty source: the host found no set element (shape_index.c) */
    if (n == 0 || (op == TC_OP_MASKED_COPY && (in[2].numel == 0 || !in[2].data))) return TC_OK;
    if (!m.data || (op != TC_OP_MASKED_FILL && !in[op == TC_OP_MASKED_COPY ? 2 : 0].data))
        return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(op));
    geo_coalesce(L);
    unsigned grid = grid_for(x.dev, n);
    const uint8_t *mp = (const uint8_t *)m.data;
    if (op == TC_OP_MASKED_FILL) {
        uint64_t fill = fill_bits(out.dtype, value);
        return with_size(elsize(out.dtype), [&](auto tp) -> tc_status {
            using T = std::remove_pointer_t<decltype(tp)>;
            mfill_kernel<T><<<grid, BLOCK, 0, cu_stream()>>>((T *)out.data, mp, L, n, fill);
            return launched(x.c);
        });
    }
    return with_pos(n, [&](auto pp) -> tc_status {
        using P = std::remove_pointer_t<decltype(pp)>;
        scratch pos(x.dev);
        tc_status s = pos.get(sizeof(P) * (size_t)n, cu_op_name(op));
        if (s) return s;
        geo<1> mg{};
        mg.nd = L.nd;
        for (int i = 0; i < L.nd; i++) mg.size[i] = L.size[i], mg.st[0][i] = L.st[1][i];
        mask_flags<P><<<grid, BLOCK, 0, cu_stream()>>>(mp, mg, n, pos.as<P>());
        if ((s = launched(x.c)) || (s = prefix(x, pos.as<P>(), n))) return s;
        if (op == TC_OP_MASKED_COPY) {
            const tc_cuda_view &src = in[2];
            geo<1> sg{};
            sg.nd = src.ndim;
            for (int i = 0; i < src.ndim; i++) sg.size[i] = src.size[i], sg.st[0][i] = src.stride[i];
            geo_coalesce(sg);
            return with_size(elsize(out.dtype), [&](auto tp) -> tc_status {
                using T = std::remove_pointer_t<decltype(tp)>;
                mcopy_kernel<T, P><<<grid, BLOCK, 0, cu_stream()>>>((T *)out.data, mp, L, n, pos.as<P>(),
                                                                   (const T *)src.data, sg);
                return launched(x.c);
            });
        }
        int64_t ost = out.ndim ? out.stride[0] : 0;
        return with_size(elsize(out.dtype), [&](auto tp) -> tc_status {
            using T = std::remove_pointer_t<decltype(tp)>;
            mselect_kernel<T, P><<<grid, BLOCK, 0, cu_stream()>>>((T *)out.data, ost, (const T *)in[0].data, mp, L, n,
                                                                 pos.as<P>());
            return launched(x.c);
        });
    });
}

tc_status nonzero_op(const ixcall &x, const tc_cuda_view &out, const tc_cuda_view &src)
{
    /* out is (count, ndim); a 0-dim source gives (count, 0): nothing to write. */
    if (out.numel == 0 || src.ndim == 0 || src.numel == 0) return TC_OK;
    if (!src.data || !out.data) return cu_fail(TC_ERR_ARG, "nonzero: missing device data");
    geo<1> g{};
    g.nd = src.ndim;
    for (int i = 0; i < g.nd; i++) g.size[i] = src.size[i], g.st[0][i] = src.stride[i];
    int64_t n = src.numel;
    unsigned grid = grid_for(x.dev, n);
    return with_pos(n, [&](auto pp) -> tc_status {
        using P = std::remove_pointer_t<decltype(pp)>;
        scratch pos(x.dev);
        tc_status s = pos.get(sizeof(P) * (size_t)n, "nonzero");
        if (s) return s;
        return with_dtype(src.dtype, [&](auto tag) -> tc_status {
            using S = typename dt<decltype(tag)::value>::S;
            nonzero_kernel<S, P><<<grid, BLOCK, 0, cu_stream()>>>((const S *)src.data, g, n, pos.as<P>(), 0, nullptr, 0, 0);
            tc_status e = launched(x.c);
            if (e || (e = prefix(x, pos.as<P>(), n))) return e;
            nonzero_kernel<S, P><<<grid, BLOCK, 0, cu_stream()>>>((const S *)src.data, g, n, pos.as<P>(), 1,
                                                                 (int64_t *)out.data, out.stride[0], out.stride[1]);
            return launched(x.c);
        });
    });
}

/* out = in (same shape and dtype), strided: dst copied into a separate out. */
tc_status copy_view(const ixcall &x, const tc_cuda_view &out, const tc_cuda_view &in)
{
    geo<2> L{};
    L.nd = out.ndim;
    for (int i = 0; i < L.nd; i++) L.size[i] = out.size[i], L.st[0][i] = out.stride[i], L.st[1][i] = in.stride[i];
    int64_t n = numel_of(L.nd, L.size);
    if (n == 0) return TC_OK;
    geo_coalesce(L);
    return with_size(elsize(out.dtype), [&](auto tp) -> tc_status {
        using T = std::remove_pointer_t<decltype(tp)>;
        copy_kernel<T><<<grid_for(x.dev, n), BLOCK, 0, cu_stream()>>>((T *)out.data, (const T *)in.data, L, n);
        return launched(x.c);
    });
}

} /* namespace */

tc_status cu_op_index(int dev, const tc_cuda_call *c)
{
    const int op = c->op;
    if (c->nin < 1 || c->nout < 1 || c->nin > 3) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(op));
    const int edt = c->in[0].dtype;
    if ((op == TC_OP_INDEX_ADD || op == TC_OP_SCATTER_ADD) && edt == TC_BOOL) return cu_unsupported(c);
    const bool dst = writes_dst(op), inplace = dst && same_view(c->out[0], c->in[0]);
    if (c->out[0].numel == 0 || !c->out[0].data) return TC_OK;
    ixcall x{dev, c, edt};
    tc_cuda_view out = norm(c->out[0]), in[3];
    scratch aside[3] = {scratch(dev), scratch(dev), scratch(dev)};
    tc_status s;
    for (int i = 0; i < c->nin; i++) {
        in[i] = c->in[i];
        if (!(inplace && i == 0) && views_overlap(c->out[0], c->in[i]) &&
            (s = cu_private_copy(dev, &c->in[i], &in[i], &aside[i].p, cu_op_name(op))))
            return s;
        in[i] = norm(in[i]);
    }
    if (dst && !inplace && (s = copy_view(x, out, in[0]))) return s;
    int64_t dim = c->params.i[0];
    int d = (int)(dim < 0 ? dim + in[0].ndim : dim);
    bool needs_dim = op != TC_OP_MASKED_FILL && op != TC_OP_MASKED_COPY && op != TC_OP_MASKED_SELECT &&
                     op != TC_OP_NONZERO;
    if (needs_dim && (d < 0 || d >= in[0].ndim))
        return cu_fail(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim tensor", cu_op_name(op), (long long)dim,
                       c->in[0].ndim);
    switch (op) {
    case TC_OP_MASKED_FILL:
    case TC_OP_MASKED_COPY:
    case TC_OP_MASKED_SELECT: return masked_family(x, op, out, in, c->params.s[0]);
    case TC_OP_NONZERO: return nonzero_op(x, c->out[0], c->in[0]);
    default: return index_family(x, op, d, out, in, c->params.s[0]);
    }
}
