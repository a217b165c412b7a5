/* cuda_backend.c -- libtocha's side of device tensors: storages in device memory, copies
 * between devices, and the CUDA entry of the dispatcher's backend table.
 *
 * libtocha never includes a CUDA header. Device memory and kernels are reached through the
 * table of libtocha_cuda.so (cuda/cuda_api.h), loaded by cuda_loader.c on first use:
 *  - a device storage is ordinary tc_storage whose data is a device pointer; its deleter
 *    hands the block back to the device's caching allocator;
 *  - every op on device tensors goes to one kernel here (cuda_kernel), which describes the
 *    call as tc_cuda_views and calls the backend's run();
 *  - an op the backend has no kernel for (TC_ERR_UNSUPPORTED) runs on the host instead,
 *    while TC_CUDA_FLAG_HOST_FALLBACK is on (the default): inputs copied over, the CPU
 *    kernel, results copied back. Slow but correct, and counted per op
 *    (tc_cuda_host_fallbacks), so tests and benchmarks can see which ops still need a
 *    kernel. With the flag off such an op fails with the backend's message.
 *
 * Random ops draw their Philox numbers from the same generator slots the CPU kernel would
 * use, so a seeded CUDA tensor gets the CPU's numbers (core/cpu/random.c's layout).
 *
 * While the calling thread captures a CUDA graph (cuda_stream.c), what a graph cannot
 * record is refused here with a message naming the op: the host fallback, reads of device
 * values on the host, copies to the host, host data larger than a scalar, random draws from
 * a generator other than the default one, randperm/multinomial, and synchronisation. A
 * captured draw from the default generator reads its key and first slot from the capture's
 * device pair when it runs, so every replay draws fresh numbers (cuda_stream.c).
 */
#include "internal.h"
#include "cuda/cuda_api.h"
#include "cuda_record.h"
#include "philox.h"
#include <stdio.h>
#include <stdlib.h>

/* ---- devices -------------------------------------------------------------------------- */

const char *tc_device_str(int device, char *buf, size_t cap)
{
    if (device == TC_CPU) snprintf(buf, cap, "cpu");
    else if (TC_DEVICE_IS_CUDA(device)) snprintf(buf, cap, "cuda:%d", TC_DEVICE_ORDINAL(device));
    else snprintf(buf, cap, "device %d", device);
    return buf;
}

tc_status tc_cuda_check_device(const char *op, int device)
{
    const tc_cuda_api *api;
    if (!TC_DEVICE_IS_CUDA(device)) {
        char b[16];
        return tc_set_error(TC_ERR_DEVICE, "%s: %s is not a CUDA device", op, tc_device_str(device, b, sizeof b));
    }
    return tc_cuda_need(op, TC_DEVICE_ORDINAL(device), &api);
}

static void device_free(void *data, void *ctx)
{
    const tc_cuda_api *api;
    int dev = (int)(intptr_t)ctx - 1;
    /* A block with recorded streams is released later, after them (cuda_record.c). */
    if (tc_cuda_record_on_free(dev, data)) return;
    /* A storage outlives nothing it could report to: a failed release (a backend bug) is
     * dropped rather than crashing the release path. */
    if (tc_cuda_need("free", dev, &api) == TC_OK) (void)api->release(dev, data);
}

tc_status tc_cuda_storage_alloc(int device, int64_t nbytes, bool zero, tc_storage **out)
{
    const tc_cuda_api *api;
    if (!TC_DEVICE_IS_CUDA(device)) return tc_cuda_check_device("storage", device);
    int dev = TC_DEVICE_ORDINAL(device);
    TRY(tc_cuda_need("storage", dev, &api));
    void *data = NULL;
    tc_cuda_record_poll(dev); /* blocks whose recorded streams are done go back first */
    tc_status st = api->alloc(dev, (size_t)nbytes, &data);
    /* out of memory with blocks still waiting for recorded streams: wait for those, retry */
    if (st == TC_ERR_MEMORY && tc_cuda_record_pending(dev) > 0 && tc_cuda_record_drain(dev) == TC_OK)
        st = api->alloc(dev, (size_t)nbytes, &data);
    st = tc_cuda_backend_status(api, st);
    if (!st && zero && nbytes > 0) st = tc_cuda_backend_status(api, api->set_bytes(dev, data, 0, (size_t)nbytes));
    if (!st) st = tc_storage_adopt(data, nbytes, device, device_free, (void *)(intptr_t)(dev + 1), out);
    if (st && data) (void)api->release(dev, data);
    return st;
}

/* What a capture on the devices of a copy cannot record (see the banner). */
static tc_status copy_capturable(int dst_device, int src_device, size_t nbytes)
{
    if (dst_device == TC_CPU && src_device != TC_CPU)
        return tc_cuda_capture_refuse("copy", src_device, "copy device values to the host",
                                      "item/get, index and mask checks and copies to the host read values that a "
                                      "graph has not computed yet");
    if (src_device == TC_CPU && nbytes > TC_CUDA_CAPTURE_H2D_MAX) {
        char what[96];
        snprintf(what, sizeof what, "copy %zu bytes from the host", nbytes);
        return tc_cuda_capture_refuse("copy", dst_device, what,
                                      "only host scalars are captured, with their values at capture time; fill "
                                      "static device tensors before replaying, or copy non_blocking from pinned "
                                      "memory, which each replay re-reads");
    }
    if (src_device != TC_CPU && dst_device != TC_CPU && src_device != dst_device) {
        TRY(tc_cuda_capture_refuse("copy", src_device, "copy to another GPU", "the copy goes through the host"));
        return tc_cuda_capture_refuse("copy", dst_device, "copy from another GPU", "the copy goes through the host");
    }
    return TC_OK;
}

tc_status tc_device_copy_bytes(int dst_device, void *dst, int src_device, const void *src, size_t nbytes)
{
    const tc_cuda_api *api;
    if (nbytes == 0) return TC_OK;
    if (dst_device == TC_CPU && src_device == TC_CPU) {
        memmove(dst, src, nbytes);
        return TC_OK;
    }
    TRY(copy_capturable(dst_device, src_device, nbytes));
    if (src_device == TC_CPU) {
        TRY(tc_cuda_need("copy", TC_DEVICE_ORDINAL(dst_device), &api));
        return tc_cuda_backend_status(api, api->copy_h2d(TC_DEVICE_ORDINAL(dst_device), dst, src, nbytes));
    }
    TRY(tc_cuda_need("copy", TC_DEVICE_ORDINAL(src_device), &api));
    if (dst_device == TC_CPU)
        return tc_cuda_waited(api, TC_DEVICE_ORDINAL(src_device),
                              api->copy_d2h(TC_DEVICE_ORDINAL(src_device), dst, src, nbytes));
    if (dst_device == src_device)
        return tc_cuda_backend_status(api, api->copy_d2d(TC_DEVICE_ORDINAL(src_device), dst, src, nbytes));
    /* Between two GPUs: through a host buffer (peer access is not set up). */
    void *tmp = tc_malloc(nbytes, "copy");
    if (!tmp) return TC_ERR_MEMORY;
    tc_status s = tc_device_copy_bytes(TC_CPU, tmp, src_device, src, nbytes);
    if (!s) s = tc_device_copy_bytes(dst_device, dst, TC_CPU, tmp, nbytes);
    free(tmp);
    return s;
}

/* ---- moving tensors ------------------------------------------------------------------- */

/* Copies between the host and a device never need a device kernel (so the host fallback
 * below can use them for any op, COPY included): a strided device tensor crosses as the
 * byte span its elements occupy, and the CPU copy kernel does the layout on the host. */

/* A host tensor with t's geometry over a host copy of t's byte span (t on a device, with
 * elements); *span_lo (when asked) is where the span starts in t's storage, in bytes. */
static tc_status span_to_host(const tc_tensor *t, tc_tensor **out, int64_t *span_lo)
{
    int64_t lo, hi;
    tc_tensor_byte_span(t, &lo, &hi);
    tc_storage *s;
    TRY(tc_storage_alloc(hi - lo, &s));
    tc_status st = tc_device_copy_bytes(TC_CPU, s->data, t->device, (char *)t->storage->data + lo, (size_t)(hi - lo));
    if (!st) st = tc_tensor_new_view(s, (tc_dtype)t->dtype, t->offset - lo / tc_elsize(t->dtype), t->ndim, t->size,
                                     t->stride, out);
    tc_storage_release(s);
    if (span_lo) *span_lo = lo;
    return st;
}

tc_status tc_host_values_for(const char *op, const tc_tensor *t, tc_tensor **out)
{
    if (t->device != TC_CPU && tc_tensor_numel(t) > 0 && t->storage)
        TRY(tc_cuda_capture_refuse(op, t->device, "read device values on the host",
                                   "the op checks or counts them first; a graph cannot wait for values"));
    return tc_host_values(t, out);
}

tc_status tc_host_values(const tc_tensor *t, tc_tensor **out)
{
    if (t->device == TC_CPU || tc_tensor_numel(t) == 0 || !t->storage) {
        if (t->device == TC_CPU) {
            tc_tensor_retain((tc_tensor *)t);
            *out = (tc_tensor *)t;
            return TC_OK;
        }
        if (!t->storage) return tc_tensor_new_empty((tc_dtype)t->dtype, out);
        return tc_tensor_alloc((tc_dtype)t->dtype, t->ndim, t->size, out); /* no elements, same shape */
    }
    return span_to_host(t, out, NULL);
}

/* dst (on a device) takes the values of src (on the host): Torch7 copy rules (dtype
 * conversion, equal numel or broadcast) applied by the CPU kernel. */
static tc_status copy_host_to_device(tc_tensor *dst, const tc_tensor *src, const tc_params *p)
{
    if (tc_tensor_numel(dst) == 0) return TC_OK;
    if (tc_tensor_is_contiguous(dst) && tc_tensor_is_contiguous(src) && src->dtype == dst->dtype &&
        tc_tensor_numel(src) == tc_tensor_numel(dst))
        return tc_device_copy_bytes(dst->device, tc_base(dst), TC_CPU, tc_base(src),
                                    (size_t)(tc_tensor_numel(dst) * tc_elsize(dst->dtype)));
    tc_tensor *h;
    int64_t lo;
    if (tc_tensor_is_contiguous(dst)) { /* nothing between its elements to preserve */
        TRY(tc_tensor_alloc(dst->dtype, dst->ndim, dst->size, &h));
        lo = dst->offset * tc_elsize(dst->dtype);
    } else {
        TRY(span_to_host(dst, &h, &lo));
    }
    const tc_tensor *in[1] = {src};
    tc_tensor *res[1] = {h};
    tc_status s = tc_op_exec(TC_OP_COPY, in, 1, p, res, 1);
    if (!s) {
        int64_t a, b;
        tc_tensor_byte_span(h, &a, &b);
        s = tc_device_copy_bytes(dst->device, (char *)dst->storage->data + lo, TC_CPU, (char *)h->storage->data + a,
                                 (size_t)(b - a));
    }
    tc_tensor_release(h);
    return s;
}

tc_status tc_copy_across_devices(const tc_kcall *k)
{
    tc_tensor *dst = k->out[0], *h;
    TRY(tc_host_values(k->in[0], &h));
    tc_status s;
    if (dst->device == TC_CPU) {
        const tc_tensor *in[1] = {h};
        tc_tensor *res[1] = {dst};
        s = tc_op_exec(TC_OP_COPY, in, 1, k->p, res, 1);
    } else {
        s = copy_host_to_device(dst, h, k->p);
    }
    tc_tensor_release(h);
    return s;
}

tc_status tc_tensor_to(const tc_tensor *t, int device, int dt, tc_tensor **out)
{
    if (!t || !out) return tc_set_error(TC_ERR_ARG, "to: NULL argument");
    if (dt < -1 || dt >= TC_DTYPE_COUNT) return tc_set_error(TC_ERR_DTYPE, "to: invalid dtype %d", dt);
    if (dt < 0) dt = t->dtype;
    if (device != TC_CPU) TRY(tc_cuda_check_device("to", device));
    if (!t->storage) return tc_tensor_new_empty_on(device, (tc_dtype)dt, out);
    tc_tensor *r;
    TRY(tc_tensor_alloc_on(device, (tc_dtype)dt, t->ndim, t->size, &r));
    const tc_tensor *in[1] = {t};
    tc_tensor *res[1] = {r};
    /* while a trace records, the copy is one of its ops (a graph replays a :long() or
     * :cuda() of a traced value instead of capturing this run's result); not differentiable
     * here, as in eager mode */
    tc_status s;
    if (tc_trace_active) {
        int gm = tc_set_grad_enabled(0);
        s = tc_op_run(TC_OP_COPY, in, 1, NULL, res, 1);
        tc_set_grad_enabled(gm);
    } else {
        s = tc_op_exec(TC_OP_COPY, in, 1, NULL, res, 1);
    }
    if (s) {
        tc_tensor_release(r);
        return s;
    }
    *out = r;
    return TC_OK;
}

/* ---- flags and counters --------------------------------------------------------------- */

static int64_t g_flags[TC_CUDA_FLAG_COUNT] = {[TC_CUDA_FLAG_HOST_FALLBACK] = 1, [TC_CUDA_FLAG_CUDNN] = 1};
static int64_t g_fallbacks[TC_OP_COUNT];

tc_status tc_cuda_set_flag(int flag, int64_t value)
{
    if (flag < 0 || flag >= TC_CUDA_FLAG_COUNT) return tc_set_error(TC_ERR_ARG, "cuda set_flag: unknown flag %d", flag);
    if (flag != TC_CUDA_FLAG_HOST_FALLBACK) {
        /* The backend's switches apply when it loads; without CUDA they are only kept. */
        const tc_cuda_api *api;
        if (tc_cuda_api_get(&api) == TC_OK) TRY(tc_cuda_backend_status(api, api->set_flag(flag, value)));
    }
    __atomic_store_n(&g_flags[flag], value, __ATOMIC_RELAXED);
    return TC_OK;
}

int64_t tc_cuda_get_flag(int flag)
{
    return flag >= 0 && flag < TC_CUDA_FLAG_COUNT ? __atomic_load_n(&g_flags[flag], __ATOMIC_RELAXED) : 0;
}

int64_t tc_cuda_host_fallbacks(int op)
{
    if (op >= 0 && op < TC_OP_COUNT) return __atomic_load_n(&g_fallbacks[op], __ATOMIC_RELAXED);
    int64_t n = 0;
    for (int i = 0; i < TC_OP_COUNT; i++) n += __atomic_load_n(&g_fallbacks[i], __ATOMIC_RELAXED);
    return n;
}

tc_status tc_cuda_synchronize(int dev)
{
    const tc_cuda_api *api;
    TRY(tc_cuda_capture_refuse("cuda synchronize", dev == -1 ? TC_CPU : TC_DEVICE_CUDA(dev), "wait for the device",
                               "a host wait cannot be recorded in a graph"));
    if (dev == -1) {
        tc_status s = tc_cuda_need("synchronize", 0, &api);
        for (int d = 0; !s && d < tc_cuda_device_count(); d++) s = tc_cuda_waited(api, d, api->synchronize(d));
        return s ? s : tc_cuda_record_drain(-1);
    }
    TRY(tc_cuda_need("synchronize", dev, &api));
    TRY(tc_cuda_waited(api, dev, api->synchronize(dev)));
    return tc_cuda_record_drain(dev); /* their events are complete now: release the blocks */
}

/* ---- running an op on the host -------------------------------------------------------- */

/* Inputs and results cross to the host (results with their current contents: some ops
 * accumulate into them, and an in-place result is an input), the CPU kernel runs, and the
 * results cross back. Host copies of one tensor given twice are shared. declined: why the
 * CUDA backend did not run the call (its message), named when a capture refuses the
 * fallback -- there it is the reason the op cannot be captured. */
static tc_status host_fallback(const tc_kcall *k, int device, const char *declined)
{
    enum { MAXT = 512 };
    char what[400];
    snprintf(what, sizeof what, "run on the host (the CUDA backend declined it: %s)",
             declined && *declined ? declined : "no CUDA kernel for it here");
    TRY(tc_cuda_capture_refuse(k->info->name, device, what,
                               "the host fallback copies values to the host and back, which a graph cannot record"));
    int n = k->nin + k->nout;
    if (n > MAXT) return tc_set_error(TC_ERR_UNSUPPORTED, "%s: too many inputs for the host fallback", k->info->name);
    const tc_tensor *orig[MAXT];
    tc_tensor *host[MAXT];
    tc_status s = TC_OK;
    int made = 0;
    for (int i = 0; i < n && !s; i++, made++) {
        const tc_tensor *t = i < k->nin ? k->in[i] : k->out[i - k->nin];
        orig[i] = t;
        host[i] = NULL;
        if (!t) continue;
        for (int j = 0; j < i; j++)
            if (orig[j] == t) {
                tc_tensor_retain(host[j]);
                host[i] = host[j];
            }
        if (!host[i]) s = tc_host_values(t, &host[i]);
    }
    if (!s) {
        tc_tensor *hout[2] = {host[k->nin], k->nout > 1 ? host[k->nin + 1] : NULL};
        s = tc_op_exec(k->op, (const tc_tensor *const *)host, k->nin, k->p, hout, k->info->nout);
        for (int o = 0; !s && o < k->nout; o++) s = copy_host_to_device(k->out[o], hout[o], NULL);
        /* A second result the call did not ask for (max without indices) was made fresh. */
        if (!s && k->info->nout > 1 && k->nout < 2 && hout[1]) tc_tensor_release(hout[1]);
    }
    for (int i = 0; i < made; i++) tc_tensor_release(host[i]);
    if (!s) __atomic_add_fetch(&g_fallbacks[k->op], 1, __ATOMIC_RELAXED);
    return s;
}

/* ---- the CUDA kernel of every op ------------------------------------------------------ */

static void view_of(const tc_tensor *t, tc_cuda_view *v)
{
    memset(v, 0, sizeof *v);
    if (!t) return;
    v->data = tc_base(t);
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    memcpy(v->size, t->size, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(v->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    v->numel = tc_numel_of(t->ndim, t->size);
    if (v->numel == 0) v->data = NULL;
}

/* The view of in seen with out's sizes: broadcast (stride 0) for EW and where; for a copy
 * between shapes of equal numel, the contiguous input re-read in out's shape. */
static void view_as_output(const tc_tensor *in, const tc_tensor *out, tc_cuda_view *v)
{
    view_of(in, v);
    if (tc_same_shape(in, out)) return;
    v->ndim = out->ndim;
    memcpy(v->size, out->size, sizeof(int64_t) * (size_t)out->ndim);
    if (tc_numel_of(in->ndim, in->size) == tc_numel_of(out->ndim, out->size) && tc_tensor_is_contiguous(in) &&
        in->ndim != 0)
        tc_contiguous_strides(out->ndim, out->size, v->stride);
    else
        tc_broadcast_strides(in, out->ndim, out->size, v->stride);
    v->numel = tc_numel_of(out->ndim, out->size);
}

/* The Philox slots a random op draws, as the CPU kernel reserves them (cpu/random.c): one
 * per two elements for the elementwise samplers, one per step of randperm, one per sample
 * (with replacement) or per category (without) of each multinomial row. */
static uint64_t random_slots(const tc_kcall *k)
{
    int64_t n = tc_tensor_numel(k->out[0]);
    if (n == 0) return 0;
    if (k->op == TC_OP_RANDPERM) return (uint64_t)n;
    if (k->op == TC_OP_MULTINOMIAL) {
        const tc_tensor *p = k->in[0];
        int64_t rows = p->ndim == 2 ? p->size[0] : 1, ncat = p->size[p->ndim - 1];
        return (uint64_t)(rows * (k->p->i[1] ? k->p->i[0] : ncat));
    }
    return ((uint64_t)n + 1) / 2;
}

/* Random ops inside a capture: randperm waits for the device between its rounds and
 * multinomial's probabilities are checked on the host, which a graph cannot record (the
 * generator check is cuda_kernel's, with the slots). */
static tc_status random_capturable(const tc_kcall *k, int device)
{
    if (k->op != TC_OP_RANDPERM && k->op != TC_OP_MULTINOMIAL) return TC_OK;
    return tc_cuda_capture_refuse(k->info->name, device, "wait for the device",
                                  "randperm reads how many swaps are left between its rounds and multinomial checks its "
                                  "probabilities on the host; draw them outside the capture and pass them in");
}

static tc_status cuda_kernel(const tc_kcall *k)
{
    const tc_cuda_api *api;
    int device = k->out[0] ? k->out[0]->device : TC_CPU;
    for (int i = 0; i < k->nin; i++)
        if (k->in[i] && TC_DEVICE_IS_CUDA(k->in[i]->device)) device = k->in[i]->device;
    if (k->info->kind == TC_KIND_CONVERT && k->in[0]->device != k->out[0]->device) return tc_copy_across_devices(k);
    int dev = TC_DEVICE_ORDINAL(device);
    TRY(tc_cuda_need(k->info->name, dev, &api));

    /* A copy between shapes of equal numel from a strided input: make it contiguous first. */
    if (k->info->kind == TC_KIND_CONVERT && !tc_same_shape(k->in[0], k->out[0]) &&
        tc_tensor_numel(k->in[0]) == tc_tensor_numel(k->out[0]) && !tc_tensor_is_contiguous(k->in[0])) {
        tc_tensor *c;
        TRY(tc_tensor_to(k->in[0], k->in[0]->device, -1, &c));
        const tc_tensor *in[1] = {c};
        tc_kcall k2 = *k;
        k2.in = in;
        tc_status s = cuda_kernel(&k2);
        tc_tensor_release(c);
        return s;
    }

    if (k->nin > TC_CUDA_MAX_INPUTS) {
        char why[160];
        snprintf(why, sizeof why, "%s: no CUDA kernel for %d inputs (at most %d)", k->info->name, k->nin,
                 TC_CUDA_MAX_INPUTS);
        if (!tc_cuda_get_flag(TC_CUDA_FLAG_HOST_FALLBACK)) return tc_set_error(TC_ERR_UNSUPPORTED, "%s", why);
        return host_fallback(k, device, why);
    }
    if (k->info->kind == TC_KIND_RANDOM) TRY(random_capturable(k, device));
    tc_cuda_view small[8], *views = small;
    if (k->nin > 8) {
        views = tc_malloc(sizeof *views * (size_t)k->nin, k->info->name);
        if (!views) return TC_ERR_MEMORY;
    }
    tc_cuda_call call;
    memset(&call, 0, sizeof call);
    call.op = k->op, call.nin = k->nin, call.nout = k->nout, call.in = views;
    call.params = *k->p;
    call.params.gen = NULL;
    bool shaped = k->info->kind == TC_KIND_EW || k->info->kind == TC_KIND_SELECT || k->info->kind == TC_KIND_CONVERT;
    for (int i = 0; i < k->nin; i++) {
        if (shaped && k->in[i]) view_as_output(k->in[i], k->out[0], &views[i]);
        else view_of(k->in[i], &views[i]);
    }
    for (int o = 0; o < k->nout; o++) view_of(k->out[o], &call.out[o]);

    /* Random ops: the CPU kernel's slots (random_slots); given back when the backend
     * declines, so the host fallback draws the same numbers. Captured: the slots are the
     * capture's (cuda_stream.c), the generator is not touched. */
    uint8_t saved[64];
    size_t saved_n = 0;
    tc_generator *gen = k->p->gen ? k->p->gen : tc_generator_default();
    uint64_t nslots = k->info->kind == TC_KIND_RANDOM ? random_slots(k) : 0;
    bool draws = nslots > 0;
    int captured = draws ? tc_cuda_capture_philox(dev, k->p->gen, nslots, &call.philox_key, &call.philox_base) : 0;
    if (captured < 0) {
        if (views != small) free(views);
        return tc_cuda_capture_refuse(k->info->name, device, "draw from a generator other than the default one",
                                      "only the default generator's draws are captured: a replay takes fresh numbers "
                                      "from it; draw with it, or outside the capture and pass the numbers in");
    }
    if (captured) {
        draws = false; /* nothing to give back: a declined op fails the capture (host fallback) */
    } else if (draws) {
        saved_n = tc_generator_get_state(gen, saved, sizeof saved);
        call.philox_base = tc_generator_reserve(gen, nslots, &call.philox_seed);
    }
    tc_status s = api->run(dev, &call);
    if (s == TC_ERR_UNSUPPORTED && draws && saved_n <= sizeof saved) (void)tc_generator_set_state(gen, saved, saved_n);
    if (views != small) free(views);
    if (s != TC_ERR_UNSUPPORTED || !tc_cuda_get_flag(TC_CUDA_FLAG_HOST_FALLBACK))
        return tc_cuda_backend_status(api, s);
    return host_fallback(k, device, api->last_error());
}

#define TC_EW(ID, name, arity, nparams, flags, ffmt, ifmt) [TC_OP_##ID] = cuda_kernel,
#define TC_OPK(ID, name, kind, nin, nout, flags) [TC_OP_##ID] = cuda_kernel,
const tc_backend tc_cuda_backend = {
    .name = "cuda",
    .kernels = {
#include "ops.def"
    },
};
#undef TC_EW
#undef TC_OPK
