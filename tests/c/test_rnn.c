/* test_rnn.c -- the recurrent ops (rnn, rnn_backward; core/cpu/rnn.c, rules_rnn.c):
 * float64 finite-difference checks of rnn's rule for every mode (strided operands and
 * gradients included), optional states and biases against explicit zeros, empty sequences
 * and batches, float32 against float64 and thread-count independence on sizes that split
 * over the pool, the create_graph refusal, and bad input with its messages.
 * (PyTorch goldens for both ops are in tests/golden/ops.golden.) */
#include "ctest.h"
#include "gradcheck.h"
#include "internal.h"

static uint64_t seed = 91;
static tc_tensor *R(int nd, const int64_t *sz) { return ct_keep(gc_rand(TC_F64, nd, sz, -1, 1, seed++)); }
static tc_tensor *Z(int nd, const int64_t *sz) { return ct_keep(gc_rand(TC_F64, nd, sz, 0, 0, seed++)); }

static const int gates_of[4] = {1, 1, 4, 3};

/* rnn's inputs for a mode and sizes (biases and states random). */
typedef struct layer {
    tc_tensor *x, *hx, *w_ih, *w_hh, *b_ih, *b_hh;
} layer;

static layer make(int mode, int64_t T, int64_t N, int64_t I, int64_t H)
{
    int64_t G = gates_of[mode], S = mode == 2 ? 2 : 1;
    layer l = {R(3, SZ(T, N, I)), R(3, SZ(S, N, H)), R(2, SZ(G * H, I)), R(2, SZ(G * H, H)), R(1, SZ(G * H)),
               R(1, SZ(G * H))};
    return l;
}

static tc_status fwd(int mode, const layer *l, tc_tensor **y, tc_tensor **res)
{
    const tc_tensor *in[6] = {l->x, l->hx, l->w_ih, l->w_hh, l->b_ih, l->b_hh};
    tc_tensor *out[2] = {NULL, NULL};
    tc_status s = tc_op_run(TC_OP_RNN, in, 6, P(.i = {mode}), out, 2);
    *y = ct_keep(out[0]), *res = ct_keep(out[1]);
    return s;
}

static bool close_all(const tc_tensor *a, const tc_tensor *b, double tol)
{
    if (!a || !b || !tc_same_shape(a, b)) return false;
    int64_t n = tc_tensor_numel(a);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(ct_at(a, i) - ct_at(b, i)) <= tol * (1 + fabs(ct_at(b, i))))) {
            printf("    element %lld: %.12g vs %.12g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            return false;
        }
    return true;
}

TEST(rnn_rule_matches_finite_differences)
{
    for (int mode = 0; mode < 4; mode++) {
        layer l = make(mode, 3, 2, 3, 2);
        GC(RNN, P(.i = {mode}), l.x, l.hx, l.w_ih, l.w_hh, l.b_ih, l.b_hh);
        /* strided operands: x seen through a transpose, w_hh stored transposed */
        int64_t G = gates_of[mode];
        tc_tensor *xs = ct_keep(ct_transposed(R(3, SZ(2, 4, 3)), 0, 1));
        tc_tensor *ws = ct_keep(ct_transposed(R(2, SZ(2, G * 2)), 0, 1));
        GC(RNN, P(.i = {mode}), xs, l.hx, l.w_ih, ws, l.b_ih, l.b_hh);
    }
    ct_drop();
}

/* NULL hx and NULL biases mean zeros: same outputs, same gradients. */
TEST(rnn_optional_states_and_biases)
{
    for (int mode = 0; mode < 4; mode++) {
        int64_t G = gates_of[mode], S = mode == 2 ? 2 : 1, H = 3, RW = mode == 2 ? 5 * H : mode == 3 ? 4 * H : 0;
        layer l = make(mode, 4, 2, 3, H);
        layer zl = l, nl = l;
        zl.hx = Z(3, SZ(S, 2, H)), zl.b_ih = Z(1, SZ(G * H)), zl.b_hh = Z(1, SZ(G * H));
        nl.hx = NULL, nl.b_ih = NULL, nl.b_hh = NULL;
        tc_tensor *y1, *h1, *y2, *h2;
        CHECK_OK(fwd(mode, &zl, &y1, &h1));
        CHECK_OK(fwd(mode, &nl, &y2, &h2));
        CHECK(close_all(y2, y1, 0) && close_all(h2, h1, 0));
        const tc_tensor *gout[2] = {R(3, SZ(4, 2, H)), R(3, SZ(4, 2, RW))};
        tc_tensor *g1[6] = {0}, *g2[6] = {0};
        const tc_tensor *in1[6] = {zl.x, zl.hx, zl.w_ih, zl.w_hh, zl.b_ih, zl.b_hh};
        const tc_tensor *in2[6] = {nl.x, nl.hx, nl.w_ih, nl.w_hh, nl.b_ih, nl.b_hh};
        CHECK_OK(gc_run_rule(TC_OP_RNN, in1, 6, P(.i = {mode}), gout, NULL, g1));
        bool needs[6] = {true, false, true, true, false, false};
        CHECK_OK(gc_run_rule(TC_OP_RNN, in2, 6, P(.i = {mode}), gout, needs, g2));
        for (int i = 0; i < 6; i++) ct_keep(g1[i]), ct_keep(g2[i]);
        CHECK(close_all(g2[0], g1[0], 1e-14) && close_all(g2[2], g1[2], 1e-14) && close_all(g2[3], g1[3], 1e-14));
        CHECK(!g2[1] && !g2[4] && !g2[5]);
        /* one bias only: the other slot is zeros */
        nl.b_hh = l.b_hh, zl.b_hh = l.b_hh;
        CHECK_OK(fwd(mode, &zl, &y1, &h1));
        CHECK_OK(fwd(mode, &nl, &y2, &h2));
        CHECK(close_all(y2, y1, 1e-15));
        in1[5] = zl.b_hh, in2[5] = nl.b_hh;
        tc_tensor *g3[6] = {0}, *g4[6] = {0};
        CHECK_OK(gc_run_rule(TC_OP_RNN, in1, 6, P(.i = {mode}), gout, NULL, g3));
        CHECK_OK(gc_run_rule(TC_OP_RNN, in2, 6, P(.i = {mode}), gout, NULL, g4));
        for (int i = 0; i < 6; i++) ct_keep(g3[i]), ct_keep(g4[i]);
        CHECK(close_all(g4[5], g3[5], 1e-14) && !g4[4]);
        /* a gradient of the reserve only, and of y only */
        const tc_tensor *only_h[2] = {NULL, gout[1]}, *only_y[2] = {gout[0], NULL};
        tc_tensor *gh[6] = {0}, *gy[6] = {0};
        CHECK_OK(gc_run_rule(TC_OP_RNN, in1, 6, P(.i = {mode}), only_h, NULL, gh));
        CHECK_OK(gc_run_rule(TC_OP_RNN, in1, 6, P(.i = {mode}), only_y, NULL, gy));
        for (int i = 0; i < 6; i++) {
            ct_keep(gh[i]), ct_keep(gy[i]);
            tc_tensor *sum = NULL;
            if (gh[i] && gy[i]) tc_op_run(TC_OP_ADD, (const tc_tensor *const[]){gh[i], gy[i]}, 2, P(.s = {1}), &sum, 1);
            CHECK(close_all(ct_keep(sum), g3[i], 1e-13));
        }
    }
    ct_drop();
}

TEST(rnn_empty_sequence_and_batch)
{
    layer l = make(2, 0, 2, 3, 4);
    tc_tensor *y, *res;
    CHECK_OK(fwd(2, &l, &y, &res));
    CHECK(ct_shape_is(y, 3, SZ(0, 2, 4)) && ct_shape_is(res, 3, SZ(0, 2, 20)));
    /* backward of nothing: no gradient anywhere */
    tc_tensor *out[2] = {NULL, NULL};
    const tc_tensor *in[9] = {l.x, l.hx, l.w_ih, l.w_hh, NULL, y, res, y, res};
    CHECK_OK(tc_op_run(TC_OP_RNN_BACKWARD, in, 9, P(.i = {2}), out, 2));
    ct_keep(out[0]), ct_keep(out[1]);
    CHECK(ct_shape_is(out[0], 3, SZ(0, 2, 3)) && ct_shape_is(out[1], 1, SZ(16 + 16 * 3 + 16 * 4)));
    for (int64_t i = 0; i < 16 + 16 * 7; i++) CHECK(ct_at(out[1], i) == 0);
    /* an empty batch */
    layer e = make(3, 3, 0, 2, 2);
    CHECK_OK(fwd(3, &e, &y, &res));
    CHECK(ct_shape_is(y, 3, SZ(3, 0, 2)) && ct_shape_is(res, 3, SZ(3, 0, 8)));
    /* RNN keeps no reserve */
    layer r = make(1, 3, 2, 2, 2);
    CHECK_OK(fwd(1, &r, &y, &res));
    CHECK(ct_shape_is(res, 3, SZ(3, 2, 0)));
    ct_drop();
}

/* Sizes that split the pointwise work and the products over the pool: float32 follows
 * float64, and one thread gives what two give. */
TEST(rnn_float32_and_threads)
{
    int saved = tc_get_num_threads();
    for (int mode = 0; mode < 4; mode++) {
        int64_t T = 5, N = 160, I = 8, H = 32, RW = mode == 2 ? 5 * H : mode == 3 ? 4 * H : 0;
        layer l = make(mode, T, N, I, H);
        const tc_tensor *gout[2] = {R(3, SZ(T, N, H)), R(3, SZ(T, N, RW))};
        const tc_tensor *in[6] = {l.x, l.hx, l.w_ih, l.w_hh, l.b_ih, l.b_hh};
        tc_tensor *g[2][6] = {{0}}, *y[2], *res[2];
        for (int k = 0; k < 2; k++) {
            tc_set_num_threads(k == 0 ? 1 : 2);
            CHECK_OK(fwd(mode, &l, &y[k], &res[k]));
            CHECK_OK(gc_run_rule(TC_OP_RNN, in, 6, P(.i = {mode}), gout, NULL, g[k]));
            for (int i = 0; i < 6; i++) ct_keep(g[k][i]);
        }
        CHECK(close_all(y[1], y[0], 1e-13) && close_all(res[1], res[0], 1e-13));
        for (int i = 0; i < 6; i++) CHECK(close_all(g[1][i], g[0][i], 1e-12));
        /* float32 */
        const tc_tensor *in32[6];
        tc_tensor *go32[2];
        for (int i = 0; i < 6; i++) {
            tc_tensor *t = NULL;
            tc_op_run(TC_OP_COPY, &in[i], 1, P(.i = {TC_F32}), &t, 1);
            in32[i] = ct_keep(t);
        }
        for (int o = 0; o < 2; o++) {
            go32[o] = NULL;
            tc_op_run(TC_OP_COPY, &gout[o], 1, P(.i = {TC_F32}), &go32[o], 1);
            ct_keep(go32[o]);
        }
        tc_tensor *o32[2] = {NULL, NULL}, *g32[6] = {0};
        CHECK_OK(tc_op_run(TC_OP_RNN, in32, 6, P(.i = {mode}), o32, 2));
        ct_keep(o32[0]), ct_keep(o32[1]);
        CHECK(close_all(o32[0], y[0], 1e-4) && close_all(o32[1], res[0], 1e-4));
        CHECK_OK(gc_run_rule(TC_OP_RNN, in32, 6, P(.i = {mode}), (const tc_tensor *const *)go32, NULL, g32));
        for (int i = 0; i < 6; i++) CHECK(close_all(ct_keep(g32[i]), g[0][i], 2e-4));
    }
    tc_set_num_threads(saved);
    ct_drop();
}

/* rnn_backward has no rule: a graph of the gradient is refused by name. */
TEST(rnn_refuses_create_graph)
{
    layer l = make(3, 2, 2, 3, 2);
    CHECK_OK(tc_tensor_set_requires_grad(l.w_hh, 1));
    tc_tensor *y, *res;
    CHECK_OK(fwd(3, &l, &y, &res));
    const tc_tensor *outs[1] = {y}, *gouts[1] = {R(3, SZ(2, 2, 2))}, *ins[1] = {l.w_hh};
    tc_tensor *g[1] = {NULL};
    CHECK_ERR(tc_autograd_grad(outs, gouts, 1, ins, 1, 1, 1, 0, g), TC_ERR_UNSUPPORTED,
              "rnn: gradients of gradients (create_graph) are not supported");
    CHECK(g[0] == NULL);
    CHECK_OK(tc_autograd_grad(outs, gouts, 1, ins, 1, 0, 0, 0, g)); /* a plain gradient works */
    CHECK(ct_shape_is(ct_keep(g[0]), 2, SZ(6, 2)));
    ct_drop();
}

TEST(rnn_bad_input)
{
    layer l = make(2, 5, 2, 3, 4);
    tc_tensor *out[2] = {NULL, NULL};
#define RUN(mode, a, b, c, d, e, f) \
    tc_op_run(TC_OP_RNN, (const tc_tensor *const[]){a, b, c, d, e, f}, 6, P(.i = {mode}), out, 2)
    CHECK_ERR(RUN(7, l.x, l.hx, l.w_ih, l.w_hh, l.b_ih, l.b_hh), TC_ERR_ARG,
              "rnn: mode (i0) 7 is not 0 (RNN tanh), 1 (RNN relu), 2 (LSTM) or 3 (GRU)");
    CHECK_ERR(RUN(2, R(2, SZ(5, 3)), l.hx, l.w_ih, l.w_hh, l.b_ih, l.b_hh), TC_ERR_SHAPE,
              "rnn: x must be 3-D (seq, batch, input), got (5,3)");
    CHECK_ERR(RUN(2, l.x, l.hx, l.w_ih, R(2, SZ(12, 4)), l.b_ih, l.b_hh), TC_ERR_SHAPE,
              "rnn: w_hh (12,4) must be (16,4) for LSTM with hidden size 4");
    CHECK_ERR(RUN(3, l.x, NULL, l.w_ih, l.w_hh, NULL, NULL), TC_ERR_SHAPE,
              "rnn: w_hh (16,4) must be (12,4) for GRU with hidden size 4");
    CHECK_ERR(RUN(2, l.x, l.hx, R(2, SZ(16, 5)), l.w_hh, l.b_ih, l.b_hh), TC_ERR_SHAPE,
              "rnn: w_ih (16,5) must be (16,3) for LSTM with hidden size 4 and x (5,2,3)");
    CHECK_ERR(RUN(2, l.x, R(3, SZ(1, 2, 4)), l.w_ih, l.w_hh, l.b_ih, l.b_hh), TC_ERR_SHAPE,
              "rnn: hx (1,2,4) must be (2,2,4)");
    CHECK_ERR(RUN(2, l.x, l.hx, l.w_ih, l.w_hh, l.b_ih, R(1, SZ(12))), TC_ERR_SHAPE, "rnn: b_hh (12) must be (16)");
    CHECK_ERR(RUN(2, l.x, l.hx, NULL, l.w_hh, l.b_ih, l.b_hh), TC_ERR_ARG, "rnn: input 3 (w_ih) is NULL");
    CHECK_ERR(RUN(2, NULL, l.hx, l.w_ih, l.w_hh, l.b_ih, l.b_hh), TC_ERR_ARG, "rnn: input 1 is NULL");
    tc_tensor *w32 = NULL;
    tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){l.w_hh}, 1, P(.i = {TC_F32}), &w32, 1);
    CHECK_ERR(RUN(2, l.x, l.hx, l.w_ih, ct_keep(w32), l.b_ih, l.b_hh), TC_ERR_DTYPE,
              "rnn: w_hh is float32 but x is float64");
    CHECK(out[0] == NULL && out[1] == NULL);
    /* a failed call leaves a given result as it was */
    tc_tensor *given = R(1, SZ(7));
    out[0] = given;
    CHECK_ERR(RUN(2, l.x, R(3, SZ(1, 2, 4)), l.w_ih, l.w_hh, l.b_ih, l.b_hh), TC_ERR_SHAPE, "hx");
    CHECK(out[0] == given && ct_shape_is(given, 1, SZ(7)));
    out[0] = NULL;
#undef RUN
    tc_tensor *y = R(3, SZ(5, 2, 4)), *res = R(3, SZ(5, 2, 20));
#define BWD(b, yy, rr, dy, dr) \
    tc_op_run(TC_OP_RNN_BACKWARD, (const tc_tensor *const[]){l.x, l.hx, l.w_ih, l.w_hh, b, yy, rr, dy, dr}, 9, \
              P(.i = {2}), out, 2)
    CHECK_ERR(BWD(R(1, SZ(16)), y, res, y, NULL), TC_ERR_SHAPE, "rnn_backward: b (16) must be (2,16)");
    CHECK_ERR(BWD(NULL, R(3, SZ(4, 2, 4)), res, NULL, NULL), TC_ERR_SHAPE, "rnn_backward: y (4,2,4) must be (5,2,4)");
    CHECK_ERR(BWD(NULL, NULL, res, y, NULL), TC_ERR_ARG, "rnn_backward: input 6 (y, a result of rnn) is NULL");
    CHECK_ERR(BWD(NULL, y, NULL, y, NULL), TC_ERR_ARG, "rnn_backward: input 7 (reserve, a result of rnn) is NULL");
    CHECK_ERR(BWD(NULL, y, R(3, SZ(5, 2, 16)), y, NULL), TC_ERR_SHAPE,
              "rnn_backward: reserve (5,2,16) must be (5,2,20)");
    CHECK_ERR(BWD(NULL, y, res, R(3, SZ(5, 2, 3)), NULL), TC_ERR_SHAPE, "rnn_backward: dy (5,2,3) must be (5,2,4)");
    CHECK_ERR(BWD(NULL, y, res, NULL, R(3, SZ(1, 2, 20))), TC_ERR_SHAPE,
              "rnn_backward: dreserve (1,2,20) must be (5,2,20)");
    CHECK(out[0] == NULL && out[1] == NULL);
#undef BWD
    /* the rule refuses a gradient of the wrong size */
    tc_tensor *gin[6] = {0};
    const tc_tensor *bad[2] = {R(3, SZ(5, 2, 3)), NULL};
    CHECK_ERR(gc_run_rule(TC_OP_RNN, (const tc_tensor *const[]){l.x, l.hx, l.w_ih, l.w_hh, l.b_ih, l.b_hh}, 6,
                          P(.i = {2}), bad, NULL, gin),
              TC_ERR_SHAPE, "rnn backward: gradient of output 1");
    for (int i = 0; i < 6; i++) CHECK(!gin[i]);
    ct_drop();
}
