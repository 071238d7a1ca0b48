/* eval_cover.c — what one recorded answer covers of the calls its case expects, for callers
 * that judge answers one by one (tern distill's length-aware KD) rather than score a set.
 *
 * An answer covers a case when each expected call is matched by a call of the answer to the same
 * tool (each answer call used once) that carries every argument the tool's schema lists as
 * required, with the expected value under the scores' lax rule (eval_json_lax_equal: objects as
 * key sets, numbers by value, strings unescaped). Optional arguments do not count either way, so
 * an answer that adds or leaves out an optional key still covers. A case that expects no call is
 * covered by an answer that makes none. */
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"

/* The "required" array of the parameters of the tool named name in tools, or NULL. */
static const cJSON *required_of(const cJSON *tools, const char *name)
{
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn ? fn : tool, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name)) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn ? fn : tool, "parameters");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
        return cJSON_IsArray(req) ? req : NULL;
    }
    return NULL;
}

/* Does got (an answer's parsed arguments) hold every required key of want with want's value? */
static bool has_required(const cJSON *required, const cJSON *want, const cJSON *got)
{
    if (!cJSON_IsObject(got)) return false;
    const cJSON *key;
    cJSON_ArrayForEach(key, required) {
        if (!cJSON_IsString(key)) continue;
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(want, key->valuestring);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, key->valuestring);
        if (!w) continue; /* the expected call leaves it out too: nothing to cover */
        if (!g) return false;
        char *wt = cJSON_PrintUnformatted(w), *gt = cJSON_PrintUnformatted(g);
        const bool eq = wt && gt && eval_json_lax_equal(wt, gt);
        free(wt);
        free(gt);
        if (!eq) return false;
    }
    return true;
}

int tern_eval_answer_tokens(const struct tern_eval_run *r, int i)
{
    if (!r || i < 0 || i >= r->set->n) return -1;
    const struct eval_answer *a = &r->answers[i];
    return a->recorded && !a->error ? a->n_tokens : -1;
}

int tern_eval_answer_covers(const struct tern_eval_run *r, int i)
{
    if (!r || i < 0 || i >= r->set->n) return -1;
    const struct eval_case *c = &r->set->cases[i];
    const struct eval_answer *a = &r->answers[i];
    if (!a->recorded || a->error) return -1;
    if (c->n_expected == 0) return a->n_calls == 0;
    if (a->n_calls < c->n_expected) return 0;
    bool *used = calloc((size_t)a->n_calls, sizeof *used);
    cJSON **got = calloc((size_t)a->n_calls, sizeof *got);
    int covered = used && got;
    for (int k = 0; covered && k < a->n_calls; k++) got[k] = cJSON_Parse(a->calls[k].arguments);
    for (int e = 0; covered && e < c->n_expected; e++) {
        const struct eval_call *x = &c->expected[e];
        const cJSON *req = required_of(c->tools, x->name);
        cJSON *want = cJSON_Parse(x->arguments);
        int hit = -1;
        for (int k = 0; k < a->n_calls && hit < 0; k++)
            if (!used[k] && !strcmp(a->calls[k].name, x->name) && has_required(req, want, got[k]))
                hit = k;
        cJSON_Delete(want);
        if (hit < 0) covered = 0;
        else used[hit] = true;
    }
    for (int k = 0; got && k < a->n_calls; k++) cJSON_Delete(got[k]);
    free(got);
    free(used);
    return covered;
}
