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
    TRY(tc_tensor_alloc((tc_dtype)m->dtype, m->ndim, m->size, &t));
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
