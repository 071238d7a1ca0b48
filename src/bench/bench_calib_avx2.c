/* bench_calib_avx2.c — the machine-speed probe's loop on the AVX2 path: vpmaddubsw + vpmaddwd
 * (u8 x s8 -> s16 pairs -> s32), the integer dot of tern's AVX2 kernels without AVX-VNNI, over
 * L1-resident arrays (bench_calib.c says why the probe exists). Eight independent accumulators. */
#include <immintrin.h>
#include <stdint.h>

#include "bench/bench_calib.h"

int32_t bench_calib_pass_avx2(const int8_t *a, const int8_t *b, int n, int iters)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
    for (int it = 0; it < iters; it++) {
        __asm__ volatile("" ::: "memory"); /* every sweep is run: none is hoisted or folded */
        for (int i = 0; i + 256 <= n; i += 256)
            for (int r = 0; r < 8; r++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(a + i + 32 * r));
                const __m256i y = _mm256_loadu_si256((const __m256i *)(b + i + 32 * r));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones));
            }
    }
    __m256i s = acc[0];
    for (int i = 1; i < 8; i++) s = _mm256_add_epi32(s, acc[i]);
    const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    const __m128i q = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1)));
}
