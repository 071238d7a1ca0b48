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

struct kv_cache *kv_of_context(struct tern_context *ctx) { return &ctx->kv; }
const struct kv_cache *kv_of_context_const(const struct tern_context *ctx) { return &ctx->kv; }
const struct tern_model *kv_context_model(const struct tern_context *ctx) { return ctx->model; }

void kv_context_set_seq_n_pos(struct tern_context *ctx, int seq, int n_pos)
{
    TERN_ASSERT(seq >= 0 && seq < ctx->kv.n_seq);
    TERN_ASSERT(n_pos >= 0 && n_pos <= ctx->kv.n_ctx); /* callers wrote those positions */
    ctx->kv.seq_pos[seq] = n_pos;
    ctx->n_logits = 0; /* logits belonged to the old contents */
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
        const struct model_layer *L = &m->layers[l];
        const struct model_weight *w[] = {&L->wq, &L->wk, &L->wv, &L->wo,
                                          &L->ffn_gate, &L->ffn_up, &L->ffn_down,
                                          &L->ple_gate, &L->ple_proj};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            if (w[i]->data && !kern_batch_invariant(w[i]->type)) return KV_MIN_BATCHED_SUFFIX;
    }
    if (m->ple_model_proj.data && !kern_batch_invariant(m->ple_model_proj.type))
        return KV_MIN_BATCHED_SUFFIX;
    return 1;
}

const char *kv_kernel_path(void) { return kern_isa_name(); }
