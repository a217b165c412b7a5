/* rules_nn.c -- gradient rules of the nn ops: convolution, pooling, softmax (see grad.h).
 *
 * Written with ops only, so gradients of gradients work: each backward op is itself
 * differentiable and its rule is here too.
 *   conv2d            gx = conv_transpose2d(g, w)   gw = conv2d_weight(x, g)   gb = sum g
 *   conv_transpose2d  gx = conv2d(g, w)             gw = conv2d_weight(g, x)   gb = sum g
 *   conv2d_weight     gx = conv_transpose2d(go, G)  ggo = conv2d(x, G)   (bilinear in x, go)
 *   max / adaptive max pooling   scatter_add of g at the saved indices, per H*W plane
 *   avg_pool2d <-> avg_pool2d_backward, adaptive_avg_pool2d <-> its backward: each is the
 *                     other's adjoint (both linear), so each one's rule is the other op
 *   softmax           gx = softmax_backward(g, y) = y * (g - sum(g * y))
 *   log_softmax       gx = log_softmax_backward(g, y) = g - exp(y) * sum(g)
 *   softmax_backward  (s = sum(g y))   gg = softmax_backward(G, y)   gy = G (g - s) - g sum(G y)
 *                     (causal, i1: g and G taken as 0 in the left-out part, which the op
 *                     never reads, so gy is 0 there too)
 *   log_softmax_backward (S = sum(g))  gg = G - sum(G exp(y))        gy = -G exp(y) S
 *                     (y is a free input there; its gradient reaches x through the forward)
 * conv_transpose2d's output padding is recomputed from the saved sizes: the input size of
 * a conv2d is not determined by its output size alone (floor division).
 *   batch_norm        gx, gw, gb = batch_norm_backward(g, x, w, stats) (one pass over the
 *                     data); under create_graph the same math from ordinary ops instead, the
 *                     batch statistics recomputed from x so they are differentiated too.
 */
#include "grad.h"

#define G0 (c->gout[0])

/* A conv op on (x, w[, NULL bias]): tc_ga_op refuses NULL operands, the bias may be one. */
static const tc_tensor *conv_op(tc_garena *A, tc_op op, const tc_tensor *const *in, int nin, const tc_params *p)
{
    if (A->err) return NULL;
    if (!in[0] || !in[1]) {
        A->err = tc_set_error(TC_ERR_INTERNAL, "gradient rule: missing operand");
        return NULL;
    }
    tc_tensor *t = NULL;
    tc_status s = tc_g_op(op, in, nin, p, &t);
    return tc_ga_keep(A, s, t);
}

/* Geometry params of a conv call: shape[0..5] = stride, padding, dilation; i0 = groups. */
static tc_params conv_params(const tc_params *fw, int n, const int64_t *extra)
{
    tc_params p = {.nshape = n, .i = {fw->i[0]}};
    for (int i = 0; i < 6; i++) p.shape[i] = fw->shape[i];
    for (int i = 6; i < n; i++) p.shape[i] = extra[i - 6];
    return p;
}

/* The output padding making conv_transpose2d of a (.., ho, wo) gradient give (.., h, w). */
static void out_pad(const tc_params *fw, int64_t kh, int64_t kw, int64_t h, int64_t w, int64_t ho, int64_t wo,
                    int64_t *op)
{
    const int64_t *s = fw->shape;
    op[0] = h - ((ho - 1) * s[0] - 2 * s[2] + s[4] * (kh - 1) + 1);
    op[1] = w - ((wo - 1) * s[1] - 2 * s[3] + s[5] * (kw - 1) + 1);
}

/* conv_transpose2d(g, w) sized like the conv2d input m (the input gradient of conv2d). */
static const tc_tensor *conv_input_grad(tc_garena *A, const tc_params *fw, const tc_tensor *g, const tc_tensor *w,
                                        const tc_tmeta *m)
{
    if (A->err || !g || !w) return NULL;
    int64_t op[2];
    out_pad(fw, w->size[2], w->size[3], m->size[2], m->size[3], g->size[2], g->size[3], op);
    tc_params p = conv_params(fw, 8, op);
    const tc_tensor *in[3] = {g, w, NULL};
    return conv_op(A, TC_OP_CONV_TRANSPOSE2D, in, 3, &p);
}

/* The bias gradient: g (N, O, H, W) summed to (O), through (N, O, H*W): one reduction
 * along rows of H*W, where summing W then H reduced rows of W (28 for LeNet's first
 * layer) at a few times the cost. */
static const tc_tensor *bias_grad(tc_garena *A, const tc_tensor *g)
{
    tc_tmeta flat = {.dtype = g->dtype, .ndim = 3, .device = g->device,
                     .size = {g->size[0], g->size[1], g->size[2] * g->size[3]}};
    return tc_ga_sum(A, tc_ga_sum(A, tc_ga_reshape(A, g, &flat), 2, 0), 0, 0);
}

TC_GRAD_RULE(conv2d_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *x = c->in[0], *w = c->in[1];
    if (c->needs[0]) tc_ga_out(A, conv_input_grad(A, c->p, G0, w, &c->meta[0]), &gin[0]);
    if (c->needs[1]) {
        int64_t k[2] = {w->size[2], w->size[3]};
        tc_params p = conv_params(c->p, 8, k);
        const tc_tensor *in[2] = {x, G0};
        tc_ga_out(A, tc_ga_op(A, TC_OP_CONV2D_WEIGHT, in, 2, &p), &gin[1]);
    }
    if (c->nin > 2 && c->needs[2]) tc_ga_out(A, bias_grad(A, G0), &gin[2]);
    return tc_ga_done(A);
}

/* y = conv_transpose2d(x, w): x sits on conv2d's output side, y on its input side. When
 * the output padding reaches the stride (allowed below the dilation), conv2d of y yields
 * more rows than x has: the extra ones are cut off (gx) or x is padded with zeros (gw). */
TC_GRAD_RULE(conv_transpose2d_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *x = c->in[0], *w = c->in[1];
    tc_params p = conv_params(c->p, 6, NULL);
    const tc_tmeta *mx = &c->meta[0];
    if (c->needs[0]) {
        const tc_tensor *in[3] = {G0, w, NULL};
        const tc_tensor *r = conv_op(A, TC_OP_CONV2D, in, 3, &p);
        for (int d = 2; d < 4 && r; d++)
            if (r->size[d] != mx->size[d]) {
                tc_tensor *t = NULL;
                tc_status st = tc_g_narrow(r, d, 0, mx->size[d], &t);
                r = tc_ga_keep(A, st, t);
            }
        tc_ga_out(A, r, &gin[0]);
    }
    if (c->needs[1]) {
        const int64_t *s = c->p->shape;
        int64_t kh = w->size[2], kw = w->size[3];
        tc_tmeta pad = *mx; /* the conv2d output size of y's geometry */
        pad.size[2] = (G0->size[2] + 2 * s[2] - s[4] * (kh - 1) - 1) / s[0] + 1;
        pad.size[3] = (G0->size[3] + 2 * s[3] - s[5] * (kw - 1) - 1) / s[1] + 1;
        const tc_tensor *xs = x;
        if (pad.size[2] != mx->size[2] || pad.size[3] != mx->size[3]) {
            tc_tensor *t = NULL;
            tc_status st = tc_g_pad_to(x, &pad, &t);
            xs = tc_ga_keep(A, st, t);
        }
        int64_t k[2] = {kh, kw};
        tc_params pw = conv_params(c->p, 8, k);
        const tc_tensor *in[2] = {G0, xs};
        tc_ga_out(A, tc_ga_op(A, TC_OP_CONV2D_WEIGHT, in, 2, &pw), &gin[1]);
    }
    if (c->nin > 2 && c->needs[2]) tc_ga_out(A, bias_grad(A, G0), &gin[2]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(conv2d_weight_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *x = c->in[0], *go = c->in[1];
    if (c->needs[0]) tc_ga_out(A, conv_input_grad(A, c->p, go, G0, &c->meta[0]), &gin[0]);
    if (c->needs[1]) {
        tc_params p = conv_params(c->p, 6, NULL);
        const tc_tensor *in[3] = {x, G0, NULL};
        tc_ga_out(A, conv_op(A, TC_OP_CONV2D, in, 3, &p), &gin[1]);
    }
    return tc_ga_done(A);
}

/* ---- pooling ------------------------------------------------------------------------------- */

/* Max pooling (fixed or adaptive): the gradient goes to the saved argmax of each window.
 * Planes are flattened to (P, H*W) and (P, Ho*Wo), then scatter_add into zeros. */
TC_GRAD_RULE(maxpool_rule, TC_SAVE_OUT1)
{
    const tc_tensor *idx = c->out[1];
    if (!idx || idx->dtype != TC_I64)
        return tc_set_error(TC_ERR_INTERNAL, "%s backward: the index output was not saved", tc_op_info(c->op)->name);
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = &c->meta[0], *mo = &c->out_meta[0];
    int nd = m->ndim;
    tc_tmeta flat = {.dtype = m->dtype, .ndim = 2, .device = m->device},
             flat_out = {.dtype = mo->dtype, .ndim = 2, .device = mo->device};
    flat.size[0] = 1;
    for (int d = 0; d < nd - 2; d++) flat.size[0] *= m->size[d];
    flat.size[1] = m->size[nd - 2] * m->size[nd - 1];
    flat_out.size[0] = flat.size[0];
    flat_out.size[1] = mo->size[nd - 2] * mo->size[nd - 1];
    tc_params p = {.i = {1}};
    /* the window maxima's gradients added in place into fresh zeros (ours alone: an
     * out-of-place scatter_add would copy the zeros into a second input-sized buffer) */
    tc_tensor *zeros = tc_ga_full(A, &flat, 0);
    const tc_tensor *in[3] = {zeros, tc_ga_reshape(A, idx, &flat_out), tc_ga_reshape(A, G0, &flat_out)};
    if (zeros && in[1] && in[2]) {
        tc_tensor *res[1] = {zeros};
        tc_status s = tc_op_run(TC_OP_SCATTER_ADD, in, 3, &p, res, 1);
        if (s && !A->err) A->err = s;
    }
    tc_ga_out(A, tc_ga_reshape(A, A->err ? NULL : zeros, m), &gin[0]);
    return tc_ga_done(A);
}

/* avg_pool2d and avg_pool2d_backward: shape[0..5] kernel, stride, padding; i0, i1 modes. */
TC_GRAD_RULE(avgpool_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = &c->meta[0];
    tc_params p = {.nshape = 8, .i = {c->p->i[0], c->p->i[1]}};
    for (int i = 0; i < 6; i++) p.shape[i] = c->p->shape[i];
    p.shape[6] = m->size[m->ndim - 2], p.shape[7] = m->size[m->ndim - 1];
    const tc_tensor *in[1] = {G0};
    tc_ga_out(A, tc_ga_op(A, TC_OP_AVG_POOL2D_BACKWARD, in, 1, &p), &gin[0]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(avgpool_backward_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    tc_params p = {.nshape = 6, .i = {c->p->i[0], c->p->i[1]}};
    for (int i = 0; i < 6; i++) p.shape[i] = c->p->shape[i];
    const tc_tensor *in[1] = {G0};
    tc_ga_out(A, tc_ga_op(A, TC_OP_AVG_POOL2D, in, 1, &p), &gin[0]);
    return tc_ga_done(A);
}

/* adaptive_avg_pool2d (to shape {oH, oW}) and its backward (to shape {H, W}): each rule
 * runs the other op back to the input's plane size. */
TC_GRAD_RULE(adaptive_avg_rule, 0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tmeta *m = &c->meta[0];
    tc_params p = {.nshape = 2, .shape = {m->size[m->ndim - 2], m->size[m->ndim - 1]}};
    const tc_tensor *in[1] = {G0};
    tc_op back = c->op == TC_OP_ADAPTIVE_AVG_POOL2D ? TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD : TC_OP_ADAPTIVE_AVG_POOL2D;
    tc_ga_out(A, tc_ga_op(A, back, in, 1, &p), &gin[0]);
    return tc_ga_done(A);
}

/* ---- softmax -------------------------------------------------------------------------------- */

static int softmax_dim(const tc_grad_ctx *c)
{
    int nd = c->meta[0].ndim, d = (int)c->p->i[0];
    if (nd == 0) return 0;
    return d < 0 ? d + nd : d;
}

/* softmax and log_softmax: one backward op on (g, y). */
TC_GRAD_RULE(softmax_rule, TC_SAVE_OUT0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *in[2] = {G0, c->out[0]};
    bool sm = c->op == TC_OP_SOFTMAX;
    tc_params p = {.i = {c->p->i[0], sm ? c->p->i[1] : 0}}; /* causal: the backward reads the live part only */
    tc_op back = sm ? TC_OP_SOFTMAX_BACKWARD : TC_OP_LOG_SOFTMAX_BACKWARD;
    tc_ga_out(A, tc_ga_op(A, back, in, 2, &p), &gin[0]);
    return tc_ga_done(A);
}

/* The live part of a causal softmax's (L, S) matrices (y's last two dims): a uint8 (L, S)
 * mask, 1 where j <= i -- the nonzeros of a causal softmax of zeros. */
static const tc_tensor *causal_live(tc_garena *A, const tc_tensor *y)
{
    tc_tmeta m;
    tc_tmeta_of(y, &m);
    m.size[0] = m.size[m.ndim - 2], m.size[1] = m.size[m.ndim - 1], m.ndim = 2;
    const tc_tensor *in[1] = {tc_ga_full(A, &m, 0)};
    tc_params p = {.i = {1, 1}};
    return tc_ga_cmps(A, TC_OP_GT, tc_ga_op(A, TC_OP_SOFTMAX, in, 1, &p), 0);
}

TC_GRAD_RULE(softmax_backward_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *g = c->in[0], *y = c->in[1], *G = G0;
    int d = softmax_dim(c);
    bool causal = c->p->i[1] != 0;
    if (c->needs[0]) {
        const tc_tensor *in[2] = {G0, y};
        tc_params p = {.i = {c->p->i[0], causal}};
        tc_ga_out(A, tc_ga_op(A, TC_OP_SOFTMAX_BACKWARD, in, 2, &p), &gin[0]);
    }
    if (c->needs[1]) {
        if (causal) { /* the op reads neither g nor y in the left-out part: there they are 0 */
            const tc_tensor *live = causal_live(A, y);
            g = tc_ga_where(A, live, g, NULL), G = tc_ga_where(A, live, G, NULL);
        }
        const tc_tensor *s = tc_ga_sum(A, tc_ga_mul(A, g, y), d, 1), *t = tc_ga_sum(A, tc_ga_mul(A, G, y), d, 1);
        tc_ga_out(A, tc_ga_sub(A, tc_ga_mul(A, G, tc_ga_sub(A, g, s)), tc_ga_mul(A, g, t)), &gin[1]);
    }
    return tc_ga_done(A);
}

TC_GRAD_RULE(log_softmax_backward_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *g = c->in[0], *y = c->in[1];
    int d = softmax_dim(c);
    const tc_tensor *p = tc_ga_ew(A, TC_OP_EXP, y, NULL, NULL, 0, 0);
    if (c->needs[0]) tc_ga_out(A, tc_ga_sub(A, G0, tc_ga_sum(A, tc_ga_mul(A, G0, p), d, 1)), &gin[0]);
    if (c->needs[1]) tc_ga_out(A, tc_ga_neg(A, tc_ga_mul(A, tc_ga_mul(A, G0, p), tc_ga_sum(A, g, d, 1))), &gin[1]);
    return tc_ga_done(A);
}

/* ---- batch normalization ---------------------------------------------------------------------- */

/* x, gradients and statistics are seen as (N, C, S) (S: the spatial dims flattened), in the
 * stats dtype (f16/bf16 x: float32 math, as the forward). */
typedef struct bn_view {
    tc_tmeta flat, chan, vec;        /* (N, C, S), (1, C, 1), (C) */
    double M;                        /* N * S */
    const tc_tensor *xf, *mean, *invstd; /* (N, C, S), (1, C, 1), (1, C, 1) */
} bn_view;

/* Row r of a (2, C) tensor, as (C) or reshaped to shape. */
static const tc_tensor *bn_row(tc_garena *A, const tc_tensor *t, int64_t r, const tc_tmeta *shape)
{
    if (A->err || !t) return NULL;
    tc_tensor *v = NULL;
    tc_params p = {.i = {0, r}};
    tc_status s = tc_g_op(TC_OP_SELECT, &t, 1, &p, &v);
    const tc_tensor *row = tc_ga_keep(A, s, v);
    return shape ? tc_ga_reshape(A, row, shape) : row;
}

/* t in m's dtype (a converting copy when it differs). */
static const tc_tensor *bn_as(tc_garena *A, const tc_tensor *t, const tc_tmeta *m)
{
    if (A->err || !t || t->dtype == m->dtype) return t;
    tc_tensor *r = NULL;
    tc_status s = tc_g_copy(t, m->dtype, &r);
    return tc_ga_keep(A, s, r);
}

/* The per-channel sum of (N, C, S) t as (1, C, 1). */
static const tc_tensor *bn_csum(tc_garena *A, const tc_tensor *t)
{
    return tc_ga_sum(A, tc_ga_sum(A, t, 2, 1), 0, 1);
}

/* *slot += t (slot owned by the rule). */
static void bn_accum(tc_garena *A, const tc_tensor *t, tc_tensor **slot)
{
    if (A->err || !t) return;
    if (!*slot) {
        tc_ga_out(A, t, slot);
        return;
    }
    const tc_tensor *sum = tc_ga_add(A, *slot, t);
    if (!sum) return;
    tc_tensor_release(*slot);
    *slot = NULL;
    tc_ga_out(A, sum, slot);
}

/* The shapes, and x with the statistics: recomputed from x with ops when recompute (the
 * training forward under create_graph: they are then differentiated too), else the saved
 * stats output. x is skipped when !need_x (the fused path: no f32 copy of a half x). */
static void bn_view_make(tc_garena *A, const tc_grad_ctx *c, bool need_x, bool recompute, bn_view *v)
{
    const tc_tmeta *mx = &c->meta[0];
    int dt = c->out_meta[1].dtype;
    v->flat = (tc_tmeta){.dtype = dt, .ndim = 3, .device = mx->device, .size = {mx->size[0], mx->size[1], 1}};
    v->chan = (tc_tmeta){.dtype = dt, .ndim = 3, .device = mx->device, .size = {1, mx->size[1], 1}};
    v->vec = (tc_tmeta){.dtype = dt, .ndim = 1, .device = mx->device, .size = {mx->size[1]}};
    for (int d = 2; d < mx->ndim; d++) v->flat.size[2] *= mx->size[d];
    v->M = (double)(v->flat.size[0] * v->flat.size[2]);
    v->xf = need_x ? tc_ga_reshape(A, bn_as(A, c->in[0], &v->flat), &v->flat) : NULL;
    if (recompute) {
        v->mean = tc_ga_scale(A, bn_csum(A, v->xf), 1 / v->M);
        const tc_tensor *xc = tc_ga_sub(A, v->xf, v->mean);
        const tc_tensor *var = tc_ga_scale(A, bn_csum(A, tc_ga_mul(A, xc, xc)), 1 / v->M);
        v->invstd = tc_ga_ew(A, TC_OP_RSQRT, tc_ga_adds(A, var, c->p->s[0]), NULL, NULL, 0, 0);
    } else {
        v->mean = bn_row(A, c->out[1], 0, &v->chan), v->invstd = bn_row(A, c->out[1], 1, &v->chan);
    }
}

/* Evaluation reads running_mean rm and running_var rv: y = (x - rm) invstd w + b, so
 * grm = -gb w invstd and grv = -gw w invstd^2 / 2 (gw = sum g (x - rm) invstd); gw, gb (C). */
static void bn_running_grads(tc_garena *A, const tc_grad_ctx *c, const bn_view *v, const tc_tensor *gw,
                             const tc_tensor *gb, tc_tensor **gin)
{
    const tc_tensor *w = c->in[1], *invstd = tc_ga_reshape(A, v->invstd, &v->vec);
    const tc_tensor *wi = w ? tc_ga_mul(A, bn_as(A, w, &v->vec), invstd) : invstd;
    if (c->needs[3]) bn_accum(A, bn_as(A, tc_ga_neg(A, tc_ga_mul(A, gb, wi)), &c->meta[3]), &gin[3]);
    if (c->needs[4])
        bn_accum(A, bn_as(A, tc_ga_scale(A, tc_ga_mul(A, gw, tc_ga_mul(A, wi, invstd)), -0.5), &c->meta[4]), &gin[4]);
}

/* The gradient reaching stats = (mean, invstd) (PyTorch drops it; kept here so the op is
 * exactly differentiable). Training: dmean/dx = 1/M, dinvstd/dx = -invstd^3 (x - mean)/M;
 * evaluation: mean = rm, dinvstd/drv = -invstd^3 / 2. */
static void bn_stats_grads(tc_garena *A, const tc_grad_ctx *c, const bn_view *v, tc_tensor **gin)
{
    const tc_tensor *gs = c->gout[1], *i3 = tc_ga_mul(A, v->invstd, tc_ga_mul(A, v->invstd, v->invstd));
    if (c->p->i[0]) {
        if (!c->needs[0]) return;
        const tc_tensor *gm = bn_row(A, gs, 0, &v->chan), *gi = bn_row(A, gs, 1, &v->chan);
        const tc_tensor *t = tc_ga_sub(A, gm, tc_ga_mul(A, tc_ga_mul(A, gi, i3), tc_ga_sub(A, v->xf, v->mean)));
        bn_accum(A, bn_as(A, tc_ga_reshape(A, tc_ga_scale(A, t, 1 / v->M), &c->meta[0]), &c->meta[0]), &gin[0]);
        return;
    }
    if (c->needs[3]) bn_accum(A, bn_as(A, bn_row(A, gs, 0, NULL), &c->meta[3]), &gin[3]);
    if (c->needs[4]) {
        const tc_tensor *t = tc_ga_mul(A, bn_row(A, gs, 1, NULL), tc_ga_reshape(A, i3, &v->vec));
        bn_accum(A, bn_as(A, tc_ga_scale(A, t, -0.5), &c->meta[4]), &gin[4]);
    }
}

/* gx, gw, gb of y from ops (create_graph). */
static void bn_composed(tc_garena *A, const tc_grad_ctx *c, const bn_view *v, tc_tensor **gin)
{
    const tc_tensor *w = c->in[1];
    const tc_tensor *gf = tc_ga_reshape(A, bn_as(A, G0, &v->flat), &v->flat);
    const tc_tensor *xhat = tc_ga_mul(A, tc_ga_sub(A, v->xf, v->mean), v->invstd);
    const tc_tensor *gw = bn_csum(A, tc_ga_mul(A, gf, xhat)), *gb = bn_csum(A, gf);
    if (c->needs[0]) {
        const tc_tensor *scale = w ? tc_ga_mul(A, v->invstd, tc_ga_reshape(A, bn_as(A, w, &v->chan), &v->chan))
                                   : v->invstd;
        const tc_tensor *inner = gf;
        if (c->p->i[0])
            inner = tc_ga_sub(A, tc_ga_sub(A, gf, tc_ga_scale(A, gb, 1 / v->M)),
                              tc_ga_mul(A, xhat, tc_ga_scale(A, gw, 1 / v->M)));
        bn_accum(A, bn_as(A, tc_ga_reshape(A, tc_ga_mul(A, inner, scale), &c->meta[0]), &c->meta[0]), &gin[0]);
    }
    const tc_tensor *gwv = tc_ga_reshape(A, gw, &v->vec), *gbv = tc_ga_reshape(A, gb, &v->vec);
    if (c->needs[1]) bn_accum(A, bn_as(A, gwv, &c->meta[1]), &gin[1]);
    if (c->needs[2]) bn_accum(A, bn_as(A, gbv, &c->meta[2]), &gin[2]);
    if (!c->p->i[0]) bn_running_grads(A, c, v, gwv, gbv, gin);
}

/* gx, gw, gb of y with batch_norm_backward (one pass over the data). */
static void bn_fused(tc_garena *A, const tc_grad_ctx *c, const bn_view *v, tc_tensor **gin)
{
    if (A->err) return;
    const tc_tensor *in[4] = {G0, c->in[0], c->in[1], c->out[1]};
    tc_tensor *res[2] = {NULL, NULL};
    tc_params p = {.i = {c->p->i[0] != 0}, .s = {c->p->s[0]}}; /* s0: the forward's eps */
    tc_status s = tc_op_run(TC_OP_BATCH_NORM_BACKWARD, in, 4, &p, res, 2);
    if (s) {
        A->err = s;
        return;
    }
    tc_ga_keep(A, TC_OK, res[0]);
    tc_ga_keep(A, TC_OK, res[1]);
    const tc_tensor *gw = bn_row(A, res[1], 0, NULL), *gb = bn_row(A, res[1], 1, NULL);
    if (c->needs[0]) bn_accum(A, res[0], &gin[0]);
    if (c->needs[1]) bn_accum(A, bn_as(A, gw, &c->meta[1]), &gin[1]);
    if (c->needs[2]) bn_accum(A, bn_as(A, gb, &c->meta[2]), &gin[2]);
    if (!c->p->i[0]) bn_running_grads(A, c, v, gw, gb, gin);
}

/* batch_norm(x, w, b, running_mean, running_var) -> y, stats. Written out rather than with
 * TC_GRAD_RULE: the weight is saved when there is one but may be absent (NULL), which
 * tc_g_begin would report as a missing saved input. */
static tc_status bn_rule_body(const tc_grad_ctx *c, tc_tensor **gin)
{
    /* two arenas: a rule's temporaries are bounded (TC_GA_MAX) */
    tc_garena A_ = {0}, *A = &A_, B_ = {0}, *B = &B_;
    bool composed = tc_grad_enabled() != 0;
    bn_view v;
    bn_view_make(A, c, composed || c->gout[1], composed && c->p->i[0], &v);
    if (G0 && composed) bn_composed(A, c, &v, gin);
    else if (G0) bn_fused(A, c, &v, gin);
    if (c->gout[1]) {
        B->err = A->err;
        bn_stats_grads(B, c, &v, gin);
    }
    tc_status sb = tc_ga_done(B), sa = tc_ga_done(A);
    return sa ? sa : sb;
}

static tc_status bn_rule(const tc_grad_ctx *c, tc_tensor **gin)
{
    bool zero = false;
    TRY(tc_g_begin(c, TC_SAVE_IN0 | TC_SAVE_OUT1, &zero));
    if (zero) return TC_OK;
    if (!c->out[1]) return tc_set_error(TC_ERR_INTERNAL, "batch_norm backward: the stats output was not saved");
    return tc_g_end(c, bn_rule_body(c, gin), gin);
}

void tc_grad_rules_nn(tc_grad_rule *t)
{
    t[TC_OP_BATCH_NORM] = (tc_grad_rule){bn_rule, TC_SAVE_IN0 | TC_SAVE_IN1 | TC_SAVE_OUT1};
    TC_GRAD_REG(t, CONV2D, conv2d_rule);
    TC_GRAD_REG(t, CONV_TRANSPOSE2D, conv_transpose2d_rule);
    TC_GRAD_REG(t, CONV2D_WEIGHT, conv2d_weight_rule);
    TC_GRAD_REG(t, MAX_POOL2D, maxpool_rule);
    TC_GRAD_REG(t, ADAPTIVE_MAX_POOL2D, maxpool_rule);
    TC_GRAD_REG(t, AVG_POOL2D, avgpool_rule);
    TC_GRAD_REG(t, AVG_POOL2D_BACKWARD, avgpool_backward_rule);
    TC_GRAD_REG(t, ADAPTIVE_AVG_POOL2D, adaptive_avg_rule);
    TC_GRAD_REG(t, ADAPTIVE_AVG_POOL2D_BACKWARD, adaptive_avg_rule);
    TC_GRAD_REG(t, SOFTMAX, softmax_rule);
    TC_GRAD_REG(t, LOG_SOFTMAX, softmax_rule);
    TC_GRAD_REG(t, SOFTMAX_BACKWARD, softmax_backward_rule);
    TC_GRAD_REG(t, LOG_SOFTMAX_BACKWARD, log_softmax_backward_rule);
}
