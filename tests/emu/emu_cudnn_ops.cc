/* emu_cudnn_ops.cc -- the CUDA emulator's cuDNN 9, part two (tests only; emu.h,
 * emu_cudnn.cc): batch normalization (cudnnBatchNormalizationForwardTraining /
 * ForwardInference / Backward), softmax (cudnnSoftmaxForward / Backward) and 2-D pooling
 * (cudnnSetPooling2dDescriptor, cudnnPoolingForward / Backward), as loops over host memory
 * that follow NVIDIA's cuDNN 9 API reference:
 *   - batch norm: SPATIAL (and SPATIAL_PERSISTENT, the same numbers) statistics per channel
 *     over N and the spatial dims, PER_ACTIVATION per (C, spatial) element over N; the
 *     saved mean and inverse std (1 / sqrt(biased variance + epsilon)); running mean and
 *     variance blended with exponentialAverageFactor, the variance UNBIASED (m / (m - 1)),
 *     as cuDNN does; backward from the saved statistics when given, else recomputed;
 *   - softmax: INSTANCE (over C, H, W per image) or CHANNEL (over C per image and
 *     position); FAST (no max subtraction), ACCURATE, LOG; the backward from y and dy;
 *   - pooling: MAX, MAX_DETERMINISTIC (the first maximum in the window gets the gradient),
 *     AVERAGE_COUNT_INCLUDE_PADDING (divisor: the window clipped to the padded plane) and
 *     ..._EXCLUDE_PADDING (the window's in-plane count); NaN propagation as set.
 * Checks, memory ranges, enqueue and blending as emu_cudnn.cc's header says.
 */
#include "emu_cudnn_impl.h"
#include <stdio.h>
#include <vector>

using namespace emu_dnn;

/* The per-element multi-index of the row-major linear index i (dims of t). */
static void unravel(const cudnnTensorStruct &t, int64_t i, int *idx)
{
    for (int d = t.nd - 1; d >= 0; d--) idx[d] = (int)(i % t.dim[d]), i /= t.dim[d];
}

static int64_t offset_idx(const cudnnTensorStruct &t, const int *idx)
{
    int64_t o = 0;
    for (int d = 0; d < t.nd; d++) o += (int64_t)idx[d] * t.stride[d];
    return o;
}

/* ---- batch normalization ---------------------------------------------------------------------- */

struct bn_geom {
    cudnnTensorStruct x, y, bn;
    bool spatial;
    int64_t n, feat; /* elements per feature (the reduction count m) and features */
};

/* Feature index (channel, or channel and position) of x's linear index i. */
static int64_t bn_feature(const bn_geom &g, int64_t i, int64_t *bn_off)
{
    int idx[CUDNN_DIM_MAX];
    unravel(g.x, i, idx);
    idx[0] = 0;
    if (g.spatial)
        for (int d = 2; d < g.x.nd; d++) idx[d] = 0;
    *bn_off = offset_idx(g.bn, idx);
    int64_t f = 0;
    for (int d = 1; d < g.x.nd; d++) f = f * (g.spatial && d >= 2 ? 1 : g.x.dim[d]) + (g.spatial && d >= 2 ? 0 : idx[d]);
    return f;
}

static cudnnStatus_t bn_check(const char *fn, cudnnHandle_t h, cudnnBatchNormMode_t mode, const cudnnTensorStruct *x,
                              const cudnnTensorStruct *y, const cudnnTensorStruct *bn, double eps, bn_geom *g)
{
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (!tensor_ok(x, fn, "x") || !tensor_ok(y, fn, "y") || !tensor_ok(bn, fn, "scale/bias"))
        return CUDNN_STATUS_BAD_PARAM;
    if (mode != CUDNN_BATCHNORM_SPATIAL && mode != CUDNN_BATCHNORM_PER_ACTIVATION &&
        mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
        return BAD("%s: mode %d", fn, (int)mode);
    char a[64], b[64];
    if (x->nd != 4 && x->nd != 5) return BAD("%s: x %s is neither 4-D nor 5-D", fn, dims_str(*x, a, sizeof a));
    if (!same_dims(*x, *y) || x->dt != y->dt)
        return BAD("%s: x %s %s and y %s %s differ", fn, dims_str(*x, a, sizeof a), type_name(x->dt),
                   dims_str(*y, b, sizeof b), type_name(y->dt));
    g->spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
    bool ok = bn->nd == x->nd && bn->dim[0] == 1;
    for (int d = 1; d < x->nd && ok; d++) ok = bn->dim[d] == (g->spatial && d >= 2 ? 1 : x->dim[d]);
    if (!ok) return BAD("%s: scale/bias descriptor %s does not fit x %s in %s mode", fn, dims_str(*bn, a, sizeof a),
                        dims_str(*x, b, sizeof b), g->spatial ? "spatial" : "per-activation");
    cudnnDataType_t want = x->dt == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    if (bn->dt != want)
        return BAD("%s: %s scale/bias tensors with %s data (cuDNN wants %s)", fn, type_name(bn->dt), type_name(x->dt),
                   type_name(want));
    if (!(eps >= CUDNN_BN_MIN_EPSILON)) return BAD("%s: epsilon %g < CUDNN_BN_MIN_EPSILON", fn, eps);
    g->x = *x, g->y = *y, g->bn = *bn;
    g->feat = numel(*bn);
    g->n = numel(*x) / g->feat;
    return CUDNN_STATUS_SUCCESS;
}

/* Per-feature sums of x: mean and biased variance (two passes, in double). */
static void bn_stats(const bn_geom &g, const void *x, std::vector<double> &mean, std::vector<double> &var)
{
    int64_t tot = numel(g.x), bo;
    mean.assign((size_t)g.feat, 0.0), var.assign((size_t)g.feat, 0.0);
    for (int64_t i = 0; i < tot; i++) mean[(size_t)bn_feature(g, i, &bo)] += load(g.x.dt, x, offset_of(g.x, i));
    for (auto &m : mean) m /= (double)g.n;
    for (int64_t i = 0; i < tot; i++) {
        size_t f = (size_t)bn_feature(g, i, &bo);
        double d = load(g.x.dt, x, offset_of(g.x, i)) - mean[f];
        var[f] += d * d;
    }
    for (auto &v : var) v /= (double)g.n;
}

/* The per-feature tensor's offsets, feature order. */
static std::vector<int64_t> bn_offsets(const bn_geom &g)
{
    std::vector<int64_t> o((size_t)g.feat);
    for (int64_t f = 0; f < g.feat; f++) o[(size_t)f] = offset_of(g.bn, f);
    return o;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnTensorDescriptor_t yd, void *y, const cudnnTensorDescriptor_t bnd, const void *scale,
    const void *bias, double factor, void *run_mean, void *run_var, double eps, void *save_mean, void *save_invstd)
{
    const char *fn = "cudnnBatchNormalizationForwardTraining";
    bn_geom g;
    cudnnStatus_t st = bn_check(fn, h, mode, xd, yd, bnd, eps, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta || !scale || !bias) return BAD("%s: alpha, beta, scale or bias is NULL", fn);
    if (!run_mean != !run_var) return BAD("%s: one of the running mean / variance is NULL, the other is not", fn);
    if (!save_mean != !save_invstd) return BAD("%s: one of the saved mean / inverse variance is NULL", fn);
    if (!tensor_mem_ok(g.x, x, fn, "x") || !tensor_mem_ok(g.y, y, fn, "y") ||
        !tensor_mem_ok(g.bn, scale, fn, "bnScale") || !tensor_mem_ok(g.bn, bias, fn, "bnBias") ||
        (run_mean && (!tensor_mem_ok(g.bn, run_mean, fn, "resultRunningMean") ||
                      !tensor_mem_ok(g.bn, run_var, fn, "resultRunningVariance"))) ||
        (save_mean && (!tensor_mem_ok(g.bn, save_mean, fn, "resultSaveMean") ||
                       !tensor_mem_ok(g.bn, save_invstd, fn, "resultSaveInvVariance"))))
        return CUDNN_STATUS_BAD_PARAM;
    double al = scalar(g.x.dt, alpha), be = scalar(g.x.dt, beta);
    if (g.n == 1) emu::note("%s: one value per feature: the unbiased running variance divides by 0", fn);
    run(h, fn, [=]() {
        std::vector<double> mean, var;
        bn_stats(g, x, mean, var);
        std::vector<int64_t> bo = bn_offsets(g);
        cudnnDataType_t bt = g.bn.dt;
        int64_t tot = numel(g.x), o;
        std::vector<double> out((size_t)tot);
        for (int64_t i = 0; i < tot; i++) {
            size_t f = (size_t)bn_feature(g, i, &o);
            double inv = 1.0 / sqrt(var[f] + eps);
            out[(size_t)i] = load(bt, scale, o) * (load(g.x.dt, x, offset_of(g.x, i)) - mean[f]) * inv + load(bt, bias, o);
        }
        for (int64_t i = 0; i < tot; i++) blend(g.y.dt, y, offset_of(g.y, i), out[(size_t)i], al, be);
        for (int64_t f = 0; f < g.feat; f++) {
            int64_t b = bo[(size_t)f];
            if (run_mean) {
                double unb = var[(size_t)f] * (double)g.n / (double)(g.n - 1);
                store(bt, run_mean, b, (1 - factor) * load(bt, run_mean, b) + factor * mean[(size_t)f]);
                store(bt, run_var, b, (1 - factor) * load(bt, run_var, b) + factor * unb);
            }
            if (save_mean) {
                store(bt, save_mean, b, mean[(size_t)f]);
                store(bt, save_invstd, b, 1.0 / sqrt(var[(size_t)f] + eps));
            }
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnTensorDescriptor_t yd, void *y, const cudnnTensorDescriptor_t bnd, const void *scale,
    const void *bias, const void *est_mean, const void *est_var, double eps)
{
    const char *fn = "cudnnBatchNormalizationForwardInference";
    bn_geom g;
    cudnnStatus_t st = bn_check(fn, h, mode, xd, yd, bnd, eps, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta || !scale || !bias || !est_mean || !est_var)
        return BAD("%s: alpha, beta, scale, bias, estimatedMean or estimatedVariance is NULL", fn);
    if (!tensor_mem_ok(g.x, x, fn, "x") || !tensor_mem_ok(g.y, y, fn, "y") ||
        !tensor_mem_ok(g.bn, scale, fn, "bnScale") || !tensor_mem_ok(g.bn, bias, fn, "bnBias") ||
        !tensor_mem_ok(g.bn, est_mean, fn, "estimatedMean") || !tensor_mem_ok(g.bn, est_var, fn, "estimatedVariance"))
        return CUDNN_STATUS_BAD_PARAM;
    double al = scalar(g.x.dt, alpha), be = scalar(g.x.dt, beta);
    run(h, fn, [=]() {
        cudnnDataType_t bt = g.bn.dt;
        int64_t tot = numel(g.x), o;
        std::vector<double> out((size_t)tot);
        for (int64_t i = 0; i < tot; i++) {
            bn_feature(g, i, &o);
            double inv = 1.0 / sqrt(load(bt, est_var, o) + eps);
            out[(size_t)i] = load(bt, scale, o) * (load(g.x.dt, x, offset_of(g.x, i)) - load(bt, est_mean, o)) * inv +
                             load(bt, bias, o);
        }
        for (int64_t i = 0; i < tot; i++) blend(g.y.dt, y, offset_of(g.y, i), out[(size_t)i], al, be);
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alphaD, const void *betaD, const void *alphaP,
    const void *betaP, const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t dyd,
    const void *dy, const cudnnTensorDescriptor_t dxd, void *dx, const cudnnTensorDescriptor_t bnd, const void *scale,
    void *dscale, void *dbias, double eps, const void *saved_mean, const void *saved_invstd)
{
    const char *fn = "cudnnBatchNormalizationBackward";
    bn_geom g;
    cudnnStatus_t st = bn_check(fn, h, mode, xd, dxd, bnd, eps, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    char a[64], b[64];
    if (!tensor_ok(dyd, fn, "dy")) return CUDNN_STATUS_BAD_PARAM;
    if (!same_dims(*dyd, g.x) || dyd->dt != g.x.dt)
        return BAD("%s: dy %s %s and x %s %s differ", fn, dims_str(*dyd, a, sizeof a), type_name(dyd->dt),
                   dims_str(g.x, b, sizeof b), type_name(g.x.dt));
    if (!alphaD || !betaD || !alphaP || !betaP || !scale || !dscale || !dbias)
        return BAD("%s: a scaling factor, bnScale, dBnScaleResult or dBnBiasResult is NULL", fn);
    if (!saved_mean != !saved_invstd) return BAD("%s: one of savedMean / savedInvVariance is NULL", fn);
    cudnnTensorStruct dyt = *dyd;
    if (!tensor_mem_ok(g.x, x, fn, "x") || !tensor_mem_ok(dyt, dy, fn, "dy") || !tensor_mem_ok(g.y, dx, fn, "dx") ||
        !tensor_mem_ok(g.bn, scale, fn, "bnScale") || !tensor_mem_ok(g.bn, dscale, fn, "dBnScaleResult") ||
        !tensor_mem_ok(g.bn, dbias, fn, "dBnBiasResult") ||
        (saved_mean && (!tensor_mem_ok(g.bn, saved_mean, fn, "savedMean") ||
                        !tensor_mem_ok(g.bn, saved_invstd, fn, "savedInvVariance"))))
        return CUDNN_STATUS_BAD_PARAM;
    cudnnDataType_t t = g.x.dt;
    double aD = scalar(t, alphaD), bD = scalar(t, betaD), aP = scalar(t, alphaP), bP = scalar(t, betaP);
    /* with saved statistics eps is not read, but cuDNN asks for the forward's: counted so
     * tests can see which one the caller passed */
    char call[96];
    snprintf(call, sizeof call, "cudnn batch norm backward, eps %.9g", eps);
    emu::count_call(call);
    run(h, fn, [=]() {
        cudnnDataType_t bt = g.bn.dt;
        std::vector<int64_t> bo = bn_offsets(g);
        std::vector<double> mean, inv;
        if (saved_mean) {
            mean.resize((size_t)g.feat), inv.resize((size_t)g.feat);
            for (int64_t f = 0; f < g.feat; f++)
                mean[(size_t)f] = load(bt, saved_mean, bo[(size_t)f]), inv[(size_t)f] = load(bt, saved_invstd, bo[(size_t)f]);
        } else {
            bn_stats(g, x, mean, inv);
            for (auto &v : inv) v = 1.0 / sqrt(v + eps);
        }
        int64_t tot = numel(g.x), o;
        std::vector<double> sg((size_t)g.feat, 0.0), sgx((size_t)g.feat, 0.0), out((size_t)tot);
        for (int64_t i = 0; i < tot; i++) {
            size_t f = (size_t)bn_feature(g, i, &o);
            double gv = load(t, dy, offset_of(dyt, i)), xh = (load(t, x, offset_of(g.x, i)) - mean[f]) * inv[f];
            sg[f] += gv, sgx[f] += gv * xh;
        }
        double m = (double)g.n;
        for (int64_t i = 0; i < tot; i++) {
            size_t f = (size_t)bn_feature(g, i, &o);
            double gv = load(t, dy, offset_of(dyt, i)), xh = (load(t, x, offset_of(g.x, i)) - mean[f]) * inv[f];
            out[(size_t)i] = load(bt, scale, o) * inv[f] / m * (m * gv - sg[f] - xh * sgx[f]);
        }
        for (int64_t i = 0; i < tot; i++) blend(t, dx, offset_of(g.y, i), out[(size_t)i], aD, bD);
        for (int64_t f = 0; f < g.feat; f++) {
            blend(bt, dscale, bo[(size_t)f], sgx[(size_t)f], aP, bP);
            blend(bt, dbias, bo[(size_t)f], sg[(size_t)f], aP, bP);
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

/* ---- softmax -------------------------------------------------------------------------------- */

/* Lines of the softmax: for each line, the linear indices of its elements (row-major over
 * the tensor's dims). INSTANCE: one line per image over C and every spatial dim; CHANNEL:
 * one line per image and position over C. */
static void softmax_lines(const cudnnTensorStruct &t, cudnnSoftmaxMode_t mode, int64_t *lines, int64_t *len,
                          int64_t *inner)
{
    int64_t sp = 1;
    for (int d = 2; d < t.nd; d++) sp *= t.dim[d];
    if (mode == CUDNN_SOFTMAX_MODE_INSTANCE) *lines = t.dim[0], *len = (int64_t)t.dim[1] * sp, *inner = 1;
    else *lines = (int64_t)t.dim[0] * sp, *len = t.dim[1], *inner = sp;
}

/* Linear index of element j of line l. */
static inline int64_t sm_index(int64_t l, int64_t j, int64_t len, int64_t inner)
{
    int64_t n = l / inner, s = l % inner;
    return (n * len + j) * inner + s;
}

static cudnnStatus_t softmax_check(const char *fn, cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo,
                                   cudnnSoftmaxMode_t mode, const cudnnTensorStruct *a, const cudnnTensorStruct *b,
                                   const cudnnTensorStruct *c)
{
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (algo != CUDNN_SOFTMAX_FAST && algo != CUDNN_SOFTMAX_ACCURATE && algo != CUDNN_SOFTMAX_LOG)
        return BAD("%s: algorithm %d", fn, (int)algo);
    if (mode != CUDNN_SOFTMAX_MODE_INSTANCE && mode != CUDNN_SOFTMAX_MODE_CHANNEL) return BAD("%s: mode %d", fn, (int)mode);
    const cudnnTensorStruct *ts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (!ts[i]) continue;
        if (!tensor_ok(ts[i], fn, "tensor")) return CUDNN_STATUS_BAD_PARAM;
        char s0[64], s1[64];
        if (!same_dims(*ts[i], *a) || ts[i]->dt != a->dt)
            return BAD("%s: tensors %s %s and %s %s differ", fn, dims_str(*a, s0, sizeof s0), type_name(a->dt),
                       dims_str(*ts[i], s1, sizeof s1), type_name(ts[i]->dt));
    }
    if (a->nd < 4 || a->nd > 5) return BAD("%s: %d-D tensors (cuDNN's softmax takes 4-D and 5-D)", fn, a->nd);
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                             const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                             const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
    const char *fn = "cudnnSoftmaxForward";
    cudnnStatus_t st = softmax_check(fn, h, algo, mode, xd, yd, NULL);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    cudnnTensorStruct X = *xd, Y = *yd;
    if (!tensor_mem_ok(X, x, fn, "x") || !tensor_mem_ok(Y, y, fn, "y")) return CUDNN_STATUS_BAD_PARAM;
    double al = scalar(X.dt, alpha), be = scalar(X.dt, beta);
    run(h, fn, [=]() {
        int64_t lines, len, inner;
        softmax_lines(X, mode, &lines, &len, &inner);
        std::vector<double> v((size_t)len), out((size_t)(lines * len));
        for (int64_t l = 0; l < lines; l++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) {
                v[(size_t)j] = load(X.dt, x, offset_of(X, sm_index(l, j, len, inner)));
                if (v[(size_t)j] > mx || v[(size_t)j] != v[(size_t)j]) mx = v[(size_t)j];
            }
            if (algo == CUDNN_SOFTMAX_FAST) mx = 0; /* FAST: no max subtraction */
            for (int64_t j = 0; j < len; j++) sum += exp(v[(size_t)j] - mx);
            for (int64_t j = 0; j < len; j++)
                out[(size_t)(l * len + j)] = algo == CUDNN_SOFTMAX_LOG ? v[(size_t)j] - mx - log(sum)
                                                                       : exp(v[(size_t)j] - mx) / sum;
        }
        for (int64_t l = 0; l < lines; l++)
            for (int64_t j = 0; j < len; j++)
                blend(Y.dt, y, offset_of(Y, sm_index(l, j, len, inner)), out[(size_t)(l * len + j)], al, be);
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSoftmaxBackward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                              const void *alpha, const cudnnTensorDescriptor_t yd, const void *y,
                                              const cudnnTensorDescriptor_t dyd, const void *dy, const void *beta,
                                              const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *fn = "cudnnSoftmaxBackward";
    cudnnStatus_t st = softmax_check(fn, h, algo, mode, yd, dyd, dxd);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    cudnnTensorStruct Y = *yd, DY = *dyd, DX = *dxd;
    if (!tensor_mem_ok(Y, y, fn, "y") || !tensor_mem_ok(DY, dy, fn, "dy") || !tensor_mem_ok(DX, dx, fn, "dx"))
        return CUDNN_STATUS_BAD_PARAM;
    double al = scalar(Y.dt, alpha), be = scalar(Y.dt, beta);
    run(h, fn, [=]() {
        int64_t lines, len, inner;
        softmax_lines(Y, mode, &lines, &len, &inner);
        std::vector<double> out((size_t)(lines * len));
        for (int64_t l = 0; l < lines; l++) {
            double s = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t i = sm_index(l, j, len, inner);
                double g = load(DY.dt, dy, offset_of(DY, i));
                s += algo == CUDNN_SOFTMAX_LOG ? g : g * load(Y.dt, y, offset_of(Y, i));
            }
            for (int64_t j = 0; j < len; j++) {
                int64_t i = sm_index(l, j, len, inner);
                double g = load(DY.dt, dy, offset_of(DY, i)), yv = load(Y.dt, y, offset_of(Y, i));
                out[(size_t)(l * len + j)] = algo == CUDNN_SOFTMAX_LOG ? g - exp(yv) * s : yv * (g - s);
            }
        }
        for (int64_t l = 0; l < lines; l++)
            for (int64_t j = 0; j < len; j++)
                blend(DX.dt, dx, offset_of(DX, sm_index(l, j, len, inner)), out[(size_t)(l * len + j)], al, be);
    });
    return CUDNN_STATUS_SUCCESS;
}

/* ---- pooling ------------------------------------------------------------------------------ */

extern "C" cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d)
{
    return create_desc(d, "cudnnCreatePoolingDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyPoolingDescriptor");
}

static cudnnStatus_t emu_cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                                     cudnnNanPropagation_t nan, int wh, int ww, int ph, int pw, int sh,
                                                     int sw)
{
    const char *fn = "cudnnSetPooling2dDescriptor";
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live pooling descriptor", fn, (void *)d);
    if (mode != CUDNN_POOLING_MAX && mode != CUDNN_POOLING_MAX_DETERMINISTIC &&
        mode != CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING && mode != CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING)
        return BAD("%s: mode %d", fn, (int)mode);
    if (nan != CUDNN_NOT_PROPAGATE_NAN && nan != CUDNN_PROPAGATE_NAN) return BAD("%s: NaN option %d", fn, (int)nan);
    if (wh <= 0 || ww <= 0 || sh <= 0 || sw <= 0 || ph < 0 || pw < 0)
        return BAD("%s: window %dx%d padding %dx%d stride %dx%d", fn, wh, ww, ph, pw, sh, sw);
    d->set = true, d->mode = mode, d->nan = nan;
    d->win[0] = wh, d->win[1] = ww, d->pad[0] = ph, d->pad[1] = pw, d->str[0] = sh, d->str[1] = sw;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                                     cudnnNanPropagation_t nan, int wh, int ww, int ph, int pw, int sh,
                                                     int sw)
{
    return second_opinion("cudnnSetPooling2dDescriptor", emu_cudnnSetPooling2dDescriptor(d, mode, nan, wh, ww, ph, pw, sh, sw),
                          [&](const real_cudnn &r) { return real_set_pool_2d(r, mode, nan, wh, ww, ph, pw, sh, sw); });
}

struct pool_geom {
    cudnnPoolingStruct p;
    cudnnTensorStruct x, y;
    int N, C, H, W, P, Q;
};

static cudnnStatus_t pool_check(const char *fn, cudnnHandle_t h, const cudnnPoolingStruct *pd,
                                const cudnnTensorStruct *x, const cudnnTensorStruct *y, pool_geom *g)
{
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (!pd || pd->magic != EMU_DNN_MAGIC || !pd->set) return BAD("%s: pooling descriptor not set", fn);
    if (!tensor_ok(x, fn, "x") || !tensor_ok(y, fn, "y")) return CUDNN_STATUS_BAD_PARAM;
    char a[64], b[64];
    if (x->nd != 4 || y->nd != 4) return BAD("%s: x %s, y %s: 2-D pooling takes 4-D tensors", fn,
                                             dims_str(*x, a, sizeof a), dims_str(*y, b, sizeof b));
    if (x->dt != y->dt) return BAD("%s: x %s and y %s", fn, type_name(x->dt), type_name(y->dt));
    int ih = x->dim[2] + 2 * pd->pad[0], iw = x->dim[3] + 2 * pd->pad[1];
    if (pd->win[0] > ih || pd->win[1] > iw)
        return BAD("%s: window %dx%d is larger than the padded input %dx%d", fn, pd->win[0], pd->win[1], ih, iw);
    int P = 1 + (ih - pd->win[0]) / pd->str[0], Q = 1 + (iw - pd->win[1]) / pd->str[1];
    if (y->dim[0] != x->dim[0] || y->dim[1] != x->dim[1] || y->dim[2] != P || y->dim[3] != Q)
        return BAD("%s: y %s, but pooling x %s gives (%d,%d,%d,%d)", fn, dims_str(*y, a, sizeof a),
                   dims_str(*x, b, sizeof b), x->dim[0], x->dim[1], P, Q);
    g->p = *pd, g->x = *x, g->y = *y;
    g->N = x->dim[0], g->C = x->dim[1], g->H = x->dim[2], g->W = x->dim[3], g->P = P, g->Q = Q;
    return CUDNN_STATUS_SUCCESS;
}

/* Window (n, c, p, q): its in-plane rows [h0, h1) and columns [w0, w1), and the divisor. */
static double pool_window(const pool_geom &g, int p, int q, int *h0, int *h1, int *w0, int *w1)
{
    int hs = p * g.p.str[0] - g.p.pad[0], ws = q * g.p.str[1] - g.p.pad[1];
    int he = hs + g.p.win[0], we = ws + g.p.win[1];
    /* INCLUDE_PADDING: the window clipped to the padded plane */
    int ph = std::min(he, g.H + g.p.pad[0]) - std::max(hs, -g.p.pad[0]);
    int pw = std::min(we, g.W + g.p.pad[1]) - std::max(ws, -g.p.pad[1]);
    *h0 = std::max(hs, 0), *h1 = std::min(he, g.H), *w0 = std::max(ws, 0), *w1 = std::min(we, g.W);
    int inplane = std::max(*h1 - *h0, 0) * std::max(*w1 - *w0, 0);
    return g.p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? (double)(ph * pw) : (double)inplane;
}

static bool pool_max(const pool_geom &g) { return g.p.mode == CUDNN_POOLING_MAX || g.p.mode == CUDNN_POOLING_MAX_DETERMINISTIC; }

/* The forward value of window (n, c, p, q), and for max the offset of the element chosen
 * (the first maximum in row-major window order; -1 when the window is all padding). */
static double pool_value(const pool_geom &g, const void *x, int n, int c, int p, int q, int64_t *arg)
{
    int h0, h1, w0, w1;
    double div = pool_window(g, p, q, &h0, &h1, &w0, &w1), acc = pool_max(g) ? -INFINITY : 0;
    *arg = -1;
    for (int i = h0; i < h1; i++)
        for (int j = w0; j < w1; j++) {
            int64_t o = (int64_t)n * g.x.stride[0] + (int64_t)c * g.x.stride[1] + (int64_t)i * g.x.stride[2] +
                        (int64_t)j * g.x.stride[3];
            double v = load(g.x.dt, x, o);
            if (!pool_max(g)) acc += v;
            else if (v != v ? (g.p.nan == CUDNN_PROPAGATE_NAN && acc == acc) : v > acc || *arg < 0) acc = v, *arg = o;
        }
    if (pool_max(g)) return *arg < 0 ? 0.0 : acc;
    return div > 0 ? acc / div : 0.0;
}

extern "C" cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,
                                             const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                             const cudnnTensorDescriptor_t yd, void *y)
{
    const char *fn = "cudnnPoolingForward";
    pool_geom g;
    cudnnStatus_t st = pool_check(fn, h, pd, xd, yd, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    if (!tensor_mem_ok(g.x, x, fn, "x") || !tensor_mem_ok(g.y, y, fn, "y")) return CUDNN_STATUS_BAD_PARAM;
    double al = scalar(g.x.dt, alpha), be = scalar(g.x.dt, beta);
    run(h, fn, [=]() {
        std::vector<double> out((size_t)numel(g.y));
        size_t k = 0;
        int64_t arg;
        for (int n = 0; n < g.N; n++)
            for (int c = 0; c < g.C; c++)
                for (int p = 0; p < g.P; p++)
                    for (int q = 0; q < g.Q; q++) out[k++] = pool_value(g, x, n, c, p, q, &arg);
        for (size_t i = 0; i < out.size(); i++) blend(g.y.dt, y, offset_of(g.y, (int64_t)i), out[i], al, be);
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,
                                              const cudnnTensorDescriptor_t yd, const void *y,
                                              const cudnnTensorDescriptor_t dyd, const void *dy,
                                              const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                              const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *fn = "cudnnPoolingBackward";
    pool_geom g;
    cudnnStatus_t st = pool_check(fn, h, pd, xd, yd, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    char a[64], b[64];
    if (!tensor_ok(dyd, fn, "dy") || !tensor_ok(dxd, fn, "dx")) return CUDNN_STATUS_BAD_PARAM;
    if (!same_dims(*dyd, g.y) || dyd->dt != g.y.dt)
        return BAD("%s: dy %s differs from y %s", fn, dims_str(*dyd, a, sizeof a), dims_str(g.y, b, sizeof b));
    if (!same_dims(*dxd, g.x) || dxd->dt != g.x.dt)
        return BAD("%s: dx %s differs from x %s", fn, dims_str(*dxd, a, sizeof a), dims_str(g.x, b, sizeof b));
    if (!alpha || !beta) return BAD("%s: alpha or beta is NULL", fn);
    cudnnTensorStruct DY = *dyd, DX = *dxd;
    if (!tensor_mem_ok(g.y, y, fn, "y") || !tensor_mem_ok(DY, dy, fn, "dy") || !tensor_mem_ok(g.x, x, fn, "x") ||
        !tensor_mem_ok(DX, dx, fn, "dx"))
        return CUDNN_STATUS_BAD_PARAM;
    double al = scalar(g.x.dt, alpha), be = scalar(g.x.dt, beta);
    run(h, fn, [=]() {
        /* gradients by x's logical index; max: to the element the forward chose */
        std::vector<double> acc((size_t)numel(g.x), 0.0);
        int64_t arg;
        for (int n = 0; n < g.N; n++)
            for (int c = 0; c < g.C; c++)
                for (int p = 0; p < g.P; p++)
                    for (int q = 0; q < g.Q; q++) {
                        int64_t yo = (int64_t)n * DY.stride[0] + (int64_t)c * DY.stride[1] + (int64_t)p * DY.stride[2] +
                                     (int64_t)q * DY.stride[3];
                        double gv = load(DY.dt, dy, yo);
                        int h0, h1, w0, w1;
                        double div = pool_window(g, p, q, &h0, &h1, &w0, &w1);
                        size_t base = ((size_t)n * g.C + c) * g.H;
                        if (pool_max(g)) {
                            pool_value(g, x, n, c, p, q, &arg);
                            for (int i = h0; i < h1 && arg >= 0; i++)
                                for (int j = w0; j < w1; j++)
                                    if ((int64_t)n * g.x.stride[0] + (int64_t)c * g.x.stride[1] +
                                            (int64_t)i * g.x.stride[2] + (int64_t)j * g.x.stride[3] == arg)
                                        acc[(base + i) * g.W + j] += gv, arg = -1;
                        } else if (div > 0) {
                            for (int i = h0; i < h1; i++)
                                for (int j = w0; j < w1; j++) acc[(base + i) * g.W + j] += gv / div;
                        }
                    }
        for (size_t i = 0; i < acc.size(); i++) blend(DX.dt, dx, offset_of(DX, (int64_t)i), acc[i], al, be);
    });
    return CUDNN_STATUS_SUCCESS;
}
