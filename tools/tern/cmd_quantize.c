/* cmd_quantize.c — `tern quantize IN.gguf OUT.gguf TYPE [--lora FILE[:SCALE] ...]`; with --lora
 * the adapters are merged into the weights they adapt (tern_quantize_model_lora). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tern_gguf.h"

int cmd_quantize(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: tern quantize IN.gguf OUT.gguf TYPE [--lora FILE[:SCALE] ...]\n\n"
               "Rewrites the model's 2-D weights in TYPE (f32, f16, bf16, q8_0, q5_1, q5_0, q4_1,\n"
               "q4_0, q4_k, q5_k, q6_k; or the mixes q4_k_m / q5_k_m, made as llama-quantize makes\n"
               "Q4_K_M / Q5_K_M). Plain types go everywhere (like llama-quantize --pure), except\n"
               "where a row is not a multiple of the block: Q4_K -> Q5_0, Q5_K -> Q5_1,\n"
               "Q6_K -> Q8_0, else F16.\n"
               "Norms and biases are kept. TYPE keep: every tensor stays in its own type (with\n"
               "--lora: the adapter merged into a model of its base's types). OUT is written\n"
               "atomically.\n\n"
               "  --lora FILE[:SCALE]  merge a LoRA adapter (llama.cpp's GGUF, checked against IN)\n"
               "                       into the weights: W + SCALE * alpha / r * B A, summed in F32\n"
               "                       before quantizing to TYPE (default SCALE 1; repeatable)\n");
        return CLI_EXIT_OK;
    }
    const char *pos[3];
    int n_pos = 0;
    struct cli_lora_opts lora = {0};
    for (int i = 1; i < argc; i++) {
        int r = cli_lora_opt(argc, argv, &i, &lora);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r) continue;
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("quantize", "unknown option '%s'", argv[i]);
        if (n_pos == 3) return cli_usage_error("quantize", "need IN.gguf OUT.gguf TYPE");
        pos[n_pos++] = argv[i];
    }
    if (n_pos != 3) return cli_usage_error("quantize", "need IN.gguf OUT.gguf TYPE");
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
