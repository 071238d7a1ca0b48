/* train_lora.c — LoRA on a frozen base, the QLoRA recipe: the base GGUF stays mapped in its own
 * tensor types, every product with one of its matrices dequantizes a tile of rows at a time into
 * a small F32 buffer (never the whole matrix, never the whole model), and only the adapters
 * (A, B of each targeted matrix) are trained, so w, g and the AdamW moments are a few MB.
 *
 * A targeted matrix W (n_out, n_in) computes, as PEFT does,
 *     y = W x + s B (A d(x)),   s = alpha / rank,   d = dropout (training steps only)
 * Forward saves u = s A d(x) (N, rank) per matrix; backward, given dy:
 *     dx += dy W + d'(s (dy B) A)     (d': the same mask, scaled by 1 / (1 - p))
 *     dB += dy^T u,   dA += (s dy B)^T d(x)
 * Dropout's mask is a hash of (seed, micro-batch, layer, matrix, row, column), so backward
 * regenerates it instead of storing it, and a resumed run draws the same masks.
 *
 * Products are the trainer's GEMM (kern_gemm_f32_mt), whose sums depend only on K: the forward
 * of a frozen matrix is bit-identical to the F32 product of its dequantized weights, and
 * backward sums its fixed tiles in order, so results do not depend on the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "train/train_internal.h"
#include "util/error.h"

static const char *const base_names[TERN_LORA_N_TARGETS] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

static void target_dims(const struct tern_trainer *t, int m, int *in, int *out)
{
    switch (m) {
    case TERN_LORA_Q: *in = t->D, *out = t->Dq; break;
    case TERN_LORA_K:
    case TERN_LORA_V: *in = t->D, *out = t->Dkv; break;
    case TERN_LORA_O: *in = t->Dq, *out = t->D; break;
    case TERN_LORA_DOWN: *in = t->F, *out = t->D; break;
    default: *in = t->D, *out = t->F; break; /* gate, up */
    }
}

/* ---------------------------------------------------------------- the frozen base */

static tern_status find_mat(struct tern_trainer *t, const char *name, int cols, int rows,
                            struct train_qmat *q)
{
    const struct tern_gguf_tensor *x = tern_gguf_find_tensor(t->fz.g, name);
    if (!x) return tern_fail(TERN_ERR_FORMAT, "lora.base %s: tensor '%s' is missing",
                             t->c.lora_base, name);
    if (x->ne[0] != cols || x->ne[1] != rows || x->ne[2] != 1 || x->ne[3] != 1)
        return tern_fail(TERN_ERR_FORMAT, "lora.base %s: tensor '%s' is %lld x %lld, the model "
                         "needs %d x %d", t->c.lora_base, name, (long long)x->ne[0],
                         (long long)x->ne[1], cols, rows);
    const struct quant_traits *qt = quant_traits_get(x->type);
    if (!qt || !qt->to_float)
        return tern_fail(TERN_ERR_UNSUPPORTED, "lora.base %s: tensor '%s' is %s, which tern "
                         "cannot dequantize", t->c.lora_base, name, tern_type_name(x->type));
    q->type = x->type;
    q->data = x->data;
    q->row_bytes = quant_row_bytes(x->type, cols);
    q->rows = rows;
    q->cols = cols;
    return TERN_OK;
}

/* A norm or bias vector of the base into fz.vec at *used (advanced); its offset. */
static tern_status take_vec(struct tern_trainer *t, const char *name, int len, size_t *off)
{
    struct train_qmat q;
    tern_status st = find_mat(t, name, len, 1, &q);
    if (st) return st;
    *off = t->fz.n_vec;
    quant_traits_get(q.type)->to_float(q.data, t->fz.vec + t->fz.n_vec, len);
    for (int i = 0; i < len; i++)
        if (!isfinite(t->fz.vec[t->fz.n_vec + i]))
            return tern_fail(TERN_ERR_FORMAT, "lora.base %s: tensor '%s' element %d is not "
                             "finite", t->c.lora_base, name, i);
    t->fz.n_vec += (size_t)len;
    return TERN_OK;
}

/* Every tensor of the base is one the trainer computes with: a model with parts the trainer
 * would skip would train adapters for something other than what runs. */
static tern_status check_all_used(struct tern_trainer *t)
{
    const struct tern_gguf *g = t->fz.g;
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *x = tern_gguf_tensor(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(x->name.len < 127 ? x->name.len : 127),
                 x->name.ptr);
        bool ok = !strcmp(name, "token_embd.weight") || !strcmp(name, "output_norm.weight") ||
                  (!t->c.tied_output && !strcmp(name, "output.weight"));
        int b, len = 0;
        char rest[96];
        if (!ok && sscanf(name, "blk.%d.%95s%n", &b, rest, &len) == 2 && b >= 0 && b < t->L) {
            static const char *const parts[] = {"attn_norm.weight", "attn_q.weight",
                "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
                "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
            for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) ok |= !strcmp(rest, parts[k]);
            if (t->qkv_bias)
                ok |= !strcmp(rest, "attn_q.bias") || !strcmp(rest, "attn_k.bias") ||
                      !strcmp(rest, "attn_v.bias");
        }
        if (!ok)
            return tern_fail(TERN_ERR_UNSUPPORTED, "lora.base %s: tensor '%s' is not part of the "
                             "model the trainer computes", t->c.lora_base, name);
    }
    return TERN_OK;
}

tern_status train_lora_create(struct tern_trainer *t)
{
    const struct tern_train_config *c = &t->c;
    if (c->lora_rank < 1 || c->lora_rank > 1024)
        return tern_fail(TERN_ERR_ARG, "train: LoRA rank %d is outside [1, 1024]", c->lora_rank);
    if (!c->lora_targets || c->lora_targets >> TERN_LORA_N_TARGETS)
        return tern_fail(TERN_ERR_ARG, "train: LoRA targets 0x%x: give some of q, k, v, o, gate, "
                         "up, down", c->lora_targets);
    if (!(c->lora_dropout >= 0.0f && c->lora_dropout < 1.0f) || !(c->lora_alpha > 0.0f))
        return tern_fail(TERN_ERR_ARG, "train: LoRA dropout %g must be in [0, 1) and alpha %g > 0",
                         c->lora_dropout, c->lora_alpha);
    /* the config's shape must be the base's (a config parsed with "lora" took it from there) */
    struct tern_train_config b = *c;
    tern_status st = train_shape_from_gguf(c->lora_base, "lora.base", &b);
    if (st) return st;
    const int mine[] = {c->arch, c->n_embd, c->n_layer, c->n_head, c->n_head_kv, c->n_ff,
                        c->n_vocab, c->tied_output};
    const int base[] = {b.arch, b.n_embd, b.n_layer, b.n_head, b.n_head_kv, b.n_ff, b.n_vocab,
                        b.tied_output};
    static const char *const what[] = {"arch", "n_embd", "n_layer", "n_head", "n_head_kv",
                                       "n_ff", "n_vocab", "tied_output"};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++)
        if (mine[i] != base[i])
            return tern_fail(TERN_ERR_ARG, "train: the config has %s %d, lora.base %s has %d",
                             what[i], mine[i], c->lora_base, base[i]);
    t->lora = true;
    t->lora_scale = c->lora_alpha / (float)c->lora_rank;
    if ((st = tern_gguf_open(c->lora_base, &t->fz.g)))
        return tern_fail_prefix(st, "lora.base %s: ", c->lora_base);
    if ((st = check_all_used(t))) return st;
    t->tensors = calloc((size_t)t->L * 2 * TERN_LORA_N_TARGETS + 1, sizeof *t->tensors);
    t->layer = calloc((size_t)t->L, sizeof *t->layer);
    t->fz.mat = calloc((size_t)t->L * TERN_LORA_N_TARGETS, sizeof *t->fz.mat);
    t->fz.vec = malloc(((size_t)t->L * (2 * t->D + t->Dq + 2 * t->Dkv) + t->D) * sizeof(float));
    t->lora_u = calloc((size_t)t->L, sizeof *t->lora_u);
    if (!t->tensors || !t->layer || !t->fz.mat || !t->fz.vec || !t->lora_u)
        return tern_fail(TERN_ERR_NOMEM, "train: out of memory");
    const int r = c->lora_rank;
    char n[96];
    t->n_params = 0;
    for (int l = 0; !st && l < t->L; l++) {
        struct train_layer *y = &t->layer[l];
        y->bq = y->bk = y->bv = SIZE_MAX;
        y->wq = y->wk = y->wv = y->wo = y->gate = y->up = y->down = SIZE_MAX;
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        st = take_vec(t, n, t->D, &y->attn_norm);
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l);
        if (!st) st = take_vec(t, n, t->D, &y->ffn_norm);
        if (!st && t->qkv_bias) {
            snprintf(n, sizeof n, "blk.%d.attn_q.bias", l);
            st = take_vec(t, n, t->Dq, &y->bq);
            snprintf(n, sizeof n, "blk.%d.attn_k.bias", l);
            if (!st) st = take_vec(t, n, t->Dkv, &y->bk);
            snprintf(n, sizeof n, "blk.%d.attn_v.bias", l);
            if (!st) st = take_vec(t, n, t->Dkv, &y->bv);
        }
        for (int m = 0; !st && m < TERN_LORA_N_TARGETS; m++) {
            int in, out;
            target_dims(t, m, &in, &out);
            snprintf(n, sizeof n, "blk.%d.%s.weight", l, base_names[m]);
            st = find_mat(t, n, in, out, &t->fz.mat[(size_t)l * TERN_LORA_N_TARGETS + m]);
            y->lora_a[m] = y->lora_b[m] = SIZE_MAX;
            if (st || !(c->lora_targets >> m & 1)) continue;
            char an[64];
            snprintf(an, sizeof an, "blk.%d.%s.weight.lora_a", l, base_names[m]);
            y->lora_a[m] = train_add_tensor(t, an, in, r, 2);
            snprintf(an, sizeof an, "blk.%d.%s.weight.lora_b", l, base_names[m]);
            y->lora_b[m] = train_add_tensor(t, an, r, out, 2);
        }
    }
    if (!st) st = take_vec(t, "output_norm.weight", t->D, &t->output_norm);
    if (!st) st = find_mat(t, "token_embd.weight", t->D, t->V, &t->fz.embd);
    if (!st && !c->tied_output) st = find_mat(t, "output.weight", t->D, t->V, &t->fz.output);
    if (st) return st;
    if (c->tied_output) t->fz.output = t->fz.embd;
    t->tok_embd = t->output = SIZE_MAX;
    /* scratch: u of every adapted matrix, dropout(x), the adapter path's gradient, one tile */
    const size_t N = (size_t)t->N;
    int max_in = t->D > t->Dq ? t->D : t->Dq;
    if (t->F > max_in) max_in = t->F;
    for (int l = 0; l < t->L; l++)
        if (!(t->lora_u[l] = calloc(N * r * TERN_LORA_N_TARGETS, sizeof(float))))
            return tern_fail(TERN_ERR_NOMEM, "train: out of memory");
    t->lora_xd = calloc(N * (size_t)max_in, sizeof(float));
    t->lora_du = calloc(N * (size_t)r, sizeof(float));
    /* a tile of at least 4 MiB and 512 rows of the widest matrix. The backward's products
     * take a tile's rows as their depth K and add into all of dX per tile: with 1 MiB tiles,
     * Qwen2.5-0.5B's ffn_down (4864 columns) came in tiles of 53 rows, so dX (n x 4864) was read
     * and written 17 times at K = 53, and LoRA ran at 63-65 tokens/s on 2 Zen 3 cores, 71-73
     * with these tiles (10 MiB there: 2.5 M floats) */
    const int widest = t->F > t->D ? t->F : t->D;
    t->qtile_floats = (size_t)1 << 20;
    if (t->qtile_floats < (size_t)512 * widest) t->qtile_floats = (size_t)512 * widest;
    if (posix_memalign((void **)&t->qtile, 64, t->qtile_floats * sizeof(float))) t->qtile = NULL;
    if (!t->lora_xd || !t->lora_du || !t->qtile)
        return tern_fail(TERN_ERR_NOMEM, "train: out of memory");
    return TERN_OK;
}

void train_lora_free(struct tern_trainer *t)
{
    if (t->fz.g) tern_gguf_close(t->fz.g);
    free(t->fz.vec);
    free(t->fz.mat);
    if (t->lora_u)
        for (int l = 0; l < t->L; l++) free(t->lora_u[l]);
    free(t->lora_u);
    free(t->lora_xd);
    free(t->lora_du);
    free(t->qtile);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void train_lora_init(struct tern_trainer *t)
{
    memset(t->w, 0, t->n_params * sizeof *t->w);
    for (int l = 0; l < t->L; l++)
        for (int m = 0; m < TERN_LORA_N_TARGETS; m++) {
            const size_t a = t->layer[l].lora_a[m];
            if (a == SIZE_MAX) continue;
            int in, out;
            target_dims(t, m, &in, &out);
            const double bound = 1.0 / sqrt((double)in);
            uint64_t s = mix(t->c.seed ^ 0x6c6f7261ull /* "lora" */) ^ ((uint64_t)l << 8 | (uint64_t)m);
            for (size_t i = 0; i < (size_t)in * t->c.lora_rank; i++) {
                s = mix(s);
                const double u = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
                t->w[a + i] = (float)((2.0 * u - 1.0) * bound);
            }
        }
}

/* ---------------------------------------------------------------- frozen products */

struct deq_job {
    const struct train_qmat *W;
    int r0, nr;
    float *dst;
};

static void deq_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct deq_job *j = arg;
    long long lo, hi;
    tp_split(j->nr, chunk, n_chunks, 1, &lo, &hi);
    const struct quant_traits *q = quant_traits_get(j->W->type);
    for (long long r = lo; r < hi; r++)
        q->to_float(j->W->data + (size_t)(j->r0 + r) * j->W->row_bytes,
                    j->dst + (size_t)r * j->W->cols, j->W->cols);
}

/* Rows [r0, r0 + nr) of W as F32: the mapped bytes themselves for an F32 base, else a tile
 * dequantized into t->qtile by all threads. */
static const float *tile(struct tern_trainer *t, const struct train_qmat *W, int r0, int nr)
{
    if (W->type == TERN_TYPE_F32) return (const float *)(W->data + (size_t)r0 * W->row_bytes);
    struct deq_job j = {W, r0, nr, t->qtile};
    train_par(t, deq_chunk, &j, t->n_threads);
    return t->qtile;
}

static int tile_rows(const struct tern_trainer *t, const struct train_qmat *W)
{
    int rt = (int)(t->qtile_floats / (size_t)W->cols);
    return rt < W->rows ? rt : W->rows;
}

void train_qmat_fwd(struct tern_trainer *t, const struct train_qmat *W, const float *X, int n,
                    float *Y, bool acc)
{
    const int rt = tile_rows(t, W);
    for (int r0 = 0; r0 < W->rows; r0 += rt) {
        const int nr = W->rows - r0 < rt ? W->rows - r0 : rt;
        const float *B = tile(t, W, r0, nr);
        struct kern_gemm g = {n, nr, W->cols, X, W->cols, 1, B, 1, W->cols, Y + r0, W->rows, acc};
        kern_gemm_f32_mt(&g, t->path, t->gws, t->pool);
    }
}

void train_qmat_bwd(struct tern_trainer *t, const struct train_qmat *W, const float *dY, int n,
                    float *dX, bool acc)
{
    const int rt = tile_rows(t, W);
    for (int r0 = 0; r0 < W->rows; r0 += rt) {
        const int nr = W->rows - r0 < rt ? W->rows - r0 : rt;
        const float *B = tile(t, W, r0, nr);
        struct kern_gemm g = {n, W->cols, nr, dY + r0, W->rows, 1, B, W->cols, 1, dX, W->cols,
                              acc || r0 > 0};
        kern_gemm_f32_mt(&g, t->path, t->gws, t->pool);
    }
}

void train_qmat_row(const struct train_qmat *W, int row, float *out)
{
    quant_traits_get(W->type)->to_float(W->data + (size_t)row * W->row_bytes, out, W->cols);
}

/* ---------------------------------------------------------------- adapters */

static void gemm(struct tern_trainer *t, int M, int N, int K, const float *A, ptrdiff_t ars,
                 ptrdiff_t acs, const float *B, ptrdiff_t brs, ptrdiff_t bcs, float *C,
                 ptrdiff_t ldc, bool acc)
{
    struct kern_gemm g = {M, N, K, A, ars, acs, B, brs, bcs, C, ldc, acc};
    kern_gemm_f32_mt(&g, t->path, t->gws, t->pool);
}

/* dropout over (N, in): dst = src * keep / (1 - p), keep drawn from (seed, micro-batch, l, m,
 * row, column); with add, dst += that instead (the backward masks a gradient the same way). */
struct drop_job {
    const struct tern_trainer *t;
    int l, m, in;
    const float *src;
    float *dst;
    bool add;
};

static void drop_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct drop_job *j = arg;
    const struct tern_trainer *t = j->t;
    long long lo, hi;
    tp_split(t->N, chunk, n_chunks, 1, &lo, &hi);
    const float p = t->c.lora_dropout, keep_scale = 1.0f / (1.0f - p);
    const uint64_t cut = (uint64_t)((double)p * 18446744073709551616.0);
    const uint64_t key = mix(mix(t->c.seed ^ 0x64726f70ull /* "drop" */) ^ t->lora_mb) ^
                         ((uint64_t)j->l << 40 | (uint64_t)j->m << 32);
    for (long long r = lo; r < hi; r++) {
        const uint64_t rk = mix(key ^ (uint64_t)r);
        const float *s = j->src + (size_t)r * j->in;
        float *d = j->dst + (size_t)r * j->in;
        for (int c = 0; c < j->in; c++) {
            const float v = mix(rk + (uint64_t)c) >= cut ? s[c] * keep_scale : 0.0f;
            if (j->add) d[c] += v;
            else d[c] = v;
        }
    }
}

static void dropout(struct tern_trainer *t, int l, int m, int in, const float *src, float *dst,
                    bool add)
{
    struct drop_job j = {t, l, m, in, src, dst, add};
    train_par(t, drop_chunk, &j, TRAIN_RED_CHUNKS);
}

static bool dropping(const struct tern_trainer *t)
{
    return t->lora_train && t->c.lora_dropout > 0.0f;
}

void train_lora_mat_fwd(struct tern_trainer *t, int l, int m, const float *X, float *Y, bool acc)
{
    const struct train_qmat *W = &t->fz.mat[(size_t)l * TERN_LORA_N_TARGETS + m];
    train_qmat_fwd(t, W, X, t->N, Y, acc);
    const size_t a = t->layer[l].lora_a[m], b = t->layer[l].lora_b[m];
    if (a == SIZE_MAX) return;
    const int r = t->c.lora_rank, in = W->cols, out = W->rows, N = t->N;
    const float *xa = X;
    if (dropping(t)) {
        dropout(t, l, m, in, X, t->lora_xd, false);
        xa = t->lora_xd;
    }
    float *u = t->lora_u[l] + (size_t)m * N * r;
    gemm(t, N, r, in, xa, in, 1, t->w + a, 1, in, u, r, false); /* u = d(x) A^T */
    for (size_t i = 0; i < (size_t)N * r; i++) u[i] *= t->lora_scale;
    gemm(t, N, out, r, u, r, 1, t->w + b, 1, r, Y, out, true); /* y += u B^T */
}

void train_lora_mat_bwd(struct tern_trainer *t, int l, int m, const float *X, const float *dY,
                        float *dX, bool acc)
{
    const struct train_qmat *W = &t->fz.mat[(size_t)l * TERN_LORA_N_TARGETS + m];
    if (dX) train_qmat_bwd(t, W, dY, t->N, dX, acc);
    const size_t a = t->layer[l].lora_a[m], b = t->layer[l].lora_b[m];
    if (a == SIZE_MAX) return;
    const int r = t->c.lora_rank, in = W->cols, out = W->rows, N = t->N;
    const float *u = t->lora_u[l] + (size_t)m * N * r;
    float *du = t->lora_du;
    gemm(t, N, r, out, dY, out, 1, t->w + b, r, 1, du, r, false);  /* dy B */
    gemm(t, out, r, N, dY, 1, out, u, r, 1, t->g + b, r, true);    /* dB += dy^T u */
    for (size_t i = 0; i < (size_t)N * r; i++) du[i] *= t->lora_scale;
    const bool drop = dropping(t);
    const float *xa = X;
    if (drop) {
        dropout(t, l, m, in, X, t->lora_xd, false);
        xa = t->lora_xd;
    }
    gemm(t, r, in, N, du, 1, r, xa, in, 1, t->g + a, in, true);    /* dA += du^T d(x) */
    if (!dX) return;
    if (!drop) {
        gemm(t, N, in, r, du, r, 1, t->w + a, in, 1, dX, in, true); /* dx += du A */
        return;
    }
    gemm(t, N, in, r, du, r, 1, t->w + a, in, 1, t->lora_xd, in, false);
    dropout(t, l, m, in, t->lora_xd, dX, true);                    /* dx += d'(du A) */
}

/* ---------------------------------------------------------------- export */

tern_status train_lora_export(const struct tern_trainer *t, const char *path)
{
    struct tern_lora_tensor *x = calloc((size_t)t->L * TERN_LORA_N_TARGETS, sizeof *x);
    char(*names)[64] = calloc((size_t)t->L * TERN_LORA_N_TARGETS, sizeof *names);
    if (!x || !names) {
        free(x), free(names);
        return tern_fail(TERN_ERR_NOMEM, "export: out of memory");
    }
    int n = 0;
    for (int l = 0; l < t->L; l++)
        for (int m = 0; m < TERN_LORA_N_TARGETS; m++) {
            if (t->layer[l].lora_a[m] == SIZE_MAX) continue;
            int in, out;
            target_dims(t, m, &in, &out);
            snprintf(names[n], sizeof names[n], "blk.%d.%s.weight", l, base_names[m]);
            x[n] = (struct tern_lora_tensor){names[n], t->c.lora_rank, in, out,
                                             t->w + t->layer[l].lora_a[m],
                                             t->w + t->layer[l].lora_b[m]};
            n++;
        }
    /* the run's metadata and the chat template the adapter was trained with */
    const char **kv = calloc((size_t)(2 * t->n_meta + 2), sizeof *kv);
    char *tmpl = NULL;
    tern_status st = kv ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "export: out of memory");
    int n_kv = 0;
    for (int i = 0; kv && i < t->n_meta; i++) {
        kv[2 * n_kv] = t->meta[2 * i];
        kv[2 * n_kv + 1] = t->meta[2 * i + 1];
        n_kv++;
    }
    if (!st && t->c.chat_template_file[0]) {
        FILE *f = fopen(t->c.chat_template_file, "rb");
        long len = -1;
        if (f && !fseek(f, 0, SEEK_END) && (len = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
            (tmpl = malloc((size_t)len + 1)) && fread(tmpl, 1, (size_t)len, f) == (size_t)len) {
            tmpl[len] = '\0';
            kv[2 * n_kv] = "tokenizer.chat_template";
            kv[2 * n_kv + 1] = tmpl;
            n_kv++;
        } else {
            st = tern_fail(TERN_ERR_IO, "export: cannot read chat_template_file %s",
                           t->c.chat_template_file);
        }
        if (f) fclose(f);
    }
    if (!st)
        st = tern_lora_write_kv(path, t->c.arch == TERN_ARCH_QWEN2 ? "qwen2" : "llama",
                                t->c.lora_alpha, x, n, "f32", kv, n_kv);
    free(tmpl);
    free(kv);
    free(x);
    free(names);
    if (st) tern_fail_prefix(st, "export %s: ", path);
    return st;
}

tern_status tern_trainer_load_adapter(struct tern_trainer *t, const char *path)
{
    if (!t->lora)
        return tern_fail(TERN_ERR_ARG, "adapter %s: the trainer is not a LoRA run", path);
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g);
    if (st) return tern_fail_prefix(st, "adapter %s: ", path);
    float alpha = 0.0f;
    struct tern_str ty;
    if (tern_gguf_get_str(g, "adapter.type", &ty) || ty.len != 4 || memcmp(ty.ptr, "lora", 4))
        st = tern_fail(TERN_ERR_FORMAT, "adapter %s: not a LoRA adapter (adapter.type)", path);
    else if (tern_gguf_get_f32(g, "adapter.lora.alpha", &alpha) || alpha != t->c.lora_alpha)
        st = tern_fail(TERN_ERR_ARG, "adapter %s: alpha %g, the run's is %g", path, alpha,
                       t->c.lora_alpha);
    int found = 0;
    for (int i = 0; !st && i < t->n_tensors; i++) {
        const struct train_tensor *x = &t->tensors[i];
        const struct tern_gguf_tensor *a = tern_gguf_find_tensor(g, x->name);
        if (!a) {
            st = tern_fail(TERN_ERR_FORMAT, "adapter %s: tensor '%s' is missing (the run adapts "
                           "it)", path, x->name);
            break;
        }
        if (a->ne[0] != x->ne[0] || a->ne[1] != x->ne[1] || a->ne[2] != 1 || a->ne[3] != 1) {
            st = tern_fail(TERN_ERR_ARG, "adapter %s: tensor '%s' is %lld x %lld, the run's is "
                           "%lld x %lld (another rank or base)", path, x->name,
                           (long long)a->ne[0], (long long)a->ne[1], (long long)x->ne[0],
                           (long long)x->ne[1]);
            break;
        }
        const size_t row = quant_row_bytes(a->type, x->ne[0]);
        for (int64_t r = 0; !st && r < x->ne[1]; r++)
            st = tern_dequantize_row(a->type, (const unsigned char *)a->data + (size_t)r * row,
                                     t->w + x->off + r * x->ne[0], x->ne[0]);
        found++;
    }
    if (!st && tern_gguf_n_tensors(g) != found)
        st = tern_fail(TERN_ERR_ARG, "adapter %s: %lld tensors, the run trains %d (other "
                       "targets)", path, (long long)tern_gguf_n_tensors(g), found);
    tern_gguf_close(g);
    return st;
}
