/* spec_ctl.c — the adaptive draft length: speculate only as far as it pays, and not at all when
 * it does not, losing at most 3 % against plain decoding while finding out.
 *
 * Read spec.h first. Model: each drafted token is accepted with probability a (given the ones
 * before it were), so a round drafting k tokens yields E(k) = 1 + a + ... + a^k tokens (the
 * kept drafts plus the target's own next token) and costs
 *     T(k) = lag * t_catch + t_draft_round + k * t_draft_tok + t_verify(k + 1)
 * (lag: tokens a drafter must catch up on first), against 1 token per t_plain without
 * speculation. The controller picks the k in [n_min, n_max] with the highest E(k) / T(k).
 *
 * Every quantity is measured in this run: a from the rounds (per proposal class, forgetting old
 * rounds at 0.9 per round so it follows the text), times as the median of the last 5
 * observations (one descheduled pass on a busy machine decides nothing). A verify size measured
 * fewer than 3 times is estimated by a straight line from t_plain with the median extra cost
 * per token seen at any size; every 16th round tries such a size, since kernels change at some
 * batch sizes and a line may hide a cheaper one. t_plain, the one-token step, is the fastest
 * of the last 5 (plain_step), measured in the first 5 target passes, in every plain step, and
 * at least every 256 passes, since the machine's load drifts.
 *
 * The 3 % bound. Each generation may spend 2.5 % of the one-token steps it has produced so far on
 * finding out: that is its credit, counted in one-token steps and earned token by token (granted
 * up front on max_tokens, an answer that ended after 24 of 512 tokens lost 6-22 % on tern-tool
 * with its drafter: the allowance of 512 tokens spent on 24). The other half point is for what no round
 * is charged with: the bookkeeping of every plain step (the controller, the timers) and a target
 * whose caches the drafter's passes cooled; on tern-tool (0.27 ms a step, compute-bound, 14.5 MiB
 * of weights) a drafter that never pays measured 0.967x with a 3 % credit. A batcher (no
 * generations: spec_ctl_earn) earns 3 % of its steps, capped; its rounds are fewer and larger. Every round adds what it won or lost
 * against plain decoding (its tokens minus its time in one-token steps), and a round runs only
 * when the credit covers its worst case (nothing accepted: one token for its time). So when
 * speculation pays the credit grows and never binds; when it does not, the loss stops at the
 * allowance. A drafter far behind (a long prompt at its first round, or the tokens generated while
 * speculation was off) catches up on only as many recent tokens as the credit pays for, starting
 * its context afresh there (a one-off; the choice of k assumes steady speculation, where it
 * catches up on a token or two per round). When the estimate says no k pays, speculation stays off for 16 rounds, doubling up
 * to 1024 while the probes after them keep failing. What was learnt (times, acceptance) carries
 * over to the next generation; the credit does not. */
#include <math.h>
#include <string.h>

#include "gen/spec.h"
#include "util/check.h"

enum { CTL_REPLAIN = 256, CTL_OFF_MIN = 16, CTL_OFF_MAX = 1024 };
#define CTL_FORGET 0.9

static void est_add(struct spec_est *e, double x)
{
    TERN_ASSERT(e->head >= 0 && e->head < SPEC_EST_N && e->n >= 0 && e->n <= SPEC_EST_N);
    e->v[e->head] = x;
    e->head = (e->head + 1) % SPEC_EST_N;
    if (e->n < SPEC_EST_N) e->n++;
}

/* Median of the observations (0 if none). */
static double est_get(const struct spec_est *e)
{
    double s[SPEC_EST_N];
    TERN_ASSERT(e->n >= 0 && e->n <= SPEC_EST_N);
    memcpy(s, e->v, sizeof(double) * (size_t)e->n);
    for (int i = 1; i < e->n; i++)
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            const double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    if (e->n == 0) return 0;
    return e->n % 2 ? s[e->n / 2] : 0.5 * (s[e->n / 2 - 1] + s[e->n / 2]);
}

/* The one-token step: the fastest of the observations, not their median. The first passes after a
 * prompt run slow (0.66, 0.45, 0.34 ms against a steady 0.29 ms for tern-tool after 340 prompt
 * tokens: caches refilling after the prefill), and a plain step taken as slower than it is makes
 * every round look like a gain; a plain pass does the same work every time, so only
 * descheduling or a cold cache makes one slower, never faster. Too fast an estimate errs
 * towards plain decoding, which is the side to err on. */
static double plain_step(const struct spec_ctl *c)
{
    double m = c->t_plain.n ? c->t_plain.v[0] : 0;
    for (int i = 1; i < c->t_plain.n; i++)
        if (c->t_plain.v[i] < m) m = c->t_plain.v[i];
    return m;
}

void spec_ctl_init(struct spec_ctl *c, int n_min, int n_max, bool costly, double size_ratio)
{
    /* t_ver and the expectation arrays are sized for SPEC_MAX_DRAFT drafts */
    TERN_ASSERT(n_min >= 0 && n_min <= n_max && n_max <= SPEC_MAX_DRAFT);
    memset(c, 0, sizeof *c);
    c->n_min = n_min;
    c->n_max = n_max;
    c->fixed = n_min == n_max;
    c->costly = costly;
    c->size_ratio = size_ratio;
    c->catch_ratio = size_ratio;
    c->off_len = CTL_OFF_MIN;
}

void spec_ctl_set_catch_ratio(struct spec_ctl *c, double catch_ratio) { c->catch_ratio = catch_ratio; }

void spec_ctl_begin(struct spec_ctl *c, int start_steps, double margin)
{
    c->credit = margin * start_steps;
    c->earn = 0;
}

void spec_ctl_begin_generation(struct spec_ctl *c, double margin)
{
    /* per call: what was learnt (times, acceptance) carries over, spending room does not */
    c->credit = 0;
    c->earn = margin;
}

void spec_ctl_produced(struct spec_ctl *c, int n_tokens)
{
    c->credit += c->earn * n_tokens;
}

/* Before a quantity is measured it is guessed twice: `worst` for the credit check (a verify pass
 * that shares little of the weight reads; a drafter as slow per byte as the target at 1.5x its
 * share of the bytes), otherwise for choosing (the usual shares). Decode streams the weights, so
 * a drafter's step costs about its share of the target's bytes; catching up is batched and runs
 * several times faster per token. */
static double est_verify(const struct spec_ctl *c, int b, double t_plain, bool worst)
{
    if (c->t_ver[b].n >= 3) return est_get(&c->t_ver[b]);
    if (c->t_extra.n) return t_plain + est_get(&c->t_extra) * (b - 1);
    return t_plain * (1.0 + (worst ? 0.6 : 0.1) * (b - 1));
}

static double est_draft_tok(const struct spec_ctl *c, double t_plain, bool worst)
{
    if (c->t_draft_tok.n) return est_get(&c->t_draft_tok);
    return c->size_ratio * t_plain * (worst ? 1.5 : 1.0);
}

/* Seconds per token of a drafter catching up on many tokens at once (batched). */
static double est_catch_tok(const struct spec_ctl *c, double t_plain, bool worst)
{
    if (c->t_catch_tok.n) return est_get(&c->t_catch_tok);
    return c->catch_ratio * t_plain * (worst ? 0.3 : 0.15);
}

/* Seconds of a round drafting k tokens after catching up on lag (1 or 2 tokens in steady
 * speculation: about a drafting step each). */
static double round_cost(const struct spec_ctl *c, int k, int lag, double t_plain, bool worst)
{
    const double tok = est_draft_tok(c, t_plain, worst);
    double catch_up = 0;
    if (c->costly) catch_up = lag <= 2 ? tok : lag * est_catch_tok(c, t_plain, worst); /* 1-2: one pass */
    return catch_up + est_get(&c->t_draft_round) + (c->costly ? k * tok : 0) +
           est_verify(c, k + 1, t_plain, worst);
}

/* Can a round of k drafts run on the credit? Its worst case (nothing kept: one token for its
 * time) must fit. A drafter that is far behind (lag: the prompt, or tokens generated while
 * off) may catch up on only the most recent *lag_max tokens, starting its context afresh
 * there, when all of them do not fit; fewer than SPEC_MIN_WINDOW is not worth drafting from. */
static bool affordable(const struct spec_ctl *c, int k, int lag, double t_plain, int *lag_max)
{
    const double rest = round_cost(c, k, lag < 2 ? lag : 2, t_plain, true) / t_plain - 1.0;
    *lag_max = lag;
    if (lag <= 2) return c->credit >= rest;
    const double per = est_catch_tok(c, t_plain, true) / t_plain;
    const double fit = (c->credit - rest) / per;
    if (fit >= lag) return true;
    if (fit < SPEC_MIN_WINDOW) return false;
    *lag_max = (int)fit;
    return true;
}

/* The choice itself, from e[k] = expected tokens of a round of k drafts (e NULL: nothing known
 * about the acceptance yet: the cheapest probe, when the credit pays for it). */
static int choose(struct spec_ctl *c, int k_cap, const double *e, int lag, int *lag_max)
{
    *lag_max = lag;
    if (k_cap > c->n_max) k_cap = c->n_max;
    if (k_cap < c->n_min) return 0;
    if (c->fixed) return k_cap;
    if (c->t_plain.n < SPEC_PLAIN_FIRST || c->since_plain >= CTL_REPLAIN) return 0; /* measure the target alone */
    if (c->off_left > 0) {
        c->off_left--;
        return 0;
    }
    const double t_plain = plain_step(c);
    TERN_ASSERT(k_cap <= SPEC_MAX_DRAFT && t_plain >= 0);
    if (!e) {
        /* nothing known about this class yet: the cheapest probe, as soon as the credit pays */
        const int k = c->n_min < k_cap ? c->n_min : k_cap;
        return affordable(c, k, lag, t_plain, lag_max) ? k : 0;
    }
    /* what pays in steady speculation (a drafter catching up on a token or two per round); a
     * long catch-up is a one-off paid from the credit below */
    const int steady = lag < 2 ? lag : 2;
    int best = 0;
    double best_rate = 1.0 / t_plain;
    for (int k = c->n_min > 1 ? c->n_min : 1; k <= k_cap; k++) {
        const double r = e[k] / round_cost(c, k, steady, t_plain, false);
        if (r > best_rate) {
            best_rate = r;
            best = k;
        }
    }
    if (!best) {
        if (c->probing) {
            /* an off period ended: one probe, whatever the old estimate says, to refresh it */
            c->probing = false;
            const int k = c->n_min > 2 ? c->n_min : (k_cap < 2 ? k_cap : 2);
            if (affordable(c, k, lag, t_plain, lag_max)) return k;
        }
        c->off_left = c->off_len - 1; /* this round is the first one off */
        c->off_len = c->off_len * 2 < CTL_OFF_MAX ? c->off_len * 2 : CTL_OFF_MAX;
        c->probing = true;
        c->n_off++;
        return 0;
    }
    if (!affordable(c, best, lag, t_plain, lag_max)) return 0;
    /* Every 16th round, a size measured fewer than 3 times: kernels change at some batch sizes
     * (the AVX-512 decode kernels hand over to the prefill panels at 6 tokens), so a straight
     * line from the sizes tried may hide a cheaper one. */
    if (++c->rounds % 16 == 0)
        for (int k = c->n_min; k <= k_cap; k++)
            if (c->t_ver[k + 1].n < 3 && affordable(c, k, lag, t_plain, lag_max)) return k;
    return best;
}

bool spec_ctl_resting(const struct spec_ctl *c)
{
    return !c->fixed && (c->t_plain.n < SPEC_PLAIN_FIRST || c->since_plain >= CTL_REPLAIN ||
                         c->off_left > 0);
}

int spec_ctl_choose(struct spec_ctl *c, int k_cap, int cls, int lag, int *lag_max)
{
    if (k_cap > c->n_max) k_cap = c->n_max;
    TERN_ASSERT(cls >= 0 && cls < SPEC_N_CLASS, "a proposal class indexes acc and tested");
    if (c->tested[cls] < 1) return choose(c, k_cap, NULL, lag, lag_max);
    /* one acceptance a for every position: E(k) = 1 + a + ... + a^k */
    const double a = (c->acc[cls] + 0.5) / (c->tested[cls] + 1.0); /* prior 1/2, weight 1 */
    double e[SPEC_MAX_DRAFT + 1], ak = 1.0;
    e[0] = 1.0;
    for (int k = 1; k <= k_cap; k++) {
        ak *= a;
        e[k] = e[k - 1] + ak;
    }
    return choose(c, k_cap, e, lag, lag_max);
}

int spec_ctl_choose_e(struct spec_ctl *c, int k_cap, const double *e, int lag, int *lag_max)
{
    return choose(c, k_cap, e, lag, lag_max);
}

void spec_ctl_account(struct spec_ctl *c, int k, double a, double t_draft, double t_sync, int n_sync,
                      double t_verify)
{
    c->since_plain++;
    if (k == 0) {
        est_add(&c->t_plain, t_verify);
        c->since_plain = 0;
        return;
    }
    if (k + 1 <= SPEC_MAX_DRAFT + 1) est_add(&c->t_ver[k + 1], t_verify);
    if (c->t_plain.n) {
        const double t_plain = plain_step(c);
        const double extra = (t_verify - t_plain) / k;
        est_add(&c->t_extra, extra > 0 ? extra : 0);
        c->credit += (a + 1) - (t_draft + t_verify) / t_plain; /* won (+) or lost (-) */
    }
    if (c->costly) {
        est_add(&c->t_draft_tok, (t_draft - t_sync) / k);
        if (n_sync > 2) est_add(&c->t_catch_tok, t_sync / n_sync);
    } else {
        est_add(&c->t_draft_round, t_draft);
    }
    if (a > 0) c->off_len = CTL_OFF_MIN;
}

void spec_ctl_update(struct spec_ctl *c, int cls, int k, int a, double t_draft, double t_sync,
                     int n_sync, double t_verify)
{
    TERN_ASSERT(cls >= 0 && cls < SPEC_N_CLASS && k >= 0 && k <= SPEC_MAX_DRAFT);
    TERN_ASSERT(a >= 0 && a <= k, "accepted <= drafted");
    if (k > 0) {
        /* tokens tested: the kept ones, plus the one that was rejected (later ones never were) */
        c->acc[cls] = CTL_FORGET * c->acc[cls] + a;
        c->tested[cls] = CTL_FORGET * c->tested[cls] + a + (a < k ? 1 : 0);
    }
    spec_ctl_account(c, k, a, t_draft, t_sync, n_sync, t_verify);
}

void spec_ctl_refused(struct spec_ctl *c, int cls, double t_draft)
{
    TERN_ASSERT(cls >= 0 && cls < SPEC_N_CLASS);
    c->acc[cls] = CTL_FORGET * c->acc[cls];
    c->tested[cls] = CTL_FORGET * c->tested[cls] + 1;
    spec_ctl_charge(c, t_draft);
}

void spec_ctl_charge(struct spec_ctl *c, double t)
{
    if (c->t_plain.n) c->credit -= t / plain_step(c);
}

void spec_ctl_earn(struct spec_ctl *c, double steps, double cap_steps)
{
    c->credit += SPEC_BATCH_MARGIN * steps;
    if (c->credit > SPEC_BATCH_MARGIN * cap_steps) c->credit = SPEC_BATCH_MARGIN * cap_steps;
}
