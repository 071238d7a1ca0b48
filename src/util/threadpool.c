/* threadpool.c — see threadpool.h. Hand-off protocol: the caller publishes (fn, arg), bumps
 * `generation` (release); workers that see a new generation run the step and decrement
 * `pending`; the caller spins until pending reaches 0. A worker that has spun SPIN_LIMIT times
 * without news sleeps on `wake`; tp_run broadcasts only when someone sleeps. */
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
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
 * every further check (on an oversubscribed machine the thread we wait for may need our core),
 * and finally sleep. */
enum { SPIN_PAUSE = 1 << 12, SPIN_LIMIT = 1 << 14 };

struct tp {
    int n;
    pthread_t *threads;
    tp_fn fn;
    void *arg;
    _Atomic unsigned generation;
    _Atomic int pending;
    _Atomic int stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int sleepers; /* guarded by lock */
};

struct worker_arg {
    struct tp *tp;
    int ith;
};

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
        tp->fn(tp->arg, wa.ith, tp->n);
        atomic_fetch_sub_explicit(&tp->pending, 1, memory_order_acq_rel);
    }
}

tern_status tp_create(int n_threads, struct tp **out)
{
    if (n_threads < 1 || n_threads > 1024)
        return tern_fail(TERN_ERR_ARG, "thread count %d is out of range 1..1024", n_threads);
    struct tp *tp = calloc(1, sizeof *tp);
    if (!tp) return tern_fail(TERN_ERR_NOMEM, "thread pool: out of memory");
    tp->n = n_threads;
    pthread_mutex_init(&tp->lock, NULL);
    pthread_cond_init(&tp->wake, NULL);
    tp->threads = calloc((size_t)n_threads, sizeof *tp->threads);
    if (!tp->threads) {
        tp_free(tp);
        return tern_fail(TERN_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (struct worker_arg){.tp = tp, .ith = i};
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

void tp_run(struct tp *tp, tp_fn fn, void *arg)
{
    if (tp->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store_explicit(&tp->pending, tp->n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&tp->generation, 1, memory_order_acq_rel);
    pthread_mutex_lock(&tp->lock);
    if (tp->sleepers) pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->lock);
    fn(arg, 0, tp->n);
    for (int spins = 0; atomic_load_explicit(&tp->pending, memory_order_acquire) != 0; spins++) {
        if (spins < SPIN_PAUSE) cpu_relax();
        else sched_yield();
    }
}
