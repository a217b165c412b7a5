/* mock_cuda_hold.c -- held streams in the mock CUDA backend (mock_cuda.c), for the tests of
 * tc_tensor_record_stream and of cross-stream ordering.
 *
 * Work runs when queued, so events complete at once, unless a test holds the stream
 * (tc_cuda_mock_hold, found with dlsym): an event recorded on it while held stays incomplete
 * until the hold is lifted, by tc_cuda_mock_hold(dev, stream, 0) or a host wait covering the
 * stream (synchronize of the device or the stream, event_synchronize of such an event, the
 * stream's destroy, a plain copy to or from the host queued on it), when a GPU would have
 * finished the work. A stream that waits on an
 * incomplete event (event_wait) is held too, until that event completes: its later work
 * would run after the held work on a GPU. (A host wait on the waiting stream lifts only its
 * own holds: the source's events stay incomplete, which orders more than a GPU would, never less.)
 *
 * Holds get increasing numbers; an event recorded on a stream remembers the highest number
 * the stream held then, and is incomplete while the stream still holds one at most that. */
#include "mock_cuda.h"
#include <pthread.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct hold_entry {
    int dev;
    void *stream;
    uint64_t gen;
    void *after_stream; /* a wait's hold: lifted once after_stream holds nothing <= after_gen */
    uint64_t after_gen; /* (0: a test's hold) */
} hold_entry;
static pthread_mutex_t g_held_mu = PTHREAD_MUTEX_INITIALIZER;
static hold_entry g_held[16];
static int g_nheld;
static uint64_t g_hold_gen;

/* (dev, stream) holds something numbered <= gen (g_held_mu held). */
static bool pending_locked(int dev, void *stream, uint64_t gen)
{
    for (int i = 0; i < g_nheld; i++)
        if (g_held[i].dev == dev && g_held[i].stream == stream && g_held[i].gen <= gen) return true;
    return false;
}

/* The highest hold of (dev, stream) (0: none); with drop (all: of every stream of dev), its
 * holds are lifted, and then the holds of waits on them. */
uint64_t mock_held_gen(int dev, void *stream, int drop, int all)
{
    uint64_t g = 0;
    pthread_mutex_lock(&g_held_mu);
    for (int i = 0; i < g_nheld;)
        if (g_held[i].dev == dev && (all || g_held[i].stream == stream)) {
            if (g_held[i].gen > g) g = g_held[i].gen;
            if (drop) g_held[i] = g_held[--g_nheld];
            else i++;
        } else i++;
    for (bool again = drop; again;) {
        again = false;
        for (int i = 0; i < g_nheld; i++)
            if (g_held[i].after_gen && !pending_locked(g_held[i].dev, g_held[i].after_stream, g_held[i].after_gen)) {
                g_held[i--] = g_held[--g_nheld];
                again = true;
            }
    }
    pthread_mutex_unlock(&g_held_mu);
    return g;
}

/* (dev, stream) holds something numbered <= gen. */
bool mock_hold_pending(int dev, void *stream, uint64_t gen)
{
    pthread_mutex_lock(&g_held_mu);
    bool p = pending_locked(dev, stream, gen);
    pthread_mutex_unlock(&g_held_mu);
    return p;
}

/* Adds a hold of (dev, stream); returns false when the table is full. */
bool mock_add_hold(int dev, void *stream, void *after_stream, uint64_t after_gen)
{
    pthread_mutex_lock(&g_held_mu);
    bool ok = g_nheld < (int)(sizeof g_held / sizeof g_held[0]);
    if (ok) g_held[g_nheld++] = (hold_entry){dev, stream, ++g_hold_gen, after_stream, after_gen};
    pthread_mutex_unlock(&g_held_mu);
    return ok;
}

/* hold 1: events recorded on (dev, stream) (NULL: the legacy default stream) from now on
 * stay incomplete; 0: they complete. Returns 0, or -1 when the table is full. */
EXPORT int tc_cuda_mock_hold(int dev, void *stream, int hold)
{
    mock_unhold(dev, stream, 0);
    return !hold || mock_add_hold(dev, stream, NULL, 0) ? 0 : -1;
}
