/* test_server_fields.c — `tern serve` and what real clients send (the server-hardening issue,
 * items 3, 6 and 10), over real HTTP on loopback, the server in-process on the qwen2-tiny fixture
 * (random weights: constrained output is what makes answers checkable).
 *
 * Checked:
 * - strict schemas are never weakened: a pattern tern cannot compile in a strict response_format
 *   or strict tool is a 400 naming the keyword and its path, where a non-strict one is answered
 *   with an X-Tern-Warning header saying what was ignored; strict objects admit their declared
 *   properties only (additionalProperties true is refused by path, a tool's {"type": "object"}
 *   takes {}); integers and numbers have bounded digits, so a looping model still closes its JSON;
 * - a forced call is a call: tool names outside ^[a-zA-Z0-9_-]{1,64}$ and parameters that are not
 *   an object schema are 400; a call cut by max_tokens gives finish_reason "length" and no call
 *   markup in the content, whole and streamed;
 * - the fields clients send: OpenAI's documented ones and llama-server's are accepted (n_predict,
 *   json_schema and GBNF grammar honoured), sampler knobs tern lacks only at their off value,
 *   wrong types and unknown names still 400; --max-tokens-cap and the request timeout end answers
 *   with "length"; the port is bound before the model loads (a port in use fails before the
 *   model is read; /health is 503 "loading" meanwhile); a model image in memory is served. */
#include "test_support.h"
#include "tern_server.h"
#include "test_http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>


static const char *model_path;
static struct test_srv main_srv;

static void srv_start(struct test_srv *v, struct tern_server_params p)
{
    if (!p.model_data) p.model_path = model_path;
    p.port = 0;
    p.n_parallel = 2;
    p.n_ctx = 1024;
    p.n_threads = 1;
    p.quiet = true;
    test_srv_start(v, &p);
}

/* HTTP/1.0 (no chunked framing, closed at the end): status, headers and body apart. */
struct raw {
    int status;
    char *head, *body;
};
static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0) fail_msg("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}
static void http10(int port, const char *method, const char *path, const char *body, struct raw *r)
{
    int fd = connect_port(port);
    if (fd < 0) fail_msg("cannot connect to port %d", port);
    const size_t len = body ? strlen(body) : 0;
    char h[512];
    int n = snprintf(h, sizeof h, "%s %s HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n", method, path, len);
    send(fd, h, (size_t)n, MSG_NOSIGNAL);
    for (size_t off = 0; off < len;) {
        ssize_t k = send(fd, body + off, len - off, MSG_NOSIGNAL);
        if (k <= 0) break;
        off += (size_t)k;
    }
    size_t cap = 1 << 16, got = 0;
    char *raw = malloc(cap);
    for (;;) {
        if (got + 4096 > cap) raw = realloc(raw, cap *= 2);
        ssize_t k = recv(fd, raw + got, cap - got - 1, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    raw[got] = 0;
    close(fd);
    char *sep = strstr(raw, "\r\n\r\n");
    if (!sep || sscanf(raw, "HTTP/1.%*d %d", &r->status) != 1) fail_msg("not an HTTP response: %.200s", raw);
    *sep = 0;
    r->head = strdup(raw);
    r->body = strdup(sep + 4);
    free(raw);
}
static void raw_free(struct raw *r)
{
    free(r->head);
    free(r->body);
}

/* POST path; the parsed body when the status is want, else the test fails. */
static cJSON *post(int port, const char *path, const char *body, int want)
{
    struct raw r;
    http10(port, "POST", path, body, &r);
    if (r.status != want) fail_msg("%s -> %d (want %d): %s", body, r.status, want, r.body);
    cJSON *j = cJSON_Parse(r.body);
    if (!j) fail_msg("not JSON: %s", r.body);
    raw_free(&r);
    return j;
}


/* A 400 whose param is param (NULL: not checked) and whose message holds every needle. */
static void want_400(int port, const char *path, const char *body, const char *param, const char *n1,
                     const char *n2)
{
    cJSON *j = post(port, path, body, 400);
    const char *m = test_json_str(j, "error.message"), *p = test_json_str(j, "error.param");
    if (!m) fail_msg("no message: %s", body);
    if (param && (!p || strcmp(p, param))) fail_msg("param %s, want %s (%s)", p ? p : "null", param, m);
    if (n1 && !strstr(m, n1)) fail_msg("message lacks '%s': %s", n1, m);
    if (n2 && !strstr(m, n2)) fail_msg("message lacks '%s': %s", n2, m);
    cJSON_Delete(j);
}

#define NEED_MODEL()                                                                           \
    do {                                                                                       \
        if (!model_path) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n"); \
    } while (0)

#define MSG "\"messages\": [{\"role\": \"user\", \"content\": \"Give me data\"}]"
#define CHAT "/v1/chat/completions"

/* ------------------------------------------------------------------ item 3: schemas */
static void test_strict_schemas(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    /* a pattern tern cannot compile: strict refuses it by keyword and path */
    want_400(port, CHAT, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", "
             "\"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
             "\"pattern\": \"([\"}}, \"required\": [\"a\"], \"additionalProperties\": false}}}}",
             "response_format", "pattern", "properties.a");
    want_400(port, CHAT, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"strict\": true, "
             "\"parameters\": {\"type\": \"object\", \"properties\": {\"code\": {\"type\": \"string\", \"pattern\": \"a{2,1}\"}}, "
             "\"required\": [\"code\"], \"additionalProperties\": false}}}], \"tool_choice\": \"required\"}",
             "tools", "tools[0].function.parameters", "pattern");
    /* non-strict: compiled without the pattern, and the answer says so */
    struct raw r;
    http10(port, "POST", CHAT, "{" MSG ", \"max_tokens\": 4, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
           "{\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
           "\"pattern\": \"([\"}}}}}}", &r);
    assert_int_equal(r.status, 200);
    if (!strstr(r.head, "X-Tern-Warning: ") || !strstr(r.head, "pattern")) fail_msg("no warning header: %s", r.head);
    raw_free(&r);
    /* strict objects admit their declared properties only */
    want_400(port, CHAT, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", "
             "\"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"o\": {\"type\": \"object\", "
             "\"additionalProperties\": true}}, \"required\": [\"o\"]}}}}",
             "response_format", "response_format.json_schema.schema.properties.o.additionalProperties", NULL);
    want_400(port, CHAT, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"strict\": true, "
             "\"parameters\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}}}]}",
             "tools", "tools[0].function.parameters.additionalProperties", NULL);
    /* a tool's object without properties takes no keys, strict or not */
    for (int strict = 0; strict < 2; strict++) {
        char body[512];
        snprintf(body, sizeof body, "{" MSG ", \"temperature\": 0, \"tools\": [{\"type\": \"function\", \"function\": "
                 "{\"name\": \"ping\", %s\"parameters\": {\"type\": \"object\"}}}], \"tool_choice\": \"required\"}",
                 strict ? "\"strict\": true, " : "");
        cJSON *a = post(port, CHAT, body, 200);
        const char *args = test_json_str(a, "choices.0.message.tool_calls.0.function.arguments");
        if (!args || strcmp(args, "{}")) fail_msg("arguments %s, want {}", args ? args : "(none)");
        cJSON_Delete(a);
    }
    /* integers and numbers end: the JSON closes within max_tokens (the fixture loops on digits) */
    const char *types[] = {"integer", "number"};
    for (int t = 0; t < 2; t++) {
        char body[512];
        snprintf(body, sizeof body, "{" MSG ", \"temperature\": 0, \"max_tokens\": 80, \"response_format\": {\"type\": "
                 "\"json_schema\", \"json_schema\": {\"name\": \"n\", \"schema\": {\"type\": \"object\", \"properties\": "
                 "{\"a\": {\"type\": \"%s\"}, \"b\": {\"type\": \"%s\", \"minimum\": 0}}, \"required\": [\"a\", \"b\"], \"additionalProperties\": false}}}}",
                 types[t], types[t]);
        cJSON *a = post(port, CHAT, body, 200);
        const char *content = test_json_str(a, "choices.0.message.content");
        cJSON *doc = content ? cJSON_Parse(content) : NULL;
        if (!doc) fail_msg("%s: not closed JSON (%s): %s", types[t], test_json_str(a, "choices.0.finish_reason"), content);
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(doc, "a")) && cJSON_IsNumber(cJSON_GetObjectItem(doc, "b")));
        cJSON_Delete(doc);
        cJSON_Delete(a);
    }
}

/* ------------------------------------------------------------------ item 6: forced calls */
#define TOOL_F "{\"type\": \"function\", \"function\": {\"name\": \"lookup\", \"parameters\": {\"type\": \"object\", " \
               "\"properties\": {\"query\": {\"type\": \"string\"}}, \"required\": [\"query\"]}}}"

static void test_forced_calls(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    want_400(port, CHAT, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a</tool_call>b\"}}], "
             "\"tool_choice\": \"required\"}", "tools", "tools[0].function.name", "^[a-zA-Z0-9_-]{1,64}$");
    want_400(port, CHAT, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get weather\"}}]}",
             "tools", "not a valid function name", NULL);
    char body[1024];
    snprintf(body, sizeof body, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"%065d\"}}]}", 7);
    want_400(port, CHAT, body, "tools", "not a valid function name", NULL);
    want_400(port, CHAT, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
             "{\"type\": \"string\"}}}], \"tool_choice\": \"required\"}", "tools", "\"type\": \"object\"", "\"type\": \"string\"");
    want_400(port, CHAT, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
             "{\"properties\": {\"a\": {\"type\": \"string\"}}}}}]}", "tools", "\"type\": \"object\"", NULL);
    /* {} is no parameters, as leaving it out */
    cJSON *ok = post(port, CHAT, "{" MSG ", \"temperature\": 0, \"tools\": [{\"type\": \"function\", \"function\": "
                     "{\"name\": \"f\", \"parameters\": {}}}], \"tool_choice\": \"required\"}", 200);
    assert_string_equal(test_json_str(ok, "choices.0.message.tool_calls.0.function.arguments"), "{}");
    cJSON_Delete(ok);
    /* max_tokens cuts the forced call: "length", no markup in the content */
    for (int named = 0; named < 2; named++) {
        snprintf(body, sizeof body, "{" MSG ", \"temperature\": 0, \"max_tokens\": 6, \"tools\": [" TOOL_F "], "
                 "\"tool_choice\": %s}", named ? "{\"type\": \"function\", \"function\": {\"name\": \"lookup\"}}" : "\"required\"");
        cJSON *a = post(port, CHAT, body, 200);
        assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "length");
        const char *c = test_json_str(a, "choices.0.message.content");
        if (c && (strstr(c, "<tool_call") || strstr(c, "{\"name\""))) fail_msg("markup in content: %s", c);
        cJSON_Delete(a);
        /* streamed: the same */
        snprintf(body, sizeof body, "{" MSG ", \"temperature\": 0, \"max_tokens\": 6, \"stream\": true, \"tools\": [" TOOL_F "], "
                 "\"tool_choice\": %s}", named ? "{\"type\": \"function\", \"function\": {\"name\": \"lookup\"}}" : "\"required\"");
        struct raw r;
        http10(port, "POST", CHAT, body, &r);
        assert_int_equal(r.status, 200);
        if (strstr(r.body, "<tool_call") || strstr(r.body, "\\\"name\\\"")) fail_msg("markup in the stream: %s", r.body);
        if (!strstr(r.body, "\"finish_reason\":\"length\"")) fail_msg("no length finish: %s", r.body);
        assert_non_null(strstr(r.body, "data: [DONE]"));
        raw_free(&r);
    }
}

/* ------------------------------------------------------------------ item 10: fields */
static void test_client_fields(void **state)
{
    (void)state;
    NEED_MODEL();
    const int port = main_srv.port;
    /* what the current openai client and llama-server clients send: accepted */
    cJSON *a = post(port, CHAT, "{" MSG ", \"max_completion_tokens\": 3, \"reasoning_effort\": \"low\", \"verbosity\": \"low\", "
                    "\"prompt_cache_key\": \"k\", \"prediction\": null, \"metadata\": {\"a\": \"b\"}, \"store\": false, "
                    "\"user\": \"u\", \"service_tier\": \"auto\", \"modalities\": [\"text\"], \"audio\": null, "
                    "\"web_search_options\": {}, \"parallel_tool_calls\": true, \"logit_bias\": {}, \"n\": 1, "
                    "\"presence_penalty\": 0, \"frequency_penalty\": 0, \"safety_identifier\": \"s\", "
                    "\"cache_prompt\": true, \"id_slot\": -1, \"typical_p\": 1, \"min_p\": 0.05, \"top_k\": 40, "
                    "\"repeat_penalty\": 1.1, \"repeat_last_n\": 64, \"mirostat\": 0, \"n_keep\": 0, \"samplers\": [\"top_k\"]}", 200);
    assert_true(test_json_num(a, "usage.completion_tokens") <= 3);
    cJSON_Delete(a);
    /* n_predict is max_tokens; completions too */
    a = post(port, CHAT, "{" MSG ", \"n_predict\": 5, \"ignore_eos\": true}", 200);
    assert_int_equal((int)test_json_num(a, "usage.completion_tokens"), 5);
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "length");
    cJSON_Delete(a);
    a = post(port, "/v1/completions", "{\"prompt\": \"Once\", \"n_predict\": 7, \"ignore_eos\": true, \"cache_prompt\": true}", 200);
    assert_int_equal((int)test_json_num(a, "usage.completion_tokens"), 7);
    cJSON_Delete(a);
    /* llama-server's json_schema and grammar constrain the answer */
    a = post(port, CHAT, "{" MSG ", \"temperature\": 0, \"max_tokens\": 60, \"json_schema\": {\"type\": \"object\", "
             "\"properties\": {\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"ok\"], \"additionalProperties\": false}}", 200);
    cJSON *doc = cJSON_Parse(test_json_str(a, "choices.0.message.content"));
    if (!doc || !cJSON_IsBool(cJSON_GetObjectItem(doc, "ok"))) fail_msg("json_schema not followed: %s", test_json_str(a, "choices.0.message.content"));
    cJSON_Delete(doc);
    cJSON_Delete(a);
    a = post(port, "/v1/completions", "{\"prompt\": \"Answer:\", \"max_tokens\": 20, \"grammar\": \"root ::= (\\\"yes\\\" | \\\"no\\\") \\\".\\\"\"}", 200);
    const char *t = test_json_str(a, "choices.0.text");
    if (!t || (strcmp(t, "yes.") && strcmp(t, "no."))) fail_msg("grammar not followed: %s", t ? t : "(null)");
    cJSON_Delete(a);
    /* still refused: knobs tern lacks at a value that matters, wrong types, unknown names */
    want_400(port, CHAT, "{" MSG ", \"typical_p\": 0.5}", "typical_p", "typical sampling", "not supported");
    want_400(port, CHAT, "{" MSG ", \"mirostat\": 2}", "mirostat", "not supported", NULL);
    want_400(port, CHAT, "{" MSG ", \"user\": 5}", "user", "must be a string", NULL);
    want_400(port, CHAT, "{" MSG ", \"metadata\": \"x\"}", "metadata", "must be an object", NULL);
    want_400(port, CHAT, "{" MSG ", \"n_predict\": \"5\"}", "n_predict", "integer", NULL);
    want_400(port, CHAT, "{" MSG ", \"frobnicate\": 1}", "frobnicate", "Unrecognized request argument", NULL);
    want_400(port, CHAT, "{" MSG ", \"functions\": []}", "functions", "tools", NULL);
    want_400(port, CHAT, "{" MSG ", \"modalities\": [\"text\", \"audio\"]}", "modalities", "audio", NULL);
    want_400(port, CHAT, "{" MSG ", \"grammar\": \"root ::= (\"}", "grammar", NULL, NULL);
    want_400(port, CHAT, "{" MSG ", \"grammar\": \"root ::= \\\"a\\\"\", \"response_format\": {\"type\": \"json_object\"}}",
             "response_format", "grammar", NULL);
    want_400(port, "/v1/completions", "{\"prompt\": \"x\", \"reasoning_effort\": \"low\"}", "reasoning_effort",
             "Unrecognized", NULL);
}

/* --max-tokens-cap and the request timeout end answers with "length" */
static void test_caps(void **state)
{
    (void)state;
    NEED_MODEL();
    struct tern_server_params p = tern_server_default_params();
    p.max_tokens_cap = 4;
    struct test_srv v;
    srv_start(&v, p);
    cJSON *a = post(v.port, CHAT, "{" MSG ", \"max_tokens\": 100, \"ignore_eos\": true}", 200);
    assert_int_equal((int)test_json_num(a, "usage.completion_tokens"), 4);
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "length");
    cJSON_Delete(a);
    a = post(v.port, "/v1/completions", "{\"prompt\": \"Once\", \"n_predict\": -1, \"ignore_eos\": true}", 200);
    assert_int_equal((int)test_json_num(a, "usage.completion_tokens"), 4);
    cJSON_Delete(a);
    test_srv_stop(&v);

    p = tern_server_default_params();
    p.request_timeout_ms = 1;
    srv_start(&v, p);
    a = post(v.port, CHAT, "{" MSG ", \"max_tokens\": 900, \"ignore_eos\": true}", 200);
    assert_string_equal(test_json_str(a, "choices.0.finish_reason"), "length");
    assert_true(test_json_num(a, "usage.completion_tokens") < 900);
    cJSON_Delete(a);
    test_srv_stop(&v);
}

/* The port before the model: a port in use is the error even when the model cannot load, and
 * /health says "loading" while the model is read (a FIFO holds the load until the test writes). */
struct create_arg {
    struct tern_server_params p;
    tern_status st;
    char err[512];
};
static void *create_thread(void *arg)
{
    struct create_arg *c = arg;
    struct tern_server *s = NULL;
    c->st = tern_server_create(&c->p, &s);
    snprintf(c->err, sizeof c->err, "%s", c->st ? tern_last_error() : "");
    if (!c->st) tern_server_free(s);
    return NULL;
}

static int free_port(int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    if (fd_out) *fd_out = fd;
    else close(fd);
    return ntohs(a.sin_port);
}

static void test_bind_first(void **state)
{
    (void)state;
    /* a port in use, a model that does not exist: the port is what is said */
    int busy_fd;
    const int busy = free_port(&busy_fd);
    assert_int_equal(listen(busy_fd, 1), 0);
    struct tern_server_params p = tern_server_default_params();
    p.model_path = "/nonexistent/model.gguf";
    p.port = busy;
    p.quiet = true;
    struct tern_server *s = NULL;
    assert_int_not_equal(tern_server_create(&p, &s), TERN_OK);
    if (!strstr(tern_last_error(), "cannot listen")) fail_msg("want the port refused first: %s", tern_last_error());
    close(busy_fd);

    /* loading: the model file is a FIFO nobody writes yet */
    char fifo[64];
    snprintf(fifo, sizeof fifo, "/tmp/tern-test-fifo-%d.gguf", (int)getpid());
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct create_arg c = {.p = tern_server_default_params()};
    c.p.model_path = fifo;
    c.p.port = free_port(NULL);
    c.p.quiet = true;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, create_thread, &c), 0);
    struct raw r = {0};
    bool seen = false;
    for (int i = 0; i < 500 && !seen; i++) {
        int fd = connect_port(c.p.port);
        if (fd < 0) {
            usleep(10000);
            continue;
        }
        close(fd);
        http10(c.p.port, "GET", "/health", NULL, &r);
        assert_int_equal(r.status, 503);
        assert_non_null(strstr(r.body, "\"loading\""));
        raw_free(&r);
        http10(c.p.port, "POST", CHAT, "{" MSG "}", &r);
        assert_int_equal(r.status, 503);
        assert_non_null(strstr(r.body, "model_loading"));
        raw_free(&r);
        seen = true;
    }
    assert_true(seen);
    int w = open(fifo, O_WRONLY); /* lets the load go on: an empty file, refused */
    if (w >= 0) close(w);
    pthread_join(th, NULL);
    unlink(fifo);
    assert_int_not_equal(c.st, TERN_OK);
}

/* A model image in memory (what `tern serve` without -m serves: the embedded model). */
static void test_model_in_memory(void **state)
{
    (void)state;
    NEED_MODEL();
    FILE *f = fopen(model_path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *img = NULL;
    assert_int_equal(posix_memalign(&img, 64, (size_t)n), 0);
    assert_int_equal(fread(img, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    struct tern_server_params p = tern_server_default_params();
    p.model_data = img;
    p.model_size = (size_t)n;
    p.model_alias = "in-memory";
    struct test_srv v;
    srv_start(&v, p);
    cJSON *a = post(v.port, CHAT, "{" MSG ", \"max_tokens\": 2}", 200);
    assert_string_equal(test_json_str(a, "model"), "in-memory");
    cJSON_Delete(a);
    test_srv_stop(&v);
    free(img);
}

static int setup(void **state)
{
    (void)state;
    model_path = test_shared_path_copy("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (!model_path) return 0;
    srv_start(&main_srv, tern_server_default_params());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (main_srv.s) test_srv_stop(&main_srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strict_schemas), cmocka_unit_test(test_forced_calls),
        cmocka_unit_test(test_client_fields),  cmocka_unit_test(test_caps),
        cmocka_unit_test(test_bind_first),     cmocka_unit_test(test_model_in_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
