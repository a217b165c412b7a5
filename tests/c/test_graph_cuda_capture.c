/* test_graph_cuda_capture.c -- a compiled device graph captured as a CUDA graph and
 * replayed (core/graph/capture.c): static inputs and outputs, parameters updated in place
 * at every replay, results equal to eager steps on the CPU; steps that cannot be captured
 * (mask counts, draws from two generators) refused naming the node. Named cuda_dev_graph_* so that
 * tests/run.sh runs them over the mock backend, which records its calls while a capture is
 * open and replays them (flat float elementwise work only: the graph below is made of it).
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

/* One step of elementwise least squares on w: e = w*x - t; w -= lr * e*x (lr a 0-dim CPU
 * tensor, as the optimizers' per-step scalars); returns e. On the device with a write-back
 * when traced, eagerly on the CPU otherwise. */
static tc_tensor *lsq_step(const tc_tensor *x, tc_tensor *w, const tc_tensor *t, const tc_tensor *lr)
{
    tc_tensor *wx = op(TC_OP_MUL, w, x, NULL);
    tc_tensor *e = op(TC_OP_SUB, wx, t, P(.s = {1}));
    tc_tensor *gr = op(TC_OP_MUL, e, x, NULL);
    const tc_tensor *in[3] = {w, lr, gr};
    tc_tensor *out[1] = {w};
    if (tc_op_run(TC_OP_ADDCMUL, in, 3, P(.s = {-1}), out, 1)) printf("  update: %s\n", tc_last_error());
    return e;
}

TEST(cuda_dev_graph_capture_replay_matches_eager)
{
    if (!have_device()) return;
    tc_tensor *x0 = ct_keep(ct_from(TC_F32, 1, SZ(6), VALS(0.5, -1, 2, 0.25, 1.5, -0.75)));
    tc_tensor *t = ct_keep(ct_from(TC_F32, 1, SZ(6), VALS(1, 2, -1, 0.5, 0, 3)));
    tc_tensor *w = ct_keep(ct_from(TC_F32, 1, SZ(6), VALS(0.1, 0.2, 0.3, -0.4, 0.5, 0.6)));
    tc_tensor *dx = dev_of(x0), *dt = dev_of(t), *dw = dev_of(w);
    tc_tensor *lr = ct_keep(ct_from(TC_F32, 0, NULL, VALS(0.1))); /* 0-dim, on the host */
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *e = lsq_step(dx, dw, dt, lr); /* the traced call is step 1 */
    CHECK_OK(tc_trace_output(g, e));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    lsq_step(x0, w, t, lr); /* eager step 1 on the CPU */
    tc_tensor *sx = dev_of(x0), *so[1] = {NULL};
    const tc_tensor *in[1] = {sx};
    tc_captured_graph *cg = NULL;
    CHECK_ERR(tc_graph_capture(g, in, 1, so, 1, &cg), TC_ERR_ARG, "run the graph once before capturing it");
    CHECK_OK(tc_graph_run(g, in, 1, so, 1)); /* step 2: the warm-up */
    ct_keep(so[0]);
    lsq_step(x0, w, t, lr);
    so[0] = NULL;
    CHECK_OK(tc_graph_capture(g, in, 1, so, 1, &cg)); /* records, does not run */
    ct_keep(so[0]);
    if (!cg || !so[0]) goto out;
    CHECK(so[0]->device == DEV);
    /* steps 3..6 by replays, a new batch copied into the static input before each */
    for (int s = 3; s <= 6; s++) {
        tc_tensor *xs = ct_keep(ct_from(TC_F32, 1, SZ(6), VALS(0.5 * s, -1, 2, 0.25, 1.5 / s, -0.75)));
        const tc_tensor *ci[1] = {xs};
        tc_tensor *co[1] = {sx};
        CHECK_OK(tc_op_run(TC_OP_COPY, ci, 1, P(.i = {-1}), co, 1));
        *(float *)lr->storage->data = 0.05f * (float)s; /* a schedule: seen by the replay */
        int64_t v0 = (int64_t)dw->storage->version;
        CHECK_OK(tc_graph_replay(cg));
        CHECK((int64_t)dw->storage->version > v0);
        tc_tensor *ee = lsq_step(xs, w, t, lr);
        CHECK_OK(tc_cuda_synchronize(0));
        tc_tensor *got = host_of(so[0]);
        for (int i = 0; i < 6; i++) CHECK_NEAR(ct_at(got, i), ct_at(ee, i), 1e-6);
    }
    tc_tensor *wg = host_of(dw);
    for (int i = 0; i < 6; i++) CHECK_NEAR(ct_at(wg, i), ct_at(w, i), 1e-6);
out:
    tc_graph_capture_free(cg);
    tc_graph_free(g);
    ct_drop();
}

TEST(cuda_dev_graph_capture_refusals)
{
    if (!have_device()) return;
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(1, 2, 3, 4)));
    tc_tensor *dx = dev_of(x);
    /* a CPU graph */
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *y = op(TC_OP_MUL, x, x, NULL);
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    tc_captured_graph *cg = NULL;
    tc_tensor *o[1] = {NULL};
    const tc_tensor *in[1] = {x};
    CHECK_ERR(tc_graph_capture(g, in, 1, o, 1, &cg), TC_ERR_DEVICE, "the graph runs on cpu");
    CHECK(cg == NULL && o[0] == NULL);
    tc_graph_free(g);
    /* an op that counts a mask on the host (its result's size); index ops whose only host
     * read is the bounds check are captured (test_cuda_devcheck.c) */
    g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *nz = op(TC_OP_NONZERO, dx, NULL, NULL);
    CHECK_OK(tc_trace_output(g, nz));
    CHECK_OK(tc_trace_end(g));
    in[0] = dx;
    CHECK_ERR(tc_graph_capture(g, in, 1, o, 1, &cg), TC_ERR_UNSUPPORTED, "(nonzero");
    CHECK(strstr(tc_last_error(), "counts a mask on the host") != NULL);
    CHECK(cg == NULL && o[0] == NULL);
    tc_graph_free(g);
    /* random ops from two generators (one generator's draws are captured: test_cuda_rngcap.c) */
    tc_generator *gen2 = NULL;
    CHECK_OK(tc_generator_new(3, &gen2));
    g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *r = NULL, *r2 = NULL;
    CHECK_OK(tc_tensor_new_on(DEV, TC_F32, 1, SZ(4), &r));
    CHECK_OK(tc_tensor_new_on(DEV, TC_F32, 1, SZ(4), &r2));
    ct_keep(r), ct_keep(r2);
    tc_tensor *ro[1] = {r};
    CHECK_OK(tc_op_run(TC_OP_UNIFORM, NULL, 0, P(.s = {0, 1}), ro, 1));
    ro[0] = r2;
    CHECK_OK(tc_op_run(TC_OP_UNIFORM, NULL, 0, P(.s = {0, 1}, .gen = gen2), ro, 1));
    tc_tensor *z = op(TC_OP_ADD, op(TC_OP_ADD, dx, r, P(.s = {1})), r2, P(.s = {1}));
    CHECK_OK(tc_trace_output(g, z));
    CHECK_OK(tc_trace_end(g));
    CHECK_ERR(tc_graph_capture(g, in, 1, o, 1, &cg), TC_ERR_UNSUPPORTED, "draws from another generator than node");
    CHECK(cg == NULL);
    tc_graph_free(g);
    tc_generator_free(gen2);
    ct_drop();
}
