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
 * Cost: a backward scan of the history per round, O(n * L) int compares (a 4096-token history:
 * tens of microseconds at most, against milliseconds for a target pass); nothing is allocated. */
#include <stdlib.h>
#include <string.h>

#include "gen/spec.h"
#include "util/error.h"

struct ngram_source {
    struct spec_source base;
    int ngram_min, ngram_max;
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

static tern_status ngram_propose(struct spec_source *src, const int32_t *hist, int n, int k,
                                 int lag_max, int32_t *out, int *n_out, int *cls)
{
    (void)lag_max; /* it reads the history as it is */
    const struct ngram_source *ng = (const struct ngram_source *)src;
    *n_out = 0;
    *cls = 0;
    src->q_valid = false;
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

static void ngram_free(struct spec_source *src) { free(src); }

static const struct spec_source_ops ngram_ops = {
    .kind = "ngram", .begin = ngram_begin, .propose = ngram_propose, .costly = false,
    .lag = ngram_lag, .free = ngram_free,
};

tern_status spec_ngram_create(int ngram_min, int ngram_max, int n_vocab, struct spec_source **out)
{
    if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64)
        return tern_fail(TERN_ERR_ARG, "draft ngram: lengths %d..%d must satisfy 1 <= min <= max "
                         "<= 64", ngram_min, ngram_max);
    struct ngram_source *ng = calloc(1, sizeof *ng);
    if (!ng) return tern_fail(TERN_ERR_NOMEM, "draft ngram: out of memory");
    ng->base.ops = &ngram_ops;
    ng->base.n_vocab = n_vocab;
    ng->ngram_min = ngram_min;
    ng->ngram_max = ngram_max;
    *out = &ng->base;
    return TERN_OK;
}
