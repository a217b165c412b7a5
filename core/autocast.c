/* autocast.c -- mixed precision: the per-thread autocast state, the op lists, the input
 * casts tc_op_run makes while autocast is on, the cast cache, and the fused unscale-and-
 * check of dynamic loss scaling (public API and policy: core/tocha_amp.h, docs/amp.md).
 *
 * tc_op_run tests one thread-local int (tc_autocast_on) and, when it is set, hands the call
 * here. We turn autocast off for the nested calls (the casts and the op itself go back
 * through tc_op_run, so the tracer and autograd see ordinary calls and nothing is cast
 * twice), decide the cast from the op's class, and run. Backward passes (the engine's
 * rules, tc_ag_in_backward) are never cast: a rule works on the dtypes forward recorded.
 */
#include "internal.h"
#include "autograd/node.h"
#include <math.h>
#include <stdlib.h>

_Thread_local int tc_autocast_on;           /* 1 while autocast is enabled on this thread */
static _Thread_local int ac_dtype = TC_F16; /* the LOWER ops' dtype */
static _Thread_local int cache_off;         /* 1: tc_autocast_set_cache_enabled(0) */

/* ---- the op lists ------------------------------------------------------------------------ */

/* PyTorch's autocast lists, restricted to what ops.def has. LOWER: "lower_precision_fp";
 * FP32: "fp32" (PyTorch lists sum and prod; mean, var and std are added here because they
 * accumulate too: a loss is usually a mean). Every other op is PROMOTE unless its kind says
 * NONE (see policy_of). */
static const uint8_t op_class[TC_OP_COUNT] = {
    /* matrix products and convolutions */
    [TC_OP_DOT] = TC_AUTOCAST_LOWER,     [TC_OP_MV] = TC_AUTOCAST_LOWER,
    [TC_OP_MM] = TC_AUTOCAST_LOWER,      [TC_OP_BMM] = TC_AUTOCAST_LOWER,
    [TC_OP_ADDMV] = TC_AUTOCAST_LOWER,   [TC_OP_ADDMM] = TC_AUTOCAST_LOWER,
    [TC_OP_ADDR] = TC_AUTOCAST_LOWER,    [TC_OP_BADDBMM] = TC_AUTOCAST_LOWER,
    [TC_OP_ADDBMM] = TC_AUTOCAST_LOWER,  [TC_OP_CONV2D] = TC_AUTOCAST_LOWER,
    [TC_OP_CONV_TRANSPOSE2D] = TC_AUTOCAST_LOWER, [TC_OP_CONV2D_WEIGHT] = TC_AUTOCAST_LOWER,
    [TC_OP_ATTENTION] = TC_AUTOCAST_LOWER, /* PyTorch's scaled_dot_product_attention */
    /* elementwise ops whose range or accuracy half precision does not cover */
    [TC_OP_EXP] = TC_AUTOCAST_FP32,      [TC_OP_EXPM1] = TC_AUTOCAST_FP32,
    [TC_OP_LOG] = TC_AUTOCAST_FP32,      [TC_OP_LOG1P] = TC_AUTOCAST_FP32,
    [TC_OP_LOG2] = TC_AUTOCAST_FP32,     [TC_OP_LOG10] = TC_AUTOCAST_FP32,
    [TC_OP_RSQRT] = TC_AUTOCAST_FP32,    [TC_OP_CINV] = TC_AUTOCAST_FP32,
    [TC_OP_POW] = TC_AUTOCAST_FP32,      [TC_OP_TAN] = TC_AUTOCAST_FP32,
    [TC_OP_ASIN] = TC_AUTOCAST_FP32,     [TC_OP_ACOS] = TC_AUTOCAST_FP32,
    [TC_OP_SINH] = TC_AUTOCAST_FP32,     [TC_OP_COSH] = TC_AUTOCAST_FP32,
    /* reductions, scans, softmax */
    [TC_OP_SUM] = TC_AUTOCAST_FP32,      [TC_OP_PROD] = TC_AUTOCAST_FP32,
    [TC_OP_MEAN] = TC_AUTOCAST_FP32,     [TC_OP_VAR] = TC_AUTOCAST_FP32,
    [TC_OP_STD] = TC_AUTOCAST_FP32,      [TC_OP_NORM] = TC_AUTOCAST_FP32,
    [TC_OP_CUMSUM] = TC_AUTOCAST_FP32,   [TC_OP_CUMPROD] = TC_AUTOCAST_FP32,
    [TC_OP_SOFTMAX] = TC_AUTOCAST_FP32,  [TC_OP_LOG_SOFTMAX] = TC_AUTOCAST_FP32,
    [TC_OP_LAYER_NORM] = TC_AUTOCAST_FP32, /* PyTorch's layer_norm: float32 in and out */
};

static int policy_of(tc_op op, const tc_opinfo *info)
{
    if (op_class[op]) return op_class[op];
    /* copies are the casts themselves, views share their input's dtype, random fills
     * write the given result's dtype */
    if (info->kind == TC_KIND_VIEW || info->kind == TC_KIND_CONVERT || info->kind == TC_KIND_RANDOM)
        return TC_AUTOCAST_NONE;
    /* batch norm takes a half input beside float32 weights and statistics and keeps the
     * input's dtype, as PyTorch's autocast leaves it: promoting would run every normalised
     * activation of a half network in float32 (layer_norm is on the FP32 list above; its
     * backward, like batch norm's, takes the forward's tensors as they are) */
    if (info->kind == TC_KIND_NORM) return TC_AUTOCAST_NONE;
    /* an optimizer step writes a parameter and its state in their own dtype; its float64
     * scalars must not promote them */
    if (info->kind == TC_KIND_OPTIM) return TC_AUTOCAST_NONE;
    /* attention_backward takes the forward's half tensors beside its float32 lse */
    if (op == TC_OP_ATTENTION_BACKWARD) return TC_AUTOCAST_NONE;
    return TC_AUTOCAST_PROMOTE;
}

int tc_autocast_policy(int op)
{
    const tc_opinfo *info = tc_op_info((tc_op)op);
    return info ? policy_of((tc_op)op, info) : TC_AUTOCAST_NONE;
}

/* ---- state --------------------------------------------------------------------------------- */

tc_status tc_autocast_set(int enabled, int dtype, int *prev_enabled, int *prev_dtype)
{
    if (dtype != TC_F16 && dtype != TC_BF16) {
        const char *name = (unsigned)dtype < TC_DTYPE_COUNT ? tc_dtype_name((tc_dtype)dtype) : "an unknown dtype";
        return tc_set_error(TC_ERR_ARG, "autocast: dtype must be float16 or bfloat16, got %s (%d)", name, dtype);
    }
    if (prev_enabled) *prev_enabled = tc_autocast_on;
    if (prev_dtype) *prev_dtype = ac_dtype;
    tc_autocast_on = enabled ? 1 : 0;
    ac_dtype = dtype;
    if (!enabled) tc_autocast_clear_cache();
    return TC_OK;
}

int tc_autocast_enabled(void) { return tc_autocast_on; }
int tc_autocast_dtype(void) { return ac_dtype; }

/* ---- the cast cache ---------------------------------------------------------------------- */

/* One entry: the source leaf (retained: its pointer cannot be reused while cached) with the
 * geometry and version it had when cast, and the cast. Entries are checked on lookup, so a
 * write into the leaf, a resize or a set makes its entry miss (and be replaced). Whether
 * grad mode was on is part of the key: a cast made under no_grad has no history. */
enum { CACHE_MAX = 64 };
typedef struct centry {
    tc_tensor *src, *cast;
    tc_storage *storage;
    int64_t version, offset;
    int32_t dtype, ndim, grad_on;
    int64_t size[TC_MAX_DIMS], stride[TC_MAX_DIMS];
} centry;
static _Thread_local centry cache[CACHE_MAX];
static _Thread_local int ncache;

int tc_autocast_set_cache_enabled(int on)
{
    int prev = !cache_off;
    cache_off = !on;
    if (!on) tc_autocast_clear_cache();
    return prev;
}

void tc_autocast_clear_cache(void)
{
    for (int i = 0; i < ncache; i++) {
        tc_tensor_release(cache[i].src);
        tc_tensor_release(cache[i].cast);
    }
    ncache = 0;
}

int tc_autocast_cache_size(void) { return ncache; }

/* PyTorch's rule: only float32 leaves that require grad (parameters), and never while a
 * trace records (a cached cast would enter the graph as a captured constant). */
static bool cacheable(const tc_tensor *t, int dt)
{
    return !cache_off && !tc_trace_active && !tc_exec_shape_only && t->dtype == TC_F32 && dt == ac_dtype &&
           t->storage && (t->flags & TC_TF_REQUIRES_GRAD) && tc_tensor_is_leaf(t);
}

static bool entry_matches(const centry *e, const tc_tensor *t, int dt, int grad_on)
{
    return e->src == t && e->dtype == dt && e->storage == t->storage && e->version == t->storage->version &&
           e->offset == t->offset && e->ndim == t->ndim && e->grad_on == grad_on &&
           memcmp(e->size, t->size, sizeof(int64_t) * (size_t)t->ndim) == 0 &&
           memcmp(e->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim) == 0;
}

/* *out = t converted to dt (a new reference), through tc_op_run so it is recorded. */
static tc_status cast_to(const tc_tensor *t, int dt, tc_tensor **out)
{
    bool use_cache = cacheable(t, dt);
    int grad_on = tc_grad_enabled() ? 1 : 0, slot = -1;
    if (use_cache)
        for (int i = 0; i < ncache; i++) {
            if (cache[i].src != t) continue;
            if (entry_matches(&cache[i], t, dt, grad_on)) {
                tc_tensor_retain(cache[i].cast);
                *out = cache[i].cast;
                return TC_OK;
            }
            slot = i; /* stale: replaced below */
        }
    tc_params p = {.i = {dt}};
    *out = NULL;
    TRY(tc_op_run(TC_OP_COPY, &t, 1, &p, out, 1));
    if (!use_cache || (slot < 0 && ncache == CACHE_MAX)) return TC_OK; /* full: just not cached */
    if (slot < 0) slot = ncache++;
    else tc_tensor_release(cache[slot].src), tc_tensor_release(cache[slot].cast);
    centry *e = &cache[slot];
    tc_tensor_retain((tc_tensor *)t);
    tc_tensor_retain(*out);
    *e = (centry){.src = (tc_tensor *)t, .cast = *out, .storage = t->storage, .version = t->storage->version,
                  .offset = t->offset, .dtype = dt, .ndim = t->ndim, .grad_on = grad_on};
    memcpy(e->size, t->size, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(e->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    return TC_OK;
}

/* ---- the dispatcher hook ----------------------------------------------------------------- */

static bool is_float(int dt) { return dt == TC_F32 || dt == TC_F64 || dt == TC_F16 || dt == TC_BF16; }

/* Float dtypes ordered by width; float16 and bfloat16 together widen to float32. */
static int widest(int a, int b)
{
    if (a < 0 || a == b) return b;
    if (a == TC_F64 || b == TC_F64) return TC_F64;
    return TC_F32; /* f32 with anything narrower, or f16 with bf16 */
}

/* The dtype each float input should have for this call, or -1 when nothing is cast. */
static int target_dtype(tc_op op, const tc_opinfo *info, const tc_tensor *const *in, int nin, tc_tensor **out)
{
    int cls = policy_of(op, info);
    if (cls == TC_AUTOCAST_NONE) return -1;
    /* A given float result (Torch7's result argument, an in-place call) fixes the dtype:
     * gradWeight:addmm(gout:t(), x) keeps accumulating in float32 under autocast. */
    if (out[0] && is_float(out[0]->dtype) && out[0]->dtype != TC_F64) return out[0]->dtype;
    if (out[0] && is_float(out[0]->dtype)) return -1;
    bool any_f64 = false;
    for (int i = 0; i < nin; i++) any_f64 = any_f64 || (in[i] && in[i]->dtype == TC_F64);
    if (cls == TC_AUTOCAST_LOWER) return any_f64 ? -1 : ac_dtype; /* float64 is never lowered */
    if (cls == TC_AUTOCAST_FP32) return TC_F32;
    /* PROMOTE: the widest float dtype among the sized inputs (0-dim ones, scalars, do not
     * widen: half x * 0-dim float32 stays half, as in PyTorch), else among all. */
    int wide_sized = -1, wide_all = -1;
    for (int i = 0; i < nin; i++) {
        if (!in[i] || !is_float(in[i]->dtype)) continue;
        wide_all = widest(wide_all, in[i]->dtype);
        if (in[i]->ndim > 0) wide_sized = widest(wide_sized, in[i]->dtype);
    }
    return wide_sized >= 0 ? wide_sized : wide_all;
}

/* Which inputs to cast: float inputs of another dtype; for FP32 ops only half ones (a
 * float64 reduction stays float64); for LOWER ops any float but float64. */
static bool wants_cast(int cls, const tc_tensor *t, int target)
{
    if (!t || !is_float(t->dtype) || t->dtype == target) return false;
    if (cls == TC_AUTOCAST_FP32 || cls == TC_AUTOCAST_LOWER) return t->dtype != TC_F64;
    return true;
}

static tc_status autocast_call(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                               int nout)
{
    const tc_opinfo *info = tc_op_info(op);
    if (!info || !out || nout != info->nout || nin < 0 || (nin > 0 && !in) || nin == 0)
        return tc_op_run(op, in, nin, p, out, nout); /* nothing to cast, or a bad call reported there */
    int target = target_dtype(op, info, in, nin, out);
    int cls = policy_of(op, info);
    int ncast = 0;
    for (int i = 0; i < nin && target >= 0; i++) ncast += wants_cast(cls, in[i], target);
    if (ncast == 0) return tc_op_run(op, in, nin, p, out, nout);

    enum { SMALL = 8 };
    const tc_tensor *small_in[SMALL];
    tc_tensor *small_cast[SMALL] = {0};
    const tc_tensor **cin = small_in;
    tc_tensor **casts = small_cast;
    if (nin > SMALL) { /* cat of many tensors */
        cin = malloc(sizeof *cin * (size_t)nin);
        casts = calloc((size_t)nin, sizeof *casts);
        if (!cin || !casts) {
            free(cin), free(casts);
            return tc_set_error(TC_ERR_MEMORY, "%s: out of memory for autocast", info->name);
        }
    }
    tc_status s = TC_OK;
    for (int i = 0; i < nin && s == TC_OK; i++) {
        cin[i] = in[i];
        if (!wants_cast(cls, in[i], target)) continue;
        for (int j = 0; j < i; j++) /* mm(x, x): one cast */
            if (in[j] == in[i] && casts[j]) {
                cin[i] = casts[j];
                break;
            }
        if (cin[i] != in[i]) continue;
        s = cast_to(in[i], target, &casts[i]);
        if (s == TC_OK) cin[i] = casts[i];
    }
    if (s == TC_OK) s = tc_op_run(op, cin, nin, p, out, nout);
    for (int i = 0; i < nin; i++) tc_tensor_release(casts[i]);
    if (cin != small_in) free(cin), free(casts);
    return s;
}

tc_status tc_autocast_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                             int nout)
{
    int saved = tc_autocast_on;
    tc_autocast_on = 0; /* nested calls (the casts, the op, what they call) run as they are */
    tc_status s = tc_ag_in_backward ? tc_op_run(op, in, nin, p, out, nout) : autocast_call(op, in, nin, p, out, nout);
    tc_autocast_on = saved;
    return s;
}

/* ---- dynamic loss scaling: unscale and check ------------------------------------------------ */

enum { MAX_DEVS = 16 };

tc_status tc_amp_unscale(tc_tensor *const *grads, int n, double inv_scale, double *max_abs)
{
    if (!max_abs || (n > 0 && !grads) || n < 0) return tc_set_error(TC_ERR_ARG, "amp_unscale: bad arguments");
    *max_abs = 0;
    int devs[MAX_DEVS], ndev = 0;
    tc_tensor *found[MAX_DEVS] = {0}; /* per device: the running max |g| (0-dim, float32) */
    tc_tensor *sc = NULL;
    int prev_grad = tc_set_grad_enabled(0), prev_ac = tc_autocast_on;
    tc_autocast_on = 0;
    tc_status s = tc_tensor_new(TC_F32, 0, NULL, &sc); /* a CPU scalar joins device ops */
    if (s == TC_OK) *(float *)tc_tensor_data(sc) = (float)inv_scale;
    for (int i = 0; i < n && s == TC_OK; i++) {
        tc_tensor *g = grads[i];
        if (!g || tc_tensor_numel(g) == 0) continue;
        if (!tc_dtype_is_float((tc_dtype)g->dtype)) {
            s = tc_set_error(TC_ERR_DTYPE, "amp_unscale: gradient %d is %s; float types only", i + 1,
                             tc_dtype_name((tc_dtype)g->dtype));
            break;
        }
        int d = 0;
        while (d < ndev && devs[d] != g->device) d++;
        if (d == ndev) {
            if (ndev == MAX_DEVS) {
                s = tc_set_error(TC_ERR_DEVICE, "amp_unscale: gradients on more than %d devices", MAX_DEVS);
                break;
            }
            devs[ndev++] = g->device;
        }
        /* g *= inv_scale (the scalar converted to g's dtype; a power of two is exact) */
        tc_tensor *scg = NULL;
        const tc_tensor *sv = sc;
        if (g->dtype != TC_F32) {
            tc_params cp = {.i = {g->dtype}};
            s = tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){sc}, 1, &cp, &scg, 1);
            sv = scg;
        }
        if (s == TC_OK) s = tc_op_run(TC_OP_MUL, (const tc_tensor *const[]){g, sv}, 2, NULL, &g, 1);
        tc_tensor_release(scg);
        /* m = max |g| (NaN wins); found[d] = cmax(found[d], m) propagates NaN and inf */
        tc_tensor *m = NULL, *m32 = NULL;
        tc_params np = {.s = {INFINITY}, .i = {-1, 0}};
        if (s == TC_OK) s = tc_op_run(TC_OP_NORM, (const tc_tensor *const[]){g}, 1, &np, &m, 1);
        if (s == TC_OK && m->dtype != TC_F32) {
            tc_params cp = {.i = {TC_F32}};
            s = tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){m}, 1, &cp, &m32, 1);
        } else if (s == TC_OK) {
            m32 = m, m = NULL;
        }
        tc_tensor_release(m);
        if (s == TC_OK && !found[d]) found[d] = m32, m32 = NULL;
        else if (s == TC_OK)
            s = tc_op_run(TC_OP_MAXIMUM, (const tc_tensor *const[]){found[d], m32}, 2, NULL, &found[d], 1);
        tc_tensor_release(m32);
    }
    for (int d = 0; d < ndev && s == TC_OK; d++) { /* one number read per device */
        double v = 0;
        if (!found[d]) continue;
        s = tc_tensor_get(found[d], NULL, &v);
        if (s == TC_OK && (v != v || v > *max_abs)) *max_abs = v;
        if (v != v) break; /* NaN stays the answer */
    }
    for (int d = 0; d < ndev; d++) tc_tensor_release(found[d]);
    tc_tensor_release(sc);
    tc_autocast_on = prev_ac;
    tc_set_grad_enabled(prev_grad);
    return s;
}
