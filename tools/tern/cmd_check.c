/* cmd_check.c — `tern check`: can tern run this model, and what will it cost? Architecture,
 * hyperparameters, tensor types with counts and bytes, KV cache size per context length. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void help(void)
{
    printf("usage: tern check -m MODEL [--json]\n"
           "\n"
           "Loads the model (validating every tensor's type and shape) and prints its\n"
           "architecture, hyperparameters, tensor types with counts and bytes, and the KV cache\n"
           "size at 512/1024/2048/4096 context as (layers, kv_heads, head_dim, ctx) -> bytes.\n"
           "Exits 1 with the reason if tern cannot run the model.\n");
}

int cmd_check(int argc, char **argv)
{
    const char *model = NULL, *v;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
        if ((r = cli_opt(argc, argv, &i, "-m", "--model", &v))) { if (r < 0) return 2; model = v; continue; }
        if (!model && argv[i][0] != '-') { model = argv[i]; continue; }
        return cli_usage_error("check", "unknown option '%s'", argv[i]);
    }
    if (!model) return cli_usage_error("check", "missing -m MODEL");
    struct tern_model *m;
    tern_status st = tern_model_load(model, NULL, &m);
    if (st) return cli_report("check", st);
    const struct tern_model_info *in = tern_model_get_info(m);
    const struct tern_gguf *g = tern_model_gguf(m);

    /* tensor types: counts and bytes */
    int64_t count[TERN_TYPE_COUNT_] = {0};
    uint64_t bytes[TERN_TYPE_COUNT_] = {0}, params = 0;
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        count[t->type]++;
        bytes[t->type] += t->nbytes;
        uint64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++) ne *= (uint64_t)t->ne[d];
        params += ne;
    }
    static const int ctxs[] = {512, 1024, 2048, 4096};
    if (json) {
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"n_vocab\": %d, \"n_embd\": %d, \"n_layer\": %d, "
               "\"n_head\": %d, \"n_head_kv\": %d, \"head_dim\": %d, \"n_ff\": %d, \"n_ctx_train\": %d, "
               "\"n_rot\": %d, \"rope_freq_base\": %g, \"rope_freq_scale\": %g, \"rope_neox\": %s, "
               "\"rope_freqs\": %s, \"rms_eps\": %g, \"tied_output\": %s, \"qkv_bias\": %s, "
               "\"params\": %llu, \"weight_bytes\": %llu, \"file_bytes\": %zu, \"tensor_types\": {",
               model, in->arch_name, in->n_vocab, in->n_embd, in->n_layer, in->n_head, in->n_head_kv,
               in->head_dim, in->n_ff, in->n_ctx_train, in->n_rot, (double)in->rope_freq_base,
               (double)in->rope_freq_scale, in->rope_neox ? "true" : "false",
               in->has_rope_freqs ? "true" : "false", (double)in->rms_eps,
               in->tied_output ? "true" : "false", in->has_qkv_bias ? "true" : "false",
               (unsigned long long)params, (unsigned long long)in->weight_bytes,
               tern_gguf_file_size(g));
        bool first = true;
        for (int t = 0; t < TERN_TYPE_COUNT_; t++)
            if (count[t]) {
                printf("%s\"%s\": {\"count\": %lld, \"bytes\": %llu}", first ? "" : ", ",
                       tern_type_name(t), (long long)count[t], (unsigned long long)bytes[t]);
                first = false;
            }
        printf("}, \"kv_cache\": [");
        for (int i = 0; i < 4; i++)
            printf("%s{\"layers\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"ctx\": %d, \"bytes\": %llu}",
                   i ? ", " : "", in->n_layer, in->n_head_kv, in->head_dim, ctxs[i],
                   (unsigned long long)tern_model_kv_bytes(m, ctxs[i]));
        printf("]}\n");
    } else {
        printf("model:         %s (%zu bytes, GGUF v%u)\n", model, tern_gguf_file_size(g),
               tern_gguf_version(g));
        printf("architecture:  %s\n", in->arch_name);
        printf("parameters:    %llu\n", (unsigned long long)params);
        printf("vocab:         %d\n", in->n_vocab);
        printf("n_embd:        %d\n", in->n_embd);
        printf("n_layer:       %d\n", in->n_layer);
        printf("heads:         %d query, %d kv (GQA group %d), head_dim %d\n", in->n_head,
               in->n_head_kv, in->n_head / in->n_head_kv, in->head_dim);
        printf("n_ff:          %d\n", in->n_ff);
        printf("context:       %d (training)\n", in->n_ctx_train);
        printf("rope:          %s, %d dims, base %g, scale %g%s\n", in->rope_neox ? "neox" : "norm",
               in->n_rot, (double)in->rope_freq_base, (double)in->rope_freq_scale,
               in->has_rope_freqs ? ", frequency factors (rope_freqs)" : "");
        printf("rms epsilon:   %g\n", (double)in->rms_eps);
        printf("output:        %s\n", in->tied_output ? "tied to token_embd" : "separate output.weight");
        printf("q/k/v biases:  %s\n", in->has_qkv_bias ? "yes" : "no");
        printf("tensors:       %lld (%llu bytes)\n", (long long)tern_gguf_n_tensors(g),
               (unsigned long long)in->weight_bytes);
        for (int t = 0; t < TERN_TYPE_COUNT_; t++)
            if (count[t])
                printf("  %-6s %5lld tensors %14llu bytes\n", tern_type_name(t), (long long)count[t],
                       (unsigned long long)bytes[t]);
        printf("KV cache (F16 K+V):\n");
        for (int i = 0; i < 4; i++)
            printf("  (%d, %d, %d, %d) -> %llu bytes\n", in->n_layer, in->n_head_kv, in->head_dim,
                   ctxs[i], (unsigned long long)tern_model_kv_bytes(m, ctxs[i]));
        printf("status:        ok (every tensor has a supported type and the expected shape)\n");
    }
    tern_model_free(m);
    return CLI_EXIT_OK;
}
