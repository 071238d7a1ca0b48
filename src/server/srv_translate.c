/* srv_translate.c — what the Responses and Messages translators (srv_responses.c,
 * srv_messages.c) share: the protocol state a request keeps (struct srv_proto), the chat
 * message they append to, and the wording of errors.
 *
 * A Responses or Messages request becomes a chat-completions body that srv_req_parse checks,
 * renders and tokenizes like any other, so every guard of that path holds for them too. The
 * translators check their own protocol's shapes first and name its fields; what the chat checks
 * still refuse (a strict schema tern cannot enforce, a prompt longer than the context, a template
 * error) is said in chat's words, which srv_err_translate turns into the protocol's: its field
 * names and, through the map each translator keeps, the index of the input item or message the
 * chat message came from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

void srv_proto_free(struct srv_proto *p)
{
    if (!p) return;
    cJSON_Delete(p->echo);
    cJSON_Delete(p->history);
    free(p);
}

/* out[0..n) into buf (cap bytes), cut at a character boundary when it does not fit (the bytes
 * after a cut must not leave half a UTF-8 character in an error body). */
static void put_back(char *buf, size_t cap, const char *out, size_t n)
{
    if (n >= cap) n = cap - 1;
    /* a character cut here or by the caller's own buffer: drop its lead and continuation bytes */
    size_t lead = n;
    while (lead > 0 && ((unsigned char)out[lead - 1] & 0xC0) == 0x80) lead--;
    if (lead > 0 && (unsigned char)out[lead - 1] >= 0xC0) {
        const unsigned char b = (unsigned char)out[lead - 1];
        const size_t want = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        if (n - (lead - 1) < want) n = lead - 1;
    }
    memcpy(buf, out, n);
    buf[n] = 0;
}

/* Replace every `from` in buf (NUL-terminated, cap bytes) with `to`; cut at cap. */
static void replace_all(char *buf, size_t cap, const char *from, const char *to)
{
    const size_t fl = strlen(from), tl = strlen(to);
    char out[1024];
    size_t o = 0;
    for (const char *p = buf; *p && o + 1 < sizeof out;) {
        if (!strncmp(p, from, fl)) {
            for (size_t k = 0; k < tl && o + 1 < sizeof out; k++) out[o++] = to[k];
            p += fl;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
    put_back(buf, cap, out, o);
}

/* "messages[N]" -> the protocol's name of chat message N's origin. */
static void remap_indices(char *buf, size_t cap, enum srv_api api, const int *src, int n_src)
{
    char out[1024];
    size_t o = 0;
    static const char key[] = "messages[";
    for (const char *p = buf; *p && o + 1 < sizeof out;) {
        char *end = NULL;
        long n = !strncmp(p, key, sizeof key - 1) ? strtol(p + sizeof key - 1, &end, 10) : -1;
        if (n < 0 || n >= n_src || !end || *end != ']') {
            out[o++] = *p++;
            continue;
        }
        char seg[48];
        const int from = src[n];
        if (api == SRV_API_RESPONSES)
            snprintf(seg, sizeof seg, from == -1 ? "instructions" : from == -2 ? "input"
                                      : from == -3 ? "the stored conversation (previous_response_id)" : "input[%d]", from);
        else
            snprintf(seg, sizeof seg, from == -1 ? "system" : "messages[%d]", from);
        for (const char *q = seg; *q && o + 1 < sizeof out; q++) out[o++] = *q;
        p = end + 1;
    }
    out[o] = 0;
    put_back(buf, cap, out, o);
}

void srv_err_translate(struct srv_err *e, enum srv_api api, const int *src, int n_src)
{
    static const char *const RESP[][2] = {
        {"].function.parameters", "].parameters"}, {"].function.name", "].name"},
        {"].function.strict", "].strict"}, {"response_format.json_schema.schema", "text.format.schema"},
        {"response_format.json_schema.strict", "text.format.strict"}, {"'response_format'", "'text.format'"},
        {"'max_tokens'", "'max_output_tokens'"}, {"'reasoning_effort'", "'reasoning.effort'"},
        {"your messages resulted", "your input resulted"},
        {"length of the messages.", "length of the input."}, {"'tool_choice.function.name'", "'tool_choice.name'"},
        {NULL, NULL}};
    static const char *const MSGS[][2] = {
        {"].function.parameters", "].input_schema"}, {"].function.name", "].name"},
        {"'tool_choice.function.name'", "'tool_choice.name'"}, {"'stop'", "'stop_sequences'"}, {NULL, NULL}};
    const char *const (*t)[2] = api == SRV_API_RESPONSES ? RESP : MSGS;
    for (int i = 0; t[i][0]; i++) replace_all(e->message, sizeof e->message, t[i][0], t[i][1]);
    if (src) remap_indices(e->message, sizeof e->message, api, src, n_src);
    if (api == SRV_API_RESPONSES) {
        if (!strcmp(e->param, "messages")) snprintf(e->param, sizeof e->param, "input");
        else if (!strcmp(e->param, "response_format")) snprintf(e->param, sizeof e->param, "text.format");
        else if (!strcmp(e->param, "max_tokens")) snprintf(e->param, sizeof e->param, "max_output_tokens");
        else if (!strcmp(e->param, "reasoning_effort")) snprintf(e->param, sizeof e->param, "reasoning.effort");
    } else if (!strcmp(e->param, "stop")) {
        snprintf(e->param, sizeof e->param, "stop_sequences");
    }
}

/* ---------------------------------------------------------------- the chat messages built */
bool srv_chat_init(struct srv_chat *c)
{
    memset(c, 0, sizeof *c);
    c->body = cJSON_CreateObject();
    c->msgs = c->body ? cJSON_AddArrayToObject(c->body, "messages") : NULL;
    return c->msgs != NULL;
}

void srv_chat_free(struct srv_chat *c)
{
    cJSON_Delete(c->body);
    free(c->src);
    free(c->reasoning);
    memset(c, 0, sizeof *c);
}

/* The pending thinking onto m when m is an assistant turn without any yet; else (a user or tool
 * message came first) it is dropped: thinking belongs to the answer it preceded. */
static void take_reasoning(struct srv_chat *c, cJSON *m)
{
    if (!c->reasoning) return;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!strcmp(role->valuestring, "assistant") && !cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"))
        cJSON_AddStringToObject(m, "reasoning_content", c->reasoning);
    free(c->reasoning);
    c->reasoning = NULL;
}

cJSON *srv_chat_add(struct srv_chat *c, const char *role, const char *content, int src)
{
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 16;
        int *p = realloc(c->src, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        c->src = p;
        c->cap = cap;
    }
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    cJSON_AddStringToObject(m, "role", role);
    if (content) cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(c->msgs, m);
    c->src[c->n++] = src;
    c->assistant_open = !strcmp(role, "assistant");
    take_reasoning(c, m);
    return m;
}

bool srv_chat_reasoning(struct srv_chat *c, const char *text)
{
    if (!text[0]) return true;
    const size_t had = c->reasoning ? strlen(c->reasoning) : 0, n = strlen(text);
    char *r = realloc(c->reasoning, had + 2 + n + 1);
    if (!r) return false;
    if (had) memcpy(r + had, "\n\n", 2);
    memcpy(r + had + (had ? 2 : 0), text, n + 1);
    c->reasoning = r;
    return true;
}

bool srv_chat_add_call(struct srv_chat *c, const char *id, const char *name, const char *args, int src)
{
    /* calls that follow an assistant turn (its text, or calls before them) are that turn's */
    cJSON *m = cJSON_GetArrayItem(c->msgs, c->n - 1);
    if (!m || !c->assistant_open) {
        if (!(m = srv_chat_add(c, "assistant", "", src))) return false;
    } else {
        take_reasoning(c, m);
    }
    cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!tcs) tcs = cJSON_AddArrayToObject(m, "tool_calls");
    cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    if (!tcs || !tc || !fn) {
        cJSON_Delete(tc);
        cJSON_Delete(fn);
        return false;
    }
    cJSON_AddStringToObject(tc, "id", id);
    cJSON_AddStringToObject(tc, "type", "function");
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddStringToObject(fn, "arguments", args);
    cJSON_AddItemToObject(tc, "function", fn);
    cJSON_AddItemToArray(tcs, tc);
    c->assistant_open = true;
    return true;
}

cJSON *srv_chat_tool(const char *name, const cJSON *description, const cJSON *parameters, bool strict)
{
    cJSON *t = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    if (!t || !fn) {
        cJSON_Delete(t);
        cJSON_Delete(fn);
        return NULL;
    }
    cJSON_AddStringToObject(t, "type", "function");
    cJSON_AddStringToObject(fn, "name", name);
    if (description && !cJSON_IsNull(description))
        cJSON_AddItemToObject(fn, "description", cJSON_Duplicate(description, true));
    if (parameters && !cJSON_IsNull(parameters))
        cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(parameters, true));
    if (strict) cJSON_AddTrueToObject(fn, "strict");
    cJSON_AddItemToObject(t, "function", fn);
    return t;
}

void srv_chat_copy(struct srv_chat *c, const cJSON *from, const char *key, const char *as)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, key);
    if (v && !cJSON_IsNull(v)) cJSON_AddItemToObject(c->body, as ? as : key, cJSON_Duplicate(v, true));
}

bool srv_chat_parse(struct tern_server *s, struct srv_chat *c, enum srv_api api, struct srv_req *r,
                    struct srv_err *e)
{
    char *txt = cJSON_PrintUnformatted(c->body);
    if (!txt) {
        srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory translating the request");
        return false;
    }
    const bool ok = srv_req_parse(s, JOB_CHAT, txt, strlen(txt), r, e);
    free(txt);
    r->api = api;
    if (!ok) srv_err_translate(e, api, c->src, c->n);
    return ok;
}
