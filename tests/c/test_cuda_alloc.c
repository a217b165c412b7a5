/* test_cuda_alloc.c -- the caching device allocator (core/cuda/cache_alloc.c, compiled into
 * this binary) over a fake device: host malloc with a capacity, failing like cudaMalloc when
 * it would be exceeded. Checks rounding, pools, split and merge, reuse per stream, the exact
 * statistics, empty_cache, the out-of-memory retry and its message, and bad frees.
 */
#include "ctest.h"
#include "cuda/cache_alloc.h"
#include <pthread.h>
#include <stdlib.h>

#define MB ((size_t)1 << 20)

/* ---- the fake device ----------------------------------------------------------------- */

typedef struct fake_dev {
    pthread_mutex_t mu; /* the allocator calls the device from any thread */
    size_t capacity[2], used[2];
    int nalloc, nfree, nrefused; /* raw calls that succeeded / were refused */
    int fail_other;              /* next raw_alloc fails with TC_ERR_DEVICE */
    void *live[1024];            /* raw allocations held, to check what raw_free is given */
    size_t live_size[1024];
    int nlive;
    int bad_free; /* raw_free got a pointer it never handed out */
} fake_dev;

static tc_status fake_alloc(void *ctx, int dev, size_t n, void **ptr, char *msg, size_t cap)
{
    fake_dev *f = (fake_dev *)ctx;
    tc_status s = TC_OK;
    pthread_mutex_lock(&f->mu);
    if (f->fail_other) {
        f->fail_other = 0;
        snprintf(msg, cap, "fake: device lost");
        s = TC_ERR_DEVICE;
    } else if (n > f->capacity[dev] - f->used[dev] || f->nlive == 1024 || !(*ptr = malloc(n))) {
        f->nrefused++;
        snprintf(msg, cap, "fake: out of memory");
        s = TC_ERR_MEMORY;
    } else {
        f->live[f->nlive] = *ptr;
        f->live_size[f->nlive++] = n;
        f->used[dev] += n;
        f->nalloc++;
    }
    pthread_mutex_unlock(&f->mu);
    return s;
}

static tc_status fake_free(void *ctx, int dev, void *ptr, char *msg, size_t cap)
{
    fake_dev *f = (fake_dev *)ctx;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < f->nlive; i++) {
        if (f->live[i] != ptr) continue;
        f->used[dev] -= f->live_size[i];
        f->live[i] = f->live[f->nlive - 1];
        f->live_size[i] = f->live_size[f->nlive - 1];
        f->nlive--;
        f->nfree++;
        pthread_mutex_unlock(&f->mu);
        free(ptr);
        return TC_OK;
    }
    f->bad_free = 1;
    pthread_mutex_unlock(&f->mu);
    snprintf(msg, cap, "fake: bad free");
    return TC_ERR_ARG;
}

/* An allocator over a fresh fake device with the given capacities (device 1 only when
 * cap1 > 0). Both are heap-allocated: ca_allocator holds 32 devices' state. */
static ca_allocator *fake_new(fake_dev *f, size_t cap0, size_t cap1)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->capacity[0] = cap0;
    f->capacity[1] = cap1;
    ca_allocator *a = (ca_allocator *)malloc(sizeof *a);
    ca_device_ops ops = {f, fake_alloc, fake_free};
    if (!a || ca_init(a, &ops, cap1 ? 2 : 1) != TC_OK) {
        free(a);
        return NULL;
    }
    return a;
}

static int fake_done(ca_allocator *a, fake_dev *f)
{
    tc_status s = ca_destroy(a);
    free(a);
    return s == TC_OK && f->nlive == 0 && !f->bad_free;
}

static tc_cuda_memstats stats_of(ca_allocator *a, int dev)
{
    tc_cuda_memstats st;
    memset(&st, 0xff, sizeof st);
    if (ca_stats(a, dev, &st) != TC_OK) memset(&st, 0xff, sizeof st);
    return st;
}

/* ---- tests --------------------------------------------------------------------------- */

TEST(cuda_alloc_rounding)
{
    CHECK(ca_round_size(1) == 512);
    CHECK(ca_round_size(512) == 512);
    CHECK(ca_round_size(513) == 1024);
    CHECK(ca_round_size(MB) == MB);
    CHECK(ca_round_size(MB + 1) == MB + 512);
    CHECK(ca_round_size(SIZE_MAX - 10) == 0); /* overflow is refused, not wrapped */
    CHECK(ca_segment_size(512) == 2 * MB);
    CHECK(ca_segment_size(MB) == 2 * MB);
    CHECK(ca_segment_size(MB + 512) == 20 * MB);
    CHECK(ca_segment_size(10 * MB - 512) == 20 * MB);
    CHECK(ca_segment_size(10 * MB) == 10 * MB);
    CHECK(ca_segment_size(11 * MB + 512) == 12 * MB);
}

TEST(cuda_alloc_small_pool_split_and_merge)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 64 * MB, 0);
    CHECK(a != NULL);
    if (!a) return;
    void *p1, *p2, *p3;
    CHECK(ca_alloc(a, 0, 0, 100, &p1) == TC_OK);
    CHECK(ca_alloc(a, 0, 0, 1000, &p2) == TC_OK);
    CHECK(ca_alloc(a, 0, 0, 512, &p3) == TC_OK);
    /* one 2 MB segment, carved in address order */
    CHECK(f.nalloc == 1 && f.used[0] == 2 * MB);
    CHECK((char *)p2 == (char *)p1 + 512);
    CHECK((char *)p3 == (char *)p2 + 1024);
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.allocated_bytes == 512 + 1024 + 512);
    CHECK(st.requested_bytes == 100 + 1000 + 512);
    CHECK(st.reserved_bytes == (int64_t)(2 * MB) && st.segments == 1 && st.blocks == 3);
    CHECK(st.alloc_count == 3 && st.cache_hits == 2 && st.device_allocs == 1);

    /* freeing the middle block leaves a 1024-byte hole that a fitting request reuses */
    CHECK(ca_free(a, 0, p2) == TC_OK);
    void *q;
    CHECK(ca_alloc(a, 0, 0, 700, &q) == TC_OK);
    CHECK(q == p2); /* best fit: the hole, not the 2 MB tail */
    CHECK(ca_free(a, 0, q) == TC_OK);

    /* free all: the blocks merge back into one free segment, which empty_cache returns */
    CHECK(ca_free(a, 0, p1) == TC_OK);
    CHECK(ca_free(a, 0, p3) == TC_OK);
    st = stats_of(a, 0);
    CHECK(st.allocated_bytes == 0 && st.requested_bytes == 0 && st.blocks == 0);
    CHECK(st.allocated_bytes_peak == 2048 && st.reserved_bytes == (int64_t)(2 * MB));
    CHECK(st.free_count == 4 && st.alloc_count == 4);
    /* merged: a whole-segment request of 1 MB is served from it without a new segment */
    CHECK(ca_alloc(a, 0, 0, MB, &q) == TC_OK);
    CHECK(q == p1 && f.nalloc == 1);
    CHECK(ca_free(a, 0, q) == TC_OK);
    CHECK(ca_empty_cache(a, 0) == TC_OK);
    st = stats_of(a, 0);
    CHECK(st.reserved_bytes == 0 && st.segments == 0 && st.device_frees == 1);
    CHECK(st.reserved_bytes_peak == (int64_t)(2 * MB) && st.segments_peak == 1);
    CHECK(f.nfree == 1 && f.used[0] == 0);
    CHECK(fake_done(a, &f));
}

TEST(cuda_alloc_large_pool)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 256 * MB, 0);
    if (!a) return;
    void *p, *q, *r;
    /* 3 MB -> a 20 MB segment, split (the 17 MB rest is more than a small request) */
    CHECK(ca_alloc(a, 0, 0, 3 * MB, &p) == TC_OK);
    CHECK(f.nalloc == 1 && f.used[0] == 20 * MB);
    CHECK(ca_alloc(a, 0, 0, 5 * MB, &q) == TC_OK);
    CHECK(f.nalloc == 1 && (char *)q == (char *)p + 3 * MB);
    /* a small request never comes from the large pool */
    CHECK(ca_alloc(a, 0, 0, 4096, &r) == TC_OK);
    CHECK(f.nalloc == 2 && f.used[0] == 22 * MB);
    /* 12 MB + 1: its own segment, rounded to 2 MB */
    void *big;
    CHECK(ca_alloc(a, 0, 0, 12 * MB + 1, &big) == TC_OK);
    CHECK(f.nalloc == 3 && f.used[0] == 36 * MB);
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.allocated_bytes == (int64_t)(3 * MB + 5 * MB + 4096 + 12 * MB + 512));
    CHECK(st.requested_bytes == (int64_t)(3 * MB + 5 * MB + 4096 + 12 * MB + 1));
    CHECK(st.reserved_bytes == (int64_t)(36 * MB) && st.segments == 3);
    /* the 14 MB segment was split: 12 MB + 512 used, 2 MB - 512 (> 1 MB) free; freed, it
     * merges back to 14 MB */
    CHECK(ca_free(a, 0, big) == TC_OK);
    const int64_t others = (int64_t)(3 * MB + 5 * MB + 4096);
    void *again;
    /* 13 MB leaves exactly 1 MB: not split off a large block (the block stays 14 MB) */
    CHECK(ca_alloc(a, 0, 0, 13 * MB, &again) == TC_OK);
    CHECK(again == big && f.nalloc == 3);
    CHECK(stats_of(a, 0).allocated_bytes == others + (int64_t)(14 * MB));
    CHECK(ca_free(a, 0, again) == TC_OK);
    /* 13 MB - 512 leaves 1 MB + 512: split */
    CHECK(ca_alloc(a, 0, 0, 13 * MB - 512, &again) == TC_OK);
    CHECK(again == big && f.nalloc == 3);
    CHECK(stats_of(a, 0).allocated_bytes == others + (int64_t)(13 * MB - 512));
    CHECK(ca_free(a, 0, again) == TC_OK);
    CHECK(ca_free(a, 0, p) == TC_OK);
    CHECK(ca_free(a, 0, q) == TC_OK);
    CHECK(ca_free(a, 0, r) == TC_OK);
    CHECK(ca_empty_cache(a, 0) == TC_OK);
    CHECK(f.used[0] == 0 && f.nfree == 3 && stats_of(a, 0).reserved_bytes == 0);
    CHECK(fake_done(a, &f));
}

TEST(cuda_alloc_streams_are_separate)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 64 * MB, 0);
    if (!a) return;
    void *p, *q, *r;
    CHECK(ca_alloc(a, 0, 0x10, 4096, &p) == TC_OK);
    CHECK(ca_free(a, 0, p) == TC_OK);
    /* stream 0x20 does not get stream 0x10's cached memory (stream keys are handles: even;
     * odd keys are private pools) */
    CHECK(ca_alloc(a, 0, 0x20, 4096, &q) == TC_OK);
    CHECK(f.nalloc == 2 && q != p);
    /* stream 0x10 does */
    CHECK(ca_alloc(a, 0, 0x10, 4096, &r) == TC_OK);
    CHECK(r == p && f.nalloc == 2);
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.cache_hits == 1 && st.device_allocs == 2 && st.segments == 2);
    CHECK(ca_free(a, 0, q) == TC_OK && ca_free(a, 0, r) == TC_OK);
    CHECK(fake_done(a, &f));
}

TEST(cuda_alloc_oom_retry_after_emptying_cache)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 40 * MB, 0);
    if (!a) return;
    void *p, *q, *keep;
    CHECK(ca_alloc(a, 0, 0, 4096, &keep) == TC_OK); /* a 2 MB small segment, stays in use */
    CHECK(ca_alloc(a, 0, 0, 15 * MB, &p) == TC_OK); /* its own 16 MB segment (the 1 MB rest unsplit) */
    CHECK(ca_alloc(a, 0, 0, 2 * MB, &q) == TC_OK);  /* a 20 MB large segment */
    CHECK(f.used[0] == 38 * MB && f.nalloc == 3);
    CHECK(ca_free(a, 0, p) == TC_OK);
    CHECK(ca_free(a, 0, q) == TC_OK);
    /* 36 MB cached, 2 MB in use; a 30 MB segment does not fit next to them, so the cache is
     * emptied and the retry succeeds */
    tc_cuda_memstats before = stats_of(a, 0);
    void *big;
    CHECK(ca_alloc(a, 0, 0, 30 * MB, &big) == TC_OK);
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.oom_retries == before.oom_retries + 1 && st.ooms == 0);
    CHECK(f.nrefused == 1);
    CHECK(st.reserved_bytes == (int64_t)(32 * MB) && st.segments == 2);
    CHECK(st.allocated_bytes == (int64_t)(30 * MB + 512 * 8));
    CHECK(ca_free(a, 0, big) == TC_OK);
    CHECK(ca_free(a, 0, keep) == TC_OK);
    CHECK(fake_done(a, &f));
}

TEST(cuda_alloc_oom_after_retry_is_an_error)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 24 * MB, 0);
    if (!a) return;
    void *p, *q = (void *)1;
    CHECK(ca_alloc(a, 0, 0, 12 * MB, &p) == TC_OK); /* 12 MB segment */
    tc_status s = ca_alloc(a, 0, 0, 16 * MB, &q);
    CHECK(s == TC_ERR_MEMORY && q == NULL);
    const char *m = ca_last_error();
    CHECK(strstr(m, "cuda alloc: out of memory on device 0") == m);
    CHECK(strstr(m, "16.00 MiB (16777216 bytes") != NULL);
    CHECK(strstr(m, "12.00 MiB allocated and 12.00 MiB reserved") != NULL);
    CHECK(strstr(m, "after emptying the cache and retrying") != NULL);
    CHECK(strstr(m, "fake: out of memory") != NULL);
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.ooms == 1 && st.oom_retries == 1 && f.nrefused == 2);
    /* nothing was lost: the live block is still there, and freeing makes room */
    CHECK(st.allocated_bytes == (int64_t)(12 * MB) && st.blocks == 1);
    CHECK(ca_free(a, 0, p) == TC_OK);
    CHECK(ca_alloc(a, 0, 0, 16 * MB, &q) == TC_OK); /* cached 12 MB is emptied, 16 MB fits */
    CHECK(stats_of(a, 0).oom_retries == 2);
    CHECK(ca_free(a, 0, q) == TC_OK);

    /* another device failure is passed on, without emptying the cache */
    f.fail_other = 1;
    CHECK(ca_alloc(a, 0, 0, 100 * MB, &q) == TC_ERR_DEVICE);
    CHECK(strstr(ca_last_error(), "fake: device lost") != NULL);
    CHECK(stats_of(a, 0).oom_retries == 2);
    /* a request too large to round */
    CHECK(ca_alloc(a, 0, 0, SIZE_MAX - 3, &q) == TC_ERR_MEMORY);
    CHECK(strstr(ca_last_error(), "larger than any device") != NULL);
    CHECK(fake_done(a, &f));
}

TEST(cuda_alloc_bad_free_and_devices)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 64 * MB, 64 * MB);
    if (!a) return;
    void *p, *q;
    CHECK(ca_alloc(a, 0, 0, 1000, &p) == TC_OK);
    CHECK(ca_alloc(a, 1, 0, 1000, &q) == TC_OK);
    CHECK(f.used[0] == 2 * MB && f.used[1] == 2 * MB);
    CHECK(stats_of(a, 1).allocated_bytes == 1024 && stats_of(a, 0).allocated_bytes == 1024);
    /* another device's pointer: named, refused, nothing changes */
    CHECK(ca_free(a, 0, q) == TC_ERR_ARG);
    CHECK(strstr(ca_last_error(), "belongs to device 1, not device 0") != NULL);
    CHECK(ca_free(a, 0, p) == TC_OK);
    /* double free and a foreign pointer */
    CHECK(ca_free(a, 0, p) == TC_ERR_ARG);
    CHECK(strstr(ca_last_error(), "was not allocated on device 0") != NULL);
    int local;
    CHECK(ca_free(a, 0, &local) == TC_ERR_ARG);
    CHECK(ca_free(a, 0, (char *)q + 512) == TC_ERR_ARG); /* inside a block is not a block */
    CHECK(ca_free(a, 0, NULL) == TC_OK);
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.free_count == 1 && st.allocated_bytes == 0);
    /* bad devices */
    CHECK(ca_alloc(a, 2, 0, 10, &p) == TC_ERR_ARG);
    CHECK(strstr(ca_last_error(), "cuda alloc: no device 2 (2 devices)") != NULL);
    CHECK(ca_stats(a, -1, &st) == TC_ERR_ARG);
    CHECK(ca_empty_cache(a, 5) == TC_ERR_ARG);
    CHECK(ca_alloc(a, 0, 0, 0, &p) == TC_OK && p == NULL);
    CHECK(ca_alloc(a, 0, 0, 10, NULL) == TC_ERR_ARG);
    /* reset_peak: peaks restart from the current values */
    CHECK(ca_reset_peak(a, 1) == TC_OK);
    st = stats_of(a, 1);
    CHECK(st.allocated_bytes_peak == 1024 && st.reserved_bytes_peak == (int64_t)(2 * MB));
    CHECK(ca_free(a, 1, q) == TC_OK);
    CHECK(ca_reset_peak(a, 1) == TC_OK);
    CHECK(stats_of(a, 1).allocated_bytes_peak == 0);
    CHECK(fake_done(a, &f)); /* destroy hands back the cached segments of both devices */
    CHECK(f.used[0] == 0 && f.used[1] == 0);

    ca_allocator b;
    ca_device_ops ops = {&f, fake_alloc, fake_free};
    CHECK(ca_init(&b, &ops, 0) == TC_ERR_ARG);
    CHECK(ca_init(&b, &ops, CA_MAX_DEVICES + 1) == TC_ERR_ARG);
}

/* Many blocks of mixed sizes freed in a scrambled order: everything merges back and the
 * totals stay exact (this walks the pool's sorted array and the pointer map's growth and
 * backward-shift deletion). */
TEST(cuda_alloc_many_blocks)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 1024 * MB, 0);
    if (!a) return;
    enum { N = 3000 };
    void **p = (void **)calloc(N, sizeof *p);
    size_t want = 0;
    uint64_t x = 12345;
    for (int i = 0; i < N && p; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 1 + (size_t)(x >> 33) % 200000;
        CHECK(ca_alloc(a, 0, 0, n, &p[i]) == TC_OK);
        memset(p[i], i & 0xff, n < 64 ? n : 64);
        want += ca_round_size(n);
    }
    CHECK(stats_of(a, 0).allocated_bytes == (int64_t)want);
    for (int k = 0; k < N && p; k++) {
        int i = (int)((k * 1777u) % N); /* 1777 is prime to 3000: a permutation */
        CHECK(*(unsigned char *)p[i] == (unsigned char)(i & 0xff));
        CHECK(ca_free(a, 0, p[i]) == TC_OK);
    }
    tc_cuda_memstats st = stats_of(a, 0);
    CHECK(st.allocated_bytes == 0 && st.blocks == 0 && st.free_count == N);
    CHECK(ca_empty_cache(a, 0) == TC_OK);
    st = stats_of(a, 0);
    CHECK(st.reserved_bytes == 0 && st.segments == 0 && f.used[0] == 0); /* every segment merged whole */
    free(p);
    CHECK(fake_done(a, &f));
}

/* Threads allocating and freeing on two devices at once: every block keeps the pattern its
 * owner wrote (no two live blocks overlap) and the totals add up afterwards. */
typedef struct worker {
    ca_allocator *a;
    int id, dev, errors;
} worker;

static void *work(void *arg)
{
    worker *w = (worker *)arg;
    void *live[16] = {0};
    size_t len[16] = {0};
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
    for (int it = 0; it < 4000; it++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((x >> 40) % 16);
        if (live[k]) {
            const unsigned char *p = (const unsigned char *)live[k];
            for (size_t i = 0; i < len[k]; i += 509)
                if (p[i] != (unsigned char)(w->id * 16 + k)) w->errors++;
            if (p[len[k] - 1] != (unsigned char)(w->id * 16 + k)) w->errors++;
            if (ca_free(w->a, w->dev, live[k]) != TC_OK) w->errors++;
            live[k] = NULL;
        } else {
            /* both pools: 1 in 8 up to 3 MB, the rest up to 64 KB */
            len[k] = 1 + (size_t)(x >> 20) % ((x >> 13) % 8 ? 64 * 1024 : 3 * MB);
            if (ca_alloc(w->a, w->dev, 0, len[k], &live[k]) != TC_OK) {
                w->errors++;
                continue;
            }
            unsigned char *p = (unsigned char *)live[k];
            for (size_t i = 0; i < len[k]; i += 509) p[i] = (unsigned char)(w->id * 16 + k);
            p[len[k] - 1] = (unsigned char)(w->id * 16 + k);
        }
    }
    for (int k = 0; k < 16; k++)
        if (live[k] && ca_free(w->a, w->dev, live[k]) != TC_OK) w->errors++;
    return NULL;
}

TEST(cuda_alloc_threads)
{
    fake_dev f;
    ca_allocator *a = fake_new(&f, 4096 * MB, 4096 * MB);
    if (!a) return;
    enum { T = 4 };
    pthread_t th[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker){a, i, i % 2, 0};
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0);
    }
    for (int d = 0; d < 2; d++) {
        tc_cuda_memstats st = stats_of(a, d);
        CHECK(st.allocated_bytes == 0 && st.requested_bytes == 0 && st.blocks == 0);
        CHECK(st.alloc_count == st.free_count && st.alloc_count > 2000);
        CHECK(st.reserved_bytes == (int64_t)f.used[d]);
        CHECK(ca_empty_cache(a, d) == TC_OK);
        CHECK(stats_of(a, d).segments == 0 && f.used[d] == 0);
    }
    CHECK(fake_done(a, &f));
}
