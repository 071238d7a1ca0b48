/* toolcall_formats.c — call bodies that are not JSON: Qwen3.5 / Qwen3-Coder's XML and Gemma 4's
 * own notation, each turned into the {"name", "arguments"} of struct tern_toolcall (arguments as
 * compact JSON). toolcall.c finds the body between the tags and calls these; the contract is
 * toolcall_decode's (toolcall.h): TC_CALL with malloc'ed strings, or TC_BAD with the reason.
 *
 * Qwen XML (what Qwen3.5's template renders for an assistant's tool_calls):
 *     <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>
 * One newline after the opening and before the closing parameter tag belongs to the markup.
 * VALUE is raw text for string parameters (the template writes `value|string`) and JSON for
 * mappings and lists (`|tojson`); Python's True/False/None spellings of `|string` are read as
 * JSON booleans/null where the schema asks for those types. Which is which comes from the
 * tools' schemas when the caller gave them (tern_toolcall_set_tools), else a value that reads
 * as JSON is JSON and anything else a string.
 *
 * Gemma 4 (what its template's format_argument renders):
 *     call:NAME{key:value,key:value}
 * with strings between <|"|> marks (no escapes inside), keys bare, and numbers, true, false,
 * null, [..] and {..} as in JSON. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/toolcall.h"
#include "util/check.h"

static bool ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* A name or key must be text: a control byte (NUL above all, which would cut a C string short
 * and silently change the name) makes the call malformed. */
static bool has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return true;
    return false;
}

static const char *memfind(const char *h, size_t hn, const char *t)
{
    size_t tl = strlen(t);
    TERN_ASSERT(tl > 0, "a needle has bytes (t[0] is read below)");
    for (size_t i = 0; i + tl <= hn; i++)
        if (h[i] == t[0] && !memcmp(h + i, t, tl)) return h + i;
    return NULL;
}

/* the finished call: name and arguments object become malloc'ed strings */
static enum toolcall_verdict make_call(const char *name, size_t nl, cJSON *args, struct tern_toolcall *call,
                                       char *why, size_t why_n)
{
    /* the decoders hand over a checked name (no control bytes) and an arguments object */
    TERN_ASSERT(name && nl > 0 && !has_control(name, nl) && cJSON_IsObject(args), "a call is a name and an object");
    char *a = cJSON_PrintUnformatted(args);
    char *nm = malloc(nl + 1);
    cJSON_Delete(args);
    if (!a || !nm) {
        free(a);
        free(nm);
        snprintf(why, why_n, "out of memory");
        return TC_BAD;
    }
    memcpy(nm, name, nl);
    nm[nl] = '\0';
    call->name = nm;
    call->arguments = a;
    call->id = NULL;
    return TC_CALL;
}

/* ------------------------------------------------------------------ Qwen XML */

/* The JSON Schema "type" of parameter key of tool name in tools (NULL if unknown). A list of
 * types counts as string when it has "string". */
static const char *param_type(const cJSON *tools, const char *name, size_t nl, const char *key, size_t kl)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!fn) fn = t;
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(n) || strlen(n->valuestring) != nl || memcmp(n->valuestring, name, nl)) continue;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fn, "parameters"), "properties");
        const cJSON *p;
        cJSON_ArrayForEach(p, props) {
            if (strlen(p->string) != kl || memcmp(p->string, key, kl)) continue;
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
            if (cJSON_IsString(ty)) return ty->valuestring;
            const cJSON *x;
            cJSON_ArrayForEach(x, ty) if (cJSON_IsString(x) && !strcmp(x->valuestring, "string")) return "string";
            if (cJSON_IsArray(ty) && cJSON_IsString(ty->child)) return ty->child->valuestring;
            if (cJSON_GetObjectItemCaseSensitive(p, "enum") || cJSON_GetObjectItemCaseSensitive(p, "const")) {
                const cJSON *e = cJSON_GetObjectItemCaseSensitive(p, "enum");
                e = e ? e->child : cJSON_GetObjectItemCaseSensitive(p, "const");
                if (cJSON_IsString(e)) return "string";
            }
            return NULL;
        }
        return NULL;
    }
    return NULL;
}

/* VALUE text -> JSON item, typed by the schema type when known */
static cJSON *typed_value(const char *v, size_t n, const char *type)
{
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, v, n);
    s[n] = '\0';
    cJSON *out = NULL;
    if (!type || strcmp(type, "string")) {
        if (type && (!strcmp(type, "boolean") || !strcmp(type, "null"))) {
            /* Python's str() of True/False/None, as the template renders them */
            if (!strcmp(s, "True")) out = cJSON_CreateTrue();
            else if (!strcmp(s, "False")) out = cJSON_CreateFalse();
            else if (!strcmp(s, "None")) out = cJSON_CreateNull();
        }
        if (!out) {
            const char *end = NULL;
            out = cJSON_ParseWithLengthOpts(s, n, &end, false);
            while (out && end && end < s + n && ws(*end)) end++;
            if (out && end != s + n) {
                cJSON_Delete(out);
                out = NULL;
            }
        }
    }
    if (!out) out = cJSON_CreateString(s);
    free(s);
    return out;
}

enum toolcall_verdict toolcall_decode_xml(const char *b, size_t n, const cJSON *tools, struct tern_toolcall *call,
                                          char *why, size_t why_n)
{
    memset(call, 0, sizeof *call);
    size_t i = 0;
    while (i < n && ws(b[i])) i++;
    if (n - i < 10 || memcmp(b + i, "<function=", 10)) {
        snprintf(why, why_n, "expected <function=NAME>");
        return TC_BAD;
    }
    i += 10;
    const char *gt = memchr(b + i, '>', n - i);
    const char *nl_ = memchr(b + i, '\n', n - i);
    if (!gt || (nl_ && nl_ < gt) || gt == b + i) {
        snprintf(why, why_n, "<function=NAME> without a name or its closing '>'");
        return TC_BAD;
    }
    const char *name = b + i;
    size_t namelen = (size_t)(gt - name);
    if (has_control(name, namelen)) {
        snprintf(why, why_n, "a control byte in the function name");
        return TC_BAD;
    }
    i = (size_t)(gt - b) + 1;
    cJSON *args = cJSON_CreateObject();
    if (!args) {
        snprintf(why, why_n, "out of memory");
        return TC_BAD;
    }
    for (;;) {
        while (i < n && ws(b[i])) i++;
        if (n - i >= 11 && !memcmp(b + i, "</function>", 11)) {
            i += 11;
            break;
        }
        if (n - i < 11 || memcmp(b + i, "<parameter=", 11)) {
            snprintf(why, why_n, "expected <parameter=KEY> or </function> at offset %zu of the call", i);
            goto bad;
        }
        i += 11;
        const char *kg = memchr(b + i, '>', n - i);
        const char *kn = memchr(b + i, '\n', n - i);
        if (!kg || (kn && kn < kg) || kg == b + i) {
            snprintf(why, why_n, "<parameter=KEY> without a key or its closing '>' at offset %zu of the call", i);
            goto bad;
        }
        const char *key = b + i;
        size_t kl = (size_t)(kg - key);
        if (has_control(key, kl)) {
            snprintf(why, why_n, "a control byte in a parameter name at offset %zu of the call", i);
            goto bad;
        }
        i = (size_t)(kg - b) + 1;
        const char *endp = memfind(b + i, n - i, "</parameter>");
        if (!endp) {
            snprintf(why, why_n, "parameter '%.*s' has no </parameter>", (int)(kl > 100 ? 100 : kl), key);
            goto bad;
        }
        size_t vs = i, ve = (size_t)(endp - b);
        if (vs < ve && b[vs] == '\n') vs++; /* the newlines the format puts around a value */
        if (ve > vs && b[ve - 1] == '\n') ve--;
        char *k = malloc(kl + 1);
        if (!k) {
            snprintf(why, why_n, "out of memory");
            goto bad;
        }
        memcpy(k, key, kl);
        k[kl] = '\0';
        if (cJSON_GetObjectItemCaseSensitive(args, k)) {
            snprintf(why, why_n, "parameter '%.100s' given twice", k);
            free(k);
            goto bad;
        }
        cJSON *v = typed_value(b + vs, ve - vs, param_type(tools, name, namelen, key, kl));
        if (!v || !cJSON_AddItemToObject(args, k, v)) {
            cJSON_Delete(v);
            free(k);
            snprintf(why, why_n, "out of memory");
            goto bad;
        }
        free(k);
        i = (size_t)(endp - b) + 12;
    }
    while (i < n && ws(b[i])) i++;
    if (i != n) {
        snprintf(why, why_n, "unexpected bytes after </function>");
        goto bad;
    }
    return make_call(name, namelen, args, call, why, why_n);
bad:
    cJSON_Delete(args);
    return TC_BAD;
}

/* ------------------------------------------------------------------ Gemma 4 */

#define GEMMA_QUOTE "<|\"|>"
#define GEMMA_MAX_DEPTH 64

struct gscan {
    const char *s;
    size_t n, i;
    char *why;
    size_t why_n;
};

static void gskip(struct gscan *g)
{
    TERN_ASSERT(g->i <= g->n, "the scanner stays inside the call");
    while (g->i < g->n && ws(g->s[g->i])) g->i++;
}

static bool glit(struct gscan *g, const char *t)
{
    size_t tl = strlen(t);
    TERN_ASSERT(g->i <= g->n && tl > 0);
    if (g->n - g->i >= tl && !memcmp(g->s + g->i, t, tl)) {
        g->i += tl;
        return true;
    }
    return false;
}

static cJSON *gvalue(struct gscan *g, int depth);

static cJSON *gfail(struct gscan *g, const char *what)
{
    snprintf(g->why, g->why_n, "%s at offset %zu of the call", what, g->i);
    return NULL;
}

/* {key:value,...}: keys are bare (anything up to ':'), as format_argument writes them */
static cJSON *gdict(struct gscan *g, int depth)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return gfail(g, "out of memory");
    gskip(g);
    if (glit(g, "}")) return o;
    for (;;) {
        gskip(g);
        size_t ks = g->i;
        while (g->i < g->n && g->s[g->i] != ':' && g->s[g->i] != '}' && g->s[g->i] != ',' && g->s[g->i] != '{')
            g->i++;
        size_t ke = g->i;
        while (ke > ks && ws(g->s[ke - 1])) ke--;
        if (ke == ks || !glit(g, ":") || has_control(g->s + ks, ke - ks)) {
            cJSON_Delete(o);
            return gfail(g, "expected KEY: (text, no control bytes) in an argument list");
        }
        /* a key written as a Gemma string (escape_keys) is read without its marks */
        if (ke - ks > 10 && !memcmp(g->s + ks, GEMMA_QUOTE, 5) && !memcmp(g->s + ke - 5, GEMMA_QUOTE, 5)) {
            ks += 5;
            ke -= 5;
        }
        char *k = malloc(ke - ks + 1);
        if (!k) {
            cJSON_Delete(o);
            return gfail(g, "out of memory");
        }
        memcpy(k, g->s + ks, ke - ks);
        k[ke - ks] = '\0';
        gskip(g);
        cJSON *v = gvalue(g, depth + 1);
        if (!v || cJSON_GetObjectItemCaseSensitive(o, k) || !cJSON_AddItemToObject(o, k, v)) {
            if (v) {
                cJSON_Delete(v);
                snprintf(g->why, g->why_n, "key '%.100s' given twice", k);
            }
            free(k);
            cJSON_Delete(o);
            return NULL;
        }
        free(k);
        gskip(g);
        if (glit(g, "}")) return o;
        if (!glit(g, ",")) {
            cJSON_Delete(o);
            return gfail(g, "expected ',' or '}'");
        }
    }
}

static cJSON *glist(struct gscan *g, int depth)
{
    cJSON *a = cJSON_CreateArray();
    if (!a) return gfail(g, "out of memory");
    gskip(g);
    if (glit(g, "]")) return a;
    for (;;) {
        gskip(g);
        cJSON *v = gvalue(g, depth + 1);
        if (!v) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, v);
        gskip(g);
        if (glit(g, "]")) return a;
        if (!glit(g, ",")) {
            cJSON_Delete(a);
            return gfail(g, "expected ',' or ']'");
        }
    }
}

static cJSON *gvalue(struct gscan *g, int depth)
{
    if (depth > GEMMA_MAX_DEPTH) return gfail(g, "arguments nested too deeply");
    if (glit(g, GEMMA_QUOTE)) {
        const char *e = memfind(g->s + g->i, g->n - g->i, GEMMA_QUOTE);
        if (!e) return gfail(g, "a string without its closing <|\"|>");
        size_t l = (size_t)(e - (g->s + g->i));
        char *t = malloc(l + 1);
        if (!t) return gfail(g, "out of memory");
        memcpy(t, g->s + g->i, l);
        t[l] = '\0';
        g->i += l + 5;
        cJSON *v = cJSON_CreateString(t);
        free(t);
        return v ? v : gfail(g, "out of memory");
    }
    if (glit(g, "{")) return gdict(g, depth);
    if (glit(g, "[")) return glist(g, depth);
    if (glit(g, "true")) return cJSON_CreateTrue();
    if (glit(g, "false")) return cJSON_CreateFalse();
    if (glit(g, "null")) return cJSON_CreateNull();
    /* a JSON number: its extent, then cJSON reads it */
    size_t s = g->i;
    while (g->i < g->n && strchr("+-0123456789.eE", g->s[g->i]) && g->s[g->i]) g->i++;
    if (g->i == s) return gfail(g, "expected a value (<|\"|>string<|\"|>, number, true, false, null, [..] or {..})");
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(g->s + s, g->i - s, &end, false);
    if (!cJSON_IsNumber(v) || end != g->s + g->i) {
        cJSON_Delete(v);
        g->i = s;
        return gfail(g, "malformed number");
    }
    return v;
}

enum toolcall_verdict toolcall_decode_gemma4(const char *b, size_t n, struct tern_toolcall *call, char *why,
                                             size_t why_n)
{
    memset(call, 0, sizeof *call);
    struct gscan g = {b, n, 0, why, why_n};
    gskip(&g);
    if (!glit(&g, "call:")) {
        snprintf(why, why_n, "expected call:NAME{...}");
        return TC_BAD;
    }
    size_t ns = g.i;
    while (g.i < n && b[g.i] != '{' && !ws(b[g.i])) g.i++;
    size_t ne = g.i;
    gskip(&g);
    if (ne == ns || has_control(b + ns, ne - ns) || !glit(&g, "{")) {
        snprintf(why, why_n, "expected call:NAME{...}: %s", ne == ns ? "no name"
                 : has_control(b + ns, ne - ns) ? "a control byte in the name" : "no '{' after the name");
        return TC_BAD;
    }
    cJSON *args = gdict(&g, 0);
    if (!args) return TC_BAD;
    gskip(&g);
    if (g.i != n) {
        cJSON_Delete(args);
        snprintf(why, why_n, "unexpected bytes after the arguments at offset %zu of the call", g.i);
        return TC_BAD;
    }
    return make_call(b + ns, ne - ns, args, call, why, why_n);
}
