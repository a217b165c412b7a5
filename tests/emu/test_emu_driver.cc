/* test_emu_driver.cc -- unit test of the CUDA emulator's NVRTC and driver stand-ins
 * (emu_driver.cc), through the library tocha loads (build/tests/libtocha_cuda_emu.so, found
 * beside this program), as core/graph/nvrtc.c and cuda_launch.c call them: by dlsym.
 *
 * Checked: the documented statuses of each call (not initialised, bad device, bad option,
 * uncompiled program, no current context, an image that is not the emulator's, a missing
 * function, a launch past __launch_bounds__, `extra`, no parameters, an empty grid); the
 * logs name the cause (the compiler's error, the asm not emulated, the option); a launch
 * runs only when the host waits (cuCtxSynchronize), and then computes what it should:
 * scalar parameters copied at the launch, __shared__ and __syncthreads across a block, a
 * grid-stride loop, the f16 conversions rewritten from inline PTX at known bit patterns
 * (subnormal, infinities, NaN, a tie to even, overflow); a kernel whose threads deadlock, or
 * that makes a misaligned access, fails at that wait. A warp shuffle waits for the lanes its
 * mask names (half a warp can shuffle alone); one whose result a GPU leaves undefined (a read
 * from a returned lane or past a partial warp, a lane outside its own mask, two masks
 * meeting, a source outside the mask) fails the launch with a note. Kernels get page-locked host memory
 * (cudaHostAlloc, which a GPU kernel reaches too); one given pageable host memory, freed
 * device memory or another device's memory fails at the wait as cudaErrorIllegalAddress
 * (the two emulated devices are asked for before the library loads). Shared memory starts
 * each block as 0xff bytes; a launch past a kernel's __launch_bounds__ is refused. A race between the
 * threads of a block (a missing barrier) reads another value when TOCHA_CUDA_EMU_ORDER=reverse
 * runs them last to first. Under AddressSanitizer a read past a kernel's local array is
 * reported (the fiber stacks are announced to it).
 * Prints "N passed, N failed" (tests/run.sh reads it).
 */
#include "../cuda_host/host_check.h"
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <libgen.h>
#include <math.h>
#include <nvrtc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <string>
#include <vector>

static void *g_lib;
template <class F> static F sym(const char *name)
{
    void *p = dlsym(g_lib, name);
    if (!p) printf("missing %s\n", name), exit(2); /* a test program, not the library */
    F f;
    memcpy(&f, &p, sizeof p);
    return f;
}

#define FN(name) static decltype(&name) p_##name
FN(nvrtcVersion);
FN(nvrtcCreateProgram);
FN(nvrtcCompileProgram);
FN(nvrtcGetProgramLogSize);
FN(nvrtcGetProgramLog);
FN(nvrtcGetPTXSize);
FN(nvrtcGetPTX);
FN(nvrtcGetCUBINSize);
FN(nvrtcGetCUBIN);
FN(nvrtcDestroyProgram);
FN(cuInit);
FN(cuDeviceGet);
FN(cuDeviceGetAttribute);
FN(cuDevicePrimaryCtxRetain);
FN(cuCtxSetCurrent);
FN(cuCtxSynchronize);
FN(cuModuleLoadDataEx);
FN(cuModuleGetFunction);
FN(cuLaunchKernel);
FN(cuGetErrorString);
FN(cudaMalloc);
FN(cudaFree);
FN(cudaHostAlloc);
FN(cudaFreeHost);
FN(cudaSetDevice);
#define LOAD(name) p_##name = sym<decltype(&name)>(#name)

static const char *kOpts[] = {"--gpu-architecture=compute_90", "--fmad=false", "--std=c++17"};

/* Compiles src; the status, the log in *log and the image in *image. */
static nvrtcResult compile(const char *src, const char *const *opts, int nopts, std::string *log, std::string *image)
{
    nvrtcProgram p = nullptr;
    nvrtcResult r = p_nvrtcCreateProgram(&p, src, "test.cu", 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS) return r;
    r = p_nvrtcCompileProgram(p, nopts, opts);
    size_t n = 0;
    if (p_nvrtcGetProgramLogSize(p, &n) == NVRTC_SUCCESS) {
        std::vector<char> b(n);
        p_nvrtcGetProgramLog(p, b.data());
        *log = b.data();
    }
    if (r == NVRTC_SUCCESS && p_nvrtcGetPTXSize(p, &n) == NVRTC_SUCCESS) {
        std::vector<char> b(n);
        p_nvrtcGetPTX(p, b.data());
        *image = b.data();
    }
    p_nvrtcDestroyProgram(&p);
    return r;
}

static const char kGood[] =
    "extern \"C\" __global__ void __launch_bounds__(64) scale_rev(const float *x, float *y, int n, float a)\n"
    "{\n"
    "    __shared__ float sh[64];\n"
    "    int t = threadIdx.x, i = blockIdx.x * 64 + t;\n"
    "    sh[t] = i < n ? x[i] * a : -1.0f;\n"
    "    __syncthreads();\n"
    "    if (i < n) y[i] = sh[63 - t]; /* another thread's value: needs the barrier */\n"
    "}\n"
    "static __device__ __forceinline__ float h2f(unsigned short h)\n"
    "{ float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "static __device__ __forceinline__ unsigned short f2h(float f)\n"
    "{ unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "extern \"C\" __global__ void halves(const unsigned short *h, float *f, unsigned short *tripled, int n)\n"
    "{\n"
    "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "        f[i] = h2f(h[i]);\n"
    "        tripled[i] = f2h(f[i] * 3.0f);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void deadlock(int *x)\n"
    "{\n"
    "    int v = threadIdx.x;\n"
    "    if (threadIdx.x < 16) __syncthreads(); /* half the warp at a block barrier, */\n"
    "    else v = __shfl_down_sync(0xffffffffu, v, 1); /* half at a shuffle */\n"
    "    x[threadIdx.x] = v;\n"
    "}\n"
    "extern \"C\" __global__ void misaligned(const char *p, int offset)\n"
    "{\n"
    "    emu::check_aligned(p + offset, 16); /* what mma.h's copy16 does before its memcpy */\n"
    "}\n"
    "extern \"C\" __global__ void neighbours(int *y, int tag, int sync)\n"
    "{\n"
    "    __shared__ int sh[64];\n"
    "    int t = threadIdx.x;\n"
    "    sh[t] = tag * 1000 + blockIdx.x * 100 + t + 1;\n"
    "    if (sync) __syncthreads(); /* without it, reading a neighbour's word is a race */\n"
    "    y[blockIdx.x * 64 + t] = sh[t ^ 1];\n"
    "}\n"
    "extern \"C\" __global__ void reads_first(int *y, int tag)\n"
    "{\n"
    "    __shared__ int sh[64];\n"
    "    y[blockIdx.x * 64 + threadIdx.x] = sh[threadIdx.x]; /* before this block writes it */\n"
    "    __syncthreads();\n"
    "    sh[threadIdx.x] = tag;\n"
    "}\n"
    "extern \"C\" __global__ void warp_sum(int *y, int live)\n"
    "{\n"
    "    int t = threadIdx.x, v = t + 1;\n"
    "    if (t >= live) return;\n"
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    y[t] = v;\n"
    "}\n"
    "extern \"C\" __global__ void half_warp_sum(int *y)\n"
    "{\n"
    "    int t = threadIdx.x, v = t + 1;\n"
    "    if (t < 16) /* half the warp shuffles among itself while the other half goes on */\n"
    "        for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0x0000ffffu, v, o);\n"
    "    __syncthreads();\n"
    "    y[t] = v;\n"
    "}\n"
    "extern \"C\" __global__ void bad_masks(int *y, int mode)\n"
    "{\n"
    "    int t = threadIdx.x, v = t + 1;\n"
    "    if (mode == 0) v = __shfl_xor_sync(0xfffffffeu, v, 1); /* lane 0 not in its mask */\n"
    "    if (mode == 1) v = __shfl_xor_sync(t < 16 ? 0xffffffffu : 0xffff0000u, v, 1); /* two masks */\n"
    "    if (mode == 2 && t < 16) v = __shfl_sync(0x0000ffffu, v, 20); /* a source outside the mask */\n"
    "    y[t] = v;\n"
    "}\n"
    "static __device__ __attribute__((noinline)) int read_local(const volatile int *p, int i) { return p[i]; }\n"
    "extern \"C\" __global__ void local_array(int *y, int i)\n"
    "{\n"
    "    volatile int local[4] = {1, 2, 3, 4}; /* on the thread's fiber stack */\n"
    "    y[blockIdx.x * blockDim.x + threadIdx.x] = read_local(local, i); /* i = 4: one past its end */\n"
    "}\n"
    "struct tail_view { long long n; float *p; }; /* a pointer inside a struct argument, at byte 8 */\n"
    "extern \"C\" __global__ void fill_view(tail_view v, float a)\n"
    "{\n"
    "    if ((long long)threadIdx.x < v.n) v.p[threadIdx.x] = a;\n"
    "}\n";

static void check_init_and_devices()
{
    CUdevice d = -1;
    EXPECT(p_cuDeviceGet(&d, 0) == CUDA_ERROR_NOT_INITIALIZED, "cuDeviceGet before cuInit");
    EXPECT(p_cuInit(1) == CUDA_ERROR_INVALID_VALUE, "cuInit(1)");
    EXPECT(p_cuInit(0) == CUDA_SUCCESS, "cuInit(0)");
    EXPECT(p_cuDeviceGet(&d, 99) == CUDA_ERROR_INVALID_DEVICE, "device 99");
    EXPECT(p_cuDeviceGet(&d, -1) == CUDA_ERROR_INVALID_DEVICE, "device -1");
    EXPECT(p_cuDeviceGet(&d, 0) == CUDA_SUCCESS && d == 0, "device 0");
    int v = 0;
    EXPECT(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS && v == 2, "SMs %d", v);
    EXPECT(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == CUDA_SUCCESS && v == 9, "major");
    EXPECT(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) == CUDA_SUCCESS && v == 0, "minor");
    EXPECT(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 0) == CUDA_ERROR_INVALID_VALUE, "not emulated");
    EXPECT(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7) == CUDA_ERROR_INVALID_DEVICE, "device 7");
    const char *s = nullptr;
    EXPECT(p_cuGetErrorString(CUDA_ERROR_INVALID_IMAGE, &s) == CUDA_SUCCESS && s && strstr(s, "image"), "string");
    EXPECT(p_cuGetErrorString((CUresult)12345, &s) == CUDA_ERROR_INVALID_VALUE && !s, "unknown code");
}

static void check_nvrtc(std::string *image)
{
    int major = -1, minor = -1;
    EXPECT(p_nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && major == 0 && minor == 1, "version %d.%d", major, minor);
    std::string log, img;
    EXPECT(compile(kGood, kOpts, 3, &log, image) == NVRTC_SUCCESS, "good source: %s", log.c_str());
    EXPECT(image->find("tocha CUDA emulator module") == 3 && image->find("emu_entry_scale_rev") != std::string::npos,
           "the image is the marked C++");
    const char *bad_opt[] = {"-G"};
    EXPECT(compile(kGood, bad_opt, 1, &log, &img) == NVRTC_ERROR_INVALID_OPTION && log.find("'-G'") != std::string::npos,
           "-G: %s", log.c_str());
    /* a real architecture gives a "cubin" (the same image); a virtual one gives none (size 0,
     * as NVRTC documents); TOCHA_CUDA_EMU_NVRTC_PTX_ONLY=1 refuses real architectures */
    const char *real_arch[] = {"--gpu-architecture=sm_90"};
    for (int arch = 0; arch < 2; arch++) {
        nvrtcProgram p = nullptr;
        size_t n = 7;
        EXPECT(p_nvrtcCreateProgram(&p, kGood, "k.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS, "create");
        EXPECT(p_nvrtcCompileProgram(p, arch ? 1 : 3, arch ? real_arch : kOpts) == NVRTC_SUCCESS, "compile %d", arch);
        EXPECT(p_nvrtcGetCUBINSize(p, &n) == NVRTC_SUCCESS && (arch ? n == image->size() + 1 : n == 0),
               "cubin size %zu for %s", n, arch ? "sm_90" : "compute_XY");
        std::vector<char> b(image->size() + 1);
        EXPECT(p_nvrtcGetCUBIN(p, b.data()) == (arch ? NVRTC_SUCCESS : NVRTC_ERROR_INVALID_PROGRAM) &&
                   (!arch || b.data() == *image),
               "cubin of %s", arch ? "sm_90" : "compute_XY");
        p_nvrtcDestroyProgram(&p);
    }
    setenv("TOCHA_CUDA_EMU_NVRTC_PTX_ONLY", "1", 1);
    EXPECT(compile(kGood, real_arch, 1, &log, &img) == NVRTC_ERROR_INVALID_OPTION &&
               log.find("TOCHA_CUDA_EMU_NVRTC_PTX_ONLY") != std::string::npos,
           "PTX only: %s", log.c_str());
    EXPECT(compile(kGood, kOpts, 3, &log, &img) == NVRTC_SUCCESS, "PTX only still compiles compute_XY");
    unsetenv("TOCHA_CUDA_EMU_NVRTC_PTX_ONLY");
    EXPECT(compile("extern \"C\" __global__ void k(int *x) { unsigned l; asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(l)); "
                   "x[0] = l; }",
                   kOpts, 3, &log, &img) == NVRTC_ERROR_COMPILATION &&
               log.find("not emulated") != std::string::npos,
           "laneid asm: %s", log.c_str());
    EXPECT(compile("extern \"C\" __global__ void k(int *x) { unsigned l; asm(\"popc.b32 %0, %1;\" : \"=r\"(l) : "
                   "\"r\"(x[0])); }",
                   kOpts, 3, &log, &img) == NVRTC_ERROR_COMPILATION &&
               log.find("popc.b32") != std::string::npos,
           "popc asm: %s", log.c_str());
    EXPECT(compile("extern \"C\" __global__ void k(int *x) { x[0] = undeclared; }", kOpts, 3, &log, &img) ==
                   NVRTC_ERROR_COMPILATION &&
               log.find("undeclared") != std::string::npos && log.find("error") != std::string::npos,
           "syntax error: %s", log.c_str());
    nvrtcProgram p = nullptr;
    size_t n = 0;
    EXPECT(p_nvrtcCreateProgram(&p, "int x;", "p.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS, "create");
    EXPECT(p_nvrtcGetPTXSize(p, &n) == NVRTC_ERROR_INVALID_PROGRAM, "PTX before compiling");
    EXPECT(p_nvrtcCompileProgram(p, -1, nullptr) == NVRTC_ERROR_INVALID_INPUT, "negative option count");
    nvrtcProgram q = p;
    EXPECT(p_nvrtcDestroyProgram(&p) == NVRTC_SUCCESS && p == nullptr, "destroy");
    EXPECT(p_nvrtcDestroyProgram(&q) == NVRTC_ERROR_INVALID_PROGRAM, "destroy twice");
    EXPECT(p_nvrtcCreateProgram(nullptr, "int x;", "p.cu", 0, nullptr, nullptr) == NVRTC_ERROR_INVALID_INPUT, "NULL");
}

static float half_to_float(unsigned short h) /* independent of cuda_fp16.h */
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* n elements of page-locked host memory, which kernels may use; main frees them all. */
static std::vector<void *> g_pinned;
template <class T> static T *pinned(size_t n)
{
    void *p = nullptr;
    if (p_cudaHostAlloc(&p, n * sizeof(T), 0) != cudaSuccess || !p) printf("cudaHostAlloc failed\n"), exit(2);
    memset(p, 0, n * sizeof(T));
    g_pinned.push_back(p);
    return (T *)p;
}

/* What the emulator's notes said while f ran (TOCHA_CUDA_EMU_LOG is read at each note). */
template <class F> static std::string notes_of(F f)
{
    char path[] = "/tmp/tocha_emu_notes_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return "(no temporary file)";
    close(fd);
    std::string before = getenv("TOCHA_CUDA_EMU_LOG");
    setenv("TOCHA_CUDA_EMU_LOG", path, 1);
    f();
    setenv("TOCHA_CUDA_EMU_LOG", before.c_str(), 1);
    std::string text;
    if (FILE *in = fopen(path, "r")) {
        char buf[512];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, in)) > 0) text.append(buf, k);
        fclose(in);
    }
    unlink(path);
    return text;
}

/* What a kernel may and may not be given: device 0's memory, a freed block of it, and device
 * 1's memory, n floats each. */
struct test_memory {
    float *dev0 = nullptr, *freed = nullptr, *dev1 = nullptr;
    explicit test_memory(size_t n)
    {
        EXPECT(p_cudaMalloc((void **)&dev0, n * sizeof(float)) == cudaSuccess, "cudaMalloc on device 0");
        EXPECT(p_cudaMalloc((void **)&freed, n * sizeof(float)) == cudaSuccess && p_cudaFree(freed) == cudaSuccess,
               "a freed allocation");
        EXPECT(p_cudaSetDevice(1) == cudaSuccess && p_cudaMalloc((void **)&dev1, n * sizeof(float)) == cudaSuccess &&
                   p_cudaSetDevice(0) == cudaSuccess,
               "cudaMalloc on device 1");
    }
    ~test_memory()
    {
        p_cudaFree(dev0);
        p_cudaSetDevice(1), p_cudaFree(dev1), p_cudaSetDevice(0);
    }
};

/* Launches f (grid blocks of 64 threads) and waits: the launch must be taken, the wait must
 * return want, and the emulator's notes must hold note ("": no note at all); a failure is
 * reported once. */
static void expect_launch(const char *what, CUfunction f, unsigned grid, void **params, CUresult want, const char *note)
{
    CUresult launched = CUDA_ERROR_UNKNOWN, waited = CUDA_ERROR_UNKNOWN;
    std::string said = notes_of([&] {
        launched = p_cuLaunchKernel(f, grid, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr);
        waited = p_cuCtxSynchronize();
    });
    EXPECT(launched == CUDA_SUCCESS && waited == want, "%s: launch %d, wait %d, want %d", what, (int)launched,
           (int)waited, (int)want);
    EXPECT(said.find(note) != std::string::npos && (*note != 0) == !said.empty(), "%s: the note: %s", what,
           said.c_str());
    EXPECT(p_cuCtxSynchronize() == CUDA_SUCCESS, "%s: reported once", what);
}

/* TOCHA_CUDA_EMU_ORDER=reverse (read at each grid): each thread of `neighbours` reads the
 * word its neighbour (t ^ 1) writes. With the barrier every thread sees this launch's value
 * in both orders; without it, the threads run first see the word's old value: the even ones
 * in the default order, the odd ones reversed, so the two orders together show the race. */
static void check_thread_orders(CUmodule m)
{
    CUfunction f = nullptr;
    EXPECT(p_cuModuleGetFunction(&f, m, "neighbours") == CUDA_SUCCESS, "neighbours");
    int *y = pinned<int>(128), tag = 0;
    for (int sync = 1; sync >= 0; sync--)
        for (int reverse = 0; reverse < 2; reverse++) {
            if (reverse) setenv("TOCHA_CUDA_EMU_ORDER", "reverse", 1);
            else unsetenv("TOCHA_CUDA_EMU_ORDER");
            tag++; /* new values, so the last launch's words are old ones */
            void *params[3] = {&y, &tag, &sync};
            EXPECT(p_cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr) == CUDA_SUCCESS &&
                       p_cuCtxSynchronize() == CUDA_SUCCESS,
                   "neighbours ran");
            int fresh[2] = {0, 0}; /* threads that saw this launch's value: even, odd */
            for (int i = 0; i < 128; i++)
                fresh[i % 2] += y[i] == tag * 1000 + i / 64 * 100 + (i % 64 ^ 1) + 1;
            bool want_even = sync || reverse, want_odd = sync || !reverse;
            EXPECT(fresh[0] == (want_even ? 64 : 0) && fresh[1] == (want_odd ? 64 : 0),
                   "%s, %s order: %d even and %d odd threads saw this launch's value", sync ? "barrier" : "no barrier",
                   reverse ? "reverse" : "default", fresh[0], fresh[1]);
        }
    unsetenv("TOCHA_CUDA_EMU_ORDER");

    /* shared memory read before the block writes it holds 0xff bytes, not what the block
     * before (or the launch before) left there */
    EXPECT(p_cuModuleGetFunction(&f, m, "reads_first") == CUDA_SUCCESS, "reads_first");
    int fresh = 0;
    for (int launch = 1; launch <= 2; launch++) {
        void *params[2] = {&y, &launch};
        EXPECT(p_cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr) == CUDA_SUCCESS &&
                   p_cuCtxSynchronize() == CUDA_SUCCESS,
               "reads_first ran");
        for (int i = 0; i < 128; i++) fresh += y[i] == -1;
    }
    EXPECT(fresh == 256, "%d of 256 reads of unwritten shared memory saw 0xff bytes", fresh);
}

/* Warp shuffles: the emulator waits for the lanes a shuffle's mask names, and fails the launch
 * (cudaErrorLaunchFailure, with a note) where a GPU's result is undefined. A full-warp sum
 * is right with the whole warp live; with half the warp returned first, or in a block of 20
 * threads (a partial warp), it reads lanes that are not there. */
static void check_warp_shuffles(CUmodule m)
{
    int *y = pinned<int>(32);
    auto run = [&](const char *kernel, unsigned block, int arg, CUresult want, const char *note) {
        CUfunction f = nullptr;
        CUresult launched = CUDA_ERROR_UNKNOWN, waited = CUDA_ERROR_UNKNOWN;
        for (int i = 0; i < 32; i++) y[i] = -7;
        void *params[2] = {&y, &arg};
        std::string said = notes_of([&] {
            if (p_cuModuleGetFunction(&f, m, kernel) != CUDA_SUCCESS) return;
            launched = p_cuLaunchKernel(f, 1, 1, 1, block, 1, 1, 0, nullptr, params, nullptr);
            waited = p_cuCtxSynchronize();
        });
        EXPECT(launched == CUDA_SUCCESS && waited == want, "%s(%d), %u threads: launch %d, wait %d, want %d", kernel,
               arg, block, (int)launched, (int)waited, (int)want);
        EXPECT(said.find(note) != std::string::npos && (*note != 0) == !said.empty(), "%s(%d): the note: %s", kernel,
               arg, said.c_str());
    };
    for (int reverse = 0; reverse < 2; reverse++) {
        if (reverse) setenv("TOCHA_CUDA_EMU_ORDER", "reverse", 1);
        run("warp_sum", 32, 32, CUDA_SUCCESS, "");
        int right = 0;
        for (int i = 0; i < 32; i++) right += y[i] == 528;
        EXPECT(right == 32, "a full warp's sum: %d of 32 lanes right", right);
        run("half_warp_sum", 32, 0, CUDA_SUCCESS, "");
        right = 0;
        for (int i = 0; i < 32; i++) right += y[i] == (i < 16 ? 136 : i + 1);
        EXPECT(right == 32, "half a warp's sum under its own mask: %d of 32 lanes right", right);
        run("warp_sum", 32, 16, CUDA_ERROR_LAUNCH_FAILED, "which has returned");
        run("warp_sum", 20, 32, CUDA_ERROR_LAUNCH_FAILED, "which lies past the end of the block");
        run("bad_masks", 32, 0, CUDA_ERROR_LAUNCH_FAILED, "lane 0 calls a warp shuffle whose mask 0xfffffffe");
        run("bad_masks", 32, 1, CUDA_ERROR_LAUNCH_FAILED, "meet at a shuffle with masks");
        run("bad_masks", 32, 2, CUDA_ERROR_LAUNCH_FAILED, "reads lane 20 at a warp shuffle, which the mask does not name");
        run("bad_masks", 32, 3, CUDA_SUCCESS, "");
        unsetenv("TOCHA_CUDA_EMU_ORDER");
    }
}

/* The backend's kernels declared with __launch_bounds__(N) have their blocks checked by
 * emu_bounded_block at each launch (cu2cc.pl): up to N threads pass as they are, more are
 * refused with a note naming the kernel and the bound. */
static void check_bounded_block()
{
    auto bounded = sym<dim3 (*)(unsigned, dim3, const char *)>("emu_bounded_block");
    dim3 b = bounded(128, dim3(64, 2, 1), "k");
    EXPECT(b.x == 64 && b.y == 2 && b.z == 1, "128 threads within __launch_bounds__(128)");
    std::string said = notes_of([&] { b = bounded(128, dim3(129, 1, 1), "attn_forward_kernel<0, 64>"); });
    EXPECT(b.x * b.y * b.z == 0, "129 threads past __launch_bounds__(128) give an empty block");
    EXPECT(said.find("attn_forward_kernel<0, 64>: 129 threads a block, more than its __launch_bounds__(128)") !=
               std::string::npos,
           "the note: %s", said.c_str());
}

/* A kernel's pointer arguments are checked when it runs: pageable host memory, freed device
 * memory and the other device's memory fail it at the wait, before it writes anything. */
static void check_kernel_pointers(CUfunction scale_rev, const float *x)
{
    test_memory mem(192);
    std::vector<float> pageable(192, 7.0f);
    struct {
        const char *what;
        float *y;
        int n;
        CUresult want;
        const char *note;
    } cases[] = {
        {"device 0's memory", mem.dev0, 150, CUDA_SUCCESS, ""},
        {"the end of device 0's allocation", mem.dev0 + 192, 0, CUDA_SUCCESS, ""},
        {"NULL", nullptr, 0, CUDA_SUCCESS, ""},
        {"pageable host memory", pageable.data(), 150, CUDA_ERROR_ILLEGAL_ADDRESS,
         "is host memory that is not page-locked"},
        {"freed device memory", mem.freed + 16, 150, CUDA_ERROR_ILLEGAL_ADDRESS,
         "device memory that no live allocation holds"},
        {"device 1's memory", mem.dev1, 150, CUDA_ERROR_ILLEGAL_ADDRESS, "is memory of device 1"},
    };
    for (const auto &c : cases) {
        const float *xp = x;
        float *yp = c.y;
        int n = c.n;
        float a = 2.0f;
        void *params[4] = {&xp, &yp, &n, &a};
        expect_launch(c.what, scale_rev, 3, params, c.want, c.note);
    }
    EXPECT(pageable[0] == 7.0f && pageable[149] == 7.0f, "the refused kernel wrote nothing");
}

/* The device pointers inside a struct argument are judged as pointer arguments are (the
 * emulator reads each aligned word that lies in device memory's address range). */
static void check_struct_pointers(CUmodule m)
{
    struct tail_view {
        long long n;
        float *p;
    };
    CUfunction fill = nullptr;
    EXPECT(p_cuModuleGetFunction(&fill, m, "fill_view") == CUDA_SUCCESS && fill, "fill_view");
    test_memory mem(64);
    struct {
        const char *what;
        tail_view v;
        CUresult want;
        const char *note;
    } cases[] = {
        {"a struct holding device 0's memory", {64, mem.dev0}, CUDA_SUCCESS, ""},
        {"a struct holding NULL", {0, nullptr}, CUDA_SUCCESS, ""},
        /* 16 floats in: the freed block's start may be the end of dev0's, which a kernel may get */
        {"a struct holding freed device memory", {64, mem.freed + 16}, CUDA_ERROR_ILLEGAL_ADDRESS,
         "argument 0's member at byte 8 (0x"},
        {"a struct holding device 1's memory", {64, mem.dev1}, CUDA_ERROR_ILLEGAL_ADDRESS, "is memory of device 1"},
    };
    for (const auto &c : cases) {
        tail_view v = c.v;
        float a = 3.0f;
        void *params[2] = {&v, &a};
        expect_launch(c.what, fill, 1, params, c.want, c.note);
    }
}

static void check_launches(const std::string &image)
{
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    EXPECT(p_cuModuleLoadDataEx(&m, image.c_str(), 0, nullptr, nullptr) == CUDA_ERROR_INVALID_CONTEXT, "no context");
    EXPECT(p_cuCtxSynchronize() == CUDA_ERROR_INVALID_CONTEXT, "synchronize without a context");
    CUcontext c = nullptr;
    EXPECT(p_cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS && c, "retain");
    EXPECT(p_cuCtxSetCurrent((CUcontext)&image) == CUDA_ERROR_INVALID_CONTEXT, "a bogus context");
    EXPECT(p_cuCtxSetCurrent(c) == CUDA_SUCCESS, "set current");
    char jlog[256] = "";
    CUjit_option o[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *ov[2] = {jlog, (void *)(uintptr_t)sizeof jlog};
    EXPECT(p_cuModuleLoadDataEx(&m, ".version 8.0\n.target sm_90\n", 2, o, ov) == CUDA_ERROR_INVALID_IMAGE &&
               strstr(jlog, "not from the emulator"),
           "real PTX refused: %s", jlog);
    EXPECT(p_cuModuleLoadDataEx(&m, image.c_str(), 2, o, ov) == CUDA_SUCCESS && m, "load");
    EXPECT(p_cuModuleGetFunction(&f, m, "nope") == CUDA_ERROR_NOT_FOUND, "missing function");
    EXPECT(p_cuModuleGetFunction(&f, (CUmodule)&image, "scale_rev") == CUDA_ERROR_INVALID_HANDLE, "bogus module");
    EXPECT(p_cuModuleGetFunction(&f, m, "scale_rev") == CUDA_SUCCESS && f, "scale_rev");

    /* scale_rev over 150 elements: three blocks of 64, the last partly out of range */
    const int n = 150;
    float *x = pinned<float>(192), *y = pinned<float>(192);
    for (int i = 0; i < 192; i++) x[i] = (float)i - 20.0f, y[i] = 7.0f;
    int nn = n;
    float a = 2.5f;
    const float *xp = x;
    float *yp = y;
    void *params[4] = {&xp, &yp, &nn, &a};
    EXPECT(p_cuLaunchKernel(f, 3, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr) == CUDA_SUCCESS, "launch");
    a = -1.0f; /* the launch took its parameters' values */
    EXPECT(y[0] == 7.0f, "the launch is held until the host waits");
    EXPECT(p_cuCtxSynchronize() == CUDA_SUCCESS, "synchronize");
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int src = i / 64 * 64 + 63 - i % 64; /* the mirror in the block, -1 when out of range */
        float want = src < n ? x[src] * 2.5f : -1.0f;
        bad += y[i] != want;
    }
    EXPECT(bad == 0 && y[150] == 7.0f, "scale_rev: %d wrong", bad);
    check_kernel_pointers(f, x);
    check_struct_pointers(m);
    check_thread_orders(m);
    EXPECT(p_cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr) == CUDA_ERROR_INVALID_VALUE,
           "past __launch_bounds__(64)");
    void *extra[1] = {nullptr};
    EXPECT(p_cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, nullptr, params, extra) == CUDA_ERROR_INVALID_VALUE, "extra");
    EXPECT(p_cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE,
           "no parameters");
    EXPECT(p_cuLaunchKernel(f, 0, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr) == CUDA_ERROR_INVALID_VALUE, "empty grid");
    EXPECT(p_cuLaunchKernel((CUfunction)&image, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) ==
               CUDA_ERROR_INVALID_HANDLE,
           "bogus function");

    /* the f16 conversions: load, then three times the value rounded to nearest even */
    static const unsigned short h[] = {0x3C00, 0x0001, 0x7C00, 0xFC00, 0x7E00, 0x3555, 0x7BFF, 0x8000, 0xC000, 0x0400};
    /* 0x3555 * 3 = 1 - 2^-12, halfway between 0x3BFF and 0x3C00: even wins; 65504 * 3 overflows */
    static const unsigned short tripled[] = {0x4200, 0x0003, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0x7C00, 0x8000, 0xC600, 0x0A00};
    const int nh = (int)(sizeof h / sizeof h[0]);
    float *fo = pinned<float>(nh);
    unsigned short *to = pinned<unsigned short>(nh), *hin = pinned<unsigned short>(nh);
    memcpy(hin, h, sizeof h);
    const unsigned short *hp = hin;
    float *fp = fo;
    unsigned short *tp = to;
    int nhv = nh;
    void *hparams[4] = {&hp, &fp, &tp, &nhv};
    EXPECT(p_cuModuleGetFunction(&f, m, "halves") == CUDA_SUCCESS, "halves");
    EXPECT(p_cuLaunchKernel(f, 2, 1, 1, 3, 1, 1, 0, nullptr, hparams, nullptr) == CUDA_SUCCESS, "launch halves");
    EXPECT(p_cuCtxSynchronize() == CUDA_SUCCESS, "halves ran");
    for (int i = 0; i < nh; i++) {
        float want = half_to_float(h[i]);
        EXPECT(isnan(want) ? isnan(fo[i]) : fo[i] == want, "h2f(%#x) = %g, want %g", h[i], fo[i], want);
        bool nan = (tripled[i] & 0x7c00) == 0x7c00 && (tripled[i] & 0x3ff);
        EXPECT(nan ? ((to[i] & 0x7c00) == 0x7c00 && (to[i] & 0x3ff)) : to[i] == tripled[i], "3 * %#x -> %#x, want %#x",
               h[i], to[i], tripled[i]);
    }

    /* half a warp waits at a block barrier, the other half at a shuffle: neither can go on */
    int *zp = pinned<int>(32);
    void *zparams[1] = {&zp};
    EXPECT(p_cuModuleGetFunction(&f, m, "deadlock") == CUDA_SUCCESS, "deadlock");
    EXPECT(p_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, zparams, nullptr) == CUDA_SUCCESS, "deadlock queued");
    EXPECT(p_cuCtxSynchronize() == CUDA_ERROR_LAUNCH_FAILED, "a deadlock fails at the wait");
    EXPECT(p_cuCtxSynchronize() == CUDA_SUCCESS, "reported once");

    /* a 16-byte access 16 bytes into an aligned buffer is fine, 4 bytes in is not */
    const char *bp = pinned<char>(64); /* 256-byte aligned */
    for (int offset : {16, 4}) {
        void *mparams[2] = {&bp, &offset};
        EXPECT(p_cuModuleGetFunction(&f, m, "misaligned") == CUDA_SUCCESS, "misaligned");
        EXPECT(p_cuLaunchKernel(f, 2, 1, 1, 32, 1, 1, 0, nullptr, mparams, nullptr) == CUDA_SUCCESS, "queued");
        CUresult r = p_cuCtxSynchronize();
        EXPECT(r == (offset == 16 ? CUDA_SUCCESS : CUDA_ERROR_MISALIGNED_ADDRESS), "offset %d: %d", offset, (int)r);
    }
    check_warp_shuffles(m);
}

/* The child of check_local_arrays: runs local_array over 3 blocks of 64 threads reading
 * element i of a 4-element local array, and says "ran" if it came back. */
static int run_local_array(int i)
{
    std::string log, image;
    CUcontext c = nullptr;
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    if (p_cuInit(0) != CUDA_SUCCESS || compile(kGood, kOpts, 3, &log, &image) != NVRTC_SUCCESS ||
        p_cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS || p_cuCtxSetCurrent(c) != CUDA_SUCCESS ||
        p_cuModuleLoadDataEx(&m, image.c_str(), 0, nullptr, nullptr) != CUDA_SUCCESS ||
        p_cuModuleGetFunction(&f, m, "local_array") != CUDA_SUCCESS) {
        printf("local_array: not loaded: %s\n", log.c_str());
        return 1;
    }
    int *y = pinned<int>(192);
    void *params[2] = {&y, &i};
    CUresult r = p_cuLaunchKernel(f, 3, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr);
    if (r == CUDA_SUCCESS) r = p_cuCtxSynchronize();
    printf("local_array(%d): %s, y[191] = %d\n", i, r == CUDA_SUCCESS ? "ran" : "failed", y[191]);
    for (void *p : g_pinned) p_cudaFreeHost(p);
    return r == CUDA_SUCCESS ? 0 : 1;
}

/* Under AddressSanitizer (`make asan`) the kernels' threads run on fiber stacks that the
 * emulator announces to it (emu_sched.cc), so a read past a kernel's local array is
 * reported there, as one on a thread's own stack is, and a read inside it is not (nor is
 * anything a block of threads earlier left on the same stacks). In a child process: the
 * report ends it. */
static void check_local_arrays(const char *self)
{
#if defined(__SANITIZE_ADDRESS__)
    for (int i : {3, 4}) {
        std::string cmd = std::string("'") + self + "' --local-array " + std::to_string(i) + " 2>&1", out;
        FILE *child = popen(cmd.c_str(), "r");
        if (!child) {
            EXPECT(false, "cannot run %s", cmd.c_str());
            continue;
        }
        char buf[512];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, child)) > 0) out.append(buf, k);
        int status = pclose(child);
        bool reported = out.find("ERROR: AddressSanitizer: stack-buffer-overflow") != std::string::npos;
        if (i == 3)
            EXPECT(status == 0 && out.find("local_array(3): ran, y[191] = 4") != std::string::npos &&
                       out.find("Sanitizer") == std::string::npos,
                   "a read inside a kernel's local array: %s", out.c_str());
        else
            EXPECT(status != 0 && reported, "a read past a kernel's local array is reported: %s", out.c_str());
    }
#else
    (void)self;
    printf("(not built with AddressSanitizer: `make asan` checks that a kernel's local arrays are checked)\n");
#endif
}

int main(int argc, char **argv)
{
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    self[k > 0 ? k : 0] = '\0';
    const std::string exe = k > 0 ? self : argv[0]; /* (dirname writes into its argument) */
    std::string lib = std::string(k > 0 ? dirname(self) : dirname(argv[0])) + "/libtocha_cuda_emu.so";
    setenv("TOCHA_CUDA_EMU_LOG", "/dev/null", 0); /* the expected failures' notes */
    setenv("TOCHA_CUDA_EMU_DEVICES", "2", 1);      /* a kernel given the other device's memory */
    g_lib = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!g_lib) {
        printf("cannot load %s: %s\n0 passed, 1 failed\n", lib.c_str(), dlerror());
        return 1;
    }
    LOAD(nvrtcVersion), LOAD(nvrtcCreateProgram), LOAD(nvrtcCompileProgram), LOAD(nvrtcGetProgramLogSize);
    LOAD(nvrtcGetProgramLog), LOAD(nvrtcGetPTXSize), LOAD(nvrtcGetPTX), LOAD(nvrtcDestroyProgram);
    LOAD(nvrtcGetCUBINSize), LOAD(nvrtcGetCUBIN);
    LOAD(cuInit), LOAD(cuDeviceGet), LOAD(cuDeviceGetAttribute), LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuCtxSetCurrent), LOAD(cuCtxSynchronize), LOAD(cuModuleLoadDataEx), LOAD(cuModuleGetFunction), LOAD(cuLaunchKernel);
    LOAD(cuGetErrorString), LOAD(cudaMalloc), LOAD(cudaFree), LOAD(cudaHostAlloc), LOAD(cudaFreeHost);
    LOAD(cudaSetDevice);
    if (argc == 3 && !strcmp(argv[1], "--local-array")) return run_local_array(atoi(argv[2]));
    check_init_and_devices();
    check_bounded_block();
    std::string image;
    check_nvrtc(&image);
    if (!image.empty()) check_launches(image);
    check_local_arrays(exe.c_str());
    for (void *p : g_pinned) EXPECT(p_cudaFreeHost(p) == cudaSuccess, "cudaFreeHost");
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
