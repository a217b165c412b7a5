/* strided.cu -- dense copies and scaling of strided views (strided.h), the layout glue of
 * the cuBLAS and cuDNN launchers: one grid-stride kernel copies any view (any strides,
 * broadcast stride 0 included) into any other of the same sizes, by element size, so it
 * serves every dtype; one scales a float view in place (BLAS's beta when no product runs).
 */
#include "strided.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

size_t cu_elsize(int dt)
{
    switch (dt) {
    case TC_F64:
    case TC_I64: return 8;
    case TC_F32:
    case TC_I32: return 4;
    case TC_F16:
    case TC_BF16:
    case TC_I16: return 2;
    case TC_U8:
    case TC_I8:
    case TC_BOOL: return 1;
    default: return 0;
    }
}

tc_cuda_view cu_view_dense(const tc_cuda_view *v, void *data)
{
    tc_cuda_view d = *v;
    d.data = data;
    int64_t st = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        d.stride[i] = st;
        st *= v->size[i];
    }
    return d;
}

bool cu_view_is_dense(const tc_cuda_view *v)
{
    int64_t st = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->size[i] != 1 && v->stride[i] != st) return false;
        st *= v->size[i];
    }
    return true;
}

/* Sizes of the destination, and both views' strides in elements (src's aligned and
 * zeroed where it broadcasts). Dims of size 1 are dropped: fewer divisions per element. */
struct walk {
    int nd;
    int64_t size[TC_MAX_DIMS], ds[TC_MAX_DIMS], ss[TC_MAX_DIMS];
};

template <class E> __global__ void copy_kernel(E *dst, const E *src, walk w, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, od = 0, os = 0;
        for (int d = w.nd - 1; d >= 0; d--) {
            int64_t q = r % w.size[d];
            r /= w.size[d];
            od += q * w.ds[d];
            os += q * w.ss[d];
        }
        dst[od] = src[os];
    }
}

tc_status cu_strided_copy(const tc_cuda_view *dst, const tc_cuda_view *src, const char *what)
{
    if (dst->numel == 0) return TC_OK;
    if (src->ndim > dst->ndim || src->dtype != dst->dtype)
        return cu_fail(TC_ERR_INTERNAL, "%s: cannot copy a %d-D %s view into a %d-D %s one", what, src->ndim,
                       cu_dtype_name(src->dtype), dst->ndim, cu_dtype_name(dst->dtype));
    walk w = {};
    int off = dst->ndim - src->ndim;
    for (int d = 0; d < dst->ndim; d++) {
        if (dst->size[d] == 1) continue;
        int64_t s = 0;
        if (d >= off) {
            int64_t ssz = src->size[d - off];
            if (ssz != 1 && ssz != dst->size[d])
                return cu_fail(TC_ERR_INTERNAL, "%s: source size %lld does not broadcast to %lld (dim %d)", what,
                               (long long)ssz, (long long)dst->size[d], d);
            s = ssz == 1 ? 0 : src->stride[d - off];
        }
        w.size[w.nd] = dst->size[d], w.ds[w.nd] = dst->stride[d], w.ss[w.nd] = s;
        w.nd++;
    }
    int64_t n = dst->numel;
    unsigned blocks = cu_blocks_for(n, 256);
    switch (cu_elsize(dst->dtype)) {
    case 1: copy_kernel<<<blocks, 256, 0, cu_stream()>>>((uint8_t *)dst->data, (const uint8_t *)src->data, w, n); break;
    case 2: copy_kernel<<<blocks, 256, 0, cu_stream()>>>((uint16_t *)dst->data, (const uint16_t *)src->data, w, n); break;
    case 4: copy_kernel<<<blocks, 256, 0, cu_stream()>>>((uint32_t *)dst->data, (const uint32_t *)src->data, w, n); break;
    case 8: copy_kernel<<<blocks, 256, 0, cu_stream()>>>((uint64_t *)dst->data, (const uint64_t *)src->data, w, n); break;
    default: return cu_fail(TC_ERR_INTERNAL, "%s: copy of dtype %d", what, dst->dtype);
    }
    return cu_check(cudaGetLastError(), what);
}

/* ---- scaling --------------------------------------------------------------------------- */

__device__ __forceinline__ float ld_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float ld_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ld_f(float v) { return v; }
__device__ __forceinline__ double ld_f(double v) { return v; }
__device__ __forceinline__ void st_f(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void st_f(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void st_f(float *p, float v) { *p = v; }
__device__ __forceinline__ void st_f(double *p, double v) { *p = v; }

/* C: the computing type (float for the half types). */
template <class S, class C> __global__ void scale_kernel(S *p, walk w, int64_t n, C f)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, o = 0;
        for (int d = w.nd - 1; d >= 0; d--) {
            o += r % w.size[d] * w.ds[d];
            r /= w.size[d];
        }
        st_f(p + o, f == 0 ? (C)0 : f * ld_f(p[o]));
    }
}

tc_status cu_strided_scale(const tc_cuda_view *v, double f, const char *what)
{
    if (v->numel == 0 || f == 1) return TC_OK;
    walk w = {};
    for (int d = 0; d < v->ndim; d++)
        if (v->size[d] != 1) w.size[w.nd] = v->size[d], w.ds[w.nd] = v->stride[d], w.nd++;
    int64_t n = v->numel;
    unsigned blocks = cu_blocks_for(n, 256);
    switch (v->dtype) {
    case TC_F32: scale_kernel<<<blocks, 256, 0, cu_stream()>>>((float *)v->data, w, n, (float)f); break;
    case TC_F64: scale_kernel<<<blocks, 256, 0, cu_stream()>>>((double *)v->data, w, n, f); break;
    case TC_F16: scale_kernel<<<blocks, 256, 0, cu_stream()>>>((__half *)v->data, w, n, (float)f); break;
    case TC_BF16: scale_kernel<<<blocks, 256, 0, cu_stream()>>>((__nv_bfloat16 *)v->data, w, n, (float)f); break;
    default: return cu_fail(TC_ERR_INTERNAL, "%s: scaling a %s view", what, cu_dtype_name(v->dtype));
    }
    return cu_check(cudaGetLastError(), what);
}

tc_status cu_dense_input(int dev, const tc_cuda_view *v, tc_cuda_view *use, void **tmp, const char *what)
{
    *tmp = NULL;
    *use = *v;
    if (cu_view_is_dense(v) || v->numel == 0) return TC_OK;
    return cu_private_copy(dev, v, use, tmp, what);
}

tc_status cu_private_copy(int dev, const tc_cuda_view *v, tc_cuda_view *use, void **tmp, const char *what)
{
    *tmp = NULL;
    *use = *v;
    if (v->numel == 0 || !v->data) return TC_OK;
    tc_status s = cu_scratch_alloc(dev, (size_t)v->numel * cu_elsize(v->dtype), tmp);
    if (s) return s;
    *use = cu_view_dense(v, *tmp);
    s = cu_strided_copy(use, v, what);
    if (s) {
        cu_scratch_free(dev, *tmp);
        *tmp = NULL;
    }
    return s;
}
