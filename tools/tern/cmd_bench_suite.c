/* cmd_bench_suite.c — `tern bench --suite FILE -m MODEL [--json report.json] [--html page.html]`:
 * the suite run of docs/bench-and-gate.md "Speed governance" (src/bench/bench_run.c does the
 * measuring). The summary goes to stdout; the full report to --json, the page to --html (both
 * written atomically). Tool calls are judged valid by tern eval's validator (tern_eval_call_valid),
 * the same rule as the eval's "invalid calls". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_gov.h"

struct suite_opts {
    const char *suite, *model, *json, *html, *profiles;
    long long threads, n_gen, max_reps, reps;
    double noise_pct;
    bool hardware, batch_policy, write_profile, n_set, r_set;
};

/* --suite FILE: an option name in its place ("--suite -m MODEL") is a forgotten FILE, not a
 * suite file called "-m" (./-m still names one) */
static int suite_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    if (val[0] == '-' && val[1])
        return cli_usage_error(cmd, "option --suite needs a value (FILE), not the option '%s'", val), -1;
    if (!*val) return cli_usage_error(cmd, "--suite: empty path"), -1;
    ((struct suite_opts *)opts)->suite = val;
    return 0;
}

/* 0 (not given) leaves a figure to the hardware profile (tern_bench_suite_default_params) */
#define S struct suite_opts
static const struct cli_option suite_table[] = {
    {NULL, "--suite", CLI_CALL, "FILE", .call = suite_take,
     .help = "prompts, one {\"messages\": [...], \"tools\": [...]} per line (tern ships "
             "bench/suites/toolcalls.jsonl)"},
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(S, model), .help = "the model"},
    {NULL, "--json", CLI_PATH, "FILE", CLI_AT(S, json), .help = "write the report (schema: docs/bench-and-gate.md)"},
    {NULL, "--html", CLI_PATH, "FILE", CLI_AT(S, html), .help = "write the report as one self-contained HTML page"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(S, threads), CLI_RANGE(1, 512),
     .def = "the hardware profile's measure.threads; all CPUs where it says 0",
     .help = "threads, fixed for the run"},
    {"-n", "--n-gen", CLI_INT, "N", CLI_AT(S, n_gen), CLI_RANGE(2, 65536), CLI_GIVEN(S, n_set),
     .def = "32; --batch-policy 64", .help = "tokens generated per prompt, end-of-generation ignored"},
    {"-r", "--repetitions", CLI_INT, "N", CLI_AT(S, reps), CLI_RANGE(1, 1000), CLI_GIVEN(S, r_set),
     .def = "the profile's, 3 unless it says otherwise; --batch-policy 3",
     .help = "timed repetitions of every prompt, interleaved (>= 2 for a suite; alone: exactly N rounds)"},
    {NULL, "--max-repetitions", CLI_INT, "M", CLI_AT(S, max_reps), CLI_RANGE(2, 1000),
     .def = "the profile's when -r is not given",
     .help = "keep adding rounds, up to M, until every prompt's TTFT and TPS median has an estimated "
             "relative standard error <= the target"},
    {NULL, "--noise-target", CLI_DOUBLE, "PCT", CLI_AT(S, noise_pct), CLI_FRANGE(0.01, 50),
     .def = "the profile's, else 1", .help = "that target in percent"},
    {NULL, "--profiles", CLI_PATH, "FILE", CLI_AT(S, profiles), .def = "configs/hardware_profiles.yaml",
     .help = "hardware profiles"},
    {NULL, "--hardware", CLI_FLAG, NULL, CLI_AT(S, hardware),
     .help = "print this machine's hardware and matched profile as JSON"},
    {NULL, "--batch-policy", CLI_FLAG, NULL, CLI_AT(S, batch_policy),
     .help = "decode 1..4 sequences at once (batcher), -n tokens each, -r rounds: tokens/s and p95 step "
             "time; offline = the batch of 2..4 that raises tokens/s >= 10 % with < 10 % p95 step "
             "penalty (the profile's thresholds), else 1"},
    {NULL, "--write-profile", CLI_FLAG, NULL, CLI_AT(S, write_profile),
     .help = "with --batch-policy: record offline in the matched profile"},
    {0},
};
#undef S

const struct cli_command cli_spec_bench_suite = {
    "bench --suite", "SUITE.jsonl -m MODEL [options]\n"
    "       tern bench --hardware [--profiles FILE]\n"
    "       tern bench --batch-policy -m MODEL [-t N] [-n N] [-r N] [--write-profile]",
    "The speed governance runs of docs/bench-and-gate.md (any of --suite, --hardware or\n"
    "--batch-policy selects these options instead of tern bench's pp/tg ones).\n",
    suite_table, CLI_OPTS(struct suite_opts, NULL),
    "Timed per prompt from an empty KV cache: template_ms + tokenizer_ms + prefill_ms +\n"
    "first_step_ms = ttft_ms; tps after the first token; TTFA (tokens, ms) to the first valid\n"
    "tool call. Greedy (temperature 0, top-p 1); repetitions must give identical tokens.\n",
};

bool cli_eval_call_valid(const char *tools_json, const char *name, const char *args, void *user)
{
    (void)user;
    return tern_eval_call_valid(tools_json, name, args, NULL, 0);
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static void print_summary(const char *json)
{
    cJSON *r = cJSON_Parse(json);
    if (!r) return;
    const cJSON *set = at(r, "settings", NULL);
    printf("suite %s: %d prompts x %d repetitions, %d tokens each, %d threads\n",
           cJSON_GetStringValue(at(r, "suite", "path")), (int)at(r, "suite", "prompts")->valuedouble,
           (int)at(set, "repetitions", NULL)->valuedouble, (int)at(set, "n_gen", NULL)->valuedouble,
           (int)at(set, "threads", NULL)->valuedouble);
    printf("hardware profile %s; %s; kernels %s\n", cJSON_GetStringValue(at(at(r, "hardware", "profile"), "key", NULL)),
           cJSON_GetStringValue(at(r, "hardware", "cpu_model")), cJSON_GetStringValue(at(r, "build", "kernel_path")));
    printf("| metric | p50 | p90 | p95 | p99 |\n| --- | ---: | ---: | ---: | ---: |\n");
    const cJSON *m;
    cJSON_ArrayForEach(m, at(r, "metrics", NULL)) {
        printf("| %s |", m->string);
        static const char *const pk[] = {"p50", "p90", "p95", "p99"};
        for (int k = 0; k < 4; k++) {
            const cJSON *v = at(m, pk[k], NULL);
            if (cJSON_IsNumber(v)) printf(" %.2f |", v->valuedouble);
            else printf(" - |");
        }
        printf("\n");
    }
    const cJSON *b;
    printf("per bucket (prompt tokens): ");
    cJSON_ArrayForEach(b, at(r, "buckets", NULL)) {
        if (at(b, "prompts", NULL)->valuedouble == 0) continue;
        printf("%s: %d prompts, TTFT p50 %.1f ms, %.1f tok/s; ", cJSON_GetStringValue(at(b, "bucket", NULL)),
               (int)at(b, "prompts", NULL)->valuedouble, at(at(b, "ttft_ms", NULL), "p50", NULL)->valuedouble,
               at(at(b, "tps", NULL), "p50", NULL)->valuedouble);
    }
    printf("\nTTFA: %d of %d prompts with tools made a valid call (%d invalid calls)\n",
           (int)at(r, "ttfa", "prompts_with_valid_call")->valuedouble, (int)at(r, "ttfa", "prompts_with_tools")->valuedouble,
           (int)at(r, "ttfa", "invalid_calls")->valuedouble);
    printf("KV cache %s\n", cJSON_GetStringValue(at(r, "kv_cache", "log")));
    printf("fast-path residency %.1f %% of forward time, %d scalar fallbacks\n",
           at(r, "residency", "share")->valuedouble * 100, (int)at(r, "residency", "scalar_fallbacks")->valuedouble);
    const cJSON *e = at(r, "energy", "joules_per_100_tokens");
    if (cJSON_IsNumber(e)) printf("energy %.2f J per 100 tokens\n", e->valuedouble);
    else printf("energy: unavailable (%s)\n", cJSON_GetStringValue(at(r, "energy", "reason")));
    printf("determinism: %s\n", cJSON_IsTrue(at(r, "determinism", "identical_tokens"))
           ? "identical tokens in every repetition" : "REPETITIONS DIFFER (see determinism.differing_prompt_lines)");
    const cJSON *nz = at(r, "noise", NULL);
    if (cJSON_IsNumber(at(nz, "target_rel_se", NULL)))
        printf("repetitions: %d of at most %d; noise target (relative SE of every median <= %.1f %%) %s: worst TTFT %.1f %%, TPS %.1f %%\n",
               (int)at(nz, "repetitions", NULL)->valuedouble, (int)at(nz, "max_repetitions", NULL)->valuedouble,
               at(nz, "target_rel_se", NULL)->valuedouble * 100, cJSON_IsTrue(at(nz, "target_met", NULL)) ? "met" : "NOT met",
               at(at(nz, "ttft_ms", NULL), "worst_rel_se", NULL)->valuedouble * 100,
               at(at(nz, "tps", NULL), "worst_rel_se", NULL)->valuedouble * 100);
    printf("noise: TTFT p50 moved %.1f %%, TPS p50 %.1f %% between rounds; per-prompt spread (rel. MAD) %.1f %% / %.1f %%\n",
           at(at(r, "noise", "ttft_ms"), "round_spread", NULL)->valuedouble * 100,
           at(at(r, "noise", "tps"), "round_spread", NULL)->valuedouble * 100,
           at(at(r, "noise", "ttft_ms"), "rel_mad", NULL)->valuedouble * 100,
           at(at(r, "noise", "tps"), "rel_mad", NULL)->valuedouble * 100);
    const cJSON *la = at(r, "noise", "loadavg_end"), *share = at(r, "noise", "cpu_share");
    if (cJSON_IsNumber(la) && cJSON_IsNumber(share))
        printf("machine: load average %.1f on %d CPUs; the run got %.0f %% of its threads' CPU%s\n", la->valuedouble,
               (int)at(r, "noise", "cpus_online")->valuedouble, share->valuedouble * 100,
               la->valuedouble > at(r, "noise", "cpus_online")->valuedouble
                   ? " (busy: treat the timings as measured under load)" : "");
    cJSON_Delete(r);
}

static int batch_policy_run(const char *model, const char *prof, int threads, int n_gen, int reps, bool write)
{
    struct tern_bench_batch_policy bp;
    tern_status st = tern_bench_batch_policy(model, prof, threads, n_gen, reps, &bp);
    if (st) return cli_report("bench", st);
    printf("batch policy on profile %s (%s), %d threads, %d tokens per sequence, median of %d rounds\n",
           bp.profile_name, bp.profile_source, bp.n_threads, n_gen, reps);
    printf("| batch | tok/s | p95 step ms | tok/s gain | p95 penalty | qualifies |\n"
           "| ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int k = 0; k < 4; k++) {
        const struct tern_bench_batch_point *q = &bp.points[k];
        printf("| %d | %.1f | %.2f | %+.1f %% | %+.1f %% | %s |\n", q->batch, q->tps, q->p95_step_ms, q->tps_gain * 100,
               q->p95_penalty * 100, k == 0 ? "(reference)" : q->qualifies ? "yes" : "no");
    }
    printf("interactive: 1; offline: %d (needs tok/s >= +%.0f %% with p95 < +%.0f %%)\n", bp.offline,
           bp.min_tps_gain * 100, bp.max_p95_penalty * 100);
    if (write) {
        if ((st = tern_bench_profile_set_offline(bp.profile_source, bp.offline))) return cli_report("bench", st);
        printf("recorded offline: %d in %s\n", bp.offline, bp.profile_source);
    }
    return CLI_EXIT_OK;
}

int cli_bench_suite(int argc, char **argv)
{
    /* `tern bench --suite --help`: --help where --suite's FILE goes is still the help */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            cli_print_help(&cli_spec_bench_suite, stdout, 100);
            return CLI_EXIT_OK;
        }
    struct suite_opts o = {0};
    const int pr = cli_parse(&cli_spec_bench_suite, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *suite = o.suite, *model = o.model, *json = o.json, *html = o.html, *profiles = o.profiles;
    const bool hardware = o.hardware, batch_policy = o.batch_policy, write_profile = o.write_profile;
    const bool n_set = o.n_set, r_set = o.r_set;
    struct tern_bench_suite_params p = tern_bench_suite_default_params();
    if (o.threads) p.n_threads = (int)o.threads;
    if (n_set) p.n_gen = (int)o.n_gen;
    if (r_set) p.reps = (int)o.reps;
    if (o.max_reps) p.max_reps = (int)o.max_reps;
    if (o.noise_pct > 0) p.noise_target = o.noise_pct / 100;
    const char *prof = cli_profiles_path("bench", profiles);
    if (!prof) return CLI_EXIT_USAGE;
    if (hardware) {
        char *out;
        tern_status st = tern_bench_hardware_json(prof, true, &out);
        if (st) return cli_report("bench", st);
        printf("%s\n", out);
        free(out);
        return CLI_EXIT_OK;
    }
    if (batch_policy) {
        if (!model) return cli_usage_error("bench", "--batch-policy needs -m MODEL");
        return batch_policy_run(model, prof, p.n_threads, n_set ? p.n_gen : 64, r_set ? p.reps : 3, write_profile);
    }
    if (write_profile) return cli_usage_error("bench", "--write-profile goes with --batch-policy");
    if (!suite || !model) return cli_usage_error("bench", "--suite needs -m MODEL");
    if (r_set && p.reps < 2) return cli_usage_error("bench", "-r %d: a suite needs 2 or more repetitions (determinism compares them)", p.reps);
    if (r_set && p.max_reps > 0 && p.max_reps < p.reps)
        return cli_usage_error("bench", "--max-repetitions %d is below -r %d", p.max_reps, p.reps);
    struct tern_bench_suite *s;
    tern_status st = tern_bench_suite_load(suite, &s);
    if (st) return cli_report("bench", st);
    p.profiles_path = prof;
    /* the binary itself: its SHA-256 is the runner fingerprint (named by its real path) */
    char *exe = realpath("/proc/self/exe", NULL);
    p.runner_path = exe ? exe : "/proc/self/exe";
    p.call_valid = cli_eval_call_valid;
    p.log = stderr;
    char *report = NULL;
    st = tern_bench_suite_run(model, s, &p, &report);
    tern_bench_suite_free(s);
    free(exe);
    if (st) return cli_report("bench", st);
    int rc = CLI_EXIT_OK;
    if (json) rc = cli_write_atomic("bench", json, report);
    if (!rc && html) {
        char *page;
        if ((st = tern_bench_report_html(report, json ? json : "the report", &page))) rc = cli_report("bench", st);
        else {
            rc = cli_write_atomic("bench", html, page);
            free(page);
        }
    }
    if (!rc) {
        print_summary(report);
        if (json) printf("report: %s\n", json);
        if (html) printf("page: %s\n", html);
    }
    free(report);
    return rc;
}
