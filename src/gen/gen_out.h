/* gen_out.h — one sequence's output, token by token: choosing the next tokens (sampling through
 * the grammar's mask, forced tokens) and handing them over (callbacks, detokenizer, the stop
 * rules). The one implementation that the generator (generate.c, one sequence, speculation)
 * and the batcher (batcher.c, one gen_out per slot) share, so a request stops on the same token
 * and gets the same constrained output whichever drives it.
 *
 * Read spec.h first (struct spec_verifier masks a position through the grammar; struct
 * gen_grammar is the matcher and its counters). The caller owns the KV cache: gen_out only says
 * which tokens go into it next (pend[0..np), positions pos..pos+np-1), one forward pass for all
 * of them, and that the logits of the last one decide the next choice. Nothing here allocates. */
#ifndef TERN_GEN_GEN_OUT_H
#define TERN_GEN_GEN_OUT_H

#include "gen/spec.h"

/* Tokens chosen but not yet in the KV cache at the start of a pass: the sampled one and the
 * forced tokens after it (one forward pass takes them all). */
#define GEN_MAX_PENDING 64

/* Reasoning control (tern_reasoning_ctl) of one sequence: while inside, the grammar is held in
 * gr_wait (ver->gr NULL: unconstrained), reasoning tokens are counted, and once the budget is
 * spent the close tokens are chosen one per step without sampling (forcing >= 0). */
#define GEN_MAX_CLOSE 32
struct gen_reason {
    bool inside;
    int budget, used;
    int32_t close[GEN_MAX_CLOSE];
    int n_close;
    int forcing;                 /* index of the next close token to force; -1: not forcing */
    char end[32];                /* the closing text, NUL-terminated */
    size_t end_len;
    char tail[64];               /* the last bytes of reasoning text (end may span pieces) */
    size_t tail_len;
    struct gen_grammar *gr_wait; /* the request's grammar, held back while inside */
};

struct gen_out {
    const struct tern_tokenizer *tok;  /* end-of-generation tokens */
    struct spec_verifier *ver;         /* masks; ver->gr: the grammar's matcher (NULL: none) */
    struct tern_sampler *sampler;
    struct tern_detokenizer *d;
    tern_token_fn on_token;            /* may be NULL */
    tern_logprob_fn on_logprob;        /* may be NULL; when set, no forced tokens (gen_out_choose) */
    int n_top_logprobs;                /* 0 .. TERN_MAX_TOP_LOGPROBS */
    struct tern_token_logprob lp;      /* on_logprob's argument */
    tern_piece_fn on_piece;            /* may be NULL */
    void *user;
    bool ignore_eog;
    int max_tokens;
    int n_ctx;                         /* positions: a token at pos >= n_ctx cannot be decoded */
    struct tern_gen_stats *st;         /* n_generated, ttft_ms, stop (start it at MAX_TOKENS) */
    double t0;                         /* ms (CLOCK_MONOTONIC) the request started: TTFT */
    double t_first;                    /* set at the first token */
    bool stop;                         /* a callback asked to stop (st->stop says which) */
    struct gen_reason rs;              /* gen_reason_init, then gen_out_reason_start */
};

/* Check c and fill rs (not yet started); `who` prefixes errors ("generate", "batcher"). */
TERN_NODISCARD tern_status gen_reason_init(struct gen_reason *rs, const struct tern_reasoning_ctl *c, const char *who);
/* Start o->rs on o (its ver->gr set for the request): inside, the grammar waits. */
void gen_out_reason_start(struct gen_out *o);
/* Inside the reasoning or forcing its close: no drafts now. */
static inline bool gen_out_reasoning(const struct gen_out *o) { return o->rs.inside || o->rs.forcing >= 0; }

double gen_now_ms(void);

/* Set d's preserved tokens for a request (tern_gen_params.preserve, tern_batch_request.preserve):
 * ids[0..n) and the control tokens grammar g (may be NULL) produces, which the output must show
 * since the grammar counts their text. TERN_ERR_ARG / TERN_ERR_RANGE name the bad id or the
 * count; `who` prefixes the message ("generate", "batcher"). */
TERN_NODISCARD tern_status gen_out_preserve(struct tern_detokenizer *d, const int32_t *ids, int n,
                             const struct tern_grammar *g, const char *who);

/* Hand the caller one chosen token that will sit at KV position pos: count it, on_token,
 * end-of-generation, text, a finished grammar document (`last`: the matcher holds no token
 * beyond this one). Returns true when generation ends with this token (it then stays out of the
 * KV cache; st->stop says why, MAX_TOKENS left as set); *rc set on a detokenizer failure. */
bool gen_out_deliver(struct gen_out *o, int32_t tok, int pos, bool last, tern_status *rc);

/* Hand over n forced tokens waiting at pend[*np..*np+n) (already in the matcher; positions
 * pos0 + *np ..), moving *np past them. True when one of them ends generation; the forced
 * tokens after it are taken back out of the matcher, so it holds the output. */
bool gen_out_hand_forced(struct gen_out *o, int32_t *pend, int *np, int pos0, int n, tern_status *rc);

/* Append the grammar's forced tokens at this point to pend[*np..cap) and hand them over. */
bool gen_out_add_forced(struct gen_out *o, int32_t *pend, int *np, int pos0, int cap, tern_status *rc);

/* Verifying drafts d[0..k) under a grammar, at draft *a, where the grammar forces forced[0..*nf)
 * (already in the matcher): the drafts that are those tokens are kept as plain decoding takes
 * forced tokens (the sampler hears them, no draw), each handed over and recorded at
 * rec[pos0 + its index] (draft i sits at position pos0 + i), *a moving past them. True when one
 * of them ends generation (it is handed over, not recorded or counted in *a; the forced tokens
 * after it are taken back out of the matcher). Otherwise *nf = the forced tokens past the
 * drafts, moved to forced[0..*nf): the next pending ones (0: verifying goes on). */
bool gen_out_forced_drafts(struct gen_out *o, const int32_t *d, int k, int *a, int32_t *forced, int *nf,
                           int32_t *rec, int pos0, tern_status *rc);

/* The output's next tokens from position pos on, whose distribution is `logits`: the grammar's
 * forced tokens if it forces any here (no sampling); else one chosen token (through the mask)
 * followed by whatever the grammar forces after it. With on_logprob, always the one chosen
 * token (reported to on_logprob first): a forced token has no distribution of its own until it
 * gets a pass. Handed over into pend[0..*np) (cap >= 1
 * entries), which one forward pass then decodes. True when generation ends. */
bool gen_out_choose(struct gen_out *o, const float *logits, int32_t *pend, int *np, int pos, int cap,
                    tern_status *rc);

/* out = the log-probability of tok under logits[0..n_vocab) and the n_top most likely tokens
 * (struct tern_token_logprob, tern.h). */
void gen_logprob_compute(const float *logits, int n_vocab, int32_t tok, int n_top,
                         struct tern_token_logprob *out);

/* The grammar's counters into st (and st->incomplete) at the end of a constrained request. */
void gen_out_grammar_stats(const struct gen_grammar *gr, struct tern_gen_stats *st);

#endif
