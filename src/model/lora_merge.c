/* lora_merge.c — tern_quantize_model_lora: a model file rewritten with adapters merged into
 * its weights, W' = W + sum scale * B A, through src/convert's rewriter (convert.h) whose hook
 * gets each weight row in F32 between dequantizing and quantizing. Read lora.h first.
 *
 * Row r of an adapted matrix gains sum_k B[r][k] A[k][:] per term (A's rows are the rank
 * rows); the embeddings' flipped pair gives row v sum_k A[v][k] B[:][k]. The deltas are summed
 * in F32 in the order the terms are given, the adapters' as tern_context_set_adapters orders
 * them. */
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "model/lora.h"
#include "util/error.h"

struct merge {
    struct tern_lora *const *adapters;
    const float *scales;
    int n;
    const struct tern_model *m;
    /* the current tensor's terms: (adapter, target) */
    int n_cur;
    const struct tern_lora *cur_a[16];
    const struct lora_target *cur_t[16];
    float *tmp;    /* (the widest adapted row) one term's delta */
};

static int merge_find(void *user, const char *name, int64_t cols, int64_t rows)
{
    struct merge *mg = user;
    mg->n_cur = 0;
    for (int i = 0; i < mg->n; i++)
        for (int k = 0; k < mg->adapters[i]->n_targets; k++) {
            const struct lora_target *t = &mg->adapters[i]->t[k];
            if (strcmp(t->name, name) || t->n_in != cols || t->n_out != rows) continue;
            mg->cur_a[mg->n_cur] = mg->adapters[i];
            mg->cur_t[mg->n_cur++] = t;
        }
    return mg->n_cur ? 0 : -1;
}

static void merge_add_row(void *user, int h, int64_t r, float *row)
{
    (void)h;
    struct merge *mg = user;
    for (int j = 0; j < mg->n_cur; j++) {
        const struct lora_target *t = mg->cur_t[j];
        int ai = 0;
        while (mg->adapters[ai] != mg->cur_a[j]) ai++;
        const float sc = lora_scale(mg->cur_a[j], t, mg->scales ? mg->scales[ai] : 1.0f);
        float *d = mg->tmp;
        if (t->slot == lora_slot_embd(mg->m)) {
            const float *av = t->a + (size_t)r * t->rank;
            for (int64_t c = 0; c < t->n_in; c++) d[c] = 0.0f;
            for (int k = 0; k < t->rank; k++) {
                const float *bk = t->bt + (size_t)k * t->n_in;
                for (int64_t c = 0; c < t->n_in; c++) d[c] += av[k] * bk[c];
            }
        } else {
            /* rank rows of A, each scaled by B[r][k], summed in k order */
            for (int64_t c = 0; c < t->n_in; c++) d[c] = 0.0f;
            for (int k = 0; k < t->rank; k++) {
                const float brk = t->bt[(size_t)k * t->n_out + r];
                const float *ak = t->a + (size_t)k * t->n_in;
                for (int64_t c = 0; c < t->n_in; c++) d[c] += brk * ak[c];
            }
        }
        for (int64_t c = 0; c < t->n_in; c++) row[c] += sc * d[c];
    }
}

tern_status tern_quantize_model_lora(const char *in_path, const char *out_path,
                                     const char *type_name, struct tern_lora *const *adapters,
                                     const float *scales, int n, int *n_fallbacks)
{
    if (n < 0 || n > LORA_MAX_ADAPTERS || (n && !adapters))
        return tern_fail(TERN_ERR_ARG, "tern_quantize_model_lora: %d adapters (at most %d)", n,
                         LORA_MAX_ADAPTERS);
    for (int i = 0; i < n; i++) {
        if (!adapters[i]) return tern_fail(TERN_ERR_ARG, "tern_quantize_model_lora: adapter %d is NULL", i);
        if (adapters[i]->model->gguf != adapters[0]->model->gguf)
            return tern_fail(TERN_ERR_ARG, "tern_quantize_model_lora: adapters %d and 0 were loaded "
                             "for different models", i);
    }
    struct merge mg = {.adapters = adapters, .scales = scales, .n = n,
                       .m = n ? adapters[0]->model : NULL};
    /* every target must be a tensor of in_path of its shape, else it would go unmerged */
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(in_path, &g);
    if (st) return st;
    for (int i = 0; i < n && !st; i++)
        for (int k = 0; k < adapters[i]->n_targets && !st; k++) {
            const struct lora_target *t = &adapters[i]->t[k];
            const struct tern_gguf_tensor *bt = tern_gguf_find_tensor(g, t->name);
            if (!bt || bt->n_dims != 2 || bt->ne[0] != t->n_in || bt->ne[1] != t->n_out)
                st = tern_fail(TERN_ERR_ARG, "%s: adapter %d's tensor '%s' is not in this file "
                               "with its shape (the adapter was loaded for another model)", in_path,
                               i, t->name);
        }
    tern_gguf_close(g);
    if (st) return st;
    int64_t cols = 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < adapters[i]->n_targets; k++)
            if (adapters[i]->t[k].n_in > cols) cols = adapters[i]->t[k].n_in;
    mg.tmp = malloc((size_t)cols * sizeof(float));
    if (!mg.tmp) return tern_fail(TERN_ERR_NOMEM, "tern_quantize_model_lora: out of memory");
    const struct convert_row_hook hook = {.user = &mg, .find = merge_find, .add_row = merge_add_row};
    /* the merged model is used as base + adapter is: with the template the adapter was trained
     * with (the first adapter's that carries one) */
    const char *tmpl = NULL;
    for (int i = 0; i < n && !tmpl; i++) tmpl = adapters[i]->chat_template;
    const struct convert_opts opts = {.hook = n ? &hook : NULL, .chat_template = tmpl};
    st = convert_quantize_model(in_path, out_path, type_name, &opts, n_fallbacks);
    free(mg.tmp);
    return st;
}
