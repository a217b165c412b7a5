/* test_cuda_dtypes.c -- every golden call in every dtype, the device against the CPU.
 *
 * ops.golden holds PyTorch's values in float32 and float64. The elementwise ops and the
 * reductions are checked on the device in every dtype elsewhere (test_conformance.c's
 * sweeps); the other kernels (indexing, sort, scans, cat, where, pooling, convolution,
 * products, norms, losses, optimizer steps, ...) dispatch on the dtype too, each branch
 * its own instantiation. Here each golden call runs again with its floating inputs (and the
 * result slot it gives) converted to each other dtype, on the CPU and on cuda:0:
 *   - where the CPU refuses the call, the device must refuse it too;
 *   - else the device must give results of the CPU's dtype and shape, and its values:
 *     integers and bools exactly, floats within a few units in the last place (both sides
 *     compute halves in float32 and round; sums may run in another order).
 * Tests named cuda_dev_* skip without a device; tests/run.sh runs them over the mock and
 * the emulator (the real kernels), a GPU machine over the GPU.
 */
#include "ctest.h"
#include "conformance.h"
#include "cuda_test_util.h"
#include "internal.h"
#include "layouts.h"
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)

static const int sweep_dtypes[] = {TC_F64, TC_F32, TC_F16, TC_BF16, TC_I64, TC_I32, TC_I16, TC_I8, TC_U8, TC_BOOL};
enum { NSWEEP = sizeof sweep_dtypes / sizeof sweep_dtypes[0] };

typedef struct sweep {
    int layout; /* of the inputs, on both sides (layouts.h) */
    int calls, refused, bad;
    int per_dtype[NSWEEP];
} sweep;

/* Relative (absolute below 1) distance allowed between the device's value and the CPU's. */
static double dtype_tolerance(int dt)
{
    switch (dt) {
    case TC_F64: return 1e-12;
    case TC_F32: return 2e-5;
    case TC_F16: return 2e-3; /* two units in the last place */
    case TC_BF16: return 1.6e-2;
    default: return 0;
    }
}

static bool is_float(int dt) { return tc_dtype_is_float((tc_dtype)dt); }

/* t on device in dtype dt when t is floating (else t's dtype), stored in layout
 * (layouts.h); NULL when t is. */
static tc_tensor *converted(const tc_tensor *t, int device, int dt, int layout)
{
    tc_tensor *h = NULL, *r = NULL;
    if (!t) return NULL;
    if (tc_tensor_to(t, TC_CPU, is_float(t->dtype) ? dt : -1, &h) != TC_OK) printf("  convert: %s\n", tc_last_error());
    if (h) r = layout_staged(h, device, layout);
    tc_tensor_release(h);
    return r;
}

/* A fresh tensor on device shaped as given, of dtype dt when given is floating. */
static tc_tensor *fresh_like(const tc_tensor *given, int device, int dt)
{
    tc_tensor *r = NULL;
    if (given && tc_tensor_new_on(device, (tc_dtype)(is_float(given->dtype) ? dt : given->dtype), given->ndim,
                                  given->size, &r) != TC_OK)
        printf("  result: %s\n", tc_last_error());
    return r;
}

/* The call on device with its floating tensors in dtype dt, its inputs stored in layout:
 * the status, results in out[]. */
static tc_status run_in(const golden_call *c, int device, int dt, int layout, tc_tensor **out)
{
    tc_tensor *in[12] = {0};
    for (int i = 0; i < c->nin; i++) in[i] = converted(c->in[i], device, dt, layout);
    out[0] = fresh_like(c->given, device, dt), out[1] = NULL;
    tc_status s = tc_op_run((tc_op)c->op, (const tc_tensor *const *)in, c->nin, c->p, out, c->nout);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    for (int i = 0; i < c->nin; i++) tc_tensor_release(in[i]);
    if (s != TC_OK) tc_set_error(s, "%s", msg);
    return s;
}

/* Whether the device's result d (on the device) equals the CPU's h. */
static bool agrees(const tc_tensor *d, const tc_tensor *h, const char **why)
{
    *why = "";
    if (!d && !h) return true;
    tc_tensor *back = NULL;
    if (!d || !h || tc_tensor_to(d, TC_CPU, -1, &back) != TC_OK) return *why = "a result is missing", false;
    bool ok = back->dtype == h->dtype && tc_same_shape(back, h);
    if (!ok) *why = "dtype or shape differs";
    double tol = dtype_tolerance(h->dtype);
    for (int64_t i = 0; ok && i < tc_tensor_numel(h); i++)
        if (!ct_near(ct_at(back, i), ct_at(h, i), tol)) {
            printf("    element %lld: device %.9g, cpu %.9g\n", (long long)i, ct_at(back, i), ct_at(h, i));
            ok = false, *why = "values differ";
        }
    tc_tensor_release(back);
    return ok;
}

static void sweep_call(void *ctx, const golden_call *c)
{
    sweep *sw = ctx;
    int from = -1; /* the case's floating dtype: its golden run covers it */
    for (int i = 0; i < c->nin && from < 0; i++)
        if (c->in[i] && is_float(c->in[i]->dtype)) from = c->in[i]->dtype;
    /* nothing floating to convert; or rnn_backward, whose reserve input is the forward's
     * by contract (the device recomputes it from x and the weights, the CPU reads it): a
     * converted reserve is no forward's, and the two differ in its rounding */
    if (from < 0 || c->op == TC_OP_RNN_BACKWARD) return;
    const char *name = tc_op_info((tc_op)c->op)->name;
    /* as_strided over the reversed layout reads its storage's gap bytes: not one of the
     * dtype's values (a Bool of 0x55 is undefined behaviour in C) */
    if (sw->layout != LAYOUT_CONTIGUOUS && layout_bound_op(name)) return;
    for (int k = 0; k < NSWEEP; k++) {
        int dt = sweep_dtypes[k];
        if (dt == from && sw->layout == LAYOUT_CONTIGUOUS) continue;
        tc_tensor *want[2] = {0}, *got[2] = {0};
        tc_status sc = run_in(c, TC_CPU, dt, sw->layout, want);
        char cpu_msg[512];
        snprintf(cpu_msg, sizeof cpu_msg, "%s", tc_last_error());
        tc_status sd = run_in(c, DEV, dt, sw->layout, got);
        sw->calls++;
        if (sc != TC_OK && sd != TC_OK) {
            sw->refused++;
        } else if (sc != TC_OK || sd != TC_OK) {
            printf("  %s in %s (%s): the %s refuses what the %s runs: %s\n", name, tc_dtype_name((tc_dtype)dt),
                   layout_name(sw->layout),
                   sc ? "CPU" : "device", sc ? "device" : "CPU", sc ? cpu_msg : tc_last_error());
            sw->bad++, sw->per_dtype[k]++;
        } else {
            for (int o = 0; o < 2; o++) {
                const char *why;
                if (!agrees(got[o], want[o], &why)) {
                    printf("  %s in %s (%s): result %d: %s\n", name, tc_dtype_name((tc_dtype)dt),
                           layout_name(sw->layout), o + 1, why);
                    sw->bad++, sw->per_dtype[k]++;
                    break;
                }
            }
        }
        for (int o = 0; o < 2; o++) tc_tensor_release(want[o]), tc_tensor_release(got[o]);
    }
}

TEST(cuda_dev_golden_every_dtype)
{
    char why[512];
    if (!ct_cuda_device(why, sizeof why)) return;
    /* contiguous inputs, then the dims stored in reverse order from an offset (strided
     * views in every dtype, the case's own included) */
    static const int layouts[] = {LAYOUT_CONTIGUOUS, LAYOUT_REVERSED};
    for (int l = 0; l < 2; l++) {
        sweep sw = {.layout = layouts[l]};
        int cases = conformance_golden_each(sweep_call, &sw);
        CHECK(cases > 300);
        CHECK(sw.calls > 2000);
        CHECK(sw.bad == 0);
        printf("  %d golden cases, %d calls in other dtypes, inputs %s: %d refused on both sides, %d differ", cases,
               sw.calls, layout_name(sw.layout), sw.refused, sw.bad);
        for (int k = 0; k < NSWEEP; k++)
            if (sw.per_dtype[k]) printf(" (%s %d)", tc_dtype_name((tc_dtype)sweep_dtypes[k]), sw.per_dtype[k]);
        printf("\n");
    }
}
