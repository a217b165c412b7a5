/* ew.cu -- CUDA elementwise kernels, instantiated from the formulas in ops.def.
 *
 * Every TC_EW line becomes a small struct (Op_<ID>) holding its float and integer formula
 * as two device function templates; ONE kernel template (ew_kernel) runs any of them over
 * any dtype, so no kernel body is written per op or per dtype. The launcher table is
 * built from the same X-macro, row = op (in ops.def order, so it is indexed by tc_op),
 * column = dtype; an entry is NULL where the op's flags refuse the dtype, exactly as the
 * dispatcher refuses it on the CPU.
 *
 * dtypes: f32/f64 compute in themselves with the float formula; f16/bf16 load into float,
 * compute with the float formula and round back at the store (as the CPU does); the
 * integer types and bool use the integer formula. Comparisons (CMP) store uint8.
 *
 * Layouts: cu_ew (the table's ew entry) takes contiguous operands or single elements
 * broadcast to all (step 0: x:add(5)). cu_op_ew (run() of the table) takes any strided
 * views: their dims are coalesced first (cu_elem.h), a layout that turns out flat takes the
 * plain kernel, any other the strided one (32-bit index math when indices and offsets fit).
 * Integer division ops (ZDIV) scan the divisor for zeros first and fail like the CPU.
 */
#include "cuda_internal.h"
#include "cu_elem.h"
#include "../scalar_math.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <type_traits>
#include <utility>

/* The integer formulas compare unsigned and bool values with 0 (abs, sign, clamp): true
 * for the signed types they are written for, pointless (and harmless) for these. */
#pragma nv_diag_suppress 186 /* pointless comparison of unsigned integer with zero */
#pragma nv_diag_suppress 68  /* integer conversion resulted in a change of sign */
#pragma GCC diagnostic ignored "-Wbool-operation"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wbool-compare"

#define DIFF TC_OPF_DIFF
#define FLT TC_OPF_FLT
#define INT TC_OPF_INT
#define BOOL TC_OPF_BOOL
#define CMP TC_OPF_CMP
#define ZDIV TC_OPF_ZDIV

/* ---- dtypes: storage type S and computing type C --------------------------------------- */

template <int DT> struct dtype_of;
#define DTYPE(DT, STORE, COMPUTE, NAME)                                                     \
    template <> struct dtype_of<DT> {                                                       \
        using S = STORE;                                                                    \
        using C = COMPUTE;                                                                  \
        static constexpr const char *name = NAME; /* as tc_dtype_name (not linked here) */  \
    };
DTYPE(TC_F32, float, float, "float32")
DTYPE(TC_F64, double, double, "float64")
DTYPE(TC_F16, __half, float, "float16")
DTYPE(TC_BF16, __nv_bfloat16, float, "bfloat16")
DTYPE(TC_U8, uint8_t, uint8_t, "uint8")
DTYPE(TC_I8, int8_t, int8_t, "int8")
DTYPE(TC_I16, int16_t, int16_t, "int16")
DTYPE(TC_I32, int32_t, int32_t, "int32")
DTYPE(TC_I64, int64_t, int64_t, "int64")
DTYPE(TC_BOOL, bool, bool, "bool")
#undef DTYPE

template <size_t... DT> static const char *dtype_name(int dt, std::index_sequence<DT...>)
{
    static const char *const names[] = {dtype_of<(int)DT>::name...};
    return names[dt];
}

__host__ __device__ static constexpr bool is_float_dt(int dt) { return dt == TC_F32 || dt == TC_F64 || dt == TC_F16 || dt == TC_BF16; }

/* Whether an op with these flags takes dtype dt (the dispatcher's rule, check_dtype_flags). */
__host__ __device__ static constexpr bool op_takes(int flags, int dt)
{
    return is_float_dt(dt) ? (flags & TC_OPF_FLT) != 0 : dt == TC_BOOL ? (flags & TC_OPF_BOOL) != 0 : (flags & TC_OPF_INT) != 0;
}

/* Loads widen half types to float; stores round float back to nearest even. Both through
 * the CPU's own conversions (cu_elem.h), so even NaN results carry the CPU's bits. */
__device__ __forceinline__ float widen(__half v) { return cu_f16_to_f32(__half_raw(v).x); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return cu_bf16_to_f32(__nv_bfloat16_raw(v).x); }
template <class S> __device__ __forceinline__ S widen(S v) { return v; }

template <class S> struct narrow_to {
    template <class V> __device__ static S from(V v) { return (S)v; }
};
template <> struct narrow_to<__half> {
    template <class V> __device__ static __half from(V v)
    {
        __half_raw r;
        r.x = cu_f32_to_f16((float)v);
        return __half(r);
    }
};
template <> struct narrow_to<__nv_bfloat16> {
    template <class V> __device__ static __nv_bfloat16 from(V v)
    {
        __nv_bfloat16_raw r;
        r.x = cu_f32_to_bf16((float)v);
        return __nv_bfloat16(r);
    }
};

/* ---- the op structs, one per TC_EW line ------------------------------------------------ */

/* T is the computing type: the formulas in ops.def name T, a, b, c, p0, p1. The result
 * keeps the formula's own type (bool for comparisons) until the kernel stores it. */
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt)                                               \
    struct Op_##ID {                                                                        \
        static constexpr const char *name = nm;                                             \
        static constexpr int arity = ar;                                                    \
        static constexpr int flags = fl;                                                    \
        template <class T> __device__ static auto float_formula(T a, T b, T c, T p0, T p1) { return ffmt; } \
        template <class T> __device__ static auto int_formula(T a, T b, T c, T p0, T p1) { return ifmt; }   \
    };
#define TC_OPK(ID, nm, kind, nin, nout, fl)
#include "../ops.def"
#undef TC_EW
#undef TC_OPK

/* ---- the kernel ----------------------------------------------------------------------- */

template <class Op, int DT> using out_t =
    std::conditional_t<(Op::flags & TC_OPF_CMP) != 0, uint8_t, typename dtype_of<DT>::S>;

/* out: n elements; x, y, z: the inputs (as many as Op::arity), each contiguous (step 1) or
 * one element (step 0). Grid-stride loop: any grid size covers any n. No __restrict__:
 * in-place ops pass an input as out (each element is read before it is written). */
template <class Op, int DT>
__global__ void ew_kernel(int64_t n, out_t<Op, DT> *out, const typename dtype_of<DT>::S *x,
                          const typename dtype_of<DT>::S *y, const typename dtype_of<DT>::S *z, int64_t sx,
                          int64_t sy, int64_t sz, typename dtype_of<DT>::C p0, typename dtype_of<DT>::C p1)
{
    using C = typename dtype_of<DT>::C;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        C a = C(), b = C(), c = C();
        if constexpr (Op::arity >= 1) a = widen(x[i * sx]);
        if constexpr (Op::arity >= 2) b = widen(y[i * sy]);
        if constexpr (Op::arity >= 3) c = widen(z[i * sz]);
        if constexpr (is_float_dt(DT))
            out[i] = narrow_to<out_t<Op, DT>>::from(Op::template float_formula<C>(a, b, c, p0, p1));
        else
            out[i] = narrow_to<out_t<Op, DT>>::from(Op::template int_formula<C>(a, b, c, p0, p1));
    }
}

/* ---- launch ----------------------------------------------------------------------------- */

enum { BLOCK = CU_BLOCK, BLOCKS_PER_SM = 16, MAX_DEVICES = 64 };

/* Enough blocks to fill the device a few times over; beyond that the grid-stride loop
 * does the rest. The SM count is read once per device. */
int64_t cu_grid_for(int dev, int64_t n)
{
    static int sm_cache[MAX_DEVICES]; /* 0: not read yet; a racing first read writes the same value */
    int sms = (dev >= 0 && dev < MAX_DEVICES) ? __atomic_load_n(&sm_cache[dev], __ATOMIC_RELAXED) : 0;
    if (sms <= 0) {
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) {
            (void)cudaGetLastError();
            sms = 132; /* an H100's count: a wrong guess only changes the grid size */
        } else if (dev >= 0 && dev < MAX_DEVICES) {
            __atomic_store_n(&sm_cache[dev], sms, __ATOMIC_RELAXED);
        }
    }
    int64_t need = (n + BLOCK - 1) / BLOCK, cap = (int64_t)sms * BLOCKS_PER_SM;
    return need < cap ? need : cap;
}

typedef tc_status (*ew_launch_fn)(int dev, int64_t n, void *out, const void *const *in, const int64_t *step,
                                  double s0, double s1);

template <class Op, int DT>
static tc_status ew_launch(int dev, int64_t n, void *out, const void *const *in, const int64_t *step, double s0,
                           double s1)
{
    using S = typename dtype_of<DT>::S;
    using C = typename dtype_of<DT>::C;
    const S *x = nullptr, *y = nullptr, *z = nullptr;
    int64_t sx = 0, sy = 0, sz = 0;
    if constexpr (Op::arity >= 1) x = (const S *)in[0], sx = step[0];
    if constexpr (Op::arity >= 2) y = (const S *)in[1], sy = step[1];
    if constexpr (Op::arity >= 3) z = (const S *)in[2], sz = step[2];
    ew_kernel<Op, DT><<<(unsigned)cu_grid_for(dev, n), BLOCK, 0, cu_stream()>>>(n, (out_t<Op, DT> *)out, x, y, z, sx, sy, sz, (C)s0,
                                                               (C)s1);
    /* Launch errors (bad configuration, no kernel image for this GPU) show up here; faults
     * inside the kernel surface at the next synchronising call. */
    return cu_check(cudaGetLastError(), Op::name);
}

/* ---- strided layouts (cu_op_ew: any strides, broadcast inputs with stride 0) ------------ */

/* The same formulas over a coalesced geometry G (cu_geom32 or cu_geom64 of cu_elem.h): arg 0
 * is out, args 1..arity the inputs; element i's offsets come from its row-major index. */
template <class Op, int DT, class G, class I>
__global__ void ew_strided_kernel(I n, G g, out_t<Op, DT> *out, const typename dtype_of<DT>::S *x,
                                  const typename dtype_of<DT>::S *y, const typename dtype_of<DT>::S *z,
                                  typename dtype_of<DT>::C p0, typename dtype_of<DT>::C p1)
{
    using C = typename dtype_of<DT>::C;
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += step) {
        I off[CU_MAXARG];
        geom_offsets(&g, i, Op::arity + 1, off);
        C a = C(), b = C(), c = C();
        if constexpr (Op::arity >= 1) a = widen(x[off[1]]);
        if constexpr (Op::arity >= 2) b = widen(y[off[2]]);
        if constexpr (Op::arity >= 3) c = widen(z[off[3]]);
        if constexpr (is_float_dt(DT))
            out[off[0]] = narrow_to<out_t<Op, DT>>::from(Op::template float_formula<C>(a, b, c, p0, p1));
        else
            out[off[0]] = narrow_to<out_t<Op, DT>>::from(Op::template int_formula<C>(a, b, c, p0, p1));
    }
}

typedef tc_status (*ew_call_fn)(int dev, const cu_geom *g, void *out, const void *const *in, double s0, double s1);

/* g is coalesced and has n > 0 elements; flat geometries take the plain kernel above. */
template <class Op, int DT>
static tc_status ew_call(int dev, const cu_geom *g, void *out, const void *const *in, double s0, double s1)
{
    using S = typename dtype_of<DT>::S;
    using C = typename dtype_of<DT>::C;
    int64_t n = cu_geom_numel(g);
    if (cu_geom_flat(g)) {
        int64_t step[3] = {0, 0, 0};
        for (int k = 0; k < Op::arity; k++) step[k] = g->nd ? g->stride[k + 1][0] : 0;
        return ew_launch<Op, DT>(dev, n, out, in, step, s0, s1);
    }
    const S *x = nullptr, *y = nullptr, *z = nullptr;
    if constexpr (Op::arity >= 1) x = (const S *)in[0];
    if constexpr (Op::arity >= 2) y = (const S *)in[1];
    if constexpr (Op::arity >= 3) z = (const S *)in[2];
    unsigned grid = (unsigned)cu_grid_for(dev, n);
    if (cu_geom_fits32(g))
        ew_strided_kernel<Op, DT, cu_geom32, int32_t><<<grid, BLOCK, 0, cu_stream()>>>((int32_t)n, cu_geom32_from(g),
                                                                       (out_t<Op, DT> *)out, x, y, z, (C)s0, (C)s1);
    else
        ew_strided_kernel<Op, DT, cu_geom64, int64_t><<<grid, BLOCK, 0, cu_stream()>>>(n, cu_geom64_from(g), (out_t<Op, DT> *)out,
                                                                       x, y, z, (C)s0, (C)s1);
    return cu_check(cudaGetLastError(), Op::name);
}

/* A launcher only where the op takes the dtype: the formula is never instantiated for a
 * dtype it was not written for (the float formula of exp on int8, say). */
template <class Op, int DT> static constexpr ew_launch_fn pick()
{
    if constexpr (op_takes(Op::flags, DT)) return &ew_launch<Op, DT>;
    else return nullptr;
}

template <class Op, int DT> static constexpr ew_call_fn pick_call()
{
    if constexpr (op_takes(Op::flags, DT)) return &ew_call<Op, DT>;
    else return nullptr;
}

struct ew_row {
    const char *name; /* NULL: not an elementwise op */
    int arity, flags;
    ew_launch_fn fn[TC_DTYPE_COUNT];
    ew_call_fn call[TC_DTYPE_COUNT];
};

template <class Op, size_t... DT> static constexpr ew_row make_row(std::index_sequence<DT...>)
{
    return ew_row{Op::name, Op::arity, Op::flags, {pick<Op, (int)DT>()...}, {pick_call<Op, (int)DT>()...}};
}

/* One row per ops.def line, in ops.def order: the row index is the tc_op. */
static const ew_row ew_table[] = {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) make_row<Op_##ID>(std::make_index_sequence<TC_DTYPE_COUNT>{}),
#define TC_OPK(ID, nm, kind, nin, nout, fl) ew_row{nullptr, 0, 0, {}, {}},
#include "../ops.def"
#undef TC_EW
#undef TC_OPK
};
static_assert(sizeof ew_table / sizeof ew_table[0] == TC_OP_COUNT, "ew_table must have one row per op");

/* ---- the table entry -------------------------------------------------------------------- */

tc_status cu_ew(int dev, int op, int dtype, int64_t n, void *out, const void *const *in, const int64_t *step,
                double s0, double s1)
{
    if (op < 0 || op >= TC_OP_COUNT || !ew_table[op].name)
        return cu_fail(TC_ERR_ARG, "cuda ew: op %d is not an elementwise op", op);
    const ew_row *row = &ew_table[op];
    if (dtype < 0 || dtype >= TC_DTYPE_COUNT) return cu_fail(TC_ERR_ARG, "cuda %s: bad dtype %d", row->name, dtype);
    ew_launch_fn fn = row->fn[dtype];
    if (!fn)
        return cu_fail(TC_ERR_UNSUPPORTED, "cuda %s: no CUDA kernel for %s", row->name,
                       dtype_name(dtype, std::make_index_sequence<TC_DTYPE_COUNT>{}));
    if (n < 0) return cu_fail(TC_ERR_ARG, "cuda %s: negative element count %lld", row->name, (long long)n);
    if (n == 0) return TC_OK;
    if (!out) return cu_fail(TC_ERR_ARG, "cuda %s: NULL output", row->name);
    if (row->arity > 0 && (!in || !step)) return cu_fail(TC_ERR_ARG, "cuda %s: NULL input list", row->name);
    for (int k = 0; k < row->arity; k++) {
        if (!in[k]) return cu_fail(TC_ERR_ARG, "cuda %s: input %d is NULL", row->name, k + 1);
        if (step[k] != 0 && step[k] != 1)
            return cu_fail(TC_ERR_UNSUPPORTED, "cuda %s: input %d has step %lld (only 1 or 0 so far)", row->name,
                           k + 1, (long long)step[k]);
    }
    tc_status s = cu_use_device(dev);
    if (s) return s;
    return fn(dev, n, out, in, step, s0, s1);
}

/* ---- run(): an elementwise op on strided views ------------------------------------------ */

/* Integer division by zero is an error found before anything is written, as on the CPU
 * (cpu/ew.c check_no_zero_divisor: TC_ERR_ARG "<op>: integer division by zero"). The
 * divisor is scanned on the device (each distinct element once: broadcast dims dropped)
 * and the answer read back, which waits for the queue: integer division is rare on a GPU. */
template <class S, class G, class I> __global__ void zero_kernel(I n, G g, const S *b, int *found)
{
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += step) {
        I off[1];
        geom_offsets(&g, i, 1, off);
        if (b[off[0]] == 0) *found = 1; /* every writer stores the same value */
    }
}

template <class S> static void zero_launch(int dev, const cu_geom *g, const void *b, int *found)
{
    int64_t n = cu_geom_numel(g);
    unsigned grid = (unsigned)cu_grid_for(dev, n);
    if (cu_geom_fits32(g))
        zero_kernel<S, cu_geom32, int32_t><<<grid, BLOCK, 0, cu_stream()>>>((int32_t)n, cu_geom32_from(g), (const S *)b, found);
    else
        zero_kernel<S, cu_geom64, int64_t><<<grid, BLOCK, 0, cu_stream()>>>(n, cu_geom64_from(g), (const S *)b, found);
}

static tc_status check_no_zero_divisor(int dev, const char *name, const tc_cuda_view *b)
{
    cu_geom g = {};
    g.narg = 1;
    g.nd = b->ndim;
    for (int d = 0; d < b->ndim; d++) {
        g.size[d] = b->stride[d] == 0 ? 1 : b->size[d];
        g.stride[0][d] = b->stride[d];
    }
    cu_geom_coalesce(&g);
    if (cu_geom_numel(&g) == 0) return TC_OK;
    /* The check reads a flag back on the host: a wait that a graph capture cannot record. */
    if (cu_capturing(dev))
        return cu_fail(TC_ERR_UNSUPPORTED,
                       "%s: cannot check an integer divisor for zero while a CUDA graph is being captured on cuda:%d "
                       "(the check reads device values on the host); divide floats, or run it outside the capture",
                       name, dev);
    int *found = nullptr, host = 0;
    tc_status s = cu_scratch_alloc(dev, sizeof(int), (void **)&found);
    if (s) return s;
    s = cu_check(cudaMemsetAsync(found, 0, sizeof(int), cu_stream()), name);
    if (!s) {
        switch (b->dtype) {
        case TC_U8: zero_launch<uint8_t>(dev, &g, b->data, found); break;
        case TC_I8: zero_launch<int8_t>(dev, &g, b->data, found); break;
        case TC_I16: zero_launch<int16_t>(dev, &g, b->data, found); break;
        case TC_I32: zero_launch<int32_t>(dev, &g, b->data, found); break;
        default: zero_launch<int64_t>(dev, &g, b->data, found); break;
        }
        s = cu_check(cudaGetLastError(), name);
    }
    if (!s) s = cu_check(cudaMemcpyAsync(&host, found, sizeof(int), cudaMemcpyDeviceToHost, cu_stream()), name);
    if (!s) s = cu_check(cudaStreamSynchronize(cu_stream()), name);
    tc_status f = cu_scratch_free(dev, found);
    if (s) return s;
    if (f) return f;
    return host ? cu_fail(TC_ERR_ARG, "%s: integer division by zero", name) : TC_OK;
}

tc_status cu_op_ew(int dev, const tc_cuda_call *c)
{
    const ew_row *row = &ew_table[c->op];
    const char *name = cu_op_name(c->op);
    if (!row->name) return cu_fail(TC_ERR_ARG, "%s: not an elementwise op", name);
    if (c->nin != row->arity || c->nout < 1 || (row->arity > 0 && !c->in))
        return cu_fail(TC_ERR_ARG, "%s: called with %d inputs and %d outputs (wants %d and 1)", name, c->nin, c->nout,
                       row->arity);
    const tc_cuda_view *o = &c->out[0];
    int dt = row->arity > 0 ? c->in[0].dtype : o->dtype; /* the computing dtype, as the CPU picks it */
    if (dt < 0 || dt >= TC_DTYPE_COUNT) return cu_fail(TC_ERR_DTYPE, "%s: bad dtype %d", name, dt);
    ew_call_fn fn = row->call[dt];
    if (!fn) return cu_unsupported(c);
    int odt = (row->flags & TC_OPF_CMP) ? TC_U8 : dt;
    if (o->dtype != odt)
        return cu_fail(TC_ERR_DTYPE, "%s: result is %s, expected %s", name, cu_dtype_name(o->dtype), cu_dtype_name(odt));
    if (o->ndim < 0 || o->ndim > TC_MAX_DIMS) return cu_fail(TC_ERR_ARG, "%s: result has %d dims", name, o->ndim);
    cu_geom g = {};
    g.nd = o->ndim;
    g.narg = row->arity + 1;
    for (int d = 0; d < o->ndim; d++) g.size[d] = o->size[d], g.stride[0][d] = o->stride[d];
    const void *ins[3] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < row->arity; k++) {
        const tc_cuda_view *v = &c->in[k];
        if (v->dtype != dt)
            return cu_fail(TC_ERR_DTYPE, "%s: input %d is %s but input 1 is %s", name, k + 1, cu_dtype_name(v->dtype),
                           cu_dtype_name(dt));
        /* inputs come broadcast to the result; a smaller view is broadcast here all the same */
        if (!cu_bcast_strides(v->ndim, v->size, v->stride, o->ndim, o->size, g.stride[k + 1]))
            return cu_fail(TC_ERR_SHAPE, "%s: input %d (%d dims) does not broadcast to the result (%d dims)", name,
                           k + 1, v->ndim, o->ndim);
        ins[k] = v->data;
    }
    if (cu_geom_numel(&g) == 0) return TC_OK;
    if (!o->data) return cu_fail(TC_ERR_ARG, "%s: NULL result", name);
    for (int k = 0; k < row->arity; k++)
        if (!ins[k]) return cu_fail(TC_ERR_ARG, "%s: input %d is NULL", name, k + 1);
    if ((row->flags & TC_OPF_ZDIV) && !is_float_dt(dt)) {
        tc_status s = check_no_zero_divisor(dev, name, &c->in[1]);
        if (s) return s;
    }
    cu_geom_coalesce(&g);
    return fn(dev, &g, o->data, ins, c->params.s[0], c->params.s[1]);
}
