/* emu_internal.h -- what the emulator's runtime (emu_runtime.cc), scheduler (emu_sched.cc),
 * settings (emu_devices.cc) and memory (emu_memory.cc) share; the fake libraries use
 * emu.h only. */
#ifndef TC_EMU_INTERNAL_H
#define TC_EMU_INTERNAL_H

#include "emu.h"
#include "emu_launch.h"

namespace emu {
/* Sets this thread's last error (what cudaGetLastError returns and clears). */
void set_error(cudaError_t e);
/* A runtime call's failure: prints "emu: " + the message, sets the last error, returns e. */
cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs f and returns the error it set (cudaSuccess if none). error_of leaves that error for
 * cudaGetLastError as well (a runtime call's); take_error_of leaves the thread's earlier
 * error as it was (a driver call, which reports its errors only by its result). */
cudaError_t error_of(const std::function<void()> &f);
cudaError_t take_error_of(const std::function<void()> &f);
/* enqueue for a kernel: the stream must belong to the current device, as for a launch. */
void enqueue_kernel(cudaStream_t s, const char *what, std::function<void()> work);
/* Runs the held work of device dev (-1: every device), as the calls that wait for the
 * device do; returns its first error, also left for cudaGetLastError. */
cudaError_t finish_device_work(int dev);

/* The settings (emu_devices.cc), read once from the environment (but reverse_order): */
int ndevices();           /* TOCHA_CUDA_EMU_DEVICES (default 1, at most 16) */
int compute_capability(); /* TOCHA_CUDA_EMU_CC ("8.6"; default 9.0) as major * 10 + minor */
int driver_version();     /* TOCHA_CUDA_EMU_DRIVER ("12.8"; default the runtime's) */
size_t capacity();        /* TOCHA_CUDA_EMU_CAPACITY per device (K/M/G; default 2G) */
bool reverse_order();     /* TOCHA_CUDA_EMU_ORDER=reverse: blocks and threads last to first (read each grid) */
bool deferred();          /* TOCHA_CUDA_EMU_DEFER: hold work until the host waits (default 1) */

/* The allocations (emu_memory.cc): whether p lies inside live device memory; whether
 * [p, p + n) lies inside page-locked host memory (cudaHostAlloc). */
bool is_device(const void *p);
bool is_pinned(const void *p, size_t n);
/* While one of these lives, on any thread, the host may touch device memory (device work
 * runs inside one); at other times an access through a device pointer faults
 * (TOCHA_CUDA_EMU_GUARD=0: never). */
struct device_access {
    device_access();
    ~device_access();
    device_access(const device_access &) = delete;
    device_access &operator=(const device_access &) = delete;
};
} // namespace emu

#endif
