/* forward_delta.c — qwen35's Gated DeltaNet layers in the forward pass. Read rec_state.h (the
 * state and its arithmetic) and forward.h (the steps) first.
 *
 * Per layer, as ik_llama.cpp's delta_net::build_layer_attn_linear:
 *   xn = rmsnorm(x) * attn_norm
 *   conv inputs = attn_qkv . xn, z = attn_gate . xn, b = ssm_beta . xn, a = ssm_alpha . xn
 *   g = softplus(a + ssm_dt) * ssm_a               (the log of the decay; ssm_a = -exp(A_log))
 *   q, k, v = SiLU(causal conv1d(conv inputs)); q, k l2-normalized per head
 *   o = DeltaNet(q, k, v, beta = sigmoid(b), g) with the sequence's state
 *   x += ssm_out . (rmsnorm(o per head) * ssm_norm * SiLU(z))
 * Steps: the matmuls split rows; the conv splits channels; the l2 norm and the gated norm split
 * tokens; the DeltaNet splits (sequence, value head) units, each going through its sequence's
 * tokens in order. rec_batch_begin / rec_batch_end (once per pass, around the layers) pick the
 * state buffers of each sequence in the batch and move its rollback base (rec_state.h). */
#include <math.h>
#include <string.h>

#include "model/forward.h"
#include "util/check.h"

/* softplus as ggml's: x above 20 is its own softplus (exp would only add rounding) */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void rec_batch_begin(struct tern_context *ctx, int n)
{
    struct rec_state *r = &ctx->rec;
    for (int s = 0; s < r->n_seq; s++) ctx->rb_n[s] = 0;
    for (int t = 0; t < n; t++) {
        const int s = ctx->bseq[t];
        ctx->rec_first[t] = ctx->rb_n[s]++ == 0;
        if (ctx->rec_first[t]) ctx->rb_p0[s] = ctx->bpos[t];
    }
    ctx->rb_nseqs = 0;
    for (int s = 0; s < r->n_seq; s++) {
        if (!ctx->rb_n[s]) continue;
        ctx->rb_seqs[ctx->rb_nseqs++] = s;
        /* the rollback base: where the call starts, or rec_cap tokens before its end */
        const int end = ctx->rb_p0[s] + ctx->rb_n[s];
        ctx->rb_base[s] = end - r->rec_cap > ctx->rb_p0[s] ? end - r->rec_cap : ctx->rb_p0[s];
    }
}

void rec_batch_end(struct tern_context *ctx)
{
    struct rec_state *r = &ctx->rec;
    for (int s = 0; s < r->n_seq; s++) {
        if (!ctx->rb_n[s]) continue;
        const int end = ctx->rb_p0[s] + ctx->rb_n[s];
        r->cur[s] ^= 1;
        r->base[s] = ctx->rb_base[s];
        if (r->cap_pos[s] > ctx->rb_p0[s] && r->cap_pos[s] <= end) r->cap_done[s] = true;
    }
}

/* The state a row reads (NULL: zeros at position 0) and writes, in layer l. */
static const float *row_src(const struct tern_context *ctx, int t, int l)
{
    const int s = ctx->bseq[t];
    if (!ctx->rec_first[t]) return rec_layer(&ctx->rec, s, ctx->rec.cur[s] ^ 1, l);
    return ctx->bpos[t] == 0 ? NULL : rec_layer(&ctx->rec, s, ctx->rec.cur[s], l);
}
static float *row_dst(const struct tern_context *ctx, int t, int l)
{
    const int s = ctx->bseq[t];
    return rec_layer(&ctx->rec, s, ctx->rec.cur[s] ^ 1, l);
}

/* After row t (position p) wrote [off, off + len) of layer l's state: keep it where the prefix
 * cache asked for the state at p + 1, and in the base buffer when p + 1 is the new rollback
 * base inside this call. */
static void row_keep(const struct tern_context *ctx, int t, int l, size_t off, size_t len)
{
    const struct rec_state *r = &ctx->rec;
    const int s = ctx->bseq[t], p1 = ctx->bpos[t] + 1;
    const float *st = row_dst(ctx, t, l) + off;
    if (r->cap_pos[s] == p1 && r->cap)
        memcpy(r->cap + (size_t)s * r->seq_floats + (size_t)l * r->layer_floats + off, st,
               len * sizeof(float));
    if (ctx->rb_base[s] == p1 && p1 > ctx->rb_p0[s])
        memcpy(rec_layer(r, s, r->cur[s], l) + off, st, len * sizeof(float));
}

struct dstep {
    struct tern_context *ctx;
    const struct model_layer *L;
    int n, l;
};

/* Conv of every row, a channel range per chunk; rows in batch order (a sequence's tokens come
 * in position order). */
static void step_conv(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    const struct rec_state *r = &ctx->rec;
    long long c0, c1;
    tp_split(r->conv_dim, chunk, n_chunks, 16, &c0, &c1);
    if (c0 >= c1) return;
    const size_t w = (size_t)r->d_conv - 1;
    for (int t = 0; t < d->n; t++) {
        rec_conv_token(r, d->L->ssm_conv1d.data, ctx->dn_in + (size_t)t * r->conv_dim,
                       row_src(ctx, t, d->l), row_dst(ctx, t, d->l),
                       ctx->dn_qkv + (size_t)t * r->conv_dim, (int)c0, (int)c1);
        row_keep(ctx, t, d->l, (size_t)c0 * w, (size_t)(c1 - c0) * w);
    }
}

static void step_l2norm(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    long long lo, hi;
    tp_split(d->n, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = lo; t < hi; t++)
        rec_l2norm_token(&ctx->rec, ctx->dn_qkv + (size_t)t * ctx->rec.conv_dim,
                         ctx->model->info.rms_eps);
}

/* Units (sequence of the batch, value head); each walks its sequence's rows in order. */
static void step_delta(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    const struct rec_state *r = &ctx->rec;
    const long long units = (long long)ctx->rb_nseqs * r->n_v;
    const size_t conv = r->conv_floats, hs = (size_t)r->hk * r->hv;
    for (long long u = chunk; u < units; u += n_chunks) {
        const int s = ctx->rb_seqs[u / r->n_v], h = (int)(u % r->n_v);
        for (int t = 0; t < d->n; t++) {
            if (ctx->bseq[t] != s) continue;
            const float *src = row_src(ctx, t, d->l);
            rec_delta_token(r, ctx->dn_qkv + (size_t)t * r->conv_dim, ctx->dn_bg + (size_t)t * 2 * r->n_v,
                            src ? src + conv : NULL, row_dst(ctx, t, d->l) + conv,
                            ctx->dn_out + (size_t)t * r->n_v * r->hv, h, h + 1);
            row_keep(ctx, t, d->l, conv + h * hs, hs);
        }
    }
}

/* o = rmsnorm(o per head) * ssm_norm * SiLU(z), per token. */
static void step_gated_norm(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    const struct rec_state *r = &ctx->rec;
    const int hv = r->hv;
    long long lo, hi;
    tp_split(d->n, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = lo; t < hi; t++)
        for (int h = 0; h < r->n_v; h++) {
            float *o = ctx->dn_out + ((size_t)t * r->n_v + h) * hv;
            const float *z = ctx->dn_z + ((size_t)t * r->n_v + h) * hv;
            fwd_rms_norm_row(o, d->L->ssm_norm.data, o, hv, ctx->model->info.rms_eps);
            for (int j = 0; j < hv; j++) o[j] *= z[j] / (1.0f + expf(-z[j]));
        }
}

void delta_layer(struct tern_context *ctx, int il, int n)
{
    const struct tern_model *m = ctx->model;
    const struct model_layer *L = &m->layers[il];
    struct rec_state *r = &ctx->rec;
    const int d = m->info.n_embd, nv = r->n_v, l = L->rec_index;
    TERN_ASSERT(L->recurrent && l >= 0 && l < r->n_layer);

    fwd_norm_and_quantize(ctx, ctx->x, L->attn_norm.data, d, n, 0, &L->ssm_qkv);
    const struct model_weight *w[4] = {&L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha};
    float *out[4] = {ctx->dn_in, ctx->dn_z, ctx->dn_b, ctx->dn_a};
    fwd_matmuls(ctx, il, ctx->xn, d, n, w, out, NULL, 4);

    /* beta (before its sigmoid) and g, then the record of what the recurrence consumes */
    const float *dt = L->ssm_dt.data, *a = L->ssm_a.data;
    for (int t = 0; t < n; t++) {
        float *bg = ctx->dn_bg + (size_t)t * 2 * nv;
        for (int h = 0; h < nv; h++) {
            bg[h] = ctx->dn_b[(size_t)t * nv + h];
            bg[nv + h] = softplus(ctx->dn_a[(size_t)t * nv + h] + dt[h]) * a[h];
        }
        const int s = ctx->bseq[t], i = ctx->bpos[t] - ctx->rb_base[s];
        if (i >= 0) {
            TERN_ASSERT(i < r->rec_cap);
            float *rc = rec_record(r, s, i, l);
            memcpy(rc, ctx->dn_in + (size_t)t * r->conv_dim, sizeof(float) * (size_t)r->conv_dim);
            memcpy(rc + r->conv_dim, bg, sizeof(float) * 2 * (size_t)nv);
        }
    }
    struct dstep ds = {.ctx = ctx, .L = L, .n = n, .l = l};
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_conv, &ds, fwd_chunks_for(ctx, (r->conv_dim + 15) / 16, 2));
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_l2norm, &ds, fwd_chunks_for(ctx, n, 4));
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_delta, &ds,
                 fwd_chunks_for(ctx, (long long)ctx->rb_nseqs * nv, 2));
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_gated_norm, &ds, fwd_chunks_for(ctx, n, 4));
    struct step s = {.ctx = ctx, .n = n, .il = il};
    fwd_ensure_act(ctx, ctx->dn_out, nv * r->hv, n, 0, &L->ssm_out);
    fwd_matmul_residual(ctx, &s, &L->ssm_out, &L->ffn_post_norm);
}
