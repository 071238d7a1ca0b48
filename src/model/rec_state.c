/* rec_state.c — storage of the Gated DeltaNet state and the per-token recurrence (read
 * rec_state.h first), used by the forward pass (forward_delta.c) and by rollback (context.c).
 *
 * The arithmetic is ik_llama.cpp's (llama-delta-net.cpp, ggml_ssm_conv, ggml_l2_norm and the
 * fused delta-net op of iqk_mul_mat.cpp), whose logits the parity tests compare with:
 *   conv:  y_c = sum_j w_c[j] * window_c[j] over the d_conv - 1 previous inputs and this one
 *          (oldest first), then SiLU; the window shifts by one
 *   norm:  q and k heads scaled by 1 / max(|x|, eps) (eps = the RMSNorm epsilon)
 *   delta: per value head h (its q/k head is h mod n_k: the converter orders value heads
 *          tiled), with S the (hk, hv) state, beta = sigmoid(b), decay = exp(min(g, 50)):
 *            v' = S^T k,  o = S^T q                   (with the state before the token)
 *            u  = beta * v - beta * decay * v'
 *            out = decay / sqrt(hk) * o + (k . q / sqrt(hk)) * u
 *            S  = clamp(decay * S + k u^T, -1e6, 1e6)
 * Everything is per token and per head in a fixed order, so a token's result does not depend
 * on the batch or the thread count. */
#include "model/rec_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/error.h"

tern_status rec_init(struct rec_state *r, const struct tern_model_info *in, int n_seq, int rec_cap)
{
    memset(r, 0, sizeof *r);
    if (!in->n_layer_rec) return TERN_OK;
    r->n_layer = in->n_layer_rec;
    r->n_seq = n_seq;
    r->d_conv = in->ssm_d_conv;
    r->n_k = in->ssm_n_k_heads;
    r->n_v = in->ssm_n_v_heads;
    r->hk = in->ssm_head_k;
    r->hv = in->ssm_head_v;
    r->conv_dim = 2 * r->n_k * r->hk + r->n_v * r->hv;
    r->conv_floats = (size_t)r->conv_dim * (size_t)(r->d_conv - 1);
    r->ssm_floats = (size_t)r->n_v * r->hk * r->hv;
    r->layer_floats = r->conv_floats + r->ssm_floats;
    r->seq_floats = (size_t)r->n_layer * r->layer_floats;
    r->rec_cap = rec_cap;
    r->dk = delta_select(r->hv);
    r->rec_floats = (size_t)r->conv_dim + 2 * (size_t)r->n_v;
    r->buf = calloc((size_t)n_seq * 2 * r->seq_floats, sizeof(float));
    r->rec = malloc((size_t)n_seq * rec_cap * r->n_layer * r->rec_floats * sizeof(float));
    r->cur = calloc((size_t)n_seq, sizeof *r->cur);
    r->base = malloc((size_t)n_seq * sizeof *r->base);
    r->cap_pos = malloc((size_t)n_seq * sizeof *r->cap_pos);
    r->cap_done = calloc((size_t)n_seq, sizeof *r->cap_done);
    if (!r->buf || !r->rec || !r->cur || !r->base || !r->cap_pos || !r->cap_done) {
        const double mb = (double)n_seq * (2 * r->seq_floats + rec_cap * r->n_layer * r->rec_floats) *
                          sizeof(float) / 1048576.0;
        rec_free(r);
        return tern_fail(TERN_ERR_NOMEM, "recurrent state of %d sequences (%.1f MiB): out of memory",
                         n_seq, mb);
    }
    for (int s = 0; s < n_seq; s++) r->base[s] = r->cap_pos[s] = -1;
    return TERN_OK;
}

void rec_free(struct rec_state *r)
{
    free(r->buf);
    free(r->rec);
    free(r->cur);
    free(r->base);
    free(r->cap_pos);
    free(r->cap_done);
    free(r->cap);
    memset(r, 0, sizeof *r);
}

void rec_conv_token(const struct rec_state *r, const float *conv_w, const float *in, const float *src,
                    float *dst, float *qkv, int c0, int c1)
{
    const int k = r->d_conv, w = k - 1;
    for (int c = c0; c < c1; c++) {
        const float *win = src ? src + (size_t)c * w : NULL;
        const float *cw = conv_w + (size_t)c * k;
        float sum = 0.0f;
        for (int j = 0; j < w; j++) sum += (win ? win[j] : 0.0f) * cw[j];
        sum += in[c] * cw[w];
        qkv[c] = sum / (1.0f + expf(-sum));
        float *nw = dst + (size_t)c * w;
        if (w > 0) {
            /* shift left by one (memmove: src may be dst), the input last */
            if (win) memmove(nw, win + 1, sizeof(float) * (size_t)(w - 1));
            else memset(nw, 0, sizeof(float) * (size_t)(w - 1));
            nw[w - 1] = in[c];
        }
    }
}

void rec_l2norm_token(const struct rec_state *r, float *qkv, float eps)
{
    for (int h = 0; h < 2 * r->n_k; h++) {
        float *x = qkv + (size_t)h * r->hk;
        double sum = 0.0;
        for (int i = 0; i < r->hk; i++) sum += (double)(x[i] * x[i]);
        const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (int i = 0; i < r->hk; i++) x[i] = scale * x[i];
    }
}

void rec_delta_token(const struct rec_state *r, const float *qkv, const float *beta_g,
                     const float *src, float *dst, float *out, int h0, int h1)
{
    const int hk = r->hk, hv = r->hv;
    const float scale = 1.0f / sqrtf((float)hk);
    const float *qall = qkv, *kall = qkv + (size_t)r->n_k * hk, *vall = qkv + 2 * (size_t)r->n_k * hk;
    for (int h = h0; h < h1; h++) {
        const int hq = h % r->n_k;
        const float *q = qall + (size_t)hq * hk, *k = kall + (size_t)hq * hk, *v = vall + (size_t)h * hv;
        float kq = 0.0f;
        for (int i = 0; i < hk; i++) kq += k[i] * q[i];
        const float beta = 1.0f / (1.0f + expf(-beta_g[h]));
        const float decay = expf(fminf(beta_g[r->n_v + h], 50.0f));
        r->dk.head(src ? src + (size_t)h * hk * hv : NULL, dst + (size_t)h * hk * hv, q, k, v, beta,
                   beta * decay, decay, kq * scale, decay * scale, out + (size_t)h * hv, hk, hv);
    }
}
