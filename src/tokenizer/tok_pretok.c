/* tok_pretok.c — pre-tokenizers of byte-level BPE: text -> words, hand-written (no regex).
 *
 * Each pre-tokenizer is the sequence of split "stages" that llama.cpp applies (llama-vocab.cpp,
 * unicode.cpp): every stage cuts each fragment left by the previous one into its matches AND
 * the unmatched gaps between them (std::regex_iterator semantics), so a later stage only ever
 * refines earlier cuts. Stages work on code point indices over arrays decoded once per call
 * (code point, class, byte offset); the last stage hands byte ranges to the word callback.
 *
 * The regexes reproduced, per stage kind:
 *   GPT2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   LLAMA3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+       (QWEN2: \p{N} instead)
 *   QWEN35 QWEN2 with [\p{L}\p{M}]+ for the letter run and [^\s\p{L}\p{M}\p{N}]+ for the
 *          other run (combining marks stay with their letters)
 *   PUNCT_FALCON [\p{P}\$\+<=>\^~\|`]+      PUNCT_DEFAULT [\p{P}\$\+<=>\^~\|]+
 *   NUM_EACH \p{N}   NUM_RUN \p{N}+   DIGIT3 [0-9][0-9][0-9]   CRLF [\r\n]
 *   DS_LETTERS \s?[A-Za-zµÀ-Ö...]+ (deepseek-llm's explicit list)   DS_PUNCT \s?[!-/:-~！-／...]+
 *   WS_END \s+$   CJK [一-龥ࠀ-一가-퟿]+   DSC_LETTERS \s?\p{L}+   DSC_PUNCT \s?\p{P}+
 * As in llama.cpp, regexes with \p{..} see non-ASCII white space as \s and every other
 * non-ASCII code point only through its category; ASCII is matched as itself. */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

enum stage_kind {
    ST_GPT2, ST_LLAMA3, ST_QWEN2, ST_QWEN35, ST_PUNCT_FALCON, ST_PUNCT_DEFAULT, ST_NUM_EACH, ST_NUM_RUN,
    ST_DIGIT3, ST_CRLF, ST_DS_LETTERS, ST_DS_PUNCT, ST_WS_END, ST_CJK, ST_DSC_LETTERS,
    ST_DSC_PUNCT,
};

struct split {
    const uint32_t *cp;
    const uint8_t *cls;
    const uint32_t *bo;
    const uint8_t *stages;
    int n_stages;
    tok_word_fn word;
    void *ctx;
};

static void run_stage(struct split *s, int k, uint32_t a, uint32_t b);

static inline void emit(struct split *s, int k, uint32_t a, uint32_t b)
{
    if (a < b) run_stage(s, k + 1, a, b);
}

#define NONE 0xFF /* class of a position outside the fragment */

static inline bool is_other(uint8_t c) /* [^\s\p{L}\p{N}] inside the fragment */
{
    return c == TOK_CLS_P || c == TOK_CLS_S || c == TOK_CLS_M || c == TOK_CLS_OTHER;
}

static inline uint32_t lower_ascii(uint32_t c)
{
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* 's 't 're 've 'm 'll 'd at p; returns the length (0 if none). */
static uint32_t contraction(const uint32_t *cp, uint32_t p, uint32_t b, bool fold)
{
    if (cp[p] != '\'' || p + 1 >= b) return 0;
    uint32_t c1 = fold ? lower_ascii(cp[p + 1]) : cp[p + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (p + 2 >= b) return 0;
    uint32_t c2 = fold ? lower_ascii(cp[p + 2]) : cp[p + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

/* White space run at p: \s+(?!\S) keeps the last blank for the next word, \s+ takes all. */
static uint32_t ws_run_end(const uint8_t *cls, uint32_t p, uint32_t b)
{
    uint32_t e = p;
    while (e < b && cls[e] == TOK_CLS_WS) e++;
    if (e - p > 1 && e < b) return e - 1;
    return e > p ? e : p + 1;
}

static void split_gpt2(struct split *s, int k, uint32_t a, uint32_t b)
{
    const uint32_t *cp = s->cp;
    const uint8_t *cls = s->cls;
    uint32_t p = a;
    while (p < b) {
        uint32_t n = contraction(cp, p, b, false);
        if (n) {
            emit(s, k, p, p + n);
            p += n;
            continue;
        }
        uint32_t q = p + (cp[p] == ' ');
        uint8_t c2 = q < b ? cls[q] : NONE;
        uint32_t e;
        if (c2 == TOK_CLS_L || c2 == TOK_CLS_N) {
            e = q;
            while (e < b && cls[e] == c2) e++;
        } else if (c2 != NONE && is_other(c2)) {
            e = q;
            while (e < b && is_other(cls[e])) e++;
        } else {
            e = ws_run_end(cls, p, b);
        }
        emit(s, k, p, e);
        p = e;
    }
}

/* marks: qwen35's variant, where \p{M} belongs to letter runs and not to the other run */
static void split_llama3(struct split *s, int k, uint32_t a, uint32_t b, uint32_t max_digits,
                         bool marks)
{
    const uint32_t *cp = s->cp;
    const uint8_t *cls = s->cls;
    uint32_t p = a;
    while (p < b) {
        uint32_t n = contraction(cp, p, b, true);
        if (n) {
            emit(s, k, p, p + n);
            p += n;
            continue;
        }
        uint32_t c = cp[p];
        uint8_t f = cls[p];
        uint32_t e;
        /* [^\r\n\p{L}\p{N}]?\p{L}+ (qwen35: [\p{L}\p{M}]+) */
#define LETTER(x) ((x) == TOK_CLS_L || (marks && (x) == TOK_CLS_M))
        if (c != '\r' && c != '\n' && f != TOK_CLS_N &&
            (LETTER(f) || (p + 1 < b && LETTER(cls[p + 1])))) {
            e = p + 1;
            while (e < b && LETTER(cls[e])) e++;
#undef LETTER
            emit(s, k, p, e);
            p = e;
            continue;
        }
        /* \p{N}{1,3} */
        if (f == TOK_CLS_N) {
            e = p;
            while (e < b && cls[e] == TOK_CLS_N && e - p < max_digits) e++;
            emit(s, k, p, e);
            p = e;
            continue;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]* (qwen35: not \p{M} either) */
        uint32_t q = p + (c == ' ');
        uint8_t c2 = q < b ? cls[q] : NONE;
        if (c2 != NONE && is_other(c2) && !(marks && c2 == TOK_CLS_M)) {
            e = q;
            while (e < b && is_other(cls[e]) && !(marks && cls[e] == TOK_CLS_M)) e++;
            while (e < b && (cp[e] == '\r' || cp[e] == '\n')) e++;
            emit(s, k, p, e);
            p = e;
            continue;
        }
        /* \s*[\r\n]+ | \s+(?!\S) | \s+ */
        uint32_t w = p, last_nl = 0;
        while (w < b && cls[w] == TOK_CLS_WS) {
            if (cp[w] == '\r' || cp[w] == '\n') last_nl = w + 1;
            w++;
        }
        if (last_nl) e = last_nl;
        else e = ws_run_end(cls, p, b);
        emit(s, k, p, e);
        p = e;
    }
}

struct range {
    uint32_t lo, hi;
};

/* deepseek-llm's letter list, code point ranges in the order its regex lists them. */
static const struct range ds_letters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
static const struct range ds_punct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F},
    {0x3000, 0x3002},
};
static const struct range cjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};

static bool in_ranges(const struct range *r, size_t n, uint32_t c)
{
    for (size_t i = 0; i < n; i++)
        if (c >= r[i].lo && c <= r[i].hi) return true;
    return false;
}
#define IN(tab, c) in_ranges(tab, sizeof tab / sizeof tab[0], c)

/* Does the character class of stage kind contain position p? (for the regex-like stages) */
static bool in_class(const struct split *s, enum stage_kind kind, uint32_t p)
{
    uint32_t c = s->cp[p];
    uint8_t f = s->cls[p];
    /* wregex stages see non-ASCII white space as U+000B */
    bool ws_hidden = f == TOK_CLS_WS && c > 0x7F;
    switch (kind) {
    case ST_PUNCT_FALCON:
        return f == TOK_CLS_P || (c < 0x80 && c && strchr("$+<=>^~|`", (int)c));
    case ST_PUNCT_DEFAULT:
        return f == TOK_CLS_P || (c < 0x80 && c && strchr("$+<=>^~|", (int)c));
    case ST_NUM_EACH:
    case ST_NUM_RUN:
        return f == TOK_CLS_N;
    case ST_DIGIT3:
        return c >= '0' && c <= '9';
    case ST_CRLF:
        return c == '\r' || c == '\n';
    case ST_DS_LETTERS:
        return !ws_hidden && IN(ds_letters, c);
    case ST_DS_PUNCT:
        return !ws_hidden && IN(ds_punct, c);
    case ST_CJK:
        return !ws_hidden && IN(cjk, c);
    case ST_DSC_LETTERS:
        return f == TOK_CLS_L;
    case ST_DSC_PUNCT:
        return f == TOK_CLS_P;
    default:
        return false;
    }
}

/* A match of stage kind starting at p? End in *e. */
static bool match_at(const struct split *s, enum stage_kind kind, uint32_t p, uint32_t b,
                     uint32_t *e)
{
    uint32_t q = p;
    switch (kind) {
    case ST_NUM_EACH:
    case ST_CRLF:
        if (!in_class(s, kind, p)) return false;
        *e = p + 1;
        return true;
    case ST_DIGIT3:
        if (p + 3 > b || !in_class(s, kind, p) || !in_class(s, kind, p + 1) ||
            !in_class(s, kind, p + 2))
            return false;
        *e = p + 3;
        return true;
    case ST_DS_LETTERS:
    case ST_DS_PUNCT:
    case ST_DSC_LETTERS:
    case ST_DSC_PUNCT: /* \s?X+ : the optional blank only if X follows it */
        if (s->cls[p] == TOK_CLS_WS && p + 1 < b && in_class(s, kind, p + 1)) q = p + 1;
        /* fall through */
    default:
        if (!in_class(s, kind, q)) return false;
        q++;
        while (q < b && in_class(s, kind, q)) q++;
        *e = q;
        return true;
    }
}

static void split_regex(struct split *s, int k, enum stage_kind kind, uint32_t a, uint32_t b)
{
    uint32_t prev = a, p = a, e;
    while (p < b) {
        if (match_at(s, kind, p, b, &e)) {
            emit(s, k, prev, p);
            emit(s, k, p, e);
            prev = p = e;
        } else {
            p++;
        }
    }
    emit(s, k, prev, b);
}

static void run_stage(struct split *s, int k, uint32_t a, uint32_t b)
{
    if (k == s->n_stages) {
        s->word(s->ctx, s->bo[a], s->bo[b]);
        return;
    }
    enum stage_kind kind = (enum stage_kind)s->stages[k];
    switch (kind) {
    case ST_GPT2:
        split_gpt2(s, k, a, b);
        break;
    case ST_LLAMA3:
        split_llama3(s, k, a, b, 3, false);
        break;
    case ST_QWEN2:
        split_llama3(s, k, a, b, 1, false);
        break;
    case ST_QWEN35:
        split_llama3(s, k, a, b, 1, true);
        break;
    case ST_WS_END: { /* \s+$ : the blank tail of the fragment */
        uint32_t t = b;
        while (t > a && s->cls[t - 1] == TOK_CLS_WS) t--;
        emit(s, k, a, t);
        emit(s, k, t, b);
        break;
    }
    default:
        split_regex(s, k, kind, a, b);
        break;
    }
}

static const uint8_t st_default[] = {ST_PUNCT_DEFAULT, ST_GPT2, ST_NUM_RUN, ST_DIGIT3};
static const uint8_t st_gpt2[] = {ST_GPT2};
static const uint8_t st_llama3[] = {ST_LLAMA3};
static const uint8_t st_qwen2[] = {ST_QWEN2};
static const uint8_t st_qwen35[] = {ST_QWEN35};
static const uint8_t st_falcon[] = {ST_PUNCT_FALCON, ST_GPT2, ST_DIGIT3};
static const uint8_t st_starcoder[] = {ST_NUM_EACH, ST_GPT2};
static const uint8_t st_deepseek_llm[] = {ST_CRLF, ST_DS_LETTERS, ST_DS_PUNCT,
                                          ST_WS_END, ST_CJK, ST_NUM_RUN};
static const uint8_t st_deepseek_coder[] = {ST_CRLF, ST_DSC_LETTERS, ST_DSC_PUNCT, ST_CJK,
                                            ST_NUM_EACH};

tern_status tok_pretokenize(struct tern_tokenizer *t, const char *text, size_t n, tok_word_fn word,
                            void *ctx)
{
    if (n == 0) return TERN_OK;
    if (n > UINT32_MAX - 1)
        return tern_fail(TERN_ERR_RANGE, "tokenize: text of %zu bytes exceeds 4 GiB", n);
    tern_status st = tok_scratch_cpt(&t->scratch, n);
    if (st) return st;
    uint32_t *cp = t->scratch.cpt;
    uint8_t *cls = t->scratch.cls;
    uint32_t *bo = t->scratch.boff;
    const unsigned char *u = (const unsigned char *)text;
    uint32_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        unsigned char ch = u[i];
        int len;
        if (ch < 0x80) { /* ASCII fast path: the class table is hot in cache */
            c = ch;
            len = 1;
        } else {
            len = tok_utf8_decode(u + i, n - i, &c);
        }
        TERN_ASSERT(m < t->scratch.cap_cpt); /* at most one code point per byte, n <= cap */
        cp[m] = c;
        cls[m] = tok_cpt_class(c);
        bo[m] = (uint32_t)i;
        m++;
        i += (size_t)len;
    }
    bo[m] = (uint32_t)n;

    struct split s = {cp, cls, bo, NULL, 0, word, ctx};
#define USE(tab) (s.stages = tab, s.n_stages = (int)sizeof tab)
    switch (t->pre) {
    case TOK_PRE_GPT2: USE(st_gpt2); break;
    case TOK_PRE_LLAMA3: USE(st_llama3); break;
    case TOK_PRE_QWEN2: USE(st_qwen2); break;
    case TOK_PRE_QWEN35: USE(st_qwen35); break;
    case TOK_PRE_FALCON: USE(st_falcon); break;
    case TOK_PRE_STARCODER: USE(st_starcoder); break;
    case TOK_PRE_DEEPSEEK_LLM: USE(st_deepseek_llm); break;
    case TOK_PRE_DEEPSEEK_CODER: USE(st_deepseek_coder); break;
    default: USE(st_default); break;
    }
#undef USE
    run_stage(&s, 0, 0, m);
    return TERN_OK;
}
