/* cmd_quantize.c — `tern quantize IN.gguf OUT.gguf TYPE [--lora FILE[:SCALE] ...]
 * [--head-ids FILE | --head-data DATA.jsonl]`; with --lora the adapters are merged into the
 * weights they adapt (tern_quantize_model_lora); with --head-* the output head keeps only some
 * tokens (tern_quantize_model_head, for drafters: cli_head.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_head.h"
#include "tern_gguf.h"

struct quantize_opts {
    const char *in, *out, *type;
    struct cli_lora_opts lora;
    const char *head_ids, *head_data, *head_template;
    int head_size;
};

#define Q struct quantize_opts
static const struct cli_option quantize_table[] = {
    {.meta = "IN.gguf", .kind = CLI_PATH, CLI_AT(Q, in), .flags = CLI_REQUIRED, .help = "the model to rewrite"},
    {.meta = "OUT.gguf", .kind = CLI_PATH, CLI_AT(Q, out), .flags = CLI_REQUIRED,
     .help = "where to write it, atomically; not IN"},
    {.meta = "TYPE", .kind = CLI_STRING, CLI_AT(Q, type), .flags = CLI_REQUIRED,
     .help = "f32, f16, bf16, q8_0, q5_1, q5_0, q4_1, q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m or keep"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(Q, lora),
     .notes = (const struct cli_note[]){{"--lora", NULL, "merge a LoRA adapter (llama.cpp's GGUF, checked "
             "against IN) into the weights: W + SCALE * alpha / r * B A, summed in F32 before "
             "quantizing to TYPE (default SCALE 1); the adapter's chat template, when it carries "
             "one, replaces IN's"}, {NULL}}},
    {NULL, "--head-ids", CLI_PATH, "FILE", CLI_AT(Q, head_ids),
     .help = "a drafter's pruned head: keep only these tokens' rows of the output matrix (token ids: "
             "integers separated by white space or commas); the others get no logit"},
    {NULL, "--head-data", CLI_PATH, "DATA.jsonl", CLI_AT(Q, head_data),
     .help = "or keep --head-size tokens of these conversations (rendered with IN's tokenizer and "
             "template): those of the answers, most frequent first, then the rest, most frequent first"},
    {NULL, "--head-size", CLI_INT, "N", CLI_AT(Q, head_size), CLI_RANGE(1, 1 << 24),
     .help = "with --head-data: how many tokens (default 16384)"},
    {NULL, "--chat-template-file", CLI_PATH, "FILE", CLI_AT(Q, head_template),
     .help = "with --head-data: render with this template instead of IN's"},
    {0},
};
#undef Q

const struct cli_command cli_spec_quantize = {
    "quantize", "IN.gguf OUT.gguf TYPE [--lora FILE[:SCALE] ...]",
    "Rewrites the model's 2-D weights in TYPE (f32, f16, bf16, q8_0, q5_1, q5_0, q4_1,\n"
    "q4_0, q4_k, q5_k, q6_k; or the mixes q4_k_m / q5_k_m, made as llama-quantize makes\n"
    "Q4_K_M / Q5_K_M). Plain types go everywhere (like llama-quantize --pure), except\n"
    "where a row is not a multiple of the block: Q4_K -> Q5_0, Q5_K -> Q5_1,\n"
    "Q6_K -> Q8_0, else F16.\n"
    "Norms and biases are kept. TYPE keep: every tensor stays in its own type (with\n"
    "--lora: the adapter merged into a model of its base's types). OUT is written\n"
    "atomically. --head-ids / --head-data make a drafter's pruned head (tern only:\n"
    "docs/speculative.md).\n",
    quantize_table, CLI_OPTS(struct quantize_opts, NULL), NULL,
};

int cmd_quantize(int argc, char **argv)
{
    struct quantize_opts o = {0};
    const int pr = cli_parse(&cli_spec_quantize, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *pos[3] = {o.in, o.out, o.type};
    struct cli_lora_opts lora = o.lora;
    if (!strcmp(pos[0], pos[1])) return cli_usage_error("quantize", "IN and OUT must differ");
    if (o.head_ids && o.head_data)
        return cli_usage_error("quantize", "give --head-ids or --head-data, not both");
    if ((o.head_size || o.head_template) && !o.head_data)
        return cli_usage_error("quantize", "--head-size and --chat-template-file go with --head-data");
    const bool head = o.head_ids || o.head_data;
    if (head && lora.n)
        return cli_usage_error("quantize", "merge the adapters first, then prune the head of the merged "
                               "model (--lora and --head-* in two runs)");
    int fb = 0;
    tern_status st;
    if (head) {
        int32_t *ids = NULL;
        int n = 0;
        double cover = 1.0;
        st = o.head_ids ? cli_head_ids_read(o.head_ids, &ids, &n)
                        : cli_head_ids_from_data(pos[0], o.head_data, o.head_template,
                                                 o.head_size ? o.head_size : 16384, &ids, &n, &cover);
        if (!st) {
            if (o.head_data)
                fprintf(stderr, "tern quantize: head: %d tokens, %.2f %% of the trained positions "
                        "of %s\n", n, 100.0 * cover, o.head_data);
            st = tern_quantize_model_head(pos[0], pos[1], pos[2], ids, n, &fb);
        }
        free(ids);
    } else if (lora.n) {
        struct tern_model *m;
        st = tern_model_load(pos[0], &(struct tern_model_params){.no_repack = true}, &m);
        if (st) return cli_report("quantize", st);
        if (cli_lora_load("quantize", &lora, m, stderr)) {
            cli_lora_free(&lora);
            tern_model_free(m);
            return CLI_EXIT_FAIL;
        }
        st = tern_quantize_model_lora(pos[0], pos[1], pos[2], lora.ad, lora.scale, lora.n, &fb);
        cli_lora_free(&lora);
        tern_model_free(m);
    } else {
        st = tern_quantize_model(pos[0], pos[1], pos[2], &fb);
    }
    if (st) return cli_report("quantize", st);
    struct stat a, b;
    if (stat(pos[0], &a) == 0 && stat(pos[1], &b) == 0)
        fprintf(stderr, "tern quantize: %s (%.1f MiB) -> %s (%.1f MiB) as %s%s%s\n", pos[0],
                a.st_size / 1048576.0, pos[1], b.st_size / 1048576.0, pos[2],
                lora.n ? ", adapters merged" : head ? ", head pruned" : "",
                fb ? "; some tensors fell back to another type (rows not a multiple of the block)"
                   : "");
    return CLI_EXIT_OK;
}
