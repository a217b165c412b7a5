/* gops.c -- small op-call helpers for writing gradient rules (see grad.h).
 *
 * Everything here goes through tc_op_run, never through kernels directly: a rule built on
 * these helpers is recorded by the engine when it runs with grad mode on, which is what
 * makes gradients of gradients work.
 */
#include "grad.h"

void tc_tmeta_of(const tc_tensor *t, tc_tmeta *m)
{
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    m->device = t->device;
    for (int d = 0; d < TC_MAX_DIMS; d++) m->size[d] = d < t->ndim ? t->size[d] : 0;
}

tc_status tc_g_op(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out)
{
    tc_tensor *res[2] = {NULL, NULL};
    const tc_opinfo *info = tc_op_info(op);
    int nout = info ? info->nout : 1;
    TRY(tc_op_run(op, in, nin, p, res, nout));
    if (res[1]) tc_tensor_release(res[1]); /* second outputs (indices) are not wanted here */
    *out = res[0];
    return TC_OK;
}

tc_status tc_g_ew(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, double s0, double s1,
                  tc_tensor **out)
{
    const tc_tensor *in[3] = {a, b, c};
    const tc_opinfo *info = tc_op_info(op);
    tc_params p = {.s = {s0, s1}};
    return tc_g_op(op, in, info ? info->nin : 0, &p, out);
}

tc_status tc_g_scalar(int dt, double v, tc_tensor **out)
{
    tc_tensor *t;
    TRY(tc_tensor_alloc((tc_dtype)dt, 0, NULL, &t));
    tc_store_double(dt, tc_tensor_data(t), v);
    t->flags |= TC_TF_SCRATCH; /* made by hand, not by an op: a graph trace snapshots it as a constant */
    *out = t;
    return TC_OK;
}

tc_status tc_g_scale(const tc_tensor *a, double v, tc_tensor **out)
{
    tc_tensor *s;
    TRY(tc_g_scalar(a->dtype, v, &s));
    tc_status st = tc_g_ew(TC_OP_MUL, a, s, NULL, 0, 0, out);
    tc_tensor_release(s);
    return st;
}

tc_status tc_g_full(const tc_tmeta *m, double v, tc_tensor **out)
{
    tc_tensor *t;
    TRY(tc_tensor_alloc_on(m->device, (tc_dtype)m->dtype, m->ndim, m->size, &t));
    tc_params p = {.s = {v, 0}};
    tc_tensor *res[1] = {t};
    tc_status s = tc_op_run(TC_OP_FILL, NULL, 0, &p, res, 1);
    if (s) {
        tc_tensor_release(t);
        return s;
    }
    *out = t;
    return TC_OK;
}

tc_status tc_g_sum(const tc_tensor *t, int dim, int keepdim, tc_tensor **out)
{
    tc_params p = {.i = {dim, keepdim}};
    const tc_tensor *in[1] = {t};
    return tc_g_op(TC_OP_SUM, in, 1, &p, out);
}

tc_status tc_g_copy(const tc_tensor *t, int dt, tc_tensor **out)
{
    tc_params p = {.i = {dt < 0 ? -1 : dt}};
    const tc_tensor *in[1] = {t};
    return tc_g_op(TC_OP_COPY, in, 1, &p, out);
}

tc_status tc_g_sum_to(const tc_tensor *g, const tc_tmeta *m, tc_tensor **out)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (g->ndim < m->ndim)
        return tc_set_error(TC_ERR_SHAPE, "sum_to: gradient %s has fewer dims than its input %s",
                            tc_shape_str(g, b1, sizeof b1), tc_sizes_str(m->ndim, m->size, b2, sizeof b2));
    tc_tensor *cur = (tc_tensor *)g;
    tc_tensor_retain(cur);
    /* leading dims that broadcasting added: summed away */
    while (cur->ndim > m->ndim) {
        tc_tensor *next;
        tc_status s = tc_g_sum(cur, 0, 0, &next);
        tc_tensor_release(cur);
        if (s) return s;
        cur = next;
    }
    /* dims of size 1 that broadcasting stretched: summed, kept as 1 */
    for (int d = 0; d < m->ndim; d++) {
        if (m->size[d] == cur->size[d]) continue;
        if (m->size[d] != 1) {
            tc_tensor_release(cur);
            return tc_set_error(TC_ERR_SHAPE, "sum_to: gradient %s does not broadcast from %s",
                                tc_shape_str(g, b1, sizeof b1), tc_sizes_str(m->ndim, m->size, b2, sizeof b2));
        }
        tc_tensor *next;
        tc_status s = tc_g_sum(cur, d, 1, &next);
        tc_tensor_release(cur);
        if (s) return s;
        cur = next;
    }
    if (cur->dtype != m->dtype) {
        tc_tensor *next;
        tc_status s = tc_g_copy(cur, m->dtype, &next);
        tc_tensor_release(cur);
        if (s) return s;
        cur = next;
    }
    *out = cur;
    return TC_OK;
}

/* Whether t's elements, read in row-major order, can be re-viewed with new sizes without a
 * copy: true for contiguous tensors (the only case reshape needs to be cheap for). */
tc_status tc_g_reshape(const tc_tensor *g, int ndim, const int64_t *sizes, tc_tensor **out)
{
    tc_params p = {.nshape = ndim};
    for (int d = 0; d < ndim; d++) p.shape[d] = sizes[d];
    if (tc_tensor_is_contiguous(g)) {
        const tc_tensor *in[1] = {g};
        return tc_g_op(TC_OP_VIEW, in, 1, &p, out);
    }
    tc_tensor *c;
    TRY(tc_g_copy(g, -1, &c));
    const tc_tensor *in[1] = {c};
    tc_status s = tc_g_op(TC_OP_VIEW, in, 1, &p, out);
    tc_tensor_release(c);
    return s;
}

tc_status tc_g_expand(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out)
{
    tc_params p = {.nshape = ndim};
    for (int d = 0; d < ndim; d++) p.shape[d] = sizes[d];
    const tc_tensor *in[1] = {t};
    return tc_g_op(TC_OP_EXPAND, in, 1, &p, out);
}

tc_status tc_g_transpose(const tc_tensor *t, int d0, int d1, tc_tensor **out)
{
    tc_params p = {.i = {d0, d1}};
    const tc_tensor *in[1] = {t};
    return tc_g_op(TC_OP_TRANSPOSE, in, 1, &p, out);
}

void tc_g_release_all(tc_tensor **gin, int n)
{
    for (int i = 0; i < n; i++) {
        if (gin[i]) tc_tensor_release(gin[i]);
        gin[i] = NULL;
    }
}

/* ---- rule scaffolding and more op helpers -------------------------------------------- */

static bool meta_matches(const tc_tensor *t, const tc_tmeta *m)
{
    if (t->dtype != m->dtype || t->ndim != m->ndim) return false;
    for (int d = 0; d < m->ndim; d++)
        if (t->size[d] != m->size[d]) return false;
    return true;
}

tc_status tc_g_begin(const tc_grad_ctx *c, int32_t save, bool *zero)
{
    const char *name = tc_op_info(c->op) ? tc_op_info(c->op)->name : "?";
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    bool any = false;
    for (int o = 0; o < c->nout; o++) {
        const tc_tensor *g = c->gout[o];
        if (!g) continue;
        const tc_tmeta *m = &c->out_meta[o];
        if (!meta_matches(g, m))
            return tc_set_error(TC_ERR_SHAPE, "%s backward: gradient of output %d is %s %s, expected %s %s", name,
                                o + 1, tc_dtype_name((tc_dtype)g->dtype), tc_shape_str(g, b1, sizeof b1),
                                tc_dtype_name((tc_dtype)m->dtype), tc_sizes_str(m->ndim, m->size, b2, sizeof b2));
        any = true;
    }
    for (int i = 0; i < 3 && i < c->nin; i++)
        if ((save & (TC_SAVE_IN0 << i)) && !c->in[i])
            return tc_set_error(TC_ERR_INTERNAL, "%s backward: saved input %d is missing", name, i + 1);
    if (save & TC_SAVE_ALL_IN)
        for (int i = 0; i < c->nin; i++)
            if (!c->in[i]) return tc_set_error(TC_ERR_INTERNAL, "%s backward: saved input %d is missing", name, i + 1);
    /* out[1] (indices) is absent when the op had one result (max over every element):
     * rules that read it check it themselves. */
    if ((save & TC_SAVE_OUT0) && c->nout > 0 && !c->out[0])
        return tc_set_error(TC_ERR_INTERNAL, "%s backward: saved output 1 is missing", name);
    *zero = !any;
    return TC_OK;
}

tc_status tc_g_end(const tc_grad_ctx *c, tc_status s, tc_tensor **gin)
{
    if (s) {
        tc_g_release_all(gin, c->nin);
        return s;
    }
    const char *name = tc_op_info(c->op) ? tc_op_info(c->op)->name : "?";
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    for (int i = 0; i < c->nin; i++) {
        if (!gin[i]) continue;
        if (!c->needs[i]) {
            tc_tensor_release(gin[i]);
            gin[i] = NULL;
            continue;
        }
        const tc_tmeta *m = &c->meta[i];
        if (!meta_matches(gin[i], m)) {
            s = tc_set_error(TC_ERR_INTERNAL, "%s backward: gradient of input %d is %s %s, expected %s %s", name,
                             i + 1, tc_dtype_name((tc_dtype)gin[i]->dtype), tc_shape_str(gin[i], b1, sizeof b1),
                             tc_dtype_name((tc_dtype)m->dtype), tc_sizes_str(m->ndim, m->size, b2, sizeof b2));
            tc_g_release_all(gin, c->nin);
            return s;
        }
    }
    return TC_OK;
}

tc_status tc_g_add_scalar(const tc_tensor *a, double v, tc_tensor **out)
{
    tc_tensor *s;
    TRY(tc_g_scalar(a->dtype, v, &s));
    tc_status st = tc_g_ew(TC_OP_ADD, a, s, NULL, 1, 0, out);
    tc_tensor_release(s);
    return st;
}

tc_status tc_g_where(const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b, tc_tensor **out)
{
    tc_tensor *z = NULL;
    if (!a || !b) TRY(tc_g_scalar((a ? a : b)->dtype, 0, &z));
    const tc_tensor *in[3] = {cond, a ? a : z, b ? b : z};
    tc_status s = tc_g_op(TC_OP_WHERE, in, 3, NULL, out);
    if (z) tc_tensor_release(z);
    return s;
}

tc_status tc_g_cmp_scalar(tc_op op, const tc_tensor *a, double v, tc_tensor **out)
{
    tc_tensor *s;
    TRY(tc_g_scalar(a->dtype, v, &s));
    tc_status st = tc_g_ew(op, a, s, NULL, 0, 0, out);
    tc_tensor_release(s);
    return st;
}

tc_status tc_g_unsqueeze(const tc_tensor *t, int dim, tc_tensor **out)
{
    tc_params p = {.i = {dim}};
    const tc_tensor *in[1] = {t};
    return tc_g_op(TC_OP_UNSQUEEZE, in, 1, &p, out);
}

tc_status tc_g_narrow(const tc_tensor *t, int dim, int64_t start, int64_t len, tc_tensor **out)
{
    tc_params p = {.i = {dim, start, len}};
    const tc_tensor *in[1] = {t};
    return tc_g_op(TC_OP_NARROW, in, 1, &p, out);
}

tc_status tc_g_cat(const tc_tensor *const *ts, int n, int dim, tc_tensor **out)
{
    tc_params p = {.i = {dim}};
    return tc_g_op(TC_OP_CAT, ts, n, &p, out);
}

/* A made-by-hand index tensor on device (filled on the host, then moved). */
static tc_status index_on(int device, tc_tensor *host, tc_tensor **out)
{
    if (device != TC_CPU) {
        tc_tensor *moved;
        tc_status s = tc_tensor_to(host, device, -1, &moved);
        tc_tensor_release(host);
        TRY(s);
        host = moved;
    }
    host->flags |= TC_TF_SCRATCH; /* made by hand: a graph trace snapshots it as a constant */
    *out = host;
    return TC_OK;
}

tc_status tc_g_index(int device, const int64_t *vals, int64_t n, tc_tensor **out)
{
    tc_tensor *t;
    TRY(tc_tensor_alloc(TC_I64, 1, &n, &t));
    if (n > 0) memcpy(tc_tensor_data(t), vals, sizeof(int64_t) * (size_t)n);
    return index_on(device, t, out);
}

tc_status tc_g_flip(const tc_tensor *t, int dim, tc_tensor **out)
{
    int64_t n = t->ndim ? t->size[dim] : 1;
    tc_tensor *idx;
    TRY(tc_tensor_alloc(TC_I64, 1, &n, &idx));
    int64_t *v = tc_tensor_data(idx);
    for (int64_t k = 0; k < n; k++) v[k] = n - 1 - k;
    TRY(index_on(t->device, idx, &idx));
    tc_params p = {.i = {dim}};
    const tc_tensor *in[2] = {t, idx};
    tc_status s = tc_g_op(TC_OP_INDEX_SELECT, in, 2, &p, out);
    tc_tensor_release(idx);
    return s;
}

tc_status tc_g_pad_to(const tc_tensor *t, const tc_tmeta *m, tc_tensor **out)
{
    tc_tensor *cur = (tc_tensor *)t;
    tc_tensor_retain(cur);
    for (int d = 0; d < m->ndim && d < cur->ndim; d++) {
        if (cur->size[d] >= m->size[d]) continue;
        tc_tmeta zm;
        tc_tmeta_of(cur, &zm);
        zm.size[d] = m->size[d] - cur->size[d];
        tc_tensor *z, *next;
        tc_status s = tc_g_full(&zm, 0, &z);
        if (s == TC_OK) {
            const tc_tensor *parts[2] = {cur, z};
            s = tc_g_cat(parts, 2, d, &next);
            tc_tensor_release(z);
        }
        tc_tensor_release(cur);
        if (s) return s;
        cur = next;
    }
    *out = cur;
    return TC_OK;
}

int tc_g_reduce_dim(int64_t i0, int ndim)
{
    if (i0 == -1 || ndim == 0) return -1;
    return (int)(i0 < -1 ? i0 + ndim : i0);
}

tc_status tc_g_keepdim(const tc_tensor *g, int d, int keepdim, const tc_tmeta *m, tc_tensor **out)
{
    if (d < 0) { /* all elements: g is 0-d or all ones; view it with m's rank of ones */
        int64_t ones[TC_MAX_DIMS];
        for (int k = 0; k < m->ndim; k++) ones[k] = 1;
        return tc_g_reshape(g, m->ndim, ones, out);
    }
    if (keepdim) {
        tc_tensor_retain((tc_tensor *)g);
        *out = (tc_tensor *)g;
        return TC_OK;
    }
    return tc_g_unsqueeze(g, d, out);
}

tc_status tc_g_unreduce(const tc_tensor *g, int d, int keepdim, const tc_tmeta *m, tc_tensor **out)
{
    tc_tensor *k;
    TRY(tc_g_keepdim(g, d, keepdim, m, &k));
    tc_status s = tc_g_expand(k, m->ndim, m->size, out);
    tc_tensor_release(k);
    return s;
}

/* ---- the arena (see grad.h) ----------------------------------------------------------- */

tc_tensor *tc_ga_keep(tc_garena *A, tc_status s, tc_tensor *t)
{
    if (s) {
        if (!A->err) A->err = s;
        return NULL;
    }
    if (A->n >= TC_GA_MAX) {
        tc_tensor_release(t);
        A->err = tc_set_error(TC_ERR_INTERNAL, "gradient rule: more than %d temporaries", TC_GA_MAX);
        return NULL;
    }
    A->t[A->n++] = t;
    return t;
}

/* A NULL argument means an earlier step failed: its error is already in A->err. */
#define GA_GUARD(cond)                                                                      \
    do {                                                                                    \
        if (A->err) return NULL;                                                            \
        if (!(cond)) {                                                                      \
            A->err = tc_set_error(TC_ERR_INTERNAL, "gradient rule: missing operand");       \
            return NULL;                                                                    \
        }                                                                                   \
    } while (0)

tc_tensor *tc_ga_ew(tc_garena *A, tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, double s0,
                    double s1)
{
    const tc_opinfo *info = tc_op_info(op);
    int n = info ? info->nin : 0;
    GA_GUARD(a && (n < 2 || b) && (n < 3 || c));
    tc_tensor *t = NULL;
    tc_status s = tc_g_ew(op, a, b, c, s0, s1, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_op(tc_garena *A, tc_op op, const tc_tensor *const *in, int nin, const tc_params *p)
{
    bool ok = true;
    for (int i = 0; i < nin; i++) ok = ok && in[i];
    GA_GUARD(ok);
    tc_tensor *t = NULL;
    tc_status s = tc_g_op(op, in, nin, p, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_mul(tc_garena *A, const tc_tensor *a, const tc_tensor *b) { return tc_ga_ew(A, TC_OP_MUL, a, b, NULL, 0, 0); }
tc_tensor *tc_ga_div(tc_garena *A, const tc_tensor *a, const tc_tensor *b) { return tc_ga_ew(A, TC_OP_DIV, a, b, NULL, 0, 0); }
tc_tensor *tc_ga_add(tc_garena *A, const tc_tensor *a, const tc_tensor *b) { return tc_ga_ew(A, TC_OP_ADD, a, b, NULL, 1, 0); }
tc_tensor *tc_ga_sub(tc_garena *A, const tc_tensor *a, const tc_tensor *b) { return tc_ga_ew(A, TC_OP_SUB, a, b, NULL, 1, 0); }
tc_tensor *tc_ga_neg(tc_garena *A, const tc_tensor *a) { return tc_ga_ew(A, TC_OP_NEG, a, NULL, NULL, 0, 0); }

tc_tensor *tc_ga_scale(tc_garena *A, const tc_tensor *a, double v)
{
    GA_GUARD(a);
    tc_tensor *t = NULL;
    tc_status s = tc_g_scale(a, v, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_adds(tc_garena *A, const tc_tensor *a, double v)
{
    GA_GUARD(a);
    tc_tensor *t = NULL;
    tc_status s = tc_g_add_scalar(a, v, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_rsub(tc_garena *A, double v, const tc_tensor *a)
{
    GA_GUARD(a);
    tc_tensor *k = NULL;
    tc_status s = tc_g_scalar(a->dtype, v, &k);
    if (!tc_ga_keep(A, s, k)) return NULL;
    return tc_ga_sub(A, k, a);
}

tc_tensor *tc_ga_where(tc_garena *A, const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b)
{
    GA_GUARD(cond && (a || b));
    tc_tensor *t = NULL;
    tc_status s = tc_g_where(cond, a, b, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_cmps(tc_garena *A, tc_op op, const tc_tensor *a, double v)
{
    GA_GUARD(a);
    tc_tensor *t = NULL;
    tc_status s = tc_g_cmp_scalar(op, a, v, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_sum_to(tc_garena *A, const tc_tensor *g, const tc_tmeta *m)
{
    GA_GUARD(g);
    tc_tensor *t = NULL;
    tc_status s = tc_g_sum_to(g, m, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_sum(tc_garena *A, const tc_tensor *x, int dim, int keepdim)
{
    GA_GUARD(x);
    tc_tensor *t = NULL;
    tc_status s = tc_g_sum(x, dim, keepdim, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_full(tc_garena *A, const tc_tmeta *m, double v)
{
    GA_GUARD(m);
    tc_tensor *t = NULL;
    tc_status s = tc_g_full(m, v, &t);
    return tc_ga_keep(A, s, t);
}

tc_tensor *tc_ga_reshape(tc_garena *A, const tc_tensor *g, const tc_tmeta *m)
{
    GA_GUARD(g);
    tc_tensor *t = NULL;
    tc_status s = tc_g_reshape(g, m->ndim, m->size, &t);
    return tc_ga_keep(A, s, t);
}

void tc_ga_out(tc_garena *A, const tc_tensor *t, tc_tensor **slot)
{
    if (A->err || !t) {
        if (!A->err) A->err = tc_set_error(TC_ERR_INTERNAL, "gradient rule: missing result");
        return;
    }
    tc_tensor_retain((tc_tensor *)t);
    *slot = (tc_tensor *)t;
}

tc_status tc_ga_done(tc_garena *A)
{
    for (int i = 0; i < A->n; i++) tc_tensor_release(A->t[i]);
    A->n = 0;
    return A->err;
}
