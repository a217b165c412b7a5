/* rules_ln.c -- the gradient rule of layer_norm (see grad.h).
 *
 *   layer_norm(x, w, b) -> y, stats:  one layer_norm_backward call gives gx and a (2, K)
 *   tensor whose rows are gw and gb (reshaped to the weight's sizes).
 *
 * layer_norm_backward has no rule of its own. When a graph of the gradient is wanted
 * (create_graph), or stats received a gradient, the rule composes the same math from
 * ordinary ops on x seen as (M, K), the row statistics recomputed from x so they are
 * differentiated too:
 *   xhat = (x - mean) rstd,  h = g w,  gx = rstd (h - mean(h) - xhat mean(h xhat)),
 *   gw = sum over rows of g xhat,  gb = sum over rows of g,
 *   and from stats' gradient (gm, gr per row): gx += (gm - gr rstd^2 xhat) / K
 *   (d mean / dx = 1/K, d rstd / dx = -rstd^3 (x - mean) / K).
 * Half inputs are computed in float32 there, as the forward computed them.
 */
#include "grad.h"

enum { X, W, B };

/* The shapes the composed math works in, in the stats dtype. */
typedef struct ln_view {
    tc_tmeta rows, col, row; /* (M, K), (M, 1), (1, K) */
    double K;
} ln_view;

static void ln_view_make(const tc_grad_ctx *c, ln_view *v)
{
    const tc_tmeta *mx = &c->meta[X];
    int dt = c->out_meta[1].dtype, nd = (int)c->p->i[0];
    int64_t M = 1, K = 1;
    for (int d = 0; d < mx->ndim; d++) {
        if (d < mx->ndim - nd) M *= mx->size[d];
        else K *= mx->size[d];
    }
    v->rows = (tc_tmeta){.dtype = dt, .ndim = 2, .device = mx->device, .size = {M, K}};
    v->col = (tc_tmeta){.dtype = dt, .ndim = 2, .device = mx->device, .size = {M, 1}};
    v->row = (tc_tmeta){.dtype = dt, .ndim = 2, .device = mx->device, .size = {1, K}};
    v->K = (double)K;
}

/* t converted to dtype dt (a copy when it differs). */
static const tc_tensor *as_dtype(tc_garena *A, const tc_tensor *t, int dt)
{
    if (A->err || !t || t->dtype == dt) return t;
    tc_tensor *r = NULL;
    tc_status s = tc_g_copy(t, dt, &r);
    return tc_ga_keep(A, s, r);
}

/* t (any sizes of m's element count) as m: its sizes and dtype. */
static const tc_tensor *as_meta(tc_garena *A, const tc_tensor *t, const tc_tmeta *m)
{
    return tc_ga_reshape(A, as_dtype(A, t, m->dtype), m);
}

/* Row r of the (2, n) t as m. */
static const tc_tensor *stats_row(tc_garena *A, const tc_tensor *t, int64_t r, const tc_tmeta *m)
{
    if (A->err || !t) return NULL;
    tc_tensor *v = NULL;
    tc_status s = tc_g_narrow(t, 0, r, 1, &v);
    return as_meta(A, tc_ga_keep(A, s, v), m);
}

/* gx, gw, gb from ordinary ops (create_graph, or a gradient reaching stats). */
static tc_status composed(const tc_grad_ctx *c, tc_tensor **gin)
{
    tc_garena A_ = {0}, *A = &A_;
    ln_view v;
    ln_view_make(c, &v);
    const tc_tensor *xf = as_meta(A, c->in[X], &v.rows);
    const tc_tensor *mean = tc_ga_scale(A, tc_ga_sum(A, xf, 1, 1), 1 / v.K);
    const tc_tensor *xc = tc_ga_sub(A, xf, mean);
    const tc_tensor *var = tc_ga_scale(A, tc_ga_sum(A, tc_ga_mul(A, xc, xc), 1, 1), 1 / v.K);
    const tc_tensor *rstd = tc_ga_ew(A, TC_OP_RSQRT, tc_ga_adds(A, var, c->p->s[0]), NULL, NULL, 0, 0);
    const tc_tensor *xhat = tc_ga_mul(A, xc, rstd), *gx = NULL;
    if (c->gout[0]) {
        const tc_tensor *g = as_meta(A, c->gout[0], &v.rows);
        const tc_tensor *h = c->in[W] ? tc_ga_mul(A, g, as_meta(A, c->in[W], &v.row)) : g;
        const tc_tensor *mh = tc_ga_scale(A, tc_ga_sum(A, h, 1, 1), 1 / v.K);
        const tc_tensor *mhx = tc_ga_scale(A, tc_ga_sum(A, tc_ga_mul(A, h, xhat), 1, 1), 1 / v.K);
        if (c->needs[X]) gx = tc_ga_mul(A, tc_ga_sub(A, tc_ga_sub(A, h, mh), tc_ga_mul(A, xhat, mhx)), rstd);
        if (c->needs[W]) tc_ga_out(A, as_meta(A, tc_ga_sum(A, tc_ga_mul(A, g, xhat), 0, 1), &c->meta[W]), &gin[W]);
        if (c->needs[B]) tc_ga_out(A, as_meta(A, tc_ga_sum(A, g, 0, 1), &c->meta[B]), &gin[B]);
    }
    if (c->gout[1] && c->needs[X]) {
        const tc_tensor *gm = stats_row(A, c->gout[1], 0, &v.col), *gr = stats_row(A, c->gout[1], 1, &v.col);
        const tc_tensor *t = tc_ga_mul(A, tc_ga_mul(A, gr, tc_ga_mul(A, rstd, rstd)), xhat);
        const tc_tensor *gs = tc_ga_scale(A, tc_ga_sub(A, gm, t), 1 / v.K);
        gx = gx ? tc_ga_add(A, gx, gs) : gs;
    }
    if (gx) tc_ga_out(A, as_meta(A, gx, &c->meta[X]), &gin[X]);
    return tc_ga_done(A);
}

/* gx, gw, gb with layer_norm_backward (y's gradient only). */
static tc_status fused(const tc_grad_ctx *c, tc_tensor **gin)
{
    const tc_tensor *in[4] = {c->gout[0], c->in[X], c->in[W], c->out[1]};
    tc_tensor *res[2] = {NULL, NULL};
    tc_params p = {.s = {c->p->s[0]}, .i = {c->p->i[0]}};
    TRY(tc_op_run(TC_OP_LAYER_NORM_BACKWARD, in, 4, &p, res, 2));
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *gwb = tc_ga_keep(A, TC_OK, res[1]);
    if (c->needs[X]) gin[X] = res[0], res[0] = NULL;
    tc_tensor_release(res[0]);
    if (c->needs[W]) tc_ga_out(A, stats_row(A, gwb, 0, &c->meta[W]), &gin[W]);
    if (c->needs[B]) tc_ga_out(A, stats_row(A, gwb, 1, &c->meta[B]), &gin[B]);
    return tc_ga_done(A);
}

/* Written out rather than with TC_GRAD_RULE: the weight is saved when there is one but may be
 * absent (NULL), which tc_g_begin would report as a missing saved input. */
static tc_status layer_norm_rule(const tc_grad_ctx *c, tc_tensor **gin)
{
    bool zero = false;
    TRY(tc_g_begin(c, TC_SAVE_IN0 | TC_SAVE_OUT1, &zero));
    if (zero) return TC_OK;
    if (!c->out[1]) return tc_set_error(TC_ERR_INTERNAL, "layer_norm backward: the stats output was not saved");
    bool compose = c->gout[1] || tc_grad_enabled();
    return tc_g_end(c, compose ? composed(c, gin) : fused(c, gin), gin);
}

void tc_grad_rules_ln(tc_grad_rule *t)
{
    t[TC_OP_LAYER_NORM] = (tc_grad_rule){layer_norm_rule, TC_SAVE_IN0 | TC_SAVE_IN1 | TC_SAVE_OUT1};
}
