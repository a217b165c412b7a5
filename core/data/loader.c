/* loader.c -- tc_loader: batches of in-memory data sets assembled on a background thread.
 *
 * A training step should never wait for its next batch. The loader owns one producer
 * thread that gathers the rows of upcoming batches (in the epoch's order or permutation),
 * converts them (e.g. uint8 pixels to float32 in [0, 1]) into fresh contiguous tensors and
 * parks them in a small ring of `prefetch` slots; tc_loader_next hands the oldest one over.
 * The producer touches only its sources (read-only, copied to contiguous form at creation)
 * and tensors it allocates itself, so it needs no locks beyond the ring's own.
 */
#include "internal.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct slot {
    bool ready;
    tc_status status;  /* a failure while building this batch */
    char message[256]; /* its text (errors are thread-local; copied for the consumer) */
    tc_tensor **t;     /* nsrc tensors */
} slot;

struct tc_loader {
    int nsrc;
    tc_tensor **src; /* contiguous sources, all with first size n */
    int32_t *dtype;  /* output dtype per source */
    double *scale, *shift;
    int64_t *row_elems; /* elements per row of each source */
    tc_loader_config cfg;
    int64_t n, nbatches;
    int64_t *perm; /* this epoch's row order */
    uint64_t epoch;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake_producer, wake_consumer;
    slot *slots;           /* cfg.prefetch of them; batch b lives in slots[b % prefetch] */
    int64_t produced;      /* batches built (or being built) this epoch */
    int64_t consumed;      /* batches handed out this epoch */
    bool building, stop;
};

static int64_t batch_rows(const tc_loader *l, int64_t b)
{
    int64_t start = b * l->cfg.batch_size, rows = l->n - start;
    return rows < l->cfg.batch_size ? rows : l->cfg.batch_size;
}

/* splitmix64: a small, good generator for the permutation (independent of the tensor RNG
 * so that loading never perturbs a model's random stream). */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void make_order(tc_loader *l)
{
    for (int64_t i = 0; i < l->n; i++) l->perm[i] = i;
    if (!l->cfg.shuffle) return;
    uint64_t s = l->cfg.seed + l->epoch * 0x632BE59BD9B4E019ull;
    for (int64_t i = l->n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix(&s) % (uint64_t)(i + 1));
        int64_t t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
}

/* Gathers rows perm[start .. start+rows) of source i into a new tensor. */
static tc_status build_one(const tc_loader *l, int i, int64_t start, int64_t rows, tc_tensor **out)
{
    const tc_tensor *s = l->src[i];
    int64_t sizes[TC_MAX_DIMS];
    for (int d = 0; d < s->ndim; d++) sizes[d] = s->size[d];
    sizes[0] = rows;
    tc_tensor *t;
    TRY(tc_tensor_alloc((tc_dtype)l->dtype[i], s->ndim, sizes, &t));
    int64_t re = l->row_elems[i], ies = tc_elsize(s->dtype), oes = tc_elsize(l->dtype[i]);
    const char *base = tc_base(s);
    char *dst = tc_tensor_data(t);
    bool same = l->dtype[i] == s->dtype && l->scale[i] == 1 && l->shift[i] == 0;
    for (int64_t r = 0; r < rows; r++) {
        const char *row = base + l->perm[start + r] * re * ies;
        char *o = dst + r * re * oes;
        if (same) {
            memcpy(o, row, (size_t)(re * ies));
        } else if (s->dtype == TC_U8 && l->dtype[i] == TC_F32) { /* images: the common case */
            float sc = (float)l->scale[i], sh = (float)l->shift[i];
            for (int64_t e = 0; e < re; e++) ((float *)o)[e] = ((const uint8_t *)row)[e] * sc + sh;
        } else {
            for (int64_t e = 0; e < re; e++)
                tc_store_double(l->dtype[i], o + e * oes,
                                tc_load_as_double(s->dtype, row + e * ies) * l->scale[i] + l->shift[i]);
        }
    }
    *out = t;
    return TC_OK;
}

static void *producer(void *arg)
{
    tc_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && (l->produced >= l->nbatches || l->produced - l->consumed >= l->cfg.prefetch))
            pthread_cond_wait(&l->wake_producer, &l->mu);
        if (l->stop) break;
        int64_t b = l->produced++;
        l->building = true;
        pthread_mutex_unlock(&l->mu);

        slot *sl = &l->slots[b % l->cfg.prefetch];
        tc_status st = TC_OK;
        int made = 0;
        for (; made < l->nsrc && st == TC_OK; made++) {
            st = build_one(l, made, b * l->cfg.batch_size, batch_rows(l, b), &sl->t[made]);
            if (st) break;
        }
        if (st) {
            snprintf(sl->message, sizeof sl->message, "loader: batch %lld: %s", (long long)b + 1, tc_last_error());
            for (int i = 0; i < made; i++) tc_tensor_release(sl->t[i]);
        }
        pthread_mutex_lock(&l->mu);
        sl->status = st;
        sl->ready = true;
        l->building = false;
        pthread_cond_broadcast(&l->wake_consumer);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void drop_ready_slots(tc_loader *l)
{
    for (int s = 0; s < l->cfg.prefetch; s++) {
        slot *sl = &l->slots[s];
        if (sl->ready && sl->status == TC_OK)
            for (int i = 0; i < l->nsrc; i++) tc_tensor_release(sl->t[i]);
        sl->ready = false;
    }
}

static void free_loader(tc_loader *l)
{
    if (l->src)
        for (int i = 0; i < l->nsrc; i++)
            if (l->src[i]) tc_tensor_release(l->src[i]);
    if (l->slots)
        for (int s = 0; s < l->cfg.prefetch; s++) free(l->slots[s].t);
    free(l->slots);
    free(l->src);
    free(l->dtype);
    free(l->scale);
    free(l->shift);
    free(l->row_elems);
    free(l->perm);
    free(l);
}

tc_status tc_loader_new(const tc_tensor *const *sources, int nsrc, const int32_t *out_dtype, const double *scale,
                        const double *shift, const tc_loader_config *cfg, tc_loader **out)
{
    char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
    if (!out || !cfg || !sources || nsrc < 1)
        return tc_set_error(TC_ERR_ARG, "loader: needs at least one source, a config and a result pointer");
    if (cfg->batch_size < 1)
        return tc_set_error(TC_ERR_ARG, "loader: batch size must be positive, got %lld", (long long)cfg->batch_size);
    for (int i = 0; i < nsrc; i++) {
        const tc_tensor *s = sources[i];
        if (!s || s->ndim < 1 || !s->storage)
            return tc_set_error(TC_ERR_ARG, "loader: source %d must be a tensor with at least one dim", i + 1);
        if (s->size[0] != sources[0]->size[0])
            return tc_set_error(TC_ERR_SHAPE, "loader: sources differ in their first size: %s and %s",
                                tc_shape_str(sources[0], b1, sizeof b1), tc_shape_str(s, b2, sizeof b2));
        int odt = out_dtype && out_dtype[i] >= 0 ? out_dtype[i] : s->dtype;
        if (odt >= TC_DTYPE_COUNT || tc_is_half(odt) || tc_is_half(s->dtype))
            return tc_set_error(TC_ERR_DTYPE, "loader: source %d: unsupported dtype conversion", i + 1);
    }
    tc_loader *l = calloc(1, sizeof *l);
    if (!l) return tc_set_error(TC_ERR_MEMORY, "loader: out of memory");
    l->nsrc = nsrc;
    l->cfg = *cfg;
    if (l->cfg.prefetch < 1) l->cfg.prefetch = 1;
    l->n = sources[0]->size[0];
    l->nbatches = cfg->drop_last ? l->n / cfg->batch_size : (l->n + cfg->batch_size - 1) / cfg->batch_size;
    l->src = calloc((size_t)nsrc, sizeof *l->src);
    l->dtype = calloc((size_t)nsrc, sizeof *l->dtype);
    l->scale = calloc((size_t)nsrc, sizeof *l->scale);
    l->shift = calloc((size_t)nsrc, sizeof *l->shift);
    l->row_elems = calloc((size_t)nsrc, sizeof *l->row_elems);
    l->perm = malloc(sizeof *l->perm * (size_t)(l->n > 0 ? l->n : 1));
    l->slots = calloc((size_t)l->cfg.prefetch, sizeof *l->slots);
    bool ok = l->src && l->dtype && l->scale && l->shift && l->row_elems && l->perm && l->slots;
    for (int s = 0; ok && s < l->cfg.prefetch; s++) ok = (l->slots[s].t = calloc((size_t)nsrc, sizeof(tc_tensor *)));
    if (!ok) {
        free_loader(l);
        return tc_set_error(TC_ERR_MEMORY, "loader: out of memory");
    }
    for (int i = 0; i < nsrc; i++) {
        const tc_tensor *s = sources[i];
        l->dtype[i] = out_dtype && out_dtype[i] >= 0 ? out_dtype[i] : s->dtype;
        l->scale[i] = scale ? scale[i] : 1;
        l->shift[i] = shift ? shift[i] : 0;
        l->row_elems[i] = l->n > 0 ? tc_tensor_numel(s) / l->n : 0;
        tc_status st;
        if (tc_tensor_is_contiguous(s)) {
            st = tc_tensor_alias(s, &l->src[i]);
        } else {
            tc_params p = {.i = {-1}};
            const tc_tensor *in[1] = {s};
            l->src[i] = NULL;
            st = tc_op_run(TC_OP_COPY, in, 1, &p, &l->src[i], 1);
        }
        if (st) {
            free_loader(l);
            return st;
        }
    }
    make_order(l);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->wake_producer, NULL);
    pthread_cond_init(&l->wake_consumer, NULL);
    if (pthread_create(&l->thread, NULL, producer, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->wake_producer);
        pthread_cond_destroy(&l->wake_consumer);
        free_loader(l);
        return tc_set_error(TC_ERR_INTERNAL, "loader: cannot start its thread");
    }
    *out = l;
    return TC_OK;
}

int64_t tc_loader_num_batches(const tc_loader *l) { return l ? l->nbatches : 0; }

tc_status tc_loader_next(tc_loader *l, tc_tensor **outs, int *done)
{
    if (!l || !outs || !done) return tc_set_error(TC_ERR_ARG, "loader_next: NULL argument");
    pthread_mutex_lock(&l->mu);
    if (l->consumed >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        *done = 1;
        return TC_OK;
    }
    slot *sl = &l->slots[l->consumed % l->cfg.prefetch];
    while (!sl->ready) pthread_cond_wait(&l->wake_consumer, &l->mu);
    tc_status st = sl->status;
    if (st == TC_OK)
        for (int i = 0; i < l->nsrc; i++) outs[i] = sl->t[i];
    else
        tc_set_error(st, "%s", sl->message);
    sl->ready = false;
    l->consumed++;
    pthread_cond_broadcast(&l->wake_producer);
    pthread_mutex_unlock(&l->mu);
    *done = 0;
    return st;
}

tc_status tc_loader_reset(tc_loader *l)
{
    if (!l) return tc_set_error(TC_ERR_ARG, "loader_reset: NULL loader");
    pthread_mutex_lock(&l->mu);
    while (l->building) pthread_cond_wait(&l->wake_consumer, &l->mu);
    drop_ready_slots(l);
    l->epoch++;
    make_order(l);
    l->produced = l->consumed = 0;
    pthread_cond_broadcast(&l->wake_producer);
    pthread_mutex_unlock(&l->mu);
    return TC_OK;
}

void tc_loader_free(tc_loader *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->wake_producer);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    drop_ready_slots(l);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->wake_producer);
    pthread_cond_destroy(&l->wake_consumer);
    free_loader(l);
}
