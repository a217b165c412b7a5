/* half.c -- f16/bf16 on the CPU compute in f32: the one wrapper every CPU family uses for
 * half tensors, and the slow strided element walker for non-critical kernels. */
#include "../internal.h"

bool tc_kcall_has_half(const tc_kcall *k)
{
    for (int i = 0; i < k->nin; i++)
        if (k->in[i] && tc_is_half(k->in[i]->dtype)) return true;
    for (int i = 0; i < k->nout; i++)
        if (k->out[i] && tc_is_half(k->out[i]->dtype)) return true;
    return false;
}

static tc_status to_f32(const tc_tensor *t, tc_tensor **out)
{
    tc_params p = {.i = {TC_F32}};
    *out = NULL;
    return tc_op_run(TC_OP_COPY, &t, 1, &p, out, 1);
}

tc_status tc_cpu_with_f32(const tc_kcall *k, tc_kernel fn)
{
    enum { MAXT = 12 }; /* rnn_backward has 9 inputs */
    const tc_tensor *in[MAXT] = {0};
    tc_tensor *out[2] = {0}, *tmp[MAXT + 2] = {0};
    int ntmp = 0;
    tc_status s = TC_OK;
    if (k->nin > MAXT) return tc_set_error(TC_ERR_UNSUPPORTED, "%s: too many half inputs", k->info->name);
    for (int i = 0; i < k->nin; i++) {
        in[i] = k->in[i];
        if (in[i] && tc_is_half(in[i]->dtype)) {
            if ((s = to_f32(in[i], &tmp[ntmp]))) goto done;
            in[i] = tmp[ntmp++];
        }
    }
    for (int o = 0; o < k->nout; o++) {
        out[o] = k->out[o];
        if (!out[o] || !tc_is_half(out[o]->dtype)) continue;
        int alias = -1; /* an in-place output shares its input's f32 copy */
        for (int i = 0; i < k->nin; i++)
            if (k->in[i] == k->out[o]) alias = i;
        if (alias >= 0) {
            out[o] = (tc_tensor *)in[alias];
        } else {
            if ((s = to_f32(k->out[o], &tmp[ntmp]))) goto done;
            out[o] = tmp[ntmp++];
        }
    }
    tc_kcall k32 = *k;
    k32.in = in;
    k32.out = out;
    if ((s = fn(&k32))) goto done;
    for (int o = 0; o < k->nout; o++) {
        if (!k->out[o] || out[o] == k->out[o]) continue;
        tc_tensor *dst = k->out[o];
        if ((s = tc_op_run(TC_OP_COPY, (const tc_tensor *const *)&out[o], 1, NULL, &dst, 1))) goto done;
    }
done:
    for (int i = 0; i < ntmp; i++) tc_tensor_release(tmp[i]);
    return s;
}

void tc_elem_iter_init(tc_elem_iter *it, const tc_tensor *t)
{
    int64_t es = (int64_t)tc_dtype_size((tc_dtype)t->dtype);
    it->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        it->size[d] = t->size[d];
        it->stride_bytes[d] = t->stride[d] * es;
        it->index[d] = 0;
    }
    it->ptr = tc_base(t);
    it->remaining = tc_tensor_numel(t);
}

char *tc_elem_iter_next(tc_elem_iter *it)
{
    if (it->remaining <= 0) return NULL;
    char *cur = it->ptr;
    it->remaining--;
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->index[d] < it->size[d]) {
            it->ptr += it->stride_bytes[d];
            break;
        }
        it->ptr -= (it->size[d] - 1) * it->stride_bytes[d];
        it->index[d] = 0;
    }
    return cur;
}
