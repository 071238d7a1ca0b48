/* gen_logprob.c — a generated token's log-probability and the most likely tokens at its
 * position, from the raw logits (struct tern_token_logprob in tern.h says what is reported).
 *
 * One pass finds the largest logit and keeps the n_top best (a small sorted array: n_top <= 20,
 * so insertion is cheaper than a heap); a second sums exp(logit - max) in double. A log-prob is
 * then logit - max - log(sum). Two passes over the vocabulary (about 0.3 ms for 152k logits):
 * paid only by requests that ask for log-probabilities. */
#include <math.h>

#include "gen/gen_out.h"

/* a before b in the top list: larger logit, then lower id */
static bool better(float la, int32_t a, float lb, int32_t b) { return la > lb || (la == lb && a < b); }

void gen_logprob_compute(const float *logits, int n_vocab, int32_t tok, int n_top,
                         struct tern_token_logprob *out)
{
    float mx = -INFINITY;
    int n = 0;
    int32_t *ids = out->top;
    float *val = out->top_logprob; /* logits while selecting; log-probs at the end */
    for (int32_t i = 0; i < n_vocab; i++) {
        const float l = logits[i];
        if (l > mx) mx = l;
        if (n_top == 0 || (n == n_top && !better(l, i, val[n - 1], ids[n - 1]))) continue;
        int k = n < n_top ? n++ : n - 1; /* drop the worst when full */
        while (k > 0 && better(l, i, val[k - 1], ids[k - 1])) {
            val[k] = val[k - 1];
            ids[k] = ids[k - 1];
            k--;
        }
        val[k] = l;
        ids[k] = i;
    }
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    out->token = tok;
    out->logprob = (float)(logits[tok] - lse);
    out->n_top = n;
    for (int k = 0; k < n; k++) val[k] = (float)(val[k] - lse);
}
