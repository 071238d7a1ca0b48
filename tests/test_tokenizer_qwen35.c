/* test_tokenizer_qwen35.c — Qwen3.5's pre-tokenizer ("qwen35": qwen2's split with combining
 * marks, \p{M}, joining letter runs) against ik_llama.cpp.
 *
 * No Qwen3.5 vocabulary is among the fixtures, so the test takes the Qwen2 one
 * (ggml-vocab-qwen2-tiktoken.gguf: the same BPE family) with tokenizer.ggml.pre set to "qwen35"
 * and compares with what ik_llama.cpp's llama_tokenize gives for that same file (no special
 * parsing, nothing added): tests/data/tokenizer/qwen35.inp holds the texts (every fixture
 * input, then scripts with combining marks: Devanagari, Thai, Arabic harakat, zalgo, marks after
 * punctuation, digits, newlines and apostrophes), separated as in llama.cpp's
 * test-tokenizer-0, and qwen35.out the ids, one line per text. The texts where the split
 * differs from qwen2's are counted, so the test shows it exercises the difference. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SEP[] = "\n__ggml_vocab_test__\n";

/* the fixture vocabulary with another tokenizer.ggml.pre, written to path */
static void write_with_pre(const char *src, const char *path, const char *pre)
{
    struct tern_gguf *g;
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_open(src, &g));
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        if (k.len == 18 && !memcmp(k.ptr, "tokenizer.ggml.pre", 18)) continue;
        assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    }
    assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre));
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
}

static void test_matches_ik_llama_cpp(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(src, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    char path[4096], inp[4096], outp[4096];
    snprintf(path, sizeof path, "%.4000s/vocab-qwen35.gguf", test_tmpdir());
    write_with_pre(src, path, "qwen35");
    struct tern_tokenizer *t, *t2;
    assert_tern_ok(tern_tokenizer_load(path, &t));
    assert_tern_ok(tern_tokenizer_load(src, &t2));
    snprintf(inp, sizeof inp, "%.4000s/tests/data/tokenizer/qwen35.inp", test_source_dir());
    snprintf(outp, sizeof outp, "%.4000s/tests/data/tokenizer/qwen35.out", test_source_dir());
    size_t ni, no;
    char *text = test_read_file(inp, &ni), *want = test_read_file(outp, &no);
    assert_non_null(text);
    assert_non_null(want);
    int n_texts = 0, n_differ = 0;
    char *a = text, *line = want;
    int32_t *ids = NULL, *ids2 = NULL;
    size_t cap = 0, cap2 = 0;
    for (;;) {
        char *b = strstr(a, SEP);
        const size_t len = b ? (size_t)(b - a) : strlen(a);
        size_t n, n2;
        assert_tern_ok(tern_tokenize_grow(t, a, len, 0, &ids, &cap, &n));
        assert_tern_ok(tern_tokenize_grow(t2, a, len, 0, &ids2, &cap2, &n2));
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = 0;
        char got[8192] = "";
        size_t off = 0;
        for (size_t i = 0; i < n && off < sizeof got - 16; i++)
            off += (size_t)snprintf(got + off, sizeof got - off, "%s%d", i ? " " : "", ids[i]);
        if (strcmp(got, line))
            fail_msg("text %d (%.40s...): tern %s, ik_llama.cpp %s", n_texts, a, got, line);
        n_differ += n != n2 || memcmp(ids, ids2, n * sizeof *ids) != 0;
        n_texts++;
        line = eol + 1;
        if (!b) break;
        a = b + sizeof SEP - 1;
    }
    print_message("%d texts tokenized as ik_llama.cpp does; %d of them split differently from qwen2\n",
                  n_texts, n_differ);
    assert_true(n_texts >= 60);
    assert_true(n_differ >= 3);
    free(ids);
    free(ids2);
    free(text);
    free(want);
    tern_tokenizer_free(t);
    tern_tokenizer_free(t2);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_ik_llama_cpp),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
