/* tocha_control.h -- the public C API of graph-mode control flow (included by tocha.h;
 * part of the ffi.cdef): the entries lua/tocha/control.lua uses to record tocha.cond and
 * tocha.while_loop into the graph being traced (core/graph/control.c).
 *
 * A branch (or a loop's condition and body) is traced as a SUBGRAPH: the current trace is
 * suspended, a new trace records the function with its operands declared as the subgraph's
 * inputs, then the outer trace resumes. One COND / WHILE node is then added to the outer
 * graph; at run time it reads its predicate from a tensor and runs only the subgraph it
 * needs (the untaken branch never runs; a loop runs until its condition is false).
 */

/* Suspends the trace active on this thread and begins a subgraph trace (*sub, owned by the
 * caller until handed to tc_control_cond / tc_control_while or freed). Nesting depth is
 * limited (16). */
tc_status tc_control_sub_begin(tc_graph **sub);
/* Ends the subgraph trace begun last and resumes the suspended trace (also when the
 * subgraph's trace failed: then its first error is returned and sub is unusable). */
tc_status tc_control_sub_end(tc_graph *sub);
/* Frees a subgraph that will not be handed to a node (what the trace noted about it too). */
void tc_control_sub_free(tc_graph *sub);

/* Adds cond(pred, then_g, else_g)(operands) to the active trace and runs it on the real
 * tensors: results[0..nres) receive new references, keyed to the node's outputs. Tensors
 * of the active trace that a subgraph captured by closure become extra inputs of the node
 * (and of both subgraphs) rather than trace-time constants. Under grad mode, when an
 * operand or a captured tensor requires grad, the results get an autograd node whose
 * backward is recorded as control nodes too (core/graph/control_grad.c). pred: a
 * one-element tensor (nonzero: then). Both branches take the nops operands as inputs and
 * return nres results of the same dtypes and sizes. Takes ownership of then_g and else_g
 * (freed on failure). */
tc_status tc_control_cond(tc_graph *then_g, tc_graph *else_g, const tc_tensor *pred, const tc_tensor *const *operands,
                          int nops, tc_tensor **results, int nres);
/* Adds while(cond_g, body_g)(state) to the active trace and runs it: cond_g maps the n
 * state tensors to one one-element tensor (nonzero: run the body again), body_g maps them
 * to the next state (same dtypes and sizes). results[0..n) receive the final state
 * (differentiable as for tc_control_cond). Takes ownership of cond_g and body_g (freed on
 * failure). */
tc_status tc_control_while(tc_graph *cond_g, tc_graph *body_g, const tc_tensor *const *state, int n,
                           tc_tensor **results);
