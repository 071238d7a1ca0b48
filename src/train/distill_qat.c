/* distill_qat.c — quantization-aware training: in the QAT steps the forward and
 * backward passes read a copy of the weights rounded to the export format, and the gradient
 * they produce updates the F32 master weights as if the rounding were the identity (the
 * straight-through estimator). Each tensor gets the type tern quantize gives it for the recipe's
 * qat_type (type_plan_pick, with its fallbacks), and is rounded row by row with the quant room's
 * own quantize + dequantize, so at the end the QAT forward's weights are exactly the weights of
 * the quantized export (tern quantize of the exported F32 file). 1-D tensors (norms, biases)
 * stay F32, as tern quantize leaves them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "convert/type_plan.h"
#include "train/distill.h"
#include "train/train_internal.h"
#include "util/error.h"

/* "blk.3.attn_q.weight" -> "attn_q", 3 (tern quantize's naming of a tensor's kind) */
static void kind_of(const char *name, char *kind, size_t cap, int *il)
{
    *il = 0;
    const char *p = name;
    if (!strncmp(p, "blk.", 4)) {
        *il = atoi(p + 4);
        p = strchr(p + 4, '.');
        p = p ? p + 1 : name;
    }
    snprintf(kind, cap, "%s", p);
    char *dot = strchr(kind, '.');
    if (dot) *dot = 0;
}

tern_status train_qat_prepare(struct tern_trainer *t, const char *type_name)
{
    struct type_plan plan;
    tern_status st = type_plan_parse(type_name, &plan);
    if (st) return st;
    plan.has_output = !t->c.tied_output;
    free(t->qtype);
    t->qtype = calloc((size_t)t->n_tensors, sizeof *t->qtype);
    if (!t->qtype) return tern_fail(TERN_ERR_NOMEM, "train: out of memory");
    size_t row_bytes = 0;
    for (int i = 0; i < t->n_tensors; i++) {
        const struct train_tensor *x = &t->tensors[i];
        if (x->n_dims != 2) {
            t->qtype[i] = TERN_TYPE_F32;
            continue;
        }
        char kind[48];
        int il;
        kind_of(x->name, kind, sizeof kind, &il);
        t->qtype[i] = type_plan_pick(&plan, kind, il, t->L, x->ne[0], NULL);
        const size_t rb = (size_t)(x->ne[0] / tern_type_block_size(t->qtype[i])) *
                          (size_t)tern_type_block_bytes(t->qtype[i]);
        if (rb > row_bytes) row_bytes = rb;
    }
    free(t->qbuf);
    t->qbuf_bytes = (row_bytes + 63) & ~(size_t)63;
    t->qbuf = malloc(t->qbuf_bytes * (size_t)t->n_threads + 64);
    if (!t->wq && posix_memalign((void **)&t->wq, 64, t->n_params * sizeof(float))) t->wq = NULL;
    if (!t->qbuf || !t->wq)
        return tern_fail(TERN_ERR_NOMEM, "train: out of memory for the QAT weights (%.1f MiB)",
                         t->n_params * 4.0 / 1048576.0);
    memset(t->wq, 0, t->n_params * sizeof(float));
    return TERN_OK;
}

static void qat_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    struct tern_trainer *t = arg;
    unsigned char *buf = t->qbuf + (size_t)tid * t->qbuf_bytes;
    for (int i = chunk; i < t->n_tensors; i += n_chunks) {
        const struct train_tensor *x = &t->tensors[i];
        const float *src = t->w + x->off;
        float *dst = t->wq + x->off;
        const int type = t->qtype[i];
        if (type == TERN_TYPE_F32) {
            memcpy(dst, src, (size_t)(x->ne[0] * x->ne[1]) * sizeof(float));
            continue;
        }
        for (int64_t r = 0; r < x->ne[1]; r++) {
            /* the types were picked so that a row holds whole blocks: these cannot fail */
            const tern_status q = tern_quantize_row(type, src + r * x->ne[0], buf, x->ne[0]);
            const tern_status d = tern_dequantize_row(type, buf, dst + r * x->ne[0], x->ne[0]);
            TERN_ASSERT(q == TERN_OK && d == TERN_OK);
            (void)q, (void)d;
        }
    }
}

void train_qat_apply(struct tern_trainer *t)
{
    train_par(t, qat_chunk, t, t->n_tensors);
}
