/* shape_nn.c -- the prepare step of the nn kinds: convolution (conv2d, conv_transpose2d,
 * conv2d_weight), pooling (max, average, adaptive, and the backward ops of the average
 * ones) and softmax. Output sizes follow PyTorch 1.13's formulas exactly (including
 * ceil_mode's "the last window must start inside the input or the left padding" rule),
 * and every check a kernel could fail on is made here, so the kernels only compute.
 *
 * Geometry arrives in tc_params.shape (see ops.def for each op's order) and the group
 * count in i0. Messages name the op and the sizes: "conv2d: input (2,3,5,5) has 3
 * channels but weight (4,2,3,3) with 1 groups expects 2".
 */
#include "internal.h"
#include <limits.h>
#include <stdio.h>

static void spec_set(tc_outspec *spec, int o, int dtype, int ndim, const int64_t *sizes)
{
    spec->dtype[o] = dtype;
    spec->ndim[o] = ndim;
    memcpy(spec->size[o], sizes, sizeof(int64_t) * (size_t)ndim);
}

/* Every tensor input (NULL skipped) has the first input's dtype. */
static tc_status same_dtypes(const tc_kcall *k)
{
    for (int i = 1; i < k->nin; i++)
        if (k->in[i] && k->in[i]->dtype != k->in[0]->dtype)
            return tc_set_error(TC_ERR_DTYPE, "%s: dtypes differ (%s input 1, %s input %d)", k->info->name,
                                tc_dtype_name((tc_dtype)k->in[0]->dtype), tc_dtype_name((tc_dtype)k->in[i]->dtype),
                                i + 1);
    return TC_OK;
}

static tc_status want_nshape(const tc_kcall *k, int n, const char *what)
{
    if (k->p->nshape != n)
        return tc_set_error(TC_ERR_ARG, "%s: expects %d geometry numbers in shape (%s), got %d", k->info->name, n,
                            what, k->p->nshape);
    return TC_OK;
}

static tc_status want_rank(const char *op, const char *what, const tc_tensor *t, int lo, int hi)
{
    if (t->ndim >= lo && t->ndim <= hi && t->storage) return TC_OK;
    char b[TC_SHAPE_BUF];
    if (lo == hi)
        return tc_set_error(TC_ERR_SHAPE, "%s: %s must be %d-D, got %s", op, what, lo, tc_shape_str(t, b, sizeof b));
    return tc_set_error(TC_ERR_SHAPE, "%s: %s must be %d-D to %d-D, got %s", op, what, lo, hi,
                        tc_shape_str(t, b, sizeof b));
}

/* stride and dilation >= 1, padding >= 0 (names for messages: "stride", ...). */
static tc_status positive(const char *op, const char *what, const int64_t *v, int64_t min)
{
    if (v[0] >= min && v[1] >= min) return TC_OK;
    return tc_set_error(TC_ERR_ARG, "%s: %s must be >= %lld, got (%lld,%lld)", op, what, (long long)min,
                        (long long)v[0], (long long)v[1]);
}

/* ---- convolution ---------------------------------------------------------------------- */

/* The conv2d output size along one dim; < 1 when the dilated kernel does not fit. */
static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil)
{
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

static tc_status kernel_fits(const char *op, const tc_tensor *x, int64_t kh, int64_t kw, const int64_t *g)
{
    char b[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE,
                        "%s: kernel %lldx%lld (dilation %lldx%lld) is larger than the padded input %lldx%lld "
                        "(input %s, padding %lldx%lld)",
                        op, (long long)kh, (long long)kw, (long long)g[4], (long long)g[5],
                        (long long)(x->size[2] + 2 * g[2]), (long long)(x->size[3] + 2 * g[3]),
                        tc_shape_str(x, b, sizeof b), (long long)g[2], (long long)g[3]);
}

tc_status tc_prepare_conv(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    const tc_tensor *x = k->in[0], *w = k->in[1], *bias = k->nin > 2 ? k->in[2] : NULL;
    const int64_t *g = k->p->shape;
    int64_t groups = k->p->i[0];
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    TRY(want_nshape(k, k->op == TC_OP_CONV2D ? 6 : 8,
                    k->op == TC_OP_CONV2D             ? "stride, padding, dilation"
                    : k->op == TC_OP_CONV_TRANSPOSE2D ? "stride, padding, dilation, output padding"
                                                      : "stride, padding, dilation, kernel size"));
    TRY(same_dtypes(k));
    TRY(positive(op, "stride", g, 1));
    TRY(positive(op, "padding", g + 2, 0));
    TRY(positive(op, "dilation", g + 4, 1));
    if (groups < 1) return tc_set_error(TC_ERR_ARG, "%s: groups must be >= 1, got %lld", op, (long long)groups);
    TRY(want_rank(op, "input", x, 4, 4));
    TRY(want_rank(op, k->op == TC_OP_CONV2D_WEIGHT ? "gradOutput" : "weight", w, 4, 4));
    int64_t N = x->size[0], C = x->size[1], H = x->size[2], W = x->size[3];
    int64_t sz[4];
    for (int d = 1; d < 4; d++)
        if (x->size[d] < 1 || w->size[d] < 1 || w->size[0] < 1)
            return tc_set_error(TC_ERR_SHAPE, "%s: input %s and %s %s must not be empty (only the batch may be 0)",
                                op, tc_shape_str(x, b1, sizeof b1), k->op == TC_OP_CONV2D_WEIGHT ? "gradOutput" : "weight",
                                tc_shape_str(w, b2, sizeof b2));
    /* BLAS takes int sizes: one column matrix must fit */
    if (H * W > INT_MAX || w->size[2] * w->size[3] > INT_MAX || C * w->size[2] * w->size[3] > INT_MAX ||
        w->size[0] * w->size[1] > INT_MAX)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: input %s is too large for the BLAS int sizes", op,
                            tc_shape_str(x, b1, sizeof b1));

    if (k->op == TC_OP_CONV2D_WEIGHT) { /* x (N,C,H,W), gout w (N,O,Ho,Wo) */
        TRY(positive(op, "kernel size", g + 6, 1));
        int64_t kh = g[6], kw = g[7], O = w->size[1];
        if (C % groups || O % groups)
            return tc_set_error(TC_ERR_SHAPE, "%s: %lld groups must divide the input channels %lld and the "
                                "output channels %lld", op, (long long)groups, (long long)C, (long long)O);
        int64_t ho = conv_out(H, kh, g[0], g[2], g[4]), wo = conv_out(W, kw, g[1], g[3], g[5]);
        if (ho < 1 || wo < 1) return kernel_fits(op, x, kh, kw, g);
        if (w->size[0] != N || w->size[2] != ho || w->size[3] != wo)
            return tc_set_error(TC_ERR_SHAPE, "%s: gradOutput %s does not match the conv2d output (%lld,%lld,%lld,%lld) "
                                "of input %s", op, tc_shape_str(w, b1, sizeof b1), (long long)N, (long long)O,
                                (long long)ho, (long long)wo, tc_shape_str(x, b2, sizeof b2));
        sz[0] = O, sz[1] = C / groups, sz[2] = kh, sz[3] = kw;
        spec->nout = 1;
        spec_set(spec, 0, x->dtype, 4, sz);
        return TC_OK;
    }

    int64_t kh = w->size[2], kw = w->size[3];
    if (kh < 1 || kw < 1)
        return tc_set_error(TC_ERR_SHAPE, "%s: weight %s has an empty kernel", op, tc_shape_str(w, b1, sizeof b1));
    bool tr = k->op == TC_OP_CONV_TRANSPOSE2D;
    /* conv2d: w (O, C/g, kH, kW); conv_transpose2d: w (C, O/g, kH, kW) */
    int64_t wc = tr ? w->size[0] : w->size[1] * groups;
    int64_t O = tr ? w->size[1] * groups : w->size[0];
    if (wc != C)
        return tc_set_error(TC_ERR_SHAPE, "%s: input %s has %lld channels but weight %s with %lld groups expects %lld",
                            op, tc_shape_str(x, b1, sizeof b1), (long long)C, tc_shape_str(w, b2, sizeof b2),
                            (long long)groups, (long long)wc);
    if ((tr ? C : O) % groups)
        return tc_set_error(TC_ERR_SHAPE, "%s: %lld groups do not divide the %lld %s channels of weight %s", op,
                            (long long)groups, (long long)(tr ? C : O), tr ? "input" : "output",
                            tc_shape_str(w, b2, sizeof b2));
    if (bias && (bias->ndim != 1 || bias->size[0] != O))
        return tc_set_error(TC_ERR_SHAPE, "%s: bias %s must be 1-D of size %lld (the output channels)", op,
                            tc_shape_str(bias, b1, sizeof b1), (long long)O);
    int64_t ho, wo;
    if (!tr) {
        ho = conv_out(H, kh, g[0], g[2], g[4]), wo = conv_out(W, kw, g[1], g[3], g[5]);
        if (ho < 1 || wo < 1) return kernel_fits(op, x, kh, kw, g);
    } else {
        const int64_t *op_ = g + 6;
        if (op_[0] < 0 || op_[1] < 0 || (op_[0] >= g[0] && op_[0] >= g[4]) || (op_[1] >= g[1] && op_[1] >= g[5]))
            return tc_set_error(TC_ERR_ARG, "%s: output padding (%lld,%lld) must be smaller than the stride "
                                "(%lld,%lld) or the dilation (%lld,%lld)", op, (long long)op_[0], (long long)op_[1],
                                (long long)g[0], (long long)g[1], (long long)g[4], (long long)g[5]);
        ho = (H - 1) * g[0] - 2 * g[2] + g[4] * (kh - 1) + op_[0] + 1;
        wo = (W - 1) * g[1] - 2 * g[3] + g[5] * (kw - 1) + op_[1] + 1;
        if (ho < 1 || wo < 1 || H < 1 || W < 1)
            return tc_set_error(TC_ERR_SHAPE, "%s: input %s with weight %s and padding (%lld,%lld) gives an empty "
                                "output %lldx%lld", op, tc_shape_str(x, b1, sizeof b1), tc_shape_str(w, b2, sizeof b2),
                                (long long)g[2], (long long)g[3], (long long)ho, (long long)wo);
    }
    if (ho * wo > INT_MAX || O * kh * kw > INT_MAX)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: output plane %lldx%lld is too large for the BLAS int sizes", op,
                            (long long)ho, (long long)wo);
    sz[0] = N, sz[1] = O, sz[2] = ho, sz[3] = wo;
    spec->nout = 1;
    spec_set(spec, 0, x->dtype, 4, sz);
    return TC_OK;
}

/* ---- pooling ------------------------------------------------------------------------------ */

/* PyTorch's pooling_output_shape: floor or ceil division, and in ceil mode the last window
 * must start inside the input or its left padding. */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil, bool ceil)
{
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? s - 1 : 0);
    if (num < 0) return 0;
    int64_t out = num / s + 1;
    if (ceil && (out - 1) * s >= in + pad) out--;
    return out;
}

tc_status tc_prepare_pool(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    const tc_tensor *x = k->in[0];
    const int64_t *g = k->p->shape;
    bool ceil = k->p->i[0] != 0;
    char b1[TC_SHAPE_BUF];
    int64_t sz[TC_MAX_DIMS];
    TRY(want_rank(op, k->op == TC_OP_AVG_POOL2D_BACKWARD || k->op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD
                          ? "gradOutput" : "input", x, 3, 4));
    for (int d = 0; d < x->ndim; d++) sz[d] = x->size[d];
    int nd = x->ndim;
    int64_t H = x->size[nd - 2], W = x->size[nd - 1];
    for (int d = 0; d < nd - 2; d++)
        if (x->size[d] == 0)
            return tc_set_error(TC_ERR_SHAPE, "%s: input %s has no planes", op, tc_shape_str(x, b1, sizeof b1));

    switch (k->op) {
    case TC_OP_MAX_POOL2D:
    case TC_OP_AVG_POOL2D:
    case TC_OP_AVG_POOL2D_BACKWARD: {
        bool mx = k->op == TC_OP_MAX_POOL2D, bw = k->op == TC_OP_AVG_POOL2D_BACKWARD;
        TRY(want_nshape(k, mx || bw ? 8 : 6, mx ? "kernel, stride, padding, dilation"
                                        : bw ? "kernel, stride, padding, input size" : "kernel, stride, padding"));
        int64_t one[2] = {1, 1};
        const int64_t *dil = mx ? g + 6 : one;
        TRY(positive(op, "kernel size", g, 1));
        TRY(positive(op, "stride", g + 2, 1));
        TRY(positive(op, "padding", g + 4, 0));
        TRY(positive(op, "dilation", dil, 1));
        for (int i = 0; i < 2; i++)
            if (g[4 + i] > (dil[i] * (g[i] - 1) + 1) / 2)
                return tc_set_error(TC_ERR_ARG, "%s: padding (%lld,%lld) must be at most half the kernel (%lld,%lld)",
                                    op, (long long)g[4], (long long)g[5], (long long)g[0], (long long)g[1]);
        int64_t ih = bw ? g[6] : H, iw = bw ? g[7] : W;
        if (bw && (ih < 1 || iw < 1))
            return tc_set_error(TC_ERR_ARG, "%s: input size %lldx%lld must be positive", op, (long long)ih,
                                (long long)iw);
        int64_t oh = pool_out(ih, g[0], g[4], g[2], dil[0], ceil), ow = pool_out(iw, g[1], g[5], g[3], dil[1], ceil);
        if (oh < 1 || ow < 1)
            return tc_set_error(TC_ERR_SHAPE, "%s: kernel %lldx%lld (dilation %lldx%lld) is larger than the padded "
                                "input %lldx%lld (input %s, padding %lldx%lld)", op, (long long)g[0], (long long)g[1],
                                (long long)dil[0], (long long)dil[1], (long long)(ih + 2 * g[4]),
                                (long long)(iw + 2 * g[5]), tc_shape_str(x, b1, sizeof b1), (long long)g[4],
                                (long long)g[5]);
        if (bw) {
            if (oh != H || ow != W)
                return tc_set_error(TC_ERR_SHAPE, "%s: gradOutput %s does not match the pooled size %lldx%lld of "
                                    "a %lldx%lld input", op, tc_shape_str(x, b1, sizeof b1), (long long)oh,
                                    (long long)ow, (long long)ih, (long long)iw);
            sz[nd - 2] = ih, sz[nd - 1] = iw;
        } else {
            sz[nd - 2] = oh, sz[nd - 1] = ow;
        }
        spec->nout = mx ? 2 : 1;
        break;
    }
    case TC_OP_ADAPTIVE_AVG_POOL2D:
    case TC_OP_ADAPTIVE_MAX_POOL2D:
    case TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD: {
        bool bw = k->op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
        TRY(want_nshape(k, 2, bw ? "input size" : "output size"));
        TRY(positive(op, bw ? "input size" : "output size", g, 1));
        if (!bw && (H < 1 || W < 1))
            return tc_set_error(TC_ERR_SHAPE, "%s: input %s has an empty plane", op, tc_shape_str(x, b1, sizeof b1));
        sz[nd - 2] = g[0], sz[nd - 1] = g[1];
        spec->nout = k->op == TC_OP_ADAPTIVE_MAX_POOL2D ? 2 : 1;
        break;
    }
    default: return tc_set_error(TC_ERR_INTERNAL, "%s: not a pooling op", op);
    }
    spec_set(spec, 0, x->dtype, nd, sz);
    if (spec->nout == 2) spec_set(spec, 1, TC_I64, nd, sz);
    return TC_OK;
}

/* ---- softmax ------------------------------------------------------------------------------- */

/* softmax / log_softmax(x); their backward ops (gradOutput, output): one size, one dtype. */
tc_status tc_prepare_softmax(const tc_kcall *k, tc_outspec *spec)
{
    const tc_tensor *x = k->in[0];
    int d;
    if (k->nin == 2) {
        TRY(same_dtypes(k));
        if (!tc_same_shape(k->in[0], k->in[1])) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_SHAPE, "%s: gradOutput %s and output %s differ in size", k->info->name,
                                tc_shape_str(k->in[0], b1, sizeof b1), tc_shape_str(k->in[1], b2, sizeof b2));
        }
    }
    TRY(tc_wrap_dim(k->info->name, k->p->i[0], x->ndim > 0 ? x->ndim : 1, &d));
    bool causal_op = k->op == TC_OP_SOFTMAX || k->op == TC_OP_SOFTMAX_BACKWARD;
    if (causal_op && k->p->i[1] != 0) { /* causal: rows i of (.., L, S) keep j <= i */
        char b[TC_SHAPE_BUF];
        if (k->p->i[1] != 1)
            return tc_set_error(TC_ERR_ARG, "%s: causal (i1) must be 0 or 1, got %lld", k->info->name,
                                (long long)k->p->i[1]);
        if (x->ndim < 2 || d != x->ndim - 1)
            return tc_set_error(TC_ERR_SHAPE,
                                "%s: causal needs the last dim of an input of at least 2 dims, got dim %d of %s",
                                k->info->name, d, tc_shape_str(x, b, sizeof b));
    }
    spec->nout = 1;
    spec_set(spec, 0, x->dtype, x->ndim, x->size);
    return TC_OK;
}
