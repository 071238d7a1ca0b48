/* test_gen_grammar_cli.c — constrained decoding through the CLI: `tern chat --tools
 * --tool-choice required` on a fixture model makes calls that parse and validate (the call's
 * name is an offered tool, its arguments pass grammar_validator.h against that tool's
 * parameters) at every seed tried; `tern run --json-schema` output validates and reports its
 * stats, running out of -n inside the document says "incomplete"; `tern bench --json-schema`
 * prints the ratio; bad flags and files give clear errors with the right exit status. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "grammar_validator.h"

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 20},"
    " \"unit\": {\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"day\": {\"type\": \"string\", \"format\": \"date\"}, \"utc\": {\"type\": \"boolean\"}},"
    " \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": -50, \"maximum\": 50}, \"b\": {\"type\": \"integer\","
    " \"minimum\": 0, \"maximum\": 9}}, \"required\": [\"a\", \"b\"], \"additionalProperties\": false}}}]";

static const char SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 16},"
    " \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\"]}, \"maxItems\": 3}},"
    " \"required\": [\"name\", \"tags\"], \"additionalProperties\": false}";

static char tools_path[4096], schema_path[4096], bad_schema[4096], gbnf_path[4096];

static void write_file(const char *path, const char *data)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, strlen(data), f), strlen(data));
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tools_path, sizeof tools_path, "%s/tools.json", test_tmpdir());
    snprintf(schema_path, sizeof schema_path, "%s/schema.json", test_tmpdir());
    snprintf(bad_schema, sizeof bad_schema, "%s/bad.json", test_tmpdir());
    snprintf(gbnf_path, sizeof gbnf_path, "%s/g.gbnf", test_tmpdir());
    write_file(tools_path, TOOLS);
    write_file(schema_path, SCHEMA);
    write_file(bad_schema, "{\"type\": \"object\", \"properties\": {\"when\": {\"type\": \"string\", \"format\": \"duration\"}}}");
    write_file(gbnf_path, "root ::= \"yes\" | \"no\"\n");
    return 0;
}

/* Run `tern <args>` with stdin text; stdout and stderr malloc'ed; returns the exit status. */
static int tern(const char *args, const char *input, char **out, char **err)
{
    char in_path[4096], err_path[4096], out_path[4096], cmd[32768];
    snprintf(in_path, sizeof in_path, "%s/stdin.txt", test_tmpdir());
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", test_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    write_file(in_path, input);
    snprintf(cmd, sizeof cmd, "%s %s < %s > %s 2> %s", test_tern_bin(), args, in_path, out_path, err_path);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    *out = test_read_file(out_path, NULL);
    *err = test_read_file(err_path, NULL);
    assert_non_null(*out);
    assert_non_null(*err);
    return rc;
}

static const cJSON *tool_params(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring, name))
            return cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    }
    return NULL;
}

static void test_chat_tools_required(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s", model);
    cJSON *tools = cJSON_Parse(TOOLS);
    assert_non_null(tools);
    int calls = 0, names[3] = {0};
    for (int seed = 1; seed <= 16; seed++) {
        char args[16384], *out, *err;
        snprintf(args, sizeof args, "chat -m %s --tools %s --tool-choice required --temp 1 -s %d -n 160 --json",
                 mpath, tools_path, seed);
        assert_int_equal(tern(args, "What is the weather in Paris?\n", &out, &err), 0);
        /* the last line is the turn */
        char *last = out + strlen(out);
        while (last > out && last[-1] == '\n') *--last = 0;
        while (last > out && last[-1] != '\n') last--;
        cJSON *turn = cJSON_Parse(last);
        if (!turn) fail_msg("seed %d: not JSON: %s", seed, last);
        /* parallel calls are allowed: a random model may keep calling until -n runs out inside
         * a call, which must then be reported (the calls before it still count) */
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(turn, "incomplete")))
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                    cJSON_GetObjectItemCaseSensitive(turn, "stats"), "stop")), "max_tokens");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(turn, "tool_calls");
        if (cJSON_GetArraySize(tc) < 1) fail_msg("seed %d: no tool call: %s", seed, last);
        const cJSON *c;
        cJSON_ArrayForEach(c, tc)
        {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
            assert_non_null(name);
            const cJSON *params = tool_params(tools, name);
            if (!params) fail_msg("seed %d: call to '%s', which is not offered", seed, name);
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            if (!cJSON_IsObject(a) || !gv_valid(params, params, a, 0))
                fail_msg("seed %d: arguments of %s do not validate: %s", seed, name, last);
            names[!strcmp(name, "get_weather") ? 0 : !strcmp(name, "get_time") ? 1 : 2]++;
            calls++;
        }
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(turn, "stats"), "grammar");
        assert_non_null(g);
        assert_true(cJSON_GetObjectItemCaseSensitive(g, "forced_tokens")->valueint > 0);
        cJSON_Delete(turn);
        free(out);
        free(err);
    }
    print_message("%d calls: get_weather %d, get_time %d, add %d\n", calls, names[0], names[1], names[2]);
    /* sampling at temperature 1 picks among the tools, not always the same one */
    assert_true((names[0] > 0) + (names[1] > 0) + (names[2] > 0) >= 2);
    /* a named tool: every call is that tool */
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "chat -m %s --tools %s --tool-choice add --temp 1 -s 5 -n 160 --json", mpath, tools_path);
    assert_int_equal(tern(args, "Add 2 and 3\n", &out, &err), 0);
    assert_non_null(strstr(out, "\"name\":\"add\""));
    assert_null(strstr(out, "\"name\":\"get_"));
    free(out);
    free(err);
    cJSON_Delete(tools);
}

static void test_run_json_schema(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s", model);
    cJSON *schema = cJSON_Parse(SCHEMA);
    for (int seed = 1; seed <= 6; seed++) {
        char args[16384], *out, *err;
        snprintf(args, sizeof args, "run -m %s -p 'JSON: ' --json-schema %s --temp 1 -s %d -n 96 --json", mpath, schema_path, seed);
        assert_int_equal(tern(args, "", &out, &err), 0);
        cJSON *j = cJSON_Parse(out);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "stop")->valuestring, "done");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "incomplete")));
        cJSON *doc = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(j, "text")->valuestring);
        if (!doc || !gv_valid(schema, schema, doc, 0)) fail_msg("seed %d: %s", seed, out);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "grammar");
        assert_true(cJSON_GetObjectItemCaseSensitive(g, "masks")->valueint > 0);
        assert_true(cJSON_GetObjectItemCaseSensitive(g, "forced_tokens")->valueint > 0);
        cJSON_Delete(doc);
        cJSON_Delete(j);
        free(out);
        free(err);
    }
    /* out of -n inside the document: stop max_tokens, incomplete, said on stderr too */
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "run -m %s -p 'JSON: ' --json-schema %s -n 4 --json", mpath, schema_path);
    assert_int_equal(tern(args, "", &out, &err), 0);
    assert_non_null(strstr(out, "\"stop\":\"max_tokens\""));
    assert_non_null(strstr(out, "\"incomplete\":true"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "run -m %s -p 'JSON: ' --json-schema %s -n 4", mpath, schema_path);
    assert_int_equal(tern(args, "", &out, &err), 0);
    assert_non_null(strstr(err, "INCOMPLETE"));
    free(out);
    free(err);
    /* a GBNF grammar: the answer is one of its words */
    snprintf(args, sizeof args, "run -m %s -p 'Q: ' --grammar %s --temp 1 -s 2 -n 16 --json", mpath, gbnf_path);
    assert_int_equal(tern(args, "", &out, &err), 0);
    assert_true(strstr(out, "\"text\":\"yes\"") || strstr(out, "\"text\":\"no\""));
    free(out);
    free(err);
    cJSON_Delete(schema);
}

static void test_bench_ratio(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "bench -m %s --json-schema %s -n 48 -t 1 -r 2 --json", model, schema_path);
    assert_int_equal(tern(args, "", &out, &err), 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON: %s", out);
    /* wall-clock ratios of millisecond runs on a shared machine are noise: only their presence
     * and sign are checked; the CPU share of grammar work is bounded (a few % at most here) */
    assert_true(cJSON_GetObjectItemCaseSensitive(j, "ratio")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(j, "ratio_cpu")->valuedouble > 0);
    const double share = cJSON_GetObjectItemCaseSensitive(j, "grammar_cpu_share")->valuedouble;
    assert_true(share > 0 && share < 0.5);
    assert_true(cJSON_GetObjectItemCaseSensitive(j, "forced_tokens")->valueint <= cJSON_GetObjectItemCaseSensitive(j, "n_tokens")->valueint);
    assert_true(cJSON_GetObjectItemCaseSensitive(j, "tps_unconstrained")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(j, "n_tokens")->valueint > 0);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(j, "mask_us_per_mask"));
    cJSON_Delete(j);
    free(out);
    free(err);
}

static void test_bad_input(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s", model);
    static const struct { const char *fmt; int rc; const char *msg; } cases[] = {
        {"run -m %s -p x --json-schema /nonexistent/s.json", 1, "cannot read --json-schema /nonexistent/s.json"},
        {"run -m %s -p x --json-schema %s", 1, "$.properties.when"},
        {"run -m %s -p x --json-schema S --grammar G", 2, "not both"},
        {"run -m %s -p x --ws nice", 2, "--ws: 'nice'"},
        {"run -m %s -p x --schema-lenient", 2, "apply to --json-schema"},
        {"run -m %s -p x --json-schema", 2, "--json-schema"},
        {"chat -m %s --tool-choice required", 2, "--tool-choice needs tools"},
        {"chat -m %s --tools %s --tool-choice nosuch", 1, "\"nosuch\", which is not among the tools"},
        {"chat -m %s --tools T --tool-choice auto --json-schema S", 2, "cannot be combined"},
        {"bench -m %s --json-schema S --draft ngram", 2, "cannot be combined"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[16384], *out, *err;
        const char *second = strstr(cases[i].fmt, "--tools %s") ? tools_path : bad_schema;
        snprintf(args, sizeof args, cases[i].fmt, mpath, second);
        const int rc = tern(args, "hi\n", &out, &err);
        if (rc != cases[i].rc || !strstr(err, cases[i].msg))
            fail_msg("tern %s -> %d (want %d), stderr lacks '%s':\n%s", args, rc, cases[i].rc, cases[i].msg, err);
        free(out);
        free(err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_tools_required),
        cmocka_unit_test(test_run_json_schema),
        cmocka_unit_test(test_bench_ratio),
        cmocka_unit_test(test_bad_input),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
