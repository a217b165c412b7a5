/* graph.h -- the graph IR shared by the tracer, the passes and the executor (internal).
 *
 * A graph is a list of nodes in a valid execution order over SSA values:
 *
 *   value kinds   INPUT     an argument, bound at every run (g->inputs[arg] = value id)
 *                 EXTERNAL  a captured tensor (parameter, optimizer state...), read by
 *                           reference at run time; g->vals[v].t holds a reference
 *                 CONST     data known when compiling (.t owns it): made inside the trace
 *                           by an op with no dynamic input, or by constant folding
 *                 OP        output `slot` of node `producer`
 *   nodes         one op-table call (op, inputs, params) producing 1-2 values. Nodes of
 *                 kind VIEW produce a view of their input 0 (same buffer); every other
 *                 node produces fresh contiguous values. In-place calls made while
 *                 tracing are recorded as out-of-place nodes (flag TC_GN_WAS_INPLACE;
 *                 the in-place pass may make them in place again), and a write into a
 *                 captured tensor becomes a write-back: after the last node, the final
 *                 value is copied into the external (g->writebacks).
 *
 * Node ids and value ids index g->nodes / g->vals. Passes rewrite uses
 * (tc_graph_replace_uses), mark nodes dead (TC_GN_DEAD), may append new nodes whose
 * results earlier nodes then read (flagged TC_GN_PLACE), and call tc_graph_compact, which
 * removes dead nodes and unused values, restores an execution order (a stable
 * topological sort: the other nodes keep their relative order, a TC_GN_PLACE node moves
 * up to just after the last producer of its inputs) and renumbers everything, so after
 * any pass the arrays hold only live entries in execution order. Analyses a pass needs
 * (use counts) are recomputed by tc_graph_count_uses. Memory for index lists comes from
 * the graph's arena (freed with the graph).
 */
#ifndef TC_GRAPH_H
#define TC_GRAPH_H

#include "../internal.h"

typedef enum tc_gvkind { TC_GV_INPUT, TC_GV_EXTERNAL, TC_GV_CONST, TC_GV_OP } tc_gvkind;

typedef struct tc_gval {
    int32_t kind;     /* tc_gvkind */
    int32_t producer; /* OP: node id; else -1 */
    int32_t slot;     /* OP: output number of the producer */
    int32_t arg;      /* INPUT: argument number; else -1 */
    int32_t dtype, ndim;
    int64_t size[TC_MAX_DIMS];
    int32_t device; /* where its memory lives (TC_CPU, TC_CUDA + n): EXTERNAL/CONST: their
                       tensor's; INPUT and OP: as traced (the tracer records the real
                       tensors'), else the device of the node's inputs (dispatcher's rule) */
    tc_tensor *t; /* EXTERNAL: the captured tensor (a reference); CONST: the data (owned) */
    /* analysis and planning results (valid after the pass that fills them) */
    int32_t nuses;   /* tc_graph_count_uses: reads by live nodes, outputs, write-backs */
    int32_t view_of; /* value whose buffer this value views (VIEW nodes, transitively the
                        root), or -1 */
    int64_t offset;  /* memory plan: byte offset in the arena; -1: not in the arena
                        (inputs, externals, constants, views, graph outputs) */
} tc_gval;

enum {
    TC_GN_DEAD = 1,        /* removed by a pass; tc_graph_compact drops it */
    TC_GN_WAS_INPLACE = 2, /* traced as an in-place call */
    TC_GN_INPLACE = 4,     /* planned: out[0] overwrites the buffer of in[inplace] */
    TC_GN_RANDOM = 8,      /* draws random numbers: never folded, merged or duplicated */
    TC_GN_PLACE = 16,      /* appended by a pass: tc_graph_compact places it as early as its
                              inputs allow (then clears the flag) */
    TC_GN_CAT_PLACED = 32, /* memplan.c: the cat's inputs were placed inside its result, which
                              is then complete once they are computed: the executor skips it */
};

/* Graph-level node kinds beyond the op table (numbered after TC_OP_COUNT). */
enum { TC_GOP_COND = 1000, TC_GOP_WHILE = 1001, TC_GOP_WHILE_GRAD = 1002 /* control_grad.c */ };

typedef struct tc_gnode {
    int32_t op; /* tc_op, or TC_GOP_* */
    int32_t nin, nout;
    int32_t *in;  /* nin value ids; -1 for an absent optional input (conv bias) */
    int32_t *out; /* nout value ids (arena): 1-2 for op-table nodes, any count for TC_GOP_* */
    tc_params p;
    uint32_t flags;    /* TC_GN_* */
    int32_t group;     /* fusion group id, or -1 */
    int32_t inplace;   /* TC_GN_INPLACE: which input's buffer out[0] takes */
    const char *where; /* source location noted while tracing (arena string), or NULL */
    tc_graph **sub;    /* TC_GOP_*: subgraphs (cond: then, else; while: cond, body) */
    int32_t nsub;
} tc_gnode;

/* A fused elementwise group (core/graph/fuse.c): member nodes in execution order, the
 * values it reads from outside and the values it produces for outside. It runs as one
 * unit at the position of its last member. */
typedef struct tc_ggroup {
    int32_t *nodes, nnodes;
    int32_t *ins, nins;
    int32_t *outs, nouts;
} tc_ggroup;

/* One line of the per-pass report. */
typedef struct tc_gpass_stat {
    char pass[16];
    int32_t nodes_before, nodes_after;
    int32_t groups;        /* fusion: groups formed */
    int64_t bytes_planned; /* memory plan: arena bytes; unplanned in bytes_unplanned */
    int64_t bytes_unplanned;
    char note[96];
} tc_gpass_stat;

typedef struct tc_garena_block tc_garena_block;

struct tc_graph {
    tc_gnode *nodes;
    int32_t nnodes, capnodes;
    tc_gval *vals;
    int32_t nvals, capvals;
    int32_t *inputs, ninputs, capinputs;    /* value ids of the arguments */
    int32_t *outputs, noutputs, capoutputs; /* value ids of the results */
    /* write-backs: after the last node, copy value wb_val[i] into external wb_ext[i] */
    int32_t *wb_ext, *wb_val, nwb, capwb;
    tc_ggroup *groups;
    int32_t ngroups, capgroups;
    tc_gpass_stat *stats;
    int32_t nstats, capstats;
    bool allow_mutation;
    bool compiled;
    int32_t device; /* the device the graph runs on (exec.c sets it when preparing; the
                       tracer when it first sees a device tensor); TC_CPU by default */
    int64_t planned_bytes, unplanned_bytes; /* memplan.c: arena size, sum without reuse */
    tc_status trace_error; /* first error while tracing (the graph is unusable) */
    void *trace_state;     /* core/graph/trace.c: value lookup while recording */
    void *plan;            /* core/graph/exec.c: the compiled runtime (buffers, headers) */
    tc_garena_block *arena;
};

/* ---- building (graph.c) --------------------------------------------------------------- */

tc_status tc_graph_new(tc_graph **out);
/* Arena memory that lives as long as the graph (zeroed). NULL with the error set. */
void *tc_graph_alloc(tc_graph *g, size_t nbytes);
char *tc_graph_strdup(tc_graph *g, const char *s);
/* Adds a value with t's dtype and sizes. EXTERNAL and CONST retain t. *id receives the id. */
tc_status tc_graph_add_input(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes, int32_t *id);
tc_status tc_graph_add_external(tc_graph *g, tc_tensor *t, int32_t *id);
tc_status tc_graph_add_const(tc_graph *g, tc_tensor *t, int32_t *id);
/* Adds a node after the last one; its outputs get new OP values (dtypes and sizes given by
 * the caller: the tracer copies them from the real results, tc_graph_add_op_infer runs the
 * prepare step). outs receives the value ids (may be NULL). */
tc_status tc_graph_add_node(tc_graph *g, int32_t op, const int32_t *in, int nin, const tc_params *p, int nout,
                            const int32_t *dtypes, const int32_t *ndims, const int64_t (*sizes)[TC_MAX_DIMS],
                            int32_t *outs);
/* tc_graph_add_node with output dtypes and sizes computed by the op's shape rules (the
 * dispatcher's prepare step on dummy tensors): for building graphs by hand (tests,
 * nngraph, passes that insert nodes). */
tc_status tc_graph_add_op(tc_graph *g, tc_op op, const int32_t *in, int nin, const tc_params *p, int32_t *outs);
tc_status tc_graph_mark_output(tc_graph *g, int32_t val);
tc_status tc_graph_add_writeback(tc_graph *g, int32_t ext_val, int32_t val);

/* ---- editing and analysis (graph.c) ---------------------------------------------------- */

/* Every read of old (node inputs, outputs, write-backs) reads new instead. */
void tc_graph_replace_uses(tc_graph *g, int32_t old_val, int32_t new_val);
/* Re-derives vals[].view_of from the live view nodes (in order, so a view of a view gets
 * the root): needed after a pass redirected a view's input. */
void tc_graph_fix_view_roots(tc_graph *g);
/* Fills vals[].nuses. */
void tc_graph_count_uses(tc_graph *g);
/* Drops dead nodes and values nothing produces or reads (inputs and externals kept),
 * re-sorts the live nodes when a node reads a later node's result or is TC_GN_PLACE (see
 * the banner; TC_ERR_INTERNAL on a cycle) and renumbers ids everywhere (groups are
 * dropped: fusion runs after the passes that compact). */
tc_status tc_graph_compact(tc_graph *g);
/* Appends a report line (pass name, nodes before/after; other fields may be 0). */
tc_status tc_graph_add_stat(tc_graph *g, const tc_gpass_stat *st);
/* Live op nodes. */
int tc_graph_live_nodes(const tc_graph *g);
/* A CPU tensor header with v's dtype and sizes viewing nothing (storage NULL): for shape
 * rules and checks. */
void tc_graph_val_shape(const tc_graph *g, int32_t v, tc_tensor *hdr);
/* Bytes of a value's data (numel * element size). */
int64_t tc_graph_val_bytes(const tc_graph *g, int32_t v);
/* The op's name, or "cond"/"while". */
const char *tc_graph_op_name(int32_t op);

/* ---- the passes (one file each; each appends its report line) ------------------------- */

tc_status tc_pass_dce(tc_graph *g);      /* dce.c */
tc_status tc_pass_cse(tc_graph *g);      /* cse.c */
tc_status tc_pass_fold(tc_graph *g);     /* fold.c */
tc_status tc_pass_simplify(tc_graph *g); /* simplify.c */
tc_status tc_pass_fuse(tc_graph *g);     /* fuse.c: fills g->groups */
tc_status tc_pass_inplace(tc_graph *g);  /* inplace.c: TC_GN_INPLACE choices, layouts */
tc_status tc_pass_memplan(tc_graph *g);  /* memplan.c: vals[].offset, arena size */

/* ---- execution (exec.c, fused.c) --------------------------------------------------------- */

/* Builds the runtime plan (arena, tensor headers) after the passes. */
tc_status tc_graph_exec_prepare(tc_graph *g);
void tc_graph_exec_free(tc_graph *g);
/* The device the graph's nodes run on, checked: every op value and input on one device,
 * captured tensors and constants there too, except 0-dim CPU tensors (they may join device
 * ops) and CPU tensors read only by copies. TC_ERR_DEVICE naming the value otherwise. */
tc_status tc_graph_check_device(tc_graph *g, int32_t *device);
/* Evaluates fused group grp with rt[v] the runtime tensor of every value id v (inputs of
 * the group bound, outputs allocated): block by block so intermediates stay in cache. */
tc_status tc_fused_eval(const tc_graph *g, const tc_ggroup *grp, tc_tensor *const *rt);

/* ---- control flow (control.c) --------------------------------------------------------------- */

/* Runs a TC_GOP_COND / TC_GOP_WHILE node: ins[i] the runtime tensor of n->in[i], outs[o]
 * receives a new reference for n->out[o]. */
tc_status tc_control_run(const tc_gnode *n, tc_tensor *const *ins, tc_tensor **outs);

/* ---- tracing (trace.c; the dispatcher hook is declared in internal.h) ------------------- */

/* Frees the recording state of g (tc_graph_free; ends the trace if g is being recorded). */
void tc_trace_free_state(tc_graph *g);

#endif /* TC_GRAPH_H */
