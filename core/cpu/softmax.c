/* softmax.c -- CPU softmax and log_softmax along one dim, numerically stable: the max of
 * each slice is subtracted before exp. f16/bf16 compute in f32.
 *
 * The input (made dense) is (outer, n, inner) around the dim. With inner == 1 each slice is
 * a contiguous row: a max pass, an exp-and-sum pass, a scale pass. Otherwise a block of up
 * to IB neighbouring slices is walked together, so every pass runs over contiguous memory
 * (the running max and sum live in small arrays over the block). Float32 uses the
 * branch-free tc_expf (core/scalar_math.h) and several sum lanes, so the loops vectorise;
 * double uses libm's exp. NaN anywhere in a slice makes the whole slice NaN, as in PyTorch.
 */
#include "nn.h"
#include "../scalar_math.h"
#include <math.h>

#define IB 256   /* slices per block when inner > 1 */
#define LANES 16 /* independent partial sums: lets the compiler vectorise the float sum */

static inline double exp_f64(double x) { return exp(x); }
static inline float exp_f32(float x) { return tc_expf(x); }

typedef struct sm_job {
    bool log;
    int dt;
    const char *x;
    char *y;
    int64_t n, inner, blocks; /* blocks of IB slices per outer index when inner > 1 */
} sm_job;

#define SOFTMAX_LOOPS(T, sfx)                                                               \
    static void row_##sfx(bool lg, const T *x, T *y, int64_t n)                             \
    {                                                                                       \
        T m = -INFINITY;                                                                    \
        for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;                            \
        T acc[LANES] = {0};                                                                 \
        int64_t i = 0;                                                                      \
        for (; i + LANES <= n; i += LANES)                                                  \
            for (int l = 0; l < LANES; l++) {                                               \
                T e = exp_##sfx(x[i + l] - m);                                              \
                if (!lg) y[i + l] = e;                                                      \
                acc[l] += e;                                                                \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            T e = exp_##sfx(x[i] - m);                                                      \
            if (!lg) y[i] = e;                                                              \
            acc[0] += e;                                                                    \
        }                                                                                   \
        T sum = 0;                                                                          \
        for (int l = 0; l < LANES; l++) sum += acc[l];                                      \
        if (lg) {                                                                           \
            T shift = m + (T)log(sum);                                                      \
            for (i = 0; i < n; i++) y[i] = x[i] - shift;                                    \
        } else {                                                                            \
            T inv = 1 / sum;                                                                \
            for (i = 0; i < n; i++) y[i] *= inv;                                            \
        }                                                                                   \
    }                                                                                       \
    /* nb slices at x[i], x[inner + i], ... for i < nb */                                   \
    static void block_##sfx(bool lg, const T *x, T *y, int64_t n, int64_t inner, int64_t nb) \
    {                                                                                       \
        T m[IB], s[IB];                                                                     \
        for (int64_t i = 0; i < nb; i++) m[i] = -INFINITY, s[i] = 0;                         \
        for (int64_t d = 0; d < n; d++) {                                                   \
            const T *r = x + d * inner;                                                     \
            for (int64_t i = 0; i < nb; i++) m[i] = r[i] > m[i] ? r[i] : m[i];              \
        }                                                                                   \
        for (int64_t d = 0; d < n; d++) {                                                   \
            const T *r = x + d * inner;                                                     \
            T *o = y + d * inner;                                                           \
            for (int64_t i = 0; i < nb; i++) {                                              \
                T e = exp_##sfx(r[i] - m[i]);                                               \
                if (!lg) o[i] = e;                                                          \
                s[i] += e;                                                                  \
            }                                                                               \
        }                                                                                   \
        for (int64_t i = 0; i < nb; i++) s[i] = lg ? m[i] + (T)log(s[i]) : 1 / s[i];        \
        for (int64_t d = 0; d < n; d++) {                                                   \
            const T *r = x + d * inner;                                                     \
            T *o = y + d * inner;                                                           \
            if (lg)                                                                         \
                for (int64_t i = 0; i < nb; i++) o[i] = r[i] - s[i];                        \
            else                                                                            \
                for (int64_t i = 0; i < nb; i++) o[i] *= s[i];                              \
        }                                                                                   \
    }                                                                                       \
    static void range_##sfx(const sm_job *j, int64_t u0, int64_t u1)                         \
    {                                                                                       \
        const T *x = (const T *)j->x;                                                       \
        T *y = (T *)j->y;                                                                   \
        for (int64_t u = u0; u < u1; u++) {                                                 \
            if (j->inner == 1) {                                                            \
                row_##sfx(j->log, x + u * j->n, y + u * j->n, j->n);                        \
                continue;                                                                   \
            }                                                                               \
            int64_t o = u / j->blocks, b = (u % j->blocks) * IB;                            \
            int64_t nb = j->inner - b < IB ? j->inner - b : IB;                             \
            int64_t off = o * j->n * j->inner + b;                                          \
            block_##sfx(j->log, x + off, y + off, j->n, j->inner, nb);                      \
        }                                                                                   \
    }
SOFTMAX_LOOPS(float, f32)
SOFTMAX_LOOPS(double, f64)

static void sm_range(void *ctx, int64_t u0, int64_t u1)
{
    const sm_job *j = ctx;
    if (j->dt == TC_F32) range_f32(j, u0, u1);
    else range_f64(j, u0, u1);
}

tc_status tc_cpu_softmax(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_softmax);
    const tc_tensor *x;
    tc_tensor *tin = NULL, *tout = NULL, *dense = NULL;
    tc_status s;
    if ((s = tc_nn_dense_in(k->in[0], &tin, &x))) goto done;
    if ((s = tc_nn_dense_out(k->out[0], &tout, &dense))) goto done;
    int64_t numel = tc_tensor_numel(x);
    if (numel == 0) goto done;
    int d = 0;
    if (x->ndim > 0 && (s = tc_wrap_dim(k->info->name, k->p->i[0], x->ndim, &d))) goto done;
    int64_t n = x->ndim > 0 ? x->size[d] : 1, inner = 1;
    for (int i = d + 1; i < x->ndim; i++) inner *= x->size[i];
    sm_job j = {.log = k->op == TC_OP_LOG_SOFTMAX, .dt = x->dtype, .x = tc_base(x), .y = tc_base(dense),
                .n = n, .inner = inner, .blocks = (inner + IB - 1) / IB};
    int64_t outer = numel / (n * inner);
    int64_t units = inner == 1 ? outer : outer * j.blocks, per = inner == 1 ? n : n * (inner < IB ? inner : IB);
    tc_parallel_for(units, per >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / per + 1, sm_range, &j);
    tc_nn_dense_out_finish(k->out[0], tout);
done:
    tc_tensor_release(tin);
    tc_tensor_release(tout);
    return s;
}
