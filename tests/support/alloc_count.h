/* alloc_count.h — counting heap allocations in tests that must not allocate.
 *
 * A test that includes this must be linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 * (list it in TERN_ALLOC_COUNTING_TESTS in CMakeLists.txt): every malloc/calloc/realloc made by
 * libtern and the test then goes through counters in alloc_count.c. */
#ifndef TERN_TEST_ALLOC_COUNT_H
#define TERN_TEST_ALLOC_COUNT_H

/* Allocations so far in this process (thread-safe). */
long test_allocations(void);

#endif
