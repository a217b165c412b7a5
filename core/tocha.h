/* tocha.h -- the public C API of libtocha: tensors, the op table and its one dispatcher.
 *
 * This header is also the source of the LuaJIT ffi.cdef text: `make` runs it through the C
 * preprocessor with TC_CDEF defined (bindings/gen_cdef.sh), so everything outside the
 * `#ifndef TC_CDEF` blocks must be plain declarations LuaJIT can parse. Never write these
 * declarations a second time by hand.
 *
 * Conventions (docs/ARCHITECTURE.md has the long form):
 *  - Every fallible call returns tc_status; on failure tc_last_error() names the op and
 *    the sizes, and nothing the caller owns has changed.
 *  - A tensor pointer returned through an out-parameter is a new reference owned by the
 *    caller (release it with tc_tensor_release); arguments are borrowed for the call.
 *  - Dims and indices are 0-based here; the Lua layer converts from Torch7's 1-based ones.
 */
#ifndef TOCHA_H
#define TOCHA_H

#ifndef TC_CDEF
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#endif

#define TC_MAX_DIMS 8

/* ---- status and errors ------------------------------------------------------------ */

typedef enum tc_status {
    TC_OK = 0,
    TC_ERR_ARG,         /* a bad argument: wrong arity, bad parameter value */
    TC_ERR_SHAPE,       /* sizes that do not fit together */
    TC_ERR_DTYPE,       /* an element type the op does not take */
    TC_ERR_INDEX,       /* an index or dim out of range */
    TC_ERR_MEMORY,      /* allocation failed */
    TC_ERR_DEVICE,      /* the device is missing, or the op is not on that device */
    TC_ERR_UNSUPPORTED, /* the op has no kernel for this case */
    TC_ERR_IO,          /* a file could not be read or written */
    TC_ERR_INTERNAL     /* a bug in tocha: please report */
} tc_status;

/* The message of the last failure on this thread (never NULL; "" when none). */
const char *tc_last_error(void);
void tc_clear_error(void);
/* Sets the thread's message (printf-style) and returns code: lets bindings report errors
 * through the same channel. */
tc_status tc_set_error(tc_status code, const char *fmt, ...);

/* ---- element types ------------------------------------------------------------------ */

typedef enum tc_dtype {
    TC_F32 = 0,
    TC_F64,
    TC_F16,
    TC_BF16,
    TC_U8,
    TC_I8,
    TC_I16,
    TC_I32,
    TC_I64,
    TC_BOOL,
    TC_DTYPE_COUNT
} tc_dtype;

size_t tc_dtype_size(tc_dtype dt);
const char *tc_dtype_name(tc_dtype dt); /* "float32", "int64", ... */
int tc_dtype_is_float(tc_dtype dt);     /* f32, f64, f16, bf16 */

/* Half-precision conversions (round to nearest even; to float, any NaN as the quiet NaN
 * without payload). */
uint16_t tc_f32_to_f16(float x);
float tc_f16_to_f32(uint16_t h);
uint16_t tc_f32_to_bf16(float x);
float tc_bf16_to_f32(uint16_t h);

/* Devices. A device code is TC_CPU (0) or TC_CUDA + the CUDA ordinal: TC_CUDA is cuda:0,
 * TC_CUDA + 1 is cuda:1. Storages and tensors carry one; ops run where their inputs are. */
typedef enum tc_device { TC_CPU = 0, TC_CUDA = 1 } tc_device;
#define TC_DEVICE_CUDA(ordinal) (TC_CUDA + (ordinal))
#define TC_DEVICE_IS_CUDA(device) ((device) >= TC_CUDA)
#define TC_DEVICE_ORDINAL(device) ((device) - TC_CUDA) /* CUDA ordinal of a CUDA device code */
/* "cpu", "cuda:0", ... into buf (at least 16 bytes); returns buf. */
const char *tc_device_str(int device, char *buf, size_t cap);

/* ---- storage and tensors ------------------------------------------------------------ */

/* Bytes on one device. The deleter (when set) frees host memory that tocha did not
 * allocate (tc_tensor_from_data); otherwise tocha owns data. */
typedef struct tc_storage {
    void *data;
    int64_t nbytes;
    int32_t refcount; /* atomic; use tc_storage_retain / tc_storage_release */
    int32_t device;
    void (*deleter)(void *data, void *ctx);
    void *deleter_ctx;
    int64_t version; /* bumped by every write through tc_op_run (autograd's in-place check) */
} tc_storage;

/* A strided view of a storage. Sizes, strides and offset are in elements. A tensor with
 * no storage has no elements. The header is mutable (resize, set), as in Torch7. */
typedef struct tc_tensor {
    int32_t refcount; /* atomic */
    int32_t dtype;    /* tc_dtype */
    int32_t ndim;
    int32_t flags;    /* autograd and tracing bits (internal.h) */
    int32_t device;   /* device code: equals storage->device whenever storage is set */
    int64_t offset;
    int64_t size[TC_MAX_DIMS];
    int64_t stride[TC_MAX_DIMS];
    tc_storage *storage;
    void *autograd; /* reserved for autograd (issue 3); NULL */
} tc_tensor;

/* New contiguous tensor of the given sizes; contents uninitialised. */
tc_status tc_tensor_new(tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out);
/* New tensor with no elements (ndim 0... Torch7's empty tensor: dim() == 0). */
tc_status tc_tensor_new_empty(tc_dtype dt, tc_tensor **out);
/* New view of storage s (retained) with the given geometry; bounds are checked. */
tc_status tc_tensor_new_view(tc_storage *s, tc_dtype dt, int64_t offset, int ndim,
                             const int64_t *sizes, const int64_t *strides, tc_tensor **out);
/* The same on a device (a device code, see tc_device): contents uninitialised. On a CUDA
 * device the bytes come from the device's caching allocator; TC_ERR_DEVICE when CUDA is
 * unavailable or the ordinal does not exist. */
tc_status tc_tensor_new_on(int device, tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out);
tc_status tc_tensor_new_empty_on(int device, tc_dtype dt, tc_tensor **out);
/* A new contiguous tensor on device (and of dtype dt; -1 keeps t's) holding t's values:
 * Torch7's t:cuda() / t:float(), PyTorch's t.to(device, dtype). Always a copy. */
tc_status tc_tensor_to(const tc_tensor *t, int device, int dt, tc_tensor **out);
/* Wraps host memory without copying. strides may be NULL (contiguous). deleter (may be
 * NULL: the caller keeps the memory alive longer than every tensor that views it) is
 * called with (data, ctx) when the last view is gone. */
tc_status tc_tensor_from_data(void *data, tc_dtype dt, int ndim, const int64_t *sizes,
                              const int64_t *strides, void (*deleter)(void *, void *),
                              void *ctx, tc_tensor **out);
/* A new header viewing the same elements as t (Torch7's `t.new(t)` / a shallow alias). */
tc_status tc_tensor_alias(const tc_tensor *t, tc_tensor **out);
void tc_tensor_retain(tc_tensor *t);
void tc_tensor_release(tc_tensor *t);
/* Releases n pointers at once (the Lua registry frees its dead handles in batches). */
void tc_tensor_release_many(tc_tensor **ts, int64_t n);
void tc_storage_retain(tc_storage *s);
void tc_storage_release(tc_storage *s);
/* New storage of nbytes on the CPU, zero-filled. */
tc_status tc_storage_new(int64_t nbytes, tc_storage **out);
/* New storage of nbytes on device, zero-filled. */
tc_status tc_storage_new_on(int device, int64_t nbytes, tc_storage **out);

/* Torch7's resize: t takes the given sizes with contiguous strides, keeping its storage
 * and offset when large enough, otherwise getting a new one (contents kept up to the old
 * size when the storage grows in place). */
tc_status tc_tensor_resize(tc_tensor *t, int ndim, const int64_t *sizes);
/* Torch7's set: t becomes a view of src's storage and geometry (src may be t). */
tc_status tc_tensor_set(tc_tensor *t, const tc_tensor *src);
/* Torch7's set(storage, offset, sizes, strides) (s may be NULL for an empty tensor). */
tc_status tc_tensor_set_storage(tc_tensor *t, tc_storage *s, int64_t offset, int ndim,
                                const int64_t *sizes, const int64_t *strides);
/* Drops t's storage: t becomes an empty tensor (Lua's t:free() frees memory early). */
void tc_tensor_clear(tc_tensor *t);

int64_t tc_tensor_numel(const tc_tensor *t);
int tc_tensor_is_contiguous(const tc_tensor *t);
/* Pointer to element 0 of the view (NULL when the tensor has no storage). On a CUDA tensor
 * this is a device pointer: never dereference it on the host. */
void *tc_tensor_data(const tc_tensor *t);
/* Element at a 0-based multi-index, as a double (i64 beyond 2^53 loses precision; any NaN
 * as the quiet NaN without payload, which LuaJIT needs). On a device tensor get/set_value
 * copy one element across (slow, like cutorch's t[i]). */
tc_status tc_tensor_get(const tc_tensor *t, const int64_t *index, double *out);
tc_status tc_tensor_set_value(tc_tensor *t, const int64_t *index, double v);
/* Same fast pair for the first element of a 1-element tensor (Torch7 scalars); CPU
 * tensors only (NaN for a device tensor: use tc_tensor_get). */
double tc_tensor_item(const tc_tensor *t);

/* ---- the op table ------------------------------------------------------------------- */

typedef enum tc_opkind {
    TC_KIND_EW = 0,  /* elementwise with a formula, broadcast */
    TC_KIND_CONVERT, /* copy with dtype conversion */
    TC_KIND_SELECT,  /* where(cond, a, b) */
    TC_KIND_REDUCE,
    TC_KIND_SCAN,
    TC_KIND_MATMUL,
    TC_KIND_INDEX,
    TC_KIND_SORT,
    TC_KIND_JOIN,
    TC_KIND_VIEW,
    TC_KIND_RANDOM,
    TC_KIND_CONV,    /* conv2d, conv_transpose2d, conv2d_weight (core/shape_nn.c) */
    TC_KIND_POOL,    /* max/avg/adaptive pooling and their backward ops */
    TC_KIND_SOFTMAX, /* softmax, log_softmax along a dim */
    TC_KIND_NORM,    /* batch_norm, layer_norm and their backward ops (core/shape_bn.c) */
    TC_KIND_RNN,     /* whole-sequence recurrent layers and their backward (core/shape_rnn.c) */
    TC_KIND_ATTN,    /* fused scaled dot-product attention and its backward (core/shape_attn.c) */
    TC_KIND_OPTIM,   /* one parameter's optimizer update in one pass (core/shape_optim.c) */
    TC_KIND_COUNT
} tc_opkind;

enum {
    TC_OPF_DIFF = 1,  /* differentiable */
    TC_OPF_FLT = 2,   /* accepts float dtypes */
    TC_OPF_INT = 4,   /* accepts integer dtypes */
    TC_OPF_BOOL = 8,  /* accepts bool */
    TC_OPF_CMP = 16,  /* output is uint8 */
    TC_OPF_ZDIV = 32  /* integer divisor must not be zero */
};

#define TC_EW(ID, name, arity, nparams, flags, ffmt, ifmt) TC_OP_##ID,
#define TC_OPK(ID, name, kind, nin, nout, flags) TC_OP_##ID,
typedef enum tc_op {
#include "ops.def"
    TC_OP_COUNT
} tc_op;
#undef TC_EW
#undef TC_OPK

typedef struct tc_opinfo {
    const char *name;
    int32_t kind;    /* tc_opkind */
    int32_t nin;     /* tensor inputs (-1: a list) */
    int32_t nout;    /* outputs */
    int32_t nparams; /* scalar params used (elementwise ops) */
    int32_t flags;   /* TC_OPF_* */
    const char *formula;     /* float formula text (elementwise), else "" */
    const char *int_formula; /* integer formula text (elementwise), else "" */
} tc_opinfo;

const tc_opinfo *tc_op_info(tc_op op); /* NULL when op is out of range */
/* Op id by name, or -1. */
int tc_op_lookup(const char *name);

typedef struct tc_generator tc_generator;

/* Parameters of one op call (see ops.def for each op's meaning). */
typedef struct tc_params {
    double s[2];
    int64_t i[4];
    int32_t nshape;
    int64_t shape[2 * TC_MAX_DIMS];
    tc_generator *gen;
} tc_params;

/* The one dispatcher. in: nin borrowed inputs (NULL entries allowed where ops.def says
 * optional). out: nout slots; a non-NULL slot is the destination (Torch7's optional result
 * argument: resized to the result's size when it has the wrong size, dtype must fit), a
 * NULL slot receives a new tensor (a new reference). An in-place op passes an input as
 * out[0]. On failure out slots are left as they were. */
tc_status tc_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p,
                    tc_tensor **out, int nout);

/* ---- random number generators ------------------------------------------------------- */

/* Philox4x32-10 (core/philox.h). Where a generator is taken, NULL means the default one,
 * which a mutex guards; a generator from tc_generator_new is not thread-safe (one per thread). */
tc_status tc_generator_new(uint64_t seed, tc_generator **out);
void tc_generator_free(tc_generator *g);
/* The process default generator (seeded from the clock at start; reseed for repeatability). */
tc_generator *tc_generator_default(void);
void tc_generator_seed(tc_generator *g, uint64_t seed);
uint64_t tc_generator_initial_seed(const tc_generator *g);
/* State as opaque bytes: get copies at most cap bytes and returns the size needed. */
size_t tc_generator_get_state(const tc_generator *g, void *buf, size_t cap);
tc_status tc_generator_set_state(tc_generator *g, const void *buf, size_t n);
/* One uniform double in [0, 1) (Torch7's torch.uniform() without a tensor). */
double tc_generator_uniform(tc_generator *g);
double tc_generator_normal(tc_generator *g);

/* ---- runtime ------------------------------------------------------------------------ */

void tc_set_num_threads(int n);
int tc_get_num_threads(void);

typedef struct tc_memstats {
    int64_t bytes_live;   /* CPU storage bytes held now */
    int64_t bytes_peak;
    int64_t storages_live;
    int64_t tensors_live;
} tc_memstats;
void tc_memory_stats(tc_memstats *out);
/* Bytes of storage allocated since the process started (only grows). */
int64_t tc_memory_allocated_total(void);
/* Test hook: the n-th storage allocation from now fails (n <= 0 disables). */
void tc_debug_fail_alloc_after(int64_t n);

const char *tc_version(void);

/* CUDA: the optional backend libtocha_cuda.so, loaded on first use from $TOCHA_CUDA_LIB or
 * next to libtocha.so. 1 when it loads and sees a device; otherwise 0 with the reason in
 * why (cap bytes; why may be NULL). Never an error or a crash on a machine without CUDA. */
int tc_cuda_available(char *why, size_t cap);
/* Number of CUDA devices; 0 when CUDA is unavailable. */
int tc_cuda_device_count(void);

/* One device's caching allocator (core/cuda/cache_alloc.h). Bytes allocated count rounded
 * block sizes (what PyTorch's memory_allocated reports); reserved bytes are the segments
 * taken from the device, in use or cached. Counts run from process start. */
typedef struct tc_cuda_memstats {
    int64_t allocated_bytes, allocated_bytes_peak;
    int64_t requested_bytes; /* the callers' unrounded sizes of live blocks */
    int64_t reserved_bytes, reserved_bytes_peak;
    int64_t segments, segments_peak; /* device allocations held */
    int64_t blocks;                  /* live (allocated) blocks */
    int64_t alloc_count, free_count;
    int64_t cache_hits;    /* allocations served without a device allocation */
    int64_t device_allocs; /* segments taken from the device */
    int64_t device_frees;  /* segments handed back (empty_cache, OOM retry) */
    int64_t oom_retries;   /* times the cache was emptied to retry a refused segment */
    int64_t ooms;          /* allocations that failed even after that */
} tc_cuda_memstats;
/* What the driver says of one device (cudaGetDeviceProperties): cutorch's
 * getDeviceProperties, PyTorch's get_device_properties / get_device_capability. */
typedef struct tc_cuda_device_props {
    char name[256];       /* "NVIDIA H100 80GB HBM3" */
    int32_t major, minor; /* compute capability */
    int32_t multiprocessors, warp_size, max_threads_per_block;
    int64_t total_memory;            /* bytes of device memory */
    int64_t shared_memory_per_block; /* bytes */
} tc_cuda_device_props;
/* The entry points below fail with TC_ERR_DEVICE and the reason when CUDA is unavailable,
 * and TC_ERR_ARG for a device ordinal outside 0..count-1. */
tc_status tc_cuda_device_properties(int dev, tc_cuda_device_props *out);
tc_status tc_cuda_memory_stats(int dev, tc_cuda_memstats *out);
/* Hands dev's cached, unused device memory back to the driver (dev -1: every device). */
tc_status tc_cuda_empty_cache(int dev);
tc_status tc_cuda_reset_peak_stats(int dev);
/* The calling thread's device (libtocha's selection, 0 until set). */
tc_status tc_cuda_set_device(int dev);
tc_status tc_cuda_current_device(int *dev);
/* nbytes of device memory on dev from its caching allocator (0 bytes: NULL); release it
 * with tc_cuda_free on the same device. The raw buffers under device tensors, and tests. */
tc_status tc_cuda_alloc(int dev, size_t nbytes, void **ptr);
tc_status tc_cuda_free(int dev, void *ptr);
/* Waits for all work queued on dev (-1: every device) and reports a failed kernel. */
tc_status tc_cuda_synchronize(int dev);
/* Switches of the backend (cuda_api.h has their meaning): TF32 in float32 matrix products
 * and convolutions (PyTorch's allow_tf32), cuDNN algorithm search per shape
 * (cudnn.benchmark), whether an op with no CUDA kernel may run on the host, its inputs
 * copied over and its results copied back (on by default; counted), and whether softmax,
 * log_softmax and pooling use cuDNN where it takes the configuration (cudnn.enabled; on by
 * default; off, or a configuration cuDNN refuses: tocha's own kernels). */
typedef enum tc_cuda_flag {
    TC_CUDA_FLAG_TF32 = 0,
    TC_CUDA_FLAG_CUDNN_BENCHMARK = 1,
    TC_CUDA_FLAG_HOST_FALLBACK = 2,
    TC_CUDA_FLAG_CUDNN = 3,
    TC_CUDA_FLAG_COUNT
} tc_cuda_flag;
tc_status tc_cuda_set_flag(int flag, int64_t value);
int64_t tc_cuda_get_flag(int flag);
/* Ops run on the host for lack of a CUDA kernel, since process start, and per op: the
 * count for op (a tc_op; -1: all ops). */
int64_t tc_cuda_host_fallbacks(int op);

/* Streams (PyTorch semantics; core/cuda_stream.c, docs/cuda.md). Each thread has a current
 * stream per device, the device's default stream until set: every op, allocation and copy
 * of that thread on that device goes on it. Created streams run concurrently with the
 * default stream and each other (no implicit ordering: order them with events). A freed
 * device block is reused only by allocations on the stream it was allocated on. Streams
 * are reference counted: being current holds a reference, so freeing a current stream
 * destroys it (after its work) once it is no longer current. */
typedef struct tc_cuda_stream tc_cuda_stream;
tc_status tc_cuda_stream_new(int dev, tc_cuda_stream **out);
void tc_cuda_stream_retain(tc_cuda_stream *s);
void tc_cuda_stream_free(tc_cuda_stream *s); /* releases one reference; NULL and default streams: no-op */
/* The default stream of dev (a static object, never freed); NULL when dev is not a device. */
tc_cuda_stream *tc_cuda_default_stream(int dev);
/* The calling thread's current stream on dev (its default stream until set; NULL when dev
 * is not a device). Borrowed: retain it to keep it. */
tc_cuda_stream *tc_cuda_current_stream(int dev);
/* Makes s the calling thread's current stream on dev (s NULL: dev's default stream). */
tc_status tc_cuda_set_stream(int dev, tc_cuda_stream *s);
int tc_cuda_stream_device(const tc_cuda_stream *s);
int tc_cuda_stream_is_default(const tc_cuda_stream *s);
/* Waits for the work queued on s. */
tc_status tc_cuda_stream_sync(tc_cuda_stream *s);
/* *done: 1 when all work queued on s has finished, else 0. */
tc_status tc_cuda_stream_query(tc_cuda_stream *s, int *done);

/* Events: markers in a stream's work. timing 0: no timing (elapsed refuses it). The stream
 * arguments below may be NULL: the calling thread's current stream on the event's device. */
typedef struct tc_cuda_event tc_cuda_event;
tc_status tc_cuda_event_new(int dev, int timing, tc_cuda_event **out);
void tc_cuda_event_free(tc_cuda_event *e);
/* e marks the work queued on s so far (a later record replaces the mark). */
tc_status tc_cuda_event_record(tc_cuda_event *e, tc_cuda_stream *s);
/* Work queued on s from now on waits for e's mark (the host does not wait). An event never
 * recorded is complete: the wait does nothing. */
tc_status tc_cuda_event_wait(tc_cuda_event *e, tc_cuda_stream *s);
/* The host waits for e's mark; query says whether it has passed (1; also when never recorded). */
tc_status tc_cuda_event_sync(tc_cuda_event *e);
tc_status tc_cuda_event_query(tc_cuda_event *e, int *done);
/* Milliseconds from start's mark to end's (both timing events, recorded, completed). */
tc_status tc_cuda_event_elapsed(tc_cuda_event *start, tc_cuda_event *end, float *ms);

/* Pinned (page-locked) host memory: *out is a contiguous host copy of t (a CPU tensor) in
 * memory from the backend's host_alloc, which asynchronous copies need (t itself when it is
 * already pinned and contiguous). Needs CUDA. */
tc_status tc_tensor_pin(const tc_tensor *t, tc_tensor **out);
int tc_tensor_is_pinned(const tc_tensor *t);
/* PyTorch's Tensor.record_stream: t's device memory is also used by work queued on s (NULL:
 * the current stream of t's device), not only by the stream it was allocated on. When the
 * storage is freed, its memory is handed out again only after the work queued on s up to
 * that moment has finished. Host tensors are refused. */
tc_status tc_tensor_record_stream(const tc_tensor *t, tc_cuda_stream *s);
/* tc_tensor_to with PyTorch's non_blocking=True: a copy between a pinned host tensor and a
 * device is queued on the current stream and not waited for (synchronise the stream or an
 * event before reading the result on the host, or changing the pinned source); a device
 * result of a host copy is pinned. From pageable host memory the copy is synchronous. */
tc_status tc_tensor_to_async(const tc_tensor *t, int device, int dtype, tc_tensor **out);

/* CUDA graphs (PyTorch's torch.cuda.CUDAGraph). tc_cuda_graph_begin(dev, s) waits for the
 * device, makes s (NULL: a side stream libtocha keeps per device) the current stream of dev
 * and captures it: until tc_cuda_graph_end, ops of this thread on dev are recorded, not run.
 * Allocations in the capture come from a private pool the graph keeps (its addresses are
 * replayed); tensors made in the capture are the graph's outputs, rewritten by each replay.
 * Random ops (uniform, normal, bernoulli with a scalar p, random, exponential, cauchy,
 * log_normal, geometric) drawing from the capture's generator are captured and draw fresh
 * numbers at every replay: each tc_cuda_graph_replay reserves from that generator the slots
 * the same ops would reserve eagerly, so after seeding, replay k gives the numbers of the
 * k-th eager run and leaves the generator where that run would (capturing draws nothing).
 * The capture's generator is tc_generator_default() unless tc_cuda_set_capture_generator
 * chose another before tc_cuda_graph_begin; it must outlive the graph.
 * Refused while capturing, with a message naming the op and device (and the capture then
 * fails at tc_cuda_graph_end, even if the error was ignored): ops without a CUDA kernel
 * (host fallback), reads of device values on the host (item/get, masks, nonzero,
 * bernoulli's probability tensor, integer division; index ops check their bounds on the
 * device instead and the first bad index is reported at the next host wait), copies to the
 * host, synchronisation, draws from another generator, randperm and multinomial, and copies
 * from the host larger than a scalar (non_blocking copies from pinned memory are captured:
 * each replay re-reads the pinned memory).
 * tc_cuda_graph_end restores the previous current stream; on a failed capture it frees the
 * partial graph and fails with the first refusal's message. */
typedef struct tc_cuda_graph tc_cuda_graph;
tc_status tc_cuda_graph_begin(int dev, tc_cuda_stream *s);
tc_status tc_cuda_graph_end(int dev, tc_cuda_graph **out);
/* Replays g on the current stream of its device (asynchronously); a graph with random ops
 * first reserves its slots from its generator and queues the new Philox pair on that stream. */
tc_status tc_cuda_graph_replay(tc_cuda_graph *g);
/* Waits for g's replays and frees it (deferred to the end of the capture when called while
 * this thread captures on g's device). NULL: no-op. */
void tc_cuda_graph_free(tc_cuda_graph *g);
int tc_cuda_graph_device(const tc_cuda_graph *g);
/* The generator whose draws the next CUDA graph capture of this thread records (read by
 * tc_cuda_graph_begin; NULL, the initial setting: tc_generator_default()). Lua passes its
 * state's default generator. */
void tc_cuda_set_capture_generator(tc_generator *gen);
/* Whether the calling thread captures a graph on dev. */
int tc_cuda_is_capturing(int dev);

/* Autograd and data loading have their own headers (also part of the ffi.cdef). */
#include "tocha_autograd.h"
#include "tocha_data.h"
#include "tocha_graph.h"
#include "tocha_control.h"
#include "tocha_amp.h"

#ifndef TC_CDEF
#ifdef __cplusplus
}
#endif
#endif
#endif /* TOCHA_H */
