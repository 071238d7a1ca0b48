/* context.h — struct tern_context: everything one sequence needs at run time.
 *
 * All buffers are allocated once in tern_context_create (context.c) for up to n_batch tokens
 * per forward pass; forward.c only reads and writes them, so decoding never allocates.
 * Shapes are in the comments: (rows, cols), row-major; the float buffers start on a cache line.
 */
#ifndef TERN_MODEL_CONTEXT_H
#define TERN_MODEL_CONTEXT_H

#include "model/kv_cache.h"
#include "kernels/attn.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/rec_state.h"
#include "kernels/vexp.h"
#include "util/threadpool.h"

enum { CONTEXT_HID_ROWS = 4096 }; /* hidden states kept (tern_context_keep_hidden) */

struct tern_context {
    struct tern_model *model;
    int n_ctx, n_batch, n_threads, n_seq;
    struct tp *pool;
    struct kv_cache kv;
    struct rec_state rec;  /* recurrent state of qwen35's DeltaNet layers (rec_state.h), or empty */

    float *x;        /* (n_batch, n_embd) residual stream */
    float *xn;       /* (n_batch, n_embd) normalized input of the current block */
    /* q, k, v, attn hold the current layer's shape (model_layer hd, n_kv), sized for the widest */
    float *q;        /* (n_batch, n_head * hd) */
    float *k;        /* (n_batch, n_kv * hd) */
    float *v;        /* (n_batch, n_kv * hd) */
    float *attn;     /* (n_batch, n_head * hd) attention output, heads concatenated */
    float *gate;     /* (n_batch, layer's n_ff) gate projection, then silu(gate) * up */
    float *up;       /* (n_batch, layer's n_ff) */
    float *ple;      /* (n_batch, n_layer * n_pl) per-layer embedding inputs (gemma4), or NULL */
    float *ple_gate; /* (n_batch, n_pl) one layer's gate, then gelu(gate) * input */
    float *ple_tok;  /* (n_layer * n_pl) one token's per-layer embedding row */
    float *proj;     /* (n_batch, n_embd) output of wo / ffn_down before the residual add */
    void *act;       /* (n_batch, act_stride bytes) activations quantized for the next matmul */
    size_t act_stride;
    const float *act_src; /* which float buffer `act` currently holds, and in which format */
    int act_type;
    float *rope_cs;  /* (n_batch, n_rot) interleaved cos, sin for each token's position */
    float *rope_cs_swa; /* (n_batch, n_rot_swa) the same for the SWA layers (their base, size,
                           factors: model->rope_swa_own), else NULL */
    const float *rope_ff; /* (n_rot/2) RoPE frequency factors in use (rope_freqs, or phi3's long /
                             short factors chosen by n_ctx), or NULL */
    const float *rope_ff_swa; /* the SWA layers' factors: rope_ff, or NULL (gemma4) */
    /* Attention blocks (forward.c, attn.h): up to attn_T consecutive tokens of one sequence times
     * attn_gsz query heads of one KV head (no more than any layer's group), at most attn_rows
     * (<= ATTN_BLOCK_MAX) queries. */
    int attn_rows, attn_T, attn_gsz;
    int32_t *ablk;   /* (n_batch + 1) first batch row of each token block of the current batch */
    int n_ablk;
    float *scores;   /* (n_threads, attn_rows, score_stride) score rows, per thread, 64-byte
                        aligned; score_stride = n_ctx rounded up to 16 */
    size_t score_stride;
    float *qr;       /* (n_threads, qr_stride) per thread: attn_rows queries rounded to F16
                        precision (head_dim each), then a 16-key tile of head_dim floats */
    size_t qr_stride;
    struct attn_kernels attn_k; /* attention inner loops for this CPU */
    struct vexp_kernels vexp_k; /* SiLU(gate) * up for this CPU */
    float *logits;   /* (n_batch, n_vocab); rows [0, n_logits) valid after a decode */
    float *head_rows;/* (n_batch, model->n_head_ids) a pruned head's own logits, or NULL */
    int n_logits;    /* rows of logits computed by the last decode */
    int32_t *bpos;   /* (n_batch) position of each token of the current batch */
    int32_t *bseq;   /* (n_batch) sequence of each token of the current batch */
    int32_t *out_list; /* (n_batch) batch rows that want logits, ascending; logits row k = out_list[k] */
    int32_t *out_row;  /* (n_batch) batch row -> logits row, or -1 */
    int n_out;       /* entries of out_list for the current batch */
    int call_offset; /* index, within the last decode call, of the current batch's row 0 */
    int last_n;      /* tokens in the current batch */
    int32_t *next_pos; /* (n_seq) scratch: expected next position per sequence while validating */
    bool *want;      /* (n_batch) scratch: which rows of a tern_decode sub-batch want logits */
    /* qwen35 (NULL otherwise): gated attention, DeltaNet layers (forward_delta.c) */
    float *qaux;     /* (n_batch, 2 * n_head * head_dim) attn_q output: q and gate rows per head */
    float *agate;    /* (n_batch, n_head * head_dim) attention output gate */
    float *dn_in;    /* (n_batch, conv_dim) conv inputs (attn_qkv output) */
    float *dn_qkv;   /* (n_batch, conv_dim) q, k, v after conv, SiLU, l2 norm */
    float *dn_z;     /* (n_batch, value_dim) output gate */
    float *dn_b, *dn_a; /* (n_batch, n_v) beta and alpha projections */
    float *dn_bg;    /* (n_batch, 2 * n_v) beta before its sigmoid, then g */
    float *dn_out;   /* (n_batch, value_dim) DeltaNet output */
    float *dn_par;   /* (n_batch, n_v, DELTA_PAR) the DeltaNet heads' parameters per token */
    float *dn_pre;   /* (d_conv - 1, conv_dim) a run's conv window, tap-major (rec_conv_run) */
    float *dn_taps;  /* (recurrent layers, d_conv, conv_dim) conv weights, tap-major */
    float *dn_work;  /* (threads, hk, DELTA_BLOCK) each thread's DeltaNet block (kernels/delta.h) */
    float **dn_keep; /* (n_batch, 2) where the state after a row is kept too (rec_run.keep) */
    int *rb_n, *rb_p0, *rb_base; /* (n_seq) rows, first position, new rollback base per sequence */
    int *rb_at;      /* (n_seq) where a sequence's rows start in rb_rows */
    int *rb_rows;    /* (n_batch) the batch's rows grouped by sequence, each in position order */
    int *rb_seqs;    /* (n_seq) the sequences in the batch */
    int rb_nseqs;
    struct rec_run *rb_run; /* (n_seq) the k-th sequence's run through the current layer */
    void *raw[32];   /* blocks behind the 64-byte aligned float buffers above (context.c) */
    int n_raw;
    /* Final hidden states (tern_context_keep_hidden; always in an MTP context): the normalized
     * last hidden state of each position of sequence 0, written by every pass; positions
     * hid_lo .. hid_hi-1 hold the current contents' (one run: a restore or copy into sequence
     * 0 empties it, truncation is applied when read), the last hid_rows of them kept. */
    float *hid;      /* (hid_rows, n_embd) or NULL: position p in row p % hid_rows */
    int hid_rows;    /* min(n_ctx, CONTEXT_HID_ROWS) */
    int hid_lo, hid_hi;
    /* MTP context (tern_context_params.mtp): it runs only the model's multi-token-prediction
     * layer (forward_mtp.c); its KV cache holds that layer alone and it has no recurrent state */
    bool mtp;
    float *mtp_in;   /* (n_batch, 2 * n_embd) [enorm(embedding) ; hnorm(hidden)] per token */
    bool exact_batches; /* tern_context_set_exact_batches: one-token kernels for every token */
    struct lora_set *lora; /* attached LoRA adapters (lora_apply.c), or NULL: the plain pass */
    bool profile;    /* collect per-op timings (profile.c) */
    uint64_t prof_ns[TERN_PROF_COUNT];
    uint64_t prof_calls[TERN_PROF_COUNT];
    uint64_t prof_fallbacks[TERN_PROF_COUNT];
};

/* Profiling helpers (profile.c): monotonic ns, the op class of a matmul on weight type t, and
 * whether that matmul runs a scalar fallback on this CPU. */
uint64_t prof_now_ns(void);
int prof_matmul_op(int wtype);
bool prof_is_fallback(int wtype);

/* One forward pass over n <= n_batch tokens whose positions and sequences are in bpos/bseq,
 * computing logits for the rows in out_list (n_out of them) (forward.c). */
TERN_NODISCARD tern_status forward_batch(struct tern_context *ctx, const int32_t *tokens, int n);
/* The same through the MTP layer (an MTP context; forward_mtp.c): token t's embedding with
 * hidden row t (n_embd floats), the main model's normalized last hidden state at the position
 * before t's (zeros at position 0), give logits for the token after t, and ctx->hid
 * the MTP's own output state for the next draft step. */
TERN_NODISCARD tern_status forward_mtp_batch(struct tern_context *ctx, const int32_t *tokens, const float *hidden, int n);

#endif
