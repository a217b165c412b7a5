/* join.c -- the CPU kernel of the join kind: cat(list; dim).
 *
 * Each input is copied into its slice of the result along dim through the convert kernel
 * (coalesced, threaded, any strides), so this file only does the slicing. Inputs that the
 * prepare step skipped (1-D and Torch7 empty tensors) contribute nothing here either.
 */
#include "../internal.h"

static tc_status copy_into(tc_tensor *dst, const tc_tensor *src)
{
    static const tc_params keep = {.i = {-1}};
    const tc_tensor *in[1] = {src};
    tc_tensor *out[1] = {dst};
    tc_kcall c = {.op = TC_OP_COPY, .info = tc_op_info(TC_OP_COPY), .in = in, .nin = 1, .p = &keep, .out = out,
                  .nout = 1};
    return tc_cpu_convert(&c);
}

/* Copies every non-empty input into consecutive slices of out along dim. */
static tc_status fill_slices(const tc_kcall *k, tc_tensor *out, int dim)
{
    int64_t at = 0;
    for (int i = 0; i < k->nin; i++) {
        const tc_tensor *t = k->in[i];
        if (t->ndim != out->ndim || tc_tensor_numel(t) == 0) continue; /* skipped empties */
        tc_tensor slice = *out; /* a walk-only header over out's storage, not refcounted */
        slice.offset += at * out->stride[dim];
        slice.size[dim] = t->size[dim];
        TRY(copy_into(&slice, t));
        at += t->size[dim];
    }
    return TC_OK;
}

tc_status tc_cpu_join(const tc_kcall *k)
{
    tc_tensor *out = k->out[0];
    if (tc_tensor_numel(out) == 0) return TC_OK;
    int dim = (int)(k->p->i[0] < 0 ? k->p->i[0] + out->ndim : k->p->i[0]);
    /* A result overlapping an input (cat(x, {x, y})) is built aside and copied in, so no
     * input is overwritten before it is read. Overlap means shared bytes, not a shared
     * storage: a compiled graph keeps all its values in one arena storage, and copying
     * aside there cost the LSTM LM step 54 MB of allocations and copies. */
    bool overlap = false;
    for (int i = 0; i < k->nin; i++)
        if (tc_tensor_overlaps(k->in[i], out)) overlap = true;
    if (!overlap) return fill_slices(k, out, dim);
    tc_tensor *tmp;
    TRY(tc_tensor_alloc((tc_dtype)out->dtype, out->ndim, out->size, &tmp));
    tc_status s = fill_slices(k, tmp, dim);
    if (s == TC_OK) s = copy_into(out, tmp);
    tc_tensor_release(tmp);
    return s;
}
