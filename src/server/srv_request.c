/* srv_request.c — an OpenAI request body -> struct srv_req, or a 4xx error naming the field.
 *
 * Order of checks (the first failure answers): UTF-8, JSON syntax (byte offset, line:col),
 * an object, the fields (srv_fields.c: every documented OpenAI and llama-server field is known;
 * an unknown one is refused as OpenAI does, "Unrecognized request argument supplied"), each
 * honoured field's type and range, then rendering with the model's chat template (messages and
 * tools: the chat room's checks name the JSON path) and the prompt's length against the
 * context. Values tern cannot honour (penalties, logit_bias, echo, n > 1) are refused with a
 * message saying so rather than silently ignored. llama-server's n_predict, json_schema,
 * grammar and repeat_last_n are read here too; --max-tokens-cap bounds every request. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "server/server.h"

void srv_req_free(struct srv_req *r)
{
    srv_proto_free(r->proto);
    cJSON_Delete(r->body);
    cJSON_Delete(r->owned_schema);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->prompt);
    memset(r, 0, sizeof *r);
}

/* Byte offset of the first invalid UTF-8 sequence, or -1. */
static long long utf8_invalid_at(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return (long long)i;
        i += (size_t)k;
    }
    return -1;
}

static void line_col(const char *s, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* A JSON object that repeats a key (anywhere in the body) is refused: the server checks the
 * first copy (cJSON) while the chat template reads the text again and would render the last
 * (chat_json.c keeps Python's json.loads rule), so a repeated "messages", "role" or "tools"
 * could carry past the checks what they refuse. With no repeated key both readers see one
 * document. Paths are written as the chat room writes them: messages[1].content. */
struct dup_seg {
    const char *key; /* NULL: an array index */
    int index;
};

static int key_cmp(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static void dup_path(const struct dup_seg *path, int depth, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = 0;
    for (int d = 0; d < depth && k < cap; d++) {
        int w = path[d].key ? snprintf(out + k, cap - k, "%s%s", k ? "." : "", path[d].key)
                            : snprintf(out + k, cap - k, "[%d]", path[d].index);
        if (w < 0) break;
        k += (size_t)w;
    }
}

/* The first repeated key of an object under v (depth-first), or NULL; path[0..*depth) names the
 * object holding it. cJSON bounds nesting (CJSON_NESTING_LIMIT), so the recursion is bounded. */
static const cJSON *find_dup(const cJSON *v, struct dup_seg *path, int *depth, int max_depth)
{
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return NULL;
    if (cJSON_IsObject(v)) {
        int n = 0;
        for (const cJSON *c = v->child; c; c = c->next) n++;
        if (n > 1 && n <= 16) {
            for (const cJSON *a = v->child; a; a = a->next)
                for (const cJSON *b = a->next; b; b = b->next)
                    if (!strcmp(a->string, b->string)) return a;
        } else if (n > 16) {
            const cJSON **keys = malloc((size_t)n * sizeof *keys);
            if (keys) {
                int i = 0;
                for (const cJSON *c = v->child; c; c = c->next) keys[i++] = c;
                qsort(keys, (size_t)n, sizeof *keys, key_cmp);
                const cJSON *dup = NULL;
                for (i = 1; i < n && !dup; i++)
                    if (!strcmp(keys[i - 1]->string, keys[i]->string)) dup = keys[i];
                free(keys);
                if (dup) return dup;
            }
        }
    }
    if (*depth >= max_depth) return NULL;
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        path[*depth] = (struct dup_seg){cJSON_IsObject(v) ? c->string : NULL, i};
        (*depth)++;
        const cJSON *d = find_dup(c, path, depth, max_depth);
        if (d) return d;
        (*depth)--;
    }
    return NULL;
}

static bool no_duplicate_keys(const cJSON *body, struct srv_err *e)
{
    enum { MAX_DEPTH = 1100 }; /* above cJSON's nesting limit (1000) */
    struct dup_seg *path = malloc(MAX_DEPTH * sizeof *path);
    if (!path) {
        srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    int depth = 0;
    const cJSON *d = find_dup(body, path, &depth, MAX_DEPTH);
    if (d) {
        char where[512];
        dup_path(path, depth, where, sizeof where);
        char full[600];
        snprintf(full, sizeof full, "%s%s%s", where, where[0] ? "." : "", d->string);
        srv_err_set(e, 400, "invalid_request_error", full, "duplicate_key",
                    "the request body repeats the key '%s' in %s: a JSON object must not repeat a "
                    "key (the JSON path of the repeated key: %s)", d->string,
                    where[0] ? where : "the top-level object", full);
    }
    free(path);
    return !d;
}

/* Template variables the server sets from the checked request: chat_template_kwargs may add
 * variables (enable_thinking), never replace these. */
static const char *const RESERVED_TEMPLATE_VARS[] = {
    "messages", "tools", "add_generation_prompt", "bos_token", "eos_token", NULL};

static bool known(const char *const *keys, const char *k)
{
    for (; *keys; keys++)
        if (!strcmp(*keys, k)) return true;
    return false;
}

#define BAD(param, ...)                                                                        \
    do {                                                                                       \
        srv_err_set(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__);                \
        return false;                                                                          \
    } while (0)

const char *srv_jtype(const cJSON *v)
{
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}
#define jtype srv_jtype

bool srv_tool_name_ok(const char *nv)
{
    size_t nl = strlen(nv);
    bool ok = nl >= 1 && nl <= 64;
    for (size_t k = 0; ok && k < nl; k++)
        ok = (nv[k] >= 'a' && nv[k] <= 'z') || (nv[k] >= 'A' && nv[k] <= 'Z') ||
             (nv[k] >= '0' && nv[k] <= '9') || nv[k] == '_' || nv[k] == '-';
    return ok;
}

/* A number field in [lo, hi] (absent or null: *out untouched). */
static bool num_field(const cJSON *body, const char *key, double lo, double hi, double *out,
                      struct srv_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v)) BAD(key, "'%s' must be a number, got %s", key, jtype(v));
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        BAD(key, "'%s' is %g; it must be between %g and %g", key, v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return true;
}

static bool int_field(const cJSON *body, const char *key, double lo, double hi, long long *out,
                      struct srv_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        BAD(key, "'%s' must be an integer, got %s", key, cJSON_IsNumber(v) ? "a fraction" : jtype(v));
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        BAD(key, "'%s' is %.0f; it must be between %.0f and %.0f", key, v->valuedouble, lo, hi);
    *out = (long long)v->valuedouble;
    return true;
}

static bool bool_field(const cJSON *body, const char *key, bool *out, struct srv_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) BAD(key, "'%s' must be a boolean, got %s", key, jtype(v));
    *out = cJSON_IsTrue(v);
    return true;
}

/* The fields both endpoints share. */
static bool common_fields(struct tern_server *s, struct srv_req *r, struct srv_err *e)
{
    const cJSON *b = r->body;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(b, "model");
    if (model && !cJSON_IsString(model)) BAD("model", "'model' must be a string, got %s", jtype(model));
    /* an adapter's name picks it; any other name (or none) runs the base, as llama-server serves
     * whatever name is asked for */
    r->flavor = s->default_flv;
    for (int i = s->default_flv ? 0 : 1; model && i < s->n_flv; i++)
        if (!strcmp(model->valuestring, s->flv[i].name)) r->flavor = i;
    const cJSON *pck = cJSON_GetObjectItemCaseSensitive(b, "prompt_cache_key");
    if (pck && !cJSON_IsNull(pck)) {
        if (!cJSON_IsString(pck))
            BAD("prompt_cache_key", "'prompt_cache_key' must be a string, got %s", jtype(pck));
        if (strlen(pck->valuestring) > 1024)
            BAD("prompt_cache_key", "'prompt_cache_key' is %zu bytes long; at most 1024",
                strlen(pck->valuestring));
        r->cache_key = pck->valuestring;
    }
    if (!bool_field(b, "stream", &r->stream, e)) return false;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(b, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) BAD("stream_options", "'stream_options' must be an object, got %s", jtype(so));
        if (!r->stream) BAD("stream_options", "'stream_options' is only allowed when 'stream' is true");
        if (!bool_field(so, "include_usage", &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return false;
        }
    }
    double temp = 1.0, top_p = 1.0, min_p = 0, rep = 1;
    long long seed = -1, n = 1, top_k = 0;
    if (!num_field(b, "temperature", 0, 2, &temp, e) || !num_field(b, "top_p", 0, 1, &top_p, e) ||
        !num_field(b, "min_p", 0, 1, &min_p, e) || !num_field(b, "repeat_penalty", 0, 10, &rep, e) ||
        !int_field(b, "seed", -9.2e18, 9.2e18, &seed, e) || !int_field(b, "n", 1, 128, &n, e) ||
        !int_field(b, "top_k", 0, 1e9, &top_k, e) || !bool_field(b, "ignore_eos", &r->ignore_eos, e))
        return false;
    if (n != 1) BAD("n", "'n' must be 1: tern returns one choice per request");
    /* llama-server's repeat_last_n: -1 the whole context, 0 no penalty */
    long long rln = 64;
    if (!int_field(b, "repeat_last_n", -1, 1 << 20, &rln, e)) return false;
    double fp = 0, pp = 0;
    if (!num_field(b, "frequency_penalty", -2, 2, &fp, e) || !num_field(b, "presence_penalty", -2, 2, &pp, e))
        return false;
    if (fp != 0) BAD("frequency_penalty", "'frequency_penalty' other than 0 is not supported by tern (use repeat_penalty)");
    if (pp != 0) BAD("presence_penalty", "'presence_penalty' other than 0 is not supported by tern (use repeat_penalty)");
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(b, "logit_bias");
    if (lb && !cJSON_IsNull(lb)) {
        if (!cJSON_IsObject(lb)) BAD("logit_bias", "'logit_bias' must be an object, got %s", jtype(lb));
        if (lb->child) BAD("logit_bias", "'logit_bias' is not supported by tern");
    }
    r->sp = tern_sampler_default_params();
    r->sp.temperature = (float)temp;
    r->sp.top_p = (float)top_p;
    r->sp.min_p = (float)min_p;
    r->sp.top_k = (int)top_k;
    r->sp.repeat_penalty = rln == 0 ? 1.0f : (float)rep;
    r->sp.repeat_last_n = rln < 0 ? s->n_ctx : rln == 0 ? 64 : (int)rln;
    /* llama-server's constraints: "json_schema" (a JSON Schema, as response_format json_schema
     * without strict) and "grammar" (GBNF text) */
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(b, "json_schema");
    if (js && !cJSON_IsNull(js)) {
        if (!cJSON_IsObject(js)) BAD("json_schema", "'json_schema' must be an object (a JSON Schema), got %s", jtype(js));
        r->response_schema = (cJSON *)js;
        r->schema_param = "json_schema";
    }
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(b, "grammar");
    if (gr && !cJSON_IsNull(gr)) {
        if (!cJSON_IsString(gr)) BAD("grammar", "'grammar' must be a string (GBNF), got %s", jtype(gr));
        if (r->response_schema) BAD("grammar", "'grammar' cannot be combined with 'json_schema'");
        if (gr->valuestring[0]) r->gbnf = gr->valuestring;
    }
    /* no seed: a fresh one per request, as OpenAI does */
    r->sp.seed = seed >= 0 ? (uint64_t)seed
                           : (uint64_t)srv_unix_time() * 0x9e3779b97f4a7c15ull + atomic_fetch_add(&s->seq, 1);
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(b, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        if (cJSON_IsString(stop)) {
            if (stop->valuestring[0]) r->stop[r->n_stop++] = strdup(stop->valuestring);
        } else if (cJSON_IsArray(stop)) {
            if (cJSON_GetArraySize(stop) > 4) BAD("stop", "'stop' holds at most 4 sequences, got %d", cJSON_GetArraySize(stop));
            int i = 0;
            for (const cJSON *x = stop->child; x; x = x->next, i++) {
                if (!cJSON_IsString(x)) {
                    srv_err_set(e, 400, "invalid_request_error", "stop", NULL,
                                "'stop[%d]' must be a string, got %s", i, jtype(x));
                    return false;
                }
                if (x->valuestring[0]) r->stop[r->n_stop++] = strdup(x->valuestring);
            }
        } else {
            BAD("stop", "'stop' must be a string or an array of strings, got %s", jtype(stop));
        }
        for (int i = 0; i < r->n_stop; i++)
            if (!r->stop[i]) BAD("stop", "out of memory");
    }
    return true;
}

/* The prompt's ids (HTTP tokenizer, under its lock). With spans (a chat prompt), control tokens
 * are recognized only in the template's markup: message content is text (tern_chat_tokenize). */
static bool tokenize(struct tern_server *s, const char *text, size_t len, unsigned flags,
                     const struct tern_text_span *spans, size_t n_spans, bool chat,
                     struct srv_req *r, struct srv_err *e)
{
    size_t cap = len + 16, n = 0;
    r->prompt = malloc(cap * sizeof *r->prompt);
    if (!r->prompt) {
        srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory for %zu prompt tokens", cap);
        return false;
    }
    pthread_mutex_lock(&s->tok_mu);
    tern_status st = chat ? tern_chat_tokenize(s->tok_http, text, len, spans, n_spans, &r->prompt, &cap, &n)
                          : tern_tokenize(s->tok_http, text, len, flags, r->prompt, cap, &n);
    pthread_mutex_unlock(&s->tok_mu);
    if (st) {
        srv_err_set(e, 400, "invalid_request_error", NULL, NULL, "tokenizing the prompt: %s", tern_last_error());
        return false;
    }
    r->n_prompt = (int)n;
    return true;
}

static bool fits_context(struct tern_server *s, struct srv_req *r, const char *param, struct srv_err *e)
{
    if (r->n_prompt == 0) BAD(param, "the prompt is empty");
    if (r->n_prompt >= s->n_ctx) {
        srv_err_set(e, 400, "invalid_request_error", param, "context_length_exceeded",
                    "This model's maximum context length is %d tokens. However, your %s resulted "
                    "in %d tokens. Please reduce the length of the %s.", s->n_ctx, param,
                    r->n_prompt, param);
        return false;
    }
    return true;
}

static bool chat_fields(struct tern_server *s, struct srv_req *r, struct srv_err *e)
{
    const cJSON *b = r->body;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(b, "messages");
    if (!msgs) BAD("messages", "'messages' is required");
    if (!cJSON_IsArray(msgs)) BAD("messages", "'messages' must be an array, got %s", jtype(msgs));
    if (!msgs->child) BAD("messages", "'messages' must hold at least one message");
    int mi = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, mi++) {
        const cJSON *role = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "role") : NULL;
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function", NULL};
        if (!cJSON_IsString(role) || !known(roles, role->valuestring)) {
            srv_err_set(e, 400, "invalid_request_error", "messages", NULL,
                        "'messages[%d].role': %s%s%s; supported values are 'system', 'developer', "
                        "'user', 'assistant', 'tool' and 'function'", mi,
                        !cJSON_IsObject(m) ? "the message is not an object" : !cJSON_IsString(role) ? "missing or not a string" : "invalid value '",
                        cJSON_IsString(role) ? role->valuestring : "", cJSON_IsString(role) ? "'" : "");
            return false;
        }
    }
    long long mt = 0, mct = 0;
    if (!int_field(b, "max_tokens", 1, 1 << 30, &mt, e) ||
        !int_field(b, "max_completion_tokens", 1, 1 << 30, &mct, e))
        return false;
    r->max_tokens = (int)(mct ? mct : mt);
    bool lp = false;
    long long tlp = -1;
    if (!bool_field(b, "logprobs", &lp, e) || !int_field(b, "top_logprobs", 0, 20, &tlp, e)) return false;
    /* OpenAI: top_logprobs needs logprobs */
    if (tlp >= 0 && !lp) BAD("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    r->logprobs = lp ? (tlp > 0 ? (int)tlp : 0) : -1;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(b, "tools");
    bool has_tools = false;
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) BAD("tools", "'tools' must be an array, got %s", jtype(tools));
        int i = 0;
        for (const cJSON *t = tools->child; t; t = t->next, i++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
            const cJSON *nm = f ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
            if (!cJSON_IsObject(t) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "function") ||
                !cJSON_IsObject(f) || !cJSON_IsString(nm) || !nm->valuestring[0]) {
                srv_err_set(e, 400, "invalid_request_error", "tools", NULL,
                            "'tools[%d]' must be {\"type\": \"function\", \"function\": {\"name\": "
                            "\"...\", ...}}", i);
                return false;
            }
            /* OpenAI's rule for names; it also keeps every call format writable and readable
             * back (a name holding "</tool_call>" or a quote ends the call it is written in) */
            const char *nv = nm->valuestring;
            const size_t nl = strlen(nv);
            if (!srv_tool_name_ok(nv)) {
                srv_err_set(e, 400, "invalid_request_error", "tools", "invalid_function_name",
                            "'tools[%d].function.name' \"%.80s%s\" is not a valid function name: it must "
                            "match ^[a-zA-Z0-9_-]{1,64}$ (letters, digits, '_' and '-', at most 64)",
                            i, nv, nl > 80 ? "..." : "");
                return false;
            }
            const cJSON *pa = cJSON_GetObjectItemCaseSensitive(f, "parameters");
            if (pa && !cJSON_IsNull(pa)) {
                /* the arguments of a call are a JSON object: a schema of anything else cannot be
                 * called ({} alone means no parameters, as leaving it out does) */
                const cJSON *pt = cJSON_IsObject(pa) ? cJSON_GetObjectItemCaseSensitive(pa, "type") : NULL;
                if (!cJSON_IsObject(pa) || (pa->child && !(cJSON_IsString(pt) && !strcmp(pt->valuestring, "object")))) {
                    srv_err_set(e, 400, "invalid_request_error", "tools", "invalid_function_parameters",
                                "'tools[%d].function.parameters' must be a JSON Schema of \"type\": \"object\" "
                                "(a call's arguments are an object), got %s%s%s", i,
                                !cJSON_IsObject(pa) ? jtype(pa) : cJSON_IsString(pt) ? "\"type\": \"" : "a schema without \"type\": \"object\"",
                                cJSON_IsObject(pa) && cJSON_IsString(pt) ? pt->valuestring : "",
                                cJSON_IsObject(pa) && cJSON_IsString(pt) ? "\"" : "");
                    return false;
                }
            }
            const cJSON *strict = cJSON_GetObjectItemCaseSensitive(f, "strict");
            if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict)) {
                srv_err_set(e, 400, "invalid_request_error", "tools", NULL,
                            "'tools[%d].function.strict' must be a boolean, got %s", i, jtype(strict));
                return false;
            }
            if (cJSON_IsTrue(strict) && pa) {
                char where[64];
                snprintf(where, sizeof where, "tools[%d].function.parameters", i);
                if (!srv_strict_check(pa, where, "tools", e)) return false;
            }
        }
        has_tools = i > 0;
    }
    r->parallel_tool_calls = true;
    if (!bool_field(b, "parallel_tool_calls", &r->parallel_tool_calls, e)) return false;
    r->tool_choice = TERN_TOOL_CHOICE_AUTO;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(b, "tool_choice");
    if (tc && !cJSON_IsNull(tc)) {
        if (cJSON_IsString(tc)) {
            if (!strcmp(tc->valuestring, "auto")) r->tool_choice = TERN_TOOL_CHOICE_AUTO;
            else if (!strcmp(tc->valuestring, "none")) r->tool_choice = TERN_TOOL_CHOICE_NONE;
            else if (!strcmp(tc->valuestring, "required")) r->tool_choice = TERN_TOOL_CHOICE_REQUIRED;
            else BAD("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                     "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"%s\"", tc->valuestring);
        } else if (cJSON_IsObject(tc)) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
            const cJSON *nm = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
            if (!cJSON_IsString(nm)) BAD("tool_choice", "'tool_choice.function.name' must be a string");
            snprintf(r->tool_name, sizeof r->tool_name, "%s", nm->valuestring);
            r->tool_choice = TERN_TOOL_CHOICE_NAMED;
            bool found = false;
            for (const cJSON *t = has_tools ? tools->child : NULL; t && !found; t = t->next)
                found = !strcmp(cJSON_GetObjectItemCaseSensitive(
                                    cJSON_GetObjectItemCaseSensitive(t, "function"), "name")->valuestring,
                                r->tool_name);
            if (!found) BAD("tool_choice", "'tool_choice' names the function \"%s\", which is not in 'tools'", r->tool_name);
        } else {
            BAD("tool_choice", "'tool_choice' must be a string or an object, got %s", jtype(tc));
        }
        if (!has_tools && r->tool_choice != TERN_TOOL_CHOICE_NONE && r->tool_choice != TERN_TOOL_CHOICE_AUTO)
            BAD("tool_choice", "'tool_choice' requires 'tools'");
    }
    r->tools = has_tools && r->tool_choice != TERN_TOOL_CHOICE_NONE;
    const cJSON *mod = cJSON_GetObjectItemCaseSensitive(b, "modalities");
    if (mod && !cJSON_IsNull(mod)) {
        if (!cJSON_IsArray(mod)) BAD("modalities", "'modalities' must be an array, got %s", jtype(mod));
        for (const cJSON *x = mod->child; x; x = x->next)
            if (!cJSON_IsString(x) || strcmp(x->valuestring, "text"))
                BAD("modalities", "'modalities': tern answers with text only (\"text\"); got %s%s%s",
                    cJSON_IsString(x) ? "\"" : jtype(x), cJSON_IsString(x) ? x->valuestring : "",
                    cJSON_IsString(x) ? "\"" : "");
    }
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(b, "response_format");
    if (rf && !cJSON_IsNull(rf) && (r->response_schema || r->gbnf)) {
        const cJSON *ty = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text"))
            BAD("response_format", "'response_format' cannot be combined with '%s'",
                r->gbnf ? "grammar" : "json_schema");
    }
    if (r->gbnf && r->tools && r->tool_choice != TERN_TOOL_CHOICE_AUTO)
        BAD("grammar", "'grammar' cannot be combined with a forced 'tool_choice'");
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *ty = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(ty))
            BAD("response_format", "'response_format' must be an object with a 'type'");
        if (!strcmp(ty->valuestring, "json_object")) {
            r->owned_schema = cJSON_CreateObject();
            cJSON_AddStringToObject(r->owned_schema, "type", "object");
            r->response_schema = r->owned_schema;
            r->schema_param = "response_format";
        } else if (!strcmp(ty->valuestring, "json_schema")) {
            const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            const cJSON *sc = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
            if (!cJSON_IsObject(sc))
                BAD("response_format", "'response_format.json_schema.schema' must be an object");
            const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
            if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict))
                BAD("response_format", "'response_format.json_schema.strict' must be a boolean, got %s", jtype(strict));
            r->schema_strict = cJSON_IsTrue(strict);
            r->response_schema = (cJSON *)sc;
            r->schema_param = "response_format";
            if (r->schema_strict && !srv_strict_check(sc, "response_format.json_schema.schema", "response_format", e))
                return false;
        } else if (strcmp(ty->valuestring, "text")) {
            BAD("response_format", "'response_format.type' must be \"text\", \"json_object\" or "
                "\"json_schema\", got \"%s\"", ty->valuestring);
        }
        if (r->response_schema && r->tools && r->tool_choice != TERN_TOOL_CHOICE_AUTO)
            BAD("response_format", "'response_format' cannot be combined with a forced 'tool_choice'");
    }

    /* The model's template renders the body text as it came (its messages and tools; numbers
     * keep their spelling: 1.0 stays a float for the template). */
    struct tern_chat_params cp = tern_chat_default_params();
    cp.messages_json = r->raw;
    cp.messages_len = r->raw_len;
    /* llama.cpp's server: extra template variables ({"enable_thinking": false}) */
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(b, "chat_template_kwargs");
    char *kw_txt = NULL;
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw))
            BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object, got %s", jtype(kw));
        for (const cJSON *k = kw->child; k; k = k->next)
            if (known(RESERVED_TEMPLATE_VARS, k->string))
                BAD("chat_template_kwargs", "'chat_template_kwargs.%s': the server sets the template "
                    "variable '%s' from the checked request; chat_template_kwargs cannot replace it",
                    k->string, k->string);
        if (!(kw_txt = cJSON_PrintUnformatted(kw))) BAD("chat_template_kwargs", "out of memory");
        cp.extra_vars_json = kw_txt;
    }
    char *prompt = NULL;
    size_t plen = 0, n_spans = 0;
    struct tern_text_span *spans = NULL;
    tern_status st = tern_chat_render_spans(s->flv[r->flavor].tmpl, &cp, &prompt, &plen, &spans,
                                            &n_spans);
    free(kw_txt);
    if (st) {
        const char *msg = tern_last_error();
        srv_err_set(e, 400, "invalid_request_error",
                    st == TERN_ERR_UNSUPPORTED || !strncmp(msg, "tools", 5) ? "tools" : "messages",
                    NULL, "%s", msg);
        return false;
    }
    /* a generation prompt that opens the reasoning (Qwen3.5: "<think>\n") makes the reply
     * start inside it */
    r->reasoning_open = tern_reasoning_open_at_end(s->flv[r->flavor].rfmt, prompt, plen);
    /* a reasoning budget, or a constraint that must wait for the end of the thinking */
    bool ok = srv_reasoning_prepare(s, r, &prompt, &plen, &spans, &n_spans, e) &&
              tokenize(s, prompt, plen, 0, spans, n_spans, true, r, e);
    free(prompt);
    free(spans);
    return ok && fits_context(s, r, "messages", e);
}

static bool completion_fields(struct tern_server *s, struct srv_req *r, struct srv_err *e)
{
    const cJSON *b = r->body;
    long long mt = 16; /* OpenAI's default for this endpoint */
    if (!int_field(b, "max_tokens", 1, 1 << 30, &mt, e)) return false;
    r->max_tokens = (int)mt;
    bool echo = false;
    if (!bool_field(b, "echo", &echo, e)) return false;
    if (echo) BAD("echo", "'echo' is not supported by tern");
    long long lp = -1; /* the legacy endpoint: an integer 0..5, the alternatives per token */
    if (!int_field(b, "logprobs", 0, 5, &lp, e)) return false;
    r->logprobs = (int)lp;
    const cJSON *sfx = cJSON_GetObjectItemCaseSensitive(b, "suffix");
    if (sfx && !cJSON_IsNull(sfx)) BAD("suffix", "'suffix' is not supported by tern");
    long long best_of = 1;
    if (!int_field(b, "best_of", 1, 1, &best_of, e)) return false;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(b, "prompt");
    if (!p) BAD("prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (cJSON_IsString(p)) {
        if (!tokenize(s, p->valuestring, strlen(p->valuestring),
                      TERN_TOK_ADD_SPECIAL | TERN_TOK_PARSE_SPECIAL, NULL, 0, false, r, e))
            return false;
    } else if (cJSON_IsArray(p) && p->child && cJSON_IsNumber(p->child)) {
        int n = cJSON_GetArraySize(p), i = 0;
        const int n_vocab = tern_model_n_vocab(s->model);
        if (!(r->prompt = malloc(sizeof(int32_t) * (size_t)n))) BAD("prompt", "out of memory");
        for (const cJSON *x = p->child; x; x = x->next, i++) {
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
                x->valuedouble >= n_vocab)
                BAD("prompt", "'prompt[%d]' must be a token id in 0..%d", i, n_vocab - 1);
            r->prompt[i] = (int32_t)x->valuedouble;
        }
        r->n_prompt = n;
    } else {
        BAD("prompt", "'prompt' must be a string, an array of one string, or an array of token "
            "ids, got %s", jtype(p));
    }
    return fits_context(s, r, "prompt", e);
}

/* The checks of doc (parsed from body[0..len)) that need the whole document. */
static bool body_checks(const cJSON *doc, const char *body, size_t len, struct srv_err *e)
{
    if (!cJSON_IsObject(doc)) BAD(NULL, "the request body must be a JSON object, got %s", jtype(doc));
    /* cJSON ends a string at an escaped NUL while the template's reader keeps the rest: the
     * check would see role "user" and the template "user\u0000anything" */
    for (size_t i = 0; i + 5 < len; i++) {
        if (body[i] != '\\') continue;
        if (body[i + 1] == 'u' && !memcmp(body + i + 2, "0000", 4))
            BAD(NULL, "the request body holds the escape \\u0000 at byte %zu: NUL characters are "
                "not accepted in requests", i);
        i++; /* the escaped character (a backslash must not start another escape) */
    }
    return no_duplicate_keys(doc, e);
}

bool srv_body_parse(const char *body, size_t len, cJSON **out, struct srv_err *e)
{
    *out = NULL;
    long long bad = utf8_invalid_at(body, len);
    if (bad >= 0) BAD(NULL, "the request body is not valid UTF-8 (byte %lld)", bad);
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!doc) {
        size_t off = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        int line, col;
        line_col(body, off, &line, &col);
        BAD(NULL, "malformed JSON in the request body at byte %zu (line %d, column %d)", off, line, col);
    }
    for (const char *q = end; q && q < body + len; q++)
        if (*q != ' ' && *q != '\t' && *q != '\r' && *q != '\n') {
            cJSON_Delete(doc);
            BAD(NULL, "malformed JSON in the request body: unexpected text after the value at byte %zu",
                (size_t)(q - body));
        }
    if (!body_checks(doc, body, len, e)) {
        cJSON_Delete(doc);
        return false;
    }
    *out = doc;
    return true;
}

bool srv_req_parse(struct tern_server *s, enum job_kind kind, const char *body, size_t len,
                   struct srv_req *r, struct srv_err *e)
{
    memset(r, 0, sizeof *r);
    r->logprobs = -1;
    r->kind = kind;
    r->api = kind == JOB_CHAT ? SRV_API_CHAT : SRV_API_COMPLETIONS;
    r->raw = body;
    r->raw_len = len;
    if (!srv_body_parse(body, len, &r->body, e)) return false;
    if (!srv_fields_check(r->body, r->api, e)) return false;
    if (!common_fields(s, r, e)) return false;
    if (!(kind == JOB_CHAT ? chat_fields(s, r, e) : completion_fields(s, r, e))) return false;
    /* llama-server's n_predict when max_tokens is not given (-1: no limit) */
    long long np = 0;
    if (!int_field(r->body, "n_predict", -1, 1 << 30, &np, e)) return false;
    if (np == 0 && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r->body, "n_predict")))
        BAD("n_predict", "'n_predict' is 0; it must be -1 (no limit) or at least 1");
    const bool has_max = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r->body, "max_tokens")) ||
                         cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r->body, "max_completion_tokens"));
    if (np && !has_max) r->max_tokens = np < 0 ? 0 : (int)np;
    /* the server's cap (--max-tokens-cap): a request asking for more, or for no limit, gets the
     * cap, and an answer cut by it ends with finish_reason "length" as any other */
    if (s->p.max_tokens_cap > 0 && (r->max_tokens <= 0 || r->max_tokens > s->p.max_tokens_cap))
        r->max_tokens = s->p.max_tokens_cap;
    return true;
}
