/* fuzz_messages.c — fuzz target for the chat API's input side: JSON text reading
 * (chat_json.c), message/tool validation and content-part flattening (chat.c), rendered through
 * realistic templates (scripts/fuzz.sh; replayed by ctest).
 *
 * Input: messages JSON text, then optionally a NUL byte and tools JSON text, then optionally
 * another NUL and extra-variables JSON text. Each goes through tern_chat_validate and
 * tern_chat_render with two templates: Qwen2.5's (the fallback of models without a template)
 * and one that prints everything it is given with tojson. Promises checked (any broken one
 * aborts): validation and rendering accept and refuse the same inputs, with the same message;
 * every refusal has a message; an accepted conversation renders with both templates (the
 * fallback handles whatever validation lets through); the output is NUL-terminated. Seeds:
 * tests/fuzz/corpus/messages (the fixture conversations and edge cases). */
#include "chat/chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_messages: broken promise: %s (line %d): %s\n", #cond, __LINE__, \
                    tern_last_error());                                                            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const char dump[] =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% if m.content is string %}{{ m.content }}"
    "{% elif m.content %}{{ m.content|tojson }}{% endif %}{% for c in m.tool_calls or [] %}"
    "<{{ c.function.name }} {{ c.function.arguments|default({})|tojson }}>{% endfor %}{% endfor %}"
    "{% if tools is defined %}{{ tools|tojson(indent=1, sort_keys=true) }}{% endif %}{{ extra|default('') }}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tern_chat_template *tmpl[2];
    if (!tmpl[0]) {
        if (tern_chat_template_create(chat_fallback_template, strlen(chat_fallback_template), &tmpl[0]) != TERN_OK ||
            tern_chat_template_create(dump, strlen(dump), &tmpl[1]) != TERN_OK)
            abort();
    }
    /* split at NULs; each part gets an exact-size copy so overreads show */
    const char *part[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    char *copy[3] = {NULL, NULL, NULL};
    size_t start = 0;
    for (int k = 0; k < 3 && start <= size; k++) {
        const uint8_t *nul = k < 2 ? memchr(data + start, 0, size - start) : NULL;
        size_t end = nul ? (size_t)(nul - data) : size;
        copy[k] = malloc(end - start + 1);
        if (!copy[k]) goto out;
        memcpy(copy[k], data + start, end - start);
        part[k] = copy[k];
        len[k] = end - start;
        if (!nul) break;
        start = end + 1;
    }
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = part[0];
    p.messages_len = len[0] ? len[0] : 1; /* an empty part: one NUL byte, not "NUL-terminated" */
    if (!len[0]) copy[0][0] = '\0';
    p.tools_json = part[1];
    p.tools_len = len[1];
    p.extra_vars_json = part[2];
    p.extra_vars_len = len[2];
    if (part[1] && !len[1]) p.tools_json = NULL;
    if (part[2] && !len[2]) p.extra_vars_json = NULL;
    p.now_unix = 1736933400;
    p.add_generation_prompt = size & 1;
    tern_status v = tern_chat_validate(&p);
    char why[1024];
    snprintf(why, sizeof why, "%s", tern_last_error());
    if (v != TERN_OK) CHECK(why[0] && (v == TERN_ERR_FORMAT || v == TERN_ERR_ARG || v == TERN_ERR_NOMEM));
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        size_t n = 0;
        tern_status r = tern_chat_render(tmpl[i], &p, &out, &n);
        if (v != TERN_OK) {
            CHECK(r == v);
            if (v != TERN_ERR_NOMEM) CHECK(!strcmp(tern_last_error(), why));
        } else {
            CHECK(r == TERN_OK || r == TERN_ERR_NOMEM);
            if (r == TERN_OK) CHECK(out[n] == '\0');
        }
        free(out);
    }
out:
    for (int k = 0; k < 3; k++) free(copy[k]);
    return 0;
}
