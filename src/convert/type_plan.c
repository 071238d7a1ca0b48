/* type_plan.c — see type_plan.h. */
#include "convert/type_plan.h"

#include <string.h>
#include <strings.h>

#include "quant/quant.h"
#include "util/error.h"

tern_status type_plan_parse(const char *name, struct type_plan *out)
{
    if (!strcasecmp(name, "keep")) {
        *out = (struct type_plan){.base = TERN_TYPE_F32, .keep = true};
        return TERN_OK;
    }
    if (!strcasecmp(name, "q4_k_m") || !strcasecmp(name, "q5_k_m")) {
        *out = (struct type_plan){.base = name[1] == '4' ? TERN_TYPE_Q4_K : TERN_TYPE_Q5_K,
                                  .q4_k_m = true};
        return TERN_OK;
    }
    int t;
    const struct quant_traits *tr = NULL;
    if (tern_type_from_name(name, &t) == TERN_OK) tr = quant_traits_get(t);
    if (!tr || !tr->vec_dot_ref) /* unknown, unsupported or activation-only (Q8_1, Q8_K) */
        return tern_fail(TERN_ERR_ARG, "unknown or unsupported weight type '%s' (use f32, f16, "
                         "bf16, q8_0, q5_1, q5_0, q4_1, q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m or keep)",
                         name);
    *out = (struct type_plan){.base = t, .q4_k_m = false};
    return TERN_OK;
}

/* llama.cpp's rule for the layers whose attn_v / ffn_down get more bits in Q4_K_M. */
static bool use_more_bits(int il, int n)
{
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

int type_plan_pick(const struct type_plan *p, const char *kind, int il, int n_layer, int64_t cols,
                   int *fallbacks)
{
    int t = p->base;
    if (p->q4_k_m) {
        if (!strcmp(kind, "output") || (!p->has_output && !strcmp(kind, "token_embd")))
            /* llama.cpp tests the rows against the mix's base block (Q4_K: 256) here */
            t = cols % tern_type_block_size(p->base) ? TERN_TYPE_Q8_0 : TERN_TYPE_Q6_K;
        else if ((!strcmp(kind, "attn_v") || !strcmp(kind, "ffn_down")) && use_more_bits(il, n_layer))
            t = TERN_TYPE_Q6_K;
    }
    if (cols % tern_type_block_size(t) != 0) {
        if (fallbacks) (*fallbacks)++;
        /* llama-quantize's fallbacks: the 32-element format closest in bits per weight */
        t = t == TERN_TYPE_Q4_K   ? TERN_TYPE_Q5_0
            : t == TERN_TYPE_Q5_K ? TERN_TYPE_Q5_1
            : t == TERN_TYPE_Q6_K ? TERN_TYPE_Q8_0
                                  : t;
        if (cols % tern_type_block_size(t) != 0) t = TERN_TYPE_F16;
    }
    return t;
}
