/* scalar_math.h -- scalar helpers that op formulas (ops.def) call. Shared by the CPU
 * kernels, the CUDA kernels and the fusion code generator, so each helper is a small pure
 * function of int64 values; TC_HOSTDEV marks them callable on both sides. */
#ifndef TC_SCALAR_MATH_H
#define TC_SCALAR_MATH_H
#include <stdint.h>

#ifdef __CUDACC__
#define TC_HOSTDEV __host__ __device__ static inline
#else
#define TC_HOSTDEV static inline
#endif

/* Integer division truncating toward zero. The dispatcher refuses zero divisors before a
 * kernel runs; INT64_MIN / -1 wraps instead of trapping. */
TC_HOSTDEV int64_t tc_idiv(int64_t a, int64_t b)
{
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    return a / b;
}

TC_HOSTDEV int64_t tc_ifmod(int64_t a, int64_t b)
{
    if (b == 0 || b == -1) return 0;
    return a % b;
}

/* Remainder with the sign of the divisor (Lua's and Python's %). */
TC_HOSTDEV int64_t tc_iremainder(int64_t a, int64_t b)
{
    int64_t r = tc_ifmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* Integer power by squaring; negative exponents give 0 except for bases 1 and -1. */
TC_HOSTDEV int64_t tc_ipow(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    uint64_t r = 1, x = (uint64_t)a;
    while (b) {
        if (b & 1) r *= x;
        x *= x;
        b >>= 1;
    }
    return (int64_t)r;
}

/* Shifts by a count outside [0, 63] give 0 (C leaves them undefined). */
TC_HOSTDEV int64_t tc_ishl(int64_t a, int64_t n) { return (n < 0 || n > 63) ? 0 : (int64_t)((uint64_t)a << n); }
TC_HOSTDEV int64_t tc_ishr(int64_t a, int64_t n) { return (n < 0 || n > 63) ? (a < 0 ? -1 : 0) : (a >> n); }

/* ---- vectorisable float32 exp and tanh (CPU) ------------------------------------------
 * libm's expf/tanhf are calls the compiler cannot vectorise; these are branch-free
 * (selects only), so an elementwise loop over floats compiles to SIMD code. Cephes'
 * polynomials: exp within 1 ulp on the float range, tanh within 2 ulp. NaN propagates.
 * Only the CPU float kernels use them (core/cpu/ew.c); double keeps libm. */
#ifndef __CUDACC__
static inline float tc_bits_to_float(int32_t i)
{
    float f;
    __builtin_memcpy(&f, &i, 4);
    return f;
}

static inline int32_t tc_float_to_bits(float f)
{
    int32_t i;
    __builtin_memcpy(&i, &f, 4);
    return i;
}

static inline float tc_expf(float x)
{
    const float hi = 88.7228394f, lo = -87.3365479f; /* expf overflows / goes subnormal */
    float xc = x > hi ? hi : (x < lo ? lo : x);
    xc = x != x ? 0.0f : xc; /* NaN: compute on 0 (the result is replaced below) */
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick: no call, no branch */
    const float magic = 12582912.0f;
    float t = xc * 1.44269504088896341f + magic;
    int32_t n = tc_float_to_bits(t) - tc_float_to_bits(magic);
    float fn = t - magic;
    float r = xc - fn * 0.693359375f - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n in two halves: n reaches 128 near the top of the range and -126 at the bottom,
     * where a single exponent field would overflow or flush to zero */
    int32_t n1 = n >> 1, n2 = n - n1;
    float y = p * tc_bits_to_float((int32_t)((uint32_t)(n1 + 127) << 23)) *
              tc_bits_to_float((int32_t)((uint32_t)(n2 + 127) << 23));
    y = x > hi ? __builtin_inff() : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

static inline float tc_tanhf(float x)
{
    float ax = x < 0 ? -x : x;
    /* small |x|: odd polynomial (no cancellation); otherwise 1 - 2 / (exp(2|x|) + 1) */
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float e = tc_expf(2.0f * (ax > 20.0f ? 20.0f : ax)); /* tanh(20) rounds to 1 */
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    float y = ax < 0.625f ? small : big;
    return x != x ? x : y;
}
#endif

#endif
