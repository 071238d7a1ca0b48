/* toolcall.c — streaming extraction of tool calls from generated text (Hermes/Qwen, Qwen XML,
 * Gemma 4, Llama 3.x JSON, Mistral, Granite), see include/tern.h "tool calls in model output"
 * and toolcall.h. Reasoning is taken out before any of this (toolcall_reason.c).
 *
 * The parser is a small state machine over the undecided bytes in `pending`:
 *   TEXT        content; watches for the format's opening tag. A tail that could be the start
 *               of that tag (or of a UTF-8 character) is held back, the rest is released.
 *   TAGGED      after "<tool_call>" (Hermes, Qwen XML) or "<|tool_call>" (Gemma 4): waits for
 *               the closing tag, then decodes the body (JSON, or <function=...> XML, or Gemma's
 *               call:NAME{...}). The call is complete when the closing tag arrives.
 *   L3_START    Llama 3 reply start: a leading '{' (or <|python_tag|>) means a JSON call.
 *   JSON        an incremental bracket/string scanner finds where the object ends; the call is
 *               complete the moment its closing '}' arrives. (Mistral elements use it too.)
 *   L3_AFTER    after a Llama 3 call: ';' / whitespace, then maybe another call, else text.
 *   L3_TAG      after <|python_tag|>: a JSON object must follow. The tag (and separators)
 *               stay in pending as `markup` until the call is decided.
 *   MIS_OPEN / MIS_ELEM / MIS_SEP   "[TOOL_CALLS]" (Granite: "<|tool_call|>") '[' {obj} (',' {obj})* ']'. The whole list
 *               stays in pending until it ends (calls are still reported as each object closes).
 * Whenever a region cannot be a valid call (bad JSON, wrong shape, unexpected byte, stream
 * ended inside it), its raw bytes, markup included, are appended to the content and an error is
 * recorded with the stream offset; a Mistral list with valid calls keeps only its malformed
 * entries as content. A Llama 3 reply that merely starts with a JSON object that is not a call
 * (no "name") is content without error: such replies are legitimate. */
#include "chat/toolcall.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/error.h"

enum { S_TEXT, S_TAGGED, S_L3_START, S_L3_TAG, S_JSON, S_L3_AFTER, S_MIS_OPEN, S_MIS_ELEM, S_MIS_SEP };

static const char TAG_HERMES_OPEN[] = "<tool_call>";
static const char TAG_HERMES_CLOSE[] = "</tool_call>";
static const char TAG_PYTHON[] = "<|python_tag|>";
static const char TAG_MISTRAL[] = "[TOOL_CALLS]";
static const char TAG_GEMMA_OPEN[] = "<|tool_call>";
static const char TAG_GEMMA_CLOSE[] = "<tool_call|>";
static const char TAG_GRANITE[] = "<|tool_call|>";

/* formats whose calls are a JSON list after a tag */
static bool is_list(enum tern_toolcall_format f) { return f == TERN_TOOLCALL_MISTRAL || f == TERN_TOOLCALL_GRANITE; }

/* ------------------------------------------------------------------ detection */

enum tern_toolcall_format tern_toolcall_detect(const char *src)
{
    if (!src) return TERN_TOOLCALL_NONE;
    if (strstr(src, TAG_MISTRAL)) return TERN_TOOLCALL_MISTRAL;
    if (strstr(src, "<|tool_call>call:")) return TERN_TOOLCALL_GEMMA4;
    if (strstr(src, TAG_HERMES_OPEN) && strstr(src, "<function=")) return TERN_TOOLCALL_QWEN_XML;
    if (strstr(src, TAG_HERMES_OPEN)) return TERN_TOOLCALL_HERMES;
    if (strstr(src, TAG_GRANITE) && strstr(src, "<|start_of_role|>")) return TERN_TOOLCALL_GRANITE;
    if (strstr(src, TAG_PYTHON) || (strstr(src, "<|start_header_id|>") && strstr(src, "\"parameters\"")))
        return TERN_TOOLCALL_LLAMA3;
    return TERN_TOOLCALL_NONE;
}

const char *tern_toolcall_format_name(enum tern_toolcall_format f)
{
    switch (f) {
    case TERN_TOOLCALL_NONE: return "none";
    case TERN_TOOLCALL_HERMES: return "hermes";
    case TERN_TOOLCALL_LLAMA3: return "llama3";
    case TERN_TOOLCALL_MISTRAL: return "mistral";
    case TERN_TOOLCALL_QWEN_XML: return "qwen-xml";
    case TERN_TOOLCALL_GEMMA4: return "gemma4";
    case TERN_TOOLCALL_GRANITE: return "granite";
    }
    return "unknown";
}

/* ------------------------------------------------------------------ preserved tokens */

int tern_toolcall_preserved_tokens(const struct tern_tokenizer *tok, enum tern_toolcall_format f,
                                   int32_t *ids, int cap)
{
    /* every piece of markup the parser reads as a unit: openers, closers, Gemma's string mark */
    static const char GEMMA_STR[] = "<|\"|>";
    const char *tags[3] = {NULL, NULL, NULL};
    switch (f) {
    case TERN_TOOLCALL_HERMES:
    case TERN_TOOLCALL_QWEN_XML: tags[0] = TAG_HERMES_OPEN; tags[1] = TAG_HERMES_CLOSE; break;
    case TERN_TOOLCALL_LLAMA3: tags[0] = TAG_PYTHON; break;
    case TERN_TOOLCALL_MISTRAL: tags[0] = TAG_MISTRAL; break;
    case TERN_TOOLCALL_GEMMA4: tags[0] = TAG_GEMMA_OPEN; tags[1] = TAG_GEMMA_CLOSE; tags[2] = GEMMA_STR; break;
    case TERN_TOOLCALL_GRANITE: tags[0] = TAG_GRANITE; break;
    default: break;
    }
    int n = 0;
    for (int i = 0; i < 3 && tags[i] && tok; i++) {
        int32_t id = tern_token_control_id(tok, tags[i], strlen(tags[i]));
        if (id < 0) continue; /* plain text in this vocabulary: shown anyway */
        if (n < cap && ids) ids[n] = id;
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ buffers */

bool toolcall_buf_add(struct tern_toolcall_parser *p, struct toolcall_buf *b, const char *s, size_t n)
{
    if (p->oom) return false;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            p->oom = true;
            return false;
        }
        b->p = q;
        b->cap = cap;
    }
    TERN_ASSERT(b->p && b->n + n < b->cap, "room for the bytes and the NUL");
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

#define buf_add toolcall_buf_add

/* pending[0..k) leaves the window (emit_text copies it first) */
static void advance(struct tern_toolcall_parser *p, size_t k)
{
    /* the window only ever gives up bytes it holds, and the scanner never runs past them */
    TERN_ASSERT(k <= p->pending.n && p->scan <= p->pending.n && p->json_start <= p->pending.n,
                "the window gives up only bytes it holds");
    memmove(p->pending.p, p->pending.p + k, p->pending.n - k);
    p->pending.n -= k;
    p->pending.p[p->pending.n] = '\0';
    p->pending_off += k;
    p->scan = p->scan > k ? p->scan - k : 0;
    p->json_start = p->json_start > k ? p->json_start - k : 0;
}

static void emit_text(struct tern_toolcall_parser *p, size_t k)
{
    buf_add(p, &p->text, p->pending.p, k);
    advance(p, k);
}

/* pending[0..k) is markup or the JSON of a valid call: it is not content */
static void consume(struct tern_toolcall_parser *p, size_t k)
{
    p->dropped += k;
    advance(p, k);
}

__attribute__((format(printf, 3, 4))) static void add_error(struct tern_toolcall_parser *p,
                                                             size_t at, const char *fmt, ...)
{
    if (p->n_errors >= TOOLCALL_MAX_CALLS) return;
    char msg[512];
    int k = snprintf(msg, sizeof msg, "malformed %s tool call at byte %zu: ",
                     tern_toolcall_format_name(p->fmt), p->pending_off + at);
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < sizeof msg) vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    if (p->n_errors == p->cap_errors) {
        int cap = p->cap_errors ? p->cap_errors * 2 : 4;
        char **e = realloc(p->errors, (size_t)cap * sizeof *e);
        if (!e) {
            p->oom = true;
            return;
        }
        p->errors = e;
        p->cap_errors = cap;
    }
    char *s = strdup(msg);
    if (!s) {
        p->oom = true;
        return;
    }
    p->errors[p->n_errors++] = s;
}

/* the bytes of pending[0..k) were a malformed call: they become content */
static void reject(struct tern_toolcall_parser *p, size_t k, const char *why)
{
    add_error(p, 0, "%s", why);
    emit_text(p, k);
    p->markup = 0;
    p->state = S_TEXT;
}

/* An unterminated call at the end of the output: content, or dropped when the output was cut
 * short (tern_toolcall_finish_cut). */
static void reject_at_end(struct tern_toolcall_parser *p, size_t k, const char *why)
{
    if (!p->cut) {
        reject(p, k, why);
        return;
    }
    add_error(p, 0, "%s (cut short: dropped)", why);
    consume(p, k);
    p->markup = 0;
    p->state = S_TEXT;
}

/* Takes ownership of c's strings. False (with an error recorded) when the call cannot be kept:
 * its text must then stay content. */
static bool add_call(struct tern_toolcall_parser *p, struct tern_toolcall *c)
{
    if (p->n_calls >= TOOLCALL_MAX_CALLS) {
        add_error(p, 0, "more than %d tool calls; the rest are kept as text", TOOLCALL_MAX_CALLS);
        goto drop;
    }
    if (p->n_calls == p->cap_calls) {
        int cap = p->cap_calls ? p->cap_calls * 2 : 4;
        struct tern_toolcall *v = realloc(p->calls, (size_t)cap * sizeof *v);
        if (!v) {
            p->oom = true;
            goto drop;
        }
        p->calls = v;
        p->cap_calls = cap;
    }
    TERN_ASSERT(p->n_calls < p->cap_calls && c->name, "a kept call has a name");
    p->calls[p->n_calls++] = *c;
    p->completed++;
    return true;
drop:
    free((char *)c->name);
    free((char *)c->arguments);
    free((char *)c->id);
    return false;
}

/* ------------------------------------------------------------------ decoding one call */

enum toolcall_verdict toolcall_decode(const char *json, size_t n, struct tern_toolcall *call,
                                      char *why, size_t why_n)
{
    memset(call, 0, sizeof *call);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(json, n, &end, false);
    if (!j) {
        size_t at = end && end >= json && end <= json + n ? (size_t)(end - json) : 0;
        snprintf(why, why_n, "invalid JSON near offset %zu of the call", at);
        return TC_BAD;
    }
    /* trailing bytes after the object (only whitespace is fine) */
    for (const char *q = end; q && q < json + n; q++)
        if (*q != ' ' && *q != '\n' && *q != '\r' && *q != '\t') {
            snprintf(why, why_n, "unexpected bytes after the JSON object");
            cJSON_Delete(j);
            return TC_BAD;
        }
    enum toolcall_verdict v = TC_NOT_A_CALL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsObject(j) || !cJSON_IsString(name) || !name->valuestring[0]) {
        snprintf(why, why_n, "expected an object with a non-empty string \"name\"");
        goto out;
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(j, "parameters");
    cJSON *parsed = NULL;
    if (cJSON_IsString(args)) { /* stringified arguments: accept when they hold an object */
        parsed = cJSON_Parse(args->valuestring);
        if (!cJSON_IsObject(parsed)) {
            cJSON_Delete(parsed);
            snprintf(why, why_n, "\"arguments\" of '%.100s' is a string that is not a JSON object", name->valuestring);
            v = TC_BAD;
            goto out;
        }
        args = parsed;
    } else if (args && !cJSON_IsObject(args)) {
        snprintf(why, why_n, "\"arguments\" of '%.100s' must be an object", name->valuestring);
        v = TC_BAD;
        goto out;
    }
    char *a = args ? cJSON_PrintUnformatted(args) : strdup("{}");
    cJSON_Delete(parsed);
    char *nm = strdup(name->valuestring);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    char *ids = cJSON_IsString(id) ? strdup(id->valuestring) : NULL;
    if (!a || !nm || (cJSON_IsString(id) && !ids)) {
        free(a);
        free(nm);
        free(ids);
        snprintf(why, why_n, "out of memory");
        v = TC_BAD;
        goto out;
    }
    call->name = nm;
    call->arguments = a;
    call->id = ids;
    v = TC_CALL;
out:
    cJSON_Delete(j);
    return v;
}

/* Decode pending[json_start..e) as a call; region pending[0..e) is the raw text (with the
 * markup before the JSON). `lenient` (Llama 3 reply start) turns a well-formed non-call into
 * plain content. */
static void finish_object(struct tern_toolcall_parser *p, size_t e, bool lenient)
{
    struct tern_toolcall c;
    char why[256];
    TERN_ASSERT(p->json_start <= e && e <= p->pending.n, "the call's JSON lies in the window");
    enum toolcall_verdict v = toolcall_decode(p->pending.p + p->json_start, e - p->json_start, &c, why, sizeof why);
    if (v == TC_CALL) {
        if (add_call(p, &c)) consume(p, e);
        else emit_text(p, e);
    } else if (v == TC_NOT_A_CALL && lenient) {
        emit_text(p, e);
    } else {
        add_error(p, p->json_start, "%s", why);
        emit_text(p, e);
    }
    p->markup = 0;
}

/* ------------------------------------------------------------------ Mistral lists */

/* pending[start..end) is a malformed entry of the list being held */
static void group_bad(struct tern_toolcall_parser *p, size_t start, size_t end)
{
    if (p->n_segs == p->cap_segs) {
        int cap = p->cap_segs ? p->cap_segs * 2 : 4;
        struct toolcall_seg *v = realloc(p->segs, (size_t)cap * sizeof *v);
        if (!v) {
            p->oom = true;
            return;
        }
        p->segs = v;
        p->cap_segs = cap;
    }
    TERN_ASSERT(start <= end && end <= p->pending.n && p->n_segs < p->cap_segs);
    /* segments come in list order: later entries start after earlier ones end */
    TERN_ASSERT(p->n_segs == 0 || p->segs[p->n_segs - 1].end <= start);
    p->segs[p->n_segs++] = (struct toolcall_seg){start, end};
}

/* an entry pending[json_start..e) of the list */
static void group_entry(struct tern_toolcall_parser *p, size_t e)
{
    struct tern_toolcall c;
    char why[256];
    TERN_ASSERT(p->json_start <= e && e <= p->pending.n);
    enum toolcall_verdict v = toolcall_decode(p->pending.p + p->json_start, e - p->json_start, &c, why, sizeof why);
    if (v == TC_CALL && add_call(p, &c)) {
        p->group_valid++;
        return;
    }
    if (v != TC_CALL) add_error(p, p->json_start, "%s", why);
    group_bad(p, p->json_start, e);
}

/* The list is pending[0..e): with no valid call all of it is content; otherwise its markup
 * ("[TOOL_CALLS][", commas, "]") and valid calls go, its malformed entries stay content. */
static void group_end(struct tern_toolcall_parser *p, size_t e)
{
    /* a list the cut left open (tern_toolcall_finish_cut): its valid calls stay, the rest goes */
    if (p->cut && p->state == S_JSON) p->group_cut = true;
    if (p->group_cut && !p->group_valid) consume(p, e);
    else if (!p->group_valid) emit_text(p, e);
    else {
        size_t kept = 0;
        for (int i = 0; i < p->n_segs; i++) {
            const struct toolcall_seg *g = &p->segs[i];
            buf_add(p, &p->text, p->pending.p + g->start, g->end - g->start);
            kept += g->end - g->start;
        }
        TERN_ASSERT(kept <= e && e <= p->pending.n, "the kept entries are part of the list");
        p->dropped += e - kept;
        advance(p, e);
    }
    p->group_valid = 0;
    p->group_cut = false;
    p->n_segs = 0;
    p->state = S_TEXT;
}

/* ------------------------------------------------------------------ scanning helpers */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static size_t skip_ws(const struct tern_toolcall_parser *p, size_t i)
{
    while (i < p->pending.n && is_ws(p->pending.p[i])) i++;
    return i;
}

static const char *find(const char *h, size_t hn, const char *n)
{
    size_t nn = strlen(n);
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

/* Longest tail of s[0..n) that is a proper prefix of tag (could grow into the tag). */
size_t toolcall_tag_prefix_tail(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    TERN_ASSERT(tl >= 1, "a tag has bytes");
    for (size_t k = tl - 1 < n ? tl - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

/* Bytes at the end of s[0..n) forming an unfinished UTF-8 character. */
size_t toolcall_utf8_tail(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

static void json_reset(struct tern_toolcall_parser *p, size_t start)
{
    p->json_start = start;
    p->scan = start;
    p->depth = 0;
    p->in_str = p->esc = false;
}

/* Advance the scanner. Returns 1 with *end set when the top-level value closed, 0 if more
 * input is needed, -1 on a structural error at *end. */
static int json_scan(struct tern_toolcall_parser *p, size_t *end)
{
    for (; p->scan < p->pending.n; p->scan++) {
        char c = p->pending.p[p->scan];
        if (p->in_str) {
            if (p->esc) p->esc = false;
            else if (c == '\\') p->esc = true;
            else if (c == '"') p->in_str = false;
            continue;
        }
        if (c == '"') p->in_str = true;
        else if (c == '{' || c == '[') {
            if (p->depth >= TOOLCALL_MAX_DEPTH) {
                *end = p->scan + 1;
                return -1;
            }
            TERN_ASSERT(p->depth >= 0 && p->depth < TOOLCALL_MAX_DEPTH);
            p->stack[p->depth++] = c;
        } else if (c == '}' || c == ']') {
            if (p->depth == 0 || p->stack[p->depth - 1] != (c == '}' ? '{' : '[')) {
                *end = p->scan + 1;
                return -1;
            }
            if (--p->depth == 0) {
                *end = ++p->scan;
                return 1;
            }
        }
    }
    if (p->scan - p->json_start > TOOLCALL_MAX_BYTES) {
        *end = p->scan;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the state machine */

static const char *open_tag(enum tern_toolcall_format f)
{
    switch (f) {
    case TERN_TOOLCALL_HERMES: return TAG_HERMES_OPEN;
    case TERN_TOOLCALL_LLAMA3: return TAG_PYTHON;
    case TERN_TOOLCALL_MISTRAL: return TAG_MISTRAL;
    case TERN_TOOLCALL_QWEN_XML: return TAG_HERMES_OPEN;
    case TERN_TOOLCALL_GEMMA4: return TAG_GEMMA_OPEN;
    case TERN_TOOLCALL_GRANITE: return TAG_GRANITE;
    default: return NULL;
    }
}

static const char *close_tag(enum tern_toolcall_format f)
{
    return f == TERN_TOOLCALL_GEMMA4 ? TAG_GEMMA_CLOSE : TAG_HERMES_CLOSE;
}

/* The body between a call's tags: Gemma 4's own syntax; XML when it starts with <function=
 * (Qwen3.5 / Qwen3-Coder; a Hermes model writing it is read the same), else JSON. */
static enum toolcall_verdict decode_body(const struct tern_toolcall_parser *p, const char *b, size_t n,
                                         struct tern_toolcall *c, char *why, size_t why_n)
{
    if (p->fmt == TERN_TOOLCALL_GEMMA4) return toolcall_decode_gemma4(b, n, c, why, why_n);
    size_t i = 0;
    while (i < n && is_ws(b[i])) i++;
    if (n - i >= 10 && !memcmp(b + i, "<function=", 10)) return toolcall_decode_xml(b, n, p->tools, c, why, why_n);
    return toolcall_decode(b, n, c, why, why_n);
}

static void run(struct tern_toolcall_parser *p, bool eof)
{
    for (int guard = 0; guard < 1 << 20 && !p->oom; guard++) {
        char *s = p->pending.p;
        size_t n = p->pending.n;
        switch (p->state) {
        case S_TEXT: {
            const char *tag = open_tag(p->fmt);
            const char *hit = tag ? find(s, n, tag) : NULL;
            if (hit) {
                size_t k = (size_t)(hit - s);
                emit_text(p, k);
                size_t tl = strlen(tag);
                if (p->fmt == TERN_TOOLCALL_HERMES || p->fmt == TERN_TOOLCALL_QWEN_XML ||
                    p->fmt == TERN_TOOLCALL_GEMMA4) {
                    p->scan = tl;
                    p->state = S_TAGGED;
                } else if (is_list(p->fmt)) {
                    p->scan = tl;
                    p->state = S_MIS_OPEN;
                } else {
                    p->markup = tl; /* <|python_tag|>; the JSON follows */
                    p->state = S_L3_TAG;
                }
                continue;
            }
            size_t hold = 0;
            if (!eof) {
                hold = tag ? toolcall_tag_prefix_tail(s, n, tag) : 0;
                size_t u = toolcall_utf8_tail(s, n);
                if (u > hold) hold = u;
            } else if (p->cut && tag) {
                /* the cut came inside the opener: what there is of it is markup, not text */
                size_t t = toolcall_tag_prefix_tail(s, n, tag);
                emit_text(p, n - t);
                if (t) add_error(p, 0, "output cut inside %s", tag);
                consume(p, t);
                return;
            }
            emit_text(p, n - hold);
            return;
        }
        case S_TAGGED: {
            const char *otag = open_tag(p->fmt), *ctag = close_tag(p->fmt);
            const char *hit = find(s + p->scan, n - p->scan, ctag);
            size_t ol = strlen(otag), cl = strlen(ctag);
            if (hit || eof) {
                size_t k = hit ? (size_t)(hit - s) : n, e = hit ? k + cl : n;
                p->json_start = ol;
                struct tern_toolcall c;
                char why[256];
                enum toolcall_verdict v = decode_body(p, s + ol, k - ol, &c, why, sizeof why);
                if (v == TC_CALL && add_call(p, &c)) consume(p, e);
                else if (!hit) {
                    /* a call whose body is complete but whose closing tag never came (the
                     * model stopped at it) is accepted above; anything else is text */
                    if (v == TC_CALL) emit_text(p, e);
                    else {
                        char msg[300];
                        snprintf(msg, sizeof msg, "output ended inside %s (no %s)", otag, ctag);
                        reject_at_end(p, n, msg);
                    }
                } else {
                    if (v != TC_CALL) add_error(p, ol, "%s", why);
                    emit_text(p, e);
                }
                p->state = S_TEXT;
                continue;
            }
            if (n > TOOLCALL_MAX_BYTES) {
                char msg[300];
                snprintf(msg, sizeof msg, "call longer than the limit without %s", ctag);
                reject(p, n, msg);
                continue;
            }
            /* keep scanning from where a closing tag could still start */
            p->scan = n > cl ? n - cl : p->scan;
            if (p->scan < ol) p->scan = ol;
            return;
        }
        case S_L3_START:
        case S_L3_AFTER:
        case S_L3_TAG: {
            size_t i = skip_ws(p, p->state == S_L3_TAG ? p->markup : 0);
            if (p->state == S_L3_AFTER)
                while (i < n && (s[i] == ';' || is_ws(s[i]))) i++;
            if (i == n) {
                if (eof) {
                    if (p->state == S_L3_TAG) add_error(p, 0, "output ended after <|python_tag|>");
                    if (p->cut && p->state == S_L3_TAG) consume(p, n);
                    else emit_text(p, n);
                    p->markup = 0;
                    p->state = S_TEXT;
                    continue;
                }
                return;
            }
            if (s[i] == '{') {
                json_reset(p, i);
                p->json_owner = p->state;
                p->state = S_JSON;
                continue;
            }
            if (p->state != S_L3_TAG) {
                /* maybe a <|python_tag|> is arriving */
                size_t rem = n - i, tl = strlen(TAG_PYTHON);
                if (!memcmp(s + i, TAG_PYTHON, rem < tl ? rem : tl)) {
                    if (rem < tl && !eof) return;
                    if (rem >= tl) {
                        p->markup = i + tl; /* dropped with the call, content without one */
                        p->state = S_L3_TAG;
                        continue;
                    }
                }
                p->state = S_TEXT;
                continue;
            }
            reject(p, i + 1, "expected a JSON object after <|python_tag|>");
            continue;
        }
        case S_JSON: {
            size_t e;
            int r = json_scan(p, &e);
            bool mistral = is_list(p->fmt);
            if (r == 1) {
                if (mistral) {
                    group_entry(p, e);
                    p->scan = e;
                    p->state = S_MIS_SEP;
                } else {
                    finish_object(p, e, p->json_owner == S_L3_START);
                    p->state = S_L3_AFTER;
                }
                continue;
            }
            if (r < 0 || eof) {
                const char *why = r < 0 ? "unbalanced brackets or too deeply nested JSON"
                                        : "output ended inside the JSON of a call";
                if (r >= 0) e = n;
                if (mistral) {
                    add_error(p, p->json_start, "%s", why);
                    if (!(p->cut && r >= 0)) group_bad(p, p->json_start, e);
                    group_end(p, e);
                } else if (r >= 0) reject_at_end(p, e, why);
                else reject(p, e, why);
                continue;
            }
            return;
        }
        case S_MIS_OPEN:
        case S_MIS_ELEM:
        case S_MIS_SEP: {
            size_t i = skip_ws(p, p->scan);
            if (i == n || n > TOOLCALL_MAX_GROUP || p->n_segs + p->group_valid >= TOOLCALL_MAX_CALLS) {
                if (i < n || eof || n > TOOLCALL_MAX_GROUP) {
                    add_error(p, 0, "%s %s", open_tag(p->fmt), i < n || n > TOOLCALL_MAX_GROUP ? "list longer than the limit"
                                                                               : "list: the output ended inside it");
                    if (p->cut && i == n && n <= TOOLCALL_MAX_GROUP) p->group_cut = true;
                    group_end(p, i < n ? i : n);
                    continue;
                }
                return;
            }
            char c = s[i];
            /* A byte that cannot continue the list ends it there: it and what follows are
             * read as text again. */
            if (p->state == S_MIS_OPEN) {
                if (c != '[') {
                    add_error(p, 0, "expected '[' after %s", open_tag(p->fmt));
                    group_end(p, i);
                    continue;
                }
                p->scan = i + 1;
                p->state = S_MIS_ELEM;
            } else if (p->state == S_MIS_ELEM) {
                if (c == ']') group_end(p, i + 1);
                else if (c == '{') {
                    json_reset(p, i);
                    p->state = S_JSON;
                } else {
                    add_error(p, i, "expected a call object in the %s list", open_tag(p->fmt));
                    group_end(p, i);
                }
            } else {
                if (c == ',') {
                    p->scan = i + 1;
                    p->state = S_MIS_ELEM;
                } else if (c == ']') group_end(p, i + 1);
                else {
                    add_error(p, i, "expected ',' or ']' between %s entries", open_tag(p->fmt));
                    group_end(p, i);
                }
            }
            continue;
        }
        }
        return;
    }
}

/* ------------------------------------------------------------------ public API */

tern_status tern_toolcall_parser_create(enum tern_toolcall_format f, struct tern_toolcall_parser **out)
{
    if (!out) return tern_fail(TERN_ERR_ARG, "tern_toolcall_parser_create: NULL out");
    if ((int)f < TERN_TOOLCALL_NONE || f > TERN_TOOLCALL_GRANITE)
        return tern_fail(TERN_ERR_ARG, "unknown tool-call format %d", (int)f);
    struct tern_toolcall_parser *p = calloc(1, sizeof *p);
    if (!p) return tern_fail(TERN_ERR_NOMEM, "out of memory creating a tool-call parser");
    p->fmt = f;
    p->state = f == TERN_TOOLCALL_LLAMA3 ? S_L3_START : S_TEXT;
    if (!buf_add(p, &p->text, "", 0) || !buf_add(p, &p->pending, "", 0)) {
        tern_toolcall_parser_free(p);
        return tern_fail(TERN_ERR_NOMEM, "out of memory creating a tool-call parser");
    }
    *out = p;
    return TERN_OK;
}

void tern_toolcall_parser_free(struct tern_toolcall_parser *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_calls; i++) {
        free((char *)p->calls[i].name);
        free((char *)p->calls[i].arguments);
        free((char *)p->calls[i].id);
    }
    for (int i = 0; i < p->n_errors; i++) free(p->errors[i]);
    free(p->calls);
    free(p->errors);
    free(p->segs);
    free(p->pending.p);
    free(p->text.p);
    free(p->rs.hold.p);
    free(p->rs.text.p);
    cJSON_Delete(p->tools);
    free(p);
}

tern_status tern_toolcall_set_tools(struct tern_toolcall_parser *p, const char *tools_json, size_t len)
{
    if (!p || !tools_json) return tern_fail(TERN_ERR_ARG, "tern_toolcall_set_tools: NULL argument");
    if (p->fed) return tern_fail(TERN_ERR_ARG, "tern_toolcall_set_tools: call it before the first feed");
    if (!len) len = strlen(tools_json);
    cJSON *t = cJSON_ParseWithLength(tools_json, len);
    if (!t) return tern_fail(TERN_ERR_FORMAT, "tern_toolcall_set_tools: the tools are not valid JSON");
    cJSON_Delete(p->tools);
    p->tools = t;
    return TERN_OK;
}

tern_status tern_toolcall_feed(struct tern_toolcall_parser *p, const char *piece, size_t n, int *n_completed)
{
    if (n_completed) *n_completed = 0;
    if (!p || (!piece && n)) return tern_fail(TERN_ERR_ARG, "tern_toolcall_feed: NULL argument");
    if (p->finished) return tern_fail(TERN_ERR_ARG, "tern_toolcall_feed: the parser was already finished");
    p->completed = 0;
    p->fed = true;
    toolcall_reason_feed(p, piece, n, false);
    run(p, false);
    if (p->oom) return tern_fail(TERN_ERR_NOMEM, "out of memory in the tool-call parser");
    if (n_completed) *n_completed = p->completed;
    return TERN_OK;
}

tern_status tern_toolcall_finish(struct tern_toolcall_parser *p, int *n_completed)
{
    if (n_completed) *n_completed = 0;
    if (!p) return tern_fail(TERN_ERR_ARG, "tern_toolcall_finish: NULL parser");
    if (p->finished) return TERN_OK;
    p->completed = 0;
    p->fed = true;
    toolcall_reason_feed(p, NULL, 0, true);
    run(p, true);
    /* run(eof) decides every byte; kept defensive (SQLite's NEVER): an unchecked build still
     * hands anything left over back as content */
    if (TERN_NEVER(p->pending.n && !p->oom)) emit_text(p, p->pending.n);
    p->finished = true;
    if (p->oom) return tern_fail(TERN_ERR_NOMEM, "out of memory in the tool-call parser");
    if (n_completed) *n_completed = p->completed;
    return TERN_OK;
}

tern_status tern_toolcall_finish_cut(struct tern_toolcall_parser *p, int *n_completed)
{
    if (p && !p->finished) p->cut = true;
    return tern_toolcall_finish(p, n_completed);
}

const char *tern_toolcall_text(const struct tern_toolcall_parser *p, size_t *len)
{
    if (len) *len = p->text.n;
    return p->text.p;
}

int tern_toolcall_count(const struct tern_toolcall_parser *p) { return p->n_calls; }

const struct tern_toolcall *tern_toolcall_get(const struct tern_toolcall_parser *p, int i)
{
    return i >= 0 && i < p->n_calls ? &p->calls[i] : NULL;
}

int tern_toolcall_n_errors(const struct tern_toolcall_parser *p) { return p->n_errors; }

const char *tern_toolcall_error(const struct tern_toolcall_parser *p, int i)
{
    return i >= 0 && i < p->n_errors ? p->errors[i] : NULL;
}
