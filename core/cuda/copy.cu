/* copy.cu -- the data-movement kinds on device tensors: copy/convert (TC_OP_COPY), where
 * (TC_OP_WHERE) and cat (TC_OP_CAT).
 *
 * All three walk strided views through one coalesced geometry (cu_elem.h): arg 0 the
 * result, the others its inputs broadcast to it (stride 0). The CPU kernels are the spec
 * (cpu/ew.c tc_cpu_convert and tc_cpu_select, cpu/join.c):
 *  - convert: same dtype is a bit copy (a device-to-device memcpy when both sides are
 *    contiguous); across dtypes every value goes through double with the CPU's rules
 *    (cu_load_as_double / cu_store_double: float -> integer truncates and saturates,
 *    NaN -> 0, -> bool is != 0, half targets round through float to nearest even). A
 *    source that does not broadcast to the result but has as many elements (Torch7's copy
 *    between unrelated shapes) is read in its own row-major order: gathered into a
 *    contiguous scratch buffer first, then converted as if it had the result's shape.
 *  - where: out = cond ? a : b, cond uint8 or bool (read as bytes, non-zero is true),
 *    a and b the result's dtype: a bit copy by element size.
 *  - cat: each input (skipping the ones the CPU skips: other rank or no elements) is bit
 *    copied into its slice of the result along dim i0. An input lying exactly on its own
 *    slice (memory planning builds cats in place) is left alone; any other overlap of an
 *    input with the result builds the result in scratch memory first, as the CPU does.
 */
#include "cuda_internal.h"
#include "cu_elem.h"
#include <stdint.h>
#include <utility>

/* ---- kernels ------------------------------------------------------------------------- */

/* out[off0] = src[off1] for any element type of this size. */
template <class T, class G, class I> __global__ void copy_kernel(I n, G g, T *out, const T *src)
{
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += step) {
        I off[2];
        geom_offsets(&g, i, 2, off);
        out[off[0]] = src[off[1]];
    }
}

/* One (from, to) pair of dtypes; the element sizes and the switches inside the load and
 * the store fold away because FROM and TO are constants. */
template <int FROM, int TO, class G, class I> __global__ void convert_kernel(I n, G g, char *out, const char *src)
{
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += step) {
        I off[2];
        geom_offsets(&g, i, 2, off);
        /* byte offsets in 64 bits: I may be int32, whose element offsets fit but bytes may not */
        cu_store_double(TO, out + (int64_t)off[0] * cu_dtype_size(TO),
                        cu_load_as_double(FROM, src + (int64_t)off[1] * cu_dtype_size(FROM)));
    }
}

template <class T, class G, class I> __global__ void where_kernel(I n, G g, T *out, const uint8_t *cond, const T *a, const T *b)
{
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += step) {
        I off[4];
        geom_offsets(&g, i, 4, off);
        out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
}

/* ---- launches ------------------------------------------------------------------------ */

template <class T> static void copy_launch(int dev, const cu_geom *g, void *out, const void *src)
{
    int64_t n = cu_geom_numel(g);
    unsigned grid = (unsigned)cu_grid_for(dev, n);
    if (cu_geom_fits32(g))
        copy_kernel<T, cu_geom32, int32_t><<<grid, CU_BLOCK, 0, cu_stream()>>>((int32_t)n, cu_geom32_from(g), (T *)out, (const T *)src);
    else
        copy_kernel<T, cu_geom64, int64_t><<<grid, CU_BLOCK, 0, cu_stream()>>>(n, cu_geom64_from(g), (T *)out, (const T *)src);
}

/* A bit copy of es-byte elements over a coalesced geometry with n > 0 elements. */
static tc_status bit_copy(int dev, const char *name, const cu_geom *g, int es, void *out, const void *src)
{
    bool dense = g->nd == 0 || (g->nd == 1 && g->stride[0][0] == 1 && g->stride[1][0] == 1);
    if (dense) { /* both contiguous: the copy engine */
        if (out == src) return TC_OK;
        return cu_check(cudaMemcpyAsync(out, src, (size_t)cu_geom_numel(g) * (size_t)es, cudaMemcpyDeviceToDevice, cu_stream()), name);
    }
    switch (es) {
    case 1: copy_launch<uint8_t>(dev, g, out, src); break;
    case 2: copy_launch<uint16_t>(dev, g, out, src); break;
    case 4: copy_launch<uint32_t>(dev, g, out, src); break;
    default: copy_launch<uint64_t>(dev, g, out, src); break;
    }
    return cu_check(cudaGetLastError(), name);
}

typedef void (*convert_fn)(int dev, const cu_geom *g, void *out, const void *src);

template <int FROM, int TO> static void convert_launch(int dev, const cu_geom *g, void *out, const void *src)
{
    int64_t n = cu_geom_numel(g);
    unsigned grid = (unsigned)cu_grid_for(dev, n);
    if (cu_geom_fits32(g))
        convert_kernel<FROM, TO, cu_geom32, int32_t>
            <<<grid, CU_BLOCK, 0, cu_stream()>>>((int32_t)n, cu_geom32_from(g), (char *)out, (const char *)src);
    else
        convert_kernel<FROM, TO, cu_geom64, int64_t><<<grid, CU_BLOCK, 0, cu_stream()>>>(n, cu_geom64_from(g), (char *)out, (const char *)src);
}

/* [from][to]; the diagonal is never used (bit copies). */
struct convert_row {
    convert_fn to[TC_DTYPE_COUNT];
};
template <int FROM, size_t... TO> static constexpr convert_row make_convert_row(std::index_sequence<TO...>)
{
    return convert_row{{(FROM == (int)TO ? nullptr : &convert_launch<FROM, (int)TO>)...}};
}
template <size_t... FROM> static constexpr auto make_convert_table(std::index_sequence<FROM...>)
{
    struct table {
        convert_row from[TC_DTYPE_COUNT];
    };
    return table{{make_convert_row<(int)FROM>(std::make_index_sequence<TC_DTYPE_COUNT>{})...}};
}
static const auto convert_table = make_convert_table(std::make_index_sequence<TC_DTYPE_COUNT>{});

/* Moves or converts src (sdt) into out (odt) over a coalesced geometry (n > 0). */
static tc_status move(int dev, const char *name, const cu_geom *g, void *out, int odt, const void *src, int sdt)
{
    if (odt == sdt) return bit_copy(dev, name, g, cu_dtype_size(odt), out, src);
    convert_table.from[sdt].to[odt](dev, g, out, src);
    return cu_check(cudaGetLastError(), name);
}

/* ---- geometry from views --------------------------------------------------------------- */

static bool good_view(const tc_cuda_view *v)
{
    return v->ndim >= 0 && v->ndim <= TC_MAX_DIMS && v->dtype >= 0 && v->dtype < TC_DTYPE_COUNT;
}

static int64_t view_numel(const tc_cuda_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->size[d];
    return n;
}

/* Geometry over out's shape with out as arg 0. */
static void geom_of(cu_geom *g, const tc_cuda_view *out, int narg)
{
    *g = cu_geom{};
    g->nd = out->ndim;
    g->narg = narg;
    for (int d = 0; d < out->ndim; d++) g->size[d] = out->size[d], g->stride[0][d] = out->stride[d];
}

/* ---- copy / convert ------------------------------------------------------------------- */

tc_status cu_op_convert(int dev, const tc_cuda_call *c)
{
    const char *name = cu_op_name(c->op);
    if (c->nin < 1 || !c->in || c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: wants 1 input and 1 result", name);
    const tc_cuda_view *src = &c->in[0], *out = &c->out[0];
    if (!good_view(src) || !good_view(out)) return cu_fail(TC_ERR_ARG, "%s: bad view (dtype or dims)", name);
    int64_t n = view_numel(out);
    if (n == 0) return TC_OK;
    if (!out->data || !src->data) return cu_fail(TC_ERR_ARG, "%s: NULL data", name);
    cu_geom g;
    geom_of(&g, out, 2);
    if (cu_bcast_strides(src->ndim, src->size, src->stride, out->ndim, out->size, g.stride[1])) {
        cu_geom_coalesce(&g);
        return move(dev, name, &g, out->data, out->dtype, src->data, src->dtype);
    }
    if (view_numel(src) != n)
        return cu_fail(TC_ERR_SHAPE, "%s: source of %lld elements does not fit a result of %lld", name,
                       (long long)view_numel(src), (long long)n);
    /* Unrelated shapes, equal counts: both in row-major order. Gather src contiguously. */
    int es = cu_dtype_size(src->dtype);
    void *tmp = nullptr;
    tc_status s = cu_scratch_alloc(dev, (size_t)n * (size_t)es, &tmp);
    if (s) return s;
    cu_geom gs = {};
    gs.nd = src->ndim;
    gs.narg = 2;
    int64_t st = 1;
    for (int d = src->ndim - 1; d >= 0; d--) {
        gs.size[d] = src->size[d];
        gs.stride[0][d] = st;
        gs.stride[1][d] = src->stride[d];
        st *= src->size[d];
    }
    cu_geom_coalesce(&gs);
    s = bit_copy(dev, name, &gs, es, tmp, src->data);
    if (!s) {
        st = 1;
        for (int d = out->ndim - 1; d >= 0; d--) g.stride[1][d] = st, st *= out->size[d];
        cu_geom_coalesce(&g);
        s = move(dev, name, &g, out->data, out->dtype, tmp, src->dtype);
    }
    tc_status f = cu_scratch_free(dev, tmp);
    return s ? s : f;
}

tc_status cu_convert_view(int dev, int op, const tc_cuda_view *dst, const tc_cuda_view *src)
{
    tc_cuda_call cc = {};
    cc.op = op, cc.nin = 1, cc.in = src, cc.nout = 1, cc.out[0] = *dst;
    return cu_op_convert(dev, &cc);
}

/* ---- where ------------------------------------------------------------------------------- */

template <class T> static void where_launch(int dev, const cu_geom *g, void *out, const void *cond, const void *a, const void *b)
{
    int64_t n = cu_geom_numel(g);
    unsigned grid = (unsigned)cu_grid_for(dev, n);
    if (cu_geom_fits32(g))
        where_kernel<T, cu_geom32, int32_t><<<grid, CU_BLOCK, 0, cu_stream()>>>((int32_t)n, cu_geom32_from(g), (T *)out,
                                                                (const uint8_t *)cond, (const T *)a, (const T *)b);
    else
        where_kernel<T, cu_geom64, int64_t>
            <<<grid, CU_BLOCK, 0, cu_stream()>>>(n, cu_geom64_from(g), (T *)out, (const uint8_t *)cond, (const T *)a, (const T *)b);
}

tc_status cu_op_select(int dev, const tc_cuda_call *c)
{
    const char *name = cu_op_name(c->op);
    if (c->nin != 3 || !c->in || c->nout < 1) return cu_fail(TC_ERR_ARG, "%s: wants 3 inputs and 1 result", name);
    const tc_cuda_view *out = &c->out[0];
    if (!good_view(out)) return cu_fail(TC_ERR_ARG, "%s: bad result view", name);
    for (int k = 0; k < 3; k++)
        if (!good_view(&c->in[k])) return cu_fail(TC_ERR_ARG, "%s: bad view of input %d", name, k + 1);
    if (c->in[0].dtype != TC_U8 && c->in[0].dtype != TC_BOOL)
        return cu_fail(TC_ERR_DTYPE, "%s: condition must be uint8 or bool, got %s", name, cu_dtype_name(c->in[0].dtype));
    for (int k = 1; k < 3; k++)
        if (c->in[k].dtype != out->dtype)
            return cu_fail(TC_ERR_DTYPE, "%s: input %d is %s but the result is %s", name, k + 1,
                           cu_dtype_name(c->in[k].dtype), cu_dtype_name(out->dtype));
    cu_geom g;
    geom_of(&g, out, 4);
    for (int k = 0; k < 3; k++) {
        const tc_cuda_view *v = &c->in[k];
        if (!cu_bcast_strides(v->ndim, v->size, v->stride, out->ndim, out->size, g.stride[k + 1]))
            return cu_fail(TC_ERR_SHAPE, "%s: input %d does not broadcast to the result", name, k + 1);
    }
    if (cu_geom_numel(&g) == 0) return TC_OK;
    if (!out->data || !c->in[0].data || !c->in[1].data || !c->in[2].data) return cu_fail(TC_ERR_ARG, "%s: NULL data", name);
    cu_geom_coalesce(&g);
    switch (cu_dtype_size(out->dtype)) {
    case 1: where_launch<uint8_t>(dev, &g, out->data, c->in[0].data, c->in[1].data, c->in[2].data); break;
    case 2: where_launch<uint16_t>(dev, &g, out->data, c->in[0].data, c->in[1].data, c->in[2].data); break;
    case 4: where_launch<uint32_t>(dev, &g, out->data, c->in[0].data, c->in[1].data, c->in[2].data); break;
    default: where_launch<uint64_t>(dev, &g, out->data, c->in[0].data, c->in[1].data, c->in[2].data); break;
    }
    return cu_check(cudaGetLastError(), name);
}

/* ---- cat ------------------------------------------------------------------------------------- */

/* Byte range [lo, hi) a view touches. */
static void byte_range(const tc_cuda_view *v, uintptr_t *lo, uintptr_t *hi)
{
    int64_t mn = 0, mx = 0;
    for (int d = 0; d < v->ndim; d++) {
        int64_t e = (v->size[d] - 1) * v->stride[d];
        if (e < 0) mn += e;
        else mx += e;
    }
    int64_t es = cu_dtype_size(v->dtype);
    *lo = (uintptr_t)v->data + (uintptr_t)(mn * es);
    *hi = (uintptr_t)v->data + (uintptr_t)((mx + 1) * es);
}

static bool joins(const tc_cuda_view *t, const tc_cuda_view *out) { return t->ndim == out->ndim && view_numel(t) > 0; }

/* Copies every joining input into consecutive slices of dst (out's sizes, dst's strides)
 * along dim. skip_exact: leave an input that already is its slice of dst. */
static tc_status fill_slices(int dev, const char *name, const tc_cuda_call *c, int dim, char *dst,
                             const int64_t *dstride, bool skip_exact)
{
    const tc_cuda_view *out = &c->out[0];
    int es = cu_dtype_size(out->dtype);
    int64_t at = 0;
    for (int i = 0; i < c->nin; i++) {
        const tc_cuda_view *t = &c->in[i];
        if (!joins(t, out)) continue;
        char *slice = dst + at * dstride[dim] * es;
        at += t->size[dim];
        bool exact = skip_exact && (char *)t->data == slice;
        for (int d = 0; exact && d < t->ndim; d++)
            if (t->size[d] > 1 && t->stride[d] != dstride[d]) exact = false;
        if (exact) continue;
        cu_geom g = {};
        g.nd = out->ndim;
        g.narg = 2;
        for (int d = 0; d < out->ndim; d++) {
            g.size[d] = d == dim ? t->size[d] : out->size[d];
            g.stride[0][d] = dstride[d];
        }
        if (!cu_bcast_strides(t->ndim, t->size, t->stride, g.nd, g.size, g.stride[1]))
            return cu_fail(TC_ERR_SHAPE, "%s: input %d does not match the result outside dim %d", name, i + 1, dim);
        cu_geom_coalesce(&g);
        tc_status s = bit_copy(dev, name, &g, es, slice, t->data);
        if (s) return s;
    }
    return TC_OK;
}

tc_status cu_op_join(int dev, const tc_cuda_call *c)
{
    const char *name = cu_op_name(c->op);
    if (c->nout < 1 || (c->nin > 0 && !c->in)) return cu_fail(TC_ERR_ARG, "%s: no result or inputs", name);
    const tc_cuda_view *out = &c->out[0];
    if (!good_view(out)) return cu_fail(TC_ERR_ARG, "%s: bad result view", name);
    int64_t n = view_numel(out);
    if (n == 0) return TC_OK;
    int64_t dim = c->params.i[0] < 0 ? c->params.i[0] + out->ndim : c->params.i[0];
    if (dim < 0 || dim >= out->ndim)
        return cu_fail(TC_ERR_INDEX, "%s: dim %lld out of range for %d-dim tensors", name, (long long)c->params.i[0],
                       out->ndim);
    if (!out->data) return cu_fail(TC_ERR_ARG, "%s: NULL result", name);
    uintptr_t olo, ohi;
    byte_range(out, &olo, &ohi);
    bool overlap = false;
    int64_t total = 0;
    for (int i = 0; i < c->nin; i++) {
        const tc_cuda_view *t = &c->in[i];
        if (!good_view(t)) return cu_fail(TC_ERR_ARG, "%s: bad view of input %d", name, i + 1);
        if (!joins(t, out)) continue;
        if (t->dtype != out->dtype)
            return cu_fail(TC_ERR_DTYPE, "%s: input %d is %s but the result is %s", name, i + 1, cu_dtype_name(t->dtype),
                           cu_dtype_name(out->dtype));
        if (!t->data) return cu_fail(TC_ERR_ARG, "%s: input %d is NULL", name, i + 1);
        total += t->size[dim];
        uintptr_t lo, hi;
        byte_range(t, &lo, &hi);
        if (lo < ohi && olo < hi) overlap = true;
    }
    if (total != out->size[dim])
        return cu_fail(TC_ERR_SHAPE, "%s: inputs add up to %lld along dim %lld, the result has %lld", name,
                       (long long)total, (long long)dim, (long long)out->size[dim]);
    /* Inputs already on their slices are left alone; overlap otherwise builds aside. The
     * exact-slice test first: an in-place cat overlaps its result by construction. */
    bool aside = false;
    if (overlap) {
        int64_t at = 0;
        int es = cu_dtype_size(out->dtype);
        for (int i = 0; i < c->nin && !aside; i++) {
            const tc_cuda_view *t = &c->in[i];
            if (!joins(t, out)) continue;
            uintptr_t lo, hi;
            byte_range(t, &lo, &hi);
            bool exact = (char *)t->data == (char *)out->data + at * out->stride[dim] * es;
            for (int d = 0; exact && d < t->ndim; d++)
                if (t->size[d] > 1 && t->stride[d] != out->stride[d]) exact = false;
            if (!exact && lo < ohi && olo < hi) aside = true;
            at += t->size[dim];
        }
    }
    if (!aside) return fill_slices(dev, name, c, (int)dim, (char *)out->data, out->stride, true);
    int es = cu_dtype_size(out->dtype);
    void *tmp = nullptr;
    tc_status s = cu_scratch_alloc(dev, (size_t)n * (size_t)es, &tmp);
    if (s) return s;
    int64_t cst[TC_MAX_DIMS], st = 1;
    for (int d = out->ndim - 1; d >= 0; d--) cst[d] = st, st *= out->size[d];
    s = fill_slices(dev, name, c, (int)dim, (char *)tmp, cst, false);
    if (!s) {
        cu_geom g;
        geom_of(&g, out, 2);
        for (int d = 0; d < out->ndim; d++) g.stride[1][d] = cst[d];
        cu_geom_coalesce(&g);
        s = bit_copy(dev, name, &g, es, out->data, tmp);
    }
    tc_status f = cu_scratch_free(dev, tmp);
    return s ? s : f;
}
