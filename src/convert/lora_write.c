/* lora_write.c — tern_lora_write: a LoRA adapter GGUF in llama.cpp's format, from F32 A and B
 * (the trainer's adapters, tern train with lora; the tests' random ones), through tern's GGUF writer (tmp +
 * rename). The keys are those llama.cpp c392e50's convert_lora_to_gguf.py writes and its
 * llama_adapter_lora_init reads: general.architecture, general.type "adapter", adapter.type
 * "lora", adapter.lora.alpha (F32). Tensors go in the order given, each "<weight>.lora_a" then
 * "<weight>.lora_b", in ggml's layout: lora_a ne [n_in, r], lora_b ne [r, n_out]; the
 * embeddings' pair flipped as the converter writes it (lora_a transposed: ne [r, n_vocab]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "util/error.h"

/* rows x cols F32 (row-major) as type into a new buffer. */
static void *convert_rows(const float *src, int64_t rows, int64_t cols, int type)
{
    const struct quant_traits *q = quant_traits_get(type);
    const size_t rb = quant_row_bytes(type, cols);
    const size_t bytes = rb * (size_t)rows;
    char *dst = malloc(bytes ? bytes : 1);
    if (!dst) return NULL;
    for (int64_t r = 0; r < rows; r++) q->from_float_ref(src + (size_t)r * cols, dst + (size_t)r * rb, cols);
    return dst;
}

tern_status tern_lora_write(const char *path, const char *arch, float alpha,
                            const struct tern_lora_tensor *t, int n, const char *type_name)
{
    return tern_lora_write_kv(path, arch, alpha, t, n, type_name, NULL, 0);
}

tern_status tern_lora_write_kv(const char *path, const char *arch, float alpha,
                               const struct tern_lora_tensor *t, int n, const char *type_name,
                               const char *const *kv, int n_kv)
{
    if (!path || !arch || n < 0 || (n && !t) || !type_name || n_kv < 0 || (n_kv && !kv))
        return tern_fail(TERN_ERR_ARG, "tern_lora_write: bad arguments");
    int type;
    tern_status st = tern_type_from_name(type_name, &type);
    if (st) return st;
    if (type != TERN_TYPE_F32 && type != TERN_TYPE_F16 && type != TERN_TYPE_BF16 && type != TERN_TYPE_Q8_0)
        return tern_fail(TERN_ERR_ARG, "tern_lora_write: type %s; adapters are written as f32, "
                         "f16, bf16 or q8_0", type_name);
    const int64_t blk = tern_type_block_size(type);
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !t[i].a || !t[i].b || t[i].rank < 1 || t[i].n_in < 1 || t[i].n_out < 1 ||
            strlen(t[i].name) > 60)
            return tern_fail(TERN_ERR_ARG, "tern_lora_write: tensor %d ('%s') is incomplete or "
                             "its name is longer than 60 bytes", i, t[i].name ? t[i].name : "");
        const bool embd = !strcmp(t[i].name, "token_embd.weight");
        /* ne[0] of lora_a and of lora_b must hold whole blocks */
        const int64_t a0 = embd ? t[i].rank : t[i].n_in;
        if (a0 % blk || t[i].rank % blk)
            return tern_fail(TERN_ERR_ARG, "tern_lora_write: tensor '%s': %s needs rows of whole "
                             "%lld-element blocks (lora_a ne[0] %lld, lora_b ne[0] %lld)",
                             t[i].name, tern_type_name(type), (long long)blk, (long long)a0,
                             (long long)t[i].rank);
    }
    struct tern_gguf_writer *w;
    if ((st = tern_gguf_writer_create(32, &w))) return st;
    if (!st) st = tern_gguf_writer_set_str(w, "general.architecture", arch);
    if (!st) st = tern_gguf_writer_set_str(w, "general.type", "adapter");
    if (!st) st = tern_gguf_writer_set_str(w, "adapter.type", "lora");
    if (!st) st = tern_gguf_writer_set_f32(w, "adapter.lora.alpha", alpha);
    for (int i = 0; i < n_kv && !st; i++) {
        if (!strncmp(kv[2 * i], "general.", 8) || !strncmp(kv[2 * i], "adapter.", 8))
            st = tern_fail(TERN_ERR_ARG, "tern_lora_write: key '%s' is written by the writer "
                           "itself", kv[2 * i]);
        else
            st = tern_gguf_writer_set_str(w, kv[2 * i], kv[2 * i + 1]);
    }
    for (int i = 0; i < n && !st; i++) {
        const struct tern_lora_tensor *x = &t[i];
        const bool embd = !strcmp(x->name, "token_embd.weight");
        char name[80];
        /* lora_a: (r, n_in), ne [n_in, r]; embeddings: (n_vocab, r), ne [r, n_vocab] */
        const int64_t a_rows = embd ? x->n_out : x->rank, a_cols = embd ? x->rank : x->n_in;
        /* lora_b: (n_out, r), ne [r, n_out]; embeddings: (n_embd, r) */
        const int64_t b_rows = embd ? x->n_in : x->n_out;
        void *qa = convert_rows(x->a, a_rows, a_cols, type);
        void *qb = convert_rows(x->b, b_rows, x->rank, type);
        if (!qa || !qb) {
            st = tern_fail(TERN_ERR_NOMEM, "tern_lora_write: out of memory for '%s'", x->name);
        } else {
            const int64_t ne_a[2] = {a_cols, a_rows}, ne_b[2] = {x->rank, b_rows};
            snprintf(name, sizeof name, "%s.lora_a", x->name);
            st = tern_gguf_writer_add_tensor(w, name, type, 2, ne_a, qa);
            snprintf(name, sizeof name, "%s.lora_b", x->name);
            if (!st) st = tern_gguf_writer_add_tensor(w, name, type, 2, ne_b, qb);
        }
        free(qa);
        free(qb);
    }
    if (!st) st = tern_gguf_writer_write(w, path);
    tern_gguf_writer_free(w);
    return st;
}
