/* cli_distill_seqkd.h — tern distill --sequence-kd: the teacher's own answers as the training
 * data (sequence-level KD; read cli_distill_seqkd.c). */
#ifndef TERN_CLI_DISTILL_SEQKD_H
#define TERN_CLI_DISTILL_SEQKD_H

#include <stdbool.h>

#include "tern.h"

struct cli_seqkd_params {
    const char *teacher_path;          /* the teacher's GGUF, answering */
    const struct tern_model *teacher;  /* the same, loaded: its fingerprint keys the cache */
    const char *data;                  /* the training conversations (.jsonl) */
    const char *dir;                   /* where the answers file and its key are kept */
    int threads, n_ctx, max_tokens;    /* max_tokens: longer answers are dropped as cut */
    bool may_build;                    /* false: only a file whose key matches may be used */
};
/* Write (or find, when its key matches teacher, data and settings) DIR/teacher-answers.jsonl:
 * one conversation per assistant message of the data, the messages before it followed by the
 * teacher's greedy answer (tool calls constrained by the conversation's tools). out gets its
 * path. Progress, a summary and any failure go to stderr. */
TERN_NODISCARD tern_status cli_seqkd_prepare(const struct cli_seqkd_params *p, char *out, size_t out_cap);

#endif
