/* chat_gguf.c — a model's own chat template: tokenizer.chat_template from a GGUF, with the
 * bos/eos text looked up in tokenizer.ggml.tokens, falling back to ChatML (with a warning)
 * when the file has no template.
 *
 * Read chat.h first. Key names are llama.cpp's (gguf-py constants). */
#include "chat/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* ChatML as Qwen and llama.cpp's fallback write it; null content renders as "". */
const char chat_chatml_template[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* Token text for the id stored under key, or NULL (key absent / id out of range). */
static char *token_text(const struct tern_gguf *g, const char *id_key, tern_status *st)
{
    uint32_t id;
    *st = TERN_OK;
    if (tern_gguf_get_u32(g, id_key, &id) != TERN_OK) return NULL;
    int64_t k = tern_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (k < 0 || tern_gguf_kv_type(g, k) != TERN_GGUF_ARRAY ||
        tern_gguf_arr_type(g, k) != TERN_GGUF_STRING) return NULL;
    if (id >= tern_gguf_arr_len(g, k)) {
        *st = tern_fail(TERN_ERR_FORMAT, "%s = %u is out of range: tokenizer.ggml.tokens has %llu entries",
                        id_key, id, (unsigned long long)tern_gguf_arr_len(g, k));
        return NULL;
    }
    struct tern_str s = tern_gguf_arr_str(g, k, id);
    char *r = malloc(s.len + 1);
    if (!r) {
        *st = tern_fail(TERN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(r, s.ptr, s.len);
    r[s.len] = '\0';
    return r;
}

tern_status tern_chat_template_from_gguf(const struct tern_gguf *g, struct tern_chat_template **out)
{
    if (!g || !out) return tern_fail(TERN_ERR_ARG, "tern_chat_template_from_gguf: NULL argument");
    tern_status st;
    char *bos = token_text(g, "tokenizer.ggml.bos_token_id", &st);
    if (st != TERN_OK) return st;
    char *eos = token_text(g, "tokenizer.ggml.eos_token_id", &st);
    if (st != TERN_OK) {
        free(bos);
        return st;
    }
    struct tern_str src;
    st = tern_gguf_get_str(g, "tokenizer.chat_template", &src);
    if (st == TERN_OK) {
        st = chat_template_new(src.ptr, (size_t)src.len, bos, eos, NULL, out);
        if (st != TERN_OK) tern_fail_prefix(st, "tokenizer.chat_template of the GGUF: ");
    } else if (st == TERN_ERR_NOT_FOUND) {
        st = chat_template_new(chat_chatml_template, strlen(chat_chatml_template), bos, eos,
                               "the model has no tokenizer.chat_template; using ChatML", out);
    } else {
        tern_fail_prefix(st, "reading tokenizer.chat_template: ");
    }
    free(bos);
    free(eos);
    return st;
}
