/* test_threadpool.c — every chunk of every step runs exactly once, whatever the thread count
 * and however late workers wake. More threads than cores (4 and 7 on a 2-core machine) make
 * workers late all the time; a pool that lets a late worker take a chunk of the wrong step runs
 * it twice or hangs, and this test catches both (the count check, and an alarm). */
#include "test_support.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/threadpool.h"

enum { MAX_CHUNKS = 64 };

struct counts {
    _Atomic int hits[MAX_CHUNKS];
    int n_threads;
    _Atomic int bad_tid;
};

static void count_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    struct counts *c = arg;
    if (chunk < 0 || chunk >= n_chunks || n_chunks > MAX_CHUNKS) atomic_store(&c->bad_tid, 1);
    if (tid < 0 || tid >= c->n_threads) atomic_store(&c->bad_tid, 1);
    atomic_fetch_add(&c->hits[chunk], 1);
}

/* Steps alternate between few and many chunks: a late claim from a small step landing in a
 * large one is exactly the race a broken pool loses. */
static void run_pool(int n_threads, int steps)
{
    struct tp *tp;
    assert_tern_ok(tp_create(n_threads, &tp));
    struct counts *c = calloc(1, sizeof *c);
    c->n_threads = n_threads;
    uint64_t x = 12345;
    for (int step = 0; step < steps; step++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int n = step % 2 ? MAX_CHUNKS - (int)((x >> 33) % 8) : 1 + (int)((x >> 33) % 4);
        for (int i = 0; i < MAX_CHUNKS; i++) atomic_store(&c->hits[i], 0);
        tp_run(tp, count_chunk, c, n);
        for (int i = 0; i < MAX_CHUNKS; i++) {
            int h = atomic_load(&c->hits[i]);
            if (h != (i < n)) fail_msg("%d threads, step %d (%d chunks): chunk %d ran %d times",
                                       n_threads, step, n, i, h);
        }
    }
    assert_int_equal(atomic_load(&c->bad_tid), 0);
    print_message("%d threads: %d steps, every chunk exactly once\n", n_threads, steps);
    free(c);
    tp_free(tp);
}

static void test_1_thread(void **state) { (void)state; run_pool(1, 20000); }
static void test_2_threads(void **state) { (void)state; run_pool(2, 200000); }
static void test_oversubscribed(void **state)
{
    (void)state;
    run_pool(4, 200000);
    run_pool(7, 100000);
}

static void test_bad_counts(void **state)
{
    (void)state;
    struct tp *tp;
    assert_int_equal(tp_create(0, &tp), TERN_ERR_ARG);
    assert_tern_ok(tp_create(2, &tp));
    struct counts c = {.n_threads = 2};
    tp_run(tp, count_chunk, &c, 0); /* nothing to do: returns at once */
    assert_int_equal(atomic_load(&c.hits[0]), 0);
    tp_free(tp);
}

/* A pool that loses a chunk waits forever: turn that into a prompt failure. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_threadpool: hung for 300 s (a chunk was lost or run twice)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(2);
    _exit(1);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1_thread),
        cmocka_unit_test(test_2_threads),
        cmocka_unit_test(test_oversubscribed),
        cmocka_unit_test(test_bad_counts),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
