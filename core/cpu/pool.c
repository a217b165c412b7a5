/* pool.c -- CPU pooling over the last two dims: max_pool2d (values + int64 indices),
 * avg_pool2d and its backward, adaptive_avg_pool2d and its backward, adaptive_max_pool2d.
 * f16/bf16 compute in f32.
 *
 * Every leading dim is a plane index: a (N, C, H, W) input is N*C independent planes,
 * spread over the thread pool. Window rules are PyTorch 1.13's CPU kernels, so values and
 * indices match it exactly:
 *  - max: the window's first in-range row/column start (dilated steps from h*s - pad), a
 *    value wins when greater than the best so far or NaN; the index (h*W + w) starts at
 *    the first in-range position.
 *  - avg: the window clipped to input + padding gives count_include_pad's divisor, then
 *    clipped to the input gives the summed range and the other divisor.
 *  - adaptive: window i covers [floor(i*H/oH), ceil((i+1)*H/oH)).
 * The backward kernels scatter-add within one plane, so planes stay independent. Float
 * 2x2/stride-2 windows inside the plane (LeNet's, most CNNs') go four outputs at a time in
 * vectors (max_row2x2_vec_f32), with the same values and indices.
 */
#include "nn.h"
#include <math.h>

typedef struct pgeom {
    int64_t H, W, Ho, Wo;             /* input plane, output plane */
    int64_t kH, kW, sH, sW, pH, pW, dH, dW;
    bool include_pad;
} pgeom;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The avg window of output (i, j): summed range [h0,h1)x[w0,w1) and its divisor; false
 * when the window lies wholly in the padding. */
static bool avg_window(const pgeom *g, int64_t i, int64_t j, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1,
                       int64_t *div)
{
    int64_t a = i * g->sH - g->pH, b = j * g->sW - g->pW;
    int64_t c = min64(a + g->kH, g->H + g->pH), d = min64(b + g->kW, g->W + g->pW);
    int64_t padded = (c - a) * (d - b);
    a = max64(a, 0), b = max64(b, 0), c = min64(c, g->H), d = min64(d, g->W);
    if (a >= c || b >= d) return false;
    *h0 = a, *h1 = c, *w0 = b, *w1 = d;
    *div = g->include_pad ? padded : (c - a) * (d - b);
    return true;
}

static void adaptive_range(int64_t i, int64_t out, int64_t in, int64_t *a, int64_t *b)
{
    *a = (i * in) / out;
    *b = ((i + 1) * in + out - 1) / out;
}

/* The window [h0,h1) x [w0,w1) of a plane W wide, rows and columns every dh / dw. Max
 * keeps the first maximum (NaN wins) and returns its flat index in *at; the sum adds in
 * double; add puts v into every element of the window (the adjoint of the sum). */
#define WINDOW_OPS(T, sfx)                                                                  \
    static T window_max_##sfx(const T *in, int64_t W, int64_t h0, int64_t h1, int64_t dh, int64_t w0, \
                              int64_t w1, int64_t dw, int64_t *at)                          \
    {                                                                                       \
        /* branch-free selects: on random data the comparisons are coin flips */           \
        T best = -INFINITY;                                                                 \
        int64_t a = h0 * W + w0;                                                            \
        for (int64_t h = h0; h < h1; h += dh)                                               \
            for (int64_t w = w0; w < w1; w += dw) {                                         \
                T v = in[h * W + w];                                                        \
                bool take = (v > best) | (v != v);                                          \
                best = take ? v : best;                                                     \
                a = take ? h * W + w : a;                                                   \
            }                                                                               \
        *at = a;                                                                            \
        return best;                                                                        \
    }                                                                                       \
    static double window_sum_##sfx(const T *in, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1) \
    {                                                                                       \
        double sum = 0;                                                                     \
        for (int64_t h = h0; h < h1; h++)                                                   \
            for (int64_t w = w0; w < w1; w++) sum += in[h * W + w];                         \
        return sum;                                                                         \
    }                                                                                       \
    static void window_add_##sfx(T *gin, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1, T v) \
    {                                                                                       \
        for (int64_t h = h0; h < h1; h++)                                                   \
            for (int64_t w = w0; w < w1; w++) gin[h * W + w] += v;                          \
    }

/* m ? a : b for m all ones or all zeros, as bit operations (no branch to mispredict). */
static inline float pick_f32(int64_t m, float a, float b)
{
    uint32_t ia, ib, mm = (uint32_t)m;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    ia = (ia & mm) | (ib & ~mm);
    memcpy(&a, &ia, 4);
    return a;
}
static inline double pick_f64(int64_t m, double a, double b)
{
    uint64_t ia, ib, mm = (uint64_t)m;
    memcpy(&ia, &a, 8), memcpy(&ib, &b, 8);
    ia = (ia & mm) | (ib & ~mm);
    memcpy(&a, &ia, 8);
    return a;
}

/* Unclipped 2x2 / stride 2 windows along one row, four outputs at a time in SSE-width
 * vectors (GCC/clang vector extensions; the scalar select chain below is latency-bound,
 * ~7 ns an output, and was a tenth of a LeNet training step). Each window reduces pairwise:
 * (top-left vs top-right) and (bottom-left vs bottom-right), then bottom vs top, each
 * "right wins when greater or NaN". That is the sequential rule's answer: a strictly
 * greater later value and a later NaN win, ties keep the earlier, so the result is the
 * last NaN or else the first maximum. n outputs read r0/r1[0, 2n); at0 is r0[0]'s flat
 * index in the plane; a row of n >= 4 ends with a group overlapping the one before.
 * Returns false (nothing done) when the row is too short or vectors are unavailable. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define TC_POOL_VEC 1
#endif
#endif
#ifdef TC_POOL_VEC
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
static inline v4f blend4(v4i m, v4f a, v4f b) { return (v4f)(((v4i)a & m) | ((v4i)b & ~m)); }
static bool max_row2x2_vec_f32(const float *r0, const float *r1, float *o, int64_t *x, int64_t n, int64_t at0,
                               int64_t W)
{
    if (n < 4 || W > INT32_MAX / 4) return false;
    const v4i lane = {0, 2, 4, 6};
    for (int64_t j0 = 0; j0 < n; j0 += 4) {
        int64_t j = j0 + 4 <= n ? j0 : n - 4;
        v4f t0, t1, b0, b1;
        memcpy(&t0, r0 + 2 * j, 16), memcpy(&t1, r0 + 2 * j + 4, 16);
        memcpy(&b0, r1 + 2 * j, 16), memcpy(&b1, r1 + 2 * j + 4, 16);
        v4f a = __builtin_shufflevector(t0, t1, 0, 2, 4, 6), b = __builtin_shufflevector(t0, t1, 1, 3, 5, 7);
        v4f c = __builtin_shufflevector(b0, b1, 0, 2, 4, 6), d = __builtin_shufflevector(b0, b1, 1, 3, 5, 7);
        v4i tb = (b > a) | (b != b), td = (d > c) | (d != d);
        v4f p = blend4(tb, b, a), q = blend4(td, d, c);
        v4i tq = (q > p) | (q != q);
        v4f best = blend4(tq, q, p);
        /* the winner's offset from the window's top-left: 0, 1, W or W+1 */
        v4i sp = tb & 1, sq = (td & 1) + (int32_t)W;
        v4i off = ((sq & tq) | (sp & ~tq)) + lane;
        memcpy(o + j, &best, 16);
        int64_t at = at0 + 2 * j;
        x[j] = at + off[0], x[j + 1] = at + off[1], x[j + 2] = at + off[2], x[j + 3] = at + off[3];
    }
    return true;
}
#else
static bool max_row2x2_vec_f32(const float *r0, const float *r1, float *o, int64_t *x, int64_t n, int64_t at0,
                               int64_t W)
{
    return false;
}
#endif
/* double: the scalar loop (not a training hot path) */
static bool max_row2x2_vec_f64(const double *r0, const double *r1, double *o, int64_t *x, int64_t n, int64_t at0,
                               int64_t W)
{
    return false;
}

#define POOL_LOOPS(T, sfx)                                                                  \
    WINDOW_OPS(T, sfx)                                                                      \
    /* Rows whose windows lie inside the plane do columns [jlo, jhi) (windows inside the   \
     * row) one window position at a time across the row, with selects as bit operations:   \
     * no branches (on random data every comparison is a coin flip), and the compiler       \
     * vectorises across the row. The same order and rule as window_max, so values and      \
     * indices are identical. */                                                            \
    static void max_plane_##sfx(const pgeom *g, const T *in, T *out, int64_t *ind)          \
    {                                                                                       \
        int64_t span = (g->kW - 1) * g->dW, jlo = (g->pW + g->sW - 1) / g->sW;              \
        int64_t jhi = g->W - 1 - span + g->pW >= 0 ? min64(g->Wo, (g->W - 1 - span + g->pW) / g->sW + 1) : 0; \
        if (jhi < jlo) jhi = jlo;                                                           \
        bool pool2x2 = g->kH == 2 && g->kW == 2 && g->sH == 2 && g->sW == 2 && g->dH == 1 && g->dW == 1; \
        for (int64_t i = 0; i < g->Ho; i++) {                                               \
            int64_t h0 = i * g->sH - g->pH, h1 = min64(h0 + (g->kH - 1) * g->dH + 1, g->H); \
            bool inside = h0 >= 0 && h0 + (g->kH - 1) * g->dH < g->H;                       \
            while (h0 < 0) h0 += g->dH;                                                     \
            T *o = out + i * g->Wo;                                                         \
            int64_t *x = ind + i * g->Wo;                                                   \
            for (int64_t j = 0; j < g->Wo; j++) {                                           \
                if (inside && j >= jlo && j < jhi) continue;                                \
                int64_t w0 = j * g->sW - g->pW, w1 = min64(w0 + (g->kW - 1) * g->dW + 1, g->W); \
                while (w0 < 0) w0 += g->dW;                                                 \
                o[j] = window_max_##sfx(in, g->W, h0, h1, g->dH, w0, w1, g->dW, &x[j]);     \
            }                                                                               \
            if (!inside) continue;                                                          \
            if (pool2x2) { /* the common 2x2 / stride 2 window: four loads, three selects */ \
                const T *r0 = in + h0 * g->W, *r1 = r0 + g->W;                             \
                int64_t jv = jlo;                                                           \
                if (max_row2x2_vec_##sfx(r0 + 2 * jlo - g->pW, r1 + 2 * jlo - g->pW, o + jlo, x + jlo, \
                                         jhi - jlo, h0 * g->W + 2 * jlo - g->pW, g->W))     \
                    jv = jhi;                                                               \
                for (int64_t j = jv; j < jhi; j++) {                                        \
                    int64_t w = 2 * j - g->pW, at = h0 * g->W + w;                          \
                    T best = r0[w], v;                                                      \
                    int64_t m;                                                              \
                    v = r0[w + 1], m = -(int64_t)((v > best) | (v != v));                   \
                    best = pick_##sfx(m, v, best), at = ((at + 1) & m) | (at & ~m);          \
                    v = r1[w], m = -(int64_t)((v > best) | (v != v));                       \
                    int64_t at1 = h0 * g->W + g->W + w;                                     \
                    best = pick_##sfx(m, v, best), at = (at1 & m) | (at & ~m);              \
                    v = r1[w + 1], m = -(int64_t)((v > best) | (v != v));                   \
                    best = pick_##sfx(m, v, best), at = ((at1 + 1) & m) | (at & ~m);         \
                    o[j] = best, x[j] = at;                                                 \
                }                                                                           \
                continue;                                                                   \
            }                                                                               \
            T *restrict ov = o;                                                             \
            int64_t *restrict xv = x;                                                       \
            for (int64_t j = jlo; j < jhi; j++) ov[j] = -INFINITY, xv[j] = h0 * g->W + j * g->sW - g->pW; \
            for (int64_t a = 0; a < g->kH; a++)                                             \
                for (int64_t b = 0; b < g->kW; b++) {                                       \
                    int64_t off = (h0 + a * g->dH) * g->W + b * g->dW - g->pW, sW = g->sW;  \
                    const T *restrict src = in;                                             \
                    for (int64_t j = jlo; j < jhi; j++) {                                   \
                        int64_t p = off + j * sW;                                           \
                        T v = src[p], cur = ov[j];                                          \
                        int64_t m = -(int64_t)((v > cur) | (v != v)); /* all ones: take v */ \
                        ov[j] = pick_##sfx(m, v, cur);                                      \
                        xv[j] = (p & m) | (xv[j] & ~m);                                     \
                    }                                                                       \
                }                                                                           \
        }                                                                                   \
    }                                                                                       \
    static void avg_plane_##sfx(const pgeom *g, const T *in, T *out)                        \
    {                                                                                       \
        for (int64_t i = 0; i < g->Ho; i++)                                                 \
            for (int64_t j = 0; j < g->Wo; j++) {                                           \
                int64_t h0, h1, w0, w1, div;                                                \
                if (!avg_window(g, i, j, &h0, &h1, &w0, &w1, &div)) {                       \
                    out[i * g->Wo + j] = 0;                                                 \
                    continue;                                                               \
                }                                                                           \
                out[i * g->Wo + j] = (T)(window_sum_##sfx(in, g->W, h0, h1, w0, w1) / (double)div); \
            }                                                                               \
    }                                                                                       \
    /* gin (H, W) = the adjoint of avg_plane applied to gout (Ho, Wo) */                    \
    static void avg_back_plane_##sfx(const pgeom *g, const T *gout, T *gin)                 \
    {                                                                                       \
        memset(gin, 0, sizeof(T) * (size_t)(g->H * g->W));                                  \
        for (int64_t i = 0; i < g->Ho; i++)                                                 \
            for (int64_t j = 0; j < g->Wo; j++) {                                           \
                int64_t h0, h1, w0, w1, div;                                                \
                if (!avg_window(g, i, j, &h0, &h1, &w0, &w1, &div)) continue;               \
                window_add_##sfx(gin, g->W, h0, h1, w0, w1, (T)(gout[i * g->Wo + j] / (double)div)); \
            }                                                                               \
    }                                                                                       \
    static void adaptive_plane_##sfx(const pgeom *g, const T *in, T *out, int64_t *ind)     \
    {                                                                                       \
        for (int64_t i = 0; i < g->Ho; i++) {                                               \
            int64_t h0, h1;                                                                 \
            adaptive_range(i, g->Ho, g->H, &h0, &h1);                                       \
            for (int64_t j = 0; j < g->Wo; j++) {                                           \
                int64_t w0, w1;                                                             \
                adaptive_range(j, g->Wo, g->W, &w0, &w1);                                   \
                if (ind)                                                                    \
                    out[i * g->Wo + j] = window_max_##sfx(in, g->W, h0, h1, 1, w0, w1, 1, &ind[i * g->Wo + j]); \
                else                                                                        \
                    out[i * g->Wo + j] =                                                    \
                        (T)(window_sum_##sfx(in, g->W, h0, h1, w0, w1) / (double)((h1 - h0) * (w1 - w0))); \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    static void adaptive_back_plane_##sfx(const pgeom *g, const T *gout, T *gin)            \
    {                                                                                       \
        memset(gin, 0, sizeof(T) * (size_t)(g->H * g->W));                                  \
        for (int64_t i = 0; i < g->Ho; i++) {                                               \
            int64_t h0, h1;                                                                 \
            adaptive_range(i, g->Ho, g->H, &h0, &h1);                                       \
            for (int64_t j = 0; j < g->Wo; j++) {                                           \
                int64_t w0, w1;                                                             \
                adaptive_range(j, g->Wo, g->W, &w0, &w1);                                   \
                T v = (T)(gout[i * g->Wo + j] / (double)((h1 - h0) * (w1 - w0)));           \
                window_add_##sfx(gin, g->W, h0, h1, w0, w1, v);                             \
            }                                                                               \
        }                                                                                   \
    }
POOL_LOOPS(float, f32)
POOL_LOOPS(double, f64)

typedef struct pool_job {
    tc_op op;
    pgeom g;
    int dt;
    const char *in;
    char *out;
    int64_t *ind;
    int64_t in_plane, out_plane; /* elements per plane of the input and the result */
} pool_job;

#define PLANE_CASES(T, sfx)                                                                 \
    switch (j->op) {                                                                        \
    case TC_OP_MAX_POOL2D: max_plane_##sfx(g, (const T *)src, (T *)dst, ind); break;        \
    case TC_OP_AVG_POOL2D: avg_plane_##sfx(g, (const T *)src, (T *)dst); break;             \
    case TC_OP_AVG_POOL2D_BACKWARD: avg_back_plane_##sfx(g, (const T *)src, (T *)dst); break; \
    case TC_OP_ADAPTIVE_AVG_POOL2D: adaptive_plane_##sfx(g, (const T *)src, (T *)dst, NULL); break; \
    case TC_OP_ADAPTIVE_MAX_POOL2D: adaptive_plane_##sfx(g, (const T *)src, (T *)dst, ind); break; \
    default: adaptive_back_plane_##sfx(g, (const T *)src, (T *)dst); break;                 \
    }

static void plane_range(void *ctx, int64_t p0, int64_t p1)
{
    const pool_job *j = ctx;
    const pgeom *g = &j->g;
    int64_t es = tc_elsize(j->dt);
    for (int64_t p = p0; p < p1; p++) {
        const char *src = j->in + p * j->in_plane * es;
        char *dst = j->out + p * j->out_plane * es;
        int64_t *ind = j->ind ? j->ind + p * j->out_plane : NULL;
        if (j->dt == TC_F32) {
            PLANE_CASES(float, f32)
        } else {
            PLANE_CASES(double, f64)
        }
    }
}

tc_status tc_cpu_pool(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_pool);
    const tc_tensor *x;
    tc_tensor *tin = NULL, *tout[2] = {NULL, NULL}, *dense[2] = {NULL, NULL};
    tc_status s;
    if ((s = tc_nn_dense_in(k->in[0], &tin, &x))) goto done;
    for (int o = 0; o < k->nout; o++)
        if ((s = tc_nn_dense_out(k->out[o], &tout[o], &dense[o]))) goto done;
    if (tc_tensor_numel(dense[0]) == 0) goto done;

    const int64_t *sh = k->p->shape;
    int nd = x->ndim;
    pool_job j = {.op = k->op, .dt = x->dtype, .in = tc_base(x), .out = tc_base(dense[0]),
                  .ind = k->nout > 1 ? (int64_t *)tc_base(dense[1]) : NULL};
    pgeom *g = &j.g;
    /* the "input" plane is the larger side: for the backward ops it is the result */
    bool back = k->op == TC_OP_AVG_POOL2D_BACKWARD || k->op == TC_OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    const tc_tensor *big = back ? dense[0] : x, *small = back ? x : dense[0];
    g->H = big->size[nd - 2], g->W = big->size[nd - 1];
    g->Ho = small->size[nd - 2], g->Wo = small->size[nd - 1];
    g->dH = g->dW = 1;
    if (k->op == TC_OP_MAX_POOL2D || k->op == TC_OP_AVG_POOL2D || k->op == TC_OP_AVG_POOL2D_BACKWARD) {
        g->kH = sh[0], g->kW = sh[1], g->sH = sh[2], g->sW = sh[3], g->pH = sh[4], g->pW = sh[5];
        if (k->op == TC_OP_MAX_POOL2D) g->dH = sh[6], g->dW = sh[7];
        g->include_pad = k->p->i[1] != 0;
    }
    j.in_plane = x->size[nd - 2] * x->size[nd - 1];
    j.out_plane = dense[0]->size[nd - 2] * dense[0]->size[nd - 1];
    int64_t planes = tc_tensor_numel(dense[0]) / j.out_plane;
    /* work per plane ~ output elements times the window, or the input plane for adaptive */
    int64_t per = g->Ho * g->Wo * (g->kH > 0 ? g->kH * g->kW : 1) + g->H * g->W;
    tc_parallel_for(planes, per >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / per + 1, plane_range, &j);
    for (int o = 0; o < k->nout; o++) tc_nn_dense_out_finish(k->out[o], tout[o]);
done:
    tc_tensor_release(tin);
    tc_tensor_release(tout[0]);
    tc_tensor_release(tout[1]);
    return s;
}
