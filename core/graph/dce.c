/* dce.c -- dead-code elimination: drops the nodes whose results nothing reads.
 *
 * A value is needed when a graph output or a write-back reads it, or when a needed node
 * reads it. Nodes are in execution order, so every reader of a value comes after its
 * producer, and one backward sweep reaches the fixed point: by the time a node is visited
 * every node that could read its results has been decided.
 *
 * NOTE: random nodes stay even when unused. Each draws from the generator at run time in
 * trace order, like eager mode; removing an unused one (a dropout mask nobody reads) would
 * shift every later random number and the compiled run would stop matching eager's. The
 * inputs of a kept random node (bernoulli's probabilities) stay needed too. Control-flow
 * nodes (cond / while) are kept for the same reason when a subgraph draws random numbers.
 */
#include "graph.h"
#include <stdio.h>
#include <stdlib.h>

/* Whether graph g (or a subgraph of it) has a random node: running it moves the generator. */
static bool draws_random(const tc_graph *g)
{
    for (int n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        if (nd->flags & TC_GN_RANDOM) return true;
        for (int s = 0; s < nd->nsub; s++)
            if (nd->sub[s] && draws_random(nd->sub[s])) return true;
    }
    return false;
}

static bool must_keep(const tc_gnode *nd)
{
    if (nd->flags & TC_GN_RANDOM) return true;
    if (nd->op < TC_OP_COUNT && tc_op_info((tc_op)nd->op)->kind == TC_KIND_RANDOM) return true;
    for (int s = 0; s < nd->nsub; s++)
        if (nd->sub[s] && draws_random(nd->sub[s])) return true;
    return false;
}

tc_status tc_pass_dce(tc_graph *g)
{
    if (!g) return tc_set_error(TC_ERR_ARG, "dce: NULL graph");
    int before = tc_graph_live_nodes(g);
    bool *needed = calloc((size_t)g->nvals + 1, sizeof *needed);
    if (!needed) return tc_set_error(TC_ERR_MEMORY, "dce: out of memory for %d values", g->nvals);
    for (int i = 0; i < g->noutputs; i++) needed[g->outputs[i]] = true;
    for (int i = 0; i < g->nwb; i++) needed[g->wb_val[i]] = true, needed[g->wb_ext[i]] = true;

    int removed = 0, kept_random = 0;
    for (int n = g->nnodes - 1; n >= 0; n--) {
        tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        bool used = false;
        for (int o = 0; o < nd->nout; o++)
            if (nd->out[o] >= 0 && needed[nd->out[o]]) used = true;
        if (!used && must_keep(nd)) {
            used = true;
            kept_random++;
        }
        if (!used) {
            nd->flags |= TC_GN_DEAD;
            removed++;
            continue;
        }
        for (int i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0) needed[nd->in[i]] = true;
    }
    free(needed);
    if (removed) TRY(tc_graph_compact(g));
    tc_gpass_stat st = {.pass = "dce", .nodes_before = before, .nodes_after = tc_graph_live_nodes(g)};
    if (kept_random)
        snprintf(st.note, sizeof st.note, "%d unused random node%s kept", kept_random, kept_random > 1 ? "s" : "");
    return tc_graph_add_stat(g, &st);
}
