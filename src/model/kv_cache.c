/* kv_cache.c — allocation of the KV cache and the release of windowed blocks' dead rows (see
 * kv_cache.h). */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
    /* anonymous mappings: pages come on first touch, and windowed rows can be given back */
    const size_t map = elems ? elems * sizeof(uint16_t) : 1;
    kv->map_bytes = map;
    kv->k = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    kv->v = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (kv->k == MAP_FAILED) kv->k = NULL;
    if (kv->v == MAP_FAILED) kv->v = NULL;
    kv->seq_pos = calloc((size_t)n_seq, sizeof *kv->seq_pos);
    kv->win_lo = calloc((size_t)n_seq, sizeof *kv->win_lo);
    kv->layer_win = calloc(nl, sizeof *kv->layer_win);
    if (!kv->k || !kv->v || !kv->seq_pos || !kv->layer_off || !kv->layer_kvh || !kv->layer_hd ||
        !kv->layer_own || !kv->win_lo || !kv->layer_win) {
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
            kv->layer_win[il] = kv->layer_win[src];
            kv->layer_off[il] = kv->layer_off[src];
            kv->layer_kvh[il] = kv->layer_kvh[src];
            kv->layer_hd[il] = kv->layer_hd[src];
            continue;
        }
        kv->layer_win[il] = lay->windowed && lay->windowed[il] && lay->win > 0;
        if (kv->layer_win[il]) kv->win = lay->win;
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
    if (kv->k) munmap(kv->k, kv->map_bytes);
    if (kv->v) munmap(kv->v, kv->map_bytes);
    free(kv->seq_pos);
    free(kv->win_lo);
    free(kv->layer_win);
    free(kv->layer_off);
    free(kv->layer_kvh);
    free(kv->layer_hd);
    free(kv->layer_own);
    memset(kv, 0, sizeof *kv);
}

static size_t page_bytes(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Give back the whole pages inside [a, b) (byte addresses in one mapping). */
static void release_pages(uint16_t *a, uint16_t *b)
{
    const size_t page = page_bytes();
    const uintptr_t lo = ((uintptr_t)a + page - 1) & ~(uintptr_t)(page - 1);
    const uintptr_t hi = (uintptr_t)b & ~(uintptr_t)(page - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: a failure keeps the pages */
}

static void release_rows(struct kv_cache *kv, int s, int from, int below)
{
    if (below > kv->n_ctx) below = kv->n_ctx;
    if (from < 0) from = 0;
    if (below <= from) return;
    for (int il = 0; il < kv->n_layer; il++) {
        if (!kv->layer_own[il] || !kv->layer_win[il]) continue;
        for (int h = 0; h < kv->layer_kvh[il]; h++) {
            /* rows from..below-1 of (s, h): the end is exclusive, so one past the last row */
            const size_t a = kv_row_index(kv, il, s, h, from);
            const size_t b = a + (size_t)(below - from) * kv->layer_hd[il];
            release_pages(kv->k + a, kv->k + b);
            release_pages(kv->v + a, kv->v + b);
        }
    }
}

/* Windowed blocks of sequence s: release the rows of positions below `below` (from win_lo[s],
 * whole pages only, so no row at or above `below` is touched) and raise win_lo[s] to it. */
static void win_release(struct kv_cache *kv, int s, int below)
{
    TERN_ASSERT(s >= 0 && s < kv->n_seq);
    if (!kv->win || below <= kv->win_lo[s]) return;
    release_rows(kv, s, kv->win_lo[s], below);
    kv->win_lo[s] = below;
}

void kv_win_advance(struct kv_cache *kv, int s)
{
    if (!kv->win) return;
    TERN_ASSERT(s >= 0 && s < kv->n_seq && kv->seq_pos[s] >= 0 && kv->seq_pos[s] <= kv->n_ctx);
    const int keep = kv_win_first_key(kv, kv->seq_pos[s]) - KV_WIN_KEEP;
    /* never past the first key a query at the current end reads */
    TERN_ASSERT(keep <= kv->seq_pos[s]);
    if (keep - kv->win_lo[s] >= KV_WIN_STEP) win_release(kv, s, keep);
}

void kv_win_reset(struct kv_cache *kv, int s, int lo)
{
    TERN_ASSERT(s >= 0 && s < kv->n_seq && lo >= 0);
    if (!kv->win) return;
    release_rows(kv, s, 0, lo);
    kv->win_lo[s] = lo;
}

static uint64_t resident(const void *base, size_t len)
{
    const size_t page = page_bytes(), n = (len + page - 1) / page;
    uint64_t bytes = 0;
    unsigned char vec[4096];
    for (size_t i = 0; i < n; i += sizeof vec) { /* a page-sized vector at a time: no allocation */
        const size_t m = n - i < sizeof vec ? n - i : sizeof vec;
        const size_t off = i * page, l = off + m * page > len ? len - off : m * page;
        if (mincore((char *)base + off, l, vec)) return 0;
        for (size_t j = 0; j < m; j++) bytes += (vec[j] & 1) ? page : 0;
    }
    return bytes;
}

uint64_t kv_resident_bytes(const struct kv_cache *kv)
{
    if (!kv->k) return 0;
    return resident(kv->k, kv->map_bytes) + resident(kv->v, kv->map_bytes);
}
