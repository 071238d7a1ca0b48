/* cli_distill_speed.c — speed proxies for tern distill: at each validation, what the student
 * gained in speed and lost in quality, measured the way tern measures any model.
 *
 * The teacher is measured once, at the start; at each validation the student is exported,
 * quantized to the type the comparison is made at (`--speed-type`, default q8_0: "at equal
 * quantization"), and measured the same way:
 *   - answers: `tern eval`'s local runner over the cases file (greedy, tool calls constrained
 *     by the case's tools): tokens per answer (median), TTFA tokens p50/p95 and ms p95, strict
 *     F1, exact arguments, false calls;
 *   - decode speed: `tern bench --suite`'s runner on the suite (tps p50, TTFT p50).
 * These are proxies (docs/train-and-distill.md "Distillation"): a few dozen cases and one suite run
 * on a machine that is also training, so they say which way the student moves, not what a quiet
 * bench or the full development set will say. Each measurement prints one JSON line
 * (`{"step":N,"speed": {...}}`, step 0 for the teacher) with --json, a stderr line otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_distill_speed.h"
#include "cli_gov.h"
#include "tern_bench.h"
#include "tern_gguf.h"
#include "tern_train.h"

struct speed_figures {
    double tokens_p50, ttfa_p50, ttfa_p95, ttfa_ms_p95, f1, exact, false_calls, tps, ttft_ms;
    double f1_drift; /* lax F1 spread across prompt-length buckets, -1: none */
};

struct cli_distill_speed {
    struct tern_eval_set *cases;
    struct tern_bench_suite *suite;
    int n_cases, threads;
    char type[16], dir[4096], exe[4096];
    const char *profiles;
    bool json;
    struct speed_figures teacher;
};

static double num(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : -1; /* -1: none (no call, no answer) */
}

static tern_status measure(struct cli_distill_speed *s, const char *model, struct speed_figures *f)
{
    struct tern_eval_run *run = NULL;
    char *text = NULL;
    struct tern_eval_local_params lp = tern_eval_local_default_params();
    lp.constrained = true;
    lp.n_threads = s->threads;
    tern_status st = tern_eval_run_create(s->cases, &run);
    if (!st) st = tern_eval_local(run, model, &lp, NULL, s->n_cases, NULL, NULL);
    if (!st) st = tern_eval_report_json(run, &text);
    tern_eval_run_free(run);
    if (st) return st;
    cJSON *rep = cJSON_Parse(text);
    free(text);
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(rep, "overall");
    f->f1_drift = num(rep, "f1_lax_drift", NULL);
    f->tokens_p50 = num(all, "tokens_per_answer_p50", NULL);
    f->ttfa_p50 = num(all, "ttfa_tokens_p50", NULL);
    f->ttfa_p95 = num(all, "ttfa_tokens_p95", NULL);
    f->ttfa_ms_p95 = num(all, "ttfa_ms_p95", NULL);
    f->f1 = num(all, "strict", "f1");
    f->exact = num(all, "exact_arguments_rate", NULL);
    f->false_calls = num(all, "false_call_rate", NULL);
    cJSON_Delete(rep);

    struct tern_bench_suite_params p = tern_bench_suite_default_params();
    p.n_threads = s->threads;
    p.reps = 2;
    p.profiles_path = s->profiles;
    p.runner_path = s->exe;
    p.call_valid = cli_eval_call_valid;
    p.html_samples = false;
    st = tern_bench_suite_run(model, s->suite, &p, &text);
    if (st) return st;
    rep = cJSON_Parse(text);
    free(text);
    const cJSON *met = cJSON_GetObjectItemCaseSensitive(rep, "metrics");
    f->tps = num(met, "tps", "p50");
    f->ttft_ms = num(met, "ttft_ms", "p50");
    cJSON_Delete(rep);
    return TERN_OK;
}

static double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : -1; }

static void print(const struct cli_distill_speed *s, int step, const struct speed_figures *f, double secs)
{
    const struct speed_figures *t = &s->teacher;
    if (s->json) {
        printf("{\"step\":%d,\"speed\":{\"who\":\"%s\",\"cases\":%d,\"type\":\"%s\","
               "\"tokens_per_answer_p50\":%g,\"tokens_ratio\":%g,\"ttfa_tokens_p50\":%g,"
               "\"ttfa_tokens_p95\":%g,\"ttfa_ms_p95\":%.2f,\"f1\":%.4f,\"exact\":%.4f,"
               "\"false_call_rate\":%.4f,\"f1_lax_drift\":%g,\"decode_tps\":%.1f,"
               "\"decode_speedup\":%.3f,\"ttft_ms\":%.2f,\"seconds\":%.1f}}\n",
               step, step ? "student" : "teacher", s->n_cases, s->type, f->tokens_p50,
               ratio(f->tokens_p50, t->tokens_p50), f->ttfa_p50, f->ttfa_p95, f->ttfa_ms_p95, f->f1,
               f->exact, f->false_calls, f->f1_drift, f->tps, ratio(f->tps, t->tps), f->ttft_ms, secs);
        fflush(stdout);
    } else {
        fprintf(stderr, "step %d  speed (%s, %s, %d cases): tokens/answer p50 %g (x%.2f of the "
                "teacher's), TTFA p50/p95 %g/%g tokens, F1 %.3f (teacher %.3f), exact %.1f %%, "
                "false calls %.1f %%, decode %.0f tok/s (x%.2f), %.0f s\n",
                step, step ? "student" : "teacher", s->type, s->n_cases, f->tokens_p50,
                ratio(f->tokens_p50, t->tokens_p50), f->ttfa_p50, f->ttfa_p95, f->f1, t->f1,
                100 * f->exact, 100 * f->false_calls, f->tps, ratio(f->tps, t->tps), secs);
    }
}

tern_status cli_distill_speed_open(const struct cli_distill_speed_params *p, struct cli_distill_speed **out)
{
    *out = NULL;
    struct cli_distill_speed *s = calloc(1, sizeof *s);
    if (!s) return TERN_ERR_NOMEM;
    s->threads = p->threads;
    s->json = p->json;
    snprintf(s->type, sizeof s->type, "%s", p->type ? p->type : "q8_0");
    snprintf(s->dir, sizeof s->dir, "%s", p->dir);
    char *exe = realpath("/proc/self/exe", NULL);
    snprintf(s->exe, sizeof s->exe, "%s", exe ? exe : "/proc/self/exe");
    free(exe);
    s->profiles = p->profiles;
    tern_status st = tern_eval_set_load(p->cases, &s->cases);
    if (!st) st = tern_bench_suite_load(p->suite, &s->suite);
    if (st) {
        cli_distill_speed_free(s);
        return st;
    }
    s->n_cases = tern_eval_set_count(s->cases);
    if (p->max_cases > 0 && p->max_cases < s->n_cases) s->n_cases = p->max_cases;
    /* the teacher rewritten in the comparison's type (as the student will be), measured once */
    char q[4200];
    snprintf(q, sizeof q, "%s/speed-teacher.gguf", s->dir);
    const double t0 = cli_now_s();
    st = tern_quantize_model(p->teacher, q, s->type, NULL);
    if (!st) st = measure(s, q, &s->teacher);
    remove(q);
    if (st) {
        cli_distill_speed_free(s);
        fprintf(stderr, "tern distill: measuring the teacher for --speed-cases failed:\n");
        return st;
    }
    print(s, 0, &s->teacher, cli_now_s() - t0);
    *out = s;
    return TERN_OK;
}

tern_status cli_distill_speed_step(struct cli_distill_speed *s, struct tern_trainer *t, int step)
{
    char f32[4200], q[4200];
    snprintf(f32, sizeof f32, "%s/speed-student.f32.gguf", s->dir);
    snprintf(q, sizeof q, "%s/speed-student.gguf", s->dir);
    const double t0 = cli_now_s();
    struct speed_figures f;
    tern_status st = tern_trainer_export(t, f32);
    if (!st) st = tern_quantize_model(f32, q, s->type, NULL);
    if (!st) st = measure(s, q, &f);
    remove(f32);
    remove(q);
    if (st) {
        fprintf(stderr, "tern distill: measuring the student at step %d failed:\n", step);
        return st;
    }
    print(s, step, &f, cli_now_s() - t0);
    return TERN_OK;
}

void cli_distill_speed_free(struct cli_distill_speed *s)
{
    if (!s) return;
    tern_eval_set_free(s->cases);
    tern_bench_suite_free(s->suite);
    free(s);
}
