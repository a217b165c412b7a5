/* rules_linalg.c -- gradient rules of the matrix products (see grad.h).
 *
 * For C = A B: dA = dC B^T and dB = A^T dC, with transposes as views (BLAS takes them
 * without a copy). The add* ops compute beta M + alpha (product) with s0 = beta and
 * s1 = alpha: M's gradient is beta g summed back to M's (broadcast) sizes, and none at all
 * when beta == 0 (M is never read then); the product's operands get alpha times the plain
 * products' gradients. Shapes (ops.def): dot (n)(n); mv (n,m)(m); mm (n,k)(k,m);
 * bmm (b,n,k)(b,k,m); addr x(n) y(m); addbmm sums over the batch.
 */
#include "grad.h"

#define G0 (c->gout[0])
#define M(i) (&c->meta[i])

static const tc_tensor *mat2(tc_garena *A, tc_op op, const tc_tensor *a, const tc_tensor *b)
{
    return tc_ga_ew(A, op, a, b, NULL, 0, 0);
}

static const tc_tensor *tr(tc_garena *A, const tc_tensor *t, int d0, int d1)
{
    if (A->err || !t) return NULL;
    tc_tensor *r = NULL;
    tc_status s = tc_g_transpose(t, d0, d1, &r);
    return tc_ga_keep(A, s, r);
}

static const tc_tensor *unsq(tc_garena *A, const tc_tensor *t, int d)
{
    if (A->err || !t) return NULL;
    tc_tensor *r = NULL;
    tc_status s = tc_g_unsqueeze(t, d, &r);
    return tc_ga_keep(A, s, r);
}

/* outer product x y^T as an (n,1)(1,m) mm */
static const tc_tensor *outer(tc_garena *A, const tc_tensor *x, const tc_tensor *y)
{
    return mat2(A, TC_OP_MM, unsq(A, x, 1), unsq(A, y, 0));
}

static void put(tc_garena *A, const tc_grad_ctx *c, int i, const tc_tensor *t, tc_tensor **gin)
{
    tc_ga_out(A, tc_ga_sum_to(A, t, M(i)), &gin[i]);
}

/* beta g for the added tensor M (input 0); alpha g for the product's operands. */
static void added_grad(tc_garena *A, const tc_grad_ctx *c, tc_tensor **gin)
{
    double beta = c->p->s[0];
    if (c->needs[0] && beta != 0) put(A, c, 0, beta == 1 ? G0 : tc_ga_scale(A, G0, beta), gin);
}

static const tc_tensor *alpha_g(tc_garena *A, const tc_grad_ctx *c)
{
    double alpha = c->p->s[1];
    return alpha == 1 ? G0 : tc_ga_scale(A, G0, alpha);
}

TC_GRAD_RULE(dot_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    if (c->needs[0]) put(A, c, 0, tc_ga_mul(A, G0, c->in[1]), gin);
    if (c->needs[1]) put(A, c, 1, tc_ga_mul(A, G0, c->in[0]), gin);
    return tc_ga_done(A);
}

/* (n,m)(m) -> (n): dA = g v^T, dv = A^T g */
static void mv_grads(tc_garena *A, const tc_grad_ctx *c, const tc_tensor *g, int ia, tc_tensor **gin)
{
    const tc_tensor *a = c->in[ia], *v = c->in[ia + 1];
    if (c->needs[ia]) put(A, c, ia, outer(A, g, v), gin);
    if (c->needs[ia + 1]) put(A, c, ia + 1, mat2(A, TC_OP_MV, tr(A, a, 0, 1), g), gin);
}

/* Whether the matrix dims (r, r+1) of t are stored column-major (a transposed view, as
 * nn.Linear's weight:t() is): its gradient is then produced in that layout too, so the
 * transpose's own rule hands back a contiguous gradient and accumulating it into a
 * contiguous .grad is a flat add rather than a strided walk (PyTorch does the same). */
static bool col_major(const tc_tensor *t, int r)
{
    return t && t->size[r] > 1 && t->size[r + 1] > 1 && t->stride[r] == 1 && t->stride[r + 1] == t->size[r];
}

/* acc[i] += x @ y in place (addmm / baddbmm into the engine's buffer, grad.h), when the
 * engine offered a buffer for input i; false when it did not (nothing done). */
static bool add_into(tc_garena *A, const tc_grad_ctx *c, int i, tc_op op, const tc_tensor *x, const tc_tensor *y)
{
    tc_tensor *acc = c->acc ? c->acc[i] : NULL;
    if (!acc) return false;
    if (A->err || !x || !y) return true; /* the arena's error stands */
    const tc_tensor *in[3] = {acc, x, y};
    tc_tensor *out[1] = {acc};
    tc_params p = {.s = {1, 1}};
    tc_status s = tc_op_run(op == TC_OP_BMM ? TC_OP_BADDBMM : TC_OP_ADDMM, in, 3, &p, out, 1);
    if (s) A->err = s;
    return true;
}

/* (n,k)(k,m) or batched (b,n,k)(b,k,m): dA = g B^T (or (B g^T)^T), dB = A^T g (or (g^T A)^T) */
static void mm_grads(tc_garena *A, const tc_grad_ctx *c, tc_op op, const tc_tensor *g, int ia, tc_tensor **gin)
{
    int r = op == TC_OP_BMM ? 1 : 0;
    const tc_tensor *a = c->in[ia], *b = c->in[ia + 1];
    if (c->needs[ia] && c->acc && c->acc[ia]) {
        add_into(A, c, ia, op, g, tr(A, b, r, r + 1));
    } else if (c->needs[ia]) {
        const tc_tensor *ga = col_major(a, r) ? tr(A, mat2(A, op, b, tr(A, g, r, r + 1)), r, r + 1)
                                              : mat2(A, op, g, tr(A, b, r, r + 1));
        put(A, c, ia, ga, gin);
    }
    if (c->needs[ia + 1] && c->acc && c->acc[ia + 1]) {
        add_into(A, c, ia + 1, op, tr(A, a, r, r + 1), g);
    } else if (c->needs[ia + 1]) {
        const tc_tensor *gb = col_major(b, r) ? tr(A, mat2(A, op, tr(A, g, r, r + 1), a), r, r + 1)
                                              : mat2(A, op, tr(A, a, r, r + 1), g);
        put(A, c, ia + 1, gb, gin);
    }
}

TC_GRAD_RULE(mv_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    mv_grads(A, c, G0, 0, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(mm_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    mm_grads(A, c, TC_OP_MM, G0, 0, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(bmm_rule, TC_SAVE_IN0 | TC_SAVE_IN1)
{
    tc_garena A_ = {0}, *A = &A_;
    mm_grads(A, c, TC_OP_BMM, G0, 0, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(addmv_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    added_grad(A, c, gin);
    if (c->needs[1] || c->needs[2]) mv_grads(A, c, alpha_g(A, c), 1, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(addmm_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    added_grad(A, c, gin);
    if (c->needs[1] || c->needs[2]) mm_grads(A, c, TC_OP_MM, alpha_g(A, c), 1, gin);
    return tc_ga_done(A);
}

TC_GRAD_RULE(baddbmm_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    added_grad(A, c, gin);
    if (c->needs[1] || c->needs[2]) mm_grads(A, c, TC_OP_BMM, alpha_g(A, c), 1, gin);
    return tc_ga_done(A);
}

/* M + alpha x y^T: dx = alpha g y, dy = alpha g^T x */
TC_GRAD_RULE(addr_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    added_grad(A, c, gin);
    const tc_tensor *g = (c->needs[1] || c->needs[2]) ? alpha_g(A, c) : NULL;
    if (c->needs[1]) put(A, c, 1, mat2(A, TC_OP_MV, g, c->in[2]), gin);
    if (c->needs[2]) put(A, c, 2, mat2(A, TC_OP_MV, tr(A, g, 0, 1), c->in[1]), gin);
    return tc_ga_done(A);
}

/* M + alpha sum_b A_b B_b: each batch sees the same g, broadcast to (b,n,m) as a view. */
TC_GRAD_RULE(addbmm_rule, TC_SAVE_IN1 | TC_SAVE_IN2)
{
    tc_garena A_ = {0}, *A = &A_;
    added_grad(A, c, gin);
    if (c->needs[1] || c->needs[2]) {
        const tc_tmeta *g_m = &c->out_meta[0];
        int64_t sz[3] = {M(1)->size[0], g_m->size[0], g_m->size[1]};
        const tc_tensor *g = alpha_g(A, c), *ge = NULL;
        if (!A->err) {
            tc_tensor *t = NULL;
            tc_status s = tc_g_expand(g, 3, sz, &t);
            ge = tc_ga_keep(A, s, t);
        }
        mm_grads(A, c, TC_OP_BMM, ge, 1, gin);
    }
    return tc_ga_done(A);
}

void tc_grad_rules_linalg(tc_grad_rule *t)
{
    TC_GRAD_REG(t, DOT, dot_rule);
    TC_GRAD_REG(t, MV, mv_rule);
    TC_GRAD_REG(t, MM, mm_rule);
    TC_GRAD_REG(t, BMM, bmm_rule);
    TC_GRAD_REG(t, ADDMV, addmv_rule);
    TC_GRAD_REG(t, ADDMM, addmm_rule);
    TC_GRAD_REG(t, ADDR, addr_rule);
    TC_GRAD_REG(t, BADDBMM, baddbmm_rule);
    TC_GRAD_REG(t, ADDBMM, addbmm_rule);
}
