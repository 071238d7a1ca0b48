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
 * timed: answers take as long as they take.
 *
 * Before a request's body is read, srv_gate.c checks its framing, Host, Origin and Content-Type,
 * and the body's size against --max-body and the server-wide budget of bodies held at once
 * (--max-body-total): a refusal is answered at once, and the connection then closes. Closing a
 * socket with unread bytes resets the connection, and a reset throws away the answer in the
 * client's receive buffer, while most clients (Node's fetch, Python's http.client) send a whole
 * body before reading: so the closing connection first reads and discards what is still coming
 * (a lingering close, bounded in bytes and time).
 *
 * libmicrohttpd answers some malformed requests itself (a Content-Length that is no number, a
 * bad chunk, headers over its buffer) with a fixed HTML page and no callback. Every such answer
 * goes through its error log first, with the status: the logger counts it in /metrics and, when
 * the request line has been read (the URI callback told this thread its connection: MHD runs one
 * thread per connection), writes the answer as OpenAI's JSON error itself and shuts the socket's
 * sending side, so the HTML that MHD queues after it is never sent. A request line MHD cannot
 * parse on a connection's first request comes before any callback: that one stays HTML. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <microhttpd.h>
#include <nettle/sha2.h>

#include "server/server.h"
#include "util/error.h"

/* the metrics' endpoints (srv_metrics.c): /v1/responses/{id} counts as responses,
 * /v1/messages/count_tokens as messages */
enum { EP_CHAT = 0, EP_COMPLETIONS = 1, EP_MODELS = 2, EP_RESPONSES = 3, EP_MESSAGES = 4, EP_OTHER = 5 };

/* The protocol whose shapes an endpoint's answers (and errors) take. */
static enum srv_api api_of(int endpoint)
{
    return endpoint == EP_COMPLETIONS ? SRV_API_COMPLETIONS : endpoint == EP_RESPONSES ? SRV_API_RESPONSES
           : endpoint == EP_MESSAGES ? SRV_API_MESSAGES : SRV_API_CHAT;
}

struct conn {
    int key;               /* the API key it carries (index into s->keys), -1 none needed */
    struct sbuf body;      /* freed once parsed */
    bool too_big;
    bool over_budget;      /* a chunked body passed --max-body-total: dropped, 503 at its end */
    bool had_job;          /* counted in s->http_jobs until the request completes */
    bool refused;          /* answered before its body was read */
    bool body_pending;     /* it announced a body (Content-Length > 0, or Transfer-Encoding) */
    size_t reserved;       /* bytes of the body budget it holds until it completes: its body,
                              then what was parsed from it */
    size_t body_peak;      /* its body's size (a large one: memory is trimmed after it) */
    const char *acao;      /* Access-Control-Allow-Origin of its answers (--cors), or NULL */
    double t0;
};

/* The connection this thread serves (one thread per connection), from its request line on: the
 * error logger answers MHD's own refusals on it in JSON. */
static _Thread_local struct {
    struct tern_server *s;
    struct srv_conn *e;    /* its entry in s->conns, or NULL */
    int fd;
    bool answered;         /* a response is queued for the current request */
    int mhd_status;        /* MHD refused the request (we answered it): drained at close */
    bool anthropic;        /* the request line names /v1/messages: errors in Anthropic's shape */
} tl;

/* A body at least this large is followed by malloc_trim: glibc keeps freed memory in the
 * connection threads' arenas (and raises its mmap threshold after a large free), so the RSS
 * of a burst of large bodies stayed held. */
enum { TRIM_AT = 1 << 20 };

/* A request's large buffers (its body, the parse, the rendered prompt, the ids) are allocated
 * and freed on its connection thread, in one of glibc's thread arenas. glibc raises its mmap
 * threshold after a large free (up to 32 MiB), and with it the size an arena's top must reach
 * before free gives it back; malloc_trim gives back only the main arena's top. So after a burst
 * of large bodies a thread arena could keep tens of MiB (CI, test_body_budget: +57 MiB, about
 * one run in six under load). A fixed threshold keeps buffers of 1 MiB and more in mappings of
 * their own, returned at free, and the arenas' tops are trimmed past glibc's default 128 KiB.
 * Process-wide and set when the server starts: nothing on the decode path allocates per token. */
static void keep_large_buffers_mapped(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, TRIM_AT);
#endif
}

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

static enum MHD_Result queue(struct MHD_Connection *c, int status, struct MHD_Response *r)
{
    tl.answered = true;
    return MHD_queue_response(c, (unsigned)status, r);
}

/* CORS headers of an answer to cs (a page on an origin --cors allows). */
static void add_cors(const struct tern_server *s, const struct conn *cs, struct MHD_Response *r)
{
    if (cs && cs->acao) MHD_add_response_header(r, "Access-Control-Allow-Origin", cs->acao);
    if (s->n_cors && !s->cors_any) MHD_add_response_header(r, "Vary", "Origin");
}

/* warning: X-Tern-Warning, what a lenient grammar did not enforce (srv_job_prepare), or NULL */
static enum MHD_Result reply_w(struct tern_server *s, struct MHD_Connection *c, const struct conn *cs,
                               int endpoint, int status, const char *ctype, char *body,
                               const char *retry_after, const char *warning)
{
    if (!body) body = strdup("{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\", \"param\": null, \"code\": null}}");
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    add_cors(s, cs, r);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (warning && *warning) MHD_add_response_header(r, "X-Tern-Warning", warning);
    enum MHD_Result ret = queue(c, status, r);
    MHD_destroy_response(r);
    srv_metrics_request(&s->metrics, endpoint, status);
    return ret;
}

static enum MHD_Result reply(struct tern_server *s, struct MHD_Connection *c, const struct conn *cs,
                             int endpoint, int status, const char *ctype, char *body, const char *retry_after)
{
    return reply_w(s, c, cs, endpoint, status, ctype, body, retry_after, NULL);
}

static enum MHD_Result reply_err(struct tern_server *s, struct MHD_Connection *c, const struct conn *cs,
                                 int endpoint, const struct srv_err *e)
{
    return reply(s, c, cs, endpoint, e->status, "application/json", srv_err_body_api(e, api_of(endpoint)),
                 e->status == 503 ? "1" : NULL);
}

/* The index of the API key the request carries, -1 when the server needs none, -2 when it is
 * refused. The key comes as "Authorization: Bearer KEY" (OpenAI's clients) or "x-api-key: KEY"
 * (Anthropic's); a Bearer one is read first. Every key is compared, each in constant time in its
 * length: the time does not tell how much of a guess matched, nor which key. */
static int authorized(const struct tern_server *s, struct MHD_Connection *c)
{
    if (!s->n_keys) return -1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    /* RFC 7235: the scheme is case-insensitive, then one or more spaces */
    if (h && !strncasecmp(h, "Bearer ", 7)) {
        h += 7;
        while (*h == ' ') h++;
    } else {
        h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    }
    if (!h) return -2;
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
    static const char *const URL[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"};
    log_line(s, "POST", URL[j->req.api], 200, st->t0, j);
    srv_job_release(j);
    pthread_mutex_unlock(&s->mu);
    free(st);
}

static enum MHD_Result handle_job(struct tern_server *s, struct MHD_Connection *c, int endpoint,
                                  struct conn *cs, const char *url)
{
    struct srv_err e = {0};
    struct srv_req req;
    const char *text = cs->body.p ? cs->body.p : "";
    const bool count = !strcmp(url, "/v1/messages/count_tokens");
    const bool parsed = endpoint == EP_RESPONSES ? srv_responses_parse(s, text, cs->body.len, cs->key, &req, &e)
                        : endpoint == EP_MESSAGES ? srv_messages_parse(s, text, cs->body.len, count, &req, &e)
                        : srv_req_parse(s, endpoint == EP_CHAT ? JOB_CHAT : JOB_COMPLETION, text,
                                        cs->body.len, &req, &e);
    sbuf_free(&cs->body); /* parsed: its budget stays taken for what was parsed from it */
    if (!parsed) {
        srv_req_free(&req);
        log_line(s, "POST", url, e.status, cs->t0, NULL);
        return reply_err(s, c, cs, endpoint, &e);
    }
    if (count) {
        /* Anthropic's count_tokens: the prompt as tern would run it, nothing generated */
        char *b = malloc(48);
        if (b) snprintf(b, 48, "{\"input_tokens\":%d}", req.n_prompt);
        srv_req_free(&req);
        log_line(s, "POST", url, 200, cs->t0, NULL);
        return reply(s, c, cs, endpoint, 200, "application/json", b, NULL);
    }
    req.cache_group = srv_cache_group(s, cs->key, req.cache_key, req.flavor);
    struct job *j = srv_job_new(s, &req);
    if (!j) {
        srv_req_free(&req);
        srv_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return reply_err(s, c, cs, endpoint, &e);
    }
    if (!srv_job_prepare(j, &e) || !srv_enqueue(s, j, &e)) {
        pthread_mutex_lock(&s->mu);
        srv_job_release(j);
        pthread_mutex_unlock(&s->mu);
        log_line(s, "POST", url, e.status, cs->t0, NULL);
        return reply_err(s, c, cs, endpoint, &e);
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
        add_cors(s, cs, r);
        if (j->warning[0]) MHD_add_response_header(r, "X-Tern-Warning", j->warning);
        enum MHD_Result ret = queue(c, 200, r);
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
    return reply_w(s, c, cs, endpoint, status, "application/json", body, NULL, warning);
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
    if (!strcmp(url, "/v1/responses") || !strncmp(url, "/v1/responses/", 14)) return EP_RESPONSES;
    if (!strcmp(url, "/v1/messages") || !strcmp(url, "/v1/messages/count_tokens")) return EP_MESSAGES;
    return EP_OTHER;
}

/* GET /v1/responses/{id}: the stored response; DELETE: forget it. Another key's is not found. */
static enum MHD_Result stored_response(struct tern_server *s, struct MHD_Connection *c, struct conn *cs,
                                       const char *method, const char *url)
{
    const char *id = url + 14;
    struct srv_err e;
    char *body = NULL;
    if (!strcmp(method, "DELETE")) {
        if (srv_store_delete(&s->store, id, cs->key)) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", id);
            cJSON_AddStringToObject(o, "object", "response");
            cJSON_AddTrueToObject(o, "deleted");
            body = cJSON_PrintUnformatted(o);
            cJSON_Delete(o);
        }
    } else {
        body = srv_store_response(&s->store, id, cs->key);
    }
    if (body) {
        log_line(s, method, url, 200, cs->t0, NULL);
        return reply(s, c, cs, EP_RESPONSES, 200, "application/json", body, NULL);
    }
    srv_err_set(&e, 404, "invalid_request_error", NULL, "response_not_found",
                "Response with id '%.100s' not found. (tern keeps the last %d responses sent with store "
                "true, each readable with the API key it was made with.)", id, SRV_STORE_MAX);
    log_line(s, method, url, 404, cs->t0, NULL);
    return reply_err(s, c, cs, EP_RESPONSES, &e);
}

/* The paths the API key covers: /v1, and /metrics and the page unless made public. */
static bool needs_key(const struct tern_server *s, const char *url, bool v1)
{
    if (v1) return true;
    if (!strcmp(url, "/metrics")) return !s->p.public_metrics;
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) return !s->p.public_page;
    return false; /* /health (load balancers), and unknown paths (404) */
}

/* Give back cs's body and its budget. */
static void drop_body(struct tern_server *s, struct conn *cs)
{
    sbuf_free(&cs->body);
    srv_body_give(s, cs->reserved);
    cs->reserved = 0;
}

static void budget_error(const struct tern_server *s, struct srv_err *e)
{
    srv_err_set(e, 503, "server_error", NULL, "server_busy",
                "the server is holding %zu MiB of request bodies, its limit for all requests at once "
                "(--max-body-total): retry shortly", s->p.max_body_total >> 20);
}

/* The first call of a request: its headers are in, its body not read. Refuse it now when the
 * answer is known (then MHD reads no body and closes after the answer), else take the body's
 * budget from its Content-Length. */
static enum MHD_Result request_start(struct tern_server *s, struct MHD_Connection *c, struct conn *cs,
                                     const char *url, const char *method, const char *version, int ep, bool v1)
{
    struct srv_err e;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    const unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
    cs->body_pending = n > 0 || MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    cs->key = authorized(s, c);
    bool ok = srv_gate_framing(c, &e) && srv_gate_host(s, c, version, &e) && srv_gate_origin(s, c, &cs->acao, &e);
    if (ok && strcmp(method, "OPTIONS") && cs->key == -2 && needs_key(s, url, v1)) {
        ok = false;
        srv_err_set(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "Incorrect API key provided: send 'Authorization: Bearer <key>' or 'x-api-key: <key>' "
                    "(the key given to tern serve with --api-key, --api-key-file or TERN_API_KEY)");
    }
    if (ok && !strcmp(method, "POST") && ep != EP_MODELS && ep != EP_OTHER) ok = srv_gate_json(c, &e);
    if (ok && n > s->p.max_body) {
        ok = false;
        srv_err_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                    "the request body of %s bytes exceeds the server's limit of %zu bytes", cl, s->p.max_body);
    }
    if (ok && n) {
        if (!srv_body_take(s, (size_t)n)) {
            ok = false;
            budget_error(s, &e);
        } else {
            cs->reserved = (size_t)n;
            /* its whole size at once: no doubling, no copies */
            if ((cs->body.p = malloc((size_t)n + 1))) cs->body.cap = (size_t)n + 1;
        }
    }
    if (ok) return MHD_YES;
    log_line(s, method, url, e.status, cs->t0, NULL);
    conn_mark(s, c, CONN_REFUSED);
    cs->refused = true;
    return reply_err(s, c, cs, ep, &e);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    struct tern_server *s = cls;
    struct conn *cs = *con_cls;
    const int ep = endpoint_of(url);
    const bool v1 = !strncmp(url, "/v1/", 4) || !strcmp(url, "/v1");
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        cs->t0 = srv_now();
        *con_cls = cs;
        return request_start(s, c, cs, url, method, version, ep, v1);
    }
    if (*upload_size) {
        const size_t up = *upload_size;
        *upload_size = 0;
        if (cs->too_big || cs->over_budget) return MHD_YES; /* read and dropped */
        if (cs->body.len + up > s->p.max_body) {
            cs->too_big = true;
            drop_body(s, cs);
            return MHD_YES;
        }
        if (cs->body.len + up > cs->reserved) {
            /* chunked: the budget is taken as the body comes, 64 KiB at a time at least */
            size_t more = cs->body.len + up - cs->reserved;
            if (more < 65536) more = 65536;
            if (!srv_body_take(s, more)) {
                cs->over_budget = true;
                drop_body(s, cs);
                return MHD_YES;
            }
            cs->reserved += more;
        }
        if (!sbuf_add(&cs->body, upload, up)) {
            cs->too_big = true; /* out of memory */
            drop_body(s, cs);
        }
        if (cs->body.len > cs->body_peak) cs->body_peak = cs->body.len;
        return MHD_YES;
    }
    conn_mark(s, c, CONN_ANSWERING); /* the whole request is in: no deadline for its answer */
    struct srv_err e;
    if (!atomic_load(&s->ready) && strcmp(method, "OPTIONS")) {
        /* the port is bound before the model loads: say so rather than refuse the connection */
        if (!strcmp(url, "/health"))
            return reply(s, c, cs, ep, 503, "application/json", strdup("{\"status\": \"loading\"}"), "1");
        srv_err_set(&e, 503, "server_error", NULL, "model_loading", "the model is loading; retry shortly");
        log_line(s, method, url, 503, cs->t0, NULL);
        return reply_err(s, c, cs, ep, &e);
    }
    if (cs->too_big) {
        srv_err_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                    "the request body exceeds the server's limit of %zu bytes", s->p.max_body);
        log_line(s, method, url, 413, cs->t0, NULL);
        return reply_err(s, c, cs, ep, &e);
    }
    if (cs->over_budget) {
        budget_error(s, &e);
        log_line(s, method, url, 503, cs->t0, NULL);
        return reply_err(s, c, cs, ep, &e);
    }
    if (!strcmp(method, "OPTIONS")) {
        /* a preflight from an origin --cors allows (another was refused at the start), or a
         * plain OPTIONS: what the server takes */
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Allow", "GET, POST, DELETE, OPTIONS");
        if (cs->acao) {
            MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
            /* Anthropic's clients send their key and version in headers of their own */
            MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                    "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
            MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        }
        add_cors(s, cs, r);
        enum MHD_Result ret = queue(c, 204, r);
        MHD_destroy_response(r);
        srv_metrics_request(&s->metrics, ep, 204);
        return ret;
    }
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    const bool post = !strcmp(method, "POST");
    const bool stored = ep == EP_RESPONSES && url[13] == '/';
    if (stored) {
        if (get || !strcmp(method, "DELETE")) return stored_response(s, c, cs, method, url);
    } else if (ep == EP_CHAT || ep == EP_COMPLETIONS || ep == EP_RESPONSES || ep == EP_MESSAGES) {
        if (post) return handle_job(s, c, ep, cs, url);
    } else if (ep == EP_MODELS) {
        if (get) {
            log_line(s, method, url, 200, cs->t0, NULL);
            return reply(s, c, cs, ep, 200, "application/json", models_json(s), NULL);
        }
    } else if (!strcmp(url, "/health")) {
        if (get) {
            const bool draining = atomic_load(&s->draining);
            return reply(s, c, cs, ep, draining ? 503 : 200, "application/json",
                         strdup(draining ? "{\"status\": \"shutting down\"}" : "{\"status\": \"ok\"}"), NULL);
        }
    } else if (!strcmp(url, "/metrics")) {
        if (get) return reply(s, c, cs, ep, 200, "text/plain; version=0.0.4", srv_metrics_text(s), NULL);
    } else if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
        if (get) return reply(s, c, cs, ep, 200, "text/html; charset=utf-8", strdup(srv_page_html), NULL);
    } else {
        srv_err_set(&e, 404, "invalid_request_error", NULL, "unknown_url",
                    "Unknown request URL: %s %s. tern serves POST /v1/chat/completions, POST "
                    "/v1/completions, POST /v1/responses, GET and DELETE /v1/responses/{id}, POST "
                    "/v1/messages, POST /v1/messages/count_tokens, GET /v1/models, GET /health, GET "
                    "/metrics and GET /", method, url);
        log_line(s, method, url, 404, cs->t0, NULL);
        return reply_err(s, c, cs, ep, &e);
    }
    srv_err_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
                "%s is not allowed on %s (use %s)", method, url,
                stored ? "GET or DELETE" : ep == EP_MODELS || ep == EP_OTHER ? "GET" : "POST");
    log_line(s, method, url, 405, cs->t0, NULL);
    return reply_err(s, c, cs, ep, &e);
}

/* A lingering close: the answer is out (FIN after it), then what the client still sends is read
 * and dropped until it closes its side, sends nothing for LINGER_IDLE_MS, LINGER_S seconds pass
 * (the reaper also cuts it at --read-timeout) or 4 x --max-body bytes came (64 MiB at least). */
enum { LINGER_S = 10, LINGER_IDLE_MS = 2000 };
static void linger(const struct tern_server *s, int fd)
{
    shutdown(fd, SHUT_WR);
    char buf[16384];
    const size_t max = 4 * s->p.max_body > (64u << 20) ? 4 * s->p.max_body : 64u << 20;
    const double t_end = srv_now() + LINGER_S;
    size_t total = 0;
    for (;;) {
        const double left = t_end - srv_now();
        if (left <= 0 || total > max) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        const int ms = left * 1e3 < LINGER_IDLE_MS ? (int)(left * 1e3) + 1 : LINGER_IDLE_MS;
        const int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        const ssize_t k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (k <= 0) break;
        total += (size_t)k;
    }
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct tern_server *s = cls;
    struct conn *cs = *con_cls;
    const int fd = conn_fd(c);
    const bool mine = tl.s == s && tl.fd == fd && fd >= 0;
    if (mine && (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK || toe == MHD_REQUEST_TERMINATED_WITH_ERROR) &&
        (tl.mhd_status || (cs && cs->refused && cs->body_pending)))
        linger(s, fd);
    if (mine) tl.answered = false, tl.mhd_status = 0;
    conn_mark(s, c, CONN_NEXT);
    if (!cs) return;
    if (cs->had_job) {
        pthread_mutex_lock(&s->mu);
        s->http_jobs--;
        pthread_mutex_unlock(&s->mu);
    }
    drop_body(s, cs);
#ifdef __GLIBC__
    if (cs->body_peak >= TRIM_AT) malloc_trim(0);
#endif
    free(cs);
    *con_cls = NULL;
}

/* MHD's URI callback: the first call on this thread for a request (its request line is read). */
static void *request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    tl.s = cls;
    tl.e = ci ? ci->socket_context : NULL;
    tl.fd = conn_fd(c);
    tl.answered = false;
    tl.mhd_status = 0;
    tl.anthropic = uri && !strncmp(uri, "/v1/messages", 12);
    return NULL; /* the request's *con_cls: made at its first handler call */
}

/* The text of MHD's HTML error page ("<html><head><title>..</title></head><body>TEXT</body>"). */
static void html_text(const char *html, char *out, size_t cap)
{
    const char *p = html ? strstr(html, "<body>") : NULL;
    p = p ? p + 6 : html ? html : "";
    size_t n = 0;
    for (bool tag = false; *p && n + 1 < cap; p++) {
        if (!strncmp(p, "</body>", 7)) break;
        if (*p == '<') tag = true;
        else if (*p == '>') tag = false;
        else if (!tag) out[n++] = *p;
    }
    out[n] = 0;
}

/* libmicrohttpd 0.9.75 (and 1.0) logs this, with the status and its HTML, just before it queues
 * an error response of its own (transmit_error_response_len in connection.c). */
static const char MHD_ERROR_FMT[] = "Error processing request (HTTP response code is %u ('%s')). Closing connection.\n";

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct tern_server *s = cls;
    if (!fmt || strcmp(fmt, MHD_ERROR_FMT)) return; /* the rest of MHD's log stays quiet */
    va_list aq;
    va_copy(aq, ap);
    const unsigned status = va_arg(aq, unsigned);
    const char *html = va_arg(aq, const char *);
    va_end(aq);
    srv_metrics_request(&s->metrics, EP_OTHER, (int)status);
    char text[400];
    html_text(html, text, sizeof text);
    if (!s->p.quiet) fprintf(stderr, "tern serve: %u (libmicrohttpd: %s)\n", status, text[0] ? text : "refused");
    if (tl.s != s || tl.answered || tl.fd < 0) return; /* no request line yet: MHD's HTML goes out */
    const char *code = status == 413 ? "request_too_large" : status == 414 ? "uri_too_long"
                     : status == 431 ? "headers_too_large" : status == 505 ? "http_version_not_supported"
                     : "bad_request";
    struct srv_err e;
    srv_err_set(&e, (int)status, status >= 500 && status != 505 ? "server_error" : "invalid_request_error", NULL,
                code, "the HTTP request was refused by the server's HTTP library: %s",
                text[0] ? text : "malformed request");
    char *body = srv_err_body_api(&e, tl.anthropic ? SRV_API_MESSAGES : SRV_API_CHAT);
    char resp[2048];
    const char *phrase = MHD_get_reason_phrase_for(status);
    const int n = body ? snprintf(resp, sizeof resp, "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", status,
                                  phrase && phrase[0] ? phrase : "Error", strlen(body), body) : -1;
    free(body);
    if (n <= 0 || n >= (int)sizeof resp) return;
    (void)send(tl.fd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    /* MHD's own page, queued next, now fails to send and the connection closes */
    shutdown(tl.fd, SHUT_WR);
    tl.answered = true;
    tl.mhd_status = (int)status;
    if (tl.e) {
        pthread_mutex_lock(&s->conns_mu);
        tl.e->answered = true; /* the reaper writes no 408 after it */
        pthread_mutex_unlock(&s->conns_mu);
    }
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
    if (!srv_gate_bind(s, ai->ai_addr)) {
        freeaddrinfo(ai);
        return tern_fail(TERN_ERR_NOMEM, "serve: out of memory");
    }
    raise_fd_limit(s);
    keep_large_buffers_mapped();
    /* poll(), not select(): select cannot watch a descriptor above 1024 */
    /* the error log: MHD's own refusals are counted and answered in JSON (mhd_log) */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)s->p.port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->p.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->p.max_connections_per_ip,
        /* a stalled reader of an answer (the read deadline covers requests only) */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, s, MHD_OPTION_URI_LOG_CALLBACK, request_line, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_END);
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
