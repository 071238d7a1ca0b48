/* bench_batch.c — CPU time of one batched decode step (tern_decode_batch with one token from
 * each of n sequences, n = 1, 2, 4, 8): what continuous batching can gain on this CPU, measured
 * with the process CPU clock so a busy machine does not distort it. Not part of ctest.
 * usage: build/bin/bench_batch MODEL [THREADS=1] [STEPS=20] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tern.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_batch MODEL [THREADS=1] [STEPS=20]\n");
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 1, steps = argc > 3 ? atoi(argv[3]) : 20;
    struct tern_model *m;
    if (tern_model_load(argv[1], NULL, &m)) {
        fprintf(stderr, "bench_batch: %s\n", tern_last_error());
        return 1;
    }
    for (int n = 1; n <= 8; n *= 2) {
        struct tern_context_params cp = tern_context_default_params();
        cp.n_ctx = 256;
        cp.n_threads = threads;
        cp.n_seq = n;
        struct tern_context *ctx;
        if (tern_context_create(m, &cp, &ctx)) {
            fprintf(stderr, "bench_batch: %s\n", tern_last_error());
            return 1;
        }
        int32_t tok[8], seq[8];
        bool logits[8];
        for (int i = 0; i < n; i++) {
            tok[i] = 100 + i;
            seq[i] = i;
            logits[i] = true;
        }
        const struct tern_batch b = {.n = n, .tokens = tok, .seq = seq, .logits = logits};
        for (int w = 0; w < 3; w++) tern_decode_batch(ctx, &b);
        const double c0 = cpu_s();
        for (int s = 0; s < steps; s++) tern_decode_batch(ctx, &b);
        const double c = (cpu_s() - c0) / steps;
        printf("n=%d: %.1f ms CPU per step, %.1f tokens per CPU-second\n", n, c * 1e3, n / c);
        tern_context_free(ctx);
    }
    tern_model_free(m);
    return 0;
}
