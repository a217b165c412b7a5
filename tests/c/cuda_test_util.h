/* cuda_test_util.h -- what the device tests share (test_cuda_*.c, test_graph_cuda*.c):
 * whether a device is there (a GPU, or the mock backend tests/run.sh selects), copies to
 * and from it kept in the test pool, and the mock's stream hold. Include after ctest.h. */
#ifndef TC_TEST_CUDA_UTIL_H
#define TC_TEST_CUDA_UTIL_H

#include "cuda/cuda_api.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when a CUDA device is usable; else prints why the test skips and returns 0. */
static inline int ct_cuda_device(char *why, size_t cap)
{
    if (tc_cuda_available(why, cap) && tc_cuda_device_count() > 0) return 1;
    printf("  skip: no CUDA device (%s)\n", why);
    return 0;
}

/* Whether the backend is the mock (device memory is host memory). */
static inline int ct_cuda_mock(void)
{
    const char *lib = getenv("TOCHA_CUDA_LIB");
    return lib && strstr(lib, "mock") != NULL;
}

/* 1 when the backend's kernels run (a GPU or the emulator); else says the test skips for
 * lack of `what` (over the mock, ops fall back to the host and no kernel runs). */
static inline int ct_cuda_kernels(const char *what)
{
    char why[512];
    if (ct_cuda_device(why, sizeof why) && !ct_cuda_mock()) return 1;
    printf("  skip: needs a CUDA device or the emulator (%s)\n", what);
    return 0;
}

/* The mock's stream hold (tests/c/mock_cuda.c, tc_cuda_mock_hold: events recorded on a held
 * stream, and on streams waiting on them, stay incomplete), or NULL on a GPU. */
typedef int (*ct_hold_fn)(int dev, void *stream, int hold);
static inline ct_hold_fn ct_cuda_mock_hold(void)
{
    if (!ct_cuda_mock()) return NULL;
    void *h = dlopen(getenv("TOCHA_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
    void *f = h ? dlsym(h, "tc_cuda_mock_hold") : NULL;
    ct_hold_fn fn = NULL;
    memcpy(&fn, &f, sizeof fn);
    return fn;
}

/* The emulator's count of launched kernels whose name contains part (tests/emu,
 * tc_cuda_emu_launches), or -1 when the backend is not the emulator. */
static inline long long ct_cuda_emu_launches(const char *part)
{
    const char *lib = getenv("TOCHA_CUDA_LIB");
    void *h = lib && strstr(lib, "emu") ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *f = h ? dlsym(h, "tc_cuda_emu_launches") : NULL;
    long long (*fn)(const char *) = NULL;
    memcpy(&fn, &f, sizeof fn);
    return fn ? fn(part) : -1;
}

/* The backend handle of stream s on cuda:0 (made current for a moment): what the mock's
 * hold takes. */
static inline void *ct_stream_handle(tc_cuda_stream *s)
{
    tc_cuda_stream *prev = tc_cuda_current_stream(0);
    tc_cuda_stream_retain(prev);
    void *h = tc_cuda_set_stream(0, s) == TC_OK ? tc_cuda_stream_handle(0) : NULL;
    (void)tc_cuda_set_stream(0, prev);
    tc_cuda_stream_free(prev);
    return h;
}

/* t copied to device (TC_CPU: to the host), or NULL with the reason printed. */
static inline tc_tensor *ct_to(const tc_tensor *t, int device)
{
    tc_tensor *r = NULL;
    if (tc_tensor_to(t, device, -1, &r) != TC_OK) printf("  to %s: %s\n", device == TC_CPU ? "cpu" : "cuda", tc_last_error());
    return ct_keep(r);
}

/* One op on a and b (b may be NULL), the result kept; NULL with the error printed. */
static inline tc_tensor *ct_op(tc_op o, const tc_tensor *a, const tc_tensor *b, const tc_params *p)
{
    tc_tensor *r = NULL;
    if (ct_run1(o, a, b, NULL, p, &r)) printf("  %s: %s\n", tc_op_info(o)->name, tc_last_error());
    return ct_keep(r);
}

/* A view of base's storage (host or device): sizes and strides from element off, kept;
 * NULL with the error printed. */
static inline tc_tensor *ct_view_at(const tc_tensor *base, int64_t off, int nd, const int64_t *sz, const int64_t *st)
{
    tc_tensor *v = NULL;
    if (tc_tensor_new_view(base->storage, (tc_dtype)base->dtype, off, nd, sz, st, &v))
        printf("  view: %s\n", tc_last_error());
    return ct_keep(v);
}

#endif /* TC_TEST_CUDA_UTIL_H */
