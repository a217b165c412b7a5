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
/* Makes dev current on this thread (CUDA keeps the current device per thread) and the
 * device whose current stream cu_stream() gives. The first use of each device also asks
 * cu_device_runs_kernels; a device it refuses is refused here, every time. */
CU_HIDDEN tc_status cu_use_device(int dev);
/* TC_OK when this library carries code dev can run: machine code for its architecture or
 * PTX the driver can compile for it (the Makefile's CUDA_SASS / CUDA_PTX). Otherwise
 * TC_ERR_DEVICE naming the device, its compute capability, what was built and what to do.
 * Asks the driver about one kernel (cudaFuncGetAttributes); dev must be current. */
CU_HIDDEN tc_status cu_device_runs_kernels(int dev);

/* ---- streams (stream.cu) ---------------------------------------------------------------- */
/* The calling thread's current stream on the device last made current by cu_use_device
 * (NULL: the legacy default stream). EVERY launch, cuBLAS/cuDNN/cub call, memset and copy
 * in this library goes on it: `kernel<<<grid, block, shmem, cu_stream()>>>`. */
CU_HIDDEN cudaStream_t cu_stream(void);
/* Whether this thread has a CUDA graph capture open on dev: code that would wait for the
 * device (a host read, a timing search) must refuse or take another way then. */
CU_HIDDEN bool cu_capturing(int dev);
/* Whether this thread captures on any device (cudaFree and cudaFreeHost must wait). */
CU_HIDDEN bool cu_capturing_any(void);
/* Whether any thread has a CUDA graph capture open on dev: a wait for all of dev's work
 * (cudaDeviceSynchronize) would invalidate it, whichever thread waits (CUDA Programming
 * Guide, "Prohibited and Unhandled Operations"). */
CU_HIDDEN bool cu_device_captured(int dev);
/* While one lives, this thread may make the calls an open capture of its own otherwise
 * forbids as potentially unsafe (cudaMalloc, cublasCreate, cudnnCreate): its capture mode
 * is cudaStreamCaptureModeRelaxed (cudaThreadExchangeStreamCaptureMode), as PyTorch's
 * caching allocator does when it grows a graph's pool. A no-op when it captures nothing.
 * Never for a wait on the device: that still breaks the capture. */
struct cu_relaxed_capture {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    bool swapped;
    cu_relaxed_capture() : swapped(cu_capturing_any() && cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) {}
    ~cu_relaxed_capture()
    {
        if (swapped) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    }
    cu_relaxed_capture(const cu_relaxed_capture &) = delete;
    cu_relaxed_capture &operator=(const cu_relaxed_capture &) = delete;
};
/* Gives dev's cached free blocks back to the device (the allocator's empty_cache), for a
 * library whose own allocation failed; refused while this thread captures. */
CU_HIDDEN tc_status cu_release_cache(int dev);
/* Fill dev's pool of idle cuBLAS (blas.cu) / cuDNN (dnn.cu) handles with one handle if it
 * is empty; a failure is dropped (the library's first op reports it). dev is current. */
CU_HIDDEN void cu_blas_warm(int dev);
CU_HIDDEN void cu_dnn_warm(int dev);
/* The key the caching allocator files dev's allocations of this thread under: the open
 * capture's private pool, else the current stream. */
CU_HIDDEN uintptr_t cu_alloc_key(int dev);
/* Open and close a private pool of the caching allocator (runtime.cu owns it). */
CU_HIDDEN tc_status cu_pool_open(int dev, uintptr_t *key);
CU_HIDDEN tc_status cu_pool_close(int dev, uintptr_t key);
/* The version-4 entries of the table (stream.cu; contracts in cuda_api.h). */
CU_HIDDEN tc_status cu_stream_create(int dev, void **stream);
CU_HIDDEN tc_status cu_stream_destroy(int dev, void *stream);
CU_HIDDEN tc_status cu_stream_synchronize(int dev, void *stream);
CU_HIDDEN tc_status cu_stream_query(int dev, void *stream, int *done);
CU_HIDDEN tc_status cu_set_stream(int dev, void *stream);
CU_HIDDEN tc_status cu_event_create(int dev, int timing, void **event);
CU_HIDDEN tc_status cu_event_destroy(int dev, void *event);
CU_HIDDEN tc_status cu_event_record(int dev, void *event, void *stream);
CU_HIDDEN tc_status cu_event_wait(int dev, void *stream, void *event);
CU_HIDDEN tc_status cu_event_synchronize(int dev, void *event);
CU_HIDDEN tc_status cu_event_query(int dev, void *event, int *done);
CU_HIDDEN tc_status cu_event_elapsed(int dev, void *start, void *end, float *ms);
CU_HIDDEN tc_status cu_host_alloc(size_t nbytes, void **ptr);
CU_HIDDEN tc_status cu_host_release(void *ptr);
CU_HIDDEN tc_status cu_copy_h2d_async(int dev, void *dst, const void *src, size_t nbytes);
CU_HIDDEN tc_status cu_copy_d2h_async(int dev, void *dst, const void *src, size_t nbytes);
CU_HIDDEN tc_status cu_capture_begin(int dev, void *stream);
CU_HIDDEN tc_status cu_capture_end(int dev, void *stream, void **graph);
CU_HIDDEN tc_status cu_graph_launch(int dev, void *graph, void *stream);
CU_HIDDEN tc_status cu_graph_destroy(int dev, void *graph);
CU_HIDDEN tc_status cu_is_capturing(int dev, int *yes);
/* version 5: the device error word (NULL until the device's first capture) and its reader. */
CU_HIDDEN tc_cuda_devcheck *cu_devcheck_word(int dev);
CU_HIDDEN tc_status cu_devcheck_take(int dev, tc_cuda_devcheck *out);
/* A synchronous copy_h2d of nbytes while capturing on dev: staged through the capture's
 * page-locked memory and queued on the capture stream (at most TC_CUDA_CAPTURE_H2D_MAX). */
CU_HIDDEN tc_status cu_capture_stage_h2d(int dev, void *dst, const void *src, size_t nbytes);

/* Scratch device memory (runtime.cu): the caching allocator of dev. A block belongs to
 * the stream current at allocation (or to the open capture's pool), so freeing one right
 * after queueing the kernels that use it on that stream is safe. */
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
/* dst = src converted to dst's dtype by the copy op's kernels; errors name op (the caller's
 * op: mixed-precision paths convert their operands through scratch). */
CU_HIDDEN tc_status cu_convert_view(int dev, int op, const tc_cuda_view *dst, const tc_cuda_view *src);
CU_HIDDEN tc_status cu_op_select(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_reduce(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_scan(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_softmax(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_random(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_random_seq(int dev, const tc_cuda_call *c); /* randperm, multinomial */
CU_HIDDEN tc_status cu_op_index(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_sort(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_join(int dev, const tc_cuda_call *c);
CU_HIDDEN tc_status cu_op_matmul(int dev, const tc_cuda_call *c); /* cuBLAS */
CU_HIDDEN tc_status cu_op_conv(int dev, const tc_cuda_call *c);   /* cuDNN */
CU_HIDDEN tc_status cu_op_pool(int dev, const tc_cuda_call *c);   /* own kernels (pool.cu) */
CU_HIDDEN tc_status cu_op_norm(int dev, const tc_cuda_call *c);   /* cuDNN batch norm (dnn_bn.cu) */
CU_HIDDEN tc_status cu_op_layer_norm(int dev, const tc_cuda_call *c); /* layer norm (layernorm.cu) */
CU_HIDDEN tc_status cu_op_rnn(int dev, const tc_cuda_call *c);    /* cuDNN RNN (dnn_rnn.cu) */
CU_HIDDEN tc_status cu_op_attn(int dev, const tc_cuda_call *c);   /* fused attention (attention.cu) */
CU_HIDDEN tc_status cu_op_optim(int dev, const tc_cuda_call *c);  /* the optimizer steps (optim.cu) */
/* set_flag() of the table: TF32 and cuDNN benchmark switches (read by the cuBLAS/cuDNN code). */
CU_HIDDEN tc_status cu_set_flag(int flag, int64_t value);
CU_HIDDEN extern int cu_allow_tf32, cu_cudnn_benchmark;

#endif /* TC_CUDA_INTERNAL_H */
