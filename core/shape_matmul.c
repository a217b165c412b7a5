/* shape_matmul.c -- the prepare step of the matrix-product kind (dot mv mm bmm addmv addmm
 * addr baddbmm addbmm): operand ranks, inner/batch sizes, dtypes, and the added tensor M
 * broadcasting to the result. Nothing is allocated here; every check a kernel could fail
 * on is made before any output is touched.
 *
 * Operands (ops.def): the add* ops take M, A, B in that order; the others take A, B.
 *   dot (n)(n) -> ()           mv (n,k)(k) -> (n)           mm (n,k)(k,m) -> (n,m)
 *   bmm (b,n,k)(b,k,m) -> (b,n,m)                            addr x(n) y(m) -> (n,m)
 *   addbmm sums the b products of a batch into one (n,m).
 */
#include "internal.h"
#include <limits.h>

/* Product operand names in messages, Torch7 style: the matrices of mm, the vectors of
 * addr, a matrix and a vector for mv. */
static tc_status rank_error(const char *op, const char *want, const tc_tensor *a, const tc_tensor *b)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE, "%s: expects %s, got %s and %s", op, want, tc_shape_str(a, b1, sizeof b1),
                        tc_shape_str(b, b2, sizeof b2));
}

static tc_status size_error(const char *op, const char *sep, const char *what, const tc_tensor *a,
                            const tc_tensor *b, int64_t sa, int64_t sb)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    return tc_set_error(TC_ERR_SHAPE, "%s: %s %s %s: %s %lld and %lld differ", op, tc_shape_str(a, b1, sizeof b1),
                        sep, tc_shape_str(b, b2, sizeof b2), what, (long long)sa, (long long)sb);
}

/* M must broadcast to the result without changing it: align trailing dims, each equal or 1. */
static tc_status check_added(const char *op, const tc_tensor *M, int nd, const int64_t *sz, const tc_tensor *a,
                             const tc_tensor *b)
{
    bool ok = M->ndim <= nd;
    for (int d = 0; ok && d < M->ndim; d++) {
        int64_t s = M->size[d], r = sz[nd - M->ndim + d];
        if (s != r && s != 1) ok = false;
    }
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF], b3[TC_SHAPE_BUF], b4[TC_SHAPE_BUF];
    if (!ok)
        return tc_set_error(TC_ERR_SHAPE, "%s: M %s cannot be broadcast to the result size %s of %s and %s", op,
                            tc_shape_str(M, b1, sizeof b1), tc_sizes_str(nd, sz, b2, sizeof b2),
                            tc_shape_str(a, b3, sizeof b3), tc_shape_str(b, b4, sizeof b4));
    /* A storage-less (Torch7 empty) M has ndim 0 and would broadcast as one element. */
    if (!M->storage && tc_numel_of(nd, sz) > 0)
        return tc_set_error(TC_ERR_SHAPE, "%s: M is an empty tensor but the result size is %s", op,
                            tc_sizes_str(nd, sz, b2, sizeof b2));
    return TC_OK;
}

tc_status tc_prepare_matmul(const tc_kcall *k, tc_outspec *spec)
{
    const char *op = k->info->name;
    bool add = k->nin == 3;
    const tc_tensor *M = add ? k->in[0] : NULL, *a = k->in[add ? 1 : 0], *b = k->in[add ? 2 : 1];
    for (int i = 1; i < k->nin; i++)
        if (k->in[i]->dtype != k->in[0]->dtype)
            return tc_set_error(TC_ERR_DTYPE, "%s: dtypes differ (%s and %s)", op,
                                tc_dtype_name((tc_dtype)k->in[0]->dtype), tc_dtype_name((tc_dtype)k->in[i]->dtype));
    int nd = 0;
    int64_t sz[3] = {0, 0, 0}, inner = 0;
    switch (k->op) {
    case TC_OP_DOT:
        if (a->ndim != 1 || b->ndim != 1) return rank_error(op, "two 1-D tensors", a, b);
        if (a->size[0] != b->size[0]) return size_error(op, ".", "sizes", a, b, a->size[0], b->size[0]);
        inner = a->size[0];
        break;
    case TC_OP_MV:
    case TC_OP_ADDMV:
        if (a->ndim != 2 || b->ndim != 1) return rank_error(op, "a 2-D matrix and a 1-D vector", a, b);
        if (a->size[1] != b->size[0]) return size_error(op, "x", "inner sizes", a, b, a->size[1], b->size[0]);
        nd = 1, sz[0] = a->size[0], inner = a->size[1];
        break;
    case TC_OP_MM:
    case TC_OP_ADDMM:
        if (a->ndim != 2 || b->ndim != 2) return rank_error(op, "two 2-D matrices", a, b);
        if (a->size[1] != b->size[0]) return size_error(op, "x", "inner sizes", a, b, a->size[1], b->size[0]);
        nd = 2, sz[0] = a->size[0], sz[1] = b->size[1], inner = a->size[1];
        break;
    case TC_OP_ADDR:
        if (a->ndim != 1 || b->ndim != 1) return rank_error(op, "two 1-D vectors", a, b);
        nd = 2, sz[0] = a->size[0], sz[1] = b->size[0], inner = 1;
        break;
    case TC_OP_BMM:
    case TC_OP_BADDBMM:
    case TC_OP_ADDBMM:
        if (a->ndim != 3 || b->ndim != 3) return rank_error(op, "two 3-D batches of matrices", a, b);
        if (a->size[0] != b->size[0]) return size_error(op, "x", "batch sizes", a, b, a->size[0], b->size[0]);
        if (a->size[2] != b->size[1]) return size_error(op, "x", "inner sizes", a, b, a->size[2], b->size[1]);
        inner = a->size[2];
        if (k->op == TC_OP_ADDBMM) nd = 2, sz[0] = a->size[1], sz[1] = b->size[2];
        else nd = 3, sz[0] = a->size[0], sz[1] = a->size[1], sz[2] = b->size[2];
        break;
    default:
        return tc_set_error(TC_ERR_INTERNAL, "%s: not a matrix product", op);
    }
    if (M) TRY(check_added(op, M, nd, sz, a, b));
    /* BLAS takes 32-bit sizes; the kernel copies operands whose strides do not fit, so only
     * the sizes themselves limit it. */
    if (tc_dtype_is_float((tc_dtype)a->dtype)) {
        int64_t rows = nd == 0 ? 1 : sz[nd >= 2 ? nd - 2 : 0], cols = nd >= 2 ? sz[nd - 1] : 1;
        int64_t big = rows > cols ? rows : cols;
        if (inner > big) big = inner;
        if (big > INT_MAX)
            return tc_set_error(TC_ERR_UNSUPPORTED, "%s: size %lld exceeds the BLAS limit of %d", op, (long long)big,
                                INT_MAX);
    }
    spec->nout = 1;
    spec->dtype[0] = a->dtype;
    spec->ndim[0] = nd;
    memcpy(spec->size[0], sz, sizeof(int64_t) * (size_t)nd);
    return TC_OK;
}
