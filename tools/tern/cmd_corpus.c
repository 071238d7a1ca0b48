/* cmd_corpus.c — `tern corpus toolcalls`: write the synthetic tool-calling corpus
 * (tern_corpus_toolcalls_write; the generator lives in src/corpus/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tern_train.h"

struct corpus_opts {
    const char *out;
    bool json;
    struct tern_corpus_params p;
};

static void corpus_init(void *o)
{
    *(struct corpus_opts *)o = (struct corpus_opts){.p = tern_corpus_default_params()};
}

#define C struct corpus_opts
static const struct cli_option corpus_table[] = {
    {"-o", "--output", CLI_PATH, "DIR", CLI_AT(C, out), .flags = CLI_REQUIRED,
     .help = "output directory (created if absent)"},
    {"-s", "--seed", CLI_INT, "S", CLI_AT(C, p.seed), CLI_RANGE(0, INT64_MAX),
     .help = "seed: same seed and size give identical files"},
    {"-n", "--size", CLI_INT, "N", CLI_AT(C, p.size), CLI_RANGE(3, 100000000),
     .help = "conversations over all splits"},
    {NULL, "--val-percent", CLI_INT, "P", CLI_AT(C, p.val_percent), CLI_RANGE(1, 45), .help = "share of val"},
    {NULL, "--test-percent", CLI_INT, "P", CLI_AT(C, p.test_percent), CLI_RANGE(1, 45), .help = "share of test"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(C, json), .help = "print the manifest on stdout"},
    {0},
};
#undef C

const struct cli_command cli_spec_corpus_toolcalls = {
    "corpus toolcalls", "-o DIR [--seed S] [--size N] [--val-percent P] [--test-percent P] [--json]",
    "Writes a synthetic tool-calling corpus in the OpenAI chat format, generated from tern's\n"
    "own word lists and templates (no dataset is copied): DIR/train.jsonl, val.jsonl,\n"
    "test.jsonl (one conversation per line: messages, tools, meta) and DIR/manifest.json\n"
    "(seed, counts per kind and domain, SHA-256 of each file). Files are written to a .tmp\n"
    "name and renamed. The test split only offers tools that never occur in train or val.\n",
    corpus_table, CLI_OPTS(struct corpus_opts, corpus_init),
    "Example: tern corpus toolcalls -o corpus --seed 1 --size 60000\n",
};

int cmd_corpus(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        cli_print_help(&cli_spec_corpus_toolcalls, argc < 2 ? stderr : stdout, 100);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "toolcalls")) return cli_usage_error("corpus", "unknown corpus '%s' (known: toolcalls)", argv[1]);
    struct corpus_opts o;
    corpus_init(&o);
    const int pr = cli_parse(&cli_spec_corpus_toolcalls, argc - 1, argv + 1, &o);
    if (pr != CLI_PARSED) return pr;
    const char *out = o.out;
    const bool json = o.json;
    struct tern_corpus_params p = o.p;
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
