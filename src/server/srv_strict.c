/* srv_strict.c — OpenAI's strict mode for schemas (response_format json_schema with "strict":
 * true, a tool with "strict": true): the answer must follow the schema exactly, so nothing in
 * it may be weakened. Two parts:
 *   - every object admits its declared properties only: additionalProperties absent (tern then
 *     implies false, as OpenAI requires it to be) or false; anything else is refused here, with
 *     its JSON path (an object without properties therefore admits {} only);
 *   - the schema compiles without `lenient`: a keyword, format or pattern tern cannot enforce is
 *     a 400 naming it and its path, where a non-strict request only gets a warning
 *     (srv_engine.c compiles, X-Tern-Warning carries the warnings).
 * Only the schema keywords that hold subschemas are walked: a property called
 * "additionalProperties" is a name, not the keyword. */
#include <stdio.h>
#include <string.h>

#include "server/server.h"

static bool walk(const cJSON *s, char *path, size_t len, size_t cap, int depth, struct srv_err *e,
                 const char *param);

/* path + suffix for the duration of one call */
static bool walk_at(const cJSON *s, char *path, size_t len, size_t cap, int depth, struct srv_err *e,
                    const char *param, const char *fmt, const char *a, int i)
{
    int w = a ? snprintf(path + len, cap - len, fmt, a) : snprintf(path + len, cap - len, fmt, i);
    size_t n = w < 0 ? len : len + (size_t)w >= cap ? cap - 1 : len + (size_t)w;
    bool ok = walk(s, path, n, cap, depth + 1, e, param);
    path[len] = 0;
    return ok;
}

static bool walk(const cJSON *s, char *path, size_t len, size_t cap, int depth, struct srv_err *e,
                 const char *param)
{
    if (!cJSON_IsObject(s) || depth > 200) return true; /* the compiler bounds nesting itself */
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (ap && !cJSON_IsFalse(ap)) {
        srv_err_set(e, 400, "invalid_request_error", param, "invalid_schema",
                    "%s.additionalProperties: strict mode admits the declared properties only: "
                    "additionalProperties must be false or left out (tern then takes it as false)",
                    path);
        return false;
    }
    static const char *const maps[] = {"properties", "$defs", "definitions", NULL};
    for (int m = 0; maps[m]; m++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(s, maps[m]);
        if (!cJSON_IsObject(o)) continue;
        char seg[48];
        snprintf(seg, sizeof seg, ".%s.%%s", maps[m]);
        for (const cJSON *c = o->child; c; c = c->next)
            if (!walk_at(c, path, len, cap, depth, e, param, seg, c->string, 0)) return false;
    }
    static const char *const lists[] = {"anyOf", "allOf", "oneOf", "prefixItems", "items", NULL};
    for (int l = 0; lists[l]; l++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(s, lists[l]);
        char seg[48];
        if (cJSON_IsObject(o)) {
            snprintf(seg, sizeof seg, ".%s%%s", lists[l]);
            if (!walk_at(o, path, len, cap, depth, e, param, seg, "", 0)) return false;
        } else if (cJSON_IsArray(o)) {
            snprintf(seg, sizeof seg, ".%s[%%d]", lists[l]);
            int i = 0;
            for (const cJSON *c = o->child; c; c = c->next, i++)
                if (!walk_at(c, path, len, cap, depth, e, param, seg, NULL, i)) return false;
        }
    }
    return true;
}

bool srv_strict_check(const cJSON *schema, const char *where, const char *param, struct srv_err *e)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", where);
    return walk(schema, path, strlen(path), sizeof path, 0, e, param);
}
