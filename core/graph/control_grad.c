/* control_grad.c -- gradients through graph-mode control flow: the autograd node of a
 * recorded tocha.cond / tocha.while_loop, and the WHILE_GRAD node running a loop backward.
 *
 * When a control node is recorded (control.c, tc_control_record) with grad mode on and an
 * input requiring grad, its results get a CUSTOM autograd node (node.h) holding clones of
 * the node's subgraphs and aliases of its inputs. Every differentiable tensor is an input
 * of the node by then: operands, the state, and the tensors the subgraphs capture that
 * require grad (control.c turns those into extra operands). Backward:
 *
 *   cond   For each branch, the vector-Jacobian product is traced as a new subgraph:
 *          inputs = (operands..., seeds for the results that got a gradient...), body =
 *          the branch REPLAYED op by op through tc_op_run on leaf copies of the operands
 *          (so autograd records it) followed by tc_autograd_grad, outputs = the gradients
 *          of the operands asked for (zeros where the branch does not use one). The two
 *          VJP subgraphs become the branches of a new COND node on the same predicate,
 *          recorded like any other (into the active trace when there is one: backward
 *          inside tocha.jit records it; else it just runs). Nested control nodes replay
 *          through tc_control_record, so they get their own autograd nodes recursively.
 *
 *   while  The body's VJP is traced the same way (inputs = state, invariants, seeds of the
 *          state's float entries; outputs = the gradients of those entries, then of the
 *          invariants asked for). A WHILE_GRAD node {cond, body, vjp} runs the loop forward
 *          again from the initial state keeping every state (the history lives only during
 *          the node's run: no value of the graph has a data-dependent size), then applies
 *          the VJP from the last iteration to the first, summing the invariants' gradients.
 *
 * Gradients of gradients work through cond (its backward is a cond, itself differentiable
 * by replay); through while_loop they are refused (WHILE_GRAD has no backward). Subgraphs
 * with random ops are refused when gradients are wanted: the replay would draw new numbers.
 */
#include "control.h"
#include "trace.h"
#include <stdlib.h>

/* ---- cloning ------------------------------------------------------------------------------------ */

/* The value of src's v in g (map), created for inputs' siblings: externals and constants. */
static tc_status clone_leaf(tc_graph *g, const tc_graph *src, int32_t v, int32_t *map)
{
    if (v < 0 || map[v] >= 0) return TC_OK;
    const tc_gval *x = &src->vals[v];
    if (x->kind == TC_GV_EXTERNAL && x->t) return tc_graph_add_external(g, x->t, &map[v]);
    if (x->kind == TC_GV_CONST && x->t) return tc_graph_add_const(g, x->t, &map[v]);
    return tc_set_error(TC_ERR_INTERNAL, "control: cloning a subgraph: value %%%d is read before it is made", v);
}

/* A node of src appended to g (subgraphs cloned too). */
static tc_status clone_node(tc_graph *g, const tc_graph *src, const tc_gnode *n, int32_t *map)
{
    int nin = n->nin, nout = n->nout;
    int32_t *in = calloc((size_t)(nin > 0 ? nin : 1), sizeof *in), *out = calloc((size_t)nout + 1, sizeof *out);
    int32_t *dt = calloc((size_t)nout + 1, sizeof *dt), *nd = calloc((size_t)nout + 1, sizeof *nd);
    int64_t(*sz)[TC_MAX_DIMS] = calloc((size_t)nout + 1, sizeof *sz);
    tc_status st = in && out && dt && nd && sz ? TC_OK : tc_set_error(TC_ERR_MEMORY, "control: out of memory cloning");
    for (int i = 0; i < nin && st == TC_OK; i++) {
        st = clone_leaf(g, src, n->in[i], map);
        in[i] = n->in[i] < 0 ? -1 : map[n->in[i]];
    }
    for (int o = 0; o < nout && st == TC_OK; o++) {
        const tc_gval *x = &src->vals[n->out[o]];
        dt[o] = x->dtype, nd[o] = x->ndim;
        memcpy(sz[o], x->size, sizeof sz[o]);
    }
    if (st == TC_OK)
        st = tc_graph_add_node(g, n->op, in, nin, n->op < TC_OP_COUNT ? &n->p : NULL, nout, dt, nd,
                               (const int64_t(*)[TC_MAX_DIMS])sz, out);
    if (st == TC_OK) {
        tc_gnode *c = &g->nodes[g->nnodes - 1];
        c->flags |= n->flags & (TC_GN_WAS_INPLACE | TC_GN_RANDOM);
        c->where = n->where ? tc_graph_strdup(g, n->where) : NULL;
        for (int o = 0; o < nout; o++) map[n->out[o]] = out[o];
        if (n->nsub > 0) {
            c->sub = tc_graph_alloc(g, sizeof(tc_graph *) * (size_t)n->nsub);
            if (!c->sub) st = TC_ERR_MEMORY;
            for (int s = 0; s < n->nsub && st == TC_OK; s++) {
                st = tc_control_clone(n->sub[s], &c->sub[s]);
                if (st == TC_OK) c->nsub = s + 1; /* g frees what it holds */
            }
        }
    }
    free(in), free(out), free(dt), free(nd), free(sz);
    return st;
}

tc_status tc_control_clone(const tc_graph *src, tc_graph **out)
{
    if (!src || !out) return tc_set_error(TC_ERR_ARG, "control: NULL graph to clone");
    tc_graph *g = NULL;
    TRY(tc_graph_new(&g));
    int32_t *map = malloc(sizeof *map * (size_t)(src->nvals > 0 ? src->nvals : 1));
    tc_status st = map ? TC_OK : tc_set_error(TC_ERR_MEMORY, "control: out of memory cloning a subgraph");
    for (int32_t v = 0; v < src->nvals && map; v++) map[v] = -1;
    for (int i = 0; i < src->ninputs && st == TC_OK; i++) {
        const tc_gval *x = &src->vals[src->inputs[i]];
        st = tc_graph_add_input(g, (tc_dtype)x->dtype, x->ndim, x->size, &map[src->inputs[i]]);
    }
    for (int32_t n = 0; n < src->nnodes && st == TC_OK; n++)
        if (!(src->nodes[n].flags & TC_GN_DEAD)) st = clone_node(g, src, &src->nodes[n], map);
    for (int o = 0; o < src->noutputs && st == TC_OK; o++) {
        st = clone_leaf(g, src, src->outputs[o], map);
        if (st == TC_OK) st = tc_graph_mark_output(g, map[src->outputs[o]]);
    }
    for (int w = 0; w < src->nwb && st == TC_OK; w++) {
        st = clone_leaf(g, src, src->wb_ext[w], map);
        if (st == TC_OK) st = tc_graph_add_writeback(g, map[src->wb_ext[w]], map[src->wb_val[w]]);
    }
    g->allow_mutation = src->allow_mutation;
    free(map);
    if (st) {
        tc_graph_free(g);
        return st;
    }
    *out = g;
    return TC_OK;
}

/* ---- checks --------------------------------------------------------------------------------------- */

static tc_status check_replayable(const tc_graph *g, const char *what)
{
    if (g->nwb)
        return tc_set_error(TC_ERR_UNSUPPORTED,
                            "gradients through %s are not supported yet when it writes into captured tensors", what);
    for (int32_t n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        if (nd->flags & TC_GN_RANDOM)
            return tc_set_error(TC_ERR_UNSUPPORTED,
                                "gradients through %s are not supported yet when its functions draw random numbers "
                                "(%s): the backward recomputes them and would draw others",
                                what, tc_graph_op_name(nd->op));
        for (int s = 0; s < nd->nsub; s++) TRY(check_replayable(nd->sub[s], what));
    }
    return TC_OK;
}

tc_status tc_control_grad_check(int32_t op, tc_graph *const *sub, int nsub)
{
    const char *what = op == TC_GOP_COND ? "tocha.cond" : "tocha.while_loop";
    if (op == TC_GOP_WHILE_GRAD)
        return tc_set_error(TC_ERR_UNSUPPORTED, "gradients of gradients through tocha.while_loop are not supported yet "
                                                "(create_graph through its backward)");
    for (int s = 0; s < nsub; s++) TRY(check_replayable(sub[s], what));
    return TC_OK;
}

/* ---- replay --------------------------------------------------------------------------------------- */

tc_status tc_control_replay(const tc_graph *sub, tc_tensor *const *ins, tc_tensor **outs)
{
    tc_tensor **rt = calloc((size_t)(sub->nvals > 0 ? sub->nvals : 1), sizeof *rt);
    if (!rt) return tc_set_error(TC_ERR_MEMORY, "control: out of memory replaying a subgraph");
    tc_status st = TC_OK;
    for (int i = 0; i < sub->ninputs; i++) {
        rt[sub->inputs[i]] = ins[i];
        tc_tensor_retain(ins[i]);
    }
    for (int32_t v = 0; v < sub->nvals; v++)
        if ((sub->vals[v].kind == TC_GV_EXTERNAL || sub->vals[v].kind == TC_GV_CONST) && sub->vals[v].t) {
            rt[v] = sub->vals[v].t;
            tc_tensor_retain(rt[v]);
        }
    for (int32_t k = 0; k < sub->nnodes && st == TC_OK; k++) {
        const tc_gnode *n = &sub->nodes[k];
        if (n->flags & TC_GN_DEAD) continue;
        const tc_tensor **in = calloc((size_t)n->nin + 1, sizeof *in);
        tc_tensor **res = calloc((size_t)n->nout + 2, sizeof *res);
        if (!in || !res) st = tc_set_error(TC_ERR_MEMORY, "control: out of memory replaying a subgraph");
        for (int i = 0; i < n->nin && st == TC_OK; i++) {
            in[i] = n->in[i] >= 0 ? rt[n->in[i]] : NULL;
            if (n->in[i] >= 0 && !in[i])
                st = tc_set_error(TC_ERR_INTERNAL, "control: replaying %s: input %d has no value",
                                  tc_graph_op_name(n->op), i + 1);
        }
        if (st == TC_OK && n->op < TC_OP_COUNT) {
            int nslots = tc_op_info((tc_op)n->op)->nout; /* max/min over all elements: 2 slots, 1 node output */
            st = tc_op_run((tc_op)n->op, in, n->nin, &n->p, res, nslots);
            for (int o = n->nout; o < nslots; o++) tc_tensor_release(res[o]), res[o] = NULL;
        } else if (st == TC_OK) {
            tc_graph *cl[3] = {NULL, NULL, NULL};
            for (int s = 0; s < n->nsub && s < 3 && st == TC_OK; s++) st = tc_control_clone(n->sub[s], &cl[s]);
            if (st == TC_OK) st = tc_control_record(n->op, cl, n->nsub, in, n->nin, res, n->nout);
            else
                for (int s = 0; s < 3; s++) tc_graph_free(cl[s]);
        }
        for (int o = 0; o < n->nout && st == TC_OK; o++) {
            if (n->out[o] >= 0 && !rt[n->out[o]]) rt[n->out[o]] = res[o];
            else tc_tensor_release(res[o]);
        }
        free(in), free(res);
    }
    for (int o = 0; o < sub->noutputs && st == TC_OK; o++)
        if (!rt[sub->outputs[o]]) st = tc_set_error(TC_ERR_INTERNAL, "control: replay: result %d has no value", o + 1);
    for (int o = 0; o < sub->noutputs && st == TC_OK; o++) {
        outs[o] = rt[sub->outputs[o]];
        tc_tensor_retain(outs[o]);
    }
    for (int32_t v = 0; v < sub->nvals; v++) tc_tensor_release(rt[v]);
    free(rt);
    return st;
}

/* ---- vector-Jacobian products as subgraphs --------------------------------------------------------- */

/* A fresh contiguous copy of t made by the kernel alone (nothing records it). */
static tc_status fresh_copy(const tc_tensor *t, tc_tensor **out)
{
    tc_tensor *c;
    TRY(tc_tensor_alloc((tc_dtype)t->dtype, t->ndim, t->size, &c));
    tc_tensor *res[1] = {c};
    tc_params p = {.i = {-1}};
    tc_status st = tc_tensor_numel(t) ? tc_op_exec(TC_OP_COPY, &t, 1, &p, res, 1) : TC_OK;
    if (st) {
        tc_tensor_release(c);
        return st;
    }
    *out = c;
    return TC_OK;
}

/* Traces the VJP of fwd as a new subgraph *out: inputs = copies of xs[0..nx) (fwd's inputs),
 * then copies of the seeds gs[0..ng) of fwd's results ro[0..ng); outputs = the gradients of
 * fwd's inputs wi[0..nw) (float), zeros where no gradient reaches one. */
static tc_status trace_vjp(const tc_graph *fwd, tc_tensor *const *xs, int nx, const int *ro, tc_tensor *const *gs,
                           int ng, const int *wi, int nw, tc_graph **out)
{
    tc_graph *vs = NULL;
    TRY(tc_control_sub_open(&vs));
    int nr = fwd->noutputs;
    tc_tensor **cx = calloc((size_t)(nx + ng + nr + nw + 1), sizeof *cx);
    const tc_tensor **lists = calloc((size_t)(2 * ng + nw + 1), sizeof *lists);
    tc_tensor **cg = cx + nx, **r = cg + ng, **grads = r + nr;
    const tc_tensor **outs = lists, **seeds = lists + ng, **wl = lists + 2 * ng;
    tc_status st = cx && lists ? TC_OK : tc_set_error(TC_ERR_MEMORY, "control: out of memory tracing a gradient");
    int prev = tc_set_grad_enabled(1);
    for (int i = 0; i < nx && st == TC_OK; i++) {
        st = fresh_copy(xs[i], &cx[i]);
        if (st == TC_OK) st = tc_trace_input(vs, cx[i]);
    }
    for (int k = 0; k < ng && st == TC_OK; k++) {
        st = fresh_copy(gs[k], &cg[k]);
        if (st == TC_OK) st = tc_trace_input(vs, cg[k]);
    }
    for (int k = 0; k < nw && st == TC_OK; k++) {
        st = tc_tensor_set_requires_grad(cx[wi[k]], 1);
        wl[k] = cx[wi[k]];
    }
    if (st == TC_OK) st = tc_control_replay(fwd, cx, r);
    int no = 0;
    for (int k = 0; k < ng && st == TC_OK; k++)
        if (tc_tensor_requires_grad(r[ro[k]])) outs[no] = r[ro[k]], seeds[no++] = cg[k];
    if (st == TC_OK && no > 0 && nw > 0)
        st = tc_autograd_grad(outs, seeds, no, wl, nw, 0, 0, TC_GRAD_ALLOW_UNUSED, grads);
    for (int k = 0; k < nw && st == TC_OK; k++) {
        if (!grads[k]) {
            tc_tmeta m;
            tc_tmeta_of(cx[wi[k]], &m);
            st = tc_g_full(&m, 0, &grads[k]);
        }
        if (st == TC_OK) st = tc_trace_output(vs, grads[k]);
    }
    tc_set_grad_enabled(prev);
    for (int i = 0; cx && i < nx + ng + nr + nw; i++) tc_tensor_release(cx[i]);
    free(cx), free(lists);
    tc_status se = tc_control_sub_end(vs);
    if (st == TC_OK) st = se;
    if (st) {
        tc_graph_free(vs);
        return st;
    }
    *out = vs;
    return TC_OK;
}

/* ---- the autograd nodes ---------------------------------------------------------------------------- */

typedef struct cgrad {
    int32_t op;         /* TC_GOP_COND or TC_GOP_WHILE */
    tc_graph *sub[2];   /* clones of the node's subgraphs */
    int nin, nout;
    tc_tensor **saved;  /* [nin] aliases of the node's inputs, with their edges as history */
    int64_t *ver;       /* [nin] their storage versions then */
} cgrad;

static void cgrad_free(void *p)
{
    cgrad *c = p;
    if (!c) return;
    tc_graph_free(c->sub[0]), tc_graph_free(c->sub[1]);
    for (int i = 0; c->saved && i < c->nin; i++) tc_tensor_release(c->saved[i]);
    free(c->saved), free(c->ver), free(c);
}

static tc_status check_versions(const cgrad *c, const char *name)
{
    char b[TC_SHAPE_BUF];
    for (int i = 0; i < c->nin; i++) {
        const tc_tensor *t = c->saved[i];
        if (t->storage && t->storage->version != c->ver[i])
            return tc_set_error(TC_ERR_ARG,
                                "%s: input %d of the %s (size %s) was modified in place after it ran (version %lld, "
                                "now %lld); use an out-of-place op or clone() before modifying it",
                                name, i + 1, c->op == TC_GOP_COND ? "cond" : "while_loop", tc_shape_str(t, b, sizeof b),
                                (long long)c->ver[i], (long long)t->storage->version);
    }
    return TC_OK;
}

/* in = {pred, operands (incl. captures)...}: the gradients of the operands asked for. */
static tc_status cond_backward(void *ctx, const tc_node *n, const tc_tensor *const *gout, const bool *needs,
                               tc_tensor **gin)
{
    cgrad *c = ctx;
    TRY(check_versions(c, "CondBackward"));
    int nin = c->nin, nout = c->nout, np = 0, nw = 0;
    int *P = calloc((size_t)nout + (size_t)nin + 1, sizeof *P), *W = P ? P + nout : NULL;
    const tc_tensor **ins = calloc((size_t)(nin + nout + 1), sizeof *ins);
    tc_tensor **gs = calloc((size_t)nout + (size_t)nin + 1, sizeof *gs), **res = gs ? gs + nout : NULL;
    tc_graph *vjp[2] = {NULL, NULL};
    tc_status st = P && ins && gs ? TC_OK : tc_set_error(TC_ERR_MEMORY, "CondBackward: out of memory");
    for (int o = 0; o < nout && st == TC_OK; o++)
        if (gout[o]) gs[np] = (tc_tensor *)gout[o], P[np++] = o;
    for (int i = 1; i < nin && st == TC_OK; i++)
        if (needs[i]) W[nw++] = i - 1; /* the branches' inputs are the node's, less the predicate */
    for (int b = 0; b < 2 && st == TC_OK && np && nw; b++)
        st = trace_vjp(c->sub[b], c->saved + 1, nin - 1, P, gs, np, W, nw, &vjp[b]);
    if (st == TC_OK && np && nw) {
        for (int i = 0; i < nin; i++) ins[i] = c->saved[i];
        for (int k = 0; k < np; k++) ins[nin + k] = gs[k];
        st = tc_control_record(TC_GOP_COND, vjp, 2, ins, nin + np, res, nw);
        vjp[0] = vjp[1] = NULL; /* taken */
        for (int k = 0; k < nw && st == TC_OK; k++) gin[W[k] + 1] = res[k];
    }
    tc_graph_free(vjp[0]), tc_graph_free(vjp[1]);
    free(P), free(ins), free(gs);
    return st;
}

/* in = {state (nout), invariants...}: the gradients of the state's float entries and of the
 * invariants asked for, by a WHILE_GRAD node. */
static tc_status while_backward(void *ctx, const tc_node *n, const tc_tensor *const *gout, const bool *needs,
                                tc_tensor **gin)
{
    cgrad *c = ctx;
    TRY(check_versions(c, "WhileBackward"));
    int nin = c->nin, ns = c->nout, nf = 0, nw = 0;
    bool any = false;
    for (int o = 0; o < ns; o++) any = any || gout[o];
    if (!any) return TC_OK;
    int *F = calloc((size_t)(2 * nin + 1), sizeof *F), *W = F ? F + nin : NULL;
    tc_tensor **gf = calloc((size_t)(2 * nin + 1), sizeof *gf), **res = gf ? gf + nin : NULL;
    const tc_tensor **ins = calloc((size_t)(2 * nin + 1), sizeof *ins);
    tc_graph *sub[3] = {NULL, NULL, NULL};
    tc_status st = F && gf && ins ? TC_OK : tc_set_error(TC_ERR_MEMORY, "WhileBackward: out of memory");
    for (int i = 0; i < ns && st == TC_OK; i++) /* the gradient carried through the loop: every float entry */
        if (tc_dtype_is_float((tc_dtype)c->saved[i]->dtype)) {
            W[nw++] = F[nf] = i;
            if (gout[i]) {
                gf[nf] = (tc_tensor *)gout[i];
                tc_tensor_retain(gf[nf]);
            } else {
                st = tc_g_full(&n->meta[nin + i], 0, &gf[nf]);
            }
            nf++;
        }
    for (int j = ns; j < nin && st == TC_OK; j++)
        if (needs[j]) W[nw++] = j;
    if (st == TC_OK) st = trace_vjp(c->sub[1], c->saved, nin, F, gf, nf, W, nw, &sub[2]);
    for (int s = 0; s < 2 && st == TC_OK; s++) st = tc_control_clone(c->sub[s], &sub[s]);
    if (st == TC_OK) {
        for (int i = 0; i < nin; i++) ins[i] = c->saved[i];
        for (int k = 0; k < nf; k++) ins[nin + k] = gf[k];
        st = tc_control_record(TC_GOP_WHILE_GRAD, sub, 3, ins, nin + nf, res, nw);
        sub[0] = sub[1] = sub[2] = NULL; /* taken */
        for (int k = 0; k < nw && st == TC_OK; k++) {
            if (needs[W[k]]) gin[W[k]] = res[k];
            else tc_tensor_release(res[k]);
        }
    }
    for (int s = 0; s < 3; s++) tc_graph_free(sub[s]);
    for (int k = 0; gf && k < nf; k++) tc_tensor_release(gf[k]);
    free(F), free(gf), free(ins);
    return st;
}

static const tc_custom_fn cond_fn = {"CondBackward", cond_backward, cgrad_free};
static const tc_custom_fn while_fn = {"WhileBackward", while_backward, cgrad_free};

tc_status tc_control_grad_attach(int32_t op, tc_graph **sub, int nsub, const tc_tensor *const *ins,
                                 const tc_edge *edges, int nin, tc_tensor *const *res, int nres)
{
    cgrad *c = calloc(1, sizeof *c);
    if (c) {
        c->sub[0] = sub[0], c->sub[1] = sub[1];
        sub[0] = sub[1] = NULL;
    }
    for (int s = 0; s < nsub; s++) tc_graph_free(sub[s]), sub[s] = NULL;
    if (!c || (op != TC_GOP_COND && op != TC_GOP_WHILE) || nsub != 2) {
        cgrad_free(c);
        return c ? tc_set_error(TC_ERR_INTERNAL, "control: no gradient for a %s node", tc_graph_op_name(op))
                 : tc_set_error(TC_ERR_MEMORY, "control: out of memory");
    }
    c->op = op, c->nin = nin, c->nout = nres;
    c->saved = calloc((size_t)(nin > 0 ? nin : 1), sizeof *c->saved);
    c->ver = calloc((size_t)(nin > 0 ? nin : 1), sizeof *c->ver);
    tc_status st = c->saved && c->ver ? TC_OK : tc_set_error(TC_ERR_MEMORY, "control: out of memory");
    for (int i = 0; i < nin && st == TC_OK; i++) {
        st = tc_tensor_alias(ins[i], &c->saved[i]);
        if (st) break;
        c->ver[i] = ins[i]->storage ? ins[i]->storage->version : 0;
        /* the alias carries the input's edge, so a backward node recorded under create_graph
         * reaches the forward's inputs (gradients of gradients) */
        if (edges[i].node) tc_set_history(c->saved[i], edges[i].node, edges[i].nr);
    }
    if (st) {
        cgrad_free(c);
        return st;
    }
    return tc_autograd_custom(op == TC_GOP_COND ? &cond_fn : &while_fn, c, ins, edges, nin, res, nres);
}

/* ---- running WHILE_GRAD ------------------------------------------------------------------------------ */

static tc_status add_into(tc_tensor **acc, tc_tensor *g)
{
    if (!*acc) {
        *acc = g;
        return TC_OK;
    }
    const tc_tensor *in[2] = {*acc, g};
    tc_params p = {.s = {1, 0}};
    tc_tensor *r = NULL;
    tc_status st = tc_op_exec(TC_OP_ADD, in, 2, &p, &r, 1);
    tc_tensor_release(g);
    if (st) return st;
    tc_tensor_release(*acc);
    *acc = r;
    return TC_OK;
}

/* in = {state (ns), invariants, seeds (nf)}; sub = {cond, body, vjp}. */
tc_status tc_control_run_while_grad(const tc_gnode *n, tc_tensor *const *ins, tc_tensor **outs)
{
    const tc_graph *cg = n->sub[0], *bg = n->sub[1], *vg = n->sub[2];
    int ns = bg->noutputs, ncore = cg->ninputs, nf = n->nin - ncore, nw = vg->noutputs - nf;
    tc_tensor **hist = NULL; /* states after 1..N iterations, ns tensors each */
    int64_t N = 0, cap = 0;
    const tc_tensor **cur = calloc((size_t)n->nin + 1, sizeof *cur);
    tc_tensor **o = calloc((size_t)vg->noutputs + 1, sizeof *o), **g = calloc((size_t)nf + 1, sizeof *g);
    tc_tensor **acc = calloc((size_t)nw + 1, sizeof *acc);
    tc_status st = cur && o && g && acc ? TC_OK : tc_set_error(TC_ERR_MEMORY, "while_grad: out of memory");
    for (int i = 0; i < ncore && st == TC_OK; i++) cur[i] = ins[i];
    while (st == TC_OK) { /* forward again, keeping every state */
        tc_tensor *p = NULL;
        bool go = false;
        st = tc_graph_run((tc_graph *)cg, cur, ncore, &p, 1);
        if (st == TC_OK) st = tc_control_read_pred("while_grad", p, &go);
        tc_tensor_release(p);
        if (st || !go) break;
        if (N == cap) {
            cap = cap ? 2 * cap : 8;
            tc_tensor **h = realloc(hist, sizeof *h * (size_t)(cap * ns));
            if (!h) {
                st = tc_set_error(TC_ERR_MEMORY, "while_grad: out of memory for %lld states", (long long)cap);
                break;
            }
            hist = h;
        }
        tc_tensor **next = hist + N * ns;
        for (int i = 0; i < ns; i++) next[i] = NULL;
        st = tc_graph_run((tc_graph *)bg, cur, ncore, next, ns);
        if (st) break;
        N++;
        for (int i = 0; i < ns; i++) cur[i] = next[i];
    }
    for (int k = 0; k < nf && st == TC_OK; k++) {
        g[k] = ins[ncore + k];
        tc_tensor_retain(g[k]);
    }
    for (int64_t k = N - 1; k >= 0 && st == TC_OK; k--) { /* backward, last iteration first */
        for (int i = 0; i < ns; i++) cur[i] = k == 0 ? ins[i] : hist[(k - 1) * ns + i];
        for (int i = ns; i < ncore; i++) cur[i] = ins[i];
        for (int j = 0; j < nf; j++) cur[ncore + j] = g[j];
        for (int j = 0; j < vg->noutputs; j++) o[j] = NULL;
        st = tc_graph_run((tc_graph *)vg, cur, n->nin, o, vg->noutputs);
        if (st) break;
        for (int j = 0; j < nf; j++) tc_tensor_release(g[j]), g[j] = o[j], o[j] = NULL;
        for (int j = 0; j < nw && st == TC_OK; j++) st = add_into(&acc[j], o[nf + j]), o[nf + j] = NULL;
        for (int j = 0; j < vg->noutputs; j++) tc_tensor_release(o[j]), o[j] = NULL;
    }
    for (int j = 0; j < nw && st == TC_OK; j++) /* no iteration: the invariants got nothing */
        if (!acc[j]) {
            const tc_gval *x = &vg->vals[vg->outputs[nf + j]];
            tc_params p = {.s = {0, 0}};
            st = tc_tensor_alloc((tc_dtype)x->dtype, x->ndim, x->size, &acc[j]);
            if (st == TC_OK) st = tc_op_exec(TC_OP_FILL, NULL, 0, &p, &acc[j], 1);
        }
    if (st == TC_OK) {
        for (int j = 0; j < nf; j++) outs[j] = g[j], g[j] = NULL;
        for (int j = 0; j < nw; j++) outs[nf + j] = acc[j], acc[j] = NULL;
    }
    for (int j = 0; g && j < nf; j++) tc_tensor_release(g[j]);
    for (int j = 0; acc && j < nw; j++) tc_tensor_release(acc[j]);
    for (int64_t k = 0; k < N * ns; k++) tc_tensor_release(hist[k]);
    free(hist), free(cur), free(o), free(g), free(acc);
    return st;
}
