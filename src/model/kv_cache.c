/* kv.c — allocation of the KV cache (see kv.h). */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

tern_status kv_init(struct kv_cache *kv, int n_layer, int n_head_kv, int head_dim, int n_ctx,
                    int n_seq)
{
    memset(kv, 0, sizeof *kv);
    size_t elems = (size_t)n_layer * n_seq * n_head_kv * head_dim * (size_t)n_ctx;
    kv->k = malloc(elems * sizeof(uint16_t));
    kv->v = malloc(elems * sizeof(uint16_t));
    kv->seq_pos = calloc((size_t)n_seq, sizeof *kv->seq_pos);
    if (!kv->k || !kv->v || !kv->seq_pos) {
        kv_free(kv);
        return tern_fail(TERN_ERR_NOMEM, "KV cache (%d, %d, %d, %d) x %d sequences -> %zu bytes: "
                         "out of memory", n_layer, n_head_kv, head_dim, n_ctx, n_seq,
                         2 * elems * sizeof(uint16_t));
    }
    kv->n_seq = n_seq;
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->n_ctx = n_ctx;
    kv->bytes = 2 * elems * sizeof(uint16_t);
    return TERN_OK;
}

void kv_free(struct kv_cache *kv)
{
    free(kv->k);
    free(kv->v);
    free(kv->seq_pos);
    memset(kv, 0, sizeof *kv);
}
