/* cmd_synth.c — `tern synth`: write a random-weight model with a real model's shape, optionally
 * with a real tokenizer copied from a vocabulary GGUF (src/model/synth.c does the work). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tern_gguf.h"

static void help(void)
{
    printf("usage: tern synth SHAPE:TYPE -o OUT.gguf [--seed S] [--vocab VOCAB.gguf]\n"
           "\n"
           "Writes a random-weight GGUF with the exact shape of a real model, using tern's own\n"
           "GGUF writer and quantizer (no download). Shapes: %s.\n"
           "Types: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m.\n"
           "\n"
           "  --vocab VOCAB.gguf  copy the tokenizer (every tokenizer.* key: tokens, types, merges,\n"
           "                      special ids, chat template if any) from this GGUF (a vocab-only\n"
           "                      file is enough) instead of the byte-level default; its size must\n"
           "                      be the shape's vocabulary size\n"
           "\n"
           "Example: tern synth qwen2.5-0.5b:q8_0 -o /tmp/qwen-0.5b-q8_0.gguf \\\n"
           "           --vocab ggml-vocab-qwen2-tiktoken.gguf\n",
           tern_synth_shape_names());
}

int cmd_synth(int argc, char **argv)
{
    const char *spec = NULL, *out = NULL, *vocab = NULL, *v;
    long long seed = 1;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        if ((r = cli_opt(argc, argv, &i, "-o", "--output", &v))) { if (r < 0) return 2; out = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--vocab", NULL, &v))) { if (r < 0) return 2; vocab = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--seed", "-s", &v))) {
            if (r < 0) return 2;
            if (!cli_parse_int(v, 0, INT64_MAX, &seed)) return cli_usage_error("synth", "--seed '%s' is not valid", v);
            continue;
        }
        if (!spec && argv[i][0] != '-') { spec = argv[i]; continue; }
        return cli_usage_error("synth", "unknown option '%s'", argv[i]);
    }
    if (!spec || !out) return cli_usage_error("synth", "need SHAPE:TYPE and -o OUT.gguf");
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
