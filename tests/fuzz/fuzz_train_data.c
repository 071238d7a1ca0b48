/* fuzz_train_data.c — fuzz target for the trainer's data file reader and packer (scripts/fuzz.sh;
 * replayed by ctest).
 *
 * Each input is opened with tern_train_data_open_memory; every refusal must name a byte offset
 * (the reader's promise) or abort. An accepted file is then packed into micro-batches by a tiny
 * trainer (n_ctx 16, vocab 300, created once) for a few batches from the start, so ASan sees any
 * out-of-bounds read in the packing and the vocabulary check. Seeds: tests/fuzz/corpus/train_data
 * (files written by tern_train_data_write: short and long documents, masks, an empty document). */
#include "tern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tern_trainer *trainer;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tern_train_data *d = NULL;
    if (tern_train_data_open_memory(data, size, &d) != TERN_OK) {
        if (!strstr(tern_last_error(), "offset")) abort(); /* every refusal names an offset */
        return 0;
    }
    if (!trainer) {
        struct tern_train_config c = tern_train_config_default();
        c.n_embd = 8, c.n_layer = 1, c.n_head = 2, c.n_head_kv = 1, c.n_ff = 8, c.n_ctx = 16;
        c.n_vocab = 300, c.batch_tokens = 32, c.threads = 1;
        if (tern_trainer_create(&c, &trainer) != TERN_OK) abort();
    }
    memset(&trainer->dpos, 0, sizeof trainer->dpos);
    for (int i = 0; i < 4; i++) {
        if (train_batch_fill(trainer, d, &trainer->batch[0]) != TERN_OK) {
            if (!strstr(tern_last_error(), "outside the vocabulary")) abort();
            break;
        }
        for (int r = 0; r < trainer->N; r++) {
            const int s0 = r / trainer->T * trainer->T;
            /* rows see only their own document, which starts at or before them */
            if (trainer->batch[0].start[r] > r - s0 || trainer->batch[0].pos[r] < 0) abort();
            /* any mask byte (2..255 mark tool-call tokens) weighs 0 or 1 without a recipe */
            const float w = trainer->batch[0].weight[r];
            if (w != 0.0f && w != 1.0f) abort();
        }
    }
    tern_train_data_free(d);
    return 0;
}
