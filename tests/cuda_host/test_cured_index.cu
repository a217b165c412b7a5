/* test_cured_index.cu -- host checks of core/cuda/index.cu, runnable without a GPU.
 *
 * Includes index.cu, builds each call's plan with its own host code (norm, plan_ix,
 * plan_masked, fill_bits, bcast_strides, geo_coalesce) and runs the kernels' per-element
 * bodies on the host: the two passes of the last-writer rule (largest L position wins),
 * adds in L order, the masked ops through a sequential prefix. Results are compared bit for
 * bit with libtocha's CPU kernels (tc_op_run) on strided operands with duplicate indices.
 * Half-type adds are left out (the GPU's half atomics round per add; see index.cu).
 * Build and run (from the repository root, after `make BUILD=build-X build-X/libtocha.so`):
 *   nvcc -std=c++17 -arch=sm_90 -Icore tests/cuda_host/test_cured_index.cu -Lbuild-X -ltocha \
 *       -Xlinker -rpath,$PWD/build-X -o /tmp/test_cured_index && /tmp/test_cured_index
 */
#include "cuda/index.cu"
#include <stdarg.h>
#include <stdio.h>
#include <vector>
#include "host_check.h"


/* ---- the kernels' bodies on the host ----------------------------------------------------- */

template <class T> static void hadd(T *w, T v)
{
    if constexpr (std::is_floating_point_v<T>) *w += v;
    else *w = (T)((uint64_t)(int64_t)*w + (uint64_t)(int64_t)v);
}

template <class T, int KIND> static void emu_ix(T *w, const T *r, const ixplan &P)
{
    geo<4> L = P.L;
    ixargs a = P.a;
    a.n = numel_of(L.nd, L.size);
    if (a.n == 0) return;
    geo_coalesce(L);
    std::vector<long long> win(P.last ? (size_t)P.win_numel : 0, -1);
    int first = P.last && !a.win_slice ? 0 : 1;
    if (P.last && a.win_slice) /* last_index_kernel */
        for (int64_t i = 0; i < P.idx_n; i++) {
            int64_t v = P.idx[i * P.idx_st];
            if ((uint64_t)v < (uint64_t)a.vmax) win[(size_t)v] = win[(size_t)v] > i ? win[(size_t)v] : i;
        }
    for (int pass = first; pass < 2; pass++)
        for (int64_t lin = 0; lin < a.n; lin++) {
            int64_t off[4];
            geo_offsets(L, lin, off);
            int64_t v = P.idx[off[OI]];
            if ((uint64_t)v >= (uint64_t)a.vmax) continue;
            if (P.last) {
                int64_t at = a.win_slice ? v : off[OL] + v * a.ldim;
                long long mine = a.win_slice ? off[OL] : lin;
                if (at < 0 || at >= P.win_numel) {
                    EXPECT(false, "last-writer table entry %lld of %lld", (long long)at, (long long)P.win_numel);
                    return;
                }
                long long &slot = win[(size_t)at];
                if (pass == 0) {
                    slot = slot > mine ? slot : mine;
                    continue;
                }
                if (slot != mine) continue;
            }
            T *wp = w + off[OW] + (a.w_ind ? v * a.wdim : 0);
            if (KIND == K_FILL) {
                memcpy(wp, &a.fill, sizeof(T));
            } else {
                const T *rp = r + off[OR] + (a.r_ind ? v * a.rdim : 0);
                if (KIND == K_COPY) *wp = *rp;
                else hadd(wp, *rp);
            }
        }
}

/* masked_fill / masked_copy / masked_select as the flag, prefix and write kernels do it. */
template <class T> static void emu_masked(int op, const tc_cuda_view &out, const tc_cuda_view *in, double value)
{
    geo<2> L = plan_masked(op, out, in);
    int64_t n = numel_of(L.nd, L.size);
    if (n == 0 || (op == TC_OP_MASKED_COPY && (in[2].numel == 0 || !in[2].data))) return;
    geo_coalesce(L);
    const uint8_t *m = (const uint8_t *)in[1].data;
    uint64_t fill = fill_bits(out.dtype, value);
    geo<1> sg{};
    if (op == TC_OP_MASKED_COPY) {
        sg.nd = in[2].ndim;
        for (int i = 0; i < sg.nd; i++) sg.size[i] = in[2].size[i], sg.st[0][i] = in[2].stride[i];
        geo_coalesce(sg);
    }
    int64_t k = 0;
    for (int64_t lin = 0; lin < n; lin++) {
        int64_t off[2];
        geo_offsets(L, lin, off);
        if (!m[off[1]]) continue;
        if (op == TC_OP_MASKED_FILL) memcpy((T *)out.data + off[0], &fill, sizeof(T));
        else if (op == TC_OP_MASKED_COPY) ((T *)out.data)[off[0]] = ((const T *)in[2].data)[flat_offset(k, sg.nd, sg.size, sg.st[0])];
        else ((T *)out.data)[k * out.stride[0]] = ((const T *)in[0].data)[off[0]];
        k++;
    }
}

/* ---- cases --------------------------------------------------------------------------------- */

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

/* A tensor of sizes sz whose dims are stored in reverse order (strided), random values. */
static tc_tensor *make(int dtype, int nd, const int64_t *sz, bool transposed, int64_t lo, int64_t hi)
{
    int64_t rs[TC_MAX_DIMS], st[TC_MAX_DIMS];
    for (int d = 0; d < nd; d++) rs[d] = transposed ? sz[nd - 1 - d] : sz[d];
    tc_tensor *b = NULL, *v = NULL;
    tc_tensor_new((tc_dtype)dtype, nd, rs, &b);
    int64_t n = tc_tensor_numel(b);
    for (int64_t i = 0; i < n; i++) {
        int64_t ix[TC_MAX_DIMS], rem = i;
        for (int d = nd - 1; d >= 0; d--) ix[d] = rem % rs[d], rem /= rs[d];
        tc_tensor_set_value(b, ix, (double)(lo + rint_(hi - lo + 1)));
    }
    for (int d = 0; d < nd; d++) st[d] = transposed ? b->stride[nd - 1 - d] : b->stride[d];
    tc_tensor_new_view(b->storage, (tc_dtype)dtype, 0, nd, sz, st, &v);
    tc_tensor_release(b);
    return v;
}

static void compare(const char *what, int dtype, const tc_tensor *want, const tc_tensor *got)
{
    int64_t n = tc_tensor_numel(want);
    bool ok = n == tc_tensor_numel(got);
    int64_t bad = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        double a = get(want, i), b = get(got, i);
        if (!(a == b || (a != a && b != b))) ok = false, bad = i;
    }
    EXPECT(ok, "%s dtype %d: element %lld differs", what, dtype, (long long)bad);
}

static void index_case(int op, int dtype)
{
    int nd = 1 + (int)rint_(3);
    int64_t sz[TC_MAX_DIMS];
    for (int d = 0; d < nd; d++) sz[d] = 1 + rint_(5);
    int d = (int)rint_(nd);
    int64_t pdim = rint_(2) ? d : d - nd;
    bool fl = dtype <= TC_BF16, bl = dtype == TC_BOOL;
    int64_t lo = bl ? 0 : fl ? -50 : (dtype == TC_U8 ? 0 : -60), hi = bl ? 1 : 60;
    tc_tensor *a0 = make(dtype, nd, sz, rint_(2), lo, hi), *idx = NULL, *src = NULL;
    bool vec = op == TC_OP_INDEX_SELECT || op == TC_OP_INDEX_COPY || op == TC_OP_INDEX_ADD || op == TC_OP_INDEX_FILL;
    if (vec) {
        int64_t k = rint_(6);
        if (op == TC_OP_INDEX_SELECT && rint_(4) == 0) k = 0;
        idx = make(TC_I64, 1, &k, false, 0, sz[d] - 1);
        if (op == TC_OP_INDEX_COPY || op == TC_OP_INDEX_ADD) {
            int64_t ss[TC_MAX_DIMS];
            memcpy(ss, sz, sizeof ss);
            ss[d] = k;
            src = make(dtype, nd, ss, rint_(2), lo, hi);
        }
    } else { /* gather / scatter*: idx no larger than a0 outside d, src no smaller than idx */
        int64_t is[TC_MAX_DIMS], ss[TC_MAX_DIMS];
        for (int i = 0; i < nd; i++) is[i] = i == d ? 1 + rint_(5) : 1 + rint_(sz[i]), ss[i] = is[i] + rint_(2);
        idx = make(TC_I64, nd, is, rint_(2), 0, sz[d] - 1);
        if (op == TC_OP_SCATTER || op == TC_OP_SCATTER_ADD) src = make(dtype, nd, ss, rint_(2), lo, hi);
    }
    tc_params p{};
    p.i[0] = pdim;
    p.s[0] = bl ? 1 : (double)(rint_(200) - 100) / 3;
    const tc_tensor *in[3] = {a0, idx, src};
    int nin = src ? 3 : 2;
    tc_tensor *out[1] = {NULL};
    tc_status s = tc_op_run((tc_op)op, in, nin, &p, out, 1);
    EXPECT(s == TC_OK, "cpu op %d dtype %d failed", op, dtype);
    if (s == TC_OK) {
        tc_tensor *e = NULL;
        tc_tensor_new((tc_dtype)out[0]->dtype, out[0]->ndim, out[0]->size, &e);
        memset(tc_tensor_data(e), 0x5a, (size_t)e->storage->nbytes);
        if (writes_dst(op)) { /* copy_view's job */
            const tc_tensor *ci[1] = {a0};
            tc_tensor *co[1] = {e};
            tc_op_run(TC_OP_COPY, ci, 1, NULL, co, 1);
        }
        tc_cuda_view vin[3], vout = norm(view_of(e));
        for (int i = 0; i < nin; i++) vin[i] = norm(view_of(in[i]));
        int dd = (int)(pdim < 0 ? pdim + vin[0].ndim : pdim);
        ixplan P = plan_ix(op, dd, vout, vin, p.s[0]);
        /* the last-writer table: one entry a slice (index_copy), at most dst's elements
         * (scatter); none where no two writers can meet */
        bool dups = op == TC_OP_INDEX_COPY ? vin[1].numel > 1
                                           : op == TC_OP_SCATTER && vin[1].ndim && vin[1].size[dd] > 1;
        EXPECT(P.last == dups, "%s: last-writer rule %d, possible duplicates %d", cu_op_name(op), P.last, dups);
        if (P.last && op == TC_OP_INDEX_COPY)
            EXPECT(P.win_numel == vout.size[dd], "index_copy: table of %lld for %lld slices", (long long)P.win_numel,
                   (long long)vout.size[dd]);
        if (P.last && op == TC_OP_SCATTER)
            EXPECT(P.win_numel <= vout.numel, "scatter: table of %lld for %lld dst elements", (long long)P.win_numel,
                   (long long)vout.numel);
        (void)with_size(elsize(dtype), [&](auto tp) -> tc_status {
            using T = std::remove_pointer_t<decltype(tp)>;
            if (P.kind == K_FILL) emu_ix<T, K_FILL>((T *)vout.data, (const T *)P.r, P);
            else if (P.kind == K_COPY) emu_ix<T, K_COPY>((T *)vout.data, (const T *)P.r, P);
            return TC_OK;
        });
        if (P.kind == K_ADD) {
            (void)with_dtype(dtype, [&](auto tag) -> tc_status {
                constexpr int DT = decltype(tag)::value;
                if constexpr (DT != TC_F16 && DT != TC_BF16 && DT != TC_BOOL) {
                    using T = typename dt<DT>::S;
                    emu_ix<T, K_ADD>((T *)vout.data, (const T *)P.r, P);
                }
                return TC_OK;
            });
        }
        compare(cu_op_name(op), dtype, out[0], e);
        tc_tensor_release(e);
    }
    tc_tensor_release(out[0]);
    tc_tensor_release(a0);
    tc_tensor_release(idx);
    tc_tensor_release(src);
}

static void masked_case(int op, int dtype)
{
    int nd = 1 + (int)rint_(3);
    int64_t sz[TC_MAX_DIMS], ms[TC_MAX_DIMS];
    for (int d = 0; d < nd; d++) sz[d] = 1 + rint_(5);
    int mn = (int)rint_(nd + 1); /* the mask: a suffix of the shape, some dims 1 */
    for (int i = 0; i < mn; i++) ms[i] = rint_(3) == 0 ? 1 : sz[nd - mn + i];
    bool bl = dtype == TC_BOOL;
    tc_tensor *a0 = make(dtype, nd, sz, rint_(2), bl ? 0 : -9, bl ? 1 : 9);
    tc_tensor *m = make(rint_(2) ? TC_U8 : TC_BOOL, mn, ms, rint_(2), 0, 1), *src = NULL;
    if (op == TC_OP_MASKED_COPY) {
        int64_t n = tc_tensor_numel(a0) + rint_(3), s2[2] = {n, 1};
        src = make(dtype, rint_(2) ? 1 : 2, s2, false, bl ? 0 : -9, bl ? 1 : 9);
    }
    tc_params p{};
    p.s[0] = bl ? 1 : 7.5;
    const tc_tensor *in[3] = {a0, m, src};
    int nin = src ? 3 : 2;
    tc_tensor *out[1] = {NULL};
    tc_status s = tc_op_run((tc_op)op, in, nin, &p, out, 1);
    EXPECT(s == TC_OK, "cpu op %d dtype %d failed", op, dtype);
    if (s == TC_OK) {
        tc_tensor *e = NULL;
        tc_tensor_new((tc_dtype)out[0]->dtype, out[0]->ndim, out[0]->size, &e);
        if (e->storage) memset(tc_tensor_data(e), 0x5a, (size_t)e->storage->nbytes);
        if (writes_dst(op)) {
            const tc_tensor *ci[1] = {a0};
            tc_tensor *co[1] = {e};
            tc_op_run(TC_OP_COPY, ci, 1, NULL, co, 1);
        }
        tc_cuda_view vin[3], vout = norm(view_of(e));
        for (int i = 0; i < nin; i++) vin[i] = norm(view_of(in[i]));
        (void)with_size(elsize(dtype), [&](auto tp) -> tc_status {
            using T = std::remove_pointer_t<decltype(tp)>;
            emu_masked<T>(op, vout, vin, p.s[0]);
            return TC_OK;
        });
        compare(cu_op_name(op), dtype, out[0], e);
        tc_tensor_release(e);
    }
    tc_tensor_release(out[0]);
    tc_tensor_release(a0);
    tc_tensor_release(m);
    tc_tensor_release(src);
}

int main(void)
{
    static const int ops[] = {TC_OP_INDEX_SELECT, TC_OP_INDEX_COPY, TC_OP_INDEX_ADD, TC_OP_INDEX_FILL,
                              TC_OP_GATHER,       TC_OP_SCATTER,    TC_OP_SCATTER_ADD, TC_OP_SCATTER_FILL};
    static const int dts[] = {TC_F32, TC_F64, TC_F16, TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL};
    for (int t = 0; t < 4000; t++) {
        int op = ops[rint_(8)], dtype = dts[rint_(9)];
        if ((op == TC_OP_INDEX_ADD || op == TC_OP_SCATTER_ADD) && (dtype == TC_BOOL || dtype == TC_F16)) continue;
        index_case(op, dtype);
    }
    static const int mops[] = {TC_OP_MASKED_FILL, TC_OP_MASKED_COPY, TC_OP_MASKED_SELECT};
    for (int t = 0; t < 1500; t++) masked_case(mops[rint_(3)], dts[rint_(9)]);
    /* fill values stored as tc_store_double stores them (saturating, NaN to 0) */
    uint64_t b = fill_bits(TC_I8, 300.0);
    EXPECT(b == 127, "fill_bits int8 300 -> %llu", (unsigned long long)b);
    b = fill_bits(TC_U8, -5.0);
    EXPECT(b == 0, "fill_bits uint8 -5 -> %llu", (unsigned long long)b);
    b = fill_bits(TC_I32, NAN);
    EXPECT(b == 0, "fill_bits int32 NaN -> %llu", (unsigned long long)b);
    b = fill_bits(TC_I16, -40000.0);
    EXPECT(b == 0x8000, "fill_bits int16 -40000 -> %llx", (unsigned long long)b);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
