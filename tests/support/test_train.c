/* test_train.c — the trainer tests' shared inputs (test_train.h). */
#include "test_train.h"
#include "tern_train.h"

#include <stdio.h>

#include "test_support.h"

const char *test_train_tokenizer(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/tok.gguf", test_tmpdir());
        assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 7, path, NULL));
    }
    return path;
}

const char *test_train_write_data(const char *name, int n_docs, int maxlen, uint64_t seed, int step)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    int32_t tok[512];
    uint8_t mask[512];
    for (int d = 0; d < n_docs; d++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int len = 3 + (int)((seed >> 33) % (uint64_t)(maxlen - 2));
        int x = (int)((seed >> 20) % 64);
        for (int i = 0; i < len; i++) {
            tok[i] = 300 + (x + i * step) % 64;
            mask[i] = i >= len / 2;
        }
        assert_tern_ok(tern_train_data_add(w, tok, mask, len));
    }
    assert_tern_ok(tern_train_data_write(w, path));
    tern_train_data_writer_free(w);
    return path;
}
