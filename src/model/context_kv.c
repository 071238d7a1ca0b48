/* context_kv.c — the KV cache room's window into struct tern_context (declared in kv/kv.h).
 *
 * src/kv (snapshots, prefix cache) moves KV bytes in and out of a context; these four
 * accessors are all it needs from context.h, so the context's layout stays private to
 * src/model. Kept separate from context.c so each room edits only its own files. */
#include "model/context.h"

struct kv_cache *kv_of_context(struct tern_context *ctx) { return &ctx->kv; }
const struct kv_cache *kv_of_context_const(const struct tern_context *ctx) { return &ctx->kv; }
const struct tern_model *kv_context_model(const struct tern_context *ctx) { return ctx->model; }

void kv_context_set_n_pos(struct tern_context *ctx, int n_pos)
{
    ctx->kv.seq_pos[0] = n_pos;
    ctx->n_logits = 0; /* logits belonged to the old contents */
}
