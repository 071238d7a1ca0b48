/* cli_grammar.c — constrained-decoding flags and reports shared by run, chat and bench (see
 * cli_grammar.h). */
#include "cli_grammar.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_options.h"

void cli_grammar_opts_init(struct cli_grammar_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gp = tern_grammar_default_params();
}

void cli_grammar_opts_free(struct cli_grammar_opts *o)
{
    free(o->src);
    o->src = NULL;
}

static const struct cli_choice ws_choices[] = {
    {"compact", TERN_GRAMMAR_WS_COMPACT},
    {"minified", TERN_GRAMMAR_WS_MINIFIED},
    {"flexible", TERN_GRAMMAR_WS_FLEXIBLE},
    {"one-line", TERN_GRAMMAR_WS_ONE_LINE},
    {NULL, 0},
};

#define G struct cli_grammar_opts
const struct cli_option cli_grammar_table[] = {
    {NULL, "--json-schema", CLI_PATH, "FILE", CLI_AT(G, schema), .group = "Constrained decoding",
     .help = "constrain the output to JSON valid for this schema (docs/tools.md \"Constrained "
             "decoding\"); generation ends when the document is complete (stop \"done\"); out of -n "
             "inside it: \"incomplete\""},
    {NULL, "--grammar", CLI_PATH, "FILE", CLI_AT(G, gbnf),
     .help = "constrain the output to a GBNF grammar (llama.cpp's format)"},
    {NULL, "--root", CLI_STRING, "NAME", CLI_AT(G, gp.root), .def = "root", .help = "GBNF start rule"},
    {NULL, "--schema-lenient", CLI_FLAG, NULL, CLI_AT(G, gp.lenient), CLI_GIVEN(G, have_params),
     .help = "ignore unsupported schema keywords (with a warning)"},
    {NULL, "--strict-properties", CLI_FLAG, NULL, CLI_AT(G, gp.strict_properties), CLI_GIVEN(G, have_params),
     .help = "objects without additionalProperties admit no other keys"},
    {NULL, "--ws", CLI_ENUM, "W", CLI_AT(G, gp.ws), CLI_GIVEN(G, have_ws), .choices = ws_choices,
     .help = "JSON whitespace: separators with or without one space; one-line is --tools' default"},
    {0},
};
#undef G

int cli_grammar_check(const char *cmd, const struct cli_grammar_opts *o, bool allow_params)
{
    if (o->schema && o->gbnf) return cli_usage_error(cmd, "give --json-schema or --grammar, not both");
    if (o->gp.root && !o->gbnf) return cli_usage_error(cmd, "--root applies to --grammar only");
    if ((o->have_params || o->have_ws) && !o->schema && !allow_params)
        return cli_usage_error(cmd, "--schema-lenient, --strict-properties and --ws apply to --json-schema");
    return 0;
}

int cli_grammar_read(const char *cmd, struct cli_grammar_opts *o)
{
    const char *path = o->schema ? o->schema : o->gbnf;
    if (!path) return 0;
    o->src = cli_read_file(path, &o->src_len);
    if (!o->src) {
        fprintf(stderr, "tern %s: cannot read %s %s: %s\n", cmd, o->schema ? "--json-schema" : "--grammar",
                path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return 0;
}

int cli_grammar_build(const char *cmd, const struct cli_grammar_opts *o, const struct tern_tokenizer *tok,
                      struct tern_grammar_vocab **v, struct tern_grammar **g)
{
    tern_status st = *v ? TERN_OK : tern_grammar_vocab_create(tok, v);
    if (st) return cli_report(cmd, st);
    const char *flag = o->schema ? "--json-schema" : "--grammar", *path = o->schema ? o->schema : o->gbnf;
    st = o->schema ? tern_grammar_from_json_schema(*v, o->src, o->src_len, &o->gp, g)
                   : tern_grammar_from_gbnf(*v, o->src, o->src_len, &o->gp, g);
    if (st) {
        fprintf(stderr, "tern %s: %s %s: %s: %s\n", cmd, flag, path, tern_status_name(st), tern_last_error());
        return CLI_EXIT_FAIL;
    }
    const char *w = tern_grammar_warnings(*g);
    if (w) fprintf(stderr, "tern %s: %s %s: warning: %s\n", cmd, flag, path, w);
    return 0;
}

void cli_grammar_print_stats(const char *cmd, FILE *f, const struct tern_gen_stats *gs)
{
    fprintf(f, "tern %s: grammar: %d masks, %.1f us/mask (CPU), %.2f ms grammar work in all; %d of %d "
            "tokens forced (not sampled)", cmd, gs->grammar_masks,
            gs->grammar_masks ? gs->grammar_mask_ms * 1e3 / gs->grammar_masks : 0.0, gs->grammar_ms,
            gs->grammar_forced, gs->n_generated);
    if (gs->grammar_draft_refused) fprintf(f, "; %d drafted tokens refused before verifying", gs->grammar_draft_refused);
    fprintf(f, "%s\n", gs->incomplete ? "; the output is INCOMPLETE (out of tokens inside the document)" : "");
}

void cli_grammar_json_stats(cJSON *obj, const struct tern_gen_stats *gs)
{
    cJSON *j = cJSON_AddObjectToObject(obj, "grammar");
    cJSON_AddNumberToObject(j, "masks", gs->grammar_masks);
    cJSON_AddNumberToObject(j, "mask_ms", gs->grammar_mask_ms);
    cJSON_AddNumberToObject(j, "mask_us_per_mask", gs->grammar_masks ? gs->grammar_mask_ms * 1e3 / gs->grammar_masks : 0);
    cJSON_AddNumberToObject(j, "grammar_ms", gs->grammar_ms);
    cJSON_AddNumberToObject(j, "forced_tokens", gs->grammar_forced);
    cJSON_AddNumberToObject(j, "draft_refused", gs->grammar_draft_refused);
    cJSON_AddBoolToObject(j, "incomplete", gs->incomplete);
}
