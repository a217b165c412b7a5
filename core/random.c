/* random.c -- random number generators: a Philox4x32-10 key (the seed) plus a 64-bit
 * counter of used slots (core/philox.h has the stream layout), the Box-Muller cache, and
 * the process default generator.
 *
 * Threads: the default generator (tc_generator_default, or NULL where a generator is taken)
 * is guarded by one mutex, so any number of threads may draw from it. A generator made with
 * tc_generator_new is NOT thread-safe: give each thread its own, or lock around it. Tensor
 * ops only hold the lock while reserving their counter range; the numbers themselves are
 * computed outside it, in parallel.
 *
 * State bytes (tc_generator_get_state), little-endian, 40 bytes:
 *   0  "TCPX" magic        4  version (1)    5  words used in the scalar block (0..4)
 *   6  normal cached (0/1) 7  zero           8  seed (u64)     16 next free slot (u64)
 *   24 cached normal (f64) 32 FNV-1a 64 checksum of bytes 0..31
 * set_state checks every field, so a truncated or corrupted state is refused instead of
 * producing a silently different stream.
 */
#include "internal.h"
#include "philox.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define STATE_BYTES 40
#define STATE_VERSION 1

struct tc_generator {
    uint64_t seed;     /* the Philox key; also the initial seed */
    uint64_t next;     /* next unused counter slot */
    uint32_t words[4]; /* the scalar block (slot next - 1) */
    int used;          /* words of it already consumed; 4 = none left */
    int has_normal;    /* Box-Muller's second value is cached */
    double normal;
    bool is_default; /* lives in static storage; guarded by default_lock */
};

static tc_generator default_gen;
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* SplitMix64 finaliser: spreads clock bits over the whole seed. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void reset(tc_generator *g, uint64_t seed)
{
    g->seed = seed;
    g->next = 0;
    g->used = 4;
    g->has_normal = 0;
    g->normal = 0;
}

/* The default generator is seeded from the clock (wall and monotonic nanoseconds and the
 * pid, so two processes started together still differ) when first used. */
static void init_default(void)
{
    struct timespec a = {0}, b = {0};
    clock_gettime(CLOCK_REALTIME, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t s = mix64((uint64_t)a.tv_sec * 1000000000ull + (uint64_t)a.tv_nsec);
    s = mix64(s ^ ((uint64_t)b.tv_sec * 1000000000ull + (uint64_t)b.tv_nsec) ^ ((uint64_t)getpid() << 32));
    reset(&default_gen, s);
    default_gen.is_default = true;
}

tc_generator *tc_generator_default(void)
{
    pthread_once(&default_once, init_default);
    return &default_gen;
}

/* NULL means the default; the default is locked for the duration of a call. */
static tc_generator *acquire(tc_generator *g)
{
    if (!g || g->is_default) {
        g = tc_generator_default();
        pthread_mutex_lock(&default_lock);
    }
    return g;
}

static void release(tc_generator *g)
{
    if (g->is_default) pthread_mutex_unlock(&default_lock);
}

tc_status tc_generator_new(uint64_t seed, tc_generator **out)
{
    if (!out) return tc_set_error(TC_ERR_ARG, "generator_new: NULL result pointer");
    tc_generator *g = tc_malloc(sizeof *g, "generator_new");
    if (!g) return TC_ERR_MEMORY;
    memset(g, 0, sizeof *g);
    reset(g, seed);
    *out = g;
    return TC_OK;
}

void tc_generator_free(tc_generator *g)
{
    if (g && !g->is_default) free(g);
}

void tc_generator_seed(tc_generator *g, uint64_t seed)
{
    g = acquire(g);
    reset(g, seed);
    release(g);
}

uint64_t tc_generator_initial_seed(const tc_generator *g)
{
    tc_generator *m = acquire((tc_generator *)g);
    uint64_t s = m->seed;
    release(m);
    return s;
}

uint64_t tc_generator_reserve(tc_generator *g, uint64_t nslots, uint64_t *seed)
{
    g = acquire(g);
    g->used = 4; /* the rest of a scalar block is dropped: ops start on a fresh slot */
    uint64_t base = g->next;
    g->next += nslots;
    *seed = g->seed;
    release(g);
    return base;
}

/* ---- scalar draws ------------------------------------------------------------------- */

/* Two more words of the scalar stream: the next block is a fresh slot when the current one
 * has fewer than two words left (so a uniform never straddles two slots). */
static void next_pair(tc_generator *g, uint32_t *lo, uint32_t *hi)
{
    if (g->used > 2) {
        tc_philox_block b = tc_philox_at(g->seed, g->next++, 0);
        memcpy(g->words, b.w, sizeof g->words);
        g->used = 0;
    }
    *lo = g->words[g->used];
    *hi = g->words[g->used + 1];
    g->used += 2;
}

static double uniform_locked(tc_generator *g)
{
    uint32_t lo, hi;
    next_pair(g, &lo, &hi);
    return tc_philox_u53(lo, hi);
}

double tc_generator_uniform(tc_generator *g)
{
    g = acquire(g);
    double u = uniform_locked(g);
    release(g);
    return u;
}

/* Box-Muller: one radius and angle give two independent normals; the second is cached in
 * the state (and so survives get/set_state). 1 - u lies in (0, 1], so the log is finite. */
double tc_generator_normal(tc_generator *g)
{
    g = acquire(g);
    double z;
    if (g->has_normal) {
        g->has_normal = 0;
        z = g->normal;
    } else {
        double u1 = uniform_locked(g), u2 = uniform_locked(g);
        double r = sqrt(-2.0 * log(1.0 - u1)), th = 6.283185307179586 * u2;
        z = r * cos(th);
        g->normal = r * sin(th);
        g->has_normal = 1;
    }
    release(g);
    return z;
}

/* ---- state as bytes ------------------------------------------------------------------ */

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

size_t tc_generator_get_state(const tc_generator *g, void *buf, size_t cap)
{
    unsigned char s[STATE_BYTES] = {'T', 'C', 'P', 'X', STATE_VERSION};
    tc_generator *m = acquire((tc_generator *)g);
    s[5] = (unsigned char)m->used;
    s[6] = (unsigned char)m->has_normal;
    put64(s + 8, m->seed);
    put64(s + 16, m->next);
    uint64_t nb = 0;
    if (m->has_normal) memcpy(&nb, &m->normal, sizeof nb);
    release(m);
    put64(s + 24, nb);
    put64(s + 32, fnv1a(s, 32));
    if (buf) memcpy(buf, s, cap < STATE_BYTES ? cap : STATE_BYTES);
    return STATE_BYTES;
}

tc_status tc_generator_set_state(tc_generator *g, const void *buf, size_t n)
{
    const unsigned char *s = buf;
    if (!s) return tc_set_error(TC_ERR_ARG, "generator_set_state: NULL state");
    if (n != STATE_BYTES)
        return tc_set_error(TC_ERR_ARG, "generator_set_state: state is %zu bytes, expected %d", n, STATE_BYTES);
    if (memcmp(s, "TCPX", 4) != 0)
        return tc_set_error(TC_ERR_ARG, "generator_set_state: not a tocha generator state (bad magic)");
    if (s[4] != STATE_VERSION)
        return tc_set_error(TC_ERR_ARG, "generator_set_state: state version %d, expected %d", s[4], STATE_VERSION);
    if (get64(s + 32) != fnv1a(s, 32))
        return tc_set_error(TC_ERR_ARG, "generator_set_state: checksum mismatch (corrupted state)");
    uint64_t next = get64(s + 16), nb = get64(s + 24);
    double normal;
    memcpy(&normal, &nb, sizeof normal);
    if (s[5] > 4 || s[6] > 1 || s[7] != 0 || (s[5] < 4 && next == 0) || (s[6] && !isfinite(normal)) ||
        (!s[6] && nb != 0))
        return tc_set_error(TC_ERR_ARG,
                            "generator_set_state: invalid fields (words used %d, normal flag %d, slot %llu)",
                            s[5], s[6], (unsigned long long)next);
    tc_generator *m = acquire(g);
    m->seed = get64(s + 8);
    m->next = next;
    m->used = s[5];
    m->has_normal = s[6];
    m->normal = s[6] ? normal : 0;
    if (m->used < 4) { /* the scalar block is a function of its slot: recompute it */
        tc_philox_block b = tc_philox_at(m->seed, next - 1, 0);
        memcpy(m->words, b.w, sizeof m->words);
    }
    release(m);
    return TC_OK;
}
