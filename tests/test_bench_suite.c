/* test_bench_suite.c — speed governance as a user drives it (docs/bench-and-gate.md "Speed
 * governance"): `tern bench --suite` on a tern synth model writes a report that holds every
 * required key, with p50 <= p90 <= p95 <= p99 per metric, TTFT equal to the sum of its parts,
 * identical tokens over repetitions, and fingerprints that are the SHA-256 of the named bytes as
 * coreutils' sha256sum computes them (an independent implementation); `tern gate` exit codes on
 * reports edited to regress (or not) past each limit, across hardware profiles (refused / allowed),
 * and on malformed reports (the error names file and key); `tern bless`; profile-file and suite
 * errors naming FILE:LINE; the HTML page rendered by headless Chromium with its charts. Speed
 * itself is never asserted. */
#include "test_support.h"
#include "tern_bench.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[1 << 20];
static char model[512], suite[512], report[512];

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return test_run_cmd(cmd, out, sizeof out);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static cJSON *load(const char *path)
{
    char *t = test_read_file(path, NULL);
    assert_non_null(t);
    cJSON *j = cJSON_Parse(t);
    free(t);
    assert_non_null(j);
    return j;
}

static void save(const char *path, const cJSON *j)
{
    char *t = cJSON_Print(j);
    write_text(path, t);
    free(t);
}

static cJSON *at(cJSON *o, const char *a, const char *b, const char *c)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    if (c) v = cJSON_GetObjectItemCaseSensitive(v, c);
    return v;
}

/* sha256sum of a shell byte stream */
static void sha_of(const char *shell, char hex[65])
{
    assert_int_equal(run("%s | sha256sum", shell), 0);
    memcpy(hex, out, 64);
    hex[64] = '\0';
}

/* The synth model, a two-prompt suite (one offers a tool) and one report, made once. */
static int setup(void **state)
{
    (void)state;
    const char *d = test_tmpdir();
    snprintf(model, sizeof model, "%s/tiny.gguf", d);
    snprintf(suite, sizeof suite, "%s/suite.jsonl", d);
    snprintf(report, sizeof report, "%s/report.json", d);
    if (run("%s synth tiny:q8_0 -o %s 2>&1", test_tern_bin(), model)) { fprintf(stderr, "%s", out); return -1; }
    write_text(suite,
               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello there, how are you?\"}]}\n"
               "\n"
               "{\"id\": \"w\", \"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], \"tools\": "
               "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
               "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}\n");
    if (run("cd %s && %s bench --suite %s -m %s -t 1 -n 8 -r 3 --json %s 2>&1", test_source_dir(), test_tern_bin(),
            suite, model, report)) {
        fprintf(stderr, "tern bench --suite failed:\n%s", out);
        return -1;
    }
    return 0;
}

static void test_report_schema(void **state)
{
    (void)state;
    cJSON *r = load(report);
    assert_int_equal(at(r, "schema_version", NULL, NULL)->valuedouble, 1);
    assert_true(cJSON_IsString(at(r, "hardware", "profile", "name")));
    assert_true(cJSON_IsString(at(r, "hardware", "profile", "key")));
    assert_true(cJSON_IsString(at(r, "hardware", "cpu_model", NULL)));
    assert_true(cJSON_IsArray(at(r, "hardware", "isa", NULL)));
    assert_true(cJSON_IsNumber(at(r, "hardware", "cpus_online", NULL)));
    assert_true(cJSON_IsNumber(at(r, "hardware", "mem_read_gbps_1thread", NULL)));
    for (const char *const *k = (const char *const[]){"version", "commit", "compiler", "flags", "kernel_path", NULL}; *k; k++)
        assert_true(cJSON_IsString(at(r, "build", *k, NULL)));
    const char *metrics[] = {"ttft_ms", "template_ms", "tokenizer_ms", "prefill_ms", "first_step_ms", "tps", "ttfa_tokens", "ttfa_ms"};
    for (int m = 0; m < 8; m++) {
        double prev = -1;
        bool is_ttfa = !strncmp(metrics[m], "ttfa", 4);
        for (const char *const *k = (const char *const[]){"p50", "p90", "p95", "p99", NULL}; *k; k++) {
            cJSON *v = at(r, "metrics", metrics[m], *k);
            assert_non_null(v);
            /* a random-weight model calls no tool: TTFA is null, everything else a number */
            if (is_ttfa) { assert_true(cJSON_IsNull(v)); continue; }
            assert_true(cJSON_IsNumber(v));
            assert_true(v->valuedouble >= prev);
            prev = v->valuedouble;
        }
        if (!is_ttfa) assert_true(prev > 0);
    }
    assert_true(cJSON_IsTrue(at(r, "determinism", "identical_tokens", NULL)));
    assert_int_equal(at(r, "determinism", "threads", NULL)->valuedouble, 1);
    assert_int_equal(at(r, "determinism", "temperature", NULL)->valuedouble, 0);
    assert_int_equal(at(r, "ttfa", "prompts_with_tools", NULL)->valuedouble, 1);
    /* TTFT = template + tokenizer + prefill + first step in every repetition, but medians of the
     * parts need not add up to the median TTFT, by any margin a busy machine respects (no unit
     * test asserts a timing: speed belongs to benchmarks). What holds under any load: each part
     * is a non-negative share of every sample's TTFT, so its median is at most TTFT's median;
     * the reported TTFT is the median of its own samples; the KV log is exact. */
    cJSON *p;
    int n = 0;
    cJSON_ArrayForEach(p, at(r, "prompts", NULL, NULL)) {
        n++;
        double ttft = at(p, "ttft_ms", NULL, NULL)->valuedouble;
        assert_true(isfinite(ttft) && ttft > 0);
        for (const char *const *k = (const char *const[]){"template_ms", "tokenizer_ms", "prefill_ms", "first_step_ms", NULL}; *k; k++) {
            double part = at(p, *k, NULL, NULL)->valuedouble;
            if (!(isfinite(part) && part >= 0 && part <= ttft)) fail_msg("%s %g against ttft_ms %g", *k, part, ttft);
        }
        cJSON *samples = at(p, "samples", "ttft_ms", NULL);
        assert_int_equal(cJSON_GetArraySize(samples), 3);
        double s[3];
        for (int k = 0; k < 3; k++) s[k] = cJSON_GetArrayItem(samples, k)->valuedouble;
        double mid = fmax(fmin(s[0], s[1]), fmin(fmax(s[0], s[1]), s[2])); /* the median of three */
        assert_true(ttft == mid);
        assert_true(at(p, "prompt_tokens", NULL, NULL)->valuedouble > 5);
    }
    assert_int_equal(n, 2);
    assert_int_equal(at(r, "suite", "prompts", NULL)->valuedouble, 2);
    int total = 0;
    cJSON_ArrayForEach(p, at(r, "buckets", NULL, NULL)) total += (int)at(p, "prompts", NULL, NULL)->valuedouble;
    assert_int_equal(total, 2);
    char kv[128];
    snprintf(kv, sizeof kv, "(4, 4, 32, %d) -> %d bytes", (int)at(r, "kv_cache", "ctx", NULL)->valuedouble,
             2 * 4 * 4 * 32 * (int)at(r, "kv_cache", "ctx", NULL)->valuedouble * 2);
    assert_string_equal(at(r, "kv_cache", "log", NULL)->valuestring, kv);
    double share = at(r, "residency", "share", NULL)->valuedouble;
    assert_true(share > 0 && share <= 1);
    assert_int_equal(at(r, "residency", "scalar_fallbacks", NULL)->valuedouble, 0);
    cJSON *e = at(r, "energy", NULL, NULL);
    assert_true(cJSON_IsNumber(at(e, "joules_per_100_tokens", NULL, NULL)) ||
                (cJSON_IsNull(at(e, "joules_per_100_tokens", NULL, NULL)) && cJSON_IsString(at(e, "reason", NULL, NULL))));
    assert_true(cJSON_IsNumber(at(r, "noise", "ttft_ms", "round_spread")));
    /* the machine-speed probe: before the first round and after each (3 rounds), their median */
    cJSON *probes = at(r, "machine_speed", "probes_gops", NULL);
    assert_int_equal(cJSON_GetArraySize(probes), 4);
    double lo = 1e300, hi = 0;
    cJSON_ArrayForEach(p, probes) {
        lo = fmin(lo, p->valuedouble);
        hi = fmax(hi, p->valuedouble);
    }
    double g = at(r, "machine_speed", "gops", NULL)->valuedouble;
    assert_true(lo > 0 && g >= lo && g <= hi);
    assert_non_null(strstr(at(r, "machine_speed", "method", NULL)->valuestring, "int8-dot-l1/v2"));
    cJSON_Delete(r);
}

/* Adaptive repetitions: rounds past -r only until the noise target is met, never past the cap;
 * the report says how many ran and whether the target was met, consistently with its estimate. */
static void test_noise_target(void **state)
{
    (void)state;
    char rep[600];
    snprintf(rep, sizeof rep, "%s/adaptive.json", test_tmpdir());
    static const char *const targets[] = {"0.01", "50"};
    for (int t = 0; t < 2; t++) {
        assert_int_equal(run("%s bench --suite %s -m %s -t 1 -n 4 -r 2 --max-repetitions 4 --noise-target %s --json %s 2>&1",
                             test_tern_bin(), suite, model, targets[t], rep), 0);
        cJSON *r = load(rep);
        int done = (int)at(r, "noise", "repetitions", NULL)->valuedouble;
        bool met = cJSON_IsTrue(at(r, "noise", "target_met", NULL));
        double worst = fmax(at(r, "noise", "ttft_ms", "worst_rel_se")->valuedouble, at(r, "noise", "tps", "worst_rel_se")->valuedouble);
        double target = at(r, "noise", "target_rel_se", NULL)->valuedouble;
        assert_int_equal(at(r, "noise", "max_repetitions", NULL)->valuedouble, 4);
        assert_true(done >= 2 && done <= 4);
        assert_int_equal(met, worst <= target);
        if (!met) assert_int_equal(done, 4);   /* not met: every allowed round ran */
        if (met && done > 2) assert_true(done <= 4);
        assert_int_equal(at(r, "determinism", "runs_compared", NULL)->valuedouble, done);
        cJSON *p;
        cJSON_ArrayForEach(p, at(r, "prompts", NULL, NULL))
            assert_int_equal(cJSON_GetArraySize(at(p, "samples", "ttft_ms", NULL)), done);
        if (t == 0) assert_false(met); /* 0.0001 of relative SE is out of reach in 4 rounds */
        cJSON_Delete(r);
    }
    assert_int_equal(run("%s bench --suite %s -m %s -r 3 --max-repetitions 2 2>&1", test_tern_bin(), suite, model), 2);
    assert_non_null(strstr(out, "--max-repetitions 2 is below -r 3"));
}

/* A profile's measure section decides what the command line leaves open, and only that; match.cpus
 * picks a profile by the machine's CPU count. */
static void test_profile_measure(void **state)
{
    (void)state;
    char prof[600], rep[600];
    snprintf(prof, sizeof prof, "%s/measure.yaml", test_tmpdir());
    snprintf(rep, sizeof rep, "%s/measure.json", test_tmpdir());
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "version: 1\nprofiles:\n"
             "  - name: other-cpus\n    match: {arch: any, cpus: [%ld, %ld]}\n"
             "  - name: small\n    match: {arch: any, cpus: [%ld]}\n"
             "    measure: {threads: 1, repetitions: 2, max_repetitions: 3, noise_target_pct: 50}\n"
             "  - name: generic\n    match: {arch: any}\n",
             ncpu + 1, ncpu + 7, ncpu);
    write_text(prof, yaml);
    assert_int_equal(run("%s bench --suite %s -m %s -n 4 --profiles %s --json %s 2>&1", test_tern_bin(), suite, model, prof, rep), 0);
    cJSON *r = load(rep);
    assert_string_equal(at(r, "hardware", "profile", "name")->valuestring, "small");
    assert_int_equal(at(r, "settings", "threads", NULL)->valuedouble, 1);
    assert_int_equal(at(r, "determinism", "threads", NULL)->valuedouble, 1);
    assert_int_equal(at(r, "noise", "max_repetitions", NULL)->valuedouble, 3);
    assert_true(fabs(at(r, "noise", "target_rel_se", NULL)->valuedouble - 0.5) < 1e-12);
    int done = (int)at(r, "noise", "repetitions", NULL)->valuedouble;
    assert_true(done >= 2 && done <= 3);
    assert_int_equal(cJSON_GetArraySize(at(r, "settings", "from_profile", NULL)), 4);
    cJSON_Delete(r);
    /* -r alone: exactly that many rounds, the rest still the profile's */
    assert_int_equal(run("%s bench --suite %s -m %s -n 4 -r 2 --profiles %s --json %s 2>&1", test_tern_bin(), suite, model, prof, rep), 0);
    r = load(rep);
    assert_int_equal(at(r, "noise", "repetitions", NULL)->valuedouble, 2);
    assert_int_equal(at(r, "noise", "max_repetitions", NULL)->valuedouble, 2);
    assert_int_equal(at(r, "settings", "threads", NULL)->valuedouble, 1);
    cJSON *fp = at(r, "settings", "from_profile", NULL);
    assert_int_equal(cJSON_GetArraySize(fp), 2);
    assert_string_equal(cJSON_GetArrayItem(fp, 0)->valuestring, "threads");
    assert_string_equal(cJSON_GetArrayItem(fp, 1)->valuestring, "noise_target");
    cJSON_Delete(r);
    /* -t given: the profile's thread count is not used */
    assert_int_equal(run("%s bench --suite %s -m %s -n 4 -r 2 -t 2 --profiles %s --json %s 2>&1", test_tern_bin(), suite, model, prof, rep), 0);
    r = load(rep);
    assert_int_equal(at(r, "settings", "threads", NULL)->valuedouble, 2);
    cJSON_Delete(r);
}

/* Fingerprints against coreutils: the model's tensor data section, the suite file, the runner. */
static void test_fingerprints(void **state)
{
    (void)state;
    cJSON *r = load(report);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(model, &(struct tern_model_params){0}, &m));
    uint64_t off = tern_gguf_data_offset(tern_model_gguf(m));
    tern_model_free(m);
    char want[65], cmd[1024];
    snprintf(cmd, sizeof cmd, "tail -c +%llu %s", (unsigned long long)off + 1, model);
    sha_of(cmd, want);
    assert_string_equal(at(r, "fingerprints", "model_tensors", NULL)->valuestring, want);
    snprintf(cmd, sizeof cmd, "cat %s", suite);
    sha_of(cmd, want);
    assert_string_equal(at(r, "fingerprints", "suite", NULL)->valuestring, want);
    snprintf(cmd, sizeof cmd, "cat %s", test_tern_bin());
    sha_of(cmd, want);
    assert_string_equal(at(r, "fingerprints", "runner", NULL)->valuestring, want);
    /* the tool registry: the one tools array, compact, one line */
    sha_of("printf '%s\\n' '[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
           "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]'", want);
    assert_string_equal(at(r, "fingerprints", "tool_registry", NULL)->valuestring, want);
    for (const char *const *k = (const char *const[]){"tokenizer", "chat_template", NULL}; *k; k++)
        assert_int_equal(strlen(at(r, "fingerprints", *k, NULL)->valuestring), 64);
    cJSON_Delete(r);
}

/* Gate a copy of the report edited by edit(cur) against the report itself (edited by base_edit
 * when set). */
static void (*base_edit)(cJSON *);
static int gate_edited(void (*edit)(cJSON *), const char *extra)
{
    char cur[600];
    snprintf(cur, sizeof cur, "%s/current.json", test_tmpdir());
    char base[600];
    snprintf(base, sizeof base, "%s/baseline.json", test_tmpdir());
    /* spread percentiles, so an edit of one keeps them ordered */
    cJSON *j = load(report);
    static const char *const pk[] = {"p50", "p90", "p95", "p99"};
    for (int k = 0; k < 4; k++) {
        cJSON_SetNumberValue(at(j, "metrics", "ttft_ms", pk[k]), 100.0 * (k + 1));
        cJSON_SetNumberValue(at(j, "metrics", "tps", pk[k]), 50.0 + 10 * k);
    }
    if (base_edit) {
        cJSON *b = cJSON_Duplicate(j, true);
        base_edit(b);
        save(base, b);
        cJSON_Delete(b);
    } else {
        save(base, j);
    }
    if (edit) edit(j);
    save(cur, j);
    cJSON_Delete(j);
    return run("%s gate --baseline %s %s %s 2>&1", test_tern_bin(), base, cur, extra);
}

static double scale;
static void scale_metric(cJSON *j, const char *m, const char *p) { cJSON_SetNumberValue(at(j, "metrics", m, p), at(j, "metrics", m, p)->valuedouble * scale); }
static void ttft_p50(cJSON *j) { scale_metric(j, "ttft_ms", "p50"); }
static void ttft_p95(cJSON *j) { scale_metric(j, "ttft_ms", "p95"); }
static void tps_p50(cJSON *j) { scale_metric(j, "tps", "p50"); }
static void tps_p95(cJSON *j) { scale_metric(j, "tps", "p95"); if (scale > 1) scale_metric(j, "tps", "p99"); }
static double ttfa_p95_value;
static void ttfa(cJSON *j)
{
    cJSON *t = at(j, "metrics", "ttfa_tokens", NULL);
    cJSON_ReplaceItemInObject(t, "p50", cJSON_CreateNumber(5));
    cJSON_ReplaceItemInObject(t, "p90", cJSON_CreateNumber(ttfa_p95_value));
    cJSON_ReplaceItemInObject(t, "p95", cJSON_CreateNumber(ttfa_p95_value));
    cJSON_ReplaceItemInObject(t, "p99", cJSON_CreateNumber(ttfa_p95_value));
}
static double residency_drop;
static void residency(cJSON *j) { cJSON_SetNumberValue(at(j, "residency", "share", NULL), at(j, "residency", "share", NULL)->valuedouble - residency_drop); }
static void other_hw(cJSON *j) { cJSON_SetValuestring(at(j, "hardware", "profile", "key"), "x86-64-avx2/GenuineIntel-f6-m85/avx2/8cpu"); }
static void not_identical(cJSON *j) { cJSON_ReplaceItemInObject(at(j, "determinism", NULL, NULL), "identical_tokens", cJSON_CreateFalse()); }

/* the noise flag: a fixed-count report by its rounds' spread, a targeted one by its target */
static double spread_value;
static bool target_met_value;
static void spread(cJSON *j) { cJSON_SetNumberValue(at(j, "noise", "ttft_ms", "round_spread"), spread_value); }
static void targeted(cJSON *j)
{
    spread(j);
    cJSON *n = at(j, "noise", NULL, NULL);
    cJSON_ReplaceItemInObject(n, "target_rel_se", cJSON_CreateNumber(0.01));
    cJSON_ReplaceItemInObject(n, "target_met", cJSON_CreateBool(target_met_value));
}

/* Is the gate's "noise ttft_ms" line flagged? */
static bool ttft_noise_flagged(void)
{
    const char *l = strstr(out, "noise ttft_ms:");
    assert_non_null(l);
    const char *e = strchr(l, '\n');
    const char *f = strstr(l, "<-- noisy");
    return f && (!e || f < e);
}

static void test_gate_noise_flag(void **state)
{
    (void)state;
    spread_value = 0.01;
    base_edit = spread;
    assert_int_equal(gate_edited(spread, ""), 0);
    assert_false(ttft_noise_flagged());
    spread_value = 0.04; /* above half the 5 % limit */
    assert_int_equal(gate_edited(spread, ""), 0);
    assert_true(ttft_noise_flagged());
    target_met_value = true; /* rounds moved, but the medians are pinned */
    base_edit = targeted;
    assert_int_equal(gate_edited(targeted, ""), 0);
    assert_false(ttft_noise_flagged());
    target_met_value = false;
    spread_value = 0.01;
    assert_int_equal(gate_edited(targeted, ""), 0);
    assert_true(ttft_noise_flagged());
    assert_non_null(strstr(out, "a noise target not met"));
    base_edit = NULL;
}

static void test_gate_verdicts(void **state)
{
    (void)state;
    assert_int_equal(gate_edited(NULL, ""), 0);
    assert_non_null(strstr(out, "verdict: PASS"));
    /* each gated metric: just inside the limit passes, just past it fails */
    void (*lat[])(cJSON *) = {ttft_p50, ttft_p95};
    for (int i = 0; i < 2; i++) {
        scale = 1.04; assert_int_equal(gate_edited(lat[i], ""), 0);
        scale = 1.06; assert_int_equal(gate_edited(lat[i], ""), 1);
        assert_non_null(strstr(out, "FAIL"));
        scale = 0.90; assert_int_equal(gate_edited(lat[i], ""), 0); /* faster is fine */
    }
    void (*thr[])(cJSON *) = {tps_p50, tps_p95};
    for (int i = 0; i < 2; i++) {
        scale = 0.96; assert_int_equal(gate_edited(thr[i], ""), 0);
        scale = 0.94; assert_int_equal(gate_edited(thr[i], ""), 1);
        scale = 1.15; assert_int_equal(gate_edited(thr[i], ""), 0); /* faster is fine */
    }
    ttfa_p95_value = 25; assert_int_equal(gate_edited(ttfa, ""), 0);
    ttfa_p95_value = 26; assert_int_equal(gate_edited(ttfa, ""), 1);
    assert_non_null(strstr(out, "ttfa_tokens p95"));
    /* the baseline called a tool by token 10, the current run never does */
    ttfa_p95_value = 10;
    base_edit = ttfa;
    assert_int_equal(gate_edited(NULL, ""), 1);
    assert_non_null(strstr(out, "no call"));
    base_edit = NULL;
    residency_drop = 0.09; assert_int_equal(gate_edited(residency, ""), 0);
    residency_drop = 0.11; assert_int_equal(gate_edited(residency, ""), 1);
    assert_int_equal(gate_edited(not_identical, ""), 1);
    /* the table names every gated metric with its limit */
    scale = 1.0;
    assert_int_equal(gate_edited(ttft_p50, ""), 0);
    for (const char *const *k = (const char *const[]){"ttft_ms p50", "ttft_ms p95", "tps p50", "tps p95", "ttfa_tokens p95",
                                                      "residency share", "<= +5 %", ">= -5 %", "<= 25 tok", ">= -10 pt", NULL}; *k; k++)
        if (!strstr(out, *k)) fail_msg("gate table lacks '%s':\n%s", *k, out);
    /* other hardware: refused unless allowed */
    assert_int_equal(gate_edited(other_hw, ""), 2);
    assert_non_null(strstr(out, "REFUSED"));
    assert_int_equal(gate_edited(other_hw, "--allow-cross-hw"), 0);
    assert_non_null(strstr(out, "WARNING"));
}

/* The machine-speed allowance: both reports carry probes; the current run's machine ran at
 * machine_value / 100 of the baseline's. */
static double machine_value = 100;
static const char *machine_method = "int8-dot-l1/v2 test";
static void machine_at(cJSON *j, double gops, const char *method)
{
    cJSON_DeleteItemFromObject(j, "machine_speed");
    cJSON *m = cJSON_AddObjectToObject(j, "machine_speed");
    cJSON_AddStringToObject(m, "method", method);
    cJSON_AddNumberToObject(m, "gops", gops);
}
static void machine_base(cJSON *j) { machine_at(j, 100, "int8-dot-l1/v2 test"); }
static void machine_cur(cJSON *j) { machine_at(j, machine_value, machine_method); }
static void machine_ttft(cJSON *j) { machine_cur(j); ttft_p50(j); }
static void machine_tps(cJSON *j) { machine_cur(j); tps_p50(j); }
static void machine_none(cJSON *j) { cJSON_DeleteItemFromObject(j, "machine_speed"); }

static void test_gate_machine_speed(void **state)
{
    (void)state;
    base_edit = machine_base;
    /* the machine 5 % slower: TTFT 8 % longer is 2.6 % after the allowance; TPS gets none */
    machine_value = 95;
    scale = 1.08;
    assert_int_equal(gate_edited(machine_ttft, ""), 0);
    assert_non_null(strstr(out, "x0.950"));
    assert_non_null(strstr(out, "+2.6 % (raw +8.0)"));
    assert_int_equal(gate_edited(machine_ttft, "--raw"), 1);
    assert_non_null(strstr(out, "--raw: gated as measured"));
    scale = 0.92;
    assert_int_equal(gate_edited(machine_tps, ""), 1);
    assert_non_null(strstr(out, "-8.0 %"));
    assert_null(strstr(out, "(raw -8.0)"));
    scale = 0.96;
    assert_int_equal(gate_edited(machine_tps, ""), 0);
    /* ... but not a 12 % slower build */
    scale = 1.12;
    assert_int_equal(gate_edited(machine_ttft, ""), 1);
    /* a faster machine that gives the same numbers hides a slower build */
    machine_value = 107;
    scale = 1.0;
    assert_int_equal(gate_edited(machine_ttft, ""), 1);
    assert_non_null(strstr(out, "+7.0 % (raw +0.0)"));
    assert_int_equal(gate_edited(machine_ttft, "--raw"), 0);
    /* more than 20 % apart: no allowance */
    machine_value = 75;
    scale = 1.08;
    assert_int_equal(gate_edited(machine_ttft, ""), 1);
    assert_non_null(strstr(out, "too far to allow for"));
    /* other probes (another compiler, other flags) are not compared */
    machine_value = 95;
    machine_method = "int8-dot-l1/v2 other";
    assert_int_equal(gate_edited(machine_ttft, ""), 1);
    assert_non_null(strstr(out, "the probes differ"));
    machine_method = "int8-dot-l1/v2 test";
    /* a report without probes (made before them) is gated as measured */
    assert_int_equal(gate_edited(machine_none, ""), 0); /* scale unused: same numbers */
    assert_non_null(strstr(out, "not measured in the current report"));
    base_edit = machine_none;
    assert_int_equal(gate_edited(machine_ttft, ""), 1);
    assert_non_null(strstr(out, "not measured in the baseline"));
    base_edit = NULL;
    scale = 1.0;
    machine_value = 100;
}

static void bad_machine(cJSON *j) { machine_at(j, -3, "int8-dot-l1/v2 test"); }
static void machine_no_method(cJSON *j) { cJSON_DeleteItemFromObject(at(j, "machine_speed", NULL, NULL), "method"); }
static void drop_key(cJSON *j) { cJSON_DeleteItemFromObject(at(j, "fingerprints", NULL, NULL), "tokenizer"); }
static void bad_version(cJSON *j) { cJSON_SetNumberValue(at(j, "schema_version", NULL, NULL), 7); }
static void bad_order(cJSON *j) { cJSON_SetNumberValue(at(j, "metrics", "tps", "p90"), at(j, "metrics", "tps", "p99")->valuedouble + 1); }
static void bad_hex(cJSON *j) { cJSON_SetValuestring(at(j, "fingerprints", "suite", NULL), "abc"); }
static void no_p95(cJSON *j) { cJSON_DeleteItemFromObject(at(j, "metrics", "first_step_ms", NULL), "p95"); }

static void test_gate_malformed(void **state)
{
    (void)state;
    struct { void (*edit)(cJSON *); const char *want; } cases[] = {
        {drop_key, "current.json: fingerprints.tokenizer is missing"},
        {bad_version, "current.json: schema_version is 7"},
        {bad_order, "current.json: metrics.tps.p95"},
        {bad_hex, "current.json: fingerprints.suite is not a SHA-256"},
        {no_p95, "current.json: metrics.first_step_ms.p95 is missing"},
        {bad_machine, "current.json: machine_speed.gops must be a positive number or null"},
        {machine_no_method, "current.json: machine_speed.method is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(gate_edited(cases[i].edit, ""), 2);
        if (!strstr(out, cases[i].want)) fail_msg("want '%s' in:\n%s", cases[i].want, out);
    }
    char bad[600];
    snprintf(bad, sizeof bad, "%s/notjson.json", test_tmpdir());
    write_text(bad, "{\"schema_version\": 1, ");
    assert_int_equal(run("%s gate --baseline %s %s 2>&1", test_tern_bin(), bad, report), 2);
    assert_non_null(strstr(out, "notjson.json: not JSON"));
    assert_int_equal(run("%s gate --baseline %s/missing.json %s 2>&1", test_tern_bin(), test_tmpdir(), report), 2);
    assert_non_null(strstr(out, "missing.json"));
}

static void test_bless(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/bless", test_tmpdir());
    assert_int_equal(run("mkdir -p %s && cd %s && %s bless %s 2>&1", dir, dir, test_tern_bin(), report), 0);
    assert_non_null(strstr(out, "baselines/"));
    /* the gate finds the baseline of the report's profile by itself */
    assert_int_equal(run("cd %s && %s gate %s 2>&1", dir, test_tern_bin(), report), 0);
    assert_non_null(strstr(out, "verdict: PASS"));
    cJSON *j = load(report);
    not_identical(j);
    char cur[600];
    snprintf(cur, sizeof cur, "%s/nondet.json", test_tmpdir());
    save(cur, j);
    cJSON_Delete(j);
    assert_int_equal(run("cd %s && %s bless %s -o x.json 2>&1", dir, test_tern_bin(), cur), 2);
    assert_non_null(strstr(out, "identical"));
    assert_int_equal(run("cd %s && %s bless %s -o y.json 2>&1 && test -f y.json", dir, test_tern_bin(), report), 0);
}

/* --batch-policy on the synth model: a row per batch size, an offline choice, recorded in a copy
 * of the profile file in place (the rest of the file unchanged). */
static void test_batch_policy(void **state)
{
    (void)state;
    char prof[600], orig[600];
    snprintf(prof, sizeof prof, "%s/profiles.yaml", test_tmpdir());
    snprintf(orig, sizeof orig, "%s/configs/hardware_profiles.yaml", test_source_dir());
    assert_int_equal(run("cp %s %s", orig, prof), 0);
    assert_int_equal(run("%s bench --batch-policy -m %s -t 1 -n 8 -r 1 --profiles %s --write-profile 2>&1",
                         test_tern_bin(), model, prof), 0);
    for (const char *const *k = (const char *const[]){"| 1 |", "| 2 |", "| 3 |", "| 4 |", "offline: ", "recorded offline", NULL}; *k; k++)
        if (!strstr(out, *k)) fail_msg("want '%s' in:\n%s", *k, out);
    /* record 3 in the profile that matched, then check that only that line changed */
    const char *src = strstr(out, "recorded offline: ");
    assert_non_null(src);
    char where[600];
    assert_int_equal(sscanf(strstr(src, " in ") + 4, "%599s", where), 1);
    assert_tern_ok(tern_bench_profile_set_offline(where, 3));
    assert_int_equal(run("diff %s %s | grep -c '^[<>]'", orig, prof), 0);
    int changed = atoi(out);
    assert_true(changed == 0 || changed == 2);
    assert_int_equal(run("grep -c 'offline: 3' %s", prof), 0);
    assert_int_equal(atoi(out), 1);
    int n = 0;
    assert_tern_ok(tern_bench_profiles_check(prof, &n));
    assert_int_equal(n, 5);
}

static void test_profile_errors(void **state)
{
    (void)state;
    struct { const char *yaml, *want; } cases[] = {
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any}\n    gate:\n      ttft_regres_pct: 5\n",
         "bad.yaml:6: unknown key 'ttft_regres_pct' in gate"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any\n", "bad.yaml:5:"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any}\n    gate: {tps_regress_pct: fast}\n",
         "bad.yaml:5: tps_regress_pct must be a number"},
        {"version: 2\nprofiles: []\n", "bad.yaml:1: version = 2 is outside 1..1"},
        {"colour: blue\nversion: 1\nprofiles: []\n", "bad.yaml:1: unknown top-level key 'colour'"},
        {"version: 1\nprofiles:\n  - match: {arch: any}\n", "bad.yaml:3: a profile needs a name"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: sparc}\n", "none of its 1 profiles matches"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any, cpus: 0}\n", "none of its 1 profiles matches"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any, cores: 2}\n", "bad.yaml:4: unknown key 'cores' in match"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any}\n    measure: {threads: 1.5}\n",
         "bad.yaml:5: threads must be a whole number"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any}\n    measure: {repetitions: 5, max_repetitions: 4}\n",
         "bad.yaml:3: profile 'a': measure.max_repetitions 4 is below repetitions 5"},
        {"version: 1\nprofiles:\n  - name: a\n    match: {arch: any}\n    measure: {rounds: 5}\n",
         "bad.yaml:5: unknown key 'rounds' in measure"},
    };
    char path[600];
    snprintf(path, sizeof path, "%s/bad.yaml", test_tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(path, cases[i].yaml);
        assert_int_not_equal(run("%s bench --hardware --profiles %s 2>&1", test_tern_bin(), path), 0);
        if (!strstr(out, cases[i].want)) fail_msg("case %zu: want '%s' in:\n%s", i, cases[i].want, out);
    }
    /* the shipped file parses and matches this machine */
    assert_int_equal(run("cd %s && %s bench --hardware 2>&1", test_source_dir(), test_tern_bin()), 0);
    assert_non_null(strstr(out, "\"profile\""));
}

static void test_suite_errors(void **state)
{
    (void)state;
    struct { const char *text, *want; } cases[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n{\"messages\": [}\n", "bad.jsonl:2: not JSON"},
        {"\n\n{\"tools\": []}\n", "bad.jsonl:3: \"messages\" must be a non-empty array"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"expected\": []}\n", "bad.jsonl:1: unknown key \"expected\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": {}}\n", "bad.jsonl:1: \"tools\" must be an array"},
        {"{\"messages\": [{\"content\": \"hi\"}]}\n", "bad.jsonl:1: "},
        {"\n", "bad.jsonl: no prompts"},
    };
    char path[600];
    snprintf(path, sizeof path, "%s/bad.jsonl", test_tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(path, cases[i].text);
        assert_int_not_equal(run("%s bench --suite %s -m %s 2>&1", test_tern_bin(), path, model), 0);
        if (!strstr(out, cases[i].want)) fail_msg("case %zu: want '%s' in:\n%s", i, cases[i].want, out);
    }
    assert_int_equal(run("%s bench --suite %s -m %s -r 1 2>&1", test_tern_bin(), suite, model), 2);
    assert_non_null(strstr(out, "-r"));
    /* the shipped suite loads */
    struct tern_bench_suite *s;
    char shipped[600];
    snprintf(shipped, sizeof shipped, "%s/bench/suites/toolcalls.jsonl", test_source_dir());
    assert_tern_ok(tern_bench_suite_load(shipped, &s));
    assert_int_equal(tern_bench_suite_count(s), 5);
    tern_bench_suite_free(s);
}

/* The page in headless Chromium: every chart is an <svg> with bars, nothing loaded from outside. */
static void test_html_page(void **state)
{
    (void)state;
    if (run("command -v chromium || command -v chromium-browser")) TEST_SKIP("chromium is not installed\n");
    char browser[256];
    snprintf(browser, sizeof browser, "%.*s", (int)strcspn(out, "\n"), out);
    char page[600], dom[600];
    snprintf(page, sizeof page, "%s/page.html", test_tmpdir());
    snprintf(dom, sizeof dom, "%s/dom.html", test_tmpdir());
    assert_int_equal(run("%s bench --suite %s -m %s -t 1 -n 4 -r 2 --html %s 2>&1", test_tern_bin(), suite, model, page), 0);
    char *html = test_read_file(page, NULL);
    assert_non_null(html);
    /* no network: the only URI is the SVG namespace */
    int uris = 0, ns = 0;
    for (const char *q = html; (q = strstr(q, "http")); q++) uris++;
    for (const char *q = html; (q = strstr(q, "http://www.w3.org/2000/svg\"")); q++) ns++;
    assert_int_equal(uris, ns);
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "src="));
    free(html);
    int rc = run("timeout 120 %s --headless --no-sandbox --disable-gpu --user-data-dir=%s/chrome --dump-dom "
                 "file://%s > %s 2>/dev/null", browser, test_tmpdir(), page, dom);
    assert_int_equal(rc, 0);
    char *d = test_read_file(dom, NULL);
    assert_non_null(d);
    for (const char *const *id = (const char *const[]){"chart-ttft", "chart-tps", "chart-buckets-ttft",
                                                       "chart-buckets-tps", "chart-residency", NULL}; *id; id++) {
        char key[64];
        snprintf(key, sizeof key, "<svg id=\"%s\"", *id);
        const char *s = strstr(d, key);
        if (!s) fail_msg("the rendered page has no %s", *id);
        const char *end = strstr(s, "</svg>");
        const char *bar = strstr(s, "<rect class=\"bar\"");
        if (!end || !bar || bar > end) fail_msg("%s has no bars", *id);
    }
    free(d);
}

/* The shipped suite on a fixture model (real tokenizer), when ../shared is there. */
static void test_shipped_suite_fixture(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(m, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char rep[600];
    snprintf(rep, sizeof rep, "%s/fixture.json", test_tmpdir());
    assert_int_equal(run("cd %s && %s bench --suite bench/suites/toolcalls.jsonl -m %s -t 1 -n 8 -r 2 --json %s 2>&1",
                         test_source_dir(), test_tern_bin(), m, rep), 0);
    assert_tern_ok(tern_bench_report_check_file(rep));
    cJSON *r = load(rep);
    assert_int_equal(at(r, "ttfa", "prompts_with_tools", NULL)->valuedouble, 5);
    assert_true(cJSON_IsTrue(at(r, "determinism", "identical_tokens", NULL)));
    cJSON_Delete(r);
    assert_int_equal(run("%s gate --baseline %s %s 2>&1", test_tern_bin(), rep, report), 2); /* other suite */
    assert_non_null(strstr(out, "different suites"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_schema),
        cmocka_unit_test(test_fingerprints),
        cmocka_unit_test(test_noise_target),
        cmocka_unit_test(test_profile_measure),
        cmocka_unit_test(test_gate_verdicts),
        cmocka_unit_test(test_gate_machine_speed),
        cmocka_unit_test(test_gate_noise_flag),
        cmocka_unit_test(test_gate_malformed),
        cmocka_unit_test(test_bless),
        cmocka_unit_test(test_batch_policy),
        cmocka_unit_test(test_profile_errors),
        cmocka_unit_test(test_suite_errors),
        cmocka_unit_test(test_html_page),
        cmocka_unit_test(test_shipped_suite_fixture),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
