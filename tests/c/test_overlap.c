/* test_overlap.c -- memory shared between a result and its inputs.
 * tc_tensor_overlaps (shared bytes, not a shared storage) and the kernels that use it to
 * decide when a result must be built aside: cat, index ops and sort writing into one
 * storage with their inputs -- as a compiled graph's arena does -- give eager results
 * whether or not the bytes overlap. And dispatch.c's rule for the other kinds: an input
 * read while the result overwrites it, other than element for element, is read from a
 * copy, so the call gives what it gives on a clone (x:add(x:t()), shifted copies,
 * x:div(x[1])); an expanded result is refused; tc_tensor_shares_elements decides it. */
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

static tc_tensor *view_of(tc_tensor *t, int64_t offset, int ndim, const int64_t *sizes, const int64_t *strides)
{
    tc_tensor *v = NULL;
    if (tc_tensor_new_view(t->storage, (tc_dtype)t->dtype, offset, ndim, sizes, strides, &v))
        printf("  view failed: %s\n", tc_last_error());
    return ct_keep(v);
}

static tc_tensor *run_into(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_tensor *c, const tc_params *p,
                           tc_tensor *out)
{
    if (ct_run1(op, a, b, c, p, &out)) printf("  %s failed: %s\n", tc_op_info(op)->name, tc_last_error());
    return out;
}

TEST(shares_elements_is_exact_for_one_layout_at_two_offsets)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 2, SZ(4, 6))), *y = ct_keep(ct_arange(TC_F32, 2, SZ(4, 6)));
    const int64_t *rows3 = SZ(4, 3), *st = SZ(6, 1);
    tc_tensor *left = view_of(x, 0, 2, rows3, st), *right = view_of(x, 3, 2, rows3, st);
    tc_tensor *middle = view_of(x, 2, 2, rows3, st), *lower = view_of(x, 8, 2, SZ(2, 3), st);
    CHECK(tc_tensor_overlaps(left, right));         /* the byte spans interleave ... */
    CHECK(!tc_tensor_shares_elements(left, right)); /* ... but no element is common */
    CHECK(tc_tensor_shares_elements(left, middle)); /* column 2 */
    CHECK(tc_tensor_shares_elements(left, lower));  /* 8 = 6 + 2: x[1][2] */
    tc_tensor *block = view_of(x, 3, 2, SZ(2, 3), st); /* x[0..1][3..5] */
    CHECK(tc_tensor_shares_elements(block, lower));   /* x[1][3], x[1][4] */
    CHECK(!tc_tensor_shares_elements(block, view_of(x, 0, 2, SZ(2, 3), st))); /* x[0..1][0..2] */
    CHECK(tc_tensor_shares_elements(left, view_of(x, 18, 1, SZ(3), SZ(1)))); /* row 3's first three */
    CHECK(!tc_tensor_shares_elements(view_of(x, 0, 1, SZ(6), SZ(1)), view_of(x, 6, 1, SZ(6), SZ(1)))); /* rows */
    CHECK(tc_tensor_shares_elements(x, ct_keep(ct_transposed(x, 0, 1))));
    CHECK(!tc_tensor_shares_elements(x, y)); /* another storage */
    /* every-other element: evens against odds share nothing, evens against evens + 2 do */
    tc_tensor *even = view_of(x, 0, 1, SZ(8), SZ(2)), *odd = view_of(x, 1, 1, SZ(8), SZ(2));
    CHECK(!tc_tensor_shares_elements(even, odd));
    CHECK(tc_tensor_shares_elements(even, view_of(x, 2, 1, SZ(8), SZ(2))));
    /* a self-overlapping layout (unfold-like windows) is answered conservatively */
    CHECK(tc_tensor_shares_elements(view_of(x, 0, 2, SZ(3, 4), SZ(2, 1)), view_of(x, 1, 2, SZ(3, 4), SZ(2, 1))));
    ct_drop();
}

TEST(elementwise_result_over_a_transposed_input_reads_a_copy)
{
    /* large enough for the threaded loops: the answer must not depend on the order */
    const int64_t n = 300;
    tc_tensor *x = ct_keep(ct_arange(TC_F64, 2, SZ(n, n))), *xt = ct_keep(ct_transposed(x, 0, 1));
    CHECK(run_into(TC_OP_ADD, x, xt, NULL, P(.s = {1}), x) == x); /* x:add(x:t()) */
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++)
        for (int64_t j = 0; j < n && ok; j++)
            ok = ct_at(x, i * n + j) == (double)(i * n + j) + (double)(j * n + i);
    CHECK(ok);
    ct_drop();
}

TEST(shifted_copies_and_scans_read_a_copy)
{
    tc_tensor *x = ct_keep(ct_arange(TC_F32, 1, SZ(10)));
    tc_tensor *tail = view_of(x, 1, 1, SZ(9), SZ(1)), *head = view_of(x, 0, 1, SZ(9), SZ(1));
    run_into(TC_OP_COPY, head, NULL, NULL, P(.i = {-1}), tail); /* x[2..10] = x[1..9] */
    CHECK(SAME(x, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8));
    run_into(TC_OP_COPY, tail, NULL, NULL, P(.i = {-1}), head); /* and back */
    CHECK(SAME(x, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8));
    tc_tensor *y = ct_keep(ct_arange(TC_F64, 1, SZ(6)));
    run_into(TC_OP_CUMSUM, view_of(y, 0, 1, SZ(5), SZ(1)), NULL, NULL, P(.i = {0}), view_of(y, 1, 1, SZ(5), SZ(1)));
    CHECK(SAME(y, 0, 0, 1, 3, 6, 10));
    ct_drop();
}

TEST(small_calls_with_a_single_element_input_inside_the_result)
{
    /* x:div(x[1]) (the old x[1] for every element) */
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(4), VALS(2, 4, 6, 8)));
    run_into(TC_OP_DIV, x, view_of(x, 0, 1, SZ(1), SZ(1)), NULL, NULL, x);
    CHECK(SAME(x, 1, 2, 3, 4));
    /* x:addcmul(x[1], y) with x[1] a 0-dim view: a middle operand of one element is read
     * at every element by the strided loop, so it must be the old value */
    tc_tensor *w = ct_keep(ct_from(TC_F64, 1, SZ(3), VALS(3, 2, 1)));
    tc_tensor *ones = ct_keep(ct_from(TC_F64, 1, SZ(3), VALS(1, 1, 1)));
    run_into(TC_OP_ADDCMUL, w, view_of(w, 0, 0, NULL, NULL), ones, P(.s = {1}), w);
    CHECK(SAME(w, 6, 5, 4));
    ct_drop();
}

TEST(where_and_optimizer_steps_read_overlapping_inputs_from_copies)
{
    tc_tensor *x = ct_keep(ct_from(TC_F32, 2, SZ(2, 2), VALS(1, 2, 3, 4)));
    tc_tensor *mask = ct_keep(ct_from(TC_BOOL, 2, SZ(2, 2), VALS(0, 1, 1, 0)));
    run_into(TC_OP_WHERE, mask, ct_keep(ct_transposed(x, 0, 1)), x, NULL, x);
    CHECK(SAME(x, 1, 3, 2, 4));
    /* sgd_step with the gradient a shifted view of the parameter: g = old x[1..4] */
    tc_tensor *p = ct_keep(ct_from(TC_F64, 1, SZ(5), VALS(10, 20, 30, 40, 50)));
    tc_tensor *xs = view_of(p, 1, 1, SZ(4), SZ(1)), *gs = view_of(p, 0, 1, SZ(4), SZ(1));
    tc_tensor *sc = ct_keep(ct_from(TC_F64, 1, SZ(2), VALS(-0.5, 0)));
    tc_tensor *buf = ct_keep(ct_from(TC_F64, 1, SZ(4), VALS(0, 0, 0, 0)));
    const tc_tensor *in[4] = {xs, gs, buf, sc};
    tc_tensor *out[2] = {xs, buf}; /* momentum 0: buf' = g, x' = x - lr g */
    CHECK_OK(tc_op_run(TC_OP_SGD_STEP, in, 4, P(.s = {0, 0}, .i = {0}), out, 2));
    CHECK(SAME(p, 10, 15, 20, 25, 30)); /* x - 0.5 * old g */
    ct_drop();
}

TEST(expanded_results_are_refused_and_left_unchanged)
{
    tc_tensor *x = ct_keep(ct_from(TC_F32, 1, SZ(3), VALS(1, 2, 3)));
    tc_tensor *wide = view_of(x, 0, 2, SZ(4, 3), SZ(0, 1));
    tc_tensor *out = wide;
    CHECK_ERR(ct_run1(TC_OP_ADD, wide, wide, NULL, P(.s = {1}), &out), TC_ERR_ARG,
              "add: result 1 of size (4,3) is an expanded view (stride 0 in dim 1)");
    CHECK(SAME(x, 1, 2, 3));
    tc_tensor *y = ct_keep(ct_arange(TC_F32, 2, SZ(4, 3)));
    CHECK_ERR(ct_run1(TC_OP_COPY, y, NULL, NULL, P(.i = {-1}), &out), TC_ERR_ARG, "copy: result 1");
    CHECK(SAME(x, 1, 2, 3));
    /* a fill reads nothing: every write is the same value, as in PyTorch's fill_ */
    CHECK_OK(tc_op_run(TC_OP_FILL, NULL, 0, P(.s = {7}), &out, 1));
    CHECK(SAME(x, 7, 7, 7));
    ct_drop();
}

/* A contiguous copy of t, kept. */
static tc_tensor *clone_of(const tc_tensor *t)
{
    tc_tensor *c = NULL;
    if (ct_run1(TC_OP_COPY, t, NULL, NULL, P(.i = {-1}), &c)) printf("  copy: %s\n", tc_last_error());
    return ct_keep(c);
}

/* Softmax into a shifted view of its input, and average pooling into its own input, read
 * the input from a copy (dispatch.c): each equals the call on a clone. Before, the kernels
 * read rows and windows they had already overwritten. */
TEST(softmax_and_pool_results_over_their_inputs_read_copies)
{
    tc_tensor *base = ct_keep(ct_arange(TC_F32, 1, SZ(30)));
    float *v = tc_tensor_data(base);
    static const tc_op sm[2] = {TC_OP_SOFTMAX, TC_OP_LOG_SOFTMAX};
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < 30; i++) v[i] = (float)((i * 7) % 11) / 3;
        tc_tensor *head = view_of(base, 0, 2, SZ(4, 6), SZ(6, 1)), *tail = view_of(base, 6, 2, SZ(4, 6), SZ(6, 1));
        tc_tensor *want = NULL;
        CHECK_OK(ct_run1(sm[k], clone_of(head), NULL, NULL, P(.i = {1}), &want));
        ct_keep(want);
        CHECK(run_into(sm[k], head, NULL, NULL, P(.i = {1}), tail) == tail);
        CHECK(ct_close_all(tail, want, 0));
    }
    /* 3 x 3 average pooling, stride 1, padding 1: the same size, so in place is possible */
    for (int64_t i = 0; i < 30; i++) v[i] = (float)((i * 7) % 11) / 3;
    tc_tensor *img = view_of(base, 0, 4, SZ(1, 1, 5, 6), SZ(30, 30, 6, 1)), *want = NULL;
    tc_params pool = {.nshape = 6, .shape = {3, 3, 1, 1, 1, 1}, .i = {0, 1}};
    CHECK_OK(ct_run1(TC_OP_AVG_POOL2D, clone_of(img), NULL, NULL, &pool, &want));
    ct_keep(want);
    CHECK(run_into(TC_OP_AVG_POOL2D, img, NULL, NULL, &pool, img) == img);
    CHECK(ct_close_all(img, want, 0));
    ct_drop();
}
