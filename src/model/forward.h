/* forward.h — the building blocks of the forward pass that more than one file of src/model uses:
 * forward.c (the transformer layers, the pass itself) and forward_delta.c (qwen35's Gated
 * DeltaNet layers). Internal to src/model.
 *
 * A step is one tp_run over the context's thread pool; struct step carries what a step needs.
 * Matmuls read ctx->act, the activations quantized for the weight's vec_dot type (ensure_act,
 * norm_and_quantize keep track of what ctx->act holds). */
#ifndef TERN_MODEL_FORWARD_H
#define TERN_MODEL_FORWARD_H

#include "model/context.h"

struct step {
    struct tern_context *ctx;
    int n;                          /* tokens in the batch */
    int il;                         /* layer */
    const struct model_weight *w[3];/* matrices of a matmul step (unused entries NULL) */
    float *out[3];                  /* their outputs, (n, rows) */
    const struct model_weight *bias[3];
    const float *src;               /* input rows (n, cols) for norm/quantize steps */
    const float *norm_w;
    int cols;
    int act_type;
    int row0;                       /* first batch row to process (logits of the last token) */
};

/* y = x / rms(x) * w over n elements (sum of squares in double, as ggml_rms_norm). */
void fwd_rms_norm_row(const float *x, const float *w, float *y, int n, float eps);
void fwd_rms_norm_rows(const float *x, const float *w, float *y, int rows, int n, float eps);
/* Chunks for a step of `units` independent pieces: a few per thread. */
int fwd_chunks_for(const struct tern_context *ctx, long long units, int per_thread);
/* tp_run, timed into op class op when the context profiles. */
void fwd_run_step(struct tern_context *ctx, int op, tp_fn fn, void *arg, int n_chunks);
/* out[i] = w[i] . act(src) (+ bias[i] if bound; bias may be NULL) for cnt matrices sharing the
 * input src (cols wide, rows 0..n-1): those with the same activation format share one
 * quantization and, up to three, one step. */
void fwd_matmuls(struct tern_context *ctx, int il, const float *src, int cols, int n,
                 const struct model_weight *const *w, float *const *out,
                 const struct model_weight *const *bias, int cnt);
/* ctx->xn = rmsnorm(src) * norm_w, quantized into ctx->act for weight w. */
void fwd_norm_and_quantize(struct tern_context *ctx, const float *src, const float *norm_w,
                           int cols, int n, int row0, const struct model_weight *w);
/* ctx->act = src quantized for w, unless it holds that already. */
void fwd_ensure_act(struct tern_context *ctx, const float *src, int cols, int n, int row0,
                    const struct model_weight *w);
/* x += W . act, or with a post-norm x += rmsnorm(W . act) * post. */
void fwd_matmul_residual(struct tern_context *ctx, struct step *s, const struct model_weight *w,
                         const struct model_weight *post);

/* The pieces of a pass (forward.c), shared with the MTP pass (forward_mtp.c): the batch's
 * embeddings into ctx->x, RoPE rows and attention blocks; one layer (attention or DeltaNet, then
 * the FFN if it has one) on ctx->x; each sequence-0 row's final hidden state, normalized by
 * norm_w (NULL: as it is), into ctx->hid at its position; logits of the rows in out_list from
 * output after norm (norm->data NULL: none). */
void fwd_batch_inputs(struct tern_context *ctx, const int32_t *tokens, int n);
void fwd_layer(struct tern_context *ctx, int il, int n);
void fwd_keep_hidden(struct tern_context *ctx, const float *norm_w, int n);
void fwd_output_head(struct tern_context *ctx, int n, const struct model_weight *norm,
                     const struct model_weight *output);

/* Before and after the layers of a pass with recurrent layers: which state buffers each row
 * reads and writes, the sequences' new rollback bases, captures done (forward_delta.c). */
void rec_batch_begin(struct tern_context *ctx, int n);
void rec_batch_end(struct tern_context *ctx);
/* The Gated DeltaNet block of layer il (forward_delta.c): x += ssm_out(gated DeltaNet(norm(x))). */
void delta_layer(struct tern_context *ctx, int il, int n);

#endif
