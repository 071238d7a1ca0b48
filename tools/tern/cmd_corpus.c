/* cmd_corpus.c — `tern corpus toolcalls`: write the synthetic tool-calling corpus
 * (tern_corpus_toolcalls_write; the generator lives in src/corpus/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tern_train.h"

static void help(void)
{
    printf("usage: tern corpus toolcalls -o DIR [--seed S] [--size N] [--val-percent P]\n"
           "                             [--test-percent P] [--json]\n"
           "\n"
           "Writes a synthetic tool-calling corpus in the OpenAI chat format, generated from tern's\n"
           "own word lists and templates (no dataset is copied): DIR/train.jsonl, val.jsonl,\n"
           "test.jsonl (one conversation per line: messages, tools, meta) and DIR/manifest.json\n"
           "(seed, counts per kind and domain, SHA-256 of each file). Files are written to a .tmp\n"
           "name and renamed. The test split only offers tools that never occur in train or val.\n"
           "\n"
           "  -o, --output DIR     output directory (created if absent)\n"
           "  -s, --seed S         seed (default 1): same seed and size give identical files\n"
           "  -n, --size N         conversations over all splits (default 60000)\n"
           "  --val-percent P      share of val (default 5)\n"
           "  --test-percent P     share of test (default 5)\n"
           "  --json               print the manifest on stdout\n"
           "\n"
           "Example: tern corpus toolcalls -o corpus --seed 1 --size 60000\n");
}

int cmd_corpus(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        help();
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "toolcalls")) return cli_usage_error("corpus", "unknown corpus '%s' (known: toolcalls)", argv[1]);
    struct tern_corpus_params p = tern_corpus_default_params();
    const char *out = NULL, *v;
    bool json = false;
    for (int i = 2; i < argc; i++) {
        int r;
        long long x;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return CLI_EXIT_OK; }
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
        if ((r = cli_opt(argc, argv, &i, "-o", "--output", &v))) { if (r < 0) return CLI_EXIT_USAGE; out = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--seed", "-s", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!cli_parse_int(v, 0, INT64_MAX, &x)) return cli_usage_error("corpus", "--seed '%s' is not a number >= 0", v);
            p.seed = (uint64_t)x;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--size", "-n", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!cli_parse_int(v, 3, 100000000, &x)) return cli_usage_error("corpus", "--size '%s' is not in 3 .. 100000000", v);
            p.size = x;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--val-percent", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!cli_parse_int(v, 1, 45, &x)) return cli_usage_error("corpus", "--val-percent '%s' is not in 1 .. 45", v);
            p.val_percent = (int)x;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--test-percent", NULL, &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!cli_parse_int(v, 1, 45, &x)) return cli_usage_error("corpus", "--test-percent '%s' is not in 1 .. 45", v);
            p.test_percent = (int)x;
            continue;
        }
        return cli_usage_error("corpus", "unknown option '%s'", argv[i]);
    }
    if (!out) return cli_usage_error("corpus", "need -o DIR");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct tern_corpus_report rep;
    tern_status st = tern_corpus_toolcalls_write(out, &p, &rep);
    if (st) return cli_report("corpus", st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr,
            "tern corpus: wrote %s in %.1f s: train %lld (%.1f MiB), val %lld, test %lld conversations; "
            "tool pool %d (%d test-only) in %d domains; tools offered: train %d, val %d, test %d\n",
            out, secs, (long long)rep.n_train, rep.bytes[0] / 1048576.0, (long long)rep.n_val,
            (long long)rep.n_test, rep.n_tools, rep.n_tools_test, rep.n_domains, rep.n_tools_used[0],
            rep.n_tools_used[1], rep.n_tools_used[2]);
    if (json) {
        char path[4096];
        snprintf(path, sizeof path, "%s/manifest.json", out);
        size_t len;
        char *text = cli_read_file(path, &len);
        if (!text) {
            fprintf(stderr, "tern corpus: cannot read %s\n", path);
            return CLI_EXIT_FAIL;
        }
        fwrite(text, 1, len, stdout);
        free(text);
    }
    return CLI_EXIT_OK;
}
