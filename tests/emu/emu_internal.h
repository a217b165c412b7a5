/* emu_internal.h -- what the emulator's runtime (emu_runtime.cc) and scheduler
 * (emu_sched.cc) share; the fake libraries use emu.h only. */
#ifndef TC_EMU_INTERNAL_H
#define TC_EMU_INTERNAL_H

#include "emu.h"
#include "emu_launch.h"

namespace emu {
/* Sets this thread's last error (what cudaGetLastError returns and clears). */
void set_error(cudaError_t e);
/* Runs f and returns the error it set (cudaSuccess if none). error_of leaves that error for
 * cudaGetLastError as well (a runtime call's); take_error_of leaves the thread's earlier
 * error as it was (a driver call, which reports its errors only by its result). */
cudaError_t error_of(const std::function<void()> &f);
cudaError_t take_error_of(const std::function<void()> &f);
/* enqueue for a kernel: the stream must belong to the current device, as for a launch. */
void enqueue_kernel(cudaStream_t s, const char *what, std::function<void()> work);
} // namespace emu

#endif
