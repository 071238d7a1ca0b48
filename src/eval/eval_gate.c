/* eval_gate.c — the quality half of `tern gate`: is the current `tern eval` report worse than the
 * baseline's beyond the limits? Speed gates alone let a faster build that calls the wrong tools
 * pass; this co-gates it (docs/bench-and-gate.md "Speed governance", docs/eval.md). Gated:
 *   strict F1 (overall) may drop by at most f1_drop_max (0.01),
 *   leaked cases (private strings in an answer) may not grow,
 *   failed cases (runner errors) may not grow: a request that failed scores nothing, and a gate
 *     that let failures through would pass a build that answers less.
 * Lax F1, correct-tool, exact-arguments, false-call and invalid-call rates, TTFA and tokens per
 * answer are printed for the reader. Reports of different datasets (data_sha256) or of different
 * case counts (a shard against a full run) are refused: their scores measure different cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/error.h"
#include "util/file.h"

#define EVAL_REPORT_MAX_BYTES (64u << 20)

struct tern_eval_gate_params tern_eval_gate_default_params(void)
{
    return (struct tern_eval_gate_params){.f1_drop_max = 0.01, .out = NULL};
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

/* The keys the gate reads must be there with the right types: a report from another tool, or a
 * hand-edited one, is named with the key it lacks. */
static tern_status load(const char *path, cJSON **out)
{
    *out = NULL;
    char *buf;
    size_t len;
    tern_status st = util_read_file(path, EVAL_REPORT_MAX_BYTES, "eval report", &buf, &len);
    if (st) return st;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, len + 1, &end, true); /* + the NUL it requires */
    if (!j) {
        size_t off = end ? (size_t)(end - buf) : 0;
        free(buf);
        return tern_fail(TERN_ERR_FORMAT, "%s: not JSON (byte %zu)", path, off);
    }
    free(buf);
    static const char *const nums[][2] = {{"cases", "overall.cases"}, {"errors", "overall.errors"},
                                          {"leaked_cases", "overall.leaked_cases"}};
    const cJSON *o = at(j, "overall", NULL);
    const cJSON *f1 = at(at(o, "strict", NULL), "f1", NULL);
    const char *bad = NULL;
    if (!cJSON_IsString(at(j, "data_sha256", NULL))) bad = "data_sha256";
    else if (!cJSON_IsObject(o)) bad = "overall";
    else if (!cJSON_IsNumber(f1) && !cJSON_IsNull(f1)) bad = "overall.strict.f1";
    for (int i = 0; !bad && i < 3; i++)
        if (!cJSON_IsNumber(at(o, nums[i][0], NULL))) bad = nums[i][1];
    if (bad) {
        cJSON_Delete(j);
        return tern_fail(TERN_ERR_FORMAT, "%s: not a tern eval report: %s is missing or of the wrong type "
                         "(tern eval --json writes one)", path, bad);
    }
    *out = j;
    return TERN_OK;
}

static void num(char *b, size_t n, const cJSON *v)
{
    if (cJSON_IsNumber(v)) snprintf(b, n, "%.4g", v->valuedouble);
    else snprintf(b, n, "null");
}

static void row(FILE *out, const char *metric, const cJSON *b, const cJSON *c, const char *change,
                const char *limit, const char *verdict)
{
    if (!out) return;
    char sb[32], sc[32];
    num(sb, sizeof sb, b);
    num(sc, sizeof sc, c);
    fprintf(out, "| %-22s | %10s | %10s | %9s | %-12s | %-7s |\n", metric, sb, sc, change, limit, verdict);
}

/* A count that may not grow (leaks, failures). */
static int no_growth(FILE *out, const char *metric, const cJSON *b, const cJSON *c)
{
    char ch[32];
    double d = c->valuedouble - b->valuedouble;
    snprintf(ch, sizeof ch, "%+.0f", d);
    row(out, metric, b, c, ch, "<= +0", d > 0 ? "FAIL" : "ok");
    return d > 0;
}

static void info(FILE *out, const char *metric, const cJSON *b, const cJSON *c)
{
    char ch[32] = "n/a";
    if (cJSON_IsNumber(b) && cJSON_IsNumber(c)) snprintf(ch, sizeof ch, "%+.4g", c->valuedouble - b->valuedouble);
    row(out, metric, b, c, ch, "-", "info");
}

tern_status tern_eval_gate(const char *baseline_path, const char *current_path,
                           const struct tern_eval_gate_params *p, enum tern_gate_verdict *verdict)
{
    if (!(p->f1_drop_max >= 0 && p->f1_drop_max <= 1))
        return tern_fail(TERN_ERR_ARG, "eval gate: the F1 drop limit must be in [0, 1], not %g", p->f1_drop_max);
    cJSON *base = NULL, *cur = NULL;
    tern_status st = load(baseline_path, &base);
    if (!st) st = load(current_path, &cur);
    if (st) {
        cJSON_Delete(base);
        return st;
    }
    FILE *out = p->out;
    const cJSON *ob = at(base, "overall", NULL), *oc = at(cur, "overall", NULL);
    const char *db = at(base, "data_sha256", NULL)->valuestring, *dc = at(cur, "data_sha256", NULL)->valuestring;
    if (out) fprintf(out, "eval baseline: %s\neval current:  %s\n", baseline_path, current_path);
    const char *refused = NULL;
    if (strcmp(db, dc)) refused = "the reports scored different datasets (data_sha256 differs): their scores measure different cases";
    else if (at(ob, "cases", NULL)->valuedouble != at(oc, "cases", NULL)->valuedouble)
        refused = "the reports scored different numbers of cases (a shard against a full run? merge shards first: tern eval merge)";
    if (refused) {
        if (out) fprintf(out, "REFUSED: %s\n", refused);
        *verdict = TERN_GATE_REFUSED;
        cJSON_Delete(base);
        cJSON_Delete(cur);
        return TERN_OK;
    }
    int failed = 0;
    if (out) fprintf(out, "| %-22s | %10s | %10s | %9s | %-12s | %-7s |\n|%s|%s|%s|%s|%s|%s|\n", "quality metric", "baseline",
                     "current", "change", "limit", "verdict", "------------------------", "------------",
                     "------------", "-----------", "--------------", "---------");
    {
        /* F1 is null when neither expected nor answered a call (a chat-only dataset): nothing to
         * gate; a baseline F1 against a null current one means the calls vanished */
        const cJSON *b = at(at(ob, "strict", NULL), "f1", NULL), *c = at(at(oc, "strict", NULL), "f1", NULL);
        char ch[32] = "n/a", limit[32];
        snprintf(limit, sizeof limit, ">= -%g", p->f1_drop_max);
        const char *v = "n/a";
        if (cJSON_IsNumber(b) && cJSON_IsNumber(c)) {
            double d = c->valuedouble - b->valuedouble;
            snprintf(ch, sizeof ch, "%+.4f", d);
            /* a hair of tolerance: F1s are ratios of counts printed with 15+ digits */
            bool bad = d < -p->f1_drop_max - 1e-9;
            failed += bad;
            v = bad ? "FAIL" : "ok";
        } else if (cJSON_IsNumber(b) != cJSON_IsNumber(c)) {
            failed++;
            v = "FAIL";
        }
        row(out, "strict F1", b, c, ch, limit, v);
    }
    failed += no_growth(out, "leaked cases", at(ob, "leaked_cases", NULL), at(oc, "leaked_cases", NULL));
    failed += no_growth(out, "failed cases", at(ob, "errors", NULL), at(oc, "errors", NULL));
    info(out, "lax F1", at(at(ob, "lax", NULL), "f1", NULL), at(at(oc, "lax", NULL), "f1", NULL));
    static const char *const infos[] = {"correct_tool_rate", "exact_arguments_rate", "false_call_rate",
                                        "invalid_call_rate", "ttfa_tokens_p95", "tokens_per_answer"};
    for (size_t i = 0; i < sizeof infos / sizeof *infos; i++)
        info(out, infos[i], at(ob, infos[i], NULL), at(oc, infos[i], NULL));
    if (out)
        fprintf(out, "quality verdict: %s (%d metric%s past %s limit)\n", failed ? "FAIL" : "PASS", failed,
                failed == 1 ? "" : "s", failed == 1 ? "its" : "their");
    *verdict = failed ? TERN_GATE_FAIL : TERN_GATE_PASS;
    cJSON_Delete(base);
    cJSON_Delete(cur);
    return TERN_OK;
}
