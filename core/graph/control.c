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
 * Gradients: a graph run has no autograd history, so a recorded cond/while whose inputs
 * (or the tensors its subgraphs capture) require grad under grad mode is refused with an
 * explanation rather than returning results that would silently stop gradients.
 */
#include "control.h"
#include "trace.h"
#include <stdio.h>
#include <stdlib.h>

#define MAX_SUB_DEPTH 16
#define MAX_RESULTS 64 /* results (and inputs) of one control node */

static const char *opname(int32_t op) { return op == TC_GOP_COND ? "cond" : "while"; }

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
    if ((op != TC_GOP_COND && op != TC_GOP_WHILE) || nsub != 2 || !sub || !sub[0] || !sub[1])
        return tc_set_error(TC_ERR_ARG, "control node: expected cond or while with two subgraphs");
    if (sub[0] == sub[1]) return tc_set_error(TC_ERR_ARG, "%s: the two subgraphs must be distinct", opname(op));
    if (sub[0]->trace_state || sub[1]->trace_state)
        return tc_set_error(TC_ERR_ARG, "%s: a subgraph is still being traced", opname(op));
    if (op == TC_GOP_COND) {
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
    const tc_graph *src = op == TC_GOP_COND ? sub[0] : NULL;
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
static tc_status read_pred(const char *what, const tc_tensor *t, bool *val)
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
        if (st == TC_OK) st = read_pred("while", p, &go);
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
    if (!n || (n->op != TC_GOP_COND && n->op != TC_GOP_WHILE) || n->nsub != 2)
        return tc_set_error(TC_ERR_INTERNAL, "control run: not a control node");
    if (n->op == TC_GOP_WHILE) return run_while(n, ins, outs);
    bool take = false;
    TRY(read_pred("cond", ins[0], &take));
    return tc_graph_run(n->sub[take ? 0 : 1], (const tc_tensor *const *)ins + 1, n->nin - 1, outs, n->nout);
}

/* ---- recording while tracing (tocha_control.h) ------------------------------------------------- */

static _Thread_local tc_graph *outer_stack[MAX_SUB_DEPTH];
static _Thread_local int depth;

tc_status tc_control_sub_begin(tc_graph **sub)
{
    if (!sub) return tc_set_error(TC_ERR_ARG, "control: NULL subgraph slot");
    if (!tc_trace_active) return tc_set_error(TC_ERR_ARG, "control: no trace is active to record a subgraph into");
    if (depth == MAX_SUB_DEPTH)
        return tc_set_error(TC_ERR_ARG, "control: control flow nested more than %d deep", MAX_SUB_DEPTH);
    tc_graph *outer = tc_trace_suspend();
    tc_status st = tc_trace_begin(sub);
    if (st) {
        tc_trace_resume(outer);
        return st;
    }
    outer_stack[depth++] = outer;
    return TC_OK;
}

tc_status tc_control_sub_end(tc_graph *sub)
{
    if (!sub) return tc_set_error(TC_ERR_ARG, "control: NULL subgraph");
    if (depth == 0 || tc_trace_active != sub)
        return tc_set_error(TC_ERR_ARG, "control: this subgraph is not the trace begun last");
    tc_status st = tc_trace_end(sub);
    tc_trace_resume(outer_stack[--depth]);
    return st;
}

/* ---- implicit operands -------------------------------------------------------------------------
 * A function traced as a subgraph may use, by closure, a tensor the outer trace computed
 * (an input, an op result): the subgraph sees it as a captured EXTERNAL, which would read
 * the trace-time buffer at every run. Such values become extra inputs of BOTH subgraphs
 * (the same order in each; a subgraph that does not use one gets an unused input) and
 * extra inputs of the node, so each run passes the current value. Outer EXTERNALs
 * (parameters) stay captured: they are read by reference anyway. */

#define MAX_CAPTURES 64

/* Outer values the subgraph's externals stand for, added to caps (unique), with the tensors
 * in capt (new references). */
static tc_status find_captures(tc_graph *g, const tc_graph *sub, int32_t *caps, const tc_tensor **capt, int *ncap)
{
    for (int32_t v = 0; v < sub->nvals; v++) {
        const tc_gval *x = &sub->vals[v];
        if (x->kind != TC_GV_EXTERNAL || !x->t) continue;
        int32_t ov = tc_trace_find(g, x->t);
        if (ov < 0 || g->vals[ov].kind == TC_GV_EXTERNAL) continue;
        bool have = false;
        for (int i = 0; i < *ncap && !have; i++) have = caps[i] == ov;
        if (have) continue;
        if (*ncap == MAX_CAPTURES)
            return tc_set_error(TC_ERR_ARG, "control: more than %d tensors of the traced code used by closure; pass "
                                            "them as operands", MAX_CAPTURES);
        tc_tensor_retain(x->t); /* the subgraph lets go of it when it becomes an input */
        capt[*ncap] = x->t, caps[(*ncap)++] = ov;
    }
    return TC_OK;
}

/* Appends to sub one input per capture, in order: its EXTERNAL for that outer value turned
 * into the input, or a new (unused) input. */
static tc_status add_capture_inputs(tc_graph *g, tc_graph *sub, const int32_t *caps, int ncap)
{
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
            if (x->kind == TC_GV_EXTERNAL && x->t && tc_trace_find(g, x->t) == caps[i]) found = v;
        }
        if (found < 0) {
            const tc_gval *o = &g->vals[caps[i]];
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

/* Whether running the node would cut gradients: grad mode on, and an input or a captured
 * tensor of a subgraph requires grad. */
static tc_status check_grad(int32_t op, const tc_tensor *const *ins, int nin, tc_graph *const *sub)
{
    if (!tc_grad_enabled()) return TC_OK;
    bool need = false;
    for (int i = 0; i < nin; i++) need = need || tc_tensor_requires_grad(ins[i]);
    for (int s = 0; s < 2 && !need; s++)
        for (int32_t v = 0; v < sub[s]->nvals && !need; v++)
            need = sub[s]->vals[v].kind == TC_GV_EXTERNAL && tc_tensor_requires_grad(sub[s]->vals[v].t);
    if (!need) return TC_OK;
    return tc_set_error(TC_ERR_UNSUPPORTED,
                        "gradients through tocha.%s in compiled graphs are not supported yet; its inputs or the "
                        "tensors it uses require grad. Run it eagerly (outside tocha.jit), or under torch.no_grad()",
                        op == TC_GOP_COND ? "cond" : "while_loop");
}

/* Shared body of tc_control_cond / tc_control_while: ins[0..nin) the outer tensors. */
static tc_status record(int32_t op, tc_graph **sub, const tc_tensor *const *ins, int nin, tc_tensor **results,
                        int nres)
{
    tc_graph *g = tc_trace_active;
    tc_status st = TC_OK;
    int32_t vin[MAX_RESULTS + 1 + MAX_CAPTURES], vout[MAX_RESULTS];
    tc_tensor *res[MAX_RESULTS] = {NULL};
    int nout = 0;
    if (!g) st = tc_set_error(TC_ERR_ARG, "%s: no trace is active", opname(op));
    else if (!sub[0] || !sub[1]) st = tc_set_error(TC_ERR_ARG, "%s: NULL subgraph", opname(op));
    else if (nin > MAX_RESULTS + 1)
        st = tc_set_error(TC_ERR_ARG, "%s: %d inputs (at most %d)", opname(op), nin, MAX_RESULTS + 1);
    int32_t caps[MAX_CAPTURES];
    const tc_tensor *capt[MAX_CAPTURES], *all[2 * MAX_RESULTS + 1];
    int ncap = 0;
    for (int s = 0; s < 2 && st == TC_OK; s++) st = find_captures(g, sub[s], caps, capt, &ncap);
    for (int s = 0; s < 2 && st == TC_OK; s++) st = add_capture_inputs(g, sub[s], caps, ncap);
    for (int i = 0; i < nin && st == TC_OK; i++) all[i] = ins[i];
    for (int i = 0; i < ncap && st == TC_OK; i++) all[nin + i] = capt[i], vin[nin + i] = caps[i];
    if (st == TC_OK) st = check_grad(op, all, nin + ncap, sub);
    for (int i = 0; i < nin && st == TC_OK; i++) {
        if (!ins[i]) st = tc_set_error(TC_ERR_ARG, "%s: input %d is NULL", opname(op), i + 1);
        else st = tc_trace_lookup(g, ins[i], &vin[i]);
    }
    nin += ncap;
    ins = all;
    if (st == TC_OK) st = check_node(g, op, vin, nin, sub, 2, &nout);
    if (st == TC_OK && nout != nres)
        st = tc_set_error(TC_ERR_ARG, "%s: %d result slots for %d results", opname(op), nres, nout);
    if (st == TC_OK) {
        /* run it once on the real tensors, with the trace suspended (subgraph runs are not
         * recorded: the node stands for them) */
        tc_gnode tmp = {.op = op, .nin = nin, .nout = nout, .sub = sub, .nsub = 2};
        tc_graph *outer = tc_trace_suspend();
        st = tc_control_run(&tmp, (tc_tensor *const *)ins, res);
        tc_trace_resume(outer);
    }
    /* a result that is (a view of) an input or a captured tensor -- a branch returning its
     * operand, a loop running zero times -- gets its own buffer: keying it to the node's
     * output would redirect the input's later uses to the node */
    for (int o = 0; o < nout && st == TC_OK; o++) {
        if (res[o]->refcount == 1 && res[o]->storage && res[o]->storage->refcount == 1) continue;
        tc_tensor *c = NULL;
        const tc_tensor *cin[1] = {res[o]};
        tc_params cp = {.i = {-1}};
        tc_graph *outer = tc_trace_suspend();
        st = tc_op_exec(TC_OP_COPY, cin, 1, &cp, &c, 1);
        tc_trace_resume(outer);
        if (st) break;
        tc_tensor_release(res[o]);
        res[o] = c;
    }
    if (st == TC_OK) st = tc_graph_add_control(g, op, vin, nin, sub, 2, vout);
    for (int i = 0; i < ncap; i++) tc_tensor_release((tc_tensor *)capt[i]);
    if (st) {
        tc_graph_free(sub[0]), tc_graph_free(sub[1]);
        for (int o = 0; o < nout; o++) tc_tensor_release(res[o]);
        return st;
    }
    /* from here the graph owns the subgraphs */
    for (int o = 0; o < nout && st == TC_OK; o++) st = tc_trace_bind(g, res[o], vout[o]);
    if (st) {
        for (int o = 0; o < nout; o++) tc_tensor_release(res[o]);
        return st;
    }
    for (int o = 0; o < nout; o++) results[o] = res[o];
    return TC_OK;
}

tc_status tc_control_cond(tc_graph *then_g, tc_graph *else_g, const tc_tensor *pred,
                          const tc_tensor *const *operands, int nops, tc_tensor **results, int nres)
{
    tc_graph *sub[2] = {then_g, else_g};
    const tc_tensor *ins[MAX_RESULTS + 1];
    if (nops < 0 || nops > MAX_RESULTS || (nops && !operands) || (nres && !results)) {
        tc_graph_free(then_g), tc_graph_free(else_g);
        return tc_set_error(TC_ERR_ARG, "cond: bad operand or result list (%d operands, at most %d)", nops,
                            MAX_RESULTS);
    }
    ins[0] = pred;
    for (int i = 0; i < nops; i++) ins[i + 1] = operands[i];
    return record(TC_GOP_COND, sub, ins, nops + 1, results, nres);
}

tc_status tc_control_while(tc_graph *cond_g, tc_graph *body_g, const tc_tensor *const *state, int n,
                           tc_tensor **results)
{
    tc_graph *sub[2] = {cond_g, body_g};
    if (n < 1 || n > MAX_RESULTS || !state || !results) {
        tc_graph_free(cond_g), tc_graph_free(body_g);
        return tc_set_error(TC_ERR_ARG, "while: bad state list (%d tensors, 1 to %d)", n, MAX_RESULTS);
    }
    return record(TC_GOP_WHILE, sub, state, n, results, n);
}
