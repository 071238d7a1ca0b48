/* cmd_gate.c — `tern gate --baseline blessed.json current.json [--allow-cross-hw]`: fail (exit 1)
 * when the current report is slower than the blessed baseline beyond its hardware profile's
 * limits (src/bench/bench_gate.c says which), refuse (exit 2) reports from different hardware
 * profiles or suites, and print the table of every metric, its change and its limit. Without
 * --baseline the baseline is the one `tern bless` stored for the current report's profile.
 * With `--eval-baseline E0.json --eval E1.json` two `tern eval` reports are gated too (the
 * co-gate: src/eval/eval_gate.c), and the exit code is the worse of the two verdicts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_gov.h"

static void help(void)
{
    printf("usage: tern gate [--baseline BLESSED.json] CURRENT.json [--allow-cross-hw] [--raw]\n"
           "                 [--eval-baseline EVAL0.json --eval EVAL1.json [--f1-drop D]]\n"
           "       tern gate --eval-baseline EVAL0.json --eval EVAL1.json [--f1-drop D]\n"
           "\n"
           "Exit 0: within every limit; 1: a metric regressed past its limit (TTFT p50/p95 grew or\n"
           "TPS p50/p95 fell by more than 5 %%, TTFA p95 above 25 tokens, residency down more than\n"
           "10 points; limits from the baseline's hardware profile); 2: refused (different hardware\n"
           "profile without --allow-cross-hw, different suite) or a bad report (named with its key).\n"
           "Without --baseline: baselines/<profile key>.json as written by tern bless.\n"
           "\n"
           "TTFT changes are gated after allowing for the machine's own speed during each run (the\n"
           "reports' machine_speed probe: a fixed int8 loop that is not tern's code, run between\n"
           "rounds), so a host that got 4 %% slower since the baseline is not a 4 %% regression. Not\n"
           "done when a report has no probe, the probes differ, or the machine moved by over 20 %%;\n"
           "--raw gates TTFT as measured. TPS (decode, memory-bound) is always gated as measured.\n"
           "\n"
           "--eval-baseline / --eval: two tern eval --json reports of the same dataset, gated too:\n"
           "strict F1 may drop by at most D (default 0.01), leaked and failed cases may not grow;\n"
           "different datasets or case counts are refused. The exit code is the worse verdict.\n");
}

int cmd_gate(int argc, char **argv)
{
    const char *baseline = NULL, *current = NULL, *eval_base = NULL, *eval_cur = NULL, *v;
    bool cross = false, raw = false;
    struct tern_eval_gate_params ep = tern_eval_gate_default_params();
    ep.out = stdout;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return CLI_EXIT_OK; }
        if (!strcmp(argv[i], "--allow-cross-hw")) { cross = true; continue; }
        if (!strcmp(argv[i], "--raw")) { raw = true; continue; }
        if ((r = cli_opt(argc, argv, &i, "--baseline", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            baseline = v;
        } else if ((r = cli_opt(argc, argv, &i, "--eval-baseline", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            eval_base = v;
        } else if ((r = cli_opt(argc, argv, &i, "--eval", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            eval_cur = v;
        } else if ((r = cli_opt(argc, argv, &i, "--f1-drop", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            char *end;
            ep.f1_drop_max = strtod(v, &end);
            if (*end || end == v || !(ep.f1_drop_max >= 0 && ep.f1_drop_max <= 1))
                return cli_usage_error("gate", "--f1-drop wants a number in [0, 1], not '%s'", v);
        } else if (argv[i][0] == '-') {
            return cli_usage_error("gate", "unknown option '%s'", argv[i]);
        } else if (current) {
            return cli_usage_error("gate", "one current report only ('%s' and '%s')", current, argv[i]);
        } else {
            current = argv[i];
        }
    }
    if (!eval_base != !eval_cur)
        return cli_usage_error("gate", "--eval-baseline and --eval go together (two tern eval --json reports)");
    if (!current && !eval_cur)
        return cli_usage_error("gate", "give the current report: tern gate --baseline BLESSED.json CURRENT.json");
    if (!current && baseline) return cli_usage_error("gate", "--baseline without a current speed report");
    enum tern_gate_verdict verdict = TERN_GATE_PASS;
    if (current) {
        char path[600];
        if (!baseline) {
            char key[256];
            if (cli_bless_default_path(current, key, sizeof key, path, sizeof path)) return CLI_EXIT_USAGE;
            baseline = path;
        }
        struct tern_bench_gate_params gp = {.allow_cross_hw = cross, .raw = raw, .out = stdout};
        if (tern_bench_gate(baseline, current, &gp, &verdict)) {
            fprintf(stderr, "tern gate: %s\n", tern_last_error());
            return CLI_EXIT_USAGE;
        }
    }
    if (eval_cur) {
        enum tern_gate_verdict q;
        if (current) printf("\n");
        if (tern_eval_gate(eval_base, eval_cur, &ep, &q)) {
            fprintf(stderr, "tern gate: %s\n", tern_last_error());
            return CLI_EXIT_USAGE;
        }
        /* the worse verdict: refused > fail > pass */
        if (q > verdict) verdict = q;
        if (current) printf("gate: %s (speed and quality)\n", verdict == TERN_GATE_PASS ? "PASS" : verdict == TERN_GATE_FAIL ? "FAIL" : "REFUSED");
    }
    return verdict == TERN_GATE_PASS ? CLI_EXIT_OK : verdict == TERN_GATE_FAIL ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
}
