/* kv_copy.c — moving runs of positions between a context's KV cache and a packed buffer.
 *
 * Read kv.h first (the cache layout). A packed run of n positions starting at pos0 is laid out
 * as all K rows then all V rows, each (n_layer, n_head_kv, n, head_dim) F16: the bytes a
 * snapshot, a prefix-cache block and a cache file carry. Copies are exact (no conversion), which
 * is what lets a restored prefix reproduce a cold run bit for bit. */
#include "model/kv_cache.h"

#include <string.h>

#include "util/check.h"

size_t kv_run_bytes(int n_layer, int n_head_kv, int head_dim, int n)
{
    return 2 * (size_t)n_layer * n_head_kv * head_dim * (size_t)n * sizeof(uint16_t);
}

/* Per (layer, head) the n rows are contiguous in both layouts, so each is one memcpy. */
void kv_copy_out_seq(const struct kv_cache *kv, int seq, int pos0, int n, void *dst)
{
    TERN_ASSERT(seq >= 0 && seq < kv->n_seq && pos0 >= 0 && n > 0 && (long long)pos0 + n <= kv->n_ctx);
    const size_t run = (size_t)n * kv->head_dim * sizeof(uint16_t);
    char *k = dst;
    char *v = k + (size_t)kv->n_layer * kv->n_head_kv * run;
    for (int il = 0; il < kv->n_layer; il++)
        for (int h = 0; h < kv->n_head_kv; h++) {
            memcpy(k, kv_k_row_seq(kv, il, seq, h, pos0), run);
            memcpy(v, kv_v_row_seq(kv, il, seq, h, pos0), run);
            k += run;
            v += run;
        }
}

void kv_copy_in_seq(struct kv_cache *kv, int seq, int pos0, int n, const void *src)
{
    TERN_ASSERT(seq >= 0 && seq < kv->n_seq && pos0 >= 0 && n > 0 && (long long)pos0 + n <= kv->n_ctx);
    const size_t run = (size_t)n * kv->head_dim * sizeof(uint16_t);
    const char *k = src;
    const char *v = k + (size_t)kv->n_layer * kv->n_head_kv * run;
    for (int il = 0; il < kv->n_layer; il++)
        for (int h = 0; h < kv->n_head_kv; h++) {
            memcpy(kv_k_row_seq(kv, il, seq, h, pos0), k, run);
            memcpy(kv_v_row_seq(kv, il, seq, h, pos0), v, run);
            k += run;
            v += run;
        }
}

void kv_copy_out(const struct kv_cache *kv, int pos0, int n, void *dst)
{
    kv_copy_out_seq(kv, 0, pos0, n, dst);
}

void kv_copy_in(struct kv_cache *kv, int pos0, int n, const void *src)
{
    kv_copy_in_seq(kv, 0, pos0, n, src);
}
