/* test_scan.c -- the scan kind: cumsum and cumprod. Fixed values from PyTorch 1.13; every
 * dim, layout and dtype against a plain-loop reference; the three drivers (lines, cols,
 * chunked long lines) on large tensors; in-place use and bad input. */
#include "ctest.h"
#include <stdint.h>

/* Floats in [-1.3, 1.3); small integers (non-negative for uint8), so products stay exact
 * until they wrap. */
static tc_tensor *wave_tensor(tc_dtype dt, int nd, const int64_t *sz)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, nd, sz, &t)) return NULL;
    int64_t idx[TC_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = nd - 1; d >= 0; d--) idx[d] = r % sz[d], r /= sz[d];
        double v = tc_dtype_is_float(dt) ? 1.3 * sin(1.7 * (double)i + 0.4)
                   : dt == TC_U8         ? (double)((i * 5) % 7)
                                         : (double)((i * 5) % 7 - 3);
        tc_tensor_set_value(t, idx, v);
    }
    return t;
}

static uint64_t lcg_state;
static double lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) / 9007199254740992.0 * 2 - 1;
}

#define Y_VALS VALS(1.5, -2.0, 3.0, 0.5, 4.0, 0.0, -1.0, 2.5, -3.0, 2.0, 1.0, -0.5)

static tc_status scan(tc_op op, const tc_tensor *x, int64_t dim, tc_tensor **out)
{
    tc_params p = {.i = {dim}};
    return tc_op_run(op, &x, 1, &p, out, 1);
}

/* An integer running value stored in dtype dt (wrapping, as the kernel's cast does). */
static double wrap_to(int dt, uint64_t u)
{
    switch (dt) {
    case TC_U8: return (uint8_t)u;
    case TC_I8: return (int8_t)u;
    case TC_I16: return (int16_t)u;
    case TC_I32: return (int32_t)u;
    default: return (double)(int64_t)u;
    }
}

/* Reference scan along dim in double (float) or wrapping int64, cast to the dtype. */
static int check_scan(tc_op op, const tc_tensor *x, int dim, double tol)
{
    tc_tensor *o = NULL;
    if (scan(op, x, dim, &o) != TC_OK) {
        printf("  %s: %s\n", tc_op_info(op)->name, tc_last_error());
        return 0;
    }
    int ok = o->dtype == x->dtype && ct_shape_is(o, x->ndim, x->size), isint = !tc_dtype_is_float((tc_dtype)x->dtype);
    int64_t total = tc_tensor_numel(x), n = x->size[dim], lines = total / (n ? n : 1);
    for (int64_t l = 0; l < lines && ok; l++) {
        int64_t idx[TC_MAX_DIMS] = {0}, r = l;
        for (int d = x->ndim - 1; d >= 0; d--)
            if (d != dim) idx[d] = r % x->size[d], r /= x->size[d];
        double ad = op == TC_OP_CUMPROD;
        uint64_t au = op == TC_OP_CUMPROD;
        for (int64_t i = 0; i < n && ok; i++) {
            idx[dim] = i;
            double v, got;
            tc_tensor_get(x, idx, &v);
            tc_tensor_get(o, idx, &got);
            ad = op == TC_OP_CUMPROD ? ad * v : ad + v;
            au = op == TC_OP_CUMPROD ? au * (uint64_t)(int64_t)v : au + (uint64_t)(int64_t)v;
            double want = isint ? wrap_to(x->dtype, au) : ad;
            if (!ct_near(got, want, tol)) {
                printf("  %s dim %d line %lld [%lld] = %.12g, expected %.12g\n", tc_op_info(op)->name, dim, (long long)l,
                       (long long)i, got, want);
                ok = 0;
            }
        }
    }
    tc_tensor_release(o);
    return ok;
}

TEST(scan_fixed_values_and_dims)
{
    tc_tensor *y = ct_from(TC_F64, 2, SZ(3, 4), Y_VALS), *o = NULL;
    CHECK_OK(scan(TC_OP_CUMSUM, y, 1, &o));
    static const double cs1[] = {1.5, -0.5, 2.5, 3.0, 4.0, 4.0, 3.0, 5.5, -3.0, -1.0, 0.0, -0.5};
    for (int i = 0; i < 12; i++) CHECK(ct_at(o, i) == cs1[i]);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(scan(TC_OP_CUMPROD, y, -2, &o)); /* -2 = dim 0 */
    static const double cp0[] = {1.5, -2.0, 3.0, 0.5, 6.0, -0.0, -3.0, 1.25, -18.0, -0.0, -3.0, -0.625};
    for (int i = 0; i < 12; i++) CHECK(ct_at(o, i) == cp0[i]);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(scan(TC_OP_CUMSUM, y, -1, &o)); /* for scans -1 is the last dim */
    CHECK(ct_at(o, 3) == 3.0 && ct_at(o, 11) == -0.5);
    tc_tensor_release(o);
    tc_tensor_release(y);
    /* every dim, contiguous and transposed, float and integer */
    static const tc_dtype dts[] = {TC_F64, TC_F32, TC_I32, TC_U8, TC_I64};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        tc_tensor *x = wave_tensor(dts[t], 3, SZ(3, 5, 7)), *b = wave_tensor(dts[t], 3, SZ(5, 3, 7));
        tc_tensor *bt = ct_transposed(b, 0, 1), *c = wave_tensor(dts[t], 3, SZ(7, 5, 3)), *ctr = ct_transposed(c, 0, 2);
        double tol = dts[t] == TC_F32 ? 1e-6 : 1e-12;
        for (int d = 0; d < 3; d++) {
            CHECK(check_scan(TC_OP_CUMSUM, x, d, tol) && check_scan(TC_OP_CUMPROD, x, d, tol));
            CHECK(check_scan(TC_OP_CUMSUM, bt, d, tol) && check_scan(TC_OP_CUMPROD, bt, d, tol));
            CHECK(check_scan(TC_OP_CUMSUM, ctr, d, tol) && check_scan(TC_OP_CUMPROD, ctr, d, tol));
        }
        tc_tensor_release(x);
        tc_tensor_release(b);
        tc_tensor_release(bt);
        tc_tensor_release(c);
        tc_tensor_release(ctr);
    }
}

TEST(scan_integer_wrap_half_and_in_place)
{
    tc_tensor *i8 = ct_from(TC_I8, 1, SZ(3), VALS(100, 100, 100)), *o = NULL;
    CHECK_OK(scan(TC_OP_CUMSUM, i8, 0, &o)); /* keeps int8 and wraps: 100, -56, 44 */
    CHECK(o->dtype == TC_I8 && ct_at(o, 0) == 100 && ct_at(o, 1) == -56 && ct_at(o, 2) == 44);
    tc_tensor_release(o);
    tc_tensor_release(i8);
    tc_tensor *h = ct_from(TC_F16, 2, SZ(2, 2), VALS(0.5, 1.5, 2, -1)), *hs = NULL;
    CHECK_OK(scan(TC_OP_CUMSUM, h, 0, &hs));
    CHECK(hs->dtype == TC_F16 && ct_at(hs, 2) == 2.5 && ct_at(hs, 3) == 0.5);
    tc_tensor_release(hs);
    tc_tensor *hh = h; /* in place, through the f32 copy */
    CHECK_OK(scan(TC_OP_CUMPROD, h, 1, &hh));
    CHECK(hh == h && ct_at(h, 1) == 0.75 && ct_at(h, 3) == -2);
    tc_tensor_release(h);
    tc_tensor *x = ct_from(TC_F64, 2, SZ(2, 3), VALS(1, 2, 3, 4, 5, 6)), *xx = x;
    CHECK_OK(scan(TC_OP_CUMSUM, x, 1, &xx));
    CHECK(xx == x && ct_at(x, 2) == 6 && ct_at(x, 5) == 15);
    CHECK_OK(scan(TC_OP_CUMSUM, x, 0, &xx)); /* column path in place */
    CHECK(ct_at(x, 3) == 5 && ct_at(x, 5) == 21);
    tc_tensor_release(x);
    tc_tensor *s = ct_from(TC_F32, 0, SZ(1), VALS(4));
    o = NULL;
    CHECK_OK(scan(TC_OP_CUMPROD, s, 0, &o));
    CHECK(o->ndim == 0 && tc_tensor_item(o) == 4);
    tc_tensor_release(o);
    tc_tensor_release(s);
}

TEST(scan_big_paths_and_bad_input)
{
    /* one long line (chunked), wide rows along dim 0 (cols), many lines (lines) */
    static const int64_t shapes[][2] = {{1, 300000}, {2000, 300}, {300, 2000}};
    for (int s = 0; s < 3; s++) {
        tc_tensor *x = NULL;
        CHECK_OK(tc_tensor_new(TC_F64, 2, shapes[s], &x));
        double *p = tc_tensor_data(x);
        lcg_state = 99;
        for (int64_t i = 0; i < shapes[s][0] * shapes[s][1]; i++) p[i] = 1 + lcg() * 1e-4;
        for (int d = 0; d < 2; d++) {
            CHECK(check_scan(TC_OP_CUMSUM, x, d, 1e-9));
            CHECK(check_scan(TC_OP_CUMPROD, x, d, 1e-9));
        }
        tc_tensor_release(x);
    }
    tc_tensor *l = NULL, *o = NULL;
    CHECK_OK(tc_tensor_new(TC_I64, 1, SZ(500000), &l));
    int64_t *lp = tc_tensor_data(l);
    for (int64_t i = 0; i < 500000; i++) lp[i] = i;
    CHECK_OK(scan(TC_OP_CUMSUM, l, 0, &o));
    int64_t *op = tc_tensor_data(o);
    CHECK(op[499999] == (int64_t)499999 * 500000 / 2 && op[65536] == (int64_t)65536 * 65537 / 2);
    tc_tensor_release(o);
    tc_tensor_release(l);

    tc_tensor *x = ct_arange(TC_F32, 2, SZ(2, 3));
    o = NULL;
    CHECK_ERR(scan(TC_OP_CUMSUM, x, 2, &o), TC_ERR_INDEX, "cumsum: dim 2 out of range for the 2-dim tensor (2,3)");
    CHECK_ERR(scan(TC_OP_CUMPROD, x, -3, &o), TC_ERR_INDEX, "cumprod: dim -3 out of range");
    tc_tensor *r = ct_from(TC_F64, 2, SZ(2, 3), VALS(1, 1, 1, 1, 1, 1));
    CHECK_ERR(scan(TC_OP_CUMSUM, x, 0, &r), TC_ERR_DTYPE, "cumsum: result 1 is float64, expected float32");
    CHECK(ct_at(r, 4) == 1);
    tc_tensor *b = ct_from(TC_BOOL, 1, SZ(2), VALS(1, 0));
    CHECK_ERR(scan(TC_OP_CUMSUM, b, 0, &o), TC_ERR_DTYPE, "cumsum: bool tensors are not supported");
    CHECK(o == NULL);
    tc_tensor_release(b);
    tc_tensor_release(r);
    tc_tensor_release(x);
}
