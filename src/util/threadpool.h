/* threadpool.h — a persistent pool of worker threads, one per context.
 *
 * Threads are created once (tp_create) and reused for every operation of every token: a
 * forward pass runs ~10 parallel steps per layer, so handing work over must cost well under a
 * microsecond. Workers spin briefly on a generation counter, then sleep on a condition variable,
 * so an idle pool costs no CPU. tp_run() runs fn on all n threads (the caller is thread 0) and
 * returns when every thread has finished: a full barrier between steps. */
#ifndef TERN_UTIL_THREADPOOL_H
#define TERN_UTIL_THREADPOOL_H

#include "tern.h"

struct tp;

typedef void (*tp_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1 = no worker threads). Caller frees with tp_free(). */
tern_status tp_create(int n_threads, struct tp **out);
void tp_free(struct tp *tp);
int tp_n_threads(const struct tp *tp);
/* Run fn(arg, i, n) for i in [0, n) concurrently; the caller runs i = 0. Not reentrant. */
void tp_run(struct tp *tp, tp_fn fn, void *arg);

/* Split [0, total) into nth near-equal chunks aligned to `align`; chunk of thread ith. */
static inline void tp_split(long long total, int ith, int nth, long long align, long long *lo,
                            long long *hi)
{
    long long units = (total + align - 1) / align;
    long long per = units / nth, rem = units % nth;
    long long u0 = ith * per + (ith < rem ? ith : rem);
    long long u1 = u0 + per + (ith < rem ? 1 : 0);
    *lo = u0 * align < total ? u0 * align : total;
    *hi = u1 * align < total ? u1 * align : total;
}

#endif
