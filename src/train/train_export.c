/* train_export.c — the trained weights as an F32 GGUF that tern_model_load (src/model/
 * model_load.c) reads: general.architecture "llama" or "qwen2", the {arch}.* hyperparameter
 * keys it asks for, every tokenizer.* key of the config's tokenizer GGUF copied verbatim, and
 * the tensors under llama.cpp's names (no output.weight when the output is tied). tern quantize
 * turns the file into Q8_0, Q4_K and the rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"
#include "tern_gguf.h"
#include "util/error.h"

tern_status tern_trainer_export(const struct tern_trainer *t, const char *path)
{
    if (t->lora) return train_lora_export(t, path); /* the adapters: the base is unchanged */
    struct tern_gguf_writer *w;
    tern_status st = tern_gguf_writer_create(0, &w);
    if (st) return st;
    const char *a = t->c.arch == TERN_ARCH_QWEN2 ? "qwen2" : "llama";
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    if (!st) st = tern_gguf_writer_set_str(w, "general.architecture", a);
    if (!st) st = tern_gguf_writer_set_str(w, "general.name", "tern-trained");
    if (!st) st = tern_gguf_writer_set_u32(w, "general.file_type", 0); /* all F32 */
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)t->T);
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)t->D);
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)t->L);
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)t->F);
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)t->H);
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)t->Hkv);
    if (!st) st = tern_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)t->hd);
    if (!st) st = tern_gguf_writer_set_f32(w, KEY("rope.freq_base"), t->c.rope_base);
    if (!st) st = tern_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), t->c.rms_eps);
#undef KEY
    for (int i = 0; !st && i < t->n_meta; i++)
        st = tern_gguf_writer_set_str(w, t->meta[2 * i], t->meta[2 * i + 1]);
    if (t->tok_gguf)
        for (int64_t i = 0; !st && i < tern_gguf_n_kv(t->tok_gguf); i++) {
            struct tern_str k = tern_gguf_key(t->tok_gguf, i);
            if (k.len >= 10 && !memcmp(k.ptr, "tokenizer.", 10))
                st = tern_gguf_writer_copy_kv(w, t->tok_gguf, i);
        }
    for (int i = 0; !st && i < t->n_tensors; i++) {
        const struct train_tensor *x = &t->tensors[i];
        st = tern_gguf_writer_add_tensor(w, x->name, TERN_TYPE_F32, x->n_dims, x->ne, t->w + x->off);
    }
    if (!st) st = tern_gguf_writer_write(w, path);
    tern_gguf_writer_free(w);
    if (st) tern_fail_prefix(st, "export %s: ", path);
    return st;
}

tern_status tern_trainer_set_export_str(struct tern_trainer *t, const char *key, const char *value)
{
    if (!strncmp(key, "general.", 8) || !strncmp(key, "tokenizer.", 10) || !strncmp(key, "llama.", 6) ||
        !strncmp(key, "qwen2.", 6))
        return tern_fail(TERN_ERR_ARG, "export: key '%s' is written by the export itself", key);
    char *v = strdup(value);
    if (!v) return tern_fail(TERN_ERR_NOMEM, "export: out of memory");
    for (int i = 0; i < t->n_meta; i++)
        if (!strcmp(t->meta[2 * i], key)) {
            free(t->meta[2 * i + 1]);
            t->meta[2 * i + 1] = v;
            return TERN_OK;
        }
    char *k = strdup(key);
    char **m = realloc(t->meta, (size_t)(t->n_meta + 1) * 2 * sizeof *m);
    if (!k || !m) {
        free(k), free(v);
        if (m) t->meta = m;
        return tern_fail(TERN_ERR_NOMEM, "export: out of memory");
    }
    t->meta = m;
    m[2 * t->n_meta] = k;
    m[2 * t->n_meta + 1] = v;
    t->n_meta++;
    return TERN_OK;
}
