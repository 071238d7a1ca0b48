/* eval_cases.c — the evaluation dataset (docs/eval.md: one case per line, {"messages",
 * "tools", "expected": [{"name", "arguments"}], "private": [...], "slice", "id"}) and its
 * making from a tool-calling corpus (tern eval cases).
 *
 * Expected arguments may be a JSON object or, as OpenAI sends them, a string holding one; an
 * object is kept as cJSON prints it (keys in order, no whitespace, numbers in shortest form),
 * a string as written. Every malformed line is an error naming FILE:LINE and the field: a
 * dataset is a measuring instrument, so nothing is skipped silently.
 *
 * From a corpus conversation every assistant message becomes a case: the messages before it,
 * the tools, the calls it makes (none for a final answer or a refusal), the conversation's
 * private strings, and the conversation's kind as the slice (meta.kind); ids are LINE.MESSAGE. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "eval/eval.h"
#include "util/error.h"

static void case_free(struct eval_case *c)
{
    free(c->id);
    free(c->slice);
    free(c->request_json);
    free(c->tools_json);
    cJSON_Delete(c->tools);
    for (int i = 0; i < c->n_expected; i++) {
        free(c->expected[i].name);
        free(c->expected[i].arguments);
    }
    free(c->expected);
    for (int i = 0; i < c->n_private; i++) free(c->private_strings[i]);
    free(c->private_strings);
}

void tern_eval_set_free(struct tern_eval_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) case_free(&s->cases[i]);
    free(s->cases);
    free(s->path);
    free(s);
}

/* Arguments as JSON text: a string holding an object, or an object. */
static char *arguments_text(const cJSON *a, const char **why)
{
    if (cJSON_IsString(a)) {
        cJSON *p = cJSON_Parse(a->valuestring);
        const bool ok = cJSON_IsObject(p);
        cJSON_Delete(p);
        if (!ok) {
            *why = "is a string that does not hold a JSON object";
            return NULL;
        }
        return strdup(a->valuestring);
    }
    if (cJSON_IsObject(a)) return cJSON_PrintUnformatted(a);
    if (!a) return strdup("{}");
    *why = "must be an object or a string holding one";
    return NULL;
}

static tern_status parse_case(struct eval_case *c, cJSON *j, const char *where, long long line)
{
#define BAD(...) tern_fail(TERN_ERR_FORMAT, __VA_ARGS__)
    if (!cJSON_IsObject(j)) return BAD("%s:%lld: expected a JSON object", where, line);
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(j, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    const cJSON *expected = cJSON_GetObjectItemCaseSensitive(j, "expected");
    const cJSON *priv = cJSON_GetObjectItemCaseSensitive(j, "private");
    const cJSON *slice = cJSON_GetObjectItemCaseSensitive(j, "slice");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (!cJSON_IsArray(messages) || !messages->child)
        return BAD("%s:%lld: \"messages\" must be a non-empty array", where, line);
    if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
        return BAD("%s:%lld: \"tools\" must be an array", where, line);
    if (!cJSON_IsArray(expected))
        return BAD("%s:%lld: \"expected\" must be an array of calls (empty when no tool should be "
                   "called)", where, line);
    if (priv && !cJSON_IsArray(priv)) return BAD("%s:%lld: \"private\" must be an array of strings", where, line);
    if (slice && !cJSON_IsString(slice)) return BAD("%s:%lld: \"slice\" must be a string", where, line);
    if (id && !cJSON_IsString(id)) return BAD("%s:%lld: \"id\" must be a string", where, line);
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "%lld", line);
    c->id = strdup(id ? id->valuestring : idbuf);
    c->slice = strdup(slice ? slice->valuestring : "");
    if (!c->id || !c->slice) return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    int k = 0;
    const cJSON *e;
    c->n_expected = cJSON_GetArraySize(expected);
    if (c->n_expected && !(c->expected = calloc((size_t)c->n_expected, sizeof *c->expected)))
        return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    cJSON_ArrayForEach(e, expected) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(e, "function"); /* OpenAI's shape too */
        const cJSON *src = fn ? fn : e;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(src, "name");
        if (!cJSON_IsString(name) || !name->valuestring[0])
            return BAD("%s:%lld: expected[%d].name must be a non-empty string", where, line, k);
        const char *why = NULL;
        char *args = arguments_text(cJSON_GetObjectItemCaseSensitive(src, "arguments"), &why);
        if (!args) return BAD("%s:%lld: expected[%d].arguments %s", where, line, k, why ? why : "");
        c->expected[k].name = strdup(name->valuestring);
        c->expected[k].arguments = args;
        if (!c->expected[k].name) return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
        k++;
    }
    c->n_private = priv ? cJSON_GetArraySize(priv) : 0;
    if (c->n_private && !(c->private_strings = calloc((size_t)c->n_private, sizeof(char *))))
        return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    k = 0;
    const cJSON *p;
    if (priv) cJSON_ArrayForEach(p, priv) {
        if (!cJSON_IsString(p) || !p->valuestring[0])
            return BAD("%s:%lld: private[%d] must be a non-empty string", where, line, k);
        if (!(c->private_strings[k++] = strdup(p->valuestring)))
            return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    }
    cJSON *req = cJSON_CreateObject();
    if (!req) return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    cJSON_AddItemReferenceToObject(req, "messages", (cJSON *)messages);
    if (cJSON_IsArray(tools)) cJSON_AddItemReferenceToObject(req, "tools", (cJSON *)tools);
    c->request_json = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (cJSON_IsArray(tools)) {
        c->tools_json = cJSON_PrintUnformatted(tools);
        c->tools = cJSON_Duplicate(tools, true);
        if (!c->tools_json || !c->tools) return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    }
    if (!c->request_json) return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    /* the conversation must be one the chat room accepts */
    struct tern_chat_params cp = tern_chat_default_params();
    cp.messages_json = c->request_json;
    if (tern_chat_validate(&cp)) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", tern_last_error());
        return BAD("%s:%lld: %s", where, line, msg);
    }
    return TERN_OK;
#undef BAD
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

tern_status eval_set_read(FILE *f, const char *path, struct tern_eval_set **out)
{
    struct tern_eval_set *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    }
    char *line = NULL;
    size_t cap = 0;
    long long lineno = 0;
    int cap_cases = 0;
    tern_status st = TERN_OK;
    ssize_t n;
    while (!st && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t i = 0;
        while (i < (size_t)n && strchr(" \t\r\n", line[i])) i++;
        if (i == (size_t)n) continue;
        if (s->n == cap_cases) {
            int nc = cap_cases ? cap_cases * 2 : 64;
            struct eval_case *c = realloc(s->cases, (size_t)nc * sizeof *c);
            if (!c) {
                st = tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
                break;
            }
            s->cases = c;
            cap_cases = nc;
        }
        struct eval_case *c = &s->cases[s->n];
        memset(c, 0, sizeof *c);
        s->n++;
        const char *end = NULL;
        cJSON *j = cJSON_ParseWithLengthOpts(line, (size_t)n, &end, false);
        if (!j) st = tern_fail(TERN_ERR_FORMAT, "%s:%lld: malformed JSON at byte %zu", path, lineno,
                               end ? (size_t)(end - line) : (size_t)0);
        else st = parse_case(c, j, path, lineno);
        cJSON_Delete(j);
    }
    if (!st && ferror(f)) st = tern_fail(TERN_ERR_IO, "%s: read failed", path);
    if (!st && s->n == 0) st = tern_fail(TERN_ERR_FORMAT, "%s: holds no cases", path);
    /* ids must be unique: shards and merges are matched by id */
    if (!st && s->n > 1) {
        const char **ids = malloc((size_t)s->n * sizeof *ids);
        if (!ids) st = tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
        for (int i = 0; !st && i < s->n; i++) ids[i] = s->cases[i].id;
        if (!st) qsort(ids, (size_t)s->n, sizeof *ids, cmp_str);
        for (int i = 1; !st && i < s->n; i++)
            if (!strcmp(ids[i - 1], ids[i]))
                st = tern_fail(TERN_ERR_FORMAT, "%s: case id '%s' appears twice", path, ids[i]);
        free(ids);
    }
    free(line);
    if (st) {
        tern_eval_set_free(s);
        return st;
    }
    *out = s;
    return TERN_OK;
}

tern_status tern_eval_set_load(const char *path, struct tern_eval_set **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    tern_status st = eval_set_read(f, path, out);
    fclose(f);
    if (!st && (st = bench_sha256_file(path, 0, -1, (*out)->sha256))) {
        tern_eval_set_free(*out);
        *out = NULL;
    }
    return st;
}

int tern_eval_set_count(const struct tern_eval_set *s) { return s->n; }
const char *tern_eval_case_id(const struct tern_eval_set *s, int i) { return s->cases[i].id; }
int tern_eval_case_n_expected(const struct tern_eval_set *s, int i) { return s->cases[i].n_expected; }
const char *tern_eval_case_request(const struct tern_eval_set *s, int i) { return s->cases[i].request_json; }

/* ---------------------------------------------------------------- from a corpus */

static cJSON *calls_of(const cJSON *msg)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        cJSON *call = cJSON_CreateObject();
        cJSON_AddItemToObject(call, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fn, "name"), true));
        cJSON_AddItemToObject(call, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fn, "arguments"), true));
        cJSON_AddItemToArray(out, call);
    }
    return out;
}

tern_status tern_eval_cases_from_corpus(const char *corpus_path, const char *out_path, int64_t *n_cases)
{
    FILE *in = fopen(corpus_path, "rb");
    if (!in) return tern_fail(TERN_ERR_IO, "%s: cannot open: %s", corpus_path, strerror(errno));
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", out_path) >= (int)sizeof tmp) {
        fclose(in);
        return tern_fail(TERN_ERR_ARG, "eval: output path too long");
    }
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        fclose(in);
        return tern_fail(TERN_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    long long lineno = 0;
    int64_t count = 0;
    tern_status st = TERN_OK;
    ssize_t n;
    while (!st && (n = getline(&line, &cap, in)) >= 0) {
        lineno++;
        size_t i = 0;
        while (i < (size_t)n && strchr(" \t\r\n", line[i])) i++;
        if (i == (size_t)n) continue;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)n);
        const cJSON *messages = cJSON_GetObjectItemCaseSensitive(j, "messages");
        if (!cJSON_IsArray(messages)) {
            st = tern_fail(TERN_ERR_FORMAT, "%s:%lld: not a corpus conversation (no \"messages\" array)",
                           corpus_path, lineno);
            cJSON_Delete(j);
            break;
        }
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "meta");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(meta, "kind");
        const cJSON *priv = cJSON_GetObjectItemCaseSensitive(meta, "private");
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
        int mi = 0;
        for (const cJSON *m = messages->child; m && !st; m = m->next, mi++) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant")) continue;
            cJSON *c = cJSON_CreateObject();
            char id[48];
            snprintf(id, sizeof id, "%lld.%d", lineno, mi);
            cJSON_AddStringToObject(c, "id", id);
            if (cJSON_IsString(kind)) cJSON_AddStringToObject(c, "slice", kind->valuestring);
            cJSON *msgs = cJSON_AddArrayToObject(c, "messages");
            int k = 0;
            for (const cJSON *p = messages->child; p != m; p = p->next, k++)
                cJSON_AddItemToArray(msgs, cJSON_Duplicate(p, true));
            if (cJSON_IsArray(tools)) cJSON_AddItemToObject(c, "tools", cJSON_Duplicate(tools, true));
            cJSON_AddItemToObject(c, "expected", calls_of(m));
            if (cJSON_IsArray(priv) && priv->child)
                cJSON_AddItemToObject(c, "private", cJSON_Duplicate(priv, true));
            char *text = cJSON_PrintUnformatted(c);
            cJSON_Delete(c);
            if (!text || fputs(text, out) < 0 || fputc('\n', out) < 0)
                st = tern_fail(TERN_ERR_IO, "%s: write failed", tmp);
            free(text);
            count++;
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(in);
    if (fclose(out) != 0 && !st) st = tern_fail(TERN_ERR_IO, "%s: write failed", tmp);
    if (!st && rename(tmp, out_path) != 0) st = tern_fail(TERN_ERR_IO, "%s: rename: %s", out_path, strerror(errno));
    if (st) remove(tmp);
    else if (n_cases) *n_cases = count;
    return st;
}
