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

/* A comma-separated list of counts (-p 128,512), bounded by its option's CLI_RANGE. */
struct bench_list {
    long long v[MAX_LIST];
    int n;
};

struct bench_opts {
    const char *models[MAX_LIST];   /* -m FILE or --synthetic SHAPE:TYPE, in the order given */
    bool is_synth[MAX_LIST];
    int n_models;
    const char *vocab, *suite, *decode_tile;
    struct bench_list pp, tg, th, dp;
    long long reps, n_batch, widen_ffn;
    bool reps_set, json, profile, prompt_cache, no_repack, hardware, batch_policy;
    struct cli_draft_opts draft;
    struct cli_grammar_opts grammar;
    const char *prompt_files[16];
    int n_files;
    struct tern_sampler_params dsp;  /* --temp, -s of --draft */
    double layer_scale;
    struct cli_lora_opts lora;
};

static void bench_init(void *p)
{
    struct bench_opts *o = p;
    *o = (struct bench_opts){.pp = {{512}, 1}, .tg = {{128}, 1}, .th = {{0}, 1}, .dp = {{0}, 1},
                             .reps = 5, .n_batch = 512, .dsp = tern_sampler_default_params()};
    cli_grammar_opts_init(&o->grammar);
}

static int model_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    struct bench_opts *o = opts;
    if (o->n_models == MAX_LIST) return cli_usage_error(cmd, "more than %d models", MAX_LIST), -1;
    /* --synthetic is written after parsing, once --vocab (which may come later) is known */
    o->is_synth[o->n_models] = !strcmp(opt->lname, "--synthetic");
    o->models[o->n_models++] = val;
    return 0;
}

static int list_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    struct bench_list *l = (struct bench_list *)((char *)opts + opt->off);
    int32_t *ids;
    int cnt, bad;
    bool ok = cli_parse_token_list(val, &ids, &cnt, &bad);
    if (ok) {
        ok = cnt <= MAX_LIST;
        for (int i = 0; ok && i < cnt; i++) {
            if (ids[i] < opt->imin || ids[i] > opt->imax) ok = false;
            l->v[i] = ids[i];
        }
        free(ids);
    }
    if (!ok) return cli_usage_error(cmd, "%s: '%s' is not a comma-separated list of up to %d values in %lld..%lld",
                                    cli_option_name(opt), val, MAX_LIST, opt->imin, opt->imax), -1;
    l->n = cnt;
    return 0;
}

#define B struct bench_opts
static const struct cli_option bench_table[] = {
    {"-m", "--model", CLI_CALL, "FILE", .call = model_take, .flags = CLI_REPEAT, .help = "model to test"},
    {NULL, "--synthetic", CLI_CALL, "SHAPE:TYPE", .call = model_take, .flags = CLI_REPEAT,
     .help = "random-weight model with a real shape, written once to $TERN_SYNTH_DIR or "
             "/tmp/tern-synth; shapes: tern synth --help"},
    {NULL, "--vocab", CLI_PATH, "VOCAB.gguf", CLI_AT(B, vocab),
     .help = "tokenizer for the --synthetic models (see tern synth --help); the cached file's name "
             "then ends in the vocab file's name"},
    {"-p", "--n-prompt", CLI_CALL, "LIST", CLI_AT(B, pp), CLI_RANGE(0, 1 << 20), .call = list_take, .def = "512",
     .help = "prompt lengths to test, comma-separated (0 = skip)"},
    {"-n", "--n-gen", CLI_CALL, "LIST", CLI_AT(B, tg), CLI_RANGE(0, 1 << 20), .call = list_take, .def = "128",
     .help = "generation lengths to test (0 = skip)"},
    {"-t", "--threads", CLI_CALL, "LIST", CLI_AT(B, th), CLI_RANGE(1, 512), .call = list_take,
     .def = "all CPUs", .help = "thread counts"},
    {"-r", "--repetitions", CLI_INT, "N", CLI_AT(B, reps), CLI_RANGE(1, 64), CLI_GIVEN(B, reps_set),
     .help = "timed repetitions per test (--draft: default 3)"},
    {"-b", "--batch-size", CLI_INT, "N", CLI_AT(B, n_batch), CLI_RANGE(1, 1 << 16), .help = "prompt batch size"},
    {"-d", "--depth", CLI_CALL, "LIST", CLI_AT(B, dp), CLI_RANGE(0, 1 << 20), .call = list_take, .def = "0",
     .help = "tokens already in the KV cache when each test starts (filled once per test, untimed)"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(B, json),
     .help = "JSON array, one object per test (llama-bench field names, plus avg_cpu_ms: process CPU "
             "time per run)"},
    {NULL, "--profile", CLI_FLAG, NULL, CLI_AT(B, profile),
     .help = "per op class: time share, kernel used, scalar fallbacks"},
    {NULL, "--no-repack", CLI_FLAG, NULL, CLI_AT(B, no_repack),
     .help = "keep the weights mmap-only (no copy repacked at load; the bytes repacked are printed to "
             "stderr otherwise)"},
    {NULL, "--decode-tile", CLI_STRING, "TILE", CLI_AT(B, decode_tile), .def = "auto",
     .help = "the tile matmuls of 1-3 tokens over repacked weights use: auto (measured at load, cached "
             "per CPU; printed to stderr), zmm, ymm-evex, ymm-vnni or ymm (env TERN_DECODE_TILE)"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(B, lora),
     .notes = (const struct cli_note[]){{"--lora", NULL, "with one -m: time the model with this LoRA "
                                         "adapter (llama.cpp's GGUF) attached"}, {NULL}}},
    {NULL, "--suite", CLI_PATH, "FILE", CLI_AT(B, suite), .group = "Instead of pp/tg",
     .help = "time a suite of chat prompts and write the governance report (tern bench --suite --help "
             "lists its own options)"},
    {NULL, "--hardware", CLI_FLAG, NULL, CLI_AT(B, hardware),
     .help = "print this machine's hardware and matched profile as JSON (tern bench --suite --help)"},
    {NULL, "--batch-policy", CLI_FLAG, NULL, CLI_AT(B, batch_policy),
     .help = "measure batch 1..4 and pick the offline batch (tern bench --suite --help)"},
    {NULL, "--prompt-cache", CLI_FLAG, NULL, CLI_AT(B, prompt_cache),
     .help = "the prompt-cache targets (TTFT cold vs hit for a 1024-token prefix, hit rate over 200 "
             "requests, disk load vs recompute of a 2048-token prefix); first -t value used"},
    {.kind = CLI_INCLUDE, .sub = cli_draft_table, CLI_AT(B, draft),
     .notes = (const struct cli_note[]){{"--draft", NULL, "speculative decoding with SRC (ngram, "
             "self:TYPE, drafter.gguf) beside plain decoding of the same prompts (story, toolcall, "
             "repeat, code, + --prompt-file), -n tokens each, -r runs alternating; first model, -n "
             "and -t values used"}, {NULL}}},
    {NULL, "--prompt-file", CLI_LIST, "FILE", CLI_AT(B, prompt_files), CLI_COUNT(B, n_files, 16),
     .help = "with --draft: another prompt (text)"},
    {NULL, "--temp", CLI_DOUBLE, "T", CLI_AT(B, dsp.temperature), CLI_FRANGE(0, 100),
     .help = "with --draft: sample at this temperature instead of greedy decoding"},
    {"-s", "--seed", CLI_INT, "SEED", CLI_AT(B, dsp.seed), CLI_RANGE(0, INT64_MAX), .help = "with --draft: RNG seed"},
    {NULL, "--scale-layers", CLI_DOUBLE, "S", CLI_AT(B, layer_scale), CLI_FRANGE(1e-6, 1), .def = "",
     .help = "with --draft: run on a copy of the model whose attn_output and ffn_down (qwen35: ssm_out) "
             "are scaled by S (written once beside it): a random-weight model with tied embeddings then "
             "mostly repeats tokens, an acceptance S dials (0.03: repeats; 0.1: in runs); a qwen35 MTP "
             "layer reads its token alone (eh_proj [I|0])"},
    {NULL, "--widen-ffn", CLI_INT, "N", CLI_AT(B, widen_ffn), CLI_RANGE(2, 1000), .def = "",
     .help = "with --draft: run on a copy of the model whose feed-forward blocks are N times as wide, "
             "the new rows zero (written once beside it): the same outputs, N times the FFN bytes per "
             "token, so a small trained model decodes bound by memory as a large one does"},
    {.kind = CLI_INCLUDE, .sub = cli_grammar_table, CLI_AT(B, grammar),
     .notes = (const struct cli_note[]){
         {"--json-schema", NULL, "constrained decoding timed against unconstrained decoding of as many "
          "tokens, greedy, -r rounds alternating the order; prints both tokens/s (wall and CPU), their "
          "ratio, forced tokens and mask time; first model, -n, -t values"},
         {"--grammar", NULL, "the same with a GBNF grammar (llama.cpp's format)"}, {NULL}}},
    {0},
};
#undef B

const struct cli_command cli_spec_bench = {
    "bench", "(-m MODEL | --synthetic SHAPE:TYPE)... [options]",
    "Prompt processing (ppN) and generation (tgN) speed, llama-bench style: every model x\n"
    "thread count x depth x length, -r timed repetitions each.\n",
    bench_table, CLI_OPTS(struct bench_opts, bench_init),
    "Timed: forward passes + greedy sampling; tokenization excluded. Each test runs once\n"
    "untimed (warm-up) before its repetitions.\n",
};

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
    /* the suite run (docs/bench-and-gate.md "Speed governance") has its own options: --json takes a
     * file there */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--suite") || !strcmp(argv[i], "--hardware") || !strcmp(argv[i], "--batch-policy"))
            return cli_bench_suite(argc, argv);
    static struct bench_opts o; /* a few KiB of lists */
    bench_init(&o);
    const int pr = cli_parse(&cli_spec_bench, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char **models = o.models, *vocab = o.vocab;
    const bool *is_synth = o.is_synth;
    char synth_paths[MAX_LIST][512];
    const int n_models = o.n_models, n_pp = o.pp.n, n_tg = o.tg.n, n_th = o.th.n, n_dp = o.dp.n;
    const long long *pp = o.pp.v, *tg = o.tg.v, *th = o.th.v, *dp = o.dp.v;
    const long long reps = o.reps, n_batch = o.n_batch, widen_ffn = o.widen_ffn;
    const bool json = o.json, profile = o.profile, prompt_cache = o.prompt_cache, reps_set = o.reps_set,
               no_repack = o.no_repack;
    struct cli_draft_opts dro = o.draft;
    struct cli_grammar_opts gro = o.grammar;
    const char *const *prompt_files = o.prompt_files;
    const int n_files = o.n_files;
    const struct tern_sampler_params dsp = o.dsp;
    const double layer_scale = o.layer_scale;
    struct cli_lora_opts lora = o.lora;
    const char *decode_tile = o.decode_tile;
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
            models[mi], &(struct tern_model_params){.prefault = true, .no_repack = no_repack, .decode_tile = decode_tile}, &m);
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
