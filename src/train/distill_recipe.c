/* distill_recipe.c — tern distill's recipe: one flat JSON object with the distillation keys of
 * struct tern_distill_recipe (tern.h) and the training keys of tern train's config that do not
 * define the model's shape. The shape comes from the student (its GGUF or its config), so a
 * recipe naming n_embd is refused like a typo: every unknown key fails, naming it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "convert/type_plan.h"
#include "train/distill.h"
#include "train/train_internal.h"
#include "util/error.h"

struct tern_distill_recipe tern_distill_recipe_default(void)
{
    struct tern_distill_recipe r;
    memset(&r, 0, sizeof r);
    r.top_k = 32;
    r.temperature = 1.0f;
    r.kd_weight = 1.0f;
    r.ce_weight = 0.5f;
    r.qat_start = 1.0f;
    snprintf(r.qat_type, sizeof r.qat_type, "q8_0");
    r.qat_lr_scale = 0.1f;
    r.early_tool_n = 25;
    r.early_tool_warmup_epochs = 1.0f;
    r.length_kd_hinge = 0.15f;
    r.length_kd_slope = 1.0f;
    r.length_kd_every = 100;
    r.rail_ce_rise = 0.05f;
    r.bucket_alpha = 100.0f;
    return r;
}

static const char *const train_keys[] = {"lr", "lr_min", "warmup", "steps", "batch_tokens",
                                         "accum", "weight_decay", "beta1", "beta2", "adam_eps",
                                         "clip", "seed", "threads", "ckpt_every", "n_ctx"};

static tern_status num(const cJSON *it, double lo, double hi, bool integer, double *v)
{
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return tern_fail(TERN_ERR_FORMAT, "recipe: key '%s' must be a number", it->string);
    *v = it->valuedouble;
    if (integer && *v != floor(*v))
        return tern_fail(TERN_ERR_FORMAT, "recipe: key '%s' must be an integer (got %g)", it->string, *v);
    if (!(*v >= lo && *v <= hi))
        return tern_fail(TERN_ERR_FORMAT, "recipe: key '%s' = %g is outside [%g, %g]", it->string, *v,
                         lo, hi);
    return TERN_OK;
}

/* "shape_buckets": true (512, 1024, 2048, 4096) or an ascending array of 1 to 8 lengths. */
static tern_status parse_buckets(struct tern_distill_recipe *r, const cJSON *it)
{
    static const int seeds[4] = {512, 1024, 2048, 4096};
    if (cJSON_IsBool(it)) {
        r->n_buckets = cJSON_IsTrue(it) ? 4 : 0;
        memcpy(r->bucket_len, seeds, sizeof seeds);
        return TERN_OK;
    }
    const int n = cJSON_GetArraySize(it);
    if (!cJSON_IsArray(it) || n < 1 || n > 8)
        return tern_fail(TERN_ERR_FORMAT, "recipe: key 'shape_buckets' must be true or an array of 1 "
                         "to 8 lengths");
    int i = 0;
    for (const cJSON *x = it->child; x; x = x->next, i++) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 8 ||
            x->valuedouble > 1048576 || (i && x->valuedouble <= r->bucket_len[i - 1]))
            return tern_fail(TERN_ERR_FORMAT, "recipe: key 'shape_buckets': entry %d must be an "
                             "integer length in [8, 1048576], above the one before it", i);
        r->bucket_len[i] = (int)x->valuedouble;
    }
    r->n_buckets = n;
    return TERN_OK;
}

static tern_status set_key(struct tern_distill_recipe *r, struct tern_train_config *train,
                           const cJSON *it)
{
    const char *k = it->string;
    double v;
    tern_status st;
    if (!strcmp(k, "top_k")) {
        if ((st = num(it, 1, KD_MAX_K, true, &v))) return st;
        r->top_k = (int)v;
    } else if (!strcmp(k, "temperature")) {
        if ((st = num(it, 0.05, 100, false, &v))) return st;
        r->temperature = (float)v;
    } else if (!strcmp(k, "kd_weight") || !strcmp(k, "ce_weight")) {
        if ((st = num(it, 0, 1000, false, &v))) return st;
        *(k[0] == 'k' ? &r->kd_weight : &r->ce_weight) = (float)v;
    } else if (!strcmp(k, "qat_start")) {
        if ((st = num(it, 0, 1, false, &v))) return st;
        r->qat_start = (float)v;
    } else if (!strcmp(k, "qat_lr_scale")) {
        if ((st = num(it, 1e-6, 1, false, &v))) return st;
        r->qat_lr_scale = (float)v;
    } else if (!strcmp(k, "early_tool_weight")) {
        if ((st = num(it, 0, 1000, false, &v))) return st;
        r->early_tool_weight = (float)v;
    } else if (!strcmp(k, "early_tool_n")) {
        if ((st = num(it, 1, 253, true, &v))) return st;
        r->early_tool_n = (int)v;
    } else if (!strcmp(k, "early_tool_warmup_epochs")) {
        if ((st = num(it, 0, 1000, false, &v))) return st;
        r->early_tool_warmup_epochs = (float)v;
    } else if (!strcmp(k, "length_kd_weight") || !strcmp(k, "length_kd_slope")) {
        if ((st = num(it, 0, 1000, false, &v))) return st;
        *(k[10] == 'w' ? &r->length_kd_weight : &r->length_kd_slope) = (float)v;
    } else if (!strcmp(k, "length_kd_hinge")) {
        if ((st = num(it, 0, 100, false, &v))) return st;
        r->length_kd_hinge = (float)v;
    } else if (!strcmp(k, "length_kd_every")) {
        if ((st = num(it, 1, 1e9, true, &v))) return st;
        r->length_kd_every = (int)v;
    } else if (!strcmp(k, "length_kd_docs")) {
        if ((st = num(it, 0, 1e9, true, &v))) return st;
        r->length_kd_docs = (int)v;
    } else if (!strcmp(k, "rail_ce_rise")) {
        if ((st = num(it, 0, 100, false, &v))) return st;
        r->rail_ce_rise = (float)v;
    } else if (!strcmp(k, "shape_buckets")) {
        if ((st = parse_buckets(r, it))) return st;
    } else if (!strcmp(k, "bucket_weights")) {
        const int n = cJSON_GetArraySize(it);
        if (!cJSON_IsArray(it) || n < 1 || n > 8)
            return tern_fail(TERN_ERR_FORMAT, "recipe: key 'bucket_weights' must be an array of 1 to "
                             "8 numbers");
        int i = 0;
        for (const cJSON *x = it->child; x; x = x->next, i++) {
            if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0)
                return tern_fail(TERN_ERR_FORMAT, "recipe: key 'bucket_weights': entry %d must be a "
                                 "number >= 0", i);
            r->bucket_weight[i] = (float)x->valuedouble;
        }
        r->n_weights = n;
    } else if (!strcmp(k, "bucket_alpha")) {
        if ((st = num(it, 0, 1e6, false, &v))) return st;
        r->bucket_alpha = (float)v;
    } else if (!strcmp(k, "qat_type")) {
        struct type_plan plan;
        if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof r->qat_type)
            return tern_fail(TERN_ERR_FORMAT, "recipe: key 'qat_type' must be a type name such as "
                             "\"q8_0\"");
        if (type_plan_parse(it->valuestring, &plan))
            return tern_fail_prefix(TERN_ERR_FORMAT, "recipe: key 'qat_type': ");
        snprintf(r->qat_type, sizeof r->qat_type, "%s", it->valuestring);
    } else {
        for (size_t i = 0; i < sizeof train_keys / sizeof train_keys[0]; i++)
            if (!strcmp(k, train_keys[i])) {
                if (!train)
                    return tern_fail(TERN_ERR_FORMAT, "recipe: key '%s' is a training key, not "
                                     "allowed here", k);
                if ((st = train_config_set_key(train, it)))
                    return tern_fail_prefix(st, "recipe: ");
                return TERN_OK;
            }
        return tern_fail(TERN_ERR_FORMAT, "recipe: unknown key '%s' (distillation keys: top_k, "
                         "temperature, kd_weight, ce_weight, qat_start, qat_type, qat_lr_scale, "
                         "early_tool_weight, early_tool_n, early_tool_warmup_epochs, "
                         "length_kd_weight, length_kd_hinge, length_kd_slope, length_kd_every, "
                         "length_kd_docs, rail_ce_rise, shape_buckets, bucket_weights, bucket_alpha; "
                         "training keys: lr, lr_min, warmup, steps, batch_tokens, accum, "
                         "weight_decay, beta1, beta2, adam_eps, clip, seed, threads, ckpt_every, "
                         "n_ctx)", k);
    }
    return TERN_OK;
}

tern_status tern_distill_recipe_parse(const char *json, size_t len, struct tern_distill_recipe *out,
                                      struct tern_train_config *train)
{
    struct tern_distill_recipe r = tern_distill_recipe_default();
    struct tern_train_config c;
    if (train) c = *train;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        const size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return tern_fail(TERN_ERR_FORMAT, "recipe: malformed JSON at byte %zu", at);
    }
    tern_status st = TERN_OK;
    if (!cJSON_IsObject(root)) st = tern_fail(TERN_ERR_FORMAT, "recipe: not a JSON object");
    for (const cJSON *it = root->child; !st && it; it = it->next)
        st = set_key(&r, train ? &c : NULL, it);
    cJSON_Delete(root);
    if (st) return st;
    if (r.n_weights && r.n_weights != r.n_buckets)
        return tern_fail(TERN_ERR_FORMAT, "recipe: 'bucket_weights' has %d entries for %d "
                         "'shape_buckets'", r.n_weights, r.n_buckets);
    if (r.n_buckets) { /* the seeds' mix for their four buckets, else equal; then normalized */
        static const float seeds[4] = {0.4f, 0.4f, 0.15f, 0.05f};
        double sum = 0.0;
        for (int i = 0; i < r.n_buckets; i++) {
            if (!r.n_weights) r.bucket_weight[i] = r.n_buckets == 4 ? seeds[i] : 1.0f;
            sum += r.bucket_weight[i];
        }
        if (!(sum > 0.0))
            return tern_fail(TERN_ERR_FORMAT, "recipe: 'bucket_weights' are all 0");
        for (int i = 0; i < r.n_buckets; i++) r.bucket_weight[i] = (float)(r.bucket_weight[i] / sum);
    }
    if (train && c.lr_min > c.lr)
        return tern_fail(TERN_ERR_FORMAT, "recipe: key 'lr_min' = %g exceeds 'lr' = %g", c.lr_min,
                         c.lr);
    *out = r;
    if (train) *train = c;
    return TERN_OK;
}
