/* cmd_bench.c — `tern bench`: prompt-processing and generation speed, modeled on llama-bench.
 *
 * What is timed: forward passes (and, for generation, greedy sampling of each token);
 * tokenization is excluded (tests use token ids). ppN = one N-token prompt decoded from an
 * empty KV cache in batches of n_batch, logits for the last token only; tgN = N tokens decoded
 * one at a time from an empty KV cache. With --depth D (llama-bench's -d) both start after D
 * cached tokens instead, filled once per test and untimed ("pp512 @ d2048"): the speed a user
 * sees deep into a conversation, where attention over the cache costs most. One untimed
 * warm-up run precedes each test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tern_gguf.h"
#include "cli_draft.h"
#include "cli_grammar.h"
#include "cli_json.h"
#include "cli_gov.h"

#define MAX_LIST 16

/* CPU seconds used by the whole process so far. */
static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void help(void)
{
    printf("usage: tern bench (-m MODEL | --synthetic SHAPE:TYPE)... [options]\n"
           "\n"
           "  -m, --model FILE        model to test (repeatable)\n"
           "  --synthetic SHAPE:TYPE  random-weight model with a real shape, written once to\n"
           "                          $TERN_SYNTH_DIR or /tmp/tern-synth (repeatable); shapes: %s\n"
           "  --vocab VOCAB.gguf      tokenizer for the --synthetic models (see tern synth --help);\n"
           "                          the cached file's name then ends in the vocab file's name\n"
           "  -p, --n-prompt LIST     prompt lengths to test, comma-separated (default 512; 0 = skip)\n"
           "  -n, --n-gen LIST        generation lengths to test (default 128; 0 = skip)\n"
           "  -t, --threads LIST      thread counts (default: all CPUs)\n"
           "  -r, --repetitions N     timed repetitions per test (default 5)\n"
           "  -b, --batch-size N      prompt batch size (default 512)\n"
           "  --lora FILE[:SCALE]     with one -m: time the model with this LoRA adapter attached\n"
           "                          (llama.cpp's GGUF; repeatable)\n"
           "  -d, --depth LIST        tokens already in the KV cache when each test starts\n"
           "                          (default 0; filled once per test, untimed)\n"
           "  --json                  JSON array, one object per test (llama-bench field names,\n"
           "                          plus avg_cpu_ms: process CPU time per run)\n"
           "  --suite FILE            instead of pp/tg: time a suite of chat prompts and write the\n"
           "                          governance report (see tern bench --suite --help)\n"
           "  --batch-policy          instead of pp/tg: measure batch 1..4 and pick the offline batch\n"
           "  --profile               per op class: time share, kernel used, scalar fallbacks\n"
           "  --no-repack             keep the weights mmap-only (no copy repacked at load; the\n"
           "                          bytes repacked are printed to stderr otherwise)\n"
           "  --prompt-cache          instead of pp/tg: the prompt-cache targets (TTFT cold vs hit\n"
           "                          for a 1024-token prefix, hit rate over 200 requests, disk load\n"
           "                          vs recompute of a 2048-token prefix); first -t value used\n"
           "  --draft SRC             instead of pp/tg: speculative decoding with SRC (ngram, self:TYPE,\n"
           "                          drafter.gguf) beside plain decoding of the same prompts (story,\n"
           "                          toolcall, repeat, code, + --prompt-file), -n tokens each, -r runs\n"
           "                          alternating; first model, -n and -t values used (default -r 3)\n"
           "  --draft-max K, --draft-min K   draft lengths (see tern run --help)\n"
           "  --prompt-file FILE      with --draft: another prompt (text; repeatable)\n"
           "  --json-schema FILE, --grammar FILE   instead of pp/tg: constrained decoding timed against\n"
           "                          unconstrained decoding of as many tokens, greedy, -r rounds\n"
           "                          alternating the order; prints both tokens/s (wall and CPU), their\n"
           "                          ratio, forced tokens and mask time; first model, -n, -t values\n"
           "  --temp T, -s SEED       with --draft: sample instead of greedy decoding\n"
           "  --scale-layers S        with --draft: run on a copy of the model whose attn_output and\n"
           "                          ffn_down (qwen35: ssm_out) are scaled by S (0 < S <= 1; written\n"
           "                          once beside it): a random-weight model with tied embeddings then\n"
           "                          mostly repeats tokens, an acceptance S dials (0.03: repeats; 0.1:\n"
           "                          in runs); a qwen35 MTP layer reads its token alone (eh_proj [I|0])\n"
           "  --widen-ffn N           with --draft: run on a copy of the model whose feed-forward blocks\n"
           "                          are N times as wide, the new rows zero (2..1000; written once\n"
           "                          beside it): the same outputs, N times the FFN bytes per token, so\n"
           "                          a small trained model decodes bound by memory as a large one does\n"
           "\n"
           "Timed: forward passes + greedy sampling; tokenization excluded. Each test runs once\n"
           "untimed (warm-up) before its repetitions.\n",
           tern_synth_shape_names());
}

static bool parse_list(const char *s, long long lo, long long hi, long long *out, int *n)
{
    int32_t *ids;
    int cnt, bad;
    if (!cli_parse_token_list(s, &ids, &cnt, &bad)) return false;
    bool ok = cnt <= MAX_LIST;
    for (int i = 0; ok && i < cnt; i++) {
        if (ids[i] < lo || ids[i] > hi) ok = false;
        out[i] = ids[i];
    }
    free(ids);
    *n = cnt;
    return ok;
}

/* Path of the cached synthetic model for spec (with vocab's tokenizer if not NULL), writing it
 * if missing. */
static int synth_path(const char *spec, const char *vocab, char *path, size_t cap)
{
    const char *dir = getenv("TERN_SYNTH_DIR");
    if (!dir || !*dir) dir = "/tmp/tern-synth";
    mkdir(dir, 0755);
    const char *colon = strchr(spec, ':');
    if (!colon || colon == spec || !colon[1] || colon - spec >= 64)
        return cli_usage_error("bench", "--synthetic '%s' is not SHAPE:TYPE", spec);
    char shape[64];
    memcpy(shape, spec, (size_t)(colon - spec));
    shape[colon - spec] = '\0';
    if (vocab) {
        /* the vocab file's name without folder and .gguf keeps cached files apart */
        const char *base = strrchr(vocab, '/');
        base = base ? base + 1 : vocab;
        size_t blen = strlen(base);
        if (blen > 5 && !strcmp(base + blen - 5, ".gguf")) blen -= 5;
        snprintf(path, cap, "%s/%s-%s-%.*s.gguf", dir, shape, colon + 1, (int)blen, base);
    } else {
        snprintf(path, cap, "%s/%s-%s.gguf", dir, shape, colon + 1);
    }
    struct stat st;
    if (stat(path, &st) == 0) return 0;
    fprintf(stderr, "tern bench: writing synthetic model %s ...\n", path);
    tern_status s = tern_synth_model_write_vocab(shape, colon + 1, 1, vocab, path, NULL);
    if (s) return cli_report("bench", s);
    return 0;
}

struct result {
    const char *model;
    uint64_t size, params;
    int n_prompt, n_gen, depth, threads, reps;
    double samples[64];
    double avg, sd;
    const char *kernels;
};

static int32_t token_for(int i, int n_vocab)
{
    /* deterministic spread of ids, away from the special tokens at the start */
    return (int32_t)(((uint64_t)i * 2654435761u + 1000) % (uint64_t)(n_vocab - 300) + 259);
}

static double sample_seconds; /* time spent in the sampler during runs (for --profile) */

/* One timed run; returns seconds or < 0 on failure (message printed). */
/* Fill positions 0..depth-1 of the cache (untimed); run_once starts after them. */
static int fill_depth(struct tern_context *ctx, int n_vocab, int depth, int32_t *buf)
{
    tern_status_ignore(tern_kv_truncate(ctx, 0));
    if (depth == 0) return 0;
    for (int i = 0; i < depth; i++) buf[i] = token_for(i + 7919, n_vocab);
    tern_status st = tern_decode(ctx, buf, depth, 0, TERN_LOGITS_NONE);
    return st ? cli_report("bench", st) : 0;
}

static double run_once(struct tern_context *ctx, struct tern_sampler *smp, int n_vocab,
                       int n_prompt, int n_gen, int depth, int32_t *buf)
{
    /* a recurrent model (qwen35) cannot go back to `depth` after a run of one-token calls:
     * fill it again, untimed */
    if (!tern_kv_seq_can_truncate(ctx, 0, depth) && fill_depth(ctx, n_vocab, depth, buf)) return -1;
    tern_status_ignore(tern_kv_truncate(ctx, depth));
    double t0 = cli_now_s();
    tern_status st = TERN_OK;
    if (n_prompt > 0) {
        for (int i = 0; i < n_prompt; i++) buf[i] = token_for(i, n_vocab);
        st = tern_decode(ctx, buf, n_prompt, depth, TERN_LOGITS_LAST);
    } else {
        int32_t tok = token_for(0, n_vocab);
        for (int i = 0; i < n_gen && !st; i++) {
            st = tern_decode(ctx, &tok, 1, depth + i, TERN_LOGITS_LAST);
            if (!st) {
                double ts = cli_now_s();
                tok = tern_sampler_sample(smp, tern_context_logits(ctx, 0));
                sample_seconds += cli_now_s() - ts;
            }
        }
    }
    double t = cli_now_s() - t0;
    if (st) {
        cli_report("bench", st);
        return -1;
    }
    return t;
}

int cmd_bench(int argc, char **argv)
{
    const char *models[MAX_LIST], *v, *vocab = NULL;
    char synth_paths[MAX_LIST][512];
    bool is_synth[MAX_LIST] = {false};
    int n_models = 0;
    long long pp[MAX_LIST] = {512}, tg[MAX_LIST] = {128}, th[MAX_LIST] = {0}, dp[MAX_LIST] = {0};
    long long reps = 5, n_batch = 512;
    int n_pp = 1, n_tg = 1, n_th = 1, n_dp = 1;
    bool json = false, profile = false, prompt_cache = false, reps_set = false, no_repack = false;
    struct cli_draft_opts dro = {0};
    struct cli_grammar_opts gro;
    cli_grammar_opts_init(&gro);
    const char *prompt_files[16];
    int n_files = 0;
    struct tern_sampler_params dsp = tern_sampler_default_params();
    double layer_scale = 0;
    long long widen_ffn = 0;
    struct cli_lora_opts lora = {0};
    /* the suite run (docs/bench-and-gate.md "Speed governance") has its own options: --json takes a
     * file there */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--suite") || !strcmp(argv[i], "--hardware") || !strcmp(argv[i], "--batch-policy"))
            return cli_bench_suite(argc, argv);
    for (int i = 1; i < argc; i++) {
        int r = 0;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
        if (!strcmp(argv[i], "--profile")) { profile = true; continue; }
        if (!strcmp(argv[i], "--no-repack")) { no_repack = true; continue; }
        if (!strcmp(argv[i], "--prompt-cache")) { prompt_cache = true; continue; }
#define OPT(name, alt) ((r = cli_opt(argc, argv, &i, name, alt, &v)) != 0)
        if ((r = cli_draft_opt(argc, argv, &i, &dro)) != 0) {
            if (r < 0) return CLI_EXIT_USAGE;
        } else if ((r = cli_lora_opt(argc, argv, &i, &lora)) != 0) {
            if (r < 0) return CLI_EXIT_USAGE;
        } else if ((r = cli_grammar_opt("bench", argc, argv, &i, &gro)) != 0) {
            if (r < 0) return CLI_EXIT_USAGE;
        } else if (OPT("--prompt-file", NULL)) {
            if (r < 0) return 2;
            if (n_files == 16) return cli_usage_error("bench", "too many --prompt-file");
            prompt_files[n_files++] = v;
        } else if (OPT("--temp", NULL)) {
            if (r < 0) return 2;
            double t;
            if (!cli_flag_float("bench", "--temp", v, 0, 100, &t)) return CLI_EXIT_USAGE;
            dsp.temperature = (float)t;
        } else if (OPT("--scale-layers", NULL)) {
            if (r < 0) return 2;
            if (!cli_flag_float("bench", "--scale-layers", v, 1e-6, 1, &layer_scale)) return CLI_EXIT_USAGE;
        } else if (OPT("--widen-ffn", NULL)) {
            if (r < 0) return 2;
            if (!cli_flag_int("bench", "--widen-ffn", v, 2, 1000, &widen_ffn)) return CLI_EXIT_USAGE;
        } else if (OPT("-s", "--seed")) {
            if (r < 0) return 2;
            long long sd;
            if (!cli_flag_int("bench", "-s", v, 0, INT64_MAX, &sd)) return CLI_EXIT_USAGE;
            dsp.seed = (uint64_t)sd;
        } else if (OPT("-m", "--model")) {
            if (r < 0) return 2;
            if (n_models == MAX_LIST) return cli_usage_error("bench", "too many models");
            models[n_models++] = v;
        } else if (OPT("--synthetic", NULL)) {
            if (r < 0) return 2;
            if (n_models == MAX_LIST) return cli_usage_error("bench", "too many models");
            /* written after parsing, once --vocab (which may come later) is known */
            is_synth[n_models] = true;
            models[n_models++] = v;
        } else if (OPT("--vocab", NULL)) {
            if (r < 0) return 2;
            vocab = v;
        } else if (OPT("-p", "--n-prompt")) {
            if (r < 0) return 2;
            if (!parse_list(v, 0, 1 << 20, pp, &n_pp)) return cli_usage_error("bench", "-p '%s' is not a list of lengths", v);
        } else if (OPT("-n", "--n-gen")) {
            if (r < 0) return 2;
            if (!parse_list(v, 0, 1 << 20, tg, &n_tg)) return cli_usage_error("bench", "-n '%s' is not a list of lengths", v);
        } else if (OPT("-t", "--threads")) {
            if (r < 0) return 2;
            if (!parse_list(v, 1, 512, th, &n_th)) return cli_usage_error("bench", "-t '%s' is not a list of thread counts", v);
        } else if (OPT("-r", "--repetitions")) {
            if (r < 0) return 2;
            if (!cli_parse_int(v, 1, 64, &reps)) return cli_usage_error("bench", "-r '%s' must be 1..64", v);
            reps_set = true;
        } else if (OPT("-d", "--depth")) {
            if (r < 0) return 2;
            if (!parse_list(v, 0, 1 << 20, dp, &n_dp)) return cli_usage_error("bench", "-d '%s' is not a list of depths", v);
        } else if (OPT("-b", "--batch-size")) {
            if (r < 0) return 2;
            if (!cli_parse_int(v, 1, 1 << 16, &n_batch)) return cli_usage_error("bench", "-b '%s' is not valid", v);
        } else {
            return cli_usage_error("bench", "unknown option '%s'", argv[i]);
        }
#undef OPT
    }
    if (n_models == 0) return cli_usage_error("bench", "give -m MODEL or --synthetic SHAPE:TYPE");
    if (vocab) {
        bool any = false;
        for (int mi = 0; mi < n_models; mi++) any |= is_synth[mi];
        if (!any) return cli_usage_error("bench", "--vocab applies to --synthetic models only");
    }
    for (int mi = 0; mi < n_models; mi++) {
        if (!is_synth[mi]) continue;
        int rc = synth_path(models[mi], vocab, synth_paths[mi], sizeof synth_paths[0]);
        if (rc) return rc;
        models[mi] = synth_paths[mi];
    }
    if (cli_draft_check("bench", &dro)) return CLI_EXIT_USAGE;
    if (lora.n && (n_models > 1 || dro.source || gro.schema || gro.gbnf || prompt_cache))
        return cli_usage_error("bench", "--lora times one -m model's pp/tg (not with --draft, "
                               "--json-schema/--grammar or --prompt-cache)");
    if (!dro.source && (n_files || dsp.temperature != 0.0f || layer_scale > 0 || widen_ffn))
        return cli_usage_error("bench", "--prompt-file, --temp, --scale-layers and --widen-ffn apply to --draft only");
    if (cli_grammar_check("bench", &gro, false)) return CLI_EXIT_USAGE;
    if (gro.schema || gro.gbnf) {
        if (dro.source || prompt_cache) return cli_usage_error("bench", "--json-schema/--grammar cannot be combined with --draft or --prompt-cache");
        int threads = (int)th[0];
        if (threads == 0) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            threads = ncpu > 0 ? (int)ncpu : 1;
        }
        int rc = cli_bench_grammar(models[0], &gro, threads, tg[0] > 0 ? (int)tg[0] : 128, reps_set ? (int)reps : 5, json);
        cli_grammar_opts_free(&gro);
        return rc;
    }
    if (dro.source) {
        int threads = (int)th[0];
        if (threads == 0) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            threads = ncpu > 0 ? (int)ncpu : 1;
        }
        return cli_bench_draft(models[0], &dro, threads, tg[0] > 0 ? (int)tg[0] : 128,
                               reps_set ? (int)reps : 3, &dsp, prompt_files, n_files, layer_scale,
                               (int)widen_ffn, json);
    }
    if (prompt_cache) {
        for (int mi = 0; mi < n_models; mi++) {
            int rc = cli_prompt_cache_bench("bench", models[mi], (int)th[0], 0, 0, 0, json);
            if (rc) return rc;
        }
        return CLI_EXIT_OK;
    }

    if (!json)
        printf("| model | size | params | threads | test | t/s |\n"
               "| --- | ---: | ---: | ---: | ---: | ---: |\n");
    else
        printf("[");
    bool first_json = true;
    int rc = CLI_EXIT_OK;
    for (int mi = 0; mi < n_models && rc == 0; mi++) {
        struct tern_model *m;
        tern_status st = tern_model_load(
            models[mi], &(struct tern_model_params){.prefault = true, .no_repack = no_repack}, &m);
        if (st) { rc = cli_report("bench", st); break; }
        const struct tern_model_info *in = tern_model_get_info(m);
        cli_note_repack("bench", models[mi], in);
        uint64_t params = 0;
        const struct tern_gguf *g = tern_model_gguf(m);
        for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
            const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
            uint64_t ne = 1;
            for (int d = 0; d < t->n_dims; d++) ne *= (uint64_t)t->ne[d];
            params += ne;
        }
        long long max_len = 1;
        for (int i = 0; i < n_pp; i++) if (pp[i] > max_len) max_len = pp[i];
        for (int i = 0; i < n_tg; i++) if (tg[i] > max_len) max_len = tg[i];
        long long max_depth = 0;
        for (int i = 0; i < n_dp; i++) if (dp[i] > max_depth) max_depth = dp[i];
        int32_t *buf = malloc((size_t)(max_len > max_depth ? max_len : max_depth) * sizeof *buf);
        for (int ti = 0; ti < n_th && rc == 0 && buf; ti++) {
            struct tern_context_params cp = {.n_ctx = (int)(max_len + max_depth), .n_batch = (int)n_batch,
                                             .n_threads = (int)th[ti]};
            struct tern_context *ctx;
            struct tern_sampler *smp;
            struct tern_sampler_params sp = tern_sampler_default_params();
            if ((st = tern_context_create(m, &cp, &ctx))) { rc = cli_report("bench", st); break; }
            if ((rc = cli_lora_load("bench", &lora, m, stderr)) || (rc = cli_lora_attach("bench", &lora, ctx))) {
                tern_context_free(ctx);
                break;
            }
            if ((st = tern_sampler_create(&sp, in->n_vocab, &smp))) {
                tern_context_free(ctx);
                rc = cli_report("bench", st);
                break;
            }
            int threads = (int)th[ti];
            if (threads == 0) {
                long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
                threads = ncpu > 0 ? (int)ncpu : 1;
            }
            for (int di = 0; di < n_dp && rc == 0; di++)
            for (int kind = 0; kind < 2 && rc == 0; kind++) {
                int n_list = kind == 0 ? n_pp : n_tg;
                const int depth = (int)dp[di];
                for (int li = 0; li < n_list && rc == 0; li++) {
                    int np = kind == 0 ? (int)pp[li] : 0, ng = kind == 1 ? (int)tg[li] : 0;
                    if (np + ng == 0) continue;
                    struct result res = {.model = models[mi], .size = in->weight_bytes,
                                         .params = params, .n_prompt = np, .n_gen = ng,
                                         .depth = depth, .threads = threads, .reps = (int)reps};
                    if ((rc = fill_depth(ctx, in->n_vocab, depth, buf))) break;
                    if (run_once(ctx, smp, in->n_vocab, np, ng, depth, buf) < 0) { rc = 1; break; }
                    tern_context_set_profile(ctx, profile);
                    tern_context_profile_reset(ctx);
                    sample_seconds = 0;
                    double sum = 0, sq = 0, total_s = 0;
                    const double cpu0 = process_cpu_s();
                    for (int r = 0; r < reps; r++) {
                        double t = run_once(ctx, smp, in->n_vocab, np, ng, depth, buf);
                        if (t < 0) { rc = 1; break; }
                        res.samples[r] = (np + ng) / t;
                        total_s += t;
                        sum += res.samples[r];
                    }
                    if (rc) break;
                    const double cpu_s = (process_cpu_s() - cpu0) / reps; /* per run */
                    res.avg = sum / reps;
                    for (int r = 0; r < reps; r++) sq += (res.samples[r] - res.avg) * (res.samples[r] - res.avg);
                    res.sd = reps > 1 ? sqrt(sq / (reps - 1)) : 0.0;
                    struct tern_profile_entry prof[TERN_PROF_COUNT];
                    tern_context_profile(ctx, prof);
                    tern_context_set_profile(ctx, false);
                    const char *base = strrchr(res.model, '/');
                    base = base ? base + 1 : res.model;
                    if (json) {
                        cJSON *o = cJSON_CreateObject();
                        cli_json_str(o, "model_filename", res.model);
                        cli_json_str(o, "model_type", in->arch_name);
                        cli_json_uint(o, "model_size", res.size);
                        cli_json_uint(o, "model_n_params", res.params);
                        cli_json_int(o, "n_batch", n_batch);
                        cli_json_int(o, "n_threads", res.threads);
                        cli_json_int(o, "n_prompt", np);
                        cli_json_int(o, "n_gen", ng);
                        cli_json_int(o, "n_depth", depth);
                        cli_json_num(o, "avg_ts", res.avg);
                        cli_json_num(o, "stddev_ts", res.sd);
                        cJSON *samples = cli_json_arr(o, "samples_ts");
                        for (int r = 0; r < reps; r++) cli_json_num(samples, NULL, res.samples[r]);
                        cli_json_str(o, "timed", "forward passes + greedy sampling; tokenization excluded");
                        /* the process's CPU time per run (all threads, spinning included): a
                         * measure that load from other processes inflates far less than wall time */
                        cli_json_num(o, "avg_cpu_ms", cpu_s * 1e3);
                        if (profile) {
                            cJSON *pa = cli_json_arr(o, "profile");
                            for (int k = 0; k < TERN_PROF_COUNT; k++) {
                                cJSON *e = cli_json_obj(pa, NULL);
                                cli_json_str(e, "op", prof[k].name);
                                cli_json_str(e, "kernel", prof[k].kernel);
                                cli_json_num(e, "ms", prof[k].ns / 1e6);
                                cli_json_num(e, "share", prof[k].ns / 1e9 / total_s);
                                cli_json_uint(e, "calls", prof[k].calls);
                                cli_json_uint(e, "fallbacks", prof[k].fallbacks);
                            }
                            cJSON *e = cli_json_obj(pa, NULL);
                            cli_json_str(e, "op", "sampling");
                            cli_json_str(e, "kernel", "scalar");
                            cli_json_num(e, "ms", sample_seconds * 1e3);
                            cli_json_num(e, "share", sample_seconds / total_s);
                        }
                        /* one test per line, printed as it finishes; the array closes below
                         * even when a later test fails */
                        rc = cli_json_emit("bench", stdout, o, false,
                                           first_json ? "\n  " : ",\n  ", "");
                        if (rc) break;
                        first_json = false;
                    } else {
                        char test[48];
                        int tl = snprintf(test, sizeof test, np ? "pp%d" : "tg%d", np ? np : ng);
                        if (depth) snprintf(test + tl, sizeof test - (size_t)tl, " @ d%d", depth);
                        printf("| %s | %.2f MiB | %.2f M | %d | %s | %.2f ± %.2f |\n", base,
                               res.size / 1048576.0, res.params / 1e6, res.threads, test, res.avg, res.sd);
                        if (profile) {
                            uint64_t fb = 0;
                            printf("\n  profile of %s (%d threads), wall time over %lld runs:\n", test, res.threads, reps);
                            printf("  | op | kernel | ms | share | calls | fallbacks |\n");
                            for (int k = 0; k < TERN_PROF_COUNT; k++) {
                                fb += prof[k].fallbacks;
                                if (!prof[k].calls) continue;
                                printf("  | %s | %s | %.1f | %.1f %% | %llu | %llu |\n", prof[k].name, prof[k].kernel,
                                       prof[k].ns / 1e6, 100.0 * prof[k].ns / 1e9 / total_s,
                                       (unsigned long long)prof[k].calls, (unsigned long long)prof[k].fallbacks);
                            }
                            if (ng) printf("  | sampling | scalar | %.1f | %.1f %% | %lld | 0 |\n", sample_seconds * 1e3,
                                           100.0 * sample_seconds / total_s, (long long)ng * reps);
                            printf("  | tokenizer | - | excluded | - | - | - |\n");
                            printf("  scalar fallbacks on supported formats: %llu%s\n\n", (unsigned long long)fb,
                                   fb ? "  <-- a bug: please report" : "");
                        }
                    }
                    fflush(stdout);
                }
            }
            tern_sampler_free(smp);
            tern_context_free(ctx);
        }
        free(buf);
        cli_lora_free(&lora);
        tern_model_free(m);
    }
    if (json) printf("\n]\n");
    else
        printf("\ntimed: forward passes + greedy sampling (tokenization excluded); %lld repetitions "
               "after one warm-up run; ppN = N-token prompt from an empty cache, tgN = N tokens "
               "decoded one at a time; '@ dD': after D cached tokens instead\n", reps);
    return rc;
}
