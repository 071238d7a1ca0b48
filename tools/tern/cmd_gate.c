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

struct gate_opts {
    const char *baseline, *current, *eval_base, *eval_cur;
    bool cross, raw;
    double f1_drop;
};

static void gate_init(void *p)
{
    *(struct gate_opts *)p = (struct gate_opts){.f1_drop = tern_eval_gate_default_params().f1_drop_max};
}

#define G struct gate_opts
static const struct cli_option gate_table[] = {
    {.meta = "CURRENT.json", .kind = CLI_PATH, CLI_AT(G, current),
     .help = "the speed report to gate (tern bench --suite --json)"},
    {NULL, "--baseline", CLI_PATH, "BLESSED.json", CLI_AT(G, baseline),
     .def = "baselines/<profile key>.json as written by tern bless", .help = "the baseline"},
    {NULL, "--allow-cross-hw", CLI_FLAG, NULL, CLI_AT(G, cross),
     .help = "compare reports of different hardware profiles instead of refusing"},
    {NULL, "--raw", CLI_FLAG, NULL, CLI_AT(G, raw),
     .help = "gate TTFT as measured, without allowing for the machine's own speed"},
    {NULL, "--eval-baseline", CLI_PATH, "EVAL0.json", CLI_AT(G, eval_base),
     .help = "a tern eval --json report, the quality baseline (with --eval)"},
    {NULL, "--eval", CLI_PATH, "EVAL1.json", CLI_AT(G, eval_cur),
     .help = "the tern eval --json report to gate against --eval-baseline"},
    {NULL, "--f1-drop", CLI_DOUBLE, "D", CLI_AT(G, f1_drop), CLI_FRANGE(0, 1),
     .help = "how far strict F1 may drop"},
    {0},
};
#undef G

const struct cli_command cli_spec_gate = {
    "gate", "[--baseline BLESSED.json] CURRENT.json [--allow-cross-hw] [--raw]\n"
    "                 [--eval-baseline EVAL0.json --eval EVAL1.json [--f1-drop D]]\n"
    "       tern gate --eval-baseline EVAL0.json --eval EVAL1.json [--f1-drop D]",
    "Exit 0: within every limit; 1: a metric regressed past its limit (TTFT p50/p95 grew or\n"
    "TPS p50/p95 fell by more than 5 %, TTFA p95 above 25 tokens, residency down more than\n"
    "10 points; limits from the baseline's hardware profile); 2: refused (different hardware\n"
    "profile without --allow-cross-hw, different suite) or a bad report (named with its key).\n"
    "Without --baseline: baselines/<profile key>.json as written by tern bless.\n"
    "\n"
    "TTFT changes are gated after allowing for the machine's own speed during each run (the\n"
    "reports' machine_speed probe: a fixed int8 loop that is not tern's code, run between\n"
    "rounds), so a host that got 4 % slower since the baseline is not a 4 % regression. Not\n"
    "done when a report has no probe, the probes differ, or the machine moved by over 20 %;\n"
    "--raw gates TTFT as measured. TPS (decode, memory-bound) is always gated as measured.\n"
    "\n"
    "--eval-baseline / --eval: two tern eval --json reports of the same dataset, gated too:\n"
    "strict F1 may drop by at most D, leaked and failed cases may not grow;\n"
    "different datasets or case counts are refused. The exit code is the worse verdict.\n",
    gate_table, CLI_OPTS(struct gate_opts, gate_init), NULL,
};

int cmd_gate(int argc, char **argv)
{
    struct gate_opts o;
    gate_init(&o);
    const int pr = cli_parse(&cli_spec_gate, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *baseline = o.baseline, *current = o.current, *eval_base = o.eval_base,
               *eval_cur = o.eval_cur;
    const bool cross = o.cross, raw = o.raw;
    struct tern_eval_gate_params ep = tern_eval_gate_default_params();
    ep.out = stdout;
    ep.f1_drop_max = o.f1_drop;
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
