/* test_grad_second.c -- second derivatives through the engine: every rule is written with
 * recorded ops, so differentiating a gradient (create_graph) must match finite differences
 * of the first-order gradients. */
#include "ctest.h"
#include "gradcheck.h"

static uint64_t seed = 7;

static tc_tensor *R(int nd, const int64_t *sz, double lo, double hi) { return ct_keep(gc_rand(TC_F64, nd, sz, lo, hi, seed++)); }
static tc_tensor *V(tc_dtype dt, int nd, const int64_t *sz, const double *v) { return ct_keep(ct_from(dt, nd, sz, v)); }

/* ---- second derivatives through the engine ------------------------------------------------
 * gg_check: with h(x) = d/dx sum(op(x) * w) (the rules, run by tc_autograd_grad), checks
 * d/dx sum_i <h_i(x), v_i> computed by the engine with create_graph (the rules recorded
 * as ops, then differentiated) against central differences of the same first-order
 * gradients. Any rule written with something other than recorded ops fails here. */

static tc_tensor *alias_leaf(tc_tensor *t, bool grad)
{
    tc_tensor *a = NULL;
    if (tc_tensor_detach(t, &a)) return NULL;
    if (grad && tc_tensor_set_requires_grad(a, 1)) {
        tc_tensor_release(a);
        return NULL;
    }
    return a;
}

/* S(x) = sum_i <h_i, v_i>, first-order only (no create_graph); NAN on failure. */
static double gg_S(tc_op op, tc_tensor **cl, int nin, const bool *wrt, const tc_params *p, tc_tensor *w,
                   tc_tensor *const *v)
{
    tc_tensor *lv[8] = {0}, *res[2] = {0}, *h[8] = {0};
    const tc_tensor *ins[8];
    int nw = 0;
    double S = NAN;
    for (int i = 0; i < nin; i++) {
        if (!(lv[i] = alias_leaf(cl[i], wrt[i]))) goto done;
        if (wrt[i]) ins[nw++] = lv[i];
    }
    if (tc_op_run(op, (const tc_tensor *const *)lv, nin, p, res, tc_op_info(op)->nout)) goto done;
    const tc_tensor *outs[1] = {res[0]}, *gos[1] = {w};
    if (tc_autograd_grad(outs, gos, 1, ins, nw, 0, 0, 1, h)) goto done;
    S = 0;
    for (int k = 0, j = 0; k < nin; k++) {
        if (!wrt[k]) continue;
        if (h[j])
            for (int64_t e = 0; e < tc_tensor_numel(h[j]); e++) S += ct_at(h[j], e) * ct_at(v[k], e);
        j++;
    }
done:
    for (int i = 0; i < 8; i++) {
        if (lv[i]) tc_tensor_release(lv[i]);
        if (h[i]) tc_tensor_release(h[i]);
    }
    for (int o = 0; o < 2; o++)
        if (res[o]) tc_tensor_release(res[o]);
    return S;
}

static int gg_check(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p)
{
    const char *name = tc_op_info(op)->name;
    tc_tensor *cl[8] = {0}, *v[8] = {0}, *lv[8] = {0}, *res[2] = {0}, *h[8] = {0}, *g2[8] = {0}, *w = NULL;
    tc_tensor *S = NULL, *tmp[16] = {0};
    int ntmp = 0, bad = 0, nw = 0;
    bool wrt[8];
    const tc_tensor *ins[8];
    for (int i = 0; i < nin; i++) {
        tc_params cp = {.i = {-1}};
        if (tc_op_run(TC_OP_COPY, &in[i], 1, &cp, &cl[i], 1)) goto fail;
        wrt[i] = tc_dtype_is_float((tc_dtype)in[i]->dtype);
        if (wrt[i]) v[i] = gc_rand(TC_F64, cl[i]->ndim, cl[i]->size, -1, 1, 500 + (uint64_t)i);
        if (!(lv[i] = alias_leaf(cl[i], wrt[i]))) goto fail;
        if (wrt[i]) ins[nw++] = lv[i];
    }
    if (tc_op_run(op, (const tc_tensor *const *)lv, nin, p, res, tc_op_info(op)->nout)) goto fail;
    w = gc_rand(TC_F64, res[0]->ndim, res[0]->size, -1, 1, 99);
    const tc_tensor *outs[1] = {res[0]}, *gos[1] = {w};
    if (tc_autograd_grad(outs, gos, 1, ins, nw, 1, 1, 1, h)) goto fail;
    /* S = sum_j sum(h_j * v_j), recorded */
    for (int k = 0, j = 0; k < nin; k++) {
        if (!wrt[k]) continue;
        if (h[j]) {
            tc_tensor *prod = NULL, *s = NULL;
            if (ct_run1(TC_OP_MUL, h[j], v[k], NULL, NULL, &prod)) goto fail;
            tmp[ntmp++] = prod;
            if (ct_run1(TC_OP_SUM, prod, NULL, NULL, &(tc_params){.i = {-1, 0}}, &s)) goto fail;
            tmp[ntmp++] = s;
            if (S) {
                tc_tensor *t2 = NULL;
                if (ct_run1(TC_OP_ADD, S, s, NULL, &(tc_params){.s = {1}}, &t2)) goto fail;
                tmp[ntmp++] = t2;
                S = t2;
            } else {
                S = s;
            }
        }
        j++;
    }
    if (S && tc_tensor_requires_grad(S)) {
        const tc_tensor *r[1] = {S};
        if (tc_autograd_grad(r, NULL, 1, ins, nw, 0, 0, 1, g2)) goto fail;
    }
    double eps = 1e-6;
    for (int k = 0, j = 0; k < nin && !bad; k++) {
        if (!wrt[k]) continue;
        for (int64_t e = 0; e < tc_tensor_numel(cl[k]) && !bad; e++) {
            double x0 = ct_at(cl[k], e);
            int64_t idx[TC_MAX_DIMS] = {0}, r = e;
            for (int d = cl[k]->ndim - 1; d >= 0; d--) idx[d] = r % cl[k]->size[d], r /= cl[k]->size[d];
            tc_tensor_set_value(cl[k], idx, x0 + eps);
            double sp = gg_S(op, cl, nin, wrt, p, w, v);
            tc_tensor_set_value(cl[k], idx, x0 - eps);
            double sm = gg_S(op, cl, nin, wrt, p, w, v);
            tc_tensor_set_value(cl[k], idx, x0);
            double num = (sp - sm) / (2 * eps), ana = g2[j] ? ct_at(g2[j], e) : 0;
            if (!(fabs(ana - num) <= 1e-5 + 1e-4 * fabs(num))) {
                printf("    gradgrad %s: input %d element %lld: engine gives %.10g, finite difference %.10g\n", name,
                       k + 1, (long long)e, ana, num);
                bad = 1;
            }
        }
        j++;
    }
    goto done;
fail:
    printf("    gradgrad %s: %s\n", name, tc_last_error());
    bad = 1;
done:
    for (int i = 0; i < 8; i++) {
        tc_tensor *all[] = {cl[i], v[i], lv[i], h[i], g2[i]};
        for (int k = 0; k < 5; k++)
            if (all[k]) tc_tensor_release(all[k]);
    }
    for (int i = 0; i < ntmp; i++) tc_tensor_release(tmp[i]);
    for (int o = 0; o < 2; o++)
        if (res[o]) tc_tensor_release(res[o]);
    if (w) tc_tensor_release(w);
    return bad;
}

#define GG(op, p, ...)                                                                      \
    do {                                                                                    \
        const tc_tensor *in_[] = {__VA_ARGS__};                                             \
        if (gg_check(TC_OP_##op, in_, (int)(sizeof in_ / sizeof *in_), (p))) {              \
            printf("  FAIL %s:%d: second derivative of %s\n", __FILE__, __LINE__, #op);     \
            *ctest_failed = 1;                                                              \
        }                                                                                   \
    } while (0)

TEST(grad_rules_second_derivatives)
{
    tc_tensor *x = R(2, SZ(3, 4), -1.5, 1.5), *y = R(2, SZ(3, 4), -1.5, 1.5), *pos = R(2, SZ(3, 4), 0.5, 2);
    tc_tensor *row = R(1, SZ(4), 0.5, 2), *a = R(2, SZ(3, 5), -1, 1), *b = R(2, SZ(5, 4), -1, 1);
    GG(TANH, NULL, x);
    GG(MUL, NULL, x, y);
    GG(MUL, NULL, x, row);
    GG(MM, NULL, a, b);
    GG(ADDMM, P(.s = {0.5, 2}), row, a, b);
    GG(SIGMOID, NULL, x);
    GG(EXP, NULL, x);
    GG(LOG, NULL, pos);
    GG(SQRT, NULL, pos);
    GG(RSQRT, NULL, pos);
    GG(CINV, NULL, pos);
    GG(SIN, NULL, x);
    GG(ERF, NULL, x);
    GG(GELU, NULL, x);
    GG(GELU_TANH, NULL, x);
    GG(GELU_BACKWARD, NULL, y, x);
    GG(GELU_TANH_BACKWARD, NULL, y, x);
    GG(GELU_TANH_BACKWARD, NULL, row, x);
    GG(SILU, NULL, x);
    GG(SILU_BACKWARD, NULL, y, x);
    GG(SILU_BACKWARD, NULL, row, x);
    GG(DIV, NULL, x, pos);
    GG(POW, NULL, pos, y);
    GG(ATAN2, NULL, x, pos);
    GG(ADDCDIV, P(.s = {0.5}), x, y, pos);
    GG(LERP, NULL, x, y, pos);
    ct_drop();
}

/* softmax and log_softmax (whose rules run the backward ops), and the backward ops on (g, y)
 * (whose rules compose ops, one of them softmax_backward itself) */
TEST(grad_rules_second_derivatives_softmax)
{
    tc_tensor *x = R(2, SZ(3, 4), -1.5, 1.5), *g = R(2, SZ(3, 4), -1, 1);
    tc_tensor *y = R(2, SZ(3, 4), 0.1, 0.9), *ly = R(2, SZ(3, 4), -3, -0.2);
    for (int d = -1; d < 2; d++) {
        GG(SOFTMAX, P(.i = {d}), x);
        GG(LOG_SOFTMAX, P(.i = {d}), x);
        GG(SOFTMAX_BACKWARD, P(.i = {d}), g, y);
        GG(LOG_SOFTMAX_BACKWARD, P(.i = {d}), g, ly);
    }
    GG(SOFTMAX, P(.i = {1, 1}), x); /* causal: the masked entries' y is 0, so are their gradients */
    GG(SOFTMAX_BACKWARD, P(.i = {1, 1}), g, y); /* causal: y free, its left-out part unread */
    /* fused attention: under create_graph its rule composes products and the softmax ops */
    tc_tensor *q = R(3, SZ(1, 3, 2), -1, 1), *k = R(3, SZ(1, 4, 2), -1, 1), *v = R(3, SZ(1, 4, 3), -1, 1);
    GG(ATTENTION, P(.s = {0.7}), q, k, v);
    GG(ATTENTION, P(.s = {0.7}, .i = {1}), q, k, v);
    /* layer norm: under create_graph its rule recomputes the row statistics with ops */
    tc_tensor *lx = R(2, SZ(3, 4), -2, 2), *lw = R(1, SZ(4), 0.5, 1.5), *lb = R(1, SZ(4), -1, 1);
    GG(LAYER_NORM, P(.s = {1e-5}, .i = {1}), lx, lw, lb);
    ct_drop();
}

TEST(grad_rules_second_derivatives_reduce_shape)
{
    tc_tensor *x = R(2, SZ(3, 4), -1.5, 1.5), *pos = R(2, SZ(3, 4), 0.5, 2);
    tc_tensor *z = V(TC_F64, 2, SZ(2, 3), VALS(0, 1.3, -0.7, 1.1, 0, 0.9));
    GG(SUM, P(.i = {1, 0}), x);
    GG(MEAN, P(.i = {-1, 0}), x);
    GG(VAR, P(.i = {0, 1, 1}), x);
    GG(STD, P(.i = {1, 0, 0}), x);
    GG(NORM, P(.s = {2}, .i = {-1, 0}), x);
    GG(NORM, P(.s = {3}, .i = {1, 0}), x);
    GG(PROD, P(.i = {1, 0}), pos);
    GG(PROD, P(.i = {1, 0}), z);
    GG(CUMPROD, P(.i = {1}), pos);
    GG(CUMSUM, P(.i = {0}), x);
    GG(MAX, P(.i = {1, 0}), x);
    GG(SORT, P(.i = {1, 0}), x);
    GG(NARROW, P(.i = {1, 1, 2}), x);
    GG(SELECT, P(.i = {0, 2}), x);
    GG(INDEX_SELECT, P(.i = {0}), x, V(TC_I64, 1, SZ(2), VALS(2, 0)));
    GG(GATHER, P(.i = {1}), x, V(TC_I64, 2, SZ(3, 2), VALS(0, 3, 1, 1, 2, 0)));
    GG(CAT, P(.i = {0}), x, pos);
    GG(UNFOLD, P(.i = {1, 2, 1}), x);
    GG(CLAMP, P(.s = {-1, 1}), x);
    ct_drop();
}
