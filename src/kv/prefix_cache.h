/* prefix_cache.h — internals of the prefix cache shared by prefix_cache.c (table, lookup,
 * eviction, prefill), prefix_file.c (the on-disk form) and prefix_bench.c.
 *
 * Model: a prompt is cut into blocks of B tokens. Block d holds positions d*B .. d*B+B-1 and is
 * keyed by key_d = hash(key_{d-1}, its B tokens) with key_{-1} = the prompt's isolation group
 * (0: shared; a server gives each API key and prompt_cache_key its own), so a key stands for the
 * whole prefix up to the block's end, and chains of different groups never meet: a block 0
 * records its group and a lookup compares it (then every later block is reached through its
 * parent's key). Blocks live in one hash table; a lookup walks keys from
 * block 0 and stops at the first absent one. Each block also stores its tokens and its parent's
 * key, and a lookup compares both, so a 64-bit hash collision can never restore wrong KV.
 * Eviction removes only leaves (blocks no other block names as parent), least recently used
 * first: evicting a parent would strand its children, which no walk could reach.
 *
 * Invariants (pc_check_table checks them all after every insert and eviction in TERN_CHECKS
 * builds): each block sits in the bucket of its key, once; n_children counts exactly the
 * blocks naming it as parent; n_orphans counts blocks whose parent is not in the table (loaded
 * without it, e.g. its file was damaged: they are adopted when the parent is stored again);
 * depth is 0 exactly when parent is 0 and (depth+1)*B fits an int; n_blocks, n_states and
 * bytes match the table and bytes <= budget; no block was used after the current tick.
 *
 * Recurrent models (qwen35): a DeltaNet state is one per sequence, not per position, so a block
 * may also carry the state at its end (state_bytes, tens of MB for real shapes against a few
 * hundred KB of KV). tern_prefix_cache_prefill asks the context to keep the state at the
 * deepest block boundary a later restore of the same prompt would use, and stores it with that
 * block; a restore goes to the deepest matching block that has a state. A block's file holds
 * its state after the KV (prefix_file.c), so a cache directory restores states too.
 *
 * Sliding-window layers (kv_cache.h) keep only their window: a block stored after the context
 * released its positions in those layers carries zeros there (missing_win). A restore to depth
 * nb needs those rows from kv_win_first_key(nb * B) on, so it goes to the deepest matching
 * block whose window blocks all hold them; storing the same block again from a context that
 * still holds them fills them in. */
#ifndef TERN_KV_PREFIX_CACHE_H
#define TERN_KV_PREFIX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/context_kv.h"
#include "util/check.h"

struct pc_block {
    uint64_t key, parent;       /* parent 0: the first block of a prompt */
    uint64_t group;             /* depth 0: the isolation group its chain is keyed under (0 =
                                   shared); 0 for deeper blocks */
    int depth;                  /* block index: its first token is at position depth * B */
    int n_children;             /* blocks in the table whose parent is this one */
    int check_children;         /* scratch of pc_check_table */
    uint64_t last_used;         /* cache tick of the last lookup/store touching it */
    bool on_disk;               /* a file for it exists in dir (loaded or saved) */
    int32_t *tokens;            /* (B) */
    void *kv;                   /* packed run of B positions (kv_copy.c), block_bytes */
    void *state;                /* recurrent models: the state after the block (state_bytes),
                                   or NULL; a prefix can only be restored up to a block that
                                   has one */
    bool missing_win;           /* its sliding-window layers' rows were not held (zeros) */
    struct pc_block *next;      /* hash bucket chain */
};

struct tern_prefix_cache {
    const struct tern_model *model;
    uint8_t model_fp[32], tok_fp[32];
    int n_layer, n_head_kv, head_dim, n_vocab;
    int B;                      /* tokens per block */
    size_t pos_elems;           /* K halves per position (kv_model_pos_elems) */
    size_t block_bytes;         /* KV bytes of one block */
    size_t state_bytes;         /* recurrent state of one sequence (0: attention-only model) */
    uint64_t budget;
    char *dir;                  /* NULL: memory only */
    struct pc_block **buckets;  /* (n_buckets), power of two */
    size_t n_buckets;
    uint64_t tick;
    int n_orphans;              /* blocks whose parent (not 0) is not in the table */
    bool loading;               /* pc_load_dir: children and orphans are recounted at the end */
    struct tern_prefix_cache_stats st;  /* n_blocks, bytes kept current */
    char warning[512];
};

/* Tokens a hit must leave to decode for pc's model on the active kernel path: 1 or
 * KV_MIN_BATCHED_SUFFIX (kv_model_min_exact_suffix). */
int pc_min_suffix(const struct tern_prefix_cache *pc);
/* Key of a block of B tokens after the block keyed parent (never 0); block 0's "parent" here is
 * its group. */
uint64_t pc_chain_key(uint64_t parent, const int32_t *tokens, int B);
struct pc_block *pc_find(const struct tern_prefix_cache *pc, uint64_t key);
/* Take ownership of b and add it (its key must be absent); counts it as its parent's child, or
 * as an orphan, and adopts the orphans that name it as parent. */
TERN_NODISCARD tern_status pc_insert(struct tern_prefix_cache *pc, struct pc_block *b);
/* Make room for `need` bytes by evicting LRU leaves other than `keep`; false if impossible. */
bool pc_make_room(struct tern_prefix_cache *pc, uint64_t need, const struct pc_block *keep);
void pc_block_free(struct pc_block *b);
/* Recount n_children of every block and n_orphans (after loading files in arbitrary order). */
void pc_recount_children(struct tern_prefix_cache *pc);
/* Whole-table consistency check (the invariants above), O(blocks + buckets). Returns false on
 * the first broken one, with the reason in why[0..cap) (or on stderr if why is NULL). Only
 * writes the blocks' check_children scratch. The cache calls it through PC_CHECK, which is
 * TERN_ASSERT_SLOW: compiled in TERN_CHECKS builds only; tests call it directly. */
bool pc_check_table(struct tern_prefix_cache *pc, char *why, size_t cap);
#define PC_CHECK(pc) TERN_ASSERT_SLOW(pc_check_table((pc), NULL, 0))

/* prefix_file.c */
/* Verify the n bytes at p as a whole cache file (named `name` in messages) for pc: header
 * structure, model and tokenizer fingerprints, KV layout, kernel path, depth, SHA-256, token
 * ids, key. On success *out is a new block with copies of its tokens and KV (caller inserts it
 * with pc_insert or frees it with pc_block_free); otherwise a FORMAT (or NOMEM) status whose
 * message names the file and the reason. Reads nothing outside p[0..n); p needs no alignment.
 * The directory loader and the fuzz target (tests/fuzz/fuzz_cachefile.c) both go through it. */
TERN_NODISCARD tern_status pc_block_from_bytes(const struct tern_prefix_cache *pc, const uint8_t *p, uint64_t n,
                                const char *name, struct pc_block **out);
TERN_NODISCARD tern_status pc_load_dir(struct tern_prefix_cache *pc);
TERN_NODISCARD tern_status pc_save_block(struct tern_prefix_cache *pc, struct pc_block *b);
/* Sync the directory entry after renames, so saved files survive a crash. */
void pc_sync_dir(const char *dir);

/* The two halves of prefill for a context of several sequences (a batcher's slots, whose
 * prompts are decoded by tern_batcher_step). Restore: when the longest cached prefix of
 * tokens[0..n) (the same limit as prefill) is longer than more_than tokens, copy it into
 * sequence seq, discarding what it held, decoding nothing (*n_restored tokens; the sequence then
 * holds positions 0 .. *n_restored-1); otherwise leave the sequence alone (*n_restored = 0).
 * Counted as a lookup either way (a hit when something was restored). Store: every full block
 * of tokens[0..n) that the cache lacks, from sequence seq, which must hold positions 0..n-1
 * computed from exactly those tokens (TERN_ERR_ARG if it holds fewer). group: an isolation
 * group; blocks stored under one group are restored only under the same one (0 = the shared
 * group, which prefill and match use; tern serve gives each API key and prompt_cache_key its
 * own, so one user's prompt can neither be restored nor timed by another). */
TERN_NODISCARD tern_status pc_restore(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq,
                                      uint64_t group, const int32_t *tokens, int n, int more_than,
                                      int *n_restored);
TERN_NODISCARD tern_status pc_store(struct tern_prefix_cache *pc, struct tern_context *ctx, int seq,
                                    uint64_t group, const int32_t *tokens, int n);

#endif
