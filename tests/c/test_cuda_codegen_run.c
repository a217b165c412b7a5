/* test_cuda_codegen_run.c -- generated fused-group kernels run: on the host (built with the
 * host c++ and run block by block against eager mode) and launched through
 * core/graph/cuda_launch.c (cuda_codegen_gpu_*) on a GPU, or over the CUDA emulator's NVRTC
 * and driver (tests/emu/emu_driver.cc; tests/run.sh's emulator pass). Never run on a GPU.
 * The text and NVRTC tests are in test_cuda_codegen.c. */
#include "cuda_codegen_test_util.h"
#include <dirent.h>

/* ---- running a generated kernel on the host -------------------------------------------
 * No GPU here, but a kernel without a block reduction or half conversions (whose helpers
 * are PTX asm) is plain C++ once __global__ and the thread indices are defined: compiled
 * with the host's c++ and run block by block, thread by thread, it must give what eager
 * mode gives. This checks the index math, the formula expansion, parameters, where and
 * conversions numerically, not just as text. Skipped when no c++ is on the PATH. */

static const char emu_shim[] = "#include <cmath>\n#include <cstring>\nusing namespace std;\n"
                               "struct tc_dim3 { unsigned int x, y, z; };\n"
                               "static tc_dim3 blockIdx, blockDim, gridDim, threadIdx;\n"
                               "#define __global__\n#define __device__\n#define __forceinline__ "
                               "inline\n#define __launch_bounds__(n)\n"
                               "static inline double __longlong_as_double(long long b) { double d; "
                               "memcpy(&d, &b, 8); return d; }\n";

/* Builds k into a shared object under dir with a driver tc_emulate(args, grid)
 * that runs every (block, thread) in turn; returns its dlopen handle or NULL.
 */
static void *emu_build(const tc_cuda_kernel *k, const char *dir)
{
    const char *open = strstr(k->src, k->name);
    open = open ? strchr(open, '(') : NULL;
    const char *close = open ? strchr(open, ')') : NULL;
    if (!close) return NULL;
    char params[2048], call[4096] = "";
    snprintf(params, sizeof params, "%.*s", (int)(close - open - 1), open + 1);
    int argi = 0;
    for (char *save = NULL, *p = strtok_r(params, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *star = strrchr(p, '*');
        if (!star) return NULL;
        size_t at = strlen(call);
        snprintf(call + at, sizeof call - at, "%s(%.*s)a[%d]", argi ? ", " : "", (int)(star - p + 1), p, argi);
        argi++;
    }
    char path[256], so[256], cmd[1024];
    snprintf(path, sizeof path, "%s/%s.cpp", dir, k->name);
    snprintf(so, sizeof so, "%s/%s.so", dir, k->name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "%s\n%s\n", emu_shim, k->src);
    fprintf(f,
            "extern \"C\" void tc_emulate(void **a, unsigned int grid)\n{\n"
            "    gridDim.x = grid, blockDim.x = %d;\n"
            "    for (blockIdx.x = 0; blockIdx.x < grid; blockIdx.x++)\n"
            "        for (threadIdx.x = 0; threadIdx.x < blockDim.x; "
            "threadIdx.x++) %s(%s);\n}\n",
            TC_CUDA_FUSED_BLOCK, k->name, call);
    fclose(f);
    snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1 -ffp-contract=off -fPIC -shared -w -o %s %s", so, path);
    if (system(cmd) != 0) {
        printf("    host c++ could not build:\n%s\n", k->src);
        return NULL;
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) printf("    dlopen: %s\n", dlerror());
    return h;
}

/* Runs group 0 of g on the host with the kernel made for layouts in_strides,
 * reading each group input from ins_data[k] (laid out accordingly), and
 * compares every group output with eager's (interp) within tol (relative; exact
 * for integer results). */
static int emu_matches_eager(tc_graph *g, const int64_t *const *in_strides, tc_tensor *const *inputs,
                             const void *const *ins_data, double tol, const char *dir)
{
    tc_cuda_kernel k;
    if (tc_cuda_codegen(g, 0, in_strides, &k) != TC_OK) {
        printf("    codegen: %s\n", tc_last_error());
        return 0;
    }
    const tc_ggroup *grp = &g->groups[0];
    tc_tensor *ref[8] = {0}, *got[8] = {0};
    int ok = g->noutputs <= 8 && grp->nouts <= 8 && interp(g, inputs, ref) == TC_OK;
    void *h = ok ? emu_build(&k, dir) : NULL;
    void *sym = h ? dlsym(h, "tc_emulate") : NULL;
    ok = ok && sym;
    void *args[64];
    for (int i = 0; ok && i < grp->nins; i++) args[i] = (void *)ins_data[i];
    for (int o = 0; ok && o < grp->nouts; o++) {
        const tc_gval *v = &g->vals[grp->outs[o]];
        ok = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &got[o]) == TC_OK;
        if (ok) args[grp->nins + o] = tc_tensor_data(got[o]);
    }
    if (ok) {
        void (*run)(void **, unsigned int);
        memcpy(&run, &sym, sizeof run);
        run(args, (unsigned int)tc_cuda_kernel_grid(&k, 1)); /* 16 blocks: the grid-stride loop turns */
    }
    for (int o = 0; ok && o < grp->nouts; o++) {
        int gi = -1;
        for (int i = 0; i < g->noutputs; i++)
            if (g->outputs[i] == grp->outs[o]) gi = i;
        if (gi < 0) continue;
        bool exact = !tc_dtype_is_float((tc_dtype)got[o]->dtype);
        for (int64_t e = 0; e < tc_tensor_numel(got[o]) && ok; e++) {
            double a = ct_at(got[o], e), b = ct_at(ref[gi], e);
            if (exact ? a != b : !ct_near(a, b, tol))
                ok = 0, printf("    output %d element %lld: kernel %.17g, eager %.17g\n", o, (long long)e, a, b);
        }
    }
    for (int i = 0; i < 8; i++) tc_tensor_release(ref[i]), tc_tensor_release(got[i]);
    tc_cuda_kernel_free(&k);
    return ok;
}

static int have_cxx(void)
{
    int ok = system("command -v c++ > /dev/null 2>&1") == 0;
    if (!ok) printf("  SKIP host run: no c++ compiler\n");
    return ok;
}

static tc_tensor *ramp(tc_dtype dt, int nd, const int64_t *sz, double scale, double shift)
{
    tc_tensor *t = ct_arange(dt, nd, sz);
    if (!t) return NULL;
    int64_t n = tc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = sin((double)i * 0.37) * scale + shift; /* varied, signs mixed */
        if (dt == TC_F32)
            ((float *)tc_tensor_data(t))[i] = (float)v;
        else
            ((double *)tc_tensor_data(t))[i] = v;
    }
    return t;
}

/* A tensor of dtype dt with ramp's values (converted as the CPU's copy converts). */
static tc_tensor *ramp_as(tc_dtype dt, int nd, const int64_t *sz, double scale, double shift)
{
    tc_tensor *d = ramp(TC_F64, nd, sz, scale, shift), *t = NULL;
    const tc_tensor *src = d;
    if (d && tc_tensor_new(dt, nd, sz, &t) == TC_OK && tc_op_exec(TC_OP_COPY, &src, 1, P(.i = {-1}), &t, 1) != TC_OK)
        tc_tensor_release(t), t = NULL;
    tc_tensor_release(d);
    return t;
}

TEST(cuda_codegen_host_run_matches_eager)
{
    if (!have_cxx()) return;
    char dir[] = "/tmp/tocha_emu_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    /* broadcast, a permuted input, parameters, a comparison, where and
     * conversions; (64,33,40) elements: more than 16 blocks of 256 threads cover,
     * so the loop strides */
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    const int64_t *S = SZ(64, 33, 40);
    int32_t x = input(g, TC_F32, 3, S), y = input(g, TC_F32, 3, SZ(64, 1, 40)), z = input(g, TC_F32, 1, SZ(40));
    int32_t v = op2(g, TC_OP_ADD, x, y, P(.s = {0.75}));
    v = op1(g, TC_OP_CLAMP, v, P(.s = {-1.25, 1.5}));
    int32_t m = op2(g, TC_OP_LT, v, z, P(.s = {0}));
    int32_t w = op3(g, TC_OP_WHERE, m, v, z, P(.s = {0}));
    int32_t s = op1(g, TC_OP_SIGMOID, w, P(.s = {0}));
    int32_t q = op2(g, TC_OP_MUL, s, x, P(.s = {0}));
    int32_t d = op1(g, TC_OP_COPY, q, P(.i = {TC_F64}));
    int32_t u = op1(g, TC_OP_COPY, op2(g, TC_OP_MUL, w, scalar_const(g, TC_F32, 100), P(.s = {0})), P(.i = {TC_U8}));
    CHECK(u >= 0);
    CHECK_OK(tc_graph_mark_output(g, m));
    CHECK_OK(tc_graph_mark_output(g, d));
    CHECK_OK(tc_graph_mark_output(g, u));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1 && g->groups[0].nnodes == 9);
    tc_tensor *xt = ramp(TC_F32, 3, S, 2, 0), *yt = ramp(TC_F32, 3, SZ(64, 1, 40), 1, 0.1),
              *zt = ramp(TC_F32, 1, SZ(40), 1, -0.2);
    tc_tensor *ins[3] = {xt, yt, zt};
    /* group inputs in the group's order: x, y, z, then the constant 100 */
    const tc_ggroup *grp = &g->groups[0];
    CHECK(grp->nins == 4 && grp->ins[0] == x && grp->ins[1] == y && grp->ins[2] == z);
    const void *data[4] = {tc_tensor_data(xt), tc_tensor_data(yt), tc_tensor_data(zt),
                           tc_tensor_data(g->vals[grp->ins[3]].t)};
    CHECK(emu_matches_eager(g, NULL, ins, data, 1e-6, dir));

    /* x read through a permuted layout: the same values stored as (64,40,33) */
    tc_tensor *xv = ct_transposed(xt, 1, 2), *xp = NULL;
    CHECK(xv && tc_tensor_new(TC_F32, 3, SZ(64, 40, 33), &xp) == TC_OK);
    const tc_tensor *src = xv;
    CHECK_OK(tc_op_exec(TC_OP_COPY, &src, 1, P(.i = {-1}), &xp, 1));
    const int64_t xs[3] = {40 * 33, 1, 33}, *strides[4] = {xs, NULL, NULL, NULL};
    data[0] = tc_tensor_data(xp);
    CHECK(emu_matches_eager(g, strides, ins, data, 1e-6, dir));
    tc_tensor_release(xv), tc_tensor_release(xp);
    tc_tensor_release(xt), tc_tensor_release(yt), tc_tensor_release(zt);
    tc_graph_free(g);

    /* float64, three-input ops, a leading broadcast: exact but for exp */
    CHECK_OK(tc_graph_new(&g));
    int32_t a = input(g, TC_F64, 2, SZ(300, 7)), b = input(g, TC_F64, 2, SZ(300, 1)), c = input(g, TC_F64, 1, SZ(7));
    int32_t e = op3(g, TC_OP_ADDCMUL, a, b, c, P(.s = {-0.5}));
    e = op3(g, TC_OP_LERP, e, a, c, P(.s = {0}));
    e = op2(g, TC_OP_MAXIMUM, e, b, P(.s = {0}));
    e = op1(g, TC_OP_EXP, e, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_pass_fuse(g));
    CHECK(g->ngroups == 1);
    tc_tensor *at = ramp(TC_F64, 2, SZ(300, 7), 1, 0), *bt = ramp(TC_F64, 2, SZ(300, 1), 1, 0.5),
              *ctt = ramp(TC_F64, 1, SZ(7), 0.5, 0.25);
    tc_tensor *ins2[3] = {at, bt, ctt};
    const void *data2[3] = {tc_tensor_data(at), tc_tensor_data(bt), tc_tensor_data(ctt)};
    CHECK(g->groups[0].nins == 3 && g->groups[0].ins[0] == a && g->groups[0].ins[1] == b);
    CHECK(emu_matches_eager(g, NULL, ins2, data2, 1e-15, dir));
    tc_tensor_release(at), tc_tensor_release(bt), tc_tensor_release(ctt);
    tc_graph_free(g);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* ---- launching (core/graph/cuda_launch.c) ---------------------------------------------
 * NOTE: never run on a GPU (written on machines without one); run over the CUDA emulator.
 * Without a driver it checks the failure message; with one it runs kernels against eager. */

#include "cuda/cuda_api.h"

static int v_dtype(const tc_graph *g, int32_t v) { return g->vals[v].dtype; }

/* Runs group 0 of g on device 0 through tc_cuda_fused_launch (twice: the second
 * run must give the same bits, which also checks RED_ALL's counter is left at
 * zero) and compares each graph output the group makes with eager's within tol.
 */
static int gpu_matches_eager(tc_graph *g, tc_tensor *const *inputs, double tol)
{
    const tc_cuda_api *api = NULL;
    if (tc_cuda_api_get(&api) != TC_OK) return 0;
    tc_cuda_kernel k;
    if (tc_cuda_codegen(g, 0, NULL, &k) != TC_OK) return printf("    %s\n", tc_last_error()), 0;
    const tc_ggroup *grp = &g->groups[0];
    tc_tensor *ref[32] = {0}, *got[2][32] = {{0}};
    void *din[32] = {0}, *dout[32] = {0};
    int ok = g->noutputs <= 32 && grp->nouts <= 32 && interp(g, inputs, ref) == TC_OK;
    for (int i = 0; ok && i < grp->nins; i++) {
        const tc_gval *v = &g->vals[grp->ins[i]];
        const tc_tensor *t = v->kind == TC_GV_INPUT ? inputs[v->arg] : v->t;
        size_t nb = (size_t)tc_graph_val_bytes(g, grp->ins[i]);
        ok = tc_tensor_is_contiguous(t) && api->alloc(0, nb, &din[i]) == TC_OK &&
             api->copy_h2d(0, din[i], tc_tensor_data(t), nb) == TC_OK;
    }
    for (int o = 0; ok && o < grp->nouts; o++)
        ok = api->alloc(0, (size_t)tc_graph_val_bytes(g, grp->outs[o]), &dout[o]) == TC_OK;
    for (int run = 0; ok && run < 2; run++) {
        if (tc_cuda_fused_launch(0, &k, din, dout) != TC_OK || api->synchronize(0) != TC_OK) {
            printf("    run %d: %s / %s\n", run, tc_last_error(), api->last_error());
            ok = 0;
        }
        for (int o = 0; ok && o < grp->nouts; o++) {
            const tc_gval *v = &g->vals[grp->outs[o]];
            ok = tc_tensor_new((tc_dtype)v->dtype, v->ndim, v->size, &got[run][o]) == TC_OK &&
                 api->copy_d2h(0, tc_tensor_data(got[run][o]), dout[o], (size_t)tc_graph_val_bytes(g, grp->outs[o])) ==
                     TC_OK;
        }
    }
    for (int o = 0; ok && o < grp->nouts; o++) {
        size_t nb = (size_t)tc_graph_val_bytes(g, grp->outs[o]);
        if (memcmp(tc_tensor_data(got[0][o]), tc_tensor_data(got[1][o]), nb) != 0) ok = 0, printf("    runs differ\n");
        int gi = -1;
        for (int i = 0; i < g->noutputs; i++)
            if (g->outputs[i] == grp->outs[o]) gi = i;
        bool exact = !tc_dtype_is_float((tc_dtype)v_dtype(g, grp->outs[o]));
        for (int64_t e = 0; gi >= 0 && ok && e < tc_tensor_numel(got[0][o]); e++) {
            double a = ct_at(got[0][o], e), b = ct_at(ref[gi], e);
            if (exact ? a != b : !ct_near(a, b, tol))
                ok = 0, printf("    output %d (%s) element %lld: gpu %.17g, eager %.17g\n", o,
                               tc_graph_op_name(g->nodes[g->vals[grp->outs[o]].producer].op), (long long)e, a, b);
        }
    }
    for (int i = 0; i < 32; i++) api->release(0, din[i]), api->release(0, dout[i]);
    for (int i = 0; i < 32; i++) tc_tensor_release(ref[i]), tc_tensor_release(got[0][i]), tc_tensor_release(got[1][i]);
    tc_cuda_kernel_free(&k);
    return ok;
}

/* 1 when generated kernels can launch on device 0 of a real backend (a GPU, or the CUDA
 * emulator with its NVRTC and driver); else prints why the test skips. */
static int launch_ready(void)
{
    char why[1024] = "", name[256] = "";
    const tc_cuda_api *api = NULL;
    if (!tc_cuda_launch_available(why, sizeof why) || !tc_nvrtc_available(why, sizeof why) ||
        !tc_cuda_available(why, sizeof why) || tc_cuda_api_get(&api) != TC_OK ||
        api->device_name(0, name, sizeof name) != TC_OK || strstr(name, "mock")) {
        /* the mock backend's "device memory" is host memory, which a launched kernel must
         * never be handed */
        printf("  SKIP gpu launch: %s\n", why[0] ? why : name);
        return 0;
    }
    return 1;
}

TEST(cuda_codegen_gpu_launch)
{
    /* the driver cuda_launch.c loads: tests/run.sh points it at the CUDA emulator's */
    const char *drv_lib = getenv("TOCHA_CUDA_DRIVER_LIB");
    void *drv = dlopen(drv_lib && *drv_lib ? drv_lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        /* no driver at all: the launch says so, naming the kernel */
        tc_graph *g = ewchain_graph(256);
        tc_cuda_kernel k;
        CHECK(g && tc_cuda_codegen(g, 0, NULL, &k) == TC_OK);
        void *ptrs[8] = {0};
        CHECK_ERR(tc_cuda_fused_launch(0, &k, ptrs, ptrs), TC_ERR_DEVICE,
                  "cuda launch: fused group 0 (mul add abs sqrt mul sub tanh exp): "
                  "no CUDA driver");
        CHECK_ERR(tc_cuda_fused_launch(0, NULL, ptrs, ptrs), TC_ERR_ARG, "no generated kernel");
        tc_cuda_kernel_free(&k);
        tc_graph_free(g);
        return;
    }
    if (!launch_ready()) return;
    int64_t n = 1 << 20;
    tc_graph *g = ewchain_graph(n);
    tc_tensor *x = ramp(TC_F32, 1, &n, 1, 1.1);
    CHECK(g && gpu_matches_eager(g, &x, 1e-5));
    tc_tensor_release(x);
    tc_graph_free(g);

    CHECK_OK(tc_graph_new(&g)); /* sum of everything */
    int32_t xi = input(g, TC_F32, 2, SZ(1000, 37)), yi = input(g, TC_F32, 1, SZ(37));
    int32_t v = op2(g, TC_OP_MUL, op1(g, TC_OP_SQUARE, xi, P(.s = {0})), yi, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_SUM, v, P(.i = {-1, 0}))));
    CHECK_OK(tc_pass_fuse(g));
    tc_tensor *xs = ramp(TC_F32, 2, SZ(1000, 37), 1, 0), *ys = ramp(TC_F32, 1, SZ(37), 1, 0), *in2[2] = {xs, ys};
    CHECK(g->ngroups == 1 && gpu_matches_eager(g, in2, 1e-6));
    tc_tensor_release(xs), tc_tensor_release(ys);
    tc_graph_free(g);

    CHECK_OK(tc_graph_new(&g)); /* row means, with an elementwise output */
    xi = input(g, TC_F64, 2, SZ(64, 1000));
    int32_t e = op1(g, TC_OP_EXP, xi, P(.s = {0}));
    CHECK_OK(tc_graph_mark_output(g, op1(g, TC_OP_MEAN, e, P(.i = {1, 0}))));
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_pass_fuse(g));
    xs = ramp(TC_F64, 2, SZ(64, 1000), 1, 0);
    CHECK(g->ngroups == 1 && gpu_matches_eager(g, &xs, 1e-13));
    tc_tensor_release(xs);
    tc_graph_free(g);

    /* half types (made by hand: fuse.c groups f32/f64 only): a float16 sum of everything
     * (the partials of many blocks), bfloat16 row means with an elementwise output; both
     * sides add in wide types and round once */
    static const tc_dtype halves[2] = {TC_F16, TC_BF16};
    for (int h = 0; h < 2; h++) {
        CHECK_OK(tc_graph_new(&g));
        xi = input(g, halves[h], 2, SZ(200, 300));
        int32_t mv[3];
        mv[0] = op1(g, TC_OP_TANH, xi, P(.s = {0}));
        mv[1] = op2(g, TC_OP_MUL, mv[0], xi, P(.s = {0}));
        mv[2] = op1(g, h ? TC_OP_MEAN : TC_OP_SUM, mv[1], P(.i = {h ? 1 : -1, 0}));
        CHECK_OK(tc_graph_mark_output(g, mv[2]));
        CHECK_OK(tc_graph_mark_output(g, mv[1]));
        CHECK(hand_group(g, mv, 3, &mv[1], 1) == 0);
        xs = ramp_as(halves[h], 2, SZ(200, 300), 1, 0);
        CHECK(gpu_matches_eager(g, &xs, h ? 1e-2 : 2e-3));
        tc_tensor_release(xs);
        tc_graph_free(g);
    }
}


/* cuda_launch.c loads a cubin for the device's architecture, PTX when NVRTC cannot make
 * the cubin, and PTX for an older architecture when NVRTC does not know the GPU's: over the
 * emulator, whose NVRTC refuses real architectures with TOCHA_CUDA_EMU_NVRTC_PTX_ONLY=1 and
 * those above TOCHA_CUDA_EMU_NVRTC_NEWEST, the kernel still runs each time, and the disk
 * cache shows which image was made. */
TEST(cuda_codegen_gpu_ptx_fallback)
{
    const char *lib = getenv("TOCHA_NVRTC_LIB");
    if (!lib || !strstr(lib, "emu")) {
        printf("  SKIP: needs the CUDA emulator's NVRTC (TOCHA_CUDA_EMU_NVRTC_PTX_ONLY)\n");
        return;
    }
    if (!launch_ready()) return;
    tc_cuda_device_props pr;
    CHECK_OK(tc_cuda_device_properties(0, &pr));
    int cc = pr.major * 10 + pr.minor, older = tc_nvrtc_arch_for(cc - 1);
    CHECK(tc_nvrtc_arch_for(cc) == cc);
    char dir[] = "/tmp/tocha_ptx_fallback_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    /* {PTX only, newest architecture NVRTC knows (0: all)} -> the image expected */
    struct {
        int ptx_only, newest;
        char file[32];
    } modes[3] = {{0, 0, ""}, {1, 0, ""}, {0, older, ""}};
    snprintf(modes[0].file, sizeof modes[0].file, "-sm_%d.cubin", cc);
    snprintf(modes[1].file, sizeof modes[1].file, "-compute_%d.ptx", cc);
    snprintf(modes[2].file, sizeof modes[2].file, "-compute_%d.ptx", older);
    for (int m = 0; m < 3; m++) {
        if (m == 2 && older == 0) {
            printf("  (no architecture below the device's sm_%d to pose as an older NVRTC)\n", cc);
            break;
        }
        char newest[16];
        snprintf(newest, sizeof newest, "%d", modes[m].newest);
        setenv("TOCHA_CUDA_EMU_NVRTC_PTX_ONLY", modes[m].ptx_only ? "1" : "0", 1);
        if (modes[m].newest) setenv("TOCHA_CUDA_EMU_NVRTC_NEWEST", newest, 1);
        if (m == 2) CHECK(tc_nvrtc_arch_for(cc) == older && tc_nvrtc_arch_for(cc - 1) == older);
        CHECK_OK(tc_nvrtc_cache_reset(dir));
        int64_t n = 1000 + m; /* a kernel not loaded yet (its sizes are in its text) */
        tc_graph *g = ewchain_graph(n);
        tc_tensor *x = ramp(TC_F32, 1, &n, 1, 1.1);
        CHECK(g && gpu_matches_eager(g, &x, 1e-5));
        tc_tensor_release(x);
        tc_graph_free(g);
        DIR *d = opendir(dir);
        int found = 0, images = 0;
        for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
            bool image = strstr(e->d_name, ".cubin") || strstr(e->d_name, ".ptx");
            images += image, found += image && strstr(e->d_name, modes[m].file) != NULL;
        }
        if (d) closedir(d);
        CHECK(found == 1 && images == m + 1); /* one new image each time, the kind expected */
        if (found != 1 || images != m + 1) printf("    mode %d: %d image(s), %d named *%s\n", m, images, found, modes[m].file);
        unsetenv("TOCHA_CUDA_EMU_NVRTC_NEWEST");
    }
    unsetenv("TOCHA_CUDA_EMU_NVRTC_PTX_ONLY");
    CHECK_OK(tc_nvrtc_cache_reset(""));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* Every elementwise formula of ops.def launched as generated kernels, against eager: the
 * float ones on f32, f64, f16 and bf16 (halves load through the PTX conversions), the
 * integer ones without a scalar_math.h helper on int32. Each op is a member reading the
 * group's three inputs -- (33,40), (40) and (33,1): broadcast both ways -- and every member
 * is an output, up to 30 per kernel. Eager rounds a half result once, as the kernel does,
 * so the tolerances cover only the math libraries' ulps (CUDA's, or the host's under the
 * emulator, against the CPU kernels'). */
TEST(cuda_codegen_gpu_every_formula)
{
    if (!launch_ready()) return;
    static const struct {
        tc_dtype dt;
        double tol;
    } cases[] = {{TC_F32, 1e-5}, {TC_F64, 1e-12}, {TC_F16, 2e-3}, {TC_BF16, 1e-2}, {TC_I32, 0}};
    int kernels = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        tc_dtype dt = cases[ci].dt;
        bool flt = dt != TC_I32;
        int32_t ops[TC_OP_COUNT];
        int nops = generated_formula_ops(flt, ops);
        CHECK(nops > (flt ? 45 : 20));
        tc_tensor *t0 = ramp_as(dt, 2, SZ(33, 40), flt ? 2 : 20, flt ? 0.1 : 0.5),
                  *t1 = ramp_as(dt, 1, SZ(40), flt ? 0.5 : 7, flt ? 1.0 : 9.5), *t2 = ramp_as(dt, 2, SZ(33, 1), 1, 0.25);
        CHECK(t0 && t1 && t2);
        for (int start = 0; t0 && t1 && t2 && start < nops; start += 30) {
            tc_graph *g;
            CHECK_OK(tc_graph_new(&g));
            int32_t in[3] = {input(g, dt, 2, SZ(33, 40)), input(g, dt, 1, SZ(40)), input(g, dt, 2, SZ(33, 1))};
            int32_t mv[32];
            int n = 0;
            for (int i = start; i < nops && i < start + 30; i++) {
                const tc_opinfo *info = tc_op_info((tc_op)ops[i]);
                int32_t out[2] = {-1, -1};
                if (tc_graph_add_op(g, (tc_op)ops[i], in, info->nin, P(.s = {0.5, 2}), out) == TC_OK &&
                    tc_graph_mark_output(g, out[0]) == TC_OK)
                    mv[n++] = out[0];
                else {
                    printf("    %s: %s\n", info->name, tc_last_error());
                    CHECK(0);
                }
            }
            CHECK(n > 0 && hand_group(g, mv, n, mv, n - 1) == 0);
            tc_tensor *ins[3] = {t0, t1, t2}; /* by argument number */
            if (n > 0) {
                printf("  %s: ops %d..%d\n", tc_dtype_name(dt), start, start + n - 1);
                CHECK(gpu_matches_eager(g, ins, cases[ci].tol));
                kernels++;
            }
            tc_graph_free(g);
        }
        tc_tensor_release(t0), tc_tensor_release(t1), tc_tensor_release(t2);
    }
    CHECK(kernels >= 9);
}
