/* srv_responses.c — a POST /v1/responses body (OpenAI's Responses API) -> the chat request the
 * engine runs (read srv_translate.c first: the translation and its errors).
 *
 * input (a string, or a list of items: messages, function_call, function_call_output) and
 * instructions become chat messages: instructions the system message; consecutive
 * function_call items join the assistant turn before them as its tool_calls; a
 * function_call_output is a "tool" message answering the call with its call_id, which must come
 * before it. previous_response_id puts the stored conversation of that response (its input and
 * output items, srv_store.c) before this input; instructions are not carried over (OpenAI's
 * rule). Function tools {type, name, description, parameters, strict} become chat tools, strict
 * by default as in the Responses API; any other tool type (web_search, file_search, ...) is a 400
 * naming it. text.format becomes response_format, reasoning.effort chat's reasoning_effort, and
 * a reasoning item's text the reasoning_content of the assistant turn after it. What the
 * response object repeats of the request is kept in proto->echo, and the conversation (to store
 * with the answer) in proto->history. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define BAD(param, ...)                                                                        \
    do {                                                                                       \
        srv_err_set(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__);                \
        return false;                                                                          \
    } while (0)

/* Does object o hold only keys from `allowed`? *bad: the first other one. */
static bool only_keys(const cJSON *o, const char *const *allowed, const char **bad)
{
    for (const cJSON *k = o->child; k; k = k->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, k->string);
        if (!ok) {
            *bad = k->string;
            return false;
        }
    }
    return true;
}

/* The text of a message's content (a string or a list of text parts, joined by a blank line:
 * each part is a paragraph of its own) into *out (malloc'ed). where: "input[3]" for messages. */
static bool content_text(const cJSON *content, const char *where, bool output, char **out, struct srv_err *e)
{
    *out = NULL;
    if (cJSON_IsString(content)) {
        *out = strdup(content->valuestring);
        return *out != NULL;
    }
    if (!cJSON_IsArray(content))
        BAD("input", "'%s.%s' must be a string or an array of content parts, got %s", where,
            output ? "output" : "content", srv_jtype(content));
    struct sbuf b = {0};
    int i = 0;
    for (const cJSON *p = content->child; p; p = p->next, i++) {
        const cJSON *ty = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "type") : NULL;
        const cJSON *tx = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "text") : NULL;
        const char *field = output ? "output" : "content";
        if (!cJSON_IsString(ty)) {
            sbuf_free(&b);
            BAD("input", "'%s.%s[%d]' must be a content part {\"type\": \"input_text\", \"text\": ...}", where,
                field, i);
        }
        const char *t = ty->valuestring;
        if (!strcmp(t, "input_image") || !strcmp(t, "input_file") || !strcmp(t, "input_audio")) {
            sbuf_free(&b);
            BAD("input", "'%s.%s[%d]': '%s' parts are not supported by tern (its models read text only)",
                where, field, i, t);
        }
        if (strcmp(t, "input_text") && strcmp(t, "output_text") && strcmp(t, "refusal")) {
            sbuf_free(&b);
            BAD("input", "'%s.%s[%d].type' is '%.60s'; tern takes 'input_text', 'output_text' and 'refusal' parts",
                where, field, i, t);
        }
        if (!strcmp(t, "refusal")) tx = cJSON_GetObjectItemCaseSensitive(p, "refusal");
        static const char *const keys[] = {"type", "text", "annotations", "logprobs", "refusal", NULL};
        const char *bad = NULL;
        if (!only_keys(p, keys, &bad)) {
            sbuf_free(&b);
            BAD("input", "'%s.%s[%d]': unknown field '%.60s' in a '%s' part", where, field, i, bad, t);
        }
        if (!cJSON_IsString(tx)) {
            sbuf_free(&b);
            BAD("input", "'%s.%s[%d].%s' must be a string", where, field, i, strcmp(t, "refusal") ? "text" : "refusal");
        }
        if (b.len) sbuf_adds(&b, "\n\n");
        sbuf_adds(&b, tx->valuestring);
    }
    *out = b.p ? b.p : strdup("");
    return *out != NULL;
}

/* The call_id of an earlier function_call item among items[0..k), or NULL. */
static const cJSON *find_call(const cJSON *items, int k, const char *call_id)
{
    int i = 0;
    for (const cJSON *it = items->child; it && i < k; it = it->next, i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "type");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id");
        if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "function_call") && cJSON_IsString(id) &&
            !strcmp(id->valuestring, call_id))
            return it;
    }
    return NULL;
}

/* A reasoning item sent back {type "reasoning", id, summary, content [{type "reasoning_text",
 * text}], encrypted_content, status}: its reasoning_text goes with the assistant turn after it
 * (srv_chat_reasoning: the template decides whether to render it). Summaries are not the thinking
 * and encrypted content is another server's: both are dropped. */
static bool reasoning_item(struct srv_chat *c, const cJSON *it, const char *where, struct srv_err *e)
{
    static const char *const keys[] = {"type", "id", "summary", "content", "encrypted_content", "status", NULL};
    const char *bad = NULL;
    if (!only_keys(it, keys, &bad)) BAD("input", "'%s': unknown field '%.60s' in a reasoning item", where, bad);
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(it, "summary");
    if (sum && !cJSON_IsNull(sum) && !cJSON_IsArray(sum))
        BAD("input", "'%s.summary' must be an array of summary parts, got %s", where, srv_jtype(sum));
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (!content || cJSON_IsNull(content)) return true;
    if (!cJSON_IsArray(content))
        BAD("input", "'%s.content' must be an array of reasoning_text parts, got %s", where, srv_jtype(content));
    int i = 0;
    for (const cJSON *p = content->child; p; p = p->next, i++) {
        const cJSON *ty = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "type") : NULL;
        const cJSON *tx = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "text") : NULL;
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "reasoning_text") || !cJSON_IsString(tx))
            BAD("input", "'%s.content[%d]' must be {\"type\": \"reasoning_text\", \"text\": ...}", where, i);
        if (!srv_chat_reasoning(c, tx->valuestring)) BAD(NULL, "out of memory");
    }
    return true;
}

/* One input item (items[k], named `where`) onto the chat messages. src: its index for errors. */
static bool add_item(struct srv_chat *c, const cJSON *items, int k, const cJSON *it, const char *where, int src,
                     struct srv_err *e)
{
    if (!cJSON_IsObject(it)) BAD("input", "'%s' must be an object (an input item), got %s", where, srv_jtype(it));
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "type");
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
    if (ty && !cJSON_IsString(ty)) BAD("input", "'%s.type' must be a string, got %s", where, srv_jtype(ty));
    const char *type = ty ? ty->valuestring : role ? "message" : NULL;
    if (!type)
        BAD("input", "'%s' has neither a 'type' nor a 'role': an input item is a message {\"role\", "
            "\"content\"}, a function_call or a function_call_output", where);
    const char *bad = NULL;
    if (!strcmp(type, "message")) {
        static const char *const keys[] = {"type", "role", "content", "id", "status", NULL};
        if (!only_keys(it, keys, &bad)) BAD("input", "'%s': unknown field '%.60s' in a message item", where, bad);
        static const char *const roles[] = {"user", "system", "developer", "assistant", NULL};
        bool ok = false;
        for (int i = 0; cJSON_IsString(role) && roles[i] && !ok; i++) ok = !strcmp(role->valuestring, roles[i]);
        if (!ok)
            BAD("input", "'%s.role' must be 'user', 'system', 'developer' or 'assistant'%s%.40s%s", where,
                cJSON_IsString(role) ? ", got '" : "", cJSON_IsString(role) ? role->valuestring : "",
                cJSON_IsString(role) ? "'" : "");
        char *text = NULL;
        if (!content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), where, false, &text, e)) return false;
        /* a developer message is the system prompt of models without that role */
        const char *r = !strcmp(role->valuestring, "developer") ? "system" : role->valuestring;
        cJSON *m = srv_chat_add(c, r, text, src);
        free(text);
        if (!m) BAD(NULL, "out of memory");
        return true;
    }
    if (!strcmp(type, "function_call")) {
        static const char *const keys[] = {"type", "call_id", "name", "arguments", "id", "status", NULL};
        if (!only_keys(it, keys, &bad)) BAD("input", "'%s': unknown field '%.60s' in a function_call item", where, bad);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(it, "arguments");
        if (!cJSON_IsString(id) || !id->valuestring[0]) BAD("input", "'%s.call_id' must be a non-empty string", where);
        if (!cJSON_IsString(nm) || !srv_tool_name_ok(nm->valuestring))
            BAD("input", "'%s.name' must be a function name (^[a-zA-Z0-9_-]{1,64}$)", where);
        if (!cJSON_IsString(args)) BAD("input", "'%s.arguments' must be a string (the arguments' JSON text)", where);
        if (!srv_chat_add_call(c, id->valuestring, nm->valuestring, args->valuestring, src)) BAD(NULL, "out of memory");
        return true;
    }
    if (!strcmp(type, "function_call_output")) {
        static const char *const keys[] = {"type", "call_id", "output", "id", "status", NULL};
        if (!only_keys(it, keys, &bad))
            BAD("input", "'%s': unknown field '%.60s' in a function_call_output item", where, bad);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id");
        if (!cJSON_IsString(id) || !id->valuestring[0]) BAD("input", "'%s.call_id' must be a non-empty string", where);
        const cJSON *call = find_call(items, k, id->valuestring);
        if (!call)
            BAD("input", "'%s': no function_call with call_id '%.80s' comes before this function_call_output",
                where, id->valuestring);
        char *text = NULL;
        if (!content_text(cJSON_GetObjectItemCaseSensitive(it, "output"), where, true, &text, e)) return false;
        cJSON *m = srv_chat_add(c, "tool", text, src);
        free(text);
        if (!m) BAD(NULL, "out of memory");
        cJSON_AddStringToObject(m, "tool_call_id", id->valuestring);
        cJSON_AddStringToObject(m, "name", cJSON_GetObjectItemCaseSensitive(call, "name")->valuestring);
        return true;
    }
    if (!strcmp(type, "reasoning")) return reasoning_item(c, it, where, e);
    if (!strcmp(type, "item_reference"))
        BAD("input", "'%s': item references are not supported by tern: send the item itself, or "
            "'previous_response_id'", where);
    BAD("input", "'%s.type' is '%.60s', which tern does not take: input items are messages, "
        "function_call and function_call_output (built-in tools are not supported)", where, type);
}

static bool tools_of(struct srv_chat *c, const cJSON *tools, cJSON *echo, struct srv_err *e)
{
    if (!tools || cJSON_IsNull(tools)) return true;
    if (!cJSON_IsArray(tools)) BAD("tools", "'tools' must be an array, got %s", srv_jtype(tools));
    cJSON *out = cJSON_AddArrayToObject(c->body, "tools");
    cJSON *shown = cJSON_AddArrayToObject(echo, "tools");
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *ty = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "type") : NULL;
        if (!cJSON_IsString(ty))
            BAD("tools", "'tools[%d]' must be {\"type\": \"function\", \"name\": ..., \"parameters\": {...}}", i);
        if (strcmp(ty->valuestring, "function"))
            BAD("tools", "'tools[%d].type' is '%.60s': tern runs function tools only (built-in tools such as "
                "web_search, file_search, code_interpreter or computer use are not supported)", i, ty->valuestring);
        static const char *const keys[] = {"type", "name", "description", "parameters", "strict", NULL};
        const char *bad = NULL;
        if (!only_keys(t, keys, &bad)) BAD("tools", "'tools[%d]': unknown field '%.60s' in a function tool", i, bad);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
        const cJSON *strict = cJSON_GetObjectItemCaseSensitive(t, "strict");
        if (!cJSON_IsString(nm)) BAD("tools", "'tools[%d].name' must be a string", i);
        if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))
            BAD("tools", "'tools[%d].description' must be a string, got %s", i, srv_jtype(desc));
        if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict))
            BAD("tools", "'tools[%d].strict' must be a boolean, got %s", i, srv_jtype(strict));
        /* the Responses API's default: strict */
        const bool st = !strict || cJSON_IsNull(strict) || cJSON_IsTrue(strict);
        cJSON *ct = srv_chat_tool(nm->valuestring, desc, cJSON_GetObjectItemCaseSensitive(t, "parameters"), st);
        cJSON *et = cJSON_Duplicate(t, true);
        if (!ct || !et) {
            cJSON_Delete(ct);
            cJSON_Delete(et);
            BAD(NULL, "out of memory");
        }
        cJSON_AddItemToArray(out, ct);
        cJSON_DeleteItemFromObjectCaseSensitive(et, "strict");
        cJSON_AddBoolToObject(et, "strict", st);
        cJSON_AddItemToArray(shown, et);
    }
    return true;
}

static bool tool_choice_of(struct srv_chat *c, const cJSON *tc, cJSON *echo, struct srv_err *e)
{
    if (!tc || cJSON_IsNull(tc)) {
        cJSON_AddStringToObject(echo, "tool_choice", "auto");
        return true;
    }
    if (cJSON_IsString(tc)) {
        const char *v = tc->valuestring;
        if (strcmp(v, "auto") && strcmp(v, "none") && strcmp(v, "required"))
            BAD("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                "\"name\": ...}, got \"%.60s\"", v);
        cJSON_AddStringToObject(c->body, "tool_choice", v);
    } else if (cJSON_IsObject(tc)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(tc, "type");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(tc, "name");
        if (!cJSON_IsString(ty)) BAD("tool_choice", "'tool_choice.type' must be a string");
        if (strcmp(ty->valuestring, "function"))
            BAD("tool_choice", "'tool_choice.type' is '%.60s': tern takes \"function\" (with a name) only, as it "
                "runs function tools only", ty->valuestring);
        if (!cJSON_IsString(nm)) BAD("tool_choice", "'tool_choice.name' must be a string");
        cJSON *o = cJSON_AddObjectToObject(c->body, "tool_choice");
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "function"), "name", nm->valuestring);
    } else {
        BAD("tool_choice", "'tool_choice' must be a string or an object, got %s", srv_jtype(tc));
    }
    cJSON_AddItemToObject(echo, "tool_choice", cJSON_Duplicate(tc, true));
    return true;
}

/* text: {format: {type: text | json_object | json_schema}, verbosity} -> response_format. */
static bool text_of(struct srv_chat *c, const cJSON *text, cJSON *echo, struct srv_err *e)
{
    if (!text || cJSON_IsNull(text)) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(echo, "text"), "format"), "type", "text");
        return true;
    }
    if (!cJSON_IsObject(text)) BAD("text", "'text' must be an object, got %s", srv_jtype(text));
    static const char *const keys[] = {"format", "verbosity", NULL};
    const char *bad = NULL;
    if (!only_keys(text, keys, &bad)) BAD("text", "'text': unknown field '%.60s'", bad);
    const cJSON *vb = cJSON_GetObjectItemCaseSensitive(text, "verbosity");
    if (vb && !cJSON_IsNull(vb) && !cJSON_IsString(vb)) BAD("text.verbosity", "'text.verbosity' must be a string");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(text, "format");
    cJSON_AddItemToObject(echo, "text", cJSON_Duplicate(text, true));
    if (!f || cJSON_IsNull(f)) return true;
    const cJSON *ty = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "type") : NULL;
    if (!cJSON_IsString(ty)) BAD("text.format", "'text.format' must be an object with a 'type'");
    if (!strcmp(ty->valuestring, "text")) return true;
    cJSON *rf = cJSON_AddObjectToObject(c->body, "response_format");
    if (!strcmp(ty->valuestring, "json_object")) {
        cJSON_AddStringToObject(rf, "type", "json_object");
        return true;
    }
    if (strcmp(ty->valuestring, "json_schema"))
        BAD("text.format", "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"%.60s\"",
            ty->valuestring);
    static const char *const fkeys[] = {"type", "name", "schema", "strict", "description", NULL};
    if (!only_keys(f, fkeys, &bad)) BAD("text.format", "'text.format': unknown field '%.60s'", bad);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (nm && !cJSON_IsString(nm)) BAD("text.format", "'text.format.name' must be a string");
    cJSON_AddStringToObject(rf, "type", "json_schema");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    cJSON_AddStringToObject(js, "name", nm ? nm->valuestring : "response");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(f, "schema");
    if (!cJSON_IsObject(sc)) BAD("text.format", "'text.format.schema' must be an object (a JSON Schema)");
    cJSON_AddItemToObject(js, "schema", cJSON_Duplicate(sc, true));
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(f, "strict");
    if (strict && !cJSON_IsNull(strict)) cJSON_AddItemToObject(js, "strict", cJSON_Duplicate(strict, true));
    return true;
}

/* reasoning: {effort, summary} -> chat's reasoning_effort (the same budgets: srv_reasoning.c, whose
 * error names 'reasoning.effort' once translated). summary asks OpenAI for a summary of the
 * thinking; tern gives the thinking itself (the reasoning item's content) and no summary, so it is
 * checked and repeated, nothing more. */
static bool reasoning_of(struct srv_chat *c, const cJSON *rs, cJSON *echo, struct srv_err *e)
{
    cJSON *shown = cJSON_AddObjectToObject(echo, "reasoning");
    if (!rs || cJSON_IsNull(rs)) {
        cJSON_AddNullToObject(shown, "effort");
        cJSON_AddNullToObject(shown, "summary");
        return true;
    }
    if (!cJSON_IsObject(rs)) BAD("reasoning", "'reasoning' must be an object {\"effort\", \"summary\"}, got %s", srv_jtype(rs));
    static const char *const keys[] = {"effort", "summary", "generate_summary", NULL};
    const char *bad = NULL;
    if (!only_keys(rs, keys, &bad)) BAD("reasoning", "'reasoning': unknown field '%.60s'", bad);
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(rs, "summary");
    if (!sum || cJSON_IsNull(sum)) sum = cJSON_GetObjectItemCaseSensitive(rs, "generate_summary"); /* its old name */
    static const char *const kinds[] = {"auto", "concise", "detailed", NULL};
    bool ok = !sum || cJSON_IsNull(sum);
    for (int i = 0; !ok && cJSON_IsString(sum) && kinds[i]; i++) ok = !strcmp(sum->valuestring, kinds[i]);
    if (!ok) BAD("reasoning.summary", "'reasoning.summary' must be \"auto\", \"concise\" or \"detailed\"");
    const cJSON *eff = cJSON_GetObjectItemCaseSensitive(rs, "effort");
    srv_chat_copy(c, rs, "effort", "reasoning_effort");
    cJSON_AddItemToObject(shown, "effort", eff ? cJSON_Duplicate(eff, true) : cJSON_CreateNull());
    cJSON_AddItemToObject(shown, "summary", sum ? cJSON_Duplicate(sum, true) : cJSON_CreateNull());
    return true;
}

/* The request's fields that are not the conversation; echo gets what the response repeats. */
static bool options_of(struct srv_chat *c, const cJSON *b, struct srv_proto *px, struct srv_err *e)
{
    cJSON *echo = px->echo;
    srv_chat_copy(c, b, "model", NULL);
    srv_chat_copy(c, b, "stream", NULL);
    srv_chat_copy(c, b, "temperature", NULL);
    srv_chat_copy(c, b, "top_p", NULL);
    srv_chat_copy(c, b, "max_output_tokens", "max_tokens");
    srv_chat_copy(c, b, "parallel_tool_calls", NULL);
    srv_chat_copy(c, b, "prompt_cache_key", NULL);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(b, "truncation");
    if (tr && !cJSON_IsNull(tr) && !(cJSON_IsString(tr) && !strcmp(tr->valuestring, "disabled")))
        BAD("truncation", "'truncation' must be \"disabled\": tern does not drop input to fit the context "
            "(a prompt that is too long is a 400)");
    const cJSON *bg = cJSON_GetObjectItemCaseSensitive(b, "background");
    if (bg && !cJSON_IsNull(bg) && !cJSON_IsFalse(bg))
        BAD("background", "'background' must be false: tern answers every request while it waits");
    const cJSON *tl = cJSON_GetObjectItemCaseSensitive(b, "top_logprobs");
    if (tl && !cJSON_IsNull(tl) && !(cJSON_IsNumber(tl) && tl->valuedouble == 0))
        BAD("top_logprobs", "'top_logprobs' is not supported on /v1/responses by tern (use /v1/chat/completions "
            "with logprobs)");
    const cJSON *store = cJSON_GetObjectItemCaseSensitive(b, "store");
    if (store && !cJSON_IsNull(store) && !cJSON_IsBool(store))
        BAD("store", "'store' must be a boolean, got %s", srv_jtype(store));
    px->store = !store || cJSON_IsNull(store) || cJSON_IsTrue(store);
    if (!tools_of(c, cJSON_GetObjectItemCaseSensitive(b, "tools"), echo, e)) return false;
    if (!tool_choice_of(c, cJSON_GetObjectItemCaseSensitive(b, "tool_choice"), echo, e)) return false;
    if (!text_of(c, cJSON_GetObjectItemCaseSensitive(b, "text"), echo, e)) return false;
    static const char *const repeated[] = {"max_output_tokens", "temperature", "top_p", "metadata", "user",
                                           "prompt_cache_key", "parallel_tool_calls", NULL};
    for (int i = 0; repeated[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, repeated[i]);
        cJSON_AddItemToObject(echo, repeated[i], v ? cJSON_Duplicate(v, true) : cJSON_CreateNull());
    }
    /* what was left out is said at its default, as OpenAI's responses do */
    static const struct { const char *key; double value; } defaults[] = {{"temperature", 1}, {"top_p", 1}};
    for (int i = 0; i < 2; i++)
        if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(echo, defaults[i].key)))
            cJSON_ReplaceItemInObjectCaseSensitive(echo, defaults[i].key, cJSON_CreateNumber(defaults[i].value));
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(echo, "parallel_tool_calls")))
        cJSON_ReplaceItemInObjectCaseSensitive(echo, "parallel_tool_calls", cJSON_CreateTrue());
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(echo, "metadata")))
        cJSON_ReplaceItemInObjectCaseSensitive(echo, "metadata", cJSON_CreateObject());
    if (!cJSON_GetObjectItemCaseSensitive(echo, "tools")) cJSON_AddArrayToObject(echo, "tools");
    cJSON_AddBoolToObject(echo, "store", px->store);
    cJSON_AddStringToObject(echo, "truncation", "disabled");
    return reasoning_of(c, cJSON_GetObjectItemCaseSensitive(b, "reasoning"), echo, e);
}

/* The conversation: the previous response's items, then this input's, into px->history and the
 * chat messages (after the instructions). */
static bool conversation_of(struct tern_server *s, struct srv_chat *c, const cJSON *b, int key,
                            struct srv_proto *px, struct srv_err *e)
{
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(b, "instructions");
    if (ins && !cJSON_IsNull(ins) && !cJSON_IsString(ins))
        BAD("instructions", "'instructions' must be a string, got %s", srv_jtype(ins));
    cJSON_AddItemToObject(px->echo, "instructions", ins ? cJSON_Duplicate(ins, true) : cJSON_CreateNull());
    if (cJSON_IsString(ins) && ins->valuestring[0] && !srv_chat_add(c, "system", ins->valuestring, -1))
        BAD(NULL, "out of memory");
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(b, "previous_response_id");
    if (prev && !cJSON_IsNull(prev) && !cJSON_IsString(prev))
        BAD("previous_response_id", "'previous_response_id' must be a string, got %s", srv_jtype(prev));
    cJSON_AddItemToObject(px->echo, "previous_response_id", prev ? cJSON_Duplicate(prev, true) : cJSON_CreateNull());
    int n_prev = 0;
    if (cJSON_IsString(prev)) {
        px->history = srv_store_history(&s->store, prev->valuestring, key);
        if (!px->history) {
            srv_err_set(e, 404, "invalid_request_error", "previous_response_id", "previous_response_not_found",
                        "Previous response with id '%.100s' not found. (tern keeps the last %d responses sent "
                        "with store true, each readable with the API key it was made with.)",
                        prev->valuestring, SRV_STORE_MAX);
            return false;
        }
        n_prev = cJSON_GetArraySize(px->history);
    } else if (!(px->history = cJSON_CreateArray())) {
        BAD(NULL, "out of memory");
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
    if (cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "type", "message");
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", input->valuestring);
        cJSON_AddItemToArray(px->history, m);
    } else if (cJSON_IsArray(input)) {
        for (const cJSON *it = input->child; it; it = it->next) cJSON_AddItemToArray(px->history, cJSON_Duplicate(it, true));
    } else if (input && !cJSON_IsNull(input)) {
        BAD("input", "'input' must be a string or an array of input items, got %s", srv_jtype(input));
    }
    if (!px->history->child) BAD("input", "'input' is required (a string or a list of input items)");
    int k = 0;
    for (const cJSON *it = px->history->child; it; it = it->next, k++) {
        char where[48];
        if (k < n_prev) snprintf(where, sizeof where, "the stored conversation's item %d", k);
        else if (cJSON_IsString(input)) snprintf(where, sizeof where, "input");
        else snprintf(where, sizeof where, "input[%d]", k - n_prev);
        const int src = k < n_prev ? -3 : cJSON_IsString(input) ? -2 : k - n_prev;
        if (!add_item(c, px->history, k, it, where, src, e)) return false;
    }
    return true;
}

bool srv_responses_parse(struct tern_server *s, const char *body, size_t len, int key, struct srv_req *r,
                         struct srv_err *e)
{
    memset(r, 0, sizeof *r);
    cJSON *doc = NULL;
    struct srv_chat c = {0};
    struct srv_proto *px = calloc(1, sizeof *px);
    bool ok = px && srv_chat_init(&c) && (px->echo = cJSON_CreateObject());
    if (!ok) {
        srv_chat_free(&c);
        srv_proto_free(px);
        srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    px->key = key;
    ok = srv_body_parse(body, len, &doc, e) && srv_fields_check(doc, SRV_API_RESPONSES, e) &&
         options_of(&c, doc, px, e) && conversation_of(s, &c, doc, key, px, e) &&
         srv_chat_parse(s, &c, SRV_API_RESPONSES, r, e);
    srv_chat_free(&c);
    cJSON_Delete(doc);
    if (!ok) {
        srv_proto_free(px);
        r->api = SRV_API_RESPONSES;
        return false;
    }
    r->proto = px;
    return true;
}
