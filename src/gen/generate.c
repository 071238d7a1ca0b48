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
 * Everything is allocated in tern_generator_create; the per-token loop calls only
 * tern_sampler_sample, tern_decode (n = 1, allocation-free), the streaming detokenizer and
 * the caller's callback. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
};

void tern_generator_set_prefix_cache(struct tern_generator *g, struct tern_prefix_cache *pc)
{
    g->pc = pc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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
    g->hist = malloc((size_t)(g->n_ctx > 0 ? g->n_ctx : 1) * sizeof *g->hist);
    if (!g->hist) {
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
    tern_kv_truncate(g->ctx, 0);
}

/* Pass non-empty text to the callback; true if it asked to stop. */
static bool emit(tern_piece_fn fn, void *user, const char *text, size_t len)
{
    return fn && len > 0 && fn(text, len, user) != 0;
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

    struct tern_gen_stats st = {.n_prompt = n, .stop = TERN_GEN_STOP_MAX_TOKENS};
    double t0 = now_ms();

    /* Reconcile the record with the cache, then find the reusable prefix. The last prompt
     * token is always decoded: its logits are what we sample from. */
    int kv = tern_kv_n_pos(g->ctx);
    if (kv > g->n_hist) g->n_hist = 0;
    else if (kv < g->n_hist) g->n_hist = kv;
    int common = 0;
    while (common < g->n_hist && common < n - 1 && g->hist[common] == prompt[common]) common++;
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
    double t1 = now_ms();
    st.prompt_ms = t1 - t0;

    tern_sampler_reset(s);
    for (int i = 0; i < n; i++) tern_sampler_accept(s, prompt[i]);
    struct tern_detokenizer *d = prm.show_special ? g->detok_special : g->detok;
    tern_detokenizer_reset(d);

    const float *logits = tern_context_logits(g->ctx, n - common - 1);
    double t_first = t1;
    const char *text;
    size_t len;
    bool stop = false;
    for (int i = 0; i < prm.max_tokens && !stop; i++) {
        if (!logits) { rc = tern_fail(TERN_ERR_ARG, "generate: no logits after position %d", g->n_hist - 1); break; }
        int32_t tok = tern_sampler_sample(s, logits);
        st.n_generated++;
        if (i == 0) {
            t_first = now_ms();
            st.ttft_ms = t_first - t0;
        }
        if (prm.on_token && prm.on_token(tok, user) != 0) {
            st.stop = TERN_GEN_STOP_CALLBACK;
            stop = true;
        }
        if (!prm.ignore_eog && tern_token_is_eog(g->tok, tok)) {
            if (!stop) st.stop = TERN_GEN_STOP_EOG;
            break;
        }
        if ((rc = tern_detokenizer_push(d, tok, &text, &len))) break;
        if (!stop && emit(on_piece, user, text, len)) {
            st.stop = TERN_GEN_STOP_CALLBACK;
            stop = true;
        }
        if (i + 1 == prm.max_tokens) break;
        /* The token goes into the cache so the next turn can reuse it; a full cache ends here. */
        if (g->n_hist >= g->n_ctx) {
            if (!stop) st.stop = TERN_GEN_STOP_CONTEXT_FULL;
            break;
        }
        if (stop) break;
        if ((rc = tern_decode(g->ctx, &tok, 1, g->n_hist, TERN_LOGITS_LAST))) {
            tern_generator_reset(g);
            rc = tern_fail_prefix(rc, "generate: generated token %d: ", i);
            break;
        }
        g->hist[g->n_hist++] = tok;
        logits = tern_context_logits(g->ctx, 0);
    }
    if (!rc && tern_detokenizer_flush(d, &text, &len) == TERN_OK && !stop)
        emit(on_piece, user, text, len);
    double t2 = now_ms();
    st.gen_ms = t2 - t1;
    if (st.n_generated > 1 && t2 > t_first) st.gen_tps = (st.n_generated - 1) / ((t2 - t_first) / 1e3);
    if (stats) *stats = st;
    return rc;
}
