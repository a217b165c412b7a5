/* reduce.c -- CPU kernels of the reduce kind: sum prod mean var std norm max min all any.
 *
 * Each op is one pass (two for var/std) of a "flavour" -- a fold such as a double sum, an
 * int64 sum, a count of non-zeros, an arg-max -- and a finish that turns the accumulator
 * into the result (mean divides, std takes a root, all compares the count with n).
 * Flavours are instantiated per dtype from one body each. Three drivers walk the geometry:
 *   rows   each output folds one strided row; the innermost-dim case is a contiguous loop
 *          with lane accumulators the compiler vectorises. Parallel over outputs.
 *   cols   the reduced dim is outer and the kept inner dim contiguous: rows are folded
 *          into a block of column accumulators (vectorised across columns). Parallel over
 *          blocks.
 *   split  few outputs over many elements (every full reduction): the reduced space is cut
 *          into fixed-size chunks folded in parallel and combined in chunk order, so the
 *          result does not depend on the thread count.
 * var/std take two passes (mean, then squared deviations): accurate in double, and each
 * pass vectorises, which Welford's update does not.
 *
 * Accumulators: float inputs (f16/bf16 run as f32) accumulate in double, Torch7's accreal;
 * integer and bool inputs in int64, wrapping as unsigned so overflow is defined.
 * The prepare step (shape_reduce.c) has already checked everything; these never fail.
 */
#include "../internal.h"
#include <math.h>

typedef struct racc {
    double d;    /* float folds */
    int64_t i;   /* integer folds and counts */
    int64_t idx; /* max/min: position of the best value; -1 while nothing was seen */
} racc;

/* Folds n elements of byte stride st into acc. base: position of element 0 in the reduced
 * space (arg-max indices). q: per-call parameter (the mean for var, p for norm). */
typedef void (*row_fn)(const char *p, int64_t n, int64_t st, int64_t base, racc *acc, double q);
/* Folds one row of m contiguous elements (row number r) into column accumulators bd/bi
 * (values) and bx (arg indices). cm: per-column parameter (the means for var), else q. */
typedef void (*cols_fn)(const char *p, int64_t m, int64_t r, double *bd, int64_t *bi, int64_t *bx,
                        const double *cm, double q);

enum { F_SUM, F_PROD, F_CNZ, F_SQDEV, F_ABS, F_SQ, F_POW, F_AMAX, F_AMIN, F_MAX, F_MIN, F_COUNT };

/* NaN wins, as in PyTorch: once a NaN is held nothing replaces it. */
static inline double nanmax(double a, double b) { return (b > a || b != b) ? b : a; }
static inline double nanmin(double a, double b) { return (b < a || b != b) ? b : a; }
#define BETTER_MAX(x, b) ((x) > (b) || ((x) != (x) && (b) == (b)))
#define BETTER_MIN(x, b) ((x) < (b) || ((x) != (x) && (b) == (b)))

/* ---- flavour bodies: step(acc, x, q) and the lane merge -------------------------------- */

#define ST_SUMF(a, x, q) ((a) + (double)(x))
#define ST_SUMI(a, x, q) ((a) + (uint64_t)(int64_t)(x))
#define ST_PRODF(a, x, q) ((a) * (double)(x))
#define ST_PRODI(a, x, q) ((a) * (uint64_t)(int64_t)(x))
#define ST_CNZ(a, x, q) ((a) + (uint64_t)((x) != 0))
#define ST_SQDEV(a, x, q) ((a) + ((double)(x) - (q)) * ((double)(x) - (q)))
#define ST_ABS(a, x, q) ((a) + fabs((double)(x)))
#define ST_SQ(a, x, q) ((a) + (double)(x) * (double)(x))
#define ST_POW(a, x, q) ((a) + pow(fabs((double)(x)), (q)))
#define ST_AMAX(a, x, q) nanmax((a), fabs((double)(x)))
#define ST_AMIN(a, x, q) nanmin((a), fabs((double)(x)))
#define MG_ADD(a, b) ((a) + (b))
#define MG_MUL(a, b) ((a) * (b))
#define MG_MAX(a, b) nanmax((a), (b))
#define MG_MIN(a, b) nanmin((a), (b))

/* LANES independent accumulators let the compiler vectorise a fold without reassociating
 * it (no -ffast-math); the lanes merge at the end of the row. */
#define LANES 8
#define ROW_FOLD(NAME, T, A, FIELD, ID, STEP, MERGE)                                         \
    static void NAME(const char *p, int64_t n, int64_t st, int64_t base, racc *acc, double q) \
    {                                                                                        \
        (void)base;                                                                          \
        (void)q;                                                                             \
        A l[LANES];                                                                          \
        for (int j = 0; j < LANES; j++) l[j] = (ID);                                         \
        int64_t i = 0;                                                                       \
        if (st == (int64_t)sizeof(T)) {                                                      \
            const T *X = (const T *)p;                                                       \
            for (; i + LANES <= n; i += LANES)                                               \
                for (int j = 0; j < LANES; j++) l[j] = STEP(l[j], X[i + j], q);              \
            for (; i < n; i++) l[0] = STEP(l[0], X[i], q);                                   \
        } else {                                                                             \
            for (; i < n; i++) l[0] = STEP(l[0], *(const T *)(p + i * st), q);               \
        }                                                                                    \
        A r = (A)acc->FIELD;                                                                 \
        for (int j = 0; j < LANES; j++) r = MERGE(r, l[j]);                                  \
        acc->FIELD = (__typeof__(acc->FIELD))r;                                              \
    }

#define COLS_FOLD(NAME, T, A, BUF, STEP)                                                     \
    static void NAME(const char *p, int64_t m, int64_t r, double *bd, int64_t *bi, int64_t *bx, \
                     const double *cm, double q)                                             \
    {                                                                                        \
        (void)r;                                                                             \
        (void)bd;                                                                            \
        (void)bi;                                                                            \
        (void)bx;                                                                            \
        (void)q;                                                                             \
        const T *X = (const T *)p;                                                           \
        A *B = (A *)(BUF);                                                                   \
        if (cm) {                                                                            \
            for (int64_t j = 0; j < m; j++) B[j] = STEP(B[j], X[j], cm[j]);                  \
        } else {                                                                             \
            for (int64_t j = 0; j < m; j++) B[j] = STEP(B[j], X[j], q);                      \
        }                                                                                    \
    }

/* Arg folds keep the first best position (strict comparison), NaN counting as best. A
 * contiguous row takes two passes: the best value, then the first position holding it
 * (skipped when only the value is wanted: q != 0, a full max). The value pass runs on GNU
 * vector types because GCC will not vectorise a NaN-aware max written as scalars; the
 * blend goes through the comparison's integer mask (vector ?: is C++ only). */
#define VBYTES 16 /* SSE2's width: wider generic vectors are split badly */
#define PICK_MAX(x, b) (((x) > (b)) | ((x) != (x)))
#define PICK_MIN(x, b) (((x) < (b)) | ((x) != (x)))
#define ROW_ARG(NAME, T, A, FIELD, BETTER, PICK)                                             \
    static void NAME(const char *p, int64_t n, int64_t st, int64_t base, racc *acc, double q) \
    {                                                                                        \
        typedef T V_ __attribute__((vector_size(VBYTES)));                                   \
        typedef __typeof__((V_){0} > (V_){0}) M_;                                            \
        const int64_t vl = VBYTES / (int64_t)sizeof(T);                                      \
        if (n <= 0) return;                                                                  \
        if (st == (int64_t)sizeof(T) && n >= 4 * vl) {                                       \
            const T *X = (const T *)p;                                                       \
            V_ l[2], x;                                                                      \
            int64_t i = 2 * vl, at = 0;                                                      \
            memcpy(l, X, sizeof l);                                                          \
            for (; i + 2 * vl <= n; i += 2 * vl)                                             \
                for (int h = 0; h < 2; h++) {                                                \
                    memcpy(&x, X + i + h * vl, sizeof x);                                    \
                    M_ m = PICK(x, l[h]);                                                    \
                    l[h] = (V_)(((M_)x & m) | ((M_)l[h] & ~m));                              \
                }                                                                            \
            T v = l[0][0];                                                                   \
            for (int j = 0; j < 2 * vl; j++) v = PICK(l[j / vl][j % vl], v) ? l[j / vl][j % vl] : v; \
            for (; i < n; i++) v = PICK(X[i], v) ? X[i] : v;                                 \
            if (!q) {                                                                        \
                if (v != v) {                                                                \
                    while (X[at] == X[at]) at++;                                             \
                } else {                                                                     \
                    while (X[at] != v) at++;                                                 \
                }                                                                            \
                v = X[at]; /* the first of equal values (0.0 and -0.0 compare equal) */     \
            }                                                                                \
            if (acc->idx < 0 || BETTER((A)v, (A)acc->FIELD)) acc->FIELD = (A)v, acc->idx = base + at; \
            return;                                                                          \
        }                                                                                    \
        int64_t i = 0, bi = -1;                                                              \
        A best;                                                                              \
        if (acc->idx < 0) {                                                                  \
            best = (A) * (const T *)p;                                                       \
            bi = 0;                                                                          \
            i = 1;                                                                           \
        } else {                                                                             \
            best = (A)acc->FIELD;                                                            \
        }                                                                                    \
        for (; i < n; i++) {                                                                 \
            A x = (A) * (const T *)(p + i * st);                                             \
            if (BETTER(x, best)) best = x, bi = i;                                           \
        }                                                                                    \
        if (bi >= 0) acc->FIELD = best, acc->idx = base + bi;                                \
    }

#define COLS_ARG(NAME, T, A, BUF, BETTER)                                                    \
    static void NAME(const char *p, int64_t m, int64_t r, double *bd, int64_t *bi, int64_t *bx, \
                     const double *cm, double q)                                             \
    {                                                                                        \
        (void)bd;                                                                            \
        (void)bi;                                                                            \
        (void)cm;                                                                            \
        (void)q;                                                                             \
        const T *X = (const T *)p;                                                           \
        A *B = (A *)(BUF);                                                                   \
        if (r == 0) {                                                                        \
            for (int64_t j = 0; j < m; j++) B[j] = (A)X[j], bx[j] = 0;                       \
            return;                                                                          \
        }                                                                                    \
        for (int64_t j = 0; j < m; j++) {                                                    \
            A x = (A)X[j];                                                                   \
            bool t = BETTER(x, B[j]);                                                        \
            B[j] = t ? x : B[j];                                                             \
            bx[j] = t ? r : bx[j];                                                           \
        }                                                                                    \
    }

/* ---- instantiation: one block per dtype class, each ending in its flavour tables ------- */

#define DEF_FLOAT(E, T, sfx)                                                                 \
    ROW_FOLD(rsum_##sfx, T, double, d, 0.0, ST_SUMF, MG_ADD)                                 \
    ROW_FOLD(rprod_##sfx, T, double, d, 1.0, ST_PRODF, MG_MUL)                               \
    ROW_FOLD(rcnz_##sfx, T, uint64_t, i, 0, ST_CNZ, MG_ADD)                                  \
    ROW_FOLD(rsqdev_##sfx, T, double, d, 0.0, ST_SQDEV, MG_ADD)                              \
    ROW_FOLD(rabs_##sfx, T, double, d, 0.0, ST_ABS, MG_ADD)                                  \
    ROW_FOLD(rsq_##sfx, T, double, d, 0.0, ST_SQ, MG_ADD)                                    \
    ROW_FOLD(rpow_##sfx, T, double, d, 0.0, ST_POW, MG_ADD)                                  \
    ROW_FOLD(ramax_##sfx, T, double, d, 0.0, ST_AMAX, MG_MAX)                                \
    ROW_FOLD(ramin_##sfx, T, double, d, INFINITY, ST_AMIN, MG_MIN)                           \
    ROW_ARG(rmax_##sfx, T, double, d, BETTER_MAX, PICK_MAX)                                  \
    ROW_ARG(rmin_##sfx, T, double, d, BETTER_MIN, PICK_MIN)                                  \
    COLS_FOLD(csum_##sfx, T, double, bd, ST_SUMF)                                            \
    COLS_FOLD(cprod_##sfx, T, double, bd, ST_PRODF)                                          \
    COLS_FOLD(ccnz_##sfx, T, uint64_t, bi, ST_CNZ)                                           \
    COLS_FOLD(csqdev_##sfx, T, double, bd, ST_SQDEV)                                         \
    COLS_FOLD(cabs_##sfx, T, double, bd, ST_ABS)                                             \
    COLS_FOLD(csq_##sfx, T, double, bd, ST_SQ)                                               \
    COLS_FOLD(cpow_##sfx, T, double, bd, ST_POW)                                             \
    COLS_FOLD(camax_##sfx, T, double, bd, ST_AMAX)                                           \
    COLS_FOLD(camin_##sfx, T, double, bd, ST_AMIN)                                           \
    COLS_ARG(cmax_##sfx, T, double, bd, BETTER_MAX)                                          \
    COLS_ARG(cmin_##sfx, T, double, bd, BETTER_MIN)                                          \
    static const row_fn rows_##sfx[F_COUNT] = {rsum_##sfx,  rprod_##sfx, rcnz_##sfx,  rsqdev_##sfx, \
                                               rabs_##sfx,  rsq_##sfx,   rpow_##sfx,  ramax_##sfx,  \
                                               ramin_##sfx, rmax_##sfx,  rmin_##sfx};               \
    static const cols_fn cols_##sfx[F_COUNT] = {csum_##sfx,  cprod_##sfx, ccnz_##sfx,  csqdev_##sfx, \
                                                cabs_##sfx,  csq_##sfx,   cpow_##sfx,  camax_##sfx,  \
                                                camin_##sfx, cmax_##sfx,  cmin_##sfx};

#define DEF_INT(E, T, sfx)                                                                   \
    ROW_FOLD(rsum_##sfx, T, uint64_t, i, 0, ST_SUMI, MG_ADD)                                 \
    ROW_FOLD(rprod_##sfx, T, uint64_t, i, 1, ST_PRODI, MG_MUL)                               \
    ROW_FOLD(rcnz_##sfx, T, uint64_t, i, 0, ST_CNZ, MG_ADD)                                  \
    ROW_ARG(rmax_##sfx, T, int64_t, i, BETTER_MAX, PICK_MAX)                                 \
    ROW_ARG(rmin_##sfx, T, int64_t, i, BETTER_MIN, PICK_MIN)                                 \
    COLS_FOLD(csum_##sfx, T, uint64_t, bi, ST_SUMI)                                          \
    COLS_FOLD(cprod_##sfx, T, uint64_t, bi, ST_PRODI)                                        \
    COLS_FOLD(ccnz_##sfx, T, uint64_t, bi, ST_CNZ)                                           \
    COLS_ARG(cmax_##sfx, T, int64_t, bi, BETTER_MAX)                                         \
    COLS_ARG(cmin_##sfx, T, int64_t, bi, BETTER_MIN)                                         \
    static const row_fn rows_##sfx[F_COUNT] = {[F_SUM] = rsum_##sfx, [F_PROD] = rprod_##sfx,  \
                                               [F_CNZ] = rcnz_##sfx, [F_MAX] = rmax_##sfx,    \
                                               [F_MIN] = rmin_##sfx};                         \
    static const cols_fn cols_##sfx[F_COUNT] = {[F_SUM] = csum_##sfx, [F_PROD] = cprod_##sfx, \
                                                [F_CNZ] = ccnz_##sfx, [F_MAX] = cmax_##sfx,   \
                                                [F_MIN] = cmin_##sfx};

#define DEF_BOOL(E, T, sfx)                                                                  \
    ROW_FOLD(rsum_##sfx, T, uint64_t, i, 0, ST_SUMI, MG_ADD)                                 \
    ROW_FOLD(rcnz_##sfx, T, uint64_t, i, 0, ST_CNZ, MG_ADD)                                  \
    COLS_FOLD(csum_##sfx, T, uint64_t, bi, ST_SUMI)                                          \
    COLS_FOLD(ccnz_##sfx, T, uint64_t, bi, ST_CNZ)                                           \
    static const row_fn rows_##sfx[F_COUNT] = {[F_SUM] = rsum_##sfx, [F_CNZ] = rcnz_##sfx};   \
    static const cols_fn cols_##sfx[F_COUNT] = {[F_SUM] = csum_##sfx, [F_CNZ] = ccnz_##sfx};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
#pragma GCC diagnostic ignored "-Wtype-limits"
TC_FOR_EACH_FLOAT(DEF_FLOAT)
TC_FOR_EACH_INT(DEF_INT)
TC_FOR_EACH_BOOL(DEF_BOOL)
#pragma GCC diagnostic pop

static const row_fn *row_table(int dt)
{
    switch (dt) {
#define ROW_CASE(E, T, sfx)                                                                  \
    case E: return rows_##sfx;
        TC_FOR_EACH_DTYPE(ROW_CASE)
#undef ROW_CASE
    default: return NULL;
    }
}

static const cols_fn *cols_table(int dt)
{
    switch (dt) {
#define COLS_CASE(E, T, sfx)                                                                 \
    case E: return cols_##sfx;
        TC_FOR_EACH_DTYPE(COLS_CASE)
#undef COLS_CASE
    default: return NULL;
    }
}

/* ---- accumulators ------------------------------------------------------------------------ */

static racc identity(int flav)
{
    racc a = {0, 0, -1};
    if (flav == F_PROD) a.d = 1, a.i = 1;
    if (flav == F_AMIN) a.d = INFINITY;
    return a;
}

/* a := a combined with b, b covering later elements than a (ties keep a's position). */
static void combine(int flav, bool fl, racc *a, const racc *b)
{
    switch (flav) {
    case F_PROD:
        a->d *= b->d;
        a->i = (int64_t)((uint64_t)a->i * (uint64_t)b->i);
        break;
    case F_AMAX: a->d = nanmax(a->d, b->d); break;
    case F_AMIN: a->d = nanmin(a->d, b->d); break;
    case F_MAX:
    case F_MIN: {
        if (b->idx < 0) break;
        bool take = a->idx < 0;
        if (!take && fl) take = flav == F_MAX ? BETTER_MAX(b->d, a->d) : BETTER_MIN(b->d, a->d);
        if (!take && !fl) take = flav == F_MAX ? b->i > a->i : b->i < a->i;
        if (take) *a = *b;
        break;
    }
    default:
        a->d += b->d;
        a->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i);
        break;
    }
}

/* ---- the job: op, flavour functions and geometry ----------------------------------------- */

typedef struct job {
    tc_op op;
    int flav, odt;
    bool two_pass, fl, unbiased;
    row_fn row, row_sum; /* row_sum: the mean pass of var/std */
    cols_fn cols, cols_sum;
    double q;  /* norm's p */
    int64_t n; /* elements folded into each output */
    /* kept dims, coalesced, outermost first; byte strides of input, out0, out1 */
    int nk;
    int64_t ksz[TC_MAX_DIMS], kst[3][TC_MAX_DIMS];
    int64_t nout, blk; /* blk: column block width (cols driver) */
    /* reduced dims: one for a dim reduction, the coalesced input for a full one */
    int nr;
    int64_t rsz[TC_MAX_DIMS], rst[TC_MAX_DIMS];
    char *base[3];
} job;

static void put(int dt, char *p, double d, int64_t i)
{
    switch (dt) {
#define PUT_F(E, T, sfx)                                                                     \
    case E: *(T *)p = (T)d; break;
#define PUT_I(E, T, sfx)                                                                     \
    case E: *(T *)p = (T)i; break;
        TC_FOR_EACH_FLOAT(PUT_F)
        TC_FOR_EACH_INT(PUT_I)
        TC_FOR_EACH_BOOL(PUT_I)
#undef PUT_F
#undef PUT_I
    default: break;
    }
}

static void finish(const job *j, const racc *a, char *o0, char *o1)
{
    double d = a->d, n = (double)j->n;
    int64_t i = a->i;
    switch (j->op) {
    case TC_OP_MEAN: d /= n; break; /* n = 0: NaN, as PyTorch */
    case TC_OP_VAR:
    case TC_OP_STD: {
        double den = n - (j->unbiased ? 1 : 0);
        d = den > 0 ? d / den : NAN;
        if (j->op == TC_OP_STD) d = sqrt(d);
        break;
    }
    case TC_OP_NORM:
        if (j->flav == F_CNZ) d = (double)i;
        else if (j->flav == F_SQ) d = sqrt(d);
        else if (j->flav == F_POW) d = pow(d, 1.0 / j->q);
        break;
    case TC_OP_ALL: i = i == j->n; break;
    case TC_OP_ANY: i = i != 0; break;
    default: break;
    }
    put(j->odt, o0, d, i);
    if (o1) *(int64_t *)o1 = a->idx;
}

/* Byte offsets (input, out0, out1) of one output while walking the kept dims in order. */
typedef struct walk {
    int64_t idx[TC_MAX_DIMS];
    int64_t off[3];
} walk;

static void walk_start(const job *j, walk *w, int64_t flat)
{
    w->off[0] = w->off[1] = w->off[2] = 0;
    for (int d = j->nk - 1; d >= 0; d--) {
        w->idx[d] = flat % j->ksz[d];
        flat /= j->ksz[d];
        for (int a = 0; a < 3; a++) w->off[a] += w->idx[d] * j->kst[a][d];
    }
}

static void walk_next(const job *j, walk *w)
{
    for (int d = j->nk - 1; d >= 0; d--) {
        for (int a = 0; a < 3; a++) w->off[a] += j->kst[a][d];
        if (++w->idx[d] < j->ksz[d]) return;
        for (int a = 0; a < 3; a++) w->off[a] -= j->ksz[d] * j->kst[a][d];
        w->idx[d] = 0;
    }
}

static char *out1_at(const job *j, int64_t off) { return j->base[2] ? j->base[2] + off : NULL; }

/* ---- rows: one strided row per output ----------------------------------------------------- */

static racc fold_row(const job *j, const char *p)
{
    int64_t n = j->rsz[0], st = j->rst[0];
    double q = j->q;
    if (j->two_pass) {
        racc s = identity(F_SUM);
        j->row_sum(p, n, st, 0, &s, 0);
        q = s.d / (double)n;
    }
    racc a = identity(j->flav);
    j->row(p, n, st, 0, &a, q);
    return a;
}

static void rows_range(void *ctx, int64_t b, int64_t e)
{
    const job *j = ctx;
    walk w;
    walk_start(j, &w, b);
    for (int64_t o = b; o < e; o++) {
        racc a = fold_row(j, j->base[0] + w.off[0]);
        finish(j, &a, j->base[1] + w.off[1], out1_at(j, w.off[2]));
        walk_next(j, &w);
    }
}

/* ---- cols: rows folded into a block of column accumulators -------------------------------- */

/* Column blocks are as wide as possible (long contiguous row pieces stream best) while
 * leaving a block per thread; the width changes no arithmetic, each column is folded over
 * the rows in order. */
#define BLK_MIN 256
#define BLK_MAX 2048

static int64_t cols_block(int64_t outer, int64_t m)
{
    int64_t nt = tc_get_num_threads(), per = outer >= nt ? m : (m * outer + nt - 1) / nt / outer;
    per = (per + 63) / 64 * 64;
    return per < BLK_MIN ? BLK_MIN : per > BLK_MAX ? BLK_MAX : per;
}

static void cols_range(void *ctx, int64_t b, int64_t e)
{
    const job *j = ctx;
    int in = j->nk - 1;
    int64_t m = j->ksz[in], blk = j->blk, nblk = (m + blk - 1) / blk, rs = j->rst[0];
    double bd[BLK_MAX], cm[BLK_MAX];
    int64_t bi[BLK_MAX], bx[BLK_MAX];
    racc id = identity(j->flav);
    for (int64_t it = b; it < e; it++) {
        int64_t outer = it / nblk, c0 = (it % nblk) * blk, w = m - c0 < blk ? m - c0 : blk;
        int64_t off[3];
        for (int a = 0; a < 3; a++) off[a] = c0 * j->kst[a][in];
        for (int d = in - 1; d >= 0; d--) {
            int64_t ix = outer % j->ksz[d];
            outer /= j->ksz[d];
            for (int a = 0; a < 3; a++) off[a] += ix * j->kst[a][d];
        }
        const char *p = j->base[0] + off[0];
        const double *mean = NULL;
        if (j->two_pass) {
            for (int64_t c = 0; c < w; c++) bd[c] = 0, bi[c] = 0;
            for (int64_t r = 0; r < j->n; r++) j->cols_sum(p + r * rs, w, r, bd, bi, bx, NULL, 0);
            for (int64_t c = 0; c < w; c++) cm[c] = bd[c] / (double)j->n;
            mean = cm;
        }
        for (int64_t c = 0; c < w; c++) bd[c] = id.d, bi[c] = id.i, bx[c] = -1;
        for (int64_t r = 0; r < j->n; r++) j->cols(p + r * rs, w, r, bd, bi, bx, mean, j->q);
        for (int64_t c = 0; c < w; c++) {
            racc a = {bd[c], bi[c], bx[c]};
            finish(j, &a, j->base[1] + off[1] + c * j->kst[1][in], out1_at(j, off[2] + c * j->kst[2][in]));
        }
    }
}

/* ---- split: fixed-size chunks of one output's reduced space, folded in parallel ---------- */

#define SPLIT_CHUNK 16384
#define SPLIT_MAX 256

typedef struct split_job {
    const job *j;
    const char *base;
    row_fn fn;
    int flav;
    double q;
    int64_t total, chunk;
    racc *part;
} split_job;

/* Walks chunks [cb, ce) of the reduced space a row piece at a time (a chunk may start and
 * end mid-row); the piece's flat position is the arg-max base. */
static void split_range(void *ctx, int64_t cb, int64_t ce)
{
    const split_job *s = ctx;
    const job *j = s->j;
    int nd = j->nr, in = nd - 1;
    for (int64_t c = cb; c < ce; c++) {
        racc a = identity(s->flav);
        int64_t b = c * s->chunk, e = b + s->chunk < s->total ? b + s->chunk : s->total;
        int64_t idx[TC_MAX_DIMS], rem = b, off = 0;
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rem % j->rsz[d];
            rem /= j->rsz[d];
            off += idx[d] * j->rst[d];
        }
        for (int64_t pos = b; pos < e;) {
            int64_t len = j->rsz[in] - idx[in];
            if (len > e - pos) len = e - pos;
            s->fn(s->base + off, len, j->rst[in], pos, &a, s->q);
            pos += len;
            off += len * j->rst[in];
            idx[in] += len;
            for (int d = in; d > 0 && idx[d] == j->rsz[d]; d--) {
                idx[d] = 0;
                idx[d - 1]++;
                off += j->rst[d - 1] - j->rsz[d] * j->rst[d];
            }
        }
        s->part[c] = a;
    }
}

static racc split_pass(const job *j, const char *base, row_fn fn, int flav, double q)
{
    racc part[SPLIT_MAX];
    split_job s = {.j = j, .base = base, .fn = fn, .flav = flav, .q = q, .part = part};
    s.total = tc_numel_of(j->nr, j->rsz);
    s.chunk = SPLIT_CHUNK;
    if ((s.total + s.chunk - 1) / s.chunk > SPLIT_MAX) s.chunk = (s.total + SPLIT_MAX - 1) / SPLIT_MAX;
    int64_t nch = (s.total + s.chunk - 1) / s.chunk;
    tc_parallel_for(nch, (TC_PARALLEL_GRAIN + s.chunk - 1) / s.chunk, split_range, &s);
    racc r = identity(flav);
    for (int64_t c = 0; c < nch; c++) combine(flav, j->fl, &r, &part[c]);
    return r;
}

static void split_each(const job *j)
{
    walk w;
    walk_start(j, &w, 0);
    for (int64_t o = 0; o < j->nout; o++) {
        const char *p = j->base[0] + w.off[0];
        double q = j->q;
        if (j->two_pass) q = split_pass(j, p, j->row_sum, F_SUM, 0).d / (double)j->n;
        racc a = split_pass(j, p, j->row, j->flav, q);
        finish(j, &a, j->base[1] + w.off[1], out1_at(j, w.off[2]));
        walk_next(j, &w);
    }
}

/* ---- geometry and the kernel ---------------------------------------------------------------- */

/* Drops size-1 dims and merges neighbours that every one of the narr stride arrays steps
 * through as one (as loops.c does for elementwise operands). */
static int coalesce(int nd, int64_t *sz, int64_t (*st)[TC_MAX_DIMS], int narr)
{
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (sz[d] == 1) continue;
        bool merge = m > 0;
        for (int a = 0; a < narr && merge; a++)
            if (st[a][m - 1] != st[a][d] * sz[d]) merge = false;
        if (merge) {
            sz[m - 1] *= sz[d];
            for (int a = 0; a < narr; a++) st[a][m - 1] = st[a][d];
            continue;
        }
        sz[m] = sz[d];
        for (int a = 0; a < narr; a++) st[a][m] = st[a][d];
        m++;
    }
    return m;
}

static int flavour_of(tc_op op, double p)
{
    switch (op) {
    case TC_OP_PROD: return F_PROD;
    case TC_OP_VAR:
    case TC_OP_STD: return F_SQDEV;
    case TC_OP_MAX: return F_MAX;
    case TC_OP_MIN: return F_MIN;
    case TC_OP_ALL:
    case TC_OP_ANY: return F_CNZ;
    case TC_OP_NORM:
        return p == 0 ? F_CNZ : p == 1 ? F_ABS : p == 2 ? F_SQ : p == INFINITY ? F_AMAX : p == -INFINITY ? F_AMIN : F_POW;
    default: return F_SUM; /* sum, mean */
    }
}

/* Fills j's geometry: a full reduction (nk = 0, the coalesced input as reduced space) or a
 * reduction along dim (kept dims coalesced over input and outputs). */
static void build_geometry(job *j, const tc_tensor *x, tc_tensor *o0, tc_tensor *o1, bool all, int dim)
{
    int64_t es = tc_elsize(x->dtype), oes = tc_elsize(o0->dtype);
    j->base[0] = tc_base(x);
    j->base[1] = tc_base(o0);
    j->base[2] = o1 ? tc_base(o1) : NULL;
    if (all) {
        /* Every element goes into one fold, so the walk may follow memory order: dims
         * sorted by decreasing stride turn a transposed or permuted tensor back into one
         * contiguous run. */
        int64_t st[1][TC_MAX_DIMS] = {{0}};
        j->nk = 0;
        j->nout = 1;
        j->n = tc_tensor_numel(x);
        for (int d = 0; d < x->ndim; d++) {
            int at = d;
            for (; at > 0 && st[0][at - 1] < x->stride[d] * es; at--) j->rsz[at] = j->rsz[at - 1], st[0][at] = st[0][at - 1];
            j->rsz[at] = x->size[d], st[0][at] = x->stride[d] * es;
        }
        j->nr = coalesce(x->ndim, j->rsz, st, 1);
        memcpy(j->rst, st[0], sizeof st[0]);
        if (j->nr == 0) j->nr = 1, j->rsz[0] = j->n, j->rst[0] = 0;
        return;
    }
    bool keep = o0->ndim == x->ndim;
    int nk = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) continue;
        int od = keep || d < dim ? d : d - 1;
        j->ksz[nk] = x->size[d];
        j->kst[0][nk] = x->stride[d] * es;
        j->kst[1][nk] = o0->stride[od] * oes;
        j->kst[2][nk] = o1 ? o1->stride[od] * (int64_t)sizeof(int64_t) : 0;
        nk++;
    }
    j->nout = tc_numel_of(nk, j->ksz);
    j->nk = coalesce(nk, j->ksz, j->kst, 3);
    j->nr = 1;
    j->n = j->rsz[0] = x->size[dim];
    j->rst[0] = x->stride[dim] * es;
}

tc_status tc_cpu_reduce(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_reduce);
    const tc_tensor *x = k->in[0];
    int64_t dim = k->p->i[0];
    bool all = dim == -1 || x->ndim == 0;
    job j = {.op = k->op, .odt = k->out[0]->dtype, .fl = tc_dtype_is_float((tc_dtype)x->dtype),
             .unbiased = k->p->i[2] != 0, .q = k->p->s[0]};
    j.two_pass = k->op == TC_OP_VAR || k->op == TC_OP_STD;
    j.flav = flavour_of(k->op, j.q);
    if (j.flav == F_MAX || j.flav == F_MIN) j.q = all; /* a full max wants no position */
    const row_fn *rt = row_table(x->dtype);
    const cols_fn *ct = cols_table(x->dtype);
    j.row = rt ? rt[j.flav] : NULL;
    if (!j.row)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: no CPU kernel for %s", k->info->name,
                            tc_dtype_name((tc_dtype)x->dtype));
    j.cols = ct[j.flav];
    j.row_sum = rt[F_SUM];
    j.cols_sum = ct[F_SUM];
    build_geometry(&j, x, k->out[0], k->nout > 1 ? k->out[1] : NULL, all, all ? 0 : (int)(dim < -1 ? dim + x->ndim : dim));

    if (all) {
        split_each(&j);
        return TC_OK;
    }
    if (j.nout == 0) return TC_OK;
    int64_t es = tc_elsize(x->dtype);
    int in = j.nk - 1;
    if (j.nk > 0 && j.kst[0][in] == es && j.rst[0] != es && j.ksz[in] >= 4) {
        int64_t m = j.ksz[in], outer = j.nout / m;
        j.blk = cols_block(outer, m);
        int64_t nblk = (m + j.blk - 1) / j.blk, work = j.n * (m < j.blk ? m : j.blk) + 1;
        tc_parallel_for(outer * nblk, TC_PARALLEL_GRAIN / work + 1, cols_range, &j);
    } else if (j.nout < 16 && j.n >= 2 * TC_PARALLEL_GRAIN) {
        split_each(&j);
    } else {
        tc_parallel_for(j.nout, TC_PARALLEL_GRAIN / (j.n + 1) + 1, rows_range, &j);
    }
    return TC_OK;
}
