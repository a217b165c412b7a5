/* reduce.cu -- CUDA kernels of the reduce kind: sum prod mean var std norm max min all any.
 *
 * The semantics are the CPU's (core/cpu/reduce.c, prepare in core/shape_reduce.c): each op
 * is a "flavour" (a fold such as a double sum, a wrapping int64 sum, a count of non-zeros,
 * an arg-max) plus a finish (mean divides, std takes the root, all compares the count with
 * n). Float inputs accumulate in double (f16/bf16 widen through float), integer and bool
 * inputs in int64 wrapping as unsigned, so integer results are bit-exact in any order;
 * float results differ from the CPU only by the order of the additions.
 * max/min keep the FIRST position of the best value, NaN ranking above everything (the
 * first NaN wins); partial results carry their position and merge with the position as the
 * tie-break, so the answer does not depend on how the work was split.
 *
 * One kernel serves every geometry. The output's kept dims and the reduced dims are
 * coalesced on the host; a GROUP of G threads (G a power of two, 1..256) folds one output,
 * lane l taking reduced positions l, l+G, ..., then the group merges its lanes in a fixed
 * shared-memory tree (deterministic). G is chosen per call: contiguous rows get up to a
 * block per output; a reduced dim that is outer to a contiguous kept dim ("columns") gets
 * one thread per output, so neighbouring threads read neighbouring addresses. When the
 * outputs are too few to fill the device (every full reduction), each output's reduced
 * range is cut into `splits` chunks folded by separate groups into partials, which a second
 * kernel merges in chunk order. var/std fold twice (mean, then squared deviations), as the
 * CPU does: inside one group when the row is not split, else through a per-output mean.
 */
#include "kern.h"
#include <math.h>

using namespace tck;

namespace {

enum { F_SUM, F_PROD, F_CNZ, F_SQDEV, F_ABS, F_SQ, F_POW, F_AMAX, F_AMIN, F_MAX, F_MIN };

/* d: float folds; i: integer folds and counts (wrapping); idx: arg position, -1 = empty. */
struct acc_t {
    double d;
    int64_t i;
    int64_t idx;
};

struct rargs {
    int op, flav, odt, G, splits;
    bool unbiased;
    double q;            /* norm's p */
    int64_t n, nout;     /* elements per output, outputs */
    int64_t chunk;       /* reduced positions per split */
    const double *qarr;  /* var/std split: each output's mean (pass 2) */
    acc_t *part;         /* partials, [o * splits + s] */
    double *mean_out;    /* combine of pass 1 writes the means here */
    void *out0;
    int64_t *out1;       /* max/min indices, or NULL */
};

__host__ __device__ inline double nanmax(double a, double b) { return (b > a || b != b) ? b : a; }
__host__ __device__ inline double nanmin(double a, double b) { return (b < a || b != b) ? b : a; }

template <int F> __host__ __device__ inline acc_t ident()
{
    acc_t a{0.0, 0, -1};
    if (F == F_PROD) a.d = 1.0, a.i = 1;
    if (F == F_AMIN) a.d = INFINITY;
    return a;
}

/* Folds element x at reduced position pos into a (q: the mean for var, p for norm). A
 * lane sees its positions in increasing order, so a strict comparison keeps the first. */
template <int F, bool FL, class C> __host__ __device__ inline void step(acc_t &a, C x, double q, int64_t pos)
{
    if constexpr (F == F_SUM) {
        if constexpr (FL) a.d += (double)x;
        else a.i = (int64_t)((uint64_t)a.i + (uint64_t)(int64_t)x);
    } else if constexpr (F == F_PROD) {
        if constexpr (FL) a.d *= (double)x;
        else a.i = (int64_t)((uint64_t)a.i * (uint64_t)(int64_t)x);
    } else if constexpr (F == F_CNZ) {
        a.i = (int64_t)((uint64_t)a.i + (uint64_t)(x != 0));
    } else if constexpr (F == F_SQDEV) {
        double v = (double)x - q;
        a.d += v * v;
    } else if constexpr (F == F_ABS) {
        a.d += fabs((double)x);
    } else if constexpr (F == F_SQ) {
        a.d += (double)x * (double)x;
    } else if constexpr (F == F_POW) {
        a.d += pow(fabs((double)x), q);
    } else if constexpr (F == F_AMAX) {
        a.d = nanmax(a.d, fabs((double)x));
    } else if constexpr (F == F_AMIN) {
        a.d = nanmin(a.d, fabs((double)x));
    } else { /* F_MAX, F_MIN */
        if constexpr (FL) {
            double v = (double)x;
            if (a.idx < 0 || (F == F_MAX ? better_max(v, a.d) : better_min(v, a.d))) a.d = v, a.idx = pos;
        } else {
            int64_t v = (int64_t)x;
            if (a.idx < 0 || (F == F_MAX ? v > a.i : v < a.i)) a.i = v, a.idx = pos;
        }
    }
}

/* a := a merged with b (any two disjoint parts, in any order: arg folds break ties by
 * position, and the sums are order-free up to float rounding). */
template <int F, bool FL> __host__ __device__ inline void merge(acc_t &a, const acc_t &b)
{
    if constexpr (F == F_MAX || F == F_MIN) {
        if (b.idx < 0) return;
        bool take = a.idx < 0;
        if (!take) {
            if constexpr (FL) {
                bool bb = F == F_MAX ? better_max(b.d, a.d) : better_min(b.d, a.d);
                bool ab = F == F_MAX ? better_max(a.d, b.d) : better_min(a.d, b.d);
                take = bb || (!ab && b.idx < a.idx);
            } else {
                take = (F == F_MAX ? b.i > a.i : b.i < a.i) || (b.i == a.i && b.idx < a.idx);
            }
        }
        if (take) a = b;
    } else if constexpr (F == F_PROD) {
        a.d *= b.d;
        a.i = (int64_t)((uint64_t)a.i * (uint64_t)b.i);
    } else if constexpr (F == F_AMAX) {
        a.d = nanmax(a.d, b.d);
    } else if constexpr (F == F_AMIN) {
        a.d = nanmin(a.d, b.d);
    } else {
        a.d += b.d;
        a.i = (int64_t)((uint64_t)a.i + (uint64_t)b.i);
    }
}

/* The accumulator turned into the result (reduce.c's finish): d for float outputs, i for
 * the others. */
__host__ __device__ inline void finish_value(int op, int flav, int64_t n, bool unbiased, double q, acc_t &a)
{
    double nn = (double)n;
    switch (op) {
    case TC_OP_MEAN: a.d /= nn; break; /* n = 0: NaN */
    case TC_OP_VAR:
    case TC_OP_STD: {
        double den = nn - (unbiased ? 1 : 0);
        a.d = den > 0 ? a.d / den : NAN;
        if (op == TC_OP_STD) a.d = sqrt(a.d);
        break;
    }
    case TC_OP_NORM:
        if (flav == F_CNZ) a.d = (double)a.i;
        else if (flav == F_SQ) a.d = sqrt(a.d);
        else if (flav == F_POW) a.d = pow(a.d, 1.0 / q);
        break;
    case TC_OP_ALL: a.i = a.i == n; break;
    case TC_OP_ANY: a.i = a.i != 0; break;
    default: break;
    }
}

__device__ void put_out(void *base, int64_t off, int odt, const acc_t &a)
{
    switch (odt) {
    case TC_F32: st((float *)base + off, a.d); break;
    case TC_F64: st((double *)base + off, a.d); break;
    case TC_F16: st((__half *)base + off, a.d); break;
    case TC_BF16: st((__nv_bfloat16 *)base + off, a.d); break;
    case TC_U8: st((uint8_t *)base + off, a.i); break;
    case TC_I8: st((int8_t *)base + off, a.i); break;
    case TC_I16: st((int16_t *)base + off, a.i); break;
    case TC_I32: st((int32_t *)base + off, a.i); break;
    case TC_I64: st((int64_t *)base + off, a.i); break;
    default: st((bool *)base + off, a.i); break;
    }
}

__device__ void finish_store(const rargs &a, acc_t acc, const int64_t *off)
{
    finish_value(a.op, a.flav, a.n, a.unbiased, a.q, acc);
    put_out(a.out0, off[1], a.odt, acc);
    if (a.out1) a.out1[off[2]] = acc.idx;
}

/* Merges the G lanes of each group (G consecutive threads) in a fixed tree; every thread
 * of the block must call it (it synchronises); each lane gets its group's result. */
template <int F, bool FL> __device__ acc_t group_reduce(acc_t *sm, acc_t v, int G, int lane)
{
    if (G == 1) return v;
    __syncthreads(); /* earlier readers of sm are done */
    sm[threadIdx.x] = v;
    for (int s = G / 2; s > 0; s >>= 1) {
        __syncthreads();
        if (lane < s) merge<F, FL>(sm[threadIdx.x], sm[threadIdx.x + s]);
    }
    __syncthreads();
    return sm[threadIdx.x - lane];
}

/* Offset of reduced position r (one strided dim after coalescing, in the common case). */
__device__ __forceinline__ int64_t red_off(const geo<1> &rg, int64_t r)
{
    return rg.nd == 1 ? r * rg.st[0][0] : flat_offset(r, rg.nd, rg.size, rg.st[0]);
}

/* Group gi folds split s = gi / nout of output o = gi % nout (neighbouring threads take
 * neighbouring outputs: coalesced when G is 1 and the kept dim is contiguous). */
template <int DT, int F>
__global__ void __launch_bounds__(BLOCK) reduce_kernel(const typename dt<DT>::S *x, geo<3> kg, geo<1> rg, rargs a)
{
    constexpr bool FL = dt<DT>::FL;
    __shared__ acc_t sm[BLOCK];
    const int G = a.G, lane = (int)threadIdx.x & (G - 1), gpb = BLOCK / G;
    const int64_t ngroups = a.nout * a.splits;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < ngroups; base += (int64_t)gridDim.x * gpb) {
        const int64_t gi = base + (int64_t)threadIdx.x / G;
        const bool live = gi < ngroups;
        const int64_t o = live ? gi % a.nout : 0, s = live ? gi / a.nout : 0;
        int64_t off[3];
        geo_offsets(kg, o, off);
        const typename dt<DT>::S *row = x + off[0];
        const int64_t r0 = s * a.chunk, r1 = !live ? r0 : (a.n < r0 + a.chunk ? a.n : r0 + a.chunk);
        double q = a.q;
        if constexpr (F == F_SQDEV) {
            if (a.qarr) {
                if (live) q = a.qarr[o];
            } else { /* unsplit: the mean pass inside the group */
                acc_t m = ident<F_SUM>();
                for (int64_t r = r0 + lane; r < r1; r += G) step<F_SUM, FL>(m, ld(row + red_off(rg, r)), 0.0, r);
                m = group_reduce<F_SUM, FL>(sm, m, G, lane);
                q = m.d / (double)a.n;
            }
        }
        acc_t acc = ident<F>();
        for (int64_t r = r0 + lane; r < r1; r += G) step<F, FL>(acc, ld(row + red_off(rg, r)), q, r);
        acc = group_reduce<F, FL>(sm, acc, G, lane);
        if (live && lane == 0) {
            if (a.splits == 1) finish_store(a, acc, off);
            else a.part[o * a.splits + s] = acc;
        }
    }
}

/* Merges each output's partials (a group of G lanes per output); mean_mode: writes the mean
 * (pass 1 of a split var/std) instead of the result. */
template <int DT, int F> __global__ void __launch_bounds__(BLOCK) combine_kernel(geo<3> kg, rargs a, int mean_mode)
{
    constexpr bool FL = dt<DT>::FL;
    __shared__ acc_t sm[BLOCK];
    const int G = a.G, lane = (int)threadIdx.x & (G - 1), gpb = BLOCK / G;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < a.nout; base += (int64_t)gridDim.x * gpb) {
        const int64_t o = base + (int64_t)threadIdx.x / G;
        const bool live = o < a.nout;
        acc_t acc = ident<F>();
        if (live)
            for (int s = lane; s < a.splits; s += G) merge<F, FL>(acc, a.part[o * a.splits + s]);
        acc = group_reduce<F, FL>(sm, acc, G, lane);
        if (!live || lane != 0) continue;
        if (mean_mode) {
            a.mean_out[o] = acc.d / (double)a.n;
        } else {
            int64_t off[3];
            geo_offsets(kg, o, off);
            finish_store(a, acc, off);
        }
    }
}

/* ---- host side ---------------------------------------------------------------------------- */

int flavour_of(int op, double p)
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
        return p == 0 ? F_CNZ
               : p == 1 ? F_ABS
               : p == 2 ? F_SQ
               : p == INFINITY ? F_AMAX
               : p == -INFINITY ? F_AMIN
               : F_POW;
    default: return F_SUM; /* sum, mean */
    }
}

/* The dtypes each op takes (ops.def flags; all/any: uint8 and bool only). */
bool takes(int op, int d)
{
    bool fl = d == TC_F32 || d == TC_F64 || d == TC_F16 || d == TC_BF16, bl = d == TC_BOOL;
    switch (op) {
    case TC_OP_SUM: return true;
    case TC_OP_PROD:
    case TC_OP_MAX:
    case TC_OP_MIN: return !bl;
    case TC_OP_ALL:
    case TC_OP_ANY: return d == TC_U8 || bl;
    default: return fl; /* mean var std norm */
    }
}

/* Which flavours exist for a dtype class (the CPU's tables). */
template <int DT, int F> constexpr bool flav_ok()
{
    if (dt<DT>::FL) return true;
    if (dt<DT>::INT) return F == F_SUM || F == F_PROD || F == F_CNZ || F == F_MAX || F == F_MIN;
    return F == F_SUM || F == F_CNZ;
}

struct plan {
    geo<3> kg; /* kept dims: input, out0, out1 */
    geo<1> rg; /* reduced dims of the input */
    rargs a;
    int CG; /* combine group size */
};

template <int DT, int F> tc_status launch_pass(int dev, const tc_cuda_call *c, const plan &p, const rargs &a, bool mean)
{
    using S = typename dt<DT>::S;
    const S *x = (const S *)c->in[0].data;
    int64_t groups = a.nout * a.splits;
    reduce_kernel<DT, F><<<grid_for(dev, groups * a.G), BLOCK, 0, cu_stream()>>>(x, p.kg, p.rg, a);
    tc_status s = launched(c);
    if (s || a.splits == 1) return s;
    rargs b = a;
    b.G = p.CG;
    combine_kernel<DT, F><<<grid_for(dev, a.nout * p.CG), BLOCK, 0, cu_stream()>>>(p.kg, b, mean ? 1 : 0);
    return launched(c);
}

template <int DT, int F> tc_status run_flav(int dev, const tc_cuda_call *c, plan &p)
{
    if constexpr (!flav_ok<DT, F>()) {
        return cu_unsupported(c);
    } else {
        scratch part(dev), means(dev);
        if (p.a.splits > 1) {
            tc_status s = part.get(sizeof(acc_t) * (size_t)(p.a.nout * p.a.splits), cu_op_name(c->op));
            if (s) return s;
            p.a.part = part.as<acc_t>();
        }
        if (F == F_SQDEV && p.a.splits > 1) { /* pass 1: the means, per output */
            tc_status s = means.get(sizeof(double) * (size_t)p.a.nout, cu_op_name(c->op));
            if (s) return s;
            rargs m = p.a;
            m.flav = F_SUM;
            m.mean_out = means.as<double>();
            if ((s = launch_pass<DT, F_SUM>(dev, c, p, m, true))) return s;
            p.a.qarr = means.as<double>();
        }
        return launch_pass<DT, F>(dev, c, p, p.a, false);
    }
}

/* Fills the geometry: kept dims coalesced over input and outputs, the reduced dim(s). */
void build(const tc_cuda_call *c, bool all, int d, plan &p)
{
    const tc_cuda_view &x = c->in[0], &o0 = c->out[0];
    const tc_cuda_view *o1 = c->nout > 1 && c->out[1].data ? &c->out[1] : nullptr;
    geo<3> &kg = p.kg;
    geo<1> &rg = p.rg;
    kg = geo<3>{};
    rg = geo<1>{};
    if (all) {
        /* One fold over everything: walk in memory order (dims by decreasing stride), so a
         * transposed tensor reads as one run after coalescing. */
        p.a.nout = 1;
        p.a.n = x.numel;
        for (int i = 0; i < x.ndim; i++) {
            int at = i;
            for (; at > 0 && rg.st[0][at - 1] < x.stride[i]; at--) rg.size[at] = rg.size[at - 1], rg.st[0][at] = rg.st[0][at - 1];
            rg.size[at] = x.size[i], rg.st[0][at] = x.stride[i];
        }
        rg.nd = x.ndim;
    } else {
        bool keep = o0.ndim == x.ndim;
        int m = 0;
        for (int i = 0; i < x.ndim; i++) {
            if (i == d) continue;
            int od = keep || i < d ? i : i - 1;
            kg.size[m] = x.size[i];
            kg.st[0][m] = x.stride[i];
            kg.st[1][m] = o0.stride[od];
            kg.st[2][m] = o1 ? o1->stride[od] : 0;
            m++;
        }
        kg.nd = m;
        p.a.nout = o0.numel;
        p.a.n = x.size[d];
        rg.nd = 1;
        rg.size[0] = x.size[d];
        rg.st[0][0] = x.stride[d];
    }
    if (p.a.n == 0) { /* nothing is read: one dummy dim keeps the offset math defined */
        rg.nd = 1, rg.size[0] = 1, rg.st[0][0] = 0;
    } else {
        geo_coalesce(rg);
        if (rg.nd == 0) rg.nd = 1, rg.size[0] = 1, rg.st[0][0] = 0;
    }
    geo_coalesce(kg);
}

/* Group size and splits: see the banner. */
void choose(int dev, plan &p)
{
    const int64_t n = p.a.n, nout = p.a.nout, T = (int64_t)sm_count(dev) * 2048;
    const geo<1> &rg = p.rg;
    const geo<3> &kg = p.kg;
    bool rows = rg.st[0][rg.nd - 1] == 1;
    bool cols = !rows && kg.nd > 0 && kg.st[0][kg.nd - 1] == 1 && nout >= 32;
    int G = 1;
    if (!cols)
        while (G < BLOCK && (int64_t)G * 2 <= n) G *= 2;
    int64_t splits = 1, busy = nout * G;
    if (busy < T && n > (int64_t)G * 64) {
        int64_t want = (T + busy - 1) / busy, most = n / ((int64_t)G * 64);
        splits = want < most ? want : most;
        if (splits > 1024) splits = 1024;
        if (splits < 1) splits = 1;
    }
    p.a.chunk = (n + splits - 1) / splits;
    if (p.a.chunk < 1) p.a.chunk = 1;
    splits = (n + p.a.chunk - 1) / p.a.chunk;
    p.a.splits = (int)(splits < 1 ? 1 : splits);
    p.a.G = G;
    int CG = 1;
    while (CG < BLOCK && CG * 2 <= p.a.splits) CG *= 2;
    p.CG = CG;
}

} /* namespace */

tc_status cu_op_reduce(int dev, const tc_cuda_call *c)
{
    if (c->nin < 1 || c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: bad call", cu_op_name(c->op));
    const tc_cuda_view &x = c->in[0];
    if (!takes(c->op, x.dtype)) return cu_unsupported(c);
    if (c->out[0].numel == 0) return TC_OK;
    if (!c->out[0].data || (x.numel > 0 && !x.data))
        return cu_fail(TC_ERR_ARG, "%s: missing device data", cu_op_name(c->op));
    int64_t dim = c->params.i[0];
    bool all = dim == -1 || x.ndim == 0;
    int d = all ? 0 : (int)(dim < -1 ? dim + x.ndim : dim);
    if (!all && (d < 0 || d >= x.ndim))
        return cu_fail(TC_ERR_INDEX, "%s: dim %lld out of range for a %d-dim input", cu_op_name(c->op), (long long)dim,
                       x.ndim);
    plan p{};
    p.a.op = c->op;
    p.a.q = c->params.s[0];
    p.a.flav = flavour_of(c->op, p.a.q);
    p.a.odt = c->out[0].dtype;
    p.a.unbiased = c->params.i[2] != 0;
    p.a.out0 = c->out[0].data;
    p.a.out1 = !all && c->nout > 1 ? (int64_t *)c->out[1].data : nullptr;
    build(c, all, d, p);
    choose(dev, p);
    return with_dtype(x.dtype, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        switch (p.a.flav) {
        case F_SUM: return run_flav<DT, F_SUM>(dev, c, p);
        case F_PROD: return run_flav<DT, F_PROD>(dev, c, p);
        case F_CNZ: return run_flav<DT, F_CNZ>(dev, c, p);
        case F_SQDEV: return run_flav<DT, F_SQDEV>(dev, c, p);
        case F_ABS: return run_flav<DT, F_ABS>(dev, c, p);
        case F_SQ: return run_flav<DT, F_SQ>(dev, c, p);
        case F_POW: return run_flav<DT, F_POW>(dev, c, p);
        case F_AMAX: return run_flav<DT, F_AMAX>(dev, c, p);
        case F_AMIN: return run_flav<DT, F_AMIN>(dev, c, p);
        case F_MAX: return run_flav<DT, F_MAX>(dev, c, p);
        default: return run_flav<DT, F_MIN>(dev, c, p);
        }
    });
}
