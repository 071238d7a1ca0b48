/* test_http.h — a tiny HTTP/1.1 client for the tests that drive tern serve in-process over
 * loopback with raw sockets (Connection: close, whole answers, no chunked bodies). The raw
 * exchange (test_http_raw) sends exactly the bytes given, for tests of the server's framing. */
#ifndef TERN_TEST_HTTP_H
#define TERN_TEST_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <pthread.h>

#include <cjson/cJSON.h>

#include "tern.h"
#include "tern_server.h"

struct test_resp {
    int status;
    char *body; /* caller frees */
};

/* A socket connected to 127.0.0.1:port (60 s receive timeout); fails the test if it cannot. */
int test_http_connect(int port);
/* The string / number at a dotted path of a JSON answer ("choices.0.message.content": digits
 * index arrays); the string is NULL when absent or not a string, a number that is not there
 * fails the test naming the path. */
const char *test_json_str(const cJSON *o, const char *path);
double test_json_num(const cJSON *o, const char *path);
/* method path on 127.0.0.1:port with an optional Authorization value and JSON body. */
void test_http(int port, const char *method, const char *path, const char *auth, const char *body,
               struct test_resp *r);
/* POST /v1/chat/completions; fails the test unless the status is want_status; the parsed body
 * (caller frees with cJSON_Delete). */
cJSON *test_post_chat(int port, const char *auth, const char *body, int want_status);

/* One raw exchange: connect, send head then body_len bytes of body (from another thread, so
 * a server answering early cannot deadlock the send), read until the server closes (or 20 s).
 * What came back, parsed: status 0 = no HTTP response; headers (the raw header block, with its
 * final CRLF), body; closed: the server closed cleanly (end of file, no reset); reset: the read
 * ended in ECONNRESET. The strings are the caller's to free with test_raw_free. */
struct test_raw {
    int status;
    char *headers;
    char *body;
    bool closed, reset;
    size_t sent;      /* body bytes the server took before the exchange ended */
};
void test_http_raw(int port, const char *head, const char *body, size_t body_len, struct test_raw *r);
void test_raw_free(struct test_raw *r);
/* The value of header name in r->headers (case-insensitive name), copied into out; false if absent. */
bool test_raw_header(const struct test_raw *r, const char *name, char *out, size_t cap);

/* A tern serve in this process: created from p (port 0: the OS picks) and run in a thread. */
struct test_srv {
    struct tern_server *s;
    pthread_t th;
    int port;
};
/* Fails the test when the server cannot be created. */
void test_srv_start(struct test_srv *v, const struct tern_server_params *p);
/* Stops it (the server drains), joins the thread, frees it. */
void test_srv_stop(struct test_srv *v);

#endif
