/* internal.h -- what the parts of libtocha share and the public header does not show:
 * error helpers, allocation, refcount atomics, the backend interface, the per-kind
 * "prepare" step of the dispatcher, and the dtype dispatch table.
 */
#ifndef TC_INTERNAL_H
#define TC_INTERNAL_H

#include "tocha.h"
#include <stdbool.h>
#include <string.h>

/* Element sizes by dtype, inline for hot paths (dtype.c has the public function). */
static inline int64_t tc_elsize(int dt)
{
    static const int8_t sizes[TC_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 2, 4, 8, 1};
    return sizes[dt];
}

/* ---- errors ------------------------------------------------------------------------- */

/* Formats a shape as "(3,4)" into buf (at least 128 bytes); returns buf. */
const char *tc_shape_str(const tc_tensor *t, char *buf, size_t cap);
const char *tc_sizes_str(int ndim, const int64_t *sizes, char *buf, size_t cap);
#define TC_SHAPE_BUF 160

/* Propagate a failure: `TRY(call);` returns its status from the enclosing function. */
#define TRY(expr)                                                                           \
    do {                                                                                    \
        tc_status tc_try_s_ = (expr);                                                       \
        if (tc_try_s_ != TC_OK) return tc_try_s_;                                           \
    } while (0)

/* ---- memory ------------------------------------------------------------------------- */

/* malloc that honours tc_debug_fail_alloc_after and reports failure as an error naming
 * what for. Returns NULL with the error set. */
void *tc_malloc(size_t nbytes, const char *what);
/* Storage of nbytes on the CPU, uninitialised (tc_storage_new zero-fills). */
tc_status tc_storage_alloc(int64_t nbytes, tc_storage **out);
/* Allocates a contiguous tensor of the given dtype and sizes (no error text about ops:
 * callers add context). */
tc_status tc_tensor_alloc(tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out);
/* The same on a device code (tc_tensor_new_on without the argument checks). */
tc_status tc_tensor_alloc_on(int device, tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out);


static inline int32_t tc_atomic_inc(int32_t *p) { return __atomic_add_fetch(p, 1, __ATOMIC_RELAXED); }
static inline int32_t tc_atomic_dec(int32_t *p) { return __atomic_sub_fetch(p, 1, __ATOMIC_ACQ_REL); }

/* ---- geometry helpers ---------------------------------------------------------------- */

int64_t tc_numel_of(int ndim, const int64_t *sizes);
void tc_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
/* Broadcasts the shapes of n tensors (NULL entries skipped) into (ndim, sizes). */
tc_status tc_broadcast_shapes(const char *opname, const tc_tensor *const *ts, int n,
                              int *ndim, int64_t *sizes);
/* Strides of t viewed at the broadcast shape (0 along broadcast dims). */
void tc_broadcast_strides(const tc_tensor *t, int ndim, const int64_t *sizes, int64_t *strides);
bool tc_same_shape(const tc_tensor *a, const tc_tensor *b);
/* Whether a and b share bytes: the same storage and overlapping element spans. Kernels that
 * must not write what they still read test this, not the storage alone: a compiled graph
 * keeps all its values in one arena storage. */
bool tc_tensor_overlaps(const tc_tensor *a, const tc_tensor *b);
/* Whether a and b have an element at a common address. Exact for two views of one layout at
 * different offsets (column blocks of a matrix interleave but share nothing); for other
 * layouts it is tc_tensor_overlaps, which may say yes for interleaved views. */
bool tc_tensor_shares_elements(const tc_tensor *a, const tc_tensor *b);
/* Byte address of element 0 of t. */
static inline char *tc_base(const tc_tensor *t)
{
    return t->storage ? (char *)t->storage->data + t->offset * tc_elsize(t->dtype) : NULL;
}
/* Wraps dim (may be negative, counting from the end) into [0, ndim); error names op. */
tc_status tc_wrap_dim(const char *opname, int64_t dim, int ndim, int *out);

/* ---- autograd hooks into the dispatcher (core/autograd/node.c) ------------------------ */

/* tc_op_run without autograd: validation, outputs, the kernel, version bumps (dispatch.c). */
tc_status tc_op_exec(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out, int nout);
/* tc_op_run when a tensor of the call is flagged for autograd or anomaly mode is on:
 * in-place checks, then tc_op_exec, then the tape. */
tc_status tc_autograd_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                             int nout);
/* Frees t's autograd state (tc_tensor_release calls it when t->autograd is set). */
void tc_autograd_tensor_free(tc_tensor *t);
extern int tc_ag_anomaly_on;

/* ---- graph-mode hooks into the dispatcher (core/graph/trace.c) -------------------------- */

/* The graph being recorded on this thread, or NULL (tc_op_run tests it once per call). */
extern _Thread_local struct tc_graph *tc_trace_active;
/* Set by a shape-only trace (core/graph/trace.c) around a call it records without
 * computing: tc_op_exec checks and allocates the results but runs no kernel, and prepare
 * steps skip their checks of input values (which are undefined then). */
extern _Thread_local bool tc_exec_shape_only;
/* tc_op_run while a trace is active: runs the call (through autograd when wanted) and
 * records it into the graph. */
tc_status tc_trace_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                          int nout);

/* Whether tc_op_run must go through tc_autograd_op_run: one flag test per tensor when
 * nothing requires grad. */
static inline bool tc_autograd_wanted(const tc_tensor *const *in, int nin, tc_tensor *const *out, int nout)
{
    int32_t f = 0;
    if (in)
        for (int i = 0; i < nin; i++)
            if (in[i]) f |= in[i]->flags;
    if (out)
        for (int o = 0; o < nout && o < 2; o++)
            if (out[o]) f |= out[o]->flags;
    if (f & (TC_TF_REQUIRES_GRAD | TC_TF_VIEW_OF_GRAD)) return tc_grad_enabled() || tc_ag_anomaly_on;
    return tc_ag_anomaly_on != 0;
}

/* ---- the backend interface ------------------------------------------------------------ */

/* One validated call: outputs exist with their final sizes and dtypes. */
typedef struct tc_kcall {
    tc_op op;
    const tc_opinfo *info;
    const tc_tensor *const *in;
    int nin;
    const tc_params *p;
    tc_tensor *const *out;
    int nout;
} tc_kcall;

typedef tc_status (*tc_kernel)(const tc_kcall *k);

/* A backend: a name and its kernels, indexed by op. A NULL kernel means "not on this
 * device" and the dispatcher reports it. */
typedef struct tc_backend {
    const char *name;
    tc_kernel kernels[TC_OP_COUNT];
} tc_backend;

extern const tc_backend tc_cpu_backend;

/* ---- devices (core/cuda_backend.c) ----------------------------------------------------- */

/* TC_OK when device is a CUDA device code naming an existing device; else TC_ERR_DEVICE
 * ("<op>: CUDA unavailable: <reason>", "<op>: no device cuda:3 (2 devices)"). */
tc_status tc_cuda_check_device(const char *op, int device);
/* A storage header (counted in tc_memory_stats' storages) over memory the caller hands
 * over: deleter(data, ctx) frees it with the last reference. */
tc_status tc_storage_adopt(void *data, int64_t nbytes, int device, void (*deleter)(void *, void *), void *ctx,
                           tc_storage **out);
/* New storage of nbytes on a CUDA device code, from its caching allocator. */
tc_status tc_cuda_storage_alloc(int device, int64_t nbytes, bool zero, tc_storage **out);
/* nbytes from src on src_device to dst on dst_device (either may be TC_CPU); waits until
 * the bytes have arrived when the destination is the host. */
tc_status tc_device_copy_bytes(int dst_device, void *dst, int src_device, const void *src, size_t nbytes);
/* Host scalars joining device work (core/cuda_scalars.c): nbytes (TC_CUDA_SCALARS_MAX at
 * most; more goes through tc_device_copy_bytes) from the host to dst on a CUDA device,
 * queued on this thread's current stream through page-locked memory, without waiting: src
 * may change on return, work queued after it on the same stream reads the bytes. */
#define TC_CUDA_SCALARS_MAX 64
/* Its ring: chunks of 16-byte slots, a chunk's copies all on one stream (tests). */
#define TC_CUDA_SCALARS_CHUNKS 32
#define TC_CUDA_SCALARS_CHUNK_SLOTS 128
tc_status tc_cuda_scalars_copy(int device, void *dst, const void *src, size_t nbytes);
/* A contiguous device copy of host tensor t, made so when t is at most TC_CUDA_SCALARS_MAX
 * bytes; else (or while a capture is open) tc_tensor_to's synchronous copy. */
tc_status tc_cuda_scalars_to_device(const tc_tensor *t, int device, tc_tensor **out);
/* The CUDA backend's kernel for every op (run on the device, or on the host when the
 * backend has no kernel and the fallback is on). */
extern const tc_backend tc_cuda_backend;
/* A copy (TC_OP_COPY) from one device to another: k->in[0] and k->out[0] differ in device. */
tc_status tc_copy_across_devices(const tc_kcall *k);
/* A host tensor with t's values: t itself (retained) when on the CPU, else a copy. Prepare
 * steps that read values (index bounds, mask counts) go through it. */
tc_status tc_host_values(const tc_tensor *t, tc_tensor **out);
/* The same for op, refused while a CUDA graph is being captured on t's device. */
tc_status tc_host_values_for(const char *op, const tc_tensor *t, tc_tensor **out);
/* Byte span [lo, hi) that t's elements occupy in its storage (no elements: lo == hi). */
void tc_tensor_byte_span(const tc_tensor *t, int64_t *lo, int64_t *hi);

/* ---- the prepare step (backend-independent) ------------------------------------------ */

/* What an op will produce: output dtypes and sizes. */
typedef struct tc_outspec {
    int nout;
    int32_t dtype[2];
    int32_t ndim[2];
    int64_t size[2][TC_MAX_DIMS];
} tc_outspec;

/* Per kind: checks inputs and params, fills spec. Lives next to the kind's shape rules
 * (core/shape_*.c). View ops instead build their output directly (core/view.c). */
typedef tc_status (*tc_prepare_fn)(const tc_kcall *k, tc_outspec *spec);

tc_status tc_prepare_ew(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_convert(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_select(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_reduce(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_scan(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_matmul(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_index(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_sort(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_join(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_random(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_conv(const tc_kcall *k, tc_outspec *spec);    /* core/shape_nn.c */
tc_status tc_prepare_pool(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_softmax(const tc_kcall *k, tc_outspec *spec);
tc_status tc_prepare_norm(const tc_kcall *k, tc_outspec *spec);    /* core/shape_bn.c */
tc_status tc_prepare_rnn(const tc_kcall *k, tc_outspec *spec);     /* core/shape_rnn.c */
tc_status tc_prepare_attn(const tc_kcall *k, tc_outspec *spec);    /* core/shape_attn.c */
tc_status tc_prepare_optim(const tc_kcall *k, tc_outspec *spec);   /* core/shape_optim.c */
/* Whether a CPU tensor of ndim dims (sizes) may be input `i` of `nin` of a device op of this
 * kind, the kernel getting a device copy: a 0-dim tensor (PyTorch's rule), or an optimizer
 * step's vector of per-step scalars (its last input, at most 8 values). The dispatcher and
 * the graph's device check (exec_cuda.c) both ask this. */
static inline bool tc_host_scalars_join(int kind, int i, int nin, int ndim, const int64_t *size)
{
    return ndim == 0 || (kind == TC_KIND_OPTIM && i == nin - 1 && ndim == 1 && size[0] <= 8);
}
/* Index kind (core/shape_index.c), shared with its kernels: whether one element is non-zero
 * (NaN counts), and how many elements of t broadcast to (ndim, sizes) are. */
bool tc_elem_nonzero(int dt, const void *p);
int64_t tc_count_nonzero(const tc_tensor *t, int ndim, const int64_t *sizes);
/* The dispatcher's checks and prepare step alone (dispatch.c): output dtypes and sizes of
 * a call, nothing allocated or written. Not for VIEW ops (run them: they copy no data). */
tc_status tc_op_prepare(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor *const *out,
                        int nout, tc_outspec *spec);
/* Views: returns a new tensor viewing in[0]. */
tc_status tc_view_run(const tc_kcall *k, tc_tensor **out);

/* ---- CPU kernels, one per family (core/cpu/) -------------------------------------- */

tc_status tc_cpu_ew(const tc_kcall *k);
bool tc_cpu_ew_fast(tc_op op, const tc_opinfo *info, const tc_tensor *const *in, int nin, const tc_params *p,
                    tc_tensor *out);
tc_status tc_cpu_convert(const tc_kcall *k);
tc_status tc_cpu_select(const tc_kcall *k);
tc_status tc_cpu_reduce(const tc_kcall *k);
tc_status tc_cpu_scan(const tc_kcall *k);
tc_status tc_cpu_matmul(const tc_kcall *k);
tc_status tc_cpu_index(const tc_kcall *k);
tc_status tc_cpu_sort(const tc_kcall *k);
tc_status tc_cpu_join(const tc_kcall *k);
tc_status tc_cpu_random(const tc_kcall *k);
tc_status tc_cpu_conv(const tc_kcall *k);    /* conv.c */
tc_status tc_cpu_pool(const tc_kcall *k);    /* pool.c */
tc_status tc_cpu_softmax(const tc_kcall *k); /* softmax.c */
tc_status tc_cpu_norm(const tc_kcall *k);    /* batchnorm.c (layer_norm: layernorm.c) */
tc_status tc_cpu_layer_norm(const tc_kcall *k); /* layernorm.c */
tc_status tc_cpu_rnn(const tc_kcall *k);     /* rnn.c */
tc_status tc_cpu_attn(const tc_kcall *k);    /* attention.c */
tc_status tc_cpu_optim(const tc_kcall *k);   /* optim.c */

/* ---- threads (core/cpu/parallel.c) ---------------------------------------------------- */

/* Runs fn over [0, n) split into at most tc_get_num_threads() chunks of at least grain
 * items; runs inline when n < 2 * grain or when already inside a parallel region. */
typedef void (*tc_range_fn)(void *ctx, int64_t begin, int64_t end);
void tc_parallel_for(int64_t n, int64_t grain, tc_range_fn fn, void *ctx);
/* Below this many elements an elementwise or reduction kernel stays on one thread. */
#define TC_PARALLEL_GRAIN 32768

/* ---- dtype dispatch ------------------------------------------------------------------- */

/* X(TC_ENUM, C type, suffix) for every dtype a kernel computes in directly. f16/bf16 are
 * computed in f32 by converting at the edges (see tc_cpu_with_f32). */
#define TC_FOR_EACH_FLOAT(X) X(TC_F32, float, f32) X(TC_F64, double, f64)
#define TC_FOR_EACH_INT(X)                                                                  \
    X(TC_U8, uint8_t, u8) X(TC_I8, int8_t, i8) X(TC_I16, int16_t, i16) X(TC_I32, int32_t, i32) \
        X(TC_I64, int64_t, i64)
#define TC_FOR_EACH_BOOL(X) X(TC_BOOL, bool, b8)
#define TC_FOR_EACH_DTYPE(X) TC_FOR_EACH_FLOAT(X) TC_FOR_EACH_INT(X) TC_FOR_EACH_BOOL(X)

static inline bool tc_is_half(int dt) { return dt == TC_F16 || dt == TC_BF16; }

/* Reads element i (byte address p) of dtype dt as double / writes a double into it. */
double tc_load_as_double(int dt, const void *p);
void tc_store_double(int dt, void *p, double v);

/* For kernels with no half path: converts half inputs to f32 copies, runs fn on a call
 * whose half tensors are replaced by f32 ones, and converts f32 results back into the
 * half outputs. Used by every CPU family for TC_F16 / TC_BF16. */
tc_status tc_cpu_with_f32(const tc_kcall *k, tc_kernel fn);
bool tc_kcall_has_half(const tc_kcall *k);

/* The elementwise loop engine (core/cpu/loops.c). A loop function processes n elements;
 * ptrs[0] is the output, ptrs[1..] the inputs, strides[] their byte strides. */
typedef void (*tc_loop_fn)(char **ptrs, const int64_t *strides, int64_t n, double s0, double s1);
/* Runs fn over every element of out, with the inputs broadcast to out's shape: dims are
 * coalesced, and large iteration spaces are split across the thread pool. */
void tc_cpu_foreach(tc_tensor *out, const tc_tensor *const *ins, int nin, tc_loop_fn fn, double s0,
                    double s1);

/* Strided N-d walk over one tensor, calling fn(ptr) for each element in row-major order;
 * used by kernels that are not performance critical. */
typedef struct tc_elem_iter {
    int ndim;
    int64_t size[TC_MAX_DIMS];
    int64_t stride_bytes[TC_MAX_DIMS];
    int64_t index[TC_MAX_DIMS];
    char *ptr;
    int64_t remaining;
} tc_elem_iter;
void tc_elem_iter_init(tc_elem_iter *it, const tc_tensor *t);
/* Returns the current element pointer and advances; NULL when done. */
char *tc_elem_iter_next(tc_elem_iter *it);

/* ---- autocast hook into the dispatcher (core/autocast.c) ------------------------------- */

/* 1 while autocast is on for this thread: tc_op_run then hands each call to
 * tc_autocast_op_run, which casts inputs by the op's class and runs it (tocha_amp.h). */
extern _Thread_local int tc_autocast_on;
tc_status tc_autocast_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                             int nout);

#endif /* TC_INTERNAL_H */
