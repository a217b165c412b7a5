/* cu_elem.h -- the element-level pieces of the CUDA backend that must equal the CPU bit for
 * bit, written once for the host and the device:
 *   - half / bfloat16 rounding (ports of core/dtype.c: round to nearest even, NaN kept
 *     quiet with the CPU's payload, so even NaN bits match);
 *   - load-as-double / store-double with the CPU's conversion rules (core/dtype.c and
 *     cpu/ew.c: float -> integer truncates and saturates, NaN -> 0, anything -> bool is
 *     "!= 0", half targets round through float);
 *   - strided geometry: broadcast strides, dim coalescing and linear index -> offsets in
 *     32-bit or 64-bit index math;
 *   - the elementwise random samplers of core/cpu/random.c on the Philox stream of
 *     core/philox.h (element 2s and 2s+1 share slot base + s).
 * Why a header in plain C11 that nvcc also compiles: libtocha_cuda.so cannot run without
 * a GPU, but these functions can -- tests/c/test_cuda_elem.c compares them on the host
 * with libtocha's own conversions, broadcasting and random ops.
 *
 * Floating point: the CPU is built with -std=c11 (no a*b+c contraction). nvcc contracts by
 * default, so device sums of products go through CU_DADD/CU_DMUL (__dadd_rn/__dmul_rn),
 * which are never fused. Device libm (log1p, sin, cos, tan, exp) may differ from glibc in
 * the last bit of a double; everything else here is exact.
 */
#ifndef TC_CU_ELEM_H
#define TC_CU_ELEM_H

#include "../philox.h"
#include "../tocha.h"
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define CU_HD __host__ __device__ static inline
#else
#define CU_HD static inline
#endif

#ifdef __CUDA_ARCH__
#define CU_DADD(a, b) __dadd_rn((a), (b))
#define CU_DMUL(a, b) __dmul_rn((a), (b))
#else
#define CU_DADD(a, b) ((a) + (b))
#define CU_DMUL(a, b) ((a) * (b))
#endif

/* ---- half and bfloat16 (core/dtype.c) --------------------------------------------------- */

CU_HD uint32_t cu_f32_bits(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
#endif
}

CU_HD float cu_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, 4);
    return x;
#endif
}

CU_HD uint16_t cu_f32_to_f16(float x)
{
    uint32_t u = cu_f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0));
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* subnormal half or zero: 2^24 scales exactly; rint is nearest even */
        float a = cu_bits_f32(absu);
        return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
    }
    uint32_t mant_round = absu + 0xfffu + ((absu >> 13) & 1u);
    return (uint16_t)(sign | ((mant_round - 0x38000000u) >> 13));
}

CU_HD float cu_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (e == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (e == 31) return cu_bits_f32(sign | 0x7f800000u | (mant << 13));
    return cu_bits_f32(sign | ((e + 112u) << 23) | (mant << 13));
}

CU_HD uint16_t cu_f32_to_bf16(float x)
{
    uint32_t u = cu_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

CU_HD float cu_bf16_to_f32(uint16_t h) { return cu_bits_f32((uint32_t)h << 16); }

/* ---- generic element access (tc_load_as_double / tc_store_double) ----------------------- */

CU_HD double cu_load_as_double(int dt, const void *p)
{
    switch (dt) {
    case TC_F32: return *(const float *)p;
    case TC_F64: return *(const double *)p;
    case TC_F16: return cu_f16_to_f32(*(const uint16_t *)p);
    case TC_BF16: return cu_bf16_to_f32(*(const uint16_t *)p);
    case TC_U8: return *(const uint8_t *)p;
    case TC_I8: return *(const int8_t *)p;
    case TC_I16: return *(const int16_t *)p;
    case TC_I32: return *(const int32_t *)p;
    case TC_I64: return (double)*(const int64_t *)p;
    case TC_BOOL: return *(const bool *)p ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* Out-of-range float -> integer saturates, NaN gives 0 (C leaves both undefined). */
CU_HD int64_t cu_saturate_i64(double v, double lo, double hi)
{
    if (v != v) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

CU_HD void cu_store_double(int dt, void *p, double v)
{
    switch (dt) {
    case TC_F32: *(float *)p = (float)v; break;
    case TC_F64: *(double *)p = v; break;
    case TC_F16: *(uint16_t *)p = cu_f32_to_f16((float)v); break;
    case TC_BF16: *(uint16_t *)p = cu_f32_to_bf16((float)v); break;
    case TC_U8: *(uint8_t *)p = (uint8_t)cu_saturate_i64(v, 0, 255); break;
    case TC_I8: *(int8_t *)p = (int8_t)cu_saturate_i64(v, -128, 127); break;
    case TC_I16: *(int16_t *)p = (int16_t)cu_saturate_i64(v, -32768, 32767); break;
    case TC_I32: *(int32_t *)p = (int32_t)cu_saturate_i64(v, -2147483648.0, 2147483647.0); break;
    case TC_I64: *(int64_t *)p = cu_saturate_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case TC_BOOL: *(bool *)p = v != 0; break;
    default: break;
    }
}

CU_HD int cu_dtype_size(int dt)
{
    switch (dt) {
    case TC_F64: case TC_I64: return 8;
    case TC_F32: case TC_I32: return 4;
    case TC_F16: case TC_BF16: case TC_I16: return 2;
    default: return 1;
    }
}

/* ---- strided geometry ------------------------------------------------------------------ */

/* The output (arg 0) and up to three inputs walked together over one index space. */
#define CU_MAXARG 4
typedef struct cu_geom {
    int nd, narg;
    int64_t size[TC_MAX_DIMS];
    int64_t stride[CU_MAXARG][TC_MAX_DIMS]; /* elements */
} cu_geom;

/* Strides of a view (vnd, vsize, vstride) broadcast to (nd, size): dims right-aligned, a
 * size-1 or missing dim gets stride 0. False when the view does not broadcast to size. */
CU_HD bool cu_bcast_strides(int vnd, const int64_t *vsize, const int64_t *vstride, int nd, const int64_t *size,
                            int64_t *out)
{
    if (vnd > nd) return false;
    for (int d = 0; d < nd; d++) {
        int vd = d - (nd - vnd);
        if (vd < 0) out[d] = 0;
        else if (vsize[vd] == size[d]) out[d] = size[d] == 1 ? 0 : vstride[vd];
        else if (vsize[vd] == 1) out[d] = 0;
        else return false;
    }
    return true;
}

CU_HD int64_t cu_geom_numel(const cu_geom *g)
{
    int64_t n = 1;
    for (int d = 0; d < g->nd; d++) n *= g->size[d];
    return n;
}

/* Drops size-1 dims and merges a dim into its inner neighbour wherever every arg steps
 * over both as over one (stride[outer] == stride[inner] * size[inner]); the row-major
 * order of the elements is unchanged. A contiguous tensor becomes one dim, a scalar none. */
CU_HD void cu_geom_coalesce(cu_geom *g)
{
    int m = -1;
    for (int d = 0; d < g->nd; d++) {
        if (g->size[d] == 1) continue;
        if (m >= 0) {
            bool ok = true;
            for (int a = 0; a < g->narg; a++)
                if (g->stride[a][m] != g->stride[a][d] * g->size[d]) ok = false;
            if (ok) {
                g->size[m] *= g->size[d];
                for (int a = 0; a < g->narg; a++) g->stride[a][m] = g->stride[a][d];
                continue;
            }
        }
        m++;
        g->size[m] = g->size[d];
        for (int a = 0; a < g->narg; a++) g->stride[a][m] = g->stride[a][d];
    }
    g->nd = m + 1;
}

/* Whether indices and every arg's offsets stay within int32 (the faster kernels). The
 * element count stays below 2^30 so that a grid-stride index (i + grid size) cannot wrap. */
CU_HD bool cu_geom_fits32(const cu_geom *g)
{
    if (cu_geom_numel(g) > ((int64_t)1 << 30)) return false;
    for (int a = 0; a < g->narg; a++) {
        int64_t ext = 0;
        for (int d = 0; d < g->nd; d++) ext += (g->stride[a][d] < 0 ? -g->stride[a][d] : g->stride[a][d]) * (g->size[d] - 1);
        if (ext > INT32_MAX) return false;
    }
    return true;
}

/* Whether a coalesced geometry is flat: arg 0 contiguous, every other arg contiguous or a
 * single element (stride 0): the plain indexed kernels then need no offset math. */
CU_HD bool cu_geom_flat(const cu_geom *g)
{
    if (g->nd == 0) return true;
    if (g->nd > 1 || g->stride[0][0] != 1) return false;
    for (int a = 1; a < g->narg; a++)
        if (g->stride[a][0] != 0 && g->stride[a][0] != 1) return false;
    return true;
}

/* The kernels' copy of a geometry in their index type IT, and element i -> offsets. */
#define CU_GEOM_K(NAME, IT)                                                                 \
    typedef struct NAME {                                                                   \
        int nd;                                                                             \
        IT size[TC_MAX_DIMS];                                                               \
        IT stride[CU_MAXARG][TC_MAX_DIMS];                                                  \
    } NAME;                                                                                 \
    CU_HD NAME NAME##_from(const cu_geom *g)                                                \
    {                                                                                       \
        NAME k;                                                                             \
        memset(&k, 0, sizeof k);                                                            \
        k.nd = g->nd;                                                                       \
        for (int d = 0; d < g->nd; d++) {                                                   \
            k.size[d] = (IT)g->size[d];                                                     \
            for (int a = 0; a < g->narg; a++) k.stride[a][d] = (IT)g->stride[a][d];         \
        }                                                                                   \
        return k;                                                                           \
    }                                                                                       \
    /* i < numel: what is left of i at the outermost dim is its index there (no division, \
     * so a flat geometry costs none) */                                                    \
    CU_HD void NAME##_offsets(const NAME *k, IT i, int narg, IT *off)                       \
    {                                                                                       \
        for (int a = 0; a < narg; a++) off[a] = 0;                                          \
        for (int d = k->nd - 1; d > 0; d--) {                                               \
            IT q = i / k->size[d], r = i - q * k->size[d];                                  \
            i = q;                                                                          \
            for (int a = 0; a < narg; a++) off[a] += r * k->stride[a][d];                   \
        }                                                                                   \
        if (k->nd > 0)                                                                      \
            for (int a = 0; a < narg; a++) off[a] += i * k->stride[a][0];                   \
    }
CU_GEOM_K(cu_geom32, int32_t)
CU_GEOM_K(cu_geom64, int64_t)

#ifdef __CUDACC__
/* One spelling for kernels templated on the geometry type. */
__device__ __forceinline__ void geom_offsets(const cu_geom32 *g, int32_t i, int narg, int32_t *off)
{
    cu_geom32_offsets(g, i, narg, off);
}
__device__ __forceinline__ void geom_offsets(const cu_geom64 *g, int64_t i, int narg, int64_t *off)
{
    cu_geom64_offsets(g, i, narg, off);
}
#endif

/* ---- elementwise random samplers (core/cpu/random.c) ----------------------------------- */

#define CU_PI 3.14159265358979323846
#define CU_TWO_PI 6.283185307179586

typedef struct cu_rand {
    int op, dt;          /* tc_op, the result's dtype */
    uint64_t seed, base; /* Philox key and first slot */
    double s0, s1;
    double log1mp; /* geometric: log(1 - p) */
    int64_t lo;    /* random: values are lo + [0, span] */
    uint64_t span;
    int open_top; /* uniform with s0 < s1: results stay below s1 after rounding */
} cu_rand;

/* random()'s range without bounds: the dtype's non-negative integers (floats: exact ones). */
CU_HD uint64_t cu_rand_full_span(int dt)
{
    switch (dt) {
    case TC_U8: return 255;
    case TC_I8: return 127;
    case TC_I16: return 32767;
    case TC_I32: return 2147483647;
    case TC_I64: return INT64_MAX;
    case TC_F32: return 1ull << 24;
    case TC_F16: return 1ull << 11;
    case TC_BF16: return 1ull << 8;
    default: return 1ull << 53;
    }
}

/* The per-call constants, as run_elementwise computes them. */
CU_HD cu_rand cu_rand_setup(int op, int dt, double s0, double s1, uint64_t seed, uint64_t base)
{
    cu_rand r;
    memset(&r, 0, sizeof r);
    r.op = op, r.dt = dt, r.seed = seed, r.base = base, r.s0 = s0, r.s1 = s1;
    if (op == TC_OP_GEOMETRIC) r.log1mp = log1p(-s0);
    if (op == TC_OP_RANDOM) {
        if (s1 > s0) {
            int64_t hi = s1 >= 9223372036854775808.0 ? INT64_MAX : (int64_t)s1 - 1;
            r.lo = (int64_t)s0;
            r.span = (uint64_t)hi - (uint64_t)r.lo;
        } else {
            r.lo = 0;
            r.span = cu_rand_full_span(dt);
        }
    }
    r.open_top = op == TC_OP_UNIFORM && s0 < s1;
    return r;
}

/* The values of elements 2s and 2s+1 (v[0], v[1]) of every double-valued sampler; for
 * bernoulli the raw uniforms (the caller compares them with the probabilities). */
CU_HD void cu_rand_pair(const cu_rand *r, uint64_t s, double v[2])
{
    tc_philox_block k = tc_philox_at(r->seed, r->base + s, 0);
    double u[2] = {tc_philox_u53(k.w[0], k.w[1]), tc_philox_u53(k.w[2], k.w[3])};
    if (r->op == TC_OP_NORMAL || r->op == TC_OP_LOG_NORMAL) { /* Box-Muller on the pair */
        double rr = sqrt(-2.0 * log1p(-u[0])), th = CU_TWO_PI * u[1];
        double z[2] = {rr * cos(th), rr * sin(th)};
        for (int j = 0; j < 2; j++) {
            v[j] = CU_DADD(r->s0, CU_DMUL(r->s1, z[j]));
            if (r->op == TC_OP_LOG_NORMAL) v[j] = exp(v[j]);
        }
        return;
    }
    for (int j = 0; j < 2; j++) {
        double x = u[j];
        switch (r->op) {
        case TC_OP_UNIFORM: x = CU_DADD(r->s0, CU_DMUL(r->s1 - r->s0, x)); break;
        case TC_OP_EXPONENTIAL: x = -log1p(-x) / r->s0; break;
        case TC_OP_CAUCHY: x = CU_DADD(r->s0, CU_DMUL(r->s1, tan(CU_PI * (x - 0.5)))); break;
        case TC_OP_GEOMETRIC: {
            double t = ceil(log1p(-x) / r->log1mp);
            x = t >= 1 ? t : 1;
            break;
        }
        default: break; /* bernoulli: the uniform itself */
        }
        v[j] = x;
    }
}

/* Unbiased integer in [0, span] (cpu/random.c bounded): rejection redraws from the same
 * slot and half, draw 1, 2, ... */
CU_HD uint64_t cu_rand_bounded(uint64_t seed, uint64_t slot, int half, uint64_t x, uint64_t span)
{
    if (span == UINT64_MAX) return x;
    uint64_t r = span + 1;
    if ((r & span) == 0) return x & span;
    uint64_t threshold = (0 - r) % r;
    for (uint64_t draw = 1; x < threshold; draw++) {
        tc_philox_block k = tc_philox_at(seed, slot, draw);
        x = tc_philox_u64(k.w[2 * half], k.w[2 * half + 1]);
    }
    return x % r;
}

/* random(): element i. */
CU_HD int64_t cu_rand_int(const cu_rand *r, uint64_t i)
{
    uint64_t slot = r->base + i / 2;
    int half = (int)(i & 1);
    tc_philox_block k = tc_philox_at(r->seed, slot, 0);
    uint64_t x = cu_rand_bounded(r->seed, slot, half, tc_philox_u64(k.w[2 * half], k.w[2 * half + 1]), r->span);
    return (int64_t)((uint64_t)r->lo + x);
}

CU_HD uint16_t cu_half_down(uint16_t h)
{
    return (h & 0x8000) ? (uint16_t)(h + 1) : (h ? (uint16_t)(h - 1) : 0x8001);
}

/* store_doubles of cpu/random.c: with open_top, the stored value stays below ub. */
CU_HD void cu_rand_store(int dt, void *p, double x, int open_top, double ub)
{
    switch (dt) {
    case TC_F64:
        if (open_top && x >= ub) x = nextafter(ub, -(double)INFINITY);
        *(double *)p = x;
        break;
    case TC_F32: {
        float f = (float)x;
        if (open_top && (double)f >= ub) {
            f = (float)ub;
            while ((double)f >= ub) f = nextafterf(f, -(float)INFINITY);
        }
        *(float *)p = f;
        break;
    }
    case TC_F16:
    case TC_BF16: {
        float f = (float)x;
        uint16_t h = dt == TC_F16 ? cu_f32_to_f16(f) : cu_f32_to_bf16(f);
        while (open_top && (double)(dt == TC_F16 ? cu_f16_to_f32(h) : cu_bf16_to_f32(h)) >= ub) h = cu_half_down(h);
        *(uint16_t *)p = h;
        break;
    }
    default: cu_store_double(dt, p, x); break; /* integer and bool results: saturating */
    }
}

/* store_ints of cpu/random.c: random's values fit the dtype (checked in prepare). */
CU_HD void cu_rand_store_int(int dt, void *p, int64_t v)
{
    switch (dt) {
    case TC_U8: *(uint8_t *)p = (uint8_t)v; break;
    case TC_I8: *(int8_t *)p = (int8_t)v; break;
    case TC_I16: *(int16_t *)p = (int16_t)v; break;
    case TC_I32: *(int32_t *)p = (int32_t)v; break;
    case TC_I64: *(int64_t *)p = v; break;
    default: cu_store_double(dt, p, (double)v); break;
    }
}

#endif /* TC_CU_ELEM_H */
