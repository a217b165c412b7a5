/* conv.c -- CPU convolution: conv2d, conv_transpose2d (conv2d's input gradient, also
 * SpatialFullConvolution's forward) and conv2d_weight (conv2d's weight gradient), by
 * im2col / col2im and OpenBLAS gemm. f16/bf16 compute in f32.
 *
 * All three ops are one picture seen from different sides. The "image" is conv2d's input
 * (N, C, H, W), the "columns" side is conv2d's output (N, O, Ho, Wo), the weight is
 * (O, C/G, kH, kW). Per sample n and group g, with K = C/G*kH*kW and L = Ho*Wo:
 *   conv2d            out_ng (O/G, L)  = W_g (O/G, K) @ cols(img_ng) (K, L)     [+ bias]
 *   conv_transpose2d  img_ng          += col2im(W_g^T (K, O/G) @ x_ng (O/G, L))  [+ bias]
 *   conv2d_weight     gW_g (O/G, K)   += gout_ng (O/G, L) @ cols(img_ng)^T
 * cols(img) row (c, ki, kj), column (i, j) holds img[c, i*sH - pH + ki*dH, j*sW - pW +
 * kj*dW] (0 outside). A 1x1 kernel with stride 1 and no padding needs no im2col: the image
 * planes already are the column matrix. Stride 1 and dilation 1 (most convolutions) take
 * im2col_s1 / col2im_s1: the channel goes through a zero-padded copy of its plane on the
 * stack (when padded and small enough), so every run is a fixed-length copy or add with
 * no bounds logic or zero fill, walked one kernel offset at a time with the column rows
 * contiguous; the general loops were bound by per-run bookkeeping on short rows and took
 * a fifth of a LeNet training step. Other strides and dilations take the general loops.
 *
 * Threads: the units of work (samples, or sample-groups) are cut into at most MAX_CHUNKS
 * fixed chunks, which the pool hands out to its threads as they come free; a range of
 * chunks runs with a column buffer of its own (one per thread) and calls gemm on its own
 * thread (OpenBLAS is single-threaded, see gemm.h; no thread handshake per gemm, and
 * im2col/col2im run in parallel too). A single chunk (one image, one group) splits its
 * gemm and its im2col/col2im channels over the pool instead. The weight gradient
 * accumulates one partial sum per chunk and adds them in chunk order, so its result does
 * not depend on the thread count.
 */
#include "gemm.h"
#include "nn.h"
#include <limits.h>
#include <stdlib.h>

/* Chunks of samples when spreading small products over the pool (the weight gradient's
 * partial sums: fixed, so the summation order never depends on the thread count). */
#define MAX_CHUNKS 16
#define PARTIALS_BYTES ((int64_t)32 << 20)

typedef struct geom {
    int64_t N, C, H, W;   /* the image side (conv2d's input) */
    int64_t O, Ho, Wo;    /* the columns side (conv2d's output) */
    int64_t kH, kW, sH, sW, pH, pW, dH, dW, G;
    int64_t Cg, Og, K, L; /* C/G, O/G, rows and columns of one column matrix */
    bool direct;          /* 1x1, stride 1, no padding: no im2col needed */
} geom;

/* ---- im2col / col2im, and bias rows (float, double) ------------------------------------- */

/* The columns j of an output row whose input column j*sW + off lies inside [0, W). */
static void valid_cols(const geom *g, int64_t off, int64_t *j0, int64_t *j1)
{
    int64_t a = off >= 0 ? 0 : (-off + g->sW - 1) / g->sW;
    int64_t b = g->W - off > 0 ? (g->W - off + g->sW - 1) / g->sW : 0;
    if (b > g->Wo) b = g->Wo;
    if (a > b) a = b;
    *j0 = a, *j1 = b;
}

/* Per kernel column kj: the input column offset and the valid output columns [j0, j1). */
#define MAX_KW 64
typedef struct kcols {
    int64_t off[MAX_KW], j0[MAX_KW], j1[MAX_KW];
} kcols;

static void kcols_of(const geom *g, kcols *kc)
{
    for (int64_t kj = 0; kj < g->kW && kj < MAX_KW; kj++) {
        kc->off[kj] = kj * g->dW - g->pW;
        valid_cols(g, kc->off[kj], &kc->j0[kj], &kc->j1[kj]);
    }
}

/* Loop order c, ki, i, kj: the input row (and whether it exists) is found once for all kW
 * kernel columns; rows are short (Wo), so the bookkeeping per row is what costs. Kernels
 * wider than MAX_KW take the same loops with the column ranges computed per row. */
/* Short runs (a row of a 10x10 output is 40 bytes) in 16-byte moves (copy and zero: the
 * last one overlapping the one before): no per-run vectoriser prologue, alias check or
 * library call, which cost more than the work itself when a run is a few vectors long. */
#define RUN_OPS(T, sfx)                                                                     \
    static inline void copy_run_##sfx(T *dst, const T *src, int64_t n)                      \
    {                                                                                       \
        const int64_t v = 16 / (int64_t)sizeof(T), w = 2 * v;                               \
        if (n < v) {                                                                        \
            for (int64_t j = 0; j < n; j++) dst[j] = src[j];                                \
            return;                                                                         \
        }                                                                                   \
        int64_t j = 0;                                                                      \
        if (n >= w) { /* 32-byte moves: one instruction each in the AVX2 clones */          \
            for (; j + w <= n; j += w) memcpy(dst + j, src + j, 32);                        \
            if (j < n) memcpy(dst + n - w, src + n - w, 32);                                \
            return;                                                                         \
        }                                                                                   \
        for (; j + v <= n; j += v) memcpy(dst + j, src + j, 16);                            \
        if (j < n) memcpy(dst + n - v, src + n - v, 16);                                    \
    }                                                                                       \
    static inline void zero_run_##sfx(T *dst, int64_t n)                                    \
    {                                                                                       \
        const int64_t v = 16 / (int64_t)sizeof(T);                                          \
        static const T z[16 / sizeof(T)];                                                   \
        if (n < v) { /* not a loop: GCC would make a loop of stores into a memset call */  \
            if (n > 0) dst[0] = 0;                                                          \
            if (n > 1) dst[1] = 0;                                                          \
            if (n > 2) dst[2] = 0;                                                          \
            return;                                                                         \
        }                                                                                   \
        int64_t j = 0;                                                                      \
        for (; j + v <= n; j += v) memcpy(dst + j, z, 16);                                  \
        if (j < n) memcpy(dst + n - v, z, 16);                                              \
    }                                                                                       \
    static inline void add_run_##sfx(T *dst, const T *src, int64_t n)                       \
    {                                                                                       \
        enum { V = 16 / sizeof(T) };                                                        \
        int64_t j = 0;                                                                      \
        for (; j + V <= n; j += V) {                                                        \
            T a[V], b[V];                                                                   \
            memcpy(a, dst + j, 16), memcpy(b, src + j, 16);                                 \
            for (int k = 0; k < V; k++) a[k] += b[k];                                       \
            memcpy(dst + j, a, 16);                                                         \
        }                                                                                   \
        for (; j < n; j++) dst[j] += src[j];                                                \
    }
RUN_OPS(float, f32)
RUN_OPS(double, f64)

/* The stride-1 im2col is also compiled for AVX2 and picked at load time (as ew.c's float
 * loops): its runs then move 32 bytes an instruction. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define CONV_WIDE __attribute__((target_clones("avx2", "default")))
#else
#define CONV_WIDE
#endif

#define CONV_LOOPS(T, sfx)                                                                  \
    /* col rows of channels [c0, c1) <- img (Cg, H, W) */                                   \
    static void im2col_##sfx(const geom *g, const T *img, T *col, int64_t c0, int64_t c1)   \
    {                                                                                       \
        kcols kc;                                                                           \
        kcols_of(g, &kc);                                                                   \
        const int64_t Wo = g->Wo, L = g->L, sW = g->sW;                                     \
        for (int64_t c = c0; c < c1; c++)                                                   \
            for (int64_t ki = 0; ki < g->kH; ki++) {                                        \
                T *base = col + (c * g->kH + ki) * g->kW * L;                               \
                for (int64_t i = 0; i < g->Ho; i++) {                                       \
                    int64_t ih = i * g->sH - g->pH + ki * g->dH;                            \
                    bool in = ih >= 0 && ih < g->H;                                         \
                    const T *row = img + (c * g->H + (in ? ih : 0)) * g->W;                 \
                    for (int64_t kj = 0; kj < g->kW; kj++) {                                \
                        T *dst = base + kj * L + i * Wo;                                    \
                        if (!in) {                                                          \
                            zero_run_##sfx(dst, Wo);                                        \
                            continue;                                                       \
                        }                                                                   \
                        int64_t off, j0, j1;                                                \
                        if (kj < MAX_KW) off = kc.off[kj], j0 = kc.j0[kj], j1 = kc.j1[kj];  \
                        else off = kj * g->dW - g->pW, valid_cols(g, off, &j0, &j1);        \
                        zero_run_##sfx(dst, j0);                                            \
                        if (sW == 1) copy_run_##sfx(dst + j0, row + j0 + off, j1 - j0);     \
                        else                                                                \
                            for (int64_t j = j0; j < j1; j++) dst[j] = row[j * sW + off];   \
                        zero_run_##sfx(dst + j1, Wo - j1);                                  \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
    }                                                                                       \
    /* im2col for stride 1 and dilation 1 (most convolutions): each channel is first copied \
     * into a zero-padded plane (on the stack, when it is small), after which every run is \
     * a plain copy of Wo elements with no bounds or zero fill, and rows are walked for one \
     * kernel offset at a time (destination contiguous). False: not this case. */          \
    CONV_WIDE static bool im2col_s1_##sfx(const geom *g, const T *img, T *col, int64_t c0, int64_t c1) \
    {                                                                                       \
        enum { PAD_MAX = 4096 };                                                            \
        const int64_t Hp = g->H + 2 * g->pH, Wp = g->W + 2 * g->pW, Wo = g->Wo, L = g->L;  \
        if (g->sH != 1 || g->sW != 1 || g->dH != 1 || g->dW != 1 || Hp - g->kH + 1 != g->Ho || \
            Wp - g->kW + 1 != Wo)                                                           \
            return false;                                                                   \
        bool padded = g->pH || g->pW;                                                       \
        if (padded && Hp * Wp > PAD_MAX) return false;                                      \
        T pad[PAD_MAX];                                                                     \
        for (int64_t c = c0; c < c1; c++) {                                                 \
            const T *src = img + c * g->H * g->W;                                           \
            if (padded) {                                                                   \
                memset(pad, 0, sizeof(T) * (size_t)(Hp * Wp));                              \
                for (int64_t h = 0; h < g->H; h++)                                          \
                    memcpy(pad + (h + g->pH) * Wp + g->pW, src + h * g->W, sizeof(T) * (size_t)g->W); \
                src = pad;                                                                  \
            }                                                                               \
            for (int64_t ki = 0; ki < g->kH; ki++)                                          \
                for (int64_t kj = 0; kj < g->kW; kj++) {                                    \
                    T *dst = col + ((c * g->kH + ki) * g->kW + kj) * L;                     \
                    const T *s = src + ki * Wp + kj;                                        \
                    for (int64_t i = 0; i < g->Ho; i++, dst += Wo, s += Wp) copy_run_##sfx(dst, s, Wo); \
                }                                                                           \
        }                                                                                   \
        return true;                                                                        \
    }                                                                                       \
    /* img (Cg, H, W) += the col rows of channels [c0, c1) (col2im, the adjoint) */         \
    static void col2im_##sfx(const geom *g, const T *col, T *img, int64_t c0, int64_t c1)   \
    {                                                                                       \
        kcols kc;                                                                           \
        kcols_of(g, &kc);                                                                   \
        const int64_t Wo = g->Wo, L = g->L, sW = g->sW;                                     \
        /* kj outside i: consecutive adds go to different image rows. With kj inside, each \
         * add re-read the row just written one element along, and the overlapping loads   \
         * stalled on store forwarding. */                                                  \
        for (int64_t c = c0; c < c1; c++)                                                   \
            for (int64_t ki = 0; ki < g->kH; ki++)                                          \
                for (int64_t kj = 0; kj < g->kW; kj++) {                                    \
                    const T *base = col + ((c * g->kH + ki) * g->kW + kj) * L;              \
                    int64_t off, j0, j1;                                                    \
                    if (kj < MAX_KW) off = kc.off[kj], j0 = kc.j0[kj], j1 = kc.j1[kj];      \
                    else off = kj * g->dW - g->pW, valid_cols(g, off, &j0, &j1);            \
                    for (int64_t i = 0; i < g->Ho; i++) {                                   \
                        int64_t ih = i * g->sH - g->pH + ki * g->dH;                        \
                        if (ih < 0 || ih >= g->H) continue;                                 \
                        T *row = img + (c * g->H + ih) * g->W;                              \
                        const T *src = base + i * Wo;                                       \
                        if (sW == 1)                                                        \
                            add_run_##sfx(row + j0 + off, src + j0, j1 - j0);               \
                        else                                                                \
                            for (int64_t j = j0; j < j1; j++) row[j * sW + off] += src[j];  \
                    }                                                                       \
                }                                                                           \
    }                                                                                       \
    /* col2im for stride 1 and dilation 1: the adjoint of im2col_s1, adding into a padded  \
     * plane (then its interior into img) or, unpadded, into img directly; fixed-length runs  \
     * and sizes in locals (through g they were reloaded after every store). */            \
    static bool col2im_s1_##sfx(const geom *g, const T *col, T *img, int64_t c0, int64_t c1) \
    {                                                                                       \
        enum { PAD_MAX = 4096 };                                                            \
        const int64_t H = g->H, W = g->W, pH = g->pH, pW = g->pW, kH = g->kH, kW = g->kW;   \
        const int64_t Hp = H + 2 * pH, Wp = W + 2 * pW, Ho = g->Ho, Wo = g->Wo, L = g->L;  \
        if (g->sH != 1 || g->sW != 1 || g->dH != 1 || g->dW != 1 || Hp - kH + 1 != Ho || Wp - kW + 1 != Wo) \
            return false;                                                                   \
        bool padded = pH || pW;                                                             \
        if (padded && Hp * Wp > PAD_MAX) return false;                                      \
        T pad[PAD_MAX];                                                                     \
        for (int64_t c = c0; c < c1; c++) {                                                 \
            T *dst = img + c * H * W;                                                       \
            if (padded) {                                                                   \
                memset(pad, 0, sizeof(T) * (size_t)(Hp * Wp));                              \
                dst = pad;                                                                  \
            }                                                                               \
            for (int64_t ki = 0; ki < kH; ki++)                                             \
                for (int64_t kj = 0; kj < kW; kj++) {                                       \
                    const T *src = col + ((c * kH + ki) * kW + kj) * L;                     \
                    T *d = dst + ki * Wp + kj;                                              \
                    for (int64_t i = 0; i < Ho; i++, d += Wp, src += Wo) add_run_##sfx(d, src, Wo); \
                }                                                                           \
            if (padded)                                                                     \
                for (int64_t h = 0; h < H; h++)                                             \
                    add_run_##sfx(img + (c * H + h) * W, pad + (h + pH) * Wp + pW, W);      \
        }                                                                                   \
        return true;                                                                        \
    }                                                                                       \
    /* rows (n, len) = bias[r] each, or 0 without a bias */                                 \
    static void fill_rows_##sfx(T *out, const T *bias, int64_t n, int64_t len)              \
    {                                                                                       \
        for (int64_t r = 0; r < n; r++) {                                                   \
            T v = bias ? bias[r] : 0;                                                       \
            for (int64_t j = 0; j < len; j++) out[r * len + j] = v;                         \
        }                                                                                   \
    }                                                                                       \
    /* dst[i] += src[i] */                                                                  \
    static void add_into_##sfx(T *dst, const T *src, int64_t n)                             \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) dst[i] += src[i];                                   \
    }                                                                                       \
    /* dst (G blocks of (Og, K)) += src (G blocks of (K, Og)) transposed block by block */  \
    static void add_transposed_##sfx(T *dst, const T *src, int64_t G, int64_t Og, int64_t K) \
    {                                                                                       \
        for (int64_t b = 0; b < G; b++, dst += Og * K, src += Og * K)                       \
            for (int64_t o = 0; o < Og; o++)                                                \
                for (int64_t k = 0; k < K; k++) dst[o * K + k] += src[k * Og + o];          \
    }
CONV_LOOPS(float, f32)
CONV_LOOPS(double, f64)

static void add_transposed(int dt, void *dst, const void *src, int64_t G, int64_t Og, int64_t K)
{
    if (dt == TC_F32) add_transposed_f32(dst, src, G, Og, K);
    else add_transposed_f64(dst, src, G, Og, K);
}

/* C (m, n) = A (m, k) @ B (k, n) + beta C, row-major, A / B transposed on request: on
 * this thread inside a part, split over the pool for a lone unit (gemm.h). */
static void gemm(int dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                 const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    tc_cpu_gemm(dt, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

/* ---- channel-parallel im2col / col2im ------------------------------------------------------ */

typedef struct chan_job {
    const geom *g;
    int dt;
    const void *src;
    void *dst;
    bool to_cols;
} chan_job;

static void chan_range(void *ctx, int64_t c0, int64_t c1)
{
    const chan_job *j = ctx;
    if (j->dt == TC_F32) {
        if (j->to_cols) {
            if (!im2col_s1_f32(j->g, j->src, j->dst, c0, c1)) im2col_f32(j->g, j->src, j->dst, c0, c1);
        }
        else if (!col2im_s1_f32(j->g, j->src, j->dst, c0, c1)) col2im_f32(j->g, j->src, j->dst, c0, c1);
    } else {
        if (j->to_cols) {
            if (!im2col_s1_f64(j->g, j->src, j->dst, c0, c1)) im2col_f64(j->g, j->src, j->dst, c0, c1);
        }
        else if (!col2im_s1_f64(j->g, j->src, j->dst, c0, c1)) col2im_f64(j->g, j->src, j->dst, c0, c1);
    }
}

/* Inside a pool worker (the small-product path) this runs inline. */
static void im2col_or_back(const geom *g, int dt, const void *src, void *dst, bool to_cols)
{
    chan_job j = {g, dt, src, dst, to_cols};
    int64_t per = g->kH * g->kW * g->L;
    tc_parallel_for(g->Cg, per >= TC_PARALLEL_GRAIN ? 1 : TC_PARALLEL_GRAIN / per + 1, chan_range, &j);
}

/* ---- the three ops, one unit of work at a time --------------------------------------------- */

typedef struct job {
    tc_op op;
    const geom *g;
    int dt;
    int64_t es;
    const char *x, *w, *b; /* dense inputs; b may be NULL */
    char *out;             /* dense result */
    char *cols;            /* nbufs K*L column buffers (NULL when direct) */
    char *parts;           /* conv2d_weight: one weight-sized partial sum per chunk */
    bool wt;               /* conv2d_weight: partial sums kept transposed, (K, O/G) per group */
    int64_t units, per;    /* units of work (samples, or sample-groups), units per chunk */
    int64_t nch, nbufs;    /* chunks; column buffers (one per thread) */
    uint8_t busy[64];      /* busy[b]: buffer b is taken (atomic) */
} job;

static void fill_rows(int dt, void *out, const void *bias, int64_t n, int64_t len)
{
    if (dt == TC_F32) fill_rows_f32(out, bias, n, len);
    else fill_rows_f64(out, bias, n, len);
}

/* conv2d, one (sample, group): out_ng = W_g @ cols(img_ng) + bias. */
static void conv_unit(const job *j, int64_t u, char *col)
{
    const geom *g = j->g;
    int64_t n = u / g->G, gi = u % g->G, es = j->es;
    const char *img = j->x + (n * g->C + gi * g->Cg) * g->H * g->W * es;
    char *o = j->out + (n * g->O + gi * g->Og) * g->L * es;
    const char *cm = img;
    if (!g->direct) {
        im2col_or_back(g, j->dt, img, col, true);
        cm = col;
    }
    if (j->b) fill_rows(j->dt, o, j->b + gi * g->Og * es, g->Og, g->L);
    gemm(j->dt, false, false, g->Og, g->L, g->K, j->w + gi * g->Og * g->K * es, g->K, cm, g->L, j->b ? 1 : 0, o,
         g->L);
}

/* conv_transpose2d, one (sample, group): img_ng = bias + col2im(W_g^T @ x_ng). */
static void convt_unit(const job *j, int64_t u, char *col)
{
    const geom *g = j->g;
    int64_t n = u / g->G, gi = u % g->G, es = j->es;
    const char *xin = j->x + (n * g->O + gi * g->Og) * g->L * es;
    const char *wg = j->w + gi * g->Og * g->K * es;
    char *img = j->out + (n * g->C + gi * g->Cg) * g->H * g->W * es;
    fill_rows(j->dt, img, j->b ? j->b + gi * g->Cg * es : NULL, g->Cg, g->H * g->W);
    if (g->direct) {
        gemm(j->dt, true, false, g->K, g->L, g->Og, wg, g->K, xin, g->L, 1, img, g->L);
        return;
    }
    gemm(j->dt, true, false, g->K, g->L, g->Og, wg, g->K, xin, g->L, 0, col, g->L);
    im2col_or_back(g, j->dt, col, img, false);
}

/* conv2d_weight, one sample, every group: part_g += gout_ng @ cols(img_ng)^T, or, with
 * j->wt, part_g^T (K, O/G) += cols(img_ng) @ gout_ng^T: the same product with the long K
 * side as gemm's rows, which OpenBLAS runs about 1.3x faster once O/G >= 16 (LeNet's
 * second convolution, ResNet-like shapes); for narrower outputs the first form wins. */
static void convw_unit(const job *j, int64_t n, char *col, char *part)
{
    const geom *g = j->g;
    int64_t es = j->es;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const char *img = j->x + (n * g->C + gi * g->Cg) * g->H * g->W * es;
        const char *go = j->w + (n * g->O + gi * g->Og) * g->L * es; /* gout is the second input */
        const char *cm = img;
        if (!g->direct) {
            im2col_or_back(g, j->dt, img, col, true);
            cm = col;
        }
        char *pg = part + gi * g->Og * g->K * es;
        if (j->wt) gemm(j->dt, false, true, g->K, g->Og, g->L, cm, g->L, go, g->L, 1, pg, g->Og);
        else gemm(j->dt, false, true, g->Og, g->K, g->L, go, g->L, cm, g->L, 1, pg, g->K);
    }
}

/* A free column buffer: at most nbufs ranges run at once (one per thread), so one is
 * always free; taken and given back with atomics. */
static int64_t take_buf(job *j)
{
    for (;;)
        for (int64_t b = 0; b < j->nbufs; b++) {
            uint8_t no = 0;
            if (__atomic_compare_exchange_n(&j->busy[b], &no, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return b;
        }
}

/* Chunks [c0, c1): chunk c covers units [c*per, min((c+1)*per, units)). The pool hands
 * out chunk ranges as threads come free (a late worker takes fewer), each run with a
 * column buffer of its own. */
static void part_range(void *ctx, int64_t c0, int64_t c1)
{
    job *j = ctx;
    int64_t kl = j->g->direct ? 0 : j->g->K * j->g->L, wsize = j->g->O * j->g->K;
    int64_t b = j->cols ? take_buf(j) : 0;
    char *col = j->cols ? j->cols + b * kl * j->es : NULL;
    for (int64_t c = c0; c < c1; c++) {
        int64_t u1 = (c + 1) * j->per < j->units ? (c + 1) * j->per : j->units;
        for (int64_t u = c * j->per; u < u1; u++) {
            if (j->op == TC_OP_CONV2D) conv_unit(j, u, col);
            else if (j->op == TC_OP_CONV_TRANSPOSE2D) convt_unit(j, u, col);
            else convw_unit(j, u, col, j->parts ? j->parts + c * wsize * j->es : j->out);
        }
    }
    if (j->cols) __atomic_store_n(&j->busy[b], 0, __ATOMIC_RELEASE);
}

/* ---- the kernel -------------------------------------------------------------------------- */

static void geom_of(const tc_kcall *k, const tc_tensor *x, const tc_tensor *w, const tc_tensor *out, geom *g)
{
    const int64_t *s = k->p->shape;
    /* image / columns / weight tensors, whichever of x, w, out plays each part */
    const tc_tensor *img = x, *cols = out, *wt = w;
    if (k->op == TC_OP_CONV_TRANSPOSE2D) img = out, cols = x;
    if (k->op == TC_OP_CONV2D_WEIGHT) cols = w, wt = out;
    *g = (geom){.N = img->size[0], .C = img->size[1], .H = img->size[2], .W = img->size[3],
                .O = cols->size[1], .Ho = cols->size[2], .Wo = cols->size[3],
                .kH = wt->size[2], .kW = wt->size[3],
                .sH = s[0], .sW = s[1], .pH = s[2], .pW = s[3], .dH = s[4], .dW = s[5],
                .G = k->p->i[0]};
    g->Cg = g->C / g->G, g->Og = g->O / g->G;
    g->K = g->Cg * g->kH * g->kW, g->L = g->Ho * g->Wo;
    g->direct = g->kH == 1 && g->kW == 1 && g->sH == 1 && g->sW == 1 && g->pH == 0 && g->pW == 0;
}

tc_status tc_cpu_conv(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_conv);
    tc_tensor *tmp[4] = {NULL, NULL, NULL, NULL}, *dense = NULL;
    const tc_tensor *x, *w, *b = NULL;
    char *cols = NULL, *parts = NULL;
    tc_status s;
    if ((s = tc_nn_dense_in(k->in[0], &tmp[0], &x))) goto done;
    if ((s = tc_nn_dense_in(k->in[1], &tmp[1], &w))) goto done;
    if (k->nin > 2 && k->in[2] && (s = tc_nn_dense_in(k->in[2], &tmp[2], &b))) goto done;
    if ((s = tc_nn_dense_out(k->out[0], &tmp[3], &dense))) goto done;

    geom g;
    geom_of(k, x, w, dense, &g);
    int dt = dense->dtype;
    bool wgrad = k->op == TC_OP_CONV2D_WEIGHT;
    int64_t es = tc_elsize(dt), wsize = g.O * g.K;
    job j = {.op = k->op, .g = &g, .dt = dt, .es = es, .x = tc_base(x), .w = tc_base(w),
             .b = b ? tc_base(b) : NULL, .out = tc_base(dense)};
    j.units = wgrad ? g.N : g.N * g.G;
    /* chunks: fixed by the sizes alone (the weight gradient's summation order); partial
     * sums are capped at PARTIALS_BYTES */
    int64_t nch = j.units < MAX_CHUNKS ? j.units : MAX_CHUNKS;
    if (wgrad && nch * wsize * es > PARTIALS_BYTES) nch = PARTIALS_BYTES / (wsize * es);
    if (nch < 1) nch = 1;
    j.per = j.units > 0 ? (j.units + nch - 1) / nch : 0;
    if (j.units > 0) nch = (j.units + j.per - 1) / j.per;
    int64_t nt = tc_get_num_threads();
    if (nt > 64) nt = 64; /* busy[] */
    j.nch = nch;
    j.nbufs = nch < nt ? nch : nt;
    if (!g.direct && j.units > 0) {
        if (!(cols = tc_malloc((size_t)(j.nbufs * g.K * g.L * es), "conv: column buffer"))) {
            s = TC_ERR_MEMORY;
            goto done;
        }
        j.cols = cols;
    }
    j.wt = wgrad && g.Og >= 16;
    if (wgrad) {
        if (nch > 1 || j.wt) {
            if (!(parts = tc_malloc((size_t)(nch * wsize * es), "conv2d_weight: partial sums"))) {
                s = TC_ERR_MEMORY;
                goto done;
            }
            memset(parts, 0, (size_t)(nch * wsize * es));
            j.parts = parts;
        }
        if (wsize > 0) memset(j.out, 0, (size_t)(wsize * es));
    }
    /* Several chunks: each runs its gemms on its own thread (nested pool calls run
     * inline). One chunk: the gemm and im2col/col2im are split over the pool. */
    if (j.units > 0) tc_parallel_for(j.nch, 1, part_range, &j);
    if (wgrad && (nch > 1 || j.wt)) /* partial sums in chunk order: independent of the thread count */
        for (int64_t c = 0; c < nch; c++) {
            const char *pc = parts + c * wsize * es;
            if (j.wt) add_transposed(dt, j.out, pc, g.G, g.Og, g.K);
            else if (dt == TC_F32) add_into_f32((float *)j.out, (const float *)pc, wsize);
            else add_into_f64((double *)j.out, (const double *)pc, wsize);
        }
    tc_nn_dense_out_finish(k->out[0], tmp[3]);
done:
    free(cols);
    free(parts);
    for (int i = 0; i < 4; i++) tc_tensor_release(tmp[i]);
    return s;
}

/* ---- dense operands (shared with pool.c and softmax.c; see nn.h) ------------------------------ */

#define COPY_LOOP(N, T)                                                                     \
    static void copy_##N(char **pp, const int64_t *st, int64_t n, double s0, double s1)     \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) *(T *)(pp[0] + i * st[0]) = *(const T *)(pp[1] + i * st[1]); \
    }
COPY_LOOP(4, uint32_t)
COPY_LOOP(8, uint64_t)

static void copy_dense(tc_tensor *dst, const tc_tensor *src)
{
    tc_cpu_foreach(dst, &src, 1, tc_elsize(dst->dtype) == 4 ? copy_4 : copy_8, 0, 0);
}

tc_status tc_nn_dense_in(const tc_tensor *t, tc_tensor **tmp, const tc_tensor **use)
{
    *tmp = NULL;
    *use = t;
    if (tc_tensor_is_contiguous(t)) return TC_OK;
    TRY(tc_tensor_alloc((tc_dtype)t->dtype, t->ndim, t->size, tmp));
    copy_dense(*tmp, t);
    *use = *tmp;
    return TC_OK;
}

tc_status tc_nn_dense_out(tc_tensor *out, tc_tensor **tmp, tc_tensor **use)
{
    *tmp = NULL;
    *use = out;
    if (tc_tensor_is_contiguous(out)) return TC_OK;
    TRY(tc_tensor_alloc((tc_dtype)out->dtype, out->ndim, out->size, tmp));
    *use = *tmp;
    return TC_OK;
}

void tc_nn_dense_out_finish(tc_tensor *out, tc_tensor *tmp)
{
    if (tmp) copy_dense(out, tmp);
}
