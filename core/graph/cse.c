/* cse.c -- common-subexpression elimination: nodes computing the same op on the same
 * values with the same parameters are merged into the first one.
 *
 * One forward sweep with a hash table keyed by (op, input value ids, params, result
 * types). Nodes are in execution order, so when a node is visited its inputs have already
 * been redirected to their surviving representatives (rep[]), and two equal expressions
 * meet in the table however deep they are. Outputs and write-backs are redirected at the
 * end. Equal constants (same dtype, sizes and bytes) are merged first, so `x + 5` written
 * twice (each 5 snapshotted as its own 0-dim constant) becomes one node.
 *
 * Never merged: random nodes (each draw must happen, in order, like eager mode),
 * control-flow nodes (subgraphs are not compared), nodes already planned in place.
 *
 * Commutative ops match with their two inputs in either order only when the result is
 * bitwise the same both ways: mul, eq, ne, bitand/or/xor always; add only with its scale
 * s0 == 1 (it computes a + s0*b); cmax/cmin only for integer types (for floats
 * cmax(+0, -0) is -0 but cmax(-0, +0) is +0). For mul/add of two NaNs the payload kept may
 * depend on the order; NaN payloads are not treated as observable.
 *
 * Merging can make one value a graph output twice, or a graph output and a write-back
 * source at once; the executor hands out separate results (outputs are fresh per run).
 */
#include "graph.h"
#include <stdio.h>
#include <stdlib.h>

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* ---- constants -------------------------------------------------------------------------- */

/* CONST values whose data can be compared as bytes: contiguous, on the CPU. */
static bool comparable_const(const tc_gval *x)
{
    return x->kind == TC_GV_CONST && x->t && x->t->storage && x->t->storage->device == TC_CPU &&
           tc_tensor_is_contiguous(x->t);
}

static uint64_t const_hash(const tc_graph *g, int32_t v)
{
    const tc_gval *x = &g->vals[v];
    uint64_t h = mix(mix(0xcbf29ce484222325ull, (uint64_t)x->dtype), (uint64_t)x->ndim);
    for (int d = 0; d < x->ndim; d++) h = mix(h, (uint64_t)x->size[d]);
    return mix_bytes(h, tc_base(x->t), (size_t)tc_graph_val_bytes(g, v));
}

static bool same_const(const tc_graph *g, int32_t a, int32_t b)
{
    const tc_gval *x = &g->vals[a], *y = &g->vals[b];
    if (x->dtype != y->dtype || x->ndim != y->ndim) return false;
    if (memcmp(x->size, y->size, sizeof(int64_t) * (size_t)x->ndim) != 0) return false;
    return memcmp(tc_base(x->t), tc_base(y->t), (size_t)tc_graph_val_bytes(g, a)) == 0;
}

/* ---- nodes --------------------------------------------------------------------------------- */

static bool mergeable(const tc_gnode *nd)
{
    if (nd->flags & (TC_GN_DEAD | TC_GN_RANDOM | TC_GN_INPLACE)) return false;
    if (nd->op < 0 || nd->op >= TC_OP_COUNT || nd->nsub > 0) return false;
    return tc_op_info((tc_op)nd->op)->kind != TC_KIND_RANDOM;
}

/* Whether swapping the two inputs gives a bitwise-identical result (see the banner). */
static bool commutative(const tc_graph *g, const tc_gnode *nd)
{
    if (nd->nin != 2 || nd->in[0] < 0 || nd->in[1] < 0) return false;
    switch (nd->op) {
    case TC_OP_MUL:
    case TC_OP_EQ:
    case TC_OP_NE:
    case TC_OP_BITAND:
    case TC_OP_BITOR:
    case TC_OP_BITXOR: return true;
    case TC_OP_ADD: return nd->p.s[0] == 1.0;
    case TC_OP_MAXIMUM:
    case TC_OP_MINIMUM: return !tc_dtype_is_float((tc_dtype)g->vals[nd->in[0]].dtype);
    default: return false;
    }
}

/* Input i of nd in canonical order (commutative pairs sorted by value id). */
static int32_t input_at(const tc_graph *g, const tc_gnode *nd, int i)
{
    if (commutative(g, nd)) {
        int32_t a = nd->in[0], b = nd->in[1];
        return i == 0 ? (a < b ? a : b) : (a < b ? b : a);
    }
    return nd->in[i];
}

/* Every field of tc_params an op can read. Scalars compare as bits (-0 is not 0, equal
 * NaNs match); shape entries past nshape are never read (each op checks nshape). */
static bool same_params(const tc_params *a, const tc_params *b)
{
    if (memcmp(a->s, b->s, sizeof a->s) != 0 || memcmp(a->i, b->i, sizeof a->i) != 0) return false;
    if (a->nshape != b->nshape || a->gen != b->gen) return false;
    int n = a->nshape < 0 ? 0 : a->nshape > 2 * TC_MAX_DIMS ? 2 * TC_MAX_DIMS : a->nshape;
    return memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)n) == 0;
}

static uint64_t node_hash(const tc_graph *g, const tc_gnode *nd)
{
    uint64_t h = mix(mix(mix(0xcbf29ce484222325ull, (uint64_t)nd->op), (uint64_t)nd->nin), (uint64_t)nd->nout);
    for (int i = 0; i < nd->nin; i++) h = mix(h, (uint64_t)(int64_t)input_at(g, nd, i));
    h = mix_bytes(h, nd->p.s, sizeof nd->p.s);
    h = mix_bytes(h, nd->p.i, sizeof nd->p.i);
    h = mix(h, (uint64_t)nd->p.nshape);
    for (int k = 0; k < nd->p.nshape && k < 2 * TC_MAX_DIMS; k++) h = mix(h, (uint64_t)nd->p.shape[k]);
    for (int o = 0; o < nd->nout; o++) {
        const tc_gval *x = &g->vals[nd->out[o]];
        h = mix(mix(h, (uint64_t)x->dtype), (uint64_t)x->ndim);
        for (int d = 0; d < x->ndim; d++) h = mix(h, (uint64_t)x->size[d]);
    }
    return h;
}

static bool same_node(const tc_graph *g, const tc_gnode *a, const tc_gnode *b)
{
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout) return false;
    if (commutative(g, a) != commutative(g, b)) return false;
    for (int i = 0; i < a->nin; i++)
        if (input_at(g, a, i) != input_at(g, b, i)) return false;
    if (!same_params(&a->p, &b->p)) return false;
    for (int o = 0; o < a->nout; o++) {
        const tc_gval *x = &g->vals[a->out[o]], *y = &g->vals[b->out[o]];
        if (x->dtype != y->dtype || x->ndim != y->ndim) return false;
        if (memcmp(x->size, y->size, sizeof(int64_t) * (size_t)x->ndim) != 0) return false;
    }
    return true;
}


/* ---- the pass ------------------------------------------------------------------------------- */

/* Open-addressing table of ids (values or nodes); -1 marks an empty slot. */
typedef struct table {
    int32_t *slot;
    uint64_t *hash;
    size_t mask;
} table;

static tc_status table_new(table *t, int32_t count)
{
    size_t cap = 16;
    while (cap < (size_t)count * 2 + 2) cap *= 2;
    t->slot = malloc(cap * sizeof *t->slot);
    t->hash = malloc(cap * sizeof *t->hash);
    t->mask = cap - 1;
    if (!t->slot || !t->hash) {
        free(t->slot), free(t->hash);
        return tc_set_error(TC_ERR_MEMORY, "cse: out of memory for a table of %d entries", count);
    }
    memset(t->slot, 0xff, cap * sizeof *t->slot);
    return TC_OK;
}

tc_status tc_pass_cse(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "cse: NULL graph");
    int before = tc_graph_live_nodes(g);
    int32_t *rep = malloc(sizeof(int32_t) * ((size_t)g->nvals + 1));
    table consts = {0}, nodes = {0};
    tc_status s = rep ? TC_OK : tc_set_error(TC_ERR_MEMORY, "cse: out of memory for %d values", g->nvals);
    if (s == TC_OK) s = table_new(&consts, g->nvals);
    if (s == TC_OK) s = table_new(&nodes, g->nnodes);
    if (s) goto done;
    for (int v = 0; v < g->nvals; v++) rep[v] = v;

    int merged_consts = 0, merged_nodes = 0;
    for (int v = 0; v < g->nvals; v++) {
        if (!comparable_const(&g->vals[v])) continue;
        uint64_t h = const_hash(g, v);
        size_t i = (size_t)h & consts.mask;
        for (; consts.slot[i] >= 0; i = (i + 1) & consts.mask)
            if (consts.hash[i] == h && same_const(g, consts.slot[i], v)) break;
        if (consts.slot[i] >= 0) {
            rep[v] = consts.slot[i];
            merged_consts++;
        } else {
            consts.slot[i] = v, consts.hash[i] = h;
        }
    }

    for (int n = 0; n < g->nnodes; n++) {
        tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0) nd->in[i] = rep[nd->in[i]];
        if (!mergeable(nd)) continue;
        uint64_t h = node_hash(g, nd);
        size_t i = (size_t)h & nodes.mask;
        for (; nodes.slot[i] >= 0; i = (i + 1) & nodes.mask)
            if (nodes.hash[i] == h && same_node(g, &g->nodes[nodes.slot[i]], nd)) break;
        if (nodes.slot[i] < 0) {
            nodes.slot[i] = n, nodes.hash[i] = h;
            continue;
        }
        const tc_gnode *first = &g->nodes[nodes.slot[i]];
        for (int o = 0; o < nd->nout; o++) rep[nd->out[o]] = first->out[o];
        nd->flags |= TC_GN_DEAD;
        merged_nodes++;
    }
    for (int i = 0; i < g->noutputs; i++) g->outputs[i] = rep[g->outputs[i]];
    for (int i = 0; i < g->nwb; i++) g->wb_val[i] = rep[g->wb_val[i]];
    /* merged constants are now unread: compaction drops (and releases) them */
    tc_graph_fix_view_roots(g); /* views of merged or replaced values */
    if (merged_nodes || merged_consts) s = tc_graph_compact(g);
    if (s == TC_OK) {
        tc_gpass_stat st = {.pass = "cse", .nodes_before = before, .nodes_after = tc_graph_live_nodes(g)};
        if (merged_consts) snprintf(st.note, sizeof st.note, "%d equal constants merged", merged_consts);
        s = tc_graph_add_stat(g, &st);
    }
done:
    free(rep), free(consts.slot), free(consts.hash), free(nodes.slot), free(nodes.hash);
    return s;
}
