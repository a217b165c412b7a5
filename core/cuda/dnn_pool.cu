/* dnn_pool.cu -- average pooling through cuDNN 9's pooling API (cudnnPoolingForward /
 * cudnnPoolingBackward with a 2-D pooling descriptor), taken when dnn_select.h's rules say
 * cuDNN computes the op exactly: avg_pool2d and avg_pool2d_backward, the switch
 * TC_CUDA_FLAG_CUDNN on, a float dtype, contiguous tensors under 2^31 elements, and the
 * pooled size cuDNN's floor formula gives (so no ceil_mode window past the padded plane).
 * count_include_pad selects CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (divisor kH*kW),
 * else ..._EXCLUDE_PADDING (the window's in-plane count): PyTorch's divisors whenever every
 * window lies inside the padded plane. Planes are NCHW (N, C, H, W); a 3-D (C, H, W) call
 * is one image. cuDNN sums in float for the half types and float32 (our kernel and the
 * CPU sum in double), so results agree to rounding, not bit for bit.
 * The backward passes gout as y as well as dy, and the gradient buffer as x as well as
 * dx: the average modes do not read y or x (there is no maximum to locate), and the op has
 * neither -- the buffers only give cuDNN valid memory of the described shapes.
 * Max pooling and the adaptive ops stay with pool.cu (indices; uneven windows; see
 * dnn_select.h). The pooling entry points are marked deprecated in cuDNN 9 (graph API)
 * but present and supported in 9.x; the header only warns with CUDNN_WARN_DEPRECATED.
 * A configuration cuDNN refuses (BAD_PARAM / NOT_SUPPORTED) is left to pool.cu (*done
 * false); other failures are reported with the op, the shapes and the dtype. The work goes
 * on cu_stream() (the pooled handle is bound to it at checkout).
 * NOTE: compiled with nvcc 13 for sm_90 but never run on a GPU (docs/cuda.md).
 */
#include "dnn_select.h"
#include <stdio.h>

tc_status cu_dnn_pool(int dev, const tc_cuda_call *c, bool *done)
{
    *done = false;
    cu_dnn_pool_plan p;
    if (cu_dnn_pool_pick(cu_cudnn_enabled != 0, c, &p) != CU_DNN_TAKE) return TC_OK;
    const tc_cuda_view *in = &c->in[0], *out = &c->out[0];
    char a[96], b[96], what[280];
    snprintf(what, sizeof what, "%s: %s %s -> %s, kernel %dx%d stride %dx%d padding %dx%d (cuDNN)", cu_op_name(c->op),
             cu_dtype_name(in->dtype), cu_dnn_sizes(in, a, sizeof a), cu_dnn_sizes(out, b, sizeof b), p.kh, p.kw, p.sh,
             p.sw, p.ph, p.pw);
    float f1 = 1, f0 = 0;
    double d1 = 1, d0 = 0;
    bool dbl = in->dtype == TC_F64;
    const void *one = dbl ? (const void *)&d1 : &f1, *zero = dbl ? (const void *)&d0 : &f0;
    cudnnDataType_t ty = cu_dnn_type(in->dtype);
    cudnnTensorDescriptor_t xd = NULL, yd = NULL; /* the plane pooled, the pooled plane */
    cudnnPoolingDescriptor_t pd = NULL;
    cudnnHandle_t h = NULL;
    const char *call = "descriptors";
    tc_status s = TC_OK;
    cudnnStatus_t st = cudnnCreateTensorDescriptor(&xd);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateTensorDescriptor(&yd);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreatePoolingDescriptor(&pd);
    if (st == CUDNN_STATUS_SUCCESS) {
        call = "cudnnSetTensor4dDescriptor";
        st = cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, ty, p.n, p.c, p.h, p.w);
    }
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, ty, p.n, p.c, p.ho, p.wo);
    if (st == CUDNN_STATUS_SUCCESS) {
        call = "cudnnSetPooling2dDescriptor";
        cudnnPoolingMode_t mode =
            p.include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
        st = cudnnSetPooling2dDescriptor(pd, mode, CUDNN_PROPAGATE_NAN, p.kh, p.kw, p.ph, p.pw, p.sh, p.sw);
    }
    if (st == CUDNN_STATUS_SUCCESS && !(s = cu_dnn_handle_get(dev, &h, what))) {
        if (p.backward) {
            call = "cudnnPoolingBackward";
            st = cudnnPoolingBackward(h, pd, one, yd, in->data, yd, in->data, xd, out->data, zero, xd, out->data);
        } else {
            call = "cudnnPoolingForward";
            st = cudnnPoolingForward(h, pd, one, xd, in->data, zero, yd, out->data);
        }
    }
    if (!s) {
        if (st == CUDNN_STATUS_SUCCESS) {
            s = cu_check(cudaGetLastError(), what);
            *done = s == TC_OK;
        } else if (cu_dnn_refused(st)) {
            (void)cudaGetLastError(); /* pool.cu runs it instead; nothing is reported */
        } else {
            s = cu_dnn_status(st, what, call);
        }
    }
    if (h) cu_dnn_handle_put(dev, h);
    if (pd) cudnnDestroyPoolingDescriptor(pd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    return s;
}
