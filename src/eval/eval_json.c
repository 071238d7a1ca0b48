/* eval_json.c — how `tern eval` compares a call's arguments with the expected ones, and checks
 * them against the tool's schema (rules documented in docs/eval.md).
 *
 * Strict compares JSON token by token, skipping only whitespace between tokens: the same keys in
 * the same order, numbers spelled the same, strings escaped the same. Lax compares values: keys
 * in any order, numbers by value, strings after unescaping (cJSON's parse). Validation against
 * the tool's schema is eval_schema.c. */
#include <math.h>
#include <string.h>

#include "eval/eval.h"

static size_t skip_ws(const char *s, size_t i)
{
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') i++;
    return i;
}

/* End of the token starting at s[i] (s[i] not whitespace, not NUL). */
static size_t token_end(const char *s, size_t i)
{
    if (s[i] == '"') {
        for (i++; s[i] && s[i] != '"'; i++)
            if (s[i] == '\\' && s[i + 1]) i++;
        return s[i] ? i + 1 : i;
    }
    if (strchr("{}[]:,", s[i])) return i + 1;
    while (s[i] && !strchr("{}[]:,\" \t\n\r", s[i])) i++;
    return i;
}

bool eval_json_strict_equal(const char *a, const char *b)
{
    if (!a || !b) return false;
    size_t i = skip_ws(a, 0), j = skip_ws(b, 0);
    while (a[i] && b[j]) {
        const size_t ei = token_end(a, i), ej = token_end(b, j);
        if (ei - i != ej - j || memcmp(a + i, b + j, ei - i)) return false;
        i = skip_ws(a, ei);
        j = skip_ws(b, ej);
    }
    return !a[i] && !b[j];
}

static bool value_equal(const cJSON *a, const cJSON *b)
{
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        const double x = a->valuedouble, y = b->valuedouble;
        return x == y || fabs(x - y) <= 1e-12 * fmax(fabs(x), fabs(y));
    }
    if ((a->type & 0xff) != (b->type & 0xff)) return false;
    if (cJSON_IsString(a)) return !strcmp(a->valuestring, b->valuestring);
    if (cJSON_IsArray(a)) {
        const cJSON *x = a->child, *y = b->child;
        for (; x && y; x = x->next, y = y->next)
            if (!value_equal(x, y)) return false;
        return !x && !y;
    }
    if (cJSON_IsObject(a)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return false;
        for (const cJSON *x = a->child; x; x = x->next) {
            /* a duplicate key in either object makes them differ unless both agree */
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y || !value_equal(x, y)) return false;
        }
        for (const cJSON *y = b->child; y; y = y->next) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, y->string);
            if (!x || !value_equal(x, y)) return false;
        }
        return true;
    }
    return true; /* true, false, null of the same type */
}

bool eval_json_lax_equal(const char *a, const char *b)
{
    if (!a || !b) return false;
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    const bool eq = x && y && value_equal(x, y);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return eq;
}
