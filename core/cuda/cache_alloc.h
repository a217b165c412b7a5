/* cache_alloc.h -- the caching device-memory allocator: plain C bookkeeping over injected
 * raw device alloc/free, so the same source runs inside libtocha_cuda.so (over cudaMalloc,
 * compiled by nvcc as host C), inside the mock backend (over malloc with a capacity) and
 * inside the C unit tests (over a fake device).
 *
 * The scheme is PyTorch's CUDACachingAllocator, reduced to what tocha needs:
 *  - requests round up to CA_GRANULE (512 B); a request of at most CA_SMALL_SIZE (1 MB) is
 *    served from the small pool, whose segments are CA_SMALL_SEGMENT (2 MB); larger ones from
 *    the large pool, whose segments are CA_LARGE_SEGMENT (20 MB) for requests under
 *    CA_MIN_LARGE_ALLOC (10 MB), else the request rounded up to CA_LARGE_ROUND (2 MB);
 *  - each pool keeps its free blocks sorted by (stream, size, address): a request takes the
 *    smallest free block of its own stream that fits (best fit), so a block freed by one
 *    stream is never handed to another while work queued there may still read it;
 *  - a block bigger than needed is split (the rest stays free, in the same segment); a freed
 *    block merges with free neighbours of its segment, so a fully freed segment is one block;
 *  - private pools (CUDA graph capture, ca_pool_open): a pool's key takes the place of the
 *    stream, so its blocks are served only to allocations that name the pool; a live
 *    pool's memory is never handed back to the device nor to anyone else, since a graph
 *    replays on those addresses; ca_pool_close returns it to the default stream (0) as its
 *    segments become wholly free;
 *  - empty_cache hands every segment with nothing allocated in it back to the device;
 *  - when the device refuses a new segment for lack of memory, the allocator empties its
 *    cache on that device and retries once; a second refusal is TC_ERR_MEMORY with a
 *    message naming the size, the device, and the bytes allocated and reserved.
 *
 * Threads: one mutex per device; calls for different devices never wait for each other.
 * Errors: never abort; each ca_* call that fails returns a tc_status and leaves its message
 * in this thread's ca_last_error().
 */
#ifndef TC_CACHE_ALLOC_H
#define TC_CACHE_ALLOC_H

#include "../tocha.h"
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inside a shared backend these stay private (only tc_cuda_entry is exported). */
#define CA_HIDDEN __attribute__((visibility("hidden")))

#define CA_GRANULE         ((size_t)512)
#define CA_SMALL_SIZE      ((size_t)1 << 20)  /* largest request of the small pool */
#define CA_SMALL_SEGMENT   ((size_t)2 << 20)  /* segment size of the small pool */
#define CA_LARGE_SEGMENT   ((size_t)20 << 20) /* segment for large requests under 10 MB */
#define CA_MIN_LARGE_ALLOC ((size_t)10 << 20)
#define CA_LARGE_ROUND     ((size_t)2 << 20)  /* larger requests round up to this */
#define CA_MAX_DEVICES     32

/* The device underneath. raw_alloc returns TC_ERR_MEMORY when the device is out of memory
 * (the only failure that triggers empty-and-retry), another code for anything else; each
 * writes its reason into msg (cap bytes) on failure. ctx is passed back unchanged. */
typedef struct ca_device_ops {
    void *ctx;
    tc_status (*raw_alloc)(void *ctx, int dev, size_t nbytes, void **ptr, char *msg, size_t cap);
    tc_status (*raw_free)(void *ctx, int dev, void *ptr, char *msg, size_t cap);
} ca_device_ops;

typedef struct ca_block ca_block;

/* Free blocks of one pool, sorted by (stream, size, address). cap never falls below the
 * number of blocks the pool owns (free or not), so putting a block back cannot fail. */
typedef struct ca_pool {
    ca_block **v;
    size_t n, cap, owned;
} ca_pool;

/* Allocated blocks by address: open addressing, linear probing, power-of-two capacity. */
typedef struct ca_ptrmap {
    ca_block **slot;
    size_t cap, n;
} ca_ptrmap;

/* A private pool: its key, the segments carrying that key, and whether it was closed (its
 * segments go back to the default stream as they become wholly free; the record goes when
 * the last one has). */
typedef struct ca_private {
    uintptr_t key;
    int64_t nseg;
    int closed;
} ca_private;

typedef struct ca_device {
    pthread_mutex_t mu;
    ca_pool small, large;
    ca_ptrmap live;
    ca_block *records; /* unused block records, for reuse */
    tc_cuda_memstats st;
    ca_private *priv; /* open pools, and closed ones that still have segments */
    size_t npriv, cappriv;
} ca_device;

typedef struct ca_allocator {
    ca_device_ops ops;
    int ndev; /* devices 0..ndev-1 are accepted */
    uint64_t next_pool; /* pool keys are (++next_pool << 1) | 1 */
    ca_device dev[CA_MAX_DEVICES];
} ca_allocator;

/* Message of this thread's last failed ca_* call ("" when none). */
CA_HIDDEN const char *ca_last_error(void);

/* The size a request of nbytes is rounded to (nbytes >= 1; 0 when it would overflow), and
 * the segment that a new block of that rounded size comes from. */
CA_HIDDEN size_t ca_round_size(size_t nbytes);
CA_HIDDEN size_t ca_segment_size(size_t rounded);

/* Sets up a (zeroed or uninitialised) allocator for ndev devices (1..CA_MAX_DEVICES). */
CA_HIDDEN tc_status ca_init(ca_allocator *a, const ca_device_ops *ops, int ndev);
/* Hands every segment back (allocated blocks too) and frees the bookkeeping. For tests and
 * tools that own the allocator; nothing may use it concurrently or afterwards. */
CA_HIDDEN tc_status ca_destroy(ca_allocator *a);

/* *ptr = nbytes of device memory on dev for use on stream (0: the default stream; else a
 * stream handle, which is even, being an aligned pointer; or an open private pool's key);
 * 0 bytes give NULL. The block may be larger (rounded); its contents are undefined. */
CA_HIDDEN tc_status ca_alloc(ca_allocator *a, int dev, uintptr_t stream, size_t nbytes, void **ptr);
/* Returns ptr (from ca_alloc on dev) to the cache; NULL is a no-op. A pointer that dev did
 * not hand out (freed twice, foreign, another device's) is TC_ERR_ARG and changes nothing. */
CA_HIDDEN tc_status ca_free(ca_allocator *a, int dev, void *ptr);
/* Hands every segment of dev with nothing allocated in it back to the device. */
CA_HIDDEN tc_status ca_empty_cache(ca_allocator *a, int dev);
CA_HIDDEN tc_status ca_stats(ca_allocator *a, int dev, tc_cuda_memstats *out);
/* Peaks restart from the current values. */
CA_HIDDEN tc_status ca_reset_peak(ca_allocator *a, int dev);
/* A new private pool on dev: *key (odd, so never a stream handle) is what ca_alloc takes
 * in place of a stream to allocate from it. */
CA_HIDDEN tc_status ca_pool_open(ca_allocator *a, int dev, uintptr_t *key);
/* The pool's owner is gone (its graph destroyed; the caller has waited for the device):
 * its wholly free segments go to the default stream now, the others as their blocks are
 * freed. An unknown or already closed key is TC_ERR_ARG. */
CA_HIDDEN tc_status ca_pool_close(ca_allocator *a, int dev, uintptr_t key);
/* Segments of dev carrying key (a pool's or a stream's), for tests; -1 on a bad dev. */
CA_HIDDEN int64_t ca_segments_of(ca_allocator *a, int dev, uintptr_t key);

#ifdef __cplusplus
}
#endif
#endif /* TC_CACHE_ALLOC_H */
