/* attention.c -- the CPU kernels of the ATTN kind: attention(q, k, v) -> out, lse and
 * attention_backward(gout, q, k, v, out, lse) -> gq, gkv (ops.def has the formulas).
 *
 * A block of QB query rows at a time: its scores against every key it attends (a QB x S
 * strip, never the whole L x S matrix) come from one gemm, the softmax runs over each row
 * of the strip, and a second gemm multiplies the strip by v. The strip lives in a scratch
 * buffer per thread, so memory grows with the threads, not with L * S. A causal block
 * stops at the last key its last row attends; within it, row i leaves keys j > i out
 * (weight 0). f16/bf16 compute in f32 (tc_cpu_with_f32); lse is kept per row.
 *
 * The backward walks the same blocks, recomputing each strip's weights from lse
 * (P = exp(s - lse)), so nothing L x S is saved between the passes. gk and gv sum over every
 * query block, so one unit is one problem n (its blocks in order: the sums do not depend on
 * the thread count), and four gemms per block give gv += P^T gout, dP = gout v^T,
 * gq = dS k and gk += dS^T q, with dS = scale * P (dP - D), D = sum(gout * out) per row.
 */
#include "nn.h"
#include "gemm.h"
#include "../scalar_math.h"
#include <math.h>
#include <stdlib.h>

#define QB 64 /* query rows per block */

typedef struct attn_job {
    int dt;
    bool causal;
    double scale;
    int64_t N, L, S, E, Ev, nqb;         /* nqb: query blocks per problem */
    const char *q, *k, *v, *g, *o, *lse; /* g, o, lse: the backward's gout, out, lse */
    char *out, *out2;                    /* forward: out, lse; backward: gq, gkv */
    int failed;                          /* a thread's scratch could not be allocated */
} attn_job;

/* Keys row i attends: all S, or the first i + 1 of them (causal). */
static inline int64_t live_keys(const attn_job *j, int64_t i) { return j->causal && i + 1 < j->S ? i + 1 : j->S; }

static inline double exp_f64(double x) { return exp(x); }
static inline float exp_f32(float x) { return tc_expf(x); }

/* The strip sc (nr x ns, row r is query i0 + r) of scale * q k^T: one gemm (zeros when E = 0,
 * which BLAS's k = 0 would leave to the implementation). */
static void scores(const attn_job *j, int64_t n, int64_t i0, int64_t nr, int64_t ns, void *sc)
{
    size_t es = j->dt == TC_F32 ? 4 : 8;
    if (j->E == 0) {
        memset(sc, 0, (size_t)(nr * ns) * es);
        return;
    }
    const char *q = j->q + (size_t)((n * j->L + i0) * j->E) * es, *k = j->k + (size_t)(n * j->S * j->E) * es;
    tc_cpu_gemm(j->dt, false, true, nr, ns, j->E, j->scale, q, j->E, k, j->E, 0, sc, ns);
}

#define ATTN_LOOPS(T, sfx)                                                                       \
    /* Softmax of each strip row over its live keys in place (0 after them), lse[r] per row. */ \
    static void softmax_rows_##sfx(const attn_job *j, int64_t i0, int64_t nr, int64_t ns, T *sc, \
                                   T *lse)                                                      \
    {                                                                                           \
        for (int64_t r = 0; r < nr; r++) {                                                      \
            T *row = sc + r * ns;                                                               \
            int64_t n = live_keys(j, i0 + r);                                                   \
            T m = -INFINITY, sum = 0;                                                           \
            for (int64_t c = 0; c < n; c++) m = row[c] > m ? row[c] : m;                        \
            for (int64_t c = 0; c < n; c++) sum += row[c] = exp_##sfx(row[c] - m);              \
            T inv = 1 / sum;                                                                    \
            for (int64_t c = 0; c < n; c++) row[c] *= inv;                                      \
            for (int64_t c = n; c < ns; c++) row[c] = 0;                                        \
            lse[r] = m + (T)log(sum);                                                           \
        }                                                                                       \
    }                                                                                           \
    static void forward_##sfx(const attn_job *j, int64_t u, T *sc)                              \
    {                                                                                           \
        int64_t n = u / j->nqb, i0 = (u % j->nqb) * QB, nr = j->L - i0 < QB ? j->L - i0 : QB;   \
        int64_t ns = live_keys(j, i0 + nr - 1);                                                 \
        scores(j, n, i0, nr, ns, sc);                                                           \
        softmax_rows_##sfx(j, i0, nr, ns, sc, (T *)j->out2 + n * j->L + i0);                    \
        const T *v = (const T *)j->v + n * j->S * j->Ev;                                        \
        T *o = (T *)j->out + (n * j->L + i0) * j->Ev;                                           \
        if (j->Ev > 0) tc_cpu_gemm(j->dt, false, false, nr, j->Ev, ns, 1, sc, ns, v, j->Ev, 0, o, j->Ev); \
    }                                                                                           \
    /* Problem n's backward: P (sc) and dS (ds) strips, one query block after another. */       \
    static void backward_##sfx(const attn_job *j, int64_t n, T *sc, T *ds)                      \
    {                                                                                           \
        int64_t E = j->E, Ev = j->Ev, W = E + Ev;                                               \
        const T *k = (const T *)j->k + n * j->S * E, *v = (const T *)j->v + n * j->S * Ev;      \
        T *gkv = (T *)j->out2 + n * j->S * W;                                                   \
        memset(gkv, 0, sizeof(T) * (size_t)(j->S * W));                                         \
        for (int64_t i0 = 0; i0 < j->L; i0 += QB) {                                             \
            int64_t nr = j->L - i0 < QB ? j->L - i0 : QB, ns = live_keys(j, i0 + nr - 1);      \
            const T *q = (const T *)j->q + (n * j->L + i0) * E;                                 \
            const T *g = (const T *)j->g + (n * j->L + i0) * Ev, *o = (const T *)j->o + (n * j->L + i0) * Ev; \
            const T *lse = (const T *)j->lse + n * j->L + i0;                                   \
            T *gq = (T *)j->out + (n * j->L + i0) * E;                                          \
            scores(j, n, i0, nr, ns, sc);                                                       \
            for (int64_t r = 0; r < nr; r++) { /* P = exp(s - lse), 0 where left out */         \
                int64_t live = live_keys(j, i0 + r);                                            \
                for (int64_t c = 0; c < ns; c++)                                                \
                    sc[r * ns + c] = c < live ? exp_##sfx(sc[r * ns + c] - lse[r]) : 0;         \
            }                                                                                   \
            if (Ev > 0) {                                                                       \
                tc_cpu_gemm(j->dt, true, false, ns, Ev, nr, 1, sc, ns, g, Ev, 1, gkv + E, W);   \
                tc_cpu_gemm(j->dt, false, true, nr, ns, Ev, 1, g, Ev, v, Ev, 0, ds, ns);        \
            } else {                                                                            \
                memset(ds, 0, sizeof(T) * (size_t)(nr * ns));                                   \
            }                                                                                   \
            for (int64_t r = 0; r < nr; r++) { /* dS: 0 where left out, whatever dP is there */ \
                int64_t live = live_keys(j, i0 + r);                                            \
                T d = 0;                                                                        \
                for (int64_t c = 0; c < Ev; c++) d += g[r * Ev + c] * o[r * Ev + c];            \
                for (int64_t c = 0; c < ns; c++)                                                \
                    ds[r * ns + c] = c < live ? (T)j->scale * sc[r * ns + c] * (ds[r * ns + c] - d) : 0; \
            }                                                                                   \
            if (E > 0) {                                                                        \
                tc_cpu_gemm(j->dt, false, false, nr, E, ns, 1, ds, ns, k, E, 0, gq, E);         \
                tc_cpu_gemm(j->dt, true, false, ns, E, nr, 1, ds, ns, q, E, 1, gkv, W);         \
            }                                                                                   \
        }                                                                                       \
    }
ATTN_LOOPS(float, f32)
ATTN_LOOPS(double, f64)

/* Units [u0, u1): query blocks (forward) or problems (backward), with this thread's strips. */
static void attn_range(void *ctx, int64_t u0, int64_t u1)
{
    attn_job *j = ctx;
    bool bwd = j->g != NULL;
    size_t es = j->dt == TC_F32 ? 4 : 8, strip = (size_t)(QB * j->S) * es;
    char *buf = malloc(bwd ? 2 * strip : strip);
    if (!buf) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        if (j->dt == TC_F32) {
            if (bwd) backward_f32(j, u, (float *)buf, (float *)(buf + strip));
            else forward_f32(j, u, (float *)buf);
        } else {
            if (bwd) backward_f64(j, u, (double *)buf, (double *)(buf + strip));
            else forward_f64(j, u, (double *)buf);
        }
    }
    free(buf);
}

/* *use = out when it is contiguous and shares no storage with an input (the backward reads q
 * after writing gq's rows), else a new contiguous tensor in *tmp (tc_nn_dense_out_finish
 * copies it back). */
static tc_status dense_result(tc_tensor *out, const tc_kcall *k, tc_tensor **tmp, tc_tensor **use)
{
    bool shared = false;
    for (int i = 0; i < k->nin; i++) shared |= k->in[i]->storage == out->storage;
    if (!shared) return tc_nn_dense_out(out, tmp, use);
    TRY(tc_tensor_alloc((tc_dtype)out->dtype, out->ndim, out->size, tmp));
    *use = *tmp;
    return TC_OK;
}

tc_status tc_cpu_attn(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_attn);
    bool bwd = k->op == TC_OP_ATTENTION_BACKWARD;
    int nin = bwd ? 6 : 3;
    const tc_tensor *in[6] = {0};
    tc_tensor *tin[6] = {0}, *tout[2] = {0}, *dense[2] = {0};
    tc_status s = TC_OK;
    for (int i = 0; i < nin && !s; i++) s = tc_nn_dense_in(k->in[i], &tin[i], &in[i]);
    for (int o = 0; o < 2 && !s; o++) s = dense_result(k->out[o], k, &tout[o], &dense[o]);
    if (s) goto done;
    const tc_tensor *q = in[bwd], *kk = in[bwd + 1], *v = in[bwd + 2];
    attn_job j = {.dt = q->dtype, .causal = k->p->i[0] != 0, .scale = k->p->s[0], .N = q->size[0],
                  .L = q->size[1], .S = kk->size[1], .E = q->size[2], .Ev = v->size[2], .q = tc_base(q),
                  .k = tc_base(kk), .v = tc_base(v), .out = tc_base(dense[0]), .out2 = tc_base(dense[1])};
    j.nqb = (j.L + QB - 1) / QB;
    if (bwd) j.g = tc_base(in[0]), j.o = tc_base(in[4]), j.lse = tc_base(in[5]);
    int64_t units = bwd ? j.N : j.N * j.nqb;
    if (bwd && j.L == 0 && j.N * j.S > 0) /* no query: gk and gv are 0 */
        memset(j.out2, 0, (size_t)(j.N * j.S * (j.E + j.Ev)) * (j.dt == TC_F32 ? 4 : 8));
    if (j.L > 0 && units > 0) tc_parallel_for(units, 1, attn_range, &j);
    if (j.failed) {
        s = tc_set_error(TC_ERR_MEMORY, "%s: no memory for a %d x %lld score strip", k->info->name, QB,
                         (long long)j.S);
        goto done;
    }
    for (int o = 0; o < 2; o++) tc_nn_dense_out_finish(k->out[o], tout[o]);
done:
    for (int i = 0; i < 6; i++) tc_tensor_release(tin[i]);
    for (int o = 0; o < 2; o++) tc_tensor_release(tout[o]);
    return s;
}
