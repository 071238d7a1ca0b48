/* cli_head.h — a drafter's pruned head: its token ids from a list or from conversations
 * (cli_head.c). */
#ifndef TERN_CLI_HEAD_H
#define TERN_CLI_HEAD_H

#include <stdint.h>

#include "tern.h"

/* Token ids from a file of integers (white space, commas, or one JSON array), sorted, each once. */
TERN_NODISCARD tern_status cli_head_ids_read(const char *path, int32_t **ids, int *n);
/* The at most `size` tokens written most often where the conversations of data (rendered with
 * model's tokenizer and template, or template_file) are trained on, ascending; *coverage: the
 * share of those positions whose token they include. */
TERN_NODISCARD tern_status cli_head_ids_from_data(const char *model, const char *data,
                                                  const char *template_file, int size,
                                                  int32_t **ids, int *n, double *coverage);

#endif
