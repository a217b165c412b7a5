/* emu_device.h -- CUDA device code as host C++ for the emulator (tests only; emu.h says
 * what the emulator is). The Makefile force-includes it (-include) in every core/cuda file
 * it compiles with g++, ahead of the CUDA headers, whose declarations (types, cuda_fp16's
 * host conversions) are then used as they are.
 *
 * Execution model (emu_sched.cc): the blocks of a grid run one after another; the threads
 * of a block are fibers on one OS thread, switched only where CUDA threads wait for each
 * other (__syncthreads, a warp shuffle, __syncwarp). So:
 *   - __shared__ is `static`: one copy, seen by every thread of the running block; cu2cc.pl
 *     follows each declaration with emu::shared_fresh, so each block starts with it filled
 *     with 0xff bytes (NaN, -1), as uninitialised as a GPU's shared memory;
 *   - threadIdx / blockIdx are globals the scheduler sets before it resumes a fiber;
 *   - atomics are plain read-modify-writes (nothing runs concurrently);
 *   - a barrier some threads never reach is reported as a kernel failure, not a hang.
 */
#ifndef TC_EMU_DEVICE_H
#define TC_EMU_DEVICE_H

#define __global__
#define __device__
#define __host__
#define __shared__ static

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>

/* host_defines.h defines it unconditionally (as an attribute g++ would warn about). */
#undef __launch_bounds__
#define __launch_bounds__(...)

/* What device code reaches in the emulator's library is exported from it (EMU_API), so a
 * kernel module built at run time (emu_driver.cc: NVRTC's stand-in) links against it. */
#ifndef EMU_API
#define EMU_API __attribute__((visibility("default")))
#endif

/* ---- thread geometry ------------------------------------------------------------------ */
extern EMU_API uint3 threadIdx, blockIdx;
extern EMU_API dim3 blockDim, gridDim;
static const int warpSize = 32;

namespace emu {
/* Waits until every thread of the block still running reaches a barrier (emu_sched.cc). */
EMU_API void block_barrier();
/* Exchanges `bytes` bytes among the lanes of the caller's warp that mask names: writes mine
 * into its slot, waits for them, copies lane src's slot into out, waits again. A shuffle a
 * GPU leaves undefined (the caller or src not in mask, src returned or past the block, lanes
 * meeting with different masks) fails the launch (emu_sched.cc). */
EMU_API void warp_exchange(unsigned mask, const void *mine, void *out, int src, size_t bytes);
/* The caller's lane in its warp. */
EMU_API int lane();
/* A device access of `bytes` bytes at p, which a GPU requires aligned to `bytes` (a 16-byte
 * vector load, say): a misaligned one fails the running kernel's launch with
 * cudaErrorMisalignedAddress, as on a GPU. The access itself still goes ahead on host memory,
 * so the process does not crash (emu_sched.cc). Device code calls it where it would
 * otherwise copy with memcpy, which takes any address (mma.h). */
EMU_API void check_aligned(const void *p, size_t bytes);
/* Called by each thread passing a __shared__ declaration (cu2cc.pl adds the call): the
 * first of the running block fills the n bytes at p with 0xff, so a read before any write
 * of this block sees NaN or -1, not what the previous block (or launch) left there. */
EMU_API void shared_fresh(void *p, size_t n);
} // namespace emu

static inline void __syncthreads() { emu::block_barrier(); }
/* A warp barrier: an exchange of nothing among the caller's warp. */
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    char none = 0, got;
    emu::warp_exchange(mask, &none, &got, emu::lane(), 1);
}

template <class T> static inline T emu_shfl(unsigned mask, T v, int src)
{
    T out;
    emu::warp_exchange(mask, &v, &out, src, sizeof(T));
    return out;
}
/* Lanes below delta (within their width-sized segment) keep their own value, as on a GPU. */
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int l = emu::lane(), seg = l / width * width;
    return emu_shfl(mask, v, (l - (int)delta >= seg) ? l - (int)delta : l);
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int l = emu::lane(), seg = l / width * width;
    return emu_shfl(mask, v, (l + (int)delta < seg + width) ? l + (int)delta : l);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    int l = emu::lane(), seg = l / width * width, s = l ^ lane_mask;
    return emu_shfl(mask, v, (s >= seg && s < seg + width) ? s : l);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    int l = emu::lane();
    return emu_shfl(mask, v, l / width * width + ((src % width) + width) % width);
}

/* ---- atomics: nothing runs at the same time, so a plain update is atomic ---------------- */
template <class T> static inline T atomicAdd(T *p, T v)
{
    T old = *p;
    *p = (T)(old + v);
    return old;
}
static inline __half atomicAdd(__half *p, __half v)
{
    __half old = *p;
    *p = __float2half_rn(__half2float(old) + __half2float(v));
    return old;
}
static inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v)
{
    __nv_bfloat16 old = *p;
    *p = __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(v));
    return old;
}
template <class T> static inline T atomicCAS(T *p, T compare, T v)
{
    T old = *p;
    if (old == compare) *p = v;
    return old;
}
template <class T> static inline T atomicMax(T *p, T v)
{
    T old = *p;
    if (v > old) *p = v;
    return old;
}
template <class T> static inline T atomicMin(T *p, T v)
{
    T old = *p;
    if (v < old) *p = v;
    return old;
}
template <class T> static inline T atomicExch(T *p, T v)
{
    T old = *p;
    *p = v;
    return old;
}

/* ---- intrinsics ------------------------------------------------------------------------- */
template <class To, class From> static inline To emu_bits(From f)
{
    static_assert(sizeof(To) == sizeof(From), "same size");
    To t;
    memcpy(&t, &f, sizeof t);
    return t;
}
static inline unsigned __float_as_uint(float x) { return emu_bits<unsigned>(x); }
static inline float __uint_as_float(unsigned x) { return emu_bits<float>(x); }
static inline int __float_as_int(float x) { return emu_bits<int>(x); }
static inline float __int_as_float(int x) { return emu_bits<float>(x); }
static inline long long __double_as_longlong(double x) { return emu_bits<long long>(x); }
static inline double __longlong_as_double(long long x) { return emu_bits<double>(x); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
template <class T> static inline T __ldg(const T *p) { return *p; }
/* One thread runs at a time and every write is seen at once: fences have nothing to order. */
static inline void __threadfence() {}
/* The PTX instructions generated kernels use in inline asm, which emu_driver.cc rewrites
 * into calls of these (cuda_fp16.h's host conversions round to nearest even as cvt.rn). */
static inline float emu_ptx_cvt_f32_f16(unsigned short h)
{
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
}
static inline unsigned short emu_ptx_cvt_rn_f16_f32(float f) { return __half_raw(__float2half_rn(f)).x; }
/* declared (not defined) for the host by crt/device_functions.h */
inline float __expf(float x) noexcept { return expf(x); }
inline float __logf(float x) noexcept { return logf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }

/* CUDA's global min/max overloads (device code calls them unqualified). */
using std::max;
using std::min;

#include "emu_launch.h"

/* From here on tocha's own headers take their CUDA branches (__host__ __device__ helpers,
 * no host-only declarations); __CUDA_ARCH__ stays undefined, so they use host arithmetic. */
#define __CUDACC__ 1

#endif
