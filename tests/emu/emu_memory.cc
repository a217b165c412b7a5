/* emu_memory.cc -- the CUDA emulator's memory: cudaMalloc / cudaFree / cudaHostAlloc /
 * cudaFreeHost / cudaPointerGetAttributes, the registry of live allocations that every copy,
 * memset, library call and kernel argument is checked against, and the pages behind device
 * memory, which the host can touch only while device work runs.
 *
 * Why: on a GPU, host code that dereferences a device pointer crashes. The emulator's device
 * memory is host memory, so such a read would quietly work in every emulated test and crash
 * on the first real GPU (tocha.jit.step read each step's loss that way). So device memory
 * lives in one reserved address range that is inaccessible (PROT_NONE) except while the
 * emulator runs device work (kernels, copies, memsets, library calls) or fills a new
 * allocation: a host access through a device pointer at any other moment faults at once,
 * and the emulator's SIGSEGV handler says so on stderr before the fault takes its usual
 * course (a core dump, or the sanitizer's report with the host's stack).
 *
 * Layout: device d owns [base + d * span, base + (d + 1) * span), span being twice the
 * capacity (so fragmentation never refuses what the capacity allows), rounded up to 2 MB.
 * Within it, first fit over a map of free ranges, 256-byte aligned (cudaMalloc's
 * guarantee). Only the part ever used (up to a high-water mark) changes protection, and it
 * asks for transparent huge pages, so opening and closing device memory updates a few page
 * table entries rather than one per 4 KB page; freed pages go back to the system.
 *
 * TOCHA_CUDA_EMU_GUARD=0 leaves device memory accessible at all times (to look at it from
 * gdb, say).
 */
#include "emu.h"
#include "emu_internal.h"
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <iterator>
#include <map>
#include <mutex>

namespace {

const size_t HUGE_PAGE = (size_t)2 << 20, PAGE = 4096, ALIGN = 256;

struct region {
    size_t high = 0;                /* bytes from the region's start ever handed out, rounded to HUGE_PAGE */
    std::map<size_t, size_t> holes; /* free ranges: offset -> length */
};

/* ---- the pages -------------------------------------------------------------------------- */

std::mutex g_mu; /* the pages: everything below up to the registry */
char *g_base;    /* the reservation: device d's region starts at g_base + d * g_span */
size_t g_span;
int g_ndev;
region g_regions[16];
int g_open; /* device_access objects alive, on any thread */
struct sigaction g_previous_segv;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool guarded()
{
    static bool g = [] {
        const char *s = getenv("TOCHA_CUDA_EMU_GUARD");
        return !(s && s[0] == '0');
    }();
    return g;
}
bool accessible() { return !guarded() || g_open > 0; }

/* Opens or closes every region's used part. Called with g_mu held. */
void set_access_locked(bool open)
{
    if (!g_base) return;
    for (int d = 0; d < g_ndev; d++)
        if (g_regions[d].high && mprotect(g_base + d * g_span, g_regions[d].high, open ? PROT_READ | PROT_WRITE : PROT_NONE))
            emu::note("mprotect of device %d's memory failed: %s", d, strerror(errno));
}

/* Appends s to buf (async-signal-safe: the handler below cannot call printf). */
size_t put(char *buf, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap) buf[at++] = *s++;
    return at;
}
size_t put_hex(char *buf, size_t at, size_t cap, uintptr_t v)
{
    char digits[2 + 2 * sizeof v + 1];
    int n = 0;
    do digits[n++] = "0123456789abcdef"[v & 15];
    while (v >>= 4);
    at = put(buf, at, cap, "0x");
    while (n > 0 && at + 1 < cap) buf[at++] = digits[--n];
    return at;
}

/* Says what a fault inside device memory means, then puts the previous handler back and
 * returns: the faulting access runs again and meets that handler (or the default action). */
void on_segv(int, siginfo_t *si, void *)
{
    uintptr_t a = (uintptr_t)si->si_addr, base = (uintptr_t)g_base;
    if (base && a >= base && a - base < g_span * (size_t)g_ndev) {
        char msg[400];
        size_t n = put(msg, 0, sizeof msg, "emu: SIGSEGV at ");
        n = put_hex(msg, n, sizeof msg, a);
        n = put(msg, n, sizeof msg,
                g_open ? ", device memory outside every allocation: device work went past its buffers\n"
                       : ", device memory touched by the host outside any device work: host code read or wrote "
                         "through a device pointer, which fails on a GPU too (copy it to the host first)\n");
        ssize_t ignored = write(2, msg, n);
        (void)ignored;
    }
    sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

/* Reserves the address range on the first allocation (the settings are known by then).
 * Called with g_mu held. */
bool reserve_locked()
{
    if (g_base) return true;
    g_ndev = emu::ndevices();
    g_span = round_up(emu::capacity() * 2, HUGE_PAGE);
    size_t total = g_span * (size_t)g_ndev + HUGE_PAGE;
    void *m = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        emu::note("cannot reserve %zu bytes of address space for device memory: %s", total, strerror(errno));
        return false;
    }
    g_base = (char *)round_up((uintptr_t)m, HUGE_PAGE);
    (void)madvise(g_base, g_span * (size_t)g_ndev, MADV_HUGEPAGE); /* best effort */
    for (int d = 0; d < g_ndev; d++) g_regions[d].holes[0] = g_span;
    if (guarded()) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_previous_segv);
    }
    return true;
}

/* Bytes on device dev, 256-byte aligned, not filled (nullptr: no room). */
void *device_pages(int dev, size_t bytes)
{
    std::lock_guard<std::mutex> l(g_mu);
    if (dev < 0 || !reserve_locked() || dev >= g_ndev) return nullptr;
    size_t n = round_up(bytes ? bytes : 1, ALIGN);
    region &r = g_regions[dev];
    for (auto it = r.holes.begin(); it != r.holes.end(); ++it) {
        if (it->second < n) continue;
        size_t at = it->first, len = it->second;
        r.holes.erase(it);
        if (len > n) r.holes[at + n] = len - n;
        size_t high = round_up(at + n, HUGE_PAGE);
        char *start = g_base + dev * g_span;
        if (high > r.high) {
            if (accessible() && mprotect(start + r.high, high - r.high, PROT_READ | PROT_WRITE))
                emu::note("mprotect of device %d's new memory failed: %s", dev, strerror(errno));
            r.high = high;
        }
        return start + at;
    }
    return nullptr;
}

/* Gives back what device_pages gave, with its size. */
void free_device_pages(void *p, size_t bytes)
{
    std::lock_guard<std::mutex> l(g_mu);
    size_t off = (size_t)((char *)p - g_base);
    int dev = (int)(off / g_span);
    region &r = g_regions[dev];
    size_t at = off - dev * g_span, n = round_up(bytes ? bytes : 1, ALIGN);
    auto next = r.holes.lower_bound(at);
    if (next != r.holes.end() && at + n == next->first) { /* merge with the hole after */
        n += next->second;
        next = r.holes.erase(next);
    }
    if (next != r.holes.begin()) { /* and with the one before */
        auto prev = std::prev(next);
        if (prev->first + prev->second == at) {
            at = prev->first;
            n += prev->second;
            r.holes.erase(prev);
        }
    }
    r.holes[at] = n;
    size_t first = round_up(at, PAGE), last = (at + n) / PAGE * PAGE;
    if (last > first) (void)madvise(g_base + dev * g_span + first, last - first, MADV_DONTNEED);
}

/* ---- the registry of allocations ---------------------------------------------------------- */

struct allocation {
    size_t bytes;
    int dev; /* -1: page-locked host memory */
};
std::mutex g_alloc_mu; /* the registries; taken before g_mu */
std::map<uintptr_t, allocation> g_device, g_pinned;
size_t g_used[16]; /* bytes allocated per device */

/* The allocation of reg containing [p, p+n) (n == 0: p may be its end), or end(). Called
 * with g_alloc_mu held. */
std::map<uintptr_t, allocation>::iterator find_range(std::map<uintptr_t, allocation> &reg, const void *p, size_t n)
{
    auto it = reg.upper_bound((uintptr_t)p);
    if (it == reg.begin()) return reg.end();
    --it;
    uintptr_t a = (uintptr_t)p;
    if (a < it->first || a - it->first > it->second.bytes || n > it->second.bytes - (a - it->first)) return reg.end();
    return it;
}

/* Whether p lies in the address range reserved for device memory. */
bool in_device_range(const void *p)
{
    std::lock_guard<std::mutex> l(g_mu);
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)g_base;
    return base && a >= base && a - base < g_span * (size_t)g_ndev;
}

int current_device()
{
    int dev = 0;
    cudaGetDevice(&dev);
    return dev;
}

} // namespace

namespace emu {

bool is_device(const void *p)
{
    std::lock_guard<std::mutex> l(g_alloc_mu);
    return find_range(g_device, p, 1) != g_device.end();
}
bool is_pinned(const void *p, size_t n)
{
    std::lock_guard<std::mutex> l(g_alloc_mu);
    return find_range(g_pinned, p, n ? n : 1) != g_pinned.end();
}

bool device_range(const void *p, size_t n, const char *what)
{
    if (n == 0) return true;
    std::lock_guard<std::mutex> l(g_alloc_mu);
    if (find_range(g_device, p, n) != g_device.end()) return true;
    auto it = g_device.upper_bound((uintptr_t)p);
    if (it != g_device.begin()) {
        --it;
        note("%s: %zu bytes at %p are not inside device memory (nearest allocation below: %zu bytes at %p, "
             "the range starts %td bytes into it)",
             what, n, p, it->second.bytes, (void *)it->first, (ptrdiff_t)((uintptr_t)p - it->first));
    } else {
        note("%s: %zu bytes at %p are not inside device memory", what, n, p);
    }
    return false;
}

/* Whether a kernel named name, running on device dev, may use p; `which` says where p came from
 * ("argument 2", "argument 1's member at byte 16") for the note that says why not. */
static bool kernel_may_use(const char *name, int dev, const char *which, const void *p)
{
    if (!p) return true;
    int owner;
    {
        std::lock_guard<std::mutex> l(g_alloc_mu);
        auto d = find_range(g_device, p, 0);
        if ((d != g_device.end() && d->second.dev == dev) || find_range(g_pinned, p, 0) != g_pinned.end()) return true;
        owner = d != g_device.end() ? d->second.dev : -1;
    }
    if (owner >= 0)
        note("kernel %s on device %d: %s (%p) is memory of device %d, which it cannot reach (tocha never "
             "enables peer access)",
             name, dev, which, p, owner);
    else if (in_device_range(p))
        note("kernel %s: %s (%p) is device memory that no live allocation holds (freed, or past an "
             "allocation's end)",
             name, which, p);
    else
        note("kernel %s: %s (%p) is host memory that is not page-locked, which a GPU kernel cannot read "
             "(copy it to the device first)",
             name, which, p);
    return false;
}

EMU_API bool kernel_pointer_ok(const char *name, int dev, int index, const void *p)
{
    char which[32];
    snprintf(which, sizeof which, "argument %d", index);
    return kernel_may_use(name, dev, which, p);
}

/* A struct's members are not listed anywhere C++17 can see, so each aligned 8-byte word is
 * read as a candidate pointer. Only words inside the range reserved for device memory are
 * judged: a host pointer in a struct cannot be told from a number, and no index or stride a
 * kernel is given comes near that range (a pair of floats would need a denormal above). */
EMU_API bool kernel_struct_ok(const char *name, int dev, int index, const void *s, size_t bytes)
{
    for (size_t at = 0; at + sizeof(uintptr_t) <= bytes; at += sizeof(uintptr_t)) {
        uintptr_t word;
        memcpy(&word, (const char *)s + at, sizeof word);
        if (!in_device_range((const void *)word)) continue;
        char which[64];
        snprintf(which, sizeof which, "argument %d's member at byte %zu", index, at);
        if (!kernel_may_use(name, dev, which, (const void *)word)) return false;
    }
    return true;
}

/* ---- access from the host ------------------------------------------------------------------ */

device_access::device_access()
{
    std::lock_guard<std::mutex> l(g_mu);
    if (g_open++ == 0 && guarded()) set_access_locked(true);
}
device_access::~device_access()
{
    std::lock_guard<std::mutex> l(g_mu);
    if (--g_open == 0 && guarded()) set_access_locked(false);
}

} // namespace emu

/* ---- the runtime's memory calls -------------------------------------------------------------- */
/* The exported ones (EMU_API) are what tests/emu/test_emu_driver.cc gives its kernels. */

bool emu::device_room(size_t nbytes)
{
    int dev = current_device();
    std::lock_guard<std::mutex> l(g_alloc_mu);
    return g_used[dev] + nbytes <= emu::capacity();
}

/* Potentially unsafe while capturing (it is not captured: the memory exists at once):
 * refused unless this thread's capture mode allows it, as on a GPU. An allocator that grows
 * a graph's private pool during a capture switches to cudaStreamCaptureModeRelaxed first
 * (cudaThreadExchangeStreamCaptureMode), as PyTorch's caching allocator does. */
EMU_API cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = nullptr;
    if (emu::capture_forbids("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
    int dev = current_device();
    std::lock_guard<std::mutex> l(g_alloc_mu);
    *p = nullptr;
    if (g_used[dev] + n > emu::capacity())
        return emu::fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu) on device %d: %zu of %zu bytes in use", n, dev,
                         g_used[dev], emu::capacity());
    size_t bytes = n ? n : 1;
    void *m = device_pages(dev, bytes);
    if (!m)
        return emu::fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu) on device %d: no room in its address range", n,
                         dev);
    {
        emu::device_access open;
        memset(m, 0xff, bytes); /* NaN, -1: a read of memory nobody wrote shows in the results */
    }
    g_device[(uintptr_t)m] = allocation{bytes, dev};
    g_used[dev] += bytes;
    *p = m;
    return cudaSuccess;
}
EMU_API cudaError_t cudaFree(void *p)
{
    if (emu::capture_forbids("cudaFree")) return cudaErrorStreamCaptureUnsupported;
    if (!p) return cudaSuccess;
    (void)emu::finish_device_work(-1); /* it waits for the device; an error of that work stays for cudaGetLastError */
    std::lock_guard<std::mutex> l(g_alloc_mu);
    auto it = g_device.find((uintptr_t)p);
    if (it == g_device.end()) return emu::fail(cudaErrorInvalidValue, "cudaFree(%p): not an allocation's start", p);
    g_used[it->second.dev] -= it->second.bytes;
    free_device_pages(p, it->second.bytes);
    g_device.erase(it);
    return cudaSuccess;
}
EMU_API cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int)
{
    if (emu::capture_forbids("cudaHostAlloc")) return cudaErrorStreamCaptureUnsupported;
    std::lock_guard<std::mutex> l(g_alloc_mu);
    size_t bytes = n ? n : 1;
    void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!m) return emu::fail(cudaErrorMemoryAllocation, "cudaHostAlloc(%zu)", n);
    g_pinned[(uintptr_t)m] = allocation{bytes, -1};
    *p = m;
    return cudaSuccess;
}
EMU_API cudaError_t cudaFreeHost(void *p)
{
    if (emu::capture_forbids("cudaFreeHost")) return cudaErrorStreamCaptureUnsupported;
    if (!p) return cudaSuccess;
    (void)emu::finish_device_work(-1);
    std::lock_guard<std::mutex> l(g_alloc_mu);
    auto it = g_pinned.find((uintptr_t)p);
    if (it == g_pinned.end()) return emu::fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not page-locked memory", p);
    g_pinned.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    std::lock_guard<std::mutex> l(g_alloc_mu);
    memset(a, 0, sizeof *a);
    auto d = find_range(g_device, p, 1);
    if (d != g_device.end()) {
        a->type = cudaMemoryTypeDevice;
        a->device = d->second.dev;
        a->devicePointer = (void *)p;
    } else if (find_range(g_pinned, p, 1) != g_pinned.end()) {
        a->type = cudaMemoryTypeHost;
        a->hostPointer = a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
    }
    return cudaSuccess;
}
