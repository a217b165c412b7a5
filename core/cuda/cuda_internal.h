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

/* The elementwise launcher (ew.cu); contract in cuda_api.h. */
CU_HIDDEN tc_status cu_ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in,
                const int64_t *step, double s0, double s1);

#endif /* TC_CUDA_INTERNAL_H */
