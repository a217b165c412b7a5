/* cuda_stream.c -- libtocha's side of CUDA streams, events, pinned host memory,
 * non_blocking copies and CUDA graph capture (the tc_cuda_stream_* / event_* / graph_*
 * entry points of tocha.h, over the version-4 members of the backend table, cuda_api.h).
 *
 * State kept here, per thread and device (as PyTorch keeps it): the current stream (a
 * reference is held while current) and the open capture, if any. The capture state is what
 * the rest of libtocha asks through tc_cuda_capturing / tc_cuda_capture_refuse: code that
 * would read device values on the host, fall back to a CPU kernel, synchronise or draw
 * random numbers refuses while a capture is open, and the refusal is remembered so that
 * tc_cuda_graph_end never hands out a graph that silently lacks the refused work.
 *
 * Things freed during a capture that would have to wait for the device (a graph, a
 * stream) are queued on the capture and freed when it ends.
 *
 * Random ops in a capture (PyTorch's scheme): each capture gets a 16-byte device pair
 * {Philox key, first slot}, made before the backend's capture begins, and draws from one
 * generator: the thread's capture generator when the capture began (the process default
 * unless tc_cuda_set_capture_generator chose another: the Lua state's default generator,
 * from Lua). A captured draw from it reads the pair when it runs, at its offset among the
 * capture's draws (tc_cuda_capture_philox, called by cuda_backend.c), and leaves the
 * generator alone; a draw from any other generator is refused. The graph keeps the pair,
 * the generator and the number of slots its draws use; each replay reserves that many slots
 * from the generator (exactly what the same ops would reserve eagerly, one after another)
 * and, on the replay stream ahead of the graph, copies the new pair into the device pair
 * through the page-locked ring of host scalars (philox_write, cuda_scalars.c). A replay
 * thus draws fresh numbers, the numbers an eager run would draw from the same generator
 * state, and leaves the generator where the eager run would. The generator must outlive the graph's replays. CUDA orders the launches
 * of one graph, on whatever streams, but not a copy on another stream behind them: so the
 * replay stream first waits for the graph's previous launch (launched_ev, philox_write).
 */
#include "internal.h"
#include "cuda/cuda_api.h"
#include "cuda_record.h"
#include "philox.h"
#include <stdio.h>
#include <stdlib.h>

#define MAXDEV 32 /* as the backend's allocator (CA_MAX_DEVICES) */

struct tc_cuda_stream {
    int32_t refcount; /* atomic; the default streams are static and never counted */
    int dev;
    int is_default;
    void *handle; /* the backend's (NULL for the default stream) */
    int captured; /* atomic: a thread captures it (tc_cuda_stream_captured, cuda_record.h) */
};

struct tc_cuda_event {
    int dev, timing, recorded;
    void *handle;
};

struct tc_cuda_graph {
    int dev;
    void *handle;
    uint64_t *philox_key;     /* device {key, first slot} its draws read; NULL: it draws nothing */
    uint64_t philox_slots;    /* slots a replay reserves ... */
    tc_generator *philox_gen; /* ... from this generator */
    void *launched_ev;        /* recorded after each launch (graphs that draw) */
    uint64_t replays;
};

/* Something whose release waits for the device, held back until the capture ends. */
typedef struct deferred {
    tc_cuda_stream *stream;
    tc_cuda_graph *graph;
} deferred;

typedef struct capture {
    int open;
    tc_cuda_stream *stream, *prev; /* the captured stream; the current one before it */
    tc_status failed;              /* the first refusal during the capture */
    char why[512];
    deferred *later;
    size_t nlater, caplater;
    uint64_t *philox_key;     /* the capture's device pair (16 bytes from the allocator) */
    uint64_t philox_slots;    /* slots used by the draws captured so far */
    tc_generator *philox_gen; /* the generator the capture's draws are from */
} capture;

static tc_cuda_stream g_default[MAXDEV];
static _Thread_local tc_cuda_stream *t_current[MAXDEV]; /* NULL: the default stream */
static _Thread_local tc_cuda_stream *t_side[MAXDEV];    /* the capture stream graph_begin(NULL) uses */
static _Thread_local capture t_cap[MAXDEV];
static _Thread_local tc_generator *t_capgen; /* tc_cuda_set_capture_generator; NULL: the default */

/* The table for dev, with op in messages ("cuda <op>: no device 3 (2 devices)"). */
static tc_status need(const char *op, int dev, const tc_cuda_api **api)
{
    TRY(tc_cuda_need(op, dev, api));
    if (dev >= MAXDEV) return tc_set_error(TC_ERR_ARG, "cuda %s: device %d is beyond the %d supported", op, dev, MAXDEV);
    return TC_OK;
}

/* ---- capture state, as the rest of libtocha sees it --------------------------------------- */

int tc_cuda_capturing(int dev) { return dev >= 0 && dev < MAXDEV && t_cap[dev].open; }

int tc_cuda_stream_captured(const tc_cuda_stream *s) { return s && __atomic_load_n(&s->captured, __ATOMIC_RELAXED); }

int tc_cuda_is_capturing(int dev) { return tc_cuda_capturing(dev); }

static int capturing_any(int *dev)
{
    for (int d = 0; d < MAXDEV; d++)
        if (t_cap[d].open) {
            if (dev) *dev = d;
            return 1;
        }
    return 0;
}

/* Remembers the current error as the capture's failure (the first one wins). */
static void mark_failed(int dev, tc_status code)
{
    capture *c = &t_cap[dev];
    if (!c->open || c->failed) return;
    c->failed = code;
    snprintf(c->why, sizeof c->why, "%s", tc_last_error());
}

tc_status tc_cuda_capture_refuse(const char *op, int device, const char *what, const char *why)
{
    int dev = -1;
    if (device == TC_CPU) {
        if (!capturing_any(&dev)) return TC_OK;
    } else {
        dev = TC_DEVICE_ORDINAL(device);
        if (!tc_cuda_capturing(dev)) return TC_OK;
    }
    tc_status s = tc_set_error(TC_ERR_UNSUPPORTED, "%s: cannot %s while a CUDA graph is being captured on cuda:%d (%s)",
                               op, what, dev, why);
    mark_failed(dev, s);
    return s;
}

/* A backend failure seen while capturing also fails the capture (cuda_loader.c calls this
 * from tc_cuda_backend_status): the op it belonged to is missing from the graph. */
void tc_cuda_capture_note_failure(tc_status s)
{
    int dev;
    if (s && capturing_any(&dev)) mark_failed(dev, s);
}

/* Device-side index checks (cuda_api.h version 5): work captured in a CUDA graph checks its
 * indices on the device, and the first bad one waits in the device's error word until the
 * host next waits for the device anyway (no extra synchronisation is ever added for it). */
tc_status tc_cuda_waited(const tc_cuda_api *api, int dev, tc_status s)
{
    TRY(tc_cuda_backend_status(api, s));
    tc_cuda_devcheck e;
    TRY(tc_cuda_backend_status(api, api->devcheck_take(dev, &e)));
    if (e.op < 0) return TC_OK;
    const char *name = e.op < TC_OP_COUNT ? tc_op_info((tc_op)e.op)->name : "an index op";
    return tc_set_error(TC_ERR_INDEX,
                        "%s: index %lld is out of range for dim %d of size %lld (found on the device during a CUDA "
                        "graph replay on cuda:%d)",
                        name, (long long)e.value, (int)e.dim, (long long)e.size, dev);
}

void tc_cuda_set_capture_generator(tc_generator *gen) { t_capgen = gen; }

int tc_cuda_capture_philox(int dev, const tc_generator *gen, uint64_t nslots, const uint64_t **key, uint64_t *base)
{
    if (!tc_cuda_capturing(dev) || !t_cap[dev].philox_key) return 0;
    if ((gen ? gen : tc_generator_default()) != t_cap[dev].philox_gen) return -1;
    *key = t_cap[dev].philox_key;
    *base = t_cap[dev].philox_slots;
    t_cap[dev].philox_slots += nslots;
    return 1;
}

static tc_status defer(int dev, tc_cuda_stream *s, tc_cuda_graph *g)
{
    capture *c = &t_cap[dev];
    if (c->nlater == c->caplater) {
        size_t cap = c->caplater ? c->caplater * 2 : 8;
        deferred *v = realloc(c->later, cap * sizeof *v);
        if (!v) return tc_set_error(TC_ERR_MEMORY, "cuda: no host memory to defer a release past the capture");
        c->later = v;
        c->caplater = cap;
    }
    c->later[c->nlater++] = (deferred){s, g};
    return TC_OK;
}

/* ---- streams ---------------------------------------------------------------------------- */

tc_cuda_stream *tc_cuda_default_stream(int dev)
{
    if (dev < 0 || dev >= MAXDEV || dev >= tc_cuda_device_count()) return NULL;
    tc_cuda_stream *s = &g_default[dev];
    s->dev = dev; /* idempotent: every thread writes the same values */
    s->is_default = 1;
    return s;
}

tc_status tc_cuda_stream_new(int dev, tc_cuda_stream **out)
{
    const tc_cuda_api *api;
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda stream_new: NULL result");
    *out = NULL;
    TRY(need("stream_new", dev, &api));
    tc_cuda_stream *s = tc_malloc(sizeof *s, "cuda stream_new");
    if (!s) return TC_ERR_MEMORY;
    *s = (tc_cuda_stream){.refcount = 1, .dev = dev};
    tc_status st = tc_cuda_backend_status(api, api->stream_create(dev, &s->handle));
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return TC_OK;
}

void tc_cuda_stream_retain(tc_cuda_stream *s)
{
    if (s && !s->is_default) __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
}

void tc_cuda_stream_free(tc_cuda_stream *s)
{
    const tc_cuda_api *api;
    if (!s || s->is_default || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    int dev;
    /* Destroying waits for the stream's work: not inside a capture (then at its end). */
    if (capturing_any(&dev) && defer(dev, s, NULL) == TC_OK) return;
    if (tc_cuda_need("stream_free", s->dev, &api) == TC_OK) (void)api->stream_destroy(s->dev, s->handle);
    free(s);
}

tc_cuda_stream *tc_cuda_current_stream(int dev)
{
    if (dev < 0 || dev >= MAXDEV) return NULL;
    return t_current[dev] ? t_current[dev] : tc_cuda_default_stream(dev);
}

int tc_cuda_stream_device(const tc_cuda_stream *s) { return s ? s->dev : -1; }

int tc_cuda_stream_is_default(const tc_cuda_stream *s) { return s && s->is_default; }

void *tc_cuda_stream_handle(int dev)
{
    return dev >= 0 && dev < MAXDEV && t_current[dev] ? t_current[dev]->handle : NULL;
}

/* Makes s (NULL or a default stream: the default) current on dev, references moved. */
static tc_status set_current(const tc_cuda_api *api, int dev, tc_cuda_stream *s)
{
    if (s && s->is_default) s = NULL;
    TRY(tc_cuda_backend_status(api, api->set_stream(dev, s ? s->handle : NULL)));
    tc_cuda_stream *old = t_current[dev];
    tc_cuda_stream_retain(s);
    t_current[dev] = s;
    tc_cuda_stream_free(old);
    return TC_OK;
}

tc_status tc_cuda_set_stream(int dev, tc_cuda_stream *s)
{
    const tc_cuda_api *api;
    TRY(need("set_stream", dev, &api));
    if (s && s->dev != dev)
        return tc_set_error(TC_ERR_DEVICE, "cuda set_stream: the stream belongs to cuda:%d, not cuda:%d", s->dev, dev);
    tc_cuda_stream *cur = tc_cuda_current_stream(dev);
    if (tc_cuda_capturing(dev) && (s ? s : tc_cuda_default_stream(dev)) != cur)
        return tc_cuda_capture_refuse("cuda set_stream", TC_DEVICE_CUDA(dev), "change the current stream",
                                      "the captured stream stays current until the capture ends");
    return set_current(api, dev, s);
}

tc_status tc_cuda_stream_sync(tc_cuda_stream *s)
{
    const tc_cuda_api *api;
    if (!s) return tc_set_error(TC_ERR_ARG, "cuda stream synchronize: NULL stream");
    TRY(need("stream synchronize", s->dev, &api));
    TRY(tc_cuda_capture_refuse("cuda stream synchronize", TC_DEVICE_CUDA(s->dev), "wait for a stream",
                               "a host wait cannot be recorded in a graph"));
    return tc_cuda_waited(api, s->dev, api->stream_synchronize(s->dev, s->handle));
}

tc_status tc_cuda_stream_query(tc_cuda_stream *s, int *done)
{
    const tc_cuda_api *api;
    if (!s || !done) return tc_set_error(TC_ERR_ARG, "cuda stream query: NULL stream or result");
    *done = 0;
    TRY(need("stream query", s->dev, &api));
    TRY(tc_cuda_capture_refuse("cuda stream query", TC_DEVICE_CUDA(s->dev), "query a stream",
                               "a stream under capture has not run anything"));
    return tc_cuda_backend_status(api, api->stream_query(s->dev, s->handle, done));
}

/* ---- events ----------------------------------------------------------------------------- */

tc_status tc_cuda_event_new(int dev, int timing, tc_cuda_event **out)
{
    const tc_cuda_api *api;
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda event_new: NULL result");
    *out = NULL;
    TRY(need("event_new", dev, &api));
    tc_cuda_event *e = tc_malloc(sizeof *e, "cuda event_new");
    if (!e) return TC_ERR_MEMORY;
    *e = (tc_cuda_event){.dev = dev, .timing = timing != 0};
    tc_status st = tc_cuda_backend_status(api, api->event_create(dev, e->timing, &e->handle));
    if (st) {
        free(e);
        return st;
    }
    *out = e;
    return TC_OK;
}

void tc_cuda_event_free(tc_cuda_event *e)
{
    const tc_cuda_api *api;
    if (!e) return;
    if (tc_cuda_need("event_free", e->dev, &api) == TC_OK) (void)api->event_destroy(e->dev, e->handle);
    free(e);
}

/* The stream an event call names: s, or the current stream of the event's device. */
static tc_status event_stream(const char *op, const tc_cuda_event *e, tc_cuda_stream *s, tc_cuda_stream **out)
{
    if (!s) s = tc_cuda_current_stream(e->dev);
    if (!s) return tc_set_error(TC_ERR_ARG, "cuda %s: no device %d", op, e->dev);
    if (s->dev != e->dev)
        return tc_set_error(TC_ERR_DEVICE, "cuda %s: the event belongs to cuda:%d but the stream to cuda:%d", op,
                            e->dev, s->dev);
    *out = s;
    return TC_OK;
}

tc_status tc_cuda_event_record(tc_cuda_event *e, tc_cuda_stream *s)
{
    const tc_cuda_api *api;
    if (!e) return tc_set_error(TC_ERR_ARG, "cuda event record: NULL event");
    TRY(need("event record", e->dev, &api));
    TRY(event_stream("event record", e, s, &s));
    TRY(tc_cuda_backend_status(api, api->event_record(e->dev, e->handle, s->handle)));
    e->recorded = 1;
    return TC_OK;
}

tc_status tc_cuda_event_wait(tc_cuda_event *e, tc_cuda_stream *s)
{
    const tc_cuda_api *api;
    if (!e) return tc_set_error(TC_ERR_ARG, "cuda event wait: NULL event");
    TRY(need("event wait", e->dev, &api));
    TRY(event_stream("event wait", e, s, &s));
    if (!e->recorded) return TC_OK; /* nothing to wait for, as in CUDA */
    return tc_cuda_backend_status(api, api->event_wait(e->dev, s->handle, e->handle));
}

tc_status tc_cuda_event_sync(tc_cuda_event *e)
{
    const tc_cuda_api *api;
    if (!e) return tc_set_error(TC_ERR_ARG, "cuda event synchronize: NULL event");
    TRY(need("event synchronize", e->dev, &api));
    if (!e->recorded) return TC_OK;
    TRY(tc_cuda_capture_refuse("cuda event synchronize", TC_DEVICE_CUDA(e->dev), "wait for an event",
                               "a host wait cannot be recorded in a graph"));
    return tc_cuda_waited(api, e->dev, api->event_synchronize(e->dev, e->handle));
}

tc_status tc_cuda_event_query(tc_cuda_event *e, int *done)
{
    const tc_cuda_api *api;
    if (!e || !done) return tc_set_error(TC_ERR_ARG, "cuda event query: NULL event or result");
    *done = 1;
    TRY(need("event query", e->dev, &api));
    if (!e->recorded) return TC_OK;
    *done = 0;
    TRY(tc_cuda_capture_refuse("cuda event query", TC_DEVICE_CUDA(e->dev), "query an event",
                               "work under capture has not run"));
    return tc_cuda_backend_status(api, api->event_query(e->dev, e->handle, done));
}

tc_status tc_cuda_event_elapsed(tc_cuda_event *start, tc_cuda_event *end, float *ms)
{
    const tc_cuda_api *api;
    if (!start || !end || !ms) return tc_set_error(TC_ERR_ARG, "cuda event elapsed_time: NULL event or result");
    *ms = 0;
    if (start->dev != end->dev)
        return tc_set_error(TC_ERR_DEVICE, "cuda event elapsed_time: events of cuda:%d and cuda:%d", start->dev,
                            end->dev);
    if (!start->timing || !end->timing)
        return tc_set_error(TC_ERR_ARG, "cuda event elapsed_time: both events need timing (created with "
                                        "enable_timing)");
    if (!start->recorded || !end->recorded)
        return tc_set_error(TC_ERR_ARG, "cuda event elapsed_time: the %s event was never recorded",
                            start->recorded ? "end" : "start");
    TRY(need("event elapsed_time", start->dev, &api));
    return tc_cuda_backend_status(api, api->event_elapsed(start->dev, start->handle, end->handle, ms));
}

/* ---- graphs ----------------------------------------------------------------------------- */

tc_status tc_cuda_graph_begin(int dev, tc_cuda_stream *s)
{
    const tc_cuda_api *api;
    TRY(need("graph capture_begin", dev, &api));
    if (tc_cuda_capturing(dev))
        return tc_set_error(TC_ERR_ARG, "cuda graph capture_begin: this thread already captures on cuda:%d", dev);
    if (s && s->is_default)
        return tc_set_error(TC_ERR_ARG, "cuda graph capture_begin: the default stream of cuda:%d cannot be captured; "
                                        "pass a stream from tc_cuda_stream_new (or NULL for a side stream)",
                            dev);
    if (s && s->dev != dev)
        return tc_set_error(TC_ERR_DEVICE, "cuda graph capture_begin: the stream belongs to cuda:%d, not cuda:%d",
                            s->dev, dev);
    if (!s) {
        if (!t_side[dev]) TRY(tc_cuda_stream_new(dev, &t_side[dev]));
        s = t_side[dev];
    }
    /* Work queued before the capture (on any stream) finishes first, as PyTorch's graph
     * context does: the graph's first kernels may read what it wrote. */
    TRY(tc_cuda_waited(api, dev, api->synchronize(dev)));
    /* The Philox pair of the capture's random draws, from the ordinary allocator before the
     * capture (outside its private pool): the graph keeps it, and frees it after its replays
     * have finished (graph_destroy waits for the device). */
    void *key = NULL;
    TRY(tc_cuda_backend_status(api, api->alloc(dev, 2 * sizeof(uint64_t), &key)));
    tc_cuda_stream *prev = t_current[dev];
    tc_cuda_stream_retain(prev);
    tc_status st = set_current(api, dev, s);
    if (!st) {
        /* the mark and the capture's start are one step for cuda_record.c's releases */
        tc_cuda_record_lock(1);
        __atomic_store_n(&s->captured, 1, __ATOMIC_RELAXED);
        st = tc_cuda_backend_status(api, api->capture_begin(dev, s->handle));
        if (st) __atomic_store_n(&s->captured, 0, __ATOMIC_RELAXED);
        tc_cuda_record_lock(0);
    }
    if (st) {
        tc_status e = st;
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        (void)set_current(api, dev, prev);
        tc_cuda_stream_free(prev);
        (void)api->release(dev, key);
        return tc_set_error(e, "%s", msg);
    }
    tc_cuda_stream_retain(s);
    capture *c = &t_cap[dev];
    c->open = 1;
    c->stream = s;
    c->prev = prev;
    c->failed = TC_OK;
    c->why[0] = '\0';
    c->philox_key = key;
    c->philox_slots = 0;
    c->philox_gen = t_capgen ? t_capgen : tc_generator_default();
    return TC_OK;
}

tc_status tc_cuda_graph_end(int dev, tc_cuda_graph **out)
{
    const tc_cuda_api *api;
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda graph capture_end: NULL result");
    *out = NULL;
    TRY(need("graph capture_end", dev, &api));
    capture *c = &t_cap[dev];
    if (!c->open) return tc_set_error(TC_ERR_ARG, "cuda graph capture_end: this thread has no capture open on cuda:%d", dev);
    void *h = NULL;
    tc_status st = api->capture_end(dev, c->stream->handle, &h);
    __atomic_store_n(&c->stream->captured, 0, __ATOMIC_RELAXED);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", st ? api->last_error() : "");
    /* The capture is over whatever happened: the previous stream is current again, and what
     * was held back is released. */
    c->open = 0;
    (void)set_current(api, dev, c->prev);
    tc_cuda_stream_free(c->prev);
    tc_cuda_stream_free(c->stream);
    c->prev = c->stream = NULL;
    deferred *later = c->later;
    size_t nlater = c->nlater;
    c->later = NULL;
    c->nlater = c->caplater = 0;
    for (size_t i = 0; i < nlater; i++) {
        if (later[i].graph) tc_cuda_graph_free(later[i].graph);
        if (later[i].stream) { /* its count already reached zero */
            later[i].stream->refcount = 1;
            tc_cuda_stream_free(later[i].stream);
        }
    }
    free(later);
    uint64_t *key = c->philox_key, slots = c->philox_slots;
    c->philox_key = NULL;
    c->philox_slots = 0;
    /* The pair goes back unless the graph's draws read it (no graph: nothing reads it). */
    if (c->failed) {
        if (h) (void)api->graph_destroy(dev, h);
        (void)api->release(dev, key);
        return tc_set_error(c->failed, "cuda graph capture on cuda:%d failed, no graph was made: %s", dev, c->why);
    }
    if (st) {
        (void)api->release(dev, key);
        return tc_set_error(st, "cuda graph capture on cuda:%d failed, no graph was made: %s", dev, msg);
    }
    tc_cuda_graph *g = tc_malloc(sizeof *g, "cuda graph capture_end");
    if (!g) {
        (void)api->graph_destroy(dev, h);
        (void)api->release(dev, key);
        return TC_ERR_MEMORY;
    }
    if (slots == 0) {
        (void)api->release(dev, key);
        key = NULL;
    }
    *g = (tc_cuda_graph){
        .dev = dev, .handle = h, .philox_key = key, .philox_slots = slots, .philox_gen = c->philox_gen};
    *out = g;
    return TC_OK;
}

/* Before replay n of g: its generator's next philox_slots slots, written into the
 * graph's device pair by a copy queued on the replay stream (so it lands after the previous
 * replay's draws and before this one's), through the page-locked ring of host scalars
 * (cuda_scalars.c: no host wait). The copy itself waits for the graph's previous launch
 * (launched_ev), which may be on another stream and still drawing from the pair; on the
 * same stream the wait costs nothing. */
static tc_status philox_write(const tc_cuda_api *api, tc_cuda_graph *g)
{
    int dev = g->dev;
    if (!g->launched_ev) /* the first replay */
        TRY(tc_cuda_backend_status(api, api->event_create(dev, 0, &g->launched_ev)));
    else /* the previous launch may be pending on another stream, still reading the pair */
        TRY(tc_cuda_backend_status(api, api->event_wait(dev, tc_cuda_stream_handle(dev), g->launched_ev)));
    uint64_t pair[2];
    pair[1] = tc_generator_reserve(g->philox_gen, g->philox_slots, &pair[0]);
    return tc_cuda_scalars_copy(TC_DEVICE_CUDA(dev), g->philox_key, pair, sizeof pair);
}

tc_status tc_cuda_graph_replay(tc_cuda_graph *g)
{
    const tc_cuda_api *api;
    if (!g) return tc_set_error(TC_ERR_ARG, "cuda graph replay: NULL graph");
    TRY(need("graph replay", g->dev, &api));
    TRY(tc_cuda_capture_refuse("cuda graph replay", TC_DEVICE_CUDA(g->dev), "replay a graph",
                               "graphs are not nested"));
    /* A replay that fails leaves the generator as it was. */
    uint8_t saved[64];
    size_t saved_n = 0;
    tc_status st = TC_OK;
    if (g->philox_slots) {
        saved_n = tc_generator_get_state(g->philox_gen, saved, sizeof saved);
        st = philox_write(api, g);
    }
    void *stream = tc_cuda_stream_handle(g->dev);
    if (!st) st = tc_cuda_backend_status(api, api->graph_launch(g->dev, g->handle, stream));
    /* Without the event a later replay on another stream could not wait for this one: then
     * this one is waited for now. */
    if (!st && g->philox_slots && api->event_record(g->dev, g->launched_ev, stream) != TC_OK)
        st = tc_cuda_backend_status(api, api->stream_synchronize(g->dev, stream));
    if (st && g->philox_slots && saved_n <= sizeof saved) {
        tc_status e = st;
        char msg[600];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        (void)tc_generator_set_state(g->philox_gen, saved, saved_n);
        return tc_set_error(e, "%s", msg);
    }
    if (!st) g->replays++;
    return st;
}

void tc_cuda_graph_free(tc_cuda_graph *g)
{
    const tc_cuda_api *api;
    if (!g) return;
    int dev;
    /* Freeing waits for its replays: not inside a capture (then at its end). */
    if (capturing_any(&dev) && defer(dev, NULL, g) == TC_OK) return;
    if (tc_cuda_need("graph free", g->dev, &api) == TC_OK) {
        /* graph_destroy waited for the replays, so their copies and draws are done; if it
         * failed, a replay may still read the pair: it is left allocated. */
        if (api->graph_destroy(g->dev, g->handle) == TC_OK) {
            if (g->launched_ev) (void)api->event_destroy(g->dev, g->launched_ev);
            (void)api->release(g->dev, g->philox_key);
        }
    }
    free(g);
}

int tc_cuda_graph_device(const tc_cuda_graph *g) { return g ? g->dev : -1; }

/* ---- pinned host memory and non_blocking copies ------------------------------------------ */

static void pinned_free(void *data, void *ctx)
{
    const tc_cuda_api *api;
    (void)ctx;
    /* A storage outlives nothing it could report to (as device_free in cuda_backend.c). */
    if (data && tc_cuda_api_get(&api) == TC_OK) (void)api->host_release(data);
}

int tc_tensor_is_pinned(const tc_tensor *t)
{
    return t && t->device == TC_CPU && t->storage && t->storage->deleter == pinned_free;
}

/* A contiguous host tensor of (dtype, t's sizes) in fresh pinned memory. */
static tc_status pinned_like(const char *op, const tc_tensor *t, tc_dtype dt, tc_tensor **out)
{
    const tc_cuda_api *api;
    TRY(tc_cuda_api_get(&api));
    int64_t nbytes = tc_numel_of(t->ndim, t->size) * tc_elsize(dt);
    void *p = NULL;
    TRY(tc_cuda_backend_status(api, api->host_alloc((size_t)nbytes, &p)));
    tc_storage *s;
    tc_status st = tc_storage_adopt(p, nbytes, TC_CPU, pinned_free, NULL, &s);
    if (st) {
        (void)api->host_release(p);
        return st;
    }
    int64_t stride[TC_MAX_DIMS];
    tc_contiguous_strides(t->ndim, t->size, stride);
    st = tc_tensor_new_view(s, dt, 0, t->ndim, t->size, stride, out);
    tc_storage_release(s);
    (void)op;
    return st;
}

tc_status tc_tensor_pin(const tc_tensor *t, tc_tensor **out)
{
    char b[32], d[16];
    if (!t || !out) return tc_set_error(TC_ERR_ARG, "pin_memory: NULL argument");
    *out = NULL;
    if (t->device != TC_CPU)
        return tc_set_error(TC_ERR_DEVICE, "pin_memory: the tensor of size %s is on %s; only host tensors are pinned",
                            tc_shape_str(t, b, sizeof b), tc_device_str(t->device, d, sizeof d));
    if (tc_tensor_is_pinned(t) && tc_tensor_is_contiguous(t)) {
        tc_tensor_retain((tc_tensor *)t);
        *out = (tc_tensor *)t;
        return TC_OK;
    }
    tc_tensor *r;
    TRY(pinned_like("pin_memory", t, (tc_dtype)t->dtype, &r));
    if (tc_tensor_numel(t) > 0) {
        const tc_tensor *in[1] = {t};
        tc_tensor *res[1] = {r};
        tc_status st = tc_op_exec(TC_OP_COPY, in, 1, NULL, res, 1);
        if (st) {
            tc_tensor_release(r);
            return st;
        }
    }
    *out = r;
    return TC_OK;
}

/* Pinned host t -> device: the byte span t occupies crosses asynchronously into device
 * memory of the same layout; a dtype change or a strided layout is then a device copy
 * (a kernel on the same stream, so asynchronous too). */
static tc_status pinned_to_device(const tc_cuda_api *api, const tc_tensor *t, int device, int dt, tc_tensor **out)
{
    int dev = TC_DEVICE_ORDINAL(device);
    int64_t lo, hi;
    tc_tensor_byte_span(t, &lo, &hi);
    tc_storage *s;
    TRY(tc_cuda_storage_alloc(device, hi - lo, false, &s));
    tc_status st = tc_cuda_backend_status(api, api->copy_h2d_async(dev, s->data, (char *)t->storage->data + lo,
                                                                   (size_t)(hi - lo)));
    tc_tensor *v = NULL;
    if (!st) st = tc_tensor_new_view(s, (tc_dtype)t->dtype, t->offset - lo / tc_elsize(t->dtype), t->ndim, t->size,
                                     t->stride, &v);
    tc_storage_release(s);
    if (st) return st;
    if (dt == t->dtype && tc_tensor_is_contiguous(v)) {
        *out = v;
        return TC_OK;
    }
    st = tc_tensor_to(v, device, dt, out);
    tc_tensor_release(v);
    return st;
}

/* Device t -> a pinned host tensor, queued on the current stream and not waited for. */
static tc_status device_to_pinned(const tc_cuda_api *api, const tc_tensor *t, int dt, tc_tensor **out)
{
    int dev = TC_DEVICE_ORDINAL(t->device);
    TRY(tc_cuda_capture_refuse("to (non_blocking)", t->device, "copy to the host",
                               "a graph cannot hand values to the host; copy after replaying"));
    tc_tensor *c = (tc_tensor *)t;
    if (dt != t->dtype || !tc_tensor_is_contiguous(t)) TRY(tc_tensor_to(t, t->device, dt, &c));
    else tc_tensor_retain(c);
    tc_tensor *r;
    tc_status st = pinned_like("to (non_blocking)", t, (tc_dtype)dt, &r);
    if (!st && tc_tensor_numel(r) > 0) {
        st = tc_cuda_backend_status(api, api->copy_d2h_async(dev, r->storage->data, tc_base(c),
                                                             (size_t)(tc_tensor_numel(r) * tc_elsize(dt))));
        if (st) tc_tensor_release(r);
    }
    /* c's block goes back to the current stream's cache: reused only after the copy. */
    tc_tensor_release(c);
    if (!st) *out = r;
    return st;
}

tc_status tc_tensor_to_async(const tc_tensor *t, int device, int dt, tc_tensor **out)
{
    const tc_cuda_api *api;
    if (!t || !out) return tc_set_error(TC_ERR_ARG, "to (non_blocking): NULL argument");
    *out = NULL;
    if (dt < -1 || dt >= TC_DTYPE_COUNT) return tc_set_error(TC_ERR_DTYPE, "to (non_blocking): invalid dtype %d", dt);
    if (dt < 0) dt = t->dtype;
    bool h2d = t->device == TC_CPU && TC_DEVICE_IS_CUDA(device), d2h = TC_DEVICE_IS_CUDA(t->device) && device == TC_CPU;
    if (!t->storage || tc_tensor_numel(t) == 0 || !(h2d || d2h) || (h2d && !tc_tensor_is_pinned(t)))
        return tc_tensor_to(t, device, dt, out); /* nothing to overlap, or pageable: synchronous */
    TRY(tc_cuda_check_device("to (non_blocking)", h2d ? device : t->device));
    TRY(tc_cuda_api_get(&api));
    return h2d ? pinned_to_device(api, t, device, dt, out) : device_to_pinned(api, t, dt, out);
}
