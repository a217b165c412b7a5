/* mock_cuda.h -- what the two halves of the mock CUDA backend share (tests/c/mock_cuda.c:
 * the table, devices, allocator, streams, events, capture and replay; tests/c/mock_cuda_ops.c:
 * the work itself: elementwise loops, run() with its index ops and the device error word;
 * and the others below).
 * Everything here is hidden in libtocha_cuda_mock.so (-fvisibility=hidden): only
 * tc_cuda_entry is exported.
 */
#ifndef MOCK_CUDA_H
#define MOCK_CUDA_H

#include "cuda/cuda_api.h"
#include <stdbool.h>
#include <stdint.h>

/* One recorded call. COPY re-reads src at replay; VALUE replays the bytes given at capture;
 * RUN replays an index op of run() (views copied, so the call's arrays may go). */
enum { REC_EW, REC_SET, REC_COPY, REC_VALUE, REC_RUN, REC_CPU /* mock_cuda_cpu.c: dst is its call */,
       REC_RAND /* mock_cuda_rand.c: view[0] out, view[1] probabilities (data NULL: none) */ };
typedef struct mock_rec {
    int kind, op, dtype, value, dev;
    int64_t n;
    void *dst;
    const void *src, *in[3];
    int64_t step[3];
    double s0, s1;
    unsigned char bytes[TC_CUDA_CAPTURE_H2D_MAX];
    tc_cuda_view view[3]; /* REC_RUN: out, in[0], in[1] */
    int64_t dim;          /* REC_RUN: params.i[0] */
    uint64_t seed, base;  /* REC_RAND: philox_seed, philox_base */
    const uint64_t *key;  /* REC_RAND: philox_key, read at every replay */
} mock_rec;

/* mock_cuda.c */
tc_status mock_fail(tc_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tc_status mock_use(int dev, const char *what);    /* dev names a mock device */
bool mock_recording(int dev);                     /* work queued now on dev is recorded */
tc_status mock_record(int dev, const mock_rec *r); /* appends to the open capture */
tc_status mock_no_wait(int dev, const char *what); /* refused while this thread captures */

/* mock_cuda_hold.c: streams a test holds (tc_cuda_mock_hold) and the waits on them */
/* The highest hold of (dev, stream) (0: none); with drop, lifts them (all: those of every
 * stream of dev), then the holds of waits that nothing holds up any more. */
uint64_t mock_held_gen(int dev, void *stream, int drop, int all);
#define mock_unhold(dev, stream, all) ((void)mock_held_gen(dev, stream, 1, all))
bool mock_hold_pending(int dev, void *stream, uint64_t gen); /* holds something numbered <= gen */
/* Holds (dev, stream) until (after_stream) holds nothing <= after_gen (0: until lifted);
 * false when the table is full. */
bool mock_add_hold(int dev, void *stream, void *after_stream, uint64_t after_gen);

/* mock_cuda_ops.c */
tc_status mock_ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in, const int64_t *step,
                  double s0, double s1);
tc_status mock_run(int dev, const tc_cuda_call *c);
tc_status mock_devcheck_take(int dev, tc_cuda_devcheck *out);
void mock_replay(const mock_rec *r); /* one record, as graph_launch replays it */
void mock_note_bad(int dev, int op, int dim, int64_t v, int64_t size); /* a bad index into the error word */

/* mock_cuda_cpu.c (opt-in, TOCHA_CUDA_MOCK_KERNELS=cpu): any op through libtocha's CPU kernels */
bool mock_cpu_takes(const tc_cuda_call *c);
tc_status mock_cpu_run(int dev, const tc_cuda_call *c);
void mock_cpu_replay(const mock_rec *r);
void mock_cpu_free(mock_rec *r); /* a REC_CPU record's call, with its graph */

/* mock_cuda_rand.c: the elementwise random ops (float32/float64 results) */
bool mock_rand_takes(const tc_cuda_call *c);
tc_status mock_rand_run(int dev, const tc_cuda_call *c);
void mock_rand_exec(const mock_rec *r);

#endif /* MOCK_CUDA_H */
