/* srv_gate.c — what a request must be before tern serve reads its body (called by srv_http.c
 * from the first call of a request, when its headers are in), and the budget of body bytes.
 *
 * Read first: any web page the user opens can send requests to a server on 127.0.0.1. A "simple"
 * cross-site request (a form post, a text/plain fetch) needs no preflight, so it would run before
 * the browser decides whether the page may read the answer; and a page on a name the attacker
 * controls can point that name at 127.0.0.1 (DNS rebinding), making its requests same-origin to the
 * browser. So: a POST must say Content-Type: application/json (which a page can only send after a
 * preflight), a request carrying another origin's Origin is refused unless --cors lists it, and a
 * loopback server answers only requests whose Host is one of its own names (the rebinding page
 * sends its own). Framing: a body framed two ways (two Content-Lengths, or Content-Length with
 * chunked) is how requests are smuggled past a proxy that reads the other framing, so both are
 * refused, as is any Transfer-Encoding but chunked (libmicrohttpd 0.9.75 would read such a body
 * until the connection closes and never answer). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "server/server.h"

static char *lower_dup(const char *a)
{
    char *d = strdup(a);
    for (char *p = d; p && *p; p++) *p = (char)tolower((unsigned char)*p);
    return d;
}

bool srv_gate_init(struct tern_server *s)
{
    const struct tern_server_params *p = &s->p;
    s->cors = calloc((size_t)p->n_cors_origins + 1, sizeof *s->cors);
    s->hosts = calloc((size_t)p->n_allowed_hosts + 1, sizeof *s->hosts);
    if (!s->cors || !s->hosts) return false;
    for (int i = 0; i < p->n_cors_origins; i++) {
        if (!strcmp(p->cors_origins[i], "*")) s->cors_any = true;
        /* an origin is scheme://host[:port]: a trailing slash would never match a browser's */
        size_t n = strlen(p->cors_origins[i]);
        while (n > 0 && p->cors_origins[i][n - 1] == '/') n--;
        if (!(s->cors[s->n_cors++] = strndup(p->cors_origins[i], n))) return false;
    }
    for (int i = 0; i < p->n_allowed_hosts; i++) {
        if (!strcmp(p->allowed_hosts[i], "*")) s->hosts_any = true;
        if (!(s->hosts[s->n_hosts++] = lower_dup(p->allowed_hosts[i]))) return false;
    }
    s->p.cors_origins = s->p.allowed_hosts = NULL; /* the caller's arrays may go */
    return true;
}

void srv_gate_free(struct tern_server *s)
{
    for (int i = 0; s->cors && i < s->n_cors; i++) free(s->cors[i]);
    for (int i = 0; s->hosts && i < s->n_hosts; i++) free(s->hosts[i]);
    free(s->cors);
    free(s->hosts);
    s->cors = s->hosts = NULL;
}

static bool is_loopback(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) {
        const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(x) || (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
    }
    return false;
}

bool srv_gate_bind(struct tern_server *s, const struct sockaddr *addr)
{
    const char *host = s->p.host ? s->p.host : "127.0.0.1";
    if (!is_loopback(addr)) {
        s->check_host = s->n_hosts > 0;
        if (!s->n_keys)
            fprintf(stderr, "tern serve: warning: listening on %s, which is not a loopback address, without "
                    "an API key: anyone who can reach it can run the model (give --api-key or "
                    "--api-key-file)\n", host);
        return true;
    }
    /* its own names first: localhost, the loopback addresses, the name it was given */
    char given[300];
    snprintf(given, sizeof given, strchr(host, ':') && host[0] != '[' ? "[%s]" : "%s", host);
    const char *own[] = {"localhost", "127.0.0.1", "[::1]", given};
    const int n_own = strcasecmp(given, "localhost") && strcmp(given, "127.0.0.1") && strcmp(given, "[::1]") ? 4 : 3;
    char **h = realloc(s->hosts, sizeof *h * (size_t)(s->n_hosts + n_own + 1));
    if (!h) return false;
    s->hosts = h;
    memmove(h + n_own, h, sizeof *h * (size_t)s->n_hosts);
    for (int i = 0; i < n_own; i++) h[i] = NULL;
    s->n_hosts += n_own;
    s->n_own_hosts = n_own;
    for (int i = 0; i < n_own; i++)
        if (!(h[i] = lower_dup(own[i]))) return false;
    s->check_host = true;
    return true;
}

/* ---------------------------------------------------------------- framing */
struct framing {
    int n_length, n_coding, n_host;
    const char *coding;   /* the first Transfer-Encoding */
    bool other_coding;    /* a value besides one "chunked" */
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct framing *f = cls;
    if (!strcasecmp(key, "Content-Length")) f->n_length++;
    if (!strcasecmp(key, "Host")) f->n_host++;
    if (!strcasecmp(key, "Transfer-Encoding")) {
        if (!f->n_coding++) f->coding = value;
        const char *v = value ? value : "";
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
        if (f->n_coding > 1 || n != 7 || strncasecmp(v, "chunked", 7)) f->other_coding = true;
    }
    return MHD_YES;
}

bool srv_gate_framing(struct MHD_Connection *c, struct srv_err *e)
{
    struct framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &f);
    if (f.n_length > 1) {
        srv_err_set(e, 400, "invalid_request_error", NULL, "bad_framing",
                    "the request repeats the Content-Length header (%d times): send it once", f.n_length);
        return false;
    }
    if (f.n_coding && f.n_length) {
        srv_err_set(e, 400, "invalid_request_error", NULL, "bad_framing",
                    "the request sends both Content-Length and Transfer-Encoding: frame the body one way");
        return false;
    }
    if (f.other_coding) {
        srv_err_set(e, 501, "invalid_request_error", NULL, "unsupported_transfer_encoding",
                    "Transfer-Encoding '%.200s'%s is not supported: send a Content-Length or "
                    "'Transfer-Encoding: chunked'", f.coding ? f.coding : "", f.n_coding > 1 ? " (repeated)" : "");
        return false;
    }
    if (f.n_host > 1) {
        srv_err_set(e, 400, "invalid_request_error", NULL, "bad_host", "the request repeats the Host header");
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- Host */
bool srv_gate_host(const struct tern_server *s, struct MHD_Connection *c, const char *version, struct srv_err *e)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!h || !h[0]) {
        if (version && strcmp(version, "HTTP/1.0")) {
            srv_err_set(e, 400, "invalid_request_error", NULL, "bad_host",
                        "an HTTP/1.1 request must send a Host header");
            return false;
        }
        return true; /* HTTP/1.0 may omit it */
    }
    if (!s->check_host || s->hosts_any) return true;
    /* name[:port] or [v6]:port */
    const char *end = h[0] == '[' ? strchr(h, ']') : NULL;
    const char *colon = h[0] == '[' ? (end && end[1] == ':' ? end + 1 : NULL) : strchr(h, ':');
    const size_t name_len = colon ? (size_t)(colon - h) : strlen(h);
    const char *port = colon ? colon + 1 : NULL;
    char own_port[16];
    snprintf(own_port, sizeof own_port, "%d", s->port);
    for (int i = 0; i < s->n_hosts; i++) {
        const char *k = s->hosts[i];
        if (i < s->n_own_hosts) {
            if (strlen(k) == name_len && !strncasecmp(k, h, name_len) && (!port || !strcmp(port, own_port)))
                return true;
        } else if (!strcasecmp(k, h) ||
                   (strlen(k) == name_len && !strncasecmp(k, h, name_len) && !strchr(k[0] == '[' ? strchr(k, ']') : k, ':'))) {
            return true; /* "name" allows any port, "name:port" that one */
        }
    }
    srv_err_set(e, 403, "invalid_request_error", NULL, "host_not_allowed",
                "the Host header '%.200s' is not one of this server's names (localhost, 127.0.0.1 or [::1] "
                "with port %d%s): a page on another site can reach a server on loopback by pointing its "
                "own name there (DNS rebinding). If the name is yours, allow it with --allow-host NAME",
                h, s->port, s->n_hosts > s->n_own_hosts ? ", or one given with --allow-host" : "");
    return false;
}

/* ---------------------------------------------------------------- Origin */
bool srv_gate_origin(const struct tern_server *s, struct MHD_Connection *c, const char **acao, struct srv_err *e)
{
    *acao = NULL;
    const char *o = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!o) return true;
    /* the server's own page: http://<the Host it was reached by> */
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (h && !strncasecmp(o, "http://", 7) && !strcasecmp(o + 7, h)) return true;
    if (s->cors_any) {
        *acao = "*";
        return true;
    }
    for (int i = 0; i < s->n_cors; i++)
        if (!strcasecmp(o, s->cors[i])) {
            *acao = s->cors[i];
            return true;
        }
    srv_err_set(e, 403, "invalid_request_error", NULL, "origin_not_allowed",
                "requests from pages on other origins are refused: Origin '%.200s' is not allowed "
                "(tern serve --cors ORIGIN allows one)", o);
    return false;
}

/* ---------------------------------------------------------------- Content-Type */
bool srv_gate_json(struct MHD_Connection *c, struct srv_err *e)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *v = ct ? ct : "";
    while (*v == ' ' || *v == '\t') v++;
    if (!strncasecmp(v, "application/json", 16) && (!v[16] || strchr("; \t", v[16]))) return true;
    srv_err_set(e, 415, "invalid_request_error", NULL, "unsupported_media_type",
                "the request body must be JSON sent with 'Content-Type: application/json' (got %s%.100s%s)",
                ct ? "'" : "", ct ? ct : "none", ct ? "'" : "");
    return false;
}

/* ---------------------------------------------------------------- the body budget */
bool srv_body_take(struct tern_server *s, size_t n)
{
    pthread_mutex_lock(&s->body_mu);
    const bool ok = n <= s->p.max_body_total - s->body_bytes;
    if (ok) {
        s->body_bytes += n;
        if (s->body_bytes > s->body_bytes_peak) s->body_bytes_peak = s->body_bytes;
    } else {
        s->body_refused++;
    }
    pthread_mutex_unlock(&s->body_mu);
    return ok;
}

void srv_body_give(struct tern_server *s, size_t n)
{
    if (!n) return;
    pthread_mutex_lock(&s->body_mu);
    s->body_bytes -= n;
    pthread_mutex_unlock(&s->body_mu);
}
