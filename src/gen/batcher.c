/* batcher.c — continuous batching over a multi-sequence context (public API: include/tern.h
 * "batched generation"); the scheduler core the server (src/server) drives.
 *
 * Each sequence of the context is a slot. A slot's record toks[0..n_toks) is the token ids its
 * sequence's KV holds, plus, while it generates, the one sampled token still waiting to be
 * decoded (`pending`, always toks[n_toks-1]). A free slot's record equals its KV exactly, so a
 * later prompt can reuse whatever prefix it shares with it. One step builds one batch: the
 * pending token of every generating slot first (they must not wait), then prompt chunks of the
 * prefilling slots in the order they were added, within the step's prefill budget; logits are
 * asked only for rows that will be sampled (a generating slot's token, or the last prompt token
 * of a prompt completed in this step).
 *
 * Everything is allocated in tern_batcher_create; a step calls only tern_decode_batch, the
 * samplers, the matchers, the detokenizers and the callbacks. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern.h"
#include "util/error.h"

struct slot {
    bool active;
    int32_t *toks;               /* (n_ctx) record, see above */
    int n_toks;
    int n_prompt;
    bool has_pending;            /* toks[n_toks-1] is sampled, not yet decoded */
    struct tern_batch_request r; /* the request (prompt pointer not used after add) */
    struct tern_detokenizer *detok;
    struct tern_gen_stats st;
    double t0, t_prompt, t_first;
    uint64_t admitted;           /* add order: prompts are prefilled first come, first served */
    uint64_t last_used;          /* when it last finished: the least recently used free slot
                                    is overwritten first */
    int row;                     /* batch row sampled for it in this step, -1 = none */
};

struct tern_batcher {
    struct tern_context *ctx;
    const struct tern_tokenizer *tok;
    struct tern_batcher_params p;
    int n_slots, n_ctx, n_batch, n_vocab, n_active;
    struct slot *slots;          /* (n_slots) */
    int32_t *b_tok, *b_seq;      /* (n_batch) the step's batch */
    bool *b_logits;              /* (n_batch) */
    int *order;                  /* (n_slots) prefilling slots in add order */
    float *masked;               /* (n_vocab) logits after a grammar mask */
    uint64_t tick;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct tern_batcher_params tern_batcher_default_params(void)
{
    return (struct tern_batcher_params){.n_prefill = 0, .share_prefix = true};
}

struct tern_batch_request tern_batch_request_default(void)
{
    return (struct tern_batch_request){.max_tokens = 256};
}

tern_status tern_batcher_create(struct tern_context *ctx, const struct tern_tokenizer *tok,
                                const struct tern_batcher_params *p, struct tern_batcher **out)
{
    if (!ctx || !tok || !out) return tern_fail(TERN_ERR_ARG, "batcher: context, tokenizer and out are required");
    struct tern_batcher_params bp = p ? *p : tern_batcher_default_params();
    if (bp.n_prefill < 0) return tern_fail(TERN_ERR_ARG, "batcher: n_prefill %d is negative", bp.n_prefill);
    struct tern_batcher *b = calloc(1, sizeof *b);
    if (!b) return tern_fail(TERN_ERR_NOMEM, "batcher: out of memory");
    b->ctx = ctx;
    b->tok = tok;
    b->p = bp;
    b->n_slots = tern_context_n_seq(ctx);
    b->n_ctx = tern_context_n_ctx(ctx);
    b->n_batch = tern_context_n_batch(ctx);
    b->n_vocab = tern_model_n_vocab(tern_context_model(ctx));
    if (b->p.n_prefill == 0) b->p.n_prefill = 256;
    if (b->p.n_prefill > b->n_batch) b->p.n_prefill = b->n_batch;
    b->slots = calloc((size_t)b->n_slots, sizeof *b->slots);
    b->b_tok = malloc(sizeof(int32_t) * (size_t)b->n_batch);
    b->b_seq = malloc(sizeof(int32_t) * (size_t)b->n_batch);
    b->b_logits = malloc(sizeof(bool) * (size_t)b->n_batch);
    b->order = malloc(sizeof(int) * (size_t)b->n_slots);
    b->masked = malloc(sizeof(float) * (size_t)b->n_vocab);
    tern_status st = (b->slots && b->b_tok && b->b_seq && b->b_logits && b->order && b->masked)
                         ? TERN_OK
                         : tern_fail(TERN_ERR_NOMEM, "batcher: out of memory");
    for (int i = 0; !st && i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        s->row = -1;
        if (!(s->toks = malloc(sizeof(int32_t) * (size_t)b->n_ctx)))
            st = tern_fail(TERN_ERR_NOMEM, "batcher: out of memory for %d x %d token ids",
                           b->n_slots, b->n_ctx);
        else if ((st = tern_detokenizer_create(tok, 0, &s->detok)))
            st = tern_fail_prefix(st, "batcher: ");
        else
            st = tern_kv_seq_truncate(ctx, i, 0); /* the records start empty, so must the KV */
    }
    if (st) {
        tern_batcher_free(b);
        return st;
    }
    *out = b;
    return TERN_OK;
}

void tern_batcher_free(struct tern_batcher *b)
{
    if (!b) return;
    for (int i = 0; b->slots && i < b->n_slots; i++) {
        free(b->slots[i].toks);
        tern_detokenizer_free(b->slots[i].detok);
    }
    free(b->slots);
    free(b->b_tok);
    free(b->b_seq);
    free(b->b_logits);
    free(b->order);
    free(b->masked);
    free(b);
}

int tern_batcher_n_active(const struct tern_batcher *b) { return b->n_active; }
int tern_batcher_n_slots(const struct tern_batcher *b) { return b->n_slots; }

static int common_prefix(const int32_t *a, int na, const int32_t *c, int nc)
{
    int n = na < nc ? na : nc, i = 0;
    while (i < n && a[i] == c[i]) i++;
    return i;
}

/* Positions of slot i's KV that hold its record (a generating slot's pending token is not). */
static int slot_kv(const struct tern_batcher *b, int i)
{
    const int kv = tern_kv_seq_n_pos(b->ctx, i);
    return kv < b->slots[i].n_toks ? kv : b->slots[i].n_toks;
}

tern_status tern_batcher_add(struct tern_batcher *b, const struct tern_batch_request *r, int *slot_out)
{
    if (!r || !r->prompt || r->n_prompt <= 0 || !r->sampler || !r->on_done)
        return tern_fail(TERN_ERR_ARG, "batcher: a request needs a prompt, a sampler and on_done");
    if (r->n_prompt >= b->n_ctx)
        return tern_fail(TERN_ERR_ARG, "batcher: prompt of %d tokens leaves no room to generate "
                         "in a context of %d", r->n_prompt, b->n_ctx);
    if (r->max_tokens <= 0) return tern_fail(TERN_ERR_ARG, "batcher: max_tokens %d", r->max_tokens);
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= b->n_vocab)
            return tern_fail(TERN_ERR_ARG, "batcher: prompt token %d at index %d is outside the "
                             "vocabulary (0..%d)", r->prompt[i], i, b->n_vocab - 1);
    /* The free slot sharing the longest prefix (its KV is reused in place), else the least
     * recently used one. At most n_prompt - 1 tokens are reused: the last one is decoded for
     * its logits. */
    const int cap = r->n_prompt - 1;
    int best = -1, best_lcp = -1;
    for (int i = 0; i < b->n_slots; i++) {
        const struct slot *s = &b->slots[i];
        if (s->active) continue;
        int l = b->p.share_prefix ? common_prefix(s->toks, slot_kv(b, i), r->prompt, cap) : 0;
        if (l > best_lcp || (l == best_lcp && s->last_used < b->slots[best].last_used)) {
            best = i;
            best_lcp = l;
        }
    }
    if (best < 0) return tern_fail(TERN_ERR_RANGE, "batcher: all %d slots are busy", b->n_slots);
    /* Another slot (busy or free) may hold more of the prompt: copy its KV over. */
    int src = -1, src_lcp = best_lcp;
    for (int i = 0; b->p.share_prefix && i < b->n_slots; i++) {
        if (i == best) continue;
        int l = common_prefix(b->slots[i].toks, slot_kv(b, i), r->prompt, cap);
        if (l > src_lcp) {
            src = i;
            src_lcp = l;
        }
    }
    struct slot *s = &b->slots[best];
    int reused = best_lcp;
    tern_status st;
    if (src >= 0 && (st = tern_kv_seq_copy(b->ctx, src, best, src_lcp)) == TERN_OK) reused = src_lcp;
    else if ((st = tern_kv_seq_truncate(b->ctx, best, best_lcp)))
        return tern_fail_prefix(st, "batcher: ");
    memcpy(s->toks, r->prompt, sizeof(int32_t) * (size_t)r->n_prompt);
    s->n_toks = r->n_prompt;
    s->n_prompt = r->n_prompt;
    s->has_pending = false;
    s->r = *r;
    s->r.prompt = NULL;
    s->row = -1;
    s->admitted = ++b->tick;
    memset(&s->st, 0, sizeof s->st);
    s->st.n_prompt = r->n_prompt;
    s->st.n_reused = reused;
    s->st.n_prompt_decoded = r->n_prompt - reused;
    s->t0 = now_ms();
    s->t_prompt = s->t_first = 0;
    tern_detokenizer_reset(s->detok);
    tern_sampler_reset(r->sampler);
    for (int i = 0; i < r->n_prompt; i++) tern_sampler_accept(r->sampler, r->prompt[i]);
    s->active = true;
    b->n_active++;
    if (slot_out) *slot_out = best;
    return TERN_OK;
}

/* Leave the slot: release held-back text, make the record match the KV, tell the caller. */
static void finish(struct tern_batcher *b, int i, enum tern_gen_stop stop)
{
    struct slot *s = &b->slots[i];
    if (!s->active) return;
    const char *text;
    size_t len;
    if (tern_detokenizer_flush(s->detok, &text, &len) == TERN_OK && len > 0 && s->r.on_piece)
        s->r.on_piece(text, len, s->r.user);
    const double t = now_ms();
    s->st.stop = stop;
    if (s->t_prompt > 0) {
        s->st.prompt_ms = s->t_prompt - s->t0;
        s->st.gen_ms = t - s->t_prompt;
    } else {
        s->st.prompt_ms = t - s->t0;
    }
    if (s->st.n_generated >= 2 && t > s->t_first)
        s->st.gen_tps = (s->st.n_generated - 1) / ((t - s->t_first) / 1e3);
    const int kv = tern_kv_seq_n_pos(b->ctx, i);
    if (s->n_toks > kv) s->n_toks = kv;
    s->has_pending = false;
    s->active = false;
    s->last_used = ++b->tick;
    b->n_active--;
    s->r.on_done(&s->st, s->r.user);
}

void tern_batcher_cancel(struct tern_batcher *b, int slot)
{
    if (slot >= 0 && slot < b->n_slots) finish(b, slot, TERN_GEN_STOP_CALLBACK);
}

/* Hand over one sampled token; returns the stop reason, or -1 to keep generating. */
static int deliver(struct tern_batcher *b, int i, int32_t tok)
{
    struct slot *s = &b->slots[i];
    if (s->st.n_generated++ == 0) {
        s->t_first = now_ms();
        s->st.ttft_ms = s->t_first - s->t0;
    }
    if (s->r.on_token && s->r.on_token(tok, s->r.user) != 0) return TERN_GEN_STOP_CALLBACK;
    if (s->r.matcher && tern_grammar_matcher_accept(s->r.matcher, tok, NULL) != TERN_OK)
        return TERN_GEN_STOP_CALLBACK; /* cannot happen: the token was sampled under its mask */
    if (!s->r.ignore_eog && tern_token_is_eog(b->tok, tok)) return TERN_GEN_STOP_EOG;
    if (s->n_toks < b->n_ctx) {
        s->toks[s->n_toks++] = tok;
        s->has_pending = true;
    }
    const char *text;
    size_t len;
    if (tern_detokenizer_push(s->detok, tok, &text, &len) == TERN_OK && len > 0 && s->r.on_piece &&
        s->r.on_piece(text, len, s->r.user) != 0)
        return TERN_GEN_STOP_CALLBACK;
    if (s->r.matcher && tern_grammar_matcher_is_done(s->r.matcher)) return TERN_GEN_STOP_EOG;
    if (s->st.n_generated >= s->r.max_tokens) return TERN_GEN_STOP_MAX_TOKENS;
    /* decoding the token needs position n_toks - 1 < n_ctx, and a record entry for it */
    if (!s->has_pending || tern_kv_seq_n_pos(b->ctx, i) >= b->n_ctx) return TERN_GEN_STOP_CONTEXT_FULL;
    return -1;
}

tern_status tern_batcher_step(struct tern_batcher *b, struct tern_batcher_step_info *info)
{
    struct tern_batcher_step_info in = {0};
    int n = 0;
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        s->row = -1;
        if (!s->active || !s->has_pending) continue;
        s->row = n;
        b->b_tok[n] = s->toks[s->n_toks - 1];
        b->b_seq[n] = i;
        b->b_logits[n] = true;
        n++;
    }
    in.n_decode = n;
    /* prefilling slots, first come first served */
    int n_order = 0;
    for (int i = 0; i < b->n_slots; i++)
        if (b->slots[i].active && !b->slots[i].has_pending) b->order[n_order++] = i;
    for (int a = 1; a < n_order; a++)
        for (int c = a; c > 0 && b->slots[b->order[c]].admitted < b->slots[b->order[c - 1]].admitted; c--) {
            int t = b->order[c];
            b->order[c] = b->order[c - 1];
            b->order[c - 1] = t;
        }
    int budget = b->p.n_prefill < b->n_batch - n ? b->p.n_prefill : b->n_batch - n;
    for (int k = 0; k < n_order && budget > 0; k++) {
        const int i = b->order[k];
        struct slot *s = &b->slots[i];
        const int kv = tern_kv_seq_n_pos(b->ctx, i);
        int chunk = s->n_prompt - kv;
        if (chunk > budget) chunk = budget;
        for (int j = 0; j < chunk; j++) {
            b->b_tok[n] = s->toks[kv + j];
            b->b_seq[n] = i;
            b->b_logits[n] = false;
            n++;
        }
        budget -= chunk;
        in.n_prefill += chunk;
        if (kv + chunk == s->n_prompt) {
            b->b_logits[n - 1] = true;
            s->row = n - 1;
        }
    }
    in.n_tokens = n;
    if (n == 0) {
        if (info) *info = in;
        return TERN_OK;
    }
    const double t0 = now_ms();
    const struct tern_batch batch = {.n = n, .tokens = b->b_tok, .seq = b->b_seq, .logits = b->b_logits};
    tern_status st = tern_decode_batch(b->ctx, &batch);
    const double t1 = now_ms();
    in.forward_ms = t1 - t0;
    if (st) {
        for (int i = 0; i < b->n_slots; i++)
            if (b->slots[i].active) {
                finish(b, i, TERN_GEN_STOP_CALLBACK);
                in.n_finished++;
            }
        if (info) *info = in;
        return st;
    }
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        if (!s->active || s->row < 0) continue;
        if (!s->has_pending) s->t_prompt = t1; /* its prompt just completed */
        s->has_pending = false;
        const float *logits = tern_context_logits(b->ctx, s->row);
        int stop = -1;
        if (!logits) {
            stop = TERN_GEN_STOP_CALLBACK; /* cannot happen: the row asked for logits */
        } else if (s->r.matcher) {
            memcpy(b->masked, logits, sizeof(float) * (size_t)b->n_vocab);
            const double tm = now_ms();
            const int allowed = tern_grammar_matcher_apply(s->r.matcher, b->masked);
            in.mask_ms += now_ms() - tm;
            if (allowed == 0) stop = TERN_GEN_STOP_EOG;
            else stop = deliver(b, i, tern_sampler_sample(s->r.sampler, b->masked));
        } else {
            stop = deliver(b, i, tern_sampler_sample(s->r.sampler, logits));
        }
        if (stop >= 0) {
            finish(b, i, (enum tern_gen_stop)stop);
            in.n_finished++;
        }
    }
    in.sample_ms = now_ms() - t1;
    if (info) *info = in;
    return TERN_OK;
}
