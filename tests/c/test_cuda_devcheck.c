/* test_cuda_devcheck.c -- index bounds checked on the device inside CUDA graphs
 * (cuda_api.h version 5, devcheck_take; core/shape_index.c index_values, core/cuda_stream.c
 * tc_cuda_waited, core/graph/capture.c).
 *
 * Eager index calls check their indices on the host (exact message, nothing changed). While
 * a capture is open, gather/index_select & co. leave the check to the kernel: a replay with
 * a bad index skips that element and the error surfaces, naming the op, the index and the
 * dim's size, at the next host wait (synchronize, stream sync, a copy to the host); then it
 * is cleared. Named cuda_dev_* so that tests/run.sh runs them over the mock backend too,
 * which executes gather and index_select itself (tests/c/mock_cuda_ops.c) with the same
 * device-side check; without a device they skip.
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "graph/graph.h"
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)

static int have_device(void)
{
    char why[512];
    return ct_cuda_device(why, sizeof why);
}
static tc_tensor *dev_of(const tc_tensor *t) { return ct_to(t, DEV); }
static tc_tensor *host_of(const tc_tensor *t) { return ct_to(t, TC_CPU); }
#define op ct_op

/* dst (a static device input) takes the host values src. */
static tc_status fill(tc_tensor *dst, const tc_tensor *src)
{
    const tc_tensor *in[1] = {src};
    tc_tensor *out[1] = {dst};
    return tc_op_run(TC_OP_COPY, in, 1, P(.i = {-1}), out, 1);
}

/* Every element of got equals want's (both on the host). */
static int same_as(const tc_tensor *got, const tc_tensor *want)
{
    if (!got || !want || tc_tensor_numel(got) != tc_tensor_numel(want)) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(want); i++)
        if (ct_at(got, i) != ct_at(want, i)) {
            printf("  element %lld: %g, want %g\n", (long long)i, ct_at(got, i), ct_at(want, i));
            return 0;
        }
    return 1;
}

#define GATHER_BAD "gather: index 12 is out of range for dim 1 of size 10 (found on the device during a CUDA graph " \
                   "replay on cuda:0)"

TEST(cuda_dev_devcheck_capture_gather_index_select)
{
    if (!have_device()) return;
    tc_tensor *src = ct_keep(ct_arange(TC_F32, 2, SZ(3, 10))); /* 0..29 */
    tc_tensor *i1 = ct_keep(ct_from(TC_I64, 2, SZ(3, 2), VALS(0, 9, 4, 4, 7, 1)));
    tc_tensor *i2 = ct_keep(ct_from(TC_I64, 2, SZ(3, 2), VALS(9, 8, 0, 1, 2, 3)));
    tc_tensor *ibad = ct_keep(ct_from(TC_I64, 2, SZ(3, 2), VALS(1, 2, 12, 3, 5, 6)));
    tc_tensor *s1 = ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(2, 0)));
    tc_tensor *s2 = ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(1, 1)));
    tc_tensor *sbad = ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(0, -1)));
    tc_tensor *dsrc = dev_of(src), *gi = dev_of(i1), *si = dev_of(s1);
    if (!dsrc || !gi || !si) return ct_drop();

    /* eager, outside a capture: the host check, its exact message, no device error left */
    tc_tensor *dbad = dev_of(ibad), *r = NULL;
    int64_t fb = tc_cuda_host_fallbacks(TC_OP_GATHER);
    CHECK_ERR(ct_run1(TC_OP_GATHER, dsrc, dbad, NULL, P(.i = {1}), &r), TC_ERR_INDEX,
              "gather: index 12 out of range for dim 1 of size 10");
    CHECK(r == NULL);
    CHECK_OK(tc_cuda_synchronize(0));
    tc_tensor *eg = op(TC_OP_GATHER, dsrc, gi, P(.i = {1}));
    CHECK(same_as(host_of(eg), op(TC_OP_GATHER, src, i1, P(.i = {1}))));
    CHECK(tc_cuda_host_fallbacks(TC_OP_GATHER) == fb); /* the device kernel ran */

    /* capture gather + index_select + elementwise work on static inputs */
    tc_tensor *g = NULL, *y = NULL, *s = NULL, *z = NULL;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(ct_run1(TC_OP_GATHER, dsrc, gi, NULL, P(.i = {1}), &g));
    CHECK_OK(ct_run1(TC_OP_ADD, g, g, NULL, P(.s = {1}), &y));
    CHECK_OK(ct_run1(TC_OP_INDEX_SELECT, dsrc, si, NULL, P(.i = {0}), &s));
    CHECK_OK(ct_run1(TC_OP_ADD, s, s, NULL, P(.s = {1}), &z));
    ct_keep(g), ct_keep(y), ct_keep(s), ct_keep(z);
    tc_cuda_graph *cg = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &cg));
    if (!cg || !y || !z) return ct_drop();

    /* replays read the static inputs' current values: results equal eager CPU ones */
    const tc_tensor *gidx[2] = {i1, i2}, *sidx[2] = {s1, s2};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(fill(gi, gidx[k]));
        CHECK_OK(fill(si, sidx[k]));
        CHECK_OK(tc_cuda_graph_replay(cg));
        CHECK_OK(tc_cuda_synchronize(0));
        tc_tensor *wg = op(TC_OP_GATHER, src, gidx[k], P(.i = {1}));
        tc_tensor *ws = op(TC_OP_INDEX_SELECT, src, sidx[k], P(.i = {0}));
        CHECK(same_as(host_of(y), op(TC_OP_ADD, wg, wg, P(.s = {1}))));
        CHECK(same_as(host_of(z), op(TC_OP_ADD, ws, ws, P(.s = {1}))));
    }

    /* a bad index: the replay itself succeeds (it cannot know); the next sync reports */
    CHECK_OK(fill(gi, ibad));
    CHECK_OK(tc_cuda_graph_replay(cg));
    CHECK_ERR(tc_cuda_synchronize(0), TC_ERR_INDEX, GATHER_BAD);
    CHECK_OK(tc_cuda_synchronize(0)); /* reported once, then cleared */
    /* the bad element was skipped; the others are right (row 1 takes 12 -> skipped) */
    tc_tensor *hy = host_of(y);
    const double want[6] = {2, 4, -1, 2 * 13, 2 * 25, 2 * 26};
    for (int i = 0; hy && i < 6; i++)
        if (i != 2) CHECK(ct_at(hy, i) == want[i]);
    /* reported by a copy to the host too */
    CHECK_OK(tc_cuda_graph_replay(cg));
    tc_tensor *h = NULL;
    CHECK_ERR(tc_tensor_to(y, TC_CPU, -1, &h), TC_ERR_INDEX, GATHER_BAD);
    tc_tensor_release(h);
    /* by a stream synchronize; the first bad index wins (gather runs first) */
    CHECK_OK(fill(si, sbad));
    CHECK_OK(tc_cuda_graph_replay(cg));
    CHECK_ERR(tc_cuda_stream_sync(tc_cuda_current_stream(0)), TC_ERR_INDEX, GATHER_BAD);
    /* index_select alone; an event synchronize */
    CHECK_OK(fill(gi, i2));
    CHECK_OK(tc_cuda_graph_replay(cg));
    tc_cuda_event *ev = NULL;
    CHECK_OK(tc_cuda_event_new(0, 0, &ev));
    CHECK_OK(tc_cuda_event_record(ev, NULL));
    CHECK_ERR(tc_cuda_event_sync(ev), TC_ERR_INDEX,
              "index_select: index -1 is out of range for dim 0 of size 3 (found on the device during a CUDA graph "
              "replay on cuda:0)");
    tc_cuda_event_free(ev);
    /* good indices again: nothing left over */
    CHECK_OK(fill(si, s2));
    CHECK_OK(tc_cuda_graph_replay(cg));
    CHECK_OK(tc_cuda_synchronize(0));
    tc_tensor *wg = op(TC_OP_GATHER, src, i2, P(.i = {1}));
    CHECK(same_as(host_of(y), op(TC_OP_ADD, wg, wg, P(.s = {1}))));
    tc_cuda_graph_free(cg);
    ct_drop();
}

/* A compiled graph with gather (the NLL pattern: pick each row's target) and elementwise
 * work, captured by tc_graph_capture and replayed with new targets. */
TEST(cuda_dev_devcheck_compiled_graph_capture)
{
    if (!have_device()) return;
    tc_tensor *x = ct_keep(ct_from(TC_F32, 2, SZ(2, 4), VALS(0.5, -1, 2, 0.25, 1.5, -0.75, 3, 4)));
    tc_tensor *t0 = ct_keep(ct_from(TC_I64, 2, SZ(2, 1), VALS(2, 0)));
    tc_tensor *dx = dev_of(x), *dt = dev_of(t0);
    if (!dx || !dt) return ct_drop();
    tc_graph *gr = NULL;
    CHECK_OK(tc_trace_begin(&gr));
    CHECK_OK(tc_trace_input(gr, dx));
    CHECK_OK(tc_trace_input(gr, dt));
    tc_tensor *picked = op(TC_OP_GATHER, dx, dt, P(.i = {1}));
    tc_tensor *out = op(TC_OP_MUL, picked, picked, NULL);
    CHECK_OK(tc_trace_output(gr, out));
    CHECK_OK(tc_trace_end(gr));
    CHECK_OK(tc_graph_compile(gr, TC_PASS_ALL));
    tc_tensor *sx = dev_of(x), *st = dev_of(t0), *so[1] = {NULL};
    const tc_tensor *in[2] = {sx, st};
    CHECK_OK(tc_graph_run(gr, in, 2, so, 1)); /* the warm-up */
    ct_keep(so[0]);
    so[0] = NULL;
    tc_captured_graph *cg = NULL;
    CHECK_OK(tc_graph_capture(gr, in, 2, so, 1, &cg));
    ct_keep(so[0]);
    if (!cg || !so[0]) goto out;
    for (int k = 0; k < 4; k++) {
        tc_tensor *tk = ct_keep(ct_from(TC_I64, 2, SZ(2, 1), VALS(k, 3 - k)));
        CHECK_OK(fill(st, tk));
        CHECK_OK(tc_graph_replay(cg));
        tc_tensor *p = op(TC_OP_GATHER, x, tk, P(.i = {1}));
        CHECK(same_as(host_of(so[0]), op(TC_OP_MUL, p, p, NULL)));
    }
    tc_tensor *tb = ct_keep(ct_from(TC_I64, 2, SZ(2, 1), VALS(1, 12)));
    CHECK_OK(fill(st, tb));
    CHECK_OK(tc_graph_replay(cg));
    CHECK_ERR(tc_cuda_synchronize(0), TC_ERR_INDEX,
              "gather: index 12 is out of range for dim 1 of size 4 (found on the device during a CUDA graph replay "
              "on cuda:0)");
    CHECK_OK(tc_cuda_synchronize(0));
out:
    tc_graph_capture_free(cg);
    tc_graph_free(gr);
    ct_drop();
}
