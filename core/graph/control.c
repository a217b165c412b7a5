/* control.c -- control flow in graphs: the COND and WHILE nodes (building, checking,
 * running) and the entries that record tocha.cond / tocha.while_loop while tracing.
 *
 * A control node holds subgraphs (n->sub): cond {then, else} with in = {pred, operands...},
 * while {cond, body} with in = {state..., invariants...} (out = the state). Running one
 * (tc_control_run, called by exec.c) reads the predicate from a tensor at RUN time and runs
 * only the subgraph it needs through tc_graph_run, so a data-dependent branch or trip count
 * is never baked into the graph.
 *
 * Recording (tocha_control.h): the Lua side traces each function as a subgraph between
 * tc_control_sub_begin / tc_control_sub_end (the outer trace suspended meanwhile), then
 * tc_control_cond / tc_control_while check the subgraphs against the outer values, run the
 * node once on the real tensors (tracing runs the real ops: Lua sees the real results) and
 * add it to the outer graph, keying the results to its outputs (tc_trace_bind). Tensors of
 * the traced code that a function uses by closure become implicit operands (see below).
 *
 * Gradients: under grad mode a recorded node whose inputs (or the tensors its subgraphs
 * capture) require grad gives its results an autograd node (control_grad.c), whose backward
 * records the gradient as control nodes too. The autograd observer (node.h) tells which
 * captured tensors require grad and where their gradients go: those become node inputs.
 */
#include "control.h"
#include "trace.h"
#include <stdio.h>
#include <stdlib.h>

#define MAX_SUB_DEPTH 16
#define MAX_RESULTS 128 /* results of one control node (a cond's gradient has one per operand) */
#define MAX_OPERANDS 64 /* operands of tocha.cond, tensors of a while_loop's state */

static const char *opname(int32_t op) { return tc_graph_op_name(op); }

/* "float32(3,4)" of a graph value. */
static const char *vtype(const tc_graph *g, int32_t v, char *buf, size_t cap)
{
    const tc_gval *x = &g->vals[v];
    int n = snprintf(buf, cap, "%s(", tc_dtype_name((tc_dtype)x->dtype));
    for (int d = 0; d < x->ndim && n > 0 && (size_t)n < cap; d++)
        n += snprintf(buf + n, cap - (size_t)n, d ? ",%lld" : "%lld", (long long)x->size[d]);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, ")");
    return buf;
}

static bool same_vtype(const tc_graph *a, int32_t va, const tc_graph *b, int32_t vb)
{
    const tc_gval *x = &a->vals[va], *y = &b->vals[vb];
    if (x->dtype != y->dtype || x->ndim != y->ndim) return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->size[d] != y->size[d]) return false;
    return true;
}

static int64_t vnumel(const tc_graph *g, int32_t v) { return tc_numel_of(g->vals[v].ndim, g->vals[v].size); }

/* ---- checking and adding nodes ------------------------------------------------------------ */

/* sub's inputs must be the outer values in[0..n) (types). */
static tc_status check_inputs(const tc_graph *g, int32_t op, const char *which, const tc_graph *sub,
                              const int32_t *in, int n)
{
    if (sub->ninputs != n)
        return tc_set_error(TC_ERR_ARG, "%s: the %s takes %d inputs, the node gives it %d", opname(op), which,
                            sub->ninputs, n);
    for (int i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] >= g->nvals) return tc_set_error(TC_ERR_ARG, "%s: input %d is no value", opname(op), i);
        if (!same_vtype(sub, sub->inputs[i], g, in[i])) {
            char a[TC_SHAPE_BUF], b[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_SHAPE, "%s: input %d of the %s is %s, the node gives it %s", opname(op), i + 1,
                                which, vtype(sub, sub->inputs[i], a, sizeof a), vtype(g, in[i], b, sizeof b));
        }
    }
    return TC_OK;
}

/* Checks a node's subgraphs against its inputs; *nout receives its number of results. */
static tc_status check_node(const tc_graph *g, int32_t op, const int32_t *in, int nin, tc_graph *const *sub, int nsub,
                            int *nout)
{
    char a[TC_SHAPE_BUF], b[TC_SHAPE_BUF];
    int want = op == TC_GOP_WHILE_GRAD ? 3 : 2;
    if ((op != TC_GOP_COND && op != TC_GOP_WHILE && op != TC_GOP_WHILE_GRAD) || nsub != want || !sub)
        return tc_set_error(TC_ERR_ARG, "control node: expected cond or while with two subgraphs (while_grad: three)");
    for (int s = 0; s < nsub; s++) {
        if (!sub[s]) return tc_set_error(TC_ERR_ARG, "%s: subgraph %d is NULL", opname(op), s + 1);
        for (int t = 0; t < s; t++)
            if (sub[t] == sub[s]) return tc_set_error(TC_ERR_ARG, "%s: the subgraphs must be distinct", opname(op));
        if (sub[s]->trace_state) return tc_set_error(TC_ERR_ARG, "%s: a subgraph is still being traced", opname(op));
    }
    if (op == TC_GOP_WHILE_GRAD) {
        /* in = {state (ns), invariants, gradients of the final state's float entries (nf)};
         * cond and body take state + invariants, the vjp everything; the vjp returns the
         * gradients of the state's float entries (nf), then those of the invariants asked for */
        int ns = sub[1]->noutputs, ncore = sub[0]->ninputs, nf = nin - ncore;
        if (ns < 1 || ncore < ns || nf < 0 || nf > ns)
            return tc_set_error(TC_ERR_ARG, "while_grad: %d inputs for a state of %d and %d loop inputs", nin, ns, ncore);
        TRY(check_inputs(g, op, "condition", sub[0], in, ncore));
        TRY(check_inputs(g, op, "body", sub[1], in, ncore));
        TRY(check_inputs(g, op, "vjp", sub[2], in, nin));
        if (sub[0]->noutputs != 1 || vnumel(sub[0], sub[0]->outputs[0]) != 1)
            return tc_set_error(TC_ERR_ARG, "while_grad: the condition must return one one-element tensor");
        if (sub[2]->noutputs < nf)
            return tc_set_error(TC_ERR_ARG, "while_grad: the vjp returns %d tensors for %d state gradients",
                                sub[2]->noutputs, nf);
        for (int o = 0; o < nf; o++)
            if (!same_vtype(sub[2], sub[2]->outputs[o], g, in[ncore + o]))
                return tc_set_error(TC_ERR_SHAPE, "while_grad: the vjp turns gradient %d from %s into %s", o + 1,
                                    vtype(g, in[ncore + o], a, sizeof a),
                                    vtype(sub[2], sub[2]->outputs[o], b, sizeof b));
        *nout = sub[2]->noutputs;
    } else if (op == TC_GOP_COND) {
        if (nin < 1) return tc_set_error(TC_ERR_ARG, "cond: the node needs a predicate input");
        if (in[0] < 0 || in[0] >= g->nvals) return tc_set_error(TC_ERR_ARG, "cond: the predicate is no value");
        if (vnumel(g, in[0]) != 1)
            return tc_set_error(TC_ERR_SHAPE, "cond: the predicate must have one element, got %s",
                                vtype(g, in[0], a, sizeof a));
        TRY(check_inputs(g, op, "then branch", sub[0], in + 1, nin - 1));
        TRY(check_inputs(g, op, "else branch", sub[1], in + 1, nin - 1));
        if (sub[0]->noutputs != sub[1]->noutputs)
            return tc_set_error(TC_ERR_ARG, "cond: the then branch returns %d tensors, the else branch %d",
                                sub[0]->noutputs, sub[1]->noutputs);
        for (int o = 0; o < sub[0]->noutputs; o++)
            if (!same_vtype(sub[0], sub[0]->outputs[o], sub[1], sub[1]->outputs[o]))
                return tc_set_error(TC_ERR_SHAPE, "cond: result %d is %s in the then branch but %s in the else branch",
                                    o + 1, vtype(sub[0], sub[0]->outputs[o], a, sizeof a),
                                    vtype(sub[1], sub[1]->outputs[o], b, sizeof b));
        *nout = sub[0]->noutputs;
    } else {
        /* in = the state, then loop invariants (implicit operands): the body returns the state */
        int ns = sub[1]->noutputs;
        TRY(check_inputs(g, op, "condition", sub[0], in, nin));
        TRY(check_inputs(g, op, "body", sub[1], in, nin));
        if (sub[0]->noutputs != 1 || vnumel(sub[0], sub[0]->outputs[0]) != 1)
            return tc_set_error(TC_ERR_ARG, "while: the condition must return one one-element tensor");
        if (ns < 1 || ns > nin)
            return tc_set_error(TC_ERR_ARG, "while: the body returns %d tensors for %d inputs", ns, nin);
        for (int o = 0; o < ns; o++)
            if (!same_vtype(sub[1], sub[1]->outputs[o], g, in[o]))
                return tc_set_error(TC_ERR_SHAPE,
                                    "while: the body turns state %d from %s into %s (the state must keep its dtypes "
                                    "and sizes)",
                                    o + 1, vtype(g, in[o], a, sizeof a),
                                    vtype(sub[1], sub[1]->outputs[o], b, sizeof b));
        *nout = ns;
    }
    if (*nout > MAX_RESULTS)
        return tc_set_error(TC_ERR_ARG, "%s: %d results (at most %d)", opname(op), *nout, MAX_RESULTS);
    return TC_OK;
}

tc_status tc_graph_add_control(tc_graph *g, int32_t op, const int32_t *in, int nin, tc_graph *const *sub, int nsub,
                               int32_t *outs)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "control node: NULL graph");
    int nout = 0;
    TRY(check_node(g, op, in, nin, sub, nsub, &nout));
    const tc_graph *src = op == TC_GOP_COND ? sub[0] : op == TC_GOP_WHILE_GRAD ? sub[2] : NULL;
    int32_t dt[MAX_RESULTS], nd[MAX_RESULTS];
    int64_t sz[MAX_RESULTS][TC_MAX_DIMS];
    for (int o = 0; o < nout; o++) {
        const tc_gval *x = src ? &src->vals[src->outputs[o]] : &g->vals[in[o]];
        dt[o] = x->dtype, nd[o] = x->ndim;
        memcpy(sz[o], x->size, sizeof sz[o]);
    }
    tc_graph **keep = tc_graph_alloc(g, sizeof(tc_graph *) * (size_t)nsub);
    if (!keep) return TC_ERR_MEMORY;
    TRY(tc_graph_add_node(g, op, in, nin, NULL, nout, dt, nd, (const int64_t(*)[TC_MAX_DIMS])sz, outs));
    tc_gnode *n = &g->nodes[g->nnodes - 1];
    for (int s = 0; s < nsub; s++) keep[s] = sub[s];
    n->sub = keep, n->nsub = nsub;
    return TC_OK;
}

/* ---- running ------------------------------------------------------------------------------------ */

/* Reads a one-element predicate. */
tc_status tc_control_read_pred(const char *what, const tc_tensor *t, bool *val)
{
    char b[TC_SHAPE_BUF];
    if (!t || tc_numel_of(t->ndim, t->size) != 1)
        return tc_set_error(TC_ERR_SHAPE, "%s: the predicate must have one element, got %s", what,
                            t ? tc_shape_str(t, b, sizeof b) : "nothing");
    if (!t->storage || t->storage->device != TC_CPU)
        return tc_set_error(TC_ERR_DEVICE, "%s: the predicate must be a CPU tensor", what);
    *val = tc_elem_nonzero(t->dtype, tc_base(t));
    return TC_OK;
}

/* in = state (n->nout tensors) then loop invariants; the subgraphs take them all. */
static tc_status run_while(const tc_gnode *n, tc_tensor *const *ins, tc_tensor **outs)
{
    int nin = n->nin, ns = n->nout;
    const tc_tensor *sbuf[16], **cur = nin <= 16 ? sbuf : calloc((size_t)nin, sizeof *cur);
    tc_tensor *obuf[16], **own = ns <= 8 ? obuf : calloc((size_t)ns * 2, sizeof *own);
    tc_status st = TC_OK;
    if (!cur || !own) st = tc_set_error(TC_ERR_MEMORY, "while: out of memory for a state of %d tensors", ns);
    tc_tensor **next = own ? own + ns : NULL;
    bool owned = false; /* own[] holds the current state (else ins[] does) */
    for (int i = 0; i < nin && st == TC_OK; i++) cur[i] = ins[i];
    while (st == TC_OK) {
        tc_tensor *p = NULL;
        bool go = false;
        st = tc_graph_run(n->sub[0], cur, nin, &p, 1);
        if (st == TC_OK) st = tc_control_read_pred("while", p, &go);
        tc_tensor_release(p);
        if (st || !go) break;
        for (int i = 0; i < ns; i++) next[i] = NULL;
        st = tc_graph_run(n->sub[1], cur, nin, next, ns);
        if (st) break;
        for (int i = 0; i < ns; i++) {
            if (owned) tc_tensor_release(own[i]);
            own[i] = next[i], cur[i] = next[i];
        }
        owned = true;
    }
    for (int i = 0; i < ns && own; i++) {
        if (st == TC_OK) {
            outs[i] = owned ? own[i] : ins[i];
            if (!owned) tc_tensor_retain(ins[i]);
        } else if (owned) {
            tc_tensor_release(own[i]);
        }
    }
    if (cur && cur != sbuf) free(cur);
    if (own && own != obuf) free(own);
    return st;
}

tc_status tc_control_run(const tc_gnode *n, tc_tensor *const *ins, tc_tensor **outs)
{
    if (!n || (n->op != TC_GOP_COND && n->op != TC_GOP_WHILE && n->op != TC_GOP_WHILE_GRAD) ||
        n->nsub != (n->op == TC_GOP_WHILE_GRAD ? 3 : 2))
        return tc_set_error(TC_ERR_INTERNAL, "control run: not a control node");
    if (n->op == TC_GOP_WHILE) return run_while(n, ins, outs);
    if (n->op == TC_GOP_WHILE_GRAD) return tc_control_run_while_grad(n, ins, outs);
    bool take = false;
    TRY(tc_control_read_pred("cond", ins[0], &take));
    return tc_graph_run(n->sub[take ? 0 : 1], (const tc_tensor *const *)ins + 1, n->nin - 1, outs, n->nout);
}

/* ---- subgraph traces and the autograd observer ------------------------------------------------
 * A subgraph trace in progress is a frame; when it ends it waits (pending) for the node
 * that takes it. While any frame is open, the autograd observer (node.h) notes, for the
 * innermost frame, each EXTERNAL value of its subgraph that a recorded op (or a nested
 * control node) read with an edge: a captured tensor that requires grad (a parameter, or a
 * tensor of the traced code used by closure), with its edge. The EXTERNAL header itself is
 * an alias without history, so this is how the node learns where those gradients go. */

typedef struct obs_entry {
    int32_t val; /* the subgraph's EXTERNAL value */
    tc_edge e;   /* retained */
} obs_entry;

typedef struct obs_list {
    tc_graph *sub;
    obs_entry *v;
    int n, cap;
    bool oom; /* an observation was lost: refuse to derive gradients from the list */
} obs_list;

#define MAX_PENDING (4 * MAX_SUB_DEPTH) /* two per open level (then/else, cond/body) at most */
static _Thread_local tc_graph *outer_stack[MAX_SUB_DEPTH];
static _Thread_local obs_list frames[MAX_SUB_DEPTH];
static _Thread_local obs_list pending[MAX_PENDING];
static _Thread_local int depth;

static void obs_clear(obs_list *l)
{
    for (int i = 0; i < l->n; i++) tc_node_release(l->v[i].e.node);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void observe(const tc_tensor *t, const tc_edge *e)
{
    if (depth == 0 || !e->node) return;
    obs_list *l = &frames[depth - 1];
    int32_t v = tc_trace_find(l->sub, t);
    if (v < 0 || l->sub->vals[v].kind != TC_GV_EXTERNAL) return;
    for (int i = 0; i < l->n; i++)
        if (l->v[i].val == v) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        obs_entry *nv = realloc(l->v, sizeof *nv * (size_t)cap);
        if (!nv) {
            l->oom = true;
            return;
        }
        l->v = nv, l->cap = cap;
    }
    tc_node_retain(e->node);
    l->v[l->n++] = (obs_entry){v, *e};
}

/* Moves sub's pending observations into *out (empty when there are none). */
static void take_pending(const tc_graph *sub, obs_list *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < MAX_PENDING && sub; i++)
        if (pending[i].sub == sub) {
            *out = pending[i];
            memset(&pending[i], 0, sizeof pending[i]);
            return;
        }
}

static const tc_edge *observed_edge(const obs_list *l, int32_t v)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i].val == v) return &l->v[i].e;
    return NULL;
}

static tc_status sub_begin(tc_graph **sub, bool need_outer)
{
    if (!sub) return tc_set_error(TC_ERR_ARG, "control: NULL subgraph slot");
    if (need_outer && !tc_trace_active)
        return tc_set_error(TC_ERR_ARG, "control: no trace is active to record a subgraph into");
    if (depth == MAX_SUB_DEPTH)
        return tc_set_error(TC_ERR_ARG, "control: control flow nested more than %d deep", MAX_SUB_DEPTH);
    if (tc_trace_is_shape_only(tc_trace_active)) /* the branches would run on undefined values */
        return tc_set_error(TC_ERR_UNSUPPORTED, "control: cond and while_loop need the values of their operands, "
                                                "which a shape-only trace does not compute");
    tc_graph *outer = tc_trace_suspend();
    tc_status st = tc_trace_begin(sub);
    if (st) {
        tc_trace_resume(outer);
        return st;
    }
    for (int i = 0; i < MAX_PENDING; i++) /* a freed subgraph's address reused: its list is stale */
        if (pending[i].sub == *sub) obs_clear(&pending[i]);
    outer_stack[depth] = outer;
    memset(&frames[depth], 0, sizeof frames[depth]);
    frames[depth++].sub = *sub;
    tc_ag_observer = observe;
    return TC_OK;
}

tc_status tc_control_sub_begin(tc_graph **sub) { return sub_begin(sub, true); }
tc_status tc_control_sub_open(tc_graph **sub) { return sub_begin(sub, false); }

tc_status tc_control_sub_end(tc_graph *sub)
{
    if (!sub) return tc_set_error(TC_ERR_ARG, "control: NULL subgraph");
    if (depth == 0 || tc_trace_active != sub || frames[depth - 1].sub != sub)
        return tc_set_error(TC_ERR_ARG, "control: this subgraph is not the trace begun last");
    tc_status st = tc_trace_end(sub);
    depth--;
    obs_list *slot = NULL;
    for (int i = 0; i < MAX_PENDING && !slot; i++)
        if (!pending[i].sub) slot = &pending[i];
    if (slot) {
        *slot = frames[depth];
    } else { /* never silently: a lost list would drop gradients */
        obs_clear(&frames[depth]);
        if (st == TC_OK)
            st = tc_set_error(TC_ERR_ARG, "control: more than %d subgraphs wait for their node (free unused ones "
                                          "with tc_control_sub_free)", MAX_PENDING);
    }
    memset(&frames[depth], 0, sizeof frames[depth]);
    tc_trace_resume(outer_stack[depth]);
    if (depth == 0) tc_ag_observer = NULL;
    return st;
}

void tc_control_sub_free(tc_graph *sub)
{
    obs_list l;
    take_pending(sub, &l);
    obs_clear(&l);
    tc_graph_free(sub);
}

/* ---- implicit operands -------------------------------------------------------------------------
 * A function traced as a subgraph may use, by closure, a tensor the outer trace computed
 * (an input, an op result): the subgraph sees it as a captured EXTERNAL, which would read
 * the trace-time buffer at every run. Such values become extra inputs of BOTH subgraphs
 * (the same order in each; a subgraph that does not use one gets an unused input) and
 * extra inputs of the node, so each run passes the current value. Outer EXTERNALs
 * (parameters) stay captured (read by reference anyway) unless they require grad under
 * grad mode: then they are operands too, so that the node's gradient covers them. */

#define MAX_CAPTURES 64

typedef struct captures {
    int32_t val[MAX_CAPTURES];        /* outer values */
    const tc_tensor *t[MAX_CAPTURES]; /* the subgraph's EXTERNAL headers (new references) */
    tc_edge e[MAX_CAPTURES];          /* where their gradient goes (node NULL: nowhere) */
    int n;
} captures;

static tc_status find_captures(tc_graph *g, const tc_graph *sub, const obs_list *ob, bool grad, captures *C)
{
    for (int32_t v = 0; v < sub->nvals; v++) {
        const tc_gval *x = &sub->vals[v];
        if (x->kind != TC_GV_EXTERNAL || !x->t) continue;
        const tc_edge *e = grad ? observed_edge(ob, v) : NULL;
        int32_t ov = tc_trace_find(g, x->t);
        bool inner = ov >= 0 && g->vals[ov].kind != TC_GV_EXTERNAL;
        if (!inner && !e) continue;
        if (ov < 0) TRY(tc_trace_lookup(g, x->t, &ov)); /* unseen by the outer trace: its external */
        int have = -1;
        for (int i = 0; i < C->n && have < 0; i++)
            if (C->val[i] == ov) have = i;
        if (have >= 0) {
            if (e && !C->e[have].node) C->e[have] = *e;
            continue;
        }
        if (C->n == MAX_CAPTURES)
            return tc_set_error(TC_ERR_ARG, "control: more than %d tensors of the traced code used by closure; pass "
                                            "them as operands", MAX_CAPTURES);
        tc_tensor_retain(x->t); /* the subgraph lets go of it when it becomes an input */
        C->t[C->n] = x->t, C->val[C->n] = ov, C->e[C->n] = e ? *e : (tc_edge){NULL, 0};
        C->n++;
    }
    return TC_OK;
}

/* Appends to sub one input per capture, in order: its EXTERNAL for that outer value turned
 * into the input, or a new (unused) input. */
static tc_status add_capture_inputs(tc_graph *g, tc_graph *sub, const captures *C)
{
    int ncap = C->n;
    if (sub->ninputs + ncap > sub->capinputs) {
        int32_t cap = sub->ninputs + ncap;
        int32_t *in = realloc(sub->inputs, sizeof *in * (size_t)cap);
        if (!in) return tc_set_error(TC_ERR_MEMORY, "control: out of memory for subgraph inputs");
        sub->inputs = in, sub->capinputs = cap;
    }
    for (int i = 0; i < ncap; i++) {
        int32_t found = -1;
        for (int32_t v = 0; v < sub->nvals && found < 0; v++) {
            tc_gval *x = &sub->vals[v];
            if (x->kind == TC_GV_EXTERNAL && x->t && tc_trace_find(g, x->t) == C->val[i]) found = v;
        }
        if (found < 0) {
            const tc_gval *o = &g->vals[C->val[i]];
            TRY(tc_graph_add_input(sub, (tc_dtype)o->dtype, o->ndim, o->size, &found));
            continue; /* tc_graph_add_input appended it */
        }
        tc_gval *x = &sub->vals[found];
        tc_tensor_release(x->t);
        x->t = NULL, x->kind = TC_GV_INPUT, x->arg = sub->ninputs;
        sub->inputs[sub->ninputs++] = found;
    }
    return TC_OK;
}

/* ---- recording ----------------------------------------------------------------------------------- */

static int node_results(int32_t op, tc_graph *const *sub)
{
    return op == TC_GOP_COND ? sub[0]->noutputs : op == TC_GOP_WHILE ? sub[1]->noutputs : sub[2]->noutputs;
}

/* A result that is (a view of) an input or a captured tensor -- a branch returning its
 * operand, a loop running zero times -- gets its own buffer: keying it to the node's output
 * would redirect the input's later uses to the node, and giving it the node's history would
 * rewrite the input's. */
static tc_status own_result(tc_tensor **r)
{
    if ((*r)->refcount == 1 && (*r)->storage && (*r)->storage->refcount == 1) return TC_OK;
    tc_tensor *c = NULL;
    const tc_tensor *cin[1] = {*r};
    tc_params cp = {.i = {-1}};
    tc_graph *outer = tc_trace_suspend();
    tc_status st = tc_op_exec(TC_OP_COPY, cin, 1, &cp, &c, 1);
    tc_trace_resume(outer);
    if (st) return st;
    tc_tensor_release(*r);
    *r = c;
    return TC_OK;
}

tc_status tc_control_record(int32_t op, tc_graph **sub, int nsub, const tc_tensor *const *ins, int nin,
                            tc_tensor **results, int nres)
{
    tc_graph *g = tc_trace_active;
    tc_status st = TC_OK;
    bool grad = tc_grad_enabled() != 0;
    obs_list ob[3];
    captures *C = calloc(1, sizeof *C);
    int nall = nin + MAX_CAPTURES;
    const tc_tensor **all = calloc((size_t)nall, sizeof *all);
    tc_edge *edges = calloc((size_t)nall, sizeof *edges);
    int32_t *vin = calloc((size_t)nall, sizeof *vin), *vout = calloc(MAX_RESULTS, sizeof *vout);
    tc_tensor **res = calloc(MAX_RESULTS, sizeof *res);
    tc_graph *clones[3] = {NULL, NULL, NULL};
    int nout = 0;
    bool need = false, owned = false; /* owned: g owns the subgraphs */
    for (int s = 0; s < 3; s++) take_pending(s < nsub ? sub[s] : NULL, &ob[s]);
    if (!C || !all || !edges || !vin || !vout || !res)
        st = tc_set_error(TC_ERR_MEMORY, "%s: out of memory recording the node", opname(op));
    else if (nsub < 2 || nsub > 3 || !sub[0] || !sub[1] || (nsub == 3 && !sub[2]))
        st = tc_set_error(TC_ERR_ARG, "%s: NULL subgraph", opname(op));
    else if (nin < 0 || (nin && !ins))
        st = tc_set_error(TC_ERR_ARG, "%s: bad input list", opname(op));
    for (int s = 0; s < nsub && st == TC_OK; s++)
        if (ob[s].oom) st = tc_set_error(TC_ERR_MEMORY, "%s: out of memory observing a subgraph", opname(op));
    for (int s = 0; s < nsub && st == TC_OK && g; s++) st = find_captures(g, sub[s], &ob[s], grad, C);
    for (int s = 0; s < nsub && st == TC_OK && g; s++) st = add_capture_inputs(g, sub[s], C);
    for (int i = 0; i < nin && st == TC_OK; i++) {
        if (!ins[i]) st = tc_set_error(TC_ERR_ARG, "%s: input %d is NULL", opname(op), i + 1);
        all[i] = ins[i];
        /* gradients flow to the operands and the state, never to a cond's predicate */
        if (st == TC_OK && grad && !(op == TC_GOP_COND && i == 0)) st = tc_edge_of(ins[i], &edges[i]);
        if (st == TC_OK && g) st = tc_trace_lookup(g, ins[i], &vin[i]);
    }
    for (int i = 0; i < C->n && st == TC_OK; i++) all[nin + i] = C->t[i], vin[nin + i] = C->val[i], edges[nin + i] = C->e[i];
    if (st == TC_OK) nall = nin + C->n;
    for (int i = 0; i < nall && st == TC_OK; i++) need = need || edges[i].node;
    if (st == TC_OK && g) st = check_node(g, op, vin, nall, sub, nsub, &nout);
    else if (st == TC_OK) nout = node_results(op, sub);
    if (st == TC_OK && nout != nres)
        st = tc_set_error(TC_ERR_ARG, "%s: %d result slots for %d results", opname(op), nres, nout);
    if (st == TC_OK && need) st = tc_control_grad_check(op, sub, nsub);
    for (int s = 0; s < nsub && st == TC_OK && need; s++) st = tc_control_clone(sub[s], &clones[s]);
    if (st == TC_OK) {
        /* run it once on the real tensors, with the trace suspended (subgraph runs are not
         * recorded: the node stands for them) */
        tc_gnode tmp = {.op = op, .nin = nall, .nout = nout, .sub = sub, .nsub = nsub};
        tc_graph *outer = tc_trace_suspend();
        st = tc_control_run(&tmp, (tc_tensor *const *)all, res);
        tc_trace_resume(outer);
    }
    for (int o = 0; o < nout && st == TC_OK; o++) st = own_result(&res[o]);
    if (st == TC_OK && g) st = tc_graph_add_control(g, op, vin, nall, sub, nsub, vout);
    owned = st == TC_OK && g;
    /* from here g owns the subgraphs (or, with no trace, the run is all there was) */
    for (int o = 0; o < nout && st == TC_OK && g; o++) st = tc_trace_bind(g, res[o], vout[o]);
    if (st == TC_OK && need) {
        st = tc_control_grad_attach(op, clones, nsub, all, edges, nall, res, nout);
        memset(clones, 0, sizeof clones); /* taken, also on failure */
    }
    if (!owned)
        for (int s = 0; s < nsub; s++) tc_graph_free(sub[s]);
    for (int s = 0; s < 3; s++) tc_graph_free(clones[s]), obs_clear(&ob[s]);
    for (int i = 0; C && i < C->n; i++) tc_tensor_release((tc_tensor *)C->t[i]);
    if (st == TC_OK)
        for (int o = 0; o < nout; o++) results[o] = res[o];
    else
        for (int o = 0; res && o < nout; o++) tc_tensor_release(res[o]);
    free(C), free(all), free(edges), free(vin), free(vout), free(res);
    return st;
}

tc_status tc_control_cond(tc_graph *then_g, tc_graph *else_g, const tc_tensor *pred,
                          const tc_tensor *const *operands, int nops, tc_tensor **results, int nres)
{
    tc_graph *sub[2] = {then_g, else_g};
    const tc_tensor *ins[MAX_OPERANDS + 1];
    if (nops < 0 || nops > MAX_OPERANDS || (nops && !operands) || (nres && !results)) {
        tc_graph_free(then_g), tc_graph_free(else_g);
        return tc_set_error(TC_ERR_ARG, "cond: bad operand or result list (%d operands, at most %d)", nops,
                            MAX_OPERANDS);
    }
    if (!tc_trace_active) {
        tc_graph_free(then_g), tc_graph_free(else_g);
        return tc_set_error(TC_ERR_ARG, "cond: no trace is active");
    }
    ins[0] = pred;
    for (int i = 0; i < nops; i++) ins[i + 1] = operands[i];
    return tc_control_record(TC_GOP_COND, sub, 2, ins, nops + 1, results, nres);
}

tc_status tc_control_while(tc_graph *cond_g, tc_graph *body_g, const tc_tensor *const *state, int n,
                           tc_tensor **results)
{
    tc_graph *sub[2] = {cond_g, body_g};
    if (n < 1 || n > MAX_OPERANDS || !state || !results) {
        tc_graph_free(cond_g), tc_graph_free(body_g);
        return tc_set_error(TC_ERR_ARG, "while: bad state list (%d tensors, 1 to %d)", n, MAX_OPERANDS);
    }
    if (!tc_trace_active) {
        tc_graph_free(cond_g), tc_graph_free(body_g);
        return tc_set_error(TC_ERR_ARG, "while: no trace is active");
    }
    return tc_control_record(TC_GOP_WHILE, sub, 2, state, n, results, n);
}
