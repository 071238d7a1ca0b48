/* bpe_train.h — the byte-level BPE trainer behind tern_tokenizer_train (bpe_train.c). Read first.
 *
 * Three steps: (1) text -> pre-tokenized word counts: every piece of text (a corpus line's prompt
 * pieces, corpus_conv_text; or a chunk of a plain file) is cut at the special tokens, then split
 * by the tokenizer room's qwen2 pre-tokenizer (tok_pretokenize), exactly as tern_tokenize will
 * split it, so no merge ever crosses a word boundary the encoder sees; (2) merges: the most
 * frequent adjacent pair (ties: lowest ids) is merged, with pair counts kept up to date
 * incrementally (only the words that contain the merged pair are touched) and a max-heap with
 * lazy deletion; (3) the vocabulary written as a GGUF tern_tokenizer_load reads. The fuzz target
 * (tests/fuzz/fuzz_bpe_train.c) drives (1)-(3) through the buffer interface below. */
#ifndef TERN_TRAIN_BPE_TRAIN_H
#define TERN_TRAIN_BPE_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern_train.h"

struct bpe_trainer;

/* Caller frees with bpe_trainer_free. Specials are copied; extras are validated here. */
TERN_NODISCARD tern_status bpe_trainer_create(const struct tern_bpe_train_params *p, struct bpe_trainer **out);
void bpe_trainer_free(struct bpe_trainer *t);
/* Count the words of text[0..n) (one document: words never span two calls). */
TERN_NODISCARD tern_status bpe_trainer_add_text(struct bpe_trainer *t, const char *text, size_t n);
/* Count the prompt text of every line of a corpus .jsonl buffer; errors name name:line. */
TERN_NODISCARD tern_status bpe_trainer_add_jsonl(struct bpe_trainer *t, const char *name, const char *data, size_t n);
/* Learn the merges and write the vocabulary to path (tmp + rename). report may be NULL. */
TERN_NODISCARD tern_status bpe_trainer_finish(struct bpe_trainer *t, const char *path, struct tern_bpe_train_report *report);


#endif
