/* tok_internal.h — what the tokenizer room shares between its files. Read this first.
 *
 * Data flow of tern_tokenize (tok_encode.c):
 *   text -> special-token partition (tok_encode.c)
 *        -> per raw segment: byte-level BPE (pre-tokenizer tok_pretok.c -> words -> tok_bpe.c)
 *                         or SentencePiece (tok_spm.c: escape spaces, split at word starts)
 *        -> each word goes through the word cache (tok_cache.c) before the merge loop runs.
 * Load (tok_load.c) builds every table once: token text hash (tok_hash.c), merge-pair hash,
 * byte -> token maps, pieces for decoding (tok_decode.c), and all scratch.
 *
 * Keys of the token hash: for BPE vocabularies the token's *raw bytes* (GPT-2's byte-to-unicode
 * encoding undone at load), so the encoder never re-encodes input bytes; for SPM the token text
 * as stored (with U+2581 for spaces). Duplicate texts: the highest id wins, as in llama.cpp.
 *
 * A tern_tokenizer carries mutable scratch and a word cache: one thread at a time. */
#ifndef TERN_TOK_INTERNAL_H
#define TERN_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "tern.h"
#include "util/check.h"

/* ---- token attributes (GGUF token_type 1..6 mapped to bits, as llama.cpp does) ---- */
enum {
    TOK_ATTR_NORMAL = 1u << 0,
    TOK_ATTR_UNKNOWN = 1u << 1,
    TOK_ATTR_CONTROL = 1u << 2,
    TOK_ATTR_USER_DEFINED = 1u << 3,
    TOK_ATTR_UNUSED = 1u << 4,
    TOK_ATTR_BYTE = 1u << 5,
    TOK_ATTR_LSTRIP = 1u << 6, /* swallow ASCII whitespace before the token when matched */
    TOK_ATTR_RSTRIP = 1u << 7, /* ... and after it */
    TOK_ATTR_EOG = 1u << 8,    /* ends a generation (eos, eot, <|im_end|> ...) */
};

enum tok_model { TOK_MODEL_BPE = 0, TOK_MODEL_SPM = 1 };

/* Pre-tokenizers (byte-level BPE). Each is a sequence of split stages, see tok_pretok.c. */
enum tok_pre {
    TOK_PRE_DEFAULT = 0, /* llama.cpp's fallback (no or "default" tokenizer.ggml.pre) */
    TOK_PRE_GPT2,
    TOK_PRE_LLAMA3,
    TOK_PRE_QWEN2,
    TOK_PRE_DEEPSEEK_LLM,
    TOK_PRE_DEEPSEEK_CODER,
    TOK_PRE_STARCODER,
    TOK_PRE_FALCON,
    TOK_PRE_QWEN35,      /* qwen2's with combining marks (\p{M}) joining letter runs */
};

/* ---- unicode helpers (tok_unicode.c) ---- */

/* One class per code point, as the pre-tokenizer regexes see it. White space (Unicode
 * White_Space) wins over the general category. Invalid UTF-8 bytes get TOK_CLS_S (what
 * U+FFFD would get) but keep their own byte. */
enum {
    TOK_CLS_OTHER = 0, /* C*, unassigned */
    TOK_CLS_WS = 1,
    TOK_CLS_L = 2,
    TOK_CLS_N = 3,
    TOK_CLS_P = 4,
    TOK_CLS_S = 5,
    TOK_CLS_M = 6,
};
uint8_t tok_cpt_class(uint32_t cpt);
/* Decode one code point at s[0..n). Structurally valid sequences (as llama.cpp accepts them)
 * return their length 1..4; an invalid or truncated lead byte returns 1 with *cpt =
 * TOK_CPT_INVALID | byte. */
#define TOK_CPT_INVALID 0x80000000u
int tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cpt);
/* Length a lead byte announces (1 for ASCII and stray continuation bytes). */
int tok_utf8_len(unsigned char c);
/* GPT-2 bytes_to_unicode: the code point standing for byte b, and the inverse (-1 if none). */
uint32_t tok_byte_to_cpt(uint8_t b);
int tok_cpt_to_byte(uint32_t cpt);

/* ---- string -> id hash (tok_hash.c) ---- */
struct tok_strmap {
    uint32_t mask;        /* capacity - 1 (capacity is a power of two) */
    uint32_t n_keys;      /* ids are 0..n_keys-1 (the checks in tok_hash.c use it) */
    int32_t *slot;        /* [capacity] id or -1 */
    uint32_t *slot_hash;  /* [capacity] */
    /* keys are read through these (not owned): */
    const char *arena;
    const uint32_t *off;  /* [n ids] */
    const uint32_t *len;  /* [n ids] */
};
uint32_t tok_hash_bytes(const void *p, size_t n);
TERN_NODISCARD tern_status tok_strmap_init(struct tok_strmap *m, uint32_t n_keys);
void tok_strmap_free(struct tok_strmap *m);
/* Insert id (its key is arena[off[id]], len[id]); a later insert of the same key wins. */
void tok_strmap_put(struct tok_strmap *m, int32_t id);
int32_t tok_strmap_get(const struct tok_strmap *m, const void *key, size_t n);

/* (left id, right id) -> merge rank and merged id. */
struct tok_pairmap {
    uint32_t mask;
    uint64_t *key;    /* [capacity] (left << 32 | right), UINT64_MAX = empty */
    int32_t *rank;    /* [capacity] */
    int32_t *result;  /* [capacity] */
};
TERN_NODISCARD tern_status tok_pairmap_init(struct tok_pairmap *m, uint32_t n_keys);
void tok_pairmap_free(struct tok_pairmap *m);
/* Keeps the first (lowest) rank when a pair repeats. */
void tok_pairmap_put(struct tok_pairmap *m, int32_t left, int32_t right, int32_t rank,
                     int32_t result);
static inline bool tok_pairmap_get(const struct tok_pairmap *m, int32_t left, int32_t right,
                                   int32_t *rank, int32_t *result)
{
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    const uint32_t start = i;
    for (;;) {
        uint64_t s = m->key[i];
        if (s == k) {
            *rank = m->rank[i];
            *result = m->result[i];
            return true;
        }
        if (s == UINT64_MAX) return false;
        i = (i + 1) & m->mask;
        TERN_ASSERT(i != start); /* sized at twice the merges: an empty slot always ends a probe */
    }
}

/* ---- word cache (tok_cache.c): word bytes -> token ids, fixed size, cleared when full ---- */
struct tok_cache {
    uint32_t mask;
    uint32_t n_used;
    uint32_t *slot_hash;   /* [capacity] 0 = empty (hashes are forced non-zero) */
    uint32_t *slot_off;    /* [capacity] offset of the entry in arena */
    char *arena;           /* entries: u16 word_len, u16 n_ids, word bytes, pad, i32 ids */
    size_t arena_cap, arena_used;
    uint64_t hits, misses, resets;
};
#define TOK_CACHE_MAX_WORD 96
TERN_NODISCARD tern_status tok_cache_init(struct tok_cache *c, uint32_t slots, size_t arena_bytes);
void tok_cache_free(struct tok_cache *c);
/* Ids for word, or NULL (then *n is untouched). */
const int32_t *tok_cache_get(struct tok_cache *c, const char *w, size_t wn, uint32_t h, int *n);
void tok_cache_put(struct tok_cache *c, const char *w, size_t wn, uint32_t h, const int32_t *ids,
                   int n);

/* ---- the tokenizer ---- */
struct tok_special {       /* a token matched verbatim in text by the partition step */
    int32_t id;
    uint32_t attr;
};

/* Output sink: writes up to cap ids, counts all. */
struct tok_out {
    int32_t *ids;
    size_t cap;
    size_t n;
};
static inline void tok_out_push(struct tok_out *o, int32_t id)
{
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* Growable scratch, kept between calls (grows only for inputs longer than any before). */
struct tok_scratch {
    size_t cap_cpt;        /* capacity of the per-code-point arrays */
    uint32_t *cpt;         /* [cap_cpt + 1] */
    uint8_t *cls;          /* [cap_cpt + 1] */
    uint32_t *boff;        /* [cap_cpt + 1] byte offset of code point i */
    size_t cap_sym;        /* capacity of the merge arrays (symbols) */
    int32_t *sym_id;       /* [cap_sym] BPE: token id; SPM: unused */
    int32_t *sym_prev, *sym_next;
    uint32_t *sym_off, *sym_len;   /* SPM: byte range of the symbol */
    void *heap;            /* [TOK_HEAP_CAP] heap entries (tok_bpe.c / tok_spm.c) */
    int32_t *word_ids;     /* [cap_sym] ids of the current word */
    size_t cap_esc;
    char *esc;             /* SPM: escaped text */
};
/* The merge loops' heaps (tok_bpe.c, tok_spm.c) live in s->heap: entries of at most
 * TOK_HEAP_ENTRY_MAX bytes (both check it statically), TOK_HEAP_CAP(s) of them. A word of n
 * symbols starts with n - 1 pairs and each of its at most n - 1 merges pushes two more, so
 * fewer than 3n entries are ever queued. */
#define TOK_HEAP_ENTRY_MAX 24
#define TOK_HEAP_CAP(s) ((s)->cap_sym * 3)
TERN_NODISCARD tern_status tok_scratch_cpt(struct tok_scratch *s, size_t n);
TERN_NODISCARD tern_status tok_scratch_sym(struct tok_scratch *s, size_t n);
TERN_NODISCARD tern_status tok_scratch_esc(struct tok_scratch *s, size_t n);
void tok_scratch_free(struct tok_scratch *s);

struct tern_tokenizer {
    enum tok_model model;
    enum tok_pre pre;
    char model_name[16];
    char pre_name[48];
    int32_t n_vocab;

    /* per token [n_vocab] */
    char *text_arena;       /* token texts as in the GGUF, then raw keys (BPE), then pieces */
    size_t arena_used;      /* bytes of text_arena in use */
    size_t arena_cap;       /* 3 x texts + 16: texts, raw keys (<= texts), pieces (<= texts) */
    uint32_t *text_off, *text_len;
    uint32_t *key_off, *key_len;   /* hash keys: raw bytes (BPE) / text (SPM) */
    uint32_t *piece_off, *piece_len; /* bytes token_to_piece emits */
    uint32_t max_piece;            /* longest piece */
    float *score;
    uint32_t *attr;

    struct tok_strmap map;
    struct tok_pairmap merges;     /* BPE only */
    int32_t byte_token[256];       /* BPE: token of a single raw byte; SPM: <0xNN>; -1 none */
    bool ignore_merges;            /* llama3: a word that is a token is taken whole */
    bool add_space_prefix;         /* SPM */
    bool spm_split_words;          /* SPM: no token spans [non-space][space]: split at words */

    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos;

    struct tok_special *specials;  /* tokens the partition step looks for, sorted by first
                                      byte, then longest first */
    int n_specials;
    uint32_t special_start[257];   /* specials[special_start[c] .. special_start[c+1]) start
                                      with byte c */
    /* The same specials as a byte trie (node 0 = root), so finding the longest special at a
     * text position costs one step per byte of it, not one comparison per special sharing its
     * first byte (deepseek-llm has ~2400 specials starting with '['). Children of a node are a
     * sibling list. term / term_user: index into specials of the special whose text ends at
     * this node (lowest id if several), for parse-special mode / user-defined tokens only; -1
     * if none. */
    struct tok_trie_node {
        uint32_t first_child, next_sibling; /* 0 = none (the root is never a child) */
        int32_t term, term_user;
        unsigned char byte;
    } *special_trie;
    uint32_t n_trie;

    struct tok_scratch scratch;
    struct tok_cache cache;
};

/* tok_pretok.c: split text[0..n) into words, calling word(ctx, byte_begin, byte_end) for each.
 * Uses t->scratch for the code point arrays. */
typedef void (*tok_word_fn)(void *ctx, size_t b0, size_t b1);
TERN_NODISCARD tern_status tok_pretokenize(struct tern_tokenizer *t, const char *text, size_t n, tok_word_fn word,
                            void *ctx);
/* tok_bpe.c: encode one pre-token word (raw bytes) into o. */
void tok_bpe_word(struct tern_tokenizer *t, const char *w, size_t n, struct tok_out *o);
TERN_NODISCARD tern_status tok_bpe_segment(struct tern_tokenizer *t, const char *text, size_t n,
                            struct tok_out *o);
/* tok_spm.c: encode one raw segment; prefix_space adds the SPM leading space. */
TERN_NODISCARD tern_status tok_spm_segment(struct tern_tokenizer *t, const char *text, size_t n,
                            bool prefix_space, struct tok_out *o);
/* tok_decode.c: fill piece_off/piece_len (called by the loader once texts are in place). */
TERN_NODISCARD tern_status tok_build_pieces(struct tern_tokenizer *t);

/* tern_tokenize where TERN_TOK_PARSE_SPECIAL recognizes a control (or unknown-type) token only
 * when its whole text lies inside one of special[0..n_special) (sorted, disjoint byte ranges of
 * text, struct tern_text_span in "chat templates": a template's markup); elsewhere the text is
 * text, as without the flag (user-defined tokens match everywhere, as they always do). Nothing
 * else changes: the text between two recognized specials is encoded as one piece, whatever
 * ranges it crosses, so merges across a range's edge are those of tokenizing that piece plainly,
 * and with every control token's text inside the ranges the ids are tern_tokenize's. */
struct tern_text_span;
TERN_NODISCARD tern_status tok_tokenize_spans(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                                const struct tern_text_span *special, size_t n_special,
                                int32_t *out, size_t cap, size_t *n_out);

#endif
