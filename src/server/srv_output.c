/* srv_output.c — what a job's generated text becomes (engine thread): stop strings cut it, the
 * chat room's tool-call parser splits content from calls (requests with tools), and the result
 * is written in OpenAI's shapes: chat.completion(.chunk) or text_completion objects, streamed
 * as server-sent events ("data: {...}\n\n" ... "data: [DONE]\n\n") or as one body at the end.
 *
 * Responses and Messages requests (srv_req.api) are written by their protocol's writer
 * (struct srv_writer: srv_out_responses.c, srv_out_messages.c) at the same points: the stream's
 * opening, reasoning and content as they come, each complete tool call, the end; and the whole
 * body.
 *
 * Streams follow OpenAI's order: a first chunk with the role, content deltas, for each tool call
 * one delta with its index, id, type and name (arguments "") and one with the arguments string,
 * a last chunk with an empty delta and the finish_reason, then (stream_options.include_usage)
 * a chunk with no choices and the usage, then [DONE]. Everything a stream emits is appended to
 * job->out under srv->mu and the connection thread is woken. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "server/server.h"

static const char *model_id(const struct job *j) { return j->srv->model_id; }

/* The envelope of a chunk or body: id, object, created, model, fingerprint. */
static cJSON *envelope(const struct job *j, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", model_id(j));
    char fp[64];
    snprintf(fp, sizeof fp, "tern-%s", tern_version());
    cJSON_AddStringToObject(o, "system_fingerprint", fp);
    return o;
}

static cJSON *usage_json(const struct job *j)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->req.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->st.n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt + j->st.n_generated);
    cJSON *pd = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(pd, "cached_tokens", j->st.n_reused);
    cJSON *cd = cJSON_AddObjectToObject(u, "completion_tokens_details");
    /* counted by the generator under a reasoning control (srv_reasoning.c); 0 without one */
    cJSON_AddNumberToObject(cd, "reasoning_tokens", j->st.reasoning_tokens);
    return u;
}

/* The writer of a Responses or Messages job, NULL for chat and completions. */
static const struct srv_writer *writer(const struct job *j)
{
    return j->req.api == SRV_API_RESPONSES ? &srv_responses_writer
           : j->req.api == SRV_API_MESSAGES ? &srv_messages_writer : NULL;
}

void srv_job_event(struct job *j, const char *name, cJSON *o, bool locked)
{
    /* name may live in o (its "type"): copied before o goes */
    char ev[64];
    snprintf(ev, sizeof ev, "%s", name ? name : "");
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    struct tern_server *s = j->srv;
    if (!locked) pthread_mutex_lock(&s->mu);
    if (txt) {
        if (name) {
            sbuf_adds(&j->out, "event: ");
            sbuf_adds(&j->out, ev);
            sbuf_add(&j->out, "\n", 1);
        }
        sbuf_adds(&j->out, "data: ");
        sbuf_adds(&j->out, txt);
        sbuf_add(&j->out, "\n\n", 2);
    }
    pthread_cond_signal(&j->cv);
    if (!locked) pthread_mutex_unlock(&s->mu);
    free(txt);
}

/* Append "data: <json>\n\n" to the stream (under the lock) and wake the connection. */
static void push_event(struct job *j, cJSON *o) { srv_job_event(j, NULL, o, false); }

/* ---------------------------------------------------------------- log-probabilities
 * Each sampled token's entry is kept in chat's shape {token, logprob, bytes, top_logprobs:
 * [{token, logprob, bytes}]} (plus its text offset, "_offset", for completions) until the next
 * chunk of a stream (content, a tool call's delta or the last one) or the whole answer takes
 * it; the legacy completions shape {tokens, token_logprobs, top_logprobs: [{token: logprob}],
 * text_offset} is made from the same entries. */

/* token and bytes of id: its piece (control tokens as their text), the token string with any
 * invalid or incomplete UTF-8 replaced by U+FFFD (JSON strings must be UTF-8), the bytes exact */
static void lp_token(const struct job *j, int32_t id, cJSON *o, size_t *n_bytes)
{
    char piece[256];
    size_t n = 0;
    if (tern_token_to_piece(j->srv->tok, id, TERN_PIECE_SPECIAL, piece, sizeof piece, &n)) n = 0;
    if (n > sizeof piece) n = sizeof piece; /* a longer piece is cut (none is in practice) */
    char txt[3 * sizeof piece + 1];
    size_t t = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)piece + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            memcpy(txt + t, "\xEF\xBF\xBD", 3);
            t += 3;
            i++;
        } else {
            memcpy(txt + t, piece + i, (size_t)k);
            t += (size_t)k;
            i += (size_t)k;
        }
    }
    txt[t] = 0;
    cJSON_AddStringToObject(o, "token", txt);
    cJSON *b = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)piece[i]));
    if (n_bytes) *n_bytes = n;
}

int srv_job_on_logprob(const struct tern_token_logprob *lp, void *user)
{
    struct job *j = user;
    /* the end-of-generation token that ends the answer is not part of it */
    if (!j->req.ignore_eos && tern_token_is_eog(j->srv->tok, lp->token)) return 0;
    if (!j->lp && !(j->lp = cJSON_CreateArray())) return 0;
    cJSON *e = cJSON_CreateObject();
    size_t n = 0;
    lp_token(j, lp->token, e, &n);
    cJSON_AddNumberToObject(e, "logprob", lp->logprob);
    cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
    for (int k = 0; k < lp->n_top; k++) {
        cJSON *t = cJSON_CreateObject();
        lp_token(j, lp->top[k], t, NULL);
        cJSON_AddNumberToObject(t, "logprob", lp->top_logprob[k]);
        cJSON_AddItemToArray(top, t);
    }
    cJSON_AddNumberToObject(e, "_offset", (double)j->lp_offset);
    j->lp_offset += n;
    cJSON_AddItemToArray(j->lp, e);
    return 0;
}

/* The logprobs object of the entries waiting (they are cleared), or null (none asked, or a
 * stream chunk with none). */
static cJSON *take_logprobs(struct job *j)
{
    /* a stream's chunk without tokens of its own (the role, the last one) has none */
    if (j->req.logprobs < 0 || (j->req.stream && !(j->lp && j->lp->child))) return cJSON_CreateNull();
    cJSON *entries = j->lp ? j->lp : cJSON_CreateArray();
    j->lp = NULL;
    if (j->req.kind == JOB_CHAT) {
        for (cJSON *e = entries->child; e; e = e->next) cJSON_DeleteItemFromObject(e, "_offset");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "content", entries);
        cJSON_AddNullToObject(o, "refusal");
        return o;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (const cJSON *e = entries->child; e; e = e->next) {
        cJSON_AddItemToArray(toks, cJSON_CreateString(cJSON_GetObjectItem(e, "token")->valuestring));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(cJSON_GetObjectItem(e, "logprob")->valuedouble));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(cJSON_GetObjectItem(e, "_offset")->valuedouble));
        cJSON *t = cJSON_CreateObject();
        for (const cJSON *a = cJSON_GetObjectItem(e, "top_logprobs")->child; a; a = a->next) {
            const char *key = cJSON_GetObjectItem(a, "token")->valuestring;
            /* two alternatives with the same text (a byte token and a merged one): the likelier,
             * which comes first, keeps the key */
            if (!cJSON_GetObjectItemCaseSensitive(t, key))
                cJSON_AddNumberToObject(t, key, cJSON_GetObjectItem(a, "logprob")->valuedouble);
        }
        cJSON_AddItemToArray(tops, t);
    }
    cJSON_Delete(entries);
    return o;
}

/* A chunk with one choice holding delta (chat) or text (completions); it takes the log-prob
 * entries waiting. */
static cJSON *chunk(struct job *j, cJSON *delta, const char *text, const char *finish)
{
    const bool chat = j->req.kind == JOB_CHAT;
    cJSON *o = envelope(j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) cJSON_AddItemToObject(c, "delta", delta ? delta : cJSON_CreateObject());
    else cJSON_AddStringToObject(c, "text", text ? text : "");
    cJSON_AddItemToObject(c, "logprobs", take_logprobs(j));
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    if (j->req.include_usage) cJSON_AddNullToObject(o, "usage");
    return o;
}

void srv_job_open_stream(struct job *j)
{
    if (!j->req.stream || j->req.kind != JOB_CHAT) return;
    if (writer(j)) {
        writer(j)->open(j);
        return;
    }
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    cJSON_AddNullToObject(d, "refusal");
    cJSON *o = chunk(j, d, NULL, NULL);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (txt) {
        sbuf_adds(&j->out, "data: ");
        sbuf_adds(&j->out, txt);
        sbuf_add(&j->out, "\n\n", 2);
        free(txt);
    }
}

void srv_job_sub_id(const struct job *j, const char *prefix, int i, char *buf, size_t cap)
{
    /* unique per request and i: the request id's random part (after "chatcmpl-", "resp_", ...) */
    const char *tail = j->id + strcspn(j->id, "-_");
    snprintf(buf, cap, "%s%s_%d", prefix, *tail ? tail + 1 : j->id, i);
}

static void call_id(const struct job *j, int i, char *buf, size_t cap) { srv_job_sub_id(j, "call_", i, buf, cap); }

/* Content bytes ready to go out: stream them, keep them for the final body. */
static void emit_content(struct job *j, const char *t, size_t n)
{
    if (n == 0) return;
    sbuf_add(&j->text, t, n);
    if (!j->req.stream) return;
    if (writer(j)) {
        writer(j)->text(j, t, n);
        return;
    }
    char *s = malloc(n + 1);
    if (!s) return;
    memcpy(s, t, n);
    s[n] = 0;
    if (j->req.kind == JOB_CHAT) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "content", s);
        push_event(j, chunk(j, d, NULL, NULL));
    } else {
        push_event(j, chunk(j, NULL, s, NULL));
    }
    free(s);
}

static void emit_calls(struct job *j)
{
    for (; j->calls_sent < tern_toolcall_count(j->tp); j->calls_sent++) {
        if (!j->req.stream) continue;
        const struct tern_toolcall *c = tern_toolcall_get(j->tp, j->calls_sent);
        if (writer(j)) {
            writer(j)->call(j, j->calls_sent, c);
            continue;
        }
        char id[96];
        call_id(j, j->calls_sent, id, sizeof id);
        for (int part = 0; part < 2; part++) {
            cJSON *d = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(d, "tool_calls");
            cJSON *tc = cJSON_CreateObject(), *f = cJSON_CreateObject();
            cJSON_AddItemToArray(arr, tc);
            cJSON_AddNumberToObject(tc, "index", j->calls_sent);
            if (part == 0) {
                cJSON_AddStringToObject(tc, "id", id);
                cJSON_AddStringToObject(tc, "type", "function");
                cJSON_AddStringToObject(f, "name", c->name);
                cJSON_AddStringToObject(f, "arguments", "");
            } else {
                cJSON_AddStringToObject(f, "arguments", c->arguments);
            }
            cJSON_AddItemToObject(tc, "function", f);
            push_event(j, chunk(j, d, NULL, NULL));
        }
    }
}

/* Did the answer end because it ran out of room or time, not because the model was done? */
bool srv_job_cut_short(const struct job *j)
{
    return j->timed_out || (!j->stop_hit && (j->st.stop == TERN_GEN_STOP_MAX_TOKENS ||
                                             j->st.stop == TERN_GEN_STOP_CONTEXT_FULL));
}

/* Text after the stop-string filter: through the tool-call parser when the request has tools. */
static void emit_text(struct job *j, const char *t, size_t n, bool final)
{
    if (!j->tp) {
        emit_content(j, t, n);
        return;
    }
    /* a call the parser cannot read stays text and is counted (tern_toolcall_n_errors): the
     * statuses say the same, so they are not looked at here */
    if (n) tern_status_ignore(tern_toolcall_feed(j->tp, t, n, NULL));
    /* an answer cut short (max_tokens, the context, --request-timeout) drops the call it cut:
     * its markup is no content, and finish_reason says "length" (OpenAI's way) */
    if (final && srv_job_cut_short(j)) tern_status_ignore(tern_toolcall_finish_cut(j->tp, NULL));
    else if (final) tern_status_ignore(tern_toolcall_finish(j->tp, NULL));
    size_t len;
    const char *all = tern_toolcall_reasoning(j->tp, &len);
    if (len > j->reasoning_sent) {
        if (j->req.stream && writer(j)) {
            writer(j)->reasoning(j, all + j->reasoning_sent, len - j->reasoning_sent);
        } else if (j->req.stream) {
            cJSON *d = cJSON_CreateObject();
            char *s = malloc(len - j->reasoning_sent + 1);
            if (d && s) {
                memcpy(s, all + j->reasoning_sent, len - j->reasoning_sent);
                s[len - j->reasoning_sent] = 0;
                cJSON_AddStringToObject(d, "reasoning_content", s);
                push_event(j, chunk(j, d, NULL, NULL));
            } else {
                cJSON_Delete(d);
            }
            free(s);
        }
        j->reasoning_sent = len;
    }
    all = tern_toolcall_text(j->tp, &len);
    if (len > j->content_sent) {
        size_t k = len - j->content_sent;
        /* the parser's text is the content alone: keep the final body from it, not from here */
        if (j->req.stream && writer(j)) {
            writer(j)->text(j, all + j->content_sent, k);
        } else if (j->req.stream) {
            char *s = malloc(k + 1);
            if (s) {
                memcpy(s, all + j->content_sent, k);
                s[k] = 0;
                cJSON *d = cJSON_CreateObject();
                cJSON_AddStringToObject(d, "content", s);
                push_event(j, chunk(j, d, NULL, NULL));
                free(s);
            }
        }
        j->content_sent = len;
    }
    emit_calls(j);
}

/* Length of the longest suffix of h that is a proper prefix of some stop string. */
static size_t stop_tail(const struct job *j, const char *h, size_t n)
{
    size_t best = 0;
    for (int i = 0; i < j->req.n_stop; i++) {
        size_t sl = strlen(j->req.stop[i]);
        for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (!memcmp(h + n - k, j->req.stop[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int srv_job_on_piece(const char *text, size_t len, void *user)
{
    struct job *j = user;
    if (j->stop_hit) return 1;
    if (j->req.n_stop == 0) {
        emit_text(j, text, len, false);
        return 0;
    }
    sbuf_add(&j->hold, text, len);
    /* the earliest stop string in what is held */
    size_t cut = j->hold.len;
    for (int i = 0; i < j->req.n_stop; i++) {
        char *at = memmem(j->hold.p, j->hold.len, j->req.stop[i], strlen(j->req.stop[i]));
        if (at && (size_t)(at - j->hold.p) < cut) cut = (size_t)(at - j->hold.p);
    }
    if (cut < j->hold.len) {
        for (int i = 0; i < j->req.n_stop; i++) {
            char *at = memmem(j->hold.p, j->hold.len, j->req.stop[i], strlen(j->req.stop[i]));
            if (at && (size_t)(at - j->hold.p) == cut) {
                j->stop_which = i;
                break;
            }
        }
        emit_text(j, j->hold.p, cut, false);
        j->hold.len = 0;
        j->stop_hit = true;
        return 1;
    }
    /* keep back what may still become a stop string; pieces are whole UTF-8, and so is what a
     * stop string's prefix can leave (it is cut at a byte the stop string starts with) */
    size_t keep = stop_tail(j, j->hold.p, j->hold.len);
    size_t out = j->hold.len - keep;
    emit_text(j, j->hold.p, out, false);
    memmove(j->hold.p, j->hold.p + out, keep);
    j->hold.len = keep;
    return 0;
}

static const char *finish_reason(const struct job *j)
{
    /* cut short: "length" even after whole calls (OpenAI's order: the cut is what ended it) */
    if (srv_job_cut_short(j)) return "length";
    if (j->tp && tern_toolcall_count(j->tp) > 0) return "tool_calls";
    return "stop";
}

const char *srv_job_content(const struct job *j, size_t *len)
{
    if (j->tp) return tern_toolcall_text(j->tp, len);
    *len = j->text.len;
    return j->text.p ? j->text.p : "";
}

const char *srv_job_reasoning(const struct job *j, size_t *len)
{
    if (j->tp) return tern_toolcall_reasoning(j->tp, len);
    *len = 0;
    return "";
}

static char *final_body(struct job *j)
{
    if (writer(j)) return writer(j)->body(j);
    const bool chat = j->req.kind == JOB_CHAT;
    cJSON *o = envelope(j, chat ? "chat.completion" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    const char *content = j->text.p ? j->text.p : "";
    size_t clen = j->text.len;
    if (j->tp) content = tern_toolcall_text(j->tp, &clen);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        const int nc = j->tp ? tern_toolcall_count(j->tp) : 0;
        if (nc > 0 && clen == 0) cJSON_AddNullToObject(m, "content");
        else cJSON_AddStringToObject(m, "content", content);
        size_t rlen = 0;
        const char *reasoning = srv_job_reasoning(j, &rlen);
        if (rlen) cJSON_AddStringToObject(m, "reasoning_content", reasoning);
        cJSON_AddNullToObject(m, "refusal");
        if (nc > 0) {
            cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
            for (int i = 0; i < nc; i++) {
                const struct tern_toolcall *tc = tern_toolcall_get(j->tp, i);
                char id[96];
                call_id(j, i, id, sizeof id);
                cJSON *x = cJSON_CreateObject(), *f = cJSON_CreateObject();
                cJSON_AddStringToObject(x, "id", id);
                cJSON_AddStringToObject(x, "type", "function");
                cJSON_AddStringToObject(f, "name", tc->name);
                cJSON_AddStringToObject(f, "arguments", tc->arguments);
                cJSON_AddItemToObject(x, "function", f);
                cJSON_AddItemToArray(arr, x);
            }
        }
    } else {
        cJSON_AddStringToObject(c, "text", content);
    }
    cJSON_AddItemToObject(c, "logprobs", take_logprobs(j));
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(j));
    cJSON_AddItemToObject(o, "usage", usage_json(j));
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}

void srv_job_on_done(const struct tern_gen_stats *st, void *user)
{
    struct job *j = user;
    struct tern_server *s = j->srv;
    j->st = *st;
    if (!j->stop_hit && j->hold.len) emit_text(j, j->hold.p, j->hold.len, false);
    j->hold.len = 0;
    if (j->tp) emit_text(j, NULL, 0, true);
    char *body = NULL;
    if (j->req.stream && writer(j)) {
        writer(j)->finish(j);
    } else if (j->req.stream) {
        push_event(j, chunk(j, j->req.kind == JOB_CHAT ? cJSON_CreateObject() : NULL, "", finish_reason(j)));
        if (j->req.include_usage) {
            cJSON *o = envelope(j, j->req.kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage_json(j));
            push_event(j, o);
        }
    } else {
        body = final_body(j);
    }
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.prompt_tokens += (uint64_t)j->req.n_prompt;
    s->metrics.cached_tokens += (uint64_t)st->n_reused;
    s->metrics.generated_tokens += (uint64_t)st->n_generated;
    pthread_mutex_unlock(&s->metrics.mu);

    pthread_mutex_lock(&s->mu);
    if (j->req.stream) {
        if (!writer(j)) sbuf_adds(&j->out, "data: [DONE]\n\n");
    } else if (body) {
        sbuf_adds(&j->out, body);
        j->status = 200;
    } else {
        struct srv_err e;
        srv_err_set(&e, 500, "server_error", NULL, NULL, "out of memory building the response");
        char *eb = srv_err_body_api(&e, j->req.api);
        if (eb) sbuf_adds(&j->out, eb);
        free(eb);
        j->status = 500;
    }
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&s->mu);
    free(body);
}

void srv_job_fail_locked(struct job *j, const struct srv_err *e)
{
    char *b = srv_err_body_api(e, j->req.api);
    if (j->req.stream && j->req.api == SRV_API_MESSAGES) {
        /* Anthropic's stream: an "error" event (its body is the error object) */
        sbuf_adds(&j->out, "event: error\ndata: ");
        if (b) sbuf_adds(&j->out, b);
        sbuf_adds(&j->out, "\n\n");
    } else if (j->req.stream && j->req.api == SRV_API_RESPONSES) {
        /* the Responses stream's "error" event: {type, code, message, param, sequence_number} */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "error");
        cJSON_AddStringToObject(o, "code", e->code[0] ? e->code : e->type);
        cJSON_AddStringToObject(o, "message", e->message);
        cJSON_AddNullToObject(o, "param");
        cJSON_AddNumberToObject(o, "sequence_number", j->pw.seq++);
        srv_job_event(j, "error", o, true);
    } else if (j->req.stream) {
        sbuf_adds(&j->out, "data: ");
        if (b) sbuf_adds(&j->out, b);
        sbuf_adds(&j->out, "\n\ndata: [DONE]\n\n");
    } else if (b) {
        sbuf_adds(&j->out, b);
    }
    free(b);
    j->status = e->status;
    j->done = true;
    pthread_cond_signal(&j->cv);
}
