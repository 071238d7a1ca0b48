/* srv_out_messages.c — the answer of a POST /v1/messages request (engine thread): Anthropic's
 * message object, or its stream of events (struct srv_writer; srv_output.c calls it where a
 * chat answer would be written).
 *
 * The object: {id "msg_...", type "message", role "assistant", model, content: a thinking block
 * {type "thinking", thinking, signature ""} first when the model thought (a template with
 * reasoning markup), a text block {type "text", text} when there is text, a tool_use block
 * {id "toolu_...", name, input (the arguments as an object)} per tool call, stop_reason
 * ("end_turn", "max_tokens" when max_tokens, the context or --request-timeout cut it,
 * "stop_sequence" with stop_sequence the one met, "tool_use"), usage {input_tokens,
 * output_tokens, cache_read_input_tokens, cache_creation_input_tokens}}. Usage counts as
 * Anthropic's does: input_tokens are the prompt tokens computed for this request,
 * cache_read_input_tokens those reused from earlier requests' KV (their sum is the prompt),
 * cache_creation_input_tokens 0 (tern caches without being asked).
 *
 * The stream, each event "event: NAME" + "data: {type NAME, ...}": message_start (the message
 * with empty content; its usage says the whole prompt as input, the split is known only once the
 * request runs), ping, then per block content_block_start, content_block_delta (thinking_delta
 * per piece of thinking then one signature_delta; text_delta per piece; one input_json_delta with
 * the whole arguments for a call, emitted once parsed), content_block_stop; then message_delta
 * {delta {stop_reason, stop_sequence}, usage} and message_stop. output_tokens include the
 * thinking's, as Anthropic counts them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char *stop_reason(const struct job *j)
{
    if (srv_job_cut_short(j)) return "max_tokens";
    if (j->tp && tern_toolcall_count(j->tp) > 0) return "tool_use";
    if (j->stop_hit) return "stop_sequence";
    return "end_turn";
}

static void add_stop(const struct job *j, cJSON *o)
{
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(j));
    if (!strcmp(stop_reason(j), "stop_sequence")) cJSON_AddStringToObject(o, "stop_sequence", j->req.stop[j->stop_which]);
    else cJSON_AddNullToObject(o, "stop_sequence");
}

static cJSON *usage(const struct job *j, bool final)
{
    const int reused = final ? j->st.n_reused : 0;
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", j->req.n_prompt - reused);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", reused);
    cJSON_AddNumberToObject(u, "output_tokens", final ? j->st.n_generated : 0);
    return u;
}

static cJSON *message(const struct job *j)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", j->id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", j->srv->flv[j->req.flavor].name);
    cJSON_AddArrayToObject(m, "content");
    return m;
}

/* The tool_use block of call i: input the arguments as an object ({} in the stream's start). */
static cJSON *tool_use(const struct job *j, int i, const struct tern_toolcall *c, bool input)
{
    char id[96];
    srv_job_sub_id(j, "toolu_", i, id, sizeof id);
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddStringToObject(b, "name", c->name);
    cJSON *args = input ? cJSON_Parse(c->arguments) : NULL;
    /* the parser gives an object's text; anything else would be a bug there, still an object here */
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(args);
        args = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(b, "input", args);
    return b;
}

/* A thinking block: its text (none with display "omitted") and a signature, "" (Anthropic signs
 * its thinking so it can check what comes back; tern has nothing to verify and keeps none). */
static cJSON *thinking_block(const struct job *j, const char *text)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "thinking");
    cJSON_AddStringToObject(b, "thinking", j->req.reasoning_omitted ? "" : text);
    cJSON_AddStringToObject(b, "signature", "");
    return b;
}

static cJSON *text_block(const char *text)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddStringToObject(b, "text", text);
    return b;
}

/* An event's object, its type first (Anthropic's order). */
static cJSON *ev(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void event(struct job *j, cJSON *o, bool locked)
{
    if (o) srv_job_event(j, cJSON_GetObjectItemCaseSensitive(o, "type")->valuestring, o, locked);
}

static cJSON *indexed(const char *type, int idx)
{
    cJSON *o = ev(type);
    cJSON_AddNumberToObject(o, "index", idx);
    return o;
}

static void open_stream(struct job *j)
{
    /* under srv->mu (srv_enqueue) */
    cJSON *m = message(j);
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(m, "usage", usage(j, false));
    cJSON *o = ev("message_start");
    cJSON_AddItemToObject(o, "message", m);
    event(j, o, true);
    event(j, ev("ping"), true);
}

static cJSON *delta(const char *type, int idx, const char *key, const char *value)
{
    cJSON *o = indexed("content_block_delta", idx), *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", type);
    cJSON_AddStringToObject(d, key, value);
    return o;
}

/* The open text or thinking block ends; a thinking block's signature comes just before its
 * stop, as Anthropic sends it. */
static void close_block(struct job *j)
{
    if (!j->pw.text_open && !j->pw.reasoning_open) return;
    if (j->pw.reasoning_open) event(j, delta("signature_delta", j->pw.n_items - 1, "signature", ""), false);
    event(j, indexed("content_block_stop", j->pw.n_items - 1), false);
    j->pw.text_open = j->pw.reasoning_open = false;
}

/* s[0..n) (whole UTF-8 characters) as a string; NULL when out of memory. */
static char *piece(const char *s, size_t n)
{
    char *t = malloc(n + 1);
    if (!t) return NULL;
    memcpy(t, s, n);
    t[n] = 0;
    return t;
}

/* Thinking as it comes: always before the text and the calls (the parser ends it first). */
static void stream_reasoning(struct job *j, const char *s, size_t n)
{
    if (!j->pw.reasoning_open) {
        close_block(j);
        cJSON *o = indexed("content_block_start", j->pw.n_items++);
        cJSON_AddItemToObject(o, "content_block", thinking_block(j, ""));
        event(j, o, false);
        j->pw.reasoning_open = true;
    }
    if (j->req.reasoning_omitted) return;
    char *t = piece(s, n);
    if (t) event(j, delta("thinking_delta", j->pw.n_items - 1, "thinking", t), false);
    free(t);
}

static void stream_text(struct job *j, const char *s, size_t n)
{
    if (j->pw.reasoning_open) close_block(j);
    if (!j->pw.text_open) {
        cJSON *o = indexed("content_block_start", j->pw.n_items++);
        cJSON_AddItemToObject(o, "content_block", text_block(""));
        event(j, o, false);
        j->pw.text_open = true;
    }
    char *t = piece(s, n);
    if (t) event(j, delta("text_delta", j->pw.n_items - 1, "text", t), false);
    free(t);
}

static void stream_call(struct job *j, int i, const struct tern_toolcall *c)
{
    close_block(j);
    const int idx = j->pw.n_items++;
    cJSON *o = indexed("content_block_start", idx);
    cJSON_AddItemToObject(o, "content_block", tool_use(j, i, c, false));
    event(j, o, false);
    event(j, delta("input_json_delta", idx, "partial_json", c->arguments), false);
    event(j, indexed("content_block_stop", idx), false);
}

static void finish_stream(struct job *j)
{
    close_block(j);
    cJSON *o = ev("message_delta"), *d = cJSON_AddObjectToObject(o, "delta");
    add_stop(j, d);
    cJSON_AddItemToObject(o, "usage", usage(j, true));
    event(j, o, false);
    event(j, ev("message_stop"), false);
}

static char *body(struct job *j)
{
    cJSON *m = message(j);
    cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    size_t n = 0, rn = 0;
    const char *reasoning = srv_job_reasoning(j, &rn);
    if (rn > 0) cJSON_AddItemToArray(content, thinking_block(j, reasoning));
    const char *text = srv_job_content(j, &n);
    if (n > 0) cJSON_AddItemToArray(content, text_block(text));
    const int nc = j->tp ? tern_toolcall_count(j->tp) : 0;
    for (int i = 0; i < nc; i++) cJSON_AddItemToArray(content, tool_use(j, i, tern_toolcall_get(j->tp, i), true));
    add_stop(j, m);
    cJSON_AddItemToObject(m, "usage", usage(j, true));
    char *txt = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    return txt;
}

const struct srv_writer srv_messages_writer = {.open = open_stream, .reasoning = stream_reasoning, .text = stream_text,
                                               .call = stream_call, .finish = finish_stream, .body = body};
