/* spec_model.c — draft sources that run a model: a drafter GGUF with the target's tokenizer
 * ("model"), or the target's own weights converted to a smaller type at load ("self").
 *
 * Read spec.h first. The drafter has its own context and keeps a record of the tokens whose KV
 * it holds: hist[off ..], at its positions 0 .. (its context starts at history index off, 0
 * unless the controller had it start afresh near the end, see lag_max). Each proposal compares
 * that record with the history, rewinds its KV to the common prefix (rejected drafts go here),
 * decodes what it has not seen as one batch (the prompt, the target's correction or bonus
 * token), then drafts k tokens one at a time. The last drafted token is not decoded: if the
 * target keeps it, the next proposal decodes it with the rest.
 *
 * At temperature 0 drafts are the drafter's greedy choices (point masses for the verifier).
 * When sampling, drafts are drawn from q = the drafter's distribution under the target's
 * temperature and filters (no repetition penalty: any q keeps the output exact, a similar one
 * keeps acceptance high), restricted to the ids the target has; q goes to the verifier.
 *
 * A generator drafts in sequence 0 of the context; a batcher (batch_draft.c) drafts for all its
 * slots at once, one sequence each, through spec_model_view and spec_model_pick. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/spec.h"
#include "sample/sampler.h"
#include "util/error.h"
#include "util/clock.h"

struct model_source {
    struct spec_source base;
    struct tern_model *model;
    bool own_model;
    struct tern_context *ctx;
    struct tern_sampler *smp;       /* the drafter's draws (sampling only) */
    struct tern_sampler_params sp;  /* smp's params */
    bool greedy;
    int n_vocab_d;                  /* the drafter's logits width */
    int n_ok;                       /* ids usable as drafts: min(drafter, target vocab) */
    float *dq;                      /* (n_vocab_d) the drafter's distribution */
    int32_t *rec;                   /* (n_ctx) tokens whose KV ctx holds: hist[off + i] */
    int n_rec, n_ctx;
    int off;                        /* history index of the drafter's position 0 */
};

tern_status spec_model_sampler_begin(struct tern_sampler **smp, struct tern_sampler_params *cur,
                                     int n_vocab, const struct tern_sampler_params *sp, bool *greedy)
{
    *greedy = sp->temperature == 0.0f;
    if (*greedy) return TERN_OK;
    struct tern_sampler_params want = *sp;
    want.repeat_penalty = 1.0f;
    want.seed = sp->seed ^ 0x9e3779b97f4a7c15ull; /* its own stream, fixed by the seed */
    if (!*smp || memcmp(&want, cur, sizeof want) != 0) {
        tern_sampler_free(*smp);
        *smp = NULL;
        tern_status st = tern_sampler_create(&want, n_vocab, smp);
        if (st) return tern_fail_prefix(st, "draft sampler: ");
        *cur = want;
    }
    tern_sampler_reset(*smp);
    return TERN_OK;
}

static tern_status model_begin(struct spec_source *src, const struct tern_sampler_params *sp)
{
    struct model_source *ms = (struct model_source *)src;
    return spec_model_sampler_begin(&ms->smp, &ms->sp, ms->n_vocab_d, sp, &ms->greedy);
}

double spec_model_q(struct tern_sampler *smp, const float *logits, int n_vocab_d, int n_ok, int n_vocab_t,
                    float *dq, float *qrow)
{
    tern_sampler_probs(smp, logits, dq);
    double kept = 0.0;
    for (int i = 0; i < n_vocab_t; i++) {
        qrow[i] = i < n_ok ? dq[i] : 0.0f;
        kept += qrow[i];
    }
    if (!(kept > 0.0)) return 0.0;
    if (n_ok < n_vocab_d) /* mass on ids the target lacks: draw from the rest */
        for (int i = 0; i < n_ok; i++) qrow[i] = (float)(qrow[i] / kept);
    float top = 0.0f;
    for (int i = 0; i < n_ok; i++)
        if (qrow[i] > top) top = qrow[i];
    return top;
}

int32_t spec_model_draw(struct tern_sampler *smp, const float *qrow, int n_ok)
{
    double r = sample_uniform(smp), acc = 0.0;
    int32_t last = -1;
    for (int i = 0; i < n_ok; i++) {
        if (qrow[i] <= 0.0f) continue;
        acc += qrow[i];
        last = i;
        if (r < acc) return i;
    }
    return last;
}

int32_t spec_model_pick(struct tern_sampler *smp, const float *logits, int n_vocab_d, int n_ok,
                        int n_vocab_t, float *dq, float *qrow)
{
    if (!smp) return tern_logits_argmax(logits, n_vocab_d);
    if (!(spec_model_q(smp, logits, n_vocab_d, n_ok, n_vocab_t, dq, qrow) > 0.0)) return -1;
    return spec_model_draw(smp, qrow, n_ok);
}

/* The drafter's next token from logits; q row (target width) filled when sampling. */
static int32_t model_pick(struct model_source *ms, const float *logits, float *qrow)
{
    return spec_model_pick(ms->greedy ? NULL : ms->smp, logits, ms->n_vocab_d, ms->n_ok,
                           ms->base.n_vocab, ms->dq, qrow);
}

/* Of hist[off..n), how many leading tokens the drafter's KV holds (never the last one: its
 * logits are needed). */
static int model_held(const struct model_source *ms, const int32_t *hist, int n)
{
    int n_rec = ms->n_rec, kv = tern_kv_n_pos(ms->ctx);
    if (kv < n_rec) n_rec = kv;
    if (ms->off >= n) return 0;
    int common = 0;
    while (common < n_rec && ms->off + common < n - 1 && ms->rec[common] == hist[ms->off + common]) common++;
    return common;
}

static tern_status model_propose(struct spec_source *src, const int32_t *hist, int n, int k,
                                 int lag_max, int32_t *out, int *n_out, int *cls)
{
    struct model_source *ms = (struct model_source *)src;
    *n_out = 0;
    *cls = 0;
    src->q_valid = false;
    src->t_sync = 0;
    src->n_sync = 0;
    if (k <= 0 || n <= 0) return TERN_OK;
    if (ms->off >= n) { /* the history went back before the window: start over */
        ms->off = 0;
        ms->n_rec = 0;
    }
    int common = model_held(ms, hist, n);
    /* too far behind for the credit, or no room for the drafts: start afresh near the end */
    if (lag_max < 1) lag_max = 1;
    if (n - (ms->off + common) > lag_max || (n - ms->off) + k - 1 > ms->n_ctx) {
        int w = lag_max < ms->n_ctx / 2 ? lag_max : ms->n_ctx / 2;
        if (w < 1) w = 1;
        ms->off = n - w > 0 ? n - w : 0;
        ms->n_rec = 0;
        common = 0;
    }
    /* drafts i < k-1 are decoded at positions (n - off) .. (n - off) + k - 2 */
    if (k > ms->n_ctx - (n - ms->off) + 1) k = ms->n_ctx - (n - ms->off) + 1;
    if (k <= 0) return TERN_OK;
    const double t0 = util_now_s();
    const int m0 = n - ms->off; /* positions the drafter needs before drafting */
    /* a recurrent drafter goes back only inside its last decode call, or to 0 */
    if (!tern_kv_seq_can_truncate(ms->ctx, 0, common)) common = 0;
    tern_status st = tern_kv_truncate(ms->ctx, common);
    if (!st) st = tern_decode(ms->ctx, hist + ms->off + common, m0 - common, common, TERN_LOGITS_LAST);
    if (st) {
        ms->n_rec = 0;
        tern_status_ignore(tern_kv_truncate(ms->ctx, 0)); /* to 0: cannot fail */
        return tern_fail_prefix(st, "draft model: catching up with %d tokens: ", m0 - common);
    }
    memcpy(ms->rec + common, hist + ms->off + common, sizeof(int32_t) * (size_t)(m0 - common));
    ms->n_rec = m0;
    src->t_sync = util_now_s() - t0;
    src->n_sync = m0 - common;
    const float *logits = tern_context_logits(ms->ctx, m0 - common - 1);
    int m = 0;
    for (int i = 0; i < k; i++) {
        float *qrow = src->q ? src->q + (size_t)i * src->n_vocab : NULL;
        const int32_t t = model_pick(ms, logits, qrow);
        if (t < 0 || t >= ms->n_ok) break; /* an id the target does not have ends the draft */
        out[m++] = t;
        if (i + 1 == k) break;
        if ((st = tern_decode(ms->ctx, &t, 1, m0 + i, TERN_LOGITS_LAST))) {
            ms->n_rec = 0;
            tern_status_ignore(tern_kv_truncate(ms->ctx, 0)); /* to 0: cannot fail */
            return tern_fail_prefix(st, "draft model: drafted token %d: ", i);
        }
        ms->rec[ms->n_rec++] = t;
        logits = tern_context_logits(ms->ctx, 0);
    }
    *n_out = m;
    src->q_valid = !ms->greedy && m > 0;
    return TERN_OK;
}

/* Tokens of hist[0..n) past what the drafter holds (what the next proposal decodes before
 * drafting; at least the last one). */
static int model_lag(const struct spec_source *src, const int32_t *hist, int n)
{
    const struct model_source *ms = (const struct model_source *)src;
    if (ms->off >= n) return n;
    return n - (ms->off + model_held(ms, hist, n));
}

static void model_free(struct spec_source *src)
{
    struct model_source *ms = (struct model_source *)src;
    if (!ms) return;
    tern_sampler_free(ms->smp);
    tern_context_free(ms->ctx);
    if (ms->own_model) tern_model_free(ms->model);
    free(ms->dq);
    free(ms->rec);
    free(ms->base.q);
    free(ms);
}

static const struct spec_source_ops self_ops = {
    .kind = "self", .begin = model_begin, .propose = model_propose, .costly = true,
    .lag = model_lag, .free = model_free,
};
static const struct spec_source_ops file_ops = {
    .kind = "model", .begin = model_begin, .propose = model_propose, .costly = true,
    .lag = model_lag, .free = model_free,
};

bool spec_model_view(struct spec_source *src, struct spec_model_view *out)
{
    if (src->ops != &self_ops && src->ops != &file_ops) return false;
    const struct model_source *ms = (const struct model_source *)src;
    *out = (struct spec_model_view){.ctx = ms->ctx, .n_vocab_d = ms->n_vocab_d, .n_ok = ms->n_ok};
    return true;
}

void spec_model_forget(struct spec_source *src)
{
    struct spec_model_view v;
    if (!spec_model_view(src, &v)) return;
    struct model_source *ms = (struct model_source *)src;
    ms->n_rec = 0;
    ms->off = 0;
    tern_status_ignore(tern_kv_truncate(ms->ctx, 0)); /* to 0: cannot fail */
}

tern_status spec_model_create(struct tern_model *model, bool own_model, const char *kind,
                              int n_vocab_target, int n_ctx, int n_seq, int n_threads, int n_max,
                              struct spec_source **out)
{
    struct model_source *ms = calloc(1, sizeof *ms);
    if (!ms) {
        if (own_model) tern_model_free(model);
        return tern_fail(TERN_ERR_NOMEM, "draft model: out of memory");
    }
    ms->base.ops = !strcmp(kind, "self") ? &self_ops : &file_ops;
    ms->base.n_vocab = n_vocab_target;
    ms->model = model;
    ms->own_model = own_model;
    ms->n_vocab_d = tern_model_n_vocab(model);
    ms->n_ok = ms->n_vocab_d < n_vocab_target ? ms->n_vocab_d : n_vocab_target;
    ms->greedy = true;
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    cp.n_seq = n_seq;
    tern_status st = tern_context_create(model, &cp, &ms->ctx);
    if (st) {
        model_free(&ms->base);
        return tern_fail_prefix(st, "draft model context: ");
    }
    ms->n_ctx = tern_context_n_ctx(ms->ctx);
    ms->rec = malloc(sizeof(int32_t) * (size_t)ms->n_ctx);
    ms->dq = malloc(sizeof(float) * (size_t)ms->n_vocab_d);
    ms->base.q = malloc(sizeof(float) * (size_t)n_max * (size_t)n_vocab_target);
    if (!ms->rec || !ms->dq || !ms->base.q) {
        model_free(&ms->base);
        return tern_fail(TERN_ERR_NOMEM, "draft model: out of memory for %d distributions of %d "
                         "tokens", n_max, n_vocab_target);
    }
    *out = &ms->base;
    return TERN_OK;
}
