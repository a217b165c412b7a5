/* shape_optim.c -- the prepare step of the OPTIM kind: adam_step, sgd_step, rmsprop_step,
 * adagrad_step, adamax_step and adadelta_step (ops.def documents inputs, params, outputs).
 *
 * Every check a kernel could fail on is made here, so the CPU kernel and the CUDA launcher
 * only compute: x is a float tensor with storage; g has x's size and dtype; Adam's state is
 * (K, numel(x)) with K = 2, or 3 with amsgrad, RMSprop's (K, numel(x)) with one row more
 * when centered and one more with momentum, Adamax's and Adadelta's (2, numel(x)), SGD's
 * momentum buffer and Adagrad's sum have x's size, all in x's dtype; scal is a float64
 * vector of 4 (Adam), 2 (SGD) or 3 (the others) values; the betas, momentum, dampening,
 * alpha and rho are numbers in range. Messages
 * name the op and the sizes: "adam_step: state (2,5) must be (3,6) (m, v and vmax of x (2,3))".
 */
#include "internal.h"
#include <math.h>

static tc_status same_as_x(const char *op, const char *what, const tc_tensor *t, const tc_tensor *x)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (!tc_same_shape(t, x) || !t->storage)
        return tc_set_error(TC_ERR_SHAPE, "%s: %s %s must have the size of x %s", op, what,
                            tc_shape_str(t, b1, sizeof b1), tc_shape_str(x, b2, sizeof b2));
    if (t->dtype != x->dtype)
        return tc_set_error(TC_ERR_DTYPE, "%s: %s is %s but x is %s", op, what, tc_dtype_name((tc_dtype)t->dtype),
                            tc_dtype_name((tc_dtype)x->dtype));
    return TC_OK;
}

static tc_status want_scal(const char *op, const tc_tensor *scal, int64_t n, const char *names)
{
    char b[TC_SHAPE_BUF];
    if (scal->ndim != 1 || scal->size[0] != n || !scal->storage)
        return tc_set_error(TC_ERR_SHAPE, "%s: scal %s must be a vector of %lld per-step scalars (%s)", op,
                            tc_shape_str(scal, b, sizeof b), (long long)n, names);
    if (scal->dtype != TC_F64)
        return tc_set_error(TC_ERR_DTYPE, "%s: scal is %s, expected float64", op, tc_dtype_name((tc_dtype)scal->dtype));
    return TC_OK;
}

static tc_status want_fraction(const char *op, const char *what, double v)
{
    if (!(v >= 0 && v < 1)) return tc_set_error(TC_ERR_ARG, "%s: %s must be in [0, 1), got %g", op, what, v);
    return TC_OK;
}

static tc_status want_finite(const char *op, const char *what, double v)
{
    if (!isfinite(v)) return tc_set_error(TC_ERR_ARG, "%s: %s must be a finite number, got %g", op, what, v);
    return TC_OK;
}

static tc_status want_flag(const char *op, const char *what, int64_t v)
{
    if (v != 0 && v != 1) return tc_set_error(TC_ERR_ARG, "%s: %s must be 0 or 1, got %lld", op, what, (long long)v);
    return TC_OK;
}

static tc_status want_momentum(const char *op, double mom)
{
    if (!(mom >= 0) || isinf(mom)) return tc_set_error(TC_ERR_ARG, "%s: momentum must be a number >= 0, got %g", op, mom);
    return TC_OK;
}

/* A state of K rows of numel(x) values in x's dtype; rows names them for the message. */
static tc_status want_rows(const char *op, const tc_tensor *st, const tc_tensor *x, int64_t K, const char *rows)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    int64_t n = tc_tensor_numel(x);
    if (st->ndim != 2 || st->size[0] != K || st->size[1] != n || !st->storage)
        return tc_set_error(TC_ERR_SHAPE, "%s: state %s must be (%lld,%lld) (%s of x %s)", op,
                            tc_shape_str(st, b1, sizeof b1), (long long)K, (long long)n, rows,
                            tc_shape_str(x, b2, sizeof b2));
    if (st->dtype != x->dtype)
        return tc_set_error(TC_ERR_DTYPE, "%s: state is %s but x is %s", op, tc_dtype_name((tc_dtype)st->dtype),
                            tc_dtype_name((tc_dtype)x->dtype));
    return TC_OK;
}

tc_status tc_prepare_optim(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    const tc_tensor *x = k->in[0], *g = k->in[1], *st = k->in[2], *scal = k->in[3];
    if (!x->storage) return tc_set_error(TC_ERR_ARG, "%s: x has no storage", op);
    TRY(same_as_x(op, "gradient", g, x));
    switch (k->op) {
    case TC_OP_ADAM_STEP: {
        TRY(want_flag(op, "amsgrad", k->p->i[0]));
        TRY(want_fraction(op, "beta1", k->p->s[0]));
        TRY(want_fraction(op, "beta2", k->p->s[1]));
        bool ams = k->p->i[0] == 1;
        TRY(want_rows(op, st, x, 2 + ams, ams ? "m, v and vmax" : "m, v"));
        TRY(want_scal(op, scal, 4, "step, eps, keep, wd"));
        break;
    }
    case TC_OP_SGD_STEP: {
        TRY(want_momentum(op, k->p->s[0]));
        TRY(want_finite(op, "dampening", k->p->s[1]));
        TRY(want_flag(op, "nesterov", k->p->i[0]));
        TRY(same_as_x(op, "momentum buffer", st, x));
        TRY(want_scal(op, scal, 2, "-lr, wd"));
        break;
    }
    case TC_OP_RMSPROP_STEP: {
        TRY(want_finite(op, "alpha", k->p->s[0]));
        TRY(want_momentum(op, k->p->s[1]));
        TRY(want_flag(op, "centered", k->p->i[0]));
        bool centered = k->p->i[0] == 1, mom = k->p->s[1] > 0;
        static const char *const rows[2][2] = {{"sq", "sq and buf"}, {"sq and ga", "sq, ga and buf"}};
        TRY(want_rows(op, st, x, 1 + centered + mom, rows[centered][mom]));
        TRY(want_scal(op, scal, 3, "-lr, eps, wd"));
        break;
    }
    case TC_OP_ADAGRAD_STEP:
        TRY(same_as_x(op, "sum", st, x));
        TRY(want_scal(op, scal, 3, "-clr, eps, wd"));
        break;
    case TC_OP_ADAMAX_STEP:
        TRY(want_fraction(op, "beta1", k->p->s[0]));
        TRY(want_fraction(op, "beta2", k->p->s[1]));
        TRY(want_rows(op, st, x, 2, "m and u"));
        TRY(want_scal(op, scal, 3, "step, eps, wd"));
        break;
    default: /* adadelta_step */
        TRY(want_finite(op, "rho", k->p->s[0]));
        TRY(want_rows(op, st, x, 2, "sq and acc"));
        TRY(want_scal(op, scal, 3, "-lr, eps, wd"));
        break;
    }
    spec->nout = 2;
    spec->dtype[0] = spec->dtype[1] = x->dtype;
    spec->ndim[0] = x->ndim;
    memcpy(spec->size[0], x->size, sizeof(int64_t) * (size_t)x->ndim);
    spec->ndim[1] = st->ndim;
    memcpy(spec->size[1], st->size, sizeof(int64_t) * (size_t)st->ndim);
    return TC_OK;
}
