/* bench_check.c — reading a report back (tern gate, tern bless, the HTML page): the schema of
 * docs/bench-and-gate.md "Speed governance", checked key by key. Every error names the file and the
 * key's path ("current.json: fingerprints.tokenizer is missing"), so a hand-edited or truncated
 * baseline is caught before it is compared. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "util/error.h"
#include "util/file.h"

static const char *const fingerprint_keys[] = {"model_tensors", "tokenizer", "chat_template",
                                                "suite", "tool_registry", "runner"};
/* metrics whose percentiles may be null (no prompt produced a valid call) */
static const char *const metric_keys[] = {"ttft_ms", "template_ms", "tokenizer_ms", "prefill_ms",
                                          "first_step_ms", "tps", "ttfa_tokens", "ttfa_ms"};

static tern_status need(const cJSON *parent, const char *key, const char *path, const char *where,
                        int type, const cJSON **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(parent, key);
    const char *what = type == cJSON_Object ? "an object" : type == cJSON_String ? "a string"
                     : type == cJSON_Number ? "a number" : type == cJSON_Array ? "an array" : "true or false";
    if (!v) return tern_fail(TERN_ERR_FORMAT, "%s: %s%s%s is missing", path, where, *where ? "." : "", key);
    bool ok = type == cJSON_True ? cJSON_IsBool(v) : (v->type & 0xFF) == type;
    if (!ok) return tern_fail(TERN_ERR_FORMAT, "%s: %s%s%s must be %s", path, where, *where ? "." : "", key, what);
    if (out) *out = v;
    return TERN_OK;
}

tern_status bench_report_check(const cJSON *r, const char *path)
{
    const cJSON *v = NULL, *hw = NULL, *prof = NULL, *fp = NULL, *det = NULL, *met = NULL, *res = NULL;
    tern_status st;
    if (!cJSON_IsObject(r)) return tern_fail(TERN_ERR_FORMAT, "%s: a report is a JSON object", path);
    if ((st = need(r, "schema_version", path, "", cJSON_Number, &v))) return st;
    if (v->valuedouble != BENCH_SCHEMA_VERSION)
        return tern_fail(TERN_ERR_FORMAT, "%s: schema_version is %g; this tern reads %d (re-run tern bench "
                         "--suite with this build to get one)", path, v->valuedouble, BENCH_SCHEMA_VERSION);
    if ((st = need(r, "hardware", path, "", cJSON_Object, &hw))) return st;
    if ((st = need(hw, "profile", path, "hardware", cJSON_Object, &prof))) return st;
    if ((st = need(prof, "name", path, "hardware.profile", cJSON_String, NULL))) return st;
    if ((st = need(prof, "key", path, "hardware.profile", cJSON_String, NULL))) return st;
    if ((st = need(prof, "gate", path, "hardware.profile", cJSON_Object, NULL))) return st;
    if ((st = need(r, "fingerprints", path, "", cJSON_Object, &fp))) return st;
    for (size_t i = 0; i < sizeof fingerprint_keys / sizeof *fingerprint_keys; i++) {
        if ((st = need(fp, fingerprint_keys[i], path, "fingerprints", cJSON_String, &v))) return st;
        const char *h = v->valuestring;
        bool hex = strlen(h) == 64;
        for (int k = 0; hex && k < 64; k++) hex = isxdigit((unsigned char)h[k]) && !isupper((unsigned char)h[k]);
        if (!hex) return tern_fail(TERN_ERR_FORMAT, "%s: fingerprints.%s is not a SHA-256 (64 lower-case hex digits)",
                                   path, fingerprint_keys[i]);
    }
    if ((st = need(r, "determinism", path, "", cJSON_Object, &det))) return st;
    if ((st = need(det, "identical_tokens", path, "determinism", cJSON_True, NULL))) return st;
    if ((st = need(det, "threads", path, "determinism", cJSON_Number, NULL))) return st;
    if ((st = need(det, "temperature", path, "determinism", cJSON_Number, NULL))) return st;
    if ((st = need(r, "metrics", path, "", cJSON_Object, &met))) return st;
    for (size_t i = 0; i < sizeof metric_keys / sizeof *metric_keys; i++) {
        const cJSON *m;
        char where[64];
        snprintf(where, sizeof where, "metrics.%s", metric_keys[i]);
        if ((st = need(met, metric_keys[i], path, "metrics", cJSON_Object, &m))) return st;
        static const char *const pk[] = {"p50", "p90", "p95", "p99"};
        bool nullable = !strncmp(metric_keys[i], "ttfa", 4);
        double prev = -1e300;
        int nulls = 0;
        for (int k = 0; k < 4; k++) {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, pk[k]);
            if (!p) return tern_fail(TERN_ERR_FORMAT, "%s: %s.%s is missing", path, where, pk[k]);
            if (cJSON_IsNull(p) && nullable) { nulls++; continue; }
            if (!cJSON_IsNumber(p)) return tern_fail(TERN_ERR_FORMAT, "%s: %s.%s must be a number%s", path, where, pk[k],
                                                     nullable ? " or null" : "");
            if (p->valuedouble < prev)
                return tern_fail(TERN_ERR_FORMAT, "%s: %s.%s = %g is below %s.%s = %g (percentiles must not decrease)",
                                 path, where, pk[k], p->valuedouble, where, pk[k - 1], prev);
            prev = p->valuedouble;
        }
        if (nulls && nulls != 4) return tern_fail(TERN_ERR_FORMAT, "%s: %s: either all percentiles or none are null", path, where);
    }
    if ((st = need(r, "residency", path, "", cJSON_Object, &res))) return st;
    if ((st = need(res, "share", path, "residency", cJSON_Number, NULL))) return st;
    if ((st = need(res, "scalar_fallbacks", path, "residency", cJSON_Number, NULL))) return st;
    if ((st = need(r, "noise", path, "", cJSON_Object, NULL))) return st;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "machine_speed");
    if (ms) { /* optional: reports made before the probe have none, and are gated on raw numbers */
        if (!cJSON_IsObject(ms)) return tern_fail(TERN_ERR_FORMAT, "%s: machine_speed must be an object", path);
        if ((st = need(ms, "method", path, "machine_speed", cJSON_String, NULL))) return st;
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(ms, "gops");
        if (!g) return tern_fail(TERN_ERR_FORMAT, "%s: machine_speed.gops is missing", path);
        if (!cJSON_IsNull(g) && !(cJSON_IsNumber(g) && g->valuedouble > 0))
            return tern_fail(TERN_ERR_FORMAT, "%s: machine_speed.gops must be a positive number or null", path);
    }
    if ((st = need(r, "buckets", path, "", cJSON_Array, NULL))) return st;
    if ((st = need(r, "kv_cache", path, "", cJSON_Object, NULL))) return st;
    if ((st = need(r, "energy", path, "", cJSON_Object, NULL))) return st;
    if ((st = need(r, "build", path, "", cJSON_Object, NULL))) return st;
    return TERN_OK;
}

tern_status bench_report_parse(const char *text, size_t len, const char *path, cJSON **out)
{
    *out = NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) {
        const char *e = cJSON_GetErrorPtr();
        long off = e && e >= text && e <= text + len ? (long)(e - text) : -1;
        return tern_fail(TERN_ERR_FORMAT, "%s: not JSON (byte %ld)", path, off);
    }
    tern_status st = bench_report_check(j, path);
    if (st) {
        cJSON_Delete(j);
        return st;
    }
    *out = j;
    return TERN_OK;
}

tern_status bench_report_load(const char *path, cJSON **out)
{
    *out = NULL;
    char *buf;
    size_t len;
    tern_status st = util_read_file(path, BENCH_REPORT_MAX_BYTES, "report", &buf, &len);
    if (st) return st;
    st = bench_report_parse(buf, len, path, out);
    free(buf);
    return st;
}

tern_status tern_bench_report_check_file(const char *path)
{
    cJSON *j;
    tern_status st = bench_report_load(path, &j);
    cJSON_Delete(j);
    return st;
}

tern_status tern_bench_profiles_check(const char *path, int *n_profiles)
{
    int n;
    tern_status st = bench_profiles_check(path, &n);
    if (n_profiles) *n_profiles = n;
    return st;
}

tern_status tern_bench_hardware_json(const char *profiles_path, bool measure_bandwidth, char **json)
{
    struct bench_hw hw;
    struct bench_profile pr;
    bench_hw_detect(&hw, measure_bandwidth);
    tern_status st = bench_profile_match(profiles_path, &hw, &pr);
    if (st) return st;
    cJSON *o = bench_hw_json(&hw);
    cJSON *p = cJSON_AddObjectToObject(o, "profile");
    char key[256];
    bench_profile_key(&pr, &hw, key, sizeof key);
    cJSON_AddStringToObject(p, "name", pr.name);
    cJSON_AddStringToObject(p, "key", key);
    cJSON_AddStringToObject(p, "source", pr.source);
    *json = cJSON_Print(o);
    cJSON_Delete(o);
    return *json ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "out of memory");
}
