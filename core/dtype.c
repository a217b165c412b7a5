/* dtype.c -- element type metadata, half-precision conversion, and the slow generic
 * load/store used where a kernel handles every dtype through doubles. */
#include "internal.h"
#include "half_bits.h"
#include <math.h>

static const struct {
    const char *name;
    size_t size;
} dtype_meta[TC_DTYPE_COUNT] = {
    [TC_F32] = {"float32", 4}, [TC_F64] = {"float64", 8}, [TC_F16] = {"float16", 2},
    [TC_BF16] = {"bfloat16", 2}, [TC_U8] = {"uint8", 1},   [TC_I8] = {"int8", 1},
    [TC_I16] = {"int16", 2},     [TC_I32] = {"int32", 4},   [TC_I64] = {"int64", 8},
    [TC_BOOL] = {"bool", 1},
};

size_t tc_dtype_size(tc_dtype dt)
{
    return (unsigned)dt < TC_DTYPE_COUNT ? dtype_meta[dt].size : 0;
}

const char *tc_dtype_name(tc_dtype dt)
{
    return (unsigned)dt < TC_DTYPE_COUNT ? dtype_meta[dt].name : "invalid-dtype";
}

int tc_dtype_is_float(tc_dtype dt) { return dt == TC_F32 || dt == TC_F64 || tc_is_half(dt); }

/* ---- IEEE half and bfloat16, round to nearest even (half_bits.h) ----------------------- */

uint16_t tc_f32_to_f16(float x) { return hb_f32_to_f16(x); }
/* The conversions Lua calls (element reads of half tensors) give every NaN as the one NaN:
 * LuaJIT takes a returned float's bits as they are, and a NaN with a payload in the top bits
 * would read as another Lua type (see GET in lua/torch/tensor.lua). */
float tc_f16_to_f32(uint16_t h)
{
    float f = hb_f16_to_f32(h);
    return f == f ? f : NAN;
}
uint16_t tc_f32_to_bf16(float x) { return hb_f32_to_bf16(x); }
float tc_bf16_to_f32(uint16_t h)
{
    float f = hb_bf16_to_f32(h);
    return f == f ? f : NAN;
}

/* ---- generic element access ----------------------------------------------------------- */

double tc_load_as_double(int dt, const void *p)
{
    switch (dt) {
    case TC_F32: return *(const float *)p;
    case TC_F64: return *(const double *)p;
    case TC_F16: return tc_f16_to_f32(*(const uint16_t *)p);
    case TC_BF16: return tc_bf16_to_f32(*(const uint16_t *)p);
    case TC_U8: return *(const uint8_t *)p;
    case TC_I8: return *(const int8_t *)p;
    case TC_I16: return *(const int16_t *)p;
    case TC_I32: return *(const int32_t *)p;
    case TC_I64: return (double)*(const int64_t *)p;
    case TC_BOOL: return *(const bool *)p ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* Float-to-integer conversion of a value outside the target range is undefined in C; we
 * saturate (and map NaN to 0) so no input can make a conversion misbehave. */
static int64_t saturate_i64(double v, double lo, double hi)
{
    if (v != v) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

void tc_store_double(int dt, void *p, double v)
{
    switch (dt) {
    case TC_F32: *(float *)p = (float)v; break;
    case TC_F64: *(double *)p = v; break;
    case TC_F16: *(uint16_t *)p = tc_f32_to_f16((float)v); break;
    case TC_BF16: *(uint16_t *)p = tc_f32_to_bf16((float)v); break;
    case TC_U8: *(uint8_t *)p = (uint8_t)saturate_i64(v, 0, 255); break;
    case TC_I8: *(int8_t *)p = (int8_t)saturate_i64(v, -128, 127); break;
    case TC_I16: *(int16_t *)p = (int16_t)saturate_i64(v, -32768, 32767); break;
    case TC_I32: *(int32_t *)p = (int32_t)saturate_i64(v, -2147483648.0, 2147483647.0); break;
    case TC_I64: *(int64_t *)p = saturate_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case TC_BOOL: *(bool *)p = v != 0; break;
    default: break;
    }
}
