/* test_graph_cuda_scratch.c -- the scratch of generated full-reduction kernels
 * (core/graph/cuda_launch.c: partials and a completion counter per launch) comes from the
 * caching allocator on the current stream (tc_cuda_scratch_take, core/cuda_record.c), so
 * the same compiled graph run on two streams at once never shares it.
 *
 * The launch itself needs the CUDA driver (never run on a GPU yet); this tests what the
 * launch relies on, over the mock (tests/run.sh) or a GPU: two streams holding scratch at
 * once get distinct blocks; a block given back is reused by the next launch on the same
 * stream only (the stream orders it after the launch that used it), never by another
 * stream's; the counter is zeroed for every launch (over the mock, whose device memory is
 * host memory, the bytes are read back), and a capture takes its scratch from its private
 * pool.
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "cuda/cuda_api.h"
#include "cuda_record.h"
#include "internal.h"
#include <stdlib.h>

static int have_device(int *ctest_failed)
{
    char why[512];
    if (ct_cuda_device(why, sizeof why)) return 1;
    void *p = (void *)1;
    CHECK(tc_cuda_scratch_take(0, 64, 0, &p) == TC_ERR_DEVICE && p == NULL);
    return 0;
}

/* Over the mock: the counter's bytes are zero. */
static int counter_zero(void *scratch, size_t off)
{
    if (!ct_cuda_mock()) return 1;
    unsigned char *c = (unsigned char *)scratch + off;
    return c[0] == 0 && c[1] == 0 && c[2] == 0 && c[3] == 0 && c[7] == 0;
}

TEST(cuda_dev_graph_scratch_per_stream)
{
    if (!have_device(ctest_failed)) return;
    CHECK_ERR(tc_cuda_scratch_take(0, 64, 0, NULL), TC_ERR_ARG, "cuda scratch: NULL result");
    tc_cuda_stream *a = NULL, *b = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &a));
    CHECK_OK(tc_cuda_stream_new(0, &b));
    CHECK_OK(tc_cuda_empty_cache(0));
    const size_t part = sizeof(double) * 528, total = part + sizeof(double); /* 528 blocks' partials, the counter */
    void *pa = NULL, *pb = NULL, *pa2 = NULL, *pb2 = NULL;

    /* launches in flight on two streams: two blocks */
    CHECK_OK(tc_cuda_set_stream(0, a));
    CHECK_OK(tc_cuda_scratch_take(0, total, part, &pa));
    CHECK(counter_zero(pa, part));
    CHECK_OK(tc_cuda_set_stream(0, b));
    CHECK_OK(tc_cuda_scratch_take(0, total, part, &pb));
    CHECK(pa && pb && pa != pb);

    /* a's launch queued: its block goes back; b's next launch does not get it */
    if (ct_cuda_mock()) memset((char *)pa + part, 0xff, 8); /* as a kernel that left it dirty */
    CHECK_OK(tc_cuda_set_stream(0, a));
    tc_cuda_scratch_done(0, pa);
    CHECK_OK(tc_cuda_set_stream(0, b));
    CHECK_OK(tc_cuda_scratch_take(0, total, part, &pb2));
    CHECK(pb2 != pa && pb2 != pb);
    tc_cuda_scratch_done(0, pb2);
    /* a's next launch does (ordered after the first by the stream), counter zeroed again */
    CHECK_OK(tc_cuda_set_stream(0, a));
    CHECK_OK(tc_cuda_scratch_take(0, total, part, &pa2));
    CHECK(pa2 == pa && counter_zero(pa2, part));
    tc_cuda_scratch_done(0, pa2);
    CHECK_OK(tc_cuda_set_stream(0, b));
    tc_cuda_scratch_done(0, pb);

    /* in a capture: the capture's private pool, not the streams' blocks */
    void *pc = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, a));
    CHECK_OK(tc_cuda_scratch_take(0, total, part, &pc));
    CHECK(pc && pc != pa && pc != pb);
    tc_cuda_scratch_done(0, pc);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    tc_cuda_graph_free(g);

    tc_cuda_memstats st;
    CHECK_OK(tc_cuda_set_stream(0, NULL));
    tc_cuda_stream_free(a);
    tc_cuda_stream_free(b);
    CHECK_OK(tc_cuda_memory_stats(0, &st));
    CHECK_OK(tc_cuda_empty_cache(0));
}
