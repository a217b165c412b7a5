/* cuda_api.h -- the contract between libtocha and the CUDA backend libtocha_cuda.so.
 *
 * libtocha never links CUDA: core/cuda_loader.c dlopens libtocha_cuda.so at run time and
 * calls its one exported symbol, tc_cuda_entry, which returns the table below. This header
 * is plain C with no CUDA include, so both sides compile it: the loader (C11) and the
 * backend (CUDA C++17). The loader refuses a table whose version or size differs, so a
 * stale libtocha_cuda.so next to a newer libtocha.so is reported, never called.
 *
 * Rules for every function in the table:
 *  - returns a tc_status (TC_OK = 0); on failure last_error() (thread-local, inside the
 *    backend) holds a message naming the call and the CUDA error (cudaGetErrorString);
 *  - dev is a CUDA device ordinal; the call makes it current on the calling thread;
 *  - work is queued on the device's default stream: copies to the host and synchronize()
 *    wait for it, ew() does not.
 *
 * NOTE: bump TC_CUDA_API_VERSION whenever a field is added, removed, reordered or changes
 * meaning; the loader compares it (and sizeof) before touching anything else.
 */
#ifndef TC_CUDA_API_H
#define TC_CUDA_API_H

#include "../tocha.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_CUDA_API_VERSION 3

/* ---- ops on device tensors (version 3) ------------------------------------------------ */

/* A strided view of device memory, as a kernel sees a tensor. */
typedef struct tc_cuda_view {
    void *data;    /* element 0 of the view (a device pointer); NULL: an absent optional input
                      (conv bias, bernoulli's probabilities) or a tensor with no elements */
    int32_t dtype; /* tc_dtype */
    int32_t ndim;  /* 0..TC_MAX_DIMS; 0 is a scalar (one element) */
    int64_t size[TC_MAX_DIMS];
    int64_t stride[TC_MAX_DIMS]; /* in elements; 0 where an input is broadcast */
    int64_t numel;               /* product of size (1 for ndim 0) */
} tc_cuda_view;

/* One op call, already validated by libtocha's dispatcher (core/dispatch.c):
 *  - op is a tc_op; its kind, arity and flags are in ops.def (tc_op_info);
 *  - inputs have the dtypes the op accepts; outputs exist with their final sizes and dtypes
 *    (out[i] may alias an input: in-place ops); an output never partially overlaps an input;
 *  - EW (elementwise), SELECT (where) and CONVERT (copy) inputs are already broadcast or
 *    reshaped to the output's size (stride 0 on broadcast dims), so in[i].size equals
 *    out[0].size: element i of one is element i of the other in row-major order;
 *  - values that decide shapes or validity (index bounds, masks' counts, multinomial
 *    weights) were checked on the host when the op needs it: kernels may trust indices;
 *  - params is the tc_params of the call with gen cleared; RANDOM ops draw from Philox
 *    key philox_seed starting at counter slot philox_base, exactly as the CPU kernel
 *    core/cpu/random.c does (slot i / 2, words 0-1 or 2-3 for element i), so a CUDA
 *    tensor filled with a seed holds the same numbers as a CPU tensor filled with it.
 * Kernels run on dev's default stream, asynchronously.
 * A (op, dtype) the backend has no kernel for returns TC_ERR_UNSUPPORTED with a message
 * "<op>: no CUDA kernel for <dtype>": libtocha may then run the op on the host
 * (TC_CUDA_FLAG_HOST_FALLBACK). Any other failure is reported to the caller as is. */
#define TC_CUDA_MAX_INPUTS 64 /* join ops (cat, stack) with more inputs run on the host */
typedef struct tc_cuda_call {
    int32_t op, nin, nout;
    const tc_cuda_view *in; /* nin views */
    tc_cuda_view out[2];
    tc_params params; /* params.gen is NULL */
    uint64_t philox_seed, philox_base;
} tc_cuda_call;

typedef struct tc_cuda_api {
    uint32_t version; /* TC_CUDA_API_VERSION of the backend that built the table */
    uint32_t size;    /* sizeof(tc_cuda_api) in the backend */

    /* Message of the last failed call on this thread ("" when none). */
    const char *(*last_error)(void);
    /* CUDA runtime version the backend was built with, and the installed driver's CUDA
     * version (0 when no driver library could be loaded). Never fails. */
    void (*versions)(int *runtime, int *driver);
    /* Number of devices; 0 (and TC_OK) when the driver sees none. Fails when the driver is
     * missing or unusable: the message says which. */
    tc_status (*device_count)(int *count);
    /* The device's marketing name ("NVIDIA H100 80GB HBM3"), truncated to cap bytes. */
    tc_status (*device_name)(int dev, char *name, size_t cap);

    /* Device memory, from the device's caching allocator (cache_alloc.h): release keeps the
     * block for reuse; a refused device allocation empties the cache and retries once, then
     * fails with TC_ERR_MEMORY naming the size, the device and its usage. alloc of 0 bytes
     * gives NULL; release(NULL) is a no-op; releasing a pointer dev did not hand out (twice,
     * foreign, another device's) is TC_ERR_ARG. Blocks belong to the default stream.
     * NOTE: no member is called malloc/free/memset: libc may define those as macros. */
    tc_status (*alloc)(int dev, size_t nbytes, void **ptr);
    tc_status (*release)(int dev, void *ptr);
    /* Sets nbytes bytes at ptr to the byte value. */
    tc_status (*set_bytes)(int dev, void *ptr, int value, size_t nbytes);
    tc_status (*copy_h2d)(int dev, void *dst, const void *src, size_t nbytes);
    tc_status (*copy_d2h)(int dev, void *dst, const void *src, size_t nbytes);
    tc_status (*copy_d2d)(int dev, void *dst, const void *src, size_t nbytes);
    /* Waits until all work queued on dev has finished; reports errors of earlier kernels. */
    tc_status (*synchronize)(int dev);

    /* Elementwise op (a TC_EW line of ops.def) over n elements:
     *   out[i] = formula(in[0][i * step[0]], in[1][i * step[1]], ...; p0 = s0, p1 = s1)
     * op: a tc_op of kind TC_KIND_EW; dtype: the inputs' dtype; out is uint8 for ops with
     * TC_OPF_CMP, else dtype. in has the op's arity entries (device pointers); step[k] is 1
     * (contiguous, n elements) or 0 (one element broadcast to all n). f16/bf16 compute in
     * float. Strided and general broadcast layouts come with the full CUDA backend.
     * TC_ERR_UNSUPPORTED when the op has no kernel for dtype (same flags as the CPU).
     * Integer division by zero gives 0 here: the dispatcher must refuse it beforehand. */
    tc_status (*ew)(int dev, int op, int dtype, int64_t n, void *out, const void *const *in,
                    const int64_t *step, double s0, double s1);

    /* ---- version 2 -------------------------------------------------------------------- */
    /* The caching allocator of dev: statistics, handing unused segments back to the
     * device, and restarting the peaks from the current values. */
    tc_status (*memory_stats)(int dev, tc_cuda_memstats *out);
    tc_status (*empty_cache)(int dev);
    tc_status (*reset_peak_stats)(int dev);
    /* CUDA's current device on the calling thread (cudaSetDevice / cudaGetDevice).
     * NOTE: every call with a dev argument also makes dev current, so libtocha keeps the
     * user's selection itself (tc_cuda_set_device) and calls set_device to validate it and
     * create the device's context early. */
    tc_status (*set_device)(int dev);
    tc_status (*current_device)(int *dev);

    /* ---- version 3 -------------------------------------------------------------------- */
    /* One op on dev (tc_cuda_call above). */
    tc_status (*run)(int dev, const tc_cuda_call *call);
    /* A backend switch (tc_cuda_flag of tocha.h): TC_CUDA_FLAG_TF32 (0/1) lets float32
     * matrix products and convolutions use TF32 tensor cores; TC_CUDA_FLAG_CUDNN_BENCHMARK
     * (0/1) times cuDNN's algorithms once per shape and caches the fastest, instead of its
     * heuristic choice. Other flags are libtocha's: TC_ERR_ARG. */
    tc_status (*set_flag)(int flag, int64_t value);
} tc_cuda_api;

/* The backend's one exported symbol. The table is static: never freed. libtocha never
 * links it: the loader finds it with dlsym under TC_CUDA_ENTRY_NAME. */
const tc_cuda_api *tc_cuda_entry(void);
typedef const tc_cuda_api *(*tc_cuda_entry_fn)(void);
#define TC_CUDA_ENTRY_NAME "tc_cuda_entry"

/* ---- inside libtocha (core/cuda_loader.c) --------------------------------------------- */
#ifndef __CUDACC__
/* The loaded backend's table, loading it on first use. Fails with TC_ERR_DEVICE and the
 * reason CUDA is unavailable (the same text tc_cuda_available gives). */
tc_status tc_cuda_api_get(const tc_cuda_api **out);
/* Loads the backend from path (NULL: the path tc_cuda_available uses, $TOCHA_CUDA_LIB or
 * next to libtocha.so) without touching the process-wide cached state, and says whether
 * CUDA would be available from it: 1, or 0 with the reason in why. For tests and tools. */
int tc_cuda_probe(const char *path, char *why, size_t cap);
/* The table for a call on CUDA ordinal dev: TC_ERR_DEVICE "cuda <op>: CUDA unavailable:
 * <reason>" or TC_ERR_ARG "cuda <op>: no device <dev> (<n> devices)" otherwise. */
tc_status tc_cuda_need(const char *op, int dev, const tc_cuda_api **api);
/* s as libtocha's error: TC_OK stays; a failure carries the backend's message. */
tc_status tc_cuda_backend_status(const tc_cuda_api *api, tc_status s);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TC_CUDA_API_H */
