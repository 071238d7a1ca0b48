/* srv_util.c — small pieces every server file uses: a growable byte buffer, OpenAI error
 * bodies, clocks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "server/server.h"
#include "util/clock.h"

bool sbuf_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

bool sbuf_adds(struct sbuf *b, const char *s) { return sbuf_add(b, s, strlen(s)); }

void sbuf_free(struct sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* An error body must be valid UTF-8 whatever the message quotes: a field cut to its buffer may
 * end inside a character (a long key or value from the request), and a message built deeper
 * down may have cut one in its middle. Invalid bytes are dropped, in place. */
static void utf8_scrub(char *s)
{
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) { i++; continue; }
        memmove(s + o, s + i, (size_t)k);
        o += (size_t)k;
        i += (size_t)k;
    }
    s[o] = 0;
}

void srv_err_set(struct srv_err *e, int status, const char *type, const char *param,
                 const char *code, const char *fmt, ...)
{
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    utf8_scrub(e->param);
    utf8_scrub(e->message);
}

char *srv_err_body(const struct srv_err *e)
{
    cJSON *root = cJSON_CreateObject(), *o = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "error", o);
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddStringToObject(o, "type", e->type);
    if (e->param[0]) cJSON_AddStringToObject(o, "param", e->param);
    else cJSON_AddNullToObject(o, "param");
    if (e->code[0]) cJSON_AddStringToObject(o, "code", e->code);
    else cJSON_AddNullToObject(o, "code");
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return txt;
}

double srv_now(void) { return util_now_s(); }

long long srv_unix_time(void) { return (long long)time(NULL); }

/* Anthropic's error types by status (its documented list; 503 is "overloaded" there too). */
static const char *anthropic_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

char *srv_err_body_api(const struct srv_err *e, enum srv_api api)
{
    if (api != SRV_API_MESSAGES) return srv_err_body(e);
    cJSON *root = cJSON_CreateObject(), *o = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "type", "error");
    cJSON_AddItemToObject(root, "error", o);
    cJSON_AddStringToObject(o, "type", anthropic_type(e->status));
    cJSON_AddStringToObject(o, "message", e->message);
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return txt;
}
