/* test_cuda_device.c -- device tensors end to end: storages on a CUDA device, copies across,
 * the dispatcher's device rules and errors, the host fallback, and the conformance table
 * (every golden case of tests/golden/ops.golden) run on the device against the CPU's values.
 *
 * Every test here is named cuda_dev_* and needs a CUDA device. Without one it says so and
 * passes having checked only that device calls fail cleanly. tests/run.sh runs these tests a
 * second time over the mock backend (TOCHA_CUDA_LIB=build/tests/libtocha_cuda_mock.so, two
 * devices of 64 MB), where device memory is host memory and the backend runs only
 * contiguous float elementwise ops itself: everything else goes through the host fallback.
 * On a machine with a GPU the first run uses the real backend and its kernels.
 */
#include "ctest.h"
#include "conformance.h"
#include "cuda_test_util.h"
#include "internal.h"
#include "layouts.h"
#include <math.h>
#include <stdlib.h>


#define DEV TC_DEVICE_CUDA(0)

/* 1 when a CUDA device is usable; otherwise prints why the test is skipped and checks that
 * a device allocation fails with that reason. */
static int have_device(int *ctest_failed)
{
    char why[512];
    if (ct_cuda_device(why, sizeof why)) return 1;
    tc_tensor *t = NULL;
    CHECK(tc_tensor_new_on(DEV, TC_F32, 1, SZ(4), &t) == TC_ERR_DEVICE);
    CHECK(t == NULL);
    CHECK(strstr(tc_last_error(), "CUDA unavailable") != NULL);
    return 0;
}

#define mock_backend ct_cuda_mock

/* A host copy of a device tensor's values (kept in the test pool). */
static tc_tensor *host(const tc_tensor *t) { return ct_to(t, TC_CPU); }

static tc_tensor *on_dev(const tc_tensor *t) { return ct_to(t, DEV); }

TEST(cuda_dev_tensors_and_copies)
{
    if (!have_device(ctest_failed)) return;
    tc_tensor *a = ct_keep(ct_from(TC_F32, 2, SZ(2, 3), VALS(1, 2, 3, 4, 5, 6)));
    tc_tensor *d = on_dev(a);
    CHECK(d && d->device == DEV && d->storage->device == DEV);
    if (!d) return ct_drop();
    CHECK(SAME(host(d), 1, 2, 3, 4, 5, 6));
    /* element access crosses one element */
    double v = 0;
    CHECK_OK(tc_tensor_get(d, SZ(1, 2), &v));
    CHECK(v == 6);
    CHECK_OK(tc_tensor_set_value(d, SZ(0, 1), 20));
    CHECK(SAME(host(d), 1, 20, 3, 4, 5, 6));
    CHECK_ERR(tc_tensor_get(d, SZ(2, 0), &v), TC_ERR_INDEX, "out of range");
    CHECK(isnan(tc_tensor_item(d))); /* host read of device memory refused */
    /* dtype conversion while moving, both ways; a transposed (strided) source */
    tc_tensor *dt = ct_keep(ct_transposed(d, 0, 1)), *i64 = NULL;
    CHECK_OK(tc_tensor_to(dt, TC_CPU, TC_I64, &i64));
    ct_keep(i64);
    CHECK(i64->dtype == TC_I64 && SAME(i64, 1, 4, 20, 5, 3, 6));
    tc_tensor *half = NULL;
    CHECK_OK(tc_tensor_to(a, DEV, TC_F16, &half));
    ct_keep(half);
    CHECK(half->device == DEV && half->dtype == TC_F16 && SAME(host(half), 1, 2, 3, 4, 5, 6));
    /* copy into a strided device result (a transposed view) from the host */
    tc_tensor *z = NULL;
    CHECK_OK(tc_tensor_new_on(DEV, TC_F32, 2, SZ(3, 2), &z));
    ct_keep(z);
    tc_tensor *zt = ct_keep(ct_transposed(z, 0, 1)); /* 2x3 view */
    CHECK_OK(ct_run1(TC_OP_COPY, a, NULL, NULL, NULL, &zt));
    CHECK(SAME(host(z), 1, 4, 2, 5, 3, 6));
    /* resize keeps the device and the values (grow copies on the device) */
    CHECK_OK(tc_tensor_resize(z, 1, SZ(12)));
    CHECK(z->device == DEV && z->storage->device == DEV);
    CHECK_OK(tc_tensor_get(z, SZ(3), &v));
    CHECK(v == 5);
    /* an empty device tensor stays a device tensor */
    tc_tensor *e = NULL;
    CHECK_OK(tc_tensor_new_empty_on(DEV, TC_F64, &e));
    ct_keep(e);
    CHECK(e->device == DEV && e->storage == NULL);
    tc_tensor *e2 = NULL;
    CHECK_OK(tc_tensor_to(e, TC_CPU, -1, &e2));
    ct_keep(e2);
    CHECK(e2->device == TC_CPU && e2->storage == NULL && e2->dtype == TC_F64);
    ct_drop();
}

TEST(cuda_dev_device_rules_and_errors)
{
    if (!have_device(ctest_failed)) return;
    tc_tensor *a = ct_keep(ct_from(TC_F32, 2, SZ(2, 2), VALS(1, 2, 3, 4)));
    tc_tensor *d = on_dev(a), *r = NULL;
    if (!d) return ct_drop();
    /* mixing devices: the op, both devices and the size are named; nothing is made */
    CHECK_ERR(ct_run1(TC_OP_ADD, d, a, NULL, NULL, &r), TC_ERR_DEVICE,
              "add: input 2 of size (2,2) is on cpu but the op runs on cuda:0");
    CHECK(r == NULL);
    tc_tensor *cpu_res = ct_keep(ct_from(TC_F32, 2, SZ(2, 2), VALS(9, 9, 9, 9)));
    CHECK_ERR(ct_run1(TC_OP_ADD, d, d, NULL, NULL, &cpu_res), TC_ERR_DEVICE, "result 1 of size (2,2) is on cpu");
    CHECK(SAME(cpu_res, 9, 9, 9, 9)); /* a failed call changes nothing */
    /* a 0-dim CPU tensor may join a device op (autograd's scalars) */
    tc_tensor *two = ct_keep(ct_from(TC_F32, 0, NULL, VALS(2)));
    CHECK_OK(ct_run1(TC_OP_MUL, d, two, NULL, NULL, &r));
    ct_keep(r);
    CHECK(r->device == DEV && SAME(host(r), 2, 4, 6, 8));
    /* a missing device, and views and set across devices */
    tc_tensor *t = NULL;
    CHECK_ERR(tc_tensor_new_on(TC_DEVICE_CUDA(7), TC_F32, 1, SZ(3), &t), TC_ERR_ARG, "no device 7");
    CHECK_ERR(tc_tensor_to(a, TC_DEVICE_CUDA(7), -1, &t), TC_ERR_ARG, "no device 7");
    CHECK(t == NULL);
    tc_tensor *c = ct_keep(ct_from(TC_F32, 1, SZ(1), VALS(0)));
    CHECK_ERR(tc_tensor_set(c, d), TC_ERR_DEVICE, "set: a cpu tensor cannot view a cuda:0 tensor");
    CHECK(c->device == TC_CPU && SAME(c, 0));
    /* index bounds of device indices are checked (on a host copy) before any kernel */
    tc_tensor *idx = on_dev(ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(1, 5))));
    tc_tensor *sel = NULL;
    CHECK_ERR(ct_run1(TC_OP_INDEX_SELECT, d, idx, NULL, P(.i = {0}), &sel), TC_ERR_INDEX,
              "index 5 out of range for dim 0 of size 2");
    CHECK(sel == NULL);
    /* results sized by values (masked_select) count a device mask on the host */
    tc_tensor *mask = on_dev(ct_keep(ct_from(TC_U8, 2, SZ(2, 2), VALS(1, 0, 0, 1))));
    CHECK_OK(ct_run1(TC_OP_MASKED_SELECT, d, mask, NULL, NULL, &sel));
    ct_keep(sel);
    CHECK(sel->device == DEV && ct_shape_is(sel, 1, SZ(2)) && SAME(host(sel), 1, 4));
    /* out of device memory: an error naming the sizes; the process goes on */
    tc_tensor *huge = NULL;
    CHECK(tc_tensor_new_on(DEV, TC_F32, 1, SZ((int64_t)1 << 40), &huge) == TC_ERR_MEMORY);
    CHECK(huge == NULL && strstr(tc_last_error(), "out of memory") != NULL);
    CHECK_OK(ct_run1(TC_OP_ADD, d, d, NULL, NULL, &r));
    ct_drop();
}

/* Ops without a kernel run on the host and are counted; with the fallback off they fail
 * with the backend's message and change nothing. */
TEST(cuda_dev_host_fallback)
{
    if (!have_device(ctest_failed)) return;
    tc_tensor *d = on_dev(ct_keep(ct_from(TC_F32, 2, SZ(2, 3), VALS(3, 1, 2, 6, 5, 4))));
    if (!d) return ct_drop();
    tc_tensor *res[2] = {NULL, NULL};
    const tc_tensor *in[1] = {d};
    int64_t before = tc_cuda_host_fallbacks(TC_OP_SORT);
    CHECK_OK(tc_op_run(TC_OP_SORT, in, 1, P(.i = {1, 0}), res, 2));
    ct_keep(res[0]), ct_keep(res[1]);
    CHECK(res[0]->device == DEV && res[1]->device == DEV);
    CHECK(SAME(host(res[0]), 1, 2, 3, 4, 5, 6) && SAME(host(res[1]), 1, 2, 0, 2, 1, 0));
    if (mock_backend()) { /* the mock has no sort kernel: the host ran it */
        CHECK(tc_cuda_host_fallbacks(TC_OP_SORT) == before + 1);
        CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_HOST_FALLBACK, 0));
        tc_tensor *r2[2] = {NULL, NULL};
        CHECK_ERR(tc_op_run(TC_OP_SORT, in, 1, P(.i = {1, 0}), r2, 2), TC_ERR_UNSUPPORTED, "no CUDA kernel");
        CHECK(r2[0] == NULL && r2[1] == NULL);
        CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_HOST_FALLBACK, 1));
        /* contiguous float elementwise ops run in the mock backend itself */
        int64_t add_before = tc_cuda_host_fallbacks(TC_OP_ADD);
        tc_tensor *sum = NULL;
        CHECK_OK(ct_run1(TC_OP_ADD, d, d, NULL, P(.s = {1}), &sum));
        ct_keep(sum);
        CHECK(tc_cuda_host_fallbacks(TC_OP_ADD) == add_before && SAME(host(sum), 6, 2, 4, 12, 10, 8));
    }
    CHECK(tc_cuda_get_flag(TC_CUDA_FLAG_HOST_FALLBACK) == 1);
    CHECK_ERR(tc_cuda_set_flag(99, 1), TC_ERR_ARG, "unknown flag 99");
    ct_drop();
}

/* A seeded random fill gives the CPU's numbers on the device (same Philox slots). */
TEST(cuda_dev_random_matches_cpu)
{
    if (!have_device(ctest_failed)) return;
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(11, &g));
    const tc_op ops[] = {TC_OP_UNIFORM, TC_OP_NORMAL, TC_OP_BERNOULLI};
    for (int i = 0; i < 3; i++) {
        tc_tensor *c = ct_keep(ct_from(TC_F32, 1, SZ(7), VALS(0, 0, 0, 0, 0, 0, 0))), *d = NULL;
        CHECK_OK(tc_tensor_new_on(DEV, TC_F32, 1, SZ(7), &d));
        ct_keep(d);
        tc_params p = {.s = {0, 1}, .gen = g};
        if (ops[i] == TC_OP_BERNOULLI) p.s[0] = 0.5;
        const tc_tensor *none[1] = {NULL};
        int nin = ops[i] == TC_OP_BERNOULLI; /* its probability tensor is optional */
        tc_generator_seed(g, 5);
        CHECK_OK(tc_op_run(ops[i], none, nin, &p, &c, 1));
        tc_generator_seed(g, 5);
        CHECK_OK(tc_op_run(ops[i], none, nin, &p, &d, 1));
        tc_tensor *h = host(d);
        for (int64_t k = 0; k < 7; k++) CHECK(ct_at(h, k) == ct_at(c, k));
    }
    tc_generator_free(g);
    ct_drop();
}

/* The conformance table on the device: every golden case (PyTorch's values) with its
 * inputs and given result on cuda:0, results compared on the host. */
TEST(cuda_dev_conformance_golden)
{
    if (!have_device(ctest_failed)) return;
    int total = 0;
    int bad = conformance_golden_on(DEV, &total);
    CHECK(bad == 0);
    CHECK(total > 300);
    if (bad) printf("  %d of %d golden cases failed on the device\n", bad, total);
    printf("  %d golden cases on %s; %lld ops ran on the host for lack of a CUDA kernel\n", total,
           mock_backend() ? "the mock backend" : "the GPU", (long long)tc_cuda_host_fallbacks(-1));
}

/* The golden cases on the device from the views of layouts first..LAYOUT_COUNT-1, eagerly
 * or traced and compiled. */
static void golden_layouts_on_device(int *ctest_failed, int first, bool compiled)
{
    if (!have_device(ctest_failed)) return;
    for (int layout = first; layout < LAYOUT_COUNT; layout++) {
        int total = 0;
        int bad = conformance_golden_layout_on(DEV, layout, compiled, &total);
        CHECK(bad == 0);
        CHECK(total > 300);
        printf("  %d golden cases %son the device, tensors %s: %d failed\n", total, compiled ? "compiled " : "",
               layout_name(layout), bad);
    }
}

/* (Named apart from cuda_dev_conformance_*, which tests/run.sh also runs over the mock's
 * CPU kernels and the emulated 7.5 device, where these add time and nothing new.)
 * The golden cases again on the device with every input, and the result a case gives,
 * stored as a strided view (tests/c/layouts.h: an offset and every other element; dims
 * stored in reverse order): the kernels read and write the views' elements only. */
TEST(cuda_dev_golden_layouts) { golden_layouts_on_device(ctest_failed, LAYOUT_SPREAD, false); }

/* Every golden case traced on the device and compiled with every pass (fused groups as
 * generated kernels), from contiguous inputs and from the views of each layout. */
TEST(cuda_dev_golden_compiled) { golden_layouts_on_device(ctest_failed, 0, true); }

/* Every elementwise op in every dtype it takes (halves, integers and bool included), with
 * contiguous, transposed and broadcast inputs, on the device against the CPU. */
TEST(cuda_dev_conformance_elementwise_dtypes)
{
    if (!have_device(ctest_failed)) return;
    int total = 0;
    int bad = conformance_elementwise_on(DEV, &total);
    CHECK(bad == 0);
    CHECK(total > 500);
    if (bad) printf("  %d of %d elementwise cases failed on the device\n", bad, total);
    printf("  %d elementwise cases (op, dtype, layout) on the device\n", total);
}

/* Every reduction in every dtype it takes, over all elements and each dim, contiguous and
 * transposed, on the device against the CPU (max/min indices included). */
TEST(cuda_dev_conformance_reduce_dtypes)
{
    if (!have_device(ctest_failed)) return;
    int total = 0;
    int bad = conformance_reduce_on(DEV, &total);
    CHECK(bad == 0);
    CHECK(total > 300);
    printf("  %d reduction cases (op, dtype, dim, keepdim, layout) on the device; %d differ\n", total, bad);
}

/* Autograd on device tensors: gradients (and the zeros, ones and index tensors the rules
 * make) live on the device; values equal the CPU's. */
TEST(cuda_dev_autograd)
{
    if (!have_device(ctest_failed)) return;
    tc_tensor *xc = ct_keep(ct_from(TC_F64, 2, SZ(2, 3), VALS(1, -2, 3, 0.5, 5, -6)));
    tc_tensor *x = on_dev(xc);
    if (!x) return ct_drop();
    CHECK_OK(tc_tensor_set_requires_grad(x, 1));
    /* y = sum(flip-free mix: x*x + max over dim 1 + narrow) */
    tc_tensor *sq = NULL, *mx[2] = {NULL, NULL}, *nar = NULL, *s1 = NULL, *s2 = NULL, *s3 = NULL, *y = NULL;
    CHECK_OK(ct_run1(TC_OP_MUL, x, x, NULL, NULL, &sq));
    const tc_tensor *in1[1] = {x};
    CHECK_OK(tc_op_run(TC_OP_MAX, in1, 1, P(.i = {1, 0}), mx, 2));
    CHECK_OK(ct_run1(TC_OP_NARROW, x, NULL, NULL, P(.i = {1, 1, 2}), &nar));
    CHECK_OK(ct_run1(TC_OP_SUM, sq, NULL, NULL, P(.i = {-1}), &s1));
    CHECK_OK(ct_run1(TC_OP_SUM, mx[0], NULL, NULL, P(.i = {-1}), &s2));
    CHECK_OK(ct_run1(TC_OP_SUM, nar, NULL, NULL, P(.i = {-1}), &s3));
    tc_tensor *t12 = NULL;
    CHECK_OK(ct_run1(TC_OP_ADD, s1, s2, NULL, P(.s = {1}), &t12));
    CHECK_OK(ct_run1(TC_OP_ADD, t12, s3, NULL, P(.s = {1}), &y));
    ct_keep(sq), ct_keep(mx[0]), ct_keep(mx[1]), ct_keep(nar), ct_keep(s1), ct_keep(s2), ct_keep(s3);
    ct_keep(t12), ct_keep(y);
    CHECK(y->device == DEV);
    const tc_tensor *roots[1] = {y};
    CHECK_OK(tc_autograd_backward(roots, NULL, 1, 0, 0));
    tc_tensor *g = ct_keep(tc_tensor_grad(x));
    CHECK(g && g->device == DEV);
    /* d/dx: 2x + (1 at each row's max) + (1 in columns 1..2) */
    if (g) CHECK(SAME(host(g), 2, -3, 8, 1, 12, -11));
    ct_drop();
}

/* Bad input to the device entry points, answered the same with or without CUDA: argument
 * checks come before any device is touched, and nothing is made. */
TEST(cuda_device_entry_points_bad_input)
{
    tc_tensor *t = NULL, *a = ct_keep(ct_from(TC_F32, 1, SZ(2), VALS(1, 2)));
    tc_storage *s = NULL;
    CHECK_ERR(tc_tensor_new_on(DEV, TC_F32, 1, NULL, &t), TC_ERR_ARG, "tensor_new: NULL argument");
    CHECK_ERR(tc_tensor_new_on(TC_CPU, (tc_dtype)99, 1, SZ(2), &t), TC_ERR_DTYPE, "invalid dtype 99");
    CHECK_ERR(tc_tensor_new_on(-3, TC_F32, 1, SZ(2), &t), TC_ERR_DEVICE, "device -3 is not a CUDA device");
    CHECK_ERR(tc_tensor_new_empty_on(-3, TC_F32, &t), TC_ERR_DEVICE, "device -3 is not a CUDA device");
    CHECK(t == NULL);
    CHECK_ERR(tc_storage_new_on(DEV, -1, &s), TC_ERR_ARG, "storage_new: negative size -1");
    CHECK_ERR(tc_storage_new_on(DEV, 8, NULL), TC_ERR_ARG, "storage_new: NULL result");
    CHECK(s == NULL);
    CHECK_ERR(tc_tensor_to(a, DEV, 42, &t), TC_ERR_DTYPE, "to: invalid dtype 42");
    CHECK_ERR(tc_tensor_to(NULL, DEV, -1, &t), TC_ERR_ARG, "to: NULL argument");
    CHECK_ERR(tc_tensor_to(a, -3, -1, &t), TC_ERR_DEVICE, "device -3 is not a CUDA device");
    CHECK(t == NULL && SAME(a, 1, 2));
    CHECK_ERR(tc_cuda_set_flag(-1, 1), TC_ERR_ARG, "unknown flag -1");
    CHECK(tc_cuda_get_flag(-1) == 0 && tc_cuda_get_flag(TC_CUDA_FLAG_COUNT) == 0);
    CHECK(tc_cuda_host_fallbacks(TC_OP_COUNT + 5) == tc_cuda_host_fallbacks(-1)); /* out of range: the total */
    char buf[16];
    CHECK(strcmp(tc_device_str(TC_DEVICE_CUDA(3), buf, sizeof buf), "cuda:3") == 0);
    CHECK(strcmp(tc_device_str(TC_CPU, buf, sizeof buf), "cpu") == 0);
    /* a device ordinal that does not exist (or no CUDA at all) */
    tc_status st = tc_cuda_synchronize(40);
    CHECK(st == TC_ERR_ARG || st == TC_ERR_DEVICE);
    CHECK(strstr(tc_last_error(), "cuda synchronize:") != NULL);
    ct_drop();
}

/* A (sizes) tensor of dtype dt on the host with varied values scale * sin(0.7 i) + shift. */
static tc_tensor *wave_as(tc_dtype dt, int nd, const int64_t *sz, double scale, double shift)
{
    tc_tensor *d = NULL, *r = NULL;
    if (tc_tensor_new(TC_F64, nd, sz, &d) != TC_OK) return NULL;
    for (int64_t i = 0; i < tc_tensor_numel(d); i++) ((double *)tc_tensor_data(d))[i] = scale * sin(0.7 * (double)i) + shift;
    tc_tensor_to(d, TC_CPU, dt, &r);
    tc_tensor_release(d);
    return ct_keep(r);
}

/* Whether every element of the device tensor d is within tol (relative, ct_near) of c's. */
static int dev_near(const tc_tensor *d, const tc_tensor *c, double tol)
{
    tc_tensor *h = d ? host(d) : NULL;
    if (!h || !c || h->dtype != c->dtype || tc_tensor_numel(h) != tc_tensor_numel(c)) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(h); i++)
        if (!ct_near(ct_at(h, i), ct_at(c, i), tol)) {
            printf("    element %lld: device %.9g, cpu %.9g\n", (long long)i, ct_at(h, i), ct_at(c, i));
            return 0;
        }
    return 1;
}

/* batch_norm with f16 / bf16 weight, bias and running tensors beside an x of the same dtype
 * (model:half()): cuDNN takes the per-channel tensors in float only, so the device converts
 * them (dnn_bn.cu), where it used to send the op to the host. Training and evaluation,
 * forward and backward, against the CPU (which computes through float32 too); on a real
 * backend no call falls back to the host. eps is not the default 1e-5: the emulator counts
 * the eps each cuDNN backward was given, which must be the forward's. */
TEST(cuda_dev_batch_norm_half_params)
{
    if (!have_device(ctest_failed)) return;
    static const tc_dtype dts[2] = {TC_F16, TC_BF16};
    for (int k = 0; k < 2; k++) {
        tc_dtype dt = dts[k];
        double tol = dt == TC_F16 ? 2e-3 : 1e-2;
        tc_tensor *x = wave_as(dt, 4, SZ(4, 3, 5, 5), 1.5, 0.2), *w = wave_as(dt, 1, SZ(3), 0.5, 1),
                  *b = wave_as(dt, 1, SZ(3), 0.3, 0.1), *rm = wave_as(dt, 1, SZ(3), 0.2, 0),
                  *rv = wave_as(dt, 1, SZ(3), 0.3, 1), *go = wave_as(dt, 4, SZ(4, 3, 5, 5), 1, -0.1);
        tc_tensor *dx = on_dev(x), *dw = on_dev(w), *db = on_dev(b), *drm = on_dev(rm), *drv = on_dev(rv),
                  *dgo = on_dev(go);
        if (!dx || !dw || !db || !drm || !drv || !dgo) break;
        for (int train = 1; train >= 0; train--) {
            int64_t fb = tc_cuda_host_fallbacks(TC_OP_BATCH_NORM) + tc_cuda_host_fallbacks(TC_OP_BATCH_NORM_BACKWARD);
            const tc_tensor *ci[5] = {x, w, b, rm, rv}, *di[5] = {dx, dw, db, drm, drv};
            tc_tensor *yc[2] = {NULL, NULL}, *yd[2] = {NULL, NULL}, *gc[2] = {NULL, NULL}, *gd[2] = {NULL, NULL};
            const tc_params p = {.s = {1e-3}, .i = {train}};
            long long eps_seen = ct_cuda_emu_launches("cudnn batch norm backward, eps 0.001");
            CHECK_OK(tc_op_run(TC_OP_BATCH_NORM, ci, 5, &p, yc, 2));
            CHECK_OK(tc_op_run(TC_OP_BATCH_NORM, di, 5, &p, yd, 2));
            for (int i = 0; i < 2; i++) ct_keep(yc[i]), ct_keep(yd[i]);
            if (!yc[1] || !yd[1]) continue;
            CHECK(yd[0]->dtype == (int)dt && yd[1]->dtype == TC_F32 && yd[0]->device == DEV);
            CHECK(dev_near(yd[0], yc[0], tol));
            CHECK(dev_near(yd[1], yc[1], 1e-5));
            const tc_tensor *cb[4] = {go, x, w, yc[1]}, *dbk[4] = {dgo, dx, dw, yd[1]};
            CHECK_OK(tc_op_run(TC_OP_BATCH_NORM_BACKWARD, cb, 4, &p, gc, 2));
            CHECK_OK(tc_op_run(TC_OP_BATCH_NORM_BACKWARD, dbk, 4, &p, gd, 2));
            for (int i = 0; i < 2; i++) ct_keep(gc[i]), ct_keep(gd[i]);
            CHECK(gd[0] && gd[0]->dtype == (int)dt && gd[1] && gd[1]->dtype == TC_F32);
            CHECK(dev_near(gd[0], gc[0], tol));
            CHECK(dev_near(gd[1], gc[1], 1e-4)); /* sums of 100 products: float vs double order */
            if (eps_seen >= 0) /* the emulator: training's backward ran in cuDNN, told the forward's eps */
                CHECK(ct_cuda_emu_launches("cudnn batch norm backward, eps 0.001") - eps_seen == train);
            int64_t now = tc_cuda_host_fallbacks(TC_OP_BATCH_NORM) + tc_cuda_host_fallbacks(TC_OP_BATCH_NORM_BACKWARD);
            if (!mock_backend()) CHECK(now == fb); /* cuDNN ran them */
        }
    }
    ct_drop();
}

/* layer_norm / layer_norm_backward on the device against the CPU: float32 and float64, f16 /
 * bf16 beside float32 or half weights, long rows (several values per lane), many rows (the
 * weight sums go by chunks), no weight, a strided input and an in-place result. On a real
 * backend nothing falls back to the host (layernorm.cu ran every call). */
TEST(cuda_dev_layer_norm)
{
    if (!have_device(ctest_failed)) return;
    static const int dts[6][2] = {{TC_F32, TC_F32}, {TC_F64, TC_F64}, {TC_F16, TC_F32},
                                  {TC_F16, TC_F16}, {TC_BF16, TC_F32}, {TC_BF16, TC_BF16}};
    static const int64_t shapes[3][2] = {{300, 100}, {5, 1000}, {1, 7}};
    int64_t fb = tc_cuda_host_fallbacks(TC_OP_LAYER_NORM) + tc_cuda_host_fallbacks(TC_OP_LAYER_NORM_BACKWARD);
    for (int k = 0; k < 6; k++)
        for (int s = 0; s < 3; s++) {
            int dt = dts[k][0], wdt = dts[k][1];
            int64_t M = shapes[s][0], K = shapes[s][1];
            double tol = dt == TC_F64 ? 1e-12 : dt == TC_F32 ? 2e-5 : dt == TC_F16 ? 4e-3 : 3e-2;
            tc_tensor *x = wave_as(dt, 2, SZ(M, K), 1.5, 0.2), *w = wave_as(wdt, 1, SZ(K), 0.5, 1),
                      *b = wave_as(wdt, 1, SZ(K), 0.3, 0.1), *go = wave_as(dt, 2, SZ(M, K), 1, -0.1);
            tc_tensor *dx = on_dev(x), *dw = on_dev(w), *db = on_dev(b), *dgo = on_dev(go);
            if (!dx || !dw || !db || !dgo) break;
            for (int affine = 0; affine < 2; affine++) {
                const tc_params p = {.s = {1e-5}, .i = {1}};
                const tc_tensor *ci[3] = {x, affine ? w : NULL, affine ? b : NULL};
                const tc_tensor *di[3] = {dx, affine ? dw : NULL, affine ? db : NULL};
                tc_tensor *yc[2] = {NULL, NULL}, *yd[2] = {NULL, NULL}, *gc[2] = {NULL, NULL}, *gd[2] = {NULL, NULL};
                CHECK_OK(tc_op_run(TC_OP_LAYER_NORM, ci, 3, &p, yc, 2));
                CHECK_OK(tc_op_run(TC_OP_LAYER_NORM, di, 3, &p, yd, 2));
                for (int i = 0; i < 2; i++) ct_keep(yc[i]), ct_keep(yd[i]);
                if (!yc[1] || !yd[1]) continue;
                CHECK(yd[0]->dtype == dt && yd[0]->device == DEV && yd[1]->dtype == (dt == TC_F64 ? TC_F64 : TC_F32));
                CHECK(dev_near(yd[0], yc[0], tol));
                CHECK(dev_near(yd[1], yc[1], dt == TC_F64 ? 1e-12 : 1e-5));
                const tc_tensor *cb[4] = {go, x, ci[1], yc[1]}, *dbk[4] = {dgo, dx, di[1], yd[1]};
                CHECK_OK(tc_op_run(TC_OP_LAYER_NORM_BACKWARD, cb, 4, &p, gc, 2));
                CHECK_OK(tc_op_run(TC_OP_LAYER_NORM_BACKWARD, dbk, 4, &p, gd, 2));
                for (int i = 0; i < 2; i++) ct_keep(gc[i]), ct_keep(gd[i]);
                CHECK(gd[0] && gd[0]->dtype == dt && gd[1]);
                CHECK(dev_near(gd[0], gc[0], tol));
                CHECK(dev_near(gd[1], gc[1], dt == TC_F64 ? 1e-11 : 1e-4)); /* sums of up to 300 products */
            }
        }
    /* a strided (transposed) input, and y written over x in place */
    tc_tensor *x = wave_as(TC_F32, 2, SZ(40, 70), 1.5, 0.2), *xt = ct_keep(ct_transposed(x, 0, 1));
    tc_tensor *dxt = ct_keep(ct_transposed(on_dev(x), 0, 1)), *yc[2] = {NULL, NULL}, *yd[2] = {NULL, NULL};
    const tc_params p = {.s = {1e-5}, .i = {1}};
    CHECK_OK(tc_op_run(TC_OP_LAYER_NORM, (const tc_tensor *const[]){xt, NULL, NULL}, 3, &p, yc, 2));
    CHECK_OK(tc_op_run(TC_OP_LAYER_NORM, (const tc_tensor *const[]){dxt, NULL, NULL}, 3, &p, yd, 2));
    for (int i = 0; i < 2; i++) ct_keep(yc[i]), ct_keep(yd[i]);
    CHECK(dev_near(yd[0], yc[0], 2e-5));
    tc_tensor *dx = on_dev(x), *inplace[2] = {dx, NULL};
    CHECK_OK(tc_op_run(TC_OP_LAYER_NORM, (const tc_tensor *const[]){dx, NULL, NULL}, 3, &p, inplace, 2));
    ct_keep(inplace[1]);
    tc_tensor *yx[2] = {NULL, NULL};
    CHECK_OK(tc_op_run(TC_OP_LAYER_NORM, (const tc_tensor *const[]){x, NULL, NULL}, 3, &p, yx, 2));
    ct_keep(yx[0]), ct_keep(yx[1]);
    CHECK(inplace[0] == dx && dev_near(dx, yx[0], 2e-5));
    int64_t now = tc_cuda_host_fallbacks(TC_OP_LAYER_NORM) + tc_cuda_host_fallbacks(TC_OP_LAYER_NORM_BACKWARD);
    if (!mock_backend()) CHECK(now == fb);
    ct_drop();
}

/* rnn / rnn_backward in float16 and bfloat16 on the device (LSTM, GRU, tanh): through float32
 * copies and cuDNN's float32 path (dnn_rnn.cu's with_f32), as the CPU computes them
 * (tc_cpu_with_f32); they used to go to the host. On a real backend nothing falls back. */
TEST(cuda_dev_rnn_half)
{
    if (!have_device(ctest_failed)) return;
    static const tc_dtype dts[2] = {TC_F16, TC_BF16};
    static const int modes[3] = {2, 3, 0}, gates[3] = {4, 3, 1}, reserve[3] = {5, 4, 0};
    const int64_t T = 5, N = 3, I = 4, H = 6;
    for (int k = 0; k < 2; k++)
        for (int mi = 0; mi < 3; mi++) {
            tc_dtype dt = dts[k];
            double tol = dt == TC_F16 ? 4e-3 : 2e-2;
            int64_t GH = gates[mi] * H, S = modes[mi] == 2 ? 2 : 1, R = reserve[mi] * H;
            tc_tensor *c[9] = {wave_as(dt, 3, SZ(T, N, I), 1, 0), wave_as(dt, 3, SZ(S, N, H), 0.5, 0),
                               wave_as(dt, 2, SZ(GH, I), 0.4, 0), wave_as(dt, 2, SZ(GH, H), 0.4, 0.05),
                               wave_as(dt, 1, SZ(GH), 0.2, 0), wave_as(dt, 1, SZ(GH), 0.2, 0.1), NULL, NULL, NULL};
            tc_tensor *d[9] = {NULL};
            for (int i = 0; i < 6; i++) d[i] = c[i] ? on_dev(c[i]) : NULL;
            if (!d[0] || !d[5]) continue;
            int64_t fb = tc_cuda_host_fallbacks(TC_OP_RNN) + tc_cuda_host_fallbacks(TC_OP_RNN_BACKWARD);
            const tc_params p = {.i = {modes[mi]}};
            tc_tensor *yc[2] = {NULL, NULL}, *yd[2] = {NULL, NULL};
            CHECK_OK(tc_op_run(TC_OP_RNN, (const tc_tensor *const *)c, 6, &p, yc, 2));
            CHECK_OK(tc_op_run(TC_OP_RNN, (const tc_tensor *const *)d, 6, &p, yd, 2));
            for (int i = 0; i < 2; i++) ct_keep(yc[i]), ct_keep(yd[i]);
            if (!yc[0] || !yd[0]) continue;
            CHECK(yd[0]->dtype == (int)dt && yd[0]->device == DEV);
            CHECK(dev_near(yd[0], yc[0], tol));
            if (R > 0) CHECK(dev_near(yd[1], yc[1], tol));
            /* backward: b = {b_ih, b_hh} as (2, GH), dy, and the LSTM's dreserve on c_T only */
            tc_tensor *b2 = wave_as(dt, 2, SZ(2, GH), 0, 0), *dr = NULL;
            for (int64_t j = 0; j < GH; j++) {
                double v0 = 0, v1 = 0;
                tc_tensor_get(c[4], SZ(j), &v0), tc_tensor_get(c[5], SZ(j), &v1);
                tc_tensor_set_value(b2, SZ(0, j), v0), tc_tensor_set_value(b2, SZ(1, j), v1);
            }
            tc_tensor *dy = wave_as(dt, 3, SZ(T, N, H), 0.3, 0);
            if (R > 0) {
                dr = wave_as(dt, 3, SZ(T, N, R), 0, 0);
                for (int64_t n = 0; n < N; n++)
                    for (int64_t h = 0; h < H && modes[mi] == 2; h++) tc_tensor_set_value(dr, SZ(T - 1, n, 4 * H + h), 0.25);
            }
            const tc_tensor *bc[9] = {c[0], c[1], c[2], c[3], b2, yc[0], yc[1], dy, dr};
            const tc_tensor *bd[9] = {d[0], d[1], d[2], d[3], on_dev(b2), on_dev(yc[0]), on_dev(yc[1]), on_dev(dy),
                                      dr ? on_dev(dr) : NULL};
            tc_tensor *gc[2] = {NULL, NULL}, *gd[2] = {NULL, NULL};
            CHECK_OK(tc_op_run(TC_OP_RNN_BACKWARD, bc, 9, &p, gc, 2));
            CHECK_OK(tc_op_run(TC_OP_RNN_BACKWARD, bd, 9, &p, gd, 2));
            for (int i = 0; i < 2; i++) ct_keep(gc[i]), ct_keep(gd[i]);
            CHECK(dev_near(gd[0], gc[0], tol) && dev_near(gd[1], gc[1], tol));
            int64_t now = tc_cuda_host_fallbacks(TC_OP_RNN) + tc_cuda_host_fallbacks(TC_OP_RNN_BACKWARD);
            if (!mock_backend()) CHECK(now == fb); /* cuDNN ran them */
        }
    ct_drop();
}

/* The optimizer steps (adam_step, sgd_step, rmsprop_step, adagrad_step, adamax_step,
 * adadelta_step) on the device against
 * the CPU, bit for bit (optim.cu computes as core/cpu/optim.c does, without fused
 * multiply-adds): every float dtype, amsgrad, Nesterov, centered RMSprop, in place with the
 * per-step scalars on the host (a CPU vector joining the device op, as lua/optim passes them)
 * and into new results with the scalars on the device; a strided x; the host vector is the
 * only CPU tensor such an op takes. On a real backend nothing falls back to the host
 * (optim.cu ran every call). */
static const tc_op optim_ops[6] = {TC_OP_ADAM_STEP,    TC_OP_SGD_STEP,    TC_OP_RMSPROP_STEP,
                                   TC_OP_ADAGRAD_STEP, TC_OP_ADAMAX_STEP, TC_OP_ADADELTA_STEP};

static int64_t optim_fallbacks(void)
{
    int64_t n = 0;
    for (int k = 0; k < 6; k++) n += tc_cuda_host_fallbacks(optim_ops[k]);
    return n;
}

TEST(cuda_dev_optim_step)
{
    if (!have_device(ctest_failed)) return;
    int64_t fb = optim_fallbacks();
    static const tc_dtype dts[4] = {TC_F32, TC_F64, TC_F16, TC_BF16};
    const int64_t n = 3001;
    for (int k = 0; k < 4; k++)
        for (int flag = 0; flag < 2; flag++)
            for (int which = 0; which < 6; which++) {
                tc_dtype dt = dts[k];
                tc_op op = optim_ops[which];
                bool two_rows = op == TC_OP_ADAMAX_STEP || op == TC_OP_ADADELTA_STEP;
                if (flag && two_rows) continue; /* no flag */
                tc_tensor *x = wave_as(dt, 1, SZ(n), 1.5, 0.1), *g = wave_as(dt, 1, SZ(n), 1, -0.2), *st, *sc;
                tc_params p = {.s = {0.9, 0}, .i = {flag}};
                if (op == TC_OP_ADAM_STEP) { /* m, v (, vmax) */
                    st = wave_as(dt, 2, SZ(2 + flag, n), 0.2, 0.3);
                    sc = ct_from(TC_F64, 1, SZ(4), VALS(-0.01, 1e-8, 0.999, 0.01));
                    p.s[1] = 0.999;
                } else if (op == TC_OP_RMSPROP_STEP) { /* sq (, ga), buf: momentum 0.5 */
                    st = wave_as(dt, 2, SZ(2 + flag, n), 0.1, 0.5);
                    sc = ct_from(TC_F64, 1, SZ(3), VALS(-0.01, 1e-8, 0.01));
                    p.s[1] = 0.5;
                } else if (two_rows) { /* adamax's m, u; adadelta's sq, acc (rho 0.9) */
                    st = wave_as(dt, 2, SZ(2, n), 0.2, 0.3);
                    sc = ct_from(TC_F64, 1, SZ(3), VALS(op == TC_OP_ADAMAX_STEP ? -0.02 : -1, 1e-6, 0.01));
                    p.s[1] = op == TC_OP_ADAMAX_STEP ? 0.999 : 0;
                } else { /* sgd's momentum buffer, adagrad's sum */
                    st = wave_as(dt, 1, SZ(n), 0.5, op == TC_OP_ADAGRAD_STEP ? 0.6 : 0);
                    sc = op == TC_OP_SGD_STEP ? ct_from(TC_F64, 1, SZ(2), VALS(-0.1, 1e-3))
                                              : ct_from(TC_F64, 1, SZ(3), VALS(-0.1, 1e-10, 1e-3));
                }
                ct_keep(sc);
                tc_tensor *c[2] = {NULL, NULL}, *d2[2] = {NULL, NULL};
                CHECK_OK(tc_op_run(op, (const tc_tensor *const[]){x, g, st, sc}, 4, &p, c, 2));
                ct_keep(c[0]), ct_keep(c[1]);
                tc_tensor *dx = on_dev(x), *dg = on_dev(g), *dst = on_dev(st), *ip[2] = {dx, dst};
                if (!dx || !dg || !dst) break;
                CHECK_OK(tc_op_run(op, (const tc_tensor *const[]){dx, dg, dst, sc}, 4, &p, ip, 2));
                CHECK(ip[0] == dx && ip[1] == dst);
                bool same = dev_near(dx, c[0], 0) && dev_near(dst, c[1], 0);
                tc_tensor *dx2 = on_dev(x), *dst2 = on_dev(st);
                CHECK_OK(tc_op_run(op, (const tc_tensor *const[]){dx2, dg, dst2, on_dev(sc)}, 4, &p, d2, 2));
                ct_keep(d2[0]), ct_keep(d2[1]);
                same = same && dev_near(d2[0], c[0], 0) && dev_near(d2[1], c[1], 0) && dev_near(dx2, x, 0);
                if (!same) printf("  %s %s flag %d differs from the CPU\n", tc_op_info(op)->name, tc_dtype_name(dt), flag);
                CHECK(same);
            }
    /* in place through a transposed view of a device tensor */
    tc_tensor *x = wave_as(TC_F32, 2, SZ(40, 70), 1.5, 0.2), *g = wave_as(TC_F32, 2, SZ(70, 40), 1, 0);
    tc_tensor *st = wave_as(TC_F32, 2, SZ(2, 2800), 0.2, 0.3), *sc = ct_keep(ct_from(TC_F64, 1, SZ(4), VALS(-0.01, 1e-8, 1, 0)));
    tc_tensor *xt = ct_keep(ct_transposed(x, 0, 1)), *dxt = ct_keep(ct_transposed(on_dev(x), 0, 1));
    tc_tensor *dst = on_dev(st), *c[2] = {NULL, NULL}, *ip[2] = {dxt, dst};
    const tc_params p = {.s = {0.9, 0.999}};
    CHECK_OK(tc_op_run(TC_OP_ADAM_STEP, (const tc_tensor *const[]){xt, g, st, sc}, 4, &p, c, 2));
    ct_keep(c[0]), ct_keep(c[1]);
    CHECK_OK(tc_op_run(TC_OP_ADAM_STEP, (const tc_tensor *const[]){dxt, on_dev(g), dst, sc}, 4, &p, ip, 2));
    CHECK(dev_near(dxt, c[0], 0) && dev_near(dst, c[1], 0));
    /* a CPU tensor that is not the scalar vector is refused, naming the input */
    tc_tensor *none[2] = {NULL, NULL}, *sc22 = ct_keep(ct_from(TC_F64, 2, SZ(2, 2), VALS(-0.01, 1e-8, 1, 0)));
    CHECK_ERR(tc_op_run(TC_OP_ADAM_STEP, (const tc_tensor *const[]){dxt, on_dev(g), dst, sc22}, 4, &p, none, 2),
              TC_ERR_DEVICE, "adam_step: input 4 of size (2,2) is on cpu but the op runs on cuda:0");
    CHECK_ERR(tc_op_run(TC_OP_ADAM_STEP, (const tc_tensor *const[]){dxt, g, dst, sc}, 4, &p, none, 2), TC_ERR_DEVICE,
              "adam_step: input 2 of size (70,40) is on cpu but the op runs on cuda:0");
    CHECK(none[0] == NULL && none[1] == NULL);
    if (!mock_backend()) CHECK(optim_fallbacks() == fb);
    ct_drop();
}

/* A result over a transposed or shifted view of its own input reads the input from a copy
 * (dispatch.c), on the device as on the CPU. */
TEST(cuda_dev_result_overlapping_its_input)
{
    if (!have_device(ctest_failed)) return;
    const int64_t n = 300;
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(n, n))), *want = NULL;
    CHECK_OK(ct_run1(TC_OP_ADD, x, ct_keep(ct_transposed(x, 0, 1)), NULL, P(.s = {1}), &want));
    ct_keep(want);
    tc_tensor *dx = on_dev(x), *dxt = dx ? ct_keep(ct_transposed(dx, 0, 1)) : NULL, *out = dx;
    if (!dxt) {
        ct_drop();
        return;
    }
    CHECK_OK(ct_run1(TC_OP_ADD, dx, dxt, NULL, P(.s = {1}), &out));
    CHECK(out == dx && dev_near(dx, want, 0));
    /* a shifted copy: row r + 1 = old row r */
    tc_tensor *head = NULL, *tail = NULL;
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){dx}, 1, P(.i = {0, 0, n - 1}), &head, 1));
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){dx}, 1, P(.i = {0, 1, n - 1}), &tail, 1));
    ct_keep(head), ct_keep(tail);
    tc_tensor *res = tail;
    CHECK_OK(ct_run1(TC_OP_COPY, head, NULL, NULL, P(.i = {-1}), &res));
    tc_tensor *h = host(dx);
    CHECK(h && ct_at(h, n) == ct_at(want, 0) && ct_at(h, (n - 1) * n + 5) == ct_at(want, (n - 2) * n + 5));
    ct_drop();
}

/* Call k of cuda_dev_index_and_sort_over_their_inputs on base, a (4, 6) float32 tensor on
 * the host or the device: each writes a result sharing memory with an input. */
static tc_status call_over_input(int k, tc_tensor *base)
{
    int dev = base->device;
    tc_tensor *idx = ct_to(ct_keep(ct_from(TC_I64, 1, SZ(3), VALS(2, 0, 1))), dev);
    tc_tensor *rows3 = ct_view_at(base, 0, 2, SZ(3, 6), SZ(6, 1)), *out = NULL;
    switch (k) {
    case 0: /* index_select of rows 0..2 into rows 1..3 */
        out = ct_view_at(base, 6, 2, SZ(3, 6), SZ(6, 1));
        return ct_run1(TC_OP_INDEX_SELECT, rows3, idx, NULL, P(.i = {0}), &out);
    case 1: { /* index_copy in place, its source rows 1..2 of the destination */
        tc_tensor *src = ct_view_at(base, 6, 2, SZ(2, 6), SZ(6, 1));
        tc_tensor *pick = ct_to(ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(3, 0))), dev);
        out = base;
        return ct_run1(TC_OP_INDEX_COPY, base, pick, src, P(.i = {0}), &out);
    }
    case 2: { /* gather along dim 1 into a (4, 2) window one column in */
        tc_tensor *g = ct_to(ct_keep(ct_from(TC_I64, 2, SZ(4, 2), VALS(5, 0, 1, 1, 4, 2, 0, 3))), dev);
        out = ct_view_at(base, 1, 2, SZ(4, 2), SZ(6, 1));
        return ct_run1(TC_OP_GATHER, base, g, NULL, P(.i = {1}), &out);
    }
    case 3: { /* masked_select of the elements over 10 into elements 3..15 */
        tc_tensor *mask = ct_to(ct_keep(ct_from(TC_BOOL, 2, SZ(4, 6), VALS(0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0,
                                                                           1, 1, 0, 1, 1, 0, 0, 1, 0))),
                                dev);
        out = ct_view_at(base, 3, 1, SZ(13), SZ(1));
        return ct_run1(TC_OP_MASKED_SELECT, base, mask, NULL, NULL, &out);
    }
    case 4: { /* sort each row in place, descending */
        tc_tensor *res[2] = {base, NULL};
        tc_status s = tc_op_run(TC_OP_SORT, (const tc_tensor *const[]){base}, 1, P(.i = {1, 1}), res, 2);
        ct_keep(res[1]);
        return s;
    }
    default: { /* the 2 largest of each row into a window over the rows' first columns */
        tc_tensor *res[2] = {ct_view_at(base, 2, 2, SZ(4, 2), SZ(6, 1)), NULL};
        tc_status s = tc_op_run(TC_OP_TOPK, (const tc_tensor *const[]){base}, 1, P(.i = {1, 2, 1, 1}), res, 2);
        ct_keep(res[1]);
        return s;
    }
    }
}

/* Index ops and sorts whose result shares memory with an input read that input from a
 * private copy on the device (index.cu, sort.cu): the CPU's results, no host fallback. */
TEST(cuda_dev_index_and_sort_over_their_inputs)
{
    if (!have_device(ctest_failed)) return;
    static const tc_op ops[] = {TC_OP_INDEX_SELECT, TC_OP_INDEX_COPY, TC_OP_GATHER,
                                TC_OP_MASKED_SELECT, TC_OP_SORT, TC_OP_TOPK};
    int64_t fallbacks = 0;
    for (int k = 0; k < 6; k++) fallbacks += tc_cuda_host_fallbacks(ops[k]);
    for (int k = 0; k < 6; k++) {
        /* (i * 7) mod 24: every value once, rows unsorted */
        tc_tensor *cpu = ct_keep(ct_from(TC_F32, 2, SZ(4, 6), VALS(7, 14, 21, 4, 11, 18, 1, 8, 15, 22, 5, 12, 19, 2, 9,
                                                                  16, 23, 6, 13, 20, 3, 10, 17, 0)));
        tc_tensor *dev = on_dev(cpu);
        if (!dev) break;
        CHECK_OK(call_over_input(k, cpu));
        CHECK_OK(call_over_input(k, dev));
        if (!dev_near(dev, cpu, 0)) {
            printf("  %s over its input differs from the CPU\n", tc_op_info(ops[k])->name);
            *ctest_failed = 1;
        }
    }
    int64_t now = 0;
    for (int k = 0; k < 6; k++) now += tc_cuda_host_fallbacks(ops[k]);
    if (!mock_backend()) CHECK(now == fallbacks);
    ct_drop();
}

/* 1 when the backend is the CUDA emulator; else prints that the test needs its `what`. */
static int on_emulator(const char *what)
{
    if (ct_cuda_emu_launches("") >= 0) return 1;
    printf("  skip: needs the emulator's %s\n", what);
    return 0;
}

/* cuBLAS takes its workspace from the device outside the caching allocator: a product that
 * finds the device full of cached blocks runs once they are given back (blas.cu). Over the
 * emulator only, whose cuBLAS needs exactly 4 MiB free; a GPU's needs are its own. */
TEST(cuda_dev_matmul_memory_retry)
{
    if (!have_device(ctest_failed)) return;
    if (!on_emulator("cuBLAS (its workspace size is known)")) return;
    const int64_t MiB = (int64_t)1 << 20;
    tc_cuda_device_props pr;
    tc_cuda_memstats full, after;
    tc_tensor *a = on_dev(ct_keep(ct_from(TC_F32, 2, SZ(2, 2), VALS(1, 2, 3, 4)))), *r = NULL, *big = NULL;
    CHECK_OK(tc_cuda_device_properties(0, &pr));
    CHECK_OK(tc_cuda_memory_stats(0, &full));
    int64_t fill = (pr.total_memory - full.reserved_bytes - 2 * MiB) / (2 * MiB) * (2 * MiB);
    CHECK_OK(tc_tensor_new_on(DEV, TC_U8, 1, SZ(fill), &big));
    tc_tensor_release(big); /* cached, not given back: 2 to 4 MiB of the device left */
    CHECK_OK(tc_cuda_memory_stats(0, &full));
    CHECK(pr.total_memory - full.reserved_bytes < 4 * MiB);
    CHECK_OK(ct_run1(TC_OP_MM, a, a, NULL, NULL, &r));
    ct_keep(r);
    CHECK(SAME(host(r), 7, 10, 15, 22));
    CHECK_OK(tc_cuda_memory_stats(0, &after));
    CHECK(after.reserved_bytes < full.reserved_bytes); /* the cache was given back */
    ct_drop();
}

/* cuDNN lists tensor-core versions of its convolution algorithms under their own math type,
 * which dnn.cu sets on the descriptor with the algorithm -- except that exact float32 (TF32
 * off) stays FMA and a type letting cuDNN convert float32 down to half is never set. Over
 * the emulator only, whose cuDNN lists float32's first algorithm with ..._ALLOW_CONVERSION
 * and counts each convolution under the math type it ran with. */
TEST(cuda_dev_conv_math_types)
{
    if (!have_device(ctest_failed)) return;
    if (!on_emulator("cuDNN (it counts the math type of each convolution)")) return;
    static const char *const math[] = {"math DEFAULT", "math TENSOR_OP", "math ALLOW_CONVERSION", "math FMA"};
    tc_params cp = {.nshape = 6, .shape = {1, 1, 1, 1, 1, 1}, .i = {1}};
    int64_t tf32 = tc_cuda_get_flag(TC_CUDA_FLAG_TF32), bench = tc_cuda_get_flag(TC_CUDA_FLAG_CUDNN_BENCHMARK);
    /* {dtype, TF32, benchmark} -> the math type the convolution ran with */
    static const struct {
        int dt, tf32, bench, want;
    } cases[] = {{TC_F32, 0, 0, 3}, {TC_F32, 0, 1, 3}, {TC_F32, 1, 0, 0}, {TC_F32, 1, 1, 0},
                 {TC_F16, 0, 0, 1}, {TC_BF16, 0, 1, 1}, {TC_F64, 0, 0, 0}};
    static double xv[216], wv[108]; /* small values: exact in every dtype, sums far from f16's range */
    for (int i = 0; i < 216; i++) xv[i] = (i * 5 % 9 - 4) * 0.25, wv[i % 108] = (i * 7 % 5 - 2) * 0.5;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tc_tensor *x = ct_keep(ct_from(cases[c].dt, 4, SZ(2, 3, 6, 6), xv));
        tc_tensor *w = ct_keep(ct_from(cases[c].dt, 4, SZ(4, 3, 3, 3), wv));
        tc_tensor *want = NULL, *got = NULL;
        CHECK_OK(tc_op_run(TC_OP_CONV2D, (const tc_tensor *const[]){x, w, NULL}, 3, &cp, &want, 1));
        ct_keep(want);
        CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_TF32, cases[c].tf32));
        CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_CUDNN_BENCHMARK, cases[c].bench));
        long long before[4];
        for (int m = 0; m < 4; m++) before[m] = ct_cuda_emu_launches(math[m]);
        tc_tensor *dx = on_dev(x), *dw = on_dev(w);
        CHECK_OK(tc_op_run(TC_OP_CONV2D, (const tc_tensor *const[]){dx, dw, NULL}, 3, &cp, &got, 1));
        ct_keep(got);
        long long ran[4];
        for (int m = 0; m < 4; m++) ran[m] = ct_cuda_emu_launches(math[m]) - before[m];
        /* the run itself (benchmark mode's Find runs at the descriptor's type first) */
        CHECK(ran[cases[c].want] >= 1 && ran[2] == 0);
        if (cases[c].dt == TC_F32 && !cases[c].tf32) CHECK(ran[0] == 0 && ran[1] == 0);
        if (!got || !want || tc_tensor_numel(got) != tc_tensor_numel(want)) continue;
        tc_tensor *h = host(got);
        double worst = 0;
        for (int64_t i = 0; h && i < tc_tensor_numel(want); i++)
            worst = fmax(worst, fabs(ct_at(h, i) - ct_at(want, i)) / (1 + fabs(ct_at(want, i))));
        CHECK(h && worst < (cases[c].dt == TC_BF16 ? 1e-2 : 1e-3));
    }
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_TF32, tf32));
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_CUDNN_BENCHMARK, bench));
    ct_drop();
}
