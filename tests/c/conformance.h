/* conformance.h -- the conformance drivers of test_conformance.c that other test files run:
 * the golden cases on a device and in other layouts, the elementwise and reduction sweeps,
 * and every golden call handed to a visitor. Include after ctest.h. */
#ifndef TC_TEST_CONFORMANCE_H
#define TC_TEST_CONFORMANCE_H
#include <stdbool.h>

/* Each returns the number of cases that failed (-1: ops.golden missing or malformed) and
 * sets *total to the number run. device: TC_CPU or a CUDA device code. */
int conformance_golden_on(int device, int *total);
/* layout: layouts.h; compiled: traced and compiled with every pass */
int conformance_golden_layout_on(int device, int layout, bool compiled, int *total);
int conformance_elementwise_on(int device, int *total);
int conformance_reduce_on(int device, int *total);

/* One golden case as a call: host inputs (NULL where the case has none), the result slot it
 * gives as a zero-filled host tensor (else NULL), and nout, the op's result count. */
typedef struct golden_call {
    int op;
    const tc_params *p;
    tc_tensor *const *in;
    int nin, nout;
    const tc_tensor *given;
} golden_call;
/* Calls visit for every golden case in file order; returns the count (-1 as above). */
int conformance_golden_each(void (*visit)(void *ctx, const golden_call *call), void *ctx);

#endif
