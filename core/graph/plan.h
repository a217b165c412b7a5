/* plan.h -- what the last three stages share (private to inplace.c, memplan.c, exec.c):
 * how every value gets its memory at run time, and the liveness analysis the in-place
 * choices, the memory plan and the executor all read.
 *
 * Positions: a node runs at its own index, except that the non-view members of a fused
 * group all run at the index of the group's last member (tc_fused_eval evaluates the
 * whole group there). A value's buffer is live from the position of its producer to
 * `end`, the last position at which it is read directly or through a view of it;
 * graph outputs, write-back sources and values a control node reads live to the end
 * (position nnodes).
 */
#ifndef TC_GRAPH_PLAN_H
#define TC_GRAPH_PLAN_H

#include "graph.h"

/* vals[].offset beyond a byte offset: -1 is "not in the arena" (graph.h); -2 is set by
 * the in-place pass on a write-back source computed straight into the memory of the
 * captured tensor it is written back to (exec.c points the value's header at that tensor
 * and skips the copy; memplan.c leaves the value out of the arena). */
#define TC_GOFF_NONE (-1)
#define TC_GOFF_WRITEBACK (-2)

/* Arena offsets are multiples of this. */
#define TC_GPLAN_ALIGN 64

/* Where a value's memory comes from at run time. */
enum {
    TC_GB_UNUSED,    /* produced by a dead node: never bound */
    TC_GB_INPUT,     /* the caller's tensor, bound per run */
    TC_GB_EXTERNAL,  /* the captured tensor, by reference */
    TC_GB_CONST,     /* the graph's constant */
    TC_GB_ARENA,     /* a range of the arena at vals[].offset */
    TC_GB_FRESH,     /* allocated per run: a graph output, or the buffer of a view that is one */
    TC_GB_VIEW,      /* a header on its root's memory */
    TC_GB_CONTROL,   /* a new reference returned by tc_control_run, per run */
    TC_GB_INTERNAL,  /* inside a fused group evaluated block by block: no memory at all */
    TC_GB_WRITEBACK, /* the memory of the captured tensor it is written back to (TC_GOFF_WRITEBACK) */
};

typedef struct tc_gplan_info {
    int32_t nnodes, nvals;
    int32_t *pos;   /* per node: where it runs (see above); -1 for dead nodes */
    int32_t *end;   /* per value: last position its memory is needed (nnodes: to the end) */
    int32_t *root;  /* per value: the value owning its memory (view_of, or itself) */
    uint8_t *bind;  /* per value: TC_GB_* */
    int32_t *wb_of; /* per value: the external it is written back to (the first such), or -1 */
    int32_t *glast; /* per group: index of its last member */
} tc_gplan_info;


/* Fills a (arrays malloc'ed; release with tc_gplan_info_free) from g as it is now. Checks
 * that every value is produced before it is read and that a fused group's values read
 * outside it are group outputs (TC_ERR_INTERNAL naming the node otherwise). */
tc_status tc_gplan_analyse(const tc_graph *g, tc_gplan_info *a);
void tc_gplan_info_free(tc_gplan_info *a);

/* Memory span [lo, hi) in bytes of t within its storage (empty when t has no elements). */
static inline void tc_gplan_span(const tc_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t es = tc_elsize(t->dtype), a = t->offset;
    int64_t b = a; /* lowest and highest element offsets reached */
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] == 0) {
            *lo = *hi = t->offset * es;
            return;
        }
        int64_t ext = (t->size[d] - 1) * t->stride[d];
        if (ext < 0) a += ext;
        else b += ext;
    }
    *lo = a * es, *hi = (b + 1) * es;
}

/* 1 when node n reads value v, or a view whose memory is v's, through any input. */
int tc_gplan_reads_memory_of(const tc_graph *g, const tc_gplan_info *a, int32_t n, int32_t v);

#endif /* TC_GRAPH_PLAN_H */
