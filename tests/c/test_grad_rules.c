/* test_grad_rules.c -- the gradient rules: every DIFF op has one, each matches central
 * finite differences in float64 (gradcheck.h) for every params variant and broadcasting
 * case, bad gradients are refused cleanly, and (through the engine) second derivatives. */
#include "ctest.h"
#include "gradcheck.h"
#include "autograd/grad.h"

/* ---- test tensors (kept in ctest's pool, released by ct_drop at the end of each test) ---- */

static uint64_t seed = 1;

/* Uniform f64 values in [lo, hi). */
static tc_tensor *R(int nd, const int64_t *sz, double lo, double hi) { return ct_keep(gc_rand(TC_F64, nd, sz, lo, hi, seed++)); }
static tc_tensor *V(tc_dtype dt, int nd, const int64_t *sz, const double *v) { return ct_keep(ct_from(dt, nd, sz, v)); }
static tc_tensor *T(const tc_tensor *t, int a, int b) { return ct_keep(ct_transposed(t, a, b)); }

/* ---- coverage ---------------------------------------------------------------------------------- */

TEST(grad_rules_every_diff_op_has_a_rule)
{
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        bool diff = (info->flags & TC_OPF_DIFF) != 0, has = tc_grad_rule_of((tc_op)op) != NULL;
        if (diff != has) {
            printf("  FAIL: op %s is %sdifferentiable but %s a gradient rule\n", info->name, diff ? "" : "not ",
                   has ? "has" : "has no");
            *ctest_failed = 1;
        }
    }
    CHECK(tc_grad_rule_of(TC_OP_COUNT) == NULL);
    CHECK(tc_grad_rule_of((tc_op)-1) == NULL);
}

/* ---- elementwise ---------------------------------------------------------------------------- */

TEST(grad_rules_arith_broadcast)
{
    tc_tensor *a = R(2, SZ(3, 4), -1, 1), *b = R(2, SZ(3, 4), 0.5, 2), *row = R(1, SZ(4), 0.5, 2);
    tc_tensor *col = R(2, SZ(3, 1), 0.5, 2), *s = R(0, NULL, 0.5, 2), *at = T(R(2, SZ(4, 3), -1, 1), 0, 1);
    GC(ADD, P(.s = {1}), a, b);
    GC(ADD, P(.s = {-2.5}), a, row);
    GC(ADD, P(.s = {0.5}), col, row); /* both broadcast */
    GC(SUB, P(.s = {1}), a, s);
    GC(SUB, P(.s = {3}), row, a);
    GC(MUL, NULL, a, b);
    GC(MUL, NULL, at, col);
    GC(MUL, NULL, s, a);
    GC(DIV, NULL, a, b);
    GC(DIV, NULL, a, row);
    GC(DIV, NULL, col, b);
    GC(NEG, NULL, at);
    GC(EXP, NULL, a);
    ct_drop();
}

/* ---- the basic set the engine starts from ------------------------------------------------- */

TEST(grad_rules_basic_reduce_linalg_views)
{
    tc_tensor *x = R(3, SZ(2, 3, 4), -1, 1), *m = R(2, SZ(3, 4), -1, 1);
    for (int keep = 0; keep < 2; keep++) {
        GC(SUM, P(.i = {-1, keep}), x);
        GC(SUM, P(.i = {0, keep}), x);
        GC(SUM, P(.i = {2, keep}), x);
        GC(SUM, P(.i = {-2, keep}), x); /* second-to-last */
        GC(MEAN, P(.i = {-1, keep}), x);
        GC(MEAN, P(.i = {1, keep}), x);
        GC(MEAN, P(.i = {-3, keep}), x);
    }
    GC(SUM, P(.i = {-1, 0}), T(m, 0, 1));
    tc_tensor *a = R(2, SZ(3, 5), -1, 1), *b = R(2, SZ(5, 2), -1, 1), *c = R(2, SZ(3, 2), -1, 1);
    GC(MM, NULL, a, b);
    GC(MM, NULL, T(R(2, SZ(5, 3), -1, 1), 0, 1), T(R(2, SZ(2, 5), -1, 1), 0, 1));
    GC(ADDMM, P(.s = {1, 1}), c, a, b);
    GC(ADDMM, P(.s = {0.5, -2}), c, a, b);
    GC(ADDMM, P(.s = {0, 3}), c, a, b);
    GC(ADDMM, P(.s = {2, 1}), R(1, SZ(2), -1, 1), a, b); /* bias broadcast over rows */
    GC(VIEW, P(.nshape = 2, .shape = {4, 6}), x);
    GC(VIEW, P(.nshape = 1, .shape = {-1}), x);
    GC(EXPAND, P(.nshape = 3, .shape = {2, 3, 4}), R(2, SZ(3, 1), -1, 1));
    GC(EXPAND, P(.nshape = 2, .shape = {3, -1}), R(1, SZ(4), -1, 1));
    GC(TRANSPOSE, P(.i = {0, 2}), x);
    GC(TRANSPOSE, P(.i = {-1, 0}), m);
    GC(NARROW, P(.i = {1, 1, 2}), x);
    GC(NARROW, P(.i = {-1, 0, 3}), x);
    GC(NARROW, P(.i = {0, 0, 2}), x); /* the whole dim */
    GC(COPY, P(.i = {-1}), T(m, 0, 1));
    ct_drop();
}

/* copy across dtypes: the gradient comes back converted to the input's dtype. */
TEST(grad_rules_copy_dtypes)
{
    tc_tensor *x = R(2, SZ(2, 3), -1, 1), *g = ct_keep(gc_rand(TC_F32, 2, SZ(2, 3), -1, 1, 7)), *gin[1] = {NULL};
    const tc_tensor *in[1] = {x}, *gout[1] = {g};
    CHECK_OK(gc_run_rule(TC_OP_COPY, in, 1, P(.i = {TC_F32}), gout, NULL, gin));
    CHECK(gin[0] && gin[0]->dtype == TC_F64 && ct_shape_is(gin[0], 2, SZ(2, 3)));
    if (gin[0]) {
        CHECK_NEAR(ct_at(gin[0], 4), ct_at(g, 4), 0);
        tc_tensor_release(gin[0]);
    }
    ct_drop();
}

/* The checker itself must be able to fail: sign's rule says 0, but at x = 0 the central
 * difference sees the jump. */
TEST(grad_rules_gradcheck_detects_a_wrong_gradient)
{
    tc_tensor *x = V(TC_F64, 1, SZ(3), VALS(-1, 0, 2));
    const tc_tensor *in[1] = {x};
    gc_opts q = {.quiet = true};
    CHECK(gc_check(TC_OP_SIGN, in, 1, NULL, &q) == 1);
    tc_tensor *w = V(TC_F64, 1, SZ(2), VALS(0.5, 1)); /* floor jumps at 1 */
    in[0] = w;
    CHECK(gc_check(TC_OP_FLOOR, in, 1, NULL, &q) == 1);
    tc_tensor *y = V(TC_F64, 1, SZ(3), VALS(-1, 0.5, 2));
    in[0] = y;
    CHECK(gc_check(TC_OP_SIGN, in, 1, NULL, &q) == 0);
    ct_drop();
}

/* ---- every elementwise rule ------------------------------------------------------------- */

TEST(grad_rules_unary)
{
    tc_tensor *x = R(2, SZ(3, 4), -2, 2), *pos = R(2, SZ(3, 4), 0.3, 3), *unit = R(2, SZ(3, 4), -0.8, 0.8);
    tc_tensor *xt = T(R(2, SZ(4, 3), -2, 2), 0, 1);
    /* away from 0 for abs, away from jumps for the rounding family */
    tc_tensor *nz = V(TC_F64, 2, SZ(2, 3), VALS(-1.7, -0.3, 0.2, 0.9, 1.3, 2.6));
    GC(NEG, NULL, x);
    GC(ABS, NULL, nz);
    GC(SIGN, NULL, nz);
    GC(SQUARE, NULL, xt);
    GC(EXP, NULL, xt);
    GC(EXPM1, NULL, x);
    GC(LOG, NULL, pos);
    GC(LOG1P, NULL, pos);
    GC(LOG2, NULL, pos);
    GC(LOG10, NULL, pos);
    GC(SQRT, NULL, pos);
    GC(RSQRT, NULL, pos);
    GC(CINV, NULL, pos);
    GC(SIN, NULL, x);
    GC(COS, NULL, xt);
    GC(TAN, NULL, unit);
    GC(ASIN, NULL, unit);
    GC(ACOS, NULL, unit);
    GC(ATAN, NULL, x);
    GC(SINH, NULL, x);
    GC(COSH, NULL, x);
    GC(TANH, NULL, xt);
    GC(SIGMOID, NULL, x);
    GC(ERF, NULL, x);
    tc_tensor *wide = R(2, SZ(3, 4), -4, 4); /* gelu: the curved part and both tails */
    GC(GELU, NULL, wide);
    GC(GELU, NULL, xt);
    GC(GELU_TANH, NULL, wide);
    GC(GELU_TANH, NULL, xt);
    GC(SILU, NULL, wide);
    GC(SILU, NULL, xt);
    GC(CEIL, NULL, nz);
    GC(FLOOR, NULL, nz);
    GC(ROUND, NULL, nz);
    GC(TRUNC, NULL, nz);
    GC(FRAC, NULL, nz);
    GC(CLAMP, P(.s = {-1, 1}), nz);
    GC(CLAMP, P(.s = {-INFINITY, 0.5}), nz);
    GC(CLAMP, P(.s = {0, INFINITY}), nz);
    ct_drop();
}

/* clamp passes the gradient where lo <= x <= hi, the bounds included (PyTorch). */
TEST(grad_rules_clamp_bounds_and_abs_at_zero)
{
    tc_tensor *x = V(TC_F64, 1, SZ(5), VALS(-2, -1, 0, 1, 2)), *g = V(TC_F64, 1, SZ(5), VALS(1, 1, 1, 1, 1));
    tc_tensor *gin[1] = {NULL};
    const tc_tensor *in[1] = {x}, *gout[1] = {g};
    CHECK_OK(gc_run_rule(TC_OP_CLAMP, in, 1, P(.s = {-1, 1}), gout, NULL, gin));
    CHECK(SAME(gin[0], 0, 1, 1, 1, 0));
    tc_tensor_release(gin[0]);
    CHECK_OK(gc_run_rule(TC_OP_ABS, in, 1, NULL, gout, NULL, gin));
    CHECK(SAME(gin[0], -1, -1, 0, 1, 1));
    tc_tensor_release(gin[0]);
    ct_drop();
}

TEST(grad_rules_binary)
{
    tc_tensor *a = R(2, SZ(3, 4), 0.5, 2), *b = R(2, SZ(3, 4), 0.5, 2), *row = R(1, SZ(4), 0.5, 2);
    tc_tensor *x = R(2, SZ(3, 4), -2, 2), *s = R(0, NULL, 0.5, 2);
    GC(POW, NULL, a, x);
    GC(POW, NULL, a, row);
    GC(POW, NULL, s, x);
    GC(ATAN2, NULL, x, b);
    GC(ATAN2, NULL, row, x);
    /* the activations' backward ops (g, x): plain, x broadcast, g broadcast */
    tc_tensor *g = R(2, SZ(3, 4), -1, 1), *xrow = R(1, SZ(4), -3, 3);
    const tc_op act_back[] = {TC_OP_GELU_BACKWARD, TC_OP_GELU_TANH_BACKWARD, TC_OP_SILU_BACKWARD};
    const tc_tensor *act_in[3][2] = {{g, x}, {g, xrow}, {row, x}};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (gc_check(act_back[i], act_in[j], 2, NULL, NULL)) {
                printf("  FAIL: gradient of %s, operand layout %d\n", tc_op_info(act_back[i])->name, j);
                *ctest_failed = 1;
            }
    /* fmod/remainder away from their jumps: a / b not near an integer */
    tc_tensor *fa = V(TC_F64, 2, SZ(2, 3), VALS(5.3, -5.3, 2.2, -7.9, 3.4, 0.6));
    tc_tensor *fb = V(TC_F64, 2, SZ(2, 3), VALS(2, 2, -1.5, 3, -2.5, 0.25));
    GC(FMOD, NULL, fa, fb);
    GC(REMAINDER, NULL, fa, fb);
    GC(FMOD, NULL, fa, V(TC_F64, 1, SZ(3), VALS(2.5, -1.5, 3.1)));
    tc_tensor *u = V(TC_F64, 2, SZ(2, 3), VALS(1, -2, 3, 0.5, 4, -1)), *v = V(TC_F64, 2, SZ(2, 3), VALS(2, -3, 1, 0.1, 5, -2));
    GC(MAXIMUM, NULL, u, v);
    GC(MINIMUM, NULL, u, v);
    GC(MAXIMUM, NULL, u, V(TC_F64, 1, SZ(3), VALS(0.7, 0.2, 2.2)));
    GC(MINIMUM, NULL, V(TC_F64, 2, SZ(2, 1), VALS(0.3, 1.1)), v);
    ct_drop();
}

/* Kinks PyTorch defines: pow's exponent gradient at base 0, cmax/cmin ties split in half. */
TEST(grad_rules_binary_conventions)
{
    tc_tensor *gin[2] = {NULL, NULL}, *g = V(TC_F64, 1, SZ(3), VALS(1, 1, 1));
    const tc_tensor *gout[1] = {g};
    tc_tensor *base = V(TC_F64, 1, SZ(3), VALS(0, 0, 2)), *ex = V(TC_F64, 1, SZ(3), VALS(2, 0, 0));
    const tc_tensor *pin[2] = {base, ex};
    CHECK_OK(gc_run_rule(TC_OP_POW, pin, 2, NULL, gout, NULL, gin));
    /* d/dx x^2 at 0 = 0; d/dx x^0 = 0 (exponent 0); d/dx 2^0 = 0 */
    CHECK(SAME(gin[0], 0, 0, 0));
    /* d/dy 0^2 = 0, d/dy 0^0 = 0 (masked), d/dy 2^y at 0 = log 2 */
    CHECK(ct_near(ct_at(gin[1], 0), 0, 0) && ct_near(ct_at(gin[1], 1), 0, 0) && ct_near(ct_at(gin[1], 2), log(2), 1e-12));
    tc_g_release_all(gin, 2);
    tc_tensor *a = V(TC_F64, 1, SZ(3), VALS(1, 2, 3)), *b = V(TC_F64, 1, SZ(3), VALS(1, 5, 0));
    const tc_tensor *min[2] = {a, b};
    CHECK_OK(gc_run_rule(TC_OP_MAXIMUM, min, 2, NULL, gout, NULL, gin));
    CHECK(SAME(gin[0], 0.5, 0, 1));
    CHECK(SAME(gin[1], 0.5, 1, 0));
    tc_g_release_all(gin, 2);
    CHECK_OK(gc_run_rule(TC_OP_MINIMUM, min, 2, NULL, gout, NULL, gin));
    CHECK(SAME(gin[0], 0.5, 1, 0));
    CHECK(SAME(gin[1], 0.5, 0, 1));
    tc_g_release_all(gin, 2);
    ct_drop();
}

TEST(grad_rules_ternary_copy_where)
{
    tc_tensor *a = R(2, SZ(3, 4), -1, 1), *b = R(2, SZ(3, 4), -1, 1), *c = R(2, SZ(3, 4), 0.5, 2);
    tc_tensor *row = R(1, SZ(4), 0.5, 2), *col = R(2, SZ(3, 1), -1, 1);
    GC(ADDCMUL, P(.s = {1}), a, b, c);
    GC(ADDCMUL, P(.s = {-0.7}), col, row, b);
    GC(ADDCDIV, P(.s = {1}), a, b, c);
    GC(ADDCDIV, P(.s = {2.5}), a, col, row);
    GC(LERP, NULL, a, b, c);
    GC(LERP, NULL, a, col, row);
    GC(COPY, P(.i = {-1}), a);
    tc_tensor *mask = V(TC_U8, 2, SZ(3, 1), VALS(1, 0, 1));
    GC(WHERE, NULL, mask, a, b);
    GC(WHERE, NULL, mask, row, T(R(2, SZ(4, 3), -1, 1), 0, 1));
    GC(WHERE, NULL, V(TC_BOOL, 1, SZ(4), VALS(0, 1, 1, 0)), a, R(0, NULL, -1, 1));
    ct_drop();
}

/* ---- reductions, scans, sorting ------------------------------------------------------------- */

TEST(grad_rules_reductions)
{
    tc_tensor *x = R(3, SZ(2, 3, 4), -1, 1), *pos = R(3, SZ(2, 3, 4), 0.5, 1.5), *s = R(0, NULL, 0.5, 2);
    int64_t dims[] = {-1, 0, 1, 2, -2, -3};
    for (int keep = 0; keep < 2; keep++)
        for (int k = 0; k < 6; k++) {
            int64_t d = dims[k];
            GC(PROD, P(.i = {d, keep}), pos);
            GC(VAR, P(.i = {d, keep, 1}), x);
            GC(VAR, P(.i = {d, keep, 0}), x);
            GC(STD, P(.i = {d, keep, 1}), x);
            GC(STD, P(.i = {d, keep, 0}), x);
            GC(NORM, P(.s = {2}, .i = {d, keep}), x);
        }
    tc_tensor *xt = T(x, 0, 2);
    double ps[] = {1, 2, 3, 0.5, 1.5, INFINITY, -INFINITY, 0};
    for (int k = 0; k < 8; k++) {
        GC(NORM, P(.s = {ps[k]}, .i = {-1, 0}), x);
        GC(NORM, P(.s = {ps[k]}, .i = {1, 1}), xt);
        GC(NORM, P(.s = {ps[k]}, .i = {-2, 0}), x);
    }
    GC(SUM, P(.i = {-1, 0}), s);
    GC(SUM, P(.i = {0, 0}), s);
    GC(MEAN, P(.i = {0, 1}), s);
    GC(PROD, P(.i = {-1, 0}), s);
    GC(PROD, P(.i = {1, 0}), R(2, SZ(3, 1), 0.5, 2)); /* a size-1 dim */
    GC(VAR, P(.i = {-1, 0, 1}), xt);
    ct_drop();
}

/* prod and cumprod with zeros in the input: exact, no division by zero. */
TEST(grad_rules_prod_cumprod_zeros)
{
    tc_tensor *one0 = V(TC_F64, 2, SZ(2, 4), VALS(1.5, 0, 2, -0.5, 0.7, 1.2, -1.1, 0.9));
    tc_tensor *two0 = V(TC_F64, 2, SZ(2, 4), VALS(0, 1.3, 0, 2, -0.5, 0, 0.8, 0));
    for (int keep = 0; keep < 2; keep++) {
        GC(PROD, P(.i = {-1, keep}), one0);
        GC(PROD, P(.i = {1, keep}), one0);
        GC(PROD, P(.i = {0, keep}), two0);
        GC(PROD, P(.i = {1, keep}), two0);
        GC(PROD, P(.i = {-1, keep}), two0);
    }
    GC(CUMPROD, P(.i = {1}), one0);
    GC(CUMPROD, P(.i = {-1}), two0);
    GC(CUMPROD, P(.i = {0}), two0);
    GC(CUMPROD, P(.i = {0}), T(one0, 0, 1));
    GC(CUMPROD, P(.i = {1}), R(2, SZ(3, 5), -1.5, 1.5));
    GC(CUMSUM, P(.i = {0}), R(2, SZ(3, 5), -1, 1));
    GC(CUMSUM, P(.i = {-1}), T(R(2, SZ(5, 3), -1, 1), 0, 1));
    GC(CUMSUM, P(.i = {0}), R(0, NULL, -1, 1));
    GC(CUMPROD, P(.i = {-1}), R(0, NULL, -1, 1));
    /* the value itself: d/dx of prod(0, 2, 3) is (6, 0, 0) */
    tc_tensor *x = V(TC_F64, 1, SZ(3), VALS(0, 2, 3)), *g = V(TC_F64, 0, NULL, VALS(1)), *gin[1] = {NULL};
    const tc_tensor *in[1] = {x}, *gout[1] = {g};
    CHECK_OK(gc_run_rule(TC_OP_PROD, in, 1, P(.i = {-1, 0}), gout, NULL, gin));
    CHECK(SAME(gin[0], 6, 0, 0));
    tc_g_release_all(gin, 1);
    ct_drop();
}

TEST(grad_rules_max_min_sort)
{
    /* distinct values, so small steps never reorder them */
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = ((i * 7) % 24) * 0.1 - 1.1;
    tc_tensor *x = V(TC_F64, 3, SZ(2, 3, 4), v), *xt = T(x, 0, 2);
    for (int keep = 0; keep < 2; keep++)
        for (int d = -3; d < 3; d++) {
            if (d == -1) continue; /* -1: every element */
            GC(MAX, P(.i = {d, keep}), x);
            GC(MIN, P(.i = {d, keep}), xt);
            GC(MEDIAN, P(.i = {d < -1 ? d + 1 : d, keep}), x); /* sort family: -1 is the last dim */
            GC(KTHVALUE, P(.i = {d < -1 ? d + 1 : d, 2, keep}), xt);
        }
    GC(MAX, P(.i = {-1, 0}), x);
    GC(MIN, P(.i = {-1, 1}), xt);
    GC(MEDIAN, P(.i = {-1, 0}), x);
    for (int d = 0; d < 3; d++) {
        GC(SORT, P(.i = {d, 0}), x);
        GC(SORT, P(.i = {d, 1}), xt);
        GC(TOPK, P(.i = {d, 2, 1, 1}), x);
        GC(TOPK, P(.i = {d, 1, 0, 0}), xt);
    }
    GC(SORT, P(.i = {-1, 0}), x);
    GC(TOPK, P(.i = {-2, 2, 0, 1}), x);
    GC(SORT, P(.i = {0, 0}), R(0, NULL, -1, 1));
    GC(MEDIAN, P(.i = {0, 0}), R(0, NULL, -1, 1));
    ct_drop();
}

/* max/min over every element split the gradient evenly among ties (PyTorch 1.13);
 * with a dim it goes to the returned index only. */
TEST(grad_rules_max_ties)
{
    tc_tensor *x = V(TC_F64, 2, SZ(2, 3), VALS(3, 1, 3, 0, 3, 2)), *g = V(TC_F64, 0, NULL, VALS(6)), *gin[1] = {NULL};
    const tc_tensor *in[1] = {x}, *gout[2] = {g, NULL};
    CHECK_OK(gc_run_rule(TC_OP_MAX, in, 1, P(.i = {-1, 0}), gout, NULL, gin));
    CHECK(SAME(gin[0], 2, 0, 2, 0, 2, 0));
    tc_g_release_all(gin, 1);
    tc_tensor *gd = V(TC_F64, 1, SZ(2), VALS(1, 1));
    gout[0] = gd;
    CHECK_OK(gc_run_rule(TC_OP_MAX, in, 1, P(.i = {1, 0}), gout, NULL, gin));
    CHECK(tc_tensor_numel(gin[0]) == 6 && ct_at(gin[0], 0) + ct_at(gin[0], 2) == 1 && ct_at(gin[0], 4) == 1);
    tc_g_release_all(gin, 1);
    tc_tensor *n = V(TC_F64, 1, SZ(3), VALS(1, NAN, 2));
    in[0] = n;
    gout[0] = g;
    CHECK_OK(gc_run_rule(TC_OP_MAX, in, 1, P(.i = {-1, 0}), gout, NULL, gin));
    CHECK(SAME(gin[0], 0, 6, 0)); /* the NaN is the max and gets the gradient */
    tc_g_release_all(gin, 1);
    ct_drop();
}

/* ---- matrix products ------------------------------------------------------------------------ */

TEST(grad_rules_linalg)
{
    tc_tensor *v3 = R(1, SZ(3), -1, 1), *w3 = R(1, SZ(3), -1, 1), *v5 = R(1, SZ(5), -1, 1);
    tc_tensor *a = R(2, SZ(3, 5), -1, 1), *b = R(2, SZ(5, 2), -1, 1), *at = T(R(2, SZ(5, 3), -1, 1), 0, 1);
    tc_tensor *ba = R(3, SZ(4, 3, 5), -1, 1), *bb = R(3, SZ(4, 5, 2), -1, 1), *bbt = T(R(3, SZ(4, 2, 5), -1, 1), 1, 2);
    GC(DOT, NULL, v3, w3);
    GC(MV, NULL, a, v5);
    GC(MV, NULL, at, v5);
    GC(BMM, NULL, ba, bb);
    GC(BMM, NULL, ba, bbt);
    double sc[][2] = {{1, 1}, {0.5, -2}, {0, 1.5}, {-1, 0.25}};
    for (int k = 0; k < 4; k++) {
        double beta = sc[k][0], alpha = sc[k][1];
        GC(ADDMV, P(.s = {beta, alpha}), v3, a, v5);
        GC(ADDMV, P(.s = {beta, alpha}), R(0, NULL, -1, 1), at, v5); /* M broadcast */
        GC(ADDMM, P(.s = {beta, alpha}), R(2, SZ(3, 2), -1, 1), at, b);
        GC(ADDMM, P(.s = {beta, alpha}), R(2, SZ(3, 1), -1, 1), a, b);
        GC(ADDR, P(.s = {beta, alpha}), R(2, SZ(3, 5), -1, 1), v3, v5);
        GC(ADDR, P(.s = {beta, alpha}), R(1, SZ(5), -1, 1), v3, v5);
        GC(BADDBMM, P(.s = {beta, alpha}), R(3, SZ(4, 3, 2), -1, 1), ba, bbt);
        GC(BADDBMM, P(.s = {beta, alpha}), R(2, SZ(3, 2), -1, 1), ba, bb);
        GC(ADDBMM, P(.s = {beta, alpha}), R(2, SZ(3, 2), -1, 1), ba, bb);
        GC(ADDBMM, P(.s = {beta, alpha}), R(1, SZ(2), -1, 1), ba, bbt);
    }
    ct_drop();
}

/* ---- views ------------------------------------------------------------------------------------ */

TEST(grad_rules_views)
{
    tc_tensor *x = R(3, SZ(2, 3, 4), -1, 1), *xt = T(x, 0, 2), *m = R(2, SZ(3, 1), -1, 1);
    GC(NARROW, P(.i = {0, 1, 1}), x);
    GC(NARROW, P(.i = {1, 1, 2}), xt);
    GC(NARROW, P(.i = {-2, 2, 1}), x);
    GC(SELECT, P(.i = {0, 1}), x);
    GC(SELECT, P(.i = {2, -1}), x);
    GC(SELECT, P(.i = {-1, 0}), xt);
    GC(SELECT, P(.i = {0, 0}), R(1, SZ(1), -1, 1));
    GC(PERMUTE, P(.nshape = 3, .shape = {2, 0, 1}), x);
    GC(PERMUTE, P(.nshape = 3, .shape = {1, -1, 0}), xt);
    GC(VIEW, P(.nshape = 3, .shape = {4, 1, 6}), x);
    GC(VIEW, P(.nshape = 2, .shape = {6, 2}), R(2, SZ(3, 4), -1, 1));
    GC(SQUEEZE, P(.i = {-1}), ct_keep(ct_from(TC_F64, 4, SZ(1, 3, 1, 2), VALS(1, 2, 3, 4, 5, 6))));
    GC(SQUEEZE, P(.i = {2}), ct_keep(ct_from(TC_F64, 4, SZ(1, 3, 1, 2), VALS(1, 2, 3, 4, 5, 6))));
    GC(SQUEEZE, P(.i = {1}), m);
    GC(SQUEEZE, P(.i = {0}), m); /* size 3: nothing dropped */
    GC(UNSQUEEZE, P(.i = {0}), x);
    GC(UNSQUEEZE, P(.i = {3}), xt);
    GC(UNSQUEEZE, P(.i = {-1}), x);
    GC(UNSQUEEZE, P(.i = {-2}), xt);
    GC(EXPAND, P(.nshape = 4, .shape = {2, 2, 3, 5}), m);
    GC(EXPAND, P(.nshape = 2, .shape = {-1, 1}), m);
    GC(EXPAND, P(.nshape = 2, .shape = {2, 3}), R(0, NULL, -1, 1));
    GC(TRANSPOSE, P(.i = {1, 1}), x);
    GC(TRANSPOSE, P(.i = {0, 0}), R(0, NULL, -1, 1));
    ct_drop();
}

/* unfold and as_strided read elements more than once: their gradients sum. */
TEST(grad_rules_overlapping_views)
{
    tc_tensor *x = R(2, SZ(3, 7), -1, 1), *xt = T(R(2, SZ(7, 3), -1, 1), 0, 1);
    GC(UNFOLD, P(.i = {1, 3, 2}), x);
    GC(UNFOLD, P(.i = {1, 2, 1}), xt);
    GC(UNFOLD, P(.i = {0, 2, 1}), x);
    GC(UNFOLD, P(.i = {-1, 7, 1}), x);
    GC(UNFOLD, P(.i = {1, 2, 3}), x); /* step > size: element 6 unused */
    GC(UNFOLD, P(.i = {0, 1, 1}), R(0, NULL, -1, 1));
    tc_tensor *f = R(1, SZ(10), -1, 1);
    GC(AS_STRIDED, P(.nshape = 4, .shape = {3, 4, 2, 1}, .i = {0}), f); /* overlapping windows */
    GC(AS_STRIDED, P(.nshape = 4, .shape = {2, 2, 1, 3}, .i = {1}), f);
    GC(AS_STRIDED, P(.nshape = 2, .shape = {3, 0}, .i = {2}), f); /* one element, read 3 times */
    GC(AS_STRIDED, P(.nshape = 4, .shape = {2, 3, 1, 7}, .i = {0}), x);
    ct_drop();
}

/* as_strided reads storage positions, so the gradient follows the input's own layout
 * (gc_check perturbs contiguous copies and cannot test that): a transposed input read
 * in storage order. */
TEST(grad_rules_as_strided_layout)
{
    tc_tensor *b = V(TC_F64, 2, SZ(2, 3), VALS(0, 1, 2, 3, 4, 5)), *bt = T(b, 0, 1);
    tc_tensor *g = V(TC_F64, 1, SZ(6), VALS(10, 11, 12, 13, 14, 15)), *gin[1] = {NULL};
    const tc_tensor *in[1] = {bt}, *gout[1] = {g};
    CHECK_OK(gc_run_rule(TC_OP_AS_STRIDED, in, 1, P(.nshape = 2, .shape = {6, 1}, .i = {0}), gout, NULL, gin));
    /* bt(i, j) = b(j, i) lives at storage position 3 j + i */
    CHECK(ct_shape_is(gin[0], 2, SZ(3, 2)) && SAME(gin[0], 10, 13, 11, 14, 12, 15));
    tc_g_release_all(gin, 1);
    /* positions outside the input get no gradient: a narrowed input of a longer storage */
    tc_tensor *f = V(TC_F64, 1, SZ(6), VALS(0, 1, 2, 3, 4, 5)), *part = NULL;
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const *)&f, 1, P(.i = {0, 2, 2}), &part, 1));
    ct_keep(part);
    in[0] = part;
    CHECK_OK(gc_run_rule(TC_OP_AS_STRIDED, in, 1, P(.nshape = 2, .shape = {6, 1}, .i = {0}), gout, NULL, gin));
    CHECK(SAME(gin[0], 12, 13));
    tc_g_release_all(gin, 1);
    ct_drop();
}

/* ---- index family, cat ------------------------------------------------------------------------- */

TEST(grad_rules_index)
{
    tc_tensor *x = R(2, SZ(4, 3), -1, 1), *xt = T(R(2, SZ(3, 4), -1, 1), 0, 1);
    tc_tensor *idx = V(TC_I64, 1, SZ(3), VALS(2, 0, 2)), *uidx = V(TC_I64, 1, SZ(2), VALS(3, 1));
    GC(INDEX_SELECT, P(.i = {0}), x, idx);
    GC(INDEX_SELECT, P(.i = {1}), xt, idx);
    GC(INDEX_SELECT, P(.i = {-1}), x, V(TC_I64, 1, SZ(2), VALS(2, 1)));
    GC(INDEX_SELECT, P(.i = {0}), x, uidx);
    GC(INDEX_COPY, P(.i = {0}), x, uidx, R(2, SZ(2, 3), -1, 1));
    GC(INDEX_COPY, P(.i = {-1}), xt, V(TC_I64, 1, SZ(2), VALS(2, 0)), R(2, SZ(4, 2), -1, 1));
    GC(INDEX_ADD, P(.i = {0}), x, idx, R(2, SZ(3, 3), -1, 1));
    GC(INDEX_ADD, P(.i = {1}), xt, idx, R(2, SZ(4, 3), -1, 1));
    GC(INDEX_FILL, P(.s = {2.5}, .i = {0}), x, uidx);
    GC(INDEX_FILL, P(.s = {-1}, .i = {1}), xt, idx);
    tc_tensor *gi = V(TC_I64, 2, SZ(2, 3), VALS(3, 0, 1, 1, 1, 2)), *gj = V(TC_I64, 2, SZ(3, 2), VALS(0, 2, 1, 1, 2, 0));
    GC(GATHER, P(.i = {0}), x, gi);
    GC(GATHER, P(.i = {1}), xt, gj);
    GC(GATHER, P(.i = {-1}), x, gj);
    tc_tensor *si = V(TC_I64, 2, SZ(2, 3), VALS(3, 0, 1, 1, 2, 2)); /* distinct per column */
    GC(SCATTER, P(.i = {0}), x, si, R(2, SZ(2, 3), -1, 1));
    GC(SCATTER, P(.i = {0}), xt, si, R(2, SZ(3, 4), -1, 1)); /* source larger than the index */
    GC(SCATTER_ADD, P(.i = {0}), x, gi, R(2, SZ(2, 3), -1, 1));
    GC(SCATTER_ADD, P(.i = {1}), xt, gj, R(2, SZ(3, 3), -1, 1));
    GC(SCATTER_FILL, P(.s = {4}, .i = {0}), x, si);
    GC(SCATTER_FILL, P(.s = {4}, .i = {-1}), xt, gj);
    tc_tensor *mask = V(TC_U8, 2, SZ(4, 3), VALS(1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1)), *row = V(TC_BOOL, 1, SZ(3), VALS(0, 1, 1));
    GC(MASKED_FILL, P(.s = {9}), x, mask);
    GC(MASKED_FILL, P(.s = {9}), xt, row);
    GC(MASKED_COPY, NULL, x, mask, R(1, SZ(6), -1, 1));
    GC(MASKED_COPY, NULL, xt, row, R(2, SZ(3, 3), -1, 1)); /* source larger than the count */
    GC(MASKED_SELECT, NULL, x, mask);
    GC(MASKED_SELECT, NULL, xt, row);
    GC(MASKED_SELECT, NULL, R(1, SZ(3), -1, 1), mask); /* src broadcast to the mask */
    ct_drop();
}

TEST(grad_rules_cat)
{
    tc_tensor *a = R(2, SZ(2, 3), -1, 1), *b = R(2, SZ(1, 3), -1, 1), *c = T(R(2, SZ(3, 4), -1, 1), 0, 1);
    tc_tensor *d = R(2, SZ(2, 4), -1, 1), *e = ct_keep(NULL);
    GC(CAT, P(.i = {0}), a, b);
    GC(CAT, P(.i = {-2}), a, b, a);
    GC(CAT, P(.i = {1}), a, d);
    GC(CAT, P(.i = {0}), c, c);
    GC(CAT, P(.i = {-1}), a, d, a);
    tc_tensor *empty = NULL;
    CHECK_OK(tc_tensor_new(TC_F64, 1, SZ(0), &empty));
    ct_keep(empty);
    GC(CAT, P(.i = {0}), a, empty, b); /* Torch7: a 1-D empty joins anything */
    GC(CAT, P(.i = {0}), R(1, SZ(3), -1, 1), empty, R(1, SZ(2), -1, 1));
    (void)e;
    ct_drop();
}

/* ---- bad input ----------------------------------------------------------------------------- */

TEST(grad_rules_bad_gradients)
{
    tc_tensor *a = R(2, SZ(2, 3), -1, 1), *b = R(2, SZ(2, 3), -1, 1), *gin[3] = {NULL, NULL, NULL};
    const tc_tensor *in[2] = {a, b};
    tc_tensor *wrong = R(1, SZ(3), -1, 1); /* broadcasts against (2,3): must not slip through */
    const tc_tensor *gout[1] = {wrong};
    CHECK_ERR(gc_run_rule(TC_OP_MUL, in, 2, NULL, gout, NULL, gin), TC_ERR_SHAPE,
              "mul backward: gradient of output 1 is float64 (3), expected float64 (2,3)");
    CHECK(!gin[0] && !gin[1]);
    tc_tensor *g32 = ct_keep(gc_rand(TC_F32, 2, SZ(2, 3), -1, 1, 3));
    gout[0] = g32;
    CHECK_ERR(gc_run_rule(TC_OP_ADD, in, 2, P(.s = {1}), gout, NULL, gin), TC_ERR_SHAPE,
              "add backward: gradient of output 1 is float32 (2,3), expected float64 (2,3)");
    CHECK(!gin[0] && !gin[1]);
    tc_tensor *mw = R(2, SZ(3, 2), -1, 1);
    gout[0] = mw;
    CHECK_ERR(gc_run_rule(TC_OP_MM, (const tc_tensor *[]){a, T(b, 0, 1)}, 2, NULL, gout, NULL, gin), TC_ERR_SHAPE,
              "mm backward: gradient of output 1 is float64 (3,2), expected float64 (2,2)");
    gout[0] = mw;
    CHECK_ERR(gc_run_rule(TC_OP_SUM, in, 1, P(.i = {0, 0}), gout, NULL, gin), TC_ERR_SHAPE, "sum backward");
    CHECK(!gin[0]);
    /* no output gradient: every input gradient is zero (NULL); unwanted ones are not made */
    gout[0] = NULL;
    CHECK_OK(gc_run_rule(TC_OP_MUL, in, 2, NULL, gout, NULL, gin));
    CHECK(!gin[0] && !gin[1]);
    tc_tensor *g = R(2, SZ(2, 3), -1, 1);
    gout[0] = g;
    CHECK_OK(gc_run_rule(TC_OP_MUL, in, 2, NULL, gout, (const bool[]){false, true}, gin));
    CHECK(!gin[0] && gin[1]);
    tc_g_release_all(gin, 2);
    ct_drop();
}

/* cat of many inputs (an RNN joins every time step): each gets its slice. */
TEST(grad_rules_cat_many)
{
    enum { N = 70 };
    const tc_tensor *in[N];
    for (int i = 0; i < N; i++) in[i] = R(2, SZ(1, 2), -1, 1);
    tc_tensor *gin[N] = {0};
    tc_tensor *g = ct_keep(ct_arange(TC_F64, 2, SZ(N, 2)));
    const tc_tensor *gout[1] = {g};
    CHECK_OK(gc_run_rule(TC_OP_CAT, in, N, P(.i = {0}), gout, NULL, gin));
    CHECK(gin[N - 1] && ct_shape_is(gin[N - 1], 2, SZ(1, 2)) && ct_at(gin[N - 1], 1) == 2 * N - 1);
    tc_g_release_all(gin, N);
    ct_drop();
}

/* norm at zeros: p = 1.5 has a finite gradient (0) at x = 0, the zero vector gets 0. */
TEST(grad_rules_norm_zeros)
{
    tc_tensor *x = V(TC_F64, 1, SZ(3), VALS(0, 1, -2)), *z = V(TC_F64, 1, SZ(2), VALS(0, 0));
    tc_tensor *g = V(TC_F64, 0, NULL, VALS(1)), *gin[1] = {NULL};
    const tc_tensor *in[1] = {x}, *gout[1] = {g};
    double ps[] = {1.5, 2, 3, 0.5};
    for (int k = 0; k < 4; k++) {
        CHECK_OK(gc_run_rule(TC_OP_NORM, in, 1, P(.s = {ps[k]}, .i = {-1, 0}), gout, NULL, gin));
        CHECK(ct_at(gin[0], 0) == 0 && isfinite(ct_at(gin[0], 1)) && isfinite(ct_at(gin[0], 2)));
        tc_g_release_all(gin, 1);
    }
    in[0] = z;
    for (int k = 0; k < 4; k++) {
        CHECK_OK(gc_run_rule(TC_OP_NORM, in, 1, P(.s = {ps[k]}, .i = {-1, 0}), gout, NULL, gin));
        CHECK(SAME(gin[0], 0, 0));
        tc_g_release_all(gin, 1);
    }
    ct_drop();
}

/* float32: the same rules in single precision agree with float64 (scalars made in the
 * input's dtype, no silent promotion). */
static int f32_agrees(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p)
{
    tc_tensor *in32[4] = {0}, *g64 = NULL, *g32 = NULL, *r64[2] = {0}, *gi64[4] = {0}, *gi32[4] = {0};
    int bad = 0;
    for (int i = 0; i < nin; i++) {
        tc_params cp = {.i = {tc_dtype_is_float((tc_dtype)in[i]->dtype) ? TC_F32 : -1}};
        if (tc_op_run(TC_OP_COPY, &in[i], 1, &cp, &in32[i], 1)) bad = 1;
    }
    if (!bad && tc_op_run(op, in, nin, p, r64, tc_op_info(op)->nout)) bad = 1;
    if (!bad) {
        g64 = gc_rand(TC_F64, r64[0]->ndim, r64[0]->size, -1, 1, 77);
        g32 = gc_rand(TC_F32, r64[0]->ndim, r64[0]->size, -1, 1, 77);
        const tc_tensor *go64[2] = {g64, NULL}, *go32[2] = {g32, NULL};
        if (gc_run_rule(op, in, nin, p, go64, NULL, gi64) ||
            gc_run_rule(op, (const tc_tensor *const *)in32, nin, p, go32, NULL, gi32))
            bad = 1;
    }
    for (int i = 0; i < nin && !bad; i++) {
        if (!gi64[i] != !gi32[i] || (gi32[i] && gi32[i]->dtype != TC_F32)) bad = 1;
        for (int64_t e = 0; gi64[i] && !bad && e < tc_tensor_numel(gi64[i]); e++)
            if (!ct_near(ct_at(gi32[i], e), ct_at(gi64[i], e), 1e-4)) bad = 1;
    }
    if (bad) printf("    float32 %s disagrees (%s)\n", tc_op_info(op)->name, tc_last_error());
    for (int i = 0; i < 4; i++) {
        tc_tensor *all[] = {in32[i], gi64[i], gi32[i]};
        for (int k = 0; k < 3; k++)
            if (all[k]) tc_tensor_release(all[k]);
    }
    tc_tensor *rest[] = {g64, g32, r64[0], r64[1]};
    for (int k = 0; k < 4; k++)
        if (rest[k]) tc_tensor_release(rest[k]);
    return bad;
}

#define F32(op, p, ...)                                                                     \
    do {                                                                                    \
        const tc_tensor *in_[] = {__VA_ARGS__};                                             \
        CHECK(f32_agrees(TC_OP_##op, in_, (int)(sizeof in_ / sizeof *in_), (p)) == 0);      \
    } while (0)

TEST(grad_rules_float32)
{
    tc_tensor *x = R(2, SZ(3, 4), -0.9, 0.9), *pos = R(2, SZ(3, 4), 0.5, 2), *row = R(1, SZ(4), 0.5, 2);
    tc_tensor *a = R(2, SZ(3, 5), -1, 1), *b = R(2, SZ(5, 4), -1, 1);
    for (int op = 0; op < TC_OP_COUNT; op++) { /* every one-input elementwise rule */
        const tc_opinfo *info = tc_op_info((tc_op)op);
        if (info->kind != TC_KIND_EW || info->nin != 1 || !(info->flags & TC_OPF_DIFF)) continue;
        const tc_tensor *in[1] = {op == TC_OP_LOG || op == TC_OP_SQRT || op == TC_OP_RSQRT || op == TC_OP_CINV ||
                                          op == TC_OP_LOG2 || op == TC_OP_LOG10 || op == TC_OP_LOG1P
                                      ? pos
                                      : x};
        tc_params p = {.s = {-0.5, 0.5}};
        CHECK(f32_agrees((tc_op)op, in, 1, &p) == 0);
    }
    F32(ADD, P(.s = {2}), x, row);
    F32(MUL, NULL, x, row);
    F32(DIV, NULL, x, pos);
    F32(POW, NULL, pos, x);
    F32(MAXIMUM, NULL, x, row);
    F32(ADDCDIV, P(.s = {0.5}), x, x, pos);
    F32(SUM, P(.i = {1, 0}), x);
    F32(VAR, P(.i = {0, 0, 1}), x);
    F32(NORM, P(.s = {3}, .i = {-1, 0}), x);
    F32(PROD, P(.i = {1, 1}), pos);
    F32(CUMPROD, P(.i = {1}), x);
    F32(MAX, P(.i = {-1, 0}), x);
    F32(MAX, P(.i = {1, 0}), x);
    F32(SORT, P(.i = {1, 0}), x);
    F32(MM, NULL, a, b);
    F32(ADDMM, P(.s = {0.5, 2}), row, a, b);
    F32(NARROW, P(.i = {1, 1, 2}), x);
    F32(COPY, P(.i = {-1}), x);
    F32(WHERE, NULL, V(TC_U8, 1, SZ(4), VALS(1, 0, 0, 1)), x, row);
    ct_drop();
}
