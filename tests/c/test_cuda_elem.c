/* test_cuda_elem.c -- the host/device helpers of the CUDA backend (core/cuda/cu_elem.h),
 * run on the host against libtocha's CPU code, so they are checked on machines without a
 * GPU: half/bfloat16 rounding and the generic load/store (vs core/dtype.c and the copy
 * op's conversions), strided geometry (coalescing and index -> offsets vs a naive walk,
 * broadcast strides vs tc_broadcast_strides), and the elementwise random samplers (vs the
 * CPU random ops for the same seed, contiguous and strided, every dtype each op takes). */
#include "ctest.h"
#include "cuda/cu_elem.h"
#include "half_bits.h"
#include "internal.h"
#include <stdlib.h>

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TEST(cuda_elem_half_conversions_match_cpu)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        /* the kernels' conversions keep NaN payloads, as the CPU kernels' (tc_f16_to_f32, for
         * Lua, gives every NaN as the one NaN) */
        if (fbits(cu_f16_to_f32((uint16_t)h)) != fbits(hb_f16_to_f32((uint16_t)h))) bad++;
        if (fbits(cu_bf16_to_f32((uint16_t)h)) != fbits(hb_bf16_to_f32((uint16_t)h))) bad++;
        /* around every half value: the value, its float neighbours, the midpoints to the next */
        float f = tc_f16_to_f32((uint16_t)h), g = tc_f16_to_f32((uint16_t)(h + 1));
        float probes[6] = {f, nextafterf(f, INFINITY), nextafterf(f, -INFINITY), (f + g) / 2,
                           nextafterf((f + g) / 2, INFINITY), nextafterf((f + g) / 2, -INFINITY)};
        for (int k = 0; k < 6; k++) {
            if (cu_f32_to_f16(probes[k]) != tc_f32_to_f16(probes[k])) bad++;
            if (cu_f32_to_bf16(probes[k]) != tc_f32_to_bf16(probes[k])) bad++;
        }
    }
    for (uint64_t u = 0; u < (1ull << 32); u += 997) { /* a spread over all float bit patterns */
        float f = bitsf((uint32_t)u);
        if (cu_f32_to_f16(f) != tc_f32_to_f16(f) || cu_f32_to_bf16(f) != tc_f32_to_bf16(f)) bad++;
    }
    CHECK(bad == 0);
    if (bad) printf("  %d mismatches\n", bad);
    CHECK(cu_f32_to_f16(NAN) == tc_f32_to_f16(NAN) && cu_f32_to_bf16(-NAN) == tc_f32_to_bf16(-NAN));
}

static const double probe_values[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.0, 127.9, 128.0, -128.0,
                                      -129.0, 255.0, 255.5, 256.0, 300.7, -300.7, 32767.0, 32768.0, -32769.0,
                                      65504.0, 65520.0, 1e5, 2147483647.0, 2147483648.0, -2147483649.0, 3e9, 1e18,
                                      9007199254740993.0, 9223372036854774784.0, 9223372036854775808.0,
                                      -9223372036854775808.0, -1e19, 1e300, -1e300, 1e-40, 6e-8, 3e-8, 0.1,
                                      INFINITY, -INFINITY, NAN};
#define NPROBE ((int)(sizeof probe_values / sizeof probe_values[0]))

TEST(cuda_elem_load_store_match_cpu)
{
    int bad = 0;
    for (int dt = 0; dt < TC_DTYPE_COUNT; dt++) {
        CHECK(cu_dtype_size(dt) == (int)tc_dtype_size((tc_dtype)dt));
        for (int k = 0; k < NPROBE; k++) {
            uint64_t a = 0, b = 0;
            cu_store_double(dt, &a, probe_values[k]);
            tc_store_double(dt, &b, probe_values[k]);
            if (a != b) bad++;
            double x = cu_load_as_double(dt, &a), y = tc_load_as_double(dt, &b);
            if (memcmp(&x, &y, 8) != 0) bad++;
        }
    }
    CHECK(bad == 0);
}

/* The copy op between every pair of dtypes equals store(to, load(from)): the rule the
 * CUDA convert kernels implement. Values: the probes stored in the source dtype. */
TEST(cuda_elem_convert_rule_matches_copy_op)
{
    int bad = 0;
    int64_t n = NPROBE;
    for (int from = 0; from < TC_DTYPE_COUNT; from++) {
        tc_tensor *src = NULL;
        CHECK_OK(tc_tensor_new((tc_dtype)from, 1, &n, &src));
        for (int k = 0; k < NPROBE; k++) tc_store_double(from, tc_base(src) + k * tc_elsize(from), probe_values[k]);
        if (from == TC_I64) { /* values a double cannot hold */
            int64_t *p = (int64_t *)tc_base(src);
            p[0] = INT64_MAX, p[1] = INT64_MIN, p[2] = (1ll << 53) + 1, p[3] = -(1ll << 40) - 7;
        }
        for (int to = 0; to < TC_DTYPE_COUNT; to++) {
            tc_tensor *dst = NULL;
            CHECK_OK(tc_tensor_new((tc_dtype)to, 1, &n, &dst));
            const tc_tensor *in[1] = {src};
            CHECK_OK(tc_op_run(TC_OP_COPY, in, 1, NULL, &dst, 1));
            for (int k = 0; k < NPROBE; k++) {
                uint64_t want = 0, got = 0;
                memcpy(&want, tc_base(dst) + k * tc_elsize(to), (size_t)tc_elsize(to));
                if (from == to) memcpy(&got, tc_base(src) + k * tc_elsize(to), (size_t)tc_elsize(to));
                else cu_store_double(to, &got, cu_load_as_double(from, tc_base(src) + k * tc_elsize(from)));
                if (want != got) {
                    if (bad < 5) printf("  %s -> %s probe %d differs\n", tc_dtype_name(from), tc_dtype_name(to), k);
                    bad++;
                }
            }
            tc_tensor_release(dst);
        }
        tc_tensor_release(src);
    }
    CHECK(bad == 0);
}

/* ---- geometry ------------------------------------------------------------------------ */

static uint64_t rng_state = 88172645463325252ull;
static int64_t rnd(int64_t n)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (int64_t)(rng_state % (uint64_t)n);
}

TEST(cuda_elem_geometry_offsets_match_naive_walk)
{
    int bad = 0;
    for (int trial = 0; trial < 3000; trial++) {
        cu_geom g = {0};
        g.nd = (int)rnd(6);
        g.narg = 1 + (int)rnd(CU_MAXARG);
        for (int d = 0; d < g.nd; d++) g.size[d] = 1 + rnd(4);
        for (int a = 0; a < g.narg; a++) {
            int kind = (int)rnd(4); /* contiguous, broadcast-ish, transposed-ish, random */
            int64_t st = 1;
            for (int d = g.nd - 1; d >= 0; d--) {
                if (kind == 0) g.stride[a][d] = st, st *= g.size[d];
                else if (kind == 1) g.stride[a][d] = rnd(2) ? 0 : (st *= 3);
                else g.stride[a][d] = rnd(21) - 10;
            }
        }
        cu_geom c = g;
        cu_geom_coalesce(&c);
        int64_t n = cu_geom_numel(&g);
        if (cu_geom_numel(&c) != n) bad++;
        cu_geom32 k32 = cu_geom32_from(&c);
        cu_geom64 k64 = cu_geom64_from(&c);
        int64_t idx[TC_MAX_DIMS] = {0};
        for (int64_t i = 0; i < n; i++) {
            int32_t o32[CU_MAXARG];
            int64_t o64[CU_MAXARG];
            cu_geom32_offsets(&k32, (int32_t)i, g.narg, o32);
            cu_geom64_offsets(&k64, i, g.narg, o64);
            for (int a = 0; a < g.narg; a++) {
                int64_t want = 0;
                for (int d = 0; d < g.nd; d++) want += idx[d] * g.stride[a][d];
                if (o32[a] != want || o64[a] != want) bad++;
            }
            for (int d = g.nd - 1; d >= 0; d--) { /* row-major increment */
                if (++idx[d] < g.size[d]) break;
                idx[d] = 0;
            }
        }
    }
    CHECK(bad == 0);
    /* a contiguous tensor becomes one dim; a transposed one keeps two */
    cu_geom g = {.nd = 3, .narg = 2, .size = {2, 3, 4}, .stride = {{12, 4, 1}, {12, 4, 1}}};
    cu_geom_coalesce(&g);
    CHECK(g.nd == 1 && g.size[0] == 24 && cu_geom_flat(&g));
    cu_geom t = {.nd = 2, .narg = 2, .size = {3, 4}, .stride = {{4, 1}, {1, 3}}};
    cu_geom_coalesce(&t);
    CHECK(t.nd == 2 && !cu_geom_flat(&t));
    cu_geom s = {.nd = 2, .narg = 2, .size = {3, 4}, .stride = {{4, 1}, {0, 0}}}; /* x:add(5) */
    cu_geom_coalesce(&s);
    CHECK(s.nd == 1 && s.stride[1][0] == 0 && cu_geom_flat(&s));
    cu_geom big = {.nd = 1, .narg = 1, .size = {(int64_t)1 << 31}, .stride = {{1}}};
    CHECK(!cu_geom_fits32(&big));
    big.size[0] = 1000, big.stride[0][0] = (int64_t)1 << 22;
    CHECK(!cu_geom_fits32(&big));
    big.stride[0][0] = 1000;
    CHECK(cu_geom_fits32(&big));
}

TEST(cuda_elem_broadcast_strides_match_cpu)
{
    int bad = 0;
    for (int trial = 0; trial < 500; trial++) {
        int nd = 1 + (int)rnd(4), vnd = (int)rnd(nd + 1);
        int64_t size[TC_MAX_DIMS], vsize[TC_MAX_DIMS];
        for (int d = 0; d < nd; d++) size[d] = 1 + rnd(3);
        for (int d = 0; d < vnd; d++) vsize[d] = rnd(2) ? 1 : size[d + nd - vnd];
        tc_tensor *v = NULL;
        CHECK_OK(tc_tensor_new(TC_F32, vnd, vsize, &v));
        int64_t want[TC_MAX_DIMS], got[TC_MAX_DIMS];
        tc_broadcast_strides(v, nd, size, want);
        if (!cu_bcast_strides(v->ndim, v->size, v->stride, nd, size, got)) bad++;
        for (int d = 0; d < nd; d++)
            if (size[d] > 1 && want[d] != got[d]) bad++; /* a size-1 dim's stride is never used */
        tc_tensor_release(v);
    }
    CHECK(bad == 0);
    int64_t a[2] = {2, 3}, st[2] = {3, 1}, out[2] = {4, 3}, r[2];
    CHECK(!cu_bcast_strides(2, a, st, 2, out, r));
    CHECK(!cu_bcast_strides(2, a, st, 1, out + 1, r));
}

/* ---- random ---------------------------------------------------------------------------- */

/* What the CUDA kernel computes for element i (cu_rand_pair / cu_rand_int + the store). */
static void device_value(const cu_rand *r, int64_t i, const double *prob, void *dst)
{
    if (r->op == TC_OP_RANDOM) {
        cu_rand_store_int(r->dt, dst, cu_rand_int(r, (uint64_t)i));
        return;
    }
    double v[2];
    cu_rand_pair(r, (uint64_t)i / 2, v);
    double x = v[i & 1];
    if (r->op == TC_OP_BERNOULLI) x = x < (prob ? prob[i] : r->s0) ? 1.0 : 0.0;
    cu_rand_store(r->dt, dst, x, r->open_top, r->s1);
}

/* Fills t (any strides) with op on the CPU from a fresh generator and compares every
 * element, in row-major order, with the device functions keyed (seed, slot 0). */
static int compare_random(tc_op op, tc_tensor *t, double s0, double s1, const tc_tensor *prob)
{
    const uint64_t seed = 0x5eed1234abcdull;
    tc_generator *gen = NULL;
    if (tc_generator_new(seed, &gen)) return 1;
    tc_params p = {.s = {s0, s1}, .gen = gen};
    const tc_tensor *in[1] = {prob};
    tc_tensor *o = t;
    tc_status s = tc_op_run(op, in, op == TC_OP_BERNOULLI ? 1 : 0, &p, &o, 1);
    tc_generator_free(gen);
    if (s) {
        printf("  %s on %s: %s\n", tc_op_info(op)->name, tc_dtype_name((tc_dtype)t->dtype), tc_last_error());
        return 1;
    }
    int64_t n = tc_tensor_numel(t);
    double *pv = NULL;
    if (prob) { /* the probabilities each element sees (broadcast, row-major) */
        pv = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) pv[i] = ct_at(prob, tc_tensor_numel(prob) == n ? i : i % tc_tensor_numel(prob));
    }
    cu_rand r = cu_rand_setup(op, t->dtype, s0, s1, seed, 0);
    int bad = 0;
    tc_elem_iter it;
    tc_elem_iter_init(&it, t);
    char *e;
    for (int64_t i = 0; (e = tc_elem_iter_next(&it)); i++) {
        uint64_t got = 0, want = 0;
        device_value(&r, i, pv, &got);
        memcpy(&want, e, (size_t)tc_elsize(t->dtype));
        if (got != want) {
            if (bad < 3)
                printf("  %s %s element %lld: cpu %.17g, device functions differ\n", tc_op_info(op)->name,
                       tc_dtype_name((tc_dtype)t->dtype), (long long)i, ct_at(t, i));
            bad++;
        }
    }
    free(pv);
    return bad;
}

TEST(cuda_elem_random_samplers_match_cpu)
{
    static const struct {
        tc_op op;
        double s0, s1;
    } ops[] = {
        {TC_OP_UNIFORM, -2, 3},        {TC_OP_UNIFORM, 1, 1.0078125}, /* rounds up to s1 often in bf16 */
        {TC_OP_NORMAL, 0.5, 2},        {TC_OP_BERNOULLI, 0.3, 0},     {TC_OP_RANDOM, -5, 17},
        {TC_OP_RANDOM, 0, 0},          {TC_OP_RANDOM, 0, 7},          {TC_OP_EXPONENTIAL, 1.5, 0},
        {TC_OP_CAUCHY, 1, 0.5},        {TC_OP_LOG_NORMAL, 0.1, 0.7},  {TC_OP_GEOMETRIC, 0.2, 0},
    };
    int bad = 0, runs = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        int flags = tc_op_info(ops[k].op)->flags;
        for (int dt = 0; dt < TC_DTYPE_COUNT; dt++) {
            bool flt = tc_dtype_is_float((tc_dtype)dt);
            if (!(flt ? flags & TC_OPF_FLT : dt == TC_BOOL ? flags & TC_OPF_BOOL : flags & TC_OPF_INT)) continue;
            if (ops[k].op == TC_OP_RANDOM && ops[k].s0 < 0 && dt == TC_U8) continue; /* out of range */
            /* contiguous, odd count (the last slot half used) */
            tc_tensor *a = NULL;
            CHECK_OK(tc_tensor_new((tc_dtype)dt, 3, SZ(3, 1, 7), &a));
            bad += compare_random(ops[k].op, a, ops[k].s0, ops[k].s1, NULL);
            /* strided: a transposed view, filled in its own row-major order */
            tc_tensor *b = NULL;
            CHECK_OK(tc_tensor_new((tc_dtype)dt, 2, SZ(6, 5), &b));
            tc_tensor *bt = ct_transposed(b, 0, 1);
            CHECK(bt != NULL);
            if (bt) bad += compare_random(ops[k].op, bt, ops[k].s0, ops[k].s1, NULL);
            tc_tensor_release(bt);
            tc_tensor_release(b);
            tc_tensor_release(a);
            runs += 2;
        }
    }
    /* bernoulli with probabilities: broadcast (5) -> (4, 5), and Torch7's same count (20) */
    tc_tensor *pb = ct_from(TC_F32, 1, SZ(5), VALS(0, 0.25, 0.5, 0.75, 1));
    double pvals[20];
    for (int i = 0; i < 20; i++) pvals[i] = (i % 7) / 6.0;
    tc_tensor *pf = ct_from(TC_F64, 1, SZ(20), pvals);
    for (int dt = 0; dt < TC_DTYPE_COUNT; dt++) {
        tc_tensor *t = NULL;
        CHECK_OK(tc_tensor_new((tc_dtype)dt, 2, SZ(4, 5), &t));
        bad += compare_random(TC_OP_BERNOULLI, t, 0, 0, pb);
        bad += compare_random(TC_OP_BERNOULLI, t, 0, 0, pf);
        tc_tensor_release(t);
        runs += 2;
    }
    tc_tensor_release(pb);
    tc_tensor_release(pf);
    CHECK(runs > 80);
    CHECK(bad == 0);
}
