/* spec_draft.c — struct tern_draft: choosing and checking a draft source (public API:
 * include/tern.h "speculative decoding").
 *
 * Read spec.h first. A source string names one of four sources behind the spec_source
 * interface: "ngram" (spec_ngram.c), "mtp" (the target's multi-token-prediction layer,
 * spec_mtp.c), "self:TYPE" (the target converted in memory,
 * tern_model_quantized_copy, run by spec_model.c) or a GGUF path (spec_model.c). A drafter file
 * must tokenize exactly as the target: its token ids are fed to the target as they are, so the
 * two tokenizers are compared by fingerprint (every tokenizer.ggml.* entry) and a mismatch is
 * refused naming both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/spec.h"
#include "tern_gguf.h"
#include "util/error.h"

struct tern_draft_params tern_draft_default_params(void)
{
    return (struct tern_draft_params){.source = NULL, .n_max = 8, .n_min = 1, .n_ctx = 0,
                                      .n_threads = 0, .ngram_min = 1, .ngram_max = 4, .n_seq = 0};
}

/* "gpt2 (pre qwen2), 151936 tokens" for messages. */
static void describe_tokenizer(const struct tern_model *m, char *buf, size_t cap)
{
    const struct tern_gguf *g = tern_model_gguf(m);
    struct tern_str model = {"?", 1}, pre = {"", 0};
    /* absent keys keep the defaults above */
    tern_status_ignore(tern_gguf_get_str(g, "tokenizer.ggml.model", &model));
    tern_status_ignore(tern_gguf_get_str(g, "tokenizer.ggml.pre", &pre));
    int64_t i = tern_gguf_find_key(g, "tokenizer.ggml.tokens");
    unsigned long long n = i >= 0 ? (unsigned long long)tern_gguf_arr_len(g, i) : 0;
    snprintf(buf, cap, "%.*s%s%.*s%s, %llu tokens", (int)(model.len > 32 ? 32 : model.len),
             model.ptr, pre.len ? " (pre " : "", (int)(pre.len > 32 ? 32 : pre.len), pre.ptr,
             pre.len ? ")" : "", n);
}

/* The drafter must speak the target's token ids. */
static tern_status check_pair(const struct tern_model *target, const struct tern_model *drafter,
                              const char *path)
{
    uint8_t ft[32], fd[32];
    tern_status st = tern_tokenizer_fingerprint(target, ft);
    if (!st) st = tern_tokenizer_fingerprint(drafter, fd);
    if (st) return tern_fail_prefix(st, "draft %s: ", path);
    if (memcmp(ft, fd, 32) != 0) {
        char a[128], b[128], ha[17], hb[17];
        describe_tokenizer(target, a, sizeof a);
        describe_tokenizer(drafter, b, sizeof b);
        for (int i = 0; i < 8; i++) { /* the fingerprints' first 8 bytes name them well enough */
            snprintf(ha + 2 * i, 3, "%02x", ft[i]);
            snprintf(hb + 2 * i, 3, "%02x", fd[i]);
        }
        return tern_fail(TERN_ERR_ARG, "draft %s: its tokenizer differs from the target's (target: "
                         "%s, fingerprint %s...; drafter: %s, fingerprint %s...; the fingerprints "
                         "hash every tokenizer.ggml.* entry): a drafter must use the same tokenizer",
                         path, a, ha, b, hb);
    }
    return TERN_OK;
}

tern_status tern_draft_create(const struct tern_model *target, const struct tern_draft_params *p,
                              struct tern_draft **out)
{
    if (!target || !p || !out) return tern_fail(TERN_ERR_ARG, "draft: target model, params and out are required");
    struct tern_draft_params dp = *p;
    const struct tern_draft_params def = tern_draft_default_params();
    if (!dp.source || !*dp.source)
        return tern_fail(TERN_ERR_ARG, "draft: no source (give \"ngram\", \"mtp\", \"self:TYPE\" or a GGUF path)");
    if (dp.n_max == 0) dp.n_max = def.n_max;
    if (dp.n_min == 0) dp.n_min = dp.n_max < def.n_min ? dp.n_max : def.n_min;
    if (dp.ngram_min == 0) dp.ngram_min = def.ngram_min;
    if (dp.ngram_max == 0) dp.ngram_max = dp.ngram_min > def.ngram_max ? dp.ngram_min : def.ngram_max;
    if (dp.n_ctx == 0) dp.n_ctx = 4096;
    if (dp.n_max < 1 || dp.n_max > SPEC_MAX_DRAFT)
        return tern_fail(TERN_ERR_ARG, "draft: n_max %d is out of range 1..%d", dp.n_max, SPEC_MAX_DRAFT);
    if (dp.n_min < 1 || dp.n_min > dp.n_max)
        return tern_fail(TERN_ERR_ARG, "draft: n_min %d is out of range 1..n_max (%d)", dp.n_min, dp.n_max);
    if (dp.n_seq == 0) dp.n_seq = 1;
    if (dp.n_ctx < 1 || dp.n_threads < 0)
        return tern_fail(TERN_ERR_ARG, "draft: n_ctx %d / n_threads %d out of range", dp.n_ctx, dp.n_threads);
    if (dp.n_seq < 1 || dp.n_seq > 256)
        return tern_fail(TERN_ERR_ARG, "draft: n_seq %d is out of range 1..256", dp.n_seq);

    struct tern_draft *d = calloc(1, sizeof *d);
    if (!d) return tern_fail(TERN_ERR_NOMEM, "draft: out of memory");
    d->target = target;
    d->n_max = dp.n_max;
    d->n_min = dp.n_min;
    d->n_seq = dp.n_seq;
    const int nv = tern_model_n_vocab(target);
    tern_status st;
    if (!strcmp(dp.source, "ngram")) {
        struct tern_tokenizer *tok = NULL; /* its own: tokenizing continuations mutates caches */
        st = tern_tokenizer_from_gguf(tern_model_gguf(target), &tok);
        if (st) st = tern_fail_prefix(st, "draft ngram: the target's tokenizer: ");
        else st = spec_ngram_create(dp.ngram_min, dp.ngram_max, nv, tok, true, &d->src);
    } else if (!strcmp(dp.source, "mtp")) {
        /* the target's own MTP layer; the source makes a context of the model (which needs it
         * non-const) but never changes it */
        const double w = (double)tern_model_get_info(target)->weight_bytes;
        double mtp = 0, mtp_layer = 0;
        tern_model_hparam(target, "mtp_bytes", &mtp);
        tern_model_hparam(target, "mtp_layer_bytes", &mtp_layer);
        st = spec_mtp_create((struct tern_model *)target, dp.n_threads, dp.n_max, &d->src);
        d->cost_ratio = w > 0 ? mtp / w : 0;
        d->catch_ratio = w > 0 ? mtp_layer / w : 0;
    } else if (!strncmp(dp.source, "self:", 5)) {
        struct tern_model *copy = NULL;
        st = tern_model_quantized_copy(target, dp.source + 5, dp.n_threads, &copy);
        if (st) st = tern_fail_prefix(st, "draft %s: ", dp.source);
        else {
            d->drafter = copy;
            st = spec_model_create(copy, true, "self", nv, dp.n_ctx, dp.n_seq, dp.n_threads, dp.n_max,
                                   &d->src);
        }
    } else {
        struct tern_model *m = NULL;
        st = tern_model_load(dp.source, &(struct tern_model_params){.prefault = true}, &m);
        if (st) st = tern_fail_prefix(st, "draft model: ");
        else if ((st = check_pair(target, m, dp.source))) tern_model_free(m);
        else {
            d->drafter = m;
            st = spec_model_create(m, true, "model", nv, dp.n_ctx, dp.n_seq, dp.n_threads, dp.n_max,
                                   &d->src);
        }
    }
    if (st) {
        free(d);
        return st;
    }
    struct spec_model_view v;
    d->n_ctx = spec_model_view(d->src, &v) ? tern_context_n_ctx(v.ctx) : 0;
    *out = d;
    return TERN_OK;
}

void tern_draft_free(struct tern_draft *d)
{
    if (!d) return;
    if (d->src) d->src->ops->free(d->src);
    free(d);
}

const char *tern_draft_kind(const struct tern_draft *d) { return d->src->ops->kind; }

const struct tern_model *tern_draft_model(const struct tern_draft *d) { return d->drafter; }
