/* test_toolcall.c — the streaming tool-call parser (Hermes/Qwen, Llama 3 JSON, Mistral).
 *
 * Every case is fed whole, one byte at a time and in 300 seeded random splits; all must give
 * the same content, calls and error count. One-byte feeding also checks *when* a call is
 * reported: exactly at the byte that completes it (closing "</tool_call>" for Hermes, the
 * object's closing brace for Llama 3 / Mistral), and that released content never ends in half
 * a UTF-8 character. Malformed calls must come back as content plus an error. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct expect_call {
    const char *name, *args, *id;
};

struct tc_case {
    const char *what;
    enum tern_toolcall_format fmt;
    const char *input;
    const char *text;          /* expected content */
    int n_calls;
    struct expect_call calls[3];
    int n_errors;
    const char *complete_after[3]; /* input prefix (ends with) at which call k is reported */
};

static const struct tc_case cases[] = {
    {"hermes single", TERN_TOOLCALL_HERMES,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
     "", 1, {{"get_weather", "{\"city\":\"Paris\",\"unit\":\"celsius\"}", NULL}}, 0,
     {"</tool_call>"}},
    {"hermes text + two calls", TERN_TOOLCALL_HERMES,
     "Let me check. <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n</tool_call> done",
     "Let me check. \n done", 2, {{"a", "{}", NULL}, {"b", "{\"x\":[1,{\"y\":\"}\"}]}", NULL}}, 0,
     {"</tool_call>", "</tool_call>"}},
    {"hermes plain text with lookalike", TERN_TOOLCALL_HERMES,
     "a <tool_cal b </tool_call> c < d \xc3\xa9\xe6\x9d\xb1", "a <tool_cal b </tool_call> c < d \xc3\xa9\xe6\x9d\xb1",
     0, {{0}}, 0, {0}},
    {"hermes malformed JSON", TERN_TOOLCALL_HERMES,
     "x<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": }}</tool_call>y",
     "x<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": }}</tool_call>y", 0, {{0}}, 1, {0}},
    {"hermes missing name", TERN_TOOLCALL_HERMES,
     "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>", 0, {{0}}, 1, {0}},
    {"hermes unterminated garbage", TERN_TOOLCALL_HERMES, "ok <tool_call>{\"name\": \"a\", \"argu",
     "ok <tool_call>{\"name\": \"a\", \"argu", 0, {{0}}, 1, {0}},
    {"hermes complete JSON without close tag", TERN_TOOLCALL_HERMES,
     "<tool_call>{\"name\": \"a\", \"arguments\": {\"q\": 1}}", "", 1, {{"a", "{\"q\":1}", NULL}}, 0, {0}},
    {"hermes stringified arguments", TERN_TOOLCALL_HERMES,
     "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"q\\\": 2}\"}</tool_call>", "", 1,
     {{"a", "{\"q\":2}", NULL}}, 0, {"</tool_call>"}},
    {"llama3 bare JSON", TERN_TOOLCALL_LLAMA3,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", 1,
     {{"get_weather", "{\"city\":\"Paris\"}", NULL}}, 0, {"\"Paris\"}}"}},
    {"llama3 python_tag + arguments + two calls", TERN_TOOLCALL_LLAMA3,
     "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"s\": \"{[\"}}; {\"name\": \"b\", \"parameters\": {}}", "", 2,
     {{"a", "{\"s\":\"{[\"}", NULL}, {"b", "{}", NULL}}, 0, {"\"{[\"}}", "{}}"}},
    {"llama3 prose", TERN_TOOLCALL_LLAMA3, "  The answer is {42}. \xf0\x9f\x8c\xa7",
     "  The answer is {42}. \xf0\x9f\x8c\xa7", 0, {{0}}, 0, {0}},
    {"llama3 JSON reply that is not a call", TERN_TOOLCALL_LLAMA3, "{\"answer\": 42} thanks",
     "{\"answer\": 42} thanks", 0, {{0}}, 0, {0}},
    {"llama3 malformed", TERN_TOOLCALL_LLAMA3, "{\"name\": \"a\", \"parameters\": {\"x\" 1}}",
     "{\"name\": \"a\", \"parameters\": {\"x\" 1}}", 0, {{0}}, 1, {0}},
    {"llama3 truncated", TERN_TOOLCALL_LLAMA3, "{\"name\": \"a\", \"parameters\": {\"x\": 1",
     "{\"name\": \"a\", \"parameters\": {\"x\": 1", 0, {{0}}, 1, {0}},
    {"mistral two calls", TERN_TOOLCALL_MISTRAL,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}, \"id\": \"xyz987654\"}]",
     "", 2, {{"get_weather", "{\"city\":\"Paris\"}", "abcDEF123"}, {"get_weather", "{\"city\":\"Rome\"}", "xyz987654"}}, 0,
     {"\"abcDEF123\"}", "\"xyz987654\"}"}},
    {"mistral text before", TERN_TOOLCALL_MISTRAL, "Sure.[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}]",
     "Sure.", 1, {{"f", "{}", NULL}}, 0, {"{}}"}},
    /* with no valid call, nothing is dropped: the markup stays content too */
    {"mistral malformed element", TERN_TOOLCALL_MISTRAL, "[TOOL_CALLS][{\"name\": 5, \"arguments\": {}}]",
     "[TOOL_CALLS][{\"name\": 5, \"arguments\": {}}]", 0, {{0}}, 1, {0}},
    {"mistral empty list", TERN_TOOLCALL_MISTRAL, "[TOOL_CALLS][] ok", "[TOOL_CALLS][] ok", 0, {{0}}, 0, {0}},
    {"mistral valid and malformed", TERN_TOOLCALL_MISTRAL,
     "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"bad\": 1}, 7] after",
     "{\"bad\": 1}7] after", 1, {{"f", "{}", NULL}}, 2, {"{}}"}},
    {"llama3 python_tag, malformed", TERN_TOOLCALL_LLAMA3, "Sure <|python_tag|>{\"name\": 1}",
     "Sure <|python_tag|>{\"name\": 1}", 0, {{0}}, 1, {0}},
    {"llama3 python_tag then prose", TERN_TOOLCALL_LLAMA3, "<|python_tag|> no json", "<|python_tag|> no json", 0,
     {{0}}, 1, {0}},
    {"llama3 call then malformed tagged call", TERN_TOOLCALL_LLAMA3,
     "{\"name\": \"a\", \"parameters\": {}}; <|python_tag|>{\"x\": 1", "; <|python_tag|>{\"x\": 1", 1,
     {{"a", "{}", NULL}}, 1, {"{}}"}},
    {"mistral missing bracket", TERN_TOOLCALL_MISTRAL, "[TOOL_CALLS] hello",
     "[TOOL_CALLS] hello", 0, {{0}}, 1, {0}},
    {"none format passes everything", TERN_TOOLCALL_NONE, "<tool_call>{\"name\": \"a\"}</tool_call>",
     "<tool_call>{\"name\": \"a\"}</tool_call>", 0, {{0}}, 0, {0}},
};

static bool utf8_complete(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (i + k > n) return false;
        i += k;
    }
    return true;
}

/* Feed `in` cut at the given split points; returns a parser after finish. `at_byte[k]` gets
 * the input length at which call k was reported (only meaningful for one-byte feeding). */
static struct tern_toolcall_parser *run_split(const struct tc_case *c, const size_t *cuts, int n_cuts,
                                              size_t *at_byte, bool check_utf8)
{
    struct tern_toolcall_parser *p;
    assert_tern_ok(tern_toolcall_parser_create(c->fmt, &p));
    size_t n = strlen(c->input), prev = 0;
    int seen = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        int done;
        assert_tern_ok(tern_toolcall_feed(p, c->input + prev, end - prev, &done));
        for (int k = 0; k < done; k++)
            if (at_byte && seen + k < 3) at_byte[seen + k] = end;
        seen += done;
        assert_int_equal(seen, tern_toolcall_count(p));
        if (check_utf8) {
            size_t tl;
            const char *t = tern_toolcall_text(p, &tl);
            if (!utf8_complete(t, tl)) fail_msg("%s: content released half a UTF-8 character after byte %zu", c->what, end);
        }
        prev = end;
    }
    int done;
    assert_tern_ok(tern_toolcall_finish(p, &done));
    assert_int_equal(seen + done, tern_toolcall_count(p));
    return p;
}

static void check_result(const struct tc_case *c, struct tern_toolcall_parser *p, const char *how)
{
    size_t tl;
    const char *t = tern_toolcall_text(p, &tl);
    if (tl != strlen(c->text) || memcmp(t, c->text, tl))
        fail_msg("%s (%s): content [%s], want [%s]", c->what, how, t, c->text);
    if (tern_toolcall_count(p) != c->n_calls)
        fail_msg("%s (%s): %d calls, want %d", c->what, how, tern_toolcall_count(p), c->n_calls);
    for (int i = 0; i < c->n_calls; i++) {
        const struct tern_toolcall *k = tern_toolcall_get(p, i);
        assert_string_equal(k->name, c->calls[i].name);
        assert_string_equal(k->arguments, c->calls[i].args);
        if (c->calls[i].id) assert_string_equal(k->id, c->calls[i].id);
        else assert_null(k->id);
    }
    if (tern_toolcall_n_errors(p) != c->n_errors)
        fail_msg("%s (%s): %d errors, want %d (first: %s)", c->what, how, tern_toolcall_n_errors(p),
                 c->n_errors, tern_toolcall_n_errors(p) ? tern_toolcall_error(p, 0) : "-");
    for (int i = 0; i < c->n_errors; i++) assert_non_null(strstr(tern_toolcall_error(p, i), "at byte"));
}

static void test_whole_and_bytewise(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const struct tc_case *c = &cases[ci];
        struct tern_toolcall_parser *p = run_split(c, NULL, 0, NULL, false);
        check_result(c, p, "whole");
        tern_toolcall_parser_free(p);

        size_t n = strlen(c->input);
        size_t *cuts = malloc((n + 1) * sizeof *cuts);
        for (size_t i = 0; i < n; i++) cuts[i] = i + 1;
        size_t at[3] = {0, 0, 0};
        p = run_split(c, cuts, n > 0 ? (int)n - 1 : 0, at, true);
        check_result(c, p, "one byte at a time");
        /* completion is reported at the earliest possible byte */
        for (int k = 0; k < c->n_calls && c->complete_after[k]; k++) {
            const char *needle = c->complete_after[k];
            const char *from = c->input;
            for (int j = 0; j < k; j++) from = strstr(from, c->complete_after[j]) + strlen(c->complete_after[j]);
            const char *hit = strstr(from, needle);
            assert_non_null(hit);
            size_t want = (size_t)(hit - c->input) + strlen(needle);
            if (at[k] != want) fail_msg("%s: call %d reported after byte %zu, want %zu", c->what, k, at[k], want);
        }
        tern_toolcall_parser_free(p);
        free(cuts);
    }
}

static void test_random_splits(void **state)
{
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const struct tc_case *c = &cases[ci];
        size_t n = strlen(c->input);
        size_t cuts[16];
        for (int iter = 0; iter < 300; iter++) {
            int k = 0;
            size_t last = 0;
            while (k < 16) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                size_t step = 1 + (size_t)((x >> 33) % 9);
                if (last + step >= n) break;
                last += step;
                cuts[k++] = last;
            }
            struct tern_toolcall_parser *p = run_split(c, cuts, k, NULL, true);
            check_result(c, p, "random split");
            tern_toolcall_parser_free(p);
        }
    }
}

static void test_detect(void **state)
{
    (void)state;
    assert_int_equal(tern_toolcall_detect("no tools here {{ messages }}"), TERN_TOOLCALL_NONE);
    assert_int_equal(tern_toolcall_detect(NULL), TERN_TOOLCALL_NONE);
    TEST_SHARED_OR_SKIP(dir_, "fixtures/templates");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", dir_);
    static const struct { const char *t; enum tern_toolcall_format f; } want[] = {
        {"Qwen-Qwen2.5-7B-Instruct", TERN_TOOLCALL_HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", TERN_TOOLCALL_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct", TERN_TOOLCALL_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct", TERN_TOOLCALL_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407", TERN_TOOLCALL_MISTRAL},
        {"microsoft-Phi-3.5-mini-instruct", TERN_TOOLCALL_NONE},
        {"google-gemma-2-2b-it", TERN_TOOLCALL_NONE},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s.jinja", dir, want[i].t);
        char *src = test_read_file(path, NULL);
        assert_non_null(src);
        if (tern_toolcall_detect(src) != want[i].f)
            fail_msg("%s detected as %s", want[i].t, tern_toolcall_format_name(tern_toolcall_detect(src)));
        free(src);
    }
}

/* The calls a template renders for a conversation parse back to the same name and arguments. */
static void test_roundtrip_rendered(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir_, "fixtures/templates");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", dir_);
    const char *names[] = {"Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"};
    for (int i = 0; i < 2; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/expected/%s/parallel_tool_calls.txt", dir, names[i]);
        size_t n;
        char *txt = test_read_file(path, &n);
        assert_non_null(txt);
        struct tern_toolcall_parser *p;
        assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_HERMES, &p));
        /* the assistant turn only: the system prompt shows the call syntax with placeholders */
        const char *turn = strstr(txt, "<|im_start|>assistant");
        assert_non_null(turn);
        size_t off = (size_t)(turn - txt);
        for (size_t k = off; k < n; k += 7) assert_tern_ok(tern_toolcall_feed(p, txt + k, n - k < 7 ? n - k : 7, NULL));
        assert_tern_ok(tern_toolcall_finish(p, NULL));
        assert_int_equal(tern_toolcall_count(p), 2);
        assert_string_equal(tern_toolcall_get(p, 0)->name, "get_weather");
        assert_string_equal(tern_toolcall_get(p, 0)->arguments, "{\"city\":\"Paris\"}");
        assert_string_equal(tern_toolcall_get(p, 1)->arguments, "{\"city\":\"Rome\"}");
        assert_int_equal(tern_toolcall_n_errors(p), 0);
        size_t tl;
        const char *t = tern_toolcall_text(p, &tl);
        assert_null(strstr(t, "<tool_call>"));
        assert_non_null(strstr(t, "<tool_response>\n18C"));
        tern_toolcall_parser_free(p);
        free(txt);
    }
}

static void test_api_misuse(void **state)
{
    (void)state;
    struct tern_toolcall_parser *p;
    assert_int_equal(tern_toolcall_parser_create((enum tern_toolcall_format)99, &p), TERN_ERR_ARG);
    assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_HERMES, &p));
    assert_tern_ok(tern_toolcall_finish(p, NULL));
    assert_int_equal(tern_toolcall_feed(p, "x", 1, NULL), TERN_ERR_ARG);
    assert_null(tern_toolcall_get(p, 0));
    assert_null(tern_toolcall_error(p, -1));
    tern_toolcall_parser_free(p);
    /* deeply nested arguments are refused, not recursed into */
    assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_LLAMA3, &p));
    char deep[400];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{\"name\": \"a\", \"parameters\": ");
    while (k < 300) deep[k++] = '[';
    deep[k] = '\0';
    assert_tern_ok(tern_toolcall_feed(p, deep, k, NULL));
    assert_tern_ok(tern_toolcall_finish(p, NULL));
    assert_int_equal(tern_toolcall_count(p), 0);
    assert_int_equal(tern_toolcall_n_errors(p), 1);
    size_t tl;
    tern_toolcall_text(p, &tl);
    assert_int_equal(tl, k); /* nothing dropped */
    tern_toolcall_parser_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_and_bytewise),
        cmocka_unit_test(test_random_splits),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_roundtrip_rendered),
        cmocka_unit_test(test_api_misuse),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
