/* trace_state.h -- the tracer's recording state, shared by trace.c (recording) and
 * trace_map.c (the key and storage maps); private to the tracer.
 *
 * Keys: (storage, storage version, dtype, offset, sizes, strides) -> value id, in an
 * open-addressing table with tombstones (a failed call's keys are deleted from a journal).
 * Storages: every storage the trace keyed, retained, with what the trace knows of it
 * (captured or not, written or not, the value of the whole buffer).
 */
#ifndef TC_GRAPH_TRACE_STATE_H
#define TC_GRAPH_TRACE_STATE_H

#include "trace.h"

typedef struct vkey {
    const tc_storage *s;
    int64_t version, offset;
    int32_t dtype, ndim;
    int64_t size[TC_MAX_DIMS], stride[TC_MAX_DIMS];
} vkey;

enum { SLOT_EMPTY = -1, SLOT_DEAD = -2 };

typedef struct ventry {
    vkey k;
    int32_t val; /* value id, or SLOT_EMPTY / SLOT_DEAD */
} ventry;

typedef struct sentry {
    tc_storage *s;    /* retained */
    int8_t state;     /* 0 empty, 1 used, 2 dead */
    int8_t captured;  /* storage of a captured tensor (EXTERNAL values) */
    int8_t written;   /* the trace wrote it */
    int64_t wlo, whi; /* captured: byte span the trace wrote (wlo >= whi: none) */
    int32_t root;     /* not captured: the value of the whole buffer (input or op result), or -1 */
    vkey rootkey;     /* its key (valid while rootkey.version is the storage's version) */
} sentry;

typedef struct tstate {
    ventry *map;
    int64_t mapcap, mapused; /* used counts dead slots too */
    sentry *sto;
    int64_t stocap, stoused;
    uint8_t *dyn;  /* per value: depends on an input, a captured tensor or a random op */
    int32_t *home; /* per value: the EXTERNAL whose buffer holds it, or -1 */
    int32_t capv;
    char *loc;             /* tc_trace_set_location text (malloc) */
    const char *loc_arena; /* its copy in the graph arena, made on first use */
    /* journal of keys and storages added by the calls in progress (rollback on failure) */
    vkey *jkeys;
    int32_t njk, capjk;
    tc_storage **jsto;
    int32_t njs, capjs;
    int depth;
    bool shape_only;         /* tc_trace_shape_only: dynamic calls are recorded, not computed */
    int32_t since_sweep;     /* top-level calls recorded since the last tc_trace_sweep */
    int64_t retained_bytes;  /* bytes of the storages first retained since then */
    char err[512]; /* the first recording error's message */
} tstate;

#define ST(g) ((tstate *)(g)->trace_state)

/* ---- trace_map.c ------------------------------------------------------------------------ */

void tc_trace_key(const tc_tensor *t, vkey *k);
/* The value keyed by k, or -1. */
int32_t tc_trace_map_find(const tstate *S, const vkey *k);
/* Keys k to val (replacing an entry); new keys are journaled while a call runs (depth > 0). */
tc_status tc_trace_map_put(tstate *S, const vkey *k, int32_t val);
void tc_trace_map_del(tstate *S, const vkey *k);
/* The entry of storage s, or NULL; tc_trace_sto_get adds it (retaining s) when missing. */
sentry *tc_trace_sto_find(const tstate *S, const tc_storage *s);
tc_status tc_trace_sto_get(tstate *S, tc_storage *s, sentry **out);
/* Byte span [lo, hi) of t's elements in its storage (empty: lo == hi). */
void tc_trace_span(const tc_tensor *t, int64_t *lo, int64_t *hi);
/* Whether t overlaps what the trace wrote into e's (captured) storage. */
bool tc_trace_overlaps_written(const sentry *e, const tc_tensor *t);
/* Per-value facts: room for n values (new ones: dynamic, no home), and setting one. */
tc_status tc_trace_facts_reserve(tstate *S, int32_t n);
tc_status tc_trace_facts_set(tstate *S, int32_t v, bool dyn, int32_t home);

/* Drops the storages only the trace still holds (no header views them: nothing can read
 * them again), after deleting their keys, so that a new storage at a reused address never
 * matches a dead one's key. Keeps a long trace's memory near eager mode's. depth 0 only. */
void tc_trace_sweep(tstate *S);

#endif /* TC_GRAPH_TRACE_STATE_H */
