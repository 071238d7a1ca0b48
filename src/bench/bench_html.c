/* bench_html.c — a report as one self-contained HTML page: inline CSS and SVG, no script, no
 * network, so it opens anywhere and can be attached to a CI run. Charts (each an <svg> with a
 * stable id the test looks for): TTFT and TPS distributions (histograms of every repetition of
 * every prompt, p50/p95 marked), per prompt-length bucket TTFT and TPS p50, and the residency
 * breakdown per op class (optimized kernels in one colour, scalar in another). Tables give the
 * metrics, hardware, build and fingerprints. All text from the report is HTML-escaped. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "util/error.h"

struct sb {
    char *p;
    size_t n, cap;
    bool oom;
};

static void put(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct sb *s, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (s->p && s->n + (size_t)k < s->cap) { s->n += (size_t)k; return; }
        size_t cap = (s->cap + (size_t)k + 1) * 2;
        char *g = realloc(s->p, cap);
        if (!g) { s->oom = true; return; }
        s->p = g;
        s->cap = cap;
    }
}

static void esc(struct sb *s, const char *t)
{
    for (; t && *t; t++) {
        switch (*t) {
        case '<': put(s, "&lt;"); break;
        case '>': put(s, "&gt;"); break;
        case '&': put(s, "&amp;"); break;
        case '"': put(s, "&quot;"); break;
        default: put(s, "%c", *t);
        }
    }
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double num(const cJSON *o, const char *k) { const cJSON *v = get(o, k); return cJSON_IsNumber(v) ? v->valuedouble : NAN; }

enum { W = 640, H = 220, ML = 56, MR = 16, MT = 24, MB = 40 };

/* Histogram of the samples x[0..n) with p50 and p95 lines. */
static void histogram(struct sb *s, const char *id, const char *title, const char *unit, double *x, int n,
                      double p50, double p95)
{
    put(s, "<h3>%s</h3>\n<svg id=\"%s\" class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>%s</title>\n", title, id, W, H, W, H, title);
    if (n == 0) {
        put(s, "<text x=\"%d\" y=\"%d\">no samples</text></svg>\n", ML, H / 2);
        return;
    }
    double lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) { lo = fmin(lo, x[i]); hi = fmax(hi, x[i]); }
    if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
    enum { BINS = 24 };
    int cnt[BINS] = {0}, top = 1;
    for (int i = 0; i < n; i++) {
        int b = (int)((x[i] - lo) / (hi - lo) * BINS);
        if (b >= BINS) b = BINS - 1;
        if (++cnt[b] > top) top = cnt[b];
    }
    const double pw = W - ML - MR, ph = H - MT - MB, bw = pw / BINS;
    put(s, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", ML, H - MB, W - MR, H - MB);
    for (int b = 0; b < BINS; b++) {
        double h = ph * cnt[b] / top;
        put(s, "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4a7fb5\">"
            "<title>%.3g-%.3g %s: %d</title></rect>\n", ML + b * bw + 1, H - MB - h, bw - 2, h,
            lo + b * (hi - lo) / BINS, lo + (b + 1) * (hi - lo) / BINS, unit, cnt[b]);
    }
    const double qs[2] = {p50, p95};
    const char *names[2] = {"p50", "p95"}, *colors[2] = {"#2a9d3a", "#d1495b"};
    for (int q = 0; q < 2; q++) {
        if (!isfinite(qs[q])) continue;
        double xp = ML + (qs[q] - lo) / (hi - lo) * pw;
        bool right = xp > W - MR - 90; /* label left of the line near the right edge */
        put(s, "<line class=\"marker\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>"
            "<text x=\"%.1f\" y=\"%d\" fill=\"%s\" font-size=\"11\" text-anchor=\"%s\">%s %.4g</text>\n", xp, MT, xp,
            H - MB, colors[q], right ? xp - 3 : xp + 3, MT + 10 + 12 * q, colors[q], right ? "end" : "start", names[q], qs[q]);
    }
    put(s, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%.4g</text><text x=\"%d\" y=\"%d\" font-size=\"11\" "
        "text-anchor=\"end\">%.4g %s</text><text x=\"4\" y=\"%d\" font-size=\"11\">%d</text>"
        "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s (%d samples)</text></svg>\n",
        ML, H - MB + 14, lo, W - MR, H - MB + 14, hi, unit, MT + 8, top, W / 2, H - 6, unit, n);
}

/* Bars of one value per label. */
static void bars(struct sb *s, const char *id, const char *title, const char *unit, const char **labels,
                 const double *v, const char **notes, int n)
{
    put(s, "<h3>%s</h3>\n<svg id=\"%s\" class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>%s</title>\n", title, id, W, H, W, H, title);
    double top = 0;
    for (int i = 0; i < n; i++) if (isfinite(v[i])) top = fmax(top, v[i]);
    if (top <= 0) top = 1;
    const double pw = W - ML - MR, ph = H - MT - MB, bw = pw / (n ? n : 1);
    put(s, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", ML, H - MB, W - MR, H - MB);
    for (int i = 0; i < n; i++) {
        double cx = ML + i * bw + bw / 2;
        if (isfinite(v[i])) {
            double h = ph * v[i] / top;
            put(s, "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e09f3e\">"
                "<title>%s: %.4g %s</title></rect><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                "text-anchor=\"middle\">%.3g</text>\n", cx - bw * 0.3, H - MB - h, bw * 0.6, h, labels[i], v[i], unit,
                cx, H - MB - h - 3, v[i]);
        }
        put(s, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>"
            "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\" fill=\"#666\">%s</text>\n",
            cx, H - MB + 14, labels[i], cx, H - MB + 27, notes[i]);
    }
    put(s, "<text x=\"4\" y=\"%d\" font-size=\"11\">%s</text></svg>\n", MT - 8, unit);
}

static void residency(struct sb *s, const cJSON *res)
{
    const cJSON *ops = get(res, "ops"), *e;
    int n = cJSON_GetArraySize(ops);
    int h = MT + 18 * (n ? n : 1) + 20;
    put(s, "<h3>Fast-path residency: %.1f %% of forward time in optimized kernels, %g scalar fallbacks</h3>\n"
        "<svg id=\"chart-residency\" class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>residency per op class</title>\n",
        num(res, "share") * 100, num(res, "scalar_fallbacks"), W, h, W, h);
    int i = 0;
    const double x0 = 170, pw = W - x0 - 70;
    cJSON_ArrayForEach(e, ops) {
        double share = num(e, "share");
        bool fast = cJSON_IsTrue(get(e, "optimized"));
        double y = MT + 18 * i++;
        put(s, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", x0 - 6, y + 12);
        esc(s, cJSON_GetStringValue(get(e, "op")));
        put(s, " (");
        esc(s, cJSON_GetStringValue(get(e, "kernel")));
        put(s, ")</text><rect class=\"bar\" x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"14\" fill=\"%s\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%.1f %%</text>\n", x0, y, fmax(pw * share, 1),
            fast ? "#2a9d3a" : "#d1495b", x0 + pw * share + 4, y + 12, share * 100);
    }
    put(s, "<text x=\"%.0f\" y=\"%d\" font-size=\"10\" fill=\"#666\">green: optimized kernel; red: scalar</text></svg>\n",
        x0, h - 4);
}

static void kv_table(struct sb *s, const char *title, const cJSON *o)
{
    const cJSON *e;
    put(s, "<h2>%s</h2>\n<table>\n", title);
    cJSON_ArrayForEach(e, o) {
        if (cJSON_IsObject(e) || cJSON_IsArray(e)) {
            if (!cJSON_IsArray(e)) continue;
        }
        put(s, "<tr><th>");
        esc(s, e->string);
        put(s, "</th><td>");
        char *t = cJSON_IsString(e) ? NULL : cJSON_PrintUnformatted(e);
        esc(s, t ? t : e->valuestring);
        free(t);
        put(s, "</td></tr>\n");
    }
    put(s, "</table>\n");
}

static int collect(const cJSON *prompts, const char *key, double **out)
{
    int cap = 0, n = 0;
    double *x = NULL;
    const cJSON *p, *v;
    cJSON_ArrayForEach(p, prompts) {
        cJSON_ArrayForEach(v, get(get(p, "samples"), key)) {
            if (n == cap) {
                double *g = realloc(x, (size_t)(cap = cap ? cap * 2 : 64) * sizeof *g);
                if (!g) break;
                x = g;
            }
            x[n++] = v->valuedouble;
        }
    }
    *out = x;
    return n;
}

tern_status tern_bench_report_html(const char *report_json, const char *name, char **html)
{
    *html = NULL;
    cJSON *r;
    tern_status st = bench_report_parse(report_json, strlen(report_json), name, &r);
    if (st) return st;
    struct sb s = {0};
    const cJSON *met = get(r, "metrics"), *hw = get(r, "hardware");
    put(&s, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tern bench report</title>\n"
        "<style>body{font:14px sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:12px;overflow-wrap:anywhere}th{background:#f4f4f4}"
        "svg.chart{background:#fafafa;border:1px solid #ddd}</style></head><body>\n<h1>tern bench report</h1>\n<p>");
    esc(&s, cJSON_GetStringValue(get(get(r, "model"), "path")));
    put(&s, " on ");
    esc(&s, cJSON_GetStringValue(get(get(r, "suite"), "path")));
    put(&s, " &middot; ");
    esc(&s, cJSON_GetStringValue(get(hw, "cpu_model")));
    put(&s, " &middot; profile <b>");
    esc(&s, cJSON_GetStringValue(get(get(hw, "profile"), "key")));
    put(&s, "</b> &middot; ");
    esc(&s, cJSON_GetStringValue(get(r, "created")));
    put(&s, " &middot; determinism: %s</p>\n", cJSON_IsTrue(get(get(r, "determinism"), "identical_tokens"))
        ? "identical tokens in every repetition" : "<b>repetitions differ</b>");
    put(&s, "<h2>Metrics (percentiles over prompts of per-prompt medians)</h2>\n<table><tr><th>metric</th>"
        "<th>p50</th><th>p90</th><th>p95</th><th>p99</th></tr>\n");
    const cJSON *m;
    cJSON_ArrayForEach(m, met) {
        put(&s, "<tr><th>");
        esc(&s, m->string);
        put(&s, "</th>");
        static const char *const pk[] = {"p50", "p90", "p95", "p99"};
        for (int k = 0; k < 4; k++) {
            double v = num(m, pk[k]);
            if (isfinite(v)) put(&s, fabs(v) >= 1000 ? "<td>%.0f</td>" : "<td>%.4g</td>", v);
            else put(&s, "<td>-</td>");
        }
        put(&s, "</tr>\n");
    }
    put(&s, "</table>\n<h2>Charts</h2>\n");
    const cJSON *prompts = get(r, "prompts");
    double *x;
    int n = collect(prompts, "ttft_ms", &x);
    histogram(&s, "chart-ttft", "TTFT distribution (every repetition of every prompt)", "ms", x, n,
              num(get(met, "ttft_ms"), "p50"), num(get(met, "ttft_ms"), "p95"));
    free(x);
    n = collect(prompts, "tps", &x);
    histogram(&s, "chart-tps", "Steady-state tokens/s distribution", "tok/s", x, n, num(get(met, "tps"), "p50"),
              num(get(met, "tps"), "p95"));
    free(x);
    const char *labels[8], *notes[8];
    char notebuf[8][32];
    double ttft[8], tps[8];
    int nb = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, get(r, "buckets")) {
        if (nb == 8) break;
        labels[nb] = cJSON_GetStringValue(get(b, "bucket"));
        if (!labels[nb]) labels[nb] = "?";
        snprintf(notebuf[nb], sizeof notebuf[nb], "%g prompts", num(b, "prompts"));
        notes[nb] = notebuf[nb];
        ttft[nb] = num(get(b, "ttft_ms"), "p50");
        tps[nb] = num(get(b, "tps"), "p50");
        nb++;
    }
    bars(&s, "chart-buckets-ttft", "TTFT p50 per prompt-length bucket (tokens)", "ms", labels, ttft, notes, nb);
    bars(&s, "chart-buckets-tps", "Tokens/s p50 per prompt-length bucket (tokens)", "tok/s", labels, tps, notes, nb);
    residency(&s, get(r, "residency"));
    kv_table(&s, "Hardware", hw);
    kv_table(&s, "Build", get(r, "build"));
    kv_table(&s, "Fingerprints (SHA-256)", get(r, "fingerprints"));
    kv_table(&s, "KV cache", get(r, "kv_cache"));
    kv_table(&s, "Energy", get(r, "energy"));
    kv_table(&s, "Settings", get(r, "settings"));
    put(&s, "</body></html>\n");
    cJSON_Delete(r);
    if (s.oom) {
        free(s.p);
        return tern_fail(TERN_ERR_NOMEM, "html: out of memory");
    }
    *html = s.p;
    return TERN_OK;
}
