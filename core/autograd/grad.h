/* grad.h -- the contract between the autograd engine and the gradient rules.
 *
 * Every differentiable op (TC_OPF_DIFF in ops.def) has one rule. A rule is written with ops
 * (tc_op_run, through the tc_g_* helpers below), never with raw loops: the same rule then
 * serves eager backward, higher-order gradients (when the engine runs a rule with grad mode
 * on, the ops it calls are recorded like any other) and, later, the graph compiler.
 *
 * Rules live in core/autograd/rules_*.c; each file fills its part of the table through
 * one tc_grad_rules_<family>() function that rules.c calls once. The engine saves, at
 * record time, only the inputs/outputs a rule's save mask names (so e.g. add keeps
 * nothing alive); shapes and dtypes of every input and output are always kept.
 */
#ifndef TC_GRAD_H
#define TC_GRAD_H

#include "internal.h"

/* Shape and dtype of one forward input or output (kept even when the tensor is not). */
typedef struct tc_tmeta {
    int32_t dtype;
    int32_t ndim;
    int32_t device; /* where tensors made from this meta (zeros, ones) are allocated */
    int64_t size[TC_MAX_DIMS];
} tc_tmeta;

void tc_tmeta_of(const tc_tensor *t, tc_tmeta *m);

/* Save mask bits: which forward tensors a rule reads. */
enum {
    TC_SAVE_IN0 = 1,
    TC_SAVE_IN1 = 2,
    TC_SAVE_IN2 = 4,
    TC_SAVE_OUT0 = 16,
    TC_SAVE_OUT1 = 32,
    TC_SAVE_ALL_IN = 64 /* every input, for list ops */
};

/* What a rule sees. Arrays have nin (in, meta, needs) or nout (out, out_meta, gout)
 * entries. in[i] / out[o] are NULL unless the save mask names them. */
typedef struct tc_grad_ctx {
    tc_op op;
    const tc_params *p;           /* the forward call's params */
    int nin, nout;
    const tc_tensor *const *in;   /* saved inputs */
    const tc_tensor *const *out;  /* saved outputs */
    const tc_tensor *const *gout; /* gradient of each output; NULL means zero */
    const bool *needs;            /* needs[i]: the gradient of input i is wanted */
    const tc_tmeta *meta;         /* each forward input's dtype and sizes */
    const tc_tmeta *out_meta;     /* each forward output's */
    /* acc (may be NULL), acc[i]: the gradient of input i summed so far, in a buffer nobody
     * else sees, of meta[i]'s sizes and dtype (any dense layout). A rule may add its
     * gradient of input i into it in place, through an op, and leave gin[i] NULL: that
     * saves the separate result and the engine's add pass (an LSTM's recurrent weight
     * gets a gradient every step). Offered only without create_graph or anomaly mode. */
    tc_tensor *const *acc;
} tc_grad_ctx;

/* gin has nin slots, all NULL on entry. For each i with needs[i] the rule stores a new
 * reference with exactly meta[i]'s sizes and dtype, or leaves NULL for a zero gradient.
 * On failure the rule releases what it stored and returns the error. */
typedef tc_status (*tc_grad_fn)(const tc_grad_ctx *c, tc_tensor **gin);

typedef struct tc_grad_rule {
    tc_grad_fn fn;
    int32_t save; /* TC_SAVE_* bits */
} tc_grad_rule;

/* The rule of op, or NULL when op has none (non-differentiable). Thread-safe. */
const tc_grad_rule *tc_grad_rule_of(tc_op op);

/* Table parts, one per rules file (called once, under a lock, by rules.c). */
void tc_grad_rules_ew(tc_grad_rule *t);     /* rules_ew.c: elementwise, copy, where */
void tc_grad_rules_reduce(tc_grad_rule *t); /* rules_reduce.c: reductions, scans, sort */
void tc_grad_rules_linalg(tc_grad_rule *t); /* rules_linalg.c: matmul family */
void tc_grad_rules_shape(tc_grad_rule *t);  /* rules_shape.c: views, index, cat */
void tc_grad_rules_nn(tc_grad_rule *t);     /* rules_nn.c: conv, pooling, softmax, ... */
void tc_grad_rules_rnn(tc_grad_rule *t);    /* rules_rnn.c: the recurrent op */
void tc_grad_rules_attn(tc_grad_rule *t);   /* rules_attn.c: fused attention */
void tc_grad_rules_ln(tc_grad_rule *t);     /* rules_ln.c: layer normalization */

/* ---- helpers for writing rules with ops (core/autograd/gops.c) -----------------------
 * Each makes a new tensor (a new reference in *out) by running ops through tc_op_run,
 * so it is recorded when the engine runs the rule with grad mode on. On failure *out is
 * untouched and the error names the op. */

/* Any op with one output: in/nin/p as for tc_op_run. */
tc_status tc_g_op(tc_op op, const tc_tensor *const *in, int nin, const tc_params *p, tc_tensor **out);
/* Elementwise op with up to three inputs (b, c may be NULL for lower arity), params s0, s1. */
tc_status tc_g_ew(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, double s0, double s1,
                  tc_tensor **out);
/* a * v for a number v (a 0-d tensor of a's dtype times a). */
tc_status tc_g_scale(const tc_tensor *a, double v, tc_tensor **out);
/* A 0-d tensor of dtype dt holding v. */
tc_status tc_g_scalar(int dt, double v, tc_tensor **out);
/* Zeros / a constant of the given meta's sizes and dtype. */
tc_status tc_g_full(const tc_tmeta *m, double v, tc_tensor **out);
/* Sums g (a gradient of a broadcast result) down to m's sizes (broadcasting's adjoint) and
 * converts it to m's dtype. Returns g itself (retained) when nothing is to be done. */
tc_status tc_g_sum_to(const tc_tensor *g, const tc_tmeta *m, tc_tensor **out);
/* g with m's sizes: a view when g's strides allow, else a contiguous copy (reshape). */
tc_status tc_g_reshape(const tc_tensor *g, int ndim, const int64_t *sizes, tc_tensor **out);
/* Broadcast view of t to m's sizes. */
tc_status tc_g_expand(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out);
/* Swaps dims d0, d1 (a view). */
tc_status tc_g_transpose(const tc_tensor *t, int d0, int d1, tc_tensor **out);
/* Sum over dim (0-based; -1 all) keeping it as size 1 when keepdim. */
tc_status tc_g_sum(const tc_tensor *t, int dim, int keepdim, tc_tensor **out);
/* A contiguous copy in dtype dt (dt < 0: t's dtype). */
tc_status tc_g_copy(const tc_tensor *t, int dt, tc_tensor **out);

/* Releases the non-NULL entries of gin[0..n) and clears them (rule failure paths). */
void tc_g_release_all(tc_tensor **gin, int n);


/* ---- more helpers (appended by the rules files' author; usable by every rules file) --- */

/* Checks a rule's context before it runs: each non-NULL gout has its output's sizes and
 * dtype, and every tensor the save mask names is present. Sets *zero when every gout is
 * NULL (the rule then has nothing to do: all input gradients are zero). */
tc_status tc_g_begin(const tc_grad_ctx *c, int32_t save, bool *zero);
/* Finishes a rule: on failure releases gin; on success drops gradients nobody asked for
 * and checks each remaining one has its input's sizes and dtype (a rule bug is reported
 * as TC_ERR_INTERNAL naming the op, never passed on). Returns s or the check's error. */
tc_status tc_g_end(const tc_grad_ctx *c, tc_status s, tc_tensor **gin);

/* Defines a rule `name` with save mask `mask`: the body runs between tc_g_begin and
 * tc_g_end, so it may assume well-formed gradients and may return early on error
 * (TRY) leaving partial results in gin. Register with TC_GRAD_REG(table, OP, name).
 *     TC_GRAD_RULE(mul_rule, TC_SAVE_IN0 | TC_SAVE_IN1) { ... return TC_OK; }      */
#define TC_GRAD_RULE(name, mask)                                                            \
    static const int32_t name##_save = (mask);                                              \
    static tc_status name##_body(const tc_grad_ctx *c, tc_tensor **gin);                    \
    static tc_status name(const tc_grad_ctx *c, tc_tensor **gin)                            \
    {                                                                                       \
        bool zero_ = false;                                                                 \
        TRY(tc_g_begin(c, name##_save, &zero_));                                            \
        if (zero_) return TC_OK;                                                            \
        return tc_g_end(c, name##_body(c, gin), gin);                                       \
    }                                                                                       \
    static tc_status name##_body(const tc_grad_ctx *c, tc_tensor **gin)
#define TC_GRAD_REG(table, OP, name) ((table)[TC_OP_##OP] = (tc_grad_rule){name, name##_save})

/* a + v for a number v. */
tc_status tc_g_add_scalar(const tc_tensor *a, double v, tc_tensor **out);
/* where(cond, a, b); a or b may be NULL for zeros (of the other's dtype). */
tc_status tc_g_where(const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
/* Comparison op (TC_OP_EQ, LT, ...) of a against the number v: a uint8 mask. */
tc_status tc_g_cmp_scalar(tc_op op, const tc_tensor *a, double v, tc_tensor **out);
/* Views: unsqueeze at dim / narrow (dim, start, len) (0-based dims). */
tc_status tc_g_unsqueeze(const tc_tensor *t, int dim, tc_tensor **out);
tc_status tc_g_narrow(const tc_tensor *t, int dim, int64_t start, int64_t len, tc_tensor **out);
/* cat of n tensors along dim. */
tc_status tc_g_cat(const tc_tensor *const *ts, int n, int dim, tc_tensor **out);
/* A 1-D int64 tensor holding vals[0..n) (constant indices built from shapes, not data). */
tc_status tc_g_index(int device, const int64_t *vals, int64_t n, tc_tensor **out);
/* t reversed along dim (index_select with a reversed index). */
tc_status tc_g_flip(const tc_tensor *t, int dim, tc_tensor **out);
/* t padded with zeros at the end of each dim up to m's sizes (same ndim, t no larger). */
tc_status tc_g_pad_to(const tc_tensor *t, const tc_tmeta *m, tc_tensor **out);
/* The 0-based dim a reduction's i0 names for an ndim-dim input, or -1 when it reduces
 * every element (i0 == -1, or a 0-dim input); ops.def's rule: i0 < -1 counts from the end. */
int tc_g_reduce_dim(int64_t i0, int ndim);
/* A gradient of a reduction's output (dim d, keepdim) brought back to m's sizes by
 * unsqueezing the reduced dim (when not kept) and expanding: a broadcast view. d < 0:
 * every element was reduced. */
tc_status tc_g_unreduce(const tc_tensor *g, int d, int keepdim, const tc_tmeta *m, tc_tensor **out);
/* g (or out) with the reduced dim restored as size 1 (no expand). */
tc_status tc_g_keepdim(const tc_tensor *g, int d, int keepdim, const tc_tmeta *m, tc_tensor **out);

/* ---- an arena for a rule's temporaries ----------------------------------------------
 * Rules chain many ops; the arena keeps each intermediate and releases them all at the
 * end, and it short-circuits: once a call failed (A->err set, message kept), every later
 * tc_ga_* call returns NULL without running, and a NULL argument yields NULL. So a rule
 * reads as straight-line math:
 *     tc_garena A = {0};
 *     tc_ga_out(&A, tc_ga_div(&A, c->gout[0], c->in[0]), &gin[0]);   // log: g / x
 *     return tc_ga_done(&A);                                                            */
#define TC_GA_MAX 48
typedef struct tc_garena {
    tc_tensor *t[TC_GA_MAX];
    int n;
    tc_status err;
} tc_garena;

/* Takes ownership of t made by a call that returned s (NULL and A->err on failure). */
tc_tensor *tc_ga_keep(tc_garena *A, tc_status s, tc_tensor *t);
/* The elementwise op with up to three inputs and params s0, s1 (see tc_g_ew). */
tc_tensor *tc_ga_ew(tc_garena *A, tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, double s0,
                    double s1);
tc_tensor *tc_ga_op(tc_garena *A, tc_op op, const tc_tensor *const *in, int nin, const tc_params *p);
tc_tensor *tc_ga_mul(tc_garena *A, const tc_tensor *a, const tc_tensor *b);
tc_tensor *tc_ga_div(tc_garena *A, const tc_tensor *a, const tc_tensor *b);
tc_tensor *tc_ga_add(tc_garena *A, const tc_tensor *a, const tc_tensor *b);   /* a + b */
tc_tensor *tc_ga_sub(tc_garena *A, const tc_tensor *a, const tc_tensor *b);   /* a - b */
tc_tensor *tc_ga_scale(tc_garena *A, const tc_tensor *a, double v);           /* a * v */
tc_tensor *tc_ga_adds(tc_garena *A, const tc_tensor *a, double v);            /* a + v */
tc_tensor *tc_ga_rsub(tc_garena *A, double v, const tc_tensor *a);            /* v - a */
tc_tensor *tc_ga_neg(tc_garena *A, const tc_tensor *a);
tc_tensor *tc_ga_where(tc_garena *A, const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b);
tc_tensor *tc_ga_cmps(tc_garena *A, tc_op op, const tc_tensor *a, double v); /* a <op> v: uint8 */
tc_tensor *tc_ga_sum_to(tc_garena *A, const tc_tensor *g, const tc_tmeta *m);
tc_tensor *tc_ga_sum(tc_garena *A, const tc_tensor *t, int dim, int keepdim);
tc_tensor *tc_ga_full(tc_garena *A, const tc_tmeta *m, double v);
tc_tensor *tc_ga_reshape(tc_garena *A, const tc_tensor *g, const tc_tmeta *m);
/* Stores a new reference to t in *slot (nothing when t is NULL or the arena failed). */
void tc_ga_out(tc_garena *A, const tc_tensor *t, tc_tensor **slot);
/* Releases every temporary; returns the first failure (TC_OK when none). */
tc_status tc_ga_done(tc_garena *A);

#endif /* TC_GRAD_H */
