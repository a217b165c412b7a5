/* test_cuda.c -- the CUDA backend's loading path (core/cuda_loader.c), the mock backend
 * (tests/c/mock_cuda.c) through the table, and, when a GPU is present, the elementwise
 * kernels against the CPU. The caching allocator alone is test_cuda_alloc.c.
 *
 * Without a GPU (and CI has none) these tests still check: the answer and reason of
 * tc_cuda_available, the reasons for a missing or wrong library, and that the
 * libtocha_cuda.so `make` built exports a table of the right version whose host-side
 * checks work (TC_TEST_CUDA_BUILT comes from the Makefile: 1 when nvcc was found). The
 * kernel tests print "SKIP cuda: <reason>" and pass when no device is there.
 */
#include "ctest.h"
#include "cuda/cuda_api.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>

#ifndef TC_TEST_CUDA_BUILT
#define TC_TEST_CUDA_BUILT -1 /* built outside the Makefile: unknown */
#endif

/* Path of file in the directory libtocha.so was loaded from (tc_version's string lives in
 * libtocha's own mapping, whatever the executable does with function addresses). */
static int libdir_path(const char *file, char *buf, size_t cap)
{
    Dl_info info;
    if (!dladdr((const void *)tc_version(), &info) || !info.dli_fname) return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) return 0;
    snprintf(buf, cap, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, file);
    return 1;
}

/* The reasons the loader gives start with one of these. */
static int known_reason(const char *why)
{
    static const char *const starts[] = {"libtocha_cuda.so not found", "cannot load ", "no CUDA driver",
                                         "no CUDA device", "CUDA driver too old", "cuda: "};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
        if (strncmp(why, starts[i], strlen(starts[i])) == 0) return 1;
    /* "<path> does not export ..." / "<path> has CUDA backend API version ..." */
    return strstr(why, " does not export ") || strstr(why, " has CUDA backend API version ");
}

/* ---- loading --------------------------------------------------------------------------- */

TEST(cuda_available_answers)
{
    char why[1024] = "untouched";
    int a = tc_cuda_available(why, sizeof why);
    CHECK(a == 0 || a == 1);
    CHECK(tc_cuda_available(NULL, 0) == a); /* cached, and NULL why is fine */
    const tc_cuda_api *api = (const tc_cuda_api *)1;
    if (a) {
        CHECK(why[0] == '\0');
        CHECK(tc_cuda_device_count() >= 1);
        CHECK_OK(tc_cuda_api_get(&api));
        CHECK(api && api->version == TC_CUDA_API_VERSION);
    } else {
        printf("  (cuda unavailable here: %s)\n", why);
        CHECK(why[0] != '\0' && strcmp(why, "untouched") != 0);
        CHECK(known_reason(why));
        CHECK(tc_cuda_device_count() == 0);
        /* the internal accessor fails with the same reason, and clears its result */
        CHECK_ERR(tc_cuda_api_get(&api), TC_ERR_DEVICE, why);
        CHECK(api == NULL);
    }
    /* a short buffer is truncated, never overrun */
    char small[8];
    memset(small, 'x', sizeof small);
    tc_cuda_available(small, 4);
    CHECK(strlen(small) <= 3 && small[4] == 'x');
}

/* Sets TOCHA_CUDA_LIB to value (NULL: unset) and returns the previous value (malloc'ed). */
static char *swap_env(const char *value)
{
    const char *old = getenv("TOCHA_CUDA_LIB");
    char *saved = old ? strdup(old) : NULL;
    if (value) setenv("TOCHA_CUDA_LIB", value, 1);
    else unsetenv("TOCHA_CUDA_LIB");
    return saved;
}

static void restore_env(char *saved)
{
    if (saved) setenv("TOCHA_CUDA_LIB", saved, 1);
    else unsetenv("TOCHA_CUDA_LIB");
    free(saved);
}

TEST(cuda_loader_missing_library)
{
    char why[1024], before[1024];
    int a = tc_cuda_available(before, sizeof before);

    char *saved = swap_env("/nonexistent/libtocha_cuda.so");
    int r = tc_cuda_probe(NULL, why, sizeof why);
    restore_env(saved);
    CHECK(r == 0);
    CHECK(strstr(why, "libtocha_cuda.so not found at TOCHA_CUDA_LIB=/nonexistent/libtocha_cuda.so") == why);
    CHECK(strstr(why, "No such file") != NULL);

    CHECK(tc_cuda_probe("/nonexistent/dir/x.so", why, sizeof why) == 0);
    CHECK(strstr(why, "libtocha_cuda.so not found at /nonexistent/dir/x.so") == why);

    /* the process-wide answer was cached before and is not disturbed by probes */
    char after[1024];
    CHECK(tc_cuda_available(after, sizeof after) == a);
    CHECK(strcmp(before, after) == 0);
}

TEST(cuda_loader_rejects_non_backend)
{
    /* libtocha.so itself loads fine but is no backend */
    char path[4096], why[1024];
    CHECK(libdir_path("libtocha.so", path, sizeof path));
    struct stat sb;
    if (stat(path, &sb) != 0) {
        printf("  FAIL: libtocha.so not at %s\n", path);
        *ctest_failed = 1;
        return;
    }
    CHECK(tc_cuda_probe(path, why, sizeof why) == 0);
    CHECK(strstr(why, path) == why);
    CHECK(strstr(why, "does not export tc_cuda_entry") != NULL);

    /* a file that exists but is no shared object: dlopen's own message is passed on */
    CHECK(libdir_path("tocha_cdef.h", path, sizeof path));
    if (stat(path, &sb) == 0) {
        CHECK(tc_cuda_probe(path, why, sizeof why) == 0);
        CHECK(strncmp(why, "cannot load ", 12) == 0 && strlen(why) > 12 + strlen(path));
    }
}

/* The backend `make` built, opened directly: the exported table and its host-side checks,
 * none of which needs a GPU. */
TEST(cuda_backend_built_by_make)
{
    char path[4096], why[1024];
    CHECK(libdir_path("libtocha_cuda.so", path, sizeof path));
    struct stat sb;
    int exists = stat(path, &sb) == 0;
    char *saved = swap_env(NULL); /* probe the default location, whatever the caller set */
    int probed = tc_cuda_probe(NULL, why, sizeof why);
    restore_env(saved);
    if (TC_TEST_CUDA_BUILT == 0 || (TC_TEST_CUDA_BUILT < 0 && !exists)) {
        /* built without nvcc: nothing there, and the reason says so */
        CHECK(!exists);
        CHECK(probed == 0);
        CHECK(strstr(why, "libtocha_cuda.so not found (built without nvcc?)") == why);
        return;
    }
    CHECK(exists);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        /* the runtime is linked statically: the .so must load even with no CUDA at all */
        printf("  FAIL: dlopen %s: %s\n", path, dlerror());
        *ctest_failed = 1;
        return;
    }
    void *sym = dlsym(h, TC_CUDA_ENTRY_NAME);
    CHECK(sym != NULL);
    if (!sym) return;
    tc_cuda_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const tc_cuda_api *api = entry();
    CHECK(api && api->version == TC_CUDA_API_VERSION && api->size == sizeof(tc_cuda_api));
    if (!api || api->version != TC_CUDA_API_VERSION) return;
    CHECK(api->last_error && api->versions && api->device_count && api->device_name && api->alloc &&
          api->release && api->set_bytes && api->copy_h2d && api->copy_d2h && api->copy_d2d &&
          api->synchronize && api->ew && api->memory_stats && api->empty_cache && api->reset_peak_stats &&
          api->set_device && api->current_device);

    int rt = 0, drv = -1;
    api->versions(&rt, &drv);
    CHECK(rt >= 11000); /* the statically linked runtime knows its version without a driver */
    CHECK(drv >= 0);

    /* the loader's answer for this file is the backend's own */
    int n = -1;
    tc_status s = api->device_count(&n);
    if (s == TC_OK && n > 0) {
        CHECK(probed == 1);
    } else {
        CHECK(probed == 0);
        CHECK(n == 0);
        if (s != TC_OK) CHECK(strcmp(why, api->last_error()) == 0);
        else CHECK(strstr(why, "no CUDA device") == why);
    }

    /* the elementwise table comes from ops.def: checked before any CUDA call */
    const void *ins[3] = {&rt, &rt, &rt};
    const int64_t step1[3] = {1, 1, 1}, step2[3] = {2, 1, 1};
    int out;
    CHECK(api->ew(0, TC_OP_EXP, TC_I32, 1, &out, ins, step1, 0, 0) == TC_ERR_UNSUPPORTED);
    CHECK(strcmp(api->last_error(), "cuda exp: no CUDA kernel for int32") == 0);
    CHECK(api->ew(0, TC_OP_BITAND, TC_F32, 1, &out, ins, step1, 0, 0) == TC_ERR_UNSUPPORTED);
    CHECK(strstr(api->last_error(), "bitand") && strstr(api->last_error(), "float32"));
    CHECK(api->ew(0, TC_OP_SUM, TC_F32, 1, &out, ins, step1, 0, 0) == TC_ERR_ARG);
    CHECK(strstr(api->last_error(), "not an elementwise op") != NULL);
    CHECK(api->ew(0, TC_OP_ADD, TC_F32, 1, &out, ins, step2, 0, 0) == TC_ERR_UNSUPPORTED);
    CHECK(strstr(api->last_error(), "input 1 has step 2") != NULL);
    const void *nulls[2] = {&rt, NULL};
    CHECK(api->ew(0, TC_OP_ADD, TC_F32, 1, &out, nulls, step1, 0, 0) == TC_ERR_ARG);
    CHECK(strstr(api->last_error(), "cuda add: input 2 is NULL") != NULL);
    CHECK(api->ew(0, TC_OP_ADD, TC_F32, 0, NULL, NULL, NULL, 0, 0) == TC_OK); /* nothing to do */
    CHECK(api->ew(0, TC_OP_ADD, TC_DTYPE_COUNT, 1, &out, ins, step1, 0, 0) == TC_ERR_ARG);
    if (s != TC_OK || n == 0) {
        /* No device: every call that passes the table gets as far as selecting the device
         * and fails there, so walking ops x dtypes shows exactly which kernels exist:
         * those the op's flags allow (the dispatcher's rule), no more, no fewer. */
        for (int op = 0; op < TC_OP_COUNT; op++) {
            const tc_opinfo *info = tc_op_info((tc_op)op);
            if (info->kind != TC_KIND_EW) continue;
            for (int dt = 0; dt < TC_DTYPE_COUNT; dt++) {
                int fl = info->flags;
                int allowed = tc_dtype_is_float((tc_dtype)dt) ? (fl & TC_OPF_FLT) != 0
                              : dt == TC_BOOL                 ? (fl & TC_OPF_BOOL) != 0
                                                              : (fl & TC_OPF_INT) != 0;
                tc_status e = api->ew(0, op, dt, 1, &out, ins, step1, 0, 0);
                if (e != (allowed ? TC_ERR_DEVICE : TC_ERR_UNSUPPORTED)) {
                    printf("  FAIL: ew %s on %s -> %d (%s)\n", info->name, tc_dtype_name((tc_dtype)dt), (int)e,
                           api->last_error());
                    *ctest_failed = 1;
                }
            }
        }
    }
    void *p = NULL;
    CHECK(api->alloc(0, 0, &p) == TC_OK && p == NULL);
    CHECK(api->release(0, NULL) == TC_OK);
    if (s != TC_OK || n == 0) {
        /* no device: the allocator's entries fail with the driver's reason, never crash */
        tc_cuda_memstats st;
        CHECK(api->alloc(0, 100, &p) == TC_ERR_DEVICE && p == NULL);
        CHECK(api->memory_stats(0, &st) == TC_ERR_DEVICE);
        CHECK(strstr(api->last_error(), "cuda memory_stats") == api->last_error());
        CHECK(api->empty_cache(0) == TC_ERR_DEVICE);
        CHECK(api->set_device(0) == TC_ERR_DEVICE);
        int rel = api->release(0, &rt); /* a pointer nobody allocated */
        CHECK(rel == TC_ERR_ARG || rel == TC_ERR_DEVICE);
    }
}

/* libtocha's entry points (tocha.h) without CUDA: each fails with TC_ERR_DEVICE naming the
 * call and the reason; with CUDA, bad ordinals are TC_ERR_ARG. */
TEST(cuda_entry_points_without_device)
{
    char why[1024];
    tc_cuda_memstats st;
    tc_cuda_device_props pr = {.major = 1};
    void *p = (void *)1;
    int dev = -7;
    if (!tc_cuda_available(why, sizeof why)) {
        char want[1100];
        snprintf(want, sizeof want, "CUDA unavailable: %s", why);
        CHECK_ERR(tc_cuda_memory_stats(0, &st), TC_ERR_DEVICE, want);
        CHECK(strstr(tc_last_error(), "cuda memory_stats: ") == tc_last_error());
        CHECK_ERR(tc_cuda_device_properties(0, &pr), TC_ERR_DEVICE, want);
        CHECK(pr.name[0] == 0 && pr.major == 0);
        CHECK_ERR(tc_cuda_empty_cache(0), TC_ERR_DEVICE, want);
        CHECK_ERR(tc_cuda_empty_cache(-1), TC_ERR_DEVICE, want);
        CHECK_ERR(tc_cuda_reset_peak_stats(0), TC_ERR_DEVICE, want);
        CHECK_ERR(tc_cuda_set_device(0), TC_ERR_DEVICE, want);
        CHECK_ERR(tc_cuda_current_device(&dev), TC_ERR_DEVICE, want);
        CHECK(dev == 0);
        CHECK_ERR(tc_cuda_alloc(0, 16, &p), TC_ERR_DEVICE, want);
        CHECK(p == NULL);
        CHECK_ERR(tc_cuda_free(0, &dev), TC_ERR_DEVICE, want);
    } else {
        int n = tc_cuda_device_count();
        CHECK_ERR(tc_cuda_memory_stats(n, &st), TC_ERR_ARG, "no device");
        CHECK_ERR(tc_cuda_device_properties(n, &pr), TC_ERR_ARG, "cuda device_properties: no device");
        CHECK_ERR(tc_cuda_set_device(-1), TC_ERR_ARG, "cuda set_device: no device -1");
        CHECK_OK(tc_cuda_current_device(&dev));
        CHECK(dev == 0);
    }
    CHECK_ERR(tc_cuda_memory_stats(0, NULL), TC_ERR_ARG, "NULL result");
    CHECK_ERR(tc_cuda_device_properties(0, NULL), TC_ERR_ARG, "cuda device_properties: NULL result");
    CHECK_ERR(tc_cuda_alloc(0, 16, NULL), TC_ERR_ARG, "NULL result");
}

/* ---- the mock backend, through its table ------------------------------------------------ */

/* The mock (build/tests/libtocha_cuda_mock.so) with 2 devices of 64 MB: the table a GPU
 * backend gives, its caching allocator's statistics, and out of memory end to end. */
TEST(cuda_mock_backend_table)
{
    char path[4096], why[1024];
    CHECK(libdir_path("tests/libtocha_cuda_mock.so", path, sizeof path));
    /* read by the mock on its first use in this process */
    setenv("TOCHA_CUDA_MOCK_DEVICES", "2", 1);
    setenv("TOCHA_CUDA_MOCK_CAPACITY", "64M", 1);
    int ok = tc_cuda_probe(path, why, sizeof why);
    CHECK(ok == 1);
    if (!ok) {
        printf("  mock: %s\n", why);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    void *sym = h ? dlsym(h, TC_CUDA_ENTRY_NAME) : NULL;
    CHECK(sym != NULL);
    if (!sym) return;
    tc_cuda_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const tc_cuda_api *api = entry();
    CHECK(api->version == TC_CUDA_API_VERSION && api->size == sizeof(tc_cuda_api));
    int n = 0;
    CHECK(api->device_count(&n) == TC_OK && n == 2);
    char name[128];
    CHECK(api->device_name(1, name, sizeof name) == TC_OK);
    CHECK(strcmp(name, "tocha mock CUDA device 1 (host memory, 67108864 bytes)") == 0);
    tc_cuda_device_props pr;
    CHECK(api->device_properties(1, &pr) == TC_OK && strcmp(pr.name, name) == 0);
    CHECK(pr.major == 9 && pr.minor == 0 && pr.total_memory == 67108864 && pr.warp_size == 32);
    CHECK(api->device_properties(2, &pr) == TC_ERR_ARG && pr.name[0] == 0);

    /* memory, copies and one kernel */
    const size_t MB = (size_t)1 << 20;
    float *x = NULL, *y = NULL;
    float hx[250], hy[250];
    for (int i = 0; i < 250; i++) hx[i] = (float)i;
    CHECK(api->alloc(0, sizeof hx, (void **)&x) == TC_OK && x);
    CHECK(api->alloc(0, sizeof hy, (void **)&y) == TC_OK && y);
    if (!x || !y) return;
    CHECK(api->copy_h2d(0, x, hx, sizeof hx) == TC_OK);
    const void *ins[2] = {x, x};
    const int64_t step[2] = {1, 1};
    CHECK(api->ew(0, TC_OP_ADD, TC_F32, 250, y, ins, step, 0.5, 0) == TC_OK); /* y = x + 0.5 x */
    CHECK(api->copy_d2h(0, hy, y, sizeof hy) == TC_OK);
    CHECK(hy[0] == 0.0f && hy[10] == 15.0f && hy[249] == 373.5f);
    CHECK(api->ew(0, TC_OP_ADD, TC_I32, 250, y, ins, step, 1, 0) == TC_ERR_UNSUPPORTED);
    CHECK(strstr(api->last_error(), "float32 and float64 only, not int32") != NULL);

    tc_cuda_memstats st;
    CHECK(api->memory_stats(0, &st) == TC_OK);
    CHECK(st.allocated_bytes == 2048 && st.requested_bytes == 2000 && st.reserved_bytes == (int64_t)(2 * MB));
    CHECK(st.segments == 1 && st.alloc_count == 2 && st.cache_hits == 1);
    CHECK(api->release(0, x) == TC_OK && api->release(0, y) == TC_OK);
    CHECK(api->release(0, y) == TC_ERR_ARG); /* twice */
    CHECK(strstr(api->last_error(), "was not allocated on device 0") != NULL);

    /* 63 MB (a 64 MB segment) next to the 2 MB cached: the cache is emptied and the retry
     * fits; the block is the whole segment (a 1 MB rest is not split off) */
    void *big = NULL, *more = (void *)1, *d1 = NULL;
    CHECK(api->alloc(0, 63 * MB, &big) == TC_OK);
    CHECK(api->memory_stats(0, &st) == TC_OK);
    CHECK(st.oom_retries == 1 && st.reserved_bytes == (int64_t)(64 * MB) && st.segments == 1);
    /* 10 MB more cannot fit even then: an error naming sizes and usage; nothing is lost */
    CHECK(api->alloc(0, 10 * MB, &more) == TC_ERR_MEMORY && more == NULL);
    const char *m = api->last_error();
    CHECK(strstr(m, "cuda alloc: out of memory on device 0: cannot allocate 10.00 MiB (10485760 bytes") == m);
    CHECK(strstr(m, "64.00 MiB allocated and 64.00 MiB reserved") != NULL);
    CHECK(strstr(m, "mock cudaMalloc: out of memory") != NULL);
    CHECK(api->memory_stats(0, &st) == TC_OK);
    CHECK(st.ooms == 1 && st.oom_retries == 2 && st.allocated_bytes == (int64_t)(64 * MB));
    /* device 1 has its own memory and allocator */
    CHECK(api->alloc(1, 10 * MB, &d1) == TC_OK);
    CHECK(api->release(1, big) == TC_ERR_ARG);
    CHECK(strstr(api->last_error(), "belongs to device 0, not device 1") != NULL);
    CHECK(api->release(0, big) == TC_OK && api->release(1, d1) == TC_OK);
    CHECK(api->empty_cache(0) == TC_OK && api->empty_cache(1) == TC_OK);
    CHECK(api->memory_stats(0, &st) == TC_OK);
    CHECK(st.reserved_bytes == 0 && st.allocated_bytes == 0 && st.reserved_bytes_peak == (int64_t)(64 * MB));
    CHECK(api->reset_peak_stats(0) == TC_OK);
    CHECK(api->memory_stats(0, &st) == TC_OK && st.reserved_bytes_peak == 0);

    /* ordinals */
    CHECK(api->alloc(2, 10, &more) == TC_ERR_ARG);
    CHECK(strstr(api->last_error(), "no device 2 (2 devices)") != NULL);
    CHECK(api->set_device(1) == TC_OK);
    int cur = -1;
    CHECK(api->current_device(&cur) == TC_OK && cur == 1);
    CHECK(api->set_device(2) == TC_ERR_ARG);
}

/* ---- kernels on the device (skipped without one) --------------------------------------- */

static double host_at(int dt, const void *base, int64_t i)
{
    switch (dt) {
    case TC_F32: return ((const float *)base)[i];
    case TC_F64: return ((const double *)base)[i];
    case TC_F16: return tc_f16_to_f32(((const uint16_t *)base)[i]);
    case TC_BF16: return tc_bf16_to_f32(((const uint16_t *)base)[i]);
    case TC_U8: return ((const uint8_t *)base)[i];
    case TC_I32: return ((const int32_t *)base)[i];
    default: return NAN;
    }
}

static void host_put(int dt, void *base, int64_t i, double v)
{
    switch (dt) {
    case TC_F32: ((float *)base)[i] = (float)v; break;
    case TC_F64: ((double *)base)[i] = v; break;
    case TC_F16: ((uint16_t *)base)[i] = tc_f32_to_f16((float)v); break;
    case TC_BF16: ((uint16_t *)base)[i] = tc_f32_to_bf16((float)v); break;
    case TC_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    default: break;
    }
}

/* Copies the (contiguous) CPU inputs to the device, runs op there and copies the n results
 * back into res. A 1-element input is broadcast (step 0). */
static tc_status run_on_device(const tc_cuda_api *api, tc_op op, int dt, int64_t n, const tc_tensor *const *ins,
                               int nin, double s0, void *res, size_t out_size)
{
    void *din[3] = {NULL, NULL, NULL}, *dout = NULL;
    int64_t step[3] = {1, 1, 1};
    tc_status s = TC_OK;
    for (int i = 0; i < nin && !s; i++) {
        size_t bytes = (size_t)tc_tensor_numel(ins[i]) * tc_dtype_size((tc_dtype)dt);
        step[i] = tc_tensor_numel(ins[i]) == 1 ? 0 : 1;
        s = api->alloc(0, bytes, &din[i]);
        if (!s) s = api->copy_h2d(0, din[i], tc_tensor_data(ins[i]), bytes);
    }
    if (!s) s = api->alloc(0, (size_t)n * out_size, &dout);
    if (!s) s = api->set_bytes(0, dout, 0xff, (size_t)n * out_size); /* stale values cannot pass */
    if (!s) s = api->ew(0, op, dt, n, dout, (const void *const *)din, step, s0, 0);
    if (!s) s = api->synchronize(0);
    if (!s) s = api->copy_d2h(0, res, dout, (size_t)n * out_size);
    if (s) printf("  cuda error: %s\n", api->last_error());
    for (int i = 0; i < nin; i++) api->release(0, din[i]);
    api->release(0, dout);
    return s;
}

typedef struct ew_case {
    tc_op op;
    int dt;
    int nin;
    double s0;
    int scalar_b; /* second input is one element */
    double lo, hi; /* input range */
    double rtol;
} ew_case;

/* One case: the same inputs through the CPU dispatcher and the device kernel. Returns the
 * number of mismatching elements (reporting the first). */
static int64_t compare_case(const tc_cuda_api *api, const ew_case *c, int64_t n, int *failed)
{
    tc_tensor *ins[2] = {NULL, NULL}, *cpu = NULL;
    void *res = NULL;
    int64_t bad = -1;
    for (int i = 0; i < c->nin; i++) {
        int64_t len = (i == 1 && c->scalar_b) ? 1 : n;
        if (tc_tensor_new((tc_dtype)c->dt, 1, &len, &ins[i])) goto done;
        uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        for (int64_t k = 0; k < len; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(x >> 11) / 9007199254740992.0;
            host_put(c->dt, tc_tensor_data(ins[i]), k, c->dt == TC_I32 ? floor(c->lo + u * (c->hi - c->lo))
                                                                        : c->lo + u * (c->hi - c->lo));
        }
    }
    tc_params p = {.s = {c->s0, 0}};
    if (tc_op_run(c->op, (const tc_tensor *const *)ins, c->nin, &p, &cpu, 1)) {
        printf("  cpu %s: %s\n", tc_op_info(c->op)->name, tc_last_error());
        goto done;
    }
    size_t out_size = tc_dtype_size((tc_dtype)cpu->dtype);
    res = malloc((size_t)n * out_size);
    if (!res || run_on_device(api, c->op, c->dt, n, (const tc_tensor *const *)ins, c->nin, c->s0, res, out_size))
        goto done;
    bad = 0;
    const void *want = tc_tensor_data(cpu);
    for (int64_t k = 0; k < n; k++) {
        double g = host_at(cpu->dtype, res, k), w = host_at(cpu->dtype, want, k);
        if (!(fabs(g - w) <= c->rtol * (fabs(w) + 1e-30) || g == w)) {
            if (bad == 0)
                printf("  %s %s [%lld]: gpu %.17g, cpu %.17g\n", tc_op_info(c->op)->name,
                       tc_dtype_name((tc_dtype)c->dt), (long long)k, g, w);
            bad++;
        }
    }
done:
    if (bad != 0) *failed = 1;
    free(res);
    tc_tensor_release(cpu);
    for (int i = 0; i < 2; i++) tc_tensor_release(ins[i]);
    return bad;
}

TEST(cuda_ew_matches_cpu)
{
    char why[1024];
    if (!tc_cuda_available(why, sizeof why)) {
        printf("  SKIP cuda: %s\n", why);
        return;
    }
    const tc_cuda_api *api = NULL;
    CHECK_OK(tc_cuda_api_get(&api));
    char name[256];
    CHECK(api->device_name(0, name, sizeof name) == TC_OK && name[0]);
    tc_cuda_device_props pr;
    CHECK_OK(tc_cuda_device_properties(0, &pr));
    CHECK(strcmp(pr.name, name) == 0 && pr.major >= 5 && pr.total_memory > 0 && pr.multiprocessors > 0);
    printf("  cuda device 0: %s, compute capability %d.%d, %d multiprocessors, %.1f GiB (%d device(s))\n", name,
           (int)pr.major, (int)pr.minor, (int)pr.multiprocessors, (double)pr.total_memory / (1 << 30),
           tc_cuda_device_count());

    /* Float formulas may differ from glibc by an ulp or two (CUDA's documented bounds);
     * half types round the same float result, so they agree to half precision. */
    const ew_case cases[] = {
        {TC_OP_ADD, TC_F32, 2, 2.0, 0, -100, 100, 1e-6},     {TC_OP_ADD, TC_F64, 2, -0.5, 0, -100, 100, 1e-15},
        {TC_OP_ADD, TC_F32, 2, 1.0, 1, -100, 100, 1e-6},     {TC_OP_ADD, TC_I32, 2, 3.0, 0, -1000, 1000, 0},
        {TC_OP_MUL, TC_F32, 2, 0.0, 0, -10, 10, 1e-6},       {TC_OP_MUL, TC_F64, 2, 0.0, 1, -10, 10, 1e-15},
        {TC_OP_MUL, TC_I32, 2, 0.0, 0, -1000, 1000, 0},      {TC_OP_EXP, TC_F32, 1, 0.0, 0, -20, 20, 1e-6},
        {TC_OP_EXP, TC_F64, 1, 0.0, 0, -20, 20, 1e-14},      {TC_OP_EXP, TC_F16, 1, 0.0, 0, -5, 5, 1e-3},
        {TC_OP_EXP, TC_BF16, 1, 0.0, 0, -5, 5, 1e-2},        {TC_OP_SIGMOID, TC_F32, 1, 0.0, 0, -30, 30, 1e-6},
        {TC_OP_SIGMOID, TC_F64, 1, 0.0, 0, -30, 30, 1e-14},  {TC_OP_LT, TC_F32, 2, 0.0, 1, -1, 1, 0},
    };
    /* more elements than one grid covers, so the grid-stride loop wraps, and an odd count */
    const int64_t n = (1 << 21) + 3;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t bad = compare_case(api, &cases[i], n, ctest_failed);
        if (bad) printf("  case %zu: %lld of %lld elements differ\n", i, (long long)bad, (long long)n);
    }

    /* errors come back as statuses with CUDA's message */
    void *p = NULL;
    CHECK(api->alloc(0, (size_t)1 << 60, &p) == TC_ERR_MEMORY && p == NULL);
    CHECK(strstr(api->last_error(), "cuda alloc: out of memory on device 0") != NULL);
    CHECK(strstr(api->last_error(), "(1152921504606846976 bytes") != NULL);
    CHECK(api->synchronize(0) == TC_OK); /* a failed alloc does not poison the device */
    CHECK(api->synchronize(tc_cuda_device_count()) == TC_ERR_DEVICE); /* no such device */

    /* the caching allocator under it all: everything released, the 2^60 request retried
     * after emptying the cache, and the cache handed back on request */
    tc_cuda_memstats st;
    CHECK(api->memory_stats(0, &st) == TC_OK);
    CHECK(st.allocated_bytes == 0 && st.blocks == 0 && st.alloc_count == st.free_count && st.alloc_count > 0);
    CHECK(st.ooms >= 1 && st.oom_retries >= 1 && st.cache_hits > 0);
    CHECK(api->alloc(0, 1000, &p) == TC_OK && p);
    CHECK(api->memory_stats(0, &st) == TC_OK && st.allocated_bytes == 1024 && st.reserved_bytes >= (2 << 20));
    CHECK(api->release(0, p) == TC_OK);
    CHECK(api->release(0, p) == TC_ERR_ARG); /* twice */
    CHECK(api->empty_cache(0) == TC_OK);
    CHECK(api->memory_stats(0, &st) == TC_OK && st.reserved_bytes == 0 && st.segments == 0);
    CHECK(api->memory_stats(tc_cuda_device_count(), &st) == TC_ERR_ARG);
    int cur = -1;
    CHECK(api->set_device(0) == TC_OK && api->current_device(&cur) == TC_OK && cur == 0);
    CHECK_OK(tc_cuda_memory_stats(0, &st));
    CHECK_OK(tc_cuda_set_device(0));
    CHECK_OK(tc_cuda_empty_cache(-1));
}
