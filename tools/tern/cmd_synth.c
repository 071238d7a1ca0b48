/* cmd_synth.c — `tern synth`: write a random-weight model with a real model's shape, optionally
 * with a real tokenizer copied from a vocabulary GGUF (src/model/synth.c does the work). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tern_gguf.h"

struct synth_opts {
    const char *spec, *out, *vocab;
    long long seed;
};

static void synth_init(void *p)
{
    *(struct synth_opts *)p = (struct synth_opts){.seed = 1};
}

#define S struct synth_opts
static const struct cli_option synth_table[] = {
    {.meta = "SHAPE:TYPE", .kind = CLI_STRING, CLI_AT(S, spec), .flags = CLI_REQUIRED,
     .help = "a real model's shape (the list follows with --help) and a weight type: f32, f16, bf16, "
             "q8_0, q4_0, q4_k, q6_k, q4_k_m"},
    {"-o", "--output", CLI_PATH, "OUT.gguf", CLI_AT(S, out), .flags = CLI_REQUIRED,
     .help = "the model to write"},
    {"-s", "--seed", CLI_INT, "S", CLI_AT(S, seed), CLI_RANGE(0, INT64_MAX), .help = "RNG seed of the weights"},
    {NULL, "--vocab", CLI_PATH, "VOCAB.gguf", CLI_AT(S, vocab),
     .help = "copy the tokenizer (every tokenizer.* key: tokens, types, merges, special ids, chat "
             "template if any) from this GGUF (a vocab-only file is enough) instead of the byte-level "
             "default; its size must be the shape's vocabulary size"},
    {0},
};
#undef S

const struct cli_command cli_spec_synth = {
    "synth", "SHAPE:TYPE -o OUT.gguf [--seed S] [--vocab VOCAB.gguf]",
    "Writes a random-weight GGUF with the exact shape of a real model, using tern's own\n"
    "GGUF writer and quantizer (no download). `tern synth --help` ends with the shapes.\n",
    synth_table, CLI_OPTS(struct synth_opts, synth_init),
    "Example: tern synth qwen2.5-0.5b:q8_0 -o /tmp/qwen-0.5b-q8_0.gguf \\\n"
    "           --vocab ggml-vocab-qwen2-tiktoken.gguf\n",
};

int cmd_synth(int argc, char **argv)
{
    /* the shapes are the library's list, so --help adds them after the table's text */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            cli_print_help(&cli_spec_synth, stdout, 100);
            printf("\nShapes: %s.\n", tern_synth_shape_names());
            return CLI_EXIT_OK;
        }
    struct synth_opts o;
    synth_init(&o);
    const int pr = cli_parse(&cli_spec_synth, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *spec = o.spec, *out = o.out, *vocab = o.vocab;
    const long long seed = o.seed;
    const char *colon = strchr(spec, ':');
    if (!colon || colon == spec || !colon[1] || colon - spec >= 64)
        return cli_usage_error("synth", "'%s' is not SHAPE:TYPE (e.g. qwen2.5-0.5b:q8_0)", spec);
    char shape[64];
    memcpy(shape, spec, (size_t)(colon - spec));
    shape[colon - spec] = '\0';
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int fallbacks = 0;
    tern_status st = tern_synth_model_write_vocab(shape, colon + 1, (uint64_t)seed, vocab, out,
                                                  &fallbacks);
    if (st) return cli_report("synth", st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "tern synth: wrote %s (%s) in %.1f s%s\n", out, spec,
            (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
            fallbacks ? "; some tensors fell back to Q8_0 (rows not a multiple of the block)" : "");
    return CLI_EXIT_OK;
}
