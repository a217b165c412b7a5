/* cuda_internal.h -- what the files of libtocha_cuda.so share (CUDA C++ only): error
 * reporting into the backend's thread-local message, and the kernel launchers that the
 * entry table (runtime.cu) points at.
 */
#ifndef TC_CUDA_INTERNAL_H
#define TC_CUDA_INTERNAL_H

#include "cuda_api.h"
#include <cuda_runtime.h>

/* Only tc_cuda_entry is exported from libtocha_cuda.so; these stay inside it. */
#define CU_HIDDEN __attribute__((visibility("hidden")))

/* Sets this thread's message (printf-style) and returns code. */
CU_HIDDEN tc_status cu_fail(tc_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* TC_OK when e is cudaSuccess; otherwise clears CUDA's non-sticky error state and fails
 * with "what: <cudaGetErrorString> (<cudaGetErrorName>)" and a code mapped from e. */
CU_HIDDEN tc_status cu_check(cudaError_t e, const char *what);
/* Makes dev current on this thread (CUDA keeps the current device per thread). */
CU_HIDDEN tc_status cu_use_device(int dev);

/* Scratch device memory (runtime.cu): the caching allocator of dev. Blocks belong to the
 * default stream, so freeing one right after queueing the kernels that use it is safe. */
CU_HIDDEN tc_status cu_scratch_alloc(int dev, size_t nbytes, void **ptr);
CU_HIDDEN tc_status cu_scratch_free(int dev, void *ptr);

/* Grid size for a grid-stride kernel over n elements in blocks of CU_BLOCK threads: enough
 * blocks to fill dev a few times over (ew.cu; the SM count is read once per device). */
#define CU_BLOCK 256
CU_HIDDEN int64_t cu_grid_for(int dev, int64_t n);

/* The elementwise launcher (ew.cu); contract in cuda_api.h. */
CU_HIDDEN tc_status cu_ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in,
                const int64_t *step, double s0, double s1);

/* ---- ops on device tensors (cuda_api.h, version 3) ------------------------------------ */
/* ops.cu: run() of the table, by op kind. */
CU_HIDDEN tc_status cu_run(int dev, const tc_cuda_call *c);
/* An op's and a dtype's names, as tc_op_info / tc_dtype_name give them (not linked here). */
CU_HIDDEN const char *cu_op_name(int op);
CU_HIDDEN const char *cu_dtype_name(int dtype);
/* TC_ERR_UNSUPPORTED "<op>: no CUDA kernel for <dtype>" (the dispatcher's cue to fall back). */
CU_HIDDEN tc_status cu_unsupported(const tc_cuda_call *c);
/* One launcher per kind, each in its own file; all take a validated call (cuda_api.h). */
CU_HIDDEN tc_status cu_op_ew(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_convert(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_select(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_reduce(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_scan(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_softmax(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_random(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_index(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_sort(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_join(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_matmul(int dev, const tc_cuda_call *c); /* cuBLAS */
CU_HIDDEN tc_status cu_op_conv(int dev, const tc_cuda_call *c);   /* cuDNN */
CU_HIDDEN tc_status cu_op_pool(int dev, const tc_cuda_call *c);   /* cuDNN */
/* set_flag() of the table: TF32 and cuDNN benchmark switches (read by the cuBLAS/cuDNN code). */
CU_HIDDEN tc_status cu_set_flag(int flag, int64_t value);
CU_HIDDEN extern int cu_allow_tf32, cu_cudnn_benchmark;

#endif /* TC_CUDA_INTERNAL_H */
