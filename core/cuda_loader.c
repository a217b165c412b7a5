/* cuda_loader.c -- finds, loads and checks the CUDA backend (libtocha_cuda.so) at run time.
 *
 * libtocha links no CUDA library and includes no CUDA header: the backend is a separate
 * shared object, built only where nvcc is found, and loaded here with dlopen on first use.
 * Where it is looked for: $TOCHA_CUDA_LIB when set, else the directory libtocha.so itself
 * was loaded from (dladdr), so a build tree and an install prefix both work unchanged.
 *
 * "CUDA is unavailable" is an answer, never an error or a crash: a missing file, a library
 * that will not load, a stale backend (API version), a missing driver or no device each
 * become a one-line reason that tc_cuda_available hands back. The first answer is cached
 * for the life of the process (loading runs once, under pthread_once); tc_cuda_probe
 * answers afresh for a given path without touching the cache (tests, diagnostics).
 *
 * The tc_cuda_* entry points of tocha.h (memory statistics, empty_cache, device selection,
 * raw device memory) live at the end: each checks availability and the device ordinal and
 * passes the backend's message on. The device selection is kept here, per thread.
 *
 * NOTE: the backend is opened with RTLD_NODELETE and never closed: the CUDA runtime inside
 * it registers exit-time handlers, and unmapping its code would leave them dangling.
 */
#include "internal.h"
#include "cuda/cuda_api.h"
#include "cuda_record.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define CUDA_LIB_NAME "libtocha_cuda.so"

typedef struct cuda_state {
    const tc_cuda_api *api; /* set only when the backend loaded with a matching version */
    int ndev;
    int available; /* api set and ndev >= 1 */
    char why[1024]; /* the reason when not available */
} cuda_state;

/* Where the backend is expected: $TOCHA_CUDA_LIB, else next to libtocha.so. Returns 1 when
 * the path came from the environment. */
static int default_path(char *buf, size_t cap)
{
    const char *env = getenv("TOCHA_CUDA_LIB");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return 1;
    }
    /* NOTE: the anchor is file-static data, not a public function: a non-PIE executable
     * gives a public function a canonical address inside itself, and dladdr would then
     * name the executable instead of libtocha.so. */
    static const char anchor = 0;
    Dl_info info;
    const char *slash = NULL;
    if (dladdr((const void *)&anchor, &info) && info.dli_fname) slash = strrchr(info.dli_fname, '/');
    if (slash)
        snprintf(buf, cap, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, CUDA_LIB_NAME);
    else /* loaded without a directory (or linked statically): the dynamic loader's search */
        snprintf(buf, cap, "%s", CUDA_LIB_NAME);
    return 0;
}

/* Loads path and fills st. origin says where the path came from, for the reason text:
 * 0 default location, 1 $TOCHA_CUDA_LIB, 2 a caller's explicit path. */
static void load(const char *path, int origin, cuda_state *st)
{
    memset(st, 0, sizeof *st);
    struct stat sb;
    if (strchr(path, '/') && stat(path, &sb) != 0) {
        int err = errno;
        if (origin == 0)
            snprintf(st->why, sizeof st->why, CUDA_LIB_NAME " not found (built without nvcc?): no %s", path);
        else
            snprintf(st->why, sizeof st->why, CUDA_LIB_NAME " not found at %s%s: %s",
                     origin == 1 ? "TOCHA_CUDA_LIB=" : "", path, strerror(err));
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        if (origin == 0 && !strchr(path, '/'))
            snprintf(st->why, sizeof st->why, CUDA_LIB_NAME " not found (built without nvcc?): %s",
                     e ? e : "not on the library search path");
        else
            snprintf(st->why, sizeof st->why, "cannot load %s: %s", path, e ? e : "unknown dlopen error");
        return;
    }
    dlerror(); /* clear, so a NULL from dlsym is read correctly */
    void *sym = dlsym(h, TC_CUDA_ENTRY_NAME);
    if (!sym) {
        snprintf(st->why, sizeof st->why, "%s does not export " TC_CUDA_ENTRY_NAME " (not a tocha CUDA backend)",
                 path);
        return;
    }
    tc_cuda_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
    const tc_cuda_api *api = entry();
    if (!api || api->version != TC_CUDA_API_VERSION || api->size != sizeof(tc_cuda_api)) {
        snprintf(st->why, sizeof st->why,
                 "%s has CUDA backend API version %u (table of %u bytes); this libtocha needs version %d "
                 "(%zu bytes): rebuild both with make",
                 path, api ? api->version : 0u, api ? api->size : 0u, TC_CUDA_API_VERSION, sizeof(tc_cuda_api));
        return;
    }
    int n = 0;
    if (api->device_count(&n) != TC_OK) {
        snprintf(st->why, sizeof st->why, "%s", api->last_error());
        if (!st->why[0]) snprintf(st->why, sizeof st->why, "CUDA runtime error while counting devices");
        return;
    }
    if (n <= 0) {
        snprintf(st->why, sizeof st->why, "no CUDA device (the driver is installed but reports none)");
        return;
    }
    st->api = api;
    st->ndev = n;
    st->available = 1;
}

/* ---- the process-wide state ----------------------------------------------------------- */

static cuda_state g_state;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load_default(void)
{
    char path[4096];
    int from_env = default_path(path, sizeof path);
    load(path, from_env, &g_state);
}

static const cuda_state *state(void)
{
    pthread_once(&g_once, load_default);
    return &g_state;
}

int tc_cuda_available(char *why, size_t cap)
{
    const cuda_state *st = state();
    if (why && cap) snprintf(why, cap, "%s", st->available ? "" : st->why);
    return st->available;
}

int tc_cuda_device_count(void)
{
    const cuda_state *st = state();
    return st->available ? st->ndev : 0;
}

tc_status tc_cuda_api_get(const tc_cuda_api **out)
{
    const cuda_state *st = state();
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda: NULL result");
    *out = st->available ? st->api : NULL;
    if (!st->available) return tc_set_error(TC_ERR_DEVICE, "cuda: unavailable: %s", st->why);
    return TC_OK;
}

int tc_cuda_probe(const char *path, char *why, size_t cap)
{
    cuda_state st;
    char buf[4096];
    int origin = 2;
    if (!path) {
        origin = default_path(buf, sizeof buf);
        path = buf;
    }
    load(path, origin, &st);
    if (why && cap) snprintf(why, cap, "%s", st.available ? "" : st.why);
    return st.available;
}

/* ---- memory and device selection (the table's version-2 entries) ----------------------- */

/* The table, or TC_ERR_DEVICE "cuda <op>: CUDA unavailable: <reason>"; and dev, when
 * dev >= 0 is asked for, must be one of the devices counted at load. */
tc_status tc_cuda_need(const char *op, int dev, const tc_cuda_api **api)
{
    const cuda_state *st = state();
    *api = NULL;
    if (!st->available) return tc_set_error(TC_ERR_DEVICE, "cuda %s: CUDA unavailable: %s", op, st->why);
    if (dev < 0 || dev >= st->ndev)
        return tc_set_error(TC_ERR_ARG, "cuda %s: no device %d (%d device%s)", op, dev, st->ndev,
                            st->ndev == 1 ? "" : "s");
    *api = st->api;
    return TC_OK;
}

/* Passes a backend failure on as libtocha's error (the backend's message names the call). */
tc_status tc_cuda_backend_status(const tc_cuda_api *api, tc_status s)
{
    if (s == TC_OK) return TC_OK;
    const char *m = api->last_error();
    s = tc_set_error(s, "%s", m && *m ? m : "cuda: backend call failed without a message");
    tc_cuda_capture_note_failure(s); /* work missing from an open capture fails it, with this message */
    return s;
}

tc_status tc_cuda_device_properties(int dev, tc_cuda_device_props *out)
{
    const tc_cuda_api *api;
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda device_properties: NULL result");
    memset(out, 0, sizeof *out);
    tc_status s = tc_cuda_need("device_properties", dev, &api);
    return s ? s : tc_cuda_backend_status(api, api->device_properties(dev, out));
}

tc_status tc_cuda_memory_stats(int dev, tc_cuda_memstats *out)
{
    const tc_cuda_api *api;
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda memory_stats: NULL result");
    memset(out, 0, sizeof *out);
    tc_status s = tc_cuda_need("memory_stats", dev, &api);
    return s ? s : tc_cuda_backend_status(api, api->memory_stats(dev, out));
}

tc_status tc_cuda_empty_cache(int dev)
{
    const tc_cuda_api *api;
    /* blocks waiting for streams recorded on them (cuda_record.c) are waited for and
     * released first, so their segments can go too (PyTorch's empty_cache does the same) */
    if (dev == -1) {
        tc_status s = tc_cuda_need("empty_cache", 0, &api);
        if (!s) s = tc_cuda_record_drain(-1);
        for (int d = 0; !s && d < tc_cuda_device_count(); d++) s = tc_cuda_backend_status(api, api->empty_cache(d));
        return s;
    }
    tc_status s = tc_cuda_need("empty_cache", dev, &api);
    if (!s) s = tc_cuda_record_drain(dev);
    return s ? s : tc_cuda_backend_status(api, api->empty_cache(dev));
}

tc_status tc_cuda_reset_peak_stats(int dev)
{
    const tc_cuda_api *api;
    tc_status s = tc_cuda_need("reset_peak_stats", dev, &api);
    return s ? s : tc_cuda_backend_status(api, api->reset_peak_stats(dev));
}

/* The user's device selection, per thread like CUDA's own (the backend's current device
 * moves with every call that names a device, so it cannot serve as the selection). */
static _Thread_local int g_current_dev;

tc_status tc_cuda_set_device(int dev)
{
    const tc_cuda_api *api;
    tc_status s = tc_cuda_need("set_device", dev, &api);
    if (!s) s = tc_cuda_backend_status(api, api->set_device(dev));
    if (!s) g_current_dev = dev;
    return s;
}

tc_status tc_cuda_current_device(int *dev)
{
    const tc_cuda_api *api;
    if (!dev) return tc_set_error(TC_ERR_ARG, "cuda current_device: NULL result");
    *dev = 0;
    tc_status s = tc_cuda_need("current_device", 0, &api);
    if (!s) *dev = g_current_dev;
    return s;
}

tc_status tc_cuda_alloc(int dev, size_t nbytes, void **ptr)
{
    const tc_cuda_api *api;
    if (!ptr) return tc_set_error(TC_ERR_ARG, "cuda alloc: NULL result");
    *ptr = NULL;
    tc_status s = tc_cuda_need("alloc", dev, &api);
    return s ? s : tc_cuda_backend_status(api, api->alloc(dev, nbytes, ptr));
}

tc_status tc_cuda_free(int dev, void *ptr)
{
    const tc_cuda_api *api;
    tc_status s = tc_cuda_need("free", dev, &api);
    return s ? s : tc_cuda_backend_status(api, api->release(dev, ptr));
}
