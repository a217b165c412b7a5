/* mock_cuda_ops.c -- the work of the mock CUDA backend (tests/c/mock_cuda.c has the table,
 * devices, streams and capture): ew() and run() over host memory.
 *
 * ew(): float32/float64 loops, one per TC_EW line of ops.def. run(): those loops for flat
 * elementwise calls, and gather / index_select (float32/float64 values of any strides,
 * int64 indices) with the CUDA backend's device-side index check (core/cuda/index.cu): an
 * index outside its dim is skipped and the first one is kept in the device's error word,
 * which devcheck_take (cuda_api.h version 5) reads and clears. Eager calls never meet a bad
 * index (libtocha checks on the host first); captured ones may, at each replay.
 */
#include "cuda/cache_alloc.h"
#include "mock_cuda.h"
#include <pthread.h>
#include <string.h>
#include <tgmath.h>

/* ---- elementwise: float32 and float64 loops from the ops.def float formulas ---------- */

/* One function per op and float type: out[i] = formula(a, b, c; p0, p1) with the inputs
 * read at i * step (step 0 broadcasts one element). CMP ops store uint8. */
#define DIFF TC_OPF_DIFF
#define FLT TC_OPF_FLT
#define INT TC_OPF_INT
#define BOOL TC_OPF_BOOL
#define CMP TC_OPF_CMP
#define ZDIV TC_OPF_ZDIV
typedef void (*mock_loop)(int64_t n, void *out, const void *const *in, const int64_t *step, double s0, double s1);

#define MOCK_LOOP(ID, TY, fl, EXPR)                                                         \
    static void ew_##ID##_##TY(int64_t n, void *out, const void *const *in, const int64_t *step, double s0, \
                               double s1)                                                   \
    {                                                                                       \
        typedef TY T;                                                                       \
        const T p0 = (T)s0, p1 = (T)s1, *A = (const T *)in[0], *B = (const T *)in[1], *Cc = (const T *)in[2]; \
        (void)p0, (void)p1;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = A ? A[i * step[0]] : 0, b = B ? B[i * step[1]] : 0, c = Cc ? Cc[i * step[2]] : 0; \
            (void)a, (void)b, (void)c;                                                      \
            if ((fl) & CMP) ((uint8_t *)out)[i] = (uint8_t)(EXPR);                          \
            else ((T *)out)[i] = (T)(EXPR);                                                 \
        }                                                                                   \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-conversion"
#pragma GCC diagnostic ignored "-Wbool-operation"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) MOCK_LOOP(ID, float, fl, ffmt) MOCK_LOOP(ID, double, fl, ffmt)
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "ops.def"
#undef TC_EW
#undef TC_OPK
#pragma GCC diagnostic pop

typedef struct mock_ew {
    const char *name;
    int arity, flags;
    mock_loop f32, f64;
} mock_ewop;

static const mock_ewop g_ew[TC_OP_COUNT] = {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) [TC_OP_##ID] = {nm, ar, fl, ew_##ID##_float, ew_##ID##_double},
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "ops.def"
#undef TC_EW
#undef TC_OPK
};

tc_status mock_ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in, const int64_t *step,
                    double s0, double s1)
{
    if (op < 0 || op >= TC_OP_COUNT || !g_ew[op].name) return mock_fail(TC_ERR_ARG, "cuda ew: op %d is not an elementwise op", op);
    const mock_ewop *e = &g_ew[op];
    if (dtype < 0 || dtype >= TC_DTYPE_COUNT) return mock_fail(TC_ERR_ARG, "cuda %s: bad dtype %d", e->name, dtype);
    if (dtype != TC_F32 && dtype != TC_F64) {
        static const char *const names[TC_DTYPE_COUNT] = {
            [TC_F32] = "float32", [TC_F64] = "float64", [TC_F16] = "float16", [TC_BF16] = "bfloat16",
            [TC_U8] = "uint8",    [TC_I8] = "int8",     [TC_I16] = "int16",   [TC_I32] = "int32",
            [TC_I64] = "int64",   [TC_BOOL] = "bool"};
        return mock_fail(TC_ERR_UNSUPPORTED, "cuda %s: the mock backend runs float32 and float64 only, not %s", e->name,
                    names[dtype] ? names[dtype] : "?");
    }
    if (!(e->flags & TC_OPF_FLT)) return mock_fail(TC_ERR_UNSUPPORTED, "cuda %s: no CUDA kernel for floats", e->name);
    if (n == 0) return TC_OK;
    if (!out) return mock_fail(TC_ERR_ARG, "cuda %s: output is NULL", e->name);
    const void *ins[3] = {NULL, NULL, NULL};
    int64_t st[3] = {0, 0, 0};
    for (int k = 0; k < e->arity; k++) {
        if (!in || !in[k]) return mock_fail(TC_ERR_ARG, "cuda %s: input %d is NULL", e->name, k + 1);
        if (!step || (step[k] != 0 && step[k] != 1))
            return mock_fail(TC_ERR_UNSUPPORTED, "cuda %s: input %d has step %lld (0 or 1 supported)", e->name, k + 1,
                        step ? (long long)step[k] : -1LL);
        ins[k] = in[k];
        st[k] = step[k];
    }
    tc_status s = mock_use(dev, "cuda: ew");
    if (s) return s;
    if (mock_recording(dev))
        return mock_record(dev, &(mock_rec){.kind = REC_EW, .op = op, .dtype = dtype, .n = n, .dst = out, .in = {ins[0], ins[1], ins[2]},
                                       .step = {st[0], st[1], st[2]}, .s0 = s0, .s1 = s1});
    (dtype == TC_F32 ? e->f32 : e->f64)(n, out, ins, st, s0, s1);
    return TC_OK;
}

/* ---- index ops and the device error words ------------------------------------------------- */

typedef struct mock_word {
    int set;
    tc_cuda_devcheck e;
} mock_word;
static mock_word g_word[CA_MAX_DEVICES];
static pthread_mutex_t g_word_mu = PTHREAD_MUTEX_INITIALIZER;

/* The first bad index of the device wins, as the kernel's atomicCAS on the word. */
void mock_note_bad(int dev, int op, int dim, int64_t v, int64_t size)
{
    pthread_mutex_lock(&g_word_mu);
    if (!g_word[dev].set) g_word[dev] = (mock_word){1, {op, dim, v, size}};
    pthread_mutex_unlock(&g_word_mu);
}

tc_status mock_devcheck_take(int dev, tc_cuda_devcheck *out)
{
    if (!out) return mock_fail(TC_ERR_ARG, "cuda devcheck_take: NULL result");
    *out = (tc_cuda_devcheck){-1, 0, 0, 0};
    tc_status s = mock_use(dev, "cuda devcheck_take");
    if (!s) s = mock_no_wait(dev, "cuda devcheck_take");
    if (s) return s;
    pthread_mutex_lock(&g_word_mu);
    if (g_word[dev].set) *out = g_word[dev].e;
    g_word[dev].set = 0;
    pthread_mutex_unlock(&g_word_mu);
    return TC_OK;
}

/* A 0-dim view as the 1-dim view of its one element (stride 0), as index.cu's norm. */
static tc_cuda_view norm(const tc_cuda_view *v)
{
    tc_cuda_view r = *v;
    if (r.ndim == 0) r.ndim = 1, r.size[0] = r.numel = v->data ? 1 : 0, r.stride[0] = 0;
    return r;
}

/* out[c] = src[c with c[d] = idx[...]] over out's elements (gather: idx at c; index_select:
 * idx at c[d]). A bad index leaves its element alone and is noted. */
static void index_exec(int dev, int op, int64_t dim, const tc_cuda_view *out0, const tc_cuda_view *src0,
                       const tc_cuda_view *ix0)
{
    tc_cuda_view out = norm(out0), src = norm(src0), ix = norm(ix0);
    int d = (int)(dim < 0 ? dim + src.ndim : dim);
    size_t es = out.dtype == TC_F32 ? 4 : 8;
    const int64_t *idx = (const int64_t *)ix.data;
    int64_t c[TC_MAX_DIMS] = {0};
    for (int64_t k = 0; k < out.numel; k++) {
        int64_t oo = 0, so = 0, io = 0;
        for (int i = 0; i < out.ndim; i++) {
            oo += c[i] * out.stride[i];
            if (i != d) so += c[i] * src.stride[i];
            if (op == TC_OP_GATHER) io += c[i] * ix.stride[i];
        }
        if (op != TC_OP_GATHER) io = c[d] * ix.stride[0];
        int64_t v = idx[io];
        if ((uint64_t)v >= (uint64_t)src.size[d]) mock_note_bad(dev, op, d, v, src.size[d]);
        else memcpy((char *)out.data + oo * (int64_t)es,
                    (const char *)src.data + (so + v * src.stride[d]) * (int64_t)es, es);
        for (int i = out.ndim - 1; i >= 0 && ++c[i] == out.size[i]; i--) c[i] = 0;
    }
}

/* The bytes [lo, hi) a view's elements span (es: element size). */
static void span(const tc_cuda_view *v, size_t es, const char **lo, const char **hi)
{
    int64_t a = 0, b = 0;
    for (int i = 0; i < v->ndim; i++) {
        int64_t e = (v->size[i] - 1) * v->stride[i];
        if (e < 0) a += e;
        else b += e;
    }
    *lo = (const char *)v->data + a * (int64_t)es;
    *hi = (const char *)v->data + (b + 1) * (int64_t)es;
}

/* Whether out's span meets in's (then the host runs the op, as index.cu answers). */
static bool overlaps(const tc_cuda_view *out, const tc_cuda_view *in, size_t ies)
{
    const char *a, *b, *c, *d;
    span(out, out->dtype == TC_F32 ? 4 : 8, &a, &b);
    span(in, ies, &c, &d);
    return a < d && c < b;
}

/* gather / index_select: float32/float64 values (any strides), int64 indices. */
static tc_status index_run(int dev, const tc_cuda_call *c)
{
    const tc_cuda_view *o = &c->out[0];
    bool ok = c->nin == 2 && (o->dtype == TC_F32 || o->dtype == TC_F64) && c->in[0].dtype == o->dtype &&
              c->in[1].dtype == TC_I64;
    if (ok) {
        tc_cuda_view out = norm(o), src = norm(&c->in[0]), ix = norm(&c->in[1]);
        int64_t dim = c->params.i[0];
        int d = (int)(dim < 0 ? dim + src.ndim : dim);
        ok = d >= 0 && d < src.ndim && out.ndim == src.ndim &&
             (c->op == TC_OP_GATHER ? ix.ndim == out.ndim : ix.ndim == 1 && ix.size[0] == out.size[d]);
    }
    if (!ok) return mock_fail(TC_ERR_UNSUPPORTED, "mock: no CUDA kernel for op %d with these dtypes", (int)c->op);
    tc_status s = mock_use(dev, "cuda: run");
    if (s || o->numel == 0) return s;
    if (!o->data || !c->in[0].data || !c->in[1].data) return mock_fail(TC_ERR_ARG, "cuda run: missing device data");
    if (overlaps(o, &c->in[0], o->dtype == TC_F32 ? 4 : 8) || overlaps(o, &c->in[1], 8))
        return mock_fail(TC_ERR_UNSUPPORTED, "mock: the output of op %d overlaps an input", (int)c->op);
    if (mock_recording(dev))
        return mock_record(dev, &(mock_rec){.kind = REC_RUN, .op = c->op, .dev = dev, .view = {*o, c->in[0], c->in[1]},
                                            .dim = c->params.i[0]});
    index_exec(dev, c->op, c->params.i[0], o, &c->in[0], &c->in[1]);
    return TC_OK;
}

/* ---- version 3: ops on device tensors ---------------------------------------------------- */

/* Elementwise float ops whose views are contiguous (or one element broadcast to all), and
 * gather/index_select over float32/float64 values, run here, so the path where the backend
 * has the kernel is exercised; everything else answers UNSUPPORTED like a backend without
 * that kernel, and libtocha runs it on the host. */
static int view_step(const tc_cuda_view *v) /* 1 contiguous, 0 all broadcast, -1 neither */
{
    int64_t expect = 1;
    bool contiguous = true, broadcast = true;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->size[d] != 1 && v->stride[d] != expect) contiguous = false;
        if (v->size[d] != 1 && v->stride[d] != 0) broadcast = false;
        expect *= v->size[d];
    }
    return contiguous ? 1 : broadcast ? 0 : -1;
}

tc_status mock_run(int dev, const tc_cuda_call *c)
{
    if (!c || c->op < 0 || c->op >= TC_OP_COUNT) return mock_fail(TC_ERR_ARG, "cuda run: unknown op");
    if (mock_rand_takes(c)) return mock_rand_run(dev, c); /* mock_cuda_rand.c */
    if (mock_cpu_takes(c)) return mock_cpu_run(dev, c); /* opt-in: libtocha's CPU kernels */
    if (c->op == TC_OP_GATHER || c->op == TC_OP_INDEX_SELECT) return index_run(dev, c);
    const mock_ewop *e = &g_ew[c->op];
    const tc_cuda_view *o = &c->out[0];
    bool ok = e->name && c->nin == e->arity && o->data && view_step(o) == 1 && (o->dtype == TC_F32 || o->dtype == TC_F64);
    const void *in[3] = {NULL, NULL, NULL};
    int64_t step[3] = {0, 0, 0};
    for (int i = 0; ok && i < c->nin; i++) {
        in[i] = c->in[i].data;
        step[i] = view_step(&c->in[i]);
        ok = in[i] && c->in[i].dtype == o->dtype && step[i] >= 0;
    }
    if (!ok) return mock_fail(TC_ERR_UNSUPPORTED, "mock: no CUDA kernel for op %d", (int)c->op);
    return mock_ew(dev, c->op, o->dtype, o->numel, o->data, in, step, c->params.s[0], c->params.s[1]);
}

void mock_replay(const mock_rec *r)
{
    switch (r->kind) {
    case REC_EW: (r->dtype == TC_F32 ? g_ew[r->op].f32 : g_ew[r->op].f64)(r->n, r->dst, r->in, r->step, r->s0, r->s1); break;
    case REC_SET: memset(r->dst, r->value, (size_t)r->n); break;
    case REC_COPY: memmove(r->dst, r->src, (size_t)r->n); break;
    case REC_RUN: index_exec(r->dev, r->op, r->dim, &r->view[0], &r->view[1], &r->view[2]); break;
    case REC_CPU: mock_cpu_replay(r); break;
    case REC_RAND: mock_rand_exec(r); break;
    default: memcpy(r->dst, r->bytes, (size_t)r->n); break;
    }
}
