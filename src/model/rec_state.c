/* rec_state.c — storage of the Gated DeltaNet state and the recurrence over a run of a
 * sequence's tokens (read rec_state.h first), used by the forward pass (forward_delta.c) and by
 * rollback replay (context.c).
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
 * on the batch or the thread count. A run takes all of a call's tokens at once (the conv per
 * channel range with the previous inputs read from the batch, the DeltaNet per block of state
 * columns: kernels/delta.h), with each element's operations those of one token at a time: the
 * bits are the same for any split of the tokens into calls. */
#include "model/rec_state.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/error.h"

tern_status rec_init(struct rec_state *r, const struct model_hparams *in, int n_seq, int rec_cap)
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
    r->vk = vexp_select();
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

void rec_conv_taps(const struct rec_state *r, const float *conv_w, float *taps)
{
    for (int c = 0; c < r->conv_dim; c++)
        for (int j = 0; j < r->d_conv; j++)
            taps[(size_t)j * r->conv_dim + c] = conv_w[(size_t)c * r->d_conv + j];
}

/* Input v of a run's conv, relative to its first token (v < 0: the window before it, in pre). */
static const float *conv_input(const struct rec_state *r, const struct rec_run *run, const float *pre,
                               int v)
{
    const int w = r->d_conv - 1;
    return v >= 0 ? run->in + (size_t)run->rows[v] * r->conv_dim : pre + (size_t)(w + v) * r->conv_dim;
}

/* The window after token i (its d_conv - 1 latest inputs, oldest first), channel-major. */
static void conv_window(const struct rec_state *r, const struct rec_run *run, const float *pre, int i,
                        float *win, int c0, int c1)
{
    const int w = r->d_conv - 1;
    for (int j = 0; j < w; j++) {
        const float *x = conv_input(r, run, pre, i - w + 1 + j);
        for (int c = c0; c < c1; c++) win[(size_t)c * w + j] = x[c];
    }
}

void rec_conv_run(const struct rec_state *r, const struct rec_run *run, const float *taps, float *pre,
                  int c0, int c1)
{
    const int k = r->d_conv, w = k - 1, n = c1 - c0;
    const size_t cd = (size_t)r->conv_dim;
    if (n <= 0 || run->m <= 0) return;
    /* the window before the first token, tap-major like the inputs (src may be overwritten by a
     * keep below: the base buffer of a long call) */
    for (int j = 0; j < w; j++)
        for (int c = c0; c < c1; c++) pre[j * cd + c] = run->src ? run->src[(size_t)c * w + j] : 0.0f;
    const float *x[64];
    for (int i = 0; i < run->m; i++) {
        for (int j = 0; j < k; j++) x[j] = conv_input(r, run, pre, i - w + j) + c0;
        float *y = run->qkv + (size_t)run->rows[i] * cd + c0;
        r->dk.conv(x, k, taps + c0, cd, y, n);
        r->vk.silu_mul(y, NULL, n);
        for (int e = 0; run->keep && e < 2; e++)
            if (run->keep[2 * i + e]) conv_window(r, run, pre, i, run->keep[2 * i + e], c0, c1);
    }
    conv_window(r, run, pre, run->m - 1, run->dst, c0, c1);
}

void rec_token_params(const struct rec_state *r, float *qkv, const float *bg, float *par, float eps)
{
    const int hk = r->hk;
    for (int h = 0; h < 2 * r->n_k; h++) {
        float *x = qkv + (size_t)h * hk;
        double sum = 0.0;
        for (int i = 0; i < hk; i++) sum += (double)(x[i] * x[i]);
        const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (int i = 0; i < hk; i++) x[i] = scale * x[i];
    }
    const float scale = 1.0f / sqrtf((float)hk);
    for (int h = 0; h < r->n_v; h++) {
        const int hq = h % r->n_k;
        const float *q = qkv + (size_t)hq * hk, *k = qkv + (size_t)(r->n_k + hq) * hk;
        float kq = 0.0f;
        for (int i = 0; i < hk; i++) kq += k[i] * q[i];
        const float beta = 1.0f / (1.0f + expf(-bg[h]));
        const float decay = expf(fminf(bg[r->n_v + h], 50.0f));
        float *p = par + (size_t)h * DELTA_PAR;
        p[0] = beta;
        p[1] = beta * decay;
        p[2] = decay;
        p[3] = kq * scale;
        p[4] = decay * scale;
    }
}

void rec_delta_run(const struct rec_state *r, const struct rec_run *run, int h, int j0, int j1, float *work)
{
    const size_t hk = (size_t)r->hk, hv = (size_t)r->hv, head = r->conv_floats + h * hk * hv;
    const size_t hq = (size_t)(h % r->n_k);
    const struct delta_run d = {
        .rows = run->rows, .m = run->m, .hk = r->hk, .hv = r->hv,
        .qkv = run->qkv, .qkv_stride = (size_t)r->conv_dim,
        .q_off = hq * hk, .k_off = ((size_t)r->n_k + hq) * hk, .v_off = 2 * (size_t)r->n_k * hk + h * hv,
        .par = run->par + (size_t)h * DELTA_PAR, .par_stride = (size_t)r->n_v * DELTA_PAR,
        .out = run->out + h * hv, .out_stride = (size_t)r->n_v * hv,
        .keep = run->keep, .keep_off = head, .work = work,
    };
    r->dk.run(&d, run->src ? run->src + head : NULL, run->dst + head, j0, j1);
}
