/* threadpool.c — see threadpool.h.
 *
 * Protocol. One atomic word holds the open step: (sequence << 40) | (n_chunks << 20) | next
 * chunk. A step is published by writing (fn, arg), resetting `done`, storing the word with
 * next = 0 (release) and bumping `generation`. Threads claim a chunk with fetch_add(1) on the
 * word and decode the step's n_chunks from the value they got, so a claim is always judged
 * against the step it was made in: a worker that wakes late and claims from a finished (or
 * closed, n_chunks = 0) step gets an index past the end and does nothing, and can never run a
 * chunk of the next step twice. A valid claim keeps its step open until the chunk is done, so
 * (fn, arg) cannot change under it. */
#include "util/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* Spin with pause for a while (hand-offs are usually sub-microsecond), then yield the core on
 * every further check (on an oversubscribed machine the thread we wait for may need it), and
 * finally sleep. */
enum { SPIN_PAUSE = 1 << 12, SPIN_LIMIT = 1 << 14 };
#define IDX_BITS 20
#define IDX_MASK ((1ull << IDX_BITS) - 1)
#define MAX_CHUNKS ((int)IDX_MASK - 1024) /* room for late claims past the end */

struct tp {
    int n;
    pthread_t *threads;
    tp_fn fn;
    void *arg;
    _Atomic uint64_t word;    /* seq << 40 | n_chunks << 20 | next chunk (see above) */
    uint64_t seq;             /* steps published (caller only) */
    _Atomic int done;         /* chunks finished in the current step */
    _Atomic unsigned generation;
    _Atomic int stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int sleepers; /* guarded by lock */
};

struct worker_arg {
    struct tp *tp;
    int tid;
};

/* Claim and run chunks of the open step until none are left. */
static void work(struct tp *tp, int tid)
{
    for (;;) {
        const uint64_t w = atomic_fetch_add_explicit(&tp->word, 1, memory_order_acq_rel);
        const int n = (int)((w >> IDX_BITS) & IDX_MASK);
        const int c = (int)(w & IDX_MASK);
        if (c >= n) return; /* this step is exhausted (or closed: n = 0) */
        tp->fn(tp->arg, c, n, tid);
        atomic_fetch_add_explicit(&tp->done, 1, memory_order_acq_rel);
    }
}

static void *worker_main(void *p)
{
    struct worker_arg wa = *(struct worker_arg *)p;
    free(p);
    struct tp *tp = wa.tp;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&tp->generation, memory_order_acquire)) == seen) {
            if (++spins < SPIN_PAUSE) {
                cpu_relax();
                continue;
            }
            if (spins < SPIN_LIMIT) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&tp->lock);
            tp->sleepers++;
            while (atomic_load_explicit(&tp->generation, memory_order_acquire) == seen)
                pthread_cond_wait(&tp->wake, &tp->lock);
            tp->sleepers--;
            pthread_mutex_unlock(&tp->lock);
            spins = 0;
        }
        seen = gen;
        if (atomic_load_explicit(&tp->stop, memory_order_acquire)) return NULL;
        work(tp, wa.tid);
    }
}

tern_status tp_create(int n_threads, struct tp **out)
{
    if (n_threads < 1 || n_threads > 1024)
        return tern_fail(TERN_ERR_ARG, "thread count %d is out of range 1..1024", n_threads);
    struct tp *tp = calloc(1, sizeof *tp);
    if (!tp) return tern_fail(TERN_ERR_NOMEM, "thread pool: out of memory");
    tp->n = n_threads;
    atomic_init(&tp->word, 0); /* closed: n_chunks = 0 */
    pthread_mutex_init(&tp->lock, NULL);
    pthread_cond_init(&tp->wake, NULL);
    tp->threads = calloc((size_t)n_threads, sizeof *tp->threads);
    if (!tp->threads) {
        tp_free(tp);
        return tern_fail(TERN_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (struct worker_arg){.tp = tp, .tid = i};
        if (!wa || pthread_create(&tp->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            tp->n = i; /* only join what started */
            tp_free(tp);
            return tern_fail(TERN_ERR_NOMEM, "thread pool: could not start thread %d", i);
        }
    }
    *out = tp;
    return TERN_OK;
}

void tp_free(struct tp *tp)
{
    if (!tp) return;
    if (tp->threads) {
        atomic_store_explicit(&tp->stop, 1, memory_order_release);
        pthread_mutex_lock(&tp->lock);
        atomic_fetch_add_explicit(&tp->generation, 1, memory_order_acq_rel);
        pthread_cond_broadcast(&tp->wake);
        pthread_mutex_unlock(&tp->lock);
        for (int i = 1; i < tp->n; i++) pthread_join(tp->threads[i], NULL);
        free(tp->threads);
    }
    pthread_mutex_destroy(&tp->lock);
    pthread_cond_destroy(&tp->wake);
    free(tp);
}

int tp_n_threads(const struct tp *tp) { return tp->n; }

void tp_run(struct tp *tp, tp_fn fn, void *arg, int n_chunks)
{
    if (n_chunks <= 0) return;
    if (n_chunks > MAX_CHUNKS) n_chunks = MAX_CHUNKS; /* callers ask for a few per thread */
    if (tp->n == 1 || n_chunks == 1) { /* nothing to share: no hand-off, no worker woken */
        for (int c = 0; c < n_chunks; c++) fn(arg, c, n_chunks, 0);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    tp->seq++;
    atomic_store_explicit(&tp->done, 0, memory_order_relaxed);
    atomic_store_explicit(&tp->word, (tp->seq << 40) | ((uint64_t)n_chunks << IDX_BITS),
                          memory_order_release); /* open the step */
    atomic_fetch_add_explicit(&tp->generation, 1, memory_order_acq_rel);
    pthread_mutex_lock(&tp->lock);
    if (tp->sleepers) pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->lock);
    work(tp, 0);
    for (int spins = 0; atomic_load_explicit(&tp->done, memory_order_acquire) != n_chunks; spins++) {
        if (spins < SPIN_PAUSE) cpu_relax();
        else sched_yield();
    }
    atomic_store_explicit(&tp->word, tp->seq << 40, memory_order_release); /* closed */
}
