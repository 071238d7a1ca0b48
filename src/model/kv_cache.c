/* kv_cache.c — allocation of the KV cache (see kv_cache.h). */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

size_t kv_layout_pos_elems(const struct kv_layout *lay)
{
    size_t e = 0;
    for (int il = 0; il < lay->n_layer; il++)
        if (!lay->src || lay->src[il] == il)
            e += (size_t)(lay->kvh ? lay->kvh[il] : lay->n_head_kv) * (lay->hd ? lay->hd[il] : lay->head_dim);
    return e;
}

tern_status kv_init(struct kv_cache *kv, const struct kv_layout *lay, int n_ctx, int n_seq)
{
    memset(kv, 0, sizeof *kv);
    const size_t nl = lay->n_layer > 0 ? (size_t)lay->n_layer : 1;
    const size_t pos_elems = kv_layout_pos_elems(lay);
    const size_t elems = pos_elems * (size_t)n_seq * (size_t)n_ctx;
    kv->layer_off = calloc(nl, sizeof *kv->layer_off);
    kv->layer_kvh = calloc(nl, sizeof *kv->layer_kvh);
    kv->layer_hd = calloc(nl, sizeof *kv->layer_hd);
    kv->layer_own = calloc(nl, sizeof *kv->layer_own);
    kv->k = malloc(elems * sizeof(uint16_t));
    kv->v = malloc(elems * sizeof(uint16_t));
    kv->seq_pos = calloc((size_t)n_seq, sizeof *kv->seq_pos);
    if (!kv->k || !kv->v || !kv->seq_pos || !kv->layer_off || !kv->layer_kvh || !kv->layer_hd ||
        !kv->layer_own) {
        kv_free(kv);
        return tern_fail(TERN_ERR_NOMEM, "KV cache (%d layers, %zu halves per position, %d) x %d "
                         "sequences -> %zu bytes: out of memory", lay->n_layer, pos_elems, n_ctx, n_seq,
                         2 * elems * sizeof(uint16_t));
    }
    size_t off = 0;
    for (int il = 0; il < lay->n_layer; il++) {
        const int src = lay->src ? lay->src[il] : il;
        /* a layer reads its own block, one laid out before it, or none (-1) */
        TERN_ASSERT(src >= -1 && src <= il);
        kv->layer_own[il] = src == il;
        if (src < 0) continue; /* layer_kvh 0: any row index of it fails kv_row_index's check */
        if (src != il) {
            kv->layer_off[il] = kv->layer_off[src];
            kv->layer_kvh[il] = kv->layer_kvh[src];
            kv->layer_hd[il] = kv->layer_hd[src];
            continue;
        }
        kv->layer_off[il] = off;
        kv->layer_kvh[il] = lay->kvh ? lay->kvh[il] : lay->n_head_kv;
        kv->layer_hd[il] = lay->hd ? lay->hd[il] : lay->head_dim;
        off += (size_t)n_seq * kv->layer_kvh[il] * (size_t)n_ctx * kv->layer_hd[il];
    }
    TERN_ASSERT(off == elems);
    kv->n_seq = n_seq;
    kv->n_layer = lay->n_layer;
    kv->n_head_kv = lay->n_head_kv;
    kv->head_dim = lay->head_dim;
    kv->n_ctx = n_ctx;
    kv->pos_elems = pos_elems;
    kv->bytes = 2 * elems * sizeof(uint16_t);
    return TERN_OK;
}

void kv_free(struct kv_cache *kv)
{
    free(kv->k);
    free(kv->v);
    free(kv->seq_pos);
    free(kv->layer_off);
    free(kv->layer_kvh);
    free(kv->layer_hd);
    free(kv->layer_own);
    memset(kv, 0, sizeof *kv);
}
