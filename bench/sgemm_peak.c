/* sgemm_peak.c [N] -- OpenBLAS's own sgemm on N x N floats (GFLOP/s): the physical limit
 * the tocha matrix product is compared with. Threads: OPENBLAS_NUM_THREADS. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2048;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    if (!a || !b || !c) return 1;
    for (long i = 0; i < (long)n * n; i++) a[i] = (float)rand() / RAND_MAX, b[i] = (float)rand() / RAND_MAX;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("%.2f\n", 2.0 * n * n * n / best / 1e9);
    free(a), free(b), free(c);
    return 0;
}
