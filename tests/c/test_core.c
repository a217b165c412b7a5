/* test_core.c -- storages, tensor headers, views, the dispatcher's rules (results, in-place,
 * broadcasting, errors leaving inputs unchanged), conversions and half precision. */
#include "ctest.h"
#include "internal.h"
#include <stdlib.h>

TEST(tensor_new_sizes_strides_and_release)
{
    tc_tensor *t = NULL;
    int64_t allocated = tc_memory_allocated_total();
    CHECK_OK(tc_tensor_new(TC_F32, 3, SZ(2, 3, 4), &t));
    CHECK(tc_memory_allocated_total() - allocated == 96); /* what the Lua GC pacing reads */
    CHECK(t->ndim == 3 && t->size[0] == 2 && t->size[2] == 4);
    CHECK(t->stride[0] == 12 && t->stride[1] == 4 && t->stride[2] == 1);
    CHECK(tc_tensor_numel(t) == 24 && tc_tensor_is_contiguous(t));
    CHECK(((uintptr_t)tc_tensor_data(t) % 16) == 0);
    tc_memstats ms;
    tc_memory_stats(&ms);
    CHECK(ms.bytes_live >= 96);
    tc_tensor_release(t);
}

TEST(tensor_new_rejects_bad_sizes)
{
    tc_tensor *t = NULL;
    CHECK_ERR(tc_tensor_new(TC_F32, 2, SZ(2, -1), &t), TC_ERR_SHAPE, "negative size in (2,-1)");
    CHECK_ERR(tc_tensor_new(TC_F32, 9, SZ(1, 1, 1, 1, 1, 1, 1, 1, 1), &t), TC_ERR_ARG, "9 dims");
    CHECK_ERR(tc_tensor_new(TC_F32, 2, SZ(INT64_MAX / 2, 4), &t), TC_ERR_SHAPE, "too large");
    CHECK_ERR(tc_tensor_new((tc_dtype)42, 1, SZ(2), &t), TC_ERR_DTYPE, "invalid dtype");
    CHECK(t == NULL);
}

TEST(allocation_failure_is_an_error_and_leaks_nothing)
{
    tc_memstats before, after;
    tc_memory_stats(&before);
    tc_tensor *a = ct_arange(TC_F32, 1, SZ(4)), *out = NULL;
    tc_debug_fail_alloc_after(1);
    CHECK_ERR(ct_run1(TC_OP_EXP, a, NULL, NULL, NULL, &out), TC_ERR_MEMORY, "out of memory");
    tc_debug_fail_alloc_after(0);
    CHECK(out == NULL);
    CHECK_NEAR(ct_at(a, 3), 3, 0); /* input unchanged */
    tc_tensor_release(a);
    tc_memory_stats(&after);
    CHECK(after.tensors_live == before.tensors_live && after.storages_live == before.storages_live);
}

static int deleted;
static void count_delete(void *data, void *ctx)
{
    (void)data;
    deleted += *(int *)ctx;
}

TEST(from_data_wraps_host_memory_without_copy)
{
    float host[6] = {1, 2, 3, 4, 5, 6};
    int one = 1;
    tc_tensor *t = NULL, *v = NULL;
    deleted = 0;
    CHECK_OK(tc_tensor_from_data(host, TC_F32, 2, SZ(2, 3), NULL, count_delete, &one, &t));
    CHECK(tc_tensor_data(t) == host);
    tc_params p = {.s = {10}};
    tc_tensor *self = t;
    CHECK_OK(tc_op_run(TC_OP_MUL, (const tc_tensor *const[]){t, t}, 2, &p, &self, 1));
    CHECK(host[5] == 36); /* written through */
    tc_params sp = {.i = {0, 1}};
    CHECK_OK(tc_op_run(TC_OP_SELECT, (const tc_tensor *const[]){t}, 1, &sp, &v, 1));
    tc_tensor_release(t);
    CHECK(deleted == 0); /* the view keeps the memory */
    CHECK_NEAR(ct_at(v, 0), 16, 0);
    tc_tensor_release(v);
    CHECK(deleted == 1);
    CHECK_ERR(tc_tensor_from_data(NULL, TC_F32, 1, SZ(2), NULL, NULL, NULL, &t), TC_ERR_ARG, "NULL data");
    CHECK_ERR(tc_tensor_from_data(host, TC_F32, 1, SZ(2), SZ(-1), NULL, NULL, &t), TC_ERR_ARG, "negative stride");
}

TEST(new_view_checks_bounds)
{
    tc_storage *s = NULL;
    tc_tensor *t = NULL;
    CHECK_OK(tc_storage_new(10 * 4, &s));
    CHECK_OK(tc_tensor_new_view(s, TC_F32, 2, 2, SZ(2, 4), NULL, &t));
    tc_tensor_release(t);
    t = NULL;
    CHECK_ERR(tc_tensor_new_view(s, TC_F32, 3, 2, SZ(2, 4), NULL, &t), TC_ERR_INDEX, "storage of 10");
    CHECK_ERR(tc_tensor_new_view(s, TC_F32, -1, 1, SZ(2), NULL, &t), TC_ERR_INDEX, "negative storage offset");
    CHECK(t == NULL);
    tc_storage_release(s);
}

TEST(resize_keeps_contents_and_set_shares)
{
    tc_tensor *t = ct_arange(TC_F64, 1, SZ(4)), *u = NULL;
    CHECK_OK(tc_tensor_resize(t, 2, SZ(2, 2)));
    CHECK_NEAR(ct_at(t, 3), 3, 0);
    CHECK_OK(tc_tensor_resize(t, 1, SZ(100)));
    CHECK_NEAR(ct_at(t, 2), 2, 0); /* grown: the old elements survive */
    CHECK_OK(tc_tensor_new_empty(TC_F64, &u));
    CHECK_OK(tc_tensor_set(u, t));
    CHECK(u->storage == t->storage && u->storage->refcount == 2);
    tc_tensor *w = NULL;
    CHECK_OK(tc_tensor_new_empty(TC_F32, &w));
    CHECK_ERR(tc_tensor_set(w, t), TC_ERR_DTYPE, "float32 tensor cannot view a float64");
    CHECK_ERR(tc_tensor_resize(t, 1, SZ(-3)), TC_ERR_SHAPE, "negative");
    CHECK(t->size[0] == 100); /* unchanged by the failed call */
    tc_tensor_clear(u);
    CHECK(u->storage == NULL && tc_tensor_numel(u) == 0);
    tc_tensor_release(t);
    tc_tensor_release(u);
    tc_tensor_release(w);
}

TEST(elementwise_broadcast_and_results)
{
    tc_tensor *a = ct_arange(TC_F32, 2, SZ(2, 3)), *b = ct_from(TC_F32, 1, SZ(3), VALS(10, 20, 30)), *out = NULL;
    tc_params p = {.s = {1}};
    CHECK_OK(ct_run1(TC_OP_ADD, a, b, NULL, &p, &out));
    CHECK(out->ndim == 2 && out->size[0] == 2 && out->size[1] == 3);
    CHECK_NEAR(ct_at(out, 4), 24, 0);
    tc_tensor_release(out);
    /* column broadcast: (2,1) + (3) -> (2,3) */
    tc_tensor *col = ct_from(TC_F32, 2, SZ(2, 1), VALS(100, 200));
    out = NULL;
    CHECK_OK(ct_run1(TC_OP_ADD, col, b, NULL, &p, &out));
    CHECK_NEAR(ct_at(out, 5), 230, 0);
    tc_tensor_release(out);
    /* errors name the op and both shapes; the in-place target stays as it was */
    tc_tensor *bad = ct_arange(TC_F32, 1, SZ(4));
    out = NULL;
    CHECK_ERR(ct_run1(TC_OP_ADD, a, bad, NULL, &p, &out), TC_ERR_SHAPE, "add: sizes (2,3) and (4) cannot broadcast");
    tc_tensor *self = b;
    CHECK_ERR(tc_op_run(TC_OP_ADD, (const tc_tensor *const[]){b, a}, 2, &p, &self, 1), TC_ERR_SHAPE,
              "in-place result (3) cannot hold the result size (2,3)");
    CHECK_NEAR(ct_at(b, 2), 30, 0);
    tc_tensor *d = ct_arange(TC_F64, 1, SZ(3));
    CHECK_ERR(ct_run1(TC_OP_MUL, b, d, NULL, NULL, &out), TC_ERR_DTYPE, "mul: dtypes differ (float32 and float64)");
    CHECK(out == NULL);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(col);
    tc_tensor_release(bad);
    tc_tensor_release(d);
}

TEST(elementwise_large_parallel_matches_serial)
{
    int64_t n = 1 << 20;
    tc_tensor *a = NULL, *out = NULL;
    CHECK_OK(tc_tensor_new(TC_F32, 1, &n, &a));
    float *pa = tc_tensor_data(a);
    for (int64_t i = 0; i < n; i++) pa[i] = (float)(i % 1000) * 0.001f;
    CHECK_OK(ct_run1(TC_OP_SIGMOID, a, NULL, NULL, NULL, &out));
    float *po = tc_tensor_data(out);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(po[i] - 1.0f / (1.0f + expf(-pa[i]))) > 1e-6f) bad++;
    CHECK(bad == 0);
    /* strided (every other element) through the general loop engine */
    tc_tensor *v = NULL, *o2 = NULL;
    tc_params pv = {.i = {0, 2, 2}};
    CHECK_OK(tc_op_run(TC_OP_UNFOLD, (const tc_tensor *const[]){a}, 1, &pv, &v, 1)); /* (n/2, 2) */
    tc_params sel = {.i = {1, 0}};
    tc_tensor *col = NULL;
    CHECK_OK(tc_op_run(TC_OP_SELECT, (const tc_tensor *const[]){v}, 1, &sel, &col, 1)); /* stride 2 */
    CHECK_OK(ct_run1(TC_OP_NEG, col, NULL, NULL, NULL, &o2));
    CHECK(o2->size[0] == n / 2);
    CHECK_NEAR(ct_at(o2, 777), -pa[1554], 0);
    tc_tensor_release(a);
    tc_tensor_release(out);
    tc_tensor_release(v);
    tc_tensor_release(col);
    tc_tensor_release(o2);
}

TEST(integer_division_by_zero_is_an_error)
{
    tc_tensor *a = ct_from(TC_I32, 1, SZ(3), VALS(7, -7, 9)), *b = ct_from(TC_I32, 1, SZ(3), VALS(2, 0, 3));
    tc_tensor *self = a;
    CHECK_ERR(tc_op_run(TC_OP_DIV, (const tc_tensor *const[]){a, b}, 2, NULL, &self, 1), TC_ERR_ARG,
              "div: integer division by zero");
    CHECK_NEAR(ct_at(a, 0), 7, 0); /* untouched */
    tc_tensor *c = ct_from(TC_I32, 1, SZ(3), VALS(2, -2, 3)), *out = NULL;
    CHECK_OK(ct_run1(TC_OP_DIV, a, c, NULL, NULL, &out));
    CHECK_NEAR(ct_at(out, 0), 3, 0);
    CHECK_NEAR(ct_at(out, 1), 3, 0); /* -7 / -2 truncates */
    tc_tensor_release(out);
    out = NULL;
    CHECK_OK(ct_run1(TC_OP_REMAINDER, a, c, NULL, NULL, &out));
    CHECK_NEAR(ct_at(out, 1), -1, 0); /* sign of the divisor */
    tc_tensor_release(out);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(c);
}

TEST(copy_converts_saturates_and_copies_by_element_count)
{
    tc_tensor *x = ct_from(TC_F64, 1, SZ(4), VALS(1e10, -1e10, NAN, 3.7)), *i8 = NULL;
    tc_params p = {.i = {TC_I8}};
    CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){x}, 1, &p, &i8, 1));
    CHECK(i8->dtype == TC_I8);
    CHECK_NEAR(ct_at(i8, 0), 127, 0);
    CHECK_NEAR(ct_at(i8, 1), -128, 0);
    CHECK_NEAR(ct_at(i8, 2), 0, 0);
    CHECK_NEAR(ct_at(i8, 3), 3, 0);
    /* Torch7: copy between equal element counts with different shapes */
    tc_tensor *m = NULL, *flat = ct_arange(TC_F32, 1, SZ(6));
    CHECK_OK(tc_tensor_new(TC_F64, 2, SZ(2, 3), &m));
    CHECK_OK(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){flat}, 1, NULL, &m, 1));
    CHECK_NEAR(ct_at(m, 5), 5, 0);
    tc_tensor *small = ct_arange(TC_F32, 1, SZ(5));
    CHECK_ERR(tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){small}, 1, NULL, &m, 1), TC_ERR_SHAPE,
              "cannot copy (5) (5 elements) into (2,3) (6 elements)");
    tc_tensor_release(x);
    tc_tensor_release(i8);
    tc_tensor_release(m);
    tc_tensor_release(flat);
    tc_tensor_release(small);
}

TEST(half_conversions_round_to_nearest_even)
{
    CHECK(tc_f32_to_f16(1.0f) == 0x3c00);
    CHECK(tc_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(tc_f32_to_f16(65520.0f) == 0x7c00); /* overflow rounds to inf */
    CHECK(tc_f32_to_f16(5.9604645e-8f) == 0x0001); /* smallest subnormal */
    CHECK(tc_f16_to_f32(0x0001) == 5.9604645e-8f);
    CHECK(tc_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00); /* tie to even */
    CHECK(isnan(tc_f16_to_f32(tc_f32_to_f16(NAN))));
    CHECK(tc_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(tc_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(tc_f32_to_bf16(1.00390625f) == 0x3f80); /* 1 + 2^-8 ties to even */
    for (int i = 0; i < 0x7c00; i += 7) { /* every finite half survives a round trip */
        float f = tc_f16_to_f32((uint16_t)i);
        if (tc_f32_to_f16(f) != i) {
            CHECK(!"f16 round trip");
            break;
        }
    }
}

/* The CPU's float32 <-> float16 / bfloat16 tensor conversions (ew.c's tight loops, contiguous
 * and strided) give the bits of the generic path through float64 for every half pattern and
 * for float32 values around each half (ties, neighbours, subnormals, inf, NaN). */
static tc_tensor *converted(const tc_tensor *t, int dt)
{
    tc_tensor *o = NULL;
    return tc_op_run(TC_OP_COPY, (const tc_tensor *const[]){t}, 1, P(.i = {dt}), &o, 1) ? NULL : o;
}

/* Equal bits; float32 NaNs only both NaN (the float64 path quiets a signalling NaN, the
 * direct one keeps its bits, as PyTorch's conversion does). */
static bool same_bits(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || tc_tensor_numel(a) != tc_tensor_numel(b)) return false;
    if (a->dtype != TC_F32)
        return memcmp(tc_base(a), tc_base(b), (size_t)tc_tensor_numel(a) * tc_dtype_size((tc_dtype)a->dtype)) == 0;
    const float *x = (const float *)tc_base(a), *y = (const float *)tc_base(b);
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (isnan(x[i]) ? !isnan(y[i]) : memcmp(&x[i], &y[i], 4) != 0) return false;
    return true;
}

TEST(half_tensor_conversions_match_the_generic_path)
{
    const int halves[2] = {TC_F16, TC_BF16};
    for (int h = 0; h < 2; h++) {
        tc_tensor *all = NULL, *f32 = NULL;
        CHECK_OK(tc_tensor_new(halves[h], 2, SZ(256, 256), &all));
        CHECK_OK(tc_tensor_new(TC_F32, 1, SZ(65536 * 4), &f32));
        uint16_t *bits = (uint16_t *)tc_base(all);
        float *near = (float *)tc_base(f32);
        for (int i = 0; i < 65536; i++) {
            bits[i] = (uint16_t)i;
            float v = halves[h] == TC_F16 ? tc_f16_to_f32((uint16_t)i) : tc_bf16_to_f32((uint16_t)i);
            uint32_t u;
            memcpy(&u, &v, 4);
            uint32_t half_ulp = halves[h] == TC_F16 ? 0x1000u : 0x8000u; /* a tie (normal range) */
            uint32_t around[4] = {u, u + half_ulp, u + half_ulp - 1, u + 1};
            for (int k = 0; k < 4; k++) memcpy(&near[4 * i + k], &around[k], 4);
        }
        /* half -> float32: direct, strided (a transposed view), and through float64 */
        tc_tensor *direct = converted(all, TC_F32), *wide = converted(all, TC_F64);
        tc_tensor *via = wide ? converted(wide, TC_F32) : NULL;
        tc_tensor *t = ct_transposed(all, 0, 1), *tdirect = t ? converted(t, TC_F32) : NULL;
        tc_tensor *twide = t ? converted(t, TC_F64) : NULL, *tvia = twide ? converted(twide, TC_F32) : NULL;
        CHECK(same_bits(direct, via) && same_bits(tdirect, tvia));
        /* float32 -> half, the same two ways */
        tc_tensor *down = converted(f32, halves[h]), *f64 = converted(f32, TC_F64);
        tc_tensor *down_via = f64 ? converted(f64, halves[h]) : NULL;
        CHECK(same_bits(down, down_via));
        tc_tensor *keep[] = {all, f32, direct, wide, via, t, tdirect, twide, tvia, down, f64, down_via};
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) tc_tensor_release(keep[i]);
    }
}

TEST(half_tensors_compute_in_float)
{
    tc_tensor *h = ct_from(TC_F16, 1, SZ(3), VALS(0.5, 1.5, -2)), *out = NULL;
    CHECK_OK(ct_run1(TC_OP_EXP, h, NULL, NULL, NULL, &out));
    CHECK(out->dtype == TC_F16);
    CHECK_NEAR(ct_at(out, 1), 4.48168907, 4e-3);
    tc_tensor *self = h;
    tc_params p = {.s = {1}};
    CHECK_OK(tc_op_run(TC_OP_ADD, (const tc_tensor *const[]){h, h}, 2, &p, &self, 1));
    CHECK_NEAR(ct_at(h, 2), -4, 0);
    tc_tensor_release(h);
    tc_tensor_release(out);
}

TEST(views_share_storage_and_validate)
{
    tc_tensor *t = ct_arange(TC_F32, 2, SZ(3, 4)), *v = NULL, *w = NULL;
    tc_params p = {.i = {1, 1, 2}};
    CHECK_OK(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){t}, 1, &p, &v, 1));
    CHECK(v->storage == t->storage && v->size[1] == 2 && v->offset == 1);
    tc_params f = {.s = {-1}};
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, &f, &v, 1));
    CHECK_NEAR(ct_at(t, 5), -1, 0); /* written through the view */
    CHECK_NEAR(ct_at(t, 7), 7, 0);
    tc_params bad = {.i = {1, 3, 2}};
    CHECK_ERR(tc_op_run(TC_OP_NARROW, (const tc_tensor *const[]){t}, 1, &bad, &w, 1), TC_ERR_INDEX,
              "narrow: range [3, 5) out of bounds for dim 1 of size 4");
    /* view of a transposed tensor needs contiguous() */
    tc_tensor *tt = NULL;
    tc_params tp = {.i = {0, 1}};
    CHECK_OK(tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const[]){t}, 1, &tp, &tt, 1));
    tc_params vp = {.nshape = 1, .shape = {12}};
    CHECK_ERR(tc_op_run(TC_OP_VIEW, (const tc_tensor *const[]){tt}, 1, &vp, &w, 1), TC_ERR_SHAPE, "contiguous()");
    tc_params vp2 = {.nshape = 3, .shape = {2, -1, 3}};
    CHECK_OK(tc_op_run(TC_OP_VIEW, (const tc_tensor *const[]){t}, 1, &vp2, &w, 1));
    CHECK(w->size[1] == 2 && w->stride[0] == 6);
    tc_tensor_release(w);
    w = NULL;
    tc_params vp3 = {.nshape = 2, .shape = {5, -1}};
    CHECK_ERR(tc_op_run(TC_OP_VIEW, (const tc_tensor *const[]){t}, 1, &vp3, &w, 1), TC_ERR_SHAPE, "cannot view (3,4)");
    tc_params ep = {.nshape = 2, .shape = {3, 4}};
    CHECK_ERR(tc_op_run(TC_OP_EXPAND, (const tc_tensor *const[]){v}, 1, &ep, &w, 1), TC_ERR_SHAPE,
              "expand: cannot expand (3,2) to (3,4)");
    tc_params sp = {.i = {2, 0}};
    CHECK_ERR(tc_op_run(TC_OP_SELECT, (const tc_tensor *const[]){t}, 1, &sp, &w, 1), TC_ERR_INDEX,
              "dim 2 out of range for a 2-dim tensor");
    tc_params pp = {.nshape = 2, .shape = {0, 0}};
    CHECK_ERR(tc_op_run(TC_OP_PERMUTE, (const tc_tensor *const[]){t}, 1, &pp, &w, 1), TC_ERR_ARG, "repeated");
    CHECK(w == NULL);
    tc_tensor_release(t);
    tc_tensor_release(v);
    tc_tensor_release(tt);
}

TEST(thread_count_is_settable)
{
    int n = tc_get_num_threads();
    CHECK(n >= 1);
    tc_set_num_threads(1);
    CHECK(tc_get_num_threads() == 1);
    tc_set_num_threads(n);
    CHECK(tc_get_num_threads() == n);
}

TEST(op_table_metadata)
{
    CHECK(tc_op_lookup("add") == TC_OP_ADD);
    CHECK(tc_op_lookup("no_such_op") == -1);
    const tc_opinfo *i = tc_op_info(TC_OP_SIGMOID);
    CHECK(i && i->kind == TC_KIND_EW && i->nin == 1 && (i->flags & TC_OPF_DIFF));
    CHECK(strstr(i->formula, "exp") != NULL);
    CHECK(tc_op_info((tc_op)-1) == NULL && tc_op_info(TC_OP_COUNT) == NULL);
    for (int op = 0; op < TC_OP_COUNT; op++) CHECK(tc_op_lookup(tc_op_info((tc_op)op)->name) == op); /* unique names */
}

/* The reads Lua makes give every NaN as the quiet NaN without payload: LuaJIT would read a
 * NaN with payload bits in the top of the word as another Lua type (tests/lua's
 * nan_payload_spec.lua checks the Lua side). */
static uint64_t bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}
TEST(reads_for_lua_give_nans_without_payload)
{
    const uint64_t quiet = bits_of((double)NAN);
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_new(TC_F64, 1, SZ(2), &t));
    const uint64_t payload[2] = {0xfffffffb00001000ull, 0x7ff0000000000001ull};
    memcpy(tc_tensor_data(t), payload, sizeof payload);
    double v = 0;
    CHECK_OK(tc_tensor_get(t, (const int64_t[]){1}, &v));
    CHECK(bits_of(v) == quiet);
    CHECK(bits_of(tc_tensor_item(t)) == quiet);
    tc_tensor_release(t);
    CHECK_OK(tc_tensor_new(TC_F32, 0, NULL, &t));
    const uint32_t f32 = 0xffffffffu;
    memcpy(tc_tensor_data(t), &f32, sizeof f32);
    CHECK(bits_of(tc_tensor_item(t)) == quiet);
    tc_tensor_release(t);
    CHECK(bits_of((double)tc_f16_to_f32(0xffff)) == quiet && bits_of((double)tc_bf16_to_f32(0xff81)) == quiet);
    CHECK(tc_f16_to_f32(0x7c00) == INFINITY && tc_bf16_to_f32(0xff80) == -INFINITY);
}
