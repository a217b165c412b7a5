/* test_cuda_dnn_select.c -- which softmax / log_softmax and pooling calls the CUDA backend
 * gives to cuDNN (core/cuda/dnn_select.h), checked on the host: every rule of the pick
 * (switch, op, dtype, empty, bad call, layout, int range, pooled geometry) with the plan it
 * builds, and, for whole grids of configurations, that cuDNN's documented computation on
 * the plan (softmax over C of an NCHW (n, c, h, 1) tensor; average pooling with one window
 * and one stride, divisor kH*kW or the in-plane count, and its adjoint for the backward)
 * gives libtocha's CPU results exactly where the pick says TAKE. The cuDNN calls themselves
 * need a GPU (docs/cuda.md): cuda_dev_dnn_* runs the ops on the device with
 * torch.backends.cudnn.enabled on and off against the CPU (over the mock backend, where the
 * host fallback computes them, it checks that the switch reaches the backend). */
#include "ctest.h"
#include "cuda/dnn_select.h"
#include "cuda_test_util.h"
#include "gradcheck.h"
#include "internal.h"
#include <stdlib.h>

static char g_mem[3][16]; /* distinct fake device addresses */

/* A contiguous view of sizes (strides row-major). */
static tc_cuda_view view(int dt, int nd, const int64_t *sz, void *data)
{
    tc_cuda_view v;
    memset(&v, 0, sizeof v);
    v.data = data, v.dtype = dt, v.ndim = nd, v.numel = 1;
    for (int d = nd - 1; d >= 0; d--) v.size[d] = sz[d], v.stride[d] = v.numel, v.numel *= sz[d];
    return v;
}

static tc_cuda_view view_of(const tc_tensor *t, void *data)
{
    tc_cuda_view v = view(t->dtype, t->ndim, t->size, data);
    for (int d = 0; d < t->ndim; d++) v.stride[d] = t->stride[d];
    return v;
}

static tc_cuda_call call1(int op, const tc_cuda_view *x, tc_cuda_view y, const tc_params *p)
{
    tc_cuda_call c;
    memset(&c, 0, sizeof c);
    c.op = op, c.nin = 1, c.nout = op == TC_OP_MAX_POOL2D || op == TC_OP_ADAPTIVE_MAX_POOL2D ? 2 : 1;
    c.in = x, c.out[0] = y;
    if (p) c.params = *p;
    return c;
}

static cu_dnn_pick sm_pick(int op, tc_cuda_view x, tc_cuda_view y, int64_t dim, bool on, cu_dnn_softmax_plan *p)
{
    tc_cuda_call c = call1(op, &x, y, P(.i = {dim}));
    cu_dnn_softmax_plan scratch;
    return cu_dnn_softmax_pick(on, &c, p ? p : &scratch);
}

TEST(cuda_dnn_select_softmax_rules)
{
    const int64_t *sz = SZ(2, 3, 4);
    tc_cuda_view x = view(TC_F32, 3, sz, g_mem[0]), y = view(TC_F32, 3, sz, g_mem[1]);
    cu_dnn_softmax_plan p = {0};
    CHECK(sm_pick(TC_OP_SOFTMAX, x, y, 1, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 2 && p.c == 3 && p.h == 4 && !p.log);
    CHECK(sm_pick(TC_OP_LOG_SOFTMAX, x, y, -1, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 6 && p.c == 4 && p.h == 1 && p.log);
    CHECK(sm_pick(TC_OP_SOFTMAX, x, y, 0, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 1 && p.c == 2 && p.h == 12);
    /* every float dtype; a 0-dim input is one line of one */
    const int fl[] = {TC_F64, TC_F16, TC_BF16};
    for (int i = 0; i < 3; i++) {
        x.dtype = y.dtype = fl[i];
        CHECK(sm_pick(TC_OP_SOFTMAX, x, y, 2, true, NULL) == CU_DNN_TAKE);
    }
    x.dtype = y.dtype = TC_F32;
    tc_cuda_view s0 = view(TC_F32, 0, NULL, g_mem[0]), s1 = view(TC_F32, 0, NULL, g_mem[1]);
    CHECK(sm_pick(TC_OP_SOFTMAX, s0, s1, 0, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 1 && p.c == 1 && p.h == 1);

    /* the switch, the op, the dtype */
    CHECK(sm_pick(TC_OP_SOFTMAX, x, y, 1, false, NULL) == CU_DNN_OFF);
    CHECK(sm_pick(TC_OP_EXP, x, y, 1, true, NULL) == CU_DNN_OP);
    /* the causal softmax (i1) has no cuDNN form; log_softmax ignores i1 */
    tc_cuda_call cc = call1(TC_OP_SOFTMAX, &x, y, P(.i = {2, 1}));
    CHECK(cu_dnn_softmax_pick(true, &cc, &p) == CU_DNN_OP);
    cc = call1(TC_OP_LOG_SOFTMAX, &x, y, P(.i = {2, 1}));
    CHECK(cu_dnn_softmax_pick(true, &cc, &p) == CU_DNN_TAKE);
    tc_cuda_view xi = x, yi = y;
    xi.dtype = yi.dtype = TC_I64;
    CHECK(sm_pick(TC_OP_SOFTMAX, xi, yi, 1, true, NULL) == CU_DNN_DTYPE);
    yi = y, yi.dtype = TC_F64; /* results of another dtype are not cuDNN's */
    CHECK(sm_pick(TC_OP_SOFTMAX, x, yi, 1, true, NULL) == CU_DNN_DTYPE);
    /* empty; dims out of range (our kernel words the error) */
    tc_cuda_view e0 = view(TC_F32, 2, SZ(0, 3), g_mem[0]), e1 = view(TC_F32, 2, SZ(0, 3), g_mem[1]);
    CHECK(sm_pick(TC_OP_SOFTMAX, e0, e1, 1, true, NULL) == CU_DNN_EMPTY);
    CHECK(sm_pick(TC_OP_SOFTMAX, x, y, 3, true, NULL) == CU_DNN_ARG);
    CHECK(sm_pick(TC_OP_SOFTMAX, x, y, -4, true, NULL) == CU_DNN_ARG);
    /* layout: a transposed input or result, a broadcast input, in place; a size-1 dim's
     * stride does not matter */
    tc_cuda_view t = x;
    t.stride[1] = 1, t.stride[2] = 3;
    CHECK(sm_pick(TC_OP_SOFTMAX, t, y, 1, true, NULL) == CU_DNN_LAYOUT);
    t = y, t.stride[1] = 1, t.stride[2] = 3;
    CHECK(sm_pick(TC_OP_SOFTMAX, x, t, 1, true, NULL) == CU_DNN_LAYOUT);
    t = x, t.stride[0] = 0;
    CHECK(sm_pick(TC_OP_SOFTMAX, t, y, 1, true, NULL) == CU_DNN_LAYOUT);
    CHECK(sm_pick(TC_OP_SOFTMAX, x, x, 1, true, NULL) == CU_DNN_LAYOUT);
    tc_cuda_view u0 = view(TC_F32, 3, SZ(2, 1, 4), g_mem[0]), u1 = view(TC_F32, 3, SZ(2, 1, 4), g_mem[1]);
    u0.stride[1] = 77;
    CHECK(sm_pick(TC_OP_SOFTMAX, u0, u1, 2, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 2 && p.c == 4 && p.h == 1);
    /* int range: 2^31 elements, even with every dim small enough */
    tc_cuda_view b0 = view(TC_F32, 2, SZ(1 << 16, 1 << 15), g_mem[0]);
    tc_cuda_view b1 = view(TC_F32, 2, SZ(1 << 16, 1 << 15), g_mem[1]);
    CHECK(sm_pick(TC_OP_SOFTMAX, b0, b1, 1, true, NULL) == CU_DNN_SIZE);
    b0 = view(TC_F32, 2, SZ(1 << 16, (1 << 15) - 1), g_mem[0]);
    b1 = view(TC_F32, 2, SZ(1 << 16, (1 << 15) - 1), g_mem[1]);
    CHECK(sm_pick(TC_OP_SOFTMAX, b0, b1, 1, true, NULL) == CU_DNN_TAKE);
}

/* The backward ops: (gradOutput g, the forward's output y) in, gx out. */
static cu_dnn_pick smb_pick(int op, tc_cuda_view g, tc_cuda_view y, tc_cuda_view gx, int64_t dim, bool on,
                            cu_dnn_softmax_plan *p)
{
    tc_cuda_view in[2] = {g, y};
    tc_cuda_call c = call1(op, in, gx, P(.i = {dim}));
    c.nin = 2;
    cu_dnn_softmax_plan scratch;
    return cu_dnn_softmax_pick(on, &c, p ? p : &scratch);
}

TEST(cuda_dnn_select_softmax_backward_rules)
{
    const int64_t *sz = SZ(2, 3, 4);
    tc_cuda_view g = view(TC_F32, 3, sz, g_mem[0]), y = view(TC_F32, 3, sz, g_mem[1]), gx = view(TC_F32, 3, sz, g_mem[2]);
    cu_dnn_softmax_plan p = {0};
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, y, gx, 1, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 2 && p.c == 3 && p.h == 4 && !p.log && p.backward);
    CHECK(smb_pick(TC_OP_LOG_SOFTMAX_BACKWARD, g, y, gx, -1, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 6 && p.c == 4 && p.h == 1 && p.log && p.backward);
    CHECK(sm_pick(TC_OP_LOG_SOFTMAX, g, gx, 0, true, &p) == CU_DNN_TAKE && p.log && !p.backward);
    const int fl[] = {TC_F64, TC_F16, TC_BF16};
    for (int i = 0; i < 3; i++) {
        tc_cuda_view a = g, b = y, o = gx;
        a.dtype = b.dtype = o.dtype = fl[i];
        CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, a, b, o, 2, true, NULL) == CU_DNN_TAKE);
    }
    /* g and y may be the same memory (both are read) */
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, g, gx, 1, true, NULL) == CU_DNN_TAKE);
    /* the causal backward (i1) stays with our kernel, which reads only the live elements;
     * log_softmax_backward ignores i1 */
    tc_cuda_view gy[2] = {g, y};
    tc_cuda_call cb = call1(TC_OP_SOFTMAX_BACKWARD, gy, gx, P(.i = {2, 1}));
    cb.nin = 2;
    CHECK(cu_dnn_softmax_pick(true, &cb, &p) == CU_DNN_OP);
    cb.op = TC_OP_LOG_SOFTMAX_BACKWARD;
    CHECK(cu_dnn_softmax_pick(true, &cb, &p) == CU_DNN_TAKE);

    /* the switch; one input only */
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, y, gx, 1, false, NULL) == CU_DNN_OFF);
    tc_cuda_call one = call1(TC_OP_SOFTMAX_BACKWARD, &g, gx, P(.i = {1}));
    CHECK(cu_dnn_softmax_pick(true, &one, &p) == CU_DNN_ARG);
    /* dtypes: y's or the result's differing */
    tc_cuda_view d = y;
    d.dtype = TC_F64;
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, d, gx, 1, true, NULL) == CU_DNN_DTYPE);
    d = gx, d.dtype = TC_F64;
    CHECK(smb_pick(TC_OP_LOG_SOFTMAX_BACKWARD, g, y, d, 1, true, NULL) == CU_DNN_DTYPE);
    d = g, d.dtype = TC_I32;
    tc_cuda_view di = y, dio = gx;
    di.dtype = dio.dtype = TC_I32;
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, d, di, dio, 1, true, NULL) == CU_DNN_DTYPE);
    /* y of another shape with as many elements; dims out of range; empty */
    tc_cuda_view y2 = view(TC_F32, 3, SZ(2, 4, 3), g_mem[1]);
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, y2, gx, 1, true, NULL) == CU_DNN_ARG);
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, y, gx, 3, true, NULL) == CU_DNN_ARG);
    tc_cuda_view e0 = view(TC_F32, 2, SZ(0, 3), g_mem[0]), e1 = view(TC_F32, 2, SZ(0, 3), g_mem[1]),
                 e2 = view(TC_F32, 2, SZ(0, 3), g_mem[2]);
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, e0, e1, e2, 1, true, NULL) == CU_DNN_EMPTY);
    /* layout: any of the three strided; the result over either input */
    tc_cuda_view t = y;
    t.stride[1] = 1, t.stride[2] = 3;
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, t, gx, 1, true, NULL) == CU_DNN_LAYOUT);
    t = g, t.stride[1] = 1, t.stride[2] = 3;
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, t, y, gx, 1, true, NULL) == CU_DNN_LAYOUT);
    t = gx, t.stride[1] = 1, t.stride[2] = 3;
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, y, t, 1, true, NULL) == CU_DNN_LAYOUT);
    t = gx, t.data = g.data;
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, g, y, t, 1, true, NULL) == CU_DNN_LAYOUT);
    t = gx, t.data = y.data;
    CHECK(smb_pick(TC_OP_LOG_SOFTMAX_BACKWARD, g, y, t, 1, true, NULL) == CU_DNN_LAYOUT);
    /* int range */
    tc_cuda_view b0 = view(TC_F32, 2, SZ(1 << 16, 1 << 15), g_mem[0]), b1 = view(TC_F32, 2, SZ(1 << 16, 1 << 15), g_mem[1]),
                 b2 = view(TC_F32, 2, SZ(1 << 16, 1 << 15), g_mem[2]);
    CHECK(smb_pick(TC_OP_SOFTMAX_BACKWARD, b0, b1, b2, 1, true, NULL) == CU_DNN_SIZE);
}

/* cuDNN's softmax on the plan: over C of the NCHW tensor (n, c, h, 1), x read row-major. */
TEST(cuda_dnn_select_softmax_plan_is_the_op)
{
    const int64_t *sz = SZ(2, 3, 4, 5);
    tc_tensor *x = ct_keep(gc_rand(TC_F64, 4, sz, -3, 3, 11));
    CHECK(x != NULL);
    if (!x) return;
    int bad = 0;
    for (int lg = 0; lg < 2; lg++)
        for (int64_t dim = -4; dim < 4; dim++) {
            int op = lg ? TC_OP_LOG_SOFTMAX : TC_OP_SOFTMAX;
            tc_tensor *y = NULL;
            CHECK_OK(ct_run1(op, x, NULL, NULL, P(.i = {dim}), &y));
            ct_keep(y);
            tc_cuda_view xv = view_of(x, g_mem[0]), yv = view_of(y, g_mem[1]);
            cu_dnn_softmax_plan p = {0};
            CHECK(sm_pick(op, xv, yv, dim, true, &p) == CU_DNN_TAKE);
            CHECK(p.log == (lg != 0) && (int64_t)p.n * p.c * p.h == 120);
            for (int n = 0; n < p.n; n++)
                for (int h = 0; h < p.h; h++) {
                    double m = -INFINITY, s = 0;
                    for (int c = 0; c < p.c; c++) m = fmax(m, ct_at(x, ((int64_t)n * p.c + c) * p.h + h));
                    for (int c = 0; c < p.c; c++) s += exp(ct_at(x, ((int64_t)n * p.c + c) * p.h + h) - m);
                    for (int c = 0; c < p.c; c++) {
                        int64_t at = ((int64_t)n * p.c + c) * p.h + h;
                        double v = ct_at(x, at) - m, want = lg ? v - log(s) : exp(v) / s;
                        if (!ct_near(ct_at(y, at), want, 1e-12)) bad++;
                    }
                }
            /* the backward op on (dy, y): cudnnSoftmaxBackward's sums over C of the same plan,
             * ACCURATE dx = y (dy - sum(dy y)), LOG dx = dy - exp(y) sum(dy) */
            tc_tensor *dy = ct_keep(gc_rand(TC_F64, 4, sz, -1, 1, 12 + (uint64_t)dim)), *dx = NULL;
            int bop = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
            CHECK_OK(ct_run1(bop, dy, y, NULL, P(.i = {dim}), &dx));
            ct_keep(dx);
            cu_dnn_softmax_plan q = {0};
            CHECK(smb_pick(bop, view_of(dy, g_mem[0]), view_of(y, g_mem[1]), view_of(dx, g_mem[2]), dim, true, &q) ==
                  CU_DNN_TAKE);
            CHECK(q.backward && q.log == p.log && q.n == p.n && q.c == p.c && q.h == p.h);
            for (int n = 0; n < q.n; n++)
                for (int h = 0; h < q.h; h++) {
                    double s = 0;
                    for (int c = 0; c < q.c; c++) {
                        int64_t at = ((int64_t)n * q.c + c) * q.h + h;
                        s += lg ? ct_at(dy, at) : ct_at(dy, at) * ct_at(y, at);
                    }
                    for (int c = 0; c < q.c; c++) {
                        int64_t at = ((int64_t)n * q.c + c) * q.h + h;
                        double yv = ct_at(y, at), want = lg ? ct_at(dy, at) - exp(yv) * s : yv * (ct_at(dy, at) - s);
                        if (!ct_near(ct_at(dx, at), want, 1e-12)) bad++;
                    }
                }
        }
    CHECK(bad == 0);
    if (bad) printf("  %d elements differ\n", bad);
    ct_drop();
}

static tc_params pool_params(int64_t k, int64_t s, int64_t pad, int ceil, int incl, int64_t H, int64_t W)
{
    tc_params p;
    memset(&p, 0, sizeof p);
    p.nshape = H ? 8 : 6;
    int64_t g[8] = {k, k, s, s, pad, pad, H, W};
    memcpy(p.shape, g, sizeof g);
    p.i[0] = ceil, p.i[1] = incl;
    return p;
}

static cu_dnn_pick pool_pick(int op, tc_cuda_view x, tc_cuda_view y, const tc_params *pp, bool on, cu_dnn_pool_plan *p)
{
    tc_cuda_call c = call1(op, &x, y, pp);
    cu_dnn_pool_plan scratch;
    return cu_dnn_pool_pick(on, &c, p ? p : &scratch);
}

TEST(cuda_dnn_select_pool_rules)
{
    /* (2,3,7,6), kernel 3x2, stride 2x2, padding 1x1 -> (2,3,4,4) */
    tc_params pp = pool_params(0, 0, 0, 0, 1, 0, 0);
    int64_t g[6] = {3, 2, 2, 2, 1, 1};
    memcpy(pp.shape, g, sizeof g);
    tc_cuda_view x = view(TC_F32, 4, SZ(2, 3, 7, 6), g_mem[0]), y = view(TC_F32, 4, SZ(2, 3, 4, 4), g_mem[1]);
    cu_dnn_pool_plan p = {0};
    CHECK(pool_pick(TC_OP_AVG_POOL2D, x, y, &pp, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 2 && p.c == 3 && p.h == 7 && p.w == 6 && p.ho == 4 && p.wo == 4);
    CHECK(p.kh == 3 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 1 && p.pw == 1);
    CHECK(p.include_pad && !p.backward);
    pp.i[1] = 0;
    CHECK(pool_pick(TC_OP_AVG_POOL2D, x, y, &pp, true, &p) == CU_DNN_TAKE && !p.include_pad);
    /* the backward: gout (2,3,4,4) in, the (2,3,7,6) gradient out */
    tc_params pb = pp;
    pb.nshape = 8, pb.shape[6] = 7, pb.shape[7] = 6;
    tc_cuda_view go = view(TC_F32, 4, SZ(2, 3, 4, 4), g_mem[0]), gi = view(TC_F32, 4, SZ(2, 3, 7, 6), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D_BACKWARD, go, gi, &pb, true, &p) == CU_DNN_TAKE);
    CHECK(p.backward && p.n == 2 && p.c == 3 && p.h == 7 && p.w == 6 && p.ho == 4 && p.wo == 4);
    /* 3-D (C,H,W): one image */
    tc_cuda_view x3 = view(TC_F64, 3, SZ(5, 7, 6), g_mem[0]), y3 = view(TC_F64, 3, SZ(5, 4, 4), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, x3, y3, &pp, true, &p) == CU_DNN_TAKE);
    CHECK(p.n == 1 && p.c == 5 && p.h == 7 && p.ho == 4);

    /* the switch; the ops without a cuDNN form */
    CHECK(pool_pick(TC_OP_AVG_POOL2D, x, y, &pp, false, NULL) == CU_DNN_OFF);
    const int others[] = {TC_OP_MAX_POOL2D, TC_OP_ADAPTIVE_AVG_POOL2D, TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD,
                          TC_OP_ADAPTIVE_MAX_POOL2D, TC_OP_SOFTMAX};
    for (int i = 0; i < 5; i++) CHECK(pool_pick(others[i], x, y, &pp, true, NULL) == CU_DNN_OP);
    /* dtypes */
    const int fl[] = {TC_F64, TC_F16, TC_BF16};
    for (int i = 0; i < 3; i++) {
        tc_cuda_view a = x, b = y;
        a.dtype = b.dtype = fl[i];
        CHECK(pool_pick(TC_OP_AVG_POOL2D, a, b, &pp, true, NULL) == CU_DNN_TAKE);
    }
    tc_cuda_view xi = x, yi = y;
    xi.dtype = yi.dtype = TC_I32;
    CHECK(pool_pick(TC_OP_AVG_POOL2D, xi, yi, &pp, true, NULL) == CU_DNN_DTYPE);
    /* empty; a rank our kernel rejects */
    tc_cuda_view e0 = view(TC_F32, 4, SZ(0, 3, 7, 6), g_mem[0]), e1 = view(TC_F32, 4, SZ(0, 3, 4, 4), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, e0, e1, &pp, true, NULL) == CU_DNN_EMPTY);
    tc_cuda_view r2 = view(TC_F32, 2, SZ(7, 6), g_mem[0]), r2o = view(TC_F32, 2, SZ(4, 4), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, r2, r2o, &pp, true, NULL) == CU_DNN_ARG);
    /* layout: transposed planes in or out */
    tc_cuda_view t = x;
    t.stride[2] = 1, t.stride[3] = 7;
    CHECK(pool_pick(TC_OP_AVG_POOL2D, t, y, &pp, true, NULL) == CU_DNN_LAYOUT);
    t = gi, t.stride[0] = 7 * 6, t.stride[1] = 2 * 7 * 6; /* (N,C) swapped in memory */
    CHECK(pool_pick(TC_OP_AVG_POOL2D_BACKWARD, go, t, &pb, true, NULL) == CU_DNN_LAYOUT);
    /* int range: the element count, and a parameter */
    tc_cuda_view bx = view(TC_F32, 4, SZ(1024, 1024, 64, 32), g_mem[0]);
    tc_cuda_view by = view(TC_F32, 4, SZ(1024, 1024, 32, 16), g_mem[1]);
    tc_params p22 = pool_params(2, 2, 0, 0, 1, 0, 0);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, bx, by, &p22, true, NULL) == CU_DNN_SIZE);
    bx = view(TC_F32, 4, SZ(1024, 32, 64, 32), g_mem[0]), by = view(TC_F32, 4, SZ(1024, 32, 32, 16), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, bx, by, &p22, true, NULL) == CU_DNN_TAKE);
    tc_params pbig = p22;
    pbig.shape[2] = (int64_t)INT_MAX + 1; /* a stride beyond int (one window per axis) */
    tc_cuda_view o11 = view(TC_F32, 4, SZ(1024, 32, 32, 1), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, bx, o11, &pbig, true, NULL) == CU_DNN_SIZE);
    /* geometry: ceil_mode's extra window (6 -> 3 with kernel 3, stride 2) stays ours; ceil
     * mode adding none (7 -> 3) is cuDNN's */
    tc_params pc = pool_params(3, 2, 0, 1, 1, 0, 0);
    tc_cuda_view c6 = view(TC_F32, 4, SZ(1, 1, 6, 6), g_mem[0]), c6o = view(TC_F32, 4, SZ(1, 1, 3, 3), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, c6, c6o, &pc, true, NULL) == CU_DNN_GEOMETRY);
    tc_cuda_view c7 = view(TC_F32, 4, SZ(1, 1, 7, 7), g_mem[0]), c7o = view(TC_F32, 4, SZ(1, 1, 3, 3), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, c7, c7o, &pc, true, NULL) == CU_DNN_TAKE);
    tc_cuda_view c76 = view(TC_F32, 4, SZ(1, 1, 7, 6), g_mem[0]), c76o = view(TC_F32, 4, SZ(1, 1, 3, 3), g_mem[1]);
    CHECK(pool_pick(TC_OP_AVG_POOL2D, c76, c76o, &pc, true, NULL) == CU_DNN_GEOMETRY); /* one axis is enough */
    tc_params pcb = pool_params(3, 2, 0, 1, 1, 6, 6);
    CHECK(pool_pick(TC_OP_AVG_POOL2D_BACKWARD, c6o, c6, &pcb, true, NULL) == CU_DNN_GEOMETRY);

    char buf[64];
    CHECK(!strcmp(cu_dnn_sizes(&x, buf, sizeof buf), "(2,3,7,6)"));
    CHECK(!strcmp(cu_dnn_sizes(&e0, buf, 6), "(0,3,")); /* truncated, terminated */
    tc_cuda_view z = view(TC_F32, 0, NULL, g_mem[0]);
    CHECK(!strcmp(cu_dnn_sizes(&z, buf, sizeof buf), "()"));
}

/* cuDNN's average pooling on the plan: window [i*s - p, i*s - p + k) clipped to the plane,
 * divisor kh*kw (include) or the clipped count; planes n*c, row-major. */
static double dnn_avg(const cu_dnn_pool_plan *p, const tc_tensor *x, int64_t plane, int i, int j, int64_t *h0,
                      int64_t *h1, int64_t *w0, int64_t *w1, double *div)
{
    int64_t a = (int64_t)i * p->sh - p->ph, b = (int64_t)j * p->sw - p->pw;
    *h0 = a < 0 ? 0 : a, *h1 = a + p->kh > p->h ? p->h : a + p->kh;
    *w0 = b < 0 ? 0 : b, *w1 = b + p->kw > p->w ? p->w : b + p->kw;
    *div = p->include_pad ? (double)p->kh * p->kw : (double)((*h1 - *h0) * (*w1 - *w0));
    double s = 0;
    if (x)
        for (int64_t h = *h0; h < *h1; h++)
            for (int64_t w = *w0; w < *w1; w++) s += ct_at(x, (plane * p->h + h) * p->w + w);
    return s / *div;
}

TEST(cuda_dnn_select_pool_plan_is_the_op)
{
    int taken = 0, kept = 0, bad = 0;
    uint64_t seed = 21;
    for (int64_t H = 4; H <= 7; H++)
        for (int64_t k = 1; k <= 3; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t pad = 0; pad <= k / 2; pad++)
                    for (int ceil = 0; ceil < 2; ceil++)
                        for (int incl = 0; incl < 2; incl++) {
                            int64_t W = H + 1;
                            tc_tensor *x = ct_keep(gc_rand(TC_F64, 4, SZ(2, 2, H, W), -1, 1, seed++)), *y = NULL;
                            tc_params pf = pool_params(k, s, pad, ceil, incl, 0, 0);
                            CHECK_OK(ct_run1(TC_OP_AVG_POOL2D, x, NULL, NULL, &pf, &y));
                            ct_keep(y);
                            tc_cuda_view xv = view_of(x, g_mem[0]), yv = view_of(y, g_mem[1]);
                            cu_dnn_pool_plan p = {0};
                            cu_dnn_pick got = pool_pick(TC_OP_AVG_POOL2D, xv, yv, &pf, true, &p);
                            if (got == CU_DNN_GEOMETRY) { /* only ceil_mode's extra window */
                                CHECK(ceil && (y->size[2] != (H + 2 * pad - k) / s + 1 ||
                                               y->size[3] != (W + 2 * pad - k) / s + 1));
                                kept++;
                                continue;
                            }
                            CHECK(got == CU_DNN_TAKE);
                            if (got != CU_DNN_TAKE) continue;
                            taken++;
                            /* forward */
                            for (int64_t pl = 0; pl < 4; pl++)
                                for (int i = 0; i < p.ho; i++)
                                    for (int j = 0; j < p.wo; j++) {
                                        int64_t h0, h1, w0, w1;
                                        double div, want = dnn_avg(&p, x, pl, i, j, &h0, &h1, &w0, &w1, &div);
                                        if (!ct_near(ct_at(y, (pl * p.ho + i) * p.wo + j), want, 1e-12)) bad++;
                                    }
                            /* backward: the adjoint of that forward, gout scattered / div */
                            tc_tensor *go = ct_keep(gc_rand(TC_F64, 4, y->size, -1, 1, seed++)), *gi = NULL;
                            tc_params pb = pool_params(k, s, pad, ceil, incl, H, W);
                            CHECK_OK(ct_run1(TC_OP_AVG_POOL2D_BACKWARD, go, NULL, NULL, &pb, &gi));
                            ct_keep(gi);
                            tc_cuda_view gov = view_of(go, g_mem[0]), giv = view_of(gi, g_mem[1]);
                            cu_dnn_pool_plan q = {0};
                            CHECK(pool_pick(TC_OP_AVG_POOL2D_BACKWARD, gov, giv, &pb, true, &q) == CU_DNN_TAKE);
                            CHECK(q.backward && q.h == p.h && q.w == p.w && q.ho == p.ho && q.wo == p.wo &&
                                  q.include_pad == p.include_pad);
                            double *want = calloc((size_t)(4 * H * W), sizeof *want);
                            if (!want) continue;
                            for (int64_t pl = 0; pl < 4; pl++)
                                for (int i = 0; i < q.ho; i++)
                                    for (int j = 0; j < q.wo; j++) {
                                        int64_t h0, h1, w0, w1;
                                        double div;
                                        dnn_avg(&q, NULL, pl, i, j, &h0, &h1, &w0, &w1, &div);
                                        double gv = ct_at(go, (pl * q.ho + i) * q.wo + j) / div;
                                        for (int64_t h = h0; h < h1; h++)
                                            for (int64_t w = w0; w < w1; w++) want[(pl * H + h) * W + w] += gv;
                                    }
                            for (int64_t e = 0; e < 4 * H * W; e++)
                                if (!ct_near(ct_at(gi, e), want[e], 1e-12)) bad++;
                            free(want);
                        }
    CHECK(bad == 0);
    if (bad) printf("  %d elements differ\n", bad);
    CHECK(taken > 100 && kept > 10); /* both sides of the geometry rule were exercised */
    if (taken <= 100 || kept <= 10) printf("  taken %d, kept %d\n", taken, kept);
    ct_drop();
}

/* ---- on a device ---------------------------------------------------------------------------- */

#define DEV TC_DEVICE_CUDA(0)

/* got (a device tensor) holds want's values (a CPU tensor) to tol; prints the first miss. */
static int dev_near(const tc_tensor *got, const tc_tensor *want, double tol, const char *what)
{
    tc_tensor *h = got ? ct_to(got, TC_CPU) : NULL;
    if (!h || !want || !tc_same_shape(h, want)) {
        printf("  %s: no result or a wrong shape\n", what);
        return 0;
    }
    int64_t n = tc_tensor_numel(want);
    for (int64_t i = 0; i < n; i++)
        if (!ct_near(ct_at(h, i), ct_at(want, i), tol)) {
            printf("  %s: element %lld is %.9g, the CPU's %.9g\n", what, (long long)i, ct_at(h, i), ct_at(want, i));
            return 0;
        }
    return 1;
}

/* softmax / log_softmax and their backward ops (contiguous: cuDNN's when enabled;
 * transposed: our kernels) and
 * avg_pool2d / avg_pool2d_backward (configurations cuDNN takes and one ceil_mode window it
 * does not) on the device, cudnn.enabled on then off, against the CPU. */
TEST(cuda_dev_dnn_softmax_pool_match_cpu)
{
    char why[512];
    if (!ct_cuda_device(why, sizeof why)) return;
    int64_t was = tc_cuda_get_flag(TC_CUDA_FLAG_CUDNN);
    const int dts[3] = {TC_F32, TC_F64, TC_F16};
    const double tols[3] = {2e-6, 1e-12, 4e-3};
    int bad = 0;
    for (int on = 1; on >= 0; on--) {
        CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_CUDNN, on));
        CHECK(tc_cuda_get_flag(TC_CUDA_FLAG_CUDNN) == on);
        for (int k = 0; k < 3; k++) {
            tc_tensor *x64 = ct_keep(gc_rand(TC_F64, 4, SZ(2, 3, 5, 6), -2, 2, 40 + k)), *xc = NULL;
            CHECK(tc_tensor_to(x64, TC_CPU, dts[k], &xc) == TC_OK);
            tc_tensor *xd = ct_keep(xc) ? ct_to(xc, DEV) : NULL;
            tc_tensor *xt = xd ? ct_keep(ct_transposed(xd, 1, 3)) : NULL;
            tc_tensor *xct = xd ? ct_keep(ct_transposed(xc, 1, 3)) : NULL;
            if (!xd || !xt || !xct) {
                CHECK(0);
                continue;
            }
            for (int lg = 0; lg < 2; lg++)
                for (int64_t dim = -1; dim <= 1; dim += 2) {
                    tc_op op = lg ? TC_OP_LOG_SOFTMAX : TC_OP_SOFTMAX;
                    tc_params p = {.i = {dim}};
                    if (!dev_near(ct_op(op, xd, NULL, &p), ct_op(op, xc, NULL, &p), tols[k], "softmax")) bad++;
                    if (!dev_near(ct_op(op, xt, NULL, &p), ct_op(op, xct, NULL, &p), tols[k], "softmax (strided)"))
                        bad++;
                    /* the backward op on (g, y): contiguous (cuDNN's when enabled), transposed (ours) */
                    tc_op bop = lg ? TC_OP_LOG_SOFTMAX_BACKWARD : TC_OP_SOFTMAX_BACKWARD;
                    tc_tensor *yc = ct_op(op, xc, NULL, &p), *g64 = ct_keep(gc_rand(TC_F64, 4, xc->size, -1, 1, 60));
                    tc_tensor *gc = NULL;
                    CHECK(tc_tensor_to(g64, TC_CPU, dts[k], &gc) == TC_OK);
                    ct_keep(gc);
                    tc_tensor *yd = yc ? ct_to(yc, DEV) : NULL, *gd = gc ? ct_to(gc, DEV) : NULL;
                    if (!yd || !gd) {
                        bad++;
                        continue;
                    }
                    if (!dev_near(ct_op(bop, gd, yd, &p), ct_op(bop, gc, yc, &p), tols[k], "softmax backward")) bad++;
                    tc_tensor *gdt = ct_keep(ct_transposed(gd, 1, 3)), *ydt = ct_keep(ct_transposed(yd, 1, 3));
                    tc_tensor *gct = ct_keep(ct_transposed(gc, 1, 3)), *yct = ct_keep(ct_transposed(yc, 1, 3));
                    if (!dev_near(ct_op(bop, gdt, ydt, &p), ct_op(bop, gct, yct, &p), tols[k],
                                  "softmax backward (strided)"))
                        bad++;
                }
            /* kernel, stride, padding, ceil_mode, count_include_pad: (5,6) planes */
            const int64_t cfg[4][5] = {{3, 2, 1, 0, 1}, {3, 2, 1, 0, 0}, {2, 1, 0, 0, 1}, {2, 2, 0, 1, 1}};
            for (int c = 0; c < 4; c++) {
                tc_params pf = pool_params(cfg[c][0], cfg[c][1], cfg[c][2], (int)cfg[c][3], (int)cfg[c][4], 0, 0);
                tc_tensor *yc = ct_op(TC_OP_AVG_POOL2D, xc, NULL, &pf);
                if (!dev_near(ct_op(TC_OP_AVG_POOL2D, xd, NULL, &pf), yc, tols[k], "avg_pool2d")) bad++;
                if (!yc) continue;
                tc_tensor *g64 = ct_keep(gc_rand(TC_F64, 4, yc->size, -1, 1, 50 + c)), *gc = NULL;
                CHECK(tc_tensor_to(g64, TC_CPU, dts[k], &gc) == TC_OK);
                tc_params pb = pool_params(cfg[c][0], cfg[c][1], cfg[c][2], (int)cfg[c][3], (int)cfg[c][4], 5, 6);
                tc_tensor *gd = ct_keep(gc) ? ct_to(gc, DEV) : NULL;
                if (!gd || !dev_near(ct_op(TC_OP_AVG_POOL2D_BACKWARD, gd, NULL, &pb),
                                     ct_op(TC_OP_AVG_POOL2D_BACKWARD, gc, NULL, &pb), tols[k], "avg_pool2d_backward"))
                    bad++;
            }
            ct_drop();
        }
    }
    CHECK(bad == 0);
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_CUDNN, was));
    ct_drop();
}
