/* test_cuda_record.c -- tc_tensor_record_stream (core/cuda_record.c): a block used on a
 * second stream is handed out again only after that stream's work up to the release.
 *
 * cuda_record_bad_input runs everywhere. The cuda_dev_record_* tests need a device: without
 * one they check the refusal and pass; tests/run.sh runs them again over the mock backend.
 * The mock runs work when it is queued, so its events complete at once; these tests hold a
 * stream through the mock's tc_cuda_mock_hold (found with dlsym) so that events recorded on
 * it stay incomplete until the hold is lifted or a host wait covers the stream. What that
 * shows: the deferral bookkeeping (the block stays allocated, is not handed out, and goes
 * back exactly when the event completes, when synchronize or empty_cache drain it, and at an
 * out-of-memory retry), and the capture rule. What it cannot show: a real kernel still
 * reading the memory (on a GPU only the non-held checks run; never run there yet).
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "cuda/cuda_api.h"
#include "cuda_record.h"
#include "internal.h"
#include <pthread.h>
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)

TEST(cuda_record_bad_input)
{
    tc_tensor *h = NULL;
    CHECK_ERR(tc_tensor_record_stream(NULL, NULL), TC_ERR_ARG, "record_stream: NULL tensor");
    CHECK_OK(tc_tensor_new(TC_F32, 2, SZ(2, 3), &h));
    ct_keep(h);
    CHECK_ERR(tc_tensor_record_stream(h, NULL), TC_ERR_DEVICE,
              "record_stream: the tensor of size (2,3) is on cpu; only CUDA tensors record streams");
    CHECK(tc_cuda_record_pending(-1) == 0 && tc_cuda_record_pending(99) == 0);
    tc_cuda_record_poll(-1); /* no-ops */
    tc_cuda_record_poll(99);
    CHECK(tc_cuda_record_on_free(99, (void *)16) == 0 && tc_cuda_record_on_free(0, NULL) == 0);
    ct_drop();
}

static int have_device(int *ctest_failed)
{
    char why[512];
    if (ct_cuda_device(why, sizeof why)) return 1;
    tc_tensor *h = ct_keep(ct_from(TC_F32, 1, SZ(2), VALS(1, 2)));
    CHECK(tc_tensor_record_stream(h, NULL) == TC_ERR_DEVICE);
    ct_drop();
    return 0;
}

static tc_tensor *dev_zeros(int64_t n)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new_on(DEV, TC_F32, 1, SZ(n), &t) != TC_OK) printf("  new_on: %s\n", tc_last_error());
    return t;
}

static int64_t allocated(void)
{
    tc_cuda_memstats st;
    return tc_cuda_memory_stats(0, &st) == TC_OK ? st.allocated_bytes : -1;
}

TEST(cuda_dev_record_stream_defers_reuse)
{
    if (!have_device(ctest_failed)) return;
    ct_hold_fn hold = ct_cuda_mock_hold();
    if (ct_cuda_mock()) CHECK(hold != NULL);
    tc_cuda_stream *home = NULL, *user = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &home)); /* where the tensors are allocated */
    CHECK_OK(tc_cuda_stream_new(0, &user)); /* the second stream that uses them */
    CHECK_OK(tc_cuda_empty_cache(0));
    CHECK_OK(tc_cuda_set_stream(0, home));
    const int64_t n = 1000; /* 4000 bytes: a 4096-byte block */

    /* control: without record_stream, a released block is the next one of its size */
    tc_tensor *c = dev_zeros(n);
    void *pc = c ? c->storage->data : NULL;
    tc_tensor_release(c);
    c = dev_zeros(n);
    CHECK(c && c->storage->data == pc);
    tc_tensor_release(c);

    tc_tensor *x = dev_zeros(n);
    CHECK(x != NULL);
    if (!x) goto out;
    void *px = x->storage->data;
    CHECK_OK(tc_tensor_record_stream(x, user));
    CHECK_OK(tc_tensor_record_stream(x, user)); /* twice: one record */
    CHECK(tc_cuda_record_tracked(0) == 1);
    if (hold) {
        void *hu = ct_stream_handle(user);
        CHECK(hu != NULL && hold(0, hu, 1) == 0); /* work queued on `user` stays unfinished */
        int64_t a0 = allocated();
        tc_tensor_release(x); /* the storage goes: the block waits for `user` */
        CHECK(tc_cuda_record_tracked(0) == 0 && tc_cuda_record_pending(0) == 1);
        CHECK(allocated() == a0); /* still allocated in the allocator's books */
        tc_tensor *y = dev_zeros(n); /* the same stream and size: must not get x's block */
        CHECK(y && y->storage->data != px);
        CHECK(tc_cuda_record_pending(0) == 1 && allocated() == a0 + 4096);
        tc_cuda_record_poll(0); /* still held: nothing released */
        CHECK(tc_cuda_record_pending(0) == 1);
        CHECK(hold(0, hu, 0) == 0); /* `user` finishes its work */
        tc_tensor *z = dev_zeros(n); /* the allocation polls: x's block is back, and reused */
        CHECK(tc_cuda_record_pending(0) == 0);
        CHECK(z && z->storage->data == px);
        CHECK(allocated() == a0 + 4096);
        tc_tensor_release(y);
        tc_tensor_release(z);

        /* drained by synchronize (a host wait covers the held stream) */
        x = dev_zeros(n);
        CHECK_OK(tc_tensor_record_stream(x, user));
        CHECK(hold(0, hu, 1) == 0);
        tc_tensor_release(x);
        CHECK(tc_cuda_record_pending(0) == 1);
        CHECK_OK(tc_cuda_synchronize(0));
        CHECK(tc_cuda_record_pending(0) == 0);

        /* drained by empty_cache: the block is waited for, released, and its segment freed */
        x = dev_zeros(n);
        CHECK_OK(tc_tensor_record_stream(x, user));
        CHECK(hold(0, hu, 1) == 0);
        tc_tensor_release(x);
        CHECK(tc_cuda_record_pending(0) == 1);
        CHECK_OK(tc_cuda_empty_cache(0));
        tc_cuda_memstats st;
        CHECK_OK(tc_cuda_memory_stats(0, &st));
        CHECK(tc_cuda_record_pending(0) == 0 && st.allocated_bytes == a0 - 4096);

        /* NULL: the current stream of the tensor's device (here `home`, which is held) */
        x = dev_zeros(n);
        void *hh = ct_stream_handle(home);
        CHECK_OK(tc_tensor_record_stream(x, NULL));
        CHECK(hold(0, hh, 1) == 0);
        tc_tensor_release(x);
        tc_cuda_record_poll(0);
        CHECK(tc_cuda_record_pending(0) == 1);
        CHECK(hold(0, hh, 0) == 0);
        tc_cuda_record_poll(0);
        CHECK(tc_cuda_record_pending(0) == 0);

        /* the thread's error message survives a deferred release */
        x = dev_zeros(n);
        CHECK_OK(tc_tensor_record_stream(x, user));
        (void)tc_set_error(TC_ERR_ARG, "the caller's message");
        tc_tensor_release(x);
        CHECK(strcmp(tc_last_error(), "the caller's message") == 0);
        CHECK_OK(tc_cuda_synchronize(0));
        CHECK(tc_cuda_record_pending(0) == 0);
    } else {
        /* a GPU: the events are real; after a synchronize nothing waits any more */
        tc_tensor_release(x);
        CHECK(tc_cuda_record_tracked(0) == 0);
        CHECK_OK(tc_cuda_synchronize(0));
        CHECK(tc_cuda_record_pending(0) == 0);
    }

    /* an empty tensor has no memory to keep: nothing recorded */
    tc_tensor *e = NULL;
    CHECK_OK(tc_tensor_new_empty_on(DEV, TC_F32, &e));
    CHECK_OK(tc_tensor_record_stream(e, user));
    CHECK(tc_cuda_record_tracked(0) == 0);
    tc_tensor_release(e);

    /* a stream of another device is refused, naming both; nothing recorded */
    if (tc_cuda_device_count() > 1) {
        tc_cuda_stream *s1 = NULL;
        CHECK_OK(tc_cuda_stream_new(1, &s1));
        x = dev_zeros(6);
        CHECK_ERR(tc_tensor_record_stream(x, s1), TC_ERR_DEVICE,
                  "record_stream: the tensor of size (6) is on cuda:0 but the stream belongs to cuda:1");
        CHECK(tc_cuda_record_tracked(0) == 0 && tc_cuda_record_tracked(1) == 0);
        tc_tensor_release(x);
        tc_cuda_stream_free(s1);
    }
out:
    CHECK_OK(tc_cuda_set_stream(0, NULL));
    tc_cuda_stream_free(home);
    tc_cuda_stream_free(user);
    ct_drop();
}

/* PyTorch's rule in a capture: record_stream is allowed; a block released during the
 * capture waits (its events unrecorded) until the capture has ended. */
TEST(cuda_dev_record_stream_in_capture)
{
    if (!have_device(ctest_failed)) return;
    tc_cuda_stream *user = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &user));
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_tensor *x = dev_zeros(64);
    CHECK(x != NULL);
    CHECK_OK(tc_tensor_record_stream(x, user));
    tc_tensor_release(x);
    CHECK(tc_cuda_record_pending(0) == 1);
    tc_cuda_record_poll(0); /* no queries inside the capture */
    CHECK(tc_cuda_record_pending(0) == 1);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g)); /* the capture did not fail for it */
    CHECK(g != NULL);
    /* after the capture the events are recorded, and complete once the device has reached
     * them: polled (a GPU needs a moment; the emulator runs the stream's work at the first
     * query, which still says "not ready") */
    for (int i = 0; i < 100000 && tc_cuda_record_pending(0) > 0; i++) tc_cuda_record_poll(0);
    tc_tensor *y = dev_zeros(64);
    CHECK(tc_cuda_record_pending(0) == 0);
    tc_tensor_release(y);
    tc_cuda_graph_free(g);
    tc_cuda_stream_free(user);
}

/* Out of memory while blocks wait for recorded streams: they are waited for and the
 * allocation retried. Needs the mock's 64 MB devices (tests/run.sh). */
TEST(cuda_dev_record_stream_oom_retry)
{
    if (!have_device(ctest_failed)) return;
    ct_hold_fn hold = ct_cuda_mock_hold();
    const char *cap = getenv("TOCHA_CUDA_MOCK_CAPACITY");
    if (!hold || !cap || strcmp(cap, "64M") != 0) {
        printf("  skip: needs the mock backend with 64 MB devices\n");
        return;
    }
    tc_cuda_stream *user = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &user));
    CHECK_OK(tc_cuda_empty_cache(0));
    const int64_t n = 10 << 20; /* 40 MB */
    tc_tensor *x = dev_zeros(n);
    CHECK(x != NULL);
    if (!x) return;
    CHECK_OK(tc_tensor_record_stream(x, user));
    CHECK(hold(0, ct_stream_handle(user), 1) == 0);
    tc_tensor_release(x);
    CHECK(tc_cuda_record_pending(0) == 1);
    tc_tensor *y = dev_zeros(n); /* does not fit beside the waiting block: drained, retried */
    CHECK(y != NULL && tc_cuda_record_pending(0) == 0);
    tc_tensor_release(y);
    tc_cuda_stream_free(user);
    CHECK_OK(tc_cuda_empty_cache(0));
}

/* ---- a recorded stream captured by another thread ----------------------------------------- */

/* The other thread: captures `stream` (work on it included), says so, waits for the word,
 * then ends the capture. */
typedef struct other_capture {
    tc_cuda_stream *stream;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int begun, go;
    tc_status begin_st, end_st;
    char why[512];
    tc_cuda_graph *graph;
} other_capture;

static void *capture_thread(void *arg)
{
    other_capture *o = arg;
    o->begin_st = tc_cuda_graph_begin(0, o->stream);
    tc_tensor *z = o->begin_st ? NULL : dev_zeros(16); /* some work in the graph */
    pthread_mutex_lock(&o->mu);
    o->begun = 1;
    pthread_cond_broadcast(&o->cv);
    while (!o->go) pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
    if (!o->begin_st) {
        o->end_st = tc_cuda_graph_end(0, &o->graph);
        snprintf(o->why, sizeof o->why, "%s", o->end_st ? tc_last_error() : "");
    }
    tc_tensor_release(z);
    return NULL;
}

/* A block recorded on a stream that another thread captures, released meanwhile: its event
 * would join that thread's graph (and a query of it invalidate the capture), so it waits
 * until the capture has ended; the capture succeeds. */
TEST(cuda_dev_record_stream_captured_by_another_thread)
{
    if (!have_device(ctest_failed)) return;
    other_capture o = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    CHECK_OK(tc_cuda_stream_new(0, &o.stream));
    tc_tensor *x = dev_zeros(64);
    CHECK(x != NULL);
    CHECK_OK(tc_tensor_record_stream(x, o.stream));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, capture_thread, &o) == 0);
    pthread_mutex_lock(&o.mu);
    while (!o.begun) pthread_cond_wait(&o.cv, &o.mu);
    pthread_mutex_unlock(&o.mu);
    CHECK_OK(o.begin_st);
    CHECK(tc_cuda_stream_captured(o.stream));
    tc_tensor_release(x); /* released while the stream is captured */
    tc_cuda_record_poll(0);
    CHECK(tc_cuda_record_pending(0) == 1); /* no event recorded into the other capture */
    pthread_mutex_lock(&o.mu);
    o.go = 1;
    pthread_cond_broadcast(&o.cv);
    pthread_mutex_unlock(&o.mu);
    pthread_join(th, NULL);
    if (o.end_st) printf("  the other thread's capture: %s\n", o.why);
    CHECK_OK(o.end_st);
    CHECK(o.graph != NULL && !tc_cuda_stream_captured(o.stream));
    CHECK_OK(tc_cuda_synchronize(0)); /* drained: the event recorded now, and waited for */
    CHECK(tc_cuda_record_pending(0) == 0);
    tc_cuda_graph_free(o.graph);
    tc_cuda_stream_free(o.stream);
}
