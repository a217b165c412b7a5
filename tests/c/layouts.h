/* layouts.h -- tensors holding given values in memory laid out other than contiguously
 * (test_layouts.c), for the golden cases run again over strided views (test_conformance.c).
 * Include after ctest.h. */
#ifndef TC_TEST_LAYOUTS_H
#define TC_TEST_LAYOUTS_H

/* How a staged tensor's elements lie in its storage. Every layout but the first leaves gaps
 * before, between or after the elements, filled with LAYOUT_SENTINEL bytes. */
enum {
    LAYOUT_CONTIGUOUS, /* a plain copy */
    LAYOUT_SPREAD,     /* from element 3 on, every other element: all strides doubled */
    LAYOUT_REVERSED,   /* from element 5 on, dims stored last to first (a transposed view) */
    LAYOUT_COUNT
};
#define LAYOUT_SENTINEL 0x55

const char *layout_name(int layout);
/* A view on device (TC_CPU: the host) with t's sizes and values (t contiguous, on the host)
 * over a fresh storage laid out as layout; NULL with the reason printed. */
tc_tensor *layout_staged(const tc_tensor *t, int device, int layout);
/* Every byte of t's storage (host or device) copied to the host (malloc'ed; *nbytes set), or
 * NULL with the reason printed. */
unsigned char *layout_snapshot(const tc_tensor *t, int64_t *nbytes);
/* 1 when every byte of t's storage outside t's elements still holds LAYOUT_SENTINEL (a
 * kernel wrote nothing past the view it was given); else prints where and returns 0. */
int layout_gaps_intact(const tc_tensor *t, const char *what);
/* Whether op answers to its inputs' layout by definition, so that its golden values hold
 * for contiguous inputs only: as_strided addresses the storage itself (over a staged
 * layout it reads the gaps), and view refuses strides it cannot reshape (PyTorch's rule). */
bool layout_bound_op(const char *op);

#endif
