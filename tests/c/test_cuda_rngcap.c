/* test_cuda_rngcap.c -- random ops captured in a CUDA graph (core/cuda_stream.c's Philox
 * pair, core/cuda_backend.c's captured draws, core/cuda/random.cu's philox_key): each
 * replay draws fresh numbers, exactly those an eager run of the same ops would draw from
 * the same state of the default generator, and advances the generator as that run would.
 *
 * Every test needs a CUDA device: without one it checks nothing and says so. tests/run.sh
 * runs them over the mock backend, whose random ops (tests/c/mock_cuda_rand.c) share the
 * CUDA kernel's samplers and read the pair when a replay re-executes them, so the whole
 * scheme is checked end to end without a GPU; the first test ties the mock's numbers to the
 * CPU's, so "equal to eager" cannot hold by both sides being wrong together.
 */
#include "ctest.h"
#include "cuda_test_util.h"
#include "cuda/cuda_api.h"
#include "internal.h"
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)

static int have_device(void)
{
    char why[512];
    return ct_cuda_device(why, sizeof why);
}

static tc_tensor *host(const tc_tensor *t) { return ct_to(t, TC_CPU); }

static tc_tensor *dev_tensor(tc_dtype dt, int nd, const int64_t *sz)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new_on(DEV, dt, nd, sz, &t)) printf("  new_on: %s\n", tc_last_error());
    return ct_keep(t);
}

/* Element-wise equal (row-major); NaN never occurs in these draws. */
static int same(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || tc_tensor_numel(a) != tc_tensor_numel(b)) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (ct_at(a, i) != ct_at(b, i)) {
            printf("  element %lld: %.17g vs %.17g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            return 0;
        }
    return 1;
}

static int differ(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (ct_at(a, i) != ct_at(b, i)) return 1;
    return 0;
}

static tc_status draw(tc_op op, tc_tensor *t, double s0, double s1, tc_generator *g)
{
    tc_params p = {.s = {s0, s1}, .gen = g};
    tc_tensor *o = t;
    const tc_tensor *in[1] = {NULL}; /* bernoulli: no probability tensor (scalar p) */
    return tc_op_run(op, in, op == TC_OP_BERNOULLI ? 1 : 0, &p, &o, 1);
}

typedef struct gen_state {
    uint8_t b[64];
    size_t n;
} gen_state;

static gen_state state_of(tc_generator *g)
{
    gen_state s;
    s.n = tc_generator_get_state(g ? g : tc_generator_default(), s.b, sizeof s.b);
    return s;
}

static int same_state(gen_state a, gen_state b) { return a.n == b.n && memcmp(a.b, b.b, a.n) == 0; }

/* ---- the device's eager numbers are the CPU's (mock: mock_cuda_rand.c) --------------------- */

TEST(cuda_dev_rngcap_eager_draws_match_cpu)
{
    if (!have_device()) return;
    static const struct {
        tc_op op;
        double s0, s1;
    } ops[] = {
        {TC_OP_UNIFORM, -2, 3},      {TC_OP_NORMAL, 0.5, 2},      {TC_OP_BERNOULLI, 0.3, 0},
        {TC_OP_RANDOM, -5, 17},      {TC_OP_EXPONENTIAL, 1.5, 0}, {TC_OP_CAUCHY, 1, 0.5},
        {TC_OP_LOG_NORMAL, 0.1, 0.7}, {TC_OP_GEOMETRIC, 0.2, 0},
    };
    int64_t fallbacks = tc_cuda_host_fallbacks(-1);
    for (int dt = TC_F32; dt <= TC_F64; dt++)
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            /* a transposed (strided) 3x5 result of odd size: the last slot's second half unused */
            tc_tensor *c = ct_keep(ct_transposed(ct_keep(ct_arange((tc_dtype)dt, 2, SZ(5, 3))), 0, 1));
            tc_tensor *d = ct_keep(ct_transposed(dev_tensor((tc_dtype)dt, 2, SZ(5, 3)), 0, 1));
            tc_generator_seed(NULL, 77 + k);
            CHECK_OK(draw(ops[k].op, c, ops[k].s0, ops[k].s1, NULL));
            gen_state after_cpu = state_of(NULL);
            tc_generator_seed(NULL, 77 + k);
            CHECK_OK(draw(ops[k].op, d, ops[k].s0, ops[k].s1, NULL));
            CHECK(same_state(after_cpu, state_of(NULL)));
            if (!same(c, host(d))) {
                printf("  %s %s differs from the CPU\n", tc_op_info(ops[k].op)->name, tc_dtype_name((tc_dtype)dt));
                *ctest_failed = 1;
            }
        }
    /* bernoulli with a probability tensor, broadcast over rows */
    tc_tensor *pc = ct_keep(ct_from(TC_F64, 1, SZ(4), VALS(0, 0.25, 0.75, 1)));
    tc_tensor *pd = ct_to(pc, DEV);
    tc_tensor *c = ct_keep(ct_arange(TC_F32, 2, SZ(6, 4))), *d = dev_tensor(TC_F32, 2, SZ(6, 4));
    const tc_tensor *in[1] = {pc};
    tc_tensor *o = c;
    tc_generator_seed(NULL, 5);
    CHECK_OK(tc_op_run(TC_OP_BERNOULLI, in, 1, P(.s = {0}), &o, 1));
    in[0] = pd, o = d;
    tc_generator_seed(NULL, 5);
    CHECK_OK(tc_op_run(TC_OP_BERNOULLI, in, 1, P(.s = {0}), &o, 1));
    tc_tensor *dh = host(d);
    CHECK(same(c, dh));
    for (int r = 0; dh && r < 6; r++) CHECK(ct_at(dh, 4 * r) == 0 && ct_at(dh, 4 * r + 3) == 1);
    if (ct_cuda_mock()) CHECK(tc_cuda_host_fallbacks(-1) == fallbacks); /* the mock drew them itself */
    ct_drop();
}

/* ---- randperm and multinomial: sequential on the CPU, the same numbers on the device ---- */

/* Runs op on (in or nothing) into *o (NULL: allocated) from seed 9; the generator's state after. */
static tc_status seq_draw(tc_op op, const tc_tensor *in, int64_t i0, int64_t i1, tc_tensor **o, gen_state *after)
{
    const tc_tensor *ins[1] = {in};
    tc_generator_seed(NULL, 9);
    tc_status s = tc_op_run(op, ins, in ? 1 : 0, P(.i = {i0, i1}), o, 1);
    *after = state_of(NULL);
    if (s) printf("  %s: %s\n", tc_op_info(op)->name, tc_last_error());
    return s;
}

static int64_t seq_fallbacks(void)
{
    return tc_cuda_host_fallbacks(TC_OP_RANDPERM) + tc_cuda_host_fallbacks(TC_OP_MULTINOMIAL);
}

/* randperm: the Fisher-Yates swaps in rounds (random_seq.cu) end in the CPU's permutation,
 * for sizes below and above the rounds between the host's checks, into int64 (in place),
 * int32 and float32 (converted) and a strided int64 column. */
TEST(cuda_dev_rngcap_randperm_matches_cpu)
{
    if (!have_device()) return;
    int64_t fallbacks = seq_fallbacks();
    static const int64_t ns[] = {1, 2, 3, 17, 1000, 4099};
    static const tc_dtype dts[] = {TC_I64, TC_I32, TC_F32, TC_I64};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        for (int v = 0; v < 4; v++) {
            int64_t n = ns[k];
            tc_tensor *c = ct_keep(ct_arange(dts[v], 1, SZ(n)));
            tc_tensor *d = dev_tensor(dts[v], 1, SZ(n));
            if (v == 3) { /* column 1 of an (n, 2) tensor: stride 2 */
                tc_tensor *wide = dev_tensor(TC_I64, 2, SZ(n, 2)), *col = NULL;
                CHECK_OK(ct_run1(TC_OP_SELECT, wide, NULL, NULL, P(.i = {1, 1}), &col));
                d = ct_keep(col);
                CHECK(d && d->stride[0] == 2);
            }
            gen_state cpu_after, dev_after;
            CHECK_OK(seq_draw(TC_OP_RANDPERM, NULL, n, 0, &c, &cpu_after));
            CHECK_OK(seq_draw(TC_OP_RANDPERM, NULL, n, 0, &d, &dev_after));
            CHECK(same_state(cpu_after, dev_after));
            if (!same(c, host(d))) {
                printf("  randperm(%lld) into %s%s differs from the CPU\n", (long long)n, tc_dtype_name(dts[v]),
                       v == 3 ? " (strided)" : "");
                *ctest_failed = 1;
            }
        }
    if (!ct_cuda_mock()) CHECK(seq_fallbacks() == fallbacks); /* the kernels ran: no host fallback */
    long long rounds = ct_cuda_emu_launches("perm_commit");
    if (rounds >= 0) printf("  %lld rounds of swaps over the emulator\n", rounds);
    if (rounds >= 0) CHECK(rounds >= 24 * 2); /* 24 calls; 8 rounds before the first look */
    ct_drop();
}

/* multinomial with and without replacement, 1-D and 2-D (strided rows, zero weights),
 * float64, float32 and float16 weights, a row long enough for cub's radix path. */
TEST(cuda_dev_rngcap_multinomial_matches_cpu)
{
    if (!have_device()) return;
    int64_t fallbacks = seq_fallbacks();
    /* 3 rows of 7 categories, stored transposed; row 1 has two zero weights */
    tc_tensor *w2 = ct_keep(ct_transposed(ct_keep(ct_from(TC_F64, 2, SZ(7, 3),
                                                          VALS(0.1, 0, 5, 0.2, 1, 1, 0.3, 0, 1, 0.4, 1, 1, 0.5, 2,
                                                               1, 0.6, 1, 1, 0.7, 3, 1))), 0, 1));
    tc_tensor *big = ct_keep(ct_arange(TC_F32, 1, SZ(5000))); /* weights 0..4999: category 0 never drawn */
    tc_tensor *small = ct_keep(ct_from(TC_F16, 1, SZ(4), VALS(1, 0.5, 0.25, 2)));
    static const struct {
        int which;
        int64_t samples, repl;
    } cases[] = {{0, 50, 1}, {0, 4, 0}, {1, 1000, 1}, {1, 300, 0}, {2, 9, 1}, {2, 4, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tc_tensor *wc = cases[k].which == 0 ? w2 : cases[k].which == 1 ? big : small;
        tc_tensor *wd = ct_to(wc, DEV), *c = NULL, *d = NULL;
        gen_state cpu_after, dev_after;
        CHECK_OK(seq_draw(TC_OP_MULTINOMIAL, wc, cases[k].samples, cases[k].repl, &c, &cpu_after));
        CHECK_OK(seq_draw(TC_OP_MULTINOMIAL, wd, cases[k].samples, cases[k].repl, &d, &dev_after));
        ct_keep(c), ct_keep(d);
        CHECK(d && d->device == DEV && d->dtype == TC_I64);
        CHECK(same_state(cpu_after, dev_after));
        if (!same(c, host(d))) {
            printf("  multinomial case %zu differs from the CPU\n", k);
            *ctest_failed = 1;
        }
    }
    /* bad input on the device: refused before any draw, the generator and result untouched */
    tc_tensor *bad = ct_to(ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(0.5, -1, 2))), DEV), *none = NULL;
    const tc_tensor *bin[1] = {bad};
    gen_state before = state_of(NULL);
    CHECK_ERR(tc_op_run(TC_OP_MULTINOMIAL, bin, 1, P(.i = {2, 1}), &none, 1), TC_ERR_ARG,
              "multinomial: probability -1 (row 0, category 1) must be finite and non-negative");
    bin[0] = ct_to(ct_keep(ct_from(TC_F16, 1, SZ(4), VALS(1, 0, 0.25, 2))), DEV);
    CHECK_ERR(tc_op_run(TC_OP_MULTINOMIAL, bin, 1, P(.i = {4, 0}), &none, 1), TC_ERR_ARG,
              "multinomial: row 0 has 3 non-zero categories, cannot draw 4 samples without replacement");
    tc_tensor *bytes = dev_tensor(TC_U8, 1, SZ(4));
    CHECK_ERR(tc_op_run(TC_OP_RANDPERM, NULL, 0, P(.i = {300}), &bytes, 1), TC_ERR_ARG,
              "randperm: n = 300 does not fit in uint8");
    CHECK(none == NULL && bytes->size[0] == 4 && same_state(before, state_of(NULL)));
    if (!ct_cuda_mock()) CHECK(seq_fallbacks() == fallbacks);
    long long cdf = ct_cuda_emu_launches("mn_cdf"), keys = ct_cuda_emu_launches("mn_keys");
    if (cdf >= 0) CHECK(cdf == 3 && keys == 3); /* three cases each way, over the emulator */
    ct_drop();
}

/* ---- captured draws ---------------------------------------------------------------------- */

/* The ops under test: uniform into a, normal into a transposed view of b (strided), bernoulli
 * into c, then e = a * 2 (work that reads a draw). */
typedef struct rig {
    tc_tensor *a, *bt, *c, *e;
} rig;

static tc_status run_ops(rig *r)
{
    TRY(draw(TC_OP_UNIFORM, r->a, -1, 1, NULL));
    TRY(draw(TC_OP_NORMAL, r->bt, 1, 2, NULL));
    TRY(draw(TC_OP_BERNOULLI, r->c, 0.4, 0, NULL));
    const tc_tensor *in[2] = {r->a, r->a};
    tc_tensor *o = r->e;
    return tc_op_run(TC_OP_ADD, in, 2, P(.s = {1}), &o, 1);
}

typedef struct snap {
    tc_tensor *a, *bt, *c, *e;
} snap;

static snap snapshot(const rig *r) { return (snap){host(r->a), host(r->bt), host(r->c), host(r->e)}; }

static int same_snap(snap x, snap y) { return same(x.a, y.a) && same(x.bt, y.bt) && same(x.c, y.c) && same(x.e, y.e); }

TEST(cuda_dev_rngcap_replay_draws_like_eager)
{
    if (!have_device()) return;
    rig r = {dev_tensor(TC_F32, 1, SZ(5)), ct_keep(ct_transposed(dev_tensor(TC_F64, 2, SZ(3, 2)), 0, 1)),
             dev_tensor(TC_F32, 2, SZ(3, 3)), dev_tensor(TC_F32, 1, SZ(5))};
    /* eagerly: two runs from seed 123 */
    tc_generator_seed(NULL, 123);
    CHECK_OK(run_ops(&r));
    snap e1 = snapshot(&r);
    gen_state s1 = state_of(NULL);
    CHECK_OK(run_ops(&r));
    snap e2 = snapshot(&r);
    gen_state s2 = state_of(NULL);
    CHECK(!same_state(s1, s2));
    /* captured: the generator is not touched, nothing runs */
    tc_generator_seed(NULL, 999);
    gen_state before = state_of(NULL);
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_status st = run_ops(&r);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK_OK(st);
    CHECK(same_state(before, state_of(NULL)));
    /* replays from seed 123: the eager numbers, in order, and the eager generator states */
    tc_generator_seed(NULL, 123);
    CHECK_OK(tc_cuda_graph_replay(g));
    snap r1 = snapshot(&r);
    CHECK(same_snap(r1, e1));
    CHECK(same_state(s1, state_of(NULL)));
    CHECK_OK(tc_cuda_graph_replay(g));
    snap r2 = snapshot(&r);
    CHECK(same_snap(r2, e2));
    CHECK(same_state(s2, state_of(NULL)));
    CHECK(differ(r1.a, r2.a) && differ(r1.bt, r2.bt)); /* fresh numbers per replay */
    CHECK(ct_at(r2.e, 3) == 2 * ct_at(r2.a, 3));
    /* eager draws and replays interleave as one stream of the generator */
    tc_generator_seed(NULL, 123);
    CHECK_OK(run_ops(&r));
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(same_snap(snapshot(&r), e2));
    /* several replays in a row (their pairs go through the ring of host scalars): each still
     * fresh, still eager's */
    tc_generator_seed(NULL, 4);
    for (int i = 0; i < 6; i++) CHECK_OK(run_ops(&r));
    snap e7 = snapshot(&r);
    tc_generator_seed(NULL, 4);
    for (int i = 0; i < 6; i++) CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(same_snap(snapshot(&r), e7));
    /* a replay refused inside another capture leaves the generator alone */
    gen_state s = state_of(NULL);
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_ERR(tc_cuda_graph_replay(g), TC_ERR_UNSUPPORTED, "graphs are not nested");
    tc_cuda_graph *g2 = NULL;
    CHECK_ERR(tc_cuda_graph_end(0, &g2), TC_ERR_UNSUPPORTED, "failed, no graph was made");
    CHECK(g2 == NULL && same_state(s, state_of(NULL)));
    tc_cuda_graph_free(g);
    ct_drop();
}

/* One graph replayed on two streams: CUDA orders the launches of one graph, but the copy of
 * the next Philox pair, queued on the second stream, must also wait for the first stream's
 * launch, which may still be drawing from the pair. On the mock, stream a is held (its work
 * "pending"): work queued on b after the second replay must stay pending until a's is done. */
TEST(cuda_dev_rngcap_replay_on_two_streams)
{
    if (!have_device()) return;
    ct_hold_fn hold = ct_cuda_mock_hold();
    if (ct_cuda_mock()) CHECK(hold != NULL);
    tc_tensor *x = dev_tensor(TC_F32, 1, SZ(7));
    tc_generator_seed(NULL, 31);
    CHECK_OK(draw(TC_OP_UNIFORM, x, 0, 1, NULL));
    CHECK_OK(draw(TC_OP_UNIFORM, x, 0, 1, NULL));
    tc_tensor *eager2 = host(x);
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_status st = draw(TC_OP_UNIFORM, x, 0, 1, NULL);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK_OK(st);
    tc_cuda_stream *a = NULL, *b = NULL;
    tc_cuda_event *after_b = NULL;
    CHECK_OK(tc_cuda_stream_new(0, &a));
    CHECK_OK(tc_cuda_stream_new(0, &b));
    CHECK_OK(tc_cuda_event_new(0, 0, &after_b));
    tc_generator_seed(NULL, 31);
    CHECK_OK(tc_cuda_set_stream(0, a));
    if (hold) CHECK(hold(0, tc_cuda_stream_handle(0), 1) == 0);
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK_OK(tc_cuda_set_stream(0, b));
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK_OK(tc_cuda_event_record(after_b, b));
    int done = -1;
    if (hold) {
        CHECK_OK(tc_cuda_event_query(after_b, &done));
        CHECK(done == 0); /* b's replay is ordered behind a's */
        CHECK_OK(tc_cuda_set_stream(0, a));
        CHECK(hold(0, tc_cuda_stream_handle(0), 0) == 0);
        CHECK_OK(tc_cuda_event_query(after_b, &done));
        CHECK(done == 1); /* and runs once a's is done */
    }
    CHECK_OK(tc_cuda_event_sync(after_b));
    CHECK(same(eager2, host(x))); /* the second replay drew eager's second numbers */
    CHECK_OK(tc_cuda_set_stream(0, NULL));
    tc_cuda_event_free(after_b);
    tc_cuda_stream_free(a);
    tc_cuda_stream_free(b);
    tc_cuda_graph_free(g);
    ct_drop();
}

/* A graph without draws never touches the generator; one with draws of no elements neither. */
TEST(cuda_dev_rngcap_graph_without_draws)
{
    if (!have_device()) return;
    tc_tensor *x = ct_to(ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3))), DEV), *y = NULL;
    tc_tensor *empty = dev_tensor(TC_F32, 1, SZ(0));
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(draw(TC_OP_UNIFORM, empty, 0, 1, NULL));
    CHECK_OK(ct_run1(TC_OP_MUL, x, x, NULL, NULL, &y));
    ct_keep(y);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    tc_generator_seed(NULL, 8);
    gen_state s = state_of(NULL);
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(same_state(s, state_of(NULL)) && SAME(host(y), 1, 4, 9));
    tc_cuda_graph_free(g);
    ct_drop();
}

/* ---- refusals ---------------------------------------------------------------------------- */

TEST(cuda_dev_rngcap_refusals)
{
    if (!have_device()) return;
    tc_tensor *a = dev_tensor(TC_F32, 1, SZ(4));
    tc_generator *mine = NULL;
    CHECK_OK(tc_generator_new(42, &mine));
    gen_state mine0 = state_of(mine), def0 = state_of(NULL);
    tc_cuda_graph *g = (tc_cuda_graph *)1;
    /* another generator: refused, the capture fails, neither generator moves */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_ERR(draw(TC_OP_NORMAL, a, 0, 1, mine), TC_ERR_UNSUPPORTED,
              "normal: cannot draw from a generator other than the default one while a CUDA graph is being "
              "captured on cuda:0");
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, NULL)); /* the default one is fine, but too late */
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "a generator other than the default one");
    CHECK(g == NULL && same_state(mine0, state_of(mine)) && same_state(def0, state_of(NULL)));
    /* the default generator passed explicitly is the default generator */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, tc_generator_default()));
    CHECK_OK(tc_cuda_graph_end(0, &g));
    tc_cuda_graph_free(g);
    /* randperm (it waits for the device between rounds) */
    tc_tensor *perm = dev_tensor(TC_I64, 1, SZ(5)), *o = perm;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_ERR(tc_op_run(TC_OP_RANDPERM, NULL, 0, P(.i = {5}), &o, 1), TC_ERR_UNSUPPORTED,
              "randperm: cannot wait for the device while a CUDA graph is being captured");
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "failed, no graph was made");
    /* bernoulli with device probabilities checks them on the host first: refused */
    tc_tensor *pd = ct_to(ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(0.1, 0.2, 0.3, 0.4))), DEV);
    const tc_tensor *in[1] = {pd};
    o = a;
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_ERR(tc_op_run(TC_OP_BERNOULLI, in, 1, P(.s = {0}), &o, 1), TC_ERR_UNSUPPORTED,
              "bernoulli: cannot read device values on the host");
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "failed, no graph was made");
    CHECK(same_state(def0, state_of(NULL)));
    tc_generator_free(mine);
    ct_drop();
}

/* ---- the device pair's memory ------------------------------------------------------------ */

static int64_t allocated(void)
{
    tc_cuda_memstats m;
    return tc_cuda_memory_stats(0, &m) == TC_OK ? m.allocated_bytes : -1;
}

TEST(cuda_dev_rngcap_pair_memory)
{
    if (!have_device()) return;
    tc_tensor *a = dev_tensor(TC_F32, 1, SZ(6));
    int64_t base = allocated();
    CHECK(base > 0);
    /* a graph that draws keeps its pair until freed */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, NULL));
    CHECK(allocated() > base);
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK(allocated() > base);
    CHECK_OK(tc_cuda_graph_replay(g));
    tc_cuda_graph_free(g);
    CHECK(allocated() == base);
    /* a graph that draws nothing gives it back at the end */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK(allocated() == base);
    tc_cuda_graph_free(g);
    /* a failed capture gives it back */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, NULL));
    CHECK(tc_cuda_synchronize(0) == TC_ERR_UNSUPPORTED);
    CHECK(tc_cuda_graph_end(0, &g) == TC_ERR_UNSUPPORTED && g == NULL);
    CHECK(allocated() == base);
    /* freed while another capture is open: held back to its end, then released */
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, NULL));
    CHECK_OK(tc_cuda_graph_end(0, &g));
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_cuda_graph_free(g);
    tc_cuda_graph *g2 = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g2));
    tc_cuda_graph_free(g2);
    CHECK(allocated() == base);
    ct_drop();
}

/* ---- another capture generator (what Lua does: its state's default generator) ------------ */

TEST(cuda_dev_rngcap_capture_generator)
{
    if (!have_device()) return;
    tc_tensor *a = dev_tensor(TC_F32, 1, SZ(5));
    tc_generator *mine = NULL;
    CHECK_OK(tc_generator_new(7, &mine));
    /* eagerly from mine: two runs */
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, mine));
    tc_tensor *e1 = host(a);
    gen_state m1 = state_of(mine);
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, mine));
    tc_tensor *e2 = host(a);
    /* captured with mine as the capture generator; the setting is read when the capture begins */
    tc_cuda_set_capture_generator(mine);
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_cuda_set_capture_generator(NULL);
    CHECK_OK(draw(TC_OP_UNIFORM, a, 0, 1, mine));
    tc_cuda_graph *g = NULL;
    CHECK_OK(tc_cuda_graph_end(0, &g));
    tc_generator_seed(mine, 7);
    tc_generator_seed(NULL, 31);
    gen_state d0 = state_of(NULL);
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(same(host(a), e1) && same_state(m1, state_of(mine)));
    CHECK_OK(tc_cuda_graph_replay(g));
    CHECK(same(host(a), e2) && same_state(d0, state_of(NULL))); /* the process default never moved */
    tc_cuda_graph_free(g);
    /* in such a capture the process default is the other generator: refused */
    tc_cuda_set_capture_generator(mine);
    CHECK_OK(tc_cuda_graph_begin(0, NULL));
    tc_cuda_set_capture_generator(NULL);
    CHECK_ERR(draw(TC_OP_UNIFORM, a, 0, 1, NULL), TC_ERR_UNSUPPORTED, "uniform: cannot draw from a generator other");
    CHECK_ERR(tc_cuda_graph_end(0, &g), TC_ERR_UNSUPPORTED, "failed, no graph was made");
    tc_generator_free(mine);
    ct_drop();
}

/* ---- a compiled graph's capture (core/graph/capture.c) -------------------------------------- */

/* y = x + uniform draw (from a generator of our own, as Lua's graphs draw from its default
 * one): the capture draws from the nodes' generator, and replays equal graph runs. */
TEST(cuda_dev_rngcap_compiled_graph)
{
    if (!have_device()) return;
    tc_generator *mine = NULL;
    CHECK_OK(tc_generator_new(9, &mine));
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(5), VALS(10, 20, 30, 40, 50))), *dx = ct_to(x, DEV);
    tc_tensor *r = dev_tensor(TC_F32, 1, SZ(5));
    tc_graph *g = NULL;
    CHECK_OK(tc_trace_begin(&g));
    CHECK_OK(tc_trace_input(g, dx));
    CHECK_OK(draw(TC_OP_UNIFORM, r, 0, 1, mine));
    tc_tensor *y = ct_op(TC_OP_ADD, dx, r, P(.s = {1}));
    CHECK_OK(tc_trace_output(g, y));
    CHECK_OK(tc_trace_end(g));
    CHECK_OK(tc_graph_compile(g, TC_PASS_ALL));
    const tc_tensor *in[1] = {dx};
    tc_tensor *o[1] = {NULL}, *e[3];
    tc_generator_seed(mine, 5);
    for (int k = 0; k < 3; k++) { /* graph runs: the first is also the warm-up */
        o[0] = NULL;
        CHECK_OK(tc_graph_run(g, in, 1, o, 1));
        ct_keep(o[0]);
        e[k] = host(o[0]);
    }
    CHECK(differ(e[1], e[2]) && ct_at(e[1], 0) >= 10 && ct_at(e[1], 0) < 11);
    gen_state after = state_of(mine), def0 = state_of(NULL);
    tc_captured_graph *cg = NULL;
    tc_tensor *so[1] = {NULL};
    CHECK_OK(tc_graph_capture(g, in, 1, so, 1, &cg));
    ct_keep(so[0]);
    tc_generator_seed(mine, 5);
    for (int k = 0; k < 3; k++) {
        CHECK_OK(tc_graph_replay(cg));
        CHECK(same(host(so[0]), e[k]));
    }
    CHECK(same_state(after, state_of(mine)) && same_state(def0, state_of(NULL)));
    tc_graph_capture_free(cg);
    tc_graph_free(g);
    tc_generator_free(mine);
    ct_drop();
}
