/* fuzz_distill_cache.c — fuzz target for tern distill's teacher-signal cache reader
 * (src/train/distill_cache.c; scripts/fuzz.sh, replayed by ctest).
 *
 * Each input is opened with tern_distill_cache_open_memory; every refusal must name a byte
 * offset (the reader's promise) or abort. An accepted cache is then read entry by entry through
 * the public accessor, and every value the trainer would use is checked against the ranges the
 * reader guarantees (ids below the vocabulary, log-probabilities <= 0, tail in [0, 1]), so ASan
 * sees any read past the mapping. Seeds: tests/fuzz/corpus/distill_cache (caches written by
 * tern_distill_cache_build for a tiny teacher: top_k 4 and top_k 1, a document longer than
 * n_ctx, a document with nothing trained on). */
#include "tern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/distill.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tern_distill_cache *c = NULL;
    if (tern_distill_cache_open_memory(data, size, &c) != TERN_OK) {
        if (!strstr(tern_last_error(), "offset") && !strstr(tern_last_error(), "out of memory"))
            abort();
        return 0;
    }
    for (uint64_t d = 0; d < c->n_docs; d++)
        if (c->doc_first[d + 1] < c->doc_first[d] || c->doc_first[d + 1] > c->n_entries) abort();
    for (uint64_t e = 0; e < tern_distill_cache_n_entries(c); e++) {
        const int32_t *ids;
        const float *lp;
        float tail;
        if (!tern_distill_cache_entry(c, e, &ids, &lp, &tail)) abort();
        for (uint32_t i = 0; i < c->k; i++)
            if (ids[i] < 0 || (uint32_t)ids[i] >= c->V || !(lp[i] <= 1e-5f)) abort();
        if (!(tail >= 0.0f && tail <= 1.0f)) abort();
    }
    if (tern_distill_cache_entry(c, tern_distill_cache_n_entries(c), NULL, NULL, NULL)) abort();
    tern_distill_cache_free(c);
    return 0;
}
