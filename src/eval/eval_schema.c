/* eval_schema.c — JSON Schema validation of a call's arguments for `tern eval`.
 *
 * Kept apart from the grammar room on purpose: the grammar builds what a model may generate
 * (properties in their declared order, one spelling of each number), while validation must
 * accept every document the schema admits, in any key order, with 2.0 as an integer (JSON
 * Schema 2020-12 semantics), and an independent validator also checks the grammar's output.
 * Keywords: type, enum, const, properties, required, additionalProperties, patternProperties
 * (as additional), items, prefixItems, minItems, maxItems, uniqueItems, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength (code points), pattern
 * (POSIX extended regex: ECMA patterns of the usual shapes), allOf, anyOf, oneOf, not, $ref
 * to "#", "#/$defs/..." and "#/definitions/...". format is an annotation (2020-12's default)
 * and unknown keywords are ignored. */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"

#define MAX_DEPTH 64
#define MAX_STEPS 200000 /* schema nodes visited per call: $ref cycles under anyOf would be
                            exponential in the depth limit alone */

struct vctx {
    const cJSON *root;
    char *why;
    size_t n;
    long steps;
    bool gave_up;
};

static bool fail(struct vctx *v, const char *path, const char *what)
{
    if (v->why && !v->why[0]) snprintf(v->why, v->n, "%s: %s", path[0] ? path : "$", what);
    return false;
}

static bool json_equal(const cJSON *a, const cJSON *b)
{
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) return a->valuedouble == b->valuedouble;
    return cJSON_Compare(a, b, true);
}

static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static bool is_type(const cJSON *x, const char *t)
{
    if (!strcmp(t, "object")) return cJSON_IsObject(x);
    if (!strcmp(t, "array")) return cJSON_IsArray(x);
    if (!strcmp(t, "string")) return cJSON_IsString(x);
    if (!strcmp(t, "number")) return cJSON_IsNumber(x);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble == floor(x->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(x);
    if (!strcmp(t, "null")) return cJSON_IsNull(x);
    return false;
}

static const cJSON *resolve(struct vctx *v, const char *ref)
{
    if (!strcmp(ref, "#")) return v->root;
    const char *p = NULL;
    const char *key = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) key = "$defs", p = ref + 8;
    else if (!strncmp(ref, "#/definitions/", 14)) key = "definitions", p = ref + 14;
    if (!key || strchr(p, '/')) return NULL;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v->root, key), p);
}

static bool validate(struct vctx *v, const cJSON *s, const cJSON *x, const char *path, int depth);

static bool num_kw(const cJSON *s, const char *k, double *out)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, k);
    if (!cJSON_IsNumber(n)) return false;
    *out = n->valuedouble;
    return true;
}

static bool validate_object(struct vctx *v, const cJSON *s, const cJSON *x, const char *path, int depth)
{
    char sub[512];
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    const cJSON *req;
    cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(s, "required"))
        if (cJSON_IsString(req) && !cJSON_GetObjectItemCaseSensitive(x, req->valuestring)) {
            snprintf(sub, sizeof sub, "missing required property \"%.100s\"", req->valuestring);
            return fail(v, path, sub);
        }
    const cJSON *m;
    cJSON_ArrayForEach(m, x) {
        snprintf(sub, sizeof sub, "%s.%.100s", path, m->string);
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
        if (ps) {
            if (!validate(v, ps, m, sub, depth + 1)) return false;
        } else if (pat) {
            continue; /* patternProperties are not checked: no false refusals */
        } else if (cJSON_IsFalse(addl)) {
            return fail(v, sub, "property not allowed (additionalProperties is false)");
        } else if (cJSON_IsObject(addl) && !validate(v, addl, m, sub, depth + 1)) {
            return false;
        }
    }
    double lim;
    if (num_kw(s, "minProperties", &lim) && cJSON_GetArraySize(x) < lim) return fail(v, path, "too few properties");
    if (num_kw(s, "maxProperties", &lim) && cJSON_GetArraySize(x) > lim) return fail(v, path, "too many properties");
    return true;
}

static bool validate_array(struct vctx *v, const cJSON *s, const cJSON *x, const char *path, int depth)
{
    char sub[512];
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const int n_prefix = cJSON_IsArray(prefix) ? cJSON_GetArraySize(prefix) : 0;
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, x) {
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        if (i < n_prefix) {
            if (!validate(v, cJSON_GetArrayItem(prefix, i), e, sub, depth + 1)) return false;
        } else if (cJSON_IsObject(items) || cJSON_IsBool(items)) {
            if (!validate(v, items, e, sub, depth + 1)) return false;
        }
        i++;
    }
    double lim;
    if (num_kw(s, "minItems", &lim) && i < lim) return fail(v, path, "too few items");
    if (num_kw(s, "maxItems", &lim) && i > lim) return fail(v, path, "too many items");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "uniqueItems")))
        for (const cJSON *a = x->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (json_equal(a, b)) return fail(v, path, "items are not unique");
    return true;
}

static bool validate_scalar(struct vctx *v, const cJSON *s, const cJSON *x, const char *path)
{
    double lim;
    if (cJSON_IsNumber(x)) {
        const double d = x->valuedouble;
        if (num_kw(s, "minimum", &lim) && d < lim) return fail(v, path, "below minimum");
        if (num_kw(s, "maximum", &lim) && d > lim) return fail(v, path, "above maximum");
        if (num_kw(s, "exclusiveMinimum", &lim) && d <= lim) return fail(v, path, "not above exclusiveMinimum");
        if (num_kw(s, "exclusiveMaximum", &lim) && d >= lim) return fail(v, path, "not below exclusiveMaximum");
        if (num_kw(s, "multipleOf", &lim) && lim > 0) {
            const double q = d / lim;
            if (fabs(q - nearbyint(q)) > 1e-9 * fmax(1.0, fabs(q))) return fail(v, path, "not a multiple");
        }
    }
    if (cJSON_IsString(x)) {
        const size_t n = utf8_len(x->valuestring);
        if (num_kw(s, "minLength", &lim) && n < lim) return fail(v, path, "shorter than minLength");
        if (num_kw(s, "maxLength", &lim) && n > lim) return fail(v, path, "longer than maxLength");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
        if (cJSON_IsString(pat)) {
            regex_t re;
            if (regcomp(&re, pat->valuestring, REG_EXTENDED | REG_NOSUB) == 0) {
                const int r = regexec(&re, x->valuestring, 0, NULL, 0);
                regfree(&re);
                if (r != 0) return fail(v, path, "does not match pattern");
            } /* a pattern POSIX cannot compile is not checked: no false refusals */
        }
    }
    return true;
}

static bool validate(struct vctx *v, const cJSON *s, const cJSON *x, const char *path, int depth)
{
    if (depth > MAX_DEPTH || ++v->steps > MAX_STEPS) {
        v->gave_up = true;
        return fail(v, path, "schema too deep or too complex to validate");
    }
    if (cJSON_IsTrue(s)) return true;
    if (cJSON_IsFalse(s)) return fail(v, path, "no value is allowed here");
    if (!cJSON_IsObject(s)) return true;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (cJSON_IsString(ref)) {
        const cJSON *t = resolve(v, ref->valuestring);
        if (!t) return fail(v, path, "unresolvable $ref");
        if (!validate(v, t, x, path, depth + 1)) return false;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(type) && !is_type(x, type->valuestring)) return fail(v, path, "wrong type");
    if (cJSON_IsArray(type)) {
        bool any = false;
        const cJSON *t;
        cJSON_ArrayForEach(t, type) any = any || (cJSON_IsString(t) && is_type(x, t->valuestring));
        if (!any) return fail(v, path, "wrong type");
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(en)) {
        bool any = false;
        const cJSON *e;
        cJSON_ArrayForEach(e, en) any = any || json_equal(e, x);
        if (!any) return fail(v, path, "not one of the enum values");
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cst && !json_equal(cst, x)) return fail(v, path, "not the const value");
    if (cJSON_IsObject(x) && !validate_object(v, s, x, path, depth)) return false;
    if (cJSON_IsArray(x) && !validate_array(v, s, x, path, depth)) return false;
    if (!validate_scalar(v, s, x, path)) return false;
    const cJSON *sub;
    cJSON_ArrayForEach(sub, cJSON_GetObjectItemCaseSensitive(s, "allOf"))
        if (!validate(v, sub, x, path, depth + 1)) return false;
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    char *saved = v->why;
    v->why = NULL; /* branches' own refusals are not the reason */
    int n_any = 0, n_one = 0;
    cJSON_ArrayForEach(sub, any) n_any += validate(v, sub, x, path, depth + 1);
    cJSON_ArrayForEach(sub, one) n_one += validate(v, sub, x, path, depth + 1);
    const cJSON *not = cJSON_GetObjectItemCaseSensitive(s, "not");
    const bool not_ok = !not || !validate(v, not, x, path, depth + 1);
    v->why = saved;
    if (v->gave_up) return fail(v, path, "schema too deep or too complex to validate");
    if (cJSON_IsArray(any) && any->child && n_any == 0) return fail(v, path, "matches none of anyOf");
    if (cJSON_IsArray(one) && one->child && n_one != 1) return fail(v, path, "does not match exactly one of oneOf");
    if (!not_ok) return fail(v, path, "matches the schema under not");
    return true;
}

bool eval_call_valid(const cJSON *tools, const char *name, const char *args, char *why, size_t n)
{
    if (n) why[0] = '\0';
    const cJSON *tool, *params = NULL;
    bool found = false;
    cJSON_ArrayForEach(tool, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn ? fn : tool, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) {
            params = cJSON_GetObjectItemCaseSensitive(fn ? fn : tool, "parameters");
            found = true;
            break;
        }
    }
    if (!found) {
        snprintf(why, n, "no tool named '%.100s' was offered", name);
        return false;
    }
    cJSON *x = cJSON_Parse(args);
    if (!cJSON_IsObject(x)) {
        cJSON_Delete(x);
        snprintf(why, n, "arguments are not a JSON object");
        return false;
    }
    struct vctx v = {.root = params, .why = why, .n = n};
    const bool ok = !params || validate(&v, params, x, "$", 0);
    cJSON_Delete(x);
    return ok;
}

bool tern_eval_call_valid(const char *tools_json, const char *name, const char *arguments,
                          char *why, size_t why_len)
{
    char scratch[8];
    if (!why) {
        why = scratch;
        why_len = sizeof scratch;
    }
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    if (tools_json && !tools) {
        snprintf(why, why_len, "the tools are not JSON");
        return false;
    }
    bool ok = eval_call_valid(tools, name, arguments, why, why_len);
    cJSON_Delete(tools);
    return ok;
}
