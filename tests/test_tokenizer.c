/* test_tokenizer.c — the tokenizers reproduce llama.cpp's ids on every fixture vocabulary, and
 * hold their documented behaviour on the rest: round trips, invalid UTF-8, random bytes,
 * special tokens, buffer-size errors and the streaming detokenizer.
 *
 * Reference: ../shared/fixtures/tokenizer/<vocab>.gguf.inp/.out (llama.cpp test-tokenizer-0,
 * add_special = false, parse_special = false; format in ../shared/fixtures/README.md §3). */
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

static struct tern_tokenizer *load_vocab(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/tokenizer/ggml-vocab-%s.gguf", name);
    const char *path = test_shared_path(rel);
    if (!path) return NULL;
    struct tern_tokenizer *t = NULL;
    assert_tern_ok(tern_tokenizer_load(path, &t));
    return t;
}

#define LOAD_OR_SKIP(var, name)                                                                \
    struct tern_tokenizer *var = load_vocab(name);                                             \
    do {                                                                                       \
        if (!var) {                                                                            \
            TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n");          \
        }                                                                                      \
    } while (0)

static size_t tokenize(struct tern_tokenizer *t, const char *s, size_t n, unsigned flags,
                       int32_t **ids)
{
    size_t cap = n + 16, got = 0;
    *ids = malloc(cap * sizeof **ids);
    assert_non_null(*ids);
    assert_tern_ok(tern_tokenize(t, s, n, flags, *ids, cap, &got));
    return got;
}

/* --- the fixtures: every case of every vocabulary, exactly --- */
static void test_fixtures_exact(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/tokenizer");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    int total_bad = 0;
    for (size_t v = 0; v < N_FIXTURES; v++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.inp", dirbuf, fixture_vocabs[v]);
        size_t inp_len, out_len;
        char *inp = test_read_file(path, &inp_len);
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.out", dirbuf, fixture_vocabs[v]);
        char *outf = test_read_file(path, &out_len);
        assert_non_null(inp);
        assert_non_null(outf);
        struct tern_tokenizer *t = load_vocab(fixture_vocabs[v]);
        static const char sep[] = "\n__ggml_vocab_test__\n";
        char *p = inp, *line = outf;
        int n_case = 0, n_ok = 0;
        for (;;) {
            char *e = strstr(p, sep);
            if (!e) break;
            char *nl = strchr(line, '\n');
            assert_non_null(nl);
            *nl = 0;
            int32_t want[512];
            int nw = 0;
            for (char *q = line; *q;) {
                char *end;
                long x = strtol(q, &end, 10);
                if (end == q) break;
                want[nw++] = (int32_t)x;
                q = end;
            }
            int32_t *got;
            size_t ng = tokenize(t, p, (size_t)(e - p), 0, &got);
            bool same = ng == (size_t)nw && !memcmp(got, want, sizeof *got * ng);
            if (same) {
                n_ok++;
            } else {
                print_message("%s case %d '%.*s':\n  want", fixture_vocabs[v], n_case,
                              (int)(e - p), p);
                for (int i = 0; i < nw; i++) print_message(" %d", want[i]);
                print_message("\n  got ");
                for (size_t i = 0; i < ng; i++) print_message(" %d", got[i]);
                print_message("\n");
            }
            free(got);
            n_case++;
            p = e + sizeof sep - 1;
            line = nl + 1;
        }
        print_message("%-16s %d/%d cases exact\n", fixture_vocabs[v], n_ok, n_case);
        assert_int_equal(n_case, 46);
        total_bad += n_case - n_ok;
        tern_tokenizer_free(t);
        free(inp);
        free(outf);
    }
    assert_int_equal(total_bad, 0);
}

/* --- decode(encode(x)) == x --- */
/* Bytes a vocabulary cannot represent at all (see unrepresentable_bytes); input containing
 * them is only required to encode and decode without error. */
static bool lossy_byte[256];

static void check_roundtrip(struct tern_tokenizer *t, const char *s, size_t n, const char *what)
{
    int32_t *ids;
    size_t ni = tokenize(t, s, n, 0, &ids);
    size_t cap = n + 64, m = 0;
    char *back = malloc(cap);
    assert_tern_ok(tern_detokenize(t, ids, ni, 0, back, cap, &m));
    bool lossy = false;
    for (size_t i = 0; i < n; i++) lossy |= lossy_byte[(unsigned char)s[i]];
    if (!lossy && (m != n || memcmp(back, s, n))) {
        fail_msg("%s: round trip of %zu bytes gave %zu bytes ('%.*s' -> '%.*s')", what, n, m,
                 (int)(n > 80 ? 80 : n), s, (int)(m > 80 ? 80 : m), back);
    }
    free(back);
    free(ids);
}

static const char *const samples[] = {
    "Hello world", " Hello World!", "  leading and trailing  ", "\n\n\tTabs\r\nand CRLF\r\n",
    "int main(void) { return printf(\"%d\\n\", 42 + x[3]); }",
    "{\"key\": [1, 2.5e-3, null, true], \"k2\": \"v\\u00e9\"}",
    "日本語のテキストと中文文本，还有한국어 텍스트。", "Ünïcödé — “quotes” … 🚀🦙 👨‍👩‍👧",
    "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea?",
    "3 33 333 3333 33333 3.14159 1,000,000 ٣٤٥ ⅷ", "ied 4 ½ months", "\xe1\x9e\x80\xe1\x9e\xb6",
    "", " ", "                ", "a\u00a0b\u2009c\u3000d",
};

static void test_roundtrip(void **state)
{
    (void)state;
    for (size_t v = 0; v < N_FIXTURES; v++) {
        LOAD_OR_SKIP(t, fixture_vocabs[v]);
        for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
            check_roundtrip(t, samples[i], strlen(samples[i]), fixture_vocabs[v]);
        tern_tokenizer_free(t);
    }
}

/* Some byte-level vocabularies lack a usable token for a few bytes: starcoder for C0, C1, F1;
 * falcon for some control bytes; deepseek-llm made the GPT-2 characters of C0, C1, F5..FF
 * user-defined tokens whose text is the character itself ("ÿ" for 0xFF), so 0xFF encodes to
 * that token and decodes as U+00FF. llama.cpp behaves the same (drops / substitutes). The main
 * vocabularies must represent every byte; for the others the affected bytes are listed and
 * input containing them only has to encode and decode without error. */
static void unrepresentable_bytes(struct tern_tokenizer *t, const char *what)
{
    static const char *const complete[] = {"gpt-2", "llama-spm", "phi-3", "qwen2-tiktoken",
                                           "llama3-tiktoken"};
    bool must = false;
    for (size_t i = 0; i < sizeof complete / sizeof complete[0]; i++)
        must |= !strcmp(what, complete[i]);
    int n_lossy = 0;
    for (int b = 0; b < 256; b++) {
        char c = (char)b, back[16];
        int32_t ids[8];
        size_t n, m;
        assert_tern_ok(tern_tokenize(t, &c, 1, 0, ids, 8, &n));
        assert_tern_ok(tern_detokenize(t, ids, n, 0, back, sizeof back, &m));
        lossy_byte[b] = !(m == 1 && back[0] == c);
        if (lossy_byte[b] && must) fail_msg("%s: byte 0x%02X does not round-trip", what, b);
        n_lossy += lossy_byte[b];
    }
    if (n_lossy) print_message("note: %s cannot represent %d byte values\n", what, n_lossy);
}

/* --- invalid UTF-8: defined result (each invalid byte is its own byte symbol), never a
 * failure, and decoding gives the bytes back --- */
static void test_invalid_utf8(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\xff", "a\xffz", "\x80\x80\x80", "\xc3", "abc\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80",
        "\xc0\xaf", "x\xfe\xfey", "caf\xe9 au lait", "\xf8\x88\x80\x80\x80",
    };
    for (size_t v = 0; v < N_FIXTURES; v++) {
        LOAD_OR_SKIP(t, fixture_vocabs[v]);
        unrepresentable_bytes(t, fixture_vocabs[v]);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            check_roundtrip(t, bad[i], strlen(bad[i]), fixture_vocabs[v]);
        memset(lossy_byte, 0, sizeof lossy_byte);
        tern_tokenizer_free(t);
    }
    /* gpt-2: a lone 0xFF is exactly the byte token whose piece is that byte */
    LOAD_OR_SKIP(g, "gpt-2");
    int32_t id[4];
    size_t n;
    assert_tern_ok(tern_tokenize(g, "\xff", 1, 0, id, 4, &n));
    assert_int_equal(n, 1);
    char piece[8];
    size_t pn;
    assert_tern_ok(tern_token_to_piece(g, id[0], 0, piece, sizeof piece, &pn));
    assert_int_equal(pn, 1);
    assert_int_equal((unsigned char)piece[0], 0xFF);
    tern_tokenizer_free(g);
    /* SPM: byte fallback, <0xFF> is token 3 + 0xFF in the Llama-2 vocabulary */
    LOAD_OR_SKIP(s, "llama-spm");
    assert_tern_ok(tern_tokenize(s, "\xff", 1, 0, id, 4, &n));
    assert_int_equal(n, 2); /* "▁" then <0xFF> */
    assert_int_equal(id[1], 3 + 0xFF);
    tern_tokenizer_free(s);
}

/* TERN_TOK_CONTINUE: text that continues a text (a draft starting inside a word) gets no space
 * prefix: SPM's "▁" is not put before it, so its pieces spell exactly the text; byte-level BPE
 * puts none anyway and gives the same ids with or without the flag. */
static void test_continue_flag(void **state)
{
    (void)state;
    LOAD_OR_SKIP(s, "llama-spm");
    int32_t a[32], b[32];
    size_t na, nb;
    assert_tern_ok(tern_tokenize(s, "rakech please", 13, 0, a, 32, &na));
    assert_tern_ok(tern_tokenize(s, "rakech please", 13, TERN_TOK_CONTINUE, b, 32, &nb));
    char text[64];
    size_t len = 0;
    for (size_t i = 0; i < nb; i++) {
        size_t pn;
        assert_tern_ok(tern_token_to_piece(s, b[i], 0, text + len, sizeof text - len, &pn));
        len += pn;
    }
    assert_int_equal(len, 13);
    assert_memory_equal(text, "rakech please", 13);
    char first[16];
    size_t fn;
    assert_tern_ok(tern_token_to_piece(s, a[0], 0, first, sizeof first, &fn));
    assert_true(fn > 0 && first[0] == ' '); /* without the flag: the "▁" prefix */
    tern_tokenizer_free(s);
    LOAD_OR_SKIP(g, "gpt-2");
    assert_tern_ok(tern_tokenize(g, "rakech please", 13, 0, a, 32, &na));
    assert_tern_ok(tern_tokenize(g, "rakech please", 13, TERN_TOK_CONTINUE, b, 32, &nb));
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    assert_int_equal(tern_tokenize(g, "x", 1, 1u << 7, a, 32, &na), TERN_ERR_ARG);
    tern_tokenizer_free(g);
}

/* --- random bytes: never fails, always round-trips (seeded, deterministic) --- */
static void test_fuzz_random_bytes(void **state)
{
    (void)state;
    uint64_t x = 0x7e57c0de;
    char buf[300];
    for (size_t v = 0; v < N_FIXTURES; v++) {
        LOAD_OR_SKIP(t, fixture_vocabs[v]);
        unrepresentable_bytes(t, fixture_vocabs[v]);
        for (int it = 0; it < 1500; it++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t n = (x >> 33) % sizeof buf;
            int mode = (int)((x >> 20) % 3);
            for (size_t i = 0; i < n; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                unsigned r = (unsigned)(x >> 40);
                /* mode 0: any byte; 1: mostly ASCII; 2: ASCII + UTF-8 lead/continuation mix */
                if (mode == 0) buf[i] = (char)r;
                else if (mode == 1) buf[i] = (char)((r % 10) ? (r % 95) + 32 : r);
                else buf[i] = (r % 4) == 0 ? (char)(0x80 | (r >> 8)) : (r % 4) == 1 ? (char)(0xC0 | (r >> 8) % 0x35) : " \n'9a<"[r % 6];
            }
            check_roundtrip(t, buf, n, fixture_vocabs[v]);
        }
        memset(lossy_byte, 0, sizeof lossy_byte);
        tern_tokenizer_free(t);
    }
}

/* --- special tokens: plain text unless asked; bos per metadata --- */
static void test_special_tokens(void **state)
{
    (void)state;
    LOAD_OR_SKIP(q, "qwen2-tiktoken");
    const char *s = "<|im_start|>user\nhi<|im_end|>";
    int32_t ids[64];
    size_t n;
    assert_tern_ok(tern_tokenize(q, s, strlen(s), TERN_TOK_PARSE_SPECIAL, ids, 64, &n));
    assert_true(n >= 4);
    assert_int_equal(ids[0], 151644); /* <|im_start|> */
    assert_int_equal(ids[n - 1], 151645); /* <|im_end|> */
    assert_true(tern_token_is_eog(q, 151645));
    assert_true(tern_token_is_control(q, 151644));
    assert_tern_ok(tern_tokenize(q, s, strlen(s), 0, ids, 64, &n));
    for (size_t i = 0; i < n; i++) assert_true(ids[i] < 151643); /* plain text only */
    /* user-defined tokens are always matched, as in llama.cpp */
    assert_tern_ok(tern_tokenize(q, "<tool_call>", 11, 0, ids, 64, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 151657);
    assert_int_equal(tern_token_lookup(q, "<|im_start|>", 12), 151644);
    /* the control piece is empty unless rendered as special */
    char buf[32];
    size_t bn;
    assert_tern_ok(tern_token_to_piece(q, 151644, 0, buf, sizeof buf, &bn));
    assert_int_equal(bn, 0);
    assert_tern_ok(tern_token_to_piece(q, 151644, TERN_PIECE_SPECIAL, buf, sizeof buf, &bn));
    assert_int_equal(bn, 12);
    tern_tokenizer_free(q);

    LOAD_OR_SKIP(l3, "llama3-tiktoken");
    assert_tern_ok(tern_tokenize(l3, "Hi", 2, TERN_TOK_ADD_SPECIAL, ids, 64, &n));
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 128000);
    assert_int_equal(tern_token_bos(l3), 128000);
    assert_true(tern_token_is_eog(l3, 128009)); /* <|eot_id|> */
    assert_true(tern_token_is_eog(l3, 128001));
    assert_false(tern_token_is_eog(l3, 13));
    assert_tern_ok(tern_tokenize(l3, "<|eot_id|>", 10, TERN_TOK_PARSE_SPECIAL, ids, 64, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 128009);
    tern_tokenizer_free(l3);

    LOAD_OR_SKIP(g, "gpt-2"); /* no add_bos_token key: nothing added */
    assert_tern_ok(tern_tokenize(g, "Hi", 2, TERN_TOK_ADD_SPECIAL, ids, 64, &n));
    assert_int_equal(n, 1);
    tern_tokenizer_free(g);

    LOAD_OR_SKIP(sp, "llama-spm");
    assert_tern_ok(tern_tokenize(sp, "", 0, TERN_TOK_ADD_SPECIAL, ids, 64, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    assert_tern_ok(tern_tokenize(sp, "", 0, 0, ids, 64, &n));
    assert_int_equal(n, 0);
    /* "<s>" parsed as special: bos id, and the text after it gets the SPM leading space */
    assert_tern_ok(tern_tokenize(sp, "<s>Hello", 8, TERN_TOK_PARSE_SPECIAL, ids, 64, &n));
    assert_int_equal(ids[0], 1);
    int32_t ref[8];
    size_t rn;
    assert_tern_ok(tern_tokenize(sp, "Hello", 5, 0, ref, 8, &rn));
    assert_int_equal(n, rn + 1);
    assert_memory_equal(ids + 1, ref, rn * sizeof *ref);
    tern_tokenizer_free(sp);
}

/* --- caller buffers too small: RANGE, the needed size, a message saying so --- */
static void test_range_errors(void **state)
{
    (void)state;
    LOAD_OR_SKIP(t, "gpt-2");
    const char *s = "Hello world, this is a test of the buffer size rule.";
    int32_t ids[4];
    size_t n = 0;
    assert_int_equal(tern_tokenize(t, s, strlen(s), 0, ids, 4, &n), TERN_ERR_RANGE);
    assert_true(n > 4);
    assert_non_null(strstr(tern_last_error(), "needs"));
    int32_t *all = malloc(n * sizeof *all);
    size_t n2;
    assert_tern_ok(tern_tokenize(t, s, strlen(s), 0, all, n, &n2));
    assert_int_equal(n, n2);
    assert_memory_equal(all, ids, sizeof ids); /* the first cap ids were written */
    char small[3];
    size_t m;
    assert_int_equal(tern_detokenize(t, all, n2, 0, small, sizeof small, &m), TERN_ERR_RANGE);
    assert_int_equal(m, strlen(s));
    int32_t bad = 1 << 30;
    assert_int_equal(tern_detokenize(t, &bad, 1, 0, small, sizeof small, &m), TERN_ERR_ARG);
    assert_int_equal(tern_tokenize(t, s, 3, 0x80, ids, 4, &n), TERN_ERR_ARG);
    /* tern_tokenize_grow: from no buffer, from a small one, and a buffer already big enough
     * (kept, not reallocated); the ids equal tern_tokenize's */
    int32_t *grown = NULL;
    size_t cap = 0, ng = 0;
    assert_tern_ok(tern_tokenize_grow(t, s, strlen(s), 0, &grown, &cap, &ng));
    assert_int_equal(ng, n2);
    assert_int_equal(cap, n2);
    assert_memory_equal(grown, all, n2 * sizeof *all);
    const int32_t *kept = grown;
    assert_tern_ok(tern_tokenize_grow(t, s, 10, 0, &grown, &cap, &ng));
    assert_ptr_equal(grown, kept);
    assert_int_equal(cap, n2);
    free(grown);
    grown = malloc(2 * sizeof *grown);
    cap = 2;
    assert_tern_ok(tern_tokenize_grow(t, s, strlen(s), 0, &grown, &cap, &ng));
    assert_memory_equal(grown, all, n2 * sizeof *all);
    assert_int_equal(tern_tokenize_grow(t, s, 3, 0x80, &grown, &cap, &ng), TERN_ERR_ARG);
    assert_int_equal(tern_tokenize_grow(t, s, 3, 0, NULL, &cap, &ng), TERN_ERR_ARG);
    free(grown);
    free(all);
    tern_tokenizer_free(t);
}

/* --- a rendered chat prompt gets exactly one BOS, whether or not its template wrote it --- */
static void test_chat_prompt_flags(void **state)
{
    (void)state;
    LOAD_OR_SKIP(t, "llama-spm"); /* add_bos true, bos "<s>" */
    const char *with = "<s>[INST] hi [/INST]", *without = "[INST] hi [/INST]";
    assert_int_equal(tern_chat_prompt_flags(t, with, strlen(with)), TERN_TOK_PARSE_SPECIAL);
    assert_int_equal(tern_chat_prompt_flags(t, without, strlen(without)),
                     TERN_TOK_PARSE_SPECIAL | TERN_TOK_ADD_SPECIAL);
    assert_int_equal(tern_chat_prompt_flags(t, "<s", 2), TERN_TOK_PARSE_SPECIAL | TERN_TOK_ADD_SPECIAL);
    const char *texts[2] = {with, without};
    for (int k = 0; k < 2; k++) {
        int32_t *ids = NULL;
        size_t cap = 0, n = 0;
        const size_t len = strlen(texts[k]);
        assert_tern_ok(tern_tokenize_grow(t, texts[k], len, tern_chat_prompt_flags(t, texts[k], len),
                                          &ids, &cap, &n));
        int bos = 0;
        for (size_t i = 0; i < n; i++) bos += ids[i] == tern_token_bos(t);
        assert_int_equal(bos, 1);
        assert_int_equal(ids[0], tern_token_bos(t));
        free(ids);
    }
    tern_tokenizer_free(t);
}

/* --- streaming detokenizer: valid UTF-8 pieces that concatenate to the text --- */
static bool valid_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!l || i + l > n || (l == 2 && c < 0xC2)) return false;
        for (size_t k = 1; k < l; k++)
            if ((u[i + k] & 0xC0) != 0x80) return false;
        i += l;
    }
    return true;
}

static void stream_check(struct tern_tokenizer *t, const char *s, size_t n, int *n_held)
{
    int32_t *ids;
    size_t ni = tokenize(t, s, n, 0, &ids);
    struct tern_detokenizer *d;
    assert_tern_ok(tern_detokenizer_create(t, 0, &d));
    char *acc = malloc(n + 64);
    size_t m = 0;
    for (size_t i = 0; i < ni; i++) {
        const char *p;
        size_t pn;
        assert_tern_ok(tern_detokenizer_push(d, ids[i], &p, &pn));
        assert_true(valid_utf8(p, pn));
        if (pn == 0) (*n_held)++;
        memcpy(acc + m, p, pn);
        m += pn;
    }
    const char *p;
    size_t pn;
    assert_tern_ok(tern_detokenizer_flush(d, &p, &pn));
    assert_int_equal(pn, 0);
    assert_int_equal(m, n);
    assert_memory_equal(acc, s, n);
    free(acc);
    free(ids);
    tern_detokenizer_free(d);
}

static void test_stream_detokenizer(void **state)
{
    (void)state;
    const char *text = "Ünïcödé — “quotes” … 🚀🦙 日本語 👨‍👩‍👧 and 𝔘𝔫𝔦 plain";
    LOAD_OR_SKIP(sp, "llama-spm"); /* emoji go through <0xNN> byte tokens */
    int held = 0;
    stream_check(sp, text, strlen(text), &held);
    assert_true(held > 0); /* some byte tokens were held back until their character completed */
    /* a lone incomplete sequence comes out as U+FFFD at flush */
    struct tern_detokenizer *d;
    assert_tern_ok(tern_detokenizer_create(sp, 0, &d));
    const char *p;
    size_t pn;
    assert_tern_ok(tern_detokenizer_push(sp ? d : d, 3 + 0xF0, &p, &pn)); /* <0xF0> */
    assert_int_equal(pn, 0);
    assert_tern_ok(tern_detokenizer_flush(d, &p, &pn));
    assert_int_equal(pn, 3);
    assert_memory_equal(p, "\xEF\xBF\xBD", 3);
    /* a byte that cannot start a sequence is replaced at once */
    assert_tern_ok(tern_detokenizer_push(d, 3 + 0xFF, &p, &pn));
    assert_int_equal(pn, 3);
    assert_memory_equal(p, "\xEF\xBF\xBD", 3);
    tern_detokenizer_free(d);
    tern_tokenizer_free(sp);

    LOAD_OR_SKIP(g, "gpt-2"); /* byte-level BPE splits characters across tokens */
    held = 0;
    stream_check(g, text, strlen(text), &held);
    assert_true(held > 0);
    tern_tokenizer_free(g);
}

/* --- long words go through the heap merge without trouble (and give llama.cpp's answer on a
 * case the fixtures cover: "333333333" splits as in the .out file) --- */
static void test_long_words(void **state)
{
    (void)state;
    LOAD_OR_SKIP(t, "gpt-2");
    size_t n = 200000;
    char *s = malloc(n);
    for (size_t i = 0; i < n; i++) s[i] = "abcdefghij"[(i * 7 + i / 13) % 10];
    check_roundtrip(t, s, n, "gpt-2 long word");
    memset(s, 'a', n);
    check_roundtrip(t, s, n, "gpt-2 long run");
    free(s);
    tern_tokenizer_free(t);
}

/* --- GPT-2's bytes_to_unicode, built here as its reference code does (printable Latin-1 bytes
 * map to themselves, the rest to 256, 257, ... in byte order), against tern's closed form --- */
static void test_bytelevel_map(void **state)
{
    (void)state;
    int32_t ref_byte[512];
    for (int c = 0; c < 512; c++) ref_byte[c] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cpt = printable ? (uint32_t)b : 256u + (uint32_t)n++;
        assert_int_equal(tok_byte_to_cpt((uint8_t)b), cpt);
        ref_byte[cpt] = b;
    }
    assert_int_equal(n, 68);
    for (uint32_t c = 0; c < 512; c++) assert_int_equal(tok_cpt_to_byte(c), ref_byte[c]);
    assert_int_equal(tok_cpt_to_byte(0x10FFFF), -1);
    assert_int_equal(tok_cpt_to_byte(UINT32_MAX), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_exact),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_continue_flag),
        cmocka_unit_test(test_fuzz_random_bytes),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_range_errors),
        cmocka_unit_test(test_chat_prompt_flags),
        cmocka_unit_test(test_stream_detokenizer),
        cmocka_unit_test(test_long_words),
        cmocka_unit_test(test_bytelevel_map),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
