/* gradcheck.c -- finite-difference checking of one gradient rule (see gradcheck.h).
 *
 * The context is built here the way the engine builds it, so a rule that reads a tensor
 * its save mask does not name finds NULL and fails in this test rather than in training.
 * Values are read and written through tc_tensor_get / tc_tensor_set_value so inputs of
 * any layout and dtype work; sizes are small in tests, so speed does not matter.
 */
#include "gradcheck.h"
#include "autograd/grad.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

static void unflat(const tc_tensor *t, int64_t flat, int64_t *idx)
{
    for (int d = t->ndim - 1; d >= 0; d--) idx[d] = flat % t->size[d], flat /= t->size[d];
}

static double get(const tc_tensor *t, int64_t flat)
{
    int64_t idx[TC_MAX_DIMS] = {0};
    unflat(t, flat, idx);
    double v = NAN;
    tc_tensor_get(t, idx, &v);
    return v;
}

static void set(tc_tensor *t, int64_t flat, double v)
{
    int64_t idx[TC_MAX_DIMS] = {0};
    unflat(t, flat, idx);
    tc_tensor_set_value(t, idx, v);
}

tc_tensor *gc_rand(tc_dtype dt, int ndim, const int64_t *sizes, double lo, double hi, uint64_t seed)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new(dt, ndim, sizes, &t)) return NULL;
    uint64_t s = seed * 2654435761ULL + 12345;
    int64_t n = tc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) set(t, i, lo + (hi - lo) * (double)(lcg(&s) % 1000003) / 1000003.0);
    return t;
}

/* A weight tensor like out (values in [-1, 1) away from 0); strided: a non-contiguous view. */
static tc_tensor *weight_like(const tc_tensor *out, int o, bool strided)
{
    tc_tensor *w = NULL;
    if (!strided || out->ndim == 0) {
        w = gc_rand((tc_dtype)out->dtype, out->ndim, out->size, -1, 1, 1000 + (uint64_t)o);
    } else { /* every other column of a tensor twice as wide */
        int64_t sz[TC_MAX_DIMS];
        for (int d = 0; d < out->ndim; d++) sz[d] = out->size[d];
        sz[out->ndim - 1] *= 2;
        tc_tensor *wide = gc_rand((tc_dtype)out->dtype, out->ndim, sz, -1, 1, 1000 + (uint64_t)o);
        if (!wide) return NULL;
        tc_params p = {.nshape = 2 * out->ndim};
        for (int d = 0; d < out->ndim; d++) p.shape[d] = out->size[d], p.shape[out->ndim + d] = wide->stride[d];
        p.shape[2 * out->ndim - 1] = 2;
        p.i[0] = wide->offset;
        tc_status s = tc_op_run(TC_OP_AS_STRIDED, (const tc_tensor *const *)&wide, 1, &p, &w, 1);
        tc_tensor_release(wide);
        if (s) return NULL;
    }
    if (!w) return NULL;
    /* keep weights away from 0 so every element's gradient matters */
    int64_t n = tc_tensor_numel(w);
    for (int64_t i = 0; i < n; i++) {
        double v = get(w, i);
        set(w, i, v < 0 ? v - 0.25 : v + 0.25);
    }
    return w;
}

static bool is_float(const tc_tensor *t) { return t && tc_dtype_is_float((tc_dtype)t->dtype); }

static tc_status run_rule(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **res,
                          int nout, const tc_tensor *const *gout, const bool *needs_in, tc_tensor **gin)
{
    const tc_grad_rule *rule = tc_grad_rule_of(op);
    if (!rule) return tc_set_error(TC_ERR_UNSUPPORTED, "%s: no gradient rule", tc_op_info(op)->name);
    enum { MAXIN = 128 };
    if (nin > MAXIN) return tc_set_error(TC_ERR_ARG, "gradcheck: at most %d inputs", MAXIN);
    const tc_tensor *sin[MAXIN] = {0}, *sout[2] = {0};
    tc_tmeta meta[MAXIN], ometa[2];
    memset(ometa, 0, sizeof ometa);
    bool needs[MAXIN];
    for (int i = 0; i < nin; i++) {
        bool saved = (rule->save & TC_SAVE_ALL_IN) || (i < 3 && (rule->save & (TC_SAVE_IN0 << i)));
        sin[i] = saved ? in[i] : NULL;
        if (in[i]) tc_tmeta_of(in[i], &meta[i]); /* absent optional inputs (rnn's states, biases) */
        else memset(&meta[i], 0, sizeof meta[i]);
        needs[i] = needs_in ? needs_in[i] : is_float(in[i]);
        gin[i] = NULL;
    }
    for (int o = 0; o < nout; o++) {
        if (res[o]) tc_tmeta_of(res[o], &ometa[o]);
        sout[o] = (rule->save & (TC_SAVE_OUT0 << o)) ? res[o] : NULL;
    }
    tc_grad_ctx c = {.op = op, .p = p ? p : &(tc_params){.s = {0}}, .nin = nin, .nout = nout, .in = sin, .out = sout,
                     .gout = gout, .needs = needs, .meta = meta, .out_meta = ometa};
    return rule->fn(&c, gin);
}

tc_status gc_run_rule(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p,
                      const tc_tensor *const *gout, const bool *needs, tc_tensor **gin)
{
    const tc_opinfo *info = tc_op_info(op);
    if (!info) return tc_set_error(TC_ERR_ARG, "gradcheck: unknown op");
    tc_tensor *res[2] = {NULL, NULL};
    TRY(tc_op_run(op, in, nin, p, res, info->nout));
    tc_status s = run_rule(op, in, nin, p, res, info->nout, gout, needs, gin);
    for (int o = 0; o < 2; o++)
        if (res[o]) tc_tensor_release(res[o]);
    return s;
}

/* L = sum_o sum(out_o * w_o) of one forward run, or NAN when the call fails. */
static double loss(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor *const *w, int nout)
{
    tc_tensor *res[2] = {NULL, NULL};
    if (tc_op_run(op, in, nin, p, res, nout)) return NAN;
    double L = 0;
    for (int o = 0; o < nout; o++) {
        if (!res[o]) continue;
        if (w[o]) {
            int64_t n = tc_tensor_numel(res[o]);
            if (n != tc_tensor_numel(w[o])) L = NAN; /* data-dependent size changed */
            for (int64_t e = 0; e < n && L == L; e++) L += get(res[o], e) * get(w[o], e);
        }
        tc_tensor_release(res[o]);
    }
    return L;
}

int gc_check(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, const gc_opts *opts)
{
    static const gc_opts defaults;
    const gc_opts *o = opts ? opts : &defaults;
    double eps = o->eps > 0 ? o->eps : 1e-6, atol = o->atol > 0 ? o->atol : 1e-6, rtol = o->rtol > 0 ? o->rtol : 1e-5;
    const tc_opinfo *info = tc_op_info(op);
    const char *name = info ? info->name : "?";
    enum { MAXIN = 128 };
    if (!info || nin > MAXIN) {
        printf("    gradcheck: bad op or too many inputs\n");
        return 1;
    }
    int nout = info->nout, failed = 0;
    tc_tensor *res[2] = {NULL, NULL}, *w[2] = {NULL, NULL}, *gin[MAXIN] = {0}, *cl[MAXIN] = {0};
    bool needs[MAXIN];
    for (int i = 0; i < nin; i++) needs[i] = o->wrt ? o->wrt[i] : is_float(in[i]);
    if (tc_op_run(op, in, nin, p, res, nout)) {
        printf("    gradcheck %s: forward failed: %s\n", name, tc_last_error());
        return 1;
    }
    for (int k = 0; k < nout; k++)
        if (is_float(res[k])) {
            w[k] = weight_like(res[k], k, o->strided_gout);
            if (!w[k]) failed = 1;
        }
    if (!failed && run_rule(op, in, nin, p, res, nout, (const tc_tensor *const *)w, needs, gin)) {
        printf("    gradcheck %s: rule failed: %s\n", name, tc_last_error());
        failed = 1;
    }
    for (int i = 0; i < nin && !failed; i++) { /* contiguous copies to perturb */
        tc_params cp = {.i = {-1}};
        if (tc_op_run(TC_OP_COPY, &in[i], 1, &cp, &cl[i], 1)) failed = 1;
    }
    for (int i = 0; i < nin && !failed; i++) {
        if (!needs[i]) continue;
        int64_t n = tc_tensor_numel(cl[i]);
        for (int64_t e = 0; e < n && !failed; e++) {
            double v = get(cl[i], e);
            set(cl[i], e, v + eps);
            double lp = loss(op, (const tc_tensor *const *)cl, nin, p, w, nout);
            set(cl[i], e, v - eps);
            double lm = loss(op, (const tc_tensor *const *)cl, nin, p, w, nout);
            set(cl[i], e, v);
            double num = (lp - lm) / (2 * eps), ana = gin[i] ? get(gin[i], e) : 0;
            if (!(fabs(ana - num) <= atol + rtol * fabs(num))) {
                if (!o->quiet)
                    printf("    gradcheck %s: input %d element %lld: rule gives %.10g, finite difference %.10g\n",
                           name, i + 1, (long long)e, ana, num);
                failed = 1;
            }
        }
    }
    for (int i = 0; i < nin; i++) {
        if (gin[i]) tc_tensor_release(gin[i]);
        if (cl[i]) tc_tensor_release(cl[i]);
    }
    for (int k = 0; k < 2; k++) {
        if (res[k]) tc_tensor_release(res[k]);
        if (w[k]) tc_tensor_release(w[k]);
    }
    return failed;
}
