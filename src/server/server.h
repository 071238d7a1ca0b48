/* server.h — internals of `tern serve` (public API: include/tern.h "HTTP server").
 *
 * Threads and data (read this first):
 * - libmicrohttpd runs one thread per connection (srv_http.c). A request is parsed and checked
 *   there (srv_request.c: OpenAI's rules and error bodies), rendered with the model's chat
 *   template and tokenized (the HTTP tokenizer, under tok_mu), and becomes a job in the queue.
 * - One engine thread (srv_engine.c) owns the context and the batcher: it admits queued jobs
 *   into free slots between steps, runs steps, and turns each job's pieces into output (stop
 *   strings, tool calls, SSE chunks or the final body: srv_output.c).
 * - A job is shared by its connection thread and the engine: everything after the "shared"
 *   mark below is guarded by srv->mu, and the job is freed by whichever side lets go last
 *   (refs). The connection thread waits on job->cv; a client that goes away sets cancelled,
 *   and the engine frees its slot before the next step.
 * Errors a client causes are answered with OpenAI's error body {"error": {"message", "type",
 * "param", "code"}} (Anthropic's {"type": "error", "error": {"type", "message"}} on /v1/messages)
 * and a 4xx status; the server keeps serving.
 * Three protocols, one engine: /v1/responses (OpenAI's Responses API, srv_responses.c) and
 * /v1/messages (Anthropic's Messages API, srv_messages.c) are translated into a chat-completions
 * body that srv_req_parse checks and renders like any other; their answers are written by the
 * protocol's writer (srv_out_responses.c, srv_out_messages.c) from the same engine callbacks. */
#ifndef TERN_SERVER_SERVER_H
#define TERN_SERVER_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tern_server.h"

/* ---------------------------------------------------------------- growable byte buffer */
struct sbuf {
    char *p;
    size_t len, cap;
};
bool sbuf_add(struct sbuf *b, const char *s, size_t n);
bool sbuf_adds(struct sbuf *b, const char *s);
void sbuf_free(struct sbuf *b);

/* ---------------------------------------------------------------- a client error */
struct srv_err {
    int status;          /* HTTP status (400, 401, 404, 413, 503, ...) */
    char type[40];       /* "invalid_request_error", "server_error", ... */
    char param[64];      /* "" = null */
    char code[48];       /* "" = null */
    char message[768];
};
void srv_err_set(struct srv_err *e, int status, const char *type, const char *param,
                 const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error": {...}} as malloc'ed text. */
char *srv_err_body(const struct srv_err *e);

/* The protocols a job may speak: its request's shape and its answer's. */
enum srv_api { SRV_API_CHAT = 0, SRV_API_COMPLETIONS, SRV_API_RESPONSES, SRV_API_MESSAGES };
/* The error body in the protocol's shape: Anthropic's {"type": "error", "error": {"type",
 * "message"}} for SRV_API_MESSAGES (its type from the status: invalid_request_error,
 * authentication_error, not_found_error, ...), else OpenAI's. Malloc'ed. */
char *srv_err_body_api(const struct srv_err *e, enum srv_api api);

/* ---------------------------------------------------------------- metrics (srv_metrics.c) */
#define SRV_HIST_BUCKETS 14
struct srv_hist {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t n;
};
struct srv_metrics {
    pthread_mutex_t mu;
#define SRV_STATUSES 16
#define SRV_ENDPOINTS 6
    uint64_t requests[SRV_ENDPOINTS][SRV_STATUSES]; /* [endpoint][status index]: see srv_metrics.c
                                 (with the answers libmicrohttpd gives itself, under "other") */
    struct srv_hist ttft, itl, queue_wait;
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    uint64_t steps, step_tokens;
    uint64_t drafted, accepted;  /* speculative decoding (--draft) */
    uint64_t draft_passes, draft_tokens; /* a drafter model's passes (--draft self:TYPE / GGUF) */
    uint64_t draft_on_steps;    /* steps the draft controller drafted in */
    uint64_t draft_held_steps;  /* steps requests could have drafted in but it held off */
    uint64_t draft_off_periods; /* times it switched drafting off (it did not pay) */
    double forward_s, mask_s, draft_s;
    uint64_t rejected_full, cancelled;
    struct tern_prefix_cache_stats pc; /* copied by the engine thread after each step */
    bool has_pc;
    double tps_window_start;   /* tokens/s over a sliding ~10 s window */
    uint64_t tps_window_tokens;
    double tps_last;
};
void srv_metrics_init(struct srv_metrics *m);
void srv_metrics_free(struct srv_metrics *m);
void srv_hist_add(struct srv_hist *h, double seconds);
/* endpoint: 0 chat, 1 completions, 2 models, 3 responses, 4 messages, 5 other. */
void srv_metrics_request(struct srv_metrics *m, int endpoint, int status);
/* Compiled grammars shared by requests asking for the same one (srv_grammars.c). */
#define SRV_GRAMMARS 16
struct srv_grammar {
    struct tern_grammar *g;
    char *key;         /* what it was compiled from */
    size_t key_len;
    int refs;          /* the jobs holding it, plus 1 while cached (under the cache's mu) */
    uint64_t used;     /* the cache's tick at its last lookup */
};
struct srv_grammars {
    pthread_mutex_t mu;
    struct srv_grammar *ent[SRV_GRAMMARS]; /* cached, or NULL */
    uint64_t tick, hits, misses;
};
void srv_grammars_init(struct srv_grammars *c);
void srv_grammars_free(struct srv_grammars *c);
/* The grammar compiled from key (key_len bytes naming everything it is compiled from): the
 * cached one, or compile(user, &g) on a miss. *out holds a reference: give it back with
 * srv_grammar_put. */
TERN_NODISCARD tern_status srv_grammar_get(struct srv_grammars *c, const char *key, size_t key_len,
                            tern_status (*compile)(void *user, struct tern_grammar **out), void *user,
                            struct srv_grammar **out);
void srv_grammar_put(struct srv_grammars *c, struct srv_grammar *e);
struct tern_server;
char *srv_metrics_text(struct tern_server *s);

/* ---------------------------------------------------------------- a parsed request */
enum job_kind { JOB_CHAT = 0, JOB_COMPLETION = 1 };
#define SRV_MAX_STOP 16 /* chat and completions take 4 (OpenAI's limit), Anthropic's stop_sequences 16 */

/* What a Responses or Messages request keeps beyond its chat translation (srv_responses.c,
 * srv_messages.c): what its answer repeats and, for Responses, the conversation it stores. */
struct srv_proto {
    cJSON *echo;       /* responses: the request's fields the response object repeats
                          (instructions, tools, tool_choice, text, temperature, ...); owned */
    cJSON *history;    /* responses: the conversation as input items (the previous response's,
                          then this request's input); the output items are added when it is
                          stored; owned */
    bool store;        /* responses: keep the answer for previous_response_id and GET */
    int key;           /* the API key it came with (index into srv->keys, -1: none): a stored
                          response is read back with the same key only */
};
void srv_proto_free(struct srv_proto *p);

struct srv_req {
    enum job_kind kind;
    enum srv_api api;            /* the protocol it came in (responses / messages: kind JOB_CHAT) */
    struct srv_proto *proto;     /* responses / messages: owned; NULL otherwise */
    cJSON *body;                 /* the parsed request (owned) */
    const char *raw;             /* its text (borrowed: valid during srv_req_parse only) */
    size_t raw_len;
    bool stream, include_usage;
    struct tern_sampler_params sp;
    int max_tokens;              /* 0 = until the context is full */
    int logprobs;                /* -1 = none; else log-probs with this many alternatives
                                    (chat: top_logprobs 0..20; completions: logprobs 0..5) */
    bool ignore_eos;
    char *stop[SRV_MAX_STOP];    /* owned */
    int n_stop;
    bool tools;                  /* the request has tools and tool_choice is not "none" */
    enum tern_tool_choice tool_choice;
    char tool_name[256];         /* tool_choice named */
    bool parallel_tool_calls;
    cJSON *response_schema;      /* response_format json_schema/json_object: the schema (borrowed
                                    from body or owned_schema) */
    cJSON *owned_schema;
    bool schema_strict;          /* response_format json_schema "strict": true (srv_strict.c) */
    const char *schema_param;    /* the field the schema came from: "response_format" or
                                    "json_schema" (llama-server's) */
    const char *gbnf;            /* llama-server's "grammar": GBNF text (borrowed from body) */
    bool reasoning_open;         /* the rendered prompt ends inside a reasoning block */
    bool reasoning_ctl;          /* the generation gets a reasoning control (srv_reasoning.c) */
    int reasoning_budget;        /* reasoning_effort / thinking_budget_tokens; -1 = none */
    int32_t reasoning_close[16]; /* the tokens of "\n</think>\n\n", forced when it is spent */
    int n_reasoning_close;
    bool reasoning_omitted;      /* messages: thinking display "omitted" (blocks without text) */
    int32_t *prompt;             /* owned */
    int n_prompt;
    const char *cache_key;       /* prompt_cache_key, or NULL (borrowed from body) */
    uint64_t cache_group;        /* the isolation group of its KV reuse (srv_cache_group) */
    int flavor;                  /* index into srv->flv: the base (0) or an adapter */
};
void srv_req_free(struct srv_req *r);
/* srv_fields.c: every top-level field of body is one tern knows for api (OpenAI's documented
 * fields, llama-server's, Anthropic's); ignored ones are type-checked, sampler knobs tern lacks accepted at
 * their off value only. false + *e (400) otherwise. */
bool srv_fields_check(const cJSON *body, enum srv_api api, struct srv_err *e);
/* srv_strict.c: schema follows OpenAI's strict mode (additionalProperties false or absent on
 * every object); where names it in messages ("response_format.json_schema.schema"). */
bool srv_strict_check(const cJSON *schema, const char *where, const char *param, struct srv_err *e);
/* srv_reasoning.c: reasoning_effort / thinking_budget_tokens of a chat request (400 + *e when
 * bad), and whether its generation gets a reasoning control: then a prompt that does not open
 * the thinking is given "<think>\n" (*prompt, *spans grown; r->reasoning_open set) and the
 * close tokens are made. Between rendering and tokenizing. */
bool srv_reasoning_prepare(struct tern_server *s, struct srv_req *r, char **prompt, size_t *plen,
                           struct tern_text_span **spans, size_t *n_spans, struct srv_err *e);
/* The batch request's reasoning control for r (off unless srv_reasoning_prepare took it). */
struct tern_reasoning_ctl srv_reasoning_ctl(const struct srv_req *r);
/* Parse and check body[0..len) for kind; on failure *e is filled (4xx) and false returned.
 * Renders (chat) and tokenizes the prompt; builds nothing else. */
bool srv_req_parse(struct tern_server *s, enum job_kind kind, const char *body, size_t len,
                   struct srv_req *r, struct srv_err *e);
/* The checks every body passes before its fields are read: UTF-8, JSON syntax (byte offset,
 * line:col), an object, no escaped NUL, no repeated key anywhere. *out: the document (caller
 * deletes), NULL on failure (*e: 400). */
bool srv_body_parse(const char *body, size_t len, cJSON **out, struct srv_err *e);
/* "an object", "a string", ... for messages about a value's type. */
const char *srv_jtype(const cJSON *v);
/* A tool name as OpenAI allows it: ^[a-zA-Z0-9_-]{1,64}$ (it also keeps every call format
 * writable and readable back). */
bool srv_tool_name_ok(const char *name);

/* srv_responses.c / srv_messages.c: a Responses / Messages body -> r (api set, kind JOB_CHAT,
 * proto filled), through srv_req_parse of its chat translation; errors name the protocol's
 * fields. key: the API key the request came with (previous_response_id reads that key's
 * responses only). count_only (messages): /v1/messages/count_tokens, max_tokens not needed. */
bool srv_responses_parse(struct tern_server *s, const char *body, size_t len, int key,
                         struct srv_req *r, struct srv_err *e);
bool srv_messages_parse(struct tern_server *s, const char *body, size_t len, bool count_only,
                        struct srv_req *r, struct srv_err *e);
/* srv_translate.c: the chat request's errors in the words of the protocol it was translated
 * from: its field names (text.format for response_format, tools[i].parameters, ...) and, through
 * src (src[i]: the protocol's index of chat message i, -1: its system text), its message
 * indices. */
void srv_err_translate(struct srv_err *e, enum srv_api api, const int *src, int n_src);
/* The chat-completions body a translator builds: its messages, and where each came from. */
struct srv_chat {
    cJSON *body;        /* the chat request (owned) */
    cJSON *msgs;        /* its "messages" */
    int *src;           /* (n) the protocol's index of each message (srv_err_translate) */
    int n, cap;
    bool assistant_open; /* the last message is an assistant turn that later calls join */
    char *reasoning;     /* thinking waiting for the assistant turn it came with (owned) */
};
bool srv_chat_init(struct srv_chat *c);
void srv_chat_free(struct srv_chat *c);
/* Append {"role", "content"} (content NULL: none); the message, or NULL (out of memory). */
cJSON *srv_chat_add(struct srv_chat *c, const char *role, const char *content, int src);
/* Thinking sent back (a Responses reasoning item, Messages thinking blocks): it becomes the
 * reasoning_content of the assistant message the next assistant item starts or joins, which the
 * template renders or leaves out as it wants (Qwen3's renders the current turn's only); a user or
 * tool message coming first drops it. Several are joined by a blank line. false: out of memory. */
bool srv_chat_reasoning(struct srv_chat *c, const char *text);
/* A tool call {id, type "function", function {name, arguments}} of the current assistant turn
 * (a new assistant message with content "" when there is none open). */
bool srv_chat_add_call(struct srv_chat *c, const char *id, const char *name, const char *args, int src);
/* A chat tool {"type": "function", "function": {name, description, parameters, strict}}. */
cJSON *srv_chat_tool(const char *name, const cJSON *description, const cJSON *parameters, bool strict);
/* from[key] (when present and not null) into the chat body as `as` (NULL: the same key). */
void srv_chat_copy(struct srv_chat *c, const cJSON *from, const char *key, const char *as);
/* The chat body through srv_req_parse (every chat check), its errors translated; r->api = api. */
bool srv_chat_parse(struct tern_server *s, struct srv_chat *c, enum srv_api api, struct srv_req *r,
                    struct srv_err *e);

/* ---------------------------------------------------------------- jobs */
struct job {
    struct tern_server *srv;
    struct srv_req req;
    char id[48];
    long long created;
    struct tern_sampler *sampler;
    struct tern_grammar *grammar;  /* tools / response_format constraint, or NULL: gref's */
    struct srv_grammar *gref;      /* the server's shared grammar this job holds, or NULL */
    char warning[512];             /* a lenient compile's warnings (X-Tern-Warning), "" if none */
    double t_queued, t_admitted, t_last_token;

    /* engine-side output state (engine thread only; srv_output.c) */
    struct tern_toolcall_parser *tp;
    size_t content_sent;         /* bytes of the parser's content already emitted */
    size_t reasoning_sent;       /* bytes of its reasoning already emitted */
    int calls_sent;
    struct sbuf hold;            /* text held back because it may begin a stop string */
    struct sbuf text;            /* the answer's content so far (non-stream bodies) */
    bool stop_hit;
    int stop_which;              /* the stop string that ended it (stop_hit), index into req.stop */
    bool role_sent;
    cJSON *lp;                   /* logprobs entries (chat's shape) not yet sent: a stream's
                                    next chunk takes them, a whole answer all of them */
    size_t lp_offset;            /* bytes of the tokens' text so far (completions' text_offset) */
    int slot;
    struct tern_gen_stats st;
    /* responses / messages writers (srv_out_responses.c, srv_out_messages.c) */
    struct {
        int seq;                 /* responses: the next event's sequence_number */
        int n_items;             /* output items (responses) / content blocks (messages) begun */
        bool text_open;          /* a message item / text block is open (stream) */
        bool reasoning_open;     /* a reasoning item / thinking block is open (stream) */
        struct sbuf text;        /* the open item's text so far */
        cJSON *items;            /* output items / content blocks done so far (stream) */
    } pw;

    /* shared: guarded by srv->mu */
    int refs;
    pthread_cond_t cv;
    struct sbuf out;             /* stream: SSE bytes; else the final body when done */
    size_t out_pos;              /* stream bytes handed to the connection */
    bool done, cancelled, admitted;
    bool timed_out;              /* ended by --request-timeout (engine thread sets it before
                                    cancelling the slot): finish_reason "length" */
    int status;                  /* HTTP status of a non-stream answer */
};

/* srv_output.c: engine callbacks and the bodies they produce. */
int srv_job_on_piece(const char *text, size_t len, void *user);
int srv_job_on_logprob(const struct tern_token_logprob *lp, void *user);
void srv_job_on_done(const struct tern_gen_stats *st, void *user);
/* The stream's opening chunk (role), appended to out at enqueue (under srv->mu). */
void srv_job_open_stream(struct job *j);
/* An SSE event on the job's stream: "event: NAME\n" (when name) + "data: <o>\n\n"; o is
 * deleted. locked: the caller holds srv->mu (else it is taken). */
void srv_job_event(struct job *j, const char *name, cJSON *o, bool locked);
/* The job failed before it ran (engine side, under srv->mu): the error as its protocol's stream
 * event or body, status e->status, done. */
void srv_job_fail_locked(struct job *j, const struct srv_err *e);
/* The answer ran out of room (max_tokens, the context) or time, rather than ending. */
bool srv_job_cut_short(const struct job *j);
/* The answer's content: the tool-call parser's text, or all of it without one. */
const char *srv_job_content(const struct job *j, size_t *len);
/* The answer's reasoning (the parser took it apart from the content), "" when none. */
const char *srv_job_reasoning(const struct job *j, size_t *len);
/* An id unique per request and i: prefix + the request id's random part + "_" + i. */
void srv_job_sub_id(const struct job *j, const char *prefix, int i, char *buf, size_t cap);

/* The writers of the Responses and Messages protocols (engine thread). open: the stream's first
 * events (under srv->mu); text: content bytes of a stream; call: a stream's complete tool call i;
 * finish: a stream's last events; body: the whole answer of a request that is not streamed
 * (malloc'ed JSON, NULL: out of memory). */
struct srv_writer {
    void (*open)(struct job *j);
    void (*reasoning)(struct job *j, const char *s, size_t n); /* thinking: before the text */
    void (*text)(struct job *j, const char *s, size_t n);
    void (*call)(struct job *j, int i, const struct tern_toolcall *c);
    void (*finish)(struct job *j);
    char *(*body)(struct job *j);
};
extern const struct srv_writer srv_responses_writer, srv_messages_writer;

/* ---------------------------------------------------------------- stored responses (srv_store.c) */
/* The Responses API's previous_response_id and GET /v1/responses/{id}: the last SRV_STORE_MAX
 * responses (at most SRV_STORE_BYTES of them), least recently used evicted first. Each is its
 * API key's: another key's lookup is a miss. Thread-safe (its own lock). */
#define SRV_STORE_MAX 256
#define SRV_STORE_BYTES (64u << 20)
struct srv_stored {
    char id[64];
    int key;
    char *response;   /* the response object's JSON text */
    cJSON *history;   /* the conversation as input items, its output included */
    size_t bytes;
    uint64_t used;
};
struct srv_store {
    pthread_mutex_t mu;
    struct srv_stored *ent[SRV_STORE_MAX];
    size_t bytes;
    uint64_t tick;
};
void srv_store_init(struct srv_store *st);
void srv_store_free(struct srv_store *st);
/* Keep a response (history is taken over; response is copied). */
void srv_store_put(struct srv_store *st, const char *id, int key, const char *response, cJSON *history);
/* A copy of the stored response's history (caller deletes) / its JSON text (caller frees), or
 * NULL: no such id for this key. */
cJSON *srv_store_history(struct srv_store *st, const char *id, int key);
char *srv_store_response(struct srv_store *st, const char *id, int key);
/* Forget it; false: no such id for this key. */
bool srv_store_delete(struct srv_store *st, const char *id, int key);

/* The isolation group of a request's prefix reuse (tern_batch_request.cache_group): 0 (shared)
 * for the base model on a server without API keys and a request without prompt_cache_key; else
 * 64 bits of SHA-256 over the API key it was sent with (key: index into srv->keys, or -1), the
 * prompt_cache_key and the adapter's file digest (flavor > 0: KV computed with an adapter is
 * another model's) (srv_http.c). */
uint64_t srv_cache_group(const struct tern_server *s, int key, const char *cache_key, int flavor);

/* srv_engine.c: a job takes over *req (zeroed); refs 1 (the connection). */
struct job *srv_job_new(struct tern_server *s, struct srv_req *req);
/* Sampler, grammar (tool_choice / response_format) and tool-call parser; 4xx on a bad schema. */
bool srv_job_prepare(struct job *j, struct srv_err *e);

/* ---------------------------------------------------------------- open connections (srv_http.c) */
/* One per TCP connection, from MHD's connection-started notice to its closed notice (which
 * comes before MHD closes the socket, so fd is this connection's while the entry is listed).
 * The reaper thread closes a connection that has been receiving a request for longer than
 * read_timeout, however slowly its bytes come. Guarded by srv->conns_mu. */
struct srv_conn {
    struct srv_conn *prev, *next;
    int fd;
    double since;      /* receiving a request (or idle before one) since, monotonic s; 0 = the
                          request is complete and being answered: not timed */
    int requests;      /* requests completed on it (keep-alive) */
    bool answered;     /* a response is queued (refused early): no 408 written over it */
    bool cut;          /* the reaper shut it down */
};

/* ---------------------------------------------------------------- the gate (srv_gate.c) */
/* What a request must be before its body is read: framed one way only, sent to one of the
 * server's names, from its own origin or one --cors allows, JSON when it is a POST; and the
 * server-wide budget of body bytes held at once. Each check fills *e (4xx/5xx) when it refuses. */
struct MHD_Connection;
struct sockaddr;
/* Copy the CORS origins and allowed hosts (at create). */
bool srv_gate_init(struct tern_server *s);
/* The address it listens on: a loopback one adds the server's own names and turns the Host check
 * on; another without an API key is warned about on stderr. */
bool srv_gate_bind(struct tern_server *s, const struct sockaddr *addr);
void srv_gate_free(struct tern_server *s);
/* One Content-Length at most, not with Transfer-Encoding, which may only be "chunked". */
bool srv_gate_framing(struct MHD_Connection *c, struct srv_err *e);
/* The Host header against the server's names (HTTP/1.1 must send one). */
bool srv_gate_host(const struct tern_server *s, struct MHD_Connection *c, const char *version, struct srv_err *e);
/* The Origin header: none or the server's own (*acao NULL), one --cors allows (*acao: the value
 * of Access-Control-Allow-Origin, the server's copy), or another (false, 403). */
bool srv_gate_origin(const struct tern_server *s, struct MHD_Connection *c, const char **acao, struct srv_err *e);
/* A POST's Content-Type is application/json (parameters allowed), else 415. */
bool srv_gate_json(struct MHD_Connection *c, struct srv_err *e);
/* Take n bytes of the body budget (false: over it), give them back. */
bool srv_body_take(struct tern_server *s, size_t n);
void srv_body_give(struct tern_server *s, size_t n);

/* ---------------------------------------------------------------- the server */
/* What a request runs as: the base model (flavor 0) or one of the adapters over it, with the
 * chat template it renders with and what that template says of tool calls and reasoning. */
struct srv_flavor {
    char *name;                        /* the "model" that picks it (flavor 0: the model id) */
    struct tern_lora *ad;              /* NULL: the base */
    uint8_t digest[32];                /* SHA-256 of the adapter's file (prompt-cache groups) */
    float scale;
    struct tern_chat_template *tmpl;   /* owned by every flavor: the adapter's own, else the base's */
    enum tern_toolcall_format fmt;
    enum tern_reasoning_format rfmt;   /* the template's reasoning markup, taken apart from content */
    int32_t preserve[4];               /* the format's markup that is a control token here
                                          (tern_toolcall_preserved_tokens): shown to the parser
                                          of requests with tools, as llama-server's preserved tokens */
    int n_preserve;
};

struct tern_server {
    struct tern_server_params p;
    char **keys;                       /* the API keys (api_key, api_keys; owned copies) */
    int n_keys;                        /* 0: no key needed */
    char **cors;                       /* origins allowed cross-origin (owned copies) */
    int n_cors;
    bool cors_any;                     /* "*" among them */
    char **hosts;                      /* Host names accepted (owned, lower case): the server's own
                                          first (n_own_hosts; a port must be its own), then
                                          allowed_hosts */
    int n_hosts, n_own_hosts;
    bool check_host, hosts_any;
    pthread_mutex_t body_mu;           /* the body budget */
    size_t body_bytes;                 /* request body bytes held (or announced) now */
    size_t body_bytes_peak;
    uint64_t body_refused;             /* requests refused (503) for the budget */
    char *model_id;
    struct tern_model *model;
    struct tern_tokenizer *tok;        /* engine thread: detokenizing, end-of-generation */
    struct tern_tokenizer *tok_http;   /* connection threads, under tok_mu */
    pthread_mutex_t tok_mu;
    struct srv_flavor *flv;            /* (n_flv) flv[0] the base, then the --lora adapters */
    int n_flv;
    int cur_flv;                       /* engine thread: the flavor the context runs now */
    int default_flv;                   /* what an unknown "model" runs (default_model) */
    struct tern_grammar_vocab *gvocab;
    struct srv_grammars grammars;      /* compiled tools / response_format grammars, shared */
    struct tern_context *ctx;
    struct tern_batcher *batcher;
    struct tern_draft *draft;          /* --draft (ngram, or a drafter model with a sequence per
                                          slot), or NULL; the batcher's, freed after it */
    struct tern_prefix_cache *pc;      /* or NULL; engine thread only (and run/free after it) */
    int n_ctx;
    void *daemon;                      /* struct MHD_Daemon */
    int port;
    int quiesced_fd;                   /* listening socket after MHD_quiesce_daemon, or -1 */
    long long started;

    pthread_mutex_t mu;                /* queue, jobs' shared parts, draining */
    pthread_cond_t wake;               /* engine: new work or stop */
    struct job **queue;                /* (max_queue) FIFO ring */
    int q_head, q_len;
    struct job **active;               /* (n_parallel) by slot */
    int n_active;
    int http_jobs;                     /* requests with a job whose answer is not fully sent */
    bool engine_exit;
    pthread_t engine;
    bool engine_started;
    atomic_bool stop_requested;
    atomic_bool ready;                 /* the model and the engine are up: until then every
                                          request but /health (503 "loading") is a 503 */
    atomic_bool draining;
    atomic_uint_fast64_t seq;          /* request ids and default seeds */

    pthread_mutex_t conns_mu;          /* the open connections and the reaper */
    pthread_cond_t conns_cv;           /* reaper: stop */
    struct srv_conn *conns;            /* open connections, newest first */
    int n_conns;
    uint64_t n_timed_out;              /* connections cut at read_timeout */
    pthread_t reaper;
    bool reaper_started, reaper_exit;

    struct srv_metrics metrics;
    struct srv_store store;            /* responses kept for previous_response_id */
};

/* srv_engine.c */
bool srv_engine_start(struct tern_server *s);
/* Enqueue j (refs taken for the engine). false + *e (503) when the queue is full or draining. */
bool srv_enqueue(struct tern_server *s, struct job *j, struct srv_err *e);
void srv_job_release(struct job *j); /* under s->mu */
/* Wait until the queue and every slot are empty, then stop the engine thread. */
void srv_engine_drain(struct tern_server *s);

/* srv_http.c */
TERN_NODISCARD tern_status srv_http_start(struct tern_server *s);
void srv_http_quiesce(struct tern_server *s);
void srv_http_stop(struct tern_server *s);

/* srv_page.c */
extern const char srv_page_html[];

double srv_now(void);            /* monotonic seconds */
long long srv_unix_time(void);

#endif
