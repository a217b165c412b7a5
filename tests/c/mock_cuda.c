/* mock_cuda.c -- a CUDA backend without CUDA: the whole tc_cuda_api table (cuda_api.h) over
 * host memory, built by the Makefile into build/tests/libtocha_cuda_mock.so. Point
 * TOCHA_CUDA_LIB at it and libtocha, Lua and the tests take every CUDA code path on a
 * machine without a GPU (docs/cuda.md).
 *
 * What is real: the caching allocator (the same core/cuda/cache_alloc.c as the CUDA
 * backend, so its statistics, empty_cache and out-of-memory retry behave as on a GPU), the
 * argument checks and error messages of each call, device ordinals and selection. What is
 * not: "device memory" is host malloc (copies are memcpy, so a device pointer read on the
 * host works here and would crash on a GPU), there are no streams or asynchrony, and ew()
 * runs float32/float64 only, one plain loop per op from the ops.def float formulas.
 *
 * Environment (read when the library is first loaded):
 *   TOCHA_CUDA_MOCK_DEVICES   number of devices, 0..32 (default 1; 0 = "driver sees none")
 *   TOCHA_CUDA_MOCK_CAPACITY  bytes of memory per device, with an optional K, M or G suffix
 *                             (default 256M); a device allocation beyond it fails as
 *                             cudaMalloc does, with TC_ERR_MEMORY
 */
#include "cuda/cache_alloc.h"
#include "cuda/cuda_api.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- errors -------------------------------------------------------------------------- */

static _Thread_local char g_err[768];

static tc_status fail(tc_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tc_status fail(tc_status code, const char *fmt, ...)
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
    (void)msg;
    (void)cap;
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

static void configure(void)
{
    const char *n = getenv("TOCHA_CUDA_MOCK_DEVICES"), *c = getenv("TOCHA_CUDA_MOCK_CAPACITY");
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
static tc_status use(int dev, const char *what)
{
    pthread_once(&g_once, configure);
    if (g_config_error[0]) return fail(TC_ERR_DEVICE, "%s", g_config_error);
    if (dev < 0 || dev >= g_ndev)
        return fail(g_ndev ? TC_ERR_ARG : TC_ERR_DEVICE, "%s: no device %d (%d device%s)", what, dev, g_ndev,
                    g_ndev == 1 ? "" : "s");
    if (!g_alloc_ok) return fail(TC_ERR_DEVICE, "%s: allocator: %s", what, ca_last_error());
    return TC_OK;
}

/* A ca_* status passed on with the allocator's message. */
static tc_status ca(tc_status s) { return s ? fail(s, "%s", ca_last_error()) : TC_OK; }

/* ---- the table's functions ----------------------------------------------------------- */

static void versions(int *runtime, int *driver)
{
    if (runtime) *runtime = 0; /* 0 and 0: no CUDA at all */
    if (driver) *driver = 0;
}

static tc_status device_count(int *count)
{
    if (!count) return fail(TC_ERR_ARG, "cuda: device_count: NULL result");
    pthread_once(&g_once, configure);
    *count = 0;
    if (g_config_error[0]) return fail(TC_ERR_DEVICE, "%s", g_config_error);
    *count = g_ndev;
    return TC_OK;
}

static tc_status device_name(int dev, char *name, size_t cap)
{
    if (!name || cap == 0) return fail(TC_ERR_ARG, "cuda: device_name: no buffer");
    name[0] = '\0';
    tc_status s = use(dev, "cuda: device properties");
    if (!s) snprintf(name, cap, "tocha mock CUDA device %d (host memory, %zu bytes)", dev, g_capacity);
    return s;
}

static tc_status mem_alloc(int dev, size_t nbytes, void **ptr)
{
    if (!ptr) return fail(TC_ERR_ARG, "cuda: alloc: NULL result");
    *ptr = NULL;
    if (nbytes == 0) return TC_OK;
    tc_status s = use(dev, "cuda: alloc");
    return s ? s : ca(ca_alloc(&g_alloc, dev, 0, nbytes, ptr));
}

static tc_status mem_release(int dev, void *ptr)
{
    if (!ptr) return TC_OK;
    tc_status s = use(dev, "cuda: free");
    return s ? s : ca(ca_free(&g_alloc, dev, ptr));
}

static tc_status set_bytes(int dev, void *ptr, int value, size_t nbytes)
{
    if (nbytes == 0) return TC_OK;
    if (!ptr) return fail(TC_ERR_ARG, "cuda: set_bytes: NULL pointer");
    tc_status s = use(dev, "cuda: memset");
    if (!s) memset(ptr, value, nbytes);
    return s;
}

static tc_status copy(int dev, void *dst, const void *src, size_t nbytes, const char *what)
{
    if (nbytes == 0) return TC_OK;
    if (!dst || !src) return fail(TC_ERR_ARG, "%s: NULL pointer", what);
    tc_status s = use(dev, what);
    if (!s) memmove(dst, src, nbytes);
    return s;
}

static tc_status copy_h2d(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, "cuda: copy host to device");
}

static tc_status copy_d2h(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, "cuda: copy device to host");
}

static tc_status copy_d2d(int dev, void *dst, const void *src, size_t nbytes)
{
    return copy(dev, dst, src, nbytes, "cuda: copy device to device");
}

static tc_status synchronize(int dev) { return use(dev, "cuda: synchronize"); }

/* ---- elementwise: float32 and float64 loops from the ops.def float formulas ---------- */

/* One function per op and float type: out[i] = formula(a, b, c; p0, p1) with the inputs
 * read at i * step (step 0 broadcasts one element). CMP ops store uint8. */
#define DIFF TC_OPF_DIFF
#define FLT TC_OPF_FLT
#define INT TC_OPF_INT
#define BOOL TC_OPF_BOOL
#define CMP TC_OPF_CMP
#define ZDIV TC_OPF_ZDIV
typedef void (*mock_loop)(int64_t n, void *out, const void *const *in, const int64_t *step, double s0, double s1);

#define MOCK_LOOP(ID, TY, fl, EXPR)                                                         \
    static void ew_##ID##_##TY(int64_t n, void *out, const void *const *in, const int64_t *step, double s0, \
                               double s1)                                                   \
    {                                                                                       \
        typedef TY T;                                                                       \
        const T p0 = (T)s0, p1 = (T)s1, *A = (const T *)in[0], *B = (const T *)in[1], *Cc = (const T *)in[2]; \
        (void)p0, (void)p1;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = A ? A[i * step[0]] : 0, b = B ? B[i * step[1]] : 0, c = Cc ? Cc[i * step[2]] : 0; \
            (void)a, (void)b, (void)c;                                                      \
            if ((fl) & CMP) ((uint8_t *)out)[i] = (uint8_t)(EXPR);                          \
            else ((T *)out)[i] = (T)(EXPR);                                                 \
        }                                                                                   \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-conversion"
#pragma GCC diagnostic ignored "-Wbool-operation"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) MOCK_LOOP(ID, float, fl, ffmt) MOCK_LOOP(ID, double, fl, ffmt)
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "ops.def"
#undef TC_EW
#undef TC_OPK
#pragma GCC diagnostic pop

typedef struct mock_ew {
    const char *name;
    int arity, flags;
    mock_loop f32, f64;
} mock_ew;

static const mock_ew g_ew[TC_OP_COUNT] = {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) [TC_OP_##ID] = {nm, ar, fl, ew_##ID##_float, ew_##ID##_double},
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "ops.def"
#undef TC_EW
#undef TC_OPK
};

static tc_status ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in, const int64_t *step,
                    double s0, double s1)
{
    if (op < 0 || op >= TC_OP_COUNT || !g_ew[op].name) return fail(TC_ERR_ARG, "cuda ew: op %d is not an elementwise op", op);
    const mock_ew *e = &g_ew[op];
    if (dtype < 0 || dtype >= TC_DTYPE_COUNT) return fail(TC_ERR_ARG, "cuda %s: bad dtype %d", e->name, dtype);
    if (dtype != TC_F32 && dtype != TC_F64) {
        static const char *const names[TC_DTYPE_COUNT] = {
            [TC_F32] = "float32", [TC_F64] = "float64", [TC_F16] = "float16", [TC_BF16] = "bfloat16",
            [TC_U8] = "uint8",    [TC_I8] = "int8",     [TC_I16] = "int16",   [TC_I32] = "int32",
            [TC_I64] = "int64",   [TC_BOOL] = "bool"};
        return fail(TC_ERR_UNSUPPORTED, "cuda %s: the mock backend runs float32 and float64 only, not %s", e->name,
                    names[dtype] ? names[dtype] : "?");
    }
    if (!(e->flags & TC_OPF_FLT)) return fail(TC_ERR_UNSUPPORTED, "cuda %s: no CUDA kernel for floats", e->name);
    if (n == 0) return TC_OK;
    if (!out) return fail(TC_ERR_ARG, "cuda %s: output is NULL", e->name);
    const void *ins[3] = {NULL, NULL, NULL};
    int64_t st[3] = {0, 0, 0};
    for (int k = 0; k < e->arity; k++) {
        if (!in || !in[k]) return fail(TC_ERR_ARG, "cuda %s: input %d is NULL", e->name, k + 1);
        if (!step || (step[k] != 0 && step[k] != 1))
            return fail(TC_ERR_UNSUPPORTED, "cuda %s: input %d has step %lld (0 or 1 supported)", e->name, k + 1,
                        step ? (long long)step[k] : -1LL);
        ins[k] = in[k];
        st[k] = step[k];
    }
    tc_status s = use(dev, "cuda: ew");
    if (s) return s;
    (dtype == TC_F32 ? e->f32 : e->f64)(n, out, ins, st, s0, s1);
    return TC_OK;
}

/* ---- version 2: allocator and device selection ----------------------------------------- */

static tc_status memory_stats(int dev, tc_cuda_memstats *out)
{
    if (!out) return fail(TC_ERR_ARG, "cuda memory_stats: NULL result");
    tc_status s = use(dev, "cuda memory_stats");
    return s ? s : ca(ca_stats(&g_alloc, dev, out));
}

static tc_status empty_cache(int dev)
{
    tc_status s = use(dev, "cuda empty_cache");
    return s ? s : ca(ca_empty_cache(&g_alloc, dev));
}

static tc_status reset_peak_stats(int dev)
{
    tc_status s = use(dev, "cuda reset_peak_stats");
    return s ? s : ca(ca_reset_peak(&g_alloc, dev));
}

static tc_status set_device(int dev)
{
    tc_status s = use(dev, "cuda set_device");
    if (!s) g_current = dev;
    return s;
}

static tc_status current_device(int *dev)
{
    if (!dev) return fail(TC_ERR_ARG, "cuda current_device: NULL result");
    *dev = g_current;
    return TC_OK;
}

/* ---- version 3: ops on device tensors ---------------------------------------------------- */

/* Elementwise float ops whose views are contiguous (or one element broadcast to all) run
 * here with the loops above, so the path where the backend has the kernel is exercised;
 * everything else answers UNSUPPORTED like a backend without that kernel, and libtocha
 * runs it on the host. */
static int view_step(const tc_cuda_view *v) /* 1 contiguous, 0 all broadcast, -1 neither */
{
    int64_t expect = 1;
    bool contiguous = true, broadcast = true;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->size[d] != 1 && v->stride[d] != expect) contiguous = false;
        if (v->size[d] != 1 && v->stride[d] != 0) broadcast = false;
        expect *= v->size[d];
    }
    return contiguous ? 1 : broadcast ? 0 : -1;
}

static tc_status run(int dev, const tc_cuda_call *c)
{
    if (!c || c->op < 0 || c->op >= TC_OP_COUNT) return fail(TC_ERR_ARG, "cuda run: unknown op");
    const mock_ew *e = &g_ew[c->op];
    const tc_cuda_view *o = &c->out[0];
    bool ok = e->name && c->nin == e->arity && o->data && view_step(o) == 1 && (o->dtype == TC_F32 || o->dtype == TC_F64);
    const void *in[3] = {NULL, NULL, NULL};
    int64_t step[3] = {0, 0, 0};
    for (int i = 0; ok && i < c->nin; i++) {
        in[i] = c->in[i].data;
        step[i] = view_step(&c->in[i]);
        ok = in[i] && c->in[i].dtype == o->dtype && step[i] >= 0;
    }
    if (!ok) return fail(TC_ERR_UNSUPPORTED, "mock: no CUDA kernel for op %d", (int)c->op);
    return ew(dev, c->op, o->dtype, o->numel, o->data, in, step, c->params.s[0], c->params.s[1]);
}

static tc_status set_flag(int flag, int64_t value)
{
    (void)value;
    if (flag != TC_CUDA_FLAG_TF32 && flag != TC_CUDA_FLAG_CUDNN_BENCHMARK)
        return fail(TC_ERR_ARG, "cuda set_flag: flag %d is not the backend's", flag);
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
    ew,
    memory_stats,
    empty_cache,
    reset_peak_stats,
    set_device,
    current_device,
    run,
    set_flag,
};

EXPORT const tc_cuda_api *tc_cuda_entry(void) { return &g_api; }
