/* cuda_launch.c -- loads a generated fused kernel (cuda_codegen.c, compiled by nvrtc.c)
 * into a device's primary context and launches it, through the CUDA driver API.
 *
 * The kernel is loaded as a cubin for the device's architecture when NVRTC can make one,
 * else as PTX (nvrtc.c); on a GPU newer than NVRTC, as PTX for the newest architecture
 * NVRTC knows, which the driver compiles for the GPU.
 *
 * NOTE: NOT YET RUN ON A GPU. This file was written on machines without one. It has run
 * over the CUDA emulator's NVRTC and driver (tests/emu/emu_driver.cc; tests/run.sh sets
 * TOCHA_CUDA_DRIVER_LIB): tests/c/test_cuda_codegen_run.c's cuda_codegen_gpu_* compare its
 * launches against eager, and they are the first tests a GPU runs.
 *
 * libtocha links no CUDA library: libcuda.so.1 (or $TOCHA_CUDA_DRIVER_LIB) is dlopen'ed
 * and the dozen entry points used are declared here by hand (C ABI: int results, opaque
 * handles, 64-bit device pointers), so nothing CUDA is needed to build. Device pointers come from the CUDA
 * backend (libtocha_cuda.so allocates with the runtime, in the same primary context that
 * is made current here), and kernels go on the calling thread's current stream
 * (tc_cuda_stream_handle), so they order with the backend's work and are captured with it.
 *
 * Per (device, kernel name) one entry holds the loaded module and the function. Entries
 * live as long as the process; modules are never unloaded. A RED_ALL kernel's scratch (its
 * partials and completion counter) is NOT kept there: one buffer per (device, kernel) would
 * be shared by two streams running the same compiled graph at once, each launch overwriting
 * the other's partials and counter. Each launch takes its scratch from the caching
 * allocator on the current stream instead (tc_cuda_scratch_take, core/cuda_record.c), the
 * counter zeroed by a memset on that stream, and gives it back right after queueing: the
 * block is reused only by later work on the same stream (stream-ordered), so no wait.
 */
#include "cuda_codegen.h"
#include "../cuda/cuda_api.h"
#include "../cuda_record.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef int cu_result;
typedef int cu_device;
typedef struct cu_ctx_st *cu_context;
typedef struct cu_mod_st *cu_module;
typedef struct cu_func_st *cu_function;
typedef unsigned long long cu_ptr;

enum { ATTR_SMS = 16, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76, JIT_ERROR_LOG = 5, JIT_ERROR_LOG_SIZE = 6 };

static struct {
    cu_result (*init)(unsigned int flags);
    cu_result (*device_get)(cu_device *d, int ordinal);
    cu_result (*attribute)(int *v, int attr, cu_device d);
    cu_result (*ctx_retain)(cu_context *c, cu_device d);
    cu_result (*ctx_set)(cu_context c);
    cu_result (*module_load)(cu_module *m, const void *image, unsigned int nopts, int *opts, void **vals);
    cu_result (*get_function)(cu_function *f, cu_module m, const char *name);
    cu_result (*launch)(cu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, void *stream, void **params,
                        void **extra);
    cu_result (*error_string)(cu_result r, const char **s);
    bool ok;
    char why[512];
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void load_driver(void)
{
    /* $TOCHA_CUDA_DRIVER_LIB: another library with the driver's entry points (tests point
     * it at the CUDA emulator's, tests/emu/emu_driver.cc) */
    const char *env = getenv("TOCHA_CUDA_DRIVER_LIB");
    const char *path = env && *env ? env : "libcuda.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && !(env && *env)) h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(drv.why, sizeof drv.why, "no CUDA driver (%.180s: %.300s)", path, e ? e : "not found");
        return;
    }
    static const char *const names[] = {
        "cuInit",          "cuDeviceGet",        "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
        "cuCtxSetCurrent", "cuModuleLoadDataEx", "cuModuleGetFunction",  "cuLaunchKernel",
        "cuGetErrorString"};
    void *syms[9];
    for (int i = 0; i < 9; i++)
        if (!(syms[i] = dlsym(h, names[i]))) {
            snprintf(drv.why, sizeof drv.why, "the CUDA driver lacks %s (too old?)", names[i]);
            return;
        }
    memcpy(&drv.init, &syms[0], sizeof(void *));
    memcpy(&drv.device_get, &syms[1], sizeof(void *));
    memcpy(&drv.attribute, &syms[2], sizeof(void *));
    memcpy(&drv.ctx_retain, &syms[3], sizeof(void *));
    memcpy(&drv.ctx_set, &syms[4], sizeof(void *));
    memcpy(&drv.module_load, &syms[5], sizeof(void *));
    memcpy(&drv.get_function, &syms[6], sizeof(void *));
    memcpy(&drv.launch, &syms[7], sizeof(void *));
    memcpy(&drv.error_string, &syms[8], sizeof(void *));
    cu_result r = drv.init(0);
    if (r != 0) {
        const char *s = NULL;
        drv.error_string(r, &s);
        snprintf(drv.why, sizeof drv.why, "cuInit failed: %s (%d)", s ? s : "unknown error", r);
        return;
    }
    drv.ok = true;
}

static tc_status cu_fail_r(cu_result r, const char *label, const char *what)
{
    const char *s = NULL;
    if (drv.error_string) drv.error_string(r, &s);
    return tc_set_error(TC_ERR_DEVICE, "cuda launch: %s: %s failed: %s (%d)", label, what, s ? s : "unknown error", r);
}

/* ---- loaded kernels ------------------------------------------------------------------ */

#define MAX_DEVICES 64

typedef struct lentry {
    struct lentry *next;
    int dev;
    char name[32];
    cu_module mod;
    cu_function fn;
    int sms;
    int64_t part_n; /* RED_ALL: the grid, capped: doubles of scratch per launch */
} lentry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static lentry *loaded;
static cu_context ctxs[MAX_DEVICES];

/* Makes dev's primary context current on this thread (retained once per
 * device). */
static tc_status use_device(int dev, const char *label)
{
    if (!ctxs[dev]) {
        cu_device d;
        cu_result r = drv.device_get(&d, dev);
        if (r == 0) r = drv.ctx_retain(&ctxs[dev], d);
        if (r != 0) return cu_fail_r(r, label, "retaining the primary context");
    }
    cu_result r = drv.ctx_set(ctxs[dev]);
    return r ? cu_fail_r(r, label, "cuCtxSetCurrent") : TC_OK;
}

/* The entry for (dev, k), loading it on first use. Called with mu held. */
static tc_status get_entry(int dev, const tc_cuda_kernel *k, lentry **out)
{
    for (lentry *e = loaded; e; e = e->next)
        if (e->dev == dev && strcmp(e->name, k->name) == 0) {
            *out = e;
            return TC_OK;
        }
    cu_device d;
    int major = 0, minor = 0, sms = 0;
    cu_result r = drv.device_get(&d, dev);
    if (r == 0) r = drv.attribute(&major, ATTR_CC_MAJOR, d);
    if (r == 0) r = drv.attribute(&minor, ATTR_CC_MINOR, d);
    if (r == 0) r = drv.attribute(&sms, ATTR_SMS, d);
    if (r != 0) return cu_fail_r(r, k->label, "reading the device's attributes");
    /* Machine code for this GPU (sm_XY), which the driver loads as it is; else PTX
     * (compute_XY), which it compiles -- and refuses when NVRTC is newer than the driver.
     * The cubin fails only where NVRTC cannot make one (no nvrtcGetCUBIN); the PTX attempt
     * then reports what went wrong. A GPU newer than NVRTC gets PTX for the newest
     * architecture NVRTC knows (PTX runs on later GPUs; a cubin does not). NVRTC that knows
     * nothing this old (0) is left to say so in its error. */
    char arch[32], *image = NULL;
    size_t size = 0;
    int cc = major * 10 + minor, use = tc_nvrtc_arch_for(cc);
    tc_status st = TC_ERR_UNSUPPORTED;
    if (use == cc || use == 0) {
        snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
        st = tc_cuda_kernel_image(k, arch, &image, &size);
    }
    if (st == TC_ERR_UNSUPPORTED) {
        snprintf(arch, sizeof arch, "compute_%d", use > 0 ? use : cc);
        st = tc_cuda_kernel_image(k, arch, &image, &size);
    }
    if (st) return st;
    lentry *e = calloc(1, sizeof *e);
    if (!e) {
        free(image);
        return tc_set_error(TC_ERR_MEMORY, "cuda launch: %s: out of memory", k->label);
    }
    char log[2048] = "";
    int opts[2] = {JIT_ERROR_LOG, JIT_ERROR_LOG_SIZE};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    r = drv.module_load(&e->mod, image, 2, opts, vals);
    free(image);
    if (r != 0) {
        free(e);
        const char *s = NULL;
        drv.error_string(r, &s);
        /* an older driver than NVRTC refuses the PTX version: the log says so */
        return tc_set_error(TC_ERR_DEVICE, "cuda launch: %s: loading the %s for %s failed: %s (%d) %.300s", k->label,
                            arch[0] == 's' ? "cubin" : "PTX", arch, s ? s : "unknown error", r, log);
    }
    r = drv.get_function(&e->fn, e->mod, k->name);
    if (r == 0 && k->reduce == TC_CUDA_RED_ALL) e->part_n = tc_cuda_kernel_grid(k, sms);
    if (r != 0) {
        free(e); /* the module stays: never unloaded, as loaded ones */
        return cu_fail_r(r, k->label, "preparing the kernel");
    }
    e->dev = dev, e->sms = sms;
    memcpy(e->name, k->name, sizeof e->name);
    e->next = loaded, loaded = e;
    *out = e;
    return TC_OK;
}

int tc_cuda_launch_available(char *why, size_t cap)
{
    pthread_once(&drv_once, load_driver);
    if (why && cap) snprintf(why, cap, "%s", drv.ok ? "" : drv.why);
    return drv.ok ? 1 : 0;
}

/* Launches k on dev: ins[k->nins] and outs[k->nouts] are device pointers laid
 * out as the kernel was generated for (cuda_codegen.h). Asynchronous, on the
 * calling thread's current stream. */
tc_status tc_cuda_fused_launch(int dev, const tc_cuda_kernel *k, void *const *ins, void *const *outs)
{
    if (!k || !k->src) return tc_set_error(TC_ERR_ARG, "cuda launch: no generated kernel");
    if ((k->nins && !ins) || !outs) return tc_set_error(TC_ERR_ARG, "cuda launch: %s: NULL pointer list", k->label);
    if (k->nins + k->nouts > 62) return tc_set_error(TC_ERR_ARG, "cuda launch: %s: too many arguments", k->label);
    if (dev < 0 || dev >= MAX_DEVICES) return tc_set_error(TC_ERR_ARG, "cuda launch: %s: bad device %d", k->label, dev);
    pthread_once(&drv_once, load_driver);
    if (!drv.ok) return tc_set_error(TC_ERR_DEVICE, "cuda launch: %s: %s", k->label, drv.why);
    pthread_mutex_lock(&mu);
    lentry *e = NULL;
    tc_status s = use_device(dev, k->label);
    if (s == TC_OK) s = get_entry(dev, k, &e);
    pthread_mutex_unlock(&mu);
    if (s) return s;
    /* each kernel parameter is a pointer: params[i] points at the i-th pointer
     * value */
    void *vals[64], *params[64], *scratch = NULL;
    int np = 0;
    for (int i = 0; i < k->nins; i++) vals[np++] = ins[i];
    for (int o = 0; o < k->nouts; o++) vals[np++] = outs[o];
    if (k->reduce == TC_CUDA_RED_ALL) {
        /* this launch's partials, then its counter (zeroed on the stream; see the banner) */
        size_t part_bytes = sizeof(double) * (size_t)e->part_n;
        TRY(tc_cuda_scratch_take(dev, part_bytes + sizeof(double), part_bytes, &scratch));
        vals[np++] = scratch;
        vals[np++] = (char *)scratch + part_bytes;
    }
    for (int i = 0; i < np; i++) params[i] = &vals[i];
    int64_t grid = tc_cuda_kernel_grid(k, e->sms);
    if (k->reduce == TC_CUDA_RED_ALL && grid > e->part_n) grid = e->part_n;
    /* on this thread's current stream (core/cuda_stream.c), so the kernel orders with the
     * backend's work there and is recorded when that stream is being captured */
    cu_result r = drv.launch(e->fn, (unsigned int)grid, 1, 1, TC_CUDA_FUSED_BLOCK, 1, 1, 0, tc_cuda_stream_handle(dev),
                             params, NULL);
    tc_cuda_scratch_done(dev, scratch); /* reused only after the launch, on this stream */
    return r ? cu_fail_r(r, k->label, "cuLaunchKernel") : TC_OK;
}
