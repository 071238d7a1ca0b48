/* fuzz_tokenizer.c — fuzz target for the tokenizers (scripts/fuzz.sh; replayed by ctest).
 *
 * Each input is tokenized with the nine fixture vocabularies, so every pre-tokenizer runs
 * (byte-level BPE: gpt-2, qwen2, llama3 with ignore_merges, deepseek-llm with its Latin-1
 * user-defined tokens, starcoder and falcon with their unrepresentable bytes, gpt-neox with
 * llama.cpp's default pre-tokenizer and user-defined space runs; SentencePiece: llama-spm, phi-3
 * with its rstrip specials), each with and without
 * TERN_TOK_PARSE_SPECIAL and TERN_TOK_ADD_SPECIAL, and these promises are checked (a broken
 * one aborts, so the fuzzer reports it):
 * - tokenize never fails but for a short buffer (TERN_ERR_RANGE naming the size needed, with
 *   the first cap ids written), every id is in the vocabulary, a second call gives the same ids
 *   (the word cache agrees with the merge loop);
 * - ADD_SPECIAL adds exactly bos/eos as the tokenizer says around the same ids;
 * - without PARSE_SPECIAL no control token comes out of the text (docs/tokenizers.md);
 * - detokenize(tokenize(x)) == x where docs/tokenizers.md promises it: no byte the vocabulary
 *   cannot represent, and for SentencePiece no U+2581 in the text (it stands for a space) and no
 *   special token matched (each text segment after one gets SentencePiece's leading space, as
 *   in llama.cpp); with PARSE_SPECIAL the byte-level BPE
 *   vocabularies round-trip too when control tokens are rendered (TERN_PIECE_SPECIAL);
 * - the streaming detokenizer returns valid UTF-8 equal to the whole-string detokenization
 *   with every ill-formed part replaced by U+FFFD (Unicode's "maximal subpart" rule, written
 *   out independently below), for the ids above and for arbitrary ids read from the input.
 * Vocabularies load once per process from ../shared/fixtures/tokenizer (TERN_SHARED overrides
 * the ../shared location); without them the target exits 77 with a message (ctest: skipped;
 * fuzz.sh: a failed run), never passes silently. Seeds: tests/fuzz/corpus/tokenizer. */
#include "tern.h"
#include "tokenizer/tok_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef TERN_SHARED_DIR
#define TERN_SHARED_DIR "../shared"
#endif

static const char *const vocab_names[] = {"gpt-2", "qwen2-tiktoken", "llama3-tiktoken",
                                          "deepseek-llm", "starcoder", "falcon", "gpt-neox",
                                          "llama-spm", "phi-3"};
#define N_VOCABS (sizeof vocab_names / sizeof vocab_names[0])

static struct vocab {
    struct tern_tokenizer *t;
    bool lossy[256]; /* lone bytes not given back: starcoder, falcon, deepseek (docs/tokenizers.md) */
} vocabs[N_VOCABS];

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_tokenizer: %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void load_all(void)
{
    const char *root = getenv("TERN_SHARED");
    if (!root || !*root) root = TERN_SHARED_DIR;
    for (size_t v = 0; v < N_VOCABS; v++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/fixtures/tokenizer/ggml-vocab-%s.gguf", root,
                 vocab_names[v]);
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "fuzz_tokenizer: ERROR: fixture %s not found; the target needs "
                            "../shared/fixtures (set TERN_SHARED to its parent folder). "
                            "Nothing was tested.\n", path);
            exit(77); /* ctest: skipped; libFuzzer: a failed run with this message */
        }
        fclose(f);
        tern_status st = tern_tokenizer_load(path, &vocabs[v].t);
        CHECK(st == TERN_OK, "%s", tern_last_error());
        struct tern_tokenizer *t = vocabs[v].t;
        for (int b = 0; b < 256; b++) {
            char c = (char)b, back[16];
            int32_t ids[8];
            size_t n, m;
            CHECK(tern_tokenize(t, &c, 1, 0, ids, 8, &n) == TERN_OK, "%s", tern_last_error());
            CHECK(tern_detokenize(t, ids, n, 0, back, sizeof back, &m) == TERN_OK, "%s",
                  tern_last_error());
            vocabs[v].lossy[b] = !(m == 1 && back[0] == c);
        }
    }
}

/* Unicode's U+FFFD substitution of maximal subparts (Unicode 15, §3.9, Table 3-7): what the
 * streaming detokenizer must produce from the concatenated bytes. Returns the output length;
 * out holds at least 3 * n bytes. */
static size_t sanitize_utf8(const unsigned char *b, size_t n, char *out)
{
    size_t i = 0, m = 0;
    while (i < n) {
        unsigned c = b[i];
        unsigned len = 0, lo = 0x80, hi = 0xBF;
        if (c < 0x80) len = 1;
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (len == 0) { /* never a lead byte */
            memcpy(out + m, "\xEF\xBF\xBD", 3);
            m += 3;
            i++;
            continue;
        }
        unsigned k = 1;
        while (k < len && i + k < n) {
            unsigned x = b[i + k];
            if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) break;
            k++;
        }
        if (k == len) {
            memcpy(out + m, b + i, len);
            m += len;
        } else { /* a maximal subpart: the valid prefix of a sequence, ill-formed or cut off */
            memcpy(out + m, "\xEF\xBF\xBD", 3);
            m += 3;
        }
        i += k;
    }
    return m;
}

static bool valid_utf8(const char *s, size_t n, char *scratch)
{
    return sanitize_utf8((const unsigned char *)s, n, scratch) == n && !memcmp(scratch, s, n);
}

/* Whole-string vs streaming detokenization of ids under flags. */
static void check_stream(struct tern_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                         const char *what)
{
    size_t cap = 64, m = 0;
    char *whole = malloc(cap);
    tern_status st;
    while ((st = tern_detokenize(t, ids, n, flags, whole, cap, &m)) == TERN_ERR_RANGE) {
        CHECK(m > cap, "%s: RANGE without a larger size (%zu for %zu)", what, m, cap);
        cap = m;
        whole = realloc(whole, cap);
    }
    CHECK(st == TERN_OK, "%s: detokenize: %s", what, tern_last_error());
    char *want = malloc(3 * m + 1), *got = malloc(3 * m + 64), *scratch = malloc(3 * m + 64);
    size_t wn = sanitize_utf8((const unsigned char *)whole, m, want), gn = 0;

    struct tern_detokenizer *d;
    CHECK(tern_detokenizer_create(t, flags, &d) == TERN_OK, "%s", tern_last_error());
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t pn;
        if (i < n) CHECK(tern_detokenizer_push(d, ids[i], &p, &pn) == TERN_OK, "%s", tern_last_error());
        else CHECK(tern_detokenizer_flush(d, &p, &pn) == TERN_OK, "%s", tern_last_error());
        CHECK(valid_utf8(p, pn, scratch), "%s: streamed piece %zu is not valid UTF-8", what, i);
        CHECK(gn + pn <= wn, "%s: streaming gave more than the whole string (%zu > %zu)", what,
              gn + pn, wn);
        memcpy(got + gn, p, pn);
        gn += pn;
    }
    tern_detokenizer_free(d);
    CHECK(gn == wn && !memcmp(got, want, wn),
          "%s: streaming gave %zu bytes, the whole string (U+FFFD for ill-formed parts) %zu", what,
          gn, wn);
    free(whole);
    free(want);
    free(got);
    free(scratch);
}

/* Ids for text under flags, through the short-buffer path first. *n_out ids, malloc'ed. */
static int32_t *tokenize_checked(struct tern_tokenizer *t, const char *text, size_t len,
                                 unsigned flags, size_t *n_out, const char *what)
{
    size_t cap = len / 3 + 1, n = 0;
    int32_t *ids = malloc(sizeof *ids * cap);
    tern_status st = tern_tokenize(t, text, len, flags, ids, cap, &n);
    if (st == TERN_ERR_RANGE) {
        CHECK(n > cap && strstr(tern_last_error(), "needs"), "%s: RANGE says %zu for cap %zu: %s",
              what, n, cap, tern_last_error());
        int32_t *all = malloc(sizeof *all * n);
        size_t n2 = 0;
        CHECK(tern_tokenize(t, text, len, flags, all, n, &n2) == TERN_OK, "%s: %s", what,
              tern_last_error());
        CHECK(n2 == n && !memcmp(all, ids, sizeof *ids * cap),
              "%s: the short call wrote other ids than the full one", what);
        free(ids);
        ids = all;
    } else {
        CHECK(st == TERN_OK, "%s: tokenize: %s", what, tern_last_error());
    }
    for (size_t i = 0; i < n; i++)
        CHECK(ids[i] >= 0 && ids[i] < tern_tokenizer_n_vocab(t), "%s: id %d at %zu", what,
              ids[i], i);
    /* again: the word cache now holds every word, and must agree with the merge loop */
    int32_t *again = malloc(sizeof *again * (n ? n : 1));
    size_t n2 = 0;
    CHECK(tern_tokenize(t, text, len, flags, again, n, &n2) == TERN_OK && n2 == n &&
              !memcmp(again, ids, sizeof *ids * n),
          "%s: a second call gave other ids", what);
    free(again);
    *n_out = n;
    return ids;
}

static void fuzz_vocab(struct vocab *v, const char *name, const char *text, size_t len)
{
    struct tern_tokenizer *t = v->t;
    bool lossy = false;
    for (size_t i = 0; i < len; i++) lossy |= v->lossy[(unsigned char)text[i]];
    /* SentencePiece writes spaces as U+2581, so a U+2581 of the text comes back as a space */
    if (t->model == TOK_MODEL_SPM)
        for (size_t i = 0; i + 3 <= len && !lossy; i++) lossy = !memcmp(text + i, "\xE2\x96\x81", 3);
    char what[96];

    for (unsigned parse = 0; parse <= TERN_TOK_PARSE_SPECIAL; parse += TERN_TOK_PARSE_SPECIAL) {
        snprintf(what, sizeof what, "%s%s", name, parse ? " parse_special" : "");
        size_t n, na;
        int32_t *ids = tokenize_checked(t, text, len, parse, &n, what);
        size_t lead = t->add_bos ? 1 : 0, tail = t->add_eos ? 1 : 0;
        int32_t *add = malloc(sizeof *add * (n + 2));
        CHECK(tern_tokenize(t, text, len, parse | TERN_TOK_ADD_SPECIAL, add, n + 2, &na) == TERN_OK,
              "%s: ADD_SPECIAL: %s", what, tern_last_error());
        CHECK(na == n + lead + tail && (!lead || add[0] == t->bos) &&
                  (!tail || add[na - 1] == t->eos) && !memcmp(add + lead, ids, sizeof *ids * n),
              "%s: ADD_SPECIAL gave %zu ids around %zu", what, na, n);
        free(add);

        bool special = false, strip = false;
        for (size_t i = 0; i < n; i++) {
            uint32_t a = t->attr[ids[i]];
            if (!parse)
                CHECK(!(a & TOK_ATTR_CONTROL), "%s: plain text produced control token %d at %zu",
                      what, ids[i], i);
            special |= (a & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) != 0;
            strip |= (a & (TOK_ATTR_LSTRIP | TOK_ATTR_RSTRIP)) != 0;
        }
        unsigned dflags = parse ? TERN_PIECE_SPECIAL : 0;
        bool promised = !lossy && !strip && (t->model == TOK_MODEL_BPE || !special);
        if (promised) {
            char *back = malloc(len + 1);
            size_t m = 0;
            tern_status st = tern_detokenize(t, ids, n, dflags, back, len + 1, &m);
            CHECK(st == TERN_OK && m == len && !memcmp(back, text, len),
                  "%s: round trip of %zu bytes gave %zu bytes (%s)", what, len, m,
                  st ? tern_last_error() : "different bytes");
            free(back);
        }
        check_stream(t, ids, n, dflags, what);
        free(ids);
    }

    /* arbitrary ids: the detokenizers agree on anything, byte tokens cut mid-character included */
    size_t n = len / 3;
    int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
    uint32_t nv = (uint32_t)tern_tokenizer_n_vocab(t);
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)(unsigned char)text[3 * i] | (uint32_t)(unsigned char)text[3 * i + 1] << 8 |
                     (uint32_t)(unsigned char)text[3 * i + 2] << 16;
        ids[i] = (int32_t)(x % nv);
    }
    snprintf(what, sizeof what, "%s arbitrary ids", name);
    check_stream(t, ids, n, 0, what);
    check_stream(t, ids, n, TERN_PIECE_SPECIAL, what);
    free(ids);
}

/* Inputs are cut at 1 KiB: each runs through nine vocabularies, so long ones are slow, and
 * 1 KiB already holds words past the word cache's limit (96 bytes) and long merge queues.
 * Scratch growth (64 Ki code points, 4 Ki symbols at load) is test_tokenizer's long words. */
#define MAX_INPUT 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool loaded;
    if (!loaded) {
        load_all();
        loaded = true;
    }
    if (size > MAX_INPUT) size = MAX_INPUT;
    for (size_t v = 0; v < N_VOCABS; v++)
        fuzz_vocab(&vocabs[v], vocab_names[v], (const char *)data, size);
    return 0;
}
