/* cli_grammar.h — the constrained-decoding flags of `tern run`, `tern chat` and `tern bench`
 * (--json-schema FILE, --grammar FILE, --schema-lenient, --strict-properties, --ws, --root) and
 * how the commands report what the grammar did (one stderr line, a "grammar" JSON object). The
 * library does the work: include/tern.h "grammar" and tern_gen_params.grammar. */
#ifndef TERN_CLI_GRAMMAR_H
#define TERN_CLI_GRAMMAR_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cli_options.h"
#include "tern.h"

struct cli_grammar_opts {
    const char *schema, *gbnf;        /* --json-schema FILE / --grammar FILE, or NULL */
    struct tern_grammar_params gp;    /* --schema-lenient --strict-properties --ws --root */
    bool have_params;                 /* --schema-lenient or --strict-properties was given */
    bool have_ws;                     /* --ws was given */
    char *src;                        /* the file's text (cli_grammar_read), owned */
    size_t src_len;
};
void cli_grammar_opts_init(struct cli_grammar_opts *o);
void cli_grammar_opts_free(struct cli_grammar_opts *o);
/* The flags above as an option table (cli_options.h) over struct cli_grammar_opts, for
 * CLI_INCLUDE; the struct must be set up by cli_grammar_opts_init first. */
extern const struct cli_option cli_grammar_table[];
/* Both --json-schema and --grammar, or schema flags without either (allow_params: the command
 * has another use for them, chat's --tools): a usage error (printed, 2), else 0. */
int cli_grammar_check(const char *cmd, const struct cli_grammar_opts *o, bool allow_params);
/* Read the grammar file (before the model is loaded, so a missing file costs nothing). 0 or
 * the exit status after printing why. */
int cli_grammar_read(const char *cmd, struct cli_grammar_opts *o);
/* Compile it against tok: the vocabulary (*v, made here unless *v is already set) and the
 * grammar; errors name the flag and the file. Warnings of --schema-lenient go to stderr.
 * 0 or the exit status. */
int cli_grammar_build(const char *cmd, const struct cli_grammar_opts *o, const struct tern_tokenizer *tok,
                      struct tern_grammar_vocab **v, struct tern_grammar **g);
/* "tern CMD: grammar: N masks, X us/token (CPU), F forced tokens, ..." */
void cli_grammar_print_stats(const char *cmd, FILE *f, const struct tern_gen_stats *gs);
/* The same as a "grammar" object added to obj. */
void cli_grammar_json_stats(cJSON *obj, const struct tern_gen_stats *gs);

/* `tern bench --json-schema/--grammar` (cmd_bench_grammar.c): constrained vs unconstrained
 * greedy decoding of the same number of tokens on model, reps alternating rounds; exit status. */
int cli_bench_grammar(const char *model, struct cli_grammar_opts *gro, int threads, int n_gen, int reps,
                      bool json);

/* `tern grammar check --masks FILE` (cmd_grammar_masks.c): every step's allowed-token set as a
 * count and an order-independent hash, one JSON line per document, for comparing engines. */
struct cli_masks;
/* What one allowed id adds to a step's hash (the hash is the sum of these modulo 2^64). */
uint64_t cli_masks_id_hash(int32_t id);
struct cli_mask_at { long long doc, step; }; /* a document from 1, a step from 0 */
/* --mask-ids DOC:STEP[,DOC:STEP...] into *at (malloc'ed, caller frees) and *n; 0, or the usage
 * error's status (printed). */
int cli_masks_parse_at(const char *cmd, const char *s, struct cli_mask_at **at, size_t *n);
/* Start FILE.tmp with the header line; at/n_at: --mask-ids (borrowed until close; none: NULL, 0).
 * -1 on success (*out owned by the caller: cli_masks_close or cli_masks_abandon), else the exit
 * status (printed). */
int cli_masks_open(const char *cmd, const char *path, const struct cli_mask_at *at, size_t n_at,
                   const struct tern_tokenizer *tok, struct cli_masks **out);
void cli_masks_begin(struct cli_masks *w);                                /* a document starts */
void cli_masks_step(struct cli_masks *w, const uint32_t *mask, double us); /* one filled mask */
/* The document's line: its tokens and the steps recorded since cli_masks_begin. */
void cli_masks_end(struct cli_masks *w, const int32_t *tokens, size_t n_tokens, bool accepted);
/* Finish: rename FILE.tmp to FILE; frees w. The exit status (a failure printed). */
int cli_masks_close(const char *cmd, struct cli_masks *w);
/* Free w and remove FILE.tmp (an error elsewhere: no half-written FILE). NULL is fine. */
void cli_masks_abandon(struct cli_masks *w);

#endif
