/* parallel.c -- a small persistent thread pool for CPU kernels.
 *
 * tc_parallel_for cuts a range into a few tickets per thread; the calling thread and the
 * workers claim tickets until none is left, then the caller waits for the tickets still
 * running. Between jobs a worker first spins for up to SPIN_NS watching for the next one,
 * then sleeps on a condition variable; the caller waits for unfinished tickets the same way.
 * A training step is a stream of ops a few microseconds apart: woken through the condition
 * variable every time, a worker came back tens of microseconds late (a futex wake-up, worse
 * in a VM) and the step of a small model (LeNet) lost a tenth of its time to hand-offs; a
 * pool left idle sleeps after SPIN_NS, so it costs nothing outside such streams. One job
 * runs at a time (a mutex serialises callers from different threads); a kernel called from
 * inside a worker runs inline, so nested parallel loops cannot deadlock.
 */
#include "gemm.h"
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 50000 /* how long an idle thread watches for work before it sleeps */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *word != old or SPIN_NS have passed (the clock read every 64 rounds). */
static void spin_while_equal_u64(const uint64_t *word, uint64_t old)
{
    int64_t t0 = now_ns();
    for (int i = 1; __atomic_load_n(word, __ATOMIC_ACQUIRE) == old; i++) {
        cpu_relax();
        if ((i & 63) == 0 && now_ns() - t0 > SPIN_NS) return;
    }
}

static void spin_while_below(const int64_t *word, int64_t target)
{
    int64_t t0 = now_ns();
    for (int i = 1; __atomic_load_n(word, __ATOMIC_ACQUIRE) < target; i++) {
        cpu_relax();
        if ((i & 63) == 0 && now_ns() - t0 > SPIN_NS) return;
    }
}

#ifdef TC_HAVE_OPENBLAS
void openblas_set_num_threads(int n);
/* OpenBLAS's pthreads build exports this (it is what it runs at exit); weak, so a build
 * against another OpenBLAS flavour links and just skips it. */
extern int blas_thread_shutdown_(void) __attribute__((weak));
#endif

/* OpenBLAS runs single-threaded; large products are split over this pool instead (see
 * gemm.h for why). Its worker threads, started when the library loaded, are also ended:
 * idle ones spin in sched_yield for about 0.2 s of CPU after start-up (and after each
 * threaded call) before they sleep, and on two cores that is the first hundreds of
 * milliseconds of every script running at half speed. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_one_thread(void)
{
#ifdef TC_HAVE_OPENBLAS
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
#endif
}

void tc_cpu_blas_single_thread(void)
{
    pthread_once(&blas_once, blas_one_thread);
}

#define MAX_THREADS 64
/* Tickets per thread: a job is cut into this many pieces per thread, which the threads
 * claim one at a time. On a loaded machine a worker that is not scheduled soon claims
 * nothing and the caller runs its share, instead of waiting a scheduler slice for it. */
#define TICKETS_PER_THREAD 4

static struct {
    pthread_mutex_t job_lock; /* one job at a time */
    pthread_mutex_t mu;       /* guards generation, active, waiting; with the conds */
    pthread_cond_t wake, done;
    int started;  /* workers running */
    int nthreads; /* configured, including the caller */
    int active;   /* threads taking part in the current job */
    uint64_t generation;
    uint32_t jobno;
    /* claim word (atomic): job number << 32 | ticket count << 16 | next ticket. A ticket
     * is claimed by a compare-and-swap, so a worker that wakes after its job is over
     * claims nothing and never touches the next job's fields with the last one's. */
    uint64_t claim;
    int64_t finished; /* atomic: tickets of the current job run to the end */
    tc_range_fn fn;
    void *ctx;
    int64_t n, chunk;
} pool = {.job_lock = PTHREAD_MUTEX_INITIALIZER,
          .mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static _Thread_local int in_parallel;

/* The next ticket of job `job`, or -1 when it has none left or is no longer current. */
static int64_t claim(uint32_t job, int64_t *tickets)
{
    uint64_t v = __atomic_load_n(&pool.claim, __ATOMIC_ACQUIRE);
    for (;;) {
        int64_t next = (int64_t)(v & 0xffff), nt = (int64_t)((v >> 16) & 0xffff);
        if ((uint32_t)(v >> 32) != job || next >= nt) return -1;
        if (__atomic_compare_exchange_n(&pool.claim, &v, v + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            *tickets = nt;
            return next;
        }
    }
}

/* Runs ticket t; the thread finishing the job's last ticket wakes the caller. */
static void run_ticket(int64_t t, int64_t tickets, bool worker)
{
    int64_t b = t * pool.chunk, e = b + pool.chunk;
    if (e > pool.n) e = pool.n;
    if (b < e) pool.fn(pool.ctx, b, e);
    if (__atomic_add_fetch(&pool.finished, 1, __ATOMIC_ACQ_REL) == tickets && worker) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.mu);
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seen = 0;
    in_parallel = 1;
    for (;;) {
        spin_while_equal_u64(&pool.generation, seen);
        pthread_mutex_lock(&pool.mu);
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.mu);
        seen = pool.generation;
        int active = id < pool.active;
        pthread_mutex_unlock(&pool.mu);
        if (active) {
            uint32_t job = (uint32_t)(__atomic_load_n(&pool.claim, __ATOMIC_ACQUIRE) >> 32);
            int64_t t, tickets;
            while ((t = claim(job, &tickets)) >= 0) run_ticket(t, tickets, true);
        }
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
    tc_cpu_blas_single_thread();
}

int tc_get_num_threads(void)
{
    int n = __atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED);
    if (n == 0) {
        tc_cpu_blas_single_thread();
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
    int64_t tickets = (int64_t)use * TICKETS_PER_THREAD;
    if (n / grain < tickets) tickets = n / grain;
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = (n + tickets - 1) / tickets;
    tickets = (n + pool.chunk - 1) / pool.chunk; /* no empty tickets */
    __atomic_store_n(&pool.finished, 0, __ATOMIC_RELAXED);
    uint32_t job = ++pool.jobno;
    __atomic_store_n(&pool.claim, (uint64_t)job << 32 | (uint64_t)tickets << 16, __ATOMIC_RELEASE);
    pthread_mutex_lock(&pool.mu);
    pool.active = use; /* workers with id >= use sit this job out */
    __atomic_add_fetch(&pool.generation, 1, __ATOMIC_RELEASE); /* spinning workers read it */
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    in_parallel = 1;
    int64_t t, tk;
    while ((t = claim(job, &tk)) >= 0) run_ticket(t, tickets, false);
    in_parallel = 0;

    if (__atomic_load_n(&pool.finished, __ATOMIC_ACQUIRE) < tickets) spin_while_below(&pool.finished, tickets);
    if (__atomic_load_n(&pool.finished, __ATOMIC_ACQUIRE) < tickets) {
        pthread_mutex_lock(&pool.mu);
        while (__atomic_load_n(&pool.finished, __ATOMIC_ACQUIRE) < tickets) pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.job_lock);
}
