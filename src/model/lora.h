/* lora.h — LoRA adapters inside src/model: the loaded adapter (lora.c), the set attached to a
 * context and the steps that add its deltas in the forward pass (lora_apply.c), the merge into
 * a rewritten model (lora_merge.c). Read tern.h's "LoRA adapters" section first.
 *
 * Each adapted weight of the model has a slot: layer il's matrices are il * LORA_KINDS + kind,
 * then the output matrix and the token embeddings. A context with adapters holds, per slot, the
 * list of (A, B, scale) terms of every attached adapter; a slot with none costs nothing, and a
 * context with no adapters has no set at all (ctx->lora NULL: the plain path). */
#ifndef TERN_MODEL_LORA_H
#define TERN_MODEL_LORA_H

#include "kernels/vec.h"
#include "model/model.h"

enum { LORA_MAX_ADAPTERS = 16 }; /* attached to one context at once */

enum lora_kind { LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_KINDS };
/* Up to this many tokens in one forward step, an adapter is applied in one parallel step
 * (lora_apply.c): decoding, and a short speculative verification. */
enum { LORA_FUSED_TOKENS = 2 };

/* Slots after the layers' */
static inline int lora_slot_output(const struct tern_model *m) { return m->info.n_layer * LORA_KINDS; }
static inline int lora_slot_embd(const struct tern_model *m) { return m->info.n_layer * LORA_KINDS + 1; }
static inline int lora_n_slots(const struct tern_model *m) { return m->info.n_layer * LORA_KINDS + 2; }

/* One adapted weight. For the embeddings (slot embd) the pair is llama.cpp's flipped one: the
 * delta of token v's row is B a_v with a_v row v of A. */
struct lora_target {
    char name[64];   /* base tensor name */
    int slot;
    int rank;        /* r */
    int64_t n_in;    /* the base matrix's columns (ne[0]) */
    int64_t n_out;   /* its rows (ne[1]) */
    float *a;        /* (r, n_in); embd: (n_out = n_vocab, r) */
    float *bt;       /* B transposed: (r, n_out); embd: (r, n_in = n_embd) */
    uint16_t *a16, *bt16; /* the same as F16 when the file stores both halves as F16 (not for
                             the embeddings): what the forward pass reads, half the bytes */
};

struct tern_lora {
    const struct tern_model *model;
    float alpha;
    int n_targets;
    int n_ignored;
    int type_a, type_b;
    uint64_t bytes;
    struct lora_target *t;  /* (n_targets) in file order */
    float *mem;             /* every target's A and B */
    uint16_t *mem16;        /* F16 copies (F16 adapters) */
    char *chat_template;    /* tokenizer.chat_template of the file, or NULL */
};

/* scale * alpha / r as llama.cpp's get_scale (alpha 0: scale). */
static inline float lora_scale(const struct tern_lora *a, const struct lora_target *t, float user)
{
    return a->alpha != 0.0f ? user * a->alpha / (float)t->rank : user;
}

/* A context's attached set: the terms of slot s are terms[first[s] .. first[s + 1]). */
struct lora_term {
    const float *a, *bt; /* lora_target's */
    const uint16_t *a16, *bt16; /* or these, when set (F16 adapters) */
    int rank;
    int64_t n_in, n_out;
    float scale;         /* lora_scale with the user's */
};

struct lora_set {
    int n_adapters;
    int n_slots;
    int32_t *first;          /* (n_slots + 1) */
    struct lora_term *terms;
    float *ax;               /* (n_batch, ax_stride) A x of every term of one group of slots */
    float *ax_thread;        /* (n_threads, LORA_FUSED_TOKENS * ax_stride): each thread's own A x
                                when a few tokens go through in one step (lora_apply.c) */
    int ax_stride;           /* the largest sum of ranks over a group (a layer's q,k,v; gate,up) */
    struct kern_vec vec;     /* the dot and axpy of this CPU (kernels/vec.h) */
};

/* The model weight of slot s (NULL: none bound). */
const struct model_weight *lora_slot_weight(const struct tern_model *m, int s);

/* Does slot s of ctx have terms? ctx->lora must be set. */
static inline bool lora_slot_used(const struct lora_set *ls, int s)
{
    return ls->first[s + 1] > ls->first[s];
}

struct tern_context;
/* out[j] rows t (0 .. n - row0 - 1, n_out of slot j wide) += the deltas of slots[j] for input
 * rows row0 .. n-1 of src (cols wide), for cnt slots that share src (cnt <= 3); unused slots
 * are skipped. Two steps over the context's threads: A x for every term, then B (A x). */
void lora_add(struct tern_context *ctx, const int *slots, int cnt, const float *src, int cols,
              int n, int row0, float *const *out);
/* x rows 0 .. n-1 (n_embd wide) += the embedding deltas of tokens (slot embd). */
void lora_add_embd(struct tern_context *ctx, const int32_t *tokens, int n, float *x);
/* Free a context's set (NULL is fine). */
void lora_set_free(struct lora_set *ls);

#endif
