/* kern.h -- what the reduce, scan, softmax, index and sort kernels share (reduce.cu,
 * scan.cu, softmax.cu, index.cu, sort.cu): dtype traits (storage and computing types),
 * loads and stores that widen half types to float and round back at the store, a dtype
 * dispatcher for host launchers, strided offset math, grid sizing and scratch memory.
 *
 * Offset math is __host__ __device__ and free of CUDA calls, so tests/cuda/kern_host_test.cu
 * checks it on a machine without a GPU. Everything lives in namespace tck (tocha CUDA
 * kernels): ew.cu has its own, differently shaped traits, and two files defining one
 * global template differently would break the one-definition rule at link time.
 */
#ifndef TC_CUDA_KERN_H
#define TC_CUDA_KERN_H

#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <type_traits>
#include <utility>

namespace tck {

/* ---- dtypes ------------------------------------------------------------------------------- */

/* S: storage type; C: computing type (float for the half types, as the CPU computes them
 * through float32); FL: a float dtype; INT: an integer dtype (bool is neither). */
template <int DT> struct dt;
#define TCK_DT(E, STORE, COMP, ISF, ISI)                                                     \
    template <> struct dt<E> {                                                               \
        using S = STORE;                                                                     \
        using C = COMP;                                                                      \
        static constexpr bool FL = ISF, INT = ISI;                                           \
    };
TCK_DT(TC_F32, float, float, true, false)
TCK_DT(TC_F64, double, double, true, false)
TCK_DT(TC_F16, __half, float, true, false)
TCK_DT(TC_BF16, __nv_bfloat16, float, true, false)
TCK_DT(TC_U8, uint8_t, uint8_t, false, true)
TCK_DT(TC_I8, int8_t, int8_t, false, true)
TCK_DT(TC_I16, int16_t, int16_t, false, true)
TCK_DT(TC_I32, int32_t, int32_t, false, true)
TCK_DT(TC_I64, int64_t, int64_t, false, true)
TCK_DT(TC_BOOL, bool, bool, false, false)
#undef TCK_DT

static inline size_t elsize(int d)
{
    switch (d) {
    case TC_F64:
    case TC_I64: return 8;
    case TC_F32:
    case TC_I32: return 4;
    case TC_F16:
    case TC_BF16:
    case TC_I16: return 2;
    default: return 1;
    }
}

/* Loads widen half types to float; everything else loads as itself. */
__device__ __forceinline__ float ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
template <class S> __device__ __forceinline__ S ld(const S *p) { return *p; }

/* Stores convert with C's rules; half types round from float to nearest even. A double
 * reaches a half type through float, as on the CPU (its kernels write float32 and then
 * convert): rounding straight from double could differ in the last bit. */
template <class S, class V> __device__ __forceinline__ void st(S *p, V v)
{
    if constexpr (std::is_same_v<S, __half>) *p = __float2half_rn((float)v);
    else if constexpr (std::is_same_v<S, __nv_bfloat16>) *p = __float2bfloat16_rn((float)v);
    else *p = (S)v;
}

/* Calls f(std::integral_constant<int, DT>) for the runtime dtype d: host launchers write
 * one generic lambda and refuse dtypes with if constexpr inside it. */
template <class F> static tc_status with_dtype(int d, F &&f)
{
    switch (d) {
    case TC_F32: return f(std::integral_constant<int, TC_F32>{});
    case TC_F64: return f(std::integral_constant<int, TC_F64>{});
    case TC_F16: return f(std::integral_constant<int, TC_F16>{});
    case TC_BF16: return f(std::integral_constant<int, TC_BF16>{});
    case TC_U8: return f(std::integral_constant<int, TC_U8>{});
    case TC_I8: return f(std::integral_constant<int, TC_I8>{});
    case TC_I16: return f(std::integral_constant<int, TC_I16>{});
    case TC_I32: return f(std::integral_constant<int, TC_I32>{});
    case TC_I64: return f(std::integral_constant<int, TC_I64>{});
    case TC_BOOL: return f(std::integral_constant<int, TC_BOOL>{});
    default: return cu_fail(TC_ERR_ARG, "cuda: bad dtype %d", d);
    }
}

/* with_dtype for the kernels of float types only (f32, f64, f16, bf16): f(tag) as above; any
 * other dtype is c's "no CUDA kernel" error (libtocha may then run the op on the host). */
template <class F> static tc_status with_float_dtype(int d, const tc_cuda_call *c, F &&f)
{
    return with_dtype(d, [&](auto tag) -> tc_status {
        if constexpr (!dt<decltype(tag)::value>::FL) return cu_unsupported(c);
        else return f(tag);
    });
}

/* ---- strided geometry ------------------------------------------------------------------------ */

enum { MAXD = TC_MAX_DIMS };

/* Up to K stride arrays over one shape: the operands of a loop (input, outputs, index). */
template <int K> struct geo {
    int nd;
    int64_t size[MAXD];
    int64_t st[K][MAXD];
};

/* Offsets of flat (row-major) position lin in each of the K operands. */
template <int K> __host__ __device__ inline void geo_offsets(const geo<K> &g, int64_t lin, int64_t *off)
{
    for (int a = 0; a < K; a++) off[a] = 0;
    for (int d = g.nd - 1; d >= 0; d--) {
        int64_t sz = g.size[d], ix = lin % sz;
        lin /= sz;
        for (int a = 0; a < K; a++) off[a] += ix * g.st[a][d];
    }
}

/* One operand's offset of flat position lin (shape sz, strides st, nd dims). */
__host__ __device__ inline int64_t flat_offset(int64_t lin, int nd, const int64_t *sz, const int64_t *st)
{
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (lin % sz[d]) * st[d];
        lin /= sz[d];
    }
    return off;
}

/* Drops size-1 dims and merges neighbours that every stride array steps through as one
 * run (as the CPU's reduce.c does). A shape with no dims left keeps none (nd = 0): the
 * caller treats it as one element. Sizes must be >= 1 (callers skip empty tensors). */
template <int K> __host__ __device__ inline void geo_coalesce(geo<K> &g)
{
    int m = 0;
    for (int d = 0; d < g.nd; d++) {
        if (g.size[d] == 1) continue;
        bool merge = m > 0;
        for (int a = 0; a < K && merge; a++)
            if (g.st[a][m - 1] != g.st[a][d] * g.size[d]) merge = false;
        if (merge) {
            g.size[m - 1] *= g.size[d];
            for (int a = 0; a < K; a++) g.st[a][m - 1] = g.st[a][d];
            continue;
        }
        g.size[m] = g.size[d];
        for (int a = 0; a < K; a++) g.st[a][m] = g.st[a][d];
        m++;
    }
    g.nd = m;
}

/* Strides of view v with dim `skip` removed (skip < 0: none), into st; returns the count. */
static inline int strides_without(const tc_cuda_view &v, int skip, int64_t *sz, int64_t *st)
{
    int m = 0;
    for (int d = 0; d < v.ndim; d++) {
        if (d == skip) continue;
        if (sz) sz[m] = v.size[d];
        st[m++] = v.stride[d];
    }
    return m;
}

/* Whether two views' address ranges intersect (both non-empty). Conservative: strided
 * views interleaving without sharing an element count as overlapping. */
static inline bool views_overlap(const tc_cuda_view &a, const tc_cuda_view &b)
{
    if (!a.data || !b.data || a.numel == 0 || b.numel == 0) return false;
    auto range = [](const tc_cuda_view &v, uintptr_t *lo, uintptr_t *hi) {
        int64_t mn = 0, mx = 0;
        for (int d = 0; d < v.ndim; d++) {
            int64_t e = (v.size[d] - 1) * v.stride[d];
            if (e < 0) mn += e;
            else mx += e;
        }
        int64_t es = (int64_t)elsize(v.dtype);
        *lo = (uintptr_t)v.data + (uintptr_t)(mn * es);
        *hi = (uintptr_t)v.data + (uintptr_t)(mx * es + es);
    };
    uintptr_t alo, ahi, blo, bhi;
    range(a, &alo, &ahi);
    range(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

/* The same view: data, shape and strides (an in-place output). */
static inline bool same_view(const tc_cuda_view &a, const tc_cuda_view &b)
{
    if (a.data != b.data || a.ndim != b.ndim || a.dtype != b.dtype) return false;
    for (int d = 0; d < a.ndim; d++)
        if (a.size[d] != b.size[d] || (a.size[d] > 1 && a.stride[d] != b.stride[d])) return false;
    return true;
}

/* ---- launching ------------------------------------------------------------------------------- */

enum { BLOCK = 256 };

/* Streaming multiprocessors of dev, read once per device (an H100's count if unknown). */
static inline int sm_count(int dev)
{
    static int cache[64];
    int sms = dev >= 0 && dev < 64 ? __atomic_load_n(&cache[dev], __ATOMIC_RELAXED) : 0;
    if (sms > 0) return sms;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) {
        (void)cudaGetLastError();
        return 132;
    }
    if (dev >= 0 && dev < 64) __atomic_store_n(&cache[dev], sms, __ATOMIC_RELAXED);
    return sms;
}

/* Blocks of `block` threads for n work items of a grid-stride kernel: enough to fill the
 * device a few times over, at least one. */
static inline unsigned grid_for(int dev, int64_t n, int block = BLOCK)
{
    int64_t need = (n + block - 1) / block, cap = (int64_t)sm_count(dev) * (2048 / block) * 4;
    if (need < 1) need = 1;
    return (unsigned)(need < cap ? need : cap);
}

/* Reports a failed launch (configuration, missing kernel image) under the op's name. */
static inline tc_status launched(const tc_cuda_call *c)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return TC_OK;
    return cu_check(e, cu_op_name(c->op));
}

/* Device scratch from the caching allocator, released when it goes out of scope. Release
 * is stream-ordered (the block is reused only on the stream it was taken on, where its
 * kernels were queued), so they finish before the block is handed out again. */
struct scratch {
    int dev;
    void *p = nullptr;
    explicit scratch(int d) : dev(d) {}
    scratch(const scratch &) = delete;
    scratch &operator=(const scratch &) = delete;
    ~scratch()
    {
        if (p) (void)cu_scratch_free(dev, p);
    }
    /* what: the op, for callers' messages; the allocator's own message (size, device,
     * usage) is kept on failure, it says more. */
    tc_status get(size_t nbytes, const char *what)
    {
        (void)what;
        return cu_scratch_alloc(dev, nbytes, &p);
    }
    template <class T> T *as() const { return (T *)p; }
};

/* NaN-aware comparisons of the max/min reductions and max pooling: NaN ranks above all. */
__host__ __device__ inline bool better_max(double x, double b) { return x > b || (x != x && b == b); }
__host__ __device__ inline bool better_min(double x, double b) { return x < b || (x != x && b == b); }

} /* namespace tck */

#endif /* TC_CUDA_KERN_H */
