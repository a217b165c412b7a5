/* test_scalar_math.c -- the branch-free float exp/tanh used by the CPU float kernels
 * (core/scalar_math.h) against double-precision libm over the whole float range, plus the
 * integer helpers' edge cases. */
#include "ctest.h"
#include "scalar_math.h"

/* Error in units of float32's last place at the reference value. */
static double ulps(float got, double ref)
{
    if (isnan(ref)) return isnan(got) ? 0 : 1e9;
    if (isinf(ref)) return (isinf(got) && (got > 0) == (ref > 0)) ? 0 : 1e9;
    double ulp = nextafterf((float)fabs(ref), INFINITY) - (float)fabs(ref);
    if (ulp <= 0 || fabs(ref) < 1.17549435e-38) ulp = 1.4e-45; /* subnormal range */
    return fabs((double)got - ref) / ulp;
}

TEST(scalar_expf_is_within_2_ulp)
{
    double worst = 0;
    for (float x = -87.0f; x < 88.7f; x += 0.00731f) {
        double u = ulps(tc_expf(x), exp((double)x));
        if (u > worst) worst = u;
    }
    CHECK(worst <= 2);
    if (worst > 2) printf("  worst expf error %.2f ulp\n", worst);
    CHECK(isinf(tc_expf(89.0f)) && tc_expf(89.0f) > 0);
    CHECK(tc_expf(-120.0f) == 0.0f);
    CHECK(tc_expf(-INFINITY) == 0.0f && isinf(tc_expf(INFINITY)));
    CHECK(isnan(tc_expf(NAN)));
    CHECK(tc_expf(0.0f) == 1.0f);
}

TEST(scalar_tanhf_is_within_4_ulp)
{
    double worst = 0;
    for (float x = -12.0f; x < 12.0f; x += 0.000913f) {
        double u = ulps(tc_tanhf(x), tanh((double)x));
        if (u > worst) worst = u;
    }
    CHECK(worst <= 4);
    if (worst > 4) printf("  worst tanhf error %.2f ulp\n", worst);
    CHECK(tc_tanhf(30.0f) == 1.0f && tc_tanhf(-30.0f) == -1.0f);
    CHECK(tc_tanhf(INFINITY) == 1.0f && tc_tanhf(-INFINITY) == -1.0f);
    CHECK(isnan(tc_tanhf(NAN)));
    CHECK(tc_tanhf(1e-30f) == 1e-30f); /* odd polynomial keeps tiny values exact */
}

TEST(scalar_integer_helpers_edge_cases)
{
    CHECK(tc_idiv(-7, 2) == -3 && tc_idiv(INT64_MIN, -1) == INT64_MIN && tc_idiv(5, 0) == 0);
    CHECK(tc_ifmod(-7, 3) == -1 && tc_iremainder(-7, 3) == 2 && tc_iremainder(7, -3) == -2);
    CHECK(tc_ipow(3, 4) == 81 && tc_ipow(2, -1) == 0 && tc_ipow(-1, -3) == -1 && tc_ipow(1, -5) == 1);
    CHECK(tc_ishl(1, 3) == 8 && tc_ishl(1, 64) == 0 && tc_ishr(-8, 1) == -4 && tc_ishr(-8, 99) == -1);
}
