/* bench_ttft.c — time to first token of a chat request through the library called directly,
 * the baseline of the server's "adds <= 1 ms to TTFT" target (bench/serve_overhead.mjs sends
 * the same requests to `tern serve` and runs this beside it, alternating).
 *
 * What is timed, per request: rendering the conversation with the model's chat template,
 * tokenizing it, and tern_generate up to the first sampled token (max_tokens 1, greedy), on one
 * generator that keeps its KV cache between requests, as a server slot does. Request i is
 * [{"role": "user", "content": "Request i: what is the weather in Paris today? ..."}], so
 * consecutive prompts share only the template's opening (the same tokens a slot can reuse).
 * Not timed: model load, one warm-up request. Printed: one line of JSON with the median, p10
 * and p90 of the wall time (ms) over N requests, and the median of tern_generate's own ttft_ms.
 *
 * Usage: bench_ttft MODEL [N=30] [THREADS=2] [FIRST=0]   (FIRST: the first request number) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern.h"
#include "bench_util.h"

#define DIE(...) do { fprintf(stderr, "bench_ttft: " __VA_ARGS__); fprintf(stderr, ": %s\n", tern_last_error()); exit(1); } while (0)

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[(int)(p * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: bench_ttft MODEL [N=30] [THREADS=2] [FIRST=0]\n"); return 2; }
    const int n = argc > 2 ? atoi(argv[2]) : 30, threads = argc > 3 ? atoi(argv[3]) : 2;
    const int first = argc > 4 ? atoi(argv[4]) : 0;
    if (n < 1 || threads < 1) { fprintf(stderr, "bench_ttft: N and THREADS must be >= 1\n"); return 2; }
    struct tern_model *m;
    struct tern_tokenizer *tok;
    struct tern_chat_template *t;
    struct tern_context *ctx;
    struct tern_generator *g;
    struct tern_sampler *s;
    if (tern_model_load(argv[1], NULL, &m)) DIE("%s", argv[1]);
    if (tern_tokenizer_from_gguf(tern_model_gguf(m), &tok)) DIE("tokenizer");
    if (tern_chat_template_from_gguf(tern_model_gguf(m), &t)) DIE("chat template");
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 2048;
    cp.n_threads = threads;
    if (tern_context_create(m, &cp, &ctx)) DIE("context");
    if (tern_generator_create(ctx, tok, &g)) DIE("generator");
    struct tern_sampler_params sp = tern_sampler_default_params();
    if (tern_sampler_create(&sp, tern_model_n_vocab(m), &s)) DIE("sampler");
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 1;
    gp.ignore_eog = true;
    double *wall = malloc(sizeof(double) * (size_t)n), *lib = malloc(sizeof(double) * (size_t)n);
    int32_t *ids = malloc(sizeof(int32_t) * 2048);
    if (!wall || !lib || !ids) { fprintf(stderr, "bench_ttft: out of memory\n"); return 1; }
    int n_prompt = 0, n_reused = 0;
    for (int i = -1; i < n; i++) { /* i = -1: warm-up */
        char msg[256];
        snprintf(msg, sizeof msg, "[{\"role\": \"user\", \"content\": \"Request %d: what is the weather in "
                 "Paris today? Answer in one short sentence.\"}]", first + i + 1);
        const double t0 = (now_s() * 1e3);
        struct tern_chat_params p = tern_chat_default_params();
        p.messages_json = msg;
        char *prompt;
        size_t len;
        if (tern_chat_render(t, &p, &prompt, &len)) DIE("render");
        size_t k = 0;
        if (tern_tokenize(tok, prompt, len, tern_chat_prompt_flags(tok, prompt, len), ids, 2048, &k)) DIE("tokenize");
        free(prompt);
        struct tern_gen_stats st;
        if (tern_generate(g, s, ids, (int)k, &gp, NULL, NULL, &st)) DIE("generate");
        const double t1 = (now_s() * 1e3);
        if (i < 0) continue;
        wall[i] = t1 - t0;
        lib[i] = st.ttft_ms;
        n_prompt = (int)k;
        n_reused = st.n_reused;
    }
    const double p50 = pct(wall, n, 0.5), p10 = pct(wall, n, 0.1), p90 = pct(wall, n, 0.9);
    printf("{\"requests\": %d, \"prompt_tokens\": %d, \"reused_tokens\": %d, \"threads\": %d, \"ttft_ms_p50\": %.3f, \"ttft_ms_p10\": %.3f, "
           "\"ttft_ms_p90\": %.3f, \"generate_ttft_ms_p50\": %.3f}\n", n, n_prompt, n_reused, threads, p50, p10, p90,
           pct(lib, n, 0.5));
    free(wall);
    free(lib);
    free(ids);
    tern_sampler_free(s);
    tern_generator_free(g);
    tern_context_free(ctx);
    tern_chat_template_free(t);
    tern_tokenizer_free(tok);
    tern_model_free(m);
    return 0;
}
