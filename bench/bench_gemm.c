/* bench_gemm.c — the trainer's matrix products (src/kernels/gemm_f32.h) at their real shapes,
 * in GFLOP/s against the machine's peaks, per path, on 1 and 2 threads.
 *
 * Shapes are those of `tern train` on the tool model (tern-tool-r2.json: n_embd 384, 6 heads of
 * 64, 2 KV heads, n_ff 1024, vocab 4096) with M = 6144 tokens per micro-batch: for every weight
 * W (out, in) the three products of a linear layer (train_model.c linear_fwd / linear_bwd):
 *   fwd  Y = X . W^T    (M x out x in; B = W read transposed)
 *   dx   dX = dY . W    (M x in x out)
 *   dw   dW += dY^T . X (out x in x M; A = dY read transposed, accumulating)
 * and the five products of one 64-query attention block against nk keys (train_ops.c; one head
 * of one sequence, which always runs on one thread): scores Q.K^T (also dO.V^T), P.V (also
 * dS.K), and dK += dS^T.Q (also dV). The "per micro-batch" line weights the linear products by
 * how often one micro-batch runs them (per layer: q, k, v, o, gate, up, down; output once).
 *
 * What is timed: whole kern_gemm_f32[_mt] calls on operands that were touched before (so warm in
 * L3 when they fit, as in the trainer, where the previous op just wrote them). 1 thread: this
 * thread's CPU clock (a loaded machine does not inflate it). 2 threads (tern's pool, the caller
 * plus one worker): the process's CPU clock, i.e. the CPU seconds both threads spent including
 * waiting at the end of a call, so "GFLOP/s per core" = flops / CPU seconds compares with the
 * one-core peak; the wall-clock rate is printed too and is only meaningful on an idle machine.
 * Each figure is the median of the repetitions (each >= -s seconds of calls), with the best.
 * Peaks: ../shared/anchors/machine.md (roofline, Zen 5: F32 FMA 244, BF16 vdpbf16ps 452 GFLOP/s
 * per core); override with --peak-f32 / --peak-bf16 on another machine.
 *
 * Usage: bench_gemm [-p PATH[,PATH]] [-t THREADS[,THREADS]] [-r REPS] [-s SECONDS] [-k NK]
 *                   [-m M] [-o SHAPE] [--peak-f32 G] [--peak-bf16 G] (PATH: scalar avx2 avx512
 *                   bf16 bf16-scalar; default the best F32 path and bf16 when this CPU has it;
 *                   SHAPE: a substring of the name) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_f32.h"
#include "kernels/kernels.h"
#include "util/threadpool.h"
#include "bench_util.h"

struct shape {
    char name[32];
    int M, N, K;
    ptrdiff_t ars, acs, brs, bcs, ldc;
    bool acc;
    double per_mb;  /* times one micro-batch runs it (0: not counted in the total) */
};

static int n_shapes;
static struct shape shapes[40];

static void add(const char *name, int M, int N, int K, ptrdiff_t ars, ptrdiff_t acs, ptrdiff_t brs,
                ptrdiff_t bcs, ptrdiff_t ldc, bool acc, double per_mb)
{
    struct shape *s = &shapes[n_shapes++];
    *s = (struct shape){.M = M, .N = N, .K = K, .ars = ars, .acs = acs, .brs = brs, .bcs = bcs,
                        .ldc = ldc, .acc = acc, .per_mb = per_mb};
    snprintf(s->name, sizeof s->name, "%s", name);
}

/* the three products of W (out, in) over M tokens, run n times per micro-batch */
static void add_linear(const char *w, int out, int in, int M, double n)
{
    char name[32];
    snprintf(name, sizeof name, "%s fwd", w);
    add(name, M, out, in, in, 1, 1, in, out, false, n);
    snprintf(name, sizeof name, "%s dx", w);
    add(name, M, in, out, out, 1, in, 1, in, false, n);
    snprintf(name, sizeof name, "%s dw", w);
    add(name, out, in, M, 1, out, in, 1, in, true, n);
}

static void make_shapes(int M, int nk)
{
    const int D = 384, Dq = 384, Dkv = 128, F = 1024, V = 4096, L = 8, hd = 64;
    add_linear("q,o 384x384", Dq, D, M, 2.0 * L);
    add_linear("k,v 128x384", Dkv, D, M, 2.0 * L);
    add_linear("gate,up 1024x384", F, D, M, 2.0 * L);
    add_linear("down 384x1024", D, F, M, 1.0 * L);
    add_linear("output 4096x384", V, D, M, 1.0);
    char name[32];
    /* attention: 64 queries (rows of q, stride Dq) against nk keys (rows of k/v, stride Dkv) */
    snprintf(name, sizeof name, "attn Q.K^T nk%d", nk);
    add(name, 64, nk, hd, Dq, 1, 1, Dkv, nk, false, 0);
    snprintf(name, sizeof name, "attn P.V nk%d", nk);
    add(name, 64, hd, nk, nk, 1, Dkv, 1, Dq, false, 0);
    snprintf(name, sizeof name, "attn dS^T.Q nk%d", nk);
    add(name, nk, hd, 64, 1, nk, Dq, 1, Dq, true, 0);
}

struct pathname {
    const char *name;
    enum kern_gemm_path p;
};
static const struct pathname path_names[] = {
    {"scalar", KERN_GEMM_SCALAR}, {"avx2", KERN_GEMM_AVX2}, {"avx512", KERN_GEMM_AVX512},
    {"bf16", KERN_GEMM_BF16_AVX512}, {"bf16-scalar", KERN_GEMM_BF16_SCALAR},
};

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

struct meas {
    double gflops_cpu;   /* flops / CPU seconds (median) */
    double best_cpu;
    double gflops_wall;  /* flops / wall seconds (median) */
};

static void run(const struct shape *s, const struct kern_gemm *g0, enum kern_gemm_path path,
                float *ws, struct tp *tp, int nth, int reps, double secs, struct meas *out)
{
    const double flops = 2.0 * s->M * s->N * (double)s->K;
    struct kern_gemm g = *g0;
    /* warm-up call, and how many calls make one repetition */
    double t0 = nth == 1 ? thread_cpu_s() : process_cpu_s();
    if (nth == 1) kern_gemm_f32(&g, path, ws);
    else kern_gemm_f32_mt(&g, path, ws, tp);
    double one = (nth == 1 ? thread_cpu_s() : process_cpu_s()) - t0;
    int calls = one > 0 ? (int)(secs / one) + 1 : 1;
    if (calls < 1) calls = 1;
    double cpu[64], wall[64];
    for (int r = 0; r < reps; r++) {
        const double c0 = nth == 1 ? thread_cpu_s() : process_cpu_s(), w0 = now_s();
        for (int i = 0; i < calls; i++) {
            if (nth == 1) kern_gemm_f32(&g, path, ws);
            else kern_gemm_f32_mt(&g, path, ws, tp);
        }
        const double c1 = nth == 1 ? thread_cpu_s() : process_cpu_s(), w1 = now_s();
        cpu[r] = flops * calls / (c1 - c0) / 1e9;
        wall[r] = flops * calls / (w1 - w0) / 1e9;
    }
    qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
    qsort(wall, (size_t)reps, sizeof *wall, cmp_d);
    out->gflops_cpu = cpu[reps / 2];
    out->best_cpu = cpu[reps - 1];
    out->gflops_wall = wall[reps / 2];
}

int main(int argc, char **argv)
{
    int reps = 5, M = 6144, nk = 768;
    double secs = 0.2, peak_f32 = 244.0, peak_bf16 = 452.0;
    int threads[4] = {1, 2}, n_threads = 2;
    enum kern_gemm_path paths[8];
    int n_paths = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-s")) secs = atof(v);
        else if (!strcmp(a, "-k")) nk = atoi(v);
        else if (!strcmp(a, "-m")) M = atoi(v);
        else if (!strcmp(a, "-o")) only = v;
        else if (!strcmp(a, "-t")) n_threads = parse_list(v, threads, 4);
        else if (!strcmp(a, "--peak-f32")) peak_f32 = atof(v);
        else if (!strcmp(a, "--peak-bf16")) peak_bf16 = atof(v);
        else if (!strcmp(a, "-p")) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok && n_paths < 8; tok = strtok(NULL, ",")) {
                size_t j = 0;
                while (j < sizeof path_names / sizeof path_names[0] && strcmp(tok, path_names[j].name)) j++;
                if (j == sizeof path_names / sizeof path_names[0]) {
                    fprintf(stderr, "bench_gemm: unknown path '%s'\n", tok);
                    return 2;
                }
                if (!kern_gemm_path_ok(path_names[j].p)) {
                    fprintf(stderr, "bench_gemm: this CPU cannot run path '%s'\n", tok);
                    return 2;
                }
                paths[n_paths++] = path_names[j].p;
            }
        } else goto usage;
        i++;
    }
    if (reps < 1 || reps > 64 || M < 1 || nk < 1 || secs <= 0 || n_threads < 1) goto usage;
    kern_init();
    if (n_paths == 0) {
        paths[n_paths++] = kern_gemm_best();
        if (kern_gemm_path_ok(KERN_GEMM_BF16_AVX512)) paths[n_paths++] = KERN_GEMM_BF16_AVX512;
    }
    make_shapes(M, nk);

    int max_th = 1;
    for (int i = 0; i < n_threads; i++) {
        if (threads[i] < 1 || threads[i] > 64) goto usage;
        if (threads[i] > max_th) max_th = threads[i];
    }
    size_t max_a = 0, max_b = 0, max_c = 0;
    for (int i = 0; i < n_shapes; i++) {
        const struct shape *s = &shapes[i];
        const size_t a = (size_t)s->M * s->K, b = (size_t)s->K * s->N;
        const size_t c = (size_t)s->M * (size_t)(s->ldc > s->N ? s->ldc : s->N);
        if (a > max_a) max_a = a;
        if (b > max_b) max_b = b;
        if (c > max_c) max_c = c;
    }
    /* attention operands are views with strides wider than their shape: size them generously */
    max_a += (size_t)M * 384, max_b += (size_t)M * 384;
    float *A = malloc(max_a * sizeof *A), *B = malloc(max_b * sizeof *B), *C = calloc(max_c, sizeof *C);
    float *ws = NULL;
    if (!A || !B || !C || posix_memalign((void **)&ws, 64, kern_gemm_ws_floats() * max_th * sizeof *ws)) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < max_a; i++) A[i] = rnd();
    for (size_t i = 0; i < max_b; i++) B[i] = rnd();

    printf("bench_gemm: M = %d tokens, attention nk = %d, median of %d reps (>= %.2f s each) [best]\n",
           M, nk, reps, secs);
    printf("1 thread: thread CPU time; %s: process CPU time (GFLOP/s per core) and wall (loaded machine)\n",
           n_threads > 1 ? "more threads" : "-");
    printf("peaks per core: F32 %.0f, BF16 %.0f GFLOP/s\n\n", peak_f32, peak_bf16);
    printf("%-24s %5s %5s %5s  %-11s", "shape", "M", "N", "K", "path");
    for (int t = 0; t < n_threads; t++)
        printf(" | %dT GFLOP/s/core %%peak%s", threads[t], threads[t] > 1 ? "   wall" : "");
    printf("\n");

    for (int p = 0; p < n_paths; p++) {
        const enum kern_gemm_path path = paths[p];
        const double peak = kern_gemm_path_bf16(path) ? peak_bf16 : peak_f32;
        double mb_flops = 0, mb_cpu_s[4] = {0};
        for (int i = 0; i < n_shapes; i++) {
            const struct shape *s = &shapes[i];
            if (only && !strstr(s->name, only)) continue;
            const bool attn = !strncmp(s->name, "attn", 4);
            struct kern_gemm g = {s->M, s->N, s->K, A, s->ars, s->acs, B, s->brs, s->bcs, C, s->ldc,
                                  s->acc};
            printf("%-24s %5d %5d %5d  %-11s", s->name, s->M, s->N, s->K, kern_gemm_path_name(path));
            fflush(stdout);
            const double flops = 2.0 * s->M * s->N * (double)s->K;
            for (int t = 0; t < n_threads; t++) {
                if (attn && threads[t] > 1) { /* one (sequence, head) unit runs on one thread */
                    printf(" | %21s", "-");
                    continue;
                }
                struct tp *tp = NULL;
                if (threads[t] > 1 && tp_create(threads[t], &tp) != TERN_OK) {
                    fprintf(stderr, "bench_gemm: no thread pool\n");
                    return 1;
                }
                struct meas m;
                run(s, &g, path, ws, tp, threads[t], reps, secs, &m);
                if (tp) tp_free(tp);
                printf(" | %6.1f [%6.1f] %5.1f%%", m.gflops_cpu, m.best_cpu, 100.0 * m.gflops_cpu / peak);
                if (threads[t] > 1) printf(" %6.1f", m.gflops_wall);
                mb_cpu_s[t] += s->per_mb * flops / (m.gflops_cpu * 1e9);
                fflush(stdout);
            }
            mb_flops += s->per_mb * flops;
            printf("\n");
        }
        if (mb_flops > 0) {
            printf("%-46s", "per micro-batch (linear products)");
            for (int t = 0; t < n_threads; t++)
                printf(" | %6.1f CPU s %5.1f%%%s", mb_cpu_s[t], 100.0 * mb_flops / mb_cpu_s[t] / 1e9 / peak,
                       threads[t] > 1 ? "       " : "");
            printf("\n  (%.1f GFLOP: CPU seconds of GEMM one micro-batch of %d tokens needs, and the efficiency)\n\n",
                   mb_flops / 1e9, M);
        }
    }
    free(A), free(B), free(C), free(ws);
    return 0;
usage:
    fprintf(stderr, "usage: bench_gemm [-p PATH[,PATH]] [-t N[,N]] [-r REPS<=64] [-s SECONDS] [-k NK] [-m M] [-o SHAPE]\n"
                    "                  [--peak-f32 GFLOPS] [--peak-bf16 GFLOPS]   (per core; default Zen 5's 244 and 452:\n"
                    "                  measure this machine's with ../shared/tools/roofline, e.g. Zen 4: 112 and 227)\n");
    return 2;
}
