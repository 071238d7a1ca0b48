/* fuzz_template.c — fuzz target for the Jinja interpreter: lexer, parser, evaluator, builtins
 * (scripts/fuzz.sh; replayed by ctest).
 *
 * Input: a template source, optionally followed by a NUL byte and the JSON text of the
 * messages to render (otherwise a fixed tool-using conversation). The template is compiled with
 * tern_chat_template_create and rendered with the messages, the fixed tools and the usual
 * variables, once with tools and once without. Every failure must come back as a status with
 * a message, at line:col for template errors (the interpreter's promise; only running out of
 * memory may lack a place): a failure without one aborts. The render runs on a work budget of
 * 2^22 steps instead of the library's 2^26, so inputs that loop for long stay fast under the
 * sanitizers while reaching the same budget code. Seeds: tests/fuzz/corpus/template (the
 * fixture chat templates and the Jinja2 reference cases of tests/data/template). */
#include "chat/chat.h"
#include "chat/tmpl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fixed_messages[] =
    "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Weather in Paris? \xc3\xa9\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
    "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2, \"f\": 1.5}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"name\": \"get_weather\", \"content\": \"{\\\"t\\\": 18}\"},"
    " {\"role\": \"assistant\", \"content\": \"18 C.\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"}]}]";
static const char fixed_tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather for a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}},"
    " \"required\": [\"city\"]}}}]";

static void check_failure(tern_status st)
{
    const char *e = tern_last_error();
    bool ok = e[0] && (strstr(e, "line ") || st == TERN_ERR_NOMEM);
    if (!ok) {
        fprintf(stderr, "fuzz_template: failure (status %d) without a located message: [%s]\n", st, e);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t src_n = nul ? (size_t)(nul - data) : size;
    struct tern_chat_template *t = NULL;
    tern_status st = tern_chat_template_create(src, src_n, &t);
    if (st != TERN_OK) {
        check_failure(st);
        return 0;
    }
    struct tmpl_arena a;
    tmpl_arena_init(&a, (size_t)64 << 20);
    struct tval msgs, tools;
    bool own = nul && chat_json_parse(&a, "messages", (const char *)nul + 1, size - src_n - 1, &msgs) == TERN_OK;
    if (nul && !own && !strstr(tern_last_error(), "messages: ")) abort(); /* JSON errors name the document */
    if (!own && chat_json_parse(&a, "messages", fixed_messages, sizeof fixed_messages - 1, &msgs) != TERN_OK) abort();
    if (chat_json_parse(&a, "tools", fixed_tools, sizeof fixed_tools - 1, &tools) != TERN_OK) abort();
    for (int with_tools = 1; with_tools >= 0; with_tools--) {
        struct tmpl_var vars[6] = {
            {"messages", msgs},
            {"add_generation_prompt", tv_bool(with_tools)},
            {"bos_token", tv_str("<s>", 3)},
            {"eos_token", tv_str("</s>", 4)},
            {"enable_thinking", tv_bool(false)},
            {"tools", tools},
        };
        struct tmpl_render_opts o = {.now_unix = 1736933400, .max_work = 1u << 22};
        const char *out;
        size_t n;
        st = tmpl_render(t->prog, &a, vars, with_tools ? 6 : 5, &o, &out, &n);
        if (st != TERN_OK) check_failure(st);
        else if (out[n] != '\0') abort();
    }
    tmpl_arena_free(&a);
    tern_chat_template_free(t);
    return 0;
}
