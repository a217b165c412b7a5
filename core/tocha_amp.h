/* tocha_amp.h -- the public C API of mixed precision (core/autocast.c; included by tocha.h,
 * part of the ffi.cdef): the autocast state of a thread, its op lists, the cast cache, and
 * the fused unscale-and-check that dynamic loss scaling (lua/optim/GradScaler.lua) runs.
 *
 * While autocast is on, tc_op_run casts the inputs of some ops before running them
 * (PyTorch's autocast, docs/amp.md):
 *   LOWER    matrix products and convolutions: float32 (and the other half type) inputs
 *            are cast to the autocast dtype, so the result is half;
 *   FP32     reductions, softmax, exp/log/pow-like ops: half inputs are cast to float32;
 *   PROMOTE  any other op whose float inputs differ in dtype: cast to the widest (a 0-dim
 *            tensor does not widen a sized one).
 * A given result tensor (Torch7's result argument, in-place calls) fixes the dtype: the
 * inputs are cast to its dtype instead. Casts are ordinary TC_OP_COPY calls through
 * tc_op_run, so autograd records them (gradients reach float32 parameters in float32) and
 * a graph trace records them as nodes. Backward passes never autocast. */

/* What autocast does to an op: one of these (tc_autocast_policy). */
typedef enum tc_autocast_class {
    TC_AUTOCAST_NONE = 0,   /* never cast (views, copies, random fills) */
    TC_AUTOCAST_LOWER = 1,  /* run in the autocast dtype */
    TC_AUTOCAST_FP32 = 2,   /* run in float32 */
    TC_AUTOCAST_PROMOTE = 3 /* mixed float inputs: cast to the widest */
} tc_autocast_class;

/* Sets this thread's autocast state: enabled 0/1, dtype TC_F16 or TC_BF16 (TC_ERR_ARG
 * otherwise, the state unchanged). prev_enabled / prev_dtype (may be NULL) receive the
 * state before the call, so a scope can restore it. Turning autocast off empties the
 * thread's cast cache. */
tc_status tc_autocast_set(int enabled, int dtype, int *prev_enabled, int *prev_dtype);
int tc_autocast_enabled(void);
/* The dtype autocast runs LOWER ops in (TC_F16 until set). */
int tc_autocast_dtype(void);
/* The class of op (a tc_op); TC_AUTOCAST_NONE for an unknown op. */
int tc_autocast_policy(int op);

/* The cast cache: while autocast is on, the cast of a float32 leaf that requires grad (a
 * parameter) is kept and reused until the leaf is written (its storage version changes),
 * so a weight used by several ops is cast once. Not used while a graph trace is recording.
 * set_cache_enabled returns the previous setting (on by default); clear releases every
 * entry of this thread; size counts them. */
int tc_autocast_set_cache_enabled(int on);
void tc_autocast_clear_cache(void);
int tc_autocast_cache_size(void);

/* Dynamic loss scaling's unscale: grads[i] *= inv_scale in place for each of the n
 * tensors (NULL entries skipped; float dtypes, any devices), and *max_abs = the largest
 * |element| over all of them: +inf or NaN when some element is not finite. Runs without
 * autograd or autocast; reads one number per device (never whole tensors). */
tc_status tc_amp_unscale(tc_tensor *const *grads, int n, double inv_scale, double *max_abs);
