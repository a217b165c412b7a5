/* emu_runtime.cc -- the CUDA runtime calls tocha's backend makes, over host memory, for
 * the CUDA emulator (emu.h). Defined against the real <cuda_runtime_api.h> declarations.
 *
 * What it models, because that is where code written without a GPU goes wrong:
 *   - device memory is a registry of allocations (emu_memory.cc): every copy, memset and
 *     library call checks that its device ranges lie inside live allocations, and that a
 *     copy's kind matches where its pointers are; a kernel's pointer arguments must be its
 *     device's memory or page-locked host memory; new memory is filled with 0xff (NaN, -1),
 *     so a read of memory nobody wrote shows up in the results;
 *   - stream capture: work queued on a capturing stream is recorded, not run, and runs at
 *     each cudaGraphLaunch; a stream joins a capture by waiting on an event recorded in it;
 *     calls CUDA forbids while a thread captures (cudaFree, synchronous copies, synchronize,
 *     queries) fail with cudaErrorStreamCaptureUnsupported and invalidate the
 *     capture, as they do on a GPU; a copy from pageable host memory cannot be captured;
 *   - asynchrony (TOCHA_CUDA_EMU_DEFER, default 1): work queued on a stream is held until
 *     the host waits for it, then runs in stream order, each piece after the work it depends
 *     on (below); code that reads a result without waiting, reuses a page-locked buffer
 *     while a copy from it is queued, or lets another stream use memory without an event
 *     reads stale bytes, as it would on a GPU at the wrong moment;
 *   - launch configurations (emu_sched.cc) and a kernel on another device's stream;
 *   - device memory the host cannot touch: outside device work, a host access through a
 *     device pointer faults, and says so (emu_memory.cc).
 * What it does not model: timing, overlapping work (held work runs one piece at a time),
 * peer access.
 *
 * When held work runs: cudaStreamSynchronize / cudaStreamQuery (the stream's; a query that
 * finds work returns cudaErrorNotReady after running it, so a polling loop ends), an event's
 * synchronize or query (up to its record), cudaDeviceSynchronize, cudaFree and cudaFreeHost
 * and cudaStreamDestroy (which wait on a GPU too), a cudaMemcpy, and a cudaMemcpyAsync to
 * pageable host memory (which returns once done). A copy from pageable host memory takes
 * the bytes at the call, as CUDA's staging does. Dependencies: cudaStreamWaitEvent, and the
 * legacy stream's: its work waits for the earlier work of the device's blocking streams,
 * and theirs for its earlier work (non-blocking streams, tocha's, are exempt). An error a
 * held piece of work meets (a failed launch) is returned by the call that ran it. Devices: TOCHA_CUDA_EMU_DEVICES (default 1), each
 * with TOCHA_CUDA_EMU_CAPACITY bytes (K/M/G suffixes; default 2G) and 2 SMs (small grids
 * keep emulated launches fast). Diagnostics ("emu: ...") go to stderr or to the file
 * $TOCHA_CUDA_EMU_LOG.
 */
#include "emu.h"
#include "emu_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

struct work_item {
    std::string what;
    std::function<void()> run;
};

struct emu_stream;

/* Work held on a stream until the host waits for it (TOCHA_CUDA_EMU_DEFER): it runs after
 * the first `seq` pieces of work of each stream in deps. */
struct dependency {
    emu_stream *stream;
    size_t seq;
};
struct held_work {
    work_item item;
    std::vector<dependency> deps;
};

struct capture {
    int dev;
    cudaStreamCaptureMode mode;
    std::thread::id owner;
    bool invalid = false;
    emu_stream *origin;
    std::vector<work_item> work;
};

struct emu_stream {
    int dev;
    unsigned flags;
    capture *cap = nullptr;
    size_t last_work = 0; /* work.size() after this stream's last capture item */
    size_t joined = 0;    /* the origin has waited for this stream's work up to here */
    std::deque<held_work> held; /* queued, not yet run ... */
    size_t queued = 0, ran = 0; /* ... pieces of work queued and run so far */
};

struct emu_event {
    int dev;
    unsigned flags;
    bool recorded = false;
    capture *cap = nullptr; /* recorded into a capture still open */
    emu_stream *src = nullptr;
    size_t seq = 0;
    double when = 0;
    emu_stream *held_on = nullptr; /* outside a capture: done once held_on has run ... */
    size_t held_seq = 0;           /* ... its first held_seq pieces of work */
};

struct emu_graph {
    std::vector<work_item> work;
};

std::mutex g_mu;   /* the registries below */
std::mutex g_exec; /* one piece of work runs at a time (emu_sched.cc relies on it) */
/* The held work of every stream, taken before g_mu; recursive: running a piece first runs
 * the pieces it depends on. */
std::recursive_mutex g_held_mu;
/* The registries of objects the process never frees (a stream pool lives until exit) are
 * never destroyed either: LeakSanitizer looks for what globals still reach after the static
 * destructors have run, and a destroyed set would leave its streams unreachable. */
std::set<emu_stream *> &g_streams = *new std::set<emu_stream *>;
std::vector<emu_stream *> &g_destroyed = *new std::vector<emu_stream *>; /* kept: a dependency on one never dangles */
emu_stream g_legacy[16]; /* each device's legacy default stream */
std::set<emu_event *> &g_events = *new std::set<emu_event *>;
std::set<capture *> &g_captures = *new std::set<capture *>;
thread_local int t_dev;
thread_local cudaError_t t_error = cudaSuccess;
thread_local cudaStreamCaptureMode t_mode = cudaStreamCaptureModeGlobal; /* cudaThreadExchangeStreamCaptureMode's */

using emu::capacity;
using emu::compute_capability;
using emu::deferred;
using emu::driver_version;
using emu::fail;
using emu::ndevices;

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Called with g_mu held: whether this thread may not make a potentially unsafe call
 * (cudaMalloc, a call that waits for the device) now; if so the captures concerned are
 * invalidated. CUDA's rules (cudaThreadExchangeStreamCaptureMode in cuda_runtime_api.h): a
 * thread whose own mode is Relaxed may; otherwise its own capture, begun in a mode other than
 * Relaxed, forbids it, and so does another thread's capture begun in mode Global when this
 * thread's mode is Global (the default). */
bool forbidden_locked(const char *what)
{
    if (t_mode == cudaStreamCaptureModeRelaxed) return false;
    bool no = false;
    for (capture *c : g_captures) {
        bool mine = c->owner == std::this_thread::get_id();
        if ((mine && c->mode != cudaStreamCaptureModeRelaxed) ||
            (!mine && c->mode == cudaStreamCaptureModeGlobal && t_mode == cudaStreamCaptureModeGlobal)) {
            c->invalid = true;
            no = true;
        }
    }
    if (no) fail(cudaErrorStreamCaptureUnsupported, "%s while a stream captures (this invalidates the capture)", what);
    return no;
}
/* Whether a wait for all of device dev's work conflicts with a capture: "It is invalid to
 * ... synchronize a broader handle which encompasses an active stream capture, such as a
 * device or context handle" (CUDA Programming Guide, stream capture), from any thread in any
 * mode; if so those captures are invalidated and the error set. */
bool device_wait_conflicts(int dev, const char *what)
{
    std::lock_guard<std::mutex> l(g_mu);
    bool no = false;
    for (capture *c : g_captures)
        if (c->dev == dev) c->invalid = no = true;
    if (no)
        fail(cudaErrorStreamCaptureUnsupported, "%s of device %d while a stream of it captures (this invalidates the "
                                                "capture, whichever thread owns it)", what, dev);
    return no;
}
bool forbidden(const char *what)
{
    std::lock_guard<std::mutex> l(g_mu);
    return forbidden_locked(what);
}

/* Resolves a stream handle: the legacy/per-thread default streams are NULL here. */
bool resolve(cudaStream_t s, emu_stream **out, const char *what)
{
    *out = nullptr;
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return true;
    std::lock_guard<std::mutex> l(g_mu);
    if (!g_streams.count((emu_stream *)s)) {
        fail(cudaErrorInvalidResourceHandle, "%s: stream %p is not a live stream", what, (void *)s);
        return false;
    }
    *out = (emu_stream *)s;
    return true;
}

void run_now(const char *what, const std::function<void()> &work)
{
    (void)what;
    std::lock_guard<std::mutex> l(g_exec);
    emu::device_access open;
    work();
}

/* The stream that holds work queued on st: st, or the current device's legacy stream. */
emu_stream *holder(emu_stream *st)
{
    if (st) return st;
    g_legacy[t_dev].dev = t_dev;
    return &g_legacy[t_dev];
}

/* Holds work on st (nullptr: the legacy stream) behind deps and the legacy stream's rules.
 * Takes g_held_mu, then g_mu: never called with g_mu held. */
void hold(emu_stream *st, const char *what, std::function<void()> work, std::vector<dependency> deps)
{
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    emu_stream *q = holder(st);
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (!st) { /* after the earlier work of the device's blocking streams */
            for (emu_stream *x : g_streams)
                if (x->dev == q->dev && !(x->flags & cudaStreamNonBlocking) && x->queued > x->ran)
                    deps.push_back(dependency{x, x->queued});
        } else if (!(st->flags & cudaStreamNonBlocking)) { /* after the legacy stream's */
            emu_stream *legacy = &g_legacy[st->dev];
            if (legacy->queued > legacy->ran) deps.push_back(dependency{legacy, legacy->queued});
        }
    }
    q->held.push_back(held_work{work_item{what, std::move(work)}, std::move(deps)});
    q->queued++;
}

/* Runs st's held work up to its first `upto` pieces, each after the work it depends on
 * (which was queued before it, so this never waits on itself). Returns the first error a
 * piece met. */
cudaError_t run_held(emu_stream *st, size_t upto)
{
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    if (st->ran >= upto || st->held.empty()) return cudaSuccess; /* a poll with nothing to run opens nothing */
    emu::device_access open; /* once for all the pieces, not once per piece */
    cudaError_t first = cudaSuccess;
    while (st->ran < upto && !st->held.empty()) {
        held_work w = std::move(st->held.front());
        st->held.pop_front();
        for (const dependency &d : w.deps) {
            cudaError_t e = run_held(d.stream, d.seq);
            if (first == cudaSuccess) first = e;
        }
        cudaError_t e = emu::take_error_of([&] { run_now(w.item.what.c_str(), w.item.run); });
        st->ran++;
        if (first == cudaSuccess) first = e;
    }
    return first;
}

/* Runs all held work of device dev (-1: of every device): cudaDeviceSynchronize, and the
 * calls that wait for the device on a GPU (cudaFree, cudaFreeHost). Returns its first error,
 * also left for cudaGetLastError. */
cudaError_t run_device(int dev)
{
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    std::vector<emu_stream *> all;
    {
        std::lock_guard<std::mutex> l(g_mu);
        for (emu_stream *x : g_streams)
            if (dev < 0 || x->dev == dev) all.push_back(x);
    }
    for (int d = 0; d < 16; d++)
        if (dev < 0 || d == dev) all.push_back(&g_legacy[d]);
    bool pending = false;
    for (emu_stream *x : all) pending = pending || !x->held.empty();
    if (!pending) return cudaSuccess;
    emu::device_access open;
    cudaError_t first = cudaSuccess;
    for (emu_stream *x : all) {
        cudaError_t e = run_held(x, x->queued);
        if (first == cudaSuccess) first = e;
    }
    if (first != cudaSuccess) t_error = first;
    return first;
}

/* emu::enqueue, returning the error it met (a refused legacy-stream use, a bad stream)
 * rather than leaving it only for cudaGetLastError. */
cudaError_t queue(cudaStream_t s, const char *what, std::function<void()> work)
{
    return emu::error_of([&] { emu::enqueue(s, what, std::move(work)); });
}

cudaError_t copy_checked(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s, bool sync)
{
    const char *what = sync ? "cudaMemcpy" : "cudaMemcpyAsync";
    if (sync && forbidden(what)) return cudaErrorStreamCaptureUnsupported;
    if (n == 0) return cudaSuccess;
    bool ddst = emu::is_device(dst), dsrc = emu::is_device(src);
    if (kind == cudaMemcpyDefault) kind = ddst ? (dsrc ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                               : (dsrc ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    bool pinned_host = kind == cudaMemcpyHostToDevice ? emu::is_pinned(src, n)
                       : kind == cudaMemcpyDeviceToHost ? emu::is_pinned(dst, n) : true;
    bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (want_dst && !emu::device_range(dst, n, what)) return t_error = cudaErrorInvalidValue;
    if (want_src && !emu::device_range(src, n, what)) return t_error = cudaErrorInvalidValue;
    if ((!want_dst && ddst) || (!want_src && dsrc))
        return fail(cudaErrorInvalidValue, "%s: kind %d but %s is device memory", what, (int)kind,
                    (!want_dst && ddst) ? "the destination" : "the source");
    emu_stream *st;
    if (!resolve(s, &st, what)) return t_error;
    if (st && st->cap && !pinned_host)
        return fail(cudaErrorStreamCaptureUnsupported, "%s of %zu bytes from pageable host memory cannot be captured",
                    what, n);
    if (!deferred() || (st && st->cap)) return queue(s, what, [dst, src, n] { memmove(dst, src, n); });
    cudaError_t e;
    if (kind == cudaMemcpyHostToDevice && !pinned_host) { /* staged: the bytes are taken now */
        auto bytes = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
        e = queue(s, what, [dst, bytes, n] { memcpy(dst, bytes->data(), n); });
    } else {
        e = queue(s, what, [dst, src, n] { memmove(dst, src, n); });
    }
    if (e != cudaSuccess) return e;
    /* a synchronous copy, or one into pageable host memory, returns once it is done */
    if (sync || kind == cudaMemcpyHostToHost || (kind == cudaMemcpyDeviceToHost && !pinned_host)) {
        emu_stream *q = holder(st);
        if ((e = run_held(q, q->queued)) != cudaSuccess) t_error = e;
    }
    return e;
}

} // namespace

/* ---- the emulator's interface (emu.h, emu_internal.h) ------------------------------------ */
namespace emu {

/* To stderr, or appended to the file $TOCHA_CUDA_EMU_LOG (a child whose stdout is parsed
 * keeps its output clean that way). */
void note(const char *fmt, ...)
{
    static std::mutex mu;
    std::lock_guard<std::mutex> l(mu);
    const char *path = getenv("TOCHA_CUDA_EMU_LOG");
    FILE *f = path && *path ? fopen(path, "a") : nullptr;
    FILE *out = f ? f : stderr;
    va_list ap;
    va_start(ap, fmt);
    fputs("emu: ", out);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
    if (f) fclose(f);
}

void set_error(cudaError_t e) { t_error = e; }

cudaError_t fail(cudaError_t e, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    note("%s", msg);
    t_error = e;
    return e;
}

bool capture_forbids(const char *what) { return forbidden(what); }
bool device_wait_forbidden(const char *what) { return forbidden(what) || device_wait_conflicts(t_dev, what); }
cudaError_t finish_device_work(int dev) { return run_device(dev); }

cudaError_t error_of(const std::function<void()> &f)
{
    cudaError_t before = t_error;
    t_error = cudaSuccess;
    f();
    cudaError_t e = t_error;
    t_error = e == cudaSuccess ? before : e;
    return e;
}

cudaError_t take_error_of(const std::function<void()> &f)
{
    cudaError_t before = t_error;
    t_error = cudaSuccess;
    f();
    cudaError_t e = t_error;
    t_error = before;
    return e;
}

void enqueue(cudaStream_t s, const char *what, std::function<void()> work)
{
    emu_stream *st;
    if (!resolve(s, &st, what)) return;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (!st) { /* the legacy stream synchronises with blocking streams: one capturing is an error */
            for (capture *c : g_captures)
                for (emu_stream *x : g_streams)
                    if (x->cap == c && !(x->flags & cudaStreamNonBlocking)) {
                        c->invalid = true;
                        fail(cudaErrorStreamCaptureImplicit, "%s on the legacy stream while blocking stream %p captures",
                             what, (void *)x);
                        return;
                    }
        } else if (st->cap) {
            st->cap->work.push_back(work_item{what, std::move(work)});
            st->last_work = st->cap->work.size();
            return;
        }
    }
    if (deferred()) hold(st, what, std::move(work), {});
    else run_now(what, work);
}

void enqueue_kernel(cudaStream_t s, const char *what, std::function<void()> work)
{
    emu_stream *st;
    if (!resolve(s, &st, what)) return;
    if (st && st->dev != t_dev) {
        fail(cudaErrorInvalidResourceHandle, "kernel %s: stream of device %d launched on device %d", what, st->dev,
             t_dev);
        return;
    }
    enqueue(s, what, std::move(work));
}

} // namespace emu

/* ---- devices ------------------------------------------------------------------------------- */

EMU_API cudaError_t cudaSetDevice(int dev) /* exported for tests/emu/test_emu_driver.cc */
{
    if (dev < 0 || dev >= ndevices()) return fail(cudaErrorInvalidDevice, "cudaSetDevice(%d): %d device(s)", dev, ndevices());
    t_dev = dev;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *dev)
{
    *dev = t_dev;
    return cudaSuccess;
}

/* The Makefile's targets (CUDA_SASS, CUDA_PTX): the emulated kernels exist where a build for
 * them would have code, as a GPU's driver decides it: machine code of the device's major
 * version and no newer minor, else PTX no newer than the device, which a driver at least as
 * new as the runtime can compile. */
#if !defined(TC_CUDA_SASS) || !defined(TC_CUDA_PTX)
#error "the Makefile passes the backend's targets (CUDA_BUILT): build the emulator with make"
#endif
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func)
{
    if (!attr || !func) return fail(cudaErrorInvalidValue, "cudaFuncGetAttributes: NULL argument");
    int cc = compute_capability();
    bool sass = false;
    for (const char *p = TC_CUDA_SASS; *p;) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p) break;
        sass = sass || (a / 10 == cc / 10 && a % 10 <= cc % 10);
        p = end;
    }
    if (!sass && cc < TC_CUDA_PTX)
        return fail(cudaErrorNoKernelImageForDevice, "cudaFuncGetAttributes: no code for compute capability %d.%d",
                    cc / 10, cc % 10);
    if (!sass && driver_version() < CUDART_VERSION)
        return fail(cudaErrorUnsupportedPtxVersion, "cudaFuncGetAttributes: the driver (%d) cannot compile PTX of %d",
                    driver_version(), CUDART_VERSION);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->binaryVersion = attr->ptxVersion = sass ? cc : TC_CUDA_PTX;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void)
{
    return emu::device_wait_forbidden("cudaDeviceSynchronize") ? cudaErrorStreamCaptureUnsupported : run_device(t_dev);
}
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode)
{
    if (!mode) return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: NULL mode");
    if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
        *mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: mode %d", (int)*mode);
    cudaStreamCaptureMode old = t_mode;
    t_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* ---- errors ---------------------------------------------------------------------------------- */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_error;
    t_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_error; }

/* ---- copies and memsets (allocations: emu_memory.cc) ------------------------------------------ */

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s)
{
    return copy_checked(dst, src, n, kind, s, false);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    return copy_checked(dst, src, n, kind, nullptr, true);
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    if (!emu::device_range(p, n, "cudaMemsetAsync")) return t_error = cudaErrorInvalidValue;
    return queue(s, "cudaMemsetAsync", [p, v, n] { memset(p, v, n); });
}
cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (forbidden("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
    return cudaMemsetAsync(p, v, n, nullptr);
}

/* ---- streams and events ------------------------------------------------------------------------ */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    emu_stream *st = new emu_stream{t_dev, flags};
    std::lock_guard<std::mutex> l(g_mu);
    g_streams.insert(st);
    *s = (cudaStream_t)st;
    return cudaSuccess;
}
/* Its held work runs first (a GPU finishes it in the background); the object is kept, so
 * that a dependency on it stays valid. */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    emu_stream *st = (emu_stream *)s;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (!g_streams.count(st))
            return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p): not a live stream", (void *)s);
        if (st->cap) return fail(cudaErrorIllegalState, "cudaStreamDestroy(%p): the stream is capturing", (void *)s);
    }
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    cudaError_t e = run_held(st, st->queued);
    if (e != cudaSuccess) t_error = e;
    std::lock_guard<std::mutex> l(g_mu);
    g_streams.erase(st);
    g_destroyed.push_back(st);
    return cudaSuccess;
}
/* Waiting for a stream: its held work runs (a query that finds some says cudaErrorNotReady,
 * having run it); capture makes it an error. */
static cudaError_t wait_stream(cudaStream_t s, const char *what, bool query)
{
    emu_stream *st;
    if (!resolve(s, &st, what)) return t_error;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (st && st->cap) {
            st->cap->invalid = true;
            return fail(cudaErrorStreamCaptureUnsupported, "%s of a capturing stream", what);
        }
        if (forbidden_locked(what)) return cudaErrorStreamCaptureUnsupported;
    }
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    emu_stream *q = holder(st);
    bool pending = q->ran < q->queued;
    cudaError_t e = run_held(q, q->queued);
    if (e != cudaSuccess) return t_error = e;
    return query && pending ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return wait_stream(s, "cudaStreamSynchronize", false); }
cudaError_t cudaStreamQuery(cudaStream_t s) { return wait_stream(s, "cudaStreamQuery", true); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    emu_event *ev = new emu_event{t_dev, flags};
    std::lock_guard<std::mutex> l(g_mu);
    g_events.insert(ev);
    *e = (cudaEvent_t)ev;
    return cudaSuccess;
}
static emu_event *live_event(cudaEvent_t e, const char *what)
{
    if (g_events.count((emu_event *)e)) return (emu_event *)e;
    fail(cudaErrorInvalidResourceHandle, "%s: event %p is not a live event", what, (void *)e);
    return nullptr;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    std::lock_guard<std::mutex> l(g_mu);
    emu_event *ev = live_event(e, "cudaEventDestroy");
    if (!ev) return t_error;
    g_events.erase(ev);
    delete ev;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    emu_stream *st;
    if (!resolve(s, &st, "cudaEventRecord")) return t_error;
    bool outside;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (!live_event(e, "cudaEventRecord")) return t_error;
        outside = !(st && st->cap);
    }
    /* outside a capture it marks the work held so far, behind the legacy stream's rules */
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    emu_stream *q = nullptr;
    if (outside && deferred()) hold(st, "cudaEventRecord", [] {}, {}), q = holder(st);
    std::lock_guard<std::mutex> l(g_mu);
    emu_event *ev = live_event(e, "cudaEventRecord");
    if (!ev) return t_error;
    ev->recorded = true;
    ev->cap = st ? st->cap : nullptr;
    ev->src = st;
    ev->seq = ev->cap ? ev->cap->work.size() : 0;
    ev->held_on = q;
    ev->held_seq = q ? q->queued : 0;
    ev->when = now_ms();
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int)
{
    emu_stream *st;
    if (!resolve(s, &st, "cudaStreamWaitEvent")) return t_error;
    std::lock_guard<std::recursive_mutex> h(g_held_mu); /* taken before g_mu, as hold does */
    std::unique_lock<std::mutex> l(g_mu);
    emu_event *ev = live_event(e, "cudaStreamWaitEvent");
    if (!ev) return t_error;
    capture *c = ev->cap && g_captures.count(ev->cap) ? ev->cap : nullptr;
    if (!c) {
        /* "It is invalid to wait on a non-captured event from a stream which is being
         * captured" (CUDA Programming Guide, stream capture) */
        if (st && st->cap && ev->recorded) {
            st->cap->invalid = true;
            return fail(cudaErrorStreamCaptureIsolation,
                        "cudaStreamWaitEvent: a capturing stream waits on an event recorded outside the capture");
        }
        if (!ev->held_on) return cudaSuccess; /* never recorded, or the work it marks has run */
        dependency d{ev->held_on, ev->held_seq};
        l.unlock();
        hold(st, "cudaStreamWaitEvent", [] {}, {d});
        return cudaSuccess;
    }
    if (!st) {
        c->invalid = true;
        return fail(cudaErrorStreamCaptureImplicit, "cudaStreamWaitEvent: the legacy stream waits on a capture");
    }
    if (st->cap && st->cap != c) {
        c->invalid = st->cap->invalid = true;
        return fail(cudaErrorStreamCaptureIsolation, "cudaStreamWaitEvent: joins two captures");
    }
    if (!st->cap) st->cap = c;                                   /* fork: s joins the capture */
    if (ev->src && ev->src != st && ev->src->cap == c) ev->src->joined = ev->seq; /* join */
    return cudaSuccess;
}
/* Waiting for an event: the work it marks runs (a query that finds some says
 * cudaErrorNotReady, having run it). */
static cudaError_t event_wait(cudaEvent_t e, const char *what, bool query)
{
    std::lock_guard<std::recursive_mutex> h(g_held_mu);
    dependency d{nullptr, 0};
    {
        std::lock_guard<std::mutex> l(g_mu);
        emu_event *ev = live_event(e, what);
        if (!ev) return t_error;
        if (ev->cap && g_captures.count(ev->cap)) {
            ev->cap->invalid = true;
            return fail(cudaErrorStreamCaptureUnsupported, "%s of an event recorded in a capture", what);
        }
        if (forbidden_locked(what)) return cudaErrorStreamCaptureUnsupported;
        d = dependency{ev->held_on, ev->held_seq};
    }
    if (!d.stream) return cudaSuccess;
    bool pending = d.stream->ran < d.seq;
    cudaError_t err = run_held(d.stream, d.seq);
    if (err != cudaSuccess) return t_error = err;
    return query && pending ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return event_wait(e, "cudaEventSynchronize", false); }
cudaError_t cudaEventQuery(cudaEvent_t e) { return event_wait(e, "cudaEventQuery", true); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    std::lock_guard<std::mutex> l(g_mu);
    emu_event *x = live_event(a, "cudaEventElapsedTime"), *y = x ? live_event(b, "cudaEventElapsedTime") : nullptr;
    if (!y) return t_error;
    if ((x->flags | y->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was created without timing");
    if (!x->recorded || !y->recorded || x->cap || y->cap)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was not recorded outside a capture");
    *ms = (float)(y->when - x->when);
    return cudaSuccess;
}

/* ---- capture and graphs ------------------------------------------------------------------------- */

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    emu_stream *st;
    if (!resolve(s, &st, "cudaStreamBeginCapture")) return t_error;
    if (!st) return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the legacy stream");
    std::lock_guard<std::mutex> l(g_mu);
    if (st->cap) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: stream %p already captures", (void *)s);
    capture *c = new capture{st->dev, mode, std::this_thread::get_id(), false, st, {}};
    st->cap = c;
    st->last_work = st->joined = 0;
    g_captures.insert(c);
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status)
{
    emu_stream *st;
    if (!status) return fail(cudaErrorInvalidValue, "cudaStreamIsCapturing: NULL status");
    *status = cudaStreamCaptureStatusNone;
    if (!resolve(s, &st, "cudaStreamIsCapturing")) return t_error;
    std::lock_guard<std::mutex> l(g_mu);
    if (st && st->cap)
        *status = st->cap->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    emu_stream *st;
    *g = nullptr;
    if (!resolve(s, &st, "cudaStreamEndCapture")) return t_error;
    std::lock_guard<std::mutex> l(g_mu);
    if (!st || !st->cap) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream does not capture");
    capture *c = st->cap;
    if (c->origin != st) {
        c->invalid = true;
        return fail(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture on a stream that joined the capture");
    }
    cudaError_t e = c->invalid ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    for (emu_stream *x : g_streams)
        if (x->cap == c) {
            if (x != st && x->last_work > x->joined && e == cudaSuccess)
                e = fail(cudaErrorStreamCaptureUnjoined, "cudaStreamEndCapture: stream %p forked into the capture and "
                                                         "was not joined back", (void *)x);
            x->cap = nullptr;
        }
    for (emu_event *ev : g_events)
        if (ev->cap == c) ev->cap = nullptr;
    g_captures.erase(c);
    if (e == cudaSuccess) *g = (cudaGraph_t) new emu_graph{std::move(c->work)};
    else if (e == cudaErrorStreamCaptureInvalidated) t_error = e;
    delete c;
    return e;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long)
{
    if (!g) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: no graph");
    *exec = (cudaGraphExec_t) new emu_graph{((emu_graph *)g)->work};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    if (!exec) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: no graph");
    cudaError_t before = t_error;
    t_error = cudaSuccess;
    for (const work_item &w : ((emu_graph *)exec)->work) emu::enqueue(s, w.what.c_str(), w.run);
    cudaError_t e = t_error; /* a kernel of the graph failed: said here, not at the next sync */
    t_error = e == cudaSuccess ? before : cudaSuccess;
    return e;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete (emu_graph *)g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    delete (emu_graph *)e;
    return cudaSuccess;
}
