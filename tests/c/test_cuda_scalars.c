/* test_cuda_scalars.c -- host scalars joining device ops are copied without a host wait
 * (core/cuda_scalars.c), and the page-locked ring they pass through is not rewritten before
 * the device has read it.
 *
 * cuda_scalars_without_device runs everywhere. The cuda_dev_scalars_* tests need a device:
 * without one they skip; tests/run.sh runs them again over the mock backend. The mock runs
 * work when it is queued, so these tests hold a stream (tc_cuda_mock_hold): events recorded
 * on it stay incomplete until a host wait covers it (a plain copy to or from the host is
 * one, as the real backend's copy waits for the stream). What that shows: no host wait per
 * scalar, and the wait before a lap of the ring reuses a chunk, for one stream and for
 * copies alternating between streams. What it cannot show: a real copy engine reading a
 * slot late (never run on a GPU yet).
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "cuda/cuda_api.h"
#include "internal.h"

#define DEV TC_DEVICE_CUDA(0)
#define RING_SLOTS (TC_CUDA_SCALARS_CHUNKS * TC_CUDA_SCALARS_CHUNK_SLOTS)

TEST(cuda_scalars_without_device)
{
    char why[256];
    if (tc_cuda_available(why, sizeof why) && tc_cuda_device_count() > 0) return; /* the device tests cover it */
    float v = 1, d = 0;
    CHECK_ERR(tc_cuda_scalars_copy(DEV, &d, &v, sizeof v), TC_ERR_DEVICE, "copy: CUDA unavailable");
    tc_tensor *s = ct_keep(ct_from(TC_F32, 0, NULL, VALS(2))), *r = (tc_tensor *)1;
    CHECK_ERR(tc_cuda_scalars_to_device(s, DEV, &r), TC_ERR_DEVICE, "CUDA unavailable");
    CHECK(r == NULL);
    CHECK_OK(tc_cuda_scalars_copy(DEV, &d, &v, 0)); /* nothing to copy: nothing asked of CUDA */
    ct_drop();
}

/* x + s on the device, s a 0-dim host tensor holding v; x is replaced by the result. */
static int add_scalar(tc_tensor **x, double v)
{
    tc_tensor *s = ct_from(TC_F32, 0, NULL, VALS(v)), *r = NULL;
    tc_status st = s ? ct_run1(TC_OP_ADD, *x, s, NULL, P(.s = {1}), &r) : TC_ERR_MEMORY;
    tc_tensor_release(s);
    if (st) {
        printf("  add: %s\n", tc_last_error());
        return 0;
    }
    tc_tensor_release(*x);
    *x = r;
    return 1;
}

/* Whether work recorded on s just now has completed (an event recorded and queried). */
static int stream_done(tc_cuda_stream *s)
{
    tc_cuda_event *e = NULL;
    int done = -1;
    if (tc_cuda_event_new(0, 0, &e) || tc_cuda_event_record(e, s) || tc_cuda_event_query(e, &done))
        printf("  event: %s\n", tc_last_error());
    tc_cuda_event_free(e);
    return done;
}

/* A device tensor of n zeros (not kept: add_scalar replaces it). */
static tc_tensor *dev_zeros(int64_t n)
{
    tc_tensor *h = NULL, *t = NULL;
    if (tc_tensor_new(TC_F32, 1, SZ(n), &h) == TC_OK) memset(h->storage->data, 0, (size_t)n * sizeof(float));
    if (!h || tc_tensor_to(h, DEV, -1, &t)) printf("  zeros: %s\n", tc_last_error());
    tc_tensor_release(h);
    return t;
}

/* Puts the ring on a known footing: a copy on the default stream, so that the next copy
 * on any other stream starts a chunk. */
static void ring_reset(int *ctest_failed)
{
    tc_tensor *x = dev_zeros(1);
    CHECK_OK(tc_cuda_set_stream(0, NULL));
    CHECK(x && add_scalar(&x, 0));
    tc_tensor_release(x);
}

TEST(cuda_dev_scalars_values)
{
    char why[256];
    if (!ct_cuda_device(why, sizeof why)) return;
    /* more copies than the ring has slots, each value different: every one arrives */
    tc_tensor *x = dev_zeros(3);
    int ok = x != NULL;
    for (int i = 1; i <= RING_SLOTS + 300 && ok; i++) ok = add_scalar(&x, i);
    double want = (double)(RING_SLOTS + 300) * (RING_SLOTS + 301) / 2;
    tc_tensor *h = ok ? ct_to(x, TC_CPU) : NULL;
    CHECK(h && ct_at(h, 0) == want && ct_at(h, 2) == want);
    tc_tensor_release(x);

    /* the optimizer step's scalar vector, and what does not fit a slot or is strided */
    tc_tensor *v = ct_keep(ct_arange(TC_F64, 1, SZ(8))), *d = NULL;
    CHECK_OK(tc_cuda_scalars_to_device(v, DEV, &d));
    ct_keep(d);
    CHECK(d && d->device == DEV && ct_same_vals(ct_to(d, TC_CPU), VALS(0, 1, 2, 3, 4, 5, 6, 7), 8));
    tc_tensor *big = ct_keep(ct_arange(TC_F32, 1, SZ(100))), *bd = NULL;
    CHECK_OK(tc_cuda_scalars_to_device(big, DEV, &bd));
    ct_keep(bd);
    CHECK(bd && ct_at(ct_to(bd, TC_CPU), 99) == 99);
    tc_tensor *m = ct_keep(ct_arange(TC_F32, 2, SZ(2, 3))), *mt = ct_keep(ct_transposed(m, 0, 1)), *md = NULL;
    CHECK_OK(tc_cuda_scalars_to_device(mt, DEV, &md));
    ct_keep(md);
    CHECK(md && ct_same_vals(ct_to(md, TC_CPU), VALS(0, 3, 1, 4, 2, 5), 6));
    ct_drop();
}

TEST(cuda_dev_scalars_no_wait_until_a_lap)
{
    char why[256];
    if (!ct_cuda_device(why, sizeof why)) return;
    ct_hold_fn hold = ct_cuda_mock_hold();
    if (!hold) {
        printf("  skip: needs the mock's stream holds (a GPU runs cuda_dev_scalars_values)\n");
        return;
    }
    tc_cuda_stream *s = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &s));
    tc_tensor *x = dev_zeros(2);
    ring_reset(ctest_failed);
    CHECK_OK(tc_cuda_set_stream(0, s));
    void *hs = ct_stream_handle(s);
    CHECK(x && hs && hold(0, hs, 1) == 0);
    CHECK(stream_done(s) == 0); /* the hold works */
    int ok = x != NULL;
    /* a full lap: every slot written once, and nothing waited for */
    for (int i = 0; i < RING_SLOTS && ok; i++) ok = add_scalar(&x, 1);
    CHECK(ok && stream_done(s) == 0);
    /* the next copy would rewrite the lap's first slot: it waits for the copy that read it */
    CHECK(ok && add_scalar(&x, 1));
    CHECK(stream_done(s) == 1);
    tc_tensor *h = x ? ct_to(x, TC_CPU) : NULL;
    CHECK(h && ct_at(h, 1) == RING_SLOTS + 1);

    /* copies on two streams in turn: each starts a chunk, so a lap is one copy per chunk */
    tc_cuda_stream *s2 = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &s2));
    ring_reset(ctest_failed);
    CHECK(hold(0, hs, 1) == 0);
    for (int i = 0; i < TC_CUDA_SCALARS_CHUNKS && ok; i++) {
        CHECK_OK(tc_cuda_set_stream(0, i % 2 ? s2 : s));
        ok = add_scalar(&x, 1);
    }
    CHECK(ok && stream_done(s) == 0);
    CHECK_OK(tc_cuda_set_stream(0, s)); /* the last copy was on s2: a new chunk, the first one written on s */
    CHECK(ok && add_scalar(&x, 1));
    CHECK(stream_done(s) == 1);
    CHECK_OK(tc_cuda_set_stream(0, NULL));
    tc_tensor_release(x);
    tc_cuda_stream_free(s);
    tc_cuda_stream_free(s2);
    ct_drop();
}
