/* train_optim.c — the trainer object and its optimizer step: allocation (refused up front when
 * it does not fit in memory), gradient accumulation over micro-batches, global-norm clipping,
 * AdamW with decoupled weight decay on matrices, and the warmup + cosine learning rate.
 *
 * A step first fills all of its micro-batches (so the loss can be normalized by the masked
 * tokens of the whole step, as one big batch would be), then runs forward/backward on each,
 * accumulating gradients. A NaN or Inf loss or gradient norm leaves weights, moments, step and
 * data position as they were before the step, so the last checkpoint and the weights in memory
 * stay good. Sums of squares are taken in fixed chunks in double: the same bits for any thread
 * count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/distill.h"
#include "tern_gguf.h"
#include "train/train_internal.h"
#include "train/train_ops.h"
#include "util/error.h"

struct tern_train_config tern_train_config_default(void)
{
    struct tern_train_config c;
    memset(&c, 0, sizeof c);
    c.arch = TERN_ARCH_LLAMA;
    c.n_embd = 256;
    c.n_layer = 4;
    c.n_head = 4;
    c.n_head_kv = 4;
    c.n_ff = 768;
    c.n_ctx = 256;
    c.n_vocab = 0;
    c.rope_base = 10000.0f;
    c.rms_eps = 1e-5f;
    c.tied_output = true;
    c.lr = 1e-3f;
    c.lr_min = 1e-4f;
    c.warmup = 100;
    c.steps = 1000;
    c.batch_tokens = 0; /* = n_ctx */
    c.accum = 1;
    c.weight_decay = 0.1f;
    c.beta1 = 0.9f;
    c.beta2 = 0.95f;
    c.adam_eps = 1e-8f;
    c.clip = 1.0f;
    c.init_std = 0.02f;
    c.init_std_proj = -1.0f; /* = init_std */
    c.seed = 1;
    c.threads = 0;
    c.ckpt_every = 0;
    return c;
}

double tern_train_lr(const struct tern_train_config *c, int step)
{
    if (c->warmup > 0 && step <= c->warmup) return (double)c->lr * step / c->warmup;
    const int span = c->steps - c->warmup;
    if (span <= 0) return c->lr;
    double f = (double)(step - c->warmup) / span;
    if (f > 1.0) f = 1.0;
    return c->lr_min + 0.5 * ((double)c->lr - c->lr_min) * (1.0 + cos(3.141592653589793 * f));
}

/* ---------------------------------------------------------------- sizes */

static tern_status check_shape(const struct tern_train_config *c)
{
    if (c->n_embd < 1 || c->n_layer < 1 || c->n_head < 1 || c->n_ff < 1 || c->n_ctx < 2 ||
        c->n_vocab < 2)
        return tern_fail(TERN_ERR_ARG, "train config: n_embd, n_layer, n_head, n_ff must be >= 1, "
                         "n_ctx and n_vocab >= 2 (got %d, %d, %d, %d, %d, %d)", c->n_embd,
                         c->n_layer, c->n_head, c->n_ff, c->n_ctx, c->n_vocab);
    if (c->n_embd % c->n_head || (c->n_embd / c->n_head) % 2)
        return tern_fail(TERN_ERR_ARG, "train config: n_embd %d must be n_head %d times an even "
                         "head size", c->n_embd, c->n_head);
    if (c->n_head_kv < 1 || c->n_head % c->n_head_kv)
        return tern_fail(TERN_ERR_ARG, "train config: n_head_kv %d must divide n_head %d",
                         c->n_head_kv, c->n_head);
    const int bt = c->batch_tokens ? c->batch_tokens : c->n_ctx;
    if (bt % c->n_ctx)
        return tern_fail(TERN_ERR_ARG, "train config: batch_tokens %d must be a multiple of n_ctx %d",
                         bt, c->n_ctx);
    if (c->accum < 1) return tern_fail(TERN_ERR_ARG, "train config: accum %d must be >= 1", c->accum);
    if ((double)c->n_embd * c->n_vocab > 2e9 || (double)c->n_ff * c->n_embd > 2e9 ||
        (double)bt * (c->n_vocab > c->n_ff ? c->n_vocab : c->n_ff) > 4e12)
        return tern_fail(TERN_ERR_ARG, "train config: matrices beyond 2^31 elements are not "
                         "supported (n_embd %d, n_ff %d, n_vocab %d)", c->n_embd, c->n_ff,
                         c->n_vocab);
    return TERN_OK;
}

/* Parameter count of config c (without the trainer's 16-float alignment padding). */
static double param_count(const struct tern_train_config *c)
{
    const double D = c->n_embd, hd = D / c->n_head, Dq = D, Dkv = hd * c->n_head_kv;
    const double F = c->n_ff, V = c->n_vocab;
    const bool bias = c->arch == TERN_ARCH_QWEN2;
    double per = 2 * D + D * Dq * 2 + 2 * D * Dkv + 3 * D * F + (bias ? Dq + 2 * Dkv : 0);
    return V * D * (c->tied_output ? 1 : 2) + D + c->n_layer * (per + 16 * 14);
}

/* LoRA: the adapters' parameters, plus the frozen base's bytes (mapped) in floats. */
static double lora_count(const struct tern_train_config *c)
{
    const double D = c->n_embd, hd = D / (c->n_head > 0 ? c->n_head : 1);
    const double Dkv = hd * c->n_head_kv, F = c->n_ff, r = c->lora_rank;
    const double in[TERN_LORA_N_TARGETS] = {D, D, D, D, D, D, F};
    const double out[TERN_LORA_N_TARGETS] = {D, Dkv, Dkv, D, F, F, D};
    double n = 0;
    for (int m = 0; m < TERN_LORA_N_TARGETS; m++)
        if (c->lora_targets >> m & 1) n += r * (in[m] + out[m]) + 32;
    return n * c->n_layer;
}

static double file_floats(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fclose(f);
    return n > 0 ? n / 4.0 : 0;
}

uint64_t tern_train_memory_bytes(const struct tern_train_config *c)
{
    const double D = c->n_embd, hd = D / (c->n_head > 0 ? c->n_head : 1);
    const double Dq = D, Dkv = hd * c->n_head_kv, F = c->n_ff, V = c->n_vocab;
    const double N = c->batch_tokens ? c->batch_tokens : c->n_ctx, H = c->n_head;
    /* w, g, m, v; with LoRA only the adapters, the base mapped, a tile and LoRA's scratch */
    const double params = c->lora_rank > 0
        ? lora_count(c) * 4 + file_floats(c->lora_base) + (1 << 18) + 16 * (F > D ? F : D) +
          N * c->lora_rank * (TERN_LORA_N_TARGETS * c->n_layer + 1) + N * (F > D ? F : D)
        : param_count(c) * 4;
    const double per_layer = N * (4 * D + 2 + 2 * Dq + 2 * Dkv + H + 3 * F);
    const double acts = c->n_layer * per_layer + N * (4 * D + 1 + V) + N;
    const double scratch = N * (2 * D + 4 * Dq + 2 * Dkv + 3 * F);
    const int nth = c->threads > 0 ? c->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const double ws = (double)nth * (kern_gemm_ws_floats() + 2.0 * 64 * c->n_ctx + 256);
    const double batches = (double)c->accum * N * 5 * 4 / 4; /* 5 arrays of 4 bytes */
    const double rope = (double)c->n_ctx * hd;
    return (uint64_t)((params + acts + scratch + ws + batches + rope) * 4.0);
}

static uint64_t available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (uint64_t)kb * 1024;
            }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && ps > 0 ? (uint64_t)pages * (uint64_t)ps : UINT64_MAX;
}

/* ---------------------------------------------------------------- create / free */

static float *falloc(size_t n, bool *fail)
{
    /* 64-byte alignment: GEMM rows and per-thread slices start on a cache line */
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float))) {
        *fail = true;
        return NULL;
    }
    memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

tern_status tern_trainer_create(const struct tern_train_config *c, struct tern_trainer **out)
{
    tern_status st = check_shape(c);
    if (st) return st;
    const uint64_t need = tern_train_memory_bytes(c), avail = available_bytes();
    if (need > avail)
        return tern_fail(TERN_ERR_NOMEM, "train: this configuration needs %.1f GiB (%llu bytes: "
                         "weights, gradients, AdamW moments and one micro-batch of activations); "
                         "%.1f GiB is available. Lower batch_tokens, n_ctx or the model size",
                         need / 1073741824.0, (unsigned long long)need, avail / 1073741824.0);
    struct tern_trainer *t = calloc(1, sizeof *t);
    if (!t) return tern_fail(TERN_ERR_NOMEM, "train: out of memory");
    t->c = *c;
    if (!t->c.batch_tokens) t->c.batch_tokens = c->n_ctx;
    for (int m = 1; m < 256; m++) t->row_w[m] = 1.0f;
    t->latency_scale = 1.0;
    t->rail_best_ce = INFINITY;
    t->eval_bucket = -1;
    t->D = c->n_embd;
    t->H = c->n_head;
    t->Hkv = c->n_head_kv;
    t->hd = t->D / t->H;
    t->Dq = t->H * t->hd;
    t->Dkv = t->Hkv * t->hd;
    t->F = c->n_ff;
    t->V = c->n_vocab;
    t->T = c->n_ctx;
    t->L = c->n_layer;
    t->n_seq = t->c.batch_tokens / t->T;
    t->N = t->n_seq * t->T;
    t->neox = c->arch == TERN_ARCH_QWEN2;
    t->qkv_bias = c->arch == TERN_ARCH_QWEN2;
    t->n_threads = c->threads > 0 ? c->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (t->n_threads < 1) t->n_threads = 1;
    t->path = kern_gemm_best();
    if (c->matmul_bf16) {
        if (!kern_gemm_path_ok(KERN_GEMM_BF16_AVX512)) {
            const enum kern_gemm_path path = t->path; /* named after t is freed */
            tern_trainer_free(t);
            return tern_fail(TERN_ERR_ARG, "train config: \"matmul\": \"bf16\" needs a CPU with "
                             "AVX512-BF16 (this one runs the %s GEMM; TERN_KERNELS may have capped "
                             "it); use \"f32\"", kern_gemm_path_name(path));
        }
        t->path = KERN_GEMM_BF16_AVX512;
    }
    if ((st = train_layout(t)) || (st = tp_create(t->n_threads, &t->pool))) {
        tern_trainer_free(t);
        return st;
    }
    if (c->tokenizer[0] && (st = tern_gguf_open(c->tokenizer, &t->tok_gguf))) {
        tern_trainer_free(t);
        return st;
    }
    bool fail = false;
    const size_t N = (size_t)t->N, D = (size_t)t->D, P = t->n_params;
    t->w = falloc(P, &fail);
    t->g = falloc(P, &fail);
    t->m = falloc(P, &fail);
    t->v = falloc(P, &fail);
    t->wf = t->w;
    t->par_size = 1;
    t->act = calloc((size_t)t->L, sizeof *t->act);
    fail |= !t->act;
    for (int l = 0; !fail && l < t->L; l++) {
        struct train_layer_act *a = &t->act[l];
        a->x = falloc(N * D, &fail);
        a->xn1 = falloc(N * D, &fail);
        a->rstd1 = falloc(N, &fail);
        a->q = falloc(N * t->Dq, &fail);
        a->k = falloc(N * t->Dkv, &fail);
        a->v = falloc(N * t->Dkv, &fail);
        a->o = falloc(N * t->Dq, &fail);
        a->lse = falloc(N * t->H, &fail);
        a->xmid = falloc(N * D, &fail);
        a->xn2 = falloc(N * D, &fail);
        a->rstd2 = falloc(N, &fail);
        a->gate = falloc(N * t->F, &fail);
        a->up = falloc(N * t->F, &fail);
        a->h = falloc(N * t->F, &fail);
    }
    t->xL = falloc(N * D, &fail);
    t->xf = falloc(N * D, &fail);
    t->rstdf = falloc(N, &fail);
    t->rows = calloc(N, sizeof *t->rows);
    fail |= !t->rows;
    t->xc = falloc(N * D, &fail);
    t->logits = falloc(N * (size_t)t->V, &fail);
    t->dx = falloc(N * D, &fail);
    t->dxn = falloc(N * D, &fail);
    t->dq = falloc(N * t->Dq, &fail);
    t->dk = falloc(N * t->Dkv, &fail);
    t->dv = falloc(N * t->Dkv, &fail);
    t->dkh = falloc(N * t->Dq, &fail);
    t->dvh = falloc(N * t->Dq, &fail);
    t->dO = falloc(N * t->Dq, &fail);
    t->dh = falloc(N * t->F, &fail);
    t->dg = falloc(N * t->F, &fail);
    t->du = falloc(N * t->F, &fail);
    const int wide = t->D > t->Dq ? t->D : t->Dq;
    t->partial = falloc((size_t)TRAIN_RED_CHUNKS * wide, &fail);
    /* per thread: GEMM workspace, then attention scratch; rounded to a cache line */
    t->gws_floats = (kern_gemm_ws_floats() + train_attn_ws_floats(t->T) + 15) & ~(size_t)15;
    t->gws = falloc(t->gws_floats * (size_t)t->n_threads, &fail);
    t->rope = train_rope_table(t->T, t->hd, c->rope_base);
    fail |= !t->rope;
    t->batch = calloc((size_t)t->c.accum, sizeof *t->batch);
    fail |= !t->batch;
    for (int i = 0; !fail && i < t->c.accum; i++)
        if (train_batch_alloc(&t->batch[i], t->N)) fail = true;
    if (fail) {
        tern_trainer_free(t);
        return tern_fail(TERN_ERR_NOMEM, "train: out of memory allocating %.1f MiB",
                         need / 1048576.0);
    }
    *out = t;
    return TERN_OK;
}

void tern_trainer_free(struct tern_trainer *t)
{
    if (!t) return;
    if (t->pool) tp_free(t->pool);
    if (t->tok_gguf) tern_gguf_close(t->tok_gguf);
    free(t->doc_w);
    free(t->w);
    free(t->g);
    free(t->m);
    free(t->v);
    if (t->act)
        for (int l = 0; l < t->L; l++) {
            struct train_layer_act *a = &t->act[l];
            float *p[] = {a->x, a->xn1, a->rstd1, a->q, a->k, a->v, a->o, a->lse, a->xmid, a->xn2,
                          a->rstd2, a->gate, a->up, a->h};
            for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
        }
    free(t->act);
    float *p[] = {t->xL, t->xf, t->rstdf, t->xc, t->logits, t->dx, t->dxn, t->dq, t->dk, t->dv,
                  t->dkh, t->dvh, t->dO, t->dh, t->dg, t->du, t->partial, t->gws, t->rope};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    free(t->rows);
    if (t->batch)
        for (int i = 0; i < t->c.accum; i++) train_batch_free(&t->batch[i]);
    free(t->batch);
    free(t->bk_docs);
    free(t->perm);
    free(t->kd_scratch);
    free(t->wq);
    free(t->qtype);
    free(t->qbuf);
    for (int i = 0; i < 2 * t->n_meta; i++) free(t->meta[i]);
    free(t->meta);
    train_lora_free(t);
    free(t->tensors);
    free(t->layer);
    free(t);
}

tern_status tern_trainer_init(struct tern_trainer *t)
{
    train_init_weights(t);
    memset(t->m, 0, t->n_params * sizeof *t->m);
    memset(t->v, 0, t->n_params * sizeof *t->v);
    t->step = 0;
    memset(&t->dpos, 0, sizeof t->dpos);
    return TERN_OK;
}

int tern_trainer_step_index(const struct tern_trainer *t) { return t->step; }

tern_status tern_trainer_set_parallel(struct tern_trainer *t, int rank, int size,
                                      tern_allreduce_fn allreduce, void *user)
{
    if (size < 1 || rank < 0 || rank >= size || (size > 1 && !allreduce))
        return tern_fail(TERN_ERR_ARG, "train: process %d of %d (and an allreduce when more than "
                         "one) is not a valid data-parallel setting", rank, size);
    t->par_rank = rank;
    t->par_size = size;
    t->allreduce = size > 1 ? allreduce : NULL;
    t->allreduce_user = user;
    return TERN_OK;
}
const char *tern_trainer_kernel(const struct tern_trainer *t) { return kern_gemm_path_name(t->path); }

float *tern_trainer_weights(struct tern_trainer *t, size_t *n_floats)
{
    if (n_floats) *n_floats = t->n_params;
    return t->w;
}

int tern_trainer_n_tensors(const struct tern_trainer *t) { return t->n_tensors; }

const char *tern_trainer_tensor(const struct tern_trainer *t, int i, size_t *offset, int64_t ne[2])
{
    if (i < 0 || i >= t->n_tensors) return NULL;
    if (offset) *offset = t->tensors[i].off;
    if (ne) {
        ne[0] = t->tensors[i].ne[0];
        ne[1] = t->tensors[i].ne[1];
    }
    return t->tensors[i].name;
}

/* ---------------------------------------------------------------- the step */

struct sq_job {
    const float *g;
    size_t n;
    double part[TRAIN_RED_CHUNKS];
};

static void sq_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct sq_job *j = arg;
    long long lo, hi;
    tp_split((long long)j->n, chunk, n_chunks, 16, &lo, &hi);
    double s = 0.0;
    for (long long i = lo; i < hi; i++) s += (double)j->g[i] * j->g[i];
    j->part[chunk] = s;
}

struct adam_job {
    struct tern_trainer *t;
    float lr, gscale, b1c, b2c;
};

static void adam_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct adam_job *j = arg;
    const struct tern_trainer *t = j->t;
    /* every constant in a local: read through j and t inside the loop, gcc must assume the
     * stores to w, m and v may change them and kept the loop scalar (4 % of a training step
     * on Zen 4); elementwise, so any vector width gives the scalar loop's bits */
    const float b1 = t->c.beta1, b2 = t->c.beta2, eps = t->c.adam_eps, lr = j->lr;
    const float gscale = j->gscale, b1c = j->b1c, b2c = j->b2c;
    for (int ti = chunk; ti < t->n_tensors; ti += n_chunks) {
        const struct train_tensor *x = &t->tensors[ti];
        const size_t n = (size_t)(x->ne[0] * x->ne[1]);
        float *restrict w = t->w + x->off, *restrict m = t->m + x->off, *restrict v = t->v + x->off;
        const float *restrict g = t->g + x->off;
        const float wd = x->decay ? t->c.weight_decay : 0.0f;
        for (size_t i = 0; i < n; i++) {
            const float gi = g[i] * gscale;
            const float mi = b1 * m[i] + (1.0f - b1) * gi;
            const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            const float mh = mi / b1c, vh = vi / b2c;
            w[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * w[i]);
        }
    }
}

bool tern_trainer_qat_step(const struct tern_trainer *t, int s)
{
    return t->distill && t->recipe.qat_start < 1.0f &&
           s > (int)((double)t->recipe.qat_start * t->c.steps);
}

/* One step on d; with kd the distillation loss, with QAT (a distillation step past qat_start)
 * the forward reads the fake-quantized weights and the learning rate is scaled. */
static tern_status step_impl(struct tern_trainer *t, const struct tern_train_data *d,
                             const struct tern_distill_cache *kd, struct tern_train_step_info *info)
{
    const struct train_data_pos saved = t->dpos;
    t->kd = kd;
    t->micro = (uint64_t)t->step * (uint64_t)t->c.accum; /* the bucket sampler's counter */
    train_latency_weights(t, d);
    long long n_loss = 0;
    for (int i = 0; i < t->c.accum; i++) {
        tern_status st = train_batch_fill(t, d, &t->batch[i]);
        if (st) {
            t->dpos = saved;
            t->kd = NULL;
            return st;
        }
        n_loss += t->batch[i].n_loss;
    }
    const int step = t->step + 1;
    const bool qat = kd && tern_trainer_qat_step(t, step);
    if (qat) {
        train_qat_apply(t);
        t->wf = t->wq;
    }
    memset(t->g, 0, t->n_params * sizeof *t->g);
    memset(t->kd_acc, 0, sizeof t->kd_acc);
    const double scale = n_loss > 0 ? 1.0 / (double)n_loss : 0.0;
    double loss = 0.0;
    for (int i = 0; i < t->c.accum; i++)
        if (i % t->par_size == t->par_rank) {
            t->lora_mb = (uint64_t)t->step * (uint64_t)t->c.accum + (uint64_t)i; /* dropout */
            loss += train_forward_backward(t, &t->batch[i], scale);
        }
    t->wf = t->w;
    t->kd = NULL;
    if (t->allreduce) { /* the other processes' micro-batches: sum gradients and loss sums */
        double sums[4] = {loss, t->kd_acc[0], t->kd_acc[1], t->kd_acc[2]};
        if (!t->allreduce(t->allreduce_user, t->g, t->n_params, false) ||
            !t->allreduce(t->allreduce_user, sums, 4, true)) {
            t->dpos = saved;
            return tern_fail(TERN_ERR_IO, "train: step %d: the allreduce across %d processes "
                             "failed", t->step + 1, t->par_size);
        }
        loss = sums[0];
        memcpy(t->kd_acc, sums + 1, sizeof t->kd_acc);
    }
    loss *= scale;
    struct sq_job sj = {t->g, t->n_params, {0}};
    train_par(t, sq_chunk, &sj, TRAIN_RED_CHUNKS);
    double sq = 0.0;
    for (int c = 0; c < TRAIN_RED_CHUNKS; c++) sq += sj.part[c];
    const double norm = sqrt(sq);
    if (!isfinite(loss) || !isfinite(norm)) {
        t->dpos = saved;
        return tern_fail(TERN_ERR_RANGE, "train: step %d: the %s is %s; the weights and optimizer "
                         "state are those after step %d (lower lr, or raise warmup)", step,
                         isfinite(loss) ? "gradient norm" : "loss",
                         isnan(isfinite(loss) ? norm : loss) ? "NaN" : "infinite", t->step);
    }
    double lr = tern_train_lr(&t->c, step);
    if (qat) lr *= t->recipe.qat_lr_scale;
    struct adam_job aj = {t, (float)lr, 1.0f, 0, 0};
    if (t->c.clip > 0.0f && norm > t->c.clip) aj.gscale = (float)(t->c.clip / norm);
    aj.b1c = (float)(1.0 - pow(t->c.beta1, step));
    aj.b2c = (float)(1.0 - pow(t->c.beta2, step));
    train_par(t, adam_chunk, &aj, t->n_tensors);
    t->step = step;
    if (info) {
        memset(info, 0, sizeof *info);
        info->step = step;
        info->loss = loss;
        info->lr = lr;
        info->grad_norm = norm;
        info->tokens = (long long)t->N * t->c.accum;
        info->loss_tokens = n_loss;
        if (kd) {
            info->kl = t->kd_acc[0] * scale;
            info->ce = t->kd_acc[1] * scale;
            info->agree = t->kd_acc[2] * scale;
            info->early_tool_ramp = t->early_ramp;
            info->qat = qat;
        }
    }
    return TERN_OK;
}

tern_status tern_trainer_step(struct tern_trainer *t, const struct tern_train_data *d,
                              struct tern_train_step_info *info)
{
    return step_impl(t, d, NULL, info);
}

/* The cache must be d's teacher signal at this trainer's shape and recipe (the fingerprints were
 * checked when it was opened; the counts are checked again here so no row can index past it). */
static tern_status kd_check(struct tern_trainer *t, const struct tern_train_data *d,
                            const struct tern_distill_cache *kd)
{
    if (!t->distill)
        return tern_fail(TERN_ERR_ARG, "train: tern_trainer_set_distill was not called");
    /* the check hashes the data: once per (cache, data) pair, not every step */
    for (int i = 0; i < 2; i++)
        if (t->kd_checked[i].kd == kd && t->kd_checked[i].d == d) return TERN_OK;
    struct tern_distill_cache_params p = tern_distill_cache_default_params();
    p.top_k = t->recipe.top_k;
    p.temperature = t->recipe.temperature;
    p.n_ctx = t->T;
    p.n_vocab = t->V;
    tern_status st = tern_distill_cache_check(kd, NULL, d, &p);
    if (st) return st;
    t->kd_checked[1] = t->kd_checked[0];
    t->kd_checked[0].kd = kd;
    t->kd_checked[0].d = d;
    return TERN_OK;
}

tern_status tern_trainer_set_distill(struct tern_trainer *t, const struct tern_distill_recipe *r)
{
    if (r->top_k < 1 || r->top_k > t->V || !(r->temperature > 0.0f))
        return tern_fail(TERN_ERR_ARG, "distill: top_k %d must be in 1..%d and the temperature %g "
                         "> 0", r->top_k, t->V, r->temperature);
    if (r->n_buckets < 0 || r->n_buckets > 8)
        return tern_fail(TERN_ERR_ARG, "distill: %d length buckets (at most 8)", r->n_buckets);
    t->recipe = *r;
    t->bk_d = NULL; /* the buckets may differ: index the data again */
    free(t->kd_scratch);
    t->kd_scratch = malloc((size_t)t->n_threads * (size_t)t->V * sizeof(float));
    if (!t->kd_scratch) return tern_fail(TERN_ERR_NOMEM, "distill: out of memory");
    tern_status st = TERN_OK;
    if (r->qat_start < 1.0f && t->lora)
        return tern_fail(TERN_ERR_ARG, "distill: quantization-aware training (qat_start %g) "
                         "trains full weights; a LoRA run keeps its base frozen", r->qat_start);
    if (r->qat_start < 1.0f && (st = train_qat_prepare(t, r->qat_type))) return st;
    t->distill = true;
    return TERN_OK;
}

tern_status tern_trainer_step_distill(struct tern_trainer *t, const struct tern_train_data *d,
                                      const struct tern_distill_cache *kd,
                                      struct tern_train_step_info *info)
{
    tern_status st = kd_check(t, d, kd);
    if (st) return st;
    return step_impl(t, d, kd, info);
}

tern_status tern_trainer_eval_distill(struct tern_trainer *t, const struct tern_train_data *d,
                                      const struct tern_distill_cache *kd,
                                      struct tern_distill_eval *out)
{
    tern_status st = kd_check(t, d, kd);
    if (!st) st = train_data_check_vocab(d, t->V);
    if (st) return st;
    const bool qat = tern_trainer_qat_step(t, t->step);
    if (qat) {
        train_qat_apply(t);
        t->wf = t->wq;
    }
    t->kd = kd;
    memset(t->kd_acc, 0, sizeof t->kd_acc);
    struct train_batch *b = &t->batch[0]; /* refilled by the next step */
    uint64_t doc = 0, piece = 0;
    double sum = 0.0;
    long long n = 0;
    while (train_batch_fill_ordered(t, d, b, &doc, &piece)) {
        if (b->n_loss == 0) continue;
        sum += train_forward_loss(t, b);
        n += b->n_loss;
    }
    t->kd = NULL;
    t->wf = t->w;
    if (!isfinite(sum))
        return tern_fail(TERN_ERR_RANGE, "distill: the evaluation loss is not finite");
    const double inv = n ? 1.0 / (double)n : 0.0;
    out->loss = sum * inv;
    out->kl = t->kd_acc[0] * inv;
    out->ce = t->kd_acc[1] * inv;
    out->agree = t->kd_acc[2] * inv;
    out->tokens = n;
    return TERN_OK;
}

tern_status tern_trainer_eval_distill_bucket(struct tern_trainer *t, const struct tern_train_data *d,
                                             const struct tern_distill_cache *kd, int bucket,
                                             struct tern_distill_eval *out)
{
    if (!train_buckets_on(t) || bucket < 0 || bucket >= t->recipe.n_buckets)
        return tern_fail(TERN_ERR_ARG, "distill: bucket %d: the recipe has %d length buckets", bucket,
                         t->distill ? t->recipe.n_buckets : 0);
    t->eval_bucket = bucket;
    const tern_status st = tern_trainer_eval_distill(t, d, kd, out);
    t->eval_bucket = -1;
    return st;
}

tern_status tern_trainer_eval(struct tern_trainer *t, const struct tern_train_data *d, double *loss,
                              long long *loss_tokens)
{
    tern_status st = train_data_check_vocab(d, t->V);
    if (st) return st;
    struct train_batch *b = &t->batch[0]; /* refilled by the next step */
    uint64_t doc = 0, piece = 0;
    double sum = 0.0;
    long long n = 0;
    while (train_batch_fill_ordered(t, d, b, &doc, &piece)) {
        if (b->n_loss == 0) continue;
        sum += train_forward_loss(t, b);
        n += b->n_loss;
    }
    if (!isfinite(sum))
        return tern_fail(TERN_ERR_RANGE, "train: the evaluation loss is not finite");
    *loss = n ? sum / (double)n : 0.0;
    if (loss_tokens) *loss_tokens = n;
    return TERN_OK;
}
