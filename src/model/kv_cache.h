/* kv_cache.h — the KV cache storage of one context: F16 keys and values for every layer and position,
 * allocated once at context creation, updated in place.
 *
 * Layout (why): K and V are stored [layer][seq][kv_head][pos][head_dim], so attention for one
 * head of one sequence reads one contiguous run of rows and appending a token writes head_dim
 * halves per head. A context holds n_seq independent sequences (default 1), each with its own
 * n_ctx positions; positions 0 .. seq_pos[s]-1 of sequence s are valid, and truncating
 * (rollback) only moves seq_pos[s]. Sequence 0 is the one tern_decode and the snapshot / prefix
 * cache code use. */
#ifndef TERN_MODEL_KV_CACHE_H
#define TERN_MODEL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tern.h"
#include "util/check.h"

struct kv_cache {
    int n_layer, n_head_kv, head_dim, n_ctx, n_seq;
    int *seq_pos;    /* (n_seq) positions filled per sequence */
    uint16_t *k;     /* (n_layer, n_seq, n_head_kv, n_ctx, head_dim) F16 */
    uint16_t *v;     /* (n_layer, n_seq, n_head_kv, n_ctx, head_dim) F16 */
    size_t bytes;    /* K + V */
};

tern_status kv_init(struct kv_cache *kv, int n_layer, int n_head_kv, int head_dim, int n_ctx,
                    int n_seq);
void kv_free(struct kv_cache *kv);

/* Row of head h at position pos of sequence s in layer il (head_dim halves). Every K/V access
 * goes through here, so the check below covers forward.c, kv_copy.c and the sequence copies. */
static inline size_t kv_row_index(const struct kv_cache *kv, int il, int s, int h, int pos)
{
    TERN_ASSERT(il >= 0 && il < kv->n_layer && s >= 0 && s < kv->n_seq && h >= 0 &&
                h < kv->n_head_kv && pos >= 0 && pos < kv->n_ctx);
    return ((((size_t)il * kv->n_seq + s) * kv->n_head_kv + h) * kv->n_ctx + pos) * kv->head_dim;
}
static inline uint16_t *kv_k_row_seq(const struct kv_cache *kv, int il, int s, int h, int pos)
{
    return kv->k + kv_row_index(kv, il, s, h, pos);
}
static inline uint16_t *kv_v_row_seq(const struct kv_cache *kv, int il, int s, int h, int pos)
{
    return kv->v + kv_row_index(kv, il, s, h, pos);
}
/* The same for sequence 0. */
static inline uint16_t *kv_k_row(const struct kv_cache *kv, int il, int h, int pos)
{
    return kv_k_row_seq(kv, il, 0, h, pos);
}
static inline uint16_t *kv_v_row(const struct kv_cache *kv, int il, int h, int pos)
{
    return kv_v_row_seq(kv, il, 0, h, pos);
}

/* Packed runs of positions of sequence 0 (kv_copy.c): K rows then V rows, each (n_layer, n_head_kv, n,
 * head_dim) F16. kv_run_bytes gives the size; callers check pos0 + n <= n_ctx (asserted). The
 * _seq variants read and write sequence seq (the same packed layout: a run moves between
 * sequences). */
size_t kv_run_bytes(int n_layer, int n_head_kv, int head_dim, int n);
void kv_copy_out(const struct kv_cache *kv, int pos0, int n, void *dst);
void kv_copy_in(struct kv_cache *kv, int pos0, int n, const void *src);
void kv_copy_out_seq(const struct kv_cache *kv, int seq, int pos0, int n, void *dst);
void kv_copy_in_seq(struct kv_cache *kv, int seq, int pos0, int n, const void *src);

#endif
