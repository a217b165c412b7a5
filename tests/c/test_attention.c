/* test_attention.c -- the fused attention op and its backward (core/cpu/attention.c,
 * shape_attn.c, the rule in rules_attn.c): both results against a plain float64 loop over
 * several query blocks, causal or not, L above or below S, strided and aliased operands;
 * finite-difference checks of the rule (its composed form: GC weights lse too); the fused
 * backward against the composed one; thread-count independence; half precision; empty
 * sizes; bad input; float16 and bfloat16 on a CUDA device against the CPU. (PyTorch goldens
 * for both ops are in tests/golden/ops.golden, which also run on the device; second
 * derivatives in test_grad_second.c.) */
#include "ctest.h"
#include "cuda_test_util.h"
#include "gradcheck.h"
#include "internal.h"
#include <math.h>

static uint64_t seed = 4401;
static tc_tensor *R(int64_t a, int64_t b, int64_t c)
{
    return ct_keep(gc_rand(TC_F64, 3, SZ(a, b, c), -2, 2, seed++));
}

static tc_tensor *as(const tc_tensor *t, int dt)
{
    tc_tensor *r = NULL;
    tc_op_run(TC_OP_COPY, &t, 1, P(.i = {dt}), &r, 1);
    return ct_keep(r);
}

/* attention's two results (kept), NULLs with the error printed on failure. */
static void attend(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v, double scale, int causal,
                   tc_tensor **out, tc_tensor **lse)
{
    tc_tensor *res[2] = {*out, NULL};
    if (tc_op_run(TC_OP_ATTENTION, (const tc_tensor *const[]){q, k, v}, 3, P(.s = {scale}, .i = {causal}), res, 2))
        printf("  attention failed: %s\n", tc_last_error());
    if (res[0] != *out) ct_keep(res[0]);
    *out = res[0], *lse = ct_keep(res[1]);
}

/* Whether out and lse match the float64 loop: softmax of q_i . k_j * scale over the keys row
 * i attends, then the weighted sum of v. */
static bool matches_loop(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v, double scale, int causal,
                         const tc_tensor *out, const tc_tensor *lse, double tol)
{
    int64_t N = q->size[0], L = q->size[1], E = q->size[2], S = k->size[1], Ev = v->size[2];
    bool ok = out && lse;
    double s[256];
    for (int64_t n = 0; ok && n < N; n++)
        for (int64_t i = 0; ok && i < L; i++) {
            int64_t live = causal && i + 1 < S ? i + 1 : S;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < live; j++) {
                s[j] = 0;
                for (int64_t e = 0; e < E; e++)
                    s[j] += ct_at(q, (n * L + i) * E + e) * ct_at(k, (n * S + j) * E + e) * scale;
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < live; j++) sum += exp(s[j] - m);
            ok = ct_near(ct_at(lse, n * L + i), m + log(sum), tol);
            for (int64_t e = 0; ok && e < Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j < live; j++) o += exp(s[j] - m) / sum * ct_at(v, (n * S + j) * Ev + e);
                ok = ct_near(ct_at(out, (n * L + i) * Ev + e), o, tol);
                if (!ok) printf("  out (%lld,%lld,%lld): %.12g vs %.12g\n", (long long)n, (long long)i, (long long)e,
                                ct_at(out, (n * L + i) * Ev + e), o);
            }
        }
    return ok;
}

TEST(attention_forward_matches_loop)
{
    /* (N, L, S, E, Ev): one block, several blocks of 64 queries, L > S, L < S */
    static const int64_t shapes[5][5] = {{2, 3, 5, 4, 3}, {2, 130, 140, 5, 7}, {1, 9, 4, 3, 2}, {1, 70, 200, 2, 3},
                                         {2, 1, 1, 1, 1}};
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < 5; t++) {
            const int64_t *z = shapes[t];
            tc_tensor *q = R(z[0], z[1], z[3]), *k = R(z[0], z[2], z[3]), *v = R(z[0], z[2], z[4]);
            tc_tensor *out = NULL, *lse;
            attend(q, k, v, 0.6, c, &out, &lse);
            CHECK(ct_shape_is(out, 3, SZ(z[0], z[1], z[4])) && ct_shape_is(lse, 2, SZ(z[0], z[1])));
            CHECK(matches_loop(q, k, v, 0.6, c, out, lse, 1e-12));
        }
    ct_drop();
}

TEST(attention_layouts_threads_half_alias)
{
    tc_tensor *q = R(3, 70, 6), *k = R(3, 80, 6), *v = R(3, 80, 6), *ref = NULL, *lse_ref;
    attend(q, k, v, 0.4, 1, &ref, &lse_ref);
    /* strided operands: transposed copies seen back in the original layout */
    tc_tensor *qt = ct_keep(ct_transposed(ct_keep(ct_transposed(q, 1, 2)), 1, 2));
    tc_tensor *qs = as(ct_keep(ct_transposed(q, 1, 2)), TC_F64), *vs = as(ct_keep(ct_transposed(v, 1, 2)), TC_F64);
    tc_tensor *qv = ct_keep(ct_transposed(qs, 1, 2)), *vv = ct_keep(ct_transposed(vs, 1, 2)), *o1 = NULL, *l1;
    CHECK(qt && !tc_tensor_is_contiguous(qv));
    attend(qv, k, vv, 0.4, 1, &o1, &l1);
    CHECK(ct_close_all(o1, ref, 0) && ct_close_all(l1, lse_ref, 0));
    /* a strided result tensor, and a result aliasing q (each row is read before it is written) */
    tc_tensor *os = as(ct_keep(ct_transposed(q, 1, 2)), TC_F64), *ov = ct_keep(ct_transposed(os, 1, 2)), *l2;
    attend(q, k, v, 0.4, 1, &ov, &l2);
    CHECK(ct_close_all(ov, ref, 0));
    tc_tensor *qc = as(q, TC_F64), *l3;
    tc_tensor *alias = qc;
    attend(qc, k, v, 0.4, 1, &alias, &l3);
    CHECK(alias == qc && ct_close_all(qc, ref, 0));
    /* the thread count changes nothing, forward or backward */
    tc_tensor *g = R(3, 70, 6), *gin1[3] = {0}, *gin4[3] = {0};
    int nt = tc_get_num_threads(), was = tc_set_grad_enabled(0);
    const tc_tensor *in[3] = {q, k, v}, *gout[2] = {g, NULL};
    for (int pass = 0; pass < 2; pass++) {
        tc_set_num_threads(pass ? (nt > 1 ? nt : 4) : 1);
        CHECK_OK(gc_run_rule(TC_OP_ATTENTION, in, 3, P(.s = {0.4}, .i = {1}), gout, NULL, pass ? gin4 : gin1));
    }
    tc_set_num_threads(nt);
    tc_set_grad_enabled(was);
    for (int i = 0; i < 3; i++) CHECK(ct_close_all(ct_keep(gin1[i]), ct_keep(gin4[i]), 0));
    /* half inputs compute in float32: out in the input's dtype, lse float32 */
    static const int hdt[2] = {TC_F16, TC_BF16};
    for (int h = 0; h < 2; h++) {
        tc_tensor *oh = NULL, *lh;
        attend(as(q, hdt[h]), as(k, hdt[h]), as(v, hdt[h]), 0.4, 1, &oh, &lh);
        CHECK(oh && oh->dtype == hdt[h] && lh && lh->dtype == TC_F32);
        CHECK(ct_close_all(oh, ref, h ? 4e-2 : 5e-3) && ct_close_all(lh, lse_ref, h ? 4e-2 : 5e-3));
    }
    ct_drop();
}

/* The rule's fused path (attention_backward, grad mode off) against its composed one (grad
 * mode on), out's gradient only. */
TEST(attention_fused_backward_matches_composed)
{
    static const int64_t shapes[4][5] = {{2, 3, 5, 4, 3}, {2, 130, 140, 5, 7}, {1, 9, 4, 3, 2}, {1, 70, 3, 2, 66}};
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < 4; t++) {
            const int64_t *z = shapes[t];
            tc_tensor *q = R(z[0], z[1], z[3]), *k = R(z[0], z[2], z[3]), *v = R(z[0], z[2], z[4]);
            tc_tensor *g = R(z[0], z[1], z[4]), *fused[3] = {0}, *comp[3] = {0};
            const tc_tensor *in[3] = {q, k, v}, *gout[2] = {g, NULL};
            for (int mode = 0; mode < 2; mode++) {
                int was = tc_set_grad_enabled(mode);
                CHECK_OK(gc_run_rule(TC_OP_ATTENTION, in, 3, P(.s = {0.3}, .i = {c}), gout, NULL, mode ? comp : fused));
                tc_set_grad_enabled(was);
            }
            for (int i = 0; i < 3; i++) CHECK(ct_close_all(ct_keep(fused[i]), ct_keep(comp[i]), 1e-11));
        }
    ct_drop();
}

TEST(attention_rule_gradcheck)
{
    /* GC weights both results, so this checks the composed form with lse's gradient too */
    for (int c = 0; c < 2; c++) {
        tc_tensor *q = R(2, 3, 4), *k = R(2, 5, 4), *v = R(2, 5, 3);
        GC(ATTENTION, P(.s = {0.5}, .i = {c}), q, k, v);
        tc_tensor *q2 = R(1, 6, 2), *k2 = R(1, 4, 2), *v2 = R(1, 4, 3); /* L > S */
        GC(ATTENTION, P(.s = {0.8}, .i = {c}), q2, k2, v2);
        tc_tensor *qt = ct_keep(ct_transposed(R(2, 4, 3), 1, 2)); /* a strided query (2,3,4) */
        GC(ATTENTION, P(.s = {0.5}, .i = {c}), qt, k, v);
    }
    ct_drop();
}

TEST(attention_empty_sizes)
{
    tc_tensor *q0 = R(2, 0, 4), *k = R(2, 5, 4), *v = R(2, 5, 3), *out = NULL, *lse;
    attend(q0, k, v, 1, 1, &out, &lse);
    CHECK(ct_shape_is(out, 3, SZ(2, 0, 3)) && ct_shape_is(lse, 2, SZ(2, 0)));
    /* no query: gk and gv are zeros */
    tc_tensor *res[2] = {NULL, NULL};
    CHECK_OK(tc_op_run(TC_OP_ATTENTION_BACKWARD, (const tc_tensor *const[]){out, q0, k, v, out, lse}, 6,
                       P(.s = {1}, .i = {1}), res, 2));
    ct_keep(res[0]), ct_keep(res[1]);
    CHECK(ct_shape_is(res[0], 3, SZ(2, 0, 4)) && ct_shape_is(res[1], 3, SZ(2, 5, 7)));
    for (int64_t i = 0; res[1] && i < 70; i++) CHECK(ct_at(res[1], i) == 0);
    /* no problem at all, and no feature */
    tc_tensor *o2 = NULL, *l2, *o3 = NULL, *l3;
    attend(R(0, 3, 4), R(0, 0, 4), R(0, 0, 2), 1, 0, &o2, &l2);
    CHECK(ct_shape_is(o2, 3, SZ(0, 3, 2)));
    tc_tensor *qe = R(1, 3, 0), *ke = R(1, 2, 0), *ve = R(1, 2, 2);
    attend(qe, ke, ve, 1, 0, &o3, &l3); /* scores all 0: the mean of v */
    CHECK(o3 && fabs(ct_at(o3, 0) - (ct_at(ve, 0) + ct_at(ve, 2)) / 2) < 1e-12 && fabs(ct_at(l3, 0) - log(2)) < 1e-12);
    ct_drop();
}

TEST(attention_bad_input)
{
    tc_tensor *q = R(2, 3, 4), *k = R(2, 5, 4), *v = R(2, 5, 3), *out[2] = {NULL, NULL};
    tc_tensor *k3 = R(2, 5, 3), *n3 = R(3, 5, 4), *v6 = R(2, 6, 3), *q0 = R(2, 3, 4), *kf = as(k, TC_F32);
    tc_tensor *flat = ct_keep(gc_rand(TC_F64, 2, SZ(3, 4), -1, 1, 7)), *noKeys = R(2, 0, 4), *noVals = R(2, 0, 3);
    (void)q0;
#define AT(a, b, c, pp) tc_op_run(TC_OP_ATTENTION, (const tc_tensor *const[]){a, b, c}, 3, pp, out, 2)
    CHECK_ERR(AT(flat, k, v, P(.s = {1})), TC_ERR_SHAPE, "attention: query must be 3-D (N, length, features), got (3,4)");
    CHECK_ERR(AT(q, k3, v, P(.s = {1})), TC_ERR_SHAPE, "attention: key (2,5,3) must be (2,S,4) (from query (2,3,4))");
    CHECK_ERR(AT(q, n3, v, P(.s = {1})), TC_ERR_SHAPE, "attention: key (3,5,4) must be (2,S,4)");
    CHECK_ERR(AT(q, k, v6, P(.s = {1})), TC_ERR_SHAPE, "attention: value (2,6,3) must be (2,5,Ev) (from key (2,5,4))");
    CHECK_ERR(AT(q, kf, v, P(.s = {1})), TC_ERR_DTYPE, "attention: key is float32, expected float64");
    CHECK_ERR(AT(q, k, v, P(.s = {INFINITY})), TC_ERR_ARG, "attention: scale (s0) must be finite, got inf");
    CHECK_ERR(AT(q, k, v, P(.s = {1}, .i = {2})), TC_ERR_ARG, "attention: causal (i0) must be 0 or 1, got 2");
    CHECK_ERR(AT(q, noKeys, noVals, P(.s = {1})), TC_ERR_SHAPE,
              "attention: 3 queries need at least one key, got key (2,0,4)");
    CHECK(out[0] == NULL && out[1] == NULL);
    tc_tensor *o = NULL, *lse;
    attend(q, k, v, 1, 0, &o, &lse);
    tc_tensor *lf = as(lse, TC_F32), *l3 = R(2, 3, 1);
#define ATB(g, oo, l)                                                                                            \
    tc_op_run(TC_OP_ATTENTION_BACKWARD, (const tc_tensor *const[]){g, q, k, v, oo, l}, 6, P(.s = {1}), out, 2)
    CHECK_ERR(ATB(q, o, lse), TC_ERR_SHAPE, "attention_backward: gradOutput (2,3,4) must be (2,3,3) (from query (2,3,4))");
    CHECK_ERR(ATB(o, q, lse), TC_ERR_SHAPE, "attention_backward: output (2,3,4) must be (2,3,3)");
    CHECK_ERR(ATB(o, o, l3), TC_ERR_SHAPE, "attention_backward: lse (2,3,1) must be (2,3)");
    CHECK_ERR(ATB(o, o, lf), TC_ERR_DTYPE, "attention_backward: lse is float32, expected float64");
    CHECK(out[0] == NULL && out[1] == NULL);
#undef AT
#undef ATB
    ct_drop();
}

/* t's values on device in a view one element into its storage: contiguous, but its data no
 * longer 16-byte aligned (kept; NULL with the error printed). */
static tc_tensor *unaligned_on(const tc_tensor *t, int device)
{
    int64_t n = tc_tensor_numel(t);
    tc_tensor *one = ct_keep(ct_from((tc_dtype)t->dtype, 1, SZ(1), VALS(0)));
    tc_tensor *flat = NULL, *joined = NULL, *on = NULL, *inner = NULL, *r = NULL;
    tc_params shape = {.nshape = t->ndim};
    memcpy(shape.shape, t->size, sizeof(int64_t) * (size_t)t->ndim);
    /* [0, t's values...] on the device, then the view past the 0 */
    bool ok = !tc_op_run(TC_OP_VIEW, &t, 1, P(.nshape = 1, .shape = {n}), &flat, 1) &&
              !tc_op_run(TC_OP_CAT, (const tc_tensor *const[]){one, ct_keep(flat)}, 2, P(.i = {0}), &joined, 1) &&
              (on = ct_to(ct_keep(joined), device)) != NULL &&
              !tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){on}, 1, P(.i = {0, 1, n}), &inner, 1) &&
              !tc_op_run(TC_OP_VIEW, (const tc_tensor *const[]){ct_keep(inner)}, 1, &shape, &r, 1);
    if (!ok) printf("  unaligned view: %s\n", tc_last_error());
    return ct_keep(r);
}

/* attention's two results and attention_backward's (gq, then gk and gv side by side) for the
 * operands on `device` (k and v unaligned views when `unaligned`), brought back to the host
 * (kept). */
static void attend_both(int device, tc_tensor *const op[4], int causal, int unaligned, tc_tensor *res[4])
{
    tc_tensor *d[4], *fw[2] = {NULL, NULL}, *bw[2] = {NULL, NULL};
    for (int i = 0; i < 4; i++)
        d[i] = device == TC_CPU ? op[i] : unaligned && (i == 1 || i == 2) ? unaligned_on(op[i], device)
                                                                            : ct_to(op[i], device);
    const tc_params *p = P(.s = {0.3}, .i = {causal});
    if (tc_op_run(TC_OP_ATTENTION, (const tc_tensor *const[]){d[0], d[1], d[2]}, 3, p, fw, 2) ||
        tc_op_run(TC_OP_ATTENTION_BACKWARD, (const tc_tensor *const[]){d[3], d[0], d[1], d[2], fw[0], fw[1]}, 6, p,
                  bw, 2))
        printf("  attention on %s: %s\n", device == TC_CPU ? "cpu" : "cuda", tc_last_error());
    tc_tensor *all[4] = {fw[0], fw[1], bw[0], bw[1]};
    for (int i = 0; i < 4; i++) {
        ct_keep(all[i]);
        res[i] = device == TC_CPU || !all[i] ? all[i] : ct_to(all[i], TC_CPU);
    }
}

/* How many forward launches of tensor-core and of CUDA-core kernels the emulator has seen
 * (-1 when the backend is not the emulator). */
static void forward_launches(long long n[2])
{
    n[0] = ct_cuda_emu_launches("attn_forward_tc"), n[1] = ct_cuda_emu_launches("attn_forward_kernel");
}

/* Over the emulator: whether the forward launches since `was` are `tc` on tensor cores and
 * `core` on CUDA cores. */
static bool launched_as(const long long was[2], long long tc, long long core)
{
    long long now[2];
    forward_launches(now);
    if (was[0] < 0 || (now[0] - was[0] == tc && now[1] - was[1] == core)) return true;
    printf("  %lld tensor-core and %lld CUDA-core forward launches, expected %lld and %lld\n", now[0] - was[0],
           now[1] - was[1], tc, core);
    return false;
}

/* Attention of dtype dt on a CUDA device against the CPU kernel on the same operands,
 * forward and backward, for each shape {N, L, S, E, Ev, causal} (k and v also as unaligned
 * views when E = Ev = 64, the 16-byte tile loads' case); tol relative to each result's
 * largest element (lse: lse_tol); failures are the calling test's. Returns the device runs
 * made. */
static int device_matches_cpu(int *ctest_failed, int dt, const int64_t (*shapes)[6], int nshapes, double tol, double lse_tol)
{
    int runs = 0;
    for (int t = 0; t < nshapes; t++) {
        const int64_t *z = shapes[t];
        tc_tensor *op[4] = {as(R(z[0], z[1], z[3]), dt), as(R(z[0], z[2], z[3]), dt), as(R(z[0], z[2], z[4]), dt),
                            as(R(z[0], z[1], z[4]), dt)};
        tc_tensor *want[4], *got[4];
        attend_both(TC_CPU, op, (int)z[5], 0, want);
        for (int unaligned = 0; unaligned <= (z[3] == 64 && z[4] == 64); unaligned++, runs++) {
            attend_both(TC_DEVICE_CUDA(0), op, (int)z[5], unaligned, got);
            for (int i = 0; i < 4; i++) {
                /* relative to the result's largest element: the gradients are sums whose
                 * terms (dS k, dS q) exceed them, and each term carries dS's rounding */
                double big = 1;
                for (int64_t e = 0; want[i] && e < tc_tensor_numel(want[i]); e++)
                    big = fmax(big, fabs(ct_at(want[i], e)));
                if (ct_close_all(got[i], want[i], (i == 1 ? lse_tol : tol) * big)) continue;
                CHECK(!"device attention differs from the CPU's");
                printf("  %s, shape %d%s, result %d\n", tc_dtype_name((tc_dtype)dt), t,
                       unaligned ? " (unaligned k, v)" : "", i);
            }
        }
    }
    return runs;
}

/* Float16 and bfloat16 attention on a CUDA device -- the tensor-core kernels of
 * attention_tc.cu on a GPU, their shuffled twin over the emulator -- against the CPU kernel
 * on the same rounded operands, forward and backward: several query and key tiles, causal
 * or not, L above and below S, E neither a multiple of 16 nor equal to Ev, both feature
 * buckets (64 and 128), and k and v at an address the 16-byte tile loads cannot take.
 * Tolerances: the halves' own rounding plus that of the weights (FlashAttention's P and dS
 * products run in the operands' type); lse is float32 on both sides. Over the emulator,
 * which kernels ran: tensor cores from compute capability 8.0 on. */
TEST(cuda_dev_attention_half)
{
    char why[512];
    if (!ct_cuda_device(why, sizeof why)) return;
    static const int64_t shapes[3][6] = {{1, 70, 80, 40, 24, 1}, {2, 20, 9, 100, 128, 0}, {1, 9, 70, 64, 64, 1}};
    tc_cuda_device_props props;
    CHECK_OK(tc_cuda_device_properties(0, &props));
    long long was[2];
    forward_launches(was);
    int runs = device_matches_cpu(ctest_failed, TC_F16, shapes, 3, 2e-3, 1e-5);
    runs += device_matches_cpu(ctest_failed, TC_BF16, shapes, 3, 1.6e-2, 1e-5);
    CHECK(launched_as(was, props.major >= 8 ? runs : 0, props.major >= 8 ? 0 : runs));
    ct_drop();
}

/* Float32 attention on a CUDA device against the CPU kernel: with TF32 allowed and E, Ev <=
 * 64, the tensor-core kernels with operands rounded to TF32 (compute capability 8.0 on);
 * otherwise -- TF32 off, or a feature size above 64 -- the float32 CUDA-core kernels, close
 * to the CPU's float32. The TF32 flag is restored. */
TEST(cuda_dev_attention_tf32)
{
    char why[512];
    if (!ct_cuda_device(why, sizeof why)) return;
    static const int64_t narrow[3][6] = {{1, 70, 80, 40, 24, 1}, {2, 20, 9, 33, 50, 0}, {1, 9, 70, 64, 64, 1}};
    static const int64_t wide[2][6] = {{1, 20, 30, 100, 72, 0}, {1, 70, 45, 128, 97, 1}};
    tc_cuda_device_props props;
    CHECK_OK(tc_cuda_device_properties(0, &props));
    int64_t tf32 = tc_cuda_get_flag(TC_CUDA_FLAG_TF32);
    long long was[2];
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_TF32, 1));
    forward_launches(was);
    /* measured over the emulator: 1.1e-3 and, for lse, 1.3e-4 */
    int runs = device_matches_cpu(ctest_failed, TC_F32, narrow, 3, 3e-3, 5e-4);
    CHECK(launched_as(was, props.major >= 8 ? runs : 0, props.major >= 8 ? 0 : runs));
    forward_launches(was);
    runs = device_matches_cpu(ctest_failed, TC_F32, wide, 2, 1e-5, 1e-5); /* measured: 1.5e-6 */
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_TF32, 0));
    runs += device_matches_cpu(ctest_failed, TC_F32, narrow, 3, 1e-5, 1e-5);
    CHECK(launched_as(was, 0, runs));
    CHECK_OK(tc_cuda_set_flag(TC_CUDA_FLAG_TF32, tf32));
    ct_drop();
}

/* Float64 attention on a CUDA device (the CUDA-core kernels, a row split over 4 lanes in
 * the 64 bucket and 8 in the 128 one) against the CPU kernel: several query and key blocks,
 * causal or not, E != Ev. */
TEST(cuda_dev_attention_f64)
{
    char why[512];
    if (!ct_cuda_device(why, sizeof why)) return;
    static const int64_t shapes[4][6] = {
        {1, 70, 80, 40, 24, 1}, {2, 20, 9, 33, 50, 0}, {1, 40, 35, 100, 72, 0}, {1, 37, 45, 128, 97, 1}};
    long long was[2];
    forward_launches(was);
    int runs = device_matches_cpu(ctest_failed, TC_F64, shapes, 4, 1e-12, 1e-12);
    CHECK(launched_as(was, 0, runs));
    ct_drop();
}
