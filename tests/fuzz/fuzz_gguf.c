/* fuzz_gguf.c — fuzz target for the GGUF reader (scripts/fuzz.sh; replayed by ctest).
 *
 * Each input is opened from an exact-size copy; on success every key, string, array and
 * tensor is walked and every kv is copied into a writer, so ASan sees any out-of-bounds read
 * the validation let through. Every refusal must name a byte offset (the reader's promise):
 * one that does not aborts, so the fuzzer reports it. Seeds: tests/fuzz/corpus/gguf (small
 * files with every metadata type, nested arrays, tensors of several types, a v2 header). */
#include "tern.h"
#include "tern_gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    struct tern_gguf *g = NULL;
    if (tern_gguf_open_memory(size ? copy : NULL, size, &g) != TERN_OK) {
        if (!strstr(tern_last_error(), "offset")) abort(); /* every refusal names an offset */
        free(copy);
        return 0;
    }
    volatile uint64_t sum = 0;
    struct tern_gguf_writer *w = NULL;
    tern_status_ignore(tern_gguf_writer_create(32, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        for (uint64_t c = 0; c < k.len; c++) sum += (uint8_t)k.ptr[c];
        if (tern_gguf_kv_type(g, i) == TERN_GGUF_ARRAY) {
            uint64_t n = tern_gguf_arr_len(g, i);
            if (tern_gguf_arr_type(g, i) == TERN_GGUF_STRING) {
                for (uint64_t j = 0; j < n; j++) {
                    struct tern_str s = tern_gguf_arr_str(g, i, j);
                    if (s.len) sum += (uint8_t)s.ptr[s.len - 1];
                }
            } else if (n && tern_gguf_arr_data(g, i)) {
                sum += ((const uint8_t *)tern_gguf_arr_data(g, i))[0];
            }
        }
        if (w) tern_status_ignore(tern_gguf_writer_copy_kv(w, g, i));
    }
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        sum += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
    }
    (void)sum; /* read once: the walk above must not be optimized away */
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
    free(copy);
    return 0;
}
