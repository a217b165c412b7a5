/* dnn_softmax.cu -- softmax and log_softmax through cuDNN 9 (cudnnSoftmaxForward), and their
 * backward ops softmax_backward / log_softmax_backward (cudnnSoftmaxBackward on the
 * forward's output y and gradOutput dy: ACCURATE dx = y (dy - sum(dy y)), LOG
 * dx = dy - exp(y) sum(dy), the same sums over C), taken
 * when dnn_select.h's rules say cuDNN computes the op exactly: the switch
 * TC_CUDA_FLAG_CUDNN on, a float dtype, contiguous input and result in separate memory,
 * under 2^31 elements. The input is described as the packed NCHW tensor (outer, size of
 * dim, inner, 1) and reduced over C (CUDNN_SOFTMAX_MODE_CHANNEL); softmax is
 * CUDNN_SOFTMAX_ACCURATE and log_softmax CUDNN_SOFTMAX_LOG, both of which subtract each
 * line's maximum first, as our kernel and the CPU do (numerically: cuDNN's own rounding,
 * not bit-identical to softmax.cu). float32 / f16 / bf16 scale with float alpha / beta,
 * float64 with double (cuDNN's rule for the scaling factors).
 * Anything else, or a configuration cuDNN refuses (BAD_PARAM / NOT_SUPPORTED, e.g. a
 * dtype its softmax lacks), is left to softmax.cu (*done false); other failures are
 * reported with the op, the shape and the dtype. The work goes on cu_stream() (the pooled
 * handle is bound to it at checkout). Autograd's softmax / log_softmax rules run the
 * backward ops (core/autograd/rules_nn.c), so a training step's softmax gradient comes here.
 * NOTE: compiled with nvcc 13 for sm_90 but never run on a GPU (docs/cuda.md).
 */
#include "dnn_select.h"
#include <stdio.h>

tc_status cu_dnn_softmax(int dev, const tc_cuda_call *c, bool *done)
{
    *done = false;
    cu_dnn_softmax_plan p;
    if (cu_dnn_softmax_pick(cu_cudnn_enabled != 0, c, &p) != CU_DNN_TAKE) return TC_OK;
    const tc_cuda_view *x = &c->in[0], *y = &c->out[0];
    char sz[96], what[200];
    snprintf(what, sizeof what, "%s: input %s %s dim %lld (cuDNN)", cu_op_name(c->op), cu_dnn_sizes(x, sz, sizeof sz),
             cu_dtype_name(x->dtype), (long long)c->params.i[0]);
    float f1 = 1, f0 = 0;
    double d1 = 1, d0 = 0;
    bool dbl = x->dtype == TC_F64;
    const void *one = dbl ? (const void *)&d1 : &f1, *zero = dbl ? (const void *)&d0 : &f0;
    cudnnTensorDescriptor_t desc = NULL;
    cudnnHandle_t h = NULL;
    const char *call = "cudnnCreateTensorDescriptor";
    tc_status s = TC_OK;
    cudnnStatus_t st = cudnnCreateTensorDescriptor(&desc);
    if (st == CUDNN_STATUS_SUCCESS) {
        call = "cudnnSetTensor4dDescriptor";
        st = cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, cu_dnn_type(x->dtype), p.n, p.c, p.h, 1);
    }
    if (st == CUDNN_STATUS_SUCCESS && !(s = cu_dnn_handle_get(dev, &h, what))) {
        cudnnSoftmaxAlgorithm_t algo = p.log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
        if (p.backward) { /* in[0] = dy, in[1] = the forward's y; every tensor the same shape */
            call = "cudnnSoftmaxBackward";
            st = cudnnSoftmaxBackward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, one, desc, c->in[1].data, desc, x->data,
                                      zero, desc, y->data);
        } else {
            call = "cudnnSoftmaxForward";
            st = cudnnSoftmaxForward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, one, desc, x->data, zero, desc, y->data);
        }
    }
    if (!s) {
        if (st == CUDNN_STATUS_SUCCESS) {
            s = cu_check(cudaGetLastError(), what);
            *done = s == TC_OK;
        } else if (cu_dnn_refused(st)) {
            (void)cudaGetLastError(); /* our kernel runs instead; nothing is reported */
        } else {
            s = cu_dnn_status(st, what, call);
        }
    }
    if (h) cu_dnn_handle_put(dev, h);
    if (desc) cudnnDestroyTensorDescriptor(desc);
    return s;
}
