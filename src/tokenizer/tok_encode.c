/* tok_encode.c — tern_tokenize: bos, special-token partition, per-segment encoding, eos.
 *
 * Partition: text is scanned left to right for the special tokens in play — user-defined
 * tokens always (as llama.cpp does), control and unknown tokens only with
 * TERN_TOK_PARSE_SPECIAL — taking the longest one that matches at a position. (llama.cpp
 * instead searches token by token, longest first; the two differ only when two special texts
 * overlap in the input, which real vocabularies do not produce.) The raw text between matches
 * goes to the model's encoder (tok_bpe.c or tok_spm.c); SentencePiece puts its leading space in
 * front of every raw segment, since each one starts the text or follows a special token.
 * Tokens with the lstrip/rstrip attribute swallow the ASCII blanks before/after them.
 * tern_tokenize_grow wraps it for callers that keep one growing id buffer. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

static bool is_blank(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static tern_status encode_segment(struct tern_tokenizer *t, const char *s, size_t n, bool prefix,
                                  struct tok_out *o)
{
    if (n == 0) return TERN_OK;
    if (t->model == TOK_MODEL_SPM) return tok_spm_segment(t, s, n, prefix && t->add_space_prefix, o);
    return tok_bpe_segment(t, s, n, o);
}

/* The special token matching at text[i..len), longest first; -1 if none. */
/* Index into t->specials of the longest special whose text starts at text[i] (only
 * user-defined ones unless parse), or -1: a walk down the special trie, one step per byte. */
static int match_special(const struct tern_tokenizer *t, const char *text, size_t i, size_t len,
                         bool parse)
{
    const struct tok_trie_node *trie = t->special_trie;
    int best = -1;
    uint32_t node = 0;
    for (size_t j = i; j < len; j++) {
        uint32_t c = trie[node].first_child;
        while (c && trie[c].byte != (unsigned char)text[j]) c = trie[c].next_sibling;
        if (!c) break;
        TERN_ASSERT(c < t->n_trie);
        node = c;
        int k = parse ? trie[node].term : trie[node].term_user;
        if (k >= 0) best = k;
    }
    return best;
}

/* Does special[] (sorted, disjoint) hold text[i .. i + n) whole? *cur: the first range that
 * may still hold a position at or after i (positions only grow during one tokenize). */
static bool in_spans(const struct tern_text_span *sp, size_t n_sp, size_t *cur, size_t i, size_t n)
{
    while (*cur < n_sp && sp[*cur].off + sp[*cur].len <= i) (*cur)++;
    return *cur < n_sp && sp[*cur].off <= i && i + n <= sp[*cur].off + sp[*cur].len;
}

static tern_status tokenize(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                            const struct tern_text_span *spans, size_t n_spans, bool restrict_special,
                            int32_t *out, size_t cap, size_t *n_out);

tern_status tern_tokenize(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                          int32_t *out, size_t cap, size_t *n_out)
{
    return tokenize(t, text, len, flags, NULL, 0, false, out, cap, n_out);
}

tern_status tok_tokenize_spans(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                                const struct tern_text_span *special, size_t n_special,
                                int32_t *out, size_t cap, size_t *n_out)
{
    if (n_special && !special) return tern_fail(TERN_ERR_ARG, "tok_tokenize_spans: NULL spans");
    for (size_t k = 0; k < n_special; k++)
        if (special[k].off > len || special[k].len > len - special[k].off ||
            (k && special[k].off < special[k - 1].off + special[k - 1].len))
            return tern_fail(TERN_ERR_ARG, "tok_tokenize_spans: span %zu [%zu, +%zu) is outside the "
                             "%zu-byte text or not after the one before", k, special[k].off, special[k].len, len);
    return tokenize(t, text, len, flags, special, n_special, true, out, cap, n_out);
}

static tern_status tokenize(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                            const struct tern_text_span *spans, size_t n_spans, bool restrict_special,
                            int32_t *out, size_t cap, size_t *n_out)
{
    if (!t || !n_out || (!text && len) || (!out && cap))
        return tern_fail(TERN_ERR_ARG, "tern_tokenize: NULL argument");
    if (flags & ~(unsigned)(TERN_TOK_ADD_SPECIAL | TERN_TOK_PARSE_SPECIAL | TERN_TOK_CONTINUE))
        return tern_fail(TERN_ERR_ARG, "tern_tokenize: unknown flags 0x%x", flags);
    struct tok_out o = {out, cap, 0};
    bool add = flags & TERN_TOK_ADD_SPECIAL, parse = flags & TERN_TOK_PARSE_SPECIAL;
    const bool prefix = !(flags & TERN_TOK_CONTINUE);
    if (add && t->add_bos) tok_out_push(&o, t->bos);

    tern_status st;
    size_t seg = 0, span_cur = 0;
    bool any_user = false;
    for (int k = 0; k < t->n_specials && !any_user; k++)
        any_user = t->specials[k].attr & TOK_ATTR_USER_DEFINED;
    if (t->n_specials && (parse || any_user)) {
        for (size_t i = 0; i < len;) {
            unsigned char c = (unsigned char)text[i];
            if (t->special_start[c] == t->special_start[c + 1]) {
                i++;
                continue;
            }
            int k = match_special(t, text, i, len, parse);
            if (k >= 0 && restrict_special && !(t->specials[k].attr & TOK_ATTR_USER_DEFINED) &&
                !in_spans(spans, n_spans, &span_cur, i, t->text_len[t->specials[k].id]))
                k = match_special(t, text, i, len, false); /* content: what plain text matches */
            if (k < 0) {
                i++;
                continue;
            }
            const struct tok_special *sp = &t->specials[k];
            size_t end = i;
            if (sp->attr & TOK_ATTR_LSTRIP)
                while (end > seg && is_blank(text[end - 1])) end--;
            if ((st = encode_segment(t, text + seg, end - seg, prefix, &o))) return st;
            tok_out_push(&o, sp->id);
            i += t->text_len[sp->id];
            if (sp->attr & TOK_ATTR_RSTRIP)
                while (i < len && is_blank(text[i])) i++;
            seg = i;
        }
    }
    if ((st = encode_segment(t, text + seg, len - seg, prefix, &o))) return st;
    if (add && t->add_eos) tok_out_push(&o, t->eos);

    *n_out = o.n;
    if (o.n > cap)
        return tern_fail(TERN_ERR_RANGE, "tokenize: output of %zu ids, needs %zu", cap, o.n);
    return TERN_OK;
}

tern_status tern_tokenize_grow(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                               int32_t **ids, size_t *cap, size_t *n_out)
{
    if (!ids || !cap) return tern_fail(TERN_ERR_ARG, "tern_tokenize_grow: NULL argument");
    for (;;) {
        tern_status st = tern_tokenize(t, text, len, flags, *ids, *cap, n_out);
        if (st != TERN_ERR_RANGE || *n_out <= *cap) return st;
        int32_t *grown = realloc(*ids, *n_out * sizeof *grown);
        if (!grown) return tern_fail(TERN_ERR_NOMEM, "tokenize: out of memory for %zu ids", *n_out);
        *ids = grown;
        *cap = *n_out;
    }
}

int32_t tern_token_control_id(const struct tern_tokenizer *t, const char *text, size_t len)
{
    if (!t || !text || !len || !t->n_specials) return -1;
    /* what the partition step of tern_tokenize(..., TERN_TOK_PARSE_SPECIAL) takes at text[0]:
     * one token exactly when that special spans the whole text */
    int k = match_special(t, text, 0, len, true);
    if (k < 0) return -1;
    int32_t id = t->specials[k].id;
    return t->text_len[id] == len && (t->attr[id] & TOK_ATTR_CONTROL) ? id : -1;
}
