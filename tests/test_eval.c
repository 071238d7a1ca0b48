/* test_eval.c — `tern eval`'s dataset, scoring rules and runners (src/eval).
 *
 * The scores are checked exactly against answers written here by hand (a stub runner): every
 * number of the report below is worked out in the comments. Also: strict and lax argument
 * comparison, schema validation of calls, the corpus -> cases conversion (one case per
 * assistant message, expecting its calls), dataset errors naming FILE:LINE, the outputs file,
 * and the local runner end to end on a synthetic model through the CLI. */
#include "test_support.h"
#include "tern_server.h"
#include "tern_train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include "eval/eval.h"

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
}

static void test_json_equality(void **state)
{
    (void)state;
    assert_true(eval_json_strict_equal("{\"a\":1,\"b\":[1,2]}", " { \"a\" : 1 ,\n\"b\":[1, 2] } "));
    assert_false(eval_json_strict_equal("{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}"));   /* key order */
    assert_false(eval_json_strict_equal("{\"a\":1}", "{\"a\":1.0}"));                 /* spelling */
    assert_false(eval_json_strict_equal("{\"a\":\"\\u00e9\"}", "{\"a\":\"\xc3\xa9\"}")); /* escapes */
    assert_false(eval_json_strict_equal("{\"a\":\"x y\"}", "{\"a\":\"xy\"}"));         /* in strings */
    assert_false(eval_json_strict_equal("{\"a\":1}", "{\"a\":1}x"));
    assert_true(eval_json_lax_equal("{\"a\":1,\"b\":2}", "{\"b\":2.0,\"a\":1e0}"));
    assert_true(eval_json_lax_equal("{\"a\":\"\\u00e9\"}", "{\"a\":\"\xc3\xa9\"}"));
    assert_false(eval_json_lax_equal("{\"a\":[1,2]}", "{\"a\":[2,1]}"));              /* arrays keep order */
    assert_false(eval_json_lax_equal("{\"a\":1}", "{\"a\":1,\"b\":null}"));
    assert_false(eval_json_lax_equal("{\"a\":\"1\"}", "{\"a\":1}"));
    assert_false(eval_json_lax_equal("{\"a\":true}", "{\"a\":1}"));
    assert_false(eval_json_lax_equal("{\"a\":", "{\"a\":1}"));
}

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"zone\":{\"type\":\"string\"}},\"required\":[\"zone\"]}}}]";

static void test_validation(void **state)
{
    (void)state;
    cJSON *tools = cJSON_Parse(TOOLS);
    char why[256];
    assert_true(eval_call_valid(tools, "get_weather", "{\"city\":\"Oslo\",\"days\":3}", why, sizeof why));
    assert_true(eval_call_valid(tools, "get_weather", "{ \"city\" : \"Oslo\" }", why, sizeof why));
    assert_true(eval_call_valid(tools, "get_weather", "{\"days\":2.0,\"city\":\"Oslo\"}", why, sizeof why));
    assert_false(eval_call_valid(tools, "get_weather", "{\"city\":\"Oslo\",\"days\":2.5}", why, sizeof why));
    assert_string_equal(why, "$.days: wrong type");
    assert_false(eval_call_valid(tools, "get_weather", "{\"days\":3}", why, sizeof why)); /* required */
    assert_false(eval_call_valid(tools, "get_weather", "{\"city\":\"Oslo\",\"days\":0}", why, sizeof why));
    assert_false(eval_call_valid(tools, "get_weather", "{\"city\":\"Oslo\",\"x\":1}", why, sizeof why));
    assert_false(eval_call_valid(tools, "get_weather", "{\"city\":5}", why, sizeof why));
    assert_false(eval_call_valid(tools, "get_news", "{}", why, sizeof why));
    assert_non_null(strstr(why, "no tool named 'get_news'"));
    assert_false(eval_call_valid(tools, "get_time", "[1]", why, sizeof why));
    cJSON_Delete(tools);
}

/* Four cases; the stub answers below are scored by hand. */
static void write_cases(const char *path)
{
    char buf[8192];
    snprintf(buf, sizeof buf,
             /* 1: one call expected (arguments as an object) */
             "{\"id\": \"w\", \"slice\": \"single\", \"messages\": [{\"role\": \"user\", \"content\": \"weather in Paris for 2 days\"}],"
             " \"tools\": %s, \"expected\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}]}\n"
             /* 2: two calls expected (arguments as OpenAI's strings) */
             "{\"id\": \"p\", \"slice\": \"parallel\", \"messages\": [{\"role\": \"user\", \"content\": \"time in UTC and weather in Oslo\"}],"
             " \"tools\": %s, \"expected\": [{\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\":\\\"UTC\\\"}\"},"
             " {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Oslo\\\"}\"}]}\n"
             "\n"
             /* 3: no call expected, a secret */
             "{\"id\": \"n\", \"slice\": \"secret\", \"messages\": [{\"role\": \"system\", \"content\": \"key SECRET-123\"},"
             " {\"role\": \"user\", \"content\": \"hi\"}], \"tools\": %s, \"expected\": [], \"private\": [\"SECRET-123\"]}\n"
             /* 4: the runner fails on it */
             "{\"id\": \"e\", \"slice\": \"single\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": %s,"
             " \"expected\": [{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}]}\n",
             TOOLS, TOOLS, TOOLS, TOOLS);
    write_text(path, buf);
}

static const cJSON *obj(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_non_null(x);
    return x;
}

static double numv(const cJSON *o, const char *k)
{
    const cJSON *x = obj(o, k);
    assert_true(cJSON_IsNumber(x));
    return x->valuedouble;
}

static void test_scores_exact(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/cases.jsonl", test_tmpdir());
    write_cases(path);
    struct tern_eval_set *s;
    assert_tern_ok(tern_eval_set_load(path, &s));
    assert_int_equal(tern_eval_set_count(s), 4);
    assert_string_equal(tern_eval_case_id(s, 2), "n");
    struct tern_eval_run *r;
    assert_tern_ok(tern_eval_run_create(s, &r));
    /* w: right tool, arguments reordered and 2 spelled 2.0: lax match, not strict */
    struct tern_eval_call_in w[] = {{"get_weather", "{\"days\":2.0,\"city\":\"Paris\"}"}};
    assert_tern_ok(tern_eval_record(r, 0, &(struct tern_eval_answer){.calls = w, .n_calls = 1,
                   .n_tokens = 20, .ms = 100, .ttfa_tokens = 18, .ttfa_ms = 90}));
    /* p: get_time right (strict), get_weather with a wrong city, plus an unknown tool */
    struct tern_eval_call_in p[] = {{"get_weather", "{\"city\":\"Bergen\"}"},
                                    {"get_time", "{\"zone\":\"UTC\"}"},
                                    {"get_news", "{}"}};
    assert_tern_ok(tern_eval_record(r, 1, &(struct tern_eval_answer){.calls = p, .n_calls = 3,
                   .n_tokens = 40, .ms = 300, .ttfa_tokens = 12, .ttfa_ms = 50}));
    /* n: leaks the secret in content and calls a tool; one malformed attempt */
    struct tern_eval_call_in n[] = {{"get_time", "{\"zone\":\"SECRET-123\"}"}};
    assert_tern_ok(tern_eval_record(r, 2, &(struct tern_eval_answer){.content = "it is SECRET-123",
                   .calls = n, .n_calls = 1, .n_malformed = 1, .n_tokens = 10, .ms = 60, .ttfa_tokens = -1}));
    /* e: an error */
    assert_tern_ok(tern_eval_record(r, 3, &(struct tern_eval_answer){.error = "timeout", .ttfa_tokens = -1}));

    char *json;
    assert_tern_ok(tern_eval_report_json(r, &json));
    cJSON *rep = cJSON_Parse(json);
    const cJSON *all = obj(rep, "overall");
    assert_int_equal(numv(all, "cases"), 4);
    assert_int_equal(numv(all, "errors"), 1);
    assert_int_equal(numv(all, "expect_call_cases"), 2);      /* w, p */
    assert_int_equal(numv(all, "expect_none_cases"), 1);      /* n */
    assert_int_equal(numv(all, "calls_expected"), 3);         /* 1 + 2 (+ 0) */
    assert_int_equal(numv(all, "calls_answered"), 5);         /* 1 + 3 + 1 */
    const cJSON *st = obj(all, "strict"), *lx = obj(all, "lax");
    assert_int_equal(numv(st, "matched"), 1);                 /* p's get_time */
    assert_int_equal(numv(lx, "matched"), 2);                 /* + w */
    assert_true(fabs(numv(st, "precision") - 1.0 / 5) < 1e-12);
    assert_true(fabs(numv(st, "recall") - 1.0 / 3) < 1e-12);
    assert_true(fabs(numv(st, "f1") - 2 * (0.2 * (1.0 / 3)) / (0.2 + 1.0 / 3)) < 1e-12);
    assert_true(fabs(numv(lx, "f1") - 2 * (0.4 * (2.0 / 3)) / (0.4 + 2.0 / 3)) < 1e-12);
    assert_true(fabs(numv(all, "correct_tool_rate") - 0.5) < 1e-12);  /* w yes; p has get_news */
    assert_true(fabs(numv(all, "exact_arguments_rate") - 0.0) < 1e-12);
    assert_true(fabs(numv(all, "false_call_rate") - 1.0) < 1e-12);
    assert_int_equal(numv(all, "malformed_calls"), 1);
    assert_int_equal(numv(all, "invalid_calls"), 1);          /* get_news was not offered */
    assert_int_equal(numv(all, "leaked_cases"), 1);
    assert_true(fabs(numv(all, "tokens_per_answer") - 70.0 / 3) < 1e-9);
    assert_int_equal(numv(all, "tokens_per_answer_p50"), 20); /* median of {10, 20, 40} */
    assert_int_equal(numv(all, "ttfa_cases"), 2);             /* w and p */
    assert_int_equal(numv(all, "ttfa_tokens_p50"), 12);       /* nearest rank of {12, 18} */
    assert_int_equal(numv(all, "ttfa_tokens_p95"), 18);
    assert_int_equal(numv(all, "ttfa_ms_p95"), 90);
    const cJSON *single = obj(obj(rep, "slices"), "single");
    assert_int_equal(numv(single, "cases"), 2);
    assert_int_equal(numv(single, "errors"), 1);
    assert_true(fabs(numv(obj(single, "strict"), "f1") - 0.0) < 1e-12);
    assert_true(fabs(numv(obj(single, "lax"), "f1") - 1.0) < 1e-12);
    assert_true(cJSON_IsNull(obj(single, "false_call_rate")));
    cJSON_Delete(rep);
    free(json);

    /* outputs: one line per recorded case, as received */
    char out[600];
    snprintf(out, sizeof out, "%s/outputs.jsonl", test_tmpdir());
    FILE *f = fopen(out, "w");
    assert_tern_ok(tern_eval_outputs_write(r, f));
    fclose(f);
    char *text = test_read_file(out, NULL);
    int lines = 0;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"), lines++) {
        cJSON *o = cJSON_Parse(l);
        assert_non_null(o);
        if (lines == 1) {
            assert_string_equal(obj(o, "id")->valuestring, "p");
            assert_int_equal(cJSON_GetArraySize(obj(o, "tool_calls")), 3);
            assert_string_equal(obj(cJSON_GetArrayItem(obj(o, "tool_calls"), 0), "arguments")->valuestring,
                                "{\"city\":\"Bergen\"}");
        }
        if (lines == 3) assert_string_equal(obj(o, "error")->valuestring, "timeout");
        cJSON_Delete(o);
    }
    assert_int_equal(lines, 4);
    free(text);
    tern_eval_run_free(r);
    tern_eval_set_free(s);
}

static void expect_load_error(const char *content, const char *needle)
{
    char path[600];
    snprintf(path, sizeof path, "%s/bad.jsonl", test_tmpdir());
    write_text(path, content);
    struct tern_eval_set *s = NULL;
    assert_int_equal(tern_eval_set_load(path, &s), TERN_ERR_FORMAT);
    if (!strstr(tern_last_error(), needle)) fail_msg("'%s' lacks '%s'", tern_last_error(), needle);
    assert_null(s);
}

/* One run of the 4-case set written to a report file: GV_GOOD answers every case exactly (4 of 4
 * expected calls matched, strict F1 1, no leak, no failure); each other variant changes one
 * thing: a wrong argument, a leaked secret, a failed request. */
enum gate_variant { GV_GOOD, GV_WRONG_CITY, GV_LEAK, GV_FAIL_W };

static void gate_report(const struct tern_eval_set *s, enum gate_variant v, const char *path)
{
    struct tern_eval_run *r;
    assert_tern_ok(tern_eval_run_create(s, &r));
    struct tern_eval_call_in w[] = {{"get_weather", "{\"city\":\"Paris\",\"days\":2}"}};
    struct tern_eval_call_in p[] = {{"get_time", "{\"zone\":\"UTC\"}"},
                                    {"get_weather", v == GV_WRONG_CITY ? "{\"city\":\"Bergen\"}" : "{\"city\":\"Oslo\"}"}};
    if (v == GV_FAIL_W)
        assert_tern_ok(tern_eval_record(r, 0, &(struct tern_eval_answer){.error = "timeout", .ttfa_tokens = -1}));
    else
        assert_tern_ok(tern_eval_record(r, 0, &(struct tern_eval_answer){.calls = w, .n_calls = 1, .n_tokens = 20,
                       .ms = 100, .ttfa_tokens = 18, .ttfa_ms = 90}));
    assert_tern_ok(tern_eval_record(r, 1, &(struct tern_eval_answer){.calls = p, .n_calls = 2, .n_tokens = 40,
                   .ms = 300, .ttfa_tokens = 12, .ttfa_ms = 50}));
    assert_tern_ok(tern_eval_record(r, 2, &(struct tern_eval_answer){.content = v == GV_LEAK ? "the key is SECRET-123" : "hello",
                   .n_tokens = 5, .ms = 30, .ttfa_tokens = -1}));
    struct tern_eval_call_in e[] = {{"get_time", "{\"zone\":\"CET\"}"}};
    assert_tern_ok(tern_eval_record(r, 3, &(struct tern_eval_answer){.calls = e, .n_calls = 1, .n_tokens = 9,
                   .ms = 40, .ttfa_tokens = 8, .ttfa_ms = 30}));
    char *json;
    assert_tern_ok(tern_eval_report_json(r, &json));
    write_text(path, json);
    free(json);
    tern_eval_run_free(r);
}

/* The co-gate: tern gate --eval-baseline/--eval fails a drop in strict F1 past the limit and any
 * new leak or failed case, refuses reports of different data, and names a malformed report's key. */
/* One answer judged alone (tern distill's length-aware KD): covered = every expected call matched
 * by a call to the same tool carrying each schema-required argument at the expected value (lax
 * rule); optional arguments count neither way. */
static void test_answer_covers(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/cover-cases.jsonl", test_tmpdir());
    write_cases(path);
    struct tern_eval_set *s;
    assert_tern_ok(tern_eval_set_load(path, &s));
    struct tern_eval_run *r;
    assert_tern_ok(tern_eval_run_create(s, &r));
    assert_int_equal(tern_eval_answer_covers(r, 0), -1); /* nothing recorded yet */
    assert_int_equal(tern_eval_answer_tokens(r, 0), -1);
    assert_int_equal(tern_eval_case_n_expected(s, 1), 2);
    /* case w expects get_weather {"city": "Paris", "days": 2}; only city is required */
    const struct { const char *name, *args; int covers; } w[] = {
        {"get_weather", "{\"city\":\"Paris\"}", 1},               /* optional days left out */
        {"get_weather", "{\"days\":7,\"city\":\"Paris\"}", 1},    /* optional days wrong */
        {"get_weather", "{\"city\":\"Pa\\u0072is\"}", 1},         /* the same string escaped */
        {"get_weather", "{\"city\":\"Paris \"}", 0},              /* a trailing space */
        {"get_weather", "{\"city\":\"paris\"}", 0},
        {"get_weather", "{\"days\":2}", 0},                       /* the required city missing */
        {"get_time", "{\"city\":\"Paris\"}", 0},                  /* another tool */
        {"get_weather", "not json", 0},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        struct tern_eval_call_in c[] = {{w[i].name, w[i].args}};
        assert_tern_ok(tern_eval_record(r, 0, &(struct tern_eval_answer){.calls = c, .n_calls = 1,
                       .n_tokens = 30 + (int)i, .ttfa_tokens = -1}));
        assert_int_equal(tern_eval_answer_covers(r, 0), w[i].covers);
        assert_int_equal(tern_eval_answer_tokens(r, 0), 30 + (int)i);
    }
    /* case p expects get_time {"zone": "UTC"} and get_weather {"city": "Oslo"}: in any order,
     * extra calls allowed, each answer call matching one expected call only */
    struct tern_eval_call_in both[] = {{"get_weather", "{\"city\":\"Oslo\"}"}, {"get_news", "{}"},
                                       {"get_time", "{\"zone\":\"UTC\"}"}};
    assert_tern_ok(tern_eval_record(r, 1, &(struct tern_eval_answer){.calls = both, .n_calls = 3, .ttfa_tokens = -1}));
    assert_int_equal(tern_eval_answer_covers(r, 1), 1);
    assert_tern_ok(tern_eval_record(r, 1, &(struct tern_eval_answer){.calls = both + 2, .n_calls = 1, .ttfa_tokens = -1}));
    assert_int_equal(tern_eval_answer_covers(r, 1), 0);
    struct tern_eval_call_in twice[] = {{"get_time", "{\"zone\":\"UTC\"}"}, {"get_time", "{\"zone\":\"UTC\"}"}};
    assert_tern_ok(tern_eval_record(r, 1, &(struct tern_eval_answer){.calls = twice, .n_calls = 2, .ttfa_tokens = -1}));
    assert_int_equal(tern_eval_answer_covers(r, 1), 0);
    /* case n expects no call: a text answer covers it, a call does not */
    assert_tern_ok(tern_eval_record(r, 2, &(struct tern_eval_answer){.content = "hello", .ttfa_tokens = -1}));
    assert_int_equal(tern_eval_answer_covers(r, 2), 1);
    assert_tern_ok(tern_eval_record(r, 2, &(struct tern_eval_answer){.calls = both, .n_calls = 1, .ttfa_tokens = -1}));
    assert_int_equal(tern_eval_answer_covers(r, 2), 0);
    /* a failed case has neither */
    assert_tern_ok(tern_eval_record(r, 3, &(struct tern_eval_answer){.error = "timeout", .ttfa_tokens = -1}));
    assert_int_equal(tern_eval_answer_covers(r, 3), -1);
    assert_int_equal(tern_eval_answer_tokens(r, 3), -1);
    assert_int_equal(tern_eval_answer_covers(r, 4), -1); /* out of range */
    tern_eval_run_free(r);
    tern_eval_set_free(s);
}

/* Scores per prompt length: cases in buckets of <= 512, 1024, 2048, 4096 tokens and longer (only
 * those whose prompt length is known), and the lax F1 drift across the buckets that expect calls;
 * prompt lengths survive the outputs file. Worked by hand: w (100 tokens) F1 1, p (700 tokens)
 * F1 0.5, n (5000 tokens) expects no call, e has no length. */
static void test_prompt_buckets(void **state)
{
    (void)state;
    char path[600], outp[700];
    snprintf(path, sizeof path, "%s/pb-cases.jsonl", test_tmpdir());
    snprintf(outp, sizeof outp, "%s/pb-outputs.jsonl", test_tmpdir());
    write_cases(path);
    struct tern_eval_set *s;
    assert_tern_ok(tern_eval_set_load(path, &s));
    struct tern_eval_run *r;
    assert_tern_ok(tern_eval_run_create(s, &r));
    struct tern_eval_call_in w[] = {{"get_weather", "{\"days\":2,\"city\":\"Paris\"}"}};
    assert_tern_ok(tern_eval_record(r, 0, &(struct tern_eval_answer){.calls = w, .n_calls = 1,
                   .n_tokens = 20, .n_prompt = 100, .ttfa_tokens = -1}));
    struct tern_eval_call_in p[] = {{"get_weather", "{\"city\":\"Bergen\"}"}, {"get_time", "{\"zone\":\"UTC\"}"}};
    assert_tern_ok(tern_eval_record(r, 1, &(struct tern_eval_answer){.calls = p, .n_calls = 2,
                   .n_tokens = 40, .n_prompt = 700, .ttfa_tokens = -1}));
    assert_tern_ok(tern_eval_record(r, 2, &(struct tern_eval_answer){.content = "hi", .n_tokens = 3,
                   .n_prompt = 5000, .ttfa_tokens = -1}));
    assert_tern_ok(tern_eval_record(r, 3, &(struct tern_eval_answer){.error = "timeout", .ttfa_tokens = -1}));
    for (int pass = 0; pass < 2; pass++) {
        char *json;
        assert_tern_ok(tern_eval_report_json(r, &json));
        cJSON *rep = cJSON_Parse(json);
        free(json);
        const cJSON *b = obj(rep, "prompt_buckets");
        assert_int_equal(cJSON_GetArraySize(b), 3);
        const cJSON *b0 = cJSON_GetArrayItem(b, 0), *b1 = cJSON_GetArrayItem(b, 1), *b2 = cJSON_GetArrayItem(b, 2);
        assert_int_equal(numv(b0, "max_prompt_tokens"), 512);
        assert_int_equal(numv(b0, "cases"), 1);
        assert_true(numv(obj(b0, "lax"), "f1") == 1.0);
        assert_int_equal(numv(b1, "max_prompt_tokens"), 1024);
        assert_true(fabs(numv(obj(b1, "lax"), "f1") - 0.5) < 1e-12);
        assert_int_equal(numv(b2, "min_prompt_tokens"), 4097);
        assert_int_equal(numv(b2, "expect_none_cases"), 1);
        assert_true(fabs(numv(rep, "f1_lax_drift") - 0.5) < 1e-12);
        cJSON_Delete(rep);
        /* the outputs file keeps the prompt lengths: re-graded, the report is the same */
        FILE *f = fopen(outp, "w");
        assert_non_null(f);
        assert_tern_ok(tern_eval_outputs_write(r, f));
        fclose(f);
        tern_eval_run_free(r);
        assert_tern_ok(tern_eval_run_create(s, &r));
        assert_tern_ok(tern_eval_read_outputs(r, outp));
    }
    tern_eval_run_free(r);
    tern_eval_set_free(s);
}

static void test_eval_gate(void **state)
{
    (void)state;
    char cases[600], rep[5][600], cmd[4096], out[8192];
    snprintf(cases, sizeof cases, "%s/gate-cases.jsonl", test_tmpdir());
    write_cases(cases);
    struct tern_eval_set *s;
    assert_tern_ok(tern_eval_set_load(cases, &s));
    static const char *const names[] = {"good", "wrong-city", "leak", "fail-w"};
    for (int v = 0; v < 4; v++) {
        snprintf(rep[v], sizeof rep[v], "%s/gate-%s.json", test_tmpdir(), names[v]);
        gate_report(s, (enum gate_variant)v, rep[v]);
    }
    tern_eval_set_free(s);
    /* the report's data fingerprint is the file's SHA-256 as sha256sum computes it */
    char *text = test_read_file(rep[0], NULL);
    cJSON *j = cJSON_Parse(text);
    free(text);
    snprintf(cmd, sizeof cmd, "sha256sum %s", cases);
    if (test_run_cmd(cmd, out, sizeof out) == 0)
        assert_memory_equal(out, obj(j, "data_sha256")->valuestring, 64);
    cJSON_Delete(j);

    /* same answers: pass */
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s 2>&1", test_tern_bin(), rep[0], rep[0]);
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s", out);
    assert_non_null(strstr(out, "quality verdict: PASS"));
    /* one of 4 matched calls lost: strict F1 1 -> 0.75 (precision 3/4, recall 3/4), a FAIL ... */
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s 2>&1", test_tern_bin(), rep[0], rep[1]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "-0.2500"));
    assert_non_null(strstr(out, "quality verdict: FAIL (1 metric"));
    /* ... that a looser limit lets through; the other direction is an improvement */
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s --f1-drop 0.3 2>&1", test_tern_bin(), rep[0], rep[1]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s 2>&1", test_tern_bin(), rep[1], rep[0]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    /* a new leak fails with F1 unchanged; so does a failed case */
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s --f1-drop 1 2>&1", test_tern_bin(), rep[0], rep[2]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "| leaked cases"));
    assert_non_null(strstr(out, "+1"));
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s --f1-drop 1 2>&1", test_tern_bin(), rep[0], rep[3]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "| failed cases"));
    /* another dataset: refused (exit 2) */
    text = test_read_file(rep[0], NULL);
    j = cJSON_Parse(text);
    free(text);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "data_sha256", cJSON_CreateString("0123"));
    text = cJSON_Print(j);
    snprintf(rep[4], sizeof rep[4], "%s/gate-other.json", test_tmpdir());
    write_text(rep[4], text);
    free(text);
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s 2>&1", test_tern_bin(), rep[0], rep[4]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "REFUSED: the reports scored different datasets"));
    /* not an eval report: the key it lacks is named */
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "overall"), "leaked_cases");
    text = cJSON_Print(j);
    write_text(rep[4], text);
    free(text);
    cJSON_Delete(j);
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s 2>&1", test_tern_bin(), rep[0], rep[4]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "overall.leaked_cases is missing"));
    /* usage: the pair goes together; a bad limit is named */
    snprintf(cmd, sizeof cmd, "%s gate --eval %s 2>&1", test_tern_bin(), rep[0]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--eval-baseline and --eval go together"));
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval %s --f1-drop x 2>&1", test_tern_bin(), rep[0], rep[0]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--f1-drop"));
    snprintf(cmd, sizeof cmd, "%s gate --eval-baseline %s --eval /nonexistent.json 2>&1", test_tern_bin(), rep[0]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "/nonexistent.json"));
}

static void test_dataset_errors(void **state)
{
    (void)state;
    const char *ok = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"expected\": []}\n";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]\n", ok);
    expect_load_error(buf, "bad.jsonl:2: malformed JSON");
    snprintf(buf, sizeof buf, "%s{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n", ok);
    expect_load_error(buf, "bad.jsonl:2: \"expected\" must be an array");
    expect_load_error("{\"messages\": [], \"expected\": []}\n", "bad.jsonl:1: \"messages\" must be a non-empty array");
    expect_load_error("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"expected\": [{\"name\": \"f\", \"arguments\": \"[1]\"}]}\n",
                      "bad.jsonl:1: expected[0].arguments is a string that does not hold a JSON object");
    expect_load_error("{\"messages\": [{\"role\": \"user\", \"content\": 5}], \"expected\": []}\n", "bad.jsonl:1: messages[0]");
    expect_load_error("{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"expected\": []}\n"
                      "{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"y\"}], \"expected\": []}\n",
                      "case id 'a' appears twice");
    expect_load_error("\n\n", "holds no cases");
    expect_load_error("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"expected\": [], \"private\": [\"\"]}\n",
                      "private[0] must be a non-empty string");
}

static void test_cases_from_corpus(void **state)
{
    (void)state;
    char dir[600], in[700], out[700];
    snprintf(dir, sizeof dir, "%s/corpus", test_tmpdir());
    struct tern_corpus_params cp = tern_corpus_default_params();
    cp.seed = 9;
    cp.size = 200;
    assert_tern_ok(tern_corpus_toolcalls_write(dir, &cp, NULL));
    snprintf(in, sizeof in, "%s/test.jsonl", dir);
    snprintf(out, sizeof out, "%s/cases.jsonl", test_tmpdir());
    int64_t n = 0;
    assert_tern_ok(tern_eval_cases_from_corpus(in, out, &n));
    /* expected: one case per assistant message, expecting exactly its calls */
    char *corpus = test_read_file(in, NULL);
    int64_t want = 0, want_calls = 0, secret_cases = 0;
    for (char *l = strtok(corpus, "\n"); l; l = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(l);
        const cJSON *m;
        const cJSON *priv = cJSON_GetObjectItemCaseSensitive(obj(c, "meta"), "private");
        cJSON_ArrayForEach(m, obj(c, "messages")) {
            if (strcmp(obj(m, "role")->valuestring, "assistant")) continue;
            want++;
            want_calls += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tool_calls"));
            secret_cases += cJSON_GetArraySize(priv) > 0;
        }
        cJSON_Delete(c);
    }
    free(corpus);
    assert_int_equal(n, want);
    struct tern_eval_set *s;
    assert_tern_ok(tern_eval_set_load(out, &s));
    assert_int_equal(tern_eval_set_count(s), want);
    int64_t calls = 0, priv = 0;
    for (int i = 0; i < s->n; i++) {
        calls += s->cases[i].n_expected;
        priv += s->cases[i].n_private > 0;
        assert_true(s->cases[i].slice[0]);
        /* the request ends before the assistant message it asks for */
        cJSON *req = cJSON_Parse(s->cases[i].request_json);
        const cJSON *last = cJSON_GetArrayItem(obj(req, "messages"), cJSON_GetArraySize(obj(req, "messages")) - 1);
        assert_string_not_equal(obj(last, "role")->valuestring, "assistant");
        cJSON_Delete(req);
    }
    assert_int_equal(calls, want_calls);
    assert_int_equal(priv, secret_cases);
    tern_eval_set_free(s);
}

static void test_cli_local(void **state)
{
    (void)state;
    char model[600], cases[600], rep[600], outs[600], cmd[4096], out[16384];
    snprintf(model, sizeof model, "%s/tiny.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 3, model, NULL));
    snprintf(cases, sizeof cases, "%s/cases.jsonl", test_tmpdir());
    write_cases(cases);
    snprintf(rep, sizeof rep, "%s/report.json", test_tmpdir());
    snprintf(outs, sizeof outs, "%s/outs.jsonl", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s eval --data %s -m %s --max-tokens 8 -t 1 --shard 1/2 --json %s --outputs %s 2>&1",
             test_tern_bin(), cases, model, rep, outs);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "slice"));
    char *text = test_read_file(rep, NULL);
    cJSON *r = cJSON_Parse(text);
    const cJSON *all = obj(r, "overall");
    assert_int_equal(numv(all, "cases"), 2);   /* shard 1/2: cases 1 and 3 */
    assert_int_equal(numv(all, "errors"), 0);
    assert_true(numv(all, "tokens_per_answer") >= 1 && numv(all, "tokens_per_answer") <= 8);
    cJSON_Delete(r);
    free(text);
    text = test_read_file(outs, NULL);
    assert_non_null(strstr(text, "\"id\":\"p\""));
    assert_non_null(strstr(text, "\"id\":\"e\""));
    assert_null(strstr(text, "\"id\":\"w\""));
    free(text);
    /* usage errors */
    snprintf(cmd, sizeof cmd, "%s eval --data %s 2>&1", test_tern_bin(), cases);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s eval --data %s -m %s --shard 2/2 2>&1", test_tern_bin(), cases, model);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--shard"));
    snprintf(cmd, sizeof cmd, "%s eval --data /nonexistent.jsonl -m %s 2>&1", test_tern_bin(), model);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "/nonexistent.jsonl"));
}

static void *serve_thread(void *arg)
{
    tern_status_ignore(tern_server_run(arg));
    return NULL;
}

/* tern eval against tern's own server: at temperature 0 the server (batched, over HTTP, with an
 * API key) answers every case exactly as the local runner does with the same model. */
static void test_against_tern_serve(void **state)
{
    (void)state;
    char model[600], cases[600];
    snprintf(model, sizeof model, "%s/tiny-serve.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 5, model, NULL));
    snprintf(cases, sizeof cases, "%s/cases.jsonl", test_tmpdir());
    write_cases(cases);
    struct tern_server_params sp = tern_server_default_params();
    sp.model_path = model;
    sp.port = 0;
    sp.api_key = "k-test";
    sp.n_parallel = 2;
    sp.n_ctx = 1024;
    sp.n_threads = 1;
    sp.quiet = true;
    struct tern_server *srv;
    assert_tern_ok(tern_server_create(&sp, &srv));
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, serve_thread, srv), 0);
    struct tern_eval_set *s;
    assert_tern_ok(tern_eval_set_load(cases, &s));
    struct tern_eval_run *remote, *local;
    assert_tern_ok(tern_eval_run_create(s, &remote));
    assert_tern_ok(tern_eval_run_create(s, &local));
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", tern_server_port(srv));
    struct tern_eval_http_params hp = tern_eval_http_default_params();
    hp.endpoint = url;
    hp.api_key = "k-test";
    hp.concurrency = 2;
    hp.max_tokens = 12;
    int failed = -1;
    assert_tern_ok(tern_eval_http(remote, &hp, NULL, s->n, NULL, NULL, &failed));
    assert_int_equal(failed, 0);
    /* a wrong key: every case fails with the server's 401 */
    struct tern_eval_run *denied;
    assert_tern_ok(tern_eval_run_create(s, &denied));
    hp.api_key = "wrong";
    assert_tern_ok(tern_eval_http(denied, &hp, NULL, 1, NULL, NULL, &failed));
    assert_int_equal(failed, 1);
    assert_non_null(denied->answers[0].error);
    assert_non_null(strstr(denied->answers[0].error, "HTTP 401"));
    tern_eval_run_free(denied);
    tern_server_stop(srv);
    pthread_join(th, NULL);
    tern_server_free(srv);
    struct tern_eval_local_params lp = tern_eval_local_default_params();
    lp.n_ctx = 1024;
    lp.n_threads = 1;
    lp.max_tokens = 12;
    assert_tern_ok(tern_eval_local(local, model, &lp, NULL, s->n, NULL, NULL));
    for (int i = 0; i < s->n; i++) {
        assert_true(remote->answers[i].recorded);
        assert_null(remote->answers[i].error);
        assert_non_null(remote->answers[i].request_id);
        assert_int_equal(remote->answers[i].n_tokens, local->answers[i].n_tokens);
    }
    const int d = tern_eval_runs_differ(remote, local);
    if (d) fail_msg("case %s: server '%s' vs local '%s'", s->cases[d - 1].id,
                    remote->answers[d - 1].content, local->answers[d - 1].content);
    tern_eval_run_free(remote);
    tern_eval_run_free(local);
    tern_eval_set_free(s);
}

/* Shards merged: 0/2 + 1/2 of the local runner give the unsharded run's answers and report. */
static void test_merge_shards(void **state)
{
    (void)state;
    char model[600], cases[600], cmd[8192], out[16384], o[4][700], rep[2][700];
    snprintf(model, sizeof model, "%s/tiny.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 3, model, NULL));
    snprintf(cases, sizeof cases, "%s/cases.jsonl", test_tmpdir());
    write_cases(cases);
    const char *shard[3] = {"0/2", "1/2", "0/1"};
    for (int k = 0; k < 3; k++) {
        snprintf(o[k], sizeof o[k], "%s/shard%d.jsonl", test_tmpdir(), k);
        snprintf(cmd, sizeof cmd, "%s eval --data %s -m %s --max-tokens 6 -t 1 --shard %s --outputs %s %s%s 2>&1",
                 test_tern_bin(), cases, model, shard[k], o[k], k == 2 ? "--json " : "",
                 k == 2 ? (snprintf(rep[0], sizeof rep[0], "%s/full.json", test_tmpdir()), rep[0]) : "");
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    }
    snprintf(rep[1], sizeof rep[1], "%s/merged.json", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s eval merge --data %s %s %s --against %s --json %s 2>&1", test_tern_bin(),
             cases, o[0], o[1], o[2], rep[1]);
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s", out);
    assert_non_null(strstr(out, "equal"));
    /* the merged report's scores are the unsharded run's (times aside) */
    char *a = test_read_file(rep[0], NULL), *b = test_read_file(rep[1], NULL);
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    const cJSON *oa = obj(ja, "overall"), *ob = obj(jb, "overall");
    const char *keys[] = {"cases", "errors", "calls_answered", "invalid_calls", "tokens_per_answer"};
    for (int k = 0; k < 5; k++) assert_true(numv(oa, keys[k]) == numv(ob, keys[k]));
    cJSON_Delete(ja), cJSON_Delete(jb), free(a), free(b);
    /* a shard missing, a shard given twice, a foreign case */
    snprintf(cmd, sizeof cmd, "%s eval merge --data %s %s 2>&1", test_tern_bin(), cases, o[0]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "2 of 4 cases have no answer"));
    snprintf(cmd, sizeof cmd, "%s eval merge --data %s %s %s %s 2>&1", test_tern_bin(), cases, o[0], o[1], o[0]);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "was already answered"));
    char bad[700];
    snprintf(bad, sizeof bad, "%s/foreign.jsonl", test_tmpdir());
    write_text(bad, "{\"id\": \"zz\", \"content\": \"\", \"tool_calls\": []}\n");
    snprintf(cmd, sizeof cmd, "%s eval merge --data %s %s 2>&1", test_tern_bin(), cases, bad);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "foreign.jsonl:1: case 'zz' is not in"));
    /* --against a run that answered differently */
    char *full = test_read_file(o[2], NULL);
    char *p = strstr(full, "\"content\":\"");
    assert_non_null(p);
    memcpy(p, "\"content\":\"#", 12); /* one changed byte in the first answer */
    snprintf(bad, sizeof bad, "%s/changed.jsonl", test_tmpdir());
    write_text(bad, full);
    free(full);
    snprintf(cmd, sizeof cmd, "%s eval merge --data %s %s %s --against %s 2>&1", test_tern_bin(), cases, o[0], o[1], bad);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "differs between the merged shards"));
}

/* The stub endpoint (tests/eval/stub_server.mjs) under node: its stdin is our pipe (closing it
 * stops the stub), its first stdout line is the port. */
static pid_t start_stub(int *stdin_fd, int *port)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/eval/stub_server.mjs", test_source_dir());
        execlp("node", "node", path, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    char buf[32] = "";
    ssize_t n = read(out[0], buf, sizeof buf - 1);
    close(out[0]);
    *stdin_fd = in[1];
    *port = n > 0 ? atoi(buf) : 0;
    return pid;
}

static void test_endpoint_stub(void **state)
{
    (void)state;
    if (system("node --version >/dev/null 2>&1") != 0) {
        printf("SKIP test_endpoint_stub: node is not installed (scripts/install-deps.sh installs it)\n");
        test_note_skip();
        return;
    }
    int fd = -1, port = 0;
    pid_t pid = start_stub(&fd, &port);
    assert_true(pid > 0);
    assert_true(port > 0);
    char cases[600], rep[600], outs[600], cmd[4096], out[16384];
    snprintf(cases, sizeof cases, "%s/cases.jsonl", test_tmpdir());
    write_cases(cases);
    snprintf(rep, sizeof rep, "%s/http-report.json", test_tmpdir());
    snprintf(outs, sizeof outs, "%s/http-outs.jsonl", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s eval --data %s --endpoint http://127.0.0.1:%d/v1 --concurrency 3 --json %s --outputs %s 2>&1",
             test_tern_bin(), cases, port, rep, outs);
    /* case 'e' ("x") gets an HTTP 500: reported, and the run fails (no retries) */
    const int rc = test_run_cmd(cmd, out, sizeof out);
    if (rc != 1) fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "1 of 4 requests failed"));
    char *text = test_read_file(rep, NULL);
    cJSON *r = cJSON_Parse(text);
    /* the same answers as test_scores_exact's, so the same figures */
    const cJSON *all = obj(r, "overall");
    assert_int_equal(numv(all, "cases"), 4);
    assert_int_equal(numv(all, "errors"), 1);
    assert_int_equal(numv(all, "calls_answered"), 5);
    assert_int_equal(numv(obj(all, "strict"), "matched"), 1);
    assert_int_equal(numv(obj(all, "lax"), "matched"), 2);
    assert_true(fabs(numv(all, "correct_tool_rate") - 0.5) < 1e-12);
    assert_true(fabs(numv(all, "false_call_rate") - 1.0) < 1e-12);
    assert_int_equal(numv(all, "invalid_calls"), 1);
    assert_int_equal(numv(all, "leaked_cases"), 1);
    /* n's content holds an opened "<tool_call>" the server could not parse: a malformed attempt */
    assert_int_equal(numv(all, "malformed_calls"), 1);
    /* tokens per answer: the server's usage, 10 x (pieces + 1): w 40, p 50, n 40 */
    assert_true(fabs(numv(all, "tokens_per_answer") - 130.0 / 3) < 1e-9);
    assert_int_equal(numv(all, "tokens_per_answer_p50"), 40); /* of {40, 40, 50} */
    /* TTFA in chunks: w's arguments parse at its last piece (chunk 5: role, header, 3 pieces);
     * p's first call is whole at its only piece (chunk 3) */
    assert_int_equal(numv(all, "ttfa_cases"), 2);
    assert_int_equal(numv(all, "ttfa_tokens_p50"), 3);
    assert_int_equal(numv(all, "ttfa_tokens_p95"), 5);
    cJSON_Delete(r);
    free(text);
    text = test_read_file(outs, NULL);
    assert_non_null(strstr(text, "\"error\":\"HTTP 500: stub: no answer for 'x'\""));
    assert_non_null(strstr(text, "\"request_id\":\"chatcmpl-stub\""));
    assert_non_null(strstr(text, "\"arguments\":\"{\\\"days\\\":2.0,\\\"city\\\":\\\"Paris\\\"}\""));
    free(text);
    /* a server that is not there: every case fails with the transport's message */
    snprintf(cmd, sizeof cmd, "%s eval --data %s --endpoint http://127.0.0.1:1/v1 --limit 1 --outputs %s 2>&1",
             test_tern_bin(), cases, outs);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    text = test_read_file(outs, NULL);
    assert_non_null(strstr(text, "\"error\":"));
    free(text);
    snprintf(cmd, sizeof cmd, "%s eval --data %s --endpoint ftp://x 2>&1", test_tern_bin(), cases);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    close(fd);
    waitpid(pid, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_equality),  cmocka_unit_test(test_validation),
        cmocka_unit_test(test_scores_exact),   cmocka_unit_test(test_dataset_errors),
        cmocka_unit_test(test_cases_from_corpus), cmocka_unit_test(test_cli_local),
        cmocka_unit_test(test_endpoint_stub), cmocka_unit_test(test_merge_shards),
        cmocka_unit_test(test_against_tern_serve), cmocka_unit_test(test_answer_covers),
        cmocka_unit_test(test_prompt_buckets),
        cmocka_unit_test(test_eval_gate),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
