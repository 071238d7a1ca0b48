/* eval_http.c — the endpoint runner of `tern eval`: each case sent to an OpenAI-compatible
 * server (tern serve, llama-server, vLLM...) as a streamed chat completion, on libcurl.
 *
 * Determinism: temperature 0, top_p 1, the seed fixed, no retries: a transport error, a
 * timeout or an HTTP error status fails the case (recorded as its error with the status and
 * the server's message), and the CLI fails the run when any case failed. Concurrency: N worker
 * threads, each with its own connection, take cases from a shared counter. The answer is
 * assembled from the stream as OpenAI's clients do: content deltas appended, tool-call deltas
 * merged by index (name, then argument fragments). TTFA is the moment the first call is
 * complete: when a later call starts or the stream's finish arrives, or as soon as its
 * argument text parses as an object; tokens to it are the stream chunks received so far (one
 * token per chunk on the servers measured), and the answer's token count is the server's
 * usage.completion_tokens (stream_options.include_usage) or else the chunk count. A call the
 * server could not parse comes back as content (tern serve and llama-server both return the raw
 * text, e.g. a call cut by the token limit): every opening tool-call tag left in the content
 * counts as a malformed attempt, as the local runner's parser counts it. Only explicit tags
 * count (bare JSON, Llama 3's untagged form, cannot be told from an answer). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "eval/eval.h"
#include "util/error.h"
#include "util/clock.h"

struct tern_eval_http_params tern_eval_http_default_params(void)
{
    struct tern_eval_http_params p = {.endpoint = NULL, .api_key = NULL, .model = NULL,
                                      .concurrency = 1, .timeout_s = 120, .max_tokens = 512};
    return p;
}

struct sbuf {
    char *p;
    size_t n, cap;
};

static bool sbuf_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return false;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

#define MAX_CALLS 64

/* One streamed answer being assembled. */
struct stream {
    struct sbuf line;        /* the SSE line being received */
    struct sbuf body;        /* a non-stream (error) body */
    struct sbuf content;
    struct sbuf names[MAX_CALLS], args[MAX_CALLS];
    int n_calls;
    int chunks;
    int usage_tokens;        /* -1 unknown */
    int prompt_tokens;       /* usage.prompt_tokens, 0 unknown */
    char request_id[128];
    double t0;
    int ttfa_tokens;
    double ttfa_ms;
    bool done, oom, bad_chunk;
    char bad[256];
};

static void first_call_complete(struct stream *s)
{
    if (s->ttfa_tokens >= 0 || s->n_calls == 0) return;
    s->ttfa_tokens = s->chunks;
    s->ttfa_ms = util_now_ms() - s->t0;
}

static bool args_parse(const struct sbuf *a)
{
    if (!a->n) return false;
    cJSON *j = cJSON_Parse(a->p);
    const bool ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    return ok;
}

/* One `data: {...}` chunk. */
static void on_chunk(struct stream *s, const char *json)
{
    cJSON *j = cJSON_Parse(json);
    if (!j) {
        if (!s->bad_chunk) snprintf(s->bad, sizeof s->bad, "a stream chunk is not JSON: %.120s", json);
        s->bad_chunk = true;
        return;
    }
    s->chunks++;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (cJSON_IsString(id) && !s->request_id[0]) snprintf(s->request_id, sizeof s->request_id, "%s", id->valuestring);
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
    if (cJSON_IsNumber(ct)) s->usage_tokens = ct->valueint;
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
    if (cJSON_IsNumber(pt) && pt->valueint > 0) s->prompt_tokens = pt->valueint;
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(delta, "content");
    if (cJSON_IsString(content) && !sbuf_add(&s->content, content->valuestring, strlen(content->valuestring)))
        s->oom = true;
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(delta, "tool_calls")) {
        const cJSON *index = cJSON_GetObjectItemCaseSensitive(tc, "index");
        int k = cJSON_IsNumber(index) ? index->valueint : s->n_calls - 1;
        if (k < 0 || k >= MAX_CALLS) continue;
        if (k >= s->n_calls) { /* a new call: the previous one is complete */
            first_call_complete(s);
            s->n_calls = k + 1;
        }
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(name) && !sbuf_add(&s->names[k], name->valuestring, strlen(name->valuestring)))
            s->oom = true;
        if (cJSON_IsString(args) && !sbuf_add(&s->args[k], args->valuestring, strlen(args->valuestring)))
            s->oom = true;
        if (k == 0 && args_parse(&s->args[0])) first_call_complete(s);
    }
    const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    if (cJSON_IsString(finish)) first_call_complete(s);
    cJSON_Delete(j);
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct stream *s = user;
    const size_t n = size * nmemb;
    for (size_t i = 0; i < n; i++) {
        const char c = ptr[i];
        if (c != '\n') {
            if (!sbuf_add(&s->line, &c, 1)) return 0;
            continue;
        }
        size_t ln = s->line.n;
        s->line.n = 0;
        if (ln == 0) continue; /* the blank line between events */
        char *l = s->line.p;
        l[ln] = '\0';
        if (l[ln - 1] == '\r') l[--ln] = '\0';
        if (!strncmp(l, "data:", 5)) {
            const char *d = l + 5;
            while (*d == ' ') d++;
            if (!strcmp(d, "[DONE]")) s->done = true;
            else on_chunk(s, d);
        } else if (ln && l[0] != ':' && strncmp(l, "event:", 6) && strncmp(l, "id:", 3) &&
                   strncmp(l, "retry:", 6)) {
            if (!sbuf_add(&s->body, l, ln) || !sbuf_add(&s->body, "\n", 1)) return 0;
        }
    }
    return n;
}

static void stream_free(struct stream *s)
{
    free(s->line.p);
    free(s->body.p);
    free(s->content.p);
    for (int k = 0; k < MAX_CALLS; k++) {
        free(s->names[k].p);
        free(s->args[k].p);
    }
}

/* The request body: the case's messages and tools plus the determinism settings. */
static char *request_body(const struct eval_case *c, const struct tern_eval_http_params *p)
{
    cJSON *req = cJSON_Parse(c->request_json);
    if (!req) return NULL;
    cJSON_AddStringToObject(req, "model", p->model ? p->model : "default");
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddNumberToObject(req, "top_p", 1);
    cJSON_AddNumberToObject(req, "seed", 0);
    cJSON_AddNumberToObject(req, "max_tokens", p->max_tokens);
    cJSON_AddTrueToObject(req, "stream");
    cJSON *so = cJSON_AddObjectToObject(req, "stream_options");
    cJSON_AddTrueToObject(so, "include_usage");
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return body;
}

/* The server's error message from a non-stream body (OpenAI's {"error": {"message"}}). */
static void error_text(const struct stream *s, long status, char *out, size_t n)
{
    const char *msg = NULL;
    cJSON *j = s->body.p ? cJSON_Parse(s->body.p) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message");
    if (cJSON_IsString(m)) msg = m->valuestring;
    snprintf(out, n, "HTTP %ld: %.300s", status, msg ? msg : s->body.p ? s->body.p : "(no body)");
    cJSON_Delete(j);
}

struct pool {
    struct tern_eval_run *r;
    const struct tern_eval_http_params *p;
    const int *which;
    int n_which;
    atomic_int next, done;
    atomic_int failed;        /* cases recorded with an error */
    pthread_mutex_t lock;     /* recording and progress */
    tern_status st;           /* the first failure that is not a case's own */
    tern_eval_progress_fn progress;
    void *user;
};

/* Opening tags of the tool-call formats tern parses (include/tern.h, enum tern_toolcall_format):
 * Hermes and Qwen XML, Gemma 4, Granite, Mistral, Llama 3's python tag. "<|tool_call>" and
 * "<|tool_call|>" are not prefixes of each other's matches: each is counted where it starts. */
static int unparsed_call_attempts(const char *content)
{
    static const char *const tags[] = {"<tool_call>", "<|tool_call>", "<|tool_call|>", "[TOOL_CALLS]",
                                       "<|python_tag|>"};
    int n = 0;
    if (!content) return 0;
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++)
        for (const char *p = content; (p = strstr(p, tags[t])); p += strlen(tags[t])) n++;
    return n;
}

static void answer(struct pool *pl, CURL *curl, int i)
{
    const struct eval_case *c = &pl->r->set->cases[i];
    struct stream s;
    memset(&s, 0, sizeof s);
    s.usage_tokens = -1;
    s.ttfa_tokens = -1;
    char err[512] = "", url[2048], auth[1100], curl_err[CURL_ERROR_SIZE] = "";
    char *body = request_body(c, pl->p);
    struct curl_slist *h = NULL;
    if (!body) {
        snprintf(err, sizeof err, "out of memory");
        goto record;
    }
    snprintf(url, sizeof url, "%s/chat/completions", pl->p->endpoint);
    h = curl_slist_append(h, "Content-Type: application/json");
    if (pl->p->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", pl->p->api_key);
        h = curl_slist_append(h, auth);
    }
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)pl->p->timeout_s);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
    s.t0 = util_now_ms();
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (s.line.n && !sbuf_add(&s.body, s.line.p, s.line.n)) s.oom = true; /* an unterminated body */
    if (rc != CURLE_OK) {
        snprintf(err, sizeof err, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
    } else if (status != 200) {
        error_text(&s, status, err, sizeof err);
    } else if (s.bad_chunk) {
        snprintf(err, sizeof err, "%s", s.bad);
    } else if (!s.done) {
        snprintf(err, sizeof err, "the stream ended without data: [DONE] (truncated)");
    } else if (s.oom) {
        snprintf(err, sizeof err, "out of memory");
    }
record:;
    struct tern_eval_call_in calls[MAX_CALLS];
    struct tern_eval_answer a = {.ttfa_tokens = -1, .ms = util_now_ms() - s.t0};
    if (!err[0]) {
        for (int k = 0; k < s.n_calls; k++) {
            calls[k].name = s.names[k].p ? s.names[k].p : "";
            calls[k].arguments = s.args[k].p ? s.args[k].p : "";
        }
        a.content = s.content.p;
        a.n_malformed = unparsed_call_attempts(s.content.p);
        a.calls = calls;
        a.n_calls = s.n_calls;
        a.n_tokens = s.usage_tokens >= 0 ? s.usage_tokens : s.chunks;
        a.n_prompt = s.prompt_tokens;
        a.ttfa_tokens = s.ttfa_tokens;
        a.ttfa_ms = s.ttfa_ms;
    } else {
        a.error = err;
        atomic_fetch_add(&pl->failed, 1);
    }
    a.request_id = s.request_id[0] ? s.request_id : NULL;
    pthread_mutex_lock(&pl->lock);
    tern_status st = tern_eval_record(pl->r, i, &a);
    if (st && !pl->st) pl->st = st;
    const int done = atomic_fetch_add(&pl->done, 1) + 1;
    if (pl->progress) pl->progress(done, pl->n_which, pl->user);
    pthread_mutex_unlock(&pl->lock);
    curl_slist_free_all(h);
    free(body);
    stream_free(&s);
}

static void *worker(void *arg)
{
    struct pool *pl = arg;
    CURL *curl = curl_easy_init();
    if (!curl) {
        pthread_mutex_lock(&pl->lock);
        if (!pl->st) pl->st = tern_fail(TERN_ERR_NOMEM, "eval: cannot create an HTTP handle");
        pthread_mutex_unlock(&pl->lock);
        return NULL;
    }
    for (;;) {
        const int k = atomic_fetch_add(&pl->next, 1);
        if (k >= pl->n_which) break;
        answer(pl, curl, pl->which ? pl->which[k] : k);
    }
    curl_easy_cleanup(curl);
    return NULL;
}

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

tern_status tern_eval_http(struct tern_eval_run *r, const struct tern_eval_http_params *p,
                           const int *which, int n_which, tern_eval_progress_fn progress,
                           void *user, int *n_failed)
{
    if (!p->endpoint || strncmp(p->endpoint, "http", 4))
        return tern_fail(TERN_ERR_ARG, "eval: the endpoint must be an http:// or https:// URL "
                         "(e.g. http://127.0.0.1:8080/v1)");
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, curl_init_once);
    struct pool pl = {.r = r, .p = p, .which = which, .n_which = n_which, .progress = progress,
                      .user = user};
    pthread_mutex_init(&pl.lock, NULL);
    int n = p->concurrency < 1 ? 1 : p->concurrency > 256 ? 256 : p->concurrency;
    if (n > n_which) n = n_which > 0 ? n_which : 1;
    pthread_t th[256];
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, worker, &pl)) break;
    if (started == 0) worker(&pl);
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    pthread_mutex_destroy(&pl.lock);
    if (n_failed) *n_failed = atomic_load(&pl.failed);
    return pl.st;
}
