/* mma.h -- warp-wide tensor-core products and the fragment helpers around them, for
 * attention_tc.cu. Two instructions of PTX's mma.sync.aligned, float accumulators, D (16 x 8)
 * += A (16 x K) B (K x 8):
 *   m16n8k16 with f16 or bf16 operands (K = 16, two halves per 32-bit register);
 *   m16n8k8 with tf32 operands (K = 8, one float per register, rounded to TF32: 10 mantissa
 *   bits, to nearest with ties away from zero, as cvt.rna.tf32.f32).
 *
 * Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8"): lane = 4 g + t,
 * g = lane / 4, t = lane % 4. In a half register the lower 16 bits hold the lower index.
 *   m16n8k16  A  a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]
 *                a[2] = A[g][2t+8, 2t+9] a[3] = A[g+8][2t+8, 2t+9]
 *             B  b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
 *   m16n8k8   A  a[0] = A[g][t]  a[1] = A[g+8][t]  a[2] = A[g][t+4]  a[3] = A[g+8][t+4]
 *             B  b[0] = B[t][g]  b[1] = B[t+4][g]
 *   both      D  d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1]
 * So the D fragments of two neighbouring 16 x 8 products are, rounded to halves, the A
 * fragment of their 16 x 16 concatenation; for tf32 one product's D fragment is the A
 * fragment of the same 16 x 8 block with its columns taken in the order 0 2 4 6 1 3 5 7
 * (a[0..3] = d[0], d[2], d[1], d[3]), and the B operand's rows follow that order (frag<float>).
 * Either way (a_from_d) flash attention's probabilities go from one product into the next
 * without leaving registers.
 *
 * On compute capability 8.0 and later the products are the instructions. Elsewhere they are
 * the same products computed from the same fragments with warp shuffles: exactly the layouts
 * above, so the emulator (no tensor cores) checks every kernel's fragment bookkeeping. On a
 * GPU that would be far slower than CUDA cores, so attention.cu runs its own kernels on GPUs
 * before 8.0 (has_mma) and this branch only fills the PTX compiled for them.
 */
#ifndef TC_CUDA_MMA_H
#define TC_CUDA_MMA_H

#include "kern.h"
#include <string.h>

namespace tck {

/* The bits of a half / bfloat16, and back. */
__device__ __forceinline__ uint32_t hbits(__half h) { return __half_raw(h).x; }
__device__ __forceinline__ uint32_t hbits(__nv_bfloat16 h) { return __nv_bfloat16_raw(h).x; }
template <class H> __device__ __forceinline__ float hfloat(uint32_t bits)
{
    if constexpr (std::is_same_v<H, __half>) {
        __half_raw r;
        r.x = (unsigned short)bits;
        return __half2float(__half(r));
    } else {
        __nv_bfloat16_raw r;
        r.x = (unsigned short)bits;
        return __bfloat162float(__nv_bfloat16(r));
    }
}

/* Two halves in one register: lo in the lower 16 bits. */
__device__ __forceinline__ uint32_t pack2(uint32_t lo, uint32_t hi) { return (lo & 0xffffu) | hi << 16; }
/* Two floats rounded (to nearest even) into one register. */
template <class H> __device__ __forceinline__ uint32_t pack2f(float lo, float hi)
{
    if constexpr (std::is_same_v<H, __half>) return pack2(hbits(__float2half_rn(lo)), hbits(__float2half_rn(hi)));
    else return pack2(hbits(__float2bfloat16_rn(lo)), hbits(__float2bfloat16_rn(hi)));
}
/* p[0] and p[1] as one register (p 4-byte aligned). The host branches of this and copy16
 * are the emulator's (tests/emu), which checks the alignment a GPU would fault on. */
template <class H> __device__ __forceinline__ uint32_t ld_pair(const H *p)
{
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t *>(p);
#else
#ifdef TC_EMU_DEVICE_H
    emu::check_aligned(p, 4);
#endif
    uint32_t r;
    memcpy(&r, p, sizeof r);
    return r;
#endif
}
/* 16 bytes from src to dst (both 16-byte aligned). */
__device__ __forceinline__ void copy16(void *dst, const void *src)
{
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
#else
#ifdef TC_EMU_DEVICE_H
    emu::check_aligned(dst, 16), emu::check_aligned(src, 16);
#endif
    memcpy(dst, src, 16);
#endif
}

/* The A fragment of columns [16 kk, 16 kk + 16) from the D fragments of a 16 x 8n product. */
template <class H> __device__ __forceinline__ void a_from_d(uint32_t (&a)[4], const float (*d)[4], int kk)
{
    const float *lo = d[2 * kk], *hi = d[2 * kk + 1];
    a[0] = pack2f<H>(lo[0], lo[1]), a[1] = pack2f<H>(lo[2], lo[3]);
    a[2] = pack2f<H>(hi[0], hi[1]), a[3] = pack2f<H>(hi[2], hi[3]);
}

/* d += A B from the fragments, with shuffles: lane (g, t) gathers rows g and g + 8 of A and
 * columns 2t, 2t + 1 of B, four k at a time from lane 4 g + q (A) and 4 n + q (B). */
template <class H>
__device__ __forceinline__ void mma16816_shuffled(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    const int lane = (int)(threadIdx.x % 32), g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; q++) { /* k = 2q, 2q + 1 (registers 0, 1) and 2q + 8, 2q + 9 (2, 3) */
        uint32_t ar[4];
        for (int r = 0; r < 4; r++) ar[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + q);
        for (int c = 0; c < 2; c++) {
            uint32_t b0 = __shfl_sync(0xffffffffu, b[0], 4 * (2 * t + c) + q);
            uint32_t b1 = __shfl_sync(0xffffffffu, b[1], 4 * (2 * t + c) + q);
            float bk[4] = {hfloat<H>(b0), hfloat<H>(b0 >> 16), hfloat<H>(b1), hfloat<H>(b1 >> 16)};
            for (int h = 0; h < 2; h++) { /* row g (a[0], a[2]) and row g + 8 (a[1], a[3]) */
                uint32_t lo = ar[h], hi = ar[h + 2];
                d[2 * h + c] += hfloat<H>(lo) * bk[0] + hfloat<H>(lo >> 16) * bk[1] + hfloat<H>(hi) * bk[2] +
                                hfloat<H>(hi >> 16) * bk[3];
            }
        }
    }
}

/* d += A B, one 16 x 8 x 16 product of the whole warp (every lane calls it). */
template <class H> __device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<H, __half>)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    mma16816_shuffled<H>(d, a, b);
#endif
}

/* x rounded to TF32 (10 mantissa bits; to nearest, ties away from zero; NaN stays NaN), as
 * the bits of a float. */
__device__ __forceinline__ uint32_t tf32_bits(float x)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
#else
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x7fffffu ? u | 0x400000u : u) & 0xffffe000u;
    return (u + 0x1000u) & 0xffffe000u; /* half an ulp of TF32, then cut: a carry rounds up */
#endif
}

/* d += A B from tf32 fragments, with shuffles: lane (g, t) gathers rows g and g + 8 of A and
 * columns 2t, 2t + 1 of B, k = q and q + 4 from lane 4 g + q (A) and 4 n + q (B). */
__device__ __forceinline__ void mma1688_shuffled(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    const int lane = (int)(threadIdx.x % 32), g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; q++) {
        uint32_t ar[4];
        for (int r = 0; r < 4; r++) ar[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + q);
        for (int c = 0; c < 2; c++) {
            float b0 = __uint_as_float(__shfl_sync(0xffffffffu, b[0], 4 * (2 * t + c) + q));
            float b1 = __uint_as_float(__shfl_sync(0xffffffffu, b[1], 4 * (2 * t + c) + q));
            for (int h = 0; h < 2; h++) /* row g (a[0], a[2]) and row g + 8 (a[1], a[3]) */
                d[2 * h + c] += __uint_as_float(ar[h]) * b0 + __uint_as_float(ar[h + 2]) * b1;
        }
    }
}

/* d += A B, one 16 x 8 x 8 tf32 product of the whole warp (every lane calls it). */
__device__ __forceinline__ void mma1688(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    mma1688_shuffled(d, a, b);
#endif
}

/* The operand flavour of element type H, what a kernel written once for all of them needs:
 *   T            the element of shared-memory tiles (H, or float rounded to TF32);
 *   K, EPR       the product's depth and elements per operand register;
 *   bits(x)      x as it goes into a register (TF32 rounded for float);
 *   reg(p)       the register of elements p[0 .. EPR) of a tile row;
 *   to_tile(x)   x as a tile holds it;
 *   tile16(d, s) 16 bytes of H from s to the tile at d (both 16-byte aligned);
 *   a_from_d     the A fragment of depth step kk from the D fragments of 16 x 8 products;
 *   b_rows<W>    the B fragment of a depth step from column c of a tile's rows (W elements
 *                apart), r the lane's first row (2t rows past the step's first), in the
 *                order a_from_d gives the depth;
 *   mma          d += A B. */
template <class H> struct frag_half {
    using T = H;
    static constexpr int K = 16, EPR = 2;
    static __device__ __forceinline__ uint32_t bits(H x) { return hbits(x); }
    static __device__ __forceinline__ uint32_t reg(const T *p) { return ld_pair(p); }
    static __device__ __forceinline__ T to_tile(H x) { return x; }
    static __device__ __forceinline__ void tile16(T *dst, const H *src) { copy16(dst, src); }
    static __device__ __forceinline__ void a_from_d(uint32_t (&a)[4], const float (*d)[4], int kk)
    {
        tck::a_from_d<H>(a, d, kk);
    }
    template <int W> static __device__ __forceinline__ void b_rows(uint32_t (&b)[2], const T *r, int c)
    {
        b[0] = pack2(hbits(r[c]), hbits(r[W + c]));
        b[1] = pack2(hbits(r[8 * W + c]), hbits(r[9 * W + c]));
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
    {
        mma16816<H>(d, a, b);
    }
};
template <class H> struct frag;
template <> struct frag<__half> : frag_half<__half> {};
template <> struct frag<__nv_bfloat16> : frag_half<__nv_bfloat16> {};
template <> struct frag<float> {
    using T = float;
    static constexpr int K = 8, EPR = 1;
    static __device__ __forceinline__ uint32_t bits(float x) { return tf32_bits(x); }
    static __device__ __forceinline__ uint32_t reg(const T *p) { return __float_as_uint(*p); }
    static __device__ __forceinline__ T to_tile(float x) { return __uint_as_float(tf32_bits(x)); }
    static __device__ __forceinline__ void tile16(T *dst, const float *src)
    {
        alignas(16) float v[4];
        copy16(v, src);
        for (int e = 0; e < 4; e++) v[e] = to_tile(v[e]);
        copy16(dst, v);
    }
    /* depth j = t and t + 4 of step kk are columns 8 kk + 2t and 8 kk + 2t + 1 */
    static __device__ __forceinline__ void a_from_d(uint32_t (&a)[4], const float (*d)[4], int kk)
    {
        a[0] = tf32_bits(d[kk][0]), a[1] = tf32_bits(d[kk][2]), a[2] = tf32_bits(d[kk][1]), a[3] = tf32_bits(d[kk][3]);
    }
    /* rows 2t and 2t + 1 of the step: depth t and t + 4, as a_from_d takes them */
    template <int W> static __device__ __forceinline__ void b_rows(uint32_t (&b)[2], const T *r, int c)
    {
        b[0] = __float_as_uint(r[c]), b[1] = __float_as_uint(r[W + c]);
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
    {
        mma1688(d, a, b);
    }
};

} // namespace tck

#endif
