/* bench_calib_avx512.c — the machine-speed probe's loop on the AVX-512 path: vpdpbusd (u8 x s8
 * -> s32), the instruction of tern's AVX-512 prefill and decode kernels, over L1-resident arrays
 * (bench_calib.c says why the probe exists and what it must not be). Eight independent
 * accumulators, so the loop runs at the units' throughput, not one chain's latency: what a busy
 * SMT sibling or a lower clock takes from tern's kernels, it takes from this loop. */
#include <immintrin.h>
#include <stdint.h>

#include "bench/bench_calib.h"

int32_t bench_calib_pass_avx512(const int8_t *a, const int8_t *b, int n, int iters)
{
    __m512i acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_si512();
    for (int it = 0; it < iters; it++) {
        __asm__ volatile("" ::: "memory"); /* every sweep is run: none is hoisted or folded */
        for (int i = 0; i + 512 <= n; i += 512)
            for (int r = 0; r < 8; r++)
                acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_loadu_si512(a + i + 64 * r),
                                             _mm512_loadu_si512(b + i + 64 * r));
    }
    __m512i s = acc[0];
    for (int i = 1; i < 8; i++) s = _mm512_add_epi32(s, acc[i]);
    /* summed as unsigned: the sum wraps (it only has to exist), and signed overflow is UB, which
     * _mm512_reduce_add_epi32's plain int additions would be */
    uint32_t lanes[16], sum = 0;
    _mm512_storeu_si512(lanes, s);
    for (int i = 0; i < 16; i++) sum += lanes[i];
    return (int32_t)sum;
}
