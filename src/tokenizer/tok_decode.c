/* tok_decode.c — ids -> bytes: per-token pieces, whole-sequence detokenize, and the streaming
 * detokenizer.
 *
 * Pieces are computed once at load (tok_build_pieces) as llama.cpp's token_to_piece renders
 * them: SPM normal tokens with ▁ turned into spaces, <0xNN> byte tokens as their byte, BPE
 * normal tokens with GPT-2's byte map undone; control / user-defined / unknown tokens as their
 * text. Control tokens are empty unless TERN_PIECE_SPECIAL is given, or (streaming
 * detokenizer) unless they are in its preserved set (tern_detokenizer_preserve: a tool-call
 * format's markup, shown so the tool-call parser sees it; llama-server's preserved tokens).
 *
 * The streaming detokenizer only ever returns valid UTF-8: a multi-byte sequence cut between
 * tokens (byte tokens, or BPE tokens splitting a character) is held back until complete; a
 * byte that cannot start or continue a valid sequence becomes U+FFFD. Its output buffer is
 * sized at creation from the longest piece, so push never allocates. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

tern_status tok_build_pieces(struct tern_tokenizer *t)
{
    size_t pos = t->arena_used;
    t->max_piece = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = t->text_arena + t->text_off[i];
        uint32_t n = t->text_len[i];
        uint32_t a = t->attr[i];
        char *o = t->text_arena + pos;
        uint32_t m = 0;
        TERN_ASSERT(pos + n <= t->arena_cap); /* a piece is never longer than its text */
        if (a & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) {
            memcpy(o, s, n);
            m = n;
        } else if (a & TOK_ATTR_UNUSED) {
            m = 0;
        } else if (t->model == TOK_MODEL_SPM) {
            if ((a & TOK_ATTR_BYTE) && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' &&
                hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
                o[m++] = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            } else {
                for (uint32_t j = 0; j < n;) {
                    if (j + 3 <= n && (unsigned char)s[j] == 0xE2 && (unsigned char)s[j + 1] == 0x96 &&
                        (unsigned char)s[j + 2] == 0x81) {
                        o[m++] = ' ';
                        j += 3;
                    } else {
                        o[m++] = s[j++];
                    }
                }
            }
        } else if (t->key_len[i] != UINT32_MAX) { /* BPE: the raw bytes are the key */
            memcpy(o, t->text_arena + t->key_off[i], t->key_len[i]);
            m = t->key_len[i];
        } else {
            memcpy(o, s, n);
            m = n;
        }
        TERN_ASSERT(m <= n);
        t->piece_off[i] = (uint32_t)pos;
        t->piece_len[i] = m;
        if (m > t->max_piece) t->max_piece = m;
        pos += m;
    }
    t->arena_used = pos;
    return TERN_OK;
}

/* keep[0..n_keep): control tokens shown although flags lack TERN_PIECE_SPECIAL */
static bool piece(const struct tern_tokenizer *t, int32_t id, unsigned flags, const int32_t *keep,
                  int n_keep, const char **p, size_t *n)
{
    if (id < 0 || id >= t->n_vocab) return false;
    bool shown = !(t->attr[id] & TOK_ATTR_CONTROL) || (flags & TERN_PIECE_SPECIAL);
    for (int i = 0; i < n_keep && !shown; i++) shown = keep[i] == id;
    if (!shown) {
        *p = "";
        *n = 0;
        return true;
    }
    *p = t->text_arena + t->piece_off[id];
    *n = t->piece_len[id];
    return true;
}

tern_status tern_token_to_piece(const struct tern_tokenizer *t, int32_t id, unsigned flags,
                                char *buf, size_t cap, size_t *n_out)
{
    const char *p;
    size_t n;
    if (!t || !n_out) return tern_fail(TERN_ERR_ARG, "tern_token_to_piece: NULL argument");
    if (!piece(t, id, flags, NULL, 0, &p, &n))
        return tern_fail(TERN_ERR_ARG, "token_to_piece: id %d outside vocabulary of %d", id,
                         t->n_vocab);
    *n_out = n;
    if (n > cap) return tern_fail(TERN_ERR_RANGE, "token_to_piece: buffer of %zu bytes, needs %zu",
                                  cap, n);
    memcpy(buf, p, n);
    return TERN_OK;
}

tern_status tern_detokenize(const struct tern_tokenizer *t, const int32_t *ids, size_t n,
                            unsigned flags, char *buf, size_t cap, size_t *n_out)
{
    if (!t || !n_out || (n && !ids)) return tern_fail(TERN_ERR_ARG, "tern_detokenize: NULL argument");
    size_t m = 0;
    bool strip = t->model == TOK_MODEL_SPM && t->add_space_prefix;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pn;
        if (!piece(t, ids[i], flags, NULL, 0, &p, &pn))
            return tern_fail(TERN_ERR_ARG, "detokenize: token %zu: id %d outside vocabulary of %d",
                             i, ids[i], t->n_vocab);
        if (pn && strip) {
            strip = false;
            if (p[0] == ' ') {
                p++;
                pn--;
            }
        }
        if (pn == 0) continue;
        if (m + pn <= cap) memcpy(buf + m, p, pn);
        else if (m < cap) memcpy(buf + m, p, cap - m);
        m += pn;
    }
    *n_out = m;
    if (m > cap) return tern_fail(TERN_ERR_RANGE, "detokenize: buffer of %zu bytes, needs %zu",
                                  cap, m);
    return TERN_OK;
}

/* ---- streaming ---- */

struct tern_detokenizer {
    const struct tern_tokenizer *t;
    unsigned flags;
    int32_t keep[TERN_MAX_PRESERVED]; /* control tokens shown (tern_detokenizer_preserve) */
    int n_keep;
    bool strip;              /* SPM: leading space of the first piece still to remove */
    unsigned char pend[4];   /* incomplete sequence held back */
    int npend;
    size_t cap;
    char *out;               /* [cap] */
    unsigned char *in;       /* [max_piece + 8] held-back bytes + the current piece */
};

tern_status tern_detokenizer_create(const struct tern_tokenizer *t, unsigned flags,
                                    struct tern_detokenizer **out)
{
    if (!t || !out) return tern_fail(TERN_ERR_ARG, "tern_detokenizer_create: NULL argument");
    struct tern_detokenizer *d = calloc(1, sizeof *d);
    if (!d) return tern_fail(TERN_ERR_NOMEM, "detokenizer: allocation");
    /* worst case: every byte (held-back ones included) becomes a 3-byte U+FFFD */
    d->cap = ((size_t)t->max_piece + 4) * 3 + 16;
    d->out = malloc(d->cap);
    d->in = malloc((size_t)t->max_piece + 8);
    if (!d->out || !d->in) {
        free(d->out);
        free(d->in);
        size_t cap = d->cap;
        free(d);
        return tern_fail(TERN_ERR_NOMEM, "detokenizer: buffer of %zu bytes", cap);
    }
    d->t = t;
    d->flags = flags;
    tern_detokenizer_reset(d);
    *out = d;
    return TERN_OK;
}

void tern_detokenizer_free(struct tern_detokenizer *d)
{
    if (!d) return;
    free(d->out);
    free(d->in);
    free(d);
}

tern_status tern_detokenizer_preserve(struct tern_detokenizer *d, const int32_t *ids, size_t n)
{
    if (!d || (n && !ids)) return tern_fail(TERN_ERR_ARG, "tern_detokenizer_preserve: NULL argument");
    if (n > TERN_MAX_PRESERVED)
        return tern_fail(TERN_ERR_RANGE, "detokenizer: %zu preserved tokens, at most %d", n, TERN_MAX_PRESERVED);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->t->n_vocab)
            return tern_fail(TERN_ERR_ARG, "detokenizer: preserved token %zu: id %d outside vocabulary of %d", i,
                             ids[i], d->t->n_vocab);
    /* a control token's text is at most max_piece bytes (its piece is its text), so push's
     * buffers, sized at creation, hold it */
    if (n) memcpy(d->keep, ids, n * sizeof *ids);
    d->n_keep = (int)n;
    return TERN_OK;
}

void tern_detokenizer_reset(struct tern_detokenizer *d)
{
    d->npend = 0;
    d->strip = d->t->model == TOK_MODEL_SPM && d->t->add_space_prefix;
}

/* Expected length of a sequence starting with c (0: c cannot start one), and the valid range of
 * its second byte. */
static int seq_len(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

static size_t put_fffd(char *o)
{
    memcpy(o, "\xEF\xBF\xBD", 3);
    return 3;
}

/* Append bytes b[0..n) to d->out at *m, validating; an incomplete valid tail goes to pend. */
static void feed(struct tern_detokenizer *d, const unsigned char *b, size_t n, size_t *m)
{
    size_t i = 0;
    while (i < n) {
        /* each input byte writes at most 3 output bytes (U+FFFD): cap holds 3 x (piece + 4) */
        TERN_ASSERT(*m + 3 * (n - i) <= d->cap);
        unsigned char c = b[i], lo, hi;
        if (c < 0x80) {
            d->out[(*m)++] = (char)c;
            i++;
            continue;
        }
        int L = seq_len(c, &lo, &hi);
        if (L == 0) {
            *m += put_fffd(d->out + *m);
            i++;
            continue;
        }
        size_t k = 1;
        bool ok = true;
        while (k < (size_t)L && i + k < n) {
            unsigned char x = b[i + k];
            bool valid = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
            if (!valid) {
                ok = false;
                break;
            }
            k++;
        }
        if (!ok) { /* the lead byte (and what followed it validly) can never complete */
            *m += put_fffd(d->out + *m);
            i += k;
            continue;
        }
        if (k < (size_t)L) { /* valid so far but cut: hold back */
            memcpy(d->pend, b + i, k);
            d->npend = (int)k;
            return;
        }
        memcpy(d->out + *m, b + i, (size_t)L);
        *m += (size_t)L;
        i += (size_t)L;
    }
}

tern_status tern_detokenizer_push(struct tern_detokenizer *d, int32_t id, const char **text,
                                  size_t *len)
{
    const char *p;
    size_t pn;
    if (!d || !text || !len) return tern_fail(TERN_ERR_ARG, "tern_detokenizer_push: NULL argument");
    if (!piece(d->t, id, d->flags, d->keep, d->n_keep, &p, &pn))
        return tern_fail(TERN_ERR_ARG, "detokenizer: id %d outside vocabulary of %d", id,
                         d->t->n_vocab);
    if (pn && d->strip) {
        d->strip = false;
        if (p[0] == ' ') {
            p++;
            pn--;
        }
    }
    /* held-back bytes + piece, contiguous, then validate once */
    size_t n = (size_t)d->npend;
    TERN_ASSERT(n <= 3 && pn <= d->t->max_piece); /* d->in holds max_piece + 8 */
    memcpy(d->in, d->pend, n);
    memcpy(d->in + n, p, pn);
    n += pn;
    d->npend = 0;
    size_t m = 0;
    feed(d, d->in, n, &m);
    *text = d->out;
    *len = m;
    return TERN_OK;
}

tern_status tern_detokenizer_flush(struct tern_detokenizer *d, const char **text, size_t *len)
{
    if (!d || !text || !len) return tern_fail(TERN_ERR_ARG, "tern_detokenizer_flush: NULL argument");
    size_t m = 0;
    if (d->npend) m += put_fffd(d->out);
    tern_detokenizer_reset(d);
    *text = d->out;
    *len = m;
    return TERN_OK;
}
