/* cli_distill_length.c — the length-aware KD for tern distill: the student's own
 * answers decide which documents weigh more.
 *
 * At open, every assistant message of the training conversations that calls tools becomes a
 * tern eval case (tern_eval_cases_from_corpus: the messages before it, the tools, the calls it
 * makes), tied to its training document by the file line both count. Every length_kd_every
 * steps (and at a run's first step, resumed or not) the documents the trainer will draw over the
 * next length_kd_every steps (tern_trainer_upcoming_docs; their number estimated from the step's
 * token budget and the data's mean document length) are mined: each of their tool-calling
 * answers (at most length_kd_docs of them when that is set) is answered greedily and
 * constrained, as tern eval answers:
 *   - by the teacher, once per case (the teacher does not change; its answers are remembered);
 *   - by the student as it is now, exported and quantized to q8_0 for the purpose.
 * Each answer's weight is tern_length_kd_weight(recipe, student tokens, teacher tokens, covered),
 * covered meaning the student's calls carry every required argument the case expects
 * (tern_eval_answer_covers: the scores' lax rule); a document weighs its heaviest answer's
 * weight. So the loss applies to the very documents the student is about to train on, judged
 * by the student of those steps, as the seed's per-batch loss would. One line per mining says
 * what was found (JSON with --json).
 *
 * Not saved in checkpoints: a resumed run mines at its first step. The teacher's remembered
 * answers are lost with the process too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_distill_length.h"
#include "tern_bench.h"
#include "tern_gguf.h"
#include "tern_train.h"

struct cli_distill_length {
    struct cli_distill_length_params p;
    struct tern_distill_recipe recipe;
    struct tern_eval_set *cases;
    struct tern_eval_run *teacher_run; /* answers of the teacher, case by case as mined */
    int *doc_first;                    /* (n_docs + 1) document d's cases: doc_case[doc_first[d] ..
                                          doc_first[d + 1]) */
    int *doc_case;
    int n_cases;                       /* cases with calls tied to a document */
    uint64_t *upcoming;                /* (n_docs) scratch for tern_trainer_upcoming_docs */
    float *doc_w;                      /* (n_docs) the weights handed to the trainer */
    bool mined;                        /* at least once in this process */
    char teacher[4096], dir[4096];
};

static int cmp_int(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static double median(int *v, int n)
{
    if (n <= 0) return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_int);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The document of file line `line`, or UINT64_MAX when that conversation was skipped. */
static uint64_t doc_of_line(const int64_t *lines, uint64_t n, int64_t line)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (lines[mid] < line) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && lines[lo] == line ? lo : UINT64_MAX;
}

tern_status cli_distill_length_open(const struct cli_distill_length_params *p,
                                    struct cli_distill_length **out)
{
    *out = NULL;
    struct cli_distill_length *m = calloc(1, sizeof *m);
    if (!m) return TERN_ERR_NOMEM;
    m->p = *p;
    m->recipe = *p->recipe;
    m->p.recipe = &m->recipe;
    snprintf(m->teacher, sizeof m->teacher, "%s", p->teacher);
    snprintf(m->dir, sizeof m->dir, "%s", p->dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/length-cases.jsonl", m->dir);
    tern_status st = tern_eval_cases_from_corpus(p->data, path, NULL);
    if (!st) st = tern_eval_set_load(path, &m->cases);
    if (!st) st = tern_eval_run_create(m->cases, &m->teacher_run);
    const int n = st ? 0 : tern_eval_set_count(m->cases);
    const uint64_t nd = p->n_docs;
    m->doc_first = calloc(nd + 1, sizeof *m->doc_first);
    m->doc_case = malloc((size_t)(n ? n : 1) * sizeof *m->doc_case);
    uint64_t *doc_of = malloc((size_t)(n ? n : 1) * sizeof *doc_of);
    m->upcoming = malloc((nd ? nd : 1) * sizeof *m->upcoming);
    m->doc_w = malloc((nd ? nd : 1) * sizeof *m->doc_w);
    if (!st && (!m->doc_first || !m->doc_case || !doc_of || !m->upcoming || !m->doc_w))
        st = TERN_ERR_NOMEM;
    /* cases with calls, grouped by document (cases come in file order, so documents ascend) */
    for (int i = 0; !st && i < n; i++) {
        doc_of[i] = UINT64_MAX;
        if (tern_eval_case_n_expected(m->cases, i) == 0) continue;
        doc_of[i] = doc_of_line(p->doc_lines, nd, atoll(tern_eval_case_id(m->cases, i)));
        if (doc_of[i] != UINT64_MAX) m->doc_first[doc_of[i] + 1]++;
    }
    for (uint64_t d = 0; !st && d < nd; d++) m->doc_first[d + 1] += m->doc_first[d];
    for (int i = 0; !st && i < n; i++)
        if (doc_of[i] != UINT64_MAX) m->doc_case[m->n_cases++] = i;
    free(doc_of);
    for (uint64_t d = 0; !st && d < nd; d++) m->doc_w[d] = 1.0f;
    if (st) {
        cli_distill_length_free(m);
        return st;
    }
    *out = m;
    return TERN_OK;
}

struct mining {
    int cases, longer, uncovered, weighted, no_answer;
    double student_p50, teacher_p50, weight_sum;
    char *answers; /* JSON array text: each answer's case id, tokens, coverage and weight */
    size_t len, cap;
};

static void add_answer(struct mining *g, const char *id, int s, int te, int cov, float w)
{
    char item[256];
    const int n = snprintf(item, sizeof item, "%s{\"id\":\"%s\",\"student\":%d,\"teacher\":%d,"
                           "\"covered\":%s,\"weight\":%.6g}", g->len ? "," : "", id, s, te,
                           cov < 0 ? "null" : cov ? "true" : "false", (double)w);
    if (n <= 0 || n >= (int)sizeof item) return;
    if (g->len + (size_t)n + 1 > g->cap) {
        const size_t cap = 2 * (g->len + (size_t)n + 1);
        char *a = realloc(g->answers, cap);
        if (!a) return; /* the list is a report; the weights do not depend on it */
        g->answers = a;
        g->cap = cap;
    }
    memcpy(g->answers + g->len, item, (size_t)n + 1);
    g->len += (size_t)n;
}

static tern_status answer(struct tern_eval_run *run, const char *model, const struct cli_distill_length *m,
                          const int *which, int n)
{
    if (n == 0) return TERN_OK;
    struct tern_eval_local_params lp = tern_eval_local_default_params();
    lp.constrained = true;
    lp.n_threads = m->p.threads;
    lp.n_ctx = m->p.n_ctx;
    return tern_eval_local(run, model, &lp, which, n, NULL, NULL);
}

static void print(const struct cli_distill_length *m, int step, const struct mining *g,
                  double scale, double secs)
{
    const double ratio = g->student_p50 > 0 && g->teacher_p50 > 0 ? g->student_p50 / g->teacher_p50 : -1;
    const double mean_w = g->weighted ? g->weight_sum / g->weighted : 1.0;
    if (m->p.json) {
        printf("{\"step\":%d,\"length_kd\":{\"cases\":%d,\"student_tokens_p50\":%g,"
               "\"teacher_tokens_p50\":%g,\"tokens_ratio\":%.4f,\"longer\":%d,\"uncovered\":%d,"
               "\"weighted\":%d,\"mean_weight\":%.4f,\"no_answer\":%d,\"latency_scale\":%g,"
               "\"seconds\":%.1f,\"answers\":[%s]}}\n", step, g->cases, g->student_p50,
               g->teacher_p50, ratio, g->longer, g->uncovered, g->weighted, mean_w, g->no_answer,
               scale, secs, g->answers ? g->answers : "");
        fflush(stdout);
    } else {
        fprintf(stderr, "step %d  length-aware KD: %d answers, tokens p50 %g (teacher %g, x%.2f), "
                "%d longer past the hinge, %d leave a required argument out, %d weighted (mean "
                "%.3f)%s, %.0f s\n", step, g->cases, g->student_p50, g->teacher_p50, ratio,
                g->longer, g->uncovered, g->weighted, mean_w,
                scale < 1.0 ? " (rail: weights scaled down)" : "", secs);
    }
}

tern_status cli_distill_length_step(struct cli_distill_length *m, struct tern_trainer *t,
                                    const struct tern_train_data *d, int step)
{
    const int every = m->recipe.length_kd_every;
    if (m->n_cases == 0 || (m->mined && step % every != 0)) return TERN_OK;
    const double t0 = cli_now_s();
    /* the documents of the next `every` steps: the step's tokens over the mean document's */
    const uint64_t n_tok = tern_train_data_n_tokens(d), nd = m->p.n_docs;
    const double mean = nd ? (double)n_tok / (double)nd : 1.0;
    uint64_t want = (uint64_t)ceil((double)every * (double)m->p.step_tokens / (mean > 1 ? mean : 1)) + 1;
    uint64_t n_up = 0;
    tern_status st = tern_trainer_upcoming_docs(t, d, want < nd ? want : nd, m->upcoming, &n_up);
    int k = 0;
    for (uint64_t u = 0; !st && u < n_up; u++) k += m->doc_first[m->upcoming[u] + 1] - m->doc_first[m->upcoming[u]];
    if (m->recipe.length_kd_docs > 0 && k > m->recipe.length_kd_docs) k = m->recipe.length_kd_docs;
    int *which = malloc((size_t)(k ? k : 1) * sizeof *which), *todo = malloc((size_t)(k ? k : 1) * sizeof *todo);
    int *ls = malloc((size_t)(k ? k : 1) * sizeof *ls), *lt = malloc((size_t)(k ? k : 1) * sizeof *lt);
    uint64_t *doc_j = malloc((size_t)(k ? k : 1) * sizeof *doc_j);
    struct tern_eval_run *srun = NULL;
    if (!st && !(which && todo && ls && lt && doc_j)) st = TERN_ERR_NOMEM;
    int n_which = 0, n_todo = 0;
    for (uint64_t u = 0; !st && u < n_up && n_which < k; u++) {
        const uint64_t doc = m->upcoming[u];
        for (int c = m->doc_first[doc]; c < m->doc_first[doc + 1] && n_which < k; c++) {
            doc_j[n_which] = doc;
            which[n_which] = m->doc_case[c];
            if (tern_eval_answer_tokens(m->teacher_run, which[n_which]) < 0) todo[n_todo++] = which[n_which];
            n_which++;
        }
        m->doc_w[doc] = 1.0f; /* judged afresh below */
    }
    k = n_which;
    /* the teacher's answers it has not given yet; then the student's, from a q8_0 copy */
    if (!st) st = answer(m->teacher_run, m->teacher, m, todo, n_todo);
    char f32[4200], q[4200];
    snprintf(f32, sizeof f32, "%s/length-student.f32.gguf", m->dir);
    snprintf(q, sizeof q, "%s/length-student.gguf", m->dir);
    /* (none of the coming documents calls a tool: nothing to answer, no student to export) */
    if (!st && k) st = tern_trainer_export(t, f32);
    if (!st && k) st = tern_quantize_model(f32, q, "q8_0", NULL);
    if (!st) st = tern_eval_run_create(m->cases, &srun);
    if (!st) st = answer(srun, q, m, which, k);
    remove(f32);
    remove(q);
    struct mining g = {0};
    int n_ls = 0, n_lt = 0;
    for (int j = 0; !st && j < k; j++) {
        const int i = which[j];
        const int s = tern_eval_answer_tokens(srun, i), te = tern_eval_answer_tokens(m->teacher_run, i);
        const int cov = tern_eval_answer_covers(srun, i);
        g.cases++;
        if (s < 0 || te < 0 || cov < 0) { /* a prompt past the context: no weight from it */
            g.no_answer++;
            add_answer(&g, tern_eval_case_id(m->cases, i), s, te, -1, 1.0f);
            continue;
        }
        ls[n_ls++] = s;
        lt[n_lt++] = te;
        g.longer += (double)(s - te) / (te > 0 ? te : 1) > m->recipe.length_kd_hinge;
        g.uncovered += !cov;
        const float w = tern_length_kd_weight(&m->recipe, s, te, cov == 1);
        if (w > m->doc_w[doc_j[j]]) m->doc_w[doc_j[j]] = w; /* a document weighs its heaviest answer */
        add_answer(&g, tern_eval_case_id(m->cases, i), s, te, cov, w);
        if (w > 1.0f) {
            g.weighted++;
            g.weight_sum += w;
        }
    }
    if (!st) st = tern_trainer_set_doc_weights(t, m->doc_w, m->p.n_docs);
    g.student_p50 = median(ls, n_ls);
    g.teacher_p50 = median(lt, n_lt);
    tern_eval_run_free(srun);
    free(doc_j);
    free(which);
    free(todo);
    free(ls);
    free(lt);
    if (!st) {
        m->mined = true;
        print(m, step, &g, tern_trainer_latency_rail(t, NAN, NULL) /* NaN: reads the scale */,
              cli_now_s() - t0);
    } else {
        fprintf(stderr, "tern distill: length-aware KD at step %d failed:\n", step);
    }
    free(g.answers);
    return st;
}

int cli_distill_length_cases(const struct cli_distill_length *m) { return m->n_cases; }

void cli_distill_length_free(struct cli_distill_length *m)
{
    if (!m) return;
    tern_eval_run_free(m->teacher_run);
    tern_eval_set_free(m->cases);
    free(m->doc_first);
    free(m->doc_case);
    free(m->upcoming);
    free(m->doc_w);
    free(m);
}
