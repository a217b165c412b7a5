/* emu_cudnn_impl.h -- what the fake cuDNN's two files share (tests only): the opaque
 * descriptor structs behind cuDNN's handle types, element load / store by cudnnDataType_t
 * (float, double, half and bfloat16 by their bits, so no CUDA header code runs on the
 * host), alpha / beta blending, and the argument-check helpers.
 *   emu_cudnn.cc      handles, tensor / filter / convolution / pooling descriptors,
 *                     convolutions, batch norm, softmax, pooling
 *   emu_cudnn_rnn.cc  dropout and RNN descriptors, cudnnRNNForward / Backward*_v8
 * Every descriptor is a plain value (no pointers into other descriptors), so a call copies
 * what it needs into the work it enqueues: a graph replayed after the descriptors were
 * destroyed still computes what was captured.
 */
#ifndef TC_EMU_CUDNN_IMPL_H
#define TC_EMU_CUDNN_IMPL_H

#include "emu.h"
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define EMU_DNN_MAGIC 0x444e4e31u /* "DNN1": a live object of ours */

struct cudnnContext {
    uint32_t magic;
    cudaStream_t stream;
};

/* A tensor (or, with is_filter, the dims of a filter as a packed tensor of its format). */
struct cudnnTensorStruct {
    uint32_t magic;
    bool set;
    cudnnDataType_t dt;
    int nd;
    int dim[CUDNN_DIM_MAX], stride[CUDNN_DIM_MAX];
};

struct cudnnFilterStruct {
    uint32_t magic;
    bool set;
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    int nd;
    int dim[CUDNN_DIM_MAX]; /* k, c, h, w (the logical order, whatever the format) */
};

/* The convolution descriptor (values only). */
struct cudnnConvolutionStruct {
    uint32_t magic;
    bool set;
    int pad[2], str[2], dil[2], groups;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};

struct cudnnPoolingStruct {
    uint32_t magic;
    bool set;
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int win[2], pad[2], str[2];
};

struct cudnnDropoutStruct {
    uint32_t magic;
    bool set;
    float p;
    void *states;
    size_t state_bytes;
    unsigned long long seed;
};

/* A failed check: the note, then the status. */
#define FAIL(st, ...) (emu::note(__VA_ARGS__), (st))
#define BAD(...) FAIL(CUDNN_STATUS_BAD_PARAM, __VA_ARGS__)
#define UNSUP(...) FAIL(CUDNN_STATUS_NOT_SUPPORTED, __VA_ARGS__)

namespace emu_dnn {

template <class T> static inline cudnnStatus_t create_desc(T **p, const char *fn)
{
    if (!p) return BAD("%s: descriptor pointer is NULL", fn);
    *p = new T();
    (*p)->magic = EMU_DNN_MAGIC;
    return CUDNN_STATUS_SUCCESS;
}

template <class T> static inline cudnnStatus_t destroy_desc(T *p, const char *fn)
{
    if (!p) return CUDNN_STATUS_SUCCESS; /* cuDNN accepts NULL */
    if (p->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live descriptor", fn, (void *)p);
    p->magic = 0;
    delete p;
    return CUDNN_STATUS_SUCCESS;
}


/* Bytes of one element, 0 for a type the emulator does not compute with. */
static inline size_t elsize(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return 4;
    case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    default: return 0;
    }
}

static inline const char *type_name(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return "float";
    case CUDNN_DATA_DOUBLE: return "double";
    case CUDNN_DATA_HALF: return "half";
    case CUDNN_DATA_BFLOAT16: return "bfloat16";
    default: return "(unsupported type)";
    }
}

static inline float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    return bits_float(sign | ((e + 112) << 23) | (m << 13));
}

/* Round to nearest even, as __float2half_rn. */
static inline uint16_t float_to_half(float f)
{
    uint32_t u = float_bits(f), sign = (u >> 16) & 0x8000u;
    float a = fabsf(f);
    if (a != a) return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00u);
    if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24 */
        float q = a * 16777216.0f;
        uint32_t m = (uint32_t)nearbyintf(q); /* default rounding mode: nearest even */
        return (uint16_t)(sign | m);
    }
    uint32_t b = float_bits(a);
    uint32_t mant = b & 0x7fffffu, exp = (b >> 23) - 112;
    uint32_t hm = mant >> 13, rest = mant & 0x1fffu;
    uint32_t h = (exp << 10) | hm;
    if (rest > 0x1000u || (rest == 0x1000u && (hm & 1))) h++;
    return (uint16_t)(sign | h);
}

static inline float bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

static inline uint16_t float_to_bf16(float f)
{
    uint32_t u = float_bits(f);
    if (f != f) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline double load(cudnnDataType_t t, const void *base, int64_t i)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return ((const float *)base)[i];
    case CUDNN_DATA_DOUBLE: return ((const double *)base)[i];
    case CUDNN_DATA_HALF: return half_to_float(((const uint16_t *)base)[i]);
    case CUDNN_DATA_BFLOAT16: return bf16_to_float(((const uint16_t *)base)[i]);
    default: return 0;
    }
}

static inline void store(cudnnDataType_t t, void *base, int64_t i, double v)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: ((float *)base)[i] = (float)v; break;
    case CUDNN_DATA_DOUBLE: ((double *)base)[i] = v; break;
    case CUDNN_DATA_HALF: ((uint16_t *)base)[i] = float_to_half((float)v); break;
    case CUDNN_DATA_BFLOAT16: ((uint16_t *)base)[i] = float_to_bf16((float)v); break;
    default: break;
    }
}

/* cuDNN's scaling factors: double for double data, float for every other type. */
static inline double scalar(cudnnDataType_t t, const void *p)
{
    return t == CUDNN_DATA_DOUBLE ? *(const double *)p : (double)*(const float *)p;
}

/* y = alpha * r + beta * y, where beta == 0 means y is not read (it may hold NaN). */
static inline void blend(cudnnDataType_t t, void *y, int64_t off, double r, double alpha, double beta)
{
    double v = alpha * r;
    if (beta != 0) v += beta * load(t, y, off);
    store(t, y, off, v);
}

/* Elements [0, 1 + sum (dim-1) * stride) a tensor touches, in bytes. */
static inline size_t extent_bytes(const cudnnTensorStruct &d)
{
    int64_t last = 0;
    for (int i = 0; i < d.nd; i++) last += (int64_t)(d.dim[i] - 1) * d.stride[i];
    return (size_t)(last + 1) * elsize(d.dt);
}

static inline int64_t numel(const cudnnTensorStruct &d)
{
    int64_t n = 1;
    for (int i = 0; i < d.nd; i++) n *= d.dim[i];
    return n;
}

static inline bool same_dims(const cudnnTensorStruct &a, const cudnnTensorStruct &b)
{
    if (a.nd != b.nd) return false;
    for (int i = 0; i < a.nd; i++)
        if (a.dim[i] != b.dim[i]) return false;
    return true;
}

/* Element offset of the row-major linear index i of t's logical shape. */
static inline int64_t offset_of(const cudnnTensorStruct &t, int64_t i)
{
    int64_t off = 0;
    for (int d = t.nd - 1; d >= 0; d--) {
        off += (i % t.dim[d]) * t.stride[d];
        i /= t.dim[d];
    }
    return off;
}

/* emu::enqueue on the handle's stream; with TOCHA_CUDA_EMU_DNN_TRACE set, notes each call
 * (which cuDNN entry points a test reaches). */
void run(cudnnHandle_t h, const char *fn, std::function<void()> work);

/* "(2,3,5,5)" into buf. */
const char *dims_str(const cudnnTensorStruct &d, char *buf, size_t cap);

/* Whether h, t are live objects of ours that were set; notes the call otherwise. */
bool handle_ok(cudnnHandle_t h, const char *fn);
bool tensor_ok(const cudnnTensorStruct *t, const char *fn, const char *which);

/* The tensor's memory is one live device allocation (an empty tensor needs none). */
bool tensor_mem_ok(const cudnnTensorStruct &t, const void *p, const char *fn, const char *which);

/* ---- the real cuDNN's second opinion on descriptors (emu_cudnn_real.cc) ---- */

struct real_cudnn; /* the real library's descriptor entry points */

/* mine: the emulator's status for descriptor call fn; ask: the same call put to the real
 * library. Returns mine, or the real status where the real library refuses what the
 * emulator took (a GPU would fail there); notes every disagreement. Without the real
 * library, mine. */
cudnnStatus_t second_opinion(const char *fn, cudnnStatus_t mine, const std::function<cudnnStatus_t(const real_cudnn &)> &ask);
/* The output size of a convolution from both (dims: the emulator's n, c, h, w in, the real
 * library's out where they differ). */
cudnnStatus_t second_opinion_conv_dims(const char *fn, cudnnStatus_t mine, const cudnnConvolutionStruct &cv,
                                       const cudnnTensorStruct &x, const cudnnFilterStruct &f, int *dims);
/* The calls to put, each on a fresh real descriptor. */
cudnnStatus_t real_set_tensor_nd(const real_cudnn &r, cudnnDataType_t t, int nb, const int *dims, const int *st);
cudnnStatus_t real_set_tensor_4d(const real_cudnn &r, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c, int h,
                                 int w);
cudnnStatus_t real_set_filter_4d(const real_cudnn &r, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c, int h,
                                 int w);
cudnnStatus_t real_set_conv_2d(const real_cudnn &r, const cudnnConvolutionStruct &cv);
cudnnStatus_t real_set_conv_groups(const real_cudnn &r, int g);
cudnnStatus_t real_set_conv_math(const real_cudnn &r, cudnnMathType_t m);
cudnnStatus_t real_set_pool_2d(const real_cudnn &r, cudnnPoolingMode_t mode, cudnnNanPropagation_t nan, int wh, int ww,
                               int ph, int pw, int sh, int sw);
cudnnStatus_t real_set_rnn(const real_cudnn &r, cudnnRNNAlgo_t algo, cudnnRNNMode_t cell, cudnnRNNBiasMode_t bias,
                           cudnnDirectionMode_t dir, cudnnRNNInputMode_t in_mode, cudnnDataType_t dt, cudnnDataType_t prec,
                           cudnnMathType_t math, int32_t I, int32_t H, int32_t P, int32_t L, uint32_t aux);
cudnnStatus_t real_set_rnn_data(const real_cudnn &r, cudnnDataType_t dt, cudnnRNNDataLayout_t layout, int T, int N,
                                int V, const int *lens, void *fill);

} // namespace emu_dnn

#endif
