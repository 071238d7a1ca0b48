/* test_train.h — the trainer tests' shared inputs: a small tokenizer GGUF and documents of a
 * learnable pattern written as a .tdat file. */
#ifndef TERN_TEST_TRAIN_H
#define TERN_TEST_TRAIN_H

#include <stdint.h>

/* The tokenizer GGUF (512 tokens, byte-level + ChatML) from tern synth's tiny shape, written once
 * into the test's temporary folder. */
const char *test_train_tokenizer(void);
/* n_docs documents of pseudo-random lengths in [3, maxlen] over a learnable pattern (each token
 * = previous + step mod 64, from a random start, ids 300..363); the mask covers the second half.
 * Written to name in the temporary folder; the path (static storage) is returned. */
const char *test_train_write_data(const char *name, int n_docs, int maxlen, uint64_t seed, int step);

#endif
