/* model.h — the loaded model: hyperparameters and pointers to weights inside the GGUF mapping.
 *
 * Read model_load.c for how a GGUF becomes a struct tern_model, forward.c for how the weights
 * are used. Weights are never copied: struct model_weight points into the mmapped file.
 * Shapes follow GGUF: a matrix with ne = [cols, rows] computes y[rows] = W x[cols]. */
#ifndef TERN_MODEL_MODEL_H
#define TERN_MODEL_MODEL_H

#include "tern.h"

/* A 1-D or 2-D weight inside the mapping. */
struct model_weight {
    const void *data;
    int type;          /* enum tern_type */
    int64_t cols;      /* ne[0]: elements per row */
    int64_t rows;      /* ne[1] (1 for vectors) */
    size_t row_bytes;
    char name[48];     /* tensor name, for messages */
};

struct model_layer {
    struct model_weight attn_norm;              /* (n_embd) F32 */
    struct model_weight wq, wk, wv, wo;         /* (n_embd -> n_head*hd), (n_embd -> kv*hd) x2, (n_head*hd -> n_embd) */
    struct model_weight bq, bk, bv;             /* optional biases (qwen2), data NULL if absent */
    struct model_weight ffn_norm;               /* (n_embd) F32 */
    struct model_weight ffn_gate, ffn_up;       /* (n_embd -> n_ff) */
    struct model_weight ffn_down;               /* (n_ff -> n_embd) */
};

struct tern_model {
    struct tern_gguf *gguf;
    struct tern_model_info info;
    struct model_weight tok_embd;               /* (n_vocab rows of n_embd) */
    struct model_weight output_norm;            /* (n_embd) */
    struct model_weight output;                 /* (n_vocab rows of n_embd); == tok_embd if tied */
    struct model_weight rope_freqs;             /* optional (n_rot/2) F32 frequency factors */
    struct model_layer *layers;                 /* (n_layer) */
    char arch_name[16];
    void *owned;     /* weights converted in memory (model_copy.c), or NULL: freed with the model */
};

#endif
