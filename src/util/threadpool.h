/* threadpool.h — a persistent pool of worker threads, one per context.
 *
 * Threads are created once (tp_create) and reused for every step of every token: a forward
 * pass runs ~10 parallel steps per layer, so handing work over must cost well under a
 * microsecond. A step is split into n_chunks chunks that threads claim from an atomic counter:
 * the caller claims chunks too, so when a worker is late (descheduled by another process on a
 * busy machine) the others simply take its share instead of the whole step waiting for it.
 * tp_run returns when every chunk is done: a full barrier between steps. Workers spin briefly,
 * then yield, then sleep on a condition variable, so an idle pool costs no CPU. */
#ifndef TERN_UTIL_THREADPOOL_H
#define TERN_UTIL_THREADPOOL_H

#include "tern.h"

struct tp;

/* Process chunk `chunk` of n_chunks; tid (0 = the caller) identifies the thread, for per-thread
 * scratch. Which thread runs which chunk is decided at run time. */
typedef void (*tp_fn)(void *arg, int chunk, int n_chunks, int tid);

/* n_threads >= 1 (1 = no worker threads). Caller frees with tp_free(). */
TERN_NODISCARD tern_status tp_create(int n_threads, struct tp **out);
void tp_free(struct tp *tp);
int tp_n_threads(const struct tp *tp);
/* Run fn on chunks 0..n_chunks-1 across the pool and return when all are done. Not reentrant. */
void tp_run(struct tp *tp, tp_fn fn, void *arg, int n_chunks);

/* Split [0, total) into nth near-equal parts aligned to `align`; part ith. */
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
