/* context.c — creating a context (KV cache, scratch, thread pool: all allocated here, once)
 * and the public decode entry points. The forward pass itself is in forward.c. */
#include "model/context.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant.h"
#include "util/error.h"

struct tern_context_params tern_context_default_params(void)
{
    return (struct tern_context_params){.n_ctx = 0, .n_batch = 0, .n_threads = 0};
}

static void *alloc_floats(size_t n, tern_status *st)
{
    void *p = calloc(n ? n : 1, sizeof(float));
    if (!p && !*st) *st = tern_fail(TERN_ERR_NOMEM, "context scratch: out of memory (%zu floats)", n);
    return p;
}

tern_status tern_context_create(struct tern_model *m, const struct tern_context_params *p,
                                struct tern_context **out)
{
    const struct tern_model_info *in = &m->info;
    struct tern_context_params cp = p ? *p : tern_context_default_params();
    if (cp.n_ctx < 0 || cp.n_batch < 0 || cp.n_threads < 0 || cp.n_ctx > (1 << 22) ||
        cp.n_threads > 512)
        return tern_fail(TERN_ERR_ARG, "context parameters out of range: n_ctx %d, n_batch %d, "
                         "n_threads %d", cp.n_ctx, cp.n_batch, cp.n_threads);
    if (cp.n_ctx == 0) cp.n_ctx = in->n_ctx_train < 4096 ? in->n_ctx_train : 4096;
    if (cp.n_batch == 0) cp.n_batch = 512;
    if (cp.n_batch > cp.n_ctx) cp.n_batch = cp.n_ctx;
    if (cp.n_threads == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        cp.n_threads = ncpu > 0 ? (int)ncpu : 1;
    }

    struct tern_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return tern_fail(TERN_ERR_NOMEM, "context: out of memory");
    ctx->model = m;
    ctx->n_ctx = cp.n_ctx;
    ctx->n_batch = cp.n_batch;
    ctx->n_threads = cp.n_threads;
    tern_status st = tp_create(cp.n_threads, &ctx->pool);
    if (!st) st = kv_init(&ctx->kv, in->n_layer, in->n_head_kv, in->head_dim, cp.n_ctx);
    if (st) {
        tern_context_free(ctx);
        return st;
    }
    const size_t nb = (size_t)cp.n_batch, d = (size_t)in->n_embd;
    const size_t qd = (size_t)in->n_head * in->head_dim, kvd = (size_t)in->n_head_kv * in->head_dim;
    ctx->x = alloc_floats(nb * d, &st);
    ctx->xn = alloc_floats(nb * d, &st);
    ctx->q = alloc_floats(nb * qd, &st);
    ctx->k = alloc_floats(nb * kvd, &st);
    ctx->v = alloc_floats(nb * kvd, &st);
    ctx->attn = alloc_floats(nb * qd, &st);
    ctx->gate = alloc_floats(nb * (size_t)in->n_ff, &st);
    ctx->up = alloc_floats(nb * (size_t)in->n_ff, &st);
    ctx->proj = alloc_floats(nb * d, &st);
    ctx->rope_cs = alloc_floats(nb * (size_t)in->n_rot, &st);
    ctx->scores = alloc_floats((size_t)cp.n_threads * cp.n_ctx, &st);
    ctx->qr = alloc_floats((size_t)cp.n_threads * in->head_dim, &st);
    ctx->attn_k = attn_select(in->head_dim);
    /* Logits for every batch row are only touched when asked for (TERN_LOGITS_ALL), so the
     * untouched part of this buffer costs address space, not memory. */
    ctx->logits = alloc_floats(nb * (size_t)in->n_vocab, &st);
    /* Quantized activations: the widest input row in the widest format (F32). */
    size_t widest = d > qd ? d : qd;
    if ((size_t)in->n_ff > widest) widest = (size_t)in->n_ff;
    ctx->act_stride = (widest * sizeof(float) + 63) & ~(size_t)63;
    ctx->act = aligned_alloc(64, nb * ctx->act_stride);
    if (!ctx->act && !st) st = tern_fail(TERN_ERR_NOMEM, "context scratch: out of memory");
    if (st) {
        tern_context_free(ctx);
        return st;
    }
    if (!cp.no_warmup) {
        /* a full forward pass touches every weight page, scratch buffer and worker thread */
        const int32_t tok = 0;
        st = forward_batch(ctx, &tok, 1, 0, TERN_LOGITS_LAST);
        ctx->n_logits = 0;
        ctx->profile = false;
        if (st) {
            tern_context_free(ctx);
            return st;
        }
    }
    *out = ctx;
    return TERN_OK;
}

void tern_context_free(struct tern_context *ctx)
{
    if (!ctx) return;
    tp_free(ctx->pool);
    kv_free(&ctx->kv);
    free(ctx->x);
    free(ctx->xn);
    free(ctx->q);
    free(ctx->k);
    free(ctx->v);
    free(ctx->attn);
    free(ctx->gate);
    free(ctx->up);
    free(ctx->proj);
    free(ctx->rope_cs);
    free(ctx->scores);
    free(ctx->qr);
    free(ctx->logits);
    free(ctx->act);
    free(ctx);
}

int tern_context_n_ctx(const struct tern_context *ctx) { return ctx->n_ctx; }
int tern_context_n_batch(const struct tern_context *ctx) { return ctx->n_batch; }
int tern_kv_n_pos(const struct tern_context *ctx) { return ctx->kv.n_pos; }

tern_status tern_kv_truncate(struct tern_context *ctx, int n_pos)
{
    if (n_pos < 0 || n_pos > ctx->kv.n_pos)
        return tern_fail(TERN_ERR_ARG, "cannot truncate the KV cache to %d positions: it holds %d",
                         n_pos, ctx->kv.n_pos);
    ctx->kv.n_pos = n_pos;
    ctx->n_logits = 0;
    return TERN_OK;
}

tern_status tern_decode(struct tern_context *ctx, const int32_t *tokens, int n, int pos0,
                        enum tern_logits_mode mode)
{
    const int n_vocab = ctx->model->info.n_vocab;
    if (n <= 0 || !tokens) return tern_fail(TERN_ERR_ARG, "decode: empty batch");
    if (pos0 != ctx->kv.n_pos)
        return tern_fail(TERN_ERR_ARG, "decode: batch starts at position %d but the KV cache "
                         "holds %d positions (truncate first to rewind)", pos0, ctx->kv.n_pos);
    if ((long long)pos0 + n > ctx->n_ctx)
        return tern_fail(TERN_ERR_RANGE, "decode: %d tokens at position %d exceed the context "
                         "size %d", n, pos0, ctx->n_ctx);
    if (mode == TERN_LOGITS_ALL && n > ctx->n_batch)
        return tern_fail(TERN_ERR_RANGE, "decode: logits for all %d tokens requested but the "
                         "batch size is %d", n, ctx->n_batch);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return tern_fail(TERN_ERR_ARG, "decode: token %d at index %d is outside the "
                             "vocabulary (0..%d)", tokens[i], i, n_vocab - 1);
    ctx->n_logits = 0;
    for (int done = 0; done < n;) {
        int chunk = n - done < ctx->n_batch ? n - done : ctx->n_batch;
        bool last = done + chunk == n;
        tern_status st = forward_batch(ctx, tokens + done, chunk, pos0 + done,
                                       last ? mode : TERN_LOGITS_NONE);
        if (st) return st;
        ctx->kv.n_pos = pos0 + done + chunk;
        if (last) ctx->logits_first = done + ctx->logits_row0;
        done += chunk;
    }
    return TERN_OK;
}

const float *tern_context_logits(const struct tern_context *ctx, int i)
{
    /* i counts tokens of the whole last call; logits row 0 is call row logits_first */
    const int r = i - ctx->logits_first;
    if (ctx->n_logits == 0 || r < 0 || r >= ctx->n_logits) return NULL;
    return ctx->logits + (size_t)r * ctx->model->info.n_vocab;
}
