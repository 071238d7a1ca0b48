/* test_synth.c — synthetic models with a real tokenizer (tern_synth_model_write_vocab, tern synth
 * --vocab): every tokenizer.* key of the vocabulary file arrives byte for byte, the model then
 * tokenizes exactly like the vocabulary file, sizes that do not fit are refused with a message
 * naming both sizes, and the default byte-level vocabulary keeps the (empty) merges key that
 * llama.cpp needs to load the file.
 *
 * The vocabulary for most checks is built here with the GGUF writer (512 tokens, the tiny
 * shape's size, with merges, a bos and a chat template); the real Qwen2 / Llama-3 fixture
 * vocabularies are used for the refusal checks, which fail before any weight is written. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define TINY_VOCAB 512

/* GPT-2's byte -> unicode map (printable bytes stand for themselves, the rest from U+0100 on),
 * as UTF-8 into out. */
static void byte_token(int b, char out[4])
{
#define PRINTABLE(x) (((x) >= 33 && (x) <= 126) || ((x) >= 161 && (x) <= 172) || ((x) >= 174 && (x) <= 255))
    int cp = b;
    if (!PRINTABLE(b)) {
        cp = 256;
        for (int x = 0; x < b; x++) cp += !PRINTABLE(x);
    }
#undef PRINTABLE
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

enum { TOK_HE = 256, TOK_LL, TOK_HELL, TOK_HELLO, TOK_BOS, TOK_IM_START, TOK_IM_END };

/* A vocab-only GGUF of n tokens: the 256 byte tokens, "he" "ll" "hell" "hello" with their
 * merges, three control tokens, unused padding; bos added; a chat template. */
static void write_vocab(const char *path, int n)
{
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    char **toks = calloc((size_t)n, sizeof *toks);
    int32_t *types = calloc((size_t)n, sizeof *types);
    assert_non_null(toks);
    assert_non_null(types);
    static const char *named[] = {"he", "ll", "hell", "hello", "<|endoftext|>", "<|im_start|>",
                                  "<|im_end|>"};
    for (int i = 0; i < n; i++) {
        char buf[32];
        if (i < 256) {
            byte_token(i, buf);
            types[i] = 1;
        } else if (i < TOK_HE + 7) {
            snprintf(buf, sizeof buf, "%s", named[i - TOK_HE]);
            types[i] = i >= TOK_BOS ? 3 : 1;
        } else {
            snprintf(buf, sizeof buf, "[UNUSED%d]", i);
            types[i] = 5;
        }
        toks[i] = strdup(buf);
        assert_non_null(toks[i]);
    }
    static const char *merges[] = {"h e", "l l", "he ll", "hell o"};
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
    assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"));
    assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2"));
    assert_tern_ok(tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n));
    assert_tern_ok(tern_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TERN_GGUF_INT32, types, (uint64_t)n));
    assert_tern_ok(tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 4));
    assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", TOK_BOS));
    assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", TOK_IM_END));
    assert_tern_ok(tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.chat_template", "{{ messages[0]['content'] }}"));
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(toks[i]);
    free(toks);
    free(types);
}

static bool is_tokenizer_key(struct tern_str k)
{
    return k.len > 10 && !memcmp(k.ptr, "tokenizer.", 10);
}

static int count_tokenizer_keys(const struct tern_gguf *g)
{
    int n = 0;
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) n += is_tokenizer_key(tern_gguf_key(g, i));
    return n;
}

static size_t elem_size(enum tern_gguf_type t)
{
    switch (t) {
    case TERN_GGUF_UINT8: case TERN_GGUF_INT8: case TERN_GGUF_BOOL: return 1;
    case TERN_GGUF_UINT16: case TERN_GGUF_INT16: return 2;
    case TERN_GGUF_UINT32: case TERN_GGUF_INT32: case TERN_GGUF_FLOAT32: return 4;
    case TERN_GGUF_UINT64: case TERN_GGUF_INT64: case TERN_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Every tokenizer.* key of src is in dst with the same type and the same value, and dst has no
 * other tokenizer.* key (nothing of the byte-level default is left behind). */
static void assert_tokenizer_copied(const struct tern_gguf *src, const struct tern_gguf *dst)
{
    assert_int_equal(count_tokenizer_keys(dst), count_tokenizer_keys(src));
    for (int64_t i = 0; i < tern_gguf_n_kv(src); i++) {
        struct tern_str k = tern_gguf_key(src, i);
        if (!is_tokenizer_key(k)) continue;
        char key[128];
        assert_true(k.len < sizeof key);
        memcpy(key, k.ptr, k.len);
        key[k.len] = 0;
        int64_t j = tern_gguf_find_key(dst, key);
        if (j < 0) fail_msg("key %s missing from the synthetic model", key);
        enum tern_gguf_type t = tern_gguf_kv_type(src, i);
        assert_int_equal(tern_gguf_kv_type(dst, j), t);
        if (t == TERN_GGUF_STRING) {
            struct tern_str a, b;
            assert_tern_ok(tern_gguf_get_str(src, key, &a));
            assert_tern_ok(tern_gguf_get_str(dst, key, &b));
            assert_int_equal(a.len, b.len);
            assert_memory_equal(a.ptr, b.ptr, a.len);
        } else if (t == TERN_GGUF_ARRAY) {
            enum tern_gguf_type et = tern_gguf_arr_type(src, i);
            uint64_t n = tern_gguf_arr_len(src, i);
            assert_int_equal(tern_gguf_arr_type(dst, j), et);
            assert_int_equal(tern_gguf_arr_len(dst, j), n);
            if (et == TERN_GGUF_STRING) {
                for (uint64_t e = 0; e < n; e++) {
                    struct tern_str a = tern_gguf_arr_str(src, i, e), b = tern_gguf_arr_str(dst, j, e);
                    if (a.len != b.len || memcmp(a.ptr, b.ptr, a.len))
                        fail_msg("%s[%llu] differs", key, (unsigned long long)e);
                }
            } else {
                assert_true(elem_size(et) > 0);
                if (n) assert_memory_equal(tern_gguf_arr_data(src, i), tern_gguf_arr_data(dst, j), n * elem_size(et));
            }
        } else {
            size_t sz = elem_size(t);
            assert_true(sz > 0);
            const char *a = (const char *)tern_gguf_file_data(src) + tern_gguf_kv_value_offset(src, i);
            const char *b = (const char *)tern_gguf_file_data(dst) + tern_gguf_kv_value_offset(dst, j);
            assert_memory_equal(a, b, sz);
        }
    }
}

static void tokenize(const char *path, const char *text, int32_t *ids, size_t cap, size_t *n)
{
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_tokenizer_load(path, &tok));
    assert_tern_ok(tern_tokenize(tok, text, strlen(text), TERN_TOK_ADD_SPECIAL, ids, cap, n));
    tern_tokenizer_free(tok);
}

static void test_vocab_copied(void **state)
{
    (void)state;
    char vocab[4096], model[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab512.gguf", test_tmpdir());
    snprintf(model, sizeof model, "%s/tiny-vocab.gguf", test_tmpdir());
    write_vocab(vocab, TINY_VOCAB);
    assert_tern_ok(tern_synth_model_write_vocab("tiny", "q8_0", 3, vocab, model, NULL));

    struct tern_gguf *src, *dst;
    assert_tern_ok(tern_gguf_open(vocab, &src));
    assert_tern_ok(tern_gguf_open(model, &dst));
    assert_tokenizer_copied(src, dst);
    /* the model part is still the tiny shape's */
    struct tern_str arch;
    assert_tern_ok(tern_gguf_get_str(dst, "general.architecture", &arch));
    assert_int_equal(arch.len, 5);
    assert_memory_equal(arch.ptr, "llama", 5);
    const struct tern_gguf_tensor *emb = tern_gguf_find_tensor(dst, "token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->ne[1], TINY_VOCAB);
    tern_gguf_close(src);
    tern_gguf_close(dst);

    /* "hello hello" -> bos, hello, 'Ġ'(byte 32), hello: the merges are in effect */
    int32_t a[16], b[16];
    size_t na, nb;
    tokenize(vocab, "hello hello", a, 16, &na);
    tokenize(model, "hello hello", b, 16, &nb);
    const int32_t expect[] = {TOK_BOS, TOK_HELLO, 32, TOK_HELLO};
    assert_int_equal(nb, 4);
    assert_memory_equal(b, expect, sizeof expect);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, nb * sizeof *b);

    /* the model loads and decodes with it */
    struct tern_model *m;
    assert_tern_ok(tern_model_load(model, NULL, &m));
    assert_int_equal(tern_model_get_info(m)->n_vocab, TINY_VOCAB);
    /* the stable core carries its size; the core answers by name too, an architecture's other
     * parameters are at their neutral values where a llama lacks them, unknown names are refused
     * without touching the output */
    const struct tern_model_info *in = tern_model_get_info(m);
    assert_int_equal(in->struct_size, sizeof *in);
    assert_true(test_hparam(m, "n_vocab") == TINY_VOCAB);
    assert_true(test_hparam(m, "n_layer") == in->n_layer);
    assert_true(test_hparam(m, "n_swa") == 0);
    assert_true(test_hparam(m, "embd_scale") == 1);
    assert_true(test_hparam(m, "n_layer_rec") == 0);
    double v = -1;
    assert_false(tern_model_hparam(m, "no_such_parameter", &v));
    assert_false(tern_model_hparam(m, NULL, &v));
    assert_true(v == -1);
    tern_model_free(m);
}

static void test_vocab_size_refused(void **state)
{
    (void)state;
    char vocab[4096], model[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab500.gguf", test_tmpdir());
    snprintf(model, sizeof model, "%s/tiny-refused.gguf", test_tmpdir());
    write_vocab(vocab, 500);
    tern_status s = tern_synth_model_write_vocab("tiny", "f16", 1, vocab, model, NULL);
    assert_int_equal(s, TERN_ERR_ARG);
    print_message("message: %s\n", tern_last_error());
    assert_non_null(strstr(tern_last_error(), "500 tokens"));
    assert_non_null(strstr(tern_last_error(), "n_vocab = 512"));
    struct stat sb;
    assert_int_not_equal(stat(model, &sb), 0); /* nothing written */

    /* a file without a vocabulary, and one that does not exist */
    struct tern_gguf_writer *w;
    snprintf(vocab, sizeof vocab, "%s/novocab.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
    assert_tern_ok(tern_gguf_writer_write(w, vocab));
    tern_gguf_writer_free(w);
    assert_int_equal(tern_synth_model_write_vocab("tiny", "f16", 1, vocab, model, NULL), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "tokenizer.ggml.tokens"));
    snprintf(vocab, sizeof vocab, "%s/absent.gguf", test_tmpdir());
    assert_int_not_equal(tern_synth_model_write_vocab("tiny", "f16", 1, vocab, model, NULL), TERN_OK);
    assert_non_null(strstr(tern_last_error(), "absent.gguf"));
    assert_int_not_equal(stat(model, &sb), 0);
}

/* The real vocabularies are refused by the shape of the other family, before any weight. */
static void test_real_vocab_size_refused(void **state)
{
    (void)state;
    char model[4096];
    snprintf(model, sizeof model, "%s/refused.gguf", test_tmpdir());
    TEST_SHARED_OR_SKIP(llama3, "fixtures/tokenizer/ggml-vocab-llama3-tiktoken.gguf");
    assert_int_equal(tern_synth_model_write_vocab("qwen2.5-0.5b", "q8_0", 1, llama3, model, NULL),
                     TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "128256 tokens"));
    assert_non_null(strstr(tern_last_error(), "n_vocab = 151936"));
    TEST_SHARED_OR_SKIP(qwen2, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    assert_int_equal(tern_synth_model_write_vocab("llama-3.2-1b", "q4_0", 1, qwen2, model, NULL),
                     TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "151936 tokens"));
}

/* The byte-level default: an empty merges array is present (llama.cpp refuses a BPE vocabulary
 * without the key), and the ChatML template is there. */
static void test_default_vocab_has_merges(void **state)
{
    (void)state;
    char model[4096];
    snprintf(model, sizeof model, "%s/tiny-default.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 1, model, NULL));
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(model, &g));
    int64_t i = tern_gguf_find_key(g, "tokenizer.ggml.merges");
    assert_true(i >= 0);
    assert_int_equal(tern_gguf_kv_type(g, i), TERN_GGUF_ARRAY);
    assert_int_equal(tern_gguf_arr_type(g, i), TERN_GGUF_STRING);
    assert_int_equal(tern_gguf_arr_len(g, i), 0);
    assert_true(tern_gguf_find_key(g, "tokenizer.chat_template") >= 0);
    /* the synthetic template is the chat room's fallback (tools render on synthetic models) */
    struct tern_str tmpl;
    assert_tern_ok(tern_gguf_get_str(g, "tokenizer.chat_template", &tmpl));
    char bare[4200];
    snprintf(bare, sizeof bare, "%s/no-template.gguf", test_tmpdir());
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
    assert_tern_ok(tern_gguf_writer_write(w, bare));
    tern_gguf_writer_free(w);
    struct tern_gguf *bg;
    assert_tern_ok(tern_gguf_open(bare, &bg));
    struct tern_chat_template *fb;
    assert_tern_ok(tern_chat_template_from_gguf(bg, &fb));
    const char *fsrc = tern_chat_template_source(fb);
    assert_int_equal(strlen(fsrc), tmpl.len);
    assert_memory_equal(fsrc, tmpl.ptr, tmpl.len);
    tern_chat_template_free(fb);
    tern_gguf_close(bg);
    tern_gguf_close(g);
}

/* The CLI: tern synth --vocab, and tern bench --synthetic ... --vocab (the flag after). */
static void test_cli_vocab(void **state)
{
    (void)state;
    char vocab[4096], model[4096], cmd[16384], out[8192];
    snprintf(vocab, sizeof vocab, "%s/vocab512.gguf", test_tmpdir());
    snprintf(model, sizeof model, "%s/cli-vocab.gguf", test_tmpdir());
    write_vocab(vocab, TINY_VOCAB);
    snprintf(cmd, sizeof cmd, "%s synth tiny:q4_0 --vocab %s -o %s 2>&1", test_tern_bin(), vocab, model);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    out[fread(out, 1, sizeof out - 1, p)] = 0;
    assert_int_equal(pclose(p), 0);
    struct tern_gguf *src, *dst;
    assert_tern_ok(tern_gguf_open(vocab, &src));
    assert_tern_ok(tern_gguf_open(model, &dst));
    assert_tokenizer_copied(src, dst);
    tern_gguf_close(src);
    tern_gguf_close(dst);

    char wrong[4096];
    snprintf(wrong, sizeof wrong, "%s/vocab500.gguf", test_tmpdir());
    write_vocab(wrong, 500);
    snprintf(cmd, sizeof cmd, "%s synth tiny:q4_0 --vocab %s -o %s.x 2>&1", test_tern_bin(), wrong, model);
    p = popen(cmd, "r");
    assert_non_null(p);
    out[fread(out, 1, sizeof out - 1, p)] = 0;
    int status = pclose(p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    print_message("tern synth said: %s", out);
    assert_non_null(strstr(out, "n_vocab = 512"));

    snprintf(cmd, sizeof cmd, "TERN_SYNTH_DIR=%s %s bench --synthetic tiny:q8_0 -p 8 -n 2 -r 1 -t 1 "
             "--vocab %s --json 2>&1", test_tmpdir(), test_tern_bin(), vocab);
    p = popen(cmd, "r");
    assert_non_null(p);
    out[fread(out, 1, sizeof out - 1, p)] = 0;
    assert_int_equal(pclose(p), 0);
    snprintf(model, sizeof model, "%s/tiny-q8_0-vocab512.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_open(vocab, &src));
    assert_tern_ok(tern_gguf_open(model, &dst));
    assert_tokenizer_copied(src, dst);
    tern_gguf_close(src);
    tern_gguf_close(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_copied),
        cmocka_unit_test(test_vocab_size_refused),
        cmocka_unit_test(test_real_vocab_size_refused),
        cmocka_unit_test(test_default_vocab_has_merges),
        cmocka_unit_test(test_cli_vocab),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
