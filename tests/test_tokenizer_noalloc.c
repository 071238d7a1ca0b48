/* test_tokenizer_noalloc.c — tokenizing and streaming detokenization perform no heap
 * allocation once the tokenizer has seen an input of the same length (its scratch is kept).
 * Linked with -Wl,--wrap=malloc,calloc,realloc (CMakeLists.txt, TERN_ALLOC_COUNTING_TESTS), so every
 * allocation made by libtern goes through the counters of tests/support/alloc_count.c. */
#include "test_support.h"
#include "alloc_count.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char text[] =
    "The quick brown fox jumps over the lazy dog. I've been 'told he's there.\n"
    "int main(void) { return 42; }  {\"k\": [1, 2, 3]}\n"
    "日本語のテキスト、中文文本와 한국어 🚀🦙 \xff\xfe invalid bytes\n"
    "<|im_start|>user\nhello<|im_end|>";

static void no_alloc_for(const char *vocab)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/tokenizer/ggml-vocab-%s.gguf", vocab);
    TEST_SHARED_OR_SKIP(path, rel);
    struct tern_tokenizer *t;
    assert_tern_ok(tern_tokenizer_load(path, &t));
    int32_t ids[1024];
    size_t n, n2;
    const unsigned flags[] = {0, TERN_TOK_ADD_SPECIAL | TERN_TOK_PARSE_SPECIAL};
    for (int f = 0; f < 2; f++) {
        /* every call below, warm-up included, stays within the scratch allocated at load */
        long before = test_allocations();
        assert_tern_ok(tern_tokenize(t, text, sizeof text - 1, flags[f], ids, 1024, &n));
        assert_tern_ok(tern_tokenize(t, text, sizeof text - 1, flags[f], ids, 1024, &n2));
        assert_int_equal(n, n2);
        /* a buffer that is too small is an error, not an allocation */
        assert_int_equal(tern_tokenize(t, text, sizeof text - 1, flags[f], ids, 3, &n2),
                         TERN_ERR_RANGE);
        char out[4096];
        size_t m;
        assert_tern_ok(tern_detokenize(t, ids, n, 0, out, sizeof out, &m));
        assert_int_equal(test_allocations() - before, 0);
    }
    struct tern_detokenizer *d;
    assert_tern_ok(tern_detokenizer_create(t, 0, &d));
    long before = test_allocations();
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pn;
        assert_tern_ok(tern_detokenizer_push(d, ids[i], &p, &pn));
    }
    assert_int_equal(test_allocations() - before, 0);
    tern_detokenizer_free(d);
    tern_tokenizer_free(t);
}

static void test_gpt2(void **state) { (void)state; no_alloc_for("gpt-2"); }
static void test_qwen2(void **state) { (void)state; no_alloc_for("qwen2-tiktoken"); }
static void test_llama3(void **state) { (void)state; no_alloc_for("llama3-tiktoken"); }
static void test_spm(void **state) { (void)state; no_alloc_for("llama-spm"); }
static void test_deepseek(void **state) { (void)state; no_alloc_for("deepseek-llm"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2), cmocka_unit_test(test_qwen2), cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_spm), cmocka_unit_test(test_deepseek),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
