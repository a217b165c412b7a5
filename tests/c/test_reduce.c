/* test_reduce.c -- the reduce kind: sum prod mean var std norm max min all any (the scans
 * are in test_scan.c). Fixed values come from PyTorch 1.13; the sweeps compare every op,
 * dim, keepdim and layout against a plain-loop reference written here; large tensors
 * exercise the parallel paths (rows, cols, split chunks) against double references. */
#include "ctest.h"
#include <stdint.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static tc_status reduce2(tc_op op, const tc_tensor *x, int64_t dim, int keep, int64_t i2, double s0, tc_tensor **o0,
                         tc_tensor **o1)
{
    tc_params p = {.s = {s0, 0}, .i = {dim, keep, i2, 0}};
    const tc_opinfo *info = tc_op_info(op);
    tc_tensor *out[2] = {*o0, o1 ? *o1 : NULL};
    tc_status s = tc_op_run(op, &x, 1, &p, out, info->nout);
    *o0 = out[0];
    if (o1) *o1 = out[1];
    else if (info->nout == 2 && out[1]) tc_tensor_release(out[1]);
    return s;
}

/* out = op(x) along dim (-1: all), as a new tensor. */
static tc_status reduce1(tc_op op, const tc_tensor *x, int64_t dim, int keep, tc_tensor **o0)
{
    *o0 = NULL;
    return reduce2(op, x, dim, keep, 1, 2, o0, NULL);
}

/* Deterministic values in [-1.3, 1.3) with some exact zeros (for norm p=0). */
static double wave(int64_t i) { return i % 11 == 3 ? 0.0 : 1.3 * sin(1.7 * (double)i + 0.4); }

static tc_tensor *wave_tensor(tc_dtype dt, int nd, const int64_t *sz)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = tc_dtype_is_float(dt) ? wave(i) : dt == TC_U8 ? (double)((i * 5) % 7) : (double)((i * 5) % 7 - 3);
    tc_tensor *t = ct_from(dt, nd, sz, v);
    free(v);
    return t;
}

/* ---- the plain-loop reference --------------------------------------------------------------- */

static void ref_fold(tc_op op, const double *v, int64_t n, int unb, double p, int isint, double *val, int64_t *ix)
{
    double s = 0;
    *ix = -1;
    for (int64_t i = 0; i < n; i++) s += v[i];
    switch (op) {
    case TC_OP_SUM: *val = s; break;
    case TC_OP_PROD: {
        double pd = 1;
        uint64_t pu = 1;
        for (int64_t i = 0; i < n; i++) pd *= v[i], pu *= (uint64_t)(int64_t)v[i];
        *val = isint ? (double)(int64_t)pu : pd;
        break;
    }
    case TC_OP_MEAN: *val = s / (double)n; break;
    case TC_OP_VAR:
    case TC_OP_STD: {
        double m = s / (double)n, ss = 0, den = (double)n - unb;
        for (int64_t i = 0; i < n; i++) ss += (v[i] - m) * (v[i] - m);
        *val = den > 0 ? ss / den : NAN;
        if (op == TC_OP_STD) *val = sqrt(*val);
        break;
    }
    case TC_OP_NORM: {
        double r = p == -INFINITY ? INFINITY : 0;
        for (int64_t i = 0; i < n; i++) {
            double a = fabs(v[i]);
            if (p == 0) r += v[i] != 0;
            else if (p == INFINITY) r = a > r ? a : r;
            else if (p == -INFINITY) r = a < r ? a : r;
            else r += pow(a, p);
        }
        *val = (p == 0 || isinf(p)) ? r : pow(r, 1 / p);
        break;
    }
    case TC_OP_MAX:
    case TC_OP_MIN:
        for (int64_t i = 0; i < n; i++) {
            int take;
            if (*ix < 0) take = 1;
            else if (isnan(*val)) take = 0; /* the first NaN stays */
            else if (isnan(v[i])) take = 1;
            else take = op == TC_OP_MAX ? v[i] > *val : v[i] < *val;
            if (take) *val = v[i], *ix = i;
        }
        break;
    case TC_OP_ALL: {
        int64_t c = 0;
        for (int64_t i = 0; i < n; i++) c += v[i] != 0;
        *val = c == n;
        break;
    }
    case TC_OP_ANY: {
        int64_t c = 0;
        for (int64_t i = 0; i < n; i++) c += v[i] != 0;
        *val = c > 0;
        break;
    }
    default: *val = NAN;
    }
}

static int expected_dtype(tc_op op, int dt)
{
    if ((op == TC_OP_SUM || op == TC_OP_PROD) && !tc_dtype_is_float((tc_dtype)dt)) return TC_I64;
    if (op == TC_OP_ALL || op == TC_OP_ANY) return TC_U8;
    return dt;
}

/* Runs op on x along dim (-1: all) and compares dtype, shape, values and indices with the
 * reference. Returns 1 when everything matches (prints what differs otherwise). */
static int check_reduce(tc_op op, const tc_tensor *x, int64_t dim, int keep, int unb, double p, double tol)
{
    const char *name = tc_op_info(op)->name;
    int all = dim == -1, d = all ? -1 : (int)(dim < 0 ? dim + x->ndim : dim);
    int with_idx = !all && (op == TC_OP_MAX || op == TC_OP_MIN);
    tc_tensor *o0 = NULL, *o1 = NULL;
    tc_status s = reduce2(op, x, dim, keep, unb, p, &o0, with_idx ? &o1 : NULL);
    if (s != TC_OK) {
        printf("  %s dim %lld: %s\n", name, (long long)dim, tc_last_error());
        return 0;
    }
    int ok = 1, nd = 0;
    int64_t sz[TC_MAX_DIMS], kept[TC_MAX_DIMS], nk = 0, nout = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (all || i == d) {
            if (keep) sz[nd++] = 1;
        } else {
            sz[nd++] = x->size[i], kept[nk++] = i, nout *= x->size[i];
        }
    }
    if (o0->dtype != expected_dtype(op, x->dtype) || !ct_shape_is(o0, nd, sz) || (with_idx && !ct_shape_is(o1, nd, sz)) ||
        (with_idx && o1->dtype != TC_I64)) {
        printf("  %s dim %lld keep %d: wrong dtype or shape\n", name, (long long)dim, keep);
        ok = 0;
        nout = 0;
    }
    int64_t n = all ? tc_tensor_numel(x) : x->size[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t o = 0; o < nout && ok; o++) {
        int64_t idx[TC_MAX_DIMS] = {0}, r = o;
        for (int k = (int)nk - 1; k >= 0; k--) idx[kept[k]] = r % x->size[kept[k]], r /= x->size[kept[k]];
        for (int64_t i = 0; i < n; i++) {
            if (all) {
                int64_t rr = i;
                for (int k = x->ndim - 1; k >= 0; k--) idx[k] = rr % x->size[k], rr /= x->size[k];
            } else {
                idx[d] = i;
            }
            tc_tensor_get(x, idx, &v[i]);
        }
        double want;
        int64_t wix;
        ref_fold(op, v, n, unb, p, !tc_dtype_is_float((tc_dtype)x->dtype), &want, &wix);
        double got = ct_at(o0, o);
        if (!ct_near(got, want, tol)) {
            printf("  %s dim %lld keep %d p %g: out[%lld] = %.12g, expected %.12g\n", name, (long long)dim, keep, p,
                   (long long)o, got, want);
            ok = 0;
        }
        if (with_idx && ct_at(o1, o) != (double)wix) {
            printf("  %s dim %lld: index[%lld] = %g, expected %lld\n", name, (long long)dim, (long long)o, ct_at(o1, o),
                   (long long)wix);
            ok = 0;
        }
    }
    free(v);
    tc_tensor_release(o0);
    tc_tensor_release(o1);
    return ok;
}

/* ---- fixed values (PyTorch) ------------------------------------------------------------------- */

TEST(reduce_sum_arange_each_dim)
{
    tc_tensor *x = ct_arange(TC_F32, 3, SZ(2, 3, 4)), *o = NULL;
    CHECK_OK(reduce1(TC_OP_SUM, x, 0, 0, &o));
    CHECK(ct_shape_is(o, 2, SZ(3, 4)) && o->dtype == TC_F32);
    CHECK(ct_at(o, 0) == 12 && ct_at(o, 5) == 22 && ct_at(o, 11) == 34);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, x, 1, 1, &o));
    CHECK(ct_shape_is(o, 3, SZ(2, 1, 4)));
    CHECK(ct_at(o, 0) == 12 && ct_at(o, 3) == 21 && ct_at(o, 4) == 48 && ct_at(o, 7) == 57);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, x, 2, 0, &o));
    CHECK(ct_shape_is(o, 2, SZ(2, 3)));
    CHECK(ct_at(o, 0) == 6 && ct_at(o, 1) == 22 && ct_at(o, 5) == 86);
    tc_tensor_release(o);
    /* -2 is the second-to-last dim (-1 is taken by "all") */
    CHECK_OK(reduce1(TC_OP_SUM, x, -2, 0, &o));
    CHECK(ct_shape_is(o, 2, SZ(2, 4)) && ct_at(o, 0) == 12 && ct_at(o, 7) == 57);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, x, -3, 0, &o));
    CHECK(ct_shape_is(o, 2, SZ(3, 4)) && ct_at(o, 11) == 34);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, x, -1, 0, &o));
    CHECK(o->ndim == 0 && tc_tensor_item(o) == 276);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, x, -1, 1, &o)); /* keepdim on a full reduction: all ones */
    CHECK(ct_shape_is(o, 3, SZ(1, 1, 1)) && tc_tensor_item(o) == 276);
    tc_tensor_release(o);
    tc_tensor_release(x);
}

#define Y_VALS VALS(1.5, -2.0, 3.0, 0.5, 4.0, 0.0, -1.0, 2.5, -3.0, 2.0, 1.0, -0.5)

TEST(reduce_fixed_values_match_pytorch)
{
    tc_tensor *y = ct_from(TC_F64, 2, SZ(3, 4), Y_VALS), *o = NULL, *ix = NULL;
    CHECK_OK(reduce1(TC_OP_PROD, y, 1, 0, &o));
    CHECK(ct_at(o, 0) == -4.5 && ct_at(o, 1) == 0 && ct_at(o, 2) == 3);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_PROD, y, 0, 0, &o));
    CHECK(ct_at(o, 0) == -18 && ct_at(o, 2) == -3 && ct_at(o, 3) == -0.625);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_MEAN, y, 0, 0, &o));
    CHECK_NEAR(ct_at(o, 0), 0.8333333333333334, 1e-15);
    CHECK_NEAR(ct_at(o, 2), 1.0, 1e-15);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_VAR, y, 1, 0, 1, 0, &o, NULL));
    CHECK_NEAR(ct_at(o, 0), 4.416666666666667, 1e-14);
    CHECK_NEAR(ct_at(o, 2), 4.729166666666667, 1e-14);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_VAR, y, 1, 0, 0, 0, &o, NULL));
    CHECK_NEAR(ct_at(o, 1), 3.921875, 1e-14);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_STD, y, 0, 0, 1, 0, &o, NULL));
    CHECK_NEAR(ct_at(o, 0), 3.547299442298794, 1e-14);
    CHECK_NEAR(ct_at(o, 3), 1.5275252316519468, 1e-14);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_VAR, y, -1, 0, 1, 0, &o, NULL));
    CHECK_NEAR(tc_tensor_item(o), 4.333333333333334, 1e-14);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_STD, y, -1, 0, 0, 0, &o, NULL));
    CHECK_NEAR(tc_tensor_item(o), 1.9930434571835665, 1e-14);
    tc_tensor_release(o);

    static const struct {
        double p, row[3], all;
    } norms[] = {
        {0, {4, 3, 4}, 11},
        {1, {7, 7.5, 6.5}, 21},
        {2, {3.9370039370059056, 4.8218253804964775, 3.774917217635375}, 7.280109889280518},
        {3, {3.37665670834691, 4.320061298855844, 3.305744509228972}, 5.374571806523919},
        {INFINITY, {3, 4, 3}, 4},
        {-INFINITY, {0.5, 0, 0.5}, 0},
        {0.5, {25.78726233817546, 20.98683298050514, 23.55521153060658}, 210.61631352422202},
    };
    for (size_t t = 0; t < sizeof norms / sizeof norms[0]; t++) {
        o = NULL;
        CHECK_OK(reduce2(TC_OP_NORM, y, 1, 0, 0, norms[t].p, &o, NULL));
        for (int i = 0; i < 3; i++) CHECK_NEAR(ct_at(o, i), norms[t].row[i], 1e-12);
        tc_tensor_release(o);
        o = NULL;
        CHECK_OK(reduce2(TC_OP_NORM, y, -1, 0, 0, norms[t].p, &o, NULL));
        CHECK_NEAR(tc_tensor_item(o), norms[t].all, 1e-12);
        tc_tensor_release(o);
    }

    o = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, y, 1, 0, 0, 0, &o, &ix));
    CHECK(ix->dtype == TC_I64 && ct_shape_is(ix, 1, SZ(3)));
    CHECK(ct_at(o, 0) == 3 && ct_at(o, 1) == 4 && ct_at(o, 2) == 2);
    CHECK(ct_at(ix, 0) == 2 && ct_at(ix, 1) == 0 && ct_at(ix, 2) == 1);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MIN, y, 0, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == -3 && ct_at(o, 1) == -2 && ct_at(o, 2) == -1 && ct_at(o, 3) == -0.5);
    CHECK(ct_at(ix, 0) == 2 && ct_at(ix, 1) == 0 && ct_at(ix, 2) == 1 && ct_at(ix, 3) == 2);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    /* a full max gives only the value: the second slot stays empty */
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, y, -1, 0, 0, 0, &o, &ix));
    CHECK(o->ndim == 0 && tc_tensor_item(o) == 4 && ix == NULL);
    tc_tensor_release(o);
    tc_tensor_release(y);
}

TEST(reduce_max_min_nan_and_first_occurrence)
{
    tc_tensor *x = ct_from(TC_F32, 2, SZ(2, 4), VALS(1, 5, 5, 2, NAN, 3, NAN, 0)), *o = NULL, *ix = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, x, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == 5 && isnan(ct_at(o, 1)));
    CHECK(ct_at(ix, 0) == 1 && ct_at(ix, 1) == 0);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MIN, x, 1, 1, 0, 0, &o, &ix));
    CHECK(ct_shape_is(o, 2, SZ(2, 1)) && ct_at(o, 0) == 1 && isnan(ct_at(o, 1)) && ct_at(ix, 1) == 0);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    /* along dim 0 (the column path): NaN in row 1 wins in columns 0 and 2 */
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, x, 0, 0, 0, 0, &o, &ix));
    CHECK(isnan(ct_at(o, 0)) && ct_at(o, 1) == 5 && isnan(ct_at(o, 2)) && ct_at(o, 3) == 2);
    CHECK(ct_at(ix, 0) == 1 && ct_at(ix, 1) == 0 && ct_at(ix, 2) == 1 && ct_at(ix, 3) == 0);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    CHECK_OK(reduce1(TC_OP_MAX, x, -1, 0, &o));
    CHECK(isnan(tc_tensor_item(o)));
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, x, -1, 0, &o));
    CHECK(isnan(tc_tensor_item(o)));
    tc_tensor_release(o);
    o = NULL; /* norm inf = max |x| propagates NaN too; row 0 has none */
    CHECK_OK(reduce2(TC_OP_NORM, x, 1, 0, 0, INFINITY, &o, NULL));
    CHECK(ct_at(o, 0) == 5 && isnan(ct_at(o, 1)));
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_NORM, x, 0, 0, 0, -INFINITY, &o, NULL));
    CHECK(isnan(ct_at(o, 0)) && ct_at(o, 1) == 3 && ct_at(o, 3) == 0);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_NORM, x, -1, 0, 0, INFINITY, &o, NULL));
    CHECK(isnan(tc_tensor_item(o)));
    tc_tensor_release(o);
    tc_tensor_release(x);
}

/* ---- sweeps against the reference -------------------------------------------------------------- */

static const int64_t sweep_dims[] = {-1, 0, 1, 2, -2, -3};

static int sweep_float(const tc_tensor *x, double tol)
{
    static const tc_op ops[] = {TC_OP_SUM, TC_OP_PROD, TC_OP_MEAN, TC_OP_MAX, TC_OP_MIN};
    static const double ps[] = {0, 1, 2, 3, INFINITY, -INFINITY, 0.5};
    int ok = 1;
    for (int di = 0; di < 6; di++)
        for (int keep = 0; keep < 2; keep++) {
            int64_t dim = sweep_dims[di];
            for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) ok &= check_reduce(ops[i], x, dim, keep, 0, 0, tol);
            for (int unb = 0; unb < 2; unb++) {
                ok &= check_reduce(TC_OP_VAR, x, dim, keep, unb, 0, tol);
                ok &= check_reduce(TC_OP_STD, x, dim, keep, unb, 0, tol);
            }
            for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) ok &= check_reduce(TC_OP_NORM, x, dim, keep, 0, ps[i], tol);
        }
    return ok;
}

TEST(reduce_sweep_float_contiguous_and_transposed)
{
    for (int f = 0; f < 2; f++) {
        tc_dtype dt = f ? TC_F32 : TC_F64;
        double tol = f ? 2e-6 : 1e-12;
        tc_tensor *x = wave_tensor(dt, 3, SZ(3, 5, 7));
        CHECK(sweep_float(x, tol));
        /* (5,3,7) transposed to (3,5,7): outer dims swapped, inner contiguous (cols path) */
        tc_tensor *b = wave_tensor(dt, 3, SZ(5, 3, 7)), *bt = ct_transposed(b, 0, 1);
        CHECK(bt && !tc_tensor_is_contiguous(bt) && ct_shape_is(bt, 3, SZ(3, 5, 7)));
        CHECK(sweep_float(bt, tol));
        /* (7,5,3) transposed to (3,5,7): the innermost dim has stride 15 */
        tc_tensor *c = wave_tensor(dt, 3, SZ(7, 5, 3)), *ctr = ct_transposed(c, 0, 2);
        CHECK(sweep_float(ctr, tol));
        tc_tensor_release(x);
        tc_tensor_release(b);
        tc_tensor_release(bt);
        tc_tensor_release(c);
        tc_tensor_release(ctr);
    }
}

TEST(reduce_sweep_integer_dtypes)
{
    static const tc_dtype dts[] = {TC_U8, TC_I8, TC_I16, TC_I32, TC_I64};
    static const tc_op ops[] = {TC_OP_SUM, TC_OP_PROD, TC_OP_MAX, TC_OP_MIN};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        int64_t n = 3 * 5 * 7;
        double v[105];
        for (int64_t i = 0; i < n; i++) v[i] = dts[t] == TC_U8 ? (double)((i * 37) % 251) : (double)((i * 5) % 7 - 3);
        tc_tensor *x = ct_from(dts[t], 3, SZ(3, 5, 7), v), *b = ct_from(dts[t], 3, SZ(5, 3, 7), v);
        tc_tensor *bt = ct_transposed(b, 0, 1);
        for (int di = 0; di < 6; di++)
            for (int keep = 0; keep < 2; keep++)
                for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
                    CHECK(check_reduce(ops[i], x, sweep_dims[di], keep, 0, 0, 0));
                    CHECK(check_reduce(ops[i], bt, sweep_dims[di], keep, 0, 0, 0));
                }
        tc_tensor_release(x);
        tc_tensor_release(b);
        tc_tensor_release(bt);
    }
}

TEST(reduce_integer_results_are_int64_and_exact)
{
    tc_tensor *u = ct_from(TC_U8, 1, SZ(3), VALS(200, 100, 255)), *o = NULL;
    CHECK_OK(reduce1(TC_OP_SUM, u, 0, 0, &o)); /* no wrap at 256: the sum is int64 */
    CHECK(o->dtype == TC_I64 && o->ndim == 0 && tc_tensor_item(o) == 555);
    tc_tensor_release(o);
    tc_tensor_release(u);
    /* int64 sums never pass through double: 2^62 + 1 - 2^62 + 3 is exactly 4 */
    tc_tensor *big = NULL;
    CHECK_OK(tc_tensor_new(TC_I64, 1, SZ(4), &big));
    int64_t *bp = tc_tensor_data(big);
    bp[0] = (int64_t)1 << 62, bp[1] = 1, bp[2] = -((int64_t)1 << 62), bp[3] = 3;
    CHECK_OK(reduce1(TC_OP_SUM, big, -1, 0, &o));
    CHECK(*(int64_t *)tc_tensor_data(o) == 4);
    tc_tensor_release(o);
    bp[0] = ((int64_t)1 << 62) + 1; /* max keeps the exact int64 value */
    CHECK_OK(reduce1(TC_OP_MAX, big, -1, 0, &o));
    CHECK(o->dtype == TC_I64 && *(int64_t *)tc_tensor_data(o) == ((int64_t)1 << 62) + 1);
    tc_tensor_release(o);
    tc_tensor_release(big);
    tc_tensor *i8 = ct_from(TC_I8, 2, SZ(2, 3), VALS(-100, 100, 7, 2, 3, -4)), *ix = NULL;
    CHECK_OK(reduce1(TC_OP_PROD, i8, 0, 0, &o));
    CHECK(o->dtype == TC_I64 && ct_at(o, 0) == -200 && ct_at(o, 1) == 300 && ct_at(o, 2) == -28);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_MIN, i8, 1, 0, 0, 0, &o, &ix));
    CHECK(o->dtype == TC_I8 && ct_at(o, 0) == -100 && ct_at(o, 1) == -4 && ct_at(ix, 0) == 0 && ct_at(ix, 1) == 2);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor_release(i8);
    tc_tensor *b = ct_from(TC_BOOL, 2, SZ(2, 3), VALS(1, 0, 1, 1, 1, 0));
    CHECK_OK(reduce1(TC_OP_SUM, b, 1, 0, &o));
    CHECK(o->dtype == TC_I64 && ct_at(o, 0) == 2 && ct_at(o, 1) == 2);
    tc_tensor_release(o);
    tc_tensor_release(b);
}

TEST(reduce_all_any)
{
    tc_tensor *m = ct_from(TC_U8, 2, SZ(2, 3), VALS(1, 0, 7, 1, 1, 1)), *o = NULL;
    CHECK_OK(reduce1(TC_OP_ALL, m, 1, 0, &o));
    CHECK(o->dtype == TC_U8 && ct_at(o, 0) == 0 && ct_at(o, 1) == 1);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_ANY, m, 0, 1, &o));
    CHECK(ct_shape_is(o, 2, SZ(1, 3)) && ct_at(o, 0) == 1 && ct_at(o, 1) == 1 && ct_at(o, 2) == 1);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_ALL, m, -1, 0, &o));
    CHECK(tc_tensor_item(o) == 0);
    tc_tensor_release(o);
    tc_tensor_release(m);
    tc_tensor *z = ct_from(TC_BOOL, 1, SZ(3), VALS(0, 0, 0));
    CHECK_OK(reduce1(TC_OP_ANY, z, -1, 0, &o));
    CHECK(o->dtype == TC_U8 && tc_tensor_item(o) == 0);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_ANY, z, 0, 0, &o));
    CHECK(tc_tensor_item(o) == 0);
    tc_tensor_release(o);
    tc_tensor_release(z);
}

TEST(reduce_half_inputs)
{
    tc_tensor *h = ct_from(TC_F16, 2, SZ(2, 3), VALS(0.5, 1.25, -2, 3, 4.5, 0.25)), *o = NULL, *ix = NULL;
    CHECK_OK(reduce1(TC_OP_SUM, h, 1, 0, &o));
    CHECK(o->dtype == TC_F16 && ct_shape_is(o, 1, SZ(2)) && ct_at(o, 0) == -0.25 && ct_at(o, 1) == 7.75);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_MEAN, h, 0, 0, &o));
    CHECK(ct_at(o, 0) == 1.75 && ct_at(o, 1) == 2.875 && ct_at(o, 2) == -0.875);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, h, 1, 0, 0, 0, &o, &ix));
    CHECK(o->dtype == TC_F16 && ct_at(o, 0) == 1.25 && ct_at(o, 1) == 4.5 && ct_at(ix, 0) == 1 && ct_at(ix, 1) == 1);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor *bf = ct_from(TC_BF16, 1, SZ(4), VALS(3, 4, 0, 0));
    o = NULL;
    CHECK_OK(reduce2(TC_OP_NORM, bf, -1, 0, 0, 2, &o, NULL));
    CHECK(o->dtype == TC_BF16 && tc_tensor_item(o) == 5);
    tc_tensor_release(o);
    tc_tensor_release(bf);
    tc_tensor_release(h);
}

TEST(reduce_empty_dims)
{
    tc_tensor *e = NULL, *o = NULL, *ix = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 2, SZ(0, 3), &e));
    CHECK_OK(reduce1(TC_OP_SUM, e, 0, 0, &o));
    CHECK(ct_shape_is(o, 1, SZ(3)) && ct_at(o, 0) == 0 && ct_at(o, 2) == 0);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_PROD, e, 0, 0, &o));
    CHECK(ct_at(o, 0) == 1 && ct_at(o, 2) == 1);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_MEAN, e, 0, 0, &o));
    CHECK(isnan(ct_at(o, 1)));
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_VAR, e, 0, 0, &o));
    CHECK(isnan(ct_at(o, 1)));
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_SUM, e, -1, 0, &o));
    CHECK(o->ndim == 0 && tc_tensor_item(o) == 0);
    tc_tensor_release(o);
    o = NULL;
    CHECK_ERR(reduce2(TC_OP_MAX, e, 0, 0, 0, 0, &o, &ix), TC_ERR_SHAPE, "max: cannot reduce an empty dim");
    CHECK_ERR(reduce2(TC_OP_MIN, e, -1, 0, 0, 0, &o, &ix), TC_ERR_SHAPE, "min: cannot reduce an empty dim");
    CHECK(o == NULL && ix == NULL);
    /* along the non-empty dim the result is simply empty */
    CHECK_OK(reduce2(TC_OP_MAX, e, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_shape_is(o, 1, SZ(0)) && ct_shape_is(ix, 1, SZ(0)));
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor_release(e);
    tc_tensor *m = NULL;
    CHECK_OK(tc_tensor_new(TC_U8, 2, SZ(2, 0), &m));
    CHECK_OK(reduce1(TC_OP_ALL, m, 1, 0, &o));
    CHECK(ct_at(o, 0) == 1 && ct_at(o, 1) == 1);
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_ANY, m, 1, 0, &o));
    CHECK(ct_at(o, 0) == 0 && ct_at(o, 1) == 0);
    tc_tensor_release(o);
    tc_tensor_release(m);
    /* var of a single element, unbiased: NaN (n - 1 = 0), biased: 0 */
    tc_tensor *one = ct_from(TC_F64, 1, SZ(1), VALS(5));
    o = NULL;
    CHECK_OK(reduce2(TC_OP_VAR, one, 0, 0, 1, 0, &o, NULL));
    CHECK(isnan(tc_tensor_item(o)));
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_VAR, one, 0, 0, 0, 0, &o, NULL));
    CHECK(tc_tensor_item(o) == 0);
    tc_tensor_release(o);
    tc_tensor_release(one);
}

TEST(reduce_zero_dim_input_and_given_results)
{
    tc_tensor *s = ct_from(TC_F32, 0, SZ(1), VALS(2.5)), *o = NULL;
    CHECK_OK(reduce1(TC_OP_SUM, s, 0, 0, &o));
    CHECK(o->ndim == 0 && tc_tensor_item(o) == 2.5);
    tc_tensor_release(o);
    tc_tensor_release(s);
    /* a given result of the wrong size is resized; a transposed result is written through
     * its strides */
    tc_tensor *x = ct_arange(TC_F64, 3, SZ(2, 3, 4));
    tc_tensor *r = ct_from(TC_F64, 1, SZ(5), VALS(9, 9, 9, 9, 9));
    CHECK_OK(reduce2(TC_OP_SUM, x, 1, 0, 1, 0, &r, NULL));
    CHECK(ct_shape_is(r, 2, SZ(2, 4)) && ct_at(r, 0) == 12 && ct_at(r, 7) == 57);
    tc_tensor *base = ct_from(TC_F64, 2, SZ(4, 2), VALS(0, 0, 0, 0, 0, 0, 0, 0)), *rt = ct_transposed(base, 0, 1);
    tc_tensor *keep_rt = rt;
    CHECK_OK(reduce2(TC_OP_SUM, x, 1, 0, 1, 0, &rt, NULL));
    CHECK(rt == keep_rt && ct_shape_is(rt, 2, SZ(2, 4)) && !tc_tensor_is_contiguous(rt));
    CHECK(ct_at(rt, 0) == 12 && ct_at(rt, 3) == 21 && ct_at(rt, 4) == 48 && ct_at(rt, 7) == 57);
    CHECK(ct_at(base, 1) == 48); /* base (4,2) holds the result transposed */
    tc_tensor_release(rt);
    tc_tensor_release(base);
    tc_tensor_release(r);
    tc_tensor_release(x);
}

/* ---- large tensors: the parallel paths ------------------------------------------------------- */

static uint64_t lcg_state;
static double lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) / 9007199254740992.0 * 2 - 1;
}

TEST(reduce_big_sum_matches_double_reference)
{
    int64_t n = 1 << 20;
    tc_tensor *x = NULL, *o = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(n), &x));
    float *p = tc_tensor_data(x);
    double ref = 0, ref_abs = 0;
    lcg_state = 42;
    for (int64_t i = 0; i < n; i++) p[i] = (float)(lcg() + 0.25), ref += p[i], ref_abs += fabs(p[i]);
    CHECK_OK(reduce1(TC_OP_SUM, x, -1, 0, &o));
    CHECK_NEAR(tc_tensor_item(o), ref, fabs(ref) * 2e-7); /* one f32 rounding of a double sum */
    tc_tensor_release(o);
    CHECK_OK(reduce1(TC_OP_MEAN, x, 0, 0, &o));
    CHECK_NEAR(tc_tensor_item(o), ref / (double)n, 1e-7 * fabs(ref / (double)n) * 2);
    tc_tensor_release(o);
    o = NULL;
    CHECK_OK(reduce2(TC_OP_NORM, x, -1, 0, 0, 1, &o, NULL));
    CHECK_NEAR(tc_tensor_item(o), ref_abs, ref_abs * 2e-7);
    tc_tensor_release(o);
    /* the split into chunks is fixed, so one thread and two give the same bits */
    int threads = tc_get_num_threads();
    tc_tensor *o1 = NULL, *o2 = NULL;
    tc_set_num_threads(1);
    CHECK_OK(reduce1(TC_OP_SUM, x, -1, 0, &o1));
    tc_set_num_threads(2);
    CHECK_OK(reduce1(TC_OP_SUM, x, -1, 0, &o2));
    tc_set_num_threads(threads);
    CHECK(tc_tensor_item(o1) == tc_tensor_item(o2));
    tc_tensor_release(o1);
    tc_tensor_release(o2);
    /* a transposed view (non-contiguous full reduction) gives the same sum */
    tc_tensor *v = NULL;
    tc_params vp = {.nshape = 2, .shape = {1024, 1024}};
    CHECK_OK(tc_op_run(TC_OP_VIEW, (const tc_tensor *const *)&x, 1, &vp, &v, 1));
    tc_tensor *vt = ct_transposed(v, 0, 1);
    CHECK_OK(reduce1(TC_OP_SUM, vt, -1, 0, &o));
    CHECK_NEAR(tc_tensor_item(o), ref, fabs(ref) * 2e-7);
    tc_tensor_release(o);
    tc_tensor_release(vt);
    tc_tensor_release(v);
    tc_tensor_release(x);
    /* more elements than chunks allowed at the base chunk size: larger chunks, same sum */
    int64_t nb = 5 << 20;
    tc_tensor *u = NULL;
    CHECK_OK(tc_tensor_new(TC_U8, 1, SZ(nb), &u));
    uint8_t *up = tc_tensor_data(u);
    int64_t uref = 0;
    for (int64_t i = 0; i < nb; i++) up[i] = (uint8_t)(i % 251), uref += up[i];
    CHECK_OK(reduce1(TC_OP_SUM, u, -1, 0, &o));
    CHECK(o->dtype == TC_I64 && *(int64_t *)tc_tensor_data(o) == uref);
    tc_tensor_release(o);
    tc_tensor_release(u);
}

/* Large shapes chosen to hit each driver: rows (long inner rows), cols (reduce dim 0 of a
 * wide matrix), split per output (few outputs over a long dim), checked with the reference. */
TEST(reduce_big_paths_match_reference)
{
    static const int64_t shapes[][2] = {{300, 4096}, {4096, 300}, {2, 70000}, {70000, 3}};
    static const tc_op ops[] = {TC_OP_SUM, TC_OP_VAR, TC_OP_MAX, TC_OP_MIN, TC_OP_NORM};
    for (int s = 0; s < 4; s++) {
        tc_tensor *x = NULL;
        CHECK_OK(tc_tensor_new(TC_F64, 2, shapes[s], &x));
        double *p = tc_tensor_data(x);
        lcg_state = 7 + (uint64_t)s;
        int64_t n = shapes[s][0] * shapes[s][1];
        for (int64_t i = 0; i < n; i++) p[i] = lcg();
        for (int d = 0; d < 2; d++)
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) CHECK(check_reduce(ops[o], x, d, 0, 1, 3, 1e-10));
        tc_tensor_release(x);
    }
    /* arg-max across chunk boundaries: ties keep the first, a NaN wins from its first place */
    tc_tensor *t = NULL, *o = NULL, *ix = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 2, SZ(70000, 2), &t));
    float *tp = tc_tensor_data(t);
    for (int64_t i = 0; i < 140000; i++) tp[i] = (float)(i % 1000) * 0.001f;
    tp[40000 * 2] = tp[50000 * 2] = 7;
    tp[20000 * 2 + 1] = 9, tp[60000 * 2 + 1] = NAN, tp[66000 * 2 + 1] = NAN;
    CHECK_OK(reduce2(TC_OP_MAX, t, 0, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == 7 && ct_at(ix, 0) == 40000 && isnan(ct_at(o, 1)) && ct_at(ix, 1) == 60000);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor *tt = ct_transposed(t, 0, 1); /* (2, 70000) with stride 2 along the long dim */
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, tt, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == 7 && ct_at(ix, 0) == 40000 && isnan(ct_at(o, 1)) && ct_at(ix, 1) == 60000);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    /* the same rows, contiguous (the two-pass lane search) */
    tc_tensor *tc = NULL;
    CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const *)&tt, 1, &(tc_params){.i = {-1}}, &tc, 1));
    CHECK(tc_tensor_is_contiguous(tc));
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, tc, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == 7 && ct_at(ix, 0) == 40000 && isnan(ct_at(o, 1)) && ct_at(ix, 1) == 60000);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MIN, tc, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == 0 && ct_at(ix, 0) == 0 && isnan(ct_at(o, 1)) && ct_at(ix, 1) == 60000);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor_release(tc);
    tc_tensor_release(tt);
    tc_tensor_release(t);
    /* a contiguous row long enough for lanes: -0.0 and 0.0 tie, the first one wins */
    double zv[40];
    for (int i = 0; i < 40; i++) zv[i] = -1 - i;
    zv[5] = -0.0, zv[20] = 0.0, zv[33] = -50;
    tc_tensor *z = ct_from(TC_F64, 2, SZ(1, 40), zv);
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MAX, z, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == 0 && signbit(ct_at(o, 0)) && ct_at(ix, 0) == 5);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MIN, z, 1, 0, 0, 0, &o, &ix));
    CHECK(ct_at(o, 0) == -50 && ct_at(ix, 0) == 33);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor_release(z);
    tc_tensor *zi = ct_from(TC_I16, 1, SZ(40), zv);
    o = ix = NULL;
    CHECK_OK(reduce2(TC_OP_MIN, zi, 0, 0, 0, 0, &o, &ix));
    CHECK(o->dtype == TC_I16 && ct_at(o, 0) == -50 && ct_at(ix, 0) == 33);
    tc_tensor_release(o);
    tc_tensor_release(ix);
    tc_tensor_release(zi);
}

/* ---- bad input -------------------------------------------------------------------------------- */

TEST(reduce_bad_input)
{
    tc_tensor *x = ct_arange(TC_F32, 2, SZ(2, 3)), *o = NULL, *ix = NULL;
    CHECK_ERR(reduce1(TC_OP_SUM, x, 2, 0, &o), TC_ERR_INDEX, "sum: dim 2 out of range for the 2-dim tensor (2,3)");
    CHECK_ERR(reduce1(TC_OP_MEAN, x, -3, 0, &o), TC_ERR_INDEX, "mean: dim -3 out of range");
    CHECK_ERR(reduce2(TC_OP_MAX, x, 5, 0, 0, 0, &o, &ix), TC_ERR_INDEX, "max: dim 5");
    CHECK_ERR(reduce2(TC_OP_NORM, x, 0, 0, 0, NAN, &o, NULL), TC_ERR_ARG, "norm: p is NaN");
    tc_tensor *xi = ct_arange(TC_I32, 2, SZ(2, 3));
    CHECK_ERR(reduce1(TC_OP_MEAN, xi, 0, 0, &o), TC_ERR_DTYPE, "mean: int32 tensors are not supported");
    CHECK_ERR(reduce1(TC_OP_ALL, xi, 0, 0, &o), TC_ERR_DTYPE, "all: input must be uint8 or bool, got int32");
    CHECK_ERR(reduce1(TC_OP_ANY, x, 0, 0, &o), TC_ERR_DTYPE, "any: float32 tensors are not supported");
    CHECK(o == NULL);
    /* result of the wrong dtype: refused, and left exactly as it was */
    tc_tensor *r = ct_from(TC_F64, 1, SZ(3), VALS(7, 8, 9));
    CHECK_ERR(reduce2(TC_OP_SUM, x, 0, 0, 0, 0, &r, NULL), TC_ERR_DTYPE, "sum: result 1 is float64, expected float32");
    CHECK(ct_shape_is(r, 1, SZ(3)) && ct_at(r, 0) == 7 && ct_at(r, 2) == 9);
    tc_tensor *ri = ct_from(TC_F32, 1, SZ(2), VALS(1, 1));
    CHECK_ERR(reduce2(TC_OP_SUM, xi, 1, 0, 0, 0, &ri, NULL), TC_ERR_DTYPE, "sum: result 1 is float32, expected int64");
    tc_tensor *vals = NULL, *badidx = ct_from(TC_I32, 1, SZ(2), VALS(4, 4));
    CHECK_ERR(reduce2(TC_OP_MAX, x, 1, 0, 0, 0, &vals, &badidx), TC_ERR_DTYPE, "max: result 2 is int32, expected int64");
    CHECK(vals == NULL && ct_at(badidx, 0) == 4);
    tc_tensor_release(badidx);
    tc_tensor_release(ri);
    tc_tensor_release(r);
    tc_tensor_release(xi);
    tc_tensor_release(x);
}
