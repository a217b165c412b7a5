/* emu.h -- the CUDA emulator's shared interface (C++, tests only).
 *
 * The emulator builds the real CUDA backend (the .cu files of core/cuda) with the host's g++ into
 * build/tests/libtocha_cuda_emu.so, so its kernels, launch configurations, stream and
 * capture logic and cuBLAS/cuDNN/cub calls run on a machine without a GPU:
 *   - device code: tests/emu/emu_device.h (thread indices, __syncthreads and warp shuffles
 *     over fibers, atomics, intrinsics); `k<<<g, b, s, st>>>(...)` is rewritten by
 *     tests/emu/cu2cc.pl into emu::launch(...) (emu_launch.h);
 *   - the CUDA runtime (emu_runtime.cc, emu_memory.cc): device memory is host memory,
 *     registered so that every pointer a library call or a kernel receives is checked
 *     against the live allocations, and inaccessible outside device work, so a host access
 *     through a device pointer faults as on a GPU;
 *     work queued on a stream runs only when the host waits for it (a synchronize, an event,
 *     a copy to pageable memory), in stream order, after the work it depends on by events
 *     or by the legacy stream's rules, so code that misses a wait reads stale results (the
 *     streams' work otherwise never overlaps: TOCHA_CUDA_EMU_DEFER=0 runs it at once); work
 *     queued while a stream captures is recorded and queued at each cudaGraphLaunch;
 *   - cuBLAS, cub and cuDNN (emu_cublas.cc, cub/cub.cuh, emu_cudnn.cc): plain loops that
 *     follow the libraries' documented semantics, with their documented argument checks.
 * It is NOT a model of GPU timing or of memory ordering inside a kernel; it exists to run
 * the index math, the API usage and the host logic of code written without a GPU.
 */
#ifndef TC_EMU_H
#define TC_EMU_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <functional>

namespace emu {

/* Queues work on stream s, to run in order when the host waits for it (emu_runtime.cc), or,
 * while s captures a graph, when the graph is launched. cuBLAS/cuDNN/cub calls put their computation here after checking arguments
 * (so a captured gemm runs at replay, as on a GPU). `what` names it in diagnostics. */
void enqueue(cudaStream_t s, const char *what, std::function<void()> work);

/* Whether [p, p + nbytes) lies inside one live device allocation (cudaMalloc). On failure
 * prints "emu: <what>: ..." to stderr (the pointer, the size, the nearest allocation) and
 * returns false; the caller then returns its library's invalid-value status. */
bool device_range(const void *p, size_t nbytes, const char *what);

/* Whether this thread may not make a potentially unsafe call now (cudaMalloc, a library
 * call that allocates device memory, a wait for the device): a capture is open in a mode
 * that forbids it (cudaThreadExchangeStreamCaptureMode's rules). If so, the captures
 * concerned are invalidated and the call's error is set. */
bool capture_forbids(const char *what);
/* The same for a wait for all of the current device's work (cudaDeviceSynchronize, and
 * the library calls that do one: cublasDestroy): forbidden as above, and also, from any
 * thread in any mode, while a stream of that device captures. */
bool device_wait_forbidden(const char *what);

/* Whether nbytes more fit on the current device (its TOCHA_CUDA_EMU_CAPACITY less what
 * cudaMalloc has handed out): for library allocations made outside the caller's allocator. */
bool device_room(size_t nbytes);

/* Counts one call named `name` with the kernel launches (tc_cuda_emu_launches), so tests can
 * see how a library call was made (emu_cudnn.cc: each convolution's math type). */
void count_call(const char *name);

/* Prints "emu: " + the message to stderr (diagnostics that are not errors of the call). */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace emu

#endif
