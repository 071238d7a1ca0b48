/* clock.h — clocks in milliseconds for timing and timeouts in every room (one copy instead of a
 * static now_ms per file): the monotonic wall clock, and the CPU time of this thread or of the
 * whole process (what a loaded machine does not inflate). */
#ifndef TERN_UTIL_CLOCK_H
#define TERN_UTIL_CLOCK_H

#include <time.h>

static inline double util_clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
static inline double util_now_ms(void) { return util_clock_ms(CLOCK_MONOTONIC); }
static inline double util_now_s(void) { return util_clock_ms(CLOCK_MONOTONIC) / 1e3; }
static inline double util_thread_cpu_ms(void) { return util_clock_ms(CLOCK_THREAD_CPUTIME_ID); }
static inline double util_process_cpu_ms(void) { return util_clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

#endif
