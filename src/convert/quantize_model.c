/* quantize_model.c — tern_quantize_model: rewrite a GGUF model with its 2-D weights in another
 * type (tern quantize). Metadata is copied verbatim (general.file_type and
 * general.quantization_version set as llama-quantize sets them); 1-D tensors
 * (norms, biases) stay as they are. Each weight is dequantized to F32 and quantized with tern's
 * reference quantizers, so quantizing an F16/F32 file gives what llama-quantize gives without an
 * importance matrix. Written atomically through the GGUF writer (tmp + rename). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "convert/type_plan.h"
#include "quant/quant.h"
#include "util/error.h"

/* llama.cpp's general.file_type values for the mixes tern writes. */
static uint32_t file_type_of(const struct type_plan *p)
{
    if (p->q4_k_m) return p->base == TERN_TYPE_Q5_K ? 17 : 15; /* MOSTLY_Q5_K_M, _Q4_K_M */
    switch (p->base) {
    case TERN_TYPE_F32: return 0;
    case TERN_TYPE_F16: return 1;
    case TERN_TYPE_Q4_0: return 2;
    case TERN_TYPE_Q4_1: return 3;
    case TERN_TYPE_Q5_0: return 8;
    case TERN_TYPE_Q5_1: return 9;
    case TERN_TYPE_Q8_0: return 7;
    case TERN_TYPE_Q4_K: return 14;
    case TERN_TYPE_Q5_K: return 16; /* MOSTLY_Q5_K_S: pure, like q4_k's 14 */
    case TERN_TYPE_Q6_K: return 18;
    case TERN_TYPE_BF16: return 32;
    }
    return 0;
}

/* "blk.12.attn_v.weight" -> kind "attn_v", il 12; "token_embd.weight" -> "token_embd", -1. */
static void tensor_kind(const struct tern_str *name, char *kind, size_t cap, int *il)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)(name->len < 127 ? name->len : 127), name->ptr);
    *il = -1;
    const char *p = buf;
    if (!strncmp(buf, "blk.", 4)) {
        *il = atoi(buf + 4);
        p = strchr(buf + 4, '.');
        p = p ? p + 1 : buf;
    }
    snprintf(kind, cap, "%s", p);
    char *dot = strchr(kind, '.');
    if (dot) *dot = '\0';
}

/* llama-quantize writes the tensors in its loader's order: tensors outside the blocks first,
 * then block by block, by name within each (byte order). tern writes the same order, so its
 * files come out byte-identical. */
struct tensor_order {
    int layer; /* -1 outside the blocks */
    const struct tern_str *name;
    int64_t index;
};

static int tensor_order_cmp(const void *va, const void *vb)
{
    const struct tensor_order *a = va, *b = vb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    const size_t n = a->name->len < b->name->len ? a->name->len : b->name->len;
    const int c = memcmp(a->name->ptr, b->name->ptr, n);
    if (c) return c;
    return a->name->len < b->name->len ? -1 : a->name->len > b->name->len;
}

static int tensor_layer(const struct tern_str *name)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)(name->len < 31 ? name->len : 31), name->ptr);
    int il = -1;
    if (sscanf(buf, "blk.%d.", &il) != 1) il = -1;
    return il;
}

tern_status tern_quantize_model(const char *in_path, const char *out_path, const char *type_name,
                                int *n_fallbacks)
{
    return convert_quantize_model(in_path, out_path, type_name, NULL, n_fallbacks);
}

/* Rewrite one 2-D weight as `name` in dst_type: its rows, or only rows sel[0 .. n_rows) when sel
 * is given, each dequantized to F32, changed by the hook, quantized; a row the hook leaves alone
 * in its own type is copied as it is. */
static tern_status write_matrix(struct tern_gguf_writer *w, const char *name,
                                const struct tern_gguf_tensor *t, int dst_type, const int32_t *sel,
                                int64_t n_rows, const struct convert_row_hook *hook)
{
    const struct quant_traits *src = quant_traits_get(t->type), *dst = quant_traits_get(dst_type);
    const int64_t cols = t->ne[0];
    const size_t src_row = quant_row_bytes(t->type, cols), dst_row = quant_row_bytes(dst_type, cols);
    float *f32 = malloc((size_t)cols * sizeof *f32);
    void *q = malloc(dst_row * (size_t)n_rows);
    tern_status st = TERN_OK;
    if (!f32 || !q) st = tern_fail(TERN_ERR_NOMEM, "out of memory quantizing '%s'", name);
    const int h = !st && hook ? hook->find(hook->user, name, cols, t->ne[1]) : -1;
    for (int64_t r = 0; !st && r < n_rows; r++) {
        const int64_t from = sel ? sel[r] : r;
        if (h < 0 && dst_type == t->type) { /* its own bytes: requantizing is not lossless */
            memcpy((char *)q + (size_t)r * dst_row, (const char *)t->data + (size_t)from * src_row, src_row);
            continue;
        }
        src->to_float((const char *)t->data + (size_t)from * src_row, f32, cols);
        if (h >= 0) hook->add_row(hook->user, h, r, f32);
        dst->from_float_ref(f32, (char *)q + (size_t)r * dst_row, cols);
    }
    const int64_t ne[2] = {cols, n_rows};
    if (!st) st = tern_gguf_writer_add_tensor(w, name, dst_type, 2, ne, q);
    free(f32);
    free(q);
    return st;
}

int64_t convert_head_ids_first_bad(const int32_t *ids, int64_t n, int64_t n_vocab)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab || (i > 0 && ids[i] <= ids[i - 1])) return i;
    return -1;
}

/* The head's token ids: ascending, inside the vocabulary (token_embd's rows), IN not pruned. */
static tern_status check_head_ids(const struct tern_gguf *g, const int32_t *ids, int n)
{
    const struct tern_gguf_tensor *te = tern_gguf_find_tensor(g, "token_embd.weight");
    if (!te || te->n_dims != 2)
        return tern_fail(TERN_ERR_FORMAT, "a pruned head needs token_embd.weight (the vocabulary)");
    if (tern_gguf_find_key(g, "tern.output_token_ids") >= 0)
        return tern_fail(TERN_ERR_ARG, "the model's head is already pruned (tern.output_token_ids)");
    if (n < 1 || n > te->ne[1])
        return tern_fail(TERN_ERR_ARG, "%d head ids; a pruned head keeps 1 to %lld (the "
                         "vocabulary)", n, (long long)te->ne[1]);
    const int64_t bad = convert_head_ids_first_bad(ids, n, te->ne[1]);
    if (bad >= 0)
        return tern_fail(TERN_ERR_ARG, "head id %d (entry %lld): the ids must ascend strictly "
                         "and lie in [0, %lld)", ids[bad], (long long)bad, (long long)te->ne[1]);
    return TERN_OK;
}

tern_status tern_quantize_model_head(const char *in_path, const char *out_path,
                                     const char *type_name, const int32_t *ids, int n_ids,
                                     int *n_fallbacks)
{
    const struct convert_opts o = {.head_ids = ids, .n_head_ids = n_ids};
    if (n_ids < 1 || !ids) return tern_fail(TERN_ERR_ARG, "a pruned head needs at least one token id");
    return convert_quantize_model(in_path, out_path, type_name, &o, n_fallbacks);
}

tern_status convert_quantize_model(const char *in_path, const char *out_path, const char *type_name,
                                   const struct convert_opts *opts, int *n_fallbacks)
{
    const struct convert_opts none = {0};
    const struct convert_opts *o = opts ? opts : &none;
    struct type_plan plan;
    tern_status st = type_plan_parse(type_name, &plan);
    if (st) return st;
    struct tern_gguf *g;
    if ((st = tern_gguf_open(in_path, &g))) return st;
    if (o->n_head_ids && (st = check_head_ids(g, o->head_ids, o->n_head_ids))) {
        tern_gguf_close(g);
        return st;
    }
    struct tern_gguf_writer *w = NULL;
    int fb = 0;
    struct tern_str arch = {0};
    int64_t n_layer = 0;
    if (tern_gguf_get_str(g, "general.architecture", &arch) == TERN_OK && arch.len < 64) {
        char key[96];
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
        /* absent: 0 layers, and the q4_k_m rule then gives every layer the base type */
        tern_status_ignore(tern_gguf_get_i64(g, key, &n_layer));
    }
    /* without an output matrix the embeddings are also the output (tied): the q4_k_m rule
     * gives them the output's type */
    const bool has_output = tern_gguf_find_tensor(g, "output.weight") != NULL;
    plan.has_output = has_output || o->n_head_ids; /* a pruned head is an output of its own */
    st = tern_gguf_writer_create((uint32_t)tern_gguf_alignment(g), &w);
    for (int64_t i = 0; !st && i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        /* written last, in this order, as llama-quantize does (its set_val moves a key to the
         * end), so tern's files match llama-quantize's byte for byte */
        if (k.len == 17 && !memcmp(k.ptr, "general.file_type", 17)) continue;
        if (k.len == 28 && !memcmp(k.ptr, "general.quantization_version", 28)) continue;
        if (o->chat_template && k.len == 23 && !memcmp(k.ptr, "tokenizer.chat_template", 23)) continue;
        st = tern_gguf_writer_copy_kv(w, g, i);
    }
    if (!st && o->chat_template) st = tern_gguf_writer_set_str(w, "tokenizer.chat_template", o->chat_template);
    if (!st) st = tern_gguf_writer_set_u32(w, "general.quantization_version", 2); /* ggml's */
    uint32_t ft_in = 0; /* keep: the input's own file type */
    const bool keep_ft = plan.keep && tern_gguf_get_u32(g, "general.file_type", &ft_in) == TERN_OK;
    if (!st) st = tern_gguf_writer_set_u32(w, "general.file_type", keep_ft ? ft_in : file_type_of(&plan));
    if (!st && o->n_head_ids)
        st = tern_gguf_writer_set_arr(w, "tern.output_token_ids", TERN_GGUF_INT32, o->head_ids,
                                      (uint64_t)o->n_head_ids);
    const int64_t n_tensors = tern_gguf_n_tensors(g);
    struct tensor_order *order = malloc((size_t)(n_tensors > 0 ? n_tensors : 1) * sizeof *order);
    if (!order && !st) st = tern_fail(TERN_ERR_NOMEM, "out of memory ordering %lld tensors",
                                      (long long)n_tensors);
    for (int64_t i = 0; !st && i < n_tensors; i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        order[i] = (struct tensor_order){tensor_layer(&t->name), &t->name, i};
    }
    if (!st) qsort(order, (size_t)n_tensors, sizeof *order, tensor_order_cmp);
    for (int64_t oi = 0; !st && oi < n_tensors; oi++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, order[oi].index);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 127 ? t->name.len : 127), t->name.ptr);
        /* norms, biases, rope_freqs, and qwen35's conv kernels (F32, as llama-quantize keeps
         * them): unchanged */
        if (t->n_dims != 2 || strstr(name, ".ssm_conv1d.")) {
            st = tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
            continue;
        }
        const struct quant_traits *src = quant_traits_get(t->type);
        if (!src || !src->vec_dot_ref) { /* unknown, or activation-only (Q8_1, Q8_K) */
            st = tern_fail(TERN_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which tern cannot "
                           "read", in_path, name, tern_type_name(t->type));
            break;
        }
        char kind[128];
        int il;
        tensor_kind(&t->name, kind, sizeof kind, &il);
        const bool is_output = !strcmp(name, "output.weight");
        if (o->n_head_ids && (is_output || (!has_output && !strcmp(name, "token_embd.weight")))) {
            /* the pruned head: the kept tokens' rows, as an output matrix */
            const int head_type = plan.keep ? t->type
                                            : type_plan_pick(&plan, "output", 0, (int)n_layer, t->ne[0], &fb);
            st = write_matrix(w, "output.weight", t, head_type, o->head_ids, o->n_head_ids, NULL);
            if (is_output) continue;
        }
        const int dst_type = plan.keep ? t->type
                                       : type_plan_pick(&plan, kind, il < 0 ? 0 : il, (int)n_layer, t->ne[0], &fb);
        if (!st) st = write_matrix(w, name, t, dst_type, NULL, t->ne[1], o->hook);
    }
    if (!st) st = tern_gguf_writer_write(w, out_path);
    free(order);
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
    if (n_fallbacks) *n_fallbacks = fb;
    return st;
}
