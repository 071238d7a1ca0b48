/* train_buckets.c — length buckets: which documents a micro-batch is made of when
 * the recipe names buckets (read the recipe's bucket fields in tern.h first).
 *
 * A document belongs to the first bucket whose length it does not exceed (the last bucket if it
 * exceeds them all). Every micro-batch is drawn from one bucket, chosen with the step's weights:
 * a draw from Dirichlet(bucket_alpha x bucket_weight) seeded by the step (the weights themselves
 * when bucket_alpha is 0), renormalized over the buckets that hold documents. Within the bucket,
 * documents are drawn uniformly (with replacement) and laid whole, piece after piece, into the
 * micro-batch's sequences, as the ordinary sampler lays them; the micro-batch ends when its
 * sequences are full.
 *
 * Everything is a function of the seed and the micro-batch's number (step x accum + i), so the
 * sampler has no state to checkpoint: a resumed run and every process of a data-parallel run
 * draw the same micro-batches. Validation keeps its order and is also reported per bucket
 * (t->eval_bucket filters the ordered fill). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"
#include "util/error.h"

bool train_buckets_on(const struct tern_trainer *t) { return t->distill && t->recipe.n_buckets > 0; }

int train_bucket_of(const struct tern_trainer *t, uint64_t len)
{
    const int n = t->recipe.n_buckets;
    for (int i = 0; i < n; i++)
        if (len <= (uint64_t)t->recipe.bucket_len[i]) return i;
    return n - 1;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* a uniform double in (0, 1) from the stream s */
static double unif(uint64_t *s)
{
    *s = mix(*s);
    return ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
}

/* Gamma(k, 1) by Marsaglia and Tsang (k < 1 boosted: Gamma(k + 1) x U^(1/k)). */
static double gamma_draw(double k, uint64_t *s)
{
    if (k < 1.0) return gamma_draw(k + 1.0, s) * pow(unif(s), 1.0 / k);
    const double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        const double x = sqrt(-2.0 * log(unif(s))) * cos(6.283185307179586 * unif(s));
        double v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        if (log(unif(s)) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

void train_bucket_weights(const struct tern_trainer *t, int step, double w[8])
{
    const struct tern_distill_recipe *r = &t->recipe;
    uint64_t s = mix(t->c.seed ^ mix((uint64_t)step ^ 0x6469726963686c65ull)); /* "dirichle" */
    double sum = 0.0;
    for (int i = 0; i < r->n_buckets; i++) {
        const double a = (double)r->bucket_alpha * r->bucket_weight[i];
        w[i] = r->bucket_alpha > 0.0f && a > 0.0 ? gamma_draw(a, &s) : r->bucket_weight[i];
        sum += w[i];
    }
    for (int i = 0; i < r->n_buckets; i++) w[i] = sum > 0.0 ? w[i] / sum : 0.0;
}

/* Group d's documents by bucket (once per data). */
static tern_status index_data(struct tern_trainer *t, const struct tern_train_data *d)
{
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
    train_data_view(d, &n_docs, &n_tok, &off, &tok, &mask);
    if (t->bk_d == d && t->bk_n_docs == n_docs) return TERN_OK;
    uint64_t *docs = malloc((n_docs ? n_docs : 1) * sizeof *docs);
    if (!docs) return tern_fail(TERN_ERR_NOMEM, "train: out of memory for the length buckets");
    const int nb = t->recipe.n_buckets;
    memset(t->bk_first, 0, sizeof t->bk_first);
    for (uint64_t i = 0; i < n_docs; i++) t->bk_first[train_bucket_of(t, off[i + 1] - off[i]) + 1]++;
    for (int b = 0; b < nb; b++) t->bk_first[b + 1] += t->bk_first[b];
    uint64_t fill[8];
    memcpy(fill, t->bk_first, sizeof fill);
    for (uint64_t i = 0; i < n_docs; i++) docs[fill[train_bucket_of(t, off[i + 1] - off[i])]++] = i;
    free(t->bk_docs);
    t->bk_docs = docs;
    t->bk_d = d;
    t->bk_n_docs = n_docs;
    return TERN_OK;
}

tern_status train_bucket_fill(struct tern_trainer *t, const struct tern_train_data *d,
                              struct train_batch *b, uint64_t *out, uint64_t n, uint64_t *n_out)
{
    tern_status st = index_data(t, d);
    if (st) return st;
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
    train_data_view(d, &n_docs, &n_tok, &off, &tok, &mask);
    if (!n_docs) return tern_fail(TERN_ERR_ARG, "train: no documents to draw from");
    const int T = t->T, nb = t->recipe.n_buckets, accum = t->c.accum > 0 ? t->c.accum : 1;
    if (n_out) *n_out = 0;
    for (uint64_t m = t->micro;; m++) {
        /* the bucket: this step's weights over the buckets that hold documents */
        double w[8], sum = 0.0;
        train_bucket_weights(t, (int)(m / (uint64_t)accum), w);
        for (int i = 0; i < nb; i++) sum += t->bk_first[i + 1] > t->bk_first[i] ? w[i] : 0.0;
        uint64_t s = mix(t->c.seed ^ mix(m ^ 0x6275636b6574ull)); /* "bucket" */
        double u = unif(&s) * sum;
        int bk = -1;
        for (int i = 0; i < nb; i++) {
            if (t->bk_first[i + 1] == t->bk_first[i]) continue;
            bk = i;
            if ((u -= w[i]) < 0.0) break;
        }
        if (bk < 0 || !(sum > 0.0)) /* the only buckets with documents weigh 0: draw from all */
            for (int i = 0; i < nb && bk < 0; i++)
                if (t->bk_first[i + 1] > t->bk_first[i]) bk = i;
        const uint64_t first = t->bk_first[bk], count = t->bk_first[bk + 1] - first;
        /* documents, whole, piece after piece, until the sequences are full */
        if (b) b->n_loss = 0;
        int seq = 0, row = 0;
        while (seq < t->n_seq) {
            s = mix(s);
            const uint64_t doc = t->bk_docs[first + s % count];
            const uint64_t len = off[doc + 1] - off[doc];
            for (uint64_t p = 0; p * (uint64_t)T < len && seq < t->n_seq;) {
                const uint64_t at = p * (uint64_t)T;
                const int k = (int)(len - at < (uint64_t)T ? len - at : (uint64_t)T);
                if (k > T - row) { /* the next sequence */
                    if (b) train_pad_rows(b, seq * T, row, T);
                    seq++;
                    row = 0;
                    continue;
                }
                if (!b && p == 0) { /* a document counts once its first piece is laid */
                    out[(*n_out)++] = doc;
                    if (*n_out == n) return TERN_OK;
                }
                if (b && (st = train_lay_piece(t, d, b, seq * T, row, doc, at, k))) return st;
                row += k;
                p++;
                if (row == T) {
                    seq++;
                    row = 0;
                }
            }
        }
        if (b) {
            t->micro = m + 1;
            return TERN_OK;
        }
    }
}
