/* test_grammar_cli.c — `tern grammar check` and `tern grammar bench` as a user runs them.
 *
 * check: for several corpus schemas (tests/data/grammar/schemas) the output has one JSON line
 * per document, {"accept": true} exactly for the valid instances (the labels the corpus test
 * cross-checks with an independent validator), refusals carry token, offset and reason; the
 * tool-call grammar with --json-lines documents; GBNF; usage and input errors exit 2 and 1
 * with messages. bench: the --json object has the documented keys. The whole corpus goes
 * through the same library calls in test_grammar_schema. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "grammar_validator.h"

/* Run a shell command; stdout into *out (malloc'ed), exit status returned. */
static int run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t r; (r = fread(b + n, 1, cap - n - 1, p)) > 0;) {
        n += r;
        if (n + 1 == cap) b = realloc(b, cap *= 2);
    }
    b[n] = 0;
    int st = pclose(p);
    *out = b;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
}

static void check_schema_file(const char *name, const char *vocab)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/schemas/%s.json", test_source_dir(), name);
    size_t len;
    char *txt = test_read_file(path, &len);
    assert_non_null(txt);
    cJSON *d = cJSON_Parse(txt);
    free(txt);
    char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItem(d, "schema"));
    char spath[1024], dpath[1024];
    snprintf(spath, sizeof spath, "%s/%s.schema.json", test_tmpdir(), name);
    snprintf(dpath, sizeof dpath, "%s/%s.docs", test_tmpdir(), name);
    write_file(spath, schema);
    FILE *f = fopen(dpath, "wb");
    int n = 0;
    bool labels[256];
    static const char *lists[] = {"valid", "invalid"};
    for (int k = 0; k < 2; k++)
        for (cJSON *v = cJSON_GetObjectItem(d, lists[k])->child; v; v = v->next) {
            char *t = gv_text(v);
            fprintf(f, "%s\n", t);
            free(t);
            labels[n++] = k == 0;
        }
    fclose(f);
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --json-schema %s %s 2>/dev/null", test_tern_bin(), vocab, spath, dpath);
    assert_int_equal(run(cmd, &out), 0);
    int line = 0;
    for (char *s = out, *nl; *s; s = nl + 1, line++) {
        nl = strchr(s, '\n');
        assert_non_null(nl);
        *nl = 0;
        cJSON *j = cJSON_Parse(s);
        if (!j) fail_msg("%s: not JSON: %s", name, s);
        bool acc = cJSON_IsTrue(cJSON_GetObjectItem(j, "accept"));
        if (line >= n || acc != labels[line]) fail_msg("%s line %d: %s (label %s)", name, line + 1, s, labels[line] ? "valid" : "invalid");
        if (!acc) {
            assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "token")));
            assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "offset")));
            assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "reason")));
        }
        cJSON_Delete(j);
    }
    assert_int_equal(line, n);
    free(out);
    free(schema);
    cJSON_Delete(d);
}

static void test_check_corpus(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(q, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    const char *l3 = test_shared_path("fixtures/tokenizer/ggml-vocab-llama3-tiktoken.gguf");
    check_schema_file("03_create_calendar_event", q);
    check_schema_file("45_payment_method", q);
    check_schema_file("56_regex_features", l3);
    check_schema_file("08_place_order", l3);
}

static void test_check_tools_gbnf(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(q, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    char tools[1024], docs[1024], cmd[4096], *out;
    snprintf(tools, sizeof tools, "%s/tools.json", test_tmpdir());
    snprintf(docs, sizeof docs, "%s/calls.jsonl", test_tmpdir());
    write_file(tools, "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
                      " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"], \"additionalProperties\": false}}}]");
    write_file(docs, "\"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": {\\\"city\\\": \\\"Oslo\\\"}}\\n</tool_call>\"\n"
                     "\"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": {}}\\n</tool_call>\"\n"
                     "\"I think <tool_call>\"\n");
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --tools %s --tool-choice required --json-lines %s 2>/dev/null", test_tern_bin(), q, tools, docs);
    assert_int_equal(run(cmd, &out), 0);
    char *l2 = strchr(out, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    assert_true(!strncmp(out, "{\"accept\": true}\n", 17));
    assert_non_null(strstr(l2, "\"accept\":false"));
    assert_non_null(strstr(l3, "\"accept\":false,\"token\":0,\"offset\":0"));
    free(out);
    /* auto: free text then a call */
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --tools %s --tool-choice auto --json-lines %s 2>/dev/null", test_tern_bin(), q, tools, docs);
    assert_int_equal(run(cmd, &out), 0);
    l2 = strchr(out, '\n') + 1;
    l3 = strchr(l2, '\n') + 1;
    assert_true(!strncmp(out, "{\"accept\": true}\n", 17));
    assert_non_null(strstr(l2, "\"accept\":false"));
    assert_non_null(strstr(l3, "not complete")); /* inside an opened call at the end */
    free(out);
    /* GBNF from stdin, documents with newlines as JSON strings */
    snprintf(cmd, sizeof cmd, "printf -- '\"- a\\\\n- b\\\\n\"\\n\"\"\\n\"* c\\\\n\"\\n' | %s grammar check -m %s --grammar %s/tests/data/grammar/gbnf/list.gbnf --json-lines - 2>/dev/null",
             test_tern_bin(), q, test_source_dir());
    assert_int_equal(run(cmd, &out), 0);
    assert_string_equal(out, "{\"accept\": true}\n"
                             "{\"accept\":false,\"token\":0,\"offset\":0,\"reason\":\"the document is not complete (expected '-')\"}\n"
                             "{\"accept\":false,\"token\":0,\"offset\":0,\"reason\":\"token 9 refused: its byte 0 ('*') is not allowed at offset 0 (expected '-')\"}\n");
    free(out);
}

static void test_bench_json(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(g2, "fixtures/tokenizer/ggml-vocab-gpt-2.gguf");
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s grammar bench -m %s --json-schema %s/tests/fuzz/corpus/schema/01_get_weather.json --n-docs 8 --reps 3 --json",
             test_tern_bin(), g2, test_source_dir());
    assert_int_equal(run(cmd, &out), 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON: %s", out);
    static const char *keys[] = {"compile_ms", "mask_us_p50", "mask_us_p90", "mask_us_p99", "mask_us_max", "n_tokens", "grammar_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!cJSON_IsNumber(cJSON_GetObjectItem(j, keys[i]))) fail_msg("no number %s in %s", keys[i], out);
    assert_true(cJSON_GetObjectItem(j, "n_tokens")->valuedouble > 8);
    assert_int_equal((int)cJSON_GetObjectItem(j, "skipped_docs")->valuedouble, 0);
    cJSON_Delete(j);
    free(out);
}

static void test_errors(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(g2, "fixtures/tokenizer/ggml-vocab-gpt-2.gguf");
    char bad[1024], cmd[4096], *out;
    snprintf(bad, sizeof bad, "%s/bad.json", test_tmpdir());
    write_file(bad, "{\"type\": \"object\",\n \"properties\": {\"when\": {\"type\": \"string\", \"format\": \"duration\"}}}");
    static const struct { const char *args; int rc; const char *msg; } t[] = {
        {"check -m %s --json-schema %s -", 1, "$.properties.when.format: unsupported format \"duration\""},
        {"check -m %s --json-schema %s --schema-lenient /dev/null", 0, "warning: $.properties.when.format"},
        {"check -m %s --json-schema %s --grammar x -", 2, "exactly one of"},
        {"check -m %s --json-schema %s", 2, "missing the input"},
        {"check -m %s --json-schema %s --ws pretty -", 2, "--ws: 'pretty'"},
        {"bench -m %s --json-schema %s --n-docs 0", 2, "--n-docs"},
        {"frobnicate -m %s %s", 2, "unknown subcommand"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char args[2048];
        snprintf(args, sizeof args, t[i].args, g2, bad);
        snprintf(cmd, sizeof cmd, "%s grammar %s < /dev/null 2>&1", test_tern_bin(), args);
        int rc = run(cmd, &out);
        if (rc != t[i].rc || !strstr(out, t[i].msg)) fail_msg("%s: exit %d '%s', wanted %d with '%s'", args, rc, out, t[i].rc, t[i].msg);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_check_tools_gbnf),
        cmocka_unit_test(test_check_corpus),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
