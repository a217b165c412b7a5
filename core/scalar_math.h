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

#endif
