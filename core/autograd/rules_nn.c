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
 *   softmax           gx = y * (g - sum(g * y))     log_softmax  gx = g - exp(y) * sum(g)
 * conv_transpose2d's output padding is recomputed from the saved sizes: the input size of
 * a conv2d is not determined by its output size alone (floor division).
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

TC_GRAD_RULE(softmax_rule, TC_SAVE_OUT0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *y = c->out[0];
    int d = softmax_dim(c);
    const tc_tensor *dot = tc_ga_sum(A, tc_ga_mul(A, G0, y), d, 1);
    tc_ga_out(A, tc_ga_mul(A, y, tc_ga_sub(A, G0, dot)), &gin[0]);
    return tc_ga_done(A);
}

TC_GRAD_RULE(log_softmax_rule, TC_SAVE_OUT0)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *y = c->out[0];
    int d = softmax_dim(c);
    const tc_tensor *p = tc_ga_ew(A, TC_OP_EXP, y, NULL, NULL, 0, 0);
    tc_ga_out(A, tc_ga_sub(A, G0, tc_ga_mul(A, p, tc_ga_sum(A, G0, d, 1))), &gin[0]);
    return tc_ga_done(A);
}

void tc_grad_rules_nn(tc_grad_rule *t)
{
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
    TC_GRAD_REG(t, LOG_SOFTMAX, log_softmax_rule);
}
