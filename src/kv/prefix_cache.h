/* prefix_cache.h — internals of the prefix cache shared by prefix_cache.c (table, lookup,
 * eviction, prefill), prefix_file.c (the on-disk form) and prefix_bench.c.
 *
 * Model: a prompt is cut into blocks of B tokens. Block d holds positions d*B .. d*B+B-1 and is
 * keyed by key_d = hash(key_{d-1}, its B tokens) with key_{-1} = 0, so a key stands for the
 * whole prefix up to the block's end. Blocks live in one hash table; a lookup walks keys from
 * block 0 and stops at the first absent one. Each block also stores its tokens and its parent's
 * key, and a lookup compares both, so a 64-bit hash collision can never restore wrong KV.
 * Eviction removes only leaves (blocks no other block names as parent), least recently used
 * first: evicting a parent would strand its children, which no walk could reach. */
#ifndef TERN_KV_PREFIX_CACHE_H
#define TERN_KV_PREFIX_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/context_kv.h"

struct pc_block {
    uint64_t key, parent;       /* parent 0: the first block of a prompt */
    int depth;                  /* block index: its first token is at position depth * B */
    int n_children;             /* blocks in the table whose parent is this one */
    uint64_t last_used;         /* cache tick of the last lookup/store touching it */
    bool on_disk;               /* a file for it exists in dir (loaded or saved) */
    int32_t *tokens;            /* (B) */
    void *kv;                   /* packed run of B positions (kv_copy.c), block_bytes */
    struct pc_block *next;      /* hash bucket chain */
};

struct tern_prefix_cache {
    const struct tern_model *model;
    uint8_t model_fp[32], tok_fp[32];
    int n_layer, n_head_kv, head_dim, n_vocab;
    int B;                      /* tokens per block */
    size_t block_bytes;         /* KV bytes of one block */
    uint64_t budget;
    char *dir;                  /* NULL: memory only */
    struct pc_block **buckets;  /* (n_buckets), power of two */
    size_t n_buckets;
    uint64_t tick;
    struct tern_prefix_cache_stats st;  /* n_blocks, bytes kept current */
    char warning[512];
};

/* Tokens a hit must leave to decode for pc's model on the active kernel path: 1 or
 * KV_MIN_BATCHED_SUFFIX (kv_model_min_exact_suffix). */
int pc_min_suffix(const struct tern_prefix_cache *pc);
/* Key of a block of B tokens after the block keyed parent (never 0). */
uint64_t pc_chain_key(uint64_t parent, const int32_t *tokens, int B);
struct pc_block *pc_find(const struct tern_prefix_cache *pc, uint64_t key);
/* Take ownership of b and add it (its key must be absent); counts it as parent's child. */
tern_status pc_insert(struct tern_prefix_cache *pc, struct pc_block *b);
/* Make room for `need` bytes by evicting LRU leaves other than `keep`; false if impossible. */
bool pc_make_room(struct tern_prefix_cache *pc, uint64_t need, const struct pc_block *keep);
void pc_block_free(struct pc_block *b);
/* Recount n_children of every block (after loading files in arbitrary order). */
void pc_recount_children(struct tern_prefix_cache *pc);

/* prefix_file.c */
/* Verify the n bytes at p as a whole cache file (named `name` in messages) for pc: header
 * structure, model and tokenizer fingerprints, KV layout, kernel path, depth, SHA-256, token
 * ids, key. On success *out is a new block with copies of its tokens and KV (caller inserts it
 * with pc_insert or frees it with pc_block_free); otherwise a FORMAT (or NOMEM) status whose
 * message names the file and the reason. Reads nothing outside p[0..n); p needs no alignment.
 * The directory loader and the fuzz target (tests/fuzz/fuzz_cachefile.c) both go through it. */
tern_status pc_block_from_bytes(const struct tern_prefix_cache *pc, const uint8_t *p, uint64_t n,
                                const char *name, struct pc_block **out);
tern_status pc_load_dir(struct tern_prefix_cache *pc);
tern_status pc_save_block(struct tern_prefix_cache *pc, struct pc_block *b);
/* Sync the directory entry after renames, so saved files survive a crash. */
void pc_sync_dir(const char *dir);

#endif
