/* test_rng.h — deterministic random test data and the lists of formats the kernel and format
 * tests iterate over. Header-only and free of cmocka, so the standalone NEON test
 * (tests/neon/, cross-built without the test library) shares it with the cmocka tests. */
#ifndef TERN_TEST_RNG_H
#define TERN_TEST_RNG_H

#include <math.h>
#include <stdint.h>

#include "tern.h"

/* xorshift64: uniform in [0, 1) with 53 random bits. */
static inline double test_rand_uniform(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (double)(*state >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller). */
static inline float test_rand_normal(uint64_t *state)
{
    double u1 = test_rand_uniform(state), u2 = test_rand_uniform(state);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* The weight formats tern computes with, and the activation formats they multiply. */
static const int test_weight_types[] = {TERN_TYPE_F32,  TERN_TYPE_F16,  TERN_TYPE_BF16,
                                        TERN_TYPE_Q8_0, TERN_TYPE_Q4_0, TERN_TYPE_Q5_0,
                                        TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
#define TEST_N_WEIGHT_TYPES (int)(sizeof test_weight_types / sizeof test_weight_types[0])
static const int test_act_types[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16, TERN_TYPE_Q8_0,
                                     TERN_TYPE_Q8_K};
#define TEST_N_ACT_TYPES (int)(sizeof test_act_types / sizeof test_act_types[0])

#endif
