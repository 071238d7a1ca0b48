/* cli_train.h — what tern train and tern distill share: reading training data (conversations
 * rendered with a tokenizer GGUF's template, or .tdat documents) and the training loop (steps,
 * progress lines or --json, validation, checkpoints, the stop on NaN/Inf, export). */
#ifndef TERN_CLI_TRAIN_H
#define TERN_CLI_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "cli_options.h"
#include "tern.h"
#include "tern_train.h"

/* A .jsonl of conversations rendered with the GGUF `tokenizer`'s tokenizer and chat template
 * (conversations longer than n_ctx skipped and counted on stderr), or a .tdat file. mark_tools:
 * answers whose tool calls validate (tern eval's validator) are marked in the mask for the early
 * tool-call loss (tern.h, data file). doc_lines (may be NULL): for a .jsonl, a malloc'ed array of
 * each document's file line (else NULL). */
/* .jsonl is rendered with template_file's template when given (NULL or "": the tokenizer
 * GGUF's own). */
TERN_NODISCARD tern_status cli_train_load_data_tmpl(const char *cmd, const char *path, const char *tokenizer,
                                     const char *template_file, int n_ctx, bool strict,
                                     bool loss_on_prompt, bool mark_tools, int64_t **doc_lines,
                                     struct tern_train_data **out);
bool cli_ends_with(const char *s, const char *suffix);

/* Data parallelism under mpirun (cli_par.c). Outside an MPI launch: rank 0 of 1. */
struct cli_par {
    int rank, size;
};
int cli_par_init(const char *cmd, struct cli_par *p); /* an exit code: 0 = ok */
void cli_par_finish(void);
bool cli_par_allreduce(void *user, void *buf, size_t n, bool is_double); /* tern_allreduce_fn */
/* true when ok is true in every process (a barrier too) */
bool cli_par_all_ok(const struct cli_par *p, bool ok);

struct cli_distill_speed; /* cli_distill_speed.h */
struct cli_distill_length; /* cli_distill_length.h */
struct cli_train_run {
    const char *cmd;                         /* "train" or "distill" (messages) */
    struct tern_trainer *t;
    const struct tern_train_config *c;
    const struct tern_train_data *d, *vd;    /* vd may be NULL */
    const struct tern_distill_cache *kd, *vkd; /* distillation (kd != NULL), else NULL */
    const char *ckdir, *out;
    bool json, resumed;
    int last;                                /* run steps until this one */
    long long val_every;
    int rank;                                /* data parallelism: only rank 0 prints and writes */
    struct cli_distill_speed *speed;         /* speed proxies after each validation, or NULL */
    struct cli_distill_length *length;       /* length-aware KD's minings before steps, or NULL */
    bool latency;                            /* latency weights on: the safety rail logs its moves */
    const struct tern_distill_recipe *recipe;/* distillation's recipe (length buckets), or NULL */
};
/* Run the steps, validate every val_every steps and at the end, checkpoint every ckpt_every
 * steps and at the end, export to out. Returns the process exit code. */
int cli_train_loop(const struct cli_train_run *r);

/* tern train's and tern distill's LoRA flags: --lora-base MODEL, --lora-rank R, --lora-alpha A,
 * --lora-dropout P, --lora-targets LIST, --chat-template-file FILE. */
struct cli_lora_train_opts {
    const char *base, *targets, *template_file;
    long long rank;
    double alpha, dropout;
    bool given;          /* any of them */
};
/* Those flags as an option table (cli_options.h) over struct cli_lora_train_opts, for
 * CLI_INCLUDE. */
extern const struct cli_option cli_lora_train_table[];
/* --lora-base onto c, before its config file is parsed over it (tern_train_config_parse_over). */
TERN_NODISCARD tern_status cli_lora_train_base(const struct cli_lora_train_opts *o, struct tern_train_config *c);
/* The other flags over c (after its config file): errors name the flag. */
TERN_NODISCARD tern_status cli_lora_train_apply(const struct cli_lora_train_opts *o, struct tern_train_config *c);
/* "tern CMD: LoRA rank .., alpha .., dropout .. on BASE (frozen); N adapter parameters" on stderr,
 * for a trainer made from c with a LoRA base. */
void cli_lora_train_report(const char *cmd, struct tern_trainer *t, const struct tern_train_config *c);
#endif
