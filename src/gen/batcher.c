/* batcher.c — continuous batching over a multi-sequence context (public API: include/tern.h
 * "batched generation"); the scheduler core the server (src/server) drives.
 *
 * Each sequence of the context is a slot. A slot's record toks[0..n_toks) is the token ids its
 * sequence's KV holds, plus, while it generates, the tokens chosen but not yet decoded (the last
 * n_pending of the record: one sampled token, and the grammar's forced tokens after it). A free
 * slot's record equals its KV exactly, so a later prompt can reuse whatever prefix it shares
 * with it. One step builds one batch: the pending tokens of every generating slot first (they
 * must not wait), then prompt chunks of the prefilling slots in the order they were added,
 * within the step's prefill budget; logits are asked only for rows that will be sampled (a
 * generating slot's last pending token, or the last token of a prompt completed in this step).
 *
 * What a slot does with its logits is the generator's own code (gen_out.c: masks through the
 * grammar, forced tokens, the stop rules; gen_grammar.c: the matcher), so a request gets the
 * tokens tern_generate gives it alone, constrained or not. With a prefix cache
 * (tern_batcher_set_prefix_cache) a prompt is restored from it when it holds more than any slot,
 * and every prompt (when its prefill completes) and answer (when it leaves) is stored in it.
 * Everything is allocated in tern_batcher_create and tern_batcher_add (a constrained request's
 * matcher); a step calls only tern_decode_batch, the samplers, the matchers, the detokenizers,
 * the callbacks and, with a prefix cache, its store (new blocks only, once per prompt).
 *
 * Speculative decoding: drafts of a generating slot ride in the same pass after its pending
 * token, from the slot's n-gram lookup or from a drafter model (batch_draft.c: a sequence of
 * the drafter's context per slot, drafting for all slots before the target's pass), and are
 * verified as tern_generate verifies them (see "drafting" below). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/batch_draft.h"
#include "gen/gen_out.h"
#include "kv/prefix_cache.h"
#include "sample/sampler.h"
#include "tern.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/error.h"

/* The draft controller's allowance (see "the controller"): each step size starts with 3 % of
 * CTL_START plain steps of credit, earns 3 % of every step it runs, and holds at most 3 % of
 * CTL_CAP; a request's acceptance forgets at CTL_FORGET per round, as spec_ctl's. */
enum { CTL_START = 256, CTL_CAP = 1024 };
#define CTL_FORGET 0.9

struct slot {
    bool active;
    int32_t *toks;               /* (n_ctx) record, see above */
    int n_toks;
    int n_prompt;
    uint64_t group;              /* isolation group of the request that wrote the record
                                    (tern_batch_request.cache_group): reused only by the same */
    int n_pending;               /* toks[n_toks - n_pending ..) chosen, not yet decoded */
    struct tern_batch_request r; /* the request (prompt pointer not used after add) */
    struct tern_detokenizer *detok;
    struct gen_grammar gram;     /* r.grammar's matcher (created at add, freed when it leaves) */
    struct spec_verifier ver;    /* masks through gram; masked is the batcher's scratch */
    struct gen_out out;          /* the request's output state (gen_out.h) */
    struct tern_gen_stats st;
    double t_prompt;
    uint64_t admitted;           /* add order: prompts are prefilled first come, first served */
    uint64_t last_used;          /* when it last finished: the least recently used free slot
                                    is overwritten first */
    int row;                     /* batch row sampled for it in this step, -1 = none */
    struct spec_source *src;     /* n-gram draft source (tern_batcher_params.n_draft), or NULL */
    bool model_drafts;           /* the drafter model serves this request (no grammar, no
                                    log-probs: they decode plainly) */
    int draft_skip;              /* steps the drafter leaves this request alone (backing off) */
    int draft_backoff;           /* the next such pause: doubles with every round that gave
                                    nothing (no confident draft, or none kept), up to 64 steps;
                                    1 after a round that kept a draft */
    double acc, tested;          /* drafts kept / tested in its rounds, forgetting 0.9 per round:
                                    the acceptance the controller expects of it */
    bool could_draft;            /* this step: it may draft (see ctl_step) */
    int32_t draft[SPEC_MAX_DRAFT]; /* this step's drafts: rows row + 1 .. row + n_draft */
    int n_draft;
    int kv_keep;                 /* after this step's sampling, truncate the KV to this (-1: no):
                                    truncating drops the context's logits, so it waits for every
                                    slot to have read its rows */
};

struct tern_batcher {
    struct tern_context *ctx;
    const struct tern_tokenizer *tok;
    struct tern_tokenizer *lookup_tok; /* the slots' lookups' own (their text matches tokenize
                                          continuations; steps run one at a time), or NULL */
    struct tern_batcher_params p;
    int n_slots, n_ctx, n_batch, n_vocab, n_active;
    int pend_cap;                /* most pending tokens per slot: all slots' fit one batch */
    struct slot *slots;          /* (n_slots) */
    int32_t *b_tok, *b_seq;      /* (n_batch) the step's batch */
    bool *b_logits;              /* (n_batch) */
    int *order;                  /* (n_slots) prefilling slots in add order */
    float *masked;               /* (n_vocab) logits after a grammar mask (slots sample in turn) */
    float *pdist;                /* (n_vocab) the verifier's distribution scratch (drafting) */
    int32_t pend[GEN_MAX_PENDING]; /* the tokens a slot chose in this step */
    struct tern_prefix_cache *pc;  /* optional, not owned (tern_batcher_set_prefix_cache) */
    struct batch_draft *bd;        /* a drafter model's sequences (tern_batcher_params.draft), or NULL */
    struct batch_draft_req *dreq;  /* (n_slots) its work in a step */
    struct spec_ctl *ctl;          /* (n_slots) with drafting: the draft controller of steps with
                                      m generating requests at [m - 1] (see "the controller") */
    double acc_all, tested_all;    /* acceptance over every request: a new one's prior */
    int last_k;                    /* the controller's last decision: steps with prompts follow it */
    bool ever_off;                 /* the controller has held drafting off at least once */
    batch_cost_fn cost;            /* test hook: modelled pass costs instead of CPU time */
    void *cost_user;
    uint64_t tick;
};

void tern_batcher_set_prefix_cache(struct tern_batcher *b, struct tern_prefix_cache *pc)
{
    b->pc = pc;
}

/* Give the cache the blocks of slot i's first n record tokens (its KV holds them). Best effort:
 * a full budget or no memory only means less reuse later. */
static void cache_store(struct tern_batcher *b, int i, int n)
{
    /* a block the cache cannot take (its budget) is simply not cached */
    if (b->pc && n > 0)
        tern_status_ignore(pc_store(b->pc, b->ctx, i, b->slots[i].group, b->slots[i].toks, n));
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
    if (!(bp.draft_p_min >= 0.0f && bp.draft_p_min <= 1.0f))
        return tern_fail(TERN_ERR_ARG, "batcher: draft_p_min %g is outside 0..1", (double)bp.draft_p_min);
    if (bp.n_draft < 0 || bp.n_draft > SPEC_MAX_DRAFT)
        return tern_fail(TERN_ERR_ARG, "batcher: n_draft %d is outside 0..%d", bp.n_draft, SPEC_MAX_DRAFT);
    if (tern_context_n_batch(ctx) < tern_context_n_seq(ctx))
        return tern_fail(TERN_ERR_ARG, "batcher: the context's batch (%d tokens) cannot hold one token "
                         "of each of its %d sequences", tern_context_n_batch(ctx), tern_context_n_seq(ctx));
    if (bp.draft && !strcmp(tern_draft_kind(bp.draft), "mtp"))
        return tern_fail(TERN_ERR_UNSUPPORTED, "batcher: an \"mtp\" draft drafts for a generator "
                         "(one sequence: tern run, tern chat), not for a batcher's slots");
    if (bp.draft && bp.draft->target != tern_context_model(ctx))
        return tern_fail(TERN_ERR_ARG, "batcher: the draft was made for another model than the context's");
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
    b->pend_cap = b->n_batch / b->n_slots < GEN_MAX_PENDING ? b->n_batch / b->n_slots : GEN_MAX_PENDING;
    struct tern_draft *dr = b->p.draft;
    if (dr && (b->p.n_draft == 0 || b->p.n_draft > dr->n_max)) b->p.n_draft = dr->n_max;
    if (b->p.n_draft > b->pend_cap - 1) b->p.n_draft = b->pend_cap - 1; /* t and its drafts share a slot's rows */
    if (bp.n_draft_min < 0) {
        free(b);
        return tern_fail(TERN_ERR_ARG, "batcher: n_draft_min %d is negative", bp.n_draft_min);
    }
    const bool model_draft = dr && tern_draft_model(dr) != NULL;
    b->slots = calloc((size_t)b->n_slots, sizeof *b->slots);
    b->b_tok = malloc(sizeof(int32_t) * (size_t)b->n_batch);
    b->b_seq = malloc(sizeof(int32_t) * (size_t)b->n_batch);
    b->b_logits = malloc(sizeof(bool) * (size_t)b->n_batch);
    b->order = malloc(sizeof(int) * (size_t)b->n_slots);
    b->masked = malloc(sizeof(float) * (size_t)b->n_vocab);
    if (b->p.n_draft > 0) b->pdist = malloc(sizeof(float) * (size_t)b->n_vocab);
    if (model_draft) b->dreq = malloc(sizeof *b->dreq * (size_t)b->n_slots);
    if (b->p.n_draft > 0 && (b->ctl = malloc(sizeof *b->ctl * (size_t)b->n_slots))) {
        /* before anything is measured, a drafter's pass is guessed from its share of the bytes */
        const double ratio = model_draft ? (double)tern_model_get_info(tern_draft_model(dr))->weight_bytes /
                                               (double)tern_model_get_info(tern_context_model(ctx))->weight_bytes
                                         : 0;
        int n_min = b->p.n_draft_min > 0 ? b->p.n_draft_min : 1;
        if (n_min > b->p.n_draft) n_min = b->p.n_draft;
        for (int m = 0; m < b->n_slots; m++) {
            spec_ctl_init(&b->ctl[m], n_min, b->p.n_draft, model_draft, ratio);
            spec_ctl_begin(&b->ctl[m], CTL_START, SPEC_BATCH_MARGIN); /* then spec_ctl_earn */
        }
    }
    tern_status st = (b->slots && b->b_tok && b->b_seq && b->b_logits && b->order && b->masked &&
                      (b->p.n_draft == 0 || (b->pdist && b->ctl)) && (!model_draft || b->dreq))
                         ? TERN_OK
                         : tern_fail(TERN_ERR_NOMEM, "batcher: out of memory");
    if (!st && model_draft && b->p.n_draft > 0)
        st = batch_draft_create(dr, b->n_slots, b->n_ctx, b->n_vocab, b->p.n_draft, b->p.draft_p_min, &b->bd);
    if (!st && !model_draft && b->p.n_draft > 0 &&
        (st = tern_tokenizer_from_gguf(tern_model_gguf(tern_context_model(ctx)), &b->lookup_tok)))
        st = tern_fail_prefix(st, "batcher: the lookup's tokenizer: ");
    for (int i = 0; !st && i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        s->row = -1;
        s->ver = (struct spec_verifier){.n_vocab = b->n_vocab, .masked = b->masked, .p = b->pdist};
        if (b->p.n_draft > 0 && !model_draft &&
            ((st = spec_ngram_create(1, 4, b->n_vocab, b->lookup_tok, false, &s->src)) ||
             (st = s->src->ops->prepare(s->src, b->n_ctx))))
            st = tern_fail_prefix(st, "batcher: ");
        else if (!(s->toks = malloc(sizeof(int32_t) * (size_t)b->n_ctx)))
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
        gen_grammar_free(&b->slots[i].gram);
        if (b->slots[i].src) b->slots[i].src->ops->free(b->slots[i].src);
    }
    tern_tokenizer_free(b->lookup_tok); /* after the sources that borrowed it */
    batch_draft_free(b->bd);
    free(b->dreq);
    free(b->ctl);
    free(b->slots);
    free(b->b_tok);
    free(b->b_seq);
    free(b->b_logits);
    free(b->order);
    free(b->masked);
    free(b->pdist);
    free(b);
}

int tern_batcher_n_active(const struct tern_batcher *b) { return b->n_active; }
struct batch_draft *batcher_draft(const struct tern_batcher *b) { return b->bd; }

void batcher_set_cost(struct tern_batcher *b, batch_cost_fn fn, void *user)
{
    b->cost = fn;
    b->cost_user = user;
    if (b->bd) batch_draft_set_cost(b->bd, fn, user);
}
int tern_batcher_n_slots(const struct tern_batcher *b) { return b->n_slots; }

/* The invariants of slot i between steps (see the top of the file): the record within the
 * context, the pending tokens at its end and fitting their rows, the KV holding exactly the
 * decoded part of the record (a prefilling slot: a prefix of its prompt). */
static void slot_check(const struct tern_batcher *b, int i)
{
    const struct slot *s = &b->slots[i];
    TERN_ASSERT(i >= 0 && i < b->n_slots);
    TERN_ASSERT(s->n_toks >= 0 && s->n_toks <= b->n_ctx, "a record fits its sequence");
    TERN_ASSERT(s->n_pending >= 0 && s->n_pending <= b->pend_cap && s->n_pending <= s->n_toks,
                "pending tokens are the record's last ones and fit the slot's rows");
    const int kv = tern_kv_seq_n_pos(b->ctx, i);
    if (!s->active) {
        TERN_ASSERT(s->n_pending == 0 && s->n_toks <= kv, "a free slot's record is in its KV");
        return;
    }
    TERN_ASSERT(s->n_prompt >= 1 && s->n_prompt <= s->n_toks, "the record starts with the prompt");
    if (s->n_pending > 0)
        TERN_ASSERT(kv == s->n_toks - s->n_pending, "a generating slot's KV holds its record but the pending tokens");
    else
        TERN_ASSERT(s->n_toks == s->n_prompt && kv <= s->n_prompt, "a prefilling slot's KV holds part of its prompt");
}

static int common_prefix(const int32_t *a, int na, const int32_t *c, int nc)
{
    int n = na < nc ? na : nc, i = 0;
    while (i < n && a[i] == c[i]) i++;
    return i;
}

/* Positions of slot i's KV that hold its record (a generating slot's pending tokens are not). */
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
    if (r->n_top_logprobs < 0 || r->n_top_logprobs > TERN_MAX_TOP_LOGPROBS)
        return tern_fail(TERN_ERR_ARG, "batcher: n_top_logprobs %d is outside 0..%d", r->n_top_logprobs,
                         TERN_MAX_TOP_LOGPROBS);
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= b->n_vocab)
            return tern_fail(TERN_ERR_ARG, "batcher: prompt token %d at index %d is outside the "
                             "vocabulary (0..%d)", r->prompt[i], i, b->n_vocab - 1);
    if (r->grammar) {
        struct tern_grammar_info gi;
        tern_grammar_get_info(r->grammar, &gi);
        if (gi.n_vocab != tern_tokenizer_n_vocab(b->tok))
            return tern_fail(TERN_ERR_ARG, "batcher: the grammar was compiled for a vocabulary of %d "
                             "tokens, the model's tokenizer has %d", gi.n_vocab, tern_tokenizer_n_vocab(b->tok));
    }
    /* preserved tokens: the ids are checked before anything changes (the slot's detokenizer
     * takes them once the slot is chosen) */
    if (r->n_preserve < 0 || (r->n_preserve > 0 && !r->preserve))
        return tern_fail(TERN_ERR_ARG, "batcher: preserve: %d ids%s", r->n_preserve, r->n_preserve > 0 ? ", NULL array" : "");
    for (int i = 0; i < r->n_preserve; i++)
        if (r->preserve[i] < 0 || r->preserve[i] >= b->n_vocab)
            return tern_fail(TERN_ERR_ARG, "batcher: preserved token %d: id %d outside the vocabulary (0..%d)", i,
                             r->preserve[i], b->n_vocab - 1);
    /* The free slot sharing the longest prefix (its KV is reused in place), else the least
     * recently used one. At most n_prompt - 1 tokens are reused: the last one is decoded for
     * its logits. */
    const int cap = r->n_prompt - 1;
    int best = -1, best_lcp = -1;
    for (int i = 0; i < b->n_slots; i++) {
        const struct slot *s = &b->slots[i];
        if (s->active) continue;
        int l = b->p.share_prefix && s->group == r->cache_group ? common_prefix(s->toks, slot_kv(b, i), r->prompt, cap) : 0;
        /* a recurrent model (qwen35) keeps a slot's state only at some positions */
        if (!tern_kv_seq_can_truncate(b->ctx, i, l)) l = 0;
        if (l > best_lcp || (l == best_lcp && s->last_used < b->slots[best].last_used)) {
            best = i;
            best_lcp = l;
        }
    }
    if (best < 0) return tern_fail(TERN_ERR_RANGE, "batcher: all %d slots are busy", b->n_slots);
    struct slot *s = &b->slots[best];
    /* the free slot's detokenizer shows the request's preserved tokens (its only failure, too
     * many of them, leaves a free slot's set, which the next add replaces) */
    tern_status st = gen_out_preserve(s->detok, r->preserve, r->n_preserve, r->grammar, "batcher");
    if (st) return st;
    struct gen_reason rs;
    if ((st = gen_reason_init(&rs, &r->reasoning, "batcher"))) return st;
    /* the matcher first: nothing has changed yet if it cannot be made */
    st = gen_grammar_begin(&s->gram, r->grammar);
    if (st) return tern_fail_prefix(st, "batcher: ");
    /* the drafter's sequence too (before anything else changes: its only failure is memory) */
    const bool model_drafts = b->bd && !r->grammar && !r->on_logprob;
    if (model_drafts) {
        struct tern_sampler_params sp;
        sample_get_params(r->sampler, &sp);
        if ((st = batch_draft_admit(b->bd, best, r->prompt, r->n_prompt, &sp, b->p.share_prefix, r->cache_group, NULL))) {
            gen_grammar_free(&s->gram);
            return st;
        }
    }
    /* Another slot (busy or free) may hold more of the prompt: copy its KV over. */
    int src = -1, src_lcp = best_lcp;
    for (int i = 0; b->p.share_prefix && i < b->n_slots; i++) {
        if (i == best || b->slots[i].group != r->cache_group) continue; /* another user's KV */
        int l = common_prefix(b->slots[i].toks, slot_kv(b, i), r->prompt, cap);
        if (!tern_kv_seq_can_truncate(b->ctx, i, l)) l = 0; /* as above: copyable positions only */
        if (l > src_lcp) {
            src = i;
            src_lcp = l;
        }
    }
    /* The process-wide prefix cache may know more of it than any slot (a conversation whose
     * slot was reused since, or one seen before a restart): restore from it. */
    int reused = best_lcp, restored = 0;
    if (b->pc && pc_restore(b->pc, b->ctx, best, r->cache_group, r->prompt, r->n_prompt,
                                           src_lcp > best_lcp ? src_lcp : best_lcp, &restored) == TERN_OK &&
        restored > 0) {
        reused = restored;
    } else if (src >= 0 && (st = tern_kv_seq_copy(b->ctx, src, best, src_lcp)) == TERN_OK) {
        reused = src_lcp;
    } else if ((st = tern_kv_seq_truncate(b->ctx, best, best_lcp))) {
        gen_grammar_free(&s->gram);
        return tern_fail_prefix(st, "batcher: ");
    }
    TERN_ASSERT(!s->active && reused >= 0 && reused <= cap, "the last prompt token is always decoded");
    TERN_ASSERT(tern_kv_seq_n_pos(b->ctx, best) == reused, "the slot's KV holds exactly the reused prefix");
    memcpy(s->toks, r->prompt, sizeof(int32_t) * (size_t)r->n_prompt);
    s->group = r->cache_group;
    s->n_toks = r->n_prompt;
    s->n_prompt = r->n_prompt;
    s->n_pending = 0;
    s->model_drafts = model_drafts;
    s->draft_skip = 0;
    s->draft_backoff = 1;
    s->acc = s->tested = 0;
    s->r = *r;
    s->r.prompt = NULL;
    s->row = -1;
    s->admitted = ++b->tick;
    memset(&s->st, 0, sizeof s->st);
    s->st.n_prompt = r->n_prompt;
    s->st.n_reused = reused;
    s->st.n_prompt_decoded = r->n_prompt - reused;
    s->st.stop = TERN_GEN_STOP_MAX_TOKENS;
    s->ver.gr = r->grammar ? &s->gram : NULL;
    s->out = (struct gen_out){.tok = b->tok, .ver = &s->ver, .sampler = r->sampler, .d = s->detok,
                              .on_token = r->on_token, .on_piece = r->on_piece, .user = r->user,
                              .on_logprob = r->on_logprob, .n_top_logprobs = r->n_top_logprobs,
                              .ignore_eog = r->ignore_eog, .max_tokens = r->max_tokens,
                              .n_ctx = b->n_ctx, .st = &s->st, .t0 = gen_now_ms(), .rs = rs};
    gen_out_reason_start(&s->out);
    s->t_prompt = 0;
    tern_detokenizer_reset(s->detok);
    tern_sampler_reset(r->sampler);
    for (int i = 0; i < r->n_prompt; i++) tern_sampler_accept(r->sampler, r->prompt[i]);
    s->active = true;
    b->n_active++;
    TERN_ASSERT(b->n_active <= b->n_slots);
    slot_check(b, best);
    if (slot_out) *slot_out = best;
    return TERN_OK;
}

/* Leave the slot: release held-back text, make the record match the KV, tell the caller. */
static void finish(struct tern_batcher *b, int i, tern_status rc)
{
    struct slot *s = &b->slots[i];
    if (!s->active) return;
    const char *text;
    size_t len;
    /* as tern_generate: held-back text goes out unless a callback asked to stop */
    if (!rc && !s->out.stop && tern_detokenizer_flush(s->detok, &text, &len) == TERN_OK && len > 0 &&
        s->r.on_piece)
        s->r.on_piece(text, len, s->r.user);
    if (s->ver.gr && s->gram.failed) rc = s->gram.fail_status;
    if (rc) s->st.stop = TERN_GEN_STOP_CALLBACK;
    const double t = gen_now_ms();
    if (s->t_prompt > 0) {
        s->st.prompt_ms = s->t_prompt - s->out.t0;
        s->st.gen_ms = t - s->t_prompt;
    } else {
        s->st.prompt_ms = t - s->out.t0;
    }
    if (s->st.spec_drafted > 0) s->st.spec_accept_rate = (double)s->st.spec_accepted / s->st.spec_drafted;
    if (s->st.spec_rounds > 0) s->st.spec_mean_accepted = (double)s->st.spec_accepted / s->st.spec_rounds;
    if (s->st.n_generated >= 2 && t > s->out.t_first)
        s->st.gen_tps = (s->st.n_generated - 1) / ((t - s->out.t_first) / 1e3);
    if (s->ver.gr) {
        gen_out_grammar_stats(&s->gram, &s->st);
        /* The grammar need not outlive the request; the slot keeps the matcher, which the next
         * request with the same grammar resets instead of building anew (gen_grammar_begin tells
         * by its serial; a matcher whose grammar is gone is only ever freed). */
        s->ver.gr = NULL;
    }
    const int kv = tern_kv_seq_n_pos(b->ctx, i);
    if (s->n_toks > kv) s->n_toks = kv;
    cache_store(b, i, s->n_toks); /* the answer too: the next turn's prompt repeats it */
    s->n_pending = 0;
    s->active = false;
    s->last_used = ++b->tick;
    TERN_ASSERT(b->n_active > 0, "a slot leaves once");
    b->n_active--;
    s->r.on_done(&s->st, s->r.user);
}

void tern_batcher_cancel(struct tern_batcher *b, int slot)
{
    if (slot < 0 || slot >= b->n_slots || !b->slots[slot].active) return;
    b->slots[slot].st.stop = TERN_GEN_STOP_CALLBACK;
    b->slots[slot].out.stop = true; /* nothing more to say: no held-back text either */
    finish(b, slot, TERN_OK);
}

/* ---------------------------------------------------------------- drafting
 * A generating slot whose only pending token is t (the sampled one: no forced tokens, no
 * grammar, no log-probs asked) may add drafts d0..dk-1 after it: the pass then decodes t at
 * position n_toks - 1 and d_i at n_toks + i, with logits at each, and verify() walks them as
 * tern_generate's speculation does (spec_check: the target's choice at temperature 0; sampling,
 * min(1, p(d)/q(d)) with q the drafter model's distribution, or p(d) for a lookup's point mass),
 * handing over each kept draft and then the target's own token, and rolls the rejected drafts
 * out of the slot's KV and the drafter's sequence. A constrained slot drafts by lookup after all
 * its pending tokens (the sampled one and the forced ones after it), through what the grammar
 * forces (gen_grammar_draft); verify() keeps drafted forced tokens without a draw, as
 * tern_generate does, and forced tokens past the drafts become the next pending ones. */

/* How many drafts slot s may have after its pending token t: the positions left in the context
 * and the tokens left to sample after t's successor. */
static int draft_room(const struct tern_batcher *b, const struct slot *s)
{
    int k = b->p.n_draft;
    const int room = b->n_ctx - s->n_toks;                        /* positions left */
    if (k > b->pend_cap - s->n_pending) k = b->pend_cap - s->n_pending; /* the slot's rows (forced tokens) */
    const int left = s->r.max_tokens - s->st.n_generated - 1;     /* tokens after t's successor */
    if (k > room) k = room;
    if (k > left) k = left;
    TERN_ASSERT(k <= SPEC_MAX_DRAFT && s->n_pending + k <= b->pend_cap, "drafts fit the slot's draft array and rows");
    return k > 0 ? k : 0;
}

/* After a drafter round for s: one that gave nothing (no draft confident enough, or none kept)
 * pauses the drafter for this request, for twice as long each time in a row, so a drafter the
 * model does not agree with stops costing passes; a round that kept a draft ends the backoff.
 * While paused the request's sequence falls behind and catches up in one pass when it drafts
 * again. Decided from counts only: a seed still fixes the tokens. */
static void draft_outcome(struct slot *s, bool useful)
{
    if (useful) {
        s->draft_backoff = 1;
        return;
    }
    s->draft_skip = s->draft_backoff;
    if (s->draft_backoff < 64) s->draft_backoff *= 2;
}

/* Lookup drafts for slot s after its pending token (into s->draft), or 0. */
static int propose(struct tern_batcher *b, struct slot *s, int k_ctl)
{
    if (!s->could_draft || !s->src) return 0;
    int k = draft_room(b, s);
    if (k > k_ctl) k = k_ctl;
    if (k <= 0) return 0;
    int got = 0, cls = 0;
    const tern_status st = s->ver.gr ? gen_grammar_draft(&s->gram, s->src, s->toks, s->n_toks, k, s->draft, &got, &cls)
                                     : s->src->ops->propose(s->src, s->toks, s->n_toks, k, 0, s->draft, &got, &cls);
    if (st) return 0;
    TERN_ASSERT(got >= 0 && got <= k, "a source drafts no more than asked");
    s->st.spec_drafted += got;
    if (got > 0) s->st.spec_rounds++;
    return got;
}

/* Slot i's drafts against the pass's logits (rows s->row .. s->row + n_draft). Returns true if
 * the request finished; *acc = drafts kept. */
static bool verify(struct tern_batcher *b, int i, int *acc)
{
    struct slot *s = &b->slots[i];
    const int base = s->n_toks; /* t sits at base - 1, draft j at base + j */
    tern_status rc = TERN_OK;
    int a = 0, nf = 0, np = 0;
    bool ended = false, rejected = false;
    int32_t next = -1;
    int32_t *forced = b->pend; /* the grammar's forced tokens at the position being checked */
    const float *q = s->model_drafts ? batch_draft_q(b->bd, i) : NULL; /* NULL: point masses */
    TERN_ASSERT(s->n_draft > 0 && s->n_draft <= SPEC_MAX_DRAFT && s->row >= 0);
    /* the pass decoded t and every draft after the record's decoded part */
    TERN_ASSERT(tern_kv_seq_n_pos(b->ctx, i) == base + s->n_draft, "KV holds t and the drafts");
    for (;;) {
        if (s->ver.gr && (nf = gen_grammar_forced(&s->gram, forced, b->pend_cap)) > 0) {
            ended = gen_out_forced_drafts(&s->out, s->draft, s->n_draft, &a, forced, &nf, s->toks, base, &rc);
            if (ended || nf > 0) break;
            continue;
        }
        if (a == s->n_draft) break;
        const float *l = tern_context_logits(b->ctx, s->row + a);
        if (!spec_check(&s->ver, s->r.sampler, l, s->draft[a], q ? q + (size_t)a * b->n_vocab : NULL, &next)) {
            rejected = true;
            break;
        }
        s->toks[base + a] = s->draft[a];
        if (gen_out_deliver(&s->out, s->draft[a], base + a, true, &rc)) {
            ended = true; /* the ending token stays out of the KV and the record */
            break;
        }
        a++;
    }
    TERN_ASSERT(a >= 0 && a <= s->n_draft, "accepted <= drafted");
    *acc = a + (ended ? 1 : 0);
    s->st.spec_accepted += *acc;
    /* tested: the kept drafts, plus the one rejected (later ones never were) */
    const double tested = *acc + (*acc < s->n_draft ? 1 : 0);
    s->acc = CTL_FORGET * s->acc + *acc;
    s->tested = CTL_FORGET * s->tested + tested;
    b->acc_all = CTL_FORGET * b->acc_all + *acc;
    b->tested_all = CTL_FORGET * b->tested_all + tested;
    s->n_toks = base + a; /* t and the drafts kept before the last one handed over */
    if (s->model_drafts) {
        batch_draft_keep(b->bd, i, s->n_toks); /* the drafter forgets the rejected */
        draft_outcome(s, a > 0);
    }
    if (!ended && nf > 0) { /* forced tokens past the drafts: the next pending ones */
        ended = gen_out_hand_forced(&s->out, forced, &np, s->n_toks, nf, &rc);
    } else if (!ended) {
        if (!rejected) next = spec_sample(&s->ver, s->r.sampler, tern_context_logits(b->ctx, s->row + a));
        forced[np++] = next;
        ended = gen_out_deliver(&s->out, next, base + a, true, &rc) ||
                gen_out_add_forced(&s->out, forced, &np, s->n_toks, b->pend_cap, &rc);
    }
    /* the KV holds t and every draft: it keeps what the record holds, once all slots sampled */
    TERN_ASSERT(s->n_toks == base + a && s->n_toks <= tern_kv_seq_n_pos(b->ctx, i));
    s->kv_keep = s->n_toks;
    if (ended || rc) {
        finish(b, i, rc);
        return true;
    }
    memcpy(s->toks + s->n_toks, forced, sizeof(int32_t) * (size_t)np);
    s->n_toks += np;
    s->n_pending = np;
    return false;
}

/* The drafter model's work for this step, before the target's pass: drafts for every generating
 * slot it serves (into s->draft, s->n_draft) and the next prompt chunk of every prefilling one
 * (order[0..n_order): first come, first served), so its sequences are ready when they start
 * generating. */
static tern_status model_drafts(struct tern_batcher *b, int n_order, int k_ctl, double *cost_ms,
                                double *first_ms, struct tern_batcher_step_info *in)
{
    int n = 0;
    /* until drafting has been tried once, plain steps keep the drafter's sequences in step (a
     * catch-up pass, charged to the credit) while the target alone is measured, so the first
     * probe need not first catch up on what was generated meanwhile */
    int m = 0;
    for (int i = 0; i < b->n_slots; i++) m += b->slots[i].active && b->slots[i].n_pending > 0;
    const bool keep_up = k_ctl == 0 && !b->ever_off && b->tested_all == 0 && m > 0 && !b->ctl[m - 1].fixed &&
                         b->ctl[m - 1].t_plain.n < SPEC_PLAIN_FIRST;
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        if (!s->could_draft || !s->model_drafts) continue;
        int k = draft_room(b, s);
        if (k > k_ctl) k = k_ctl;
        if (k > 0 || keep_up)
            b->dreq[n++] = (struct batch_draft_req){.slot = i, .toks = s->toks, .n = s->n_toks, .k = k,
                                                    .out = s->draft};
    }
    /* prompts go to the drafter alongside the target while drafting is on (or not yet found not
     * to pay); while it is off the drafter costs nothing, and a request catches up (n_prefill
     * tokens per step, paid from the controller's credit) when drafting resumes */
    const bool on = b->ctl[0].fixed || b->last_k > 0 || !b->ever_off;
    for (int o = 0; o < n_order && on; o++) {
        struct slot *s = &b->slots[b->order[o]];
        if (s->model_drafts)
            b->dreq[n++] = (struct batch_draft_req){.slot = b->order[o], .toks = s->toks, .n = s->n_prompt,
                                                    .k = 0, .out = s->draft};
    }
    if (n == 0) return TERN_OK;
    struct batch_draft_info di;
    const tern_status st = batch_draft_run(b->bd, b->dreq, n, b->p.n_prefill, &di);
    in->draft_ms += di.ms;
    *cost_ms += di.cost_ms;
    *first_ms = di.first_cost_ms;
    in->n_draft_passes += di.passes;
    in->n_draft_tokens += di.tokens;
    for (int r = 0; !st && r < n; r++) {
        struct slot *s = &b->slots[b->dreq[r].slot];
        if (b->dreq[r].k == 0) continue;
        TERN_ASSERT(b->dreq[r].n_out >= 0 && b->dreq[r].n_out <= b->dreq[r].k, "the drafter drafts no more than asked");
        s->n_draft = b->dreq[r].n_out;
        s->st.spec_drafted += s->n_draft;
        if (s->n_draft > 0) s->st.spec_rounds++;
        else if (b->dreq[r].looked) draft_outcome(s, false); /* caught up, nothing sure enough */
    }
    return st;
}

/* ---------------------------------------------------------------- the controller
 * Whether drafting pays is decided for the whole batch, from measured cost, as tern_generate's
 * spec_ctl decides it for one sequence, and by the same code: a batch step of m generating
 * requests is the unit. A plain step gives each of them one token and costs t_plain(m); a
 * round of k drafts per request gives 1 + (its kept drafts) each and costs the drafter's k
 * passes plus a target pass of m (k + 1) rows. So spec_ctl, fed per-request averages (expected
 * tokens e(k) = 1 + mean over the m requests of a_i + ... + a_i^k, a_i each request's own
 * acceptance and 0 for one that cannot draft; the round's kept drafts over m) and the step's
 * times, picks the k with the best tokens per second of the whole batch, or none, and bounds
 * what finding out costs by its credit (3 % of the steps run). Times, estimates and credit are
 * kept per m (one spec_ctl each: a pass's cost depends on its rows). Times are CPU time of the
 * process (a loaded machine does not inflate them; a cost model in tests), and only steps
 * without prompt tokens are measured: steps with prompts follow the last decision unmeasured,
 * and the drafter prefills prompts only while drafting is on. The decision is a length for
 * every request alike, made before any draw: the output's distribution does not depend on it
 * (greedy output: not at all). n_draft_min == n_draft fixes the length (no controller). */

/* The acceptance the controller expects of s: its rounds, with the batch's as a prior of
 * weight 1. */
static double slot_accept(const struct tern_batcher *b, const struct slot *s)
{
    const double prior = (b->acc_all + 0.5) / (b->tested_all + 1.0);
    return (s->acc + prior) / (s->tested + 1.0);
}

/* Tokens the drafter must decode for slot s before drafting beyond the usual one or two (what
 * was generated while drafting was off, a prompt it did not prefill). */
static int drafter_lag(const struct tern_batcher *b, int i)
{
    const struct slot *s = &b->slots[i];
    if (!s->model_drafts) return 0;
    int n_rec;
    const int32_t *rec = batch_draft_record(b->bd, i, &n_rec);
    const int behind = s->n_toks - 1 - common_prefix(rec, n_rec, s->toks, s->n_toks - 1);
    return behind > 2 ? behind : 0;
}

/* Before the step: which generating requests may draft (could_draft), and how many drafts each
 * may have (0: none); *m = generating requests, *lag = tokens the drafter must catch up on first.
 * pure: no prompt tokens in this step. */
static int ctl_choose(struct tern_batcher *b, bool pure, int *m, int *lag, struct tern_batcher_step_info *in)
{
    *lag = 0;
    int k_cap = 0, n = 0;
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        s->could_draft = false;
        if (!s->active || s->n_pending == 0) continue;
        n++;
        /* a constrained request drafts by lookup only (never model_drafts), after all its
         * pending tokens */
        const bool ok = s->ver.gr ? s->src != NULL : s->n_pending == 1;
        if (!ok || s->r.on_logprob || !(s->src || s->model_drafts) || gen_out_reasoning(&s->out)) continue;
        if (s->model_drafts && s->draft_skip > 0) { /* backing off (draft_outcome) */
            s->draft_skip--;
            continue;
        }
        const int room = draft_room(b, s);
        s->could_draft = room > 0;
        if (room > k_cap) k_cap = room;
        if (room > 0) *lag += drafter_lag(b, i);
    }
    *m = n;
    if (k_cap == 0) return 0;
    struct spec_ctl *c = &b->ctl[n - 1];
    if (c->fixed) return in->draft_k = k_cap; /* --draft-min = --draft-max: always the whole length */
    int k = b->last_k < k_cap ? b->last_k : k_cap;
    if (pure) {
        double e[SPEC_MAX_DRAFT + 1];
        for (int j = 0; j <= k_cap; j++) e[j] = 1.0;
        for (int i = 0; i < b->n_slots; i++) {
            const struct slot *s = &b->slots[i];
            if (!s->could_draft) continue;
            const double a = slot_accept(b, s);
            const int room = draft_room(b, s);
            double ak = 1.0, sum = 0.0;
            for (int j = 1; j <= k_cap; j++) {
                if (j <= room) {
                    ak *= a;
                    sum += ak;
                }
                e[j] += sum / n;
            }
        }
        const int off = c->n_off;
        /* a drafter far behind (drafting was off) catches up first: a one-off the credit must
         * cover whole (the batcher cannot start a sequence afresh at a later token) */
        int lag_max;
        const int lag_req = (*lag + n - 1) / n; /* per request: the controller's unit */
        k = spec_ctl_choose_e(c, k_cap, b->tested_all >= 1 ? e : NULL, lag_req > 0 ? lag_req : 1, &lag_max);
        if (k > 0 && lag_max < lag_req) k = 0;
        b->last_k = k;
        if (c->n_off > off)
            for (int i = 0; i < b->n_slots; i++)
                if (b->slots[i].could_draft) b->slots[i].st.spec_off_periods++;
        in->draft_off_period = c->n_off > off;
        if (c->n_off > off) b->ever_off = true;
    }
    for (int i = 0; k == 0 && i < b->n_slots; i++)
        if (b->slots[i].could_draft) {
            b->slots[i].st.spec_plain_steps++;
            in->n_draft_held++;
        }
    in->draft_k = k;
    return k;
}

/* After a step without prompt tokens of m generating requests: what it gave and cost (ms). */
static void ctl_account(struct tern_batcher *b, int m, int k, int kept, double t_draft, double t_sync,
                        int n_sync, double t_verify)
{
    struct spec_ctl *c = &b->ctl[m - 1];
    if (c->fixed) return;
    spec_ctl_account(c, k, (double)kept / m, k ? t_draft / 1e3 : 0, t_sync / 1e3, n_sync, t_verify / 1e3);
    if (k == 0 && t_draft > 0) spec_ctl_charge(c, t_draft / 1e3); /* a plain step's catch-up */
    spec_ctl_earn(c, 1.0, CTL_CAP);
}

/* A failed pass (the target's or the drafter's) ends every active request with its status. */
/* A failed pass ends every active request with st; the step's info (counted so far, plus the
 * requests ended here) goes to the caller's info when it asked for one. */
static tern_status fail_all(struct tern_batcher *b, tern_status st, struct tern_batcher_step_info *in,
                            struct tern_batcher_step_info *info)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tern_last_error());
    for (int i = 0; i < b->n_slots; i++)
        if (b->slots[i].active) {
            finish(b, i, st);
            in->n_finished++;
        }
    if (info) *info = *in;
    return tern_fail(st, "%s", msg);
}

tern_status tern_batcher_step(struct tern_batcher *b, struct tern_batcher_step_info *info)
{
    struct tern_batcher_step_info in = {0};
    int n = 0;
    /* prefilling slots, first come first served */
    int n_order = 0;
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        s->row = -1;
        s->n_draft = 0;
        s->kv_keep = -1;
        if (s->active && s->n_pending == 0) b->order[n_order++] = i;
    }
    for (int a = 1; a < n_order; a++)
        for (int c = a; c > 0 && b->slots[b->order[c]].admitted < b->slots[b->order[c - 1]].admitted; c--) {
            int t = b->order[c];
            b->order[c] = b->order[c - 1];
            b->order[c - 1] = t;
        }
    int m = 0, lag = 0;
    const bool pure = n_order == 0;
    double t_draft = 0, t_first = 0; /* the controller's cost of this step's drafting (ms) */
    const int k_ctl = b->ctl ? ctl_choose(b, pure, &m, &lag, &in) : 0;
    if (b->bd) {
        tern_status st = model_drafts(b, n_order, k_ctl, &t_draft, &t_first, &in);
        if (st) return fail_all(b, st, &in, info);
    }
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        if (!s->active || s->n_pending == 0) continue;
        for (int j = s->n_toks - s->n_pending; j < s->n_toks; j++) {
            b->b_tok[n] = s->toks[j];
            b->b_seq[n] = i;
            b->b_logits[n] = false;
            n++;
        }
        b->b_logits[n - 1] = true;
        s->row = n - 1;
        in.n_decode += s->n_pending;
        if (!b->bd && k_ctl > 0) {
            const double p0 = util_process_cpu_ms();
            s->n_draft = propose(b, s, k_ctl);
            if (!b->cost) t_draft += util_process_cpu_ms() - p0;
        }
        for (int d = 0; d < s->n_draft; d++) { /* each draft's row gives the next position's logits */
            b->b_tok[n] = s->draft[d];
            b->b_seq[n] = i;
            b->b_logits[n] = true;
            n++;
        }
        in.n_drafted += s->n_draft;
    }
    /* pend_cap was chosen so every slot's pending tokens and drafts fit one batch */
    TERN_ASSERT(n <= b->n_batch, "the generating slots' rows fit the batch");
    int budget = b->p.n_prefill < b->n_batch - n ? b->p.n_prefill : b->n_batch - n;
    for (int k = 0; k < n_order && budget > 0; k++) {
        const int i = b->order[k];
        struct slot *s = &b->slots[i];
        const int kv = tern_kv_seq_n_pos(b->ctx, i);
        int chunk = s->n_prompt - kv;
        TERN_ASSERT(chunk > 0, "a prefilling slot has prompt left to decode");
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
    TERN_ASSERT(n <= b->n_batch && budget >= 0);
    in.n_tokens = n;
    if (n == 0) {
        if (info) *info = in;
        return TERN_OK;
    }
    const double t0 = gen_now_ms(), c1 = util_process_cpu_ms();
    const struct tern_batch batch = {.n = n, .tokens = b->b_tok, .seq = b->b_seq, .logits = b->b_logits};
    tern_status st = tern_decode_batch(b->ctx, &batch);
    const double t1 = gen_now_ms();
    double t_verify = b->cost ? b->cost(b->cost_user, 0, n) : util_process_cpu_ms() - c1;
    in.forward_ms = t1 - t0;
    if (st) return fail_all(b, st, &in, info);
    for (int i = 0; i < b->n_slots; i++) {
        struct slot *s = &b->slots[i];
        if (!s->active || s->row < 0) continue;
        if (s->n_pending == 0) {
            s->t_prompt = t1; /* its prompt just completed: the cache gets its blocks now, so */
            cache_store(b, i, s->n_prompt); /* a request sharing them need not wait for the end */
        }
        s->n_pending = 0;
        if (s->n_draft > 0) {
            int acc = 0;
            if (verify(b, i, &acc)) in.n_finished++;
            in.n_accepted += acc;
            continue;
        }
        const float *logits = tern_context_logits(b->ctx, s->row);
        tern_status rc = TERN_OK;
        int np = 0;
        const double m0 = s->gram.mask_ms;
        /* the next token sits at position n_toks; chosen tokens stay within the record (n_ctx)
         * because gen_out ends a request before a token that could not be decoded */
        bool ended = !logits ||
                     gen_out_choose(&s->out, logits, b->pend, &np, s->n_toks, b->pend_cap, &rc);
        in.mask_ms += s->gram.mask_ms - m0;
        if (!ended && !rc && !(s->ver.gr && s->gram.failed)) {
            TERN_ASSERT(np >= 1 && np <= b->pend_cap && s->n_toks + np <= b->n_ctx, "chosen tokens fit the record");
            memcpy(s->toks + s->n_toks, b->pend, sizeof(int32_t) * (size_t)np);
            s->n_toks += np;
            s->n_pending = np;
            continue;
        }
        finish(b, i, logits ? rc : TERN_ERR_ARG); /* no logits cannot happen: the row asked for them */
        in.n_finished++;
    }
    for (int i = 0; i < b->n_slots; i++)
        if (b->slots[i].kv_keep >= 0) {
            /* cannot fail: the slot's KV holds at least its record */
            tern_status ts = tern_kv_seq_truncate(b->ctx, i, b->slots[i].kv_keep);
            TERN_ASSERT(ts == TERN_OK);
            (void)ts;
        }
    int n_active = 0;
    for (int i = 0; i < b->n_slots; i++) {
        slot_check(b, i);
        n_active += b->slots[i].active;
    }
    TERN_ASSERT(n_active == b->n_active, "n_active counts the active slots");
    in.sample_ms = gen_now_ms() - t1;
    if (b->ctl && pure && m > 0) {
        if (!b->cost) t_verify = util_process_cpu_ms() - c1; /* the pass, verifying, sampling */
        /* catching up: pass 0's share of rows that were catch-up, not drafting */
        int n_could = 0;
        for (int i = 0; i < b->n_slots; i++) n_could += b->slots[i].could_draft;
        const double t_sync = lag > 0 && k_ctl > 0 ? t_first * lag / (lag + 2.0 * n_could) : 0;
        ctl_account(b, m, k_ctl > 0 && (in.n_drafted > 0 || t_draft > 0) ? k_ctl : 0, in.n_accepted, t_draft,
                    t_sync, (lag + m - 1) / m, t_verify);
    }
    if (info) *info = in;
    return TERN_OK;
}
