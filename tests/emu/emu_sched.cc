/* emu_sched.cc -- runs a kernel's grid on the host for the CUDA emulator (emu.h).
 *
 * Blocks run one after another. The threads of a block are fibers (ucontext) on the
 * calling OS thread: each runs until it finishes or waits, at __syncthreads (for the whole
 * block) or a warp shuffle (for its warp); when every live thread of the block, or of a
 * warp, waits, they are released together. Threads that have returned count as arrived, as
 * on a GPU since Volta. If nothing can be released (a barrier that part of a block never
 * reaches, a shuffle against a block barrier), the launch is reported failed and the block
 * abandoned: on a GPU that would be a hang or undefined behaviour. A misaligned vector
 * access (emu::check_aligned) fails the launch after its block, as cudaErrorMisalignedAddress.
 * A warp shuffle waits only for the lanes its mask names, as on a GPU; one whose result a GPU
 * leaves undefined fails the launch after its block (cudaErrorLaunchFailure, the reason in
 * the log): a thread not named in its own mask, two lanes meeting with different masks, or
 * a read from a lane that has returned, lies past the end of the block (a partial warp) or
 * is not in the mask. A GPU would run on with whatever that register held.
 * A pointer argument the device cannot use, or such a device pointer inside a struct argument
 * (emu_launch.h, kernel_pointer_ok / kernel_struct_ok), fails it before any block runs, as
 * cudaErrorIllegalAddress.
 *
 * Each block starts with its shared memory filled with 0xff bytes (the dynamic memory before
 * it runs, a __shared__ variable when its first thread passes the declaration:
 * emu::shared_fresh), so a read before any write of the block shows as NaN or -1.
 * TOCHA_CUDA_EMU_ORDER=reverse runs the blocks, and the threads released together, last to
 * first: a kernel whose threads read what another thread of the block writes with no
 * barrier between (a missing __syncthreads or __syncwarp), or whose blocks read one
 * another's results, then reads the other value in one of the two orders, which a GPU's
 * scheduling can give at any time.
 *
 * One grid runs at a time in the process (g_exec in emu_runtime.cc serialises all work),
 * which is what makes `__shared__` as `static`, the global thread indices and plain-update
 * atomics correct.
 *
 * Under AddressSanitizer the stack switches are announced to it (the fiber API of
 * sanitizer/common_interface_defs.h), so kernels' memory accesses are checked too.
 *
 * On x86-64 a switch between fibers is a few instructions of our own (emu_switch_stack below):
 * glibc's swapcontext saves and restores the signal mask with a system call every time, which
 * was 90% of the emulator's run time, and under AddressSanitizer its interceptor cleared the
 * shadow of the whole target stack at every switch. Other machines use ucontext.
 */
#include "emu.h"
#include "emu_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define STACK_BYTES ((size_t)512 << 10)
#else
#define STACK_BYTES ((size_t)128 << 10)
#endif
#if defined(__x86_64__) && defined(__ELF__)
#define EMU_OWN_SWITCH 1
#endif

#ifdef EMU_OWN_SWITCH
/* emu_switch_stack(&from_sp, to_sp): pushes the registers the SysV x86-64 ABI has a called
 * function keep (rbx, rbp, r12-r15, the SSE and x87 control words), stores the stack pointer
 * in *from_sp, loads to_sp and pops the same from there -- the other side of an earlier
 * switch, or a fiber's fresh stack (fiber_start) -- and returns on that stack. */
extern "C" void emu_switch_stack(void **from_sp, void *to_sp);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl emu_switch_stack\n"
        ".hidden emu_switch_stack\n"
        ".type emu_switch_stack, @function\n"
        "emu_switch_stack:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size emu_switch_stack, .-emu_switch_stack\n");
#endif

EMU_API uint3 threadIdx, blockIdx; /* exported: kernel modules (emu_driver.cc) read them */
EMU_API dim3 blockDim, gridDim;

namespace {

enum fiber_state { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, FINISHED };

/* A saved execution context: where a fiber, or the scheduler, goes on from. */
#ifdef EMU_OWN_SWITCH
struct context {
    void *sp; /* its stack pointer; the registers it must keep are pushed below it */
};
#else
typedef ucontext_t context;
#endif

struct fiber {
    context ctx;
    char *stack;
    fiber_state state;
    uint3 idx;
    unsigned warp_mask; /* at AT_WARP_BARRIER: the mask of the shuffle it waits at */
};

constexpr int MAX_THREADS = 1024;
constexpr size_t MAX_EXCHANGE = 16; /* bytes a shuffle moves: up to a 16-byte type */

fiber g_fiber[MAX_THREADS];
int g_nthreads;
int g_cur; /* the running fiber */
context g_sched;
const std::function<void()> *g_body;
unsigned char g_exchange[MAX_THREADS][MAX_EXCHANGE];
std::vector<unsigned char> g_dynamic; /* dynamic shared memory of the running launch */
std::vector<void *> g_fresh;          /* __shared__ variables the running block has filled */

#ifdef EMU_ASAN
void *g_fake_stack;         /* the scheduler's fake stack while a fiber runs */
const void *g_sched_bottom; /* the scheduler's stack, learnt at the first switch */
size_t g_sched_size;
#endif

/* The running grid's first fault (a misaligned access, an undefined shuffle), empty if none,
 * and the error the launch then fails with. */
std::string g_fault;
cudaError_t g_fault_error;

/* Records a fault of the running grid, unless one is already recorded. */
void fault(cudaError_t e, const char *fmt, ...)
{
    if (!g_fault.empty()) return;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    g_fault = what;
    g_fault_error = e;
}

/* Saves the running context in from and goes on from to. */
void switch_context(context *from, context *to)
{
#ifdef EMU_OWN_SWITCH
    emu_switch_stack(&from->sp, to->sp);
#else
    swapcontext(from, to);
#endif
}

void fiber_main();

/* Makes fiber f start fiber_main on its own stack at the next switch to it. Under
 * AddressSanitizer the stack's shadow is cleared first: a thread that returned leaves the
 * frames of fiber_main and yield (which never return) poisoned near the top, and one of an
 * abandoned block its whole chain of frames. */
void fiber_start(fiber &f, bool abandoned)
{
#ifdef EMU_ASAN
    const size_t scrub = abandoned ? STACK_BYTES : (size_t)64 << 10;
    __asan_unpoison_memory_region(f.stack + STACK_BYTES - scrub, scrub);
#endif
    (void)abandoned;
#ifdef EMU_OWN_SWITCH
    /* what emu_switch_stack pops, from the 16-byte aligned top down: a null return address
     * for fiber_main (which never returns), fiber_main itself for `ret`, rbp, rbx, r12-r15,
     * then the control words -- so fiber_main starts with the stack as a call leaves it */
    void **top = (void **)(f.stack + STACK_BYTES);
    top[-1] = nullptr;
    top[-2] = (void *)&fiber_main;
    for (int r = 3; r <= 8; r++) top[-r] = nullptr;
    unsigned control[2] = {0x1f80, 0x037f}; /* MXCSR and x87 control word at power-on */
    memcpy(&top[-9], control, sizeof control);
    f.ctx.sp = &top[-9];
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = STACK_BYTES;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
#endif
}

/* Switches from the scheduler to fiber i and back. */
void resume(int i)
{
    g_cur = i;
    threadIdx = g_fiber[i].idx;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&g_fake_stack, g_fiber[i].stack, STACK_BYTES);
#endif
    switch_context(&g_sched, &g_fiber[i].ctx);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(g_fake_stack, nullptr, nullptr);
#endif
}

/* Switches from the running fiber to the scheduler (finished: it never comes back). */
void yield(bool finished)
{
#ifdef EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(finished ? nullptr : &fake, g_sched_bottom, g_sched_size);
#endif
    switch_context(&g_fiber[g_cur].ctx, &g_sched);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, &g_sched_bottom, &g_sched_size);
#endif
    (void)finished;
}

void fiber_main()
{
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &g_sched_bottom, &g_sched_size);
#endif
    (*g_body)();
    g_fiber[g_cur].state = FINISHED;
    yield(true);
}

bool stacks_ready()
{
    static bool ready;
    if (ready) return true;
    for (int i = 0; i < MAX_THREADS; i++) {
        void *p = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return false;
        g_fiber[i].stack = (char *)p;
    }
    return ready = true;
}

/* Releases the lanes of the warp [w, end) waiting at a shuffle once every lane its mask names
 * has arrived (a lane that has returned, or lies past the block, counts as arrived, as on a
 * GPU since Volta); true if some were. */
bool release_warp(int w, int end)
{
    bool released = false;
    for (int i = w; i < end; i++) {
        if (g_fiber[i].state != AT_WARP_BARRIER) continue;
        const unsigned m = g_fiber[i].warp_mask;
        bool ready = true;
        for (int j = w; j < end && ready; j++)
            if ((m >> (j - w) & 1u) && g_fiber[j].state != FINISHED) ready = g_fiber[j].state == AT_WARP_BARRIER;
        if (!ready) continue;
        for (int j = w; j < end; j++) { /* lane i itself always (warp_exchange puts it in its mask) */
            if ((j != i && !(m >> (j - w) & 1u)) || g_fiber[j].state != AT_WARP_BARRIER) continue;
            if (g_fiber[j].warp_mask != m)
                fault(cudaErrorLaunchFailure, "warp %d: lanes %d and %d meet at a shuffle with masks %#x and %#x", w / 32,
                      i - w, j - w, m, g_fiber[j].warp_mask);
            g_fiber[j].state = RUNNABLE;
        }
        released = true;
    }
    return released;
}

/* Releases the waiters of every barrier whose participants have all arrived; false when
 * none could be released. */
bool release_barriers()
{
    bool released = false;
    int live = 0, at_block = 0;
    for (int i = 0; i < g_nthreads; i++) {
        live += g_fiber[i].state != FINISHED;
        at_block += g_fiber[i].state == AT_BLOCK_BARRIER;
    }
    if (live > 0 && at_block == live) {
        for (int i = 0; i < g_nthreads; i++)
            if (g_fiber[i].state == AT_BLOCK_BARRIER) g_fiber[i].state = RUNNABLE;
        return true;
    }
    for (int w = 0; w < g_nthreads; w += 32)
        if (release_warp(w, w + 32 < g_nthreads ? w + 32 : g_nthreads)) released = true;
    return released;
}

/* Runs one block, its threads last to first if reverse; false (with the reason printed)
 * if its threads deadlock. */
bool run_block(const char *name, bool reverse)
{
    /* shared memory as uninitialised as a GPU's: dynamic memory now, static variables
     * when the block's first thread passes their declaration (shared_fresh) */
    memset(g_dynamic.data(), 0xff, g_dynamic.size());
    g_fresh.clear();
    for (int i = 0; i < g_nthreads; i++) {
        fiber &f = g_fiber[i];
        fiber_start(f, f.state != FINISHED);
        f.state = RUNNABLE;
        f.idx = uint3{(unsigned)(i % blockDim.x), (unsigned)(i / blockDim.x % blockDim.y),
                      (unsigned)(i / (blockDim.x * blockDim.y))};
    }
    for (;;) {
        for (int k = 0; k < g_nthreads; k++) {
            int i = reverse ? g_nthreads - 1 - k : k;
            if (g_fiber[i].state == RUNNABLE) resume(i);
        }
        bool live = false;
        for (int i = 0; i < g_nthreads && !live; i++) live = g_fiber[i].state != FINISHED;
        if (!live) return true;
        if (!release_barriers()) {
            int at_block = 0, at_warp = 0, done = 0;
            for (int i = 0; i < g_nthreads; i++) {
                at_block += g_fiber[i].state == AT_BLOCK_BARRIER;
                at_warp += g_fiber[i].state == AT_WARP_BARRIER;
                done += g_fiber[i].state == FINISHED;
            }
            emu::note("kernel %s, block (%u,%u,%u): threads deadlock: %d at __syncthreads, %d at a warp "
                      "shuffle, %d returned",
                      name, blockIdx.x, blockIdx.y, blockIdx.z, at_block, at_warp, done);
            return false;
        }
    }
}

/* Runs the whole grid on device dev (called with g_exec held), once its arguments pass. */
void run_grid(const char *name, int dev, dim3 grid, dim3 block, size_t shmem, const std::function<void()> &body,
              const std::function<bool(int)> &args_ok)
{
    if (!args_ok(dev)) {
        emu::set_error(cudaErrorIllegalAddress);
        return;
    }
    if (!stacks_ready()) {
        emu::note("kernel %s: cannot map fiber stacks", name);
        emu::set_error(cudaErrorMemoryAllocation);
        return;
    }
    gridDim = grid;
    blockDim = block;
    g_nthreads = (int)(block.x * block.y * block.z);
    g_body = &body;
    g_dynamic.assign(shmem ? shmem : 1, 0xff); /* filled again before each block */
    g_fault.clear();
    const bool reverse = emu::reverse_order();
    for (unsigned zi = 0; zi < grid.z; zi++)
        for (unsigned yi = 0; yi < grid.y; yi++)
            for (unsigned xi = 0; xi < grid.x; xi++) {
                unsigned x = reverse ? grid.x - 1 - xi : xi, y = reverse ? grid.y - 1 - yi : yi,
                         z = reverse ? grid.z - 1 - zi : zi;
                blockIdx = uint3{x, y, z};
                if (!run_block(name, reverse)) {
                    emu::set_error(cudaErrorLaunchFailure);
                    return;
                }
                if (!g_fault.empty()) {
                    emu::note("kernel %s, block (%u,%u,%u): %s", name, x, y, z, g_fault.c_str());
                    emu::set_error(g_fault_error);
                    return;
                }
            }
}

} // namespace

namespace emu {

EMU_API void block_barrier()
{
    g_fiber[g_cur].state = AT_BLOCK_BARRIER;
    yield(false);
}

EMU_API int lane() { return g_cur % 32; }

EMU_API void warp_exchange(unsigned mask, const void *mine, void *out, int src, size_t bytes)
{
    const int base = g_cur / 32 * 32, me = g_cur - base, n = bytes < MAX_EXCHANGE ? (int)bytes : (int)MAX_EXCHANGE;
    if (!(mask >> me & 1u)) {
        fault(cudaErrorLaunchFailure, "thread (%u,%u,%u): lane %d calls a warp shuffle whose mask %#x does not name it",
              threadIdx.x, threadIdx.y, threadIdx.z, me, mask);
        mask |= 1u << me; /* so it still meets the others */
    }
    memcpy(g_exchange[g_cur], mine, n);
    g_fiber[g_cur].warp_mask = mask;
    g_fiber[g_cur].state = AT_WARP_BARRIER;
    yield(false);
    const char *why = nullptr;
    if (!(mask >> src & 1u)) why = "which the mask does not name";
    else if (base + src >= g_nthreads) why = "which lies past the end of the block";
    else if (g_fiber[base + src].state == FINISHED) why = "which has returned";
    if (why)
        fault(cudaErrorLaunchFailure, "thread (%u,%u,%u): lane %d reads lane %d at a warp shuffle, %s (undefined on a GPU)",
              threadIdx.x, threadIdx.y, threadIdx.z, me, src, why);
    memcpy(out, why ? g_exchange[g_cur] : g_exchange[base + src], n);
    g_fiber[g_cur].state = AT_WARP_BARRIER; /* nobody overwrites a slot before all have read */
    yield(false);
}

EMU_API void *dynamic_shared() { return g_dynamic.data(); }

EMU_API void shared_fresh(void *p, size_t n)
{
    for (void *q : g_fresh)
        if (q == p) return;
    g_fresh.push_back(p);
    memset(p, 0xff, n);
}

EMU_API void check_aligned(const void *p, size_t bytes)
{
    if (bytes == 0 || (uintptr_t)p % bytes == 0) return;
    fault(cudaErrorMisalignedAddress, "thread (%u,%u,%u): misaligned %zu-byte access at %p", threadIdx.x, threadIdx.y,
          threadIdx.z, bytes, p);
}

/* Launches per kernel name, for tc_cuda_emu_launches. */
static std::mutex g_count_mu;
static std::map<std::string, long long> g_launches;

void count_call(const char *name)
{
    std::lock_guard<std::mutex> l(g_count_mu);
    g_launches[name]++;
}

EMU_API void launch_grid(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t s, std::function<void()> body,
                         std::function<bool(int)> args_ok)
{
    count_call(name);
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
        threads > MAX_THREADS || block.z > 64 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu) {
        note("kernel %s: invalid configuration: grid (%u,%u,%u), block (%u,%u,%u)", name, grid.x, grid.y, grid.z,
             block.x, block.y, block.z);
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    if (shmem > 48 * 1024) { /* more needs cudaFuncSetAttribute, which tocha does not call */
        note("kernel %s: %zu bytes of dynamic shared memory (at most 49152 without opting in)", name, shmem);
        set_error(cudaErrorInvalidValue);
        return;
    }
    int dev = 0;
    cudaGetDevice(&dev); /* the stream's: enqueue_kernel refuses another device's */
    enqueue_kernel(s, name, [name, dev, grid, block, shmem, body, args_ok] {
        run_grid(name, dev, grid, block, shmem, body, args_ok);
    });
}

} // namespace emu

extern "C" EMU_API dim3 emu_bounded_block(unsigned max_threads, dim3 block, const char *kernel)
{
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (threads <= max_threads) return block;
    emu::note("kernel %s: %llu threads a block, more than its __launch_bounds__(%u)", kernel, threads, max_threads);
    return dim3(0, 1, 1);
}

/* The launches so far (queued or run) of kernels whose name contains part: the tests' way
 * to see which kernels an op chose (tests/c/cuda_test_util.h, ct_cuda_emu_launches). */
extern "C" EMU_API long long tc_cuda_emu_launches(const char *part)
{
    std::lock_guard<std::mutex> l(emu::g_count_mu);
    long long n = 0;
    for (const auto &kv : emu::g_launches)
        if (part && kv.first.find(part) != std::string::npos) n += kv.second;
    return n;
}
