/* test_layouts.c -- every golden case again with its tensors stored as strided views.
 *
 * Users hand the kernels views (x:t(), x:narrow(...), x[{{}, 2}], a slice of a bigger
 * buffer); a kernel that assumes its input starts at element 0 of its storage, or that its
 * elements are dense, or that its given result is, reads or writes the wrong elements.
 * ops.golden's cases (PyTorch's values) run here with every input, and the result slot a
 * case gives, staged in each layout of layouts.h: an offset into the storage with every
 * other element used, and dims stored in reverse order. The results must still be the
 * golden values, the inputs' storages must come back byte for byte as they went in (gaps
 * included), and the gaps around a given result must still hold the sentinel.
 * On the CPU here; on cuda:0 in test_cuda_device.c (a GPU, or the emulator in run.sh).
 */
#include "ctest.h"
#include "conformance.h"
#include "layouts.h"
#include <stdlib.h>

const char *layout_name(int layout)
{
    static const char *const names[LAYOUT_COUNT] = {
        "contiguous", "spread (from element 3, every other element)", "dims reversed (from element 5)"};
    return layout >= 0 && layout < LAYOUT_COUNT ? names[layout] : "?";
}

bool layout_bound_op(const char *op) { return strcmp(op, "as_strided") == 0 || strcmp(op, "view") == 0; }

/* The storage element of row-major element i of a view. */
static int64_t element_offset(const tc_tensor *v, int64_t i)
{
    int64_t off = v->offset;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (i % v->size[d]) * v->stride[d];
        i /= v->size[d];
    }
    return off;
}

tc_tensor *layout_staged(const tc_tensor *t, int device, int layout)
{
    tc_tensor *r = NULL;
    if (layout == LAYOUT_CONTIGUOUS) {
        if (tc_tensor_to(t, device, -1, &r)) printf("  stage: %s\n", tc_last_error());
        return r;
    }
    int nd = t->ndim;
    int64_t n = tc_tensor_numel(t), st[TC_MAX_DIMS], offset = layout == LAYOUT_SPREAD ? 3 : 5, step = 1;
    if (layout == LAYOUT_SPREAD)
        for (int d = nd - 1; d >= 0; d--) st[d] = 2 * step, step *= t->size[d];
    else
        for (int d = 0; d < nd; d++) st[d] = step, step *= t->size[d];
    int64_t span = offset + (layout == LAYOUT_SPREAD ? 2 * n : n) + 1; /* a gap after the last element too */
    size_t es = tc_dtype_size((tc_dtype)t->dtype);
    tc_tensor *base = NULL, *placed = NULL, *moved = NULL;
    if (tc_tensor_new((tc_dtype)t->dtype, 1, &span, &base) ||
        tc_tensor_new_view(base->storage, (tc_dtype)t->dtype, offset, nd, t->size, st, &placed)) {
        printf("  stage: %s\n", tc_last_error());
        tc_tensor_release(base);
        return NULL;
    }
    memset(tc_tensor_data(base), LAYOUT_SENTINEL, (size_t)span * es);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)tc_tensor_data(base) + (size_t)element_offset(placed, i) * es, (char *)tc_tensor_data(t) + (size_t)i * es, es);
    if (device == TC_CPU) {
        r = placed, placed = NULL;
    } else if (tc_tensor_to(base, device, -1, &moved) ||
               tc_tensor_new_view(moved->storage, (tc_dtype)t->dtype, offset, nd, t->size, st, &r)) {
        printf("  stage on the device: %s\n", tc_last_error());
    }
    tc_tensor_release(placed);
    tc_tensor_release(moved);
    tc_tensor_release(base);
    return r;
}

unsigned char *layout_snapshot(const tc_tensor *t, int64_t *nbytes)
{
    tc_tensor *bytes = NULL, *back = NULL;
    int64_t n = t && t->storage ? t->storage->nbytes : 0, one = 1;
    unsigned char *r = NULL;
    if (tc_tensor_new_view(t->storage, TC_U8, 0, 1, &n, &one, &bytes) || tc_tensor_to(bytes, TC_CPU, -1, &back))
        printf("  snapshot: %s\n", tc_last_error());
    else if ((r = malloc(n ? (size_t)n : 1)) != NULL)
        memcpy(r, tc_tensor_data(back), (size_t)n);
    tc_tensor_release(bytes);
    tc_tensor_release(back);
    *nbytes = n;
    return r;
}

int layout_gaps_intact(const tc_tensor *t, const char *what)
{
    int64_t nbytes = 0;
    unsigned char *b = layout_snapshot(t, &nbytes);
    size_t es = tc_dtype_size((tc_dtype)t->dtype);
    unsigned char *mine = calloc((size_t)nbytes + 1, 1);
    int ok = b && mine;
    for (int64_t i = 0; ok && i < tc_tensor_numel(t); i++) memset(mine + (size_t)element_offset(t, i) * es, 1, es);
    for (int64_t k = 0; ok && k < nbytes; k++)
        if (!mine[k] && b[k] != LAYOUT_SENTINEL) {
            printf("  %s: byte %lld of its storage, outside its elements, was overwritten (0x%02x)\n", what,
                   (long long)k, b[k]);
            ok = 0;
        }
    free(b);
    free(mine);
    return ok;
}

/* The helpers themselves: each layout holds the values (read back through the view), the
 * storage has the expected extent with sentinels between, and a write into the view shows
 * in no gap. */
TEST(layouts_stage_views)
{
    tc_tensor *t = ct_keep(ct_arange(TC_F32, 3, SZ(2, 3, 4)));
    for (int layout = 0; layout < LAYOUT_COUNT; layout++) {
        tc_tensor *v = ct_keep(layout_staged(t, TC_CPU, layout));
        CHECK(v && ct_shape_is(v, 3, SZ(2, 3, 4)));
        if (!v) continue;
        CHECK(ct_close_all(v, t, 0));
        CHECK(tc_tensor_is_contiguous(v) == (layout == LAYOUT_CONTIGUOUS));
        CHECK(layout_gaps_intact(v, layout_name(layout)));
        int64_t want = layout == LAYOUT_CONTIGUOUS ? 24 : layout == LAYOUT_SPREAD ? 3 + 48 + 1 : 5 + 24 + 1;
        CHECK(v->storage->nbytes == want * 4);
        CHECK(v->offset == (layout == LAYOUT_CONTIGUOUS ? 0 : layout == LAYOUT_SPREAD ? 3 : 5));
    }
    tc_tensor *v = ct_keep(layout_staged(t, TC_CPU, LAYOUT_REVERSED));
    CHECK(v && v->stride[0] == 1 && v->stride[1] == 2 && v->stride[2] == 6);
    if (!v) return ct_drop();
    /* a scribble past the view is seen, the view's own elements are not gaps */
    CHECK_OK(tc_tensor_set_value(v, SZ(1, 2, 3), -7));
    CHECK(layout_gaps_intact(v, "after a write into the view"));
    ((float *)v->storage->data)[4] = 1; /* element 4: before the view's first (5) */
    CHECK(!layout_gaps_intact(v, "expected: a scribbled gap"));
    /* a 0-dim and an empty tensor stage too */
    tc_tensor *s = ct_keep(ct_from(TC_I64, 0, NULL, VALS(42))), *e = NULL;
    tc_tensor *sv = ct_keep(layout_staged(s, TC_CPU, LAYOUT_SPREAD));
    CHECK(sv && sv->ndim == 0 && sv->offset == 3 && ct_at(sv, 0) == 42);
    CHECK_OK(tc_tensor_new(TC_F64, 2, SZ(0, 3), &e));
    ct_keep(e);
    tc_tensor *ev = ct_keep(layout_staged(e, TC_CPU, LAYOUT_REVERSED));
    CHECK(ev && ct_shape_is(ev, 2, SZ(0, 3)) && layout_gaps_intact(ev, "empty"));
    ct_drop();
}

/* Every golden case on the CPU with its tensors as views in each layout, eagerly and
 * traced into a graph compiled with every pass (the graph's inputs are such views). */
TEST(conformance_golden_layouts)
{
    for (int compiled = 0; compiled < 2; compiled++)
        for (int layout = LAYOUT_SPREAD; layout < LAYOUT_COUNT; layout++) {
            int total = 0;
            int bad = conformance_golden_layout_on(TC_CPU, layout, compiled, &total);
            CHECK(bad == 0);
            CHECK(total > 300);
            printf("  %d golden cases%s, tensors %s: %d failed\n", total, compiled ? " compiled" : "",
                   layout_name(layout), bad);
        }
}
