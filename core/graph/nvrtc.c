/* nvrtc.c -- run-time compilation of generated CUDA C (cuda_codegen.c) with NVRTC, to PTX
 * for a virtual architecture (compute_XY) or to machine code, a cubin, for a real one
 * (sm_XY), and the cache that makes each distinct kernel compile once. cuda_launch.c asks
 * for the device's cubin first: the driver loads it as it is, while PTX must be compiled
 * by the driver, which refuses PTX from an NVRTC newer than itself.
 *
 * libtocha links no CUDA library: libnvrtc is dlopen'ed on first use and its entry points
 * are declared here by hand (their C ABI: an int result, an opaque program pointer), so no
 * CUDA header is needed to build. Looked for in $TOCHA_NVRTC_LIB, then $CUDA_HOME/lib64,
 * /usr/local/cuda/lib64, then the dynamic loader's path by soname. nvrtcGetCUBIN (NVRTC
 * 11.1 and later) is optional: without it only PTX is made. So is nvrtcGetSupportedArchs
 * (11.2 on), which tc_nvrtc_arch_for reads to pick PTX for a GPU newer than NVRTC.
 *
 * Cache: key = FNV-1a 64 of (source, arch, options, NVRTC version). In memory a list of
 * entries compared on the full source (a hash collision cannot hand back another
 * kernel's image); on disk one file per key under $XDG_CACHE_HOME/tocha/nvrtc (else
 * ~/.cache/tocha/nvrtc), <key>-<arch>.ptx or .cubin, holding the source and the image with
 * their lengths, written to a temporary name and renamed so a reader never sees half a
 * file; a file that does not match is ignored.
 * TOCHA_NVRTC_CACHE=0 turns the disk cache off. One mutex guards the cache; compiles run
 * under it (a kernel is compiled once even when two threads ask at the same moment).
 *
 * Failures are statuses with a message naming what was compiled (the kernel's label) and
 * the head of NVRTC's log; the whole log of the last failure is kept per thread.
 */
#include "cuda_codegen.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the library --------------------------------------------------------------------- */

typedef struct nvrtc_prog *nvrtc_prog; /* nvrtcProgram */
typedef struct nvrtc_fns {
    int (*version)(int *major, int *minor);
    int (*create)(nvrtc_prog *p, const char *src, const char *name, int nheaders, const char *const *headers,
                  const char *const *include_names);
    int (*compile)(nvrtc_prog p, int nopts, const char *const *opts);
    int (*log_size)(nvrtc_prog p, size_t *n);
    int (*log)(nvrtc_prog p, char *buf);
    int (*ptx_size)(nvrtc_prog p, size_t *n);
    int (*ptx)(nvrtc_prog p, char *buf);
    int (*destroy)(nvrtc_prog *p);
    const char *(*error_string)(int r);
    int (*cubin_size)(nvrtc_prog p, size_t *n); /* NULL: this libnvrtc makes no cubins */
    int (*cubin)(nvrtc_prog p, char *buf);
    int (*num_archs)(int *n); /* NULL: this libnvrtc cannot list its architectures */
    int (*archs)(int *list);
} nvrtc_fns;

typedef struct libstate {
    nvrtc_fns f;
    bool ok;
    int major, minor;
    char why[768]; /* the reason when not ok */
} libstate;

static libstate lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* Loads libnvrtc into st: from `only` when given, else from the first place
 * that has it. */
static void load_into(libstate *st, const char *only)
{
    memset(st, 0, sizeof *st);
    char cands[6][1024];
    int nc = 0;
    const char *env = getenv("TOCHA_NVRTC_LIB"), *home = getenv("CUDA_HOME");
    if (only) {
        snprintf(cands[nc++], sizeof cands[0], "%s", only);
    } else {
        if (env && *env) snprintf(cands[nc++], sizeof cands[0], "%s", env);
        if (home && *home) snprintf(cands[nc++], sizeof cands[0], "%s/lib64/libnvrtc.so", home);
        snprintf(cands[nc++], sizeof cands[0], "/usr/local/cuda/lib64/libnvrtc.so");
        snprintf(cands[nc++], sizeof cands[0], "libnvrtc.so");    /* the loader's path */
        snprintf(cands[nc++], sizeof cands[0], "libnvrtc.so.13"); /* runtime-only installs */
        snprintf(cands[nc++], sizeof cands[0], "libnvrtc.so.12");
    }
    void *h = NULL;
    const char *loaded = cands[0];
    char err0[512] = "";
    for (int i = 0; i < nc && !h; i++) {
        if (strchr(cands[i], '/') && access(cands[i], F_OK) != 0) {
            if (only) snprintf(err0, sizeof err0, "%.400s: %s", cands[i], strerror(errno));
            continue;
        }
        h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (h) loaded = cands[i];
        if (!h && !err0[0]) {
            const char *e = dlerror();
            snprintf(err0, sizeof err0, "%.500s", e ? e : cands[i]);
        }
    }
    if (!h) {
        if (only)
            snprintf(st->why, sizeof st->why, "libnvrtc not loaded from %.400s%s%.330s", only, err0[0] ? ": " : "", err0);
        else
            snprintf(st->why, sizeof st->why,
                     "libnvrtc not found (set TOCHA_NVRTC_LIB or CUDA_HOME; looked "
                     "in %s%s/usr/local/cuda/lib64 and "
                     "the loader's path)%s%s",
                     home && *home ? home : "", home && *home ? "/lib64, " : "", err0[0] ? ": " : "", err0);
        return;
    }
    static const char *const names[] = {
        "nvrtcVersion",    "nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetProgramLogSize", "nvrtcGetProgramLog",
        "nvrtcGetPTXSize", "nvrtcGetPTX",        "nvrtcDestroyProgram", "nvrtcGetErrorString"};
    void *syms[9];
    for (int i = 0; i < 9; i++) {
        dlerror();
        syms[i] = dlsym(h, names[i]);
        if (!syms[i]) {
            snprintf(st->why, sizeof st->why, "%.400s is not libnvrtc: it lacks %s", loaded, names[i]);
            return; /* the handle stays open: harmless, and dlclose of CUDA libraries
                       is not */
        }
    }
    /* object pointers to function pointers, as POSIX allows */
    memcpy(&st->f.version, &syms[0], sizeof(void *));
    memcpy(&st->f.create, &syms[1], sizeof(void *));
    memcpy(&st->f.compile, &syms[2], sizeof(void *));
    memcpy(&st->f.log_size, &syms[3], sizeof(void *));
    memcpy(&st->f.log, &syms[4], sizeof(void *));
    memcpy(&st->f.ptx_size, &syms[5], sizeof(void *));
    memcpy(&st->f.ptx, &syms[6], sizeof(void *));
    memcpy(&st->f.destroy, &syms[7], sizeof(void *));
    memcpy(&st->f.error_string, &syms[8], sizeof(void *));
    void *cs = dlsym(h, "nvrtcGetCUBINSize"), *cb = dlsym(h, "nvrtcGetCUBIN");
    if (cs && cb) memcpy(&st->f.cubin_size, &cs, sizeof(void *)), memcpy(&st->f.cubin, &cb, sizeof(void *));
    void *na = dlsym(h, "nvrtcGetNumSupportedArchs"), *la = dlsym(h, "nvrtcGetSupportedArchs");
    if (na && la) memcpy(&st->f.num_archs, &na, sizeof(void *)), memcpy(&st->f.archs, &la, sizeof(void *));
    if (st->f.version(&st->major, &st->minor) != 0) {
        snprintf(st->why, sizeof st->why, "nvrtcVersion failed");
        return;
    }
    st->ok = true;
}

static void load_default(void) { load_into(&lib, NULL); }

int tc_nvrtc_available(char *why, size_t cap)
{
    pthread_once(&lib_once, load_default);
    if (why && cap) snprintf(why, cap, "%s", lib.ok ? "" : lib.why);
    return lib.ok;
}

int tc_nvrtc_probe(const char *path, char *why, size_t cap)
{
    libstate st;
    if (!path) return tc_nvrtc_available(why, cap);
    load_into(&st, path);
    if (why && cap) snprintf(why, cap, "%s", st.ok ? "" : st.why);
    return st.ok;
}

/* ---- the cache ----------------------------------------------------------------------- */

typedef struct entry {
    struct entry *next;
    uint64_t key;
    char *src, *arch, *image; /* image: n bytes and a NUL */
    size_t n;
} entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static entry *cache_head;
static tc_nvrtc_stats stats;
static char *cache_dir_set; /* tc_nvrtc_cache_reset's choice; NULL: the default */
static bool cache_dir_chosen;
static _Thread_local char last_log[16384];

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = '\0';
    return d;
}

/* The disk cache directory into buf; 0 when there is none. */
static int disk_dir(char *buf, size_t cap)
{
    if (cache_dir_chosen) {
        if (!cache_dir_set || !*cache_dir_set) return 0;
        snprintf(buf, cap, "%s", cache_dir_set);
        return 1;
    }
    const char *off = getenv("TOCHA_NVRTC_CACHE");
    if (off && strcmp(off, "0") == 0) return 0;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(buf, cap, "%s/tocha/nvrtc", xdg);
    else if (home && *home)
        snprintf(buf, cap, "%s/.cache/tocha/nvrtc", home);
    else
        return 0;
    return 1;
}

/* mkdir -p; failures show up when the file is written (and are only a missed
 * cache). */
static void make_dirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

#define DISK_MAGIC "tocha-nvrtc-cache 1\n"

/* The image stored for (key, src), or NULL (no file, another source, a damaged file);
 * *n its length. */
static char *disk_read(const char *path, const char *src, size_t srclen, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char head[64];
    size_t sl = 0, il = 0;
    char *img = NULL, *buf = NULL;
    if (!fgets(head, sizeof head, f) || strcmp(head, DISK_MAGIC) != 0) goto out;
    if (fscanf(f, "%zu %zu", &sl, &il) != 2 || fgetc(f) != '\n' || sl != srclen || il > ((size_t)1 << 30)) goto out;
    buf = malloc(sl + 1);
    if (!buf || fread(buf, 1, sl, f) != sl || memcmp(buf, src, sl) != 0) goto out;
    img = malloc(il + 1);
    if (img && fread(img, 1, il, f) == il && fgetc(f) == EOF)
        img[il] = '\0', *n = il;
    else
        free(img), img = NULL;
out:
    free(buf);
    fclose(f);
    return img;
}

static void disk_write(const char *dir, const char *path, const char *src, size_t srclen, const char *img, size_t n)
{
    make_dirs(dir);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    bool ok = fprintf(f, DISK_MAGIC "%zu %zu\n", srclen, n) > 0 && fwrite(src, 1, srclen, f) == srclen &&
              fwrite(img, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        stats.disk_writes++;
    else
        remove(tmp);
}

/* ---- compiling ----------------------------------------------------------------------- */

static bool is_real_arch(const char *arch) { return strncmp(arch, "sm_", 3) == 0; }

/* Compiles src for arch: PTX (compute_XY) or a cubin (sm_XY) into *img (n bytes and a
 * NUL; PTX's n is its text length). */
static tc_status compile_now(const char *src, const char *name, const char *arch, const char *what, char **img,
                             size_t *n)
{
    char archopt[64], prog_name[96];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    snprintf(prog_name, sizeof prog_name, "%s.cu", name ? name : "tocha_kernel");
    /* --fmad=false: a*b+c rounds twice, as on the CPU (no contraction there
     * either) */
    const char *opts[] = {archopt, "--fmad=false", "--std=c++17"};
    const bool cubin = is_real_arch(arch);
    const char *kind = cubin ? "cubin" : "PTX";
    nvrtc_prog p = NULL;
    int r = lib.f.create(&p, src, prog_name, 0, NULL, NULL);
    if (r != 0)
        return tc_set_error(TC_ERR_DEVICE, "nvrtc: %s: nvrtcCreateProgram failed: %s", what, lib.f.error_string(r));
    r = lib.f.compile(p, 3, opts);
    size_t size = 0;
    last_log[0] = '\0';
    if (lib.f.log_size(p, &size) == 0 && size > 1) {
        char *log = malloc(size);
        if (log && lib.f.log(p, log) == 0) snprintf(last_log, sizeof last_log, "%s", log);
        free(log);
    }
    tc_status s = TC_OK;
    size = 0;
    if (r != 0) {
        /* the log's first lines name the line and the error: the message carries
         * them */
        s = tc_set_error(TC_ERR_UNSUPPORTED, "nvrtc: compiling %s for %s failed (%s): %.360s", what, arch,
                         lib.f.error_string(r), last_log[0] ? last_log : "(no log)");
    } else if ((cubin ? lib.f.cubin_size(p, &size) : lib.f.ptx_size(p, &size)) != 0 || size < 1 ||
               !(*img = malloc(size + 1))) {
        s = tc_set_error(size < 1 ? TC_ERR_UNSUPPORTED : TC_ERR_MEMORY, "nvrtc: %s: no %s for %s (%zu bytes)", what,
                         kind, arch, size);
    } else if ((r = cubin ? lib.f.cubin(p, *img) : lib.f.ptx(p, *img)) != 0) {
        free(*img), *img = NULL;
        s = tc_set_error(TC_ERR_DEVICE, "nvrtc: %s: nvrtcGet%s failed: %s", what, cubin ? "CUBIN" : "PTX",
                         lib.f.error_string(r));
    } else {
        (*img)[size] = '\0';
        *n = cubin ? size : strlen(*img); /* nvrtcGetPTXSize counts the NUL */
    }
    lib.f.destroy(&p);
    return s;
}

tc_status tc_nvrtc_compile_image(const char *src, const char *name, const char *arch, const char *what, char **image,
                                 size_t *size)
{
    if (!image || !size) return tc_set_error(TC_ERR_ARG, "nvrtc: NULL result");
    *image = NULL, *size = 0;
    if (!what) what = name ? name : "kernel";
    if (!src || !arch || !*arch) return tc_set_error(TC_ERR_ARG, "nvrtc: %s: NULL source or architecture", what);
    if ((strncmp(arch, "compute_", 8) != 0 && !is_real_arch(arch)) || strlen(arch) > 20)
        return tc_set_error(TC_ERR_ARG, "nvrtc: %s: architecture '%s' is neither compute_XY (PTX) nor sm_XY (a cubin)",
                            what, arch);
    char why[768];
    if (!tc_nvrtc_available(why, sizeof why))
        return tc_set_error(TC_ERR_DEVICE, "nvrtc: cannot compile %s: %s", what, why);
    if (is_real_arch(arch) && !lib.f.cubin)
        return tc_set_error(TC_ERR_UNSUPPORTED, "nvrtc: %s: this libnvrtc (%d.%d) has no nvrtcGetCUBIN to make a cubin "
                            "for %s", what, lib.major, lib.minor, arch);

    size_t srclen = strlen(src);
    char ver[48];
    snprintf(ver, sizeof ver, "nvrtc %d.%d fmad=0 c++17", lib.major, lib.minor);
    uint64_t key = fnv(src, srclen + 1, 1469598103934665603ull);
    key = fnv(arch, strlen(arch) + 1, key);
    key = fnv(ver, strlen(ver), key);

    tc_status s = TC_OK;
    pthread_mutex_lock(&cache_mu);
    for (entry *e = cache_head; e; e = e->next)
        if (e->key == key && strcmp(e->arch, arch) == 0 && strcmp(e->src, src) == 0) {
            stats.mem_hits++;
            *image = dup_n(e->image, e->n), *size = e->n;
            if (!*image) s = tc_set_error(TC_ERR_MEMORY, "nvrtc: %s: out of memory copying its image", what);
            pthread_mutex_unlock(&cache_mu);
            return s;
        }
    char dir[4096], path[4200];
    int have_dir = disk_dir(dir, sizeof dir);
    char *got = NULL;
    size_t n = 0;
    if (have_dir) {
        snprintf(path, sizeof path, "%s/%016llx-%s.%s", dir, (unsigned long long)key, arch,
                 is_real_arch(arch) ? "cubin" : "ptx");
        got = disk_read(path, src, srclen, &n);
        if (got) stats.disk_hits++;
    }
    if (!got) {
        s = compile_now(src, name, arch, what, &got, &n);
        if (s == TC_OK) {
            stats.compiles++;
            if (have_dir) disk_write(dir, path, src, srclen, got, n);
        }
    }
    if (s == TC_OK) {
        entry *e = calloc(1, sizeof *e);
        if (e) e->src = dup_n(src, srclen), e->arch = dup_n(arch, strlen(arch)), e->image = dup_n(got, n), e->n = n;
        if (e && e->src && e->arch && e->image) {
            e->key = key, e->next = cache_head, cache_head = e;
        } else if (e) { /* no room to cache: the result is still good */
            free(e->src), free(e->arch), free(e->image), free(e);
        }
        *image = got, *size = n;
    }
    pthread_mutex_unlock(&cache_mu);
    return s;
}

tc_status tc_nvrtc_compile(const char *src, const char *name, const char *arch, const char *what, char **ptx)
{
    if (!ptx) return tc_set_error(TC_ERR_ARG, "nvrtc: NULL result");
    *ptx = NULL;
    if (!what) what = name ? name : "kernel";
    if (arch && strncmp(arch, "compute_", 8) != 0)
        return tc_set_error(TC_ERR_ARG, "nvrtc: %s: architecture '%s' is not compute_XY (PTX is generated)", what,
                            arch);
    size_t n;
    return tc_nvrtc_compile_image(src, name, arch, what, ptx, &n);
}

tc_status tc_cuda_kernel_ptx(const tc_cuda_kernel *k, const char *arch, char **ptx)
{
    if (ptx) *ptx = NULL;
    if (!k || !k->src) return tc_set_error(TC_ERR_ARG, "nvrtc: no generated kernel");
    return tc_nvrtc_compile(k->src, k->name, arch, k->label, ptx);
}

tc_status tc_cuda_kernel_image(const tc_cuda_kernel *k, const char *arch, char **image, size_t *size)
{
    if (image) *image = NULL;
    if (!k || !k->src) return tc_set_error(TC_ERR_ARG, "nvrtc: no generated kernel");
    return tc_nvrtc_compile_image(k->src, k->name, arch, k->label, image, size);
}

int tc_nvrtc_arch_for(int cc)
{
    char why[768];
    if (cc <= 0) return 0;
    if (!tc_nvrtc_available(why, sizeof why) || !lib.f.num_archs) return cc;
    int n = 0, list[256], best = 0;
    if (lib.f.num_archs(&n) != 0 || n < 1 || n > 256 || lib.f.archs(list) != 0) return cc;
    for (int i = 0; i < n; i++) /* ascending, as documented; not relied on */
        if (list[i] <= cc && list[i] > best) best = list[i];
    return best;
}

const char *tc_nvrtc_last_log(void) { return last_log; }

void tc_nvrtc_get_stats(tc_nvrtc_stats *st)
{
    if (!st) return;
    pthread_mutex_lock(&cache_mu);
    *st = stats;
    pthread_mutex_unlock(&cache_mu);
}

tc_status tc_nvrtc_cache_reset(const char *dir)
{
    char *d = dir ? dup_n(dir, strlen(dir)) : NULL;
    if (dir && !d) return tc_set_error(TC_ERR_MEMORY, "nvrtc: out of memory for the cache directory");
    pthread_mutex_lock(&cache_mu);
    for (entry *e = cache_head, *nx; e; e = nx) {
        nx = e->next;
        free(e->src), free(e->arch), free(e->image), free(e);
    }
    cache_head = NULL;
    free(cache_dir_set);
    cache_dir_set = d, cache_dir_chosen = dir != NULL;
    memset(&stats, 0, sizeof stats);
    pthread_mutex_unlock(&cache_mu);
    return TC_OK;
}
