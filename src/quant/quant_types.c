/* quant_types.c — the table of GGUF tensor types: names and block sizes of every id GGUF
 * defines (so errors can name a type tern does not support), the traits of the supported ones,
 * and the public tern_type_* / tern_quantize_row / tern_dequantize_row entry points.
 *
 * Read quant.h first. Block sizes of unsupported types are listed too: the GGUF reader needs
 * them to check that a tensor's data lies inside the file even when tern will refuse to use it. */
#include "quant/quant.h"

#include <ctype.h>
#include <stdio.h>

#include "util/error.h"

struct type_info {
    const char *name;   /* NULL: id not defined by GGUF (removed or never used) */
    int64_t block_size;
    int64_t block_bytes;
};

static const struct type_info type_table[TERN_TYPE_COUNT_] = {
    [TERN_TYPE_F32] = {"F32", 1, 4},         [TERN_TYPE_F16] = {"F16", 1, 2},
    [TERN_TYPE_Q4_0] = {"Q4_0", 32, 18},     [TERN_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [TERN_TYPE_Q5_0] = {"Q5_0", 32, 22},     [TERN_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [TERN_TYPE_Q8_0] = {"Q8_0", 32, 34},     [TERN_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [TERN_TYPE_Q2_K] = {"Q2_K", 256, 84},    [TERN_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [TERN_TYPE_Q4_K] = {"Q4_K", 256, 144},   [TERN_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [TERN_TYPE_Q6_K] = {"Q6_K", 256, 210},   [TERN_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [TERN_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [TERN_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [TERN_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [TERN_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [TERN_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18}, [TERN_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [TERN_TYPE_IQ2_S] = {"IQ2_S", 256, 82},  [TERN_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [TERN_TYPE_I8] = {"I8", 1, 1},           [TERN_TYPE_I16] = {"I16", 1, 2},
    [TERN_TYPE_I32] = {"I32", 1, 4},         [TERN_TYPE_I64] = {"I64", 1, 8},
    [TERN_TYPE_F64] = {"F64", 1, 8},         [TERN_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [TERN_TYPE_BF16] = {"BF16", 1, 2},
    /* 31-33 and 36-38 were interleaved Q4_0 / IQ4_NL repacks, removed from GGUF files; they
     * keep a name for messages but no size (a file using them is refused). */
    [31] = {"Q4_0_4_4", 0, 0},               [32] = {"Q4_0_4_8", 0, 0},
    [33] = {"Q4_0_8_8", 0, 0},
    [TERN_TYPE_TQ1_0] = {"TQ1_0", 256, 54},  [TERN_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [36] = {"IQ4_NL_4_4", 0, 0},             [37] = {"IQ4_NL_4_8", 0, 0},
    [38] = {"IQ4_NL_8_8", 0, 0},
};

static const struct quant_traits traits_table[] = {
    {TERN_TYPE_F32, "F32", 1, 4, TERN_TYPE_F32, quant_f32_from_float, quant_f32_to_float,
     quant_f32_dot_ref, quant_f32_from_float},
    {TERN_TYPE_F16, "F16", 1, 2, TERN_TYPE_F16, quant_f16_from_float, quant_f16_to_float,
     quant_f16_dot_ref, quant_f16_from_float},
    {TERN_TYPE_BF16, "BF16", 1, 2, TERN_TYPE_BF16, quant_bf16_from_float, quant_bf16_to_float,
     quant_bf16_dot_ref, quant_bf16_from_float},
    {TERN_TYPE_Q4_0, "Q4_0", 32, 18, TERN_TYPE_Q8_0, quant_q4_0_from_float, quant_q4_0_to_float,
     quant_q4_0_dot_ref, quant_q4_0_from_float},
    {TERN_TYPE_Q4_1, "Q4_1", 32, 20, TERN_TYPE_Q8_1, quant_q4_1_from_float, quant_q4_1_to_float,
     quant_q4_1_dot_ref, quant_q4_1_from_float},
    {TERN_TYPE_Q5_0, "Q5_0", 32, 22, TERN_TYPE_Q8_0, quant_q5_0_from_float, quant_q5_0_to_float,
     quant_q5_0_dot_ref, quant_q5_0_from_float},
    {TERN_TYPE_Q5_1, "Q5_1", 32, 24, TERN_TYPE_Q8_1, quant_q5_1_from_float, quant_q5_1_to_float,
     quant_q5_1_dot_ref, quant_q5_1_from_float},
    {TERN_TYPE_Q8_0, "Q8_0", 32, 34, TERN_TYPE_Q8_0, quant_q8_0_from_float_act,
     quant_q8_0_to_float, quant_q8_0_dot_ref, quant_q8_0_from_float_ref},
    {TERN_TYPE_Q4_K, "Q4_K", 256, 144, TERN_TYPE_Q8_K, quant_q4_K_from_float,
     quant_q4_K_to_float, quant_q4_K_dot_ref, quant_q4_K_from_float},
    {TERN_TYPE_Q5_K, "Q5_K", 256, 176, TERN_TYPE_Q8_K, quant_q5_K_from_float,
     quant_q5_K_to_float, quant_q5_K_dot_ref, quant_q5_K_from_float},
    {TERN_TYPE_Q6_K, "Q6_K", 256, 210, TERN_TYPE_Q8_K, quant_q6_K_from_float,
     quant_q6_K_to_float, quant_q6_K_dot_ref, quant_q6_K_from_float},
    /* activation-only: no weight matrix is Q8_1 or Q8_K, so they have no dot product of their
     * own (from_float_ref of Q8_1 is the activation quantizer too: tern never writes Q8_1) */
    {TERN_TYPE_Q8_1, "Q8_1", 32, 36, TERN_TYPE_Q8_1, quant_q8_1_from_float_act,
     quant_q8_1_to_float, NULL, quant_q8_1_from_float_act},
    {TERN_TYPE_Q8_K, "Q8_K", 256, 292, TERN_TYPE_Q8_K, quant_q8_K_from_float,
     quant_q8_K_to_float, NULL, quant_q8_K_from_float},
};

const struct quant_traits *quant_traits_get(int type)
{
    for (size_t i = 0; i < sizeof traits_table / sizeof traits_table[0]; i++)
        if (traits_table[i].type == type) return &traits_table[i];
    return NULL;
}

static const struct type_info *type_info_get(int type)
{
    if (type < 0 || type >= TERN_TYPE_COUNT_ || !type_table[type].name) return NULL;
    return &type_table[type];
}

size_t quant_row_bytes(int type, int64_t n)
{
    const struct type_info *ti = type_info_get(type);
    if (!ti || ti->block_size == 0 || n < 0) return 0;
    return (size_t)(n / ti->block_size) * (size_t)ti->block_bytes;
}

const char *tern_type_name(int type)
{
    const struct type_info *ti = type_info_get(type);
    if (ti) return ti->name;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "unknown(%d)", type);
    return buf;
}

bool tern_type_is_supported(int type) { return quant_traits_get(type) != NULL; }

int64_t tern_type_block_size(int type)
{
    const struct type_info *ti = type_info_get(type);
    return ti ? ti->block_size : 0;
}

int64_t tern_type_block_bytes(int type)
{
    const struct type_info *ti = type_info_get(type);
    return ti ? ti->block_bytes : 0;
}

tern_status tern_type_from_name(const char *name, int *type_out)
{
    if (!name) return tern_fail(TERN_ERR_ARG, "tensor type name is NULL");
    for (int t = 0; t < TERN_TYPE_COUNT_; t++) {
        const char *tn = type_table[t].name;
        if (!tn) continue;
        size_t i = 0;
        while (tn[i] && name[i] && toupper((unsigned char)name[i]) == tn[i]) i++;
        if (!tn[i] && !name[i]) {
            *type_out = t;
            return TERN_OK;
        }
    }
    return tern_fail(TERN_ERR_ARG, "unknown tensor type name \"%s\" (expected F32, F16, BF16, "
                                   "Q8_0, Q5_1, Q5_0, Q4_1, Q4_0, Q4_K, Q5_K, Q6_K ...)", name);
}

static tern_status check_row(const char *what, int type, int64_t n,
                             const struct quant_traits **out)
{
    const struct quant_traits *tr = quant_traits_get(type);
    if (!tr)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: tensor type %s (%d) is not supported", what,
                         tern_type_name(type), type);
    if (n < 0 || n % tr->block_size != 0)
        return tern_fail(TERN_ERR_ARG, "%s: row of %lld elements is not a multiple of the %s "
                         "block size %lld", what, (long long)n, tr->name,
                         (long long)tr->block_size);
    *out = tr;
    return TERN_OK;
}

tern_status tern_quantize_row(int type, const float *src, void *dst, int64_t n)
{
    const struct quant_traits *tr = NULL;
    tern_status st = check_row("quantize", type, n, &tr);
    if (st != TERN_OK) return st;
    tr->from_float_ref(src, dst, n);
    return TERN_OK;
}

tern_status tern_dequantize_row(int type, const void *src, float *dst, int64_t n)
{
    const struct quant_traits *tr = NULL;
    tern_status st = check_row("dequantize", type, n, &tr);
    if (st != TERN_OK) return st;
    tr->to_float(src, dst, n);
    return TERN_OK;
}
