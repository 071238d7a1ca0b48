/* gen_out.c — handing a sequence's tokens over and choosing the next ones (gen_out.h): the stop
 * rules and the grammar's forced tokens, shared by the generator and the batcher.
 *
 * Read gen_out.h first. The order of the checks in gen_out_deliver is the plain loop's, so a
 * speculative run (generate.c verifying drafts) and a batched one stop on the same token as a
 * plain one. */
#include <string.h>
#include <time.h>

#include "gen/gen_out.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/error.h"

double gen_now_ms(void) { return util_now_ms(); }

tern_status gen_out_preserve(struct tern_detokenizer *d, const int32_t *ids, int n,
                             const struct tern_grammar *g, const char *who)
{
    if (n < 0 || (n > 0 && !ids)) return tern_fail(TERN_ERR_ARG, "%s: preserve: %d ids%s", who, n, n > 0 ? ", NULL array" : "");
    int32_t set[TERN_MAX_PRESERVED];
    int k = 0;
    const int32_t *gids = NULL;
    int gn = 0;
    if (g) {
        struct tern_grammar_info gi;
        tern_grammar_get_info(g, &gi);
        gids = gi.control_tokens;
        gn = gi.n_control_tokens;
    }
    for (int i = 0; i < n + gn; i++) {
        int32_t id = i < n ? ids[i] : gids[i - n];
        bool seen = false;
        for (int j = 0; j < k && !seen; j++) seen = set[j] == id;
        if (seen) continue;
        if (k == TERN_MAX_PRESERVED)
            return tern_fail(TERN_ERR_RANGE, "%s: more than %d preserved tokens (the request's and its grammar's)",
                             who, TERN_MAX_PRESERVED);
        set[k++] = id;
    }
    tern_status st = tern_detokenizer_preserve(d, set, (size_t)k);
    return st ? tern_fail_prefix(st, "%s: ", who) : TERN_OK;
}

tern_status gen_reason_init(struct gen_reason *rs, const struct tern_reasoning_ctl *c, const char *who)
{
    *rs = (struct gen_reason){.forcing = -1, .budget = -1};
    if (!c || !c->end) return TERN_OK;
    const size_t el = strlen(c->end);
    if (el == 0 || el >= sizeof rs->end)
        return tern_fail(TERN_ERR_ARG, "%s: reasoning: the end text is %zu bytes (1..%zu)", who, el, sizeof rs->end - 1);
    if (c->budget < -1) return tern_fail(TERN_ERR_ARG, "%s: reasoning: budget %d (-1 = none, or >= 0)", who, c->budget);
    if (c->budget >= 0 && (c->n_close < 1 || c->n_close > GEN_MAX_CLOSE || !c->close))
        return tern_fail(TERN_ERR_ARG, "%s: reasoning: a budget needs 1..%d close tokens, got %d", who, GEN_MAX_CLOSE,
                         c->n_close);
    memcpy(rs->end, c->end, el + 1);
    rs->end_len = el;
    rs->inside = c->open;
    rs->budget = c->budget;
    if (c->budget >= 0) {
        memcpy(rs->close, c->close, sizeof(int32_t) * (size_t)c->n_close);
        rs->n_close = c->n_close;
        if (c->open && c->budget == 0) rs->forcing = 0; /* closed before any thought */
    }
    return TERN_OK;
}

void gen_out_reason_start(struct gen_out *o)
{
    if (!o->rs.inside) return;
    o->rs.gr_wait = o->ver->gr;
    o->ver->gr = NULL;
}

/* The reasoning is over: the grammar starts from here. */
static void reason_end(struct gen_out *o)
{
    struct gen_reason *rs = &o->rs;
    rs->inside = false;
    if (rs->forcing < 0 && rs->gr_wait) {
        o->ver->gr = rs->gr_wait;
        rs->gr_wait = NULL;
    }
}

/* A token sampled inside the reasoning, with its text: count it, look for the end text, and
 * start forcing the close once the budget is spent. */
static void reason_track(struct gen_out *o, const char *text, size_t len)
{
    struct gen_reason *rs = &o->rs;
    rs->used++;
    /* keep the last end_len - 1 bytes before this piece: the end may start in an earlier one */
    const size_t keep = rs->end_len - 1;
    for (size_t i = 0; i < len; i++) {
        if (rs->tail_len == sizeof rs->tail) {
            memmove(rs->tail, rs->tail + rs->tail_len - keep, keep);
            rs->tail_len = keep;
        }
        rs->tail[rs->tail_len++] = text[i];
        if (rs->tail_len >= rs->end_len && !memcmp(rs->tail + rs->tail_len - rs->end_len, rs->end, rs->end_len)) {
            reason_end(o);
            return;
        }
    }
    if (rs->budget >= 0 && rs->used >= rs->budget) rs->forcing = 0;
}

static bool emit(tern_piece_fn fn, void *user, const char *text, size_t len)
{
    return fn && len > 0 && fn(text, len, user) != 0;
}

bool gen_out_deliver(struct gen_out *o, int32_t tok, int pos, bool last, tern_status *rc)
{
    struct tern_gen_stats *st = o->st;
    if (gen_out_reasoning(o)) st->reasoning_tokens++;
    if (st->n_generated++ == 0) {
        o->t_first = gen_now_ms();
        st->ttft_ms = o->t_first - o->t0;
    }
    if (o->on_token && o->on_token(tok, o->user) != 0) {
        st->stop = TERN_GEN_STOP_CALLBACK;
        o->stop = true;
    }
    if (!o->ignore_eog && tern_token_is_eog(o->tok, tok)) {
        if (!o->stop) st->stop = TERN_GEN_STOP_EOG;
        return true;
    }
    const char *text;
    size_t len;
    if ((*rc = tern_detokenizer_push(o->d, tok, &text, &len))) return true;
    if (!o->stop && emit(o->on_piece, o->user, text, len)) {
        st->stop = TERN_GEN_STOP_CALLBACK;
        o->stop = true;
    }
    if (o->rs.inside && o->rs.forcing < 0) reason_track(o, text, len);
    /* the document is complete and nothing can follow (or an end-of-generation token was kept
     * with ignore_eog): sampling on could only produce what the grammar refuses */
    if (last && o->ver->gr && tern_grammar_matcher_is_done(o->ver->gr->m)) {
        if (!o->stop) st->stop = TERN_GEN_STOP_DONE;
        return true;
    }
    if (st->n_generated == o->max_tokens) return true;
    /* The token goes into the cache so the next turn can reuse it; a full cache ends here. */
    if (pos >= o->n_ctx) {
        if (!o->stop) st->stop = TERN_GEN_STOP_CONTEXT_FULL;
        return true;
    }
    return o->stop;
}

bool gen_out_hand_forced(struct gen_out *o, int32_t *pend, int *np, int pos0, int n, tern_status *rc)
{
    struct gen_grammar *gr = o->ver->gr;
    TERN_ASSERT(n >= 0 && *np >= 0 && *np + n <= GEN_MAX_PENDING, "forced tokens fit the pending array");
    for (int i = 0; i < n; i++) {
        const int32_t t = pend[(*np)++];
        tern_sampler_accept(o->sampler, t); /* repetition history, as if sampled */
        if (gen_out_deliver(o, t, pos0 + *np - 1, i == n - 1, rc)) {
            gen_grammar_rollback(gr, n - i - 1);
            gr->forced -= n - i - 1;
            return true;
        }
    }
    return false;
}

bool gen_out_add_forced(struct gen_out *o, int32_t *pend, int *np, int pos0, int cap, tern_status *rc)
{
    if (!o->ver->gr || *np >= cap) return false;
    const int n = gen_grammar_forced(o->ver->gr, pend + *np, cap - *np);
    return gen_out_hand_forced(o, pend, np, pos0, n, rc);
}

bool gen_out_forced_drafts(struct gen_out *o, const int32_t *d, int k, int *a, int32_t *forced, int *nf,
                           int32_t *rec, int pos0, tern_status *rc)
{
    struct gen_grammar *gr = o->ver->gr;
    const int n = *nf;
    int m = 0;
    TERN_ASSERT(gr && n > 0 && n <= GEN_MAX_PENDING && *a >= 0 && *a <= k, "checking forced tokens against the drafts");
    while (m < n && *a < k && d[*a] == forced[m]) {
        const int32_t t = forced[m++];
        tern_sampler_accept(o->sampler, t); /* repetition history, as if sampled: no draw */
        if (gen_out_deliver(o, t, pos0 + *a, m == n, rc)) {
            gen_grammar_rollback(gr, n - m); /* the forced tokens after the one that ended */
            gr->forced -= n - m;
            *nf = 0;
            return true;
        }
        rec[pos0 + (*a)++] = t;
    }
    *nf = n - m;
    TERN_ASSERT(*a <= k && *nf >= 0);
    if (*nf > 0) memmove(forced, forced + m, sizeof(int32_t) * (size_t)*nf);
    return false;
}

bool gen_out_choose(struct gen_out *o, const float *logits, int32_t *pend, int *np, int pos, int cap,
                    tern_status *rc)
{
    *np = 0;
    TERN_ASSERT(cap >= 1 && cap <= GEN_MAX_PENDING && pos >= 0);
    if (o->rs.forcing >= 0) { /* the reasoning budget is spent: its close, one token per step */
        TERN_ASSERT(o->rs.forcing < o->rs.n_close);
        const int32_t t = o->rs.close[o->rs.forcing++];
        if (o->rs.forcing == o->rs.n_close) { /* the last one: the answer (and the grammar) from here */
            o->rs.forcing = -1;
            reason_end(o);
            o->st->reasoning_tokens++; /* still the reasoning's, though deliver sees it after */
        }
        pend[(*np)++] = t;
        tern_sampler_accept(o->sampler, t); /* repetition history, as if sampled: no draw */
        if (o->on_logprob) {
            gen_logprob_compute(logits, o->ver->n_vocab, t, o->n_top_logprobs, &o->lp);
            if (o->on_logprob(&o->lp, o->user) != 0) {
                o->st->stop = TERN_GEN_STOP_CALLBACK;
                o->stop = true;
            }
        }
        return gen_out_deliver(o, t, pos, true, rc);
    }
    if (!o->on_logprob) {
        if (gen_out_add_forced(o, pend, np, pos, cap, rc)) return true;
        if (*np > 0) return false;
    }
    pend[(*np)++] = spec_sample(o->ver, o->sampler, logits);
    if (o->on_logprob) {
        gen_logprob_compute(logits, o->ver->n_vocab, pend[0], o->n_top_logprobs, &o->lp);
        if (o->on_logprob(&o->lp, o->user) != 0) { /* as on_token asking to stop */
            o->st->stop = TERN_GEN_STOP_CALLBACK;
            o->stop = true;
        }
        return gen_out_deliver(o, pend[0], pos, true, rc);
    }
    if (gen_out_deliver(o, pend[0], pos, true, rc)) return true;
    return gen_out_add_forced(o, pend, np, pos, cap, rc);
}

void gen_out_grammar_stats(const struct gen_grammar *gr, struct tern_gen_stats *st)
{
    st->grammar_masks = gr->masks;
    st->grammar_mask_ms = gr->mask_ms;
    st->grammar_ms = gr->ms;
    st->grammar_forced = gr->forced;
    st->grammar_draft_refused = gr->draft_refused;
    st->incomplete = st->stop != TERN_GEN_STOP_EOG && st->stop != TERN_GEN_STOP_DONE &&
                     !tern_grammar_matcher_is_complete(gr->m);
}
