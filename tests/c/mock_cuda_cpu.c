/* mock_cuda_cpu.c -- opt-in: the mock CUDA backend runs any op through libtocha's own CPU
 * kernels (TOCHA_CUDA_MOCK_KERNELS=cpu), so whole training steps -- matrix products,
 * log_softmax, nll, optimizer updates -- run "on the device" and can be captured in a CUDA
 * graph over the mock, where otherwise they would take libtocha's host fallback (which a
 * capture refuses).
 *
 * Why this works: mock device memory IS host memory. A tc_cuda_call's views are wrapped,
 * without copies, as host tensors over one borrowed storage spanning all of them (so
 * tc_tensor_overlaps sees aliasing exactly as on the device: the kernels that must not write
 * what they read still notice), and handed to tc_cpu_backend.kernels[op], the kernel the
 * dispatcher would call for CPU tensors. Results are therefore bitwise those of eager CPU
 * runs. The mock library links libtocha.so for this (Makefile: the mock's rule); the
 * process already has it loaded (the loader that dlopens the mock lives in it), and its
 * soname makes the dynamic linker reuse that copy.
 *
 * Left to others or declined (run() goes on to its own paths, then libtocha's fallback):
 * random ops (tests/c/mock_cuda_rand.c), and calls with float16/bfloat16 tensors (the CPU
 * kernels convert those with tc_op_run, which would be recorded by an active trace).
 *
 * Capture: a call made while the thread captures is recorded (REC_CPU: the wrapped call is
 * kept, its views' data pointers are stable because captures allocate from their private
 * pool) and the kernel runs at each replay. Index ops inside a capture were not checked on
 * the host (cuda_api.h), so their int64 indices are checked here at every run: a bad one
 * skips the call and is noted in the device's error word, as the CUDA kernels do.
 *
 * Environment: TOCHA_CUDA_MOCK_KERNELS  unset, "" or "mock": the mock's own kernels only,
 * and this file for the optimizer steps (the default; tests count host fallbacks); "cpu":
 * this file for everything. Any other value fails run()
 * with a message naming it.
 */
#include "internal.h"
#include "mock_cuda.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the switch ---------------------------------------------------------------------- */

static int g_mode; /* 0 off, 1 cpu, -1 a bad value */
static char g_value[64];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *v = getenv("TOCHA_CUDA_MOCK_KERNELS");
    if (!v || !*v || strcmp(v, "mock") == 0) g_mode = 0;
    else if (strcmp(v, "cpu") == 0) g_mode = 1;
    else {
        g_mode = -1;
        snprintf(g_value, sizeof g_value, "%s", v);
    }
}

bool mock_cpu_takes(const tc_cuda_call *c)
{
    pthread_once(&g_once, read_env);
    const tc_opinfo *info = tc_op_info((tc_op)c->op);
    /* the optimizer steps (adam_step, sgd_step, ...) are elementwise work like the mock's own
     * kernels: they always run here, so the default mock captures a step's update too */
    bool optim = info && info->kind == TC_KIND_OPTIM;
    if (g_mode == 0 && !optim) return false;
    if (g_mode < 0) return true; /* run() reports the bad value */
    if (!info || info->kind == TC_KIND_RANDOM || info->kind == TC_KIND_VIEW) return false;
    if (!tc_cpu_backend.kernels[c->op]) return false;
    /* float gather / index_select keep the mock's kernel: inside a capture it skips only the
     * bad elements, as index.cu does (below, a bad index skips the whole call) */
    bool fl = c->out[0].dtype == TC_F32 || c->out[0].dtype == TC_F64;
    if ((c->op == TC_OP_GATHER || c->op == TC_OP_INDEX_SELECT) && fl) return false;
    for (int i = 0; i < c->nin + c->nout; i++) {
        const tc_cuda_view *v = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
        if (tc_is_half(v->dtype)) return false;
    }
    return true;
}

/* ---- wrapping a call as host tensors -------------------------------------------------- */

/* One call ready for the CPU kernel: nin inputs then nout results (NULL: absent input). */
typedef struct cpu_call {
    int dev;
    tc_op op;
    int nin, nout;
    tc_params p;
    tc_tensor **t;
} cpu_call;

static void cpu_call_free(cpu_call *k)
{
    if (!k) return;
    if (k->t)
        for (int i = 0; i < k->nin + k->nout; i++) tc_tensor_release(k->t[i]);
    free(k->t);
    free(k);
}

static void borrowed(void *data, void *ctx)
{
    (void)data;
    (void)ctx;
}

static bool absent(const tc_cuda_view *v) { return !v->data && v->ndim == 0; }

/* Bytes [lo, hi) a view with elements spans. */
static void view_span(const tc_cuda_view *v, uintptr_t *lo, uintptr_t *hi)
{
    int64_t es = tc_elsize(v->dtype), a = 0, b = 0;
    for (int d = 0; d < v->ndim; d++) {
        int64_t e = (v->size[d] - 1) * v->stride[d];
        if (e < 0) a += e;
        else b += e;
    }
    *lo = (uintptr_t)v->data + (uintptr_t)(a * es);
    *hi = (uintptr_t)v->data + (uintptr_t)((b + 1) * es);
}

static bool same_view(const tc_cuda_view *a, const tc_cuda_view *b)
{
    return a->data == b->data && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->size, b->size, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
           memcmp(a->stride, b->stride, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static tc_status wrap(int dev, const tc_cuda_call *c, cpu_call **out)
{
    *out = NULL;
    int n = c->nin + c->nout;
    const char *name = tc_op_info((tc_op)c->op)->name;
    cpu_call *k = (cpu_call *)calloc(1, sizeof *k);
    tc_tensor **t = (tc_tensor **)calloc((size_t)(n > 0 ? n : 1), sizeof *t);
    if (!k || !t) {
        free(k);
        free(t);
        return mock_fail(TC_ERR_MEMORY, "cuda %s (mock, CPU kernels): no host memory", name);
    }
    *k = (cpu_call){.dev = dev, .op = (tc_op)c->op, .nin = c->nin, .nout = c->nout, .p = c->params, .t = t};
    k->p.gen = NULL;
    /* one borrowed storage from the lowest byte any view reads to the highest */
    uintptr_t base = UINTPTR_MAX, top = 0;
    for (int i = 0; i < n; i++) {
        const tc_cuda_view *v = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
        if (!v->data || v->numel == 0) continue;
        uintptr_t lo, hi;
        view_span(v, &lo, &hi);
        if (lo < base) base = lo;
        if (hi > top) top = hi;
    }
    tc_storage *s = NULL;
    tc_status st = TC_OK;
    if (top > 0) {
        base &= ~(uintptr_t)63; /* device blocks are 64-byte aligned: element offsets stay whole */
        st = tc_storage_adopt((void *)base, (int64_t)(top - base), TC_CPU, borrowed, NULL, &s);
    }
    for (int i = 0; i < n && !st; i++) {
        const tc_cuda_view *v = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
        if (i < c->nin && absent(v)) continue;
        for (int j = 0; j < i && !t[i]; j++) /* the same view twice (x * x, in-place): one tensor */
            if (t[j] && same_view(v, j < c->nin ? &c->in[j] : &c->out[j - c->nin])) {
                tc_tensor_retain(t[j]);
                t[i] = t[j];
            }
        if (t[i]) continue;
        if (!v->data || v->numel == 0) {
            st = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &t[i]);
            continue;
        }
        int64_t es = tc_elsize(v->dtype), off = (int64_t)((uintptr_t)v->data - base);
        if (off % es) {
            st = mock_fail(TC_ERR_UNSUPPORTED, "cuda %s (mock, CPU kernels): view %d is not aligned to its element "
                           "size", name, i + 1);
            break;
        }
        st = tc_tensor_new_view(s, (tc_dtype)v->dtype, off / es, v->ndim, v->size, v->stride, &t[i]);
    }
    if (s) tc_storage_release(s); /* the views hold it */
    if (st) {
        cpu_call_free(k);
        return st == TC_ERR_UNSUPPORTED ? st : mock_fail(st, "cuda %s (mock, CPU kernels): %s", name, tc_last_error());
    }
    *out = k;
    return TC_OK;
}

/* ---- running ------------------------------------------------------------------------- */

/* Index ops (input 1 indexes input 0 along dim i0): whether every index is in [0, size).
 * Eager calls were checked on the host; captured ones were not (cuda_api.h). */
static bool indices_ok(const cpu_call *k)
{
    const tc_opinfo *info = tc_op_info(k->op);
    if (info->kind != TC_KIND_INDEX || k->nin < 2 || !k->t[0] || !k->t[1] || k->t[1]->dtype != TC_I64) return true;
    const tc_tensor *src = k->t[0], *ix = k->t[1];
    int64_t dim = k->p.i[0];
    int nd = src->ndim > 0 ? src->ndim : 1;
    int d = (int)(dim < 0 ? dim + nd : dim);
    int64_t size = src->ndim == 0 ? 1 : d >= 0 && d < src->ndim ? src->size[d] : 0;
    if (tc_tensor_numel(ix) == 0) return true;
    tc_elem_iter it;
    tc_elem_iter_init(&it, ix);
    for (char *e; (e = tc_elem_iter_next(&it));) {
        int64_t v;
        memcpy(&v, e, sizeof v);
        if ((uint64_t)v >= (uint64_t)size) {
            mock_note_bad(k->dev, k->op, d, v, size);
            return false;
        }
    }
    return true;
}

static tc_status exec(const cpu_call *k)
{
    if (!indices_ok(k)) return TC_OK; /* skipped, noted in the error word */
    const tc_opinfo *info = tc_op_info(k->op);
    tc_kcall kc = {.op = k->op, .info = info, .in = (const tc_tensor *const *)k->t, .nin = k->nin, .p = &k->p,
                   .out = k->t + k->nin, .nout = k->nout};
    tc_status s = tc_cpu_backend.kernels[k->op](&kc);
    return s ? mock_fail(s, "cuda %s (mock, CPU kernels): %s", info->name, tc_last_error()) : TC_OK;
}

tc_status mock_cpu_run(int dev, const tc_cuda_call *c)
{
    if (g_mode < 0)
        return mock_fail(TC_ERR_ARG, "mock CUDA: TOCHA_CUDA_MOCK_KERNELS=%s is not 'cpu' or 'mock'", g_value);
    tc_status s = mock_use(dev, "cuda: run");
    if (s) return s;
    cpu_call *k;
    TRY(wrap(dev, c, &k));
    if (mock_recording(dev)) {
        s = mock_record(dev, &(mock_rec){.kind = REC_CPU, .dev = dev, .op = c->op, .dst = k});
        if (s) cpu_call_free(k);
        return s;
    }
    s = exec(k);
    cpu_call_free(k);
    return s;
}

/* A failure at replay has no caller to report to (graph_launch replays records in order,
 * as a GPU runs a graph); the kernels fail only when out of host memory. */
void mock_cpu_replay(const mock_rec *r) { (void)exec((const cpu_call *)r->dst); }

void mock_cpu_free(mock_rec *r)
{
    cpu_call_free((cpu_call *)r->dst);
    r->dst = NULL;
}
