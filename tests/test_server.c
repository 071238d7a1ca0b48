/* test_server.c — `tern serve` over real HTTP on loopback (raw sockets, HTTP/1.1, chunked
 * decoding: no client library between the test and the wire). The server runs in-process
 * (tern_server_create / tern_server_run in a thread) on a port the OS picks, with the qwen2-tiny
 * fixture model (random weights: answers are gibberish, but every protocol path is real;
 * constrained decoding makes its tool calls and JSON valid).
 *
 * Checked: /health, /v1/models, the API key (401 without or with a wrong one), the body limit
 * (413 by Content-Length and by a chunked body), OpenAI error bodies for malformed JSON, wrong
 * types, bad UTF-8, unknown fields, bad roles and prompts over the context (and the server
 * still serving after them), chat answers whole and streamed (same text at temperature 0; SSE
 * framing, role chunk, usage chunk, [DONE]), a repeated prompt served from the slot's KV
 * (usage.prompt_tokens_details.cached_tokens), tool calls in OpenAI's shape (tool_choice
 * required / named, streamed as deltas; also in the Llama 3 and Mistral formats with those
 * templates, and Mistral in a vocabulary where [TOOL_CALLS] is a control token), tool results
 * in the conversation, response_format
 * json_schema, stop strings, /v1/completions, concurrent streams sharing forward passes, a
 * client that disconnects freeing its slot, a full queue answering 503 with Retry-After, the
 * prompt cache across slots and restarts (--cache-mb, --prompt-cache), and
 * tern_server_stop draining a running stream to its end. */
#include "test_support.h"
#include "tern_server.h"
#include "test_http.h"
#include "ctl_model.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEY "sekret-key"

struct srv {
    struct tern_server *s;
    pthread_t th;
    int port;
};

static struct srv main_srv;
static const char *model_path;

static void *run_thread(void *arg)
{
    struct srv *v = arg;
    tern_status_ignore(tern_server_run(v->s));
    return NULL;
}

static void srv_start_tmpl(struct srv *v, int parallel, int max_queue, size_t max_body, const char *tmpl)
{
    struct tern_server_params p = tern_server_default_params();
    p.chat_template_file = tmpl;
    p.model_path = model_path;
    p.port = 0;
    p.api_key = KEY;
    p.n_parallel = parallel;
    p.n_ctx = tmpl ? 2048 : 512; /* Llama 3.1's template spells the tools out at length */
    p.n_threads = 1;
    p.max_queue = max_queue;
    p.max_body = max_body;
    p.quiet = true;
    assert_tern_ok(tern_server_create(&p, &v->s));
    v->port = tern_server_port(v->s);
    assert_true(v->port > 0);
    assert_int_equal(pthread_create(&v->th, NULL, run_thread, v), 0);
}

static void srv_start(struct srv *v, int parallel, int max_queue, size_t max_body)
{
    srv_start_tmpl(v, parallel, max_queue, max_body, NULL);
}

static void srv_stop(struct srv *v)
{
    tern_server_stop(v->s);
    pthread_join(v->th, NULL);
    tern_server_free(v->s);
    v->s = NULL;
}

/* ------------------------------------------------------------------ a tiny HTTP client */

struct resp {
    int status;
    char head[4096];
    char *body; /* de-chunked, NUL-terminated */
    size_t len;
};


static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return; /* the server may answer and close before reading everything */
        p += k;
        n -= (size_t)k;
    }
}

static void send_request(int fd, const char *method, const char *path, const char *auth,
                         const char *body, size_t len)
{
    char h[1024];
    int n = snprintf(h, sizeof h, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", method, path,
                     auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "", body ? len : 0);
    send_all(fd, h, (size_t)n);
    if (body) send_all(fd, body, len);
}

/* Read the whole response (the server closes: Connection: close). */
static void read_response(int fd, struct resp *r)
{
    size_t cap = 1 << 16, n = 0;
    char *raw = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) raw = realloc(raw, cap *= 2);
        ssize_t k = recv(fd, raw + n, cap - n - 1, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    raw[n] = 0;
    close(fd);
    memset(r, 0, sizeof *r);
    char *sep = strstr(raw, "\r\n\r\n");
    if (!sep || sscanf(raw, "HTTP/1.%*d %d", &r->status) != 1) fail_msg("not an HTTP response: %.200s", raw);
    size_t hl = (size_t)(sep - raw);
    memcpy(r->head, raw, hl < sizeof r->head - 1 ? hl : sizeof r->head - 1);
    char *b = sep + 4;
    r->body = malloc(n + 1);
    if (strcasestr(r->head, "transfer-encoding: chunked")) {
        while (*b) {
            size_t sz = strtoul(b, &b, 16);
            b = strstr(b, "\r\n");
            if (!b || sz == 0) break;
            b += 2;
            memcpy(r->body + r->len, b, sz);
            r->len += sz;
            b += sz + 2;
        }
    } else {
        r->len = n - (size_t)(b - raw);
        memcpy(r->body, b, r->len);
    }
    r->body[r->len] = 0;
    free(raw);
}

static void req(int port, const char *method, const char *path, const char *auth, const char *body, struct resp *r)
{
    int fd = test_http_connect(port);
    send_request(fd, method, path, auth, body, body ? strlen(body) : 0);
    read_response(fd, r);
}

static const char *AUTH = "Bearer " KEY;

static cJSON *post_json(int port, const char *path, const char *body, int want_status)
{
    struct resp r;
    req(port, "POST", path, AUTH, body, &r);
    if (r.status != want_status) fail_msg("%s -> %d (want %d): %s", body, r.status, want_status, r.body);
    cJSON *j = cJSON_Parse(r.body);
    if (!j) fail_msg("not JSON: %s", r.body);
    free(r.body);
    return j;
}


/* An OpenAI error body: {"error": {"message": str, "type": str, "param": str|null, "code": str|null}}. */
static void check_error_body(const char *body, const char *param, const char *needle)
{
    cJSON *j = cJSON_Parse(body);
    if (!j) fail_msg("error body is not JSON: %s", body);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    assert_true(cJSON_IsObject(e));
    const cJSON *m = cJSON_GetObjectItem(e, "message"), *t = cJSON_GetObjectItem(e, "type"),
                *p = cJSON_GetObjectItem(e, "param"), *c = cJSON_GetObjectItem(e, "code");
    assert_true(cJSON_IsString(m) && cJSON_IsString(t) && p && c);
    assert_true(cJSON_IsString(p) || cJSON_IsNull(p));
    assert_true(cJSON_IsString(c) || cJSON_IsNull(c));
    if (param) {
        if (!cJSON_IsString(p) || strcmp(p->valuestring, param)) fail_msg("param: want %s in %s", param, body);
    }
    if (needle && !strstr(m->valuestring, needle)) fail_msg("message lacks '%s': %s", needle, body);
    cJSON_Delete(j);
}

/* SSE: every event "data: ...\n\n", the last "[DONE]"; returns the JSON events. */
static cJSON *parse_sse(const char *body)
{
    cJSON *arr = cJSON_CreateArray();
    const char *p = body;
    bool done = false;
    while (*p) {
        if (strncmp(p, "data: ", 6)) fail_msg("event does not start with 'data: ': %.80s", p);
        const char *e = strstr(p, "\n\n");
        if (!e) fail_msg("event not terminated by a blank line: %.80s", p);
        if (done) fail_msg("event after [DONE]");
        if (!strncmp(p + 6, "[DONE]", 6) && e == p + 12) {
            done = true;
        } else {
            cJSON *j = cJSON_ParseWithLength(p + 6, (size_t)(e - p - 6));
            if (!j) fail_msg("event is not JSON: %.*s", (int)(e - p - 6), p + 6);
            cJSON_AddItemToArray(arr, j);
        }
        p = e + 2;
    }
    if (!done) fail_msg("the stream does not end with data: [DONE]");
    return arr;
}

static char *metrics(int port)
{
    struct resp r;
    req(port, "GET", "/metrics", AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    return r.body;
}
static double metric(int port, const char *name)
{
    char *m = metrics(port);
    char pat[160];
    snprintf(pat, sizeof pat, "\n%s ", name);
    char *at = strstr(m, pat);
    if (!at) fail_msg("metric %s missing", name);
    double v = atof(at + strlen(pat));
    free(m);
    return v;
}

/* ------------------------------------------------------------------ tests */

static int setup(void **state)
{
    (void)state;
    model_path = test_shared_path_copy("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (!model_path) return 0;
    srv_start(&main_srv, 4, 8, 64 * 1024);
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    if (main_srv.s) srv_stop(&main_srv);
    return 0;
}

#define NEED_MODEL()                                                                           \
    do {                                                                                       \
        if (!model_path) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n"); \
    } while (0)

static const char *HI = "{\"messages\": [{\"role\": \"system\", \"content\": \"You are terse.\"}, "
                        "{\"role\": \"user\", \"content\": \"Say hi.\"}], \"temperature\": 0, "
                        "\"max_tokens\": 12, \"ignore_eos\": true";

static void test_health_models_auth(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    struct resp r;
    req(port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"ok\""));
    free(r.body);
    req(port, "GET", "/v1/models", NULL, NULL, &r);
    assert_int_equal(r.status, 401);
    check_error_body(r.body, NULL, "API key");
    assert_non_null(strstr(r.body, "invalid_api_key"));
    free(r.body);
    req(port, "GET", "/v1/models", "Bearer sekret-kez", NULL, &r);
    assert_int_equal(r.status, 401);
    free(r.body);
    req(port, "GET", "/v1/models", "Bearer " KEY "x", NULL, &r);
    assert_int_equal(r.status, 401);
    free(r.body);
    char body[512];
    snprintf(body, sizeof body, "%s}", HI);
    req(port, "POST", "/v1/chat/completions", "Basic " KEY, body, &r);
    assert_int_equal(r.status, 401);
    free(r.body);
    req(port, "GET", "/v1/models", AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    cJSON *j = cJSON_Parse(r.body);
    assert_string_equal(test_json_str(j, "object"), "list");
    assert_string_equal(test_json_str(j, "data.0.id"), "qwen2-tiny-q8_0.gguf");
    assert_string_equal(test_json_str(j, "data.0.object"), "model");
    cJSON_Delete(j);
    free(r.body);
    /* health needs no key (load balancers); the metrics do, unless --public-metrics */
    req(port, "GET", "/metrics", NULL, NULL, &r);
    assert_int_equal(r.status, 401);
    free(r.body);
    req(port, "GET", "/metrics", AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "tern_requests_total{endpoint=\"/v1/models\",status=\"401\"}"));
    free(r.body);
}

static void test_errors(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    struct {
        const char *body, *param, *needle;
    } cases[] = {
        {"{\"messages\": [", NULL, "malformed JSON"},
        {"{\"messages\": []} x", NULL, "after the value"},
        {"[1, 2]", NULL, "JSON object"},
        {"{}", "messages", "required"},
        {"{\"messages\": \"hi\"}", "messages", "must be an array"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": \"hot\"}", "temperature", "must be a number"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": 3}", "temperature", "between 0 and 2"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 1.5}", "max_tokens", "integer"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stream\": 1}", "stream", "boolean"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stream_options\": {\"include_usage\": true}}", "stream_options", "only allowed"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"frobnicate\": 1}", "frobnicate", "Unrecognized request argument"},
        {"{\"messages\": [{\"role\": \"wizard\", \"content\": \"hi\"}]}", "messages", "invalid value 'wizard'"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages", "messages[0].content"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stop\": [1]}", "stop", "stop[0]"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 3}", "n", "must be 1"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tool_choice\": \"sometimes\"}", "tool_choice", "sometimes"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}", "tool_choice", "not in 'tools'"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [{\"type\": \"function\"}]}", "tools", "tools[0]"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"response_format\": {\"type\": \"yaml\"}}", "response_format", "yaml"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"nonsense\"}}}}}}", "response_format", "nonsense"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"top_logprobs\": 3}", "top_logprobs", "requires 'logprobs'"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"logprobs\": true, \"top_logprobs\": 21}", "top_logprobs", "between 0 and 20"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"logprobs\": 2}", "logprobs", "boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct resp r;
        req(port, "POST", "/v1/chat/completions", AUTH, cases[i].body, &r);
        if (r.status != 400) fail_msg("case %zu (%s): status %d: %s", i, cases[i].body, r.status, r.body);
        check_error_body(r.body, cases[i].param, cases[i].needle);
        free(r.body);
    }
    /* bad UTF-8 inside a string */
    struct resp r;
    const char bad[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xc3\x28\"}]}";
    req(port, "POST", "/v1/chat/completions", AUTH, bad, &r);
    assert_int_equal(r.status, 400);
    check_error_body(r.body, NULL, "not valid UTF-8 (byte 46)");
    free(r.body);
    /* a prompt over the context (512) */
    struct sbuf_like { char *p; } big = {malloc(20000)};
    strcpy(big.p, "{\"messages\": [{\"role\": \"user\", \"content\": \"");
    for (int i = 0; i < 700; i++) strcat(big.p, "word ");
    strcat(big.p, "\"}]}");
    req(port, "POST", "/v1/chat/completions", AUTH, big.p, &r);
    assert_int_equal(r.status, 400);
    check_error_body(r.body, "messages", "maximum context length is 512 tokens");
    assert_non_null(strstr(r.body, "context_length_exceeded"));
    free(r.body);
    free(big.p);
    /* unknown URL, wrong method */
    req(port, "GET", "/v1/engines", AUTH, NULL, &r);
    assert_int_equal(r.status, 404);
    check_error_body(r.body, NULL, "Unknown request URL");
    free(r.body);
    req(port, "GET", "/v1/chat/completions", AUTH, NULL, &r);
    assert_int_equal(r.status, 405);
    check_error_body(r.body, NULL, "use POST");
    free(r.body);
    /* completions' own fields */
    req(port, "POST", "/v1/completions", AUTH, "{\"prompt\": {\"a\": 1}}", &r);
    assert_int_equal(r.status, 400);
    check_error_body(r.body, "prompt", "must be a string");
    free(r.body);
    /* and it still serves */
    char body[512];
    snprintf(body, sizeof body, "%s}", HI);
    cJSON *j = post_json(port, "/v1/chat/completions", body, 200);
    cJSON_Delete(j);
}

static void test_body_limit(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    /* announced too big: refused before the body is read */
    int fd = test_http_connect(port);
    const char *h = "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                    "Authorization: Bearer " KEY "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n";
    send_all(fd, h, strlen(h));
    struct resp r;
    read_response(fd, &r);
    assert_int_equal(r.status, 413);
    check_error_body(r.body, NULL, "exceeds the server's limit of 65536 bytes");
    free(r.body);
    /* chunked, no length: refused once it passes the limit */
    fd = test_http_connect(port);
    h = "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        "Authorization: Bearer " KEY "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, h, strlen(h));
    char chunk[8192 + 16];
    int n = snprintf(chunk, sizeof chunk, "%x\r\n", 8192);
    memset(chunk + n, 'a', 8192);
    memcpy(chunk + n + 8192, "\r\n", 2);
    for (int i = 0; i < 10; i++) send_all(fd, chunk, (size_t)n + 8194);
    send_all(fd, "0\r\n\r\n", 5);
    read_response(fd, &r);
    assert_int_equal(r.status, 413);
    check_error_body(r.body, NULL, "exceeds");
    free(r.body);
    req(port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    free(r.body);
}

/* Whole and streamed answers agree at temperature 0; the repeat reuses the prompt's KV. */
static void test_chat_and_stream(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    char body[1024];
    snprintf(body, sizeof body, "%s}", HI);
    cJSON *a = post_json(port, "/v1/chat/completions", body, 200);
    assert_string_equal(test_json_str(a, "object"), "chat.completion");
    assert_true(!strncmp(test_json_str(a, "id"), "chatcmpl-", 9));
    assert_string_equal(test_json_str(a, "choices.0.message.role"), "assistant");
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "length");
    const int n_prompt = (int)test_json_num(a, "usage.prompt_tokens");
    assert_true(n_prompt > 10);
    assert_int_equal((int)test_json_num(a, "usage.completion_tokens"), 12);
    assert_int_equal((int)test_json_num(a, "usage.total_tokens"), n_prompt + 12);
    const char *content = test_json_str(a, "choices.0.message.content");
    assert_non_null(content);
    /* the same prompt again: its KV is still in a slot (all but the last token reused) */
    cJSON *b = post_json(port, "/v1/chat/completions", body, 200);
    assert_string_equal(test_json_str(b, "choices.0.message.content"), content);
    assert_int_equal((int)test_json_num(b, "usage.prompt_tokens_details.cached_tokens"), n_prompt - 1);
    cJSON_Delete(b);

    snprintf(body, sizeof body, "%s, \"stream\": true, \"stream_options\": {\"include_usage\": true}}", HI);
    struct resp r;
    req(port, "POST", "/v1/chat/completions", AUTH, body, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "content-type: text/event-stream"));
    cJSON *ev = parse_sse(r.body);
    const int n_ev = cJSON_GetArraySize(ev);
    assert_true(n_ev >= 4);
    const cJSON *first = cJSON_GetArrayItem(ev, 0);
    assert_string_equal(test_json_str(first, "object"), "chat.completion.chunk");
    assert_string_equal(test_json_str(first, "choices.0.delta.role"), "assistant");
    char text[4096] = "";
    const char *id = test_json_str(first, "id");
    for (int i = 0; i < n_ev - 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(ev, i);
        assert_string_equal(test_json_str(e, "id"), id);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(e, "usage")));
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0), "finish_reason")));
        const char *c = test_json_str(e, "choices.0.delta.content");
        if (c) strncat(text, c, sizeof text - strlen(text) - 1);
    }
    assert_string_equal(text, content);
    const cJSON *last = cJSON_GetArrayItem(ev, n_ev - 2);
    assert_string_equal(test_json_str(last, "choices.0.finish_reason"), "length");
    const cJSON *usage = cJSON_GetArrayItem(ev, n_ev - 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(usage, "choices")), 0);
    assert_int_equal((int)test_json_num(usage, "usage.completion_tokens"), 12);
    assert_int_equal((int)test_json_num(usage, "usage.prompt_tokens"), n_prompt);
    cJSON_Delete(ev);
    free(r.body);
    cJSON_Delete(a);
}

static const char *TOOLS =
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Current weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\", \"maxLength\": 10}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, "
    "\"required\": [\"city\", \"unit\"]}}}, {\"type\": \"function\", \"function\": {\"name\": "
    "\"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {\"zone\": {\"type\": "
    "\"string\", \"maxLength\": 8}}, \"required\": [\"zone\"]}}}]";

static void check_call(const cJSON *call, const char *name)
{
    assert_true(!strncmp(test_json_str(call, "id"), "call_", 5));
    assert_string_equal(test_json_str(call, "type"), "function");
    assert_string_equal(test_json_str(call, "function.name"), name);
    const char *args = test_json_str(call, "function.arguments");
    assert_non_null(args);
    cJSON *a = cJSON_Parse(args);
    if (!cJSON_IsObject(a)) fail_msg("arguments are not a JSON object: %s", args);
    if (!strcmp(name, "get_weather")) {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(a, "city")));
        const char *u = test_json_str(a, "unit");
        assert_true(u && (!strcmp(u, "c") || !strcmp(u, "f")));
    } else {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(a, "zone")));
    }
    cJSON_Delete(a);
}

/* Requests with the same tools share one compiled grammar (and a slot keeps its matcher for it):
 * the same answer each time, one compile for three requests (/metrics), and tools that differ
 * in a description are another grammar. */
static void test_grammar_cache(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    const double h0 = metric(port, "tern_grammar_cache_hits_total");
    const double m0 = metric(port, "tern_grammar_cache_misses_total");
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Bergen?\"}], "
             "%s, \"tool_choice\": \"required\", \"parallel_tool_calls\": true, \"temperature\": 0}", TOOLS);
    char *first = NULL;
    for (int i = 0; i < 3; i++) {
        cJSON *a = post_json(port, "/v1/chat/completions", body, 200);
        const cJSON *calls = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message"), "tool_calls");
        assert_true(cJSON_GetArraySize(calls) >= 1);
        for (int c = 0; c < cJSON_GetArraySize(calls); c++)
            check_call(cJSON_GetArrayItem(calls, c), test_json_str(cJSON_GetArrayItem(calls, c), "function.name"));
        char *args = cJSON_PrintUnformatted(calls);
        char *p = strstr(args, "\"arguments\""); /* ids differ per request: compare from the first call's arguments */
        if (!first) first = strdup(p);
        else assert_string_equal(p, first);
        free(args);
        cJSON_Delete(a);
    }
    free(first);
    assert_int_equal((int)(metric(port, "tern_grammar_cache_misses_total") - m0), 1);
    assert_int_equal((int)(metric(port, "tern_grammar_cache_hits_total") - h0), 2);
    /* the same tools with parallel calls off (a grammar no earlier test of this server asked for
     * with this content's tools: the description differs) */
    char tools2[2048];
    snprintf(tools2, sizeof tools2, "%s", TOOLS);
    memcpy(strstr(tools2, "Current weather"), "Current Weather", 15); /* same length */
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Bergen?\"}], "
             "%s, \"tool_choice\": \"required\", \"parallel_tool_calls\": true, \"temperature\": 0}", tools2);
    cJSON *a = post_json(port, "/v1/chat/completions", body, 200);
    check_call(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
                   cJSON_GetObjectItem(a, "choices"), 0), "message"), "tool_calls"), 0),
               test_json_str(a, "choices.0.message.tool_calls.0.function.name"));
    cJSON_Delete(a);
    assert_int_equal((int)(metric(port, "tern_grammar_cache_misses_total") - m0), 2);
    assert_int_equal((int)(metric(port, "tern_grammar_cache_hits_total") - h0), 2);
    /* a tool named at length (64 bytes, the longest name OpenAI's rule allows), asked for by name
     * twice: compiled once, shared after (the name is part of the key whatever its length) */
    char name[65];
    memset(name, 'n', 64);
    name[64] = 0;
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [{\"type\": "
                 "\"function\", \"function\": {\"name\": \"%s\", \"parameters\": {\"type\": \"object\", \"properties\": "
                 "{\"x\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9}}, \"required\": [\"x\"]}}}], "
                 "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"%s\"}}, \"temperature\": 0}",
                 name, name);
        a = post_json(port, "/v1/chat/completions", body, 200);
        assert_string_equal(test_json_str(a, "choices.0.message.tool_calls.0.function.name"), name);
        cJSON_Delete(a);
    }
    assert_int_equal((int)(metric(port, "tern_grammar_cache_misses_total") - m0), 3);
    assert_int_equal((int)(metric(port, "tern_grammar_cache_hits_total") - h0), 3);
}

static void test_tool_calls(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], "
             "%s, \"tool_choice\": \"required\", \"parallel_tool_calls\": false, \"temperature\": 0}", TOOLS);
    cJSON *a = post_json(port, "/v1/chat/completions", body, 200);
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "tool_calls");
    const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(msg, "content")));
    const cJSON *calls = cJSON_GetObjectItem(msg, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 1);
    const char *name = test_json_str(cJSON_GetArrayItem(calls, 0), "function.name");
    assert_true(!strcmp(name, "get_weather") || !strcmp(name, "get_time"));
    check_call(cJSON_GetArrayItem(calls, 0), name);

    /* named, streamed: header delta (index, id, type, name, arguments "") then the arguments */
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Time?\"}], %s, "
             "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}, "
             "\"stream\": true, \"temperature\": 0.8, \"seed\": 7}", TOOLS);
    struct resp r;
    req(port, "POST", "/v1/chat/completions", AUTH, body, &r);
    assert_int_equal(r.status, 200);
    cJSON *ev = parse_sse(r.body);
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_AddObjectToObject(call, "function");
    char args[2048] = "";
    int headers = 0;
    const char *finish = NULL;
    for (const cJSON *e = ev->child; e; e = e->next) {
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0);
        const cJSON *d = cJSON_GetObjectItem(ch, "delta");
        const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(fr)) finish = fr->valuestring;
        const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "tool_calls"), 0);
        if (!tc) continue;
        assert_int_equal((int)test_json_num(tc, "index"), 0);
        if (test_json_str(tc, "id")) {
            headers++;
            cJSON_AddStringToObject(call, "id", test_json_str(tc, "id"));
            cJSON_AddStringToObject(call, "type", test_json_str(tc, "type"));
            cJSON_AddStringToObject(fn, "name", test_json_str(tc, "function.name"));
        }
        const char *ap = test_json_str(tc, "function.arguments");
        if (ap) strncat(args, ap, sizeof args - strlen(args) - 1);
    }
    cJSON_AddStringToObject(fn, "arguments", args);
    assert_int_equal(headers, 1);
    assert_non_null(finish);
    assert_string_equal(finish, "tool_calls");
    check_call(call, "get_time");
    cJSON_Delete(call);
    cJSON_Delete(ev);
    free(r.body);

    /* the call and its result go back into the conversation */
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}, "
             "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": "
             "\"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\", "
             "\\\"unit\\\": \\\"c\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": "
             "\"4 C, rain\"}], %s, \"max_tokens\": 5, \"temperature\": 0, \"tool_choice\": \"none\"}", TOOLS);
    cJSON *c = post_json(port, "/v1/chat/completions", body, 200);
    assert_true((int)test_json_num(c, "usage.prompt_tokens") > 30);
    assert_non_null(test_json_str(c, "choices.0.message.content"));
    cJSON_Delete(c);
    cJSON_Delete(a);
}

/* The Llama 3 and Mistral call formats (a server started with those templates over the same
 * model): tool_choice required and named give calls in OpenAI's shape that the format's parser
 * read from the constrained output, whole and streamed; Mistral's auto (its opener is plain text
 * in this vocabulary, so the lazy grammar applies) answers too. A missing template file is an
 * error naming it. */
static void test_tool_formats(void **state)
{
    (void)state;
    NEED_MODEL();
    static const char *const tmpls[2] = {"fixtures/templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
                                         "fixtures/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"};
    for (int t = 0; t < 2; t++) {
        char path[4096];
        snprintf(path, sizeof path, "%s", test_shared_path(tmpls[t]));
        struct srv v;
        srv_start_tmpl(&v, 2, 4, 64 * 1024, path);
        char body[4096];
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], "
                 "%s, \"tool_choice\": \"required\", \"parallel_tool_calls\": false, \"temperature\": 0}", TOOLS);
        cJSON *a = post_json(v.port, "/v1/chat/completions", body, 200);
        if (!test_json_str(a, "choices.0.finish_reason") || strcmp(test_json_str(a, "choices.0.finish_reason"), "tool_calls")) {
            char *txt = cJSON_Print(a);
            fail_msg("%s: no tool call: %s", tmpls[t], txt);
        }
        const cJSON *calls = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message"), "tool_calls");
        assert_int_equal(cJSON_GetArraySize(calls), 1);
        const char *name = test_json_str(cJSON_GetArrayItem(calls, 0), "function.name");
        assert_true(!strcmp(name, "get_weather") || !strcmp(name, "get_time"));
        check_call(cJSON_GetArrayItem(calls, 0), name);
        cJSON_Delete(a);

        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Time?\"}], %s, "
                 "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}, "
                 "\"stream\": true, \"temperature\": 0.8, \"seed\": 3}", TOOLS);
        struct resp r;
        req(v.port, "POST", "/v1/chat/completions", AUTH, body, &r);
        assert_int_equal(r.status, 200);
        cJSON *ev = parse_sse(r.body);
        cJSON *call = cJSON_CreateObject(), *fn = cJSON_AddObjectToObject(call, "function");
        char args[2048] = "";
        const char *finish = NULL;
        for (const cJSON *e = ev->child; e; e = e->next) {
            const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0);
            const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
            if (cJSON_IsString(fr)) finish = fr->valuestring;
            const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "delta"), "tool_calls"), 0);
            if (!tc) continue;
            if (test_json_str(tc, "id")) {
                cJSON_AddStringToObject(call, "id", test_json_str(tc, "id"));
                cJSON_AddStringToObject(call, "type", test_json_str(tc, "type"));
                cJSON_AddStringToObject(fn, "name", test_json_str(tc, "function.name"));
            }
            const char *ap = test_json_str(tc, "function.arguments");
            if (ap) strncat(args, ap, sizeof args - strlen(args) - 1);
        }
        cJSON_AddStringToObject(fn, "arguments", args);
        if (!finish || strcmp(finish, "tool_calls")) fail_msg("%s: streamed: %s", tmpls[t], r.body);
        check_call(call, "get_time");
        cJSON_Delete(call);
        cJSON_Delete(ev);
        free(r.body);

        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s, "
                 "\"max_tokens\": 6, \"temperature\": 0}", TOOLS);
        a = post_json(v.port, "/v1/chat/completions", body, 200);
        assert_non_null(test_json_str(a, "choices.0.finish_reason"));
        cJSON_Delete(a);
        srv_stop(&v);
    }
    struct tern_server_params p = tern_server_default_params();
    p.model_path = model_path;
    p.port = 0;
    p.chat_template_file = "/nonexistent/tmpl.jinja";
    struct tern_server *s = NULL;
    assert_int_equal(tern_server_create(&p, &s), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "/nonexistent/tmpl.jinja"));
}

/* A vocabulary where Mistral's [TOOL_CALLS] is a control token (tests/ctl_model.h, as tekken
 * vocabularies have it) with Mistral Nemo's template: the server preserves the token for
 * requests with tools, so tool_choice required / named (the grammar forces the token) come back
 * as OpenAI tool_calls, whole and streamed, instead of content holding the call's JSON without
 * its opener; auto (the lazy grammar arms on the token) answers. */
static void test_control_opener(void **state)
{
    (void)state;
    NEED_MODEL();
    char vocab[4200], model[4200], tmpl[4096];
    snprintf(vocab, sizeof vocab, "%s/ctl-vocab.gguf", test_tmpdir());
    snprintf(model, sizeof model, "%s/ctl-tiny.gguf", test_tmpdir());
    snprintf(tmpl, sizeof tmpl, "%s", test_shared_path("fixtures/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"));
    ctl_model_write(vocab, model, NULL);
    const char *keep = model_path;
    model_path = model;
    struct srv v;
    srv_start_tmpl(&v, 2, 4, 64 * 1024, tmpl);
    model_path = keep;
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], "
             "%s, \"tool_choice\": \"required\", \"parallel_tool_calls\": false, \"temperature\": 0, "
             "\"logprobs\": true}", TOOLS);
    cJSON *a = post_json(v.port, "/v1/chat/completions", body, 200);
    if (!test_json_str(a, "choices.0.finish_reason") || strcmp(test_json_str(a, "choices.0.finish_reason"), "tool_calls"))
        fail_msg("no tool call: %s", cJSON_Print(a));
    /* the first token is the control token itself (forced), not its spelling "[" "T" ... */
    assert_string_equal(test_json_str(a, "choices.0.logprobs.content.0.token"), "[TOOL_CALLS]");
    assert_string_equal(test_json_str(a, "choices.0.logprobs.content.1.token"), "[");
    const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message");
    const cJSON *calls = cJSON_GetObjectItem(msg, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 1);
    const char *name = test_json_str(cJSON_GetArrayItem(calls, 0), "function.name");
    assert_true(!strcmp(name, "get_weather") || !strcmp(name, "get_time"));
    check_call(cJSON_GetArrayItem(calls, 0), name);
    const cJSON *content = cJSON_GetObjectItem(msg, "content");
    assert_true(cJSON_IsNull(content) || (cJSON_IsString(content) && !content->valuestring[0]));
    cJSON_Delete(a);

    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Time?\"}], %s, "
             "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}, "
             "\"stream\": true, \"temperature\": 0}", TOOLS);
    struct resp r;
    req(v.port, "POST", "/v1/chat/completions", AUTH, body, &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "TOOL_CALLS")); /* the opener is markup, never content */
    cJSON *ev = parse_sse(r.body);
    const char *finish = NULL;
    int n_calls = 0;
    for (const cJSON *e = ev->child; e; e = e->next) {
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0);
        const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(fr)) finish = fr->valuestring;
        const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "delta"), "tool_calls"), 0);
        if (tc && test_json_str(tc, "function.name")) {
            assert_string_equal(test_json_str(tc, "function.name"), "get_time");
            n_calls++;
        }
    }
    if (!finish || strcmp(finish, "tool_calls") || n_calls < 1) /* parallel: the list may hold several */
        fail_msg("streamed (%d calls, finish %s): %s", n_calls, finish ? finish : "none", r.body + (strlen(r.body) > 600 ? strlen(r.body) - 600 : 0));
    cJSON_Delete(ev);
    free(r.body);

    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s, "
             "\"max_tokens\": 6, \"temperature\": 0}", TOOLS);
    a = post_json(v.port, "/v1/chat/completions", body, 200);
    assert_non_null(test_json_str(a, "choices.0.finish_reason"));
    cJSON_Delete(a);
    srv_stop(&v);
}

/* Reasoning (llama.cpp's --reasoning-format deepseek): a server with Qwen3.5's template, whose
 * generation prompt opens "<think>\n"; response_format makes the random model write the known
 * reply "x</think>y" (with its JSON quotes). The part before </think> comes back as
 * reasoning_content, whole and as streamed deltas; chat_template_kwargs enable_thinking=false
 * closes the block in the prompt, so all of it is content; max_tokens inside the reasoning gives
 * the reasoning, empty content and finish_reason "length"; a non-object kwargs is a 400. */
static void test_reasoning(void **state)
{
    (void)state;
    NEED_MODEL();
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/template/families/Qwen3.5-4B.jinja", test_source_dir());
    struct srv v;
    srv_start_tmpl(&v, 2, 4, 64 * 1024, path);
    static const char RF[] = "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", "
                             "\"schema\": {\"type\": \"string\", \"const\": \"x</think>y\"}}}";
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s, \"temperature\": 0}", RF);
    cJSON *a = post_json(v.port, "/v1/chat/completions", body, 200);
    assert_string_equal(test_json_str(a, "choices.0.message.reasoning_content"), "\"x");
    assert_string_equal(test_json_str(a, "choices.0.message.content"), "y\"");
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "stop");
    cJSON_Delete(a);

    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s, \"temperature\": 0, "
             "\"stream\": true}", RF);
    struct resp r;
    req(v.port, "POST", "/v1/chat/completions", AUTH, body, &r);
    assert_int_equal(r.status, 200);
    cJSON *ev = parse_sse(r.body);
    char reasoning[256] = "", content[256] = "";
    const char *finish = NULL;
    for (const cJSON *e = ev->child; e; e = e->next) {
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0);
        const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(fr)) finish = fr->valuestring;
        const char *rc = test_json_str(ch, "delta.reasoning_content"), *cc = test_json_str(ch, "delta.content");
        if (rc) strncat(reasoning, rc, sizeof reasoning - strlen(reasoning) - 1);
        if (cc) strncat(content, cc, sizeof content - strlen(content) - 1);
    }
    assert_string_equal(reasoning, "\"x");
    assert_string_equal(content, "y\"");
    assert_non_null(finish);
    assert_string_equal(finish, "stop");
    cJSON_Delete(ev);
    free(r.body);

    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s, \"temperature\": 0, "
             "\"chat_template_kwargs\": {\"enable_thinking\": false}}", RF);
    a = post_json(v.port, "/v1/chat/completions", body, 200);
    assert_null(test_json_str(a, "choices.0.message.reasoning_content"));
    assert_string_equal(test_json_str(a, "choices.0.message.content"), "\"x</think>y\"");
    cJSON_Delete(a);

    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s, \"temperature\": 0, "
             "\"max_tokens\": 1}", RF);
    a = post_json(v.port, "/v1/chat/completions", body, 200);
    assert_string_equal(test_json_str(a, "choices.0.message.reasoning_content"), "\"");
    assert_string_equal(test_json_str(a, "choices.0.message.content"), "");
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "length");
    cJSON_Delete(a);

    a = post_json(v.port, "/v1/chat/completions",
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"chat_template_kwargs\": 5}", 400);
    char *txt = cJSON_PrintUnformatted(a);
    check_error_body(txt, "chat_template_kwargs", "must be an object");
    free(txt);
    cJSON_Delete(a);
    srv_stop(&v);
}

/* --cache-mb / --prompt-cache: with two slots, a conversation whose slot two other requests took
 * since is restored from the prompt cache (cached_tokens, block-aligned), /metrics says so, and
 * after a restart (SIGTERM-like stop saves the cache to its folder) the first request of the
 * same conversation is served from the files. */
static void start_cached(struct srv *v, const char *dir)
{
    struct tern_server_params p = tern_server_default_params();
    p.model_path = model_path;
    p.port = 0;
    p.n_parallel = 2;
    p.n_ctx = 512;
    p.n_threads = 1;
    p.quiet = true;
    p.cache_bytes = 16u << 20;
    p.prompt_cache_dir = dir;
    assert_tern_ok(tern_server_create(&p, &v->s));
    v->port = tern_server_port(v->s);
    assert_int_equal(pthread_create(&v->th, NULL, run_thread, v), 0);
}

static void test_prompt_cache(void **state)
{
    (void)state;
    NEED_MODEL();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/serve-prompt-cache", test_tmpdir());
    tern_status_ignore(tern_cache_dir_clear(dir, NULL));
    const char *conv = "{\"messages\": [{\"role\": \"system\", \"content\": \"You are the archivist of the northern "
                       "library. You answer questions about old maps, ship logs and weather records, citing the shelf "
                       "number of every source you use, and you never guess.\"}, {\"role\": \"user\", \"content\": "
                       "\"Which shelf holds the 1903 ship logs?\"}], \"temperature\": 0, \"max_tokens\": 4}";
    struct srv v;
    start_cached(&v, dir);
    cJSON *a = post_json(v.port, "/v1/chat/completions", conv, 200);
    const int n1 = (int)test_json_num(a, "usage.prompt_tokens");
    assert_int_equal((int)test_json_num(a, "usage.prompt_tokens_details.cached_tokens"), 0);
    cJSON_Delete(a);
    for (int i = 0; i < 2; i++) { /* both slots now hold something else */
        char other[256];
        snprintf(other, sizeof other, "{\"messages\": [{\"role\": \"user\", \"content\": \"Unrelated question %d about "
                 "gardening\"}], \"temperature\": 0, \"max_tokens\": 3}", i);
        cJSON_Delete(post_json(v.port, "/v1/chat/completions", other, 200));
    }
    a = post_json(v.port, "/v1/chat/completions", conv, 200);
    const int c2 = (int)test_json_num(a, "usage.prompt_tokens_details.cached_tokens");
    cJSON_Delete(a);
    /* blocks of 32: everything but the last, partial one */
    if (c2 < (n1 - 1) / 32 * 32 || c2 % 32) fail_msg("restored %d of %d prompt tokens", c2, n1);
    assert_true(metric(v.port, "tern_prompt_cache_hits_total") >= 1);
    assert_true(metric(v.port, "tern_prompt_cache_restored_tokens_total") >= c2);
    srv_stop(&v);
    struct tern_cache_file_info *files;
    int nf = 0;
    assert_tern_ok(tern_cache_dir_list(dir, &files, &nf));
    free(files);
    assert_true(nf >= (n1 - 1) / 32);
    /* a new process (here: server) finds the conversation in the files */
    start_cached(&v, dir);
    a = post_json(v.port, "/v1/chat/completions", conv, 200);
    assert_int_equal((int)test_json_num(a, "usage.prompt_tokens_details.cached_tokens"), c2);
    cJSON_Delete(a);
    srv_stop(&v);
    tern_status_ignore(tern_cache_dir_clear(dir, NULL));
}

static void test_response_format_and_stop(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"A number\"}], \"response_format\": "
                       "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", \"strict\": true, \"schema\": "
                       "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 0, "
                       "\"maximum\": 999}}, \"required\": [\"n\"], \"additionalProperties\": false}}}, "
                       "\"temperature\": 0}";
    cJSON *a = post_json(port, "/v1/chat/completions", body, 200);
    cJSON *doc = cJSON_Parse(test_json_str(a, "choices.0.message.content"));
    if (!doc) fail_msg("not JSON: %s", test_json_str(a, "choices.0.message.content"));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(doc, "n")));
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "stop");
    cJSON_Delete(doc);
    cJSON_Delete(a);

    /* stop: cut the greedy answer at a string taken from its middle */
    const char *plain = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0, \"ignore_eos\": true}";
    cJSON *p = post_json(port, "/v1/completions", plain, 200);
    assert_string_equal(test_json_str(p, "object"), "text_completion");
    assert_string_equal(test_json_str(p, "choices.0.finish_reason"), "length");
    const char *text = test_json_str(p, "choices.0.text");
    size_t tl = strlen(text);
    assert_true(tl > 20);
    char stop[8];
    memcpy(stop, text + tl / 2, 3);
    stop[3] = 0;
    const size_t cut = (size_t)(strstr(text, stop) - text);
    char body2[512];
    cJSON *sj = cJSON_CreateString(stop);
    char *stop_json = cJSON_PrintUnformatted(sj);
    snprintf(body2, sizeof body2, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0, "
             "\"ignore_eos\": true, \"stop\": [\"zzzzqqqq\", %s]}", stop_json);
    cJSON *q = post_json(port, "/v1/completions", body2, 200);
    assert_string_equal(test_json_str(q, "choices.0.finish_reason"), "stop");
    assert_int_equal(strlen(test_json_str(q, "choices.0.text")), cut);
    assert_memory_equal(test_json_str(q, "choices.0.text"), text, cut);
    assert_true((int)test_json_num(q, "usage.completion_tokens") < 24);
    /* streamed completions end with [DONE] and give the same text */
    snprintf(body2, sizeof body2, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0, "
             "\"ignore_eos\": true, \"stream\": true}");
    struct resp r;
    req(port, "POST", "/v1/completions", AUTH, body2, &r);
    cJSON *ev = parse_sse(r.body);
    char all[4096] = "";
    for (const cJSON *e = ev->child; e; e = e->next) {
        assert_string_equal(test_json_str(e, "object"), "text_completion");
        strncat(all, test_json_str(e, "choices.0.text"), sizeof all - strlen(all) - 1);
    }
    assert_string_equal(all, text);
    cJSON_Delete(ev);
    free(r.body);
    free(stop_json);
    cJSON_Delete(sj);
    cJSON_Delete(q);
    cJSON_Delete(p);
}

struct client {
    int port;
    char body[1024];
    struct resp r;
};
static void *client_thread(void *arg)
{
    struct client *c = arg;
    int fd = test_http_connect(c->port);
    send_request(fd, "POST", "/v1/chat/completions", AUTH, c->body, strlen(c->body));
    read_response(fd, &c->r);
    return NULL;
}

/* Four streams at once: all complete, and they shared forward passes. */
static void test_concurrent_batching(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    const double steps0 = metric(port, "tern_forward_passes_total");
    const double gen0 = metric(port, "tern_generated_tokens_total");
    enum { N = 4, TOK = 40 };
    struct client c[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        c[i].port = port;
        snprintf(c[i].body, sizeof c[i].body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Story %d\"}], "
                 "\"max_tokens\": %d, \"ignore_eos\": true, \"stream\": true, \"seed\": %d}", i, TOK, i);
        pthread_create(&th[i], NULL, client_thread, &c[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(c[i].r.status, 200);
        cJSON *ev = parse_sse(c[i].r.body);
        int n_content = 0;
        for (const cJSON *e = ev->child; e; e = e->next)
            if (test_json_str(e, "choices.0.delta.content")) n_content++;
        assert_true(n_content > 0);
        cJSON_Delete(ev);
        free(c[i].r.body);
    }
    const double steps = metric(port, "tern_forward_passes_total") - steps0;
    const double gen = metric(port, "tern_generated_tokens_total") - gen0;
    assert_int_equal((int)gen, N * TOK);
    print_message("%d streams of %d tokens: %.0f forward passes\n", N, TOK, steps);
    /* one pass per token if nothing were batched (plus prompts); batched: far fewer */
    assert_true(steps < N * TOK * 0.75);
}

/* A client that leaves mid-stream frees its slot at once. */
static void test_disconnect(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    const double cancelled0 = metric(port, "tern_requests_cancelled_total");
    int fd = test_http_connect(port);
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"Go on\"}], \"ignore_eos\": true, \"stream\": true}";
    send_request(fd, "POST", "/v1/chat/completions", AUTH, body, strlen(body));
    char buf[2048];
    ssize_t k = recv(fd, buf, sizeof buf, 0); /* headers and the first chunks */
    assert_true(k > 0);
    close(fd);
    bool freed = false;
    for (int i = 0; i < 100 && !freed; i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        freed = metric(port, "tern_requests_cancelled_total") > cancelled0 &&
                metric(port, "tern_active_sequences") == 0;
    }
    assert_true(freed);
}

/* parallel 1, queue 1: one runs, one waits, the third gets 503 with Retry-After. */
static void test_queue_full(void **state)
{
    (void)state;
    NEED_MODEL();
    struct srv v;
    srv_start(&v, 1, 1, 1 << 20);
    struct client c[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        c[i].port = v.port;
        snprintf(c[i].body, sizeof c[i].body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Long %d\"}], "
                 "\"max_tokens\": 300, \"ignore_eos\": true}", i);
        pthread_create(&th[i], NULL, client_thread, &c[i]);
        /* wait until it is running (first) or queued (second) */
        for (int t = 0; t < 200; t++) {
            if (metric(v.port, i == 0 ? "tern_active_sequences" : "tern_queue_depth") == 1) break;
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    assert_int_equal((int)metric(v.port, "tern_queue_depth"), 1);
    struct resp r;
    req(v.port, "POST", "/v1/chat/completions", AUTH, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strcasestr(r.head, "\r\nRetry-After: 1"));
    check_error_body(r.body, NULL, "busy");
    free(r.body);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(c[i].r.status, 200);
        cJSON *j = cJSON_Parse(c[i].r.body);
        assert_int_equal((int)test_json_num(j, "usage.completion_tokens"), 300);
        cJSON_Delete(j);
        free(c[i].r.body);
    }
    srv_stop(&v);
}

/* tern_server_stop while a stream runs: the stream still ends complete, then run returns. */
static void test_drain(void **state)
{
    (void)state;
    NEED_MODEL();
    struct srv v;
    srv_start(&v, 2, 4, 1 << 20);
    int fd = test_http_connect(v.port);
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"Drain\"}], \"max_tokens\": 150, "
                       "\"ignore_eos\": true, \"stream\": true}";
    send_request(fd, "POST", "/v1/chat/completions", AUTH, body, strlen(body));
    for (int t = 0; t < 200 && metric(v.port, "tern_active_sequences") < 1; t++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    tern_server_stop(v.s);
    struct resp r;
    read_response(fd, &r);
    assert_int_equal(r.status, 200);
    cJSON *ev = parse_sse(r.body);
    const cJSON *last = cJSON_GetArrayItem(ev, cJSON_GetArraySize(ev) - 1);
    assert_string_equal(test_json_str(last, "choices.0.finish_reason"), "length");
    cJSON_Delete(ev);
    free(r.body);
    pthread_join(v.th, NULL);
    tern_server_free(v.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_models_auth), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_body_limit),         cmocka_unit_test(test_chat_and_stream),
        cmocka_unit_test(test_tool_calls), cmocka_unit_test(test_grammar_cache),         cmocka_unit_test(test_tool_formats),
        cmocka_unit_test(test_control_opener),
        cmocka_unit_test(test_reasoning),
        cmocka_unit_test(test_prompt_cache),       cmocka_unit_test(test_response_format_and_stop),
        cmocka_unit_test(test_concurrent_batching), cmocka_unit_test(test_disconnect),
        cmocka_unit_test(test_queue_full),         cmocka_unit_test(test_drain),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
