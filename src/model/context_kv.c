/* context_kv.c — the context's KV interface (declared in model/context_kv.h).
 *
 * src/kv (snapshots, prefix cache) moves KV bytes in and out of a context; these accessors are
 * all it needs, so the context's layout, the model's layers and the kernels stay private to
 * src/model and below. */
#include "model/context_kv.h"

#include "kernels/kern_invariant.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "util/check.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

struct kv_cache *kv_of_context(struct tern_context *ctx) { return &ctx->kv; }
const struct kv_cache *kv_of_context_const(const struct tern_context *ctx) { return &ctx->kv; }
const struct tern_model *kv_context_model(const struct tern_context *ctx) { return ctx->model; }

void kv_context_set_seq_n_pos(struct tern_context *ctx, int seq, int n_pos)
{
    TERN_ASSERT(seq >= 0 && seq < ctx->kv.n_seq);
    TERN_ASSERT(n_pos >= 0 && n_pos <= ctx->kv.n_ctx); /* callers wrote those positions */
    ctx->kv.seq_pos[seq] = n_pos;
    ctx->n_logits = 0; /* logits belonged to the old contents */
    if (seq == 0) ctx->hid_lo = ctx->hid_hi = n_pos; /* and so did the hidden states below n_pos */
    if (ctx->rec.n_layer) {
        ctx->rec.base[seq] = -1;
        ctx->rec.cap_pos[seq] = -1;
        ctx->rec.cap_done[seq] = false;
    }
}

size_t kv_context_state_bytes(const struct tern_context *ctx)
{
    return ctx->rec.seq_floats * sizeof(float);
}

tern_status kv_context_state_out(const struct tern_context *ctx, int seq, int n_pos, void *dst)
{
    const struct rec_state *r = &ctx->rec;
    TERN_ASSERT(seq >= 0 && seq < ctx->n_seq && r->n_layer);
    const size_t bytes = r->seq_floats * sizeof(float);
    if (n_pos == 0) memset(dst, 0, bytes);
    else if (n_pos == ctx->kv.seq_pos[seq]) memcpy(dst, rec_layer(r, seq, r->cur[seq], 0), bytes);
    else if (n_pos == r->base[seq]) memcpy(dst, rec_layer(r, seq, r->cur[seq] ^ 1, 0), bytes);
    else
        return tern_fail(TERN_ERR_UNSUPPORTED, "the recurrent state of sequence %d is kept at 0, "
                         "%d and %d positions, not %d", seq, r->base[seq], ctx->kv.seq_pos[seq], n_pos);
    return TERN_OK;
}

void kv_context_state_in(struct tern_context *ctx, int seq, const void *src)
{
    struct rec_state *r = &ctx->rec;
    TERN_ASSERT(seq >= 0 && seq < ctx->n_seq && r->n_layer);
    float *dst = rec_layer(r, seq, r->cur[seq], 0);
    if (src) memcpy(dst, src, r->seq_floats * sizeof(float));
    else memset(dst, 0, r->seq_floats * sizeof(float));
    r->base[seq] = -1;
}

tern_status kv_context_state_capture(struct tern_context *ctx, int seq, int pos)
{
    struct rec_state *r = &ctx->rec;
    TERN_ASSERT(seq >= 0 && seq < ctx->n_seq && r->n_layer);
    if (!r->cap && !(r->cap = malloc((size_t)r->n_seq * r->seq_floats * sizeof(float))))
        return tern_fail(TERN_ERR_NOMEM, "recurrent state capture: out of memory (%zu bytes)",
                         (size_t)r->n_seq * r->seq_floats * sizeof(float));
    r->cap_pos[seq] = pos;
    r->cap_done[seq] = false;
    return TERN_OK;
}

const void *kv_context_state_captured(const struct tern_context *ctx, int seq, int pos)
{
    const struct rec_state *r = &ctx->rec;
    if (!r->n_layer || !r->cap_done[seq] || r->cap_pos[seq] != pos || pos > ctx->kv.seq_pos[seq])
        return NULL;
    return r->cap + (size_t)seq * r->seq_floats;
}

void kv_context_set_n_pos(struct tern_context *ctx, int n_pos)
{
    kv_context_set_seq_n_pos(ctx, 0, n_pos);
}

size_t kv_model_pos_elems(const struct tern_model *m)
{
    return (size_t)(tern_model_kv_bytes(m, 1) / (2 * sizeof(uint16_t)));
}

int kv_model_min_exact_suffix(const struct tern_model *m)
{
    for (int l = 0; l < m->info.n_layer; l++) {
        struct model_weight *w[MODEL_LAYER_MAX_MATRICES];
        const int n = model_layer_matrices(&m->layers[l], w);
        for (int i = 0; i < n; i++)
            if (!kern_batch_invariant(w[i]->type)) return KV_MIN_BATCHED_SUFFIX;
    }
    if (m->ple_model_proj.data && !kern_batch_invariant(m->ple_model_proj.type))
        return KV_MIN_BATCHED_SUFFIX;
    return 1;
}

const char *kv_kernel_path(void) { return kern_isa_name(); }
