/* cli_head.h — a drafter's pruned head: its token ids from a list or from conversations
 * (cli_head.c). */
#ifndef TERN_CLI_HEAD_H
#define TERN_CLI_HEAD_H

#include <stdint.h>

#include "tern.h"

/* Token ids from a file of integers (white space, commas, or one JSON array), sorted, each once. */
TERN_NODISCARD tern_status cli_head_ids_read(const char *path, int32_t **ids, int *n);
/* At most `size` tokens of the conversations of data (rendered with model's tokenizer and
 * template, or template_file), ascending: those written where they are trained on (the
 * answers) by frequency, then the others by frequency; *coverage: the share of the trained
 * positions whose token they include. */
TERN_NODISCARD tern_status cli_head_ids_from_data(const char *model, const char *data,
                                                  const char *template_file, int size,
                                                  int32_t **ids, int *n, double *coverage);

#endif
