/* test_server_agents.c — the Responses (/v1/responses) and Messages (/v1/messages) translators of
 * `tern serve`, over real HTTP on loopback, the server in-process on the qwen2-tiny fixture
 * (random weights: what is checked is the prompt a request becomes and the constrained calls).
 *
 * The reference is the chat-completions endpoint: a Responses or Messages request and the chat
 * request it means must render the same prompt (same token count: usage.input_tokens against
 * usage.prompt_tokens, Anthropic's input_tokens + cache_read_input_tokens) and, greedy with the
 * same seed, give the same tool call (the arguments text, or the tool_use input as an object) —
 * for a first turn with tools and for a conversation holding a call and its result. Also: the
 * store keeps SRV_STORE_MAX responses (the oldest evicted, a 404 after), a template without
 * reasoning markup gets no reasoning item or thinking block whatever is asked, errors name the
 * protocol's fields (tools[0].parameters, input_schema, input for the context), Anthropic's
 * error shape on /v1/messages (401 with x-api-key, 400), 404 / 405 on /v1/responses/{id}. */
#include "test_support.h"
#include "tern_server.h"
#include "test_http.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *model_path;
static struct test_srv srv;
static const char *KEY = "Bearer k-agents";

#define TOOL_PARAMS "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":8}},\"required\":[\"city\"]}"

static cJSON *post(const char *path, const char *body, int want)
{
    struct test_resp r;
    test_http(srv.port, "POST", path, KEY, body, &r);
    if (r.status != want) fail_msg("POST %s: status %d, want %d: %s\nbody: %s", path, r.status, want, r.body, body);
    cJSON *o = cJSON_Parse(r.body);
    assert_non_null(o);
    free(r.body);
    return o;
}

/* A Responses or Messages request and its chat equivalent: same prompt, same call. */
static void test_same_as_chat(void **state)
{
    (void)state;
    if (!model_path) skip();
    const char *tools_chat = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":" TOOL_PARAMS "}}]";
    char chat[2048], resp[2048], msgs[2048];
    snprintf(chat, sizeof chat, "{\"messages\":[{\"role\":\"system\",\"content\":\"Use tools.\"},{\"role\":\"user\","
             "\"content\":\"Weather in Oslo?\"}],\"tools\":%s,\"tool_choice\":\"required\",\"parallel_tool_calls\":false,"
             "\"temperature\":0,\"seed\":7}", tools_chat);
    snprintf(resp, sizeof resp, "{\"instructions\":\"Use tools.\",\"input\":\"Weather in Oslo?\",\"tools\":[{\"type\":"
             "\"function\",\"name\":\"get_weather\",\"parameters\":" TOOL_PARAMS ",\"strict\":false}],\"tool_choice\":"
             "\"required\",\"parallel_tool_calls\":false,\"temperature\":0,\"store\":false}");
    snprintf(msgs, sizeof msgs, "{\"system\":\"Use tools.\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather in "
             "Oslo?\"}],\"tools\":[{\"name\":\"get_weather\",\"input_schema\":" TOOL_PARAMS "}],\"tool_choice\":{\"type\":"
             "\"any\",\"disable_parallel_tool_use\":true},\"temperature\":0,\"max_tokens\":200}");
    cJSON *c = post("/v1/chat/completions", chat, 200);
    cJSON *r = post("/v1/responses", resp, 200);
    cJSON *m = post("/v1/messages", msgs, 200);
    const double n_prompt = test_json_num(c, "usage.prompt_tokens");
    assert_true(n_prompt == test_json_num(r, "usage.input_tokens"));
    assert_true(n_prompt == test_json_num(m, "usage.input_tokens") + test_json_num(m, "usage.cache_read_input_tokens"));
    const char *args = test_json_str(c, "choices.0.message.tool_calls.0.function.arguments");
    assert_non_null(args);
    assert_string_equal(test_json_str(r, "output.0.type"), "function_call");
    assert_string_equal(test_json_str(r, "output.0.name"), "get_weather");
    assert_string_equal(test_json_str(r, "output.0.arguments"), args);
    assert_string_equal(test_json_str(m, "stop_reason"), "tool_use");
    assert_string_equal(test_json_str(m, "content.0.type"), "tool_use");
    cJSON *want = cJSON_Parse(args), *input = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "content"), 0), "input");
    assert_true(cJSON_Compare(want, input, true));
    cJSON_Delete(want);
    cJSON_Delete(c);
    cJSON_Delete(r);
    cJSON_Delete(m);
}

/* A conversation with a call and its result renders as chat's does. */
static void test_conversation_same_as_chat(void **state)
{
    (void)state;
    if (!model_path) skip();
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"\","
                       "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                       "\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"get_weather\","
                       "\"content\":\"12 C\"},{\"role\":\"user\",\"content\":\"Thanks\"}],\"max_tokens\":1}";
    const char *resp = "{\"input\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"type\":\"function_call\",\"call_id\":\"c1\","
                       "\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"},{\"type\":\"function_call_output\","
                       "\"call_id\":\"c1\",\"output\":\"12 C\"},{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
                       "\"Thanks\"}]}],\"max_output_tokens\":1,\"store\":false}";
    const char *msgs = "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":[{\"type\":"
                       "\"tool_use\",\"id\":\"c1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Oslo\"}}]},{\"role\":\"user\","
                       "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"12 C\"},{\"type\":\"text\","
                       "\"text\":\"Thanks\"}]}],\"max_tokens\":1}";
    cJSON *c = post("/v1/chat/completions", chat, 200);
    cJSON *r = post("/v1/responses", resp, 200);
    cJSON *m = post("/v1/messages", msgs, 200);
    const double n = test_json_num(c, "usage.prompt_tokens");
    assert_true(n == test_json_num(r, "usage.input_tokens"));
    assert_true(n == test_json_num(m, "usage.input_tokens") + test_json_num(m, "usage.cache_read_input_tokens"));
    assert_string_equal(test_json_str(r, "status"), "incomplete");
    assert_string_equal(test_json_str(r, "incomplete_details.reason"), "max_output_tokens");
    assert_string_equal(test_json_str(m, "stop_reason"), "max_tokens");
    cJSON_Delete(c);
    cJSON_Delete(r);
    cJSON_Delete(m);
}

/* Two bodies posted to path answer the same number at field (a JSON path). */
static void same_number(const char *path, const char *a_body, const char *b_body, const char *field)
{
    cJSON *a = post(path, a_body, 200), *b = post(path, b_body, 200);
    assert_true(test_json_num(a, field) == test_json_num(b, field));
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* A template without reasoning markup (the fixture's ChatML): reasoning.effort and thinking are
 * accepted and change nothing: no reasoning item, no thinking block, the same call as without
 * them, 0 reasoning tokens; thinking sent back is accepted and this template does not render it. */
static void test_no_thinking_template(void **state)
{
    (void)state;
    if (!model_path) skip();
    const char *tools = "[{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":" TOOL_PARAMS ",\"strict\":false}]";
    char plain[1024], effort[1024];
    snprintf(plain, sizeof plain, "{\"input\":\"Weather in Oslo?\",\"tools\":%s,\"tool_choice\":\"required\",\"temperature\":0,"
             "\"store\":false}", tools);
    snprintf(effort, sizeof effort, "{\"input\":\"Weather in Oslo?\",\"tools\":%s,\"tool_choice\":\"required\",\"temperature\":0,"
             "\"store\":false,\"reasoning\":{\"effort\":\"low\"}}", tools);
    cJSON *a = post("/v1/responses", plain, 200), *b = post("/v1/responses", effort, 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(b, "output")), 1);
    assert_string_equal(test_json_str(b, "output.0.type"), "function_call");
    assert_string_equal(test_json_str(b, "output.0.arguments"), test_json_str(a, "output.0.arguments"));
    assert_true(test_json_num(b, "usage.output_tokens_details.reasoning_tokens") == 0);
    assert_string_equal(test_json_str(b, "reasoning.effort"), "low");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "reasoning"), "summary")));
    cJSON_Delete(a);
    cJSON_Delete(b);
    const char *msgs[] = {
        "{\"max_tokens\":6,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
        "{\"max_tokens\":6,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"thinking\":"
        "{\"type\":\"enabled\",\"budget_tokens\":2}}",
        "{\"max_tokens\":6,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"thinking\":"
        "{\"type\":\"disabled\"}}",
        "{\"max_tokens\":6,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"thinking\":"
        "{\"type\":\"adaptive\"}}"};
    cJSON *ref = post("/v1/messages", msgs[0], 200);
    for (int i = 1; i < 4; i++) {
        cJSON *m = post("/v1/messages", msgs[i], 200);
        cJSON *content = cJSON_GetObjectItem(m, "content");
        assert_int_equal(cJSON_GetArraySize(content), 1);
        assert_string_equal(test_json_str(m, "content.0.type"), "text");
        assert_string_equal(test_json_str(m, "content.0.text"), test_json_str(ref, "content.0.text"));
        cJSON_Delete(m);
    }
    cJSON_Delete(ref);
    /* thinking and reasoning items sent back: accepted, not rendered by this template */
    const char *with = "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
                       "\"content\":[{\"type\":\"thinking\",\"thinking\":\"long thoughts\",\"signature\":\"\"},{\"type\":"
                       "\"redacted_thinking\",\"data\":\"x\"},{\"type\":\"text\",\"text\":\"Hello\"}]},{\"role\":\"user\",\"content\":\"More\"}]}";
    const char *without = "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
                          "\"content\":\"Hello\"},{\"role\":\"user\",\"content\":\"More\"}]}";
    same_number("/v1/messages/count_tokens", with, without, "input_tokens");
    const char *rwith = "{\"max_output_tokens\":1,\"store\":false,\"input\":[{\"role\":\"user\",\"content\":\"Hi\"},"
                        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"opaque\",\"content\":"
                        "[{\"type\":\"reasoning_text\",\"text\":\"long thoughts\"}]},{\"role\":\"assistant\",\"content\":\"Hello\"}"
                        ",{\"role\":\"user\",\"content\":\"More\"}]}";
    const char *rwithout = "{\"max_output_tokens\":1,\"store\":false,\"input\":[{\"role\":\"user\",\"content\":\"Hi\"},"
                           "{\"role\":\"assistant\",\"content\":\"Hello\"},{\"role\":\"user\",\"content\":\"More\"}]}";
    same_number("/v1/responses", rwith, rwithout, "usage.input_tokens");
}

/* The store keeps the last SRV_STORE_MAX responses: the oldest is evicted. */
static void test_store_bound(void **state)
{
    (void)state;
    if (!model_path) skip();
    char first[64] = "", second[64] = "", last[64] = "";
    for (int i = 0; i <= 256; i++) { /* SRV_STORE_MAX + 1 */
        cJSON *r = post("/v1/responses", "{\"input\":\"x\",\"max_output_tokens\":1}", 200);
        snprintf(i == 0 ? first : i == 1 ? second : last, 64, "%s", test_json_str(r, "id"));
        cJSON_Delete(r);
    }
    char path[128];
    struct test_resp g;
    snprintf(path, sizeof path, "/v1/responses/%s", first);
    test_http(srv.port, "GET", path, KEY, NULL, &g);
    assert_int_equal(g.status, 404);
    free(g.body);
    const char *kept[] = {second, last};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "/v1/responses/%s", kept[i]);
        test_http(srv.port, "GET", path, KEY, NULL, &g);
        assert_int_equal(g.status, 200);
        cJSON *o = cJSON_Parse(g.body);
        assert_string_equal(test_json_str(o, "id"), kept[i]);
        assert_string_equal(test_json_str(o, "object"), "response");
        cJSON_Delete(o);
        free(g.body);
    }
    /* a continuation of the evicted one: 404, OpenAI's shape */
    char body[160];
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":\"y\"}", first);
    cJSON *e = post("/v1/responses", body, 404);
    assert_string_equal(test_json_str(e, "error.param"), "previous_response_id");
    assert_string_equal(test_json_str(e, "error.code"), "previous_response_not_found");
    cJSON_Delete(e);
    test_http(srv.port, "PUT", path, KEY, NULL, &g);
    assert_int_equal(g.status, 405);
    free(g.body);
}

/* Errors in the protocol's words and shape. */
static void test_errors(void **state)
{
    (void)state;
    if (!model_path) skip();
    /* a strict tool schema tern cannot take, named by the Responses path */
    cJSON *e = post("/v1/responses", "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":"
                    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"additionalProperties\":{}}}}}]}", 400);
    assert_string_equal(test_json_str(e, "error.param"), "tools");
    assert_non_null(strstr(test_json_str(e, "error.message"), "tools[0].parameters.properties.a"));
    assert_null(strstr(test_json_str(e, "error.message"), "function"));
    cJSON_Delete(e);
    /* a prompt over the context: param input */
    static char big[20000];
    int k = snprintf(big, sizeof big, "{\"input\":\"");
    for (int i = 0; i < 1500; i++) k += snprintf(big + k, sizeof big - (size_t)k, "word ");
    snprintf(big + k, sizeof big - (size_t)k, "\"}");
    e = post("/v1/responses", big, 400);
    assert_string_equal(test_json_str(e, "error.param"), "input");
    assert_string_equal(test_json_str(e, "error.code"), "context_length_exceeded");
    cJSON_Delete(e);
    /* Anthropic's shape: a bad message type, a chat-side error named by input_schema */
    e = post("/v1/messages", "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}", 400);
    assert_string_equal(test_json_str(e, "type"), "error");
    assert_string_equal(test_json_str(e, "error.type"), "invalid_request_error");
    assert_non_null(strstr(test_json_str(e, "error.message"), "'document'"));
    cJSON_Delete(e);
    e = post("/v1/messages", "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":"
             "\"f\",\"input_schema\":{\"type\":\"string\"}}]}", 400);
    assert_string_equal(test_json_str(e, "error.type"), "invalid_request_error");
    assert_non_null(strstr(test_json_str(e, "error.message"), "tools[0].input_schema"));
    cJSON_Delete(e);
    /* x-api-key: a wrong one is Anthropic's 401, the right one answers */
    struct test_raw raw;
    const char *b = "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    char head[512];
    const char *keys[] = {"wrong", "k-agents"};
    for (int i = 0; i < 2; i++) {
        snprintf(head, sizeof head, "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "x-api-key: %s\r\nanthropic-version: 2023-06-01\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                 keys[i], strlen(b));
        test_http_raw(srv.port, head, b, strlen(b), &raw);
        assert_int_equal(raw.status, i ? 200 : 401);
        cJSON *o = cJSON_Parse(raw.body);
        assert_string_equal(test_json_str(o, i ? "type" : "error.type"), i ? "message" : "authentication_error");
        cJSON_Delete(o);
        test_raw_free(&raw);
    }
}

static int setup(void **state)
{
    (void)state;
    model_path = test_shared_path_copy("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (!model_path) return 0;
    struct tern_server_params p = tern_server_default_params();
    p.model_path = model_path;
    p.port = 0;
    p.n_parallel = 2;
    p.n_ctx = 1024;
    p.n_threads = 1;
    p.quiet = true;
    p.api_key = KEY + 7;
    test_srv_start(&srv, &p);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (srv.s) test_srv_stop(&srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_chat), cmocka_unit_test(test_conversation_same_as_chat),
        cmocka_unit_test(test_store_bound), cmocka_unit_test(test_errors), cmocka_unit_test(test_no_thinking_template),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
