/* distill_weights.c — the weights of the latency-aware losses, laid on the rows of a
 * distillation step (read the recipe's fields in tern.h first).
 *
 * Both losses are the step's own KD + CE terms, weighted, so their gradient is the usual one
 * scaled per row and nothing else changes in the forward or backward pass:
 * - early tool-call loss: a row whose target is token j < early_tool_n of an answer that should
 *   call tools (the mask byte 2 + j, set at rendering only when every call validates against its
 *   tools' schemas with the evaluation's validator) weighs 1 + early_tool_weight x ramp, where
 *   the ramp grows from 0 to 1 over the first early_tool_warmup_epochs passes over the data, so
 *   the student learns the answers before it is pushed to open them with the call;
 * - document weights (tern_trainer_set_doc_weights): length-aware KD, whose weights come from
 *   the student's own answers (tern distill writes them: tools/tern/cli_distill_length.c) through
 *   tern_length_kd_weight below.
 * The safety rail scales both weights' excess over 1 (halved while validation CE is too far above
 * its best). Validation batches are unweighted, so validation figures stay comparable across
 * recipes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"
#include "util/error.h"

void train_latency_weights(struct tern_trainer *t, const struct tern_train_data *d)
{
    t->early_ramp = 0.0;
    for (int m = 1; m < 256; m++) t->row_w[m] = 1.0f;
    const struct tern_distill_recipe *r = &t->recipe;
    if (!t->distill || !(r->early_tool_weight > 0.0f)) return;
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
    train_data_view(d, &n_docs, &n_tok, &off, &tok, &mask);
    /* passes over the data so far: the epoch and how far into it this step starts */
    /* the bucket sampler draws with replacement: its passes are the tokens drawn over the data's */
    const double epochs = train_buckets_on(t)
        ? (n_tok ? (double)t->micro * (double)t->N / (double)n_tok : 0.0)
        : (double)t->dpos.epoch + (n_docs ? (double)t->dpos.cursor / (double)n_docs : 0.0);
    double ramp = r->early_tool_warmup_epochs > 0.0f ? epochs / r->early_tool_warmup_epochs : 1.0;
    if (ramp > 1.0) ramp = 1.0;
    t->early_ramp = ramp;
    const float w = (float)(1.0 + r->early_tool_weight * ramp * t->latency_scale);
    for (int j = 0; j < r->early_tool_n && 2 + j < 256; j++) t->row_w[2 + j] = w;
}

tern_status tern_trainer_set_doc_weights(struct tern_trainer *t, const float *w, uint64_t n)
{
    if (!w) {
        free(t->doc_w);
        t->doc_w = NULL;
        t->doc_w_n = 0;
        return TERN_OK;
    }
    for (uint64_t i = 0; i < n; i++)
        if (!(w[i] >= 1.0f) || !isfinite(w[i]))
            return tern_fail(TERN_ERR_ARG, "distill: document %llu's weight %g must be finite and "
                             ">= 1", (unsigned long long)i, (double)w[i]);
    float *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return tern_fail(TERN_ERR_NOMEM, "distill: out of memory for %llu document weights",
                             (unsigned long long)n);
    memcpy(c, w, n * sizeof *c);
    free(t->doc_w);
    t->doc_w = c;
    t->doc_w_n = n;
    return TERN_OK;
}

float tern_length_kd_weight(const struct tern_distill_recipe *r, int n_student, int n_teacher,
                            bool covered)
{
    if (covered || n_teacher <= 0 || !(r->length_kd_weight > 0.0f)) return 1.0f;
    const double excess = (double)(n_student - n_teacher) / n_teacher - r->length_kd_hinge;
    if (!(excess > 0.0)) return 1.0f;
    return (float)(1.0 + (double)r->length_kd_weight * r->length_kd_slope * excess);
}

double tern_trainer_latency_rail(struct tern_trainer *t, double val_ce, bool *changed)
{
    const double before = t->latency_scale;
    const double rise = t->distill ? t->recipe.rail_ce_rise : 0.0;
    if (rise > 0.0 && isfinite(val_ce)) {
        if (val_ce > t->rail_best_ce * (1.0 + rise)) t->latency_scale *= 0.5;
        else if (t->latency_scale < 1.0) t->latency_scale = fmin(1.0, 2.0 * t->latency_scale);
        if (val_ce < t->rail_best_ce) t->rail_best_ce = val_ce;
    }
    if (changed) *changed = t->latency_scale != before;
    return t->latency_scale;
}
