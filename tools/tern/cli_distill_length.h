/* cli_distill_length.h — tern distill's length-aware KD (read cli_distill_length.c):
 * every length_kd_every steps the student answers a slice of the training prompts, and the
 * documents it answered too long and incomplete weigh more. */
#ifndef TERN_CLI_DISTILL_LENGTH_H
#define TERN_CLI_DISTILL_LENGTH_H

#include <stdbool.h>
#include <stdint.h>

#include "tern.h"
#include "tern_train.h"

struct cli_distill_length;
struct cli_distill_length_params {
    const char *teacher;          /* the teacher's GGUF (answers once per case, remembered) */
    const char *data;             /* the training conversations (.jsonl, tern corpus's format) */
    const int64_t *doc_lines;     /* (n_docs) the file line of each training document */
    uint64_t n_docs;
    const struct tern_distill_recipe *recipe;
    const char *dir;              /* the checkpoint directory: the cases file and the student's copy */
    uint64_t step_tokens;         /* tokens a training step draws (batch_tokens x accum) */
    int threads, n_ctx;
    bool json;                    /* JSON lines on stdout, else a line on stderr */
};
/* Turn the data's tool-calling answers into cases and tie each to its document. */
TERN_NODISCARD tern_status cli_distill_length_open(const struct cli_distill_length_params *p,
                                    struct cli_distill_length **out);
/* Before training step step + 1: when step is a multiple of length_kd_every (and at a run's or a
 * resumed run's first step), mine the documents of d the next length_kd_every steps will draw
 * and set the trainer's document weights; otherwise nothing. */
TERN_NODISCARD tern_status cli_distill_length_step(struct cli_distill_length *m, struct tern_trainer *t,
                                    const struct tern_train_data *d, int step);
/* How many answers that call tools the data holds (0: nothing to mine). */
int cli_distill_length_cases(const struct cli_distill_length *m);
void cli_distill_length_free(struct cli_distill_length *m);

#endif
