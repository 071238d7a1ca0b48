/* test_bench.c — `tern bench` as a user runs it: llama-bench field names in --json, a profile
 * with zero scalar fallbacks for every supported weight format on this CPU, and the
 * prompt-cache report (--prompt-cache), and --depth (tests that start after cached tokens).
 * Speed itself is never asserted here. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char out[1 << 20];

static cJSON *run_json(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", test_tern_bin(), args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("tern %s failed: %s", args, out);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("tern %s: not JSON: %s", args, out);
    return j;
}

/* For every format: a tiny synthetic model in it, benchmarked with --profile. The matmul of
 * that format ran, and nothing ran the scalar path where the CPU has a SIMD one. */
static void test_profile_no_fallbacks(void **state)
{
    (void)state;
    static const char *types[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0",
                                  "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
    static const char *op[] = {"matmul F32",  "matmul F16",  "matmul BF16", "matmul Q8_0",
                               "matmul Q4_0", "matmul Q5_0", "matmul Q5_1", "matmul Q4_K",
                               "matmul Q5_K", "matmul Q6_K"};
    char args[4096];
    for (int t = 0; t < (int)(sizeof types / sizeof types[0]); t++) {
        snprintf(args, sizeof args, "synth tiny:%s -o %s/tiny-%s.gguf", types[t], test_tmpdir(), types[t]);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", test_tern_bin(), args);
        assert_int_equal(system(cmd), 0);
        snprintf(args, sizeof args, "bench -m %s/tiny-%s.gguf -p 16 -n 4 -r 1 -t 2 --profile --json",
                 test_tmpdir(), types[t]);
        cJSON *j = run_json(args);
        assert_int_equal(cJSON_GetArraySize(j), 2); /* pp16, tg4 */
        const cJSON *test;
        cJSON_ArrayForEach(test, j) {
            for (const char *const *f = (const char *const[]){"model_filename", "n_prompt", "n_gen",
                                                              "n_threads", "avg_ts", "stddev_ts",
                                                              "samples_ts", NULL};
                 *f; f++)
                assert_non_null(cJSON_GetObjectItem(test, *f));
            assert_true(cJSON_GetObjectItem(test, "avg_ts")->valuedouble > 0);
            bool seen = false;
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(test, "profile")) {
                const cJSON *fb = cJSON_GetObjectItem(e, "fallbacks");
                if (fb && fb->valuedouble != 0)
                    fail_msg("%s: %s fell back to scalar %g times", types[t],
                             cJSON_GetStringValue(cJSON_GetObjectItem(e, "op")), fb->valuedouble);
                if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "op")), op[t]) &&
                    cJSON_GetObjectItem(e, "calls")->valuedouble > 0) {
                    seen = true;
                    print_message("%-5s %s ran kernel %s\n", types[t], op[t],
                                  cJSON_GetStringValue(cJSON_GetObjectItem(e, "kernel")));
                }
            }
            assert_true(seen);
        }
        cJSON_Delete(j);
    }
}

/* -d 0,24: every test once from an empty cache and once after 24 cached tokens, n_depth in the
 * JSON as llama-bench names it. */
static void test_depth(void **state)
{
    (void)state;
    char cmd[8192], args[4096];
    snprintf(cmd, sizeof cmd, "%s synth tiny:q8_0 -o %s/tiny-depth.gguf 2>/dev/null", test_tern_bin(),
             test_tmpdir());
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "bench -m %s/tiny-depth.gguf -p 8 -n 2 -d 0,24 -r 1 -t 1 --json",
             test_tmpdir());
    cJSON *j = run_json(args);
    assert_int_equal(cJSON_GetArraySize(j), 4);
    static const int want_depth[] = {0, 0, 24, 24}, want_prompt[] = {8, 0, 8, 0};
    for (int i = 0; i < 4; i++) {
        const cJSON *t = cJSON_GetArrayItem(j, i);
        assert_int_equal((int)cJSON_GetObjectItem(t, "n_depth")->valuedouble, want_depth[i]);
        assert_int_equal((int)cJSON_GetObjectItem(t, "n_prompt")->valuedouble, want_prompt[i]);
        assert_true(cJSON_GetObjectItem(t, "avg_ts")->valuedouble > 0);
    }
    cJSON_Delete(j);
}

static void test_prompt_cache_report(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char args[8192];
    snprintf(args, sizeof args, "bench --prompt-cache -m %s -t 2 --json", model);
    cJSON *j = run_json(args);
    for (const char *const *f = (const char *const[]){"ttft_cold_ms", "ttft_warm_ms", "hit_rate",
                                                      "disk_load_ms", "recompute_ms", NULL};
         *f; f++)
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, *f)));
    /* a cache hit and a disk load must reproduce the cold run's logits exactly */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "warm_identical")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "disk_identical")));
    double hr = cJSON_GetObjectItem(j, "hit_rate")->valuedouble;
    assert_true(hr > 0 && hr <= 1);
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_no_fallbacks),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_prompt_cache_report),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
