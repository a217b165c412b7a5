/* shape_attn.c -- the prepare step of the ATTN kind: attention and attention_backward
 * (ops.def documents inputs, params and outputs).
 *
 * Every check a kernel could fail on is made here, so the CPU kernel and the CUDA launcher
 * only compute: q (N,L,E), k (N,S,E), v (N,S,Ev) are 3-D with one N, k agrees with q in E
 * and with v in S; every tensor has q's dtype except lse (float32 beside f16/bf16); the
 * scale is finite and causal is 0 or 1; a query needs a key (S >= 1 when L >= 1). The
 * backward's gout and out are (N,L,Ev) and lse is (N,L). Messages name the op and the sizes:
 * "attention: key (2,5,8) must be (2,S,4) (N and E of query (2,3,4))".
 */
#include "internal.h"
#include <math.h>
#include <stdio.h>

/* lse's dtype for a q of dtype dt: float32 for f16/bf16, as batch norm's stats. */
static int lse_dtype(int dt) { return tc_is_half(dt) ? TC_F32 : dt; }

static tc_status want_3d(const char *op, const char *what, const tc_tensor *t)
{
    char b[TC_SHAPE_BUF];
    if (t->ndim != 3 || !t->storage)
        return tc_set_error(TC_ERR_SHAPE, "%s: %s must be 3-D (N, length, features), got %s", op, what,
                            tc_shape_str(t, b, sizeof b));
    return TC_OK;
}

/* t (named what) has dims 0..nd-1 equal to want[] where want[d] >= 0; why says whose. */
static tc_status want_dims(const char *op, const char *what, const tc_tensor *t, int nd, const int64_t *want,
                           const char *pattern, const tc_tensor *ref, const char *refname)
{
    bool ok = t->ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = want[d] < 0 || t->size[d] == want[d];
    if (ok) return TC_OK;
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE, "%s: %s %s must be %s (from %s %s)", op, what, tc_shape_str(t, b1, sizeof b1),
                        pattern, refname, tc_shape_str(ref, b2, sizeof b2));
}

static tc_status want_dtype(const char *op, const char *what, const tc_tensor *t, int dt)
{
    if (t->dtype == dt) return TC_OK;
    return tc_set_error(TC_ERR_DTYPE, "%s: %s is %s, expected %s", op, what, tc_dtype_name((tc_dtype)t->dtype),
                        tc_dtype_name((tc_dtype)dt));
}

/* q, k, v (inputs 0..2 from first) and the params, shared by both ops. */
static tc_status check_qkv(const tc_kcall *k, const tc_tensor *q, const tc_tensor *kk, const tc_tensor *v)
{
    const char *op = k->info->name;
    char b[TC_SHAPE_BUF], pat[96];
    TRY(want_3d(op, "query", q));
    TRY(want_3d(op, "key", kk));
    TRY(want_3d(op, "value", v));
    int64_t N = q->size[0], L = q->size[1], E = q->size[2], S = kk->size[1];
    snprintf(pat, sizeof pat, "(%lld,S,%lld)", (long long)N, (long long)E);
    TRY(want_dims(op, "key", kk, 3, (int64_t[]){N, -1, E}, pat, q, "query"));
    snprintf(pat, sizeof pat, "(%lld,%lld,Ev)", (long long)N, (long long)S);
    TRY(want_dims(op, "value", v, 3, (int64_t[]){N, S, -1}, pat, kk, "key"));
    TRY(want_dtype(op, "key", kk, q->dtype));
    TRY(want_dtype(op, "value", v, q->dtype));
    if (!isfinite(k->p->s[0])) return tc_set_error(TC_ERR_ARG, "%s: scale (s0) must be finite, got %g", op, k->p->s[0]);
    if (k->p->i[0] != 0 && k->p->i[0] != 1)
        return tc_set_error(TC_ERR_ARG, "%s: causal (i0) must be 0 or 1, got %lld", op, (long long)k->p->i[0]);
    if (L > 0 && S == 0 && N > 0)
        return tc_set_error(TC_ERR_SHAPE, "%s: %lld queries need at least one key, got key %s", op, (long long)L,
                            tc_shape_str(kk, b, sizeof b));
    return TC_OK;
}

tc_status tc_prepare_attn(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    bool bwd = k->op == TC_OP_ATTENTION_BACKWARD;
    const tc_tensor *const *in = bwd ? k->in + 1 : k->in; /* q, k, v */
    const tc_tensor *q = in[0], *kk = in[1], *v = in[2];
    TRY(check_qkv(k, q, kk, v));
    int64_t N = q->size[0], L = q->size[1], E = q->size[2], S = kk->size[1], Ev = v->size[2];
    spec->nout = 2;
    spec->ndim[0] = 3, spec->ndim[1] = bwd ? 3 : 2;
    spec->dtype[0] = q->dtype, spec->dtype[1] = bwd ? q->dtype : lse_dtype(q->dtype);
    if (!bwd) {
        memcpy(spec->size[0], (int64_t[]){N, L, Ev}, 3 * sizeof(int64_t));
        memcpy(spec->size[1], (int64_t[]){N, L}, 2 * sizeof(int64_t));
        return TC_OK;
    }
    /* attention_backward(gout, q, k, v, out, lse) */
    char pat[64];
    const tc_tensor *g = k->in[0], *out = k->in[4], *lse = k->in[5];
    snprintf(pat, sizeof pat, "(%lld,%lld,%lld)", (long long)N, (long long)L, (long long)Ev);
    TRY(want_dims(op, "gradOutput", g, 3, (int64_t[]){N, L, Ev}, pat, q, "query"));
    TRY(want_dims(op, "output", out, 3, (int64_t[]){N, L, Ev}, pat, q, "query"));
    snprintf(pat, sizeof pat, "(%lld,%lld)", (long long)N, (long long)L);
    TRY(want_dims(op, "lse", lse, 2, (int64_t[]){N, L}, pat, q, "query"));
    TRY(want_dtype(op, "gradOutput", g, q->dtype));
    TRY(want_dtype(op, "output", out, q->dtype));
    TRY(want_dtype(op, "lse", lse, lse_dtype(q->dtype)));
    memcpy(spec->size[0], (int64_t[]){N, L, E}, 3 * sizeof(int64_t));
    memcpy(spec->size[1], (int64_t[]){N, S, E + Ev}, 3 * sizeof(int64_t));
    return TC_OK;
}
