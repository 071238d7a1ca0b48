/* bench_report.c — the report of a suite run as JSON (schema_version 1; docs/bench-and-gate.md
 * "Speed governance" lists every key). Aggregates are percentiles over prompts of each prompt's median
 * over its repetitions; the noise section says how much repetitions of one prompt differ
 * (median relative MAD over prompts) and how much each round's TTFT p50 / TPS p50 moved between
 * rounds (the spread a gate sees between two runs of the same build). */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "tern_build_info.h"

static const char *const metric_key[BENCH_M_COUNT] = {
    "template_ms", "tokenizer_ms", "prefill_ms", "first_step_ms", "ttft_ms", "tps", "ttfa_ms"};

/* Per-prompt median of metric m over the repetitions (TTFA: over those with a valid call). */
static bool prompt_median(const struct bench_results *r, int i, int m, double *out)
{
    const int reps = r->params.reps;
    double tmp[1024];
    int n = 0;
    for (int k = 0; k < reps && n < 1024; k++) {
        double v = r->runs[i].samples[m][k];
        if (m == BENCH_M_TTFA_MS && v < 0) continue;
        tmp[n++] = v;
    }
    if (!n) return false;
    *out = bench_median(tmp, n);
    return true;
}

/* Percentiles of metric m over the prompts selected by bucket (-1 = all). */
static cJSON *metric_pct(const struct bench_results *r, int m, int bucket)
{
    double *x = malloc((size_t)r->suite->n * sizeof *x);
    int n = 0;
    for (int i = 0; x && i < r->suite->n; i++) {
        if (bucket >= 0 && r->runs[i].bucket != bucket) continue;
        if (prompt_median(r, i, m, &x[n])) n++;
    }
    cJSON *o = bench_pct_json(x, n);
    free(x);
    return o;
}

static cJSON *ttfa_tokens_pct(const struct bench_results *r)
{
    double *x = malloc((size_t)r->suite->n * sizeof *x);
    int n = 0;
    for (int i = 0; x && i < r->suite->n; i++)
        if (r->runs[i].ttfa_tokens >= 0) x[n++] = r->runs[i].ttfa_tokens;
    cJSON *o = bench_pct_json(x, n);
    free(x);
    return o;
}

static void add_hex_fp(cJSON *o, const char *k, const char *hex) { cJSON_AddStringToObject(o, k, hex); }

/* The machine-speed probes of the run (bench_calib.c): their median is what tern gate compares. */
static cJSON *machine_speed_json(const struct bench_results *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", bench_calib_method());
    cJSON *a = cJSON_AddArrayToObject(o, "probes_gops");
    double *x = malloc(sizeof(double) * (size_t)(r->n_calib > 0 ? r->n_calib : 1));
    for (int i = 0; i < r->n_calib; i++) {
        cJSON_AddItemToArray(a, cJSON_CreateNumber(r->calib_gops[i]));
        if (x) x[i] = r->calib_gops[i];
    }
    if (x && r->n_calib > 0) {
        double med = bench_median(x, r->n_calib); /* sorts x */
        cJSON_AddNumberToObject(o, "gops", med);
        cJSON_AddNumberToObject(o, "spread", med > 0 ? (x[r->n_calib - 1] - x[0]) / med : 0);
    } else {
        cJSON_AddNullToObject(o, "gops");
        cJSON_AddNullToObject(o, "spread");
    }
    free(x);
    return o;
}

static cJSON *noise_json(const struct bench_results *r)
{
    const int n = r->suite->n, reps = r->params.reps;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", "repetitions interleaved (round r runs every prompt, reversed on odd "
                            "rounds); aggregates are percentiles of per-prompt medians; rel_mad = median "
                            "over prompts of (median absolute deviation / median) of its repetitions; "
                            "round_spread = (max - min) / median of each round's p50 over prompts");
    cJSON_AddNumberToObject(o, "repetitions", reps);
    cJSON_AddNumberToObject(o, "max_repetitions", r->params.max_reps > reps ? r->params.max_reps : reps);
    if (r->params.max_reps > 0) cJSON_AddNumberToObject(o, "target_rel_se", r->params.noise_target);
    else cJSON_AddNullToObject(o, "target_rel_se");
    cJSON_AddBoolToObject(o, "target_met", r->stable);
    /* how busy the machine was: a load average above the CPU count means runnable threads
     * waited for a CPU (ours included). cpu_share is informative only: a small model's threads
     * also wait on each other, so it is low on a quiet machine too */
    cJSON_AddNumberToObject(o, "cpu_s", r->cpu_s);
    cJSON_AddNumberToObject(o, "cpu_share", r->wall_s > 0 ? r->cpu_s / (r->wall_s * r->n_threads) : 0);
    if (r->load_start >= 0) cJSON_AddNumberToObject(o, "loadavg_start", r->load_start);
    else cJSON_AddNullToObject(o, "loadavg_start");
    if (r->load_end >= 0) cJSON_AddNumberToObject(o, "loadavg_end", r->load_end);
    else cJSON_AddNullToObject(o, "loadavg_end");
    cJSON_AddNumberToObject(o, "cpus_online", r->hw.cpus_online);
    static const int ms[] = {BENCH_M_TTFT, BENCH_M_TPS, BENCH_M_PREFILL};
    for (size_t q = 0; q < sizeof ms / sizeof ms[0]; q++) {
        int m = ms[q];
        double *mads = malloc((size_t)n * sizeof *mads), *rounds = malloc((size_t)reps * sizeof *rounds);
        double *col = malloc((size_t)n * sizeof *col);
        if (!mads || !rounds || !col) { free(mads); free(rounds); free(col); continue; }
        for (int i = 0; i < n; i++) mads[i] = bench_rel_mad(r->runs[i].samples[m], reps);
        for (int k = 0; k < reps; k++) {
            for (int i = 0; i < n; i++) col[i] = r->runs[i].samples[m][k];
            rounds[k] = bench_median(col, n);
        }
        double lo = rounds[0], hi = rounds[0];
        for (int k = 1; k < reps; k++) { lo = fmin(lo, rounds[k]); hi = fmax(hi, rounds[k]); }
        double med = bench_median(rounds, reps);
        cJSON *e = cJSON_AddObjectToObject(o, metric_key[m]);
        cJSON_AddNumberToObject(e, "rel_mad", bench_median(mads, n));
        cJSON_AddNumberToObject(e, "round_spread", med > 0 ? (hi - lo) / med : 0);
        if (m != BENCH_M_PREFILL) cJSON_AddNumberToObject(e, "worst_rel_se", r->rel_se[m]);
        free(mads);
        free(rounds);
        free(col);
    }
    return o;
}

static cJSON *residency_json(const struct bench_results *r)
{
    cJSON *o = cJSON_CreateObject();
    uint64_t total = 0, fast = 0, fb = 0;
    for (int k = 0; k < TERN_PROF_COUNT; k++) {
        total += r->prof[k].ns;
        fb += r->prof[k].fallbacks;
        if (strcmp(r->prof[k].kernel, "scalar")) fast += r->prof[k].ns;
    }
    cJSON_AddNumberToObject(o, "share", total ? (double)fast / (double)total : 0);
    cJSON_AddNumberToObject(o, "scalar_fallbacks", (double)fb);
    cJSON_AddNumberToObject(o, "forward_ms", total / 1e6);
    cJSON_AddStringToObject(o, "definition", "share of profiled forward time in op classes whose kernel is not "
                            "the scalar reference (matmuls per format, attention, SiLU, norms); a fallback is a "
                            "matmul on a supported format that ran scalar on a SIMD CPU");
    cJSON *ops = cJSON_AddArrayToObject(o, "ops");
    for (int k = 0; k < TERN_PROF_COUNT; k++) {
        if (!r->prof[k].calls) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", r->prof[k].name);
        cJSON_AddStringToObject(e, "kernel", r->prof[k].kernel);
        cJSON_AddBoolToObject(e, "optimized", strcmp(r->prof[k].kernel, "scalar") != 0);
        cJSON_AddNumberToObject(e, "ms", r->prof[k].ns / 1e6);
        cJSON_AddNumberToObject(e, "share", total ? (double)r->prof[k].ns / (double)total : 0);
        cJSON_AddNumberToObject(e, "calls", (double)r->prof[k].calls);
        cJSON_AddNumberToObject(e, "fallbacks", (double)r->prof[k].fallbacks);
        cJSON_AddItemToArray(ops, e);
    }
    return o;
}

static cJSON *profile_json(const struct bench_results *r, double tps_p50, double ttft_p50)
{
    const struct bench_profile *p = &r->profile;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON_AddStringToObject(o, "key", r->profile_key);
    cJSON_AddStringToObject(o, "source", p->source);
    cJSON_AddStringToObject(o, "kv_precision", p->kv_precision);
    cJSON *b = cJSON_AddObjectToObject(o, "batch_policy");
    cJSON_AddNumberToObject(b, "interactive", p->batch_interactive);
    cJSON_AddNumberToObject(b, "offline", p->batch_offline);
    cJSON_AddNumberToObject(b, "min_tps_gain", p->batch_min_tps_gain);
    cJSON_AddNumberToObject(b, "max_p95_penalty", p->batch_max_p95_penalty);
    cJSON *g = cJSON_AddObjectToObject(o, "gate");
    cJSON_AddNumberToObject(g, "ttft_regress_pct", p->gate.ttft_regress_pct);
    cJSON_AddNumberToObject(g, "tps_regress_pct", p->gate.tps_regress_pct);
    cJSON_AddNumberToObject(g, "ttfa_p95_max_tokens", p->gate.ttfa_p95_max_tokens);
    cJSON_AddNumberToObject(g, "residency_drop_points", p->gate.residency_drop_points);
    /* the first band whose glob matches the model file's name */
    const char *base = strrchr(r->model_path, '/');
    base = base ? base + 1 : r->model_path;
    const struct bench_band *band = NULL;
    for (int i = 0; i < p->n_bands && !band; i++)
        if (!fnmatch(p->bands[i].model, base, 0)) band = &p->bands[i];
    if (!band) {
        cJSON_AddNullToObject(o, "speed_band");
        return o;
    }
    cJSON *sb = cJSON_AddObjectToObject(o, "speed_band");
    cJSON_AddStringToObject(sb, "model", band->model);
    if (band->tps_p50[1] > 0) {
        cJSON *a = cJSON_AddArrayToObject(sb, "tps_p50");
        cJSON_AddItemToArray(a, cJSON_CreateNumber(band->tps_p50[0]));
        cJSON_AddItemToArray(a, cJSON_CreateNumber(band->tps_p50[1]));
        cJSON_AddStringToObject(sb, "tps_p50_is", tps_p50 < band->tps_p50[0] ? "below" : tps_p50 > band->tps_p50[1] ? "above" : "within");
    }
    if (band->ttft_ms_p50[1] > 0) {
        cJSON *a = cJSON_AddArrayToObject(sb, "ttft_ms_p50");
        cJSON_AddItemToArray(a, cJSON_CreateNumber(band->ttft_ms_p50[0]));
        cJSON_AddItemToArray(a, cJSON_CreateNumber(band->ttft_ms_p50[1]));
        cJSON_AddStringToObject(sb, "ttft_ms_p50_is", ttft_p50 < band->ttft_ms_p50[0] ? "below" : ttft_p50 > band->ttft_ms_p50[1] ? "above" : "within");
    }
    return o;
}

cJSON *bench_report_build(const struct bench_results *r)
{
    const int n = r->suite->n, reps = r->params.reps;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "schema_version", BENCH_SCHEMA_VERSION);
    cJSON_AddStringToObject(o, "kind", "tern.bench.suite");
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    cJSON_AddStringToObject(o, "created", when);

    cJSON *metrics = cJSON_CreateObject();
    for (int m = 0; m < BENCH_M_COUNT; m++) cJSON_AddItemToObject(metrics, metric_key[m], metric_pct(r, m, -1));
    cJSON_AddItemToObject(metrics, "ttfa_tokens", ttfa_tokens_pct(r));
    double tps_p50 = cJSON_GetObjectItem(cJSON_GetObjectItem(metrics, "tps"), "p50")->valuedouble;
    double ttft_p50 = cJSON_GetObjectItem(cJSON_GetObjectItem(metrics, "ttft_ms"), "p50")->valuedouble;

    cJSON *hw = bench_hw_json(&r->hw);
    cJSON_AddItemToObject(hw, "profile", profile_json(r, tps_p50, ttft_p50));
    cJSON_AddItemToObject(o, "hardware", hw);

    cJSON *b = cJSON_AddObjectToObject(o, "build");
    cJSON_AddStringToObject(b, "version", tern_version());
    cJSON_AddStringToObject(b, "commit", TERN_BUILD_COMMIT);
    cJSON_AddStringToObject(b, "compiler", TERN_BUILD_COMPILER);
    cJSON_AddStringToObject(b, "flags", TERN_BUILD_FLAGS);
    cJSON_AddStringToObject(b, "kernel_path", r->hw.kernel_isa);
    cJSON_AddStringToObject(b, "attention_kernel", r->prof[TERN_PROF_ATTENTION].kernel);

    cJSON *fp = cJSON_AddObjectToObject(o, "fingerprints");
    add_hex_fp(fp, "model_tensors", r->fp_model);
    add_hex_fp(fp, "tokenizer", r->fp_tokenizer);
    add_hex_fp(fp, "chat_template", r->fp_template);
    add_hex_fp(fp, "suite", r->fp_suite);
    add_hex_fp(fp, "tool_registry", r->fp_tools);
    add_hex_fp(fp, "runner", r->fp_runner);
    cJSON *fd = cJSON_AddObjectToObject(o, "fingerprint_sources");
    char buf[512];
    snprintf(buf, sizeof buf, "SHA-256 of %s bytes %llu..%llu (the GGUF tensor data section: tail -c +%llu FILE | sha256sum)",
             r->model_path, (unsigned long long)r->model_data_offset,
             (unsigned long long)(r->model_data_offset + r->model_data_bytes), (unsigned long long)r->model_data_offset + 1);
    cJSON_AddStringToObject(fd, "model_tensors", buf);
    cJSON_AddStringToObject(fd, "tokenizer", "SHA-256 of the raw bytes of every tokenizer.ggml.* metadata entry, in file order");
    cJSON_AddStringToObject(fd, "chat_template", "SHA-256 of the chat template source the model uses (tern template --source)");
    snprintf(buf, sizeof buf, "SHA-256 of the file %s", r->suite->path);
    cJSON_AddStringToObject(fd, "suite", buf);
    cJSON_AddStringToObject(fd, "tool_registry", "SHA-256 of every prompt's tools array as compact JSON, one per line, in suite order");
    snprintf(buf, sizeof buf, "SHA-256 of the file %s", r->params.runner_path);
    cJSON_AddStringToObject(fd, "runner", buf);

    cJSON *mo = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(mo, "path", r->model_path);
    cJSON_AddStringToObject(mo, "arch", r->info->arch_name);
    cJSON_AddNumberToObject(mo, "weight_bytes", (double)r->info->weight_bytes);
    cJSON_AddStringToObject(mo, "tool_call_format", r->tool_format);
    cJSON *su = cJSON_AddObjectToObject(o, "suite");
    cJSON_AddStringToObject(su, "path", r->suite->path);
    cJSON_AddNumberToObject(su, "prompts", n);

    cJSON *set = cJSON_AddObjectToObject(o, "settings");
    cJSON_AddNumberToObject(set, "threads", r->n_threads);
    cJSON_AddNumberToObject(set, "n_gen", r->params.n_gen);
    cJSON_AddNumberToObject(set, "repetitions", reps);
    cJSON_AddNumberToObject(set, "max_repetitions", r->params.max_reps > reps ? r->params.max_reps : reps);
    if (r->params.max_reps > 0) cJSON_AddNumberToObject(set, "noise_target", r->params.noise_target);
    else cJSON_AddNullToObject(set, "noise_target");
    /* which of them the hardware profile chose (the rest were given by the caller) */
    cJSON *from = cJSON_AddArrayToObject(set, "from_profile");
    static const char *const fk[] = {"threads", "repetitions", "max_repetitions", "noise_target"};
    for (int i = 0; i < 4; i++)
        if (r->from_profile[i]) cJSON_AddItemToArray(from, cJSON_CreateString(fk[i]));
    cJSON_AddNumberToObject(set, "n_ctx", r->n_ctx);
    cJSON_AddNumberToObject(set, "wall_s", r->wall_s);
    cJSON_AddStringToObject(set, "timed", "per prompt and repetition, from an empty KV cache: template_ms (render) + "
                            "tokenizer_ms (encode) + prefill_ms (prompt decode) + first_step_ms (to the first "
                            "sampled token) = ttft_ms; tps = tokens/s after the first of n_gen tokens "
                            "(end-of-generation ignored); ttfa = tokens and ms from the render to the first "
                            "complete valid tool call before end-of-generation");

    int identical = 0;
    cJSON *det = cJSON_AddObjectToObject(o, "determinism");
    cJSON_AddNumberToObject(det, "temperature", 0);
    cJSON_AddNumberToObject(det, "top_p", 1);
    cJSON_AddNumberToObject(det, "threads", r->n_threads);
    cJSON_AddNumberToObject(det, "runs_compared", reps);
    cJSON *mis = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        if (r->runs[i].identical) identical++;
        else cJSON_AddItemToArray(mis, cJSON_CreateNumber(r->suite->prompts[i].line));
    }
    cJSON_AddBoolToObject(det, "identical_tokens", identical == n);
    cJSON_AddItemToObject(det, "differing_prompt_lines", mis);

    cJSON_AddItemToObject(o, "metrics", metrics);
    cJSON *tf = cJSON_AddObjectToObject(o, "ttfa");
    int with_tools = 0, with_call = 0;
    long long valid = 0, invalid = 0;
    for (int i = 0; i < n; i++) {
        with_tools += r->runs[i].has_tools;
        with_call += r->runs[i].ttfa_tokens >= 0;
        valid += r->runs[i].valid_calls;
        invalid += r->runs[i].invalid_calls;
    }
    cJSON_AddNumberToObject(tf, "prompts_with_tools", with_tools);
    cJSON_AddNumberToObject(tf, "prompts_with_valid_call", with_call);
    cJSON_AddNumberToObject(tf, "valid_calls", (double)valid);
    cJSON_AddNumberToObject(tf, "invalid_calls", (double)invalid);
    cJSON_AddItemToObject(o, "noise", noise_json(r));
    cJSON_AddItemToObject(o, "machine_speed", machine_speed_json(r));

    cJSON *bk = cJSON_AddArrayToObject(o, "buckets");
    static const int bucket_ids[] = {512, 1024, 2048, 4096, 0};
    for (int q = 0; q < 5; q++) {
        int cnt = 0;
        for (int i = 0; i < n; i++) cnt += r->runs[i].bucket == bucket_ids[q];
        cJSON *e = cJSON_CreateObject();
        if (bucket_ids[q]) cJSON_AddNumberToObject(e, "max_tokens", bucket_ids[q]);
        else cJSON_AddNullToObject(e, "max_tokens");
        cJSON_AddStringToObject(e, "bucket", q == 0 ? "<=512" : q == 1 ? "513-1024" : q == 2 ? "1025-2048" : q == 3 ? "2049-4096" : ">4096");
        cJSON_AddNumberToObject(e, "prompts", cnt);
        cJSON_AddItemToObject(e, "ttft_ms", metric_pct(r, BENCH_M_TTFT, bucket_ids[q]));
        cJSON_AddItemToObject(e, "prefill_ms", metric_pct(r, BENCH_M_PREFILL, bucket_ids[q]));
        cJSON_AddItemToObject(e, "tps", metric_pct(r, BENCH_M_TPS, bucket_ids[q]));
        cJSON_AddItemToArray(bk, e);
    }

    const struct tern_model_info *in = r->info;
    cJSON *kv = cJSON_AddObjectToObject(o, "kv_cache");
    /* layers that store KV (qwen35's DeltaNet layers and gemma4's shared-KV layers do not); the
     * bytes are the sum over them (layers may differ: gemma4) */
    uint64_t kvb = r->kv_bytes_per_pos * (uint64_t)r->n_ctx;
    cJSON_AddNumberToObject(kv, "layers", in->n_layer_kv);
    cJSON_AddNumberToObject(kv, "kv_heads", in->n_head_kv);
    cJSON_AddNumberToObject(kv, "head_dim", in->head_dim);
    cJSON_AddNumberToObject(kv, "ctx", r->n_ctx);
    cJSON_AddNumberToObject(kv, "bytes", (double)kvb);
    cJSON_AddStringToObject(kv, "precision", "f16");
    snprintf(buf, sizeof buf, "(%d, %d, %d, %d) -> %llu bytes", in->n_layer_kv, in->n_head_kv, in->head_dim,
             r->n_ctx, (unsigned long long)kvb);
    cJSON_AddStringToObject(kv, "log", buf);

    cJSON_AddItemToObject(o, "residency", residency_json(r));

    cJSON *en = cJSON_AddObjectToObject(o, "energy");
    if (r->energy_j >= 0 && r->tokens_generated > 0) {
        cJSON_AddNumberToObject(en, "joules", r->energy_j);
        cJSON_AddNumberToObject(en, "joules_per_100_tokens", r->energy_j * 100.0 / (double)r->tokens_generated);
        cJSON_AddNullToObject(en, "reason");
        cJSON_AddStringToObject(en, "scope", "RAPL package energy over the timed rounds (prefill included, other "
                                "processes on the package included) per 100 generated tokens");
    } else {
        cJSON_AddNullToObject(en, "joules");
        cJSON_AddNullToObject(en, "joules_per_100_tokens");
        cJSON_AddStringToObject(en, "reason", r->energy_reason[0] ? r->energy_reason : "no tokens generated");
    }

    cJSON *pa = cJSON_AddArrayToObject(o, "prompts");
    for (int i = 0; i < n; i++) {
        const struct bench_prompt_run *pr = &r->runs[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "line", r->suite->prompts[i].line);
        cJSON_AddNumberToObject(e, "prompt_tokens", pr->n_tokens);
        cJSON_AddNumberToObject(e, "bucket", pr->bucket);
        cJSON_AddBoolToObject(e, "tools", pr->has_tools);
        for (int m = 0; m < BENCH_M_COUNT; m++) {
            double v;
            if (prompt_median(r, i, m, &v)) cJSON_AddNumberToObject(e, metric_key[m], v);
            else cJSON_AddNullToObject(e, metric_key[m]);
        }
        if (pr->ttfa_tokens >= 0) cJSON_AddNumberToObject(e, "ttfa_tokens", pr->ttfa_tokens);
        else cJSON_AddNullToObject(e, "ttfa_tokens");
        cJSON_AddNumberToObject(e, "valid_calls", pr->valid_calls);
        cJSON_AddNumberToObject(e, "invalid_calls", pr->invalid_calls);
        cJSON_AddStringToObject(e, "tokens_sha256", pr->tokens_sha);
        cJSON_AddBoolToObject(e, "identical", pr->identical);
        if (r->params.html_samples) {
            cJSON *sm = cJSON_AddObjectToObject(e, "samples");
            static const int keep[] = {BENCH_M_TTFT, BENCH_M_TPS};
            for (int q = 0; q < 2; q++) {
                cJSON *a = cJSON_AddArrayToObject(sm, metric_key[keep[q]]);
                for (int k = 0; k < reps; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber(pr->samples[keep[q]][k]));
            }
        }
        cJSON_AddItemToArray(pa, e);
    }
    return o;
}
