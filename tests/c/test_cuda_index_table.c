/* test_cuda_index_table.c -- the device scratch of the index kernels (core/cuda/index.cu).
 * index_copy and scatter keep the CPU's last-writer rule with a table of one entry per
 * slice (index_copy), one per (idx position outside dim, value) (scatter), and none when no
 * two writers can meet (scatter with idx one long along dim, index_copy of one index) --
 * never one 8-byte entry per destination element, which was 4 MiB here for a 2 MiB
 * destination. masked_select and nonzero place elements through a prefix sum of 4-byte
 * flags (8-byte ones were twice the scratch).
 *
 * Named cuda_dev_*: runs on a GPU and over the emulator (the real kernels and caching
 * allocator); over the mock backend (host fallback, no kernels) and without a device it
 * says so and checks nothing.
 */
#include "ctest.h"
#include "cuda_test_util.h"

#define DEV TC_DEVICE_CUDA(0)

enum { ROWS = 512, COLS = 1024 }; /* the destination: 2 MiB of float32 */

/* 1 when the device tensor got holds the host tensor want's values; else says where not. */
static int same_as_cpu(tc_op o, const tc_tensor *got, const tc_tensor *want)
{
    tc_tensor *back = ct_to(got, TC_CPU);
    int64_t bad = back && tc_tensor_numel(back) == tc_tensor_numel(want) ? -1 : 0;
    for (int64_t i = 0; bad < 0 && i < tc_tensor_numel(want); i++)
        if (ct_at(back, i) != ct_at(want, i)) bad = i;
    if (bad >= 0)
        printf("  %s: the device result differs from the CPU's at element %lld\n", tc_op_info(o)->name,
               (long long)bad);
    return bad < 0;
}

/* op(dst, idx, src) in place on dst (dst's device), p: the dim. */
static tc_status run_in_place(tc_op o, tc_tensor *dst, const tc_tensor *idx, const tc_tensor *src, const tc_params *p)
{
    const tc_tensor *in[3] = {dst, idx, src};
    tc_tensor *out[1] = {dst};
    return tc_op_run(o, in, 3, p, out, 1);
}

/* Runs op in place on a device copy of cpu_dst and on cpu_dst itself; returns the device
 * memory the call took beyond what was allocated before it (its peak), or -1 on failure,
 * and checks that both results are equal element for element. */
static int64_t device_call_growth(tc_op o, tc_tensor *cpu_dst, const tc_tensor *idx, const tc_tensor *src, int dim,
                                  int *ctest_failed)
{
    tc_tensor *dd = ct_to(cpu_dst, DEV), *di = ct_to(idx, DEV), *ds = ct_to(src, DEV);
    if (!dd || !di || !ds) return -1;
    tc_cuda_memstats before, after;
    if (tc_cuda_synchronize(0) || tc_cuda_reset_peak_stats(0) || tc_cuda_memory_stats(0, &before)) return -1;
    if (run_in_place(o, dd, di, ds, P(.i = {dim})) || tc_cuda_synchronize(0) || tc_cuda_memory_stats(0, &after) ||
        run_in_place(o, cpu_dst, idx, src, P(.i = {dim}))) {
        printf("  %s: %s\n", tc_op_info(o)->name, tc_last_error());
        *ctest_failed = 1;
        return -1;
    }
    if (!same_as_cpu(o, dd, cpu_dst)) *ctest_failed = 1;
    return after.allocated_bytes_peak - before.allocated_bytes;
}

TEST(cuda_dev_index_last_writer_table)
{
    if (!ct_cuda_kernels("the kernels' scratch")) return;
    const int64_t KiB = 1024;
    tc_tensor *dst = ct_keep(ct_arange(TC_F32, 2, SZ(ROWS, COLS)));

    /* scatter along dim 1 with idx one long there (a one-hot, a max-over-dim backward):
     * one writer per element, no table */
    double one_hot[ROWS], ones[ROWS];
    for (int i = 0; i < ROWS; i++) one_hot[i] = (i * 37) % COLS, ones[i] = -1 - i;
    tc_tensor *oi = ct_keep(ct_from(TC_I64, 2, SZ(ROWS, 1), one_hot));
    tc_tensor *os = ct_keep(ct_from(TC_F32, 2, SZ(ROWS, 1), ones));
    int64_t grown = device_call_growth(TC_OP_SCATTER, dst, oi, os, 1, ctest_failed);
    CHECK(grown >= 0 && grown < 4 * KiB);

    /* scatter along dim 1 with duplicates in 4 rows: a table of 4 x COLS entries (32 KiB) */
    tc_tensor *si = ct_keep(ct_from(TC_I64, 2, SZ(4, 3), VALS(5, 9, 5, 0, 0, 0, 1023, 2, 1023, 7, 7, 8)));
    tc_tensor *ss = ct_keep(ct_from(TC_F32, 2, SZ(4, 3), VALS(-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12)));
    grown = device_call_growth(TC_OP_SCATTER, dst, si, ss, 1, ctest_failed);
    CHECK(grown >= 4 * COLS * 8 && grown < 4 * COLS * 8 + 4 * KiB);
    CHECK(ct_at(dst, 5) == -3 && ct_at(dst, COLS) == -6 && ct_at(dst, 2 * COLS + 1023) == -9);

    /* index_copy of rows with a duplicate: a table of one entry per row (4 KiB) */
    tc_tensor *ci = ct_keep(ct_from(TC_I64, 1, SZ(3), VALS(7, 3, 7)));
    tc_tensor *cs = ct_keep(ct_arange(TC_F32, 2, SZ(3, COLS)));
    grown = device_call_growth(TC_OP_INDEX_COPY, dst, ci, cs, 0, ctest_failed);
    CHECK(grown >= ROWS * 8 && grown < ROWS * 8 + 4 * KiB);
    CHECK(ct_at(dst, 7 * COLS) == 2 * COLS && ct_at(dst, 3 * COLS + 1) == COLS + 1); /* the last 7 wins */

    /* index_copy of one row: no table */
    tc_tensor *ci1 = ct_keep(ct_from(TC_I64, 1, SZ(1), VALS(11)));
    tc_tensor *cs1 = ct_keep(ct_arange(TC_F32, 2, SZ(1, COLS)));
    grown = device_call_growth(TC_OP_INDEX_COPY, dst, ci1, cs1, 0, ctest_failed);
    CHECK(grown >= 0 && grown < 4 * KiB);
    ct_drop();
}

/* The device memory op(a, b) takes beyond what was allocated before it, or -1 on failure;
 * its result must equal the CPU's. */
static int64_t device_result_growth(tc_op o, const tc_tensor *a, const tc_tensor *b, int *ctest_failed)
{
    tc_tensor *da = ct_to(a, DEV), *db = b ? ct_to(b, DEV) : NULL, *r = NULL, *want = NULL;
    if (!da || (b && !db)) return -1;
    tc_cuda_memstats before, after;
    if (tc_cuda_synchronize(0) || tc_cuda_reset_peak_stats(0) || tc_cuda_memory_stats(0, &before)) return -1;
    if (ct_run1(o, da, db, NULL, NULL, &r) || tc_cuda_synchronize(0) || tc_cuda_memory_stats(0, &after) ||
        ct_run1(o, a, b, NULL, NULL, &want)) {
        printf("  %s: %s\n", tc_op_info(o)->name, tc_last_error());
        *ctest_failed = 1;
        return -1;
    }
    ct_keep(r), ct_keep(want);
    if (!same_as_cpu(o, r, want)) *ctest_failed = 1;
    return after.allocated_bytes_peak - before.allocated_bytes;
}

TEST(cuda_dev_masked_select_nonzero_scratch)
{
    if (!ct_cuda_kernels("the kernels' scratch")) return;
    const int64_t MiB = 1 << 20, n = ROWS * COLS;
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(ROWS, COLS)));
    tc_tensor *all = ct_keep(ct_arange(TC_U8, 2, SZ(ROWS, COLS)));
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {1}), &all, 1));
    /* masked_select of every element: the 2 MiB result, 2 MiB of flags, cub's scan space */
    int64_t grown = device_result_growth(TC_OP_MASKED_SELECT, x, all, ctest_failed);
    CHECK(grown >= n * 4 + n * 4 && grown < n * 4 + n * 4 + MiB / 4);
    /* nonzero of every element: the (n, 2) int64 result, 2 MiB of flags */
    grown = device_result_growth(TC_OP_NONZERO, x, NULL, ctest_failed);
    CHECK(grown >= n * 16 + n * 4 && grown < n * 16 + n * 4 + MiB / 4);
    ct_drop();
}
