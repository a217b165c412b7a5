/* shape_bn.c -- the prepare step of the NORM kind: batch_norm, layer_norm and their backward
 * ops (ops.def documents inputs, params and outputs).
 *
 * Every check a kernel could fail on is made here, so the CPU kernel and the CUDA launcher
 * only compute: x is (N,C) to (N,C,D,H,W); the per-channel tensors are 1-D of size C;
 * stats are (2,C); dtypes agree (per-channel tensors may be float32 beside an f16/bf16 x,
 * as PyTorch's mixed batch norm); eps is a finite number >= 0; a training forward has at
 * least one value per channel. Messages name the op and the sizes: "batch_norm: weight (4)
 * must be 1-D of size 3 (the channels of input (2,3,5))". layer_norm's weight and bias have
 * the normalised (last i0) sizes of x instead, and its stats are (2, M) for the M rows.
 */
#include "internal.h"
#include <math.h>

static void spec_set(tc_outspec *spec, int o, int dtype, int ndim, const int64_t *sizes)
{
    spec->dtype[o] = dtype;
    spec->ndim[o] = ndim;
    memcpy(spec->size[o], sizes, sizeof(int64_t) * (size_t)ndim);
}

/* Statistics (and per-channel tensors) of an x of dtype dt: float32 for f16/bf16. */
static int stats_dtype(int dt) { return tc_is_half(dt) ? TC_F32 : dt; }

/* A per-channel tensor t (named what) beside x: 1-D of size C, x's dtype or the stats one. */
static tc_status per_channel(const char *op, const char *what, const tc_tensor *t, const tc_tensor *x)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (t->ndim != 1 || t->size[0] != x->size[1] || !t->storage)
        return tc_set_error(TC_ERR_SHAPE, "%s: %s %s must be 1-D of size %lld (the channels of input %s)", op, what,
                            tc_shape_str(t, b1, sizeof b1), (long long)x->size[1], tc_shape_str(x, b2, sizeof b2));
    if (t->dtype != x->dtype && t->dtype != stats_dtype(x->dtype))
        return tc_set_error(TC_ERR_DTYPE, "%s: %s is %s but input %s is %s", op, what,
                            tc_dtype_name((tc_dtype)t->dtype), tc_shape_str(x, b2, sizeof b2),
                            tc_dtype_name((tc_dtype)x->dtype));
    return TC_OK;
}

static tc_status want_input(const char *op, const char *what, const tc_tensor *x)
{
    char b[TC_SHAPE_BUF];
    if (!x) return tc_set_error(TC_ERR_ARG, "%s: %s is NULL", op, what);
    if (x->ndim < 2 || x->ndim > 5 || !x->storage)
        return tc_set_error(TC_ERR_SHAPE, "%s: %s must be 2-D to 5-D (N,C,...), got %s", op, what,
                            tc_shape_str(x, b, sizeof b));
    return TC_OK;
}

static tc_status prepare_batch_norm(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    bool train = k->p->i[0] != 0;
    double eps = k->p->s[0]; /* both ops: the backward one passes the forward's on to cuDNN */
    if (!(eps >= 0) || isinf(eps))
        return tc_set_error(TC_ERR_ARG, "%s: eps must be a number >= 0, got %g", op, eps);
    if (k->op == TC_OP_BATCH_NORM) {
        const tc_tensor *x = k->in[0];
        TRY(want_input(op, "input", x));
        static const char *const names[5] = {"input", "weight", "bias", "running_mean", "running_var"};
        for (int i = 1; i < 5; i++)
            if (k->in[i]) TRY(per_channel(op, names[i], k->in[i], x));
        if (!train && (!k->in[3] || !k->in[4]))
            return tc_set_error(TC_ERR_ARG, "%s: evaluation (i0 = 0) needs running_mean and running_var", op);
        if (train && x->size[1] > 0 && tc_tensor_numel(x) == 0)
            return tc_set_error(TC_ERR_SHAPE, "%s: training needs at least one value per channel, got input %s", op,
                                tc_shape_str(x, b1, sizeof b1));
        int64_t st[2] = {2, x->size[1]};
        spec->nout = 2;
        spec_set(spec, 0, x->dtype, x->ndim, x->size);
        spec_set(spec, 1, stats_dtype(x->dtype), 2, st);
        return TC_OK;
    }
    /* batch_norm_backward(gout, x, weight, stats) */
    const tc_tensor *g = k->in[0], *x = k->in[1], *w = k->in[2], *stats = k->in[3];
    TRY(want_input(op, "input", x));
    if (!tc_same_shape(g, x))
        return tc_set_error(TC_ERR_SHAPE, "%s: gradOutput %s must have the size of input %s", op,
                            tc_shape_str(g, b1, sizeof b1), tc_shape_str(x, b2, sizeof b2));
    if (g->dtype != x->dtype)
        return tc_set_error(TC_ERR_DTYPE, "%s: gradOutput is %s but input is %s", op, tc_dtype_name((tc_dtype)g->dtype),
                            tc_dtype_name((tc_dtype)x->dtype));
    if (w) TRY(per_channel(op, "weight", w, x));
    if (!stats) return tc_set_error(TC_ERR_ARG, "%s: stats (input 4) is NULL", op);
    if (stats->ndim != 2 || stats->size[0] != 2 || stats->size[1] != x->size[1])
        return tc_set_error(TC_ERR_SHAPE, "%s: stats %s must be (2,%lld) (mean and invstd of the channels of input %s)",
                            op, tc_shape_str(stats, b1, sizeof b1), (long long)x->size[1],
                            tc_shape_str(x, b2, sizeof b2));
    if (stats->dtype != stats_dtype(x->dtype))
        return tc_set_error(TC_ERR_DTYPE, "%s: stats are %s, expected %s for a %s input", op,
                            tc_dtype_name((tc_dtype)stats->dtype), tc_dtype_name((tc_dtype)stats_dtype(x->dtype)),
                            tc_dtype_name((tc_dtype)x->dtype));
    int64_t st[2] = {2, x->size[1]};
    spec->nout = 2;
    spec_set(spec, 0, x->dtype, x->ndim, x->size);
    spec_set(spec, 1, stats_dtype(x->dtype), 2, st);
    return TC_OK;
}

/* ---- layer_norm, layer_norm_backward ----------------------------------------------------------- */

/* Checks x and i0 (the normalised trailing dims); *K, *M: elements per row and rows. */
static tc_status ln_input(const char *op, const tc_tensor *x, int64_t nd, int64_t *K, int64_t *M)
{
    char b[TC_SHAPE_BUF];
    if (!x) return tc_set_error(TC_ERR_ARG, "%s: input is NULL", op);
    if (!x->storage) return tc_set_error(TC_ERR_ARG, "%s: input has no storage", op);
    if (nd < 1 || nd > x->ndim)
        return tc_set_error(TC_ERR_ARG, "%s: normalised dims (i0 = %lld) must be 1 to the %d dims of input %s", op,
                            (long long)nd, x->ndim, tc_shape_str(x, b, sizeof b));
    *K = 1, *M = 1;
    for (int d = 0; d < x->ndim; d++) *(d < x->ndim - nd ? M : K) *= x->size[d];
    if (*K == 0 && *M > 0)
        return tc_set_error(TC_ERR_SHAPE, "%s: normalising %lld dims of input %s leaves rows with no values", op,
                            (long long)nd, tc_shape_str(x, b, sizeof b));
    return TC_OK;
}

/* weight or bias t (named what), when given: the last nd sizes of x, x's dtype or the stats one. */
static tc_status ln_affine(const char *op, const char *what, const tc_tensor *t, const tc_tensor *x, int nd)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (!t) return TC_OK;
    bool ok = t->ndim == nd && t->storage;
    for (int d = 0; ok && d < nd; d++) ok = t->size[d] == x->size[x->ndim - nd + d];
    if (!ok)
        return tc_set_error(TC_ERR_SHAPE, "%s: %s %s must have the last %d sizes of input %s", op, what,
                            tc_shape_str(t, b1, sizeof b1), nd, tc_shape_str(x, b2, sizeof b2));
    if (t->dtype != x->dtype && t->dtype != stats_dtype(x->dtype))
        return tc_set_error(TC_ERR_DTYPE, "%s: %s is %s but input %s is %s", op, what,
                            tc_dtype_name((tc_dtype)t->dtype), tc_shape_str(x, b2, sizeof b2),
                            tc_dtype_name((tc_dtype)x->dtype));
    return TC_OK;
}

static tc_status prepare_layer_norm(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    bool bw = k->op == TC_OP_LAYER_NORM_BACKWARD;
    const tc_tensor *x = k->in[bw], *w = k->in[bw + 1];
    int64_t K = 0, M = 0, nd = k->p->i[0];
    TRY(ln_input(op, x, nd, &K, &M));
    double eps = k->p->s[0];
    if (!(eps >= 0) || isinf(eps))
        return tc_set_error(TC_ERR_ARG, "%s: eps must be a number >= 0, got %g", op, eps);
    TRY(ln_affine(op, "weight", w, x, (int)nd));
    if (!bw) TRY(ln_affine(op, "bias", k->in[2], x, (int)nd));
    if (!bw && w && k->in[2] && k->in[2]->dtype != w->dtype)
        return tc_set_error(TC_ERR_DTYPE, "%s: bias is %s but weight is %s", op,
                            tc_dtype_name((tc_dtype)k->in[2]->dtype), tc_dtype_name((tc_dtype)w->dtype));
    if (bw) {
        const tc_tensor *g = k->in[0], *stats = k->in[3];
        if (!g) return tc_set_error(TC_ERR_ARG, "%s: gradOutput is NULL", op);
        if (!tc_same_shape(g, x) || !g->storage)
            return tc_set_error(TC_ERR_SHAPE, "%s: gradOutput %s must have the size of input %s", op,
                                tc_shape_str(g, b1, sizeof b1), tc_shape_str(x, b2, sizeof b2));
        if (g->dtype != x->dtype)
            return tc_set_error(TC_ERR_DTYPE, "%s: gradOutput is %s but input is %s", op,
                                tc_dtype_name((tc_dtype)g->dtype), tc_dtype_name((tc_dtype)x->dtype));
        if (!stats) return tc_set_error(TC_ERR_ARG, "%s: stats (input 4) is NULL", op);
        if (stats->ndim != 2 || stats->size[0] != 2 || stats->size[1] != M || !stats->storage)
            return tc_set_error(TC_ERR_SHAPE, "%s: stats %s must be (2,%lld) (mean and rstd of the rows of input %s)",
                                op, tc_shape_str(stats, b1, sizeof b1), (long long)M, tc_shape_str(x, b2, sizeof b2));
        if (stats->dtype != stats_dtype(x->dtype))
            return tc_set_error(TC_ERR_DTYPE, "%s: stats are %s, expected %s for a %s input", op,
                                tc_dtype_name((tc_dtype)stats->dtype), tc_dtype_name((tc_dtype)stats_dtype(x->dtype)),
                                tc_dtype_name((tc_dtype)x->dtype));
    }
    int64_t st[2] = {2, bw ? K : M};
    spec->nout = 2;
    spec_set(spec, 0, x->dtype, x->ndim, x->size);
    spec_set(spec, 1, stats_dtype(x->dtype), 2, st);
    return TC_OK;
}

tc_status tc_prepare_norm(const tc_kcall *k, tc_outspec *spec)
{
    if (k->op == TC_OP_LAYER_NORM || k->op == TC_OP_LAYER_NORM_BACKWARD) return prepare_layer_norm(k, spec);
    return prepare_batch_norm(k, spec);
}
