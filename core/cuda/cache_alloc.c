/* cache_alloc.c -- the caching device-memory allocator (scheme and contract in
 * cache_alloc.h). Plain C: nvcc compiles it as host code into libtocha_cuda.so, the C
 * compiler into the mock backend and the unit tests.
 *
 * Blocks: every byte of a segment belongs to exactly one block; the blocks of a segment are
 * a doubly linked list in address order (prev/next), so a segment is whole when its one
 * block has neither. A block is either allocated (in the device's ptrmap, keyed by address)
 * or free (in its pool's sorted array). All blocks of a segment share the segment's stream
 * and pool, which is what lets neighbours merge without further checks. A private pool's
 * key stands in the stream field (odd keys; stream handles are even), so the pools need no
 * structure of their own beyond a record per key (ca_private) counting its segments.
 */
#include "cache_alloc.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ca_block {
    char *ptr;
    size_t size;      /* bytes of the block (a multiple of CA_GRANULE) */
    size_t requested; /* the caller's size while allocated */
    uintptr_t stream;
    int allocated;
    int small; /* pool: 1 small, 0 large */
    ca_block *prev, *next; /* neighbours in the segment, by address */
};

/* ---- errors -------------------------------------------------------------------------- */

#ifdef __cplusplus
#define CA_TLS thread_local
#else
#define CA_TLS _Thread_local
#endif
static CA_TLS char g_msg[768];

const char *ca_last_error(void) { return g_msg; }

static tc_status fail(tc_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tc_status fail(tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return code;
}

/* "1.50 MiB" -- sizes in messages are read by people; exact bytes are given next to them. */
static const char *human(char *buf, size_t cap, int64_t bytes)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0) snprintf(buf, cap, "%lld B", (long long)bytes);
    else snprintf(buf, cap, "%.2f %s", v, unit[u]);
    return buf;
}

/* ---- sizes --------------------------------------------------------------------------- */

size_t ca_round_size(size_t nbytes)
{
    if (nbytes > SIZE_MAX - CA_LARGE_ROUND) return 0;
    if (nbytes < CA_GRANULE) return CA_GRANULE;
    return (nbytes + CA_GRANULE - 1) / CA_GRANULE * CA_GRANULE;
}

size_t ca_segment_size(size_t rounded)
{
    if (rounded <= CA_SMALL_SIZE) return CA_SMALL_SEGMENT;
    if (rounded < CA_MIN_LARGE_ALLOC) return CA_LARGE_SEGMENT;
    return (rounded + CA_LARGE_ROUND - 1) / CA_LARGE_ROUND * CA_LARGE_ROUND;
}

/* ---- pools: free blocks sorted by (stream, size, address) ----------------------------- */

static int block_less(const ca_block *x, uintptr_t stream, size_t size, const char *ptr)
{
    if (x->stream != stream) return x->stream < stream;
    if (x->size != size) return x->size < size;
    return x->ptr < ptr;
}

/* First index whose block is not less than the key. */
static size_t pool_lower_bound(const ca_pool *p, uintptr_t stream, size_t size, const char *ptr)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (block_less(p->v[mid], stream, size, ptr)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Makes room for k more blocks owned by the pool, before they exist, so that pool_insert of
 * any owned block never needs memory (owned is counted up as blocks are made). */
static int pool_room(ca_pool *p, size_t k)
{
    if (p->owned + k <= p->cap) return 1;
    size_t cap = p->cap ? p->cap * 2 : 64;
    while (cap < p->owned + k) cap *= 2;
    ca_block **v = (ca_block **)realloc(p->v, cap * sizeof *v);
    if (!v) return 0;
    p->v = v;
    p->cap = cap;
    return 1;
}

static void pool_insert(ca_pool *p, ca_block *b)
{
    size_t i = pool_lower_bound(p, b->stream, b->size, b->ptr);
    memmove(p->v + i + 1, p->v + i, (p->n - i) * sizeof *p->v);
    p->v[i] = b;
    p->n++;
}

static void pool_remove(ca_pool *p, const ca_block *b)
{
    size_t i = pool_lower_bound(p, b->stream, b->size, b->ptr);
    if (i < p->n && p->v[i] == b) {
        memmove(p->v + i, p->v + i + 1, (p->n - i - 1) * sizeof *p->v);
        p->n--;
    }
}

/* ---- allocated blocks by address ----------------------------------------------------- */

static size_t ptr_hash(const void *ptr, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr >> 9; /* blocks are 512-byte multiples apart */
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static void map_put(ca_ptrmap *m, ca_block *b)
{
    size_t i = ptr_hash(b->ptr, m->cap);
    while (m->slot[i]) i = (i + 1) & (m->cap - 1);
    m->slot[i] = b;
    m->n++;
}

/* Keeps the load at most 1/2 after one more insertion. */
static int map_reserve_one(ca_ptrmap *m)
{
    if ((m->n + 1) * 2 <= m->cap) return 1;
    size_t cap = m->cap ? m->cap * 2 : 256;
    ca_block **old = m->slot;
    size_t oldcap = m->cap;
    ca_block **slot = (ca_block **)calloc(cap, sizeof *slot);
    if (!slot) return 0;
    m->slot = slot;
    m->cap = cap;
    m->n = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i]) map_put(m, old[i]);
    free(old);
    return 1;
}

static size_t map_find(const ca_ptrmap *m, const void *ptr)
{
    if (!m->cap) return SIZE_MAX;
    size_t i = ptr_hash(ptr, m->cap);
    while (m->slot[i]) {
        if (m->slot[i]->ptr == (const char *)ptr) return i;
        i = (i + 1) & (m->cap - 1);
    }
    return SIZE_MAX;
}

/* Removes slot i, shifting later members of its probe run back (no tombstones). */
static void map_remove_at(ca_ptrmap *m, size_t i)
{
    size_t mask = m->cap - 1, j = i;
    m->slot[i] = NULL;
    m->n--;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slot[j]) return;
        size_t home = ptr_hash(m->slot[j]->ptr, m->cap);
        /* slot j may move to the hole i when its home is not in (i, j] cyclically */
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        m->slot[i] = m->slot[j];
        m->slot[j] = NULL;
        i = j;
    }
}

/* ---- block records ------------------------------------------------------------------- */

/* Records of merged or released blocks are kept per device (linked through next) and reused:
 * an alloc/free pair then costs no host malloc. Lock held. */
static ca_block *record_get(ca_device *d)
{
    ca_block *b = d->records;
    if (b) d->records = b->next;
    else b = (ca_block *)malloc(sizeof *b);
    if (b) memset(b, 0, sizeof *b);
    return b;
}

static void record_put(ca_device *d, ca_block *b)
{
    b->next = d->records;
    d->records = b;
}

/* ---- private pools ------------------------------------------------------------------ */

static int is_pool_key(uintptr_t key) { return (key & 1) != 0; }

/* Index of key's record on d, or SIZE_MAX (lock held). */
static size_t priv_find(const ca_device *d, uintptr_t key)
{
    for (size_t i = 0; i < d->npriv; i++)
        if (d->priv[i].key == key) return i;
    return SIZE_MAX;
}

/* Whether segments carrying key must stay where they are: an open pool's (lock held). */
static int pool_pinned(const ca_device *d, uintptr_t key)
{
    if (!is_pool_key(key)) return 0;
    size_t i = priv_find(d, key);
    return i != SIZE_MAX && !d->priv[i].closed;
}

/* One segment carrying key left (handed back, or moved to the default stream); a closed
 * pool's record goes with its last segment (lock held). */
static void priv_segment_gone(ca_device *d, uintptr_t key)
{
    if (!is_pool_key(key)) return;
    size_t i = priv_find(d, key);
    if (i == SIZE_MAX) return;
    d->priv[i].nseg--;
    if (d->priv[i].closed && d->priv[i].nseg <= 0) d->priv[i] = d->priv[--d->npriv];
}

/* ---- set-up -------------------------------------------------------------------------- */

tc_status ca_init(ca_allocator *a, const ca_device_ops *ops, int ndev)
{
    if (!a || !ops || !ops->raw_alloc || !ops->raw_free)
        return fail(TC_ERR_ARG, "cuda allocator: init: NULL allocator or device functions");
    if (ndev < 1 || ndev > CA_MAX_DEVICES)
        return fail(TC_ERR_ARG, "cuda allocator: init: %d devices (1..%d supported)", ndev, CA_MAX_DEVICES);
    memset(a, 0, sizeof *a);
    a->ops = *ops;
    for (int d = 0; d < ndev; d++) {
        if (pthread_mutex_init(&a->dev[d].mu, NULL) != 0) {
            while (d-- > 0) pthread_mutex_destroy(&a->dev[d].mu);
            return fail(TC_ERR_MEMORY, "cuda allocator: init: cannot create the mutex of device %d", d);
        }
    }
    a->ndev = ndev;
    return TC_OK;
}

static tc_status check_dev(const ca_allocator *a, int dev, const char *what)
{
    if (!a || a->ndev <= 0) return fail(TC_ERR_ARG, "cuda %s: allocator not initialised", what);
    if (dev < 0 || dev >= a->ndev)
        return fail(TC_ERR_ARG, "cuda %s: no device %d (%d device%s)", what, dev, a->ndev, a->ndev == 1 ? "" : "s");
    return TC_OK;
}

/* ---- returning segments to the device ------------------------------------------------ */

/* Hands back every whole free segment of pool p (lock held). Segments the device refuses
 * to free stay cached; the first such error is returned after trying the others. */
static tc_status release_pool(ca_allocator *a, int dev, ca_pool *p)
{
    ca_device *d = &a->dev[dev];
    tc_status first = TC_OK;
    size_t keep = 0;
    for (size_t i = 0; i < p->n; i++) {
        ca_block *b = p->v[i];
        if (b->prev || b->next || pool_pinned(d, b->stream)) {
            /* part of a segment that still has allocated blocks, or of a live graph's pool */
            p->v[keep++] = b;
            continue;
        }
        char msg[512] = "";
        tc_status s = a->ops.raw_free(a->ops.ctx, dev, b->ptr, msg, sizeof msg);
        if (s) {
            if (!first) first = fail(s, "cuda empty_cache: freeing a %zu-byte segment on device %d: %s", b->size, dev, msg);
            p->v[keep++] = b;
            continue;
        }
        d->st.reserved_bytes -= (int64_t)b->size;
        d->st.segments--;
        d->st.device_frees++;
        p->owned--;
        priv_segment_gone(d, b->stream);
        record_put(d, b);
    }
    p->n = keep; /* removing entries keeps the order */
    return first;
}

static tc_status release_cached(ca_allocator *a, int dev)
{
    tc_status s1 = release_pool(a, dev, &a->dev[dev].small);
    tc_status s2 = release_pool(a, dev, &a->dev[dev].large);
    return s1 ? s1 : s2;
}

/* ---- alloc / free -------------------------------------------------------------------- */

static void bump_peaks(tc_cuda_memstats *st)
{
    if (st->allocated_bytes > st->allocated_bytes_peak) st->allocated_bytes_peak = st->allocated_bytes;
    if (st->reserved_bytes > st->reserved_bytes_peak) st->reserved_bytes_peak = st->reserved_bytes;
    if (st->segments > st->segments_peak) st->segments_peak = st->segments;
}

/* A new segment of seg bytes from the device (lock held). Out of memory empties the cache
 * and tries once more; the message of a final failure names sizes, device and usage. */
static tc_status new_segment(ca_allocator *a, int dev, size_t nbytes, size_t seg, char **out)
{
    ca_device *d = &a->dev[dev];
    char msg[512] = "";
    void *p = NULL;
    tc_status s = a->ops.raw_alloc(a->ops.ctx, dev, seg, &p, msg, sizeof msg);
    if (s == TC_ERR_MEMORY) {
        d->st.oom_retries++;
        (void)release_cached(a, dev); /* a segment that will not free only means less room */
        msg[0] = '\0';
        s = a->ops.raw_alloc(a->ops.ctx, dev, seg, &p, msg, sizeof msg);
    }
    if (s == TC_OK && !p) {
        s = TC_ERR_DEVICE;
        snprintf(msg, sizeof msg, "the device returned NULL");
    }
    if (s) {
        if (s == TC_ERR_MEMORY) {
            char h1[32], h2[32], h3[32], h4[32];
            d->st.ooms++;
            return fail(s,
                        "cuda alloc: out of memory on device %d: cannot allocate %s (%zu bytes, as a %s segment) with "
                        "%s allocated and %s reserved on that device, after emptying the cache and retrying: %s",
                        dev, human(h1, sizeof h1, (int64_t)nbytes), nbytes, human(h2, sizeof h2, (int64_t)seg),
                        human(h3, sizeof h3, d->st.allocated_bytes), human(h4, sizeof h4, d->st.reserved_bytes), msg);
        }
        return fail(s, "cuda alloc: %zu bytes on device %d: %s", nbytes, dev, msg);
    }
    d->st.device_allocs++;
    d->st.segments++;
    d->st.reserved_bytes += (int64_t)seg;
    *out = (char *)p;
    return TC_OK;
}

tc_status ca_alloc(ca_allocator *a, int dev, uintptr_t stream, size_t nbytes, void **ptr)
{
    if (!ptr) return fail(TC_ERR_ARG, "cuda alloc: NULL result");
    *ptr = NULL;
    tc_status s = check_dev(a, dev, "alloc");
    if (s || nbytes == 0) return s;
    size_t size = ca_round_size(nbytes);
    if (!size) return fail(TC_ERR_MEMORY, "cuda alloc: %zu bytes on device %d: larger than any device", nbytes, dev);
    int small = size <= CA_SMALL_SIZE;
    ca_device *d = &a->dev[dev];
    ca_pool *pool = small ? &d->small : &d->large;

    /* Host memory for the bookkeeping first, so a failure leaves nothing half done: two
     * spare records (for a new segment's block and for the remainder of a split), room in
     * the pointer map and in the pool. */
    pthread_mutex_lock(&d->mu);
    if (is_pool_key(stream) && !pool_pinned(d, stream)) {
        pthread_mutex_unlock(&d->mu);
        return fail(TC_ERR_ARG, "cuda alloc: %zu bytes on device %d: private pool %#llx is not open", nbytes, dev,
                    (unsigned long long)stream);
    }
    ca_block *spare[2] = {record_get(d), record_get(d)};
    int nspare = 2;
    if (!spare[0] || !spare[1] || !map_reserve_one(&d->live) || !pool_room(pool, 2)) {
        for (int k = 0; k < 2; k++)
            if (spare[k]) record_put(d, spare[k]);
        pthread_mutex_unlock(&d->mu);
        return fail(TC_ERR_MEMORY, "cuda alloc: %zu bytes on device %d: no host memory for bookkeeping", nbytes, dev);
    }

    ca_block *b = NULL;
    size_t i = pool_lower_bound(pool, stream, size, NULL);
    if (i < pool->n && pool->v[i]->stream == stream) { /* best fit: the smallest that fits */
        b = pool->v[i];
        memmove(pool->v + i, pool->v + i + 1, (pool->n - i - 1) * sizeof *pool->v);
        pool->n--;
        d->st.cache_hits++;
    } else {
        char *base = NULL;
        s = new_segment(a, dev, nbytes, ca_segment_size(size), &base);
        if (s) {
            record_put(d, spare[0]);
            record_put(d, spare[1]);
            pthread_mutex_unlock(&d->mu);
            return s;
        }
        b = spare[--nspare];
        b->ptr = base;
        b->size = ca_segment_size(size);
        b->stream = stream;
        b->small = small;
        pool->owned++;
        if (is_pool_key(stream)) d->priv[priv_find(d, stream)].nseg++;
    }

    /* Split when the rest is worth keeping: any granule in the small pool; more than a small
     * request in the large pool (smaller leftovers would only fragment it). */
    size_t rest = b->size - size;
    if (small ? rest >= CA_GRANULE : rest > CA_SMALL_SIZE) {
        ca_block *r = spare[--nspare];
        r->ptr = b->ptr + size;
        r->size = rest;
        r->stream = b->stream;
        r->small = b->small;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        pool->owned++;
        pool_insert(pool, r);
    }
    b->allocated = 1;
    b->requested = nbytes;
    map_put(&d->live, b);

    d->st.allocated_bytes += (int64_t)b->size;
    d->st.requested_bytes += (int64_t)nbytes;
    d->st.blocks++;
    d->st.alloc_count++;
    bump_peaks(&d->st);
    *ptr = b->ptr;
    while (nspare > 0) record_put(d, spare[--nspare]);
    pthread_mutex_unlock(&d->mu);
    return TC_OK;
}

tc_status ca_free(ca_allocator *a, int dev, void *ptr)
{
    tc_status s = check_dev(a, dev, "free");
    if (s || !ptr) return s;
    ca_device *d = &a->dev[dev];
    pthread_mutex_lock(&d->mu);
    size_t at = map_find(&d->live, ptr);
    if (at == SIZE_MAX) {
        pthread_mutex_unlock(&d->mu);
        /* Say whose pointer it is when another device handed it out (one lock at a time). */
        for (int o = 0; o < a->ndev; o++) {
            if (o == dev) continue;
            pthread_mutex_lock(&a->dev[o].mu);
            int found = map_find(&a->dev[o].live, ptr) != SIZE_MAX;
            pthread_mutex_unlock(&a->dev[o].mu);
            if (found)
                return fail(TC_ERR_ARG, "cuda free: pointer %p belongs to device %d, not device %d", ptr, o, dev);
        }
        return fail(TC_ERR_ARG,
                    "cuda free: pointer %p was not allocated on device %d by the caching allocator "
                    "(freed twice, or not from this allocator)",
                    ptr, dev);
    }
    ca_block *b = d->live.slot[at];
    map_remove_at(&d->live, at);
    ca_pool *pool = b->small ? &d->small : &d->large;
    d->st.allocated_bytes -= (int64_t)b->size;
    d->st.requested_bytes -= (int64_t)b->requested;
    d->st.blocks--;
    d->st.free_count++;
    b->allocated = 0;
    b->requested = 0;

    /* Merge with free neighbours: they leave the pool, the merged block goes back in. */
    ca_block *n = b->next;
    if (n && !n->allocated) {
        pool_remove(pool, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        pool->owned--;
        record_put(d, n);
    }
    ca_block *p = b->prev;
    if (p && !p->allocated) {
        pool_remove(pool, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        pool->owned--;
        record_put(d, b);
        b = p;
    }
    /* A closed pool's segment that is wholly free now serves the default stream. */
    if (!b->prev && !b->next && is_pool_key(b->stream) && !pool_pinned(d, b->stream)) {
        priv_segment_gone(d, b->stream);
        b->stream = 0;
    }
    pool_insert(pool, b);
    pthread_mutex_unlock(&d->mu);
    return TC_OK;
}

tc_status ca_empty_cache(ca_allocator *a, int dev)
{
    tc_status s = check_dev(a, dev, "empty_cache");
    if (s) return s;
    pthread_mutex_lock(&a->dev[dev].mu);
    s = release_cached(a, dev);
    pthread_mutex_unlock(&a->dev[dev].mu);
    return s;
}

tc_status ca_stats(ca_allocator *a, int dev, tc_cuda_memstats *out)
{
    if (!out) return fail(TC_ERR_ARG, "cuda memory_stats: NULL result");
    tc_status s = check_dev(a, dev, "memory_stats");
    if (s) return s;
    pthread_mutex_lock(&a->dev[dev].mu);
    *out = a->dev[dev].st;
    pthread_mutex_unlock(&a->dev[dev].mu);
    return TC_OK;
}

tc_status ca_reset_peak(ca_allocator *a, int dev)
{
    tc_status s = check_dev(a, dev, "reset_peak_stats");
    if (s) return s;
    tc_cuda_memstats *st = &a->dev[dev].st;
    pthread_mutex_lock(&a->dev[dev].mu);
    st->allocated_bytes_peak = st->allocated_bytes;
    st->reserved_bytes_peak = st->reserved_bytes;
    st->segments_peak = st->segments;
    pthread_mutex_unlock(&a->dev[dev].mu);
    return TC_OK;
}

/* ---- private pools: open, close -------------------------------------------------------- */

tc_status ca_pool_open(ca_allocator *a, int dev, uintptr_t *key)
{
    if (!key) return fail(TC_ERR_ARG, "cuda pool_open: NULL result");
    *key = 0;
    tc_status s = check_dev(a, dev, "pool_open");
    if (s) return s;
    ca_device *d = &a->dev[dev];
    pthread_mutex_lock(&d->mu);
    if (d->npriv == d->cappriv) {
        size_t cap = d->cappriv ? d->cappriv * 2 : 8;
        ca_private *v = (ca_private *)realloc(d->priv, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&d->mu);
            return fail(TC_ERR_MEMORY, "cuda pool_open: device %d: no host memory for bookkeeping", dev);
        }
        d->priv = v;
        d->cappriv = cap;
    }
    uint64_t id = __atomic_add_fetch(&a->next_pool, 1, __ATOMIC_RELAXED);
    ca_private *r = &d->priv[d->npriv++];
    r->key = (uintptr_t)((id << 1) | 1);
    r->nseg = 0;
    r->closed = 0;
    *key = r->key;
    pthread_mutex_unlock(&d->mu);
    return TC_OK;
}

/* Moves the wholly free segments carrying key in p to the default stream (lock held). The
 * pool array stays sorted: they leave it and go back in under their new key. */
static void rekey_free_segments(ca_device *d, ca_pool *p, uintptr_t key)
{
    size_t i = pool_lower_bound(p, key, 0, NULL);
    while (i < p->n && p->v[i]->stream == key) {
        ca_block *b = p->v[i];
        if (b->prev || b->next) {
            i++;
            continue;
        }
        memmove(p->v + i, p->v + i + 1, (p->n - i - 1) * sizeof *p->v);
        p->n--;
        priv_segment_gone(d, key);
        b->stream = 0;
        pool_insert(p, b); /* key 0 sorts before any pool key: the next candidate moved to i + 1 */
        i++;
    }
}

tc_status ca_pool_close(ca_allocator *a, int dev, uintptr_t key)
{
    tc_status s = check_dev(a, dev, "pool_close");
    if (s) return s;
    ca_device *d = &a->dev[dev];
    pthread_mutex_lock(&d->mu);
    size_t i = is_pool_key(key) ? priv_find(d, key) : SIZE_MAX;
    if (i == SIZE_MAX || d->priv[i].closed) {
        pthread_mutex_unlock(&d->mu);
        return fail(TC_ERR_ARG, "cuda pool_close: device %d has no open private pool %#llx", dev,
                    (unsigned long long)key);
    }
    d->priv[i].closed = 1;
    int64_t nseg = d->priv[i].nseg;
    if (nseg <= 0) d->priv[i] = d->priv[--d->npriv];
    else {
        rekey_free_segments(d, &d->small, key);
        rekey_free_segments(d, &d->large, key);
    }
    pthread_mutex_unlock(&d->mu);
    return TC_OK;
}

int64_t ca_segments_of(ca_allocator *a, int dev, uintptr_t key)
{
    if (check_dev(a, dev, "segments_of")) return -1;
    ca_device *d = &a->dev[dev];
    int64_t n = 0;
    pthread_mutex_lock(&d->mu);
    ca_pool *pools[2] = {&d->small, &d->large};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < pools[k]->n; i++)
            if (pools[k]->v[i]->stream == key && !pools[k]->v[i]->prev) n++;
    for (size_t i = 0; i < d->live.cap; i++)
        if (d->live.slot[i] && d->live.slot[i]->stream == key && !d->live.slot[i]->prev) n++;
    pthread_mutex_unlock(&d->mu);
    return n;
}

/* ---- tear-down ----------------------------------------------------------------------- */

/* Frees the segment whose first block is head, and all its block records. */
static tc_status drop_segment(ca_allocator *a, int dev, ca_block *head)
{
    char msg[512] = "";
    tc_status s = a->ops.raw_free(a->ops.ctx, dev, head->ptr, msg, sizeof msg);
    if (s) s = fail(s, "cuda allocator: destroy: freeing a segment on device %d: %s", dev, msg);
    while (head) {
        ca_block *next = head->next;
        free(head);
        head = next;
    }
    return s;
}

tc_status ca_destroy(ca_allocator *a)
{
    if (!a) return TC_OK;
    tc_status first = TC_OK;
    for (int dev = 0; dev < a->ndev; dev++) {
        ca_device *d = &a->dev[dev];
        /* Collect the segment heads first: freeing a segment frees blocks that later
         * entries of the pools or the map point at. */
        size_t nheads = 0, cap = d->small.n + d->large.n + d->live.n;
        ca_block **heads = (ca_block **)malloc((cap ? cap : 1) * sizeof *heads);
        if (!heads) {
            if (!first) first = fail(TC_ERR_MEMORY, "cuda allocator: destroy: no host memory");
            continue;
        }
        ca_pool *pools[2] = {&d->small, &d->large};
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < pools[k]->n; i++)
                if (!pools[k]->v[i]->prev) heads[nheads++] = pools[k]->v[i];
        for (size_t i = 0; i < d->live.cap; i++)
            if (d->live.slot[i] && !d->live.slot[i]->prev) heads[nheads++] = d->live.slot[i];
        for (size_t i = 0; i < nheads; i++) {
            tc_status s = drop_segment(a, dev, heads[i]);
            if (s && !first) first = s;
        }
        free(heads);
        while (d->records) {
            ca_block *next = d->records->next;
            free(d->records);
            d->records = next;
        }
        free(d->small.v);
        free(d->large.v);
        free(d->live.slot);
        free(d->priv);
        pthread_mutex_destroy(&d->mu);
        memset(d, 0, sizeof *d);
    }
    a->ndev = 0;
    return first;
}
