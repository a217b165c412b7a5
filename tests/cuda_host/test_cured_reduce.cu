/* test_cured_reduce.cu -- host checks of core/cuda/reduce.cu, runnable without a GPU.
 *
 * The file includes reduce.cu itself and runs its host planning (build, choose) and its
 * __host__ __device__ element functions (ident, step, merge, finish_value, geo_offsets,
 * flat_offset, geo_coalesce) through a host emulation of the kernels' schedule: per output
 * and split, G lanes folding positions lane, lane+G, ..., the shared-memory tree merge in
 * the kernel's order, the partials merged by the combine kernel's lanes and tree, and the
 * two passes of a split var/std. The results are compared with libtocha's CPU kernels
 * (tc_op_run) on random strided inputs: integer results and max/min values and indices bit
 * for bit, float results to rounding. What this cannot see: CUDA itself (launch bounds,
 * synchronisation, device loads); those run in the lead's GPU conformance test.
 * Build and run (from the repository root, after `make BUILD=build-X build-X/libtocha.so`):
 *   nvcc -std=c++17 -arch=sm_90 -Icore tests/cuda_host/test_cured_reduce.cu -Lbuild-X -ltocha \
 *       -Xlinker -rpath,$PWD/build-X -o /tmp/test_cured_reduce && /tmp/test_cured_reduce
 * Prints one line per failure and "N passed, N failed" at the end (exit 1 on failures).
 */
#include "cuda/reduce.cu"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "host_check.h"


/* ---- host loads and stores (the kernel's ld/st are device functions) ---------------------- */

template <int DT> static typename dt<DT>::C hld(const void *base, int64_t off)
{
    using S = typename dt<DT>::S;
    const S *p = (const S *)base + off;
    if constexpr (DT == TC_F16) return __half2float(*p);
    else if constexpr (DT == TC_BF16) return __bfloat162float(*p);
    else return *p;
}

static void hput(void *base, int64_t off, int odt, const acc_t &a)
{
    switch (odt) {
    case TC_F32: ((float *)base)[off] = (float)a.d; break;
    case TC_F64: ((double *)base)[off] = a.d; break;
    case TC_F16: ((__half *)base)[off] = __float2half_rn((float)a.d); break;
    case TC_BF16: ((__nv_bfloat16 *)base)[off] = __float2bfloat16_rn((float)a.d); break;
    case TC_U8: ((uint8_t *)base)[off] = (uint8_t)a.i; break;
    case TC_I8: ((int8_t *)base)[off] = (int8_t)a.i; break;
    case TC_I16: ((int16_t *)base)[off] = (int16_t)a.i; break;
    case TC_I32: ((int32_t *)base)[off] = (int32_t)a.i; break;
    case TC_I64: ((int64_t *)base)[off] = a.i; break;
    default: ((bool *)base)[off] = a.i != 0; break;
    }
}

static void hfinish(const rargs &a, acc_t acc, const int64_t *off)
{
    finish_value(a.op, a.flav, a.n, a.unbiased, a.q, acc);
    hput(a.out0, off[1], a.odt, acc);
    if (a.out1) a.out1[off[2]] = acc.idx;
}

/* The group's lanes merged as group_reduce merges them. */
template <int F, bool FL> static acc_t tree(std::vector<acc_t> v)
{
    for (size_t s = v.size() / 2; s > 0; s >>= 1)
        for (size_t l = 0; l < s; l++) merge<F, FL>(v[l], v[l + s]);
    return v[0];
}

static int64_t hred_off(const geo<1> &rg, int64_t r) { return rg.nd == 1 ? r * rg.st[0][0] : flat_offset(r, rg.nd, rg.size, rg.st[0]); }

/* reduce_kernel, one group at a time. */
template <int DT, int F> static void emu_pass(const void *x, const plan &p, const rargs &a, std::vector<acc_t> &part)
{
    constexpr bool FL = dt<DT>::FL;
    for (int64_t o = 0; o < a.nout; o++)
        for (int64_t s = 0; s < a.splits; s++) {
            int64_t off[3];
            geo_offsets(p.kg, o, off);
            int64_t r0 = s * a.chunk, r1 = a.n < r0 + a.chunk ? a.n : r0 + a.chunk;
            double q = a.q;
            if (F == F_SQDEV) {
                if (a.qarr) {
                    q = a.qarr[o];
                } else {
                    std::vector<acc_t> m(a.G, ident<F_SUM>());
                    for (int l = 0; l < a.G; l++)
                        for (int64_t r = r0 + l; r < r1; r += a.G)
                            step<F_SUM, FL>(m[l], hld<DT>(x, off[0] + hred_off(p.rg, r)), 0.0, r);
                    q = tree<F_SUM, FL>(m).d / (double)a.n;
                }
            }
            std::vector<acc_t> lanes(a.G, ident<F>());
            for (int l = 0; l < a.G; l++)
                for (int64_t r = r0 + l; r < r1; r += a.G) step<F, FL>(lanes[l], hld<DT>(x, off[0] + hred_off(p.rg, r)), q, r);
            acc_t acc = tree<F, FL>(lanes);
            if (a.splits == 1) hfinish(a, acc, off);
            else part[o * a.splits + s] = acc;
        }
}

/* combine_kernel. */
template <int DT, int F> static void emu_combine(const plan &p, const rargs &a, const std::vector<acc_t> &part, double *mean)
{
    constexpr bool FL = dt<DT>::FL;
    for (int64_t o = 0; o < a.nout; o++) {
        std::vector<acc_t> lanes(p.CG, ident<F>());
        for (int l = 0; l < p.CG; l++)
            for (int s = l; s < a.splits; s += p.CG) merge<F, FL>(lanes[l], part[o * a.splits + s]);
        acc_t acc = tree<F, FL>(lanes);
        if (mean) {
            mean[o] = acc.d / (double)a.n;
        } else {
            int64_t off[3];
            geo_offsets(p.kg, o, off);
            hfinish(a, acc, off);
        }
    }
}

/* run_flav / launch_pass on the host. */
template <int DT, int F> static void emu_flav(const void *x, plan p)
{
    if constexpr (flav_ok<DT, F>()) {
        std::vector<acc_t> part((size_t)(p.a.nout * p.a.splits));
        std::vector<double> means((size_t)p.a.nout);
        if (F == F_SQDEV && p.a.splits > 1) {
            rargs m = p.a;
            m.flav = F_SUM;
            emu_pass<DT, F_SUM>(x, p, m, part);
            emu_combine<DT, F_SUM>(p, m, part, means.data());
            p.a.qarr = means.data();
        }
        emu_pass<DT, F>(x, p, p.a, part);
        if (p.a.splits > 1) emu_combine<DT, F>(p, p.a, part, nullptr);
    }
}

/* cu_op_reduce with the launches replaced by the emulation; returns 0 if it would launch. */
static int emu_reduce(const tc_cuda_call *c)
{
    const tc_cuda_view &x = c->in[0];
    if (!takes(c->op, x.dtype)) return 1;
    if (c->out[0].numel == 0) return 0;
    int64_t dim = c->params.i[0];
    bool all = dim == -1 || x.ndim == 0;
    int d = all ? 0 : (int)(dim < -1 ? dim + x.ndim : dim);
    plan p{};
    p.a.op = c->op;
    p.a.q = c->params.s[0];
    p.a.flav = flavour_of(c->op, p.a.q);
    p.a.odt = c->out[0].dtype;
    p.a.unbiased = c->params.i[2] != 0;
    p.a.out0 = c->out[0].data;
    p.a.out1 = !all && c->nout > 1 ? (int64_t *)c->out[1].data : nullptr;
    build(c, all, d, p);
    choose(0, p);
    (void)with_dtype(x.dtype, [&](auto tag) -> tc_status {
        constexpr int DT = decltype(tag)::value;
        switch (p.a.flav) {
        case F_SUM: emu_flav<DT, F_SUM>(x.data, p); break;
        case F_PROD: emu_flav<DT, F_PROD>(x.data, p); break;
        case F_CNZ: emu_flav<DT, F_CNZ>(x.data, p); break;
        case F_SQDEV: emu_flav<DT, F_SQDEV>(x.data, p); break;
        case F_ABS: emu_flav<DT, F_ABS>(x.data, p); break;
        case F_SQ: emu_flav<DT, F_SQ>(x.data, p); break;
        case F_POW: emu_flav<DT, F_POW>(x.data, p); break;
        case F_AMAX: emu_flav<DT, F_AMAX>(x.data, p); break;
        case F_AMIN: emu_flav<DT, F_AMIN>(x.data, p); break;
        case F_MAX: emu_flav<DT, F_MAX>(x.data, p); break;
        default: emu_flav<DT, F_MIN>(x.data, p); break;
        }
        return TC_OK;
    });
    return 0;
}

/* ---- the comparison --------------------------------------------------------------------------- */

static tc_cuda_view view_of(const tc_tensor *t)
{
    tc_cuda_view v{};
    v.data = tc_tensor_data(t);
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) v.size[d] = t->size[d], v.stride[d] = t->stride[d];
    v.numel = tc_tensor_numel(t);
    return v;
}

static double get(const tc_tensor *t, int64_t lin)
{
    int64_t idx[TC_MAX_DIMS], rem = lin;
    for (int d = t->ndim - 1; d >= 0; d--) idx[d] = rem % t->size[d], rem /= t->size[d];
    double v = 0;
    tc_tensor_get(t, idx, &v);
    return v;
}

static bool close(double a, double b, int dtype)
{
    if (a != a || b != b) return a != a && b != b;
    if (a == b) return true;
    double tol = dtype == TC_F64 ? 1e-10 : dtype == TC_F32 ? 1e-5 : 1e-2;
    return fabs(a - b) <= tol * (fabs(a) > fabs(b) ? fabs(a) : fabs(b)) + tol * 1e-3;
}

static const int OPS[] = {TC_OP_SUM, TC_OP_PROD, TC_OP_MEAN, TC_OP_VAR, TC_OP_STD,
                          TC_OP_NORM, TC_OP_MAX, TC_OP_MIN, TC_OP_ALL, TC_OP_ANY};

static bool cpu_takes(int op, int d) { return takes(op, d); }

/* Fills x (contiguous storage) with values from a small range (ties), NaN now and then. */
static void fill(tc_tensor *x, bool nans, bool sparse)
{
    int64_t n = x->storage->nbytes / (int64_t)tck::elsize(x->dtype);
    void *p = x->storage->data;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)(rint_(9) - 4) / (x->dtype == TC_F32 || x->dtype == TC_F64 ? 3.0 : 1.0);
        if (sparse && rint_(3)) v = 0;
        if (nans && rint_(40) == 0) v = NAN;
        switch (x->dtype) {
        case TC_F32: ((float *)p)[i] = (float)v; break;
        case TC_F64: ((double *)p)[i] = v; break;
        case TC_F16: ((__half *)p)[i] = __float2half_rn((float)v); break;
        case TC_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
        case TC_U8: ((uint8_t *)p)[i] = (uint8_t)(v + 4); break;
        case TC_I8: ((int8_t *)p)[i] = (int8_t)(v * 30); break;
        case TC_I16: ((int16_t *)p)[i] = (int16_t)(v * 9000); break;
        case TC_I32: ((int32_t *)p)[i] = (int32_t)(v * 1000003); break;
        case TC_I64: ((int64_t *)p)[i] = (int64_t)v * 4000000000037LL; break;
        default: ((bool *)p)[i] = v > 0; break;
        }
    }
}

/* One case: x of sizes sz (permuted by perm), op along dim with keepdim. */
static void one_case(int op, int dtype, int nd, const int64_t *sz, const int *perm, int64_t dim, int keep, double p,
                     bool nans)
{
    int64_t base[TC_MAX_DIMS], bst[TC_MAX_DIMS], vs[TC_MAX_DIMS], vst[TC_MAX_DIMS];
    for (int d = 0; d < nd; d++) base[d] = sz[perm[d]];
    tc_tensor *b = NULL, *x = NULL;
    if (tc_tensor_new((tc_dtype)dtype, nd, base, &b)) return;
    fill(b, nans, op == TC_OP_NORM && p == 0);
    for (int d = 0; d < nd; d++) bst[d] = b->stride[d];
    for (int d = 0; d < nd; d++) vs[perm[d]] = base[d], vst[perm[d]] = bst[d]; /* x = b permuted */
    if (tc_tensor_new_view(b->storage, (tc_dtype)dtype, 0, nd, vs, vst, &x)) return;
    tc_params pr{};
    pr.i[0] = dim, pr.i[1] = keep, pr.i[2] = rint_(2), pr.s[0] = p;
    tc_tensor *out[2] = {NULL, NULL};
    const tc_tensor *in[1] = {x};
    int nout = op == TC_OP_MAX || op == TC_OP_MIN ? 2 : 1;
    tc_status s = tc_op_run((tc_op)op, in, 1, &pr, out, nout);
    if (s == TC_OK) {
        /* the emulation writes into copies of the CPU's outputs, pre-poisoned */
        tc_tensor *e0 = NULL, *e1 = NULL;
        tc_tensor_new((tc_dtype)out[0]->dtype, out[0]->ndim, out[0]->size, &e0);
        memset(e0->storage->data, 0x5a, (size_t)e0->storage->nbytes);
        if (out[1]) {
            tc_tensor_new(TC_I64, out[1]->ndim, out[1]->size, &e1);
            memset(e1->storage->data, 0x5a, (size_t)e1->storage->nbytes);
        }
        tc_cuda_view vin = view_of(x);
        tc_cuda_call c{};
        c.op = op, c.nin = 1, c.nout = out[1] ? 2 : 1, c.in = &vin;
        c.out[0] = view_of(e0);
        if (e1) c.out[1] = view_of(e1);
        c.params = pr;
        emu_reduce(&c);
        int64_t n = tc_tensor_numel(out[0]);
        for (int64_t i = 0; i < n; i++) {
            double want = get(out[0], i), got = get(e0, i);
            bool exact = out[0]->dtype != TC_F32 && out[0]->dtype != TC_F64 && out[0]->dtype != TC_F16 &&
                         out[0]->dtype != TC_BF16;
            if (op == TC_OP_MAX || op == TC_OP_MIN) exact = true;
            bool ok = exact ? (want == got || (want != want && got != got)) : close(want, got, out[0]->dtype);
            EXPECT(ok, "%s dtype %d nd %d dim %lld keep %d p %g: out[%lld] cpu %.17g emu %.17g", cu_op_name(op) ,
                   dtype, nd, (long long)dim, keep, p, (long long)i, want, got);
            if (!ok) break;
            if (e1) {
                double wi = get(out[1], i), gi = get(e1, i);
                EXPECT(wi == gi, "op %d dtype %d: index[%lld] cpu %g emu %g", op, dtype, (long long)i, wi, gi);
                if (wi != gi) break;
            }
        }
        tc_tensor_release(e0);
        tc_tensor_release(e1);
    }
    tc_tensor_release(out[0]);
    tc_tensor_release(out[1]);
    tc_tensor_release(x);
    tc_tensor_release(b);
}

static void geo_checks(void)
{
    /* coalescing keeps every flat position's offsets */
    for (int t = 0; t < 300; t++) {
        geo<2> g{};
        g.nd = 1 + (int)rint_(5);
        int64_t n = 1;
        for (int d = 0; d < g.nd; d++) g.size[d] = 1 + rint_(4), n *= g.size[d];
        for (int a = 0; a < 2; a++) { /* contiguous, sometimes with a broadcast or a gap */
            int64_t s = 1;
            for (int d = g.nd - 1; d >= 0; d--) {
                g.st[a][d] = rint_(5) == 0 ? 0 : s;
                s *= g.size[d] + (rint_(4) == 0 ? 1 : 0);
            }
        }
        geo<2> c = g;
        geo_coalesce(c);
        bool same = true;
        for (int64_t i = 0; i < n && same; i++) {
            int64_t o1[2], o2[2];
            geo_offsets(g, i, o1);
            geo_offsets(c, i, o2);
            same = o1[0] == o2[0] && o1[1] == o2[1] && flat_offset(i, g.nd, g.size, g.st[1]) == o1[1];
        }
        EXPECT(same, "geo_coalesce changed offsets (case %d, nd %d -> %d)", t, g.nd, c.nd);
    }
}

int main(void)
{
    geo_checks();
    static const int dts[] = {TC_F32, TC_F64, TC_F16, TC_BF16, TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL};
    static const double ps[] = {2, 1, 0, 3, INFINITY, -INFINITY, 0.5};
    for (int t = 0; t < 1500; t++) {
        int op = OPS[rint_(10)], dtype = dts[rint_(10)];
        if (!cpu_takes(op, dtype)) continue;
        int nd = (int)rint_(4) + (rint_(8) == 0 ? 0 : 1);
        int64_t sz[TC_MAX_DIMS];
        int perm[TC_MAX_DIMS];
        int64_t total = 1;
        for (int d = 0; d < nd; d++) {
            sz[d] = 1 + rint_(6);
            if (rint_(6) == 0) sz[d] = 1 + rint_(700);
            if (rint_(40) == 0) sz[d] = 0;
            total *= sz[d];
            perm[d] = d;
        }
        if (total > 200000) continue;
        for (int d = nd - 1; d > 0; d--) { /* a random permutation of the storage */
            int j = (int)rint_(d + 1), tmp = perm[d];
            perm[d] = perm[j], perm[j] = tmp;
        }
        int64_t dim = nd == 0 || rint_(4) == 0 ? -1 : rint_(nd);
        if (dim >= 0 && rint_(3) == 0) dim = dim - nd; /* counted from the end */
        if (dim == -1 + 0 && nd > 0 && rint_(2)) dim = -1;
        one_case(op, dtype, nd, sz, perm, dim, (int)rint_(2), ps[rint_(7)], rint_(3) == 0);
    }
    /* shapes that take the split and column paths */
    static const int64_t big[][3] = {{100000, 1, 1}, {3, 40000, 1}, {1000, 40, 1}, {7, 5000, 3}, {2, 2, 70000}};
    for (int b = 0; b < 5; b++)
        for (int k = 0; k < 10; k++)
            for (int di = 0; di < 3; di++) {
                int dtype = k % 2 ? TC_F64 : TC_I32, op = OPS[k];
                if (op == TC_OP_ALL || op == TC_OP_ANY) dtype = TC_U8;
                if (!cpu_takes(op, dtype)) dtype = TC_F32;
                int perm[3] = {0, 1, 2};
                one_case(op, dtype, 3, big[b], perm, di == 2 ? -1 : di, 0, 2, k == 3);
            }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
