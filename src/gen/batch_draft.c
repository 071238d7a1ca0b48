/* batch_draft.c — the batcher's drafter model: one sequence per slot in the drafter's own
 * context, all slots drafted together. Read batch_draft.h first.
 *
 * A step, as batch_draft_run does it for the slots the batcher hands over:
 *
 *     pass 0:  every slot's unseen tokens (a drafting slot: after the last round usually just
 *              the target's correction or bonus token, and the pending token is the last one,
 *              with logits: the first draft d0; a prefilling slot: its next prompt chunk)
 *     pass j:  d(j-1) of every slot still drafting, logits: d(j)          (j = 1 .. k-1)
 *
 * so k drafts cost k drafter passes whatever the number of slots (each reads the drafter's
 * weights once), and the last draft is never decoded (if the target keeps it, the next pass 0
 * decodes it with the rest). The record of a sequence is exactly what its KV holds; the slot's
 * record may differ from it (rejected drafts, a new conversation), and the next run rewinds the
 * sequence to the common prefix first, so no call is needed to undo anything.
 *
 * Drafts are greedy at temperature 0 (point masses for the verifier); a sampling request draws
 * them from q, the drafter's distribution under the request's temperature and filters
 * (spec_model_pick, as tern_generate's drafter does), and the rows of q go to the verifier. */
#include <stdlib.h>
#include <string.h>

#include "gen/batch_draft.h"
#include "gen/gen_out.h"
#include "kernels/vexp.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/error.h"

struct bd_slot {
    int32_t *rec;                   /* (n_ctx) tokens its sequence's KV holds */
    int n_rec;
    uint64_t group;                 /* isolation group of the request that wrote rec */
    bool greedy;
    struct tern_sampler *smp;       /* the drafts' draws (sampling requests), made at admit */
    struct tern_sampler_params sp;  /* smp's params */
    float *q;                       /* (n_max, n_vocab_t) distributions of the last drafts */
    int row;                        /* logits row in the current pass, -1 = none */
    int take;                       /* tokens of its record in pass 0 */
};

struct batch_draft {
    struct tern_draft *d;
    struct tern_context *ctx;       /* the drafter's, owned by d */
    int n_slots, n_ctx, n_batch, n_max, n_vocab_t, n_vocab_d, n_ok;
    struct bd_slot *slots;          /* (n_slots) */
    int32_t *b_tok, *b_seq;         /* (n_batch) a pass */
    bool *b_logits;                 /* (n_batch) */
    float *dq;                      /* (n_vocab_d) the drafter's distribution scratch */
    float p_min;                    /* a slot stops drafting where the drafter's top probability
                                       falls below this (0: never) */
    vexp_sum_fn exp_sum;            /* the softmax sum of a greedy slot's confidence */
    batch_cost_fn cost;             /* test hook: modelled pass costs instead of CPU time */
    void *cost_user;
};

void batch_draft_set_cost(struct batch_draft *bd, batch_cost_fn fn, void *user)
{
    bd->cost = fn;
    bd->cost_user = user;
}

tern_status batch_draft_create(struct tern_draft *d, int n_slots, int n_ctx, int n_vocab_t, int n_max,
                               float p_min, struct batch_draft **out)
{
    struct spec_model_view v;
    if (!d || !spec_model_view(d->src, &v))
        return tern_fail(TERN_ERR_ARG, "batcher: the draft is not a drafter model");
    if (d->in_use) return tern_fail(TERN_ERR_ARG, "batcher: the draft already serves a generator or batcher");
    if (tern_context_n_seq(v.ctx) < n_slots || tern_context_n_ctx(v.ctx) < n_ctx)
        return tern_fail(TERN_ERR_ARG, "batcher: the drafter's context has %d sequences of %d positions; "
                         "the batcher needs %d of %d (tern_draft_params.n_seq / n_ctx)",
                         tern_context_n_seq(v.ctx), tern_context_n_ctx(v.ctx), n_slots, n_ctx);
    if (n_max < 1 || n_max > d->n_max)
        return tern_fail(TERN_ERR_ARG, "batcher: %d drafts per step; the draft was made for 1..%d", n_max, d->n_max);
    struct batch_draft *bd = calloc(1, sizeof *bd);
    if (!bd) return tern_fail(TERN_ERR_NOMEM, "batcher: out of memory");
    bd->d = d;
    bd->ctx = v.ctx;
    bd->n_slots = n_slots;
    bd->n_ctx = n_ctx;
    bd->n_batch = tern_context_n_batch(v.ctx);
    bd->n_max = n_max;
    bd->n_vocab_t = n_vocab_t;
    bd->n_vocab_d = v.n_vocab_d;
    bd->n_ok = v.n_ok;
    bd->p_min = p_min;
    bd->exp_sum = vexp_select().exp_sum;
    bd->slots = calloc((size_t)n_slots, sizeof *bd->slots);
    bd->b_tok = malloc(sizeof(int32_t) * (size_t)bd->n_batch);
    bd->b_seq = malloc(sizeof(int32_t) * (size_t)bd->n_batch);
    bd->b_logits = malloc(sizeof(bool) * (size_t)bd->n_batch);
    bd->dq = malloc(sizeof(float) * (size_t)bd->n_vocab_d);
    bool ok = bd->slots && bd->b_tok && bd->b_seq && bd->b_logits && bd->dq;
    for (int i = 0; ok && i < n_slots; i++) ok = (bd->slots[i].rec = malloc(sizeof(int32_t) * (size_t)n_ctx)) != NULL;
    tern_status st = ok ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "batcher: out of memory for the drafter's records");
    /* every sequence starts empty, as its record (a generator may have used sequence 0) */
    for (int i = 0; !st && i < tern_context_n_seq(v.ctx); i++) st = tern_kv_seq_truncate(v.ctx, i, 0);
    if (st) {
        batch_draft_free(bd);
        return st;
    }
    spec_model_forget(d->src);
    d->in_use = true;
    *out = bd;
    return TERN_OK;
}

void batch_draft_free(struct batch_draft *bd)
{
    if (!bd) return;
    for (int i = 0; bd->slots && i < bd->n_slots; i++) {
        free(bd->slots[i].rec);
        tern_sampler_free(bd->slots[i].smp);
        free(bd->slots[i].q);
    }
    if (bd->d && bd->d->in_use) {
        spec_model_forget(bd->d->src); /* sequence 0 holds a slot's tokens, not a generator's */
        bd->d->in_use = false;
    }
    free(bd->slots);
    free(bd->b_tok);
    free(bd->b_seq);
    free(bd->b_logits);
    free(bd->dq);
    free(bd);
}

static int common_prefix(const int32_t *a, int na, const int32_t *c, int nc)
{
    int n = na < nc ? na : nc, i = 0;
    while (i < n && a[i] == c[i]) i++;
    return i;
}

/* Rewind slot i's sequence to its first n tokens (or to none, where its recurrent state cannot
 * go back to n). Cannot fail: n <= what it holds. */
static void rewind_to(struct batch_draft *bd, int i, int n)
{
    struct bd_slot *s = &bd->slots[i];
    TERN_ASSERT(i >= 0 && i < bd->n_slots && n >= 0);
    TERN_ASSERT(tern_kv_seq_n_pos(bd->ctx, i) == s->n_rec);
    if (n >= s->n_rec) return;
    /* a recurrent drafter (qwen35) goes back only inside its last decode call, or to 0 */
    if (!tern_kv_seq_can_truncate(bd->ctx, i, n)) n = 0;
    tern_status st = tern_kv_seq_truncate(bd->ctx, i, n);
    TERN_ASSERT(st == TERN_OK);
    (void)st;
    s->n_rec = n;
    TERN_ASSERT(tern_kv_seq_n_pos(bd->ctx, i) == n, "the drafter's KV follows its record after a rewind");
}

tern_status batch_draft_admit(struct batch_draft *bd, int slot, const int32_t *prompt, int n,
                              const struct tern_sampler_params *sp, bool share, uint64_t group,
                              int *reused)
{
    struct bd_slot *s = &bd->slots[slot];
    s->greedy = sp->temperature == 0.0f;
    if (!s->greedy) {
        /* as tern_generate's drafter: the target's filters, no penalty, a stream of its own */
        struct tern_sampler_params want = *sp;
        want.repeat_penalty = 1.0f;
        want.seed = sp->seed ^ 0x9e3779b97f4a7c15ull;
        if (!s->q && !(s->q = malloc(sizeof(float) * (size_t)bd->n_max * (size_t)bd->n_vocab_t)))
            return tern_fail(TERN_ERR_NOMEM, "batcher: out of memory for %d draft distributions of %d tokens",
                             bd->n_max, bd->n_vocab_t);
        if (!s->smp || memcmp(&want, &s->sp, sizeof want) != 0) {
            tern_sampler_free(s->smp);
            s->smp = NULL;
            tern_status st = tern_sampler_create(&want, bd->n_vocab_d, &s->smp);
            if (st) return tern_fail_prefix(st, "batcher: draft sampler: ");
            s->sp = want;
        }
        tern_sampler_reset(s->smp);
    }
    /* the prefix the sequence shares with the prompt, or a longer one from another slot */
    int keep = share && s->group == group ? common_prefix(s->rec, s->n_rec, prompt, n) : 0, src = -1, src_n = keep;
    for (int j = 0; share && j < bd->n_slots; j++) {
        if (j == slot || bd->slots[j].group != group) continue;
        const int l = common_prefix(bd->slots[j].rec, bd->slots[j].n_rec, prompt, n);
        if (l > src_n) {
            src = j;
            src_n = l;
        }
    }
    if (src >= 0 && tern_kv_seq_copy(bd->ctx, src, slot, src_n) == TERN_OK) {
        memcpy(s->rec, bd->slots[src].rec, sizeof(int32_t) * (size_t)src_n);
        s->n_rec = src_n;
    } else {
        rewind_to(bd, slot, keep);
    }
    s->group = group;
    if (reused) *reused = s->n_rec;
    return TERN_OK;
}

/* The slot's next draft from its logits row (drafts[j], q row j); false: none (the drafter is
 * not confident enough, or its choice is an id the target does not have).
 *
 * Confidence is the largest probability of the distribution the draft comes from: greedy, the
 * drafter's softmax at temperature 1; sampling, q itself (under the request's temperature and
 * filters). It is decided before the draw, from the distribution alone, so a draft that is made
 * is still a draw from q (the verifier's rule stays exact), and a position not drafted is
 * sampled by the target as usual. */
static bool pick(struct batch_draft *bd, int i, int j, int32_t *out)
{
    struct bd_slot *s = &bd->slots[i];
    const float *logits = tern_context_logits(bd->ctx, s->row);
    if (!logits) return false;
    int32_t t;
    if (s->greedy) {
        t = spec_model_pick(NULL, logits, bd->n_vocab_d, bd->n_ok, bd->n_vocab_t, NULL, NULL);
        if (bd->p_min > 0.0f) {
            memcpy(bd->dq, logits, sizeof(float) * (size_t)bd->n_vocab_d);
            const double sum = bd->exp_sum(bd->dq, bd->n_vocab_d, logits[t]);
            if (!(sum > 0.0) || 1.0 / sum < bd->p_min) return false;
        }
    } else {
        float *qrow = s->q + (size_t)j * (size_t)bd->n_vocab_t;
        const double top = spec_model_q(s->smp, logits, bd->n_vocab_d, bd->n_ok, bd->n_vocab_t, bd->dq, qrow);
        if (!(top > 0.0) || top < bd->p_min) return false;
        t = spec_model_draw(s->smp, qrow, bd->n_ok);
    }
    if (t < 0 || t >= bd->n_ok) return false;
    *out = t;
    return true;
}

/* A pass of n rows; on failure the sequences of its rows are emptied (the batch left nothing in
 * the cache, but the records were rewound for it and no longer say what it would have added). */
static tern_status pass(struct batch_draft *bd, int n, struct batch_draft_info *in)
{
    TERN_ASSERT(n > 0 && n <= bd->n_batch, "a pass fits the drafter's batch");
    const double t0 = gen_now_ms(), c0 = util_process_cpu_ms();
    const struct tern_batch b = {.n = n, .tokens = bd->b_tok, .seq = bd->b_seq, .logits = bd->b_logits};
    tern_status st = tern_decode_batch(bd->ctx, &b);
    in->ms += gen_now_ms() - t0;
    in->cost_ms += bd->cost ? bd->cost(bd->cost_user, 1, n) : util_process_cpu_ms() - c0;
    in->passes++;
    in->tokens += n;
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tern_last_error());
        for (int r = 0; r < n; r++) {
            tern_status_ignore(tern_kv_seq_truncate(bd->ctx, bd->b_seq[r], 0)); /* to 0: cannot fail */
            bd->slots[bd->b_seq[r]].n_rec = 0;
        }
        return tern_fail(st, "draft model: %s", msg);
    }
    return TERN_OK;
}

tern_status batch_draft_run(struct batch_draft *bd, struct batch_draft_req *rq, int n_rq, int budget,
                            struct batch_draft_info *info)
{
    struct batch_draft_info in = {0};
    int n = 0, k_max = 0;
    for (int r = 0; r < n_rq; r++) {
        struct batch_draft_req *q = &rq[r];
        struct bd_slot *s = &bd->slots[q->slot];
        q->n_out = 0;
        q->looked = false;
        s->row = -1;
        s->take = 0;
        if (q->k > bd->n_max) q->k = bd->n_max;
        /* a drafting slot never counts its pending token as held: its logits give d0 */
        const int lim = q->k > 0 ? q->n - 1 : q->n;
        rewind_to(bd, q->slot, common_prefix(s->rec, s->n_rec, q->toks, lim));
        const int common = s->n_rec; /* less when a recurrent drafter had to go back to 0 */
        const int need = q->n - common;
        if (need <= 0) continue;
        /* a drafting slot's usual one or two tokens ride free; more (a prompt restored from the
         * prefix cache, which the drafter computes) come out of the budget like prompt chunks */
        const bool free_ride = q->k > 0 && need <= 2;
        int take = need;
        if (!free_ride && take > budget) take = budget;
        if (take > bd->n_batch - n) take = bd->n_batch - n;
        if (take <= 0) continue;
        if (!free_ride) budget -= take;
        for (int j = 0; j < take; j++) {
            bd->b_tok[n] = q->toks[common + j];
            bd->b_seq[n] = q->slot;
            bd->b_logits[n] = false;
            n++;
        }
        s->take = take;
        if (q->k > 0 && take == need) {
            q->looked = true;
            bd->b_logits[n - 1] = true;
            s->row = n - 1;
            if (q->k > k_max) k_max = q->k;
        }
    }
    tern_status st = TERN_OK;
    if (n > 0) {
        st = pass(bd, n, &in);
        in.first_cost_ms = in.cost_ms;
    }
    for (int r = 0; !st && r < n_rq; r++) { /* the records follow their sequences */
        struct bd_slot *s = &bd->slots[rq[r].slot];
        if (s->take > 0) {
            TERN_ASSERT(s->n_rec + s->take <= rq[r].n && s->n_rec + s->take <= bd->n_ctx);
            memcpy(s->rec + s->n_rec, rq[r].toks + s->n_rec, sizeof(int32_t) * (size_t)s->take);
            s->n_rec += s->take;
        }
        TERN_ASSERT(tern_kv_seq_n_pos(bd->ctx, rq[r].slot) == s->n_rec, "the records follow their sequences");
    }
    for (int r = 0; !st && r < n_rq; r++) {
        struct batch_draft_req *q = &rq[r];
        struct bd_slot *s = &bd->slots[q->slot];
        if (s->row < 0) continue;
        if (pick(bd, q->slot, 0, &q->out[0])) q->n_out = 1;
        else s->row = -1;
    }
    /* pass j decodes d(j-1) of every slot still drafting and gives d(j) */
    for (int j = 1; !st && j < k_max; j++) {
        n = 0;
        for (int r = 0; r < n_rq; r++) {
            struct batch_draft_req *q = &rq[r];
            struct bd_slot *s = &bd->slots[q->slot];
            if (s->row < 0 || q->n_out != j || q->k <= j) {
                s->row = -1;
                continue;
            }
            bd->b_tok[n] = q->out[j - 1];
            bd->b_seq[n] = q->slot;
            bd->b_logits[n] = true;
            s->row = n++;
        }
        if (n == 0) break;
        if ((st = pass(bd, n, &in))) break;
        for (int r = 0; r < n_rq; r++) {
            struct batch_draft_req *q = &rq[r];
            struct bd_slot *s = &bd->slots[q->slot];
            if (s->row < 0) continue;
            TERN_ASSERT(s->n_rec < bd->n_ctx && q->n_out == j && j < q->k && q->k <= bd->n_max);
            s->rec[s->n_rec++] = q->out[j - 1];
            if (pick(bd, q->slot, j, &q->out[j])) q->n_out = j + 1;
            else s->row = -1;
        }
    }
    if (st)
        for (int r = 0; r < n_rq; r++) {
            rq[r].n_out = 0;
            rq[r].looked = false;
        }
    for (int r = 0; r < n_rq; r++) TERN_ASSERT(rq[r].n_out >= 0 && rq[r].n_out <= rq[r].k, "drafted <= asked");
    if (info) *info = in;
    return st;
}

void batch_draft_keep(struct batch_draft *bd, int slot, int n)
{
    if (n < 0) n = 0;
    rewind_to(bd, slot, n);
}

const float *batch_draft_q(const struct batch_draft *bd, int slot)
{
    return bd->slots[slot].greedy ? NULL : bd->slots[slot].q;
}

const int32_t *batch_draft_record(const struct batch_draft *bd, int slot, int *n)
{
    *n = bd->slots[slot].n_rec;
    return bd->slots[slot].rec;
}

struct tern_context *batch_draft_context(const struct batch_draft *bd) { return bd->ctx; }
