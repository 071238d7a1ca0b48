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

static void help(void)
{
    printf("usage: tern serve [-m MODEL] [--host ADDR] [--port N] [--api-key KEY]... [--parallel N]\n"
           "                  [-c N] [-t N] [options]\n"
           "\n"
           "Serves the model over OpenAI's HTTP API: POST /v1/chat/completions (tools, tool_choice,\n"
           "response_format, streaming), POST /v1/completions, GET /v1/models, GET /health,\n"
           "GET /metrics (Prometheus) and a chat page at /. Up to --parallel requests are decoded\n"
           "together in one forward pass (continuous batching); more wait in a queue, and a full\n"
           "queue answers 503 with Retry-After. SIGTERM or Ctrl-C stops accepting, finishes the\n"
           "requests already admitted, and exits 0.\n"
           "\n"
           "  -m, --model FILE       GGUF model, or the name of an installed one (tern models);\n"
           "                         without -m: tern's tool caller, the installed adapter\n"
           "                         tern-tool-2 on its base (requests naming no other model run\n"
           "                         it), else the model embedded in this binary (tern-tool)\n"
           "  --default-model NAME   what a request whose \"model\" is neither the model's id nor an\n"
           "                         adapter's name runs (an adapter's NAME; default: the model)\n"
           "  --host ADDR            address to listen on (default 127.0.0.1: this machine only;\n"
           "                         0.0.0.0 or :: exposes the server to the network)\n"
           "  --port N               TCP port, 0..65535 (default 8080; 0 = any free port)\n"
           "  --api-key KEY          require 'Authorization: Bearer KEY' on /v1, /metrics and the\n"
           "                         page (/health stays open); repeatable: any of the keys is\n"
           "                         accepted (default: the TERN_API_KEY environment variable, else\n"
           "                         no key). Requests with different keys never share prompt KV,\n"
           "                         nor see each other's in cached_tokens\n"
           "  --api-key-file FILE    keys from FILE, one per line ('#' comments and blank lines\n"
           "                         skipped); keeps them out of ps; repeatable, adds to --api-key\n"
           "  --public-metrics       GET /metrics needs no API key (a scraper without one)\n"
           "  --public-page          GET / (the chat page) needs no API key (it asks for one)\n"
           "  --cors ORIGIN          let pages on ORIGIN (scheme://host[:port], e.g.\n"
           "                         https://app.example) call the server from a browser:\n"
           "                         preflights answered, Access-Control-Allow-Origin on answers;\n"
           "                         repeatable; '*' = any origin. Default: none, and a request\n"
           "                         carrying another origin's Origin header is refused (403)\n"
           "  --allow-host NAME      accept requests whose Host is NAME (any port) or NAME:PORT;\n"
           "                         repeatable; '*' = any. On a loopback address the server answers\n"
           "                         only its own names (localhost, 127.0.0.1, [::1], the --host\n"
           "                         given; with its port when a port is sent): another Host is how\n"
           "                         a web page reaches it through DNS rebinding (403). Elsewhere\n"
           "                         the Host is checked only when this is given\n"
           "  --alias NAME           model id reported by /v1/models (default: the file name)\n"
           "  --cache-mb M           a prompt cache of M MiB of KV shared by all slots: a prompt\n"
           "                         whose prefix was computed before (another conversation's\n"
           "                         system prompt, a turn whose slot was reused since) is restored\n"
           "                         instead of recomputed (default: none; the slots' own KV is\n"
           "                         always reused)\n"
           "  --prompt-cache DIR     keep the prompt cache in DIR across restarts: loaded at start,\n"
           "                         new blocks saved on SIGTERM (default --cache-mb 256)\n"
           "  --chat-template-file FILE  a Jinja chat template instead of the model's own (its\n"
           "                         tool-call format, hermes / llama3 / mistral, is detected)\n"
           "  --lora [NAME=]FILE[:SCALE]  a LoRA adapter kept resident over the model (repeatable,\n"
           "                         up to 16): requests with \"model\": NAME run with it (NAME\n"
           "                         defaults to the file's name without .gguf), rendered by its\n"
           "                         own chat template when it has one; /v1/models lists them;\n"
           "                         switching costs no reload\n"
           "  -np, --parallel N      requests decoded together, 1..256 (default 4)\n"
           "  -c, --ctx-size N       context positions per request (default: min(training, 4096));\n"
           "                         the KV cache holds parallel x ctx positions\n"
           "  --swa-full             sliding-window layers (gemma3/4, phi3) keep every position, not\n"
           "                         only their window (more memory; rollback to any position)\n"
           "  -t, --threads N        threads, 1..512 (default: all CPUs)\n"
           "  --chunk N              prompt tokens per forward pass (chunked prefill), 1..65536\n"
           "                         (default 256): lower keeps running streams smoother\n"
           "  --draft SRC            speculative decoding, drafts checked in the shared forward pass:\n"
           "                         'ngram' (each request drafts by lookup in its own prompt and\n"
           "                         answer), 'self:q4_0' (a q4_0 copy of the model's weights made at\n"
           "                         load; any weight type) or a drafter GGUF with the same tokenizer\n"
           "                         (refused at start otherwise): a drafter model has a context of\n"
           "                         its own with a sequence per slot and drafts for every request\n"
           "                         in batched passes before each step's. Greedy output is\n"
           "                         unchanged where the kernels are batch-invariant (Q8_0/Q4_0 on\n"
           "                         AVX-512, scalar); sampled output keeps the model's\n"
           "                         distribution. Requests with a grammar (tools, response_format)\n"
           "                         or log-probs are not drafted\n"
           "  --draft-max N          tokens drafted per request and step, 1..64 (default 8)\n"
           "  --draft-min N          the fewest tokens drafted when drafting (default 1). The\n"
           "                         length is chosen per step for the whole batch from measured\n"
           "                         CPU time and each request's acceptance, and drafting is held\n"
           "                         off while it does not pay (at most ~3 %% lost finding out);\n"
           "                         --draft-min N = --draft-max N: always N, never held off\n"
           "  --draft-p-min P        drafter models: a request stops drafting where the drafter's\n"
           "                         top probability is below P, 0..1 (default 0.75; 0 = always\n"
           "                         --draft-max)\n"
           "  --max-queue N          requests waiting for a slot before 503, 1..65536 (default 64)\n"
           "  --max-body BYTES       largest request body before 413 (default 8388608)\n"
           "  --max-body-total BYTES request body bytes held at once over all connections; a body\n"
           "                         that would pass it is 503 with Retry-After (from its\n"
           "                         Content-Length, before it is read) (default 67108864, or\n"
           "                         --max-body if more). Parsing a body costs several times its\n"
           "                         size: this bounds that memory under many large requests\n"
           "  --max-connections N    open connections at once, 1..1000000 (default 4096; the\n"
           "                         open-file limit is raised to hold them)\n"
           "  --max-connections-per-ip N  open connections from one client address (default: no\n"
           "                         limit; behind a reverse proxy every client is the proxy)\n"
           "  --read-timeout S       seconds a client has to send a request's headers and body,\n"
           "                         however slowly its bytes come (also the idle time of a kept-\n"
           "                         alive connection), then 408 and closed, 1..86400 (default 30);\n"
           "                         answers, streamed or not, are not timed\n"
           "  --max-tokens-cap N     tokens any one answer may have: a request asking for more, or\n"
           "                         for no limit, gets N (finish_reason \"length\" when cut;\n"
           "                         default: none, the context is the limit)\n"
           "  --request-timeout S    seconds an admitted request may run (queue time not counted),\n"
           "                         1..604800: then it ends as if max_tokens were reached, with\n"
           "                         what it generated and finish_reason \"length\" (default: none)\n"
           "  --quiet                no log line per request\n"
           "  --no-repack            keep the weights mmap-only (no copy repacked at load)\n"
           "\n"
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
           "2: a usage error.\n");
}

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

/* Flags into p (keys: the API keys it points to). 0: serve; -1: done (help); else an exit code. */
static int cmd_serve_args(int argc, char **argv, struct tern_server_params *pp, struct keys *keys)
{
    struct tern_server_params p = *pp;
    long long v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return -1;
        }
        if (!strcmp(a, "--quiet")) {
            p.quiet = true;
            continue;
        }
        if (!strcmp(a, "--swa-full")) {
            p.swa_full = true;
            continue;
        }
        if (!strcmp(a, "--no-repack")) {
            p.no_repack = true;
            continue;
        }
        if (!strcmp(a, "--public-metrics")) {
            p.public_metrics = true;
            continue;
        }
        if (!strcmp(a, "--public-page")) {
            p.public_page = true;
            continue;
        }
#define OPT(name, alt) ((r = cli_opt(argc, argv, &i, name, alt, &val)) != 0)
        if (OPT("-m", "--model")) {
            if (r < 0) return CLI_EXIT_USAGE;
            p.model_path = val;
        } else if (OPT("--host", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            p.host = val;
        } else if (OPT("--port", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--port", val, 0, 65535, &v)) return CLI_EXIT_USAGE;
            p.port = (int)v;
        } else if (OPT("--api-key", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!val[0]) return cli_usage_error("serve", "--api-key is empty");
            if (!keys_add(keys, val, false)) return cli_usage_error("serve", "out of memory");
        } else if (OPT("--api-key-file", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            if ((r = keys_from_file(keys, val))) return r;
        } else if (OPT("--cors", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (strcmp(val, "*") && !strstr(val, "://"))
                return cli_usage_error("serve", "--cors '%s' is not an origin: give scheme://host[:port] "
                                       "(e.g. https://app.example) or '*'", val);
            if (!list_add(&keys->cors, &keys->n_cors, val)) return cli_usage_error("serve", "out of memory");
        } else if (OPT("--allow-host", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!val[0] || strchr(val, '/'))
                return cli_usage_error("serve", "--allow-host '%s' is not a host name: give NAME or NAME:PORT", val);
            if (!list_add(&keys->hosts, &keys->n_hosts, val)) return cli_usage_error("serve", "out of memory");
        } else if (OPT("--max-body-total", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--max-body-total", val, 1024, 1ll << 40, &v)) return CLI_EXIT_USAGE;
            p.max_body_total = (size_t)v;
        } else if (OPT("--alias", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            p.model_alias = val;
        } else if (OPT("--cache-mb", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--cache-mb", val, 1, 1 << 20, &v)) return CLI_EXIT_USAGE;
            p.cache_bytes = (uint64_t)v << 20;
        } else if (OPT("--prompt-cache", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            p.prompt_cache_dir = val;
        } else if (OPT("--chat-template-file", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            p.chat_template_file = val;
        } else if (OPT("--lora", NULL)) {
            if (r < 0 || (r = lora_arg(keys, val))) return r < 0 ? CLI_EXIT_USAGE : r;
        } else if (OPT("-np", "--parallel")) {
            if (r < 0 || !cli_flag_int("serve", "--parallel", val, 1, 256, &v)) return CLI_EXIT_USAGE;
            p.n_parallel = (int)v;
        } else if (OPT("-c", "--ctx-size")) {
            if (r < 0 || !cli_flag_int("serve", "--ctx-size", val, 2, CLI_MAX_N_CTX, &v)) return CLI_EXIT_USAGE;
            p.n_ctx = (int)v;
        } else if (OPT("-t", "--threads")) {
            if (r < 0 || !cli_flag_int("serve", "--threads", val, 1, 512, &v)) return CLI_EXIT_USAGE;
            p.n_threads = (int)v;
        } else if (OPT("--chunk", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--chunk", val, 1, 65536, &v)) return CLI_EXIT_USAGE;
            p.n_prefill = (int)v;
        } else if (OPT("--draft", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (!val[0]) return cli_usage_error("serve", "--draft needs 'ngram', 'self:TYPE' or a GGUF path");
            p.draft = val;
        } else if (OPT("--draft-max", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--draft-max", val, 1, 64, &v)) return CLI_EXIT_USAGE;
            p.draft_max = (int)v;
        } else if (OPT("--draft-min", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--draft-min", val, 1, 64, &v)) return CLI_EXIT_USAGE;
            p.draft_min = (int)v;
        } else if (OPT("--draft-p-min", NULL)) {
            double pm;
            if (r < 0 || !cli_flag_float("serve", "--draft-p-min", val, 0, 1, &pm)) return CLI_EXIT_USAGE;
            p.draft_p_min = (float)pm;
        } else if (OPT("--max-queue", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--max-queue", val, 1, 65536, &v)) return CLI_EXIT_USAGE;
            p.max_queue = (int)v;
        } else if (OPT("--max-connections", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--max-connections", val, 1, 1000000, &v)) return CLI_EXIT_USAGE;
            p.max_connections = (int)v;
        } else if (OPT("--max-connections-per-ip", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--max-connections-per-ip", val, 1, 1000000, &v)) return CLI_EXIT_USAGE;
            p.max_connections_per_ip = (int)v;
        } else if (OPT("--read-timeout", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--read-timeout", val, 1, 86400, &v)) return CLI_EXIT_USAGE;
            p.read_timeout = (int)v;
        } else if (OPT("--default-model", NULL)) {
            if (r < 0) return CLI_EXIT_USAGE;
            p.default_model = val;
        } else if (OPT("--max-tokens-cap", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--max-tokens-cap", val, 1, 1 << 30, &v)) return CLI_EXIT_USAGE;
            p.max_tokens_cap = (int)v;
        } else if (OPT("--request-timeout", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--request-timeout", val, 1, 86400 * 7, &v)) return CLI_EXIT_USAGE;
            p.request_timeout_ms = (int)v * 1000;
        } else if (OPT("--max-body", NULL)) {
            if (r < 0 || !cli_flag_int("serve", "--max-body", val, 1024, 1ll << 32, &v)) return CLI_EXIT_USAGE;
            p.max_body = (size_t)v;
        } else {
            return cli_usage_error("serve", "unknown option '%s'", a);
        }
#undef OPT
    }
    /* no -m: the model embedded in this binary, as run and chat use (cli_models.c already put
     * the installed default adapter on its base here when there is one) */
    if (!p.model_path) {
        if (!cli_embedded_model(&p.model_data, &p.model_size))
            return cli_usage_error("serve", "a model is required (-m MODEL): this build has no embedded "
                                   "model (models/tern-tool.gguf was absent when it was built)");
        if (!p.model_alias) p.model_alias = CLI_EMBEDDED_NAME;
    }
    if (p.draft_max && !p.draft) return cli_usage_error("serve", "--draft-max needs --draft SRC");
    if (p.draft_min && !p.draft) return cli_usage_error("serve", "--draft-min needs --draft SRC");
    /* the environment's key when no flag gives one (it stays out of ps) */
    const char *env = getenv("TERN_API_KEY");
    if (!keys->n && env && env[0] && !keys_add(keys, env, false)) return cli_usage_error("serve", "out of memory");
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
    *pp = p;
    return 0;
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
    struct tern_server_params p = tern_server_default_params();
    struct keys keys = {0};
    int rc = cmd_serve_args(argc, argv, &p, &keys);
    if (rc == 0) rc = serve(&p);
    keys_free(&keys);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
