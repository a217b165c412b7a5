/* scan.c -- CPU kernels of the scan kind: cumsum and cumprod along a dim.
 *
 * The running value is kept in double for float inputs (Torch7's accreal) and in uint64
 * for integers (wrapping, so overflow is defined), and stored in the input type at each
 * step. Three drivers, as in reduce.c:
 *   lines  each line along the dim scanned on its own; parallel over lines.
 *   cols   the dim is outer and the other inner dim contiguous: a block of running values
 *          advances one row at a time (vectorised across columns); parallel over blocks.
 *   chunks few long lines: each line is cut into fixed-size chunks; the chunk totals are
 *          folded in parallel, prefixed in order, then every chunk is scanned from its
 *          start value in parallel (fixed chunks: results do not depend on thread count).
 * Scanning in place (out == in) is safe: each element is read before its slot is written.
 */
#include "../internal.h"

/* Scans n elements from running value *acc (a double or a uint64_t), writing each step. */
typedef void (*line_fn)(const char *x, int64_t xs, char *y, int64_t ys, int64_t n, void *acc);
/* Folds n elements into *acc without writing (chunk totals; lanes, as in reduce.c). */
typedef void (*fold_fn)(const char *x, int64_t xs, int64_t n, void *acc);
/* Advances m running values (contiguous) by one row of x, writing the row of y. */
typedef void (*cols_fn)(const char *x, char *y, int64_t m, void *acc);

#define LANES 8
#define OP_ADD(a, b) ((a) + (b))
#define OP_MUL(a, b) ((a) * (b))
#define LIFT_F(x) ((double)(x))
#define LIFT_I(x) ((uint64_t)(int64_t)(x))

#define SCAN_DEF(NAME, T, A, LIFT, OP, ID)                                                       \
    static void line_##NAME(const char *x, int64_t xs, char *y, int64_t ys, int64_t n, void *accp) \
    {                                                                                        \
        A acc = *(A *)accp;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                    \
            acc = OP(acc, LIFT(*(const T *)(x + i * xs)));                                   \
            *(T *)(y + i * ys) = (T)acc;                                                     \
        }                                                                                    \
        *(A *)accp = acc;                                                                    \
    }                                                                                        \
    static void fold_##NAME(const char *x, int64_t xs, int64_t n, void *accp)                \
    {                                                                                        \
        A l[LANES], acc = *(A *)accp;                                                        \
        for (int j = 0; j < LANES; j++) l[j] = (A)ID;                                        \
        int64_t i = 0;                                                                       \
        if (xs == (int64_t)sizeof(T)) {                                                      \
            const T *X = (const T *)x;                                                       \
            for (; i + LANES <= n; i += LANES)                                               \
                for (int j = 0; j < LANES; j++) l[j] = OP(l[j], LIFT(X[i + j]));             \
        }                                                                                    \
        for (; i < n; i++) l[0] = OP(l[0], LIFT(*(const T *)(x + i * xs)));                  \
        for (int j = 0; j < LANES; j++) acc = OP(acc, l[j]);                                 \
        *(A *)accp = acc;                                                                    \
    }                                                                                        \
    static void cols_##NAME(const char *x, char *y, int64_t m, void *accp)                   \
    {                                                                                        \
        A *acc = (A *)accp;                                                                  \
        const T *X = (const T *)x;                                                           \
        T *Y = (T *)y;                                                                       \
        for (int64_t j = 0; j < m; j++) {                                                    \
            acc[j] = OP(acc[j], LIFT(X[j]));                                                 \
            Y[j] = (T)acc[j];                                                                \
        }                                                                                    \
    }

typedef struct scan_fns {
    line_fn line;
    fold_fn fold;
    cols_fn cols;
} scan_fns;

/* Per dtype: [0] cumsum, [1] cumprod. */
#define DEF_FLOAT(E, T, sfx)                                                                 \
    SCAN_DEF(sum_##sfx, T, double, LIFT_F, OP_ADD, 0)                                        \
    SCAN_DEF(prod_##sfx, T, double, LIFT_F, OP_MUL, 1)                                       \
    static const scan_fns fns_##sfx[2] = {{line_sum_##sfx, fold_sum_##sfx, cols_sum_##sfx},  \
                                          {line_prod_##sfx, fold_prod_##sfx, cols_prod_##sfx}};
#define DEF_INT(E, T, sfx)                                                                   \
    SCAN_DEF(sum_##sfx, T, uint64_t, LIFT_I, OP_ADD, 0)                                      \
    SCAN_DEF(prod_##sfx, T, uint64_t, LIFT_I, OP_MUL, 1)                                     \
    static const scan_fns fns_##sfx[2] = {{line_sum_##sfx, fold_sum_##sfx, cols_sum_##sfx},  \
                                          {line_prod_##sfx, fold_prod_##sfx, cols_prod_##sfx}};
TC_FOR_EACH_FLOAT(DEF_FLOAT)
TC_FOR_EACH_INT(DEF_INT)

static const scan_fns *fns_table(int dt)
{
    switch (dt) {
#define FNS_CASE(E, T, sfx)                                                                  \
    case E: return fns_##sfx;
        TC_FOR_EACH_FLOAT(FNS_CASE)
        TC_FOR_EACH_INT(FNS_CASE)
#undef FNS_CASE
    default: return NULL;
    }
}

/* A running value of either kind; which member is live follows the dtype. */
typedef struct sacc {
    double d;
    uint64_t u;
} sacc;

typedef struct sjob {
    scan_fns f;
    bool fl, prod;
    int64_t n, xs, ys; /* the scanned dim: length, byte strides of x and y */
    int nk;            /* other dims, coalesced; byte strides of x and y */
    int64_t ksz[TC_MAX_DIMS], kst[2][TC_MAX_DIMS];
    int64_t nlines;
    const char *x;
    char *y;
} sjob;

static sacc start_value(const sjob *j) { return j->prod ? (sacc){1, 1} : (sacc){0, 0}; }
static void *acc_ptr(const sjob *j, sacc *a) { return j->fl ? (void *)&a->d : (void *)&a->u; }

/* Byte offsets of line number `line` in x and y. */
static void line_offsets(const sjob *j, int64_t line, int ndims, int64_t *ox, int64_t *oy)
{
    *ox = *oy = 0;
    for (int d = ndims - 1; d >= 0; d--) {
        int64_t ix = line % j->ksz[d];
        line /= j->ksz[d];
        *ox += ix * j->kst[0][d];
        *oy += ix * j->kst[1][d];
    }
}

static void lines_range(void *ctx, int64_t b, int64_t e)
{
    const sjob *j = ctx;
    for (int64_t l = b; l < e; l++) {
        int64_t ox, oy;
        line_offsets(j, l, j->nk, &ox, &oy);
        sacc a = start_value(j);
        j->f.line(j->x + ox, j->xs, j->y + oy, j->ys, j->n, acc_ptr(j, &a));
    }
}

#define BLK 256

static void cols_range(void *ctx, int64_t b, int64_t e)
{
    const sjob *j = ctx;
    int in = j->nk - 1;
    int64_t m = j->ksz[in], nblk = (m + BLK - 1) / BLK;
    double bd[BLK];
    uint64_t bu[BLK];
    sacc s = start_value(j);
    for (int64_t it = b; it < e; it++) {
        int64_t c0 = (it % nblk) * BLK, w = m - c0 < BLK ? m - c0 : BLK, ox, oy;
        line_offsets(j, it / nblk, in, &ox, &oy);
        ox += c0 * j->kst[0][in];
        oy += c0 * j->kst[1][in];
        for (int64_t c = 0; c < w; c++) bd[c] = s.d, bu[c] = s.u;
        void *acc = j->fl ? (void *)bd : (void *)bu;
        for (int64_t r = 0; r < j->n; r++) j->f.cols(j->x + ox + r * j->xs, j->y + oy + r * j->ys, w, acc);
    }
}

/* ---- chunks: one long line scanned in parallel ---------------------------------------------- */

#define CHUNK 65536
#define MAX_CHUNKS 256

typedef struct chunk_job {
    const sjob *j;
    const char *x;
    char *y;
    int64_t chunk;
    sacc *acc; /* per chunk: its total (pass 1), then its start value (pass 2) */
} chunk_job;

static int64_t chunk_len(const chunk_job *c, int64_t i)
{
    int64_t b = i * c->chunk;
    return c->j->n - b < c->chunk ? c->j->n - b : c->chunk;
}

static void chunk_totals(void *ctx, int64_t b, int64_t e)
{
    const chunk_job *c = ctx;
    for (int64_t i = b; i < e; i++) {
        c->acc[i] = start_value(c->j);
        c->j->f.fold(c->x + i * c->chunk * c->j->xs, c->j->xs, chunk_len(c, i), acc_ptr(c->j, &c->acc[i]));
    }
}

static void chunk_scans(void *ctx, int64_t b, int64_t e)
{
    const chunk_job *c = ctx;
    const sjob *j = c->j;
    for (int64_t i = b; i < e; i++)
        j->f.line(c->x + i * c->chunk * j->xs, j->xs, c->y + i * c->chunk * j->ys, j->ys, chunk_len(c, i),
                  acc_ptr(j, &c->acc[i]));
}

static void chunked_lines(const sjob *j)
{
    sacc acc[MAX_CHUNKS];
    chunk_job c = {.j = j, .chunk = CHUNK, .acc = acc};
    if ((j->n + CHUNK - 1) / CHUNK > MAX_CHUNKS) c.chunk = (j->n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    int64_t nch = (j->n + c.chunk - 1) / c.chunk;
    for (int64_t l = 0; l < j->nlines; l++) {
        int64_t ox, oy;
        line_offsets(j, l, j->nk, &ox, &oy);
        c.x = j->x + ox;
        c.y = j->y + oy;
        tc_parallel_for(nch, 1, chunk_totals, &c);
        sacc run = start_value(j); /* exclusive prefix of the totals, in chunk order */
        for (int64_t i = 0; i < nch; i++) {
            sacc t = acc[i];
            acc[i] = run;
            run.d = j->prod ? run.d * t.d : run.d + t.d;
            run.u = j->prod ? run.u * t.u : run.u + t.u;
        }
        tc_parallel_for(nch, 1, chunk_scans, &c);
    }
}

tc_status tc_cpu_scan(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_scan);
    const tc_tensor *x = k->in[0];
    tc_tensor *y = k->out[0];
    const scan_fns *fns = fns_table(x->dtype);
    if (!fns)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: no CPU kernel for %s", k->info->name,
                            tc_dtype_name((tc_dtype)x->dtype));
    if (tc_tensor_numel(x) == 0) return TC_OK;
    bool prod = k->op == TC_OP_CUMPROD;
    sjob j = {.f = fns[prod], .fl = tc_dtype_is_float((tc_dtype)x->dtype), .prod = prod, .x = tc_base(x), .y = tc_base(y)};
    int64_t es = tc_elsize(x->dtype);
    if (x->ndim == 0) { /* one element */
        j.n = 1, j.nlines = 1, j.nk = 0;
        lines_range(&j, 0, 1);
        return TC_OK;
    }
    int64_t dim = k->p->i[0];
    int d = (int)(dim < 0 ? dim + x->ndim : dim);
    j.n = x->size[d];
    j.xs = x->stride[d] * es;
    j.ys = y->stride[d] * es;
    int nk = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i == d || x->size[i] == 1) continue;
        int m = nk - 1; /* merge with the previous kept dim when both tensors allow it */
        if (nk > 0 && j.kst[0][m] == x->stride[i] * es * x->size[i] && j.kst[1][m] == y->stride[i] * es * x->size[i]) {
            j.ksz[m] *= x->size[i];
            j.kst[0][m] = x->stride[i] * es;
            j.kst[1][m] = y->stride[i] * es;
            continue;
        }
        j.ksz[nk] = x->size[i];
        j.kst[0][nk] = x->stride[i] * es;
        j.kst[1][nk] = y->stride[i] * es;
        nk++;
    }
    j.nk = nk;
    j.nlines = tc_numel_of(nk, j.ksz);
    int in = nk - 1;
    if (nk > 0 && j.kst[0][in] == es && j.kst[1][in] == es && j.xs != es && j.ksz[in] >= 4) {
        int64_t m = j.ksz[in], nblk = (m + BLK - 1) / BLK, work = j.n * (m < BLK ? m : BLK) + 1;
        tc_parallel_for(j.nlines / m * nblk, TC_PARALLEL_GRAIN / work + 1, cols_range, &j);
    } else if (j.nlines < 16 && j.n >= 2 * CHUNK) {
        chunked_lines(&j);
    } else {
        tc_parallel_for(j.nlines, TC_PARALLEL_GRAIN / (j.n + 1) + 1, lines_range, &j);
    }
    return TC_OK;
}
