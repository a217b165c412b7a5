/* control.h -- building control-flow nodes (core/graph/control.c), for the tracer's
 * control-flow entries and for tests that build graphs by hand.
 */
#ifndef TC_GRAPH_CONTROL_H
#define TC_GRAPH_CONTROL_H

#include "graph.h"
#include "../autograd/node.h"

/* Appends a TC_GOP_COND node (in = {pred, operands...}, sub = {then, else}) or a
 * TC_GOP_WHILE node (in = {state..., invariants...}, sub = {cond, body}; both take every
 * input, the body returns the next state: as many tensors as the node has results) to g,
 * after checking the subgraphs' signatures against the inputs (counts, dtypes, sizes; a
 * one-element predicate). The node's outputs take the then-branch's result types (cond) or
 * the state's (while); outs (may be NULL) receives their value ids. On success g owns the
 * subgraphs; on failure nothing changes and the caller still owns them. */
tc_status tc_graph_add_control(tc_graph *g, int32_t op, const int32_t *in, int nin, tc_graph *const *sub, int nsub,
                               int32_t *outs);

/* (TC_GOP_WHILE_GRAD: in = {state, invariants, seeds of the final state's float entries},
 * sub = {cond, body, vjp}; out = the vjp's results: see control_grad.c.) */

/* Runs (records into the active trace, when there is one) the control node op(sub)(ins)
 * and, with grad mode on and an input requiring grad, gives its float results an autograd
 * node. Tensors of the active trace that a subgraph captured by closure (and, under grad
 * mode, captured tensors that require grad) become extra inputs of the node. results
 * receive nres new references. Takes ownership of the subgraphs (freed on failure). */
tc_status tc_control_record(int32_t op, tc_graph **sub, int nsub, const tc_tensor *const *ins, int nin,
                            tc_tensor **results, int nres);
/* tc_control_sub_begin without the need for an active trace (a backward outside tocha.jit
 * traces its gradient subgraphs too). End with tc_control_sub_end. */
tc_status tc_control_sub_open(tc_graph **sub);
/* Reads a one-element predicate (nonzero: true); what names the node in errors. */
tc_status tc_control_read_pred(const char *what, const tc_tensor *t, bool *val);

/* ---- control_grad.c ---- */

/* A copy of src (nodes, values, nested subgraphs), uncompiled; externals and constants
 * share src's tensors (retained). */
tc_status tc_control_clone(const tc_graph *src, tc_graph **out);
/* Whether gradients can be derived through a node op(sub): refuses random ops and
 * write-backs in the subgraphs, and WHILE_GRAD (no second derivatives through a loop). */
tc_status tc_control_grad_check(int32_t op, tc_graph *const *sub, int nsub);
/* Gives res[0..nres) (a COND / WHILE node's results) an autograd node over ins[0..nin)
 * (gradients to edges[]); takes the subgraph clones sub[0..nsub). */
tc_status tc_control_grad_attach(int32_t op, tc_graph **sub, int nsub, const tc_tensor *const *ins,
                                 const tc_edge *edges, int nin, tc_tensor *const *res, int nres);
/* Runs sub's nodes through tc_op_run (autograd and an active trace record them; control
 * nodes through tc_control_record) on ins; outs receive new references to its results. */
tc_status tc_control_replay(const tc_graph *sub, tc_tensor *const *ins, tc_tensor **outs);
/* Runs a TC_GOP_WHILE_GRAD node (called by tc_control_run). */
tc_status tc_control_run_while_grad(const tc_gnode *n, tc_tensor *const *ins, tc_tensor **outs);

#endif /* TC_GRAPH_CONTROL_H */
