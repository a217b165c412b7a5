/* dnn_handle.h -- what the cuDNN users of the backend share (dnn.cu: convolution,
 * dnn_bn.cu: batch norm, dnn_rnn.cu: recurrent layers): one pool of cuDNN handles per
 * device, and one mapping of cuDNN statuses to tocha's. Implemented in dnn.cu.
 */
#ifndef TC_CUDA_DNN_HANDLE_H
#define TC_CUDA_DNN_HANDLE_H

#include "cuda_internal.h"
#include <cudnn.h>

/* A cuDNN status as tocha's error, with the message "<what>: <call>: cuDNN <status>":
 * TC_ERR_UNSUPPORTED for a refused configuration (bad parameter, not supported: libtocha
 * may then run the op on the host), TC_ERR_MEMORY for cuDNN's allocation failures,
 * TC_ERR_DEVICE otherwise. Clears the runtime's sticky last error. */
tc_status cu_dnn_status(cudnnStatus_t st, const char *what, const char *call);

/* A handle for dev, from the pool or new, bound to the calling thread's current stream
 * (pooled handles move between threads, so the stream is bound at every checkout). Give
 * it back with cu_dnn_handle_put. what names the caller in messages. */
tc_status cu_dnn_handle_get(int dev, cudnnHandle_t *h, const char *what);
void cu_dnn_handle_put(int dev, cudnnHandle_t h);

#endif /* TC_CUDA_DNN_HANDLE_H */
