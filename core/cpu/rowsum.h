/* rowsum.h -- the row sums of the CPU normalisation kernels (batchnorm.c, layernorm.c):
 * a row's sum and its sum of squared deviations from m, each kept in ROW_LANES partial sums
 * of the row's own type (so the compiler vectorises the loop) that are added into a double
 * at the end. Generated for float (f32) and double (f64).
 */
#ifndef TC_CPU_ROWSUM_H
#define TC_CPU_ROWSUM_H
#include <stdint.h>

#define ROW_LANES 16

#define ROW_SUM_LOOPS(T, sfx)                                                                      \
    static inline double row_sum_##sfx(const T *r, int64_t n)                                      \
    {                                                                                              \
        T acc[ROW_LANES] = {0};                                                                    \
        int64_t i = 0;                                                                             \
        for (; i + ROW_LANES <= n; i += ROW_LANES)                                                 \
            for (int l = 0; l < ROW_LANES; l++) acc[l] += r[i + l];                                \
        double s = 0;                                                                              \
        for (; i < n; i++) s += (double)r[i];                                                      \
        for (int l = 0; l < ROW_LANES; l++) s += (double)acc[l];                                   \
        return s;                                                                                  \
    }                                                                                              \
    static inline double row_sqdev_##sfx(const T *r, int64_t n, T m)                               \
    {                                                                                              \
        T acc[ROW_LANES] = {0};                                                                    \
        int64_t i = 0;                                                                             \
        for (; i + ROW_LANES <= n; i += ROW_LANES)                                                 \
            for (int l = 0; l < ROW_LANES; l++) {                                                  \
                T d = r[i + l] - m;                                                                \
                acc[l] += d * d;                                                                   \
            }                                                                                      \
        double s = 0;                                                                              \
        for (; i < n; i++) s += (double)((r[i] - m) * (r[i] - m));                                 \
        for (int l = 0; l < ROW_LANES; l++) s += (double)acc[l];                                   \
        return s;                                                                                  \
    }

ROW_SUM_LOOPS(float, f32)
ROW_SUM_LOOPS(double, f64)

#endif
