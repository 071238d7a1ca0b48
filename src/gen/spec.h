/* spec.h — speculative decoding inside the generation room: draft sources behind one interface,
 * the adaptive controller that picks the draft length, and the verifier that accepts or rejects
 * drafted tokens.
 *
 * Read include/tern.h "speculative decoding" first (what the user is promised), then
 * generate.c (the loop that drives these pieces). One round, as generate.c runs it:
 *
 *     pending token t (sampled, shown, not yet in the target's KV)
 *     k = spec_ctl_choose(...)                      how many drafts would pay now
 *     d[0..k) = source->propose(hist + t, k)         draft (ngram lookup, drafter model)
 *     target decodes [t, d0 .. dk-1] in one pass     logits rows L0 .. Lk
 *     a = spec_verify(L, d, q, k, &next)             keep d0..da-1, then `next`
 *     KV rolled back to the kept tokens; pending = next
 *
 * A source sees the whole history each time and keeps itself in step (the model sources
 * compare the history with what their own KV holds and rewind), so a rejected draft needs no
 * call to undo it. Everything is allocated when a draft or generator is set up; a round
 * allocates nothing. */
#ifndef TERN_GEN_SPEC_H
#define TERN_GEN_SPEC_H

#include "tern.h"

/* ---------------------------------------------------------------- draft sources */

#define SPEC_MAX_DRAFT 64 /* n_max upper bound */
#define SPEC_N_CLASS 4    /* proposal classes the controller keeps apart (ngram: match length) */
#define SPEC_MIN_WINDOW 16 /* fewest recent tokens a drafter starting afresh decodes */

struct spec_source;
struct spec_source_ops {
    const char *kind; /* "ngram", "self", "model", "mtp" */
    /* A generation starts with sampler params sp (the target's). Model sources configure how
     * they draft (greedy at temperature 0, else sampling q with the same filters). */
    tern_status (*begin)(struct spec_source *src, const struct tern_sampler_params *sp);
    /* Propose up to k tokens continuing hist[0..n) into out; *n_out of them (0 = nothing worth
     * proposing). A source with more than lag_max unseen tokens (see lag) starts its context
     * afresh at hist[n - lag_max]. *cls in [0, SPEC_N_CLASS): how confident (the controller
     * keeps an acceptance rate per class). When q is not NULL (model sources while sampling)
     * row i of q (n_vocab floats) is the distribution out[i] was drawn from; otherwise each
     * draft is a point mass. */
    tern_status (*propose)(struct spec_source *src, const int32_t *hist, int n, int k,
                           int lag_max, int32_t *out, int *n_out, int *cls);
    /* Does this source pay per drafted token (a model) or only per round (a lookup)? The
     * controller asks for k before proposing when true, after when false. */
    bool costly;
    /* Tokens of hist[0..n) the source has not seen and would process before drafting (a
     * drafter's catch-up: the prompt, or what was generated while speculation was off). */
    int (*lag)(const struct spec_source *src, const int32_t *hist, int n);
    /* A generator of n_ctx positions takes the source: allocate what proposals over such a
     * history need (may be NULL: nothing to allocate). */
    tern_status (*prepare)(struct spec_source *src, int n_ctx);
    /* A generator whose context is target takes the source (may be NULL: the source does not
     * read the target; "mtp" reads its hidden states and sizes its own context by it). */
    tern_status (*attach)(struct spec_source *src, struct tern_context *target);
    void (*free)(struct spec_source *src);
};

/* A consumer's filter of candidate drafts (a grammar): how many of d[0..k) in a row it would
 * take. A source with several candidates (ngram: every earlier occurrence of the suffix) drafts
 * the one taken furthest, and only as far as it is taken; a model source ignores it. */
struct spec_admit {
    int (*fn)(void *user, const int32_t *d, int k);
    void *user;
};

struct spec_source {
    const struct spec_source_ops *ops;
    const struct spec_admit *admit; /* NULL: no filter (set per proposal by the caller) */
    int n_vocab;       /* the target's: width of q rows */
    float *q;          /* (n_max, n_vocab) draft distributions, or NULL (point masses) */
    bool q_valid;      /* the last proposal filled q */
    double t_sync;     /* seconds the last proposal spent catching up with the history (a
                          drafter decoding the tokens it had not seen), apart from drafting */
    int n_sync;        /* tokens it caught up */
};

/* ngram: prompt lookup over the history (spec_ngram.c). tok: the target's tokenizer, for the
 * text lookup under a grammar (NULL: token lookup only); tokenizing changes its caches, so no
 * other thread may use it meanwhile. own_tok: the source frees it (on failure too). */
TERN_NODISCARD tern_status spec_ngram_create(int ngram_min, int ngram_max, int n_vocab, struct tern_tokenizer *tok,
                              bool own_tok, struct spec_source **out);
/* A drafter model with its own context of n_seq sequences (spec_model.c; a generator drafts in
 * sequence 0, a batcher in one per slot: batch_draft.c); owns model if own_model. */
TERN_NODISCARD tern_status spec_model_create(struct tern_model *model, bool own_model, const char *kind,
                              int n_vocab_target, int n_ctx, int n_seq, int n_threads, int n_max,
                              struct spec_source **out);
/* The target's own multi-token-prediction layer (spec_mtp.c): its context is made when a
 * generator attaches (the target's n_ctx). */
TERN_NODISCARD tern_status spec_mtp_create(struct tern_model *model, int n_threads, int n_max, struct spec_source **out);
/* What drafting from a model source's context needs (batch_draft.c); false for ngram. */
struct spec_model_view {
    struct tern_context *ctx; /* the drafter's context (n_seq sequences) */
    int n_vocab_d;            /* the drafter's logits width */
    int n_ok;                 /* ids usable as drafts: min(drafter, target vocabulary) */
};
bool spec_model_view(struct spec_source *src, struct spec_model_view *out);
/* Someone else (a batcher) used the context: forget what sequence 0 held. */
void spec_model_forget(struct spec_source *src);
/* The drafter's next token from its logits (n_vocab_d wide): smp NULL = greedy (the highest
 * logit, lowest id on ties); else a draw from q = smp's distribution (tern_sampler_probs into dq,
 * n_vocab_d floats) restricted to ids < n_ok and renormalized, written into qrow (n_vocab_t
 * floats, the target's width, zero past n_ok). -1 when no id < n_ok has mass. */
int32_t spec_model_pick(struct tern_sampler *smp, const float *logits, int n_vocab_d, int n_ok,
                        int n_vocab_t, float *dq, float *qrow);
/* A model source's sampler for a generation with the target's params sp: greedy (*greedy, no
 * sampler needed) at temperature 0, else *smp (re)made for sp without the repetition penalty
 * and with its own seed stream (*cur: the params *smp was made with), and reset. */
TERN_NODISCARD tern_status spec_model_sampler_begin(struct tern_sampler **smp, struct tern_sampler_params *cur,
                                     int n_vocab, const struct tern_sampler_params *sp, bool *greedy);
/* The two halves of a sampled pick: q into qrow (as above; returns q's largest entry, 0 when
 * nothing has mass), then a draw from it. */
double spec_model_q(struct tern_sampler *smp, const float *logits, int n_vocab_d, int n_ok, int n_vocab_t,
                    float *dq, float *qrow);
int32_t spec_model_draw(struct tern_sampler *smp, const float *qrow, int n_ok);

struct tern_draft {
    const struct tern_model *target;
    struct spec_source *src;
    const struct tern_model *drafter; /* or NULL */
    int n_max, n_min;
    int n_ctx, n_seq;                  /* model drafters: the context's positions and sequences */
    bool in_use;                       /* attached to a generator or a batcher */
    double cost_ratio;                 /* no drafter model ("mtp"): a draft step's bytes over the
                                          target's (the controller's guess before measuring) */
    double catch_ratio;                /* "mtp": a caught-up token's (its layer, not the head) */
};

/* ---------------------------------------------------------------- controller */

/* A time estimate robust to outliers (a descheduled thread on a busy machine): the median of
 * the last SPEC_EST_N observations. */
#define SPEC_EST_N 5
/* one-token passes measured before the first draft (spec_ctl.c: plain_step) */
#define SPEC_PLAIN_FIRST 5
struct spec_est {
    double v[SPEC_EST_N];
    int n, head;
};

/* Chooses the draft length from measured times and acceptance (spec_ctl.c). Times in seconds.
 * Acceptance per class is a count with exponential forgetting, so it follows the text. */
struct spec_ctl {
    int n_min, n_max;
    bool fixed;                 /* n_min == n_max: always k = n_max, never off */
    bool costly;                /* the source pays per drafted token (a model) */
    double size_ratio;          /* costly: drafter bytes / target bytes (the guess before measuring) */
    double catch_ratio;         /* the same for a token of a catch-up (size_ratio, unless the source
                                   reads less per caught-up token: "mtp" skips the output head) */
    struct spec_est t_plain;    /* one-token pass + sampling */
    int since_plain;            /* target passes since t_plain was last measured */
    struct spec_est t_ver[SPEC_MAX_DRAFT + 2]; /* verify pass (+ decisions) of b tokens, by b */
    struct spec_est t_extra;    /* a verify pass's cost per token beyond t_plain, any b */
    struct spec_est t_draft_tok;   /* costly sources: per drafted token */
    struct spec_est t_draft_round; /* lookup sources: per round */
    struct spec_est t_catch_tok;   /* a drafter catching up on many tokens (prompt, off period): per token */
    double acc[SPEC_N_CLASS], tested[SPEC_N_CLASS]; /* accepted / tested, with forgetting */
    double credit;              /* in one-token steps: how much more than plain decoding may still
                                   be spent on trying speculation (see spec_ctl.c) */
    double earn;                /* a generation's margin: credit earned per token produced */
    int rounds;                 /* choices made while speculating (exploration schedule) */
    int off_left;               /* rounds to stay off */
    int off_len;                /* length of the next off period (doubles while probes fail) */
    bool probing;               /* an off period ended: probe once */
    int n_off;                  /* off periods started */
};
void spec_ctl_init(struct spec_ctl *c, int n_min, int n_max, bool costly, double size_ratio);
void spec_ctl_set_catch_ratio(struct spec_ctl *c, double catch_ratio);
/* A generation starts with no credit and earns margin one-token steps of it for every token it
 * produces (spec_ctl_produced), so what finding out may cost stays within margin of the tokens
 * the generation really made, however early it ends: a 20-token answer under max_tokens 4096
 * may not spend 2.5 % of 4096 steps (SPEC_GEN_MARGIN; spec_ctl.c says why it is below the 3 %
 * promised). */
#define SPEC_GEN_MARGIN 0.025
void spec_ctl_begin_generation(struct spec_ctl *c, double margin);
void spec_ctl_produced(struct spec_ctl *c, int n_tokens);
/* A batcher's controller (no generations) starts with margin x start_steps of credit, then
 * earns with spec_ctl_earn per step. */
#define SPEC_BATCH_MARGIN 0.03
void spec_ctl_begin(struct spec_ctl *c, int start_steps, double margin);
/* Draft length for the next round (0 = a plain step), at most k_cap, for proposals of class
 * cls, when the source must first catch up on `lag` tokens it has not seen; *lag_max: how many
 * of those it may process (fewer than lag: start its context afresh at the last *lag_max). */
int spec_ctl_choose(struct spec_ctl *c, int k_cap, int cls, int lag, int *lag_max);
/* True when the next choice is a plain step whatever the draft (measuring the target alone, or
 * an off period): a caller may then skip working out the lag (pass 0) and the proposal. */
bool spec_ctl_resting(const struct spec_ctl *c);
/* After a target pass: k drafted (0 = a plain step: t_verify is the one-token pass), a of them
 * accepted; t_sync of the t_draft seconds of drafting went to catching up n_sync tokens. */
void spec_ctl_update(struct spec_ctl *c, int cls, int k, int a, double t_draft, double t_sync,
                     int n_sync, double t_verify);
/* A costly source's proposal that never reached the target (the grammar refused its first
 * token): counted as a rejected draft of class cls, and its t_draft seconds taken from the
 * credit. */
void spec_ctl_refused(struct spec_ctl *c, int cls, double t_draft);
/* The same for a caller that keeps the acceptance itself (the batcher: per request). Choose from
 * e[0..k_cap], e[k] = the expected tokens of a round of k drafts, in the units of a plain step
 * (a batch: per generating request); e NULL = nothing known yet (a probe). Account a round of
 * k drafts (0: a plain step) that gained a drafted tokens on top of the plain step's one. */
int spec_ctl_choose_e(struct spec_ctl *c, int k_cap, const double *e, int lag, int *lag_max);
void spec_ctl_account(struct spec_ctl *c, int k, double a, double t_draft, double t_sync, int n_sync,
                      double t_verify);
/* A controller without generations (a server's batcher): steps plain steps' worth of time ran,
 * earning 3 % of them as credit, which is capped at 3 % of cap_steps (won rounds included), so
 * what speculation may lose stays within 3 % of any long stretch. */
void spec_ctl_earn(struct spec_ctl *c, double steps, double cap_steps);
/* t seconds spent on speculation outside a round (a drafter kept in step during plain steps):
 * taken from the credit. */
void spec_ctl_charge(struct spec_ctl *c, double t);

/* ---------------------------------------------------------------- verifier */

/* A check a constrained generation (grammar) applies per position. The verifier masks each
 * position's logits given the tokens accepted before it and tells the hook about every token
 * the target keeps, in order, and never about a rejected one: the matcher only ever advances
 * along the kept output, so speculation needs no rollback from it. Set on a generator with
 * gen_generator_set_hook (gen_hook.h). */
struct gen_token_hook {
    void *user;
    void (*mask)(void *user, float *logits, int n_vocab); /* disallowed -> -INFINITY */
    void (*accept)(void *user, int32_t token);
};

/* A grammar constraining the output (tern_gen_params.grammar; gen_grammar.c): the generator's
 * matcher, which follows the kept output token by token, and what it cost. Times are CPU time
 * of the calling thread (masks run there), so they hold on a busy machine. */
struct gen_grammar {
    struct tern_grammar_matcher *m;  /* the matcher (kept between calls; NULL before the first
                                        constrained one) */
    const struct tern_grammar *of;   /* the grammar m was created for (this call's; NULL:
                                        this call is unconstrained) */
    uint64_t serial;                 /* that grammar's serial: a later call with the same one
                                        resets m instead of making another */
    int n_tok;                       /* its vocabulary's size: logits past it (padding) are masked */
    uint32_t *allow;                 /* ((n_tok + 31) / 32) the mask of the position being sampled */
    int masks;                       /* masks computed and applied */
    int forced;                      /* tokens appended without sampling */
    int draft_refused;               /* drafted tokens the grammar refused before verification */
    double mask_ms;                  /* CPU ms computing masks and sampling under them (the
                                        sampler reads the bitset) or applying them to logits */
    double ms;                       /* CPU ms in all grammar work (masks, accepts, forced, drafts) */
    bool failed;                     /* a matcher call failed (out of memory; or a token its own
                                        mask allowed was refused: a bug) */
    tern_status fail_status;
    char fail_msg[256];
};
/* Use grammar g (NULL: none) for the next generation, counters zeroed: the matcher of the last
 * constrained generation, reset, when g is the grammar it follows (its serial; then the tables
 * the matcher grew are kept and a steady run of requests allocates nothing), else a new one. */
TERN_NODISCARD tern_status gen_grammar_begin(struct gen_grammar *gr, const struct tern_grammar *g);
void gen_grammar_free(struct gen_grammar *gr);
/* Advance the matcher by a token the output keeps. */
void gen_grammar_accept(struct gen_grammar *gr, int32_t tok);
/* The tokens the grammar forces now (tern_grammar_matcher_forced_tokens), accepted into the
 * matcher and counted; up to cap. */
int gen_grammar_forced(struct gen_grammar *gr, int32_t *out, int cap);
/* How many of d[0..k) the grammar admits in a row from here (the matcher is left as it was). */
int gen_grammar_check_drafts(struct gen_grammar *gr, const int32_t *d, int k);
/* A lookup source's draft under the grammar, up to k tokens into out: the tokens the grammar
 * forces, then the source's continuation as far as the grammar takes it (src->admit: of its
 * candidates, the one taken furthest), then forced tokens again, and so on. A tool call is
 * mostly forced syntax around copied values, so one draft can run through `"}, {"name": "` and
 * the next value. The draft is also written after hist[0..n) as it grows (hist must have room
 * for n + k; the source reads it there). *cls: the first lookup's class. The matcher is left as
 * it was. */
TERN_NODISCARD tern_status gen_grammar_draft(struct gen_grammar *gr, struct spec_source *src, int32_t *hist, int n, int k,
                              int32_t *out, int *n_out, int *cls);
/* Undo the last n accepted tokens (forced tokens the caller did not hand over). */
void gen_grammar_rollback(struct gen_grammar *gr, int n);
double gen_cpu_ms(void);

/* Scratch of the verifier, n_vocab wide, owned by the generator. */
struct spec_verifier {
    int n_vocab;
    float *p;        /* (n_vocab) target distribution */
    float *masked;   /* (n_vocab) logits after the hook / grammar, or NULL without either */
    const struct gen_token_hook *hook;
    struct gen_grammar *gr; /* or NULL: a grammar masks every position and hears every kept token */
};

/* The target's choice at one position with no draft to check: sample (through the hook's and
 * the grammar's masks) and tell them. A position where the grammar allows exactly one token
 * takes it without sampling (a forced token: no random draw, counted in gr->forced). */
int32_t spec_sample(struct spec_verifier *v, struct tern_sampler *s, const float *logits);
/* One drafted token d at a position whose target logits are `logits` (q: the draft's distribution
 * there, NULL = a point mass). Greedy: kept iff it is the target's choice. Sampling: kept with
 * probability min(1, p(d)/q(d)). Returns true if kept (*next = d); else *next is the token drawn
 * instead (the target's choice, or a draw from normalize(max(0, p - q))). The sampler and the
 * hook see the resulting token, as in plain decoding. */
bool spec_check(struct spec_verifier *v, struct tern_sampler *s, const float *logits, int32_t d,
                const float *q, int32_t *next);
/* Decide drafted tokens d[0..k) against the target's logits rows L[0..k] (L[i] is the
 * distribution at d[i]'s position, L[k] the one after the last draft). Greedy: d[i] is kept
 * while it equals the target's own choice. Sampling: kept with probability min(1, p/q) (q a
 * point mass when q is NULL), the first rejected position drawn from normalize(max(0, p - q)).
 * Returns the number kept; *next is the target's token after them (the correction, or a fresh
 * draw from L[k] when all were kept). The sampler sees exactly the kept tokens and *next, in
 * order, as it would in plain decoding. */
int spec_verify(struct spec_verifier *v, struct tern_sampler *s, const float *const *L,
                const int32_t *d, const float *q, int k, int32_t *next);

#endif
