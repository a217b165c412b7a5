/* nn.h -- what the CPU nn kernels (conv.c, pool.c, softmax.c) share: contiguous operands
 * and results. The kernels read and write dense row-major memory only; these helpers
 * copy a strided operand in, and a computed result out to a strided destination, with
 * the elementwise engine (never through tc_op_run: a kernel must not be recorded by
 * autograd). f16/bf16 never reach here (tc_cpu_with_f32 converts them). */
#ifndef TC_CPU_NN_H
#define TC_CPU_NN_H
#include "../internal.h"

/* *use = t when t is contiguous, else a new contiguous copy stored in *tmp (release it). */
tc_status tc_nn_dense_in(const tc_tensor *t, tc_tensor **tmp, const tc_tensor **use);
/* *use = out when it is contiguous, else a new contiguous tensor of its size and dtype in
 * *tmp; tc_nn_dense_out_finish copies *tmp back into out. */
tc_status tc_nn_dense_out(tc_tensor *out, tc_tensor **tmp, tc_tensor **use);
void tc_nn_dense_out_finish(tc_tensor *out, tc_tensor *tmp);

#endif
