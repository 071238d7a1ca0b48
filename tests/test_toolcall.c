/* test_toolcall.c — the streaming tool-call parser (Hermes/Qwen, Llama 3 JSON, Mistral, Qwen
 * XML, Gemma 4, Granite) and its reasoning stage (<think>, Gemma 4's thought channel).
 *
 * Every case is fed whole, one byte at a time and in 300 seeded random splits; all must give
 * the same content, calls and error count. One-byte feeding also checks *when* a call is
 * reported: exactly at the byte that completes it (closing "</tool_call>" for Hermes, the
 * object's closing brace for Llama 3 / Mistral), and that released content never ends in half
 * a UTF-8 character (content and reasoning). Malformed calls must come back as content plus an
 * error. The outputs of the 2026 formats are written as the templates in
 * tests/data/template/families render an assistant's calls. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the cases below leave the trailing fields (reasoning, tools) out where they do not apply */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

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
    int rmode;                     /* reasoning stage: 0 off, 1 <think>, 2 <think> opened by the
                                      prompt, 3 Gemma 4 thought channel */
    const char *reasoning;         /* expected reasoning (NULL = "") */
    const char *tools;             /* tern_toolcall_set_tools, or NULL */
};

#define TOOLS_JSON                                                                                 \
    "[{\"type\": \"function\", \"function\": {\"name\": \"search_docs\", \"parameters\": {\"type\": " \
    "\"object\", \"properties\": {\"query\": {\"type\": \"string\"}, \"max_results\": {\"type\": "     \
    "\"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}, \"exact\": "      \
    "{\"type\": \"boolean\"}}}}}]"

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

    /* Qwen3.5 / Qwen3-Coder XML */
    {"qwen-xml single", TERN_TOOLCALL_QWEN_XML,
     "<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n<parameter=unit>\ncelsius\n"
     "</parameter>\n</function>\n</tool_call>",
     "", 1, {{"get_weather", "{\"location\":\"Oslo\",\"unit\":\"celsius\"}", NULL}}, 0, {"</tool_call>"}},
    {"qwen-xml typed by the tools' schemas", TERN_TOOLCALL_QWEN_XML,
     "Let me search.\n\n<tool_call>\n<function=search_docs>\n<parameter=query>\n42\n</parameter>\n<parameter=max_results>"
     "\n3\n</parameter>\n<parameter=tags>\n[\"sea\", \"norway\"]\n</parameter>\n<parameter=exact>\nFalse\n</parameter>\n"
     "</function>\n</tool_call>",
     "Let me search.\n\n", 1,
     {{"search_docs", "{\"query\":\"42\",\"max_results\":3,\"tags\":[\"sea\",\"norway\"],\"exact\":false}", NULL}},
     0, {"</tool_call>"}, 0, NULL, TOOLS_JSON},
    {"qwen-xml without schemas: JSON-looking values are JSON", TERN_TOOLCALL_QWEN_XML,
     "<tool_call>\n<function=search_docs>\n<parameter=query>\n42\n</parameter>\n<parameter=note>\nline one\nline two <b>\n"
     "</parameter>\n</function>\n</tool_call>",
     "", 1, {{"search_docs", "{\"query\":42,\"note\":\"line one\\nline two <b>\"}", NULL}}, 0, {"</tool_call>"}},
    {"qwen-xml two calls", TERN_TOOLCALL_QWEN_XML,
     "<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=x>\n{\"k\": [1]}\n"
     "</parameter>\n</function>\n</tool_call>",
     "\n", 2, {{"a", "{}", NULL}, {"b", "{\"x\":{\"k\":[1]}}", NULL}}, 0, {"</tool_call>", "</tool_call>"}},
    {"qwen-xml reads a Hermes JSON body too", TERN_TOOLCALL_QWEN_XML,
     "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": 1}}\n</tool_call>", "", 1, {{"a", "{\"q\":1}", NULL}}, 0,
     {"</tool_call>"}},
    {"qwen-xml missing </parameter>", TERN_TOOLCALL_QWEN_XML,
     "<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</function>\n</tool_call> ok",
     "<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</function>\n</tool_call> ok", 0, {{0}}, 1, {0}},
    {"qwen-xml no function name", TERN_TOOLCALL_QWEN_XML, "<tool_call>\n<function=>\n</function>\n</tool_call>",
     "<tool_call>\n<function=>\n</function>\n</tool_call>", 0, {{0}}, 1, {0}},
    {"qwen-xml duplicate parameter", TERN_TOOLCALL_QWEN_XML,
     "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>",
     "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>", 0, {{0}}, 1, {0}},
    {"qwen-xml cut off", TERN_TOOLCALL_QWEN_XML, "<tool_call>\n<function=f>\n<parameter=a>\nhal",
     "<tool_call>\n<function=f>\n<parameter=a>\nhal", 0, {{0}}, 1, {0}},

    /* Gemma 4 */
    {"gemma4 call", TERN_TOOLCALL_GEMMA4,
     "<|tool_call>call:get_weather{location:<|\"|>Oslo<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>", "", 1,
     {{"get_weather", "{\"location\":\"Oslo\",\"unit\":\"celsius\"}", NULL}}, 0, {"<tool_call|>"}},
    {"gemma4 typed values and two calls", TERN_TOOLCALL_GEMMA4,
     "Checking.<|tool_call>call:search_docs{exact:false,max_results:3,query:<|\"|>fjord \"tides\", {x}<|\"|>,tags:[<|\"|>sea<|\"|>,"
     "<|\"|>norway<|\"|>],w:-1.5e2,n:null,o:{k:[]}}<tool_call|><|tool_call>call:f{}<tool_call|>",
     "Checking.", 2,
     {{"search_docs", "{\"exact\":false,\"max_results\":3,\"query\":\"fjord \\\"tides\\\", {x}\",\"tags\":[\"sea\",\"norway\"],"
                      "\"w\":-150,\"n\":null,\"o\":{\"k\":[]}}", NULL},
      {"f", "{}", NULL}}, 0, {"<tool_call|>", "<tool_call|>"}},
    {"gemma4 unterminated string", TERN_TOOLCALL_GEMMA4, "<|tool_call>call:f{a:<|\"|>x}<tool_call|>",
     "<|tool_call>call:f{a:<|\"|>x}<tool_call|>", 0, {{0}}, 1, {0}},
    {"gemma4 not a call", TERN_TOOLCALL_GEMMA4, "<|tool_call>get_weather(Oslo)<tool_call|>",
     "<|tool_call>get_weather(Oslo)<tool_call|>", 0, {{0}}, 1, {0}},
    {"gemma4 bad number", TERN_TOOLCALL_GEMMA4, "<|tool_call>call:f{a:1.2.3}<tool_call|>",
     "<|tool_call>call:f{a:1.2.3}<tool_call|>", 0, {{0}}, 1, {0}},

    {"gemma4 control byte in the name", TERN_TOOLCALL_GEMMA4, "<|tool_call>call:\x01" "f{}<tool_call|>",
     "<|tool_call>call:\x01" "f{}<tool_call|>", 0, {{0}}, 1, {0}},
    {"qwen-xml control byte in a key", TERN_TOOLCALL_QWEN_XML,
     "<tool_call><function=f><parameter=a\x02>1</parameter></function></tool_call>",
     "<tool_call><function=f><parameter=a\x02>1</parameter></function></tool_call>", 0, {{0}}, 1, {0}},

    /* Granite 3.x */
    {"granite two calls", TERN_TOOLCALL_GRANITE,
     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}, {\"name\": \"f\", \"arguments\": {}}]",
     "", 2, {{"get_weather", "{\"location\":\"Oslo\"}", NULL}, {"f", "{}", NULL}}, 0, {"\"Oslo\"}}", "{}}"}},
    {"granite malformed list", TERN_TOOLCALL_GRANITE, "<|tool_call|>{\"name\": \"f\"}",
     "<|tool_call|>{\"name\": \"f\"}", 0, {{0}}, 1, {0}},

    /* reasoning */
    {"think, a call inside the reasoning is not a call", TERN_TOOLCALL_HERMES,
     "<think>\nI could call <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call> here.\n</think>\n\n<tool_call>\n"
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}\n</tool_call>",
     "", 1, {{"get_weather", "{\"location\":\"Oslo\"}", NULL}}, 0, {"\"Oslo\"}}\n</tool_call>"}, 1,
     "I could call <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call> here."},
    {"think, empty reasoning then answer", TERN_TOOLCALL_NONE, "<think>\n\n</think>\n\nHello!", "Hello!", 0, {{0}}, 0,
     {0}, 1, NULL},
    {"think only at the start", TERN_TOOLCALL_NONE, "Sure <think>x</think> y", "Sure <think>x</think> y", 0, {{0}}, 0,
     {0}, 1, NULL},
    {"think opened by the prompt, out of tokens", TERN_TOOLCALL_HERMES,
     "The user wants the weather. <tool_call>\n{\"name\"", "", 0, {{0}}, 0, {0}, 2,
     "The user wants the weather. <tool_call>\n{\"name\""},
    {"think opened by the prompt, then a qwen-xml call", TERN_TOOLCALL_QWEN_XML,
     "Need the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n"
     "</function>\n</tool_call>",
     "", 1, {{"get_weather", "{\"location\":\"Oslo\"}", NULL}}, 0, {"</tool_call>"}, 2, "Need the weather."},
    {"think with split characters", TERN_TOOLCALL_NONE, " <think>\xe6\x9d\xb1\xe4\xba\xac \xc3\xa9  </think>\xe7\xad\x94",
     "\xe7\xad\x94", 0, {{0}}, 0, {0}, 1, "\xe6\x9d\xb1\xe4\xba\xac \xc3\xa9"},
    {"gemma4 thought then a call", TERN_TOOLCALL_GEMMA4,
     "<|channel>thought\nNeed the weather.<channel|><|tool_call>call:get_weather{location:<|\"|>Oslo<|\"|>}<tool_call|>",
     "", 1, {{"get_weather", "{\"location\":\"Oslo\"}", NULL}}, 0, {"<tool_call|>"}, 3, "Need the weather."},
    {"gemma4 empty thought, then answer, then a late thought", TERN_TOOLCALL_NONE,
     "<|channel>thought\n<channel|>It is 4 C.<|channel>thought\nDone.<channel|>", "It is 4 C.", 0, {{0}}, 0, {0}, 3,
     "Done."},
    {"gemma4 two thoughts join on a line", TERN_TOOLCALL_NONE,
     "<|channel>thought\nOne.<channel|>A<|channel>thought\nTwo.<channel|>B", "AB", 0, {{0}}, 0, {0}, 3, "One.\nTwo."},
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
    static const enum tern_reasoning_format rf[] = {TERN_REASONING_NONE, TERN_REASONING_THINK,
                                                    TERN_REASONING_THINK, TERN_REASONING_GEMMA4};
    assert_tern_ok(tern_toolcall_set_reasoning(p, rf[c->rmode], c->rmode == 2));
    if (c->tools) assert_tern_ok(tern_toolcall_set_tools(p, c->tools, 0));
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
            t = tern_toolcall_reasoning(p, &tl);
            if (!utf8_complete(t, tl)) fail_msg("%s: reasoning released half a UTF-8 character after byte %zu", c->what, end);
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
    const char *want_r = c->reasoning ? c->reasoning : "";
    t = tern_toolcall_reasoning(p, &tl);
    if (tl != strlen(want_r) || memcmp(t, want_r, tl))
        fail_msg("%s (%s): reasoning [%s], want [%s]", c->what, how, t, want_r);
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

static char *family_file(const char *rel, size_t *n)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/data/template/families/%s", test_source_dir(), rel);
    char *t = test_read_file(path, n);
    if (!t) fail_msg("cannot read %s", path);
    return t;
}

/* The 2026 templates: the tool-call and reasoning formats detected from each; whether its
 * generation prompt leaves the reasoning open. */
static void test_detect_families(void **state)
{
    (void)state;
    static const struct {
        const char *t;
        enum tern_toolcall_format f;
        enum tern_reasoning_format r;
    } want[] = {
        {"Qwen-Qwen3-0.6B", TERN_TOOLCALL_HERMES, TERN_REASONING_THINK},
        {"Qwen3.5-4B", TERN_TOOLCALL_QWEN_XML, TERN_REASONING_THINK},
        {"HuggingFaceTB-SmolLM3-3B", TERN_TOOLCALL_NONE, TERN_REASONING_THINK},
        {"google-gemma-4-31B-it", TERN_TOOLCALL_GEMMA4, TERN_REASONING_GEMMA4},
        {"microsoft-Phi-3.5-mini-instruct", TERN_TOOLCALL_NONE, TERN_REASONING_NONE},
        /* its `thinking` system prompt asks for <think></think> then <response></response> */
        {"ibm-granite-granite-3.3-2B-Instruct", TERN_TOOLCALL_GRANITE, TERN_REASONING_THINK},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s.jinja", want[i].t);
        char *src = family_file(rel, NULL);
        if (tern_toolcall_detect(src) != want[i].f)
            fail_msg("%s: tool calls detected as %s", want[i].t, tern_toolcall_format_name(tern_toolcall_detect(src)));
        if (tern_reasoning_detect(src) != want[i].r)
            fail_msg("%s: reasoning detected as %s", want[i].t, tern_reasoning_format_name(tern_reasoning_detect(src)));
        free(src);
    }
    static const struct {
        const char *rendering;
        enum tern_reasoning_format r;
        bool open;
    } prompts[] = {
        {"Qwen3.5-4B/simple", TERN_REASONING_THINK, true},            /* ends "<think>\n" */
        {"Qwen3.5-4B/simple@think_off", TERN_REASONING_THINK, false}, /* "<think>\n\n</think>\n\n" */
        {"Qwen-Qwen3-0.6B/simple", TERN_REASONING_THINK, false},
        {"HuggingFaceTB-SmolLM3-3B/simple@think_off", TERN_REASONING_THINK, false},
        {"google-gemma-4-31B-it/simple", TERN_REASONING_GEMMA4, false},
        {"google-gemma-4-31B-it/simple@think_on", TERN_REASONING_GEMMA4, false},
    };
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "expected/%s.txt", prompts[i].rendering);
        size_t n;
        char *txt = family_file(rel, &n);
        if (tern_reasoning_open_at_end(prompts[i].r, txt, n) != prompts[i].open)
            fail_msg("%s: reasoning open at the end should be %d", prompts[i].rendering, prompts[i].open);
        free(txt);
    }
}

/* What Qwen3.5's and Gemma 4's templates render for an assistant turn with two calls parses back
 * to those calls (arguments as the conversation gave them) and the turn's text. */
static void test_roundtrip_families(void **state)
{
    (void)state;
    static const struct {
        const char *rendering, *turn_start, *turn_end, *content;
        enum tern_toolcall_format f;
        enum tern_reasoning_format r;
    } cs[] = {
        /* the text before the calls, and the newline the template puts between them */
        {"Qwen3.5-4B/parallel_tool_calls", "<|im_start|>assistant\n", "<|im_end|>", "Checking both.\n\n\n",
         TERN_TOOLCALL_QWEN_XML, TERN_REASONING_THINK},
        {"google-gemma-4-31B-it/parallel_tool_calls", "<|turn>model\n", "<|tool_response>", "",
         TERN_TOOLCALL_GEMMA4, TERN_REASONING_GEMMA4},
    };
    char *cases_txt = family_file("cases.json", NULL);
    cJSON *cases = cJSON_Parse(cases_txt);
    assert_non_null(cases);
    const cJSON *offer = NULL, *c;
    cJSON_ArrayForEach(c, cases) if (!strcmp(cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, "tools_offer")) offer = c;
    char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(offer, "tools"));
    assert_non_null(tools);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "expected/%s.txt", cs[i].rendering);
        size_t n;
        char *txt = family_file(rel, &n);
        const char *a = strstr(txt, cs[i].turn_start);
        assert_non_null(a);
        a += strlen(cs[i].turn_start);
        const char *b = strstr(a, cs[i].turn_end);
        assert_non_null(b);
        struct tern_toolcall_parser *p;
        assert_tern_ok(tern_toolcall_parser_create(cs[i].f, &p));
        assert_tern_ok(tern_toolcall_set_reasoning(p, cs[i].r, false));
        assert_tern_ok(tern_toolcall_set_tools(p, tools, 0));
        for (const char *q = a; q < b; q += 5) assert_tern_ok(tern_toolcall_feed(p, q, b - q < 5 ? (size_t)(b - q) : 5, NULL));
        assert_tern_ok(tern_toolcall_finish(p, NULL));
        if (tern_toolcall_n_errors(p)) fail_msg("%s: %s", cs[i].rendering, tern_toolcall_error(p, 0));
        assert_int_equal(tern_toolcall_count(p), 2);
        assert_string_equal(tern_toolcall_get(p, 0)->name, "get_weather");
        cJSON *got = cJSON_Parse(tern_toolcall_get(p, 0)->arguments);
        cJSON *want = cJSON_Parse("{\"location\": \"Oslo\", \"unit\": \"celsius\"}");
        assert_true(cJSON_Compare(got, want, true));
        cJSON_Delete(got);
        cJSON_Delete(want);
        assert_string_equal(tern_toolcall_get(p, 1)->name, "search_docs");
        got = cJSON_Parse(tern_toolcall_get(p, 1)->arguments);
        want = cJSON_Parse("{\"query\": \"fjord \\\"tides\\\"\", \"max_results\": 3, \"tags\": [\"sea\", \"norway\"], "
                           "\"exact\": false}");
        if (!cJSON_Compare(got, want, true)) fail_msg("%s: arguments %s", cs[i].rendering, tern_toolcall_get(p, 1)->arguments);
        cJSON_Delete(got);
        cJSON_Delete(want);
        size_t tl;
        assert_string_equal(tern_toolcall_text(p, &tl), cs[i].content);
        tern_toolcall_reasoning(p, &tl);
        assert_int_equal(tl, 0);
        tern_toolcall_parser_free(p);
        free(txt);
    }
    free(tools);
    cJSON_Delete(cases);
    free(cases_txt);
}

static void test_api_misuse(void **state)
{
    (void)state;
    struct tern_toolcall_parser *p;
    assert_int_equal(tern_toolcall_parser_create((enum tern_toolcall_format)99, &p), TERN_ERR_ARG);
    assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_HERMES, &p));
    assert_tern_ok(tern_toolcall_finish(p, NULL));
    assert_int_equal(tern_toolcall_feed(p, "x", 1, NULL), TERN_ERR_ARG);
    assert_int_equal(tern_toolcall_set_reasoning(p, TERN_REASONING_THINK, false), TERN_ERR_ARG);
    assert_int_equal(tern_toolcall_set_tools(p, "[]", 0), TERN_ERR_ARG);
    assert_null(tern_toolcall_get(p, 0));
    assert_null(tern_toolcall_error(p, -1));
    tern_toolcall_parser_free(p);
    assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_QWEN_XML, &p));
    assert_int_equal(tern_toolcall_set_tools(p, "[{", 0), TERN_ERR_FORMAT);
    assert_int_equal(tern_toolcall_set_reasoning(p, (enum tern_reasoning_format)9, false), TERN_ERR_ARG);
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
        cmocka_unit_test(test_detect_families),
        cmocka_unit_test(test_roundtrip_families),
        cmocka_unit_test(test_api_misuse),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
