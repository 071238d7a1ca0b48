/* bench_run.c — tern_bench_suite_run: timing a suite's prompts the same way every time.
 *
 * Determinism mode: greedy sampling (temperature 0, top-p 1), one thread count for the whole
 * run, every prompt decoded from an empty KV cache (the generator is reset, so no prefix is
 * reused between prompts or repetitions), n_gen tokens per prompt with end-of-generation
 * ignored so every run decodes as many tokens. Every repetition's generated tokens are hashed
 * and compared with the first's: the report says whether they were identical.
 *
 * What is timed, per prompt and repetition (CLOCK_MONOTONIC, consecutive intervals, so
 * TTFT = template_ms + tokenizer_ms + prefill_ms + first_step_ms exactly):
 *   template_ms   rendering the request with the model's chat template
 *   tokenizer_ms  encoding the rendered text
 *   prefill_ms    decoding the prompt tokens (tern_gen_stats.prompt_ms)
 *   first_step_ms from the end of the prefill to the first sampled token (sampling from the
 *                 prefill's logits, the generator's bookkeeping)
 *   tps           steady-state tokens/s after the first token (tern_gen_stats.gen_tps)
 *   ttfa          tokens generated and ms from the start (render) to the piece that completes
 *                 the first valid tool call (the chat room's parser as `tern eval` uses it; the
 *                 call checked against the prompt's tools by the caller's validator, `tern eval`'s
 *                 own); only text before the first end-of-generation token counts.
 * Noise: repetitions are interleaved (round r runs every prompt, in reverse order on odd
 * rounds, so a slow drift of the machine spreads over all prompts), per-prompt medians feed the
 * percentiles, and the report carries the spread (bench_report.c). One untimed run of the first
 * prompt precedes the timed rounds. With max_reps, rounds continue past reps until every
 * prompt's TTFT and TPS medians have an estimated relative standard error <= noise_target
 * (bench_rel_se_median), so a noisy machine pays with time instead of with false alarms; with
 * two runs each at 1 % the 5 % gate sits 3.5 standard errors of their difference away. Forward
 * time per op class (tern_context_profile) is collected over the timed rounds for the residency
 * figures. The machine-speed probe (bench_calib.c, ~40 ms) runs before the first round and after
 * every round, outside the timed prompts: how fast the machine was while this report measured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/sha2.h>

#include "bench/bench.h"
#include "tern_gguf.h"
#include "util/error.h"
#include "util/clock.h"

struct tern_bench_suite_params tern_bench_suite_default_params(void)
{
    /* threads, rounds and noise target: the matched profile's measure section unless set */
    return (struct tern_bench_suite_params){.n_gen = 32, .max_reps = -1, .html_samples = true};
}

static double loadavg1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

struct runner {
    const struct tern_bench_suite_params *p;
    struct tern_model *model;
    struct tern_tokenizer *tok;
    struct tern_chat_template *tmpl;
    struct tern_context *ctx;
    struct tern_sampler *smp;
    struct tern_generator *gen;
    enum tern_toolcall_format fmt;
    int32_t *ids;
    size_t cap_ids;
};

/* What one run of one prompt saw, filled by the callbacks. */
struct one_run {
    struct runner *rn;
    const char *tools_json;
    struct tern_toolcall_parser *tp;
    double t0, t_first;
    int n_tokens, checked;
    bool eog;
    int ttfa_tokens;
    double ttfa_ms;
    int valid, invalid;
    tern_status st;
    struct sha256_ctx h;
};

static void check_calls(struct one_run *o)
{
    int n = tern_toolcall_count(o->tp);
    for (; o->checked < n; o->checked++) {
        const struct tern_toolcall *c = tern_toolcall_get(o->tp, o->checked);
        bool ok = o->rn->p->call_valid(o->tools_json, c->name, c->arguments, o->rn->p->call_valid_user);
        if (ok) o->valid++;
        else o->invalid++;
        if (ok && o->ttfa_tokens < 0) {
            o->ttfa_tokens = o->n_tokens;
            o->ttfa_ms = util_now_ms() - o->t0;
        }
    }
}

static int on_token(int32_t id, void *user)
{
    struct one_run *o = user;
    if (o->n_tokens++ == 0) o->t_first = util_now_ms();
    uint8_t b[4] = {(uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(id >> 16), (uint8_t)(id >> 24)};
    sha256_update(&o->h, 4, b);
    if (!o->eog && tern_token_is_eog(o->rn->tok, id)) {
        /* the answer ends here; what follows (end-of-generation ignored) is filler for TPS */
        o->eog = true;
        if (o->tp && !o->st && !(o->st = tern_toolcall_finish(o->tp, NULL))) check_calls(o);
    }
    return 0;
}

static int on_piece(const char *text, size_t len, void *user)
{
    struct one_run *o = user;
    if (o->eog || !o->tp || o->st) return 0;
    int done = 0;
    if ((o->st = tern_toolcall_feed(o->tp, text, len, &done))) return 1;
    check_calls(o);
    return 0;
}

static tern_status render(struct runner *rn, const struct bench_prompt *bp, char **prompt, size_t *plen)
{
    struct tern_chat_params cp = tern_chat_default_params();
    cp.messages_json = bp->request_json;
    tern_status st = tern_chat_render(rn->tmpl, &cp, prompt, plen);
    return st ? tern_fail_prefix(st, "prompt at line %d: ", bp->line) : TERN_OK;
}

static tern_status tokenize(struct runner *rn, const char *prompt, size_t plen, size_t *n)
{
    /* templates that write the BOS text themselves get no second one (as tern chat / eval) */
    unsigned flags = TERN_TOK_PARSE_SPECIAL;
    const int32_t bos = tern_token_bos(rn->tok);
    size_t bos_len = 0;
    const char *bos_text = bos >= 0 ? tern_token_text(rn->tok, bos, &bos_len) : NULL;
    if (!bos_text || bos_len == 0 || plen < bos_len || memcmp(prompt, bos_text, bos_len))
        flags |= TERN_TOK_ADD_SPECIAL;
    return tern_tokenize(rn->tok, prompt, plen, flags, rn->ids, rn->cap_ids, n);
}

/* One timed run of prompt bp into slot r of pr (r < 0: warm-up, nothing recorded). */
static tern_status run_prompt(struct runner *rn, const struct bench_prompt *bp,
                              struct bench_prompt_run *pr, int r, struct bench_results *res)
{
    struct one_run o = {.rn = rn, .tools_json = bp->tools_json, .ttfa_tokens = -1, .ttfa_ms = -1};
    sha256_init(&o.h);
    char *prompt = NULL;
    size_t plen = 0, n = 0;
    o.t0 = util_now_ms();
    tern_status st = render(rn, bp, &prompt, &plen);
    double t1 = util_now_ms();
    if (!st) st = tokenize(rn, prompt, plen, &n);
    double t2 = util_now_ms();
    free(prompt);
    if (st) return st;
    if (bp->tools_json && (st = tern_toolcall_parser_create(rn->fmt, &o.tp))) return st;
    tern_generator_reset(rn->gen);
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = rn->p->n_gen;
    gp.ignore_eog = true;
    gp.on_token = on_token;
    int32_t keep[4]; /* tool prompts: the format's control-token markup reaches the parser (TTFA) */
    if (bp->tools_json) {
        gp.n_preserve = tern_toolcall_preserved_tokens(rn->tok, rn->fmt, keep, 4);
        gp.preserve = keep;
    }
    struct tern_gen_stats gs;
    double t3 = util_now_ms();
    st = tern_generate(rn->gen, rn->smp, rn->ids, (int)n, &gp, on_piece, &o, &gs);
    if (!st && o.st) st = o.st;
    if (!st && o.tp && !o.eog && !(st = tern_toolcall_finish(o.tp, NULL))) check_calls(&o);
    tern_toolcall_parser_free(o.tp);
    if (st) return tern_fail_prefix(st, "prompt at line %d: ", bp->line);
    if (o.n_tokens != rn->p->n_gen)
        return tern_fail(TERN_ERR_RANGE, "prompt at line %d: generated %d of %d tokens (stopped: %s)",
                         bp->line, o.n_tokens, rn->p->n_gen, tern_gen_stop_name(gs.stop));
    if (r < 0) return TERN_OK;
    uint8_t d[32];
    char hex[65];
    sha256_digest(&o.h, sizeof d, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    double *s[BENCH_M_COUNT];
    for (int m = 0; m < BENCH_M_COUNT; m++) s[m] = pr->samples[m];
    s[BENCH_M_TEMPLATE][r] = t1 - o.t0;
    s[BENCH_M_TOKENIZER][r] = t2 - t1;
    s[BENCH_M_PREFILL][r] = gs.prompt_ms;
    s[BENCH_M_FIRST_STEP][r] = (o.t_first - t3) - gs.prompt_ms;
    s[BENCH_M_TTFT][r] = (t1 - o.t0) + (t2 - t1) + (o.t_first - t3);
    s[BENCH_M_TPS][r] = gs.gen_tps;
    s[BENCH_M_TTFA_MS][r] = o.ttfa_tokens >= 0 ? o.ttfa_ms - (t3 - t2) : -1; /* reset excluded */
    if (!pr->tokens_sha[0]) {
        memcpy(pr->tokens_sha, hex, sizeof hex);
        pr->identical = true;
        pr->ttfa_tokens = o.ttfa_tokens;
        pr->valid_calls = o.valid;
        pr->invalid_calls = o.invalid;
    } else if (strcmp(pr->tokens_sha, hex)) {
        pr->identical = false;
    }
    res->tokens_generated += o.n_tokens;
    res->tokens_prompt += (int64_t)n;
    return TERN_OK;
}

static tern_status fingerprints(struct runner *rn, const struct tern_bench_suite *s,
                                const char *model_path, struct bench_results *res)
{
    const struct tern_gguf *g = tern_model_gguf(rn->model);
    uint64_t off = tern_gguf_data_offset(g), size = tern_gguf_file_size(g);
    if (off > size) return tern_fail(TERN_ERR_FORMAT, "%s: data offset %llu past the end", model_path, (unsigned long long)off);
    res->model_data_offset = off;
    res->model_data_bytes = size - off;
    bench_sha256_hex((const uint8_t *)tern_gguf_file_data(g) + off, size - off, res->fp_model);
    uint8_t d[32];
    tern_status st = tern_tokenizer_fingerprint(rn->model, d);
    if (st) return tern_fail_prefix(st, "tokenizer fingerprint: ");
    for (int i = 0; i < 32; i++) snprintf(res->fp_tokenizer + 2 * i, 3, "%02x", d[i]);
    const char *src = tern_chat_template_source(rn->tmpl);
    bench_sha256_hex(src, strlen(src), res->fp_template);
    if ((st = bench_sha256_file(s->path, 0, -1, res->fp_suite))) return tern_fail_prefix(st, "suite fingerprint: ");
    /* the tool registry: every prompt's tools array (compact JSON), in suite order, one per line */
    struct sha256_ctx h;
    sha256_init(&h);
    for (int i = 0; i < s->n; i++) {
        if (!s->prompts[i].tools_json) continue;
        sha256_update(&h, strlen(s->prompts[i].tools_json), (const uint8_t *)s->prompts[i].tools_json);
        sha256_update(&h, 1, (const uint8_t *)"\n");
    }
    sha256_digest(&h, sizeof d, d);
    for (int i = 0; i < 32; i++) snprintf(res->fp_tools + 2 * i, 3, "%02x", d[i]);
    if ((st = bench_sha256_file(rn->p->runner_path, 0, -1, res->fp_runner)))
        return tern_fail_prefix(st, "runner fingerprint: ");
    return TERN_OK;
}

static int bucket_of(int n)
{
    static const int b[] = {512, 1024, 2048, 4096};
    for (int i = 0; i < 4; i++)
        if (n <= b[i]) return b[i];
    return 0;
}

static void runner_free(struct runner *rn)
{
    tern_generator_free(rn->gen);
    tern_sampler_free(rn->smp);
    tern_context_free(rn->ctx);
    tern_chat_template_free(rn->tmpl);
    tern_tokenizer_free(rn->tok);
    tern_model_free(rn->model);
    free(rn->ids);
}

static void results_free(struct bench_results *res)
{
    free(res->calib_gops);
    if (!res->runs) return;
    for (int i = 0; i < res->suite->n; i++)
        for (int m = 0; m < BENCH_M_COUNT; m++) free(res->runs[i].samples[m]);
    free(res->runs);
}

/* Load, render and tokenize every prompt once (untimed) to size the context and the buckets. */
static tern_status prepare(struct runner *rn, const char *model_path, const struct tern_bench_suite *s,
                           struct bench_results *res)
{
    struct tern_model_params mp = {.prefault = true};
    tern_status st = tern_model_load(model_path, &mp, &rn->model);
    if (!st) st = tern_tokenizer_from_gguf(tern_model_gguf(rn->model), &rn->tok);
    if (!st) st = tern_chat_template_from_gguf(tern_model_gguf(rn->model), &rn->tmpl);
    if (st) return st;
    rn->fmt = tern_toolcall_detect(tern_chat_template_source(rn->tmpl));
    res->info = tern_model_get_info(rn->model);
    res->kv_bytes_per_pos = tern_model_kv_bytes(rn->model, 1);
    if (!(res->runs = calloc((size_t)s->n, sizeof *res->runs))) return tern_fail(TERN_ERR_NOMEM, "bench: out of memory");
    int longest = 0;
    for (int i = 0; i < s->n; i++) {
        struct bench_prompt_run *pr = &res->runs[i];
        for (int m = 0; m < BENCH_M_COUNT; m++)
            if (!(pr->samples[m] = calloc((size_t)(rn->p->max_reps > rn->p->reps ? rn->p->max_reps : rn->p->reps), sizeof(double))))
                return tern_fail(TERN_ERR_NOMEM, "bench: out of memory");
        char *prompt;
        size_t plen, n;
        if ((st = render(rn, &s->prompts[i], &prompt, &plen))) return tern_fail_prefix(st, "%s: ", s->path);
        st = tokenize(rn, prompt, plen, &n);
        if (st == TERN_ERR_RANGE && n > rn->cap_ids) {
            int32_t *grown = realloc(rn->ids, n * sizeof *grown);
            if (!grown) st = tern_fail(TERN_ERR_NOMEM, "bench: out of memory");
            else {
                rn->ids = grown;
                rn->cap_ids = n;
                st = tokenize(rn, prompt, plen, &n);
            }
        }
        free(prompt);
        if (st) return st;
        pr->n_tokens = (int)n;
        pr->bucket = bucket_of((int)n);
        pr->has_tools = s->prompts[i].tools_json != NULL;
        pr->ttfa_tokens = -1;
        if ((int)n > longest) longest = (int)n;
    }
    res->n_ctx = longest + rn->p->n_gen + 1;
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = res->n_ctx;
    cp.n_threads = rn->p->n_threads;
    if ((st = tern_context_create(rn->model, &cp, &rn->ctx))) return st;
    struct tern_sampler_params sp = tern_sampler_default_params(); /* greedy, top-p off */
    sp.temperature = 0;
    sp.top_p = 1;
    if ((st = tern_sampler_create(&sp, tern_model_n_vocab(rn->model), &rn->smp))) return st;
    return tern_generator_create(rn->ctx, rn->tok, &rn->gen);
}

/* Settings left unset (0; max_reps -1) take the matched profile's measure section: on small shared
 * machines a profile measures at 1 thread with rounds until the noise target is met, because the
 * host's placement of two vCPUs moves 2-thread decode by up to 28 % between runs
 * (docs/results/gate-rates-2026-11.md). Then the whole run is checked. */
static tern_status resolve_measure(struct bench_results *res)
{
    struct tern_bench_suite_params *q = &res->params;
    const struct bench_measure *m = &res->profile.measure;
    res->from_profile[0] = q->n_threads == 0;
    res->from_profile[1] = q->reps == 0;
    res->from_profile[2] = q->max_reps < 0 && q->reps == 0; /* -r alone: exactly that many rounds */
    res->from_profile[3] = q->noise_target == 0;
    if (res->from_profile[0]) q->n_threads = m->threads;
    if (q->n_threads <= 0) q->n_threads = res->hw.cpus_online;
    if (res->from_profile[1]) q->reps = m->reps;
    if (q->max_reps < 0) q->max_reps = res->from_profile[2] ? m->max_reps : 0;
    if (res->from_profile[3]) q->noise_target = m->noise_target;
    if (q->reps < 2 || q->reps > 1000) return tern_fail(TERN_ERR_ARG, "bench: reps %d: need 2..1000 (determinism compares two runs)", q->reps);
    if (q->max_reps && (q->max_reps < q->reps || q->max_reps > 1000))
        return tern_fail(TERN_ERR_ARG, "bench: max_reps %d: need reps (%d) .. 1000", q->max_reps, q->reps);
    if (q->max_reps > q->reps && !(q->noise_target > 0 && q->noise_target < 1))
        return tern_fail(TERN_ERR_ARG, "bench: noise target %g: need 0 < target < 1", q->noise_target);
    return TERN_OK;
}

tern_status tern_bench_suite_run(const char *model_path, const struct tern_bench_suite *s,
                                 const struct tern_bench_suite_params *p, char **report_json)
{
    *report_json = NULL;
    if (!p->profiles_path) return tern_fail(TERN_ERR_ARG, "bench: no hardware profile file given");
    if (!p->runner_path) return tern_fail(TERN_ERR_ARG, "bench: no runner path given (its SHA-256 is a fingerprint)");
    if (p->n_gen < 2 || p->n_gen > 1 << 16) return tern_fail(TERN_ERR_ARG, "bench: n_gen %d: need 2..65536 (steady-state tokens/s needs two)", p->n_gen);
    bool any_tools = false;
    for (int i = 0; i < s->n; i++) any_tools |= s->prompts[i].tools_json != NULL;
    if (any_tools && !p->call_valid) return tern_fail(TERN_ERR_ARG, "bench: the suite offers tools but no call validator was given");

    struct bench_results res = {.suite = s, .params = *p, .model_path = model_path, .energy_j = -1};
    bench_hw_detect(&res.hw, true);
    tern_status st = bench_profile_match(p->profiles_path, &res.hw, &res.profile);
    if (st) return st;
    bench_profile_key(&res.profile, &res.hw, res.profile_key, sizeof res.profile_key);
    if ((st = resolve_measure(&res))) return st;
    p = &res.params; /* from here on: the settings the run uses */
    struct runner rn = {.p = p};
    st = prepare(&rn, model_path, s, &res);
    if (!st) st = fingerprints(&rn, s, model_path, &res);
    snprintf(res.tool_format, sizeof res.tool_format, "%s", tern_toolcall_format_name(rn.fmt));
    res.n_threads = p->n_threads;
    if (!st && p->log)
        fprintf(p->log, "bench: %d prompts x %d repetitions, %d tokens each, %d threads, context %d\n",
                s->n, p->reps, p->n_gen, res.n_threads, res.n_ctx);
    if (!st) st = run_prompt(&rn, &s->prompts[0], NULL, -1, &res); /* warm-up */
    struct bench_energy en;
    bench_energy_start(&en);
    res.load_start = loadavg1();
    double t0 = util_now_ms(), c0 = util_process_cpu_ms() / 1e3;
    if (!st) {
        tern_context_set_profile(rn.ctx, true);
        tern_context_profile_reset(rn.ctx);
    }
    const int max_reps = p->max_reps > p->reps ? p->max_reps : p->reps;
    res.stable = max_reps == p->reps;
    if (!st && !(res.calib_gops = malloc(sizeof(double) * (size_t)(max_reps + 1))))
        st = tern_fail(TERN_ERR_NOMEM, "bench: out of memory");
    if (!st) res.calib_gops[res.n_calib++] = bench_calib_probe();
    for (int r = 0; !st && r < max_reps; r++) {
        for (int k = 0; !st && k < s->n; k++) {
            int i = r % 2 ? s->n - 1 - k : k;
            st = run_prompt(&rn, &s->prompts[i], &res.runs[i], r, &res);
        }
        res.reps_done = r + 1;
        if (!st) res.calib_gops[res.n_calib++] = bench_calib_probe();
        /* the worst prompt's estimate, per metric */
        static const int watched[] = {BENCH_M_TTFT, BENCH_M_TPS};
        bool ok = true;
        for (int q = 0; !st && q < 2; q++) {
            double worst = 0;
            for (int i = 0; i < s->n; i++) {
                double se = bench_rel_se_median(res.runs[i].samples[watched[q]], r + 1);
                if (se > worst) worst = se;
            }
            res.rel_se[watched[q]] = worst;
            if (worst > p->noise_target) ok = false;
        }
        if (!st && p->log)
            fprintf(p->log, "bench: round %d/%d done (%.1f s; worst relative SE of a median: TTFT %.1f %%, TPS %.1f %%)\n",
                    r + 1, max_reps, (util_now_ms() - t0) / 1e3, res.rel_se[BENCH_M_TTFT] * 100, res.rel_se[BENCH_M_TPS] * 100);
        if (max_reps > p->reps && r + 1 >= p->reps && ok) {
            res.stable = true;
            break;
        }
    }
    res.params.reps = res.reps_done;
    res.wall_s = (util_now_ms() - t0) / 1e3;
    res.cpu_s = util_process_cpu_ms() / 1e3 - c0;
    res.load_end = loadavg1();
    if (!st) {
        tern_context_profile(rn.ctx, res.prof);
        res.energy_j = bench_energy_joules(&en);
        snprintf(res.energy_reason, sizeof res.energy_reason, "%s", en.reason);
        cJSON *j = bench_report_build(&res);
        if (!j || !(*report_json = cJSON_Print(j))) st = tern_fail(TERN_ERR_NOMEM, "bench: out of memory");
        cJSON_Delete(j);
    }
    results_free(&res);
    runner_free(&rn);
    return st;
}
