/* runtime.cu -- libtocha_cuda.so's entry point and the runtime half of its table:
 * devices, memory, copies, synchronisation, and the thread-local error message (streams,
 * events, page-locked memory and graph capture are stream.cu's).
 *
 * The CUDA runtime is linked statically (Makefile: -cudart static), so this library needs
 * no libcudart.so at load time; the runtime itself dlopens the driver (libcuda.so.1) on
 * the first call. A machine without a driver can therefore load this library and get a
 * clear "no CUDA driver" from device_count() instead of a dlopen failure.
 *
 * Device memory goes through the caching allocator (cache_alloc.c, plain C compiled here as
 * host code) over cudaMalloc/cudaFree; release() returns blocks to its cache.
 */
#include "cuda_internal.h"
#include "cache_alloc.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors -------------------------------------------------------------------------- */

static thread_local char g_err[512];

tc_status cu_fail(tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return code;
}

static const char *last_error(void) { return g_err; }

tc_status cu_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return TC_OK;
    /* Reset the runtime's last-error slot so a later check does not report this failure
     * again (sticky errors, which poison the context, stay regardless). */
    (void)cudaGetLastError();
    tc_status code = e == cudaErrorMemoryAllocation ? TC_ERR_MEMORY
                     : e == cudaErrorInvalidValue   ? TC_ERR_ARG
                                                    : TC_ERR_DEVICE;
    return cu_fail(code, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* ---- devices ------------------------------------------------------------------------- */

static void versions(int *runtime, int *driver)
{
    int r = 0, d = 0;
    if (cudaRuntimeGetVersion(&r) != cudaSuccess) r = 0;
    /* cudaDriverGetVersion reports 0 (with success) when libcuda.so.1 cannot be loaded. */
    if (cudaDriverGetVersion(&d) != cudaSuccess) d = 0;
    (void)cudaGetLastError();
    if (runtime) *runtime = r;
    if (driver) *driver = d;
}

/* Zero devices is an answer, not an error; a missing or too old driver is an error whose
 * message says which (the loader passes it on as the reason CUDA is unavailable). */
static tc_status device_count(int *count)
{
    int n = 0;
    if (!count) return cu_fail(TC_ERR_ARG, "cuda: device_count: NULL result");
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) {
        *count = n;
        return TC_OK;
    }
    (void)cudaGetLastError();
    if (e == cudaErrorNoDevice) return TC_OK;
    int rt = 0, drv = 0;
    versions(&rt, &drv);
    if (e == cudaErrorInsufficientDriver && drv == 0)
        return cu_fail(TC_ERR_DEVICE, "no CUDA driver (libcuda.so.1 not found): %s", cudaGetErrorString(e));
    if (e == cudaErrorInsufficientDriver)
        return cu_fail(TC_ERR_DEVICE, "CUDA driver too old: it supports CUDA %d.%d, libtocha_cuda.so needs %d.%d",
                       drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    if (e == cudaErrorStubLibrary)
        return cu_fail(TC_ERR_DEVICE, "no CUDA driver (only the toolkit's stub libcuda.so was found): %s",
                       cudaGetErrorString(e));
    return cu_check(e, "cuda: cannot count devices");
}

static tc_status device_properties(int dev, tc_cuda_device_props *out)
{
    if (!out) return cu_fail(TC_ERR_ARG, "cuda: device_properties: NULL result");
    memset(out, 0, sizeof *out);
    cudaDeviceProp prop;
    tc_status s = cu_check(cudaGetDeviceProperties(&prop, dev), "cuda: device properties");
    if (s) return s;
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->major = prop.major, out->minor = prop.minor;
    out->multiprocessors = prop.multiProcessorCount, out->warp_size = prop.warpSize;
    out->max_threads_per_block = prop.maxThreadsPerBlock;
    out->total_memory = (int64_t)prop.totalGlobalMem;
    out->shared_memory_per_block = (int64_t)prop.sharedMemPerBlock;
    return TC_OK;
}

static tc_status device_name(int dev, char *name, size_t cap)
{
    if (!name || cap == 0) return cu_fail(TC_ERR_ARG, "cuda: device_name: no buffer");
    name[0] = '\0';
    tc_cuda_device_props p;
    tc_status s = device_properties(dev, &p);
    if (!s) snprintf(name, cap, "%s", p.name);
    return s;
}

/* ---- can the device run this library's kernels? ------------------------------------------ */

/* What the Makefile built (CUDA_SASS, CUDA_PTX): machine code for these architectures, and
 * PTX for this compute capability, which the driver compiles for any later GPU. */
#ifndef TC_CUDA_SASS
#define TC_CUDA_SASS "90"
#endif
#ifndef TC_CUDA_PTX
#define TC_CUDA_PTX 75
#endif

/* The kernel the driver is asked about: every kernel here is built for the same targets. */
__global__ void cu_probe_kernel(void) {}

/* 1 once a device has said yes (never reset: a device does not change). */
static int g_runs_kernels[CA_MAX_DEVICES];

/* "sm_80, sm_90" from the space-separated TC_CUDA_SASS. */
static void sass_list(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const char *p = TC_CUDA_SASS; *p && n + 1 < cap;) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        if (len) n += (size_t)snprintf(buf + n, cap - n, "%ssm_%.*s", n ? ", " : "", (int)len, p);
        p += len;
    }
}

tc_status cu_device_runs_kernels(int dev)
{
    bool cached = dev >= 0 && dev < CA_MAX_DEVICES;
    if (cached && __atomic_load_n(&g_runs_kernels[dev], __ATOMIC_RELAXED)) return TC_OK;
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, (const void *)cu_probe_kernel);
    if (e == cudaSuccess) {
        if (cached) __atomic_store_n(&g_runs_kernels[dev], 1, __ATOMIC_RELAXED);
        return TC_OK;
    }
    (void)cudaGetLastError();
    /* Without code for it, kernel launches would fail one by one while cuBLAS / cuDNN calls
     * worked, and a model would be half moved when the first error came: say why at once. */
    int rt = 0, drv = 0;
    char sass[128];
    tc_cuda_device_props p;
    if (device_properties(dev, &p) != TC_OK) snprintf(p.name, sizeof p.name, "name unknown");
    (void)cudaGetLastError();
    const char *name = p.name;
    int major = p.major, minor = p.minor;
    versions(&rt, &drv);
    sass_list(sass, sizeof sass);
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction)
        return cu_fail(TC_ERR_DEVICE,
                       "cuda: device %d (%s, compute capability %d.%d) cannot run libtocha_cuda.so's kernels: it holds "
                       "machine code for %s and PTX for compute capability %d.%d and later; build machine code for this "
                       "GPU with make CUDA_SASS=%d%d (nvcc must support sm_%d%d) (%s)",
                       dev, name, major, minor, sass, TC_CUDA_PTX / 10, TC_CUDA_PTX % 10, major, minor, major, minor,
                       cudaGetErrorName(e));
    if (e == cudaErrorUnsupportedPtxVersion)
        return cu_fail(TC_ERR_DEVICE,
                       "cuda: device %d (%s, compute capability %d.%d) cannot run libtocha_cuda.so's kernels: it holds "
                       "machine code for %s only, and the driver (CUDA %d.%d) is older than the toolkit that wrote its PTX "
                       "(CUDA %d.%d); update the driver, or build machine code for this GPU with make CUDA_SASS=%d%d (%s)",
                       dev, name, major, minor, sass, drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, major,
                       minor, cudaGetErrorName(e));
    char what[320];
    snprintf(what, sizeof what, "cuda: device %d (%s): loading libtocha_cuda.so's kernels", dev, name);
    return cu_check(e, what);
}

/* ---- memory and copies --------------------------------------------------------------- */

/* The raw device calls under the caching allocator. Out of memory is TC_ERR_MEMORY, the one
 * failure after which the allocator empties its cache and retries. */
static tc_status raw_alloc(void *ctx, int dev, size_t nbytes, void **ptr, char *msg, size_t cap)
{
    (void)ctx;
    tc_status s = cu_use_device(dev);
    if (s) {
        snprintf(msg, cap, "%s", g_err);
        return s;
    }
    cudaError_t e;
    { /* growing a capture's private pool: allowed, the memory exists at once */
        cu_relaxed_capture relaxed;
        e = cudaMalloc(ptr, nbytes);
    }
    if (e == cudaSuccess) return TC_OK;
    (void)cudaGetLastError();
    snprintf(msg, cap, "cudaMalloc: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return e == cudaErrorMemoryAllocation ? TC_ERR_MEMORY : TC_ERR_DEVICE;
}

static tc_status raw_free(void *ctx, int dev, void *ptr, char *msg, size_t cap)
{
    (void)ctx;
    /* cudaFree waits for the device: not while this thread captures (the allocator then
     * keeps the segment cached, as for any segment the device refuses to free). */
    if (cu_capturing_any()) {
        snprintf(msg, cap, "cudaFree: not while this thread captures a CUDA graph");
        return TC_ERR_UNSUPPORTED;
    }
    tc_status s = cu_use_device(dev);
    if (!s) s = cu_check(cudaFree(ptr), "cudaFree");
    if (s) snprintf(msg, cap, "%s", g_err);
    return s;
}

/* One allocator for the process, set up on first use. Every ordinal CUDA accepts is below
 * CA_MAX_DEVICES in practice; larger ones are refused by the allocator with its message. */
static ca_allocator g_alloc;
static pthread_once_t g_alloc_once = PTHREAD_ONCE_INIT;
static tc_status g_alloc_status = TC_ERR_DEVICE;

/* TOCHA_CUDA_FILL_UNINITIALIZED=1 (a debugging aid, off by default; PyTorch's
 * torch.utils.deterministic.fill_uninitialized_memory does the same for new tensors): every
 * block the allocator hands out, tensors and kernels' scratch alike, is first filled with
 * 0xff bytes on the allocating stream, so a kernel that reads memory nobody wrote since the
 * allocation sees NaN (floating types) or -1 (integers), not the last owner's values, which
 * after a block's reuse are often the very values it should have computed. */
static int g_fill_uninitialized;

static void alloc_init(void)
{
    static const ca_device_ops ops = {NULL, raw_alloc, raw_free};
    const char *fill = getenv("TOCHA_CUDA_FILL_UNINITIALIZED");
    g_fill_uninitialized = fill && fill[0] == '1';
    g_alloc_status = ca_init(&g_alloc, &ops, CA_MAX_DEVICES);
}

static tc_status allocator(void)
{
    pthread_once(&g_alloc_once, alloc_init);
    if (g_alloc_status) return cu_fail(g_alloc_status, "cuda: caching allocator: %s", ca_last_error());
    return TC_OK;
}

/* dev is an ordinal of a device that exists (without making it current). */
static tc_status check_ordinal(int dev, const char *what)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return cu_check(e, what);
    if (dev < 0 || dev >= n) return cu_fail(TC_ERR_ARG, "%s: no device %d (%d device%s)", what, dev, n, n == 1 ? "" : "s");
    return TC_OK;
}

static tc_status mem_alloc(int dev, size_t nbytes, void **ptr)
{
    if (!ptr) return cu_fail(TC_ERR_ARG, "cuda: alloc: NULL result");
    *ptr = NULL;
    if (nbytes == 0) return TC_OK;
    tc_status s = cu_use_device(dev);
    if (!s) s = allocator();
    if (s) return s;
    s = ca_alloc(&g_alloc, dev, cu_alloc_key(dev), nbytes, ptr);
    if (s) return cu_fail(s, "%s", ca_last_error());
    if (g_fill_uninitialized) {
        s = cu_check(cudaMemsetAsync(*ptr, 0xff, nbytes, cu_stream()), "cuda: alloc: TOCHA_CUDA_FILL_UNINITIALIZED");
        if (s) {
            (void)ca_free(&g_alloc, dev, *ptr);
            *ptr = NULL;
        }
    }
    return s;
}

static tc_status mem_release(int dev, void *ptr)
{
    if (!ptr) return TC_OK;
    tc_status s = allocator();
    if (s) return s;
    s = ca_free(&g_alloc, dev, ptr);
    return s ? cu_fail(s, "%s", ca_last_error()) : TC_OK;
}

/* Scratch device memory for kernels (cuda_internal.h): the same caching allocator, so a
 * temporary freed right after its kernels is reused by the next call on the same stream
 * (stream-ordered: the block is filed under the stream its kernels were queued on). */
tc_status cu_scratch_alloc(int dev, size_t nbytes, void **ptr) { return mem_alloc(dev, nbytes, ptr); }
tc_status cu_scratch_free(int dev, void *ptr) { return mem_release(dev, ptr); }

tc_status cu_pool_open(int dev, uintptr_t *key)
{
    tc_status s = allocator();
    if (!s) s = ca_pool_open(&g_alloc, dev, key);
    return s ? cu_fail(s, "%s", ca_last_error()) : TC_OK;
}

tc_status cu_pool_close(int dev, uintptr_t key)
{
    tc_status s = allocator();
    if (!s) s = ca_pool_close(&g_alloc, dev, key);
    return s ? cu_fail(s, "%s", ca_last_error()) : TC_OK;
}

static tc_status memory_stats(int dev, tc_cuda_memstats *out)
{
    if (!out) return cu_fail(TC_ERR_ARG, "cuda memory_stats: NULL result");
    tc_status s = check_ordinal(dev, "cuda memory_stats");
    if (!s) s = allocator();
    if (s) return s;
    s = ca_stats(&g_alloc, dev, out);
    return s ? cu_fail(s, "%s", ca_last_error()) : TC_OK;
}

static tc_status empty_cache(int dev)
{
    tc_status s = check_ordinal(dev, "cuda empty_cache");
    if (!s && cu_capturing_any())
        s = cu_fail(TC_ERR_UNSUPPORTED, "cuda empty_cache: cannot free device memory while this thread captures a "
                                        "CUDA graph (cudaFree waits for the device)");
    if (!s) s = allocator();
    if (s) return s;
    s = ca_empty_cache(&g_alloc, dev);
    return s ? cu_fail(s, "%s", ca_last_error()) : TC_OK;
}

tc_status cu_release_cache(int dev) { return empty_cache(dev); }

static tc_status reset_peak_stats(int dev)
{
    tc_status s = check_ordinal(dev, "cuda reset_peak_stats");
    if (!s) s = allocator();
    if (s) return s;
    s = ca_reset_peak(&g_alloc, dev);
    return s ? cu_fail(s, "%s", ca_last_error()) : TC_OK;
}

static tc_status set_device(int dev)
{
    tc_status s = check_ordinal(dev, "cuda set_device");
    return s ? s : cu_use_device(dev);
}

static tc_status current_device(int *dev)
{
    if (!dev) return cu_fail(TC_ERR_ARG, "cuda current_device: NULL result");
    return cu_check(cudaGetDevice(dev), "cuda current_device");
}

static tc_status set_bytes(int dev, void *ptr, int value, size_t nbytes)
{
    if (nbytes == 0) return TC_OK;
    if (!ptr) return cu_fail(TC_ERR_ARG, "cuda: set_bytes: NULL pointer");
    tc_status s = cu_use_device(dev);
    if (s) return s;
    return cu_check(cudaMemsetAsync(ptr, value, nbytes, cu_stream()), "cuda: memset");
}

/* Copies go on the current stream. Those that cross to or from the host are synchronous
 * (the caller may reuse or free the host side on return): they wait for that stream, not
 * for the whole device. While capturing, a copy to the host fails (nothing to read yet),
 * and a copy from the host is staged (small host scalars, replayed with their values). */
static tc_status copy(int dev, void *dst, const void *src, size_t nbytes, cudaMemcpyKind kind, const char *what)
{
    if (nbytes == 0) return TC_OK;
    if (!dst || !src) return cu_fail(TC_ERR_ARG, "%s: NULL pointer", what);
    tc_status s = cu_use_device(dev);
    if (s) return s;
    if (cu_capturing(dev)) {
        if (kind == cudaMemcpyHostToDevice) return cu_capture_stage_h2d(dev, dst, src, nbytes);
        if (kind == cudaMemcpyDeviceToHost)
            return cu_fail(TC_ERR_UNSUPPORTED,
                           "%s: cannot read device values on the host while a CUDA graph is being captured on cuda:%d",
                           what, dev);
    }
    s = cu_check(cudaMemcpyAsync(dst, src, nbytes, kind, cu_stream()), what);
    if (!s && kind != cudaMemcpyDeviceToDevice) s = cu_check(cudaStreamSynchronize(cu_stream()), what);
    return s;
}

static tc_status copy_h2d(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, cudaMemcpyHostToDevice, "cuda: copy host to device");
}

static tc_status copy_d2h(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, cudaMemcpyDeviceToHost, "cuda: copy device to host");
}

static tc_status copy_d2d(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, cudaMemcpyDeviceToDevice, "cuda: copy device to device");
}

static tc_status synchronize(int dev)
{
    tc_status s = cu_use_device(dev);
    if (s) return s;
    if (cu_capturing(dev))
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "cuda: synchronize: cannot wait for cuda:%d while a CUDA graph is being captured on it", dev);
    if (cu_device_captured(dev))
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "cuda: synchronize: cannot wait for cuda:%d while another thread captures a CUDA graph on it "
                       "(a wait for the whole device would invalidate that capture)",
                       dev);
    return cu_check(cudaDeviceSynchronize(), "cuda: synchronize");
}

/* ---- the entry table ----------------------------------------------------------------- */

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
    cu_ew,
    memory_stats,
    empty_cache,
    reset_peak_stats,
    set_device,
    current_device,
    cu_run,
    cu_set_flag,
    cu_stream_create,
    cu_stream_destroy,
    cu_stream_synchronize,
    cu_stream_query,
    cu_set_stream,
    cu_event_create,
    cu_event_destroy,
    cu_event_record,
    cu_event_wait,
    cu_event_synchronize,
    cu_event_query,
    cu_event_elapsed,
    cu_host_alloc,
    cu_host_release,
    cu_copy_h2d_async,
    cu_copy_d2h_async,
    cu_capture_begin,
    cu_capture_end,
    cu_graph_launch,
    cu_graph_destroy,
    cu_is_capturing,
    cu_devcheck_take,
    device_properties,
};

extern "C" __attribute__((visibility("default"))) const tc_cuda_api *tc_cuda_entry(void) { return &g_api; }
