/* index.c -- CPU kernels of the index kind: index_select/copy/add/fill, gather,
 * scatter/scatter_add/scatter_fill, masked_fill/copy/select and nonzero.
 *
 * These ops move elements without looking at them, so they are written on the element
 * size (1/2/4/8-byte moves), not per dtype; only index_add and scatter_add do arithmetic
 * (one macro instantiated over the dtype list; f16/bf16 through tc_cpu_with_f32). Index
 * values, mask counts and shapes were all checked by the prepare step (shape_index.c), so
 * nothing here fails once the first element is written.
 *
 * One loop engine serves the family: a loop shape L and up to three operands -- W (written),
 * R (read), I (index or mask) -- with byte strides over L, walked one row (L's last dim) at
 * a time. An operand that is "indirect" has loop stride 0 along dim: its position there is
 * the index value read from I. index_* read one index per position along dim (I strides 0
 * in every other dim); gather/scatter read one per element (I has idx's own strides).
 * Ops that write through an index run on one thread (duplicate indices would race), but
 * scatter along the last dim of a contiguous dst, where rows write disjoint rows.
 */
#include "../internal.h"

enum { OW, OR, OI, NOPS }; /* operand slots */

/* p: each operand's pointer at the row start; st: their byte strides along the row; pos:
 * the row's multi-index over L's dims but the last. */
typedef void (*row_fn)(void *ctx, char **p, const int64_t *st, const int64_t *pos, int64_t n);

typedef struct loop {
    int nd;
    int64_t size[TC_MAX_DIMS];
    char *base[NOPS];
    int64_t st[NOPS][TC_MAX_DIMS];
    row_fn fn;
    void *ctx;
} loop;

/* Base of an absent operand or of a tensor without storage: every stride is 0 there, and no
 * row function reads it. Pointer arithmetic on NULL would be undefined. */
static char dummy[8];

static int wrap(int64_t dim, int ndim) { return (int)(dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim); }

/* L = (ndim, sizes); a 0-dim shape is looped as (1). */
static void loop_init(loop *l, int ndim, const int64_t *sizes, row_fn fn, void *ctx)
{
    memset(l, 0, sizeof *l);
    l->nd = ndim > 0 ? ndim : 1;
    if (ndim > 0) memcpy(l->size, sizes, sizeof(int64_t) * (size_t)ndim);
    else l->size[0] = 1;
    for (int a = 0; a < NOPS; a++) l->base[a] = dummy;
    l->fn = fn;
    l->ctx = ctx;
}

static void loop_shape_of(loop *l, const tc_tensor *t, row_fn fn, void *ctx)
{
    loop_init(l, t->ndim, t->size, fn, ctx);
    if (!t->storage) l->size[0] = 0; /* Torch7 empty tensor */
}

/* Operand a is t, of L's rank (or 0-dim), walked at L's positions. */
static void loop_operand(loop *l, int a, const tc_tensor *t)
{
    int64_t es = tc_elsize(t->dtype);
    l->base[a] = t->storage ? tc_base(t) : dummy;
    for (int d = 0; d < l->nd; d++) l->st[a][d] = d < t->ndim ? t->stride[d] * es : 0;
}

/* Operand a is t broadcast to L (masks). */
static void loop_operand_bcast(loop *l, int a, const tc_tensor *t)
{
    int64_t st[TC_MAX_DIMS], es = tc_elsize(t->dtype);
    tc_broadcast_strides(t, l->nd, l->size, st);
    l->base[a] = t->storage ? tc_base(t) : dummy;
    for (int d = 0; d < l->nd; d++) l->st[a][d] = t->ndim ? st[d] * es : 0;
}

/* A 1-dim index read at the position along dim (the index_* ops). */
static void loop_index_along(loop *l, const tc_tensor *idx, int dim)
{
    l->base[OI] = idx->storage ? tc_base(idx) : dummy;
    for (int d = 0; d < l->nd; d++) l->st[OI][d] = 0;
    l->st[OI][dim] = idx->ndim ? idx->stride[0] * (int64_t)sizeof(int64_t) : 0;
}

/* Makes operand a indirect along dim; returns its byte stride there. */
static int64_t loop_indirect(loop *l, int a, int dim)
{
    int64_t s = l->st[a][dim];
    l->st[a][dim] = 0;
    return s;
}

static int64_t loop_numel(const loop *l) { return tc_numel_of(l->nd, l->size); }

static void rows_range(void *vl, int64_t r0, int64_t r1)
{
    const loop *l = vl;
    int last = l->nd - 1;
    int64_t pos[TC_MAX_DIMS] = {0}, rem = r0, inner[NOPS];
    for (int d = last - 1; d >= 0; d--) {
        pos[d] = rem % l->size[d];
        rem /= l->size[d];
    }
    char *p[NOPS];
    for (int a = 0; a < NOPS; a++) {
        p[a] = l->base[a];
        for (int d = 0; d < last; d++) p[a] += pos[d] * l->st[a][d];
        inner[a] = l->st[a][last];
    }
    for (int64_t r = r0; r < r1; r++) {
        l->fn(l->ctx, p, inner, pos, l->size[last]);
        for (int d = last - 1; d >= 0; d--) { /* odometer over the row dims */
            for (int a = 0; a < NOPS; a++) p[a] += l->st[a][d];
            if (++pos[d] < l->size[d]) break;
            for (int a = 0; a < NOPS; a++) p[a] -= l->size[d] * l->st[a][d];
            pos[d] = 0;
        }
    }
}

static void loop_run(loop *l, bool parallel)
{
    int64_t n = loop_numel(l);
    if (n == 0) return;
    int64_t len = l->size[l->nd - 1], rows = n / len;
    int64_t grain = TC_PARALLEL_GRAIN / len;
    if (parallel) tc_parallel_for(rows, grain > 0 ? grain : 1, rows_range, l);
    else rows_range(l, 0, rows);
}

/* ---- element moves ------------------------------------------------------------------------ */

/* One element of es bytes; a constant-size memcpy compiles to a single move. */
static inline void put1(int64_t es, char *w, const void *r)
{
    switch (es) {
    case 1: memcpy(w, r, 1); break;
    case 2: memcpy(w, r, 2); break;
    case 4: memcpy(w, r, 4); break;
    default: memcpy(w, r, 8); break;
    }
}

#define MOVE_ROW(T)                                                                         \
    for (int64_t i = 0; i < n; i++) *(T *)(w + i * ws) = *(const T *)(r + i * rs);          \
    return

static void copy_row(int64_t es, char *w, int64_t ws, const char *r, int64_t rs, int64_t n)
{
    if (ws == es && rs == es) {
        memcpy(w, r, (size_t)(n * es));
        return;
    }
    switch (es) {
    case 1: MOVE_ROW(uint8_t);
    case 2: MOVE_ROW(uint16_t);
    case 4: MOVE_ROW(uint32_t);
    default: MOVE_ROW(uint64_t);
    }
}

#define FILL_ROW(T)                                                                         \
    do {                                                                                    \
        T x;                                                                                \
        memcpy(&x, v, sizeof x);                                                            \
        for (int64_t i = 0; i < n; i++) *(T *)(w + i * ws) = x;                             \
    } while (0);                                                                            \
    return

static void fill_row(int64_t es, char *w, int64_t ws, const void *v, int64_t n)
{
    switch (es) {
    case 1: FILL_ROW(uint8_t);
    case 2: FILL_ROW(uint16_t);
    case 4: FILL_ROW(uint32_t);
    default: FILL_ROW(uint64_t);
    }
}

/* w[i] += r[i] along a row. Integers add in unsigned arithmetic: wraps, never undefined. */
typedef void (*add_fn)(char *w, int64_t ws, const char *r, int64_t rs, int64_t n);
#define ADD_FLOAT(E, T, sfx)                                                                \
    static void add_##sfx(char *w, int64_t ws, const char *r, int64_t rs, int64_t n)        \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) *(T *)(w + i * ws) += *(const T *)(r + i * rs);     \
    }
#define ADD_INT(E, T, sfx)                                                                  \
    static void add_##sfx(char *w, int64_t ws, const char *r, int64_t rs, int64_t n)        \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            *(T *)(w + i * ws) = (T)((uint64_t) * (T *)(w + i * ws) + (uint64_t) * (const T *)(r + i * rs)); \
    }
TC_FOR_EACH_FLOAT(ADD_FLOAT)
TC_FOR_EACH_INT(ADD_INT)
#define ADD_ENTRY(E, T, sfx) [E] = add_##sfx,
static const add_fn add_fns[TC_DTYPE_COUNT] = {TC_FOR_EACH_FLOAT(ADD_ENTRY) TC_FOR_EACH_INT(ADD_ENTRY)};

/* ---- index_* and gather/scatter --------------------------------------------------------- */

enum { K_COPY, K_ADD, K_FILL };

typedef struct ixctx {
    int kind, dt;
    int64_t es;
    bool w_ind, r_ind;  /* which of W, R takes its dim position from the index */
    int64_t wdim, rdim; /* their byte strides along dim */
    uint64_t fill;      /* K_FILL: the value's bytes */
    add_fn add;
} ixctx;

static void apply(const ixctx *c, char *w, int64_t ws, const char *r, int64_t rs, int64_t n)
{
    switch (c->kind) {
    case K_COPY: copy_row(c->es, w, ws, r, rs, n); break;
    case K_ADD: c->add(w, ws, r, rs, n); break;
    default: fill_row(c->es, w, ws, &c->fill, n); break;
    }
}

#define GATHER_ROW(T)                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                       \
        int64_t v = *(const int64_t *)(p[OI] + i * st[OI]);                                 \
        *(T *)(p[OW] + i * st[OW] + (c->w_ind ? v * c->wdim : 0)) =                         \
            *(const T *)(p[OR] + i * st[OR] + (c->r_ind ? v * c->rdim : 0));                \
    }                                                                                       \
    return

#define SCATTER_ADD_ROW(T)                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                       \
        int64_t v = *(const int64_t *)(p[OI] + i * st[OI]);                                 \
        *(T *)(p[OW] + i * st[OW] + v * c->wdim) += *(const T *)(p[OR] + i * st[OR]);       \
    }                                                                                       \
    return

static void ix_row(void *vc, char **p, const int64_t *st, const int64_t *pos, int64_t n)
{
    const ixctx *c = vc;
    (void)pos;
    if (st[OI] == 0) { /* one index value for the whole row: a plain strided row */
        int64_t v = *(const int64_t *)p[OI];
        apply(c, p[OW] + (c->w_ind ? v * c->wdim : 0), st[OW], p[OR] + (c->r_ind ? v * c->rdim : 0), st[OR], n);
        return;
    }
    if (c->kind == K_COPY) {
        switch (c->es) {
        case 1: GATHER_ROW(uint8_t);
        case 2: GATHER_ROW(uint16_t);
        case 4: GATHER_ROW(uint32_t);
        default: GATHER_ROW(uint64_t);
        }
    }
    if (c->kind == K_ADD && c->w_ind && !c->r_ind && (c->dt == TC_F32 || c->dt == TC_F64)) {
        /* scatter_add of floats (max pooling's gradient): the add inline, not a call an
         * element */
        if (c->dt == TC_F32) {
            SCATTER_ADD_ROW(float);
        }
        SCATTER_ADD_ROW(double);
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = *(const int64_t *)(p[OI] + i * st[OI]);
        apply(c, p[OW] + i * st[OW] + (c->w_ind ? v * c->wdim : 0), 0,
              p[OR] + i * st[OR] + (c->r_ind ? v * c->rdim : 0), 0, 1);
    }
}

static ixctx ix_ctx(int kind, const tc_tensor *w, double value)
{
    ixctx c = {.kind = kind, .dt = w->dtype, .es = tc_elsize(w->dtype), .add = add_fns[w->dtype]};
    if (kind == K_FILL) tc_store_double(w->dtype, &c.fill, value);
    return c;
}

/* index_select: out[.., j, ..] = src[.., idx[j], ..]   L = out's shape */
static void index_select(tc_tensor *out, const tc_tensor *src, const tc_tensor *idx, int dim)
{
    ixctx c = ix_ctx(K_COPY, out, 0);
    loop l;
    loop_shape_of(&l, out, ix_row, &c);
    if (loop_numel(&l) == 0) return;
    loop_operand(&l, OW, out);
    loop_operand(&l, OR, src);
    c.r_ind = true;
    c.rdim = loop_indirect(&l, OR, dim);
    loop_index_along(&l, idx, dim);
    loop_run(&l, true);
}

/* index_copy / index_add: dst[.., idx[j], ..] (+)= src[.., j, ..]   L = src's shape.
 * index_fill: dst[.., idx[j], ..] = value   L = dst's shape with idx's length along dim. */
static void index_write(int kind, tc_tensor *dst, const tc_tensor *src, const tc_tensor *idx, int dim, double value)
{
    ixctx c = ix_ctx(kind, dst, value);
    loop l;
    if (src) {
        loop_shape_of(&l, src, ix_row, &c);
    } else {
        loop_shape_of(&l, dst, ix_row, &c);
        l.size[dim] = tc_tensor_numel(idx);
    }
    if (loop_numel(&l) == 0) return;
    loop_operand(&l, OW, dst);
    if (src) loop_operand(&l, OR, src);
    c.w_ind = true;
    c.wdim = loop_indirect(&l, OW, dim);
    loop_index_along(&l, idx, dim);
    loop_run(&l, false);
}

/* gather: out[i][j] = src[idx[i][j]][j] (dim 0)   L = idx's shape. */
static void gather(tc_tensor *out, const tc_tensor *src, const tc_tensor *idx, int dim)
{
    ixctx c = ix_ctx(K_COPY, out, 0);
    loop l;
    loop_shape_of(&l, idx, ix_row, &c);
    if (loop_numel(&l) == 0) return;
    loop_operand(&l, OW, out);
    loop_operand(&l, OR, src);
    loop_operand(&l, OI, idx);
    c.r_ind = true;
    c.rdim = loop_indirect(&l, OR, dim);
    loop_run(&l, true);
}

/* scatter / scatter_add: dst[idx[i][j]][j] (+)= src[i][j]; scatter_fill: = value. L = idx. */
static void scatter(int kind, tc_tensor *dst, const tc_tensor *src, const tc_tensor *idx, int dim, double value)
{
    ixctx c = ix_ctx(kind, dst, value);
    loop l;
    loop_shape_of(&l, idx, ix_row, &c);
    if (loop_numel(&l) == 0) return;
    loop_operand(&l, OW, dst);
    if (src) loop_operand(&l, OR, src);
    loop_operand(&l, OI, idx);
    c.w_ind = true;
    c.wdim = loop_indirect(&l, OW, dim);
    /* Along the last dim each row writes only its own row of a contiguous dst, so rows
     * can run in parallel; along any other dim two rows may hit one element. */
    loop_run(&l, dim == l.nd - 1 && tc_tensor_is_contiguous(dst));
}

/* ---- masked ops and nonzero ------------------------------------------------------------- */

typedef struct mctx {
    int64_t es;
    uint64_t fill;   /* masked_fill */
    tc_elem_iter it; /* masked_copy: the source in row-major order */
    char *out;       /* masked_select / nonzero: the next result row */
    int64_t ost, cst; /* its row and column byte strides */
    int dtype, ndim; /* nonzero: the source's */
} mctx;

static void mfill_row(void *vc, char **p, const int64_t *st, const int64_t *pos, int64_t n)
{
    const mctx *c = vc;
    (void)pos;
    for (int64_t i = 0; i < n; i++)
        if (*(const uint8_t *)(p[OI] + i * st[OI])) put1(c->es, p[OW] + i * st[OW], &c->fill);
}

static void mcopy_row(void *vc, char **p, const int64_t *st, const int64_t *pos, int64_t n)
{
    mctx *c = vc;
    (void)pos;
    for (int64_t i = 0; i < n; i++)
        if (*(const uint8_t *)(p[OI] + i * st[OI])) put1(c->es, p[OW] + i * st[OW], tc_elem_iter_next(&c->it));
}

static void mselect_row(void *vc, char **p, const int64_t *st, const int64_t *pos, int64_t n)
{
    mctx *c = vc;
    (void)pos;
    for (int64_t i = 0; i < n; i++)
        if (*(const uint8_t *)(p[OI] + i * st[OI])) {
            put1(c->es, c->out, p[OR] + i * st[OR]);
            c->out += c->ost;
        }
}

static void nonzero_row(void *vc, char **p, const int64_t *st, const int64_t *pos, int64_t n)
{
    mctx *c = vc;
    for (int64_t i = 0; i < n; i++) {
        if (!tc_elem_nonzero(c->dtype, p[OR] + i * st[OR])) continue;
        for (int d = 0; d + 1 < c->ndim; d++) *(int64_t *)(c->out + d * c->cst) = pos[d];
        if (c->ndim > 0) *(int64_t *)(c->out + (c->ndim - 1) * c->cst) = i;
        c->out += c->ost;
    }
}

static void masked_write(tc_tensor *dst, const tc_tensor *mask, const tc_tensor *src, double value)
{
    mctx c = {.es = tc_elsize(dst->dtype)};
    loop l;
    loop_shape_of(&l, dst, src ? mcopy_row : mfill_row, &c);
    if (loop_numel(&l) == 0) return;
    loop_operand(&l, OW, dst);
    loop_operand_bcast(&l, OI, mask);
    if (src) {
        tc_elem_iter_init(&c.it, src);
        loop_run(&l, false); /* src is consumed in order */
    } else {
        tc_store_double(dst->dtype, &c.fill, value);
        loop_run(&l, true);
    }
}

/* out (n) = the elements of src where mask is set, src and mask broadcast together. */
static void masked_select(tc_tensor *out, const tc_tensor *src, const tc_tensor *mask)
{
    if (tc_tensor_numel(out) == 0) return; /* also covers every empty operand */
    const tc_tensor *pair[2] = {src, mask};
    int nd;
    int64_t sz[TC_MAX_DIMS];
    tc_broadcast_shapes(NULL, pair, 2, &nd, sz); /* checked by prepare */
    mctx c = {.es = tc_elsize(out->dtype), .out = tc_base(out)};
    c.ost = out->stride[0] * c.es;
    loop l;
    loop_init(&l, nd, sz, mselect_row, &c);
    loop_operand_bcast(&l, OR, src);
    loop_operand_bcast(&l, OI, mask);
    loop_run(&l, false);
}

/* out (n, ndim) int64 = the multi-indices of src's non-zero elements, row-major order. */
static void nonzero(tc_tensor *out, const tc_tensor *src)
{
    if (out->size[0] == 0) return;
    mctx c = {.out = tc_base(out), .dtype = src->dtype, .ndim = src->ndim};
    c.ost = out->stride[0] * (int64_t)sizeof(int64_t);
    c.cst = out->stride[1] * (int64_t)sizeof(int64_t);
    loop l;
    loop_shape_of(&l, src, nonzero_row, &c);
    loop_operand(&l, OR, src);
    loop_run(&l, false);
}

/* ---- the kernel ------------------------------------------------------------------------------ */

static bool writes_dst(tc_op op)
{
    switch (op) {
    case TC_OP_INDEX_COPY:
    case TC_OP_INDEX_ADD:
    case TC_OP_INDEX_FILL:
    case TC_OP_SCATTER:
    case TC_OP_SCATTER_ADD:
    case TC_OP_SCATTER_FILL:
    case TC_OP_MASKED_FILL:
    case TC_OP_MASKED_COPY: return true;
    default: return false;
    }
}

static bool shares(const tc_tensor *a, const tc_tensor *b) { return tc_tensor_overlaps(a, b); }

/* dst = src, same dtype and shape, through the convert kernel (coalesced, threaded). */
static tc_status copy_into(tc_tensor *dst, const tc_tensor *src)
{
    static const tc_params keep = {.i = {-1}};
    const tc_tensor *in[1] = {src};
    tc_tensor *out[1] = {dst};
    tc_kcall c = {.op = TC_OP_COPY, .info = tc_op_info(TC_OP_COPY), .in = in, .nin = 1, .p = &keep, .out = out,
                  .nout = 1};
    return tc_cpu_convert(&c);
}

static tc_status clone(const tc_tensor *t, tc_tensor **out)
{
    TRY(tc_tensor_alloc((tc_dtype)t->dtype, t->ndim, t->size, out));
    return copy_into(*out, t);
}

static void run_op(const tc_kcall *k, tc_tensor *w, const tc_tensor *const *in)
{
    const tc_params *p = k->p;
    int dim = wrap(p->i[0], in[0]->ndim);
    switch (k->op) {
    case TC_OP_INDEX_SELECT: index_select(w, in[0], in[1], dim); break;
    case TC_OP_INDEX_COPY: index_write(K_COPY, w, in[2], in[1], dim, 0); break;
    case TC_OP_INDEX_ADD: index_write(K_ADD, w, in[2], in[1], dim, 0); break;
    case TC_OP_INDEX_FILL: index_write(K_FILL, w, NULL, in[1], dim, p->s[0]); break;
    case TC_OP_GATHER: gather(w, in[0], in[1], dim); break;
    case TC_OP_SCATTER: scatter(K_COPY, w, in[2], in[1], dim, 0); break;
    case TC_OP_SCATTER_ADD: scatter(K_ADD, w, in[2], in[1], dim, 0); break;
    case TC_OP_SCATTER_FILL: scatter(K_FILL, w, NULL, in[1], dim, p->s[0]); break;
    case TC_OP_MASKED_FILL: masked_write(w, in[1], NULL, p->s[0]); break;
    case TC_OP_MASKED_COPY: masked_write(w, in[1], in[2], 0); break;
    case TC_OP_MASKED_SELECT: masked_select(w, in[0], in[1]); break;
    default: nonzero(w, in[0]); break;
    }
}

/* The result is written into W: out itself, or a private buffer when out shares memory with
 * an input (x:indexSelect(x, ...)), copied to out at the end. An "out is dst" op starts W
 * as a copy of dst unless it runs in place; in place, an index, mask or source that shares
 * dst's memory is read from a copy, so writes cannot change what is still to be read. */
static tc_status index_kernel(const tc_kcall *k)
{
    tc_tensor *out = k->out[0], *w = out, *tmp[4] = {0};
    const tc_tensor *in[3] = {0};
    bool dst = writes_dst(k->op), inplace = dst && out == k->in[0], overlap = false;
    tc_status s = TC_OK;
    for (int i = 0; i < k->nin; i++) {
        in[i] = k->in[i];
        if (shares(out, in[i]) && !(inplace && i == 0)) overlap = true;
    }
    if (overlap && !inplace) {
        if ((s = tc_tensor_alloc((tc_dtype)out->dtype, out->ndim, out->size, &tmp[3]))) goto done;
        w = tmp[3];
    }
    for (int i = 1; inplace && i < k->nin; i++) {
        if (!shares(out, in[i])) continue;
        if ((s = clone(in[i], &tmp[i]))) goto done;
        in[i] = tmp[i];
    }
    if (dst && !inplace && (s = copy_into(w, in[0]))) goto done;
    run_op(k, w, in);
    if (w != out) s = copy_into(out, w);
done:
    for (int i = 0; i < 4; i++) tc_tensor_release(tmp[i]);
    return s;
}

tc_status tc_cpu_index(const tc_kcall *k)
{
    bool adds = k->op == TC_OP_INDEX_ADD || k->op == TC_OP_SCATTER_ADD;
    if (adds && tc_kcall_has_half(k)) return tc_cpu_with_f32(k, index_kernel);
    return index_kernel(k);
}
