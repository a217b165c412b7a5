/* gemm.h -- the one way CPU kernels call BLAS gemm (matmul.c implements it; conv.c uses it).
 *
 * OpenBLAS is held to one thread and our pool (parallel.c) splits a large product into
 * blocks of rows or columns, each a single-threaded gemm. Two pools on the same cores
 * fought: after every threaded gemm OpenBLAS's workers spin in sched_yield for a while,
 * taking the cores our pool's workers need for the elementwise ops that follow (a quarter
 * of an MLP training step's samples were in sched_yield). PyTorch runs OpenBLAS the same
 * way (OPENBLAS_NUM_THREADS=1 plus its own intra-op threads).
 */
#ifndef TC_CPU_GEMM_H
#define TC_CPU_GEMM_H
#include "../internal.h"

/* C (m, n) = alpha op(A) (m, k) @ op(B) (k, n) + beta C, row-major; op transposes A / B
 * when ta / tb (A stored (k, m), B stored (n, k)). dt is TC_F32 or TC_F64. beta == 0
 * never reads C. Splits over the pool when the product is large enough; inside a pool
 * worker it runs on the calling thread. */
void tc_cpu_gemm(int dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* Holds OpenBLAS to one thread (idempotent, thread-safe): called before any BLAS call and
 * by tc_set_num_threads. */
void tc_cpu_blas_single_thread(void);

#endif
