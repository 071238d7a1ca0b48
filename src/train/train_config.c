/* train_config.c — tern train's JSON configuration: one flat object whose keys are the fields of
 * struct tern_train_config (tern.h). Every key is checked for type and range and named in the
 * message when wrong; unknown keys are refused (a typo must not silently train with a default).
 * "tokenizer" names a GGUF whose tokenizer.ggml.tokens gives n_vocab. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/train_internal.h"
#include "tern_gguf.h"
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

/* "lora": {"base": PATH, "rank": R, "alpha": A, "dropout": P, "targets": [..] or "q,k,.."} */
static tern_status lora_keys(struct tern_train_config *c, const cJSON *o)
{
    if (!cJSON_IsObject(o))
        return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora' must be an object (base, rank, "
                         "alpha, dropout, targets)");
    c->lora_rank = 16;
    c->lora_alpha = 0.0f;
    c->lora_dropout = 0.0f;
    c->lora_targets = (1u << TERN_LORA_N_TARGETS) - 1;
    for (const cJSON *it = o->child; it; it = it->next) {
        const char *k = it->string;
        if (!strcmp(k, "base")) {
            if (!cJSON_IsString(it) || !it->valuestring[0] ||
                strlen(it->valuestring) >= sizeof c->lora_base)
                return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora.base' must be a path "
                                 "string");
            snprintf(c->lora_base, sizeof c->lora_base, "%s", it->valuestring);
        } else if (!strcmp(k, "rank")) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
                it->valuedouble < 1 || it->valuedouble > 1024)
                return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora.rank' must be an "
                                 "integer in [1, 1024]");
            c->lora_rank = (int)it->valuedouble;
        } else if (!strcmp(k, "alpha")) {
            if (!cJSON_IsNumber(it) || !(it->valuedouble > 0) || it->valuedouble > 1e6)
                return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora.alpha' must be a "
                                 "number in (0, 1e6]");
            c->lora_alpha = (float)it->valuedouble;
        } else if (!strcmp(k, "dropout")) {
            if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0) || !(it->valuedouble < 1))
                return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora.dropout' must be a "
                                 "number in [0, 1)");
            c->lora_dropout = (float)it->valuedouble;
        } else if (!strcmp(k, "targets")) {
            char list[256] = "";
            if (cJSON_IsString(it)) {
                snprintf(list, sizeof list, "%s", it->valuestring);
            } else if (cJSON_IsArray(it)) {
                for (const cJSON *e = it->child; e; e = e->next) {
                    if (!cJSON_IsString(e) || strlen(list) + strlen(e->valuestring) + 2 > sizeof list)
                        return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora.targets' must "
                                         "list matrix names (q, k, v, o, gate, up, down)");
                    if (list[0]) strcat(list, ",");
                    strcat(list, e->valuestring);
                }
            } else {
                return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora.targets' must be an "
                                 "array of names or a comma-separated string");
            }
            tern_status st = tern_lora_targets_parse(list, &c->lora_targets);
            if (st) return tern_fail_prefix(st, "train config: key 'lora.targets': ");
        } else {
            return tern_fail(TERN_ERR_FORMAT, "train config: unknown key 'lora.%s' (base, rank, "
                             "alpha, dropout, targets)", k);
        }
    }
    if (!c->lora_base[0])
        return tern_fail(TERN_ERR_FORMAT, "train config: key 'lora' needs 'base': the GGUF the "
                         "adapters train on");
    if (c->lora_alpha == 0.0f) c->lora_alpha = 2.0f * c->lora_rank;
    return TERN_OK;
}

tern_status tern_lora_targets_parse(const char *list, unsigned *out)
{
    static const char *names[TERN_LORA_N_TARGETS] = {"q", "k", "v", "o", "gate", "up", "down"};
    unsigned bits = 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        int found = -1;
        for (int i = 0; i < TERN_LORA_N_TARGETS; i++)
            if (strlen(names[i]) == n && !strncmp(p, names[i], n)) found = i;
        if (n == 3 && !strncmp(p, "all", 3)) bits |= (1u << TERN_LORA_N_TARGETS) - 1;
        else if (found < 0)
            return tern_fail(TERN_ERR_ARG, "'%.*s' is not a matrix LoRA can adapt (q, k, v, o, "
                             "gate, up, down, or all)", (int)n, p);
        else bits |= 1u << found;
        p += n + (e != NULL);
    }
    if (!bits) return tern_fail(TERN_ERR_ARG, "no target matrices given");
    *out = bits;
    return TERN_OK;
}

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
    if (!strcmp(k, "chat_template_file")) {
        if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof c->chat_template_file)
            return tern_fail(TERN_ERR_FORMAT, "train config: key 'chat_template_file' must be a "
                             "path string");
        snprintf(c->chat_template_file, sizeof c->chat_template_file, "%s", it->valuestring);
        return TERN_OK;
    }
    if (!strcmp(k, "lora")) return lora_keys(c, it);
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
    const struct tern_train_config d = tern_train_config_default();
    return tern_train_config_parse_over(json, len, &d, out);
}

tern_status tern_train_config_parse_over(const char *json, size_t len,
                                         const struct tern_train_config *start,
                                         struct tern_train_config *out)
{
    struct tern_train_config c = *start;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        const size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return tern_fail(TERN_ERR_FORMAT, "train config: malformed JSON at byte %zu", at);
    }
    tern_status st = TERN_OK;
    if (!cJSON_IsObject(root)) st = tern_fail(TERN_ERR_FORMAT, "train config: not a JSON object");
    bool kv_given = false, vocab_given = false;
    const char *shape_given = NULL; /* a shape key given (refused with lora: the base has it) */
    for (const cJSON *it = root->child; !st && it; it = it->next) {
        st = train_config_set_key(&c, it);
        kv_given |= !strcmp(it->string, "n_head_kv");
        static const char *shape_keys[] = {"arch", "n_embd", "n_layer", "n_head", "n_head_kv",
                                           "n_ff", "n_vocab", "rope_base", "rms_eps",
                                           "tied_output"};
        for (size_t i = 0; i < sizeof shape_keys / sizeof *shape_keys; i++)
            if (!strcmp(it->string, shape_keys[i])) shape_given = shape_keys[i];
        vocab_given |= !strcmp(it->string, "n_vocab");
    }
    cJSON_Delete(root);
    if (st) return st;
    if (c.lora_base[0]) {
        if (shape_given)
            return tern_fail(TERN_ERR_FORMAT, "train config: key '%s' with 'lora': the model's "
                             "shape comes from lora.base %s", shape_given, c.lora_base);
        if ((st = train_shape_from_gguf(c.lora_base, "lora.base", &c))) return st;
        kv_given = true;
        if (!c.tokenizer[0]) snprintf(c.tokenizer, sizeof c.tokenizer, "%s", c.lora_base);
        vocab_given = false;
    }
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

tern_status tern_train_config_set_lora(struct tern_train_config *c, const char *base)
{
    if (!base || !base[0] || strlen(base) >= sizeof c->lora_base)
        return tern_fail(TERN_ERR_ARG, "train: the LoRA base must be a path of under %zu bytes",
                         sizeof c->lora_base);
    struct tern_train_config b = *c;
    snprintf(b.lora_base, sizeof b.lora_base, "%s", base);
    tern_status st = train_shape_from_gguf(base, "LoRA base", &b);
    if (st) return st;
    if (!b.tokenizer[0] || !strcmp(b.tokenizer, c->lora_base))
        snprintf(b.tokenizer, sizeof b.tokenizer, "%s", base);
    if (b.lora_rank < 1) b.lora_rank = 16;
    if (!(b.lora_alpha > 0.0f)) b.lora_alpha = 2.0f * b.lora_rank;
    if (!b.lora_targets) b.lora_targets = (1u << TERN_LORA_N_TARGETS) - 1;
    *c = b;
    return TERN_OK;
}
