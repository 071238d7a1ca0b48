/* chat.c — the public chat-template API (include/tern.h, section "chat templates"): compile a
 * template, check the caller's messages/tools JSON, render to a malloc'ed string.
 *
 * Read tmpl.h for the interpreter. This file only adapts: it validates the OpenAI-style
 * message list (so a malformed conversation is reported with its JSON path instead of
 * surfacing as an obscure template error), converts cJSON into template values, and passes
 * the variables Hugging Face passes: messages, tools (only when given), add_generation_prompt,
 * bos_token, eos_token, plus any extra variables. The GGUF entry point lives in chat_gguf.c. */
#include "chat/chat.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

struct tern_chat_params tern_chat_default_params(void)
{
    struct tern_chat_params p;
    memset(&p, 0, sizeof p);
    p.add_generation_prompt = true;
    p.now_unix = TERN_CHAT_NOW_CLOCK;
    return p;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

tern_status chat_template_new(const char *source, size_t len, const char *bos, const char *eos,
                              const char *warning, struct tern_chat_template **out)
{
    struct tern_chat_template *t = calloc(1, sizeof *t);
    if (!t) return tern_fail(TERN_ERR_NOMEM, "out of memory creating a chat template");
    t->source = dup_n(source, len);
    t->bos = bos ? dup_n(bos, strlen(bos)) : NULL;
    t->eos = eos ? dup_n(eos, strlen(eos)) : NULL;
    t->warning = warning ? dup_n(warning, strlen(warning)) : NULL;
    if (!t->source || (bos && !t->bos) || (eos && !t->eos) || (warning && !t->warning)) {
        tern_chat_template_free(t);
        return tern_fail(TERN_ERR_NOMEM, "out of memory creating a chat template");
    }
    tern_status st = tmpl_compile(source, len, &t->prog);
    if (st != TERN_OK) {
        tern_chat_template_free(t);
        return tern_fail_prefix(st, "chat template: ");
    }
    *out = t;
    return TERN_OK;
}

tern_status tern_chat_template_create(const char *source, size_t len,
                                      struct tern_chat_template **out)
{
    if (!source || !out) return tern_fail(TERN_ERR_ARG, "tern_chat_template_create: NULL argument");
    return chat_template_new(source, len, NULL, NULL, NULL, out);
}

void tern_chat_template_free(struct tern_chat_template *t)
{
    if (!t) return;
    tmpl_program_free(t->prog);
    free(t->source);
    free(t->bos);
    free(t->eos);
    free(t->warning);
    free(t);
}

const char *tern_chat_template_source(const struct tern_chat_template *t) { return t->source; }
const char *tern_chat_template_warning(const struct tern_chat_template *t) { return t->warning; }

static const char *json_kind(const cJSON *j)
{
    if (!j) return "nothing";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "an invalid value";
}

/* Structural checks on what templates index into without guarding. */
static tern_status check_messages(const cJSON *m)
{
    if (!cJSON_IsArray(m)) return tern_fail(TERN_ERR_FORMAT, "messages: expected an array, got %s", json_kind(m));
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, m) {
        if (!cJSON_IsObject(msg))
            return tern_fail(TERN_ERR_FORMAT, "messages[%d]: expected an object, got %s", i, json_kind(msg));
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsString(role))
            return tern_fail(TERN_ERR_FORMAT, "messages[%d].role: expected a string, got %s", i, json_kind(role));
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (content && !cJSON_IsString(content) && !cJSON_IsNull(content) && !cJSON_IsArray(content))
            return tern_fail(TERN_ERR_FORMAT, "messages[%d].content: expected a string, null or an array of parts, got %s",
                             i, json_kind(content));
        const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
        if (tcs && !cJSON_IsNull(tcs)) {
            if (!cJSON_IsArray(tcs))
                return tern_fail(TERN_ERR_FORMAT, "messages[%d].tool_calls: expected an array, got %s", i, json_kind(tcs));
            int k = 0;
            const cJSON *tc;
            cJSON_ArrayForEach(tc, tcs) {
                if (!cJSON_IsObject(tc))
                    return tern_fail(TERN_ERR_FORMAT, "messages[%d].tool_calls[%d]: expected an object, got %s", i, k, json_kind(tc));
                const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
                if (!cJSON_IsObject(fn))
                    return tern_fail(TERN_ERR_FORMAT, "messages[%d].tool_calls[%d].function: expected an object, got %s", i, k, json_kind(fn));
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
                if (!cJSON_IsString(name))
                    return tern_fail(TERN_ERR_FORMAT, "messages[%d].tool_calls[%d].function.name: expected a string, got %s", i, k, json_kind(name));
                const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
                if (args && !cJSON_IsObject(args) && !cJSON_IsString(args))
                    return tern_fail(TERN_ERR_FORMAT, "messages[%d].tool_calls[%d].function.arguments: expected an object or a string, got %s",
                                     i, k, json_kind(args));
                k++;
            }
        }
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id");
        if (id && !cJSON_IsString(id))
            return tern_fail(TERN_ERR_FORMAT, "messages[%d].tool_call_id: expected a string, got %s", i, json_kind(id));
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(msg, "name");
        if (name && !cJSON_IsString(name))
            return tern_fail(TERN_ERR_FORMAT, "messages[%d].name: expected a string, got %s", i, json_kind(name));
        i++;
    }
    return TERN_OK;
}

static tern_status check_tools(const cJSON *t)
{
    if (!cJSON_IsArray(t)) return tern_fail(TERN_ERR_FORMAT, "tools: expected an array, got %s", json_kind(t));
    int i = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, t) {
        if (!cJSON_IsObject(tool))
            return tern_fail(TERN_ERR_FORMAT, "tools[%d]: expected an object, got %s", i, json_kind(tool));
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        if (fn && !cJSON_IsObject(fn))
            return tern_fail(TERN_ERR_FORMAT, "tools[%d].function: expected an object, got %s", i, json_kind(fn));
        if (fn && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
            return tern_fail(TERN_ERR_FORMAT, "tools[%d].function.name: expected a string, got %s", i,
                             json_kind(cJSON_GetObjectItemCaseSensitive(fn, "name")));
        i++;
    }
    return TERN_OK;
}

tern_status tern_chat_render(const struct tern_chat_template *t, const struct tern_chat_params *p,
                             char **out, size_t *out_len)
{
    if (!t || !p || !out) return tern_fail(TERN_ERR_ARG, "tern_chat_render: NULL argument");
    tern_status st = check_messages(p->messages);
    if (st != TERN_OK) return st;
    if (p->tools && (st = check_tools(p->tools)) != TERN_OK) return st;
    if (p->extra_vars && !cJSON_IsObject(p->extra_vars))
        return tern_fail(TERN_ERR_ARG, "extra_vars: expected an object, got %s", json_kind(p->extra_vars));

    struct tmpl_arena arena;
    tmpl_arena_init(&arena, (size_t)256 << 20);
    int n_extra = p->extra_vars ? cJSON_GetArraySize(p->extra_vars) : 0;
    struct tmpl_var *vars = calloc((size_t)n_extra + 5, sizeof *vars);
    if (!vars) return tern_fail(TERN_ERR_NOMEM, "out of memory rendering a chat template");
    int nv = 0;
    bool ok = true;
    /* extra variables first so the standard ones win on a name clash */
    const cJSON *x;
    if (p->extra_vars)
        cJSON_ArrayForEach(x, p->extra_vars) {
            vars[nv].name = x->string;
            ok &= tmpl_from_cjson(&arena, x, &vars[nv].value);
            nv++;
        }
    vars[nv].name = "messages";
    ok &= tmpl_from_cjson(&arena, p->messages, &vars[nv++].value);
    if (p->tools) {
        vars[nv].name = "tools";
        ok &= tmpl_from_cjson(&arena, p->tools, &vars[nv++].value);
    }
    vars[nv].name = "add_generation_prompt";
    vars[nv++].value = tv_bool(p->add_generation_prompt);
    const char *bos = p->bos_token ? p->bos_token : t->bos ? t->bos : "";
    const char *eos = p->eos_token ? p->eos_token : t->eos ? t->eos : "";
    vars[nv].name = "bos_token";
    vars[nv++].value = tv_str(bos, strlen(bos));
    vars[nv].name = "eos_token";
    vars[nv++].value = tv_str(eos, strlen(eos));
    if (!ok) {
        free(vars);
        tmpl_arena_free(&arena);
        return tern_fail(TERN_ERR_NOMEM, "out of memory converting the messages");
    }
    struct tmpl_render_opts opts = {.now_unix = p->now_unix};
    const char *text;
    size_t len;
    st = tmpl_render(t->prog, &arena, vars, nv, &opts, &text, &len);
    free(vars);
    if (st == TERN_OK) {
        char *r = dup_n(text, len);
        if (!r) st = tern_fail(TERN_ERR_NOMEM, "out of memory copying the rendered prompt");
        else {
            *out = r;
            if (out_len) *out_len = len;
        }
    } else tern_fail_prefix(st, "chat template: ");
    tmpl_arena_free(&arena);
    return st;
}
