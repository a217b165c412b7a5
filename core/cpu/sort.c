/* sort.c -- CPU kernels of the sort kind: sort, topk, kthvalue, median, mode.
 *
 * Each op works one row (the elements along dim) at a time: the row is loaded as
 * (value, index) pairs and ordered. The order is total: NaN ranks above every number (as
 * PyTorch), and equal values keep their original order (ties go to the lower index), so
 * sorting is stable in both directions and every result is deterministic. sort and mode
 * merge-sort the row; topk, kthvalue and median quickselect (O(n)) and sort at most the k
 * chosen pairs -- under the same total order, the answer a full sort would give. topk always
 * returns its k values in order (its "sorted" flag only permits any order). The pair type,
 * comparators and row loop are instantiated once per dtype from one macro; f16/bf16 go
 * through f32 (tc_cpu_with_f32), which orders them exactly.
 *
 * Rows run in parallel in blocks; each block's scratch is allocated before any result is
 * written, so the kernel cannot fail half-way.
 */
#include "../internal.h"
#include <stdlib.h>

typedef struct sjob {
    tc_op op;
    bool desc;      /* sort: descending; topk: largest */
    int64_t k;      /* topk: how many; kthvalue: rank from 1 */
    int nd, dim;    /* over x's dims (a 0-dim x is looped as (1)) */
    int64_t size[TC_MAX_DIMS];
    int64_t xst[TC_MAX_DIMS], vst[TC_MAX_DIMS], ist[TC_MAX_DIMS]; /* bytes; 0 along a dropped dim */
    char *x, *v, *ix;
    int64_t n, rows, nblocks;
    char *scratch;
    size_t per_block;
    void (*rows_fn)(const struct sjob *j, int64_t r0, int64_t r1, char *scratch);
} sjob;

/* Byte offsets of row r's first element in x, values and indices. */
static void row_offsets(const sjob *j, int64_t r, int64_t *xo, int64_t *vo, int64_t *io)
{
    *xo = *vo = *io = 0;
    for (int d = j->nd - 1; d >= 0; d--) {
        if (d == j->dim) continue;
        int64_t c = r % j->size[d];
        r /= j->size[d];
        *xo += c * j->xst[d];
        *vo += c * j->vst[d];
        *io += c * j->ist[d];
    }
}

/* NOTE: v != v is NaN for floats and always false for integers (the compiler drops it). */
#define SORT_NAN(x) ((x) != (x))

/* A merge sort over pairs, stable; runs of 16 start by insertion sort. */
#define MSORT_DEF(sfx, name, BEFORE)                                                        \
    static void name(pair_##sfx *a, pair_##sfx *tmp, int64_t n)                             \
    {                                                                                       \
        enum { RUN = 16 };                                                                  \
        for (int64_t lo = 0; lo < n; lo += RUN) {                                           \
            int64_t hi = lo + RUN < n ? lo + RUN : n;                                       \
            for (int64_t i = lo + 1; i < hi; i++) {                                         \
                pair_##sfx x = a[i];                                                        \
                int64_t q = i;                                                              \
                for (; q > lo && BEFORE(&x, &a[q - 1]); q--) a[q] = a[q - 1];               \
                a[q] = x;                                                                   \
            }                                                                               \
        }                                                                                   \
        pair_##sfx *src = a, *dst = tmp;                                                    \
        for (int64_t w = RUN; w < n; w *= 2) {                                              \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                     \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n; \
                int64_t i = lo, q = mid, o = lo;                                            \
                while (i < mid && q < hi) dst[o++] = BEFORE(&src[q], &src[i]) ? src[q++] : src[i++]; \
                while (i < mid) dst[o++] = src[i++];                                        \
                while (q < hi) dst[o++] = src[q++];                                         \
            }                                                                               \
            pair_##sfx *t = src;                                                            \
            src = dst, dst = t;                                                             \
        }                                                                                   \
        if (src != a) memcpy(a, src, sizeof *a * (size_t)n);                                \
    }

/* Quickselect: puts the pair of rank kth at a[kth], those ranking before it in front and
 * the rest behind (in no order). Pairs are all distinct (ties go by index), so Hoare's
 * partition around a median-of-three splits cleanly; after ~2 log2(n) rounds without
 * converging it sorts what is left, which bounds the worst case at n log n. */
#define SELECT_DEF(sfx, name, BEFORE, SORT)                                                 \
    static void name(pair_##sfx *a, pair_##sfx *tmp, int64_t n, int64_t kth)                \
    {                                                                                       \
        int64_t lo = 0, hi = n - 1, budget = 8;                                             \
        for (int64_t m = n; m > 1; m /= 2) budget += 2;                                     \
        while (hi > lo) {                                                                   \
            if (budget-- == 0) {                                                            \
                SORT(a + lo, tmp, hi - lo + 1);                                             \
                return;                                                                     \
            }                                                                               \
            int64_t mid = lo + (hi - lo) / 2;                                               \
            pair_##sfx t;                                                                   \
            if (BEFORE(&a[mid], &a[lo])) t = a[mid], a[mid] = a[lo], a[lo] = t;             \
            if (BEFORE(&a[hi], &a[lo])) t = a[hi], a[hi] = a[lo], a[lo] = t;                \
            if (BEFORE(&a[hi], &a[mid])) t = a[hi], a[hi] = a[mid], a[mid] = t;             \
            pair_##sfx pivot = a[mid];                                                      \
            int64_t i = lo, q = hi;                                                         \
            while (i <= q) {                                                                \
                while (BEFORE(&a[i], &pivot)) i++;                                          \
                while (BEFORE(&pivot, &a[q])) q--;                                          \
                if (i <= q) {                                                               \
                    t = a[i], a[i] = a[q], a[q] = t;                                        \
                    i++, q--;                                                               \
                }                                                                           \
            }                                                                               \
            if (kth <= q) hi = q;                                                           \
            else if (kth >= i) lo = i;                                                      \
            else return;                                                                    \
        }                                                                                   \
    }

#define SORT_DEF(E, T, sfx)                                                                 \
    typedef struct pair_##sfx {                                                             \
        T v;                                                                                \
        int64_t i;                                                                          \
    } pair_##sfx;                                                                           \
    /* a ranks before b in ascending order: smaller, numbers before NaN, then lower index */ \
    static inline bool asc_##sfx(const pair_##sfx *a, const pair_##sfx *b)                  \
    {                                                                                       \
        if (a->v < b->v) return true;                                                       \
        if (b->v < a->v) return false;                                                      \
        bool an = SORT_NAN(a->v), bn = SORT_NAN(b->v);                                      \
        return an != bn ? bn : a->i < b->i;                                                 \
    }                                                                                       \
    static inline bool desc_##sfx(const pair_##sfx *a, const pair_##sfx *b)                 \
    {                                                                                       \
        if (a->v > b->v) return true;                                                       \
        if (b->v > a->v) return false;                                                      \
        bool an = SORT_NAN(a->v), bn = SORT_NAN(b->v);                                      \
        return an != bn ? an : a->i < b->i;                                                 \
    }                                                                                       \
    MSORT_DEF(sfx, sort_asc_##sfx, asc_##sfx)                                               \
    MSORT_DEF(sfx, sort_desc_##sfx, desc_##sfx)                                             \
    SELECT_DEF(sfx, select_asc_##sfx, asc_##sfx, sort_asc_##sfx)                            \
    SELECT_DEF(sfx, select_desc_##sfx, desc_##sfx, sort_desc_##sfx)                         \
    static void rows_##sfx(const sjob *j, int64_t r0, int64_t r1, char *scratch)            \
    {                                                                                       \
        pair_##sfx *a = (pair_##sfx *)scratch, *tmp = a + j->n;                             \
        int64_t n = j->n, xs = j->xst[j->dim], vs = j->vst[j->dim], is = j->ist[j->dim];    \
        for (int64_t r = r0; r < r1; r++) {                                                 \
            int64_t xo, vo, io, first_nan = -1;                                             \
            row_offsets(j, r, &xo, &vo, &io);                                               \
            const char *xp = j->x + xo;                                                     \
            char *vp = j->v + vo, *ip = j->ix + io;                                         \
            for (int64_t i = 0; i < n; i++) {                                               \
                a[i].v = *(const T *)(xp + i * xs);                                         \
                a[i].i = i;                                                                 \
                if (first_nan < 0 && SORT_NAN(a[i].v)) first_nan = i;                       \
            }                                                                               \
            int64_t first = 0, count = 1; /* the pairs to write */                          \
            switch (j->op) {                                                                \
            case TC_OP_SORT:                                                                \
                if (j->desc) sort_desc_##sfx(a, tmp, n);                                    \
                else sort_asc_##sfx(a, tmp, n);                                             \
                count = n;                                                                  \
                break;                                                                      \
            case TC_OP_TOPK: /* the k best to the front, then only they are sorted */       \
                count = j->k;                                                               \
                if (count == 0) break;                                                      \
                if (j->desc) {                                                              \
                    if (count < n) select_desc_##sfx(a, tmp, n, count - 1);                 \
                    sort_desc_##sfx(a, tmp, count);                                         \
                } else {                                                                    \
                    if (count < n) select_asc_##sfx(a, tmp, n, count - 1);                  \
                    sort_asc_##sfx(a, tmp, count);                                          \
                }                                                                           \
                break;                                                                      \
            case TC_OP_KTHVALUE:                                                            \
                first = j->k - 1;                                                           \
                select_asc_##sfx(a, tmp, n, first);                                         \
                break;                                                                      \
            case TC_OP_MEDIAN: /* the lower middle; a NaN anywhere is the median (PyTorch) */ \
                if (first_nan >= 0) {                                                       \
                    a[0] = a[first_nan]; /* still in load order */                       \
                    break;                                                                  \
                }                                                                           \
                first = (n - 1) / 2;                                                        \
                select_asc_##sfx(a, tmp, n, first);                                         \
                break;                                                                      \
            default: { /* mode: the longest run of equal values, the smallest on ties; the \
                        * run's last pair is the value's last occurrence */                 \
                sort_asc_##sfx(a, tmp, n);                                                  \
                int64_t len = 0, best = 0;                                                  \
                for (int64_t i = 0, run = 1; i < n; i++, run++) {                           \
                    if (i + 1 < n && a[i].v == a[i + 1].v) continue;                        \
                    if (run > len) len = run, best = i;                                     \
                    run = 0;                                                                \
                }                                                                           \
                first = best;                                                               \
            }                                                                               \
            }                                                                               \
            for (int64_t q = 0; q < count; q++) {                                           \
                *(T *)(vp + q * vs) = a[first + q].v;                                       \
                *(int64_t *)(ip + q * is) = a[first + q].i;                                 \
            }                                                                               \
        }                                                                                   \
    }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
#pragma GCC diagnostic ignored "-Wfloat-equal"
TC_FOR_EACH_FLOAT(SORT_DEF)
TC_FOR_EACH_INT(SORT_DEF)
#pragma GCC diagnostic pop

typedef void (*rows_fn)(const sjob *j, int64_t r0, int64_t r1, char *scratch);
#define ROWS_ENTRY(E, T, sfx) [E] = rows_##sfx,
static const rows_fn rows_fns[TC_DTYPE_COUNT] = {TC_FOR_EACH_FLOAT(ROWS_ENTRY) TC_FOR_EACH_INT(ROWS_ENTRY)};

static void blocks_range(void *ctx, int64_t b0, int64_t b1)
{
    const sjob *j = ctx;
    for (int64_t b = b0; b < b1; b++)
        j->rows_fn(j, b * j->rows / j->nblocks, (b + 1) * j->rows / j->nblocks, j->scratch + (size_t)b * j->per_block);
}

/* Byte strides of an output over x's nd dims: its own, or 0 at dim where dim was dropped. */
static void out_strides(const tc_tensor *o, int nd, int dim, int64_t *st)
{
    int64_t es = tc_elsize(o->dtype);
    for (int d = 0, od = 0; d < nd; d++) {
        if (o->ndim == nd) st[d] = o->stride[d] * es;
        else st[d] = d == dim ? 0 : o->stride[od++] * es;
    }
}

static tc_status sort_kernel(const tc_kcall *k)
{
    const tc_tensor *x = k->in[0];
    tc_tensor *vals = k->out[0], *idx = k->out[1], *copy = NULL;
    if (tc_tensor_numel(vals) == 0 || tc_tensor_numel(x) == 0) return TC_OK;
    /* A result sharing x's memory would overwrite rows still to be read: read a copy. */
    if (tc_tensor_overlaps(vals, x) || tc_tensor_overlaps(idx, x)) {
        TRY(tc_tensor_alloc((tc_dtype)x->dtype, x->ndim, x->size, &copy));
        tc_tensor *o[1] = {copy};
        const tc_tensor *i[1] = {x};
        static const tc_params keep = {.i = {-1}};
        tc_kcall c = {.op = TC_OP_COPY, .info = tc_op_info(TC_OP_COPY), .in = i, .nin = 1, .p = &keep, .out = o, .nout = 1};
        tc_status s = tc_cpu_convert(&c);
        if (s) {
            tc_tensor_release(copy);
            return s;
        }
        x = copy;
    }
    const tc_params *p = k->p;
    sjob j = {.op = k->op, .rows_fn = rows_fns[x->dtype]};
    j.nd = x->ndim > 0 ? x->ndim : 1;
    j.dim = (int)(p->i[0] < 0 ? p->i[0] + j.nd : p->i[0]);
    int64_t xes = tc_elsize(x->dtype);
    for (int d = 0; d < j.nd; d++) {
        j.size[d] = x->ndim ? x->size[d] : 1;
        j.xst[d] = x->ndim ? x->stride[d] * xes : 0;
    }
    out_strides(vals, j.nd, j.dim, j.vst);
    out_strides(idx, j.nd, j.dim, j.ist);
    j.x = tc_base(x), j.v = tc_base(vals), j.ix = tc_base(idx);
    j.n = j.size[j.dim];
    j.rows = tc_numel_of(j.nd, j.size) / j.n;
    if (k->op == TC_OP_SORT) j.desc = p->i[1] != 0;
    if (k->op == TC_OP_TOPK) j.desc = p->i[2] != 0, j.k = x->ndim ? p->i[1] : 1; /* 0-dim: PyTorch */
    if (k->op == TC_OP_KTHVALUE) j.k = p->i[1];
    int64_t nt = tc_get_num_threads(), nb = j.rows * j.n / TC_PARALLEL_GRAIN;
    if (nb > nt) nb = nt;
    if (nb > j.rows) nb = j.rows;
    j.nblocks = nb > 1 ? nb : 1;
    j.per_block = 2 * (size_t)j.n * 16; /* two rows of pairs; a pair is at most 16 bytes */
    tc_status s = TC_OK;
    j.scratch = tc_malloc(j.per_block * (size_t)j.nblocks, k->info->name);
    if (!j.scratch) {
        s = TC_ERR_MEMORY;
    } else {
        tc_parallel_for(j.nblocks, 1, blocks_range, &j);
        free(j.scratch);
    }
    tc_tensor_release(copy);
    return s;
}

tc_status tc_cpu_sort(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, sort_kernel);
    return sort_kernel(k);
}
