/* cuda_scalars.c -- host scalars joining device work, copied to the device without a host
 * wait.
 *
 * A 0-dim CPU tensor may join a device op (autograd's scalars, a loss scale), and so may an
 * optimizer step's vector of per-step scalars (tc_host_scalars_join); a captured graph's
 * host scalars are re-sent before each replay (graph/capture.c). A plain copy from the host
 * waits for the stream (the caller may reuse the host bytes on return), so every such op
 * used to stop the host until the device had caught up: 150 times per GPT-2 AdamW step, one
 * per parameter, which kept the host from queueing work ahead of the device.
 *
 * Here the bytes are first copied into a page-locked ring, and the device copy is queued
 * from there (copy_h2d_async): the host goes on at once, and the kernel queued next on the
 * same stream reads the values. A slot may be written again only once its copy has run:
 * the ring is cut into chunks, each with an event recorded after every copy into it; all of
 * a chunk's copies go on one stream (a copy on another stream starts the next chunk), so
 * the event's last record covers them all. Entering a chunk again waits for that event,
 * which is long done unless the host has run RING_BYTES of scalars ahead of the device.
 *
 * While this thread captures a CUDA graph (on any device) the plain copy is used: a capture
 * stages host scalars itself (cuda_api.h), and the ring's first use allocates page-locked
 * memory, which a capture refuses.
 */
#include "internal.h"
#include "cuda/cuda_api.h"
#include <pthread.h>
#include <string.h>

#define MAXDEV 32         /* as cuda_stream.c and the backend's allocator */
#define SLOT_ALIGN 16 /* each copy starts on its own 16-byte boundary */
#define CHUNK_BYTES (TC_CUDA_SCALARS_CHUNK_SLOTS * SLOT_ALIGN)
#define CHUNKS TC_CUDA_SCALARS_CHUNKS /* 64 KiB of page-locked memory per device used */

typedef struct scalar_ring {
    char *host;           /* CHUNKS * CHUNK_BYTES page-locked bytes, made at first use */
    void *done[CHUNKS];   /* event recorded after each copy out of the chunk */
    bool recorded[CHUNKS];
    int chunk;            /* the chunk being filled ... */
    size_t used;          /* ... how much of it ... */
    void *stream;         /* ... and the stream its copies went on (a backend handle) */
} scalar_ring;

static scalar_ring g_ring[MAXDEV];
static pthread_mutex_t g_ring_mu = PTHREAD_MUTEX_INITIALIZER; /* one for all: a copy is short */

static bool capturing_any(void)
{
    for (int d = 0; d < MAXDEV; d++)
        if (tc_cuda_capturing(d)) return true;
    return false;
}

/* The page-locked memory and one event per chunk, on first use; nothing kept on failure. */
static tc_status ring_make(const tc_cuda_api *api, int dev, scalar_ring *r)
{
    void *p = NULL;
    TRY(tc_cuda_backend_status(api, api->host_alloc(CHUNKS * CHUNK_BYTES, &p)));
    tc_status st = TC_OK;
    for (int c = 0; c < CHUNKS && !st; c++) st = tc_cuda_backend_status(api, api->event_create(dev, 0, &r->done[c]));
    if (st) {
        for (int c = 0; c < CHUNKS; c++)
            if (r->done[c]) (void)api->event_destroy(dev, r->done[c]), r->done[c] = NULL;
        (void)api->host_release(p);
        return st;
    }
    r->host = p;
    return TC_OK;
}

/* A slot of need bytes for a copy on stream: in the current chunk when it has room and
 * its copies went on the same stream, else at the start of the next chunk, once the
 * copies made from that chunk on the previous lap have run. */
static tc_status ring_slot(const tc_cuda_api *api, int dev, scalar_ring *r, void *stream, size_t need, char **slot)
{
    if (r->used > 0 && (r->used + need > CHUNK_BYTES || r->stream != stream)) {
        int next = (r->chunk + 1) % CHUNKS;
        if (r->recorded[next]) TRY(tc_cuda_backend_status(api, api->event_synchronize(dev, r->done[next])));
        r->recorded[next] = false;
        r->chunk = next, r->used = 0;
    }
    r->stream = stream;
    *slot = r->host + (size_t)r->chunk * CHUNK_BYTES + r->used;
    r->used += need;
    return TC_OK;
}

tc_status tc_cuda_scalars_copy(int device, void *dst, const void *src, size_t nbytes)
{
    const tc_cuda_api *api;
    int dev = TC_DEVICE_ORDINAL(device);
    if (nbytes == 0) return TC_OK;
    if (!TC_DEVICE_IS_CUDA(device) || dev >= MAXDEV || nbytes > TC_CUDA_SCALARS_MAX || capturing_any())
        return tc_device_copy_bytes(device, dst, TC_CPU, src, nbytes);
    TRY(tc_cuda_need("copy", dev, &api));
    scalar_ring *r = &g_ring[dev];
    pthread_mutex_lock(&g_ring_mu);
    tc_status st = r->host ? TC_OK : ring_make(api, dev, r);
    void *stream = tc_cuda_stream_handle(dev);
    char *slot = NULL;
    if (!st) st = ring_slot(api, dev, r, stream, (nbytes + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN, &slot);
    if (!st) {
        memcpy(slot, src, nbytes);
        st = tc_cuda_backend_status(api, api->copy_h2d_async(dev, dst, slot, nbytes));
    }
    if (!st) {
        st = tc_cuda_backend_status(api, api->event_record(dev, r->done[r->chunk], stream));
        if (st) (void)api->stream_synchronize(dev, stream); /* the event misses this copy: wait now */
        else r->recorded[r->chunk] = true;
    }
    pthread_mutex_unlock(&g_ring_mu);
    return st;
}

tc_status tc_cuda_scalars_to_device(const tc_tensor *t, int device, tc_tensor **out)
{
    *out = NULL;
    int64_t nbytes = tc_tensor_numel(t) * tc_elsize(t->dtype);
    if (t->device != TC_CPU || !TC_DEVICE_IS_CUDA(device) || !t->storage || nbytes == 0 ||
        nbytes > TC_CUDA_SCALARS_MAX || !tc_tensor_is_contiguous(t))
        return tc_tensor_to(t, device, -1, out);
    TRY(tc_cuda_check_device("copy", device));
    tc_storage *s;
    TRY(tc_cuda_storage_alloc(device, nbytes, false, &s));
    tc_status st = tc_cuda_scalars_copy(device, s->data, tc_base(t), (size_t)nbytes);
    int64_t stride[TC_MAX_DIMS];
    tc_contiguous_strides(t->ndim, t->size, stride);
    if (!st) st = tc_tensor_new_view(s, (tc_dtype)t->dtype, 0, t->ndim, t->size, stride, out);
    tc_storage_release(s);
    return st;
}
