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
 * Each sequence of the batch makes a run (rec_state.h) per layer. Steps: the matmuls split rows;
 * the conv splits channels; the l2 norm with the heads' parameters and the gated norm split
 * tokens; the DeltaNet splits (sequence, value head, column block) units, each going through its
 * sequence's tokens in order. rec_batch_begin / rec_batch_end (once per pass, around the layers)
 * group the batch's rows by sequence, pick the state buffers of each sequence and move its
 * rollback base. */
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
        if (ctx->rb_n[s]++ == 0) ctx->rb_p0[s] = ctx->bpos[t];
    }
    ctx->rb_nseqs = 0;
    int at = 0;
    for (int s = 0; s < r->n_seq; s++) {
        if (!ctx->rb_n[s]) continue;
        ctx->rb_seqs[ctx->rb_nseqs++] = s;
        ctx->rb_at[s] = at;
        at += ctx->rb_n[s];
        /* the rollback base: where the call starts, or rec_cap tokens before its end */
        const int end = ctx->rb_p0[s] + ctx->rb_n[s];
        ctx->rb_base[s] = end - r->rec_cap > ctx->rb_p0[s] ? end - r->rec_cap : ctx->rb_p0[s];
    }
    /* each sequence's rows, in batch order (a sequence's tokens come in position order) */
    for (int k = 0; k < ctx->rb_nseqs; k++) ctx->rb_n[ctx->rb_seqs[k]] = 0;
    for (int t = 0; t < n; t++) {
        const int s = ctx->bseq[t];
        ctx->rb_rows[ctx->rb_at[s] + ctx->rb_n[s]++] = t;
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

/* The run of the k-th sequence of the batch through layer l: it reads the state where the
 * sequence ended (zeros at position 0) and writes the other buffer; keep entries go where the
 * prefix cache asked for the state at a position inside the call, and to the reading buffer
 * when the call's new rollback base is inside it. */
static void make_run(struct tern_context *ctx, int k, int l, struct rec_run *run)
{
    const struct rec_state *r = &ctx->rec;
    const int s = ctx->rb_seqs[k], at = ctx->rb_at[s], m = ctx->rb_n[s];
    float **keep = ctx->dn_keep + 2 * (size_t)at;
    bool any = false;
    for (int i = 0; i < m; i++) {
        const int p1 = ctx->bpos[ctx->rb_rows[at + i]] + 1;
        keep[2 * i] = r->cap_pos[s] == p1 && r->cap
                          ? r->cap + (size_t)s * r->seq_floats + (size_t)l * r->layer_floats : NULL;
        keep[2 * i + 1] = ctx->rb_base[s] == p1 && p1 > ctx->rb_p0[s] ? rec_layer(r, s, r->cur[s], l) : NULL;
        any = any || keep[2 * i] || keep[2 * i + 1];
    }
    *run = (struct rec_run){
        .rows = ctx->rb_rows + at, .m = m,
        .src = ctx->rb_p0[s] == 0 ? NULL : rec_layer(r, s, r->cur[s], l),
        .dst = rec_layer(r, s, r->cur[s] ^ 1, l),
        .keep = any ? keep : NULL,
        .in = ctx->dn_in, .bg = ctx->dn_bg, .qkv = ctx->dn_qkv, .par = ctx->dn_par, .out = ctx->dn_out,
    };
}

struct dstep {
    struct tern_context *ctx;
    const struct model_layer *L;
    const float *taps;
    int n;
    int blocks; /* the DeltaNet's column blocks per head */
};

/* The conv of every sequence's run, a channel range per chunk. */
static void step_conv(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    long long c0, c1;
    tp_split(ctx->rec.conv_dim, chunk, n_chunks, 16, &c0, &c1);
    for (int k = 0; k < ctx->rb_nseqs && c0 < c1; k++)
        rec_conv_run(&ctx->rec, &ctx->rb_run[k], d->taps, ctx->dn_pre, (int)c0, (int)c1);
}

/* The l2 norm and the heads' parameters, a range of rows per chunk. */
static void step_params(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    const struct rec_state *r = &ctx->rec;
    long long lo, hi;
    tp_split(d->n, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = lo; t < hi; t++)
        rec_token_params(r, ctx->dn_qkv + (size_t)t * r->conv_dim, ctx->dn_bg + (size_t)t * 2 * r->n_v,
                         ctx->dn_par + (size_t)t * r->n_v * DELTA_PAR, ctx->model->info.rms_eps);
}

/* Units (sequence of the batch, value head, and a work block of DELTA_BLOCK columns or the whole
 * head): each goes through its sequence's tokens in order. */
static void step_delta(void *arg, int chunk, int n_chunks, int tid)
{
    const struct dstep *d = arg;
    struct tern_context *ctx = d->ctx;
    const struct rec_state *r = &ctx->rec;
    const int blocks = d->blocks, cols = blocks > 1 ? DELTA_BLOCK : r->hv;
    const long long units = (long long)ctx->rb_nseqs * r->n_v * blocks;
    for (long long u = chunk; u < units; u += n_chunks) {
        const int k = (int)(u / ((long long)r->n_v * blocks)), h = (int)(u / blocks % r->n_v);
        const int j0 = (int)(u % blocks) * cols;
        rec_delta_run(r, &ctx->rb_run[k], h, j0, j0 + cols < r->hv ? j0 + cols : r->hv,
                      ctx->dn_work + (size_t)tid * r->hk * DELTA_BLOCK);
    }
}

/* z = SiLU(z) * rmsnorm(o per head) * ssm_norm, per token: ssm_out's input. */
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
            float *z = ctx->dn_z + ((size_t)t * r->n_v + h) * hv;
            fwd_rms_norm_row(o, d->L->ssm_norm.data, o, hv, ctx->model->info.rms_eps);
            ctx->vexp_k.silu_mul(z, o, hv);
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
    /* a long run takes blocks of DELTA_BLOCK through the work buffer, more units than heads;
     * short ones (decode) go over whole rows of the state, a head per unit */
    bool long_run = false;
    for (int k = 0; k < ctx->rb_nseqs; k++) {
        make_run(ctx, k, l, &ctx->rb_run[k]);
        long_run = long_run || ctx->rb_run[k].m > DELTA_WORK_MIN;
    }
    const int blocks = long_run ? (r->hv + DELTA_BLOCK - 1) / DELTA_BLOCK : 1;
    struct dstep ds = {.ctx = ctx, .L = L, .taps = ctx->dn_taps + (size_t)l * r->d_conv * r->conv_dim,
                       .n = n, .blocks = blocks};
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_conv, &ds, fwd_chunks_for(ctx, (r->conv_dim + 15) / 16, 2));
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_params, &ds, fwd_chunks_for(ctx, n, 4));
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_delta, &ds,
                 fwd_chunks_for(ctx, (long long)ctx->rb_nseqs * nv * blocks, 1));
    fwd_run_step(ctx, TERN_PROF_ATTENTION, step_gated_norm, &ds, fwd_chunks_for(ctx, n, 4));
    struct step s = {.ctx = ctx, .n = n, .il = il};
    fwd_ensure_act(ctx, ctx->dn_z, nv * r->hv, n, 0, &L->ssm_out);
    fwd_matmul_residual(ctx, &s, &L->ssm_out, &L->ffn_post_norm);
}
