/* prefix_cache.c — the prefix cache: block table, longest-prefix lookup, LRU eviction under a
 * byte budget, and tern_prefix_cache_prefill (restore the cached part, decode the rest, store
 * the new blocks). Read prefix_cache.h first for the block model and why eviction takes leaves.
 * Files on disk are prefix_file.c's business. */
#include "kv/prefix_cache.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define PC_DEFAULT_BLOCK 32
#define PC_DEFAULT_BUDGET (256ull << 20)

struct tern_prefix_cache_params tern_prefix_cache_default_params(void)
{
    return (struct tern_prefix_cache_params){.block_tokens = 0, .budget_bytes = 0, .dir = NULL};
}

/* ---------------------------------------------------------------- table */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t pc_chain_key(uint64_t parent, const int32_t *tokens, int B)
{
    uint64_t h = mix64(parent ^ 0x7465726e6b763031ull) ^ (uint64_t)B;
    for (int i = 0; i < B; i++) h = mix64(h ^ (uint32_t)tokens[i]) + 0x9e3779b97f4a7c15ull;
    return h ? h : 1;
}

struct pc_block *pc_find(const struct tern_prefix_cache *pc, uint64_t key)
{
    for (struct pc_block *b = pc->buckets[key & (pc->n_buckets - 1)]; b; b = b->next)
        if (b->key == key) return b;
    return NULL;
}

static tern_status grow(struct tern_prefix_cache *pc)
{
    size_t nb = pc->n_buckets * 2;
    struct pc_block **nbk = calloc(nb, sizeof *nbk);
    if (!nbk) return tern_fail(TERN_ERR_NOMEM, "prefix cache: out of memory growing the table");
    for (size_t i = 0; i < pc->n_buckets; i++)
        for (struct pc_block *b = pc->buckets[i], *nx; b; b = nx) {
            nx = b->next;
            b->next = nbk[b->key & (nb - 1)];
            nbk[b->key & (nb - 1)] = b;
        }
    free(pc->buckets);
    pc->buckets = nbk;
    pc->n_buckets = nb;
    return TERN_OK;
}

tern_status pc_insert(struct tern_prefix_cache *pc, struct pc_block *b)
{
    TERN_ASSERT(b->key != 0 && b->key != b->parent && !pc_find(pc, b->key));
    TERN_ASSERT(b->n_children == 0 && b->depth >= 0 && (b->depth == 0) == (b->parent == 0));
    TERN_ASSERT(b->depth == 0 || b->group == 0);
    if (pc->st.n_blocks + 1 > pc->n_buckets) {
        tern_status st = grow(pc);
        if (st) return st;
    }
    if (!pc->loading) {
        if (b->parent) {
            struct pc_block *p = pc_find(pc, b->parent);
            if (p) p->n_children++;
            else pc->n_orphans++;
        }
        /* Blocks loaded without their parent name b as parent: b must count them, or it would
         * look like a leaf and be evicted before them. */
        for (size_t i = 0; pc->n_orphans > 0 && i < pc->n_buckets; i++)
            for (struct pc_block *x = pc->buckets[i]; x; x = x->next)
                if (x->parent == b->key) {
                    b->n_children++;
                    pc->n_orphans--;
                }
    }
    struct pc_block **head = &pc->buckets[b->key & (pc->n_buckets - 1)];
    b->next = *head;
    *head = b;
    pc->st.n_blocks++;
    pc->st.bytes += pc->block_bytes + (b->state ? pc->state_bytes : 0);
    pc->st.n_states += b->state != NULL;
    if (!pc->loading) PC_CHECK(pc);
    return TERN_OK;
}

void pc_block_free(struct pc_block *b)
{
    if (!b) return;
    free(b->tokens);
    free(b->kv);
    free(b->state);
    free(b);
}

/* Unlink and free a leaf. */
static void remove_block(struct tern_prefix_cache *pc, struct pc_block *b)
{
    const uint64_t size = pc->block_bytes + (b->state ? pc->state_bytes : 0);
    TERN_ASSERT(b->n_children == 0 && pc->st.n_blocks > 0 && pc->st.bytes >= size);
    struct pc_block **pp = &pc->buckets[b->key & (pc->n_buckets - 1)];
    while (*pp != b) {
        TERN_ASSERT(*pp); /* b is in its key's bucket */
        pp = &(*pp)->next;
    }
    *pp = b->next;
    if (b->parent) {
        struct pc_block *p = pc_find(pc, b->parent);
        if (p) {
            TERN_ASSERT(p->n_children > 0);
            p->n_children--;
        } else {
            TERN_ASSERT(pc->n_orphans > 0);
            pc->n_orphans--;
        }
    }
    pc->st.n_blocks--;
    pc->st.bytes -= size;
    pc->st.n_states -= b->state != NULL;
    pc_block_free(b);
}

void pc_recount_children(struct tern_prefix_cache *pc)
{
    pc->n_orphans = 0;
    for (size_t i = 0; i < pc->n_buckets; i++)
        for (struct pc_block *b = pc->buckets[i]; b; b = b->next) b->n_children = 0;
    for (size_t i = 0; i < pc->n_buckets; i++)
        for (struct pc_block *b = pc->buckets[i]; b; b = b->next) {
            struct pc_block *p = b->parent ? pc_find(pc, b->parent) : NULL;
            if (p) p->n_children++;
            else if (b->parent) pc->n_orphans++;
        }
}

bool pc_check_table(struct tern_prefix_cache *pc, char *why, size_t cap)
{
    char msg[256];
#define PC_BAD(...)                                                                            \
    do {                                                                                       \
        snprintf(msg, sizeof msg, __VA_ARGS__);                                                \
        goto bad;                                                                              \
    } while (0)
    const size_t nb = pc->n_buckets;
    if (!pc->buckets || nb == 0 || (nb & (nb - 1)))
        PC_BAD("%zu buckets: not a power of two", nb);
    if (pc->B <= 0 || pc->block_bytes == 0) PC_BAD("block of %d tokens, %zu bytes", pc->B, pc->block_bytes);
    uint64_t n = 0, n_states = 0;
    for (size_t i = 0; i < nb; i++)
        for (struct pc_block *b = pc->buckets[i]; b; b = b->next) {
            n_states += b->state != NULL;
            if (b->state && !pc->state_bytes)
                PC_BAD("block %016llx holds a state, the model has none", (unsigned long long)b->key);
            if (++n > pc->st.n_blocks)
                PC_BAD("more blocks in the buckets than n_blocks %llu (a cycle or a lost count)",
                       (unsigned long long)pc->st.n_blocks);
            if ((b->key & (nb - 1)) != i)
                PC_BAD("block %016llx in bucket %zu, belongs in %zu", (unsigned long long)b->key,
                       i, (size_t)(b->key & (nb - 1)));
            if (!b->key || b->key == b->parent)
                PC_BAD("block key %016llx, parent %016llx", (unsigned long long)b->key,
                       (unsigned long long)b->parent);
            if (pc_find(pc, b->key) != b)
                PC_BAD("key %016llx is in the table twice", (unsigned long long)b->key);
            if (b->depth < 0 || b->depth > INT_MAX / pc->B - 1 || (b->depth == 0) != (b->parent == 0))
                PC_BAD("block %016llx: depth %d with parent %016llx", (unsigned long long)b->key,
                       b->depth, (unsigned long long)b->parent);
            if (!b->tokens || !b->kv)
                PC_BAD("block %016llx has no tokens or KV", (unsigned long long)b->key);
            if (b->last_used > pc->tick || b->n_children < 0)
                PC_BAD("block %016llx: last used at tick %llu of %llu, %d children",
                       (unsigned long long)b->key, (unsigned long long)b->last_used,
                       (unsigned long long)pc->tick, b->n_children);
            b->check_children = 0;
        }
    if (n != pc->st.n_blocks)
        PC_BAD("%llu blocks in the buckets, n_blocks says %llu", (unsigned long long)n,
               (unsigned long long)pc->st.n_blocks);
    if (pc->st.bytes != n * pc->block_bytes + n_states * pc->state_bytes ||
        pc->st.bytes > pc->budget || n_states != pc->st.n_states)
        PC_BAD("bytes %llu for %llu blocks of %zu and %llu (n_states %llu) states of %zu (budget %llu)",
               (unsigned long long)pc->st.bytes, (unsigned long long)n, pc->block_bytes,
               (unsigned long long)n_states, (unsigned long long)pc->st.n_states,
               pc->state_bytes, (unsigned long long)pc->budget);
    int orphans = 0;
    for (size_t i = 0; i < nb; i++)
        for (struct pc_block *b = pc->buckets[i]; b; b = b->next) {
            struct pc_block *p = b->parent ? pc_find(pc, b->parent) : NULL;
            if (p) p->check_children++;
            else if (b->parent) orphans++;
        }
    for (size_t i = 0; i < nb; i++)
        for (struct pc_block *b = pc->buckets[i]; b; b = b->next)
            if (b->n_children != b->check_children)
                PC_BAD("block %016llx counts %d children, %d blocks name it as parent",
                       (unsigned long long)b->key, b->n_children, b->check_children);
    if (orphans != pc->n_orphans)
        PC_BAD("%d blocks have no parent in the table, n_orphans says %d", orphans, pc->n_orphans);
    return true;
#undef PC_BAD
bad:
    if (why) snprintf(why, cap, "%s", msg);
    else fprintf(stderr, "prefix cache check failed: %s\n", msg);
    return false;
}

/* A linear scan per eviction: tables hold thousands of blocks at most (a block is ~1 MB of KV
 * for a 0.5B model), and evictions happen once per stored block, beside a forward pass. */
bool pc_make_room(struct tern_prefix_cache *pc, uint64_t need, const struct pc_block *keep)
{
    if (need > pc->budget) return false;
    while (pc->st.bytes + need > pc->budget) {
        struct pc_block *victim = NULL;
        for (size_t i = 0; i < pc->n_buckets; i++)
            for (struct pc_block *b = pc->buckets[i]; b; b = b->next)
                if (b->n_children == 0 && b != keep &&
                    (!victim || b->last_used < victim->last_used))
                    victim = b;
        if (!victim) return false;
        pc->st.evicted_blocks++;
        pc->st.evicted_bytes += pc->block_bytes + (victim->state ? pc->state_bytes : 0);
        remove_block(pc, victim);
        PC_CHECK(pc);
    }
    TERN_ASSERT(pc->st.bytes + need <= pc->budget);
    return true;
}

/* ---------------------------------------------------------------- lifecycle */

tern_status tern_prefix_cache_create(const struct tern_model *m,
                                     const struct tern_prefix_cache_params *p,
                                     struct tern_prefix_cache **out)
{
    struct tern_prefix_cache_params pp = p ? *p : tern_prefix_cache_default_params();
    if (pp.block_tokens < 0 || pp.block_tokens > 65536)
        return tern_fail(TERN_ERR_ARG, "prefix cache: block_tokens %d out of range (1..65536)",
                         pp.block_tokens);
    const struct tern_model_info *in = tern_model_get_info(m);
    struct tern_prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return tern_fail(TERN_ERR_NOMEM, "prefix cache: out of memory");
    pc->model = m;
    pc->n_layer = in->n_layer;
    pc->n_head_kv = in->n_head_kv;
    pc->head_dim = in->head_dim;
    pc->n_vocab = in->n_vocab;
    pc->B = pp.block_tokens ? pp.block_tokens : PC_DEFAULT_BLOCK;
    pc->pos_elems = kv_model_pos_elems(m);
    pc->block_bytes = 2 * sizeof(uint16_t) * pc->pos_elems * (size_t)pc->B;
    pc->state_bytes = (size_t)in->state_bytes;
    pc->budget = pp.budget_bytes ? pp.budget_bytes : PC_DEFAULT_BUDGET;
    pc->st.budget_bytes = pc->budget;
    pc->st.block_tokens = pc->B;
    pc->n_buckets = 64;
    pc->buckets = calloc(pc->n_buckets, sizeof *pc->buckets);
    tern_status st = pc->buckets ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "prefix cache: out of memory");
    if (!st) st = tern_model_fingerprint(m, pc->model_fp);
    if (!st) st = tern_tokenizer_fingerprint(m, pc->tok_fp);
    if (!st && pp.dir) {
        pc->dir = strdup(pp.dir);
        st = pc->dir ? pc_load_dir(pc) : tern_fail(TERN_ERR_NOMEM, "prefix cache: out of memory");
    }
    if (st) {
        tern_prefix_cache_free(pc);
        return st;
    }
    *out = pc;
    return TERN_OK;
}

void tern_prefix_cache_clear(struct tern_prefix_cache *pc)
{
    for (size_t i = 0; i < pc->n_buckets; i++) {
        for (struct pc_block *b = pc->buckets[i], *nx; b; b = nx) {
            nx = b->next;
            pc_block_free(b);
        }
        pc->buckets[i] = NULL;
    }
    pc->st.n_blocks = 0;
    pc->st.n_states = 0;
    pc->st.bytes = 0;
    pc->n_orphans = 0;
}

void tern_prefix_cache_free(struct tern_prefix_cache *pc)
{
    if (!pc) return;
    if (pc->buckets) tern_prefix_cache_clear(pc);
    free(pc->buckets);
    free(pc->dir);
    free(pc);
}

void tern_prefix_cache_get_stats(const struct tern_prefix_cache *pc,
                                 struct tern_prefix_cache_stats *out)
{
    *out = pc->st;
}

const char *tern_prefix_cache_warning(const struct tern_prefix_cache *pc)
{
    return pc->warning[0] ? pc->warning : NULL;
}

/* ---------------------------------------------------------------- lookup and prefill */

/* Walk the chain of tokens[0..max_tokens) block by block; fills found[] (may be NULL) and
 * returns the number of blocks present. *key_out is the key of the last found block (0 if none). */
static int walk(const struct tern_prefix_cache *pc, uint64_t group, const int32_t *tokens, int max_tokens,
                struct pc_block **found, uint64_t *key_out)
{
    uint64_t key = 0;
    int d = 0;
    for (; (long long)(d + 1) * pc->B <= max_tokens; d++) {
        const int32_t *t = tokens + (size_t)d * pc->B;
        uint64_t k = pc_chain_key(d ? key : group, t, pc->B);
        struct pc_block *b = pc_find(pc, k);
        if (!b || b->parent != key || b->depth != d || (d == 0 && b->group != group) ||
            memcmp(b->tokens, t, (size_t)pc->B * sizeof *t))
            break;
        if (found) found[d] = b;
        key = k;
    }
    if (key_out) *key_out = key;
    return d;
}

int tern_prefix_cache_match(const struct tern_prefix_cache *pc, const int32_t *tokens, int n)
{
    if (!tokens || n <= 0) return 0;
    return walk(pc, 0, tokens, n, NULL, NULL) * pc->B;
}

/* Copy block d of sequence seq of the context into a new table entry (after making room).
 * Returns false when the budget cannot take it (then no later block of this prompt is stored
 * either). */
static bool store_block(struct tern_prefix_cache *pc, const struct kv_cache *kv, int seq, uint64_t group,
                        const int32_t *tokens, int d, uint64_t parent, uint64_t key, const void *state)
{
    if (pc_find(pc, key)) return false; /* a colliding key: leave the resident block alone */
    struct pc_block *keep = parent ? pc_find(pc, parent) : NULL;
    if (!pc_make_room(pc, pc->block_bytes + (state ? pc->state_bytes : 0), keep)) return false;
    struct pc_block *b = calloc(1, sizeof *b);
    if (!b) return false;
    b->tokens = malloc((size_t)pc->B * sizeof *b->tokens);
    b->kv = malloc(pc->block_bytes);
    if (state && (b->state = malloc(pc->state_bytes))) memcpy(b->state, state, pc->state_bytes);
    if (!b->tokens || !b->kv || (state && !b->state)) {
        pc_block_free(b);
        return false;
    }
    b->key = key;
    b->parent = parent;
    b->group = d ? 0 : group;
    b->depth = d;
    b->last_used = ++pc->tick;
    memcpy(b->tokens, tokens + (size_t)d * pc->B, (size_t)pc->B * sizeof *tokens);
    TERN_ASSERT(d >= 0 && (long long)(d + 1) * pc->B <= kv->seq_pos[seq]); /* decoded already */
    kv_copy_out_seq(kv, seq, d * pc->B, pc->B, b->kv);
    b->missing_win = kv->win && d * pc->B < kv->win_lo[seq];
    if (pc_insert(pc, b)) {
        pc_block_free(b);
        return false;
    }
    pc->st.stored_blocks++;
    return true;
}

int pc_min_suffix(const struct tern_prefix_cache *pc)
{
    return kv_model_min_exact_suffix(pc->model);
}

static tern_status check_args(const struct tern_prefix_cache *pc, struct tern_context *ctx, int seq,
                              const int32_t *tokens, int n, const char *what)
{
    if (!tokens || n <= 0) return tern_fail(TERN_ERR_ARG, "prefix cache %s: empty prompt", what);
    if (kv_context_model(ctx) != pc->model)
        return tern_fail(TERN_ERR_ARG, "prefix cache %s: the context belongs to another "
                         "model than the cache", what);
    const struct kv_cache *kv = kv_of_context(ctx);
    if (seq < 0 || seq >= kv->n_seq)
        return tern_fail(TERN_ERR_ARG, "prefix cache %s: sequence %d of a context of %d", what, seq, kv->n_seq);
    if (n > kv->n_ctx)
        return tern_fail(TERN_ERR_RANGE, "prefix cache %s: %d prompt tokens exceed the "
                         "context size %d", what, n, kv->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= pc->n_vocab)
            return tern_fail(TERN_ERR_ARG, "prefix cache %s: token %d at index %d is "
                             "outside the vocabulary (0..%d)", what, tokens[i], i, pc->n_vocab - 1);
    return TERN_OK;
}

/* Whether found[0..nb) hold the sliding-window layers' rows a query at position nb * B reads:
 * those of the blocks from the one holding its window's first key on. */
static bool window_held(const struct kv_cache *kv, int B, struct pc_block *const *found, int nb)
{
    if (!kv->win) return true;
    for (int d = kv_win_first_key(kv, nb * B) / B; d < nb; d++)
        if (found[d]->missing_win) return false;
    return true;
}

/* Restore the longest cached prefix of tokens[0..n) into sequence seq (the limit below) if it
 * is longer than more_than tokens (else the sequence is left alone and 0 returned); *key_out:
 * the key of its last block (0: none). Returns the tokens restored. */
static int restore(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq, uint64_t group,
                   const int32_t *tokens, int n, int more_than, uint64_t *key_out, tern_status *st)
{
    /* Restore at most n - min_suffix tokens: the last token must be decoded for its logits.
     * When the layer matmuls are batch-invariant (kv_model_min_exact_suffix; norms, RoPE, activation
     * quantization and attention are per token already) any suffix gets the cold run's bits and
     * min_suffix is 1. Otherwise the rest is one batch of >= KV_MIN_BATCHED_SUFFIX tokens, which every
     * matmul kernel computes as inside the cold run's longer batch (very small batches take
     * kernels that sum in another order on some paths): at most one block of recompute. */
    struct kv_cache *kv = kv_of_context(ctx);
    const int min_suffix = pc_min_suffix(pc);
    const int max_blocks = n > min_suffix ? (n - min_suffix) / pc->B : 0;
    struct pc_block *stackbuf[64];
    struct pc_block **found = max_blocks <= 64 ? stackbuf : malloc((size_t)max_blocks * sizeof *found);
    *st = TERN_OK;
    if (!found) {
        *st = tern_fail(TERN_ERR_NOMEM, "prefix cache: out of memory");
        return 0;
    }
    uint64_t key;
    int nb = walk(pc, group, tokens, max_blocks * pc->B, found, &key);
    TERN_ASSERT(nb >= 0 && nb <= max_blocks);
    /* a recurrent model continues from a state: the deepest found block that has one; one with
     * sliding-window layers from the rows of the window before it */
    while (nb > 0 && ((pc->state_bytes && !found[nb - 1]->state) || !window_held(kv, pc->B, found, nb))) nb--;
    key = nb ? found[nb - 1]->key : 0;
    pc->st.lookups++;
    if (nb * pc->B <= more_than) {
        if (found != stackbuf) free(found);
        pc->st.misses++;
        *key_out = 0;
        return 0;
    }
    /* windowed rows are copied in from the window's first key on (the blocks before may hold
     * zeros there), and the sequence's rows below it are released */
    kv_win_reset(kv, seq, nb ? kv_win_first_key(kv, nb * pc->B) : 0);
    for (int d = 0; d < nb; d++) {
        /* block d holds positions d*B .. d*B+B-1, all inside the prompt, so inside n_ctx */
        TERN_ASSERT(found[d]->depth == d && (long long)(d + 1) * pc->B <= n && n <= kv->n_ctx);
        kv_copy_in_seq(kv, seq, d * pc->B, pc->B, found[d]->kv);
        found[d]->last_used = ++pc->tick;
    }
    const void *state = nb ? found[nb - 1]->state : NULL;
    if (found != stackbuf) free(found);
    const int reused = nb * pc->B;
    kv_context_set_seq_n_pos(ctx, seq, reused);
    /* a hit leaves the tokens the active kernel path must decode itself (pc_min_suffix) */
    TERN_ASSERT(kv->seq_pos[seq] == reused && reused > more_than && (reused == 0 || reused <= n - min_suffix));
    if (pc->state_bytes) kv_context_state_in(ctx, seq, state);
    if (nb) pc->st.hits++; else pc->st.misses++;
    pc->st.hit_tokens += (uint64_t)reused;
    pc->st.miss_tokens += (uint64_t)(n - reused);
    *key_out = key;
    return reused;
}

/* Store the blocks of tokens[0..n) after depth d0 (key: the chain key of block d0 - 1) that
 * sequence seq holds and the cache does not. */
static void store_from(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq, uint64_t group,
                       const int32_t *tokens, int n, int d0, uint64_t key)
{
    const struct kv_cache *kv = kv_of_context(ctx);
    for (int d = d0; (long long)(d + 1) * pc->B <= n; d++) {
        uint64_t k = pc_chain_key(d ? key : group, tokens + (size_t)d * pc->B, pc->B);
        struct pc_block *have = pc_find(pc, k);
        /* recurrent models: the state after this block, if the context kept it */
        const void *state = pc->state_bytes ? kv_context_state_captured(ctx, seq, (d + 1) * pc->B) : NULL;
        if (have && have->parent == key && have->depth == d && (d || have->group == group) &&
            !memcmp(have->tokens, tokens + (size_t)d * pc->B, (size_t)pc->B * sizeof *tokens)) {
            have->last_used = ++pc->tick; /* the last token's block when n is block-aligned */
            if (have->missing_win && d * pc->B >= kv->win_lo[seq]) {
                /* the context holds its windowed rows now: the same KV, with them filled in */
                kv_copy_out_seq(kv, seq, d * pc->B, pc->B, have->kv);
                have->missing_win = false;
                have->on_disk = false;
            }
            if (state && !have->state && pc_make_room(pc, pc->state_bytes, have) &&
                (have->state = malloc(pc->state_bytes))) {
                memcpy(have->state, state, pc->state_bytes);
                pc->st.n_states++;
                pc->st.bytes += pc->state_bytes;
                have->on_disk = false; /* its file holds no state: the next save rewrites it */
            }
        } else if (!store_block(pc, kv, seq, group, tokens, d, key, k, state)) {
            break;
        }
        key = k;
    }
}

/* Recurrent models: ask the context to keep the state at the deepest block boundary a later
 * restore of these tokens may use (n - min_suffix at most), when that is past `from`. */
static tern_status arm_capture(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq,
                               int n, int from)
{
    if (!pc->state_bytes) return TERN_OK;
    const int min_suffix = pc_min_suffix(pc);
    const int p = n > min_suffix ? (n - min_suffix) / pc->B * pc->B : 0;
    return p > from ? kv_context_state_capture(ctx, seq, p) : TERN_OK;
}

tern_status tern_prefix_cache_prefill(struct tern_prefix_cache *pc, struct tern_context *ctx,
                                      const int32_t *tokens, int n, int *n_reused)
{
    tern_status st = check_args(pc, ctx, 0, tokens, n, "prefill");
    if (st) return st;
    uint64_t key;
    const int reused = restore(pc, ctx, 0, 0, tokens, n, -1, &key, &st);
    if (!st) st = arm_capture(pc, ctx, 0, n, reused);
    if (st) return st;
    st = tern_decode(ctx, tokens + reused, n - reused, reused, TERN_LOGITS_LAST);
    if (st) return st;
    /* Store the blocks this prompt completed that the cache did not have. */
    store_from(pc, ctx, 0, 0, tokens, n, reused / pc->B, key);
    if (n_reused) *n_reused = reused;
    return TERN_OK;
}

tern_status pc_restore(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq,
                                      uint64_t group, const int32_t *tokens, int n, int more_than,
                                      int *n_restored)
{
    tern_status st = check_args(pc, ctx, seq, tokens, n, "restore");
    if (st) return st;
    uint64_t key;
    const int reused = restore(pc, ctx, seq, group, tokens, n, more_than, &key, &st);
    /* the caller decodes the rest and stores: the state at the prompt's last usable block
     * boundary is kept for pc_store (if no decode passes it, nothing is kept) */
    if (!st) st = arm_capture(pc, ctx, seq, n, reused);
    if (!st && n_restored) *n_restored = reused;
    return st;
}

tern_status pc_store(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq,
                                    uint64_t group, const int32_t *tokens, int n)
{
    tern_status st = check_args(pc, ctx, seq, tokens, n, "store");
    if (st) return st;
    const struct kv_cache *kv = kv_of_context(ctx);
    if (n > kv->seq_pos[seq])
        return tern_fail(TERN_ERR_ARG, "prefix cache store: %d tokens, but sequence %d holds %d positions",
                         n, seq, kv->seq_pos[seq]);
    store_from(pc, ctx, seq, group, tokens, n, 0, 0);
    return TERN_OK;
}
