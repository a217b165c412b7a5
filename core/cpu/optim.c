/* optim.c -- CPU optimizer steps: adam_step, sgd_step, rmsprop_step, adagrad_step,
 * adamax_step and adadelta_step (ops.def), one pass over a parameter's elements instead of
 * one pass per tensor op of the update.
 *
 * Each element is computed with the operations, in the order and type, of the composed
 * update in lua/optim (adam.lua, sgd.lua, rmsprop.lua, adagrad.lua) -- for Adam lerp for m,
 * mul then addcmul for v, sqrt, add, mul, addcdiv for x; a factor 1 of an addcmul or
 * addcdiv is left out, as multiplying by 1 changes no bits -- so for float and double the
 * fused step gives the composed step's
 * bits (C11 does not contract a*b+c into an fma). f16/bf16 arrive as float32 copies
 * (tc_cpu_with_f32): they round once, at the end, instead of after every op.
 * Results may be the inputs themselves (the optimizers pass x and its state as the out
 * slots): element i is read before it is written and no other element is touched.
 */
#include "nn.h"
#include <tgmath.h> /* sqrt of a float is sqrtf, as in the elementwise kernels */

/* The results may be the inputs (in place), so the compiler, seeing pointers that may alias,
 * vectorises a loop only behind a run-time overlap check that an in-place step fails: it
 * then ran the scalar loop, no faster and sometimes slower than the tensor ops it replaces.
 * Element i depends on element i alone, so there is no dependency between iterations; this
 * says so. */
#if defined(__clang__)
#define NO_LOOP_CARRIED_DEPENDENCY _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define NO_LOOP_CARRIED_DEPENDENCY _Pragma("GCC ivdep")
#else
#define NO_LOOP_CARRIED_DEPENDENCY
#endif

typedef struct optim_job {
    int64_t n;
    const char *x, *g, *st; /* inputs (dense) */
    char *xo, *sto;         /* results (dense; may be x and st) */
    double scal[4];
    double a, b; /* adam, adamax: beta1, beta2; sgd: momentum, dampening; rmsprop: alpha,
                  * momentum; adadelta: rho */
    bool flag;   /* adam: amsgrad; sgd: nesterov; rmsprop: centered */
} optim_job;

#define OPTIM_LOOPS(T, sfx)                                                                        \
    static void adam_range_##sfx(void *ctx, int64_t lo, int64_t hi)                                \
    {                                                                                              \
        const optim_job *j = ctx;                                                                  \
        const T *x = (const T *)j->x, *g = (const T *)j->g;                                        \
        const T *m = (const T *)j->st, *v = m + j->n, *vmax = v + j->n;                            \
        T *xo = (T *)j->xo, *mo = (T *)j->sto, *vo = mo + j->n, *vmaxo = vo + j->n;                \
        const T step = (T)j->scal[0], eps = (T)j->scal[1], keep = (T)j->scal[2], wd = (T)j->scal[3]; \
        const T c1 = (T)(1 - j->a), b2 = (T)j->b, c2 = (T)(1 - j->b);                              \
        const bool ams = j->flag;                                                                  \
        NO_LOOP_CARRIED_DEPENDENCY                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            T xv = x[i], d = g[i], mv = m[i];                                                      \
            if (wd != 0) d = d + wd * xv;                 /* Adam's decay, through the gradient */ \
            T m1 = mv + c1 * (d - mv);                    /* m:lerp(d, 1 - beta1) */               \
            T v1 = v[i] * b2;                             /* v:mul(beta2) */                       \
            v1 = v1 + c2 * d * d;                         /* :addcmul(1 - beta2, d, d) */          \
            T src = v1;                                                                            \
            if (ams) {                                    /* vmax:cmax(v), NaN kept */             \
                T vm = vmax[i];                                                                    \
                src = (vm > v1 || vm != vm) ? vm : v1;                                             \
                vmaxo[i] = src;                                                                    \
            }                                                                                      \
            T den = sqrt(src) + eps;                                                               \
            xo[i] = xv * keep + (m1 * step) / den;        /* AdamW's x:mul(keep), addcdiv */       \
            mo[i] = m1, vo[i] = v1;                                                                \
        }                                                                                          \
    }                                                                                              \
    static void sgd_range_##sfx(void *ctx, int64_t lo, int64_t hi)                                 \
    {                                                                                              \
        const optim_job *j = ctx;                                                                  \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *buf = (const T *)j->st;               \
        T *xo = (T *)j->xo, *bo = (T *)j->sto;                                                     \
        const T neglr = (T)j->scal[0], wd = (T)j->scal[1], mom = (T)j->a, c = (T)(1 - j->b);      \
        const bool plain = j->b == 0, nesterov = j->flag;                                          \
        NO_LOOP_CARRIED_DEPENDENCY                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            T xv = x[i], d = g[i];                                                                 \
            if (wd != 0) d = d + wd * xv;                                                          \
            T b1 = plain ? d + mom * buf[i] : buf[i] * mom + c * d;                                \
            T step = nesterov ? d + mom * b1 : b1;                                                 \
            xo[i] = xv + neglr * step;                    /* x:addcmul(1, -lr, d) */               \
            bo[i] = b1;                                                                            \
        }                                                                                          \
    }                                                                                              \
    /* the state rows: sq, then ga (centered), then buf (momentum); centered and momentum are  \
     * constants where rmsprop_range inlines it, so each variant's loop has no branch left */   \
    static inline __attribute__((always_inline)) void rmsprop_loop_##sfx(const optim_job *j, int64_t lo, \
                                                                         int64_t hi, bool centered, bool momentum) \
    {                                                                                              \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *sq = (const T *)j->st;                \
        T *xo = (T *)j->xo, *sqo = (T *)j->sto;                                                    \
        const int64_t ga_row = j->flag ? j->n : 0, buf_row = ga_row + j->n;                        \
        const T neglr = (T)j->scal[0], eps = (T)j->scal[1], wd = (T)j->scal[2];                    \
        const T alpha = (T)j->a, c = (T)(1 - j->a), mom = (T)j->b, neg1 = (T)-1;                   \
        NO_LOOP_CARRIED_DEPENDENCY                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            T xv = x[i], d = g[i];                                                                 \
            if (wd != 0) d = d + wd * xv;                                                          \
            T sq1 = sq[i] * alpha;                        /* sq:mul(alpha) */                      \
            sq1 = sq1 + c * d * d;                        /* :addcmul(1 - alpha, d, d) */          \
            T den = sq1;                                                                           \
            if (centered) {                                                                        \
                T ga1 = sq[ga_row + i] * alpha;           /* ga:mul(alpha) */                      \
                ga1 = ga1 + c * d;                        /* :add(1 - alpha, d) */                 \
                den = den + neg1 * ga1 * ga1;             /* :addcmul(-1, ga, ga) */               \
                sqo[ga_row + i] = ga1;                                                             \
            }                                                                                      \
            den = sqrt(den) + eps;                                                                 \
            if (momentum) {                                                                        \
                T b1 = sq[buf_row + i] * mom;             /* buf:mul(momentum) */                  \
                b1 = b1 + d / den;                        /* :addcdiv(1, d, den) */                \
                xo[i] = xv + neglr * b1;                  /* x:addcmul(1, -lr, buf) */             \
                sqo[buf_row + i] = b1;                                                             \
            } else {                                                                               \
                xo[i] = xv + (d * neglr) / den;           /* x:addcdiv(1, d * -lr, den) */         \
            }                                                                                      \
            sqo[i] = sq1;                                                                          \
        }                                                                                          \
    }                                                                                              \
    static void rmsprop_range_##sfx(void *ctx, int64_t lo, int64_t hi)                             \
    {                                                                                              \
        const optim_job *j = ctx;                                                                  \
        if (j->flag)                                                                               \
            j->b > 0 ? rmsprop_loop_##sfx(j, lo, hi, true, true) : rmsprop_loop_##sfx(j, lo, hi, true, false); \
        else                                                                                       \
            j->b > 0 ? rmsprop_loop_##sfx(j, lo, hi, false, true) : rmsprop_loop_##sfx(j, lo, hi, false, false); \
    }                                                                                              \
    static void adagrad_range_##sfx(void *ctx, int64_t lo, int64_t hi)                             \
    {                                                                                              \
        const optim_job *j = ctx;                                                                  \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *sum = (const T *)j->st;               \
        T *xo = (T *)j->xo, *so = (T *)j->sto;                                                     \
        const T neglr = (T)j->scal[0], eps = (T)j->scal[1], wd = (T)j->scal[2];                    \
        NO_LOOP_CARRIED_DEPENDENCY                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            T xv = x[i], d = g[i];                                                                 \
            if (wd != 0) d = d + wd * xv;                                                          \
            T s1 = sum[i] + d * d;                        /* sum:addcmul(1, d, d) */               \
            T den = sqrt(s1) + eps;                                                                \
            xo[i] = xv + (d * neglr) / den;               /* x:addcdiv(1, d * -clr, den) */        \
            so[i] = s1;                                                                            \
        }                                                                                          \
    }                                                                                              \
    /* the state rows: m, then u */                                                                \
    static void adamax_range_##sfx(void *ctx, int64_t lo, int64_t hi)                              \
    {                                                                                              \
        const optim_job *j = ctx;                                                                  \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *m = (const T *)j->st, *u = m + j->n;  \
        T *xo = (T *)j->xo, *mo = (T *)j->sto, *uo = mo + j->n;                                    \
        const T step = (T)j->scal[0], eps = (T)j->scal[1], wd = (T)j->scal[2];                     \
        const T b1 = (T)j->a, c1 = (T)(1 - j->a), b2 = (T)j->b;                                    \
        NO_LOOP_CARRIED_DEPENDENCY                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            T xv = x[i], d = g[i];                                                                 \
            if (wd != 0) d = d + wd * xv;                                                          \
            T m1 = m[i] * b1;                             /* m:mul(beta1) */                       \
            m1 = m1 + c1 * d;                             /* :add(1 - beta1, d) */                 \
            T t = fabs(d) + eps;                          /* |d| + eps */                          \
            T u1 = u[i] * b2;                             /* u:mul(beta2) */                       \
            u1 = (u1 > t || u1 != u1) ? u1 : t;           /* :cmax(|d| + eps), NaN kept */         \
            xo[i] = xv + (m1 * step) / u1;                /* x:addcdiv(1, m * step, u) */          \
            mo[i] = m1, uo[i] = u1;                                                                \
        }                                                                                          \
    }                                                                                              \
    /* the state rows: sq, then acc */                                                             \
    static void adadelta_range_##sfx(void *ctx, int64_t lo, int64_t hi)                            \
    {                                                                                              \
        const optim_job *j = ctx;                                                                  \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *sq = (const T *)j->st, *acc = sq + j->n; \
        T *xo = (T *)j->xo, *sqo = (T *)j->sto, *acco = sqo + j->n;                                \
        const T neglr = (T)j->scal[0], eps = (T)j->scal[1], wd = (T)j->scal[2];                    \
        const T rho = (T)j->a, c = (T)(1 - j->a);                                                  \
        NO_LOOP_CARRIED_DEPENDENCY                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            T xv = x[i], d = g[i], av = acc[i];                                                    \
            if (wd != 0) d = d + wd * xv;                                                          \
            T sq1 = sq[i] * rho;                          /* sq:mul(rho) */                        \
            sq1 = sq1 + c * d * d;                        /* :addcmul(1 - rho, d, d) */            \
            T std = sqrt(sq1 + eps);                                                               \
            T delta = sqrt(av + eps) / std * d;           /* sqrt(acc + eps):cdiv(std):cmul(d) */  \
            xo[i] = xv + neglr * delta;                   /* x:addcmul(1, -lr, delta) */           \
            T a1 = av * rho;                              /* acc:mul(rho) */                       \
            acco[i] = a1 + c * delta * delta;             /* :addcmul(1 - rho, delta, delta) */    \
            sqo[i] = sq1;                                                                          \
        }                                                                                          \
    }

OPTIM_LOOPS(float, f32)
OPTIM_LOOPS(double, f64)

tc_status tc_cpu_optim(const tc_kcall *k)
{
    if (tc_kcall_has_half(k)) return tc_cpu_with_f32(k, tc_cpu_optim);
    const tc_tensor *in[3] = {0};
    tc_tensor *tin[3] = {0}, *tout[2] = {0}, *out[2] = {0};
    tc_status s = TC_OK;
    for (int i = 0; i < 3 && !s; i++) s = tc_nn_dense_in(k->in[i], &tin[i], &in[i]);
    for (int o = 0; o < 2 && !s; o++) s = tc_nn_dense_out(k->out[o], &tout[o], &out[o]);
    if (s) goto done;
    optim_job j = {.n = tc_tensor_numel(in[0]), .x = tc_base(in[0]), .g = tc_base(in[1]), .st = tc_base(in[2]),
                   .xo = tc_base(out[0]), .sto = tc_base(out[1]), .a = k->p->s[0], .b = k->p->s[1],
                   .flag = k->p->i[0] != 0};
    const tc_tensor *scal = k->in[3];
    const double *sp = (const double *)tc_base(scal);
    for (int64_t i = 0; i < scal->size[0]; i++) j.scal[i] = sp[i * scal->stride[0]];
    bool f32 = in[0]->dtype == TC_F32;
    tc_range_fn fn;
    switch (k->op) {
    case TC_OP_ADAM_STEP: fn = f32 ? adam_range_f32 : adam_range_f64; break;
    case TC_OP_SGD_STEP: fn = f32 ? sgd_range_f32 : sgd_range_f64; break;
    case TC_OP_RMSPROP_STEP: fn = f32 ? rmsprop_range_f32 : rmsprop_range_f64; break;
    case TC_OP_ADAGRAD_STEP: fn = f32 ? adagrad_range_f32 : adagrad_range_f64; break;
    case TC_OP_ADAMAX_STEP: fn = f32 ? adamax_range_f32 : adamax_range_f64; break;
    default: fn = f32 ? adadelta_range_f32 : adadelta_range_f64; break;
    }
    if (j.n > 0) tc_parallel_for(j.n, TC_PARALLEL_GRAIN, fn, &j);
    for (int o = 0; o < 2; o++) tc_nn_dense_out_finish(k->out[o], tout[o]);
done:
    for (int i = 0; i < 3; i++) tc_tensor_release(tin[i]);
    for (int o = 0; o < 2; o++) tc_tensor_release(tout[o]);
    return s;
}
