/* train_import.c — a student that starts from a GGUF (tern distill --student S.gguf): the
 * trainer's config from the model's hyperparameters and its weights dequantized to F32.
 *
 * Only what the trainer computes can be imported: llama (NORM RoPE, no biases) and qwen2 (NEOX
 * RoPE, q/k/v biases), head size n_embd / n_head, full rotary dimension, no RoPE scaling or
 * frequency factors, no q/k norms. Anything else is refused naming what differs, and a tensor
 * the trainer would not train (or one it needs that is missing) is refused by name: a student
 * silently dropping part of its model would train something other than what was asked. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "train/train_internal.h"
#include "tern_gguf.h"
#include "util/error.h"

tern_status train_shape_from_gguf(const char *path, const char *role, struct tern_train_config *c)
{
    struct tern_model *m;
    struct tern_model_params mp = {.no_repack = true}; /* only the metadata is read */
    tern_status st = tern_model_load(path, &mp, &m);
    if (st) return tern_fail_prefix(st, "%s %s: ", role, path);
    const struct model_hparams *i = &m->info; /* the trainer models a subset: every field counts */
    const char *why = NULL;
    if (i->arch != TERN_ARCH_LLAMA && i->arch != TERN_ARCH_QWEN2) why = "its architecture";
    else if (i->rope_neox != (i->arch == TERN_ARCH_QWEN2)) why = "its RoPE pairing";
    else if (i->has_qkv_bias != (i->arch == TERN_ARCH_QWEN2)) why = "its q/k/v biases";
    else if (i->head_dim * i->n_head != i->n_embd || i->n_rot != i->head_dim) why = "its head size";
    else if (i->rope_freq_scale != 1.0f || i->has_rope_freqs || i->has_rope_long) why = "RoPE scaling";
    else if (i->has_qk_norm || i->has_post_norms || i->ffn_gelu || i->fused_qkv ||
             i->embd_scale != 1.0f || i->nope_every || i->n_swa)
        why = "its layer structure";
    if (why) {
        st = tern_fail(TERN_ERR_UNSUPPORTED, "%s %s (%s): the trainer models llama and qwen2 "
                       "as tern train writes them; %s differs", role, path, i->arch_name, why);
        tern_model_free(m);
        return st;
    }
    c->arch = i->arch;
    c->n_embd = i->n_embd;
    c->n_layer = i->n_layer;
    c->n_head = i->n_head;
    c->n_head_kv = i->n_head_kv;
    c->n_ff = i->n_ff;
    c->n_vocab = i->n_vocab;
    c->rope_base = i->rope_freq_base;
    c->rms_eps = i->rms_eps;
    c->tied_output = i->tied_output;
    const int n_ctx_train = i->n_ctx_train;
    tern_model_free(m);
    if (c->n_ctx < 2) c->n_ctx = n_ctx_train > 0 && n_ctx_train < 4096 ? n_ctx_train : 4096;
    return TERN_OK;
}

tern_status tern_train_config_from_gguf(const char *path, struct tern_train_config *out)
{
    struct tern_train_config c = tern_train_config_default();
    c.n_ctx = 0; /* the model's training context, at most 4096 */
    tern_status st = train_shape_from_gguf(path, "student", &c);
    if (st) return st;
    if (strlen(path) >= sizeof c.tokenizer)
        return tern_fail(TERN_ERR_ARG, "student: path too long");
    snprintf(c.tokenizer, sizeof c.tokenizer, "%s", path);
    *out = c;
    return TERN_OK;
}

/* The file's name of the trainer's tensor `name`: block j of the student is block layers[j] of
 * the file ("blk.1.attn_q.weight" <- "blk.2.attn_q.weight"); other tensors keep their names. */
static void source_name(const char *name, const int *layers, int n_layers, char *out, size_t cap)
{
    int j, len;
    if (layers && sscanf(name, "blk.%d.%n", &j, &len) == 1 && j >= 0 && j < n_layers)
        snprintf(out, cap, "blk.%d.%s", layers[j], name + len);
    else
        snprintf(out, cap, "%s", name);
}

/* Is the file's tensor `name` one the load reads (a block outside `layers` is skipped)? */
static bool wanted(const struct tern_trainer *t, const struct tern_str *name,
                   const int *layers, int n_layers)
{
    char src[96];
    for (int j = 0; j < t->n_tensors; j++) {
        source_name(t->tensors[j].name, layers, n_layers, src, sizeof src);
        if (strlen(src) == name->len && !memcmp(src, name->ptr, name->len)) return true;
    }
    int b, len;
    char head[96];
    snprintf(head, sizeof head, "%.*s", (int)(name->len < 95 ? name->len : 95), name->ptr);
    if (!layers || sscanf(head, "blk.%d.%n", &b, &len) != 1) return false;
    for (int j = 0; j < n_layers; j++)
        if (layers[j] == b) return false; /* a kept block's tensor the trainer does not model */
    return true; /* a dropped block: skipped on purpose */
}

tern_status tern_trainer_load_gguf(struct tern_trainer *t, const char *path)
{
    return tern_trainer_load_gguf_layers(t, path, NULL, 0);
}

tern_status tern_trainer_load_gguf_layers(struct tern_trainer *t, const char *path,
                                          const int *layers, int n_layers)
{
    if (t->lora)
        return tern_fail(TERN_ERR_ARG, "student %s: a LoRA run trains adapters on lora.base; it "
                         "loads no student weights", path);
    if (layers && n_layers != t->c.n_layer)
        return tern_fail(TERN_ERR_ARG, "student %s: %d layers kept, the config has %d", path,
                         n_layers, t->c.n_layer);
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g);
    if (st) return tern_fail_prefix(st, "student %s: ", path);
    for (int64_t i = 0; !st && i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *x = tern_gguf_tensor(g, i);
        if (!wanted(t, &x->name, layers, n_layers))
            st = tern_fail(TERN_ERR_UNSUPPORTED, "student %s: tensor '%.*s' is not part of the "
                           "model the trainer builds", path, (int)x->name.len, x->name.ptr);
    }
    for (int j = 0; !st && j < t->n_tensors; j++) {
        const struct train_tensor *y = &t->tensors[j];
        char src[96];
        source_name(y->name, layers, n_layers, src, sizeof src);
        const struct tern_gguf_tensor *x = tern_gguf_find_tensor(g, src);
        if (!x) {
            st = tern_fail(TERN_ERR_FORMAT, "student %s: tensor '%s' is missing", path, src);
            break;
        }
        if (x->ne[0] != y->ne[0] || x->ne[1] != y->ne[1] || x->ne[2] != 1 || x->ne[3] != 1) {
            st = tern_fail(TERN_ERR_FORMAT, "student %s: tensor '%s' is %lld x %lld, the config "
                           "needs %lld x %lld", path, y->name, (long long)x->ne[0],
                           (long long)x->ne[1], (long long)y->ne[0], (long long)y->ne[1]);
            break;
        }
        const size_t row = (size_t)(x->ne[0] / tern_type_block_size(x->type)) *
                           (size_t)tern_type_block_bytes(x->type);
        for (int64_t r = 0; !st && r < x->ne[1]; r++)
            st = tern_dequantize_row(x->type, (const unsigned char *)x->data + (size_t)r * row,
                                     t->w + y->off + r * y->ne[0], y->ne[0]);
        if (st) tern_fail_prefix(st, "student %s: tensor '%s': ", path, y->name);
        for (int64_t e = 0; !st && e < y->ne[0] * y->ne[1]; e++)
            if (!isfinite(t->w[y->off + e]))
                st = tern_fail(TERN_ERR_FORMAT, "student %s: tensor '%s' element %lld is not "
                               "finite", path, y->name, (long long)e);
    }
    tern_gguf_close(g);
    if (st) return st;
    memset(t->m, 0, t->n_params * sizeof *t->m);
    memset(t->v, 0, t->n_params * sizeof *t->v);
    t->step = 0;
    memset(&t->dpos, 0, sizeof t->dpos);
    return TERN_OK;
}
