/* kv_copy.c — moving runs of positions between a context's KV cache and a packed buffer.
 *
 * Read kv_cache.h first (the cache layout). A packed run of n positions starting at pos0 is laid
 * out as all K rows then all V rows, each for the layers that store KV in order, (kvh, n, hd)
 * per layer: the bytes a snapshot, a prefix-cache block and a cache file carry. Copies are exact
 * (no conversion), which is what lets a restored prefix reproduce a cold run bit for bit.
 * Windowed blocks hold no rows below the sequence's win_lo (kv_cache.h): copying out gives zeros
 * for them, and copying in skips them (the caller has set win_lo to where its data is valid, so
 * the released pages are not brought back). */
#include "model/kv_cache.h"

#include <string.h>

#include "util/check.h"

size_t kv_run_bytes(const struct kv_cache *kv, int n)
{
    return 2 * kv->pos_elems * (size_t)n * sizeof(uint16_t);
}

/* Rows of the run pos0 .. pos0+n-1 of layer il that its block does not hold (windowed, below
 * win_lo): the first `gone` of them. */
static size_t win_gone(const struct kv_cache *kv, int il, int seq, int pos0, int n)
{
    if (!kv->layer_win[il] || kv->win_lo[seq] <= pos0) return 0;
    return kv->win_lo[seq] - pos0 < n ? (size_t)(kv->win_lo[seq] - pos0) : (size_t)n;
}

/* Per (layer, head) the n rows are contiguous in both layouts, so each is one memcpy. */
void kv_copy_out_seq(const struct kv_cache *kv, int seq, int pos0, int n, void *dst)
{
    TERN_ASSERT(seq >= 0 && seq < kv->n_seq && pos0 >= 0 && n > 0 && (long long)pos0 + n <= kv->n_ctx);
    char *k = dst;
    char *v = k + kv->pos_elems * (size_t)n * sizeof(uint16_t);
    for (int il = 0; il < kv->n_layer; il++) {
        if (!kv->layer_own[il]) continue;
        const size_t row = (size_t)kv->layer_hd[il] * sizeof(uint16_t), run = (size_t)n * row;
        const size_t gone = win_gone(kv, il, seq, pos0, n);
        for (int h = 0; h < kv->layer_kvh[il]; h++) {
            memset(k, 0, gone * row);
            memset(v, 0, gone * row);
            if (gone < (size_t)n) {
                memcpy(k + gone * row, kv_k_row_seq(kv, il, seq, h, pos0 + (int)gone), run - gone * row);
                memcpy(v + gone * row, kv_v_row_seq(kv, il, seq, h, pos0 + (int)gone), run - gone * row);
            }
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
        const size_t row = (size_t)kv->layer_hd[il] * sizeof(uint16_t), run = (size_t)n * row;
        const size_t gone = win_gone(kv, il, seq, pos0, n);
        for (int h = 0; h < kv->layer_kvh[il]; h++) {
            if (gone < (size_t)n) {
                memcpy(kv_k_row_seq(kv, il, seq, h, pos0 + (int)gone), k + gone * row, run - gone * row);
                memcpy(kv_v_row_seq(kv, il, seq, h, pos0 + (int)gone), v + gone * row, run - gone * row);
            }
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
