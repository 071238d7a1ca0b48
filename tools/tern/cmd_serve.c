/* cmd_serve.c — `tern serve`: the OpenAI-compatible HTTP server (include/tern.h "HTTP server",
 * src/server). This file turns flags into tern_server_params, prints where it listens, and
 * turns SIGTERM / SIGINT into tern_server_stop (drain, then exit 0). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern_server.h"

static struct tern_server *g_server;

#define SERVE_MAX_LORA 16

/* What the flags own for the server's parameters: the API keys, and the --lora adapters. */
struct keys {
    const char **v;
    char **owned; /* the strings read from files */
    int n, n_owned;
    char *lora_name[SERVE_MAX_LORA], *lora_path[SERVE_MAX_LORA];
    float lora_scale[SERVE_MAX_LORA];
    int n_lora;
    const char **cors, **hosts; /* --cors, --allow-host values (argv's strings) */
    int n_cors, n_hosts;
};

static bool keys_add(struct keys *k, const char *key, bool owned)
{
    const char **v = realloc(k->v, sizeof *v * (size_t)(k->n + 1));
    if (!v) return false;
    k->v = v;
    if (owned) {
        char **o = realloc(k->owned, sizeof *o * (size_t)(k->n_owned + 1));
        if (!o) return false;
        k->owned = o;
        k->owned[k->n_owned++] = (char *)key;
    }
    k->v[k->n++] = key;
    return true;
}

/* Append v to a growable list of argv strings. */
static bool list_add(const char ***list, int *n, const char *v)
{
    const char **l = realloc(*list, sizeof *l * (size_t)(*n + 1));
    if (!l) return false;
    l[(*n)++] = v;
    *list = l;
    return true;
}

static void keys_free(struct keys *k)
{
    free(k->cors);
    free(k->hosts);
    for (int i = 0; i < k->n_lora; i++) free(k->lora_name[i]), free(k->lora_path[i]);
    for (int i = 0; i < k->n_owned; i++) free(k->owned[i]);
    free(k->owned);
    free(k->v);
}

/* One key per line of path; blank lines and '#' comments skipped, spaces around a key dropped.
 * 0, or CLI_EXIT_USAGE after saying what was wrong. */
static int keys_from_file(struct keys *k, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return cli_usage_error("serve", "--api-key-file %s: %s", path, strerror(errno));
    char line[4096];
    int n = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            fclose(f);
            return cli_usage_error("serve", "--api-key-file %s: line %d is longer than %zu bytes", path,
                                   lineno, sizeof line - 2);
        }
        char *a = line, *b = line + len;
        while (*a == ' ' || *a == '\t') a++;
        while (b > a && (b[-1] == '\n' || b[-1] == '\r' || b[-1] == ' ' || b[-1] == '\t')) b--;
        *b = 0;
        if (!*a || *a == '#') continue;
        char *key = strdup(a);
        if (!key || !keys_add(k, key, true)) {
            free(key);
            fclose(f);
            return cli_usage_error("serve", "out of memory reading --api-key-file %s", path);
        }
        n++;
    }
    fclose(f);
    if (!n) return cli_usage_error("serve", "--api-key-file %s holds no key", path);
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    if (g_server) tern_server_stop(g_server);
}

/* --lora [NAME=]FILE[:SCALE]: the name requests pick it by (default: the file's name without
 * .gguf), a path, a scale when what follows the last ':' is a number. */
static int lora_arg(struct keys *k, const char *v)
{
    if (k->n_lora == SERVE_MAX_LORA)
        return cli_usage_error("serve", "--lora: at most %d adapters", SERVE_MAX_LORA);
    const char *eq = strchr(v, '=');
    const bool named = eq && eq > v && !memchr(v, '/', (size_t)(eq - v));
    const char *path = named ? eq + 1 : v;
    char *p = strdup(path);
    if (!p) return cli_usage_error("serve", "out of memory");
    double scale = 1.0;
    char *colon = strrchr(p, ':');
    if (colon && colon > p && cli_parse_float(colon + 1, -1e6, 1e6, &scale)) *colon = '\0';
    else scale = 1.0;
    char *name;
    if (named) {
        name = strndup(v, (size_t)(eq - v));
    } else {
        const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
        name = strndup(base, n);
    }
    if (!name || !*p) {
        free(name);
        free(p);
        return cli_usage_error("serve", "--lora '%s' needs a file", v);
    }
    k->lora_name[k->n_lora] = name;
    k->lora_path[k->n_lora] = p;
    k->lora_scale[k->n_lora] = (float)scale;
    k->n_lora++;
    return 0;
}

/* What the options set: the server's parameters, and what the flags own for them. */
struct serve_opts {
    struct tern_server_params p;
    struct keys keys;
    bool keys_given;               /* --api-key or --api-key-file: TERN_API_KEY is not used */
    long long cache_mb, request_timeout_s;
};

static void serve_init(void *o)
{
    *(struct serve_opts *)o = (struct serve_opts){.p = tern_server_default_params()};
}

static int api_key_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct serve_opts *o = opts;
    if (!val[0]) return cli_usage_error(cmd, "--api-key is empty"), -1;
    return keys_add(&o->keys, val, false) ? 0 : (cli_usage_error(cmd, "out of memory"), -1);
}

static int api_key_file_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)cmd, (void)opt;
    return keys_from_file(&((struct serve_opts *)opts)->keys, val) ? -1 : 0;
}

static int cors_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct keys *k = &((struct serve_opts *)opts)->keys;
    if (strcmp(val, "*") && !strstr(val, "://"))
        return cli_usage_error(cmd, "--cors '%s' is not an origin: give scheme://host[:port] "
                               "(e.g. https://app.example) or '*'", val), -1;
    return list_add(&k->cors, &k->n_cors, val) ? 0 : (cli_usage_error(cmd, "out of memory"), -1);
}

static int allow_host_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct keys *k = &((struct serve_opts *)opts)->keys;
    if (!val[0] || strchr(val, '/'))
        return cli_usage_error(cmd, "--allow-host '%s' is not a host name: give NAME or NAME:PORT", val), -1;
    return list_add(&k->hosts, &k->n_hosts, val) ? 0 : (cli_usage_error(cmd, "out of memory"), -1);
}

static int lora_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)cmd, (void)opt;
    return lora_arg(&((struct serve_opts *)opts)->keys, val) ? -1 : 0;
}

#define S struct serve_opts
static const struct cli_option serve_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(S, p.model_path),
     .def = "tern's tool caller: the installed adapter tern-tool-2 on its base (requests naming no "
            "other model run it), else the model embedded in this binary (tern-tool)",
     .help = "GGUF model, or the name of an installed one (tern models)"},
    {NULL, "--default-model", CLI_STRING, "NAME", CLI_AT(S, p.default_model), .def = "the model",
     .help = "what a request whose \"model\" is neither the model's id nor an adapter's name runs (an "
             "adapter's NAME)"},
    {NULL, "--alias", CLI_STRING, "NAME", CLI_AT(S, p.model_alias), .def = "the file name",
     .help = "model id reported by /v1/models"},
    {NULL, "--chat-template-file", CLI_PATH, "FILE", CLI_AT(S, p.chat_template_file),
     .help = "a Jinja chat template instead of the model's own (its tool-call format, hermes / llama3 "
             "/ mistral, is detected)"},
    {NULL, "--lora", CLI_CALL, "[NAME=]FILE[:SCALE]", .call = lora_take, .flags = CLI_REPEAT,
     .help = "a LoRA adapter kept resident over the model (up to 16): requests with \"model\": NAME "
             "run with it (NAME defaults to the file's name without .gguf), rendered by its own chat "
             "template when it has one; /v1/models lists them; switching costs no reload"},
    {NULL, "--no-repack", CLI_FLAG, NULL, CLI_AT(S, p.no_repack),
     .help = "keep the weights mmap-only (no copy repacked at load)"},
    {NULL, "--host", CLI_STRING, "ADDR", CLI_AT(S, p.host), .group = "Network and access",
     .def = "127.0.0.1: this machine only",
     .help = "address to listen on (0.0.0.0 or :: exposes the server to the network)"},
    {NULL, "--port", CLI_INT, "N", CLI_AT(S, p.port), CLI_RANGE(0, 65535), .help = "TCP port (0 = any free port)"},
    {NULL, "--api-key", CLI_CALL, "KEY", .call = api_key_take, CLI_GIVEN(S, keys_given), .flags = CLI_REPEAT,
     .env = "TERN_API_KEY", .def = "none",
     .help = "require 'Authorization: Bearer KEY' on /v1, /metrics and the page (/health stays open); "
             "any of the keys is accepted; the environment's key is used when neither --api-key nor "
             "--api-key-file is given (it stays out of ps). Requests with different keys never share "
             "prompt KV, nor see each other's in cached_tokens"},
    {NULL, "--api-key-file", CLI_CALL, "FILE", .call = api_key_file_take, CLI_GIVEN(S, keys_given),
     .flags = CLI_REPEAT,
     .help = "keys from FILE, one per line ('#' comments and blank lines skipped); keeps them out of "
             "ps; adds to --api-key"},
    {NULL, "--public-metrics", CLI_FLAG, NULL, CLI_AT(S, p.public_metrics),
     .help = "GET /metrics needs no API key (a scraper without one)"},
    {NULL, "--public-page", CLI_FLAG, NULL, CLI_AT(S, p.public_page),
     .help = "GET / (the chat page) needs no API key (it asks for one)"},
    {NULL, "--cors", CLI_CALL, "ORIGIN", .call = cors_take, .flags = CLI_REPEAT, .def = "none",
     .help = "let pages on ORIGIN (scheme://host[:port], e.g. https://app.example) call the server "
             "from a browser: preflights answered, Access-Control-Allow-Origin on answers; '*' = any "
             "origin. Without it a request carrying another origin's Origin header is refused (403)"},
    {NULL, "--allow-host", CLI_CALL, "NAME", .call = allow_host_take, .flags = CLI_REPEAT,
     .help = "accept requests whose Host is NAME (any port) or NAME:PORT; '*' = any. On a loopback "
             "address the server answers only its own names (localhost, 127.0.0.1, [::1], the --host "
             "given; with its port when a port is sent): another Host is how a web page reaches it "
             "through DNS rebinding (403). Elsewhere the Host is checked only when this is given"},
    {NULL, "--quiet", CLI_FLAG, NULL, CLI_AT(S, p.quiet), .help = "no log line per request"},
    {"-np", "--parallel", CLI_INT, "N", CLI_AT(S, p.n_parallel), CLI_RANGE(1, 256), .def = "4",
     .group = "Batching and context", .help = "requests decoded together"},
    {"-c", "--ctx-size", CLI_INT, "N", CLI_AT(S, p.n_ctx), CLI_RANGE(2, CLI_MAX_N_CTX),
     .def = "min(training, 4096)",
     .help = "context positions per request; the KV cache holds parallel x ctx positions"},
    {NULL, "--swa-full", CLI_FLAG, NULL, CLI_AT(S, p.swa_full),
     .help = "sliding-window layers (gemma3/4, phi3) keep every position, not only their window (more "
             "memory; rollback to any position)"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(S, p.n_threads), CLI_RANGE(1, 512), .def = "all CPUs", .help = "threads"},
    {NULL, "--chunk", CLI_INT, "N", CLI_AT(S, p.n_prefill), CLI_RANGE(1, 65536), .def = "256",
     .help = "prompt tokens per forward pass (chunked prefill): lower keeps running streams smoother"},
    {NULL, "--cache-mb", CLI_INT, "M", CLI_AT(S, cache_mb), CLI_RANGE(1, 1 << 20),
     .def = "none; 256 with --prompt-cache",
     .help = "a prompt cache of M MiB of KV shared by all slots: a prompt whose prefix was computed "
             "before (another conversation's system prompt, a turn whose slot was reused since) is "
             "restored instead of recomputed (the slots' own KV is always reused)"},
    {NULL, "--prompt-cache", CLI_PATH, "DIR", CLI_AT(S, p.prompt_cache_dir),
     .help = "keep the prompt cache in DIR across restarts: loaded at start, new blocks saved on SIGTERM"},
    {NULL, "--draft", CLI_STRING, "SRC", CLI_AT(S, p.draft), .group = "Speculative decoding",
     .help = "drafts checked in the shared forward pass: 'ngram' (each request drafts by lookup in its "
             "own prompt and answer), 'self:q4_0' (a q4_0 copy of the model's weights made at load; any "
             "weight type) or a drafter GGUF with the same tokenizer (refused at start otherwise): a "
             "drafter model has a context of its own with a sequence per slot and drafts for every "
             "request in batched passes before each step's. Greedy output is unchanged where the "
             "kernels are batch-invariant (Q8_0/Q4_0 on AVX-512, scalar); sampled output keeps the "
             "model's distribution. Requests with a grammar (tools, response_format) or log-probs are "
             "not drafted"},
    {NULL, "--draft-max", CLI_INT, "N", CLI_AT(S, p.draft_max), CLI_RANGE(1, 64), .def = "8",
     .help = "tokens drafted per request and step"},
    {NULL, "--draft-min", CLI_INT, "N", CLI_AT(S, p.draft_min), CLI_RANGE(1, 64), .def = "1",
     .help = "the fewest tokens drafted when drafting. The length is chosen per step for the whole "
             "batch from measured CPU time and each request's acceptance, and drafting is held off "
             "while it does not pay (at most ~3 % lost finding out); --draft-min N = --draft-max N: "
             "always N, never held off"},
    {NULL, "--draft-p-min", CLI_DOUBLE, "P", CLI_AT(S, p.draft_p_min), CLI_FRANGE(0, 1),
     .help = "drafter models: a request stops drafting where the drafter's top probability is below "
             "P (0 = always --draft-max)"},
    {NULL, "--max-queue", CLI_INT, "N", CLI_AT(S, p.max_queue), CLI_RANGE(1, 65536), .def = "64",
     .group = "Limits", .help = "requests waiting for a slot before 503"},
    {NULL, "--max-body", CLI_INT, "BYTES", CLI_AT(S, p.max_body), CLI_RANGE(1024, 1ll << 32),
     .def = "8388608", .help = "largest request body before 413"},
    {NULL, "--max-body-total", CLI_INT, "BYTES", CLI_AT(S, p.max_body_total), CLI_RANGE(1024, 1ll << 40),
     .def = "67108864, or --max-body if more",
     .help = "request body bytes held at once over all connections; a body that would pass it is 503 "
             "with Retry-After (from its Content-Length, before it is read). Parsing a body costs "
             "several times its size: this bounds that memory under many large requests"},
    {NULL, "--max-connections", CLI_INT, "N", CLI_AT(S, p.max_connections), CLI_RANGE(1, 1000000),
     .def = "4096", .help = "open connections at once (the open-file limit is raised to hold them)"},
    {NULL, "--max-connections-per-ip", CLI_INT, "N", CLI_AT(S, p.max_connections_per_ip),
     CLI_RANGE(1, 1000000), .def = "no limit",
     .help = "open connections from one client address (behind a reverse proxy every client is the proxy)"},
    {NULL, "--read-timeout", CLI_INT, "S", CLI_AT(S, p.read_timeout), CLI_RANGE(1, 86400), .def = "30",
     .help = "seconds a client has to send a request's headers and body, however slowly its bytes "
             "come (also the idle time of a kept-alive connection), then 408 and closed; answers, "
             "streamed or not, are not timed"},
    {NULL, "--max-tokens-cap", CLI_INT, "N", CLI_AT(S, p.max_tokens_cap), CLI_RANGE(1, 1 << 30),
     .def = "none, the context is the limit",
     .help = "tokens any one answer may have: a request asking for more, or for no limit, gets N "
             "(finish_reason \"length\" when cut)"},
    {NULL, "--request-timeout", CLI_INT, "S", CLI_AT(S, request_timeout_s), CLI_RANGE(1, 86400 * 7),
     .def = "none",
     .help = "seconds an admitted request may run (queue time not counted): then it ends as if "
             "max_tokens were reached, with what it generated and finish_reason \"length\""},
    {0},
};
#undef S

const struct cli_command cli_spec_serve = {
    "serve", "[-m MODEL] [--host ADDR] [--port N] [--api-key KEY]... [--parallel N] [-c N] [-t N] [options]",
    "Serves the model over OpenAI's HTTP API: POST /v1/chat/completions (tools, tool_choice,\n"
    "response_format, streaming), POST /v1/completions, GET /v1/models, GET /health,\n"
    "GET /metrics (Prometheus) and a chat page at /. Up to --parallel requests are decoded\n"
    "together in one forward pass (continuous batching); more wait in a queue, and a full\n"
    "queue answers 503 with Retry-After. SIGTERM or Ctrl-C stops accepting, finishes the\n"
    "requests already admitted, and exits 0.\n",
    serve_table, CLI_OPTS(struct serve_opts, serve_init),
    "The port is bound before the model loads: a port in use fails at once, and until the\n"
    "model is ready GET /health answers 503 {\"status\": \"loading\"} (other requests 503).\n"
    "Request fields: every documented OpenAI field is accepted (honoured, or ignored where it\n"
    "means nothing here: user, metadata, store, ...), and llama-server's n_predict,\n"
    "json_schema, grammar (GBNF), top_k, min_p, repeat_penalty, repeat_last_n, cache_prompt,\n"
    "id_slot ...; sampler knobs tern lacks (typical_p, mirostat, ...) only at their off\n"
    "value; unknown names are refused with 400 (docs/serve.md \"Request fields\" has the table).\n"
    "POST bodies must be sent with 'Content-Type: application/json' (415 otherwise: a page on\n"
    "another site could post a form or text/plain without asking). A request framed two ways\n"
    "(two Content-Lengths, Content-Length with chunked) is 400, a Transfer-Encoding other than\n"
    "chunked 501; errors are OpenAI's JSON error body. Listening on a non-loopback address\n"
    "without an API key prints a warning.\n"
    "\n"
    "Exit status 1: the model or drafter could not be loaded (a drafter with another\n"
    "tokenizer is refused naming both fingerprints) or the port not bound (message on stderr);\n"
    "2: a usage error.\n",
};

/* Options into o (the keys and lists it owns point into argv). CLI_PARSED: serve; otherwise
 * the exit status. */
static int cmd_serve_args(int argc, char **argv, struct serve_opts *o)
{
    const int pr = cli_parse(&cli_spec_serve, argc, argv, o);
    if (pr != CLI_PARSED) return pr;
    struct tern_server_params p = o->p;
    struct keys *keys = &o->keys;
    if (o->cache_mb) p.cache_bytes = (uint64_t)o->cache_mb << 20;
    if (o->request_timeout_s) p.request_timeout_ms = (int)o->request_timeout_s * 1000;
    /* no -m: the model embedded in this binary, as run and chat use (cli_models.c already put
     * the installed default adapter on its base here when there is one) */
    if (!p.model_path) {
        if (!cli_embedded_model(&p.model_data, &p.model_size))
            return cli_usage_error("serve", "a model is required (-m MODEL): this build has no embedded "
                                   "model (models/tern-tool.gguf was absent when it was built)");
        if (!p.model_alias) p.model_alias = CLI_EMBEDDED_NAME;
    }
    if (p.draft && !p.draft[0]) return cli_usage_error("serve", "--draft needs 'ngram', 'self:TYPE' or a GGUF path");
    if (p.draft_max && !p.draft) return cli_usage_error("serve", "--draft-max needs --draft SRC");
    if (p.draft_min && !p.draft) return cli_usage_error("serve", "--draft-min needs --draft SRC");
    p.api_key = NULL;
    p.api_keys = keys->v;
    p.n_api_keys = keys->n;
    p.lora_names = (const char *const *)keys->lora_name;
    p.lora_paths = (const char *const *)keys->lora_path;
    p.lora_scales = keys->lora_scale;
    p.n_lora = keys->n_lora;
    p.cors_origins = keys->cors;
    p.n_cors_origins = keys->n_cors;
    p.allowed_hosts = keys->hosts;
    p.n_allowed_hosts = keys->n_hosts;
    o->p = p;
    return CLI_PARSED;
}

static int serve(const struct tern_server_params *pp)
{
    const struct tern_server_params p = *pp;

    struct tern_server *s;
    tern_status st = tern_server_create(&p, &s);
    if (st) return cli_report("serve", st);
    g_server = s;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *host = p.host ? p.host : "127.0.0.1";
    fprintf(stderr, "tern serve: listening on http://%s%s%s:%d (%s%s)\n", strchr(host, ':') ? "[" : "",
            host, strchr(host, ':') ? "]" : "", tern_server_port(s),
            p.model_path ? p.model_path : "the embedded model " CLI_EMBEDDED_NAME,
            p.n_api_keys == 1 ? ", API key required" : p.n_api_keys > 1 ? ", API keys required" : "");
    fflush(stderr);
    st = tern_server_run(s);
    g_server = NULL;
    tern_server_free(s);
    if (st) return cli_report("serve", st);
    fprintf(stderr, "tern serve: stopped\n");
    return CLI_EXIT_OK;
}

int cmd_serve(int argc, char **argv)
{
    struct serve_opts o;
    serve_init(&o);
    int rc = cmd_serve_args(argc, argv, &o);
    if (rc == CLI_PARSED) rc = serve(&o.p);
    keys_free(&o.keys);
    return rc;
}
