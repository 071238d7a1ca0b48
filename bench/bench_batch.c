/* bench_batch.c — CPU time of one batched decode step (tern_decode_batch with one token from
 * each of n sequences, n = 1, 2, 4, 8, 16): what continuous batching can gain on this CPU,
 * measured with the process CPU clock so a busy machine does not distort it. Not part of ctest.
 *
 * Per n it prints the CPU ms per step with logits for every row (what the server's step does),
 * the same without logits (so the difference is the output projection over the vocabulary and
 * its norm), and, with -p, where the step's time goes per op class (tern_context_profile: wall
 * time on the calling thread, shown as shares and scaled to the step's CPU time, so under load
 * the split is approximate while the CPU totals are not).
 * Each sequence first holds PREFIX positions (a prompt, decoded once, not timed), so attention
 * reads a realistic amount of KV.
 *
 * usage: build/bin/bench_batch [-p] MODEL [THREADS=1] [STEPS=20] [PREFIX=0] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern.h"
#include "bench_util.h"

#define MAX_N 16

/* CPU seconds per step of `steps` decode steps of batch b; 3 untimed steps first. */
static double time_steps(struct tern_context *ctx, const struct tern_batch *b, int steps)
{
    for (int w = 0; w < 3; w++)
        if (tern_decode_batch(ctx, b)) return -1;
    const double c0 = process_cpu_s();
    for (int s = 0; s < steps; s++)
        if (tern_decode_batch(ctx, b)) return -1;
    return (process_cpu_s() - c0) / steps;
}

int main(int argc, char **argv)
{
    int argi = 1, profile = 0;
    if (argi < argc && !strcmp(argv[argi], "-p")) profile = 1, argi++;
    if (argi >= argc) {
        fprintf(stderr, "usage: bench_batch [-p] MODEL [THREADS=1] [STEPS=20] [PREFIX=0]\n");
        return 2;
    }
    const char *path = argv[argi];
    const int threads = argi + 1 < argc ? atoi(argv[argi + 1]) : 1;
    const int steps = argi + 2 < argc ? atoi(argv[argi + 2]) : 20;
    const int prefix = argi + 3 < argc ? atoi(argv[argi + 3]) : 0;
    if (threads < 1 || steps < 1 || prefix < 0) {
        fprintf(stderr, "bench_batch: THREADS and STEPS must be >= 1, PREFIX >= 0\n");
        return 2;
    }
    struct tern_model *m;
    if (tern_model_load(path, NULL, &m)) {
        fprintf(stderr, "bench_batch: %s\n", tern_last_error());
        return 1;
    }
    printf("%s, %d thread(s), %d steps, %d prefix positions per sequence; CPU ms per step\n",
           path, threads, steps, prefix);
    double one = 0;
    for (int n = 1; n <= MAX_N; n *= 2) {
        struct tern_context_params cp = tern_context_default_params();
        cp.n_ctx = prefix + 2 * (3 + steps) + 8;
        cp.n_threads = threads;
        cp.n_seq = n;
        cp.n_batch = prefix > MAX_N ? prefix : MAX_N;
        struct tern_context *ctx;
        if (tern_context_create(m, &cp, &ctx)) {
            fprintf(stderr, "bench_batch: %s\n", tern_last_error());
            return 1;
        }
        int32_t tok[MAX_N], seq[MAX_N];
        bool logits[MAX_N], none[MAX_N];
        for (int i = 0; i < n; i++) {
            tok[i] = 100 + i;
            seq[i] = i;
            logits[i] = true;
            none[i] = false;
        }
        if (prefix > 0) { /* the prompts: prefix tokens per sequence, one batch each */
            int32_t *pt = malloc(sizeof *pt * (size_t)prefix), *ps = malloc(sizeof *ps * (size_t)prefix);
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < prefix; j++) pt[j] = 200 + (i * 7 + j) % 1000, ps[j] = i;
                const struct tern_batch pb = {.n = prefix, .tokens = pt, .seq = ps};
                if (tern_decode_batch(ctx, &pb)) {
                    fprintf(stderr, "bench_batch: %s\n", tern_last_error());
                    return 1;
                }
            }
            free(pt);
            free(ps);
        }
        const struct tern_batch b = {.n = n, .tokens = tok, .seq = seq, .logits = logits};
        const struct tern_batch bn = {.n = n, .tokens = tok, .seq = seq, .logits = none};
        if (profile) {
            tern_context_profile_reset(ctx);
            tern_context_set_profile(ctx, true);
        }
        const double c = time_steps(ctx, &b, steps);
        struct tern_profile_entry pe[TERN_PROF_COUNT];
        if (profile) {
            tern_context_profile(ctx, pe);
            tern_context_set_profile(ctx, false);
        }
        const double cn = time_steps(ctx, &bn, steps);
        if (c < 0 || cn < 0) {
            fprintf(stderr, "bench_batch: %s\n", tern_last_error());
            return 1;
        }
        if (n == 1) one = c;
        printf("n=%2d: %6.1f ms (%.2fx n=1), %6.1f tokens per CPU-second; without logits %6.1f ms "
               "(output projection %.1f ms)\n",
               n, c * 1e3, c / one, n / c, cn * 1e3, (c - cn) * 1e3);
        if (profile) {
            uint64_t tot = 0;
            for (int i = 0; i < TERN_PROF_COUNT; i++) tot += pe[i].ns;
            for (int i = 0; i < TERN_PROF_COUNT; i++)
                if (pe[i].calls && pe[i].ns * 200 >= tot)
                    printf("        %-18s %5.1f %%  ~%6.1f ms\n", pe[i].name, 100.0 * pe[i].ns / tot,
                           c * 1e3 * pe[i].ns / tot);
        }
        fflush(stdout);
        tern_context_free(ctx);
    }
    tern_model_free(m);
    return 0;
}
