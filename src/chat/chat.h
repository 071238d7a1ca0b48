/* chat.h — what chat.c, chat_gguf.c and chat_json.c share: the layout of struct
 * tern_chat_template, the fallback template, and the JSON reader that turns the caller's text
 * into template values.
 *
 * Read tmpl.h for the interpreter; the public functions are declared in include/tern.h,
 * section "chat templates". */
#ifndef TERN_CHAT_CHAT_H
#define TERN_CHAT_CHAT_H

#include <stdatomic.h>

#include "chat/tmpl.h"
#include "tern.h"

struct tern_chat_template {
    struct tmpl_program *prog;
    char *source;    /* NUL-terminated copy */
    char *bos;       /* default bos/eos text (from the GGUF), NULL = "" */
    char *eos;
    char *warning;   /* NULL if none */
    bool uses_tools; /* the template reads the variable `tools` somewhere */
    /* Does the template render OpenAI content parts itself? Found out by a probe render the
     * first time a conversation has them (CHAT_TYPED_*); racing threads compute the same. */
    _Atomic int typed_content;
};
enum { CHAT_TYPED_UNKNOWN, CHAT_TYPED_NO, CHAT_TYPED_YES };

/* Compile and wrap; copies every string. */
TERN_NODISCARD tern_status chat_template_new(const char *source, size_t len, const char *bos, const char *eos,
                              const char *warning, struct tern_chat_template **out);

/* Qwen2.5's template (ChatML, plus Hermes-style tools and tool calls), used when a model
 * carries no template (chat_gguf.c). */
extern const char chat_fallback_template[];

/* JSON text -> template values in arena a, as json.loads reads it (see chat_json.c). `what`
 * names the document in errors ("messages"); TERN_ERR_FORMAT with byte offset, line:col and
 * JSON path, or TERN_ERR_NOMEM. */
#define CHAT_JSON_MAX_DEPTH 1000
TERN_NODISCARD tern_status chat_json_parse(struct tmpl_arena *a, const char *what, const char *text, size_t len,
                            struct tval *out);

#endif
