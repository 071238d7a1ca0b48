/* refcheck.c — compare tern's logits with a llama.cpp reference dump (tern_ref_check).
 *
 * The dump format is described in shared/fixtures/README.md §2. Random-weight models have tiny
 * top-1/top-2 margins, so the primary check is on logit values (the reference's top-K entries
 * at every position, and full vectors where the .bin has them); argmax agreement is only
 * demanded where the reference margin is clearly larger than the tolerance. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern_bench.h"

#include "model/model.h"
#include "util/error.h"

struct ref_seq {
    int n;
    int32_t *tokens;     /* (n) prompt */
    int n_top;           /* K */
    int32_t *top_id;     /* (n, K) top-K after consuming tokens[0..i] */
    float *top_logit;    /* (n, K) */
    int n_greedy;
    int32_t *greedy;     /* (n_greedy) */
    float *margin;       /* (n_greedy) */
    int32_t *gtop_id;    /* (n_greedy, K) the top-K each greedy token was chosen from */
    float *gtop_logit;   /* (n_greedy, K) */
};

static void seq_free(struct ref_seq *s)
{
    free(s->tokens);
    free(s->top_id);
    free(s->top_logit);
    free(s->greedy);
    free(s->margin);
    free(s->gtop_id);
    free(s->gtop_logit);
}

/* Parse a [[id, logit], ...] array of exactly K entries into ids/logits. */
static bool parse_top(const cJSON *arr, int k, int32_t *ids, float *logits)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != k) return false;
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || cJSON_GetArraySize(e) != 2) return false;
        ids[i] = (int32_t)a->valuedouble;
        logits[i] = (float)b->valuedouble;
        i++;
    }
    return true;
}

static bool parse_int_array(const cJSON *arr, int n, int32_t *out)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return false;
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsNumber(e)) return false;
        out[i++] = (int32_t)e->valuedouble;
    }
    return true;
}

/* Load the whole .jsonl; on success *seqs (caller frees with seq_free + free) and *n_seqs. */
/* *ref_ctx gets the header's n_ctx (0 if absent): the context the reference ran in. */
static tern_status load_ref(const char *path, int n_vocab, struct ref_seq **seqs, int *n_seqs,
                            int *ref_ctx)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot open reference '%s'", path);
    struct ref_seq *sv = NULL;
    int ns = 0, k = 0, lineno = 0, cur = -1, n_pos = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    tern_status st = TERN_OK;
    while (!st && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)len);
        const char *type = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")) : NULL;
        if (!type) {
            st = tern_fail(TERN_ERR_FORMAT, "%s:%d: not a JSON object with a \"type\"", path, lineno);
        } else if (!strcmp(type, "header")) {
            const cJSON *nv = cJSON_GetObjectItem(j, "n_vocab"), *tk = cJSON_GetObjectItem(j, "top_k");
            if (!cJSON_IsNumber(nv) || !cJSON_IsNumber(tk) || tk->valuedouble < 1 || tk->valuedouble > 1000)
                st = tern_fail(TERN_ERR_FORMAT, "%s:%d: header lacks n_vocab/top_k", path, lineno);
            else if ((int)nv->valuedouble != n_vocab)
                st = tern_fail(TERN_ERR_ARG, "%s: reference has n_vocab %d but the model has %d",
                               path, (int)nv->valuedouble, n_vocab);
            else
                k = (int)tk->valuedouble;
            const cJSON *nc = cJSON_GetObjectItem(j, "n_ctx");
            if (cJSON_IsNumber(nc) && nc->valuedouble >= 1 && nc->valuedouble <= (1 << 22))
                *ref_ctx = (int)nc->valuedouble;
        } else if (!strcmp(type, "seq")) {
            const cJSON *n = cJSON_GetObjectItem(j, "n");
            struct ref_seq *nsv = realloc(sv, (size_t)(ns + 1) * sizeof *sv);
            if (!nsv) { st = tern_fail(TERN_ERR_NOMEM, "out of memory"); break; }
            sv = nsv;
            cur = ns++;
            memset(&sv[cur], 0, sizeof sv[cur]);
            if (!k || !cJSON_IsNumber(n) || n->valuedouble < 1 || n->valuedouble > 100000) {
                st = tern_fail(TERN_ERR_FORMAT, "%s:%d: bad seq line", path, lineno);
            } else {
                struct ref_seq *s = &sv[cur];
                s->n = (int)n->valuedouble;
                s->n_top = k;
                s->tokens = malloc((size_t)s->n * sizeof *s->tokens);
                s->top_id = malloc((size_t)s->n * k * sizeof *s->top_id);
                s->top_logit = malloc((size_t)s->n * k * sizeof *s->top_logit);
                if (!s->tokens || !s->top_id || !s->top_logit)
                    st = tern_fail(TERN_ERR_NOMEM, "out of memory");
                else if (!parse_int_array(cJSON_GetObjectItem(j, "tokens"), s->n, s->tokens))
                    st = tern_fail(TERN_ERR_FORMAT, "%s:%d: bad tokens", path, lineno);
                n_pos = 0;
            }
        } else if (!strcmp(type, "pos")) {
            const cJSON *pos = cJSON_GetObjectItem(j, "pos");
            if (cur < 0 || !cJSON_IsNumber(pos) || (int)pos->valuedouble != n_pos || n_pos >= sv[cur].n)
                st = tern_fail(TERN_ERR_FORMAT, "%s:%d: unexpected pos line", path, lineno);
            else if (!parse_top(cJSON_GetObjectItem(j, "top"), k, sv[cur].top_id + (size_t)n_pos * k,
                                sv[cur].top_logit + (size_t)n_pos * k))
                st = tern_fail(TERN_ERR_FORMAT, "%s:%d: bad top list", path, lineno);
            n_pos++;
        } else if (!strcmp(type, "greedy")) {
            const cJSON *toks = cJSON_GetObjectItem(j, "tokens");
            const cJSON *margins = cJSON_GetObjectItem(j, "margins");
            const cJSON *tops = cJSON_GetObjectItem(j, "tops");
            int g = cJSON_GetArraySize(toks);
            struct ref_seq *s = cur >= 0 ? &sv[cur] : NULL;
            if (!s || g < 1 || g > 100000 || cJSON_GetArraySize(margins) != g ||
                cJSON_GetArraySize(tops) != g) {
                st = tern_fail(TERN_ERR_FORMAT, "%s:%d: bad greedy line", path, lineno);
            } else {
                s->n_greedy = g;
                s->greedy = malloc((size_t)g * sizeof *s->greedy);
                s->margin = malloc((size_t)g * sizeof *s->margin);
                s->gtop_id = malloc((size_t)g * k * sizeof *s->gtop_id);
                s->gtop_logit = malloc((size_t)g * k * sizeof *s->gtop_logit);
                if (!s->greedy || !s->margin || !s->gtop_id || !s->gtop_logit) {
                    st = tern_fail(TERN_ERR_NOMEM, "out of memory");
                } else if (!parse_int_array(toks, g, s->greedy)) {
                    st = tern_fail(TERN_ERR_FORMAT, "%s:%d: bad greedy tokens", path, lineno);
                } else {
                    for (int i = 0; i < g && !st; i++) {
                        const cJSON *mv = cJSON_GetArrayItem(margins, i);
                        if (!cJSON_IsNumber(mv) ||
                            !parse_top(cJSON_GetArrayItem(tops, i), k, s->gtop_id + (size_t)i * k,
                                       s->gtop_logit + (size_t)i * k))
                            st = tern_fail(TERN_ERR_FORMAT, "%s:%d: bad greedy step %d", path, lineno, i);
                        else
                            s->margin[i] = (float)mv->valuedouble;
                    }
                }
            }
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    for (int i = 0; !st && i < ns; i++) {
        if (!sv[i].top_id || sv[i].n_greedy == 0)
            st = tern_fail(TERN_ERR_FORMAT, "%s: sequence %d is incomplete", path, i);
        for (int t = 0; !st && t < sv[i].n; t++)
            if (sv[i].tokens[t] < 0 || sv[i].tokens[t] >= n_vocab)
                st = tern_fail(TERN_ERR_FORMAT, "%s: sequence %d token %d out of range", path, i, t);
    }
    if (!st && ns == 0) st = tern_fail(TERN_ERR_FORMAT, "%s: no sequences", path);
    if (st) {
        for (int i = 0; i < ns; i++) seq_free(&sv[i]);
        free(sv);
        return st;
    }
    *seqs = sv;
    *n_seqs = ns;
    return TERN_OK;
}

/* Compare our logits with one reference top-K list; updates the report. */
static void compare_top(const float *ours, int n_vocab, const int32_t *ids, const float *ref,
                        int k, double tol, struct tern_ref_report *r, double *sum_abs)
{
    /* our K-th best value, to judge ids that are in the reference's list but not in ours */
    for (int i = 0; i < k; i++) {
        const int32_t id = ids[i];
        if (id < 0 || id >= n_vocab) continue;
        const double diff = fabs((double)ours[id] - (double)ref[i]);
        if (diff > r->max_abs_top) r->max_abs_top = diff;
        *sum_abs += diff;
        r->top_total++;
        /* rank of id in our logits: count values strictly better than it */
        int better = 0;
        for (int v = 0; v < n_vocab && better < k; v++)
            if (ours[v] > ours[id] || (ours[v] == ours[id] && v < id)) better++;
        const bool in_our_top = better < k;
        const bool near_cut = fabs((double)ref[i] - (double)ref[k - 1]) <= tol;
        if (diff <= tol && (in_our_top || near_cut)) r->top_agree++;
    }
    r->n_vectors++;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double default_tol(const struct tern_model *m)
{
    const struct tern_gguf *g = m->gguf;
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        if (t->n_dims >= 2 && t->type != TERN_TYPE_F32 && t->type != TERN_TYPE_F16 &&
            t->type != TERN_TYPE_BF16)
            return 0.03;
    }
    return 5e-3;
}

/* Full vectors from the .logits.bin beside the .jsonl, if present. */
static tern_status compare_full(struct tern_context *ctx, const struct tern_model *m,
                                const char *jsonl, const struct ref_seq *seqs, int ns,
                                struct tern_ref_report *r)
{
    char path[4096];
    size_t L = strlen(jsonl);
    if (L < 6 || strcmp(jsonl + L - 6, ".jsonl") || L + 5 >= sizeof path) return TERN_OK;
    snprintf(path, sizeof path, "%.*s.logits.bin", (int)(L - 6), jsonl);
    FILE *f = fopen(path, "rb");
    if (!f) return TERN_OK;
    const int nv = m->info.n_vocab;
    uint32_t hdr[4];
    tern_status st = TERN_OK;
    float *ref = malloc((size_t)nv * sizeof *ref);
    if (!ref) { fclose(f); return tern_fail(TERN_ERR_NOMEM, "out of memory"); }
    if (fread(hdr, 4, 4, f) != 4 || memcmp(hdr, "TRNL", 4) || hdr[1] != 1 || hdr[2] != (uint32_t)nv ||
        hdr[3] > 1000)
        st = tern_fail(TERN_ERR_FORMAT, "%s: bad header", path);
    double sum = 0.0;
    size_t count = 0;
    for (uint32_t v = 0; !st && v < hdr[3]; v++) {
        uint32_t sp[2];
        if (fread(sp, 4, 2, f) != 2 || fread(ref, 4, (size_t)nv, f) != (size_t)nv) {
            st = tern_fail(TERN_ERR_FORMAT, "%s: truncated at record %u", path, v);
            break;
        }
        if (sp[0] >= (uint32_t)ns || sp[1] >= (uint32_t)seqs[sp[0]].n) {
            st = tern_fail(TERN_ERR_FORMAT, "%s: record %u names seq %u pos %u", path, v, sp[0], sp[1]);
            break;
        }
        const struct ref_seq *s = &seqs[sp[0]];
        if ((st = tern_kv_truncate(ctx, 0))) break;
        if ((st = tern_decode(ctx, s->tokens, (int)sp[1] + 1, 0, TERN_LOGITS_LAST))) break;
        const float *ours = tern_context_logits(ctx, (int)sp[1]);
        for (int i = 0; i < nv; i++) {
            double d = fabs((double)ours[i] - (double)ref[i]);
            if (d > r->max_abs_full) r->max_abs_full = d;
            sum += d;
        }
        count += (size_t)nv;
    }
    if (!st && count) {
        r->has_full = true;
        r->mean_abs_full = sum / (double)count;
    }
    free(ref);
    fclose(f);
    return st;
}

tern_status tern_ref_check(struct tern_model *m, const char *ref_jsonl, int n_threads, double tol,
                           FILE *log, struct tern_ref_report *out)
{
    const int nv = m->info.n_vocab;
    struct ref_seq *seqs = NULL;
    int ns = 0;
    int ref_ctx = 0;
    tern_status st = load_ref(ref_jsonl, nv, &seqs, &ns, &ref_ctx);
    if (st) return st;
    struct tern_ref_report r = {.tol = tol > 0 ? tol : default_tol(m), .greedy_first_diverge = -1};
    int max_len = 0;
    for (int i = 0; i < ns; i++)
        if (seqs[i].n + seqs[i].n_greedy > max_len) max_len = seqs[i].n + seqs[i].n_greedy;
    /* The reference's context size where it holds the sequences: it can matter (phi3's long
     * RoPE factors are chosen by the context size, in llama.cpp and in tern). */
    struct tern_context_params cp = {.n_ctx = ref_ctx > max_len ? ref_ctx : max_len + 1,
                                     .n_batch = max_len + 1, .n_threads = n_threads};
    struct tern_context *ctx = NULL;
    st = tern_context_create(m, &cp, &ctx);
    double sum_top = 0.0;
    for (int si = 0; !st && si < ns; si++) {
        const struct ref_seq *s = &seqs[si];
        const int k = s->n_top;
        struct tern_ref_report before = r;
        /* 1. the prompt in one batch, logits for every position */
        if ((st = tern_kv_truncate(ctx, 0))) break;
        if ((st = tern_decode(ctx, s->tokens, s->n, 0, TERN_LOGITS_ALL))) break;
        for (int i = 0; i < s->n; i++)
            compare_top(tern_context_logits(ctx, i), nv, s->top_id + (size_t)i * k,
                        s->top_logit + (size_t)i * k, k, r.tol, &r, &sum_top);
        /* 2. teacher forcing: feed the reference's greedy tokens one at a time */
        for (int g = 0; g + 1 < s->n_greedy && !st; g++) {
            if ((st = tern_decode(ctx, &s->greedy[g], 1, s->n + g, TERN_LOGITS_LAST))) break;
            compare_top(tern_context_logits(ctx, 0), nv, s->gtop_id + (size_t)(g + 1) * k,
                        s->gtop_logit + (size_t)(g + 1) * k, k, r.tol, &r, &sum_top);
        }
        if (st) break;
        /* 3. free-running greedy: must agree while the reference margin is clearly decisive */
        if ((st = tern_kv_truncate(ctx, 0))) break;
        if ((st = tern_decode(ctx, s->tokens, s->n, 0, TERN_LOGITS_LAST))) break;
        const float *lg = tern_context_logits(ctx, s->n - 1);
        for (int g = 0; g < s->n_greedy; g++) {
            int32_t tok = argmax(lg, nv);
            if (tok != s->greedy[g]) {
                if (s->margin[g] > 2 * r.tol) {
                    r.greedy_checked++;
                    if (r.greedy_first_diverge < 0) r.greedy_first_diverge = g;
                }
                break; /* contexts differ from here on: stop comparing this sequence */
            }
            if (s->margin[g] > 2 * r.tol) {
                r.greedy_checked++;
                r.greedy_match++;
            }
            if (g + 1 == s->n_greedy) break;
            if ((st = tern_decode(ctx, &tok, 1, s->n + g, TERN_LOGITS_LAST))) break;
            lg = tern_context_logits(ctx, 0);
        }
        if (log)
            fprintf(log, "seq %d (%d tokens): top-%d agree %d/%d, max |dlogit| %.3g; greedy "
                         "decisive steps matched %d/%d\n",
                    si, s->n, k, r.top_agree - before.top_agree, r.top_total - before.top_total,
                    r.max_abs_top, r.greedy_match - before.greedy_match,
                    r.greedy_checked - before.greedy_checked);
    }
    if (!st) st = compare_full(ctx, m, ref_jsonl, seqs, ns, &r);
    tern_context_free(ctx);
    for (int i = 0; i < ns; i++) seq_free(&seqs[i]);
    free(seqs);
    if (st) return st;
    r.n_seqs = ns;
    r.mean_abs_top = r.top_total ? sum_top / r.top_total : 0.0;
    r.pass = r.max_abs_top <= r.tol && r.top_agree == r.top_total &&
             (!r.has_full || r.max_abs_full <= r.tol) && r.greedy_match == r.greedy_checked;
    *out = r;
    return TERN_OK;
}
