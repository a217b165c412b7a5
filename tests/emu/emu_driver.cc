/* emu_driver.cc -- NVRTC, and the CUDA driver API calls that load and launch a module, as
 * stand-ins in the CUDA emulator (emu.h). With them, graph mode's generated kernels
 * (core/graph/cuda_codegen.c's text, compiled by nvrtc.c, launched by cuda_launch.c) run
 * without a GPU: tests/run.sh points TOCHA_NVRTC_LIB and TOCHA_CUDA_DRIVER_LIB at this
 * library.
 *
 * "Compiling" (nvrtcCompileProgram) treats the CUDA C as the backend's .cu files are
 * treated (emu_device.h force-included; each one-variable __shared__ statement followed by
 * emu::shared_fresh, as cu2cc.pl does), plus two rewrites:
 *   - inline PTX becomes calls of emu_device.h's emu_ptx_* for the instructions listed in
 *     kPtx; any other asm is a compile error that names it;
 *   - each __global__ function gets an exported entry, emu_entry_<name>, that launches it
 *     through emu::launch_params (emu_launch.h).
 * The host's C++ compiler builds that into a shared object linked against this library, so
 * the kernels share the scheduler's thread indices and barriers; it is loaded at once.
 * What nvrtcGetPTX (and nvrtcGetCUBIN, after a compile for sm_XY) hands back is NOT PTX or
 * machine code: a marked text holding that C++ (the "image").
 * cuModuleLoadDataEx accepts only such images and finds the loaded object by its text; it
 * compiles again for an image from an earlier process (nvrtc.c's disk cache). The version
 * reported is 0.1, so nvrtc.c's cache keys never match a real NVRTC's.
 *
 * Driver: cuInit, devices and their attributes (the runtime's), primary contexts (one per
 * device; making one current selects its device, as it does for the runtime), modules,
 * functions, and cuLaunchKernel, which checks the configuration and the kernel's
 * __launch_bounds__ and queues the grid on the stream like a <<<>>> launch (held until the
 * host waits, or captured when the stream captures); cuCtxSynchronize runs the current
 * device's held work and returns the error a kernel met there (a deadlock, a misaligned
 * access), as a GPU reports a kernel's fault at the next wait. Errors are the driver's codes,
 * returned, never left for cudaGetLastError.
 *
 * The compiler is the one the emulator was built with (EMU_MODULE_CXX), or
 * $TOCHA_CUDA_EMU_CXX; under the sanitizers the modules are built with them too.
 * TOCHA_CUDA_EMU_NVRTC_PTX_ONLY=1 makes a compile for sm_XY fail (an NVRTC that cannot make
 * machine code for the GPU), so tests reach cuda_launch.c's PTX fallback.
 * nvrtcGetSupportedArchs lists NVRTC 13.0's architectures; TOCHA_CUDA_EMU_NVRTC_NEWEST=NN
 * drops those above NN from the list and refuses them in a compile, as NVRTC does ("invalid
 * value for --gpu-architecture"): an NVRTC older than the GPU.
 */
#include "emu.h"
#include "emu_internal.h"
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <algorithm>
#include <vector>

extern char **environ;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

const char kImageMark[] = "// tocha CUDA emulator module (host C++, not PTX)\n";

/* ---- translation: CUDA C -> the C++ the module is built from ---------------------------- */

/* Inline PTX the emulator knows: `asm("<op> %0, %1;" : "=r"(out) : "r"(in))` -> out = fn(in). */
const struct {
    const char *op, *fn;
} kPtx[] = {{"cvt.f32.f16", "emu_ptx_cvt_f32_f16"}, {"cvt.rn.f16.f32", "emu_ptx_cvt_rn_f16_f32"}};

struct kernel_decl {
    std::string name;
    int nparams;
    unsigned max_threads; /* __launch_bounds__, else 1024 */
};

/* The __global__ functions of src: name, parameter count, launch bound. */
std::vector<kernel_decl> find_kernels(const std::string &src)
{
    static const std::regex re(R"(__global__\s+(?:__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*)?void\s+)"
                               R"((?:__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*)?([A-Za-z_]\w*)\s*\()");
    std::vector<kernel_decl> out;
    for (auto it = std::sregex_iterator(src.begin(), src.end(), re); it != std::sregex_iterator(); ++it) {
        const std::smatch &m = *it;
        kernel_decl k{m[3].str(), 0, 1024};
        if (m[1].matched) k.max_threads = (unsigned)std::stoul(m[1].str());
        if (m[2].matched) k.max_threads = (unsigned)std::stoul(m[2].str());
        /* parameters: commas at depth 0 up to the matching ')' */
        size_t i = (size_t)(m.position(0) + m.length(0));
        int depth = 1;
        bool any = false;
        for (; i < src.size() && depth > 0; i++) {
            char c = src[i];
            if (c == '(' || c == '<' || c == '[') depth++;
            else if (c == ')' || c == '>' || c == ']') depth--;
            else if (c == ',' && depth == 1) k.nparams++;
            if (depth > 0 && !isspace((unsigned char)c)) any = true;
        }
        if (any) k.nparams++;
        out.push_back(k);
    }
    return out;
}

/* The module's C++ from CUDA C; false with the reason in log. */
bool translate(const std::string &cu, std::string *cc, std::string *log)
{
    static const std::regex asm_re(R"(asm\s*(?:volatile\s*)?\(\s*"([a-z0-9.]+)\s+%0\s*,\s*%1\s*;"\s*:\s*"=\w"\s*\()"
                                   R"(\s*(\w+)\s*\)\s*:\s*"\w"\s*\(\s*(\w+)\s*\)\s*\))");
    std::string out;
    auto last = cu.cbegin();
    for (auto it = std::sregex_iterator(cu.begin(), cu.end(), asm_re); it != std::sregex_iterator(); ++it) {
        const std::smatch &m = *it;
        const char *fn = nullptr;
        for (const auto &p : kPtx)
            if (m[1].str() == p.op) fn = p.fn;
        if (!fn) {
            *log = "emulated nvrtc: inline PTX instruction `" + m[1].str() + "` is not emulated (tests/emu/emu_driver.cc)";
            return false;
        }
        out.append(last, m[0].first);
        out += "(" + m[2].str() + " = " + fn + "(" + m[3].str() + "))";
        last = m[0].second;
    }
    out.append(last, cu.cend());
    /* each `__shared__ T name[...];` line is followed by emu::shared_fresh, as cu2cc.pl does
     * for the .cu files (the generated code declares one variable a statement) */
    static const std::regex shared_re(R"((^|\n)([ \t]*__shared__\s+[\w:<> ]+?\s(\w+)\s*(?:\[[^\];]*\]\s*)*;))");
    out = std::regex_replace(out, shared_re, "$1$2 emu::shared_fresh(&$3, sizeof $3);");
    static const std::regex other_asm(R"(\basm\s*(?:volatile\s*)?\()");
    std::smatch m;
    if (std::regex_search(out, m, other_asm)) {
        *log = "emulated nvrtc: inline asm `" + out.substr((size_t)m.position(0), 60) +
               "` is not emulated (only kPtx's conversions are)";
        return false;
    }
    out += "\n/* ---- emulator entries (tests/emu/emu_driver.cc) ---- */\n";
    for (const kernel_decl &k : find_kernels(out))
        out += "extern \"C\" EMU_API void emu_entry_" + k.name +
               "(dim3 g, dim3 b, size_t sh, cudaStream_t s, void **params)\n{ emu::launch_params(" + k.name + ", \"" +
               k.name + "\", g, b, sh, s, params); }\n";
    *cc = out;
    return true;
}

/* ---- building and loading modules --------------------------------------------------------- */

std::mutex g_mu;
/* The registries below are never destroyed (allocated once, left at exit): loaded modules
 * live as long as the process, as on CUDA without cuModuleUnload, and they stay reachable
 * for the leak checker after static destructors have run. */
std::map<std::string, void *> &g_built = *new std::map<std::string, void *>; /* module C++ -> its object */

std::string self_path()
{
    Dl_info info;
    if (dladdr((void *)&find_kernels, &info) && info.dli_fname) return info.dli_fname;
    return "";
}

std::string read_file(const std::string &path)
{
    std::string s;
    FILE *f = fopen(path.c_str(), "r");
    if (!f) return s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    fclose(f);
    return s;
}

/* Runs argv with stderr (and stdout) into errpath and without LD_PRELOAD (a sanitizer
 * runtime preloaded into the test would be preloaded into the compiler too); its status. */
int run_quiet(const std::vector<std::string> &args, const std::string &errpath)
{
    std::vector<char *> argv;
    for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char *> envp;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0) envp.push_back(*e);
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, errpath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0) return -1;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The loaded object built from the module C++ cc, building it if needed (g_mu held); null
 * with the compiler's messages in log. */
void *build_locked(const std::string &cc, std::string *log)
{
    auto it = g_built.find(cc);
    if (it != g_built.end()) return it->second;
    const char *tmp = getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tocha-emu-nvrtc-XXXXXX";
    if (!mkdtemp(&dir[0])) {
        *log = "emulated nvrtc: cannot make a directory under " + dir + ": " + strerror(errno);
        return nullptr;
    }
    std::string src = dir + "/module.cc", so = dir + "/module.so", err = dir + "/log";
    FILE *f = fopen(src.c_str(), "w");
    bool wrote = f && fwrite(cc.data(), 1, cc.size(), f) == cc.size();
    if (f && fclose(f) != 0) wrote = false;
    void *h = nullptr;
    if (!wrote) {
        *log = "emulated nvrtc: cannot write " + src;
    } else {
        const char *cxx = getenv("TOCHA_CUDA_EMU_CXX");
        std::vector<std::string> args = {cxx && *cxx ? cxx : EMU_MODULE_CXX,
                                         "-std=c++17",
                                         "-O1",
                                         "-fPIC",
                                         "-shared",
                                         "-w",
                                         "-ffp-contract=off", /* NVRTC runs with --fmad=false */
                                         "-fvisibility=hidden",
                                         "-I" EMU_MODULE_EMU_DIR,
                                         "-I" EMU_MODULE_CUDA_INC,
                                         "-include",
                                         "emu_device.h"};
        std::istringstream san(EMU_MODULE_SAN);
        for (std::string w; san >> w;) args.push_back(w);
        args.insert(args.end(), {src, "-o", so, self_path()});
        int r = run_quiet(args, err);
        if (r != 0) {
            *log = "emulated nvrtc: " + args[0] + " failed (status " + std::to_string(r) + "):\n" + read_file(err);
        } else if (!(h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            *log = std::string("emulated nvrtc: loading the module failed: ") + (e ? e : "?");
        }
    }
    unlink(src.c_str()), unlink(so.c_str()), unlink(err.c_str()); /* a loaded object stays mapped */
    rmdir(dir.c_str());
    if (h) g_built[cc] = h;
    return h;
}

} // namespace

/* ---- NVRTC ---------------------------------------------------------------------------------- */

struct _nvrtcProgram {
    std::string src, name, log, image;
    bool real_arch = false; /* compiled for sm_XY: a "cubin" too */
};

namespace {
std::set<nvrtcProgram> &g_programs = *new std::set<nvrtcProgram>;
bool live(nvrtcProgram p)
{
    std::lock_guard<std::mutex> l(g_mu);
    return p && g_programs.count(p);
}
} // namespace

EXPORT const char *nvrtcGetErrorString(nvrtcResult r)
{
    switch (r) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR unknown to the emulator";
    }
}
EXPORT nvrtcResult nvrtcVersion(int *major, int *minor)
{
    if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
    *major = 0, *minor = 1; /* not a real NVRTC's: see the banner */
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int nheaders,
                                      const char *const *headers, const char *const *include_names)
{
    if (!prog || !src || nheaders < 0 || (nheaders > 0 && (!headers || !include_names))) return NVRTC_ERROR_INVALID_INPUT;
    if (nheaders > 0) {
        emu::note("nvrtcCreateProgram: %d in-memory header(s): not emulated", nheaders);
        return NVRTC_ERROR_INVALID_INPUT;
    }
    nvrtcProgram p = new _nvrtcProgram{src, name ? name : "default_program", "", ""};
    std::lock_guard<std::mutex> l(g_mu);
    g_programs.insert(p);
    *prog = p;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog)
{
    if (!prog || !live(*prog)) return NVRTC_ERROR_INVALID_PROGRAM;
    std::lock_guard<std::mutex> l(g_mu);
    g_programs.erase(*prog);
    delete *prog;
    *prog = nullptr;
    return NVRTC_SUCCESS;
}
/* NVRTC 13.0's architectures, ascending; those above TOCHA_CUDA_EMU_NVRTC_NEWEST left out. */
static std::vector<int> known_archs()
{
    static const int all[] = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
    const char *env = getenv("TOCHA_CUDA_EMU_NVRTC_NEWEST");
    int newest = env && *env ? atoi(env) : 1000;
    std::vector<int> out;
    for (int a : all)
        if (a <= newest) out.push_back(a);
    return out;
}
EXPORT nvrtcResult nvrtcGetNumSupportedArchs(int *n)
{
    if (!n) return NVRTC_ERROR_INVALID_INPUT;
    *n = (int)known_archs().size();
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetSupportedArchs(int *list)
{
    if (!list) return NVRTC_ERROR_INVALID_INPUT;
    std::vector<int> a = known_archs();
    std::copy(a.begin(), a.end(), list);
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int nopts, const char *const *opts)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (nopts < 0 || (nopts > 0 && !opts)) return NVRTC_ERROR_INVALID_INPUT;
    p->log.clear(), p->image.clear(), p->real_arch = false;
    /* the options tocha passes, and their spellings; a virtual architecture (compute_XY)
     * gives PTX only, a real one (sm_XY) a cubin as well */
    static const std::regex known(R"((--gpu-architecture=|-arch=|--gpu-architecture |-arch )(compute|sm)_\d+[a-z]?|)"
                                  R"(--fmad=(true|false)|-fmad=(true|false)|--std=c\+\+(11|14|17|20)|-std=c\+\+(11|14|17|20)|)"
                                  R"(-default-device|--device-as-default-execution-space)");
    bool real_arch = false;
    for (int i = 0; i < nopts; i++) {
        if (!opts[i] || !std::regex_match(opts[i], known)) {
            p->log = std::string("emulated nvrtc: option '") + (opts[i] ? opts[i] : "(null)") + "' is not emulated\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
        if (strstr(opts[i], "arch") && strstr(opts[i], "sm_")) real_arch = true;
        const char *num = strstr(opts[i], "arch") ? strpbrk(opts[i], "0123456789") : nullptr;
        std::vector<int> archs = known_archs();
        if (num && std::find(archs.begin(), archs.end(), atoi(num)) == archs.end()) {
            p->log = "nvrtc: error: invalid value for --gpu-architecture (-arch)\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
    }
    const char *ptx_only = getenv("TOCHA_CUDA_EMU_NVRTC_PTX_ONLY"); /* tests: an NVRTC without cubins */
    if (real_arch && ptx_only && strcmp(ptx_only, "1") == 0) {
        p->log = "emulated nvrtc: no machine code for a real architecture (TOCHA_CUDA_EMU_NVRTC_PTX_ONLY=1)\n";
        return NVRTC_ERROR_INVALID_OPTION;
    }
    std::string cc;
    if (!translate(p->src, &cc, &p->log)) return NVRTC_ERROR_COMPILATION;
    std::lock_guard<std::mutex> l(g_mu);
    if (!build_locked(cc, &p->log)) return NVRTC_ERROR_COMPILATION;
    p->image = kImageMark + cc;
    p->real_arch = real_arch;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t *n)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!n) return NVRTC_ERROR_INVALID_INPUT;
    *n = p->log.size() + 1;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char *buf)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!buf) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(buf, p->log.c_str(), p->log.size() + 1);
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t *n)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!n) return NVRTC_ERROR_INVALID_INPUT;
    if (p->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM; /* not compiled */
    *n = p->image.size() + 1;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetPTX(nvrtcProgram p, char *buf)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!buf) return NVRTC_ERROR_INVALID_INPUT;
    if (p->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
    memcpy(buf, p->image.c_str(), p->image.size() + 1);
    return NVRTC_SUCCESS;
}
/* The "cubin" is the same image; as NVRTC's, its size is 0 after a compile for a virtual
 * architecture (no machine code was made). */
EXPORT nvrtcResult nvrtcGetCUBINSize(nvrtcProgram p, size_t *n)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!n) return NVRTC_ERROR_INVALID_INPUT;
    if (p->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
    *n = p->real_arch ? p->image.size() + 1 : 0;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetCUBIN(nvrtcProgram p, char *buf)
{
    if (!live(p)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!buf) return NVRTC_ERROR_INVALID_INPUT;
    if (p->image.empty() || !p->real_arch) return NVRTC_ERROR_INVALID_PROGRAM;
    memcpy(buf, p->image.c_str(), p->image.size() + 1);
    return NVRTC_SUCCESS;
}

/* ---- the driver ------------------------------------------------------------------------------ */

struct CUctx_st {
    int dev;
};
struct CUfunc_st {
    void (*entry)(dim3, dim3, size_t, cudaStream_t, void **);
    kernel_decl decl;
};
struct CUmod_st {
    std::vector<CUfunc_st *> funcs;
};

namespace {
std::atomic<bool> g_init;
CUctx_st g_ctx[64];
thread_local CUctx_st *t_ctx;
std::set<CUmodule> &g_modules = *new std::set<CUmodule>;
std::set<CUfunction> &g_funcs = *new std::set<CUfunction>;

int ndevices()
{
    int n = 0;
    cudaGetDeviceCount(&n);
    return n < 64 ? n : 64;
}

/* The driver's code for a runtime error met while queueing a launch. */
CUresult from_runtime(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorStreamCaptureImplicit: return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    case cudaErrorStreamCaptureInvalidated: return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    case cudaErrorLaunchFailure: return CUDA_ERROR_LAUNCH_FAILED;
    case cudaErrorMisalignedAddress: return CUDA_ERROR_MISALIGNED_ADDRESS;
    case cudaErrorIllegalAddress: return CUDA_ERROR_ILLEGAL_ADDRESS;
    default: return CUDA_ERROR_UNKNOWN;
    }
}

/* Writes msg into a module load's JIT error log, when one was asked for. */
void jit_log(unsigned nopts, CUjit_option *opts, void **vals, const std::string &msg)
{
    char *buf = nullptr;
    size_t cap = 0;
    for (unsigned i = 0; opts && vals && i < nopts; i++) {
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER) buf = (char *)vals[i];
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) cap = (size_t)(uintptr_t)vals[i];
    }
    if (buf && cap) snprintf(buf, cap, "%s", msg.c_str());
    emu::note("cuModuleLoadDataEx: %.300s", msg.c_str());
}
} // namespace

EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    switch (r) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "unspecified launch failure"; break;
    case CUDA_ERROR_MISALIGNED_ADDRESS: *s = "misaligned address"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: *s = "operation would make the legacy stream depend on a capturing blocking stream"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *s = "operation failed due to a previous error during capture"; break;
    default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> l(g_mu);
    for (int d = 0; d < 64; d++) g_ctx[d].dev = d;
    g_init = true;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= ndevices()) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice d)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndevices()) return CUDA_ERROR_INVALID_DEVICE;
    cudaDeviceAttr ra;
    switch (attr) { /* the runtime's answers (emu_runtime.cc) */
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: ra = cudaDevAttrMultiProcessorCount; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: ra = cudaDevAttrComputeCapabilityMajor; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: ra = cudaDevAttrComputeCapabilityMinor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: ra = cudaDevAttrMaxThreadsPerBlock; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: ra = cudaDevAttrWarpSize; break;
    default: emu::note("cuDeviceGetAttribute: attribute %d is not emulated", (int)attr); return CUDA_ERROR_INVALID_VALUE;
    }
    cudaError_t e = emu::take_error_of([&] { cudaDeviceGetAttribute(v, ra, d); });
    return from_runtime(e);
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndevices()) return CUDA_ERROR_INVALID_DEVICE;
    *c = &g_ctx[d];
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (c && (c < g_ctx || c >= g_ctx + 64 || c->dev >= ndevices())) return CUDA_ERROR_INVALID_CONTEXT;
    t_ctx = c;
    /* the primary context is the runtime's: making it current selects its device there */
    if (c) emu::take_error_of([&] { cudaSetDevice(c->dev); });
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSynchronize(void)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!t_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    return from_runtime(emu::take_error_of([] { cudaDeviceSynchronize(); }));
}
EXPORT CUresult cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int nopts, CUjit_option *opts,
                                   void **vals)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!t_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (!mod || !image) return CUDA_ERROR_INVALID_VALUE;
    const char *text = (const char *)image;
    if (strncmp(text, kImageMark, sizeof kImageMark - 1) != 0) {
        jit_log(nopts, opts, vals, "the image is not from the emulator's NVRTC (real PTX or a cubin?)");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    std::string cc = text + sizeof kImageMark - 1, log;
    std::lock_guard<std::mutex> l(g_mu);
    void *h = build_locked(cc, &log);
    if (!h) {
        jit_log(nopts, opts, vals, log);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUmodule m = new CUmod_st;
    for (const kernel_decl &k : find_kernels(cc)) {
        void *sym = dlsym(h, ("emu_entry_" + k.name).c_str());
        if (!sym) continue;
        CUfunction f = new CUfunc_st{nullptr, k};
        memcpy(&f->entry, &sym, sizeof sym);
        m->funcs.push_back(f);
        g_funcs.insert(f);
    }
    g_modules.insert(m);
    *mod = m;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> l(g_mu);
    if (!g_modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
    for (CUfunction k : m->funcs)
        if (k->decl.name == name) {
            *f = k;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                               unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params,
                               void **extra)
{
    if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
    if (!t_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (!g_funcs.count(f)) return CUDA_ERROR_INVALID_HANDLE;
    }
    if (extra) {
        emu::note("cuLaunchKernel %s: `extra` argument passing is not emulated", f->decl.name.c_str());
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (f->decl.nparams > 0 && !params) {
        emu::note("cuLaunchKernel %s: %d parameters, no kernelParams", f->decl.name.c_str(), f->decl.nparams);
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned long long threads = (unsigned long long)bx * by * bz;
    if (threads > f->decl.max_threads) {
        emu::note("cuLaunchKernel %s: %llu threads per block, beyond its __launch_bounds__(%u)", f->decl.name.c_str(),
                  threads, f->decl.max_threads);
        return CUDA_ERROR_INVALID_VALUE;
    }
    cudaError_t e = emu::take_error_of(
        [&] { f->entry(dim3(gx, gy, gz), dim3(bx, by, bz), shmem, (cudaStream_t)stream, params); });
    return from_runtime(e);
}
