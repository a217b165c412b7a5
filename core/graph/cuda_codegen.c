/* cuda_codegen.c -- turns one fused group (fuse.c) into the text of ONE CUDA C kernel.
 *
 * The text is built from the group alone (ops, dtypes, shape, scalar params, input
 * layouts), never from pointers or ids, so the same group always gives the same bytes:
 * the text is its own cache key (nvrtc.c) and the entry point is named after its hash.
 *
 * What a kernel looks like (a grid-stride loop over the group's iteration space i):
 *
 *   c0, c1, ...   coordinates of i over the coalesced iteration dims, only when an input
 *                 needs them (broadcast or strided); a contiguous input reads [i], a
 *                 one-element input [0]
 *   x<k>          group input k, loaded once; f16/bf16 widen to float
 *   v<m>          member m's value, in a register: op_<name>_<type>(...), a device
 *                 function whose body is the op's formula text from ops.def (tc_op_info:
 *                 the X-macro's stringified formula, never retyped here)
 *   out<o>[i]     group outputs, stored contiguous; f16/bf16 round to nearest even here
 *
 * A trailing sum/mean folds the reduced value into a double per thread; blocks reduce it
 * with warp shuffles (fixed order), then either one block per row writes the row's result
 * (RED_ROWS) or every block writes a partial and the last block to finish sums the
 * partials in index order (RED_ALL): deterministic for a given grid, one launch.
 *
 * Numerics against the CPU: f32/f64 arithmetic is IEEE on both sides and nvrtc.c compiles
 * with --fmad=false, so +,-,*,/ and sqrt agree bitwise; exp, tanh, ... are CUDA's, within
 * their documented ulps, not the CPU's. f16/bf16 values live in float registers, each
 * member's result rounded to its half dtype as eager rounds every op's result (so a group
 * gives eager's bits on the same device). Conversions reproduce the CPU's (through double,
 * saturating, NaN -> 0).
 *
 * Refused (an error naming the group and member, so the caller runs the group another
 * way): ops with no elementwise formula, integer formulas calling tc_* helpers of
 * scalar_math.h (not carried into the kernel text yet), a reduction over another dim.
 */
#include "cuda_codegen.h"
#include "fuse.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- dtypes in the kernel text -------------------------------------------------------- */

/* Storage type (what memory holds), register type (what members compute in), and the
 * suffix of function names. Halves are raw 16-bit patterns in memory: no cuda_fp16.h. */
static const char *const store_t[TC_DTYPE_COUNT] = {
    [TC_F32] = "float",        [TC_F64] = "double",     [TC_F16] = "unsigned short", [TC_BF16] = "unsigned short",
    [TC_U8] = "unsigned char", [TC_I8] = "signed char", [TC_I16] = "short",          [TC_I32] = "int",
    [TC_I64] = "long long",    [TC_BOOL] = "bool",
};
static const char *const sfx[TC_DTYPE_COUNT] = {
    [TC_F32] = "f32", [TC_F64] = "f64", [TC_F16] = "f16", [TC_BF16] = "bf16", [TC_U8] = "u8",
    [TC_I8] = "i8",   [TC_I16] = "i16", [TC_I32] = "i32", [TC_I64] = "i64",   [TC_BOOL] = "b8",
};

static bool is_half(int dt) { return dt == TC_F16 || dt == TC_BF16; }
static bool is_float(int dt) { return dt == TC_F32 || dt == TC_F64 || is_half(dt); }
/* The dtype whose C type a value has in a register (halves compute in float). */
static int reg_dt(int dt) { return is_half(dt) ? TC_F32 : dt; }
static const char *reg_t(int dt) { return store_t[reg_dt(dt)]; }

/* ---- text --------------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
}

/* A double as an exact expression (bits), with its value in a comment for the reader. */
static void put_double(sbuf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    put(b, "__longlong_as_double(0x%016llxLL) /* %.17g */", (unsigned long long)u, v);
}

static uint64_t fnv1a(const char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/* ---- the generator's view of the group -------------------------------------------------- */

enum { IN_SCALAR, IN_FLAT, IN_GENERAL };

typedef struct gen {
    const tc_graph *g;
    const tc_ggroup *grp;
    const char *label;
    int nsteps; /* elementwise members (the reduction, if any, is not one) */
    const tc_gnode *red;
    int nd; /* iteration shape */
    int64_t size[TC_MAX_DIMS], n;
    int mode[TC_FUSE_MAX_INS];
    int64_t bst[TC_FUSE_MAX_INS][TC_MAX_DIMS]; /* element strides at the iteration shape */
    int cnd;                                   /* coalesced dims of the general inputs' index math */
    int64_t csize[TC_MAX_DIMS], cst[TC_FUSE_MAX_INS][TC_MAX_DIMS];
    bool wide; /* 64-bit index arithmetic */
    bool use_half, use_bf16, cvt_used[TC_DTYPE_COUNT];
    const char *ind; /* indentation of the element body */
} gen;

/* Halves need the conversion helpers in the text. */
static void note_dtype(gen *G, int dt)
{
    if (dt == TC_F16) G->use_half = true;
    if (dt == TC_BF16) G->use_bf16 = true;
}

static tc_status refuse(const gen *G, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tc_status refuse(const gen *G, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tc_set_error(TC_ERR_UNSUPPORTED, "cuda codegen: %s: %s", G->label, msg);
}

static int find_input(const gen *G, int32_t v)
{
    for (int k = 0; k < G->grp->nins; k++)
        if (G->grp->ins[k] == v) return k;
    return -1;
}

static int find_member(const gen *G, int before, int32_t v)
{
    for (int m = 0; m < before; m++)
        if (G->g->nodes[G->grp->nodes[m]].out[0] == v) return m;
    return -1;
}

/* The register holding value v for member `before` to read: "x<k>" or "v<m>". */
static tc_status reg_of(const gen *G, int before, int32_t v, char *buf, size_t cap)
{
    int m = v >= 0 ? find_member(G, before, v) : -1;
    if (m >= 0) {
        snprintf(buf, cap, "v%d", m);
        return TC_OK;
    }
    int k = v >= 0 ? find_input(G, v) : -1;
    if (k >= 0) {
        snprintf(buf, cap, "x%d", k);
        return TC_OK;
    }
    return refuse(G, "member %d reads %%%d, neither an earlier member's value nor a group input", before, v);
}

/* Input k's layout: its element strides at the iteration shape (0 where it broadcasts)
 * and whether it is one element, contiguous like the iteration space, or neither. */
static tc_status plan_input(gen *G, int k, const int64_t *strides)
{
    const tc_gval *v = &G->g->vals[G->grp->ins[k]];
    int64_t own[TC_MAX_DIMS];
    if (v->ndim > G->nd) return refuse(G, "input %d has %d dims, the group %d", k, v->ndim, G->nd);
    if (strides)
        memcpy(own, strides, sizeof(int64_t) * (size_t)v->ndim);
    else
        tc_contiguous_strides(v->ndim, v->size, own);
    int64_t *bst = G->bst[k], cst = 1;
    bool flat = true;
    for (int d = G->nd - 1; d >= 0; d--) {
        int vd = d - (G->nd - v->ndim);
        int64_t vs = vd >= 0 ? v->size[vd] : 1;
        if (vs != G->size[d] && vs != 1) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
            return refuse(G, "input %d of sizes %s does not broadcast to %s", k,
                          tc_sizes_str(v->ndim, v->size, b1, sizeof b1), tc_sizes_str(G->nd, G->size, b2, sizeof b2));
        }
        bst[d] = vd >= 0 && vs != 1 ? own[vd] : 0;
        if (G->size[d] != 1 && bst[d] != cst) flat = false;
        cst *= G->size[d];
    }
    note_dtype(G, v->dtype);
    G->mode[k] = tc_numel_of(v->ndim, v->size) == 1 ? IN_SCALAR : flat ? IN_FLAT : IN_GENERAL;
    return TC_OK;
}

/* Merges adjacent iteration dims where every general input steps evenly across both
 * (drops size-1 dims), so a (64,1,128) broadcast against (64,32,128) indexes with two
 * coordinates, not three. Then decides the index width. */
static void coalesce(gen *G)
{
    int nins = G->grp->nins;
    G->cnd = 0;
    for (int d = 0; d < G->nd; d++) {
        if (G->size[d] == 1) continue;
        bool merge = G->cnd > 0;
        for (int k = 0; k < nins && merge; k++)
            if (G->mode[k] == IN_GENERAL && G->cst[k][G->cnd - 1] != G->bst[k][d] * G->size[d]) merge = false;
        if (merge) {
            G->csize[G->cnd - 1] *= G->size[d];
            for (int k = 0; k < nins; k++) G->cst[k][G->cnd - 1] = G->bst[k][d];
            continue;
        }
        G->csize[G->cnd] = G->size[d];
        for (int k = 0; k < nins; k++) G->cst[k][G->cnd] = G->bst[k][d];
        G->cnd++;
    }
    /* 32-bit unsigned indices when the space and every reach fit (cheaper division by the
     * constant sizes); i + grid stride stays below 2^32 for any grid we launch */
    G->wide = G->n > INT32_MAX;
    for (int k = 0; k < nins; k++) {
        if (G->mode[k] != IN_GENERAL) continue;
        int64_t reach = 0;
        for (int d = 0; d < G->cnd; d++) {
            if (G->cst[k][d] < 0) G->wide = true;
            reach += (G->csize[d] - 1) * (G->cst[k][d] < 0 ? -G->cst[k][d] : G->cst[k][d]);
        }
        if (reach > INT32_MAX) G->wide = true;
    }
}

/* ---- members ---------------------------------------------------------------------------- */

/* A formula function already written: (op, computing dtype). */
typedef struct fkey {
    int32_t op, dt;
} fkey;

/* Checks member m and, for an elementwise op not seen yet, writes its formula function. */
static tc_status member_decl(gen *G, int m, fkey *fk, int *nf, sbuf *fn)
{
    const tc_gnode *n = &G->g->nodes[G->grp->nodes[m]];
    const tc_opinfo *info = n->op >= 0 && n->op < TC_OP_COUNT ? tc_op_info((tc_op)n->op) : NULL;
    const char *nm = tc_graph_op_name(n->op);
    if (!info || (info->kind != TC_KIND_EW && info->kind != TC_KIND_CONVERT && info->kind != TC_KIND_SELECT))
        return refuse(G, "member %d (%s) is not elementwise: ops.def gives it no formula", m, nm);
    if (n->nout != 1 || n->out[0] < 0) return refuse(G, "member %d (%s) must have one result", m, nm);
    const tc_gval *o = &G->g->vals[n->out[0]];
    if (o->ndim != G->nd || memcmp(o->size, G->size, sizeof(int64_t) * (size_t)G->nd) != 0) {
        char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
        return refuse(G, "member %d (%s) has sizes %s, not the group's %s", m, nm,
                      tc_sizes_str(o->ndim, o->size, b1, sizeof b1), tc_sizes_str(G->nd, G->size, b2, sizeof b2));
    }
    for (int j = 0; j < n->nin; j++) {
        char r[16];
        TRY(reg_of(G, m, n->in[j], r, sizeof r));
    }
    int odt = o->dtype;
    note_dtype(G, odt);
    if (info->kind == TC_KIND_CONVERT) {
        if (n->nin != 1) return refuse(G, "member %d (copy) needs one input", m);
        int idt = G->g->vals[n->in[0]].dtype;
        note_dtype(G, idt);
        if (idt != odt) G->cvt_used[odt] = true;
        return TC_OK;
    }
    if (info->kind == TC_KIND_SELECT) {
        if (n->nin != 3) return refuse(G, "member %d (where) needs three inputs", m);
        int md = G->g->vals[n->in[0]].dtype, a = G->g->vals[n->in[1]].dtype, b = G->g->vals[n->in[2]].dtype;
        if ((md != TC_U8 && md != TC_BOOL) || a != b || a != odt)
            return refuse(
                G, "member %d (where) takes a uint8/bool mask and two values of its result's dtype, got %s, %s, %s", m,
                tc_dtype_name((tc_dtype)md), tc_dtype_name((tc_dtype)a), tc_dtype_name((tc_dtype)b));
        return TC_OK;
    }
    /* elementwise: every input of the principal dtype, the result of it or uint8 (CMP) */
    if (n->nin != info->nin)
        return refuse(G, "member %d (%s) has %d inputs, the op takes %d", m, nm, n->nin, info->nin);
    int dt = n->nin ? G->g->vals[n->in[0]].dtype : odt;
    for (int j = 1; j < n->nin; j++)
        if (G->g->vals[n->in[j]].dtype != dt)
            return refuse(G, "member %d (%s) mixes %s and %s inputs", m, nm, tc_dtype_name((tc_dtype)dt),
                          tc_dtype_name((tc_dtype)G->g->vals[n->in[j]].dtype));
    if (odt != ((info->flags & TC_OPF_CMP) ? TC_U8 : dt))
        return refuse(G, "member %d (%s) of %s gives %s", m, nm, tc_dtype_name((tc_dtype)dt),
                      tc_dtype_name((tc_dtype)odt));
    bool flt = is_float(dt);
    int need = flt ? TC_OPF_FLT : dt == TC_BOOL ? TC_OPF_BOOL : TC_OPF_INT;
    if (!(info->flags & need)) return refuse(G, "member %d (%s) does not take %s", m, nm, tc_dtype_name((tc_dtype)dt));
    note_dtype(G, dt);
    const char *f = flt ? info->formula : info->int_formula;
    const char *helper = strstr(f, "tc_");
    if (helper) {
        int len = 0;
        while (helper[len] && (helper[len] == '_' || (helper[len] >= 'a' && helper[len] <= 'z'))) len++;
        return refuse(G,
                      "member %d (%s) on %s: its formula calls %.*s (core/scalar_math.h), which generated "
                      "kernels do not carry yet",
                      m, nm, tc_dtype_name((tc_dtype)dt), len, helper);
    }
    int cdt = reg_dt(dt);
    for (int i = 0; i < *nf; i++)
        if (fk[i].op == n->op && fk[i].dt == cdt) return TC_OK;
    fk[(*nf)++] = (fkey){n->op, cdt};
    const char *C = store_t[cdt], *R = (info->flags & TC_OPF_CMP) ? "unsigned char" : C;
    put(fn, "/* %s: %s formula of ops.def */\n", info->name, flt ? "float" : "integer");
    put(fn, "static __device__ __forceinline__ %s op_%s_%s(%s a, %s b, %s c, %s p0, %s p1)\n{\n", R, info->name,
        sfx[cdt], C, C, C, C, C);
    put(fn, "    typedef %s T;\n    (void)a, (void)b, (void)c, (void)p0, (void)p1;\n    return (%s)(%s);\n}\n\n", C, R,
        f);
    return TC_OK;
}

/* The statement computing member m into v<m>. */
static void member_stmt(const gen *G, int m, sbuf *b)
{
    const tc_gnode *n = &G->g->nodes[G->grp->nodes[m]];
    const tc_opinfo *info = tc_op_info((tc_op)n->op);
    int odt = G->g->vals[n->out[0]].dtype;
    char r[3][16] = {"0", "0", "0"};
    for (int j = 0; j < n->nin && j < 3; j++) reg_of(G, m, n->in[j], r[j], sizeof r[j]);
    if (info->kind == TC_KIND_SELECT) {
        put(b, "%sconst %s v%d = %s ? %s : %s; /* where */\n", G->ind, reg_t(odt), m, r[0], r[1], r[2]);
        return;
    }
    if (info->kind == TC_KIND_CONVERT) {
        int idt = G->g->vals[n->in[0]].dtype;
        if (idt == odt) {
            put(b, "%sconst %s v%d = %s; /* copy */\n", G->ind, reg_t(odt), m, r[0]);
        } else if (is_half(idt)) { /* the half's own value, even when kept wider in a register */
            put(b, "%sconst %s v%d = tc_cvt_%s((double)tc_%s2f(tc_f2%s(%s))); /* copy %s -> %s */\n", G->ind,
                reg_t(odt), m, sfx[odt], idt == TC_F16 ? "h" : "bf", idt == TC_F16 ? "h" : "bf", r[0], sfx[idt],
                sfx[odt]);
        } else {
            put(b, "%sconst %s v%d = tc_cvt_%s((double)%s); /* copy %s -> %s */\n", G->ind, reg_t(odt), m, sfx[odt],
                r[0], sfx[idt], sfx[odt]);
        }
        return;
    }
    int dt = n->nin ? G->g->vals[n->in[0]].dtype : odt, cdt = reg_dt(dt);
    const char *C = store_t[cdt];
    /* a half result is rounded to its dtype here, as eager mode rounds each op's result: the
     * group computes eager's numbers, not more precise ones */
    const char *rnd = odt == TC_F16 ? "tc_h2f(tc_f2h(" : odt == TC_BF16 ? "tc_bf2f(tc_f2bf(" : "";
    put(b, "%sconst %s v%d = %sop_%s_%s(%s, %s, %s", G->ind, reg_t(odt), m, rnd, info->name, sfx[cdt], r[0], r[1],
        r[2]);
    for (int k = 0; k < 2; k++) { /* the params the op reads, as (T)s exactly; others 0 */
        if (k < info->nparams) {
            put(b, ", (%s)", C);
            put_double(b, n->p.s[k]);
        } else {
            put(b, ", 0");
        }
    }
    put(b, ")%s;\n", *rnd ? "))" : "");
}

/* ---- the kernel text ------------------------------------------------------------------------ */

static void put_helpers(const gen *G, sbuf *b)
{
    put(b, "typedef %s tc_idx;\n\n", G->wide ? "long long" : "unsigned int");
    if (G->use_half) /* PTX conversions: round to nearest even, subnormals kept */
        put(b, "static __device__ __forceinline__ float tc_h2f(unsigned short h)\n"
               "{ float f; asm(\"cvt.f32.f16 %%0, %%1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
               "static __device__ __forceinline__ unsigned short tc_f2h(float f)\n"
               "{ unsigned short h; asm(\"cvt.rn.f16.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n");
    if (G->use_bf16) /* as dtype.c's tc_f32_to_bf16: nearest even, NaN kept quiet */
        put(b, "static __device__ __forceinline__ float tc_bf2f(unsigned short h)\n"
               "{ return __uint_as_float((unsigned int)h << 16); }\n"
               "static __device__ __forceinline__ unsigned short tc_f2bf(float f)\n"
               "{\n    unsigned int u = __float_as_uint(f);\n"
               "    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
               "    u += 0x7fffu + ((u >> 16) & 1u);\n    return (unsigned short)(u >> 16);\n}\n");
    /* conversions as the CPU's copy: through double, integers saturate, NaN -> 0 */
    static const struct {
        int dt;
        const char *lo, *hi;
    } sat[] = {{TC_U8, "0.0", "255.0"},
               {TC_I8, "-128.0", "127.0"},
               {TC_I16, "-32768.0", "32767.0"},
               {TC_I32, "-2147483648.0", "2147483647.0"},
               {TC_I64, "-9223372036854775808.0", "9223372036854774784.0"}};
    for (size_t i = 0; i < sizeof sat / sizeof sat[0]; i++)
        if (G->cvt_used[sat[i].dt])
            put(b,
                "static __device__ __forceinline__ %s tc_cvt_%s(double v) { return v != v ? (%s)0 : v <= %s ? (%s)%s : "
                "v >= %s ? (%s)%s : (%s)v; }\n",
                store_t[sat[i].dt], sfx[sat[i].dt], store_t[sat[i].dt], sat[i].lo, store_t[sat[i].dt], sat[i].lo,
                sat[i].hi, store_t[sat[i].dt], sat[i].hi, store_t[sat[i].dt]);
    if (G->cvt_used[TC_F32])
        put(b, "static __device__ __forceinline__ float tc_cvt_f32(double v) { return (float)v; }\n");
    if (G->cvt_used[TC_F64]) put(b, "static __device__ __forceinline__ double tc_cvt_f64(double v) { return v; }\n");
    if (G->cvt_used[TC_F16])
        put(b, "static __device__ __forceinline__ float tc_cvt_f16(double v) { return tc_h2f(tc_f2h((float)v)); }\n");
    if (G->cvt_used[TC_BF16])
        put(b,
            "static __device__ __forceinline__ float tc_cvt_bf16(double v) { return tc_bf2f(tc_f2bf((float)v)); }\n");
    if (G->cvt_used[TC_BOOL]) put(b, "static __device__ __forceinline__ bool tc_cvt_b8(double v) { return v != 0; }\n");
    if (G->red) /* deterministic: a fixed shuffle tree, every thread of the block calls it */
        put(b,
            "\n/* Sum of v over the block (TC_BLOCK threads), valid in thread 0. */\n"
            "#define TC_BLOCK %d\n"
            "static __device__ __forceinline__ double tc_block_sum(double v)\n{\n"
            "    __shared__ double sh[TC_BLOCK / 32];\n"
            "    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n"
            "    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;\n"
            "    __syncthreads();\n"
            "    v = threadIdx.x < TC_BLOCK / 32 ? sh[threadIdx.x] : 0.0;\n"
            "    if (threadIdx.x < 32)\n"
            "        for (int o = TC_BLOCK / 64; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n"
            "    __syncthreads(); /* sh is reused by the next call */\n"
            "    return v;\n}\n",
            TC_CUDA_FUSED_BLOCK);
    put(b, "\n");
}

/* Loads, members and elementwise stores for element i (indented by G->ind). */
static void put_body(const gen *G, sbuf *b)
{
    const char *I = G->ind;
    bool coords = false;
    for (int k = 0; k < G->grp->nins; k++) coords |= G->mode[k] == IN_GENERAL;
    if (coords) {
        put(b, "%s/* coordinates over the coalesced dims", I);
        for (int d = 0; d < G->cnd; d++) put(b, "%s%lld", d ? " x " : " ", (long long)G->csize[d]);
        put(b, " */\n");
        if (G->cnd > 1) put(b, "%stc_idx r = i;\n", I);
        for (int d = G->cnd - 1; d >= 0; d--) {
            if (G->cnd == 1)
                put(b, "%sconst tc_idx c0 = i;\n", I);
            else if (d == 0)
                put(b, "%sconst tc_idx c0 = r;\n", I);
            else
                put(b, "%sconst tc_idx c%d = r %% %lldu;\n%sr /= %lldu;\n", I, d, (long long)G->csize[d], I,
                    (long long)G->csize[d]);
        }
    }
    for (int k = 0; k < G->grp->nins; k++) {
        int dt = G->g->vals[G->grp->ins[k]].dtype;
        const char *wrap = dt == TC_F16 ? "tc_h2f(" : dt == TC_BF16 ? "tc_bf2f(" : "";
        put(b, "%sconst %s x%d = %sin%d[", I, reg_t(dt), k, wrap, k);
        if (G->mode[k] == IN_SCALAR) {
            put(b, "0");
        } else if (G->mode[k] == IN_FLAT) {
            put(b, "i");
        } else {
            bool any = false;
            for (int d = 0; d < G->cnd; d++) {
                int64_t s = G->cst[k][d];
                if (s == 0) continue;
                if (s == 1)
                    put(b, "%sc%d", any ? " + " : "", d);
                else
                    put(b, "%sc%d * (tc_idx)%lld", any ? " + " : "", d, (long long)s);
                any = true;
            }
            if (!any) put(b, "0");
        }
        put(b, "]%s;\n", *wrap ? ")" : "");
    }
    for (int m = 0; m < G->nsteps; m++) member_stmt(G, m, b);
    for (int o = 0; o < G->grp->nouts; o++) {
        int m = find_member(G, G->nsteps, G->grp->outs[o]);
        if (m < 0) continue; /* the reduction's result: written once per row */
        int dt = G->g->vals[G->grp->outs[o]].dtype;
        const char *wrap = dt == TC_F16 ? "tc_f2h" : dt == TC_BF16 ? "tc_f2bf" : "";
        if (*wrap)
            put(b, "%sout%d[i] = %s(v%d);\n", I, o, wrap, m);
        else
            put(b, "%sout%d[i] = v%d;\n", I, o, m);
    }
}

/* out<o>[idx] = the reduction's double s (mean divided by count), in the output dtype. */
static void put_red_store(const gen *G, sbuf *b, const char *indent, const char *idx, int64_t count)
{
    int o = 0;
    while (o < G->grp->nouts && G->grp->outs[o] != G->red->out[0]) o++;
    int dt = G->g->vals[G->red->out[0]].dtype;
    const char *wrap = dt == TC_F16 ? "tc_f2h" : dt == TC_BF16 ? "tc_f2bf" : "";
    const char *cast = dt == TC_F64 ? "" : "(float)";
    if (G->red->op == TC_OP_MEAN)
        put(b, "%sout%d[%s] = %s(%s(s / %lld.0));\n", indent, o, idx, wrap, cast, (long long)count);
    else
        put(b, "%sout%d[%s] = %s(%ss);\n", indent, o, idx, wrap, cast);
}

static void put_kernel(gen *G, sbuf *b, size_t *name_at)
{
    G->ind = "        ";
    int nins = G->grp->nins, nouts = G->grp->nouts;
    put(b, "extern \"C\" __global__ void __launch_bounds__(%d) ", TC_CUDA_FUSED_BLOCK);
    *name_at = b->n;
    put(b, "tc_fused_0000000000000000(");
    for (int k = 0; k < nins; k++)
        put(b, "%sconst %s *in%d", k ? ", " : "", store_t[G->g->vals[G->grp->ins[k]].dtype], k);
    for (int o = 0; o < nouts; o++)
        put(b, "%s%s *out%d", nins + o ? ", " : "", store_t[G->g->vals[G->grp->outs[o]].dtype], o);
    int red = !G->red ? TC_CUDA_RED_NONE : G->red->p.i[0] == -1 || G->nd == 0 ? TC_CUDA_RED_ALL : TC_CUDA_RED_ROWS;
    if (red == TC_CUDA_RED_ALL) put(b, ", double *part, unsigned int *count");
    put(b, ")\n{\n");
    const char *loop = "    for (tc_idx i = (tc_idx)blockIdx.x * blockDim.x + threadIdx.x; i < (tc_idx)%lldu; "
                       "i += (tc_idx)gridDim.x * blockDim.x) {\n";
    if (red == TC_CUDA_RED_NONE) {
        put(b, loop, (long long)G->n);
        put_body(G, b);
        put(b, "    }\n}\n");
        return;
    }
    int m = find_member(G, G->nsteps, G->red->in[0]);
    char rv[16];
    if (m >= 0)
        snprintf(rv, sizeof rv, "v%d", m);
    else
        snprintf(rv, sizeof rv, "x%d", find_input(G, G->red->in[0]));
    if (red == TC_CUDA_RED_ROWS) {
        int64_t L = G->size[G->nd - 1], rows = G->n / L;
        put(b, "    /* one block per row of %lld: %s along the last dim */\n", (long long)L,
            tc_graph_op_name(G->red->op));
        put(b, "    for (tc_idx row = blockIdx.x; row < (tc_idx)%lldu; row += gridDim.x) {\n", (long long)rows);
        put(b, "        double s = 0.0;\n");
        put(b, "        for (tc_idx j = threadIdx.x; j < (tc_idx)%lldu; j += blockDim.x) {\n", (long long)L);
        put(b, "            const tc_idx i = row * (tc_idx)%lldu + j;\n", (long long)L);
        G->ind = "            ";
        put_body(G, b);
        put(b, "            s += (double)%s;\n        }\n        s = tc_block_sum(s);\n", rv);
        put(b, "        if (threadIdx.x == 0) ");
        put_red_store(G, b, "", "row", L);
        put(b, "    }\n}\n");
        return;
    }
    put(b, "    /* %s of all %lld elements: block partials, the last block adds them in order */\n",
        tc_graph_op_name(G->red->op), (long long)G->n);
    put(b, "    double s = 0.0;\n");
    put(b, loop, (long long)G->n);
    put_body(G, b);
    put(b, "        s += (double)%s;\n    }\n", rv);
    put(b, "    s = tc_block_sum(s);\n"
           "    __shared__ bool last;\n"
           "    if (threadIdx.x == 0) {\n"
           "        part[blockIdx.x] = s;\n"
           "        __threadfence();\n"
           "        last = atomicAdd(count, 1u) == gridDim.x - 1;\n"
           "        if (last) __threadfence(); /* acquire: the other blocks' partials, fenced before their add */\n"
           "    }\n"
           "    __syncthreads();\n"
           "    if (!last) return;\n"
           "    s = 0.0;\n"
           "    for (unsigned int k = threadIdx.x; k < gridDim.x; k += blockDim.x) s += ((volatile double *)part)[k];\n"
           "    s = tc_block_sum(s);\n"
           "    if (threadIdx.x == 0) {\n");
    put_red_store(G, b, "        ", "0", G->n);
    put(b, "        *count = 0u; /* ready for the next launch */\n    }\n}\n");
}

/* ---- entry points ----------------------------------------------------------------------------- */

static tc_status check_reduction(gen *G)
{
    const tc_gnode *r = G->red;
    const char *nm = tc_graph_op_name(r->op);
    if (r->nin != 1 || r->nout != 1 || r->in[0] < 0 || r->out[0] < 0) return refuse(G, "%s must read one value", nm);
    if (find_member(G, G->nsteps, r->in[0]) < 0 && find_input(G, r->in[0]) < 0)
        return refuse(G, "%s reads %%%d, not a value of the group", nm, r->in[0]);
    const tc_gval *x = &G->g->vals[r->in[0]], *y = &G->g->vals[r->out[0]];
    bool all = r->p.i[0] == -1 || G->nd == 0, last = G->nd > 0 && r->p.i[0] == G->nd - 1;
    if (!all && !last)
        return refuse(G, "%s over dim %lld of %d dims: only all elements or the last dim are generated", nm,
                      (long long)r->p.i[0], G->nd);
    if (!is_float(x->dtype) || y->dtype != x->dtype)
        return refuse(G, "%s of %s to %s: only float reductions to their own dtype are generated", nm,
                      tc_dtype_name((tc_dtype)x->dtype), tc_dtype_name((tc_dtype)y->dtype));
    if (x->ndim != G->nd || memcmp(x->size, G->size, sizeof(int64_t) * (size_t)G->nd) != 0)
        return refuse(G, "%s reads a value not of the group's shape", nm);
    bool listed = false;
    for (int o = 0; o < G->grp->nouts; o++) listed |= G->grp->outs[o] == r->out[0];
    if (!listed) return refuse(G, "the result of %s is not a group output", nm);
    note_dtype(G, y->dtype);
    return TC_OK;
}

static void make_label(const tc_graph *g, const tc_ggroup *grp, int32_t id, char *buf, size_t cap)
{
    int k = snprintf(buf, cap, "fused group %d (", id);
    for (int i = 0; i < grp->nnodes && k > 0 && (size_t)k < cap; i++) {
        int32_t node = grp->nodes[i];
        const char *nm = node >= 0 && node < g->nnodes ? tc_graph_op_name(g->nodes[node].op) : "?";
        k += snprintf(buf + k, cap - (size_t)k, "%s%s", i ? " " : "", nm);
    }
    if (k > 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, ")");
}

tc_status tc_cuda_codegen(const tc_graph *g, int32_t group, const int64_t *const *in_strides, tc_cuda_kernel *out)
{
    if (!out) return tc_set_error(TC_ERR_ARG, "cuda codegen: NULL result");
    memset(out, 0, sizeof *out);
    if (!g) return tc_set_error(TC_ERR_ARG, "cuda codegen: NULL graph");
    if (group < 0 || group >= g->ngroups)
        return tc_set_error(TC_ERR_ARG, "cuda codegen: group %d out of range (the graph has %d)", group, g->ngroups);
    const tc_ggroup *grp = &g->groups[group];
    make_label(g, grp, group, out->label, sizeof out->label);
    gen G = {.g = g, .grp = grp, .label = out->label};
    if (grp->nnodes < 1 || grp->nnodes > TC_FUSE_MAX_MEMBERS || grp->nins < 0 || grp->nins > TC_FUSE_MAX_INS ||
        grp->nouts < 1 || grp->nouts > TC_FUSE_MAX_MEMBERS)
        return refuse(&G, "%d members, %d inputs, %d outputs is beyond the generator's limits", grp->nnodes, grp->nins,
                      grp->nouts);
    for (int i = 0; i < grp->nnodes; i++)
        if (grp->nodes[i] < 0 || grp->nodes[i] >= g->nnodes)
            return refuse(&G, "member %d is node %d of %d", i, grp->nodes[i], g->nnodes);
    for (int k = 0; k < grp->nins; k++)
        if (grp->ins[k] < 0 || grp->ins[k] >= g->nvals)
            return refuse(&G, "input %d is value %d of %d", k, grp->ins[k], g->nvals);
    for (int o = 0; o < grp->nouts; o++)
        if (grp->outs[o] < 0 || grp->outs[o] >= g->nvals)
            return refuse(&G, "output %d is value %d of %d", o, grp->outs[o], g->nvals);
    const tc_gnode *last = &g->nodes[grp->nodes[grp->nnodes - 1]];
    if (last->op == TC_OP_SUM || last->op == TC_OP_MEAN) G.red = last;
    G.nsteps = grp->nnodes - (G.red ? 1 : 0);
    if (G.nsteps < 1) return refuse(&G, "no elementwise member");
    const tc_gnode *first = &g->nodes[grp->nodes[0]];
    if (first->nout < 1 || first->out[0] < 0) return refuse(&G, "member 0 has no result");
    const tc_gval *shape = &g->vals[first->out[0]];
    G.nd = shape->ndim;
    memcpy(G.size, shape->size, sizeof G.size);
    G.n = tc_numel_of(G.nd, G.size);
    if (G.n < 1) return refuse(&G, "an empty iteration space");
    if (G.red && (G.nd > 0 && G.red->p.i[0] != -1) && G.size[G.nd - 1] < 1) return refuse(&G, "empty rows");

    sbuf fn = {0}, body = {0};
    fkey fk[TC_FUSE_MAX_MEMBERS];
    int nf = 0;
    tc_status s = TC_OK;
    for (int m = 0; m < G.nsteps && s == TC_OK; m++) s = member_decl(&G, m, fk, &nf, &fn);
    if (s == TC_OK && G.red) s = check_reduction(&G);
    for (int o = 0; o < grp->nouts && s == TC_OK; o++)
        if (find_member(&G, G.nsteps, grp->outs[o]) < 0 && !(G.red && grp->outs[o] == G.red->out[0]))
            s = refuse(&G, "output %d (%%%d) is not a member's value", o, grp->outs[o]);
    for (int k = 0; k < grp->nins && s == TC_OK; k++) s = plan_input(&G, k, in_strides ? in_strides[k] : NULL);
    if (s) goto done;
    coalesce(&G);

    char sizes[TC_SHAPE_BUF];
    put(&body, "/* tocha: %s -- generated by core/graph/cuda_codegen.c from the formulas of ops.def.\n",
        strchr(out->label, '(') ? strchr(out->label, '(') : out->label);
    put(&body, " * iteration sizes %s, %lld elements. Launch with %d threads per block. */\n\n",
        tc_sizes_str(G.nd, G.size, sizes, sizeof sizes), (long long)G.n, TC_CUDA_FUSED_BLOCK);
    put_helpers(&G, &body);
    if (fn.p) put(&body, "%s", fn.p);
    size_t name_at = 0;
    put_kernel(&G, &body, &name_at);
    if (body.oom || fn.oom) {
        s = tc_set_error(TC_ERR_MEMORY, "cuda codegen: %s: out of memory for the kernel text", out->label);
        goto done;
    }
    /* the entry point is named after the text (with the name zeroed): same text, same name */
    uint64_t h = fnv1a(body.p, body.n, 1469598103934665603ull);
    char name[32];
    snprintf(name, sizeof name, "tc_fused_%016llx", (unsigned long long)h);
    memcpy(body.p + name_at, name, strlen(name));
    memcpy(out->name, name, strlen(name) + 1);
    out->src = body.p, out->len = body.n;
    body.p = NULL;
    out->nins = grp->nins, out->nouts = grp->nouts, out->n = G.n, out->rows = 1;
    out->reduce = !G.red ? TC_CUDA_RED_NONE : G.red->p.i[0] == -1 || G.nd == 0 ? TC_CUDA_RED_ALL : TC_CUDA_RED_ROWS;
    if (out->reduce == TC_CUDA_RED_ROWS) out->rows = G.n / G.size[G.nd - 1];
done:
    free(fn.p), free(body.p);
    return s;
}

void tc_cuda_kernel_free(tc_cuda_kernel *k)
{
    if (!k) return;
    free(k->src);
    k->src = NULL, k->len = 0;
}

int64_t tc_cuda_kernel_grid(const tc_cuda_kernel *k, int sms)
{
    /* enough blocks to fill the device a few times; the grid-stride loops do the rest */
    int64_t cap = (int64_t)(sms > 0 ? sms : 1) * 16, need;
    if (!k) return 1;
    need = k->reduce == TC_CUDA_RED_ROWS ? k->rows : (k->n + TC_CUDA_FUSED_BLOCK - 1) / TC_CUDA_FUSED_BLOCK;
    if (need < 1) need = 1;
    return need < cap ? need : cap;
}
