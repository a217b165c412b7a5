/* test_perf_paths.c -- the fast paths taken for training speed, each against a plain
 * reference: the thread pool's tickets (every index run exactly once, for thread counts
 * above the core count too), gemm split over the pool (mm / addmm / bmm / addbmm with
 * transposed operands, compared with a double loop), the where kernel's contiguous and
 * scalar paths, elementwise loops over transposed results, and the engine's in-place
 * accumulation of narrow / select gradients and of transposed gradients. */
#include "ctest.h"
#include "internal.h"
#include <stdlib.h>

/* ---- thread pool ------------------------------------------------------------------------ */

typedef struct hits {
    int *count;
} hits;

static void count_range(void *ctx, int64_t b, int64_t e)
{
    hits *h = ctx;
    for (int64_t i = b; i < e; i++) __atomic_add_fetch(&h->count[i], 1, __ATOMIC_RELAXED);
}

TEST(parallel_for_runs_every_index_once)
{
    int saved = tc_get_num_threads();
    int *count = calloc(5000, sizeof *count);
    CHECK(count != NULL);
    if (!count) return;
    hits h = {count};
    const int threads[3] = {2, 3, 8}; /* 8: more threads than cores, workers wake late */
    for (int ti = 0; ti < 3; ti++) {
        tc_set_num_threads(threads[ti]);
        for (int it = 0; it < 300; it++) {
            int64_t n = 2 + (it * 37) % 4998, grain = 1 + it % 7;
            memset(count, 0, sizeof *count * (size_t)n);
            tc_parallel_for(n, grain, count_range, &h);
            int bad = 0;
            for (int64_t i = 0; i < n; i++) bad += count[i] != 1;
            CHECK(bad == 0);
            if (bad) break;
        }
    }
    tc_set_num_threads(saved);
    free(count);
}

/* ---- gemm split over the pool ---------------------------------------------------------- */

static double val(int64_t i, int salt) { return sin(0.37 * (double)i + salt) + 0.01 * (double)(i % 7); }

static tc_tensor *filled(int nd, const int64_t *sz, int salt)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(TC_F64, nd, sz, &t)) return NULL;
    double *d = tc_tensor_data(t);
    for (int64_t i = 0; i < tc_tensor_numel(t); i++) d[i] = val(i, salt);
    return t;
}

/* element (i, j) of a 2-D tensor or of matrix b of a 3-D one, any strides */
static double at3(const tc_tensor *t, int64_t b, int64_t i, int64_t j)
{
    int64_t idx[3] = {b, i, j};
    double v = NAN;
    tc_tensor_get(t, t->ndim == 3 ? idx : idx + 1, &v);
    return v;
}

/* max |got - (beta M + alpha sum_b A_b B_b)| (sum over b for addbmm, per b otherwise) */
static double gemm_err(const tc_tensor *got, const tc_tensor *M, const tc_tensor *A, const tc_tensor *B, double beta,
                       double alpha, bool sum)
{
    int64_t nb = A->ndim == 3 ? A->size[0] : 1, n = A->size[A->ndim - 2], k = A->size[A->ndim - 1];
    int64_t m = B->size[B->ndim - 1], worst = 0;
    double err = 0;
    for (int64_t b = 0; b < (sum ? 1 : nb); b++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double acc = 0;
                for (int64_t q = sum ? 0 : b; q < (sum ? nb : b + 1); q++)
                    for (int64_t kk = 0; kk < k; kk++) acc += at3(A, q, i, kk) * at3(B, q, kk, j);
                double want = alpha * acc + (M ? beta * at3(M, b, i, j) : 0);
                double e = fabs(at3(got, b, i, j) - want);
                if (e > err) err = e, worst = i;
            }
    (void)worst;
    return err;
}

TEST(gemm_split_over_the_pool_matches_a_loop)
{
    int saved = tc_get_num_threads();
    const int threads[2] = {2, 3};
    for (int ti = 0; ti < 2; ti++) {
        tc_set_num_threads(threads[ti]);
        /* (n, k, m): more rows than columns (split by rows) and the other way round;
         * both above the split threshold, with sizes that are not multiples of 16 */
        const int64_t dims[2][3] = {{150, 130, 70}, {45, 210, 170}};
        for (int di = 0; di < 2; di++) {
            int64_t n = dims[di][0], k = dims[di][1], m = dims[di][2];
            tc_tensor *A = ct_keep(filled(2, SZ(n, k), 1)), *B = ct_keep(filled(2, SZ(k, m), 2));
            tc_tensor *At = ct_keep(filled(2, SZ(k, n), 3)), *Bt = ct_keep(filled(2, SZ(m, k), 4));
            tc_tensor *Atv = ct_keep(ct_transposed(At, 0, 1)), *Btv = ct_keep(ct_transposed(Bt, 0, 1));
            tc_tensor *M = ct_keep(filled(2, SZ(n, m), 5));
            const tc_tensor *as[2] = {A, Atv}, *bs[2] = {B, Btv};
            for (int la = 0; la < 2; la++)
                for (int lb = 0; lb < 2; lb++) {
                    tc_tensor *r = NULL, *r2 = NULL;
                    CHECK_OK(ct_run1(TC_OP_MM, as[la], bs[lb], NULL, NULL, &r));
                    ct_keep(r);
                    CHECK(gemm_err(r, NULL, as[la], bs[lb], 0, 1, false) < 1e-9);
                    CHECK_OK(ct_run1(TC_OP_ADDMM, M, as[la], bs[lb], P(.s = {0.5, -2}), &r2));
                    ct_keep(r2);
                    CHECK(gemm_err(r2, M, as[la], bs[lb], 0.5, -2, false) < 1e-9);
                }
            /* a result written through a transposed view: C^T = B^T A^T */
            tc_tensor *Ct = ct_keep(filled(2, SZ(m, n), 6)), *Ctv = ct_keep(ct_transposed(Ct, 0, 1));
            tc_tensor *out[1] = {Ctv};
            CHECK_OK(tc_op_run(TC_OP_MM, (const tc_tensor *const[]){A, B}, 2, NULL, out, 1));
            CHECK(gemm_err(Ctv, NULL, A, B, 0, 1, false) < 1e-9);
            ct_drop();
        }
        /* batches: fewer products than threads (each split), more (spread), and a sum */
        const int64_t nbs[2] = {1, 5};
        for (int bi = 0; bi < 2; bi++) {
            int64_t nb = nbs[bi];
            tc_tensor *A = ct_keep(filled(3, SZ(nb, 90, 120), 7)), *B = ct_keep(filled(3, SZ(nb, 120, 100), 8));
            tc_tensor *M = ct_keep(filled(2, SZ(90, 100), 9)), *r = NULL, *s = NULL;
            CHECK_OK(ct_run1(TC_OP_BMM, A, B, NULL, NULL, &r));
            ct_keep(r);
            CHECK(gemm_err(r, NULL, A, B, 0, 1, false) < 1e-9);
            CHECK_OK(ct_run1(TC_OP_ADDBMM, M, A, B, P(.s = {1, 0.25}), &s));
            ct_keep(s);
            CHECK(gemm_err(s, M, A, B, 1, 0.25, true) < 1e-9);
            ct_drop();
        }
    }
    tc_set_num_threads(saved);
}

/* ---- where, and loops over transposed results ------------------------------------------ */

TEST(where_contiguous_and_scalar_paths)
{
    const tc_dtype dts[3] = {TC_F32, TC_F64, TC_I64};
    for (int di = 0; di < 3; di++) {
        tc_tensor *c = ct_keep(ct_from(TC_U8, 1, SZ(5), VALS(1, 0, 3, 0, 1)));
        tc_tensor *a = ct_keep(ct_from(dts[di], 1, SZ(5), VALS(1, 2, 3, 4, 5)));
        tc_tensor *b = ct_keep(ct_from(dts[di], 1, SZ(5), VALS(-1, -2, -3, -4, -5)));
        tc_tensor *z = ct_keep(ct_from(dts[di], 0, NULL, VALS(7)));
        tc_tensor *r1 = NULL, *r2 = NULL, *r3 = NULL;
        CHECK_OK(ct_run1(TC_OP_WHERE, c, a, b, NULL, &r1));
        CHECK(SAME(ct_keep(r1), 1, -2, 3, -4, 5));
        CHECK_OK(ct_run1(TC_OP_WHERE, c, z, b, NULL, &r2));
        CHECK(SAME(ct_keep(r2), 7, -2, 7, -4, 7));
        CHECK_OK(ct_run1(TC_OP_WHERE, c, a, z, NULL, &r3));
        CHECK(SAME(ct_keep(r3), 1, 7, 3, 7, 5));
        ct_drop();
    }
    /* a long run (the vector loop and its tail) and a strided mask */
    int64_t n = 1003;
    tc_tensor *c = NULL, *a = ct_keep(filled(1, SZ(n), 1)), *z = ct_keep(ct_from(TC_F64, 0, NULL, VALS(0)));
    CHECK_OK(tc_tensor_new(TC_U8, 1, SZ(2 * n), &c));
    ct_keep(c);
    uint8_t *cd = tc_tensor_data(c);
    for (int64_t i = 0; i < 2 * n; i++) cd[i] = (uint8_t)(i % 3 == 0);
    tc_tensor *half = NULL, *r = NULL, *rs = NULL;
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){c}, 1, P(.i = {0, 0, n}), &half, 1));
    ct_keep(half);
    CHECK_OK(ct_run1(TC_OP_WHERE, half, a, z, NULL, &r));
    ct_keep(r);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += ct_at(r, i) != (i % 3 == 0 ? val(i, 1) : 0);
    CHECK(bad == 0);
    tc_tensor *v2 = NULL; /* every other mask element: a strided condition */
    CHECK_OK(tc_op_run(TC_OP_AS_STRIDED, (const tc_tensor *const[]){c}, 1,
                       P(.shape = {n, 2}, .nshape = 2, .i = {0}), &v2, 1));
    ct_keep(v2);
    CHECK_OK(ct_run1(TC_OP_WHERE, v2, a, z, NULL, &rs));
    ct_keep(rs);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += ct_at(rs, i) != ((2 * i) % 3 == 0 ? val(i, 1) : 0);
    CHECK(bad == 0);
    ct_drop();
}

TEST(elementwise_into_transposed_result)
{
    tc_tensor *a = ct_keep(filled(2, SZ(37, 53), 1)), *b = ct_keep(filled(2, SZ(37, 53), 2));
    tc_tensor *at = ct_keep(ct_transposed(a, 0, 1)), *bt = ct_keep(ct_transposed(b, 0, 1));
    tc_tensor *o = ct_keep(filled(2, SZ(37, 53), 3)), *ot = ct_keep(ct_transposed(o, 0, 1));
    tc_tensor *out[1] = {ot};
    CHECK_OK(tc_op_run(TC_OP_ADD, (const tc_tensor *const[]){at, bt}, 2, P(.s = {2}), out, 1));
    int bad = 0;
    for (int64_t i = 0; i < 37 * 53; i++) bad += ct_at(o, i) != val(i, 1) + 2 * val(i, 2);
    CHECK(bad == 0);
    /* mixed layouts: a transposed result from a contiguous and a transposed input */
    tc_tensor *c = ct_keep(filled(2, SZ(53, 37), 4));
    CHECK_OK(tc_op_run(TC_OP_SUB, (const tc_tensor *const[]){c, bt}, 2, P(.s = {1}), out, 1));
    bad = 0;
    for (int64_t i = 0; i < 37; i++)
        for (int64_t j = 0; j < 53; j++) bad += ct_at(o, i * 53 + j) != val(j * 37 + i, 4) - val(i * 53 + j, 2);
    CHECK(bad == 0);
    ct_drop();
}

/* ---- autograd: slices and transposed gradients accumulated in place ----------------------- */

static tc_tensor *gleaf(int nd, const int64_t *sz, int salt)
{
    tc_tensor *t = filled(nd, sz, salt);
    if (t) tc_tensor_set_requires_grad(t, 1);
    return t;
}

static tc_tensor *sum_all(const tc_tensor *t)
{
    tc_tensor *r = NULL;
    return ct_run1(TC_OP_SUM, t, NULL, NULL, P(.i = {-1, 0}), &r) ? NULL : r;
}

TEST(narrow_select_gradients_accumulate_into_slices)
{
    int64_t live0 = tc_autograd_live_nodes();
    tc_tensor *x = ct_keep(gleaf(2, SZ(4, 6), 1)), *w = NULL, *y1 = NULL, *y2 = NULL, *y3 = NULL;
    tc_tensor *two = ct_keep(ct_from(TC_F64, 0, NULL, VALS(2))), *three = ct_keep(ct_from(TC_F64, 0, NULL, VALS(3)));
    CHECK_OK(ct_run1(TC_OP_MUL, x, two, NULL, NULL, &w)); /* w = 2x */
    ct_keep(w);
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){w}, 1, P(.i = {1, 1, 2}), &y1, 1));
    CHECK_OK(tc_op_run(TC_OP_SELECT, (const tc_tensor *const[]){w}, 1, P(.i = {0, -2}), &y2, 1)); /* row 2 */
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){w}, 1, P(.i = {0, 0, 3}), &y3, 1));
    ct_keep(y1), ct_keep(y2), ct_keep(y3);
    tc_tensor *t2 = NULL, *t3 = NULL;
    CHECK_OK(ct_run1(TC_OP_MUL, y2, three, NULL, NULL, &t2));
    CHECK_OK(ct_run1(TC_OP_MUL, y3, y3, NULL, NULL, &t3));
    ct_keep(t2), ct_keep(t3);
    /* loss = sum(w) + sum(y1) + 3 sum(y2) + sum(y3^2): the expand of sum(w) and the
     * slices meet in w's gradient buffer in whichever order the engine runs them */
    tc_tensor *l[4] = {ct_keep(sum_all(w)), ct_keep(sum_all(y1)), ct_keep(sum_all(t2)), ct_keep(sum_all(t3))};
    const tc_tensor *roots[4] = {l[0], l[1], l[2], l[3]};
    CHECK_OK(tc_autograd_backward(roots, NULL, 4, 0, 0));
    tc_tensor *g = ct_keep(tc_tensor_grad(x));
    CHECK(g != NULL);
    int bad = 0;
    for (int64_t i = 0; g && i < 4; i++)
        for (int64_t j = 0; j < 6; j++) {
            double wv = 2 * val(i * 6 + j, 1);
            double dw = 1 + (j >= 1 && j < 3) + 3 * (i == 2) + (i < 3 ? 2 * wv : 0);
            bad += fabs(ct_at(g, i * 6 + j) - 2 * dw) > 1e-12;
        }
    CHECK(bad == 0);
    /* the same through grad() (what nn's generic backward runs), twice accumulated */
    tc_tensor *gw = NULL;
    CHECK_OK(tc_autograd_grad((const tc_tensor *const[]){ct_keep(sum_all(y1))}, NULL, 1,
                              (const tc_tensor *const[]){w}, 1, 0, 0, 0, &gw));
    ct_keep(gw);
    for (int64_t i = 0; gw && i < 24; i++) bad += ct_at(gw, i) != ((i % 6) >= 1 && (i % 6) < 3);
    CHECK(bad == 0);
    ct_drop();
    CHECK(tc_autograd_live_nodes() == live0);
}

TEST(transposed_gradients_accumulate_in_place)
{
    int64_t live0 = tc_autograd_live_nodes();
    tc_tensor *W = ct_keep(gleaf(2, SZ(3, 4), 1)), *Wt = ct_keep(ct_transposed(W, 0, 1));
    tc_tensor *a1 = ct_keep(filled(2, SZ(2, 4), 2)), *a2 = ct_keep(filled(2, SZ(5, 4), 3)), *y1 = NULL, *y2 = NULL;
    CHECK_OK(ct_run1(TC_OP_MM, a1, Wt, NULL, NULL, &y1));
    CHECK_OK(ct_run1(TC_OP_MM, a2, Wt, NULL, NULL, &y2));
    ct_keep(y1), ct_keep(y2);
    tc_tensor *l[3] = {ct_keep(sum_all(y1)), ct_keep(sum_all(y2)), ct_keep(sum_all(y1))};
    CHECK_OK(tc_autograd_backward((const tc_tensor *const[]){l[0], l[1], l[2]}, NULL, 3, 0, 0));
    tc_tensor *g = ct_keep(tc_tensor_grad(W)); /* dW[o, i] = 2 sum_r a1[r, i] + sum_r a2[r, i] */
    int bad = !g;
    for (int64_t o = 0; g && o < 3; o++)
        for (int64_t i = 0; i < 4; i++) {
            double want = 0;
            for (int64_t r = 0; r < 2; r++) want += 2 * val(r * 4 + i, 2);
            for (int64_t r = 0; r < 5; r++) want += val(r * 4 + i, 3);
            bad += fabs(ct_at(g, o * 4 + i) - want) > 1e-12;
        }
    CHECK(bad == 0);
    ct_drop();
    CHECK(tc_autograd_live_nodes() == live0);
}

/* ---- max pooling: the unclipped windows' branch-free loop keeps window_max's rule -------- */

TEST(max_pool_inner_windows_keep_first_max_and_last_nan)
{
    const double inf = INFINITY, nan = NAN;
    /* windows 2x2 stride 2: ties (first wins), NaN (the last one wins), all -inf (the
     * window's first position), in float and double, unpadded (the inner loop) and padded
     * by one (the edges through the clipped path, the centre through the inner loop) */
    const double v[24] = {1, 1, 5, 2, nan, 3,  0, 1, 5, 5, 4, nan,
                          -inf, -inf, 2, 2, 7, 7,  -inf, -inf, 2, 3, 7, 1};
    const tc_dtype dts[2] = {TC_F32, TC_F64};
    for (int di = 0; di < 2; di++) {
        tc_tensor *x = ct_keep(ct_from(dts[di], 4, SZ(1, 1, 4, 6), v));
        tc_tensor *out[2] = {NULL, NULL};
        CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *const[]){x}, 1,
                           P(.shape = {2, 2, 2, 2, 0, 0, 1, 1}, .nshape = 8), out, 2));
        ct_keep(out[0]), ct_keep(out[1]);
        const double want[6] = {1, 5, nan, -inf, 3, 7}, wind[6] = {0, 2, 11, 12, 21, 16};
        for (int k = 0; k < 6; k++) {
            CHECK(ct_near(ct_at(out[0], k), want[k], 0));
            CHECK(ct_at(out[1], k) == wind[k]);
        }
        tc_tensor *pad[2] = {NULL, NULL}; /* padded: out (3, 4); window (i, j) starts at (2i-1, 2j-1) */
        CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *const[]){x}, 1,
                           P(.shape = {2, 2, 2, 2, 1, 1, 1, 1}, .nshape = 8), pad, 2));
        ct_keep(pad[0]), ct_keep(pad[1]);
        const double pw[12] = {1, 5, nan, 3, 0, 5, 7, nan, -inf, 2, 7, 1};
        const double pi[12] = {0, 2, 4, 5, 6, 8, 16, 11, 18, 20, 22, 23};
        for (int k = 0; k < 12; k++) {
            CHECK(ct_near(ct_at(pad[0], k), pw[k], 0));
            CHECK(ct_at(pad[1], k) == pi[k]);
        }
        ct_drop();
    }
}

/* Rows of 4 to 14 unclipped windows (the float path's vectors of four, and a last group
 * overlapping the one before) against the sequential rule written out here, on values
 * drawn from a few levels (many ties), NaN and -inf, padded and unpadded. */
TEST(max_pool_vector_rows_match_the_sequential_rule)
{
    const int64_t widths[4] = {8, 10, 15, 28};
    for (int wi = 0; wi < 4; wi++)
        for (int64_t pad = 0; pad < 2; pad++) {
            int64_t H = 6, W = widths[wi], n = 2 * H * W;
            double *v = malloc((size_t)n * sizeof *v);
            CHECK(v != NULL);
            if (!v) return;
            uint32_t r = 12345u + (uint32_t)wi;
            for (int64_t i = 0; i < n; i++) {
                r = r * 1664525u + 1013904223u;
                uint32_t k = (r >> 24) % 11;
                v[i] = k == 0 ? NAN : k == 1 ? -INFINITY : (double)(k % 4);
            }
            tc_tensor *x = ct_keep(ct_from(TC_F32, 4, SZ(1, 2, H, W), v)), *out[2] = {NULL, NULL};
            CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *const[]){x}, 1,
                               P(.shape = {2, 2, 2, 2, pad, pad, 1, 1}, .nshape = 8), out, 2));
            ct_keep(out[0]), ct_keep(out[1]);
            int64_t Ho = (H + 2 * pad - 2) / 2 + 1, Wo = (W + 2 * pad - 2) / 2 + 1;
            int bad = !out[0] || out[0]->size[2] != Ho || out[0]->size[3] != Wo;
            for (int64_t c = 0; !bad && c < 2; c++)
                for (int64_t i = 0; i < Ho; i++)
                    for (int64_t j = 0; j < Wo; j++) {
                        double best = -INFINITY;
                        int64_t at = -1;
                        for (int64_t a = 2 * i - pad; a < 2 * i - pad + 2; a++)
                            for (int64_t b = 2 * j - pad; b < 2 * j - pad + 2; b++) {
                                if (a < 0 || a >= H || b < 0 || b >= W) continue;
                                double e = v[(c * H + a) * W + b];
                                if (at < 0 || e > best || e != e) best = e, at = a * W + b;
                            }
                        int64_t k = (c * Ho + i) * Wo + j;
                        bad += !ct_near(ct_at(out[0], k), best, 0) || ct_at(out[1], k) != (double)at;
                    }
            CHECK(bad == 0);
            free(v);
            ct_drop();
        }
}

/* ---- scatter_add along the last dim: rows in parallel, duplicates within a row ---------- */

TEST(scatter_add_rows_in_parallel_match_a_loop)
{
    int saved = tc_get_num_threads();
    tc_set_num_threads(3);
    const int64_t R = 300, N = 50, K = 400; /* R*K above the parallel threshold */
    const tc_dtype dts[2] = {TC_F32, TC_F64};
    for (int di = 0; di < 2; di++) {
        tc_tensor *dst = NULL, *idx = NULL, *src = NULL, *r = NULL;
        CHECK_OK(tc_tensor_new(dts[di], 2, SZ(R, N), &dst));
        CHECK_OK(tc_tensor_new(TC_I64, 2, SZ(R, K), &idx));
        CHECK_OK(tc_tensor_new(dts[di], 2, SZ(R, K), &src));
        ct_keep(dst), ct_keep(idx), ct_keep(src);
        int64_t *ix = tc_tensor_data(idx);
        double *want = calloc((size_t)(R * N), sizeof *want);
        CHECK(want != NULL);
        if (!want) return;
        for (int64_t i = 0; i < R; i++)
            for (int64_t k = 0; k < K; k++) {
                int64_t v = (i * 7 + k * k * 13) % N; /* every row repeats indices */
                double x = (double)((i + 3 * k) % 17) - 8;
                ix[i * K + k] = v;
                tc_tensor_set_value(src, SZ(i, k), x);
                want[i * N + v] += x;
            }
        for (int64_t i = 0; i < R * N; i++) tc_tensor_set_value(dst, SZ(i / N, i % N), 0.5);
        CHECK_OK(ct_run1(TC_OP_SCATTER_ADD, dst, idx, src, P(.i = {1}), &r));
        ct_keep(r);
        int bad = 0;
        for (int64_t i = 0; i < R * N; i++) bad += ct_at(r, i) != want[i] + 0.5;
        CHECK(bad == 0);
        free(want);
        ct_drop();
    }
    tc_set_num_threads(saved);
}

/* The mm rules add a weight's gradient straight into the engine's buffer once one exists
 * (grad.h acc): a plain and a batched weight used three times, against closed forms. */
TEST(mm_gradients_added_into_the_engine_buffer)
{
    int64_t live0 = tc_autograd_live_nodes();
    tc_tensor *B = ct_keep(gleaf(2, SZ(4, 3), 1)), *Bb = ct_keep(gleaf(3, SZ(2, 4, 3), 2));
    tc_tensor *a[3], *ab[3], *l[6];
    for (int k = 0; k < 3; k++) {
        tc_tensor *y = NULL, *yb = NULL;
        a[k] = ct_keep(gleaf(2, SZ(k + 2, 4), 10 + k));
        ab[k] = ct_keep(filled(3, SZ(2, k + 1, 4), 20 + k));
        CHECK_OK(ct_run1(TC_OP_MM, a[k], B, NULL, NULL, &y));
        CHECK_OK(ct_run1(TC_OP_BMM, ab[k], Bb, NULL, NULL, &yb));
        ct_keep(y), ct_keep(yb);
        l[k] = ct_keep(sum_all(y));
        l[3 + k] = ct_keep(sum_all(yb));
    }
    CHECK_OK(tc_autograd_backward((const tc_tensor *const[]){l[0], l[1], l[2], l[3], l[4], l[5]}, NULL, 6, 0, 0));
    tc_tensor *g = ct_keep(tc_tensor_grad(B)), *gb = ct_keep(tc_tensor_grad(Bb)), *ga = ct_keep(tc_tensor_grad(a[2]));
    int bad = !g || !gb || !ga;
    for (int64_t i = 0; !bad && i < 4; i++)
        for (int64_t j = 0; j < 3; j++) {
            double want = 0, wb[2] = {0, 0}; /* dB[i, j] = sum_k sum_r a_k[r, i] */
            for (int k = 0; k < 3; k++) {
                for (int64_t r = 0; r < k + 2; r++) want += val(r * 4 + i, 10 + k);
                for (int64_t q = 0; q < 2; q++)
                    for (int64_t r = 0; r < k + 1; r++) wb[q] += val((q * (k + 1) + r) * 4 + i, 20 + k);
            }
            bad += fabs(ct_at(g, i * 3 + j) - want) > 1e-12;
            for (int64_t q = 0; q < 2; q++) bad += fabs(ct_at(gb, q * 12 + i * 3 + j) - wb[q]) > 1e-12;
        }
    for (int64_t r = 0; !bad && r < 4; r++) /* da[r, i] = sum_j B[i, j] */
        for (int64_t i = 0; i < 4; i++)
            bad += fabs(ct_at(ga, r * 4 + i) - (val(i * 3, 1) + val(i * 3 + 1, 1) + val(i * 3 + 2, 1))) > 1e-12;
    CHECK(bad == 0);
    ct_drop();
    CHECK(tc_autograd_live_nodes() == live0);
}
