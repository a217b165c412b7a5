/* test_graph_exec.c -- running compiled graphs (core/graph/exec.c): graphs built by hand
 * with the graph.c builder, run compiled and compared exactly with the same ops run
 * eagerly; what the caller gets back for inputs, captured tensors, constants and views;
 * write-backs into captured tensors; bad inputs; repeated runs. The memory plan and the
 * in-place choices have their own file (test_graph_memplan.c). */
#include "ctest.h"
#include "graph/graph.h"
#include <stdlib.h>

/* ---- helpers ---------------------------------------------------------------------------- */

/* Exactly equal dtype, sizes and elements (NaN == NaN). */
static int same_tensor(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim) {
        printf("    dtype/ndim differ\n");
        return 0;
    }
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d]) {
            printf("    size %d: %lld vs %lld\n", d, (long long)a->size[d], (long long)b->size[d]);
            return 0;
        }
    int64_t n = tc_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = ct_at(a, i), y = ct_at(b, i);
        if (!(x == y || (x != x && y != y))) {
            printf("    element %lld: %.9g vs %.9g\n", (long long)i, x, y);
            return 0;
        }
    }
    return 1;
}

/* Eager call with fresh outputs (kept for ct_drop). */
static tc_tensor *eager(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, const tc_params *p)
{
    tc_tensor *out = NULL;
    if (ct_run1(op, a, b, c, p, &out)) {
        printf("    eager %s failed: %s\n", tc_op_info(op)->name, tc_last_error());
        return NULL;
    }
    return ct_keep(out);
}

/* A deterministic float tensor with values in (-1, 1). */
static tc_tensor *wave(tc_dtype dt, int nd, const int64_t *sz, double phase)
{
    tc_tensor *t = ct_arange(dt, nd, sz);
    int64_t n = tc_tensor_numel(t);
    float *f = (float *)((char *)t->storage->data);
    double *d = (double *)((char *)t->storage->data);
    for (int64_t i = 0; i < n; i++) {
        double v = sin(0.37 * (double)i + phase) * 0.9;
        if (dt == TC_F32) f[i] = (float)v;
        else d[i] = v;
    }
    return ct_keep(t);
}

static int32_t op1(tc_graph *g, tc_op op, int32_t a, const tc_params *p)
{
    int32_t out[2] = {-1, -1};
    if (tc_graph_add_op(g, op, &a, 1, p, out)) printf("    add %s: %s\n", tc_op_info(op)->name, tc_last_error());
    return out[0];
}

static int32_t op2(tc_graph *g, tc_op op, int32_t a, int32_t b, const tc_params *p)
{
    int32_t in[2] = {a, b}, out[2] = {-1, -1};
    if (tc_graph_add_op(g, op, in, 2, p, out)) printf("    add %s: %s\n", tc_op_info(op)->name, tc_last_error());
    return out[0];
}

/* ---- elementwise chains, matmul, reductions ------------------------------------------------ */

/* y = sigmoid(tanh(x * w + 0.5 * b) - x) with w (8,32) external, b (32) external */
TEST(graph_exec_elementwise_chain_matches_eager)
{
    int64_t xs[2] = {8, 32}, bs[1] = {32};
    tc_tensor *x = wave(TC_F32, 2, xs, 0.1), *w = wave(TC_F32, 2, xs, 1.3), *b = wave(TC_F32, 1, bs, 2.2);
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx, vw, vb;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, xs, &vx));
    CHECK_OK(tc_graph_add_external(g, w, &vw));
    CHECK_OK(tc_graph_add_external(g, b, &vb));
    int32_t m = op2(g, TC_OP_MUL, vx, vw, NULL);
    int32_t a = op2(g, TC_OP_ADD, m, vb, P(.s = {0.5}));
    int32_t t = op1(g, TC_OP_TANH, a, NULL);
    int32_t d = op2(g, TC_OP_SUB, t, vx, P(.s = {1}));
    int32_t y = op1(g, TC_OP_SIGMOID, d, NULL);
    CHECK_OK(tc_graph_mark_output(g, y));
    tc_tensor *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *e = eager(TC_OP_SIGMOID,
                         eager(TC_OP_SUB,
                               eager(TC_OP_TANH, eager(TC_OP_ADD, eager(TC_OP_MUL, x, w, NULL, NULL), b, NULL, P(.s = {0.5})),
                                     NULL, NULL, NULL),
                               x, NULL, P(.s = {1})),
                         NULL, NULL, NULL);
    CHECK(same_tensor(out[0], e));
    /* a second run with another input gives that input's result; the first is untouched */
    tc_tensor *x2 = wave(TC_F32, 2, xs, 0.7), *out2[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x2}, 1, out2, 1));
    ct_keep(out2[0]);
    CHECK(out2[0] != out[0]);
    CHECK(same_tensor(out[0], e));
    tc_tensor *e2 = eager(TC_OP_SIGMOID,
                          eager(TC_OP_SUB,
                                eager(TC_OP_TANH, eager(TC_OP_ADD, eager(TC_OP_MUL, x2, w, NULL, NULL), b, NULL, P(.s = {0.5})),
                                      NULL, NULL, NULL),
                                x2, NULL, P(.s = {1})),
                          NULL, NULL, NULL);
    CHECK(same_tensor(out2[0], e2));
    /* captured tensors are read by reference: a changed w changes the result */
    ((float *)w->storage->data)[0] = 3.0f;
    tc_tensor *out3[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out3, 1));
    ct_keep(out3[0]);
    tc_tensor *e3 = eager(TC_OP_SIGMOID,
                          eager(TC_OP_SUB,
                                eager(TC_OP_TANH, eager(TC_OP_ADD, eager(TC_OP_MUL, x, w, NULL, NULL), b, NULL, P(.s = {0.5})),
                                      NULL, NULL, NULL),
                                x, NULL, P(.s = {1})),
                          NULL, NULL, NULL);
    CHECK(same_tensor(out3[0], e3));
    CHECK(ct_at(out3[0], 0) != ct_at(out[0], 0));
    tc_graph_free(g);
    ct_drop();
}

/* h = relu-ish(x @ W^T + b) via cmax; s = sum(h, dim 1); m = mean(h) -- float64 */
TEST(graph_exec_matmul_and_reductions_match_eager)
{
    int64_t xs[2] = {8, 32}, ws[2] = {16, 32}, bs[1] = {16};
    tc_tensor *x = wave(TC_F64, 2, xs, 0.3), *W = wave(TC_F64, 2, ws, 0.9), *b = wave(TC_F64, 1, bs, 1.7);
    tc_tensor *zero = ct_keep(ct_from(TC_F64, 0, NULL, VALS(0)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx, vW, vb, vz;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 2, xs, &vx));
    CHECK_OK(tc_graph_add_external(g, W, &vW));
    CHECK_OK(tc_graph_add_external(g, b, &vb));
    CHECK_OK(tc_graph_add_const(g, zero, &vz));
    int32_t Wt = op1(g, TC_OP_TRANSPOSE, vW, P(.i = {0, 1}));
    int32_t mm = op2(g, TC_OP_MM, vx, Wt, NULL);
    int32_t a = op2(g, TC_OP_ADD, mm, vb, P(.s = {1}));
    int32_t h = op2(g, TC_OP_MAXIMUM, a, vz, NULL);
    int32_t s = op1(g, TC_OP_SUM, h, P(.i = {1, 0}));
    int32_t m = op1(g, TC_OP_MEAN, h, P(.i = {-1, 0}));
    int32_t mx[2];
    CHECK_OK(tc_graph_add_op(g, TC_OP_MAX, &h, 1, P(.i = {0, 1}), mx));
    CHECK_OK(tc_graph_mark_output(g, s));
    CHECK_OK(tc_graph_mark_output(g, m));
    CHECK_OK(tc_graph_mark_output(g, mx[0]));
    CHECK_OK(tc_graph_mark_output(g, mx[1]));
    tc_tensor *out[4] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 4));
    for (int i = 0; i < 4; i++) ct_keep(out[i]);
    tc_tensor *Wte = ct_keep(ct_transposed(W, 0, 1));
    tc_tensor *he = eager(TC_OP_MAXIMUM, eager(TC_OP_ADD, eager(TC_OP_MM, x, Wte, NULL, NULL), b, NULL, P(.s = {1})),
                          zero, NULL, NULL);
    CHECK(same_tensor(out[0], eager(TC_OP_SUM, he, NULL, NULL, P(.i = {1, 0}))));
    CHECK(same_tensor(out[1], eager(TC_OP_MEAN, he, NULL, NULL, P(.i = {-1, 0}))));
    tc_tensor *emx[2] = {NULL, NULL};
    CHECK_OK(tc_op_run(TC_OP_MAX, (const tc_tensor *[]){he}, 1, P(.i = {0, 1}), emx, 2));
    ct_keep(emx[0]), ct_keep(emx[1]);
    CHECK(same_tensor(out[2], emx[0]) && same_tensor(out[3], emx[1]));
    CHECK(out[3]->dtype == TC_I64 && out[0]->ndim == 1 && out[0]->size[0] == 8 && out[1]->ndim == 0);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_exec_max_pool2d_two_outputs)
{
    int64_t xs[4] = {2, 3, 6, 6};
    tc_tensor *x = wave(TC_F32, 4, xs, 0.5);
    tc_params pp = {.nshape = 8, .shape = {2, 2, 2, 2, 0, 0, 1, 1}};
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx, mp[2];
    CHECK_OK(tc_graph_add_input(g, TC_F32, 4, xs, &vx));
    int32_t r = op1(g, TC_OP_NEG, vx, NULL);
    CHECK_OK(tc_graph_add_op(g, TC_OP_MAX_POOL2D, &r, 1, &pp, mp));
    int32_t e = op1(g, TC_OP_EXP, mp[0], NULL);
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_graph_mark_output(g, mp[1]));
    tc_tensor *out[2] = {NULL, NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 2));
    ct_keep(out[0]), ct_keep(out[1]);
    tc_tensor *ep[2] = {NULL, NULL}, *nx = eager(TC_OP_NEG, x, NULL, NULL, NULL);
    CHECK_OK(tc_op_run(TC_OP_MAX_POOL2D, (const tc_tensor *[]){nx}, 1, &pp, ep, 2));
    ct_keep(ep[0]), ct_keep(ep[1]);
    CHECK(same_tensor(out[0], eager(TC_OP_EXP, ep[0], NULL, NULL, NULL)));
    CHECK(same_tensor(out[1], ep[1]));
    CHECK(ct_shape_is(out[0], 4, SZ(2, 3, 3, 3)));
    tc_graph_free(g);
    ct_drop();
}

/* ---- views --------------------------------------------------------------------------------- */

TEST(graph_exec_views_of_inputs_and_results)
{
    int64_t xs[2] = {6, 4};
    tc_tensor *x = wave(TC_F32, 2, xs, 0.2);
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, xs, &vx));
    int32_t n = op1(g, TC_OP_NARROW, vx, P(.i = {0, 1, 3}));  /* rows 1..3 of the input: (3,4) */
    int32_t t = op1(g, TC_OP_TRANSPOSE, n, P(.i = {0, 1})); /* (4,3) */
    int32_t e = op1(g, TC_OP_EXP, t, NULL);                 /* fresh (4,3) */
    int32_t ev = op1(g, TC_OP_VIEW, e, P(.nshape = 1, .shape = {12}));
    int32_t s = op1(g, TC_OP_SELECT, e, P(.i = {1, 2})); /* column 2 of e: (4) */
    int32_t q = op1(g, TC_OP_SQUARE, s, NULL);
    CHECK_OK(tc_graph_mark_output(g, ev)); /* a view of a result */
    CHECK_OK(tc_graph_mark_output(g, t));  /* a view of the input */
    CHECK_OK(tc_graph_mark_output(g, q));
    CHECK_OK(tc_graph_mark_output(g, vx)); /* the input itself */
    tc_tensor *out[4] = {NULL};
    for (int run = 0; run < 2; run++) {
        /* the second run binds a strided input: the cached view geometry must be redone */
        const tc_tensor *xin = x;
        if (run == 1) {
            tc_tensor *big = ct_keep(ct_arange(TC_F32, 2, SZ(4, 6)));
            for (int64_t i = 0; i < 24; i++) ((float *)big->storage->data)[i] = (float)ct_at(x, (i % 6) * 4 + i / 6);
            xin = ct_keep(ct_transposed(big, 0, 1)); /* (6,4), strides (1,6): same values as x */
            CHECK(!tc_tensor_is_contiguous(xin));
        }
        CHECK_OK(tc_graph_run(g, &xin, 1, out, 4));
        for (int i = 0; i < 4; i++) ct_keep(out[i]);
        tc_tensor *te = ct_keep(ct_transposed(eager(TC_OP_NARROW, x, NULL, NULL, P(.i = {0, 1, 3})), 0, 1));
        tc_tensor *ee = eager(TC_OP_EXP, te, NULL, NULL, NULL);
        CHECK(same_tensor(out[0], eager(TC_OP_VIEW, ee, NULL, NULL, P(.nshape = 1, .shape = {12}))));
        CHECK(same_tensor(out[1], te));
        CHECK(same_tensor(out[2], eager(TC_OP_SQUARE, eager(TC_OP_SELECT, ee, NULL, NULL, P(.i = {1, 2})), NULL, NULL, NULL)));
        CHECK(out[3] == xin);                  /* the same tensor, a new reference */
        CHECK(out[1]->storage == xin->storage); /* a view of the input shares its memory (PyTorch) */
        CHECK(out[1]->offset == xin->offset + (run == 0 ? 4 : 1));
        CHECK(out[0]->storage != xin->storage && out[0]->ndim == 1);
    }
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_exec_outputs_of_externals_and_constants)
{
    int64_t s[1] = {4};
    tc_tensor *w = ct_keep(ct_from(TC_F32, 1, s, VALS(1, 2, 3, 4)));
    tc_tensor *c = ct_keep(ct_from(TC_F32, 1, s, VALS(5, 6, 7, 8)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vw, vc;
    CHECK_OK(tc_graph_add_external(g, w, &vw));
    CHECK_OK(tc_graph_add_const(g, c, &vc));
    int32_t a = op2(g, TC_OP_ADD, vw, vc, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, vw));
    CHECK_OK(tc_graph_mark_output(g, vc));
    CHECK_OK(tc_graph_mark_output(g, a));
    CHECK_OK(tc_graph_mark_output(g, a)); /* the same value twice */
    tc_tensor *out[4] = {NULL};
    CHECK_OK(tc_graph_run(g, NULL, 0, out, 4));
    for (int i = 0; i < 4; i++) ct_keep(out[i]);
    CHECK(out[0] == w);                              /* the captured tensor itself */
    CHECK(out[1] != c && SAME(out[1], 5, 6, 7, 8)); /* a copy: the caller cannot write into the graph */
    CHECK(SAME(out[2], 6, 8, 10, 12) && out[3] == out[2]);
    tc_graph_free(g);
    ct_drop();
}

/* ---- write-backs ----------------------------------------------------------------------------- */

/* SGD step: p <- p - 0.5 * g, with g an input; returns the loss-like sum of p*g first. */
TEST(graph_exec_writeback_updates_captured_tensor)
{
    int64_t s[1] = {4};
    tc_tensor *p = ct_keep(ct_from(TC_F32, 1, s, VALS(1, 2, 3, 4)));
    tc_tensor *gr = ct_keep(ct_from(TC_F32, 1, s, VALS(2, 2, 4, -4)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vg, vp;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 1, s, &vg));
    CHECK_OK(tc_graph_add_external(g, p, &vp));
    int32_t pg = op2(g, TC_OP_MUL, vp, vg, NULL);
    int32_t loss = op1(g, TC_OP_SUM, pg, P(.i = {-1}));
    int32_t np = op2(g, TC_OP_SUB, vp, vg, P(.s = {0.5}));
    CHECK_OK(tc_graph_add_writeback(g, vp, np));
    CHECK_OK(tc_graph_mark_output(g, loss));
    int64_t v0 = p->storage->version;
    tc_tensor *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){gr}, 1, out, 1));
    ct_keep(out[0]);
    CHECK(SAME(p, 0, 1, 1, 6));
    CHECK(SAME(out[0], 2 + 4 + 12 - 16)); /* computed from the old p */
    CHECK(p->storage->version > v0);
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){gr}, 1, out, 1));
    ct_keep(out[0]);
    CHECK(SAME(p, -1, 0, -1, 8));
    CHECK(SAME(out[0], 0 + 2 + 4 - 24));
    /* the update was computed straight into p (no copy at the end) */
    CHECK(g->vals[np].offset == -2);
    /* so p cannot also come in as the input */
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){p}, 1, out, 1), TC_ERR_ARG,
              "input 1 shares memory with captured tensor %1, which the graph updates in place");
    CHECK(SAME(p, -1, 0, -1, 8));
    tc_graph_free(g);
    ct_drop();
}

/* The old value is returned and read after the update: the write-back must be a copy at
 * the end, and the returned old value must not change with the update. */
TEST(graph_exec_writeback_keeps_old_value_readers_right)
{
    int64_t s[1] = {3};
    tc_tensor *p = ct_keep(ct_from(TC_F64, 1, s, VALS(1, 2, 3)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vp;
    CHECK_OK(tc_graph_add_external(g, p, &vp));
    int32_t np = op1(g, TC_OP_NEG, vp, NULL);
    int32_t late = op2(g, TC_OP_MUL, vp, vp, NULL); /* reads the old p after np exists */
    CHECK_OK(tc_graph_add_writeback(g, vp, np));
    CHECK_OK(tc_graph_mark_output(g, late));
    CHECK_OK(tc_graph_mark_output(g, vp));
    tc_tensor *out[2] = {NULL, NULL};
    CHECK_OK(tc_graph_run(g, NULL, 0, out, 2));
    ct_keep(out[0]), ct_keep(out[1]);
    CHECK(g->vals[np].offset != -2);
    CHECK(SAME(out[0], 1, 4, 9));
    CHECK(out[1] != p && SAME(out[1], 1, 2, 3)); /* the old value, a copy */
    CHECK(SAME(p, -1, -2, -3));
    tc_graph_free(g);
    ct_drop();
}

/* ---- checks and errors ---------------------------------------------------------------------- */

TEST(graph_exec_bad_inputs_are_errors)
{
    int64_t s[2] = {2, 3};
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, s));
    tc_tensor *xd = ct_keep(ct_arange(TC_F64, 2, s));
    tc_tensor *xs = ct_keep(ct_arange(TC_F32, 2, SZ(3, 2)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, s, &vx));
    int32_t y = op1(g, TC_OP_NEG, vx, NULL);
    CHECK_OK(tc_graph_mark_output(g, y));
    tc_tensor *out[2] = {NULL, NULL};
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){x, x}, 2, out, 1), TC_ERR_ARG, "takes 1 inputs, got 2");
    CHECK_ERR(tc_graph_run(g, NULL, 0, out, 1), TC_ERR_ARG, "takes 1 inputs, got 0");
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 2), TC_ERR_ARG, "returns 1 outputs");
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){xd}, 1, out, 1), TC_ERR_DTYPE, "input 1 is float64 (2,3)");
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){xs}, 1, out, 1), TC_ERR_SHAPE,
              "input 1 is float32 (3,2) but the graph was traced with float32 (2,3)");
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){NULL}, 1, out, 1), TC_ERR_ARG, "input 1 is NULL");
    CHECK(out[0] == NULL && out[1] == NULL);
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 1));
    ct_keep(out[0]);
    CHECK(SAME(out[0], 0, -1, -2, -3, -4, -5));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_exec_changed_capture_and_bad_index_are_errors)
{
    int64_t s[1] = {5};
    tc_tensor *w = ct_keep(ct_from(TC_F32, 1, s, VALS(10, 11, 12, 13, 14)));
    tc_tensor *idx_ok = ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(4, 0)));
    tc_tensor *idx_bad = ct_keep(ct_from(TC_I64, 1, SZ(2), VALS(1, 7)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vw, vi;
    CHECK_OK(tc_graph_add_external(g, w, &vw));
    CHECK_OK(tc_graph_add_input(g, TC_I64, 1, SZ(2), &vi));
    int32_t sel = op2(g, TC_OP_INDEX_SELECT, vw, vi, P(.i = {0}));
    int32_t y = op1(g, TC_OP_NEG, sel, NULL);
    CHECK_OK(tc_graph_mark_output(g, y));
    tc_tensor *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){idx_ok}, 1, out, 1));
    ct_keep(out[0]);
    CHECK(SAME(out[0], -14, -10));
    out[0] = NULL;
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){idx_bad}, 1, out, 1), TC_ERR_INDEX, "index 7 out of range");
    CHECK(strstr(tc_last_error(), "node 0 of the compiled graph") != NULL);
    CHECK(out[0] == NULL);
    /* a captured tensor resized after tracing */
    CHECK_OK(tc_tensor_resize(w, 1, SZ(6)));
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){idx_ok}, 1, out, 1), TC_ERR_SHAPE,
              "captured tensor %0 is now float32 (6) but was float32 (5)");
    CHECK(out[0] == NULL);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_exec_failed_run_sets_no_output_and_leaks_nothing)
{
    int64_t s[1] = {3};
    tc_tensor *x = ct_keep(ct_from(TC_I32, 1, s, VALS(6, 7, 8)));
    tc_tensor *d = ct_keep(ct_from(TC_I32, 1, s, VALS(2, 0, 1)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx, vd;
    CHECK_OK(tc_graph_add_input(g, TC_I32, 1, s, &vx));
    CHECK_OK(tc_graph_add_input(g, TC_I32, 1, s, &vd));
    int32_t a = op1(g, TC_OP_NEG, vx, NULL);
    int32_t q = op2(g, TC_OP_DIV, a, vd, NULL); /* integer division by zero: the kernel refuses */
    CHECK_OK(tc_graph_mark_output(g, a));
    CHECK_OK(tc_graph_mark_output(g, q));
    tc_tensor *out[2] = {NULL, NULL};
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){x, d}, 2, out, 2), TC_ERR_ARG, "div");
    CHECK(out[0] == NULL && out[1] == NULL);
    tc_tensor *d2 = ct_keep(ct_from(TC_I32, 1, s, VALS(2, -7, 1)));
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x, d2}, 2, out, 2));
    ct_keep(out[0]), ct_keep(out[1]);
    CHECK(SAME(out[0], -6, -7, -8) && SAME(out[1], -3, 1, -8));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_exec_runs_give_identical_results)
{
    int64_t xs[2] = {8, 32}, ws[2] = {32, 32};
    tc_tensor *x = wave(TC_F32, 2, xs, 0.4), *W = wave(TC_F32, 2, ws, 0.8);
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx, vW;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, xs, &vx));
    CHECK_OK(tc_graph_add_external(g, W, &vW));
    int32_t h = vx;
    for (int layer = 0; layer < 4; layer++) h = op1(g, TC_OP_TANH, op2(g, TC_OP_MM, h, vW, NULL), NULL);
    int32_t l = op1(g, TC_OP_SUM, op1(g, TC_OP_SQUARE, h, NULL), P(.i = {-1}));
    CHECK_OK(tc_graph_mark_output(g, l));
    CHECK_OK(tc_graph_mark_output(g, h));
    tc_tensor *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, a, 2));
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, b, 2));
    for (int i = 0; i < 2; i++) {
        ct_keep(a[i]), ct_keep(b[i]);
        CHECK(a[i] != b[i] && same_tensor(a[i], b[i]));
    }
    CHECK(g->compiled && g->planned_bytes > 0 && g->planned_bytes < g->unplanned_bytes);
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_exec_refuses_while_tracing_and_uncompiled_graph_compiles)
{
    tc_graph *g, *tr = NULL;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 1, SZ(2), &vx));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_NEG, vx, NULL)));
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(2), VALS(1, -2))), *out[1] = {NULL};
    CHECK(!g->compiled);
    if (tc_trace_begin(&tr) == TC_OK) {
        CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 1), TC_ERR_ARG, "while tracing");
        tc_trace_end(tr);
        tc_graph_free(tr);
    }
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 1));
    ct_keep(out[0]);
    CHECK(g->compiled && SAME(out[0], -1, 2));
    tc_graph_free(g);
    ct_drop();
}

/* SGD with momentum, fused: buf <- 0.9 * buf + g; p <- p - 0.1 * buf. With fusion and the
 * in-place pass the updates are computed straight into the captured tensors. */
TEST(graph_exec_fused_writebacks_in_place)
{
    int64_t s[2] = {4, 8};
    tc_tensor *p = wave(TC_F64, 2, s, 0.1), *buf = wave(TC_F64, 2, s, 0.5), *gr = wave(TC_F64, 2, s, 0.9);
    tc_tensor *p_ref = eager(TC_OP_COPY, p, NULL, NULL, P(.i = {-1}));
    tc_tensor *b_ref = eager(TC_OP_COPY, buf, NULL, NULL, P(.i = {-1}));
    tc_tensor *k09 = ct_keep(ct_from(TC_F64, 0, NULL, VALS(0.9)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vg, vp, vb, vk;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 2, s, &vg));
    CHECK_OK(tc_graph_add_external(g, p, &vp));
    CHECK_OK(tc_graph_add_external(g, buf, &vb));
    CHECK_OK(tc_graph_add_const(g, k09, &vk));
    int32_t l = op1(g, TC_OP_SUM, op2(g, TC_OP_MUL, vp, vg, NULL), P(.i = {-1})); /* reads p before the update */
    CHECK_OK(tc_graph_mark_output(g, l));
    int32_t nb = op2(g, TC_OP_ADD, op2(g, TC_OP_MUL, vb, vk, NULL), vg, P(.s = {1}));
    int32_t np = op2(g, TC_OP_SUB, vp, nb, P(.s = {0.1}));
    CHECK_OK(tc_graph_add_writeback(g, vb, nb));
    CHECK_OK(tc_graph_add_writeback(g, vp, np));
    CHECK_OK(tc_graph_compile(g, TC_PASS_FUSE | TC_PASS_INPLACE));
    CHECK(g->vals[nb].offset == -2 && g->vals[np].offset == -2);
    for (int step = 0; step < 3; step++) {
        tc_tensor *out[1] = {NULL};
        CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){gr}, 1, out, 1));
        ct_keep(out[0]);
        tc_tensor *el = eager(TC_OP_SUM, eager(TC_OP_MUL, p_ref, gr, NULL, NULL), NULL, NULL, P(.i = {-1}));
        tc_tensor *eb = eager(TC_OP_ADD, eager(TC_OP_MUL, b_ref, k09, NULL, NULL), gr, NULL, P(.s = {1}));
        tc_tensor *ep = eager(TC_OP_SUB, p_ref, eb, NULL, P(.s = {0.1}));
        CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *[]){eb}, 1, NULL, &b_ref, 1));
        CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *[]){ep}, 1, NULL, &p_ref, 1));
        CHECK(same_tensor(out[0], el));
        CHECK(same_tensor(buf, b_ref) && same_tensor(p, p_ref));
    }
    tc_graph_free(g);
    ct_drop();
}

/* A gradient made by a matmul goes straight into the captured .grad tensor (mm never reads
 * it); a matmul that reads the tensor it is written back to must not (copy at the end). */
TEST(graph_exec_matmul_writebacks)
{
    int64_t xs[2] = {8, 4}, gs[2] = {4, 4};
    tc_tensor *x = wave(TC_F32, 2, xs, 0.3), *G = wave(TC_F32, 2, gs, 0.1), *M = wave(TC_F32, 2, gs, 0.7);
    tc_tensor *M0 = eager(TC_OP_COPY, M, NULL, NULL, P(.i = {-1}));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vx, vG, vM;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, xs, &vx));
    CHECK_OK(tc_graph_add_external(g, G, &vG));
    CHECK_OK(tc_graph_add_external(g, M, &vM));
    int32_t xt = op1(g, TC_OP_TRANSPOSE, vx, P(.i = {0, 1}));
    int32_t grad = op2(g, TC_OP_MM, xt, vx, NULL); /* x^T x */
    int32_t mm2 = op2(g, TC_OP_MM, vM, vM, NULL);  /* M <- M @ M reads M while writing */
    CHECK_OK(tc_graph_add_writeback(g, vG, grad));
    CHECK_OK(tc_graph_add_writeback(g, vM, mm2));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_SUM, grad, P(.i = {-1}))));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    CHECK(g->vals[grad].offset == -2 && g->vals[mm2].offset >= 0);
    tc_tensor *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *eg = eager(TC_OP_MM, ct_keep(ct_transposed(x, 0, 1)), x, NULL, NULL);
    CHECK(same_tensor(G, eg) && same_tensor(M, eager(TC_OP_MM, M0, M0, NULL, NULL)));
    CHECK(same_tensor(out[0], eager(TC_OP_SUM, eg, NULL, NULL, P(.i = {-1}))));
    tc_graph_free(g);
    ct_drop();
}

/* A node that can fail on data (an index) after the update: the update is not made in
 * place, so a failed run leaves the captured tensor as it was. */
TEST(graph_exec_failed_run_leaves_captured_tensors)
{
    tc_tensor *p = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)));
    tc_tensor *ok = ct_keep(ct_from(TC_I64, 1, SZ(1), VALS(2))), *bad = ct_keep(ct_from(TC_I64, 1, SZ(1), VALS(9)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t vp, vi;
    CHECK_OK(tc_graph_add_external(g, p, &vp));
    CHECK_OK(tc_graph_add_input(g, TC_I64, 1, SZ(1), &vi));
    int32_t np = op1(g, TC_OP_NEG, vp, NULL);
    CHECK_OK(tc_graph_add_writeback(g, vp, np));
    CHECK_OK(tc_graph_mark_output(g, op2(g, TC_OP_INDEX_SELECT, np, vi, P(.i = {0}))));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    CHECK(g->vals[np].offset != -2);
    tc_tensor *out[1] = {NULL};
    CHECK_ERR(tc_graph_run(g, (const tc_tensor *[]){bad}, 1, out, 1), TC_ERR_INDEX, "out of range");
    CHECK(out[0] == NULL && SAME(p, 1, 2, 3));
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){ok}, 1, out, 1));
    ct_keep(out[0]);
    CHECK(SAME(out[0], -3) && SAME(p, -1, -2, -3));
    tc_graph_free(g);
    ct_drop();
}

/* A result the caller has released is reused by the next run (same memory, right values);
 * one the caller still holds is never overwritten. */
TEST(graph_exec_reuses_released_results_only)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int64_t n[1] = {1000};
    int32_t x, y;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 1, n, &x));
    CHECK_OK(tc_graph_add_op(g, TC_OP_TANH, &x, 1, NULL, &y));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    tc_tensor *a = ct_arange(TC_F32, 1, n), *r1 = NULL, *r2 = NULL, *r3 = NULL;
    const tc_tensor *in[1] = {a};
    CHECK_OK(tc_graph_run(g, in, 1, &r1, 1));
    CHECK_OK(tc_graph_run(g, in, 1, &r2, 1));
    CHECK(r1->storage != r2->storage); /* r1 still held: not reused */
    double first = ct_at(r1, 3);
    CHECK_NEAR(first, tanh(3.0), 1e-6);
    void *mem = r2->storage->data;
    tc_tensor_release(r2);
    CHECK_OK(tc_graph_run(g, in, 1, &r3, 1));
    CHECK(r3->storage->data == mem); /* released: reused */
    CHECK_NEAR(ct_at(r3, 7), tanh(7.0), 1e-6);
    CHECK_NEAR(ct_at(r1, 3), first, 0);
    tc_tensor_release(r1), tc_tensor_release(r3), tc_tensor_release(a);
    tc_graph_free(g);
}
