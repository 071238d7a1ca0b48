/* fuzz_request.c — fuzz target for what `tern serve` does with a request body before it is
 * queued (scripts/fuzz.sh; replayed by ctest): srv_req_parse (UTF-8, JSON, OpenAI's fields,
 * rendering with the chat template, tokenizing, the context limit) and srv_job_prepare (sampler,
 * the tools' grammar in the template's call format, response_format schemas).
 *
 * Input: one selector byte, then the body. 'p': POST /v1/completions; 'l': chat with Llama
 * 3.1's template (llama3 calls); 'm': chat with Mistral Nemo's (mistral calls); 'R': POST
 * /v1/responses and 'M': POST /v1/messages (translated into chat, the model's template; the
 * store holds one response, "resp_seed", whose conversation ends in a function_call with
 * call_id "call_1", so previous_response_id continuations are reached); anything else: chat
 * with the model's own (Qwen2.5: hermes calls). Seeds (tests/fuzz/corpus/request) are
 * valid requests of every kind the server answers, so mutations stay close to the real thing.
 * Promises checked (a broken one aborts, so the fuzzer reports it):
 * - a refusal is an OpenAI error: status 4xx (500 only for running out of memory, type
 *   server_error), a non-empty type and message, and srv_err_body gives valid UTF-8 JSON
 *   {"error": {"message": string, "type": string, "param": string|null, "code": string|null}};
 *   on /v1/messages also Anthropic's {"type": "error", "error": {"type": string, "message":
 *   string}}, its type one Anthropic documents for the status;
 * - an accepted body repeats no key in any object (the checks read the first copy, the
 *   template the last), holds no escaped NUL, and its chat_template_kwargs names no variable
 *   the server sets (tools, messages, add_generation_prompt);
 * - an accepted request has a prompt of 1 .. n_ctx-1 token ids inside the vocabulary, at most
 *   four non-empty stop strings, sampling parameters in OpenAI's ranges, and a job that either
 *   prepares (sampler, grammar when asked) or is refused as above;
 * - an accepted chat request names its tools as OpenAI allows (^[a-zA-Z0-9_-]{1,64}$) with
 *   object schemas for parameters; sampler knobs tern lacks (typical_p ...) pass at their off
 *   value only; llama-server's grammar / json_schema / n_predict are read, never both constraints;
 * - nothing leaks (the job is released), nothing crashes (ASan, UBSan).
 * The model is ../shared/fixtures/models/qwen2-tiny-q8_0.gguf (TERN_SHARED overrides ../shared),
 * loaded once per process with a server's pieces but no socket and no engine thread; without it
 * the target exits 77 with a message (ctest: skipped; fuzz.sh: a failed run). */
#include "server/server.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef TERN_SHARED_DIR
#define TERN_SHARED_DIR "../shared"
#endif

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_request: %s:%d: broken promise: %s: ", __FILE__, __LINE__,    \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* Three servers' worth of request handling over one model: the model's template, Llama 3.1's
 * and Mistral Nemo's. */
static struct tern_server srv[3];
static struct tern_model *model;
static struct tern_tokenizer *tok;
static struct tern_grammar_vocab *gvocab;

static void need(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_request: ERROR: fixture %s not found; the target needs "
                        "../shared/fixtures (set TERN_SHARED to its parent folder). Nothing was "
                        "tested.\n", path);
        exit(77);
    }
    fclose(f);
}

static char *read_all(const char *path, size_t *n)
{
    need(path);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    CHECK(b && fread(b, 1, (size_t)len, f) == (size_t)len, "reading %s", path);
    fclose(f);
    b[len] = 0;
    *n = (size_t)len;
    return b;
}

static void init(void)
{
    const char *root = getenv("TERN_SHARED");
    if (!root || !*root) root = TERN_SHARED_DIR;
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/models/qwen2-tiny-q8_0.gguf", root);
    need(path);
    CHECK(tern_model_load(path, NULL, &model) == TERN_OK, "%s", tern_last_error());
    CHECK(tern_tokenizer_from_gguf(tern_model_gguf(model), &tok) == TERN_OK, "%s", tern_last_error());
    CHECK(tern_grammar_vocab_create(tok, &gvocab) == TERN_OK, "%s", tern_last_error());
    static const char *const tmpl[3] = {NULL, "fixtures/templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
                                        "fixtures/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"};
    for (int i = 0; i < 3; i++) {
        struct tern_server *s = &srv[i];
        s->p = tern_server_default_params();
        s->model = model;
        s->tok = s->tok_http = tok;
        s->gvocab = gvocab;
        s->n_ctx = 2048; /* Llama 3.1's template spells tools out at length */
        pthread_mutex_init(&s->mu, NULL);
        pthread_mutex_init(&s->tok_mu, NULL);
        atomic_init(&s->seq, 1);
        /* one flavor, the base (no adapters) */
        static struct srv_flavor flv[3];
        s->flv = &flv[i];
        s->n_flv = 1;
        tern_status st;
        if (!tmpl[i]) {
            st = tern_chat_template_from_gguf(tern_model_gguf(model), &s->flv->tmpl);
        } else {
            snprintf(path, sizeof path, "%s/%s", root, tmpl[i]);
            size_t n;
            char *src = read_all(path, &n);
            st = tern_chat_template_create(src, n, &s->flv->tmpl);
            free(src);
        }
        CHECK(st == TERN_OK, "%s", tern_last_error());
        s->flv->fmt = tern_toolcall_detect(tern_chat_template_source(s->flv->tmpl));
    }
    for (int i = 0; i < 3; i++) srv_store_init(&srv[i].store);
    cJSON *h = cJSON_Parse("[{\"type\":\"message\",\"role\":\"user\",\"content\":\"Weather in Oslo?\"},"
                           "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"get_weather\","
                           "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}]");
    CHECK(h, "the seed conversation");
    srv_store_put(&srv[0].store, "resp_seed", -1, "{}", h);
    CHECK(srv[0].flv->fmt == TERN_TOOLCALL_HERMES && srv[1].flv->fmt == TERN_TOOLCALL_LLAMA3 &&
              srv[2].flv->fmt == TERN_TOOLCALL_MISTRAL, "formats %d %d %d", srv[0].flv->fmt,
          srv[1].flv->fmt, srv[2].flv->fmt);
}

static bool utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* FUZZ_REQUEST_LOG=1: one line per input saying what became of it (reading a replay). */
static bool log_on(void)
{
    static int on = -1;
    if (on < 0) on = getenv("FUZZ_REQUEST_LOG") != NULL;
    return on;
}

static void check_refusal(const struct srv_err *e, const char *where, enum srv_api api)
{
    if (log_on()) fprintf(stderr, "%s: %d %s: %s\n", where, e->status, e->param, e->message);
    const bool oom = e->status == 500 && !strcmp(e->type, "server_error") && strstr(e->message, "out of memory");
    CHECK((e->status >= 400 && e->status <= 499) || oom, "%s: status %d (%s): %s", where, e->status,
          e->type, e->message);
    CHECK(e->type[0] && e->message[0], "%s: empty type or message", where);
    char *body = srv_err_body(e);
    CHECK(body, "%s: no error body", where);
    CHECK(utf8_valid(body, strlen(body)), "%s: error body is not UTF-8: %s", where, body);
    cJSON *j = cJSON_Parse(body);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message"), *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "param"), *c = cJSON_GetObjectItemCaseSensitive(o, "code");
    CHECK(cJSON_IsString(m) && cJSON_IsString(t) && (cJSON_IsString(p) || cJSON_IsNull(p)) &&
              (cJSON_IsString(c) || cJSON_IsNull(c)), "%s: not an OpenAI error body: %s", where, body);
    cJSON_Delete(j);
    free(body);
    if (api != SRV_API_MESSAGES) return;
    body = srv_err_body_api(e, api);
    CHECK(body && utf8_valid(body, strlen(body)), "%s: Anthropic error body missing or not UTF-8", where);
    j = cJSON_Parse(body);
    o = cJSON_GetObjectItemCaseSensitive(j, "error");
    t = cJSON_GetObjectItemCaseSensitive(o, "type");
    m = cJSON_GetObjectItemCaseSensitive(o, "message");
    static const char *const types[] = {"invalid_request_error", "authentication_error", "permission_error",
                                        "not_found_error", "request_too_large", "rate_limit_error", "api_error",
                                        "overloaded_error", NULL};
    bool known = false;
    for (int i = 0; cJSON_IsString(t) && types[i] && !known; i++) known = !strcmp(types[i], t->valuestring);
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "type")) && known && cJSON_IsString(m),
          "%s: not an Anthropic error body: %s", where, body);
    cJSON_Delete(j);
    free(body);
}

/* Does an object under v repeat a key? (A plain pairwise search, independent of the server's.) */
static bool repeats_key(const cJSON *v)
{
    if (cJSON_IsObject(v))
        for (const cJSON *a = v->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (!strcmp(a->string, b->string)) return true;
    if (cJSON_IsObject(v) || cJSON_IsArray(v))
        for (const cJSON *c = v->child; c; c = c->next)
            if (repeats_key(c)) return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model) init();
    if (size == 0) return 0;
    const char sel = (char)data[0];
    struct tern_server *s = &srv[sel == 'l' ? 1 : sel == 'm' ? 2 : 0];
    const enum job_kind kind = sel == 'p' ? JOB_COMPLETION : JOB_CHAT;
    const enum srv_api api = sel == 'R' ? SRV_API_RESPONSES : sel == 'M' ? SRV_API_MESSAGES
                             : kind == JOB_CHAT ? SRV_API_CHAT : SRV_API_COMPLETIONS;
    /* an exact-size copy: a read past the body shows */
    const size_t n = size - 1;
    char *body = malloc(n ? n : 1);
    if (!body) return 0;
    memcpy(body, data + 1, n);
    struct srv_req r;
    struct srv_err e;
    memset(&e, 0, sizeof e);
    const bool parsed = api == SRV_API_RESPONSES ? srv_responses_parse(s, body, n, -1, &r, &e)
                        : api == SRV_API_MESSAGES ? srv_messages_parse(s, body, n, false, &r, &e)
                        : srv_req_parse(s, kind, body, n, &r, &e);
    if (!parsed) {
        check_refusal(&e, "parse", api);
        srv_req_free(&r);
        free(body);
        return 0;
    }
    const int n_vocab = tern_model_n_vocab(model);
    /* one document: the checks and the template cannot read different copies of a key (the
     * client's body, and the chat translation of a Responses / Messages one) */
    CHECK(!repeats_key(r.body), "an accepted body repeats a key");
    CHECK(r.api == api && (api < SRV_API_RESPONSES || r.kind == JOB_CHAT), "api %d kind %d", r.api, r.kind);
    CHECK((api == SRV_API_RESPONSES) == (r.proto != NULL), "protocol state %p", (void *)r.proto);
    if (api >= SRV_API_RESPONSES) {
        cJSON *orig = cJSON_ParseWithLength(body, n);
        CHECK(orig && !repeats_key(orig), "an accepted %s body repeats a key", api == SRV_API_MESSAGES ? "messages" : "responses");
        /* Anthropic requires max_tokens; Responses never carries chat's own field names */
        CHECK(api != SRV_API_MESSAGES || cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(orig, "max_tokens")),
              "a messages body without max_tokens accepted");
        CHECK(api != SRV_API_RESPONSES || !cJSON_GetObjectItemCaseSensitive(orig, "messages"),
              "a responses body with 'messages' accepted");
        cJSON_Delete(orig);
    }
    CHECK(!memmem(body, n, "\\u0000", 6) || memmem(body, n, "\\\\", 2), "an accepted body holds \\u0000");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(r.body, "chat_template_kwargs");
    CHECK(!cJSON_GetObjectItemCaseSensitive(kw, "tools") && !cJSON_GetObjectItemCaseSensitive(kw, "messages") &&
          !cJSON_GetObjectItemCaseSensitive(kw, "add_generation_prompt"),
          "chat_template_kwargs replaced a variable the server sets");
    /* isolation: a prompt_cache_key is read, and always makes a group of its own (never the
     * shared 0) */
    const cJSON *pck = cJSON_GetObjectItemCaseSensitive(r.body, "prompt_cache_key");
    CHECK(cJSON_IsString(pck) == (r.cache_key != NULL), "prompt_cache_key read as %s",
          r.cache_key ? r.cache_key : "(none)");
    CHECK(!r.cache_key || srv_cache_group(s, -1, r.cache_key, 0) != 0, "prompt_cache_key in the shared group");
    CHECK(r.n_prompt >= 1 && r.n_prompt < s->n_ctx, "prompt of %d tokens", r.n_prompt);
    for (int i = 0; i < r.n_prompt; i++)
        CHECK(r.prompt[i] >= 0 && r.prompt[i] < n_vocab, "prompt[%d] = %d", i, r.prompt[i]);
    CHECK(r.n_stop >= 0 && r.n_stop <= (api == SRV_API_MESSAGES ? SRV_MAX_STOP : 4), "%d stop strings", r.n_stop);
    for (int i = 0; i < r.n_stop; i++) CHECK(r.stop[i] && r.stop[i][0], "stop[%d] empty", i);
    CHECK(r.max_tokens >= 0, "max_tokens %d", r.max_tokens);
    CHECK(r.sp.temperature >= 0 && r.sp.temperature <= 2 && r.sp.top_p >= 0 && r.sp.top_p <= 1,
          "temperature %g top_p %g", r.sp.temperature, r.sp.top_p);
    CHECK(kind == JOB_CHAT || !r.tools, "tools on a completion");
    /* the hardening promises: every tool name is OpenAI's shape (no markup can ride in one), every
     * parameters schema an object schema ({} or absent: none), a sampler knob tern lacks only at
     * its off value, llama-server's constraints read as such */
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(r.body, "tools");
    for (const cJSON *t = cJSON_IsArray(tools) ? tools->child : NULL; t; t = t->next) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *nm = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        CHECK(strlen(nm) >= 1 && strlen(nm) <= 64 && strspn(nm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == strlen(nm),
              "accepted tool name '%s'", nm);
        const cJSON *pa = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(pa, "type");
        CHECK(!pa || cJSON_IsNull(pa) || (cJSON_IsObject(pa) && (!pa->child || (cJSON_IsString(pt) && !strcmp(pt->valuestring, "object")))),
              "accepted parameters that are not an object schema");
    }
    const cJSON *typ = cJSON_GetObjectItemCaseSensitive(r.body, "typical_p");
    CHECK(!cJSON_IsNumber(typ) || typ->valuedouble == 1, "typical_p %g accepted", typ->valuedouble);
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(r.body, "grammar");
    CHECK(!r.gbnf || (cJSON_IsString(gr) && r.gbnf == gr->valuestring), "grammar not read from the body");
    CHECK(!(r.gbnf && r.response_schema), "both a grammar and a schema");
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(r.body, "n_predict");
    CHECK(!cJSON_IsNumber(np) || np->valuedouble != 0, "n_predict 0 accepted");
    struct job *j = srv_job_new(s, &r);
    CHECK(j, "out of memory for a job");
    memset(&e, 0, sizeof e);
    if (!srv_job_prepare(j, &e)) {
        check_refusal(&e, "prepare", api);
    } else {
        CHECK(j->sampler, "a prepared job without a sampler");
        if (log_on())
            fprintf(stderr, "accepted: %s, %d prompt tokens, %s%s\n", kind == JOB_CHAT ? "chat" : "completion",
                    j->req.n_prompt, j->grammar ? "constrained" : "free", j->tp ? ", tool-call parser" : "");
    }
    srv_job_release(j);
    free(body);
    return 0;
}
