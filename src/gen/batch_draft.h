/* batch_draft.h — the batcher's drafter model (tern_batcher_params.draft with a "self:TYPE" or
 * GGUF source): one sequence of the drafter's own context per batcher slot, drafting for every
 * generating slot at once in batched passes before the target's pass.
 *
 * Read spec.h (draft sources, the verifier) and batcher.c (slots and their records) first. Each
 * drafter sequence keeps a record of the tokens its KV holds, so keeping in step with a slot is
 * comparing that record with the slot's record and rewinding to what they share (a rejected
 * draft, a slot reused by another conversation), then decoding what the drafter has not seen.
 * Everything is allocated at create and at admit (a sampling request's q rows and sampler,
 * once per slot); a step allocates nothing. */
#ifndef TERN_GEN_BATCH_DRAFT_H
#define TERN_GEN_BATCH_DRAFT_H

#include "gen/spec.h"

struct batch_draft;

/* A drafter for n_slots slots of n_ctx positions from d (a model source whose context has at
 * least n_slots sequences and n_ctx positions; TERN_ERR_ARG otherwise), drafting up to n_max
 * tokens (<= d's n_max) for a target of n_vocab_t tokens, and stopping a slot's drafts where
 * the drafter's top probability is below p_min (0: never). Marks d in use. */
TERN_NODISCARD tern_status batch_draft_create(struct tern_draft *d, int n_slots, int n_ctx, int n_vocab_t, int n_max,
                               float p_min, struct batch_draft **out);
/* Frees bd's own state; d is released (not freed) and its sequence 0 forgotten. */
void batch_draft_free(struct batch_draft *bd);

/* A request enters slot with prompt[0..n): the slot's sequence keeps the prefix it shares with
 * the prompt, or gets a longer one copied from another slot's sequence, among the sequences
 * whose last request had the same isolation group (tern_batch_request.cache_group; share false:
 * nothing kept). sp: the request's sampler params (temperature 0 drafts greedily; otherwise drafts are
 * drawn from q under the same temperature and filters, no repetition penalty, a seed derived
 * from sp's). Returns the prompt tokens the sequence holds in *reused. */
TERN_NODISCARD tern_status batch_draft_admit(struct batch_draft *bd, int slot, const int32_t *prompt, int n,
                              const struct tern_sampler_params *sp, bool share, uint64_t group,
                              int *reused);

/* One slot's work in a step. */
struct batch_draft_req {
    int slot;
    const int32_t *toks; /* the slot's record */
    int n;               /* drafting: toks[n - 1] is the pending token (not yet in the target's
                            KV), drafts continue after it; prefilling: the prompt's length */
    int k;               /* drafts wanted, 1..n_max; 0 = only catch up with toks[0..n) */
    int32_t *out;        /* (k) the drafts */
    bool looked;         /* set: the sequence caught up and the drafter's distribution after
                            the pending token was looked at (n_out 0 then means: not sure) */
    int n_out;           /* set: drafts made (fewer than k where the drafter's confidence fell
                            below p_min or it chose an id the target lacks; 0 also when it was too
                            far behind to catch up in this step) */
};
struct batch_draft_info {
    double ms;           /* wall time of the passes */
    double cost_ms;      /* the same passes as the batcher's controller counts them: CPU time of
                            the process (a loaded machine does not inflate it), or the cost
                            model's (batch_draft_set_cost) */
    double first_cost_ms; /* of that, pass 0's (the catch-up and the first drafts) */
    int passes, tokens;  /* drafter passes and the tokens in them */
};
/* Catch every request's sequence up with its record and draft: one pass holding every slot's
 * unseen tokens (a drafting slot's last one or two, a prefilling slot's next prompt chunk), then
 * one pass per further drafted position holding one token per slot still drafting. Catch-up
 * beyond two tokens per drafting slot and prompt chunks share `budget` tokens (requests first
 * come first served: give prefilling requests in admission order after the drafting ones). On a
 * failed pass the sequences involved are emptied and the error returned. */
TERN_NODISCARD tern_status batch_draft_run(struct batch_draft *bd, struct batch_draft_req *rq, int n_rq, int budget,
                            struct batch_draft_info *info);
/* The slot's record now holds n tokens in common with what the last drafts assumed (the kept
 * drafts): the sequence forgets what lies past n. */
void batch_draft_keep(struct batch_draft *bd, int slot, int n);
/* The distributions the slot's last drafts were drawn from (row i: n_vocab_t floats), or NULL
 * when it drafts greedily (point masses). */
const float *batch_draft_q(const struct batch_draft *bd, int slot);

/* Test hook: the cost of a forward pass in ms (who: 0 the target's, 1 the drafter's; n_rows
 * tokens in it), instead of the CPU time measured; the controller's decisions then follow the
 * model's costs, deterministically. NULL: measure. */
typedef double (*batch_cost_fn)(void *user, int who, int n_rows);
void batch_draft_set_cost(struct batch_draft *bd, batch_cost_fn fn, void *user);
struct tern_batcher;
void batcher_set_cost(struct tern_batcher *b, batch_cost_fn fn, void *user);

/* For tests and checkers: the tokens slot's sequence holds (*n of them), the drafter's context,
 * and the batcher's drafter (NULL without one). */
const int32_t *batch_draft_record(const struct batch_draft *bd, int slot, int *n);
struct tern_context *batch_draft_context(const struct batch_draft *bd);
struct batch_draft *batcher_draft(const struct tern_batcher *b);

#endif
