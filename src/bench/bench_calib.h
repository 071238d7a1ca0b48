/* bench_calib.h — the machine-speed probe's inner loops, one per kernel path (bench_calib.c
 * picks the one of tern's kernel path and says why the probe exists). Each runs iters sweeps of
 * the int8 dot of a and b (n bytes, a multiple of 512) and returns the sum, so no sweep can be
 * dropped. */
#ifndef TERN_BENCH_BENCH_CALIB_H
#define TERN_BENCH_BENCH_CALIB_H

#include <stdint.h>

int32_t bench_calib_pass_scalar(const int8_t *a, const int8_t *b, int n, int iters);
#if defined(__x86_64__)
int32_t bench_calib_pass_avx2(const int8_t *a, const int8_t *b, int n, int iters);
int32_t bench_calib_pass_avx512(const int8_t *a, const int8_t *b, int n, int iters);
#endif

#endif
