/* forward.c — the transformer forward pass (llama, qwen2, qwen3, smollm3, phi3, gemma3) over a
 * batch of tokens. What the architectures beyond llama add is decided per layer or per model,
 * outside the inner loops: q/k norms, NoPE layers and the phi3 query prescale in the RoPE step,
 * the sliding window in the attention step (forward reads only the window's keys), gemma3's
 * embedding scale, post-norms (a norm-and-add step after wo / ffn_down) and GELU.
 *
 * Data flow per layer, as in llama.cpp (whose numerics we reproduce so logits match its
 * reference dumps): x -> RMSNorm*w -> q,k,v projections (+bias) -> RoPE -> K,V appended to the
 * F16 cache -> causal attention per head (query rounded to F16, scores in F32, softmax in F32,
 * probabilities rounded to F16 before weighting V) -> wo -> +x -> RMSNorm*w -> SwiGLU FFN -> +x.
 * Every matmul first quantizes its input rows to the weight's "vec_dot_type" (Q8_0, Q8_K, F16,
 * ...) exactly as llama.cpp does, then runs an integer/half dot product kernel (src/kernels).
 *
 * Parallelism: each step is one tp_run over the context's thread pool, cut into a few chunks per
 * thread that threads claim dynamically; matmuls split output rows (in multiples of 16),
 * per-token steps split tokens, attention splits blocks of queries that share a KV head. No
 * mask is ever built: a query at position p simply reads keys 0..p. No step allocates memory. */
#include <math.h>
#include <string.h>

#include "kernels/kern_invariant.h"
#include "kernels/kern_packed.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/forward.h"
#include "quant/quant.h"
#include "util/check.h"
#include "util/error.h"

/* ---------------------------------------------------------------- per-token helpers */

/* y = x / rms(x) * w over n elements (w NULL: no weight, gemma4's v norm); sum of squares in
 * double like ggml_rms_norm. */
/* y = x / sqrt(sum / n + eps) * w, given the row's sum of squares (w NULL: no weight). */
static void rms_scale_row(const float *x, const float *w, float *y, int n, double sum, float eps)
{
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (!w)
        for (int i = 0; i < n; i++) y[i] = x[i] * scale;
    else
        for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void fwd_rms_norm_row(const float *x, const float *w, float *y, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    rms_scale_row(x, w, y, n, sum, eps);
}

/* fwd_rms_norm_row for rows rows of n elements (row r at x + r * n, y + r * n; y may be x), with
 * the bits of calling it per row: each row's double sum still runs in index order, but up to
 * eight rows' chains advance side by side, so the additions no longer wait on each other's
 * latency (one row alone is one chain of n dependent additions). */
void fwd_rms_norm_rows(const float *x, const float *w, float *y, int rows, int n, float eps)
{
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int nr = rows - r0 < 8 ? rows - r0 : 8;
        const float *xr = x + (size_t)r0 * n;
        double sum[8] = {0};
        if (nr == 8) {
            for (int i = 0; i < n; i++)
                for (int r = 0; r < 8; r++) sum[r] += (double)(xr[(size_t)r * n + i] * xr[(size_t)r * n + i]);
        } else {
            for (int i = 0; i < n; i++)
                for (int r = 0; r < nr; r++) sum[r] += (double)(xr[(size_t)r * n + i] * xr[(size_t)r * n + i]);
        }
        for (int r = 0; r < nr; r++) rms_scale_row(xr + (size_t)r * n, w, y + (size_t)(r0 + r) * n, n, sum[r], eps);
    }
}

/* cos/sin pairs for one position: theta_i = pos * base^(-2i/n_rot) built by repeated
 * multiplication in float (ggml's rope cache does the same, and the rounding shows in logits),
 * divided by the frequency factor ff[i] if any (Llama-3 rope_freqs, Phi-3 long-RoPE factors),
 * times the linear scale; cos and sin are multiplied by mscale (long-RoPE magnitude, else 1). */
static void rope_cache_row(int n_rot, float base, float freq_scale, const float *ff, float mscale,
                           int pos, float *cs)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < n_rot / 2; i++) {
        const float t = freq_scale * (ff ? theta / ff[i] : theta);
        cs[2 * i] = cosf(t) * mscale;
        cs[2 * i + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

/* Rotate one head in place. NORM rotates pairs (2i, 2i+1); NEOX rotates (i, i + n_rot/2). */
static void rope_apply(float *x, const float *cs, int n_rot, bool neox)
{
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int i0 = neox ? i : 2 * i;
        const int i1 = neox ? i + half : 2 * i + 1;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
    }
}


/* ---------------------------------------------------------------- profiling */

/* How many chunks to cut a step of `units` independent pieces into: a few per thread, so a
 * thread that is late (descheduled) leaves little for the others to wait on. */
int fwd_chunks_for(const struct tern_context *ctx, long long units, int per_thread)
{
    const long long c = (long long)ctx->n_threads * per_thread;
    if (units < 1) return 1;
    return (int)(units < c ? units : c);
}

/* Chunks for a matmul step over matrices with `rows` output rows (split in multiples of 16). */
static int matmul_chunks(const struct tern_context *ctx, int64_t rows)
{
    return fwd_chunks_for(ctx, (rows + 15) / 16, 4);
}

/* tp_run, timed into op class `op` when the context profiles. */
void fwd_run_step(struct tern_context *ctx, int op, tp_fn fn, void *arg, int n_chunks)
{
    if (!ctx->profile) {
        tp_run(ctx->pool, fn, arg, n_chunks);
        return;
    }
    uint64_t t0 = prof_now_ns();
    tp_run(ctx->pool, fn, arg, n_chunks);
    ctx->prof_ns[op] += prof_now_ns() - t0;
    ctx->prof_calls[op]++;
}

/* One matmul slice; the caller's thread (tid 0) times its slices for the profile. */
static void matmul_slice(struct tern_context *ctx, int tid, const struct model_weight *w,
                         const void *act, int n_tok, long long lo, long long hi, float *out)
{
    const bool timed = ctx->profile && tid == 0;
    const uint64_t t0 = timed ? prof_now_ns() : 0;
    TERN_ASSERT(n_tok >= 1 && n_tok <= ctx->n_batch, "a batch the context's buffers hold");
    TERN_ASSERT(lo >= 0 && lo <= hi && hi <= w->rows, "rows of this weight");
    TERN_ASSERT(w->data && w->cols > 0 && w->row_bytes > 0, "a loaded weight");
    if (ctx->exact_batches && n_tok > 1 && !model_weight_batch_invariant(w)) {
        /* Exact batches: each token through the one-token kernel, so it gets the bits it gets
         * decoded alone. Rows go in blocks of about 128 KiB (a multiple of 16 rows, as the
         * slices are), so every token after the first finds the block in L2 and the weights
         * still come from memory once per batch. */
        long long blk = (long long)((128u << 10) / w->row_bytes) & ~15ll;
        if (blk < 16) blk = 16;
        for (long long r = lo; r < hi; r += blk) {
            const long long e = r + blk < hi ? r + blk : hi;
            for (int t = 0; t < n_tok; t++)
                kern_matmul_packed(w->type, w->data, w->row_bytes, w->packed,
                                   (const char *)act + (size_t)t * ctx->act_stride, ctx->act_stride,
                                   1, w->cols, r, e, out + (size_t)t * w->rows, w->rows);
        }
    } else {
        kern_matmul_packed(w->type, w->data, w->row_bytes, w->packed, act, ctx->act_stride, n_tok,
                           w->cols, lo, hi, out, w->rows);
    }
    if (timed) {
        const int op = prof_matmul_op(w->type);
        TERN_ASSERT(op >= 0 && op < TERN_PROF_COUNT);
        ctx->prof_ns[op] += prof_now_ns() - t0;
        ctx->prof_calls[op]++;
        if (prof_is_fallback(w->type)) ctx->prof_fallbacks[op]++;
    }
}

/* ---------------------------------------------------------------- parallel steps */

/* Quantize rows [row0, n) of src (cols wide) into ctx->act as act_type; rows split by thread. */
static void step_quantize(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    long long lo, hi;
    tp_split(s->n - s->row0, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = s->row0 + lo; t < s->row0 + hi; t++)
        kern_quantize_act(s->act_type, s->src + (size_t)t * s->cols,
                          (char *)ctx->act + (size_t)t * ctx->act_stride, s->cols);
}

/* xn = rmsnorm(src) * norm_w, then quantize xn for act_type. */
static void step_norm_quantize(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    long long lo, hi;
    tp_split(s->n - s->row0, chunk, n_chunks, 1, &lo, &hi);
    for (long long t0 = s->row0 + lo; t0 < s->row0 + hi; t0 += 8) { /* 8 rows' norms side by side */
        const int nr = s->row0 + hi - t0 < 8 ? (int)(s->row0 + hi - t0) : 8;
        fwd_rms_norm_rows(s->src + (size_t)t0 * s->cols, s->norm_w, ctx->xn + (size_t)t0 * s->cols, nr, s->cols,
                          ctx->model->info.rms_eps);
        for (long long t = t0; t < t0 + nr; t++)
            kern_quantize_act(s->act_type, ctx->xn + (size_t)t * s->cols, (char *)ctx->act + (size_t)t * ctx->act_stride,
                              s->cols);
    }
}

/* out[j] = W[j] . act for up to three matrices sharing the same quantized input. Each thread
 * takes a slice of the rows of every matrix; biases are added to its own rows. */
static void step_matmul(void *arg, int chunk, int n_chunks, int tid)
{
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const int rows_n = s->n - s->row0;
    const char *act = (const char *)ctx->act + (size_t)s->row0 * ctx->act_stride;
    for (int j = 0; j < 3 && s->w[j]; j++) {
        const struct model_weight *w = s->w[j];
        long long lo, hi;
        tp_split(w->rows, chunk, n_chunks, 16, &lo, &hi);
        if (lo >= hi) continue;
        float *out = s->out[j]; /* row t of out belongs to batch row row0 + t */
        matmul_slice(ctx, tid, w, act, rows_n, lo, hi, out);
        const struct model_weight *b = s->bias[j];
        if (b && b->data) {
            const float *bv = b->data;
            for (int t = 0; t < rows_n; t++)
                for (long long r = lo; r < hi; r++) out[(size_t)t * w->rows + r] += bv[r];
        }
    }
}

/* x += W . act (wo and ffn_down): the thread that computes a row also adds it. */
static void step_matmul_residual(void *arg, int chunk, int n_chunks, int tid)
{
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const struct model_weight *w = s->w[0];
    long long lo, hi;
    tp_split(w->rows, chunk, n_chunks, 16, &lo, &hi);
    if (lo >= hi) return;
    matmul_slice(ctx, tid, w, ctx->act, s->n, lo, hi, ctx->proj);
    for (int t = 0; t < s->n; t++) {
        float *x = ctx->x + (size_t)t * w->rows;
        const float *p = ctx->proj + (size_t)t * w->rows;
        for (long long r = lo; r < hi; r++) x[r] += p[r];
    }
}

/* x += rmsnorm(proj) * norm_w, per token (gemma3's post-attention and post-FFN norms). */
static void step_norm_add(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    long long lo, hi;
    tp_split(s->n, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = lo; t < hi; t++) {
        float *p = ctx->proj + (size_t)t * s->cols, *x = ctx->x + (size_t)t * s->cols;
        fwd_rms_norm_row(p, s->norm_w, p, s->cols, ctx->model->info.rms_eps);
        for (int i = 0; i < s->cols; i++) x[i] += p[i];
    }
}

/* x += W . act, or with a post-norm x += rmsnorm(W . act) * post (gemma3). */
void fwd_matmul_residual(struct tern_context *ctx, struct step *s, const struct model_weight *w,
                            const struct model_weight *post)
{
    if (!post->data) {
        s->w[0] = w;
        tp_run(ctx->pool, step_matmul_residual, s, matmul_chunks(ctx, w->rows));
        return;
    }
    struct step mm = {.ctx = ctx, .n = s->n, .il = s->il};
    mm.w[0] = w;
    mm.out[0] = ctx->proj;
    tp_run(ctx->pool, step_matmul, &mm, matmul_chunks(ctx, w->rows));
    struct step na = {.ctx = ctx, .n = s->n, .il = s->il, .norm_w = post->data, .cols = (int)w->rows};
    fwd_run_step(ctx, TERN_PROF_NORM_QUANT, step_norm_add, &na, fwd_chunks_for(ctx, s->n, 4));
}

/* x += proj, per token. */
static void step_add(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    long long lo, hi;
    tp_split(s->n, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = lo; t < hi; t++) {
        const float *p = ctx->proj + (size_t)t * s->cols;
        float *x = ctx->x + (size_t)t * s->cols;
        for (int i = 0; i < s->cols; i++) x[i] += p[i];
    }
}

/* fwd_matmul_residual for a matrix with LoRA terms (slot): proj = W . act + the deltas of src
 * (cols wide, the float rows act was quantized from), then x += proj or x += rmsnorm(proj) *
 * post. */
static void matmul_residual_lora(struct tern_context *ctx, struct step *s, const struct model_weight *w,
                                 const struct model_weight *post, const float *src, int cols, int slot)
{
    struct step mm = {.ctx = ctx, .n = s->n, .il = s->il};
    mm.w[0] = w;
    mm.out[0] = ctx->proj;
    tp_run(ctx->pool, step_matmul, &mm, matmul_chunks(ctx, w->rows));
    float *out = ctx->proj;
    lora_add(ctx, &slot, 1, src, cols, s->n, 0, &out);
    struct step na = {.ctx = ctx, .n = s->n, .il = s->il, .norm_w = post->data, .cols = (int)w->rows};
    fwd_run_step(ctx, TERN_PROF_NORM_QUANT, post->data ? step_norm_add : step_add, &na,
                 fwd_chunks_for(ctx, s->n, 4));
}

/* gate = act(gate) * up in columns [lo, hi) of n tokens' rows (n_ff wide): the activation is
 * elementwise, so any split at multiples of 16 gives the bits of a whole row. */
static void ffn_act_cols(struct tern_context *ctx, int n, int64_t n_ff, long long lo, long long hi)
{
    const vexp_silu_mul_fn act = ctx->model->info.ffn_gelu ? ctx->vexp_k.gelu_mul : ctx->vexp_k.silu_mul;
    for (int t = 0; t < n; t++)
        act(ctx->gate + (size_t)t * n_ff + lo, ctx->up + (size_t)t * n_ff + lo, (int)(hi - lo));
}

/* gate, up = W_gate . act, W_up . act; then gate = silu(gate) * up on the thread's own rows. */
static void step_ffn_up(void *arg, int chunk, int n_chunks, int tid)
{
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const struct model_layer *L = &ctx->model->layers[s->il];
    const int64_t n_ff = L->ffn_gate.rows;
    long long lo, hi;
    tp_split(n_ff, chunk, n_chunks, 16, &lo, &hi);
    if (lo >= hi) return;
    matmul_slice(ctx, tid, &L->ffn_gate, ctx->act, s->n, lo, hi, ctx->gate);
    matmul_slice(ctx, tid, &L->ffn_up, ctx->act, s->n, lo, hi, ctx->up);
    const bool timed = ctx->profile && tid == 0;
    const uint64_t t0 = timed ? prof_now_ns() : 0;
    ffn_act_cols(ctx, s->n, n_ff, lo, hi);
    if (timed) {
        ctx->prof_ns[TERN_PROF_FFN_ACT] += prof_now_ns() - t0;
        ctx->prof_calls[TERN_PROF_FFN_ACT]++;
    }
}

/* gate = act(gate) * up for the batch's rows, split by columns as step_ffn_up splits them (so
 * the same bits): where gate and up are not one fused step (the adapters' path, whose deltas go
 * in between the matmuls and the activation; a gate and up of different activation formats).
 * It ran on one thread before, the other waiting about 5 us a layer at n_ff 4864. */
static void step_ffn_act(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const int64_t n_ff = ctx->model->layers[s->il].ffn_gate.rows;
    long long lo, hi;
    tp_split(n_ff, chunk, n_chunks, 16, &lo, &hi);
    if (lo < hi) ffn_act_cols(ctx, s->n, n_ff, lo, hi);
}

/* Per token: the per-head q/k RMSNorm if the model has one (qwen3, gemma3), RoPE on q and k
 * unless the layer has none (smollm3), the phi3 query prescale; then append k and v (as F16) to
 * the cache. Split by token. */
static void step_rope_store(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const struct tern_model *m = ctx->model;
    const struct model_hparams *in = &m->info;
    const struct model_layer *L = &m->layers[s->il];
    const int hd = L->hd, qd = in->n_head * hd, n_kv = L->n_kv, kvd = n_kv * hd, nr = L->n_rot;
    const bool own_kv = L->kv_src == s->il; /* a shared-KV layer only rotates its queries */
    const float *qn = L->q_norm.data, *kn = L->k_norm.data;
    /* the table this layer rotates with has rows of its n_rot (model_load: rope_swa_own) */
    const float *cs_all = L->swa && m->rope_swa_own ? ctx->rope_cs_swa : ctx->rope_cs;
    long long lo, hi;
    tp_split(s->n, chunk, n_chunks, 1, &lo, &hi);
    for (long long t = lo; t < hi; t++) {
        const int pos = ctx->bpos[t], seq = ctx->bseq[t];
        TERN_ASSERT(pos >= 0 && pos < ctx->n_ctx && seq >= 0 && seq < ctx->n_seq, "a KV row of the cache");
        const float *cs = cs_all + (size_t)t * nr;
        float *q = ctx->q + (size_t)t * qd;
        float *k = ctx->k + (size_t)t * kvd;
        float *v = ctx->v + (size_t)t * kvd;
        if (in->attn_gate) {
            /* attn_q's rows alternate per head: q of head h, then its output gate */
            const float *qa = ctx->qaux + (size_t)t * 2 * qd;
            float *ga = ctx->agate + (size_t)t * qd;
            for (int h = 0; h < in->n_head; h++) {
                memcpy(q + h * hd, qa + 2 * h * hd, sizeof(float) * (size_t)hd);
                memcpy(ga + h * hd, qa + (2 * h + 1) * hd, sizeof(float) * (size_t)hd);
            }
        }
        if (qn) fwd_rms_norm_rows(q, qn, q, in->n_head, hd, in->rms_eps);
        if (L->rope)
            for (int h = 0; h < in->n_head; h++) rope_apply(q + h * hd, cs, nr, in->rope_neox);
        if (m->q_prescale)
            for (int j = 0; j < qd; j++) q[j] *= in->attn_scale;
        if (!own_kv) continue;
        if (kn) fwd_rms_norm_rows(k, kn, k, n_kv, hd, in->rms_eps);
        if (in->v_norm) fwd_rms_norm_rows(v, NULL, v, n_kv, hd, in->rms_eps);
        for (int h = 0; h < n_kv; h++) {
            if (L->rope) rope_apply(k + h * hd, cs, nr, in->rope_neox);
            uint16_t *kr = kv_k_row_seq(&ctx->kv, s->il, seq, h, pos);
            uint16_t *vr = kv_v_row_seq(&ctx->kv, s->il, seq, h, pos);
            /* the F16 activation row of the kernels: fp16_from_f32's bits, vectorized */
            kern_quantize_act(TERN_TYPE_F16, k + h * hd, kr, hd);
            kern_quantize_act(TERN_TYPE_F16, v + h * hd, vr, hd);
        }
    }
}

/* attn *= sigmoid(gate), per token (qwen35's gated attention output, as ggml_sigmoid then
 * ggml_mul). */
static void step_attn_gate(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const size_t qd = (size_t)ctx->model->info.n_head * ctx->model->info.head_dim;
    long long lo, hi;
    tp_split(s->n, chunk, n_chunks, 1, &lo, &hi);
    for (size_t i = (size_t)lo * qd; i < (size_t)hi * qd; i++)
        ctx->attn[i] *= 1.0f / (1.0f + expf(-ctx->agate[i]));
}

/* Causal attention in blocks. A unit is (token block, KV head, subgroup of its query heads):
 * up to attn_rows queries that read the same keys, processed together so each K and V row
 * is converted once per block (attn.h). A query at position p attends to keys 0..p of its
 * sequence; its result has the same bits whatever block it landed in. Units are dealt to chunks
 * round-robin, so every chunk gets early (cheap) and late (expensive) tokens alike. */
static void step_attention(void *arg, int chunk, int n_chunks, int tid)
{
    struct step *s = arg;
    struct tern_context *ctx = s->ctx;
    const struct model_hparams *in = &ctx->model->info;
    const struct model_layer *L = &ctx->model->layers[s->il];
    const int hd = L->hd, qd = in->n_head * hd, n_kv = L->n_kv;
    const int group = in->n_head / n_kv, gsz = ctx->attn_gsz;
    const int n_sub = (group + gsz - 1) / gsz;
    const float scale = ctx->model->q_prescale ? 1.0f : in->attn_scale;
    const int win = L->swa ? in->n_swa : 0; /* a query at p sees keys p-win+1 .. p (0: all) */
    const size_t ss = ctx->score_stride;
    float *sc = ctx->scores + (size_t)tid * ctx->attn_rows * ss;
    float *qb = ctx->qr + (size_t)tid * ctx->qr_stride;
    float *tile = qb + (size_t)ctx->attn_rows * hd;
    int nk[ATTN_BLOCK_MAX];
    float *outp[ATTN_BLOCK_MAX];
    const long long per_blk = (long long)n_kv * n_sub;
    const long long n_units = ctx->n_ablk * per_blk;
    for (long long u = chunk; u < n_units; u += n_chunks) {
        const int b = (int)(u / per_blk), kvh = (int)(u % per_blk / n_sub), sub = (int)(u % n_sub);
        const int t0 = ctx->ablk[b], t1 = ctx->ablk[b + 1], seq = ctx->bseq[t0];
        const int h0 = kvh * group + sub * gsz;
        const int h1 = h0 + gsz < (kvh + 1) * group ? h0 + gsz : (kvh + 1) * group;
        int nq = 0;
        /* a block is at most attn_T tokens of one sequence at consecutive positions
         * (attention_blocks), times gsz heads: at most attn_rows <= ATTN_BLOCK_MAX queries */
        TERN_ASSERT(t1 > t0 && (t1 - t0) * (h1 - h0) <= ctx->attn_rows &&
                    ctx->attn_rows <= ATTN_BLOCK_MAX);
        TERN_ASSERT(ctx->bpos[t1 - 1] - ctx->bpos[t0] == t1 - 1 - t0 && ctx->bseq[t1 - 1] == seq &&
                    ctx->bpos[t1 - 1] < ctx->n_ctx);
        for (int t = t0; t < t1; t++)
            for (int h = h0; h < h1; h++, nq++) {
                const float *q = ctx->q + (size_t)t * qd + (size_t)h * hd;
                float *qr = qb + (size_t)nq * hd;
                /* llama.cpp converts the query to F16 for the Q.K product */
                ctx->attn_k.round_f16(q, qr, hd);
                nk[nq] = ctx->bpos[t] + 1;
                outp[nq] = ctx->attn + (size_t)t * qd + (size_t)h * hd;
            }
        /* positions rise through a block: its last token sees the most keys */
        if (!win) {
            ctx->attn_k.bscores(qb, nq, kv_k_row_seq(&ctx->kv, s->il, seq, kvh, 0), nk[nq - 1], hd,
                                scale, sc, ss, tile);
            const int zero[ATTN_BLOCK_MAX] = {0};
            ctx->attn_k.bsoftmax(sc, ss, zero, nk, nq);
            ctx->attn_k.bwsum(sc, ss, nk, nq, kv_v_row_seq(&ctx->kv, s->il, seq, kvh, 0), hd, outp);
            continue;
        }
        /* Sliding window: scores from about the first key any query of the block sees (k0); each
         * query takes the softmax over its own window (summed in key order from its own first
         * key), and the keys before it get weight 0. A query's bits must not depend on the block
         * it landed in (batch = one-token decoding; a restored prefix continues as the cold run):
         * leading zero weights add exact zeros, and with k0 a multiple of 8 every key meets the
         * same accumulator of the weighted sum (the kernels interleave keys by offset from k0, at
         * most 8 ways) whatever block started where. test_arch_parity checks it bit for bit. */
        const int k0 = kv_window_first_key(ctx->bpos[t0], win);
        /* a windowed block still holds the rows from k0 on (kv_win_first_key, win_lo) */
        TERN_ASSERT(!ctx->kv.layer_win[s->il] || (k0 >= ctx->kv.win_lo[seq] && win == ctx->kv.win));
        for (int i = 0; i < nq; i++) nk[i] -= k0;
        ctx->attn_k.bscores(qb, nq, kv_k_row_seq(&ctx->kv, s->il, seq, kvh, k0), nk[nq - 1], hd,
                            scale, sc, ss, tile);
        int skip[ATTN_BLOCK_MAX], nw[ATTN_BLOCK_MAX];
        for (int i = 0; i < nq; i++) {
            skip[i] = nk[i] > win ? nk[i] - win : 0;
            nw[i] = nk[i] - skip[i];
        }
        ctx->attn_k.bsoftmax(sc, ss, skip, nw, nq);
        for (int i = 0; i < nq; i++)
            for (int p = 0; p < skip[i]; p++) sc[i * ss + p] = 0.0f;
        ctx->attn_k.bwsum(sc, ss, nk, nq, kv_v_row_seq(&ctx->kv, s->il, seq, kvh, k0), hd, outp);
    }
}

/* Cut the batch into attention token blocks (ctx->ablk): runs of consecutive positions of one
 * sequence, at most attn_T tokens each. */
static void attention_blocks(struct tern_context *ctx, int n)
{
    int nb = 0;
    for (int t = 0; t < n; t++)
        if (t == 0 || ctx->bseq[t] != ctx->bseq[t - 1] || ctx->bpos[t] != ctx->bpos[t - 1] + 1 ||
            t - ctx->ablk[nb - 1] == ctx->attn_T)
            ctx->ablk[nb++] = t;
    TERN_ASSERT(nb <= ctx->n_batch); /* ablk holds n_batch + 1 */
    ctx->ablk[nb] = n;
    ctx->n_ablk = nb;
}

/* ---------------------------------------------------------------- the pass */

static int act_type_of(const struct model_weight *w)
{
    return quant_traits_get(w->type)->vec_dot_type;
}

/* Quantize src rows [row0, n) for weight w unless ctx->act already holds exactly that. */
void fwd_ensure_act(struct tern_context *ctx, const float *src, int cols, int n, int row0,
                       const struct model_weight *w)
{
    const int at = act_type_of(w);
    TERN_ASSERT(cols == w->cols, "the activation is as wide as the weight's input");
    TERN_ASSERT(row0 >= 0 && row0 <= n && n <= ctx->n_batch);
    if (ctx->act_src == src && ctx->act_type == at) return;
    struct step s = {.ctx = ctx, .n = n, .row0 = row0, .src = src, .cols = cols, .act_type = at};
    fwd_run_step(ctx, TERN_PROF_QUANT, step_quantize, &s, fwd_chunks_for(ctx, n - row0, 4));
    ctx->act_src = src;
    ctx->act_type = at;
}

void fwd_norm_and_quantize(struct tern_context *ctx, const float *src, const float *norm_w,
                              int cols, int n, int row0, const struct model_weight *w)
{
    const int at = act_type_of(w);
    TERN_ASSERT(cols == w->cols, "the activation is as wide as the weight's input");
    TERN_ASSERT(row0 >= 0 && row0 <= n && n <= ctx->n_batch);
    struct step s = {.ctx = ctx, .n = n, .row0 = row0, .src = src, .norm_w = norm_w,
                     .cols = cols, .act_type = at};
    fwd_run_step(ctx, TERN_PROF_NORM_QUANT, step_norm_quantize, &s, fwd_chunks_for(ctx, n - row0, 4));
    ctx->act_src = ctx->xn;
    ctx->act_type = at;
}

void fwd_matmuls(struct tern_context *ctx, int il, const float *src, int cols, int n,
                 const struct model_weight *const *w, float *const *out,
                 const struct model_weight *const *bias, int cnt)
{
    TERN_ASSERT(cnt >= 1 && n >= 1 && n <= ctx->n_batch);
    for (int j = 0; j < cnt; j++)
        TERN_ASSERT(w[j]->cols == cols && out[j], "every matrix of a group reads the same input");
    for (int j = 0; j < cnt;) {
        /* matrices usually share an activation format; group the ones that do, 3 at a time */
        struct step mm = {.ctx = ctx, .n = n, .il = il};
        int at = act_type_of(w[j]), g = 0;
        fwd_ensure_act(ctx, src, cols, n, 0, w[j]);
        while (j < cnt && g < 3 && act_type_of(w[j]) == at) {
            mm.w[g] = w[j];
            mm.out[g] = out[j];
            mm.bias[g] = bias ? bias[j] : NULL;
            g++;
            j++;
        }
        tp_run(ctx->pool, step_matmul, &mm, matmul_chunks(ctx, mm.w[g - 1]->rows));
    }
}

/* Gemma 4's per-layer embeddings, once per batch (ik_llama.cpp build_gemma4): each token's row
 * of per_layer_token_embd (n_layer slices of n_pl) times sqrt(n_pl), plus the projection of the
 * scaled embeddings x by per_layer_model_proj with each slice RMS-normalized (eps x n_embd, as
 * Hugging Face scales the projection by 1/sqrt(n_embd) first), the sum times 1/sqrt(2). Into
 * ctx->ple (n, n_layer * n_pl); ple_tok holds one token's embedding row meanwhile. */
static void per_layer_inputs(struct tern_context *ctx, const int32_t *tokens, int n)
{
    const struct tern_model *m = ctx->model;
    const struct model_hparams *in = &m->info;
    const int n_pl = in->n_embd_per_layer, row = n_pl * in->n_layer;
    fwd_ensure_act(ctx, ctx->x, in->n_embd, n, 0, &m->ple_model_proj);
    struct step mm = {.ctx = ctx, .n = n};
    mm.w[0] = &m->ple_model_proj;
    mm.out[0] = ctx->ple;
    tp_run(ctx->pool, step_matmul, &mm, matmul_chunks(ctx, m->ple_model_proj.rows));
    ctx->act_src = NULL;
    const struct quant_traits *et = quant_traits_get(m->ple_embd.type);
    const float emb_scale = sqrtf((float)n_pl), out_scale = 1.0f / sqrtf(2.0f);
    const float eps = in->rms_eps * (float)in->n_embd;
    for (int t = 0; t < n; t++) {
        float *p = ctx->ple + (size_t)t * row;
        et->to_float((const char *)m->ple_embd.data + (size_t)tokens[t] * m->ple_embd.row_bytes,
                     ctx->ple_tok, row);
        for (int il = 0; il < in->n_layer; il++) {
            const float *e = ctx->ple_tok + (size_t)il * n_pl;
            float *ps = p + (size_t)il * n_pl;
            fwd_rms_norm_row(ps, m->ple_proj_norm.data, ps, n_pl, eps);
            for (int i = 0; i < n_pl; i++) ps[i] = (ps[i] + e[i] * emb_scale) * out_scale;
        }
    }
}

/* The per-layer embedding block after a layer's FFN (gemma4): x += rmsnorm(proj(gelu(gate x) *
 * ple[layer])) * post_norm. */
static void per_layer_block(struct tern_context *ctx, struct step *s)
{
    const struct tern_model *m = ctx->model;
    const struct model_hparams *in = &m->info;
    const struct model_layer *L = &m->layers[s->il];
    const int n = s->n, n_pl = in->n_embd_per_layer;
    fwd_ensure_act(ctx, ctx->x, in->n_embd, n, 0, &L->ple_gate);
    struct step mm = {.ctx = ctx, .n = n, .il = s->il};
    mm.w[0] = &L->ple_gate;
    mm.out[0] = ctx->ple_gate;
    tp_run(ctx->pool, step_matmul, &mm, matmul_chunks(ctx, L->ple_gate.rows));
    ctx->act_src = NULL;
    for (int t = 0; t < n; t++)
        ctx->vexp_k.gelu_mul(ctx->ple_gate + (size_t)t * n_pl,
                             ctx->ple + ((size_t)t * in->n_layer + s->il) * n_pl, n_pl);
    fwd_ensure_act(ctx, ctx->ple_gate, n_pl, n, 0, &L->ple_proj);
    fwd_matmul_residual(ctx, s, &L->ple_proj, &L->ple_post_norm);
    ctx->act_src = NULL;
}

/* Embeddings of the batch's tokens into ctx->x, each token's RoPE table row, the attention
 * blocks (ctx->ablk). */
void fwd_batch_inputs(struct tern_context *ctx, const int32_t *tokens, int n)
{
    const struct tern_model *m = ctx->model;
    const struct model_hparams *in = &m->info;
    const int d = in->n_embd;
    /* every scratch buffer holds n_batch rows; logits rows are a subset of the batch */
    TERN_ASSERT(n > 0 && n <= ctx->n_batch && ctx->n_out >= 0 && ctx->n_out <= n);

    /* Embeddings: dequantize the rows of the looked-up tokens. */
    const uint64_t t_embd = ctx->profile ? prof_now_ns() : 0;
    const struct quant_traits *et = quant_traits_get(m->tok_embd.type);
    for (int t = 0; t < n; t++)
        et->to_float((const char *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes,
                     ctx->x + (size_t)t * d, d);
    if (ctx->lora && lora_slot_used(ctx->lora, lora_slot_embd(m))) /* before the scale, as llama.cpp */
        lora_add_embd(ctx, tokens, n, ctx->x);
    if (in->embd_scale != 1.0f) /* gemma: inputs scaled by sqrt(n_embd), in float as ggml_scale */
        for (size_t i = 0; i < (size_t)n * d; i++) ctx->x[i] *= in->embd_scale;
    for (int t = 0; t < n; t++)
        rope_cache_row(in->n_rot, in->rope_freq_base, in->rope_freq_scale, ctx->rope_ff,
                       in->rope_attn_factor, ctx->bpos[t], ctx->rope_cs + (size_t)t * in->n_rot);
    if (m->rope_swa_own)
        for (int t = 0; t < n; t++)
            rope_cache_row(in->n_rot_swa, in->rope_freq_base_swa, m->rope_scale_swa, ctx->rope_ff_swa,
                           in->rope_attn_factor, ctx->bpos[t],
                           ctx->rope_cs_swa + (size_t)t * in->n_rot_swa);
    if (m->has_rope_still) /* qwen35's 4th M-RoPE section: position 0 for text, no rotation */
        for (int t = 0; t < n; t++)
            for (int i = 0; i < in->n_rot / 2; i++)
                if (m->rope_still[i]) {
                    ctx->rope_cs[(size_t)t * in->n_rot + 2 * i] = in->rope_attn_factor;
                    ctx->rope_cs[(size_t)t * in->n_rot + 2 * i + 1] = 0.0f;
                }
    attention_blocks(ctx, n);
    if (ctx->profile) {
        ctx->prof_ns[TERN_PROF_EMBED] += prof_now_ns() - t_embd;
        ctx->prof_calls[TERN_PROF_EMBED]++;
    }
}

void fwd_layer(struct tern_context *ctx, int il, int n)
{
    const struct tern_model *m = ctx->model;
    const struct model_hparams *in = &m->info;
    const int d = in->n_embd;
    const struct model_layer *L = &m->layers[il];
    struct step s = {.ctx = ctx, .n = n, .il = il};
    TERN_ASSERT(il >= 0 && n >= 1 && n <= ctx->n_batch);
    TERN_ASSERT(L->recurrent || (L->kv_src >= 0 && L->kv_src <= il), "an attention layer reads the KV of itself or an earlier layer");
    /* attached adapters (lora_apply.c); NULL: the plain pass */
    const struct lora_set *lora = il < in->n_layer ? ctx->lora : NULL;
    ctx->act_src = NULL; /* buffers from the previous layer hold other values now */

    if (L->recurrent) {
        delta_layer(ctx, il, n);
        goto ffn;
    }
    /* attention block (qwen35: wq gives q and the output gate, interleaved per head): a
     * shared-KV layer computes q only, a layer whose v is k's projection (gemma4 without
     * attn_v) computes k and copies it */
    fwd_norm_and_quantize(ctx, ctx->x, L->attn_norm.data, d, n, 0, &L->wq);
    {
        const struct model_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *outs[3] = {in->attn_gate ? ctx->qaux : ctx->q, ctx->k, ctx->v};
        const struct model_weight *bias[3] = {&L->bq, &L->bk, &L->bv};
        const int n_mats = L->kv_src != il ? 1 : L->v_is_k ? 2 : 3;
        fwd_matmuls(ctx, il, ctx->xn, d, n, qkv, outs, bias, n_mats);
        if (lora) {
            const int slots[3] = {il * LORA_KINDS + LORA_Q, il * LORA_KINDS + LORA_K, il * LORA_KINDS + LORA_V};
            lora_add(ctx, slots, n_mats, ctx->xn, d, n, 0, outs);
        }
    }
    if (L->v_is_k && L->kv_src == il)
        memcpy(ctx->v, ctx->k, sizeof(float) * (size_t)n * L->n_kv * L->hd);
    fwd_run_step(ctx, TERN_PROF_ROPE_KV, step_rope_store, &s, fwd_chunks_for(ctx, n, 4));
    {
        const int group = in->n_head / L->n_kv;
        const long long units = (long long)L->n_kv * ((group + ctx->attn_gsz - 1) / ctx->attn_gsz);
        fwd_run_step(ctx, TERN_PROF_ATTENTION, step_attention, &s,
                     fwd_chunks_for(ctx, (long long)ctx->n_ablk * units, 16));
    }
    if (in->attn_gate)
        fwd_run_step(ctx, TERN_PROF_ATTENTION, step_attn_gate, &s, fwd_chunks_for(ctx, n, 4));
    fwd_ensure_act(ctx, ctx->attn, in->n_head * L->hd, n, 0, &L->wo);
    if (lora && lora_slot_used(lora, il * LORA_KINDS + LORA_O))
        matmul_residual_lora(ctx, &s, &L->wo, &L->attn_post_norm, ctx->attn, in->n_head * L->hd,
                             il * LORA_KINDS + LORA_O);
    else
        fwd_matmul_residual(ctx, &s, &L->wo, &L->attn_post_norm);

ffn:
    /* feed-forward block (absent in some MTP layers: Qwen3.5-4B/9B) */
    if (!L->ffn_down.data) return;
    fwd_norm_and_quantize(ctx, ctx->x, L->ffn_norm.data, d, n, 0, &L->ffn_gate);
    if (lora && (lora_slot_used(lora, il * LORA_KINDS + LORA_GATE) ||
                 lora_slot_used(lora, il * LORA_KINDS + LORA_UP))) {
        /* the deltas go in before the activation: gate and up whole, then the activation */
        const struct model_weight *gu[2] = {&L->ffn_gate, &L->ffn_up};
        float *const go[2] = {ctx->gate, ctx->up};
        const int slots[2] = {il * LORA_KINDS + LORA_GATE, il * LORA_KINDS + LORA_UP};
        fwd_matmuls(ctx, il, ctx->xn, d, n, gu, go, NULL, 2);
        lora_add(ctx, slots, 2, ctx->xn, d, n, 0, go);
        fwd_run_step(ctx, TERN_PROF_FFN_ACT, step_ffn_act, &s, fwd_chunks_for(ctx, (L->n_ff + 15) / 16, 2));
    } else if (act_type_of(&L->ffn_up) != ctx->act_type) {
        /* rare mixed-format pair: fall back to two separate quantizations */
        struct step g1 = s;
        g1.w[0] = &L->ffn_gate;
        g1.out[0] = ctx->gate;
        g1.w[1] = NULL;
        tp_run(ctx->pool, step_matmul, &g1, matmul_chunks(ctx, g1.w[0]->rows));
        fwd_ensure_act(ctx, ctx->xn, d, n, 0, &L->ffn_up);
        g1.w[0] = &L->ffn_up;
        g1.out[0] = ctx->up;
        tp_run(ctx->pool, step_matmul, &g1, matmul_chunks(ctx, g1.w[0]->rows));
        fwd_run_step(ctx, TERN_PROF_FFN_ACT, step_ffn_act, &s, fwd_chunks_for(ctx, (L->n_ff + 15) / 16, 2));
    } else {
        tp_run(ctx->pool, step_ffn_up, &s, matmul_chunks(ctx, L->ffn_gate.rows));
    }
    ctx->act_src = NULL;
    fwd_ensure_act(ctx, ctx->gate, L->n_ff, n, 0, &L->ffn_down);
    if (lora && lora_slot_used(lora, il * LORA_KINDS + LORA_DOWN))
        matmul_residual_lora(ctx, &s, &L->ffn_down, &L->ffn_post_norm, ctx->gate, L->n_ff,
                             il * LORA_KINDS + LORA_DOWN);
    else
        fwd_matmul_residual(ctx, &s, &L->ffn_down, &L->ffn_post_norm);
    ctx->act_src = NULL;
    if (L->ple_gate.data) per_layer_block(ctx, &s);
    if (L->out_scale != 1.0f)
        for (size_t i = 0; i < (size_t)n * d; i++) ctx->x[i] *= L->out_scale;
}

void fwd_keep_hidden(struct tern_context *ctx, const float *norm_w, int n)
{
    const int d = ctx->model->info.n_embd;
    int p0 = -1, p1 = -1;
    for (int t = 0; t < n; t++) {
        if (ctx->bseq[t] != 0) continue;
        const int p = ctx->bpos[t];
        float *row = ctx->hid + (size_t)(p % ctx->hid_rows) * d;
        if (norm_w) fwd_rms_norm_row(ctx->x + (size_t)t * d, norm_w, row, d, ctx->model->info.rms_eps);
        else memcpy(row, ctx->x + (size_t)t * d, sizeof(float) * (size_t)d);
        if (p0 < 0) p0 = p;
        p1 = p + 1; /* a batch continues each sequence without gaps (check_batch) */
    }
    if (p0 < 0) return;
    /* the rows kept are one run: extended by a batch that starts inside it or right after it,
     * else started afresh. Inside it (after a truncation) the positions below p0 keep their
     * rows only from hid_hi - hid_rows on (the ones before were written over by the positions
     * truncated since), and p1 - hid_rows is applied when read. */
    if (p0 < ctx->hid_lo || p0 > ctx->hid_hi) {
        ctx->hid_lo = p0;
    } else {
        const int held = ctx->hid_hi - ctx->hid_rows > ctx->hid_lo ? ctx->hid_hi - ctx->hid_rows : ctx->hid_lo;
        ctx->hid_lo = held < p0 ? held : p0;
    }
    ctx->hid_hi = p1;
}

/* A pruned head's logits (n_out rows of n_head_ids) into their tokens' places in the logits
 * rows; the tokens the head does not keep get -inf, so no sampler or grammar ever picks them. */
static void spread_head_rows(struct tern_context *ctx)
{
    const struct tern_model *m = ctx->model;
    const size_t V = (size_t)m->info.n_vocab, H = (size_t)m->n_head_ids;
    for (int k = 0; k < ctx->n_out; k++) {
        float *row = ctx->logits + (size_t)k * V;
        const float *src = ctx->head_rows + (size_t)k * H;
        for (size_t i = 0; i < V; i++) row[i] = -INFINITY;
        for (size_t i = 0; i < H; i++) row[m->head_ids[i]] = src[i];
    }
}

void fwd_output_head(struct tern_context *ctx, int n, const struct model_weight *norm,
                     const struct model_weight *output)
{
    const struct model_hparams *in = &ctx->model->info;
    const int d = in->n_embd;
    ctx->n_logits = ctx->n_out;
    if (ctx->n_out == 0) return;
    /* Logits only for the rows asked for (ctx->out_list): gather them into contiguous rows
     * (proj is free by now) unless they already are the tail of the batch. */
    const float *src = ctx->x;
    int row0 = n - ctx->n_out;
    bool tail = true;
    for (int k = 0; k < ctx->n_out && tail; k++) tail = ctx->out_list[k] == row0 + k;
    if (!tail) {
        for (int k = 0; k < ctx->n_out; k++)
            memcpy(ctx->proj + (size_t)k * d, ctx->x + (size_t)ctx->out_list[k] * d, sizeof(float) * d);
        src = ctx->proj;
        row0 = 0;
    }
    const int rows_end = row0 + ctx->n_out;
    if (norm->data) fwd_norm_and_quantize(ctx, src, norm->data, d, rows_end, row0, output);
    else fwd_ensure_act(ctx, src, d, rows_end, row0, output);
    /* a pruned head (model.h head_ids) writes its rows' logits apart, spread below */
    const bool pruned = ctx->model->head_ids && output->data == ctx->model->output.data;
    struct step so = {.ctx = ctx, .n = rows_end, .row0 = row0};
    so.w[0] = output;
    so.out[0] = pruned ? ctx->head_rows : ctx->logits; /* logits row k is out_list[k] */
    tp_run(ctx->pool, step_matmul, &so, matmul_chunks(ctx, output->rows));
    if (pruned) spread_head_rows(ctx);
    if (ctx->lora && output == &ctx->model->output &&
        lora_slot_used(ctx->lora, lora_slot_output(ctx->model))) {
        const int slot = lora_slot_output(ctx->model);
        float *out = ctx->logits;
        lora_add(ctx, &slot, 1, norm->data ? ctx->xn : src, d, rows_end, row0, &out);
    }
    ctx->act_src = NULL;
    if (in->final_softcap > 0.0f) {
        /* gemma4: logits = c * tanh(logits / c), as ggml_softcap(x, 1/c, c) */
        const float before = 1.0f / in->final_softcap, after = in->final_softcap;
        for (size_t i = 0; i < (size_t)ctx->n_out * (size_t)in->n_vocab; i++)
            ctx->logits[i] = after * tanhf(ctx->logits[i] * before);
    }
}

tern_status forward_batch(struct tern_context *ctx, const int32_t *tokens, int n)
{
    const struct tern_model *m = ctx->model;
    const struct model_hparams *in = &m->info;
    TERN_ASSERT(n >= 1 && n <= ctx->n_batch, "tern_decode splits batches to n_batch");
    fwd_batch_inputs(ctx, tokens, n);
    if (in->n_embd_per_layer) per_layer_inputs(ctx, tokens, n);
    if (in->n_layer_rec) rec_batch_begin(ctx, n);
    for (int il = 0; il < in->n_layer; il++) fwd_layer(ctx, il, n);
    if (in->n_layer_rec) rec_batch_end(ctx);
    if (ctx->hid) fwd_keep_hidden(ctx, m->output_norm.data, n);
    fwd_output_head(ctx, n, &m->output_norm, &m->output);
    return TERN_OK;
}
