/* test_cuda_plan.cpp -- host checks of the CUDA backend's index math, runnable without a GPU:
 *  1. blas_plan.h: random strided matrix products are planned into cuBLAS calls, the calls
 *     are executed by an emulator of cuBLAS's documented column-major semantics (with its
 *     argument checks: lda >= max(1, rows of op(A)), ...), and compared with a naive product.
 *     The integer product element (mm_int_at) against the CPU's integer kernel on strided views.
 *  2. pool_geom.h: every pooling op's element functions, run on the host, against libtocha's
 *     CPU kernels (tc_op_run), bit for bit (values and indices), NaN and -inf included.
 * Build and run (from the repository root, after `make BUILD=build-X build-X/libtocha.so`):
 *   g++ -std=c++17 -O1 -Wall -Wextra -Icore tests/cuda_host/test_cuda_plan.cpp -Lbuild-X -ltocha \
 *       -Wl,-rpath,$PWD/build-X -o /tmp/test_cuda_plan && /tmp/test_cuda_plan
 * Prints one line per failure and "N passed, N failed" at the end.
 */
#include "tocha.h"
#define MM_FN static inline
#include "cuda/blas_plan.h"
#define POOL_FN static inline
#include "cuda/pool_geom.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "host_check.h"

static double rval() { return (double)(rint_(2001) - 1000) / 250.0; }

/* ---- 1. matrix products ------------------------------------------------------------------- */

/* A batch of matrices over a host buffer in one of several layouts. */
struct hmat {
    std::vector<double> buf;
    mm_mat m;
    int64_t base; /* element offset of m.p in buf */
};

/* layout: 0 row-major (padded rows), 1 transposed (unit row stride), 2 both strides > 1,
 * 3 broadcast rows (row stride 0); batch stride packs batches (possibly 0: broadcast). */
static hmat make_mat(int64_t batch, int64_t rows, int64_t cols, int layout, bool bcast_batch)
{
    hmat h;
    int64_t pad = rint_(3), rs, cs, span;
    switch (layout) {
    case 0: cs = 1, rs = cols + pad, span = rows * rs + cols; break;
    case 1: rs = 1, cs = rows + pad, span = cols * cs + rows; break;
    case 2: cs = 2, rs = 2 * cols + 1, span = rows * rs + 2 * cols; break;
    default: rs = 0, cs = 1, span = cols + 1; break;
    }
    int64_t bs = bcast_batch ? 0 : span + rint_(2);
    int64_t total = bs * (batch > 0 ? batch : 1) + span + 4;
    h.buf.resize((size_t)total);
    for (auto &v : h.buf) v = rval();
    h.base = 2;
    h.m = mm_mat{(char *)(h.buf.data() + h.base), rows, cols, rs, cs, bs};
    return h;
}

static double at(const mm_mat &m, int64_t b, int64_t i, int64_t j)
{
    return ((const double *)m.p)[b * m.bs + i * m.rs + j * m.cs];
}

/* A dense copy (what blas.cu's cu_dense_input makes of an unreadable operand). */
static hmat dense_of(const mm_mat &m, int64_t batch)
{
    hmat h;
    h.buf.resize((size_t)(batch * m.rows * m.cols + 1));
    h.base = 0;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < m.rows; i++)
            for (int64_t j = 0; j < m.cols; j++) h.buf[(size_t)((b * m.rows + i) * m.cols + j)] = at(m, b, i, j);
    h.m = mm_mat{(char *)h.buf.data(), m.rows, m.cols, m.cols, 1, m.rows * m.cols};
    return h;
}

/* cuBLAS's column-major gemm, as documented, with its argument checks. */
static bool emulate(const mm_call &g, int64_t batch, double alpha, double beta)
{
    int64_t ra = g.ta ? g.k : g.m, rb = g.tb ? g.n : g.k;
    if (g.m < 0 || g.n < 0 || g.k < 0 || g.lda < mm_max1(ra) || g.ldb < mm_max1(rb) || g.ldc < mm_max1(g.m))
        return false;
    for (int64_t bi = 0; bi < batch; bi++) {
        const double *A = (const double *)g.a + bi * g.sa, *B = (const double *)g.b + bi * g.sb;
        double *C = (double *)g.c + bi * g.sc;
        for (int64_t j = 0; j < g.n; j++)
            for (int64_t i = 0; i < g.m; i++) {
                double s = 0;
                for (int64_t l = 0; l < g.k; l++) {
                    double a = g.ta ? A[l + i * g.lda] : A[i + l * g.lda];
                    double b = g.tb ? B[j + l * g.ldb] : B[l + j * g.ldb];
                    s += a * b;
                }
                double &c = C[i + j * g.ldc];
                c = alpha * s + (beta == 0 ? 0 : beta * c);
            }
    }
    return true;
}

static void test_plans(void)
{
    for (int it = 0; it < 3000; it++) {
        int64_t batch = 1 + rint_(3), n = 1 + rint_(5), k = 1 + rint_(5), m = 1 + rint_(5);
        if (rint_(6) == 0) n = 1;
        if (rint_(6) == 0) m = 1;
        if (rint_(6) == 0) k = 1;
        hmat A = make_mat(batch, n, k, (int)rint_(4), rint_(5) == 0);
        hmat B = make_mat(batch, k, m, (int)rint_(4), rint_(5) == 0);
        hmat Cm = make_mat(batch, n, m, (int)rint_(4), rint_(4) == 0);
        /* reference: C = 0.5 C + 1.5 A B, read before anything is written */
        std::vector<double> want((size_t)(batch * n * m));
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < m; j++) {
                    double s = 0;
                    for (int64_t l = 0; l < k; l++) s += at(A.m, b, i, l) * at(B.m, b, l, j);
                    want[(size_t)((b * n + i) * m + j)] = 1.5 * s + 0.5 * at(Cm.m, b, i, j);
                }
        hmat Ad = A, Bd = B;
        if (!mm_readable(&A.m, batch)) Ad = dense_of(A.m, batch);
        if (!mm_readable(&B.m, batch)) Bd = dense_of(B.m, batch);
        hmat D = Cm;
        bool scratch = !mm_writable(&Cm.m, batch);
        if (scratch) D = dense_of(Cm.m, batch); /* scratch starts as M (beta != 0) */
        mm_call g = mm_plan(Ad.m, Bd.m, D.m);
        bool ok = emulate(g, batch, 1.5, 0.5);
        EXPECT(ok, "cuBLAS would refuse the plan (it %d, n %lld k %lld m %lld)", it, (long long)n, (long long)k,
               (long long)m);
        if (!ok) continue;
        double worst = 0;
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < m; j++)
                    worst = fmax(worst, fabs(at(D.m, b, i, j) - want[(size_t)((b * n + i) * m + j)]));
        EXPECT(worst < 1e-9, "product differs by %g (it %d, batch %lld n %lld k %lld m %lld, ta %d tb %d)", worst, it,
               (long long)batch, (long long)n, (long long)k, (long long)m, g.ta, g.tb);
    }
    /* layouts cuBLAS must not be given as they are */
    mm_mat bc = {NULL, 3, 4, 0, 1, 0}; /* broadcast rows: readable never, writable never */
    EXPECT(!mm_readable(&bc, 1) && !mm_writable(&bc, 1), "a broadcast matrix is not readable");
    mm_mat ov = {NULL, 3, 4, 4, 1, 4}; /* batches overlapping each other */
    EXPECT(mm_readable(&ov, 2) && !mm_writable(&ov, 2), "overlapping batches are readable, not writable");
    mm_mat neg = {NULL, 3, 4, 4, 1, -12};
    EXPECT(!mm_readable(&neg, 2), "negative batch stride goes through a copy");
}

/* The integer products (baddbmm / addbmm, B a transposed view) against tc_op_run on the CPU. */
template <class T> static void check_int_product(tc_dtype dt, tc_op op)
{
    int64_t b = 1 + rint_(3), n = 1 + rint_(4), k = rint_(4), m = 1 + rint_(4);
    bool sum = op == TC_OP_ADDBMM;
    int64_t as[3] = {b, n, k}, bts[3] = {b, m, k}, ms[3] = {b, n, m};
    tc_tensor *A = NULL, *Bt = NULL, *M = NULL, *B = NULL, *out[1] = {NULL};
    if (tc_tensor_new(dt, 3, as, &A) || tc_tensor_new(dt, 3, bts, &Bt) ||
        tc_tensor_new(dt, sum ? 2 : 3, sum ? ms + 1 : ms, &M)) {
        EXPECT(false, "allocation");
        return;
    }
    tc_tensor *all[3] = {A, Bt, M};
    for (tc_tensor *t : all)
        for (int64_t i = 0; i < tc_tensor_numel(t); i++) ((T *)tc_tensor_data(t))[i] = (T)(rnd() % 256);
    /* B (b,k,m) = Bt transposed in its last two dims: unit row stride */
    int64_t bsz[3] = {b, k, m}, bst[3] = {m * k, 1, k};
    if (tc_tensor_new_view(Bt->storage, dt, 0, 3, bsz, bst, &B)) {
        EXPECT(false, "view");
        return;
    }
    tc_params p;
    memset(&p, 0, sizeof p);
    p.s[0] = 3, p.s[1] = -2;
    const tc_tensor *in[3] = {M, A, B};
    tc_status s = tc_op_run(op, in, 3, &p, out, 1);
    EXPECT(s == TC_OK, "int %s: %s", tc_op_info(op)->name, tc_last_error());
    if (!s) {
        std::vector<T> d((size_t)tc_tensor_numel(M));
        memcpy(d.data(), tc_tensor_data(M), d.size() * sizeof(T)); /* D starts as M */
        mm_mat ma = {(char *)tc_tensor_data(A), n, k, k, 1, n * k}, mb = {(char *)tc_tensor_data(B), k, m, 1, k, m * k};
        mm_mat mc = {(char *)d.data(), n, m, m, 1, sum ? 0 : n * m};
        int64_t cnt = (sum ? n : b * n) * m;
        for (int64_t t = 0; t < cnt; t++) mm_int_at<T>(ma, mb, mc, b, sum, -2, 3, t);
        EXPECT(!memcmp(d.data(), tc_tensor_data(out[0]), d.size() * sizeof(T)), "int %s %s differs (b %lld n %lld k "
               "%lld m %lld)", tc_op_info(op)->name, sizeof(T) == 1 ? "int8" : "int32", (long long)b, (long long)n,
               (long long)k, (long long)m);
    }
    tc_tensor_release(A), tc_tensor_release(Bt), tc_tensor_release(B), tc_tensor_release(M);
    tc_tensor_release(out[0]);
}

/* ---- 2. pooling against the CPU kernels ----------------------------------------------------- */

template <class T> struct hload {
    const T *p;
    int64_t W;
    T operator()(int64_t h, int64_t w) const { return p[h * W + w]; }
};

static bool same(double a, double b) { return (a != a && b != b) || (a == b && signbit(a) == signbit(b)); }

static tc_tensor *rand_tensor(tc_dtype dt, int nd, const int64_t *sz, bool specials)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, nd, sz, &t)) return NULL;
    int64_t n = tc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = rval();
        if (specials && rint_(17) == 0) v = NAN;
        else if (specials && rint_(13) == 0) v = -INFINITY;
        else if (rint_(5) == 0) v = 1.0; /* ties */
        if (dt == TC_F32) ((float *)tc_tensor_data(t))[i] = (float)v;
        else ((double *)tc_tensor_data(t))[i] = v;
    }
    return t;
}

template <class T> static void check_pool(tc_op op, const pool_geom &g0, bool ceil, int64_t planes_c)
{
    tc_dtype dt = sizeof(T) == 4 ? TC_F32 : TC_F64;
    bool back = op == TC_OP_AVG_POOL2D_BACKWARD || op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    bool adaptive = op == TC_OP_ADAPTIVE_AVG_POOL2D || op == TC_OP_ADAPTIVE_MAX_POOL2D ||
                    op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    tc_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = ceil, p.i[1] = g0.include_pad;
    if (adaptive) {
        p.nshape = 2, p.shape[0] = back ? g0.H : g0.Ho, p.shape[1] = back ? g0.W : g0.Wo;
    } else {
        int64_t s[8] = {g0.kH, g0.kW, g0.sH, g0.sW, g0.pH, g0.pW, op == TC_OP_MAX_POOL2D ? g0.dH : g0.H,
                        op == TC_OP_MAX_POOL2D ? g0.dW : g0.W};
        p.nshape = op == TC_OP_AVG_POOL2D ? 6 : 8;
        memcpy(p.shape, s, sizeof s);
    }
    int64_t xs[4] = {2, planes_c, g0.H, g0.W};
    pool_geom g = g0;
    if (back) { /* the input is the gradient of the pooled size: ask the forward op for it */
        tc_tensor *probe = rand_tensor(dt, 4, xs, false), *po[2] = {NULL, NULL};
        tc_params fp = p;
        if (!adaptive) fp.nshape = 6;
        tc_status s = tc_op_run(adaptive ? TC_OP_ADAPTIVE_AVG_POOL2D : TC_OP_AVG_POOL2D,
                                (const tc_tensor *const *)&probe, 1, &fp, po, 1);
        if (s) {
            tc_tensor_release(probe);
            return; /* a configuration prepare refuses: nothing to compare */
        }
        xs[2] = g.Ho = po[0]->size[2], xs[3] = g.Wo = po[0]->size[3];
        tc_tensor_release(probe);
        tc_tensor_release(po[0]);
    }
    tc_tensor *x = rand_tensor(dt, 4, xs, !back), *out[2] = {NULL, NULL};
    int nout = op == TC_OP_MAX_POOL2D || op == TC_OP_ADAPTIVE_MAX_POOL2D ? 2 : 1;
    tc_status s = tc_op_run(op, (const tc_tensor *const *)&x, 1, &p, out, nout);
    if (s) { /* refused by prepare (a window past the input): not a kernel case */
        tc_tensor_release(x);
        return;
    }
    if (!back) g.Ho = out[0]->size[2], g.Wo = out[0]->size[3];
    int64_t rows = back ? g.H : g.Ho, cols = back ? g.W : g.Wo, inplane = xs[2] * xs[3];
    const T *xd = (const T *)tc_tensor_data(x), *od = (const T *)tc_tensor_data(out[0]);
    const int64_t *id = nout > 1 ? (const int64_t *)tc_tensor_data(out[1]) : NULL;
    int bad = 0;
    for (int64_t pl = 0; pl < 2 * planes_c; pl++) {
        hload<T> ld = {xd + pl * inplane, xs[3]};
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                int64_t a = -1;
                T v;
                switch (op) {
                case TC_OP_MAX_POOL2D: v = pg_max_at<T>(g, ld, i, j, &a); break;
                case TC_OP_AVG_POOL2D: v = pg_avg_at<T>(g, ld, i, j); break;
                case TC_OP_ADAPTIVE_AVG_POOL2D: v = pg_adaptive_at<T>(g, ld, i, j, (int64_t *)NULL); break;
                case TC_OP_ADAPTIVE_MAX_POOL2D: v = pg_adaptive_at<T>(g, ld, i, j, &a); break;
                case TC_OP_AVG_POOL2D_BACKWARD: v = pg_avg_back_at<T>(g, ld, i, j); break;
                default: v = pg_adaptive_back_at<T>(g, ld, i, j); break;
                }
                int64_t f = pl * rows * cols + i * cols + j;
                if (!same(v, od[f]) || (id && a != id[f])) bad++;
            }
    }
    EXPECT(bad == 0, "%s %s: %d elements differ (H %lld W %lld k %lldx%lld s %lldx%lld p %lldx%lld d %lldx%lld "
           "ceil %d pad %d)", tc_op_info(op)->name, sizeof(T) == 4 ? "f32" : "f64", bad, (long long)g.H, (long long)g.W,
           (long long)g.kH, (long long)g.kW, (long long)g.sH, (long long)g.sW, (long long)g.pH, (long long)g.pW,
           (long long)g.dH, (long long)g.dW, (int)ceil, (int)g.include_pad);
    tc_tensor_release(x);
    tc_tensor_release(out[0]);
    tc_tensor_release(out[1]);
}

static void test_pools(void)
{
    static const tc_op ops[] = {TC_OP_MAX_POOL2D, TC_OP_AVG_POOL2D, TC_OP_AVG_POOL2D_BACKWARD,
                                TC_OP_ADAPTIVE_AVG_POOL2D, TC_OP_ADAPTIVE_MAX_POOL2D,
                                TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD};
    for (int it = 0; it < 400; it++) {
        pool_geom g;
        memset(&g, 0, sizeof g);
        g.H = 1 + rint_(11), g.W = 1 + rint_(11);
        g.kH = 1 + rint_(4), g.kW = 1 + rint_(4), g.sH = 1 + rint_(3), g.sW = 1 + rint_(3);
        if (it % 4 == 0) g.kH = g.kW = g.sH = g.sW = 2; /* the CPU's vector path */
        g.dH = 1 + rint_(2), g.dW = 1 + rint_(2);
        g.pH = rint_((g.dH * (g.kH - 1) + 1) / 2 + 1), g.pW = rint_((g.dW * (g.kW - 1) + 1) / 2 + 1);
        g.include_pad = rint_(2);
        bool ceil = rint_(2);
        pool_geom ga = g; /* adaptive: output (or backward input) sizes */
        ga.Ho = 1 + rint_(g.H + 2), ga.Wo = 1 + rint_(g.W + 2);
        for (const tc_op op : ops) {
            bool adaptive = op >= TC_OP_ADAPTIVE_AVG_POOL2D;
            pool_geom gg = adaptive ? ga : g;
            if (op != TC_OP_MAX_POOL2D) gg.dH = gg.dW = 1;
            if (op != TC_OP_MAX_POOL2D && !adaptive) /* avg: padding at most half the kernel */
                gg.pH = gg.pH > gg.kH / 2 ? gg.kH / 2 : gg.pH, gg.pW = gg.pW > gg.kW / 2 ? gg.kW / 2 : gg.pW;
            check_pool<float>(op, gg, ceil, 3);
            check_pool<double>(op, gg, ceil, 2);
        }
    }
}

int main(void)
{
    test_plans();
    for (int it = 0; it < 100; it++) {
        check_int_product<int8_t>(TC_I8, TC_OP_BADDBMM);
        check_int_product<int8_t>(TC_I8, TC_OP_ADDBMM);
        check_int_product<int32_t>(TC_I32, TC_OP_BADDBMM);
        check_int_product<int32_t>(TC_I32, TC_OP_ADDBMM);
    }
    test_pools();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
