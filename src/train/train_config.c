/* train_config.c — tern train's JSON configuration: one flat object whose keys are the fields of
 * struct tern_train_config (tern.h). Every key is checked for type and range and named in the
 * message when wrong; unknown keys are refused (a typo must not silently train with a default).
 * "tokenizer" names a GGUF whose tokenizer.ggml.tokens gives n_vocab. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/train_internal.h"
#include "util/error.h"

enum { K_INT, K_FLOAT, K_BOOL, K_U64 };

struct key_def {
    const char *name;
    int kind;
    size_t off;
    double lo, hi;
};

#define OFF(f) offsetof(struct tern_train_config, f)
static const struct key_def keys[] = {
    {"n_embd", K_INT, OFF(n_embd), 2, 65536},
    {"n_layer", K_INT, OFF(n_layer), 1, 1024},
    {"n_head", K_INT, OFF(n_head), 1, 1024},
    {"n_head_kv", K_INT, OFF(n_head_kv), 1, 1024},
    {"n_ff", K_INT, OFF(n_ff), 1, 1 << 20},
    {"n_ctx", K_INT, OFF(n_ctx), 2, 1 << 20},
    {"n_vocab", K_INT, OFF(n_vocab), 2, 1 << 24},
    {"rope_base", K_FLOAT, OFF(rope_base), 1, 1e12},
    {"rms_eps", K_FLOAT, OFF(rms_eps), 1e-12, 1},
    {"tied_output", K_BOOL, OFF(tied_output), 0, 1},
    {"lr", K_FLOAT, OFF(lr), 0, 10},
    {"lr_min", K_FLOAT, OFF(lr_min), 0, 10},
    {"warmup", K_INT, OFF(warmup), 0, 1e9},
    {"steps", K_INT, OFF(steps), 1, 1e9},
    {"batch_tokens", K_INT, OFF(batch_tokens), 1, 1 << 30},
    {"accum", K_INT, OFF(accum), 1, 1 << 20},
    {"weight_decay", K_FLOAT, OFF(weight_decay), 0, 10},
    {"beta1", K_FLOAT, OFF(beta1), 0, 0.999999},
    {"beta2", K_FLOAT, OFF(beta2), 0, 0.999999999},
    {"adam_eps", K_FLOAT, OFF(adam_eps), 0, 1},
    {"clip", K_FLOAT, OFF(clip), 0, 1e9},
    {"init_std", K_FLOAT, OFF(init_std), 0, 10},
    {"init_std_proj", K_FLOAT, OFF(init_std_proj), 0, 10},
    {"seed", K_U64, OFF(seed), 0, 9007199254740992.0},
    {"threads", K_INT, OFF(threads), 0, 1024},
    {"ckpt_every", K_INT, OFF(ckpt_every), 0, 1e9},
};
#undef OFF

tern_status train_config_set_key(struct tern_train_config *c, const cJSON *it)
{
    const char *k = it->string;
    if (!strcmp(k, "arch")) {
        if (!cJSON_IsString(it))
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'arch' must be a string");
        if (!strcmp(it->valuestring, "llama")) c->arch = TERN_ARCH_LLAMA;
        else if (!strcmp(it->valuestring, "qwen2")) c->arch = TERN_ARCH_QWEN2;
        else
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'arch': '%s' is not llama or qwen2",
                             it->valuestring);
        return TERN_OK;
    }
    if (!strcmp(k, "matmul")) {
        if (!cJSON_IsString(it) || (strcmp(it->valuestring, "f32") && strcmp(it->valuestring, "bf16")))
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'matmul' must be \"f32\" or \"bf16\"");
        c->matmul_bf16 = !strcmp(it->valuestring, "bf16");
        return TERN_OK;
    }
    if (!strcmp(k, "tokenizer")) {
        if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof c->tokenizer)
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'tokenizer' must be a path string");
        snprintf(c->tokenizer, sizeof c->tokenizer, "%s", it->valuestring);
        return TERN_OK;
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct key_def *d = &keys[i];
        if (strcmp(k, d->name)) continue;
        char *p = (char *)c + d->off;
        if (d->kind == K_BOOL) {
            if (!cJSON_IsBool(it))
                return tern_fail(TERN_ERR_FORMAT, "train config: key '%s' must be true or false", k);
            *(bool *)p = cJSON_IsTrue(it);
            return TERN_OK;
        }
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
            return tern_fail(TERN_ERR_FORMAT, "train config: key '%s' must be a number", k);
        const double v = it->valuedouble;
        if (d->kind != K_FLOAT && v != floor(v))
            return tern_fail(TERN_ERR_FORMAT, "train config: key '%s' must be an integer (got %g)", k, v);
        if (v < d->lo || v > d->hi)
            return tern_fail(TERN_ERR_FORMAT, "train config: key '%s' = %g is outside [%g, %g]", k, v,
                             d->lo, d->hi);
        if (d->kind == K_INT) *(int *)p = (int)v;
        else if (d->kind == K_U64) *(uint64_t *)p = (uint64_t)v;
        else *(float *)p = (float)v;
        return TERN_OK;
    }
    return tern_fail(TERN_ERR_FORMAT, "train config: unknown key '%s'", k);
}

tern_status tern_train_config_parse(const char *json, size_t len, struct tern_train_config *out)
{
    struct tern_train_config c = tern_train_config_default();
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        const size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return tern_fail(TERN_ERR_FORMAT, "train config: malformed JSON at byte %zu", at);
    }
    tern_status st = TERN_OK;
    if (!cJSON_IsObject(root)) st = tern_fail(TERN_ERR_FORMAT, "train config: not a JSON object");
    bool kv_given = false, vocab_given = false;
    for (const cJSON *it = root->child; !st && it; it = it->next) {
        st = train_config_set_key(&c, it);
        kv_given |= !strcmp(it->string, "n_head_kv");
        vocab_given |= !strcmp(it->string, "n_vocab");
    }
    cJSON_Delete(root);
    if (st) return st;
    if (!kv_given) c.n_head_kv = c.n_head;
    if (c.tokenizer[0]) {
        struct tern_gguf *g;
        if ((st = tern_gguf_open(c.tokenizer, &g)))
            return tern_fail_prefix(st, "train config: key 'tokenizer': ");
        const int64_t i = tern_gguf_find_key(g, "tokenizer.ggml.tokens");
        if (i < 0 || tern_gguf_kv_type(g, i) != TERN_GGUF_ARRAY) {
            tern_gguf_close(g);
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'tokenizer': %s has no "
                             "tokenizer.ggml.tokens array", c.tokenizer);
        }
        const int64_t n = (int64_t)tern_gguf_arr_len(g, i);
        tern_gguf_close(g);
        if (vocab_given && n != c.n_vocab)
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'n_vocab' = %d, but the tokenizer "
                             "%s has %lld tokens", c.n_vocab, c.tokenizer, (long long)n);
        c.n_vocab = (int)n;
    } else if (!vocab_given) {
        return tern_fail(TERN_ERR_FORMAT, "train config: give 'tokenizer' (a GGUF with the "
                         "vocabulary) or 'n_vocab'");
    }
    if (c.lr_min > c.lr)
        return tern_fail(TERN_ERR_FORMAT, "train config: key 'lr_min' = %g exceeds 'lr' = %g",
                         c.lr_min, c.lr);
    *out = c;
    return TERN_OK;
}
