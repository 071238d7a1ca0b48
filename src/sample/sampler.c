/* sampler.c — choosing the next token from logits: greedy, temperature, top-k, top-p, min-p,
 * repetition penalty, with a seeded RNG so runs are reproducible.
 *
 * Order of the steps: repetition penalty -> (temperature 0: argmax, done) -> temperature ->
 * min-p -> top-k -> top-p -> draw. Temperature is applied before the filters (as Hugging Face
 * and the OpenAI API do), so top-p keeps the nucleus of the distribution actually sampled.
 * Nothing sorts the whole vocabulary: min-p is a threshold pass, top-k and top-p take the best
 * candidates with a partial selection (a bounded heap), widening it only when top-p needs more.
 * All scratch is allocated in tern_sampler_create. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "sample/sampler.h"
#include "util/error.h"
#include "util/heap.h"

struct cand {
    float logit;
    int32_t id;
};

struct tern_sampler {
    struct tern_sampler_params p;
    int n_vocab;
    struct cand *cands; /* (n_vocab) working set */
    int32_t *recent;    /* (repeat_last_n) ring of recent tokens */
    int n_recent, recent_head;
    uint64_t rng[4];    /* xoshiro256** state */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t *s)
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

struct tern_sampler_params tern_sampler_default_params(void)
{
    return (struct tern_sampler_params){.temperature = 0.0f, .top_k = 0, .top_p = 1.0f,
                                        .min_p = 0.0f, .repeat_penalty = 1.0f,
                                        .repeat_last_n = 64, .seed = 0};
}

void tern_sampler_reset(struct tern_sampler *s)
{
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->n_recent = 0;
    s->recent_head = 0;
}

tern_status tern_sampler_create(const struct tern_sampler_params *p, int n_vocab,
                                struct tern_sampler **out)
{
    struct tern_sampler_params sp = p ? *p : tern_sampler_default_params();
    if (!(sp.temperature >= 0.0f) || !isfinite(sp.temperature))
        return tern_fail(TERN_ERR_ARG, "temperature %g must be >= 0", (double)sp.temperature);
    if (sp.top_k < 0) return tern_fail(TERN_ERR_ARG, "top_k %d must be >= 0", sp.top_k);
    if (!(sp.top_p >= 0.0f && sp.top_p <= 1.0f))
        return tern_fail(TERN_ERR_ARG, "top_p %g must be in [0, 1]", (double)sp.top_p);
    if (!(sp.min_p >= 0.0f && sp.min_p <= 1.0f))
        return tern_fail(TERN_ERR_ARG, "min_p %g must be in [0, 1]", (double)sp.min_p);
    if (!(sp.repeat_penalty >= 0.0f) || !isfinite(sp.repeat_penalty))
        return tern_fail(TERN_ERR_ARG, "repeat_penalty %g must be >= 0",
                         (double)sp.repeat_penalty);
    if (sp.repeat_last_n < 0 || sp.repeat_last_n > (1 << 20))
        return tern_fail(TERN_ERR_ARG, "repeat_last_n %d is out of range", sp.repeat_last_n);
    if (n_vocab <= 0) return tern_fail(TERN_ERR_ARG, "n_vocab %d must be positive", n_vocab);
    if (sp.top_p == 0.0f) sp.top_p = 1.0f;
    if (sp.repeat_penalty == 0.0f) sp.repeat_penalty = 1.0f;
    if (sp.repeat_last_n == 0) sp.repeat_last_n = 64;

    struct tern_sampler *s = calloc(1, sizeof *s);
    if (s) s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    if (s && s->cands) s->recent = malloc((size_t)sp.repeat_last_n * sizeof *s->recent);
    if (!s || !s->cands || !s->recent) {
        tern_sampler_free(s);
        return tern_fail(TERN_ERR_NOMEM, "sampler: out of memory");
    }
    s->p = sp;
    s->n_vocab = n_vocab;
    tern_sampler_reset(s);
    *out = s;
    return TERN_OK;
}

void tern_sampler_free(struct tern_sampler *s)
{
    if (!s) return;
    free(s->cands);
    free(s->recent);
    free(s);
}

void tern_sampler_accept(struct tern_sampler *s, int32_t token)
{
    TERN_ASSERT(s->recent_head >= 0 && s->recent_head < s->p.repeat_last_n && s->n_recent <= s->p.repeat_last_n,
                "the recent ring stays inside repeat_last_n");
    s->recent[s->recent_head] = token;
    s->recent_head = (s->recent_head + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

/* "a is better than b": higher logit, then lower id (so greedy ties pick the lowest id). */
static inline bool better(const struct cand *a, const struct cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* The top-k heap keeps the worst survivor at its root, so it is ordered by "worse". */
static inline bool worse(const struct cand *a, const struct cand *b) { return better(b, a); }
TERN_HEAP_DEFINE(cand_heap, struct cand, worse)

/* Move the best k of c[0..n) to the front, sorted best first. Bounded min-heap of size k over
 * a single pass: O(n log k), no full sort. */
static void select_top(struct cand *c, int n, int k)
{
    if (k >= n) k = n;
    TERN_ASSERT(k >= 0 && n >= 0);
    size_t hn = 0, hk = (size_t)k;
    /* heap in c[0..k): worst at the root */
    for (int i = 0; i < n; i++) {
        struct cand x = c[i];
        if (i < k) {
            cand_heap_push(c, &hn, hk, x);
            continue;
        }
        if (!better(&x, &c[0])) continue;
        c[i] = c[0]; /* keep the evicted element in the tail so c stays a permutation */
        cand_heap_replace_top(c, hk, x);
    }
    /* heap sort the k survivors, best first: each pop moves the worst left to the end */
    for (size_t end = hk; end > 1;) {
        struct cand worst = cand_heap_pop(c, &hn);
        c[--end] = worst;
    }
    TERN_ASSERT(k <= 1 || !better(&c[1], &c[0]), "the survivors come out best first");
}

/* The index of token id among the candidates c[0..n) (ascending ids), or -1. */
static int find_id(const struct cand *c, int n, int32_t id)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && c[lo].id == id ? lo : -1;
}

/* The steps shared by sample and probs, from candidates c[0..n) in ascending id order (every
 * token, c[i].id == i, when n == n_vocab; else the allowed ones of a mask): their final logits
 * (penalized, divided by the temperature, filtered) in c[0..*n_out) and their maximum *mx.
 * Temperature 0 ends after the penalty with the greedy choice alone (*n_out = 1). Leaving the
 * refused tokens out gives what their -inf logits would: no weight, never the greedy pick, never
 * past a filter that keeps a finite one. */
static void prepare_cands(struct tern_sampler *s, const float *logits, int n, int *n_out, float *mx_out)
{
    const struct tern_sampler_params *p = &s->p;
    struct cand *c = s->cands;
    /* candidates are ids in ascending order: all of them (c[i].id == i) or a mask's */
    TERN_ASSERT(n >= 1 && n <= s->n_vocab && (n != s->n_vocab || c[n - 1].id == n - 1));

    /* repetition penalty (CTRL style, as llama.cpp): divide positive logits, multiply negative */
    if (p->repeat_penalty != 1.0f) {
        for (int i = 0; i < s->n_recent; i++) {
            int32_t id = s->recent[i];
            if (id < 0 || id >= s->n_vocab) continue;
            int at = n == s->n_vocab ? id : find_id(c, n, id);
            if (at < 0) continue;
            float l = logits[id];
            c[at].logit = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        }
    }

    if (p->temperature == 0.0f) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i; /* strict: ties keep the lowest id */
        c[0] = c[best];
        *n_out = 1;
        *mx_out = c[0].logit;
        return;
    }
    float mx = -FLT_MAX;
    for (int i = 0; i < n; i++) {
        /* a NaN logit (a broken model or a bad adapter) is never drawn: it would poison the
         * sums below; it counts as refused, like -inf */
        c[i].logit = isnan(c[i].logit) ? -INFINITY : c[i].logit / p->temperature;
        if (c[i].logit > mx) mx = c[i].logit;
    }
    if (!(mx > -FLT_MAX)) {
        /* no finite logit at all: nothing to weigh; the first candidate (the lowest id, as the
         * greedy scan of tern_logits_argmax answers for such logits), drawn as a weight of one
         * so the draw still takes its number from the seed's stream */
        c[0].logit = 0.0f;
        *n_out = 1;
        *mx_out = 0.0f;
        return;
    }
    /* n_all: the count with the refused tokens (-inf) still in, until a filter drops them; the
     * filters decide on it as the unmasked path would, so the order of the survivors, and so
     * the token a seed draws, is the same either way */
    int n_all = s->n_vocab;
    /* min-p: keep tokens with prob >= min_p * p_max, i.e. logit >= max + log(min_p) */
    if (p->min_p > 0.0f) {
        const float cut = mx + logf(p->min_p);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (c[i].logit >= cut) c[m++] = c[i];
        n = n_all = m;
    }
    if (p->top_k > 0 && p->top_k < n_all) {
        const int k = p->top_k < n ? p->top_k : n;
        select_top(c, n, k);
        n = k;
    }
    if (p->top_p < 1.0f) {
        /* Sum of exp over all remaining candidates, then grow a sorted prefix until it
         * holds top_p of the mass. */
        double total = 0.0;
        for (int i = 0; i < n; i++) total += exp((double)(c[i].logit - mx));
        int k = n < 64 ? n : 64;
        for (;;) {
            select_top(c, n, k);
            double cum = 0.0;
            int keep = -1;
            for (int i = 0; i < k; i++) {
                cum += exp((double)(c[i].logit - mx)) / total;
                if (cum >= p->top_p) { keep = i + 1; break; }
            }
            if (keep > 0) { n = keep; break; }
            if (k == n) break;
            k = k * 4 < n ? k * 4 : n;
        }
    }
    /* with a finite maximum, the best candidate survives every filter (min-p keeps it, top-k
     * and top-p take the best first); only NaN or all -inf logits can leave none */
    TERN_ASSERT(!(mx > -FLT_MAX && mx < FLT_MAX) || (n >= 1 && n <= s->n_vocab), "a candidate survives the filters");
    *n_out = n;
    *mx_out = mx;
}

static void prepare(struct tern_sampler *s, const float *logits, int *n_out, float *mx_out)
{
    struct cand *c = s->cands;
    for (int i = 0; i < s->n_vocab; i++) c[i] = (struct cand){logits[i], i};
    prepare_cands(s, logits, s->n_vocab, n_out, mx_out);
}

/* Draw from the prepared candidates c[0..n) and remember the choice. */
static int32_t draw_prepared(struct tern_sampler *s, int n, float mx)
{
    const struct cand *c = s->cands;
    int32_t chosen = c[0].id;
    if (s->p.temperature != 0.0f) {
        double total = 0.0;
        for (int i = 0; i < n; i++) total += exp((double)(c[i].logit - mx));
        TERN_ASSERT(!(mx > -FLT_MAX && mx < FLT_MAX) || total >= 1.0, "the maximum's own weight exp(0) is in the total");
        double r = rng_uniform(s->rng) * total, acc = 0.0;
        chosen = c[n - 1].id;
        for (int i = 0; i < n; i++) {
            acc += exp((double)(c[i].logit - mx));
            if (r < acc) { chosen = c[i].id; break; }
        }
    }
    tern_sampler_accept(s, chosen);
    return chosen;
}

/* The greedy choice read in place (tern.h): eight running maxima, then the first id that
 * reaches the maximum; over a 250k vocabulary about a tenth of the time of copying it into
 * candidates first, as the sampler did. NaNs never win unless logit 0 is one (then 0: what a
 * plain scan from id 0 gives). */
int32_t tern_logits_argmax(const float *l, int n)
{
    if (isnan(l[0])) return 0;
    float m8[8];
    for (int j = 0; j < 8; j++) m8[j] = -INFINITY;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m8[j] = l[i + j] > m8[j] ? l[i + j] : m8[j];
    float m = -INFINITY;
    for (int j = 0; j < 8; j++) m = m8[j] > m ? m8[j] : m;
    for (; i < n; i++) m = l[i] > m ? l[i] : m;
    for (i = 0; i < n; i++)
        if (l[i] == m) return i;
    return 0;
}

int32_t tern_sampler_sample(struct tern_sampler *s, const float *logits)
{
    if (s->p.temperature == 0.0f && (s->p.repeat_penalty == 1.0f || s->n_recent == 0)) {
        const int32_t best = tern_logits_argmax(logits, s->n_vocab);
        tern_sampler_accept(s, best);
        return best;
    }
    int n;
    float mx;
    prepare(s, logits, &n, &mx);
    return draw_prepared(s, n, mx);
}

int32_t tern_sampler_sample_masked(struct tern_sampler *s, const float *logits, const uint32_t *allow,
                                   int n_allow)
{
    struct cand *c = s->cands;
    const int lim = n_allow < s->n_vocab ? n_allow : s->n_vocab;
    if (s->p.temperature == 0.0f && (s->p.repeat_penalty == 1.0f || s->n_recent == 0)) {
        /* greedy without a penalty: the best allowed logit, lowest id on ties, read in place */
        int32_t best = -1;
        float bl = 0.0f;
        for (int w = 0; w < (lim + 31) / 32; w++) {
            uint32_t x = allow[w];
            const int base = w * 32;
            if (x == 0xFFFFFFFFu && base + 32 <= lim) { /* a whole word: its max first */
                const float *l = logits + base;
                float m = l[0];
                for (int b = 1; b < 32; b++) m = l[b] > m ? l[b] : m;
                if (best >= 0 && !(m > bl)) continue;
                for (int b = 0; b < 32; b++)
                    if (l[b] == m) { best = base + b; bl = m; break; }
                continue;
            }
            while (x) {
                const int id = base + __builtin_ctz(x);
                x &= x - 1;
                if (id >= lim) break;
                if (best < 0 || logits[id] > bl) { best = id; bl = logits[id]; }
            }
        }
        if (best >= 0) {
            tern_sampler_accept(s, best);
            return best;
        }
        return tern_sampler_sample(s, logits);
    }
    int n = 0;
    /* a word at a time: a narrow mask is mostly zero words */
    for (int w = 0; w < (lim + 31) / 32; w++) {
        uint32_t x = allow[w];
        while (x) {
            const int id = w * 32 + __builtin_ctz(x);
            x &= x - 1;
            if (id >= lim) break;
            c[n++] = (struct cand){logits[id], id};
        }
    }
    if (n == 0) return tern_sampler_sample(s, logits);
    TERN_ASSERT(n <= lim && c[n - 1].id < lim, "one candidate per allowed id");
    float mx;
    prepare_cands(s, logits, n, &n, &mx);
    return draw_prepared(s, n, mx);
}

/* sum(p) == 1 within float rounding over n terms (TERN_ASSERT_SLOW in tern_sampler_probs) */
static __attribute__((unused)) bool probs_sum_is_one(const float *p, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += p[i];
    return fabs(sum - 1.0) <= 1e-6 * (n > 1000 ? n / 1000.0 : 1.0) + 1e-5;
}

void tern_sampler_probs(struct tern_sampler *s, const float *logits, float *probs)
{
    int n;
    float mx;
    prepare(s, logits, &n, &mx);
    const struct cand *c = s->cands;
    memset(probs, 0, sizeof(float) * (size_t)s->n_vocab);
    if (s->p.temperature == 0.0f) {
        probs[c[0].id] = 1.0f;
        return;
    }
    /* the same sums, in the same order, as the draw in tern_sampler_sample */
    double total = 0.0;
    for (int i = 0; i < n; i++) total += exp((double)(c[i].logit - mx));
    TERN_ASSERT(!(mx > -FLT_MAX && mx < FLT_MAX) || total >= 1.0, "the maximum's own weight exp(0) is in the total");
    for (int i = 0; i < n; i++) probs[c[i].id] = (float)(exp((double)(c[i].logit - mx)) / total);
    /* normalized, as the verifier's rejection rule assumes (O(vocabulary): checked builds) */
    TERN_ASSERT_SLOW(!(mx > -FLT_MAX && mx < FLT_MAX) || probs_sum_is_one(probs, s->n_vocab));
}

double sample_uniform(struct tern_sampler *s) { return rng_uniform(s->rng); }

void sample_get_params(const struct tern_sampler *s, struct tern_sampler_params *out)
{
    *out = s->p;
}
