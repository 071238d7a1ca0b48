/* srv_messages.c — a POST /v1/messages body (Anthropic's Messages API) -> the chat request the
 * engine runs (read srv_translate.c first: the translation and its errors).
 *
 * system (a string or text blocks) becomes the system message. A user turn's text blocks become
 * one user message (blocks joined by a blank line) and each tool_result block a "tool" message
 * answering the tool_use with its id, which an earlier assistant turn must hold (is_error: its
 * text is marked "Error: ", the chat form has no flag for it). An assistant turn's text blocks
 * become its content and its tool_use blocks its tool_calls (input printed as the arguments'
 * JSON); its thinking blocks its reasoning_content (the template renders it or not: Qwen3's only
 * in the current turn's tool loop, as Anthropic keeps only that turn's), redacted_thinking blocks
 * are dropped. thinking {enabled | adaptive | disabled} becomes a reasoning budget (thinking_of).
 * Tools {name, description, input_schema} become chat function tools; server tools (web_search,
 * bash, text_editor, ...) are a 400 naming their type. tool_choice {auto, any, tool, none} becomes
 * "auto", "required", the named function and "none"; disable_parallel_tool_use becomes
 * parallel_tool_calls false. max_tokens is required, as Anthropic requires it. stop_sequences
 * (up to 16) are set on the parsed request directly: chat's "stop" takes 4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define BAD(param, ...)                                                                        \
    do {                                                                                       \
        srv_err_set(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__);                \
        return false;                                                                          \
    } while (0)

static bool is_type(const cJSON *block, const char *type)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(block, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* Text blocks (content parts of system or tool_result) or a string -> text, joined by a blank
 * line; where names the field. Image and document blocks are refused (tern reads text). */
static bool blocks_text(const cJSON *v, const char *where, struct sbuf *out, struct srv_err *e)
{
    if (cJSON_IsString(v)) return sbuf_adds(out, v->valuestring);
    if (!cJSON_IsArray(v)) BAD(NULL, "%s: must be a string or an array of text blocks, got %s", where, srv_jtype(v));
    int i = 0;
    for (const cJSON *b = v->child; b; b = b->next, i++) {
        const cJSON *t = cJSON_IsObject(b) ? cJSON_GetObjectItemCaseSensitive(b, "type") : NULL;
        const cJSON *tx = cJSON_IsObject(b) ? cJSON_GetObjectItemCaseSensitive(b, "text") : NULL;
        if (!cJSON_IsString(t)) BAD(NULL, "%s.%d: a content block needs a string 'type'", where, i);
        if (strcmp(t->valuestring, "text"))
            BAD(NULL, "%s.%d.type: '%.60s' blocks are not supported here by tern (text only: its models read text)",
                where, i, t->valuestring);
        if (!cJSON_IsString(tx)) BAD(NULL, "%s.%d.text: Field required (a string)", where, i);
        if (out->len) sbuf_adds(out, "\n\n");
        sbuf_adds(out, tx->valuestring);
    }
    return true;
}

/* Is id the id of a tool_use block in an earlier assistant message (messages before m)? */
static const cJSON *find_tool_use(const cJSON *msgs, const cJSON *m, const char *id)
{
    for (const cJSON *x = msgs->child; x && x != m; x = x->next) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(x, "content");
        for (const cJSON *b = cJSON_IsArray(content) ? content->child : NULL; b; b = b->next) {
            const cJSON *bid = cJSON_GetObjectItemCaseSensitive(b, "id");
            if (is_type(b, "tool_use") && cJSON_IsString(bid) && !strcmp(bid->valuestring, id)) return b;
        }
    }
    return NULL;
}

static bool flush_text(struct srv_chat *c, const char *role, struct sbuf *text, bool *have, int src,
                       struct srv_err *e)
{
    if (!*have) return true;
    cJSON *m = srv_chat_add(c, role, text->p ? text->p : "", src);
    text->len = 0;
    if (text->p) text->p[0] = 0;
    *have = false;
    if (!m) BAD(NULL, "out of memory");
    return true;
}

static bool user_turn(struct srv_chat *c, const cJSON *msgs, const cJSON *m, const cJSON *content, int mi,
                      struct srv_err *e)
{
    struct sbuf text = {0};
    bool have = false, ok = true;
    int bi = 0;
    char where[64];
    for (const cJSON *b = content->child; b && ok; b = b->next, bi++) {
        const cJSON *t = cJSON_IsObject(b) ? cJSON_GetObjectItemCaseSensitive(b, "type") : NULL;
        snprintf(where, sizeof where, "messages.%d.content.%d", mi, bi);
        if (!cJSON_IsString(t)) {
            srv_err_set(e, 400, "invalid_request_error", "messages", NULL, "%s: a content block needs a string 'type'", where);
            ok = false;
        } else if (!strcmp(t->valuestring, "text")) {
            const cJSON *tx = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(tx)) {
                srv_err_set(e, 400, "invalid_request_error", "messages", NULL, "%s.text: Field required (a string)", where);
                ok = false;
            } else {
                if (have) sbuf_adds(&text, "\n\n");
                sbuf_adds(&text, tx->valuestring);
                have = true;
            }
        } else if (!strcmp(t->valuestring, "tool_result")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(b, "is_error");
            const cJSON *use = cJSON_IsString(id) ? find_tool_use(msgs, m, id->valuestring) : NULL;
            struct sbuf out = {0};
            if (!cJSON_IsString(id)) {
                srv_err_set(e, 400, "invalid_request_error", "messages", NULL, "%s.tool_use_id: Field required (a string)", where);
                ok = false;
            } else if (!use) {
                srv_err_set(e, 400, "invalid_request_error", "messages", NULL, "%s: unexpected `tool_use_id` found in "
                            "`tool_result` blocks: %.80s. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in an earlier assistant message", where, id->valuestring);
                ok = false;
            } else if (err && !cJSON_IsBool(err)) {
                srv_err_set(e, 400, "invalid_request_error", "messages", NULL, "%s.is_error: must be a boolean", where);
                ok = false;
            } else {
                const cJSON *rc = cJSON_GetObjectItemCaseSensitive(b, "content");
                char cw[80];
                snprintf(cw, sizeof cw, "%s.content", where);
                if (cJSON_IsTrue(err)) sbuf_adds(&out, "Error: ");
                ok = !rc || cJSON_IsNull(rc) || blocks_text(rc, cw, &out, e);
                if (!ok) snprintf(e->param, sizeof e->param, "messages");
                ok = ok && flush_text(c, "user", &text, &have, mi, e);
                cJSON *tm = ok ? srv_chat_add(c, "tool", out.p ? out.p : "", mi) : NULL;
                if (ok && !tm) {
                    srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
                    ok = false;
                }
                if (tm) {
                    cJSON_AddStringToObject(tm, "tool_call_id", id->valuestring);
                    cJSON_AddStringToObject(tm, "name", cJSON_GetObjectItemCaseSensitive(use, "name")->valuestring);
                }
            }
            sbuf_free(&out);
        } else {
            srv_err_set(e, 400, "invalid_request_error", "messages", NULL, "%s.type: '%.60s' blocks are not supported "
                        "by tern in a user message (it takes text and tool_result; its models read text only)",
                        where, t->valuestring);
            ok = false;
        }
    }
    ok = ok && flush_text(c, "user", &text, &have, mi, e);
    sbuf_free(&text);
    return ok;
}

static bool assistant_turn(struct srv_chat *c, const cJSON *content, int mi, struct srv_err *e)
{
    struct sbuf text = {0};
    int bi = 0;
    /* the text first (one assistant message), then its calls join it */
    for (const cJSON *b = content->child; b; b = b->next, bi++) {
        const cJSON *t = cJSON_IsObject(b) ? cJSON_GetObjectItemCaseSensitive(b, "type") : NULL;
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsString(t)) {
            sbuf_free(&text);
            BAD("messages", "messages.%d.content.%d: a content block needs a string 'type'", mi, bi);
        }
        if (!strcmp(t->valuestring, "text")) {
            if (!cJSON_IsString(tx)) {
                sbuf_free(&text);
                BAD("messages", "messages.%d.content.%d.text: Field required (a string)", mi, bi);
            }
            if (text.len) sbuf_adds(&text, "\n\n");
            sbuf_adds(&text, tx->valuestring);
        } else if (!strcmp(t->valuestring, "tool_use")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *in = cJSON_GetObjectItemCaseSensitive(b, "input");
            const char *bad = !cJSON_IsString(id) || !id->valuestring[0] ? "id (a non-empty string)"
                              : !cJSON_IsString(nm) || !srv_tool_name_ok(nm->valuestring) ? "name (^[a-zA-Z0-9_-]{1,64}$)"
                              : !cJSON_IsObject(in) ? "input (an object)" : NULL;
            if (bad) {
                sbuf_free(&text);
                BAD("messages", "messages.%d.content.%d.%s: Field required", mi, bi, bad);
            }
        } else if (!strcmp(t->valuestring, "thinking")) {
            const cJSON *th = cJSON_GetObjectItemCaseSensitive(b, "thinking");
            const cJSON *sg = cJSON_GetObjectItemCaseSensitive(b, "signature");
            if (!cJSON_IsString(th) || (sg && !cJSON_IsString(sg))) {
                sbuf_free(&text);
                BAD("messages", "messages.%d.content.%d.%s: Field required (a string)", mi, bi,
                    !cJSON_IsString(th) ? "thinking" : "signature");
            }
            /* the signature is not checked: tern signs nothing (its own are "") */
            if (!srv_chat_reasoning(c, th->valuestring)) {
                sbuf_free(&text);
                BAD(NULL, "out of memory");
            }
        } else if (strcmp(t->valuestring, "redacted_thinking")) {
            sbuf_free(&text);
            BAD("messages", "messages.%d.content.%d.type: '%.60s' blocks are not supported by tern in an assistant "
                "message (it takes text, tool_use, thinking and redacted_thinking)", mi, bi, t->valuestring);
        }
    }
    cJSON *m = srv_chat_add(c, "assistant", text.p ? text.p : "", mi);
    sbuf_free(&text);
    if (!m) BAD(NULL, "out of memory");
    for (const cJSON *b = content->child; b; b = b->next) {
        if (!is_type(b, "tool_use")) continue;
        char *args = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "input"));
        const bool ok = args && srv_chat_add_call(c, cJSON_GetObjectItemCaseSensitive(b, "id")->valuestring,
                                                  cJSON_GetObjectItemCaseSensitive(b, "name")->valuestring, args, mi);
        free(args);
        if (!ok) BAD(NULL, "out of memory");
    }
    return true;
}

static bool conversation_of(struct srv_chat *c, const cJSON *b, struct srv_err *e)
{
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(b, "system");
    if (sys && !cJSON_IsNull(sys)) {
        struct sbuf t = {0};
        if (!blocks_text(sys, "system", &t, e)) {
            sbuf_free(&t);
            snprintf(e->param, sizeof e->param, "system");
            return false;
        }
        cJSON *m = t.len ? srv_chat_add(c, "system", t.p, -1) : c->msgs;
        sbuf_free(&t);
        if (!m) BAD(NULL, "out of memory");
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(b, "messages");
    if (!msgs) BAD("messages", "messages: Field required");
    if (!cJSON_IsArray(msgs)) BAD("messages", "messages: must be an array of messages, got %s", srv_jtype(msgs));
    if (!msgs->child) BAD("messages", "messages: at least one message is required");
    int mi = 0;
    const cJSON *last = NULL;
    for (const cJSON *m = msgs->child; m; m = m->next, mi++) {
        last = m;
        const cJSON *role = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "role") : NULL;
        const cJSON *content = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "content") : NULL;
        if (!cJSON_IsObject(m)) BAD("messages", "messages.%d: must be an object {\"role\", \"content\"}, got %s", mi, srv_jtype(m));
        for (const cJSON *k = m->child; k; k = k->next)
            if (strcmp(k->string, "role") && strcmp(k->string, "content"))
                BAD("messages", "messages.%d.%.60s: Extra inputs are not permitted", mi, k->string);
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
            BAD("messages", "messages.%d.role: Input should be 'user' or 'assistant'", mi);
        if (!content) BAD("messages", "messages.%d.content: Field required", mi);
        const bool user = !strcmp(role->valuestring, "user");
        if (cJSON_IsString(content)) {
            if (!srv_chat_add(c, user ? "user" : "assistant", content->valuestring, mi)) BAD(NULL, "out of memory");
            continue;
        }
        if (!cJSON_IsArray(content))
            BAD("messages", "messages.%d.content: must be a string or an array of content blocks, got %s", mi,
                srv_jtype(content));
        if (!(user ? user_turn(c, msgs, m, content, mi, e) : assistant_turn(c, content, mi, e))) return false;
    }
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(last, "role");
    if (!strcmp(lr->valuestring, "assistant"))
        BAD("messages", "messages.%d: the last message is the assistant's: continuing a prefilled assistant "
            "turn is not supported by tern (end with a user message)", mi - 1);
    return true;
}

static bool tools_of(struct srv_chat *c, const cJSON *b, struct srv_err *e)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(b, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) BAD("tools", "tools: must be an array, got %s", srv_jtype(tools));
        cJSON *out = cJSON_AddArrayToObject(c->body, "tools");
        int i = 0;
        for (const cJSON *t = tools->child; t; t = t->next, i++) {
            if (!cJSON_IsObject(t)) BAD("tools", "tools.%d: must be an object {\"name\", \"input_schema\"}", i);
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
            if (ty && !cJSON_IsNull(ty) && !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "custom")))
                BAD("tools", "tools.%d.type: '%.60s' tools are not supported by tern (server and Anthropic-defined "
                    "tools such as web_search, bash, text_editor or computer; client tools with an input_schema "
                    "are)", i, cJSON_IsString(ty) ? ty->valuestring : srv_jtype(ty));
            for (const cJSON *k = t->child; k; k = k->next)
                if (strcmp(k->string, "type") && strcmp(k->string, "name") && strcmp(k->string, "description") &&
                    strcmp(k->string, "input_schema") && strcmp(k->string, "cache_control"))
                    BAD("tools", "tools.%d.%.60s: Extra inputs are not permitted", i, k->string);
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name");
            const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
            if (!cJSON_IsString(nm)) BAD("tools", "tools.%d.name: Field required (a string)", i);
            if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc)) BAD("tools", "tools.%d.description: must be a string", i);
            if (!cJSON_IsObject(schema)) BAD("tools", "tools.%d.input_schema: Field required (a JSON Schema object)", i);
            cJSON *ct = srv_chat_tool(nm->valuestring, desc, schema, false);
            if (!ct) BAD(NULL, "out of memory");
            cJSON_AddItemToArray(out, ct);
        }
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(b, "tool_choice");
    if (!tc || cJSON_IsNull(tc)) return true;
    const cJSON *ty = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "type") : NULL;
    if (!cJSON_IsString(ty)) BAD("tool_choice", "tool_choice: must be an object {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
    for (const cJSON *k = tc->child; k; k = k->next)
        if (strcmp(k->string, "type") && strcmp(k->string, "name") && strcmp(k->string, "disable_parallel_tool_use"))
            BAD("tool_choice", "tool_choice.%.60s: Extra inputs are not permitted", k->string);
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
    if (dp && !cJSON_IsBool(dp)) BAD("tool_choice", "tool_choice.disable_parallel_tool_use: must be a boolean");
    const char *t = ty->valuestring;
    if (!strcmp(t, "auto") || !strcmp(t, "none")) {
        cJSON_AddStringToObject(c->body, "tool_choice", t);
    } else if (!strcmp(t, "any")) {
        cJSON_AddStringToObject(c->body, "tool_choice", "required");
    } else if (!strcmp(t, "tool")) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(tc, "name");
        if (!cJSON_IsString(nm)) BAD("tool_choice", "tool_choice.name: Field required (a string) for type 'tool'");
        cJSON *o = cJSON_AddObjectToObject(c->body, "tool_choice");
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "function"), "name", nm->valuestring);
    } else {
        BAD("tool_choice", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none', got '%.60s'", t);
    }
    if (cJSON_IsTrue(dp)) cJSON_AddFalseToObject(c->body, "parallel_tool_calls");
    return true;
}

/* thinking: {type "enabled", budget_tokens N} -> chat's thinking_budget_tokens N (the thinking is
 * cut after N tokens, srv_reasoning.c); {type "adaptive"} -> the model thinks as long as it
 * wants; {type "disabled"} -> enable_thinking false for templates that take it (Qwen3's closes the
 * thinking in the prompt) and a budget of 0 for those that do not (closed at once). display
 * "omitted" is read by srv_messages_parse. Anthropic's rules hold but one: budget_tokens must be
 * below max_tokens (mt; NULL for count_tokens, which has none), and may be under Anthropic's
 * minimum of 1024, small models thinking in fewer tokens. */
static bool thinking_of(struct srv_chat *c, const cJSON *th, const cJSON *mt, struct srv_err *e)
{
    if (!th || cJSON_IsNull(th)) return true;
    const cJSON *ty = cJSON_IsObject(th) ? cJSON_GetObjectItemCaseSensitive(th, "type") : NULL;
    if (!cJSON_IsString(ty))
        BAD("thinking", "thinking: must be an object {\"type\": \"enabled\" | \"adaptive\" | \"disabled\"}");
    const char *t = ty->valuestring;
    const bool enabled = !strcmp(t, "enabled"), disabled = !strcmp(t, "disabled");
    if (!enabled && !disabled && strcmp(t, "adaptive"))
        BAD("thinking", "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled', got '%.60s'", t);
    for (const cJSON *k = th->child; k; k = k->next)
        if (strcmp(k->string, "type") && (disabled || strcmp(k->string, "display")) &&
            (!enabled || strcmp(k->string, "budget_tokens")))
            BAD("thinking", "thinking.%s.%.60s: Extra inputs are not permitted", t, k->string);
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(th, "display");
    if (dp && !cJSON_IsNull(dp) &&
        !(cJSON_IsString(dp) && (!strcmp(dp->valuestring, "summarized") || !strcmp(dp->valuestring, "omitted"))))
        BAD("thinking", "thinking.%s.display: Input should be 'summarized' or 'omitted'", t);
    if (disabled) {
        cJSON_AddFalseToObject(cJSON_AddObjectToObject(c->body, "chat_template_kwargs"), "enable_thinking");
        cJSON_AddNumberToObject(c->body, "thinking_budget_tokens", 0);
        return true;
    }
    if (!enabled) return true;
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(th, "budget_tokens");
    if (!bt) BAD("thinking", "thinking.enabled.budget_tokens: Field required");
    if (!cJSON_IsNumber(bt) || bt->valuedouble != (double)(long long)bt->valuedouble || bt->valuedouble < 0 ||
        bt->valuedouble > (1 << 30))
        BAD("thinking", "thinking.enabled.budget_tokens: Input should be an integer from 0 to %d (tern allows "
            "budgets under Anthropic's minimum of 1024)", 1 << 30);
    if (mt && bt->valuedouble >= mt->valuedouble)
        BAD("max_tokens", "`max_tokens` must be greater than `thinking.budget_tokens` (%lld >= %lld): the thinking "
            "counts toward max_tokens", (long long)bt->valuedouble, (long long)mt->valuedouble);
    cJSON_AddNumberToObject(c->body, "thinking_budget_tokens", bt->valuedouble);
    return true;
}

static bool options_of(struct srv_chat *c, const cJSON *b, bool count_only, struct srv_err *e)
{
    srv_chat_copy(c, b, "model", NULL);
    srv_chat_copy(c, b, "stream", NULL);
    srv_chat_copy(c, b, "top_p", NULL);
    srv_chat_copy(c, b, "top_k", NULL);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(b, "max_tokens");
    if (!count_only && !mt) BAD("max_tokens", "max_tokens: Field required");
    if (mt && !cJSON_IsNumber(mt)) BAD("max_tokens", "max_tokens: Input should be a valid integer, got %s", srv_jtype(mt));
    if (mt && !(mt->valuedouble >= 1)) BAD("max_tokens", "max_tokens: Input should be greater than or equal to 1");
    srv_chat_copy(c, b, "max_tokens", NULL);
    const cJSON *temp = cJSON_GetObjectItemCaseSensitive(b, "temperature");
    if (temp && !cJSON_IsNull(temp)) {
        if (!cJSON_IsNumber(temp) || temp->valuedouble < 0 || temp->valuedouble > 1)
            BAD("temperature", "temperature: Input should be a number between 0 and 1");
        srv_chat_copy(c, b, "temperature", NULL);
    }
    if (!thinking_of(c, cJSON_GetObjectItemCaseSensitive(b, "thinking"), count_only ? NULL : mt, e)) return false;
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(b, "stop_sequences");
    if (ss && !cJSON_IsNull(ss)) {
        if (!cJSON_IsArray(ss)) BAD("stop_sequences", "stop_sequences: must be an array of strings, got %s", srv_jtype(ss));
        if (cJSON_GetArraySize(ss) > SRV_MAX_STOP)
            BAD("stop_sequences", "stop_sequences: at most %d sequences, got %d", SRV_MAX_STOP, cJSON_GetArraySize(ss));
        int i = 0;
        for (const cJSON *x = ss->child; x; x = x->next, i++)
            if (!cJSON_IsString(x)) BAD("stop_sequences", "stop_sequences.%d: must be a string, got %s", i, srv_jtype(x));
    }
    return true;
}

bool srv_messages_parse(struct tern_server *s, const char *body, size_t len, bool count_only, struct srv_req *r,
                        struct srv_err *e)
{
    memset(r, 0, sizeof *r);
    cJSON *doc = NULL;
    struct srv_chat c = {0};
    if (!srv_chat_init(&c)) {
        srv_chat_free(&c);
        srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    bool ok = srv_body_parse(body, len, &doc, e) && srv_fields_check(doc, SRV_API_MESSAGES, e) &&
              options_of(&c, doc, count_only, e) && conversation_of(&c, doc, e) && tools_of(&c, doc, e) &&
              srv_chat_parse(s, &c, SRV_API_MESSAGES, r, e);
    /* display "omitted": the thinking blocks come without their text (srv_out_messages.c) */
    const cJSON *dp = ok ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "thinking"), "display") : NULL;
    r->reasoning_omitted = cJSON_IsString(dp) && !strcmp(dp->valuestring, "omitted");
    /* the stop sequences: on the parsed request (chat's "stop" takes at most 4) */
    const cJSON *ss = ok ? cJSON_GetObjectItemCaseSensitive(doc, "stop_sequences") : NULL;
    for (const cJSON *x = cJSON_IsArray(ss) ? ss->child : NULL; x && ok; x = x->next) {
        if (!x->valuestring[0]) continue;
        if (!(r->stop[r->n_stop++] = strdup(x->valuestring))) {
            srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
            ok = false;
        }
    }
    srv_chat_free(&c);
    cJSON_Delete(doc);
    r->api = SRV_API_MESSAGES;
    return ok;
}
