/* tensor.c -- storages and tensor headers: allocation, reference counts, resize/set,
 * wrapping host memory, element access and memory statistics.
 *
 * Ownership: a storage is freed when its refcount reaches zero; a tensor header holds one
 * reference to its storage. Both counts are atomic so tensors may cross threads (the data
 * loader's prefetch threads, an embedding host's threads).
 */
#include "internal.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- accounting and fault injection ---------------------------------------------------- */

static int64_t bytes_live, bytes_peak, storages_live, tensors_live;
static int64_t bytes_allocated_total; /* monotonic: what the Lua binding paces its GC by */
static int64_t fail_alloc_countdown; /* > 0: counts down; the allocation reaching 0 fails */

void tc_memory_stats(tc_memstats *out)
{
    out->bytes_live = __atomic_load_n(&bytes_live, __ATOMIC_RELAXED);
    out->bytes_peak = __atomic_load_n(&bytes_peak, __ATOMIC_RELAXED);
    out->storages_live = __atomic_load_n(&storages_live, __ATOMIC_RELAXED);
    out->tensors_live = __atomic_load_n(&tensors_live, __ATOMIC_RELAXED);
}

void tc_debug_fail_alloc_after(int64_t n)
{
    __atomic_store_n(&fail_alloc_countdown, n > 0 ? n : 0, __ATOMIC_RELAXED);
}

static bool injected_failure(void)
{
    int64_t c = __atomic_load_n(&fail_alloc_countdown, __ATOMIC_RELAXED);
    if (c <= 0) return false;
    return __atomic_sub_fetch(&fail_alloc_countdown, 1, __ATOMIC_RELAXED) == 0;
}

void *tc_malloc(size_t nbytes, const char *what)
{
    void *p = injected_failure() ? NULL : malloc(nbytes ? nbytes : 1);
    if (!p) tc_set_error(TC_ERR_MEMORY, "%s: out of memory allocating %zu bytes", what, nbytes);
    return p;
}

int64_t tc_memory_allocated_total(void) { return __atomic_load_n(&bytes_allocated_total, __ATOMIC_RELAXED); }

static void account(int64_t nbytes)
{
    if (nbytes > 0) __atomic_add_fetch(&bytes_allocated_total, nbytes, __ATOMIC_RELAXED);
    int64_t now = __atomic_add_fetch(&bytes_live, nbytes, __ATOMIC_RELAXED);
    int64_t peak = __atomic_load_n(&bytes_peak, __ATOMIC_RELAXED);
    while (now > peak &&
           !__atomic_compare_exchange_n(&bytes_peak, &peak, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* ---- storage ----------------------------------------------------------------------------- */

/* Data is 64-byte aligned so SIMD loops and BLAS see aligned rows. */
#define TC_ALIGN 64

/* Small storages keep their bytes in the same block as the struct, 16-byte aligned right
 * after it: one malloc instead of two on the tiny-op path. */
#define TC_INLINE_MAX 256
static char *inline_data(tc_storage *s) { return (char *)s + ((sizeof *s + 15) & ~(size_t)15); }

tc_status tc_storage_alloc(int64_t nbytes, tc_storage **out)
{
    if (nbytes < 0) return tc_set_error(TC_ERR_ARG, "storage: negative size %lld", (long long)nbytes);
    bool small = nbytes <= TC_INLINE_MAX;
    size_t head = (sizeof(tc_storage) + 15) & ~(size_t)15;
    tc_storage *s = injected_failure() ? NULL : malloc(small ? head + (size_t)(nbytes ? nbytes : 1) : sizeof *s);
    void *data = NULL;
    if (s && small) {
        data = inline_data(s);
    } else if (s) {
        size_t rounded = ((size_t)nbytes + TC_ALIGN - 1) / TC_ALIGN * TC_ALIGN;
        if (posix_memalign(&data, TC_ALIGN, rounded ? rounded : TC_ALIGN) != 0) data = NULL;
    }
    if (!data) {
        free(s);
        return tc_set_error(TC_ERR_MEMORY, "storage: out of memory allocating %lld bytes", (long long)nbytes);
    }
    *s = (tc_storage){.data = data, .nbytes = nbytes, .refcount = 1, .device = TC_CPU};
    account(nbytes);
    __atomic_add_fetch(&storages_live, 1, __ATOMIC_RELAXED);
    *out = s;
    return TC_OK;
}

tc_status tc_storage_new(int64_t nbytes, tc_storage **out)
{
    TRY(tc_storage_alloc(nbytes, out));
    memset((*out)->data, 0, (size_t)nbytes);
    return TC_OK;
}

tc_status tc_storage_adopt(void *data, int64_t nbytes, int device, void (*deleter)(void *, void *), void *ctx,
                           tc_storage **out)
{
    tc_storage *s = tc_malloc(sizeof *s, "storage");
    if (!s) return TC_ERR_MEMORY;
    *s = (tc_storage){.data = data, .nbytes = nbytes, .refcount = 1, .device = device, .deleter = deleter,
                      .deleter_ctx = ctx};
    __atomic_add_fetch(&storages_live, 1, __ATOMIC_RELAXED);
    *out = s;
    return TC_OK;
}

/* Storage on any device: host memory, or device memory from the CUDA backend
 * (cuda_backend.c). zero: fill with zero bytes. */
static tc_status storage_alloc_on(int device, int64_t nbytes, bool zero, tc_storage **out)
{
    if (device == TC_CPU) {
        TRY(tc_storage_alloc(nbytes, out));
        if (zero) memset((*out)->data, 0, (size_t)nbytes);
        return TC_OK;
    }
    return tc_cuda_storage_alloc(device, nbytes, zero, out);
}

tc_status tc_storage_new_on(int device, int64_t nbytes, tc_storage **out)
{
    if (!out) return tc_set_error(TC_ERR_ARG, "storage_new: NULL result");
    if (nbytes < 0) return tc_set_error(TC_ERR_ARG, "storage_new: negative size %lld", (long long)nbytes);
    return storage_alloc_on(device, nbytes, true, out);
}

void tc_storage_retain(tc_storage *s)
{
    if (s) tc_atomic_inc(&s->refcount);
}

void tc_storage_release(tc_storage *s)
{
    if (!s || tc_atomic_dec(&s->refcount) != 0) return;
    if (s->deleter) {
        s->deleter(s->data, s->deleter_ctx);
    } else if (s->data) {
        if (s->data != inline_data(s)) free(s->data);
        account(-s->nbytes);
    }
    __atomic_sub_fetch(&storages_live, 1, __ATOMIC_RELAXED);
    free(s);
}

/* ---- geometry ------------------------------------------------------------------------------ */

int64_t tc_numel_of(int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    return n;
}

void tc_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides)
{
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = st;
        st *= sizes[d] > 0 ? sizes[d] : 1;
    }
}

int64_t tc_tensor_numel(const tc_tensor *t) { return t->storage ? tc_numel_of(t->ndim, t->size) : 0; }

int tc_tensor_is_contiguous(const tc_tensor *t)
{
    int64_t st = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->size[d] == 1) continue;
        if (t->stride[d] != st) return 0;
        st *= t->size[d];
    }
    return 1;
}

void *tc_tensor_data(const tc_tensor *t) { return tc_base(t); }

/* Sizes must be non-negative, within TC_MAX_DIMS, and their product must not overflow. */
static tc_status check_sizes(const char *what, int ndim, const int64_t *sizes, int64_t elsize)
{
    char buf[TC_SHAPE_BUF];
    if (ndim < 0 || ndim > TC_MAX_DIMS)
        return tc_set_error(TC_ERR_ARG, "%s: %d dims (tocha supports 0 to %d)", what, ndim, TC_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0)
            return tc_set_error(TC_ERR_SHAPE, "%s: negative size in %s", what, tc_sizes_str(ndim, sizes, buf, sizeof buf));
        if (sizes[d] && n > INT64_MAX / elsize / sizes[d])
            return tc_set_error(TC_ERR_SHAPE, "%s: size %s is too large", what, tc_sizes_str(ndim, sizes, buf, sizeof buf));
        n *= sizes[d];
    }
    return TC_OK;
}

/* ---- tensor headers ------------------------------------------------------------------------ */

static tc_tensor *header_new(tc_dtype dt)
{
    tc_tensor *t = tc_malloc(sizeof *t, "tensor");
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->refcount = 1;
    t->dtype = dt;
    t->device = TC_CPU;
    __atomic_add_fetch(&tensors_live, 1, __ATOMIC_RELAXED);
    return t;
}

static tc_status check_dtype(const char *what, tc_dtype dt)
{
    if ((unsigned)dt >= TC_DTYPE_COUNT) return tc_set_error(TC_ERR_DTYPE, "%s: invalid dtype %d", what, (int)dt);
    return TC_OK;
}

tc_status tc_tensor_alloc(tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out)
{
    return tc_tensor_alloc_on(TC_CPU, dt, ndim, sizes, out);
}

tc_status tc_tensor_alloc_on(int device, tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out)
{
    TRY(check_dtype("tensor", dt));
    int64_t es = (int64_t)tc_dtype_size(dt);
    TRY(check_sizes("tensor", ndim, sizes, es));
    tc_tensor *t = header_new(dt);
    if (!t) return TC_ERR_MEMORY;
    tc_status s = storage_alloc_on(device, tc_numel_of(ndim, sizes) * es, false, &t->storage);
    if (s) {
        tc_tensor_release(t);
        return s;
    }
    t->device = device;
    t->ndim = ndim;
    if (ndim > 0) memcpy(t->size, sizes, sizeof(int64_t) * (size_t)ndim); /* sizes may be NULL for 0-dim */
    tc_contiguous_strides(ndim, sizes, t->stride);
    *out = t;
    return TC_OK;
}

tc_status tc_tensor_new(tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out)
{
    if (!out || (ndim > 0 && !sizes)) return tc_set_error(TC_ERR_ARG, "tensor_new: NULL argument");
    return tc_tensor_alloc(dt, ndim, sizes, out);
}

tc_status tc_tensor_new_empty(tc_dtype dt, tc_tensor **out)
{
    return tc_tensor_new_empty_on(TC_CPU, dt, out);
}

tc_status tc_tensor_new_on(int device, tc_dtype dt, int ndim, const int64_t *sizes, tc_tensor **out)
{
    if (!out || (ndim > 0 && !sizes)) return tc_set_error(TC_ERR_ARG, "tensor_new: NULL argument");
    return tc_tensor_alloc_on(device, dt, ndim, sizes, out);
}

tc_status tc_tensor_new_empty_on(int device, tc_dtype dt, tc_tensor **out)
{
    TRY(check_dtype("tensor_new_empty", dt));
    if (device != TC_CPU) TRY(tc_cuda_check_device("tensor_new_empty", device));
    tc_tensor *t = header_new(dt);
    if (!t) return TC_ERR_MEMORY;
    t->device = device;
    *out = t;
    return TC_OK;
}

/* The largest and smallest element offsets a geometry touches must lie in the storage. */
static tc_status check_bounds(const char *what, const tc_storage *s, tc_dtype dt, int64_t offset,
                              int ndim, const int64_t *sizes, const int64_t *strides)
{
    char buf[TC_SHAPE_BUF];
    if (offset < 0) return tc_set_error(TC_ERR_INDEX, "%s: negative storage offset %lld", what, (long long)offset);
    if (tc_numel_of(ndim, sizes) == 0) return TC_OK;
    int64_t lo = offset, hi = offset;
    for (int d = 0; d < ndim; d++) {
        int64_t span = (sizes[d] - 1) * strides[d];
        if (span < 0) lo += span;
        else hi += span;
    }
    int64_t cap = s ? s->nbytes / (int64_t)tc_dtype_size(dt) : 0;
    if (lo < 0 || hi >= cap)
        return tc_set_error(TC_ERR_INDEX, "%s: size %s with offset %lld reaches element %lld of a storage of %lld",
                            what, tc_sizes_str(ndim, sizes, buf, sizeof buf), (long long)offset,
                            (long long)(lo < 0 ? lo : hi), (long long)cap);
    return TC_OK;
}

tc_status tc_tensor_new_view(tc_storage *s, tc_dtype dt, int64_t offset, int ndim, const int64_t *sizes,
                             const int64_t *strides, tc_tensor **out)
{
    TRY(check_dtype("tensor_new_view", dt));
    TRY(check_sizes("tensor_new_view", ndim, sizes, (int64_t)tc_dtype_size(dt)));
    int64_t st[TC_MAX_DIMS];
    if (!strides) {
        tc_contiguous_strides(ndim, sizes, st);
        strides = st;
    }
    TRY(check_bounds("tensor_new_view", s, dt, offset, ndim, sizes, strides));
    tc_tensor *t = header_new(dt);
    if (!t) return TC_ERR_MEMORY;
    tc_storage_retain(s);
    t->storage = s;
    t->device = s->device;
    t->offset = offset;
    t->ndim = ndim;
    if (ndim > 0) memcpy(t->size, sizes, sizeof(int64_t) * (size_t)ndim); /* sizes may be NULL for 0-dim */
    if (ndim > 0) memcpy(t->stride, strides, sizeof(int64_t) * (size_t)ndim);
    *out = t;
    return TC_OK;
}

static void borrowed_deleter(void *data, void *ctx)
{
    (void)data;
    (void)ctx;
}

tc_status tc_tensor_from_data(void *data, tc_dtype dt, int ndim, const int64_t *sizes, const int64_t *strides,
                              void (*deleter)(void *, void *), void *ctx, tc_tensor **out)
{
    if (!data || !out) return tc_set_error(TC_ERR_ARG, "tensor_from_data: NULL data or out");
    TRY(check_dtype("tensor_from_data", dt));
    int64_t es = (int64_t)tc_dtype_size(dt);
    TRY(check_sizes("tensor_from_data", ndim, sizes, es));
    int64_t st[TC_MAX_DIMS];
    if (!strides) {
        tc_contiguous_strides(ndim, sizes, st);
        strides = st;
    }
    /* The storage spans exactly the elements the view reaches. Negative strides would need
     * an offset into memory before `data`, which we cannot verify: refuse them. */
    int64_t hi = 0;
    for (int d = 0; d < ndim; d++) {
        if (strides[d] < 0) return tc_set_error(TC_ERR_ARG, "tensor_from_data: negative stride %lld", (long long)strides[d]);
        if (sizes[d] > 0) hi += (sizes[d] - 1) * strides[d];
    }
    tc_storage *s = tc_malloc(sizeof *s, "tensor_from_data");
    if (!s) return TC_ERR_MEMORY;
    /* Borrowed memory (no deleter) gets a no-op one, so release never frees it. */
    *s = (tc_storage){.data = data,
                      .nbytes = tc_numel_of(ndim, sizes) ? (hi + 1) * es : 0,
                      .refcount = 1,
                      .device = TC_CPU,
                      .deleter = deleter ? deleter : borrowed_deleter,
                      .deleter_ctx = ctx};
    __atomic_add_fetch(&storages_live, 1, __ATOMIC_RELAXED);
    tc_status st2 = tc_tensor_new_view(s, dt, 0, ndim, sizes, strides, out);
    if (st2) s->deleter = borrowed_deleter; /* failed: the caller still owns data */
    tc_storage_release(s); /* the view holds it now (or it is freed on failure) */
    return st2;
}

tc_status tc_tensor_alias(const tc_tensor *t, tc_tensor **out)
{
    tc_tensor *a = header_new((tc_dtype)t->dtype);
    if (!a) return TC_ERR_MEMORY;
    int32_t rc = a->refcount;
    *a = *t;
    a->refcount = rc;
    a->autograd = NULL; /* an alias starts with no history (detach) */
    a->flags = 0;
    tc_storage_retain(a->storage);
    *out = a;
    return TC_OK;
}

void tc_tensor_retain(tc_tensor *t)
{
    if (t) tc_atomic_inc(&t->refcount);
}

void tc_tensor_release(tc_tensor *t)
{
    if (!t || tc_atomic_dec(&t->refcount) != 0) return;
    if (t->autograd) tc_autograd_tensor_free(t);
    tc_storage_release(t->storage);
    __atomic_sub_fetch(&tensors_live, 1, __ATOMIC_RELAXED);
    free(t);
}

void tc_tensor_release_many(tc_tensor **ts, int64_t n)
{
    for (int64_t i = 0; i < n; i++) tc_tensor_release(ts[i]);
}

tc_status tc_tensor_resize(tc_tensor *t, int ndim, const int64_t *sizes)
{
    if (!t || (ndim > 0 && !sizes)) return tc_set_error(TC_ERR_ARG, "resize: NULL argument");
    int64_t es = (int64_t)tc_dtype_size((tc_dtype)t->dtype);
    TRY(check_sizes("resize", ndim, sizes, es));
    int64_t need = tc_numel_of(ndim, sizes) * es;
    int64_t have = t->storage ? t->storage->nbytes - t->offset * es : 0;
    if (need > have || !t->storage) {
        /* Grow: copy what the old storage held so Torch7's resize-then-fill code works. */
        tc_storage *s;
        TRY(storage_alloc_on(t->device, need, false, &s));
        if (t->storage && have > 0 && tc_tensor_is_contiguous(t)) {
            size_t n = (size_t)(have < need ? have : need);
            tc_status c = t->device == TC_CPU ? (memcpy(s->data, tc_base(t), n), TC_OK)
                                              : tc_device_copy_bytes(t->device, s->data, t->device, tc_base(t), n);
            if (c) {
                tc_storage_release(s);
                return c;
            }
        }
        tc_storage_release(t->storage);
        t->storage = s;
        t->offset = 0;
    }
    t->ndim = ndim;
    if (ndim > 0) memcpy(t->size, sizes, sizeof(int64_t) * (size_t)ndim); /* sizes may be NULL for 0-dim */
    tc_contiguous_strides(ndim, sizes, t->stride);
    return TC_OK;
}

tc_status tc_tensor_set(tc_tensor *t, const tc_tensor *src)
{
    if (!t || !src) return tc_set_error(TC_ERR_ARG, "set: NULL argument");
    if (t->dtype != src->dtype)
        return tc_set_error(TC_ERR_DTYPE, "set: %s tensor cannot view a %s tensor",
                            tc_dtype_name((tc_dtype)t->dtype), tc_dtype_name((tc_dtype)src->dtype));
    if (t == src) return TC_OK;
    if (t->device != src->device) {
        char a[16], b[16];
        return tc_set_error(TC_ERR_DEVICE, "set: a %s tensor cannot view a %s tensor (copy it across instead)",
                            tc_device_str(t->device, a, sizeof a), tc_device_str(src->device, b, sizeof b));
    }
    tc_storage_retain(src->storage);
    tc_storage_release(t->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    t->ndim = src->ndim;
    memcpy(t->size, src->size, sizeof t->size);
    memcpy(t->stride, src->stride, sizeof t->stride);
    return TC_OK;
}

tc_status tc_tensor_set_storage(tc_tensor *t, tc_storage *s, int64_t offset, int ndim, const int64_t *sizes,
                                const int64_t *strides)
{
    if (!t) return tc_set_error(TC_ERR_ARG, "set: NULL tensor");
    TRY(check_sizes("set", ndim, sizes, (int64_t)tc_dtype_size((tc_dtype)t->dtype)));
    int64_t st[TC_MAX_DIMS];
    if (!strides) {
        tc_contiguous_strides(ndim, sizes, st);
        strides = st;
    }
    if (!s && tc_numel_of(ndim, sizes) > 0) return tc_set_error(TC_ERR_ARG, "set: no storage for a non-empty size");
    if (s) TRY(check_bounds("set", s, (tc_dtype)t->dtype, offset, ndim, sizes, strides));
    if (s && s->device != t->device) {
        char a[16], b[16];
        return tc_set_error(TC_ERR_DEVICE, "set: a %s tensor cannot view a %s storage",
                            tc_device_str(t->device, a, sizeof a), tc_device_str(s->device, b, sizeof b));
    }
    tc_storage_retain(s);
    tc_storage_release(t->storage);
    t->storage = s;
    t->offset = offset;
    t->ndim = ndim;
    if (ndim > 0) memcpy(t->size, sizes, sizeof(int64_t) * (size_t)ndim); /* sizes may be NULL for 0-dim */
    if (ndim > 0) memcpy(t->stride, strides, sizeof(int64_t) * (size_t)ndim);
    return TC_OK;
}

void tc_tensor_clear(tc_tensor *t)
{
    if (!t) return;
    tc_storage_release(t->storage);
    t->storage = NULL;
    t->offset = 0;
    t->ndim = 0;
}

/* ---- element access ------------------------------------------------------------------------ */

static tc_status element_ptr(const char *what, const tc_tensor *t, const int64_t *index, char **out)
{
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (index[d] < 0 || index[d] >= t->size[d])
            return tc_set_error(TC_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", what,
                                (long long)index[d], d, (long long)t->size[d]);
        off += index[d] * t->stride[d];
    }
    if (!t->storage) return tc_set_error(TC_ERR_INDEX, "%s: tensor is empty", what);
    *out = (char *)t->storage->data + off * (int64_t)tc_dtype_size((tc_dtype)t->dtype);
    return TC_OK;
}

/* An element's value for a caller in Lua: every NaN as the one NaN, since LuaJIT takes a
 * double's bits as they are and a NaN with a payload in the top bits (the data's: a file's,
 * uninitialised memory) would read as another Lua type (see GET in lua/torch/tensor.lua). */
static double lua_safe(double v) { return v == v ? v : NAN; }

/* Device tensors: one element crosses over (cutorch's t[i] does the same, one sync each). */
tc_status tc_tensor_get(const tc_tensor *t, const int64_t *index, double *out)
{
    char *p = NULL;
    TRY(element_ptr("get", t, index, &p));
    if (t->device == TC_CPU) {
        *out = lua_safe(tc_load_as_double(t->dtype, p));
        return TC_OK;
    }
    char buf[16];
    TRY(tc_device_copy_bytes(TC_CPU, buf, t->device, p, (size_t)tc_elsize(t->dtype)));
    *out = lua_safe(tc_load_as_double(t->dtype, buf));
    return TC_OK;
}

tc_status tc_tensor_set_value(tc_tensor *t, const int64_t *index, double v)
{
    char *p = NULL;
    TRY(element_ptr("set", t, index, &p));
    if (t->device == TC_CPU) {
        tc_store_double(t->dtype, p, v);
    } else {
        char buf[16];
        tc_store_double(t->dtype, buf, v);
        TRY(tc_device_copy_bytes(t->device, p, TC_CPU, buf, (size_t)tc_elsize(t->dtype)));
    }
    t->storage->version++; /* a write autograd must see (see tc_op_run) */
    return TC_OK;
}

double tc_tensor_item(const tc_tensor *t)
{
    char *p = tc_base(t);
    if (p && t->device != TC_CPU) return NAN; /* device memory: tc_tensor_get copies it */
    return p ? lua_safe(tc_load_as_double(t->dtype, p)) : 0.0;
}

/* ---- overlap ------------------------------------------------------------------------------ */

void tc_tensor_byte_span(const tc_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t es = tc_elsize(t->dtype), first = t->offset;
    int64_t last = first;
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] == 0) {
            *lo = *hi = 0;
            return;
        }
        int64_t reach = (t->size[d] - 1) * t->stride[d];
        if (reach < 0) first += reach;
        else last += reach;
    }
    *lo = first * es, *hi = (last + 1) * es;
}

bool tc_tensor_overlaps(const tc_tensor *a, const tc_tensor *b)
{
    if (!a->storage || a->storage != b->storage) return false;
    int64_t alo, ahi, blo, bhi;
    tc_tensor_byte_span(a, &alo, &ahi);
    tc_tensor_byte_span(b, &blo, &bhi);
    return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

/* Whether some sum of j_k * st[k] with |j_k| < sz[k] equals d. The strides are sorted
 * largest first and nested (each exceeds the reach of the smaller ones), so the remainder
 * after dim 0 must lie within that reach: only floor(d / st[0]) and the next j qualify. */
static bool offset_reachable(int64_t d, const int64_t *st, const int64_t *sz, int n)
{
    if (n == 0) return d == 0;
    int64_t rest = 0;
    for (int k = 1; k < n; k++) rest += (sz[k] - 1) * st[k];
    int64_t q = d / st[0] - (d % st[0] != 0 && d < 0);
    for (int64_t j = q; j <= q + 1; j++) {
        int64_t r = d - j * st[0];
        if (j > -sz[0] && j < sz[0] && r >= -rest && r <= rest && offset_reachable(r, st + 1, sz + 1, n - 1))
            return true;
    }
    return false;
}

bool tc_tensor_shares_elements(const tc_tensor *a, const tc_tensor *b)
{
    if (!tc_tensor_overlaps(a, b)) return false;
    if (a->dtype != b->dtype || a->ndim != b->ndim || memcmp(a->size, b->size, sizeof(int64_t) * (size_t)a->ndim) ||
        memcmp(a->stride, b->stride, sizeof(int64_t) * (size_t)a->ndim))
        return true; /* different layouts: the byte spans decide */
    int64_t st[TC_MAX_DIMS], sz[TC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->size[d] == 1) continue;
        if (a->stride[d] <= 0) return true; /* expanded or reversed: not worth an exact answer */
        int k = n++;
        for (; k > 0 && st[k - 1] < a->stride[d]; k--) st[k] = st[k - 1], sz[k] = sz[k - 1];
        st[k] = a->stride[d], sz[k] = a->size[d];
    }
    int64_t reach = 0;
    for (int k = n - 1; k >= 0; reach += (sz[k] - 1) * st[k], k--)
        if (st[k] <= reach) return true; /* a self-overlapping layout (unfold) */
    return offset_reachable(b->offset - a->offset, st, sz, n);
}
