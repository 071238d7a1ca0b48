/* test_rng.h — deterministic random test data and the lists of formats the kernel and format
 * tests iterate over. Header-only and free of cmocka, so the standalone NEON test
 * (tests/neon/, cross-built without the test library) shares it with the cmocka tests. */
#ifndef TERN_TEST_RNG_H
#define TERN_TEST_RNG_H

#include <math.h>
#include <stdint.h>

#include "quant/quant.h"
#include "tern.h"
#include "util/fp16.h"

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
                                        TERN_TYPE_Q5_1, TERN_TYPE_Q4_1, TERN_TYPE_Q4_K,
                                        TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
#define TEST_N_WEIGHT_TYPES (int)(sizeof test_weight_types / sizeof test_weight_types[0])
static const int test_act_types[] = {TERN_TYPE_F32,  TERN_TYPE_F16,  TERN_TYPE_BF16,
                                     TERN_TYPE_Q8_0, TERN_TYPE_Q8_1, TERN_TYPE_Q8_K};
#define TEST_N_ACT_TYPES (int)(sizeof test_act_types / sizeof test_act_types[0])

/* A Q5_1 x Q8_1 block dot takes its min term from the activation block's stored
 * s = fp16(d * sum(q)) (as ggml does), not from the sum of the dequantized activations. Add
 * this to a dot of dequantized rows (af: the activation row dequantized) to get the value the
 * reference dot computes; 0 for every other format. */
static inline double test_min_term_fix(int wtype, const void *w, const void *a, const float *af,
                                       int64_t k)
{
    if (wtype != TERN_TYPE_Q5_1 && wtype != TERN_TYPE_Q4_1) return 0;
    /* both keep the fp16 min m at byte 2 of their blocks (24 and 20 bytes) */
    const size_t bbytes = wtype == TERN_TYPE_Q5_1 ? sizeof(struct quant_block_q5_1)
                                                  : sizeof(struct quant_block_q4_1);
    const struct quant_block_q8_1 *ab = a;
    double fix = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        double sum = 0;
        for (int j = 0; j < 32; j++) sum += af[32 * b + j];
        uint16_t m;
        memcpy(&m, (const uint8_t *)w + (size_t)b * bbytes + 2, sizeof m);
        fix += (double)fp16_to_f32(m) * ((double)fp16_to_f32(ab[b].s) - sum);
    }
    return fix;
}

#endif
