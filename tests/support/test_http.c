/* test_http.c — the tests' tiny HTTP client (test_http.h). */
#include "test_http.h"
#include "tern_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "test_support.h"

int test_http_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) fail_msg("cannot connect to port %d", port);
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

void test_http(int port, const char *method, const char *path, const char *auth, const char *body,
               struct test_resp *r)
{
    int fd = test_http_connect(port);
    char h[1024];
    const size_t len = body ? strlen(body) : 0;
    int n = snprintf(h, sizeof h, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", method, path, port,
                     auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "", len);
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
    r->body = strdup(sep + 4);
    free(raw);
}

cJSON *test_post_chat(int port, const char *auth, const char *body, int want_status)
{
    struct test_resp r;
    test_http(port, "POST", "/v1/chat/completions", auth, body, &r);
    if (r.status != want_status) fail_msg("%s -> %d (want %d): %s", body, r.status, want_status, r.body);
    cJSON *j = cJSON_Parse(r.body);
    if (!j) fail_msg("not JSON: %s", r.body);
    free(r.body);
    return j;
}

struct raw_sender {
    int fd;
    const char *body;
    size_t len, sent;
};

static void *raw_send_main(void *arg)
{
    struct raw_sender *rs = arg;
    while (rs->sent < rs->len) {
        ssize_t k = send(rs->fd, rs->body + rs->sent, rs->len - rs->sent, MSG_NOSIGNAL);
        if (k <= 0) break;
        rs->sent += (size_t)k;
    }
    return NULL;
}

void test_http_raw(int port, const char *head, const char *body, size_t body_len, struct test_raw *r)
{
    memset(r, 0, sizeof *r);
    int fd = test_http_connect(port);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    send(fd, head, strlen(head), MSG_NOSIGNAL);
    struct raw_sender rs = {.fd = fd, .body = body, .len = body ? body_len : 0};
    /* as fast as the socket takes it, as a client that does not wait for an answer */
    while (rs.sent < rs.len) {
        ssize_t k = send(fd, body + rs.sent, rs.len - rs.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k <= 0) break;
        rs.sent += (size_t)k;
    }
    pthread_t th;
    const bool threaded = rs.sent < rs.len && pthread_create(&th, NULL, raw_send_main, &rs) == 0;
    size_t cap = 1 << 16, got = 0;
    char *raw = malloc(cap);
    for (;;) {
        if (got + 4096 > cap) raw = realloc(raw, cap *= 2);
        ssize_t k = recv(fd, raw + got, cap - got - 1, 0);
        if (k == 0) r->closed = true;
        if (k < 0 && errno == ECONNRESET) r->reset = true;
        if (k <= 0) break;
        got += (size_t)k;
    }
    raw[got] = 0;
    /* the sender goes on until its body is sent or the server stops taking it (a reset, or 20 s
     * without progress): a client that writes its whole body before it looks at an answer */
    if (threaded) pthread_join(th, NULL);
    shutdown(fd, SHUT_RDWR);
    r->sent = rs.sent;
    close(fd);
    char *sep = strstr(raw, "\r\n\r\n");
    if (sep && sscanf(raw, "HTTP/1.%*d %d", &r->status) == 1) {
        r->headers = strndup(raw, (size_t)(sep - raw) + 2);
        r->body = strdup(sep + 4);
    } else {
        r->status = 0;
        r->headers = strdup("");
        r->body = strdup(raw);
    }
    free(raw);
}

void test_raw_free(struct test_raw *r)
{
    free(r->headers);
    free(r->body);
    r->headers = r->body = NULL;
}

bool test_raw_header(const struct test_raw *r, const char *name, char *out, size_t cap)
{
    const size_t n = strlen(name);
    for (const char *l = r->headers ? strstr(r->headers, "\r\n") : NULL; l; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (strncasecmp(h, name, n) || h[n] != ':') continue;
        h += n + 1;
        while (*h == ' ') h++;
        const char *e = strstr(h, "\r\n");
        size_t len = e ? (size_t)(e - h) : strlen(h);
        if (len >= cap) len = cap - 1;
        memcpy(out, h, len);
        out[len] = 0;
        return true;
    }
    return false;
}

static void *srv_thread(void *arg)
{
    struct test_srv *v = arg;
    tern_status_ignore(tern_server_run(v->s)); /* its failures show in the requests' answers */
    return NULL;
}

void test_srv_start(struct test_srv *v, const struct tern_server_params *p)
{
    assert_tern_ok(tern_server_create(p, &v->s));
    v->port = tern_server_port(v->s);
    assert_true(v->port > 0);
    assert_int_equal(pthread_create(&v->th, NULL, srv_thread, v), 0);
}

void test_srv_stop(struct test_srv *v)
{
    tern_server_stop(v->s);
    pthread_join(v->th, NULL);
    tern_server_free(v->s);
    v->s = NULL;
}

static const cJSON *json_at(const cJSON *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *x = o;
    for (char *t = strtok(buf, "."); t && x; t = strtok(NULL, "."))
        x = (*t >= '0' && *t <= '9') ? cJSON_GetArrayItem(x, atoi(t)) : cJSON_GetObjectItemCaseSensitive(x, t);
    return x;
}

const char *test_json_str(const cJSON *o, const char *path)
{
    const cJSON *x = json_at(o, path);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

double test_json_num(const cJSON *o, const char *path)
{
    const cJSON *x = json_at(o, path);
    if (!cJSON_IsNumber(x)) fail_msg("%s is not a number", path);
    return x->valuedouble;
}
