/* spec_mtp.c — the draft source "mtp": a qwen35 model's own multi-token-prediction layer drafts
 * from the target's hidden states (include/tern.h "multi-token prediction").
 *
 * Read spec.h and spec_model.c first: this source keeps itself in step with the history the
 * same way, with one difference. The MTP at history position p reads token hist[p] and the
 * target's hidden state at p - 1 (the state that predicted hist[p]), which the target context
 * keeps (tern_context_keep_hidden, turned on when a generator takes the draft). So the MTP
 * context's KV at p depends on the whole history before p, not only on the tokens it decoded:
 * the source keeps `seen`, the history its firm positions were computed from, and keeps those
 * positions only while the history still starts with it.
 *
 * A proposal, with the target holding hist[0 .. n_t) and the pending tokens hist[n_t .. n):
 *   1. firm catch-up: positions whose p - 1 the target has a state for, in one MTP pass
 *      (position 0 reads zeros, as ik_llama.cpp's warmup does);
 *   2. pending tokens past the first (forced grammar tokens) follow with the MTP's own output
 *      state in place of the target's, as drafts do; these positions are not firm;
 *   3. drafting: the last position's logits give the first draft; each further draft decodes
 *      the previous one with the MTP's own state at the position before. The last draft is not
 *      decoded.
 * Positions that are not firm are dropped at the next proposal and computed again from the
 * target's states once the target has them.
 *
 * MTP positions are the history's, offset by `off` (a context started afresh near the end, as
 * the controller's lag_max asks, or where the target's kept states begin: positions restored
 * from the prefix cache have none). Attention depends only on relative positions, so the offset
 * changes nothing but float rounding. */
#include <stdlib.h>
#include <string.h>

#include "gen/spec.h"
#include "util/clock.h"
#include "util/error.h"

struct mtp_source {
    struct spec_source base;
    struct tern_model *model;      /* the target (not owned) */
    struct tern_context *tgt;      /* the generator's context (attach; not owned) */
    struct tern_context *ctx;      /* the MTP context, made at attach for the target's n_ctx */
    int n_threads;
    struct tern_sampler *smp;      /* draws when sampling */
    struct tern_sampler_params sp;
    bool greedy;
    int n_vocab;
    float *dq;                     /* (n_vocab) the MTP's distribution */
    float *zeros;                  /* (n_embd) the state before position 0 */
    int32_t *seen;                 /* (n_ctx) history the firm positions were computed from */
    int n_seen;                    /* history indexes off .. n_seen-1 are the firm MTP positions
                                      0 .. n_seen-off-1 */
    int off;                       /* history index of MTP position 0 */
    int n_ctx;
    int d;                         /* n_embd */
};

static tern_status mtp_begin(struct spec_source *src, const struct tern_sampler_params *sp)
{
    struct mtp_source *ms = (struct mtp_source *)src;
    return spec_model_sampler_begin(&ms->smp, &ms->sp, ms->n_vocab, sp, &ms->greedy);
}

/* Firm MTP positions still valid for hist[0..n): the history must start with `seen`. */
static int mtp_kept(const struct mtp_source *ms, const int32_t *hist, int n)
{
    int c = 0;
    const int lim = ms->n_seen < n ? ms->n_seen : n;
    while (c < lim && ms->seen[c] == hist[c]) c++;
    return c > ms->off ? c - ms->off : 0;
}

static int mtp_lag(const struct spec_source *src, const int32_t *hist, int n)
{
    const struct mtp_source *ms = (const struct mtp_source *)src;
    if (!ms->tgt || ms->off >= n) return n;
    return n - ms->off - mtp_kept(ms, hist, n);
}

/* Can firm positions run from p to n_t (the target holds hist[0..n_t))? The target has the
 * states of one run of positions ending at n_t - 1 (its last pass computed that one); each
 * position q reads the state at q - 1, position 0 the zeros before the first token. */
static bool firm_from(const struct mtp_source *ms, int p, int n_t)
{
    if (p == 0) return n_t == 0 || tern_context_hidden(ms->tgt, 0) != NULL;
    return tern_context_hidden(ms->tgt, p - 1) != NULL;
}

static void mtp_reset(struct mtp_source *ms)
{
    ms->off = 0;
    ms->n_seen = 0;
    tern_status_ignore(tern_kv_truncate(ms->ctx, 0)); /* to 0: cannot fail */
}

static tern_status mtp_propose(struct spec_source *src, const int32_t *hist, int n, int k,
                               int lag_max, int32_t *out, int *n_out, int *cls)
{
    struct mtp_source *ms = (struct mtp_source *)src;
    *n_out = 0;
    *cls = 0;
    src->q_valid = false;
    src->t_sync = 0;
    src->n_sync = 0;
    if (k <= 0 || n <= 0 || !ms->tgt) return TERN_OK;
    const int n_t = tern_kv_n_pos(ms->tgt); /* the target holds hist[0 .. n_t) */
    if (n_t > n || n_t < 1) return TERN_OK;
    int keep = ms->off < n ? mtp_kept(ms, hist, n) : 0;
    if (ms->off >= n) ms->off = n; /* the history went back before the window: start over */
    /* where the firm positions resume: their state must be the target's */
    int p = ms->off + keep;
    if (lag_max < 1) lag_max = 1;
    if (n - p > lag_max || p > n_t || !firm_from(ms, p, n_t) || n - ms->off + k > ms->n_ctx) {
        /* start afresh near the end, at a position whose state the target has (n_t - 1's
         * always: the target's last pass computed it) */
        int w = lag_max < ms->n_ctx / 2 ? lag_max : ms->n_ctx / 2;
        if (w < 1) w = 1;
        int start = n - w > 0 ? n - w : 0;
        if (start > n_t) start = n_t;
        while (start < n_t && !firm_from(ms, start, n_t)) start++;
        ms->off = start;
        keep = 0;
        p = start;
        /* the states it starts from are of this history */
        memcpy(ms->seen, hist, sizeof(int32_t) * (size_t)start);
        ms->n_seen = start;
        /* no state at all (kept only since the target's last pass, which a direct caller may not
         * have made): nothing to draft from */
        if (!firm_from(ms, p, n_t)) return TERN_OK;
    }
    const double t0 = util_now_s();
    tern_status st = tern_kv_truncate(ms->ctx, keep);
    /* 1. firm: positions p .. f-1 (f <= n_t + 1: the target has states up to n_t - 1) */
    int f = p, last_n = 0; /* tokens of the last MTP pass: its logits row last_n - 1 */
    const int f_max = n < n_t + 1 ? n : n_t + 1;
    if (!st && f == 0 && f < f_max) { /* position 0 reads zeros: a pass of its own */
        st = tern_decode_mtp(ms->ctx, hist, ms->zeros, 1, 0, TERN_LOGITS_LAST);
        f = last_n = 1;
    }
    /* in runs of consecutive rows (the target keeps its states in a ring) */
    while (!st && f < f_max && tern_context_hidden(ms->tgt, f - 1)) {
        const int f0 = f;
        const float *h0 = tern_context_hidden(ms->tgt, f0 - 1);
        while (f < f_max && tern_context_hidden(ms->tgt, f - 1) == h0 + (size_t)(f - f0) * ms->d) f++;
        st = tern_decode_mtp(ms->ctx, hist + f0, h0, f - f0, f0 - ms->off, TERN_LOGITS_LAST);
        last_n = f - f0;
    }
    /* 2. the pending tokens the target has no state for yet chain the MTP's own (its state
     * at the position before was computed by the pass just made) */
    for (int q = f; !st && q < n; q++) {
        st = tern_decode_mtp(ms->ctx, hist + q, tern_context_hidden(ms->ctx, q - 1 - ms->off), 1,
                             q - ms->off, TERN_LOGITS_LAST);
        last_n = 1;
    }
    if (st) {
        mtp_reset(ms);
        return tern_fail_prefix(st, "draft mtp: catching up with %d tokens: ", n - p);
    }
    memcpy(ms->seen + p, hist + p, sizeof(int32_t) * (size_t)(f - p));
    ms->n_seen = f;
    src->t_sync = util_now_s() - t0;
    src->n_sync = n - p;
    if (last_n == 0) return TERN_OK; /* nothing decoded (the target holds every token) */
    /* 3. drafts */
    const float *logits = tern_context_logits(ms->ctx, last_n - 1);
    int m = 0;
    for (int i = 0; i < k && logits; i++) {
        float *qrow = src->q ? src->q + (size_t)i * src->n_vocab : NULL;
        const int32_t t = spec_model_pick(ms->greedy ? NULL : ms->smp, logits, ms->n_vocab, ms->n_vocab,
                                          src->n_vocab, ms->dq, qrow);
        if (t < 0) break;
        out[m++] = t;
        if (i + 1 == k) break;
        const int pos = n - ms->off + i; /* the MTP position of draft i */
        if ((st = tern_decode_mtp(ms->ctx, &t, tern_context_hidden(ms->ctx, pos - 1), 1, pos,
                                  TERN_LOGITS_LAST))) {
            mtp_reset(ms);
            return tern_fail_prefix(st, "draft mtp: drafted token %d: ", i);
        }
        logits = tern_context_logits(ms->ctx, 0);
    }
    *n_out = m;
    src->q_valid = !ms->greedy && m > 0;
    return TERN_OK;
}

static tern_status mtp_attach(struct spec_source *src, struct tern_context *target)
{
    struct mtp_source *ms = (struct mtp_source *)src;
    if (tern_context_model(target) != ms->model)
        return tern_fail(TERN_ERR_ARG, "draft mtp: the context runs another model than the draft's");
    if (tern_context_n_seq(target) != 1)
        return tern_fail(TERN_ERR_UNSUPPORTED, "draft mtp: drafts for a one-sequence context (a "
                         "generator), not one of %d sequences", tern_context_n_seq(target));
    tern_status st = tern_context_keep_hidden(target, true);
    if (st) return tern_fail_prefix(st, "draft mtp: ");
    const int n_ctx = tern_context_n_ctx(target);
    if (!ms->ctx || ms->n_ctx != n_ctx) {
        /* the old context goes first (its memory may be what the new one needs); on a failure
         * the source is left without one, and the next attach makes it */
        tern_context_free(ms->ctx);
        ms->ctx = NULL;
        free(ms->seen);
        ms->seen = NULL;
        ms->n_ctx = 0;
        ms->tgt = NULL;
        struct tern_context_params cp = tern_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_threads = ms->n_threads;
        cp.mtp = true;
        int32_t *seen = malloc(sizeof(int32_t) * (size_t)n_ctx);
        if (!seen) return tern_fail(TERN_ERR_NOMEM, "draft mtp: out of memory");
        if ((st = tern_context_create(ms->model, &cp, &ms->ctx))) {
            free(seen);
            return tern_fail_prefix(st, "draft mtp: ");
        }
        ms->seen = seen;
        ms->n_ctx = n_ctx;
    }
    ms->tgt = target;
    mtp_reset(ms);
    return TERN_OK;
}

static void mtp_free(struct spec_source *src)
{
    struct mtp_source *ms = (struct mtp_source *)src;
    if (!ms) return;
    tern_sampler_free(ms->smp);
    tern_context_free(ms->ctx);
    free(ms->dq);
    free(ms->zeros);
    free(ms->seen);
    free(ms->base.q);
    free(ms);
}

static const struct spec_source_ops mtp_ops = {
    .kind = "mtp", .begin = mtp_begin, .propose = mtp_propose, .costly = true,
    .lag = mtp_lag, .attach = mtp_attach, .free = mtp_free,
};

tern_status spec_mtp_create(struct tern_model *model, int n_threads, int n_max, struct spec_source **out)
{
    const char *why = NULL;
    if (!tern_model_has_mtp(model, &why)) return tern_fail(TERN_ERR_UNSUPPORTED, "draft mtp: %s", why);
    struct mtp_source *ms = calloc(1, sizeof *ms);
    if (!ms) return tern_fail(TERN_ERR_NOMEM, "draft mtp: out of memory");
    ms->base.ops = &mtp_ops;
    ms->model = model;
    ms->n_threads = n_threads;
    ms->n_vocab = tern_model_n_vocab(model);
    ms->base.n_vocab = ms->n_vocab;
    ms->greedy = true;
    const int d = tern_model_get_info(model)->n_embd;
    ms->d = d;
    ms->dq = malloc(sizeof(float) * (size_t)ms->n_vocab);
    ms->zeros = calloc((size_t)d, sizeof(float));
    ms->base.q = malloc(sizeof(float) * (size_t)n_max * (size_t)ms->n_vocab);
    if (!ms->dq || !ms->zeros || !ms->base.q) {
        mtp_free(&ms->base);
        return tern_fail(TERN_ERR_NOMEM, "draft mtp: out of memory for %d distributions of %d "
                         "tokens", n_max, ms->n_vocab);
    }
    *out = &ms->base;
    return TERN_OK;
}
