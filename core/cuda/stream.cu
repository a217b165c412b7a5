/* stream.cu -- the version-4 half of the backend table (cuda_api.h): streams and each
 * thread's current stream, events, page-locked host memory, asynchronous copies, and CUDA
 * graph capture with its private allocator pool.
 *
 * NOTE: NOT YET RUN ON A GPU. Written and compiled (nvcc 13, sm_90) on a machine without
 * one; the same contracts are exercised over the mock backend (tests/c/mock_cuda.c) by
 * tests/c/test_cuda_stream.c and tests/lua/cuda_stream_spec.lua.
 *
 * Current stream: per thread and per device (CUDA keeps the current device per thread, and
 * PyTorch the current stream per thread and device). cu_use_device records the device it
 * makes current, so cu_stream() needs no argument at the launch sites.
 *
 * Capture: cudaStreamCaptureModeThreadLocal, so other threads keep working while this one
 * captures; but no thread may wait for the whole device then (that invalidates the capture
 * in any mode), so the backend's device-wide waits refuse while a capture is open on the
 * device (cu_device_captured) and graph_destroy waits on the graph's own event. Streams are
 * created non-blocking: the legacy default stream, which other code may still use, then
 * never joins a capture by its implicit synchronisation (that would invalidate it). Calls
 * that wait on the host are refused while capturing, with a message, rather than left to
 * invalidate the capture; so is a capturing stream's wait on an event recorded outside the
 * capture. The capturing thread's allocations that reach cudaMalloc, and the cuBLAS /
 * cuDNN handles it makes, run in cudaStreamCaptureModeRelaxed (cu_relaxed_capture); the
 * handle pools are filled before the capture begins.
 */
#include "cuda_internal.h"
#include "cache_alloc.h"
#include <new>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device error words (cuda_api.h, version 5): one tc_cuda_devcheck in device memory per
 * device, made by the first capture_begin there (outside the capture: cudaMalloc cannot be
 * captured) and kept for the process. g_armed: a graph has been launched on the device
 * since, so devcheck_take reads the word; before that it cannot have been written (eager
 * index calls are checked on the host) and the read is skipped. */
static tc_cuda_devcheck *g_word[CA_MAX_DEVICES];
static int g_armed[CA_MAX_DEVICES];
static pthread_mutex_t g_word_mu = PTHREAD_MUTEX_INITIALIZER;

/* A graph under capture, then captured: what it owns besides the CUDA objects. */
struct cu_graph {
    int dev;
    cudaStream_t stream; /* the capture stream (only meaningful while capturing) */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    uintptr_t pool; /* the allocator's private pool, 0 once closed */
    char *staging;  /* page-locked memory for host scalars copied in during the capture */
    size_t staged;  /* bytes of it used */
    void **held;    /* page-locked blocks released during the capture: freed with the graph */
    size_t nheld, capheld;
    void **recorded; /* during the capture: events whose last record is in it */
    size_t nrec, caprec;
    cudaEvent_t done; /* after it: recorded behind each replay, waited for by graph_destroy */
    bool launched;
};

#define STAGING_BYTES ((size_t)64 << 10)

static thread_local int t_dev;                              /* made current by cu_use_device */
static thread_local cudaStream_t t_stream[CA_MAX_DEVICES]; /* current stream per device */
static thread_local cu_graph *t_cap[CA_MAX_DEVICES];       /* open capture per device */
static thread_local int t_ncap;                             /* open captures of this thread */
static int g_ncap_dev[CA_MAX_DEVICES];                       /* open captures per device, all threads */

tc_status cu_use_device(int dev)
{
    char what[64];
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) {
        t_dev = dev >= 0 && dev < CA_MAX_DEVICES ? dev : 0;
        return cu_device_runs_kernels(dev);
    }
    snprintf(what, sizeof what, "cuda: select device %d", dev);
    return cu_check(e, what);
}

cudaStream_t cu_stream(void) { return t_stream[t_dev]; }

bool cu_capturing(int dev) { return dev >= 0 && dev < CA_MAX_DEVICES && t_cap[dev] != nullptr; }

bool cu_capturing_any(void) { return t_ncap > 0; }

bool cu_device_captured(int dev)
{
    return dev >= 0 && dev < CA_MAX_DEVICES && __atomic_load_n(&g_ncap_dev[dev], __ATOMIC_ACQUIRE) > 0;
}

uintptr_t cu_alloc_key(int dev)
{
    if (dev < 0 || dev >= CA_MAX_DEVICES) return 0;
    return t_cap[dev] ? t_cap[dev]->pool : (uintptr_t)t_stream[dev];
}

/* dev is usable and current; what names the call in messages. */
static tc_status use(int dev, const char *what)
{
    if (dev < 0 || dev >= CA_MAX_DEVICES) return cu_fail(TC_ERR_ARG, "%s: no device %d", what, dev);
    return cu_use_device(dev);
}

/* The refusal of a call that would wait on the host during a capture on dev. */
static tc_status no_wait(int dev, const char *what)
{
    if (!cu_capturing(dev)) return TC_OK;
    return cu_fail(TC_ERR_UNSUPPORTED,
                   "%s: cannot wait for the device while a CUDA graph is being captured on cuda:%d (a host wait "
                   "cannot be recorded in a graph; do it before or after the capture)",
                   what, dev);
}

/* ---- streams ----------------------------------------------------------------------------- */

tc_status cu_stream_create(int dev, void **stream)
{
    if (!stream) return cu_fail(TC_ERR_ARG, "cuda stream_create: NULL result");
    *stream = nullptr;
    tc_status s = use(dev, "cuda stream_create");
    if (s) return s;
    cudaStream_t st = nullptr;
    s = cu_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cuda stream_create");
    if (!s) *stream = (void *)st;
    return s;
}

tc_status cu_stream_destroy(int dev, void *stream)
{
    if (!stream) return cu_fail(TC_ERR_ARG, "cuda stream_destroy: the default stream cannot be destroyed");
    tc_status s = use(dev, "cuda stream_destroy");
    if (s) return s;
    if (cu_capturing(dev) && t_cap[dev]->stream == (cudaStream_t)stream)
        return cu_fail(TC_ERR_ARG, "cuda stream_destroy: the stream is capturing a CUDA graph on cuda:%d", dev);
    if ((s = no_wait(dev, "cuda stream_destroy"))) return s;
    /* Its work finishes first: blocks it freed stay filed under its handle, which a later
     * stream may get again, and must not be reused while that work still runs. */
    s = cu_check(cudaStreamSynchronize((cudaStream_t)stream), "cuda stream_destroy: synchronize");
    if (!s) s = cu_check(cudaStreamDestroy((cudaStream_t)stream), "cuda stream_destroy");
    if (!s && t_stream[dev] == (cudaStream_t)stream) t_stream[dev] = nullptr;
    return s;
}

tc_status cu_stream_synchronize(int dev, void *stream)
{
    tc_status s = use(dev, "cuda stream_synchronize");
    if (!s) s = no_wait(dev, "cuda stream_synchronize");
    return s ? s : cu_check(cudaStreamSynchronize((cudaStream_t)stream), "cuda stream_synchronize");
}

tc_status cu_stream_query(int dev, void *stream, int *done)
{
    if (!done) return cu_fail(TC_ERR_ARG, "cuda stream_query: NULL result");
    *done = 0;
    tc_status s = use(dev, "cuda stream_query");
    if (!s) s = no_wait(dev, "cuda stream_query");
    if (s) return s;
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return TC_OK;
    }
    if (e == cudaSuccess) *done = 1;
    return cu_check(e, "cuda stream_query");
}

tc_status cu_set_stream(int dev, void *stream)
{
    tc_status s = use(dev, "cuda set_stream");
    if (!s) t_stream[dev] = (cudaStream_t)stream;
    return s;
}

/* ---- events ------------------------------------------------------------------------------ */

/* Appends p to the growable array *v (n used, cap allocated). */
static bool ptr_push(void ***v, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        void **w = (void **)realloc(*v, c * sizeof *w);
        if (!w) return false;
        *v = w, *cap = c;
    }
    (*v)[(*n)++] = p;
    return true;
}

/* Whether event's last record is in g's capture (remove: and forget it). */
static bool recorded_in(cu_graph *g, void *event, bool remove)
{
    for (size_t i = 0; i < g->nrec; i++)
        if (g->recorded[i] == event) {
            if (remove) g->recorded[i] = g->recorded[--g->nrec];
            return true;
        }
    return false;
}

/* Whether stream belongs to an open capture (the captured stream, or one that joined it by
 * waiting on an event recorded in it). */
static bool stream_captures(void *stream)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (!stream || cudaStreamIsCapturing((cudaStream_t)stream, &st) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return st != cudaStreamCaptureStatusNone;
}

tc_status cu_event_create(int dev, int timing, void **event)
{
    if (!event) return cu_fail(TC_ERR_ARG, "cuda event_create: NULL result");
    *event = nullptr;
    tc_status s = use(dev, "cuda event_create");
    if (s) return s;
    cudaEvent_t e = nullptr;
    s = cu_check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
                 "cuda event_create");
    if (!s) *event = (void *)e;
    return s;
}

tc_status cu_event_destroy(int dev, void *event)
{
    if (!event) return TC_OK;
    tc_status s = use(dev, "cuda event_destroy");
    return s ? s : cu_check(cudaEventDestroy((cudaEvent_t)event), "cuda event_destroy");
}

tc_status cu_event_record(int dev, void *event, void *stream)
{
    if (!event) return cu_fail(TC_ERR_ARG, "cuda event_record: NULL event");
    tc_status s = use(dev, "cuda event_record");
    if (!s) s = cu_check(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "cuda event_record");
    cu_graph *g = t_cap[dev];
    if (s || !g) return s;
    /* remember whether this record is inside the open capture (cu_event_wait's check) */
    bool inside = stream_captures(stream);
    bool known = recorded_in(g, event, !inside); /* a record outside replaces one inside */
    if (inside && !known && !ptr_push(&g->recorded, &g->nrec, &g->caprec, event))
        return cu_fail(TC_ERR_MEMORY, "cuda event_record: no host memory for bookkeeping");
    return TC_OK;
}

tc_status cu_event_wait(int dev, void *stream, void *event)
{
    if (!event) return cu_fail(TC_ERR_ARG, "cuda event_wait: NULL event");
    tc_status s = use(dev, "cuda event_wait");
    if (s) return s;
    /* "It is invalid to wait on a non-captured event from a stream which is being captured"
     * (CUDA Programming Guide): the call would fail and invalidate the capture. */
    if (stream_captures(stream) && !(t_cap[dev] && recorded_in(t_cap[dev], event, false)))
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "cuda event_wait: a stream being captured into a CUDA graph on cuda:%d cannot wait on an event "
                       "recorded outside the capture (make the stream wait before capture_begin, or record the event "
                       "inside the capture)",
                       dev);
    return cu_check(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0), "cuda event_wait");
}

tc_status cu_event_synchronize(int dev, void *event)
{
    if (!event) return cu_fail(TC_ERR_ARG, "cuda event_synchronize: NULL event");
    tc_status s = use(dev, "cuda event_synchronize");
    if (!s) s = no_wait(dev, "cuda event_synchronize");
    return s ? s : cu_check(cudaEventSynchronize((cudaEvent_t)event), "cuda event_synchronize");
}

tc_status cu_event_query(int dev, void *event, int *done)
{
    if (!event || !done) return cu_fail(TC_ERR_ARG, "cuda event_query: NULL event or result");
    *done = 0;
    tc_status s = use(dev, "cuda event_query");
    if (!s) s = no_wait(dev, "cuda event_query");
    if (s) return s;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return TC_OK;
    }
    if (e == cudaSuccess) *done = 1;
    return cu_check(e, "cuda event_query");
}

tc_status cu_event_elapsed(int dev, void *start, void *end, float *ms)
{
    if (!start || !end || !ms) return cu_fail(TC_ERR_ARG, "cuda event_elapsed: NULL event or result");
    *ms = 0;
    tc_status s = use(dev, "cuda event_elapsed");
    return s ? s : cu_check(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end), "cuda event_elapsed");
}

/* ---- page-locked host memory and asynchronous copies --------------------------------------- */

tc_status cu_host_alloc(size_t nbytes, void **ptr)
{
    if (!ptr) return cu_fail(TC_ERR_ARG, "cuda host_alloc: NULL result");
    *ptr = nullptr;
    if (nbytes == 0) return TC_OK;
    if (cu_capturing_any())
        return cu_fail(TC_ERR_UNSUPPORTED, "cuda host_alloc: cannot allocate page-locked memory while this thread "
                                           "captures a CUDA graph (cudaHostAlloc may wait for the device)");
    cudaError_t e = cudaHostAlloc(ptr, nbytes, cudaHostAllocPortable);
    if (e == cudaSuccess) return TC_OK;
    *ptr = nullptr;
    char what[96];
    snprintf(what, sizeof what, "cuda host_alloc: %zu bytes of page-locked memory", nbytes);
    return cu_check(e, what);
}

/* Keeps p with g until g is destroyed. */
static tc_status hold(cu_graph *g, void *p)
{
    if (g->nheld == g->capheld) {
        size_t cap = g->capheld ? g->capheld * 2 : 8;
        void **v = (void **)realloc(g->held, cap * sizeof *v);
        if (!v) return cu_fail(TC_ERR_MEMORY, "cuda host_release: no host memory for bookkeeping");
        g->held = v;
        g->capheld = cap;
    }
    g->held[g->nheld++] = p;
    return TC_OK;
}

tc_status cu_host_release(void *ptr)
{
    if (!ptr) return TC_OK;
    cudaPointerAttributes at;
    cudaError_t e = cudaPointerGetAttributes(&at, ptr);
    if (e != cudaSuccess || at.type != cudaMemoryTypeHost) {
        (void)cudaGetLastError();
        return cu_fail(TC_ERR_ARG, "cuda host_release: %p is not page-locked memory from host_alloc (released "
                                   "twice, or foreign)",
                       ptr);
    }
    if (cu_capturing_any()) /* cudaFreeHost waits for the device: the open capture's graph keeps it */
        for (int d = 0; d < CA_MAX_DEVICES; d++)
            if (t_cap[d]) return hold(t_cap[d], ptr);
    return cu_check(cudaFreeHost(ptr), "cuda host_release");
}

tc_status cu_copy_h2d_async(int dev, void *dst, const void *src, size_t nbytes)
{
    if (nbytes == 0) return TC_OK;
    if (!dst || !src) return cu_fail(TC_ERR_ARG, "cuda copy_h2d_async: NULL pointer");
    tc_status s = use(dev, "cuda copy_h2d_async");
    return s ? s
             : cu_check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, cu_stream()),
                        "cuda copy_h2d_async");
}

tc_status cu_copy_d2h_async(int dev, void *dst, const void *src, size_t nbytes)
{
    if (nbytes == 0) return TC_OK;
    if (!dst || !src) return cu_fail(TC_ERR_ARG, "cuda copy_d2h_async: NULL pointer");
    tc_status s = use(dev, "cuda copy_d2h_async");
    if (!s && cu_capturing(dev))
        s = cu_fail(TC_ERR_UNSUPPORTED, "cuda copy_d2h_async: copies to the host are not captured (cuda:%d is "
                                        "capturing a CUDA graph)",
                    dev);
    return s ? s
             : cu_check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, cu_stream()),
                        "cuda copy_d2h_async");
}

/* ---- graph capture ------------------------------------------------------------------------ */

/* Frees what g owns besides the CUDA graph objects; the caller waited for the device. */
static void graph_free_parts(cu_graph *g)
{
    if (g->done) (void)cudaEventDestroy(g->done);
    free(g->recorded);
    if (g->pool) (void)cu_pool_close(g->dev, g->pool);
    if (g->staging) (void)cudaFreeHost(g->staging);
    for (size_t i = 0; i < g->nheld; i++) (void)cudaFreeHost(g->held[i]);
    (void)cudaGetLastError();
    free(g->held);
    free(g);
}

tc_status cu_capture_stage_h2d(int dev, void *dst, const void *src, size_t nbytes)
{
    cu_graph *g = t_cap[dev];
    size_t need = (nbytes + 15) / 16 * 16;
    if (nbytes > TC_CUDA_CAPTURE_H2D_MAX)
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "cuda: copy host to device: %zu bytes cannot be captured in a CUDA graph on cuda:%d (at most "
                       "%d bytes of host scalars are; copy larger host data with a non_blocking copy from pinned "
                       "memory, which the graph re-reads at every replay)",
                       nbytes, dev, TC_CUDA_CAPTURE_H2D_MAX);
    if (g->staged + need > STAGING_BYTES)
        return cu_fail(TC_ERR_UNSUPPORTED, "cuda: copy host to device: more than %zu bytes of host scalars copied "
                                           "during one CUDA graph capture on cuda:%d",
                       STAGING_BYTES, dev);
    char *slot = g->staging + g->staged;
    memcpy(slot, src, nbytes);
    g->staged += need;
    return cu_check(cudaMemcpyAsync(dst, slot, nbytes, cudaMemcpyHostToDevice, cu_stream()),
                    "cuda: copy host to device (captured)");
}

/* The word of dev, made and cleared (op -1: every byte 0xff) on first use. */
static tc_status devcheck_make(int dev)
{
    pthread_mutex_lock(&g_word_mu);
    tc_status s = TC_OK;
    if (!g_word[dev]) {
        void *p = nullptr;
        s = cu_check(cudaMalloc(&p, sizeof(tc_cuda_devcheck)), "cuda capture_begin: the device error word");
        if (!s) s = cu_check(cudaMemset(p, 0xff, sizeof(tc_cuda_devcheck)), "cuda capture_begin: clear the error word");
        if (!s) s = cu_check(cudaStreamSynchronize(0), "cuda capture_begin: clear the error word");
        if (!s) __atomic_store_n(&g_word[dev], (tc_cuda_devcheck *)p, __ATOMIC_RELEASE);
        else if (p) (void)cudaFree(p);
    }
    pthread_mutex_unlock(&g_word_mu);
    return s;
}

tc_cuda_devcheck *cu_devcheck_word(int dev)
{
    return dev >= 0 && dev < CA_MAX_DEVICES ? __atomic_load_n(&g_word[dev], __ATOMIC_ACQUIRE) : nullptr;
}

tc_status cu_devcheck_take(int dev, tc_cuda_devcheck *out)
{
    if (!out) return cu_fail(TC_ERR_ARG, "cuda devcheck_take: NULL result");
    *out = tc_cuda_devcheck{-1, 0, 0, 0};
    tc_status s = use(dev, "cuda devcheck_take");
    if (s) return s;
    if ((s = no_wait(dev, "cuda devcheck_take"))) return s;
    tc_cuda_devcheck *w = cu_devcheck_word(dev);
    if (!w || !__atomic_load_n(&g_armed[dev], __ATOMIC_ACQUIRE)) return TC_OK;
    /* The caller has waited for the work in question; a plain copy reads the word. */
    tc_cuda_devcheck h;
    if ((s = cu_check(cudaMemcpy(&h, w, sizeof h, cudaMemcpyDeviceToHost), "cuda devcheck_take: read the error word")))
        return s;
    if (h.op == -1) return TC_OK;
    *out = h;
    /* Cleared on the legacy stream, then waited for: a later kernel on any stream sees it clear. */
    s = cu_check(cudaMemsetAsync(w, 0xff, sizeof *w, 0), "cuda devcheck_take: clear the error word");
    if (!s) s = cu_check(cudaStreamSynchronize(0), "cuda devcheck_take: clear the error word");
    return s;
}

tc_status cu_capture_begin(int dev, void *stream)
{
    tc_status s = use(dev, "cuda capture_begin");
    if (s) return s;
    if (!stream)
        return cu_fail(TC_ERR_ARG, "cuda capture_begin: the legacy default stream cannot be captured; capture on a "
                                   "stream from stream_create");
    if (t_cap[dev]) return cu_fail(TC_ERR_ARG, "cuda capture_begin: this thread already captures on cuda:%d", dev);
    if (t_stream[dev] != (cudaStream_t)stream)
        return cu_fail(TC_ERR_ARG, "cuda capture_begin: the stream to capture must be the current stream of cuda:%d",
                       dev);
    cu_graph *g = (cu_graph *)calloc(1, sizeof *g);
    if (!g) return cu_fail(TC_ERR_MEMORY, "cuda capture_begin: no host memory");
    g->dev = dev;
    g->stream = (cudaStream_t)stream;
    s = cu_check(cudaHostAlloc((void **)&g->staging, STAGING_BYTES, cudaHostAllocPortable),
                 "cuda capture_begin: page-locked staging memory");
    if (!s) s = cu_pool_open(dev, &g->pool);
    if (!s) s = devcheck_make(dev);
    /* An idle cuBLAS and cuDNN handle for dev, made now if the pools are empty: made inside
     * the capture they would allocate device memory there. A library that cannot make one
     * says so at its first op (a capture without products or convolutions needs none). */
    if (!s) {
        cu_blas_warm(dev);
        cu_dnn_warm(dev);
    }
    if (!s) s = cu_check(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal), "cuda capture_begin");
    if (s) {
        graph_free_parts(g);
        return s;
    }
    t_cap[dev] = g;
    t_ncap++;
    __atomic_add_fetch(&g_ncap_dev[dev], 1, __ATOMIC_ACQ_REL);
    return TC_OK;
}

tc_status cu_capture_end(int dev, void *stream, void **graph)
{
    if (!graph) return cu_fail(TC_ERR_ARG, "cuda capture_end: NULL result");
    *graph = nullptr;
    tc_status s = use(dev, "cuda capture_end");
    if (s) return s;
    cu_graph *g = t_cap[dev];
    if (!g) return cu_fail(TC_ERR_ARG, "cuda capture_end: this thread has no capture open on cuda:%d", dev);
    if (g->stream != (cudaStream_t)stream)
        return cu_fail(TC_ERR_ARG, "cuda capture_end: cuda:%d captures another stream", dev);
    /* From here the capture is over, whatever happens. */
    t_cap[dev] = nullptr;
    t_ncap--;
    __atomic_sub_fetch(&g_ncap_dev[dev], 1, __ATOMIC_ACQ_REL);
    free(g->recorded);
    g->recorded = nullptr, g->nrec = g->caprec = 0;
    s = cu_check(cudaStreamEndCapture(g->stream, &g->graph), "cuda capture_end");
    if (!s) s = cu_check(cudaGraphInstantiate(&g->exec, g->graph, 0), "cuda capture_end: instantiate the graph");
    if (!s) s = cu_check(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming), "cuda capture_end: an event");
    if (s) {
        /* Nothing of the partial graph ran; its pool goes back as its blocks are freed. */
        if (g->exec) (void)cudaGraphExecDestroy(g->exec);
        if (g->graph) (void)cudaGraphDestroy(g->graph);
        (void)cudaGetLastError();
        graph_free_parts(g);
        return s;
    }
    *graph = g;
    return TC_OK;
}

tc_status cu_graph_launch(int dev, void *graph, void *stream)
{
    cu_graph *g = (cu_graph *)graph;
    if (!g) return cu_fail(TC_ERR_ARG, "cuda graph_launch: NULL graph");
    if (g->dev != dev) return cu_fail(TC_ERR_ARG, "cuda graph_launch: the graph is of cuda:%d, not cuda:%d", g->dev, dev);
    tc_status s = use(dev, "cuda graph_launch");
    if (!s && cu_capturing(dev))
        s = cu_fail(TC_ERR_UNSUPPORTED, "cuda graph_launch: cannot replay a graph while capturing another on cuda:%d",
                    dev);
    if (!s && cu_devcheck_word(dev)) __atomic_store_n(&g_armed[dev], 1, __ATOMIC_RELEASE);
    if (!s) s = cu_check(cudaGraphLaunch(g->exec, (cudaStream_t)stream), "cuda graph_launch");
    /* launches of one graph run in order, so the last one's event covers them all */
    if (!s) s = cu_check(cudaEventRecord(g->done, (cudaStream_t)stream), "cuda graph_launch: record");
    if (!s) g->launched = true;
    return s;
}

tc_status cu_graph_destroy(int dev, void *graph)
{
    cu_graph *g = (cu_graph *)graph;
    if (!g) return TC_OK;
    if (g->dev != dev) return cu_fail(TC_ERR_ARG, "cuda graph_destroy: the graph is of cuda:%d, not cuda:%d", g->dev, dev);
    tc_status s = use(dev, "cuda graph_destroy");
    if (!s && cu_capturing_any())
        s = cu_fail(TC_ERR_UNSUPPORTED, "cuda graph_destroy: cannot wait for replays to finish while this thread "
                                        "captures a CUDA graph");
    /* A replay may still run: its pool and staging memory go back only after it. Its own
     * event, not the device: a device-wide wait would break another thread's capture. */
    if (!s && g->launched) s = cu_check(cudaEventSynchronize(g->done), "cuda graph_destroy: synchronize");
    if (s) return s;
    (void)cudaGraphExecDestroy(g->exec);
    (void)cudaGraphDestroy(g->graph);
    graph_free_parts(g);
    return TC_OK;
}

tc_status cu_is_capturing(int dev, int *yes)
{
    if (!yes) return cu_fail(TC_ERR_ARG, "cuda is_capturing: NULL result");
    *yes = cu_capturing(dev) ? 1 : 0;
    return TC_OK;
}
