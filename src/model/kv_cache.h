/* kv_cache.h — the KV cache storage of one context: F16 keys and values for every layer and position,
 * allocated once at context creation, updated in place.
 *
 * Layout (why): K and V are stored per layer as [seq][kv_head][pos][head_dim], so attention for
 * one head of one sequence reads one contiguous run of rows and appending a token writes
 * head_dim halves per head. Layers may differ in KV heads and head size (gemma4's sliding and
 * global layers), and a layer may store nothing and read an earlier layer's block (gemma4's
 * shared KV): layer_off[il] then points at that layer's block; or store and read nothing at all
 * (qwen35's Gated DeltaNet layers, whose recurrent state lives beside the cache: rec_state.h),
 * with 0 KV heads. A context holds n_seq
 * independent sequences (default 1), each with its own n_ctx positions; positions
 * 0 .. seq_pos[s]-1 of sequence s are valid, and truncating (rollback) only moves seq_pos[s].
 * Sequence 0 is the one tern_decode and the snapshot / prefix cache code use.
 *
 * Sliding-window layers (gemma3, gemma4, ...) keep only their window: a query at p reads keys
 * from kv_win_first_key(p) on, so a sequence's older rows of those layers are dead once it has
 * moved on. K and V are anonymous mappings, not malloc'd, and kv_win_advance hands the pages of
 * a windowed block's dead rows back to the kernel (madvise MADV_DONTNEED; they read as zeros if
 * touched again). The addressing stays the full n_ctx rows, so attention, copies and rollback
 * read the rows they read before, and results are the same bits; only the resident memory of
 * a windowed block is its window (plus the rollback reserve KV_WIN_KEEP, up to KV_WIN_STEP
 * positions not yet released, and a batch). win_lo[s]
 * records what is gone: rows below it in windowed blocks are not held, so rollback below the
 * window (tern_kv_seq_can_truncate), snapshots and prefix-cache blocks take it into account. */
#ifndef TERN_MODEL_KV_CACHE_H
#define TERN_MODEL_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"
#include "util/check.h"

/* The shape of a model's KV: per layer its KV heads, head size and the layer whose block it
 * uses (itself unless it shares; -1: none, a layer without attention). n_head_kv and head_dim are the model's nominal values (its
 * info), which with n_layer name the layout in snapshots and cache files. */
struct kv_layout {
    int n_layer, n_head_kv, head_dim;
    const int *kvh, *hd, *src; /* (n_layer) each */
    const bool *windowed;      /* (n_layer) the layer's block is read only by sliding-window
                                * layers of window win (NULL: none) */
    int win;
};

/* Positions a windowed block keeps below the next query's window, so that rollback still finds
 * them: speculative decoding's verify pass decodes at most the longest draft (64) and its pending
 * tokens (REC_WINDOW, context.c: 72) and rolls back into it, and the window's start is rounded
 * down to 8, so 72 + 8 would do; 128 leaves room. A release waits until it frees at least
 * KV_WIN_STEP positions, which bounds the madvise calls to one per block and head every
 * KV_WIN_STEP tokens. */
enum { KV_WIN_KEEP = 128, KV_WIN_STEP = 256 };

struct kv_cache {
    int n_layer, n_head_kv, head_dim, n_ctx, n_seq;
    int *seq_pos;    /* (n_seq) positions filled per sequence */
    uint16_t *k;     /* per layer that stores KV: (n_seq, kvh, n_ctx, hd) F16, layers in order */
    uint16_t *v;     /* the same layout */
    size_t *layer_off;/* (n_layer) element offset of the block layer il reads */
    int *layer_kvh;  /* (n_layer) KV heads of that block (0: the layer has no KV) */
    int *layer_hd;   /* (n_layer) its head size */
    bool *layer_own; /* (n_layer) the block is layer il's own (false: an earlier layer's, or none) */
    size_t pos_elems;/* K halves per position of one sequence over the layers that store KV */
    size_t bytes;    /* K + V, addressed (mapped) */
    size_t map_bytes;/* bytes of each of the K and V mappings */
    bool *layer_win; /* (n_layer) the block layer il reads keeps only a window */
    int win;         /* that window (0: no windowed block) */
    int *win_lo;     /* (n_seq) windowed blocks hold sequence s's positions >= win_lo[s] only */
};

TERN_NODISCARD tern_status kv_init(struct kv_cache *kv, const struct kv_layout *lay, int n_ctx, int n_seq);
void kv_free(struct kv_cache *kv);

/* The first key a query at position p reads in a layer of window win: its window's start
 * rounded down to a multiple of 8 (step_attention, forward.c, starts its scores there). */
static inline int kv_window_first_key(int p, int win)
{
    return (p + 1 > win ? p + 1 - win : 0) & ~7;
}
/* The same for the cache's windowed blocks. */
static inline int kv_win_first_key(const struct kv_cache *kv, int p)
{
    return kv_window_first_key(p, kv->win);
}
/* Whether sequence s still holds, in its windowed blocks, the rows a query at position n reads
 * (n = 0 reads none): what truncating to n, copying n positions or a snapshot of n needs. */
static inline bool kv_win_holds(const struct kv_cache *kv, int s, int n)
{
    return n == 0 || kv_win_first_key(kv, n) >= kv->win_lo[s];
}

/* After sequence s moved to n positions: release what no query from n - KV_WIN_KEEP on reads,
 * once that is at least KV_WIN_STEP positions more than already released. */
void kv_win_advance(struct kv_cache *kv, int s);
/* Sequence s is about to be rewritten with new contents whose windowed rows are valid from lo:
 * release all its windowed rows below lo (whatever they held) and set win_lo[s] = lo. */
void kv_win_reset(struct kv_cache *kv, int s, int lo);

/* Bytes of K and V resident in memory now (mincore over both mappings). */
uint64_t kv_resident_bytes(const struct kv_cache *kv);

/* K halves per position over the layers of lay that store KV (a packed run holds 2 x this per
 * position). */
size_t kv_layout_pos_elems(const struct kv_layout *lay);

/* Row of head h at position pos of sequence s in layer il (its head size in halves). Every K/V
 * access goes through here, so the check below covers forward.c, kv_copy.c and the sequence
 * copies. */
static inline size_t kv_row_index(const struct kv_cache *kv, int il, int s, int h, int pos)
{
    TERN_ASSERT(il >= 0 && il < kv->n_layer && s >= 0 && s < kv->n_seq && h >= 0 &&
                h < kv->layer_kvh[il] && pos >= 0 && pos < kv->n_ctx);
    return kv->layer_off[il] +
           (((size_t)s * kv->layer_kvh[il] + h) * kv->n_ctx + pos) * kv->layer_hd[il];
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

/* Packed runs of positions of sequence 0 (kv_copy.c): K rows then V rows, each for the layers
 * that store KV in order, (kvh, n, hd) per layer. kv_run_bytes gives the size; callers check
 * pos0 + n <= n_ctx (asserted). The _seq variants read and write sequence seq (the same packed
 * layout: a run moves between sequences). */
size_t kv_run_bytes(const struct kv_cache *kv, int n);
void kv_copy_out(const struct kv_cache *kv, int pos0, int n, void *dst);
void kv_copy_in(struct kv_cache *kv, int pos0, int n, const void *src);
void kv_copy_out_seq(const struct kv_cache *kv, int seq, int pos0, int n, void *dst);
void kv_copy_in_seq(struct kv_cache *kv, int seq, int pos0, int n, const void *src);

#endif
