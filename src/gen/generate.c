/* generate.c — the generation loop (public API: include/tern.h "generation").
 *
 * A generator pairs a context with a record of the token ids whose KV the context holds
 * (hist[0..n_hist)). Each tern_generate call finds the longest common prefix between that
 * record and the new prompt, rewinds the KV cache to it with tern_kv_truncate and decodes only
 * the rest, so a chat that re-renders the whole conversation each turn pays for the new turn
 * alone. The record is trusted only as far as the KV cache still reaches: if someone else
 * truncated the cache, the record is cut to match; if the cache grew behind the generator's
 * back (positions it never recorded), the record is useless and the cache is emptied.
 *
 * With a draft (tern_generator_set_draft) the same loop speculates: each target pass decodes the
 * pending token together with up to k drafted ones and keeps what the verifier accepts (spec.h
 * shows one round); without one, every pass is a plain one-token step. The two share every
 * stop rule, so a run with a draft stops exactly where the plain run does.
 *
 * Everything is allocated in tern_generator_create and tern_generator_set_draft; the per-token
 * loop calls only the sampler, tern_decode (allocation-free), the draft source, the streaming
 * detokenizer and the caller's callbacks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gen_hook.h"
#include "gen/gen_out.h"
#include "gen/spec.h"
#include "util/check.h"
#include "sample/sampler.h"
#include "tern.h"
#include "util/error.h"

struct tern_generator {
    struct tern_context *ctx;
    const struct tern_tokenizer *tok;
    struct tern_detokenizer *detok;       /* plain pieces */
    struct tern_detokenizer *detok_special; /* with control tokens' text */
    int32_t *hist;                        /* n_ctx entries */
    int n_hist;
    int n_ctx;
    struct tern_prefix_cache *pc;         /* optional, not owned (tern_generator_set_prefix_cache) */
    int n_vocab;                          /* the model's logits width */
    struct spec_verifier ver;             /* p (n_vocab) with a draft, masked (n_vocab) with a hook */
    struct gen_token_hook hook;           /* gen_generator_set_hook; used when hook.mask or .accept */
    struct tern_draft *draft;             /* optional, not owned (tern_generator_set_draft) */
    int32_t *batch;                       /* (GEN_MAX_PENDING + draft n_max) pending tokens + drafted ones */
    int32_t forced[GEN_MAX_PENDING];      /* forced tokens found while verifying drafts */
    struct gen_grammar gram;              /* tern_gen_params.grammar's matcher and counters */
    struct spec_ctl ctl;                  /* the draft length controller, kept across calls */
    int rollback_hist[101];               /* rounds by percent of drafts rejected (this call) */
};

void tern_generator_set_prefix_cache(struct tern_generator *g, struct tern_prefix_cache *pc)
{
    g->pc = pc;
}

struct tern_gen_params tern_gen_default_params(void)
{
    return (struct tern_gen_params){.max_tokens = 256, .ignore_eog = false, .show_special = false};
}

const char *tern_gen_stop_name(enum tern_gen_stop s)
{
    switch (s) {
    case TERN_GEN_STOP_EOG: return "eog";
    case TERN_GEN_STOP_MAX_TOKENS: return "max_tokens";
    case TERN_GEN_STOP_CALLBACK: return "callback";
    case TERN_GEN_STOP_CONTEXT_FULL: return "context_full";
    case TERN_GEN_STOP_DONE: return "done";
    }
    return "unknown";
}

tern_status tern_generator_create(struct tern_context *ctx, const struct tern_tokenizer *tok,
                                  struct tern_generator **out)
{
    if (!ctx || !tok || !out) return tern_fail(TERN_ERR_ARG, "generator: context, tokenizer and out are required");
    struct tern_generator *g = calloc(1, sizeof *g);
    if (!g) return tern_fail(TERN_ERR_NOMEM, "generator: out of memory");
    g->ctx = ctx;
    g->tok = tok;
    g->n_ctx = tern_context_n_ctx(ctx);
    g->n_vocab = tern_model_n_vocab(tern_context_model(ctx));
    g->ver.n_vocab = g->n_vocab;
    g->hist = malloc((size_t)(g->n_ctx > 0 ? g->n_ctx : 1) * sizeof *g->hist);
    g->batch = malloc(GEN_MAX_PENDING * sizeof *g->batch);
    if (!g->hist || !g->batch) {
        free(g->batch);
        free(g->hist);
        int n_ctx = g->n_ctx;
        free(g);
        return tern_fail(TERN_ERR_NOMEM, "generator: out of memory for %d token ids", n_ctx);
    }
    tern_status st = tern_detokenizer_create(tok, 0, &g->detok);
    if (!st) st = tern_detokenizer_create(tok, TERN_PIECE_SPECIAL, &g->detok_special);
    if (st) {
        tern_generator_free(g);
        return tern_fail_prefix(st, "generator: ");
    }
    /* Tokens already in the cache are unknown to us: start from an empty cache so the record
     * and the cache agree. */
    g->n_hist = 0;
    *out = g;
    return TERN_OK;
}

void tern_generator_free(struct tern_generator *g)
{
    if (!g) return;
    tern_detokenizer_free(g->detok);
    tern_detokenizer_free(g->detok_special);
    if (g->draft) g->draft->in_use = false;
    free(g->batch);
    gen_grammar_free(&g->gram);
    free(g->ver.p);
    free(g->ver.masked);
    free(g->hist);
    free(g);
}

const int32_t *tern_generator_tokens(const struct tern_generator *g, int *n)
{
    *n = g->n_hist;
    return g->hist;
}

void tern_generator_reset(struct tern_generator *g)
{
    g->n_hist = 0;
    tern_status_ignore(tern_kv_truncate(g->ctx, 0)); /* to 0: cannot fail */
}

tern_status tern_generator_set_draft(struct tern_generator *g, struct tern_draft *d)
{
    if (!g) return tern_fail(TERN_ERR_ARG, "generator: NULL");
    if (d && d->target != tern_context_model(g->ctx))
        return tern_fail(TERN_ERR_ARG, "generator: the draft was made for another model than the "
                         "generator's context runs");
    if (d && d->in_use && g->draft != d)
        return tern_fail(TERN_ERR_ARG, "generator: the draft already serves another generator");
    if (d) {
        int32_t *batch = realloc(g->batch, sizeof(int32_t) * (size_t)(GEN_MAX_PENDING + d->n_max));
        if (batch) g->batch = batch;
        float *p = g->ver.p ? g->ver.p : malloc(sizeof(float) * (size_t)g->n_vocab);
        if (p) g->ver.p = p;
        if (!batch || !p) return tern_fail(TERN_ERR_NOMEM, "generator: out of memory for the verify scratch");
        if (d->src->ops->prepare) {
            tern_status st = d->src->ops->prepare(d->src, g->n_ctx);
            if (st) return tern_fail_prefix(st, "generator: ");
        }
        if (d->src->ops->attach) {
            tern_status st = d->src->ops->attach(d->src, g->ctx);
            if (st) return tern_fail_prefix(st, "generator: ");
        }
    }
    if (g->draft) g->draft->in_use = false;
    g->draft = d;
    if (d) {
        d->in_use = true;
        /* before anything is measured, a drafter's step is guessed from its share of the bytes */
        const double ratio = d->drafter ? (double)tern_model_get_info(d->drafter)->weight_bytes /
                                              (double)tern_model_get_info(d->target)->weight_bytes
                                        : d->cost_ratio;
        spec_ctl_init(&g->ctl, d->n_min, d->n_max, d->src->ops->costly, ratio);
        if (d->catch_ratio > 0) spec_ctl_set_catch_ratio(&g->ctl, d->catch_ratio);
    }
    return TERN_OK;
}

tern_status gen_generator_set_hook(struct tern_generator *g, const struct gen_token_hook *h)
{
    if (h && (h->mask || h->accept)) {
        if (!g->ver.masked && !(g->ver.masked = malloc(sizeof(float) * (size_t)g->n_vocab)))
            return tern_fail(TERN_ERR_NOMEM, "generator: out of memory for the mask scratch");
        g->hook = *h;
        g->ver.hook = &g->hook;
    } else {
        g->ver.hook = NULL;
    }
    return TERN_OK;
}

/* Pass non-empty text to the callback; true if it asked to stop. */
static bool emit(tern_piece_fn fn, void *user, const char *text, size_t len)
{
    return fn && len > 0 && fn(text, len, user) != 0;
}

/* Percentile q (0..1) of the per-round rollback shares, from the histogram. */
static double hist_percentile(const int *h, int rounds, double q)
{
    if (rounds == 0) return 0;
    const int want = (int)ceil(q * rounds);
    int seen = 0;
    for (int i = 0; i <= 100; i++)
        if ((seen += h[i]) >= (want > 0 ? want : 1)) return i / 100.0;
    return 1.0;
}

tern_status tern_generate(struct tern_generator *g, struct tern_sampler *s, const int32_t *prompt,
                          int n, const struct tern_gen_params *p, tern_piece_fn on_piece,
                          void *user, struct tern_gen_stats *stats)
{
    if (!g || !s || (!prompt && n > 0)) return tern_fail(TERN_ERR_ARG, "generate: generator, sampler and prompt are required");
    if (n <= 0) return tern_fail(TERN_ERR_ARG, "generate: the prompt is empty (%d tokens); at least one token is needed", n);
    struct tern_gen_params prm = p ? *p : tern_gen_default_params();
    if (prm.max_tokens < 0) return tern_fail(TERN_ERR_ARG, "generate: max_tokens %d is negative", prm.max_tokens);
    if (n > g->n_ctx)
        return tern_fail(TERN_ERR_RANGE, "generate: the prompt has %d tokens but the context holds %d "
                         "(use a larger context size)", n, g->n_ctx);
    int n_vocab = tern_tokenizer_n_vocab(g->tok);
    for (int i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= n_vocab)
            return tern_fail(TERN_ERR_ARG, "generate: prompt token %d at index %d is outside the "
                             "vocabulary (0..%d)", prompt[i], i, n_vocab - 1);

    if (prm.grammar) {
        struct tern_grammar_info gi;
        tern_grammar_get_info(prm.grammar, &gi);
        if (gi.n_vocab != n_vocab)
            return tern_fail(TERN_ERR_ARG, gi.n_vocab ? "generate: the grammar was compiled for a vocabulary of %d "
                             "tokens, the model has %d (compile it against this model's tokenizer)"
                             : "generate: the grammar was compiled without a vocabulary (%d tokens); the model has %d",
                             gi.n_vocab, n_vocab);
    }
    struct tern_gen_stats st = {.n_prompt = n, .stop = TERN_GEN_STOP_MAX_TOKENS};
    double t0 = gen_now_ms();

    /* Reconcile the record with the cache, then find the reusable prefix. The last prompt
     * token is always decoded: its logits are what we sample from. */
    int kv = tern_kv_n_pos(g->ctx);
    if (kv > g->n_hist) g->n_hist = 0;
    else if (kv < g->n_hist) g->n_hist = kv;
    int common = 0;
    while (common < g->n_hist && common < n - 1 && g->hist[common] == prompt[common]) common++;
    /* a recurrent model (qwen35) keeps its state only at some positions: reuse less, or none */
    if (!tern_kv_seq_can_truncate(g->ctx, 0, common)) common = 0;
    tern_status rc;
    if (g->pc && (common == 0 || tern_prefix_cache_match(g->pc, prompt, n) > common)) {
        /* The process-wide prefix cache knows more of this prompt than the context holds (a
         * first turn, or a conversation seen before a restart): restore from it, decode the
         * rest, and let it store the new blocks. */
        int reused = 0;
        rc = tern_prefix_cache_prefill(g->pc, g->ctx, prompt, n, &reused);
        common = reused;
    } else {
        rc = tern_kv_truncate(g->ctx, common);
        if (rc) return tern_fail_prefix(rc, "generate: rewinding the KV cache to %d: ", common);
        g->n_hist = common;
        rc = tern_decode(g->ctx, prompt + common, n - common, common, TERN_LOGITS_LAST);
    }
    if (rc) {
        /* the cache may hold part of the batch: forget it all rather than guess */
        tern_generator_reset(g);
        return tern_fail_prefix(rc, "generate: prompt tokens %d..%d: ", common, n - 1);
    }
    memcpy(g->hist, prompt, (size_t)n * sizeof *prompt); /* the prefix-cache path replaced all */
    g->n_hist = n;
    st.n_reused = common;
    st.n_prompt_decoded = n - common;
    double t1 = gen_now_ms();
    st.prompt_ms = t1 - t0;

    tern_sampler_reset(s);
    for (int i = 0; i < n; i++) tern_sampler_accept(s, prompt[i]);
    struct tern_detokenizer *d = prm.show_special ? g->detok_special : g->detok;
    tern_detokenizer_reset(d);
    if ((rc = gen_out_preserve(d, prm.preserve, prm.n_preserve, prm.grammar, "generate"))) return rc;
    if (prm.grammar && !g->ver.masked && !(g->ver.masked = malloc(sizeof(float) * (size_t)g->n_vocab)))
        return tern_fail(TERN_ERR_NOMEM, "generate: out of memory for the mask scratch");
    struct gen_reason rs;
    if ((rc = gen_reason_init(&rs, &prm.reasoning, "generate"))) return rc;
    if ((rc = gen_grammar_begin(&g->gram, prm.grammar))) return rc;
    g->ver.gr = prm.grammar ? &g->gram : NULL;
    struct gen_out r = {.tok = g->tok, .ver = &g->ver, .sampler = s, .d = d, .on_token = prm.on_token,
                        .on_piece = on_piece, .user = user, .ignore_eog = prm.ignore_eog,
                        .max_tokens = prm.max_tokens, .n_ctx = g->n_ctx, .st = &st, .t0 = t0, .t_first = t1,
                        .rs = rs};
    gen_out_reason_start(&r);

    /* Speculation set-up: greedy verification must give one-token bits, so where the kernels
     * are not batch-invariant the verify passes run with exact batches. Passes of several tokens
     * without a draft (forced tokens) do too, so a constrained greedy run gives the same tokens
     * with and without a draft. */
    struct tern_draft *dr = g->draft;
    struct tern_sampler_params sp;
    sample_get_params(s, &sp);
    const bool greedy = sp.temperature == 0.0f;
    const bool exact_needed = greedy && !tern_model_batch_invariant(tern_context_model(g->ctx));
    if (dr && (rc = dr->src->ops->begin(dr->src, &sp))) {
        tern_fail_prefix(rc, "generate: draft: ");
        dr = NULL;
    }
    if (dr) spec_ctl_begin_generation(&g->ctl, SPEC_GEN_MARGIN);
    memset(g->rollback_hist, 0, sizeof g->rollback_hist);
    const int n_batch = tern_context_n_batch(g->ctx);
    double plain_ms = 0;
    int plain_tokens = 0;

    /* pend[0..np): chosen and handed over, not yet in the KV cache (positions n_hist..) */
    int32_t *pend = g->batch;
    int np = 0;
    const int pend_cap = n_batch < GEN_MAX_PENDING ? n_batch : GEN_MAX_PENDING;
    bool ended = prm.max_tokens == 0;
    if (!rc && !ended) {
        const float *logits = tern_context_logits(g->ctx, n - common - 1);
        if (!logits) rc = tern_fail(TERN_ERR_ARG, "generate: no logits after position %d", g->n_hist - 1);
        else ended = gen_out_choose(&r, logits, pend, &np, g->n_hist, pend_cap, &rc);
        if (dr) spec_ctl_produced(&g->ctl, np); /* the first token(s), from the prompt's pass */
    }
    /* Each iteration: one target pass puts the pending tokens in the cache together with k
     * drafted ones (k = 0: a plain step) and yields the next choice. */
    while (!rc && !ended) {
        int k = 0, cls = 0;
        double t_draft = 0, ta = gen_now_ms();
        if (dr && !gen_out_reasoning(&r)) {
            int k_cap = prm.max_tokens - st.n_generated;    /* every draft could be shown */
            if (k_cap > g->n_ctx - g->n_hist - np) k_cap = g->n_ctx - g->n_hist - np;
            if (k_cap > n_batch - np) k_cap = n_batch - np;
            if (k_cap > dr->n_max) k_cap = dr->n_max;
            const bool costly = dr->src->ops->costly;
            /* the history the draft continues ends with the pending tokens */
            memcpy(g->hist + g->n_hist, pend, (size_t)np * sizeof *pend);
            /* the lag scans what the drafter holds: not worth it for a step that stays plain */
            const bool resting = costly && spec_ctl_resting(&g->ctl);
            const int lag = resting ? 0 : dr->src->ops->lag(dr->src, g->hist, g->n_hist + np);
            int lag_max = lag;
            int want = costly ? spec_ctl_choose(&g->ctl, k_cap, 0, lag, &lag_max) : k_cap;
            if (want >= dr->n_min) {
                /* a lookup under a grammar drafts through the forced syntax (gen_grammar_draft) */
                const bool chained = prm.grammar && !costly;
                rc = chained ? gen_grammar_draft(&g->gram, dr->src, g->hist, g->n_hist + np, want, pend + np, &k, &cls)
                             : dr->src->ops->propose(dr->src, g->hist, g->n_hist + np, want, lag_max, pend + np,
                                                     &k, &cls);
                if (rc) {
                    rc = tern_fail_prefix(rc, "generate: draft: ");
                    break;
                }
                if (!costly && k >= dr->n_min) {
                    int unused;
                    const int c = spec_ctl_choose(&g->ctl, k, cls, 0, &unused);
                    k = c < k ? c : k;
                }
                /* drafts the grammar refuses would only be rejected after costing the pass */
                const int offered = k;
                if (prm.grammar && !chained && k > 0) k = gen_grammar_check_drafts(&g->gram, pend + np, k);
                if (k < dr->n_min) k = 0;
                t_draft = (gen_now_ms() - ta) / 1e3;
                /* a drafter's proposal the grammar refused at once is a rejected draft, and what
                 * making it cost comes out of the credit: left out, a drafter whose first token
                 * the grammar keeps refusing (inside a string: a quote, a newline) was asked again
                 * every step for free, 25 % slower over a 256-token answer with no round at all */
                if (k == 0 && offered > 0 && costly) spec_ctl_refused(&g->ctl, cls, t_draft);
            }
        }
        const double tb = gen_now_ms();
        const int nb = np + k;
        TERN_ASSERT(np >= 1 && np <= pend_cap && k >= 0 && (k == 0 || k <= dr->n_max) && nb <= n_batch);
        TERN_ASSERT(g->n_hist + nb <= g->n_ctx, "pending tokens and drafts fit the context");
        TERN_ASSERT(tern_kv_n_pos(g->ctx) == g->n_hist, "the cache holds the history, nothing pending");
        const bool exact = nb > 1 && exact_needed;
        if (exact) tern_context_set_exact_batches(g->ctx, true);
        rc = tern_decode(g->ctx, pend, nb, g->n_hist, k > 0 ? TERN_LOGITS_ALL : TERN_LOGITS_LAST);
        if (exact) tern_context_set_exact_batches(g->ctx, false);
        if (rc) {
            tern_generator_reset(g);
            rc = tern_fail_prefix(rc, "generate: generated token %d: ", st.n_generated - 1);
            break;
        }
        TERN_ASSERT(tern_kv_n_pos(g->ctx) == g->n_hist + nb, "the pass decoded every pending token and draft");
        memcpy(g->hist + g->n_hist, pend, (size_t)np * sizeof *pend);
        g->n_hist += np;
        if (k == 0) {
            const int done = np;
            ended = gen_out_choose(&r, tern_context_logits(g->ctx, np - 1), pend, &np, g->n_hist, pend_cap, &rc);
            const double tc = gen_now_ms();
            plain_ms += tc - tb;
            plain_tokens += done;
            if (dr) {
                st.spec_plain_steps++;
                if (done == 1) spec_ctl_update(&g->ctl, 0, 0, 0, 0, 0, 0, (tc - tb) / 1e3);
                spec_ctl_produced(&g->ctl, done);
            }
            continue;
        }
        /* Verify row by row (row np-1+i holds the distribution at draft i's position), handing
         * each kept draft over at once, so a draft that ends generation is the last token anyone
         * (caller, grammar, sampler) hears of, as in plain decoding. A position where the grammar
         * forces tokens is decided as gen_out_choose() decides it, without a draw: the drafts
         * that are those forced tokens are kept (they are in the cache already) and verifying
         * goes on after them; forced tokens past the drafts become the pending ones and the
         * round ends there. */
        const int32_t *drafts = pend + np;
        const int r0 = np - 1;
        const float *q = dr->src->q_valid ? dr->src->q : NULL;
        const size_t nv = (size_t)g->n_vocab;
        int32_t next = 0;
        int a = 0, nf = 0;
        bool rejected = false;
        const int h0 = g->n_hist; /* draft i sits at position h0 + i */
        for (;;) {
            /* forced tokens go to g->forced: pend still holds the drafts being checked */
            if (prm.grammar && (nf = gen_grammar_forced(&g->gram, g->forced, pend_cap)) > 0) {
                ended = gen_out_forced_drafts(&r, drafts, k, &a, g->forced, &nf, g->hist, h0, &rc);
                g->n_hist = h0 + a;
                if (ended) { /* counted as kept, not recorded: as a drafted token that ends below */
                    a++;
                    break;
                }
                if (nf == 0) continue;
                break;
            }
            if (a == k) break;
            const int32_t dt = drafts[a];
            if (!spec_check(&g->ver, s, tern_context_logits(g->ctx, r0 + a), dt, q ? q + (size_t)a * nv : NULL, &next)) {
                rejected = true;
                break;
            }
            a++;
            ended = gen_out_deliver(&r, dt, g->n_hist, true, &rc); /* the draft is in the cache already */
            if (ended) break;
            g->hist[g->n_hist++] = dt;
        }
        np = 0;
        if (nf > 0) {
            memcpy(pend, g->forced, (size_t)nf * sizeof *pend);
            ended = gen_out_hand_forced(&r, pend, &np, g->n_hist, nf, &rc);
        } else if (!ended) {
            if (!rejected) next = spec_sample(&g->ver, s, tern_context_logits(g->ctx, r0 + k));
            pend[np++] = next;
            ended = gen_out_deliver(&r, next, g->n_hist, true, &rc) ||
                    gen_out_add_forced(&r, pend, &np, g->n_hist, pend_cap, &rc);
        }
        const double tc = gen_now_ms();
        /* accepted <= drafted also keeps the rollback histogram's index in 0..100 */
        TERN_ASSERT(a >= 0 && a <= k, "accepted <= drafted");
        TERN_ASSERT(g->n_hist >= h0 && g->n_hist <= h0 + a, "the history keeps at most the accepted drafts");
        st.spec_rounds++;
        st.spec_drafted += k;
        st.spec_accepted += a;
        st.spec_draft_ms += t_draft * 1e3;
        st.spec_verify_ms += tc - tb;
        /* drafts not looked at because forced tokens came first count as rolled back */
        g->rollback_hist[(100 * (k - a) + k / 2) / k]++;
        spec_ctl_update(&g->ctl, cls, k, a, t_draft, dr->src->t_sync, dr->src->n_sync, (tc - tb) / 1e3);
        spec_ctl_produced(&g->ctl, a + np); /* kept drafts, and the next or forced tokens */
        /* roll back what is not kept: rejected drafts, and a kept one that ended generation; the
         * pending tokens of the next pass are out of the cache too */
        tern_status trc = tern_kv_truncate(g->ctx, g->n_hist);
        if (!rc && trc) rc = tern_fail_prefix(trc, "generate: rolling back to %d: ", g->n_hist);
        TERN_ASSERT(trc || tern_kv_n_pos(g->ctx) == g->n_hist, "KV positions after rollback equal the accepted length");
    }
    if (!rc && tern_kv_n_pos(g->ctx) > g->n_hist) rc = tern_kv_truncate(g->ctx, g->n_hist);
    if (!rc && prm.grammar && g->gram.failed)
        rc = tern_fail(g->gram.fail_status, "generate: grammar matcher: %s", g->gram.fail_msg);
    const char *text;
    size_t len;
    if (!rc && tern_detokenizer_flush(d, &text, &len) == TERN_OK && !r.stop)
        emit(on_piece, user, text, len);
    double t2 = gen_now_ms();
    st.gen_ms = t2 - t1;
    if (st.n_generated > 1 && t2 > r.t_first) st.gen_tps = (st.n_generated - 1) / ((t2 - r.t_first) / 1e3);
    if (dr) {
        st.spec_accept_rate = st.spec_drafted ? (double)st.spec_accepted / st.spec_drafted : 0;
        st.spec_mean_accepted = st.spec_rounds ? (double)st.spec_accepted / st.spec_rounds : 0;
        st.spec_rollback_p50 = hist_percentile(g->rollback_hist, st.spec_rounds, 0.50);
        st.spec_rollback_p95 = hist_percentile(g->rollback_hist, st.spec_rounds, 0.95);
        st.spec_plain_tps = plain_ms > 0 ? plain_tokens / (plain_ms / 1e3) : 0;
        st.spec_off_periods = g->ctl.n_off;
        st.spec_exact = greedy && (exact_needed || tern_model_batch_invariant(tern_context_model(g->ctx)));
    }
    if (prm.grammar) gen_out_grammar_stats(&g->gram, &st);
    if (stats) *stats = st;
    return rc;
}
