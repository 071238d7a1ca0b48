/* distill_loss.c — the per-row loss of tern distill and its gradient (read distill.h first).
 *
 * With p = softmax(s / tau) over the student's logits s, K the teacher's top-k ids with
 * probabilities q_i, q_t the teacher's tail mass and p_t = sum of p over ids outside K:
 *   KL = sum_i q_i (log q_i - log p_{K_i}) + q_t (log q_t - log p_t)
 *   L  = w (w_kd tau^2 KL + w_ce CE),  CE = logsumexp(s) - s_target
 * and, with Q = sum_i q_i + q_t (1 up to the cache's float rounding, kept so the gradient is
 * exactly the derivative of the loss as computed):
 *   dL/ds_j = w [w_kd tau (Q p_j - q_j)             for j in K
 *               w_kd tau (Q - q_t / p_t) p_j         for j outside K
 *               + w_ce (softmax(s)_j - [j = target])].
 * The student's tail is summed directly over the ids outside K (not as 1 - sum over K), so a
 * tail of 1e-12 keeps its digits; it is floored at 1e-300 so a student with no mass left outside
 * K gives a large but finite loss. tests/test_distill_torch.c checks loss and gradient against
 * PyTorch's autograd of the same formula. */
#include <math.h>
#include <string.h>

#include "train/distill.h"

void train_kd_row(float *logits, int V, int32_t target, float w, const int32_t *ids,
                  const float *logp, float tail, int k, float tau, float w_kd, float w_ce,
                  double scale, float *scratch, struct kd_row *out)
{
    float mx = logits[0];
    int arg = 0;
    for (int j = 1; j < V; j++)
        if (logits[j] > mx) mx = logits[j], arg = j;
    out->agree = arg == ids[0];
    /* CE at temperature 1 */
    double sum1 = 0.0;
    for (int j = 0; j < V; j++) sum1 += exp((double)(logits[j] - mx));
    out->ce = (double)mx + log(sum1) - (double)logits[target];
    /* the student at tau: scratch = exp((s - max) / tau), its sum, and the sum outside K */
    const double itau = 1.0 / (double)tau;
    double sumt = 0.0;
    for (int j = 0; j < V; j++) {
        scratch[j] = (float)exp((double)(logits[j] - mx) * itau);
        sumt += scratch[j];
    }
    float saved[KD_MAX_K];
    for (int i = 0; i < k; i++) {
        saved[i] = scratch[ids[i]];
        scratch[ids[i]] = 0.0f;
    }
    double tails = 0.0;
    for (int j = 0; j < V; j++) tails += scratch[j];
    for (int i = 0; i < k; i++) scratch[ids[i]] = saved[i];
    if (tails < 1e-300) tails = 1e-300;
    const double log_sumt = log(sumt);
    double kl = 0.0, Q = 0.0;
    for (int i = 0; i < k; i++) {
        const double q = exp((double)logp[i]);
        const double lp = (double)(logits[ids[i]] - mx) * itau - log_sumt;
        kl += q * ((double)logp[i] - lp);
        Q += q;
    }
    const double qt = tail;
    if (qt > 0.0) kl += qt * (log(qt) - (log(tails) - log_sumt));
    Q += qt;
    out->kl = kl;
    /* gradient, written over the logits; the top-k entries first, while s is intact */
    const double g_kd = (double)w * scale * w_kd * tau, g_ce = (double)w * scale * w_ce;
    double gk[KD_MAX_K];
    for (int i = 0; i < k; i++) {
        const int j = ids[i];
        const double p1 = exp((double)(logits[j] - mx)) / sum1;
        gk[i] = g_kd * (Q * scratch[j] / sumt - exp((double)logp[i])) + g_ce * p1;
    }
    const double c_out = qt > 0.0 ? Q / sumt - qt / tails : Q / sumt;
    for (int j = 0; j < V; j++) {
        const double p1 = exp((double)(logits[j] - mx)) / sum1;
        logits[j] = (float)(g_kd * c_out * scratch[j] + g_ce * p1);
    }
    for (int i = 0; i < k; i++) logits[ids[i]] = (float)gk[i];
    logits[target] -= (float)g_ce;
}
