/* bench_kernels.c — single-thread speed of kern_matmul per weight format, on the path the
 * dispatcher picks (TERN_KERNELS=scalar|avx2|avx512 to force one; TERN_AVXVNNI=0 takes the avx2
 * path's vpmaddubsw panel tile on a CPU with AVX-VNNI).
 *
 * What is timed, and what is not:
 * - decode: n_tok = 1 over a weight matrix of ~256 MB (k = 4864 columns, rows to fill it), far
 *   beyond the L3, so every weight byte comes from DRAM once per pass. Reported as GB/s of
 *   weight bytes (the number to hold against the ~33 GB/s single-thread read ceiling of
 *   ../shared/anchors/machine.md). Activation quantization is not included.
 * - prefill: n_tok = 512 tokens against one 896 x 4864 matrix (ffn_down-shaped), reported as
 *   GFLOP/s counting 2*rows*k*n_tok. Activations are quantized beforehand, not timed.
 * - activation quantization: kern_quantize_act of 512 rows of 4864, in GB/s of F32 input.
 * - packed (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K on avx512 and avx2): the same two over a copy
 *   repacked beforehand (kern_packed.h: what a model loaded with repacking runs; packing not
 *   timed).
 * Timed with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID): a machine shared with other work
 * inflates wall time by up to 2x and CPU time much less (it still shares caches and DRAM).
 * Buffers are filled and touched before timing (first touch of fresh memory is slow on this
 * VM). Each figure is the median of the repetitions, with min and max.
 *
 * Usage: bench_kernels [-t TYPE] [reps]   (default 7; -t: only that weight type, e.g. q8_0) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kern_packed.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"
#include "bench_util.h"

struct stats { double med, min, max; };
static struct stats summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return (struct stats){v[n / 2], v[0], v[n - 1]};
}

int main(int argc, char **argv)
{
    int argi = 1, only = -1;
    if (argi + 1 < argc && !strcmp(argv[argi], "-t")) {
        if (tern_type_from_name(argv[argi + 1], &only) != TERN_OK) {
            fprintf(stderr, "bench_kernels: unknown type '%s'\n", argv[argi + 1]);
            return 2;
        }
        argi += 2;
    }
    const int reps = argi < argc ? atoi(argv[argi]) : 7;
    if (reps < 1) {
        fprintf(stderr, "usage: bench_kernels [-t TYPE] [reps >= 1]\n");
        return 2;
    }
    kern_init();
    printf("kernel path: %s, 1 thread, thread CPU time, %d repetitions (median [min .. max])\n",
           kern_path_name(), reps);
    const int types[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16, TERN_TYPE_Q8_0,
                         TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                         TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
    const int64_t k = 4864, base_rows = 896, n_tok = 512;
    float *xf = malloc((size_t)(base_rows * k) * sizeof *xf);
    for (int64_t i = 0; i < base_rows * k; i++) xf[i] = rnd() * 0.05f;
    float *act = malloc((size_t)(n_tok * k) * sizeof *act);
    for (int64_t i = 0; i < n_tok * k; i++) act[i] = rnd();
    double *times = malloc((size_t)reps * sizeof *times);

    printf("%-5s | %-28s | %-30s\n", "type", "decode n_tok=1, GB/s weights",
           "prefill n_tok=512 896x4864, GFLOP/s");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        if (only >= 0 && types[ti] != only) continue;
        const struct quant_traits *tr = quant_traits_get(types[ti]);
        const struct quant_traits *at = quant_traits_get(tr->vec_dot_type);
        const size_t row_bytes = quant_row_bytes(types[ti], k);
        const size_t a_row = quant_row_bytes(at->type, k);
        const size_t base_bytes = row_bytes * (size_t)base_rows;
        const int copies = (int)((256u << 20) / base_bytes) + 1;
        const int64_t rows = base_rows * copies;
        uint8_t *W = malloc(base_bytes * (size_t)copies);
        uint8_t *A = malloc(a_row * (size_t)n_tok);
        float *Y = malloc((size_t)(rows > n_tok * base_rows ? rows : n_tok * base_rows) * sizeof *Y);
        if (!W || !A || !Y) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int64_t r = 0; r < base_rows; r++) tr->from_float_ref(xf + r * k, W + r * row_bytes, k);
        for (int c = 1; c < copies; c++) memcpy(W + (size_t)c * base_bytes, W, base_bytes);
        for (int64_t t = 0; t < n_tok; t++) kern_quantize_act(at->type, act + t * k, A + t * a_row, k);

        /* the matmul over W (P == NULL) or over its packed copy P */
        const size_t pn = kern_packed_size(types[ti], rows, k);
        void *P = pn ? aligned_alloc(64, pn) : NULL;
        if (P) kern_pack(types[ti], W, row_bytes, rows, k, 0, rows, P);
        for (int pk = 0; pk < (P ? 2 : 1); pk++) {
            const void *Pk = pk ? P : NULL;
            /* decode: one pass over all rows, warm-up pass first */
            kern_matmul_packed(types[ti], W, row_bytes, Pk, A, a_row, 1, k, 0, rows, Y, rows);
            for (int i = 0; i < reps; i++) {
                const double t0 = thread_cpu_s();
                kern_matmul_packed(types[ti], W, row_bytes, Pk, A, a_row, 1, k, 0, rows, Y, rows);
                times[i] = (double)(row_bytes * (size_t)rows) / (thread_cpu_s() - t0) * 1e-9;
            }
            const struct stats dec = summarize(times, reps);

            /* prefill: 512 tokens against the first 896 rows */
            kern_matmul_packed(types[ti], W, row_bytes, Pk, A, a_row, (int)n_tok, k, 0, base_rows,
                               Y, base_rows);
            for (int i = 0; i < reps; i++) {
                const double t0 = thread_cpu_s();
                kern_matmul_packed(types[ti], W, row_bytes, Pk, A, a_row, (int)n_tok, k, 0,
                                   base_rows, Y, base_rows);
                times[i] = 2.0 * (double)base_rows * (double)k * (double)n_tok /
                           (thread_cpu_s() - t0) * 1e-9;
            }
            const struct stats pre = summarize(times, reps);
            printf("%-5s%s | %6.2f [%6.2f .. %6.2f] %4d MB | %7.2f [%7.2f .. %7.2f]\n", tr->name,
                   pk ? " packed" : "", dec.med, dec.min, dec.max,
                   (int)(row_bytes * (size_t)rows >> 20), pre.med, pre.min, pre.max);
        }
        free(P);
        fflush(stdout);
        free(W);
        free(A);
        free(Y);
    }

    const int act_types[] = {TERN_TYPE_Q8_0, TERN_TYPE_Q8_K, TERN_TYPE_F16};
    uint8_t *out = malloc((size_t)(n_tok * k) * 4);
    for (size_t ai = 0; ai < sizeof act_types / sizeof act_types[0]; ai++) {
        const size_t a_row = quant_row_bytes(act_types[ai], k);
        for (int i = 0; i < reps; i++) {
            const double t0 = thread_cpu_s();
            for (int64_t t = 0; t < n_tok; t++)
                kern_quantize_act(act_types[ai], act + t * k, out + t * a_row, k);
            times[i] = (double)(n_tok * k * 4) / (thread_cpu_s() - t0) * 1e-9;
        }
        const struct stats q = summarize(times, reps);
        printf("quantize_act %-5s: %6.2f [%6.2f .. %6.2f] GB/s of F32 input\n",
               tern_type_name(act_types[ai]), q.med, q.min, q.max);
    }
    free(out);
    free(times);
    free(xf);
    free(act);
    return 0;
}
