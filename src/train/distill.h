/* distill.h — internals of tern distill shared by src/train/distill_*.c and the trainer (read the
 * "distillation" section of tern.h first).
 *
 * The teacher-signal cache is one file, mapped read-only: a header, the first entry of each
 * document, then fixed-size entries {i32 id[k], f32 logp[k], f32 tail}. Entry order is the data
 * order: document by document, piece by piece, row by row, only the rows whose next token is
 * trained on. So the trainer finds a row's entry from (document, piece, row) alone:
 * doc_first[doc] plus the qualifying rows before it (train_kd_rows_before). */
#ifndef TERN_TRAIN_DISTILL_H
#define TERN_TRAIN_DISTILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern_train.h"

#define KD_MAGIC "TKDC"
#define KD_VERSION 1u
#define KD_HEADER 136 /* bytes; doc_first follows, 8-aligned */
#define KD_MAX_K 1024

struct tern_distill_cache {
    unsigned char *buf;     /* the whole file (mapped, or malloc'ed for open_memory) */
    size_t size;
    bool mapped;
    char name[512];         /* file name for messages */
    uint32_t k, V, n_ctx;
    float tau;
    uint64_t n_docs, n_entries;
    uint8_t teacher_fp[32], data_fp[32], sum[32];
    const uint64_t *doc_first; /* (n_docs + 1) */
    const unsigned char *entries;
    size_t entry_bytes;     /* 8 k + 4 */
};

static inline const int32_t *kd_ids(const struct tern_distill_cache *c, uint64_t i)
{
    return (const int32_t *)(c->entries + i * c->entry_bytes);
}
static inline const float *kd_logp(const struct tern_distill_cache *c, uint64_t i)
{
    return (const float *)(c->entries + i * c->entry_bytes) + c->k;
}
static inline float kd_tail(const struct tern_distill_cache *c, uint64_t i)
{
    return kd_logp(c, i)[c->k];
}

/* Rows of document doc (tokens tok[a..a+len), masks mask) with a trained next token inside the
 * same n_ctx piece, among the first `before` positions: row j counts when (j + 1) % n_ctx != 0
 * and mask[j + 1]. The trainer and the cache builder share this rule. */
uint64_t train_kd_rows_before(const uint8_t *mask, uint64_t len, uint64_t before, int n_ctx);

/* The per-row loss of a distillation step (distill_loss.c). logits (V) of one student row are
 * replaced by the gradient of scale * w * (w_kd tau^2 KL + w_ce CE): KL between the teacher's
 * top-k distribution with its tail as one outcome (ids, logp, tail; k entries) and the student's
 * softmax at tau bucketed alike, CE of target at temperature 1. scratch: V floats. */
struct kd_row {
    double kl, ce;          /* unweighted, nats */
    bool agree;             /* student argmax (lowest id on ties) == ids[0] */
};
void train_kd_row(float *logits, int V, int32_t target, float w, const int32_t *ids,
                  const float *logp, float tail, int k, float tau, float w_kd, float w_ce,
                  double scale, float *scratch, struct kd_row *out);

/* QAT (distill_qat.c): the weights the forward pass reads during QAT steps, each matrix rounded
 * to the type tern quantize gives it for the recipe's qat_type (quantize + dequantize per row);
 * norms and biases as they are. Gradients flow to the master weights unchanged (straight-through
 * estimator). prepare allocates; apply runs once per QAT step. */
struct tern_trainer;
TERN_NODISCARD tern_status train_qat_prepare(struct tern_trainer *t, const char *type_name);
void train_qat_apply(struct tern_trainer *t);

#endif
