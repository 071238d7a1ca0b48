/* spec_ctl.c — the adaptive draft length: speculate only as far as it pays, and not at all when
 * it does not (re-probing now and then).
 *
 * Read spec.h first. Model: each drafted token is accepted with probability a (given the ones
 * before it were), so a round drafting k tokens yields E(k) = 1 + a + ... + a^k tokens (the
 * kept drafts plus the target's own next token) and costs
 *     T(k) = t_draft_round + k * t_draft_tok + t_verify(k + 1),
 * against 1 token per t_plain without speculation. The controller picks the k in [n_min, n_max]
 * with the highest E(k) / T(k). When none beats 1 / t_plain in two rounds running it stays off
 * for a while (16 rounds, doubling up to 1024 while the probes that follow keep failing), then
 * probes again. Everything is measured in this run: a from the rounds (per proposal class,
 * forgetting old rounds at 0.9 per round so it follows the text), times as the median of the
 * last 5 observations (one descheduled pass on a busy machine does not decide anything). A
 * verify size measured fewer than 3 times is estimated by a straight line from t_plain with the
 * median extra cost per token seen at any size; every 16th round tries a size with fewer than 3
 * measurements, so one a straight line misjudges gets measured. t_plain is measured in the first 3 target passes and again every 256, since
 * the machine's load drifts. */
#include <math.h>
#include <string.h>

#include "gen/spec.h"

enum { CTL_PLAIN_FIRST = 3, CTL_REPLAIN = 256, CTL_OFF_MIN = 16, CTL_OFF_MAX = 1024, CTL_STRIKES = 2 };
#define CTL_FORGET 0.9

static void est_add(struct spec_est *e, double x)
{
    e->v[e->head] = x;
    e->head = (e->head + 1) % SPEC_EST_N;
    if (e->n < SPEC_EST_N) e->n++;
}

/* Median of the observations (0 if none). */
static double est_get(const struct spec_est *e)
{
    double s[SPEC_EST_N];
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

void spec_ctl_init(struct spec_ctl *c, int n_min, int n_max, bool costly)
{
    memset(c, 0, sizeof *c);
    c->n_min = n_min;
    c->n_max = n_max;
    c->fixed = n_min == n_max;
    c->costly = costly;
    c->off_len = CTL_OFF_MIN;
}

/* Time of a verify pass over b tokens (b >= 2): the median of its own observations once there
 * are 3, else a straight line from t_plain with the median extra cost per token seen at any
 * size (every size is tried before one slow pass can rule it out), else a guess. */
static double est_verify(const struct spec_ctl *c, int b, double t_plain)
{
    if (c->t_ver[b].n >= 3) return est_get(&c->t_ver[b]);
    if (c->t_extra.n) return t_plain + est_get(&c->t_extra) * (b - 1);
    return t_plain * (1.0 + 0.1 * (b - 1)); /* replaced once measured */
}

int spec_ctl_choose(struct spec_ctl *c, int k_cap, int cls)
{
    if (k_cap > c->n_max) k_cap = c->n_max;
    if (k_cap < c->n_min) return 0;
    if (c->fixed) return k_cap;
    if (c->t_plain.n < CTL_PLAIN_FIRST || c->since_plain >= CTL_REPLAIN) return 0; /* measure the target alone */
    if (c->off_left > 0) {
        c->off_left--;
        return 0;
    }
    const double t_plain = est_get(&c->t_plain);
    const double a = (c->acc[cls] + 1.0) / (c->tested[cls] + 2.0); /* prior 1/2 */
    const double t_round = est_get(&c->t_draft_round), t_tok = est_get(&c->t_draft_tok);
    int best = 0;
    double best_rate = 1.0 / t_plain, e = 1.0, ak = 1.0;
    for (int k = 1; k <= k_cap; k++) {
        ak *= a;
        e += ak;
        if (k < c->n_min) continue;
        const double cost = t_round + k * t_tok + est_verify(c, k + 1, t_plain);
        if (e / cost > best_rate) {
            best_rate = e / cost;
            best = k;
        }
    }
    const int fallback = c->n_min > 2 ? c->n_min : (k_cap < 2 ? k_cap : 2);
    if (c->probing) {
        /* after an off period: try once whatever the old estimate says, to refresh it */
        c->probing = false;
        c->strikes = CTL_STRIKES - 1; /* a failed probe switches off again at once */
        return best ? best : fallback;
    }
    if (best) {
        c->strikes = 0;
        /* Every 16th round, a size measured fewer than 3 times: kernels change at some batch
         * sizes (the AVX-512 decode kernels hand over to the prefill panels at 6 tokens), so a
         * straight line from the sizes tried may hide a cheaper one. */
        if (++c->rounds % 16 == 0)
            for (int k = c->n_min; k <= k_cap; k++)
                if (c->t_ver[k + 1].n < 3) return k;
        return best;
    }
    if (++c->strikes < CTL_STRIKES) return fallback; /* one more round of evidence first */
    c->strikes = 0;
    c->off_left = c->off_len - 1; /* this round is the first one off */
    c->off_len = c->off_len * 2 < CTL_OFF_MAX ? c->off_len * 2 : CTL_OFF_MAX;
    c->probing = true;
    c->n_off++;
    return 0;
}

void spec_ctl_update(struct spec_ctl *c, int cls, int k, int a, double t_draft, double t_sync,
                     int n_sync, double t_verify)
{
    c->since_plain++;
    if (k == 0) {
        est_add(&c->t_plain, t_verify);
        c->since_plain = 0;
        return;
    }
    /* tokens tested: the kept ones, plus the one that was rejected (later ones never were) */
    c->acc[cls] = CTL_FORGET * c->acc[cls] + a;
    c->tested[cls] = CTL_FORGET * c->tested[cls] + a + (a < k ? 1 : 0);
    if (k + 1 <= SPEC_MAX_DRAFT + 1) est_add(&c->t_ver[k + 1], t_verify);
    if (c->t_plain.n) {
        const double extra = (t_verify - est_get(&c->t_plain)) / k;
        est_add(&c->t_extra, extra > 0 ? extra : 0);
    }
    if (c->costly) {
        est_add(&c->t_draft_tok, (t_draft - t_sync) / k);
        /* a catch-up after an off period is a one-off: the steady cost is 1-2 tokens */
        if (n_sync <= 2) est_add(&c->t_draft_round, t_sync);
    } else {
        est_add(&c->t_draft_round, t_draft);
    }
    if (a > 0) c->off_len = CTL_OFF_MIN;
}
