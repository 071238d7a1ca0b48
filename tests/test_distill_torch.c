/* test_distill_torch.c — tern distill's loss and its gradient against PyTorch's autograd.
 *
 * Rows of random student logits, targets and row weights, and teacher signals made the way the
 * cache holds them (top-k ids by descending probability at temperature tau, their log-probs, the
 * tail mass) from random teacher logits, go through train_kd_row (src/train/distill_loss.c);
 * tests/distill_torch_ref.py computes the same loss from its definition in float64 (log_softmax,
 * gather, a masked logsumexp for the student's tail) and its gradient by autograd. Checked per
 * case: every row's KL and CE (relative 1e-5) and every gradient entry (max |diff| below 1e-5 of
 * the largest entry). Cases: a tail and two temperatures, k = V (no tail), CE only, KL only, a
 * peaked student (logits spread 12), and a teacher whose tail holds most of the mass.
 * Skips with a message when no python3 can import torch. */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/distill.h"

static const char *python;

static const char *find_python(void)
{
    static const char *cands[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", cands[i]);
        if (system(cmd) == 0) return cands[i];
    }
    return NULL;
}

static uint64_t rng = 12345;
static double unif(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double gauss(void)
{
    const double u = unif() + 1e-12, v = unif();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* The teacher signal of logits z (V) at tau: top-k (descending, ties to the lower id), tail. */
static void teacher_entry(const double *z, int V, int k, double tau, int32_t *ids, float *logp,
                          float *tail)
{
    double mx = z[0], sum = 0.0;
    for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < V; j++) sum += exp((z[j] - mx) / tau);
    bool *used = calloc((size_t)V, 1);
    double top = 0.0;
    for (int i = 0; i < k; i++) {
        int b = -1;
        for (int j = 0; j < V; j++)
            if (!used[j] && (b < 0 || z[j] > z[b])) b = j;
        used[b] = true;
        ids[i] = b;
        logp[i] = (float)((z[b] - mx) / tau - log(sum));
        top += exp((z[b] - mx) / tau);
    }
    double t = 0.0;
    for (int j = 0; j < V; j++)
        if (!used[j]) t += exp((z[j] - mx) / tau);
    *tail = (float)(t / sum);
    (void)top;
    free(used);
}

struct kcase {
    const char *name;
    int V, k, rows;
    float tau, w_kd, w_ce;
    double s_scale, t_scale; /* spread of student and teacher logits */
};

struct kresult {
    char dir[600];
    float *grad;   /* (rows, V) tern's gradient */
    double *kl, *ce;
    float *tail;
};

/* Write the case for the script and compute tern's answer. */
static void prepare_case(const struct kcase *kc, struct kresult *res)
{
    const int V = kc->V, k = kc->k, R = kc->rows;
    float *logits = malloc((size_t)R * V * 4), *weight = malloc((size_t)R * 4);
    float *logp = malloc((size_t)R * k * 4), *tail = malloc((size_t)R * 4);
    int32_t *target = malloc((size_t)R * 4), *ids = malloc((size_t)R * k * 4);
    double *z = malloc((size_t)V * 8);
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < V; j++) {
            logits[(size_t)r * V + j] = (float)(gauss() * kc->s_scale);
            z[j] = gauss() * kc->t_scale;
        }
        target[r] = (int32_t)(unif() * V);
        weight[r] = r % 3 == 2 ? 0.5f : 1.0f;
        teacher_entry(z, V, k, kc->tau, ids + (size_t)r * k, logp + (size_t)r * k, &tail[r]);
    }
    char *dir = res->dir, path[4600], cmd[4700];
    snprintf(res->dir, sizeof res->dir, "%s/kd-%s", test_tmpdir(), kc->name);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    assert_int_equal(system(cmd), 0);
    const double scale = 1.0 / R;
    snprintf(path, sizeof path, "%s/case.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"V\": %d, \"k\": %d, \"rows\": %d, \"tau\": %.9g, \"w_kd\": %.9g, \"w_ce\": %.9g, "
            "\"scale\": %.17g}\n", V, k, R, kc->tau, kc->w_kd, kc->w_ce, scale);
    fclose(f);
    snprintf(path, sizeof path, "%s/case.bin", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(logits, 4, (size_t)R * V, f);
    fwrite(target, 4, (size_t)R, f);
    fwrite(weight, 4, (size_t)R, f);
    fwrite(ids, 4, (size_t)R * k, f);
    fwrite(logp, 4, (size_t)R * k, f);
    fwrite(tail, 4, (size_t)R, f);
    fclose(f);

    /* tern: the gradient replaces the logits */
    float *scratch = malloc((size_t)V * 4);
    double *kl = malloc((size_t)R * 8), *ce = malloc((size_t)R * 8);
    for (int r = 0; r < R; r++) {
        struct kd_row o;
        train_kd_row(logits + (size_t)r * V, V, target[r], weight[r], ids + (size_t)r * k,
                     logp + (size_t)r * k, tail[r], k, kc->tau, kc->w_kd, kc->w_ce, scale, scratch, &o);
        kl[r] = o.kl;
        ce[r] = o.ce;
    }

    res->grad = logits;
    res->kl = kl;
    res->ce = ce;
    res->tail = tail;
    free(weight), free(logp), free(target), free(ids), free(z), free(scratch);
}

static void verify_case(const struct kcase *kc, struct kresult *res)
{
    const int V = kc->V, k = kc->k, R = kc->rows;
    const float *logits = res->grad, *tail = res->tail;
    const double *kl = res->kl, *ce = res->ce;
    char path[4600];
    snprintf(path, sizeof path, "%s/torch.bin", res->dir);
    size_t nb;
    double *ref = (double *)test_read_file(path, &nb);
    assert_non_null(ref);
    assert_int_equal(nb, ((size_t)R * V + 2 * (size_t)R) * 8);
    double gmax = 0.0, gerr = 0.0, klerr = 0.0, ceerr = 0.0, klmin = INFINITY, tmin = INFINITY;
    for (size_t i = 0; i < (size_t)R * V; i++) {
        gmax = fmax(gmax, fabs(ref[i]));
        gerr = fmax(gerr, fabs(ref[i] - logits[i]));
    }
    for (int r = 0; r < R; r++) {
        const double tk = ref[(size_t)R * V + r], tc = ref[(size_t)R * V + R + r];
        klerr = fmax(klerr, fabs(tk - kl[r]) / fmax(fabs(tk), 1e-6));
        ceerr = fmax(ceerr, fabs(tc - ce[r]) / fmax(fabs(tc), 1e-6));
        klmin = fmin(klmin, tk);
        tmin = fmin(tmin, tail[r]);
    }
    print_message("%-9s V %d k %2d tau %.1f: max |grad tern - torch| %.2e of max %.2e; KL rel %.1e, "
                  "CE rel %.1e (min KL %.3g, min teacher tail %.3g)\n", kc->name, V, k, kc->tau,
                  gerr, gmax, klerr, ceerr, klmin, tmin);
    assert_true(gmax > 0.0);
    assert_true(gerr <= 1e-5 * gmax);
    assert_true(klerr < 1e-5);
    assert_true(ceerr < 1e-5);
    free(ref), free(res->grad), free(res->kl), free(res->ce), free(res->tail);
}

static void test_cases(void **state)
{
    (void)state;
    static const struct kcase cases[] = {
        {"tail_t2", 64, 8, 12, 2.0f, 1.0f, 0.5f, 2.0, 3.0},
        {"tail_t1", 64, 8, 12, 1.0f, 1.0f, 0.5f, 2.0, 3.0},
        {"no_tail", 40, 40, 6, 1.5f, 0.7f, 0.3f, 2.0, 2.0},
        {"ce_only", 64, 4, 6, 1.0f, 0.0f, 1.0f, 2.0, 2.0},
        {"kl_only", 64, 16, 6, 4.0f, 1.0f, 0.0f, 2.0, 2.0},
        {"peaked", 64, 8, 6, 1.0f, 1.0f, 0.5f, 12.0, 3.0},
        {"flat_t", 200, 4, 6, 1.0f, 1.0f, 0.5f, 1.0, 0.2},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    if (!python) python = find_python();
    if (!python)
        TEST_SKIP("python3 -c 'import torch' fails: install python3-torch (scripts/install-deps.sh) "
                  "to compare the distillation loss with PyTorch\n");
    static struct kresult res[N];
    char cmd[8192];
    int at = snprintf(cmd, sizeof cmd, "%s %s/tests/distill_torch_ref.py check", python,
                      test_source_dir());
    for (int i = 0; i < N; i++) {
        prepare_case(&cases[i], &res[i]);
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " %s", res[i].dir);
    }
    snprintf(cmd + at, sizeof cmd - (size_t)at, " 2>&1");
    char out[4096];
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s failed:\n%s", cmd, out);
    for (int i = 0; i < N; i++) verify_case(&cases[i], &res[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
