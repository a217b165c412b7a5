/* test_random.c -- generators (core/random.c) and the random op kind (core/shape_random.c,
 * core/cpu/random.c): Philox known answers, reproducibility (also across thread counts
 * and strides), state round trips and corrupted states, moments of 1e6 samples, integer
 * dtypes, randperm, multinomial frequencies, and every parameter check. */
#include "ctest.h"
#include "philox.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define N_MOMENTS 1000000

static tc_status fill(tc_op op, tc_tensor *t, double s0, double s1, tc_generator *g)
{
    tc_params p = {.s = {s0, s1}, .gen = g};
    const tc_tensor *in[1] = {NULL};
    tc_tensor *o = t;
    return tc_op_run(op, in, op == TC_OP_BERNOULLI ? 1 : 0, &p, &o, 1);
}

static tc_tensor *vec(tc_dtype dt, int64_t n)
{
    tc_tensor *t = NULL;
    tc_tensor_new(dt, 1, &n, &t);
    return t;
}

/* Mean and (population) variance of any tensor, read row-major. */
static void moments(const tc_tensor *t, double *mean, double *var)
{
    int64_t n = tc_tensor_numel(t);
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += ct_at(t, i);
    double m = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = ct_at(t, i) - m;
        ss += d * d;
    }
    *mean = m;
    *var = ss / (double)n;
}

static bool same_values(const tc_tensor *a, const tc_tensor *b)
{
    int64_t n = tc_tensor_numel(a);
    if (n != tc_tensor_numel(b)) return false;
    for (int64_t i = 0; i < n; i++)
        if (ct_at(a, i) != ct_at(b, i)) return false;
    return true;
}

/* ---- the generator -------------------------------------------------------------------- */

TEST(random_philox_known_answers)
{
    /* Random123's kat_vectors for philox4x32-10: counter, key -> block */
    tc_philox_block b = tc_philox4x32_10(0, 0, 0, 0, 0, 0);
    CHECK(b.w[0] == 0x6627e8d5u && b.w[1] == 0xe169c58du && b.w[2] == 0xbc57ac4cu && b.w[3] == 0x9b00dbd8u);
    b = tc_philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
    CHECK(b.w[0] == 0x408f276du && b.w[1] == 0x41c83b0eu && b.w[2] == 0xa20bc7c6u && b.w[3] == 0x6d5451fdu);
    b = tc_philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
    CHECK(b.w[0] == 0xd16cfe09u && b.w[1] == 0x94fdccebu && b.w[2] == 0x5001e420u && b.w[3] == 0x24126ea1u);
    CHECK(tc_philox_u53(0xffffffffu, 0xffffffffu) < 1.0);
    CHECK(tc_philox_u53(0, 0) == 0.0);
}

TEST(random_generator_reproducible)
{
    tc_generator *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tc_generator_new(42, &a));
    CHECK_OK(tc_generator_new(42, &b));
    CHECK_OK(tc_generator_new(43, &c));
    CHECK(tc_generator_initial_seed(a) == 42);
    int same = 1, differ = 0;
    double first = 0;
    for (int i = 0; i < 100; i++) {
        double x = tc_generator_uniform(a), y = tc_generator_uniform(b), z = tc_generator_uniform(c);
        if (i == 0) first = x;
        same &= x == y;
        differ += x != z;
        CHECK(x >= 0 && x < 1);
    }
    CHECK(same);
    CHECK(differ > 95);
    tc_generator_seed(a, 42); /* reseeding restarts the stream */
    CHECK(tc_generator_uniform(a) == first);
    tc_generator_seed(a, 7);
    CHECK(tc_generator_initial_seed(a) == 7);
    /* normals: the Box-Muller pair comes out as two consecutive values */
    tc_generator_seed(a, 5);
    tc_generator_seed(b, 5);
    for (int i = 0; i < 9; i++) CHECK(tc_generator_normal(a) == tc_generator_normal(b));
    tc_generator_free(a);
    tc_generator_free(b);
    tc_generator_free(c);
    tc_generator_free(NULL);
    tc_generator_free(tc_generator_default()); /* a no-op: the default is never freed */
    CHECK(tc_generator_uniform(tc_generator_default()) < 1.0);
    CHECK_ERR(tc_generator_new(1, NULL), TC_ERR_ARG, "generator_new");
}

TEST(random_state_round_trip)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(123, &g));
    tc_generator_uniform(g); /* a half-used scalar block and a cached normal */
    tc_generator_normal(g);
    size_t n = tc_generator_get_state(g, NULL, 0);
    CHECK(n == 40);
    unsigned char st[64];
    CHECK(tc_generator_get_state(g, st, sizeof st) == n);
    double before[6];
    for (int i = 0; i < 3; i++) before[i] = tc_generator_normal(g);
    for (int i = 3; i < 6; i++) before[i] = tc_generator_uniform(g);
    tc_tensor *t1 = vec(TC_F64, 1001), *t2 = vec(TC_F64, 1001);
    CHECK_OK(fill(TC_OP_NORMAL, t1, 0, 1, g));
    CHECK_OK(tc_generator_set_state(g, st, n));
    for (int i = 0; i < 3; i++) CHECK(tc_generator_normal(g) == before[i]);
    for (int i = 3; i < 6; i++) CHECK(tc_generator_uniform(g) == before[i]);
    CHECK_OK(fill(TC_OP_NORMAL, t2, 0, 1, g));
    CHECK(same_values(t1, t2));
    /* a state moves between generators */
    tc_generator *h = NULL;
    CHECK_OK(tc_generator_new(999, &h));
    CHECK_OK(tc_generator_set_state(h, st, n));
    CHECK(tc_generator_initial_seed(h) == 123);
    CHECK(tc_generator_normal(h) == before[0]);
    tc_tensor_release(t1);
    tc_tensor_release(t2);
    tc_generator_free(g);
    tc_generator_free(h);
}

TEST(random_state_invalid)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(5, &g));
    tc_generator_uniform(g);
    unsigned char st[40], now[40], bad[40];
    tc_generator_get_state(g, st, sizeof st);
    CHECK_ERR(tc_generator_set_state(g, st, 39), TC_ERR_ARG, "39 bytes, expected 40");
    CHECK_ERR(tc_generator_set_state(g, NULL, 40), TC_ERR_ARG, "NULL state");
    memcpy(bad, st, 40);
    bad[0] = 'X';
    CHECK_ERR(tc_generator_set_state(g, bad, 40), TC_ERR_ARG, "bad magic");
    memcpy(bad, st, 40);
    bad[12] ^= 1; /* a flipped seed bit */
    CHECK_ERR(tc_generator_set_state(g, bad, 40), TC_ERR_ARG, "checksum");
    memcpy(bad, st, 40);
    bad[4] = 9;
    CHECK_ERR(tc_generator_set_state(g, bad, 40), TC_ERR_ARG, "version 9");
    /* failed calls left g alone */
    tc_generator_get_state(g, now, sizeof now);
    CHECK(memcmp(now, st, 40) == 0);
    tc_generator_free(g);
}

struct thread_arg {
    int n;
    double sum;
};

static void *draw_default(void *v)
{
    struct thread_arg *a = v;
    for (int i = 0; i < a->n; i++) a->sum += tc_generator_uniform(NULL);
    return NULL;
}

/* Two threads on the default generator: the mutex keeps every draw (each takes half a
 * counter slot, so the slot counter advances by exactly draws / 2). */
TEST(random_default_generator_threads)
{
    unsigned char a[40], b[40];
    tc_generator *d = tc_generator_default();
    tc_generator_seed(d, 77);
    tc_generator_get_state(d, a, sizeof a);
    struct thread_arg args[2] = {{100000, 0}, {100000, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, draw_default, &args[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    tc_generator_get_state(d, b, sizeof b);
    uint64_t s0 = 0, s1 = 0;
    for (int i = 0; i < 8; i++) s0 |= (uint64_t)a[16 + i] << (8 * i), s1 |= (uint64_t)b[16 + i] << (8 * i);
    CHECK(s1 - s0 == 100000);
    CHECK_NEAR(args[0].sum / 100000, 0.5, 0.01);
    CHECK_NEAR(args[1].sum / 100000, 0.5, 0.01);
}

/* ---- reproducibility of the ops -------------------------------------------------------- */

TEST(random_ops_reproducible_and_seed_dependent)
{
    const tc_op ops[] = {TC_OP_UNIFORM, TC_OP_NORMAL, TC_OP_EXPONENTIAL, TC_OP_CAUCHY, TC_OP_LOG_NORMAL,
                         TC_OP_GEOMETRIC, TC_OP_BERNOULLI, TC_OP_RANDOM};
    const double s0[] = {-1, 0, 2, 0, 0, 0.3, 0.5, 0}, s1[] = {3, 1, 0, 1, 0.5, 0, 0, 100};
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(2024, &g));
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        tc_tensor *a = vec(TC_F64, 777), *b = vec(TC_F64, 777), *c = vec(TC_F64, 777);
        tc_generator_seed(g, 2024);
        CHECK_OK(fill(ops[o], a, s0[o], s1[o], g));
        tc_generator_seed(g, 2024);
        CHECK_OK(fill(ops[o], b, s0[o], s1[o], g));
        tc_generator_seed(g, 2025);
        CHECK_OK(fill(ops[o], c, s0[o], s1[o], g));
        CHECK(same_values(a, b));
        CHECK(!same_values(a, c));
        /* a second call continues the stream instead of repeating it */
        CHECK_OK(fill(ops[o], c, s0[o], s1[o], g));
        tc_generator_seed(g, 2024);
        CHECK_OK(fill(ops[o], b, s0[o], s1[o], g));
        CHECK_OK(fill(ops[o], b, s0[o], s1[o], g));
        CHECK(!same_values(a, b));
        tc_tensor_release(a);
        tc_tensor_release(b);
        tc_tensor_release(c);
    }
    tc_generator_free(g);
}

/* Element i maps to counter slots by its row-major index: the thread count and the
 * result's strides change nothing. */
TEST(random_independent_of_threads_and_strides)
{
    int saved = tc_get_num_threads();
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(99, &g));
    const tc_op ops[] = {TC_OP_UNIFORM, TC_OP_NORMAL, TC_OP_RANDOM};
    for (int o = 0; o < 3; o++) {
        tc_tensor *a = vec(TC_F32, 300001), *b = vec(TC_F32, 300001);
        tc_set_num_threads(1);
        tc_generator_seed(g, 99);
        CHECK_OK(fill(ops[o], a, 0, 1000, g));
        tc_set_num_threads(8);
        tc_generator_seed(g, 99);
        CHECK_OK(fill(ops[o], b, 0, 1000, g));
        CHECK(same_values(a, b));
        tc_tensor_release(a);
        tc_tensor_release(b);
    }
    tc_set_num_threads(saved);
    /* a transposed view of a (40, 30) storage, filled, reads like a filled (30, 40) tensor */
    tc_tensor *base = NULL, *tr = NULL, *ref = NULL;
    CHECK_OK(tc_tensor_new(TC_F64, 2, SZ(40, 30), &base));
    CHECK_OK(tc_tensor_new_view(base->storage, TC_F64, 0, 2, SZ(30, 40), SZ(1, 30), &tr));
    CHECK_OK(tc_tensor_new(TC_F64, 2, SZ(30, 40), &ref));
    tc_generator_seed(g, 3);
    CHECK_OK(fill(TC_OP_NORMAL, tr, 0, 1, g));
    tc_generator_seed(g, 3);
    CHECK_OK(fill(TC_OP_NORMAL, ref, 0, 1, g));
    CHECK(same_values(tr, ref));
    tc_tensor_release(base);
    tc_tensor_release(tr);
    tc_tensor_release(ref);
    tc_generator_free(g);
}

/* ---- distributions: moments of 1e6 samples -------------------------------------------- */

TEST(random_moments)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(31337, &g));
    tc_tensor *t = vec(TC_F64, N_MOMENTS);
    double m, v;

    CHECK_OK(fill(TC_OP_UNIFORM, t, -2, 6, g));
    moments(t, &m, &v);
    CHECK_NEAR(m, 2.0, 0.02);
    CHECK_NEAR(v, 64.0 / 12, 0.03);
    double lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < N_MOMENTS; i++) {
        double x = ((double *)tc_tensor_data(t))[i];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    CHECK(lo >= -2 && lo < -1.99 && hi < 6 && hi > 5.99);

    CHECK_OK(fill(TC_OP_NORMAL, t, 3, 2, g));
    moments(t, &m, &v);
    CHECK_NEAR(m, 3.0, 0.01);
    CHECK_NEAR(v, 4.0, 0.03);
    double skew = 0, kurt = 0;
    for (int64_t i = 0; i < N_MOMENTS; i++) {
        double z = (((double *)tc_tensor_data(t))[i] - 3) / 2;
        skew += z * z * z;
        kurt += z * z * z * z;
    }
    CHECK_NEAR(skew / N_MOMENTS, 0.0, 0.02);
    CHECK_NEAR(kurt / N_MOMENTS, 3.0, 0.05);

    CHECK_OK(fill(TC_OP_EXPONENTIAL, t, 4, 0, g));
    moments(t, &m, &v);
    CHECK_NEAR(m, 0.25, 0.002);
    CHECK_NEAR(v, 1.0 / 16, 0.001);

    CHECK_OK(fill(TC_OP_BERNOULLI, t, 0.3, 0, g));
    moments(t, &m, &v);
    CHECK_NEAR(m, 0.3, 0.002);
    CHECK_NEAR(v, 0.21, 0.002);

    CHECK_OK(fill(TC_OP_GEOMETRIC, t, 0.25, 0, g)); /* mean 1/p, variance (1-p)/p^2 */
    moments(t, &m, &v);
    CHECK_NEAR(m, 4.0, 0.02);
    CHECK_NEAR(v, 12.0, 0.2);
    lo = 1e9;
    for (int64_t i = 0; i < N_MOMENTS; i++) lo = fmin(lo, ((double *)tc_tensor_data(t))[i]);
    CHECK(lo == 1);

    CHECK_OK(fill(TC_OP_LOG_NORMAL, t, 0.5, 0.25, g)); /* mean exp(mu + s^2/2) */
    moments(t, &m, &v);
    CHECK_NEAR(m, exp(0.5 + 0.03125), 0.005);

    CHECK_OK(fill(TC_OP_CAUCHY, t, 1, 2, g)); /* no mean: the quartiles are median -+ sigma */
    int64_t below_med = 0, in_iqr = 0;
    for (int64_t i = 0; i < N_MOMENTS; i++) {
        double x = ((double *)tc_tensor_data(t))[i];
        below_med += x < 1;
        in_iqr += x > -1 && x < 3;
    }
    CHECK_NEAR((double)below_med / N_MOMENTS, 0.5, 0.003);
    CHECK_NEAR((double)in_iqr / N_MOMENTS, 0.5, 0.003);

    tc_tensor_release(t);
    tc_generator_free(g);
}

/* uniform's upper end stays open after rounding to a narrow float type */
TEST(random_uniform_open_upper_end)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(8, &g));
    const tc_dtype dts[] = {TC_F16, TC_BF16, TC_F32};
    for (int d = 0; d < 3; d++) {
        tc_tensor *t = vec(dts[d], 200000);
        CHECK_OK(fill(TC_OP_UNIFORM, t, 0, 1, g));
        double mx = 0, s = 0;
        for (int64_t i = 0; i < 200000; i++) {
            double x = ct_at(t, i);
            mx = x > mx ? x : mx;
            s += x;
            CHECK(x >= 0);
        }
        CHECK(mx < 1.0);
        CHECK_NEAR(s / 200000, 0.5, 0.01);
        tc_tensor_release(t);
    }
    tc_generator_free(g);
}

/* ---- integer results -------------------------------------------------------------------- */

TEST(random_integer_dtypes)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(11, &g));
    /* full range of uint8: every value 0..255 shows up */
    tc_tensor *u8 = vec(TC_U8, 100000);
    CHECK_OK(fill(TC_OP_RANDOM, u8, 0, 0, g));
    int seen[256] = {0};
    for (int64_t i = 0; i < 100000; i++) seen[((uint8_t *)tc_tensor_data(u8))[i]]++;
    int all = 1;
    for (int i = 0; i < 256; i++) all &= seen[i] > 0;
    CHECK(all);
    /* [s0, s1) on int32 and int8, ends included exactly */
    tc_tensor *i32 = vec(TC_I32, 50000), *i8 = vec(TC_I8, 50000);
    CHECK_OK(fill(TC_OP_RANDOM, i32, -3, 4, g));
    CHECK_OK(fill(TC_OP_RANDOM, i8, -128, 128, g));
    int lo = 100, hi = -100, lo8 = 0, hi8 = 0;
    for (int64_t i = 0; i < 50000; i++) {
        int x = ((int32_t *)tc_tensor_data(i32))[i], y = ((int8_t *)tc_tensor_data(i8))[i];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        lo8 |= y == -128;
        hi8 |= y == 127;
    }
    CHECK(lo == -3 && hi == 3);
    CHECK(lo8 && hi8);
    /* int64: a range wider than 2^53, and the full non-negative range */
    tc_tensor *i64 = vec(TC_I64, 1000);
    CHECK_OK(fill(TC_OP_RANDOM, i64, -9223372036854775808.0, 9223372036854775808.0, g));
    int neg = 0, big = 0;
    for (int64_t i = 0; i < 1000; i++) {
        int64_t x = ((int64_t *)tc_tensor_data(i64))[i];
        neg += x < 0;
        big += x > ((int64_t)1 << 60) || x < -((int64_t)1 << 60);
    }
    CHECK(neg > 400 && neg < 600);
    CHECK(big > 800);
    CHECK_OK(fill(TC_OP_RANDOM, i64, 0, 0, g));
    for (int64_t i = 0; i < 1000; i++) CHECK(((int64_t *)tc_tensor_data(i64))[i] >= 0);
    /* bernoulli into int and bool results */
    tc_tensor *b = vec(TC_BOOL, 100000);
    CHECK_OK(fill(TC_OP_BERNOULLI, b, 0.25, 0, g));
    int64_t ones = 0;
    for (int64_t i = 0; i < 100000; i++) ones += ((bool *)tc_tensor_data(b))[i];
    CHECK_NEAR(ones / 100000.0, 0.25, 0.01);
    CHECK_OK(fill(TC_OP_BERNOULLI, i32, 1, 0, g));
    for (int64_t i = 0; i < 50000; i++) CHECK(((int32_t *)tc_tensor_data(i32))[i] == 1);
    CHECK_OK(fill(TC_OP_BERNOULLI, u8, 0, 0, g));
    for (int64_t i = 0; i < 100000; i++) CHECK(((uint8_t *)tc_tensor_data(u8))[i] == 0);
    /* geometric on int16 */
    tc_tensor *i16 = vec(TC_I16, 1000);
    CHECK_OK(fill(TC_OP_GEOMETRIC, i16, 1, 0, g));
    for (int64_t i = 0; i < 1000; i++) CHECK(((int16_t *)tc_tensor_data(i16))[i] == 1);
    /* float random: integers within [s0, s1) */
    tc_tensor *f = vec(TC_F32, 1000);
    CHECK_OK(fill(TC_OP_RANDOM, f, -5, 5, g));
    for (int64_t i = 0; i < 1000; i++) {
        float x = ((float *)tc_tensor_data(f))[i];
        CHECK(x == floorf(x) && x >= -5 && x <= 4);
    }
    tc_tensor *fl[] = {u8, i32, i8, i64, b, i16, f};
    for (int i = 0; i < 7; i++) tc_tensor_release(fl[i]);
    tc_generator_free(g);
}

TEST(random_bernoulli_probability_tensor)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(4, &g));
    /* (2, 1) probabilities broadcast over a (2, 50000) result: rows of 0.1 and 0.9 */
    tc_tensor *p = ct_from(TC_F32, 2, SZ(2, 1), VALS(0.1, 0.9)), *out = NULL;
    CHECK_OK(tc_tensor_new(TC_U8, 2, SZ(2, 50000), &out));
    tc_params prm = {.gen = g};
    const tc_tensor *in[1] = {p};
    tc_tensor *o = out;
    CHECK_OK(tc_op_run(TC_OP_BERNOULLI, in, 1, &prm, &o, 1));
    double r0 = 0, r1 = 0;
    for (int64_t i = 0; i < 50000; i++) r0 += ct_at(out, i), r1 += ct_at(out, 50000 + i);
    CHECK_NEAR(r0 / 50000, 0.1, 0.01);
    CHECK_NEAR(r1 / 50000, 0.9, 0.01);
    /* Torch7: a probability tensor of another shape with as many elements */
    tc_tensor *pf = ct_from(TC_F64, 1, SZ(4), VALS(0, 1, 1, 0)), *o4 = NULL;
    CHECK_OK(tc_tensor_new(TC_F64, 2, SZ(2, 2), &o4));
    in[0] = pf;
    o = o4;
    CHECK_OK(tc_op_run(TC_OP_BERNOULLI, in, 1, &prm, &o, 1));
    CHECK(ct_at(o4, 0) == 0 && ct_at(o4, 1) == 1 && ct_at(o4, 2) == 1 && ct_at(o4, 3) == 0);
    tc_tensor *bad = ct_from(TC_F64, 1, SZ(3), VALS(0.5, 1.5, 0)), *o3 = vec(TC_F64, 3);
    in[0] = bad;
    o = o3;
    CHECK_ERR(tc_op_run(TC_OP_BERNOULLI, in, 1, &prm, &o, 1), TC_ERR_ARG, "probability 1.5 at element 1");
    in[0] = pf;
    CHECK_ERR(tc_op_run(TC_OP_BERNOULLI, in, 1, &prm, &o, 1), TC_ERR_SHAPE, "do not fit the result (3)");
    tc_tensor *rel[] = {p, out, pf, o4, bad, o3};
    for (int i = 0; i < 6; i++) tc_tensor_release(rel[i]);
    tc_generator_free(g);
}

/* ---- randperm and multinomial ------------------------------------------------------------ */

TEST(random_randperm)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(17, &g));
    const tc_dtype dts[] = {TC_I64, TC_I32, TC_F64, TC_F32};
    for (int d = 0; d < 4; d++) {
        tc_tensor *t = vec(dts[d], 3); /* resized to (n) */
        tc_params p = {.i = {1000}, .gen = g};
        CHECK_OK(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &t, 1));
        CHECK(t->ndim == 1 && t->size[0] == 1000);
        char seen[1000] = {0};
        int ok = 1, moved = 0;
        for (int64_t i = 0; i < 1000; i++) {
            double x = ct_at(t, i);
            if (x < 0 || x >= 1000 || x != floor(x) || seen[(int)x]) ok = 0;
            else seen[(int)x] = 1;
            moved += x != (double)i;
        }
        CHECK(ok);
        CHECK(moved > 900);
        tc_tensor_release(t);
    }
    /* NULL result: int64 allocated; same seed, same permutation; n = 0 */
    tc_tensor *a = NULL, *b = NULL, *e = vec(TC_I64, 5);
    tc_params p = {.i = {50}, .gen = g};
    tc_generator_seed(g, 1);
    CHECK_OK(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &a, 1));
    tc_generator_seed(g, 1);
    CHECK_OK(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &b, 1));
    CHECK(a->dtype == TC_I64 && same_values(a, b));
    p.i[0] = 0;
    CHECK_OK(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &e, 1));
    CHECK(tc_tensor_numel(e) == 0);
    p.i[0] = -1;
    CHECK_ERR(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &e, 1), TC_ERR_ARG, "n must be non-negative, got -1");
    tc_tensor *h = vec(TC_F16, 1);
    p.i[0] = 5000;
    CHECK_ERR(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &h, 1), TC_ERR_ARG, "does not fit in float16");
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(e);
    tc_tensor_release(h);
    tc_generator_free(g);
}

static tc_status multinomial(const tc_tensor *probs, int64_t n, int repl, tc_generator *g, tc_tensor **out)
{
    tc_params p = {.i = {n, repl}, .gen = g};
    const tc_tensor *in[1] = {probs};
    return tc_op_run(TC_OP_MULTINOMIAL, in, 1, &p, out, 1);
}

TEST(random_multinomial_frequencies)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(21, &g));
    /* unnormalised weights; category 4 has weight 0 and must never be drawn */
    tc_tensor *w = ct_from(TC_F64, 1, SZ(5), VALS(1, 2, 3, 4, 0)), *s = NULL;
    CHECK_OK(multinomial(w, 200000, 1, g, &s));
    CHECK(s->dtype == TC_I64 && s->ndim == 1 && s->size[0] == 200000);
    int64_t cnt[5] = {0};
    for (int64_t i = 0; i < 200000; i++) cnt[((int64_t *)tc_tensor_data(s))[i]]++;
    for (int j = 0; j < 4; j++) CHECK_NEAR(cnt[j] / 200000.0, (j + 1) / 10.0, 0.005);
    CHECK(cnt[4] == 0);
    /* without replacement: (rows, samples), distinct per row; the first draw follows p */
    tc_tensor *w2 = ct_from(TC_F32, 2, SZ(2, 4), VALS(1, 1, 1, 1, 0.7, 0.1, 0.1, 0.1)), *s2 = NULL;
    int64_t first[4] = {0};
    int distinct = 1;
    for (int rep = 0; rep < 4000; rep++) {
        tc_tensor *o = NULL;
        CHECK_OK(multinomial(w2, 4, 0, g, &o));
        CHECK(o->ndim == 2 && o->size[0] == 2 && o->size[1] == 4);
        for (int r = 0; r < 2; r++) {
            int mask = 0;
            for (int k = 0; k < 4; k++) mask |= 1 << (int)ct_at(o, r * 4 + k);
            distinct &= mask == 15;
        }
        first[(int)ct_at(o, 4)]++;
        tc_tensor_release(o);
    }
    CHECK(distinct);
    CHECK_NEAR(first[0] / 4000.0, 0.7, 0.03);
    /* a given int64 result is resized */
    s2 = vec(TC_I64, 1);
    CHECK_OK(multinomial(w2, 3, 1, g, &s2));
    CHECK(s2->ndim == 2 && s2->size[1] == 3);
    /* a float result is refused by the output check */
    tc_tensor *fo = vec(TC_F32, 3);
    CHECK_ERR(multinomial(w, 3, 1, g, &fo), TC_ERR_DTYPE, "expected int64");
    tc_tensor *rel[] = {w, s, w2, s2, fo};
    for (int i = 0; i < 5; i++) tc_tensor_release(rel[i]);
    tc_generator_free(g);
}

/* ---- parameter checks: clear errors, nothing changed ---------------------------------- */

TEST(random_invalid_params)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(1, &g));
    unsigned char st0[40], st1[40];
    tc_generator_get_state(g, st0, sizeof st0);
    tc_tensor *t = ct_from(TC_F64, 1, SZ(3), VALS(7, 8, 9)), *u8 = vec(TC_U8, 3), *i = vec(TC_I32, 3);
    CHECK_ERR(fill(TC_OP_NORMAL, t, 0, -1, g), TC_ERR_ARG, "std >= 0, got mean 0 std -1");
    CHECK_ERR(fill(TC_OP_LOG_NORMAL, t, 0, -0.5, g), TC_ERR_ARG, "log_normal: needs a finite mean and std >= 0");
    CHECK_ERR(fill(TC_OP_UNIFORM, t, 2, 1, g), TC_ERR_ARG, "a <= b, got [2, 1)");
    CHECK_ERR(fill(TC_OP_UNIFORM, t, 0, INFINITY, g), TC_ERR_ARG, "finite bounds");
    CHECK_ERR(fill(TC_OP_BERNOULLI, t, 1.5, 0, g), TC_ERR_ARG, "probability 1.5 is outside [0, 1]");
    CHECK_ERR(fill(TC_OP_BERNOULLI, t, NAN, 0, g), TC_ERR_ARG, "outside [0, 1]");
    CHECK_ERR(fill(TC_OP_GEOMETRIC, t, 0, 0, g), TC_ERR_ARG, "probability 0 is outside (0, 1]");
    CHECK_ERR(fill(TC_OP_GEOMETRIC, t, 1.5, 0, g), TC_ERR_ARG, "outside (0, 1]");
    CHECK_ERR(fill(TC_OP_EXPONENTIAL, t, 0, 0, g), TC_ERR_ARG, "rate (lambda) must be positive");
    CHECK_ERR(fill(TC_OP_CAUCHY, t, 0, 0, g), TC_ERR_ARG, "sigma > 0");
    CHECK_ERR(fill(TC_OP_RANDOM, u8, 0, 300, g), TC_ERR_ARG, "does not fit in uint8");
    CHECK_ERR(fill(TC_OP_RANDOM, u8, -1, 3, g), TC_ERR_ARG, "does not fit in uint8");
    CHECK_ERR(fill(TC_OP_RANDOM, t, 0.5, 3, g), TC_ERR_ARG, "must be integers");
    CHECK_ERR(fill(TC_OP_UNIFORM, i, 0, 1, g), TC_ERR_DTYPE, "uniform: int32 tensors are not supported");
    CHECK_ERR(fill(TC_OP_NORMAL, NULL, 0, 1, g), TC_ERR_ARG, "normal: needs a result tensor");
    /* an expanded result would be written twice at one address */
    tc_tensor *ex = NULL;
    CHECK_OK(tc_tensor_new_view(t->storage, TC_F64, 0, 2, SZ(3, 3), SZ(0, 1), &ex));
    CHECK_ERR(fill(TC_OP_UNIFORM, ex, 0, 1, g), TC_ERR_ARG, "overlapping elements");
    tc_tensor_release(ex);

    /* multinomial */
    tc_tensor *neg = ct_from(TC_F64, 1, SZ(3), VALS(0.5, -0.1, 0.6)), *zero = ct_from(TC_F64, 1, SZ(2), VALS(0, 0));
    tc_tensor *nan = ct_from(TC_F64, 1, SZ(2), VALS(NAN, 1)), *ok = ct_from(TC_F64, 1, SZ(3), VALS(1, 1, 0));
    tc_tensor *ints = vec(TC_I64, 3), *o = NULL;
    CHECK_ERR(multinomial(neg, 2, 1, g, &o), TC_ERR_ARG, "probability -0.1 (row 0, category 1)");
    CHECK_ERR(multinomial(zero, 1, 1, g, &o), TC_ERR_ARG, "row 0 has probabilities summing to 0");
    CHECK_ERR(multinomial(nan, 1, 1, g, &o), TC_ERR_ARG, "must be finite and non-negative");
    CHECK_ERR(multinomial(ok, 4, 0, g, &o), TC_ERR_ARG, "cannot draw 4 samples from 3 categories without replacement");
    CHECK_ERR(multinomial(ok, 3, 0, g, &o), TC_ERR_ARG, "row 0 has 2 non-zero categories");
    CHECK_ERR(multinomial(ok, 0, 1, g, &o), TC_ERR_ARG, "number of samples must be positive, got 0");
    CHECK_ERR(multinomial(ints, 1, 1, g, &o), TC_ERR_DTYPE, "multinomial: int64 tensors are not supported");
    CHECK_ERR(multinomial(NULL, 1, 1, g, &o), TC_ERR_ARG, "needs a probability tensor");
    CHECK(o == NULL);

    /* nothing moved: the tensor kept its values and the generator its state */
    CHECK(ct_at(t, 0) == 7 && ct_at(t, 1) == 8 && ct_at(t, 2) == 9);
    tc_generator_get_state(g, st1, sizeof st1);
    CHECK(memcmp(st0, st1, 40) == 0);
    tc_tensor *rel[] = {t, u8, i, neg, zero, nan, ok, ints};
    for (int k = 0; k < 8; k++) tc_tensor_release(rel[k]);
    tc_generator_free(g);
}

/* gen == NULL draws from the process default generator, which manual seeding makes
 * repeatable like any other. */
TEST(random_default_generator_ops)
{
    tc_tensor *a = vec(TC_F64, 100), *b = vec(TC_F64, 100);
    tc_generator_seed(NULL, 555);
    CHECK(tc_generator_initial_seed(tc_generator_default()) == 555);
    CHECK_OK(fill(TC_OP_UNIFORM, a, 0, 1, NULL));
    tc_generator_seed(tc_generator_default(), 555);
    CHECK_OK(fill(TC_OP_UNIFORM, b, 0, 1, NULL));
    CHECK(same_values(a, b));
    tc_tensor_release(a);
    tc_tensor_release(b);
}

/* Out of memory in a kernel's scratch (the given results already have their size, so the
 * scratch is the call's only allocation): a clean error, results and generator unchanged,
 * because the counter is advanced only after the scratch exists. */
TEST(random_allocation_failure_changes_nothing)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_new(3, &g));
    tc_tensor *w = ct_from(TC_F64, 1, SZ(3), VALS(1, 2, 3));
    tc_tensor *o = ct_from(TC_I64, 1, SZ(2), VALS(-7, -7)), *perm = ct_from(TC_I32, 1, SZ(2), VALS(-7, -7));
    unsigned char st0[40], st1[40];
    tc_generator_get_state(g, st0, sizeof st0);
    for (int repl = 0; repl < 2; repl++) {
        tc_debug_fail_alloc_after(1);
        CHECK_ERR(multinomial(w, 2, repl, g, &o), TC_ERR_MEMORY, "multinomial: out of memory");
        tc_debug_fail_alloc_after(0);
    }
    tc_params p = {.i = {2}, .gen = g};
    tc_debug_fail_alloc_after(1);
    CHECK_ERR(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &perm, 1), TC_ERR_MEMORY, "randperm: out of memory");
    tc_debug_fail_alloc_after(0);
    tc_generator_get_state(g, st1, sizeof st1);
    CHECK(memcmp(st0, st1, 40) == 0);
    CHECK(ct_at(o, 0) == -7 && ct_at(o, 1) == -7 && ct_at(perm, 0) == -7 && ct_at(perm, 1) == -7);
    /* and the same calls succeed once memory is back */
    CHECK_OK(multinomial(w, 2, 0, g, &o));
    CHECK(ct_at(o, 0) != ct_at(o, 1) && ct_at(o, 0) >= 0 && ct_at(o, 0) <= 2);
    CHECK_OK(tc_op_run(TC_OP_RANDPERM, NULL, 0, &p, &perm, 1));
    CHECK(ct_at(perm, 0) + ct_at(perm, 1) == 1);
    tc_tensor_release(w);
    tc_tensor_release(o);
    tc_tensor_release(perm);
    tc_generator_free(g);
}
