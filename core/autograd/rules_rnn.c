/* rules_rnn.c -- the gradient rule of the recurrent op (see grad.h).
 *
 *   rnn(x, hx, w_ih, w_hh, b_ih, b_hh) -> y, reserve:  one rnn_backward call (both results'
 *   gradients in) gives dx and a flat tensor {dhx, dw_ih, dw_hh, db_ih, db_hh}; the input
 *   gradients are views into it.
 *
 * The rule saves every input and both results (the reserve holds the gates, so backward
 * computes no forward product again). rnn_backward has no rule, so gradients of gradients
 * are refused with a clear error
 * (PyTorch's cuDNN path refuses them too); callers that need them compose the layer from
 * ordinary ops (lua/nn/recurrent.lua keeps that path).
 */
#include "grad.h"

/* Input slots of rnn. */
enum { X, HX, W_IH, W_HH, B_IH, B_HH };

/* A view of flat[off, off + numel(m)) with m's sizes. */
static tc_status piece(const tc_tensor *flat, int64_t off, const tc_tmeta *m, tc_tensor **out)
{
    int64_t n = 1;
    for (int d = 0; d < m->ndim; d++) n *= m->size[d];
    tc_tensor *nar = NULL;
    TRY(tc_g_narrow(flat, 0, off, n, &nar));
    tc_status s = tc_g_reshape(nar, m->ndim, m->size, out);
    tc_tensor_release(nar);
    return s;
}

/* {b_ih; b_hh} as one (2, G*H) tensor (a missing one as zeros), or NULL without biases. */
static tc_status bias_pair(const tc_grad_ctx *c, tc_tensor **out)
{
    const tc_tensor *b[2] = {c->in[B_IH], c->in[B_HH]};
    *out = NULL;
    if (!b[0] && !b[1]) return TC_OK;
    tc_tensor *made[4] = {0};
    tc_status s = TC_OK;
    for (int i = 0; i < 2 && !s; i++) {
        if (!b[i]) s = tc_g_full(&c->meta[B_IH + 1 - i], 0, &made[2 + i]); /* zeros like the other */
        if (!s) s = tc_g_unsqueeze(b[i] ? b[i] : made[2 + i], 0, &made[i]);
    }
    if (!s) s = tc_g_cat((const tc_tensor *const *)made, 2, 0, out);
    for (int i = 0; i < 4; i++) tc_tensor_release(made[i]);
    return s;
}

/* Written out instead of TC_GRAD_RULE: the rule keeps every input (TC_SAVE_ALL_IN), but
 * the state and bias inputs are optional, and tc_g_begin would call an absent one a missing
 * saved tensor; the required ones are checked here. */
static tc_status rnn_body(const tc_grad_ctx *c, tc_tensor **gin);
static tc_status rnn_rule(const tc_grad_ctx *c, tc_tensor **gin)
{
    bool zero = false;
    TRY(tc_g_begin(c, TC_SAVE_IN0 | TC_SAVE_OUT0, &zero));
    if (zero) return TC_OK;
    if (!c->out[1]) return tc_set_error(TC_ERR_INTERNAL, "rnn backward: saved output 2 is missing");
    if (!c->in[W_IH] || !c->in[W_HH])
        return tc_set_error(TC_ERR_INTERNAL, "rnn backward: saved input %d is missing", c->in[W_IH] ? 4 : 3);
    return tc_g_end(c, rnn_body(c, gin), gin);
}

static tc_status rnn_body(const tc_grad_ctx *c, tc_tensor **gin)
{
    bool recorded = false; /* the engine runs a rule with grad mode on for create_graph */
    for (int i = 0; i < c->nin; i++) recorded = recorded || (c->in[i] && tc_tensor_requires_grad(c->in[i]));
    for (int o = 0; o < 2; o++) recorded = recorded || (c->gout[o] && tc_tensor_requires_grad(c->gout[o]));
    if (recorded && tc_grad_enabled())
        return tc_set_error(TC_ERR_UNSUPPORTED, "rnn: gradients of gradients (create_graph) are not supported by "
                                                "the fused recurrent op; compose the layer from ordinary ops");
    tc_tensor *b = NULL, *res[2] = {NULL, NULL};
    TRY(bias_pair(c, &b));
    const tc_tensor *in[9] = {c->in[X], c->in[HX], c->in[W_IH], c->in[W_HH], b,
                              c->out[0], c->out[1], c->gout[0], c->gout[1]};
    tc_params p = {.i = {c->p->i[0]}};
    tc_status s = tc_op_run(TC_OP_RNN_BACKWARD, in, 9, &p, res, 2);
    tc_tensor_release(b);
    if (s) return s;
    if (c->needs[X]) {
        gin[X] = res[0];
        res[0] = NULL;
    }
    /* the flat tensor: dhx (S,N,H), dw_ih, dw_hh, then db_ih, db_hh (both slots are there
     * when either bias is) */
    const tc_tmeta *mi = &c->meta[W_IH], *mh = &c->meta[W_HH];
    int64_t off = (c->p->i[0] == 2 ? 2 : 1) * c->meta[X].size[1] * mh->size[1];
    if (c->in[HX] && c->needs[HX]) s = piece(res[1], 0, &c->meta[HX], &gin[HX]);
    if (!s && c->needs[W_IH]) s = piece(res[1], off, mi, &gin[W_IH]);
    off += mi->size[0] * mi->size[1];
    if (!s && c->needs[W_HH]) s = piece(res[1], off, mh, &gin[W_HH]);
    off += mh->size[0] * mh->size[1];
    if (!s && c->in[B_IH] && c->needs[B_IH]) s = piece(res[1], off, &c->meta[B_IH], &gin[B_IH]);
    off += mh->size[0];
    if (!s && c->in[B_HH] && c->needs[B_HH]) s = piece(res[1], off, &c->meta[B_HH], &gin[B_HH]);
    tc_tensor_release(res[0]);
    tc_tensor_release(res[1]);
    return s;
}

void tc_grad_rules_rnn(tc_grad_rule *t) { t[TC_OP_RNN] = (tc_grad_rule){rnn_rule, TC_SAVE_ALL_IN | TC_SAVE_OUT0 | TC_SAVE_OUT1}; }
