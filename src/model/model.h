/* model.h — the loaded model: hyperparameters and pointers to weights inside the GGUF mapping.
 *
 * Read model_load.c for how a GGUF becomes a struct tern_model, forward.c for how the weights
 * are used. Weights are never copied: struct model_weight points into the mmapped file.
 * Shapes follow GGUF: a matrix with ne = [cols, rows] computes y[rows] = W x[cols]. */
#ifndef TERN_MODEL_MODEL_H
#define TERN_MODEL_MODEL_H

#include "tern_gguf.h"

/* A 1-D or 2-D weight inside the mapping. */
struct model_weight {
    const void *data;
    int type;          /* enum tern_type */
    int64_t cols;      /* ne[0]: elements per row */
    int64_t rows;      /* ne[1] (1 for vectors) */
    size_t row_bytes;
    const void *packed;/* the same matrix in the kernels' packed layout (kern_packed.h), made at
                          load by model_repack.c, or NULL */
    char name[48];     /* tensor name, for messages */
};

/* Fused matrices (phi3's attn_qkv, ffn_up = gate|up) are bound as row ranges: wq, wk, wv (and
 * ffn_gate, ffn_up) then point at consecutive rows of the one tensor, so the forward pass never
 * knows the difference. */
struct model_layer {
    struct model_weight attn_norm;              /* (n_embd) F32 */
    struct model_weight wq, wk, wv, wo;         /* (n_embd -> n_head*hd), (n_embd -> kv*hd) x2, (n_head*hd -> n_embd) */
    struct model_weight bq, bk, bv;             /* optional biases (qwen2), data NULL if absent */
    struct model_weight q_norm, k_norm;         /* (head_dim) per-head RMSNorm weights (qwen3, gemma3), or NULL */
    struct model_weight attn_post_norm;         /* (n_embd) norm of the attention output (gemma3), or NULL */
    struct model_weight ffn_norm;               /* (n_embd) F32 */
    struct model_weight ffn_gate, ffn_up;       /* (n_embd -> n_ff) */
    struct model_weight ffn_down;               /* (n_ff -> n_embd) */
    struct model_weight ffn_post_norm;          /* (n_embd) norm of the FFN output (gemma3), or NULL */
    bool swa;                                   /* sliding-window layer (own RoPE base, windowed keys) */
    bool rope;                                  /* q and k are rotated (false: smollm3's NoPE layers) */
    /* This layer's shape (gemma4 sizes SWA and global layers differently; elsewhere the model's) */
    int hd, n_kv, n_ff, n_rot;                  /* head size, KV heads, FFN width, rotated dims */
    int kv_src;                                 /* layer whose KV this one reads: il, or an earlier
                                                   layer of the same kind (gemma4 shared KV), or
                                                   -1: none (qwen35's DeltaNet layers) */
    bool kv_windowed;                           /* this layer's own KV block is read only by
                                                   sliding-window layers: the cache may keep just
                                                   their window (kv_cache.h) */
    bool v_is_k;                                /* no attn_v: v is k's projection (gemma4 31B) */
    float out_scale;                            /* the layer's output is multiplied by it (gemma4
                                                   layer_output_scale); 1 = none */
    struct model_weight ple_gate;               /* (n_embd -> n_pl) per-layer embedding gate (gemma4), or NULL */
    struct model_weight ple_proj;               /* (n_pl -> n_embd) */
    struct model_weight ple_post_norm;          /* (n_embd) */
    /* Gated DeltaNet layer (qwen35; wq..wo unbound then). conv_dim = 2 * n_k_heads * head_k +
     * n_v_heads * head_v, value_dim = n_v_heads * head_v. */
    bool recurrent;
    int rec_index;                              /* its slot in the recurrent state, or -1 */
    struct model_weight ssm_qkv;                /* attn_qkv (n_embd -> conv_dim): q, k, v rows */
    struct model_weight ssm_z;                  /* attn_gate (n_embd -> value_dim): output gate */
    struct model_weight ssm_beta, ssm_alpha;    /* (n_embd -> n_v_heads) */
    struct model_weight ssm_conv1d;             /* (conv_dim rows of d_conv) F32 */
    struct model_weight ssm_dt;                 /* (n_v_heads) F32 bias added before softplus */
    struct model_weight ssm_a;                  /* (n_v_heads) F32, -exp(A_log) */
    struct model_weight ssm_norm;               /* (head_v) F32 RMSNorm of each head's output */
    struct model_weight ssm_out;                /* (value_dim -> n_embd) */
};

/* The matrices of a layer the forward pass multiplies (bound ones only, a fixed order; a v that
 * is k's matrix is left out); out has room for MODEL_LAYER_MAX_MATRICES. Returns the count. */
#define MODEL_LAYER_MAX_MATRICES 14
int model_layer_matrices(struct model_layer *L, struct model_weight **out);

/* Multi-token prediction (qwen35 files with nextn_predict_layers): one gated full-attention layer
 * after the main ones (layers[il]) that predicts the token after next from the main model's
 * last hidden state (which predicted the next token) and the next token's embedding:
 * x = eh_proj [enorm(embd(t)) ; hnorm(h)], the layer (without an FFN when it has no ffn_down),
 * then head_norm and output (forward_mtp.c). */
struct model_mtp {
    int il;                       /* its index in layers (info.n_layer), or -1: no usable MTP layer */
    struct model_weight eh_proj;  /* (2 * n_embd -> n_embd), or NULL: x = enorm(e) + hnorm(h) */
    struct model_weight enorm;    /* (n_embd) */
    struct model_weight hnorm;    /* (n_embd) */
    struct model_weight head_norm;/* (n_embd) shared_head_norm, or NULL: none */
    struct model_weight output;   /* (n_vocab rows of n_embd) output_extra, else the model's output */
    int q_from;                   /* its attn_q is this main layer's (Qwen3.5-9B), or -1: its own */
    char why_not[200];            /* il < 0 in a file with nextn layers: what is wrong with them */
};

struct tern_model {
    struct tern_gguf *gguf;
    struct tern_model_info info;
    struct model_weight tok_embd;               /* (n_vocab rows of n_embd) */
    struct model_weight output_norm;            /* (n_embd) */
    struct model_weight output;                 /* (n_vocab rows of n_embd); == tok_embd if tied */
    struct model_weight rope_freqs;             /* optional (n_rot/2) F32 frequency factors */
    struct model_weight rope_long, rope_short;  /* optional phi3 long-RoPE factors (>= n_rot/2) */
    struct model_layer *layers;                 /* (n_layer + n_nextn) the main layers, then MTP */
    struct model_mtp mtp;
    struct model_weight ple_embd;               /* (n_vocab rows of n_pl * n_layer) per-layer token
                                                   embeddings (gemma4 E2B/E4B), or NULL */
    struct model_weight ple_model_proj;         /* (n_embd -> n_pl * n_layer) */
    struct model_weight ple_proj_norm;          /* (n_pl) */
    float rope_scale_swa;                       /* linear RoPE scale of the SWA layers */
    bool rope_swa_own;                          /* SWA layers rotate with their own base / scale */
    bool rope_ff_global_only;                   /* rope_freqs apply to the global layers only (gemma4) */
    bool q_prescale;                            /* q is multiplied by attn_scale after RoPE, q.k
                                                   then unscaled (phi3, as llama.cpp computes it) */
    bool has_rope_still;
    unsigned char rope_still[512];              /* (n_rot/2) 1 where qwen35's interleaved M-RoPE
                                                   gives a pair no text position (its 4th section
                                                   is position 0 for text: no rotation) */
    char arch_name[16];
    void *owned;     /* weights converted in memory (model_copy.c), or NULL: freed with the model */
    void *packed_buf;/* the packed copies of model_repack.c, or NULL: freed with the model */
};

/* Copy the matrices the forward pass multiplies into the kernels' packed layout where the active
 * kernel path has one (model_repack.c); file_mapped: the weights are tern_gguf_open's read-only
 * file mapping, whose pages may be handed back once nothing reads them. */
TERN_NODISCARD tern_status model_repack(struct tern_model *m, bool file_mapped);

/* Point the MTP layer's shared q and output (mtp.q_from, an output that is the model's) at the
 * weights they share, packed copies included (after loading, repacking or converting). */
void model_mtp_share(struct tern_model *m);
/* Why m has no usable MTP layer ("" if it has one). */
const char *model_mtp_why_not(const struct tern_model *m);

/* Does w give a token the same bits whatever batch it is in (kern_batch_invariant, or a packed
 * copy that every batch size reads)? */
bool model_weight_batch_invariant(const struct model_weight *w);

#endif
