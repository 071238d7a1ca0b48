/*
 * tern_bench.h — libtern_bench: measuring tern rather than running a model for a user: the
 * comparison against llama.cpp's reference dumps (`tern probe --ref`, test_parity), the
 * prompt-cache benchmark (`tern cache bench`, `tern bench --prompt-cache`), perplexity and KL
 * divergence (`tern perplexity`), tool-call evaluation (`tern eval`, locally or against an HTTP
 * endpoint) and speed governance (suites, hardware profiles, reports, gates). It lives in
 * src/bench and src/eval, is built on libtern (tern.h) and brings libcurl (remote evaluation)
 * and libyaml (hardware profiles); an application embedding tern does not need it.
 */
#ifndef TERN_BENCH_H
#define TERN_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== reference checks */

/* Compare a model against a llama.cpp reference dump (format: shared/fixtures/README.md §2:
 * <model>.jsonl, with <model>.logits.bin beside it when present). For every sequence the
 * prompt is decoded in one batch with logits for every position; then the reference's greedy
 * tokens are fed one at a time (teacher forcing) and each step is compared with its top-K;
 * finally a free-running greedy continuation is compared token by token for as long as the
 * reference's top-2 margin exceeds 2 x tol. */
struct tern_ref_report {
    int n_seqs;
    int n_vectors;          /* logit vectors compared (prompt positions + greedy steps) */
    double max_abs_top;     /* max |ours - ref| over the reference's top-K entries */
    double mean_abs_top;
    int top_total;          /* reference top-K entries compared */
    int top_agree;          /* ... whose |diff| <= tol and whose id is in our top-K (or within
                               tol of the K-th value) */
    bool has_full;          /* .logits.bin was found and compared */
    double max_abs_full;    /* over the full vectors of .logits.bin */
    double mean_abs_full;
    int greedy_checked;     /* free-running steps where the reference margin > 2 tol */
    int greedy_match;
    int greedy_first_diverge; /* -1 if none (first diverging step where margin allowed a check) */
    double tol;
    bool pass;              /* all top entries within tol, full vectors within tol, greedy ok */
};

/* Run the check; n_threads 0 = all CPUs; tol <= 0 picks the default for the model's weight
 * types (5e-3 for F16/BF16/F32 files, 0.03 for quantized ones). Progress and per-sequence
 * figures are written to log (may be NULL). */
TERN_NODISCARD tern_status tern_ref_check(struct tern_model *m, const char *ref_jsonl, int n_threads, double tol,
                           FILE *log, struct tern_ref_report *out);

/* ===================================================================== prompt-cache benchmark */

/* The three prompt-cache targets (docs/prompt-cache.md), measured on model with n_threads threads:
 * (1) TTFT of a 1024-token shared prefix + 32-token turn, cold vs cache hit; (2) prefix-token hit
 * rate over n_requests requests drawn from 4 system prompts (1-2k tokens) with varied user turns
 * under a budget that holds them; (3) loading a saved 2048-token prefix from disk vs recomputing
 * it. Token ids are seeded pseudo-random (timing does not depend on which ids). Prompts are
 * clipped to the model's training context. Takes minutes on a 0.5B model. */
struct tern_prompt_cache_bench_params {
    int n_threads;       /* 0 = all CPUs */
    int n_requests;      /* requests of measurement (2); 0 = 200 */
    int block_tokens;    /* 0 = 32 */
    int reps;            /* repetitions of each timing (median reported); 0 = 3 */
    const char *tmp_dir; /* where (3) writes its files; NULL = $TMPDIR or /tmp */
};
struct tern_prompt_cache_bench_report {
    int prefix_tokens, turn_tokens;            /* (1) */
    double ttft_cold_ms, ttft_warm_ms;         /* medians; TTFT = prefill + first token */
    double warm_ratio;                         /* warm / cold */
    bool warm_identical;                       /* warm logits == cold logits, bitwise */
    int n_requests;                            /* (2) */
    double hit_rate;                           /* reused system-prompt tokens / system tokens */
    double hit_rate_all;                       /* reused tokens / all prompt tokens */
    uint64_t budget_bytes, evicted_bytes;
    int disk_tokens;                           /* (3) */
    double disk_load_ms, recompute_ms;         /* medians; load = open dir + restore */
    double disk_speedup;                       /* recompute / load */
    bool disk_identical;                       /* logits after load == cold logits, bitwise */
};
struct tern_prompt_cache_bench_params tern_prompt_cache_bench_default_params(void);
TERN_NODISCARD tern_status tern_prompt_cache_bench(struct tern_model *m,
                                    const struct tern_prompt_cache_bench_params *p,
                                    struct tern_prompt_cache_bench_report *out);

/* ===================================================================== perplexity */
/* tern perplexity (src/bench/perplexity.c): llama.cpp's llama-perplexity measurement (commit
 * c392e50, examples/perplexity), and its KL divergence against saved base log-probabilities.
 *
 *     int32_t *ids; size_t n, n_bad;
 *     tern_ppl_tokenize(tok, text, len, &ids, &n, &n_bad);     // as llama-perplexity -f reads
 *     struct tern_ppl_params p = tern_ppl_default_params();  // n_ctx 512 ...
 *     struct tern_ppl_report r;
 *     tern_perplexity(model, tok, ids, n, &p, &r);           // r.ppl, r.ppl_err
 *     p.kl_base_path = "base.kld";                           // later, with a quantized model:
 *     tern_kl_divergence(quant, qtok, "base.kld", &p, &r);   // r.kld.kld ...
 *
 * The text's tokens are cut into chunks of n_ctx; each chunk is decoded alone from an empty
 * cache (its first token replaced by BOS when the tokenizer adds one) and only its second half
 * is scored: the tokens at positions n_ctx/2+1 .. n_ctx-1, each from the logits one position
 * earlier, by log-softmax with the sum of exponentials in double. PPL = exp(mean NLL); its
 * uncertainty is PPL x sqrt(var(NLL) / (count - 1)), as llama.cpp prints it. Rows are scored
 * in parallel but reduced in order, so figures do not depend on the thread count.
 *
 * The base file is llama.cpp's own (--kl-divergence-base), so either program reads the other's:
 * "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk, int32 tokens[n_chunk x n_ctx], then
 * per chunk and scored row nv = 2*((n_vocab+1)/2) + 4 uint16: float scale, float min_log_prob,
 * then log p(token j) ~ min_log_prob + scale x q[j] (q = 0 below max - 16), all little endian.
 * It is written to a temporary name beside the path and renamed when complete. */
struct tern_ppl_report;
typedef void (*tern_ppl_progress_fn)(const struct tern_ppl_report *so_far, void *user);
struct tern_ppl_params {
    int n_ctx;                  /* tokens per chunk (llama-perplexity -c), >= 4; default 512 */
    int n_chunks;               /* at most this many chunks; 0 (default) = all the text holds */
    int n_batch;                /* tokens per forward pass, 1..n_ctx; 0 (default) = min(n_ctx, 512) */
    int n_threads;              /* 0 = online CPUs */
    const char *kl_base_path;   /* tern_perplexity: also write the base file here (NULL = no) */
    tern_ppl_progress_fn progress; /* after every chunk, with the figures so far; may be NULL */
    void *user;
    struct tern_lora *const *lora; /* (n_lora) LoRA adapters attached to the measuring context */
    const float *lora_scales;      /* (n_lora) their scales; NULL = all 1 */
    int n_lora;
};
struct tern_ppl_params tern_ppl_default_params(void);

/* KL divergence of the model (Q) from the base's saved distribution, per scored token, with
 * llama.cpp's summary. "err" fields are uncertainties of the mean (0 for <= 10 tokens). The
 * quantiles are of the per-token values (llama.cpp's linear interpolation). */
struct tern_kld_stats {
    double ppl_base, ppl_base_err;           /* PPL of the base, from the file's log-probs */
    double log_ppl_cor;                      /* correlation of the per-token NLL of Q and base */
    double log_ppl_ratio, log_ppl_ratio_err; /* mean ln(PPL(Q)/PPL(base)) */
    double ppl_ratio, ppl_ratio_err;         /* PPL(Q)/PPL(base) */
    double ppl_diff, ppl_diff_err;           /* PPL(Q)-PPL(base) */
    double kld, kld_err;                     /* mean KL(base || Q), nats */
    double kld_max, kld_p999, kld_p99, kld_median, kld_p10, kld_p5, kld_p1, kld_min;
    double dp, dp_err;                       /* mean of p_Q(token) - p_base(token) */
    double dp_max, dp_p999, dp_p99, dp_p95, dp_p90, dp_p75, dp_median, dp_p25, dp_p10, dp_p5,
        dp_p1, dp_p01, dp_min;
    double dp_rms, dp_rms_err;
    double same_top, same_top_err;           /* fraction of tokens where Q's argmax = base's */
};

struct tern_ppl_report {
    int n_ctx, n_batch;
    int n_chunks;               /* chunks evaluated (so far, in a progress call) */
    int n_chunks_total;         /* chunks that will be evaluated */
    int64_t n_tokens;           /* tokens of the text (or of the base file's chunks) */
    int64_t n_scored;           /* tokens scored so far: n_chunks x (n_ctx - 1 - n_ctx/2) */
    double ppl, ppl_err;
    double seconds;             /* wall time since the first chunk started */
    bool add_bos;               /* each chunk started with BOS */
    bool has_kld;               /* kld is filled (tern_kl_divergence); in a progress call only
                                   the means and their uncertainties, no quantiles */
    struct tern_kld_stats kld;
};

/* The tokens of text as llama-perplexity tokenizes its -f file: one trailing newline dropped,
 * bos/eos as the tokenizer's metadata says, control-token text not recognized, and (byte-level
 * BPE vocabularies) every byte that is not part of well-formed UTF-8 read as U+FFFD, as
 * llama.cpp's tokenizer reads it (tern_tokenize itself keeps such bytes). *ids is malloc'ed
 * (caller frees); *n_invalid (may be NULL) gets the count of such bytes. */
TERN_NODISCARD tern_status tern_ppl_tokenize(struct tern_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, size_t *n, size_t *n_invalid);
/* Perplexity of m over tokens[0..n) (tern_ppl_tokenize's; tok is the model's tokenizer, for its
 * BOS). Fewer than 2 x n_ctx tokens is refused (TERN_ERR_RANGE, naming both counts), as is a
 * tokenizer that appends EOS. With p->kl_base_path the base file is written too. */
TERN_NODISCARD tern_status tern_perplexity(struct tern_model *m, struct tern_tokenizer *tok, const int32_t *tokens,
                            size_t n, const struct tern_ppl_params *p, struct tern_ppl_report *out);
/* KL divergence of m from the base file at base_path (written by tern_perplexity or by
 * llama-perplexity --kl-divergence-base): its chunks and tokens are decoded again (n_ctx is
 * the file's; p->n_ctx is ignored, p->n_chunks limits the chunks), and out gets Q's PPL and
 * the kld statistics. A file of another vocabulary size, or cut short, is refused (naming
 * the sizes). */
TERN_NODISCARD tern_status tern_kl_divergence(struct tern_model *m, struct tern_tokenizer *tok,
                               const char *base_path, const struct tern_ppl_params *p,
                               struct tern_ppl_report *out);

/* ===================================================================== evaluation */
/* tern eval (src/eval): tool-call quality and speed of a model on a dataset of cases (docs/eval.md
 * documents the format and every scoring rule).
 *
 *     struct tern_eval_set *s;
 *     tern_eval_set_load("cases.jsonl", &s);                 // every malformed line: FILE:LINE
 *     struct tern_eval_run *r;
 *     tern_eval_run_create(s, &r);
 *     tern_eval_local(r, "model.gguf", &lp, NULL, tern_eval_set_count(s), NULL, NULL);
 *     char *report; tern_eval_report_json(r, &report);      // overall and per slice
 *
 * Any runner may record answers (tern_eval_record): the scores depend only on the cases and
 * the recorded answers. */
struct tern_eval_set;
struct tern_eval_run;

TERN_NODISCARD tern_status tern_eval_set_load(const char *path, struct tern_eval_set **out);
void tern_eval_set_free(struct tern_eval_set *s);
int tern_eval_set_count(const struct tern_eval_set *s);
const char *tern_eval_case_id(const struct tern_eval_set *s, int i);
/* How many calls case i expects (0: a text answer or a refusal). */
int tern_eval_case_n_expected(const struct tern_eval_set *s, int i);
/* {"messages": [...], "tools": [...]}: the request a runner sends for case i. */
const char *tern_eval_case_request(const struct tern_eval_set *s, int i);

/* Cases from a corpus file (tern corpus toolcalls): one per assistant message, expecting the
 * calls it makes (none for answers and refusals); slice = the conversation's kind; private =
 * its secrets. Written to out_path atomically; *n_cases may be NULL. */
TERN_NODISCARD tern_status tern_eval_cases_from_corpus(const char *corpus_path, const char *out_path,
                                        int64_t *n_cases);

TERN_NODISCARD tern_status tern_eval_run_create(const struct tern_eval_set *s, struct tern_eval_run **out);
void tern_eval_run_free(struct tern_eval_run *r);

struct tern_eval_call_in {
    const char *name;
    const char *arguments;   /* JSON text of the arguments object, as received */
};
struct tern_eval_answer {
    const char *content;                 /* the answer's text (NULL = "") */
    const struct tern_eval_call_in *calls;
    int n_calls;
    int n_malformed;                     /* tool-call attempts that did not parse */
    int n_tokens;                        /* tokens generated */
    int n_prompt;                        /* prompt tokens (0 = unknown): the report's length buckets */
    double ms;                           /* the whole case */
    int ttfa_tokens;                     /* tokens to the first complete valid call; -1 = none */
    double ttfa_ms;
    const char *error;                   /* the runner failed on this case; NULL = answered */
    const char *request_id;              /* or NULL */
};
/* Record (copy) the answer to case i, replacing an earlier one. */
TERN_NODISCARD tern_status tern_eval_record(struct tern_eval_run *r, int i, const struct tern_eval_answer *a);
/* The scores of the recorded cases as JSON text (malloc'ed). */
TERN_NODISCARD tern_status tern_eval_report_json(const struct tern_eval_run *r, char **out);
/* Tokens of the recorded answer to case i; -1 when it has none or the runner failed on it. */
int tern_eval_answer_tokens(const struct tern_eval_run *r, int i);
/* 1 when the answer to case i covers the calls the case expects (each matched by a call to the
 * same tool with every schema-required argument at the expected value, lax rule; a case that
 * expects none: no call made), 0 when not, -1 when it has no answer (src/eval/eval_cover.c). */
int tern_eval_answer_covers(const struct tern_eval_run *r, int i);
/* Every recorded answer as one JSON line (id, content, tool_calls, tokens, ms, ttfa, error). */
TERN_NODISCARD tern_status tern_eval_outputs_write(const struct tern_eval_run *r, FILE *f);

/* Record every answer of an outputs file (tern_eval_outputs_write's lines) into r: merging the
 * shards of a run, or re-grading one. A line naming a case not in the set, or one already
 * recorded, is an error naming FILE:LINE. */
TERN_NODISCARD tern_status tern_eval_read_outputs(struct tern_eval_run *r, const char *path);
/* Cases of the set without an answer; *first = the first one's index (-1 if none). */
int tern_eval_run_missing(const struct tern_eval_run *r, int *first);
/* 0 when two runs of the same set hold the same answers (content, calls, token counts; failed
 * cases compare by having failed), else 1 + the index of the first case that differs. */
int tern_eval_runs_differ(const struct tern_eval_run *a, const struct tern_eval_run *b);

struct tern_eval_local_params {
    int n_ctx;        /* 0 = min(model's training context, 4096) */
    int n_threads;    /* 0 = online CPUs */
    int max_tokens;   /* per answer; default 512 */
    bool constrained; /* tool calls constrained by the case's tools (a lazy tool-call grammar,
                         tool_choice auto, in the template's call format) */
    /* LoRA adapters (llama.cpp's GGUF) on the model, at scales (NULL = 1); the first one with a
     * chat template (tern_lora_chat_template) renders the cases instead of the model's own */
    const char *const *lora_paths;
    const float *lora_scales;
    int n_lora;
};
struct tern_eval_local_params tern_eval_local_default_params(void);
typedef void (*tern_eval_progress_fn)(int done, int total, void *user);
/* Answer the cases which[0..n_which) (NULL = 0..n_which-1) with the model at path, greedily.
 * A case the model cannot answer (its prompt exceeds the context) is recorded as an error. */
TERN_NODISCARD tern_status tern_eval_local(struct tern_eval_run *r, const char *model_path,
                            const struct tern_eval_local_params *p, const int *which, int n_which,
                            tern_eval_progress_fn progress, void *user);

struct tern_eval_http_params {
    const char *endpoint;     /* base URL of an OpenAI-compatible API: http://HOST:PORT/v1 */
    const char *api_key;      /* sent as Authorization: Bearer; NULL = none */
    const char *model;        /* the request's "model"; NULL = "default" */
    int concurrency;          /* requests in flight (1..256); default 1 */
    int timeout_s;            /* per request; default 120 */
    int max_tokens;           /* per answer; default 512 */
};
struct tern_eval_http_params tern_eval_http_default_params(void);
/* Answer the cases which[0..n_which) by streamed chat completions to an endpoint (temperature 0,
 * no retries). A case whose request fails (transport, timeout, an HTTP error status, a stream
 * cut short) is recorded with that error and counted in *n_failed (may be NULL); the return
 * value is for failures of the runner itself. */
TERN_NODISCARD tern_status tern_eval_http(struct tern_eval_run *r, const struct tern_eval_http_params *p,
                           const int *which, int n_which, tern_eval_progress_fn progress,
                           void *user, int *n_failed);

/* Does arguments (JSON text) validate against the parameters schema of the tool named name in
 * tools_json (a tools array as a request carries it)? The validator of the scores below ("invalid
 * calls"); why (may be NULL) gets the reason when not. */
bool tern_eval_call_valid(const char *tools_json, const char *name, const char *arguments,
                          char *why, size_t why_len);

/* ===================================================================== speed governance */
/* tern bench --suite / tern gate / tern bless (src/bench; docs/bench-and-gate.md "Speed governance"
 * documents the report schema, configs/hardware_profiles.yaml and the gate).
 *
 *     struct tern_bench_suite *s;
 *     tern_bench_suite_load("bench/suites/toolcalls.jsonl", &s);   // bad lines: FILE:LINE
 *     struct tern_bench_suite_params p = tern_bench_suite_default_params();
 *     p.profiles_path = "configs/hardware_profiles.yaml"; p.runner_path = "/proc/self/exe";
 *     p.call_valid = my_validator;                  // e.g. around tern_eval_call_valid
 *     char *report; tern_bench_suite_run("model.gguf", s, &p, &report);    // JSON text
 *     tern_bench_gate("blessed.json", "current.json", &gp, &verdict);
 *
 * A report is an instrument: every fingerprint is computed or the run fails. */
/* SHA-256 of a whole file as 64 lower-case hex digits and a NUL, as reports fingerprint files
 * (the same as `sha256sum`); an unreadable file fails naming it. */
TERN_NODISCARD tern_status tern_sha256_file(const char *path, char hex[65]);
struct tern_bench_suite;
TERN_NODISCARD tern_status tern_bench_suite_load(const char *path, struct tern_bench_suite **out);
void tern_bench_suite_free(struct tern_bench_suite *s);
int tern_bench_suite_count(const struct tern_bench_suite *s);

/* Is a completed tool call valid for the prompt's tools? (TTFA counts the first valid one.) */
typedef bool (*tern_bench_call_valid_fn)(const char *tools_json, const char *name,
                                         const char *arguments, void *user);
struct tern_bench_suite_params {
    /* n_threads, reps, max_reps and noise_target left at their defaults take the matched hardware
     * profile's `measure` section (its own defaults: every CPU, 3 rounds, fixed, 1 %) */
    int n_threads;              /* 0 = the profile's; one fixed count for the whole run */
    int n_gen;                  /* tokens generated per prompt (end-of-generation ignored, so
                                   every run decodes as many); default 32 */
    int reps;                   /* timed repetitions of every prompt, interleaved; >= 2 (the
                                   determinism check compares them); 0 = the profile's */
    int max_reps;               /* > reps: keep adding rounds (up to max_reps) until the
                                   estimated relative standard error of every prompt's TTFT and
                                   TPS median is <= noise_target; 0 = reps (fixed count); -1
                                   (default) = the profile's, or 0 when reps was set */
    double noise_target;        /* with max_reps; 0 = the profile's */
    const char *profiles_path;  /* configs/hardware_profiles.yaml (required) */
    const char *runner_path;    /* the program running the suite: its SHA-256 is the runner
                                   fingerprint (required; "/proc/self/exe" works) */
    tern_bench_call_valid_fn call_valid; /* required when any prompt offers tools */
    void *call_valid_user;
    bool html_samples;          /* keep every repetition's sample in the report (default true) */
    FILE *log;                  /* progress lines, or NULL */
};
struct tern_bench_suite_params tern_bench_suite_default_params(void);
/* Run the suite on the model at model_path (greedy: temperature 0, top-p 1) and write the report
 * as JSON text into *report_json (malloc'ed; caller frees). */
TERN_NODISCARD tern_status tern_bench_suite_run(const char *model_path, const struct tern_bench_suite *s,
                                 const struct tern_bench_suite_params *p, char **report_json);

/* Read a report file and check it against the schema (schema_version, hardware.profile,
 * fingerprints, determinism, p50 <= p90 <= p95 <= p99 per metric ...): errors name the file and
 * the key. */
TERN_NODISCARD tern_status tern_bench_report_check_file(const char *path);
/* A report (JSON text, checked like a file; name is used in errors) as one self-contained HTML
 * page (inline SVG, no network): TTFT and TPS distributions, per-bucket charts, residency.
 * *html malloc'ed; caller frees. */
TERN_NODISCARD tern_status tern_bench_report_html(const char *report_json, const char *name, char **html);
/* The machine as a report's "hardware" object, matched against the profile file (JSON text,
 * malloc'ed). */
TERN_NODISCARD tern_status tern_bench_hardware_json(const char *profiles_path, bool measure_bandwidth, char **json);
/* Check a hardware profile file (every profile; FILE:LINE on errors). */
TERN_NODISCARD tern_status tern_bench_profiles_check(const char *path, int *n_profiles);

/* Batch policy (tern bench --batch-policy): decode tokens/s and p95 step time for 1..4
 * sequences at once through the batcher; offline = the batch of 2..4 with the most tokens/s
 * among those with tokens/s >= (1 + min_tps_gain) x batch 1's and a p95 step time < (1 +
 * max_p95_penalty) x batch 1's (the matched profile's thresholds), else 1. Interactive is 1. */
struct tern_bench_batch_point {
    int batch;
    double tps, p95_step_ms;     /* medians over the repetitions */
    double tps_gain, p95_penalty; /* relative to batch 1 */
    bool qualifies;
};
struct tern_bench_batch_policy {
    struct tern_bench_batch_point points[4];
    int offline;
    int n_threads;
    double min_tps_gain, max_p95_penalty;
    char profile_name[64];
    char profile_source[512];    /* FILE:LINE of the matched profile */
};
TERN_NODISCARD tern_status tern_bench_batch_policy(const char *model_path, const char *profiles_path, int n_threads,
                                    int n_gen, int reps, struct tern_bench_batch_policy *out);
/* Record offline in the profile at source (FILE:LINE, as tern_bench_batch_policy gives it): its
 * batch_policy.offline line is rewritten in place, the file re-read before it replaces the old. */
TERN_NODISCARD tern_status tern_bench_profile_set_offline(const char *source, int offline);

enum tern_gate_verdict {
    TERN_GATE_PASS = 0,         /* no metric past its limit */
    TERN_GATE_FAIL = 1,         /* a regression past a limit */
    TERN_GATE_REFUSED = 2,      /* different hardware profiles (or suites): not comparable */
};
struct tern_bench_gate_params {
    bool allow_cross_hw;        /* compare across hardware profiles anyway (flagged in the table) */
    bool raw;                   /* gate TTFT / TPS as measured, without allowing for the machine's
                                   speed during each report (its machine_speed probes) */
    FILE *out;                  /* the table of every metric, its change and its limit; or NULL */
};
/* Compare current against baseline with the baseline's limits (its hardware profile's gate).
 * A malformed report is an error naming the file and key; a refusal is a verdict, not an error. */
TERN_NODISCARD tern_status tern_bench_gate(const char *baseline_path, const char *current_path,
                            const struct tern_bench_gate_params *p, enum tern_gate_verdict *verdict);

/* The quality half of the gate (src/eval/eval_gate.c): two `tern eval --json` reports of the
 * same dataset; FAIL when strict F1 drops by more than f1_drop_max or leaked / failed cases grow,
 * REFUSED for different datasets or case counts. Prints its table to out (may be NULL). */
struct tern_eval_gate_params {
    double f1_drop_max; /* default 0.01 */
    FILE *out;
};
struct tern_eval_gate_params tern_eval_gate_default_params(void);
TERN_NODISCARD tern_status tern_eval_gate(const char *baseline_path, const char *current_path,
                           const struct tern_eval_gate_params *p, enum tern_gate_verdict *verdict);

#ifdef __cplusplus
}
#endif
#endif /* TERN_BENCH_H */
