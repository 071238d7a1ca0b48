/* spec_verify.c — accepting or rejecting drafted tokens against the target's logits.
 *
 * Read spec.h first. Greedy decoding keeps a drafted token exactly when it is the token the
 * target would have chosen itself, so the output is the target's. Sampling uses the rejection
 * rule of speculative sampling (Leviathan et al. 2023; Chen et al. 2023): with p the target's
 * distribution (tern_sampler_probs: the same penalty, temperature and filters as a plain draw)
 * and q the draft's, a drafted token x is kept with probability min(1, p(x)/q(x)); the first
 * rejected position instead draws from normalize(max(0, p - q)). Summed over both branches,
 * P(token = y) = min(p(y), q(y)) + (1 - sum_x min(p(x), q(x))) * max(0, p(y) - q(y)) / Z = p(y),
 * since Z = sum_y max(0, p(y) - q(y)) = 1 - sum_x min(p(x), q(x)). A lookup draft is a point
 * mass (q = 1 at x): kept with probability p(x), else drawn from p without x. Uniforms come from
 * the target sampler's RNG, so a seed fixes every decision. */
#include <math.h>
#include <string.h>

#include "gen/spec.h"
#include "util/check.h"
#include "sample/sampler.h"

/* The logits the sampler should see: masked by the hook and the grammar into v->masked, or as
 * they are. *only: the one token the grammar allows here, or -1 (several, or no grammar). */
static const float *view(struct spec_verifier *v, const float *logits, int32_t *only)
{
    *only = -1;
    const bool hook = v->hook && v->hook->mask, gram = v->gr && v->gr->m;
    if (!hook && !gram) return logits;
    TERN_ASSERT(v->masked && (!gram || (v->gr->n_tok > 0 && v->gr->n_tok <= v->n_vocab)),
                "the tokenizer's ids are a prefix of the model's rows");
    memcpy(v->masked, logits, sizeof(float) * (size_t)v->n_vocab);
    if (hook) v->hook->mask(v->hook->user, v->masked, v->n_vocab);
    if (gram) {
        const double t0 = gen_cpu_ms();
        const int allowed = tern_grammar_matcher_apply(v->gr->m, v->masked);
        for (int i = v->gr->n_tok; i < v->n_vocab; i++) v->masked[i] = -INFINITY; /* padding rows */
        const double dt = gen_cpu_ms() - t0;
        v->gr->masks++;
        v->gr->mask_ms += dt;
        v->gr->ms += dt;
        if (allowed == 1)
            for (int i = 0; i < v->n_vocab; i++)
                if (v->masked[i] != -INFINITY) {
                    *only = i;
                    break;
                }
    }
    return v->masked;
}

static void kept(struct spec_verifier *v, int32_t tok)
{
    if (v->hook && v->hook->accept) v->hook->accept(v->hook->user, tok);
    if (v->gr && v->gr->m) gen_grammar_accept(v->gr, tok);
}

/* A position the grammar decides alone: take its token, tell the sampler (repetition history)
 * without drawing. */
static int32_t forced(struct spec_verifier *v, struct tern_sampler *s, int32_t t)
{
    tern_sampler_accept(s, t);
    v->gr->forced++;
    kept(v, t);
    return t;
}

/* spec_sample with the grammar alone: the sampler reads the mask's bits (only the allowed
 * tokens are looked at; no copy of the logits, no -inf written), the same choice as sampling
 * the masked logits. */
static int32_t sample_in_mask(struct spec_verifier *v, struct tern_sampler *s, const float *logits)
{
    struct gen_grammar *gr = v->gr;
    const double t0 = gen_cpu_ms();
    const int allowed = tern_grammar_matcher_fill_mask(gr->m, gr->allow);
    int32_t only = -1;
    if (allowed == 1)
        for (int w = 0; w < (gr->n_tok + 31) / 32 && only < 0; w++)
            if (gr->allow[w]) only = w * 32 + __builtin_ctz(gr->allow[w]);
    const int32_t t = only >= 0 ? only : tern_sampler_sample_masked(s, logits, gr->allow, gr->n_tok);
    const double dt = gen_cpu_ms() - t0;
    TERN_ASSERT(t >= 0 && t < gr->n_tok, "a masked draw picks a token of the tokenizer");
    gr->masks++;
    gr->mask_ms += dt;
    gr->ms += dt;
    if (only >= 0) return forced(v, s, only);
    kept(v, t);
    return t;
}

int32_t spec_sample(struct spec_verifier *v, struct tern_sampler *s, const float *logits)
{
    if (v->gr && v->gr->m && !(v->hook && v->hook->mask)) return sample_in_mask(v, s, logits);
    int32_t only;
    const float *l = view(v, logits, &only);
    if (only >= 0) return forced(v, s, only);
    int32_t t = tern_sampler_sample(s, l);
    TERN_ASSERT(t >= 0 && t < v->n_vocab);
    kept(v, t);
    return t;
}

/* Draw from p[0..n) scaled by its sum (p is not normalized: the residual). */
static int32_t draw(struct tern_sampler *s, const float *p, int n)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) total += p[i];
    /* the caller falls back to p itself when the residual is empty */
    TERN_ASSERT(n > 0 && total > 0.0 && isfinite(total), "a draw from a distribution with mass");
    double r = sample_uniform(s) * total, acc = 0.0;
    int32_t last = -1;
    for (int i = 0; i < n; i++) {
        if (p[i] <= 0.0f) continue;
        acc += p[i];
        last = i;
        if (r < acc) return i;
    }
    return last; /* rounding left r at the very top: the last token with mass */
}

bool spec_check(struct spec_verifier *v, struct tern_sampler *s, const float *logits, int32_t d,
                const float *q, int32_t *next)
{
    struct tern_sampler_params sp;
    sample_get_params(s, &sp);
    if (sp.temperature == 0.0f) {
        const int32_t t = spec_sample(v, s, logits);
        *next = t;
        return t == d;
    }
    const int nv = v->n_vocab;
    float *p = v->p;
    TERN_ASSERT(d >= 0 && d < nv && p, "a draft is a token of the model");
    int32_t only;
    const float *l = view(v, logits, &only);
    if (only >= 0) {
        *next = forced(v, s, only);
        return only == d;
    }
    tern_sampler_probs(s, l, p);
    const double qx = q ? q[d] : 1.0;
    TERN_ASSERT(qx > 0.0 && qx <= 1.0 + 1e-3, "q(x) > 0: x was drawn from q");
    /* u < p/q, written without dividing (q(x) > 0: x was drawn from q) */
    if (sample_uniform(s) * qx < (double)p[d]) {
        tern_sampler_accept(s, d);
        kept(v, d);
        *next = d;
        return true;
    }
    /* Rejected: the residual max(0, p - q) in place. When rounding leaves it empty (p == q up to
     * float error; a rejection is then nearly impossible), p itself is the answer. */
    double left = 0.0;
    if (q) {
        for (int j = 0; j < nv; j++) {
            const float r = p[j] - q[j];
            p[j] = r > 0.0f ? r : 0.0f;
            left += p[j];
        }
    } else {
        p[d] = 0.0f; /* the others keep their mass; draw() normalizes */
        for (int j = 0; j < nv; j++) left += p[j];
    }
    if (!(left > 0.0)) tern_sampler_probs(s, l, p);
    *next = draw(s, p, nv);
    tern_sampler_accept(s, *next);
    kept(v, *next);
    return false;
}

int spec_verify(struct spec_verifier *v, struct tern_sampler *s, const float *const *L,
                const int32_t *d, const float *q, int k, int32_t *next)
{
    TERN_ASSERT(k >= 0 && k <= SPEC_MAX_DRAFT);
    for (int i = 0; i < k; i++)
        if (!spec_check(v, s, L[i], d[i], q ? q + (size_t)i * v->n_vocab : NULL, next)) return i;
    *next = spec_sample(v, s, L[k]);
    return k;
}
