/*
 * tern_server.h — libtern_server: the OpenAI-compatible HTTP server of `tern serve`, on
 * libmicrohttpd (src/server). Built on libtern (tern.h): a model, a multi-sequence context and the
 * batcher; link it only when a program serves HTTP.
 */
#ifndef TERN_SERVER_H
#define TERN_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== HTTP server */
/* (src/server; docs/serve.md) An OpenAI-compatible HTTP server on libmicrohttpd: POST
 * /v1/chat/completions and /v1/completions (streamed as server-sent events or whole), GET
 * /v1/models, /health, /metrics (Prometheus text) and a chat page at /. Requests are batched
 * continuously on one multi-sequence context (tern_batcher): up to n_parallel answers are
 * computed in the same forward pass.
 *
 *     struct tern_server_params sp = tern_server_default_params();
 *     sp.model_path = "model.gguf"; sp.port = 8080;
 *     struct tern_server *srv;
 *     tern_server_create(&sp, &srv);          // loads the model, binds the port
 *     tern_server_run(srv);                   // serves until tern_server_stop, then drains
 *     tern_server_free(srv);
 */
struct tern_server_params {
    const char *model_path;   /* required */
    const char *model_alias;  /* the model id /v1/models reports; NULL = the file's base name */
    const char *host;         /* NULL = "127.0.0.1" (loopback: another address is a choice) */
    int port;                 /* 0 = any free port (tern_server_port tells which); default 8080 */
    const char *api_key;      /* NULL = none; else every /v1 request, /metrics and the page
                                 need "Authorization: Bearer <key>" (401 otherwise; the scheme's
                                 case does not matter); /health never does */
    const char *const *api_keys; /* more keys, any of which is accepted (n_api_keys of them,
                                 with api_key if set; copied). Requests with different keys never
                                 share prompt KV (nor see it in usage.cached_tokens); nor do
                                 requests with different prompt_cache_key values */
    int n_api_keys;
    bool public_metrics;      /* GET /metrics needs no API key (a scraper without one) */
    bool public_page;         /* GET / (the chat page) needs no API key */
    /* Browsers. A page on another origin may call the server only if its origin is listed
     * (exactly, e.g. "https://app.example:8443"; "*" = any): its requests get
     * Access-Control-Allow-Origin and its preflights an answer; any other origin's request (an
     * Origin header that is neither listed nor the server's own) is 403. NULL / 0 = none. */
    const char *const *cors_origins;
    int n_cors_origins;
    /* DNS rebinding: a server on a loopback address answers only requests whose Host is one of
     * its names (localhost, 127.0.0.1, [::1], the host it was given; with its port, if a port is
     * given) or one of these ("name" any port, "name:port" that port; "*" = any Host), else 403.
     * On another address the Host is checked only against these, when there are any. */
    const char *const *allowed_hosts;
    int n_allowed_hosts;
    int n_parallel;           /* sequences decoded together; 0 = 4 */
    int n_ctx;                /* positions per sequence; 0 = min(training context, 4096) */
    int n_threads;            /* 0 = all CPUs */
    int n_prefill;            /* prompt tokens per step (chunked prefill); 0 = 256 */
    int max_queue;            /* requests waiting for a slot before 503; 0 = 64 */
    size_t max_body;          /* request body bytes before 413; 0 = 8 MiB */
    size_t max_body_total;    /* request body bytes held at once over all connections: a body
                                 whose Content-Length would pass it is 503 (Retry-After) before a
                                 byte is read, a chunked one when it does; 0 = 64 MiB, or
                                 max_body when that is more; less than max_body is refused */
    int max_connections;      /* open connections at once; 0 = 4096 (the process's soft
                                 open-file limit is raised, up to the hard one, to hold them, or
                                 this lowered to what fits, said on stderr) */
    int max_connections_per_ip; /* open connections from one client address; 0 = no limit */
    int read_timeout;         /* seconds a client has to send a request's headers and body (and
                                 the idle time before a kept-alive connection's next request),
                                 however slowly its bytes come: then 408 and closed; answers are
                                 not timed by it; 0 = 30 */
    bool quiet;               /* no per-request log line on stderr */
    const char *chat_template_file; /* a Jinja chat template used instead of the model's own
                                 (its tool-call format is detected from it); NULL = the model's */
    /* LoRA adapters kept resident over the one base (--lora [NAME=]FILE[:SCALE]): a request whose
     * "model" is lora_names[i] runs with adapter i at lora_scales[i] (NULL = all 1), rendered by
     * the adapter's own chat template when it carries one; any other name runs the base. Requests
     * of different adapters are not batched together: the engine switches the attached adapter
     * (no reload) when the slots of the previous one are done. /v1/models lists them. */
    const char *const *lora_names;
    const char *const *lora_paths;
    const float *lora_scales;
    int n_lora;
    uint64_t cache_bytes;     /* a prefix cache shared by all slots (tern_batcher_set_prefix_cache)
                                 holding up to this many KV bytes; 0 = none, unless
                                 prompt_cache_dir is set (then 256 MiB) */
    const char *prompt_cache_dir; /* load the prefix cache's files from here at start and save
                                 new blocks there when the server stops; NULL = memory only */
    const char *draft;        /* speculative decoding (tern_batcher_params.draft): "ngram" (n-gram
                                 lookup in each request's own prompt and answer), "self:TYPE" (the
                                 model's weights converted to TYPE at load) or the path of a
                                 drafter GGUF with the same tokenizer (else TERN_ERR_ARG naming
                                 both fingerprints); NULL = none */
    int draft_max;            /* tokens drafted per request and step, 1..64; 0 = 8 */
    int draft_min;            /* the fewest the controller drafts when it drafts
                                 (tern_batcher_params.n_draft_min); 0 = 1; >= draft_max: always
                                 draft_max, never held off */
    float draft_p_min;        /* drafter models: stop a request's drafts where the drafter's top
                                 probability falls below this, 0..1 (tern_batcher_params.draft_p_min;
                                 tern_server_default_params: 0.75, as llama.cpp; 0 = never) */
    bool no_repack;           /* keep the weights mmap-only (tern_model_params.no_repack) */
    bool swa_full;            /* sliding-window layers keep every position (tern_context_params) */
    int max_tokens_cap;       /* tokens any one answer may have (a request asking for more, or
                                 for no limit, gets this many; finish_reason "length" when cut);
                                 0 = no cap (the context) */
    int request_timeout_ms;   /* milliseconds an admitted request may run (queue time not counted):
                                 then it is ended as if max_tokens were reached (finish_reason
                                 "length", what was generated kept); 0 = no limit */
    const char *default_model; /* what a request whose "model" names neither the base (its id)
                                 nor an adapter runs: an adapter's name (lora_names), or NULL =
                                 the base (llama-server's way: any name runs the model) */
    const void *model_data;   /* instead of model_path: a GGUF image in memory, used in place
                                 (tern_model_load_memory; it must outlive the server), e.g. the
                                 model embedded in the tern binary; model_alias names it */
    size_t model_size;
};
struct tern_server_params tern_server_default_params(void);

struct tern_server;
/* Load the model, create the context and the batcher, start listening. Errors name what failed
 * (the model file, the address in use, ...). Caller frees with tern_server_free(). */
TERN_NODISCARD tern_status tern_server_create(const struct tern_server_params *p, struct tern_server **out);
/* The TCP port it listens on. */
int tern_server_port(const struct tern_server *s);
/* Serve until tern_server_stop; then refuse new requests (503), let every admitted request
 * finish, and return. */
TERN_NODISCARD tern_status tern_server_run(struct tern_server *s);
/* Ask tern_server_run to drain and return. Only sets a flag: safe in a signal handler. */
void tern_server_stop(struct tern_server *s);
void tern_server_free(struct tern_server *s);

#ifdef __cplusplus
}
#endif
#endif /* TERN_SERVER_H */
