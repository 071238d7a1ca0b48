/* bench_suite.c — a benchmark suite: fixed chat prompts, one JSON object per line,
 * {"messages": [...], "tools": [...]} ("tools" optional, "id" optional), the request a chat
 * client sends. Every line is checked when the suite loads (JSON, the two keys, the messages as
 * tern_chat_validate reads them) and a bad one is an error naming FILE:LINE: a suite is an
 * instrument, nothing is skipped but blank lines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "util/error.h"

void tern_bench_suite_free(struct tern_bench_suite *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->prompts[i].request_json);
        free(s->prompts[i].tools_json);
    }
    free(s->prompts);
    free(s->path);
    free(s);
}

int tern_bench_suite_count(const struct tern_bench_suite *s) { return s->n; }

static tern_status parse_line(struct tern_bench_suite *s, const char *line, int lineno)
{
    cJSON *j = cJSON_Parse(line);
    tern_status st = TERN_OK;
    if (!j) return tern_fail(TERN_ERR_FORMAT, "%s:%d: not JSON (near '%.24s')", s->path, lineno,
                             cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : line);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    const cJSON *it;
    if (!cJSON_IsObject(j)) st = tern_fail(TERN_ERR_FORMAT, "%s:%d: expected a JSON object {\"messages\": [...], \"tools\": [...]}", s->path, lineno);
    else if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs))
        st = tern_fail(TERN_ERR_FORMAT, "%s:%d: \"messages\" must be a non-empty array", s->path, lineno);
    else if (tools && !cJSON_IsArray(tools))
        st = tern_fail(TERN_ERR_FORMAT, "%s:%d: \"tools\" must be an array", s->path, lineno);
    if (!st) cJSON_ArrayForEach(it, j) {
        if (strcmp(it->string, "messages") && strcmp(it->string, "tools") && strcmp(it->string, "id")) {
            st = tern_fail(TERN_ERR_FORMAT, "%s:%d: unknown key \"%s\" (a suite line holds messages, tools, id)",
                           s->path, lineno, it->string);
            break;
        }
    }
    char *req = NULL, *tj = NULL;
    if (!st) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemReferenceToObject(r, "messages", (cJSON *)msgs);
        if (tools && cJSON_GetArraySize(tools)) cJSON_AddItemReferenceToObject(r, "tools", (cJSON *)tools);
        req = cJSON_PrintUnformatted(r);
        cJSON_Delete(r);
        if (tools && cJSON_GetArraySize(tools)) tj = cJSON_PrintUnformatted(tools);
        if (!req) st = tern_fail(TERN_ERR_NOMEM, "suite: out of memory");
    }
    if (!st) {
        struct tern_chat_params cp = tern_chat_default_params();
        cp.messages_json = req;
        if (tern_chat_validate(&cp)) st = tern_fail_prefix(TERN_ERR_FORMAT, "%s:%d: ", s->path, lineno);
    }
    cJSON_Delete(j);
    if (st) {
        free(req);
        free(tj);
        return st;
    }
    struct bench_prompt *grown = realloc(s->prompts, (size_t)(s->n + 1) * sizeof *grown);
    if (!grown) {
        free(req);
        free(tj);
        return tern_fail(TERN_ERR_NOMEM, "suite: out of memory");
    }
    s->prompts = grown;
    s->prompts[s->n++] = (struct bench_prompt){.line = lineno, .request_json = req, .tools_json = tj};
    return TERN_OK;
}

tern_status tern_bench_suite_load(const char *path, struct tern_bench_suite **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot open suite %s: %s", path, strerror(errno));
    struct tern_bench_suite *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        fclose(f);
        return tern_fail(TERN_ERR_NOMEM, "suite: out of memory");
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    tern_status st = TERN_OK;
    while (!st && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue;
        st = parse_line(s, line, lineno);
    }
    free(line);
    fclose(f);
    if (!st && s->n == 0) st = tern_fail(TERN_ERR_FORMAT, "%s: no prompts", path);
    if (st) {
        tern_bench_suite_free(s);
        return st;
    }
    *out = s;
    return TERN_OK;
}
