/* kv_copy.c — moving runs of positions between a context's KV cache and a packed buffer.
 *
 * Read kv_cache.h first (the cache layout). A packed run of n positions starting at pos0 is laid
 * out as all K rows then all V rows, each for the layers that store KV in order, (kvh, n, hd)
 * per layer: the bytes a snapshot, a prefix-cache block and a cache file carry. Copies are exact
 * (no conversion), which is what lets a restored prefix reproduce a cold run bit for bit. */
#include "model/kv_cache.h"

#include <string.h>

#include "util/check.h"

size_t kv_run_bytes(const struct kv_cache *kv, int n)
{
    return 2 * kv->pos_elems * (size_t)n * sizeof(uint16_t);
}

/* Per (layer, head) the n rows are contiguous in both layouts, so each is one memcpy. */
void kv_copy_out_seq(const struct kv_cache *kv, int seq, int pos0, int n, void *dst)
{
    TERN_ASSERT(seq >= 0 && seq < kv->n_seq && pos0 >= 0 && n > 0 && (long long)pos0 + n <= kv->n_ctx);
    char *k = dst;
    char *v = k + kv->pos_elems * (size_t)n * sizeof(uint16_t);
    for (int il = 0; il < kv->n_layer; il++) {
        if (!kv->layer_own[il]) continue;
        const size_t run = (size_t)n * kv->layer_hd[il] * sizeof(uint16_t);
        for (int h = 0; h < kv->layer_kvh[il]; h++) {
            memcpy(k, kv_k_row_seq(kv, il, seq, h, pos0), run);
            memcpy(v, kv_v_row_seq(kv, il, seq, h, pos0), run);
            k += run;
            v += run;
        }
    }
}

void kv_copy_in_seq(struct kv_cache *kv, int seq, int pos0, int n, const void *src)
{
    TERN_ASSERT(seq >= 0 && seq < kv->n_seq && pos0 >= 0 && n > 0 && (long long)pos0 + n <= kv->n_ctx);
    const char *k = src;
    const char *v = k + kv->pos_elems * (size_t)n * sizeof(uint16_t);
    for (int il = 0; il < kv->n_layer; il++) {
        if (!kv->layer_own[il]) continue;
        const size_t run = (size_t)n * kv->layer_hd[il] * sizeof(uint16_t);
        for (int h = 0; h < kv->layer_kvh[il]; h++) {
            memcpy(kv_k_row_seq(kv, il, seq, h, pos0), k, run);
            memcpy(kv_v_row_seq(kv, il, seq, h, pos0), v, run);
            k += run;
            v += run;
        }
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
