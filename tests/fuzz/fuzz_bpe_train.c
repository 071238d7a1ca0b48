/* fuzz_bpe_train.c — fuzz target for the tokenizer trainer (scripts/fuzz.sh; replayed by ctest).
 *
 * The first input byte picks the reading: even = corpus .jsonl lines (JSON parsing, the prompt
 * text of a conversation, every malformed shape), odd = plain text (special-token cuts, the
 * qwen2 pre-tokenizer on arbitrary bytes). A refusal must name the input line ("input:N:"); a
 * success trains a 300-token vocabulary that must load and round-trip the input bytes exactly
 * (the promise of byte-level BPE: every byte has a token). Seeds: tests/fuzz/corpus/bpe_train. */
#include "tern.h"
#include "train/bpe_train.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1 << 16)) return 0;
    bool jsonl = (data[0] & 1) == 0;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    struct tern_bpe_train_params p = tern_bpe_train_default_params();
    p.vocab_size = 300;
    struct bpe_trainer *t;
    if (bpe_trainer_create(&p, &t)) abort();
    tern_status st = jsonl ? bpe_trainer_add_jsonl(t, "input", text, n) : bpe_trainer_add_text(t, text, n);
    if (st) {
        if (!jsonl || strncmp(tern_last_error(), "input:", 6)) abort(); /* refusals name the line */
        bpe_trainer_free(t);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_bpe_train_%d.gguf", (int)getpid());
    if (bpe_trainer_finish(t, path, NULL)) abort();
    bpe_trainer_free(t);
    struct tern_tokenizer *tok;
    if (tern_tokenizer_load(path, &tok)) abort();
    remove(path);
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    char *back = malloc(n * 2 + 64);
    size_t ni, nb;
    if (!ids || !back) abort();
    if (tern_tokenize(tok, text, n, 0, ids, n + 1, &ni)) abort();
    if (tern_detokenize(tok, ids, ni, 0, back, n * 2 + 64, &nb)) abort();
    if (nb != n || memcmp(back, text, n)) abort();
    free(ids);
    free(back);
    tern_tokenizer_free(tok);
    return 0;
}
