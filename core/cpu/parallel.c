/* parallel.c -- a small persistent thread pool for CPU kernels.
 *
 * tc_parallel_for splits a range into one chunk per thread; the calling thread runs chunk
 * 0 and waits for the workers. Workers sleep on a condition variable between jobs. One job
 * runs at a time (a mutex serialises callers from different threads); a kernel called from
 * inside a worker runs inline, so nested parallel loops cannot deadlock.
 */
#include "../internal.h"
#include <pthread.h>
#include <unistd.h>

#ifdef TC_HAVE_OPENBLAS
void openblas_set_num_threads(int n);
#endif

#define MAX_THREADS 64

static struct {
    pthread_mutex_t job_lock; /* one job at a time */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int started;  /* workers running */
    int nthreads; /* configured, including the caller */
    int active;   /* threads taking part in the current job */
    uint64_t generation;
    int pending;
    tc_range_fn fn;
    void *ctx;
    int64_t n, chunk;
} pool = {.job_lock = PTHREAD_MUTEX_INITIALIZER,
          .mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static _Thread_local int in_parallel;

static void run_chunk(int id)
{
    int64_t b = id * pool.chunk, e = b + pool.chunk;
    if (e > pool.n) e = pool.n;
    if (b < e) pool.fn(pool.ctx, b, e);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seen = 0;
    in_parallel = 1;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.mu);
        seen = pool.generation;
        int active = id < pool.active;
        pthread_mutex_unlock(&pool.mu);
        if (active) run_chunk(id);
        pthread_mutex_lock(&pool.mu);
        if (active && --pool.pending == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

void tc_set_num_threads(int n)
{
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    pthread_mutex_lock(&pool.job_lock);
    pool.nthreads = n;
    pthread_mutex_unlock(&pool.job_lock);
#ifdef TC_HAVE_OPENBLAS
    openblas_set_num_threads(n);
#endif
}

int tc_get_num_threads(void)
{
    int n = __atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED);
    if (n == 0) {
        n = default_threads();
        __atomic_store_n(&pool.nthreads, n, __ATOMIC_RELAXED);
    }
    return n;
}

/* Starts workers 1..nthreads-1 on first use; a failed pthread_create just means fewer
 * helpers (the loop still completes on the threads that exist). */
static void ensure_workers(int want)
{
    while (pool.started + 1 < want) {
        pthread_t th;
        if (pthread_create(&th, NULL, worker, (void *)(intptr_t)(pool.started + 1)) != 0) break;
        pthread_detach(th);
        pool.started++;
    }
}

void tc_parallel_for(int64_t n, int64_t grain, tc_range_fn fn, void *ctx)
{
    int nt = tc_get_num_threads();
    if (grain < 1) grain = 1;
    if (in_parallel || nt < 2 || n < 2 * grain) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&pool.job_lock);
    ensure_workers(nt);
    int use = pool.started + 1 < nt ? pool.started + 1 : nt;
    if (n / grain < use) use = (int)(n / grain);
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = (n + use - 1) / use;
    pool.pending = use - 1;
    pool.active = use; /* workers with id >= use sit this job out */
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    in_parallel = 1;
    run_chunk(0);
    in_parallel = 0;

    pthread_mutex_lock(&pool.mu);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.job_lock);
}
