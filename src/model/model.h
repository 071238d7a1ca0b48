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

/* Every hyperparameter the forward pass uses, of every architecture (each field at its neutral
 * value where an architecture lacks it). Internal: the public view is the stable core of
 * struct tern_model_info (model_publish_info copies it) and, by name, tern_model_hparam
 * (model_hparams.c), so a field added here for a new architecture changes no public struct. */
struct model_hparams {
    enum tern_arch arch;
    const char *arch_name;   /* "llama", "qwen2", "qwen3", "smollm3", "phi3", "gemma3", "gemma4",
                                "qwen35" */
    int n_vocab;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int head_dim;
    int n_ff;
    int n_ctx_train;
    int n_rot;               /* rope dimension count */
    float rope_freq_base;
    float rope_freq_scale;   /* linear scaling factor (1 = none) */
    bool rope_neox;          /* rotate (i, i+d/2) pairs (qwen2) vs (2i, 2i+1) (llama) */
    bool has_rope_freqs;     /* Llama-3.x rope_freqs tensor present */
    float rms_eps;
    bool tied_output;        /* logits use token_embd */
    int head_rows;           /* the output head's rows: n_vocab, fewer when pruned (head_ids) */
    bool has_qkv_bias;
    uint64_t weight_bytes;   /* bytes of all tensors in the file */
    uint64_t repacked_bytes; /* extra bytes held by weights repacked at load (0 = none) */
    /* Beyond llama / qwen2 (each at its neutral value for those two): */
    bool has_qk_norm;        /* per-head RMSNorm of q and k before RoPE (qwen3, gemma3) */
    bool has_post_norms;     /* RMSNorm of the attention and FFN outputs before the residual add (gemma3) */
    bool ffn_gelu;           /* FFN is down(gelu(gate) * up) (gemma3), else down(silu(gate) * up) */
    bool fused_qkv;          /* q, k, v come from one attn_qkv matrix, gate and up from one ffn_up (phi3) */
    float embd_scale;        /* token embeddings are multiplied by this (gemma3: sqrt(n_embd)); 1 = none */
    float attn_scale;        /* the q.k scale (1/sqrt(head_dim) unless the architecture says otherwise) */
    int nope_every;          /* every nope_every-th layer (1-based) applies no RoPE (smollm3: 4); 0 = none */
    int n_swa;               /* sliding window of the SWA layers (a query sees its last n_swa positions); 0 = none */
    int n_layer_swa;         /* layers that use the sliding window */
    float rope_freq_base_swa;/* RoPE base of the SWA layers (gemma3: 10000) */
    float rope_attn_factor;  /* long-RoPE magnitude: cos and sin are multiplied by it (phi3); 1 = none */
    bool has_rope_long;      /* long/short RoPE factor tensors (phi3 128k): long ones are used when
                                the context is longer than n_ctx_orig */
    int n_ctx_orig;          /* rope.scaling.original_context_length (0 = n_ctx_train) */
    uint64_t released_bytes; /* bytes of the file's matrices whose pages were handed back after
                                repacking at load (the kernels read only the copies; 0 = none) */
    /* Per-layer shapes (gemma4; elsewhere equal to the fields above): n_head_kv, head_dim and
     * n_rot are the global (full-attention) layers' values, these the SWA layers'. */
    int n_head_kv_swa;
    int head_dim_swa;
    int n_rot_swa;
    int n_ff_max;            /* widest FFN of any layer (gemma4's double-wide shared layers) */
    int n_layer_kv;          /* layers that store their own KV: n_layer, but for gemma4's shared-KV
                                layers (they read an earlier layer's) and qwen35's Gated DeltaNet
                                layers (they keep a recurrent state instead) */
    int n_embd_per_layer;    /* per-layer embedding width (gemma4 E2B/E4B); 0 = none */
    bool v_norm;             /* v is RMS-normalized per head, without a weight (gemma4) */
    float final_softcap;     /* logits = c * tanh(logits / c) (gemma4: 30); 0 = none */
    /* Hybrid recurrent models (qwen35; all 0 / false elsewhere): */
    int n_layer_rec;         /* Gated DeltaNet layers, which keep a recurrent state instead */
    int full_attn_interval;  /* every full_attn_interval-th layer (1-based) is full attention */
    int ssm_d_conv;          /* causal conv1d kernel width (ssm.conv_kernel) */
    int ssm_n_k_heads;       /* key / query heads of the DeltaNet (ssm.group_count) */
    int ssm_n_v_heads;       /* value heads, one state matrix each (ssm.time_step_rank) */
    int ssm_head_k;          /* key head size (ssm.state_size) */
    int ssm_head_v;          /* value head size (ssm.inner_size / value heads) */
    bool attn_gate;          /* attention output times sigmoid(gate), the gate rows interleaved
                                per head with the q rows of attn_q (qwen35) */
    int n_nextn;             /* multi-token-prediction layers at the end of the file: not run by
                                the model, only by an MTP context (tern_model_has_mtp) */
    uint64_t state_bytes;    /* recurrent state of one sequence (conv + DeltaNet matrices, F32) */
    uint64_t mtp_bytes;      /* weights one MTP draft step reads (its layer, eh_proj, the output
                                head); 0 without a usable MTP layer */
    uint64_t mtp_layer_bytes;/* of those, the layer and eh_proj: what each further token of an MTP
                                pass adds (the head runs for the rows that want logits) */
};

struct tern_model {
    struct tern_gguf *gguf;
    struct model_hparams info;                  /* every hyperparameter (internal) */
    struct tern_model_info pub;                 /* its public core: tern_model_get_info */
    struct model_weight tok_embd;               /* (n_vocab rows of n_embd) */
    struct model_weight output_norm;            /* (n_embd) */
    struct model_weight output;                 /* (n_vocab rows of n_embd); == tok_embd if tied;
                                                   n_head_ids rows when the head is pruned */
    int32_t *head_ids;                          /* a pruned head (tern.output_token_ids, a drafter's):
                                                   output row i is token head_ids[i] (ascending),
                                                   every other token's logit is -inf; NULL: row i
                                                   is token i. Owned. */
    int n_head_ids;
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
    bool mmap_only;  /* loaded without packed copies (no_repack, TERN_REPACK=0): its copies too */
    char tile_report[1536]; /* model_tune.c: the tile per (format, k, call size) and why */
};

/* Copy the matrices the forward pass multiplies into the kernels' packed layout where the active
 * kernel path has one (model_repack.c); file_mapped: the weights are tern_gguf_open's read-only
 * file mapping, whose pages may be handed back once nothing reads them. */
TERN_NODISCARD tern_status model_repack(struct tern_model *m, bool file_mapped);

/* After repacking: time the tiles that can read the packed matrices for one token, record the
 * fastest per (format, k) for the kernels (kern_tune.h) and say so in m->tile_report; the
 * choices are cached per CPU on disk (model_tune.c). */
void model_tune_tiles(struct tern_model *m);

/* Point the MTP layer's shared q and output (mtp.q_from, an output that is the model's) at the
 * weights they share, packed copies included (after loading, repacking or converting). */
void model_mtp_share(struct tern_model *m);
/* Why m has no usable MTP layer ("" if it has one). */
const char *model_mtp_why_not(const struct tern_model *m);

/* Does w give a token the same bits whatever batch it is in (kern_batch_invariant, or a packed
 * copy that every batch size reads)? */
bool model_weight_batch_invariant(const struct model_weight *w);

/* Fill m->pub from m->info: at the end of every load or copy, once the byte counts are final. */
void model_publish_info(struct tern_model *m);

#endif
