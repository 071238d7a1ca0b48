/* grammar_validator.h — an independent JSON Schema validator for the grammar tests.
 *
 * It judges instances (parsed JSON values) against the keywords tern's schema compiler
 * supports, written directly from the JSON Schema spec and RFC 3339 / 5321 / 1123 / 4291 /
 * 3986 / 4122 for the formats, without any of tern's grammar machinery: patterns go through
 * POSIX regcomp (ECMA escapes translated), IP addresses through inet_pton, the rest is
 * hand-written code. The corpus labels, this validator and tern must all agree.
 * Header-only: included by the test files that need it. */
#ifndef TERN_GRAMMAR_VALIDATOR_H
#define TERN_GRAMMAR_VALIDATOR_H

#include <arpa/inet.h>
#include <ctype.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GV_FN static __attribute__((unused))
GV_FN bool gv_valid(const cJSON *root, const cJSON *s, const cJSON *x, int depth);

static const cJSON *gv_get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static const cJSON *gv_resolve(const cJSON *root, const char *ref)
{
    if (ref[0] != '#') return NULL;
    const cJSON *cur = root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n < sizeof tok - 1) {
            if (*p == '~' && p[1] == '0') { tok[n++] = '~'; p += 2; }
            else if (*p == '~' && p[1] == '1') { tok[n++] = '/'; p += 2; }
            else tok[n++] = *p++;
        }
        tok[n] = 0;
        cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(tok)) : gv_get(cur, tok);
        if (!cur) return NULL;
    }
    return cur;
}

GV_FN bool gv_is_type(const cJSON *x, const char *t)
{
    if (!strcmp(t, "null")) return cJSON_IsNull(x);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(x);
    if (!strcmp(t, "number")) return cJSON_IsNumber(x);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble);
    if (!strcmp(t, "string")) return cJSON_IsString(x);
    if (!strcmp(t, "array")) return cJSON_IsArray(x);
    if (!strcmp(t, "object")) return cJSON_IsObject(x);
    return false;
}

/* code points of valid UTF-8 */
GV_FN long gv_len(const char *s)
{
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80) n++;
    return n;
}

GV_FN int gv_digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return -1;
    int v = 0;
    for (int i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
    return v;
}

GV_FN bool gv_date(const char *s, size_t n)
{
    if (n != 10 || s[4] != '-' || s[7] != '-') return false;
    int y = gv_digits(s, 4), m = gv_digits(s + 5, 2), d = gv_digits(s + 8, 2);
    if (y < 0 || m < 1 || m > 12 || d < 1) return false;
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int md = days[m - 1] + (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
    return d <= md;
}

GV_FN bool gv_time(const char *s, size_t n)
{
    if (n < 9 || s[2] != ':' || s[5] != ':') return false;
    int h = gv_digits(s, 2), mi = gv_digits(s + 3, 2), se = gv_digits(s + 6, 2);
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60) return false;
    size_t i = 8;
    if (i < n && s[i] == '.') {
        i++;
        size_t st = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == st) return false;
    }
    if (i == n) return false;
    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == n) return true;
    if ((s[i] != '+' && s[i] != '-') || n - i != 6 || s[i + 3] != ':') return false;
    int oh = gv_digits(s + i + 1, 2), om = gv_digits(s + i + 4, 2);
    return oh >= 0 && oh <= 23 && om >= 0 && om <= 59;
}

GV_FN bool gv_hostname(const char *s, size_t n)
{
    if (n == 0) return false;
    size_t a = 0;
    while (a <= n) {
        size_t b = a;
        while (b < n && s[b] != '.') b++;
        size_t len = b - a;
        if (len < 1 || len > 63 || s[a] == '-' || s[b - 1] == '-') return false;
        for (size_t i = a; i < b; i++) {
            char c = s[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
        }
        if (b == n) return true;
        a = b + 1;
    }
    return false;
}

GV_FN bool gv_email(const char *s, size_t n)
{
    const char *at = memchr(s, '@', n);
    if (!at) return false;
    size_t ln = (size_t)(at - s);
    if (ln == 0 || s[0] == '.' || s[ln - 1] == '.') return false;
    for (size_t i = 0; i < ln; i++) {
        char c = s[i];
        if (c == '.') { if (s[i + 1] == '.') return false; continue; }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+/=?^_`{|}~-", c)))
            return false;
    }
    return gv_hostname(at + 1, n - ln - 1);
}

GV_FN bool gv_uuid(const char *s, size_t n)
{
    if (n != 36) return false;
    for (size_t i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) { if (c != '-') return false; continue; }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
    }
    return true;
}

GV_FN bool gv_uri(const char *s, size_t n)
{
    if (n == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
    size_t i = 1;
    while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || strchr("+.-", s[i]))) i++;
    if (i == n || s[i] != ':') return false;
    for (i++; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2])) return false;
            i += 2;
            continue;
        }
        if (c == '[') { /* an IPv6 literal (RFC 3986 IP-literal), checked by inet_pton */
            const char *close = memchr(s + i, ']', n - i);
            char lit[64];
            unsigned char buf[16];
            size_t len = close ? (size_t)(close - (s + i + 1)) : 0;
            if (!close || len == 0 || len >= sizeof lit) return false;
            memcpy(lit, s + i + 1, len);
            lit[len] = 0;
            if (inet_pton(AF_INET6, lit, buf) != 1) return false;
            i += len + 1;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("-._~:/?#@!$&'()*+,;=", c)))
            continue;
        return false;
    }
    return true;
}

GV_FN bool gv_format(const char *f, const char *s)
{
    size_t n = strlen(s);
    if (!strcmp(f, "date")) return gv_date(s, n);
    if (!strcmp(f, "time")) return gv_time(s, n);
    if (!strcmp(f, "date-time")) return n > 11 && (s[10] == 'T' || s[10] == 't') && gv_date(s, 10) && gv_time(s + 11, n - 11);
    if (!strcmp(f, "email")) return gv_email(s, n);
    if (!strcmp(f, "hostname")) return gv_hostname(s, n);
    if (!strcmp(f, "uuid")) return gv_uuid(s, n);
    if (!strcmp(f, "uri")) return gv_uri(s, n);
    unsigned char buf[16];
    if (!strcmp(f, "ipv4")) return inet_pton(AF_INET, s, buf) == 1;
    if (!strcmp(f, "ipv6")) return inet_pton(AF_INET6, s, buf) == 1;
    return true;
}

/* ECMA pattern -> POSIX ERE for regcomp (the escapes the corpus uses). */
GV_FN bool gv_pattern(const char *re, const char *s)
{
    char out[4096];
    size_t k = 0;
    bool in_class = false;
    for (const char *p = re; *p && k < sizeof out - 32; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            const char *rep = NULL;
            char lit[3] = {0};
            switch (*p) {
            case 'd': rep = in_class ? "0-9" : "[0-9]"; break;
            case 'D': rep = "[^0-9]"; break;
            case 'w': rep = in_class ? "A-Za-z0-9_" : "[A-Za-z0-9_]"; break;
            case 'W': rep = "[^A-Za-z0-9_]"; break;
            case 's': rep = in_class ? "[:space:]" : "[[:space:]]"; break;
            case 'S': rep = "[^[:space:]]"; break;
            case 't': lit[0] = '\t'; rep = lit; break;
            case 'n': lit[0] = '\n'; rep = lit; break;
            default:
                if (in_class) { lit[0] = *p; }
                else { lit[0] = '\\'; lit[1] = *p; }
                rep = lit;
            }
            size_t l = strlen(rep);
            memcpy(out + k, rep, l);
            k += l;
            continue;
        }
        if (!in_class && *p == '(' && p[1] == '?' && p[2] == ':') { out[k++] = '('; p += 2; continue; }
        if (!in_class && *p == '.') { memcpy(out + k, "[^\n\r]", 5); k += 5; continue; }
        if (*p == '[' && !in_class) in_class = true;
        else if (*p == ']' && in_class && p[-1] != '[' && !(p[-1] == '^' && p[-2] == '[')) in_class = false;
        out[k++] = *p;
    }
    out[k] = 0;
    regex_t r;
    if (regcomp(&r, out, REG_EXTENDED | REG_NOSUB)) {
        fprintf(stderr, "validator: regcomp failed for %s\n", out);
        return false;
    }
    bool m = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return m;
}

/* x a multiple of step, exactly for the decimals the corpus uses (up to 9 places) */
GV_FN bool gv_multiple(double x, double step)
{
    for (int k = 0; k <= 9; k++) {
        double sc = pow(10, k);
        double ss = step * sc;
        if (fabs(ss - round(ss)) < 1e-9 * fmax(1, fabs(ss))) {
            double xs = x * sc;
            if (fabs(xs - round(xs)) > 1e-7 * fmax(1, fabs(xs))) return false;
            long long a = llround(xs), b = llround(ss);
            return b != 0 && a % b == 0;
        }
    }
    return fabs(remainder(x, step)) < 1e-9;
}

GV_FN bool gv_valid(const cJSON *root, const cJSON *s, const cJSON *x, int depth)
{
    if (depth > 200) return false;
    if (cJSON_IsTrue(s)) return true;
    if (cJSON_IsFalse(s)) return false;
    const cJSON *k;
    if ((k = gv_get(s, "$ref"))) {
        const cJSON *t = gv_resolve(root, k->valuestring);
        if (!t || !gv_valid(root, t, x, depth + 1)) return false;
    }
    if ((k = gv_get(s, "type"))) {
        bool ok = false;
        if (cJSON_IsString(k)) ok = gv_is_type(x, k->valuestring);
        else for (const cJSON *t = k->child; t; t = t->next) ok |= gv_is_type(x, t->valuestring);
        if (!ok) return false;
    }
    if ((k = gv_get(s, "enum"))) {
        bool ok = false;
        for (const cJSON *e = k->child; e && !ok; e = e->next) ok = cJSON_Compare(e, x, true);
        if (!ok) return false;
    }
    if ((k = gv_get(s, "const")) && !cJSON_Compare(k, x, true)) return false;
    if ((k = gv_get(s, "allOf")))
        for (const cJSON *b = k->child; b; b = b->next)
            if (!gv_valid(root, b, x, depth + 1)) return false;
    if ((k = gv_get(s, "anyOf"))) {
        bool ok = false;
        for (const cJSON *b = k->child; b && !ok; b = b->next) ok = gv_valid(root, b, x, depth + 1);
        if (!ok) return false;
    }
    if ((k = gv_get(s, "oneOf"))) {
        int n = 0;
        for (const cJSON *b = k->child; b; b = b->next) n += gv_valid(root, b, x, depth + 1);
        if (n != 1) return false;
    }
    if (cJSON_IsString(x)) {
        long len = gv_len(x->valuestring);
        if ((k = gv_get(s, "minLength")) && len < (long)k->valuedouble) return false;
        if ((k = gv_get(s, "maxLength")) && len > (long)k->valuedouble) return false;
        if ((k = gv_get(s, "pattern")) && !gv_pattern(k->valuestring, x->valuestring)) return false;
        if ((k = gv_get(s, "format")) && !gv_format(k->valuestring, x->valuestring)) return false;
    }
    if (cJSON_IsNumber(x)) {
        double v = x->valuedouble;
        if ((k = gv_get(s, "minimum")) && v < k->valuedouble) return false;
        if ((k = gv_get(s, "maximum")) && v > k->valuedouble) return false;
        if ((k = gv_get(s, "exclusiveMinimum")) && cJSON_IsNumber(k) && v <= k->valuedouble) return false;
        if ((k = gv_get(s, "exclusiveMaximum")) && cJSON_IsNumber(k) && v >= k->valuedouble) return false;
        if ((k = gv_get(s, "multipleOf")) && !gv_multiple(v, k->valuedouble)) return false;
    }
    if (cJSON_IsArray(x)) {
        int n = cJSON_GetArraySize(x);
        if ((k = gv_get(s, "minItems")) && n < (int)k->valuedouble) return false;
        if ((k = gv_get(s, "maxItems")) && n > (int)k->valuedouble) return false;
        const cJSON *pre = gv_get(s, "prefixItems"), *items = gv_get(s, "items");
        int np = pre ? cJSON_GetArraySize(pre) : 0;
        int i = 0;
        for (const cJSON *e = x->child; e; e = e->next, i++) {
            const cJSON *sch = i < np ? cJSON_GetArrayItem(pre, i) : items;
            if (sch && !gv_valid(root, sch, e, depth + 1)) return false;
        }
        if ((k = gv_get(s, "uniqueItems")) && cJSON_IsTrue(k))
            for (const cJSON *a = x->child; a; a = a->next)
                for (const cJSON *b = a->next; b; b = b->next)
                    if (cJSON_Compare(a, b, true)) return false;
    }
    if (cJSON_IsObject(x)) {
        int n = cJSON_GetArraySize(x);
        if ((k = gv_get(s, "minProperties")) && n < (int)k->valuedouble) return false;
        if ((k = gv_get(s, "maxProperties")) && n > (int)k->valuedouble) return false;
        if ((k = gv_get(s, "required")))
            for (const cJSON *r = k->child; r; r = r->next)
                if (!gv_get(x, r->valuestring)) return false;
        const cJSON *props = gv_get(s, "properties"), *addl = gv_get(s, "additionalProperties");
        for (const cJSON *e = x->child; e; e = e->next) {
            const cJSON *ps = props ? gv_get(props, e->string) : NULL;
            if (ps) { if (!gv_valid(root, ps, e, depth + 1)) return false; }
            else if (addl && !gv_valid(root, addl, e, depth + 1)) return false;
        }
    }
    return true;
}

/* Canonical text of a value, as tern's compact whitespace writes JSON: ", " and ": ". */
GV_FN void gv_text_rec(const cJSON *v, char **b, size_t *n, size_t *cap)
{
    if (*n + 64 > *cap) { *cap = *cap * 2 + 256; *b = realloc(*b, *cap); }
    if (cJSON_IsNull(v)) { *n += (size_t)sprintf(*b + *n, "null"); return; }
    if (cJSON_IsTrue(v)) { *n += (size_t)sprintf(*b + *n, "true"); return; }
    if (cJSON_IsFalse(v)) { *n += (size_t)sprintf(*b + *n, "false"); return; }
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 1e17) { *n += (size_t)sprintf(*b + *n, "%.0f", d); return; }
        char t[40];
        for (int p = 1; p <= 17; p++) {
            snprintf(t, sizeof t, "%.*g", p, d);
            if (strtod(t, NULL) == d) break;
        }
        *n += (size_t)sprintf(*b + *n, "%s", t);
        return;
    }
    if (cJSON_IsString(v)) {
        size_t need = *n + strlen(v->valuestring) * 6 + 8;
        if (need > *cap) { *cap = need * 2; *b = realloc(*b, *cap); }
        (*b)[(*n)++] = '"';
        for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++) {
            switch (*p) {
            case '"': *n += (size_t)sprintf(*b + *n, "\\\""); break;
            case '\\': *n += (size_t)sprintf(*b + *n, "\\\\"); break;
            case '\n': *n += (size_t)sprintf(*b + *n, "\\n"); break;
            case '\r': *n += (size_t)sprintf(*b + *n, "\\r"); break;
            case '\t': *n += (size_t)sprintf(*b + *n, "\\t"); break;
            case '\b': *n += (size_t)sprintf(*b + *n, "\\b"); break;
            case '\f': *n += (size_t)sprintf(*b + *n, "\\f"); break;
            default:
                if (*p < 0x20) *n += (size_t)sprintf(*b + *n, "\\u%04x", *p);
                else (*b)[(*n)++] = (char)*p;
            }
        }
        (*b)[(*n)++] = '"';
        return;
    }
    bool arr = cJSON_IsArray(v);
    (*b)[(*n)++] = arr ? '[' : '{';
    for (const cJSON *e = v->child; e; e = e->next) {
        if (e != v->child) { (*b)[(*n)++] = ','; (*b)[(*n)++] = ' '; }
        if (!arr) {
            cJSON key;
            memset(&key, 0, sizeof key);
            key.type = cJSON_String;
            key.valuestring = e->string;
            gv_text_rec(&key, b, n, cap);
            if (*n + 4 > *cap) { *cap = *cap * 2 + 256; *b = realloc(*b, *cap); }
            (*b)[(*n)++] = ':';
            (*b)[(*n)++] = ' ';
        }
        gv_text_rec(e, b, n, cap);
        if (*n + 8 > *cap) { *cap = *cap * 2 + 256; *b = realloc(*b, *cap); }
    }
    (*b)[(*n)++] = arr ? ']' : '}';
}

/* malloc'ed NUL-terminated text; caller frees */
GV_FN char *gv_text(const cJSON *v)
{
    size_t n = 0, cap = 256;
    char *b = malloc(cap);
    gv_text_rec(v, &b, &n, &cap);
    b = realloc(b, n + 1);
    b[n] = 0;
    return b;
}

#endif
