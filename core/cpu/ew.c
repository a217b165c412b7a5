/* ew.c -- CPU elementwise kernels, instantiated from the formulas in ops.def, plus the
 * copy/convert and where kernels.
 *
 * For every TC_EW line and every computing dtype a loop function is generated below; the
 * dtype list appears once (EW_ALL_DTYPES). Each loop has a contiguous fast path (plain
 * indexed loop the compiler vectorises), a scalar-second-operand path (x:add(5)) and a
 * strided path; the iteration engine (loops.c) decides nothing per op.
 */
#include "../half_bits.h"
#include "../scalar_math.h"
#include "loops.h"
#include <ctype.h>
#include <tgmath.h>

/* For float32, exp and tanh in the formulas use the branch-free versions in
 * scalar_math.h so loops vectorise (libm's are opaque calls); double keeps libm. The
 * formulas in ops.def are unchanged. */
#undef exp
#define exp(x) _Generic((x), float: tc_expf, default: tc_exp_libm)(x)
#undef tanh
#define tanh(x) _Generic((x), float: tc_tanhf, default: tc_tanh_libm)(x)
static inline double tc_exp_libm(double x) { return (exp)(x); }
static inline double tc_tanh_libm(double x) { return (tanh)(x); }

#define DIFF TC_OPF_DIFF
#define FLT TC_OPF_FLT
#define INT TC_OPF_INT
#define BOOL TC_OPF_BOOL
#define CMP TC_OPF_CMP
#define ZDIV TC_OPF_ZDIV

/* The output type OT_: uint8 for comparisons, else T. __builtin_choose_expr keeps the
 * chosen operand's own type (a ?: would promote uint8/int16/bool to int). */
#define EW_OUT_TYPE(fl, T) typedef __typeof__(__builtin_choose_expr(((fl) & TC_OPF_CMP) != 0, (uint8_t)0, (T)0)) OT_

#define EW_PARAMS(T)                                                                        \
    const T p0 = (T)s0, p1 = (T)s1;                                                         \
    (void)p0;                                                                               \
    (void)p1

/* Each body: contiguous path, then strided. O is written through the output type. */
#define EW_BODY_0(T, fl, EXPR)                                                              \
    EW_PARAMS(T);                                                                           \
    if (st[0] == (int64_t)sizeof(T)) {                                                      \
        T *O = (T *)pp[0];                                                                  \
        for (int64_t i = 0; i < n; i++) O[i] = (T)(EXPR);                                   \
    } else {                                                                                \
        for (int64_t i = 0; i < n; i++) *(T *)(pp[0] + i * st[0]) = (T)(EXPR);              \
    }

#define EW_BODY_1(T, fl, EXPR)                                                              \
    EW_PARAMS(T);                                                                           \
    EW_OUT_TYPE(fl, T);                                                                     \
    if (st[0] == (int64_t)sizeof(OT_) && st[1] == (int64_t)sizeof(T)) {                     \
        OT_ *O = (OT_ *)pp[0];                                                              \
        const T *A = (const T *)pp[1];                                                      \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = A[i];                                                                     \
            O[i] = (OT_)(EXPR);                                                             \
        }                                                                                   \
    } else {                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = *(const T *)(pp[1] + i * st[1]);                                          \
            *(OT_ *)(pp[0] + i * st[0]) = (OT_)(EXPR);                                      \
        }                                                                                   \
    }

#define EW_BODY_2(T, fl, EXPR)                                                              \
    EW_PARAMS(T);                                                                           \
    EW_OUT_TYPE(fl, T);                                                                     \
    if (st[0] == (int64_t)sizeof(OT_) && st[1] == (int64_t)sizeof(T)) {                     \
        OT_ *O = (OT_ *)pp[0];                                                              \
        const T *A = (const T *)pp[1];                                                      \
        if (st[2] == (int64_t)sizeof(T)) {                                                  \
            const T *B = (const T *)pp[2];                                                  \
            for (int64_t i = 0; i < n; i++) {                                               \
                T a = A[i], b = B[i];                                                       \
                O[i] = (OT_)(EXPR);                                                         \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        if (st[2] == 0) {                                                                   \
            const T b = *(const T *)pp[2];                                                  \
            for (int64_t i = 0; i < n; i++) {                                               \
                T a = A[i];                                                                 \
                O[i] = (OT_)(EXPR);                                                         \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
    }                                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                       \
        T a = *(const T *)(pp[1] + i * st[1]), b = *(const T *)(pp[2] + i * st[2]);         \
        *(OT_ *)(pp[0] + i * st[0]) = (OT_)(EXPR);                                          \
    }

#define EW_BODY_3(T, fl, EXPR)                                                              \
    EW_PARAMS(T);                                                                           \
    EW_OUT_TYPE(fl, T);                                                                     \
    if (st[0] == (int64_t)sizeof(OT_) && st[1] == (int64_t)sizeof(T) &&                    \
        st[2] == (int64_t)sizeof(T) && st[3] == (int64_t)sizeof(T)) {                       \
        OT_ *O = (OT_ *)pp[0];                                                              \
        const T *A = (const T *)pp[1], *B = (const T *)pp[2], *Cc = (const T *)pp[3];       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = A[i], b = B[i], c = Cc[i];                                                \
            O[i] = (OT_)(EXPR);                                                             \
        }                                                                                   \
    } else if (st[0] == (int64_t)sizeof(OT_) && st[1] == (int64_t)sizeof(T) &&             \
               st[2] == (int64_t)sizeof(T) && st[3] == 0) {                                 \
        /* a scalar third operand (lerp's weight, Adam's moment update) */                  \
        OT_ *O = (OT_ *)pp[0];                                                              \
        const T *A = (const T *)pp[1], *B = (const T *)pp[2], c = *(const T *)pp[3];       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = A[i], b = B[i];                                                           \
            O[i] = (OT_)(EXPR);                                                             \
        }                                                                                   \
    } else {                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = *(const T *)(pp[1] + i * st[1]), b = *(const T *)(pp[2] + i * st[2]);     \
            T c = *(const T *)(pp[3] + i * st[3]);                                          \
            *(OT_ *)(pp[0] + i * st[0]) = (OT_)(EXPR);                                      \
        }                                                                                   \
    }

/* T is a typedef inside each loop because the formulas in ops.def name it. Float loops
 * are also compiled for AVX2 and picked at load time (the build targets baseline x86-64):
 * the branch-free exp/tanh of scalar_math.h then run 8 lanes wide. Results are the same
 * bits (IEEE operations, no FMA contraction under -std=c11). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define EW_WIDE_f32 __attribute__((target_clones("avx2", "default")))
#define EW_WIDE_f64 __attribute__((target_clones("avx2", "default")))
#else
#define EW_WIDE_f32
#define EW_WIDE_f64
#endif
#define EW_WIDE_u8
#define EW_WIDE_i8
#define EW_WIDE_i16
#define EW_WIDE_i32
#define EW_WIDE_i64
#define EW_WIDE_b8
#define EW_DEF(ID, sfx, TY, ar, fl, EXPR)                                                   \
    EW_WIDE_##sfx static void ew_##ID##_##sfx(char **pp, const int64_t *st, int64_t n, double s0, double s1) \
    {                                                                                       \
        typedef TY T;                                                                       \
        EW_BODY_##ar(T, fl, EXPR)                                                           \
    }

/* The one list of computing dtypes: floats take the float formula, the rest the integer
 * one. f16/bf16 are not here: they run through the f32 loops (tc_cpu_with_f32). */
#define EW_ALL_DTYPES(ID, ar, fl, ffmt, ifmt)                                               \
    EW_DEF(ID, f32, float, ar, fl, ffmt)                                                    \
    EW_DEF(ID, f64, double, ar, fl, ffmt)                                                   \
    EW_DEF(ID, u8, uint8_t, ar, fl, ifmt)                                                   \
    EW_DEF(ID, i8, int8_t, ar, fl, ifmt)                                                    \
    EW_DEF(ID, i16, int16_t, ar, fl, ifmt)                                                  \
    EW_DEF(ID, i32, int32_t, ar, fl, ifmt)                                                  \
    EW_DEF(ID, i64, int64_t, ar, fl, ifmt)                                                  \
    EW_DEF(ID, b8, bool, ar, fl, ifmt)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wbool-operation"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#pragma GCC diagnostic ignored "-Wbool-compare"
#pragma GCC diagnostic ignored "-Wtautological-compare"
#pragma GCC diagnostic ignored "-Wunused-variable"
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) EW_ALL_DTYPES(ID, ar, fl, ffmt, ifmt)
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "../ops.def"
#undef TC_EW
#undef TC_OPK
#pragma GCC diagnostic pop

/* loop table: [op][dtype]; NULL where the op is not elementwise or the dtype is half. */
static const tc_loop_fn ew_loops[TC_OP_COUNT][TC_DTYPE_COUNT] = {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt)                                               \
    [TC_OP_##ID] = {[TC_F32] = ew_##ID##_f32, [TC_F64] = ew_##ID##_f64, [TC_U8] = ew_##ID##_u8,  \
                    [TC_I8] = ew_##ID##_i8,   [TC_I16] = ew_##ID##_i16, [TC_I32] = ew_##ID##_i32, \
                    [TC_I64] = ew_##ID##_i64, [TC_BOOL] = ew_##ID##_b8},
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "../ops.def"
#undef TC_EW
#undef TC_OPK
};

/* Integer division by zero is an error, found before anything is written. */
static tc_status check_no_zero_divisor(const tc_kcall *k)
{
    const tc_tensor *b = k->in[1];
    if (tc_dtype_is_float((tc_dtype)b->dtype)) return TC_OK;
    tc_elem_iter it;
    tc_elem_iter_init(&it, b);
    char *p;
    while ((p = tc_elem_iter_next(&it)))
        if (tc_load_as_double(b->dtype, p) == 0)
            return tc_set_error(TC_ERR_ARG, "%s: integer division by zero", k->info->name);
    return TC_OK;
}

/* Whether a float formula calls a function (exp, tanh, pow, ...): several ns an element,
 * so worth splitting over the pool sooner than plain arithmetic (loops.h). */
static bool calls_function(const char *f)
{
    for (const char *p = f; *p; p++)
        if (*p == '(' && p > f && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) return true;
    return false;
}

tc_status tc_cpu_ew(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_ew);
    int dt = k->info->nin > 0 ? k->in[0]->dtype : k->out[0]->dtype;
    tc_loop_fn fn = ew_loops[k->op][dt];
    if (!fn)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: no CPU kernel for %s", k->info->name,
                            tc_dtype_name((tc_dtype)dt));
    if (k->info->flags & TC_OPF_ZDIV) TRY(check_no_zero_divisor(k));
    bool heavy = (dt == TC_F32 || dt == TC_F64) && tc_tensor_numel(k->out[0]) >= 2 * TC_PARALLEL_GRAIN &&
                 calls_function(k->info->formula);
    tc_cpu_foreach_grain(k->out[0], k->in, k->nin, fn, k->p->s[0], k->p->s[1],
                         heavy ? TC_PARALLEL_GRAIN : TC_EW_GRAIN_CHEAP);
    return TC_OK;
}

/* The dispatcher's fast path for small same-shape calls (x:add(y), z = x + y on tiny
 * tensors, where checks cost more than the arithmetic): every operand contiguous, one
 * computing dtype, inputs either out's shape or single elements. Returns false (and
 * touches nothing) when the call does not qualify; the general path then handles it. */
bool tc_cpu_ew_fast(tc_op op, const tc_opinfo *info, const tc_tensor *const *in, int nin, const tc_params *p,
                    tc_tensor *out)
{
    int dt = out->dtype;
    if ((info->flags & (TC_OPF_CMP | TC_OPF_ZDIV)) || tc_is_half(dt) || !out->storage || out->storage->device != TC_CPU)
        return false;
    bool allowed = (dt == TC_F32 || dt == TC_F64) ? (info->flags & TC_OPF_FLT)
                   : dt == TC_BOOL               ? (info->flags & TC_OPF_BOOL)
                                                 : (info->flags & TC_OPF_INT);
    if (!allowed || !tc_tensor_is_contiguous(out)) return false;
    int64_t n = tc_tensor_numel(out), es = tc_elsize(dt);
    if (n >= 2 * TC_PARALLEL_GRAIN) return false;
    char *ptr[4];
    int64_t st[4];
    ptr[0] = tc_base(out);
    st[0] = es;
    for (int i = 0; i < nin; i++) {
        const tc_tensor *t = in[i];
        if (!t || t->dtype != dt || !t->storage || t->storage->device != TC_CPU) return false;
        int64_t tn = tc_tensor_numel(t);
        if (t->storage == out->storage && !(t->offset == out->offset && tn == n))
            return false; /* shares memory with out other than element for element: dispatch.c */
        if (tn == 1 && t->ndim <= out->ndim) st[i + 1] = 0;
        else if (tc_same_shape(t, out) && tc_tensor_is_contiguous(t)) st[i + 1] = es;
        else return false;
        ptr[i + 1] = tc_base(t);
    }
    ew_loops[op][dt](ptr, st, n, p->s[0], p->s[1]);
    return true;
}

/* ---- copy / convert ------------------------------------------------------------------ */

/* Same-dtype copies are byte moves; conversions go through one load/store per pair. The
 * conversion loops are generated for each (from, to) pair of computing dtypes. */
#define CONV_DEF(FS, FT, TS, TT)                                                            \
    static void conv_##FS##_##TS(char **pp, const int64_t *st, int64_t n, double s0, double s1) \
    {                                                                                       \
        (void)s0;                                                                           \
        (void)s1;                                                                           \
        for (int64_t i = 0; i < n; i++)                                                     \
            *(TT *)(pp[0] + i * st[0]) = conv_value_##TS(*(const FT *)(pp[1] + i * st[1])); \
    }

/* Float-to-integer conversions saturate (C leaves out-of-range conversions undefined). */
#define SAT(T, lo, hi)                                                                      \
    static inline T conv_value_sat_##T(double v) { return v != v ? 0 : v <= lo ? (T)lo : v >= hi ? (T)hi : (T)v; }
SAT(uint8_t, 0.0, 255.0)
SAT(int8_t, -128.0, 127.0)
SAT(int16_t, -32768.0, 32767.0)
SAT(int32_t, -2147483648.0, 2147483647.0)
SAT(int64_t, -9223372036854775808.0, 9223372036854774784.0)
static inline float conv_value_f32(double v) { return (float)v; }
static inline double conv_value_f64(double v) { return v; }
static inline uint8_t conv_value_u8(double v) { return conv_value_sat_uint8_t(v); }
static inline int8_t conv_value_i8(double v) { return conv_value_sat_int8_t(v); }
static inline int16_t conv_value_i16(double v) { return conv_value_sat_int16_t(v); }
static inline int32_t conv_value_i32(double v) { return conv_value_sat_int32_t(v); }
static inline int64_t conv_value_i64(double v) { return conv_value_sat_int64_t(v); }
static inline bool conv_value_b8(double v) { return v != 0; }

/* int64 -> int64 must not pass through double (precision); same-dtype pairs use memcpy
 * loops instead, so only cross-dtype pairs are generated. */
#define CONV_FROM(FS, FT)                                                                   \
    CONV_DEF(FS, FT, f32, float) CONV_DEF(FS, FT, f64, double) CONV_DEF(FS, FT, u8, uint8_t)  \
    CONV_DEF(FS, FT, i8, int8_t) CONV_DEF(FS, FT, i16, int16_t) CONV_DEF(FS, FT, i32, int32_t) \
    CONV_DEF(FS, FT, i64, int64_t) CONV_DEF(FS, FT, b8, bool)
CONV_FROM(f32, float)
CONV_FROM(f64, double)
CONV_FROM(u8, uint8_t)
CONV_FROM(i8, int8_t)
CONV_FROM(i16, int16_t)
CONV_FROM(i32, int32_t)
CONV_FROM(i64, int64_t)
CONV_FROM(b8, bool)

#define CONV_ROW(FS)                                                                        \
    {[TC_F32] = conv_##FS##_f32, [TC_F64] = conv_##FS##_f64, [TC_U8] = conv_##FS##_u8,        \
     [TC_I8] = conv_##FS##_i8,   [TC_I16] = conv_##FS##_i16, [TC_I32] = conv_##FS##_i32,      \
     [TC_I64] = conv_##FS##_i64, [TC_BOOL] = conv_##FS##_b8}
static const tc_loop_fn conv_loops[TC_DTYPE_COUNT][TC_DTYPE_COUNT] = {
    [TC_F32] = CONV_ROW(f32), [TC_F64] = CONV_ROW(f64), [TC_U8] = CONV_ROW(u8),
    [TC_I8] = CONV_ROW(i8),   [TC_I16] = CONV_ROW(i16), [TC_I32] = CONV_ROW(i32),
    [TC_I64] = CONV_ROW(i64), [TC_BOOL] = CONV_ROW(b8),
};

#define COPY_BYTES(N, T)                                                                    \
    static void copy_##N(char **pp, const int64_t *st, int64_t n, double s0, double s1)     \
    {                                                                                       \
        (void)s0;                                                                           \
        (void)s1;                                                                           \
        if (st[0] == N && st[1] == N) {                                                     \
            memmove(pp[0], pp[1], (size_t)(n * N));                                         \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++) *(T *)(pp[0] + i * st[0]) = *(const T *)(pp[1] + i * st[1]); \
    }
COPY_BYTES(1, uint8_t)
COPY_BYTES(2, uint16_t)
COPY_BYTES(4, uint32_t)
COPY_BYTES(8, uint64_t)

static tc_loop_fn copy_loop(size_t elsize)
{
    switch (elsize) {
    case 1: return copy_1;
    case 2: return copy_2;
    case 4: return copy_4;
    default: return copy_8;
    }
}

/* Conversions touching f16/bf16: through double, the dtypes riding in s0 (to), s1 (from). */
static void conv_generic(char **pp, const int64_t *st, int64_t n, double to, double from)
{
    for (int64_t i = 0; i < n; i++)
        tc_store_double((int)to, pp[0] + i * st[0], tc_load_as_double((int)from, pp[1] + i * st[1]));
}

/* float32 <-> float16 / bfloat16, the conversions every half-precision CPU op makes
 * (tc_cpu_with_f32, autocast): the inline bit conversions, a tight loop when both sides are
 * contiguous. The same bits as conv_generic (float32 -> double -> float32 is exact). */
#define HALF_CONV(name, TO, FROM, fn)                                                       \
    static void name(char **pp, const int64_t *st, int64_t n, double s0, double s1)        \
    {                                                                                       \
        (void)s0, (void)s1;                                                                 \
        if (st[0] == sizeof(TO) && st[1] == sizeof(FROM)) {                                 \
            TO *o = (TO *)pp[0];                                                            \
            const FROM *a = (const FROM *)pp[1];                                            \
            for (int64_t i = 0; i < n; i++) o[i] = fn(a[i]);                                \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++) *(TO *)(pp[0] + i * st[0]) = fn(*(const FROM *)(pp[1] + i * st[1])); \
    }
HALF_CONV(conv_f32_f16, uint16_t, float, hb_f32_to_f16)
HALF_CONV(conv_f16_f32, float, uint16_t, hb_f16_to_f32)
HALF_CONV(conv_f32_bf16, uint16_t, float, hb_f32_to_bf16)
HALF_CONV(conv_bf16_f32, float, uint16_t, hb_bf16_to_f32)

/* the loop for a conversion touching a half type */
static tc_loop_fn half_conv_loop(int to, int from)
{
    if (from == TC_F32 && to == TC_F16) return conv_f32_f16;
    if (from == TC_F16 && to == TC_F32) return conv_f16_f32;
    if (from == TC_F32 && to == TC_BF16) return conv_f32_bf16;
    if (from == TC_BF16 && to == TC_F32) return conv_bf16_f32;
    return conv_generic;
}

/* Torch7's copy between equal element counts but unrelated shapes: both walked in
 * row-major order. */
static void convert_rowmajor(tc_tensor *out, const tc_tensor *src)
{
    tc_elem_iter io, is;
    tc_elem_iter_init(&io, out);
    tc_elem_iter_init(&is, src);
    char *po, *ps;
    while ((po = tc_elem_iter_next(&io)) && (ps = tc_elem_iter_next(&is)))
        tc_store_double(out->dtype, po, tc_load_as_double(src->dtype, ps));
}

tc_status tc_cpu_convert(const tc_kcall *k)
{
    tc_tensor *out = k->out[0];
    const tc_tensor *src = k->in[0];
    if (!tc_same_shape(out, src)) {
        const tc_tensor *pair[2] = {out, src};
        int nd;
        int64_t sz[TC_MAX_DIMS];
        bool expands = tc_broadcast_shapes(NULL, pair, 2, &nd, sz) == TC_OK && nd == out->ndim &&
                       memcmp(sz, out->size, sizeof(int64_t) * (size_t)nd) == 0;
        if (!expands) {
            convert_rowmajor(out, src);
            return TC_OK;
        }
    }
    if (out->dtype == src->dtype)
        tc_cpu_foreach(out, &src, 1, copy_loop(tc_dtype_size((tc_dtype)out->dtype)), 0, 0);
    else if (tc_is_half(out->dtype) || tc_is_half(src->dtype))
        tc_cpu_foreach(out, &src, 1, half_conv_loop(out->dtype, src->dtype), out->dtype, src->dtype);
    else
        tc_cpu_foreach(out, &src, 1, conv_loops[src->dtype][out->dtype], 0, 0);
    return TC_OK;
}

/* ---- where ----------------------------------------------------------------------------- */

/* Contiguous runs (a mask against two tensors, or against a tensor and a scalar: the
 * relu forward and the gradient of every masked rule) take indexed loops the compiler
 * turns into vector blends; anything else the strided loop. */
#define WHERE_DEF(N, T)                                                                     \
    static void where_##N(char **pp, const int64_t *st, int64_t n, double s0, double s1)   \
    {                                                                                       \
        (void)s0;                                                                           \
        (void)s1;                                                                           \
        if (st[0] == N && st[1] == 1) {                                                     \
            T *o = (T *)pp[0];                                                              \
            const uint8_t *m = (const uint8_t *)pp[1];                                      \
            if (st[2] == N && st[3] == N) {                                                 \
                const T *a = (const T *)pp[2], *b = (const T *)pp[3];                       \
                for (int64_t i = 0; i < n; i++) {                                           \
                    T x = a[i], y = b[i]; /* both loaded: a branch-free blend */            \
                    o[i] = m[i] ? x : y;                                                    \
                }                                                                           \
                return;                                                                     \
            }                                                                               \
            if (st[2] == 0 && st[3] == N) {                                                 \
                const T a = *(const T *)pp[2], *b = (const T *)pp[3];                       \
                for (int64_t i = 0; i < n; i++) {                                           \
                    T y = b[i];                                                             \
                    o[i] = m[i] ? a : y;                                                    \
                }                                                                           \
                return;                                                                     \
            }                                                                               \
            if (st[2] == N && st[3] == 0) {                                                 \
                const T *a = (const T *)pp[2], b = *(const T *)pp[3];                       \
                for (int64_t i = 0; i < n; i++) {                                           \
                    T x = a[i];                                                             \
                    o[i] = m[i] ? x : b;                                                    \
                }                                                                           \
                return;                                                                     \
            }                                                                               \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++)                                                     \
            *(T *)(pp[0] + i * st[0]) = *(const uint8_t *)(pp[1] + i * st[1])                \
                                            ? *(const T *)(pp[2] + i * st[2])               \
                                            : *(const T *)(pp[3] + i * st[3]);              \
    }
WHERE_DEF(1, uint8_t)
WHERE_DEF(2, uint16_t)
WHERE_DEF(4, uint32_t)
WHERE_DEF(8, uint64_t)

tc_status tc_cpu_select(const tc_kcall *k)
{
    size_t es = tc_dtype_size((tc_dtype)k->out[0]->dtype);
    tc_loop_fn fn = es == 1 ? where_1 : es == 2 ? where_2 : es == 4 ? where_4 : where_8;
    tc_cpu_foreach(k->out[0], k->in, 3, fn, 0, 0);
    return TC_OK;
}

/* The loop a kernel of this file would run for one operand layout (loops.h): an
 * elementwise op's formula loop for computing dtype `in`, copy's conversion in -> out,
 * where's blend by out's element size. NULL where no such loop exists (half dtypes). Fused
 * groups (core/graph/fused.c) call these so they compute exactly what eager mode does. */
tc_loop_fn tc_cpu_ew_loop(tc_op op, int in, int out)
{
    if (in < 0 || in >= TC_DTYPE_COUNT || out < 0 || out >= TC_DTYPE_COUNT) return NULL;
    if (op == TC_OP_COPY) {
        if (in == out) return copy_loop(tc_dtype_size((tc_dtype)out));
        return tc_is_half(in) || tc_is_half(out) ? NULL : conv_loops[in][out];
    }
    if (op == TC_OP_WHERE) {
        size_t es = tc_dtype_size((tc_dtype)out);
        return es == 1 ? where_1 : es == 2 ? where_2 : es == 4 ? where_4 : where_8;
    }
    return (int)op >= 0 && (int)op < TC_OP_COUNT ? ew_loops[op][in] : NULL;
}
