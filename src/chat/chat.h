/* chat.h — what chat.c and chat_gguf.c share: the layout of struct tern_chat_template.
 *
 * Read tmpl.h for the interpreter; the public functions are declared in include/tern.h,
 * section "chat templates". */
#ifndef TERN_CHAT_CHAT_H
#define TERN_CHAT_CHAT_H

#include "chat/tmpl.h"
#include "tern.h"

struct tern_chat_template {
    struct tmpl_program *prog;
    char *source;  /* NUL-terminated copy */
    char *bos;     /* default bos/eos text (from the GGUF), NULL = "" */
    char *eos;
    char *warning; /* NULL if none */
};

/* Compile and wrap; copies every string. */
tern_status chat_template_new(const char *source, size_t len, const char *bos, const char *eos,
                              const char *warning, struct tern_chat_template **out);

/* ChatML, used when a model carries no template. */
extern const char chat_chatml_template[];

#endif
