/* layernorm.c -- CPU layer normalization: layer_norm and layer_norm_backward (ops.def).
 * f16/bf16 compute in f32 (tc_cpu_norm converts them with tc_cpu_with_f32 first), so the
 * loops see float or double only, and weight / bias have x's type.
 *
 * x (made dense) is (M, K): M rows of K contiguous values, each normalised on its own.
 *   forward   blocks of rows are the jobs. Per row: mean = sum / K and var = sum (x - mean)^2
 *             / K (two passes, summed in double: no cancellation), rstd = 1/sqrt(var + eps);
 *             then y = (x rstd - mean rstd) w + b in one pass.
 *   backward  per row, with xhat = (x - mean) rstd and h = g w: the sums sh = sum h and
 *             shx = sum h xhat, then gx = h rstd + xhat (-rstd shx / K) - rstd sh / K in one
 *             pass. The weight and bias gradients sum g xhat and g over the rows: the rows are
 *             cut into at most CHUNKS chunks, a number fixed by M and K alone; each chunk sums
 *             into its own double vectors (a job per chunk), and the chunks are added in
 *             order, so the result does not depend on the thread count.
 * y / gx may be x or g themselves (in place): a row's sums are complete before its values are
 * overwritten, and each element is read before it is written.
 */
#include "nn.h"
#include "rowsum.h"
#include <math.h>
#include <stdlib.h>

#define CHUNKS 64            /* most row chunks of the backward's weight / bias sums */
#define PART_BUDGET (1 << 21) /* most doubles of the chunks' partial sums (16 MB) */

typedef struct ln_job {
    int dt;
    int64_t M, K, rows; /* rows: per chunk (backward) */
    double eps;
    const char *x, *g, *w, *b; /* dense; w, b NULL for ones / zeros */
    char *y;                   /* y (forward) or gx (backward) */
    char *mean, *rstd;         /* the stats rows: written (forward) or read (backward) */
    double *part;              /* backward: chunk c's sums of g xhat at part + 2cK, of g after */
} ln_job;

#define LN_LOOPS(T, sfx)                                                                           \
    static void forward_row_##sfx(const ln_job *j, int64_t r)                                      \
    {                                                                                              \
        const int64_t K = j->K;                                                                    \
        const T *x = (const T *)j->x + r * K, *w = (const T *)j->w, *b = (const T *)j->b;           \
        T *y = (T *)j->y + r * K;                                                                  \
        double mean = row_sum_##sfx(x, K) / (double)K;                                             \
        double rstd = 1 / sqrt(row_sqdev_##sfx(x, K, (T)mean) / (double)K + j->eps);               \
        ((T *)j->mean)[r] = (T)mean, ((T *)j->rstd)[r] = (T)rstd;                                  \
        T a = (T)rstd, c = (T)(-mean * rstd);                                                      \
        if (w && b)                                                                                \
            for (int64_t i = 0; i < K; i++) y[i] = (x[i] * a + c) * w[i] + b[i];                   \
        else if (w)                                                                                \
            for (int64_t i = 0; i < K; i++) y[i] = (x[i] * a + c) * w[i];                          \
        else if (b)                                                                                \
            for (int64_t i = 0; i < K; i++) y[i] = x[i] * a + c + b[i];                            \
        else                                                                                       \
            for (int64_t i = 0; i < K; i++) y[i] = x[i] * a + c;                                   \
    }                                                                                              \
    /* gx of row r; its g xhat and g added into pw, pb */                                          \
    static void backward_row_##sfx(const ln_job *j, int64_t r, double *pw, double *pb)             \
    {                                                                                              \
        const int64_t K = j->K;                                                                    \
        const T *x = (const T *)j->x + r * K, *g = (const T *)j->g + r * K, *w = (const T *)j->w;   \
        T *gx = (T *)j->y + r * K;                                                                 \
        const T m = ((const T *)j->mean)[r], rs = ((const T *)j->rstd)[r];                         \
        T a[ROW_LANES] = {0}, bsum[ROW_LANES] = {0};                                               \
        int64_t i = 0;                                                                             \
        for (; i + ROW_LANES <= K; i += ROW_LANES)                                                 \
            for (int l = 0; l < ROW_LANES; l++) {                                                  \
                T h = w ? g[i + l] * w[i + l] : g[i + l];                                          \
                a[l] += h;                                                                         \
                bsum[l] += h * ((x[i + l] - m) * rs);                                              \
            }                                                                                      \
        double sh = 0, shx = 0;                                                                    \
        for (; i < K; i++) {                                                                       \
            T h = w ? g[i] * w[i] : g[i];                                                          \
            sh += (double)h, shx += (double)(h * ((x[i] - m) * rs));                               \
        }                                                                                          \
        for (int l = 0; l < ROW_LANES; l++) sh += (double)a[l], shx += (double)bsum[l];            \
        const T k2 = (T)(-(double)rs * shx / (double)K), k3 = (T)(-(double)rs * sh / (double)K);   \
        for (i = 0; i < K; i++) {                                                                  \
            T gi = g[i], xh = (x[i] - m) * rs, h = w ? gi * w[i] : gi;                             \
            pw[i] += (double)(gi * xh), pb[i] += (double)gi;                                       \
            gx[i] = h * rs + xh * k2 + k3;                                                         \
        }                                                                                          \
    }

LN_LOOPS(float, f32)
LN_LOOPS(double, f64)

static void forward_range(void *ctx, int64_t r0, int64_t r1)
{
    const ln_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        if (j->dt == TC_F32) forward_row_f32(j, r);
        else forward_row_f64(j, r);
    }
}

static void backward_range(void *ctx, int64_t c0, int64_t c1)
{
    const ln_job *j = ctx;
    for (int64_t c = c0; c < c1; c++) {
        double *pw = j->part + 2 * c * j->K, *pb = pw + j->K;
        int64_t r1 = (c + 1) * j->rows < j->M ? (c + 1) * j->rows : j->M;
        for (int64_t r = c * j->rows; r < r1; r++) {
            if (j->dt == TC_F32) backward_row_f32(j, r, pw, pb);
            else backward_row_f64(j, r, pw, pb);
        }
    }
}

/* Row chunks of the backward: at most CHUNKS, and their partial sums within PART_BUDGET. */
static int64_t chunk_count(int64_t M, int64_t K)
{
    int64_t n = M < CHUNKS ? M : CHUNKS, cap = PART_BUDGET / (2 * K);
    if (n > cap) n = cap;
    return n > 0 ? n : 1;
}

/* The backward's weight / bias sums: every chunk's part, added in chunk order, into the dense
 * (2, K) gwb. */
static void store_param_grads(const ln_job *j, int64_t nchunks, char *gwb)
{
    for (int64_t i = 0; i < 2 * j->K; i++) {
        double s = 0;
        for (int64_t c = 0; c < nchunks; c++) s += j->part[2 * c * j->K + i];
        if (j->dt == TC_F32) ((float *)gwb)[i] = (float)s;
        else ((double *)gwb)[i] = s;
    }
}

tc_status tc_cpu_layer_norm(const tc_kcall *k)
{
    bool bw = k->op == TC_OP_LAYER_NORM_BACKWARD;
    int nin = bw ? 4 : 3;
    const tc_tensor *in[4] = {0};
    tc_tensor *tin[4] = {0}, *tout[2] = {0}, *out[2] = {0};
    tc_status s = TC_OK;
    for (int i = 0; i < nin && !s; i++)
        if (k->in[i]) s = tc_nn_dense_in(k->in[i], &tin[i], &in[i]);
    for (int o = 0; o < 2 && !s; o++) s = tc_nn_dense_out(k->out[o], &tout[o], &out[o]);
    if (s) goto done;
    const tc_tensor *x = in[bw];
    ln_job j = {.dt = x->dtype, .K = 1, .M = 1, .eps = k->p->s[0], .x = tc_base(x), .y = tc_base(out[0])};
    for (int d = 0; d < x->ndim; d++) {
        if (d < x->ndim - k->p->i[0]) j.M *= x->size[d];
        else j.K *= x->size[d];
    }
    j.w = in[bw + 1] ? tc_base(in[bw + 1]) : NULL;
    size_t es = j.dt == TC_F32 ? 4 : 8;
    if (!bw) {
        j.b = in[2] ? tc_base(in[2]) : NULL;
        j.mean = tc_base(out[1]), j.rstd = j.mean + (size_t)j.M * es;
        if (j.M > 0) {
            int64_t grain = j.K >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / j.K + 1;
            tc_parallel_for(j.M, grain, forward_range, &j);
        }
    } else if (j.K > 0) {
        j.g = tc_base(in[0]);
        j.mean = tc_base(in[3]), j.rstd = j.mean + (size_t)j.M * es;
        int64_t nchunks = chunk_count(j.M, j.K);
        j.rows = (j.M + nchunks - 1) / nchunks;
        nchunks = j.M > 0 ? (j.M + j.rows - 1) / j.rows : 1; /* no empty chunk at the end */
        j.part = calloc((size_t)(2 * nchunks * j.K), sizeof(double));
        if (!j.part) {
            s = tc_set_error(TC_ERR_MEMORY, "layer_norm_backward: out of memory for %lld partial sums",
                             (long long)(2 * nchunks * j.K));
            goto done;
        }
        if (j.M > 0) tc_parallel_for(nchunks, 1, backward_range, &j);
        store_param_grads(&j, nchunks, tc_base(out[1]));
        free(j.part);
    }
    for (int o = 0; o < 2; o++) tc_nn_dense_out_finish(k->out[o], tout[o]);
done:
    for (int i = 0; i < 4; i++) tc_tensor_release(tin[i]);
    for (int o = 0; o < 2; o++) tc_tensor_release(tout[o]);
    return s;
}
