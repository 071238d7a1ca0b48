/* test_cli_json.c — the --json output of tern check, bench, cache, probe and tokenize is JSON
 * for any input: a model copied to a path holding a double quote, a backslash and a newline
 * parses back with that exact path wherever a command prints it; integers print as integers;
 * probe's logits read back as the very floats the library computed. Also the probe error path
 * that once leaked its context (under the ASan build any leak report fails the test).
 *
 * Commands run through posix_spawn with an argument vector, not a shell, so the odd path reaches
 * tern byte for byte. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL "fixtures/models/qwen2-tiny-q8_0.gguf"
#define REF "fixtures/reference/qwen2-tiny-q8_0.jsonl"

extern char **environ;

/* The odd names: a quote, a backslash and a newline in both the folder and the file. */
static char odd_dir[1024], odd_model[2048];

static const char *args0(const char **argv) { return argv[1] ? argv[1] : ""; }

/* Run tern with args (NULL-terminated, without argv[0]); *out gets stdout, *err stderr (both
 * malloc'ed, NUL-terminated). Returns the exit code (128 + signal if killed). */
static int run_tern(const char *const *args, char **out, char **err)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = test_tern_bin();
    while (*args && n < 63) argv[n++] = *args++;
    argv[n] = NULL;
    char po[1200], pe[1200];
    snprintf(po, sizeof po, "%s/stdout.txt", test_tmpdir());
    snprintf(pe, sizeof pe, "%s/stderr.txt", test_tmpdir());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *out = test_read_file(po, NULL);
    *err = test_read_file(pe, NULL);
    assert_non_null(*out);
    assert_non_null(*err);
    /* under the ASan build a leak or memory error is reported here (a leak keeps the exit code:
     * ASan's is 1, the same as tern's own failure) */
    if (strstr(*err, "Sanitizer")) fail_msg("tern %s: sanitizer report:\n%s", args0(argv), *err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Run, expect exit 0, parse the whole stdout as one JSON document. */
static cJSON *run_json(const char *const *args, char **text)
{
    char *out, *err;
    int rc = run_tern(args, &out, &err);
    if (rc != 0) fail_msg("tern %s %s: exit %d: %s", args[0], args[1] ? args[1] : "", rc, err);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("tern %s: stdout is not JSON: %s", args[0], out);
    free(err);
    if (text) *text = out;
    else free(out);
    return j;
}

static const char *str_item(const cJSON *o, const char *name)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
    if (!s) fail_msg("no string \"%s\"", name);
    return s;
}

static double num_item(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v)) fail_msg("no number \"%s\"", name);
    return v->valuedouble;
}

/* Copy the fixture model to the odd path (once). */
static int setup(void **state)
{
    (void)state;
    const char *src = test_shared_path(MODEL);
    if (!src) return 0; /* each test skips */
    snprintf(odd_dir, sizeof odd_dir, "%s/we\"ird\\di\nr", test_tmpdir());
    assert_int_equal(mkdir(odd_dir, 0777), 0);
    snprintf(odd_model, sizeof odd_model, "%s/m\"o\\d\nel.gguf", odd_dir);
    size_t len;
    char *data = test_read_file(src, &len);
    assert_non_null(data);
    FILE *f = fopen(odd_model, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    free(data);
    return 0;
}

#define NEED_MODEL()                                                                           \
    do {                                                                                       \
        if (!odd_model[0]) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED\n");    \
    } while (0)

static void test_check(void **state)
{
    (void)state;
    NEED_MODEL();
    char *text;
    cJSON *j = run_json((const char *const[]){"check", "-m", odd_model, "--json", NULL}, &text);
    assert_string_equal(str_item(j, "model"), odd_model);
    assert_string_equal(str_item(j, "arch"), "qwen2");
    /* integers print as digits, floats read back as the model's float values */
    char want[128];
    snprintf(want, sizeof want, "\"weight_bytes\":%.0f,", num_item(j, "weight_bytes"));
    assert_non_null(strstr(text, want));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(odd_model, NULL, &m));
    const struct tern_model_info *in = tern_model_get_info(m);
    assert_true((float)num_item(j, "rms_eps") == (float)test_hparam(m, "rms_eps"));
    assert_true((float)num_item(j, "rope_freq_base") == (float)test_hparam(m, "rope_freq_base"));
    assert_int_equal((uint64_t)num_item(j, "weight_bytes"), in->weight_bytes);
    tern_model_free(m);
    const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kv_cache"), 0);
    assert_int_equal((int)num_item(kv, "ctx"), 512);
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "tensor_types"), "Q8_0")));
    free(text);
    cJSON_Delete(j);
}

static void test_bench(void **state)
{
    (void)state;
    NEED_MODEL();
    char *text;
    cJSON *j = run_json((const char *const[]){"bench", "-m", odd_model, "-p", "8", "-n", "2", "-r",
                                              "2", "-t", "1", "--profile", "--json", NULL},
                        &text);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    const cJSON *t;
    cJSON_ArrayForEach(t, j) {
        assert_string_equal(str_item(t, "model_filename"), odd_model);
        assert_true(num_item(t, "avg_ts") > 0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "samples_ts")), 2);
        assert_true(cJSON_IsArray(cJSON_GetObjectItem(t, "profile")));
        char want[128];
        snprintf(want, sizeof want, "\"model_size\":%.0f,", num_item(t, "model_size"));
        assert_non_null(strstr(text, want));
    }
    free(text);
    cJSON_Delete(j);
    /* --prompt-cache: one object per model */
    j = run_json((const char *const[]){"bench", "--prompt-cache", "-m", odd_model, "-t", "1",
                                       "--json", NULL},
                 NULL);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "warm_identical")));
    assert_true(num_item(j, "prefix_tokens") > 0);
    cJSON_Delete(j);
}

static void test_cache_ls_and_bench(void **state)
{
    (void)state;
    NEED_MODEL();
    char cache[1200];
    snprintf(cache, sizeof cache, "%s/cache \"q\" \\ \n", odd_dir);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(odd_model, NULL, &m));
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = cache};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_context_params cp = {.n_ctx = 64, .n_threads = 1};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = 300 + 11 * i;
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, toks, 40, &reused));
    assert_tern_ok(tern_prefix_cache_save(pc));
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    tern_model_free(m);

    cJSON *j = run_json((const char *const[]){"cache", "ls", cache, "--json", NULL}, NULL);
    assert_string_equal(str_item(j, "dir"), cache);
    assert_int_equal((int)num_item(j, "n_files"), 2);
    assert_int_equal((int)num_item(j, "longest_prefix_tokens"), 32);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "files")) {
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(f, "valid")));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(f, "usable")));
        assert_int_equal(strlen(str_item(f, "model_fp")), 16);
    }
    cJSON_Delete(j);

    j = run_json((const char *const[]){"cache", "bench", "-m", odd_model, "-t", "1", "--requests",
                                       "8", "--reps", "1", "--json", NULL},
                 NULL);
    assert_int_equal((int)num_item(j, "n_requests"), 8);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "disk_identical")));
    cJSON_Delete(j);
}

/* One JSON line per position; with --logits all every logit reads back as the float the
 * library computes for the same tokens. --ref --json is one object. */
static void test_probe(void **state)
{
    (void)state;
    NEED_MODEL();
    char *out, *err;
    int rc = run_tern((const char *const[]){"probe", "-m", odd_model, "--tokens", "1,2,3", "--top",
                                            "5", "--logits", "all", "-t", "1", NULL},
                      &out, &err);
    assert_int_equal(rc, 0);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(odd_model, NULL, &m));
    struct tern_context_params cp = {.n_ctx = 3, .n_batch = 3, .n_threads = 1};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    const int32_t ids[3] = {1, 2, 3};
    assert_tern_ok(tern_decode(ctx, ids, 3, 0, TERN_LOGITS_ALL));
    const int nv = tern_model_n_vocab(m);
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *j = cJSON_Parse(line);
        if (!j) fail_msg("probe line %d is not JSON: %.200s", lines, line);
        assert_int_equal((int)num_item(j, "pos"), lines);
        assert_int_equal((int)num_item(j, "token"), ids[lines]);
        const float *lg = tern_context_logits(ctx, lines);
        const cJSON *top = cJSON_GetObjectItem(j, "top");
        assert_int_equal(cJSON_GetArraySize(top), 5);
        const cJSON *e;
        cJSON_ArrayForEach(e, top) {
            int id = cJSON_GetArrayItem(e, 0)->valueint;
            assert_true((float)cJSON_GetArrayItem(e, 1)->valuedouble == lg[id]);
        }
        const cJSON *all = cJSON_GetObjectItem(j, "logits");
        assert_int_equal(cJSON_GetArraySize(all), nv);
        int id = 0;
        cJSON_ArrayForEach(e, all) {
            if ((float)e->valuedouble != lg[id])
                fail_msg("pos %d id %d: printed %.9g, computed %.9g", lines, id, e->valuedouble,
                         (double)lg[id]);
            id++;
        }
        cJSON_Delete(j);
    }
    assert_int_equal(lines, 3);
    tern_context_free(ctx);
    tern_model_free(m);
    free(out);
    free(err);

    TEST_SHARED_OR_SKIP(ref, REF);
    char refp[4096];
    snprintf(refp, sizeof refp, "%s", ref);
    cJSON *j = run_json((const char *const[]){"probe", "-m", odd_model, "--ref", refp, "-t", "1",
                                              "--json", NULL},
                        NULL);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "pass")));
    assert_true(num_item(j, "vectors") > 0);
    assert_true(num_item(j, "tol") > 0);
    cJSON_Delete(j);
}

static void test_tokenize(void **state)
{
    (void)state;
    NEED_MODEL();
    cJSON *j = run_json((const char *const[]){"tokenize", "-m", odd_model, "-p",
                                              "say \"hi\" \\ \n twice", "--json", NULL},
                        NULL);
    assert_true(cJSON_IsArray(j));
    assert_true(cJSON_GetArraySize(j) > 3);
    cJSON_Delete(j);
    char *out, *err;
    assert_int_equal(run_tern((const char *const[]){"tokenize", "-m", odd_model, "-p", "a\nb c\n",
                                                    "--lines", NULL},
                              &out, &err),
                     0);
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        j = cJSON_Parse(line);
        assert_true(cJSON_IsArray(j));
        cJSON_Delete(j);
    }
    assert_int_equal(lines, 2);
    free(out);
    free(err);
}

/* A token outside the vocabulary: tern_decode refuses it after the context exists; the CLI must
 * say so, exit 1, and free the context (under the ASan build run_tern fails on the leak report). */
static void test_probe_bad_token(void **state)
{
    (void)state;
    NEED_MODEL();
    char *out, *err;
    int rc = run_tern((const char *const[]){"probe", "-m", odd_model, "--tokens", "1,99999999", NULL},
                      &out, &err);
    print_message("exit %d: %s", rc, err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "outside the vocabulary"));
    assert_string_equal(out, "");
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_cache_ls_and_bench),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_tokenize),
        cmocka_unit_test(test_probe_bad_token),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
