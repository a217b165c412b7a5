/* ops.cu -- run() of the backend table: one validated op call (cuda_api.h, tc_cuda_call)
 * handed to the launcher of its kind. Each kind's kernels live in their own file; a kind
 * or dtype without a kernel answers TC_ERR_UNSUPPORTED through cu_unsupported, which
 * libtocha's dispatcher reads as "run it on the host" (TC_CUDA_FLAG_HOST_FALLBACK).
 */
#include "cuda_internal.h"
#include "dnn_select.h"

/* Names and kinds from ops.def: this library does not link libtocha (tc_op_info). */
static const struct { const char *name; int kind; } op_rows[] = {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) {nm, TC_KIND_EW},
#define TC_OPK(ID, nm, kind, nin, nout, fl) {nm, TC_KIND_##kind},
#include "../ops.def"
#undef TC_EW
#undef TC_OPK
};
static_assert(sizeof op_rows / sizeof op_rows[0] == TC_OP_COUNT, "one row per op");

const char *cu_op_name(int op) { return op >= 0 && op < TC_OP_COUNT ? op_rows[op].name : "op"; }

const char *cu_dtype_name(int dt)
{
    switch (dt) { /* as tc_dtype_name */
    case TC_F32: return "float32";
    case TC_F64: return "float64";
    case TC_F16: return "float16";
    case TC_BF16: return "bfloat16";
    case TC_U8: return "uint8";
    case TC_I8: return "int8";
    case TC_I16: return "int16";
    case TC_I32: return "int32";
    case TC_I64: return "int64";
    case TC_BOOL: return "bool";
    default: return "?";
    }
}

tc_status cu_unsupported(const tc_cuda_call *c)
{
    int dt = c->nin > 0 && c->in[0].data ? c->in[0].dtype : c->out[0].dtype;
    return cu_fail(TC_ERR_UNSUPPORTED, "%s: no CUDA kernel for %s", cu_op_name(c->op), cu_dtype_name(dt));
}

/* Softmax and pooling try cuDNN first (TC_CUDA_FLAG_CUDNN; dnn_select.h says which calls it
 * takes); a call it does not take, or refuses, runs our own kernel. */
static tc_status dnn_first(tc_status (*dnn)(int, const tc_cuda_call *, bool *),
                           tc_status (*own)(int, const tc_cuda_call *), int dev, const tc_cuda_call *c)
{
    bool done = false;
    tc_status s = dnn(dev, c, &done);
    return s || done ? s : own(dev, c);
}

tc_status cu_run(int dev, const tc_cuda_call *c)
{
    if (!c || c->op < 0 || c->op >= TC_OP_COUNT) return cu_fail(TC_ERR_ARG, "cuda run: unknown op");
    tc_status s = cu_use_device(dev);
    if (s) return s;
    switch (op_rows[c->op].kind) {
    case TC_KIND_EW: return cu_op_ew(dev, c);
    case TC_KIND_CONVERT: return cu_op_convert(dev, c);
    case TC_KIND_SELECT: return cu_op_select(dev, c);
    case TC_KIND_REDUCE: return cu_op_reduce(dev, c);
    case TC_KIND_SCAN: return cu_op_scan(dev, c);
    case TC_KIND_SOFTMAX: return dnn_first(cu_dnn_softmax, cu_op_softmax, dev, c);
    case TC_KIND_RANDOM: return cu_op_random(dev, c);
    case TC_KIND_INDEX: return cu_op_index(dev, c);
    case TC_KIND_SORT: return cu_op_sort(dev, c);
    case TC_KIND_JOIN: return cu_op_join(dev, c);
    case TC_KIND_MATMUL: return cu_op_matmul(dev, c);
    case TC_KIND_CONV: return cu_op_conv(dev, c);
    case TC_KIND_POOL: return dnn_first(cu_dnn_pool, cu_op_pool, dev, c);
    case TC_KIND_NORM: return cu_op_norm(dev, c);
    case TC_KIND_RNN: return cu_op_rnn(dev, c);
    case TC_KIND_ATTN: return cu_op_attn(dev, c);
    case TC_KIND_OPTIM: return cu_op_optim(dev, c);
    default: return cu_unsupported(c); /* views never reach a backend: they copy nothing */
    }
}
