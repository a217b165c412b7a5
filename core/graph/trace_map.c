/* trace_map.c -- the tracer's maps (trace_state.h): tensor keys to value ids, storages to
 * what the trace knows of them, and per-value facts. Open addressing with linear probing;
 * deleted keys leave tombstones (a failed call's keys are removed, trace.c's rollback), which
 * a resize drops. Loads stay under one half, so every probe meets an empty slot.
 */
#include "trace_state.h"
#include <stdlib.h>

/* ---- keys ------------------------------------------------------------------------------- */

void tc_trace_key(const tc_tensor *t, vkey *k)
{
    memset(k, 0, sizeof *k);
    k->s = t->storage;
    k->version = t->storage ? t->storage->version : 0;
    k->offset = t->offset, k->dtype = t->dtype, k->ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < TC_MAX_DIMS; d++) k->size[d] = t->size[d], k->stride[d] = t->stride[d];
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_key(const vkey *k)
{
    uint64_t h = mix(mix((uint64_t)(uintptr_t)k->s, (uint64_t)k->version), (uint64_t)k->offset);
    h = mix(h, (uint64_t)k->dtype << 8 | (uint64_t)k->ndim);
    for (int d = 0; d < k->ndim; d++) h = mix(mix(h, (uint64_t)k->size[d]), (uint64_t)k->stride[d]);
    return h ^ (h >> 29);
}

static int64_t map_slot(const tstate *S, const vkey *k, bool for_insert)
{
    uint64_t mask = (uint64_t)S->mapcap - 1;
    int64_t dead = -1;
    for (uint64_t i = hash_key(k) & mask;; i = (i + 1) & mask) {
        const ventry *e = &S->map[i];
        if (e->val == SLOT_EMPTY) return for_insert && dead >= 0 ? dead : (int64_t)i;
        if (e->val == SLOT_DEAD) {
            if (dead < 0) dead = (int64_t)i;
        } else if (memcmp(&e->k, k, sizeof *k) == 0) {
            return (int64_t)i;
        }
    }
}

int32_t tc_trace_map_find(const tstate *S, const vkey *k)
{
    if (!S->mapcap) return -1;
    const ventry *e = &S->map[map_slot(S, k, false)];
    return e->val >= 0 ? e->val : -1;
}

static tc_status map_grow(tstate *S)
{
    int64_t cap = S->mapcap ? S->mapcap * 2 : 256;
    ventry *old = S->map;
    int64_t oldcap = S->mapcap;
    S->map = malloc(sizeof *S->map * (size_t)cap);
    if (!S->map) {
        S->map = old;
        return tc_set_error(TC_ERR_MEMORY, "trace: out of memory for the value map");
    }
    for (int64_t i = 0; i < cap; i++) S->map[i].val = SLOT_EMPTY;
    S->mapcap = cap, S->mapused = 0;
    for (int64_t i = 0; i < oldcap; i++)
        if (old[i].val >= 0) {
            S->map[map_slot(S, &old[i].k, true)] = old[i];
            S->mapused++;
        }
    free(old);
    return TC_OK;
}

/* Keys k to val (replacing an existing entry). New keys are journaled while a call runs. */
tc_status tc_trace_map_put(tstate *S, const vkey *k, int32_t val)
{
    if ((S->mapused + 1) * 2 > S->mapcap) TRY(map_grow(S));
    ventry *e = &S->map[map_slot(S, k, true)];
    bool fresh = e->val < 0;
    if (fresh && S->depth > 0) {
        if (S->njk == S->capjk) {
            int32_t cap = S->capjk ? 2 * S->capjk : 16;
            vkey *j = realloc(S->jkeys, sizeof *j * (size_t)cap);
            if (!j) return tc_set_error(TC_ERR_MEMORY, "trace: out of memory");
            S->jkeys = j, S->capjk = cap;
        }
        S->jkeys[S->njk++] = *k;
    }
    if (e->val == SLOT_EMPTY) S->mapused++;
    e->k = *k, e->val = val;
    return TC_OK;
}

void tc_trace_map_del(tstate *S, const vkey *k)
{
    if (!S->mapcap) return;
    ventry *e = &S->map[map_slot(S, k, false)];
    if (e->val >= 0) e->val = SLOT_DEAD;
}

/* ---- storages ------------------------------------------------------------------------------ */

static int64_t sto_slot(const tstate *S, const tc_storage *s, bool for_insert)
{
    uint64_t mask = (uint64_t)S->stocap - 1;
    int64_t dead = -1;
    for (uint64_t i = mix(0, (uint64_t)(uintptr_t)s) & mask;; i = (i + 1) & mask) {
        const sentry *e = &S->sto[i];
        if (e->state == 0) return for_insert && dead >= 0 ? dead : (int64_t)i;
        if (e->state == 2) {
            if (dead < 0) dead = (int64_t)i;
        } else if (e->s == s) {
            return (int64_t)i;
        }
    }
}

sentry *tc_trace_sto_find(const tstate *S, const tc_storage *s)
{
    if (!S->stocap || !s) return NULL;
    sentry *e = &S->sto[sto_slot(S, s, false)];
    return e->state == 1 ? e : NULL;
}

/* The entry of s, added (and s retained) when missing. */
tc_status tc_trace_sto_get(tstate *S, tc_storage *s, sentry **out)
{
    if ((*out = tc_trace_sto_find(S, s)) != NULL) return TC_OK;
    if ((S->stoused + 1) * 2 > S->stocap) {
        int64_t cap = S->stocap ? S->stocap * 2 : 128, oldcap = S->stocap;
        sentry *old = S->sto, *n = calloc((size_t)cap, sizeof *n);
        if (!n) return tc_set_error(TC_ERR_MEMORY, "trace: out of memory for the storage map");
        S->sto = n, S->stocap = cap, S->stoused = 0;
        for (int64_t i = 0; i < oldcap; i++)
            if (old[i].state == 1) S->sto[sto_slot(S, old[i].s, true)] = old[i], S->stoused++;
        free(old);
    }
    if (S->depth > 0) {
        if (S->njs == S->capjs) {
            int32_t cap = S->capjs ? 2 * S->capjs : 16;
            tc_storage **j = realloc(S->jsto, sizeof *j * (size_t)cap);
            if (!j) return tc_set_error(TC_ERR_MEMORY, "trace: out of memory");
            S->jsto = j, S->capjs = cap;
        }
        S->jsto[S->njs++] = s;
    }
    sentry *e = &S->sto[sto_slot(S, s, true)];
    if (e->state == 0) S->stoused++;
    memset(e, 0, sizeof *e);
    e->s = s, e->state = 1, e->root = -1;
    tc_storage_retain(s);
    S->retained_bytes += s->nbytes;
    *out = e;
    return TC_OK;
}

void tc_trace_sweep(tstate *S)
{
    int64_t dying = 0;
    for (int64_t i = 0; i < S->stocap; i++) {
        sentry *e = &S->sto[i];
        if (e->state == 1 && __atomic_load_n(&e->s->refcount, __ATOMIC_ACQUIRE) == 1) e->state = 3, dying++;
    }
    if (!dying) return;
    for (int64_t i = 0; i < S->mapcap; i++) {
        ventry *m = &S->map[i];
        if (m->val < 0 || !m->k.s) continue;
        uint64_t mask = (uint64_t)S->stocap - 1;
        for (uint64_t j = mix(0, (uint64_t)(uintptr_t)m->k.s) & mask;; j = (j + 1) & mask) {
            const sentry *e = &S->sto[j];
            if (e->state == 0) break;
            if (e->s != m->k.s || e->state == 2) continue;
            if (e->state == 3) m->val = SLOT_DEAD;
            break;
        }
    }
    for (int64_t i = 0; i < S->stocap; i++) {
        sentry *e = &S->sto[i];
        if (e->state != 3) continue;
        tc_storage_release(e->s);
        e->s = NULL, e->state = 2;
    }
}

/* Byte span [lo, hi) of t's elements in its storage (empty: lo == hi). */
void tc_trace_span(const tc_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t es = tc_elsize(t->dtype), a = t->offset;
    int64_t b = a;
    if (tc_tensor_numel(t) == 0) {
        *lo = *hi = 0;
        return;
    }
    for (int d = 0; d < t->ndim; d++) {
        if (t->stride[d] >= 0) b += (t->size[d] - 1) * t->stride[d];
        else a += (t->size[d] - 1) * t->stride[d];
    }
    *lo = a * es, *hi = (b + 1) * es;
}

bool tc_trace_overlaps_written(const sentry *e, const tc_tensor *t)
{
    int64_t lo, hi;
    tc_trace_span(t, &lo, &hi);
    return e->written && lo < hi && e->wlo < e->whi && lo < e->whi && e->wlo < hi;
}

/* ---- per-value facts ------------------------------------------------------------------------- */

tc_status tc_trace_facts_reserve(tstate *S, int32_t n)
{
    if (n <= S->capv) return TC_OK;
    int32_t cap = S->capv ? S->capv : 64;
    while (cap < n) cap *= 2;
    uint8_t *d = realloc(S->dyn, (size_t)cap);
    if (d) S->dyn = d;
    int32_t *h = d ? realloc(S->home, sizeof *h * (size_t)cap) : NULL;
    if (!h) return tc_set_error(TC_ERR_MEMORY, "trace: out of memory");
    /* values made outside the tracer (control-flow nodes) default to dynamic, not captured */
    for (int32_t v = S->capv; v < cap; v++) d[v] = 1, h[v] = -1;
    S->home = h, S->capv = cap;
    return TC_OK;
}

tc_status tc_trace_facts_set(tstate *S, int32_t v, bool dyn, int32_t home)
{
    TRY(tc_trace_facts_reserve(S, v + 1));
    S->dyn[v] = dyn, S->home[v] = home;
    return TC_OK;
}
