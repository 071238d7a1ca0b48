/* clock.h — the monotonic clock in milliseconds, for timing and timeouts in every room (one
 * copy instead of a static now_ms per file). */
#ifndef TERN_UTIL_CLOCK_H
#define TERN_UTIL_CLOCK_H

#include <time.h>

static inline double util_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
