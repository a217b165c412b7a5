/* softmax.c -- CPU softmax and log_softmax along one dim, numerically stable: the max of
 * each slice is subtracted before exp, and their backward ops (softmax_backward,
 * log_softmax_backward: one pass for the slice sums, one for the gradient). f16/bf16
 * compute in f32.
 *
 * The input (made dense) is (outer, n, inner) around the dim. With inner == 1 each slice is
 * a contiguous row: a max pass, an exp-and-sum pass, a scale pass. Otherwise a block of up
 * to IB neighbouring slices is walked together, so every pass runs over contiguous memory
 * (the running max and sum live in small arrays over the block). A causal softmax (i1, the
 * last dim) runs each row i of a (L, S) matrix over its first i + 1 elements and writes 0s
 * after them. Float32 uses the branch-free tc_expf (core/scalar_math.h) and several sum
 * lanes, so the loops vectorise (and run 8 lanes wide in their AVX2 clones); double uses
 * libm's exp. NaN anywhere in a slice makes the whole slice NaN, as in PyTorch.
 */
#include "nn.h"
#include "../scalar_math.h"
#include <math.h>

#define IB 256   /* slices per block when inner > 1 */
#define LANES 16 /* independent partial sums: lets the compiler vectorise the float sum */

/* The slice loops are also compiled for AVX2 and picked at load time, as ew.c's float
 * loops: tc_expf then runs 8 lanes wide (the same bits: IEEE operations, no FMA
 * contraction under -std=c11). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SM_WIDE __attribute__((noinline, target_clones("avx2", "default")))
#else
#define SM_WIDE
#endif

static inline double exp_f64(double x) { return exp(x); }
static inline float exp_f32(float x) { return tc_expf(x); }

typedef struct sm_job {
    bool log;
    int dt;
    const char *x;
    char *y;
    int64_t n, inner, blocks; /* blocks of IB slices per outer index when inner > 1 */
    int64_t causal_rows;      /* causal softmax (inner == 1): L, the rows of each (L, n) matrix; else 0 */
} sm_job;

#define SOFTMAX_LOOPS(T, sfx)                                                               \
    SM_WIDE static void row_##sfx(bool lg, const T *x, T *y, int64_t n)                     \
    {                                                                                       \
        T m = -INFINITY;                                                                    \
        for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;                            \
        T acc[LANES] = {0};                                                                 \
        int64_t i = 0;                                                                      \
        /* one loop per mode: a conditional store kept the loop from vectorising */         \
        if (lg)                                                                             \
            for (; i + LANES <= n; i += LANES)                                              \
                for (int l = 0; l < LANES; l++) acc[l] += exp_##sfx(x[i + l] - m);          \
        else                                                                                \
            for (; i + LANES <= n; i += LANES)                                              \
                for (int l = 0; l < LANES; l++) {                                           \
                    T e = exp_##sfx(x[i + l] - m);                                          \
                    y[i + l] = e;                                                           \
                    acc[l] += e;                                                            \
                }                                                                           \
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
    SM_WIDE static void block_##sfx(bool lg, const T *x, T *y, int64_t n, int64_t inner, int64_t nb) \
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
            if (lg)                                                                         \
                for (int64_t i = 0; i < nb; i++) s[i] += exp_##sfx(r[i] - m[i]);           \
            else                                                                            \
                for (int64_t i = 0; i < nb; i++) {                                          \
                    T e = exp_##sfx(r[i] - m[i]);                                           \
                    o[i] = e;                                                               \
                    s[i] += e;                                                              \
                }                                                                           \
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
                /* causal: row i of its matrix keeps its first i + 1 elements, the rest are 0 */ \
                int64_t live = j->n;                                                        \
                if (j->causal_rows && u % j->causal_rows + 1 < live) live = u % j->causal_rows + 1; \
                row_##sfx(j->log, x + u * j->n, y + u * j->n, live);                        \
                for (int64_t k = live; k < j->n; k++) y[u * j->n + k] = 0;                  \
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

/* ---- backward: softmax_backward(g, y), log_softmax_backward(g, y) ----------------------------
 * Per slice, with the sum in double (float32 too, so long rows lose no digits):
 *   softmax:     gx = y * (g - sum(g * y))
 *   log_softmax: gx = g - exp(y) * sum(g)
 * Same layout as the forward: a row pass for inner == 1, blocks of IB slices otherwise. Each
 * element is read before it is written at the same index, so gx may share g's or y's memory.
 * The causal softmax_backward (i1) reads row i of each (L, S) matrix over its first i + 1
 * elements only and writes 0 after them (nothing there is read). */

typedef struct smb_job {
    bool log;
    int dt;
    const char *g, *y;
    char *gx;
    int64_t n, inner, blocks;
    int64_t causal_rows; /* causal softmax_backward (inner == 1): L, as sm_job's; else 0 */
} smb_job;

#define SOFTMAX_BACKWARD_LOOPS(T, sfx)                                                      \
    /* a row of len elements, of which the first n are live (causal: the rest get gx = 0) */ \
    SM_WIDE static void brow_##sfx(bool lg, const T *g, const T *y, T *gx, int64_t n, int64_t len) \
    {                                                                                       \
        double acc[LANES] = {0};                                                            \
        for (int64_t k = n; k < len; k++) gx[k] = 0;                                        \
        int64_t i = 0;                                                                      \
        if (lg)                                                                             \
            for (; i + LANES <= n; i += LANES)                                              \
                for (int l = 0; l < LANES; l++) acc[l] += (double)g[i + l];                 \
        else                                                                                \
            for (; i + LANES <= n; i += LANES)                                              \
                for (int l = 0; l < LANES; l++) acc[l] += (double)g[i + l] * (double)y[i + l]; \
        for (; i < n; i++) acc[0] += lg ? (double)g[i] : (double)g[i] * (double)y[i];       \
        double sum = 0;                                                                     \
        for (int l = 0; l < LANES; l++) sum += acc[l];                                      \
        T s = (T)sum;                                                                       \
        if (lg)                                                                             \
            for (i = 0; i < n; i++) gx[i] = g[i] - exp_##sfx(y[i]) * s;                     \
        else                                                                                \
            for (i = 0; i < n; i++) gx[i] = y[i] * (g[i] - s);                              \
    }                                                                                       \
    /* nb slices at g[i], g[inner + i], ... for i < nb */                                   \
    SM_WIDE static void bblock_##sfx(bool lg, const T *g, const T *y, T *gx, int64_t n, int64_t inner, int64_t nb) \
    {                                                                                       \
        double acc[IB];                                                                     \
        T s[IB];                                                                            \
        for (int64_t i = 0; i < nb; i++) acc[i] = 0;                                        \
        for (int64_t d = 0; d < n; d++) {                                                   \
            const T *gr = g + d * inner, *yr = y + d * inner;                               \
            if (lg)                                                                         \
                for (int64_t i = 0; i < nb; i++) acc[i] += (double)gr[i];                   \
            else                                                                            \
                for (int64_t i = 0; i < nb; i++) acc[i] += (double)gr[i] * (double)yr[i];   \
        }                                                                                   \
        for (int64_t i = 0; i < nb; i++) s[i] = (T)acc[i];                                  \
        for (int64_t d = 0; d < n; d++) {                                                   \
            const T *gr = g + d * inner, *yr = y + d * inner;                               \
            T *o = gx + d * inner;                                                          \
            if (lg)                                                                         \
                for (int64_t i = 0; i < nb; i++) o[i] = gr[i] - exp_##sfx(yr[i]) * s[i];    \
            else                                                                            \
                for (int64_t i = 0; i < nb; i++) o[i] = yr[i] * (gr[i] - s[i]);             \
        }                                                                                   \
    }                                                                                       \
    static void brange_##sfx(const smb_job *j, int64_t u0, int64_t u1)                      \
    {                                                                                       \
        const T *g = (const T *)j->g, *y = (const T *)j->y;                                 \
        T *gx = (T *)j->gx;                                                                 \
        for (int64_t u = u0; u < u1; u++) {                                                 \
            if (j->inner == 1) {                                                            \
                int64_t live = j->n;                                                        \
                if (j->causal_rows && u % j->causal_rows + 1 < live) live = u % j->causal_rows + 1; \
                brow_##sfx(j->log, g + u * j->n, y + u * j->n, gx + u * j->n, live, j->n);  \
                continue;                                                                   \
            }                                                                               \
            int64_t o = u / j->blocks, b = (u % j->blocks) * IB;                            \
            int64_t nb = j->inner - b < IB ? j->inner - b : IB;                             \
            int64_t off = o * j->n * j->inner + b;                                          \
            bblock_##sfx(j->log, g + off, y + off, gx + off, j->n, j->inner, nb);           \
        }                                                                                   \
    }
SOFTMAX_BACKWARD_LOOPS(float, f32)
SOFTMAX_BACKWARD_LOOPS(double, f64)

static void smb_range(void *ctx, int64_t u0, int64_t u1)
{
    const smb_job *j = ctx;
    if (j->dt == TC_F32) brange_f32(j, u0, u1);
    else brange_f64(j, u0, u1);
}

/* softmax_backward / log_softmax_backward: in[0] = g, in[1] = y (same size, checked by
 * tc_prepare_softmax), i0 = dim. */
static tc_status softmax_backward(const tc_kcall *k)
{
    const tc_tensor *g, *y;
    tc_tensor *tg = NULL, *ty = NULL, *tout = NULL, *dense = NULL;
    tc_status s;
    if ((s = tc_nn_dense_in(k->in[0], &tg, &g))) goto done;
    if ((s = tc_nn_dense_in(k->in[1], &ty, &y))) goto done;
    if ((s = tc_nn_dense_out(k->out[0], &tout, &dense))) goto done;
    int64_t numel = tc_tensor_numel(g);
    if (numel == 0) goto done;
    int d = 0;
    if (g->ndim > 0 && (s = tc_wrap_dim(k->info->name, k->p->i[0], g->ndim, &d))) goto done;
    int64_t n = g->ndim > 0 ? g->size[d] : 1, inner = 1;
    for (int i = d + 1; i < g->ndim; i++) inner *= g->size[i];
    smb_job j = {.log = k->op == TC_OP_LOG_SOFTMAX_BACKWARD, .dt = g->dtype, .g = tc_base(g), .y = tc_base(y),
                 .gx = tc_base(dense), .n = n, .inner = inner, .blocks = (inner + IB - 1) / IB};
    /* causal (checked by tc_prepare_softmax: dim is the last, so inner == 1) */
    if (k->op == TC_OP_SOFTMAX_BACKWARD && k->p->i[1]) j.causal_rows = g->size[g->ndim - 2];
    int64_t outer = numel / (n * inner);
    int64_t units = inner == 1 ? outer : outer * j.blocks, per = inner == 1 ? n : n * (inner < IB ? inner : IB);
    tc_parallel_for(units, per >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / per + 1, smb_range, &j);
    tc_nn_dense_out_finish(k->out[0], tout);
done:
    tc_tensor_release(tg);
    tc_tensor_release(ty);
    tc_tensor_release(tout);
    return s;
}

tc_status tc_cpu_softmax(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_softmax);
    if (k->op == TC_OP_SOFTMAX_BACKWARD || k->op == TC_OP_LOG_SOFTMAX_BACKWARD) return softmax_backward(k);
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
    /* causal (checked by tc_prepare_softmax: dim is the last, so inner == 1) */
    if (k->op == TC_OP_SOFTMAX && k->p->i[1]) j.causal_rows = x->size[x->ndim - 2];
    int64_t outer = numel / (n * inner);
    int64_t units = inner == 1 ? outer : outer * j.blocks, per = inner == 1 ? n : n * (inner < IB ? inner : IB);
    tc_parallel_for(units, per >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / per + 1, sm_range, &j);
    tc_nn_dense_out_finish(k->out[0], tout);
done:
    tc_tensor_release(tin);
    tc_tensor_release(tout);
    return s;
}
