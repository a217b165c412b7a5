/* emu_devices.cc -- the CUDA emulator's settings (its environment variables) and the runtime
 * calls that only describe the emulated devices: their count, properties and attributes,
 * the runtime and driver versions, and the names and strings of errors (emu.h). Split from
 * emu_runtime.cc, which keeps the state: streams, events, capture (memory: emu_memory.cc).
 */
#include "emu.h"
#include "emu_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace emu {

static size_t parse_bytes(const char *s, size_t dflt)
{
    if (!s || !*s) return dflt;
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024.0;
    else if (*end == 'M' || *end == 'm') v *= 1024.0 * 1024.0;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024.0 * 1024.0;
    return v > 0 ? (size_t)v : dflt;
}
int ndevices()
{
    static int n = [] {
        const char *s = getenv("TOCHA_CUDA_EMU_DEVICES");
        int v = s ? atoi(s) : 1;
        return v < 1 ? 1 : v > 16 ? 16 : v;
    }();
    return n;
}
/* The emulated devices' compute capability as major * 10 + minor: TOCHA_CUDA_EMU_CC ("8.6";
 * default 9.0, an H100's). */
int compute_capability()
{
    static int cc = [] {
        const char *s = getenv("TOCHA_CUDA_EMU_CC");
        int major = 9, minor = 0;
        if (s && (sscanf(s, "%d.%d", &major, &minor) != 2 || major < 1 || minor < 0 || minor > 9)) major = 9, minor = 0;
        return major * 10 + minor;
    }();
    return cc;
}
/* The driver's CUDA version: TOCHA_CUDA_EMU_DRIVER ("12.8" is 12080; default the runtime's). */
int driver_version()
{
    static int v = [] {
        const char *s = getenv("TOCHA_CUDA_EMU_DRIVER");
        int major = 0, minor = 0;
        if (s && sscanf(s, "%d.%d", &major, &minor) == 2 && major > 0) return major * 1000 + minor * 10;
        return CUDART_VERSION;
    }();
    return v;
}
size_t capacity()
{
    static size_t c = parse_bytes(getenv("TOCHA_CUDA_EMU_CAPACITY"), (size_t)2 << 30);
    return c;
}
/* TOCHA_CUDA_EMU_ORDER=reverse: blocks, and a block's threads between two of their waits,
 * run last to first (emu_sched.cc). Read at each grid, so a test can run a kernel both ways. */
bool reverse_order()
{
    const char *s = getenv("TOCHA_CUDA_EMU_ORDER");
    return s && strcmp(s, "reverse") == 0;
}
bool deferred()
{
    static bool on = [] {
        const char *s = getenv("TOCHA_CUDA_EMU_DEFER");
        return !(s && strcmp(s, "0") == 0);
    }();
    return on;
}

} // namespace emu

using emu::capacity;
using emu::compute_capability;
using emu::driver_version;
using emu::ndevices;

/* An invalid device: noted, left for cudaGetLastError, returned. */
static cudaError_t bad_device(const char *what, int dev)
{
    emu::note("%s(device %d): %d device(s)", what, dev, ndevices());
    emu::set_error(cudaErrorInvalidDevice);
    return cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = ndevices();
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    if (dev < 0 || dev >= ndevices()) return bad_device("cudaGetDeviceProperties", dev);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "tocha CUDA emulator (host)");
    p->totalGlobalMem = capacity();
    p->sharedMemPerBlock = 48 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = compute_capability() / 10;
    p->minor = compute_capability() % 10;
    p->multiProcessorCount = 2;
    p->unifiedAddressing = 1;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int dev)
{
    if (dev < 0 || dev >= ndevices()) return bad_device("cudaDeviceGetAttribute", dev);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *v = 2; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *v = 32; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = compute_capability() / 10; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = compute_capability() % 10; return cudaSuccess;
    default:
        emu::note("cudaDeviceGetAttribute: attribute %d is not emulated", (int)attr);
        emu::set_error(cudaErrorInvalidValue);
        return cudaErrorInvalidValue;
    }
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = driver_version();
    return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define EMU_NAME(x)                                                                                                   \
    case x: return #x;
        EMU_NAME(cudaSuccess) EMU_NAME(cudaErrorInvalidValue) EMU_NAME(cudaErrorMemoryAllocation)
        EMU_NAME(cudaErrorInvalidConfiguration) EMU_NAME(cudaErrorInvalidDevice) EMU_NAME(cudaErrorInvalidResourceHandle)
        EMU_NAME(cudaErrorLaunchFailure) EMU_NAME(cudaErrorMisalignedAddress) EMU_NAME(cudaErrorNotReady)
        EMU_NAME(cudaErrorIllegalState) EMU_NAME(cudaErrorIllegalAddress)
        EMU_NAME(cudaErrorStreamCaptureUnsupported) EMU_NAME(cudaErrorStreamCaptureInvalidated)
        EMU_NAME(cudaErrorStreamCaptureImplicit) EMU_NAME(cudaErrorStreamCaptureUnjoined)
        EMU_NAME(cudaErrorStreamCaptureIsolation) EMU_NAME(cudaErrorStreamCaptureUnmatched)
        EMU_NAME(cudaErrorNoKernelImageForDevice) EMU_NAME(cudaErrorUnsupportedPtxVersion)
#undef EMU_NAME
    default: return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalState: return "the operation is not permitted in the current state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureUnjoined: return "capture was not joined";
    case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution on the device";
    case cudaErrorUnsupportedPtxVersion: return "the provided PTX was compiled with an unsupported toolchain.";
    default: return "unknown error";
    }
}
