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

#define TC_CUDA_API_VERSION 2

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
#endif

#ifdef __cplusplus
}
#endif
#endif /* TC_CUDA_API_H */
