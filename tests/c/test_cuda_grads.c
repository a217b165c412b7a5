/* test_cuda_grads.c -- every differentiable golden call's gradient rule on the device
 * against the same rule on the CPU.
 *
 * A rule composes ops (the backward kernels among them: convolution, pooling, softmax,
 * norms, attention, rnn, index scatters) and makes its own zeros, index tensors and
 * temporaries; on a device each of those must be made there and run there. For each golden
 * call of an op the table marks differentiable, with a floating input: the op forward on
 * the CPU gives the results' shapes; fixed output gradients (values in [-1.25, -0.25] and
 * [0.25, 1.25]) go to the rule (gradcheck.h's gc_run_rule) on the CPU and, with every
 * tensor moved, on cuda:0. Both must succeed or both fail; each input gradient must come
 * back on the device with the CPU's dtype, shape and values (a missing gradient reads as
 * zeros), floats within a few units in the last place.
 */
#include "ctest.h"
#include "conformance.h"
#include "cuda_test_util.h"
#include "gradcheck.h"
#include "internal.h"
#include <stdlib.h>

#define DEV TC_DEVICE_CUDA(0)

typedef struct grad_sweep {
    int calls, refused, bad;
} grad_sweep;

static double rel_tolerance(int dt)
{
    return dt == TC_F64 ? 1e-12 : dt == TC_F32 ? 2e-5 : dt == TC_F16 ? 2e-3 : 1.6e-2;
}

/* A fixed output gradient shaped like r (NULL for an integer or bool result). */
static tc_tensor *gradient_like(const tc_tensor *r, int o)
{
    if (!r || !tc_dtype_is_float((tc_dtype)r->dtype)) return NULL;
    tc_tensor *g = gc_rand((tc_dtype)r->dtype, r->ndim, r->size, -1, 1, 77 + (uint64_t)o), *f = NULL;
    if (!g || tc_tensor_to(g, TC_CPU, TC_F64, &f) != TC_OK) return g;
    for (int64_t i = 0; i < tc_tensor_numel(f); i++) { /* away from 0: every element matters */
        double *v = (double *)tc_tensor_data(f) + i;
        *v += *v < 0 ? -0.25 : 0.25;
    }
    tc_tensor_release(g);
    g = NULL;
    tc_tensor_to(f, TC_CPU, r->dtype, &g);
    tc_tensor_release(f);
    return g;
}

/* Whether the device's gradient d equals the CPU's h (NULL: zeros). */
static bool same_gradient(const tc_tensor *d, const tc_tensor *h, int k, const char *name)
{
    if (!d && !h) return true;
    tc_tensor *back = NULL;
    if (d && (d->device != DEV || tc_tensor_to(d, TC_CPU, -1, &back) != TC_OK)) {
        printf("  %s: input %d's gradient is not on the device\n", name, k + 1);
        return false;
    }
    const tc_tensor *shape = back ? back : h;
    bool ok = !back || !h || (back->dtype == h->dtype && tc_same_shape(back, h));
    if (!ok) printf("  %s: input %d's gradient: dtype or shape differs\n", name, k + 1);
    double tol = rel_tolerance(shape->dtype);
    for (int64_t i = 0; ok && i < tc_tensor_numel(shape); i++) {
        double a = back ? ct_at(back, i) : 0, b = h ? ct_at(h, i) : 0;
        if (!ct_near(a, b, tol)) {
            printf("  %s: input %d's gradient, element %lld: device %.9g, cpu %.9g\n", name, k + 1, (long long)i, a, b);
            ok = false;
        }
    }
    tc_tensor_release(back);
    return ok;
}

static void grad_call(void *ctx, const golden_call *c)
{
    grad_sweep *sw = ctx;
    const tc_opinfo *info = tc_op_info((tc_op)c->op);
    bool any_float = false;
    for (int i = 0; i < c->nin; i++) any_float |= c->in[i] && tc_dtype_is_float((tc_dtype)c->in[i]->dtype);
    if (!(info->flags & TC_OPF_DIFF) || !any_float) return;
    tc_tensor *res[2] = {0};
    if (tc_op_run((tc_op)c->op, (const tc_tensor *const *)c->in, c->nin, c->p, res, c->nout) != TC_OK)
        return; /* calls that need the result slot they give (none differentiable so far) */
    tc_tensor *gout[2] = {gradient_like(res[0], 0), gradient_like(res[1], 1)};
    tc_tensor *din[12] = {0}, *dgout[2] = {0}, *gcpu[12] = {0}, *gdev[12] = {0};
    for (int i = 0; i < c->nin; i++) din[i] = c->in[i] ? ct_to(c->in[i], DEV) : NULL;
    for (int o = 0; o < 2; o++) dgout[o] = gout[o] ? ct_to(gout[o], DEV) : NULL;
    tc_status sc = gc_run_rule((tc_op)c->op, (const tc_tensor *const *)c->in, c->nin, c->p,
                               (const tc_tensor *const *)gout, NULL, gcpu);
    char cpu_msg[512];
    snprintf(cpu_msg, sizeof cpu_msg, "%s", tc_last_error());
    tc_status sd = gc_run_rule((tc_op)c->op, (const tc_tensor *const *)din, c->nin, c->p,
                               (const tc_tensor *const *)dgout, NULL, gdev);
    sw->calls++;
    if (sc != TC_OK && sd != TC_OK) {
        sw->refused++;
    } else if (sc != TC_OK || sd != TC_OK) {
        printf("  %s: the %s's rule fails where the %s's runs: %s\n", info->name, sc ? "CPU" : "device",
               sc ? "device" : "CPU", sc ? cpu_msg : tc_last_error());
        sw->bad++;
    } else {
        bool ok = true;
        for (int i = 0; i < c->nin && ok; i++) ok = same_gradient(gdev[i], gcpu[i], i, info->name);
        sw->bad += !ok;
    }
    for (int i = 0; i < c->nin; i++) tc_tensor_release(gcpu[i]), tc_tensor_release(gdev[i]);
    for (int o = 0; o < 2; o++) tc_tensor_release(res[o]), tc_tensor_release(gout[o]);
    ct_drop();
}

TEST(cuda_dev_golden_gradients)
{
    char why[512];
    if (!ct_cuda_device(why, sizeof why)) return;
    grad_sweep sw = {0};
    int cases = conformance_golden_each(grad_call, &sw);
    CHECK(cases > 300);
    CHECK(sw.calls > 300);
    CHECK(sw.bad == 0);
    printf("  %d golden cases, %d gradient rules run on both sides: %d fail on both, %d differ\n", cases, sw.calls,
           sw.refused, sw.bad);
}
