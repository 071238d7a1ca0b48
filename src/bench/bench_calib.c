/* bench_calib.c — how fast is this machine right now? A fixed probe that `tern bench --suite`
 * runs before its first round and after every round, so `tern gate` can tell a slower build from
 * a slower machine.
 *
 * Why: on a shared VM the host moves the vCPU's speed by several per cent over tens of minutes
 * (clock, a busy SMT sibling, the L3 shared with neighbours). Within one report interleaved
 * rounds spread that drift over every prompt, but a baseline blessed an hour ago ran on another
 * "machine": the same build measured TTFT p50 x0.94-1.06 across 45 minutes of one quiet session
 * (README "Speed governance", Noise), and the probe below moved with it (-5 % probe, +5-7 %
 * TTFT). The probe is deliberately not tern's code (none of its kernels, no model), so a slower
 * tern build leaves it alone and a slower machine moves both.
 *
 * What it runs: int8 x int8 -> int32 multiply-accumulate over two 16 KiB arrays in L1 (the
 * integer dot product at the heart of tern's prefill and decode), plain C as the compiler
 * vectorizes it (~16 GOP/s on Zen 5 with the portable build), ~8 ms a pass, best of 5 passes (an interruption only slows a pass). The
 * method string names the compiler and flags: probes from different builds of the probe are not
 * compared. */
#include <stdint.h>

#include "bench/bench.h"
#include "tern_build_info.h"
#include "util/clock.h"

#define CALIB_N 16384
#define CALIB_ITERS 4000

const char *bench_calib_method(void)
{
    return "int8-dot-l1/v1 " TERN_BUILD_COMPILER " " TERN_BUILD_FLAGS;
}

/* One pass: CALIB_ITERS sweeps; a byte changes between sweeps so no sweep can be hoisted. */
static int32_t calib_pass(int8_t *a, const int8_t *b)
{
    int32_t s = 0;
    for (int it = 0; it < CALIB_ITERS; it++) {
        for (int i = 0; i < CALIB_N; i++) s += a[i] * b[i];
        a[it & (CALIB_N - 1)] ^= 1;
    }
    return s;
}

double bench_calib_probe(void)
{
    int8_t a[CALIB_N] __attribute__((aligned(64))), b[CALIB_N] __attribute__((aligned(64)));
    for (int i = 0; i < CALIB_N; i++) {
        a[i] = (int8_t)(i * 7);
        b[i] = (int8_t)(i * 13 + 1);
    }
    volatile int32_t sink = 0;
    double best = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = util_now_s();
        sink += calib_pass(a, b);
        double t = util_now_s() - t0;
        double gops = 2.0 * CALIB_N * CALIB_ITERS / t / 1e9;
        if (t > 0 && gops > best) best = gops;
    }
    (void)sink;
    return best;
}
