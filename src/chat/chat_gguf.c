/* chat_gguf.c — a model's own chat template: tokenizer.chat_template from a GGUF, with the
 * bos/eos text looked up in tokenizer.ggml.tokens, falling back to Qwen2.5's template (ChatML
 * with Hermes-style tools; with a warning) when the file has no template.
 *
 * Read chat.h first. Key names are llama.cpp's (gguf-py constants). */
#include "chat/chat.h"
#include "tern_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* The fallback for a GGUF without tokenizer.chat_template: Qwen2.5's format, written for tern.
 * Without tools it is plain ChatML (<|im_start|>role\ncontent<|im_end|>\n per message, then
 * <|im_start|>assistant\n), byte for byte what the ChatML fallback rendered before, so
 * conversations keep their prompt cache. With tools, the system block lists them as Qwen2.5
 * does (one JSON object per line inside <tools></tools>) and teaches
 * <tool_call>{"name": ..., "arguments": ...}</tool_call>; assistant tool calls render that way
 * and tool results as <tool_response> blocks inside a user turn, so the Hermes parser
 * (tern_toolcall_detect finds "<tool_call>" here) reads the answers. It renders exactly as
 * Qwen2.5's own template whenever the conversation starts with a system message; unlike it,
 * it adds no "You are Qwen" system line (the model may be anything), renders null content as
 * "", and passes string arguments (OpenAI's JSON text) through instead of quoting them. */
const char chat_fallback_template[] =
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' %}"
    "{{- (messages[0].content if messages[0].content is string else '') + '\\n\\n' }}"
    "{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + tool|tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- set content = message.content if message.content is string else '' %}"
    "{%- if message.role == 'system' and loop.first and tools %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if content %}{{- '\\n' + content }}{%- endif %}"
    "{%- for call in message.tool_calls %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + fn.name + '\", \"arguments\": ' }}"
    "{{- fn.arguments if fn.arguments is string else (fn.arguments|tojson if fn.arguments is defined else '{}') }}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}"
    "{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
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
        st = chat_template_new(chat_fallback_template, strlen(chat_fallback_template), bos, eos,
                               "the model has no tokenizer.chat_template; using ChatML (Qwen2.5's "
                               "template, with Hermes-style tool calls when tools are given)", out);
    } else {
        tern_fail_prefix(st, "reading tokenizer.chat_template: ");
    }
    free(bos);
    free(eos);
    return st;
}
