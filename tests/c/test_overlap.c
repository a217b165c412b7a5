/* test_overlap.c -- tc_tensor_overlaps (shared bytes, not a shared storage) and the kernels
 * that use it to decide when a result must be built aside: cat, index ops and sort writing
 * into one storage with their inputs -- as a compiled graph's arena does -- give eager
 * results whether or not the bytes overlap. */
#include "ctest.h"
#include "internal.h"

/* a view of s: n float32 elements from element off, with stride st */
static tc_tensor *view(tc_storage *s, int64_t off, int64_t n, int64_t st)
{
    tc_tensor *t = NULL;
    if (tc_tensor_new_view(s, TC_F32, off, 1, &n, &st, &t)) return NULL;
    return ct_keep(t);
}

TEST(overlap_is_shared_bytes)
{
    tc_tensor *base = ct_keep(ct_arange(TC_F32, 1, SZ(16)));
    tc_storage *s = base->storage;
    tc_tensor *lo = view(s, 0, 8, 1), *hi = view(s, 8, 8, 1), *mid = view(s, 4, 8, 1);
    tc_tensor *even = view(s, 0, 8, 2), *odd = view(s, 1, 8, 2), *empty = view(s, 0, 0, 1);
    tc_tensor *other = ct_keep(ct_arange(TC_F32, 1, SZ(16)));
    CHECK(lo && hi && mid && even && odd && empty);
    CHECK(!tc_tensor_overlaps(lo, hi) && !tc_tensor_overlaps(hi, lo));
    CHECK(tc_tensor_overlaps(lo, mid) && tc_tensor_overlaps(mid, hi) && tc_tensor_overlaps(base, lo));
    CHECK(tc_tensor_overlaps(even, odd)); /* interleaved: the spans meet, so it says yes (safe) */
    CHECK(!tc_tensor_overlaps(empty, base) && !tc_tensor_overlaps(base, other));
    ct_drop();
}

TEST(overlap_kernels_in_one_storage_match_eager)
{
    tc_tensor *base = ct_keep(ct_arange(TC_F32, 1, SZ(16)));
    tc_storage *s = base->storage;
    /* cat of the first two quarters into the second half: disjoint, written in place */
    tc_tensor *a = view(s, 0, 4, 1), *b = view(s, 4, 4, 1), *dst = view(s, 8, 8, 1);
    const tc_tensor *in[2] = {a, b};
    tc_tensor *out[1] = {dst};
    CHECK_OK(tc_op_run(TC_OP_CAT, in, 2, P(.i = {0}), out, 1));
    CHECK(SAME(base, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7));
    /* cat into a destination overlapping its inputs: built aside, then copied */
    tc_tensor *d2 = view(s, 2, 8, 1);
    tc_tensor *out2[1] = {d2};
    CHECK_OK(tc_op_run(TC_OP_CAT, in, 2, P(.i = {0}), out2, 1));
    CHECK(SAME(base, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7));
    /* index_select into a disjoint part of the same storage, and over its own input */
    tc_tensor *idx = ct_keep(ct_from(TC_I64, 1, SZ(4), VALS(3, 2, 1, 0)));
    tc_tensor *src = view(s, 0, 4, 1), *d3 = view(s, 12, 4, 1);
    const tc_tensor *iin[2] = {src, idx};
    tc_tensor *out3[1] = {d3};
    CHECK_OK(tc_op_run(TC_OP_INDEX_SELECT, iin, 2, P(.i = {0}), out3, 1));
    CHECK(SAME(base, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 2, 3, 1, 0, 1, 0));
    tc_tensor *out4[1] = {src};
    CHECK_OK(tc_op_run(TC_OP_INDEX_SELECT, iin, 2, P(.i = {0}), out4, 1));
    CHECK(SAME(base, 1, 0, 1, 0, 2, 3, 4, 5, 6, 7, 2, 3, 1, 0, 1, 0));
    ct_drop();
}
