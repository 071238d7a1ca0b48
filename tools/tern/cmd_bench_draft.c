/* cmd_bench_draft.c — `tern bench --draft SRC`: speculative decoding beside plain decoding of the
 * same prompts, in one run.
 *
 * For each prompt (four built in — a story opening, text that repeats itself, a tool-call
 * conversation rendered with the model's own chat template, code — plus any --prompt-file), the
 * target generates -n tokens plainly and with the draft, alternating, -r times each after one
 * untimed run of each. Timed: what tern_generate reports as gen_tps — every token after the
 * first, so the prompt (decoded identically either way) is excluded, while everything
 * speculation costs (the drafter catching up on the prompt, drafting, verifying, rolling back)
 * is included. Reported per prompt: medians of plain and speculative tokens/s and their ratio,
 * the acceptance statistics of the median speculative run, and whether the token streams were
 * identical (always expected at temperature 0). First, what decides whether speculation can pay
 * at all: the time of one target pass over b = 2..9 tokens with logits for every row, plain and
 * with exact batches, against a one-token step (medians; the JSON array ends with an object
 * holding them). The load average is printed with the results: other processes on the machine
 * move every column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_draft.h"
#include "cli_json.h"

#define BD_MAX_REPS 16
#define BD_MAX_PROMPTS 20

static const char *const story_prompt =
    "Once upon a time, in a small village by the sea, there lived an old fisherman named Tomas. "
    "Every morning he rowed out before sunrise, and every evening he told the children";
static const char *const repeat_prompt =
    "Inventory list, copied three times:\n"
    "- 12 red apples, 4 green pears, 7 yellow lemons, 2 bags of flour\n"
    "- 12 red apples, 4 green pears, 7 yellow lemons, 2 bags of flour\n"
    "- 12 red apples, 4 green pears, 7 yellow lemons, 2 bags of flour\n"
    "Copy it once more:\n- 12 red";
static const char *const code_prompt =
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n"
    "        return n\n    a, b = 0, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n"
    "    return b\n\n\ndef fibonacci_list(n):\n    \"\"\"Return the first n Fibonacci numbers.\"\"\"\n";
/* An OpenAI-style conversation with a tool result whose values the answer should repeat. */
static const char *const tool_conv =
    "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Current weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, "
    "\"required\": [\"city\"]}}}],"
    "\"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"},"
    "{\"role\": \"user\", \"content\": \"What is the weather in Saint-Jean-de-Luz right now? Use celsius.\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": "
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Saint-Jean-de-Luz\", \"unit\": \"celsius\"}}}]},"
    "{\"role\": \"tool\", \"name\": \"get_weather\", \"content\": \"{\\\"city\\\": \\\"Saint-Jean-de-Luz\\\", "
    "\\\"temperature\\\": 17.5, \\\"unit\\\": \\\"celsius\\\", \\\"conditions\\\": \\\"light rain, wind from the "
    "south-west at 24 km/h\\\", \\\"humidity\\\": 81}\"},"
    "{\"role\": \"user\", \"content\": \"And in Saint-Jean-Pied-de-Port?\"}]}";

struct bd_prompt {
    char name[64];
    int32_t *ids;
    int n;
};

struct bd_run {
    double tps;
    struct tern_gen_stats st;
};

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Tokens of text (malloc'ed), or NULL with a message. */
static int32_t *bd_tokenize(struct tern_tokenizer *tk, const char *text, size_t len, unsigned flags,
                            int *n)
{
    size_t cap = len + 16, got = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    tern_status st = ids ? tern_tokenize(tk, text, len, flags, ids, cap, &got) : TERN_ERR_NOMEM;
    if (st || got == 0) {
        if (st) cli_report("bench", st);
        else fprintf(stderr, "tern bench: a prompt is empty after tokenization\n");
        free(ids);
        return NULL;
    }
    *n = (int)got;
    return ids;
}

/* The tool-call conversation through the model's own template. */
static int32_t *bd_tool_prompt(const struct tern_model *m, struct tern_tokenizer *tk, int *n)
{
    struct tern_chat_template *t = NULL;
    tern_status st = tern_chat_template_from_gguf(tern_model_gguf(m), &t);
    if (st) {
        cli_report("bench", st);
        return NULL;
    }
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = tool_conv; /* an OpenAI request body: messages and tools */
    p.now_unix = 0;
    char *text = NULL;
    size_t len = 0;
    st = tern_chat_render(t, &p, &text, &len);
    tern_chat_template_free(t);
    if (st) {
        cli_report("bench", st);
        return NULL;
    }
    int32_t *ids = bd_tokenize(tk, text, len, TERN_TOK_PARSE_SPECIAL, n);
    free(text);
    return ids;
}

/* Median time of one target pass over b tokens after `depth` cached ones, logits for every row
 * (what a verify pass computes), with or without exact batches. */
static double bd_pass_ms(struct tern_context *ctx, const int32_t *toks, int depth, int b, bool exact,
                         int reps)
{
    double t[BD_MAX_REPS + 1];
    if (reps > BD_MAX_REPS) reps = BD_MAX_REPS;
    tern_context_set_exact_batches(ctx, exact);
    for (int r = 0; r <= reps; r++) { /* run 0 is the warm-up */
        tern_status_ignore(tern_kv_truncate(ctx, depth));
        const double t0 = cli_now_ms();
        tern_status st = tern_decode(ctx, toks + depth, b, depth, b > 1 ? TERN_LOGITS_ALL : TERN_LOGITS_LAST);
        t[r] = st ? -1 : cli_now_ms() - t0;
    }
    tern_context_set_exact_batches(ctx, false);
    qsort(t + 1, (size_t)reps, sizeof(double), cmp_double);
    return t[1 + reps / 2];
}

struct bd_out {
    int32_t *tok;
    int n, cap;
};
static int bd_on_token(int32_t id, void *user)
{
    struct bd_out *o = user;
    if (o->n < o->cap) o->tok[o->n] = id;
    o->n++;
    return 0;
}

/* One generation from an empty cache; the tokens go to out. */
static int bd_generate(struct tern_generator *g, struct tern_sampler *s, struct tern_draft *d,
                       const struct bd_prompt *p, int n_gen, struct bd_out *out, struct bd_run *r)
{
    tern_status st = tern_generator_set_draft(g, d);
    if (st) return cli_report("bench", st);
    tern_generator_reset(g);
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = n_gen;
    gp.ignore_eog = true; /* the same number of tokens in every run */
    gp.on_token = bd_on_token;
    out->n = 0;
    if ((st = tern_generate(g, s, p->ids, p->n, &gp, NULL, out, &r->st))) return cli_report("bench", st);
    r->tps = r->st.gen_tps;
    return 0;
}

int cli_bench_draft(const char *model, const struct cli_draft_opts *dro, int threads, int n_gen,
                    int reps, const struct tern_sampler_params *sp, const char *const *prompt_files,
                    int n_files, double layer_scale, int widen_ffn, bool json)
{
    char scaled[4096], widened[4096];
    if (layer_scale > 0) {
        int rc = cli_model_scaled(model, layer_scale, scaled, sizeof scaled);
        if (rc) return rc;
        model = scaled;
    }
    if (widen_ffn > 1) {
        int rc = cli_model_widened(model, widen_ffn, widened, sizeof widened);
        if (rc) return rc;
        model = widened;
    }
    if (reps > BD_MAX_REPS) reps = BD_MAX_REPS;
    struct tern_model *m = NULL;
    struct tern_tokenizer *tk = NULL;
    struct tern_context *ctx = NULL;
    struct tern_generator *g = NULL;
    struct tern_sampler *smp = NULL;
    struct tern_draft *d = NULL;
    struct bd_prompt prompts[BD_MAX_PROMPTS];
    int np = 0, rc = CLI_EXIT_OK;
    struct bd_out a = {0}, b = {0};
    tern_status st = tern_model_load(model, &(struct tern_model_params){.prefault = true}, &m);
    if (!st) st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tk);
    if (st) {
        rc = cli_report("bench", st);
        goto done;
    }
    const struct { const char *name, *text; } builtin[] = {
        {"story", story_prompt}, {"repeat", repeat_prompt}, {"code", code_prompt}};
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        snprintf(prompts[np].name, sizeof prompts[np].name, "%s", builtin[i].name);
        if (!(prompts[np].ids = bd_tokenize(tk, builtin[i].text, strlen(builtin[i].text), TERN_TOK_ADD_SPECIAL, &prompts[np].n))) {
            rc = CLI_EXIT_FAIL;
            goto done;
        }
        np++;
        if (i == 0) { /* the tool conversation second, as in docs/results/speculative-2026-11.md */
            snprintf(prompts[np].name, sizeof prompts[np].name, "toolcall");
            if (!(prompts[np].ids = bd_tool_prompt(m, tk, &prompts[np].n))) {
                rc = CLI_EXIT_FAIL;
                goto done;
            }
            np++;
        }
    }
    for (int f = 0; f < n_files && np < BD_MAX_PROMPTS; f++) {
        size_t len;
        char *text = cli_read_file(prompt_files[f], &len);
        if (!text) {
            fprintf(stderr, "tern bench: cannot read prompt file '%s'\n", prompt_files[f]);
            rc = CLI_EXIT_FAIL;
            goto done;
        }
        const char *base = strrchr(prompt_files[f], '/');
        snprintf(prompts[np].name, sizeof prompts[np].name, "%s", base ? base + 1 : prompt_files[f]);
        prompts[np].ids = bd_tokenize(tk, text, len, TERN_TOK_ADD_SPECIAL, &prompts[np].n);
        free(text);
        if (!prompts[np].ids) {
            rc = CLI_EXIT_FAIL;
            goto done;
        }
        np++;
    }
    int longest = 0;
    for (int i = 0; i < np; i++) longest = prompts[i].n > longest ? prompts[i].n : longest;
    const int n_ctx = longest + n_gen + 16;
    struct tern_context_params cp = {.n_ctx = n_ctx, .n_threads = threads};
    if ((st = tern_context_create(m, &cp, &ctx)) || (st = tern_generator_create(ctx, tk, &g)) ||
        (st = tern_sampler_create(sp, tern_model_n_vocab(m), &smp))) {
        rc = cli_report("bench", st);
        goto done;
    }
    if ((rc = cli_draft_create("bench", dro, m, n_ctx, threads, json ? NULL : stdout, &d))) goto done;
    a.cap = b.cap = n_gen;
    a.tok = malloc(sizeof(int32_t) * (size_t)n_gen + 1);
    b.tok = malloc(sizeof(int32_t) * (size_t)n_gen + 1);
    if (!a.tok || !b.tok) {
        fprintf(stderr, "tern bench: out of memory\n");
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    const char *mbase = strrchr(model, '/');
    mbase = mbase ? mbase + 1 : model;
    if (!json) {
        printf("model %s, draft %s (%s), %d threads, -n %d, %d repetitions, temperature %g\n\n", mbase,
               dro->source, tern_draft_kind(d), threads, n_gen, reps, (double)sp->temperature);
    } else {
        printf("[");
    }
    /* what a verify pass costs against a one-token step, by size (depth: the first prompt) */
    double vc[2][10] = {{0}};
    {
        const int depth = prompts[0].n;
        int32_t toks[512];
        for (int i = 0; i < depth + 9 && i < 512; i++) toks[i] = i < depth ? prompts[0].ids[i] : prompts[0].ids[i % depth];
        tern_status_ignore(tern_kv_truncate(ctx, 0));
        if (depth + 9 <= 512 && !(st = tern_decode(ctx, toks, depth, 0, TERN_LOGITS_NONE))) {
            for (int ex = 0; ex < 2; ex++)
                for (int bsz = 1; bsz <= 9; bsz++) vc[ex][bsz] = bd_pass_ms(ctx, toks, depth, bsz, ex, reps * 3);
        }
        tern_generator_reset(g);
    }
    if (!json) {
        printf("verify pass of b tokens (logits for each) / one-token step, at depth %d:", prompts[0].n);
        for (int bsz = 2; bsz <= 9; bsz++) printf(" b=%d %.2f", bsz, vc[0][bsz] / vc[0][1]);
        printf("\nwith exact batches:");
        for (int bsz = 2; bsz <= 9; bsz++) printf(" b=%d %.2f", bsz, vc[1][bsz] / vc[0][1]);
        printf("  (one-token step %.2f ms; %s)\n\n", vc[0][1], tern_model_batch_invariant(m) ?
               "this model is batch-invariant on this CPU: greedy verification needs no exact batches" :
               "greedy verification runs with exact batches");
        printf("| prompt | tokens | plain t/s | spec t/s | speed-up | accepted | per round | rollback p50/p95 | "
               "draft ms | verify ms | plain steps | same output |\n"
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    }
    for (int pi = 0; pi < np && !rc; pi++) {
        struct bd_run plain[BD_MAX_REPS], spec[BD_MAX_REPS], scratch;
        bool same = true;
        /* one untimed run of each, then alternate so both see the same machine */
        if ((rc = bd_generate(g, smp, NULL, &prompts[pi], n_gen, &a, &scratch)) ||
            (rc = bd_generate(g, smp, d, &prompts[pi], n_gen, &b, &scratch)))
            break;
        for (int r = 0; r < reps && !rc; r++) {
            if ((rc = bd_generate(g, smp, NULL, &prompts[pi], n_gen, &a, &plain[r])) ||
                (rc = bd_generate(g, smp, d, &prompts[pi], n_gen, &b, &spec[r])))
                break;
            same = same && a.n == b.n && !memcmp(a.tok, b.tok, sizeof(int32_t) * (size_t)(a.n < a.cap ? a.n : a.cap));
        }
        if (rc) break;
        double pt[BD_MAX_REPS], stt[BD_MAX_REPS];
        for (int r = 0; r < reps; r++) {
            pt[r] = plain[r].tps;
            stt[r] = spec[r].tps;
        }
        qsort(pt, (size_t)reps, sizeof(double), cmp_double);
        qsort(stt, (size_t)reps, sizeof(double), cmp_double);
        const double pmed = pt[reps / 2], smed = stt[reps / 2];
        const struct tern_gen_stats *ss = &spec[0].st; /* the run whose speed is the median */
        for (int r = 0; r < reps; r++)
            if (spec[r].tps == smed) ss = &spec[r].st;
        const char *same_s = sp->temperature == 0.0f ? (same ? "yes" : "NO") : "n/a (sampled)";
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cli_json_str(o, "model_filename", model);
            cli_json_str(o, "draft", dro->source);
            cli_json_str(o, "draft_kind", tern_draft_kind(d));
            cli_json_str(o, "prompt", prompts[pi].name);
            cli_json_int(o, "n_prompt", prompts[pi].n);
            cli_json_int(o, "n_gen", n_gen);
            cli_json_int(o, "n_threads", threads);
            cli_json_num(o, "plain_ts", pmed);
            cli_json_num(o, "spec_ts", smed);
            cli_json_num(o, "speedup", smed / pmed);
            cJSON *ps = cli_json_arr(o, "plain_samples_ts"), *sps = cli_json_arr(o, "spec_samples_ts");
            for (int r = 0; r < reps; r++) {
                cli_json_num(ps, NULL, plain[r].tps);
                cli_json_num(sps, NULL, spec[r].tps);
            }
            if (sp->temperature == 0.0f) cli_json_bool(o, "identical", same);
            cli_draft_json_stats(o, d, ss);
            cli_json_str(o, "timed", "tokens after the first (prompt excluded; drafting, verifying, rollback included)");
            if ((rc = cli_json_emit("bench", stdout, o, false, pi ? ",\n  " : "\n  ", ""))) break;
        } else {
            printf("| %s | %d+%d | %.2f | %.2f | %.2fx | %.1f %% | %.2f | %.0f / %.0f %% | %.1f | %.1f | %d | %s |\n",
                   prompts[pi].name, prompts[pi].n, n_gen, pmed, smed, smed / pmed,
                   100.0 * ss->spec_accept_rate, ss->spec_mean_accepted, 100.0 * ss->spec_rollback_p50,
                   100.0 * ss->spec_rollback_p95, ss->spec_draft_ms, ss->spec_verify_ms,
                   ss->spec_plain_steps, same_s);
        }
        fflush(stdout);
    }
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0) load[0] = -1;
    if (json && !rc) {
        cJSON *o = cJSON_CreateObject();
        cli_json_str(o, "model_filename", model);
        cli_json_bool(o, "batch_invariant", tern_model_batch_invariant(m));
        cJSON *arr = cli_json_arr(o, "verify_cost");
        for (int bsz = 1; bsz <= 9; bsz++) {
            cJSON *e = cli_json_obj(arr, NULL);
            cli_json_int(e, "b", bsz);
            cli_json_num(e, "ms", vc[0][bsz]);
            cli_json_num(e, "exact_ms", vc[1][bsz]);
        }
        rc = cli_json_emit("bench", stdout, o, false, np ? ",\n  " : "\n  ", "");
    }
    if (json) printf("\n]\n");
    else
        printf("\ntimed: tokens after the first of each generation (the prompt is excluded; drafting, "
               "verifying and rollback are included), median of %d runs alternating plain / "
               "speculative after one untimed run of each; 'per round' = accepted drafts per verify "
               "pass; load average %.2f (1 min) while measuring\n", reps, load[0]);
done:
    tern_generator_free(g);
    tern_draft_free(d);
    tern_sampler_free(smp);
    tern_context_free(ctx);
    for (int i = 0; i < np; i++) free(prompts[i].ids);
    free(a.tok);
    free(b.tok);
    tern_tokenizer_free(tk);
    tern_model_free(m);
    return rc;
}
