/* type_plan.h — which weight type each tensor gets when a model is written in a given "mix"
 * (a plain type like q8_0, or q4_k_m: llama.cpp's Q4_K with Q6_K for output/embeddings and for
 * attn_v/ffn_down in some layers). Shared by tern synth and tern quantize. */
#ifndef TERN_MODEL_TYPE_PLAN_H
#define TERN_MODEL_TYPE_PLAN_H

#include <stdint.h>

#include "tern.h"

struct type_plan {
    int base;       /* enum tern_type */
    bool q4_k_m;    /* apply the Q4_K_M per-tensor rule */
};

/* Parse "q8_0", "Q4_K", "q4_k_m", ...; TERN_ERR_ARG naming the accepted names otherwise. */
tern_status type_plan_parse(const char *name, struct type_plan *out);

/* Type for tensor `kind` ("token_embd", "output", "attn_q", "attn_v", "ffn_down", ...) of layer
 * il of n_layer with rows of `cols` elements; falls back to Q8_0 (counted in *fallbacks) when
 * the block size does not divide cols. */
int type_plan_pick(const struct type_plan *p, const char *kind, int il, int n_layer, int64_t cols,
                   int *fallbacks);

#endif
