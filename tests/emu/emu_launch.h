/* emu_launch.h -- kernel launches in the emulator (emu.h): tests/emu/cu2cc.pl turns
 * `k<<<grid, block, shmem, stream>>>(args)` into
 * `emu::make_launcher([=](auto... a) { k(a...); }, "k", grid, block, shmem, stream)(args)`.
 * The arguments are copied at the launch (as CUDA copies them into the launch) and kept
 * with the work, so a captured launch replays with the values it was captured with; the
 * lambda converts them to the kernel's parameters, deducing template arguments like nvcc.
 * The pointers among them, and the device pointers inside struct arguments, are checked each
 * time the kernel runs (kernel_pointer_ok, kernel_struct_ok).
 */
#ifndef TC_EMU_LAUNCH_H
#define TC_EMU_LAUNCH_H

#include <cuda_runtime.h>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

/* Exported from the emulator's library: kernel modules built at run time call it. */
#ifndef EMU_API
#define EMU_API __attribute__((visibility("default")))
#endif

namespace emu {

/* Checks the configuration as cudaLaunchKernel would (an error goes where cudaGetLastError
 * finds it), then queues the grid on stream s (emu_sched.cc). When it runs, args_ok(device)
 * checks the arguments first (false: the launch fails with cudaErrorIllegalAddress, as the
 * kernel would on a GPU), then every block runs in turn, its threads as fibers each calling
 * thread_body. */
EMU_API void launch_grid(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                         std::function<void()> thread_body, std::function<bool(int)> args_ok);

/* Whether pointer argument `index` (from 0) of kernel `name`, running on device dev, is one a
 * GPU kernel can use: NULL, inside a live allocation of dev's memory (or at its end), or
 * page-locked host memory (mapped for every device). Otherwise it prints why (emu_memory.cc):
 * host memory a GPU cannot reach, device memory no allocation holds (freed before a captured
 * launch replayed, say), another device's memory (tocha never enables peer access). */
EMU_API bool kernel_pointer_ok(const char *name, int dev, int index, const void *p);
/* The same for the pointers inside a struct argument (a view, a list of inputs, ...): every
 * aligned 8-byte word of its bytes that lies in device memory's address range must be one the
 * kernel may use. Host pointers inside structs are not seen (they cannot be told from data). */
EMU_API bool kernel_struct_ok(const char *name, int dev, int index, const void *s, size_t bytes);

template <class T> bool kernel_arg_ok(const char *name, int dev, int index, const T &x)
{
    if constexpr (std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>)
        return kernel_pointer_ok(name, dev, index, (const void *)x);
    else if constexpr (std::is_class_v<T> && alignof(T) >= alignof(void *))
        return kernel_struct_ok(name, dev, index, &x, sizeof x);
    else
        return true; /* numbers, and structs that cannot hold an aligned pointer */
}
/* A launch's pointer arguments, and the device pointers inside its struct arguments, in order. */
template <class... A> bool kernel_args_ok(const char *name, int dev, const std::tuple<A...> &args)
{
    return std::apply(
        [&](const A &...x) {
            int index = 0;
            (void)index;
            return (kernel_arg_ok(name, dev, index++, x) && ...);
        },
        args);
}
/* The running block's dynamic shared memory (`extern __shared__ T x[]`). */
EMU_API void *dynamic_shared();

template <class K> struct launcher {
    K call; /* calls the kernel with the launch's arguments */
    const char *name;
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;

    template <class... A> void operator()(A &&...a) const
    {
        auto args = std::make_shared<std::tuple<std::decay_t<A>...>>(std::forward<A>(a)...);
        K k = call;
        const char *n = name;
        launch_grid(name, grid, block, shmem, stream, [k, args] { std::apply(k, *args); },
                    [n, args](int dev) { return kernel_args_ok(n, dev, *args); });
    }
};

template <class K>
launcher<K> make_launcher(K call, const char *name, dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0)
{
    return launcher<K>{call, name, grid, block, shmem, stream};
}

/* A launch through the driver API (cuLaunchKernel, emu_driver.cc): params[i] points at the
 * i-th argument's value, copied here as CUDA copies it. */
template <class... P, size_t... I>
void launch_params(void (*k)(P...), const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                   void **params, std::index_sequence<I...>)
{
    auto args = std::make_shared<std::tuple<std::decay_t<P>...>>(*(const std::decay_t<P> *)params[I]...);
    launch_grid(name, grid, block, shmem, s, [k, args] { std::apply(k, *args); },
                [name, args](int dev) { return kernel_args_ok(name, dev, *args); });
}
template <class... P>
void launch_params(void (*k)(P...), const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                   void **params)
{
    launch_params(k, name, grid, block, shmem, s, params, std::index_sequence_for<P...>{});
}

} // namespace emu

/* The block of a launch of a kernel declared with __launch_bounds__(max_threads) (cu2cc.pl
 * wraps such launches' blocks in it): the block itself, or, past the bound, which a GPU
 * refuses, an empty block after a note naming the kernel, so that the launch fails with
 * cudaErrorInvalidConfiguration. */
extern "C" EMU_API dim3 emu_bounded_block(unsigned max_threads, dim3 block, const char *kernel);

#endif
