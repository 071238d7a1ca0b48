/* cmd_run.c — `tern run`: generate tokens from a prompt given as token ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static void help(void)
{
    printf("usage: tern run -m MODEL (-p TEXT | -f FILE | --tokens 1,2,3) [-n N] [options]\n"
           "\n"
           "Generates up to N tokens after the prompt. With -p/-f the prompt is tokenized with the\n"
           "model's tokenizer (bos added as its metadata says) and the answer is streamed as text,\n"
           "stopping at an end-of-generation token; with --tokens the generated ids are printed\n"
           "(comma-separated).\n"
           "\n"
           "  -m, --model FILE       GGUF model\n"
           "  -p, --prompt TEXT      prompt text\n"
           "  -f, --file FILE        prompt text from a file (byte for byte)\n"
           "  --parse-special        recognize control tokens (<|im_start|> ...) in the prompt text\n"
           "  --tokens LIST          prompt as comma-separated token ids\n"
           "  -n, --n-predict N      tokens to generate (default 32)\n"
           "  -c, --ctx-size N       context size (default: prompt + N)\n"
           "  -t, --threads N        threads (default: all CPUs)\n"
           "  --temp T               temperature (default 0 = greedy)\n"
           "  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --repeat-last-n N\n"
           "  -s, --seed S           RNG seed (default 0)\n"
           "  --ignore-eos           do not stop at the end-of-sequence token\n"
           "  --prompt-cache DIR     reuse the KV of cached prompt prefixes (saved in DIR)\n"
           "  --cache-mb N           prompt cache memory budget in MiB (default 256)\n"
           "  --json                 print {\"tokens\": [...], \"prompt_ms\": .., \"gen_ms\": ..}\n");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cmd_run(int argc, char **argv)
{
    const char *model = NULL, *tokens_s = NULL, *v;
    struct cli_gen_opts g = cli_gen_opts_default(32);
    bool json = false, ignore_eos = false, parse_special = false;
    const char *prompt_text = NULL, *prompt_file = NULL;
    for (int i = 1; i < argc; i++) {
        int r = 0;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
        if (!strcmp(argv[i], "--ignore-eos")) { ignore_eos = true; continue; }
        if (!strcmp(argv[i], "--parse-special")) { parse_special = true; continue; }
#define OPT(name, alt) ((r = cli_opt(argc, argv, &i, name, alt, &v)) != 0)
        if (OPT("-m", "--model")) { if (r < 0) return 2; model = v; }
        else if (OPT("--tokens", NULL)) { if (r < 0) return 2; tokens_s = v; }
        else if (OPT("-p", "--prompt")) { if (r < 0) return 2; prompt_text = v; }
        else if (OPT("-f", "--file")) { if (r < 0) return 2; prompt_file = v; }
        else if ((r = cli_gen_opt(argc, argv, &i, &g)) != 0) { if (r < 0) return CLI_EXIT_USAGE; }
        else return cli_usage_error("run", "unknown option '%s'", argv[i]);
#undef OPT
    }
    if (!model) return cli_usage_error("run", "missing -m MODEL");
    long long n_predict = g.n_predict, n_ctx = g.n_ctx;
    if (!!tokens_s + !!prompt_text + !!prompt_file != 1)
        return cli_usage_error("run", "give exactly one prompt: -p TEXT, -f FILE or --tokens LIST");
    int32_t *prompt = NULL;
    int n_prompt = 0, bad;
    char *file_text = NULL;
    size_t text_len = 0;
    if (tokens_s && !cli_parse_token_list(tokens_s, &prompt, &n_prompt, &bad))
        return cli_usage_error("run", "--tokens: entry %d is not a token id", bad);
    if (prompt_file) {
        file_text = cli_read_file(prompt_file, &text_len);
        if (!file_text) {
            fprintf(stderr, "tern run: cannot read prompt file '%s'\n", prompt_file);
            return CLI_EXIT_FAIL;
        }
        prompt_text = file_text;
    } else if (prompt_text) {
        text_len = strlen(prompt_text);
    }
    struct tern_tokenizer *tkz = NULL;
    struct tern_detokenizer *detok = NULL;

    struct tern_model *m = NULL;
    struct tern_context *ctx = NULL;
    struct tern_sampler *smp = NULL;
    struct tern_prefix_cache *pc = NULL;
    int n_reused = 0;
    int32_t *out = NULL;
    int rc = CLI_EXIT_OK;
    tern_status st = tern_model_load(model, &(struct tern_model_params){.prefault = true}, &m);
    if (st) { rc = cli_report("run", st); goto done; }
    if (prompt_text) {
        /* text in: tokenize (growing the buffer once if the first guess is too small) */
        if ((st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tkz)) ||
            (st = tern_detokenizer_create(tkz, 0, &detok))) {
            rc = cli_report("run", st);
            goto done;
        }
        unsigned flags = TERN_TOK_ADD_SPECIAL | (parse_special ? TERN_TOK_PARSE_SPECIAL : 0);
        size_t cap = text_len + 8, need = 0;
        for (int attempt = 0; attempt < 2; attempt++) {
            free(prompt);
            prompt = malloc(cap * sizeof *prompt);
            if (!prompt) { st = TERN_ERR_NOMEM; break; }
            st = tern_tokenize(tkz, prompt_text, text_len, flags, prompt, cap, &need);
            if (st != TERN_ERR_RANGE) break;
            cap = need;
        }
        if (st) { rc = cli_report("run", st); goto done; }
        if (need == 0 || need > INT32_MAX) {
            rc = cli_usage_error("run", "the prompt is empty after tokenization");
            goto done;
        }
        n_prompt = (int)need;
    }
    if (n_ctx == 0) n_ctx = n_prompt + n_predict;
    if (n_prompt + n_predict > n_ctx) {
        rc = cli_usage_error("run", "prompt (%d) + -n (%lld) exceeds the context size -c %lld",
                             n_prompt, n_predict, n_ctx);
        goto done;
    }
    struct tern_context_params cp = {.n_ctx = (int)n_ctx, .n_threads = (int)g.threads};
    struct tern_sampler_params sp = g.sampler;
    if ((st = tern_context_create(m, &cp, &ctx)) ||
        (st = tern_sampler_create(&sp, tern_model_n_vocab(m), &smp))) {
        rc = cli_report("run", st);
        goto done;
    }
    int64_t eos = -1;
    if (!ignore_eos) {
        int64_t e;
        if (tern_gguf_get_i64(tern_model_gguf(m), "tokenizer.ggml.eos_token_id", &e) == TERN_OK) eos = e;
    }
    for (int i = 0; i < n_prompt; i++) tern_sampler_accept(smp, prompt[i]);
    out = malloc(((size_t)n_predict + 1) * sizeof *out);
    double t0 = now_ms();
    if (g.cache_dir) {
        struct tern_prefix_cache_params pp = {.budget_bytes = (uint64_t)g.cache_mb << 20, .dir = g.cache_dir};
        if ((st = tern_prefix_cache_create(m, &pp, &pc))) { rc = cli_report("run", st); goto done; }
        if (tern_prefix_cache_warning(pc)) fprintf(stderr, "tern run: prompt cache: %s\n", tern_prefix_cache_warning(pc));
        st = tern_prefix_cache_prefill(pc, ctx, prompt, n_prompt, &n_reused);
    } else {
        st = tern_decode(ctx, prompt, n_prompt, 0, TERN_LOGITS_LAST);
    }
    if (st) { rc = cli_report("run", st); goto done; }
    double t1 = now_ms();
    const float *logits = tern_context_logits(ctx, n_prompt - 1 - n_reused);
    int n_out = 0;
    if (!json) { fflush(stdout); }
    for (int i = 0; i < n_predict; i++) {
        int32_t tok = tern_sampler_sample(smp, logits);
        out[n_out++] = tok;
        bool stop = detok ? (!ignore_eos && tern_token_is_eog(tkz, tok)) : tok == eos;
        if (detok && !stop && !json) {
            const char *piece;
            size_t plen;
            if (tern_detokenizer_push(detok, tok, &piece, &plen) == TERN_OK && plen) {
                fwrite(piece, 1, plen, stdout);
                fflush(stdout);
            }
        } else if (!detok && !json) {
            printf("%s%d", i ? "," : "", tok);
            fflush(stdout);
        }
        if (stop) break;
        if (i + 1 == n_predict) break;
        if ((st = tern_decode(ctx, &tok, 1, n_prompt + i, TERN_LOGITS_LAST))) { rc = cli_report("run", st); goto done; }
        logits = tern_context_logits(ctx, 0);
    }
    double t2 = now_ms();
    if (detok && !json) {
        const char *piece;
        size_t plen;
        if (tern_detokenizer_flush(detok, &piece, &plen) == TERN_OK && plen) fwrite(piece, 1, plen, stdout);
    }
    if (json) {
        printf("{\"tokens\": [");
        for (int i = 0; i < n_out; i++) printf("%s%d", i ? ", " : "", out[i]);
        printf("], \"n_prompt\": %d, \"n_reused\": %d, \"prompt_ms\": %.3f, \"gen_ms\": %.3f}\n", n_prompt, n_reused, t1 - t0, t2 - t1);
    } else {
        printf("\n");
        fprintf(stderr, "tern run: prompt %d tokens in %.1f ms; generated %d tokens in %.1f ms (%.2f tokens/s)\n",
                n_prompt, t1 - t0, n_out, t2 - t1, n_out > 1 ? (n_out - 1) / ((t2 - t1) / 1e3) : 0.0);
        fprintf(stderr, "tern run: RSS %.1f MiB (model file %.1f MiB mapped, KV cache %.1f MiB)\n",
                cli_rss_bytes() / 1048576.0, tern_gguf_file_size(tern_model_gguf(m)) / 1048576.0,
                tern_model_kv_bytes(m, (int)n_ctx) / 1048576.0);
    }
    if (pc) {
        if ((st = tern_prefix_cache_save(pc))) { rc = cli_report("run", st); goto done; }
        if (!json) fprintf(stderr, "tern run: prompt cache: reused %d of %d prompt tokens\n", n_reused, n_prompt);
    }
done:
    tern_detokenizer_free(detok);
    tern_tokenizer_free(tkz);
    free(file_text);
    tern_prefix_cache_free(pc);
    free(prompt);
    free(out);
    tern_sampler_free(smp);
    tern_context_free(ctx);
    tern_model_free(m);
    return rc;
}
