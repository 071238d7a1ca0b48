/* context.h — struct tern_context: everything one sequence needs at run time.
 *
 * All buffers are allocated once in tern_context_create (context.c) for up to n_batch tokens
 * per forward pass; forward.c only reads and writes them, so decoding never allocates.
 * Shapes are in the comments: (rows, cols), row-major. */
#ifndef TERN_MODEL_CONTEXT_H
#define TERN_MODEL_CONTEXT_H

#include "kv/kv.h"
#include "model/attn.h"
#include "model/model.h"
#include "util/threadpool.h"

struct tern_context {
    struct tern_model *model;
    int n_ctx, n_batch, n_threads;
    struct tp *pool;
    struct kv_cache kv;

    float *x;        /* (n_batch, n_embd) residual stream */
    float *xn;       /* (n_batch, n_embd) normalized input of the current block */
    float *q;        /* (n_batch, n_head * head_dim) */
    float *k;        /* (n_batch, n_head_kv * head_dim) */
    float *v;        /* (n_batch, n_head_kv * head_dim) */
    float *attn;     /* (n_batch, n_head * head_dim) attention output, heads concatenated */
    float *gate;     /* (n_batch, n_ff) gate projection, then silu(gate) * up */
    float *up;       /* (n_batch, n_ff) */
    float *proj;     /* (n_batch, n_embd) output of wo / ffn_down before the residual add */
    void *act;       /* (n_batch, act_stride bytes) activations quantized for the next matmul */
    size_t act_stride;
    const float *act_src; /* which float buffer `act` currently holds, and in which format */
    int act_type;
    float *rope_cs;  /* (n_batch, n_rot) interleaved cos, sin for each token's position */
    float *scores;   /* (n_threads, n_ctx) attention scores, one row per thread */
    float *qr;       /* (n_threads, head_dim) query rounded to F16 precision, one row per thread */
    struct attn_kernels attn_k; /* attention inner loops for this CPU */
    float *logits;   /* (n_batch, n_vocab); rows [0, n_logits) valid after tern_decode */
    int n_logits;    /* rows of logits computed by the last decode */
    int logits_row0; /* row of the sub-batch that logits row 0 belongs to (forward.c) */
    bool profile;    /* collect per-op timings (profile.c) */
    uint64_t prof_ns[TERN_PROF_COUNT];
    uint64_t prof_calls[TERN_PROF_COUNT];
    uint64_t prof_fallbacks[TERN_PROF_COUNT];
    int logits_first;/* token index, within the last tern_decode call, of logits row 0 */
};

/* Profiling helpers (profile.c): monotonic ns, the op class of a matmul on weight type t, and
 * whether that matmul runs a scalar fallback on this CPU. */
uint64_t prof_now_ns(void);
int prof_matmul_op(int wtype);
bool prof_is_fallback(int wtype);

/* One forward pass over n <= n_batch tokens at positions pos0.. (forward.c). */
tern_status forward_batch(struct tern_context *ctx, const int32_t *tokens, int n, int pos0,
                          enum tern_logits_mode mode);

#endif
