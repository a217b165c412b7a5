/* mock_cuda.c -- a CUDA backend without CUDA: the whole tc_cuda_api table (cuda_api.h) over
 * host memory, built by the Makefile into build/tests/libtocha_cuda_mock.so (with
 * mock_cuda_ops.c, which runs the ops: elementwise loops, index_select and gather, and the
 * other mock_cuda_*.c files mock_cuda.h lists). Point TOCHA_CUDA_LIB at it and libtocha,
 * Lua and the tests take every CUDA code path on a machine without a GPU (docs/cuda_testing.md).
 *
 * What is real: the caching allocator (the same core/cuda/cache_alloc.c as the CUDA
 * backend, so its statistics, empty_cache and out-of-memory retry behave as on a GPU), the
 * argument checks and error messages of each call, device ordinals and selection. What is
 * not: "device memory" is host malloc (copies are memcpy, so a device pointer read on the
 * host works here and would crash on a GPU), and ew()/run() run float32/float64 only: one
 * plain loop per op from the ops.def float formulas, plus gather and index_select with
 * their device-side index check (mock_cuda_ops.c).
 *
 * Streams and events are checked handles without asynchrony: work runs when queued (so a
 * query says done, unless a test holds the stream: tc_cuda_mock_hold, mock_cuda_hold.c),
 * but each thread's current stream per device is kept and the allocator files blocks under
 * it, as the CUDA backend does. Events record a time. Pinned memory is malloc with a
 * registry (a foreign or second release is caught). Graph capture
 * is real: while a thread captures, the ew/run calls, memsets and copies it queues on the
 * captured stream are recorded (deep copies) instead of run, host waits are refused as in
 * the CUDA backend, allocations come from the capture's private pool, and graph_launch
 * replays the records in order.
 *
 * Environment (read when the library is first loaded):
 *   TOCHA_CUDA_MOCK_DEVICES   number of devices, 0..32 (default 1; 0 = "driver sees none")
 *   TOCHA_CUDA_MOCK_CAPACITY  bytes of memory per device, with an optional K, M or G suffix
 *                             (default 256M); a device allocation beyond it fails as
 *                             cudaMalloc does, with TC_ERR_MEMORY
 */
#include "cuda/cache_alloc.h"
#include "cuda/cuda_api.h"
#include "mock_cuda.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- errors -------------------------------------------------------------------------- */

static _Thread_local char g_err[768];

tc_status mock_fail(tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return code;
}

static const char *last_error(void) { return g_err; }

/* ---- configuration and the fake devices ---------------------------------------------- */

typedef struct mock_device {
    pthread_mutex_t mu;
    size_t used; /* bytes of raw allocations held */
} mock_device;

static int g_ndev = 1;
static size_t g_capacity = (size_t)256 << 20;
static char g_config_error[256]; /* a bad environment value: device_count reports it */
static mock_device g_dev[CA_MAX_DEVICES];
static ca_allocator g_alloc;
static int g_alloc_ok;
static _Thread_local int g_current;

/* ---- streams, events, capture records (version 4) ------------------------------------- */

#define STREAM_MAGIC 0x5354524dU
#define EVENT_MAGIC 0x4556544dU
#define GRAPH_MAGIC 0x4752504dU

typedef struct mock_stream {
    uint32_t magic;
    int dev;
} mock_stream;

typedef struct mock_event {
    uint32_t magic;
    int dev, timing, recorded;
    double ms; /* wall clock at the last record */
    void *held_stream; /* recorded on a held stream (tc_cuda_mock_hold): that stream, and */
    uint64_t held_gen; /* the hold it was recorded under (0: not held, complete) */
} mock_event;


typedef struct mock_graph {
    uint32_t magic;
    int dev;
    void *stream; /* the captured stream, while capturing */
    uintptr_t pool;
    mock_rec *rec;
    size_t nrec, caprec;
    void **held; /* pinned blocks released during the capture, freed with the graph */
    size_t nheld, capheld;
} mock_graph;

static _Thread_local void *t_stream[CA_MAX_DEVICES];
static _Thread_local mock_graph *t_cap[CA_MAX_DEVICES];
static _Thread_local int t_ncap;

/* Whether work queued now on dev is recorded rather than run. */
bool mock_recording(int dev) { return t_cap[dev] && t_stream[dev] == t_cap[dev]->stream; }

tc_status mock_no_wait(int dev, const char *what)
{
    if (!t_cap[dev]) return TC_OK;
    return mock_fail(TC_ERR_UNSUPPORTED, "%s: cannot wait for the device while a CUDA graph is being captured on cuda:%d",
                what, dev);
}

tc_status mock_record(int dev, const mock_rec *r)
{
    mock_graph *g = t_cap[dev];
    if (g->nrec == g->caprec) {
        size_t cap = g->caprec ? g->caprec * 2 : 16;
        mock_rec *v = (mock_rec *)realloc(g->rec, cap * sizeof *v);
        if (!v) return mock_fail(TC_ERR_MEMORY, "mock capture: no host memory for a record");
        g->rec = v;
        g->caprec = cap;
    }
    g->rec[g->nrec++] = *r;
    return TC_OK;
}

/* Each raw allocation carries its size in a 64-byte header, so release knows what to give
 * back to the capacity (and the block handed out stays 64-byte aligned). */
#define HEADER 64

static tc_status raw_alloc(void *ctx, int dev, size_t nbytes, void **ptr, char *msg, size_t cap)
{
    (void)ctx;
    mock_device *d = &g_dev[dev];
    pthread_mutex_lock(&d->mu);
    if (nbytes > g_capacity - d->used) {
        snprintf(msg, cap, "mock cudaMalloc: out of memory (%zu bytes requested, %zu of %zu in use)", nbytes, d->used,
                 g_capacity);
        pthread_mutex_unlock(&d->mu);
        return TC_ERR_MEMORY;
    }
    char *p = (char *)aligned_alloc(HEADER, HEADER + (nbytes + HEADER - 1) / HEADER * HEADER);
    if (!p) {
        snprintf(msg, cap, "mock cudaMalloc: host malloc of %zu bytes failed", nbytes);
        pthread_mutex_unlock(&d->mu);
        return TC_ERR_MEMORY;
    }
    memcpy(p, &nbytes, sizeof nbytes);
    d->used += nbytes;
    pthread_mutex_unlock(&d->mu);
    *ptr = p + HEADER; /* raw_free steps back to p */
    return TC_OK;      /* cppcheck-suppress memleak */
}

static tc_status raw_free(void *ctx, int dev, void *ptr, char *msg, size_t cap)
{
    (void)ctx;
    if (t_ncap > 0) { /* cudaFree waits for the device, as in the CUDA backend */
        snprintf(msg, cap, "mock cudaFree: not while this thread captures a CUDA graph");
        return TC_ERR_UNSUPPORTED;
    }
    char *p = (char *)ptr - HEADER;
    size_t nbytes;
    memcpy(&nbytes, p, sizeof nbytes);
    pthread_mutex_lock(&g_dev[dev].mu);
    g_dev[dev].used -= nbytes;
    pthread_mutex_unlock(&g_dev[dev].mu);
    free(p);
    return TC_OK;
}

/* "256M" -> bytes; 0 on a malformed value. */
static size_t parse_bytes(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift) end++;
    if (*end || v == 0 || v > (SIZE_MAX >> shift)) return 0;
    return (size_t)v << shift;
}

static int g_fill_uninitialized; /* TOCHA_CUDA_FILL_UNINITIALIZED=1, as in core/cuda/runtime.cu */
static void configure(void)
{
    const char *n = getenv("TOCHA_CUDA_MOCK_DEVICES"), *c = getenv("TOCHA_CUDA_MOCK_CAPACITY");
    const char *fill = getenv("TOCHA_CUDA_FILL_UNINITIALIZED");
    g_fill_uninitialized = fill && fill[0] == '1';
    if (n && *n) {
        char *end;
        long v = strtol(n, &end, 10);
        if (*end || v < 0 || v > CA_MAX_DEVICES)
            snprintf(g_config_error, sizeof g_config_error, "mock CUDA: TOCHA_CUDA_MOCK_DEVICES=%s is not 0..%d", n,
                     CA_MAX_DEVICES);
        else g_ndev = (int)v;
    }
    if (c && *c) {
        size_t v = parse_bytes(c);
        if (!v)
            snprintf(g_config_error, sizeof g_config_error,
                     "mock CUDA: TOCHA_CUDA_MOCK_CAPACITY=%s is not a byte count (like 4096, 64K, 256M, 2G)", c);
        else g_capacity = v;
    }
    for (int d = 0; d < CA_MAX_DEVICES; d++) pthread_mutex_init(&g_dev[d].mu, NULL);
    static const ca_device_ops ops = {NULL, raw_alloc, raw_free};
    g_alloc_ok = g_ndev > 0 && ca_init(&g_alloc, &ops, g_ndev) == TC_OK;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* TC_OK when dev names a mock device; what names the call in the message. */
tc_status mock_use(int dev, const char *what)
{
    pthread_once(&g_once, configure);
    if (g_config_error[0]) return mock_fail(TC_ERR_DEVICE, "%s", g_config_error);
    if (dev < 0 || dev >= g_ndev)
        return mock_fail(g_ndev ? TC_ERR_ARG : TC_ERR_DEVICE, "%s: no device %d (%d device%s)", what, dev, g_ndev,
                    g_ndev == 1 ? "" : "s");
    if (!g_alloc_ok) return mock_fail(TC_ERR_DEVICE, "%s: allocator: %s", what, ca_last_error());
    return TC_OK;
}

/* A ca_* status passed on with the allocator's message. */
static tc_status ca(tc_status s) { return s ? mock_fail(s, "%s", ca_last_error()) : TC_OK; }

/* ---- the table's functions ----------------------------------------------------------- */

static void versions(int *runtime, int *driver)
{
    if (runtime) *runtime = 0; /* 0 and 0: no CUDA at all */
    if (driver) *driver = 0;
}

static tc_status device_count(int *count)
{
    if (!count) return mock_fail(TC_ERR_ARG, "cuda: device_count: NULL result");
    pthread_once(&g_once, configure);
    *count = 0;
    if (g_config_error[0]) return mock_fail(TC_ERR_DEVICE, "%s", g_config_error);
    *count = g_ndev;
    return TC_OK;
}

static tc_status device_name(int dev, char *name, size_t cap)
{
    if (!name || cap == 0) return mock_fail(TC_ERR_ARG, "cuda: device_name: no buffer");
    name[0] = '\0';
    tc_status s = mock_use(dev, "cuda: device properties");
    if (!s) snprintf(name, cap, "tocha mock CUDA device %d (host memory, %zu bytes)", dev, g_capacity);
    return s;
}

/* a compute capability 9.0 device (the machines the backend is built for) of host memory */
static tc_status device_properties(int dev, tc_cuda_device_props *out)
{
    if (!out) return mock_fail(TC_ERR_ARG, "cuda: device_properties: NULL result");
    memset(out, 0, sizeof *out);
    tc_status s = device_name(dev, out->name, sizeof out->name);
    if (s) return s;
    out->major = 9, out->minor = 0, out->multiprocessors = 1, out->warp_size = 32;
    out->max_threads_per_block = 1024, out->total_memory = (int64_t)g_capacity;
    out->shared_memory_per_block = 48 * 1024;
    return TC_OK;
}

static tc_status set_bytes(int dev, void *ptr, int value, size_t nbytes)
{
    if (nbytes == 0) return TC_OK;
    if (!ptr) return mock_fail(TC_ERR_ARG, "cuda: set_bytes: NULL pointer");
    tc_status s = mock_use(dev, "cuda: memset");
    if (!s && mock_recording(dev)) return mock_record(dev, &(mock_rec){.kind = REC_SET, .dst = ptr, .value = value, .n = (int64_t)nbytes});
    if (!s) memset(ptr, value, nbytes);
    return s;
}

static tc_status mem_alloc(int dev, size_t nbytes, void **ptr)
{
    if (!ptr) return mock_fail(TC_ERR_ARG, "cuda: alloc: NULL result");
    *ptr = NULL;
    if (nbytes == 0) return TC_OK;
    tc_status s = mock_use(dev, "cuda: alloc");
    uintptr_t key = t_cap[dev] ? t_cap[dev]->pool : (uintptr_t)t_stream[dev];
    if (!s) s = ca(ca_alloc(&g_alloc, dev, key, nbytes, ptr));
    if (!s && g_fill_uninitialized && (s = set_bytes(dev, *ptr, 0xff, nbytes))) (void)ca_free(&g_alloc, dev, *ptr);
    if (s) *ptr = NULL;
    return s;
}

static tc_status mem_release(int dev, void *ptr)
{
    if (!ptr) return TC_OK;
    tc_status s = mock_use(dev, "cuda: free");
    return s ? s : ca(ca_free(&g_alloc, dev, ptr));
}

/* kind: 'h' from the host (synchronous), 'a' from the host (async), 'd' to the host
 * (sync or async), 'D' device to device. */
static tc_status copy(int dev, void *dst, const void *src, size_t nbytes, int kind, const char *what)
{
    if (nbytes == 0) return TC_OK;
    if (!dst || !src) return mock_fail(TC_ERR_ARG, "%s: NULL pointer", what);
    tc_status s = mock_use(dev, what);
    if (s) return s;
    if (t_cap[dev] && kind == 'd')
        return mock_fail(TC_ERR_UNSUPPORTED, "%s: cannot read device values on the host while a CUDA graph is being "
                                        "captured on cuda:%d", what, dev);
    if (mock_recording(dev)) {
        mock_rec r = {.kind = kind == 'h' ? REC_VALUE : REC_COPY, .dst = dst, .src = src, .n = (int64_t)nbytes};
        if (kind == 'h') { /* staged, as the CUDA backend stages host scalars in pinned memory */
            if (nbytes > TC_CUDA_CAPTURE_H2D_MAX)
                return mock_fail(TC_ERR_UNSUPPORTED, "%s: %zu bytes cannot be captured in a CUDA graph on cuda:%d (at most %d "
                            "bytes of host scalars are)", what, nbytes, dev, TC_CUDA_CAPTURE_H2D_MAX);
            memcpy(r.bytes, src, nbytes);
        }
        return mock_record(dev, &r);
    }
    memmove(dst, src, nbytes);
    return TC_OK;
}

/* A plain copy to or from the host waits for the current stream (runtime.cu's copy): a
 * host wait, which lifts the stream's holds. */
static tc_status copy_waited(int dev, void *dst, const void *src, size_t nbytes, int kind, const char *what)
{
    tc_status s = copy(dev, dst, src, nbytes, kind, what);
    if (!s && !mock_recording(dev)) mock_unhold(dev, t_stream[dev], 0);
    return s;
}

static tc_status copy_h2d(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy_waited(dev, dst, src, nbytes, 'h', "cuda: copy host to device");
}

static tc_status copy_d2h(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy_waited(dev, dst, src, nbytes, 'd', "cuda: copy device to host");
}

static tc_status copy_d2d(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, 'D', "cuda: copy device to device");
}

static tc_status synchronize(int dev)
{
    tc_status s = mock_use(dev, "cuda: synchronize");
    if (!s) s = mock_no_wait(dev, "cuda: synchronize");
    if (!s) mock_unhold(dev, NULL, 1);
    return s;
}


/* ---- version 2: allocator and device selection ----------------------------------------- */

static tc_status memory_stats(int dev, tc_cuda_memstats *out)
{
    if (!out) return mock_fail(TC_ERR_ARG, "cuda memory_stats: NULL result");
    tc_status s = mock_use(dev, "cuda memory_stats");
    return s ? s : ca(ca_stats(&g_alloc, dev, out));
}

static tc_status empty_cache(int dev)
{
    tc_status s = mock_use(dev, "cuda empty_cache");
    if (!s && t_ncap > 0)
        s = mock_fail(TC_ERR_UNSUPPORTED, "cuda empty_cache: cannot free device memory while this thread captures a CUDA graph");
    return s ? s : ca(ca_empty_cache(&g_alloc, dev));
}

static tc_status reset_peak_stats(int dev)
{
    tc_status s = mock_use(dev, "cuda reset_peak_stats");
    return s ? s : ca(ca_reset_peak(&g_alloc, dev));
}

static tc_status set_device(int dev)
{
    tc_status s = mock_use(dev, "cuda set_device");
    if (!s) g_current = dev;
    return s;
}

static tc_status current_device(int *dev)
{
    if (!dev) return mock_fail(TC_ERR_ARG, "cuda current_device: NULL result");
    *dev = g_current;
    return TC_OK;
}


static tc_status set_flag(int flag, int64_t value)
{
    (void)value;
    if (flag != TC_CUDA_FLAG_TF32 && flag != TC_CUDA_FLAG_CUDNN_BENCHMARK && flag != TC_CUDA_FLAG_CUDNN)
        return mock_fail(TC_ERR_ARG, "cuda set_flag: flag %d is not the backend's", flag);
    return TC_OK;
}

/* ---- version 4: streams, events, pinned memory, capture ----------------------------------- */

#include <time.h>

static mock_stream *as_stream(void *s) { return s && ((mock_stream *)s)->magic == STREAM_MAGIC ? (mock_stream *)s : NULL; }
static mock_event *as_event(void *e) { return e && ((mock_event *)e)->magic == EVENT_MAGIC ? (mock_event *)e : NULL; }

/* A stream argument: NULL (the legacy default stream) or a live stream of dev. */
static tc_status stream_arg(int dev, void *s, const char *what)
{
    tc_status st = mock_use(dev, what);
    if (st || !s) return st;
    mock_stream *m = as_stream(s);
    if (!m) return mock_fail(TC_ERR_ARG, "%s: %p is not a live stream", what, s);
    if (m->dev != dev) return mock_fail(TC_ERR_ARG, "%s: the stream belongs to device %d, not %d", what, m->dev, dev);
    return TC_OK;
}

static tc_status stream_create(int dev, void **stream)
{
    if (!stream) return mock_fail(TC_ERR_ARG, "cuda stream_create: NULL result");
    *stream = NULL;
    tc_status s = mock_use(dev, "cuda stream_create");
    if (s) return s;
    mock_stream *m = (mock_stream *)malloc(sizeof *m);
    if (!m) return mock_fail(TC_ERR_MEMORY, "cuda stream_create: no host memory");
    *m = (mock_stream){STREAM_MAGIC, dev};
    *stream = m;
    return TC_OK;
}

static tc_status stream_destroy(int dev, void *stream)
{
    if (!stream) return mock_fail(TC_ERR_ARG, "cuda stream_destroy: the default stream cannot be destroyed");
    tc_status s = stream_arg(dev, stream, "cuda stream_destroy");
    if (!s && t_cap[dev] && t_cap[dev]->stream == stream)
        s = mock_fail(TC_ERR_ARG, "cuda stream_destroy: the stream is capturing a CUDA graph on cuda:%d", dev);
    if (!s) s = mock_no_wait(dev, "cuda stream_destroy");
    if (s) return s;
    if (t_stream[dev] == stream) t_stream[dev] = NULL;
    mock_unhold(dev, stream, 0);
    ((mock_stream *)stream)->magic = 0; /* a second destroy is caught (until the memory is reused) */
    free(stream);
    return TC_OK;
}

static tc_status stream_synchronize(int dev, void *stream)
{
    tc_status s = stream_arg(dev, stream, "cuda stream_synchronize");
    if (!s) s = mock_no_wait(dev, "cuda stream_synchronize");
    if (!s) mock_unhold(dev, stream, 0);
    return s;
}

static tc_status stream_query(int dev, void *stream, int *done)
{
    if (!done) return mock_fail(TC_ERR_ARG, "cuda stream_query: NULL result");
    *done = 0;
    tc_status s = stream_arg(dev, stream, "cuda stream_query");
    if (!s) s = mock_no_wait(dev, "cuda stream_query");
    if (!s) *done = mock_held_gen(dev, stream, 0, 0) == 0; /* work runs when queued, unless held */
    return s;
}

static tc_status set_stream(int dev, void *stream)
{
    tc_status s = stream_arg(dev, stream, "cuda set_stream");
    if (!s) t_stream[dev] = stream;
    return s;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static tc_status event_create(int dev, int timing, void **event)
{
    if (!event) return mock_fail(TC_ERR_ARG, "cuda event_create: NULL result");
    *event = NULL;
    tc_status s = mock_use(dev, "cuda event_create");
    if (s) return s;
    mock_event *e = (mock_event *)calloc(1, sizeof *e);
    if (!e) return mock_fail(TC_ERR_MEMORY, "cuda event_create: no host memory");
    *e = (mock_event){.magic = EVENT_MAGIC, .dev = dev, .timing = timing != 0};
    *event = e;
    return TC_OK;
}

/* An event argument: a live event of dev. */
static tc_status event_arg(int dev, void *event, const char *what)
{
    tc_status s = mock_use(dev, what);
    if (s) return s;
    mock_event *e = as_event(event);
    if (!e) return mock_fail(TC_ERR_ARG, "%s: %p is not a live event", what, event);
    if (e->dev != dev) return mock_fail(TC_ERR_ARG, "%s: the event belongs to device %d, not %d", what, e->dev, dev);
    return TC_OK;
}

static tc_status event_destroy(int dev, void *event)
{
    if (!event) return TC_OK;
    tc_status s = event_arg(dev, event, "cuda event_destroy");
    if (s) return s;
    ((mock_event *)event)->magic = 0;
    free(event);
    return TC_OK;
}

/* Work runs when queued, so a record is complete at once (also inside a capture, where the
 * mock does not record events: they order nothing here). */
static tc_status event_record(int dev, void *event, void *stream)
{
    tc_status s = event_arg(dev, event, "cuda event_record");
    if (!s) s = stream_arg(dev, stream, "cuda event_record");
    if (s) return s;
    mock_event *e = (mock_event *)event;
    e->recorded = 1;
    e->ms = now_ms();
    e->held_stream = stream;
    e->held_gen = mock_held_gen(dev, stream, 0, 0);
    return TC_OK;
}

static bool event_pending(int dev, const mock_event *e)
{
    return e->held_gen && mock_hold_pending(dev, e->held_stream, e->held_gen);
}

static tc_status event_wait(int dev, void *stream, void *event)
{
    tc_status s = event_arg(dev, event, "cuda event_wait");
    if (!s) s = stream_arg(dev, stream, "cuda event_wait");
    const mock_event *e = (const mock_event *)event;
    if (!s && e->held_stream != stream && event_pending(dev, e) && !mock_add_hold(dev, stream, e->held_stream, e->held_gen))
        s = mock_fail(TC_ERR_UNSUPPORTED, "cuda event_wait: the mock holds too many streams");
    return s;
}

static tc_status event_synchronize(int dev, void *event)
{
    tc_status s = event_arg(dev, event, "cuda event_synchronize");
    if (!s) s = mock_no_wait(dev, "cuda event_synchronize");
    mock_event *e = (mock_event *)event;
    if (!s && event_pending(dev, e)) mock_unhold(dev, e->held_stream, 0);
    return s;
}

static tc_status event_query(int dev, void *event, int *done)
{
    if (!done) return mock_fail(TC_ERR_ARG, "cuda event_query: NULL result");
    *done = 0;
    tc_status s = event_arg(dev, event, "cuda event_query");
    if (!s) s = mock_no_wait(dev, "cuda event_query");
    mock_event *e = (mock_event *)event;
    if (!s) *done = !event_pending(dev, e);
    return s;
}

static tc_status event_elapsed(int dev, void *start, void *end, float *ms)
{
    if (!ms) return mock_fail(TC_ERR_ARG, "cuda event_elapsed: NULL result");
    *ms = 0;
    tc_status s = event_arg(dev, start, "cuda event_elapsed");
    if (!s) s = event_arg(dev, end, "cuda event_elapsed");
    if (s) return s;
    mock_event *a = (mock_event *)start, *b = (mock_event *)end;
    if (!a->timing || !b->timing) return mock_fail(TC_ERR_ARG, "cuda event_elapsed: an event was created without timing");
    if (!a->recorded || !b->recorded) return mock_fail(TC_ERR_ARG, "cuda event_elapsed: an event was never recorded");
    *ms = (float)(b->ms - a->ms);
    return TC_OK;
}

/* Pinned memory: malloc, registered so that a foreign or second release is caught. */
static pthread_mutex_t g_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static void **g_pins;
static size_t g_npins, g_cappins;

static tc_status host_alloc(size_t nbytes, void **ptr)
{
    if (!ptr) return mock_fail(TC_ERR_ARG, "cuda host_alloc: NULL result");
    *ptr = NULL;
    if (nbytes == 0) return TC_OK;
    if (t_ncap > 0) return mock_fail(TC_ERR_UNSUPPORTED, "cuda host_alloc: not while this thread captures a CUDA graph");
    void *p = malloc(nbytes);
    pthread_mutex_lock(&g_pin_mu);
    if (p && g_npins == g_cappins) {
        size_t cap = g_cappins ? g_cappins * 2 : 64;
        void **v = (void **)realloc(g_pins, cap * sizeof *v);
        if (v) g_pins = v, g_cappins = cap;
    }
    bool ok = p && g_npins < g_cappins;
    if (ok) g_pins[g_npins++] = p;
    pthread_mutex_unlock(&g_pin_mu);
    if (!ok) {
        free(p);
        return mock_fail(TC_ERR_MEMORY, "cuda host_alloc: %zu bytes of page-locked memory: out of host memory", nbytes);
    }
    *ptr = p;
    return TC_OK;
}

static tc_status hold(mock_graph *g, void *p)
{
    if (g->nheld == g->capheld) {
        size_t cap = g->capheld ? g->capheld * 2 : 8;
        void **v = (void **)realloc(g->held, cap * sizeof *v);
        if (!v) return mock_fail(TC_ERR_MEMORY, "cuda host_release: no host memory for bookkeeping");
        g->held = v, g->capheld = cap;
    }
    g->held[g->nheld++] = p;
    return TC_OK;
}

/* Forgets p (registered) and frees it; the caller checked it. */
static void unpin(void *p)
{
    pthread_mutex_lock(&g_pin_mu);
    for (size_t i = 0; i < g_npins; i++)
        if (g_pins[i] == p) {
            g_pins[i] = g_pins[--g_npins];
            break;
        }
    pthread_mutex_unlock(&g_pin_mu);
    free(p);
}

static tc_status host_release(void *ptr)
{
    if (!ptr) return TC_OK;
    bool known = false;
    pthread_mutex_lock(&g_pin_mu);
    for (size_t i = 0; i < g_npins && !known; i++) known = g_pins[i] == ptr;
    pthread_mutex_unlock(&g_pin_mu);
    if (!known)
        return mock_fail(TC_ERR_ARG, "cuda host_release: %p is not page-locked memory from host_alloc (released twice, or "
                                "foreign)", ptr);
    for (int d = 0; d < CA_MAX_DEVICES && t_ncap > 0; d++)
        if (t_cap[d]) {
            for (size_t i = 0; i < t_cap[d]->nheld; i++)
                if (t_cap[d]->held[i] == ptr) return mock_fail(TC_ERR_ARG, "cuda host_release: %p released twice", ptr);
            return hold(t_cap[d], ptr);
        }
    unpin(ptr);
    return TC_OK;
}

static tc_status copy_h2d_async(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, 'a', "cuda copy_h2d_async");
}

static tc_status copy_d2h_async(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, 'd', "cuda copy_d2h_async");
}

static void graph_free(mock_graph *g)
{
    if (g->pool) (void)ca_pool_close(&g_alloc, g->dev, g->pool);
    for (size_t i = 0; i < g->nheld; i++) unpin(g->held[i]);
    for (size_t i = 0; i < g->nrec; i++)
        if (g->rec[i].kind == REC_CPU) mock_cpu_free(&g->rec[i]);
    free(g->held);
    free(g->rec);
    g->magic = 0;
    free(g);
}

static tc_status capture_begin(int dev, void *stream)
{
    if (!stream) return mock_fail(TC_ERR_ARG, "cuda capture_begin: the legacy default stream cannot be captured");
    tc_status s = stream_arg(dev, stream, "cuda capture_begin");
    if (s) return s;
    if (t_cap[dev]) return mock_fail(TC_ERR_ARG, "cuda capture_begin: this thread already captures on cuda:%d", dev);
    if (t_stream[dev] != stream)
        return mock_fail(TC_ERR_ARG, "cuda capture_begin: the stream to capture must be the current stream of cuda:%d", dev);
    mock_graph *g = (mock_graph *)calloc(1, sizeof *g);
    if (!g) return mock_fail(TC_ERR_MEMORY, "cuda capture_begin: no host memory");
    g->magic = GRAPH_MAGIC;
    g->dev = dev;
    g->stream = stream;
    if ((s = ca(ca_pool_open(&g_alloc, dev, &g->pool)))) {
        free(g);
        return s;
    }
    t_cap[dev] = g;
    t_ncap++;
    return TC_OK;
}

static tc_status capture_end(int dev, void *stream, void **graph)
{
    if (!graph) return mock_fail(TC_ERR_ARG, "cuda capture_end: NULL result");
    *graph = NULL;
    tc_status s = mock_use(dev, "cuda capture_end");
    if (s) return s;
    mock_graph *g = t_cap[dev];
    if (!g) return mock_fail(TC_ERR_ARG, "cuda capture_end: this thread has no capture open on cuda:%d", dev);
    if (g->stream != stream) return mock_fail(TC_ERR_ARG, "cuda capture_end: cuda:%d captures another stream", dev);
    t_cap[dev] = NULL;
    t_ncap--;
    g->stream = NULL;
    *graph = g;
    return TC_OK;
}

static mock_graph *graph_arg(int dev, void *graph, const char *what, tc_status *s)
{
    mock_graph *g = (mock_graph *)graph;
    *s = mock_use(dev, what);
    if (!*s && (!g || g->magic != GRAPH_MAGIC)) *s = mock_fail(TC_ERR_ARG, "%s: %p is not a live graph", what, graph);
    if (!*s && g->dev != dev) *s = mock_fail(TC_ERR_ARG, "%s: the graph is of cuda:%d, not cuda:%d", what, g->dev, dev);
    return *s ? NULL : g;
}

/* Replays the records in order (work runs when queued: the stream only has to be valid). */
static tc_status graph_launch(int dev, void *graph, void *stream)
{
    tc_status s;
    mock_graph *g = graph_arg(dev, graph, "cuda graph_launch", &s);
    if (!s) s = stream_arg(dev, stream, "cuda graph_launch");
    if (!s && t_cap[dev]) s = mock_fail(TC_ERR_UNSUPPORTED, "cuda graph_launch: cannot replay while capturing on cuda:%d", dev);
    for (size_t i = 0; !s && i < g->nrec; i++) mock_replay(&g->rec[i]);
    return s;
}

static tc_status graph_destroy(int dev, void *graph)
{
    if (!graph) return TC_OK;
    tc_status s;
    mock_graph *g = graph_arg(dev, graph, "cuda graph_destroy", &s);
    if (!s && t_ncap > 0) s = mock_fail(TC_ERR_UNSUPPORTED, "cuda graph_destroy: not while this thread captures a CUDA graph");
    if (!s) graph_free(g);
    return s;
}

static tc_status is_capturing(int dev, int *yes)
{
    if (!yes) return mock_fail(TC_ERR_ARG, "cuda is_capturing: NULL result");
    *yes = dev >= 0 && dev < CA_MAX_DEVICES && t_cap[dev] != NULL;
    return TC_OK;
}

static const tc_cuda_api g_api = {
    TC_CUDA_API_VERSION,
    (uint32_t)sizeof(tc_cuda_api),
    last_error,
    versions,
    device_count,
    device_name,
    mem_alloc,
    mem_release,
    set_bytes,
    copy_h2d,
    copy_d2h,
    copy_d2d,
    synchronize,
    mock_ew,
    memory_stats,
    empty_cache,
    reset_peak_stats,
    set_device,
    current_device,
    mock_run,
    set_flag,
    stream_create,
    stream_destroy,
    stream_synchronize,
    stream_query,
    set_stream,
    event_create,
    event_destroy,
    event_record,
    event_wait,
    event_synchronize,
    event_query,
    event_elapsed,
    host_alloc,
    host_release,
    copy_h2d_async,
    copy_d2h_async,
    capture_begin,
    capture_end,
    graph_launch,
    graph_destroy,
    is_capturing,
    mock_devcheck_take,
    device_properties,
};

EXPORT const tc_cuda_api *tc_cuda_entry(void) { return &g_api; }
