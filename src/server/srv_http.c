/* srv_http.c — the HTTP side on libmicrohttpd (one thread per connection): routing, the API
 * key, the body size limit, reading bodies, answering with JSON / OpenAI error bodies, and
 * handing jobs to the engine and their output back to the client (a server-sent event stream
 * read by a content-reader callback, or one body after the job is done).
 *
 * A connection thread waiting for its job wakes at least every 200 ms to see whether the
 * client is still there (a non-blocking MSG_PEEK read returning 0 = the peer closed its side);
 * if not, the job is cancelled and the engine frees its slot before its next step. Clients
 * must therefore not half-close their sending side while waiting for an answer (curl, the
 * openai client, browsers do not).
 *
 * Slow and idle clients: a connection costs a thread, so the daemon polls with poll() (select
 * stops at descriptor 1024), takes up to max_connections (4096; the open-file limit is raised
 * to hold them) and, optionally, max_connections_per_ip. Every connection is listed (struct
 * srv_conn) from MHD's connection-started notice on; the reaper thread closes one that has been
 * receiving a request's headers and body (or idling before its next request) for longer than
 * read_timeout, writing a 408 first. MHD's own timeout is reset by any byte, so one byte every
 * few minutes used to hold a thread for ever. Once a request is complete the connection is not
 * timed: answers take as long as they take. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <nettle/sha2.h>

#include "server/server.h"
#include "util/error.h"

enum { EP_CHAT = 0, EP_COMPLETIONS = 1, EP_MODELS = 2, EP_OTHER = 3 };

struct conn {
    int key;               /* the API key it carries (index into s->keys), -1 none needed */
    struct sbuf body;
    bool too_big;
    bool had_job;          /* counted in s->http_jobs until the request completes */
    double t0;
};

struct stream {
    struct job *job;
    int fd;
    double t0;
};

static void log_line(struct tern_server *s, const char *method, const char *url, int status,
                     double t0, const struct job *j)
{
    if (s->p.quiet) return;
    const double ms = (srv_now() - t0) * 1e3;
    char spec[128] = "";
    if (j && s->draft && (j->st.spec_drafted || j->st.spec_plain_steps))
        /* what drafting did for it: drafts checked and kept, steps the controller held it off */
        snprintf(spec, sizeof spec, " drafted %d kept %d held off %d steps", j->st.spec_drafted,
                 j->st.spec_accepted, j->st.spec_plain_steps);
    if (j)
        fprintf(stderr, "tern serve: %s %s %d %.1f ms prompt %d (cached %d) generated %d%s%s\n",
                method, url, status, ms, j->req.n_prompt, j->st.n_reused, j->st.n_generated, spec,
                j->cancelled && !j->done ? " (client left)" : "");
    else
        fprintf(stderr, "tern serve: %s %s %d %.1f ms\n", method, url, status, ms);
}

/* warning: X-Tern-Warning, what a lenient grammar did not enforce (srv_job_prepare), or NULL */
static enum MHD_Result reply_w(struct tern_server *s, struct MHD_Connection *c, int endpoint,
                               int status, const char *ctype, char *body, const char *retry_after,
                               const char *warning)
{
    if (!body) body = strdup("{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\", \"param\": null, \"code\": null}}");
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (warning && *warning) MHD_add_response_header(r, "X-Tern-Warning", warning);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_metrics_request(&s->metrics, endpoint, status);
    return ret;
}

static enum MHD_Result reply(struct tern_server *s, struct MHD_Connection *c, int endpoint,
                             int status, const char *ctype, char *body, const char *retry_after)
{
    return reply_w(s, c, endpoint, status, ctype, body, retry_after, NULL);
}

static enum MHD_Result reply_err(struct tern_server *s, struct MHD_Connection *c, int endpoint,
                                 const struct srv_err *e)
{
    return reply(s, c, endpoint, e->status, "application/json", srv_err_body(e),
                 e->status == 503 ? "1" : NULL);
}

/* The index of the API key the request carries, -1 when the server needs none, -2 when it is
 * refused. Every key is compared, each in constant time in its length: the time does not tell
 * how much of a guess matched, nor which key. */
static int authorized(const struct tern_server *s, struct MHD_Connection *c)
{
    if (!s->n_keys) return -1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return -2;
    h += 7;
    const size_t hn = strlen(h);
    int found = -2;
    for (int j = 0; j < s->n_keys; j++) {
        const char *k = s->keys[j];
        const size_t kn = strlen(k);
        unsigned char d = hn != kn;
        for (size_t i = 0; i < kn; i++) d |= (unsigned char)(k[i] ^ (i < hn ? h[i] : 0));
        const int hit = -(int)(d == 0); /* all ones on a match */
        found = (found & ~hit) | (j & hit);
    }
    return found;
}

uint64_t srv_cache_group(const struct tern_server *s, int key, const char *cache_key, int flavor)
{
    if (key < 0 && !cache_key && flavor == 0) return 0;
    /* a key's group is not the key: only 64 bits of a hash reach the prompt cache's files */
    struct sha256_ctx h;
    sha256_init(&h);
    static const char tag[] = "tern prompt cache group 1";
    sha256_update(&h, sizeof tag, (const uint8_t *)tag);
    const char *k = key >= 0 ? s->keys[key] : "";
    const uint8_t has[2] = {key >= 0, cache_key != NULL};
    sha256_update(&h, sizeof has, has);
    sha256_update(&h, strlen(k) + 1, (const uint8_t *)k);
    if (cache_key) sha256_update(&h, strlen(cache_key), (const uint8_t *)cache_key);
    if (flavor > 0) sha256_update(&h, sizeof s->flv[flavor].digest, s->flv[flavor].digest);
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&h, sizeof d, d);
    uint64_t g = 0;
    for (int i = 0; i < 8; i++) g = g << 8 | d[i];
    return g ? g : 1;
}

static bool client_gone(int fd)
{
    if (fd < 0) return false;
    char ch;
    ssize_t r = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* ---------------------------------------------------------------- connections and their deadline */
static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
    struct tern_server *s = cls;
    pthread_mutex_lock(&s->conns_mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct srv_conn *e = calloc(1, sizeof *e);
        if (e) { /* out of memory: the connection goes untimed (MHD's idle timeout still holds) */
            e->fd = conn_fd(c);
            e->since = srv_now();
            e->next = s->conns;
            if (s->conns) s->conns->prev = e;
            s->conns = e;
            s->n_conns++;
        }
        *socket_context = e;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        struct srv_conn *e = *socket_context;
        if (e->prev) e->prev->next = e->next;
        else s->conns = e->next;
        if (e->next) e->next->prev = e->prev;
        s->n_conns--;
        free(e);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&s->conns_mu);
}

enum conn_state {
    CONN_ANSWERING,  /* the request is complete: its answer is not timed */
    CONN_REFUSED,    /* a response is queued while the body may still come (still timed) */
    CONN_NEXT,       /* a request is over: the next one (or the idle wait for it) is timed */
};

static void conn_mark(struct tern_server *s, struct MHD_Connection *c, enum conn_state st)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct srv_conn *e = ci ? ci->socket_context : NULL;
    if (!e) return;
    pthread_mutex_lock(&s->conns_mu);
    if (st == CONN_ANSWERING) {
        e->since = 0;
    } else if (st == CONN_REFUSED) {
        e->answered = true;
    } else {
        e->since = srv_now();
        e->answered = false;
        e->requests++;
    }
    pthread_mutex_unlock(&s->conns_mu);
}

/* Close the connections past their deadline: a 408 in OpenAI's shape for one that never
 * completed a request (a kept-alive connection idling before its next one is closed quietly, as
 * any server does), then shutdown(), which wakes its thread with end-of-file. Under conns_mu
 * (an entry's fd is its connection's until the closed notice, which takes that lock). */
static int reap(struct tern_server *s, double now)
{
    char resp[1024];
    int resp_len = -1; /* made when first needed */
    int n = 0;
    for (struct srv_conn *e = s->conns; e; e = e->next) {
        if (e->cut || e->since <= 0 || now - e->since < s->p.read_timeout || e->fd < 0) continue;
        if (!e->answered && !e->requests && resp_len < 0) {
            struct srv_err err;
            srv_err_set(&err, 408, "invalid_request_error", NULL, "request_timeout",
                        "the request's headers and body did not arrive within %d s (--read-timeout)",
                        s->p.read_timeout);
            char *body = srv_err_body(&err);
            resp_len = body ? snprintf(resp, sizeof resp, "HTTP/1.1 408 Request Timeout\r\nContent-Type: "
                                       "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                       strlen(body), body) : 0;
            free(body);
            if (resp_len < 0 || resp_len >= (int)sizeof resp) resp_len = 0;
        }
        if (!e->answered && !e->requests && resp_len > 0)
            (void)send(e->fd, resp, (size_t)resp_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        shutdown(e->fd, SHUT_RDWR);
        e->cut = true;
        n++;
    }
    s->n_timed_out += (uint64_t)n;
    return n;
}

static void *reaper_main(void *arg)
{
    struct tern_server *s = arg;
    pthread_mutex_lock(&s->conns_mu);
    while (!s->reaper_exit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->conns_cv, &s->conns_mu, &ts);
        const int n = s->reaper_exit ? 0 : reap(s, srv_now());
        if (n && !s->p.quiet)
            fprintf(stderr, "tern serve: closed %d connection%s that sent no complete request within "
                    "%d s (--read-timeout)\n", n, n == 1 ? "" : "s", s->p.read_timeout);
    }
    pthread_mutex_unlock(&s->conns_mu);
    return NULL;
}

static void wait_200ms(pthread_cond_t *cv, pthread_mutex_t *mu)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

/* Mark the job's client gone (the engine ends it before its next step). Under s->mu. */
static void cancel_job(struct tern_server *s, struct job *j)
{
    if (!j->done) {
        j->cancelled = true;
        pthread_cond_signal(&s->wake);
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    struct job *j = st->job;
    struct tern_server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        size_t avail = j->out.len - j->out_pos;
        if (avail) {
            size_t n = avail < max ? avail : max;
            memcpy(buf, j->out.p + j->out_pos, n);
            j->out_pos += n;
            pthread_mutex_unlock(&s->mu);
            return (ssize_t)n;
        }
        if (j->done) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        wait_200ms(&j->cv, &s->mu);
        if (j->out.len == j->out_pos && !j->done && client_gone(st->fd)) {
            cancel_job(s, j);
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    struct job *j = st->job;
    struct tern_server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    cancel_job(s, j);
    log_line(s, "POST", j->req.kind == JOB_CHAT ? "/v1/chat/completions" : "/v1/completions",
             200, st->t0, j);
    srv_job_release(j);
    pthread_mutex_unlock(&s->mu);
    free(st);
}

static enum MHD_Result handle_job(struct tern_server *s, struct MHD_Connection *c, int endpoint,
                                  struct conn *cs, const char *url)
{
    struct srv_err e = {0};
    struct srv_req req;
    if (!srv_req_parse(s, endpoint == EP_CHAT ? JOB_CHAT : JOB_COMPLETION, cs->body.p ? cs->body.p : "",
                       cs->body.len, &req, &e)) {
        srv_req_free(&req);
        log_line(s, "POST", url, e.status, cs->t0, NULL);
        return reply_err(s, c, endpoint, &e);
    }
    req.cache_group = srv_cache_group(s, cs->key, req.cache_key, req.flavor);
    struct job *j = srv_job_new(s, &req);
    if (!j) {
        srv_req_free(&req);
        srv_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return reply_err(s, c, endpoint, &e);
    }
    if (!srv_job_prepare(j, &e) || !srv_enqueue(s, j, &e)) {
        pthread_mutex_lock(&s->mu);
        srv_job_release(j);
        pthread_mutex_unlock(&s->mu);
        log_line(s, "POST", url, e.status, cs->t0, NULL);
        return reply_err(s, c, endpoint, &e);
    }
    const int fd = conn_fd(c);
    pthread_mutex_lock(&s->mu);
    s->http_jobs++;
    cs->had_job = true;
    pthread_mutex_unlock(&s->mu);
    if (j->req.stream) {
        struct stream *st = calloc(1, sizeof *st);
        struct MHD_Response *r = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                        stream_read, st, stream_free)
                                    : NULL;
        if (!r) {
            free(st);
            pthread_mutex_lock(&s->mu);
            cancel_job(s, j);
            srv_job_release(j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
        st->job = j; /* the connection's reference now belongs to the stream */
        st->fd = fd;
        st->t0 = cs->t0;
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        if (j->warning[0]) MHD_add_response_header(r, "X-Tern-Warning", j->warning);
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        srv_metrics_request(&s->metrics, endpoint, 200);
        return ret;
    }
    pthread_mutex_lock(&s->mu);
    while (!j->done) {
        wait_200ms(&j->cv, &s->mu);
        if (!j->done && client_gone(fd)) {
            cancel_job(s, j);
            log_line(s, "POST", url, 499, cs->t0, j);
            srv_job_release(j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO; /* nobody to answer: close */
        }
    }
    char *body = j->out.p;
    j->out.p = NULL;
    j->out.len = j->out.cap = 0;
    const int status = j->status;
    char warning[sizeof j->warning];
    memcpy(warning, j->warning, sizeof warning);
    log_line(s, "POST", url, status, cs->t0, j);
    srv_job_release(j);
    pthread_mutex_unlock(&s->mu);
    return reply_w(s, c, endpoint, status, "application/json", body, NULL, warning);
}

/* The base model, then each adapter with its base as "parent" (vLLM's listing of LoRA modules). */
static char *models_json(struct tern_server *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < s->n_flv; i++) {
        const struct srv_flavor *f = &s->flv[i];
        cJSON *m = cJSON_CreateObject();
        cJSON_AddItemToArray(d, m);
        cJSON_AddStringToObject(m, "id", f->name);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", (double)s->started);
        cJSON_AddStringToObject(m, "owned_by", "tern");
        if (i) {
            cJSON_AddStringToObject(m, "root", s->flv[0].name);
            cJSON_AddStringToObject(m, "parent", s->flv[0].name);
        }
        cJSON *meta = cJSON_AddObjectToObject(m, "meta");
        cJSON_AddNumberToObject(meta, "n_ctx", s->n_ctx);
        cJSON_AddNumberToObject(meta, "n_parallel", s->p.n_parallel);
        cJSON_AddStringToObject(meta, "tool_call_format", tern_toolcall_format_name(f->fmt));
        cJSON_AddStringToObject(meta, "reasoning_format", tern_reasoning_format_name(f->rfmt));
        if (i) cJSON_AddStringToObject(meta, "adapter", s->p.lora_paths[i - 1]);
    }
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t;
}

static int endpoint_of(const char *url)
{
    if (!strcmp(url, "/v1/chat/completions")) return EP_CHAT;
    if (!strcmp(url, "/v1/completions")) return EP_COMPLETIONS;
    if (!strcmp(url, "/v1/models")) return EP_MODELS;
    return EP_OTHER;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    (void)version;
    struct tern_server *s = cls;
    struct conn *cs = *con_cls;
    const int ep = endpoint_of(url);
    const bool v1 = !strncmp(url, "/v1/", 4) || !strcmp(url, "/v1");
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        cs->t0 = srv_now();
        *con_cls = cs;
        /* refuse before reading the body when the answer is known already */
        struct srv_err e;
        cs->key = authorized(s, c);
        if (v1 && strcmp(method, "OPTIONS") && cs->key == -2) {
            srv_err_set(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                        "Incorrect API key provided: send 'Authorization: Bearer <key>' (the key "
                        "given to tern serve with --api-key, --api-key-file or TERN_API_KEY)");
            log_line(s, method, url, 401, cs->t0, NULL);
            conn_mark(s, c, CONN_REFUSED);
            return reply_err(s, c, ep, &e);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body) {
            srv_err_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                        "the request body of %s bytes exceeds the server's limit of %zu bytes",
                        cl, s->p.max_body);
            log_line(s, method, url, 413, cs->t0, NULL);
            conn_mark(s, c, CONN_REFUSED);
            return reply_err(s, c, ep, &e);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->too_big && cs->body.len + *upload_size > s->p.max_body) {
            cs->too_big = true;
            sbuf_free(&cs->body);
        }
        if (!cs->too_big && !sbuf_add(&cs->body, upload, *upload_size)) cs->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }
    conn_mark(s, c, CONN_ANSWERING); /* the whole request is in: no deadline for its answer */
    struct srv_err e;
    if (!atomic_load(&s->ready) && strcmp(method, "OPTIONS")) {
        /* the port is bound before the model loads: say so rather than refuse the connection */
        if (!strcmp(url, "/health"))
            return reply(s, c, ep, 503, "application/json", strdup("{\"status\": \"loading\"}"), "1");
        srv_err_set(&e, 503, "server_error", NULL, "model_loading", "the model is loading; retry shortly");
        log_line(s, method, url, 503, cs->t0, NULL);
        return reply_err(s, c, ep, &e);
    }
    if (cs->too_big) {
        srv_err_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                    "the request body exceeds the server's limit of %zu bytes", s->p.max_body);
        log_line(s, method, url, 413, cs->t0, NULL);
        return reply_err(s, c, ep, &e);
    }
    if (!strcmp(method, "OPTIONS")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        enum MHD_Result ret = MHD_queue_response(c, 204, r);
        MHD_destroy_response(r);
        return ret;
    }
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    const bool post = !strcmp(method, "POST");
    if (ep == EP_CHAT || ep == EP_COMPLETIONS) {
        if (post) return handle_job(s, c, ep, cs, url);
    } else if (ep == EP_MODELS) {
        if (get) {
            log_line(s, method, url, 200, cs->t0, NULL);
            return reply(s, c, ep, 200, "application/json", models_json(s), NULL);
        }
    } else if (!strcmp(url, "/health")) {
        if (get) {
            const bool draining = atomic_load(&s->draining);
            return reply(s, c, ep, draining ? 503 : 200, "application/json",
                         strdup(draining ? "{\"status\": \"shutting down\"}" : "{\"status\": \"ok\"}"), NULL);
        }
    } else if (!strcmp(url, "/metrics")) {
        if (get) return reply(s, c, ep, 200, "text/plain; version=0.0.4", srv_metrics_text(s), NULL);
    } else if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
        if (get) return reply(s, c, ep, 200, "text/html; charset=utf-8", strdup(srv_page_html), NULL);
    } else {
        srv_err_set(&e, 404, "invalid_request_error", NULL, "unknown_url",
                    "Unknown request URL: %s %s. tern serves POST /v1/chat/completions, POST "
                    "/v1/completions, GET /v1/models, GET /health, GET /metrics and GET /", method, url);
        log_line(s, method, url, 404, cs->t0, NULL);
        return reply_err(s, c, ep, &e);
    }
    srv_err_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
                "%s is not allowed on %s (use %s)", method, url,
                ep == EP_CHAT || ep == EP_COMPLETIONS ? "POST" : "GET");
    log_line(s, method, url, 405, cs->t0, NULL);
    return reply_err(s, c, ep, &e);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct tern_server *s = cls;
    struct conn *cs = *con_cls;
    conn_mark(s, c, CONN_NEXT);
    if (!cs) return;
    if (cs->had_job) {
        pthread_mutex_lock(&s->mu);
        s->http_jobs--;
        pthread_mutex_unlock(&s->mu);
    }
    sbuf_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

/* A connection holds a descriptor (and a thread): raise the soft open-file limit to the hard
 * one when max_connections needs it, or lower max_connections to what fits, saying so. */
static void raise_fd_limit(struct tern_server *s)
{
    const rlim_t spare = 128; /* the model file, the listening socket, pipes, a prompt-cache dir */
    const rlim_t want = (rlim_t)s->p.max_connections + spare;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (!setrlimit(RLIMIT_NOFILE, &up)) rl = up;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        const int fit = rl.rlim_cur > 2 * spare ? (int)(rl.rlim_cur - spare) : (int)(rl.rlim_cur / 2);
        fprintf(stderr, "tern serve: warning: the open-file limit is %llu (hard limit %llu): at most %d "
                "connections instead of %d (raise it with ulimit -n)\n", (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max, fit, s->p.max_connections);
        s->p.max_connections = fit > 1 ? fit : 1;
    }
}

tern_status srv_http_start(struct tern_server *s)
{
    const char *host = s->p.host ? s->p.host : "127.0.0.1";
    char port[16];
    snprintf(port, sizeof port, "%d", s->p.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai || !ai) return tern_fail(TERN_ERR_ARG, "serve: cannot resolve host '%s': %s", host, gai_strerror(gai));
    raise_fd_limit(s);
    /* poll(), not select(): select cannot watch a descriptor above 1024 */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)s->p.port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->p.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->p.max_connections_per_ip,
        /* a stalled reader of an answer (the read deadline covers requests only) */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, s, MHD_OPTION_END);
    const int err = errno;
    freeaddrinfo(ai);
    if (!d)
        return tern_fail(TERN_ERR_IO, "serve: cannot listen on %s:%d (%s; is the port in use?)", host,
                         s->p.port, strerror(err));
    s->daemon = d;
    s->reaper_exit = false;
    if (pthread_create(&s->reaper, NULL, reaper_main, s)) {
        srv_http_stop(s);
        return tern_fail(TERN_ERR_NOMEM, "serve: cannot start the connection reaper thread");
    }
    s->reaper_started = true;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    s->port = s->p.port;
    if (di && getsockname(di->listen_fd, (struct sockaddr *)&sa, &sl) == 0)
        s->port = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    return TERN_OK;
}

void srv_http_quiesce(struct tern_server *s)
{
    /* the listening socket stays open (MHD's rule for threaded daemons) until the daemon stops */
    if (s->daemon && s->quiesced_fd < 0) s->quiesced_fd = MHD_quiesce_daemon(s->daemon);
}

void srv_http_stop(struct tern_server *s)
{
    if (s->reaper_started) {
        pthread_mutex_lock(&s->conns_mu);
        s->reaper_exit = true;
        pthread_cond_signal(&s->conns_cv);
        pthread_mutex_unlock(&s->conns_mu);
        pthread_join(s->reaper, NULL);
        s->reaper_started = false;
    }
    if (!s->daemon) return;
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (s->quiesced_fd >= 0) close(s->quiesced_fd);
    s->quiesced_fd = -1;
}
