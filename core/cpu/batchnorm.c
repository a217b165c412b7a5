/* batchnorm.c -- CPU batch normalization: batch_norm and batch_norm_backward (ops.def); the
 * NORM kind's kernel, which hands layer_norm and its backward to layernorm.c.
 * f16/bf16 compute in f32 (tc_cpu_with_f32), so the loops see float or double only.
 *
 * x (made dense) is (N, C, S) with S the product of the spatial dims: channel c is N rows of
 * S contiguous values. Two layouts of work:
 *   S > 1   channels are independent jobs on the thread pool; each pass walks a channel's N
 *           rows, summing each row in LANES partial sums of T (so the loop vectorises) that
 *           are added into a double per row.
 *   S == 1  (N, C) input: a channel is a column, so blocks of CB neighbouring channels are
 *           the jobs and every pass reads whole rows of the block (contiguous), summing
 *           into one double per channel.
 * Forward, per channel: mean = sum / M, var = sum (x - mean)^2 / M (two passes: no
 * cancellation), invstd = 1/sqrt(var + eps); then y = x * scale + shift in one pass with
 * scale = invstd * w, shift = b - mean * scale. Evaluation takes mean / var from the
 * running tensors.
 * Backward, per channel: sg = sum g, sgx = sum g (x - mean); gw = sgx * invstd, gb = sg;
 * training gx = w invstd (g - sg/M - (x - mean) invstd^2 sgx/M), written as
 * gx = g k1 + x k2 + k3 (one pass); evaluation gx = g w invstd.
 * Per-channel tensors are read into doubles first and results are stored after, so any
 * aliasing between them is harmless; y / gx may be x or g themselves (in place): each
 * channel's sums are complete before its values are overwritten. Sums are per channel in a
 * fixed order, so results do not depend on the thread count.
 */
#include "nn.h"
#include "rowsum.h"
#include <math.h>
#include <stdlib.h>

#define LANES ROW_LANES /* partial sums per row: lets the compiler vectorise the float sums */
#define CB 64    /* channels per job for (N, C) inputs */

typedef struct bn_job {
    int dt;
    bool train, backward;
    const char *x, *g; /* dense x and (backward) gout */
    char *y;           /* dense y (forward) or gx (backward) */
    int64_t N, C, S;
    double eps;
    const double *w, *b, *rm, *rv; /* per channel (w, b: NULL for 1, 0) */
    double *mean, *invstd;         /* forward: computed (or from running); backward: given */
    double *gw, *gb;               /* backward: results */
} bn_job;

/* ---- channels as jobs (S > 1) ---------------------------------------------------------------- */

#define BN_CHANNEL_LOOPS(T, sfx)                                                                   \
    /* sum g and sum g (x - m) of one row */                                                       \
    static void row_gsums_##sfx(const T *g, const T *x, int64_t S, T m, double *sg, double *sgx)   \
    {                                                                                              \
        T a[LANES] = {0}, b[LANES] = {0};                                                          \
        int64_t i = 0;                                                                             \
        for (; i + LANES <= S; i += LANES)                                                         \
            for (int l = 0; l < LANES; l++) {                                                      \
                a[l] += g[i + l];                                                                  \
                b[l] += g[i + l] * (x[i + l] - m);                                                 \
            }                                                                                      \
        double s1 = 0, s2 = 0;                                                                     \
        for (; i < S; i++) s1 += (double)g[i], s2 += (double)(g[i] * (x[i] - m));                  \
        for (int l = 0; l < LANES; l++) s1 += (double)a[l], s2 += (double)b[l];                    \
        *sg += s1, *sgx += s2;                                                                     \
    }                                                                                              \
    static void channel_##sfx(const bn_job *j, int64_t c)                                          \
    {                                                                                              \
        const int64_t N = j->N, C = j->C, S = j->S, M = N * S;                                     \
        const T *x = (const T *)j->x;                                                              \
        T *y = (T *)j->y;                                                                          \
        double w = j->w ? j->w[c] : 1;                                                             \
        if (!j->backward) {                                                                        \
            double mean, invstd;                                                                   \
            if (j->train) {                                                                        \
                double s = 0, q = 0;                                                               \
                for (int64_t n = 0; n < N; n++) s += row_sum_##sfx(x + (n * C + c) * S, S);        \
                mean = s / (double)M;                                                              \
                for (int64_t n = 0; n < N; n++) q += row_sqdev_##sfx(x + (n * C + c) * S, S, (T)mean); \
                invstd = 1 / sqrt(q / (double)M + j->eps);                                         \
            } else {                                                                               \
                mean = j->rm[c], invstd = 1 / sqrt(j->rv[c] + j->eps);                             \
            }                                                                                      \
            j->mean[c] = mean, j->invstd[c] = invstd;                                              \
            T scale = (T)(invstd * w), shift = (T)((j->b ? j->b[c] : 0) - mean * invstd * w);      \
            for (int64_t n = 0; n < N; n++) {                                                      \
                const T *r = x + (n * C + c) * S;                                                  \
                T *o = y + (n * C + c) * S;                                                        \
                for (int64_t i = 0; i < S; i++) o[i] = r[i] * scale + shift;                       \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        const T *g = (const T *)j->g;                                                              \
        double mean = j->mean[c], invstd = j->invstd[c], sg = 0, sgx = 0;                          \
        for (int64_t n = 0; n < N; n++)                                                            \
            row_gsums_##sfx(g + (n * C + c) * S, x + (n * C + c) * S, S, (T)mean, &sg, &sgx);      \
        j->gw[c] = sgx * invstd, j->gb[c] = sg;                                                    \
        double k1 = w * invstd, k2 = 0, k3 = 0;                                                    \
        if (j->train && M > 0) {                                                                   \
            k2 = -w * invstd * invstd * invstd * sgx / (double)M;                                  \
            k3 = -w * invstd * sg / (double)M - k2 * mean;                                         \
        }                                                                                          \
        T t1 = (T)k1, t2 = (T)k2, t3 = (T)k3;                                                      \
        for (int64_t n = 0; n < N; n++) {                                                          \
            const T *gr = g + (n * C + c) * S, *xr = x + (n * C + c) * S;                          \
            T *o = y + (n * C + c) * S;                                                            \
            if (j->train)                                                                          \
                for (int64_t i = 0; i < S; i++) o[i] = gr[i] * t1 + xr[i] * t2 + t3;               \
            else                                                                                   \
                for (int64_t i = 0; i < S; i++) o[i] = gr[i] * t1;                                 \
        }                                                                                          \
    }

/* ---- blocks of channels as jobs (S == 1): x is (N, C) ----------------------------------------- */

#define BN_COLUMN_LOOPS(T, sfx)                                                                    \
    static void columns_##sfx(const bn_job *j, int64_t c0, int64_t c1)                             \
    {                                                                                              \
        const int64_t N = j->N, C = j->C, nb = c1 - c0;                                            \
        const T *x = (const T *)j->x + c0;                                                         \
        T *y = (T *)j->y + c0;                                                                     \
        double s1[CB] = {0}, s2[CB] = {0};                                                         \
        T m[CB], k1[CB], k2[CB], k3[CB];                                                           \
        if (!j->backward) {                                                                        \
            if (j->train) {                                                                        \
                for (int64_t n = 0; n < N; n++)                                                    \
                    for (int64_t i = 0; i < nb; i++) s1[i] += (double)x[n * C + i];                \
                for (int64_t i = 0; i < nb; i++) m[i] = (T)(s1[i] / (double)N);                    \
                for (int64_t n = 0; n < N; n++)                                                    \
                    for (int64_t i = 0; i < nb; i++) {                                             \
                        T d = x[n * C + i] - m[i];                                                 \
                        s2[i] += (double)(d * d);                                                  \
                    }                                                                              \
            }                                                                                      \
            for (int64_t i = 0; i < nb; i++) {                                                     \
                int64_t c = c0 + i;                                                                \
                double mean = j->train ? s1[i] / (double)N : j->rm[c];                             \
                double invstd = 1 / sqrt((j->train ? s2[i] / (double)N : j->rv[c]) + j->eps);      \
                double w = j->w ? j->w[c] : 1;                                                     \
                j->mean[c] = mean, j->invstd[c] = invstd;                                          \
                k1[i] = (T)(invstd * w), k2[i] = (T)((j->b ? j->b[c] : 0) - mean * invstd * w);    \
            }                                                                                      \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t i = 0; i < nb; i++) y[n * C + i] = x[n * C + i] * k1[i] + k2[i];      \
            return;                                                                                \
        }                                                                                          \
        const T *g = (const T *)j->g + c0;                                                         \
        for (int64_t i = 0; i < nb; i++) m[i] = (T)j->mean[c0 + i];                                \
        for (int64_t n = 0; n < N; n++)                                                            \
            for (int64_t i = 0; i < nb; i++) {                                                     \
                T gv = g[n * C + i];                                                               \
                s1[i] += (double)gv, s2[i] += (double)(gv * (x[n * C + i] - m[i]));                \
            }                                                                                      \
        for (int64_t i = 0; i < nb; i++) {                                                         \
            int64_t c = c0 + i;                                                                    \
            double w = j->w ? j->w[c] : 1, invstd = j->invstd[c], mean = j->mean[c];               \
            j->gw[c] = s2[i] * invstd, j->gb[c] = s1[i];                                           \
            double a = w * invstd, b = 0, d = 0;                                                   \
            if (j->train && N > 0) {                                                               \
                b = -w * invstd * invstd * invstd * s2[i] / (double)N;                             \
                d = -w * invstd * s1[i] / (double)N - b * mean;                                    \
            }                                                                                      \
            k1[i] = (T)a, k2[i] = (T)b, k3[i] = (T)d;                                              \
        }                                                                                          \
        for (int64_t n = 0; n < N; n++)                                                            \
            for (int64_t i = 0; i < nb; i++)                                                       \
                y[n * C + i] = g[n * C + i] * k1[i] + x[n * C + i] * k2[i] + k3[i];                \
    }

BN_CHANNEL_LOOPS(float, f32)
BN_CHANNEL_LOOPS(double, f64)
BN_COLUMN_LOOPS(float, f32)
BN_COLUMN_LOOPS(double, f64)

static void bn_range(void *ctx, int64_t u0, int64_t u1)
{
    const bn_job *j = ctx;
    bool f32 = j->dt == TC_F32;
    if (j->S == 1) {
        for (int64_t u = u0; u < u1; u++) {
            int64_t c0 = u * CB, c1 = c0 + CB < j->C ? c0 + CB : j->C;
            if (f32) columns_f32(j, c0, c1);
            else columns_f64(j, c0, c1);
        }
        return;
    }
    for (int64_t c = u0; c < u1; c++) {
        if (f32) channel_f32(j, c);
        else channel_f64(j, c);
    }
}

/* ---- the kernel ------------------------------------------------------------------------------- */

/* t's element i of a 1-D tensor (or row r of a 2-D one) as a double. */
static double at(const tc_tensor *t, int64_t r, int64_t i)
{
    int64_t off = (t->ndim == 2 ? r * t->stride[0] : 0) + i * t->stride[t->ndim - 1];
    return tc_load_as_double(t->dtype, tc_base(t) + off * tc_elsize(t->dtype));
}

static void put(tc_tensor *t, int64_t r, int64_t i, double v)
{
    int64_t off = r * t->stride[0] + i * t->stride[1];
    tc_store_double(t->dtype, tc_base(t) + off * tc_elsize(t->dtype), v);
}

tc_status tc_cpu_norm(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_norm);
    if (k->op == TC_OP_LAYER_NORM || k->op == TC_OP_LAYER_NORM_BACKWARD) return tc_cpu_layer_norm(k);
    bool bw = k->op == TC_OP_BATCH_NORM_BACKWARD;
    const tc_tensor *xin = k->in[bw ? 1 : 0], *win = k->in[bw ? 2 : 1], *bin = bw ? NULL : k->in[2];
    const tc_tensor *x = NULL, *g = NULL;
    tc_tensor *tx = NULL, *tg = NULL, *ty = NULL, *y = NULL;
    int64_t N = xin->size[0], C = xin->size[1], S = 1;
    for (int d = 2; d < xin->ndim; d++) S *= xin->size[d];
    double *buf = tc_malloc(sizeof(double) * (size_t)(8 * (C > 0 ? C : 1)), k->info->name);
    if (!buf) return TC_ERR_MEMORY;
    double *w = buf, *b = buf + C, *rm = buf + 2 * C, *rv = buf + 3 * C, *mean = buf + 4 * C,
           *invstd = buf + 5 * C, *gw = buf + 6 * C, *gb = buf + 7 * C;
    bn_job j = {.dt = xin->dtype, .train = k->p->i[0] != 0, .backward = bw, .N = N, .C = C, .S = S,
                .eps = k->p->s[0], .w = win ? w : NULL, .b = bin ? b : NULL, .rm = rm, .rv = rv,
                .mean = mean, .invstd = invstd, .gw = gw, .gb = gb};
    for (int64_t c = 0; c < C; c++) {
        if (win) w[c] = at(win, 0, c);
        if (bin) b[c] = at(bin, 0, c);
        if (bw) mean[c] = at(k->in[3], 0, c), invstd[c] = at(k->in[3], 1, c);
        else if (!j.train) rm[c] = at(k->in[3], 0, c), rv[c] = at(k->in[4], 0, c);
    }
    tc_status s;
    if ((s = tc_nn_dense_in(xin, &tx, &x))) goto done;
    if (bw && (s = tc_nn_dense_in(k->in[0], &tg, &g))) goto done;
    if ((s = tc_nn_dense_out(k->out[0], &ty, &y))) goto done;
    j.x = tc_base(x), j.g = g ? tc_base(g) : NULL, j.y = tc_base(y);
    if (C > 0) {
        int64_t units = S == 1 ? (C + CB - 1) / CB : C, per = S == 1 ? N * CB : N * S;
        per = per > 0 ? per : 1;
        tc_parallel_for(units, per >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / per + 1, bn_range, &j);
    }
    tc_nn_dense_out_finish(k->out[0], ty);
    for (int64_t c = 0; c < C; c++) {
        put(k->out[1], 0, c, bw ? gw[c] : mean[c]);
        put(k->out[1], 1, c, bw ? gb[c] : invstd[c]);
    }
done:
    tc_tensor_release(tx);
    tc_tensor_release(tg);
    tc_tensor_release(ty);
    free(buf);
    return s;
}
