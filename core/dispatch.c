/* dispatch.c -- tc_op_run, the one entry point every op goes through.
 *
 * Steps: check the op id, arity and required inputs; check the principal dtype against
 * the op's flags; run the kind's prepare step (shape rules, params; nothing allocated);
 * create or resize the outputs; run the backend kernel. Any failure before the kernel
 * leaves every tensor as it was; freshly allocated outputs are released on failure.
 * Autograd: tc_op_run hands a call to core/autograd/node.c when one of its tensors is
 * flagged for it (one flag test per tensor otherwise); that code calls tc_op_exec, the
 * dispatcher proper. Every write into a caller's tensor bumps its storage's version.
 */
#include "internal.h"
#include <stdio.h>

static const tc_prepare_fn prepare_of_kind[TC_KIND_COUNT] = {
    [TC_KIND_EW] = tc_prepare_ew,         [TC_KIND_CONVERT] = tc_prepare_convert,
    [TC_KIND_SELECT] = tc_prepare_select, [TC_KIND_REDUCE] = tc_prepare_reduce,
    [TC_KIND_SCAN] = tc_prepare_scan,     [TC_KIND_MATMUL] = tc_prepare_matmul,
    [TC_KIND_INDEX] = tc_prepare_index,   [TC_KIND_SORT] = tc_prepare_sort,
    [TC_KIND_JOIN] = tc_prepare_join,     [TC_KIND_RANDOM] = tc_prepare_random,
    [TC_KIND_CONV] = tc_prepare_conv,     [TC_KIND_POOL] = tc_prepare_pool,
    [TC_KIND_SOFTMAX] = tc_prepare_softmax,
    [TC_KIND_NORM] = tc_prepare_norm,
    [TC_KIND_RNN] = tc_prepare_rnn,
    [TC_KIND_ATTN] = tc_prepare_attn,
    [TC_KIND_OPTIM] = tc_prepare_optim,
};

static const tc_backend *backend_for(int device)
{
    return device == TC_CPU ? &tc_cpu_backend : TC_DEVICE_IS_CUDA(device) ? &tc_cuda_backend : NULL;
}

/* The dtype an op's flags are checked against: the first tensor input, or for ops with
 * no tensor input (fill, random) the given output. where() checks its value inputs. */
static const tc_tensor *principal(const tc_kcall *k)
{
    if (k->info->kind == TC_KIND_SELECT) return k->in[1];
    if (k->op == TC_OP_MULTINOMIAL) return k->in[0]; /* typed by its probabilities; result int64 */
    if (k->nin > 0 && k->in[0] && k->info->kind != TC_KIND_RANDOM) return k->in[0];
    return k->out[0];
}

static tc_status check_dtype_flags(const tc_kcall *k)
{
    const tc_tensor *t = principal(k);
    if (!t) return TC_OK; /* random ops without an output: prepare reports it */
    int dt = t->dtype, fl = k->info->flags;
    bool ok = tc_dtype_is_float((tc_dtype)dt) ? (fl & TC_OPF_FLT)
              : dt == TC_BOOL                 ? (fl & TC_OPF_BOOL)
                                              : (fl & TC_OPF_INT);
    if (ok) return TC_OK;
    return tc_set_error(TC_ERR_DTYPE, "%s: %s tensors are not supported (%s)", k->info->name,
                        tc_dtype_name((tc_dtype)dt),
                        (fl & (TC_OPF_INT | TC_OPF_BOOL)) == 0 ? "float types only"
                        : (fl & TC_OPF_FLT) == 0               ? "integer types only"
                                                               : "not for this type");
}

/* Devices of a call: every tensor on one device, except that a 0-dim CPU tensor may join
 * a device op (PyTorch's rule: autograd's scalars, x:add(torch.Tensor{1}:squeeze())), and so
 * may an optimizer step's vector of per-step scalars (its last input, a few values); the
 * kernel then gets a device copy of it. A copy (CONVERT) may cross devices. */
static bool cpu_scalar_of(const tc_kcall *k, int i)
{
    const tc_tensor *t = k->in[i];
    return t->device == TC_CPU && tc_host_scalars_join(k->info->kind, i, k->nin, t->ndim, t->size);
}

static tc_status device_mismatch(const tc_kcall *k, const char *what, const tc_tensor *t, int device)
{
    char d1[16], d2[16], b1[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_DEVICE, "%s: %s of size %s is on %s but the op runs on %s; move it with :cuda() or :float()",
                        k->info->name, what, tc_shape_str(t, b1, sizeof b1), tc_device_str(t->device, d1, sizeof d1),
                        tc_device_str(device, d2, sizeof d2));
}

static tc_status check_devices(const tc_kcall *k, int *device)
{
    int dev = -1;
    for (int i = 0; i < k->nin; i++)
        if (k->in[i] && !cpu_scalar_of(k, i) && dev < 0) dev = k->in[i]->device;
    for (int i = 0; i < k->nin && dev < 0; i++) /* only 0-dim CPU tensors */
        if (k->in[i]) dev = TC_CPU;
    if (dev < 0) dev = k->out[0] ? k->out[0]->device : TC_CPU;
    char what[32];
    for (int i = 0; i < k->nin; i++) {
        const tc_tensor *t = k->in[i];
        if (!t || t->device == dev || (cpu_scalar_of(k, i) && dev != TC_CPU)) continue;
        snprintf(what, sizeof what, "input %d", i + 1);
        return device_mismatch(k, what, t, dev);
    }
    if (k->info->kind != TC_KIND_CONVERT)
        for (int o = 0; o < k->nout; o++)
            if (k->out[o] && k->out[o]->device != dev) {
                snprintf(what, sizeof what, "result %d", o + 1);
                return device_mismatch(k, what, k->out[o], dev);
            }
    *device = k->info->kind == TC_KIND_CONVERT && k->out[0] ? k->out[0]->device : dev;
    return TC_OK;
}

static tc_status check_inputs(const tc_kcall *k, int *device)
{
    const tc_opinfo *info = k->info;
    if (info->nin >= 0 && k->nin != info->nin)
        return tc_set_error(TC_ERR_ARG, "%s: expects %d tensor inputs, got %d", info->name, info->nin, k->nin);
    if (info->nin < 0 && k->nin < 1) return tc_set_error(TC_ERR_ARG, "%s: expects at least one tensor", info->name);
    if (k->nin > 0 && !k->in) return tc_set_error(TC_ERR_ARG, "%s: NULL input list", info->name);
    *device = -1;
    for (int i = 0; i < k->nin; i++) {
        const tc_tensor *t = k->in[i];
        if (!t) {
            if (info->kind == TC_KIND_RANDOM) continue; /* optional probability tensor */
            if (info->kind == TC_KIND_CONV && i == 2) continue; /* optional bias */
            if (info->kind == TC_KIND_NORM && i > 0) continue;  /* checked by tc_prepare_norm */
            if (info->kind == TC_KIND_RNN && i > 0) continue;   /* optional states, biases: tc_prepare_rnn */
            return tc_set_error(TC_ERR_ARG, "%s: input %d is NULL", info->name, i + 1);
        }
        if ((unsigned)t->dtype >= TC_DTYPE_COUNT || t->ndim < 0 || t->ndim > TC_MAX_DIMS)
            return tc_set_error(TC_ERR_ARG, "%s: input %d is not a valid tensor", info->name, i + 1);
    }
    return check_devices(k, device);
}

/* Makes out[i] match spec: a given tensor must have the right dtype and is resized if its
 * size differs (unless it is also an input: an in-place result cannot change shape). */
static tc_status setup_outputs(const tc_kcall *k, const tc_outspec *spec, int device, tc_tensor **res, bool *fresh)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    for (int o = 0; o < spec->nout; o++) {
        tc_tensor *t = res[o];
        if (!t) continue;
        if (t->dtype != spec->dtype[o])
            return tc_set_error(TC_ERR_DTYPE, "%s: result %d is %s, expected %s", k->info->name, o + 1,
                                tc_dtype_name((tc_dtype)t->dtype), tc_dtype_name((tc_dtype)spec->dtype[o]));
        bool same = t->ndim == spec->ndim[o] &&
                    memcmp(t->size, spec->size[o], sizeof(int64_t) * (size_t)t->ndim) == 0 && t->storage;
        if (same || tc_numel_of(spec->ndim[o], spec->size[o]) == 0 ) continue;
        for (int i = 0; i < k->nin; i++)
            if (k->in[i] == t)
                return tc_set_error(TC_ERR_SHAPE, "%s: in-place result %s cannot hold the result size %s",
                                    k->info->name, tc_shape_str(t, b1, sizeof b1),
                                    tc_sizes_str(spec->ndim[o], spec->size[o], b2, sizeof b2));
    }
    for (int o = 0; o < spec->nout; o++) {
        tc_status s;
        if (!res[o]) {
            s = tc_tensor_alloc_on(device, (tc_dtype)spec->dtype[o], spec->ndim[o], spec->size[o], &res[o]);
            if (s == TC_OK) fresh[o] = true;
        } else {
            tc_tensor *t = res[o];
            bool same = t->ndim == spec->ndim[o] &&
                        memcmp(t->size, spec->size[o], sizeof(int64_t) * (size_t)t->ndim) == 0 && t->storage;
            s = same ? TC_OK : tc_tensor_resize(t, spec->ndim[o], spec->size[o]);
        }
        if (s) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: %s", k->info->name, tc_last_error());
            return tc_set_error(s, "%s", msg);
        }
    }
    return TC_OK;
}

/* ---- results that share memory with an input -------------------------------------------
 * A result written over its input element for element (x:add(y), an optimizer step) is the
 * ordinary in-place call. A result that shares memory with an input in any other way --
 * x:add(x:t()), x:narrow(1,2,9):copy(x:narrow(1,1,9)), x:div(x:narrow(1,1,1)) -- would
 * read elements the kernel has already overwritten, so the answer would depend on the
 * loop order, the vector width and the thread count. PyTorch refuses such calls and asks
 * for a clone(); Torch7 gave whatever its loop gave. We read such an input from a copy
 * made first: the call then gives what it gives on a clone, costing a copy only in this
 * case. Kinds whose kernels already do this themselves (index, sort, cat, matmul, rnn,
 * attention) are left to them. Softmax reads each line whole before writing it, so like
 * the elementwise kinds it may run in place (the same elements in the same order). Conv,
 * pool and norm read a window, a plane or a channel of an input for each result element
 * and write in their own order, so an input sharing any element with a result is read
 * from a copy, in place included (nn modules never ask for that). A result with two
 * elements on one address (an expanded view) has no such reading and is refused. */

static bool reads_windows(int kind)
{
    return kind == TC_KIND_CONV || kind == TC_KIND_POOL || kind == TC_KIND_NORM;
}

static bool reads_while_writing(int kind)
{
    return kind == TC_KIND_EW || kind == TC_KIND_CONVERT || kind == TC_KIND_SELECT || kind == TC_KIND_REDUCE ||
           kind == TC_KIND_SCAN || kind == TC_KIND_OPTIM || kind == TC_KIND_SOFTMAX || reads_windows(kind);
}

/* Before the results are resized (so a refused call changes nothing): a given result that
 * keeps its size keeps its strides, and a stride of 0 along a dim of size > 1 puts several
 * elements on one address. Ops that read no tensor (fill) may write there: every write
 * is the same value. Random ops check this themselves. */
static tc_status check_results_not_expanded(const tc_kcall *k, const tc_outspec *spec)
{
    if (k->nin == 0 || k->info->kind == TC_KIND_RANDOM) return TC_OK;
    for (int o = 0; o < spec->nout; o++) {
        const tc_tensor *t = k->out[o];
        if (!t || !t->storage || t->ndim != spec->ndim[o] ||
            memcmp(t->size, spec->size[o], sizeof(int64_t) * (size_t)t->ndim))
            continue; /* absent, or resized below into a contiguous layout */
        for (int d = 0; d < t->ndim; d++)
            if (t->stride[d] == 0 && t->size[d] > 1) {
                char b[TC_SHAPE_BUF];
                return tc_set_error(TC_ERR_ARG,
                                    "%s: result %d of size %s is an expanded view (stride 0 in dim %d), so several "
                                    "of its elements share one address; write into a tensor of its own (:clone())",
                                    k->info->name, o + 1, tc_shape_str(t, b, sizeof b), d + 1);
            }
    }
    return TC_OK;
}

static bool same_elements_in_order(const tc_tensor *a, const tc_tensor *b)
{
    return a == b || (a->storage == b->storage && a->offset == b->offset && a->ndim == b->ndim &&
                      !memcmp(a->size, b->size, sizeof(int64_t) * (size_t)a->ndim) &&
                      !memcmp(a->stride, b->stride, sizeof(int64_t) * (size_t)a->ndim));
}

/* After the results are set up: every input that shares elements with a result, other
 * than as the same elements in the same order, is copied into aside[i] and read from
 * there (in[] is k's new input list). */
static tc_status read_overlapping_inputs_aside(tc_kcall *k, const tc_tensor **in, tc_tensor **aside, int max)
{
    static const tc_params same_dtype = {.i = {-1}};
    if (!reads_while_writing(k->info->kind)) return TC_OK;
    bool any = false;
    for (int i = 0; i < k->nin; i++) {
        const tc_tensor *t = k->in[i];
        bool apart = false;
        for (int o = 0; o < k->nout && t && !apart; o++)
            apart = k->out[o] && tc_tensor_numel(t) > 0 &&
                    (reads_windows(k->info->kind) || !same_elements_in_order(t, k->out[o])) &&
                    tc_tensor_shares_elements(t, k->out[o]);
        if (!apart) continue;
        if (k->nin > max)
            return tc_set_error(TC_ERR_ARG, "%s: an input overlapping the result among more than %d inputs",
                                k->info->name, max);
        if (!any)
            for (int j = 0; j < k->nin; j++) in[j] = k->in[j];
        any = true;
        tc_status s = tc_op_exec(TC_OP_COPY, &t, 1, &same_dtype, &aside[i], 1);
        if (s) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: copying input %d, which overlaps the result: %s", k->info->name, i + 1,
                     tc_last_error());
            return tc_set_error(s, "%s", msg);
        }
        in[i] = aside[i];
    }
    if (any) k->in = in;
    return TC_OK;
}

static inline void bump_version(tc_tensor *t)
{
    if (t && t->storage) t->storage->version++;
}

_Thread_local bool tc_exec_shape_only;

/* A device op's host scalars become device copies for the kernel (check_devices), queued
 * on the stream without a host wait (cuda_scalars.c). */
static tc_status run_on_device(tc_kcall *k, tc_kernel kern, int device)
{
    bool moves = false;
    for (int i = 0; i < k->nin; i++)
        if (k->in[i] && k->in[i]->device != device && k->info->kind != TC_KIND_CONVERT) moves = true;
    if (!moves) return kern(k);
    enum { MAXIN = 64 };
    if (k->nin > MAXIN)
        return tc_set_error(TC_ERR_DEVICE, "%s: CPU scalars among more than %d inputs", k->info->name, MAXIN);
    const tc_tensor *in[MAXIN];
    tc_tensor *moved[MAXIN] = {0};
    tc_status s = TC_OK;
    for (int i = 0; i < k->nin && !s; i++) {
        in[i] = k->in[i];
        if (in[i] && in[i]->device != device) {
            s = tc_cuda_scalars_to_device(in[i], device, &moved[i]);
            in[i] = moved[i];
        }
    }
    if (!s) {
        tc_kcall k2 = *k;
        k2.in = in;
        s = kern(&k2);
    }
    for (int i = 0; i < k->nin; i++) tc_tensor_release(moved[i]);
    return s;
}

tc_status tc_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out, int nout)
{
    if (tc_autocast_on) return tc_autocast_op_run(op, in, nin, p, out, nout);
    if (tc_trace_active) return tc_trace_op_run(op, in, nin, p, out, nout);
    if (tc_autograd_wanted(in, nin, out, nout)) return tc_autograd_op_run(op, in, nin, p, out, nout);
    return tc_op_exec(op, in, nin, p, out, nout);
}

tc_status tc_op_prepare(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor *const *out,
                        int nout, tc_outspec *spec)
{
    static const tc_params no_params;
    const tc_opinfo *info = tc_op_info(op);
    if (!info) return tc_set_error(TC_ERR_ARG, "op_run: unknown op %d", (int)op);
    if (nout != info->nout)
        return tc_set_error(TC_ERR_ARG, "%s: expects %d result slots, got %d", info->name, info->nout, nout);
    if (info->kind == TC_KIND_VIEW) return tc_set_error(TC_ERR_ARG, "%s: a view has no prepare step", info->name);
    tc_tensor *res[2] = {out ? out[0] : NULL, out && nout > 1 ? out[1] : NULL};
    tc_kcall k = {.op = op, .info = info, .in = in, .nin = nin, .p = p ? p : &no_params, .out = res, .nout = nout};
    int device = TC_CPU;
    TRY(check_inputs(&k, &device));
    TRY(check_dtype_flags(&k));
    memset(spec, 0, sizeof *spec);
    return prepare_of_kind[info->kind](&k, spec);
}

tc_status tc_op_exec(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out, int nout)
{
    static const tc_params no_params;
    const tc_opinfo *info = tc_op_info(op);
    if (!info) return tc_set_error(TC_ERR_ARG, "op_run: unknown op %d", (int)op);
    if (!out || nout != info->nout)
        return tc_set_error(TC_ERR_ARG, "%s: expects %d result slots, got %d", info->name, info->nout, nout);
    if (!p) p = &no_params;
    /* Fast path for tiny elementwise calls (see tc_cpu_ew_fast): a given result of the
     * right shape, or a fresh one shaped like the first input. */
    if (info->kind == TC_KIND_EW && nin == info->nin && nin > 0 && in && in[0] && in[0]->device == TC_CPU &&
        !tc_exec_shape_only) {
        tc_tensor *o = out[0];
        if (o && o->dtype == in[0]->dtype && tc_same_shape(o, in[0])) {
            if (tc_cpu_ew_fast(op, info, in, nin, p, o)) {
                bump_version(o);
                return TC_OK;
            }
        } else if (!o && in[0]->storage && tc_tensor_numel(in[0]) < 2 * TC_PARALLEL_GRAIN &&
                   !(info->flags & TC_OPF_CMP) && !tc_is_half(in[0]->dtype)) {
            bool shaped = true;
            for (int i = 1; i < nin; i++)
                if (!in[i] || (!tc_same_shape(in[i], in[0]) && tc_tensor_numel(in[i]) != 1)) shaped = false;
            if (shaped) {
                tc_status s = tc_tensor_alloc((tc_dtype)in[0]->dtype, in[0]->ndim, in[0]->size, &o);
                if (s) return tc_set_error(s, "%s: out of memory for the result", info->name);
                if (tc_cpu_ew_fast(op, info, in, nin, p, o)) {
                    out[0] = o;
                    return TC_OK;
                }
                tc_tensor_release(o);
            }
        }
    }
    tc_tensor *res[2] = {out[0], nout > 1 ? out[1] : NULL};
    tc_kcall k = {.op = op, .info = info, .in = in, .nin = nin, .p = p ? p : &no_params, .out = res, .nout = nout};
    int device = TC_CPU;
    TRY(check_inputs(&k, &device));
    TRY(check_dtype_flags(&k));

    if (info->kind == TC_KIND_VIEW) {
        tc_tensor *v;
        TRY(tc_view_run(&k, &v));
        if (!out[0]) {
            out[0] = v;
            return TC_OK;
        }
        tc_status s = tc_tensor_set(out[0], v); /* Torch7: res:narrow(src, ...) */
        tc_tensor_release(v);
        return s;
    }

    const tc_backend *be = backend_for(device);
    tc_kernel kern = be ? be->kernels[op] : NULL;
    if (!kern) {
        char d[16];
        return tc_set_error(TC_ERR_DEVICE, "%s: not available on %s", info->name, tc_device_str(device, d, sizeof d));
    }
    if (device != TC_CPU) TRY(tc_cuda_check_device(info->name, device));
    tc_outspec spec = {0};
    TRY(prepare_of_kind[info->kind](&k, &spec));
    TRY(check_results_not_expanded(&k, &spec));
    bool fresh[2] = {false, false};
    enum { MAX_ASIDE = 8 };
    const tc_tensor *apart_in[MAX_ASIDE];
    tc_tensor *aside[MAX_ASIDE] = {0};
    tc_status s = setup_outputs(&k, &spec, device, res, fresh);
    if (s == TC_OK && !tc_exec_shape_only) { /* shape-only: results allocated, not computed */
        k.nout = spec.nout;
        s = read_overlapping_inputs_aside(&k, apart_in, aside, MAX_ASIDE);
    }
    if (s == TC_OK && !tc_exec_shape_only) {
        if (info->kind == TC_KIND_CONVERT && k.in[0]->device != res[0]->device) s = tc_copy_across_devices(&k);
        else s = device == TC_CPU ? kern(&k) : run_on_device(&k, kern, device);
    }
    for (int i = 0; i < MAX_ASIDE; i++) tc_tensor_release(aside[i]);
    if (s) {
        for (int o = 0; o < 2; o++)
            if (fresh[o]) tc_tensor_release(res[o]);
        return s;
    }
    for (int o = 0; o < spec.nout; o++) {
        if (!fresh[o]) bump_version(res[o]);
        out[o] = res[o];
    }
    return TC_OK;
}
