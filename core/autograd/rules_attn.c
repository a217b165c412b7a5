/* rules_attn.c -- the gradient rule of the fused attention op (see grad.h).
 *
 *   attention(q, k, v) -> out, lse:  one attention_backward call gives gq and a (N, S, E+Ev)
 *   tensor whose column ranges are gk and gv (views of it are returned); the weights are
 *   recomputed there a block at a time from lse, nothing (L, S) was saved.
 *
 * attention_backward has no rule of its own. When a graph of the gradient is wanted
 * (create_graph), or lse itself received a gradient (d lse / d s = P), the rule composes the
 * same gradient from ordinary differentiable ops instead -- P = softmax(s q k^T, causal),
 * gv = P^T g, dS = softmax_backward(g v^T, P) + P glse, gq = s dS k, gk = s dS^T q -- so
 * gradients of gradients work, at the memory cost of the (L, S) weights.
 */
#include "grad.h"

enum { Q, K, V };

/* t's (N, a, b) dims 1 and 2 swapped (a view). */
static const tc_tensor *swap12(tc_garena *A, const tc_tensor *t)
{
    if (A->err || !t) return NULL;
    tc_tensor *r = NULL;
    tc_status s = tc_g_transpose(t, 1, 2, &r);
    return tc_ga_keep(A, s, r);
}

static const tc_tensor *bmm(tc_garena *A, const tc_tensor *a, const tc_tensor *b)
{
    const tc_tensor *in[2] = {a, b};
    return tc_ga_op(A, TC_OP_BMM, in, 2, &(tc_params){0});
}

/* t in dtype dt (a converting copy when it differs). */
static const tc_tensor *as_dtype(tc_garena *A, const tc_tensor *t, int dt)
{
    if (A->err || !t || t->dtype == dt) return t;
    tc_tensor *r = NULL;
    tc_status s = tc_g_copy(t, dt, &r);
    return tc_ga_keep(A, s, r);
}

/* gq, gk, gv from ordinary ops (create_graph, or a gradient reaching lse). */
static tc_status composed(const tc_grad_ctx *c, tc_tensor **gin)
{
    tc_garena A_ = {0}, *A = &A_;
    const tc_tensor *q = c->in[Q], *k = c->in[K], *v = c->in[V];
    double scale = c->p->s[0];
    tc_params sp = {.i = {2, c->p->i[0]}}; /* the last dim, causal */
    const tc_tensor *sc = tc_ga_scale(A, bmm(A, q, swap12(A, k)), scale);
    const tc_tensor *P = tc_ga_op(A, TC_OP_SOFTMAX, &sc, 1, &sp);
    const tc_tensor *dS = NULL;
    if (c->gout[0]) {
        const tc_tensor *g = c->gout[0];
        if (c->needs[V]) tc_ga_out(A, bmm(A, swap12(A, P), g), &gin[V]);
        const tc_tensor *in[2] = {bmm(A, g, swap12(A, v)), P};
        dS = tc_ga_op(A, TC_OP_SOFTMAX_BACKWARD, in, 2, &sp);
    }
    if (c->gout[1]) { /* lse = log sum exp(s): d lse / d s = P, so dS += P glse (per row) */
        tc_tmeta col = c->out_meta[1];
        col.size[2] = 1, col.ndim = 3, col.dtype = c->meta[Q].dtype;
        const tc_tensor *gl = tc_ga_reshape(A, as_dtype(A, c->gout[1], c->meta[Q].dtype), &col);
        const tc_tensor *t = tc_ga_mul(A, P, gl);
        dS = dS ? tc_ga_add(A, dS, t) : t;
    }
    if (c->needs[Q]) tc_ga_out(A, tc_ga_scale(A, bmm(A, dS, k), scale), &gin[Q]);
    if (c->needs[K]) tc_ga_out(A, tc_ga_scale(A, bmm(A, swap12(A, dS), q), scale), &gin[K]);
    return tc_ga_done(A);
}

/* gq, gk, gv with attention_backward (out's gradient only). */
static tc_status fused(const tc_grad_ctx *c, tc_tensor **gin)
{
    const tc_tensor *in[6] = {c->gout[0], c->in[Q], c->in[K], c->in[V], c->out[0], c->out[1]};
    tc_tensor *res[2] = {NULL, NULL};
    tc_params p = {.s = {c->p->s[0]}, .i = {c->p->i[0]}};
    TRY(tc_op_run(TC_OP_ATTENTION_BACKWARD, in, 6, &p, res, 2));
    int64_t E = c->meta[Q].size[2], Ev = c->meta[V].size[2];
    tc_status s = TC_OK;
    if (c->needs[Q]) gin[Q] = res[0], res[0] = NULL;
    if (c->needs[K]) s = tc_g_narrow(res[1], 2, 0, E, &gin[K]);
    if (!s && c->needs[V]) s = tc_g_narrow(res[1], 2, E, Ev, &gin[V]);
    tc_tensor_release(res[0]);
    tc_tensor_release(res[1]);
    return s;
}

TC_GRAD_RULE(attention_rule, TC_SAVE_IN0 | TC_SAVE_IN1 | TC_SAVE_IN2 | TC_SAVE_OUT0 | TC_SAVE_OUT1)
{
    if (c->gout[1] || tc_grad_enabled()) return composed(c, gin);
    return fused(c, gin);
}

void tc_grad_rules_attn(tc_grad_rule *t) { TC_GRAD_REG(t, ATTENTION, attention_rule); }
