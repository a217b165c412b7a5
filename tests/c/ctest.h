/* ctest.h -- the tiny C test framework: TEST(name) registers a test, CHECK* record failures
 * with file:line, and main (test_main.c) runs them all and prints "N passed, N failed". */
#ifndef CTEST_H
#define CTEST_H
#include "tocha.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*ctest_fn)(int *failed);
void ctest_register(const char *name, ctest_fn fn);

#define TEST(name)                                                                          \
    static void test_##name(int *ctest_failed);                                             \
    __attribute__((constructor)) static void register_##name(void) { ctest_register(#name, test_##name); } \
    static void test_##name(int *ctest_failed)

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            printf("  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                         \
            *ctest_failed = 1;                                                              \
        }                                                                                   \
    } while (0)

#define CHECK_OK(expr)                                                                      \
    do {                                                                                    \
        tc_status s_ = (expr);                                                              \
        if (s_ != TC_OK) {                                                                  \
            printf("  FAIL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #expr, (int)s_, tc_last_error()); \
            *ctest_failed = 1;                                                              \
            return;                                                                         \
        }                                                                                   \
    } while (0)

/* The call must fail with code and a message containing text. */
#define CHECK_ERR(expr, code, text)                                                         \
    do {                                                                                    \
        tc_status s_ = (expr);                                                              \
        if (s_ != (code) || !strstr(tc_last_error(), (text))) {                             \
            printf("  FAIL %s:%d: %s -> %d '%s', wanted %d containing '%s'\n", __FILE__, __LINE__, #expr, \
                   (int)s_, tc_last_error(), (int)(code), (text));                          \
            *ctest_failed = 1;                                                              \
        }                                                                                   \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                               \
    do {                                                                                    \
        double a_ = (a), b_ = (b);                                                          \
        if (!(fabs(a_ - b_) <= (tol))) {                                                    \
            printf("  FAIL %s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, a_, b_); \
            *ctest_failed = 1;                                                              \
        }                                                                                   \
    } while (0)

/* helpers (test_util.c) */
tc_tensor *ct_from(tc_dtype dt, int ndim, const int64_t *sizes, const double *values);
tc_tensor *ct_arange(tc_dtype dt, int ndim, const int64_t *sizes);
double ct_at(const tc_tensor *t, int64_t flat); /* row-major flat index */
tc_status ct_run1(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, const tc_params *p,
                  tc_tensor **out);
tc_tensor *ct_transposed(const tc_tensor *t, int a, int b); /* a view; NULL on error */
int ct_shape_is(const tc_tensor *t, int nd, const int64_t *sz);
int ct_near(double got, double want, double tol); /* relative tol; NaN == NaN */
/* Same sizes and every element ct_near (the first mismatch printed); NULL never matches. */
int ct_close_all(const tc_tensor *a, const tc_tensor *b, double tol);
int ct_same_vals(const tc_tensor *t, const double *v, int64_t n); /* exact; prints the first miss */
#define SAME(t, ...) ct_same_vals((t), VALS(__VA_ARGS__), (int64_t)(sizeof(VALS(__VA_ARGS__)) / sizeof(double)))
#define SZ(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})
#define P(...) (&(tc_params){__VA_ARGS__})

/* A pool of test tensors released together: ct_keep(t) adds t (NULL is ignored) and
 * returns it; ct_drop() releases every kept tensor (call it before a test returns). */
tc_tensor *ct_keep(tc_tensor *t);
void ct_drop(void);

#endif
