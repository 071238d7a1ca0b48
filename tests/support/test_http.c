/* test_http.c — the tests' tiny HTTP client (test_http.h). */
#include "test_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "test_support.h"

static int connect_to(int port)
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
    int fd = connect_to(port);
    char h[1024];
    const size_t len = body ? strlen(body) : 0;
    int n = snprintf(h, sizeof h, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", method, path,
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
