/* cuda_record.h -- libtocha-internal hooks of tc_tensor_record_stream (core/cuda_record.c):
 * the device-storage free path (cuda_backend.c's device_free) asks whether a block has
 * recorded streams and, if so, hands its release over; allocations poll the releases whose
 * events have completed; synchronize, empty_cache and an out-of-memory retry drain them.
 * dev is a CUDA ordinal everywhere. None of these sets libtocha's error message except
 * tc_cuda_record_drain, which returns a status.
 */
#ifndef TC_CUDA_RECORD_H
#define TC_CUDA_RECORD_H

#include "tocha.h"
#include <stdint.h>

/* 1 when ptr (a block of dev being released) had streams recorded on it: the release is
 * then deferred until events recorded now on those streams have completed (this call
 * owns it from here on); 0 when the caller releases it as usual. */
int tc_cuda_record_on_free(int dev, void *ptr);
/* Releases the deferred blocks of dev whose events have completed (a query, no wait). A
 * no-op while this thread captures on dev. Cheap when nothing is pending. */
void tc_cuda_record_poll(int dev);
/* Waits for every deferred block of dev (-1: every device) and releases it. Skips a device
 * this thread captures on (its blocks wait for the capture's end). */
tc_status tc_cuda_record_drain(int dev);
/* Blocks of dev whose release is deferred (events pending or not yet recorded), and blocks
 * with recorded streams still allocated: for tests and diagnostics. */
int64_t tc_cuda_record_pending(int dev);
int64_t tc_cuda_record_tracked(int dev);

/* ---- captures by other threads ------------------------------------------------------------
 * A CUDA graph capture takes in whatever is queued on the captured stream, by any thread:
 * an event recorded there by another thread's release would become part of the graph (and
 * a query of it would invalidate the capture). cuda_stream.c marks a stream captured around
 * the backend's capture_begin with the record lock held (so a release either recorded its
 * event before the capture began or sees the mark), and unmarks it after capture_end; the
 * events of a stream so marked are recorded at the first poll or drain after the capture. */
void tc_cuda_record_lock(int lock);                 /* 1: take the lock; 0: give it back */
int tc_cuda_stream_captured(const tc_cuda_stream *s); /* cuda_stream.c: any thread captures s */

/* ---- stream-ordered scratch (core/graph/cuda_launch.c) ------------------------------------
 * Device memory for one launch on this thread's current stream of dev: nbytes from the
 * caching allocator (filed under that stream, or the capture's private pool), the bytes
 * [zero_from, nbytes) set to zero by a memset queued on the stream. Give it back with
 * tc_cuda_scratch_done right after queueing the launch: the allocator hands the block out
 * again only to later work on the same stream, which the stream orders after the launch,
 * so launches on different streams never share it and no wait is needed. */
tc_status tc_cuda_scratch_take(int dev, size_t nbytes, size_t zero_from, void **ptr);
void tc_cuda_scratch_done(int dev, void *ptr);

#endif /* TC_CUDA_RECORD_H */
