/* dnn_bn.cu -- batch normalization on the device (the NORM kind: batch_norm and
 * batch_norm_backward, ops.def; layer_norm goes to layernorm.cu) through cuDNN 9's batch-norm API:
 *   batch_norm, training     cudnnBatchNormalizationForwardTraining: y and the saved mean /
 *                            inverse std (our stats rows; no running averages: the nn module
 *                            updates those from stats with ordinary ops, so the op is pure)
 *   batch_norm, evaluation   cudnnBatchNormalizationForwardInference; stats = (running_mean,
 *                            1/sqrt(running_var + eps)) by a small kernel here
 *   batch_norm_backward      cudnnBatchNormalizationBackward (training) from the saved stats:
 *                            gx, and the weight / bias gradients straight into the stats-shaped
 *                            result's two rows; in evaluation mode (no cuDNN call for it) a
 *                            kernel here with the CPU's formulas
 * These entry points are marked deprecated in cuDNN 9 (in favour of the graph API) but are
 * present and supported in 9.x; the header only warns with CUDNN_WARN_DEPRECATED.
 * Mode CUDNN_BATCHNORM_SPATIAL: statistics per channel over N and every spatial dim; x is
 * described as (N, C, L|1, 1) for 2-D / 3-D inputs, as it is for 4-D and 5-D ones.
 * dtypes: x f32 / f64 / f16 / bf16; the per-channel tensors and stats in float (double for
 * f64): a half weight, bias or running tensor beside a half x (model:half()) is converted to
 * a float32 scratch copy first, as the CPU computes it. Anything cuDNN does not take (sizes
 * beyond int, a refused configuration) is TC_ERR_UNSUPPORTED, so libtocha's
 * host fallback runs the CPU kernel. A missing weight / bias becomes a scratch vector of
 * ones / zeros (cuDNN needs both). Work goes on cu_stream() (cudnnSetStream).
 * NOTE: compiled with nvcc 13 for sm_90 but never run on a GPU (docs/cuda.md); over the mock
 * backend the host fallback runs instead.
 */
#include "dnn_handle.h"
#include "strided.h"
#include "cu_elem.h"
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static tc_status bn_fail(const char *what, cudnnStatus_t st, const char *call) { return cu_dnn_status(st, what, call); }

/* ---- small kernels ---------------------------------------------------------------------------- */

template <typename S>
__global__ void fill_kernel(S *p, int64_t n, S v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* stats (2, C) dense: row 0 = rm, row 1 = 1/sqrt(rv + eps) (evaluation). */
template <typename S>
__global__ void eval_stats_kernel(S *stats, const S *rm, const S *rv, int64_t C, double eps)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < C; i += (int64_t)gridDim.x * blockDim.x) {
        stats[i] = rm[i];
        stats[C + i] = (S)(1.0 / sqrt((double)rv[i] + eps));
    }
}

/* Evaluation-mode backward, which cuDNN does not have: per channel c of the dense (N, C, Sp)
 * x and g, with mean / invstd from the saved stats rows, gb = sum g, gw = invstd * sum
 * g (x - mean) and gx = g w invstd (core/cpu/batchnorm.c's formulas). One block per channel
 * (grid-stride over channels); each thread sums its elements in double in a fixed order and
 * the block adds the partial sums as a tree, so the result does not depend on timing. gx
 * never aliases x or g (dense_out gives scratch then). Elements are loaded and stored by
 * dtype (cu_elem.h), so one instantiation per stats type serves every x dtype. */
#define BN_EVAL_THREADS 256
template <typename S>
__global__ void eval_backward_kernel(int dt, const char *x, const char *g, char *gx, const S *w, const S *stats,
                                     S *grads, int64_t N, int64_t C, int64_t Sp)
{
    __shared__ double part_g[BN_EVAL_THREADS], part_gx[BN_EVAL_THREADS];
    const int es = cu_dtype_size(dt);
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mean = (double)stats[c], invstd = (double)stats[C + c], k = (double)w[c] * invstd;
        double sg = 0, sgx = 0;
        for (int64_t i = threadIdx.x; i < N * Sp; i += blockDim.x) {
            int64_t off = ((i / Sp) * C + c) * Sp + i % Sp;
            double gv = cu_load_as_double(dt, g + off * es), xv = cu_load_as_double(dt, x + off * es);
            sg += gv, sgx += gv * (xv - mean);
            cu_store_double(dt, gx + off * es, gv * k);
        }
        part_g[threadIdx.x] = sg, part_gx[threadIdx.x] = sgx;
        __syncthreads();
        for (int h = BN_EVAL_THREADS / 2; h > 0; h >>= 1) {
            if ((int)threadIdx.x < h)
                part_g[threadIdx.x] += part_g[threadIdx.x + h], part_gx[threadIdx.x] += part_gx[threadIdx.x + h];
            __syncthreads();
        }
        if (threadIdx.x == 0) grads[c] = (S)(part_gx[0] * invstd), grads[C + c] = (S)part_g[0];
        __syncthreads(); /* the partial sums are reused by the next channel */
    }
}

/* ---- descriptors ------------------------------------------------------------------------------ */

struct bn_descs {
    cudnnTensorDescriptor_t x, bn;
};

static void descs_free(bn_descs *d)
{
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->bn) cudnnDestroyTensorDescriptor(d->bn);
}

static cudnnDataType_t dnn_type(int dt)
{
    return dt == TC_F64 ? CUDNN_DATA_DOUBLE : dt == TC_F16 ? CUDNN_DATA_HALF : dt == TC_BF16 ? CUDNN_DATA_BFLOAT16
                                                                                           : CUDNN_DATA_FLOAT;
}

/* x (N, C, ...) as a packed 4-D (or 5-D) tensor, the per-channel tensors as (1, C, 1, 1[, 1]). */
static tc_status descs_make(const char *what, const tc_cuda_view *x, int sdt, bn_descs *d)
{
    int nd = x->ndim <= 4 ? 4 : 5, dims[5], strides[5], bdims[5], bstrides[5];
    for (int i = 0; i < nd; i++) {
        dims[i] = i < x->ndim ? (int)x->size[i] : 1;
        bdims[i] = i == 1 ? dims[1] : 1;
    }
    strides[nd - 1] = bstrides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--) {
        int64_t st64 = (int64_t)strides[i + 1] * dims[i + 1]; /* in 64 bits: int overflow is undefined */
        if (st64 > INT_MAX)
            return cu_fail(TC_ERR_UNSUPPORTED, "%s: cuDNN takes int strides; an input of %lld elements has more",
                           what, (long long)x->numel);
        strides[i] = (int)st64, bstrides[i] = bstrides[i + 1] * bdims[i + 1];
    }
    cudnnStatus_t st;
    if ((st = cudnnCreateTensorDescriptor(&d->x)) != CUDNN_STATUS_SUCCESS) return bn_fail(what, st, "descriptor");
    if ((st = cudnnCreateTensorDescriptor(&d->bn)) != CUDNN_STATUS_SUCCESS) return bn_fail(what, st, "descriptor");
    if ((st = cudnnSetTensorNdDescriptor(d->x, dnn_type(x->dtype), nd, dims, strides)) != CUDNN_STATUS_SUCCESS)
        return bn_fail(what, st, "input descriptor");
    if ((st = cudnnSetTensorNdDescriptor(d->bn, dnn_type(sdt), nd, bdims, bstrides)) != CUDNN_STATUS_SUCCESS)
        return bn_fail(what, st, "per-channel descriptor");
    return TC_OK;
}

/* ---- the launcher ----------------------------------------------------------------------------- */

/* Scratch and dense copies of one call, released together. */
struct bn_bufs {
    void *tmp[12];
    int n;
};

static tc_status dense_in(int dev, bn_bufs *b, const tc_cuda_view *v, tc_cuda_view *use, const char *what)
{
    void *t = NULL;
    tc_status s = cu_dense_input(dev, v, use, &t, what);
    if (t) b->tmp[b->n++] = t;
    return s;
}

/* A per-channel input (weight, bias, running stats) dense and in the stats dtype sdt: v
 * itself or a dense copy, or, for a half tensor beside a half x (cuDNN takes the per-channel
 * tensors in float only), a float32 copy in scratch. The CPU computes such a call through
 * float32 too (tc_cpu_with_f32), so the results agree. */
static tc_status channel_in(int dev, bn_bufs *b, int op, const tc_cuda_view *v, int sdt, tc_cuda_view *use,
                            const char *what)
{
    if (v->dtype == sdt) return dense_in(dev, b, v, use, what);
    void *t = NULL;
    tc_status s = cu_scratch_alloc(dev, (size_t)v->numel * cu_elsize(sdt), &t);
    if (s) return s;
    b->tmp[b->n++] = t;
    *use = cu_view_dense(v, t);
    use->dtype = sdt;
    return cu_convert_view(dev, op, use, v);
}

/* A dense destination for out: out itself when dense and not one of the inputs a, b (an
 * in-place call: cuDNN's batch norm does not promise to allow it), else scratch (copied
 * back at the end). */
static tc_status dense_out(int dev, bn_bufs *b, const tc_cuda_view *out, tc_cuda_view *use, const void *a,
                           const void *b2)
{
    *use = *out;
    if (cu_view_is_dense(out) && (!out->data || (out->data != a && out->data != b2))) return TC_OK;
    void *t = NULL;
    tc_status s = cu_scratch_alloc(dev, (size_t)out->numel * cu_elsize(out->dtype), &t);
    if (s) return s;
    b->tmp[b->n++] = t;
    *use = cu_view_dense(out, t);
    return TC_OK;
}

/* C values v of the stats dtype in scratch. */
static tc_status constant(int dev, bn_bufs *b, int sdt, int64_t C, double v, void **p)
{
    tc_status s = cu_scratch_alloc(dev, (size_t)C * cu_elsize(sdt), p);
    if (s) return s;
    b->tmp[b->n++] = *p;
    unsigned g = cu_blocks_for(C, 256);
    if (sdt == TC_F64) fill_kernel<double><<<g, 256, 0, cu_stream()>>>((double *)*p, C, v);
    else fill_kernel<float><<<g, 256, 0, cu_stream()>>>((float *)*p, C, (float)v);
    return cu_check(cudaGetLastError(), "batch_norm: fill");
}

tc_status cu_op_norm(int dev, const tc_cuda_call *c)
{
    if (c->op == TC_OP_LAYER_NORM || c->op == TC_OP_LAYER_NORM_BACKWARD) return cu_op_layer_norm(dev, c);
    bool bw = c->op == TC_OP_BATCH_NORM_BACKWARD;
    const tc_cuda_view *x = &c->in[bw ? 1 : 0];
    int dt = x->dtype, sdt = (dt == TC_F16 || dt == TC_BF16) ? TC_F32 : dt;
    bool train = c->params.i[0] != 0;
    if (dt != TC_F32 && dt != TC_F64 && dt != TC_F16 && dt != TC_BF16) return cu_unsupported(c);
    char what[160];
    snprintf(what, sizeof what, "%s: input (%lld,%lld,...) %s", cu_op_name(c->op), (long long)x->size[0],
             (long long)x->size[1], cu_dtype_name(dt));
    int64_t C = x->size[1];
    for (int d = 0; d < x->ndim; d++)
        if (x->size[d] > INT_MAX / 2) return cu_fail(TC_ERR_UNSUPPORTED, "%s: sizes beyond cuDNN's int", what);
    if (C == 0) return TC_OK;
    if (x->numel == 0 && bw) /* an empty batch: sums of nothing */
        return cu_strided_scale(&c->out[1], 0, what);

    bn_bufs b;
    memset(&b, 0, sizeof b);
    bn_descs d;
    memset(&d, 0, sizeof d);
    cudnnHandle_t h = NULL;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    tc_cuda_view xd, y, stats, w, bias, g;
    void *ones = NULL, *zeros = NULL;
    float f1 = 1, f0 = 0;
    double d1 = 1, d0 = 0;
    const void *one = dt == TC_F64 ? (const void *)&d1 : &f1, *zero = dt == TC_F64 ? (const void *)&d0 : &f0;
    double eps = c->params.s[0];
    tc_status s;
    if ((s = dense_in(dev, &b, x, &xd, what))) goto done;
    if ((s = dense_out(dev, &b, &c->out[0], &y, c->in[0].data, c->in[1].data))) goto done;
    if ((s = dense_out(dev, &b, &c->out[1], &stats, NULL, NULL))) goto done;
    {
        const tc_cuda_view *wv = &c->in[bw ? 2 : 1];
        if (wv->data) {
            if ((s = channel_in(dev, &b, c->op, wv, sdt, &w, what))) goto done;
        } else {
            if ((s = constant(dev, &b, sdt, C, 1, &ones))) goto done;
            w.data = ones;
        }
    }
    if ((s = descs_make(what, &xd, sdt, &d))) goto done;
    if ((s = cu_dnn_handle_get(dev, &h, what))) goto done;
    {
        char *sp = (char *)stats.data;
        size_t row = (size_t)C * cu_elsize(sdt);
        if (bw) {
            if ((s = dense_in(dev, &b, &c->in[0], &g, what))) goto done;
            tc_cuda_view sv;
            if ((s = dense_in(dev, &b, &c->in[3], &sv, what))) goto done;
            const char *saved = (const char *)sv.data;
            if (!train) { /* evaluation: our kernel (cuDNN's backward is for training only) */
                int64_t N = x->size[0], Sp = x->numel / (N * C);
                unsigned gr = (unsigned)(C < 65535 ? C : 65535);
                if (sdt == TC_F64)
                    eval_backward_kernel<double><<<gr, BN_EVAL_THREADS, 0, cu_stream()>>>(
                        dt, (const char *)xd.data, (const char *)g.data, (char *)y.data, (const double *)w.data,
                        (const double *)saved, (double *)sp, N, C, Sp);
                else
                    eval_backward_kernel<float><<<gr, BN_EVAL_THREADS, 0, cu_stream()>>>(
                        dt, (const char *)xd.data, (const char *)g.data, (char *)y.data, (const float *)w.data,
                        (const float *)saved, (float *)sp, N, C, Sp);
                goto launched;
            }
            /* the forward's eps, as cuDNN asks (it reads the saved statistics, not eps) */
            st = cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, d.x, xd.data, d.x,
                                                 g.data, d.x, y.data, d.bn, w.data, sp, sp + row, eps, saved,
                                                 saved + row);
        } else {
            const tc_cuda_view *bv = &c->in[2];
            if (bv->data) {
                if ((s = channel_in(dev, &b, c->op, bv, sdt, &bias, what))) goto done;
            } else {
                if ((s = constant(dev, &b, sdt, C, 0, &zeros))) goto done;
                bias.data = zeros;
            }
            if (x->numel == 0) {
                st = CUDNN_STATUS_SUCCESS;
            } else if (train) {
                st = cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, one, zero, d.x, xd.data, d.x,
                                                            y.data, d.bn, w.data, bias.data, 0.0, NULL, NULL, eps, sp,
                                                            sp + row);
            }
            if (!train) {
                tc_cuda_view rm, rv;
                if ((s = channel_in(dev, &b, c->op, &c->in[3], sdt, &rm, what))) goto done;
                if ((s = channel_in(dev, &b, c->op, &c->in[4], sdt, &rv, what))) goto done;
                if (x->numel > 0)
                    st = cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, one, zero, d.x, xd.data,
                                                                 d.x, y.data, d.bn, w.data, bias.data, rm.data,
                                                                 rv.data, eps);
                unsigned gr = cu_blocks_for(C, 256);
                if (sdt == TC_F64)
                    eval_stats_kernel<double><<<gr, 256, 0, cu_stream()>>>((double *)sp, (const double *)rm.data,
                                                                          (const double *)rv.data, C, eps);
                else
                    eval_stats_kernel<float><<<gr, 256, 0, cu_stream()>>>((float *)sp, (const float *)rm.data,
                                                                         (const float *)rv.data, C, eps);
                if ((s = cu_check(cudaGetLastError(), what))) goto done;
            }
        }
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        s = bn_fail(what, st, bw ? "cudnnBatchNormalizationBackward" : "cudnnBatchNormalizationForward");
        goto done;
    }
launched:
    if ((s = cu_check(cudaGetLastError(), what))) goto done;
    if (y.data != c->out[0].data && c->out[0].numel > 0 && (s = cu_strided_copy(&c->out[0], &y, what))) goto done;
    if (stats.data != c->out[1].data && (s = cu_strided_copy(&c->out[1], &stats, what))) goto done;
done:
    if (h) cu_dnn_handle_put(dev, h);
    descs_free(&d);
    for (int i = 0; i < b.n; i++) cu_scratch_free(dev, b.tmp[i]);
    return s;
}
