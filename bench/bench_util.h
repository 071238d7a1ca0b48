/* bench_util.h — what the stand-alone micro-benchmarks in bench/ share: clocks (wall, thread and
 * process CPU time), a comparison for qsort'ing doubles into medians, and the xorshift source
 * their random weights come from (fixed seed: every run times the same numbers). Header-only:
 * each benchmark is one translation unit linked against the library. */
#ifndef TERN_BENCH_UTIL_H
#define TERN_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

static inline double bench_clock_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* wall time; this thread's CPU time (a loaded machine does not inflate it); the process's */
static inline double now_s(void) { return bench_clock_s(CLOCK_MONOTONIC); }
static inline double thread_cpu_s(void) { return bench_clock_s(CLOCK_THREAD_CPUTIME_ID); }
static inline double process_cpu_s(void) { return bench_clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static inline int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* uniform in [-1, 1), xorshift64 */
static uint64_t bench_rng = 88172645463325252ull;
static inline float rnd(void)
{
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (float)((double)(bench_rng >> 11) / 9007199254740992.0 * 2 - 1);
}

#endif
