/* node.h -- the autograd tape's data structures, shared by node.c (recording, per-tensor
 * state, freeing) and engine.c (backward).
 *
 * A tensor that requires grad carries, in tc_tensor.autograd, either its grad_fn node
 * directly (the common case for op outputs: no allocation beyond the node; the output
 * number sits in bits 8..15 of tc_tensor.flags) or, with TC_TF_META set, a tc_meta record
 * (leaves, and non-leaves that own a .grad, retain grad or carry hooks).
 *
 * A node is one recorded op call: edges to the producers of its inputs (captured at record
 * time), the input/output shapes, and the saved tensors its rule reads. Leaves get an
 * accumulate node (op TC_NODE_ACC) that graph edges point to; the leaf's meta owns it and
 * the node points back weakly, so a graph never keeps a dead leaf's meta alive.
 *
 * A CUSTOM node (op TC_NODE_CUSTOM) has any number of inputs and outputs and a backward
 * function instead of an op-table rule: graph-mode control flow (core/graph/control_grad.c)
 * differentiates a recorded cond / while node this way.
 */
#ifndef TC_AG_NODE_H
#define TC_AG_NODE_H

#include "grad.h"

#define TC_NODE_ACC (-1)
#define TC_NODE_CUSTOM (-2)
#define TC_TF_NR_SHIFT 8
#define TC_NODE_MAX_OUT 255 /* the output number lives in 8 bits of tc_tensor.flags */

typedef struct tc_node tc_node;
typedef struct tc_meta tc_meta;

/* The backward of a custom node. gout[0..nout) are the gradients of its outputs (NULL:
 * zero), needs[i] says whether input i's gradient is wanted. For each wanted input the
 * function stores a new reference with n->meta[i]'s sizes and dtype in gin[i], or leaves
 * NULL (zero); on failure it releases what it stored. It runs with grad mode =
 * create_graph, like a rule, so the ops it calls are recorded when gradients of gradients
 * are wanted (and a graph trace records them too). */
typedef struct tc_custom_fn {
    const char *name; /* "CondBackward" */
    tc_status (*backward)(void *ctx, const tc_node *n, const tc_tensor *const *gout, const bool *needs,
                          tc_tensor **gin);
    void (*release)(void *ctx); /* frees ctx (the node's death, or a backward without retain_graph) */
} tc_custom_fn;

typedef struct tc_edge {
    tc_node *node; /* strong; NULL: the input does not require grad */
    int32_t nr;    /* which output of node */
} tc_edge;

/* A pre-hook on one output of a node: a binding hook id, or (id 0) a tensor that retains
 * its gradient (weak: the meta removes itself when freed). */
typedef struct tc_hook_entry {
    int64_t id;
    int32_t nr;
    tc_meta *retain;
} tc_hook_entry;

struct tc_meta {
    tc_node *grad_fn; /* strong; NULL for leaves */
    int32_t output_nr;
    int32_t retains_grad;
    tc_node *acc;    /* leaves: the accumulate node (strong), made on first use */
    tc_tensor *grad; /* strong */
};

struct tc_node {
    int32_t refcount; /* atomic */
    int32_t op;       /* tc_op, or TC_NODE_ACC */
    int32_t nin, nout;
    int32_t save;     /* the rule's TC_SAVE_* mask */
    uint8_t norule;   /* DIFF op without a rule: backward reports it */
    uint8_t released; /* saved tensors freed by a backward without retain_graph */
    int32_t nhooks, caphooks;
    tc_hook_entry *hooks;
    tc_meta *leaf;        /* accumulate nodes: the leaf (weak) */
    tc_params p;          /* the forward call's params (gen not owned) */
    const tc_custom_fn *custom; /* TC_NODE_CUSTOM: the backward, with its ctx (owned) */
    void *ctx;
    tc_edge *edges;       /* [nin] */
    tc_tmeta *meta;       /* [nin + nout]: inputs, then outputs */
    tc_tensor **saved;    /* [nin + nout]: saved inputs, then outputs (NULL: not saved) */
    int64_t *saved_ver;   /* [nin + nout]: storage version when saved */
    /* backward scratch (one backward at a time per graph) */
    uint64_t gen;
    int32_t deps;
    uint8_t needed, exec;
    tc_tensor **gbuf;     /* [max(nout, 2)]: gradient summed so far per output */
    tc_node *next_free;   /* iterative freeing */
};

/* Records a custom node with inputs in[0..nin) (non-NULL: their dtypes and sizes become
 * meta[i]) whose gradients flow along edges[0..nin) (node NULL: none; given separately
 * because an input may be a stand-in header for a tensor with history), and makes it the
 * history of the float tensors of out[0..nout) (nout <= TC_NODE_MAX_OUT). Takes ownership
 * of ctx: fn->release frees it when the node dies, and on failure. The observer sees each
 * input with an edge, as for op nodes. */
tc_status tc_autograd_custom(const tc_custom_fn *fn, void *ctx, const tc_tensor *const *in, const tc_edge *edges,
                             int nin, tc_tensor *const *out, int nout);

/* While set (thread-local), called for every input that gets an edge when a node is
 * recorded (op or custom): graph-mode control flow learns from it the autograd identity of
 * the tensors a traced subgraph captures (core/graph/control.c). */
typedef void (*tc_ag_observer_fn)(const tc_tensor *t, const tc_edge *e);
extern _Thread_local tc_ag_observer_fn tc_ag_observer;

/* Releases a node reference; frees long chains iteratively (no recursion). */
void tc_node_release(tc_node *n);
static inline void tc_node_retain(tc_node *n)
{
    if (n) tc_atomic_inc(&n->refcount);
}

/* The node a tensor's gradient flows into, as an edge (node NULL when t does not require
 * grad). For leaves this creates the accumulate node on first use (may fail: memory). */
tc_status tc_edge_of(const tc_tensor *t, tc_edge *e);
/* grad_fn (NULL for leaves) and its output number. */
tc_node *tc_grad_fn_of(const tc_tensor *t, int32_t *nr);
/* The meta record of t, created when missing (t must already carry its history). */
tc_status tc_meta_get(tc_tensor *t, tc_meta **out);
/* Sets t's history to (node, nr) (node retained), keeping its meta if any. */
void tc_set_history(tc_tensor *t, tc_node *node, int32_t nr);
/* Drops t's history (a non-leaf becomes a plain tensor). */
void tc_clear_history(tc_tensor *t);
/* "<Op>Backward" / "AccumulateGrad". */
const char *tc_node_name(const tc_node *n);
/* A saved input/output slot of n: i < nin inputs, then outputs. */
bool tc_node_saves(const tc_node *n, int slot);
/* Adds a pre-hook entry (hook id or retain target) to n. */
tc_status tc_node_add_hook(tc_node *n, int64_t id, int32_t nr, tc_meta *retain);
/* Frees n's saved tensors (after a backward without retain_graph). */
void tc_node_release_saved(tc_node *n);
/* NaN scan (anomaly mode). */
bool tc_has_nan(const tc_tensor *t);

extern int tc_ag_anomaly_on;
extern _Thread_local int tc_ag_in_backward; /* engine.c sets it while rules run */

#endif /* TC_AG_NODE_H */
