/* check.h — invariants that must hold, checked where a broken one would corrupt memory.
 *
 * TERN_ASSERT is for tern's own bugs, never for bad input (bad input gets a tern_status and a
 * message; see error.h). It is compiled in when TERN_CHECKS is defined: debug, RelWithDebInfo
 * and sanitizer builds, so `make test-asan` (and with it CI) runs every check; Release builds
 * (`make`, benchmarks) drop them, so the hot paths pay nothing. A failed check prints the file,
 * line and condition and aborts: continuing would write through a broken link or past an array. */
#ifndef TERN_UTIL_CHECK_H
#define TERN_UTIL_CHECK_H

#ifdef TERN_CHECKS
#include <stdio.h>
#include <stdlib.h>
#define TERN_ASSERT(cond)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: tern internal check failed: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                                    \
            abort();                                                                           \
        }                                                                                      \
    } while (0)
#else
#define TERN_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
