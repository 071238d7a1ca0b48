/* train_model.c — the trainer's model: weight layout, seeded init, and the forward and backward
 * pass of one micro-batch (read train_internal.h first, then train_ops.h).
 *
 * Per layer (shapes: N rows, D = n_embd, Dq = n_head * hd, Dkv = n_head_kv * hd, F = n_ff):
 *   xn1 = rmsnorm(x) * attn_norm; q, k, v = xn1 . W^T (+ b); RoPE(q, k); o = attn(q, k, v)
 *   xmid = x + o . Wo^T; xn2 = rmsnorm(xmid) * ffn_norm; h = silu(xn2 . Wg^T) * (xn2 . Wu^T)
 *   x' = xmid + h . Wd^T
 * then xf = rmsnorm(x_L) * output_norm and logits = xf . Wout^T, only for the rows whose target
 * is trained on (the loss mask usually leaves most rows out, and the output matmul is the
 * largest one). The backward runs the same steps in reverse. Matmuls are the threaded GEMM;
 * per-row steps are cut into TRAIN_RED_CHUNKS fixed chunks (weight-gradient partials are
 * summed in chunk order), attention into (sequence, head) units, so the result does not depend
 * on the number of threads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/distill.h"
#include "train/train_internal.h"
#include "train/train_ops.h"
#include "util/error.h"
#include "util/fp16.h"

/* ---------------------------------------------------------------- layout */

size_t train_add_tensor(struct tern_trainer *t, const char *name, int64_t cols, int64_t rows,
                        int n_dims)
{
    struct train_tensor *x = &t->tensors[t->n_tensors++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->off = t->n_params;
    x->ne[0] = cols;
    x->ne[1] = rows;
    x->n_dims = n_dims;
    x->decay = n_dims == 2;
    /* each tensor starts on a 64-byte boundary, so GEMM rows of different tensors never share a
     * cache line */
    t->n_params += ((size_t)(cols * rows) + 15) & ~(size_t)15;
    return x->off;
}

tern_status train_layout(struct tern_trainer *t)
{
    if (t->c.lora_rank > 0) return train_lora_create(t);
    t->tensors = calloc((size_t)t->L * 12 + 4, sizeof *t->tensors);
    t->layer = calloc((size_t)t->L, sizeof *t->layer);
    if (!t->tensors || !t->layer) return tern_fail(TERN_ERR_NOMEM, "train: out of memory");
    t->n_params = 0;
    t->tok_embd = train_add_tensor(t, "token_embd.weight", t->D, t->V, 2);
    for (int l = 0; l < t->L; l++) {
        struct train_layer *y = &t->layer[l];
        char n[40];
#define T2(field, suffix, cols, rows)                                                              \
        snprintf(n, sizeof n, "blk.%d." suffix, l);                                                \
        y->field = train_add_tensor(t, n, cols, rows, 2);
#define T1(field, suffix, len)                                                                     \
        snprintf(n, sizeof n, "blk.%d." suffix, l);                                                \
        y->field = train_add_tensor(t, n, len, 1, 1);
        T1(attn_norm, "attn_norm.weight", t->D)
        T2(wq, "attn_q.weight", t->D, t->Dq)
        T2(wk, "attn_k.weight", t->D, t->Dkv)
        T2(wv, "attn_v.weight", t->D, t->Dkv)
        if (t->qkv_bias) {
            T1(bq, "attn_q.bias", t->Dq)
            T1(bk, "attn_k.bias", t->Dkv)
            T1(bv, "attn_v.bias", t->Dkv)
        } else {
            y->bq = y->bk = y->bv = SIZE_MAX;
        }
        T2(wo, "attn_output.weight", t->Dq, t->D)
        T1(ffn_norm, "ffn_norm.weight", t->D)
        T2(gate, "ffn_gate.weight", t->D, t->F)
        T2(up, "ffn_up.weight", t->D, t->F)
        T2(down, "ffn_down.weight", t->F, t->D)
#undef T1
#undef T2
    }
    t->output_norm = train_add_tensor(t, "output_norm.weight", t->D, 1, 1);
    t->output = t->c.tied_output ? t->tok_embd : train_add_tensor(t, "output.weight", t->D, t->V, 2);
    return TERN_OK;
}

/* ---------------------------------------------------------------- init */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t x = *s += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Box-Muller normal from two 53-bit uniforms: the same values on every platform. */
static float normal(uint64_t *s)
{
    const double u1 = ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = (double)(splitmix(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void train_init_weights(struct tern_trainer *t)
{
    if (t->lora) {
        train_lora_init(t);
        return;
    }
    uint64_t s = t->c.seed ^ 0x747261696e696e67ull; /* "training" */
    memset(t->w, 0, t->n_params * sizeof *t->w);
    const float std_out = t->c.init_std_proj >= 0.0f ? t->c.init_std_proj : t->c.init_std;
    for (int i = 0; i < t->n_tensors; i++) {
        const struct train_tensor *x = &t->tensors[i];
        float *p = t->w + x->off;
        const size_t n = (size_t)(x->ne[0] * x->ne[1]);
        if (strstr(x->name, "_norm.")) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (strstr(x->name, ".bias")) {
            /* biases start at zero */
        } else {
            const bool proj = strstr(x->name, "attn_output") || strstr(x->name, "ffn_down");
            const float sd = proj ? std_out : t->c.init_std;
            for (size_t j = 0; j < n; j++) p[j] = normal(&s) * sd;
        }
    }
}

/* ---------------------------------------------------------------- parallel helpers */

void train_par(struct tern_trainer *t, tp_fn fn, void *arg, int n_chunks)
{
    tp_run(t->pool, fn, arg, n_chunks);
}

static void gemm(struct tern_trainer *t, int M, int N, int K, const float *A, ptrdiff_t ars,
                 ptrdiff_t acs, const float *B, ptrdiff_t brs, ptrdiff_t bcs, float *C, ptrdiff_t ldc,
                 bool acc)
{
    struct kern_gemm g = {M, N, K, A, ars, acs, B, brs, bcs, C, ldc, acc};
    kern_gemm_f32_mt(&g, t->path, t->gws, t->pool);
}

/* Y (n, out) (+)= X (n, in) . W^T, W (out, in) */
static void linear_fwd(struct tern_trainer *t, const float *X, int n, int in, const float *W,
                       int out, float *Y, bool acc)
{
    gemm(t, n, out, in, X, in, 1, W, 1, in, Y, out, acc);
}

/* Y1 = X . W1^T and Y2 = X . W2^T (one input, one shape: gate and up), side by side */
static void linear_fwd_pair(struct tern_trainer *t, const float *X, int n, int in, const float *W1,
                            const float *W2, int out, float *Y1, float *Y2)
{
    const struct kern_gemm g1 = {n, out, in, X, in, 1, W1, 1, in, Y1, out, false};
    const struct kern_gemm g2 = {n, out, in, X, in, 1, W2, 1, in, Y2, out, false};
    kern_gemm_f32_mt2(&g1, &g2, t->path, t->gws, t->pool);
}

/* dX (n, in) (+)= dY (n, out) . W ; dW (out, in) += dY^T . X */
static void linear_bwd(struct tern_trainer *t, const float *X, const float *dY, int n, int in,
                       const float *W, float *dW, int out, float *dX, bool acc_dx)
{
    const struct kern_gemm gw = {out, in, n, dY, 1, out, X, in, 1, dW, in, true};
    if (!dX) {
        kern_gemm_f32_mt(&gw, t->path, t->gws, t->pool);
        return;
    }
    /* independent products of the same FLOPs: side by side, one per half of the threads */
    const struct kern_gemm gx = {n, in, out, dY, out, 1, W, in, 1, dX, in, acc_dx};
    kern_gemm_f32_mt2(&gx, &gw, t->path, t->gws, t->pool);
}

struct rows_job {
    struct tern_trainer *t;
    int kind;
    const float *x, *w, *dy;
    float *y, *rstd, *dx;
    float *y2;
    const float *bias;
    int n, d, ld;
    bool neox, inverse;
    const int32_t *pos;
};

enum { JOB_NORM_FWD, JOB_NORM_BWD, JOB_SWIGLU_FWD, JOB_SWIGLU_BWD, JOB_ROPE, JOB_BIAS_FWD,
       JOB_COLSUM };

static void rows_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct rows_job *j = arg;
    long long lo, hi;
    tp_split(j->n, chunk, n_chunks, 1, &lo, &hi);
    const int n = (int)(hi - lo);
    if (n <= 0) {
        if (j->kind == JOB_NORM_BWD || j->kind == JOB_COLSUM)
            memset(j->t->partial + (size_t)chunk * j->d, 0, (size_t)j->d * sizeof(float));
        return;
    }
    const size_t o = (size_t)lo * j->d;
    switch (j->kind) {
    case JOB_NORM_FWD:
        train_rmsnorm_fwd(j->x + o, j->w, j->y + o, j->rstd + lo, n, j->d, j->t->c.rms_eps);
        break;
    case JOB_NORM_BWD: {
        float *dw = j->t->partial + (size_t)chunk * j->d;
        memset(dw, 0, (size_t)j->d * sizeof *dw);
        train_rmsnorm_bwd(j->x + o, j->w, j->rstd + lo, j->dy + o, j->dx + o, dw, n, j->d);
        break;
    }
    case JOB_SWIGLU_FWD:
        train_swiglu_fwd(j->x + o, j->w + o, j->y + o, (size_t)n * j->d);
        break;
    case JOB_SWIGLU_BWD:
        /* x = gate, w = up, dy = dh; y = dgate, y2 = dup (written: zeroed first) */
        memset(j->y + o, 0, (size_t)n * j->d * sizeof(float));
        memset(j->y2 + o, 0, (size_t)n * j->d * sizeof(float));
        train_swiglu_bwd(j->x + o, j->w + o, j->dy + o, j->y + o, j->y2 + o, (size_t)n * j->d);
        break;
    case JOB_ROPE:
        train_rope(j->y + (size_t)lo * j->ld, n, j->ld, j->d, j->t->hd, j->pos + lo, j->t->rope,
                   j->neox, j->inverse);
        break;
    case JOB_BIAS_FWD:
        for (int r = 0; r < n; r++)
            for (int c = 0; c < j->d; c++) j->y[o + (size_t)r * j->d + c] += j->bias[c];
        break;
    case JOB_COLSUM: {
        float *s = j->t->partial + (size_t)chunk * j->d;
        memset(s, 0, (size_t)j->d * sizeof *s);
        for (int r = 0; r < n; r++)
            for (int c = 0; c < j->d; c++) s[c] += j->dy[o + (size_t)r * j->d + c];
        break;
    }
    }
}

/* Sum the per-chunk partials into dst (d floats), in chunk order. */
static void reduce_partials(struct tern_trainer *t, float *dst, int d)
{
    for (int c = 0; c < TRAIN_RED_CHUNKS; c++) {
        const float *p = t->partial + (size_t)c * d;
        for (int i = 0; i < d; i++) dst[i] += p[i];
    }
}

static void run_rows(struct tern_trainer *t, struct rows_job *j)
{
    j->t = t;
    train_par(t, rows_chunk, j, TRAIN_RED_CHUNKS);
}

static void norm_fwd(struct tern_trainer *t, const float *x, const float *w, float *y, float *rstd)
{
    struct rows_job j = {.kind = JOB_NORM_FWD, .x = x, .w = w, .y = y, .rstd = rstd, .n = t->N,
                         .d = t->D};
    run_rows(t, &j);
}

/* dx += rmsnorm backward; dw (the norm weight's gradient) += */
static void norm_bwd(struct tern_trainer *t, const float *x, const float *w, const float *rstd,
                     const float *dy, float *dx, float *dw)
{
    struct rows_job j = {.kind = JOB_NORM_BWD, .x = x, .w = w, .rstd = (float *)rstd, /* read only here */ .dy = dy, .dx = dx,
                         .n = t->N, .d = t->D};
    run_rows(t, &j);
    if (dw) reduce_partials(t, dw, t->D); /* NULL: a frozen norm (LoRA) */
}

static void rope(struct tern_trainer *t, const struct train_batch *b, float *x, int ld, int n_head,
                 bool inverse)
{
    struct rows_job j = {.kind = JOB_ROPE, .y = x, .ld = ld, .d = n_head, .n = t->N,
                         .pos = b->pos, .neox = t->neox, .inverse = inverse};
    run_rows(t, &j);
}

static void bias_fwd(struct tern_trainer *t, float *y, const float *bias, int d)
{
    struct rows_job j = {.kind = JOB_BIAS_FWD, .y = y, .bias = bias, .n = t->N, .d = d};
    run_rows(t, &j);
}

static void bias_bwd(struct tern_trainer *t, const float *dy, float *db, int d)
{
    if (!db) return; /* a frozen bias (LoRA) */
    struct rows_job j = {.kind = JOB_COLSUM, .dy = dy, .n = t->N, .d = d};
    run_rows(t, &j);
    reduce_partials(t, db, d);
}

/* ---------------------------------------------------------------- attention */

struct attn_job {
    struct tern_trainer *t;
    const struct train_batch *b;
    const struct train_layer_act *a;
    bool backward;
};

static void attn_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)n_chunks;
    struct attn_job *j = arg;
    struct tern_trainer *t = j->t;
    const int s = chunk / t->H, h = chunk % t->H, g = h / (t->H / t->Hkv);
    const size_t r0 = (size_t)s * t->T;
    struct train_attn at = {
        .T = t->T, .hd = t->hd, .start = j->b->start + r0, .scale = 1.0f / sqrtf((float)t->hd),
        .q = j->a->q + r0 * t->Dq + (size_t)h * t->hd, .ldq = t->Dq,
        .k = j->a->k + r0 * t->Dkv + (size_t)g * t->hd,
        .v = j->a->v + r0 * t->Dkv + (size_t)g * t->hd, .ldk = t->Dkv,
        .o = j->a->o + r0 * t->Dq + (size_t)h * t->hd,
        .lse = j->a->lse + r0 * t->H + h, .ldl = t->H, .path = t->path,
        .f16_probs = t->infer_numerics};
    float *ws = t->gws + (size_t)tid * t->gws_floats;
    if (!j->backward) {
        train_attn_fwd(&at, ws);
        return;
    }
    const size_t qo = r0 * t->Dq + (size_t)h * t->hd;
    for (int r = 0; r < t->T; r++) {
        memset(t->dkh + qo + (size_t)r * t->Dq, 0, (size_t)t->hd * sizeof(float));
        memset(t->dvh + qo + (size_t)r * t->Dq, 0, (size_t)t->hd * sizeof(float));
    }
    train_attn_bwd(&at, t->dO + qo, t->dq + qo, t->dkh + qo, t->dvh + qo, ws);
}

/* Each thread's slice of gws: attention scratch, then its GEMM workspace (train_attn). */
static void attention(struct tern_trainer *t, const struct train_batch *b,
                      const struct train_layer_act *a, bool backward)
{
    struct attn_job j = {t, b, a, backward};
    train_par(t, attn_chunk, &j, t->n_seq * t->H);
    if (!backward) return;
    /* dk, dv of each KV head = sum over the query heads that share it */
    const int group = t->H / t->Hkv;
    for (int r = 0; r < t->N; r++)
        for (int g = 0; g < t->Hkv; g++)
            for (int c = 0; c < t->hd; c++) {
                float sk = 0.0f, sv = 0.0f;
                for (int h = g * group; h < (g + 1) * group; h++) {
                    sk += t->dkh[(size_t)r * t->Dq + (size_t)h * t->hd + c];
                    sv += t->dvh[(size_t)r * t->Dq + (size_t)h * t->hd + c];
                }
                t->dk[(size_t)r * t->Dkv + (size_t)g * t->hd + c] = sk;
                t->dv[(size_t)r * t->Dkv + (size_t)g * t->hd + c] = sv;
            }
}

/* ---------------------------------------------------------------- forward / backward */

/* A norm or bias vector: the trained weights, or the frozen base's (LoRA). */
static const float *vec(const struct tern_trainer *t, size_t off)
{
    return (t->lora ? t->fz.vec : t->wf) + off;
}

/* Its gradient, or NULL when frozen. */
static float *vec_grad(const struct tern_trainer *t, size_t off)
{
    return t->lora ? NULL : t->g + off;
}

/* Layer l's matrix m (TERN_LORA_*) at offset off of the trained weights, of in columns and out
 * rows: Y (N, out) (+)= X . W^T; with LoRA the frozen matrix plus its adapter. */
static void mat_fwd(struct tern_trainer *t, int l, int m, size_t off, int in, int out,
                    const float *X, float *Y, bool acc)
{
    if (t->lora) train_lora_mat_fwd(t, l, m, X, Y, acc);
    else linear_fwd(t, X, t->N, in, t->wf + off, out, Y, acc);
}

/* dX (N, in) (+)= dY . W and the trained weights' gradients. */
static void mat_bwd(struct tern_trainer *t, int l, int m, size_t off, int in, int out,
                    const float *X, const float *dY, float *dX, bool acc)
{
    if (t->lora) train_lora_mat_bwd(t, l, m, X, dY, dX, acc);
    else linear_bwd(t, X, dY, t->N, in, t->wf + off, t->g + off, out, dX, acc);
}

static void layer_fwd(struct tern_trainer *t, const struct train_batch *b, int l, float *x_out)
{
    const struct train_layer *y = &t->layer[l];
    struct train_layer_act *a = &t->act[l];
    const int N = t->N, D = t->D;
    norm_fwd(t, a->x, vec(t, y->attn_norm), a->xn1, a->rstd1);
    mat_fwd(t, l, TERN_LORA_Q, y->wq, D, t->Dq, a->xn1, a->q, false);
    mat_fwd(t, l, TERN_LORA_K, y->wk, D, t->Dkv, a->xn1, a->k, false);
    mat_fwd(t, l, TERN_LORA_V, y->wv, D, t->Dkv, a->xn1, a->v, false);
    if (t->qkv_bias) {
        bias_fwd(t, a->q, vec(t, y->bq), t->Dq);
        bias_fwd(t, a->k, vec(t, y->bk), t->Dkv);
        bias_fwd(t, a->v, vec(t, y->bv), t->Dkv);
    }
    rope(t, b, a->q, t->Dq, t->H, false);
    rope(t, b, a->k, t->Dkv, t->Hkv, false);
    if (t->infer_numerics) {
        for (size_t i = 0; i < (size_t)N * t->Dq; i++) a->q[i] = fp16_to_f32(fp16_from_f32(a->q[i]));
        for (size_t i = 0; i < (size_t)N * t->Dkv; i++) {
            a->k[i] = fp16_to_f32(fp16_from_f32(a->k[i]));
            a->v[i] = fp16_to_f32(fp16_from_f32(a->v[i]));
        }
    }
    attention(t, b, a, false);
    memcpy(a->xmid, a->x, (size_t)N * D * sizeof(float));
    mat_fwd(t, l, TERN_LORA_O, y->wo, t->Dq, D, a->o, a->xmid, true);
    norm_fwd(t, a->xmid, vec(t, y->ffn_norm), a->xn2, a->rstd2);
    if (t->lora) {
        mat_fwd(t, l, TERN_LORA_GATE, y->gate, D, t->F, a->xn2, a->gate, false);
        mat_fwd(t, l, TERN_LORA_UP, y->up, D, t->F, a->xn2, a->up, false);
    } else {
        linear_fwd_pair(t, a->xn2, N, D, t->wf + y->gate, t->wf + y->up, t->F, a->gate, a->up);
    }
    struct rows_job j = {.kind = JOB_SWIGLU_FWD, .x = a->gate, .w = a->up, .y = a->h, .n = N,
                         .d = t->F};
    run_rows(t, &j);
    memcpy(x_out, a->xmid, (size_t)N * D * sizeof(float));
    mat_fwd(t, l, TERN_LORA_DOWN, y->down, t->F, D, a->h, x_out, true);
}

/* t->dx holds d(loss)/d(layer output); on return d(loss)/d(layer input). */
static void layer_bwd(struct tern_trainer *t, const struct train_batch *b, int l)
{
    const struct train_layer *y = &t->layer[l];
    struct train_layer_act *a = &t->act[l];
    const int D = t->D, F = t->F;
    /* FFN: x' = xmid + h . Wd^T */
    mat_bwd(t, l, TERN_LORA_DOWN, y->down, F, D, a->h, t->dx, t->dh, false);
    struct rows_job j = {.kind = JOB_SWIGLU_BWD, .x = a->gate, .w = a->up, .dy = t->dh,
                         .y = t->dg, .y2 = t->du, .n = t->N, .d = F};
    run_rows(t, &j);
    mat_bwd(t, l, TERN_LORA_GATE, y->gate, D, F, a->xn2, t->dg, t->dxn, false);
    mat_bwd(t, l, TERN_LORA_UP, y->up, D, F, a->xn2, t->du, t->dxn, true);
    norm_bwd(t, a->xmid, vec(t, y->ffn_norm), a->rstd2, t->dxn, t->dx, vec_grad(t, y->ffn_norm));
    /* attention: xmid = x + o . Wo^T */
    mat_bwd(t, l, TERN_LORA_O, y->wo, t->Dq, D, a->o, t->dx, t->dO, false);
    attention(t, b, a, true);
    rope(t, b, t->dq, t->Dq, t->H, true);
    rope(t, b, t->dk, t->Dkv, t->Hkv, true);
    if (t->qkv_bias) {
        bias_bwd(t, t->dq, vec_grad(t, y->bq), t->Dq);
        bias_bwd(t, t->dk, vec_grad(t, y->bk), t->Dkv);
        bias_bwd(t, t->dv, vec_grad(t, y->bv), t->Dkv);
    }
    mat_bwd(t, l, TERN_LORA_Q, y->wq, D, t->Dq, a->xn1, t->dq, t->dxn, false);
    mat_bwd(t, l, TERN_LORA_K, y->wk, D, t->Dkv, a->xn1, t->dk, t->dxn, true);
    mat_bwd(t, l, TERN_LORA_V, y->wv, D, t->Dkv, a->xn1, t->dv, t->dxn, true);
    norm_bwd(t, a->x, vec(t, y->attn_norm), a->rstd1, t->dxn, t->dx, vec_grad(t, y->attn_norm));
}

/* Embedding lookup and all layers; returns x_L (N, D). */
static const float *forward_layers(struct tern_trainer *t, const struct train_batch *b)
{
    const int D = t->D;
    for (int r = 0; r < t->N; r++) {
        if (t->lora) train_qmat_row(&t->fz.embd, b->tok[r], t->act[0].x + (size_t)r * D);
        else memcpy(t->act[0].x + (size_t)r * D, t->wf + t->tok_embd + (size_t)b->tok[r] * D,
                    (size_t)D * sizeof(float));
    }
    for (int l = 0; l < t->L; l++)
        layer_fwd(t, b, l, l + 1 < t->L ? t->act[l + 1].x : t->xL);
    return t->xL;
}

/* logits (n, V) = x (n, D) . Wout^T */
static void out_fwd(struct tern_trainer *t, const float *x, int n, float *logits)
{
    if (t->lora) train_qmat_fwd(t, &t->fz.output, x, n, logits, false);
    else linear_fwd(t, x, n, t->D, t->wf + t->output, t->V, logits, false);
}

struct xent_job {
    struct tern_trainer *t;
    const struct train_batch *b;
    int n;
    double scale;
    double part[TRAIN_RED_CHUNKS];
    /* distillation: KL, CE and top-1 agreements of each chunk */
    double kl[TRAIN_RED_CHUNKS], ce[TRAIN_RED_CHUNKS], agree[TRAIN_RED_CHUNKS];
};

/* The loss of the gathered rows [lo, hi): cross-entropy, or with a teacher signal (t->kd) the
 * recipe's distillation loss (distill_loss.c). Logits become their gradient. */
static void xent_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    struct xent_job *j = arg;
    struct tern_trainer *t = j->t;
    long long lo, hi;
    tp_split(j->n, chunk, n_chunks, 1, &lo, &hi);
    double s = 0.0, kl = 0.0, ce = 0.0, agree = 0.0;
    const struct tern_distill_cache *kd = t->kd;
    const struct tern_distill_recipe *rc = &t->recipe;
    for (long long i = lo; i < hi; i++) {
        const int r = t->rows[i];
        float *l = t->logits + (size_t)i * t->V;
        if (!kd) {
            s += train_xent(l, &j->b->target[r], &j->b->weight[r], 1, t->V, j->scale);
            continue;
        }
        const uint64_t e = (uint64_t)j->b->sig[r];
        struct kd_row o;
        const float w = j->b->weight[r];
        train_kd_row(l, t->V, j->b->target[r], w, kd_ids(kd, e), kd_logp(kd, e), kd_tail(kd, e),
                     (int)kd->k, kd->tau, rc->kd_weight, rc->ce_weight, j->scale,
                     t->kd_scratch + (size_t)tid * t->V, &o);
        const double tau2 = (double)kd->tau * kd->tau;
        s += w * (rc->kd_weight * tau2 * o.kl + rc->ce_weight * o.ce);
        kl += o.kl; /* per trained token, whatever its weight */
        ce += o.ce;
        agree += o.agree;
    }
    j->part[chunk] = s;
    j->kl[chunk] = kl;
    j->ce[chunk] = ce;
    j->agree[chunk] = agree;
}

/* Sum the chunks' losses in chunk order; distillation's KL, CE and agreements go to kd_acc. */
static double xent_total(struct tern_trainer *t, const struct xent_job *j)
{
    double loss = 0.0;
    for (int c = 0; c < TRAIN_RED_CHUNKS; c++) {
        loss += j->part[c];
        if (t->kd) {
            t->kd_acc[0] += j->kl[c];
            t->kd_acc[1] += j->ce[c];
            t->kd_acc[2] += j->agree[c];
        }
    }
    return loss;
}
double train_forward_backward(struct tern_trainer *t, const struct train_batch *b, double scale)
{
    const int D = t->D, N = t->N;
    t->lora_train = true; /* LoRA dropout: training passes only */
    float *xL = (float *)forward_layers(t, b);
    norm_fwd(t, xL, vec(t, t->output_norm), t->xf, t->rstdf);
    int n = 0;
    for (int r = 0; r < N; r++)
        if (b->weight[r] > 0.0f) t->rows[n++] = r;
    for (int i = 0; i < n; i++)
        memcpy(t->xc + (size_t)i * D, t->xf + (size_t)t->rows[i] * D, (size_t)D * sizeof(float));
    double loss = 0.0;
    memset(t->dx, 0, (size_t)N * D * sizeof(float));
    if (n > 0) {
        out_fwd(t, t->xc, n, t->logits);
        struct xent_job xj = {.t = t, .b = b, .n = n, .scale = scale};
        train_par(t, xent_chunk, &xj, TRAIN_RED_CHUNKS);
        loss = xent_total(t, &xj);
        /* dxc = dlogits . Wout (into dxn, gathered), dWout += dlogits^T . xc */
        if (t->lora) train_qmat_bwd(t, &t->fz.output, t->logits, n, t->dxn, false);
        else linear_bwd(t, t->xc, t->logits, n, D, t->wf + t->output, t->g + t->output, t->V,
                        t->dxn, false);
    }
    /* scatter the gathered rows' gradient into a full (N, D) dxf (xf is no longer needed) */
    float *dxf = t->xf;
    memset(dxf, 0, (size_t)N * D * sizeof(float));
    for (int i = 0; i < n; i++)
        memcpy(dxf + (size_t)t->rows[i] * D, t->dxn + (size_t)i * D, (size_t)D * sizeof(float));
    norm_bwd(t, xL, vec(t, t->output_norm), t->rstdf, dxf, t->dx, vec_grad(t, t->output_norm));
    for (int l = t->L - 1; l >= 0; l--) layer_bwd(t, b, l);
    t->lora_train = false;
    /* embedding: scatter-add in row order (deterministic); frozen with LoRA */
    for (int r = 0; !t->lora && r < N; r++) {
        float *ge = t->g + t->tok_embd + (size_t)b->tok[r] * D;
        const float *d = t->dx + (size_t)r * D;
        for (int i = 0; i < D; i++) ge[i] += d[i];
    }
    return loss;
}

double train_forward_loss(struct tern_trainer *t, const struct train_batch *b)
{
    const int D = t->D, N = t->N;
    const float *xL = forward_layers(t, b);
    norm_fwd(t, xL, vec(t, t->output_norm), t->xf, t->rstdf);
    int n = 0;
    for (int r = 0; r < N; r++)
        if (b->weight[r] > 0.0f) t->rows[n++] = r;
    if (n == 0) return 0.0;
    for (int i = 0; i < n; i++)
        memcpy(t->xc + (size_t)i * D, t->xf + (size_t)t->rows[i] * D, (size_t)D * sizeof(float));
    out_fwd(t, t->xc, n, t->logits);
    struct xent_job xj = {.t = t, .b = b, .n = n, .scale = 0.0};
    train_par(t, xent_chunk, &xj, TRAIN_RED_CHUNKS);
    return xent_total(t, &xj);
}

void train_forward_logits(struct tern_trainer *t, const struct train_batch *b, float *out, bool f16)
{
    t->infer_numerics = f16;
    float *xL = (float *)forward_layers(t, b);
    t->infer_numerics = false;
    norm_fwd(t, xL, vec(t, t->output_norm), t->xf, t->rstdf);
    out_fwd(t, t->xf, t->T, out);
}
