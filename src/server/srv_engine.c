/* srv_engine.c — jobs and the engine thread: the queue of parsed requests, admission into the
 * batcher's free slots between steps, cancellation of jobs whose client went away, and the
 * drain at shutdown. Read server.h first (who owns what, which lock guards what).
 *
 * The engine thread is the only one that touches the context, the batcher, the engine
 * tokenizer and the jobs' samplers and tool-call parsers (the batcher holds the matchers of
 * their grammars). It sleeps on srv->wake when there is nothing to do, so an idle server uses
 * no CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "util/error.h"

struct job *srv_job_new(struct tern_server *s, struct srv_req *req)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = s;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->refs = 1;
    j->slot = -1;
    j->status = 200;
    pthread_cond_init(&j->cv, NULL);
    uint64_t n = atomic_fetch_add(&s->seq, 1);
    uint64_t r = (uint64_t)srv_unix_time() * 0x9e3779b97f4a7c15ull ^ (n * 0xbf58476d1ce4e5b9ull) ^ (uint64_t)(uintptr_t)j;
    /* each protocol's own id shape: chatcmpl-..., cmpl-..., resp_..., msg_... */
    static const char *const PREFIX[] = {"chatcmpl-", "cmpl-", "resp_", "msg_"};
    snprintf(j->id, sizeof j->id, "%s%016llx", PREFIX[j->req.api], (unsigned long long)r);
    j->created = srv_unix_time();
    j->t_queued = srv_now();
    return j;
}

static void job_free(struct job *j)
{
    srv_req_free(&j->req);
    tern_sampler_free(j->sampler);
    srv_grammar_put(&j->srv->grammars, j->gref);
    tern_toolcall_parser_free(j->tp);
    sbuf_free(&j->hold);
    sbuf_free(&j->text);
    sbuf_free(&j->out);
    sbuf_free(&j->pw.text);
    cJSON_Delete(j->pw.items);
    cJSON_Delete(j->lp);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void srv_job_release(struct job *j)
{
    if (--j->refs == 0) job_free(j);
}

/* Whether a request's tool calls get a grammar (tern_grammar_from_tools, in the template's call
 * format). Not when response_format asks for JSON and the model may answer without a call (that
 * schema wins); not for Llama 3 with tool_choice auto unless <|python_tag|> is a control token
 * (a call opens with a bare '{', which no lazy grammar can wait for, or that token, which one
 * can: parsed, unconstrained otherwise). An opener that is a control token (Mistral's
 * [TOOL_CALLS] in tekken vocabularies) is that token in the grammar: auto arms on it,
 * required / named force it. */
static bool tools_constrained(const struct tern_server *s, const struct srv_req *r)
{
    const struct srv_flavor *f = &s->flv[r->flavor];
    const bool fmt_ok = f->fmt == TERN_TOOLCALL_HERMES || f->fmt == TERN_TOOLCALL_LLAMA3 ||
                        f->fmt == TERN_TOOLCALL_MISTRAL || f->fmt == TERN_TOOLCALL_QWEN_XML ||
                        f->fmt == TERN_TOOLCALL_GRANITE;
    if (!fmt_ok || (r->response_schema && r->tool_choice == TERN_TOOL_CHOICE_AUTO)) return false;
    if (r->tool_choice != TERN_TOOL_CHOICE_AUTO) return true;
    return f->fmt != TERN_TOOLCALL_LLAMA3 || f->n_preserve > 0; /* llama3's one tag: <|python_tag|> */
}

/* What a request's grammar is compiled from (srv_grammar_get's compile callback). */
struct grammar_src {
    const struct tern_grammar_vocab *v;
    const char *txt;
    const struct tern_tool_grammar_params *tools; /* or NULL: a response_format schema */
    const struct tern_grammar_params *schema;
    bool gbnf;                                     /* txt is GBNF (llama-server's "grammar") */
};

static tern_status compile_grammar(void *user, struct tern_grammar **out)
{
    const struct grammar_src *g = user;
    if (g->gbnf) return tern_grammar_from_gbnf(g->v, g->txt, strlen(g->txt), g->schema, out);
    return g->tools ? tern_grammar_from_tools(g->v, g->txt, strlen(g->txt), g->tools, out)
                    : tern_grammar_from_json_schema(g->v, g->txt, strlen(g->txt), g->schema, out);
}

/* The job's grammar from the server's cache: the key names the kind, every option, the tool name
 * (length-prefixed, so no name and text run into another pair's) and the text, so two requests
 * share a grammar exactly when they would compile the same one. */
static tern_status job_grammar(struct job *j, const struct grammar_src *g)
{
    const char *name = g->tools && g->tools->name ? g->tools->name : "";
    const size_t nl = strlen(name), n = strlen(g->txt);
    char head[160]; /* numbers only: always fits */
    const int h = g->tools ? snprintf(head, sizeof head, "tools fmt=%d choice=%d parallel=%d lenient=%d ws=%d strict=%d name=%zu:",
                                      (int)g->tools->format, (int)g->tools->choice, (int)g->tools->parallel,
                                      (int)g->tools->schema.lenient, (int)g->tools->schema.ws,
                                      (int)g->tools->schema.strict_properties, nl)
                           : snprintf(head, sizeof head, "%s lenient=%d ws=%d strict=%d:", g->gbnf ? "gbnf" : "schema", (int)g->schema->lenient,
                                      (int)g->schema->ws, (int)g->schema->strict_properties);
    char *key = malloc((size_t)h + nl + n);
    if (!key) return tern_fail(TERN_ERR_NOMEM, "grammar cache: out of memory");
    memcpy(key, head, (size_t)h);
    memcpy(key + h, name, nl);
    memcpy(key + h + nl, g->txt, n);
    tern_status st = srv_grammar_get(&j->srv->grammars, key, (size_t)h + nl + n, compile_grammar, (void *)g, &j->gref);
    free(key);
    if (!st) j->grammar = j->gref->g;
    return st;
}

/* Sampler, constraint and tool-call parser of a job (connection thread, before it is queued:
 * a schema that does not compile is the client's error, answered with 400). */
bool srv_job_prepare(struct job *j, struct srv_err *e)
{
    struct tern_server *s = j->srv;
    struct srv_req *r = &j->req;
    if (tern_sampler_create(&r->sp, tern_model_n_vocab(s->model), &j->sampler)) {
        srv_err_set(e, 400, "invalid_request_error", NULL, NULL, "sampling parameters: %s", tern_last_error());
        return false;
    }
    tern_status st = TERN_OK;
    const char *param = NULL;
    /* the reply parser: tool calls when the request offers tools, reasoning apart from the
     * content when the template has reasoning markup (llama.cpp's --reasoning-format deepseek) */
    const struct srv_flavor *f = &s->flv[r->flavor];
    const bool calls = r->tools && f->fmt != TERN_TOOLCALL_NONE;
    if (r->kind == JOB_CHAT && (calls || f->rfmt != TERN_REASONING_NONE)) {
        st = tern_toolcall_parser_create(calls ? f->fmt : TERN_TOOLCALL_NONE, &j->tp);
        if (!st) st = tern_toolcall_set_reasoning(j->tp, f->rfmt, r->reasoning_open);
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(r->body, "tools");
        char *txt = calls ? cJSON_PrintUnformatted(tools) : NULL;
        if (!st && txt) st = tern_toolcall_set_tools(j->tp, txt, 0);
        free(txt);
    }
    /* strict tools: their parameters compile without lenient (whatever this request's grammar
     * is, and whether or not the server has one), so what tern cannot enforce is a 400 */
    const cJSON *tools = r->kind == JOB_CHAT ? cJSON_GetObjectItemCaseSensitive(r->body, "tools") : NULL;
    int ti = 0;
    for (const cJSON *t = cJSON_IsArray(tools) ? tools->child : NULL; t && !st; t = t->next, ti++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *pa = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict")) || !cJSON_IsObject(pa)) continue;
        struct tern_grammar_params gp = tern_grammar_default_params();
        gp.strict_properties = true;
        char *txt = cJSON_PrintUnformatted(pa);
        struct tern_grammar *g = NULL;
        st = txt ? tern_grammar_from_json_schema(NULL, txt, strlen(txt), &gp, &g) : TERN_ERR_NOMEM;
        tern_grammar_free(g);
        free(txt);
        if (st && st != TERN_ERR_NOMEM)
            st = tern_fail_prefix(st, "tools[%d].function.parameters (strict): ", ti);
        param = "tools";
    }
    if (!st && s->gvocab && (r->kind == JOB_CHAT || r->response_schema || r->gbnf)) {
        if (r->tools && tools_constrained(s, r)) {
            /* tool calls that always parse: constrained from the first token (required, named)
             * or from the moment the model opens a call (auto) */
            struct tern_tool_grammar_params tp = tern_tool_grammar_default_params();
            tp.format = f->fmt;
            tp.choice = r->tool_choice;
            tp.name = r->tool_name;
            tp.parallel = r->parallel_tool_calls;
            tp.schema.lenient = true;
            /* arguments hold the declared parameters only (OpenAI's strict function calling;
             * JSON Schema's default would let a model add keys without end) */
            tp.schema.strict_properties = true;
            char *txt = cJSON_PrintUnformatted(tools);
            param = "tools";
            const struct grammar_src g = {.v = s->gvocab, .txt = txt, .tools = &tp};
            st = txt ? job_grammar(j, &g) : TERN_ERR_NOMEM;
            free(txt);
        } else if (r->response_schema) {
            /* strict: what tern cannot enforce is refused (a pattern it cannot compile, a
             * keyword it does not know); else ignored with a warning (X-Tern-Warning) */
            struct tern_grammar_params gp = tern_grammar_default_params();
            gp.lenient = !r->schema_strict;
            gp.strict_properties = r->schema_strict;
            char *txt = cJSON_PrintUnformatted(r->response_schema);
            param = r->schema_param ? r->schema_param : "response_format";
            const struct grammar_src g = {.v = s->gvocab, .txt = txt, .schema = &gp};
            st = txt ? job_grammar(j, &g) : TERN_ERR_NOMEM;
            free(txt);
        } else if (r->gbnf) {
            struct tern_grammar_params gp = tern_grammar_default_params();
            param = "grammar";
            const struct grammar_src g = {.v = s->gvocab, .txt = r->gbnf, .schema = &gp, .gbnf = true};
            st = job_grammar(j, &g);
        }
    }
    if (!st && (r->response_schema || r->gbnf) && !s->gvocab) {
        srv_err_set(e, 400, "invalid_request_error", r->gbnf ? "grammar" : r->schema_param, NULL,
                    "constrained decoding is not available with this model's vocabulary (said at start)");
        return false;
    }
    /* a lenient compile's warnings: what the grammar does not enforce is said, never silent */
    const char *w = j->grammar ? tern_grammar_warnings(j->grammar) : NULL;
    if (!st && w && *w) {
        size_t k = 0;
        for (const unsigned char *q = (const unsigned char *)w; *q && k + 1 < sizeof j->warning; q++)
            j->warning[k++] = *q == '\n' ? (q[1] ? ';' : 0) : *q < 0x20 || *q >= 0x7F ? '?' : (char)*q;
        j->warning[k] = 0;
        if (!s->p.quiet) fprintf(stderr, "tern serve: %s: warning: %s\n", j->id, j->warning);
    }
    if (st) {
        srv_err_set(e, st == TERN_ERR_NOMEM ? 500 : 400,
                    st == TERN_ERR_NOMEM ? "server_error" : "invalid_request_error", param, NULL,
                    "%s: %s", param ? param : "request", tern_last_error());
        return false;
    }
    return true;
}

bool srv_enqueue(struct tern_server *s, struct job *j, struct srv_err *e)
{
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->draining)) {
        pthread_mutex_unlock(&s->mu);
        srv_err_set(e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
        return false;
    }
    if (s->q_len >= s->p.max_queue) {
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.rejected_full++;
        pthread_mutex_unlock(&s->metrics.mu);
        srv_err_set(e, 503, "server_error", NULL, "server_overloaded",
                    "the server is busy: %d requests are waiting for one of %d slots; retry later",
                    s->q_len, s->p.n_parallel);
        return false;
    }
    srv_job_open_stream(j);
    s->queue[(s->q_head + s->q_len) % s->p.max_queue] = j;
    s->q_len++;
    j->refs++;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* Per sampled token: TTFT and inter-token latency. */
static int on_token(int32_t id, void *user)
{
    (void)id;
    struct job *j = user;
    struct tern_server *s = j->srv;
    double t = srv_now();
    pthread_mutex_lock(&s->metrics.mu);
    if (j->t_last_token == 0) srv_hist_add(&s->metrics.ttft, t - j->t_queued);
    else srv_hist_add(&s->metrics.itl, t - j->t_last_token);
    pthread_mutex_unlock(&s->metrics.mu);
    j->t_last_token = t;
    return 0;
}

/* on_done of the batcher: output first (srv_output.c), then the slot is the engine's again. */
static void on_done(const struct tern_gen_stats *st, void *user)
{
    struct job *j = user;
    struct tern_server *s = j->srv;
    srv_job_on_done(st, j);
    pthread_mutex_lock(&s->mu);
    if (j->slot >= 0 && s->active[j->slot] == j) {
        s->active[j->slot] = NULL;
        s->n_active--;
    }
    srv_job_release(j);
    pthread_mutex_unlock(&s->mu);
}

static void admit(struct tern_server *s, struct job *j)
{
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = j->req.prompt;
    r.n_prompt = j->req.n_prompt;
    r.sampler = j->sampler;
    r.grammar = j->grammar;
    r.max_tokens = j->req.max_tokens > 0 ? j->req.max_tokens : s->n_ctx;
    r.ignore_eog = j->req.ignore_eos;
    /* with tools, the format's control-token markup is shown so the parser sees the calls
     * (llama-server's preserved tokens); without, every control token stays hidden */
    const struct srv_flavor *f = &s->flv[j->req.flavor];
    if (j->req.kind == JOB_CHAT && j->req.tools && f->fmt != TERN_TOOLCALL_NONE) {
        r.preserve = f->preserve;
        r.n_preserve = f->n_preserve;
    }
    r.on_piece = srv_job_on_piece;
    r.on_token = on_token;
    if (j->req.logprobs >= 0) {
        r.on_logprob = srv_job_on_logprob;
        r.n_top_logprobs = j->req.logprobs;
    }
    r.on_done = on_done;
    r.user = j;
    r.cache_group = j->req.cache_group;
    r.reasoning = srv_reasoning_ctl(&j->req); /* the budget; constraints after the thinking */
    int slot = -1;
    j->t_admitted = srv_now();
    pthread_mutex_lock(&s->metrics.mu);
    srv_hist_add(&s->metrics.queue_wait, j->t_admitted - j->t_queued);
    pthread_mutex_unlock(&s->metrics.mu);
    /* the flavor was attached for this round (switch_flavor); when that failed, 500 */
    tern_status st = s->cur_flv == j->req.flavor ? tern_batcher_add(s->batcher, &r, &slot)
                                                 : tern_fail(TERN_ERR_NOMEM, "the adapter '%s' "
                                                             "could not be attached",
                                                             s->flv[j->req.flavor].name);
    pthread_mutex_lock(&s->mu);
    if (st) {
        /* cannot happen (the request was checked, a slot was free): answer 500, never hang */
        struct srv_err e;
        srv_err_set(&e, 500, "server_error", NULL, NULL, "scheduling the request: %s", tern_last_error());
        srv_job_fail_locked(j, &e);
        srv_job_release(j);
    } else {
        j->slot = slot;
        j->admitted = true;
        s->active[slot] = j;
        s->n_active++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Attach flavor f's adapter (none for the base) to the context: the engine does it only when
 * no slot is running, so every sequence of a batch runs with the same weights. */
static void switch_flavor(struct tern_server *s, int f)
{
    struct srv_flavor *v = &s->flv[f];
    struct tern_lora *ad[1] = {v->ad};
    const float sc[1] = {v->scale};
    tern_status st = tern_context_set_adapters(s->ctx, ad, sc, v->ad ? 1 : 0);
    if (st) fprintf(stderr, "tern serve: attaching adapter '%s' failed: %s\n", v->name, tern_last_error());
    else s->cur_flv = f;
}

static void *engine_main(void *arg)
{
    struct tern_server *s = arg;
    const int np = s->p.n_parallel;
    struct job **take = calloc((size_t)np, sizeof *take);
    int *cancel = calloc((size_t)np * 2, sizeof *cancel); /* cancelled, then timed out */
    if (!take || !cancel) {
        fprintf(stderr, "tern serve: engine: out of memory\n");
        free(take);
        free(cancel);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->engine_exit && s->q_len == 0 && s->n_active == 0) pthread_cond_wait(&s->wake, &s->mu);
        if (s->engine_exit && s->q_len == 0 && s->n_active == 0) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        int n_cancel = 0, n_take = 0, n_late = 0;
        for (int i = 0; i < np; i++)
            if (s->active[i] && s->active[i]->cancelled) cancel[n_cancel++] = i;
        /* --request-timeout: a request running longer is ended as if max_tokens were reached
         * (finish_reason "length", its text so far kept); slots after the cancelled ones */
        const double now = srv_now();
        for (int i = 0; s->p.request_timeout_ms > 0 && i < np; i++) {
            struct job *a = s->active[i];
            if (a && !a->cancelled && !a->timed_out && (now - a->t_admitted) * 1e3 > s->p.request_timeout_ms) {
                a->timed_out = true;
                cancel[n_cancel + n_late++] = i;
            }
        }
        /* queued jobs whose client left are dropped before they cost anything; jobs of another
         * flavor (adapter) than the running ones wait, in order, until those are done */
        int run_flv = s->n_active - n_cancel - n_late > 0 ? s->cur_flv : -1;
        while (s->q_len > 0 && s->n_active + n_take - n_cancel - n_late < np) {
            struct job *j = s->queue[s->q_head];
            if (!j->cancelled && run_flv >= 0 && j->req.flavor != run_flv) break;
            s->q_head = (s->q_head + 1) % s->p.max_queue;
            s->q_len--;
            if (j->cancelled) {
                j->done = true;
                srv_job_release(j);
                continue;
            }
            take[n_take++] = j;
            run_flv = j->req.flavor;
        }
        pthread_mutex_unlock(&s->mu);
        if (n_take && take[0]->req.flavor != s->cur_flv) switch_flavor(s, take[0]->req.flavor);
        if (n_cancel) {
            pthread_mutex_lock(&s->metrics.mu);
            s->metrics.cancelled += (uint64_t)n_cancel;
            pthread_mutex_unlock(&s->metrics.mu);
        }
        for (int i = 0; i < n_cancel + n_late; i++) tern_batcher_cancel(s->batcher, cancel[i]);
        for (int i = 0; i < n_take; i++) admit(s, take[i]);
        if (tern_batcher_n_active(s->batcher) == 0) continue;
        struct tern_batcher_step_info si;
        tern_status st = tern_batcher_step(s->batcher, &si);
        if (st) fprintf(stderr, "tern serve: forward pass failed, its requests ended: %s\n", tern_last_error());
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.steps++;
        s->metrics.step_tokens += (uint64_t)si.n_tokens;
        s->metrics.drafted += (uint64_t)si.n_drafted;
        s->metrics.accepted += (uint64_t)si.n_accepted;
        s->metrics.draft_passes += (uint64_t)si.n_draft_passes;
        s->metrics.draft_tokens += (uint64_t)si.n_draft_tokens;
        s->metrics.draft_s += si.draft_ms / 1e3;
        if (si.draft_k > 0) s->metrics.draft_on_steps++;
        else if (si.n_draft_held > 0) s->metrics.draft_held_steps++;
        if (si.draft_off_period) s->metrics.draft_off_periods++;
        s->metrics.forward_s += si.forward_ms / 1e3;
        s->metrics.mask_s += si.mask_ms / 1e3;
        if (s->pc) tern_prefix_cache_get_stats(s->pc, &s->metrics.pc);
        const double t = srv_now();
        s->metrics.tps_window_tokens += (uint64_t)si.n_decode;
        if (t - s->metrics.tps_window_start >= 5.0) {
            s->metrics.tps_last = s->metrics.tps_window_tokens / (t - s->metrics.tps_window_start);
            s->metrics.tps_window_start = t;
            s->metrics.tps_window_tokens = 0;
        }
        pthread_mutex_unlock(&s->metrics.mu);
    }
    free(take);
    free(cancel);
    return NULL;
}

bool srv_engine_start(struct tern_server *s)
{
    if (pthread_create(&s->engine, NULL, engine_main, s)) return false;
    s->engine_started = true;
    return true;
}

void srv_engine_drain(struct tern_server *s)
{
    if (!s->engine_started) return;
    pthread_mutex_lock(&s->mu);
    s->engine_exit = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->engine, NULL);
    s->engine_started = false;
}
