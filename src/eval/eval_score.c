/* eval_score.c — answers recorded per case, the scores `tern eval` reports (overall and per
 * slice), and the outputs file (docs/eval.md states every rule below).
 *
 * Calls are matched per case: each expected call takes the first unmatched answered call with
 * the same name and equal arguments (strict or lax, eval_json.c); matched calls are true
 * positives, precision = matched / answered, recall = matched / expected, F1 from the totals
 * over all cases (micro average). A case has the correct tools when the answered names equal
 * the expected names as multisets, and exact arguments when every expected call is matched
 * strictly and nothing else was called. A false call is any call (or malformed attempt) on a
 * case that expects none. An answered call is invalid when its tool was not offered or its
 * arguments do not validate against the tool's schema; a malformed attempt (did not parse) is
 * counted apart. A case leaks when a private string appears in its content or in any call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/error.h"

tern_status tern_eval_run_create(const struct tern_eval_set *s, struct tern_eval_run **out)
{
    struct tern_eval_run *r = calloc(1, sizeof *r);
    if (!r || !(r->answers = calloc((size_t)s->n, sizeof *r->answers))) {
        free(r);
        return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    }
    r->set = s;
    *out = r;
    return TERN_OK;
}

static void answer_clear(struct eval_answer *a)
{
    free(a->content);
    for (int i = 0; i < a->n_calls; i++) {
        free(a->calls[i].name);
        free(a->calls[i].arguments);
    }
    free(a->calls);
    free(a->error);
    free(a->request_id);
    memset(a, 0, sizeof *a);
}

void tern_eval_run_free(struct tern_eval_run *r)
{
    if (!r) return;
    for (int i = 0; i < r->set->n; i++) answer_clear(&r->answers[i]);
    free(r->answers);
    free(r);
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = true;
    return d;
}

tern_status tern_eval_record(struct tern_eval_run *r, int i, const struct tern_eval_answer *in)
{
    if (i < 0 || i >= r->set->n) return tern_fail(TERN_ERR_ARG, "eval: no case %d", i);
    struct eval_answer *a = &r->answers[i];
    answer_clear(a);
    bool oom = false;
    a->content = dup_or_null(in->content ? in->content : "", &oom);
    a->error = dup_or_null(in->error, &oom);
    a->request_id = dup_or_null(in->request_id, &oom);
    if (in->n_calls > 0 && !(a->calls = calloc((size_t)in->n_calls, sizeof *a->calls))) oom = true;
    for (int k = 0; !oom && k < in->n_calls; k++) {
        a->calls[k].name = dup_or_null(in->calls[k].name ? in->calls[k].name : "", &oom);
        a->calls[k].arguments = dup_or_null(in->calls[k].arguments ? in->calls[k].arguments : "", &oom);
        a->n_calls = k + 1;
    }
    a->n_malformed = in->n_malformed;
    a->n_tokens = in->n_tokens;
    a->n_prompt = in->n_prompt > 0 ? in->n_prompt : 0;
    a->ms = in->ms;
    a->ttfa_tokens = in->ttfa_tokens;
    a->ttfa_ms = in->ttfa_ms;
    a->recorded = true;
    if (oom) {
        answer_clear(a);
        return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    }
    return TERN_OK;
}

/* ---------------------------------------------------------------- scoring */

struct tally {
    long long cases, errors, expect_call, expect_none;
    long long calls_expected, calls_answered, tp_strict, tp_lax;
    long long correct_tools, exact_args, false_calls, malformed, invalid, leaked;
    long long tokens;
    double ms;
    double *ttfa_tok, *ttfa_ms; /* per case with a valid call and expected calls */
    long long n_ttfa, cap_ttfa_tok, cap_ttfa_ms;
    double *answer_tok;         /* tokens of every answered case (its median) */
    long long n_answer, cap_answer;
};

static int matched(const struct eval_case *c, const struct eval_answer *a, bool strict)
{
    bool used[64] = {false};
    int tp = 0;
    for (int e = 0; e < c->n_expected; e++)
        for (int k = 0; k < a->n_calls && k < 64; k++) {
            if (used[k] || strcmp(a->calls[k].name, c->expected[e].name)) continue;
            const bool eq = strict ? eval_json_strict_equal(a->calls[k].arguments, c->expected[e].arguments)
                                   : eval_json_lax_equal(a->calls[k].arguments, c->expected[e].arguments);
            if (eq) {
                used[k] = true;
                tp++;
                break;
            }
        }
    return tp;
}

static int cmp_cstr(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static bool same_names(const struct eval_case *c, const struct eval_answer *a)
{
    if (c->n_expected != a->n_calls) return false;
    if (c->n_expected == 0) return true;
    char **x = malloc((size_t)c->n_expected * sizeof *x), **y = malloc((size_t)a->n_calls * sizeof *y);
    bool same = x && y;
    for (int i = 0; same && i < c->n_expected; i++) x[i] = c->expected[i].name, y[i] = a->calls[i].name;
    if (same) {
        qsort(x, (size_t)c->n_expected, sizeof *x, cmp_cstr);
        qsort(y, (size_t)a->n_calls, sizeof *y, cmp_cstr);
        for (int i = 0; i < c->n_expected; i++)
            if (strcmp(x[i], y[i])) same = false;
    }
    free(x);
    free(y);
    return same;
}

static bool leaks(const struct eval_case *c, const struct eval_answer *a)
{
    for (int p = 0; p < c->n_private; p++) {
        const char *s = c->private_strings[p];
        if (a->content && strstr(a->content, s)) return true;
        for (int k = 0; k < a->n_calls; k++)
            if (strstr(a->calls[k].name, s) || strstr(a->calls[k].arguments, s)) return true;
    }
    return false;
}

/* Room for element n of the array *v of capacity *cap (doubled, from 256, when full); false when
 * out of memory (the array is left as it was). */
static bool room_for(double **v, long long n, long long *cap)
{
    if (n < *cap) return true;
    const long long c = *cap ? *cap * 2 : 256;
    double *x = realloc(*v, (size_t)c * sizeof *x);
    if (!x) return false;
    *v = x;
    *cap = c;
    return true;
}

static void tally_add(struct tally *t, const struct eval_case *c, const struct eval_answer *a)
{
    t->cases++;
    if (a->error) {
        t->errors++;
        return;
    }
    const bool want = c->n_expected > 0;
    t->expect_call += want;
    t->expect_none += !want;
    t->calls_expected += c->n_expected;
    t->calls_answered += a->n_calls;
    const int tps = matched(c, a, true), tpl = matched(c, a, false);
    t->tp_strict += tps;
    t->tp_lax += tpl;
    if (want) {
        t->correct_tools += same_names(c, a) && a->n_malformed == 0;
        t->exact_args += tps == c->n_expected && a->n_calls == c->n_expected && a->n_malformed == 0;
    } else {
        t->false_calls += a->n_calls > 0 || a->n_malformed > 0;
    }
    t->malformed += a->n_malformed;
    for (int k = 0; k < a->n_calls; k++) {
        char why[256];
        t->invalid += !eval_call_valid(c->tools, a->calls[k].name, a->calls[k].arguments, why, sizeof why);
    }
    t->leaked += leaks(c, a);
    t->tokens += a->n_tokens;
    t->ms += a->ms;
    /* out of memory: the percentiles omit this case */
    if (room_for(&t->answer_tok, t->n_answer, &t->cap_answer)) t->answer_tok[t->n_answer++] = a->n_tokens;
    if (want && a->ttfa_tokens >= 0) {
        if (!room_for(&t->ttfa_tok, t->n_ttfa, &t->cap_ttfa_tok) ||
            !room_for(&t->ttfa_ms, t->n_ttfa, &t->cap_ttfa_ms))
            return;
        t->ttfa_tok[t->n_ttfa] = a->ttfa_tokens;
        t->ttfa_ms[t->n_ttfa++] = a->ttfa_ms;
    }
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Nearest-rank percentile of n sorted values. */
static double pct(const double *v, long long n, double p)
{
    long long k = (long long)ceil(p / 100.0 * (double)n);
    if (k < 1) k = 1;
    return v[k - 1];
}

static void add_ratio(cJSON *o, const char *key, long long num, long long den)
{
    if (den > 0) cJSON_AddNumberToObject(o, key, (double)num / (double)den);
    else cJSON_AddNullToObject(o, key);
}

static void add_prf(cJSON *o, const char *key, long long tp, long long answered, long long expected)
{
    cJSON *s = cJSON_AddObjectToObject(o, key);
    cJSON_AddNumberToObject(s, "matched", (double)tp);
    add_ratio(s, "precision", tp, answered);
    add_ratio(s, "recall", tp, expected);
    if (answered > 0 && expected > 0 && tp > 0) {
        const double p = (double)tp / answered, r = (double)tp / expected;
        cJSON_AddNumberToObject(s, "f1", 2 * p * r / (p + r));
    } else if (answered == 0 && expected == 0) {
        cJSON_AddNullToObject(s, "f1");
    } else {
        cJSON_AddNumberToObject(s, "f1", 0.0);
    }
}

static cJSON *tally_json(struct tally *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "cases", (double)t->cases);
    cJSON_AddNumberToObject(o, "errors", (double)t->errors);
    cJSON_AddNumberToObject(o, "expect_call_cases", (double)t->expect_call);
    cJSON_AddNumberToObject(o, "expect_none_cases", (double)t->expect_none);
    cJSON_AddNumberToObject(o, "calls_expected", (double)t->calls_expected);
    cJSON_AddNumberToObject(o, "calls_answered", (double)t->calls_answered);
    add_prf(o, "strict", t->tp_strict, t->calls_answered, t->calls_expected);
    add_prf(o, "lax", t->tp_lax, t->calls_answered, t->calls_expected);
    add_ratio(o, "correct_tool_rate", t->correct_tools, t->expect_call);
    add_ratio(o, "exact_arguments_rate", t->exact_args, t->expect_call);
    add_ratio(o, "false_call_rate", t->false_calls, t->expect_none);
    cJSON_AddNumberToObject(o, "false_calls", (double)t->false_calls);
    cJSON_AddNumberToObject(o, "malformed_calls", (double)t->malformed);
    cJSON_AddNumberToObject(o, "invalid_calls", (double)t->invalid);
    add_ratio(o, "invalid_call_rate", t->invalid, t->calls_answered);
    cJSON_AddNumberToObject(o, "leaked_cases", (double)t->leaked);
    const long long answered = t->cases - t->errors;
    if (answered > 0) {
        cJSON_AddNumberToObject(o, "tokens_per_answer", (double)t->tokens / answered);
        if (t->n_answer > 0) {
            qsort(t->answer_tok, (size_t)t->n_answer, sizeof(double), cmp_double);
            cJSON_AddNumberToObject(o, "tokens_per_answer_p50", pct(t->answer_tok, t->n_answer, 50));
        }
        cJSON_AddNumberToObject(o, "ms_per_answer", t->ms / answered);
    } else {
        cJSON_AddNullToObject(o, "tokens_per_answer");
        cJSON_AddNullToObject(o, "ms_per_answer");
    }
    cJSON_AddNumberToObject(o, "ttfa_cases", (double)t->n_ttfa);
    if (t->n_ttfa > 0) {
        qsort(t->ttfa_tok, (size_t)t->n_ttfa, sizeof(double), cmp_double);
        qsort(t->ttfa_ms, (size_t)t->n_ttfa, sizeof(double), cmp_double);
        cJSON_AddNumberToObject(o, "ttfa_tokens_p50", pct(t->ttfa_tok, t->n_ttfa, 50));
        cJSON_AddNumberToObject(o, "ttfa_tokens_p95", pct(t->ttfa_tok, t->n_ttfa, 95));
        cJSON_AddNumberToObject(o, "ttfa_ms_p50", pct(t->ttfa_ms, t->n_ttfa, 50));
        cJSON_AddNumberToObject(o, "ttfa_ms_p95", pct(t->ttfa_ms, t->n_ttfa, 95));
    }
    free(t->ttfa_tok);
    free(t->ttfa_ms);
    free(t->answer_tok);
    return o;
}

/* The scores per prompt length (the quality drift across prompt lengths): the cases whose
 * prompt length is known, in buckets of at most 512, 1024, 2048, 4096 tokens and longer; the
 * drift is the spread (max - min) of lax F1 over the buckets whose cases expect calls. */
static void add_prompt_buckets(cJSON *root, const struct tern_eval_run *r)
{
    static const int edge[] = {512, 1024, 2048, 4096, 0};
    enum { NB = 5 };
    struct tally b[NB];
    memset(b, 0, sizeof b);
    bool any = false;
    for (int i = 0; i < r->set->n; i++) {
        const struct eval_answer *a = &r->answers[i];
        if (!a->recorded || a->n_prompt <= 0) continue;
        int k = 0;
        while (k < NB - 1 && a->n_prompt > edge[k]) k++;
        tally_add(&b[k], &r->set->cases[i], a);
        any = true;
    }
    if (!any) return; /* nothing was tallied, so nothing is held */
    cJSON *arr = cJSON_AddArrayToObject(root, "prompt_buckets");
    double lo = 2.0, hi = -1.0;
    for (int k = 0; k < NB; k++) {
        const long long expected = b[k].calls_expected, answered = b[k].calls_answered, tp = b[k].tp_lax;
        const long long cases = b[k].cases;
        cJSON *o = tally_json(&b[k]);
        if (!cases) {
            cJSON_Delete(o);
            continue;
        }
        if (edge[k]) cJSON_AddNumberToObject(o, "max_prompt_tokens", edge[k]);
        else cJSON_AddNumberToObject(o, "min_prompt_tokens", edge[k - 1] + 1);
        cJSON_AddItemToArray(arr, o);
        if (expected > 0) {
            const double f1 = answered + expected ? 2.0 * tp / (double)(answered + expected) : 0.0;
            lo = f1 < lo ? f1 : lo;
            hi = f1 > hi ? f1 : hi;
        }
    }
    if (hi >= lo) cJSON_AddNumberToObject(root, "f1_lax_drift", hi - lo);
}

tern_status tern_eval_report_json(const struct tern_eval_run *r, char **out)
{
    const struct tern_eval_set *s = r->set;
    struct tally all = {0};
    /* slices in order of first appearance */
    const char **names = calloc((size_t)s->n + 1, sizeof *names);
    struct tally *per = calloc((size_t)s->n + 1, sizeof *per);
    if (!names || !per) {
        free(names);
        free(per);
        return tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
    }
    int n_slices = 0;
    for (int i = 0; i < s->n; i++) {
        const struct eval_answer *a = &r->answers[i];
        if (!a->recorded) continue;
        const struct eval_case *c = &s->cases[i];
        tally_add(&all, c, a);
        if (!c->slice[0]) continue;
        int k = 0;
        while (k < n_slices && strcmp(names[k], c->slice)) k++;
        if (k == n_slices) names[n_slices++] = c->slice;
        tally_add(&per[k], c, a);
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "data", s->path);
    cJSON_AddStringToObject(root, "data_sha256", s->sha256);
    cJSON_AddItemToObject(root, "overall", tally_json(&all));
    cJSON *sl = cJSON_AddObjectToObject(root, "slices");
    for (int k = 0; k < n_slices; k++) cJSON_AddItemToObject(sl, names[k], tally_json(&per[k]));
    free(names);
    free(per);
    add_prompt_buckets(root, r);
    *out = cJSON_Print(root);
    cJSON_Delete(root);
    return *out ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
}

tern_status tern_eval_outputs_write(const struct tern_eval_run *r, FILE *f)
{
    for (int i = 0; i < r->set->n; i++) {
        const struct eval_answer *a = &r->answers[i];
        if (!a->recorded) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", r->set->cases[i].id);
        if (a->error) cJSON_AddStringToObject(o, "error", a->error);
        cJSON_AddStringToObject(o, "content", a->content ? a->content : "");
        cJSON *calls = cJSON_AddArrayToObject(o, "tool_calls");
        for (int k = 0; k < a->n_calls; k++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", a->calls[k].name);
            cJSON_AddStringToObject(c, "arguments", a->calls[k].arguments);
            cJSON_AddItemToArray(calls, c);
        }
        cJSON_AddNumberToObject(o, "malformed_calls", a->n_malformed);
        cJSON_AddNumberToObject(o, "tokens", a->n_tokens);
        if (a->n_prompt > 0) cJSON_AddNumberToObject(o, "prompt_tokens", a->n_prompt);
        cJSON_AddNumberToObject(o, "ms", a->ms);
        if (a->ttfa_tokens >= 0) {
            cJSON_AddNumberToObject(o, "ttfa_tokens", a->ttfa_tokens);
            cJSON_AddNumberToObject(o, "ttfa_ms", a->ttfa_ms);
        }
        if (a->request_id) cJSON_AddStringToObject(o, "request_id", a->request_id);
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        const bool ok = text && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
        free(text);
        if (!ok) return tern_fail(TERN_ERR_IO, "eval: writing the outputs failed");
    }
    return TERN_OK;
}
