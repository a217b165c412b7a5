/* rules_ew.c -- gradient rules of the elementwise ops, copy and where (see grad.h).
 *
 * Formulas follow PyTorch 1.13's tools/autograd/derivatives.yaml, including its choices
 * at kinks (abs'(0) = 0, clamp passes the gradient where lo <= x <= hi, cmax/cmin split
 * ties half and half, pow's exponent gradient is 0 where the base is 0 and the exponent
 * >= 0). Each rule is written with ops through the arena helpers, so running it with grad
 * mode on records it and gradients of gradients work. Gradients of broadcast inputs are
 * summed back to their sizes with tc_ga_sum_to. Save masks are minimal: a rule that can
 * use its output (exp, tanh, sigmoid, sqrt) saves that instead of the input.
 */
#include "grad.h"
#include <math.h>

#define G0 (c->gout[0])
#define X0 (c->in[0])
#define X1 (c->in[1])
#define X2 (c->in[2])
#define Y0 (c->out[0])
#define M(i) (&c->meta[i])

/* gin[i] = sum_to(t, meta[i]) when input i's gradient is wanted. */
static void put(tc_garena *A, const tc_grad_ctx *c, int i, const tc_tensor *t, tc_tensor **gin)
{
    if (c->needs[i]) tc_ga_out(A, tc_ga_sum_to(A, t, M(i)), &gin[i]);
}

/* ---- unary ------------------------------------------------------------------------------ */

/* Rules of the form gin = g * f, with f built from the saved input x or output y. */
#define UNARY(name, mask, expr)                                                             \
    TC_GRAD_RULE(name, mask)                                                                \
    {                                                                                       \
        tc_garena A_ = {0}, *A = &A_;                                                       \
        const tc_tensor *g = G0, *x = X0, *y = Y0;                                          \
        (void)x, (void)y;                                                                   \
        tc_ga_out(A, (expr), &gin[0]);                                                      \
        return tc_ga_done(A);                                                               \
    }

UNARY(neg_rule, 0, tc_ga_neg(A, g))
UNARY(frac_rule, 0, tc_ga_reshape(A, g, M(0))) /* identity (a fresh header) */
UNARY(abs_rule, TC_SAVE_IN0, tc_ga_mul(A, g, tc_ga_ew(A, TC_OP_SIGN, x, NULL, NULL, 0, 0)))
UNARY(square_rule, TC_SAVE_IN0, tc_ga_mul(A, g, tc_ga_scale(A, x, 2)))
UNARY(exp_rule, TC_SAVE_OUT0, tc_ga_mul(A, g, y))
UNARY(expm1_rule, TC_SAVE_OUT0, tc_ga_mul(A, g, tc_ga_adds(A, y, 1)))
UNARY(log_rule, TC_SAVE_IN0, tc_ga_div(A, g, x))
UNARY(log1p_rule, TC_SAVE_IN0, tc_ga_div(A, g, tc_ga_adds(A, x, 1)))
UNARY(log2_rule, TC_SAVE_IN0, tc_ga_div(A, g, tc_ga_scale(A, x, M_LN2)))
UNARY(log10_rule, TC_SAVE_IN0, tc_ga_div(A, g, tc_ga_scale(A, x, M_LN10)))
UNARY(sqrt_rule, TC_SAVE_OUT0, tc_ga_div(A, g, tc_ga_scale(A, y, 2)))
/* rsqrt: -0.5 g y^3 */
UNARY(rsqrt_rule, TC_SAVE_OUT0, tc_ga_mul(A, tc_ga_scale(A, g, -0.5), tc_ga_mul(A, y, tc_ga_mul(A, y, y))))
/* 1/x: -g y^2 */
UNARY(cinv_rule, TC_SAVE_OUT0, tc_ga_mul(A, tc_ga_neg(A, g), tc_ga_mul(A, y, y)))
UNARY(sin_rule, TC_SAVE_IN0, tc_ga_mul(A, g, tc_ga_ew(A, TC_OP_COS, x, NULL, NULL, 0, 0)))
UNARY(cos_rule, TC_SAVE_IN0, tc_ga_mul(A, tc_ga_neg(A, g), tc_ga_ew(A, TC_OP_SIN, x, NULL, NULL, 0, 0)))
/* tan: g (1 + y^2) */
UNARY(tan_rule, TC_SAVE_OUT0, tc_ga_mul(A, g, tc_ga_adds(A, tc_ga_mul(A, y, y), 1)))
/* asin: g / sqrt(1 - x^2); acos: the negation */
UNARY(asin_rule, TC_SAVE_IN0,
      tc_ga_div(A, g, tc_ga_ew(A, TC_OP_SQRT, tc_ga_rsub(A, 1, tc_ga_mul(A, x, x)), NULL, NULL, 0, 0)))
UNARY(acos_rule, TC_SAVE_IN0,
      tc_ga_div(A, tc_ga_neg(A, g), tc_ga_ew(A, TC_OP_SQRT, tc_ga_rsub(A, 1, tc_ga_mul(A, x, x)), NULL, NULL, 0, 0)))
UNARY(atan_rule, TC_SAVE_IN0, tc_ga_div(A, g, tc_ga_adds(A, tc_ga_mul(A, x, x), 1)))
UNARY(sinh_rule, TC_SAVE_IN0, tc_ga_mul(A, g, tc_ga_ew(A, TC_OP_COSH, x, NULL, NULL, 0, 0)))
UNARY(cosh_rule, TC_SAVE_IN0, tc_ga_mul(A, g, tc_ga_ew(A, TC_OP_SINH, x, NULL, NULL, 0, 0)))
/* tanh: g (1 - y^2) */
UNARY(tanh_rule, TC_SAVE_OUT0, tc_ga_mul(A, g, tc_ga_rsub(A, 1, tc_ga_mul(A, y, y))))
/* sigmoid: g y (1 - y) */
UNARY(sigmoid_rule, TC_SAVE_OUT0, tc_ga_mul(A, g, tc_ga_mul(A, y, tc_ga_rsub(A, 1, y))))
/* erf: g 2/sqrt(pi) exp(-x^2) */
UNARY(erf_rule, TC_SAVE_IN0,
      tc_ga_mul(A, tc_ga_scale(A, g, 2 / sqrt(M_PI)),
                tc_ga_ew(A, TC_OP_EXP, tc_ga_neg(A, tc_ga_mul(A, x, x)), NULL, NULL, 0, 0)))

/* gelu, gelu_tanh: their backward ops, g gelu'(x) in one pass */
UNARY(gelu_rule, TC_SAVE_IN0, tc_ga_ew(A, TC_OP_GELU_BACKWARD, g, x, NULL, 0, 0))
UNARY(gelu_tanh_rule, TC_SAVE_IN0, tc_ga_ew(A, TC_OP_GELU_TANH_BACKWARD, g, x, NULL, 0, 0))
UNARY(silu_rule, TC_SAVE_IN0, tc_ga_ew(A, TC_OP_SILU_BACKWARD, g, x, NULL, 0, 0))

/* gelu''(x): erf form phi(x) (2 - x^2), phi(x) = exp(-x^2 / 2) / sqrt(2 pi); tanh form, with
 * k = sqrt(2/pi), c = 0.044715, t = tanh(k (x + c x^3)), du = k (1 + 3c x^2):
 * (1 - t^2) (du - x t du^2 + 3ck x^2). */
static const tc_tensor *gelu_second(tc_garena *A, const tc_tensor *x, bool tanh_form)
{
    const double k = 0.79788456080286535588, cc = 0.044715;
    const tc_tensor *x2 = tc_ga_mul(A, x, x);
    if (!tanh_form) {
        const tc_tensor *phi = tc_ga_scale(A, tc_ga_ew(A, TC_OP_EXP, tc_ga_scale(A, x2, -0.5), NULL, NULL, 0, 0),
                                           0.39894228040143267794);
        return tc_ga_mul(A, phi, tc_ga_rsub(A, 2, x2));
    }
    const tc_tensor *u = tc_ga_scale(A, tc_ga_add(A, x, tc_ga_scale(A, tc_ga_mul(A, x, x2), cc)), k);
    const tc_tensor *t = tc_ga_ew(A, TC_OP_TANH, u, NULL, NULL, 0, 0);
    const tc_tensor *du = tc_ga_scale(A, tc_ga_adds(A, tc_ga_scale(A, x2, 3 * cc), 1), k);
    const tc_tensor *xt = tc_ga_mul(A, x, t);
    const tc_tensor *in = tc_ga_add(A, tc_ga_sub(A, du, tc_ga_mul(A, xt, tc_ga_mul(A, du, du))),
                                    tc_ga_scale(A, x2, 3 * cc * k));
    return tc_ga_mul(A, tc_ga_rsub(A, 1, tc_ga_mul(A, t, t)), in);
}

/* silu''(x) = s (1 - s) (2 + x (1 - 2s)), s = sigmoid(x) */
static const tc_tensor *silu_second(tc_garena *A, const tc_tensor *x)
{
    const tc_tensor *s = tc_ga_ew(A, TC_OP_SIGMOID, x, NULL, NULL, 0, 0);
    const tc_tensor *in = tc_ga_adds(A, tc_ga_mul(A, x, tc_ga_rsub(A, 1, tc_ga_scale(A, s, 2))), 2);
    return tc_ga_mul(A, tc_ga_mul(A, s, tc_ga_rsub(A, 1, s)), in);
}

/* gelu_backward(g, x) = g gelu'(x), and gelu_tanh_backward, silu_backward likewise: linear
 * in g (its own op again), g gelu''(x) for x */
TC_GRAD_RULE(activation_backward_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) put(A, c, 0, tc_ga_ew(A, c->op, G0, X1, NULL, 0, 0), gin);
    if (c->needs[1]) {
        const tc_tensor *second = c->op == TC_OP_SILU_BACKWARD
                                      ? silu_second(A, X1)
                                      : gelu_second(A, X1, c->op == TC_OP_GELU_TANH_BACKWARD);
        put(A, c, 1, tc_ga_mul(A, tc_ga_mul(A, G0, X0), second), gin);
    }
    return tc_ga_done(A);
}

/* sign, ceil, floor, round, trunc: piecewise constant, a zero gradient (left NULL). */
TC_GRAD_RULE(zero_rule, 0)
{
    (void)c, (void)gin;
    return TC_OK;
}

/* clamp(x, lo = s0, hi = s1): g where lo <= x <= hi, else 0 (PyTorch's clamp_backward). */
TC_GRAD_RULE(clamp_rule, TC_SAVE_IN0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *lo = tc_ga_cmps(A, TC_OP_GE, X0, c->p->s[0]);
    const tc_tensor *hi = tc_ga_cmps(A, TC_OP_LE, X0, c->p->s[1]);
    const tc_tensor *in = tc_ga_ew(A, TC_OP_BITAND, lo, hi, NULL, 0, 0);
    tc_ga_out(A, tc_ga_where(A, in, G0, NULL), &gin[0]);
    return tc_ga_done(A);
}

/* ---- binary ----------------------------------------------------------------------------- */

/* a + s0 b */
TC_GRAD_RULE(add_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    double s0 = c->p->s[0];
    put(A, c, 0, G0, gin);
    if (c->needs[1]) put(A, c, 1, s0 == 1 ? G0 : tc_ga_scale(A, G0, s0), gin);
    return tc_ga_done(A);
}

/* a - s0 b */
TC_GRAD_RULE(sub_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    put(A, c, 0, G0, gin);
    if (c->needs[1]) put(A, c, 1, tc_ga_scale(A, G0, -c->p->s[0]), gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(mul_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) put(A, c, 0, tc_ga_mul(A, G0, X1), gin);
    if (c->needs[1]) put(A, c, 1, tc_ga_mul(A, G0, X0), gin);
    return tc_ga_done(A);
}

/* a / b: g / b and -g a / b^2 */
TC_GRAD_RULE(div_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) put(A, c, 0, tc_ga_div(A, G0, X1), gin);
    if (c->needs[1]) put(A, c, 1, tc_ga_div(A, tc_ga_mul(A, tc_ga_neg(A, G0), X0), tc_ga_mul(A, X1, X1)), gin);
    return tc_ga_done(A);
}

/* x^e: base g e x^(e-1) (0 where e == 0); exponent g y log(x) (0 where x == 0 and e >= 0). */
TC_GRAD_RULE(pow_rule, TC_SAVE_IN0 | TC_SAVE_IN1 | TC_SAVE_OUT0)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) {
        const tc_tensor *d = tc_ga_mul(A, X1, tc_ga_ew(A, TC_OP_POW, X0, tc_ga_adds(A, X1, -1), NULL, 0, 0));
        put(A, c, 0, tc_ga_where(A, tc_ga_cmps(A, TC_OP_EQ, X1, 0), NULL, tc_ga_mul(A, G0, d)), gin);
    }
    if (c->needs[1]) {
        const tc_tensor *z = tc_ga_ew(A, TC_OP_BITAND, tc_ga_cmps(A, TC_OP_EQ, X0, 0), tc_ga_cmps(A, TC_OP_GE, X1, 0),
                                      NULL, 0, 0);
        const tc_tensor *d = tc_ga_mul(A, Y0, tc_ga_ew(A, TC_OP_LOG, X0, NULL, NULL, 0, 0));
        put(A, c, 1, tc_ga_where(A, z, NULL, tc_ga_mul(A, G0, d)), gin);
    }
    return tc_ga_done(A);
}

/* atan2(a, b): g b / (a^2 + b^2) and -g a / (a^2 + b^2) */
TC_GRAD_RULE(atan2_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *r = tc_ga_div(A, G0, tc_ga_add(A, tc_ga_mul(A, X0, X0), tc_ga_mul(A, X1, X1)));
    if (c->needs[0]) put(A, c, 0, tc_ga_mul(A, r, X1), gin);
    if (c->needs[1]) put(A, c, 1, tc_ga_mul(A, tc_ga_neg(A, r), X0), gin);
    return tc_ga_done(A);
}

/* fmod / remainder: a - b q with q = trunc(a/b) or floor(a/b): g and -g q. */
static tc_status mod_grad(const tc_grad_ctx *c, tc_tensor **gin, tc_op round_op)
{
    tc_garena A_ = {0}, *A = &A_;
    put(A, c, 0, G0, gin);
    if (c->needs[1]) {
        const tc_tensor *q = tc_ga_ew(A, round_op, tc_ga_div(A, X0, X1), NULL, NULL, 0, 0);
        put(A, c, 1, tc_ga_mul(A, tc_ga_neg(A, G0), q), gin);
    }
    return tc_ga_done(A);
}
TC_GRAD_RULE(fmod_rule, TC_SAVE_IN0 | TC_SAVE_IN1) { return mod_grad(c, gin, TC_OP_TRUNC); }
TC_GRAD_RULE(remainder_rule, TC_SAVE_IN0 | TC_SAVE_IN1) { return mod_grad(c, gin, TC_OP_FLOOR); }

/* cmax / cmin (PyTorch's maximum/minimum): the gradient goes to the selected input, half
 * to each on ties. `lose` is the comparison under which a loses (a < b for cmax). */
static tc_status minmax_grad(const tc_grad_ctx *c, tc_tensor **gin, tc_op lose, tc_op win)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *tie = tc_ga_ew(A, TC_OP_EQ, X0, X1, NULL, 0, 0);
    const tc_tensor *half = tc_ga_scale(A, G0, 0.5);
    if (c->needs[0]) {
        const tc_tensor *l = tc_ga_ew(A, lose, X0, X1, NULL, 0, 0);
        put(A, c, 0, tc_ga_where(A, tie, half, tc_ga_where(A, l, NULL, G0)), gin);
    }
    if (c->needs[1]) {
        const tc_tensor *w = tc_ga_ew(A, win, X0, X1, NULL, 0, 0);
        put(A, c, 1, tc_ga_where(A, tie, half, tc_ga_where(A, w, NULL, G0)), gin);
    }
    return tc_ga_done(A);
}
TC_GRAD_RULE(cmax_rule, TC_SAVE_IN0 | TC_SAVE_IN1) { return minmax_grad(c, gin, TC_OP_LT, TC_OP_GT); }
TC_GRAD_RULE(cmin_rule, TC_SAVE_IN0 | TC_SAVE_IN1) { return minmax_grad(c, gin, TC_OP_GT, TC_OP_LT); }

/* ---- ternary ---------------------------------------------------------------------------- */

/* a + s0 b c */
TC_GRAD_RULE(addcmul_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    double s0 = c->p->s[0];
    put(A, c, 0, G0, gin);
    const tc_tensor *gs = (c->needs[1] || c->needs[2]) ? (s0 == 1 ? G0 : tc_ga_scale(A, G0, s0)) : NULL;
    if (c->needs[1]) put(A, c, 1, tc_ga_mul(A, gs, X2), gin);
    if (c->needs[2]) put(A, c, 2, tc_ga_mul(A, gs, X1), gin);
    return tc_ga_done(A);
}

/* a + s0 b / c: g, s0 g / c, -s0 g b / c^2 */
TC_GRAD_RULE(addcdiv_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    double s0 = c->p->s[0];
    put(A, c, 0, G0, gin);
    const tc_tensor *gs = (c->needs[1] || c->needs[2]) ? tc_ga_div(A, tc_ga_scale(A, G0, s0), X2) : NULL;
    if (c->needs[1]) put(A, c, 1, gs, gin);
    if (c->needs[2]) put(A, c, 2, tc_ga_neg(A, tc_ga_mul(A, gs, tc_ga_div(A, X1, X2))), gin);
    return tc_ga_done(A);
}

/* lerp a + w (b - a): g (1 - w), g w, g (b - a) */
TC_GRAD_RULE(lerp_rule, TC_SAVE_IN0 | TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) put(A, c, 0, tc_ga_mul(A, G0, tc_ga_rsub(A, 1, X2)), gin);
    if (c->needs[1]) put(A, c, 1, tc_ga_mul(A, G0, X2), gin);
    if (c->needs[2]) put(A, c, 2, tc_ga_mul(A, G0, tc_ga_sub(A, X1, X0)), gin);
    return tc_ga_done(A);
}

/* ---- copy, where -------------------------------------------------------------------------- */

/* g converted to m's dtype on m's device (a copy across devices: t:cuda(), x:float() of a
 * device tensor, y:copy(x) into another device). Through tc_op_run with a given result, so
 * a pass with grad mode on records it like the forward copy. */
static const tc_tensor *to_device_of(tc_garena *A, const tc_tensor *g, const tc_tmeta *m)
{
    if (!g || A->err) return NULL;
    tc_tensor *t = NULL;
    tc_status s = tc_tensor_alloc_on(m->device, (tc_dtype)m->dtype, g->ndim, g->size, &t);
    if (!s) {
        tc_tensor *res[1] = {t};
        s = tc_op_run(TC_OP_COPY, &g, 1, &(tc_params){.i = {m->dtype}}, res, 1);
        if (s) tc_tensor_release(t);
    }
    return tc_ga_keep(A, s, s ? NULL : t);
}

/* copy (any dtype to any dtype, any devices, Torch7's equal-element-count rule): the
 * gradient converted back to the input's dtype on the input's device, viewed with its
 * sizes. */
TC_GRAD_RULE(copy_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = M(0);
    const tc_tensor *g = G0;
    if (g->device != m->device) g = to_device_of(A, g, m);
    else if (g->dtype != m->dtype) g = tc_ga_op(A, TC_OP_COPY, &G0, 1, &(tc_params){.i = {m->dtype}});
    tc_ga_out(A, tc_ga_reshape(A, g, m), &gin[0]);
    return tc_ga_done(A);
}

/* where(cond, a, b): the gradient goes to a where cond holds, to b elsewhere; none to cond. */
TC_GRAD_RULE(where_rule, TC_SAVE_IN0)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[1]) put(A, c, 1, tc_ga_where(A, X0, G0, NULL), gin);
    if (c->needs[2]) put(A, c, 2, tc_ga_where(A, X0, NULL, G0), gin);
    return tc_ga_done(A);
}

void tc_grad_rules_ew(tc_grad_rule *t)
{
    TC_GRAD_REG(t, NEG, neg_rule);
    TC_GRAD_REG(t, ABS, abs_rule);
    TC_GRAD_REG(t, SIGN, zero_rule);
    TC_GRAD_REG(t, SQUARE, square_rule);
    TC_GRAD_REG(t, EXP, exp_rule);
    TC_GRAD_REG(t, EXPM1, expm1_rule);
    TC_GRAD_REG(t, LOG, log_rule);
    TC_GRAD_REG(t, LOG1P, log1p_rule);
    TC_GRAD_REG(t, LOG2, log2_rule);
    TC_GRAD_REG(t, LOG10, log10_rule);
    TC_GRAD_REG(t, SQRT, sqrt_rule);
    TC_GRAD_REG(t, RSQRT, rsqrt_rule);
    TC_GRAD_REG(t, CINV, cinv_rule);
    TC_GRAD_REG(t, SIN, sin_rule);
    TC_GRAD_REG(t, COS, cos_rule);
    TC_GRAD_REG(t, TAN, tan_rule);
    TC_GRAD_REG(t, ASIN, asin_rule);
    TC_GRAD_REG(t, ACOS, acos_rule);
    TC_GRAD_REG(t, ATAN, atan_rule);
    TC_GRAD_REG(t, SINH, sinh_rule);
    TC_GRAD_REG(t, COSH, cosh_rule);
    TC_GRAD_REG(t, TANH, tanh_rule);
    TC_GRAD_REG(t, SIGMOID, sigmoid_rule);
    TC_GRAD_REG(t, ERF, erf_rule);
    TC_GRAD_REG(t, GELU, gelu_rule);
    TC_GRAD_REG(t, GELU_TANH, gelu_tanh_rule);
    TC_GRAD_REG(t, GELU_BACKWARD, activation_backward_rule);
    TC_GRAD_REG(t, GELU_TANH_BACKWARD, activation_backward_rule);
    TC_GRAD_REG(t, SILU, silu_rule);
    TC_GRAD_REG(t, SILU_BACKWARD, activation_backward_rule);
    TC_GRAD_REG(t, CEIL, zero_rule);
    TC_GRAD_REG(t, FLOOR, zero_rule);
    TC_GRAD_REG(t, ROUND, zero_rule);
    TC_GRAD_REG(t, TRUNC, zero_rule);
    TC_GRAD_REG(t, FRAC, frac_rule);
    TC_GRAD_REG(t, CLAMP, clamp_rule);
    TC_GRAD_REG(t, ADD, add_rule);
    TC_GRAD_REG(t, SUB, sub_rule);
    TC_GRAD_REG(t, MUL, mul_rule);
    TC_GRAD_REG(t, DIV, div_rule);
    TC_GRAD_REG(t, POW, pow_rule);
    TC_GRAD_REG(t, ATAN2, atan2_rule);
    TC_GRAD_REG(t, FMOD, fmod_rule);
    TC_GRAD_REG(t, REMAINDER, remainder_rule);
    TC_GRAD_REG(t, MAXIMUM, cmax_rule);
    TC_GRAD_REG(t, MINIMUM, cmin_rule);
    TC_GRAD_REG(t, ADDCMUL, addcmul_rule);
    TC_GRAD_REG(t, ADDCDIV, addcdiv_rule);
    TC_GRAD_REG(t, LERP, lerp_rule);
    TC_GRAD_REG(t, COPY, copy_rule);
    TC_GRAD_REG(t, WHERE, where_rule);
}
