/* test_heap.c — src/util/heap.h, the binary heap the tokenizer's merge loops and the sampler's
 * top-k share: pops come out in BEFORE order, replace_top keeps the k best of a stream, and
 * ties resolve as the heap's documented rule says (an element moves only past one it is
 * strictly BEFORE), checked against a plain reference heap written out here. */
#include "test_support.h"
#include "util/heap.h"

#include <stdlib.h>
#include <string.h>

struct item {
    int key;
    int tag; /* insertion order: tells equal keys apart */
};

static inline bool item_before(const struct item *a, const struct item *b) { return a->key < b->key; }
TERN_HEAP_DEFINE(item_heap, struct item, item_before)

static uint64_t rng = 0x1234567;
static int next_key(int range)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng >> 33) % (uint64_t)range);
}

/* The textbook heap with the same tie rule, written independently. */
static void ref_push(struct item *h, size_t *n, struct item e)
{
    size_t i = (*n)++;
    h[i] = e;
    while (i > 0 && h[i].key < h[(i - 1) / 2].key) {
        struct item t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}
static struct item ref_pop(struct item *h, size_t *n)
{
    struct item top = h[0];
    h[0] = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].key < h[c].key) c++;
        if (!(h[c].key < h[i].key)) break;
        struct item t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
    return top;
}

/* Interleaved pushes and pops with many equal keys: same items, same order, as the reference. */
static void test_push_pop_matches_reference(void **state)
{
    (void)state;
    enum { CAP = 4096 };
    static struct item a[CAP], b[CAP];
    for (int round = 0; round < 50; round++) {
        size_t na = 0, nb = 0;
        int tag = 0, range = round % 2 ? 8 : 100000;
        for (int step = 0; step < 3000; step++) {
            if (na < CAP && (na == 0 || next_key(3) != 0)) {
                struct item e = {next_key(range), tag++};
                item_heap_push(a, &na, CAP, e);
                ref_push(b, &nb, e);
            } else {
                struct item x = item_heap_pop(a, &na), y = ref_pop(b, &nb);
                assert_int_equal(x.key, y.key);
                assert_int_equal(x.tag, y.tag);
            }
            assert_int_equal(na, nb);
        }
        int last = -1;
        while (na) { /* draining gives non-decreasing keys */
            struct item x = item_heap_pop(a, &na), y = ref_pop(b, &nb);
            assert_true(x.key >= last);
            assert_int_equal(x.tag, y.tag);
            last = x.key;
        }
    }
}

static int cmp_int_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* The sampler's use: a k-heap with the worst at the root keeps the k largest of a stream. */
static void test_replace_top_keeps_k_best(void **state)
{
    (void)state;
    enum { N = 20000, K = 37 };
    static int all[N];
    struct item h[K];
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        all[i] = next_key(1000000);
        struct item e = {all[i], i};
        if (n < K) item_heap_push(h, &n, K, e);
        else if (e.key > h[0].key) item_heap_replace_top(h, n, e);
    }
    qsort(all, N, sizeof *all, cmp_int_desc);
    int got[K];
    for (int i = K - 1; i >= 0; i--) got[i] = item_heap_pop(h, &n).key; /* smallest first */
    assert_int_equal(n, 0);
    for (int i = 0; i < K; i++) assert_int_equal(got[i], all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_pop_matches_reference),
        cmocka_unit_test(test_replace_top_keeps_k_best),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
