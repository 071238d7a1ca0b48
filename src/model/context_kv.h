/* context_kv.h — the context's KV interface: what rooms above src/model (the snapshots and the
 * prefix cache of src/kv) may use of a context, so they never see struct tern_context, the
 * model's layers or the kernels.
 *
 * Read kv_cache.h first (the storage layout). The accessors hand out the context's KV cache
 * itself; kv_context_set_n_pos marks positions 0..n_pos-1 of sequence 0 valid after they were
 * written with kv_copy_in, and drops logits that belonged to the old contents. */
#ifndef TERN_MODEL_CONTEXT_KV_H
#define TERN_MODEL_CONTEXT_KV_H

#include "model/kv_cache.h"

struct kv_cache *kv_of_context(struct tern_context *ctx);
const struct kv_cache *kv_of_context_const(const struct tern_context *ctx);
const struct tern_model *kv_context_model(const struct tern_context *ctx);
void kv_context_set_n_pos(struct tern_context *ctx, int n_pos);
/* The same for sequence seq (0 .. n_seq-1) of a multi-sequence context. */
void kv_context_set_seq_n_pos(struct tern_context *ctx, int seq, int n_pos);

/* K halves per position of one sequence over m's layers that store KV: a packed run of n
 * positions (kv_copy.c) is 2 x this x n halves, whatever context holds it. */
size_t kv_model_pos_elems(const struct tern_model *m);

/* The recurrent state of qwen35's DeltaNet layers (model/rec_state.h), beside the KV: a cached
 * prefix or a snapshot of such a model needs the state at its end as well. */
/* Bytes of one sequence's state (0: the model has no recurrent layers). */
size_t kv_context_state_bytes(const struct tern_context *ctx);
/* Copy sequence seq's state at n_pos positions to dst (state_bytes): n_pos must be one the
 * sequence can truncate to (tern_kv_seq_can_truncate) without replay: 0 (zeros), its end, or
 * its rollback base; TERN_ERR_UNSUPPORTED otherwise. */
TERN_NODISCARD tern_status kv_context_state_out(const struct tern_context *ctx, int seq, int n_pos, void *dst);
/* Make src (state_bytes; NULL: zeros) the state of sequence seq, with kv_context_set_seq_n_pos
 * for its positions (which drops the rollback base and captures). */
void kv_context_state_in(struct tern_context *ctx, int seq, const void *src);
/* Keep the state of sequence seq when a later decode passes pos positions (one request per
 * sequence; the first one allocates the capture buffers, hence TERN_ERR_NOMEM). */
TERN_NODISCARD tern_status kv_context_state_capture(struct tern_context *ctx, int seq, int pos);
/* The state kept at pos for seq (state_bytes), or NULL if it was not or is stale. */
const void *kv_context_state_captured(const struct tern_context *ctx, int seq, int pos);

/* Tokens that tern_decode runs as one batch through the prefill kernels at the least: a prompt
 * is cut into equal sub-batches, never leaving a last one shorter than this. */
#define KV_MIN_BATCHED_SUFFIX 16

/* The fewest prompt tokens that must be decoded after a restored prefix for the logits (and the
 * KV written) to have the bits of a cold run on the active kernel path: 1 when every layer
 * matmul of m sums in the same order at any batch size (kern_batch_invariant), otherwise
 * KV_MIN_BATCHED_SUFFIX (then the rest runs through the same prefill kernels as the cold run). */
int kv_model_min_exact_suffix(const struct tern_model *m);

/* The kernel path in use ("avx512", "avx2", "neon", "scalar"): KV written by one path is exact
 * only for that path, so persisted KV is tagged with it. */
const char *kv_kernel_path(void);

#endif
