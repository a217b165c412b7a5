/* trace.h -- the tracer's internal interface (core/graph/trace.c) for the parts of the
 * core that build graphs around it: control flow (control.c) traces subgraphs while the
 * outer trace is suspended, and the autograd machinery records the few calls it makes on
 * the kernel path (a saved input's copy).
 *
 * Values: the tracer keys every tensor it has seen by (storage, storage version, dtype,
 * offset, sizes, strides) to a graph value id. A tensor it has never seen becomes, when
 * looked up, an EXTERNAL value (captured: read by reference at every run), or a CONST
 * snapshot for the binding's scratch scalars (TC_TF_SCRATCH).
 */
#ifndef TC_GRAPH_TRACE_H
#define TC_GRAPH_TRACE_H

#include "graph.h"

/* The value of t in g's trace (g must be being traced: active or suspended), creating an
 * EXTERNAL / CONST value for a tensor never seen. Fails (with advice) for a header that
 * views a traced buffer the trace cannot name (a stale view after an in-place write). */
tc_status tc_trace_lookup(tc_graph *g, const tc_tensor *t, int32_t *val);
/* The value of t when the trace has seen it, else -1 (creates nothing). */
int32_t tc_trace_find(tc_graph *g, const tc_tensor *t);
/* Keys t to the existing value val (a node that is not an op call produced t: a cond or
 * while node). val must match t's dtype and sizes. */
tc_status tc_trace_bind(tc_graph *g, const tc_tensor *t, int32_t val);
/* Stops recording the current trace of this thread without ending it and returns it (NULL
 * when none); tc_trace_resume(g) restarts it. Between the two, another trace may be begun
 * and ended (a subgraph). */
tc_graph *tc_trace_suspend(void);
void tc_trace_resume(tc_graph *g);
/* Whether g is being traced shape-only (tc_trace_shape_only). */
bool tc_trace_is_shape_only(const tc_graph *g);
/* For calls the autograd machinery makes on the kernel path of a traced call (node.c's
 * copy of a saved input the call overwrites): recorded like an op of the trace when a
 * traced call is executing on this thread, else plain tc_op_exec. Never goes through
 * autograd. Results must be fresh (out slots NULL or unseen tensors of version 0). */
tc_status tc_trace_exec_nested(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                               int nout);

/* Tracer-internal (trace_view.c): view nodes turning value root (whose tensor has r's
 * geometry, at its buffer's current version) into t's elements (narrow/select/permute/
 * unsqueeze, view-narrow-view, or a relative as_strided of a contiguous root). *val
 * receives the last value (root itself when t has r's elements). TC_ERR_ARG without a
 * message when impossible; the graph is then unchanged. */
tc_status tc_trace_derive_view(tc_graph *g, int32_t root, const tc_tensor *r, const tc_tensor *t, int32_t *val);

#endif /* TC_GRAPH_TRACE_H */
