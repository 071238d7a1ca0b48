/* test_http.h — a tiny HTTP/1.1 client for the tests that drive tern serve in-process over
 * loopback with raw sockets (Connection: close, whole answers, no chunked bodies). */
#ifndef TERN_TEST_HTTP_H
#define TERN_TEST_HTTP_H

#include <cjson/cJSON.h>

struct test_resp {
    int status;
    char *body; /* caller frees */
};

/* method path on 127.0.0.1:port with an optional Authorization value and JSON body. */
void test_http(int port, const char *method, const char *path, const char *auth, const char *body,
               struct test_resp *r);
/* POST /v1/chat/completions; fails the test unless the status is want_status; the parsed body
 * (caller frees with cJSON_Delete). */
cJSON *test_post_chat(int port, const char *auth, const char *body, int want_status);

#endif
