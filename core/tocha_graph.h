/* tocha_graph.h -- the public C API of graph mode (included by tocha.h; part of the
 * ffi.cdef): trace a computation into a static graph, optimise it, run it.
 *
 * Tracing runs the ops as usual and, while a trace is active on this thread, also records
 * every tc_op_run call into the graph (core/graph/trace.c). Tensors become graph values:
 * declared inputs (rebound at every run), captured tensors ("externals": read by reference
 * at run time, e.g. parameters), constants (made inside the trace from no input, e.g.
 * torch.zeros) and op results. In-place ops are recorded as new values (SSA); a write into
 * a captured tensor becomes a write-back at the end of the graph, allowed only when the
 * trace permits mutation (a training step updates its parameters).
 *
 * tc_graph_compile runs the passes (core/graph/<pass>.c) and plans memory; tc_graph_run
 * executes the plan with no Lua in the loop (core/graph/exec.c).
 */

typedef struct tc_graph tc_graph;

/* Pass selection for tc_graph_compile (bits). */
enum {
    TC_PASS_DCE = 1,      /* dead-code elimination */
    TC_PASS_CSE = 2,      /* common-subexpression elimination */
    TC_PASS_FOLD = 4,     /* constant folding */
    TC_PASS_SIMPLIFY = 8, /* algebraic simplification */
    TC_PASS_FUSE = 16,    /* elementwise fusion */
    TC_PASS_INPLACE = 32, /* in-place and layout choices */
    TC_PASS_ALL = 63      /* memory planning always runs */
};

/* ---- tracing ------------------------------------------------------------------------- */

/* Starts recording on this thread into a new graph (*out, owned by the caller). A trace
 * already active on this thread is an error. */
tc_status tc_trace_begin(tc_graph **out);
/* Declares t the next argument of the graph. t must not have been used by a recorded op. */
tc_status tc_trace_input(tc_graph *g, const tc_tensor *t);
/* Declares t the next result of the graph. */
tc_status tc_trace_output(tc_graph *g, const tc_tensor *t);
/* Whether writes into captured tensors are recorded as write-backs (1) or refused (0,
 * the default: "tracing mutates a captured tensor"). */
tc_status tc_trace_allow_mutation(tc_graph *g, int allow);
/* Shape-only recording (1; 0, the default, computes every call as eager mode does): a
 * call whose results depend on a graph input, a captured tensor or a random draw -- or that
 * writes a captured tensor -- is recorded with its results allocated but not computed
 * (their values are undefined), and nothing captured is written. Calls on constants still
 * run, so every value tc_trace_is_dynamic calls static is real. The trace then costs the
 * graph's shapes instead of an eager step's memory, and leaves all state as it was (a
 * compiled training step runs the graph for the traced step). Calls that need the values
 * (data-dependent sizes: masked_select, nonzero, masked_copy; control flow) fail the
 * trace; record again without this. Set it before the first recorded call. */
tc_status tc_trace_shape_only(tc_graph *g, int on);
/* Stops recording. After an error inside the trace, end still stops it and returns the
 * first error (the graph is then unusable). */
tc_status tc_trace_end(tc_graph *g);
/* The graph being recorded on this thread, or NULL. */
tc_graph *tc_trace_current(void);
/* 1 when reading t's values now would bake a traced value into the graph: t is (a view
 * of) a graph input, a captured tensor or a result computed from them. 0 for constants
 * and when no trace is active. The binding calls it before every value read. */
int tc_trace_is_dynamic(const tc_tensor *t);
/* 1 when t's storage is known to the trace active on this thread (a graph input, an op
 * result, or a tensor a recorded op has read); 0 for an unseen storage or no trace. The
 * binding refuses element writes into known storages while tracing (they bypass ops). */
int tc_trace_knows(const tc_tensor *t);
/* Records a note on the graph (e.g. the Lua source line of the next ops), shown in dumps
 * and error messages. text is copied. */
tc_status tc_trace_set_location(const char *text);

/* ---- compiling and running ------------------------------------------------------------ */

/* Runs the selected passes (TC_PASS_* bits) in order, then memory planning. A graph is
 * compiled once; running an uncompiled graph compiles it with TC_PASS_ALL. */
tc_status tc_graph_compile(tc_graph *g, unsigned passes);
/* Runs the graph: inputs bound in order (sizes and dtypes must match the trace's), then
 * the write-backs into captured tensors, and outputs[i] receives a new reference (owned by
 * the caller). On failure no output is set. */
tc_status tc_graph_run(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout);
int tc_graph_num_inputs(const tc_graph *g);
int tc_graph_num_outputs(const tc_graph *g);
/* Live op nodes (not counting dead ones). */
int tc_graph_num_nodes(const tc_graph *g);
/* Bytes of intermediate buffers the memory plan uses at once (the arena size), and what the
 * same values would take without reuse. 0 before compiling. */
int64_t tc_graph_planned_bytes(const tc_graph *g);
int64_t tc_graph_unplanned_bytes(const tc_graph *g);
/* Text forms, written into buf (cap bytes, NUL-terminated, truncated when short); *needed
 * receives the full length + 1. dump: the IR, one value per line; report: one line per
 * pass run (nodes removed, groups fused, bytes planned). */
tc_status tc_graph_dump(const tc_graph *g, char *buf, size_t cap, size_t *needed);
tc_status tc_graph_report(const tc_graph *g, char *buf, size_t cap, size_t *needed);
/* Graphviz text of the graph as it is now (fused groups drawn as clusters) into path. */
tc_status tc_graph_dot(const tc_graph *g, const char *path);
void tc_graph_free(tc_graph *g);

/* ---- graphs on a CUDA device ------------------------------------------------------------ */

/* A graph traced with tensors on cuda:N runs on cuda:N (docs/jit.md, "Graph mode on the
 * GPU"): its arena and fresh results are device memory and every step runs there. Its
 * fused groups run as one generated kernel each (NVRTC) when that can run, else member by
 * member through the dispatcher. What the last compile decided and what ran since: */
typedef struct tc_graph_devinfo {
    int32_t device;         /* TC_CPU or TC_CUDA + n: where the graph runs (after compiling) */
    int32_t groups;         /* fused groups */
    int32_t groups_kernel;  /* ... prepared as a generated kernel (device graphs) */
    int32_t groups_unfused; /* ... run member by member on the device */
    int64_t kernel_launches, unfused_runs; /* group runs of each kind since compiling */
    char why_unfused[256];  /* the first reason a group ran unfused ("" when none did) */
} tc_graph_devinfo;
tc_status tc_graph_device_info(const tc_graph *g, tc_graph_devinfo *out);

/* CUDA Graph capture of a compiled device graph (PyTorch's torch.cuda.graphs): inputs are
 * the STATIC input tensors (on the graph's device, kept alive by the capture); outputs
 * receive the STATIC outputs (new references). tc_graph_replay recomputes the outputs from
 * what the static inputs hold now (copy each batch into them first) and applies the
 * write-backs (parameter updates) in place, asynchronously on the current stream. Run
 * the graph once before capturing it (warm-up). Captured 0-dim CPU tensors (per-step
 * scalars) are re-read at each replay. Random nodes drawing from one generator are
 * captured and draw fresh numbers per replay. Refused, naming the node: steps that read
 * device values on the host (masks, nonzero; index bounds are checked on the device during
 * a capture), random nodes drawing from two generators, randperm / multinomial, control
 * flow, and outputs that need a fresh copy per run. Free the capture with
 * tc_graph_capture_free. */
typedef struct tc_captured_graph tc_captured_graph;
tc_status tc_graph_capture(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout,
                           tc_captured_graph **out);
tc_status tc_graph_replay(tc_captured_graph *c);
void tc_graph_capture_free(tc_captured_graph *c);
