/* heap.h — one binary heap for every room: a macro that generates type-safe static inline
 * functions over a caller-owned array. Nothing is allocated; the caller sizes the array.
 *
 *     static inline bool ent_before(const struct ent *a, const struct ent *b)
 *     { return a->key < b->key; }                      // a nearer the root than b: min-heap
 *     TERN_HEAP_DEFINE(ent_heap, struct ent, ent_before)
 *
 *     struct ent h[64]; size_t n = 0;
 *     ent_heap_push(h, &n, 64, e);                     // O(log n)
 *     struct ent top = ent_heap_pop(h, &n);            // n > 0
 *     ent_heap_replace_top(h, n, e);                   // pop + push in one sift, n > 0
 *
 * BEFORE(a, b) must be a strict weak order ("a belongs above b"); its name is called directly,
 * so a static inline comparator is inlined and the code is what a hand-written heap would be:
 * the tokenizer's two merge queues run the same instruction count as the hand-written heaps
 * they replaced (callgrind), the sampler's top-k 4-14 % fewer. Ties move nothing: an element
 * only rises above a parent it is strictly BEFORE, and a child only rises above an element it
 * is strictly BEFORE, exactly the rule of the heaps it replaced, so tokenizer ids and sampled
 * tokens are unchanged.
 *
 * Generated, for NAME:
 *   void NAME_push(T *h, size_t *n, size_t cap, T e)     append e, sift up (checks *n < cap)
 *   void NAME_sift_down(T *h, size_t n, size_t i, T x)   put x in the hole at i of h[0..n)
 *   T    NAME_pop(T *h, size_t *n)                       remove and return the root
 *   void NAME_replace_top(T *h, size_t n, T x)           root := x, restore order */
#ifndef TERN_UTIL_HEAP_H
#define TERN_UTIL_HEAP_H

#include <stddef.h>

#include "util/check.h"

/* A user may need only some of the four functions (clang warns about unused ones). */
#define TERN_HEAP_FN_ __attribute__((unused)) static inline

/* The sift-down loop, shared by _sift_down and _pop: moves the hole at I down to where X
 * belongs in H[0..N); the caller then stores X at H[I]. Written out in each (not one calling the other): the
 * tokenizer's merge loop ran 0.7-1.6 % more instructions when pop called a sift-down function,
 * even inlined, than with the loop in place. */
#define TERN_HEAP_SIFT_DOWN_(H, N, I, X, BEFORE)                                               \
    for (;;) {                                                                                 \
        size_t c_ = 2 * (I) + 1;                                                               \
        if (c_ >= (N)) break;                                                                  \
        if (c_ + 1 < (N) && BEFORE(&(H)[c_ + 1], &(H)[c_])) c_++;                              \
        if (!BEFORE(&(H)[c_], &(X))) break;                                                    \
        (H)[I] = (H)[c_];                                                                      \
        (I) = c_;                                                                              \
    }

#define TERN_HEAP_DEFINE(NAME, T, BEFORE)                                                      \
    TERN_HEAP_FN_ void NAME##_push(T *h, size_t *n, size_t cap, T e)                           \
    {                                                                                          \
        TERN_ASSERT(*n < cap);                                                                 \
        (void)cap;                                                                             \
        size_t i = (*n)++;                                                                     \
        while (i > 0) {                                                                        \
            size_t p = (i - 1) / 2;                                                            \
            if (!BEFORE(&e, &h[p])) break;                                                     \
            h[i] = h[p];                                                                       \
            i = p;                                                                             \
        }                                                                                      \
        h[i] = e;                                                                              \
    }                                                                                          \
    TERN_HEAP_FN_ void NAME##_sift_down(T *h, size_t n, size_t i, T x)                         \
    {                                                                                          \
        TERN_ASSERT(i < n);                                                                    \
        TERN_HEAP_SIFT_DOWN_(h, n, i, x, BEFORE)                                               \
        h[i] = x;                                                                              \
    }                                                                                          \
    TERN_HEAP_FN_ T NAME##_pop(T *h, size_t *n)                                                \
    {                                                                                          \
        TERN_ASSERT(*n > 0);                                                                   \
        T top = h[0];                                                                          \
        T last = h[--(*n)];                                                                    \
        size_t i = 0, m = *n;                                                                  \
        TERN_HEAP_SIFT_DOWN_(h, m, i, last, BEFORE)                                            \
        if (m) h[i] = last;                                                                    \
        return top;                                                                            \
    }                                                                                          \
    TERN_HEAP_FN_ void NAME##_replace_top(T *h, size_t n, T x) { NAME##_sift_down(h, n, 0, x); }

#endif
