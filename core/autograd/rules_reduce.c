/* rules_reduce.c -- gradient rules of reductions, scans and the sort family (see grad.h).
 *
 * Reductions: i0 is the dim (-1: every element; i0 < -1 counts from the end), i1 keepdim.
 * The output gradient is brought back to the input's sizes by unsqueezing the reduced dim
 * and broadcasting (tc_ga_unreduce), so no rule loops over data. Value-selecting ops
 * (max/min with a dim, sort, topk, kthvalue, median) route the gradient to the index they
 * returned with a scatter into zeros; max/min over every element split it evenly among
 * ties, as PyTorch 1.13 does. prod and cumprod are exact with zeros in the input
 * (exclusive products instead of dividing by x). Formulas: PyTorch 1.13 derivatives.yaml.
 */
#include "grad.h"
#include <math.h>

#define G0 (c->gout[0])
#define X0 (c->in[0])
#define Y0 (c->out[0])
#define Y1 (c->out[1])
#define M(i) (&c->meta[i])

/* ---- small arena helpers --------------------------------------------------------------- */

static const tc_tensor *scal(tc_garena *A, int dt, double v)
{
    if (A->err) return NULL;
    tc_tensor *t = NULL;
    tc_status s = tc_g_scalar(dt, v, &t);
    return tc_ga_keep(A, s, t);
}

static const tc_tensor *keepdim_of(tc_garena *A, const tc_tensor *g, int d, int keep, const tc_tmeta *m)
{
    if (A->err || !g) return NULL;
    tc_tensor *t = NULL;
    tc_status s = tc_g_keepdim(g, d, keep, m, &t);
    return tc_ga_keep(A, s, t);
}

static const tc_tensor *unreduce(tc_garena *A, const tc_tensor *g, int d, int keep, const tc_tmeta *m)
{
    if (A->err || !g) return NULL;
    tc_tensor *t = NULL;
    tc_status s = tc_g_unreduce(g, d, keep, m, &t);
    return tc_ga_keep(A, s, t);
}

static const tc_tensor *flip(tc_garena *A, const tc_tensor *x, int d)
{
    if (A->err || !x) return NULL;
    tc_tensor *t = NULL;
    tc_status s = tc_g_flip(x, d, &t);
    return tc_ga_keep(A, s, t);
}

static const tc_tensor *op1(tc_garena *A, tc_op op, const tc_tensor *x, int64_t i0, int64_t i1)
{
    tc_params p = {.i = {i0, i1}};
    return tc_ga_op(A, op, &x, 1, &p);
}

/* A uint8 mask as x's dtype (0/1). */
static const tc_tensor *as_float(tc_garena *A, const tc_tensor *mask, int dt)
{
    tc_params p = {.i = {dt}};
    return tc_ga_op(A, TC_OP_COPY, &mask, 1, &p);
}

/* zeros of m with src scattered along d at idx (value-selecting reductions). */
static const tc_tensor *scatter_into_zeros(tc_garena *A, const tc_tmeta *m, int d, const tc_tensor *idx,
                                           const tc_tensor *src)
{
    const tc_tensor *in[3] = {tc_ga_full(A, m, 0), idx, src};
    tc_params p = {.i = {d}};
    return tc_ga_op(A, TC_OP_SCATTER, in, 3, &p);
}

/* Elements reduced into each output element. */
static double reduced_count(const tc_grad_ctx *c, int d)
{
    const tc_tmeta *m = M(0);
    return d < 0 ? (double)tc_numel_of(m->ndim, m->size) : (double)m->size[d];
}

/* ---- sum, mean, var, std, norm ----------------------------------------------------------- */

TC_GRAD_RULE(sum_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    int d = tc_g_reduce_dim(c->p->i[0], M(0)->ndim);
    const tc_tensor *g = G0;
    if (g->dtype != M(0)->dtype) g = as_float(A, g, M(0)->dtype);
    tc_ga_out(A, unreduce(A, g, d, (int)c->p->i[1], M(0)), &gin[0]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(mean_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    int d = tc_g_reduce_dim(c->p->i[0], M(0)->ndim);
    const tc_tensor *g = tc_ga_scale(A, G0, 1 / reduced_count(c, d));
    tc_ga_out(A, unreduce(A, g, d, (int)c->p->i[1], M(0)), &gin[0]);
    return tc_ga_done(A);
}

/* var: 2 g (x - mean) / (N - unbiased) with g unreduced. */
static const tc_tensor *var_grad(tc_garena *A, const tc_grad_ctx *c, const tc_tensor *g, int d)
{
    double n = reduced_count(c, d) - (c->p->i[2] ? 1 : 0);
    const tc_tensor *mean = op1(A, TC_OP_MEAN, X0, d < 0 ? -1 : d, 1);
    const tc_tensor *gk = keepdim_of(A, tc_ga_scale(A, g, 2 / n), d, (int)c->p->i[1], M(0));
    return tc_ga_mul(A, gk, tc_ga_sub(A, X0, mean));
}

TC_GRAD_RULE(var_rule, TC_SAVE_IN0)
{
    tc_garena A_ = {0}, *A = &A_;
    int d = tc_g_reduce_dim(c->p->i[0], M(0)->ndim);
    tc_ga_out(A, var_grad(A, c, G0, d), &gin[0]);
    return tc_ga_done(A);
}

/* std: var's rule with g / (2 std), 0 where std == 0 (PyTorch's std_backward). */
TC_GRAD_RULE(std_rule, TC_SAVE_IN0 | TC_SAVE_OUT0)
{
    tc_garena A_ = {0}, *A = &A_;
    int d = tc_g_reduce_dim(c->p->i[0], M(0)->ndim);
    const tc_tensor *gv = tc_ga_where(A, tc_ga_cmps(A, TC_OP_EQ, Y0, 0), NULL,
                                      tc_ga_div(A, G0, tc_ga_scale(A, Y0, 2)));
    tc_ga_out(A, var_grad(A, c, gv, d), &gin[0]);
    return tc_ga_done(A);
}

/* norm_backward of PyTorch 1.13 for p = 0, 1, 2, +-inf, p < 1 and general p. */
TC_GRAD_RULE(norm_rule, TC_SAVE_IN0 | TC_SAVE_OUT0)
{
    double p = c->p->s[0];
    if (p == 0) return TC_OK; /* a count: zero gradient */
    tc_garena A_ = {0}, *A = &A_;
    int d = tc_g_reduce_dim(c->p->i[0], M(0)->ndim), keep = (int)c->p->i[1], dt = M(0)->dtype;
    const tc_tensor *x = X0;
    const tc_tensor *g = keepdim_of(A, G0, d, keep, M(0));
    const tc_tensor *n = keepdim_of(A, Y0, d, keep, M(0));
    const tc_tensor *sg = tc_ga_ew(A, TC_OP_SIGN, x, NULL, NULL, 0, 0), *r;
    if (p == 1) {
        r = tc_ga_mul(A, sg, g);
    } else if (p == 2) {
        r = tc_ga_mul(A, g, tc_ga_where(A, tc_ga_cmps(A, TC_OP_EQ, n, 0), NULL, tc_ga_div(A, x, n)));
    } else if (isinf(p)) { /* the gradient goes to the elements whose |x| is the norm, split evenly */
        const tc_tensor *ax = tc_ga_ew(A, TC_OP_ABS, x, NULL, NULL, 0, 0);
        const tc_tensor *mask = tc_ga_ew(A, TC_OP_BITOR, tc_ga_ew(A, TC_OP_EQ, ax, n, NULL, 0, 0),
                                         tc_ga_ew(A, TC_OP_NE, ax, ax, NULL, 0, 0), NULL, 0, 0); /* or NaN */
        const tc_tensor *mf = as_float(A, mask, dt);
        const tc_tensor *cnt = op1(A, TC_OP_SUM, mf, d < 0 ? -1 : d, 1);
        r = tc_ga_mul(A, tc_ga_mul(A, sg, tc_ga_div(A, g, cnt)), mf);
    } else if (p < 1) {
        const tc_tensor *ap = tc_ga_ew(A, TC_OP_POW, tc_ga_ew(A, TC_OP_ABS, x, NULL, NULL, 0, 0), scal(A, dt, p - 1),
                                       NULL, 0, 0);
        ap = tc_ga_where(A, tc_ga_cmps(A, TC_OP_EQ, x, 0), NULL, ap);
        r = tc_ga_div(A, tc_ga_mul(A, tc_ga_mul(A, sg, ap), g), tc_ga_ew(A, TC_OP_POW, n, scal(A, dt, p - 1), NULL, 0, 0));
    } else { /* x |x|^(p-2) written as sgn(x) |x|^(p-1) below p = 2, where |0|^(p-2) is inf */
        const tc_tensor *ax = tc_ga_ew(A, TC_OP_ABS, x, NULL, NULL, 0, 0);
        const tc_tensor *scaled = p < 2 ? tc_ga_mul(A, sg, tc_ga_ew(A, TC_OP_POW, ax, scal(A, dt, p - 1), NULL, 0, 0))
                                        : tc_ga_mul(A, x, tc_ga_ew(A, TC_OP_POW, ax, scal(A, dt, p - 2), NULL, 0, 0));
        const tc_tensor *sv = tc_ga_div(A, g, tc_ga_ew(A, TC_OP_POW, n, scal(A, dt, p - 1), NULL, 0, 0));
        r = tc_ga_mul(A, scaled, tc_ga_where(A, tc_ga_cmps(A, TC_OP_EQ, n, 0), NULL, sv));
    }
    tc_ga_out(A, r, &gin[0]);
    return tc_ga_done(A);
}

/* ---- max, min ---------------------------------------------------------------------------- */

/* With a dim: scatter the gradient to the returned indices. Over every element: split it
 * evenly among the elements equal to the result (NaN counts as equal to a NaN result). */
TC_GRAD_RULE(maxmin_rule, TC_SAVE_IN0 | TC_SAVE_OUT0 | TC_SAVE_OUT1)
{
    tc_garena A_ = {0}, *A = &A_;
    int d = tc_g_reduce_dim(c->p->i[0], M(0)->ndim), keep = (int)c->p->i[1];
    const tc_tensor *g = keepdim_of(A, G0, d, keep, M(0)), *r;
    if (d >= 0) {
        if (!Y1 || Y1->dtype != TC_I64 || tc_tensor_numel(Y1) != tc_numel_of(c->out_meta[0].ndim, c->out_meta[0].size)) {
            tc_ga_done(A);
            return tc_set_error(TC_ERR_INTERNAL, "%s backward: the index output was not saved", tc_op_info(c->op)->name);
        }
        r = scatter_into_zeros(A, M(0), d, keepdim_of(A, Y1, d, keep, M(0)), g);
    } else {
        const tc_tensor *y = keepdim_of(A, Y0, d, keep, M(0));
        const tc_tensor *nan = tc_ga_ew(A, TC_OP_BITAND, tc_ga_ew(A, TC_OP_NE, X0, X0, NULL, 0, 0),
                                        tc_ga_ew(A, TC_OP_NE, y, y, NULL, 0, 0), NULL, 0, 0);
        const tc_tensor *mask = tc_ga_ew(A, TC_OP_BITOR, tc_ga_ew(A, TC_OP_EQ, X0, y, NULL, 0, 0), nan, NULL, 0, 0);
        const tc_tensor *cnt = op1(A, TC_OP_SUM, as_float(A, mask, M(0)->dtype), -1, 0);
        r = tc_ga_where(A, mask, tc_ga_div(A, g, cnt), NULL);
    }
    tc_ga_out(A, r, &gin[0]);
    return tc_ga_done(A);
}

/* ---- prod, cumsum, cumprod ------------------------------------------------------------------ */

/* Product along d of every element but x itself: exclusive products from the left and
 * from the right (no division, so zeros are exact). */
static const tc_tensor *prod_others(tc_garena *A, const tc_tensor *x, int d)
{
    if (A->err || !x) return NULL;
    int64_t n = x->size[d];
    tc_tmeta om;
    tc_tmeta_of(x, &om);
    om.size[d] = 1;
    const tc_tensor *ones = tc_ga_full(A, &om, 1);
    if (n == 1) return ones;
    tc_params pn = {.i = {d, 0, n - 1}}, pn1 = {.i = {d, 1, n - 1}}, pc = {.i = {d}};
    const tc_tensor *head = tc_ga_op(A, TC_OP_NARROW, &x, 1, &pn);
    const tc_tensor *tail = tc_ga_op(A, TC_OP_NARROW, &x, 1, &pn1);
    const tc_tensor *l_in[2] = {ones, head}, *r_in[2] = {tail, ones};
    const tc_tensor *left = op1(A, TC_OP_CUMPROD, tc_ga_op(A, TC_OP_CAT, l_in, 2, &pc), d, 0);
    const tc_tensor *right = flip(A, op1(A, TC_OP_CUMPROD, flip(A, tc_ga_op(A, TC_OP_CAT, r_in, 2, &pc), d), d, 0), d);
    return tc_ga_mul(A, left, right);
}

TC_GRAD_RULE(prod_rule, TC_SAVE_IN0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = M(0);
    int d = tc_g_reduce_dim(c->p->i[0], m->ndim);
    if (tc_numel_of(m->ndim, m->size) == 0) {
        tc_ga_out(A, tc_ga_full(A, m, 0), &gin[0]);
        return tc_ga_done(A);
    }
    const tc_tensor *g = keepdim_of(A, G0, d, (int)c->p->i[1], m), *others;
    if (d >= 0) {
        others = prod_others(A, X0, d);
    } else { /* every element: along the flattened input */
        tc_tmeta flat = *m;
        flat.ndim = 1;
        flat.size[0] = tc_numel_of(m->ndim, m->size);
        others = tc_ga_reshape(A, prod_others(A, tc_ga_reshape(A, X0, &flat), 0), m);
    }
    tc_ga_out(A, tc_ga_mul(A, g, others), &gin[0]);
    return tc_ga_done(A);
}

static int scan_dim(const tc_grad_ctx *c) { return (int)(c->p->i[0] < 0 ? c->p->i[0] + M(0)->ndim : c->p->i[0]); }

/* cumsum: the reversed cumulative sum of g. */
TC_GRAD_RULE(cumsum_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    if (M(0)->ndim == 0) {
        tc_ga_out(A, tc_ga_reshape(A, G0, M(0)), &gin[0]);
        return tc_ga_done(A);
    }
    int d = scan_dim(c);
    tc_ga_out(A, flip(A, op1(A, TC_OP_CUMSUM, flip(A, G0, d), d, 0), d), &gin[0]);
    return tc_ga_done(A);
}

/* cumprod, exact with zeros. Along d, with z the first zero of a slice:
 *   i < z:  sum_{j>=i} g_j y_j / x_i        (x_i != 0; y_j = 0 for j >= z anyway)
 *   i = z:  L_z sum_{j>=z} g_j prod_{z<k<=j} x_k   (L_z: product of the x before z)
 *   i > z:  0                                (every y_j with j >= i contains x_z = 0) */
TC_GRAD_RULE(cumprod_rule, TC_SAVE_IN0 | TC_SAVE_OUT0)
{
    tc_garena A_ = {0}, *A = &A_;
    if (M(0)->ndim == 0) {
        tc_ga_out(A, tc_ga_reshape(A, G0, M(0)), &gin[0]);
        return tc_ga_done(A);
    }
    int d = scan_dim(c), dt = M(0)->dtype;
    const tc_tensor *x = X0, *g = G0;
    const tc_tensor *zero = tc_ga_cmps(A, TC_OP_EQ, x, 0);
    const tc_tensor *seen = op1(A, TC_OP_CUMSUM, as_float(A, zero, dt), d, 0); /* zeros up to here */
    const tc_tensor *before = tc_ga_cmps(A, TC_OP_EQ, seen, 0);
    const tc_tensor *first = tc_ga_ew(A, TC_OP_BITAND, zero, tc_ga_cmps(A, TC_OP_EQ, seen, 1), NULL, 0, 0);
    const tc_tensor *xs = tc_ga_where(A, before, x, scal(A, dt, 1)); /* x before z, 1 from z on */
    const tc_tensor *gy = tc_ga_mul(A, g, Y0);
    const tc_tensor *r1 = tc_ga_div(A, flip(A, op1(A, TC_OP_CUMSUM, flip(A, gy, d), d, 0), d), xs);
    const tc_tensor *upto = tc_ga_ew(A, TC_OP_BITOR, before, first, NULL, 0, 0);
    const tc_tensor *after = op1(A, TC_OP_CUMPROD, tc_ga_where(A, upto, scal(A, dt, 1), x), d, 0);
    const tc_tensor *tailsum = op1(A, TC_OP_SUM, tc_ga_where(A, before, NULL, tc_ga_mul(A, g, after)), d, 1);
    const tc_tensor *r2 = tc_ga_mul(A, op1(A, TC_OP_CUMPROD, xs, d, 0), tailsum);
    tc_ga_out(A, tc_ga_where(A, before, r1, tc_ga_where(A, first, r2, NULL)), &gin[0]);
    return tc_ga_done(A);
}

/* ---- sort, topk, kthvalue, median ------------------------------------------------------------ */

/* Routes g to the input positions named by the index output. keep < 0: the op keeps the
 * dim's rank (sort, topk); else kthvalue/median's keepdim. */
static tc_status select_grad(const tc_grad_ctx *c, tc_tensor **gin, int keep)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = M(0);
    if (m->ndim == 0) { /* a 0-dim input: the result is the input (or empty, for topk k = 0) */
        if (tc_numel_of(c->out_meta[0].ndim, c->out_meta[0].size) == 1) tc_ga_out(A, tc_ga_reshape(A, G0, m), &gin[0]);
        return tc_ga_done(A);
    }
    int d = (int)(c->p->i[0] < 0 ? c->p->i[0] + m->ndim : c->p->i[0]);
    const tc_tensor *g = G0, *idx = Y1;
    if (!idx || idx->dtype != TC_I64 || tc_tensor_numel(idx) != tc_tensor_numel(g)) {
        tc_ga_done(A);
        return tc_set_error(TC_ERR_INTERNAL, "%s backward: the index output was not saved", tc_op_info(c->op)->name);
    }
    if (keep == 0) {
        g = keepdim_of(A, g, d, 0, m);
        idx = keepdim_of(A, idx, d, 0, m);
    }
    tc_ga_out(A, scatter_into_zeros(A, m, d, idx, g), &gin[0]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(sort_rule, TC_SAVE_OUT1) { return select_grad(c, gin, -1); }
TC_GRAD_RULE(kthvalue_rule, TC_SAVE_OUT1) { return select_grad(c, gin, c->p->i[2] != 0); }
TC_GRAD_RULE(median_rule, TC_SAVE_OUT1) { return select_grad(c, gin, c->p->i[1] != 0); }

void tc_grad_rules_reduce(tc_grad_rule *t)
{
    TC_GRAD_REG(t, SUM, sum_rule);
    TC_GRAD_REG(t, PROD, prod_rule);
    TC_GRAD_REG(t, MEAN, mean_rule);
    TC_GRAD_REG(t, VAR, var_rule);
    TC_GRAD_REG(t, STD, std_rule);
    TC_GRAD_REG(t, NORM, norm_rule);
    TC_GRAD_REG(t, MAX, maxmin_rule);
    TC_GRAD_REG(t, MIN, maxmin_rule);
    TC_GRAD_REG(t, CUMSUM, cumsum_rule);
    TC_GRAD_REG(t, CUMPROD, cumprod_rule);
    TC_GRAD_REG(t, SORT, sort_rule);
    TC_GRAD_REG(t, TOPK, sort_rule);
    TC_GRAD_REG(t, KTHVALUE, kthvalue_rule);
    TC_GRAD_REG(t, MEDIAN, median_rule);
}
