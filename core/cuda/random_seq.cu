/* random_seq.cu -- randperm and multinomial on device tensors: the random ops that the CPU
 * (core/cpu/random.c) computes in sequence, giving the CPU's numbers for a seed here too.
 * The elementwise samplers are in random.cu.
 *
 * randperm. The CPU shuffles 0..n-1 by Fisher-Yates: for i = n-1 down to 1 it swaps
 * positions i and j_i, j_i drawn from slot base + i. Every j_i is a pure function of its
 * slot, so all are drawn at once (perm_init); only the swaps are sequential. They run in
 * rounds (Shun, Gu, Blelloch, Fineman, Gibbons, "Sequential random permutation, list
 * contraction and tree contraction are highly parallel", SODA 2015): each pending step
 * reserves its two positions with an atomicMax of its own number (a higher i comes first in
 * the CPU's order, so it wins), and a step that holds both swaps and is done. Two steps that
 * commit in one round touch different positions, and a step never commits before an
 * earlier one touching one of its positions, so the result is the CPU's swap for swap. The
 * earliest pending step always commits, and the number of rounds is O(log n) with high
 * probability (about 20 for n = 1000, 46 for 10^6). The host reads the pending count every
 * ROUNDS_PER_CHECK rounds (a wait, so randperm is not captured in a CUDA graph).
 *
 * multinomial. With replacement: the CPU sums each row's weights in order into a cdf,
 * divides by the total and binary-searches u in [0, 1) per sample. Here one thread per row
 * makes the sums in that order (the same bits), the block divides, and one thread per
 * sample searches (slot base + row * samples + sample, as the CPU). Without replacement:
 * category j of row r gets the key E / w_j (E exponential from slot base + r * ncat + j, +inf
 * for w_j = 0), and the first `samples` categories in key order, equal keys by position,
 * are drawn: cub's stable pair sort (sort_pairs.h), the CPU's qsort with a position
 * tie-break. The keys use the device's log1p, which may differ from glibc's in the last bit,
 * so two keys within an ulp of each other may come out in the other order (cu_elem.h says
 * the same of the elementwise samplers).
 *
 * The probabilities were checked on the host (core/shape_random.c): finite, non-negative,
 * a positive sum per row and, without replacement, enough non-zero categories.
 */
#include "kern.h"
#include "cu_elem.h"
#include "sort_pairs.h"

using namespace tck;

namespace {

enum { ROUNDS_PER_CHECK = 8 };
/* A reservation is (round << STEP_BITS) | step: a later round's outranks any earlier one, so
 * the owners never need clearing between rounds. */
constexpr int STEP_BITS = 40;
constexpr int64_t MAX_PERM = (int64_t)1 << STEP_BITS;

/* ---- randperm ---------------------------------------------------------------------------- */

/* perm[i] = i, and step i's partner j_i (the CPU's draw), or -1 for a step with nothing to
 * do: step 0, and j_i == i (a swap with itself commutes with every other). */
__global__ void perm_init(int64_t n, uint64_t seed, uint64_t base, int64_t *perm, int64_t *partner,
                          unsigned long long *owner)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        perm[i] = i;
        owner[i] = 0;
        int64_t j = -1;
        if (i > 0) {
            tc_philox_block b = tc_philox_at(seed, base + (uint64_t)i, 0);
            j = (int64_t)cu_rand_bounded(seed, base + (uint64_t)i, 0, tc_philox_u64(b.w[0], b.w[1]), (uint64_t)i);
        }
        partner[i] = j == i ? -1 : j;
    }
}

/* Round r: every pending step claims its two positions. left[r & 1] is zeroed for the
 * round's commit to count into; left[(r - 1) & 1] == 0 means every step was done by the
 * previous round (the host has not looked yet), so there is nothing to do. */
__global__ void perm_reserve(int64_t n, const int64_t *partner, unsigned long long *owner, int64_t round,
                             unsigned long long *left)
{
    int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (first == 0) left[round & 1] = 0;
    if (round > 1 && left[(round - 1) & 1] == 0) return;
    const unsigned long long stamp = (unsigned long long)round << STEP_BITS;
    for (int64_t i = first; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = partner[i];
        if (j < 0) continue;
        atomicMax(&owner[i], stamp | (unsigned long long)i);
        atomicMax(&owner[j], stamp | (unsigned long long)i);
    }
}

/* Round r: a step holding both its positions swaps them and is done; the others count
 * themselves in left[r & 1]. */
__global__ void perm_commit(int64_t n, int64_t *perm, int64_t *partner, const unsigned long long *owner,
                            int64_t round, unsigned long long *left)
{
    if (round > 1 && left[(round - 1) & 1] == 0) return;
    const unsigned long long stamp = (unsigned long long)round << STEP_BITS;
    unsigned long long pending = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = partner[i];
        if (j < 0) continue;
        unsigned long long me = stamp | (unsigned long long)i;
        if (owner[i] == me && owner[j] == me) {
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            partner[i] = -1;
        } else {
            pending++;
        }
    }
    if (pending) atomicAdd(&left[round & 1], pending);
}

/* The permutation into a result other than a contiguous int64 one (the CPU's store_ints). */
__global__ void perm_store(int64_t n, const int64_t *perm, char *out, int dt, int64_t stride)
{
    const int es = cu_dtype_size(dt);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        cu_rand_store_int(dt, out + i * stride * es, perm[i]);
}

tc_status randperm(int dev, const tc_cuda_call *c)
{
    const char *name = "randperm";
    const tc_cuda_view &o = c->out[0];
    const int64_t n = o.numel;
    if (n == 0) return TC_OK;
    if (o.ndim != 1 || !o.data) return cu_fail(TC_ERR_ARG, "randperm: needs a 1-dim result with data");
    if (n >= MAX_PERM) return cu_unsupported(c);
    if (cu_capturing(dev))
        return cu_fail(TC_ERR_UNSUPPORTED, "randperm: cannot run while a CUDA graph is being captured on cuda:%d "
                                           "(the host reads how many swaps are left between rounds)", dev);
    const bool direct = o.dtype == TC_I64 && o.stride[0] == 1;
    scratch perm_s(dev), partner(dev), owner(dev), left(dev);
    tc_status s;
    if ((!direct && (s = perm_s.get(sizeof(int64_t) * (size_t)n, name))) ||
        (s = partner.get(sizeof(int64_t) * (size_t)n, name)) ||
        (s = owner.get(sizeof(unsigned long long) * (size_t)n, name)) ||
        (s = left.get(2 * sizeof(unsigned long long), name)))
        return s;
    int64_t *perm = direct ? (int64_t *)o.data : perm_s.as<int64_t>();
    const unsigned grid = grid_for(dev, n);
    perm_init<<<grid, BLOCK, 0, cu_stream()>>>(n, c->philox_seed, c->philox_base, perm, partner.as<int64_t>(),
                                               owner.as<unsigned long long>());
    if ((s = launched(c))) return s;
    for (int64_t round = 1;; round++) {
        perm_reserve<<<grid, BLOCK, 0, cu_stream()>>>(n, partner.as<int64_t>(), owner.as<unsigned long long>(), round,
                                                      left.as<unsigned long long>());
        perm_commit<<<grid, BLOCK, 0, cu_stream()>>>(n, perm, partner.as<int64_t>(), owner.as<unsigned long long>(),
                                                     round, left.as<unsigned long long>());
        if ((s = launched(c))) return s;
        if (round % ROUNDS_PER_CHECK) continue;
        unsigned long long pending = 0; /* 64 bits: n may pass 2^32 (MAX_PERM) */
        s = cu_check(cudaMemcpyAsync(&pending, left.as<unsigned long long>() + (round & 1), sizeof pending,
                                     cudaMemcpyDeviceToHost, cu_stream()),
                     name);
        if (!s) s = cu_check(cudaStreamSynchronize(cu_stream()), name);
        if (s) return s;
        if (pending == 0) break;
        if (round > n) /* each round commits the earliest pending step: cannot happen */
            return cu_fail(TC_ERR_DEVICE, "randperm: %llu swaps still pending after %lld rounds", pending,
                           (long long)round);
    }
    if (!direct) {
        perm_store<<<grid, BLOCK, 0, cu_stream()>>>(n, perm, (char *)o.data, o.dtype, o.stride[0]);
        if ((s = launched(c))) return s;
    }
    return TC_OK;
}

/* ---- multinomial ------------------------------------------------------------------------- */

struct mnargs {
    int64_t rows, ncat, samples;
    const char *p;     /* the probabilities */
    int pdt;
    int64_t prs, pcs;  /* their row and category strides (elements) */
    int64_t *out;      /* the int64 result */
    int64_t ors, ocs;  /* its row and sample strides */
    uint64_t seed, base;
};

/* With replacement, one block per row: thread 0 sums the row in order into cdf (the CPU's
 * bits), then the block divides by the total; the last entry is exactly 1. */
__global__ void mn_cdf(mnargs a, double *cdf)
{
    const int pes = cu_dtype_size(a.pdt);
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        double *row = cdf + r * a.ncat;
        if (threadIdx.x == 0) {
            double sum = 0;
            for (int64_t j = 0; j < a.ncat; j++)
                row[j] = sum += cu_load_as_double(a.pdt, a.p + (r * a.prs + j * a.pcs) * pes);
        }
        __syncthreads();
        const double total = row[a.ncat - 1];
        __syncthreads();
        for (int64_t j = threadIdx.x; j < a.ncat; j += blockDim.x) row[j] = j == a.ncat - 1 ? 1.0 : row[j] / total;
    }
}

/* Sample s of row r: the first category whose cdf entry exceeds u (never a zero weight). */
__global__ void mn_draw(mnargs a, const double *cdf)
{
    const int64_t total = a.rows * a.samples;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / a.samples, s = t % a.samples;
        tc_philox_block b = tc_philox_at(a.seed, a.base + (uint64_t)t, 0);
        const double u = tc_philox_u53(b.w[0], b.w[1]);
        const double *row = cdf + r * a.ncat;
        int64_t lo = 0, hi = a.ncat - 1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (row[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        a.out[r * a.ors + s * a.ocs] = lo;
    }
}

/* Without replacement: category j of row r arrives at E / w_j (the exponential race). */
__global__ void mn_keys(mnargs a, double *key, int64_t *pos, int64_t *offsets)
{
    const int pes = cu_dtype_size(a.pdt);
    const int64_t total = a.rows * a.ncat;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / a.ncat, j = t % a.ncat;
        const double w = cu_load_as_double(a.pdt, a.p + (r * a.prs + j * a.pcs) * pes);
        tc_philox_block b = tc_philox_at(a.seed, a.base + (uint64_t)t, 0);
        const double e = -log1p(-tc_philox_u53(b.w[0], b.w[1]));
        double k = w > 0 ? e / w : (double)INFINITY;
        key[t] = k == 0 ? 0.0 : k; /* -0.0 (u = 0) as +0.0: both orders then agree it equals 0 */
        pos[t] = j;
        if (j == 0) offsets[r] = t;
        if (t == total - 1) offsets[a.rows] = total;
    }
}

__global__ void mn_take(mnargs a, const int64_t *sorted_pos)
{
    const int64_t total = a.rows * a.samples;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / a.samples, s = t % a.samples;
        a.out[r * a.ors + s * a.ocs] = sorted_pos[r * a.ncat + s];
    }
}

tc_status multinomial(int dev, const tc_cuda_call *c)
{
    const char *name = "multinomial";
    if (c->nin < 1 || !c->in) return cu_fail(TC_ERR_ARG, "multinomial: needs a probability tensor");
    const tc_cuda_view &p = c->in[0], &o = c->out[0];
    if (p.ndim != 1 && p.ndim != 2) return cu_fail(TC_ERR_SHAPE, "multinomial: probabilities must be 1-D or 2-D");
    if (o.dtype != TC_I64 || o.ndim != p.ndim) return cu_fail(TC_ERR_ARG, "multinomial: needs an int64 result of the probabilities' rank");
    if (!(p.dtype == TC_F32 || p.dtype == TC_F64 || p.dtype == TC_F16 || p.dtype == TC_BF16)) return cu_unsupported(c);
    if (c->philox_key) /* libtocha checks the probabilities on the host first: never captured */
        return cu_fail(TC_ERR_UNSUPPORTED, "multinomial: not captured in a CUDA graph");
    mnargs a{};
    a.rows = p.ndim == 2 ? p.size[0] : 1;
    a.ncat = p.size[p.ndim - 1];
    a.samples = c->params.i[0];
    const bool repl = c->params.i[1] != 0;
    if (o.numel == 0 || a.rows == 0) return TC_OK;
    if (a.ncat < 1 || a.samples < 1 || (!repl && a.samples > a.ncat) || o.size[o.ndim - 1] != a.samples ||
        (o.ndim == 2 && o.size[0] != a.rows))
        return cu_fail(TC_ERR_SHAPE, "multinomial: %lld samples from %lld rows of %lld categories into a result of "
                                     "%lld elements", (long long)a.samples, (long long)a.rows, (long long)a.ncat,
                       (long long)o.numel);
    if (!p.data || !o.data) return cu_fail(TC_ERR_ARG, "multinomial: missing device data");
    if (views_overlap(p, o)) return cu_unsupported(c);
    a.p = (const char *)p.data;
    a.pdt = p.dtype;
    a.prs = p.ndim == 2 ? p.stride[0] : 0, a.pcs = p.stride[p.ndim - 1];
    a.out = (int64_t *)o.data;
    a.ors = o.ndim == 2 ? o.stride[0] : 0, a.ocs = o.stride[o.ndim - 1];
    a.seed = c->philox_seed, a.base = c->philox_base;
    const int64_t cells = a.rows * a.ncat;
    tc_status s;
    if (repl) {
        scratch cdf(dev);
        if ((s = cdf.get(sizeof(double) * (size_t)cells, name))) return s;
        unsigned rows_grid = (unsigned)(a.rows < (int64_t)sm_count(dev) * 8 ? a.rows : (int64_t)sm_count(dev) * 8);
        mn_cdf<<<rows_grid, BLOCK, 0, cu_stream()>>>(a, cdf.as<double>());
        mn_draw<<<grid_for(dev, a.rows * a.samples), BLOCK, 0, cu_stream()>>>(a, cdf.as<double>());
        return launched(c);
    }
    scratch kin(dev), kout(dev), pin(dev), pout(dev), offs(dev), tmp(dev);
    if ((s = kin.get(sizeof(double) * (size_t)cells, name)) || (s = kout.get(sizeof(double) * (size_t)cells, name)) ||
        (s = pin.get(sizeof(int64_t) * (size_t)cells, name)) || (s = pout.get(sizeof(int64_t) * (size_t)cells, name)) ||
        (s = offs.get(sizeof(int64_t) * (size_t)(a.rows + 1), name)))
        return s;
    mn_keys<<<grid_for(dev, cells), BLOCK, 0, cu_stream()>>>(a, kin.as<double>(), pin.as<int64_t>(), offs.as<int64_t>());
    if ((s = launched(c))) return s;
    if ((s = sort_pairs<double>(tmp, kin.as<double>(), kout.as<double>(), pin.as<int64_t>(), pout.as<int64_t>(), a.rows,
                                a.ncat, offs.as<int64_t>(), name)))
        return s;
    mn_take<<<grid_for(dev, a.rows * a.samples), BLOCK, 0, cu_stream()>>>(a, pout.as<int64_t>());
    return launched(c);
}

} /* namespace */

tc_status cu_op_random_seq(int dev, const tc_cuda_call *c)
{
    if (c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: no result", cu_op_name(c->op));
    if (c->op == TC_OP_RANDPERM) return randperm(dev, c);
    if (c->op == TC_OP_MULTINOMIAL) return multinomial(dev, c);
    return cu_unsupported(c);
}
