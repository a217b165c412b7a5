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
 *  - work is queued on the calling thread's current stream of the device (set_stream,
 *    version 4; the legacy default stream until set): kernels, cuBLAS/cuDNN calls, memsets
 *    and copies. Copies to the host wait for that stream, synchronize() for the device;
 *    ew(), run() and the *_async copies do not wait.
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

#define TC_CUDA_API_VERSION 7

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
 *    weights) were checked on the host when the op needs it, EXCEPT index bounds while
 *    this thread captures a CUDA graph on dev: then the index kernels (index_select/copy/
 *    add/fill, gather, scatter/scatter_add/scatter_fill) check them on the device: an
 *    index outside its dim is skipped (nothing outside the tensors is read or written)
 *    and recorded in the device's error word (devcheck_take, version 5);
 *  - params is the tc_params of the call with gen cleared; RANDOM ops draw from Philox
 *    key philox_seed starting at counter slot philox_base, exactly as the CPU kernel
 *    core/cpu/random.c does (slot i / 2, words 0-1 or 2-3 for element i), so a CUDA
 *    tensor filled with a seed holds the same numbers as a CPU tensor filled with it.
 *    Version 6: when philox_key is not NULL (a random op captured in a CUDA graph), it is a
 *    device pointer to two uint64 {key, first slot} that the kernel reads when it RUNS:
 *    it draws with key philox_key[0] from slot philox_key[1] + philox_base (philox_seed is
 *    then unused), so each replay draws fresh numbers once libtocha rewrites the pair;
 * Kernels run on the calling thread's current stream of dev, asynchronously.
 * A (op, dtype) the backend has no kernel for returns TC_ERR_UNSUPPORTED with a message
 * "<op>: no CUDA kernel for <dtype>": libtocha may then run the op on the host
 * (TC_CUDA_FLAG_HOST_FALLBACK). Any other failure is reported to the caller as is. */
#define TC_CUDA_MAX_INPUTS 64 /* join ops (cat, stack) with more inputs run on the host */
/* The device's error word (version 5, devcheck_take). */
typedef struct tc_cuda_devcheck {
    int32_t op;    /* the tc_op that met the first bad index; -1: none */
    int32_t dim;   /* the dim it indexes */
    int64_t value; /* the bad index */
    int64_t size;  /* the dim's size */
} tc_cuda_devcheck;
typedef struct tc_cuda_call {
    int32_t op, nin, nout;
    const tc_cuda_view *in; /* nin views */
    tc_cuda_view out[2];
    tc_params params; /* params.gen is NULL */
    uint64_t philox_seed, philox_base;
    const uint64_t *philox_key; /* version 6: device {key, first slot} read at run time, or NULL */
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
     * foreign, another device's) is TC_ERR_ARG. A block belongs to the stream that was current
     * when it was allocated: once released it is handed out again only to allocations on
     * that stream (work queued there on the block is then ordered before the new use).
     * While this thread captures a CUDA graph on dev (capture_begin), its allocations come
     * from the capture's private pool instead (see capture_begin).
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
     * heuristic choice; TC_CUDA_FLAG_CUDNN (0/1) lets softmax, log_softmax and average
     * pooling run through cuDNN where it takes the configuration (else own kernels).
     * Other flags are libtocha's: TC_ERR_ARG. */
    tc_status (*set_flag)(int flag, int64_t value);

    /* ---- version 4: streams, events, pinned host memory, async copies, CUDA graphs ---- */
    /* Streams are opaque handles (a cudaStream_t in the CUDA backend): non-blocking streams
     * (cudaStreamNonBlocking), so they never wait for the legacy default stream (NULL), nor
     * it for them. destroy waits for the stream's queued work first. query: *done 1 when
     * all work queued on it has finished, 0 when some is still running. */
    tc_status (*stream_create)(int dev, void **stream);
    tc_status (*stream_destroy)(int dev, void *stream);
    tc_status (*stream_synchronize)(int dev, void *stream);
    tc_status (*stream_query)(int dev, void *stream, int *done);
    /* The calling thread's current stream on dev (NULL: the legacy default stream): every
     * later kernel, library call, memset and copy of this thread on dev goes on it. */
    tc_status (*set_stream)(int dev, void *stream);
    /* Events (cudaEvent_t): timing 0 creates one without timing (cheaper; elapsed refuses
     * it). record: e captures the work queued so far on stream (NULL: the legacy default
     * stream); wait: work queued on stream after this call waits for e's last record;
     * synchronize: the host waits for it; query: *done 1 when it has completed (or was never
     * recorded); elapsed: milliseconds between two completed records of timing events. */
    tc_status (*event_create)(int dev, int timing, void **event);
    tc_status (*event_destroy)(int dev, void *event);
    tc_status (*event_record)(int dev, void *event, void *stream);
    tc_status (*event_wait)(int dev, void *stream, void *event);
    tc_status (*event_synchronize)(int dev, void *event);
    tc_status (*event_query)(int dev, void *event, int *done);
    tc_status (*event_elapsed)(int dev, void *start, void *end, float *ms);
    /* Page-locked host memory (cudaHostAlloc, portable): what asynchronous copies need.
     * release of a pointer host_alloc did not hand out (or twice) is TC_ERR_ARG. release
     * waits for the device (cudaFreeHost does), so a copy still reading it is safe; while
     * this thread captures on any device, the release is held back until the capture's
     * graph is destroyed (the graph may read the memory at each replay). */
    tc_status (*host_alloc)(size_t nbytes, void **ptr);
    tc_status (*host_release)(void *ptr);
    /* Copies on the current stream that return without waiting. The host side should be
     * host_alloc memory: from pageable memory CUDA stages the copy and it is (partly)
     * synchronous. The caller keeps both sides alive and unchanged until the stream gets
     * there (an event, stream_synchronize). */
    tc_status (*copy_h2d_async)(int dev, void *dst, const void *src, size_t nbytes);
    tc_status (*copy_d2h_async)(int dev, void *dst, const void *src, size_t nbytes);
    /* CUDA graph capture (cudaStreamBeginCapture, cudaStreamCaptureModeThreadLocal) of the
     * non-NULL stream, which the caller has made this thread's current stream on dev.
     * Until capture_end, the work this thread queues on dev is recorded, not run, and:
     *  - its allocations on dev come from a private pool owned by the capture: blocks freed
     *    during the capture go back to that pool and are reused within it only (the graph
     *    replays in the same order); capture_end hands the pool to the graph, so a block
     *    the graph uses is never given to anyone else while the graph lives (a tensor made
     *    in the capture may outlive the graph: its block is recycled once both are gone);
     *    cached memory of a live pool is never handed back to the device (empty_cache);
     *  - copy_h2d of at most TC_CUDA_CAPTURE_H2D_MAX bytes is staged through page-locked
     *    memory owned by the capture, so the graph replays the values given at capture
     *    time (host scalars); a larger copy_h2d fails, as do copy_d2h, copy_d2h_async,
     *    synchronize, stream/event synchronize and query (host waits cannot be captured);
     *    set_bytes, copy_d2d, ew, run, copy_h2d_async (from page-locked memory, re-read at
     *    every replay) and event record/wait are captured.
     * capture_end ends the capture whatever happens: a graph handle on success; on failure
     * (CUDA invalidated the capture) the partial graph and its pool are dropped and the
     * stream is usable again. graph_launch replays on stream (NULL: the legacy default);
     * graph_destroy waits for the device, then frees the graph, its staging memory and
     * (once its blocks are all released) its pool. is_capturing: whether this thread has
     * a capture open on dev. */
#define TC_CUDA_CAPTURE_H2D_MAX 64
    tc_status (*capture_begin)(int dev, void *stream);
    tc_status (*capture_end)(int dev, void *stream, void **graph);
    tc_status (*graph_launch)(int dev, void *graph, void *stream);
    tc_status (*graph_destroy)(int dev, void *graph);
    tc_status (*is_capturing)(int dev, int *yes);

    /* ---- version 5: device-side index checks ------------------------------------------ */
    /* Each device has an error word in device memory, owned by the backend (made at the
     * first capture_begin on the device, outside the capture). An index kernel that meets
     * an index outside its dim (possible only in work captured in a CUDA graph: eager
     * calls were checked on the host) skips that element and, if the word is clear, writes
     * the op, the index value, the dim and its size there (first error wins). devcheck_take
     * reads the word and clears it: out->op is -1 when it was clear (or the device never
     * captured). Call it only after a wait that covers the work in question (synchronize,
     * stream or event synchronize, copy_d2h): it does not wait for running kernels itself.
     * Refused while this thread captures on dev (it reads device memory on the host). */
    tc_status (*devcheck_take)(int dev, tc_cuda_devcheck *out);

    /* ---- version 7 ---------------------------------------------------------------------- */
    /* The device's properties (tocha.h's tc_cuda_device_props), as the driver reports them. */
    tc_status (*device_properties)(int dev, tc_cuda_device_props *out);
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
/* ---- streams and capture inside libtocha (core/cuda_stream.c) ---- */
/* The backend handle of the calling thread's current stream on CUDA ordinal dev (NULL:
 * the legacy default stream): for code that launches on its own (core/graph/cuda_launch.c,
 * cuLaunchKernel's stream argument). */
void *tc_cuda_stream_handle(int dev);
/* Whether this thread captures a CUDA graph on ordinal dev (cheap: no backend call). */
int tc_cuda_capturing(int dev);
/* TC_OK when this thread does not capture on device (a device code, TC_CPU included:
 * then every device is checked); otherwise fails with TC_ERR_UNSUPPORTED
 * "<op>: cannot <what> while a CUDA graph is being captured on cuda:N (<why>)" and marks
 * the capture failed, so that tc_cuda_graph_end refuses the graph even when the caller
 * ignores this error. */
tc_status tc_cuda_capture_refuse(const char *op, int device, const char *what, const char *why);
/* While this thread captures on ordinal dev, 1 with the capture's device
 * Philox pair {key, first slot} (*key) and the offset of the next nslots slots among the
 * capture's draws (*base, then advanced) when gen (NULL: the process default) is the
 * capture's generator, -1 (nothing changed) when it is another; 0 when not capturing. */
int tc_cuda_capture_philox(int dev, const tc_generator *gen, uint64_t nslots, const uint64_t **key, uint64_t *base);
/* After a call that waited for dev's work (synchronize, stream/event synchronize, a copy to
 * the host): s as tc_cuda_backend_status gives it, or, when that is TC_OK and a device-side
 * index check fired meanwhile (devcheck_take), TC_ERR_INDEX "<op>: index V is out of range
 * for dim D of size N (found on the device during a CUDA graph replay on cuda:K)"; the
 * error word is cleared either way. */
tc_status tc_cuda_waited(const tc_cuda_api *api, int dev, tc_status s);
/* A backend failure while this thread captures: the capture fails (tc_cuda_backend_status). */
void tc_cuda_capture_note_failure(tc_status s);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TC_CUDA_API_H */
