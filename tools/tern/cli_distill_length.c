/* cli_distill_length.c — seed phase 1's length-aware KD for tern distill: the student's own
 * answers decide which documents weigh more.
 *
 * At open, every assistant message of the training conversations that calls tools becomes a
 * tern eval case (tern_eval_cases_from_corpus: the messages before it, the tools, the calls it
 * makes), tied to its training document by the file line both count. The cases are visited in
 * a seeded order. Every length_kd_every steps (and at a run's first step, resumed or not) the
 * next length_kd_docs of them are answered, greedily and constrained as tern eval answers:
 *   - by the teacher, once per case (the teacher does not change; its answers are remembered);
 *   - by the student as it is now, exported and quantized to q8_0 for the purpose.
 * Each answer's weight is tern_length_kd_weight(recipe, student tokens, teacher tokens, covered),
 * covered meaning the student's calls carry every required argument the case expects
 * (tern_eval_answer_covers: the scores' lax rule). The weight replaces that document's earlier
 * one; the rest keep theirs, so the weights build up over the run. One line per mining says what
 * was found (JSON with --json).
 *
 * Not saved in checkpoints: a resumed run mines at its first step, so it starts with that
 * mining's weights only. The teacher's remembered answers are lost with the process too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_distill_length.h"
#include "tern_tools.h"

struct mined_case {
    int case_index;   /* in the cases set */
    uint64_t doc;     /* the training document it came from */
};

struct cli_distill_length {
    struct cli_distill_length_params p;
    struct tern_distill_recipe recipe;
    struct tern_eval_set *cases;
    struct tern_eval_run *teacher_run; /* answers of the teacher, case by case as mined */
    struct mined_case *order;          /* the cases with calls, in the visiting order */
    int n_order;
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
    m->order = calloc((size_t)(n ? n : 1), sizeof *m->order);
    m->doc_w = malloc((size_t)(p->n_docs ? p->n_docs : 1) * sizeof *m->doc_w);
    if (!st && (!m->order || !m->doc_w)) st = TERN_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        if (tern_eval_case_n_expected(m->cases, i) == 0) continue;
        const uint64_t doc = doc_of_line(p->doc_lines, p->n_docs, atoll(tern_eval_case_id(m->cases, i)));
        if (doc == UINT64_MAX) continue; /* its conversation was skipped (too long, malformed) */
        m->order[m->n_order++] = (struct mined_case){i, doc};
    }
    for (uint64_t d = 0; d < p->n_docs; d++) m->doc_w[d] = 1.0f;
    /* a seeded Fisher-Yates shuffle (splitmix64), so minings sample the whole data evenly */
    uint64_t x = p->seed ^ 0x9e3779b97f4a7c15ull;
    for (int i = m->n_order - 1; i > 0; i--) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const int j = (int)(z % (uint64_t)(i + 1));
        const struct mined_case tmp = m->order[i];
        m->order[i] = m->order[j];
        m->order[j] = tmp;
    }
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

tern_status cli_distill_length_step(struct cli_distill_length *m, struct tern_trainer *t, int step)
{
    const int every = m->recipe.length_kd_every;
    if (m->mined && step % every != 0) return TERN_OK;
    const double t0 = cli_now_s();
    const int k = m->recipe.length_kd_docs < m->n_order ? m->recipe.length_kd_docs : m->n_order;
    if (m->n_order == 0) return TERN_OK;
    const long long first = (long long)(step / every) * k % m->n_order;
    int *which = malloc((size_t)k * sizeof *which), *todo = malloc((size_t)k * sizeof *todo);
    int *ls = malloc((size_t)k * sizeof *ls), *lt = malloc((size_t)k * sizeof *lt);
    struct tern_eval_run *srun = NULL;
    tern_status st = which && todo && ls && lt ? TERN_OK : TERN_ERR_NOMEM;
    int n_todo = 0;
    for (int j = 0; !st && j < k; j++) {
        which[j] = m->order[(first + j) % m->n_order].case_index;
        if (tern_eval_answer_tokens(m->teacher_run, which[j]) < 0) todo[n_todo++] = which[j];
    }
    /* the teacher's answers it has not given yet; then the student's, from a q8_0 copy */
    if (!st) st = answer(m->teacher_run, m->teacher, m, todo, n_todo);
    char f32[4200], q[4200];
    snprintf(f32, sizeof f32, "%s/length-student.f32.gguf", m->dir);
    snprintf(q, sizeof q, "%s/length-student.gguf", m->dir);
    if (!st) st = tern_trainer_export(t, f32);
    if (!st) st = tern_quantize_model(f32, q, "q8_0", NULL);
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
        m->doc_w[m->order[(first + j) % m->n_order].doc] = w;
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

int cli_distill_length_cases(const struct cli_distill_length *m) { return m->n_order; }

void cli_distill_length_free(struct cli_distill_length *m)
{
    if (!m) return;
    tern_eval_run_free(m->teacher_run);
    tern_eval_set_free(m->cases);
    free(m->order);
    free(m->doc_w);
    free(m);
}
