/* test_tokenizer_special.c — control-looking tokens: user text never produces them.
 *
 * llama.cpp's loader makes every token whose text names a role (end of turn <|im_end|>, FIM
 * <|fim_prefix|> <fim-prefix> <PRE> ..., repo / file separators) a control token unless the
 * GGUF names that role by key (docs/tokenizers.md; rule in src/tokenizer/tok_load.c). Here
 * every such token of the 8 fixture vocabularies is checked: plain text containing it gives the
 * literal tokenization (the encoder alone, without the special-token partition; for Qwen2 also
 * the ids of an independent tiktoken implementation over the original rank file, which agrees
 * with llama.cpp), no id of it is a special token, it decodes back to the text; with
 * TERN_TOK_PARSE_SPECIAL it is that single token; is_control / is_eog say what llama.cpp says.
 * None of the fixtures' 46 cases per vocabulary contains such a text, hence the checks here. */
#include "test_support.h"
#include "tokenizer/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fixture_vocabs[] = {
    "gpt-2", "llama-spm", "phi-3", "deepseek-llm", "starcoder", "falcon", "qwen2-tiktoken",
    "llama3-tiktoken",
};
#define N_FIXTURES (sizeof fixture_vocabs / sizeof fixture_vocabs[0])

/* llama.cpp c392e50, llama-vocab.cpp load(): texts it detects, and whether the role ends a
 * generation (eot, eom, fim pad / repo / file separator do; fim prefix / suffix / middle not). */
static const struct {
    const char *text;
    bool eog;
} looks_control[] = {
    {"<|eot_id|>", true}, {"<|im_end|>", true}, {"<|end|>", true}, {"<end_of_turn>", true},
    {"<|endoftext|>", true}, {"<EOT>", true}, {"<｜end▁of▁sentence｜>", true},
    {"<|eom_id|>", true},
    {"<|fim_prefix|>", false}, {"<fim-prefix>", false}, {"<｜fim▁begin｜>", false},
    {"<PRE>", false},
    {"<|fim_suffix|>", false}, {"<fim-suffix>", false}, {"<｜fim▁hole｜>", false},
    {"<SUF>", false},
    {"<|fim_middle|>", false}, {"<fim-middle>", false}, {"<｜fim▁end｜>", false},
    {"<MID>", false},
    {"<|fim_pad|>", true}, {"<fim-pad>", true}, {"<PAD>", true},
    {"<|fim_repo|>", true}, {"<|repo_name|>", true}, {"<fim-repo>", true}, {"<REPO>", true},
    {"<|file_sep|>", true},
};
#define N_LOOKS (sizeof looks_control / sizeof looks_control[0])

/* How many of those texts each fixture holds (so the test cannot pass by finding none). */
static const int n_expected[N_FIXTURES] = {1, 0, 2, 1, 1, 1, 8, 1};

static struct tern_tokenizer *load_path(const char *path)
{
    struct tern_tokenizer *t = NULL;
    assert_tern_ok(tern_tokenizer_load(path, &t));
    return t;
}

static const char *vocab_path(const char *name)
{
    static char buf[4200];
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/tokenizer/ggml-vocab-%s.gguf", name);
    const char *p = test_shared_path(rel);
    if (!p) return NULL;
    snprintf(buf, sizeof buf, "%s", p);
    return buf;
}

/* The encoder alone: what the text gives when no special token is looked for. */
static size_t literal(struct tern_tokenizer *t, const char *s, size_t n, int32_t *out, size_t cap)
{
    struct tok_out o = {out, cap, 0};
    if (t->model == TOK_MODEL_SPM) assert_tern_ok(tok_spm_segment(t, s, n, t->add_space_prefix, &o));
    else assert_tern_ok(tok_bpe_segment(t, s, n, &o));
    assert_true(o.n <= cap);
    return o.n;
}

/* Plain text holding the token's text: literal ids, no special id, lossless. */
static void check_plain(struct tern_tokenizer *t, const char *vocab, const char *text,
                        int32_t special)
{
    size_t n = strlen(text), got, want;
    int32_t ids[256], ref[256];
    assert_tern_ok(tern_tokenize(t, text, n, 0, ids, 256, &got));
    want = literal(t, text, n, ref, 256);
    if (got != want || memcmp(ids, ref, got * sizeof *ids)) {
        print_message("%s '%s': got", vocab, text);
        for (size_t i = 0; i < got; i++) print_message(" %d", ids[i]);
        print_message(", literal");
        for (size_t i = 0; i < want; i++) print_message(" %d", ref[i]);
        print_message("\n");
        fail_msg("%s: '%s' is not tokenized literally", vocab, text);
    }
    for (size_t i = 0; i < got; i++) {
        if (ids[i] == special || tern_token_is_control(t, ids[i]) ||
            (t->attr[ids[i]] & (TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)))
            fail_msg("%s: '%s' gave special id %d at %zu", vocab, text, ids[i], i);
    }
    char back[512];
    size_t m;
    assert_tern_ok(tern_detokenize(t, ids, got, 0, back, sizeof back, &m));
    if (m != n || memcmp(back, text, n))
        fail_msg("%s: '%s' decodes as '%.*s'", vocab, text, (int)m, back);
}

static void test_control_looking_tokens(void **state)
{
    (void)state;
    if (!vocab_path("gpt-2")) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n");
    int total = 0;
    for (size_t v = 0; v < N_FIXTURES; v++) {
        struct tern_tokenizer *t = load_path(vocab_path(fixture_vocabs[v]));
        int found = 0;
        for (size_t k = 0; k < N_LOOKS; k++) {
            const char *tok = looks_control[k].text;
            int32_t id = tern_token_lookup(t, tok, strlen(tok));
            if (id < 0) continue;
            found++;
            if (!tern_token_is_control(t, id))
                fail_msg("%s: '%s' (%d) is not a control token", fixture_vocabs[v], tok, id);
            bool eog = looks_control[k].eog || id == tern_token_eos(t);
            if (tern_token_is_eog(t, id) != eog)
                fail_msg("%s: '%s' (%d): is_eog %d, llama.cpp %d", fixture_vocabs[v], tok, id,
                         !eog, eog);
            char text[128];
            const char *fmt[] = {"%s", "x%sy = 1", " %s\n", "%s%s", "a <%s>", "%s日本"};
            for (size_t f = 0; f < sizeof fmt / sizeof fmt[0]; f++) {
                snprintf(text, sizeof text, fmt[f], tok, tok);
                check_plain(t, fixture_vocabs[v], text, id);
            }
            /* parsed as special: that single token, the text around it encoded as usual */
            int32_t ids[64], a[64], b[64];
            size_t n, na, nb;
            assert_tern_ok(tern_tokenize(t, tok, strlen(tok), TERN_TOK_PARSE_SPECIAL, ids, 64, &n));
            assert_int_equal(n, 1);
            assert_int_equal(ids[0], id);
            snprintf(text, sizeof text, "x%sy = 1", tok);
            assert_tern_ok(tern_tokenize(t, text, strlen(text), TERN_TOK_PARSE_SPECIAL, ids, 64, &n));
            assert_tern_ok(tern_tokenize(t, "x", 1, 0, a, 64, &na));
            assert_tern_ok(tern_tokenize(t, "y = 1", 5, 0, b, 64, &nb));
            assert_int_equal(n, na + 1 + nb);
            assert_memory_equal(ids, a, na * sizeof *a);
            assert_int_equal(ids[na], id);
            assert_memory_equal(ids + na + 1, b, nb * sizeof *b);
            /* rendered: empty unless asked for, its text when asked */
            char piece[64];
            size_t pn;
            assert_tern_ok(tern_token_to_piece(t, id, 0, piece, sizeof piece, &pn));
            assert_int_equal(pn, 0);
            assert_tern_ok(tern_token_to_piece(t, id, TERN_PIECE_SPECIAL, piece, sizeof piece, &pn));
            assert_int_equal(pn, strlen(tok));
            assert_memory_equal(piece, tok, pn);
        }
        print_message("%-16s %d control-looking tokens checked\n", fixture_vocabs[v], found);
        assert_int_equal(found, n_expected[v]);
        total += found;
        tern_tokenizer_free(t);
    }
    assert_int_equal(total, 15);
}

/* Qwen2: the ids of an independent implementation (tests/tokenizer_crosscheck/tiktoken_ref.py's
 * method: Qwen's pre-tokenizer regex + tiktoken BPE over original/qwen.tiktoken), which llama.cpp
 * gives for these texts too; before the rule, tern gave 151659.. for the token inside. */
static void test_qwen2_fim_literal(void **state)
{
    (void)state;
    const char *path = vocab_path("qwen2-tiktoken");
    if (!path) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n");
    struct tern_tokenizer *t = load_path(path);
    static const struct {
        const char *text;
        int32_t ids[12];
        int n;
    } cases[] = {
        {"x<|fim_prefix|>y = 1", {87, 27, 91, 69, 318, 13974, 91, 29, 88, 284, 220, 16}, 12},
        {"x<|fim_middle|>y = 1", {87, 27, 91, 69, 318, 62580, 91, 29, 88, 284, 220, 16}, 12},
        {"x<|fim_suffix|>y = 1", {87, 27, 91, 69, 318, 37151, 91, 29, 88, 284, 220, 16}, 12},
        {"x<|fim_pad|>y = 1", {87, 27, 91, 69, 318, 30290, 91, 29, 88, 284, 220, 16}, 12},
        {"x<|repo_name|>y = 1", {87, 27, 91, 23476, 1269, 91, 29, 88, 284, 220, 16}, 11},
        {"x<|file_sep|>y = 1", {87, 27, 91, 1192, 54775, 91, 29, 88, 284, 220, 16}, 11},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t ids[64];
        size_t n;
        for (unsigned flags = 0; flags <= TERN_TOK_ADD_SPECIAL; flags += TERN_TOK_ADD_SPECIAL) {
            assert_tern_ok(tern_tokenize(t, cases[c].text, strlen(cases[c].text), flags, ids, 64, &n));
            assert_int_equal(n, cases[c].n); /* qwen2 adds no bos */
            assert_memory_equal(ids, cases[c].ids, n * sizeof *ids);
        }
    }
    /* <tool_call> is a user-defined token llama.cpp leaves alone: still matched in plain text */
    int32_t ids[8];
    size_t n;
    assert_tern_ok(tern_tokenize(t, "<tool_call>", 11, 0, ids, 8, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 151657);
    assert_false(tern_token_is_control(t, 151657));
    tern_tokenizer_free(t);
}

/* A copy of the qwen2 vocabulary with extra keys / a changed type, loaded back. */
static struct tern_tokenizer *qwen2_variant(const char *src, const char *key1, uint32_t v1,
                                            const char *key2, uint32_t v2, int32_t retype_id,
                                            int32_t retype_to)
{
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(src, &g));
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        if (retype_id >= 0 && k.len == 25 && !memcmp(k.ptr, "tokenizer.ggml.token_type", 25)) {
            uint64_t n = tern_gguf_arr_len(g, i);
            int32_t *ty = malloc(n * 4);
            memcpy(ty, tern_gguf_arr_data(g, i), n * 4);
            ty[retype_id] = retype_to;
            assert_tern_ok(tern_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TERN_GGUF_INT32,
                                                    ty, n));
            free(ty);
            continue;
        }
        assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    }
    if (key1) assert_tern_ok(tern_gguf_writer_set_u32(w, key1, v1));
    if (key2) assert_tern_ok(tern_gguf_writer_set_u32(w, key2, v2));
    tern_gguf_close(g);
    char path[512];
    snprintf(path, sizeof path, "%s/qwen2-variant.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    struct tern_tokenizer *t = load_path(path);
    remove(path);
    return t;
}

/* The rule's edges, as llama.cpp has them: a role the GGUF names by key is not looked up by
 * text (the token keeps its type; a key naming fim pad/repo/sep makes that token EOG); the
 * deprecated key spelling counts; a normal-typed token is overridden as well. */
static void test_control_rule_keys(void **state)
{
    (void)state;
    const char *p = vocab_path("qwen2-tiktoken");
    if (!p) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n");
    char src[4200];
    snprintf(src, sizeof src, "%s", p);
    int32_t ids[8];
    size_t n;

    /* fim_pre named by key: <|fim_prefix|> stays user-defined, so plain text still matches it,
     * while <|fim_suffix|> (no key) is control; fim_pad named by key is EOG, keeps its type */
    struct tern_tokenizer *t = qwen2_variant(src, "tokenizer.ggml.fim_pre_token_id", 151659,
                                             "tokenizer.ggml.fim_pad_token_id", 151662, -1, 0);
    assert_false(tern_token_is_control(t, 151659));
    assert_true(tern_token_is_control(t, 151661));
    assert_tern_ok(tern_tokenize(t, "<|fim_prefix|>", 14, 0, ids, 8, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 151659);
    assert_false(tern_token_is_control(t, 151662));
    assert_true(tern_token_is_eog(t, 151662));
    assert_false(tern_token_is_eog(t, 151659));
    tern_tokenizer_free(t);

    /* the deprecated spelling (prefix_token_id) names the role too */
    t = qwen2_variant(src, "tokenizer.ggml.prefix_token_id", 151659, NULL, 0, -1, 0);
    assert_false(tern_token_is_control(t, 151659));
    assert_true(tern_token_is_control(t, 151660));
    tern_tokenizer_free(t);

    /* a key out of range names nothing: the text is looked up */
    t = qwen2_variant(src, "tokenizer.ggml.fim_pre_token_id", 999999, NULL, 0, -1, 0);
    assert_true(tern_token_is_control(t, 151659));
    tern_tokenizer_free(t);

    /* <|file_sep|> typed normal (1): overridden to control as well, and EOG */
    t = qwen2_variant(src, NULL, 0, NULL, 0, 151664, 1);
    assert_true(tern_token_is_control(t, 151664));
    assert_true(tern_token_is_eog(t, 151664));
    assert_tern_ok(tern_tokenize(t, "<|file_sep|>", 12, 0, ids, 8, &n));
    for (size_t i = 0; i < n; i++) assert_true(ids[i] < 151643);
    tern_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_looking_tokens),
        cmocka_unit_test(test_qwen2_fim_literal),
        cmocka_unit_test(test_control_rule_keys),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
