/* bench_stats.c — the few statistics a speed report needs: percentiles with linear
 * interpolation (monotone in q, so p50 <= p90 <= p95 <= p99 by construction), medians, and the
 * relative median absolute deviation used as the report's noise estimate (robust to the odd
 * repetition a busy machine slows down, unlike a standard deviation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *x, int n, double q)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    if (n == 1) return x[0];
    double pos = q / 100.0 * (n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1) return x[n - 1];
    double f = pos - lo;
    return x[lo] + f * (x[lo + 1] - x[lo]);
}

double bench_median(double *x, int n) { return bench_percentile(x, n, 50); }

double bench_rel_mad(const double *x, int n)
{
    if (n < 2) return 0;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return 0;
    memcpy(t, x, (size_t)n * sizeof *t);
    double med = bench_median(t, n);
    for (int i = 0; i < n; i++) t[i] = fabs(x[i] - med);
    double mad = bench_median(t, n);
    free(t);
    return med != 0 ? mad / fabs(med) : 0;
}

double bench_rel_se_median(const double *x, int n)
{
    return n < 2 ? 1.0 : 1.25 * 1.4826 * bench_rel_mad(x, n) / sqrt((double)n);
}

cJSON *bench_pct_json(double *x, int n)
{
    cJSON *o = cJSON_CreateObject();
    static const char *keys[] = {"p50", "p90", "p95", "p99"};
    static const double qs[] = {50, 90, 95, 99};
    for (int k = 0; k < 4; k++) {
        if (n > 0) cJSON_AddNumberToObject(o, keys[k], bench_percentile(x, n, qs[k]));
        else cJSON_AddNullToObject(o, keys[k]);
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    if (n > 0) cJSON_AddNumberToObject(o, "mean", sum / n);
    else cJSON_AddNullToObject(o, "mean");
    cJSON_AddNumberToObject(o, "n", n);
    return o;
}
