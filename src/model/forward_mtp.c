/* forward_mtp.c — a pass through a qwen35 model's multi-token-prediction layer (an MTP context).
 *
 * Read forward.c first: this pass reuses its pieces. What the MTP layer computes, as
 * ik_llama.cpp's build_qwen35_mtp (the reference test_mtp compares against):
 *
 *     x   = eh_proj [rmsnorm(embd(t)) * enorm ; rmsnorm(h) * hnorm]     (2 n_embd -> n_embd)
 *     x   = the layer (gated attention with its own KV cache, then its FFN if it has one)
 *     y   = rmsnorm(x) * shared_head_norm                              (kept in ctx->hid)
 *     out = output_extra (or the model's output) . y
 *
 * h is the main model's final normalized hidden state one position earlier: the state that
 * predicted t. So the MTP at t's position predicts the token after t, one token further than
 * that state's own prediction.
 * Drafting chains it: a draft token's successor comes from the MTP's own y in place of h. */
#include <string.h>

#include "model/context.h"
#include "model/forward.h"
#include "util/check.h"

tern_status forward_mtp_batch(struct tern_context *ctx, const int32_t *tokens, const float *hidden, int n)
{
    const struct tern_model *m = ctx->model;
    const struct model_mtp *t = &m->mtp;
    const struct model_hparams *in = &m->info;
    const int d = in->n_embd;
    TERN_ASSERT(ctx->mtp && t->il >= 0 && ctx->mtp_in && ctx->hid);
    fwd_batch_inputs(ctx, tokens, n);
    for (int r = 0; r < n; r++) {
        float *row = ctx->mtp_in + (size_t)r * 2 * d;
        fwd_rms_norm_row(ctx->x + (size_t)r * d, t->enorm.data, row, d, in->rms_eps);
        fwd_rms_norm_row(hidden + (size_t)r * d, t->hnorm.data, row + d, d, in->rms_eps);
    }
    if (t->eh_proj.data) {
        const struct model_weight *w[1] = {&t->eh_proj};
        float *out[1] = {ctx->x};
        fwd_matmuls(ctx, t->il, ctx->mtp_in, 2 * d, n, w, out, NULL, 1);
    } else { /* no projection: the two normalized inputs are added */
        for (int r = 0; r < n; r++)
            for (int i = 0; i < d; i++)
                ctx->x[(size_t)r * d + i] = ctx->mtp_in[(size_t)r * 2 * d + i] +
                                            ctx->mtp_in[(size_t)r * 2 * d + d + i];
    }
    ctx->act_src = NULL;
    fwd_layer(ctx, t->il, n);
    fwd_keep_hidden(ctx, t->head_norm.data, n);
    fwd_output_head(ctx, n, &t->head_norm, &t->output);
    return TERN_OK;
}
