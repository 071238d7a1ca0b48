/* bench_calib.c — how fast is this machine right now? A fixed probe that `tern bench --suite`
 * runs before its first round and after every round, so `tern gate` can tell a slower build from
 * a slower machine.
 *
 * Why: on a shared VM the host moves the vCPU's speed by several per cent over tens of minutes
 * (clock, a busy SMT sibling, the L3 shared with neighbours). Within one report interleaved
 * rounds spread that drift over every prompt, but a baseline blessed an hour ago ran on another
 * "machine": the same build measured TTFT p50 x0.94-1.06 across 45 minutes of one quiet session
 * (docs/results/gate-rates-2026-11.md), and the probe below moved with it (-5 % probe, +5-7 %
 * TTFT). The probe is deliberately not tern's code (none of its kernels, no model), so a slower
 * tern build leaves it alone and a slower machine moves both.
 *
 * What it runs: the int8 x int8 -> int32 dot product at the heart of tern's prefill and decode,
 * over two 16 KiB arrays in L1, in the instructions of tern's kernel path (bench_calib_avx512.c:
 * vpdpbusd; bench_calib_avx2.c: vpmaddubsw + vpmaddwd; elsewhere the plain C loop below). The
 * instructions matter: measured on this VM, a plain C loop (SSE from the portable build) stayed
 * within 1 % while an AVX-512 loop and tern's TTFT moved 4-5 % together, so the probe uses the
 * units tern's kernels use. ~5-8 ms a pass, best of 5 passes (an interruption only slows a pass).
 * The method string names the path, compiler and flags: probes from different builds or paths
 * are not compared. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_calib.h"
#include "kernels/kernels.h"
#include "tern_build_info.h"
#include "util/clock.h"

#define CALIB_N 16384

int32_t bench_calib_pass_scalar(const int8_t *a, const int8_t *b, int n, int iters)
{
    uint32_t s = 0; /* wraps: the sum only has to exist */
    for (int it = 0; it < iters; it++) {
        __asm__ volatile("" ::: "memory"); /* every sweep is run: none is hoisted or folded */
        for (int i = 0; i < n; i++) s += (uint32_t)(a[i] * b[i]);
    }
    return (int32_t)s;
}

struct calib_path {
    const char *name;
    int32_t (*pass)(const int8_t *, const int8_t *, int, int);
    int iters; /* sweeps per pass: ~5-8 ms on Zen 5 */
};

static struct calib_path calib_path(void)
{
#if defined(__x86_64__)
    const char *isa = kern_isa_name();
    if (!strcmp(isa, "avx512")) return (struct calib_path){"avx512-vpdpbusd", bench_calib_pass_avx512, 100000};
    if (!strcmp(isa, "avx2")) return (struct calib_path){"avx2-vpmaddubsw", bench_calib_pass_avx2, 40000};
#endif
    return (struct calib_path){"c", bench_calib_pass_scalar, 4000};
}

const char *bench_calib_method(void)
{
    static char m[256];
    snprintf(m, sizeof m, "int8-dot-l1/v2 %s %s %s", calib_path().name, TERN_BUILD_COMPILER, TERN_BUILD_FLAGS);
    return m;
}

double bench_calib_probe(void)
{
    const struct calib_path path = calib_path();
    int8_t a[CALIB_N] __attribute__((aligned(64))), b[CALIB_N] __attribute__((aligned(64)));
    for (int i = 0; i < CALIB_N; i++) {
        a[i] = (int8_t)(i * 7);
        b[i] = (int8_t)(i * 13 + 1);
    }
    volatile uint32_t sink = 0;
    double best = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = util_now_s();
        sink += (uint32_t)path.pass(a, b, CALIB_N, path.iters);
        double t = util_now_s() - t0;
        double gops = 2.0 * CALIB_N * path.iters / t / 1e9;
        if (t > 0 && gops > best) best = gops;
    }
    (void)sink;
    return best;
}
