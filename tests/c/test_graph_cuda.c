/* test_graph_cuda.c -- compiled graphs on a CUDA device (core/graph/exec_cuda.c, exec.c):
 * graphs traced with device tensors run on the device and match the same graph on the CPU;
 * device and shape errors name the input and both devices; mixed devices are refused;
 * constants fold on the device; fused groups run unfused when no kernel can run (the mock,
 * no driver) and say why; data-dependent sizes are refused at run time.
 *
 * Tests are named cuda_dev_graph_* so that tests/run.sh runs them a second time over the
 * mock backend; without a device they say so and pass (tc_cuda_available false). On a GPU
 * machine the first run uses the real backend (and, where NVRTC and the driver load, the
 * generated kernels: never run so far).
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "graph/cuda_codegen.h"
#include "graph/graph.h"
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)

static int have_device(void)
{
    char why[512];
    return ct_cuda_device(why, sizeof why);
}

static tc_tensor *to_dev(const tc_tensor *t, int dev)
{
    tc_tensor *d = NULL;
    if (tc_tensor_to(t, dev, -1, &d) != TC_OK) printf("  to %d: %s\n", dev, tc_last_error());
    return ct_keep(d);
}

static tc_tensor *host(const tc_tensor *t) { return ct_to(t, TC_CPU); }

/* A deterministic CPU tensor with values in (-1, 1). */
static tc_tensor *wave(tc_dtype dt, int nd, const int64_t *sz, double phase)
{
    tc_tensor *t = ct_arange(dt, nd, sz);
    int64_t n = tc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = sin(0.37 * (double)i + phase) * 0.9;
        if (dt == TC_F32) ((float *)t->storage->data)[i] = (float)v;
        else ((double *)t->storage->data)[i] = v;
    }
    return ct_keep(t);
}

static tc_tensor *run1(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, const tc_params *p)
{
    tc_tensor *r = NULL;
    if (ct_run1(op, a, b, c, p, &r)) {
        printf("  %s: %s\n", tc_op_info(op)->name, tc_last_error());
        return NULL;
    }
    return ct_keep(r);
}

/* |a - b| <= tol * (1 + |b|) elementwise, both host tensors of one shape. */
static int close_to(const tc_tensor *a, const tc_tensor *b, double tol)
{
    if (!a || !b || !tc_same_shape(a, b)) {
        printf("  shapes differ\n");
        return 0;
    }
    for (int64_t i = 0; i < tc_tensor_numel(a); i++) {
        double x = ct_at(a, i), y = ct_at(b, i);
        if (!(fabs(x - y) <= tol * (1 + fabs(y)))) {
            printf("  element %lld: %.17g vs %.17g\n", (long long)i, x, y);
            return 0;
        }
    }
    return 1;
}

/* The traced function: y = tanh(x * w + 0.5 * b) with a row sum, and z = transpose(y) + 1
 * (a view of a result). w, b captured. */
static tc_status trace_fn(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b, tc_graph **out)
{
    tc_graph *g = NULL;
    TRY(tc_trace_begin(&g));
    tc_trace_input(g, x);
    tc_tensor *m = NULL, *a = NULL, *y = NULL, *s = NULL, *t = NULL, *z = NULL;
    ct_run1(TC_OP_MUL, x, w, NULL, NULL, &m);
    ct_run1(TC_OP_ADD, m, b, NULL, P(.s = {0.5}), &a);
    ct_run1(TC_OP_TANH, a, NULL, NULL, NULL, &y);
    ct_run1(TC_OP_SUM, y, NULL, NULL, P(.i = {1, 0}), &s);
    ct_run1(TC_OP_TRANSPOSE, y, NULL, NULL, P(.i = {0, 1}), &t);
    ct_run1(TC_OP_ADD, t, b, NULL, P(.s = {1}), &z);
    tc_status st = y && s && z ? TC_OK : TC_ERR_INTERNAL;
    if (st == TC_OK) st = tc_trace_output(g, s);
    if (st == TC_OK) st = tc_trace_output(g, z);
    tc_status e = tc_trace_end(g);
    if (st == TC_OK) st = e;
    tc_tensor *all[] = {m, a, y, s, t, z};
    for (int i = 0; i < 6; i++) tc_tensor_release(all[i]);
    if (st) {
        printf("  trace: %s\n", tc_last_error());
        tc_graph_free(g);
        return st;
    }
    *out = g;
    return TC_OK;
}

/* Runs the function traced on `dev` and on the CPU with the same values; compares. */
static void device_matches_cpu(int *ctest_failed, tc_dtype dt, const char *fused_env)
{
    if (fused_env) setenv("TOCHA_CUDA_FUSED", fused_env, 1);
    tc_tensor *x0 = wave(dt, 2, SZ(4, 4), 0.1), *x1 = wave(dt, 2, SZ(4, 4), 1.3);
    tc_tensor *w = wave(dt, 2, SZ(4, 4), 2.0), *b = wave(dt, 1, SZ(4), 0.7);
    tc_tensor *dx0 = to_dev(x0, DEV), *dx1 = to_dev(x1, DEV), *dw = to_dev(w, DEV), *db = to_dev(b, DEV);
    tc_graph *gc = NULL, *gd = NULL;
    CHECK_OK(trace_fn(x0, w, b, &gc));
    CHECK_OK(trace_fn(dx0, dw, db, &gd));
    if (!gc || !gd) goto out;
    CHECK_OK(tc_graph_compile(gc, TC_PASS_ALL));
    CHECK_OK(tc_graph_compile(gd, TC_PASS_ALL));
    tc_graph_devinfo di;
    CHECK_OK(tc_graph_device_info(gd, &di));
    CHECK(di.device == DEV);
    CHECK(di.groups >= 1); /* mul, add, tanh, sum fuse */
    tc_graph_devinfo ci;
    CHECK_OK(tc_graph_device_info(gc, &ci));
    CHECK(ci.device == TC_CPU && ci.groups_unfused == 0);
    for (int run = 0; run < 2; run++) {
        const tc_tensor *ic[1] = {run ? x1 : x0}, *id[1] = {run ? dx1 : dx0};
        tc_tensor *oc[2] = {NULL, NULL}, *od[2] = {NULL, NULL};
        CHECK_OK(tc_graph_run(gc, ic, 1, oc, 2));
        CHECK_OK(tc_graph_run(gd, id, 1, od, 2));
        ct_keep(oc[0]), ct_keep(oc[1]), ct_keep(od[0]), ct_keep(od[1]);
        if (!od[0] || !od[1] || !oc[0]) continue;
        CHECK(od[0]->device == DEV && od[1]->device == DEV);
        CHECK(close_to(host(od[0]), oc[0], dt == TC_F32 ? 1e-5 : 1e-12));
        CHECK(close_to(host(od[1]), oc[1], dt == TC_F32 ? 1e-5 : 1e-12));
    }
    CHECK_OK(tc_graph_device_info(gd, &di));
    if (di.groups_kernel > 0) {
        CHECK(di.kernel_launches >= 2); /* a GPU with NVRTC: the generated kernel ran */
    } else {
        CHECK(di.groups_unfused == di.groups && di.unfused_runs >= 2);
        CHECK(di.why_unfused[0] != '\0');
        printf("  fused groups ran unfused: %s\n", di.why_unfused);
    }
    if (fused_env && strcmp(fused_env, "force") == 0) /* tried, failed to launch, fell back */
        CHECK(strstr(di.why_unfused, "cuda launch") != NULL || strstr(di.why_unfused, "NVRTC") != NULL ||
              strstr(di.why_unfused, "nvrtc") != NULL);
out:
    if (fused_env) unsetenv("TOCHA_CUDA_FUSED");
    tc_graph_free(gc), tc_graph_free(gd);
    ct_drop();
}

TEST(cuda_dev_graph_runs_on_device_like_cpu)
{
    if (!have_device()) return;
    device_matches_cpu(ctest_failed, TC_F32, NULL);
    device_matches_cpu(ctest_failed, TC_F64, NULL);
}

/* Generated kernels forced where none can launch: codegen runs, the launch fails with the
 * reason, and the group falls back to running member by member with the same results. */
TEST(cuda_dev_graph_kernel_refused_falls_back)
{
    if (!have_device()) return;
    char why[256];
    if (tc_cuda_launch_available(why, sizeof why)) {
        printf("  skip: a CUDA driver is present (forcing kernels over the mock would launch on host memory)\n");
        return;
    }
    device_matches_cpu(ctest_failed, TC_F32, "force");
}

TEST(cuda_dev_graph_input_device_errors)
{
    if (!have_device()) return;
    tc_tensor *x = wave(TC_F32, 2, SZ(4, 4), 0.1), *w = wave(TC_F32, 2, SZ(4, 4), 2.0), *b = wave(TC_F32, 1, SZ(4), 0.7);
    tc_tensor *dx = to_dev(x, DEV), *dw = to_dev(w, DEV), *db = to_dev(b, DEV);
    tc_graph *gd = NULL, *gc = NULL;
    CHECK_OK(trace_fn(dx, dw, db, &gd));
    CHECK_OK(trace_fn(x, w, b, &gc));
    if (!gd || !gc) goto out;
    tc_tensor *o[2] = {NULL, NULL};
    const tc_tensor *in[1] = {x};
    CHECK_ERR(tc_graph_run(gd, in, 1, o, 2), TC_ERR_DEVICE, "input 1 (float32 (4,4)) is on cpu but the graph runs on cuda:0");
    CHECK(o[0] == NULL && o[1] == NULL);
    in[0] = dx;
    CHECK_ERR(tc_graph_run(gc, in, 1, o, 2), TC_ERR_DEVICE, "is on cuda:0 but the graph runs on cpu");
    if (tc_cuda_device_count() > 1) {
        in[0] = to_dev(x, TC_DEVICE_CUDA(1));
        CHECK_ERR(tc_graph_run(gd, in, 1, o, 2), TC_ERR_DEVICE, "is on cuda:1 but the graph runs on cuda:0");
    }
out:
    tc_graph_free(gd), tc_graph_free(gc);
    ct_drop();
}

TEST(cuda_dev_graph_mixed_devices_refused)
{
    if (!have_device()) return;
    tc_tensor *x = wave(TC_F32, 1, SZ(6), 0.1), *c = wave(TC_F32, 1, SZ(6), 0.4);
    tc_tensor *dx = to_dev(x, DEV);
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *y = run1(TC_OP_MUL, dx, dx, NULL, NULL);
    tc_tensor *z = run1(TC_OP_TANH, c, NULL, NULL, NULL); /* a CPU op in a device graph */
    tc_tensor *h = run1(TC_OP_COPY, y, NULL, NULL, P(.i = {-1})); /* dst NULL: stays on the device */
    CHECK(y && z && h);
    CHECK_OK(tc_trace_output(g, h));
    CHECK_OK(tc_trace_output(g, z));
    CHECK_OK(tc_trace_end(g));
    CHECK_ERR(tc_graph_compile(g, TC_PASS_ALL), TC_ERR_DEVICE, "mixed devices");
    CHECK(strstr(tc_last_error(), "is on cpu but the graph runs on cuda:0") != NULL);
    tc_graph_free(g);
    /* a host tensor copied onto the device inside the graph is fine (an upload) */
    g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *up = ct_keep(NULL);
    CHECK_OK(tc_tensor_new_on(DEV, TC_F32, 1, SZ(6), &up));
    ct_keep(up);
    const tc_tensor *cin[1] = {c};
    tc_tensor *cout[1] = {up};
    CHECK_OK(tc_op_run(TC_OP_COPY, cin, 1, P(.i = {-1}), cout, 1));
    tc_tensor *s = run1(TC_OP_ADD, dx, up, NULL, P(.s = {1}));
    CHECK_OK(tc_trace_output(g, s));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL & ~TC_PASS_FOLD));
    tc_tensor *o[1] = {NULL};
    const tc_tensor *in[1] = {dx};
    CHECK_OK(tc_graph_run(g, in, 1, o, 1));
    ct_keep(o[0]);
    tc_tensor *want = run1(TC_OP_ADD, x, c, NULL, P(.s = {1}));
    if (o[0]) CHECK(close_to(host(o[0]), want, 0));
    tc_graph_free(g);
    /* a CPU graph downloading a captured device tensor (tc_tensor_to is recorded as a copy):
     * it runs on the CPU and reads the device tensor's current values at every run */
    tc_tensor *dc = to_dev(c, DEV);
    g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, x));
    tc_tensor *down = NULL;
    CHECK_OK(tc_tensor_to(dc, TC_CPU, -1, &down));
    ct_keep(down);
    tc_tensor *sum = run1(TC_OP_ADD, x, down, NULL, P(.s = {1}));
    CHECK_OK(tc_trace_output(g, sum));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_graph_devinfo di;
    CHECK_OK(tc_graph_device_info(g, &di));
    CHECK(di.device == TC_CPU);
    CHECK_OK(tc_tensor_set_value(dc, SZ(0), 100)); /* seen by the next run */
    in[0] = x, o[0] = NULL;
    CHECK_OK(tc_graph_run(g, in, 1, o, 1));
    ct_keep(o[0]);
    if (o[0]) CHECK(o[0]->device == TC_CPU && ct_at(o[0], 0) == (double)(float)(ct_at(x, 0) + 100));
    if (o[0]) CHECK(ct_at(o[0], 1) == (double)(float)(ct_at(x, 1) + ct_at(c, 1)));
    tc_graph_free(g);
    ct_drop();
}

/* A graph with no inputs whose tensors are all on the device (a fill into a fresh device
 * tensor folds to a device constant; an op on a captured device tensor) runs on the device,
 * as its eager calls did; one that also reads a captured CPU tensor is still refused. */
TEST(cuda_dev_graph_without_inputs_on_device)
{
    if (!have_device()) return;
    for (int pass = 0; pass < 2; pass++) { /* folded, then with the fill kept as an op */
        tc_tensor *f = NULL, *o[1] = {NULL};
        tc_graph *g = NULL;
        CHECK_OK(tc_trace_begin(&g));
        CHECK_OK(tc_tensor_new_on(DEV, TC_F64, 2, SZ(2, 3), &f));
        ct_keep(f);
        CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {2.5}), &f, 1));
        CHECK_OK(tc_trace_output(g, f));
        CHECK_OK(tc_trace_end(g));
        CHECK_OK(tc_graph_compile(g, pass ? TC_PASS_ALL & ~TC_PASS_FOLD : TC_PASS_ALL));
        tc_graph_devinfo di;
        CHECK_OK(tc_graph_device_info(g, &di));
        CHECK(di.device == DEV);
        CHECK_OK(tc_graph_run(g, NULL, 0, o, 1));
        ct_keep(o[0]);
        if (o[0]) CHECK(o[0]->device == DEV && SAME(host(o[0]), 2.5, 2.5, 2.5, 2.5, 2.5, 2.5));
        tc_graph_free(g);
    }
    tc_tensor *c = wave(TC_F32, 1, SZ(4), 0.3), *dc = to_dev(c, DEV), *o[1] = {NULL};
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    tc_tensor *t = run1(TC_OP_TANH, dc, NULL, NULL, NULL);
    CHECK_OK(tc_trace_output(g, t));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    CHECK_OK(tc_tensor_set_value(dc, SZ(0), 0)); /* captured: read at each run */
    CHECK_OK(tc_graph_run(g, NULL, 0, o, 1));
    ct_keep(o[0]);
    if (o[0]) CHECK(o[0]->device == DEV && ct_at(host(o[0]), 0) == 0 && ct_at(host(o[0]), 1) == ct_at(t ? host(t) : c, 1));
    tc_graph_free(g);
    g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    tc_tensor *a = run1(TC_OP_TANH, dc, NULL, NULL, NULL), *b = run1(TC_OP_TANH, c, NULL, NULL, NULL);
    CHECK_OK(tc_trace_output(g, a));
    CHECK_OK(tc_trace_output(g, b));
    CHECK_OK(tc_trace_end(g));
    CHECK_ERR(tc_graph_compile(g, TC_PASS_ALL & ~TC_PASS_FOLD), TC_ERR_DEVICE, "mixed devices");
    tc_graph_free(g);
    ct_drop();
}

/* Constants made inside the trace on the device fold there; a write-back updates a
 * captured device tensor in place; masked_select's data-dependent size is refused. */
TEST(cuda_dev_graph_fold_writeback_and_checked_sizes)
{
    if (!have_device()) return;
    tc_tensor *x = wave(TC_F64, 1, SZ(8), 0.1), *w = wave(TC_F64, 1, SZ(8), 0.9);
    tc_tensor *dx = to_dev(x, DEV), *dw = to_dev(w, DEV);
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_allow_mutation(g, 1));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *k = NULL;
    CHECK_OK(tc_tensor_new_on(DEV, TC_F64, 1, SZ(8), &k));
    ct_keep(k);
    tc_tensor *kout[1] = {k};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {0.25}), kout, 1)); /* a constant */
    tc_tensor *k2 = run1(TC_OP_MUL, k, k, NULL, NULL);                /* folds */
    tc_tensor *y = run1(TC_OP_ADD, dx, k2, NULL, P(.s = {2}));
    const tc_tensor *win[2] = {dw, y};
    tc_tensor *wout[1] = {dw};
    CHECK_OK(tc_op_run(TC_OP_SUB, win, 2, P(.s = {0.5}), wout, 1)); /* w -= 0.5 y: a write-back */
    tc_tensor *s = run1(TC_OP_SUM, dw, NULL, NULL, P(.i = {-1, 0}));
    CHECK_OK(tc_trace_output(g, s));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    bool folded = true;
    for (int i = 0; i < g->nnodes; i++) folded = folded && g->nodes[i].op != TC_OP_FILL;
    CHECK(folded);
    for (int v = 0; v < g->nvals; v++)
        if (g->vals[v].kind == TC_GV_CONST && g->vals[v].ndim > 0) CHECK(g->vals[v].t->device == DEV);
    /* the traced step ran once; run the graph twice more, then compare with 3 CPU updates */
    const tc_tensor *in[1] = {dx};
    for (int r = 0; r < 2; r++) {
        tc_tensor *o[1] = {NULL};
        CHECK_OK(tc_graph_run(g, in, 1, o, 1));
        ct_keep(o[0]);
    }
    tc_tensor *wexp = ct_keep(ct_arange(TC_F64, 1, SZ(8)));
    for (int i = 0; i < 8; i++) ((double *)wexp->storage->data)[i] = ct_at(w, i) - 3 * 0.5 * (ct_at(x, i) + 2 * 0.0625);
    CHECK(close_to(host(dw), wexp, 1e-12));
    tc_graph_free(g);

    /* masked_select: the trace's count is baked in; another count is an error */
    /* zeros copied over: a new device tensor's contents are uninitialised (this test once
     * read a reused block's leftovers; TOCHA_CUDA_FILL_UNINITIALIZED=1 made them NaN) */
    tc_tensor *zero = to_dev(ct_keep(ct_from(TC_F64, 1, SZ(8), VALS(0, 0, 0, 0, 0, 0, 0, 0))), DEV);
    g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, dx));
    tc_tensor *m = run1(TC_OP_GT, dx, zero, NULL, NULL);
    tc_tensor *sel = run1(TC_OP_MASKED_SELECT, dx, m, NULL, NULL);
    CHECK(sel && sel->ndim == 1);
    if (sel) CHECK_OK(tc_trace_output(g, sel));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *o[1] = {NULL};
    CHECK_OK(tc_graph_run(g, in, 1, o, 1)); /* the same data: fine */
    ct_keep(o[0]);
    if (o[0] && sel) CHECK(close_to(host(o[0]), host(sel), 0));
    tc_tensor *neg = ct_keep(ct_from(TC_F64, 1, SZ(8), VALS(-1, -1, -1, -1, -1, -1, -1, 1)));
    in[0] = to_dev(neg, DEV);
    o[0] = NULL;
    CHECK_ERR(tc_graph_run(g, in, 1, o, 1), TC_ERR_SHAPE, "depends on the data");
    CHECK(o[0] == NULL);
    tc_graph_free(g);
    ct_drop();
}

/* Half-precision groups (fuse.c forms them only on a device): trace_fn in float16 and
 * bfloat16 on the device fuses (mul, add, tanh, sum) into a half group, and the compiled
 * graph gives eager mode's numbers on the same device bit for bit: the generated kernel
 * rounds every member's result as eager rounds each op's (cuda_codegen.c); member by member
 * it is eager. The CPU graph of the same function has no half group. */
TEST(cuda_dev_graph_half_groups_as_eager)
{
    if (!have_device()) return;
    static const tc_dtype dts[2] = {TC_F16, TC_BF16};
    for (int k = 0; k < 2; k++) {
        tc_dtype dt = dts[k];
        tc_tensor *x = NULL, *w = NULL, *b = NULL;
        tc_tensor_to(wave(TC_F32, 2, SZ(40, 40), 0.1), DEV, dt, &x); /* square: z adds b to y's transpose */
        tc_tensor_to(wave(TC_F32, 2, SZ(40, 40), 2.0), DEV, dt, &w);
        tc_tensor_to(wave(TC_F32, 1, SZ(40), 0.7), DEV, dt, &b);
        ct_keep(x), ct_keep(w), ct_keep(b);
        tc_graph *gd = NULL, *gc = NULL;
        CHECK_OK(trace_fn(x, w, b, &gd));
        CHECK_OK(trace_fn(host(x), host(w), host(b), &gc));
        if (!gd || !gc) {
            tc_graph_free(gd), tc_graph_free(gc);
            continue;
        }
        CHECK_OK(tc_graph_compile(gd, TC_PASS_ALL));
        CHECK_OK(tc_graph_compile(gc, TC_PASS_ALL));
        CHECK(gd->ngroups >= 1 && gc->ngroups == 0);
        /* eager on the device, op by op */
        tc_tensor *m = run1(TC_OP_MUL, x, w, NULL, NULL), *a = run1(TC_OP_ADD, m, b, NULL, P(.s = {0.5}));
        tc_tensor *y = run1(TC_OP_TANH, a, NULL, NULL, NULL), *s = run1(TC_OP_SUM, y, NULL, NULL, P(.i = {1, 0}));
        tc_tensor *z = run1(TC_OP_ADD, run1(TC_OP_TRANSPOSE, y, NULL, NULL, P(.i = {0, 1})), b, NULL, P(.s = {1}));
        const tc_tensor *in[1] = {x};
        tc_tensor *od[2] = {NULL, NULL};
        CHECK_OK(tc_graph_run(gd, in, 1, od, 2));
        ct_keep(od[0]), ct_keep(od[1]);
        if (s && z && od[0] && od[1]) {
            CHECK(od[0]->dtype == (int)dt && od[0]->device == DEV);
            CHECK(close_to(host(od[0]), host(s), 0) && close_to(host(od[1]), host(z), 0)); /* the same bits */
        }
        tc_graph_devinfo di;
        CHECK_OK(tc_graph_device_info(gd, &di));
        CHECK(di.groups >= 1 && (di.groups_kernel > 0 ? di.kernel_launches >= 1 : di.unfused_runs >= 1));
        printf("  %s: %d group(s), %d as kernels%s%s\n", tc_dtype_name(dt), di.groups, di.groups_kernel,
               di.why_unfused[0] ? "; unfused: " : "", di.why_unfused);
        tc_graph_free(gd), tc_graph_free(gc);
    }
    ct_drop();
}
