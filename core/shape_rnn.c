/* shape_rnn.c -- the prepare step of the recurrent kind: rnn (one layer, one direction, the
 * whole sequence) and rnn_backward (ops.def has the equations and the tensors' roles).
 *
 * Sizes come from x (T,N,I) and w_hh (G*H,H): H is w_hh's column count and G the mode's
 * gate count; every other tensor must agree with them exactly (no broadcasting). Every
 * check a kernel could fail on is made here, so the CPU and device kernels only compute.
 * Messages name the op, the tensor and both sizes: "rnn: w_hh (12,4) must be (16,4) for
 * LSTM with hidden size 4". The reserve's width R is 5H (LSTM), 4H (GRU) or 0 (RNN).
 */
#include "internal.h"
#include <limits.h>
#include <stdio.h>

static const char *const mode_name[4] = {"RNN tanh", "RNN relu", "LSTM", "GRU"};
static const int gates_of[4] = {1, 1, 4, 3};

/* A tensor of exactly the given sizes (NULL allowed when optional). */
static tc_status want_size(const char *op, const char *what, const tc_tensor *t, int nd, const int64_t *sz,
                           const char *why)
{
    if (!t) return TC_OK;
    bool ok = t->ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = t->size[d] == sz[d];
    if (ok) return TC_OK;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE, "%s: %s %s must be %s %s", op, what, tc_shape_str(t, b1, sizeof b1),
                        tc_sizes_str(nd, sz, b2, sizeof b2), why);
}

/* Every tensor input (NULL skipped) has x's dtype. */
static tc_status same_dtypes(const tc_kcall *k, const char *const *names)
{
    for (int i = 1; i < k->nin; i++)
        if (k->in[i] && k->in[i]->dtype != k->in[0]->dtype)
            return tc_set_error(TC_ERR_DTYPE, "%s: %s is %s but x is %s", k->info->name, names[i],
                                tc_dtype_name((tc_dtype)k->in[i]->dtype), tc_dtype_name((tc_dtype)k->in[0]->dtype));
    return TC_OK;
}

static void spec_set(tc_outspec *spec, int o, int dtype, int ndim, const int64_t *sizes)
{
    spec->dtype[o] = dtype;
    spec->ndim[o] = ndim;
    memcpy(spec->size[o], sizes, sizeof(int64_t) * (size_t)ndim);
}

tc_status tc_prepare_rnn(const tc_kcall *k, tc_outspec *spec)
{
    static const char *const fwd_names[6] = {"x", "hx", "w_ih", "w_hh", "b_ih", "b_hh"};
    static const char *const bwd_names[9] = {"x", "hx", "w_ih", "w_hh", "b", "y", "reserve", "dy", "dreserve"};
    const char *op = k->info->name;
    bool bwd = k->op == TC_OP_RNN_BACKWARD;
    const tc_tensor *x = k->in[0], *w_ih = k->in[2], *w_hh = k->in[3];
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF], why[96];
    int64_t mode = k->p->i[0];
    if (mode < 0 || mode > 3)
        return tc_set_error(TC_ERR_ARG, "%s: mode (i0) %lld is not 0 (RNN tanh), 1 (RNN relu), 2 (LSTM) or 3 (GRU)",
                            op, (long long)mode);
    if (!w_ih || !w_hh)
        return tc_set_error(TC_ERR_ARG, "%s: input %d (%s) is NULL", op, w_ih ? 4 : 3, w_ih ? "w_hh" : "w_ih");
    TRY(same_dtypes(k, bwd ? bwd_names : fwd_names));
    if (x->ndim != 3)
        return tc_set_error(TC_ERR_SHAPE, "%s: x must be 3-D (seq, batch, input), got %s", op,
                            tc_shape_str(x, b1, sizeof b1));
    if (w_hh->ndim != 2 || w_hh->size[1] < 1)
        return tc_set_error(TC_ERR_SHAPE, "%s: w_hh must be 2-D (gates * hidden, hidden) with hidden >= 1, got %s",
                            op, tc_shape_str(w_hh, b1, sizeof b1));
    int64_t T = x->size[0], N = x->size[1], I = x->size[2], H = w_hh->size[1];
    int64_t G = gates_of[mode], S = mode == 2 ? 2 : 1;
    snprintf(why, sizeof why, "for %s with hidden size %lld", mode_name[mode], (long long)H);
    int64_t whh[2] = {G * H, H}, wih[2] = {G * H, I}, st[3] = {S, N, H}, seq[3] = {T, N, H};
    TRY(want_size(op, "w_hh", w_hh, 2, whh, why));
    snprintf(why, sizeof why, "for %s with hidden size %lld and x %s", mode_name[mode], (long long)H,
             tc_shape_str(x, b2, sizeof b2));
    TRY(want_size(op, "w_ih", w_ih, 2, wih, why));
    TRY(want_size(op, "hx", k->in[1], 3, st, why));
    /* BLAS takes int sizes: every matrix dimension of the products must fit */
    if (T * N > INT_MAX || G * H > INT_MAX || I > INT_MAX)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: x %s with hidden size %lld is too large for BLAS's int sizes",
                            op, tc_shape_str(x, b1, sizeof b1), (long long)H);
    int64_t R = mode == 2 ? 5 * H : mode == 3 ? 4 * H : 0, res[3] = {T, N, R};
    if (!bwd) {
        int64_t b[1] = {G * H};
        TRY(want_size(op, "b_ih", k->in[4], 1, b, why));
        TRY(want_size(op, "b_hh", k->in[5], 1, b, why));
        spec->nout = 2;
        spec_set(spec, 0, x->dtype, 3, seq);
        spec_set(spec, 1, x->dtype, 3, res);
        return TC_OK;
    }
    int64_t b[2] = {2, G * H};
    TRY(want_size(op, "b", k->in[4], 2, b, why));
    for (int i = 5; i < 7; i++)
        if (!k->in[i])
            return tc_set_error(TC_ERR_ARG, "%s: input %d (%s, a result of rnn) is NULL", op, i + 1, bwd_names[i]);
    TRY(want_size(op, "y", k->in[5], 3, seq, why));
    TRY(want_size(op, "reserve", k->in[6], 3, res, why));
    TRY(want_size(op, "dy", k->in[7], 3, seq, why));
    TRY(want_size(op, "dreserve", k->in[8], 3, res, why));
    int64_t dx[3] = {T, N, I}, flat[1] = {S * N * H + G * H * (I + H) + (k->in[4] ? 2 * G * H : 0)};
    spec->nout = 2;
    spec_set(spec, 0, x->dtype, 3, dx);
    spec_set(spec, 1, x->dtype, 1, flat);
    return TC_OK;
}
