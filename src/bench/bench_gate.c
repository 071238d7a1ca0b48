/* bench_gate.c — tern gate: is the current report slower than the blessed baseline beyond the
 * limits of the baseline's hardware profile? Gated (docs/bench-and-gate.md "Speed governance"):
 *   TTFT p50 and p95 may grow by at most gate.ttft_regress_pct (5 %),
 *   TPS p50 and p95 may fall by at most gate.tps_regress_pct (5 %),
 *   TTFA p95 may be at most gate.ttfa_p95_max_tokens (25 tokens; n/a when neither report has a
 *     valid call, a failure when the baseline had one and the current run has none),
 *   fast-path residency may fall by at most gate.residency_drop_points (10 points),
 *   determinism: a baseline with identical repetitions requires the current run's to be.
 * TTFT is gated after allowing for the machine's speed during each report (the reports'
 * machine_speed probes, bench_calib.c: prefill is compute-bound, so on a machine 4 % slower than
 * at the baseline it is expected to take 1 / 0.96 the time), unless --raw, the probes differ or
 * are missing, or the machine moved by more than 20 %. TPS (decode, memory-bound) is gated as
 * measured. Reports from different hardware profiles (hardware.profile.key) are not compared unless
 * allowed; reports of different suites never are. The other metrics and the fingerprints are
 * printed for the reader, not gated. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "util/error.h"

static const cJSON *at(const cJSON *o, const char *a, const char *b, const char *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    if (c) v = cJSON_GetObjectItemCaseSensitive(v, c);
    return v;
}

struct table {
    FILE *out;
    int failed;
};

static void row(struct table *t, const char *metric, const cJSON *base, const cJSON *cur,
                const char *change, const char *limit, const char *verdict)
{
    if (!t->out) return;
    char b[32] = "null", c[32] = "null";
    /* 4 significant digits, never an exponent for the magnitudes a report holds */
    if (cJSON_IsNumber(base)) snprintf(b, sizeof b, fabs(base->valuedouble) >= 1000 ? "%.0f" : "%.4g", base->valuedouble);
    if (cJSON_IsNumber(cur)) snprintf(c, sizeof c, fabs(cur->valuedouble) >= 1000 ? "%.0f" : "%.4g", cur->valuedouble);
    fprintf(t->out, "| %-22s | %10s | %10s | %-21s | %-12s | %-7s |\n", metric, b, c, change, limit, verdict);
}

/* A relative limit: sign +1 = growth is the regression (latency), -1 = a fall is (throughput).
 * machine = current / baseline machine speed (1: no adjustment; only TTFT gets one): a machine
 * running at 0.95 of the baseline's speed is expected to take 1 / 0.95 the time, so the change
 * gated is the one left after that; the raw change is shown beside it. */
static void relative(struct table *t, const char *name, const cJSON *base, const cJSON *cur,
                     double limit_pct, int sign, double machine)
{
    char change[48] = "n/a", limit[32];
    snprintf(limit, sizeof limit, "%s%g %%", sign > 0 ? "<= +" : ">= -", limit_pct);
    if (!cJSON_IsNumber(base) || !cJSON_IsNumber(cur) || base->valuedouble <= 0) {
        row(t, name, base, cur, change, limit, "n/a");
        return;
    }
    double raw = (cur->valuedouble / base->valuedouble - 1) * 100;
    double pct = ((sign > 0 ? cur->valuedouble * machine : cur->valuedouble / machine) / base->valuedouble - 1) * 100;
    if (machine != 1) snprintf(change, sizeof change, "%+.1f %% (raw %+.1f)", pct, raw);
    else snprintf(change, sizeof change, "%+.1f %%", pct);
    bool bad = sign > 0 ? pct > limit_pct : pct < -limit_pct;
    t->failed += bad;
    row(t, name, base, cur, change, limit, bad ? "FAIL" : "ok");
}

static void info(struct table *t, const char *name, const cJSON *base, const cJSON *cur)
{
    char change[32] = "n/a";
    if (cJSON_IsNumber(base) && cJSON_IsNumber(cur) && base->valuedouble > 0)
        snprintf(change, sizeof change, "%+.1f %%", (cur->valuedouble / base->valuedouble - 1) * 100);
    row(t, name, base, cur, change, "-", "info");
}

/* How much faster (> 1) or slower the machine was during the current run than during the
 * baseline's, by the reports' machine-speed probes (bench_calib.c); 1 when they cannot be
 * compared, with the reason in why. Beyond +-20 % the machine is in another state than any
 * proportional allowance can be trusted for, and the raw numbers are gated. */
#define MACHINE_ADJUST_MAX 0.20
static double machine_ratio(const cJSON *base, const cJSON *cur, bool raw, char *why, size_t n)
{
    const cJSON *mb = cJSON_GetObjectItemCaseSensitive(base, "machine_speed");
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(cur, "machine_speed");
    const cJSON *gb = at(mb, "gops", NULL, NULL), *gc = at(mc, "gops", NULL, NULL);
    if (!cJSON_IsNumber(gb) || !cJSON_IsNumber(gc)) {
        snprintf(why, n, "not measured in %s: gated as measured", cJSON_IsNumber(gb) ? "the current report" : "the baseline");
        return 1;
    }
    const char *pb = at(mb, "method", NULL, NULL)->valuestring, *pc = at(mc, "method", NULL, NULL)->valuestring;
    const double m = gc->valuedouble / gb->valuedouble;
    int k = snprintf(why, n, "baseline %.2f GOP/s, current %.2f GOP/s (x%.3f)", gb->valuedouble, gc->valuedouble, m);
    if (k < 0 || (size_t)k >= n) k = 0;
    if (strcmp(pb, pc)) {
        snprintf(why + k, n - (size_t)k, "; the probes differ ('%s' vs '%s'): gated as measured", pb, pc);
        return 1;
    }
    if (raw) {
        snprintf(why + k, n - (size_t)k, "; --raw: gated as measured");
        return 1;
    }
    if (fabs(m - 1) > MACHINE_ADJUST_MAX) {
        snprintf(why + k, n - (size_t)k, ": more than %.0f %% apart, too far to allow for; gated as measured  <-- "
                 "re-run when the machine is in its usual state", MACHINE_ADJUST_MAX * 100);
        return 1;
    }
    snprintf(why + k, n - (size_t)k, ": TTFT changes are allowed for it (the raw change beside; --raw "
             "gates them as measured; TPS always is)");
    return m;
}

static tern_status limit_of(const cJSON *base, const char *key, const char *path, double *out)
{
    const cJSON *v = at(base, "hardware", "profile", "gate");
    v = cJSON_GetObjectItemCaseSensitive(v, key);
    if (!cJSON_IsNumber(v))
        return tern_fail(TERN_ERR_FORMAT, "%s: hardware.profile.gate.%s is missing or not a number", path, key);
    *out = v->valuedouble;
    return TERN_OK;
}

tern_status tern_bench_gate(const char *baseline_path, const char *current_path,
                            const struct tern_bench_gate_params *p, enum tern_gate_verdict *verdict)
{
    cJSON *base = NULL, *cur = NULL;
    tern_status st = bench_report_load(baseline_path, &base);
    if (!st) st = bench_report_load(current_path, &cur);
    struct bench_gate_limits L = bench_gate_default_limits();
    if (!st) st = limit_of(base, "ttft_regress_pct", baseline_path, &L.ttft_regress_pct);
    if (!st) st = limit_of(base, "tps_regress_pct", baseline_path, &L.tps_regress_pct);
    if (!st) st = limit_of(base, "ttfa_p95_max_tokens", baseline_path, &L.ttfa_p95_max_tokens);
    if (!st) st = limit_of(base, "residency_drop_points", baseline_path, &L.residency_drop_points);
    if (st) {
        cJSON_Delete(base);
        cJSON_Delete(cur);
        return st;
    }
    FILE *out = p->out;
    const char *kb = at(base, "hardware", "profile", "key")->valuestring;
    const char *kc = at(cur, "hardware", "profile", "key")->valuestring;
    bool cross = strcmp(kb, kc) != 0;
    const char *sb = at(base, "fingerprints", "suite", NULL)->valuestring;
    const char *sc = at(cur, "fingerprints", "suite", NULL)->valuestring;
    if (out) {
        fprintf(out, "baseline: %s (%s)\ncurrent:  %s (%s)\n", baseline_path, kb, current_path, kc);
    }
    if (strcmp(sb, sc)) {
        if (out) fprintf(out, "REFUSED: the reports ran different suites (fingerprints.suite %.12s... vs %.12s...): "
                         "their numbers measure different prompts\n", sb, sc);
        *verdict = TERN_GATE_REFUSED;
        cJSON_Delete(base);
        cJSON_Delete(cur);
        return TERN_OK;
    }
    if (cross && !p->allow_cross_hw) {
        if (out) fprintf(out, "REFUSED: different hardware profiles (%s vs %s): speed on one machine says nothing "
                         "about another; bless a baseline on this machine, or pass --allow-cross-hw to compare anyway\n", kb, kc);
        *verdict = TERN_GATE_REFUSED;
        cJSON_Delete(base);
        cJSON_Delete(cur);
        return TERN_OK;
    }
    if (cross && out) fprintf(out, "WARNING: comparing across hardware profiles (--allow-cross-hw)\n");
    char why[512];
    const double m = machine_ratio(base, cur, p->raw, why, sizeof why);
    if (out) fprintf(out, "machine speed: %s\n", why);
    struct table t = {.out = out};
    if (out) fprintf(out, "| %-22s | %10s | %10s | %-21s | %-12s | %-7s |\n|%s|%s|%s|%s|%s|%s|\n", "metric", "baseline",
                     "current", "change", "limit", "verdict", "------------------------", "------------",
                     "------------", "-----------------------", "--------------", "---------");
    relative(&t, "ttft_ms p50", at(base, "metrics", "ttft_ms", "p50"), at(cur, "metrics", "ttft_ms", "p50"), L.ttft_regress_pct, +1, m);
    relative(&t, "ttft_ms p95", at(base, "metrics", "ttft_ms", "p95"), at(cur, "metrics", "ttft_ms", "p95"), L.ttft_regress_pct, +1, m);
    /* decode streams the weights from memory: the L1 probe does not predict it (over 8 reports
     * of one build, TPS p95's spread grew from 1.9 % to 3.4 % when divided by it), so TPS is
     * gated as measured */
    relative(&t, "tps p50", at(base, "metrics", "tps", "p50"), at(cur, "metrics", "tps", "p50"), L.tps_regress_pct, -1, 1);
    relative(&t, "tps p95", at(base, "metrics", "tps", "p95"), at(cur, "metrics", "tps", "p95"), L.tps_regress_pct, -1, 1);
    {
        const cJSON *b = at(base, "metrics", "ttfa_tokens", "p95"), *c = at(cur, "metrics", "ttfa_tokens", "p95");
        char limit[32];
        snprintf(limit, sizeof limit, "<= %g tok", L.ttfa_p95_max_tokens);
        if (cJSON_IsNumber(c)) {
            bool bad = c->valuedouble > L.ttfa_p95_max_tokens;
            t.failed += bad;
            char ch[32] = "n/a";
            if (cJSON_IsNumber(b)) snprintf(ch, sizeof ch, "%+.0f tok", c->valuedouble - b->valuedouble);
            row(&t, "ttfa_tokens p95", b, c, ch, limit, bad ? "FAIL" : "ok");
        } else if (cJSON_IsNumber(b)) {
            t.failed++;
            row(&t, "ttfa_tokens p95", b, c, "no call", limit, "FAIL");
        } else {
            row(&t, "ttfa_tokens p95", b, c, "n/a", limit, "n/a");
        }
    }
    {
        const cJSON *b = at(base, "residency", "share", NULL), *c = at(cur, "residency", "share", NULL);
        double drop = (b->valuedouble - c->valuedouble) * 100;
        char ch[32], limit[32];
        snprintf(ch, sizeof ch, "%+.1f pt", -drop);
        snprintf(limit, sizeof limit, ">= -%g pt", L.residency_drop_points);
        bool bad = drop > L.residency_drop_points;
        t.failed += bad;
        row(&t, "residency share", b, c, ch, limit, bad ? "FAIL" : "ok");
    }
    {
        bool b = cJSON_IsTrue(at(base, "determinism", "identical_tokens", NULL));
        bool c = cJSON_IsTrue(at(cur, "determinism", "identical_tokens", NULL));
        bool bad = b && !c;
        t.failed += bad;
        if (out) fprintf(out, "| %-22s | %10s | %10s | %-21s | %-12s | %-7s |\n", "identical repetitions",
                         b ? "yes" : "no", c ? "yes" : "no", "", "yes", bad ? "FAIL" : "ok");
    }
    static const char *const infos[][2] = {{"template_ms", "p50"}, {"tokenizer_ms", "p50"}, {"prefill_ms", "p50"},
                                           {"first_step_ms", "p50"}, {"ttft_ms", "p99"}, {"ttfa_ms", "p95"}};
    for (size_t i = 0; i < sizeof infos / sizeof *infos; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s %s", infos[i][0], infos[i][1]);
        info(&t, name, at(base, "metrics", infos[i][0], infos[i][1]), at(cur, "metrics", infos[i][0], infos[i][1]));
    }
    info(&t, "scalar_fallbacks", at(base, "residency", "scalar_fallbacks", NULL), at(cur, "residency", "scalar_fallbacks", NULL));
    if (out) {
        /* the noise each report measured in itself: a limit near it cannot be trusted. A report
         * that ran rounds until a noise target was met is judged by that (its medians are pinned
         * whatever single rounds did); one with a fixed count by how far its rounds' p50 moved. */
        static const char *const nk[] = {"ttft_ms", "tps"};
        for (int i = 0; i < 2; i++) {
            const cJSON *nb = at(base, "noise", nk[i], "round_spread"), *nc = at(cur, "noise", nk[i], "round_spread");
            double lim = i == 0 ? L.ttft_regress_pct : L.tps_regress_pct;
            bool noisy = false;
            for (int r = 0; r < 2; r++) {
                const cJSON *rep = r ? cur : base, *spread = r ? nc : nb;
                if (cJSON_IsNumber(at(rep, "noise", "target_rel_se", NULL))) noisy |= !cJSON_IsTrue(at(rep, "noise", "target_met", NULL));
                else noisy |= cJSON_IsNumber(spread) && spread->valuedouble * 100 > lim / 2;
            }
            fprintf(out, "noise %s: p50 moved %.1f %% (baseline) / %.1f %% (current) between rounds%s\n", nk[i],
                    cJSON_IsNumber(nb) ? nb->valuedouble * 100 : NAN, cJSON_IsNumber(nc) ? nc->valuedouble * 100 : NAN,
                    noisy ? "  <-- noisy: a noise target not met, or rounds moving by over half the limit; use more "
                            "repetitions or a quieter machine" : "");
        }
        for (int i = 0; i < 2; i++) {
            const cJSON *rep = i ? cur : base;
            const cJSON *share = at(rep, "noise", "cpu_share", NULL), *la = at(rep, "noise", "loadavg_end", NULL);
            const cJSON *nc = at(rep, "noise", "cpus_online", NULL);
            if (!cJSON_IsNumber(share) || !cJSON_IsNumber(la) || !cJSON_IsNumber(nc)) continue;
            fprintf(out, "machine during the %s run: load average %.1f on %g CPUs, the run got %.0f %% of its threads' CPU%s\n",
                    i ? "current" : "baseline", la->valuedouble, nc->valuedouble, share->valuedouble * 100,
                    la->valuedouble > nc->valuedouble ? "  <-- busy machine" : "");
        }
        static const char *const fk[] = {"model_tensors", "tokenizer", "chat_template", "tool_registry", "runner"};
        fprintf(out, "fingerprints:");
        for (int i = 0; i < 5; i++) {
            const char *a = at(base, "fingerprints", fk[i], NULL)->valuestring;
            const char *b = at(cur, "fingerprints", fk[i], NULL)->valuestring;
            fprintf(out, " %s %s%s", fk[i], strcmp(a, b) ? "differs" : "same", i < 4 ? "," : "\n");
        }
        fprintf(out, "verdict: %s (%d metric%s past %s limit)\n", t.failed ? "FAIL" : "PASS", t.failed,
                t.failed == 1 ? "" : "s", t.failed == 1 ? "its" : "their");
    }
    *verdict = t.failed ? TERN_GATE_FAIL : TERN_GATE_PASS;
    cJSON_Delete(base);
    cJSON_Delete(cur);
    return TERN_OK;
}
