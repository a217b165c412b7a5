/* loops.c -- the elementwise iteration engine every CPU elementwise kernel runs on.
 *
 * An iteration space is out's shape; each operand gets byte strides at that shape (0 along
 * broadcast dims). Adjacent dims that are contiguous for every operand are merged, so a
 * contiguous tensor becomes one flat run and the loop function sees its fast path. The
 * flat element range is split into chunks for the thread pool; a chunk may start mid-row.
 */
#include "loops.h"

#define MAX_ARGS 4

typedef struct plan {
    int nargs, ndim;
    int64_t size[TC_MAX_DIMS];
    int64_t stride[MAX_ARGS][TC_MAX_DIMS]; /* bytes */
    char *base[MAX_ARGS];
    tc_loop_fn fn;
    double s0, s1;
} plan;

/* Merge dim d into d+1 when every operand steps through d exactly as far as one full
 * pass of d+1 takes it; drop size-1 dims. */
static void coalesce(plan *pl)
{
    int nd = 0;
    int64_t size[TC_MAX_DIMS], stride[MAX_ARGS][TC_MAX_DIMS];
    for (int d = 0; d < pl->ndim; d++) {
        if (pl->size[d] == 1) continue;
        if (nd > 0) {
            bool merge = true;
            for (int a = 0; a < pl->nargs; a++)
                if (stride[a][nd - 1] != pl->stride[a][d] * pl->size[d]) merge = false;
            if (merge) {
                size[nd - 1] *= pl->size[d];
                for (int a = 0; a < pl->nargs; a++) stride[a][nd - 1] = pl->stride[a][d];
                continue;
            }
        }
        size[nd] = pl->size[d];
        for (int a = 0; a < pl->nargs; a++) stride[a][nd] = pl->stride[a][d];
        nd++;
    }
    if (nd == 0) { /* a single element */
        size[0] = 1;
        for (int a = 0; a < pl->nargs; a++) stride[a][0] = 0;
        nd = 1;
    }
    pl->ndim = nd;
    memcpy(pl->size, size, sizeof size);
    memcpy(pl->stride, stride, sizeof stride);
}

/* Orders the dims by the output's strides, largest first (a stable insertion sort), so a
 * result laid out as a transpose (a gradient kept in a transposed weight's layout, for
 * one) is walked in memory order and merges into one flat run like a contiguous one. The
 * order of an elementwise loop does not matter, except where the output writes one
 * element twice (a stride 0): those keep the row-major order. */
static void order_dims(plan *pl)
{
    for (int d = 0; d < pl->ndim; d++)
        if (pl->size[d] > 1 && pl->stride[0][d] == 0) return;
    for (int i = 1; i < pl->ndim; i++)
        for (int j = i; j > 0 && pl->stride[0][j - 1] < pl->stride[0][j]; j--) {
            int64_t t = pl->size[j];
            pl->size[j] = pl->size[j - 1], pl->size[j - 1] = t;
            for (int a = 0; a < pl->nargs; a++) {
                t = pl->stride[a][j];
                pl->stride[a][j] = pl->stride[a][j - 1], pl->stride[a][j - 1] = t;
            }
        }
}

/* Runs elements [begin, end) of the flattened space, a row piece at a time. */
static void run_range(void *ctx, int64_t begin, int64_t end)
{
    const plan *pl = ctx;
    int nd = pl->ndim, inner = nd - 1;
    int64_t idx[TC_MAX_DIMS] = {0};
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % pl->size[d];
        rem /= pl->size[d];
    }
    char *ptr[MAX_ARGS];
    int64_t inner_stride[MAX_ARGS];
    for (int a = 0; a < pl->nargs; a++) {
        ptr[a] = pl->base[a];
        for (int d = 0; d < nd; d++) ptr[a] += idx[d] * pl->stride[a][d];
        inner_stride[a] = pl->stride[a][inner];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = pl->size[inner] - idx[inner];
        if (n > end - pos) n = end - pos;
        pl->fn(ptr, inner_stride, n, pl->s0, pl->s1);
        pos += n;
        if (pos >= end) break;
        /* advance the multi-index past this row piece */
        for (int a = 0; a < pl->nargs; a++) ptr[a] += n * pl->stride[a][inner];
        idx[inner] += n;
        for (int d = inner; d > 0 && idx[d] == pl->size[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int a = 0; a < pl->nargs; a++)
                ptr[a] += pl->stride[a][d - 1] - pl->size[d] * pl->stride[a][d];
        }
    }
}

/* The common case: a contiguous output, and inputs that are contiguous with its shape or
 * single elements. One flat run, no plan. */
static bool flat_case(tc_tensor *out, const tc_tensor *const *ins, int nin, char **ptr, int64_t *st)
{
    if (!tc_tensor_is_contiguous(out)) return false;
    ptr[0] = tc_base(out);
    st[0] = tc_elsize(out->dtype);
    for (int a = 0; a < nin; a++) {
        const tc_tensor *t = ins[a];
        ptr[a + 1] = tc_base(t);
        if (tc_tensor_numel(t) == 1) {
            st[a + 1] = 0;
        } else if (tc_same_shape(t, out) && tc_tensor_is_contiguous(t)) {
            st[a + 1] = tc_elsize(t->dtype);
        } else {
            return false;
        }
    }
    return true;
}

typedef struct flat_job {
    tc_loop_fn fn;
    int nargs;
    char *ptr[MAX_ARGS];
    int64_t st[MAX_ARGS];
    double s0, s1;
} flat_job;

static void run_flat(void *ctx, int64_t begin, int64_t end)
{
    const flat_job *j = ctx;
    char *p[MAX_ARGS];
    for (int a = 0; a < j->nargs; a++) p[a] = j->ptr[a] + begin * j->st[a];
    j->fn(p, j->st, end - begin, j->s0, j->s1);
}

void tc_cpu_foreach(tc_tensor *out, const tc_tensor *const *ins, int nin, tc_loop_fn fn, double s0, double s1)
{
    tc_cpu_foreach_grain(out, ins, nin, fn, s0, s1, TC_EW_GRAIN_CHEAP);
}

void tc_cpu_foreach_grain(tc_tensor *out, const tc_tensor *const *ins, int nin, tc_loop_fn fn, double s0, double s1,
                          int64_t grain)
{
    int64_t total = tc_tensor_numel(out);
    if (total == 0) return;
    flat_job fj;
    if (flat_case(out, ins, nin, fj.ptr, fj.st)) {
        if (total < 2 * grain) {
            fn(fj.ptr, fj.st, total, s0, s1);
            return;
        }
        fj.fn = fn, fj.nargs = 1 + nin, fj.s0 = s0, fj.s1 = s1;
        tc_parallel_for(total, grain, run_flat, &fj);
        return;
    }
    plan pl = {.nargs = 1 + nin, .ndim = out->ndim, .fn = fn, .s0 = s0, .s1 = s1};
    memcpy(pl.size, out->size, sizeof(int64_t) * (size_t)out->ndim);
    int64_t es = (int64_t)tc_dtype_size((tc_dtype)out->dtype);
    pl.base[0] = tc_base(out);
    for (int d = 0; d < out->ndim; d++) pl.stride[0][d] = out->stride[d] * es;
    for (int a = 0; a < nin; a++) {
        const tc_tensor *t = ins[a];
        int64_t st[TC_MAX_DIMS];
        tc_broadcast_strides(t, out->ndim, out->size, st);
        int64_t ies = (int64_t)tc_dtype_size((tc_dtype)t->dtype);
        pl.base[a + 1] = tc_base(t);
        for (int d = 0; d < out->ndim; d++) pl.stride[a + 1][d] = st[d] * ies;
    }
    order_dims(&pl);
    coalesce(&pl);
    tc_parallel_for(total, grain, run_range, &pl);
}
