/* trace_test_util.h -- helpers shared by the tracer tests (test_graph_trace.c,
 * test_graph_trace_run.c): op calls through tc_op_run (so a trace records them), in-place
 * calls, and checks on a graph's node list and dump. */
#ifndef TRACE_TEST_UTIL_H
#define TRACE_TEST_UTIL_H
#include "ctest.h"
#include "graph/trace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline tc_tensor *op1(tc_op op, const tc_tensor *a, const tc_params *p)
{
    tc_tensor *r = NULL;
    return ct_run1(op, a, NULL, NULL, p, &r) ? NULL : r;
}

static inline tc_tensor *op2(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_params *p)
{
    tc_tensor *r = NULL;
    return ct_run1(op, a, b, NULL, p, &r) ? NULL : r;
}

/* in place: a = op(a, b) */
static inline tc_status op2_(tc_op op, tc_tensor *a, const tc_tensor *b, const tc_params *p)
{
    const tc_tensor *in[2] = {a, b};
    tc_tensor *out[1] = {a};
    return tc_op_run(op, in, b ? 2 : 1, p, out, 1);
}

static inline int count_op(const tc_graph *g, tc_op op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += g->nodes[i].op == (int32_t)op;
    return n;
}

static inline int dump_has(const tc_graph *g, const char *text)
{
    static char buf[16384];
    tc_graph_dump(g, buf, sizeof buf, NULL);
    if (strstr(buf, text)) return 1;
    printf("  dump lacks '%s':\n%s", text, buf);
    return 0;
}

#define SUM_ALL P(.i = {-1, 0})

/* a and b have the same dtype, shape and values (exactly); prints the first difference */
static inline int same_tensor(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !tc_same_shape(a, b)) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (ct_at(a, i) != ct_at(b, i)) {
            printf("  element %lld: %.17g vs %.17g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            return 0;
        }
    return 1;
}

#endif
