/* mma.h -- one warp-wide tensor-core product and the fragment helpers around it: PTX's
 * mma.sync.aligned.m16n8k16.row.col with f16 or bf16 operands and float accumulators,
 * D (16 x 8) += A (16 x 16) B (16 x 8). Used by attention_tc.cu.
 *
 * Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16"): lane = 4 g + t, g = lane / 4,
 * t = lane % 4. A 32-bit register holds two halves, the lower 16 bits the lower index.
 *   A  a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]
 *      a[2] = A[g][2t+8, 2t+9] a[3] = A[g+8][2t+8, 2t+9]
 *   B  b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
 *   D  d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1]
 * So the D fragments of two neighbouring 16 x 8 products are, rounded to halves, the A
 * fragment of their 16 x 16 concatenation (a_from_d): flash attention's probabilities go
 * from one product into the next without leaving registers.
 *
 * On compute capability 8.0 and later mma16816 is the instruction. Elsewhere it is the same
 * product computed from the same fragments with warp shuffles: exactly the layout above, so
 * the emulator (no tensor cores) checks every kernel's fragment bookkeeping. On a GPU that
 * would be far slower than CUDA cores, so attention.cu runs its own kernels on GPUs before
 * 8.0 (has_mma) and this branch only fills the PTX compiled for them.
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
/* p[0] and p[1] as one register (p 4-byte aligned). */
template <class H> __device__ __forceinline__ uint32_t ld_pair(const H *p)
{
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t *>(p);
#else
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

} // namespace tck

#endif
