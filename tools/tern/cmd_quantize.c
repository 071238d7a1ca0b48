/* cmd_quantize.c — `tern quantize IN.gguf OUT.gguf TYPE [--lora FILE[:SCALE] ...]`; with --lora
 * the adapters are merged into the weights they adapt (tern_quantize_model_lora). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tern_gguf.h"

struct quantize_opts {
    const char *in, *out, *type;
    struct cli_lora_opts lora;
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
             "quantizing to TYPE (default SCALE 1)"}, {NULL}}},
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
    "atomically.\n",
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
    int fb = 0;
    tern_status st;
    if (lora.n) {
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
                lora.n ? ", adapters merged" : "",
                fb ? "; some tensors fell back to another type (rows not a multiple of the block)"
                   : "");
    return CLI_EXIT_OK;
}
