/* gradcheck.h -- a finite-difference check of ONE gradient rule, called directly (no engine).
 *
 * gc_check runs the op forward, builds the rule's context by hand exactly as the engine
 * would (only the tensors the rule's save mask names are handed over, every output's
 * gradient is a fixed pseudo-random weight tensor w_o), runs the rule, and compares each
 * element of each returned input gradient with the central difference of
 *     L(inputs) = sum_o sum(out_o * w_o)     (float outputs only; index outputs ignored)
 * taken on contiguous copies of the inputs. Use float64 inputs away from kinks and ties.
 * The rule itself may see non-contiguous inputs (pass views): that is part of the test.
 *
 *     tc_tensor *a = gc_rand(TC_F64, 2, SZ(3, 4), -1, 1, 1), *b = gc_rand(TC_F64, 1, SZ(4), 0.5, 2, 2);
 *     const tc_tensor *in[2] = {a, b};
 *     CHECK(gc_check(TC_OP_DIV, in, 2, NULL, NULL) == 0);
 *     tc_tensor_release(a), tc_tensor_release(b);
 *
 * NOTE: ops whose result depends on the input's memory layout (as_strided) can only be
 * checked here with contiguous, offset-0 inputs: the perturbed copies are contiguous.
 * Also used by tests/c/test_nn_ops.c (the "nnops" rules) -- keep the API small.
 */
#ifndef GRADCHECK_H
#define GRADCHECK_H
#include "tocha.h"
#include <stdbool.h>

typedef struct gc_opts {
    const bool *wrt;   /* wrt[i]: check input i (NULL: every floating-point input) */
    double eps;        /* finite-difference step (0: 1e-6) */
    double atol, rtol; /* |analytic - numeric| <= atol + rtol |numeric| (0: 1e-6, 1e-5) */
    bool strided_gout; /* hand the rule non-contiguous output gradients */
    bool quiet;        /* do not print the first mismatch */
} gc_opts;

/* 0 when every checked element matches; otherwise 1, after printing the op, the input,
 * the element and both values (or the failing call's error). opts may be NULL. Releases
 * everything it made. */
int gc_check(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, const gc_opts *opts);

/* Runs op's rule on a hand-built context: the forward call (in, nin, p) is run to get the
 * outputs, then the rule gets gout (nout entries, NULL = zero) and needs[] (NULL: every
 * float input). gin (nin slots) receives new references or NULL. Returns the rule's
 * status (or the forward's): this is how bad gradients reach a rule in tests. */
tc_status gc_run_rule(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p,
                      const tc_tensor *const *gout, const bool *needs, tc_tensor **gin);

/* A contiguous tensor of dtype dt with values uniform in [lo, hi) from a fixed generator
 * (same seed, same values). */
tc_tensor *gc_rand(tc_dtype dt, int ndim, const int64_t *sizes, double lo, double hi, uint64_t seed);

/* In a ctest TEST body: GC(ADD, params, a, b) runs gc_check on TC_OP_ADD with inputs a, b,
 * then again handing the rule strided output gradients; each failure is a test failure. */
#define GC(op, p, ...)                                                                      \
    do {                                                                                    \
        const tc_tensor *in_[] = {__VA_ARGS__};                                             \
        int n_ = (int)(sizeof in_ / sizeof *in_);                                           \
        if (gc_check(TC_OP_##op, in_, n_, (p), NULL)) {                                     \
            printf("  FAIL %s:%d: gradcheck of %s\n", __FILE__, __LINE__, #op);             \
            *ctest_failed = 1;                                                              \
        }                                                                                   \
        gc_opts so_ = {.strided_gout = true, .quiet = true};                                \
        if (gc_check(TC_OP_##op, in_, n_, (p), &so_)) {                                     \
            printf("  FAIL %s:%d: gradcheck of %s with a strided gradient\n", __FILE__, __LINE__, #op); \
            *ctest_failed = 1;                                                              \
        }                                                                                   \
    } while (0)

#endif
