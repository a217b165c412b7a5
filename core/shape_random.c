/* shape_random.c -- the prepare step of the random kind: which tensor each op fills, and
 * every parameter check, made before anything is allocated or a counter slot is used (so a
 * refused call leaves the generator where it was).
 *
 * Results: most ops fill the given tensor in place and keep its shape; randperm resizes it
 * to (n) (allocating int64 when none is given); multinomial returns int64 (samples) or
 * (batch, samples).
 */
#include "internal.h"
#include <math.h>
#include <stdio.h>

static void spec_one(tc_outspec *spec, int dtype, int ndim, const int64_t *sizes)
{
    spec->nout = 1;
    spec->dtype[0] = dtype;
    spec->ndim[0] = ndim;
    if (ndim > 0) memcpy(spec->size[0], sizes, sizeof(int64_t) * (size_t)ndim);
}

/* Largest integer n such that every integer in [0, n] is exact in the dtype. */
static double exact_int_limit(int dt)
{
    switch (dt) {
    case TC_F32: return 16777216.0;          /* 2^24 */
    case TC_F64: return 9007199254740992.0;  /* 2^53 */
    case TC_F16: return 2048.0;              /* 2^11 */
    case TC_BF16: return 256.0;              /* 2^8 */
    case TC_U8: return 255.0;
    case TC_I8: return 127.0;
    case TC_I16: return 32767.0;
    case TC_I32: return 2147483647.0;
    default: return 9223372036854775807.0; /* i64 (rounds to 2^63 as a double) */
    }
}

static double dtype_min(int dt)
{
    switch (dt) {
    case TC_U8: return 0;
    case TC_I8: return -128.0;
    case TC_I16: return -32768.0;
    case TC_I32: return -2147483648.0;
    case TC_I64: return -9223372036854775808.0;
    default: return -exact_int_limit(dt);
    }
}

/* A result written by several threads must not have two elements on one address: writing
 * into an expanded (stride 0) view would race and depend on the thread count. Sufficient
 * test: sorted by stride, each dim's stride exceeds the extent of the smaller ones. */
static tc_status check_no_overlap(const char *op, const tc_tensor *t)
{
    int64_t st[TC_MAX_DIMS], sz[TC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->size[d] > 1) st[n] = t->stride[d] < 0 ? -t->stride[d] : t->stride[d], sz[n++] = t->size[d];
    for (int i = 1; i < n; i++) /* insertion sort by stride: n <= 8 */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t a = st[j], b = sz[j];
            st[j] = st[j - 1], sz[j] = sz[j - 1];
            st[j - 1] = a, sz[j - 1] = b;
        }
    int64_t extent = 0;
    for (int i = 0; i < n; i++) {
        if (st[i] <= extent) {
            char b[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_ARG,
                                "%s: the result %s has overlapping elements (an expanded view); fill a "
                                "contiguous tensor instead",
                                op, tc_shape_str(t, b, sizeof b));
        }
        extent += (sz[i] - 1) * st[i];
    }
    return TC_OK;
}

/* Every element of p must lie in [lo, hi] (NaN fails). */
static tc_status check_values(const char *op, const char *what, const tc_tensor *p, double lo, double hi)
{
    if (tc_exec_shape_only) return TC_OK; /* undefined values: the graph run checks them */
    if (p->device != TC_CPU) { /* device values: checked on a host copy */
        tc_tensor *h;
        TRY(tc_host_values_for(op, p, &h));
        tc_status s = check_values(op, what, h, lo, hi);
        tc_tensor_release(h);
        return s;
    }
    tc_elem_iter it;
    tc_elem_iter_init(&it, p);
    char *e;
    int64_t i = 0;
    while ((e = tc_elem_iter_next(&it))) {
        double v = tc_load_as_double(p->dtype, e);
        if (!(v >= lo && v <= hi))
            return tc_set_error(TC_ERR_ARG, "%s: %s %g at element %lld is outside [%g, %g]", op, what, v,
                                (long long)i, lo, hi);
        i++;
    }
    return TC_OK;
}

static tc_status prepare_bernoulli(const tc_kcall *k, const tc_tensor *out)
{
    const tc_tensor *p = k->nin > 0 ? k->in[0] : NULL;
    if (!p) {
        double s0 = k->p->s[0];
        if (!(s0 >= 0 && s0 <= 1))
            return tc_set_error(TC_ERR_ARG, "bernoulli: probability %g is outside [0, 1]", s0);
        return TC_OK;
    }
    /* p broadcasts to the result, or (Torch7) has as many elements, read in row-major order */
    const tc_tensor *pair[2] = {out, p};
    int nd;
    int64_t sz[TC_MAX_DIMS];
    bool bcast = tc_broadcast_shapes(NULL, pair, 2, &nd, sz) == TC_OK && nd == out->ndim &&
                 (nd == 0 || memcmp(sz, out->size, sizeof(int64_t) * (size_t)nd) == 0);
    if (!bcast && tc_tensor_numel(p) != tc_tensor_numel(out)) {
        char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
        return tc_set_error(TC_ERR_SHAPE, "bernoulli: probabilities %s do not fit the result %s",
                            tc_shape_str(p, b1, sizeof b1), tc_shape_str(out, b2, sizeof b2));
    }
    return check_values("bernoulli", "probability", p, 0, 1);
}

static tc_status prepare_random_int(const tc_kcall *k, const tc_tensor *out)
{
    double lo = k->p->s[0], hi = k->p->s[1];
    if (!(hi > lo)) return TC_OK; /* the dtype's full non-negative range */
    if (lo != floor(lo) || hi != floor(hi) || !isfinite(lo) || !isfinite(hi))
        return tc_set_error(TC_ERR_ARG, "random: bounds [%g, %g) must be integers", lo, hi);
    double mn = dtype_min(out->dtype), mx = exact_int_limit(out->dtype);
    if (lo < mn || hi - 1 > mx)
        return tc_set_error(TC_ERR_ARG, "random: range [%.17g, %.17g) does not fit in %s (values %.17g..%.17g)",
                            lo, hi, tc_dtype_name((tc_dtype)out->dtype), mn, mx);
    return TC_OK;
}

/* probs (n) or (b, n): finite, non-negative, each row with a positive sum; without
 * replacement each row needs at least `samples` non-zero categories. */
static tc_status prepare_multinomial(const tc_kcall *k, tc_outspec *spec)
{
    const tc_tensor *p = k->nin > 0 ? k->in[0] : NULL;
    char b[TC_SHAPE_BUF];
    if (!p) return tc_set_error(TC_ERR_ARG, "multinomial: needs a probability tensor");
    if (!tc_dtype_is_float((tc_dtype)p->dtype))
        return tc_set_error(TC_ERR_DTYPE, "multinomial: probabilities must be a float type, got %s",
                            tc_dtype_name((tc_dtype)p->dtype));
    if (p->ndim != 1 && p->ndim != 2)
        return tc_set_error(TC_ERR_SHAPE, "multinomial: probabilities must be 1-D or 2-D, got %s",
                            tc_shape_str(p, b, sizeof b));
    if (p->device != TC_CPU && !tc_exec_shape_only) { /* the weights are checked on a host copy */
        tc_tensor *h;
        TRY(tc_host_values_for("multinomial", p, &h));
        const tc_tensor *in[1] = {h};
        tc_kcall k2 = *k;
        k2.in = in;
        tc_status s = prepare_multinomial(&k2, spec);
        tc_tensor_release(h);
        return s;
    }
    int64_t rows = p->ndim == 2 ? p->size[0] : 1, ncat = p->size[p->ndim - 1];
    int64_t samples = k->p->i[0];
    bool repl = k->p->i[1] != 0;
    if (ncat < 1) return tc_set_error(TC_ERR_SHAPE, "multinomial: no categories in %s", tc_shape_str(p, b, sizeof b));
    if (samples < 1)
        return tc_set_error(TC_ERR_ARG, "multinomial: number of samples must be positive, got %lld",
                            (long long)samples);
    if (!repl && samples > ncat)
        return tc_set_error(TC_ERR_ARG,
                            "multinomial: cannot draw %lld samples from %lld categories without replacement",
                            (long long)samples, (long long)ncat);
    int64_t es = tc_elsize(p->dtype), rs = p->ndim == 2 ? p->stride[0] : 0, cs = p->stride[p->ndim - 1];
    const char *base = tc_base(p);
    for (int64_t r = 0; r < rows && !tc_exec_shape_only; r++) { /* shape-only: values undefined */
        double sum = 0;
        int64_t nonzero = 0;
        for (int64_t j = 0; j < ncat; j++) {
            double v = tc_load_as_double(p->dtype, base + (r * rs + j * cs) * es);
            if (!(v >= 0) || !isfinite(v))
                return tc_set_error(TC_ERR_ARG, "multinomial: probability %g (row %lld, category %lld) must be "
                                    "finite and non-negative", v, (long long)r, (long long)j);
            sum += v;
            nonzero += v > 0;
        }
        if (!(sum > 0) || !isfinite(sum))
            return tc_set_error(TC_ERR_ARG, "multinomial: row %lld has probabilities summing to %g", (long long)r,
                                sum);
        if (!repl && nonzero < samples)
            return tc_set_error(TC_ERR_ARG,
                                "multinomial: row %lld has %lld non-zero categories, cannot draw %lld samples "
                                "without replacement", (long long)r, (long long)nonzero, (long long)samples);
    }
    int64_t sz[2] = {rows, samples};
    if (p->ndim == 1) spec_one(spec, TC_I64, 1, &samples);
    else spec_one(spec, TC_I64, 2, sz);
    return TC_OK;
}

static tc_status prepare_randperm(const tc_kcall *k, tc_outspec *spec)
{
    int64_t n = k->p->i[0];
    const tc_tensor *out = k->out[0];
    int dt = out ? out->dtype : TC_I64;
    if (n < 0) return tc_set_error(TC_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
    if (n > 0 && (double)(n - 1) > exact_int_limit(dt))
        return tc_set_error(TC_ERR_ARG, "randperm: n = %lld does not fit in %s", (long long)n,
                            tc_dtype_name((tc_dtype)dt));
    spec_one(spec, dt, 1, &n);
    return TC_OK;
}

tc_status tc_prepare_random(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    if (k->op == TC_OP_MULTINOMIAL) return prepare_multinomial(k, spec);
    if (k->op == TC_OP_RANDPERM) return prepare_randperm(k, spec);
    const tc_tensor *out = k->out[0];
    if (!out) return tc_set_error(TC_ERR_ARG, "%s: needs a result tensor to fill", op);
    double s0 = k->p->s[0], s1 = k->p->s[1];
    switch (k->op) {
    case TC_OP_UNIFORM:
        if (!(s0 <= s1) || !isfinite(s0) || !isfinite(s1))
            return tc_set_error(TC_ERR_ARG, "uniform: needs finite bounds with a <= b, got [%g, %g)", s0, s1);
        break;
    case TC_OP_NORMAL:
    case TC_OP_LOG_NORMAL:
        if (!(s1 >= 0) || !isfinite(s0) || !isfinite(s1))
            return tc_set_error(TC_ERR_ARG, "%s: needs a finite mean and std >= 0, got mean %g std %g", op, s0, s1);
        break;
    case TC_OP_EXPONENTIAL:
        if (!(s0 > 0) || !isfinite(s0))
            return tc_set_error(TC_ERR_ARG, "exponential: rate (lambda) must be positive and finite, got %g", s0);
        break;
    case TC_OP_CAUCHY:
        if (!(s1 > 0) || !isfinite(s0) || !isfinite(s1))
            return tc_set_error(TC_ERR_ARG, "cauchy: needs a finite median and sigma > 0, got median %g sigma %g",
                                s0, s1);
        break;
    case TC_OP_GEOMETRIC:
        if (!(s0 > 0 && s0 <= 1))
            return tc_set_error(TC_ERR_ARG, "geometric: probability %g is outside (0, 1]", s0);
        break;
    case TC_OP_BERNOULLI: TRY(prepare_bernoulli(k, out)); break;
    case TC_OP_RANDOM: TRY(prepare_random_int(k, out)); break;
    default: return tc_set_error(TC_ERR_INTERNAL, "%s: not a random op", op);
    }
    TRY(check_no_overlap(op, out));
    spec_one(spec, out->dtype, out->ndim, out->size);
    return TC_OK;
}
