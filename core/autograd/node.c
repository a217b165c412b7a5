/* node.c -- recording the autograd tape, and each tensor's autograd state.
 *
 * tc_op_run sends a call here (tc_autograd_op_run) only when grad mode is on and a tensor
 * of the call is flagged (TC_TF_REQUIRES_GRAD / TC_TF_VIEW_OF_GRAD), or anomaly mode is on;
 * every other call costs one flag test. Here: the in-place checks (before anything
 * runs, so a refused call changes nothing), one node allocation holding edges, shapes and
 * saved-tensor slots, the kernel (tc_op_exec), then the outputs' history.
 *
 * Cycles: a node saves its own outputs as alias headers WITHOUT history (a node -> output
 * -> node loop would never be freed); engine.c gives a rule run under create_graph a fresh
 * alias whose history points at the node. Saved inputs keep their history (their grad_fn
 * was made before this node, so no loop), and a saved input that the call itself
 * overwrites (x:mul(y) in place) is saved as a copy taken before the kernel runs.
 */
#include "node.h"
#include "../graph/trace.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local int grad_mode_off; /* 0: on (the default for every new thread) */
_Thread_local tc_ag_observer_fn tc_ag_observer;
int tc_ag_anomaly_on;
_Thread_local int tc_ag_in_backward;
static int64_t live_nodes;

int tc_grad_enabled(void) { return !grad_mode_off; }

int tc_set_grad_enabled(int on)
{
    int prev = !grad_mode_off;
    grad_mode_off = !on;
    return prev;
}

int tc_autograd_set_anomaly(int on)
{
    int prev = __atomic_exchange_n(&tc_ag_anomaly_on, on ? 1 : 0, __ATOMIC_RELAXED);
    return prev;
}

int tc_autograd_anomaly(void) { return __atomic_load_n(&tc_ag_anomaly_on, __ATOMIC_RELAXED); }

int64_t tc_autograd_live_nodes(void) { return __atomic_load_n(&live_nodes, __ATOMIC_RELAXED); }

/* ---- nodes ------------------------------------------------------------------------------ */

/* One allocation: the struct, then edges, metas, saved slots, versions and gradient
 * buffers (at least 2, so gbuf[1] always exists). */
static tc_node *node_new(int32_t op, int nin, int nout)
{
    size_t ns = (size_t)(nin + nout), ng = (size_t)(nout > 2 ? nout : 2);
    size_t size = sizeof(tc_node) + sizeof(tc_edge) * (size_t)nin + sizeof(tc_tmeta) * ns +
                  sizeof(tc_tensor *) * ns + sizeof(int64_t) * ns + sizeof(tc_tensor *) * ng;
    tc_node *n = tc_malloc(size, "autograd");
    if (!n) return NULL;
    memset(n, 0, size);
    n->refcount = 1;
    n->op = op;
    n->nin = nin;
    n->nout = nout;
    char *p = (char *)(n + 1);
    n->edges = (tc_edge *)p;
    p += sizeof(tc_edge) * (size_t)nin;
    n->meta = (tc_tmeta *)p; /* tmeta (8-byte fields) stays aligned after 16-byte edges */
    p += sizeof(tc_tmeta) * ns;
    n->saved = (tc_tensor **)p;
    p += sizeof(tc_tensor *) * ns;
    n->saved_ver = (int64_t *)p;
    p += sizeof(int64_t) * ns;
    n->gbuf = (tc_tensor **)p;
    __atomic_add_fetch(&live_nodes, 1, __ATOMIC_RELAXED);
    return n;
}

void tc_node_release_saved(tc_node *n)
{
    for (int i = 0; i < n->nin + n->nout; i++) {
        tc_tensor *t = n->saved[i];
        n->saved[i] = NULL;
        tc_tensor_release(t);
    }
    if (n->save) n->released = 1;
    if (n->custom && n->ctx) { /* a custom node's ctx is its saved state */
        n->custom->release(n->ctx);
        n->ctx = NULL;
        n->released = 1;
    }
}

static void node_destroy(tc_node *n)
{
    for (int i = 0; i < n->nin; i++) tc_node_release(n->edges[i].node);
    for (int i = 0; i < n->nin + n->nout; i++) tc_tensor_release(n->saved[i]);
    for (int o = 0; o < n->nout || o < 2; o++) tc_tensor_release(n->gbuf[o]);
    if (n->custom && n->ctx) n->custom->release(n->ctx);
    /* retain targets still listed belong to live metas; they point at us only through
     * grad_fn, which they hold, so none can be left here when we die. */
    free(n->hooks);
    __atomic_sub_fetch(&live_nodes, 1, __ATOMIC_RELAXED);
    free(n);
}

/* Long graphs (a 100k-op chain) die in one release: a node freed while another is being
 * freed goes on a list instead of recursing. */
static _Thread_local tc_node *free_head;
static _Thread_local int draining;

void tc_node_release(tc_node *n)
{
    if (!n || tc_atomic_dec(&n->refcount) != 0) return;
    n->next_free = free_head;
    free_head = n;
    if (draining) return;
    draining = 1;
    while (free_head) {
        tc_node *x = free_head;
        free_head = x->next_free;
        node_destroy(x);
    }
    draining = 0;
}

static const char *acc_name = "AccumulateGrad";
static char *names[TC_OP_COUNT];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

/* "index_select" -> "IndexSelectBackward". */
static void build_names(void)
{
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const char *s = tc_op_info((tc_op)op)->name;
        char buf[64];
        size_t k = 0;
        int up = 1;
        for (; *s && k < 40; s++) {
            if (*s == '_') {
                up = 1;
                continue;
            }
            buf[k++] = up && *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
            up = 0;
        }
        memcpy(buf + k, "Backward", 9);
        names[op] = malloc(k + 9);
        if (names[op]) memcpy(names[op], buf, k + 9);
    }
}

const char *tc_node_name(const tc_node *n)
{
    if (n->op == TC_NODE_ACC) return acc_name;
    if (n->op == TC_NODE_CUSTOM) return n->custom ? n->custom->name : "CustomBackward";
    pthread_once(&names_once, build_names);
    return names[n->op] ? names[n->op] : "Backward";
}

bool tc_node_saves(const tc_node *n, int slot)
{
    if (slot < n->nin) return (n->save & TC_SAVE_ALL_IN) || (slot < 3 && (n->save & (1 << slot)));
    int o = slot - n->nin;
    return o < 2 && (n->save & (TC_SAVE_OUT0 << o));
}

tc_status tc_node_add_hook(tc_node *n, int64_t id, int32_t nr, tc_meta *retain)
{
    if (n->nhooks == n->caphooks) {
        int cap = n->caphooks ? 2 * n->caphooks : 2;
        tc_hook_entry *h = realloc(n->hooks, sizeof *h * (size_t)cap);
        if (!h) return tc_set_error(TC_ERR_MEMORY, "autograd: out of memory adding a hook");
        n->hooks = h;
        n->caphooks = cap;
    }
    n->hooks[n->nhooks++] = (tc_hook_entry){.id = id, .nr = nr, .retain = retain};
    return TC_OK;
}

static void remove_retain(tc_node *n, tc_meta *m)
{
    if (!n) return;
    int j = 0;
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].retain != m) n->hooks[j++] = n->hooks[i];
    n->nhooks = j;
}

/* ---- per-tensor state -------------------------------------------------------------------- */

static inline tc_meta *meta_of(const tc_tensor *t)
{
    return (t->flags & TC_TF_META) ? (tc_meta *)t->autograd : NULL;
}

tc_node *tc_grad_fn_of(const tc_tensor *t, int32_t *nr)
{
    if (!t->autograd) return NULL;
    tc_meta *m = meta_of(t);
    if (m) {
        if (nr) *nr = m->output_nr;
        return m->grad_fn;
    }
    if (nr) *nr = (t->flags >> TC_TF_NR_SHIFT) & 0xff;
    return (tc_node *)t->autograd;
}

tc_status tc_meta_get(tc_tensor *t, tc_meta **out)
{
    tc_meta *m = meta_of(t);
    if (!m) {
        m = tc_malloc(sizeof *m, "autograd");
        if (!m) return TC_ERR_MEMORY;
        memset(m, 0, sizeof *m);
        if (t->autograd) { /* take over the grad_fn reference held directly */
            m->grad_fn = (tc_node *)t->autograd;
            m->output_nr = (t->flags >> TC_TF_NR_SHIFT) & 0xff;
        }
        t->autograd = m;
        t->flags = (t->flags & 0xff) | TC_TF_META;
    }
    *out = m;
    return TC_OK;
}

static tc_status acc_of(tc_tensor *t, tc_node **out)
{
    tc_meta *m;
    TRY(tc_meta_get(t, &m));
    if (!m->acc) {
        tc_node *a = node_new(TC_NODE_ACC, 0, 1);
        if (!a) return TC_ERR_MEMORY;
        tc_tmeta_of(t, &a->meta[0]);
        a->leaf = m;
        m->acc = a;
    }
    *out = m->acc;
    return TC_OK;
}

tc_status tc_edge_of(const tc_tensor *t, tc_edge *e)
{
    e->node = NULL;
    e->nr = 0;
    if (!(t->flags & TC_TF_REQUIRES_GRAD)) return TC_OK;
    tc_node *fn = tc_grad_fn_of(t, &e->nr);
    if (fn) {
        e->node = fn;
        return TC_OK;
    }
    e->nr = 0;
    return acc_of((tc_tensor *)t, &e->node); /* header state only; values untouched */
}

void tc_set_history(tc_tensor *t, tc_node *node, int32_t nr)
{
    tc_node_retain(node);
    tc_meta *m = meta_of(t);
    if (m) {
        tc_node *old = m->grad_fn;
        m->grad_fn = node;
        m->output_nr = nr;
        if (m->retains_grad && old != node) { /* retain_grad follows the tensor (PyTorch) */
            remove_retain(old, m);
            if (tc_node_add_hook(node, 0, nr, m)) m->retains_grad = 0;
        }
        tc_node_release(old);
    } else {
        tc_node *old = (tc_node *)t->autograd;
        t->autograd = node;
        t->flags = (t->flags & 0xff & ~TC_TF_META) | (nr << TC_TF_NR_SHIFT);
        tc_node_release(old);
    }
    t->flags |= TC_TF_REQUIRES_GRAD;
}

void tc_clear_history(tc_tensor *t)
{
    if (!t->autograd) {
        t->flags &= ~(TC_TF_REQUIRES_GRAD | TC_TF_VIEW_OF_GRAD);
        return;
    }
    tc_meta *m = meta_of(t);
    if (m) {
        if (!m->grad_fn) return; /* a leaf keeps its flag */
        if (m->retains_grad) remove_retain(m->grad_fn, m);
        m->retains_grad = 0;
        tc_node_release(m->grad_fn);
        m->grad_fn = NULL;
        t->flags &= ~(TC_TF_REQUIRES_GRAD | TC_TF_VIEW_OF_GRAD);
        return;
    }
    tc_node_release((tc_node *)t->autograd);
    t->autograd = NULL;
    t->flags &= ~(TC_TF_REQUIRES_GRAD | TC_TF_VIEW_OF_GRAD | (0xff << TC_TF_NR_SHIFT));
}

/* Called by tc_tensor_release when a header with autograd state dies. */
void tc_autograd_tensor_free(tc_tensor *t)
{
    tc_meta *m = meta_of(t);
    if (!m) {
        tc_node_release((tc_node *)t->autograd);
    } else {
        if (m->retains_grad) remove_retain(m->grad_fn, m);
        if (m->acc) {
            m->acc->leaf = NULL;
            tc_node_release(m->acc);
        }
        tc_node_release(m->grad_fn);
        tc_tensor_release(m->grad);
        free(m);
    }
    t->autograd = NULL;
}

/* ---- the public per-tensor API ------------------------------------------------------------ */

tc_status tc_tensor_set_requires_grad(tc_tensor *t, int on)
{
    if (!t) return tc_set_error(TC_ERR_ARG, "requires_grad: NULL tensor");
    if (on && !tc_dtype_is_float((tc_dtype)t->dtype))
        return tc_set_error(TC_ERR_DTYPE, "requires_grad: only floating point tensors can require gradients (got %s)",
                            tc_dtype_name((tc_dtype)t->dtype));
    if (tc_grad_fn_of(t, NULL)) {
        if (on) return TC_OK;
        return tc_set_error(TC_ERR_ARG,
                            "requires_grad: you can only change requires_grad flags of leaf tensors; use "
                            "detach() to get a tensor without history");
    }
    if (on) t->flags |= TC_TF_REQUIRES_GRAD;
    else t->flags &= ~TC_TF_REQUIRES_GRAD;
    return TC_OK;
}

int tc_tensor_requires_grad(const tc_tensor *t) { return t && (t->flags & TC_TF_REQUIRES_GRAD) ? 1 : 0; }

int tc_tensor_is_leaf(const tc_tensor *t) { return t && tc_grad_fn_of(t, NULL) == NULL; }

tc_tensor *tc_tensor_grad(const tc_tensor *t)
{
    tc_meta *m = t ? meta_of(t) : NULL;
    if (!m || !m->grad) return NULL;
    tc_tensor_retain(m->grad);
    return m->grad;
}

tc_status tc_tensor_set_grad(tc_tensor *t, tc_tensor *g)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (!t) return tc_set_error(TC_ERR_ARG, "grad: NULL tensor");
    if (g) {
        if (g == t) return tc_set_error(TC_ERR_ARG, "grad: a tensor cannot be its own gradient");
        if (g->dtype != t->dtype)
            return tc_set_error(TC_ERR_DTYPE, "grad: assigned gradient is %s, the tensor is %s",
                                tc_dtype_name((tc_dtype)g->dtype), tc_dtype_name((tc_dtype)t->dtype));
        if (!tc_same_shape(g, t))
            return tc_set_error(TC_ERR_SHAPE, "grad: assigned gradient has size %s, the tensor has size %s",
                                tc_shape_str(g, b1, sizeof b1), tc_shape_str(t, b2, sizeof b2));
    }
    tc_meta *m = meta_of(t);
    if (!m) {
        if (!g) return TC_OK;
        TRY(tc_meta_get(t, &m));
    }
    tc_tensor_retain(g);
    tc_tensor_release(m->grad);
    m->grad = g;
    return TC_OK;
}

tc_status tc_tensor_detach(const tc_tensor *t, tc_tensor **out)
{
    if (!t || !out) return tc_set_error(TC_ERR_ARG, "detach: NULL argument");
    return tc_tensor_alias(t, out); /* alias: no autograd state, flags cleared */
}

tc_status tc_tensor_retain_grad(tc_tensor *t)
{
    if (!t) return tc_set_error(TC_ERR_ARG, "retain_grad: NULL tensor");
    if (!(t->flags & TC_TF_REQUIRES_GRAD))
        return tc_set_error(TC_ERR_ARG, "retain_grad: cannot retain the gradient of a tensor that does not require grad");
    int32_t nr;
    tc_node *fn = tc_grad_fn_of(t, &nr);
    if (!fn) return TC_OK; /* leaves keep their gradient anyway */
    tc_meta *m;
    TRY(tc_meta_get(t, &m));
    if (m->retains_grad) return TC_OK;
    TRY(tc_node_add_hook(fn, 0, nr, m));
    m->retains_grad = 1;
    return TC_OK;
}

const char *tc_tensor_grad_fn_name(const tc_tensor *t)
{
    tc_node *fn = t ? tc_grad_fn_of(t, NULL) : NULL;
    return fn ? tc_node_name(fn) : NULL;
}

tc_status tc_tensor_add_hook(tc_tensor *t, int64_t id)
{
    if (!t) return tc_set_error(TC_ERR_ARG, "register_hook: NULL tensor");
    if (!(t->flags & TC_TF_REQUIRES_GRAD))
        return tc_set_error(TC_ERR_ARG, "register_hook: cannot register a hook on a tensor that does not require grad");
    if (id == 0) return tc_set_error(TC_ERR_ARG, "register_hook: hook id 0 is reserved");
    tc_edge e;
    TRY(tc_edge_of(t, &e));
    return tc_node_add_hook(e.node, id, e.nr, NULL);
}

int tc_tensor_remove_hook(tc_tensor *t, int64_t id)
{
    if (!t || !(t->flags & TC_TF_REQUIRES_GRAD) || id == 0) return 0;
    int32_t nr;
    tc_node *n = tc_grad_fn_of(t, &nr);
    if (!n) {
        tc_meta *m = meta_of(t);
        n = m ? m->acc : NULL;
    }
    if (!n) return 0;
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].id == id) {
            memmove(n->hooks + i, n->hooks + i + 1, sizeof *n->hooks * (size_t)(n->nhooks - i - 1));
            n->nhooks--;
            return 1;
        }
    return 0;
}

/* ---- anomaly ------------------------------------------------------------------------------ */

bool tc_has_nan(const tc_tensor *t)
{
    if (!t || !t->storage || !tc_dtype_is_float((tc_dtype)t->dtype)) return false;
    tc_elem_iter it;
    tc_elem_iter_init(&it, t);
    char *p;
    while ((p = tc_elem_iter_next(&it)) != NULL) {
        double v = tc_load_as_double(t->dtype, p);
        if (v != v) return true;
    }
    return false;
}

static tc_status anomaly_error(const tc_opinfo *info, const tc_tensor *const *in, int nin)
{
    char sizes[512] = "", b[TC_SHAPE_BUF];
    size_t k = 0;
    for (int i = 0; i < nin && k < sizeof sizes - TC_SHAPE_BUF - 8; i++) {
        if (!in[i]) continue;
        k += (size_t)snprintf(sizes + k, sizeof sizes - k, "%s%s", k ? " and " : "", tc_shape_str(in[i], b, sizeof b));
    }
    return tc_set_error(TC_ERR_ARG, "anomaly: %s produced NaN from inputs without NaN (input sizes %s)", info->name,
                        k ? sizes : "none");
}

/* ---- recording ---------------------------------------------------------------------------- */

static tc_status inplace_check(const tc_opinfo *info, const tc_tensor *o)
{
    if (!o) return TC_OK;
    if ((o->flags & TC_TF_REQUIRES_GRAD) && !tc_grad_fn_of(o, NULL))
        return tc_set_error(TC_ERR_ARG,
                            "%s: a leaf tensor that requires grad is being used in an in-place operation (or as "
                            "the result argument); use torch.no_grad() to change it, or an out-of-place op",
                            info->name);
    if (o->flags & TC_TF_VIEW_OF_GRAD)
        return tc_set_error(TC_ERR_ARG,
                            "%s: writing in place into a view of a tensor that requires grad is not supported; "
                            "use an out-of-place op (e.g. torch.cat, or clone() the view) instead",
                            info->name);
    return TC_OK;
}

/* Whether a saved input shares memory with a result this call writes. */
static bool overwritten(const tc_tensor *t, tc_tensor *const *out, int nout)
{
    for (int o = 0; o < nout; o++)
        if (out[o] && t->storage && out[o]->storage == t->storage) return true;
    return false;
}

/* A header for saving t: an alias carrying t's history (an edge), or, when the call
 * overwrites t, a copy of its values taken now. */
static tc_status save_input(const tc_tensor *t, const tc_edge *e, bool copy, tc_tensor **out)
{
    tc_tensor *s;
    if (copy) {
        TRY(tc_tensor_alloc_on(t->device, (tc_dtype)t->dtype, t->ndim, t->size, &s));
        tc_tensor *res[1] = {s};
        tc_params p = {.i = {-1}};
        tc_status st = tc_trace_exec_nested(TC_OP_COPY, &t, 1, &p, res, 1); /* a trace records the copy */
        if (st) {
            tc_tensor_release(s);
            return st;
        }
    } else {
        TRY(tc_tensor_alias(t, &s));
    }
    if (e->node) {
        s->autograd = e->node;
        tc_node_retain(e->node);
        s->flags = TC_TF_REQUIRES_GRAD | (e->nr << TC_TF_NR_SHIFT);
    }
    *out = s;
    return TC_OK;
}

static void node_discard(tc_node *n) { tc_node_release(n); }

tc_status tc_autograd_op_run(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out,
                             int nout)
{
    const tc_opinfo *info = tc_op_info(op);
    if (!info || !out || nout != info->nout || nout > 2 || (nin > 0 && !in) || nin < 0)
        return tc_op_exec(op, in, nin, p, out, nout); /* reports the bad call */
    bool grad_on = tc_grad_enabled();
    bool anomaly = tc_autograd_anomaly() && !tc_ag_in_backward;
    bool rec = false;
    if (grad_on) {
        for (int i = 0; i < nin; i++)
            if (in[i] && (in[i]->flags & TC_TF_REQUIRES_GRAD)) rec = true;
        for (int o = 0; o < nout; o++) TRY(inplace_check(info, out[o]));
    }
    bool in_nan = false;
    if (anomaly)
        for (int i = 0; i < nin; i++) in_nan = in_nan || tc_has_nan(in[i]);
    tc_tensor *given[2] = {out[0], nout > 1 ? out[1] : NULL};

    tc_node *n = NULL;
    if (rec && (info->flags & TC_OPF_DIFF)) {
        const tc_grad_rule *rule = tc_grad_rule_of(op);
        n = node_new(op, nin, nout);
        if (!n) return TC_ERR_MEMORY;
        n->norule = rule == NULL;
        n->save = rule ? rule->save : 0;
        if (p) n->p = *p;
        tc_status s = TC_OK;
        for (int i = 0; i < nin && s == TC_OK; i++) {
            if (!in[i]) continue;
            tc_tmeta_of(in[i], &n->meta[i]);
            s = tc_edge_of(in[i], &n->edges[i]);
            if (s) break;
            tc_node_retain(n->edges[i].node);
            if (tc_ag_observer && n->edges[i].node) tc_ag_observer(in[i], &n->edges[i]);
            if (tc_node_saves(n, i)) {
                bool copy = overwritten(in[i], given, nout) || (in[i]->flags & TC_TF_SCRATCH);
                s = save_input(in[i], &n->edges[i], copy, &n->saved[i]);
                if (s == TC_OK) n->saved_ver[i] = n->saved[i]->storage ? n->saved[i]->storage->version : 0;
            }
        }
        /* output headers are made now, so nothing can fail after the kernel has written */
        for (int o = 0; o < nout && s == TC_OK; o++)
            if (tc_node_saves(n, nin + o)) s = tc_tensor_new_empty(TC_F32, &n->saved[nin + o]);
        if (s) {
            node_discard(n);
            return s;
        }
    }

    tc_status s = tc_op_exec(op, in, nin, p, out, nout);
    if (s) {
        if (n) node_discard(n);
        return s;
    }
    if (anomaly && !in_nan) {
        for (int o = 0; o < nout; o++) {
            if (!tc_has_nan(out[o])) continue;
            tc_status e = anomaly_error(info, in, nin);
            for (int k = 0; k < nout; k++)
                if (!given[k] && out[k]) {
                    tc_tensor_release(out[k]);
                    out[k] = NULL;
                }
            if (n) node_discard(n);
            return e;
        }
    }
    if (!grad_on) return TC_OK;
    bool view = info->kind == TC_KIND_VIEW;
    for (int o = 0; o < nout; o++) {
        tc_tensor *t = out[o];
        if (!t) continue;
        bool flt = tc_dtype_is_float((tc_dtype)t->dtype);
        if (n) tc_tmeta_of(t, &n->meta[nin + o]);
        /* saved outputs are filled whatever their dtype: rules of max/sort/pooling read
         * their int64 index output; only float outputs get a history */
        if (n && n->saved[nin + o]) {
            tc_tensor *sv = n->saved[nin + o];
            sv->dtype = t->dtype, sv->device = t->device; /* sv has no storage yet */
            tc_tensor_set(sv, t); /* same dtype and device now: cannot fail */
            n->saved_ver[nin + o] = t->storage ? t->storage->version : 0;
        }
        if (n && flt) {
            tc_set_history(t, n, o);
            if (view) t->flags |= TC_TF_VIEW_OF_GRAD;
        } else if (given[o] && (t->flags & TC_TF_REQUIRES_GRAD)) {
            tc_clear_history(t); /* overwritten by a value with no gradient */
        }
    }
    if (n) tc_node_release(n); /* the outputs hold it now */
    return TC_OK;
}

/* ---- custom nodes ---------------------------------------------------------------------------- */

tc_status tc_autograd_custom(const tc_custom_fn *fn, void *ctx, const tc_tensor *const *in, const tc_edge *edges,
                             int nin, tc_tensor *const *out, int nout)
{
    if (!fn || !fn->backward || !fn->release || nin < 0 || nout < 1 || nout > TC_NODE_MAX_OUT || (nin && (!in || !edges)) ||
        !out) {
        if (fn && fn->release && ctx) fn->release(ctx);
        return tc_set_error(TC_ERR_ARG, "autograd: bad custom node (%d inputs, %d outputs)", nin, nout);
    }
    for (int i = 0; i < nin; i++)
        if (!in[i]) {
            fn->release(ctx);
            return tc_set_error(TC_ERR_ARG, "autograd: custom node input %d is NULL", i + 1);
        }
    tc_node *n = node_new(TC_NODE_CUSTOM, nin, nout);
    if (!n) {
        fn->release(ctx);
        return TC_ERR_MEMORY;
    }
    n->custom = fn, n->ctx = ctx;
    for (int i = 0; i < nin; i++) {
        tc_tmeta_of(in[i], &n->meta[i]);
        n->edges[i] = edges[i];
        tc_node_retain(edges[i].node);
        if (tc_ag_observer && edges[i].node) tc_ag_observer(in[i], &edges[i]);
    }
    for (int o = 0; o < nout; o++) {
        if (!out[o]) continue;
        tc_tmeta_of(out[o], &n->meta[nin + o]);
        if (tc_dtype_is_float((tc_dtype)out[o]->dtype)) tc_set_history(out[o], n, o);
    }
    tc_node_release(n); /* the outputs hold it now (or nobody: then it dies here) */
    return TC_OK;
}
