/* emu_internal.h -- what the emulator's runtime (emu_runtime.cc) and scheduler
 * (emu_sched.cc) share; the fake libraries use emu.h only. */
#ifndef TC_EMU_INTERNAL_H
#define TC_EMU_INTERNAL_H

#include "emu.h"
#include "emu_launch.h"

namespace emu {
/* Sets this thread's last error (what cudaGetLastError returns and clears). */
void set_error(cudaError_t e);
/* enqueue for a kernel: the stream must belong to the current device, as for a launch. */
void enqueue_kernel(cudaStream_t s, const char *what, std::function<void()> work);
} // namespace emu

#endif
