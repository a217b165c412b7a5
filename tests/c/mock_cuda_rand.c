/* mock_cuda_rand.c -- the mock CUDA backend's elementwise random ops (uniform normal
 * bernoulli random exponential cauchy log_normal geometric) into float32 / float64 results
 * of any strides, bernoulli with a scalar p or a probability tensor; other dtypes answer
 * UNSUPPORTED (libtocha then draws on the host, with the same numbers).
 *
 * The numbers are core/cuda/random.cu's: the same shared host/device samplers of
 * core/cuda/cu_elem.h (cu_rand_setup, cu_rand_pair, cu_rand_int, cu_rand_store), element i
 * of the result in row-major order from slot base + i/2, so a seeded mock tensor equals a
 * seeded CPU tensor. Like the kernel, a call with philox_key (cuda_api.h version 6: a draw
 * captured in a CUDA graph) reads {key, first slot} from that device pair when it runs --
 * here when a replay re-executes the record, so each replay sees the pair libtocha wrote
 * before launching it, and the capture tests check fresh numbers per replay end to end.
 */
#include "cuda/cu_elem.h"
#include "mock_cuda.h"
#include <string.h>

static const char *rand_name(int op)
{
    switch (op) {
    case TC_OP_UNIFORM: return "uniform";
    case TC_OP_NORMAL: return "normal";
    case TC_OP_BERNOULLI: return "bernoulli";
    case TC_OP_RANDOM: return "random";
    case TC_OP_EXPONENTIAL: return "exponential";
    case TC_OP_CAUCHY: return "cauchy";
    case TC_OP_LOG_NORMAL: return "log_normal";
    case TC_OP_GEOMETRIC: return "geometric";
    default: return NULL;
    }
}

bool mock_rand_takes(const tc_cuda_call *c) { return rand_name(c->op) != NULL; }

/* One view's own sizes and strides (coalesced), as random.cu's geom1. */
static void geom1(cu_geom *g, int nd, const int64_t *size, const int64_t *stride)
{
    memset(g, 0, sizeof *g);
    g->nd = nd;
    g->narg = 1;
    for (int d = 0; d < nd; d++) g->size[d] = size[d], g->stride[0][d] = stride[d];
    cu_geom_coalesce(g);
}

/* The probabilities' geometry over the result's row-major order: broadcast to the result,
 * or (Torch7) as many read in their own order. False when neither fits. */
static bool prob_geom(const tc_cuda_view *p, const tc_cuda_view *out, cu_geom *pg)
{
    int64_t st[TC_MAX_DIMS];
    if (cu_bcast_strides(p->ndim, p->size, p->stride, out->ndim, out->size, st)) {
        geom1(pg, out->ndim, out->size, st);
        return true;
    }
    geom1(pg, p->ndim, p->size, p->stride);
    return cu_geom_numel(pg) == out->numel;
}

/* The draw itself: rand_kernel of random.cu, one pair of elements per slot. */
void mock_rand_exec(const mock_rec *r)
{
    const tc_cuda_view *out = &r->view[0], *p = r->view[1].data ? &r->view[1] : NULL;
    cu_rand k = cu_rand_setup(r->op, out->dtype, r->s0, r->s1, r->seed, r->base);
    if (r->key) { /* captured: the pair as it is now, written before this replay */
        k.seed = r->key[0];
        k.base += r->key[1];
    }
    cu_geom g, pg;
    geom1(&g, out->ndim, out->size, out->stride);
    memset(&pg, 0, sizeof pg);
    if (p) (void)prob_geom(p, out, &pg); /* checked when the call was made */
    cu_geom64 gk = cu_geom64_from(&g), pk = cu_geom64_from(&pg);
    int es = cu_dtype_size(out->dtype), pes = p ? cu_dtype_size(p->dtype) : 0;
    int64_t n = cu_geom_numel(&g);
    for (int64_t s = 0; s < (n + 1) / 2; s++) {
        double v[2] = {0, 0};
        if (r->op != TC_OP_RANDOM) cu_rand_pair(&k, (uint64_t)s, v);
        for (int j = 0; j < 2 && 2 * s + j < n; j++) {
            int64_t i = 2 * s + j, off, poff;
            cu_geom64_offsets(&gk, i, 1, &off);
            char *dst = (char *)out->data + off * es;
            if (r->op == TC_OP_RANDOM) {
                cu_rand_store_int(out->dtype, dst, cu_rand_int(&k, (uint64_t)i));
                continue;
            }
            if (r->op == TC_OP_BERNOULLI) {
                double prob = r->s0;
                if (p) {
                    cu_geom64_offsets(&pk, i, 1, &poff);
                    prob = cu_load_as_double(p->dtype, (const char *)p->data + poff * pes);
                }
                v[j] = v[j] < prob ? 1.0 : 0.0;
            }
            cu_rand_store(out->dtype, dst, v[j], k.open_top, k.s1);
        }
    }
}

tc_status mock_rand_run(int dev, const tc_cuda_call *c)
{
    const char *name = rand_name(c->op);
    if (c->nout < 1) return mock_fail(TC_ERR_ARG, "cuda %s: no result", name);
    const tc_cuda_view *out = &c->out[0];
    if (out->ndim < 0 || out->ndim > TC_MAX_DIMS) return mock_fail(TC_ERR_ARG, "cuda %s: bad result view", name);
    if (out->dtype != TC_F32 && out->dtype != TC_F64)
        return mock_fail(TC_ERR_UNSUPPORTED, "cuda %s: the mock backend draws into float32 and float64 only", name);
    tc_status s = mock_use(dev, "cuda: run");
    if (s || out->numel == 0) return s;
    if (!out->data) return mock_fail(TC_ERR_ARG, "cuda %s: NULL result", name);
    mock_rec r = {.kind = REC_RAND, .op = c->op, .dev = dev, .s0 = c->params.s[0], .s1 = c->params.s[1],
                  .seed = c->philox_seed, .base = c->philox_base, .key = c->philox_key};
    r.view[0] = *out;
    if (c->op == TC_OP_BERNOULLI && c->nin > 0 && c->in && c->in[0].data) {
        const tc_cuda_view *p = &c->in[0];
        cu_geom pg;
        if (p->ndim < 0 || p->ndim > TC_MAX_DIMS || p->dtype < 0 || p->dtype >= TC_DTYPE_COUNT)
            return mock_fail(TC_ERR_ARG, "cuda %s: bad probabilities view", name);
        if (!prob_geom(p, out, &pg))
            return mock_fail(TC_ERR_SHAPE, "cuda %s: %lld probabilities for %lld results", name,
                             (long long)cu_geom_numel(&pg), (long long)out->numel);
        r.view[1] = *p;
    }
    if (mock_recording(dev)) return mock_record(dev, &r);
    mock_rand_exec(&r);
    return TC_OK;
}
