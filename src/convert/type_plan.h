/* type_plan.h — which weight type each tensor gets when a model is written in a given "mix"
 * (a plain type like q8_0, or q4_k_m: llama.cpp's Q4_K with Q6_K for the output matrix and for
 * attn_v/ffn_down in some layers). Shared by tern synth and tern quantize.
 *
 * q4_k_m follows llama-quantize's rules for LLAMA_FTYPE_MOSTLY_Q4_K_M without an importance
 * matrix (llama.cpp src/llama-quant.cpp, llama_tensor_get_type), for llama/qwen2-style dense
 * models: output.weight — or token_embd.weight when the model has no output.weight (tied
 * embeddings) — is Q6_K, or Q8_0 when its rows are not a multiple of 256; attn_v and ffn_down
 * are Q6_K in the layers use_more_bits picks; everything else is Q4_K. Then every type whose
 * block does not divide the rows falls back as llama-quantize does: Q4_K -> Q5_0, Q6_K -> Q8_0,
 * Q5_K -> Q5_1, and F16 when even that block does not fit. q5_k_m is the same rule with Q5_K
 * as the base type (LLAMA_FTYPE_MOSTLY_Q5_K_M). Plain types are "pure" (llama-quantize --pure):
 * every 2-D weight gets that type, with the same fallbacks. */
#ifndef TERN_CONVERT_TYPE_PLAN_H
#define TERN_CONVERT_TYPE_PLAN_H

#include <stdint.h>

#include "tern_gguf.h"

struct type_plan {
    int base;        /* enum tern_type */
    bool q4_k_m;     /* apply the Q4_K_M / Q5_K_M per-tensor rule (base Q4_K / Q5_K) */
    bool keep;       /* "keep": every tensor stays in its own type (re-encoded: an adapter merge
                        into a model of the same types as its base) */
    bool has_output; /* the model has an output.weight (false: token_embd is the output matrix
                        too and gets its type); type_plan_parse sets false */
};

/* Parse "q8_0", "Q4_K", "q4_k_m", ...; TERN_ERR_ARG naming the accepted names otherwise. */
TERN_NODISCARD tern_status type_plan_parse(const char *name, struct type_plan *out);

/* Type for tensor `kind` ("token_embd", "output", "attn_q", "attn_v", "ffn_down", ...) of layer
 * il of n_layer with rows of `cols` elements; a fallback (see above) is counted in *fallbacks. */
int type_plan_pick(const struct type_plan *p, const char *kind, int il, int n_layer, int64_t cols,
                   int *fallbacks);

#endif
