/* loops.h -- the elementwise engine's thread grain per call (loops.c).
 *
 * tc_cpu_foreach (internal.h) splits a loop over the pool only from 2 * TC_EW_GRAIN_CHEAP
 * elements: a pool handshake costs about what 64K additions do (measured: a 64K-float add
 * ran no faster on two threads than on one, a 256K one 1.8x faster). Loops that cost
 * several nanoseconds an element (exp, tanh, pow, ...) pass TC_PARALLEL_GRAIN instead
 * (splitting from 16K elements was measured too: no faster, and an LSTM step slower).
 */
#ifndef TC_CPU_LOOPS_H
#define TC_CPU_LOOPS_H
#include "../internal.h"

#define TC_EW_GRAIN_CHEAP 65536

/* tc_cpu_foreach with parts of at least `grain` elements. */
void tc_cpu_foreach_grain(tc_tensor *out, const tc_tensor *const *ins, int nin, tc_loop_fn fn, double s0, double s1,
                          int64_t grain);
/* The loop function eager mode runs for an elementwise op with computing dtype in, for copy
 * (in -> out) or for where (out's element size); NULL where none exists (ew.c). */
tc_loop_fn tc_cpu_ew_loop(tc_op op, int in, int out);

#endif
