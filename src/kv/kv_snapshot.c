/* kv_snapshot.c — copying a prefix of a context's KV cache out, and restoring it.
 *
 * Read kv.h (layout) and kv_copy.c (the packed form) first. A snapshot remembers the model it
 * came from and its KV layout; restoring into a context of another model is refused: matching
 * layout is not enough, the numbers would simply be wrong. Same model pointer is the fast check;
 * two loads of the same file are recognised by their fingerprints. A model with recurrent
 * layers (qwen35) keeps one state per sequence, not per position: its snapshot also holds the
 * state at n, so n must be a position the context keeps a state for (0, its end, or the base
 * of its last decode call). Sliding-window layers keep only their window (kv_cache.h): the
 * snapshot holds their rows from the context's win_lo on (zeros below), n must be a position
 * whose window the context still holds, and a restore puts win_lo back. */
#include <stdlib.h>
#include <string.h>

#include "model/context_kv.h"
#include "util/check.h"
#include "util/error.h"

struct tern_kv_snapshot {
    const struct tern_model *model;
    int n_layer, n_head_kv, head_dim;
    size_t pos_elems;  /* K halves per position (per-layer shapes differ in gemma4; qwen35's
                          DeltaNet layers hold none) */
    int n;             /* positions 0..n-1 */
    size_t bytes;
    void *data;        /* packed run (kv_copy.c), then the recurrent state at n (state_bytes) */
    size_t state_bytes;/* 0: the model has no recurrent layers */
    int win_lo;        /* windowed layers' rows are valid from this position on */
};

uint64_t tern_kv_bytes(int n_layer, int n_head_kv, int head_dim, int n_ctx)
{
    if (n_layer <= 0 || n_head_kv <= 0 || head_dim <= 0 || n_ctx <= 0) return 0;
    return 2ull * (uint64_t)n_layer * (uint64_t)n_head_kv * (uint64_t)head_dim *
           (uint64_t)n_ctx * sizeof(uint16_t);
}

tern_status tern_kv_snapshot_create(const struct tern_context *ctx, int n,
                                    struct tern_kv_snapshot **out)
{
    const struct kv_cache *kv = kv_of_context_const(ctx);
    if (n < 0 || n > kv->seq_pos[0])
        return tern_fail(TERN_ERR_ARG, "KV snapshot of %d positions: the context holds %d", n,
                         kv->seq_pos[0]);
    if (!kv_win_holds(kv, 0, n))
        return tern_fail(TERN_ERR_UNSUPPORTED, "KV snapshot of %d positions: the sliding-window "
                         "layers (window %d) keep positions from %d on, and a query at %d reads "
                         "from %d", n, kv->win, kv->win_lo[0], n, kv_win_first_key(kv, n));
    struct tern_kv_snapshot *s = calloc(1, sizeof *s);
    if (!s) return tern_fail(TERN_ERR_NOMEM, "KV snapshot: out of memory");
    s->win_lo = n ? kv->win_lo[0] : 0;
    /* kv_win_holds: the rows a query at n reads are held, so they start at or below n */
    TERN_ASSERT(s->win_lo >= 0 && s->win_lo <= n);
    s->model = kv_context_model(ctx);
    s->n_layer = kv->n_layer;
    s->n_head_kv = kv->n_head_kv;
    s->head_dim = kv->head_dim;
    s->pos_elems = kv->pos_elems;
    s->n = n;
    s->state_bytes = kv_context_state_bytes(ctx);
    const size_t kvb = kv_run_bytes(kv, n);
    s->bytes = kvb + s->state_bytes;
    s->data = malloc(s->bytes ? s->bytes : 1);
    if (!s->data) {
        const size_t bytes = s->bytes;
        free(s);
        return tern_fail(TERN_ERR_NOMEM, "KV snapshot of %d positions: out of memory (%zu bytes)",
                         n, bytes);
    }
    TERN_ASSERT(n <= kv->n_ctx && s->bytes >= kvb);
    if (n) kv_copy_out(kv, 0, n, s->data);
    tern_status st = s->state_bytes ? kv_context_state_out(ctx, 0, n, (char *)s->data + kvb) : TERN_OK;
    if (st) {
        tern_kv_snapshot_free(s);
        return tern_fail_prefix(st, "KV snapshot of %d positions: ", n);
    }
    *out = s;
    return TERN_OK;
}

tern_status tern_kv_snapshot_restore(struct tern_context *ctx, const struct tern_kv_snapshot *s)
{
    struct kv_cache *kv = kv_of_context(ctx);
    if (kv->n_layer != s->n_layer || kv->n_head_kv != s->n_head_kv || kv->head_dim != s->head_dim ||
        kv->pos_elems != s->pos_elems)
        return tern_fail(TERN_ERR_ARG, "KV snapshot layout (layers %d, kv_heads %d, head_dim %d) "
                         "does not match the context's (%d, %d, %d)", s->n_layer, s->n_head_kv,
                         s->head_dim, kv->n_layer, kv->n_head_kv, kv->head_dim);
    if (s->n > kv->n_ctx)
        return tern_fail(TERN_ERR_RANGE, "KV snapshot of %d positions does not fit a context of "
                         "%d", s->n, kv->n_ctx);
    const struct tern_model *m = kv_context_model(ctx);
    if (m != s->model) {
        uint8_t a[32], b[32];
        tern_status st = tern_model_fingerprint(m, a);
        if (!st) st = tern_model_fingerprint(s->model, b);
        if (st) return st;
        if (memcmp(a, b, 32))
            return tern_fail(TERN_ERR_ARG, "KV snapshot was taken from another model (model "
                             "fingerprints differ); refusing to restore it");
    }
    if (s->state_bytes != kv_context_state_bytes(ctx))
        return tern_fail(TERN_ERR_ARG, "KV snapshot holds a recurrent state of %zu bytes, the "
                         "context's is %zu", s->state_bytes, kv_context_state_bytes(ctx));
    kv_win_reset(kv, 0, s->win_lo); /* before the copy: rows below are neither held nor copied */
    if (s->n) kv_copy_in(kv, 0, s->n, s->data);
    kv_context_set_n_pos(ctx, s->n);
    TERN_ASSERT(kv->seq_pos[0] == s->n && kv->win_lo[0] <= s->n, "a restore leaves exactly the snapshot's positions");
    if (s->state_bytes)
        kv_context_state_in(ctx, 0, (const char *)s->data + kv_run_bytes(kv, s->n));
    return TERN_OK;
}

int tern_kv_snapshot_n_pos(const struct tern_kv_snapshot *s) { return s->n; }
uint64_t tern_kv_snapshot_bytes(const struct tern_kv_snapshot *s) { return s->bytes; }

void tern_kv_snapshot_free(struct tern_kv_snapshot *s)
{
    if (!s) return;
    free(s->data);
    free(s);
}
