/* cmd_gate.c — `tern gate --baseline blessed.json current.json [--allow-cross-hw]`: fail (exit 1)
 * when the current report is slower than the blessed baseline beyond its hardware profile's
 * limits (src/bench/bench_gate.c says which), refuse (exit 2) reports from different hardware
 * profiles or suites, and print the table of every metric, its change and its limit. Without
 * --baseline the baseline is the one `tern bless` stored for the current report's profile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_gov.h"

static void help(void)
{
    printf("usage: tern gate [--baseline BLESSED.json] CURRENT.json [--allow-cross-hw]\n"
           "\n"
           "Exit 0: within every limit; 1: a metric regressed past its limit (TTFT p50/p95 grew or\n"
           "TPS p50/p95 fell by more than 5 %%, TTFA p95 above 25 tokens, residency down more than\n"
           "10 points; limits from the baseline's hardware profile); 2: refused (different hardware\n"
           "profile without --allow-cross-hw, different suite) or a bad report (named with its key).\n"
           "Without --baseline: baselines/<profile key>.json as written by tern bless.\n");
}

int cmd_gate(int argc, char **argv)
{
    const char *baseline = NULL, *current = NULL, *v;
    bool cross = false;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return CLI_EXIT_OK; }
        if (!strcmp(argv[i], "--allow-cross-hw")) { cross = true; continue; }
        if ((r = cli_opt(argc, argv, &i, "--baseline", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            baseline = v;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("gate", "unknown option '%s'", argv[i]);
        } else if (current) {
            return cli_usage_error("gate", "one current report only ('%s' and '%s')", current, argv[i]);
        } else {
            current = argv[i];
        }
    }
    if (!current) return cli_usage_error("gate", "give the current report: tern gate --baseline BLESSED.json CURRENT.json");
    char path[600];
    if (!baseline) {
        char key[256];
        if (cli_bless_default_path(current, key, sizeof key, path, sizeof path)) return CLI_EXIT_USAGE;
        baseline = path;
    }
    struct tern_bench_gate_params gp = {.allow_cross_hw = cross, .out = stdout};
    enum tern_gate_verdict verdict;
    tern_status st = tern_bench_gate(baseline, current, &gp, &verdict);
    if (st) {
        fprintf(stderr, "tern gate: %s\n", tern_last_error());
        return CLI_EXIT_USAGE;
    }
    return verdict == TERN_GATE_PASS ? CLI_EXIT_OK : verdict == TERN_GATE_FAIL ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
}
