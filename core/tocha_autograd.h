/* tocha_autograd.h -- the public C API of autograd (included by tocha.h; part of the
 * ffi.cdef): grad mode, per-tensor autograd state, backward / grad, hooks, anomaly mode.
 *
 * The tape: when grad mode is on and an input of a differentiable op requires grad,
 * tc_op_run records a node (core/autograd/node.c) on the op's float outputs; backward
 * (core/autograd/engine.c) walks those nodes in reverse and runs the op's gradient rule
 * (core/autograd/grad.h). Grad mode is per thread.
 */

/* Bits of tc_tensor.flags (read directly by the Lua binding: keep their values). */
enum {
    TC_TF_REQUIRES_GRAD = 1, /* a leaf that requires grad, or a tensor with a grad_fn */
    TC_TF_META = 2,          /* autograd points to a meta record (else to its grad_fn node) */
    TC_TF_VIEW_OF_GRAD = 4,  /* a view made from a tensor that requires grad */
    TC_TF_SCRATCH = 8        /* values change outside tc_op_run (the binding's reused scalar
                                operands): autograd saves a copy, never an alias */
};

/* Grad mode of this thread (on by default). set returns the previous value. */
int tc_grad_enabled(void);
int tc_set_grad_enabled(int on);

/* Leaf flag. Only float tensors can require grad (TC_ERR_DTYPE otherwise); a tensor with a
 * grad_fn (a non-leaf) can only be set to requires_grad true (PyTorch: use detach()). */
tc_status tc_tensor_set_requires_grad(tc_tensor *t, int on);
int tc_tensor_requires_grad(const tc_tensor *t);
/* 1 when t has no grad_fn (whether or not it requires grad). */
int tc_tensor_is_leaf(const tc_tensor *t);
/* The accumulated gradient: a new reference, or NULL when none. */
tc_tensor *tc_tensor_grad(const tc_tensor *t);
/* Sets (g retained; the same header, so a later accumulation writes into g) or clears (g
 * NULL) the gradient. g must have t's dtype and sizes. */
tc_status tc_tensor_set_grad(tc_tensor *t, tc_tensor *g);
/* A new header on t's storage and geometry, with no history and not requiring grad. */
tc_status tc_tensor_detach(const tc_tensor *t, tc_tensor **out);
/* Non-leaf t keeps its gradient in .grad after backward (no-op on leaves). */
tc_status tc_tensor_retain_grad(tc_tensor *t);
/* The name of t's grad_fn ("MulBackward"), or NULL for leaves and tensors without history. */
const char *tc_tensor_grad_fn_name(const tc_tensor *t);

/* Computes the gradients of roots[0..n) and accumulates them into the .grad of the leaves
 * that require grad (and of non-leaves that retain grad). grads[i] may be NULL (or grads
 * NULL) only for single-element roots: an implicit gradient of 1. retain_graph 0 frees the
 * saved tensors of the nodes it ran; create_graph 1 records the backward pass itself so
 * the gradients can be differentiated again. Leaf .grad values change only on success. */
tc_status tc_autograd_backward(const tc_tensor *const *roots, const tc_tensor *const *grads, int n,
                               int retain_graph, int create_graph);
/* Flags of tc_autograd_grad. STOP_AT_INPUTS gives partial derivatives: a gradient reaching
 * an input is captured and not passed on into the input's own history, so when one input
 * depends on another, the path through the first is not counted again in the second
 * (Torch7's module-local backward). */
enum { TC_GRAD_ALLOW_UNUSED = 1, TC_GRAD_STOP_AT_INPUTS = 2 };
/* Gradients of outputs[0..nout) (with grad_outputs as for backward) with respect to
 * inputs[0..nin), returned in grads_out[0..nin) as new references; .grad is not touched.
 * Only the part of the graph that reaches the inputs runs. An input that no output depends
 * on is an error unless flags has TC_GRAD_ALLOW_UNUSED (its slot is then NULL). */
tc_status tc_autograd_grad(const tc_tensor *const *outputs, const tc_tensor *const *grad_outputs, int nout,
                           const tc_tensor *const *inputs, int nin, int retain_graph, int create_graph,
                           int flags, tc_tensor **grads_out);

/* Hooks. C holds no Lua objects, so a hook is an integer id; the binding installs one
 * runner that maps ids to functions. The runner gets the gradient flowing into the tensor
 * and may store a replacement (a new reference with the same sizes) in *replacement. A
 * runner failure (status != TC_OK, message set) fails the backward. */
typedef tc_status (*tc_hook_runner)(int64_t id, tc_tensor *grad, tc_tensor **replacement);
void tc_autograd_set_hook_runner(tc_hook_runner fn);
/* Adds hook id to t (which must require grad). Hooks run in the order added, before the
 * gradient is accumulated into a leaf or passed on from a non-leaf. */
tc_status tc_tensor_add_hook(tc_tensor *t, int64_t id);
/* Removes hook id from t; 0 when t does not carry it. */
int tc_tensor_remove_hook(tc_tensor *t, int64_t id);

/* Anomaly mode (process-wide, off by default): an op whose float result has NaN while its
 * inputs had none fails naming the op and the input sizes, and so does a backward rule
 * producing NaN ("<Op>Backward"). set returns the previous value. */
int tc_autograd_set_anomaly(int on);
int tc_autograd_anomaly(void);

/* Test and diagnostics: nodes alive now (every recorded node is freed once no tensor or
 * node refers to it). */
int64_t tc_autograd_live_nodes(void);
