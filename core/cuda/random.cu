/* random.cu -- the elementwise random ops on device tensors (uniform normal bernoulli random
 * exponential cauchy log_normal geometric), giving the CPU's numbers for a seed.
 *
 * Why the same numbers: every value is a pure function of (Philox key, counter slot)
 * (core/philox.h, compiled here for the device), and element i of the result in row-major
 * order, whatever its strides, takes words 0-1 (i even) or 2-3 (i odd) of slot base + i/2,
 * exactly as core/cpu/random.c does. libtocha reserves the ((n + 1) / 2) slots on the host
 * and passes the key and first slot in the call (philox_seed, philox_base); a call captured
 * in a CUDA graph passes philox_key instead (cuda_api.h version 6): a device pair {key,
 * first slot} that libtocha rewrites before each replay, read by every thread when the
 * kernel runs, the call's philox_base then being the op's offset from that first slot (so
 * each replay draws the numbers the same ops would draw eagerly at that point; NOTE: that
 * path has not run on a GPU yet: the mock backend's copy, tests/c/mock_cuda_rand.c, does
 * the same over host memory in tests/c/test_cuda_rngcap.c). The samplers
 * and the stores (open upper end of uniform, half rounding, saturating integer results)
 * are the shared host/device functions of cu_elem.h, which tests/c/test_cuda_elem.c checks
 * against the CPU ops. One thread makes both elements of a slot (Box-Muller needs both).
 *
 * Not here: randperm and multinomial, sequential on the CPU (random_seq.cu).
 */
#include "cuda_internal.h"
#include "cu_elem.h"
#include <stdint.h>
#include <utility>

/* The op flags of ops.def (which dtypes an op takes), indexed by tc_op. */
static const int op_flags[] = {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) 0,
#define TC_OPK(ID, nm, kind, nin, nout, fl) (fl),
#define DIFF TC_OPF_DIFF
#define FLT TC_OPF_FLT
#define INT TC_OPF_INT
#define BOOL TC_OPF_BOOL
#define CMP TC_OPF_CMP
#define ZDIV TC_OPF_ZDIV
#include "../ops.def"
#undef TC_EW
#undef TC_OPK
};
static_assert(sizeof op_flags / sizeof op_flags[0] == TC_OP_COUNT, "one entry per op");

static bool op_takes(int flags, int dt)
{
    bool flt = dt == TC_F32 || dt == TC_F64 || dt == TC_F16 || dt == TC_BF16;
    return flt ? (flags & TC_OPF_FLT) != 0 : dt == TC_BOOL ? (flags & TC_OPF_BOOL) != 0 : (flags & TC_OPF_INT) != 0;
}

/* Thread s makes elements 2s and 2s+1 (those below n). g: the result's geometry; pg: the
 * probabilities' geometry over the same row-major order (bernoulli with a tensor). */
template <int DT, class G, class I>
__global__ void rand_kernel(I npairs, I n, G g, char *out, cu_rand r, G pg, const char *prob, int pdt,
                            const uint64_t *key)
{
    if (key) { /* captured: the replay's key and first slot, written before the graph launched */
        r.seed = key[0];
        r.base += key[1];
    }
    const I step = (I)gridDim.x * (I)blockDim.x;
    const int es = cu_dtype_size(DT), pes = cu_dtype_size(pdt);
    for (I s = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; s < npairs; s += step) {
        double v[2] = {0, 0};
        if (r.op != TC_OP_RANDOM) cu_rand_pair(&r, (uint64_t)s, v);
        for (int j = 0; j < 2; j++) {
            I i = 2 * s + j;
            if (i >= n) break;
            I off;
            geom_offsets(&g, i, 1, &off);
            char *dst = out + (int64_t)off * es; /* bytes in 64 bits: I may be int32 */
            if (r.op == TC_OP_RANDOM) {
                cu_rand_store_int(DT, dst, cu_rand_int(&r, (uint64_t)i));
                continue;
            }
            if (r.op == TC_OP_BERNOULLI) {
                double p = r.s0;
                if (prob) {
                    I poff;
                    geom_offsets(&pg, i, 1, &poff);
                    p = cu_load_as_double(pdt, prob + (int64_t)poff * pes);
                }
                v[j] = v[j] < p ? 1.0 : 0.0;
            }
            cu_rand_store(DT, dst, v[j], r.open_top, r.s1);
        }
    }
}

typedef void (*rand_fn)(int dev, const cu_geom *g, const cu_geom *pg, void *out, const cu_rand *r, const void *prob,
                        int pdt, const uint64_t *key);

template <int DT>
static void rand_launch(int dev, const cu_geom *g, const cu_geom *pg, void *out, const cu_rand *r, const void *prob,
                        int pdt, const uint64_t *key)
{
    int64_t n = cu_geom_numel(g), npairs = (n + 1) / 2;
    unsigned grid = (unsigned)cu_grid_for(dev, npairs);
    if (cu_geom_fits32(g) && cu_geom_fits32(pg))
        rand_kernel<DT, cu_geom32, int32_t><<<grid, CU_BLOCK, 0, cu_stream()>>>((int32_t)npairs, (int32_t)n, cu_geom32_from(g),
                                                                (char *)out, *r, cu_geom32_from(pg), (const char *)prob, pdt, key);
    else
        rand_kernel<DT, cu_geom64, int64_t><<<grid, CU_BLOCK, 0, cu_stream()>>>(npairs, n, cu_geom64_from(g), (char *)out, *r,
                                                                cu_geom64_from(pg), (const char *)prob, pdt, key);
}

template <size_t... DT> static constexpr auto make_rand_table(std::index_sequence<DT...>)
{
    struct table {
        rand_fn fn[TC_DTYPE_COUNT];
    };
    return table{{&rand_launch<(int)DT>...}};
}
static const auto rand_table = make_rand_table(std::make_index_sequence<TC_DTYPE_COUNT>{});

/* One arg: a view's own sizes and strides (or broadcast ones), coalesced. */
static void geom1(cu_geom *g, int nd, const int64_t *size, const int64_t *stride)
{
    *g = cu_geom{};
    g->nd = nd;
    g->narg = 1;
    for (int d = 0; d < nd; d++) g->size[d] = size[d], g->stride[0][d] = stride[d];
    cu_geom_coalesce(g);
}

tc_status cu_op_random(int dev, const tc_cuda_call *c)
{
    const char *name = cu_op_name(c->op);
    switch (c->op) {
    case TC_OP_UNIFORM: case TC_OP_NORMAL: case TC_OP_BERNOULLI: case TC_OP_RANDOM:
    case TC_OP_EXPONENTIAL: case TC_OP_CAUCHY: case TC_OP_LOG_NORMAL: case TC_OP_GEOMETRIC: break;
    default: return cu_op_random_seq(dev, c); /* randperm, multinomial */
    }
    if (c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: no result", name);
    const tc_cuda_view *out = &c->out[0];
    if (out->ndim < 0 || out->ndim > TC_MAX_DIMS || out->dtype < 0 || out->dtype >= TC_DTYPE_COUNT)
        return cu_fail(TC_ERR_ARG, "%s: bad result view", name);
    if (!op_takes(op_flags[c->op], out->dtype)) return cu_unsupported(c);
    cu_geom g, pg;
    geom1(&g, out->ndim, out->size, out->stride);
    int64_t n = cu_geom_numel(&g);
    if (n == 0) return TC_OK;
    if (!out->data) return cu_fail(TC_ERR_ARG, "%s: NULL result", name);
    const tc_cuda_view *p = c->op == TC_OP_BERNOULLI && c->nin > 0 && c->in && c->in[0].data ? &c->in[0] : nullptr;
    pg = cu_geom{};
    pg.narg = 1;
    if (p) {
        if (p->ndim < 0 || p->ndim > TC_MAX_DIMS || p->dtype < 0 || p->dtype >= TC_DTYPE_COUNT)
            return cu_fail(TC_ERR_ARG, "%s: bad probabilities view", name);
        /* probabilities broadcast to the result, or (Torch7) as many read in their own order */
        int64_t st[TC_MAX_DIMS];
        if (cu_bcast_strides(p->ndim, p->size, p->stride, out->ndim, out->size, st)) {
            geom1(&pg, out->ndim, out->size, st);
        } else {
            geom1(&pg, p->ndim, p->size, p->stride);
            if (cu_geom_numel(&pg) != n)
                return cu_fail(TC_ERR_SHAPE, "%s: %lld probabilities for %lld results", name,
                               (long long)cu_geom_numel(&pg), (long long)n);
        }
    }
    cu_rand r = cu_rand_setup(c->op, out->dtype, c->params.s[0], c->params.s[1], c->philox_seed, c->philox_base);
    rand_table.fn[out->dtype](dev, &g, &pg, out->data, &r, p ? p->data : nullptr, p ? p->dtype : TC_F64,
                              c->philox_key);
    return cu_check(cudaGetLastError(), name);
}
