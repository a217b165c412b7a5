/* mock_cuda.h -- what the two halves of the mock CUDA backend share (tests/c/mock_cuda.c:
 * the table, devices, allocator, streams, events, capture and replay; tests/c/mock_cuda_ops.c:
 * the work itself: elementwise loops, run() with its index ops and the device error word).
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
enum { REC_EW, REC_SET, REC_COPY, REC_VALUE, REC_RUN };
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
} mock_rec;

/* mock_cuda.c */
tc_status mock_fail(tc_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tc_status mock_use(int dev, const char *what);    /* dev names a mock device */
bool mock_recording(int dev);                     /* work queued now on dev is recorded */
tc_status mock_record(int dev, const mock_rec *r); /* appends to the open capture */
tc_status mock_no_wait(int dev, const char *what); /* refused while this thread captures */

/* mock_cuda_ops.c */
tc_status mock_ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in, const int64_t *step,
                  double s0, double s1);
tc_status mock_run(int dev, const tc_cuda_call *c);
tc_status mock_devcheck_take(int dev, tc_cuda_devcheck *out);
void mock_replay(const mock_rec *r); /* one record, as graph_launch replays it */

#endif /* MOCK_CUDA_H */
