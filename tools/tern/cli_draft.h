/* cli_draft.h — the speculative decoding flags of `tern run`, `tern chat` and `tern bench`
 * (--draft SRC, --draft-max K, --draft-min K) and how the commands report what speculation did
 * (one stderr line, a "spec" JSON object). The library does the work: include/tern.h
 * "speculative decoding". */
#ifndef TERN_CLI_DRAFT_H
#define TERN_CLI_DRAFT_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cli_options.h"
#include "tern.h"

struct cli_draft_opts {
    const char *source;       /* --draft: "ngram", "self:TYPE" or a GGUF path; NULL = none */
    long long n_max, n_min;   /* --draft-max / --draft-min; 0 = the library's defaults */
};

/* The three flags as an option table (cli_options.h) over struct cli_draft_opts (CLI_INCLUDE). */
extern const struct cli_option cli_draft_table[];
/* Flags that make sense only with --draft given without it: a usage error (printed, 2), else 0. */
int cli_draft_check(const char *cmd, const struct cli_draft_opts *o);
/* Make the draft for target with a drafter context of n_ctx positions and `threads` threads (0 =
 * all CPUs); on failure the message is printed and the exit status returned (0 on success). With
 * log, one line says what was set up and in how long (a self:TYPE copy is converted here). */
int cli_draft_create(const char *cmd, const struct cli_draft_opts *o, const struct tern_model *target,
                     int n_ctx, int threads, FILE *log, struct tern_draft **out);
/* "tern CMD: speculative (KIND): ..." on f: drafted, accepted, rates, rollback, times, tokens/s. */
void cli_draft_print_stats(const char *cmd, FILE *f, const struct tern_draft *d,
                           const struct tern_gen_stats *gs);
/* The same as a "spec" object added to obj. */
void cli_draft_json_stats(cJSON *obj, const struct tern_draft *d, const struct tern_gen_stats *gs);
/* `tern bench --draft` (cmd_bench_draft.c): plain vs speculative decoding of the built-in prompts
 * and prompt_files on model (layer_scale > 0 / widen_ffn > 1: on the copy cli_model_scaled /
 * cli_model_widened makes); returns the exit status. */
int cli_bench_draft(const char *model, const struct cli_draft_opts *dro, int threads, int n_gen,
                    int reps, const struct tern_sampler_params *sp, const char *const *prompt_files,
                    int n_files, double layer_scale, int widen_ffn, bool json);
/* Copies of a model written once beside it (cli_model_copy.c); out receives the copy's path;
 * return 0 or the exit status after saying what failed.
 * cli_model_scaled: attn_output and ffn_down x scale (<in>-layersS.gguf);
 * cli_model_widened: the feed-forward width x factor with zero rows, the same function
 * (<in>-ffnxN.gguf). */
int cli_model_scaled(const char *in, double scale, char *out, size_t cap);
int cli_model_widened(const char *in, int factor, char *out, size_t cap);

#endif
