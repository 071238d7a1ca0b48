/* test_bpe_train.c — the byte-level BPE trainer (tern tokenizer train, src/train/bpe_train.c).
 *
 * Setup writes a 1500-conversation corpus and trains a 4096-token vocabulary on train.jsonl and
 * another on a plain-text file of the same conversations' messages. Checks:
 *   - the file loads with tern_tokenizer_load: gpt2 model, qwen2 pre-tokenizer, 4096 tokens,
 *     eos <|im_end|>, bos <|endoftext|>, the chat room's template (renders corpus conversations
 *     exactly as Qwen2.5's own template, checked against the fixture)
 *   - arbitrary text round-trips exactly (invalid UTF-8, NUL, CJK, emoji, random bytes)
 *   - the training text takes fewer tokens than bytes/3 (corpus text and plain English text)
 *   - training twice gives the same bytes; other data gives other merges
 *   - the merges equal a naive BPE's (recount everything each step, same tie-break) on random
 *     text, so the incremental pair counts are right
 *   - special tokens are single tokens (user-defined ones also without TERN_TOK_PARSE_SPECIAL)
 *   - vocabularies with few merges are padded to the asked size and still load
 *   - bad input: malformed lines name file:line, missing files, bad sizes, bad specials
 *   - the CLI */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "chat/chat.h"
#include "train/bpe_train.h"
#include "corpus/corpus.h"

static char corpus_dir[512], tok_path[600], plain_path[600], plain_tok[600];

static void write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(corpus_dir, sizeof corpus_dir, "%s/corpus", test_tmpdir());
    struct tern_corpus_params cp = tern_corpus_default_params();
    cp.seed = 3;
    cp.size = 1500;
    if (tern_corpus_toolcalls_write(corpus_dir, &cp, NULL)) return -1;
    char train[600];
    snprintf(train, sizeof train, "%s/train.jsonl", corpus_dir);
    snprintf(tok_path, sizeof tok_path, "%s/tok.gguf", test_tmpdir());
    const char *files[] = {train};
    struct tern_bpe_train_params p = tern_bpe_train_default_params();
    if (tern_tokenizer_train(files, 1, &p, tok_path, NULL)) return -1;
    /* English-like plain text: the user and assistant messages, one per line */
    char *data = test_read_file(train, NULL);
    if (!data) return -1;
    struct corpus_buf b = {0};
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(line);
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(c, "messages")) {
            const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
            const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
            if (text && role && (!strcmp(role, "user") || !strcmp(role, "assistant"))) {
                corpus_buf_puts(&b, text);
                corpus_buf_puts(&b, "\n");
            }
        }
        cJSON_Delete(c);
    }
    free(data);
    snprintf(plain_path, sizeof plain_path, "%s/messages.txt", test_tmpdir());
    write_file(plain_path, b.p, b.n);
    corpus_buf_free(&b);
    snprintf(plain_tok, sizeof plain_tok, "%s/plain.gguf", test_tmpdir());
    const char *pf[] = {plain_path};
    return tern_tokenizer_train(pf, 1, &p, plain_tok, NULL) ? -1 : 0;
}

static void test_loads(void **state)
{
    (void)state;
    struct tern_tokenizer *t;
    assert_tern_ok(tern_tokenizer_load(tok_path, &t));
    assert_int_equal(tern_tokenizer_n_vocab(t), 4096);
    assert_string_equal(tern_tokenizer_model(t), "gpt2");
    assert_string_equal(tern_tokenizer_pre(t), "qwen2");
    size_t n;
    const char *s = tern_token_text(t, tern_token_eos(t), &n);
    assert_true(n == 10 && !memcmp(s, "<|im_end|>", 10));
    s = tern_token_text(t, tern_token_bos(t), &n);
    assert_true(n == 13 && !memcmp(s, "<|endoftext|>", 13));
    assert_true(tern_token_is_eog(t, tern_token_eos(t)));
    /* add_bos is false: ADD_SPECIAL adds nothing */
    int32_t ids[8];
    assert_tern_ok(tern_tokenize(t, "hi", 2, TERN_TOK_ADD_SPECIAL, ids, 8, &n));
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], tern_token_bos(t));
    tern_tokenizer_free(t);

    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(tok_path, &g));
    struct tern_str tmpl;
    assert_tern_ok(tern_gguf_get_str(g, "tokenizer.chat_template", &tmpl));
    assert_true(tmpl.len == strlen(chat_fallback_template) && !memcmp(tmpl.ptr, chat_fallback_template, tmpl.len));
    const char *fx = test_shared_path("fixtures/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    if (fx) { /* the chat room's template renders corpus conversations (they start with a system
               * message) exactly as Qwen2.5's own does, given object arguments */
        size_t fl;
        char *ref = test_read_file(fx, &fl);
        struct tern_chat_template *qt, *ot;
        assert_tern_ok(tern_chat_template_create(ref, fl, &qt));
        assert_tern_ok(tern_chat_template_create(tmpl.ptr, tmpl.len, &ot));
        char path[700];
        snprintf(path, sizeof path, "%s/val.jsonl", corpus_dir);
        char *data = test_read_file(path, NULL);
        int n_conv = 0;
        for (char *line = strtok(data, "\n"); line && n_conv < 40; line = strtok(NULL, "\n"), n_conv++) {
            cJSON *c = cJSON_Parse(line);
            const cJSON *m, *call;
            cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(c, "messages"))
                cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
                    cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
                    cJSON *args = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "arguments")));
                    assert_non_null(args);
                    cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", args);
                }
            char *body = cJSON_PrintUnformatted(c);
            struct tern_chat_params p = tern_chat_default_params();
            p.messages_json = body;
            char *a, *b;
            size_t al, bl;
            assert_tern_ok(tern_chat_render(qt, &p, &a, &al));
            assert_tern_ok(tern_chat_render(ot, &p, &b, &bl));
            assert_true(al == bl && !memcmp(a, b, al));
            free(a), free(b), free(body);
            cJSON_Delete(c);
        }
        assert_int_equal(n_conv, 40);
        free(data);
        tern_chat_template_free(qt);
        tern_chat_template_free(ot);
        free(ref);
    }
    assert_true(tern_gguf_arr_len(g, tern_gguf_find_key(g, "tokenizer.ggml.merges")) > 3000);
    tern_gguf_close(g);
}

static void roundtrip(struct tern_tokenizer *t, const char *text, size_t len, unsigned tok_flags, unsigned piece_flags)
{
    size_t n, cap = len + 8, m;
    int32_t *ids = malloc(cap * sizeof *ids);
    assert_tern_ok(tern_tokenize(t, text, len, tok_flags, ids, cap, &n));
    char *back = malloc(len * 4 + 64);
    assert_tern_ok(tern_detokenize(t, ids, n, piece_flags, back, len * 4 + 64, &m));
    if (m != len || memcmp(back, text, len)) fail_msg("round trip of %zu bytes gave %zu bytes", len, m);
    free(ids);
    free(back);
}

static void test_roundtrip(void **state)
{
    (void)state;
    struct tern_tokenizer *t;
    assert_tern_ok(tern_tokenizer_load(tok_path, &t));
    static const char *const texts[] = {
        "Could you check the weather forecast in Lyon for tomorrow?",
        "東京の天気は？ 北京 서울 Αθήνα Москва",
        "Emoji: 🎉🙏🏽👩‍💻 and accents: São Paulo, Zürich, Kraków, İstanbul",
        "\xff\xfe broken \x80 utf8 \xe6\x9d truncated \xc3",
        "<tool_call>\n{\"name\": \"get_forecast\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>",
        "<|im_start|>user\nhi<|im_end|> <|endoftext|> <tool_response>{}</tool_response>",
        "    indented\n\n\ttabs\r\n  trailing   ",
        "1234567890 3.14159 -42 1e10 0x1F",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        roundtrip(t, texts[i], strlen(texts[i]), 0, 0);
        roundtrip(t, texts[i], strlen(texts[i]), TERN_TOK_PARSE_SPECIAL, TERN_PIECE_SPECIAL);
    }
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    roundtrip(t, all, 256, 0, 0);
    struct corpus_rng r = {12345};
    char buf[400];
    for (int k = 0; k < 200; k++) {
        size_t len = corpus_below(&r, 400);
        for (size_t i = 0; i < len; i++) buf[i] = (char)corpus_below(&r, 256);
        roundtrip(t, buf, len, 0, 0);
    }
    tern_tokenizer_free(t);
}

struct count_ctx {
    struct tern_tokenizer *t;
    size_t bytes, tokens;
    int32_t *ids;
    size_t cap;
};

static void count_piece(void *ctx, const char *text, size_t len)
{
    struct count_ctx *c = ctx;
    size_t n;
    if (tern_tokenize(c->t, text, len, 0, c->ids, c->cap, &n) == TERN_ERR_RANGE) {
        c->ids = realloc(c->ids, (n + 1) * sizeof *c->ids);
        c->cap = n + 1;
        assert_tern_ok(tern_tokenize(c->t, text, len, 0, c->ids, c->cap, &n));
    }
    c->bytes += len;
    c->tokens += n;
}

static void test_compression(void **state)
{
    (void)state;
    struct count_ctx c = {0};
    assert_tern_ok(tern_tokenizer_load(tok_path, &c.t));
    char train[600];
    snprintf(train, sizeof train, "%s/train.jsonl", corpus_dir);
    char *data = test_read_file(train, NULL);
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *conv = cJSON_Parse(line);
        assert_tern_ok(corpus_conv_text(conv, count_piece, &c, NULL));
        cJSON_Delete(conv);
    }
    free(data);
    print_message("corpus text: %zu bytes -> %zu tokens (%.2f bytes/token)\n", c.bytes, c.tokens,
                  (double)c.bytes / (double)c.tokens);
    assert_true(c.tokens * 3 < c.bytes);
    tern_tokenizer_free(c.t);

    struct count_ctx p = {0};
    assert_tern_ok(tern_tokenizer_load(plain_tok, &p.t));
    size_t n;
    char *text = test_read_file(plain_path, &n);
    count_piece(&p, text, n);
    free(text);
    print_message("plain English text: %zu bytes -> %zu tokens (%.2f bytes/token)\n", p.bytes, p.tokens,
                  (double)p.bytes / (double)p.tokens);
    assert_true(p.tokens * 3 < p.bytes);
    tern_tokenizer_free(p.t);
    free(c.ids);
    free(p.ids);
}

static void test_deterministic(void **state)
{
    (void)state;
    char again[600], other[600], train[600], val[600];
    snprintf(train, sizeof train, "%s/train.jsonl", corpus_dir);
    snprintf(val, sizeof val, "%s/val.jsonl", corpus_dir);
    snprintf(again, sizeof again, "%s/tok_again.gguf", test_tmpdir());
    snprintf(other, sizeof other, "%s/tok_other.gguf", test_tmpdir());
    const char *f1[] = {train}, *f2[] = {val};
    struct tern_bpe_train_params p = tern_bpe_train_default_params();
    assert_tern_ok(tern_tokenizer_train(f1, 1, &p, again, NULL));
    assert_tern_ok(tern_tokenizer_train(f2, 1, &p, other, NULL));
    size_t na, nb, nc;
    char *a = test_read_file(tok_path, &na), *b = test_read_file(again, &nb), *c = test_read_file(other, &nc);
    assert_true(na == nb && !memcmp(a, b, na));
    assert_false(na == nc && !memcmp(a, c, na));
    free(a);
    free(b);
    free(c);
}

/* ------------------------------------------------------------------ reference BPE */

/* Naive BPE over words of a text made of [a-d] and single spaces (the qwen2 pre-tokenizer cuts
 * it into " abc"-like words): every step recounts all pairs, picks the highest count, ties to
 * the lowest (left id, right id); new tokens get the next id unless their bytes exist. */
struct ref_tok {
    char s[130];
};

static int ref_id(struct ref_tok *toks, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(toks[i].s, s)) return i;
    snprintf(toks[*n].s, sizeof toks[*n].s, "%s", s);
    return (*n)++;
}

static int ref_bpe(const char *text, int max_merges, char left[][64], char right[][64])
{
    static struct ref_tok toks[4096];
    int nt = 0;
    for (int b = 0; b < 256; b++) {
        toks[b].s[0] = (char)b;
        toks[b].s[1] = '\0';
    }
    toks[0].s[0] = '\0'; /* unused: the text has no NUL */
    nt = 256;
    /* words */
    static int syms[512][64], len[512], cnt[512];
    static long pc[512][512];
    memset(len, 0, sizeof len);
    memset(cnt, 0, sizeof cnt);
    int nw = 0;
    for (const char *p = text; *p;) {
        const char *e = p + 1;
        while (*e && *e != ' ') e++;
        int w = -1;
        for (int i = 0; i < nw && w < 0; i++) {
            if (len[i] != (int)(e - p)) continue;
            bool same = true;
            for (int k = 0; k < len[i]; k++) same &= syms[i][k] == (unsigned char)p[k];
            if (same) w = i;
        }
        if (w < 0) {
            w = nw++;
            len[w] = (int)(e - p);
            for (int k = 0; k < len[w]; k++) syms[w][k] = (unsigned char)p[k];
        }
        cnt[w]++;
        p = e;
    }
    int nm = 0;
    while (nm < max_merges) {
        memset(pc, 0, sizeof pc);
        for (int w = 0; w < nw; w++)
            for (int k = 0; k + 1 < len[w]; k++) pc[syms[w][k]][syms[w][k + 1]] += cnt[w];
        long best = 0;
        int ba = 0, bb = 0;
        for (int a = 0; a < nt; a++) /* first maximum in (a, b) order: ties to the lowest ids */
            for (int b = 0; b < nt; b++)
                if (pc[a][b] > best) best = pc[a][b], ba = a, bb = b;
        if (best < 2) break;
        char s[130];
        snprintf(s, sizeof s, "%s%s", toks[ba].s, toks[bb].s);
        int z = ref_id(toks, &nt, s);
        snprintf(left[nm], 64, "%s", toks[ba].s);
        snprintf(right[nm], 64, "%s", toks[bb].s);
        nm++;
        for (int w = 0; w < nw; w++) {
            int j = 0;
            for (int k = 0; k < len[w];) {
                if (k + 1 < len[w] && syms[w][k] == ba && syms[w][k + 1] == bb) syms[w][j++] = z, k += 2;
                else syms[w][j++] = syms[w][k++];
            }
            len[w] = j;
        }
    }
    return nm;
}

/* GPT-2 byte-level text of [a-d ]: a space is U+0120. */
static void byte_level(const char *s, char *out)
{
    size_t k = 0;
    for (; *s; s++) {
        if (*s == ' ') out[k++] = (char)0xC4, out[k++] = (char)0xA0;
        else out[k++] = *s;
    }
    out[k] = '\0';
}

static void test_matches_reference(void **state)
{
    (void)state;
    struct corpus_rng r = {777};
    for (int round = 0; round < 3; round++) {
        char text[1400];
        size_t n = 0;
        while (n < 1200) { /* words of 1-6 letters from a-d, each preceded by a space */
            text[n++] = ' ';
            int l = corpus_range(&r, 1, 6);
            for (int k = 0; k < l; k++) text[n++] = (char)('a' + corpus_below(&r, 4));
        }
        text[n] = '\0';
        static char wl[60][64], wr[60][64];
        int nm = ref_bpe(text, 60, wl, wr);
        struct bpe_trainer *t;
        struct tern_bpe_train_params p = tern_bpe_train_default_params();
        p.vocab_size = 256 + 7 + 60;
        assert_tern_ok(bpe_trainer_create(&p, &t));
        assert_tern_ok(bpe_trainer_add_text(t, text, n));
        char path[600];
        snprintf(path, sizeof path, "%s/ref%d.gguf", test_tmpdir(), round);
        struct tern_bpe_train_report rep;
        assert_tern_ok(bpe_trainer_finish(t, path, &rep));
        bpe_trainer_free(t);
        assert_int_equal(rep.n_merges, nm);
        struct tern_gguf *g;
        assert_tern_ok(tern_gguf_open(path, &g));
        int64_t k = tern_gguf_find_key(g, "tokenizer.ggml.merges");
        for (int i = 0; i < nm; i++) {
            struct tern_str m = tern_gguf_arr_str(g, k, (uint64_t)i);
            char got[300], exp[300];
            snprintf(got, sizeof got, "%.*s", (int)m.len, m.ptr);
            byte_level(wl[i], exp);
            strcat(exp, " ");
            byte_level(wr[i], exp + strlen(exp));
            if (strcmp(got, exp)) fail_msg("round %d merge %d: trainer '%s', reference '%s'", round, i, got, exp);
        }
        tern_gguf_close(g);
        print_message("round %d: %d merges equal the reference\n", round, nm);
    }
}

/* ------------------------------------------------------------------ specials, padding, errors */

static void test_specials(void **state)
{
    (void)state;
    char path[600], out[600];
    snprintf(path, sizeof path, "%s/small.txt", test_tmpdir());
    snprintf(out, sizeof out, "%s/special.gguf", test_tmpdir());
    const char *text = "hello world, hello tools <think> and more hello\n";
    write_file(path, text, strlen(text));
    const char *files[] = {path};
    const char *extra[] = {"<think>", "</think>"};
    struct tern_bpe_train_params p = tern_bpe_train_default_params();
    p.vocab_size = 300;
    p.extra_special = extra;
    p.n_extra_special = 2;
    struct tern_bpe_train_report rep;
    assert_tern_ok(tern_tokenizer_train(files, 1, &p, out, &rep));
    assert_int_equal(rep.n_special, 9);
    assert_int_equal(rep.n_vocab, 300);
    assert_true(rep.n_padding > 0); /* a tiny text has few pairs seen twice */
    struct tern_tokenizer *t;
    assert_tern_ok(tern_tokenizer_load(out, &t));
    assert_int_equal(tern_tokenizer_n_vocab(t), 300);
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                                           "<tool_response>", "</tool_response>", "<think>", "</think>"};
    for (int i = 0; i < 9; i++) {
        int32_t ids[64];
        size_t n;
        size_t l = strlen(specials[i]);
        assert_tern_ok(tern_tokenize(t, specials[i], l, TERN_TOK_PARSE_SPECIAL, ids, 64, &n));
        if (n != 1) fail_msg("%s is %zu tokens with PARSE_SPECIAL", specials[i], n);
        assert_int_equal(tern_token_lookup(t, specials[i], l), ids[0]);
        assert_int_equal(ids[0], 256 + i); /* ids right after the bytes, in this order */
        assert_tern_ok(tern_tokenize(t, specials[i], l, 0, ids, 64, &n));
        bool control = i < 3;
        if (control ? n == 1 : n != 1) fail_msg("%s without PARSE_SPECIAL: %zu tokens", specials[i], n);
        assert_int_equal(tern_token_is_control(t, 256 + i), control);
    }
    roundtrip(t, text, strlen(text), 0, 0);
    tern_tokenizer_free(t);
}

static void test_errors(void **state)
{
    (void)state;
    char bad[600], out[600], missing[600];
    snprintf(bad, sizeof bad, "%s/bad.jsonl", test_tmpdir());
    snprintf(out, sizeof out, "%s/never.gguf", test_tmpdir());
    snprintf(missing, sizeof missing, "%s/missing.jsonl", test_tmpdir());
    const char *lines = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n{\"messages\": [oops\n";
    write_file(bad, lines, strlen(lines));
    struct tern_bpe_train_params p = tern_bpe_train_default_params();
    const char *f[] = {bad};
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_FORMAT);
    if (!strstr(tern_last_error(), "bad.jsonl:2:")) fail_msg("message does not name the line: %s", tern_last_error());
    lines = "\n{\"messages\": {\"role\": \"user\"}}\n";
    write_file(bad, lines, strlen(lines));
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_FORMAT);
    if (!strstr(tern_last_error(), "bad.jsonl:2: $.messages")) fail_msg("message does not name the path: %s", tern_last_error());
    lines = "{\"messages\": [], \"tools\": [], \"x\": 1}\n{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": "
            "[{\"function\": {\"name\": \"f\", \"arguments\": \"{not json\"}}]}]}\n";
    write_file(bad, lines, strlen(lines));
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_FORMAT);
    if (!strstr(tern_last_error(), "bad.jsonl:2: $.messages[0].tool_calls[0].function.arguments"))
        fail_msg("message does not name the path: %s", tern_last_error());
    f[0] = missing;
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "missing.jsonl"));
    p.vocab_size = 100;
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_ARG);
    p = tern_bpe_train_default_params();
    const char *dup[] = {"<tool_call>"};
    p.extra_special = dup;
    p.n_extra_special = 1;
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_ARG);
    const char *empty[] = {""};
    p.extra_special = empty;
    assert_int_equal(tern_tokenizer_train(f, 1, &p, out, NULL), TERN_ERR_ARG);
    FILE *fo = fopen(out, "rb");
    assert_null(fo); /* nothing half-written */
}

static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_cli(void **state)
{
    (void)state;
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd, "%s tokenizer train --data %s %s/val.jsonl --vocab-size 600 --special '<a>,<b>' -o %s/cli.gguf --json 2>/dev/null",
             test_tern_bin(), plain_path, corpus_dir, test_tmpdir());
    assert_int_equal(run(cmd, out, sizeof out), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(j, "n_vocab")->valuedouble, 600);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(j, "n_special")->valuedouble, 9);
    cJSON_Delete(j);
    snprintf(cmd, sizeof cmd, "%s tokenizer train --data %s -o %s/x.gguf --vocab-size lots 2>&1", test_tern_bin(), plain_path, test_tmpdir());
    assert_int_equal(run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s tokenizer forget 2>&1", test_tern_bin());
    assert_int_equal(run(cmd, out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads),         cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_compression),   cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_matches_reference), cmocka_unit_test(test_specials),
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_cli),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
