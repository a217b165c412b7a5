/* engine.c -- backward: runs the recorded gradient rules in reverse topological order.
 *
 * One pass (engine_run) serves tc_autograd_backward (accumulate into leaves) and
 * tc_autograd_grad (capture the gradients reaching given inputs, run nothing beyond them):
 *   1. discover the nodes reachable from the roots (iterative DFS; counts each node's
 *      consumers), retaining each so hooks cannot free the graph under us;
 *   2. order them (Kahn's algorithm: a node runs after every node that feeds it gradient);
 *   3. for grad(), mark the nodes on a path to an input (reverse order);
 *   4. seed the roots' gradients and walk the order: pre-hooks, captures, the rule, the
 *      sum of its input gradients into the producers' buffers (gbuf);
 *   5. only when everything succeeded, write leaf (and retained) gradients.
 * Nothing recurses, so a 100k-op chain needs no stack. Grad mode is create_graph while
 * rules run: with create_graph the rules' own ops are recorded (gradients of gradients).
 * Inside a graph trace (tc_trace_active) the in-place shortcuts (acc, slice accumulation,
 * in-place sums) are off, as under create_graph: the trace records every rule op, and an
 * in-place add into a view of a gradient buffer is a write the graph cannot express.
 * A custom node (node.h: graph-mode control flow) runs its backward function instead of a
 * rule; its gradients are checked and accumulated like a rule's (deliver).
 */
#include "node.h"
#include <stdio.h>
#include <stdlib.h>

static tc_hook_runner hook_runner;
static uint64_t gen_counter;

void tc_autograd_set_hook_runner(tc_hook_runner fn) { hook_runner = fn; }

enum { NEEDED = 1, CAPTURED = 2, EXEC = 4 };

typedef struct ptrvec {
    void **v;
    int64_t n, cap;
} ptrvec;

static tc_status push(ptrvec *a, void *x)
{
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 64;
        void **v = realloc(a->v, sizeof *v * (size_t)cap);
        if (!v) return tc_set_error(TC_ERR_MEMORY, "backward: out of memory for the graph walk");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return TC_OK;
}

typedef struct pending {
    tc_node *node;
    int32_t nr;
    tc_tensor *g;
} pending;

typedef struct run {
    const char *what;
    bool capture, retain_graph, create_graph;
    bool stop_at_inputs; /* grad(): a captured gradient is not passed on past its input */
    uint64_t gen;
    ptrvec all;   /* discovered nodes (each retained) */
    ptrvec order; /* the same, in execution order */
    pending *later; /* leaf accumulations and retained gradients, applied at the end */
    int64_t nlater, caplater;
    const tc_edge *cap_edges; /* grad(): the inputs' edges */
    int ncap;
    tc_tensor **results;
} run;

/* ---- small helpers --------------------------------------------------------------------------- */

/* Whether any output of n received a gradient. */
static bool has_grad(const tc_node *n)
{
    for (int o = 0; o < n->nout; o++)
        if (n->gbuf[o]) return true;
    return false;
}

static void drop_grads(tc_node *n)
{
    for (int o = 0; o < n->nout; o++) {
        tc_tensor_release(n->gbuf[o]);
        n->gbuf[o] = NULL;
    }
}

static bool exclusive(const tc_tensor *t)
{
    return t->refcount == 1 && t->storage && t->storage->refcount == 1 && !t->autograd &&
           tc_tensor_is_contiguous(t);
}

/* A gradient buffer that may be added into in place: nobody else sees it, and its
 * elements tile its storage without overlap in some dim order (contiguous, or a
 * transpose: the layout the mm rules give a transposed weight's gradient). */
static bool own_dense(const tc_tensor *t)
{
    if (t->refcount != 1 || !t->storage || t->storage->refcount != 1 || t->autograd) return false;
    int64_t st[TC_MAX_DIMS], sz[TC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] == 1) continue;
        int j = n++;
        for (; j > 0 && st[j - 1] < t->stride[d]; j--) st[j] = st[j - 1], sz[j] = sz[j - 1];
        st[j] = t->stride[d], sz[j] = t->size[d];
    }
    int64_t expect = 1;
    for (int k = n - 1; k >= 0; k--) {
        if (st[k] != expect) return false;
        expect *= sz[k];
    }
    return true;
}

static tc_status add_op(const tc_tensor *a, const tc_tensor *b, tc_tensor *out, tc_tensor **res)
{
    const tc_tensor *in[2] = {a, b};
    tc_params p = {.s = {1, 0}};
    tc_tensor *o[1] = {out};
    TRY(tc_op_run(TC_OP_ADD, in, 2, &p, o, 1));
    *res = o[0];
    return TC_OK;
}

/* *slot += g; takes ownership of g. In place only into a buffer nobody else sees. */
static tc_status accumulate(tc_tensor **slot, tc_tensor *g, bool create_graph)
{
    if (!*slot) {
        *slot = g;
        return TC_OK;
    }
    tc_tensor *a = *slot, *r;
    tc_status s;
    if (!create_graph && !tc_trace_active && own_dense(a) && tc_same_shape(a, g)) {
        s = add_op(a, g, a, &r);
    } else {
        s = add_op(a, g, NULL, &r);
        if (s == TC_OK) {
            tc_tensor_release(a);
            *slot = r;
        }
    }
    tc_tensor_release(g);
    return s;
}

static tc_status later_push(run *R, tc_node *node, int32_t nr, tc_tensor *g)
{
    if (R->nlater == R->caplater) {
        int64_t cap = R->caplater ? 2 * R->caplater : 16;
        pending *v = realloc(R->later, sizeof *v * (size_t)cap);
        if (!v) return tc_set_error(TC_ERR_MEMORY, "%s: out of memory", R->what);
        R->later = v;
        R->caplater = cap;
    }
    tc_tensor_retain(g);
    R->later[R->nlater++] = (pending){node, nr, g};
    return TC_OK;
}

/* Stores / adds g into m->grad (PyTorch's AccumulateGrad): a fresh contiguous tensor with
 * no history when there is none yet (unless create_graph), an in-place add otherwise. */
static tc_status store_grad(tc_meta *m, tc_tensor *g, bool create_graph)
{
    tc_tensor *r;
    if (!m->grad) {
        if (create_graph || exclusive(g)) {
            tc_tensor_retain(g);
            m->grad = g;
            return TC_OK;
        }
        TRY(tc_g_copy(g, -1, &r));
        m->grad = r;
        return TC_OK;
    }
    if (create_graph) {
        TRY(add_op(m->grad, g, NULL, &r));
        tc_tensor_release(m->grad);
        m->grad = r;
        return TC_OK;
    }
    return add_op(m->grad, g, m->grad, &r);
}

/* ---- graph walk ---------------------------------------------------------------------------- */

static tc_status visit(run *R, ptrvec *stack, tc_node *c)
{
    if (c->gen == R->gen) return TC_OK;
    c->gen = R->gen;
    c->deps = 0;
    c->needed = 0;
    TRY(push(&R->all, c));
    tc_node_retain(c);
    return push(stack, c);
}

static tc_status discover(run *R, const tc_edge *roots, int nroots)
{
    ptrvec stack = {0};
    tc_status s = TC_OK;
    for (int i = 0; i < nroots && s == TC_OK; i++) s = visit(R, &stack, roots[i].node);
    while (s == TC_OK && stack.n > 0) {
        tc_node *n = stack.v[--stack.n];
        for (int i = 0; i < n->nin && s == TC_OK; i++) {
            tc_node *c = n->edges[i].node;
            if (!c) continue;
            s = visit(R, &stack, c);
            c->deps++;
        }
    }
    free(stack.v);
    stack = (ptrvec){0};
    if (s) return s;
    /* Kahn: a node is ready once every consumer has run */
    for (int64_t i = 0; i < R->all.n && s == TC_OK; i++) {
        tc_node *n = R->all.v[i];
        if (n->deps == 0) s = push(&stack, n);
    }
    while (s == TC_OK && stack.n > 0) {
        tc_node *n = stack.v[--stack.n];
        s = push(&R->order, n);
        for (int i = 0; i < n->nin && s == TC_OK; i++) {
            tc_node *c = n->edges[i].node;
            if (c && --c->deps == 0) s = push(&stack, c);
        }
    }
    free(stack.v);
    if (s == TC_OK && R->order.n != R->all.n)
        s = tc_set_error(TC_ERR_INTERNAL, "%s: the autograd graph has a cycle", R->what);
    return s;
}

static void mark_needed(run *R)
{
    for (int64_t k = R->order.n - 1; k >= 0; k--) {
        tc_node *n = R->order.v[k];
        if (!R->capture) {
            n->needed = NEEDED | EXEC;
            continue;
        }
        bool child = false;
        for (int i = 0; i < n->nin; i++)
            if (n->edges[i].node && (n->edges[i].node->needed & NEEDED)) child = true;
        if (child && n->op != TC_NODE_ACC) n->needed |= NEEDED | EXEC;
        if (n->needed & CAPTURED) n->needed |= NEEDED;
    }
}

/* ---- running one node ------------------------------------------------------------------------- */

static tc_status run_hooks(run *R, tc_node *n)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    /* binding hooks first, in the order added; retained gradients see their result */
    for (int h = 0; h < n->nhooks; h++) {
        tc_hook_entry e = n->hooks[h];
        tc_tensor *g = e.nr < n->nout ? n->gbuf[e.nr] : NULL;
        if (!g || e.retain || !hook_runner) continue;
        tc_tensor *rep = NULL;
        tc_status s = hook_runner(e.id, g, &rep);
        if (s) return s;
        if (!rep) continue;
        if (rep->dtype != g->dtype || !tc_same_shape(rep, g)) {
            tc_set_error(TC_ERR_SHAPE, "%s: a hook returned a %s gradient of size %s, expected %s of size %s", R->what,
                         tc_dtype_name((tc_dtype)rep->dtype), tc_shape_str(rep, b1, sizeof b1),
                         tc_dtype_name((tc_dtype)g->dtype), tc_shape_str(g, b2, sizeof b2));
            tc_tensor_release(rep);
            return TC_ERR_SHAPE;
        }
        tc_tensor_release(n->gbuf[e.nr]);
        n->gbuf[e.nr] = rep;
    }
    for (int h = 0; h < n->nhooks; h++) {
        tc_hook_entry e = n->hooks[h];
        tc_tensor *g = e.nr < n->nout ? n->gbuf[e.nr] : NULL;
        if (g && e.retain) TRY(later_push(R, n, e.nr, g));
    }
    return TC_OK;
}

static tc_status rule_error(const tc_node *n, tc_status s)
{
    const char *name = tc_node_name(n);
    const char *msg = tc_last_error();
    if (strncmp(msg, name, strlen(name)) == 0) return s;
    char buf[600];
    snprintf(buf, sizeof buf, "%s: %s", name, msg);
    return tc_set_error(s, "%s", buf);
}

/* narrow / select under a plain backward (no create_graph, no anomaly mode): g is added
 * into its slice of the producer's gradient buffer in place, instead of the rule's
 * zero-padded full-size gradient and a full-size add. An LSTM slices its gates and its
 * chunk of the input projection several times per step, so padded gradients cost
 * O(steps) full-size passes each. The buffer is made exclusive first (zeros, or a copy of
 * a gradient shared with someone else); the rule itself still serves create_graph, whose
 * ops must be recorded. Sets *done when it handled the node. */
static tc_status slice_accumulate(tc_node *n, bool *done)
{
    const tc_tmeta *m = &n->meta[0];
    const tc_tensor *g = n->gbuf[0];
    tc_edge *e = &n->edges[0];
    *done = false;
    if (!g || g->dtype != m->dtype) return TC_OK;
    tc_tensor **slot = &e->node->gbuf[e->nr], *buf = *slot;
    if (!buf || !own_dense(buf) || buf->dtype != m->dtype) {
        tc_tensor *fresh;
        if (buf) TRY(tc_g_copy(buf, -1, &fresh));
        else TRY(tc_g_full(m, 0, &fresh));
        tc_tensor_release(buf);
        *slot = buf = fresh;
    }
    const tc_tensor *in[1] = {buf};
    tc_tensor *view[1] = {NULL}, *r;
    TRY(tc_op_run((tc_op)n->op, in, 1, &n->p, view, 1));
    tc_status s = add_op(view[0], g, view[0], &r);
    tc_tensor_release(view[0]);
    *done = s == TC_OK;
    return s;
}

#define SMALL 8

static tc_status released_error(const char *name)
{
    return tc_set_error(TC_ERR_ARG,
                        "%s: trying to backward through the graph a second time (or to use its saved tensors "
                        "after they were freed); pass retain_graph=true to the first backward if you need to "
                        "backward twice",
                        name);
}

/* The input gradients gin[0..nin) a rule or a custom backward returned: checked against the
 * inputs' sizes and dtypes (and NaN in anomaly mode), then added into the producers' buffers.
 * Takes ownership of gin's entries (all released, also on failure). */
static tc_status deliver(run *R, tc_node *n, tc_status s, tc_tensor **gin, const bool *needs)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    const char *name = tc_node_name(n);
    for (int i = 0; i < n->nin && s == TC_OK; i++) {
        if (!gin[i]) continue;
        if (!needs[i]) {
            tc_tensor_release(gin[i]);
            gin[i] = NULL;
            continue;
        }
        const tc_tmeta *m = &n->meta[i];
        bool ok = gin[i]->dtype == m->dtype && gin[i]->ndim == m->ndim;
        for (int d = 0; ok && d < m->ndim; d++) ok = gin[i]->size[d] == m->size[d];
        if (!ok) {
            s = tc_set_error(TC_ERR_INTERNAL, "%s: gradient of input %d has size %s (%s), expected %s (%s)", name, i + 1,
                             tc_shape_str(gin[i], b1, sizeof b1), tc_dtype_name((tc_dtype)gin[i]->dtype),
                             tc_sizes_str(m->ndim, m->size, b2, sizeof b2), tc_dtype_name((tc_dtype)m->dtype));
        } else if (tc_ag_anomaly_on && tc_has_nan(gin[i])) {
            s = tc_set_error(TC_ERR_ARG, "anomaly: %s produced NaN in the gradient of input %d (size %s)", name, i + 1,
                             tc_shape_str(gin[i], b1, sizeof b1));
        }
    }
    for (int i = 0; i < n->nin; i++) {
        if (!gin[i]) continue;
        if (s) {
            tc_tensor_release(gin[i]);
            continue;
        }
        tc_edge *e = &n->edges[i];
        s = accumulate(&e->node->gbuf[e->nr], gin[i], R->create_graph);
    }
    return s;
}

/* A custom node: its backward function instead of an op-table rule. */
static tc_status run_custom(run *R, tc_node *n)
{
    const char *name = tc_node_name(n);
    if (!n->ctx) return released_error(name);
    int nin = n->nin;
    tc_tensor **gin = calloc((size_t)(nin > 0 ? nin : 1), sizeof *gin);
    bool *needs = calloc((size_t)(nin > 0 ? nin : 1), sizeof *needs);
    if (!gin || !needs) {
        free(gin), free(needs);
        return tc_set_error(TC_ERR_MEMORY, "%s: out of memory", name);
    }
    bool any = false;
    for (int i = 0; i < nin; i++) {
        tc_node *c = n->edges[i].node;
        needs[i] = c && (c->needed & NEEDED);
        any = any || needs[i];
    }
    tc_status s = TC_OK;
    if (any) {
        s = n->custom->backward(n->ctx, n, (const tc_tensor *const *)n->gbuf, needs, gin);
        if (s) s = rule_error(n, s);
    }
    s = deliver(R, n, s, gin, needs);
    free(gin), free(needs);
    if (s == TC_OK && !R->retain_graph) tc_node_release_saved(n);
    return s;
}

static tc_status run_rule(run *R, tc_node *n)
{
    char b1[TC_SHAPE_BUF];
    if (n->op == TC_NODE_CUSTOM) return run_custom(R, n);
    const char *name = tc_node_name(n);
    if (n->norule)
        return tc_set_error(TC_ERR_UNSUPPORTED, "%s: no gradient rule for %s", name, tc_op_info((tc_op)n->op)->name);
    const tc_grad_rule *rule = tc_grad_rule_of((tc_op)n->op);
    if (!rule) return tc_set_error(TC_ERR_INTERNAL, "%s: the rule table lost its entry", name);
    if (n->released) return released_error(name);
    int nin = n->nin, nout = n->nout, ns = nin + nout;
    const tc_tensor *sv_small[SMALL + 2];
    tc_tensor *gin_small[SMALL], *acc_small[SMALL];
    bool needs_small[SMALL];
    const tc_tensor **sv = sv_small;
    tc_tensor **gin = gin_small, **acc = acc_small;
    bool *needs = needs_small;
    tc_tensor *tmp_out[2] = {NULL, NULL};
    if (nin > SMALL) {
        sv = calloc((size_t)ns, sizeof *sv);
        gin = calloc((size_t)nin, sizeof *gin);
        acc = calloc((size_t)nin, sizeof *acc);
        needs = calloc((size_t)nin, sizeof *needs);
        if (!sv || !gin || !acc || !needs) {
            free(sv), free(gin), free(acc), free(needs);
            return tc_set_error(TC_ERR_MEMORY, "%s: out of memory", name);
        }
    }
    tc_status s = TC_OK;
    bool any = false;
    for (int i = 0; i < nin; i++) {
        gin[i] = NULL;
        acc[i] = NULL;
        tc_node *c = n->edges[i].node;
        needs[i] = c && (c->needed & NEEDED);
        any = any || needs[i];
        if (needs[i] && !R->create_graph && !tc_ag_anomaly_on && !tc_trace_active) { /* grad.h: acc */
            tc_tensor *b = c->gbuf[n->edges[i].nr];
            const tc_tmeta *m = &n->meta[i];
            bool fits = b && own_dense(b) && b->dtype == m->dtype && b->ndim == m->ndim;
            for (int d = 0; fits && d < m->ndim; d++) fits = b->size[d] == m->size[d];
            if (fits) acc[i] = b;
        }
    }
    for (int k = 0; k < ns && s == TC_OK; k++) {
        sv[k] = n->saved[k];
        if (!n->saved[k]) continue;
        const tc_storage *st = n->saved[k]->storage;
        if (st && st->version != n->saved_ver[k])
            s = tc_set_error(TC_ERR_ARG,
                             "%s: one of the tensors needed by %s was modified in place (version %lld, now %lld): "
                             "%s %d, size %s; use an out-of-place op or clone() before modifying it",
                             R->what, name, (long long)n->saved_ver[k], (long long)st->version,
                             k < nin ? "input" : "output", (k < nin ? k : k - nin) + 1,
                             tc_shape_str(n->saved[k], b1, sizeof b1));
    }
    /* create_graph: saved outputs come back with history pointing at this node */
    for (int o = 0; o < nout && s == TC_OK && R->create_graph; o++) {
        if (!n->saved[nin + o]) continue;
        s = tc_tensor_alias(n->saved[nin + o], &tmp_out[o]);
        if (s) break;
        tc_set_history(tmp_out[o], n, o);
        sv[nin + o] = tmp_out[o];
    }
    bool sliced = false;
    if (s == TC_OK && any && needs[0] && (n->op == TC_OP_NARROW || n->op == TC_OP_SELECT) && !R->create_graph &&
        !tc_ag_anomaly_on && !tc_trace_active)
        s = slice_accumulate(n, &sliced);
    if (s == TC_OK && any && !sliced) {
        tc_grad_ctx ctx = {.op = (tc_op)n->op,
                           .p = &n->p,
                           .nin = nin,
                           .nout = nout,
                           .in = sv,
                           .out = sv + nin,
                           .gout = (const tc_tensor *const *)n->gbuf,
                           .needs = needs,
                           .meta = n->meta,
                           .out_meta = n->meta + nin,
                           .acc = acc};
        s = rule->fn(&ctx, gin);
        if (s) s = rule_error(n, s);
    }
    for (int o = 0; o < 2; o++) tc_tensor_release(tmp_out[o]);
    s = deliver(R, n, s, gin, needs);
    if (nin > SMALL) free(sv), free(gin), free(acc), free(needs);
    if (s == TC_OK && !R->retain_graph) tc_node_release_saved(n);
    return s;
}

/* ---- the pass ---------------------------------------------------------------------------------- */

/* The gradient seeding root t: given g converted to t's dtype (sizes must match), or 1. */
static tc_status seed(run *R, const tc_tensor *t, const tc_tensor *g, int i, tc_tensor **out)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (!g) {
        if (tc_tensor_numel(t) != 1)
            return tc_set_error(TC_ERR_SHAPE,
                                "%s: grad can be implicitly created only for single-element outputs (output %d has "
                                "size %s); pass a gradient",
                                R->what, i + 1, tc_shape_str(t, b1, sizeof b1));
        tc_tmeta m;
        tc_tmeta_of(t, &m);
        return tc_g_full(&m, 1.0, out); /* an op, so a trace records the seed as a constant */
    }
    if (!tc_same_shape(g, t))
        return tc_set_error(TC_ERR_SHAPE, "%s: gradient %d has size %s but output %d has size %s", R->what, i + 1,
                            tc_shape_str(g, b1, sizeof b1), i + 1, tc_shape_str(t, b2, sizeof b2));
    if (g->dtype != t->dtype) {
        if (!tc_dtype_is_float((tc_dtype)g->dtype))
            return tc_set_error(TC_ERR_DTYPE, "%s: gradient %d is %s, output %d is %s", R->what, i + 1,
                                tc_dtype_name((tc_dtype)g->dtype), i + 1, tc_dtype_name((tc_dtype)t->dtype));
        return tc_g_copy(g, t->dtype, out);
    }
    tc_tensor_retain((tc_tensor *)g);
    *out = (tc_tensor *)g;
    return TC_OK;
}

static tc_status check_list(const char *what, const char *which, const tc_tensor *const *ts, int n)
{
    if (n < 1 || !ts) return tc_set_error(TC_ERR_ARG, "%s: no %s given", what, which);
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return tc_set_error(TC_ERR_ARG, "%s: %s %d is NULL", what, which, i + 1);
        if (!(ts[i]->flags & TC_TF_REQUIRES_GRAD))
            return tc_set_error(TC_ERR_ARG, "%s: %s %d does not require grad and has no grad_fn", what, which, i + 1);
    }
    return TC_OK;
}

static tc_status finish(run *R)
{
    /* leaves: hooks already ran on their accumulate nodes; now write .grad */
    for (int64_t k = 0; k < R->nlater; k++) {
        pending *p = &R->later[k];
        if (p->node->op == TC_NODE_ACC) {
            if (p->node->leaf) TRY(store_grad(p->node->leaf, p->g, R->create_graph));
            continue;
        }
        for (int h = 0; h < p->node->nhooks; h++) {
            tc_hook_entry *e = &p->node->hooks[h];
            if (e->retain && e->nr == p->nr) TRY(store_grad(e->retain, p->g, R->create_graph));
        }
    }
    return TC_OK;
}

static tc_status engine_run(run *R, const tc_tensor *const *outs, const tc_tensor *const *gouts, int nout,
                            const tc_tensor *const *ins, int nin)
{
    tc_status s = check_list(R->what, "output", outs, nout);
    if (s == TC_OK && R->capture) s = check_list(R->what, "input", ins, nin);
    if (s) return s;
    tc_edge *edges = calloc((size_t)(nout + nin), sizeof *edges);
    tc_tensor **seeds = calloc((size_t)nout, sizeof *seeds);
    if (!edges || !seeds) {
        free(edges), free(seeds);
        return tc_set_error(TC_ERR_MEMORY, "%s: out of memory", R->what);
    }
    for (int i = 0; i < nout && s == TC_OK; i++) {
        s = seed(R, outs[i], gouts ? gouts[i] : NULL, i, &seeds[i]);
        if (s == TC_OK) s = tc_edge_of(outs[i], &edges[i]);
    }
    for (int j = 0; j < nin && s == TC_OK; j++) s = tc_edge_of(ins[j], &edges[nout + j]);
    R->gen = __atomic_add_fetch(&gen_counter, 1, __ATOMIC_RELAXED);
    if (s == TC_OK) s = discover(R, edges, nout);
    R->cap_edges = edges + nout;
    R->ncap = nin;
    for (int j = 0; j < nin && s == TC_OK; j++)
        if (edges[nout + j].node->gen == R->gen) edges[nout + j].node->needed |= CAPTURED;
    if (s == TC_OK) mark_needed(R);
    int prev_mode = tc_set_grad_enabled(R->create_graph);
    int prev_in = tc_ag_in_backward;
    tc_ag_in_backward = 1; /* anomaly mode: rules are checked as a whole, not op by op */
    for (int i = 0; i < nout && s == TC_OK; i++) {
        s = accumulate(&edges[i].node->gbuf[edges[i].nr], seeds[i], R->create_graph);
        seeds[i] = NULL;
    }
    for (int64_t k = 0; k < R->order.n && s == TC_OK; k++) {
        tc_node *n = R->order.v[k];
        if (!has_grad(n) || !(n->needed & NEEDED)) goto next;
        s = run_hooks(R, n);
        if (s) break;
        if (n->needed & CAPTURED)
            for (int j = 0; j < nin; j++) {
                const tc_edge *e = &edges[nout + j];
                if (e->node == n && n->gbuf[e->nr] && !R->results[j]) {
                    tc_tensor_retain(n->gbuf[e->nr]);
                    R->results[j] = n->gbuf[e->nr];
                }
            }
        if ((n->needed & CAPTURED) && R->stop_at_inputs) /* partial derivatives: an input's own
                                                             history is cut off */
            for (int j = 0; j < nin; j++) {
                const tc_edge *e = &edges[nout + j];
                if (e->node == n && n->gbuf[e->nr]) {
                    tc_tensor_release(n->gbuf[e->nr]);
                    n->gbuf[e->nr] = NULL;
                }
            }
        if (!has_grad(n)) goto next;
        if (n->op == TC_NODE_ACC) {
            if (!R->capture && n->gbuf[0]) s = later_push(R, n, 0, n->gbuf[0]);
        } else if (n->needed & EXEC) {
            s = run_rule(R, n);
        }
    next:
        drop_grads(n);
    }
    if (s == TC_OK && !R->capture) s = finish(R);
    tc_set_grad_enabled(prev_mode);
    tc_ag_in_backward = prev_in;
    for (int i = 0; i < nout; i++) tc_tensor_release(seeds[i]);
    for (int64_t k = 0; k < R->all.n; k++) drop_grads(R->all.v[k]);
    for (int64_t k = 0; k < R->nlater; k++) tc_tensor_release(R->later[k].g);
    free(R->later);
    /* edges hold no references (tc_edge_of borrows); the discovered nodes do */
    for (int64_t k = 0; k < R->all.n; k++) tc_node_release(R->all.v[k]);
    free(R->all.v);
    free(R->order.v);
    free(edges);
    free(seeds);
    return s;
}

tc_status tc_autograd_backward(const tc_tensor *const *roots, const tc_tensor *const *grads, int n, int retain_graph,
                               int create_graph)
{
    run R = {.what = "backward", .retain_graph = retain_graph != 0, .create_graph = create_graph != 0};
    return engine_run(&R, roots, grads, n, NULL, 0);
}

tc_status tc_autograd_grad(const tc_tensor *const *outputs, const tc_tensor *const *grad_outputs, int nout,
                           const tc_tensor *const *inputs, int nin, int retain_graph, int create_graph,
                           int flags, tc_tensor **grads_out)
{
    bool allow_unused = (flags & TC_GRAD_ALLOW_UNUSED) != 0;
    if (!grads_out) return tc_set_error(TC_ERR_ARG, "grad: NULL result array");
    tc_tensor **res = calloc((size_t)(nin > 0 ? nin : 1), sizeof *res);
    if (!res) return tc_set_error(TC_ERR_MEMORY, "grad: out of memory");
    run R = {.what = "grad",
             .capture = true,
             .retain_graph = retain_graph != 0,
             .create_graph = create_graph != 0,
             .stop_at_inputs = (flags & TC_GRAD_STOP_AT_INPUTS) != 0,
             .results = res};
    tc_status s = engine_run(&R, outputs, grad_outputs, nout, inputs, nin);
    for (int j = 0; j < nin && s == TC_OK; j++)
        if (!res[j] && !allow_unused)
            s = tc_set_error(TC_ERR_ARG,
                             "grad: input %d does not reach the outputs (it was not used in the graph, or its "
                             "gradient is zero by construction); pass allow_unused=true to get nil for it",
                             j + 1);
    if (s) {
        for (int j = 0; j < nin; j++) tc_tensor_release(res[j]);
    } else {
        for (int j = 0; j < nin; j++) grads_out[j] = res[j];
    }
    free(res);
    return s;
}
