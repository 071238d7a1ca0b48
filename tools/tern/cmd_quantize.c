/* cmd_quantize.c — `tern quantize IN.gguf OUT.gguf TYPE`. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

int cmd_quantize(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: tern quantize IN.gguf OUT.gguf TYPE\n\n"
               "Rewrites the model's 2-D weights in TYPE (f32, f16, bf16, q8_0, q5_1, q5_0, q4_1,\n"
               "q4_0, q4_k, q5_k, q6_k; or the mixes q4_k_m / q5_k_m, made as llama-quantize makes\n"
               "Q4_K_M / Q5_K_M). Plain types go everywhere (like llama-quantize --pure), except\n"
               "where a row is not a multiple of the block: Q4_K -> Q5_0, Q5_K -> Q5_1,\n"
               "Q6_K -> Q8_0, else F16.\n"
               "Norms and biases are kept. OUT is written atomically.\n");
        return CLI_EXIT_OK;
    }
    if (argc != 4) return cli_usage_error("quantize", "need IN.gguf OUT.gguf TYPE");
    if (!strcmp(argv[1], argv[2])) return cli_usage_error("quantize", "IN and OUT must differ");
    int fb = 0;
    tern_status st = tern_quantize_model(argv[1], argv[2], argv[3], &fb);
    if (st) return cli_report("quantize", st);
    struct stat a, b;
    if (stat(argv[1], &a) == 0 && stat(argv[2], &b) == 0)
        fprintf(stderr, "tern quantize: %s (%.1f MiB) -> %s (%.1f MiB) as %s%s\n", argv[1],
                a.st_size / 1048576.0, argv[2], b.st_size / 1048576.0, argv[3],
                fb ? "; some tensors fell back to another type (rows not a multiple of the block)"
                   : "");
    return CLI_EXIT_OK;
}
