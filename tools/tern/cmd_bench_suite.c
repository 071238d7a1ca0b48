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

static void help(void)
{
    printf("usage: tern bench --suite SUITE.jsonl -m MODEL [options]\n"
           "       tern bench --hardware [--profiles FILE]\n"
           "       tern bench --batch-policy -m MODEL [-t N] [-n N] [-r N] [--write-profile]\n"
           "\n"
           "  --suite FILE         prompts, one {\"messages\": [...], \"tools\": [...]} per line\n"
           "                       (tern ships bench/suites/toolcalls.jsonl)\n"
           "  -m, --model FILE     the model\n"
           "  --json FILE          write the report (schema: docs/bench-and-gate.md)\n"
           "  --html FILE          write the report as one self-contained HTML page\n"
           "  -t, --threads N      threads, fixed for the run (default: the hardware profile's\n"
           "                       measure.threads; all CPUs where it says 0)\n"
           "  -n, --n-gen N        tokens generated per prompt, end-of-generation ignored (default 32)\n"
           "  -r, --repetitions N  timed repetitions of every prompt, interleaved (>= 2; alone: exactly\n"
           "                       N rounds; default: the profile's, 3 unless it says otherwise)\n"
           "  --max-repetitions M  keep adding rounds, up to M, until every prompt's TTFT and TPS\n"
           "                       median has an estimated relative standard error <= the target\n"
           "                       (default: the profile's when -r is not given)\n"
           "  --noise-target PCT   that target in percent (default: the profile's, else 1)\n"
           "  --profiles FILE      hardware profiles (default configs/hardware_profiles.yaml)\n"
           "  --hardware           print this machine's hardware and matched profile as JSON\n"
           "  --batch-policy       decode 1..4 sequences at once (batcher), -n tokens each (default\n"
           "                       64), -r rounds (default 3): tokens/s and p95 step time; offline =\n"
           "                       the batch of 2..4 that raises tokens/s >= 10 %% with < 10 %% p95\n"
           "                       step penalty (the profile's thresholds), else 1\n"
           "  --write-profile      with --batch-policy: record offline in the matched profile\n"
           "\n"
           "Timed per prompt from an empty KV cache: template_ms + tokenizer_ms + prefill_ms +\n"
           "first_step_ms = ttft_ms; tps after the first token; TTFA (tokens, ms) to the first valid\n"
           "tool call. Greedy (temperature 0, top-p 1); repetitions must give identical tokens.\n");
}

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
    const char *suite = NULL, *model = NULL, *json = NULL, *html = NULL, *profiles = NULL, *v;
    struct tern_bench_suite_params p = tern_bench_suite_default_params();
    bool hardware = false, batch_policy = false, write_profile = false, n_set = false, r_set = false;
    for (int i = 1; i < argc; i++) {
        int r;
        long long x;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return CLI_EXIT_OK; }
        if (!strcmp(argv[i], "--hardware")) { hardware = true; continue; }
        if (!strcmp(argv[i], "--batch-policy")) { batch_policy = true; continue; }
        if (!strcmp(argv[i], "--write-profile")) { write_profile = true; continue; }
#define OPT(name, alt) ((r = cli_opt(argc, argv, &i, name, alt, &v)) != 0)
        if (OPT("--suite", NULL)) { if (r < 0) return CLI_EXIT_USAGE; suite = v; }
        else if (OPT("-m", "--model")) { if (r < 0) return CLI_EXIT_USAGE; model = v; }
        else if (OPT("--json", NULL)) { if (r < 0) return CLI_EXIT_USAGE; json = v; }
        else if (OPT("--html", NULL)) { if (r < 0) return CLI_EXIT_USAGE; html = v; }
        else if (OPT("--profiles", NULL)) { if (r < 0) return CLI_EXIT_USAGE; profiles = v; }
        else if (OPT("-t", "--threads")) {
            if (r < 0 || !cli_flag_int("bench", "-t", v, 1, 512, &x)) return CLI_EXIT_USAGE;
            p.n_threads = (int)x;
        } else if (OPT("-n", "--n-gen")) {
            if (r < 0 || !cli_flag_int("bench", "-n", v, 2, 65536, &x)) return CLI_EXIT_USAGE;
            p.n_gen = (int)x;
            n_set = true;
        } else if (OPT("--max-repetitions", NULL)) {
            if (r < 0 || !cli_flag_int("bench", "--max-repetitions", v, 2, 1000, &x)) return CLI_EXIT_USAGE;
            p.max_reps = (int)x;
        } else if (OPT("--noise-target", NULL)) {
            double pct;
            if (r < 0 || !cli_flag_float("bench", "--noise-target", v, 0.01, 50, &pct)) return CLI_EXIT_USAGE;
            p.noise_target = pct / 100;
        } else if (OPT("-r", "--repetitions")) {
            if (r < 0 || !cli_flag_int("bench", "-r", v, 1, 1000, &x)) return CLI_EXIT_USAGE;
            p.reps = (int)x;
            r_set = true;
        } else return cli_usage_error("bench", "unknown option '%s' with --suite (see tern bench --suite --help)", argv[i]);
#undef OPT
    }
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
