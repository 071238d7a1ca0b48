/* cmd_eval.c — `tern eval`: tool-call quality and speed of a model on a dataset of cases
 * (src/eval; docs/eval.md).
 *
 *   tern eval --data cases.jsonl (-m MODEL | --endpoint URL [--api-key K] [--model NAME]
 *             [--concurrency N] [--timeout S]) [--shard i/n] [--limit N] [--json report.json]
 *             [--outputs outputs.jsonl] [--max-tokens N] [-c N] [-t N]
 *   tern eval cases CORPUS.jsonl -o cases.jsonl
 *   tern eval merge --data cases.jsonl OUTPUTS.jsonl... [--json report.json] [--against FULL.jsonl]
 *
 * The report goes to stdout as a table (overall, then per slice) and, with --json, to a file;
 * --outputs writes every answer as received so it can be re-graded. A shard i/n answers the
 * cases whose index is i modulo n. With an endpoint any failed request (no retries) makes the
 * exit status 1 after the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "tern_bench.h"

struct eval_opts {
    const char *data, *model, *endpoint, *api_key, *model_name, *json, *outputs;
    long long shard_i, shard_n, limit, threads, n_ctx, max_tokens, concurrency, timeout_s;
    bool constrained;
    struct cli_lora_opts lora;
};

static void eval_init(void *p)
{
    *(struct eval_opts *)p = (struct eval_opts){.shard_n = 1, .max_tokens = 512, .concurrency = 1,
                                                .timeout_s = 120};
}

/* --shard I/N: both numbers at once, so a CLI_INT each would not do. */
static int shard_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct eval_opts *o = opts;
    char extra;
    if (sscanf(val, "%lld/%lld%c", &o->shard_i, &o->shard_n, &extra) != 2 || o->shard_n < 1 ||
        o->shard_i < 0 || o->shard_i >= o->shard_n)
        return cli_usage_error(cmd, "--shard '%s' must be I/N with 0 <= I < N", val), -1;
    return 0;
}

#define E struct eval_opts
static const struct cli_option eval_table[] = {
    {NULL, "--data", CLI_PATH, "FILE", CLI_AT(E, data), .flags = CLI_REQUIRED,
     .help = "cases, one JSON object per line: messages, tools, expected, private, slice, id"},
    {"-m", NULL, CLI_PATH, "FILE", CLI_AT(E, model), .help = "the model (GGUF) answering, run here"},
    {NULL, "--endpoint", CLI_STRING, "URL", CLI_AT(E, endpoint),
     .help = "or an OpenAI-compatible server answering (streamed chat completions, temperature 0, no "
             "retries: a failed request fails the run)"},
    {NULL, "--api-key", CLI_STRING, "K", CLI_AT(E, api_key), .env = "TERN_API_KEY",
     .help = "Bearer key for the endpoint"},
    {NULL, "--model", CLI_STRING, "NAME", CLI_AT(E, model_name), .def = "\"default\"",
     .help = "the endpoint's model name"},
    {NULL, "--concurrency", CLI_INT, "N", CLI_AT(E, concurrency), CLI_RANGE(1, 256),
     .help = "requests in flight (endpoint)"},
    {NULL, "--timeout", CLI_INT, "S", CLI_AT(E, timeout_s), CLI_RANGE(1, 86400),
     .help = "seconds per request (endpoint)"},
    {NULL, "--shard", CLI_CALL, "I/N", .call = shard_take, .def = "0/1",
     .help = "answer only the cases whose index is I modulo N"},
    {NULL, "--limit", CLI_INT, "N", CLI_AT(E, limit), CLI_RANGE(1, 100000000), .def = "all",
     .help = "answer only the first N cases (of the shard)"},
    {NULL, "--json", CLI_PATH, "FILE", CLI_AT(E, json), .help = "write the report as JSON"},
    {NULL, "--outputs", CLI_PATH, "FILE", CLI_AT(E, outputs),
     .help = "write every answer (content, tool calls, tokens, ms) as JSON lines"},
    {NULL, "--max-tokens", CLI_INT, "N", CLI_AT(E, max_tokens), CLI_RANGE(1, 1000000),
     .help = "tokens per answer at most"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(E, lora),
     .notes = (const struct cli_note[]){{"--lora", NULL, "(-m) a LoRA adapter on the model at SCALE "
             "(default 1); its chat template, when it carries one, renders the cases"}, {NULL}}},
    {NULL, "--constrained", CLI_FLAG, NULL, CLI_AT(E, constrained),
     .help = "(-m) constrain tool calls by the case's tools: free text stays free, an opened call is a "
             "tool's name and valid arguments"},
    {"-c", "--ctx-size", CLI_INT, "N", CLI_AT(E, n_ctx), CLI_RANGE(16, 1 << 24),
     .def = "the model's, at most 4096", .help = "context"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(E, threads), CLI_RANGE(1, 1024), .def = "all",
     .help = "threads"},
    {0},
};
#undef E

const struct cli_command cli_spec_eval = {
    "eval", "--data CASES.jsonl (-m MODEL | --endpoint http://HOST:PORT/v1 [--api-key K] [--model NAME]) [options]",
    "Answers every case greedily with the model and scores the tool calls: precision,\n"
    "recall and F1 (strict and lax), correct tool, exact arguments, false calls, invalid\n"
    "and malformed calls, leaked private strings, TTFA, tokens per answer\n"
    "(docs/eval.md has the dataset format and every rule). Give one of -m or --endpoint.\n",
    eval_table, CLI_OPTS(struct eval_opts, eval_init),
    "See also `tern eval cases --help` and `tern eval merge --help`.\n",
};

struct eval_cases_opts {
    const char *in, *out;
};

#define C struct eval_cases_opts
static const struct cli_option eval_cases_table[] = {
    {.meta = "CORPUS.jsonl", .kind = CLI_PATH, CLI_AT(C, in), .flags = CLI_REQUIRED,
     .help = "a corpus file (tern corpus toolcalls)"},
    {"-o", "--output", CLI_PATH, "CASES.jsonl", CLI_AT(C, out), .flags = CLI_REQUIRED,
     .help = "where to write the cases"},
    {0},
};
#undef C

const struct cli_command cli_spec_eval_cases = {
    "eval cases", "CORPUS.jsonl -o CASES.jsonl",
    "Writes one case per assistant message of a corpus file (tern corpus toolcalls).\n",
    eval_cases_table, CLI_OPTS(struct eval_cases_opts, NULL), NULL,
};

#define EVAL_MAX_OUTPUTS 256
struct eval_merge_opts {
    const char *data, *json, *against;
    const char *files[EVAL_MAX_OUTPUTS];
    int n_files;
};

#define M struct eval_merge_opts
static const struct cli_option eval_merge_table[] = {
    {NULL, "--data", CLI_PATH, "FILE", CLI_AT(M, data), .flags = CLI_REQUIRED,
     .help = "the cases the shards answered"},
    {NULL, "--json", CLI_PATH, "FILE", CLI_AT(M, json), .help = "write the report as JSON"},
    {NULL, "--against", CLI_PATH, "FULL.jsonl", CLI_AT(M, against),
     .help = "compare the answers case by case with an unsharded run's outputs"},
    {.meta = "OUTPUTS.jsonl", .kind = CLI_LIST, CLI_AT(M, files), CLI_COUNT(M, n_files, EVAL_MAX_OUTPUTS),
     .flags = CLI_REQUIRED, .help = "the --outputs files of the shards of a run"},
    {0},
};
#undef M

const struct cli_command cli_spec_eval_merge = {
    "eval merge", "--data CASES.jsonl OUTPUTS.jsonl... [--json R] [--against FULL.jsonl]",
    "Scores the --outputs files of the shards of a run together; every case must be answered\n"
    "exactly once.\n",
    eval_merge_table, CLI_OPTS(struct eval_merge_opts, NULL), NULL,
};

static int cmd_cases(int argc, char **argv)
{
    struct eval_cases_opts o = {0};
    const int pr = cli_parse(&cli_spec_eval_cases, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *in = o.in, *out = o.out;
    int64_t n = 0;
    tern_status st = tern_eval_cases_from_corpus(in, out, &n);
    if (st) return cli_report("eval", st);
    fprintf(stderr, "tern eval: wrote %lld cases to %s\n", (long long)n, out);
    return CLI_EXIT_OK;
}

static int write_report(const char *json, const char *report)
{
    if (!json) return CLI_EXIT_OK;
    FILE *f = fopen(json, "w");
    bool ok = f && fputs(report, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    if (ok) return CLI_EXIT_OK;
    fprintf(stderr, "tern eval: cannot write %s\n", json);
    return CLI_EXIT_FAIL;
}

static void print_report(const char *json);

static int cmd_merge(int argc, char **argv)
{
    struct eval_merge_opts o = {0};
    const int pr = cli_parse(&cli_spec_eval_merge, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *data = o.data, *json = o.json, *against = o.against;
    const char *const *files = o.files;
    const int n_files = o.n_files;
    struct tern_eval_set *s = NULL;
    struct tern_eval_run *r = NULL, *full = NULL;
    char *report = NULL;
    int rc = CLI_EXIT_OK;
    tern_status st = tern_eval_set_load(data, &s);
    if (!st) st = tern_eval_run_create(s, &r);
    for (int k = 0; !st && k < n_files; k++) st = tern_eval_read_outputs(r, files[k]);
    if (st) {
        rc = cli_report("eval", st);
        goto out;
    }
    int first;
    const int missing = tern_eval_run_missing(r, &first);
    if (missing) {
        fprintf(stderr, "tern eval: %d of %d cases have no answer in these files (the first: '%s'); "
                "a merge must cover every case\n", missing, tern_eval_set_count(s),
                tern_eval_case_id(s, first));
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    if (against) {
        if ((st = tern_eval_run_create(s, &full)) || (st = tern_eval_read_outputs(full, against))) {
            rc = cli_report("eval", st);
            goto out;
        }
        const int d = tern_eval_runs_differ(r, full);
        if (d) {
            fprintf(stderr, "tern eval: case '%s' differs between the merged shards and %s\n",
                    tern_eval_case_id(s, d - 1), against);
            rc = CLI_EXIT_FAIL;
            goto out;
        }
        fprintf(stderr, "tern eval: the merged shards equal %s case by case (%d cases)\n", against,
                tern_eval_set_count(s));
    }
    if ((st = tern_eval_report_json(r, &report))) {
        rc = cli_report("eval", st);
        goto out;
    }
    rc = write_report(json, report);
    if (rc == CLI_EXIT_OK) print_report(report);
out:
    free(report);
    tern_eval_run_free(full);
    tern_eval_run_free(r);
    tern_eval_set_free(s);
    return rc;
}

static void progress(int done, int total, void *user)
{
    (void)user;
    if (isatty(STDERR_FILENO) && (done % 10 == 0 || done == total))
        fprintf(stderr, "\rtern eval: %d/%d cases", done, total);
    if (isatty(STDERR_FILENO) && done == total) fputc('\n', stderr);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

static void pct_cell(char *buf, size_t n, const cJSON *o, const char *k)
{
    const double x = num(o, k);
    if (x < 0) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.1f", 100 * x);
}

static void print_row(const char *name, const cJSON *t)
{
    char f1s[16], f1l[16], tool[16], exact[16], fals[16];
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(t, "strict"), *l = cJSON_GetObjectItemCaseSensitive(t, "lax");
    pct_cell(f1s, sizeof f1s, s, "f1");
    pct_cell(f1l, sizeof f1l, l, "f1");
    pct_cell(tool, sizeof tool, t, "correct_tool_rate");
    pct_cell(exact, sizeof exact, t, "exact_arguments_rate");
    pct_cell(fals, sizeof fals, t, "false_call_rate");
    char ttfa[32] = "-";
    if (num(t, "ttfa_tokens_p50") >= 0)
        snprintf(ttfa, sizeof ttfa, "%.0f / %.0f ms", num(t, "ttfa_tokens_p50"), num(t, "ttfa_ms_p50"));
    printf("%-14s %6.0f %7s %7s %7s %7s %7s %8.0f %8.0f %6.0f  %s\n", name, num(t, "cases"), f1s, f1l,
           tool, exact, fals, num(t, "invalid_calls") + num(t, "malformed_calls"), num(t, "leaked_cases"),
           num(t, "errors"), ttfa);
}

static void print_report(const char *json)
{
    cJSON *r = cJSON_Parse(json);
    printf("%-14s %6s %7s %7s %7s %7s %7s %8s %8s %6s  %s\n", "slice", "cases", "F1", "F1 lax",
           "tool %", "exact %", "false %", "invalid", "leaked", "errors", "TTFA p50 (tokens / ms)");
    print_row("all", cJSON_GetObjectItemCaseSensitive(r, "overall"));
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(r, "slices")) print_row(s->string, s);
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(r, "prompt_buckets")) {
        char name[32];
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "max_prompt_tokens");
        if (cJSON_IsNumber(mx)) snprintf(name, sizeof name, "prompt<=%d", mx->valueint);
        else snprintf(name, sizeof name, "prompt>%d",
                      cJSON_GetObjectItemCaseSensitive(s, "min_prompt_tokens")->valueint - 1);
        print_row(name, s);
    }
    const cJSON *drift = cJSON_GetObjectItemCaseSensitive(r, "f1_lax_drift");
    if (cJSON_IsNumber(drift))
        printf("lax F1 drift across prompt lengths: %.1f points\n", 100.0 * drift->valuedouble);
    cJSON_Delete(r);
}

int cmd_eval(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "cases")) return cmd_cases(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "merge")) return cmd_merge(argc - 1, argv + 1);
    struct eval_opts o;
    eval_init(&o);
    const int pr = cli_parse(&cli_spec_eval, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *data = o.data, *model = o.model, *json = o.json, *outputs = o.outputs;
    const char *endpoint = o.endpoint, *api_key = o.api_key, *model_name = o.model_name;
    const long long shard_i = o.shard_i, shard_n = o.shard_n, limit = o.limit, threads = o.threads;
    const long long n_ctx = o.n_ctx, max_tokens = o.max_tokens, concurrency = o.concurrency;
    const long long timeout_s = o.timeout_s;
    const bool constrained = o.constrained;
    struct cli_lora_opts lora = o.lora;
    if (!model == !endpoint)
        return cli_usage_error("eval", "need one of -m MODEL or --endpoint URL");
    if (lora.n && endpoint)
        return cli_usage_error("eval", "--lora is for -m (an endpoint serves its own adapters: "
                               "pick one with --model)");
    if (constrained && endpoint)
        return cli_usage_error("eval", "--constrained is for -m (an endpoint constrains by its own "
                               "tool_choice)");
    if (endpoint && strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
        return cli_usage_error("eval", "--endpoint '%s' is not an http:// or https:// URL", endpoint);
    struct tern_eval_set *s = NULL;
    struct tern_eval_run *r = NULL;
    int *which = NULL;
    char *report = NULL;
    tern_status st = tern_eval_set_load(data, &s);
    if (!st) st = tern_eval_run_create(s, &r);
    int n_which = 0;
    if (!st) {
        which = malloc((size_t)tern_eval_set_count(s) * sizeof *which);
        if (!which) st = TERN_ERR_NOMEM;
        for (int i = 0; !st && i < tern_eval_set_count(s); i++)
            if (i % shard_n == shard_i && (!limit || n_which < limit)) which[n_which++] = i;
    }
    int n_failed = 0;
    if (!st && model) {
        struct tern_eval_local_params lp = tern_eval_local_default_params();
        lp.n_ctx = (int)n_ctx;
        lp.n_threads = (int)threads;
        lp.max_tokens = (int)max_tokens;
        lp.constrained = constrained;
        lp.lora_paths = lora.path;
        lp.lora_scales = lora.scale;
        lp.n_lora = lora.n;
        st = tern_eval_local(r, model, &lp, which, n_which, progress, NULL);
    } else if (!st) {
        struct tern_eval_http_params hp = tern_eval_http_default_params();
        hp.endpoint = endpoint;
        hp.api_key = api_key;
        hp.model = model_name;
        hp.concurrency = (int)concurrency;
        hp.timeout_s = (int)timeout_s;
        hp.max_tokens = (int)max_tokens;
        st = tern_eval_http(r, &hp, which, n_which, progress, NULL, &n_failed);
    }
    if (!st) st = tern_eval_report_json(r, &report);
    bool reported = false; /* write failures are reported here, library errors by cli_report */
    if (!st && write_report(json, report) != CLI_EXIT_OK) st = TERN_ERR_IO, reported = true;
    if (!st && outputs) {
        FILE *f = fopen(outputs, "w");
        if (!f) {
            fprintf(stderr, "tern eval: cannot write %s\n", outputs);
            st = TERN_ERR_IO;
        } else {
            st = tern_eval_outputs_write(r, f);
            if (fclose(f) != 0 && !st) st = TERN_ERR_IO;
            if (st) fprintf(stderr, "tern eval: cannot write %s\n", outputs);
        }
        reported = st != TERN_OK;
    }
    int rc = CLI_EXIT_OK;
    if (st) {
        rc = reported ? CLI_EXIT_FAIL : cli_report("eval", st);
    } else {
        print_report(report);
        if (n_failed) {
            fprintf(stderr, "tern eval: %d of %d requests failed (no retries in determinism mode; "
                    "--outputs has each error)\n", n_failed, n_which);
            rc = CLI_EXIT_FAIL;
        }
    }
    free(report);
    free(which);
    tern_eval_run_free(r);
    tern_eval_set_free(s);
    return rc;
}
