/* srv_metrics.c — the counters behind GET /metrics, printed in Prometheus' text format
 * (version 0.0.4): requests by endpoint and status, TTFT / inter-token / queue-wait
 * histograms, token counters (prompt, prefix-reused, generated), forward passes, grammar mask
 * time, queue depth and active sequences. Everything is updated under metrics.mu by the
 * connection threads (requests) and the engine (tokens, steps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const double BUCKETS[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                 0.25,  0.5,    1,     2.5,  5,     10,  30};
/* the statuses counted on their own; others fall into 200, 400 or 500 by class */
static const int STATUSES[SRV_STATUSES] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 414,
                                           415, 431, 500, 501, 503, 505};
static const char *const ENDPOINTS[SRV_ENDPOINTS] = {"/v1/chat/completions", "/v1/completions", "/v1/models",
                                                     "/v1/responses", "/v1/messages", "other"};

void srv_metrics_init(struct srv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->tps_window_start = srv_now();
}

void srv_metrics_free(struct srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

void srv_hist_add(struct srv_hist *h, double seconds)
{
    int i = 0;
    while (i < SRV_HIST_BUCKETS && seconds > BUCKETS[i]) i++;
    h->count[i]++;
    h->sum += seconds;
    h->n++;
}

void srv_metrics_request(struct srv_metrics *m, int endpoint, int status)
{
    int k = 0;
    while (k < SRV_STATUSES - 1 && STATUSES[k] != status) k++;
    if (STATUSES[k] != status) k = status >= 500 ? 12 : status >= 400 ? 2 : 0; /* 500, 400, 200 */
    pthread_mutex_lock(&m->mu);
    m->requests[endpoint < 0 || endpoint >= SRV_ENDPOINTS ? SRV_ENDPOINTS - 1 : endpoint][k]++;
    pthread_mutex_unlock(&m->mu);
}

static void hist(struct sbuf *b, const char *name, const char *help, const struct srv_hist *h)
{
    char line[256];
    snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    sbuf_adds(b, line);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->count[i];
        snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, BUCKETS[i], (unsigned long long)cum);
        sbuf_adds(b, line);
    }
    cum += h->count[SRV_HIST_BUCKETS];
    snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
             (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->n);
    sbuf_adds(b, line);
}

static void scalar(struct sbuf *b, const char *name, const char *type, const char *help, double v)
{
    char line[320];
    snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
    sbuf_adds(b, line);
}

char *srv_metrics_text(struct tern_server *s)
{
    pthread_mutex_lock(&s->mu);
    const int q = s->q_len, active = s->n_active;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->grammars.mu);
    const uint64_t g_hits = s->grammars.hits, g_misses = s->grammars.misses;
    pthread_mutex_unlock(&s->grammars.mu);
    struct srv_metrics *m = &s->metrics;
    struct sbuf b = {0};
    char line[256];
    pthread_mutex_lock(&m->mu);
    sbuf_adds(&b, "# HELP tern_requests_total HTTP requests answered, by endpoint and status.\n"
                  "# TYPE tern_requests_total counter\n");
    for (int e = 0; e < SRV_ENDPOINTS; e++)
        for (int k = 0; k < SRV_STATUSES; k++) {
            snprintf(line, sizeof line, "tern_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                     ENDPOINTS[e], STATUSES[k], (unsigned long long)m->requests[e][k]);
            sbuf_adds(&b, line);
        }
    hist(&b, "tern_time_to_first_token_seconds", "From a request's arrival to its first sampled token.", &m->ttft);
    hist(&b, "tern_inter_token_seconds", "Between consecutive sampled tokens of one request.", &m->itl);
    hist(&b, "tern_queue_wait_seconds", "From a request's arrival to its admission into a slot.", &m->queue_wait);
    scalar(&b, "tern_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", (double)m->prompt_tokens);
    scalar(&b, "tern_prefix_cache_hit_tokens_total", "counter",
           "Prompt tokens whose KV was reused instead of computed (usage.prompt_tokens_details.cached_tokens).",
           (double)m->cached_tokens);
    scalar(&b, "tern_generated_tokens_total", "counter", "Tokens sampled for finished requests.", (double)m->generated_tokens);
    scalar(&b, "tern_forward_passes_total", "counter", "Batched forward passes (engine steps).", (double)m->steps);
    scalar(&b, "tern_forward_tokens_total", "counter", "Tokens over all forward passes (prompt + generated).", (double)m->step_tokens);
    scalar(&b, "tern_forward_seconds_total", "counter", "Wall time in forward passes.", m->forward_s);
    scalar(&b, "tern_draft_tokens_total", "counter", "Drafted tokens checked in the target's passes (--draft).", (double)m->drafted);
    scalar(&b, "tern_draft_accepted_tokens_total", "counter", "Drafted tokens kept.", (double)m->accepted);
    scalar(&b, "tern_draft_passes_total", "counter", "Drafter model passes (drafts, catch-up, its prompt prefill).", (double)m->draft_passes);
    scalar(&b, "tern_draft_pass_tokens_total", "counter", "Tokens over the drafter model's passes.", (double)m->draft_tokens);
    scalar(&b, "tern_draft_seconds_total", "counter", "Wall time in the drafter model's passes.", m->draft_s);
    scalar(&b, "tern_draft_on_steps_total", "counter", "Steps the draft controller drafted in.", (double)m->draft_on_steps);
    scalar(&b, "tern_draft_held_steps_total", "counter",
           "Steps requests could have drafted in but the draft controller held off (drafting did not pay).",
           (double)m->draft_held_steps);
    scalar(&b, "tern_draft_off_periods_total", "counter", "Times the draft controller switched drafting off.",
           (double)m->draft_off_periods);
    scalar(&b, "tern_grammar_mask_seconds_total", "counter", "CPU time (engine thread) computing and applying grammar token masks.", m->mask_s);
    scalar(&b, "tern_grammar_cache_hits_total", "counter",
           "Requests whose tools / response_format grammar was already compiled (shared, warm).", (double)g_hits);
    scalar(&b, "tern_grammar_cache_misses_total", "counter", "Tools / response_format grammars compiled.",
           (double)g_misses);
    scalar(&b, "tern_generation_tokens_per_second", "gauge",
           "Generated tokens per second over all sequences, last ~5 s window.", m->tps_last);
    scalar(&b, "tern_requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.", (double)m->rejected_full);
    scalar(&b, "tern_requests_cancelled_total", "counter", "Running requests ended because their client disconnected.", (double)m->cancelled);
    if (m->has_pc) {
        const struct tern_prefix_cache_stats *c = &m->pc;
        scalar(&b, "tern_prompt_cache_lookups_total", "counter", "Prompts looked up in the prompt cache (--cache-mb).", (double)c->lookups);
        scalar(&b, "tern_prompt_cache_hits_total", "counter", "Prompts restored (partly) from the prompt cache.", (double)c->hits);
        scalar(&b, "tern_prompt_cache_restored_tokens_total", "counter", "Prompt tokens restored from the prompt cache.", (double)c->hit_tokens);
        scalar(&b, "tern_prompt_cache_bytes", "gauge", "KV bytes the prompt cache holds.", (double)c->bytes);
        scalar(&b, "tern_prompt_cache_budget_bytes", "gauge", "The prompt cache's budget.", (double)c->budget_bytes);
        scalar(&b, "tern_prompt_cache_evicted_blocks_total", "counter", "Blocks evicted (least recently used).", (double)c->evicted_blocks);
    }
    pthread_mutex_unlock(&m->mu);
    scalar(&b, "tern_queue_depth", "gauge", "Requests waiting for a slot.", q);
    scalar(&b, "tern_active_sequences", "gauge", "Requests holding a slot (prefilling or generating).", active);
    scalar(&b, "tern_slots", "gauge", "Sequences decoded together at most (--parallel).", s->p.n_parallel);
    pthread_mutex_lock(&s->conns_mu);
    const int conns = s->n_conns;
    const uint64_t timed_out = s->n_timed_out;
    pthread_mutex_unlock(&s->conns_mu);
    scalar(&b, "tern_connections_open", "gauge", "Open HTTP connections (--max-connections).", conns);
    scalar(&b, "tern_connections_timed_out_total", "counter",
           "Connections closed because a request's headers and body took longer than --read-timeout.",
           (double)timed_out);
    pthread_mutex_lock(&s->body_mu);
    const double body = (double)s->body_bytes, body_peak = (double)s->body_bytes_peak, refused = (double)s->body_refused;
    pthread_mutex_unlock(&s->body_mu);
    scalar(&b, "tern_request_body_bytes", "gauge",
           "Request body bytes held now (announced, buffered or parsed), at most --max-body-total.", body);
    scalar(&b, "tern_request_body_bytes_peak", "gauge", "The most request body bytes held at once.", body_peak);
    scalar(&b, "tern_request_body_budget_bytes", "gauge", "--max-body-total.", (double)s->p.max_body_total);
    scalar(&b, "tern_requests_refused_body_budget_total", "counter",
           "Requests refused with 503 because their body would pass --max-body-total.", refused);
    return b.p;
}
