/* inplace.c -- in-place and layout choices, made after fusion and before memory planning.
 *
 * Three rewrites, in this order (each later one sees the effect of the earlier ones):
 *
 * 1. Layout: redundant copies become views. A same-dtype, same-size `copy` node on one
 *    device (what clone(), contiguous() on a strided tensor, or y:copy(x) into a fresh y
 *    trace to) is rewritten into an identity view of its input -- `expand` to the input's own sizes,
 *    which keeps every stride -- when
 *      - the input is already contiguous (a non-view value, or a view whose geometry
 *        worked out statically is contiguous): the copy moved bytes for nothing; or
 *      - every reader of the copy is a matrix product: the CPU matmul hands a transposed
 *        operand to BLAS as it is and copies other layouts itself, so the copy node never
 *        saves work there (this is the layout choice for matmul operands: no node makes a
 *        contiguous buffer for them).
 *    Not when the copy is a graph output (the caller would get an alias of another
 *    value's memory) or a write-back source (write-backs read their sources at the end,
 *    after other captured tensors may have been written). Values are immutable (SSA), so
 *    reading the input instead of a copy of it is the same computation.
 *
 * 2. Write-backs computed in place. A write-back source whose type is the captured
 *    tensor's is computed straight into the captured tensor's memory (saving the copy at
 *    the end) when the captured tensor is contiguous, no other captured tensor overlaps its
 *    memory, nothing reads its old value -- directly or through a view -- after the
 *    producing node runs, and where that node runs either nothing reads the old value (a
 *    gradient made by mm into a .grad tensor), or only the node itself, elementwise and
 *    not random, and members of its fused group with results of the same size read it,
 *    element-aligned (the tensor itself, not a view of it): p:add(-lr, g); or an optimizer
 *    step (adam_step, sgd_step, ...) writing x' or the new state over the x or state it reads
 *    (optim_aligned). And only when
 *    no node that can fail on some data (index, random, integer division, control) runs
 *    after it, so that a failed run still leaves every captured tensor as it was.
 *    The choice is recorded as vals[src].offset = TC_GOFF_WRITEBACK (plan.h): memplan.c
 *    leaves the value out of the arena and exec.c binds the value's header to the
 *    captured tensor and skips the copy (exec.c checks again at every run that the
 *    tensor is still contiguous and that no input or other captured tensor overlaps it).
 *
 * 3. In place. An elementwise, non-random node writes its result over its input k when
 *    input k has the result's dtype and sizes, lives in the arena (an op result that is
 *    not a view, a graph output, a write-back source or a control result), and is read
 *    for the last time where this node runs, by this node only and never through a view.
 *    Marked TC_GN_INPLACE with inplace = k; memplan.c gives the result input k's range.
 *    The same for the added tensor M (input 0) of addmm / addmv / addr / baddbmm: the
 *    kernel then runs gemm with beta on the result's own memory (an accumulation chain
 *    acc = addmm(acc, A_t, B_t), see simplify.c, needs no copy of acc per step); the
 *    matmul kernel reads A and B into a temporary first if they alias the result.
 *
 * Nodes inside fused groups are judged at the group's position (plan.h), and a copy that
 * belongs to a group is left alone (the group owns how its members run).
 */
#include "plan.h"
#include <stdio.h>
#include <stdlib.h>

static int kind_of(const tc_gnode *n)
{
    return n->op < TC_OP_COUNT ? tc_op_info((tc_op)n->op)->kind : -1;
}

/* Same dtype, sizes and device: one value's memory can stand for the other's (a copy
 * between devices is a transfer, never an identity view, nor a buffer to write over). */
static bool same_type(const tc_gval *a, const tc_gval *b)
{
    return a->dtype == b->dtype && a->device == b->device && a->ndim == b->ndim &&
           memcmp(a->size, b->size, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* ---- 1. copies that move bytes for nothing --------------------------------------------- */

/* Whether v's elements are laid out contiguously, assuming graph inputs and captured
 * tensors are (they are only bound at run time; this is a performance guess there, never
 * a correctness question). Views are replayed on a header over a stand-in storage. */
static bool statically_contiguous(const tc_graph *g, int32_t v, tc_tensor *geo)
{
    const tc_gval *x = &g->vals[v];
    if (x->view_of < 0 || x->kind != TC_GV_OP) {
        tc_graph_val_shape(g, v, geo);
        return true;
    }
    /* the chain from the root: views are built on views, each replayed on the previous */
    const tc_gnode *nd = &g->nodes[x->producer];
    tc_tensor base;
    if (!statically_contiguous(g, nd->in[0], &base) && base.ndim < 0) return false;
    tc_storage stand_in = {.data = NULL, .nbytes = INT64_MAX / 4, .refcount = 1, .device = TC_CPU};
    base.storage = &stand_in;
    const tc_tensor *in[1] = {&base};
    tc_kcall k = {.op = (tc_op)nd->op, .info = tc_op_info((tc_op)nd->op), .in = in, .nin = 1, .p = &nd->p};
    tc_tensor *res = NULL;
    tc_status s = tc_view_run(&k, &res);
    tc_clear_error();
    if (s || !res) {
        geo->ndim = -1;
        return false;
    }
    *geo = *res;
    geo->refcount = 1, geo->storage = NULL, geo->autograd = NULL, geo->flags = 0;
    tc_tensor_release(res);
    return tc_tensor_is_contiguous(geo) != 0;
}

static bool only_matmul_readers(const tc_graph *g, int32_t v)
{
    bool any = false;
    for (int32_t n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        for (int32_t i = 0; i < nd->nin; i++) {
            if (nd->in[i] != v) continue;
            if (kind_of(nd) != TC_KIND_MATMUL) return false;
            any = true;
        }
    }
    return any;
}

static bool is_output_or_written_back(const tc_graph *g, int32_t v)
{
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return true;
    for (int32_t i = 0; i < g->nwb; i++)
        if (g->wb_val[i] == v) return true;
    return false;
}

static int collapse_copies(tc_graph *g)
{
    int count = 0;
    for (int32_t n = 0; n < g->nnodes; n++) {
        tc_gnode *nd = &g->nodes[n];
        if ((nd->flags & TC_GN_DEAD) || nd->op != TC_OP_COPY || nd->group >= 0 || nd->nin != 1 || nd->in[0] < 0)
            continue;
        int32_t x = nd->in[0], y = nd->out[0];
        if (!same_type(&g->vals[x], &g->vals[y]) || is_output_or_written_back(g, y)) continue;
        tc_tensor geo;
        if (!statically_contiguous(g, x, &geo) && !only_matmul_readers(g, y)) continue;
        /* expand to its own sizes: an identity view that keeps every stride */
        tc_params p = {0};
        p.nshape = g->vals[x].ndim;
        for (int d = 0; d < p.nshape; d++) p.shape[d] = g->vals[x].size[d];
        nd->op = TC_OP_EXPAND, nd->p = p;
        nd->flags &= ~(uint32_t)TC_GN_WAS_INPLACE;
        g->vals[y].view_of = g->vals[x].view_of >= 0 ? g->vals[x].view_of : x;
        g->vals[y].offset = TC_GOFF_NONE;
        count++;
    }
    return count;
}

/* ---- 2. write-backs computed in place -------------------------------------------------- */

static bool overlaps_another_capture(const tc_graph *g, int32_t e)
{
    const tc_tensor *t = g->vals[e].t;
    int64_t lo, hi;
    tc_gplan_span(t, &lo, &hi);
    for (int32_t v = 0; v < g->nvals; v++) {
        const tc_gval *x = &g->vals[v];
        if (v == e || (x->kind != TC_GV_EXTERNAL && x->kind != TC_GV_CONST) || !x->t || x->t->storage != t->storage)
            continue;
        int64_t l2, h2;
        tc_gplan_span(x->t, &l2, &h2);
        if (l2 < hi && lo < h2) return true;
    }
    return false;
}

/* Whether node n can fail at run time on some data (index values out of range, bad
 * probabilities, integer division by zero, a control node's subgraph). */
static bool may_fail_on_data(const tc_graph *g, const tc_gnode *n)
{
    if (n->op >= TC_OP_COUNT) return true;
    const tc_opinfo *info = tc_op_info((tc_op)n->op);
    if (info->kind == TC_KIND_INDEX || info->kind == TC_KIND_RANDOM) return true;
    return (info->flags & TC_OPF_ZDIV) && n->nout > 0 && n->out[0] >= 0 &&
           !tc_dtype_is_float((tc_dtype)g->vals[n->out[0]].dtype);
}

/* An optimizer step (adam_step, sgd_step, ...) updating the captured tensor e into its result s:
 * x' into x (result 0, input 0) or the new state into the state (result 1, input 2). Its
 * kernels read element i of every operand before writing element i of a result, so it may
 * write over e when e is that aligned input, it reads e nowhere else (not as another input,
 * not through a view), and no other node running there reads e. */
static bool optim_aligned(const tc_graph *g, const tc_gplan_info *a, int32_t pn, int32_t e, int32_t s)
{
    const tc_gnode *p = &g->nodes[pn];
    int k = p->out[0] == s ? 0 : p->nout > 1 && p->out[1] == s ? 2 : -1;
    if (k < 0 || p->nin != 4 || p->in[k] != e) return false;
    for (int32_t i = 0; i < p->nin; i++)
        if (i != k && p->in[i] >= 0 && (p->in[i] == e || a->root[p->in[i]] == e)) return false;
    for (int32_t n = 0; n < g->nnodes; n++)
        if (n != pn && a->pos[n] == a->pos[pn] && tc_gplan_reads_memory_of(g, a, n, e)) return false;
    return true;
}

static bool writeback_in_place_ok(const tc_graph *g, const tc_gplan_info *a, int32_t e, int32_t s)
{
    const tc_gval *src = &g->vals[s], *ext = &g->vals[e];
    if (a->bind[s] != TC_GB_ARENA || a->bind[e] != TC_GB_EXTERNAL || !ext->t || !same_type(src, ext)) return false;
    int32_t pn = src->producer;
    const tc_gnode *p = &g->nodes[pn];
    if (p->op >= TC_OP_COUNT || kind_of(p) == TC_KIND_VIEW) return false;
    if (!ext->t->storage || !tc_tensor_is_contiguous(ext->t) || overlaps_another_capture(g, e)) return false;
    int32_t at = a->pos[pn];
    if (a->end[e] > at) return false; /* the old value is read later (or returned) */
    /* a failed run must leave captured tensors as they were: nothing may fail after */
    for (int32_t n = 0; n < g->nnodes; n++)
        if (n != pn && a->pos[n] >= at && may_fail_on_data(g, &g->nodes[n])) return false;
    bool reads_old = false;
    for (int32_t n = 0; n < g->nnodes && !reads_old; n++) reads_old = a->pos[n] == at && tc_gplan_reads_memory_of(g, a, n, e);
    if (!reads_old) return true; /* any kernel may write where nothing it reads lives */
    if (kind_of(p) == TC_KIND_OPTIM) return optim_aligned(g, a, pn, e, s);
    if (kind_of(p) != TC_KIND_EW || (p->flags & TC_GN_RANDOM) || p->out[0] != s) return false;
    /* Readers where the producer runs: the producer, or members of its fused group, which
     * read each block of their inputs before any output of that block is written (see
     * fused.c) -- safe when they read the tensor itself (not a view) at full size. */
    int64_t numel = tc_numel_of(ext->ndim, ext->size);
    for (int32_t n = 0; n < g->nnodes; n++) {
        if (a->pos[n] != at || !tc_gplan_reads_memory_of(g, a, n, e)) continue;
        const tc_gnode *m = &g->nodes[n];
        if (n != pn && (p->group < 0 || m->group != p->group || m->nout < 1 || m->out[0] < 0 ||
                        tc_numel_of(g->vals[m->out[0]].ndim, g->vals[m->out[0]].size) != numel))
            return false;
        for (int32_t i = 0; i < m->nin; i++)
            if (m->in[i] >= 0 && m->in[i] != e && a->root[m->in[i]] == e) return false; /* through a view */
    }
    return true;
}

static tc_status writebacks_in_place(tc_graph *g, int *count)
{
    tc_gplan_info a;
    TRY(tc_gplan_analyse(g, &a));
    for (int32_t i = 0; i < g->nwb; i++) {
        int32_t e = g->wb_ext[i], s = g->wb_val[i];
        if (!writeback_in_place_ok(g, &a, e, s)) continue;
        g->vals[s].offset = TC_GOFF_WRITEBACK;
        a.bind[s] = TC_GB_WRITEBACK; /* a source written back twice is placed in the first */
        (*count)++;
    }
    tc_gplan_info_free(&a);
    return TC_OK;
}

/* ---- 3. elementwise nodes in place ------------------------------------------------------ */

/* Matrix products that add a tensor M (input 0) to the product. */
static bool adds_m(const tc_gnode *nd)
{
    return nd->op == TC_OP_ADDMM || nd->op == TC_OP_ADDMV || nd->op == TC_OP_ADDR || nd->op == TC_OP_BADDBMM;
}

static int32_t in_place_input(const tc_graph *g, const tc_gplan_info *a, int32_t n)
{
    const tc_gnode *nd = &g->nodes[n];
    bool ew = kind_of(nd) == TC_KIND_EW;
    if ((!ew && !adds_m(nd)) || (nd->flags & TC_GN_RANDOM) || nd->nout != 1 || nd->out[0] < 0) return -1;
    int32_t o = nd->out[0], at = a->pos[n];
    if (at < 0 || a->bind[o] != TC_GB_ARENA) return -1;
    for (int32_t k = 0; k < (ew ? nd->nin : 1); k++) {
        int32_t u = nd->in[k];
        if (u < 0 || a->bind[u] != TC_GB_ARENA || !same_type(&g->vals[u], &g->vals[o]) || a->end[u] != at) continue;
        bool alone = true;
        for (int32_t m = 0; m < g->nnodes && alone; m++)
            if (m != n && a->pos[m] == at && tc_gplan_reads_memory_of(g, a, m, u)) alone = false;
        for (int32_t i = 0; i < nd->nin && alone; i++)
            if (nd->in[i] >= 0 && nd->in[i] != u && a->root[nd->in[i]] == u) alone = false;
        if (alone) return k;
    }
    return -1;
}

static tc_status nodes_in_place(tc_graph *g, int *count)
{
    tc_gplan_info a;
    TRY(tc_gplan_analyse(g, &a));
    for (int32_t n = 0; n < g->nnodes; n++) {
        tc_gnode *nd = &g->nodes[n];
        nd->flags &= ~(uint32_t)TC_GN_INPLACE;
        nd->inplace = -1;
        if (nd->flags & TC_GN_DEAD) continue;
        int32_t k = in_place_input(g, &a, n);
        if (k < 0) continue;
        nd->flags |= TC_GN_INPLACE;
        nd->inplace = k;
        (*count)++;
    }
    tc_gplan_info_free(&a);
    return TC_OK;
}

/* ---- the pass ------------------------------------------------------------------------------ */

tc_status tc_pass_inplace(tc_graph *g)
{
    tc_graph_fix_view_roots(g);
    int copies = collapse_copies(g), wbs = 0, nodes = 0;
    TRY(writebacks_in_place(g, &wbs));
    TRY(nodes_in_place(g, &nodes));
    tc_gpass_stat st = {.pass = "inplace"};
    st.nodes_before = st.nodes_after = tc_graph_live_nodes(g);
    snprintf(st.note, sizeof st.note, "%d nodes in place, %d write-backs in place, %d copies made views", nodes, wbs,
             copies);
    return tc_graph_add_stat(g, &st);
}
