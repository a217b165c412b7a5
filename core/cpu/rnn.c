/* rnn.c -- CPU kernels of the recurrent kind: rnn (one layer, one direction, the whole
 * sequence; RNN tanh/relu, LSTM, GRU with PyTorch's equations and gate order, ops.def) and
 * rnn_backward (its gradient, by backpropagation through time).
 *
 * Shapes: x (T,N,I), hx (S,N,H), w_ih (GH,I), w_hh (GH,H) with GH = G*H gate rows; the
 * reserve (T,N,R) keeps what backward needs: LSTM [i f g o | c] (R = 5H), GRU [r z n | hn]
 * (R = 4H, hn = W_hn h + b_hn), none for RNN (R = 0: y is enough).
 * Forward:  the input part of every step's gates, x W_ih^T + b, is ONE gemm written straight
 *           into the reserve's gate columns (into y for RNN); then per step one gemm adds
 *           h W_hh^T (GRU: into a step buffer, its n gate multiplies it by r) and the gate
 *           math runs pointwise, activating the gates in place.
 * Backward: from the last step to the first: the pre-activation gradients D_t pointwise
 *           (gradients reaching the reserve itself are added in: c_T is the LSTM's final
 *           cell state) and dh_{t-1} = D_t W_hh (one gemm per step); then dx = D W_ih,
 *           dW_ih = D^T x, dW_hh = D^T [h0; y] and the bias sums, each one gemm (or one
 *           pass) over the whole sequence. (GRU's hidden side differs in its n block:
 *           d(W_hn h + b_hn) = dn' r, so it has its own D.)
 * Pointwise loops run over contiguous rows with the branch-free tc_expf / tc_tanhf for
 * float32 (core/scalar_math.h), so they vectorise; float64 uses libm. f16/bf16 go through
 * tc_cpu_with_f32. Strided or overlapping operands are copied to dense scratch first.
 */
#include "gemm.h"
#include "nn.h"
#include "../scalar_math.h"
#include <math.h>
#include <stdlib.h>

enum { M_TANH = 0, M_RELU = 1, M_LSTM = 2, M_GRU = 3 };

static inline float sig_f32(float x) { return 1.0f / (1.0f + tc_expf(-x)); }
static inline float tanh_f32(float x) { return tc_tanhf(x); }
static inline double sig_f64(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline double tanh_f64(double x) { return tanh(x); }

/* ---- pointwise pieces, one set per float type -------------------------------------------- */

/* Each row function is one loop over a batch row's H units with restrict operands (GCC
 * honours restrict on parameters), kept out of line so each loop is vectorised alone, and
 * (as ew.c's float loops) also compiled for AVX2, picked at load time: the branch-free
 * exp/tanh then run 8 lanes wide. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ROW static __attribute__((noinline, target_clones("avx2", "default"))) void
#else
#define ROW static __attribute__((noinline)) void
#endif
#define RNN_LOOPS(T, sfx)                                                                   \
    ROW add_row_##sfx(int64_t n, T *restrict p, const T *restrict b)                        \
    {                                                                                       \
        for (int64_t c = 0; c < n; c++) p[c] += b[c];                                       \
    }                                                                                       \
    /* P[r, 0:cols] += b1 + b2 (either may be NULL), rows r of stride ld */                \
    static void add_bias_##sfx(T *P, int64_t rows, int64_t cols, int64_t ld, const T *b1, const T *b2) \
    {                                                                                       \
        for (int64_t r = 0; r < rows; r++) {                                                \
            if (b1) add_row_##sfx(cols, P + r * ld, b1);                                    \
            if (b2) add_row_##sfx(cols, P + r * ld, b2);                                    \
        }                                                                                   \
    }                                                                                       \
    /* forward, one row. LSTM: g the pre-activations, activated in place; cp c_{t-1} */    \
    ROW lstm_fwd_##sfx(int64_t H, T *restrict g, const T *restrict cp, T *restrict c, T *restrict h) \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) {                                                   \
            T i = sig_##sfx(g[j]), f = sig_##sfx(g[H + j]);                                 \
            T gg = tanh_##sfx(g[2 * H + j]), o = sig_##sfx(g[3 * H + j]);                   \
            T cc = f * cp[j] + i * gg;                                                      \
            g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;                    \
            c[j] = cc;                                                                      \
            h[j] = o * tanh_##sfx(cc);                                                      \
        }                                                                                   \
    }                                                                                       \
    /* GRU: a the input part of r, z, n (b_ih in), replaced by r, z, n; gh the hidden part \
     * (b_hh in), whose n third is kept in hn */                                           \
    ROW gru_fwd_##sfx(int64_t H, T *restrict a, const T *restrict gh, const T *restrict hp, T *restrict hn, \
                      T *restrict h)                                                        \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) {                                                   \
            T r = sig_##sfx(a[j] + gh[j]), z = sig_##sfx(a[H + j] + gh[H + j]);             \
            T nn = tanh_##sfx(a[2 * H + j] + r * gh[2 * H + j]);                            \
            a[j] = r, a[H + j] = z, a[2 * H + j] = nn;                                      \
            hn[j] = gh[2 * H + j];                                                          \
            h[j] = nn + z * (hp[j] - nn);                                                   \
        }                                                                                   \
    }                                                                                       \
    ROW tanh_fwd_##sfx(int64_t H, T *restrict h)                                            \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) h[j] = tanh_##sfx(h[j]);                            \
    }                                                                                       \
    ROW relu_fwd_##sfx(int64_t H, T *restrict h)                                            \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) h[j] = h[j] > 0 ? h[j] : (T)0;                      \
    }                                                                                       \
    /* backward, one row: dh the gradient reaching h_t (dy added); dr the gradient reaching \
     * this row of the reserve (zeros when none); d the pre-activation gradients.         \
     * LSTM: dc in/out. GRU: dhh the hidden side's, dh leaves as z * dh (not via W_hh). */ \
    ROW lstm_bwd_##sfx(int64_t H, const T *restrict a, const T *restrict cp, const T *restrict dr, \
                       const T *restrict dh, T *restrict dc, T *restrict d)                 \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) {                                                   \
            T i = a[j], f = a[H + j], gg = a[2 * H + j], o = a[3 * H + j];                  \
            T tc = tanh_##sfx(a[4 * H + j]);                                                \
            T dcv = dc[j] + dr[4 * H + j] + dh[j] * o * (1 - tc * tc);                      \
            d[j] = (dcv * gg + dr[j]) * i * (1 - i);                                        \
            d[H + j] = (dcv * cp[j] + dr[H + j]) * f * (1 - f);                             \
            d[2 * H + j] = (dcv * i + dr[2 * H + j]) * (1 - gg * gg);                       \
            d[3 * H + j] = (dh[j] * tc + dr[3 * H + j]) * o * (1 - o);                      \
            dc[j] = dcv * f;                                                                \
        }                                                                                   \
    }                                                                                       \
    ROW gru_bwd_##sfx(int64_t H, const T *restrict a, const T *restrict hp, const T *restrict dr, \
                      T *restrict dh, T *restrict d, T *restrict dhh)                       \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) {                                                   \
            T r = a[j], z = a[H + j], nn = a[2 * H + j], hn = a[3 * H + j], dhv = dh[j];    \
            T dnp = (dhv * (1 - z) + dr[2 * H + j]) * (1 - nn * nn);                        \
            T drr = (dnp * hn + dr[j]) * r * (1 - r);                                       \
            T dz = (dhv * (hp[j] - nn) + dr[H + j]) * z * (1 - z);                          \
            d[j] = drr, d[H + j] = dz, d[2 * H + j] = dnp;                                  \
            dhh[j] = drr, dhh[H + j] = dz, dhh[2 * H + j] = dnp * r + dr[3 * H + j];        \
            dh[j] = dhv * z;                                                                \
        }                                                                                   \
    }                                                                                       \
    ROW tanh_bwd_##sfx(int64_t H, const T *restrict y, const T *restrict dh, T *restrict d) \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) d[j] = dh[j] * (1 - y[j] * y[j]);                   \
    }                                                                                       \
    ROW relu_bwd_##sfx(int64_t H, const T *restrict y, const T *restrict dh, T *restrict d) \
    {                                                                                       \
        for (int64_t j = 0; j < H; j++) d[j] = y[j] > 0 ? dh[j] : (T)0;                     \
    }                                                                                       \
    /* rows [n0, n1) of one step: forward (kind 0) or backward (kind 1) */                 \
    static void rows_##sfx(const struct rows_job *j, int64_t n0, int64_t n1)               \
    {                                                                                       \
        const struct geom *g = j->g;                                                        \
        int mode = g->mode;                                                                 \
        int64_t H = g->H, R = g->R, GH = g->GH, hps = j->hp_ld, cps = j->cp_ld;             \
        for (int64_t n = n0; n < n1; n++) {                                                 \
            T *res = j->res ? (T *)j->res + n * R : NULL, *h = (T *)j->h + n * H;           \
            const T *hp = j->hp ? (const T *)j->hp + n * hps : NULL;                        \
            const T *cp = j->cp ? (const T *)j->cp + n * cps : NULL;                        \
            if (j->kind == 0) {                                                             \
                if (mode == M_LSTM) lstm_fwd_##sfx(H, res, cp, res + 4 * H, h);             \
                else if (mode == M_GRU) gru_fwd_##sfx(H, res, (const T *)j->ph + n * GH, hp, res + 3 * H, h); \
                else if (mode == M_TANH) tanh_fwd_##sfx(H, h);                              \
                else relu_fwd_##sfx(H, h);                                                  \
                continue;                                                                   \
            }                                                                               \
            T *dh = (T *)j->dh + n * H, *d = (T *)j->D + n * GH;                            \
            const T *dr = j->dr ? (const T *)j->dr + n * R : (const T *)j->zero;            \
            if (j->dy) add_row_##sfx(H, dh, (const T *)j->dy + n * H);                      \
            if (mode == M_LSTM) lstm_bwd_##sfx(H, res, cp, dr, dh, (T *)j->dc + n * H, d);   \
            else if (mode == M_GRU) gru_bwd_##sfx(H, res, hp, dr, dh, d, (T *)j->Dh + n * GH); \
            else if (mode == M_TANH) tanh_bwd_##sfx(H, h, dh, d);                           \
            else relu_bwd_##sfx(H, h, dh, d);                                               \
        }                                                                                   \
    }                                                                                       \
    /* out[c] = sum over rows of M (rows, cols), accumulated in double, rows in order */   \
    static void col_sums_##sfx(const T *M, int64_t rows, int64_t cols, double *acc, T *out) \
    {                                                                                       \
        for (int64_t c = 0; c < cols; c++) acc[c] = 0;                                      \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const T *restrict m = M + r * cols;                                             \
            for (int64_t c = 0; c < cols; c++) acc[c] += m[c];                              \
        }                                                                                   \
        for (int64_t c = 0; c < cols; c++) out[c] = (T)acc[c];                              \
    }

/* ---- the shared driver (dtype-generic through void pointers) ---------------------------- */

typedef struct geom {
    int dt, mode;
    int64_t seq, N, I, H, G, GH, S, R, es; /* seq: T (the macro above names its type T) */
} geom;

/* One step's pointwise work over the batch rows, split over the pool when large enough.
 * Row pointers: res the reserve's rows, h y's rows (kind 0 writes them; kind 1 reads them
 * as h_t), hp / cp the previous h / c (row strides hp_ld, cp_ld: H for hx, R or H inside
 * the sequence), ph GRU's hidden part; backward: dh, dc, dy, dr, D, Dh, zero (a zero row). */
typedef struct rows_job {
    const geom *g;
    int kind;
    void *res, *h, *dh, *dc, *D, *Dh;
    const void *hp, *cp, *ph, *dy, *dr, *zero;
    int64_t hp_ld, cp_ld;
} rows_job;

RNN_LOOPS(float, f32)
RNN_LOOPS(double, f64)

/* C (m,n) = op(A) op(B) + beta C with BLAS-legal leading dimensions; nothing to do for an
 * empty product, and an empty inner dimension leaves beta C (zeros for beta 0). */
static void mm(const geom *g, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
               const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    if (k == 0) {
        if (beta == 0)
            for (int64_t r = 0; r < m; r++) memset((char *)c + r * ldc * g->es, 0, (size_t)(n * g->es));
        return;
    }
    tc_cpu_gemm(g->dt, ta, tb, m, n, k, 1.0, a, lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, beta, c, ldc > 0 ? ldc : 1);
}

#define ROW_GRAIN_ELEMS 8192 /* elements of gate math per pool chunk */

static void rows_range(void *ctx, int64_t n0, int64_t n1)
{
    const rows_job *j = ctx;
    if (j->g->dt == TC_F32) rows_f32(j, n0, n1);
    else rows_f64(j, n0, n1);
}

static void run_rows(rows_job *j)
{
    int64_t grain = ROW_GRAIN_ELEMS / j->g->GH;
    tc_parallel_for(j->g->N, grain > 0 ? grain : 1, rows_range, j);
}

static void add_bias(const geom *g, void *P, int64_t rows, int64_t cols, int64_t ld, const void *b1, const void *b2)
{
    if (g->dt == TC_F32) add_bias_f32(P, rows, cols, ld, b1, b2);
    else add_bias_f64(P, rows, cols, ld, b1, b2);
}

static char *at(const geom *g, const void *p, int64_t elems) { return p ? (char *)p + elems * g->es : NULL; }

/* Dense operands: in[i] as is when contiguous, else a dense copy kept in tmp[i]. Outputs
 * that are strided or share bytes with an input are computed in dense scratch. */
typedef struct dense {
    const tc_tensor *in[9];
    tc_tensor *tin[9], *out[2], *tout[2];
} dense;

static tc_status dense_begin(const tc_kcall *k, dense *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < k->nin; i++)
        if (k->in[i]) TRY(tc_nn_dense_in(k->in[i], &d->tin[i], &d->in[i]));
    for (int o = 0; o < 2; o++) {
        tc_tensor *out = k->out[o];
        bool shared = false;
        for (int i = 0; i < k->nin; i++) shared = shared || (k->in[i] && tc_tensor_overlaps(out, k->in[i]));
        if (shared || !tc_tensor_is_contiguous(out)) {
            TRY(tc_tensor_alloc((tc_dtype)out->dtype, out->ndim, out->size, &d->tout[o]));
            d->out[o] = d->tout[o];
        } else {
            d->out[o] = out;
        }
    }
    return TC_OK;
}

static tc_status dense_end(const tc_kcall *k, dense *d, tc_status s)
{
    for (int o = 0; o < 2; o++)
        if (d->tout[o]) {
            if (s == TC_OK) tc_nn_dense_out_finish(k->out[o], d->tout[o]); /* copies scratch back */
            tc_tensor_release(d->tout[o]);
        }
    for (int i = 0; i < 9; i++) tc_tensor_release(d->tin[i]);
    return s;
}

static void geom_of(const tc_kcall *k, geom *g)
{
    const tc_tensor *x = k->in[0], *w_hh = k->in[3];
    g->dt = x->dtype;
    g->mode = (int)k->p->i[0];
    g->seq = x->size[0], g->N = x->size[1], g->I = x->size[2], g->H = w_hh->size[1];
    g->G = g->mode == M_LSTM ? 4 : g->mode == M_GRU ? 3 : 1;
    g->GH = g->G * g->H;
    g->S = g->mode == M_LSTM ? 2 : 1;
    g->R = g->mode == M_LSTM ? 5 * g->H : g->mode == M_GRU ? 4 * g->H : 0;
    g->es = tc_elsize(g->dt);
}

/* ---- forward ------------------------------------------------------------------------------- */

static tc_status rnn_forward(const tc_kcall *k, const dense *d)
{
    geom g;
    geom_of(k, &g);
    const tc_tensor *x = d->in[0], *hx = d->in[1], *w_ih = d->in[2], *w_hh = d->in[3];
    const void *b_ih = d->in[4] ? tc_base(d->in[4]) : NULL, *b_hh = d->in[5] ? tc_base(d->in[5]) : NULL;
    char *y = tc_base(d->out[0]), *res = tc_base(d->out[1]);
    int64_t T = g.seq, N = g.N, H = g.H, GH = g.GH, R = g.R, NH = N * H;
    if (T * N == 0) return TC_OK;
    /* PH: GRU's hidden part of one step; Z: zero states */
    char *PH = g.mode == M_GRU ? tc_malloc((size_t)(N * GH * g.es), "rnn: hidden projections") : NULL;
    char *Z = hx ? NULL : calloc((size_t)(g.S * NH), (size_t)g.es);
    if ((g.mode == M_GRU && !PH) || (!hx && !Z)) {
        free(PH), free(Z);
        return tc_set_error(TC_ERR_MEMORY, "rnn: out of memory for the scratch of x (%lld,%lld,%lld), hidden %lld",
                            (long long)T, (long long)N, (long long)g.I, (long long)H);
    }
    const char *h0 = hx ? tc_base(hx) : Z, *c0 = at(&g, h0, NH);
    /* the input part of every step: into the gate columns of the reserve (y for RNN) */
    bool plain = g.mode == M_TANH || g.mode == M_RELU;
    char *P = plain ? y : res;
    int64_t ld = plain ? H : R, gcols = g.mode == M_GRU ? GH : plain ? H : GH;
    mm(&g, false, true, T * N, gcols, g.I, tc_base(x), g.I, tc_base(w_ih), g.I, 0, P, ld);
    add_bias(&g, P, T * N, gcols, ld, b_ih, g.mode == M_GRU ? NULL : b_hh);
    for (int64_t t = 0; t < T; t++) {
        char *Pt = at(&g, P, t * N * ld), *ht = at(&g, y, t * NH);
        const char *hp = t > 0 ? at(&g, y, (t - 1) * NH) : h0;
        bool zero_h = t == 0 && !hx; /* h W_hh^T vanishes */
        if (g.mode == M_GRU) {
            if (zero_h) memset(PH, 0, (size_t)(N * GH * g.es));
            else mm(&g, false, true, N, GH, H, hp, H, tc_base(w_hh), H, 0, PH, GH);
            add_bias(&g, PH, N, GH, GH, b_hh, NULL);
        } else if (!zero_h) {
            mm(&g, false, true, N, gcols, H, hp, H, tc_base(w_hh), H, 1, Pt, ld);
        }
        rows_job j = {.g = &g, .kind = 0, .res = plain ? NULL : Pt, .h = ht, .hp = hp, .hp_ld = H, .ph = PH,
                      .cp = t > 0 ? at(&g, res, (t - 1) * N * R + 4 * H) : c0, .cp_ld = t > 0 ? R : H};
        if (g.mode != M_LSTM) j.cp = NULL;
        run_rows(&j);
    }
    free(PH), free(Z);
    return TC_OK;
}

/* ---- backward ------------------------------------------------------------------------------- */

static tc_status rnn_backward(const tc_kcall *k, const dense *d)
{
    geom g;
    geom_of(k, &g);
    const tc_tensor *x = d->in[0], *hx = d->in[1], *w_ih = d->in[2], *w_hh = d->in[3], *b = d->in[4];
    const char *y = tc_base(d->in[5]), *res = d->in[6] ? tc_base(d->in[6]) : NULL;
    const char *dy = d->in[7] ? tc_base(d->in[7]) : NULL, *dres = d->in[8] ? tc_base(d->in[8]) : NULL;
    int64_t T = g.seq, N = g.N, I = g.I, H = g.H, GH = g.GH, R = g.R, NH = N * H, TN = T * N;
    char *dx = tc_base(d->out[0]), *flat = tc_base(d->out[1]);
    char *dhx = flat, *dw_ih = at(&g, flat, g.S * NH), *dw_hh = at(&g, dw_ih, GH * I);
    char *db = b ? at(&g, dw_hh, GH * H) : NULL;
    /* dh, dc: the running state gradients, kept in dhx itself; none come in: zeros */
    memset(dhx, 0, (size_t)(g.S * NH * g.es));
    if (TN == 0) {
        memset(dw_ih, 0, (size_t)((GH * (I + H) + (b ? 2 * GH : 0)) * g.es));
        return TC_OK;
    }
    size_t mat = (size_t)(TN * GH * g.es);
    char *D = tc_malloc(mat, "rnn_backward: gate gradients");
    char *Dh = g.mode == M_GRU ? tc_malloc(mat, "rnn_backward: gate gradients") : D;
    char *Z = hx ? NULL : calloc((size_t)(g.S * NH), (size_t)g.es);
    char *zr = calloc((size_t)(R > 0 ? R : 1), (size_t)g.es);
    double *acc = malloc(sizeof(double) * (size_t)GH);
    if (!D || !Dh || (!hx && !Z) || !zr || !acc) {
        free(D), free(Z), free(zr), free(acc);
        if (g.mode == M_GRU) free(Dh);
        return tc_set_error(TC_ERR_MEMORY, "rnn_backward: out of memory for the scratch of x (%lld,%lld,%lld), "
                            "hidden %lld", (long long)T, (long long)N, (long long)I, (long long)H);
    }
    const char *h0 = hx ? tc_base(hx) : Z, *c0 = at(&g, h0, NH);
    char *dh = dhx, *dc = at(&g, dhx, NH);
    /* from the last step to the first */
    for (int64_t t = T - 1; t >= 0; t--) {
        int64_t r = t * N;
        rows_job j = {.g = &g, .kind = 1, .res = (char *)at(&g, res, r * R), .h = (char *)at(&g, y, r * H),
                      .hp = t > 0 ? at(&g, y, (r - N) * H) : h0, .hp_ld = H,
                      .cp = t > 0 ? at(&g, res, (r - N) * R + 4 * H) : c0, .cp_ld = t > 0 ? R : H,
                      .dy = dy ? at(&g, dy, r * H) : NULL, .dr = dres ? at(&g, dres, r * R) : NULL, .zero = zr,
                      .dh = dh, .dc = dc, .D = at(&g, D, r * GH), .Dh = at(&g, Dh, r * GH)};
        if (g.mode != M_LSTM) j.cp = NULL;
        run_rows(&j);
        /* dh_{t-1} = Dh_t W_hh (+ GRU's z * dh, left in dh by the step) */
        mm(&g, false, false, N, H, GH, j.Dh, GH, tc_base(w_hh), H, g.mode == M_GRU ? 1 : 0, dh, H);
    }
    /* the whole sequence at once: dx, dW_ih, dW_hh, db */
    bool f = g.dt == TC_F32;
    mm(&g, false, false, TN, I, GH, D, GH, tc_base(w_ih), I, 0, dx, I);
    mm(&g, true, false, GH, I, TN, D, GH, tc_base(x), I, 0, dw_ih, I);
    if (hx) mm(&g, true, false, GH, H, N, Dh, GH, h0, H, 0, dw_hh, H);
    mm(&g, true, false, GH, H, TN - N, at(&g, Dh, N * GH), GH, y, H, hx ? 1 : 0, dw_hh, H);
    if (db) {
        if (f) col_sums_f32((const float *)D, TN, GH, acc, (float *)db);
        else col_sums_f64((const double *)D, TN, GH, acc, (double *)db);
        if (g.mode != M_GRU) memcpy(at(&g, db, GH), db, (size_t)(GH * g.es));
        else if (f) col_sums_f32((const float *)Dh, TN, GH, acc, (float *)at(&g, db, GH));
        else col_sums_f64((const double *)Dh, TN, GH, acc, (double *)at(&g, db, GH));
    }
    free(D), free(Z), free(zr), free(acc);
    if (g.mode == M_GRU) free(Dh);
    return TC_OK;
}

tc_status tc_cpu_rnn(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_rnn);
    dense d;
    tc_status s = dense_begin(k, &d);
    if (s == TC_OK) s = k->op == TC_OP_RNN ? rnn_forward(k, &d) : rnn_backward(k, &d);
    return dense_end(k, &d, s);
}
