/* cli_lora.c — --lora FILE[:SCALE] for the commands that run a model (run, chat, probe, bench,
 * check): parsing, loading the adapters against the model (tern_lora_load) and attaching them to
 * a context (tern_context_set_adapters). The flag repeats; adapters add up, as llama.cpp's
 * --lora / --lora-scaled do. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tern_gguf.h"

/* FILE:SCALE when what follows the last ':' is a number; a path may hold ':' itself. The value
 * is cut at the ':' in place: it is argv's string (C11 5.1.2.2.1 lets the program change those)
 * or the environment's. */
static int lora_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct cli_lora_opts *o = opts;
    if (o->n == CLI_MAX_LORA) return cli_usage_error(cmd, "--lora: at most %d adapters", CLI_MAX_LORA), -1;
    char *v = (char *)val;
    double scale = 1.0;
    const char *colon = strrchr(v, ':');
    if (colon && colon > v && cli_parse_float(colon + 1, -1e6, 1e6, &scale)) v[colon - v] = '\0';
    else scale = 1.0;
    o->path[o->n] = v;
    o->scale[o->n] = (float)scale;
    o->n++;
    return 0;
}

const struct cli_option cli_lora_table[] = {
    {NULL, "--lora", CLI_CALL, "FILE[:SCALE]", .call = lora_take, .flags = CLI_REPEAT,
     .help = "a LoRA adapter (llama.cpp's GGUF) at SCALE (default 1); adapters add up"},
    {0},
};

int cli_lora_load(const char *cmd, struct cli_lora_opts *o, const struct tern_model *m, FILE *note)
{
    for (int i = 0; i < o->n; i++) {
        if (o->ad[i]) continue;
        tern_status st = tern_lora_load(m, o->path[i], &o->ad[i]);
        if (st) return cli_report(cmd, st);
        if (!note) continue;
        struct tern_lora_info in;
        tern_lora_get_info(o->ad[i], &in);
        fprintf(note, "tern %s: LoRA %s: %d matrices, rank %d", cmd, o->path[i], in.n_targets,
                in.rank_min);
        if (in.rank_max != in.rank_min) fprintf(note, "..%d", in.rank_max);
        fprintf(note, ", alpha %g, scale %g (%s, %.1f MiB as F32)\n", in.alpha, o->scale[i],
                in.type_a >= 0 ? tern_type_name(in.type_a) : "empty", in.bytes / 1048576.0);
    }
    return CLI_EXIT_OK;
}

int cli_lora_attach(const char *cmd, struct cli_lora_opts *o, struct tern_context *ctx)
{
    if (!o->n) return CLI_EXIT_OK;
    tern_status st = tern_context_set_adapters(ctx, o->ad, o->scale, o->n);
    return st ? cli_report(cmd, st) : CLI_EXIT_OK;
}

const char *cli_lora_template(const struct cli_lora_opts *o)
{
    for (int i = 0; i < o->n; i++)
        if (o->ad[i] && tern_lora_chat_template(o->ad[i])) return tern_lora_chat_template(o->ad[i]);
    return NULL;
}

void cli_lora_free(struct cli_lora_opts *o)
{
    for (int i = 0; i < o->n; i++) {
        tern_lora_free(o->ad[i]);
        o->ad[i] = NULL;
    }
}
