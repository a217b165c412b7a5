/* control.h -- building control-flow nodes (core/graph/control.c), for the tracer's
 * control-flow entries and for tests that build graphs by hand.
 */
#ifndef TC_GRAPH_CONTROL_H
#define TC_GRAPH_CONTROL_H

#include "graph.h"

/* Appends a TC_GOP_COND node (in = {pred, operands...}, sub = {then, else}) or a
 * TC_GOP_WHILE node (in = {state..., invariants...}, sub = {cond, body}; both take every
 * input, the body returns the next state: as many tensors as the node has results) to g,
 * after checking the subgraphs' signatures against the inputs (counts, dtypes, sizes; a
 * one-element predicate). The node's outputs take the then-branch's result types (cond) or
 * the state's (while); outs (may be NULL) receives their value ids. On success g owns the
 * subgraphs; on failure nothing changes and the caller still owns them. */
tc_status tc_graph_add_control(tc_graph *g, int32_t op, const int32_t *in, int nin, tc_graph *const *sub, int nsub,
                               int32_t *outs);

#endif /* TC_GRAPH_CONTROL_H */
