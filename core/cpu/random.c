/* cpu/random.c -- CPU kernels of the random kind (uniform normal bernoulli random
 * exponential cauchy log_normal geometric randperm multinomial).
 *
 * Reproducibility: every number is a pure function of (seed, counter slot) -- see
 * core/philox.h -- and element i of the result (its row-major index, whatever the strides)
 * always maps to the same slot. Elementwise samplers therefore run split across the thread
 * pool and still give the same tensor for a seed whatever the thread count. Two elements
 * share one Philox block (elements 2s and 2s+1 take words 0-1 and 2-3 of slot base + s),
 * so an op on n elements uses ceil(n/2) slots. randperm (Fisher-Yates) and multinomial
 * without replacement are sequential per row but use one slot per step, so they too are
 * independent of scheduling.
 *
 * Failure: scratch memory is allocated before the generator's counter is advanced, so a
 * failed call leaves the generator unchanged. Parameters were checked in shape_random.c.
 */
#include "../internal.h"
#include "../philox.h"
#include <math.h>
#include <stdlib.h>

#define BLOCK 256     /* elements generated per inner batch (stack buffers) */
#define RAND_GRAIN 8192 /* a Philox block costs ~20 multiplies: parallelise sooner than ew */
#define TWO_PI 6.283185307179586

/* ---- strided walk from any row-major position ---------------------------------------- */

typedef struct cursor {
    int nd;
    int64_t size[TC_MAX_DIMS], sb[TC_MAX_DIMS], idx[TC_MAX_DIMS];
    char *p;
} cursor;

/* Positions c at row-major element `at` of the geometry (sizes, element strides). */
static void cursor_init(cursor *c, char *base, int nd, const int64_t *size, const int64_t *stride, int64_t es,
                        int64_t at)
{
    c->nd = nd;
    c->p = base;
    for (int d = nd - 1; d >= 0; d--) {
        c->size[d] = size[d];
        c->sb[d] = stride[d] * es;
        c->idx[d] = size[d] > 0 ? at % size[d] : 0;
        at = size[d] > 0 ? at / size[d] : 0;
        c->p += c->idx[d] * c->sb[d];
    }
}

static inline void cursor_next(cursor *c)
{
    for (int d = c->nd - 1; d >= 0; d--) {
        if (++c->idx[d] < c->size[d]) {
            c->p += c->sb[d];
            return;
        }
        c->p -= (c->size[d] - 1) * c->sb[d];
        c->idx[d] = 0;
    }
}

/* The output's geometry, collapsed to one dim when contiguous (the common case). */
static void out_cursor(cursor *c, const tc_tensor *t, int64_t at)
{
    int64_t n = tc_tensor_numel(t), one = 1;
    if (tc_tensor_is_contiguous(t)) cursor_init(c, tc_base(t), 1, &n, &one, tc_elsize(t->dtype), at);
    else cursor_init(c, tc_base(t), t->ndim, t->size, t->stride, tc_elsize(t->dtype), at);
}

/* ---- per-call context ---------------------------------------------------------------- */

typedef struct rctx {
    tc_op op;
    const tc_tensor *out;
    uint64_t seed, base;
    double s0, s1;
    double log1mp;  /* geometric: log(1 - p) */
    int64_t lo;     /* random: the smallest value */
    uint64_t span;  /* random: values are lo + [0, span] */
    const tc_tensor *prob; /* bernoulli: per-element probabilities, or NULL */
    bool prob_flat;        /* read prob in its own row-major order (same numel, other shape) */
    int64_t prob_stride[TC_MAX_DIMS];
} rctx;

/* Uniforms in [0, 1) for elements [b, b + n): two per slot. */
static void uniforms(const rctx *c, int64_t b, int64_t n, double *u)
{
    int64_t i = b, e = b + n;
    while (i < e) {
        tc_philox_block k = tc_philox_at(c->seed, c->base + (uint64_t)i / 2, 0);
        if ((i & 1) == 0) {
            u[i - b] = tc_philox_u53(k.w[0], k.w[1]);
            if (i + 1 < e) u[i + 1 - b] = tc_philox_u53(k.w[2], k.w[3]);
            i += 2;
        } else {
            u[i - b] = tc_philox_u53(k.w[2], k.w[3]);
            i++;
        }
    }
}

/* Standard normals for elements [b, b + n): Box-Muller on one block per pair, element 2s
 * taking r cos(theta) and 2s+1 r sin(theta). */
static void normals(const rctx *c, int64_t b, int64_t n, double *z)
{
    int64_t i = b, e = b + n;
    while (i < e) {
        tc_philox_block k = tc_philox_at(c->seed, c->base + (uint64_t)i / 2, 0);
        double u1 = tc_philox_u53(k.w[0], k.w[1]), u2 = tc_philox_u53(k.w[2], k.w[3]);
        double r = sqrt(-2.0 * log1p(-u1)), th = TWO_PI * u2;
        if ((i & 1) == 0) {
            z[i - b] = r * cos(th);
            if (i + 1 < e) z[i + 1 - b] = r * sin(th);
            i += 2;
        } else {
            z[i - b] = r * sin(th);
            i++;
        }
    }
}

/* Unbiased integer in [0, span] from a 64-bit word: x mod r is kept only when x is at or
 * above 2^64 mod r; otherwise the next draw of the same slot (same half) is tried. The
 * rejection chance is below r / 2^64. */
static uint64_t bounded(uint64_t seed, uint64_t slot, int half, uint64_t x, uint64_t span)
{
    if (span == UINT64_MAX) return x;
    uint64_t r = span + 1;
    if ((r & span) == 0) return x & span;
    uint64_t threshold = (0 - r) % r;
    for (uint64_t draw = 1; x < threshold; draw++) {
        tc_philox_block k = tc_philox_at(seed, slot, draw);
        x = tc_philox_u64(k.w[2 * half], k.w[2 * half + 1]);
    }
    return x % r;
}

static void random_ints(const rctx *c, int64_t b, int64_t n, int64_t *v)
{
    for (int64_t i = b; i < b + n; i++) {
        uint64_t slot = c->base + (uint64_t)i / 2;
        int half = (int)(i & 1);
        tc_philox_block k = tc_philox_at(c->seed, slot, 0);
        uint64_t x = bounded(c->seed, slot, half, tc_philox_u64(k.w[2 * half], k.w[2 * half + 1]), c->span);
        v[i - b] = (int64_t)((uint64_t)c->lo + x);
    }
}

/* ---- stores ------------------------------------------------------------------------- */

/* Largest value of the dtype strictly below ub (uniform's open upper end: a + (b-a) u can
 * round up to b once converted). Halves step their bit pattern toward -inf. */
static float below_f32(double ub)
{
    float f = (float)ub;
    while ((double)f >= ub) f = nextafterf(f, -INFINITY);
    return f;
}

static uint16_t half_down(uint16_t h) { return (h & 0x8000) ? (uint16_t)(h + 1) : (h ? (uint16_t)(h - 1) : 0x8001); }

static void store_doubles(cursor *oc, int dt, const double *v, int64_t n, bool open_top, double ub)
{
    switch (dt) {
    case TC_F64:
        for (int64_t i = 0; i < n; i++, cursor_next(oc)) {
            double x = v[i];
            if (open_top && x >= ub) x = nextafter(ub, -INFINITY);
            *(double *)oc->p = x;
        }
        break;
    case TC_F32:
        for (int64_t i = 0; i < n; i++, cursor_next(oc)) {
            float x = (float)v[i];
            if (open_top && (double)x >= ub) x = below_f32(ub);
            *(float *)oc->p = x;
        }
        break;
    case TC_F16:
    case TC_BF16:
        for (int64_t i = 0; i < n; i++, cursor_next(oc)) {
            float f = (float)v[i];
            uint16_t h = dt == TC_F16 ? tc_f32_to_f16(f) : tc_f32_to_bf16(f);
            while (open_top && (double)(dt == TC_F16 ? tc_f16_to_f32(h) : tc_bf16_to_f32(h)) >= ub)
                h = half_down(h);
            *(uint16_t *)oc->p = h;
        }
        break;
    default: /* integer and bool results (bernoulli, geometric): saturating conversion */
        for (int64_t i = 0; i < n; i++, cursor_next(oc)) tc_store_double(dt, oc->p, v[i]);
        break;
    }
}

/* random's values fit the dtype (checked in prepare); i64 goes in without a double. */
static void store_ints(cursor *oc, int dt, const int64_t *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++, cursor_next(oc)) {
        switch (dt) {
        case TC_U8: *(uint8_t *)oc->p = (uint8_t)v[i]; break;
        case TC_I8: *(int8_t *)oc->p = (int8_t)v[i]; break;
        case TC_I16: *(int16_t *)oc->p = (int16_t)v[i]; break;
        case TC_I32: *(int32_t *)oc->p = (int32_t)v[i]; break;
        case TC_I64: *(int64_t *)oc->p = v[i]; break;
        default: tc_store_double(dt, oc->p, (double)v[i]); break;
        }
    }
}

/* ---- the elementwise samplers: one chunk [begin, end) of row-major elements ---------- */

static void fill_range(void *vc, int64_t begin, int64_t end)
{
    const rctx *c = vc;
    const tc_tensor *out = c->out;
    double v[BLOCK];
    int64_t iv[BLOCK];
    cursor oc, pc = {0};
    out_cursor(&oc, out, begin);
    if (c->prob) {
        const tc_tensor *p = c->prob;
        if (c->prob_flat) cursor_init(&pc, tc_base(p), p->ndim, p->size, p->stride, tc_elsize(p->dtype), begin);
        else cursor_init(&pc, tc_base(p), out->ndim, out->size, c->prob_stride, tc_elsize(p->dtype), begin);
    }
    for (int64_t b = begin; b < end; b += BLOCK) {
        int64_t n = end - b < BLOCK ? end - b : BLOCK;
        switch (c->op) {
        case TC_OP_RANDOM:
            random_ints(c, b, n, iv);
            store_ints(&oc, out->dtype, iv, n);
            continue;
        case TC_OP_NORMAL:
            normals(c, b, n, v);
            for (int64_t i = 0; i < n; i++) v[i] = c->s0 + c->s1 * v[i];
            break;
        case TC_OP_LOG_NORMAL:
            normals(c, b, n, v);
            for (int64_t i = 0; i < n; i++) v[i] = exp(c->s0 + c->s1 * v[i]);
            break;
        case TC_OP_UNIFORM:
            uniforms(c, b, n, v);
            for (int64_t i = 0; i < n; i++) v[i] = c->s0 + (c->s1 - c->s0) * v[i];
            break;
        case TC_OP_EXPONENTIAL: /* 1 - u is in (0, 1]: the log is finite */
            uniforms(c, b, n, v);
            for (int64_t i = 0; i < n; i++) v[i] = -log1p(-v[i]) / c->s0;
            break;
        case TC_OP_CAUCHY:
            uniforms(c, b, n, v);
            for (int64_t i = 0; i < n; i++) v[i] = c->s0 + c->s1 * tan(M_PI * (v[i] - 0.5));
            break;
        case TC_OP_GEOMETRIC: /* trials up to the first success: P(X > k) = (1-p)^k */
            uniforms(c, b, n, v);
            for (int64_t i = 0; i < n; i++) {
                double k = ceil(log1p(-v[i]) / c->log1mp);
                v[i] = k >= 1 ? k : 1;
            }
            break;
        case TC_OP_BERNOULLI:
            uniforms(c, b, n, v);
            if (c->prob) {
                for (int64_t i = 0; i < n; i++, cursor_next(&pc))
                    v[i] = v[i] < tc_load_as_double(c->prob->dtype, pc.p) ? 1.0 : 0.0;
            } else {
                for (int64_t i = 0; i < n; i++) v[i] = v[i] < c->s0 ? 1.0 : 0.0;
            }
            break;
        default: return;
        }
        store_doubles(&oc, out->dtype, v, n, c->op == TC_OP_UNIFORM && c->s0 < c->s1, c->s1);
    }
}

/* The full non-negative range of random() without bounds: [0, max] for integers, every
 * integer a float holds exactly, [0, 2^digits], for floats (as Torch7 and PyTorch). */
static uint64_t full_span(int dt)
{
    switch (dt) {
    case TC_U8: return 255;
    case TC_I8: return 127;
    case TC_I16: return 32767;
    case TC_I32: return 2147483647;
    case TC_I64: return INT64_MAX;
    case TC_F32: return 1ull << 24;
    case TC_F16: return 1ull << 11;
    case TC_BF16: return 1ull << 8;
    default: return 1ull << 53;
    }
}

static tc_status run_elementwise(const tc_kcall *k, tc_generator *gen)
{
    const tc_tensor *out = k->out[0];
    rctx c = {.op = k->op, .out = out, .s0 = k->p->s[0], .s1 = k->p->s[1]};
    if (k->op == TC_OP_GEOMETRIC) c.log1mp = log1p(-c.s0);
    if (k->op == TC_OP_RANDOM) {
        if (c.s1 > c.s0) { /* [s0, s1), both exact integers within the dtype (prepare) */
            int64_t hi = c.s1 >= 9223372036854775808.0 ? INT64_MAX : (int64_t)c.s1 - 1;
            c.lo = (int64_t)c.s0;
            c.span = (uint64_t)hi - (uint64_t)c.lo;
        } else {
            c.lo = 0;
            c.span = full_span(out->dtype);
        }
    }
    if (k->op == TC_OP_BERNOULLI && k->nin > 0 && k->in[0]) {
        const tc_tensor *p = k->in[0];
        c.prob = p;
        const tc_tensor *pair[2] = {out, p};
        int nd;
        int64_t sz[TC_MAX_DIMS];
        c.prob_flat = !(tc_broadcast_shapes(NULL, pair, 2, &nd, sz) == TC_OK && nd == out->ndim &&
                        (nd == 0 || memcmp(sz, out->size, sizeof(int64_t) * (size_t)nd) == 0));
        if (!c.prob_flat) tc_broadcast_strides(p, out->ndim, out->size, c.prob_stride);
    }
    int64_t n = tc_tensor_numel(out);
    if (n == 0) return TC_OK;
    c.base = tc_generator_reserve(gen, ((uint64_t)n + 1) / 2, &c.seed);
    tc_parallel_for(n, RAND_GRAIN, fill_range, &c);
    return TC_OK;
}

/* ---- randperm: Fisher-Yates, step i drawing from slot base + i --------------------- */

static tc_status run_randperm(const tc_kcall *k, tc_generator *gen)
{
    tc_tensor *out = k->out[0];
    int64_t n = tc_tensor_numel(out);
    if (n == 0) return TC_OK;
    bool direct = out->dtype == TC_I64 && tc_tensor_is_contiguous(out);
    int64_t *perm = direct ? (int64_t *)tc_base(out) : tc_malloc((size_t)n * sizeof *perm, "randperm");
    if (!perm) return TC_ERR_MEMORY;
    uint64_t seed, base = tc_generator_reserve(gen, (uint64_t)n, &seed);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        tc_philox_block b = tc_philox_at(seed, base + (uint64_t)i, 0);
        int64_t j = (int64_t)bounded(seed, base + (uint64_t)i, 0, tc_philox_u64(b.w[0], b.w[1]), (uint64_t)i);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    if (!direct) {
        cursor oc;
        out_cursor(&oc, out, 0);
        store_ints(&oc, out->dtype, perm, n);
        free(perm);
    }
    return TC_OK;
}

/* ---- multinomial ---------------------------------------------------------------------- */

typedef struct mctx {
    const double *cdf; /* one row, normalised, last entry exactly 1 */
    int64_t ncat, row, samples;
    uint64_t seed, base;
    int64_t *dst;      /* row r of the result: dst[s * dstride] */
    int64_t dstride;
} mctx;

/* With replacement: sample s of row r uses slot base + r * samples + s; the category is
 * the first j with cdf[j] > u, which never lands on a zero-probability category. */
static void draw_range(void *vm, int64_t begin, int64_t end)
{
    const mctx *m = vm;
    for (int64_t s = begin; s < end; s++) {
        tc_philox_block b = tc_philox_at(m->seed, m->base + (uint64_t)(m->row * m->samples + s), 0);
        double u = tc_philox_u53(b.w[0], b.w[1]);
        int64_t lo = 0, hi = m->ncat - 1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (m->cdf[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        m->dst[s * m->dstride] = lo;
    }
}

typedef struct keyed {
    double key;
    int64_t idx;
} keyed;

static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static tc_status run_multinomial(const tc_kcall *k, tc_generator *gen)
{
    const tc_tensor *p = k->in[0];
    tc_tensor *out = k->out[0];
    int64_t rows = p->ndim == 2 ? p->size[0] : 1, ncat = p->size[p->ndim - 1];
    int64_t samples = k->p->i[0];
    bool repl = k->p->i[1] != 0;
    int64_t es = tc_elsize(p->dtype), rs = p->ndim == 2 ? p->stride[0] : 0, cs = p->stride[p->ndim - 1];
    int64_t ors = out->ndim == 2 ? out->stride[0] : 0, ocs = out->stride[out->ndim - 1];
    const char *pb = tc_base(p);
    int64_t *ob = (int64_t *)tc_base(out);
    void *scratch = tc_malloc((size_t)ncat * (repl ? sizeof(double) : sizeof(keyed)), "multinomial");
    if (!scratch) return TC_ERR_MEMORY;
    uint64_t seed, base = tc_generator_reserve(gen, (uint64_t)(rows * (repl ? samples : ncat)), &seed);
    for (int64_t r = 0; r < rows; r++) {
        const char *row = pb + r * rs * es;
        if (repl) {
            double *cdf = scratch, sum = 0;
            for (int64_t j = 0; j < ncat; j++) cdf[j] = sum += tc_load_as_double(p->dtype, row + j * cs * es);
            for (int64_t j = 0; j < ncat; j++) cdf[j] /= sum;
            cdf[ncat - 1] = 1.0;
            mctx m = {cdf, ncat, r, samples, seed, base, ob + r * ors, ocs};
            tc_parallel_for(samples, RAND_GRAIN, draw_range, &m);
        } else {
            /* Exponential race (Efraimidis-Spirakis): category j arrives at E_j / w_j with
             * E_j ~ Exp(1); the arrival order is sequential sampling without replacement
             * in proportion to w. Zero weights never arrive (prepare checked there are
             * enough non-zero ones). */
            keyed *kv = scratch;
            for (int64_t j = 0; j < ncat; j++) {
                double w = tc_load_as_double(p->dtype, row + j * cs * es);
                tc_philox_block b = tc_philox_at(seed, base + (uint64_t)(r * ncat + j), 0);
                double e = -log1p(-tc_philox_u53(b.w[0], b.w[1]));
                kv[j].key = w > 0 ? e / w : INFINITY;
                kv[j].idx = j;
            }
            qsort(kv, (size_t)ncat, sizeof *kv, by_key);
            for (int64_t s = 0; s < samples; s++) ob[r * ors + s * ocs] = kv[s].idx;
        }
    }
    free(scratch);
    return TC_OK;
}

tc_status tc_cpu_random(const tc_kcall *k)
{
    tc_generator *gen = k->p->gen; /* NULL: the process default (locked while reserving) */
    switch (k->op) {
    case TC_OP_RANDPERM: return run_randperm(k, gen);
    case TC_OP_MULTINOMIAL: return run_multinomial(k, gen);
    default: return run_elementwise(k, gen);
    }
}
