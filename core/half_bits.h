/* half_bits.h -- float32 <-> float16 / bfloat16, round to nearest even, as inline functions:
 * dtype.c's exported tc_f32_to_f16 & co wrap them, and the CPU conversion loops (ew.c) call
 * them per element, where a call through the generic double load/store would cost several
 * times the conversion itself. (The CUDA side has its own, core/cuda/cu_elem.h.) */
#ifndef TC_HALF_BITS_H
#define TC_HALF_BITS_H

#include "scalar_math.h"
#include <math.h>
#include <stdint.h>

/* the bits of a float and back (scalar_math.h's casts, unsigned) */
static inline uint32_t hb_f32_bits(float x) { return (uint32_t)tc_float_to_bits(x); }
static inline float hb_bits_f32(uint32_t u) { return tc_bits_to_float((int32_t)u); }

static inline uint16_t hb_f32_to_f16(float x)
{
    uint32_t u = hb_f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) /* inf or nan: keep nan quiet */
        return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0));
    if (absu >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* subnormal half or zero: scale into place and round */
        float a = hb_bits_f32(absu);
        uint32_t r = (uint32_t)lrintf(a * 16777216.0f); /* 2^24: units of the smallest subnormal */
        return (uint16_t)(sign | r);
    }
    uint32_t mant_round = absu + 0xfffu + ((absu >> 13) & 1u); /* round to nearest even */
    return (uint16_t)(sign | ((mant_round - 0x38000000u) >> 13));
}

static inline float hb_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal */
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31) return hb_bits_f32(sign | 0x7f800000u | (mant << 13));
    return hb_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t hb_f32_to_bf16(float x)
{
    uint32_t u = hb_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet nan */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float hb_bf16_to_f32(uint16_t h) { return hb_bits_f32((uint32_t)h << 16); }

#endif
