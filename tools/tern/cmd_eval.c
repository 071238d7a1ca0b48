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

static void usage(void)
{
    printf("usage: tern eval --data CASES.jsonl -m MODEL [options]\n"
           "       tern eval --data CASES.jsonl --endpoint http://HOST:PORT/v1 [--api-key K] [--model NAME] [options]\n"
           "       tern eval cases CORPUS.jsonl -o CASES.jsonl\n"
           "       tern eval merge --data CASES.jsonl OUTPUTS.jsonl... [--json R] [--against FULL.jsonl]\n\n"
           "Answers every case greedily with the model and scores the tool calls: precision,\n"
           "recall and F1 (strict and lax), correct tool, exact arguments, false calls, invalid\n"
           "and malformed calls, leaked private strings, TTFA, tokens per answer\n"
           "(docs/eval.md has the dataset format and every rule).\n\n"
           "options:\n"
           "  --data FILE          cases, one JSON object per line: messages, tools, expected,\n"
           "                       private, slice, id\n"
           "  -m FILE              the model (GGUF) answering, run here\n"
           "  --endpoint URL       or an OpenAI-compatible server answering (streamed chat\n"
           "                       completions, temperature 0, no retries: a failed request fails\n"
           "                       the run)\n"
           "  --api-key K          Bearer key for the endpoint (default: env TERN_API_KEY)\n"
           "  --model NAME         the endpoint's model name (default \"default\")\n"
           "  --concurrency N      requests in flight (endpoint; default 1)\n"
           "  --timeout S          seconds per request (endpoint; default 120)\n"
           "  --shard I/N          answer only the cases whose index is I modulo N\n"
           "  --limit N            answer only the first N cases (of the shard)\n"
           "  --json FILE          write the report as JSON\n"
           "  --outputs FILE       write every answer (content, tool calls, tokens, ms) as JSON lines\n"
           "  --max-tokens N       tokens per answer at most (default 512)\n"
           "  --lora FILE[:SCALE]  (-m) a LoRA adapter on the model (repeatable); its chat\n"
           "                       template, when it carries one, renders the cases\n"
           "  --constrained        (-m) constrain tool calls by the case's tools: free text stays\n"
           "                       free, an opened call is a tool's name and valid arguments\n"
           "  -c, --ctx-size N     context (default: the model's, at most 4096)\n"
           "  -t, --threads N      threads (default: all)\n"
           "cases: one case per assistant message of a corpus file (tern corpus toolcalls).\n"
           "merge: the --outputs files of the shards of a run, scored together; every case must be\n"
           "answered exactly once; --against compares the answers case by case with an unsharded\n"
           "run's outputs.\n");
}

static int cmd_cases(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *v;
    for (int i = 2; i < argc; i++) {
        int r;
        if ((r = cli_opt(argc, argv, &i, "-o", "--output", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            out = v;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("eval", "unknown option '%s'", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else {
            return cli_usage_error("eval", "eval cases takes one corpus file");
        }
    }
    if (!in || !out) return cli_usage_error("eval", "usage: tern eval cases CORPUS.jsonl -o CASES.jsonl");
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
    const char *data = NULL, *json = NULL, *against = NULL, *v;
    const char *files[256];
    int n_files = 0;
    for (int i = 2; i < argc; i++) {
        int r;
        if ((r = cli_opt(argc, argv, &i, "--data", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            data = v;
        } else if ((r = cli_opt(argc, argv, &i, "--json", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            json = v;
        } else if ((r = cli_opt(argc, argv, &i, "--against", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            against = v;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("eval", "unknown option '%s'", argv[i]);
        } else if (n_files < 256) {
            files[n_files++] = argv[i];
        } else {
            return cli_usage_error("eval", "at most 256 outputs files");
        }
    }
    if (!data || !n_files) return cli_usage_error("eval", "usage: tern eval merge --data CASES.jsonl OUTPUTS.jsonl...");
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
    if (argc >= 2 && !strcmp(argv[1], "cases")) return cmd_cases(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "merge")) return cmd_merge(argc, argv);
    const char *data = NULL, *model = NULL, *json = NULL, *outputs = NULL, *v;
    const char *endpoint = NULL, *api_key = getenv("TERN_API_KEY"), *model_name = NULL;
    long long shard_i = 0, shard_n = 1, limit = 0, threads = 0, n_ctx = 0, max_tokens = 512;
    long long concurrency = 1, timeout_s = 120;
    bool constrained = false;
    struct cli_lora_opts lora = {0};
    for (int i = 1; i < argc; i++) {
        int r;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--constrained")) {
            constrained = true;
        } else if ((r = cli_lora_opt(argc, argv, &i, &lora))) {
            if (r < 0) return CLI_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--data", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            data = v;
        } else if ((r = cli_opt(argc, argv, &i, "-m", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            model = v;
        } else if ((r = cli_opt(argc, argv, &i, "--endpoint", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            endpoint = v;
        } else if ((r = cli_opt(argc, argv, &i, "--api-key", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            api_key = v;
        } else if ((r = cli_opt(argc, argv, &i, "--model", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            model_name = v;
        } else if ((r = cli_opt(argc, argv, &i, "--concurrency", NULL, &v))) {
            if (r < 0 || !cli_flag_int("eval", "--concurrency", v, 1, 256, &concurrency)) return CLI_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--timeout", NULL, &v))) {
            if (r < 0 || !cli_flag_int("eval", "--timeout", v, 1, 86400, &timeout_s)) return CLI_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--json", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            json = v;
        } else if ((r = cli_opt(argc, argv, &i, "--outputs", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            outputs = v;
        } else if ((r = cli_opt(argc, argv, &i, "--shard", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            char extra;
            if (sscanf(v, "%lld/%lld%c", &shard_i, &shard_n, &extra) != 2 || shard_n < 1 ||
                shard_i < 0 || shard_i >= shard_n)
                return cli_usage_error("eval", "--shard '%s' must be I/N with 0 <= I < N", v);
        } else if ((r = cli_opt(argc, argv, &i, "--limit", NULL, &v))) {
            if (r < 0 || !cli_flag_int("eval", "--limit", v, 1, 100000000, &limit)) return CLI_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--max-tokens", NULL, &v))) {
            if (r < 0 || !cli_flag_int("eval", "--max-tokens", v, 1, 1000000, &max_tokens)) return CLI_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "-c", "--ctx-size", &v))) {
            if (r < 0 || !cli_flag_int("eval", "-c", v, 16, 1 << 24, &n_ctx)) return CLI_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "-t", "--threads", &v))) {
            if (r < 0 || !cli_flag_int("eval", "-t", v, 1, 1024, &threads)) return CLI_EXIT_USAGE;
        } else {
            return cli_usage_error("eval", "unknown option '%s'", a);
        }
    }
    if (!data || (!model == !endpoint))
        return cli_usage_error("eval", "need --data CASES.jsonl and one of -m MODEL or --endpoint URL");
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
