/* tok_load.c — build a tern_tokenizer from a GGUF's tokenizer.ggml.* metadata.
 *
 * Read tok_internal.h first. Everything is resolved here, once: token texts are copied into
 * one arena (the GGUF may be closed afterwards), BPE tokens are also stored as raw bytes
 * (GPT-2's byte-to-unicode map undone) and hashed on those, merges become
 * (left id, right id) -> (rank, merged id), the special tokens the partition step searches
 * are listed longest first, and all scratch plus the word cache are allocated.
 * Defaults for missing keys follow llama.cpp (llama-vocab.cpp) where they matter for ids:
 * SentencePiece bos 1 / eos 2 / unk 0 / add_bos true / add_space_prefix true; llama3 adds bos.
 * Token types follow llama.cpp too: tokens named like a role (end of turn, FIM prefix ...) are
 * made control tokens (role_texts, mark_roles), so user text cannot produce them. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tern_gguf.h"
#include "util/error.h"

#define KEY(x) "tokenizer.ggml." x

struct pre_name {
    const char *name;
    enum tok_pre pre;
};
/* llama.cpp's tokenizer.ggml.pre names, grouped by the splitting rules they share. */
static const struct pre_name pre_names[] = {
    {"default", TOK_PRE_DEFAULT},
    {"llama3", TOK_PRE_LLAMA3}, {"llama-v3", TOK_PRE_LLAMA3}, {"llama-bpe", TOK_PRE_LLAMA3},
    {"falcon3", TOK_PRE_LLAMA3}, {"dbrx", TOK_PRE_LLAMA3}, {"smaug-bpe", TOK_PRE_LLAMA3},
    {"chatglm-bpe", TOK_PRE_LLAMA3},
    {"qwen2", TOK_PRE_QWEN2}, {"stablelm2", TOK_PRE_QWEN2}, {"deepseek-r1-qwen", TOK_PRE_QWEN2},
    {"qwen35", TOK_PRE_QWEN35},
    {"deepseek-llm", TOK_PRE_DEEPSEEK_LLM},
    {"deepseek-coder", TOK_PRE_DEEPSEEK_CODER},
    {"falcon", TOK_PRE_FALCON},
    {"gpt-2", TOK_PRE_GPT2}, {"phi-2", TOK_PRE_GPT2}, {"mpt", TOK_PRE_GPT2},
    {"olmo", TOK_PRE_GPT2}, {"jais", TOK_PRE_GPT2}, {"roberta-bpe", TOK_PRE_GPT2},
    {"jina-es", TOK_PRE_GPT2}, {"jina-de", TOK_PRE_GPT2}, {"jina-v1-en", TOK_PRE_GPT2},
    {"jina-v2-es", TOK_PRE_GPT2}, {"jina-v2-de", TOK_PRE_GPT2}, {"jina-v2-code", TOK_PRE_GPT2},
    {"gigachat", TOK_PRE_GPT2},
    {"gpt-neox", TOK_PRE_GPT2}, /* not a llama.cpp name: HF's GPT-NeoX uses GPT-2's regex */
    {"starcoder", TOK_PRE_STARCODER}, {"refact", TOK_PRE_STARCODER},
    {"command-r", TOK_PRE_STARCODER}, {"smollm", TOK_PRE_STARCODER},
    {"codeshell", TOK_PRE_STARCODER}, {"exaone", TOK_PRE_STARCODER},
    {"minerva-7b", TOK_PRE_STARCODER},
};

/* Special tokens recognized by their text, as llama.cpp's vocabulary loader does (llama-vocab.cpp,
 * load(), "auto-detect special tokens by text", at the commit of ../shared/fixtures, c392e50).
 * Each text belongs to a role; when the GGUF names no token for that role (its id key is absent
 * or out of range), a token with that text takes the role, and if it was not a control token it
 * becomes one: llama.cpp warns "control-looking token ... its type will be overridden". Without
 * this, a vocabulary that marks <|fim_prefix|> user-defined (Qwen2.5 does) would let plain user
 * text produce the FIM token, which llama.cpp never does. */
enum tok_role {
    ROLE_EOT, ROLE_EOM, ROLE_FIM_PRE, ROLE_FIM_SUF, ROLE_FIM_MID, ROLE_FIM_PAD, ROLE_FIM_REP,
    ROLE_FIM_SEP, N_ROLES,
};
struct role_text {
    const char *text;
    enum tok_role role;
};
static const struct role_text role_texts[] = {
    {"<|eot_id|>", ROLE_EOT}, {"<|im_end|>", ROLE_EOT}, {"<|end|>", ROLE_EOT},
    {"<end_of_turn>", ROLE_EOT}, {"<|endoftext|>", ROLE_EOT}, {"<EOT>", ROLE_EOT},
    {"<｜end▁of▁sentence｜>", ROLE_EOT}, /* DeepSeek */
    {"<|eom_id|>", ROLE_EOM},
    {"<|fim_prefix|>", ROLE_FIM_PRE}, {"<fim-prefix>", ROLE_FIM_PRE},
    {"<｜fim▁begin｜>", ROLE_FIM_PRE}, {"<PRE>", ROLE_FIM_PRE},
    {"<|fim_suffix|>", ROLE_FIM_SUF}, {"<fim-suffix>", ROLE_FIM_SUF},
    {"<｜fim▁hole｜>", ROLE_FIM_SUF}, {"<SUF>", ROLE_FIM_SUF},
    {"<|fim_middle|>", ROLE_FIM_MID}, {"<fim-middle>", ROLE_FIM_MID},
    {"<｜fim▁end｜>", ROLE_FIM_MID}, {"<MID>", ROLE_FIM_MID},
    {"<|fim_pad|>", ROLE_FIM_PAD}, {"<fim-pad>", ROLE_FIM_PAD}, {"<PAD>", ROLE_FIM_PAD},
    {"<|fim_repo|>", ROLE_FIM_REP}, {"<|repo_name|>", ROLE_FIM_REP}, {"<fim-repo>", ROLE_FIM_REP},
    {"<REPO>", ROLE_FIM_REP},
    {"<|file_sep|>", ROLE_FIM_SEP},
};
/* The id keys that name each role (a deprecated spelling second). */
static const char *const role_keys[N_ROLES][2] = {
    {KEY("eot_token_id"), NULL},
    {KEY("eom_token_id"), NULL},
    {KEY("fim_pre_token_id"), KEY("prefix_token_id")},
    {KEY("fim_suf_token_id"), KEY("suffix_token_id")},
    {KEY("fim_mid_token_id"), KEY("middle_token_id")},
    {KEY("fim_pad_token_id"), NULL},
    {KEY("fim_rep_token_id"), NULL},
    {KEY("fim_sep_token_id"), NULL},
};
/* Tokens that end a generation by text, whatever the keys say; llama.cpp makes each a control
 * token as well. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
};
/* Also end a generation when they are not normal tokens (newer llama.cpp lists them), but keep
 * their type: c392e50 does not override it. */
static const char *const eog_texts_extra[] = {"_<EOT>", "<|end_of_text|>"};

static bool str_eq(struct tern_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && !memcmp(s.ptr, c, n);
}

/* Optional id key: absent -> def; out of range -> -1. */
static tern_status get_id(const struct tern_gguf *g, const char *key, int32_t n_vocab,
                          int32_t def, int32_t *out)
{
    int64_t v;
    tern_status st = tern_gguf_get_i64(g, key, &v);
    if (st == TERN_ERR_NOT_FOUND) {
        tern_clear_error();
        *out = def;
        return TERN_OK;
    }
    if (st) return st;
    *out = (v >= 0 && v < n_vocab) ? (int32_t)v : -1;
    return TERN_OK;
}

static tern_status get_flag(const struct tern_gguf *g, const char *key, bool *inout)
{
    bool v;
    tern_status st = tern_gguf_get_bool(g, key, &v);
    if (st == TERN_ERR_NOT_FOUND) {
        tern_clear_error();
        return TERN_OK;
    }
    if (st) return st;
    *inout = v;
    return TERN_OK;
}

/* Look an array key up and check its element type and length. */
static tern_status get_array(const struct tern_gguf *g, const char *key, enum tern_gguf_type et,
                             enum tern_gguf_type et2, uint64_t want_len, int64_t *idx)
{
    int64_t i = tern_gguf_find_key(g, key);
    *idx = i;
    if (i < 0) return TERN_ERR_NOT_FOUND;
    if (tern_gguf_kv_type(g, i) != TERN_GGUF_ARRAY)
        return tern_fail(TERN_ERR_FORMAT, "tokenizer: key %s is not an array", key);
    enum tern_gguf_type t = tern_gguf_arr_type(g, i);
    if (t != et && t != et2)
        return tern_fail(TERN_ERR_FORMAT, "tokenizer: key %s has element type %d, expected %d",
                         key, (int)t, (int)et);
    if (want_len && tern_gguf_arr_len(g, i) != want_len)
        return tern_fail(TERN_ERR_FORMAT, "tokenizer: key %s has %llu elements, expected %llu",
                         key, (unsigned long long)tern_gguf_arr_len(g, i),
                         (unsigned long long)want_len);
    return TERN_OK;
}

/* GPT-2 byte-level text -> raw bytes; false if a character is outside the byte map. */
static bool bytelevel_decode(const char *s, size_t n, char *out, uint32_t *out_len)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = tok_utf8_decode((const unsigned char *)s + i, n - i, &c);
        int b = (c & TOK_CPT_INVALID) ? -1 : tok_cpt_to_byte(c);
        if (b < 0) return false;
        out[m++] = (char)b;
        i += (size_t)l;
    }
    *out_len = m;
    return true;
}

static tern_status load_merges(struct tern_tokenizer *t, const struct tern_gguf *g)
{
    int64_t ki;
    tern_status st = get_array(g, KEY("merges"), TERN_GGUF_STRING, TERN_GGUF_STRING, 0, &ki);
    if (st == TERN_ERR_NOT_FOUND)
        return tern_fail(TERN_ERR_FORMAT, "tokenizer: BPE vocabulary without %s", KEY("merges"));
    if (st) return st;
    uint64_t n = tern_gguf_arr_len(g, ki);
    if (n > INT32_MAX) return tern_fail(TERN_ERR_FORMAT, "tokenizer: %llu merges",
                                        (unsigned long long)n);
    st = tok_pairmap_init(&t->merges, (uint32_t)n);
    if (st) return st;
    size_t cap = 0;
    char *buf = NULL;
    for (uint64_t j = 0; j < n; j++) {
        struct tern_str m = tern_gguf_arr_str(g, ki, j);
        if (m.len * 2 > cap) {
            free(buf);
            cap = m.len * 2 + 64;
            buf = malloc(cap);
            if (!buf) return tern_fail(TERN_ERR_NOMEM, "tokenizer: merge buffer");
        }
        /* "A B": the separator is the first space after the first character */
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp) {
            free(buf);
            return tern_fail(TERN_ERR_FORMAT, "tokenizer: %s[%llu] has no space: '%.*s'",
                             KEY("merges"), (unsigned long long)j, (int)(m.len > 64 ? 64 : m.len),
                             m.ptr);
        }
        size_t la = (size_t)(sp - m.ptr), lb = m.len - la - 1;
        uint32_t ra, rb;
        if (!bytelevel_decode(m.ptr, la, buf, &ra) ||
            !bytelevel_decode(sp + 1, lb, buf + ra, &rb))
            continue; /* not byte-level text: can never apply */
        int32_t a = tok_strmap_get(&t->map, buf, ra);
        int32_t b = tok_strmap_get(&t->map, buf + ra, rb);
        int32_t ab = tok_strmap_get(&t->map, buf, ra + rb);
        /* A merge whose parts or result are not tokens cannot be expressed with ids; real
         * vocabularies have none (all fixtures: 0). It is skipped. */
        if (a < 0 || b < 0 || ab < 0) continue;
        tok_pairmap_put(&t->merges, a, b, (int32_t)j, ab);
    }
    free(buf);
    return TERN_OK;
}

/* Token i's stored text is exactly c. */
static bool text_is(const struct tern_tokenizer *t, int32_t i, const char *c, size_t cn)
{
    return t->text_len[i] == cn && !memcmp(t->text_arena + t->text_off[i], c, cn);
}

/* The id a text names in llama.cpp's text -> id map (the highest id with that text), or -1.
 * Only texts of 5..32 bytes starting with '<' or '_' are asked for, so most tokens are skipped
 * on their first byte. */
static void find_texts(const struct tern_tokenizer *t, const char *const *texts, size_t n_texts,
                       int32_t *ids)
{
    for (size_t k = 0; k < n_texts; k++) ids[k] = -1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint32_t l = t->text_len[i];
        char c0 = l ? t->text_arena[t->text_off[i]] : 0;
        if (l < 5 || l > 32 || (c0 != '<' && c0 != '_')) continue;
        for (size_t k = 0; k < n_texts; k++)
            if (text_is(t, i, texts[k], strlen(texts[k]))) ids[k] = i;
    }
}

/* llama.cpp's control-token rule and end-of-generation set (see role_texts). llama.cpp gives a
 * role to the first matching token its hash map happens to visit when a vocabulary holds two
 * texts of one role (none of the fixtures does; e.g. <|fim_repo|> and <|repo_name|> both):
 * which one is an accident of iteration order, so tern makes every such token control (user
 * text can carry none of them) and, for the roles that end a generation, every one EOG. Runs
 * before the special-token list and the pieces are built: both depend on the types. */
static tern_status mark_roles(struct tern_tokenizer *t, const struct tern_gguf *g)
{
    int32_t key_id[N_ROLES];
    for (int r = 0; r < N_ROLES; r++) {
        key_id[r] = -1;
        for (int k = 0; k < 2 && role_keys[r][k]; k++) {
            int32_t id;
            tern_status st = get_id(g, role_keys[r][k], t->n_vocab, -1, &id);
            if (st) return st;
            if (id >= 0) key_id[r] = id; /* the deprecated key is read last and wins */
        }
    }
    t->eot = key_id[ROLE_EOT];
    t->eom = key_id[ROLE_EOM];

    enum { N_ROLE_TEXTS = sizeof role_texts / sizeof role_texts[0],
           N_EOG = sizeof eog_texts / sizeof eog_texts[0],
           N_EXTRA = sizeof eog_texts_extra / sizeof eog_texts_extra[0] };
    const char *texts[N_ROLE_TEXTS + N_EOG + N_EXTRA];
    int32_t ids[N_ROLE_TEXTS + N_EOG + N_EXTRA];
    for (size_t k = 0; k < N_ROLE_TEXTS; k++) texts[k] = role_texts[k].text;
    for (size_t k = 0; k < N_EOG; k++) texts[N_ROLE_TEXTS + k] = eog_texts[k];
    for (size_t k = 0; k < N_EXTRA; k++) texts[N_ROLE_TEXTS + N_EOG + k] = eog_texts_extra[k];
    find_texts(t, texts, N_ROLE_TEXTS + N_EOG + N_EXTRA, ids);

    /* first every type override, then the EOG bits (an override replaces the whole type) */
    for (size_t k = 0; k < N_ROLE_TEXTS + N_EOG; k++) {
        int32_t id = ids[k];
        if (id < 0) continue;
        if (k < N_ROLE_TEXTS && key_id[role_texts[k].role] >= 0) continue; /* role named by key */
        if (!(t->attr[id] & TOK_ATTR_CONTROL)) t->attr[id] = TOK_ATTR_CONTROL;
    }
    for (size_t k = 0; k < N_ROLE_TEXTS; k++) {
        enum tok_role r = role_texts[k].role;
        bool ends = r == ROLE_EOT || r == ROLE_EOM || r == ROLE_FIM_PAD || r == ROLE_FIM_REP ||
                    r == ROLE_FIM_SEP;
        if (ids[k] >= 0 && ends && key_id[r] < 0) t->attr[ids[k]] |= TOK_ATTR_EOG;
    }
    for (size_t k = 0; k < N_EOG; k++)
        if (ids[N_ROLE_TEXTS + k] >= 0) t->attr[ids[N_ROLE_TEXTS + k]] |= TOK_ATTR_EOG;
    for (size_t k = 0; k < N_EXTRA; k++) {
        int32_t id = ids[N_ROLE_TEXTS + N_EOG + k];
        if (id >= 0 && !(t->attr[id] & TOK_ATTR_NORMAL)) t->attr[id] |= TOK_ATTR_EOG;
    }
    const enum tok_role key_ends[] = {ROLE_EOT, ROLE_EOM, ROLE_FIM_PAD, ROLE_FIM_REP, ROLE_FIM_SEP};
    for (size_t k = 0; k < sizeof key_ends / sizeof key_ends[0]; k++)
        if (key_id[key_ends[k]] >= 0) t->attr[key_id[key_ends[k]]] |= TOK_ATTR_EOG;
    if (t->eos >= 0) t->attr[t->eos] |= TOK_ATTR_EOG;
    return TERN_OK;
}

static int cmp_special(const void *pa, const void *pb, void *ctx)
{
    const struct tern_tokenizer *t = ctx;
    const struct tok_special *a = pa, *b = pb;
    unsigned char ca = (unsigned char)t->text_arena[t->text_off[a->id]];
    unsigned char cb = (unsigned char)t->text_arena[t->text_off[b->id]];
    if (ca != cb) return ca < cb ? -1 : 1;
    uint32_t la = t->text_len[a->id], lb = t->text_len[b->id];
    if (la != lb) return la > lb ? -1 : 1;
    return a->id < b->id ? -1 : 1;
}

/* The trie of special texts (see tok_internal.h). Specials are visited in their sorted order
 * (longest first, then lowest id), so the first one to end at a node is the one the linear scan
 * would have picked among equal texts. At most one node per byte of all special texts. */
static tern_status build_special_trie(struct tern_tokenizer *t)
{
    size_t cap = 1;
    for (int k = 0; k < t->n_specials; k++) cap += t->text_len[t->specials[k].id];
    t->special_trie = malloc(cap * sizeof *t->special_trie);
    if (!t->special_trie) return tern_fail(TERN_ERR_NOMEM, "tokenizer: special token trie");
    t->special_trie[0] = (struct tok_trie_node){0, 0, -1, -1, 0};
    uint32_t n = 1;
    for (int k = 0; k < t->n_specials; k++) {
        const unsigned char *s =
            (const unsigned char *)t->text_arena + t->text_off[t->specials[k].id];
        uint32_t len = t->text_len[t->specials[k].id], node = 0;
        for (uint32_t j = 0; j < len; j++) {
            uint32_t c = t->special_trie[node].first_child;
            while (c && t->special_trie[c].byte != s[j]) c = t->special_trie[c].next_sibling;
            if (!c) {
                TERN_ASSERT(n < cap);
                c = n++;
                t->special_trie[c] = (struct tok_trie_node){0, t->special_trie[node].first_child,
                                                            -1, -1, s[j]};
                t->special_trie[node].first_child = c;
            }
            node = c;
        }
        struct tok_trie_node *end = &t->special_trie[node];
        if (end->term < 0) end->term = k;
        if (end->term_user < 0 && (t->specials[k].attr & TOK_ATTR_USER_DEFINED)) end->term_user = k;
    }
    t->n_trie = n;
    return TERN_OK;
}

static tern_status build_specials(struct tern_tokenizer *t, bool phi3)
{
    int n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) &&
            t->text_len[i] > 0)
            n++;
    t->specials = malloc(sizeof *t->specials * (size_t)(n ? n : 1));
    if (!t->specials) return tern_fail(TERN_ERR_NOMEM, "tokenizer: special token list");
    n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!(t->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) ||
            t->text_len[i] == 0)
            continue;
        if (phi3) {
            /* llama.cpp: Phi-3 special tokens swallow the blanks after them */
            const char *s = t->text_arena + t->text_off[i];
            size_t l = t->text_len[i];
            bool keep = (l == 5 && !memcmp(s, "<unk>", 5)) || (l == 3 && !memcmp(s, "<s>", 3)) ||
                        (l == 13 && !memcmp(s, "<|endoftext|>", 13));
            if (!keep) t->attr[i] |= TOK_ATTR_RSTRIP;
        }
        t->specials[n].id = i;
        t->specials[n].attr = t->attr[i];
        n++;
    }
    qsort_r(t->specials, (size_t)n, sizeof *t->specials, cmp_special, t);
    t->n_specials = n;
    int k = 0;
    for (int c = 0; c < 256; c++) {
        t->special_start[c] = (uint32_t)k;
        while (k < n && (unsigned char)t->text_arena[t->text_off[t->specials[k].id]] == c) k++;
    }
    /* sorted by first byte, so the buckets cover the list exactly */
    TERN_ASSERT(k == n);
    t->special_start[256] = (uint32_t)n;
    return build_special_trie(t);
}

/* SPM: can a token span "x▁" (a non-▁ character followed by ▁)? */
static bool spm_has_inner_space(const struct tern_tokenizer *t)
{
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const unsigned char *s = (const unsigned char *)t->text_arena + t->text_off[i];
        uint32_t n = t->text_len[i];
        for (uint32_t j = 3; j + 3 <= n; j++) {
            bool sp = s[j] == 0xE2 && s[j + 1] == 0x96 && s[j + 2] == 0x81;
            bool prev_sp = s[j - 3] == 0xE2 && s[j - 2] == 0x96 && s[j - 1] == 0x81;
            if (sp && !prev_sp) return true;
        }
    }
    return false;
}

static tern_status build(struct tern_tokenizer *t, const struct tern_gguf *g)
{
    struct tern_str model;
    tern_status st = tern_gguf_get_str(g, KEY("model"), &model);
    if (st) return tern_fail_prefix(st, "tokenizer: ");
    if (str_eq(model, "gpt2")) t->model = TOK_MODEL_BPE;
    else if (str_eq(model, "llama")) t->model = TOK_MODEL_SPM;
    else
        return tern_fail(TERN_ERR_UNSUPPORTED, "tokenizer: %s = '%.*s' (tern knows gpt2, llama)",
                         KEY("model"), (int)(model.len > 32 ? 32 : model.len), model.ptr);
    snprintf(t->model_name, sizeof t->model_name, "%.*s", (int)model.len, model.ptr);

    int64_t ki;
    st = get_array(g, KEY("tokens"), TERN_GGUF_STRING, TERN_GGUF_STRING, 0, &ki);
    if (st == TERN_ERR_NOT_FOUND) return tern_fail(TERN_ERR_FORMAT, "tokenizer: no %s", KEY("tokens"));
    if (st) return st;
    uint64_t nv = tern_gguf_arr_len(g, ki);
    if (nv == 0 || nv > (1u << 24))
        return tern_fail(TERN_ERR_FORMAT, "tokenizer: %s has %llu entries", KEY("tokens"),
                         (unsigned long long)nv);
    int32_t n = (int32_t)nv;
    t->n_vocab = n;

    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) total += tern_gguf_arr_str(g, ki, (uint64_t)i).len;
    if (total > UINT32_MAX / 4)
        return tern_fail(TERN_ERR_FORMAT, "tokenizer: token texts total %llu bytes",
                         (unsigned long long)total);
    size_t nn = (size_t)n;
    t->arena_cap = total * 3 + 16;
    t->text_arena = malloc(t->arena_cap);
    t->text_off = malloc(nn * 4);
    t->text_len = malloc(nn * 4);
    t->key_off = malloc(nn * 4);
    t->key_len = malloc(nn * 4);
    t->piece_off = malloc(nn * 4);
    t->piece_len = malloc(nn * 4);
    t->score = calloc(nn, sizeof *t->score);
    t->attr = malloc(nn * 4);
    if (!t->text_arena || !t->text_off || !t->text_len || !t->key_off || !t->key_len ||
        !t->piece_off || !t->piece_len || !t->score || !t->attr)
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: tables for %d tokens", n);
    size_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        struct tern_str s = tern_gguf_arr_str(g, ki, (uint64_t)i);
        memcpy(t->text_arena + pos, s.ptr, s.len);
        t->text_off[i] = (uint32_t)pos;
        t->text_len[i] = (uint32_t)s.len;
        pos += s.len;
        t->attr[i] = TOK_ATTR_NORMAL;
    }

    /* scores, token types */
    st = get_array(g, KEY("scores"), TERN_GGUF_FLOAT32, TERN_GGUF_FLOAT32, nv, &ki);
    if (st == TERN_OK) memcpy(t->score, tern_gguf_arr_data(g, ki), nn * 4);
    else if (st != TERN_ERR_NOT_FOUND) return st;
    st = get_array(g, KEY("token_type"), TERN_GGUF_INT32, TERN_GGUF_UINT32, nv, &ki);
    if (st == TERN_OK) {
        const char *d = tern_gguf_arr_data(g, ki);
        for (int32_t i = 0; i < n; i++) {
            int32_t ty;
            memcpy(&ty, d + 4 * (size_t)i, 4);
            static const uint32_t map[7] = {TOK_ATTR_NORMAL, TOK_ATTR_NORMAL, TOK_ATTR_UNKNOWN,
                                            TOK_ATTR_CONTROL, TOK_ATTR_USER_DEFINED,
                                            TOK_ATTR_UNUSED, TOK_ATTR_BYTE};
            t->attr[i] = (ty >= 0 && ty < 7) ? map[ty] : TOK_ATTR_NORMAL;
        }
    } else if (st != TERN_ERR_NOT_FOUND) {
        return st;
    }
    tern_clear_error();

    /* hash keys */
    for (int32_t i = 0; i < n; i++) {
        t->key_off[i] = t->text_off[i];
        t->key_len[i] = t->text_len[i];
        if (t->model == TOK_MODEL_BPE) {
            uint32_t rl;
            /* a raw key is never longer than its text: each character gives one byte */
            TERN_ASSERT(pos + t->text_len[i] <= t->arena_cap);
            if (bytelevel_decode(t->text_arena + t->text_off[i], t->text_len[i],
                                 t->text_arena + pos, &rl)) {
                t->key_off[i] = (uint32_t)pos;
                t->key_len[i] = rl;
                pos += rl;
            } else {
                t->key_len[i] = UINT32_MAX; /* never equal to a byte string: not hashed */
            }
        }
    }
    st = tok_strmap_init(&t->map, (uint32_t)n);
    if (st) return st;
    t->map.arena = t->text_arena;
    t->map.off = t->key_off;
    t->map.len = t->key_len;
    for (int32_t i = 0; i < n; i++)
        if (t->key_len[i] != UINT32_MAX) tok_strmap_put(&t->map, i);

    /* special ids and flags */
    bool spm = t->model == TOK_MODEL_SPM;
    if ((st = get_id(g, KEY("bos_token_id"), n, spm ? 1 : -1, &t->bos)) ||
        (st = get_id(g, KEY("eos_token_id"), n, spm ? 2 : -1, &t->eos)) ||
        (st = get_id(g, KEY("unknown_token_id"), n, spm ? 0 : -1, &t->unk)) ||
        (st = get_id(g, KEY("padding_token_id"), n, -1, &t->pad)))
        return st;
    if (spm && t->bos >= n) t->bos = -1;
    if (spm && t->eos >= n) t->eos = -1;
    if (spm && t->unk >= n) t->unk = -1;

    t->pre = TOK_PRE_DEFAULT;
    snprintf(t->pre_name, sizeof t->pre_name, "%s", spm ? "" : "default");
    t->add_bos = spm;
    t->add_space_prefix = spm;
    if (!spm) {
        struct tern_str pre;
        st = tern_gguf_get_str(g, KEY("pre"), &pre);
        if (st == TERN_OK) {
            size_t k = 0, npn = sizeof pre_names / sizeof pre_names[0];
            while (k < npn && !str_eq(pre, pre_names[k].name)) k++;
            if (k == npn)
                return tern_fail(TERN_ERR_UNSUPPORTED, "tokenizer: unknown %s '%.*s'", KEY("pre"),
                                 (int)(pre.len > 40 ? 40 : pre.len), pre.ptr);
            t->pre = pre_names[k].pre;
            snprintf(t->pre_name, sizeof t->pre_name, "%s", pre_names[k].name);
            if (!strcmp(pre_names[k].name, "llama3") || !strcmp(pre_names[k].name, "llama-v3") ||
                !strcmp(pre_names[k].name, "llama-bpe") || !strcmp(pre_names[k].name, "falcon3")) {
                t->ignore_merges = true;
                t->add_bos = true;
            }
        } else if (st != TERN_ERR_NOT_FOUND) {
            return st;
        }
        tern_clear_error();
    }
    if ((st = get_flag(g, KEY("add_bos_token"), &t->add_bos)) ||
        (st = get_flag(g, KEY("add_eos_token"), &t->add_eos)) ||
        (st = get_flag(g, KEY("add_space_prefix"), &t->add_space_prefix)))
        return st;
    if (t->add_bos && t->bos < 0) t->add_bos = false;
    if (t->add_eos && t->eos < 0) t->add_eos = false;

    if ((st = mark_roles(t, g))) return st;

    /* byte tokens */
    for (int b = 0; b < 256; b++) {
        char s[8];
        int32_t id;
        if (spm) {
            snprintf(s, sizeof s, "<0x%02X>", b);
            id = tok_strmap_get(&t->map, s, 6);
            if (id < 0) {
                s[0] = (char)b;
                id = tok_strmap_get(&t->map, s, 1);
            }
        } else {
            s[0] = (char)b;
            id = tok_strmap_get(&t->map, s, 1);
        }
        t->byte_token[b] = id;
    }

    if (!spm && (st = load_merges(t, g))) return st;
    if (spm) t->spm_split_words = !spm_has_inner_space(t);

    struct tern_str name;
    bool phi3 = false;
    if (tern_gguf_get_str(g, "general.name", &name) == TERN_OK) {
        char low[64];
        size_t l = name.len < 63 ? name.len : 63;
        for (size_t k = 0; k < l; k++) low[k] = (char)tolower((unsigned char)name.ptr[k]);
        low[l] = 0;
        phi3 = strstr(low, "phi3") || strstr(low, "phi-3");
    }
    tern_clear_error();
    if ((st = build_specials(t, phi3))) return st;

    t->arena_used = pos;
    if ((st = tok_build_pieces(t))) return st;

    if ((st = tok_scratch_cpt(&t->scratch, 1 << 16)) || (st = tok_scratch_sym(&t->scratch, 4096)) ||
        (st = tok_scratch_esc(&t->scratch, 1 << 16)))
        return st;
    return tok_cache_init(&t->cache, 1u << 17, (size_t)4 << 20);
}

tern_status tern_tokenizer_from_gguf(const struct tern_gguf *g, struct tern_tokenizer **out)
{
    if (!g || !out) return tern_fail(TERN_ERR_ARG, "tern_tokenizer_from_gguf: NULL argument");
    struct tern_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tern_fail(TERN_ERR_NOMEM, "tokenizer: allocation");
    tern_status st = build(t, g);
    if (st) {
        tern_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TERN_OK;
}

tern_status tern_tokenizer_load(const char *path, struct tern_tokenizer **out)
{
    if (!path || !out) return tern_fail(TERN_ERR_ARG, "tern_tokenizer_load: NULL argument");
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g);
    if (st) return st;
    st = tern_tokenizer_from_gguf(g, out);
    tern_gguf_close(g);
    if (st) return tern_fail_prefix(st, "%s: ", path);
    return TERN_OK;
}

void tern_tokenizer_free(struct tern_tokenizer *t)
{
    if (!t) return;
    free(t->text_arena);
    free(t->text_off);
    free(t->text_len);
    free(t->key_off);
    free(t->key_len);
    free(t->piece_off);
    free(t->piece_len);
    free(t->score);
    free(t->attr);
    free(t->specials);
    free(t->special_trie);
    tok_strmap_free(&t->map);
    tok_pairmap_free(&t->merges);
    tok_scratch_free(&t->scratch);
    tok_cache_free(&t->cache);
    free(t);
}

int tern_tokenizer_n_vocab(const struct tern_tokenizer *t) { return t->n_vocab; }
const char *tern_tokenizer_model(const struct tern_tokenizer *t) { return t->model_name; }
const char *tern_tokenizer_pre(const struct tern_tokenizer *t) { return t->pre_name; }
int32_t tern_token_bos(const struct tern_tokenizer *t) { return t->bos; }
int32_t tern_token_eos(const struct tern_tokenizer *t) { return t->eos; }

bool tern_token_is_eog(const struct tern_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->attr[id] & TOK_ATTR_EOG);
}

bool tern_token_is_control(const struct tern_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->attr[id] & TOK_ATTR_CONTROL);
}

const char *tern_token_text(const struct tern_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->text_len[id];
    return t->text_arena + t->text_off[id];
}

int32_t tern_token_lookup(const struct tern_tokenizer *t, const char *text, size_t len)
{
    if (t->model == TOK_MODEL_SPM) return tok_strmap_get(&t->map, text, len);
    /* BPE keys are raw bytes; stored texts of specials are ASCII and equal to their bytes,
     * other texts are checked by scanning (rare: not on a hot path). */
    int32_t id = tok_strmap_get(&t->map, text, len);
    if (id >= 0 && t->text_len[id] == len && !memcmp(t->text_arena + t->text_off[id], text, len))
        return id;
    for (int32_t i = t->n_vocab - 1; i >= 0; i--)
        if (t->text_len[i] == len && !memcmp(t->text_arena + t->text_off[i], text, len)) return i;
    return -1;
}

void tern_tokenizer_get_stats(const struct tern_tokenizer *t, struct tern_tokenizer_stats *out)
{
    out->cache_hits = t->cache.hits;
    out->cache_misses = t->cache.misses;
    out->cache_resets = t->cache.resets;
}
