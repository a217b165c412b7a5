/* cuda_record.c -- PyTorch's Tensor.record_stream (tc_tensor_record_stream, tocha.h) on
 * libtocha's side, with no change to the backend table.
 *
 * The caching allocator files a block under the stream it was allocated on and, once the
 * block is released, hands it out again only on that stream: work queued there on the old
 * contents is ordered before any new use. A block that is also used on another stream
 * (a side stream consuming a tensor made on the default one) would be reused while that
 * stream may still read it. record_stream names such streams; then, when the storage's
 * memory is released:
 *  - an event is recorded on each recorded stream (the work queued there up to the free),
 *    and the backend release is deferred until all of them have completed;
 *  - the deferred blocks of a device are polled (event query, no wait) at the next
 *    allocation or release on that device, and drained (waited for) by tc_cuda_synchronize,
 *    tc_cuda_empty_cache and an allocation that ran out of memory (drain, then retry).
 * While this thread captures a CUDA graph on the device (PyTorch's rule): record_stream is
 * allowed (bookkeeping only); a block released during the capture waits with its events
 * unrecorded (a record on the captured stream would become part of the graph, and queries
 * are not allowed), and they are recorded at the first poll or drain after the capture.
 * The same holds for a recorded stream that another thread is capturing (cuda_record.h,
 * "captures by other threads"): its event waits for the end of that capture.
 * The recorded streams are the extra users; recording the block's own allocation stream
 * costs one event and changes nothing.
 *
 * Bookkeeping: recorded blocks are keyed by (device, pointer) -- live device pointers are
 * unique, and the entry goes when the block is released -- with the stream references held
 * until the events are recorded. One mutex for everything; counters read without it keep
 * the release and allocation paths free of locking while nothing is recorded. Finished
 * events are kept (up to SPARE_MAX per device) for the next deferred release.
 *
 * At process exit deferred blocks are not released (neither is the allocator's cache).
 */
#include "internal.h"
#include "cuda/cuda_api.h"
#include "cuda_record.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXDEV 32    /* as cuda_stream.c and the allocator (CA_MAX_DEVICES) */
#define SPARE_MAX 64 /* finished events kept per device */

/* A live block with recorded streams. */
typedef struct recorded {
    int dev;
    void *ptr;
    int n, cap;
    tc_cuda_stream **s; /* references held */
} recorded;

/* A released block waiting for its events: ev[i] recorded on s[i] (while s is non-NULL the
 * events are still to be recorded: released during a capture). */
typedef struct pending {
    int dev;
    void *ptr;
    int n;
    tc_cuda_stream **s;
    tc_cuda_event **ev;
} pending;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static recorded *g_rec;
static size_t g_nrec, g_caprec;
static pending *g_pend;
static size_t g_npend, g_cappend;
static tc_cuda_event *g_spare[MAXDEV][SPARE_MAX];
static int g_nspare[MAXDEV];
static int64_t g_tracked[MAXDEV], g_waiting[MAXDEV]; /* atomic: entries of g_rec / g_pend per device */

/* ---- record_stream ------------------------------------------------------------------------ */

tc_status tc_tensor_record_stream(const tc_tensor *t, tc_cuda_stream *s)
{
    char b[64], d[16];
    const tc_cuda_api *api;
    if (!t) return tc_set_error(TC_ERR_ARG, "record_stream: NULL tensor");
    if (!TC_DEVICE_IS_CUDA(t->device))
        return tc_set_error(TC_ERR_DEVICE,
                            "record_stream: the tensor of size %s is on %s; only CUDA tensors record streams (their "
                            "memory comes from the caching allocator)",
                            tc_shape_str(t, b, sizeof b), tc_device_str(t->device, d, sizeof d));
    int dev = TC_DEVICE_ORDINAL(t->device);
    TRY(tc_cuda_need("record_stream", dev, &api));
    if (dev >= MAXDEV) return tc_set_error(TC_ERR_ARG, "record_stream: device %d is beyond the %d supported", dev, MAXDEV);
    if (!s) s = tc_cuda_current_stream(dev);
    else if (tc_cuda_stream_device(s) != dev)
        return tc_set_error(TC_ERR_DEVICE,
                            "record_stream: the tensor of size %s is on cuda:%d but the stream belongs to cuda:%d; "
                            "record a stream of the tensor's device",
                            tc_shape_str(t, b, sizeof b), dev, tc_cuda_stream_device(s));
    if (!s) return tc_set_error(TC_ERR_ARG, "record_stream: no current stream on cuda:%d", dev);
    if (!t->storage || !t->storage->data) return TC_OK; /* no memory to keep alive */
    void *ptr = t->storage->data;
    tc_status st = TC_OK;
    pthread_mutex_lock(&g_mu);
    recorded *r = NULL;
    for (size_t i = 0; i < g_nrec && !r; i++)
        if (g_rec[i].dev == dev && g_rec[i].ptr == ptr) r = &g_rec[i];
    if (!r && g_nrec == g_caprec) {
        size_t cap = g_caprec ? g_caprec * 2 : 16;
        recorded *v = realloc(g_rec, cap * sizeof *v);
        if (v) g_rec = v, g_caprec = cap;
    }
    if (!r && g_nrec < g_caprec) {
        r = &g_rec[g_nrec++];
        *r = (recorded){.dev = dev, .ptr = ptr};
        __atomic_add_fetch(&g_tracked[dev], 1, __ATOMIC_RELAXED);
    }
    int seen = 0;
    for (int i = 0; r && i < r->n; i++) seen |= r->s[i] == s;
    if (r && !seen && r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 2;
        tc_cuda_stream **v = realloc(r->s, (size_t)cap * sizeof *v);
        if (v) r->s = v, r->cap = cap;
    }
    if (!r || (!seen && r->n == r->cap)) {
        st = tc_set_error(TC_ERR_MEMORY, "record_stream: no host memory for the record of a tensor of size %s on cuda:%d",
                          tc_shape_str(t, b, sizeof b), dev);
    } else if (!seen) {
        tc_cuda_stream_retain(s);
        r->s[r->n++] = s;
    }
    /* an entry just added that could not take its stream holds nothing: drop it */
    if (r && r->n == 0) {
        free(r->s);
        *r = g_rec[--g_nrec];
        __atomic_sub_fetch(&g_tracked[dev], 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

/* ---- deferred releases (all with g_mu held) -------------------------------------------------- */

static void put_event(int dev, tc_cuda_event *e)
{
    if (!e) return;
    if (g_nspare[dev] < SPARE_MAX) g_spare[dev][g_nspare[dev]++] = e;
    else tc_cuda_event_free(e);
}

/* Records p's events on its streams (outside any capture of this thread on its device) and
 * drops the stream references, except on streams another thread is capturing (their turn
 * comes at a later pass). A stream whose event cannot be made or recorded (a failing
 * device) is waited for instead, so the release never gets ahead of it. */
static void record_events(pending *p)
{
    int left = 0;
    for (int i = 0; i < p->n; i++) {
        if (!p->s[i]) continue;
        if (tc_cuda_stream_captured(p->s[i])) {
            left++;
            continue;
        }
        tc_cuda_event *e = g_nspare[p->dev] ? g_spare[p->dev][--g_nspare[p->dev]] : NULL;
        if (!e && tc_cuda_event_new(p->dev, 0, &e) != TC_OK) e = NULL;
        if (e && tc_cuda_event_record(e, p->s[i]) != TC_OK) {
            tc_cuda_event_free(e);
            e = NULL;
        }
        if (!e) (void)tc_cuda_stream_sync(p->s[i]);
        p->ev[i] = e;
        tc_cuda_stream_free(p->s[i]);
        p->s[i] = NULL;
    }
    if (left) return;
    free(p->s);
    p->s = NULL;
}

/* Hands p's block back to the allocator and removes p (index i of g_pend). */
static void finish(size_t i)
{
    pending *p = &g_pend[i];
    const tc_cuda_api *api;
    for (int k = 0; k < p->n; k++) put_event(p->dev, p->ev[k]);
    /* as device_free: a failed release (a backend bug) has no one to report to */
    if (tc_cuda_need("free", p->dev, &api) == TC_OK) (void)api->release(p->dev, p->ptr);
    __atomic_sub_fetch(&g_waiting[p->dev], 1, __ATOMIC_RELAXED);
    free(p->ev);
    g_pend[i] = g_pend[--g_npend];
}

/* One pass over dev's deferred blocks: events recorded where still missing, and each block
 * whose events all completed (wait: waited for first) released. Returns the first failed
 * wait (the block stays deferred). */
static tc_status pass(int dev, int wait)
{
    tc_status first = TC_OK;
    for (size_t i = 0; i < g_npend;) {
        pending *p = &g_pend[i];
        if (p->dev != dev) {
            i++;
            continue;
        }
        if (p->s) record_events(p);
        int done = 1;
        for (int k = 0; k < p->n && done; k++) {
            if (p->s && p->s[k]) done = 0; /* its event is still to be recorded */
            if (!done || !p->ev[k]) continue;
            tc_status st = wait ? tc_cuda_event_sync(p->ev[k]) : tc_cuda_event_query(p->ev[k], &done);
            if (st) {
                done = 0;
                if (!first) first = st;
            }
        }
        if (done) finish(i); /* g_pend[i] is now another entry (or beyond the end) */
        else i++;
    }
    return first;
}

/* ---- the hooks (cuda_record.h) ----------------------------------------------------------------- */

/* The hooks run inside release paths that return nothing: the thread's error message (maybe
 * the one its caller is about to report) must survive them. */
typedef struct saved_error {
    char msg[1024];
} saved_error;

void tc_cuda_record_poll(int dev)
{
    if (dev < 0 || dev >= MAXDEV || __atomic_load_n(&g_waiting[dev], __ATOMIC_RELAXED) == 0 || tc_cuda_capturing(dev))
        return;
    saved_error e;
    snprintf(e.msg, sizeof e.msg, "%s", tc_last_error());
    pthread_mutex_lock(&g_mu);
    (void)pass(dev, 0);
    pthread_mutex_unlock(&g_mu);
    (void)tc_set_error(TC_OK, "%s", e.msg);
}

int tc_cuda_record_on_free(int dev, void *ptr)
{
    if (dev < 0 || dev >= MAXDEV || !ptr) return 0;
    if (__atomic_load_n(&g_tracked[dev], __ATOMIC_RELAXED) == 0) {
        tc_cuda_record_poll(dev);
        return 0;
    }
    saved_error e;
    snprintf(e.msg, sizeof e.msg, "%s", tc_last_error());
    int taken = 0;
    pthread_mutex_lock(&g_mu);
    size_t i = 0;
    while (i < g_nrec && !(g_rec[i].dev == dev && g_rec[i].ptr == ptr)) i++;
    if (i < g_nrec && g_npend == g_cappend) {
        size_t cap = g_cappend ? g_cappend * 2 : 16;
        pending *v = realloc(g_pend, cap * sizeof *v);
        if (v) g_pend = v, g_cappend = cap;
    }
    tc_cuda_event **ev = i < g_nrec ? calloc((size_t)g_rec[i].n, sizeof *ev) : NULL;
    if (i < g_nrec && (!ev || g_npend == g_cappend)) {
        /* no host memory to defer: wait for the recorded streams now, then release as usual */
        free(ev);
        recorded *r = &g_rec[i];
        for (int k = 0; k < r->n; k++) {
            if (!tc_cuda_capturing(dev) && !tc_cuda_stream_captured(r->s[k])) (void)tc_cuda_stream_sync(r->s[k]);
            tc_cuda_stream_free(r->s[k]);
        }
        free(r->s);
        g_rec[i] = g_rec[--g_nrec];
        __atomic_sub_fetch(&g_tracked[dev], 1, __ATOMIC_RELAXED);
    } else if (i < g_nrec) {
        recorded r = g_rec[i];
        g_rec[i] = g_rec[--g_nrec];
        __atomic_sub_fetch(&g_tracked[dev], 1, __ATOMIC_RELAXED);
        pending *p = &g_pend[g_npend++];
        *p = (pending){.dev = dev, .ptr = ptr, .n = r.n, .s = r.s, .ev = ev};
        __atomic_add_fetch(&g_waiting[dev], 1, __ATOMIC_RELAXED);
        /* during this thread's capture on dev the events wait for its end (see the banner) */
        if (!tc_cuda_capturing(dev)) record_events(p);
        taken = 1;
    }
    if (!tc_cuda_capturing(dev)) (void)pass(dev, 0);
    pthread_mutex_unlock(&g_mu);
    (void)tc_set_error(TC_OK, "%s", e.msg);
    return taken;
}

tc_status tc_cuda_record_drain(int dev)
{
    tc_status st = TC_OK;
    for (int d = dev < 0 ? 0 : dev; d < MAXDEV && (dev < 0 || d == dev); d++) {
        if (__atomic_load_n(&g_waiting[d], __ATOMIC_RELAXED) == 0 || tc_cuda_capturing(d)) continue;
        pthread_mutex_lock(&g_mu);
        tc_status s = pass(d, 1);
        pthread_mutex_unlock(&g_mu);
        if (!st) st = s;
    }
    return st;
}

int64_t tc_cuda_record_pending(int dev)
{
    return dev >= 0 && dev < MAXDEV ? __atomic_load_n(&g_waiting[dev], __ATOMIC_RELAXED) : 0;
}

int64_t tc_cuda_record_tracked(int dev)
{
    return dev >= 0 && dev < MAXDEV ? __atomic_load_n(&g_tracked[dev], __ATOMIC_RELAXED) : 0;
}

void tc_cuda_record_lock(int lock)
{
    if (lock) pthread_mutex_lock(&g_mu);
    else pthread_mutex_unlock(&g_mu);
}

/* ---- stream-ordered scratch ------------------------------------------------------------------- */

tc_status tc_cuda_scratch_take(int dev, size_t nbytes, size_t zero_from, void **ptr)
{
    const tc_cuda_api *api;
    if (!ptr) return tc_set_error(TC_ERR_ARG, "cuda scratch: NULL result");
    *ptr = NULL;
    TRY(tc_cuda_need("scratch", dev, &api));
    tc_cuda_record_poll(dev);
    void *p = NULL;
    TRY(tc_cuda_backend_status(api, api->alloc(dev, nbytes, &p)));
    tc_status st = zero_from < nbytes ? api->set_bytes(dev, (char *)p + zero_from, 0, nbytes - zero_from) : TC_OK;
    if (st) {
        st = tc_cuda_backend_status(api, st);
        (void)api->release(dev, p);
        return st;
    }
    *ptr = p;
    return TC_OK;
}

void tc_cuda_scratch_done(int dev, void *ptr)
{
    const tc_cuda_api *api;
    if (ptr && tc_cuda_need("scratch", dev, &api) == TC_OK) (void)api->release(dev, ptr);
}
