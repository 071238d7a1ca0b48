/* server.c — the server's life: create (model, tokenizers, template, grammar vocabulary,
 * multi-sequence context, batcher, engine thread, listening socket), run (wait for
 * tern_server_stop, then drain: stop accepting, let admitted requests finish), free.
 * Read server.h for the threads and locks. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/sha2.h>

#include "server/server.h"
#include "util/error.h"

struct tern_server_params tern_server_default_params(void)
{
    return (struct tern_server_params){.port = 8080, .draft_p_min = 0.75f};
}

void tern_server_free(struct tern_server *s)
{
    if (!s) return;
    atomic_store(&s->draining, true);
    srv_http_stop(s);
    srv_engine_drain(s);
    /* jobs still queued belonged to connections that are gone with the daemon */
    for (int i = 0; s->queue && i < s->q_len; i++) {
        struct job *j = s->queue[(s->q_head + i) % s->p.max_queue];
        srv_job_release(j);
    }
    tern_batcher_free(s->batcher);
    tern_draft_free(s->draft);
    tern_prefix_cache_free(s->pc);
    tern_context_free(s->ctx);
    srv_grammars_free(&s->grammars); /* the jobs holding grammars are gone (drained above) */
    tern_grammar_vocab_free(s->gvocab);
    for (int i = 0; s->flv && i < s->n_flv; i++) {
        tern_chat_template_free(s->flv[i].tmpl);
        tern_lora_free(s->flv[i].ad);
        free(s->flv[i].name);
    }
    free(s->flv);
    tern_tokenizer_free(s->tok);
    tern_tokenizer_free(s->tok_http);
    tern_model_free(s->model);
    free(s->queue);
    free(s->active);
    free(s->model_id);
    for (int i = 0; i < s->n_keys && s->keys[i]; i++) {
        /* a key does not outlive its server in freed memory */
        volatile char *k = s->keys[i];
        for (size_t n = strlen(s->keys[i]), j = 0; j < n; j++) k[j] = 0;
        free(s->keys[i]);
    }
    free(s->keys);
    srv_gate_free(s);
    pthread_mutex_destroy(&s->body_mu);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->tok_mu);
    pthread_mutex_destroy(&s->conns_mu);
    pthread_cond_destroy(&s->conns_cv);
    pthread_cond_destroy(&s->wake);
    srv_metrics_free(&s->metrics);
    srv_store_free(&s->store);
    free(s);
}

/* A Jinja chat template from a file (llama-server's --chat-template-file), replacing the
 * model's own. */
static tern_status template_from_file(const char *path, struct tern_chat_template **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "serve: chat template %s: %s", path, strerror(errno));
    struct sbuf b = {0};
    char buf[8192];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = sbuf_add(&b, buf, n);
    const bool err = ferror(f);
    fclose(f);
    tern_status st;
    if (!ok) st = tern_fail(TERN_ERR_NOMEM, "serve: out of memory reading %s", path);
    else if (err) st = tern_fail(TERN_ERR_IO, "serve: chat template %s: read error", path);
    else if (!b.len) st = tern_fail(TERN_ERR_FORMAT, "serve: chat template %s is empty", path);
    else if ((st = tern_chat_template_create(b.p, b.len, out))) st = tern_fail_prefix(st, "serve: chat template %s: ", path);
    sbuf_free(&b);
    return st;
}

/* SHA-256 of the file at path. */
static tern_status file_digest(const char *path, uint8_t out[32])
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    struct sha256_ctx h;
    sha256_init(&h);
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&h, n, buf);
    const bool bad = ferror(f);
    fclose(f);
    if (bad) return tern_fail(TERN_ERR_IO, "reading %s failed", path);
    sha256_digest(&h, 32, out);
    return TERN_OK;
}

/* The tool-call and reasoning formats of f's template. */
static void flavor_formats(struct tern_server *s, struct srv_flavor *f)
{
    f->fmt = tern_toolcall_detect(tern_chat_template_source(f->tmpl));
    f->rfmt = tern_reasoning_detect(tern_chat_template_source(f->tmpl));
    f->n_preserve = tern_toolcall_preserved_tokens(s->tok, f->fmt, f->preserve, 4);
}

/* Flavor 0, the base (its template: --chat-template-file or the model's own), then one per
 * adapter, loaded against the model: its own template when it carries one (and no file was
 * given), else a copy of the base's. */
static tern_status load_flavors(struct tern_server *s, const struct tern_gguf *g)
{
    const struct tern_server_params *p = &s->p;
    if (p->n_lora < 0 || p->n_lora > 64)
        return tern_fail(TERN_ERR_ARG, "serve: %d adapters (at most 64)", p->n_lora);
    s->flv = calloc((size_t)p->n_lora + 1, sizeof *s->flv);
    if (!s->flv) return tern_fail(TERN_ERR_NOMEM, "serve: out of memory");
    s->n_flv = 1;
    struct srv_flavor *b = &s->flv[0];
    b->name = strdup(s->model_id);
    tern_status st = b->name ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "serve: out of memory");
    if (!st) st = p->chat_template_file ? template_from_file(p->chat_template_file, &b->tmpl)
                                        : tern_chat_template_from_gguf(g, &b->tmpl);
    if (st) return st;
    const char *w = tern_chat_template_warning(b->tmpl);
    if (w && !(p->n_lora && !p->chat_template_file)) fprintf(stderr, "tern serve: warning: %s\n", w);
    flavor_formats(s, b);
    for (int i = 0; i < p->n_lora; i++) {
        struct srv_flavor *f = &s->flv[s->n_flv];
        const char *name = p->lora_names && p->lora_names[i] ? p->lora_names[i] : p->lora_paths[i];
        for (int k = 0; k < s->n_flv; k++)
            if (!strcmp(s->flv[k].name, name))
                return tern_fail(TERN_ERR_ARG, "serve: --lora %s: the model name '%s' is taken (give "
                                 "NAME=FILE)", p->lora_paths[i], name);
        if (!(f->name = strdup(name))) return tern_fail(TERN_ERR_NOMEM, "serve: out of memory");
        s->n_flv++;
        f->scale = p->lora_scales ? p->lora_scales[i] : 1.0f;
        if ((st = tern_lora_load(s->model, p->lora_paths[i], &f->ad)))
            return tern_fail_prefix(st, "serve: --lora %s: ", p->lora_paths[i]);
        if ((st = file_digest(p->lora_paths[i], f->digest)))
            return tern_fail_prefix(st, "serve: --lora %s: ", p->lora_paths[i]);
        const char *own = p->chat_template_file ? NULL : tern_lora_chat_template(f->ad);
        if (own) st = tern_chat_template_create(own, strlen(own), &f->tmpl);
        else if (p->chat_template_file) st = template_from_file(p->chat_template_file, &f->tmpl);
        else st = tern_chat_template_from_gguf(g, &f->tmpl);
        if (st) return tern_fail_prefix(st, "serve: --lora %s: its chat template: ", p->lora_paths[i]);
        flavor_formats(s, f);
        if (!p->quiet)
            fprintf(stderr, "tern serve: adapter '%s' (%s, scale %g%s)\n", f->name,
                    p->lora_paths[i], f->scale, own ? ", its own chat template" : "");
    }
    if (p->default_model) {
        s->default_flv = -1;
        for (int i = 0; i < s->n_flv; i++)
            if (!strcmp(s->flv[i].name, p->default_model)) s->default_flv = i;
        if (s->default_flv < 0)
            return tern_fail(TERN_ERR_ARG, "serve: --default-model %s names neither the model (%s) nor "
                             "an adapter (--lora NAME=FILE)", p->default_model, s->model_id);
    }
    return TERN_OK;
}

tern_status tern_server_create(const struct tern_server_params *p, struct tern_server **out)
{
    if (!p || (!p->model_path && !p->model_data) || !out)
        return tern_fail(TERN_ERR_ARG, "serve: a model is required (a path, or a GGUF image in memory)");
    if (p->max_tokens_cap < 0 || p->request_timeout_ms < 0)
        return tern_fail(TERN_ERR_ARG, "serve: --max-tokens-cap %d / request timeout %d ms must not be negative",
                         p->max_tokens_cap, p->request_timeout_ms);
    if (p->n_parallel < 0 || p->n_parallel > 256 || p->n_ctx < 0 || p->max_queue < 0 ||
        p->port < 0 || p->port > 65535 || p->n_prefill < 0 || p->max_connections < 0 ||
        p->max_connections_per_ip < 0 || p->read_timeout < 0)
        return tern_fail(TERN_ERR_ARG, "serve: parameters out of range (parallel %d, ctx %d, "
                         "queue %d, port %d)", p->n_parallel, p->n_ctx, p->max_queue, p->port);
    if (p->draft && !p->draft[0])
        return tern_fail(TERN_ERR_ARG, "serve: --draft is empty (give 'ngram', 'self:TYPE' or a GGUF path)");
    if (p->draft_max < 0 || p->draft_max > 64)
        return tern_fail(TERN_ERR_ARG, "serve: --draft-max %d is outside 1..64", p->draft_max);
    if (p->draft_min < 0 || p->draft_min > 64)
        return tern_fail(TERN_ERR_ARG, "serve: --draft-min %d is outside 1..64", p->draft_min);
    if (p->n_api_keys < 0 || (p->n_api_keys > 0 && !p->api_keys))
        return tern_fail(TERN_ERR_ARG, "serve: %d API keys%s", p->n_api_keys, p->n_api_keys > 0 ? ", NULL array" : "");
    for (int i = 0; i < p->n_api_keys; i++)
        if (!p->api_keys[i] || !p->api_keys[i][0])
            return tern_fail(TERN_ERR_ARG, "serve: API key %d is empty", i + 1);
    if (p->n_cors_origins < 0 || (p->n_cors_origins > 0 && !p->cors_origins) || p->n_allowed_hosts < 0 ||
        (p->n_allowed_hosts > 0 && !p->allowed_hosts))
        return tern_fail(TERN_ERR_ARG, "serve: %d CORS origins, %d allowed hosts", p->n_cors_origins, p->n_allowed_hosts);
    for (int i = 0; i < p->n_cors_origins; i++)
        if (!p->cors_origins[i] || (strcmp(p->cors_origins[i], "*") && !strstr(p->cors_origins[i], "://")))
            return tern_fail(TERN_ERR_ARG, "serve: --cors '%s' is not an origin (give scheme://host[:port], "
                             "e.g. https://app.example, or '*')", p->cors_origins[i] ? p->cors_origins[i] : "");
    for (int i = 0; i < p->n_allowed_hosts; i++)
        if (!p->allowed_hosts[i] || !p->allowed_hosts[i][0] || strchr(p->allowed_hosts[i], '/'))
            return tern_fail(TERN_ERR_ARG, "serve: --allow-host '%s' is not a host name (give NAME or NAME:PORT)",
                             p->allowed_hosts[i] ? p->allowed_hosts[i] : "");
    const size_t max_body = p->max_body ? p->max_body : 8u << 20;
    if (p->max_body_total && p->max_body_total < max_body)
        return tern_fail(TERN_ERR_ARG, "serve: --max-body-total %zu is less than --max-body %zu: no body that "
                         "large could ever be read", p->max_body_total, max_body);
    if (!(p->draft_p_min >= 0.0f && p->draft_p_min <= 1.0f))
        return tern_fail(TERN_ERR_ARG, "serve: --draft-p-min %g is outside 0..1", (double)p->draft_p_min);
    struct tern_server *s = calloc(1, sizeof *s);
    if (!s) return tern_fail(TERN_ERR_NOMEM, "serve: out of memory");
    s->p = *p;
    s->p.api_keys = NULL; /* s->keys holds them all */
    s->p.api_key = NULL;
    s->keys = calloc((size_t)p->n_api_keys + 1, sizeof *s->keys);
    bool keys_ok = s->keys != NULL;
    if (keys_ok && p->api_key && p->api_key[0]) keys_ok = (s->keys[s->n_keys++] = strdup(p->api_key)) != NULL;
    for (int i = 0; keys_ok && i < p->n_api_keys; i++) keys_ok = (s->keys[s->n_keys++] = strdup(p->api_keys[i])) != NULL;
    if (!s->p.n_parallel) s->p.n_parallel = 4;
    if (!s->p.max_queue) s->p.max_queue = 64;
    if (!s->p.max_body) s->p.max_body = 8u << 20;
    if (!s->p.max_body_total) s->p.max_body_total = s->p.max_body > (64u << 20) ? s->p.max_body : 64u << 20;
    pthread_mutex_init(&s->body_mu, NULL);
    keys_ok = keys_ok && srv_gate_init(s);
    if (!s->p.max_connections) s->p.max_connections = 4096;
    if (!s->p.read_timeout) s->p.read_timeout = 30;
    s->quiesced_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->conns_mu, NULL);
    pthread_cond_init(&s->conns_cv, NULL);
    pthread_mutex_init(&s->tok_mu, NULL);
    srv_grammars_init(&s->grammars);
    pthread_cond_init(&s->wake, NULL);
    srv_metrics_init(&s->metrics);
    srv_store_init(&s->store);
    s->started = srv_unix_time();
    atomic_init(&s->seq, (uint64_t)time(NULL));
    s->queue = calloc((size_t)s->p.max_queue, sizeof *s->queue);
    s->active = calloc((size_t)s->p.n_parallel, sizeof *s->active);
    if (p->model_alias) {
        s->model_id = strdup(p->model_alias);
    } else if (p->model_path) {
        char *tmp = strdup(p->model_path);
        s->model_id = tmp ? strdup(basename(tmp)) : NULL;
        free(tmp);
    } else {
        s->model_id = strdup("tern-tool");
    }
    tern_status st = keys_ok && s->queue && s->active && s->model_id ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "serve: out of memory");
    /* The port first: a port in use fails before a model is read (seconds for a big one), and
     * while it loads /health answers 503 {"status": "loading"} (srv_http.c looks at ready) */
    if (!st) st = srv_http_start(s);
    const struct tern_model_params mp = {.no_repack = p->no_repack};
    if (!st) st = p->model_data ? tern_model_load_memory(p->model_data, p->model_size, &mp, &s->model)
                                : tern_model_load(p->model_path, &mp, &s->model);
    if (!st && !p->quiet && tern_model_get_info(s->model)->repacked_bytes)
        fprintf(stderr, "tern serve: %.1f MiB of weights repacked at load for the %s kernels (%.1f MiB "
                "of file rows released; --no-repack keeps them mmap-only)\n",
                tern_model_get_info(s->model)->repacked_bytes / 1048576.0, tern_kernels_name(),
                tern_model_get_info(s->model)->released_bytes / 1048576.0);
    const struct tern_gguf *g = s->model ? tern_model_gguf(s->model) : NULL;
    if (!st) st = tern_tokenizer_from_gguf(g, &s->tok);
    if (!st) st = tern_tokenizer_from_gguf(g, &s->tok_http);
    if (!st) st = load_flavors(s, g);
    if (!st) {
        /* constrained decoding needs the vocabulary as grammars see it; without it requests
         * still run, unconstrained (said once here) */
        if (tern_grammar_vocab_create(s->tok, &s->gvocab)) {
            fprintf(stderr, "tern serve: warning: no constrained decoding: %s\n", tern_last_error());
            s->gvocab = NULL;
        }
        struct tern_context_params cp = tern_context_default_params();
        cp.n_ctx = s->p.n_ctx;
        cp.n_threads = s->p.n_threads;
        cp.n_seq = s->p.n_parallel;
        cp.swa_full = s->p.swa_full;
        st = tern_context_create(s->model, &cp, &s->ctx);
    }
    if (!st) s->n_ctx = tern_context_n_ctx(s->ctx);
    if (!st && s->p.draft) {
        /* a drafter model gets a context of its own with a sequence per slot (the same tokenizer
         * is checked here, by fingerprint) */
        const double t0 = srv_now();
        struct tern_draft_params dp = tern_draft_default_params();
        dp.source = s->p.draft;
        dp.n_max = s->p.draft_max ? s->p.draft_max : 8;
        dp.n_min = 1;
        dp.n_ctx = s->n_ctx;
        dp.n_seq = s->p.n_parallel;
        dp.n_threads = s->p.n_threads;
        st = tern_draft_create(s->model, &dp, &s->draft);
        if (st) st = tern_fail_prefix(st, "serve: --draft: ");
        else if (!s->p.quiet && tern_draft_model(s->draft))
            fprintf(stderr, "tern serve: draft %s ready in %.0f ms (%s, %.1f MiB of weights read per pass%s, "
                    "%d sequences of %d positions)\n", s->p.draft, (srv_now() - t0) * 1e3, tern_draft_kind(s->draft),
                    tern_model_get_info(tern_draft_model(s->draft))->weight_bytes / 1048576.0,
                    tern_model_get_info(tern_draft_model(s->draft))->repacked_bytes ? ", converted in memory" : "",
                    dp.n_seq, s->n_ctx);
    }
    if (!st) {
        struct tern_batcher_params bp = tern_batcher_default_params();
        bp.n_prefill = s->p.n_prefill;
        if (s->draft) {
            bp.draft = s->draft;
            bp.n_draft = s->p.draft_max ? s->p.draft_max : 8;
            bp.draft_p_min = s->p.draft_p_min;
            bp.n_draft_min = s->p.draft_min;
        }
        st = tern_batcher_create(s->ctx, s->tok, &bp, &s->batcher);
    }
    /* A recurrent model (qwen35) keeps a slot's state only at the end of its history, so a prompt
     * that leaves it earlier would start from 0: an in-memory prompt cache (the default budget)
     * gives it the state at a block boundary; a cache directory keeps the states with the
     * blocks. */
    const bool recurrent = !st && tern_model_get_info(s->model)->n_layer_rec > 0;
    if (!st && (p->cache_bytes || p->prompt_cache_dir || recurrent)) {
        struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
        pp.budget_bytes = p->cache_bytes;
        pp.dir = p->prompt_cache_dir;
        st = tern_prefix_cache_create(s->model, &pp, &s->pc);
        if (st) {
            st = tern_fail_prefix(st, "serve: prompt cache: ");
        } else {
            tern_batcher_set_prefix_cache(s->batcher, s->pc);
            struct tern_prefix_cache_stats cs;
            tern_prefix_cache_get_stats(s->pc, &cs);
            s->metrics.pc = cs;
            s->metrics.has_pc = true;
            if (tern_prefix_cache_warning(s->pc))
                fprintf(stderr, "tern serve: prompt cache: warning: %s\n", tern_prefix_cache_warning(s->pc));
            if (!s->p.quiet)
                fprintf(stderr, "tern serve: prompt cache: %.0f MiB budget, %llu blocks (%llu tokens) loaded%s%s\n",
                        cs.budget_bytes / 1048576.0, (unsigned long long)cs.loaded_blocks,
                        (unsigned long long)cs.loaded_blocks * (unsigned long long)cs.block_tokens,
                        p->prompt_cache_dir ? " from " : "", p->prompt_cache_dir ? p->prompt_cache_dir : "");
        }
    }
    if (!st && !srv_engine_start(s)) st = tern_fail(TERN_ERR_NOMEM, "serve: cannot start the engine thread");
    if (!st) atomic_store(&s->ready, true);
    if (st) {
        tern_server_free(s);
        return st;
    }
    *out = s;
    return TERN_OK;
}

int tern_server_port(const struct tern_server *s) { return s->port; }

void tern_server_stop(struct tern_server *s) { atomic_store(&s->stop_requested, true); }

tern_status tern_server_run(struct tern_server *s)
{
    /* a signal handler can only set a flag: look at it a few times a second */
    const struct timespec tick = {0, 100 * 1000000L};
    while (!atomic_load(&s->stop_requested)) nanosleep(&tick, NULL);
    atomic_store(&s->draining, true);
    srv_http_quiesce(s);
    pthread_mutex_lock(&s->mu);
    int waiting = s->q_len + s->n_active;
    pthread_mutex_unlock(&s->mu);
    if (!s->p.quiet && waiting)
        fprintf(stderr, "tern serve: stopping: finishing %d request%s\n", waiting, waiting == 1 ? "" : "s");
    srv_engine_drain(s);
    tern_status st = TERN_OK;
    if (s->pc && s->p.prompt_cache_dir) {
        /* the engine has stopped: the cache is this thread's now */
        struct tern_prefix_cache_stats a, b;
        tern_prefix_cache_get_stats(s->pc, &a);
        st = tern_prefix_cache_save(s->pc);
        tern_prefix_cache_get_stats(s->pc, &b);
        if (st) fprintf(stderr, "tern serve: saving the prompt cache to %s failed: %s\n", s->p.prompt_cache_dir, tern_last_error());
        else if (!s->p.quiet)
            fprintf(stderr, "tern serve: prompt cache: %llu new blocks saved to %s (%llu held, %llu tokens restored "
                    "from it in %llu of %llu lookups)\n", (unsigned long long)(b.saved_blocks - a.saved_blocks),
                    s->p.prompt_cache_dir, (unsigned long long)b.n_blocks, (unsigned long long)b.hit_tokens,
                    (unsigned long long)b.hits, (unsigned long long)b.lookups);
    }
    /* every job is done; let the connections send their last bytes (bounded: 30 s) */
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&s->mu);
        const int open = s->http_jobs;
        pthread_mutex_unlock(&s->mu);
        if (open == 0) break;
        nanosleep(&tick, NULL);
    }
    srv_http_stop(s);
    return st;
}
