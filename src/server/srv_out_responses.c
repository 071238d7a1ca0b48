/* srv_out_responses.c — the answer of a POST /v1/responses request (engine thread): the response
 * object, or its stream of events (struct srv_writer; srv_output.c calls it where a chat answer
 * would be written).
 *
 * The object: {id "resp_...", object "response", created_at, status "completed" | "incomplete"
 * (incomplete_details {reason "max_output_tokens"} when max_output_tokens, the context or
 * --request-timeout cut it), output: a reasoning item {type "reasoning", id "rs_...", summary [],
 * content [{type "reasoning_text", text}]} first when the model thought (a template with
 * reasoning markup), a message item {type "message", role "assistant", content [{type
 * "output_text", text, annotations []}]} for the text, a function_call item {id "fc_...",
 * call_id "call_...", name, arguments} per tool call, usage {input_tokens, input_tokens_details
 * {cached_tokens}, output_tokens, output_tokens_details {reasoning_tokens}, total_tokens}} plus
 * what the request set (proto->echo: instructions, tools, tool_choice, text, reasoning, ...).
 *
 * The stream, each event "event: TYPE" + "data: {type, sequence_number, ...}": response.created
 * and response.in_progress; for the thinking, response.output_item.added (the reasoning item),
 * response.content_part.added (a reasoning_text part), response.reasoning_text.delta per piece,
 * .reasoning_text.done, .content_part.done, .output_item.done (the names of OpenAI's current
 * API; openai-node 4.x's types predate them and pass them through); for the text,
 * response.output_item.added (the message),
 * response.content_part.added, response.output_text.delta per piece, then .output_text.done,
 * .content_part.done and .output_item.done; for each call, .output_item.added,
 * .function_call_arguments.delta (the whole arguments: a call is emitted once parsed),
 * .function_call_arguments.done, .output_item.done; last response.completed (or
 * response.incomplete) with the whole object. A stored response (store true, the default) is
 * put in the server's store before the last event or the body goes out, so a client that reads
 * it can continue from it at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static cJSON *response_obj(const struct job *j, const char *status)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)j->created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddNullToObject(o, "error");
    if (!strcmp(status, "incomplete"))
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else
        cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddStringToObject(o, "model", j->srv->flv[j->req.flavor].name);
    cJSON_AddArrayToObject(o, "output");
    const cJSON *echo = j->req.proto ? j->req.proto->echo : NULL;
    for (const cJSON *f = echo ? echo->child : NULL; f; f = f->next)
        cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, true));
    cJSON_AddNullToObject(o, "usage");
    return o;
}

static cJSON *usage(const struct job *j)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", j->req.n_prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", j->st.n_reused);
    cJSON_AddNumberToObject(u, "output_tokens", j->st.n_generated);
    /* counted under a reasoning control (a budget or tools), as chat's usage does */
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", j->st.reasoning_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt + j->st.n_generated);
    return u;
}

static cJSON *text_part(const char *text)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", text);
    cJSON_AddArrayToObject(p, "annotations");
    cJSON_AddArrayToObject(p, "logprobs");
    return p;
}

static cJSON *reasoning_part(const char *text)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "reasoning_text");
    cJSON_AddStringToObject(p, "text", text);
    return p;
}

/* An item's {id PREFIX..., type} at output index idx. */
static cJSON *item_head(const struct job *j, const char *prefix, const char *type, int idx)
{
    char id[96];
    srv_job_sub_id(j, prefix, idx, id, sizeof id);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "type", type);
    return m;
}

/* The reasoning item at output index idx (text NULL: in progress, no content yet). summary is
 * empty: tern gives the thinking itself, not a summary of it. */
static cJSON *reasoning_item(const struct job *j, int idx, const char *text, const char *status)
{
    cJSON *m = item_head(j, "rs_", "reasoning", idx);
    cJSON_AddArrayToObject(m, "summary");
    cJSON *c = cJSON_AddArrayToObject(m, "content");
    if (text) cJSON_AddItemToArray(c, reasoning_part(text));
    cJSON_AddStringToObject(m, "status", status);
    return m;
}

/* The message item at output index idx (text NULL: in progress, no content yet). */
static cJSON *message_item(const struct job *j, int idx, const char *text, const char *status)
{
    cJSON *m = item_head(j, "msg_", "message", idx);
    cJSON_AddStringToObject(m, "status", status);
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON *c = cJSON_AddArrayToObject(m, "content");
    if (text) cJSON_AddItemToArray(c, text_part(text));
    return m;
}

/* The two items whose text streams in: the reasoning item and the message. Each has one content
 * part, announced, filled by deltas, then done; only output_text's events carry logprobs. */
struct streamed {
    const char *prefix, *delta, *done;
    cJSON *(*part)(const char *text);
    cJSON *(*item)(const struct job *j, int idx, const char *text, const char *status);
    bool logprobs;
};
static const struct streamed REASONING = {"rs_", "response.reasoning_text.delta", "response.reasoning_text.done",
                                          reasoning_part, reasoning_item, false};
static const struct streamed TEXT = {"msg_", "response.output_text.delta", "response.output_text.done", text_part,
                                     message_item, true};

/* The function_call item of call i at output index idx (arguments NULL: in progress, ""). */
static cJSON *call_item(const struct job *j, int i, int idx, const struct tern_toolcall *c, bool done)
{
    char call_id[96];
    srv_job_sub_id(j, "call_", i, call_id, sizeof call_id);
    cJSON *m = item_head(j, "fc_", "function_call", idx);
    cJSON_AddStringToObject(m, "status", done ? "completed" : "in_progress");
    cJSON_AddStringToObject(m, "call_id", call_id);
    cJSON_AddStringToObject(m, "name", c->name);
    cJSON_AddStringToObject(m, "arguments", done ? c->arguments : "");
    return m;
}

/* An event's object, its type first (OpenAI's order). */
static cJSON *ev(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* The event o (ev's) on the stream, numbered. */
static void event(struct job *j, cJSON *o, bool locked)
{
    if (!o) return;
    cJSON_AddNumberToObject(o, "sequence_number", j->pw.seq++);
    srv_job_event(j, cJSON_GetObjectItemCaseSensitive(o, "type")->valuestring, o, locked);
}

/* An event about content part 0 of the item at idx; prefix: its id's. */
static cJSON *at(const struct job *j, const char *prefix, const char *type, int idx)
{
    char id[96];
    srv_job_sub_id(j, prefix, idx, id, sizeof id);
    cJSON *o = ev(type);
    cJSON_AddStringToObject(o, "item_id", id);
    cJSON_AddNumberToObject(o, "output_index", idx);
    cJSON_AddNumberToObject(o, "content_index", 0);
    return o;
}

static void item_event(struct job *j, const char *type, int idx, cJSON *item)
{
    cJSON *o = ev(type);
    cJSON_AddNumberToObject(o, "output_index", idx);
    cJSON_AddItemToObject(o, "item", item);
    event(j, o, false);
}

static void open_stream(struct job *j)
{
    /* under srv->mu (srv_enqueue) */
    if (!(j->pw.items = cJSON_CreateArray())) return;
    static const char *const types[] = {"response.created", "response.in_progress"};
    for (int k = 0; k < 2; k++) {
        cJSON *o = ev(types[k]);
        cJSON_AddItemToObject(o, "response", response_obj(j, "in_progress"));
        event(j, o, true);
    }
}

/* The open item of kind k ends (what follows begins, or the answer ends): its text's done
 * events and the item's, with status. *open: its flag in pw. */
static void close_item(struct job *j, const struct streamed *k, bool *open, const char *status)
{
    if (!*open) return;
    const int idx = j->pw.n_items - 1;
    const char *t = j->pw.text.p ? j->pw.text.p : "";
    cJSON *o = at(j, k->prefix, k->done, idx);
    cJSON_AddStringToObject(o, "text", t);
    if (k->logprobs) cJSON_AddArrayToObject(o, "logprobs");
    event(j, o, false);
    o = at(j, k->prefix, "response.content_part.done", idx);
    cJSON_AddItemToObject(o, "part", k->part(t));
    event(j, o, false);
    cJSON_AddItemToArray(j->pw.items, k->item(j, idx, t, status));
    item_event(j, "response.output_item.done", idx, k->item(j, idx, t, status));
    *open = false;
    j->pw.text.len = 0;
}

/* s[0..n) onto the item of kind k, which is opened (added, its part added) when it is not. */
static void stream_item(struct job *j, const struct streamed *k, bool *open, const char *s, size_t n)
{
    if (!*open) {
        const int idx = j->pw.n_items++;
        item_event(j, "response.output_item.added", idx, k->item(j, idx, NULL, "in_progress"));
        cJSON *o = at(j, k->prefix, "response.content_part.added", idx);
        cJSON_AddItemToObject(o, "part", k->part(""));
        event(j, o, false);
        *open = true;
        j->pw.text.len = 0;
    }
    const size_t from = j->pw.text.len;
    if (!sbuf_add(&j->pw.text, s, n)) return;
    cJSON *o = at(j, k->prefix, k->delta, j->pw.n_items - 1);
    cJSON_AddStringToObject(o, "delta", j->pw.text.p + from);
    if (k->logprobs) cJSON_AddArrayToObject(o, "logprobs");
    event(j, o, false);
}

static void close_reasoning(struct job *j, const char *status)
{
    close_item(j, &REASONING, &j->pw.reasoning_open, status);
}

static void close_text(struct job *j, const char *status) { close_item(j, &TEXT, &j->pw.text_open, status); }

/* Thinking as it comes (always before the text and the calls: the parser ends it first). */
static void stream_reasoning(struct job *j, const char *s, size_t n)
{
    close_text(j, "completed");
    stream_item(j, &REASONING, &j->pw.reasoning_open, s, n);
}

static void stream_text(struct job *j, const char *s, size_t n)
{
    close_reasoning(j, "completed");
    stream_item(j, &TEXT, &j->pw.text_open, s, n);
}

static void stream_call(struct job *j, int i, const struct tern_toolcall *c)
{
    close_reasoning(j, "completed");
    close_text(j, "completed");
    const int idx = j->pw.n_items++;
    char id[96];
    srv_job_sub_id(j, "fc_", idx, id, sizeof id);
    item_event(j, "response.output_item.added", idx, call_item(j, i, idx, c, false));
    cJSON *o = ev("response.function_call_arguments.delta");
    cJSON_AddStringToObject(o, "item_id", id);
    cJSON_AddNumberToObject(o, "output_index", idx);
    cJSON_AddStringToObject(o, "delta", c->arguments);
    event(j, o, false);
    o = ev("response.function_call_arguments.done");
    cJSON_AddStringToObject(o, "item_id", id);
    cJSON_AddNumberToObject(o, "output_index", idx);
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "arguments", c->arguments);
    event(j, o, false);
    cJSON_AddItemToArray(j->pw.items, call_item(j, i, idx, c, true));
    item_event(j, "response.output_item.done", idx, call_item(j, i, idx, c, true));
}

/* The finished response object with output (taken over); stored when the request asked. */
static cJSON *finished(struct job *j, cJSON *output)
{
    const char *status = srv_job_cut_short(j) ? "incomplete" : "completed";
    cJSON *o = response_obj(j, status);
    if (!o || !output) {
        cJSON_Delete(o);
        cJSON_Delete(output);
        return NULL;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(o, "output", output);
    cJSON_ReplaceItemInObjectCaseSensitive(o, "usage", usage(j));
    struct srv_proto *px = j->req.proto;
    if (px && px->store && px->history) {
        /* the conversation goes on from its input and output: output items are input items */
        char *txt = cJSON_PrintUnformatted(o);
        for (const cJSON *it = output->child; it; it = it->next)
            cJSON_AddItemToArray(px->history, cJSON_Duplicate(it, true));
        if (txt) srv_store_put(&j->srv->store, j->id, px->key, txt, px->history);
        if (txt) px->history = NULL; /* the store's now */
        free(txt);
    }
    return o;
}

static void finish_stream(struct job *j)
{
    const bool cut = srv_job_cut_short(j);
    close_reasoning(j, cut ? "incomplete" : "completed");
    close_text(j, cut ? "incomplete" : "completed");
    cJSON *o = ev(cut ? "response.incomplete" : "response.completed");
    cJSON *r = finished(j, j->pw.items);
    j->pw.items = NULL;
    if (!r) {
        cJSON_Delete(o);
        struct srv_err e;
        srv_err_set(&e, 500, "server_error", NULL, NULL, "out of memory building the response");
        pthread_mutex_lock(&j->srv->mu);
        srv_job_fail_locked(j, &e);
        pthread_mutex_unlock(&j->srv->mu);
        return;
    }
    cJSON_AddItemToObject(o, "response", r);
    event(j, o, false);
}

static char *body(struct job *j)
{
    cJSON *output = cJSON_CreateArray();
    size_t n = 0;
    const char *content = srv_job_content(j, &n);
    const char *status = srv_job_cut_short(j) ? "incomplete" : "completed";
    const int nc = j->tp ? tern_toolcall_count(j->tp) : 0;
    size_t rn = 0;
    const char *reasoning = srv_job_reasoning(j, &rn);
    int idx = 0;
    /* the thinking first, as it came; cut short inside it, it is what is incomplete */
    if (rn > 0) cJSON_AddItemToArray(output, reasoning_item(j, idx++, reasoning, n > 0 || nc > 0 ? "completed" : status));
    if (n > 0) cJSON_AddItemToArray(output, message_item(j, idx++, content, status));
    for (int i = 0; i < nc; i++, idx++) cJSON_AddItemToArray(output, call_item(j, i, idx, tern_toolcall_get(j->tp, i), true));
    cJSON *o = finished(j, output);
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return txt;
}

const struct srv_writer srv_responses_writer = {.open = open_stream, .reasoning = stream_reasoning, .text = stream_text,
                                                .call = stream_call, .finish = finish_stream, .body = body};
