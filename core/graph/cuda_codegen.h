/* cuda_codegen.h -- graph mode on the GPU, host side: one fused group (fuse.c) becomes the
 * text of one CUDA C kernel (cuda_codegen.c), compiled to PTX at run time by NVRTC with a
 * cache (nvrtc.c). Plain C: libtocha includes no CUDA header and links no CUDA library
 * (NVRTC is dlopen'ed), so all of this builds and is tested on machines without a GPU.
 *
 * NOTE: loading the PTX and launching it (cuda_launch.c, the CUDA driver API, dlopen'ed)
 * has NOT RUN ON A GPU yet; docs/cuda_fusion.md says what has and has not.
 */
#ifndef TC_GRAPH_CUDA_CODEGEN_H
#define TC_GRAPH_CUDA_CODEGEN_H

#include "graph.h"

/* How the kernel ends: no reduction, one sum/mean of every element, or one per row of the
 * last dim. */
enum { TC_CUDA_RED_NONE = 0, TC_CUDA_RED_ALL = 1, TC_CUDA_RED_ROWS = 2 };

/* Threads per block every generated kernel is written for (its block reduction assumes it). */
#define TC_CUDA_FUSED_BLOCK 256

/* A generated kernel. Its parameters, in order:
 *   ins:   nins pointers, group input k at its element 0 (grp->ins order; the layout the
 *          kernel was generated for: contiguous, or the in_strides given)
 *   outs:  nouts pointers, contiguous, grp->outs order (the reduction's result included)
 *   RED_ALL only: double *part (grid entries of scratch), unsigned int *count (zero before
 *          the first launch; the kernel leaves it zero again)
 * Launch with TC_CUDA_FUSED_BLOCK threads and tc_cuda_kernel_grid() blocks. */
typedef struct tc_cuda_kernel {
    char name[32];   /* entry point "tc_fused_<16 hex>": a hash of the text, so stable */
    char label[160]; /* "fused group 3 (mul add sigmoid sum)": for messages */
    char *src;       /* NUL-terminated CUDA C source (owned; tc_cuda_kernel_free) */
    size_t len;
    int32_t nins, nouts;
    int32_t reduce; /* TC_CUDA_RED_* */
    int64_t n;      /* elements of the iteration space */
    int64_t rows;   /* RED_ROWS: rows (the reduced output's elements); else 1 */
} tc_cuda_kernel;

/* Generates the kernel of g->groups[group] into *out (zeroed first; free with
 * tc_cuda_kernel_free). in_strides: NULL, or per group input either NULL (contiguous at
 * the value's sizes) or its element strides at the value's sizes (a view bound at run
 * time). The same group and layouts always give the same text. Fails with a message
 * naming the group and the member when a member cannot be generated (an op without an
 * elementwise formula, a dtype mix it does not handle, a reduction over another dim):
 * the caller then runs the group another way. */
tc_status tc_cuda_codegen(const tc_graph *g, int32_t group, const int64_t *const *in_strides, tc_cuda_kernel *out);
void tc_cuda_kernel_free(tc_cuda_kernel *k);
/* Blocks to launch k with on a device of sms multiprocessors. */
int64_t tc_cuda_kernel_grid(const tc_cuda_kernel *k, int sms);

/* ---- NVRTC (nvrtc.c) ----------------------------------------------------------------- */

/* 1 when libnvrtc can be loaded; else 0 with the reason in why. Looked for in
 * $TOCHA_NVRTC_LIB, $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader's path. */
int tc_nvrtc_available(char *why, size_t cap);
/* The same answer for the library at path only (NULL: as tc_nvrtc_available), without
 * touching what the process loaded. For tests and diagnostics. */
int tc_nvrtc_probe(const char *path, char *why, size_t cap);
/* Compiles src (entry `name`) to PTX for arch ("compute_90"); *ptx receives a malloc'd
 * NUL-terminated copy the caller frees. Cached by a hash of source, arch and NVRTC
 * version: in memory, and on disk under $XDG_CACHE_HOME/tocha/nvrtc (else
 * ~/.cache/tocha/nvrtc; TOCHA_NVRTC_CACHE=0 turns the disk off). what names the source
 * in messages (a kernel's label); a failed compile's message carries NVRTC's log. */
tc_status tc_nvrtc_compile(const char *src, const char *name, const char *arch, const char *what, char **ptx);
/* The same for arch "compute_XY" (PTX) or "sm_XY" (a cubin: machine code the driver loads
 * without compiling it): *image receives size bytes and a NUL (PTX: size is its length).
 * A cubin needs nvrtcGetCUBIN (NVRTC 11.1 on): without it, TC_ERR_UNSUPPORTED. */
tc_status tc_nvrtc_compile_image(const char *src, const char *name, const char *arch, const char *what, char **image,
                                 size_t *size);
/* tc_nvrtc_compile / tc_nvrtc_compile_image of a generated kernel. */
tc_status tc_cuda_kernel_ptx(const tc_cuda_kernel *k, const char *arch, char **ptx);
tc_status tc_cuda_kernel_image(const tc_cuda_kernel *k, const char *arch, char **image, size_t *size);
/* The architecture (major * 10 + minor) to compile for on a GPU of compute capability cc:
 * cc itself when NVRTC knows it (or cannot list what it knows), else the newest it knows
 * below cc -- PTX for that runs on the newer GPU, compiled by the driver -- or 0 when it
 * knows none at or below cc (NVRTC 13 has dropped Volta, for example). */
int tc_nvrtc_arch_for(int cc);
/* NVRTC's whole log of this thread's last compile ("" when it printed nothing). */
const char *tc_nvrtc_last_log(void);

typedef struct tc_nvrtc_stats {
    int64_t compiles, mem_hits, disk_hits, disk_writes;
} tc_nvrtc_stats;
void tc_nvrtc_get_stats(tc_nvrtc_stats *st);
/* Empties the in-memory cache and zeroes the stats. dir: the disk cache directory from
 * now on (NULL: the default above, "": no disk cache). For tests. */
tc_status tc_nvrtc_cache_reset(const char *dir);

/* ---- launching (cuda_launch.c) -- NOT YET RUN ON A GPU ------------------------------- */

/* Compiles k for dev's architecture (cached), loads it once per device and launches it on
 * the calling thread's current stream (asynchronous): ins[k->nins], outs[k->nouts] are device pointers laid
 * out as the kernel was generated for. Fails with the reason when there is no driver. */
tc_status tc_cuda_fused_launch(int dev, const tc_cuda_kernel *k, void *const *ins, void *const *outs);
/* 1 when the CUDA driver (libcuda) loads and initialises; else 0 with the reason in why. */
int tc_cuda_launch_available(char *why, size_t cap);

#endif /* TC_GRAPH_CUDA_CODEGEN_H */
