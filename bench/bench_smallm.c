/* bench_smallm.c — CPU time of kern_matmul for a few tokens (the batched decode step of the
 * server: 1..16 sequences, one token each), per weight format, on DRAM-resident weights.
 *
 * What is timed: one kern_matmul over a weight matrix of about 256 MB (k columns, rows to fill
 * it; k = 896 like q/k/v/o/gate/up and the output projection of Qwen2.5-0.5B, k = 4864 like
 * ffn_down), on the calling thread, with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID), so a
 * loaded machine does not inflate it the way it inflates wall time. Activations are quantized
 * beforehand, not timed. Each figure is the median of the repetitions. Reported: ms per call and
 * the ratio to n_tok = 1 (the number the server's "8 streams >= 3x one" target needs <= ~3).
 * Besides the routed kernel (what the forward pass runs on weights not repacked), `-a` also
 * times the AVX-512 panel and decode kernels directly, for every n_tok, to show where the
 * route's thresholds belong, and the matmul over a copy repacked beforehand (kern_packed.h,
 * what a model loaded with repacking runs; packing not timed) for the formats that have one
 * (on avx512 and avx2; TERN_AVXVNNI=0 for the avx2 tile without AVX-VNNI).
 *
 * Usage: bench_smallm [-a | -k KERNEL] [-t TYPE] [-m MB] [-K COLS] [reps] (default 5; -k: only
 * that kernel of -a, e.g. packed; -t: only that weight type, e.g. q8_0; -m: the matrix's size,
 * 256 MB by default; 1-2 MB keeps it in L2 or L3, which shows a kernel's compute without DRAM;
 * -K: that k instead of 896 and 4864, e.g. 640 for Gemma 3 270M, whose last chunk is short) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kern_packed.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"
#include "bench_util.h"

enum { K_ROUTE, K_PANEL, K_DECODE, K_PACKED };
static const char *const kname[] = {"routed", "panel", "decode", "packed"};

static double time_one(int which, int type, const void *W, size_t ws, const void *P,
                       const void *A, size_t as, int n_tok, int64_t k, int64_t rows, float *Y,
                       int reps, double *times)
{
    for (int i = -1; i < reps; i++) { /* i = -1: warm-up */
        const double t0 = thread_cpu_s();
        if (which == K_ROUTE)
            kern_matmul(type, W, ws, A, as, n_tok, k, 0, rows, Y, rows);
#if defined(__x86_64__)
        else if (which == K_PACKED)
            kern_matmul_packed(type, W, ws, P, A, as, n_tok, k, 0, rows, Y, rows);
        else if (which == K_PANEL)
            kern_avx512_panel_matmul(type)(W, ws, A, as, n_tok, k, 0, rows, Y, rows);
        else if (!kern_avx512_decode_matmul(type, W, ws, A, as, n_tok, k, 0, rows, Y, rows) &&
                 !kern_avx512_decode_kquant(type, W, ws, A, as, n_tok, k, 0, rows, Y, rows))
            return -1;
#endif
        if (i >= 0) times[i] = (thread_cpu_s() - t0) * 1e3;
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_d);
    return times[reps / 2];
}

int main(int argc, char **argv)
{
    int all = 0, argi = 1, only = -1, kern_only = -1;
    if (argi < argc && !strcmp(argv[argi], "-a")) all = 1, argi++;
    if (argi + 1 < argc && !strcmp(argv[argi], "-k")) {
        for (int i = 0; i < 4; i++)
            if (!strcmp(argv[argi + 1], kname[i])) kern_only = i;
        if (kern_only < 0) {
            fprintf(stderr, "bench_smallm: unknown kernel '%s' (routed, panel, decode, packed)\n",
                    argv[argi + 1]);
            return 2;
        }
        all = 1;
        argi += 2;
    }
    if (argi + 1 < argc && !strcmp(argv[argi], "-t")) {
        if (tern_type_from_name(argv[argi + 1], &only) != TERN_OK) {
            fprintf(stderr, "bench_smallm: unknown type '%s'\n", argv[argi + 1]);
            return 2;
        }
        argi += 2;
    }
    int mb = 256;
    if (argi + 1 < argc && !strcmp(argv[argi], "-m")) {
        mb = atoi(argv[argi + 1]);
        argi += 2;
    }
    int64_t ks[] = {896, 4864};
    size_t nk = 2;
    if (argi + 1 < argc && !strcmp(argv[argi], "-K")) { /* one k instead of the two defaults */
        ks[0] = atoll(argv[argi + 1]), nk = 1;
        argi += 2;
    }
    const int reps = argi < argc ? atoi(argv[argi]) : 5;
    if (reps < 1 || mb < 1 || mb > 4096 || ks[0] < 32 || ks[0] > 65536 || ks[0] % 32) {
        fprintf(stderr, "usage: bench_smallm [-a | -k KERNEL] [-t TYPE] [-m MB (1..4096)] [-K COLS (32..65536, "
                        "a multiple of 32)] [reps >= 1]\n");
        return 2;
    }
    kern_init();
    const int avx512 = !strcmp(kern_isa_name(), "avx512");
    printf("kernel path: %s, 1 thread, thread CPU time, median of %d\n", kern_path_name(), reps);
    const int types[] = {TERN_TYPE_Q8_0, TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                         TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
    const int ntoks[] = {1, 2, 3, 4, 6, 8, 12, 16};
    const int n_nt = (int)(sizeof ntoks / sizeof ntoks[0]), max_tok = 16;
    double *times = malloc((size_t)reps * sizeof *times);
    for (size_t ki = 0; ki < nk; ki++) {
        const int64_t k = ks[ki];
        float *act = malloc((size_t)(max_tok * k) * sizeof *act);
        float *xf = malloc((size_t)(256 * k) * sizeof *xf);
        for (int64_t i = 0; i < max_tok * k; i++) act[i] = rnd();
        for (int64_t i = 0; i < 256 * k; i++) xf[i] = rnd() * 0.05f;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            if (only >= 0 && types[ti] != only) continue;
            const struct quant_traits *tr = quant_traits_get(types[ti]);
            if (k % tr->block_size) continue; /* the K-quants' 256-element blocks: not at k = 896 */
            const struct quant_traits *at = quant_traits_get(tr->vec_dot_type);
            const size_t ws = quant_row_bytes(types[ti], k), as = quant_row_bytes(at->type, k);
            int64_t rows = (int64_t)(((size_t)mb << 20) / ws) & ~255ll;
            if (rows < 256) rows = 256;
            uint8_t *W = malloc(ws * (size_t)rows), *A = malloc(as * max_tok);
            float *Y = malloc((size_t)rows * max_tok * sizeof *Y);
            if (!W || !A || !Y) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            for (int64_t r = 0; r < 256; r++) tr->from_float_ref(xf + r * k, W + r * ws, k);
            for (int64_t r = 256; r < rows; r += 256) memcpy(W + r * ws, W, ws * 256);
            for (int t = 0; t < max_tok; t++) kern_quantize_act(at->type, act + t * k, A + t * as, k);
            const size_t pn = kern_packed_size(types[ti], rows, k);
            void *P = pn && all ? aligned_alloc(64, pn) : NULL;
            if (P) kern_pack(types[ti], W, ws, rows, k, 0, rows, P);
            for (int which = 0; which < (all ? 4 : 1); which++) {
                if ((which == K_PACKED && !P) || (kern_only >= 0 && which != kern_only)) continue;
                if ((which == K_PANEL || which == K_DECODE) && !avx512) continue; /* AVX-512 only */
                /* below 64 MB the times are scaled to 256 MB of the same rows (a per-byte rate) */
                const double bytes = (double)ws * (double)rows, scale = mb < 64 ? (256.0 * 1048576.0) / bytes : 1.0;
                printf("%-5s k=%-5lld %-6s %5.1f MB%s |", tr->name, (long long)k, kname[which],
                       bytes / 1048576.0, scale != 1.0 ? " (ms per 256 MB)" : "");
                double one = 0;
                for (int i = 0; i < n_nt; i++) {
                    double ms = time_one(which, types[ti], W, ws, P, A, as, ntoks[i], k,
                                         rows, Y, reps, times);
                    if (ms >= 0) ms *= scale;
                    if (ms < 0) {
                        printf("  (none)");
                        break;
                    }
                    if (i == 0) one = ms;
                    printf(" %d:%.1f(%.2fx)", ntoks[i], ms, ms / one);
                    fflush(stdout);
                }
                printf("\n");
            }
            free(P);
            free(W);
            free(A);
            free(Y);
        }
        free(act);
        free(xf);
    }
    free(times);
    return 0;
}
