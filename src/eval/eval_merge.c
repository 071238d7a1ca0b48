/* eval_merge.c — answers read back from outputs files (`tern eval --outputs`), for merging the
 * shards of a run and re-grading it (`tern eval merge`).
 *
 * Every line of an outputs file is one case's answer as it was recorded; reading it records it
 * again, so a merged run is scored by exactly the code that scored the shards. A line naming a
 * case the dataset lacks, or a case already read (from any file), is an error naming FILE:LINE:
 * shards must partition the cases. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/error.h"

static int find_case(const struct tern_eval_set *s, const char *id)
{
    for (int i = 0; i < s->n; i++) /* sets are thousands of cases: a scan per line is cheap */
        if (!strcmp(s->cases[i].id, id)) return i;
    return -1;
}

static const char *str_or(const cJSON *o, const char *k, const char *dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : dflt;
}

static double num_or(const cJSON *o, const char *k, double dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

static tern_status read_line(struct tern_eval_run *r, const cJSON *o, const char *path, long long line)
{
    const char *id = str_or(o, "id", NULL);
    if (!id) return tern_fail(TERN_ERR_FORMAT, "%s:%lld: no \"id\"", path, line);
    const int i = find_case(r->set, id);
    if (i < 0)
        return tern_fail(TERN_ERR_FORMAT, "%s:%lld: case '%.100s' is not in %s", path, line, id,
                         r->set->path);
    if (r->answers[i].recorded)
        return tern_fail(TERN_ERR_FORMAT, "%s:%lld: case '%.100s' was already answered (shards "
                         "overlap, or a file was given twice)", path, line, id);
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(o, "tool_calls");
    const int n = cJSON_GetArraySize(calls);
    struct tern_eval_call_in *in = n ? calloc((size_t)n, sizeof *in) : NULL;
    if (n && !in) return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        in[k].name = str_or(c, "name", "");
        in[k].arguments = str_or(c, "arguments", "");
        k++;
    }
    struct tern_eval_answer a = {
        .content = str_or(o, "content", ""),
        .calls = in,
        .n_calls = n,
        .n_malformed = (int)num_or(o, "malformed_calls", 0),
        .n_tokens = (int)num_or(o, "tokens", 0),
        .n_prompt = (int)num_or(o, "prompt_tokens", 0),
        .ms = num_or(o, "ms", 0),
        .ttfa_tokens = (int)num_or(o, "ttfa_tokens", -1),
        .ttfa_ms = num_or(o, "ttfa_ms", 0),
        .error = str_or(o, "error", NULL),
        .request_id = str_or(o, "request_id", NULL),
    };
    tern_status st = tern_eval_record(r, i, &a);
    free(in);
    return st;
}

tern_status tern_eval_read_outputs(struct tern_eval_run *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long long lineno = 0;
    tern_status st = TERN_OK;
    ssize_t n;
    while (!st && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t i = 0;
        while (i < (size_t)n && strchr(" \t\r\n", line[i])) i++;
        if (i == (size_t)n) continue;
        cJSON *o = cJSON_ParseWithLength(line, (size_t)n);
        if (!cJSON_IsObject(o)) st = tern_fail(TERN_ERR_FORMAT, "%s:%lld: not a JSON object", path, lineno);
        else st = read_line(r, o, path, lineno);
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    return st;
}

int tern_eval_run_missing(const struct tern_eval_run *r, int *first)
{
    int n = 0;
    *first = -1;
    for (int i = 0; i < r->set->n; i++)
        if (!r->answers[i].recorded) {
            if (*first < 0) *first = i;
            n++;
        }
    return n;
}

static bool same_answer(const struct eval_answer *a, const struct eval_answer *b)
{
    if (a->recorded != b->recorded) return false;
    if (!a->recorded) return true;
    if ((a->error == NULL) != (b->error == NULL)) return false;
    if (a->error) return true; /* both failed: the messages may differ (times, ports) */
    if (strcmp(a->content ? a->content : "", b->content ? b->content : "")) return false;
    if (a->n_calls != b->n_calls || a->n_malformed != b->n_malformed || a->n_tokens != b->n_tokens)
        return false;
    for (int k = 0; k < a->n_calls; k++)
        if (strcmp(a->calls[k].name, b->calls[k].name) || strcmp(a->calls[k].arguments, b->calls[k].arguments))
            return false;
    return true;
}

int tern_eval_runs_differ(const struct tern_eval_run *a, const struct tern_eval_run *b)
{
    if (a->set != b->set) return 0;
    for (int i = 0; i < a->set->n; i++)
        if (!same_answer(&a->answers[i], &b->answers[i])) return i + 1;
    return 0;
}
