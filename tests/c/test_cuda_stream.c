/* test_cuda_stream.c -- CUDA streams, events, pinned memory, non_blocking copies and graph
 * capture (core/cuda_stream.c over the backend table's version-4 members), and the caching
 * allocator's private pools (core/cuda/cache_alloc.c, compiled into this binary).
 *
 * cuda_alloc_private_* run everywhere (a fake device). The cuda_dev_stream_* tests need a
 * CUDA device: without one they check that the calls fail cleanly and pass. tests/run.sh
 * runs every cuda_dev* test again over the mock backend (two devices), whose capture records
 * and replays the calls, so the capture logic is tested end to end without a GPU; values
 * are checked there and on a GPU alike. cuda_dev_stream_capture_cuda_rules checks what CUDA
 * itself forbids around a capture (another thread's wait for the whole device, a wait on an
 * event from outside): the real backend's checks, run over the emulator, which enforces
 * CUDA's rules, and a GPU; the mock skips it, and cuda_dev_stream_capture_long_sorts (one long
 * row captured and replayed, several refused).
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "cuda/cache_alloc.h"
#include "cuda/cuda_api.h"
#include "internal.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)
#define MB ((size_t)1 << 20)

/* ---- the allocator's private pools (no device needed) ------------------------------------ */

static int g_raw_live;

static tc_status raw_alloc(void *ctx, int dev, size_t n, void **ptr, char *msg, size_t cap)
{
    (void)ctx, (void)dev;
    *ptr = malloc(n);
    if (!*ptr) {
        snprintf(msg, cap, "fake: out of memory");
        return TC_ERR_MEMORY;
    }
    g_raw_live++;
    return TC_OK;
}

static tc_status raw_free(void *ctx, int dev, void *ptr, char *msg, size_t cap)
{
    (void)ctx, (void)dev, (void)msg, (void)cap;
    free(ptr);
    g_raw_live--;
    return TC_OK;
}

TEST(cuda_alloc_private_pools)
{
    ca_allocator *a = malloc(sizeof *a);
    ca_device_ops ops = {NULL, raw_alloc, raw_free};
    CHECK(a && ca_init(a, &ops, 1) == TC_OK);
    if (!a) return;
    g_raw_live = 0;
    const uintptr_t sA = 0x1000, sB = 0x2000; /* stream handles: even */
    uintptr_t pool = 0, pool2 = 0;
    CHECK_OK(ca_pool_open(a, 0, &pool));
    CHECK_OK(ca_pool_open(a, 0, &pool2));
    CHECK((pool & 1) && (pool2 & 1) && pool != pool2);

    /* a block freed on one stream is reused there, never by another stream */
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(ca_alloc(a, 0, sA, 4096, &p));
    CHECK_OK(ca_free(a, 0, p));
    CHECK_OK(ca_alloc(a, 0, sB, 4096, &q));
    CHECK(q != p && ca_segments_of(a, 0, sB) == 1);
    CHECK_OK(ca_alloc(a, 0, sA, 4096, &r));
    CHECK(r == p);
    CHECK_OK(ca_free(a, 0, q));
    CHECK_OK(ca_free(a, 0, r));

    /* the pool: its own segments, reuse within it only */
    void *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(ca_alloc(a, 0, pool, 1000, &x));
    CHECK(ca_segments_of(a, 0, pool) == 1 && x != p && x != q);
    CHECK_OK(ca_free(a, 0, x));
    CHECK_OK(ca_alloc(a, 0, 0, 1000, &y)); /* the default stream does not get the pool's block */
    CHECK(y != x);
    CHECK_OK(ca_alloc(a, 0, pool2, 1000, &z)); /* nor does another pool */
    CHECK(z != x && ca_segments_of(a, 0, pool2) == 1);
    void *x2 = NULL;
    CHECK_OK(ca_alloc(a, 0, pool, 1000, &x2)); /* the pool does */
    CHECK(x2 == x);
    CHECK_OK(ca_free(a, 0, y));
    CHECK_OK(ca_free(a, 0, z));

    /* empty_cache keeps an open pool's memory (a graph replays on it), frees the rest */
    CHECK_OK(ca_free(a, 0, x2));
    CHECK_OK(ca_empty_cache(a, 0));
    CHECK(ca_segments_of(a, 0, pool) == 1 && ca_segments_of(a, 0, pool2) == 1);
    CHECK(ca_segments_of(a, 0, sA) == 0 && ca_segments_of(a, 0, 0) == 0);

    /* closing: a wholly free segment goes to the default stream at once, ... */
    CHECK_OK(ca_pool_close(a, 0, pool));
    CHECK(ca_segments_of(a, 0, pool) == 0 && ca_segments_of(a, 0, 0) == 1);
    void *d0 = NULL;
    CHECK_OK(ca_alloc(a, 0, 0, 1000, &d0));
    CHECK(d0 == x); /* the closed pool's memory now serves the default stream */
    CHECK_OK(ca_free(a, 0, d0));
    /* ... one with a live block (a tensor that outlived its graph) when that block goes */
    void *keep = NULL;
    CHECK_OK(ca_alloc(a, 0, pool2, 3000, &keep));
    CHECK_OK(ca_pool_close(a, 0, pool2));
    CHECK(ca_segments_of(a, 0, pool2) == 1);
    CHECK(ca_alloc(a, 0, pool2, 10, &y) == TC_ERR_ARG && strstr(ca_last_error(), "is not open"));
    CHECK(ca_pool_close(a, 0, pool2) == TC_ERR_ARG && strstr(ca_last_error(), "no open private pool"));
    CHECK(ca_pool_close(a, 0, 0x4000) == TC_ERR_ARG && strstr(ca_last_error(), "no open private pool"));
    CHECK_OK(ca_free(a, 0, keep));
    CHECK(ca_segments_of(a, 0, pool2) == 0 && ca_segments_of(a, 0, 0) == 2);
    CHECK_OK(ca_empty_cache(a, 0));
    CHECK(ca_segments_of(a, 0, 0) == 0);
    CHECK(a->dev[0].npriv == 0); /* both records gone with their segments */
    CHECK(ca_destroy(a) == TC_OK && g_raw_live == 0);
    free(a);
}

/* Every stream, event, pinned-memory and CUDA-graph entry point (and the compiled-graph
 * capture calls) refuses NULL and bad arguments by name, with or without CUDA, and the
 * process survives. */
TEST(cuda_stream_entry_points_bad_input)
{
    int done = 0;
    float ms = 0;
    tc_tensor *o = NULL, *t = NULL;
    tc_graph_devinfo di;
    tc_captured_graph *cg = (tc_captured_graph *)1;
    CHECK_ERR(tc_cuda_stream_new(0, NULL), TC_ERR_ARG, "stream_new: NULL result");
    CHECK_ERR(tc_cuda_stream_sync(NULL), TC_ERR_ARG, "stream synchronize: NULL stream");
    CHECK_ERR(tc_cuda_stream_query(NULL, &done), TC_ERR_ARG, "stream query: NULL stream");
    CHECK_ERR(tc_cuda_event_new(0, 1, NULL), TC_ERR_ARG, "event_new: NULL result");
    CHECK_ERR(tc_cuda_event_record(NULL, NULL), TC_ERR_ARG, "event record: NULL event");
    CHECK_ERR(tc_cuda_event_wait(NULL, NULL), TC_ERR_ARG, "event wait: NULL event");
    CHECK_ERR(tc_cuda_event_sync(NULL), TC_ERR_ARG, "event synchronize: NULL event");
    CHECK_ERR(tc_cuda_event_query(NULL, &done), TC_ERR_ARG, "event query: NULL event");
    CHECK_ERR(tc_cuda_event_elapsed(NULL, NULL, &ms), TC_ERR_ARG, "elapsed_time: NULL event");
    CHECK_ERR(tc_tensor_pin(NULL, &o), TC_ERR_ARG, "pin_memory: NULL argument");
    CHECK_ERR(tc_tensor_to_async(NULL, TC_CPU, -1, &o), TC_ERR_ARG, "to (non_blocking): NULL argument");
    CHECK_OK(tc_tensor_new(TC_F32, 1, (int64_t[]){3}, &t));
    ct_keep(t);
    CHECK_ERR(tc_tensor_pin(t, NULL), TC_ERR_ARG, "pin_memory: NULL argument");
    CHECK_ERR(tc_tensor_to_async(t, TC_CPU, 77, &o), TC_ERR_DTYPE, "invalid dtype 77");
    CHECK(o == NULL && !tc_tensor_is_pinned(NULL) && !tc_tensor_is_pinned(t));
    CHECK_ERR(tc_cuda_graph_end(0, NULL), TC_ERR_ARG, "capture_end: NULL result");
    CHECK_ERR(tc_cuda_graph_replay(NULL), TC_ERR_ARG, "graph replay: NULL graph");
    CHECK(tc_cuda_set_stream(-1, NULL) != TC_OK && tc_cuda_graph_begin(-1, NULL) != TC_OK);
    tc_cuda_graph_free(NULL), tc_cuda_stream_free(NULL), tc_cuda_event_free(NULL); /* no-ops */
    CHECK_ERR(tc_graph_device_info(NULL, &di), TC_ERR_ARG, "device_info: NULL argument");
    CHECK_ERR(tc_graph_capture(NULL, NULL, 0, NULL, 0, &cg), TC_ERR_ARG, "graph capture: NULL argument");
    CHECK_ERR(tc_graph_replay(NULL), TC_ERR_ARG, "graph replay: NULL capture");
    tc_graph_capture_free(NULL);
    ct_drop();
}

/* ---- device tests (GPU, or the mock) ------------------------------------------------------ */

static int have_device(int *ctest_failed)
{
    char why[512];
    if (ct_cuda_device(why, sizeof why)) return 1;
    tc_cuda_stream *s = (tc_cuda_stream *)1;
    CHECK(tc_cuda_stream_new(0, &s) == TC_ERR_DEVICE && s == NULL);
    CHECK(strstr(tc_last_error(), "CUDA unavailable") != NULL);
    CHECK(tc_cuda_graph_begin(0, NULL) == TC_ERR_DEVICE);
    CHECK(tc_cuda_current_stream(0) == NULL && !tc_cuda_is_capturing(0));
    return 0;
}

#define mock_backend ct_cuda_mock

static tc_tensor *host(const tc_tensor *t) { return ct_to(t, TC_CPU); }

static tc_tensor *on_dev(const tc_tensor *t) { return ct_to(t, DEV); }

TEST(cuda_dev_stream_current_and_allocation)
{
    if (!have_device(ctest_failed)) return;
    tc_cuda_stream *def = tc_cuda_default_stream(0), *s = NULL;
    CHECK(def && tc_cuda_stream_is_default(def) && tc_cuda_stream_device(def) == 0);
    CHECK(tc_cuda_current_stream(0) == def && tc_cuda_stream_handle(0) == NULL);
    CHECK_OK(tc_cuda_stream_new(0, &s));
    CHECK(!tc_cuda_stream_is_default(s));
    CHECK_OK(tc_cuda_set_stream(0, s));
    CHECK(tc_cuda_current_stream(0) == s && tc_cuda_stream_handle(0) != NULL);
    /* work on the stream; a block freed on it serves the next allocation on it only */
    tc_cuda_memstats st0, st1, st2;
    tc_tensor *a = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3))));
    tc_tensor *b = NULL;
    CHECK_OK(ct_run1(TC_OP_ADD, a, a, NULL, P(.s = {1}), &b));
    ct_keep(b);
    CHECK_OK(tc_cuda_stream_sync(s));
    int done = 0;
    CHECK_OK(tc_cuda_stream_query(s, &done));
    CHECK(done == 1);
    CHECK(SAME(host(b), 2, 4, 6));
    void *p = NULL, *q = NULL;
    CHECK_OK(tc_cuda_alloc(0, 7 * 512, &p));
    CHECK_OK(tc_cuda_free(0, p));
    CHECK_OK(tc_cuda_memory_stats(0, &st0));
    CHECK_OK(tc_cuda_alloc(0, 7 * 512, &q)); /* same stream: the cached block */
    CHECK_OK(tc_cuda_memory_stats(0, &st1));
    CHECK(q == p && st1.cache_hits == st0.cache_hits + 1);
    CHECK_OK(tc_cuda_free(0, q));
    CHECK_OK(tc_cuda_set_stream(0, NULL)); /* back to the default stream */
    CHECK(tc_cuda_current_stream(0) == def);
    CHECK_OK(tc_cuda_alloc(0, 7 * 512, &q));
    CHECK_OK(tc_cuda_memory_stats(0, &st2));
    CHECK(q != p); /* the stream's block is not handed to the default stream */
    CHECK_OK(tc_cuda_free(0, q));
    /* errors: another device's stream, a NULL stream */
    if (tc_cuda_device_count() > 1) CHECK_ERR(tc_cuda_set_stream(1, s), TC_ERR_DEVICE, "belongs to cuda:0");
    CHECK_ERR(tc_cuda_stream_sync(NULL), TC_ERR_ARG, "NULL stream");
    CHECK_ERR(tc_cuda_set_stream(99, NULL), TC_ERR_ARG, "no device 99");
    /* a current stream is kept alive by being current */
    CHECK_OK(tc_cuda_set_stream(0, s));
    tc_cuda_stream_free(s);
    CHECK(tc_cuda_current_stream(0) == s);
    CHECK_OK(tc_cuda_stream_sync(s));
    CHECK_OK(tc_cuda_set_stream(0, NULL)); /* destroys it */
    ct_drop();
}

TEST(cuda_dev_stream_events)
{
    if (!have_device(ctest_failed)) return;
    tc_cuda_event *e0 = NULL, *e1 = NULL, *plain = NULL;
    tc_cuda_stream *s = NULL;
    CHECK_OK(tc_cuda_event_new(0, 1, &e0));
    CHECK_OK(tc_cuda_event_new(0, 1, &e1));
    CHECK_OK(tc_cuda_event_new(0, 0, &plain));
    CHECK_OK(tc_cuda_stream_new(0, &s));
    float ms = -1;
    CHECK_ERR(tc_cuda_event_elapsed(e0, e1, &ms), TC_ERR_ARG, "never recorded");
    int done = 0;
    CHECK_OK(tc_cuda_event_query(e0, &done)); /* never recorded: complete, as in CUDA */
    CHECK(done == 1);
    CHECK_OK(tc_cuda_event_record(e0, NULL)); /* the current (default) stream */
    tc_tensor *a = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(1, 2, 3, 4)))), *b = NULL;
    CHECK_OK(ct_run1(TC_OP_MUL, a, a, NULL, NULL, &b));
    ct_keep(b);
    CHECK_OK(tc_cuda_event_record(e1, NULL));
    CHECK_OK(tc_cuda_event_wait(e1, s)); /* s waits for the product */
    CHECK_OK(tc_cuda_event_record(plain, s));
    CHECK_OK(tc_cuda_event_sync(plain));
    CHECK_OK(tc_cuda_event_sync(e1));
    CHECK_OK(tc_cuda_event_query(e1, &done));
    CHECK(done == 1);
    CHECK_OK(tc_cuda_event_elapsed(e0, e1, &ms));
    CHECK(ms >= 0 && ms < 60000);
    CHECK_ERR(tc_cuda_event_elapsed(e0, plain, &ms), TC_ERR_ARG, "need timing");
    CHECK(SAME(host(b), 1, 4, 9, 16));
    if (tc_cuda_device_count() > 1) {
        tc_cuda_event *e = NULL;
        CHECK_OK(tc_cuda_event_new(1, 0, &e));
        CHECK_ERR(tc_cuda_event_record(e, s), TC_ERR_DEVICE, "event belongs to cuda:1 but the stream to cuda:0");
        CHECK_ERR(tc_cuda_event_elapsed(e0, e, &ms), TC_ERR_DEVICE, "cuda:0 and cuda:1");
        tc_cuda_event_free(e);
    }
    tc_cuda_event_free(e0);
    tc_cuda_event_free(e1);
    tc_cuda_event_free(plain);
    tc_cuda_stream_free(s);
    ct_drop();
}

TEST(cuda_dev_stream_pinned_and_async_copies)
{
    if (!have_device(ctest_failed)) return;
    tc_tensor *h = ct_keep(ct_from(TC_F32, 2, SZ(2, 3), VALS(1, 2, 3, 4, 5, 6))), *p = NULL;
    CHECK(!tc_tensor_is_pinned(h));
    CHECK_OK(tc_tensor_pin(h, &p));
    ct_keep(p);
    CHECK(tc_tensor_is_pinned(p) && p->device == TC_CPU && SAME(p, 1, 2, 3, 4, 5, 6));
    tc_tensor *p2 = NULL;
    CHECK_OK(tc_tensor_pin(p, &p2)); /* already pinned: itself */
    CHECK(p2 == p);
    tc_tensor_release(p2);
    /* pinned -> device, asynchronous; same dtype, then with a conversion */
    tc_tensor *d = NULL, *dh = NULL;
    CHECK_OK(tc_tensor_to_async(p, DEV, -1, &d));
    ct_keep(d);
    CHECK_OK(tc_tensor_to_async(p, DEV, TC_F64, &dh));
    ct_keep(dh);
    CHECK_OK(tc_cuda_stream_sync(tc_cuda_current_stream(0)));
    CHECK(d->device == DEV && d->dtype == TC_F32 && SAME(host(d), 1, 2, 3, 4, 5, 6));
    CHECK(dh->dtype == TC_F64 && SAME(host(dh), 1, 2, 3, 4, 5, 6));
    /* a strided pinned source (a transposed view) */
    tc_tensor *pt = ct_keep(ct_transposed(p, 0, 1)), *dt = NULL;
    CHECK_OK(tc_tensor_to_async(pt, DEV, -1, &dt));
    ct_keep(dt);
    CHECK(ct_shape_is(dt, 2, SZ(3, 2)) && SAME(host(dt), 1, 4, 2, 5, 3, 6));
    /* device -> host: a pinned result */
    tc_tensor *back = NULL;
    CHECK_OK(tc_tensor_to_async(dh, TC_CPU, TC_I32, &back));
    ct_keep(back);
    CHECK_OK(tc_cuda_synchronize(0));
    CHECK(tc_tensor_is_pinned(back) && back->dtype == TC_I32 && SAME(back, 1, 2, 3, 4, 5, 6));
    /* pageable host memory: a plain (synchronous) copy */
    tc_tensor *d2 = NULL;
    CHECK_OK(tc_tensor_to_async(h, DEV, -1, &d2));
    ct_keep(d2);
    CHECK(SAME(host(d2), 1, 2, 3, 4, 5, 6));
    tc_tensor *bad = (tc_tensor *)1;
    CHECK_ERR(tc_tensor_pin(d, &bad), TC_ERR_DEVICE, "only host tensors are pinned");
    CHECK(bad == NULL);
    ct_drop();
}

/* y = x * 2 + 1 captured once, replayed over new contents of x. */
TEST(cuda_dev_stream_graph_capture_replay)
{
    if (!have_device(ctest_failed)) return;
    tc_tensor *x = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(1, 2, 3, 4))));
    tc_tensor *hx2 = ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(10, 20, 30, 40)));
    tc_tensor *one = on_dev(ct_keep(ct_from(TC_F32, 0, NULL, VALS(1)))), *two = NULL, *y = NULL;
    tc_cuda_stream *before = tc_cuda_current_stream(0);
    CHECK(!tc_cuda_is_capturing(0));
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK(tc_cuda_is_capturing(0) && tc_cuda_current_stream(0) != before);
    CHECK_OK(ct_run1(TC_OP_ADD, x, x, NULL, P(.s = {1}), &two)); /* x + x */
    CHECK_OK(ct_run1(TC_OP_ADD, two, one, NULL, P(.s = {1}), &y)); /* + 1, broadcast */
    ct_keep(two), ct_keep(y);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK(g && !tc_cuda_is_capturing(0) && tc_cuda_current_stream(0) == before);
    CHECK(tc_cuda_graph_device(g) == 0);
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(SAME(host(y), 3, 5, 7, 9));
    /* new input values, same addresses: the replay sees them */
    const tc_tensor *src[1] = {hx2};
    tc_tensor *dst[1] = {x};
    CHECK_OK(tc_op_run(TC_OP_COPY, src, 1, NULL, dst, 1));
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(SAME(host(y), 21, 41, 61, 81));
    /* a CPU scalar joining a device op is captured with its value (staged) */
    tc_tensor *s3 = ct_keep(ct_from(TC_F32, 0, NULL, VALS(3))), *z = NULL;
    tc_cuda_stream *side = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &side));
    CHECK_OK(tc_cuda_graph_begin(0, side));
    CHECK(tc_cuda_current_stream(0) == side);
    CHECK_OK(ct_run1(TC_OP_MUL, x, s3, NULL, NULL, &z));
    ct_keep(z);
    tc_cuda_graph *g2 = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g2));
    CHECK_OK(tc_cuda_graph_replay(g2));
    CHECK(SAME(host(z), 30, 60, 90, 120));
    /* freeing a graph while capturing another is held back to the capture's end */
    CHECK_OK(tc_cuda_graph_begin(0, side));
    tc_cuda_graph_free(g);
    tc_cuda_graph *g3 = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g3)); /* an empty graph */
    CHECK_OK(tc_cuda_graph_replay(g3));
    tc_cuda_graph_free(g3);
    tc_cuda_graph_free(g2);
    tc_cuda_stream_free(side);
    CHECK_ERR(tc_cuda_graph_end(0, &g3), TC_ERR_ARG, "no capture open");
    CHECK_ERR(tc_cuda_graph_begin(0, tc_cuda_default_stream(0)), TC_ERR_ARG, "cannot be captured");
    ct_drop();
}

/* Each refusal fails its capture, names the op and the device, and leaves things usable. */
static void refused(int *ctest_failed, const char *what, tc_status (*body)(void), const char *text)
{
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_status s = body();
    if (s != TC_ERR_UNSUPPORTED || !strstr(tc_last_error(), text) ||
        !strstr(tc_last_error(), "while a CUDA graph is being captured on cuda:0")) {
        printf("  FAIL %s: %d '%s', wanted a refusal containing '%s'\n", what, (int)s, tc_last_error(), text);
        *ctest_failed = 1;
    }
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "failed, no graph was made");
    CHECK(strstr(tc_last_error(), text) != NULL && g == NULL && !tc_cuda_is_capturing(0));
    CHECK(tc_cuda_current_stream(0) == tc_cuda_default_stream(0));
}

static tc_tensor *g_x; /* the refusal bodies' device input */

static tc_status body_get(void)
{
    double v;
    return tc_tensor_get(g_x, SZ(1), &v);
}
static tc_status body_sync(void) { return tc_cuda_synchronize(0); }
static tc_status body_to_host(void)
{
    tc_tensor *h = NULL;
    tc_status s = tc_tensor_to(g_x, TC_CPU, -1, &h);
    tc_tensor_release(h);
    return s;
}
static tc_status body_random(void) /* the default generator's draws are captured (test_cuda_rngcap.c) */
{
    tc_generator *gen = NULL;
    tc_status s = tc_generator_new(1, &gen);
    tc_tensor *out[1] = {g_x};
    if (!s) s = tc_op_run(TC_OP_UNIFORM, NULL, 0, P(.s = {0, 1}, .gen = gen), out, 1);
    tc_generator_free(gen);
    return s;
}
static tc_status body_big_h2d(void)
{
    tc_tensor *h = ct_keep(ct_arange(TC_F32, 1, SZ(100)));
    tc_tensor *d = NULL;
    tc_status s = tc_tensor_to(h, DEV, -1, &d);
    tc_tensor_release(d);
    return s;
}
static tc_status body_fallback(void) /* the mock has no sort kernel */
{
    tc_tensor *res[2] = {NULL, NULL};
    const tc_tensor *in[1] = {g_x};
    tc_status s = tc_op_run(TC_OP_SORT, in, 1, P(.i = {0, 0}), res, 2);
    tc_tensor_release(res[0]);
    tc_tensor_release(res[1]);
    return s;
}
static tc_status body_count(void) /* nonzero counts on the host (index bounds do not: test_cuda_devcheck.c) */
{
    tc_tensor *r = NULL;
    tc_status s = ct_run1(TC_OP_NONZERO, g_x, NULL, NULL, NULL, &r);
    tc_tensor_release(r);
    return s;
}

TEST(cuda_dev_stream_capture_refusals)
{
    if (!have_device(ctest_failed)) return;
    g_x = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(4, 3, 2, 1))));
    if (!g_x) return ct_drop();
    refused(ctest_failed, "get", body_get, "copy device values to the host");
    refused(ctest_failed, "synchronize", body_sync, "cuda synchronize: cannot wait for the device");
    refused(ctest_failed, "to cpu", body_to_host, "copy device values to the host");
    refused(ctest_failed, "uniform", body_random, "uniform: cannot draw from a generator other than the default one");
    refused(ctest_failed, "big h2d", body_big_h2d, "copy 400 bytes from the host");
    refused(ctest_failed, "nonzero", body_count, "nonzero: cannot read device values on the host");
    if (mock_backend()) refused(ctest_failed, "sort", body_fallback, "sort: cannot run on the host");
    /* an ignored refusal still fails the capture; afterwards everything works again */
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    (void)body_get();
    tc_tensor *y = NULL;
    CHECK_OK(ct_run1(TC_OP_ADD, g_x, g_x, NULL, P(.s = {1}), &y));
    ct_keep(y);
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "copy device values to the host");
    CHECK(g == NULL);
    tc_tensor *y2 = NULL;
    CHECK_OK(ct_run1(TC_OP_ADD, g_x, g_x, NULL, P(.s = {1}), &y2));
    ct_keep(y2);
    CHECK(SAME(host(y2), 8, 6, 4, 2));
    CHECK_OK(tc_cuda_synchronize(0));
    ct_drop();
}

/* ---- what CUDA itself forbids around a capture (the CUDA backend's checks: a GPU or the
 * emulator, whose runtime enforces the same rules; the mock has none of them) ---------------- */

struct other_thread {
    tc_cuda_graph *free_me;
    tc_status sync;
    char msg[300];
};

static void *other_thread_body(void *arg)
{
    struct other_thread *o = arg;
    o->sync = tc_cuda_synchronize(0); /* a wait for the whole device */
    snprintf(o->msg, sizeof o->msg, "%s", tc_last_error());
    tc_cuda_graph_free(o->free_me); /* waits for that graph's replays only */
    return NULL;
}

TEST(cuda_dev_stream_capture_cuda_rules)
{
    if (!have_device(ctest_failed)) return;
    if (mock_backend()) {
        printf("  skip: checks of the CUDA backend (a GPU or the emulator), not the mock\n");
        return;
    }
    tc_tensor *x = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(1, 2, 3, 4)))), *y = NULL, *z = NULL;
    tc_cuda_graph *old = NULL, *g = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL)); /* a graph replayed once, freed below by another thread */
    CHECK_OK(ct_run1(TC_OP_ADD, x, x, NULL, P(.s = {1}), &y));
    ct_keep(y);
    CHECK_OK(tc_cuda_graph_end(0, &old));
    CHECK_OK(tc_cuda_graph_replay(old));
    /* While this thread captures (allocating: the product is a new tensor), another thread's
     * wait for the whole device is refused -- CUDA would invalidate the capture -- and its
     * freeing of a graph waits for that graph only, so the capture survives both. */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(ct_run1(TC_OP_MUL, x, x, NULL, NULL, &z));
    ct_keep(z);
    struct other_thread o = {.free_me = old, .sync = TC_OK};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread_body, &o) == 0);
    pthread_join(t, NULL);
    CHECK(o.sync == TC_ERR_UNSUPPORTED && strstr(o.msg, "while another thread captures a CUDA graph on it"));
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(SAME(host(z), 1, 4, 9, 16) && SAME(host(y), 2, 4, 6, 8));
    tc_cuda_graph_free(g);
    /* A capturing stream may wait on an event recorded in the capture, not on one recorded
     * outside it (CUDA fails that wait and invalidates the capture). */
    tc_cuda_event *outside = NULL, *inside = NULL;
    CHECK_OK(tc_cuda_event_new(0, 0, &outside));
    CHECK_OK(tc_cuda_event_new(0, 0, &inside));
    CHECK_OK(tc_cuda_event_record(outside, NULL));
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_cuda_stream *cap = tc_cuda_current_stream(0);
    CHECK_OK(tc_cuda_event_record(inside, cap));
    CHECK_OK(tc_cuda_event_wait(inside, cap));
    CHECK_ERR(tc_cuda_event_wait(outside, cap), TC_ERR_UNSUPPORTED, "cannot wait on an event recorded outside");
    g = NULL;
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "cannot wait on an event recorded outside");
    CHECK(g == NULL);
    CHECK_OK(tc_cuda_event_wait(outside, NULL)); /* outside a capture: fine */
    CHECK_OK(tc_cuda_synchronize(0));
    tc_cuda_event_free(outside);
    tc_cuda_event_free(inside);
    ct_drop();
}

/* A long row sorted inside a capture (sort.cu's rows past the in-block sort): one row goes
 * to cub's device-wide radix sort, which a graph records and replays on new values; several
 * rows go to cub's segmented sort, which may wait on the host, so the capture refuses them,
 * unless they go one row per chunk (TOCHA_CUDA_SORT_CHUNK = one row: sort.cu's rows longer
 * than a chunk), each a radix sort. The CUDA backend's kernels (the mock has no sort kernel:
 * it skips). */
TEST(cuda_dev_stream_capture_long_sorts)
{
    if (!have_device(ctest_failed)) return;
    if (mock_backend()) {
        printf("  skip: the CUDA backend's sort (a GPU or the emulator), not the mock\n");
        return;
    }
    enum { N = 3000, STEP = 1237 }; /* i * STEP mod N: a permutation of 0..N-1 (gcd 1) */
    static double vals[2 * N], neg[N];
    int64_t at_max = 0, at_min = 0;
    for (int64_t i = 0; i < 2 * N; i++) {
        vals[i] = (double)(i * STEP % N);
        if (i < N) neg[i] = -vals[i];
        if (i < N && vals[i] == N - 1) at_max = i;
        if (i < N && vals[i] == 0) at_min = i;
    }
    tc_tensor *x = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(N), vals)));
    tc_tensor *x2 = on_dev(ct_keep(ct_from(TC_F32, 2, SZ(2, N), vals)));
    tc_tensor *flipped = on_dev(ct_keep(ct_from(TC_F32, 1, SZ(N), neg)));
    if (!x || !x2 || !flipped) return ct_drop();
    tc_tensor *res[2] = {NULL, NULL};
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(tc_op_run(TC_OP_SORT, (const tc_tensor *const[]){x}, 1, P(.i = {0, 1}), res, 2)); /* descending */
    ct_keep(res[0]), ct_keep(res[1]);
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK_OK(tc_cuda_graph_replay(g));
    tc_tensor *v = host(res[0]), *ix = host(res[1]);
    CHECK(v && ix && ct_at(v, 0) == N - 1 && ct_at(v, N - 1) == 0 && ct_at(ix, 0) == at_max &&
          ct_at(ix, N - 1) == at_min);
    /* new values in x, the same graph: sorted afresh */
    CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){flipped}, 1, P(.i = {TC_F32}), (tc_tensor *[]){x}, 1));
    CHECK_OK(tc_cuda_graph_replay(g));
    v = host(res[0]), ix = host(res[1]);
    CHECK(v && ix && ct_at(v, 0) == 0 && ct_at(v, N - 1) == -(N - 1) && ct_at(ix, 0) == at_min &&
          ct_at(ix, N - 1) == at_max);
    tc_cuda_graph_free(g);
    /* two rows of 3000: refused inside the capture, which then fails; fine outside it */
    tc_tensor *r2[2] = {NULL, NULL};
    g = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_ERR(tc_op_run(TC_OP_SORT, (const tc_tensor *const[]){x2}, 1, P(.i = {1, 0}), r2, 2), TC_ERR_UNSUPPORTED,
              "sort: cannot sort 2 rows of 3000 elements while a CUDA graph is being captured on cuda:0");
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "cannot sort 2 rows");
    CHECK(g == NULL && r2[0] == NULL && r2[1] == NULL);
    CHECK_OK(tc_op_run(TC_OP_SORT, (const tc_tensor *const[]){x2}, 1, P(.i = {1, 0}), r2, 2));
    ct_keep(r2[0]), ct_keep(r2[1]);
    tc_tensor *v2 = host(r2[0]);
    CHECK(v2 && ct_at(v2, 0) == 0 && ct_at(v2, N - 1) == N - 1 && ct_at(v2, N) == 0 && ct_at(v2, 2 * N - 1) == N - 1);
    /* the same two rows, one per chunk: captured, and the replay sorts them again */
    setenv("TOCHA_CUDA_SORT_CHUNK", "3000", 1);
    tc_tensor *r3[2] = {NULL, NULL};
    g = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(tc_op_run(TC_OP_SORT, (const tc_tensor *const[]){x2}, 1, P(.i = {1, 0}), r3, 2));
    ct_keep(r3[0]), ct_keep(r3[1]);
    CHECK_OK(tc_cuda_graph_end(0, &g));
    unsetenv("TOCHA_CUDA_SORT_CHUNK");
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {0}), (tc_tensor *[]){r3[0]}, 1)); /* the replay rewrites it */
    CHECK_OK(tc_cuda_graph_replay(g));
    tc_tensor *v3 = host(r3[0]), *i3 = host(r3[1]);
    CHECK(v3 && i3 && ct_at(v3, 0) == 0 && ct_at(v3, N - 1) == N - 1 && ct_at(v3, N) == 0 &&
          ct_at(v3, 2 * N - 1) == N - 1 && ct_at(i3, 0) == at_min && ct_at(i3, N + N - 1) == at_max);
    tc_cuda_graph_free(g);
    CHECK_OK(tc_cuda_synchronize(0));
    ct_drop();
}
