/* test_cured_sort.cu -- host checks of core/cuda/sort.cu, runnable without a GPU.
 *
 * Includes sort.cu and drives its __host__ __device__ pieces on the host:
 *  - the block path: the bitonic network (bitonic_swap, rank_before, padding to a power of
 *    two) run stage by stage, then the picks (out_count, pick_one);
 *  - the long-row path: the radix keys (canon, flip) ordered as cub's radix sort orders
 *    them (floats by their sign-flipped bit patterns, integers by value), stably, then the
 *    same picks;
 * and compares the chosen positions with libtocha's CPU kernels (tc_op_run) for sort
 * (both directions), topk, kthvalue, median and mode on rows with ties, NaNs and -0.0.
 * Build and run (from the repository root, after `make BUILD=build-X build-X/libtocha.so`):
 *   nvcc -std=c++17 -arch=sm_90 -Icore tests/cuda_host/test_cured_sort.cu -Lbuild-X -ltocha \
 *       -Xlinker -rpath,$PWD/build-X -o /tmp/test_cured_sort && /tmp/test_cured_sort
 */
#include "cuda/sort.cu"
#include <algorithm>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <vector>
#include "host_check.h"


/* Reads a sorted row for pick_one (a __host__ __device__ callable, as the kernels' lambdas). */
template <class C> struct row_key {
    const C *p;
    __host__ __device__ C operator()(int64_t i) const { return p[i]; }
};

/* sort_block_kernel's network and picks; returns the chosen positions. */
template <class C> static std::vector<int64_t> emu_block(const sortargs &a, const std::vector<C> &row, bool desc)
{
    int64_t n = a.n, P = 1;
    while (P < n) P *= 2;
    std::vector<C> key((size_t)P);
    std::vector<int32_t> pos((size_t)P);
    for (int64_t i = 0; i < P; i++) key[i] = i < n ? row[i] : (C)0, pos[i] = (int32_t)i;
    for (int64_t k = 2; k <= P; k <<= 1)
        for (int64_t j = k >> 1; j > 0; j >>= 1)
            for (int64_t i = 0; i < P; i++) { /* disjoint pairs: any order is the parallel one */
                int64_t l = i ^ j;
                if (l > i && bitonic_swap(key.data(), pos.data(), i, l, k, n, desc)) {
                    std::swap(key[i], key[l]);
                    std::swap(pos[i], pos[l]);
                }
            }
    int64_t first = 0, count = out_count(a);
    if (a.op != TC_OP_SORT && a.op != TC_OP_TOPK) first = pick_one<C>(a, row_key<C>{key.data()});
    std::vector<int64_t> r;
    for (int64_t q = 0; q < count; q++) r.push_back(pos[first + q]);
    return r;
}

/* cub's radix order of a key: floats by the usual sign-flip bit transform, integers by value. */
template <class C> static bool radix_less(C a, C b)
{
    if constexpr (std::is_floating_point_v<C>) {
        using U = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
        U ua, ub, sign = (U)1 << (sizeof(U) * 8 - 1);
        memcpy(&ua, &a, sizeof ua);
        memcpy(&ub, &b, sizeof ub);
        ua = (ua & sign) ? ~ua : (ua | sign);
        ub = (ub & sign) ? ~ub : (ub | sign);
        return ua < ub;
    } else {
        return a < b;
    }
}

/* sort_long: load_keys, a stable radix sort, write_many / write_one. */
template <class C> static std::vector<int64_t> emu_long(const sortargs &a, const std::vector<C> &row, bool desc)
{
    int64_t n = a.n;
    std::vector<C> keys((size_t)n);
    std::vector<int64_t> ix((size_t)n);
    for (int64_t i = 0; i < n; i++) keys[i] = desc ? flip(canon(row[i])) : canon(row[i]), ix[i] = i;
    std::stable_sort(ix.begin(), ix.end(), [&](int64_t p, int64_t q) { return radix_less(keys[p], keys[q]); });
    std::vector<C> kout((size_t)n);
    for (int64_t i = 0; i < n; i++) kout[i] = keys[ix[i]];
    std::vector<int64_t> r;
    if (a.op == TC_OP_MEDIAN || a.op == TC_OP_MODE) {
        r.push_back(ix[pick_one<C>(a, row_key<C>{kout.data()})]);
        return r;
    }
    int64_t count = out_count(a), first = a.op == TC_OP_KTHVALUE ? a.k - 1 : 0;
    for (int64_t q = 0; q < count; q++) r.push_back(ix[first + q]);
    return r;
}

template <class C> static C val(int64_t r, bool fl)
{
    if (!fl) return (C)(r % 7 - (std::is_signed_v<C> ? 3 : 0));
    double v = (double)(r % 9 - 4) / 2;
    if (r % 23 == 0) v = NAN;
    if (r % 29 == 0) v = -NAN;
    if (r % 17 == 0) v = -0.0;
    return (C)v;
}

template <int DT> static void run_cases(int reps)
{
    using C = typename dt<DT>::C;
    constexpr bool FL = dt<DT>::FL;
    static const int ops[] = {TC_OP_SORT, TC_OP_TOPK, TC_OP_KTHVALUE, TC_OP_MEDIAN, TC_OP_MODE};
    for (int t = 0; t < reps; t++) {
        int64_t n = 1 + rint_(rint_(4) == 0 ? 3000 : 40);
        int op = ops[rint_(5)];
        tc_tensor *x = NULL;
        tc_tensor_new((tc_dtype)DT, 1, &n, &x);
        std::vector<C> row((size_t)n);
        for (int64_t i = 0; i < n; i++) row[i] = val<C>((int64_t)rint_(1000), FL), ((C *)tc_tensor_data(x))[i] = row[i];
        sortargs a{};
        a.op = op, a.n = n, a.rows = 1;
        tc_params p{};
        p.i[0] = 0;
        bool desc = false;
        if (op == TC_OP_SORT) desc = rint_(2), p.i[1] = desc, a.desc = desc;
        if (op == TC_OP_TOPK) a.k = rint_(n + 1), desc = rint_(2), p.i[1] = a.k, p.i[2] = desc, p.i[3] = 1, a.desc = desc;
        if (op == TC_OP_KTHVALUE) a.k = 1 + rint_(n), p.i[1] = a.k;
        tc_tensor *out[2] = {NULL, NULL};
        const tc_tensor *in[1] = {x};
        tc_status s = tc_op_run((tc_op)op, in, 1, &p, out, 2);
        EXPECT(s == TC_OK, "cpu op %d failed", op);
        if (s == TC_OK) {
            const int64_t *want = (const int64_t *)tc_tensor_data(out[1]);
            int64_t count = tc_tensor_numel(out[1]);
            std::vector<int64_t> b = emu_block<C>(a, row, desc), l = emu_long<C>(a, row, desc);
            EXPECT((int64_t)b.size() == count && (int64_t)l.size() == count, "dtype %d op %d n %lld: counts %zu %zu vs %lld",
                   DT, op, (long long)n, b.size(), l.size(), (long long)count);
            for (int64_t q = 0; q < count && q < (int64_t)b.size() && q < (int64_t)l.size(); q++) {
                bool ok = b[q] == want[q] && l[q] == want[q];
                EXPECT(ok, "dtype %d op %d n %lld desc %d k %lld: pair %lld cpu %lld block %lld long %lld", DT, op,
                       (long long)n, desc, (long long)a.k, (long long)q, (long long)want[q], (long long)b[q],
                       (long long)l[q]);
                if (!ok) break;
            }
        }
        tc_tensor_release(out[0]);
        tc_tensor_release(out[1]);
        tc_tensor_release(x);
    }
}

int main(void)
{
    run_cases<TC_F32>(600);
    run_cases<TC_F64>(300);
    run_cases<TC_I32>(300);
    run_cases<TC_U8>(200);
    run_cases<TC_I8>(200);
    run_cases<TC_I64>(200);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
