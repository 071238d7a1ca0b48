/* spec_ngram.c — the "ngram" draft source: prompt lookup. No second model: the history itself
 * (prompt + generated tokens) is the draft model.
 *
 * Read spec.h first. The last L tokens of the history (L from ngram_max down to ngram_min) are
 * looked up earlier in the history; the tokens that followed that earlier occurrence are the
 * draft. Answers that copy from their prompt — a tool call repeating a name or an argument value
 * from the request or a tool result, code edits, quotes — and text that repeats itself are
 * drafted well. The match length is the proposal's class: the controller keeps a separate
 * acceptance rate for 1-token and 4-token matches, which predict very differently.
 *
 * Under a grammar (spec_admit set) the lookup also works on the text: a tool call's argument
 * value is the user's words in another tokenization (` Marrakech` in the request is ` Mar` `ra`
 * `ke` `ch`; after `"near": "` the model writes `M` `ar` ...), so no earlier token sequence
 * matches, but the bytes `Mar` do. The source keeps the history's text (with the target's own
 * tokenizer, given at creation) and offers the continuations of the earlier occurrences whose
 * preceding bytes match the most, tokenized afresh where they start inside a token.
 *
 * Cost: a backward scan of the history per round, O(n * L) int compares (a 4096-token history:
 * tens of microseconds at most, against milliseconds for a target pass). The text buffers are
 * allocated when a generator takes the source (prepare); a round allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "gen/spec.h"
#include "util/error.h"

/* Text lookup: the last TEXT_KEY bytes must occur earlier; candidates are ranked by how many
 * bytes before them match (up to TEXT_MATCH_MAX), and continue for at most TEXT_CONT bytes. */
enum { TEXT_KEY = 3, TEXT_MATCH_MAX = 64, TEXT_CONT = 96, TEXT_KEEP = 8, TEXT_BYTES_PER_TOKEN = 12 };

struct text_cand {
    int pos; /* text offset where the continuation starts */
    int ml;  /* bytes before pos that match the end of the history's text */
};

struct ngram_source {
    struct spec_source base;
    int ngram_min, ngram_max;
    /* the history's text, kept in step with it (tok NULL: token lookup only) */
    struct tern_tokenizer *tok; /* owned when own_tok */
    bool own_tok;
    int32_t *ids;               /* the tokens text holds, in order (cap_ids) */
    int *end;                   /* end[i]: text offset just past ids[i]'s bytes */
    char *text;                 /* cap_text bytes */
    int n_ids, cap_ids, cap_text;
};

static tern_status ngram_begin(struct spec_source *src, const struct tern_sampler_params *sp)
{
    (void)src;
    (void)sp;
    return TERN_OK;
}

/* Among earlier occurrences of the suffix hist[n-L..n), the most recent one followed by at
 * least k tokens, else the one followed by the most (the earliest). Returns its start or -1. */
static int find_match(const int32_t *hist, int n, int L, int k)
{
    const int32_t *suf = hist + n - L;
    int best = -1;
    for (int i = n - L - 1; i >= 0; i--) {
        if (hist[i] != suf[0] || memcmp(hist + i, suf, sizeof(int32_t) * (size_t)L) != 0) continue;
        best = i; /* scanning backward, each match is followed by more tokens than the last */
        if (n - (i + L) >= k) break;
    }
    return best;
}

/* With a filter (a grammar): among the earlier occurrences of the suffix, longest suffix first
 * and most recent first, the continuation the filter takes furthest, cut where it stops taking
 * it. A tool call's argument value starts after `": "`, whose most recent occurrence is usually
 * the call's own name or a schema in the tools, not the user's words the value copies: the
 * grammar refuses those continuations and an older occurrence of a shorter suffix has the
 * words. At most NGRAM_CANDIDATES continuations are offered to the filter (each costs a few
 * matcher steps and a rollback: microseconds). */
enum { NGRAM_CANDIDATES = 16 };

/* Bring the text up to hist[0..n): keep the common prefix, append the pieces of the rest. False
 * when the buffers cannot hold it all (the text lookup is then skipped). */
static bool text_sync(struct ngram_source *ng, const int32_t *hist, int n)
{
    int c = 0;
    while (c < ng->n_ids && c < n && ng->ids[c] == hist[c]) c++;
    ng->n_ids = c;
    int at = c ? ng->end[c - 1] : 0;
    for (; ng->n_ids < n; ng->n_ids++) {
        if (ng->n_ids == ng->cap_ids) return false;
        size_t len = 0;
        if (tern_token_to_piece(ng->tok, hist[ng->n_ids], TERN_PIECE_SPECIAL, ng->text + at,
                                (size_t)(ng->cap_text - at), &len))
            return false; /* no room for the piece */
        at += (int)len;
        ng->ids[ng->n_ids] = hist[ng->n_ids];
        ng->end[ng->n_ids] = at;
    }
    return true;
}

/* The earlier places whose preceding bytes match the end of the text best (at least TEXT_KEY of
 * them), most matching first and most recent among equals, into c[0..TEXT_KEEP). */
static int text_candidates(const struct ngram_source *ng, struct text_cand *c)
{
    const char *t = ng->text;
    const int tl = ng->n_ids ? ng->end[ng->n_ids - 1] : 0;
    int nc = 0;
    if (tl <= TEXT_KEY) return 0;
    const char *key = t + tl - TEXT_KEY;
    for (int p = tl - 1; p >= TEXT_KEY; p--) { /* p: where a continuation would start */
        if (t[p - 1] != key[TEXT_KEY - 1] || memcmp(t + p - TEXT_KEY, key, TEXT_KEY) != 0) continue;
        int ml = TEXT_KEY;
        while (ml < TEXT_MATCH_MAX && ml < p && t[p - 1 - ml] == t[tl - 1 - ml]) ml++;
        int j = nc < TEXT_KEEP ? nc++ : TEXT_KEEP; /* insertion by ml, later (older) after equals */
        if (j == TEXT_KEEP && c[TEXT_KEEP - 1].ml >= ml) continue;
        if (j == TEXT_KEEP) j--;
        while (j > 0 && c[j - 1].ml < ml) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = (struct text_cand){.pos = p, .ml = ml};
    }
    return nc;
}

/* The continuation at text offset pos as up to k tokens: the history's own tokens where pos is a
 * token boundary, else its next TEXT_CONT bytes tokenized afresh (the last token left out: it may
 * be cut short). */
static int text_continuation(const struct ngram_source *ng, const int32_t *hist, int pos, int k, int32_t *out)
{
    int lo = 0, hi = ng->n_ids - 1; /* the first token ending after pos */
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (ng->end[mid] <= pos) lo = mid + 1;
        else hi = mid;
    }
    const int start = lo ? ng->end[lo - 1] : 0;
    if (start == pos) {
        int m = ng->n_ids - lo;
        if (m > k) m = k;
        memcpy(out, hist + lo, sizeof(int32_t) * (size_t)m);
        return m;
    }
    const int tl = ng->end[ng->n_ids - 1];
    const int len = tl - pos < TEXT_CONT ? tl - pos : TEXT_CONT;
    int32_t ids[TEXT_CONT + 1];
    size_t n = 0;
    if (tern_tokenize(ng->tok, ng->text + pos, (size_t)len, TERN_TOK_CONTINUE, ids, TEXT_CONT + 1, &n) || n < 2)
        return 0;
    int m = (int)n - 1;
    if (m > k) m = k;
    memcpy(out, ids, sizeof(int32_t) * (size_t)m);
    return m;
}

static int propose_admitted(struct ngram_source *ng, const int32_t *hist, int n, int k, int32_t *out,
                            int *cls)
{
    const struct spec_admit *ad = ng->base.admit;
    int best = 0, tried = 0;
    if (ng->tok && text_sync(ng, hist, n)) {
        /* the candidate whose context matches most, of those the filter takes at all; among
         * equally matching ones, the one it takes furthest */
        struct text_cand c[TEXT_KEEP];
        const int nc = text_candidates(ng, c);
        int32_t d[SPEC_MAX_DRAFT];
        int best_ml = 0;
        for (int i = 0; i < nc && c[i].ml >= best_ml; i++) {
            const int m = text_continuation(ng, hist, c[i].pos, k, d);
            const int ok = m ? ad->fn(ad->user, d, m) : 0;
            if (ok <= best) continue;
            best = ok;
            best_ml = c[i].ml;
            memcpy(out, d, sizeof(int32_t) * (size_t)ok);
            *cls = c[i].ml >= 16 ? 3 : c[i].ml >= 8 ? 2 : 1;
        }
        return best;
    }
    for (int L = ng->ngram_max; L >= ng->ngram_min && tried < NGRAM_CANDIDATES; L--) {
        if (L >= n) continue;
        const int32_t *suf = hist + n - L;
        for (int i = n - L - 1; i >= 0 && tried < NGRAM_CANDIDATES; i--) {
            if (hist[i] != suf[0] || memcmp(hist + i, suf, sizeof(int32_t) * (size_t)L) != 0) continue;
            int m = n - (i + L);
            if (m > k) m = k;
            tried++;
            const int ok = ad->fn(ad->user, hist + i + L, m);
            if (ok <= best) continue;
            best = ok;
            memcpy(out, hist + i + L, sizeof(int32_t) * (size_t)ok);
            *cls = L - 1 < SPEC_N_CLASS - 1 ? L - 1 : SPEC_N_CLASS - 1;
            if (ok == k) return ok;
        }
    }
    return best;
}

static tern_status ngram_propose(struct spec_source *src, const int32_t *hist, int n, int k,
                                 int lag_max, int32_t *out, int *n_out, int *cls)
{
    (void)lag_max; /* it reads the history as it is */
    const struct ngram_source *ng = (const struct ngram_source *)src;
    *n_out = 0;
    *cls = 0;
    src->q_valid = false;
    if (src->admit) {
        *n_out = propose_admitted((struct ngram_source *)src, hist, n, k, out, cls);
        return TERN_OK;
    }
    for (int L = ng->ngram_max; L >= ng->ngram_min; L--) {
        if (L >= n) continue;
        const int i = find_match(hist, n, L, k);
        if (i < 0) continue;
        int m = n - (i + L);
        if (m > k) m = k;
        for (int j = 0; j < m; j++) out[j] = hist[i + L + j];
        *n_out = m;
        *cls = L - 1 < SPEC_N_CLASS - 1 ? L - 1 : SPEC_N_CLASS - 1;
        return TERN_OK;
    }
    return TERN_OK;
}

static int ngram_lag(const struct spec_source *src, const int32_t *hist, int n)
{
    (void)src;
    (void)hist;
    (void)n;
    return 0; /* it reads the history as it is */
}

static tern_status ngram_prepare(struct spec_source *src, int n_ctx)
{
    struct ngram_source *ng = (struct ngram_source *)src;
    if (!ng->tok || n_ctx <= ng->cap_ids) return TERN_OK;
    int32_t *ids = realloc(ng->ids, sizeof(int32_t) * (size_t)n_ctx);
    if (ids) ng->ids = ids;
    int *end = realloc(ng->end, sizeof(int) * (size_t)n_ctx);
    if (end) ng->end = end;
    char *text = realloc(ng->text, (size_t)n_ctx * TEXT_BYTES_PER_TOKEN);
    if (text) ng->text = text;
    if (!ids || !end || !text) return tern_fail(TERN_ERR_NOMEM, "draft ngram: out of memory for the text of %d tokens", n_ctx);
    ng->cap_ids = n_ctx;
    ng->cap_text = n_ctx * TEXT_BYTES_PER_TOKEN;
    ng->n_ids = 0;
    return TERN_OK;
}

static void ngram_free(struct spec_source *src)
{
    struct ngram_source *ng = (struct ngram_source *)src;
    if (ng->own_tok) tern_tokenizer_free(ng->tok);
    free(ng->ids);
    free(ng->end);
    free(ng->text);
    free(src);
}

static const struct spec_source_ops ngram_ops = {
    .kind = "ngram", .begin = ngram_begin, .propose = ngram_propose, .costly = false,
    .lag = ngram_lag, .prepare = ngram_prepare, .free = ngram_free,
};

tern_status spec_ngram_create(int ngram_min, int ngram_max, int n_vocab, struct tern_tokenizer *tok,
                              bool own_tok, struct spec_source **out)
{
    if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64) {
        if (own_tok) tern_tokenizer_free(tok);
        return tern_fail(TERN_ERR_ARG, "draft ngram: lengths %d..%d must satisfy 1 <= min <= max "
                         "<= 64", ngram_min, ngram_max);
    }
    struct ngram_source *ng = calloc(1, sizeof *ng);
    if (!ng) {
        if (own_tok) tern_tokenizer_free(tok);
        return tern_fail(TERN_ERR_NOMEM, "draft ngram: out of memory");
    }
    ng->tok = tok;
    ng->own_tok = own_tok;
    ng->base.ops = &ngram_ops;
    ng->base.n_vocab = n_vocab;
    ng->ngram_min = ngram_min;
    ng->ngram_max = ngram_max;
    *out = &ng->base;
    return TERN_OK;
}
