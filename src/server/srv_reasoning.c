/* srv_reasoning.c — a chat request's reasoning budget: `reasoning_effort` (OpenAI's field) or
 * `thinking_budget_tokens` (llama.cpp's and ik_llama.cpp's field), and the reasoning control the
 * generation then gets (include/tern.h struct tern_reasoning_ctl).
 *
 * Read docs/mcp-and-reasoning.md for the behaviour a client sees. Only templates with <think>
 * markup (tern_reasoning_detect: TERN_REASONING_THINK) get the control; for the others both
 * fields are accepted and have nothing to act on. The control is taken when the request has a
 * budget or tools (their calls must start after the thinking; a response_format or grammar
 * then waits for its end too) and the prompt has not closed the thinking already (Qwen3 with enable_thinking false ends it
 * with "<think>\n\n</think>\n\n"). A prompt that does not open the thinking itself (Qwen3's
 * generation prompt is only "<|im_start|>assistant\n": the model writes "<think>\n" first) is
 * given the "<think>\n" the model would write, so the reply starts inside it and the budget
 * counts from its first token. */
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define THINK_OPEN "<think>\n"
#define THINK_END "</think>"
#define THINK_CLOSE "\n</think>\n\n" /* what the model writes at the end of its thinking */

/* reasoning_effort's budgets in tokens: a level that has to think less is closed sooner. */
static const struct {
    const char *name;
    int budget;
} EFFORT[] = {{"none", 0}, {"minimal", 0}, {"low", 256}, {"medium", 1024}, {"high", 4096}};

/* The budget the body asks for: -1 none. false + *e on a bad value. */
static bool budget_field(const cJSON *b, int *budget, struct srv_err *e)
{
    *budget = -1;
    const cJSON *eff = cJSON_GetObjectItemCaseSensitive(b, "reasoning_effort");
    const cJSON *tb = cJSON_GetObjectItemCaseSensitive(b, "thinking_budget_tokens");
    if (cJSON_IsNull(eff)) eff = NULL;
    if (cJSON_IsNull(tb)) tb = NULL;
    if (eff && tb) {
        srv_err_set(e, 400, "invalid_request_error", "thinking_budget_tokens", NULL,
                    "give 'reasoning_effort' or 'thinking_budget_tokens', not both");
        return false;
    }
    if (tb) {
        if (!cJSON_IsNumber(tb) || tb->valuedouble != (double)(long long)tb->valuedouble || tb->valuedouble < -1 ||
            tb->valuedouble > (1 << 30)) {
            srv_err_set(e, 400, "invalid_request_error", "thinking_budget_tokens", NULL,
                        "'thinking_budget_tokens' must be an integer from -1 (no limit) to %d", 1 << 30);
            return false;
        }
        *budget = (int)tb->valuedouble;
        return true;
    }
    if (!eff) return true;
    for (size_t i = 0; cJSON_IsString(eff) && i < sizeof EFFORT / sizeof *EFFORT; i++)
        if (!strcmp(eff->valuestring, EFFORT[i].name)) {
            *budget = EFFORT[i].budget;
            return true;
        }
    srv_err_set(e, 400, "invalid_request_error", "reasoning_effort", NULL,
                "'reasoning_effort' must be one of \"none\", \"minimal\", \"low\", \"medium\", \"high\"%s%s%s",
                cJSON_IsString(eff) ? ", got \"" : "", cJSON_IsString(eff) ? eff->valuestring : "",
                cJSON_IsString(eff) ? "\"" : "");
    return false;
}

/* Does the prompt end with the thinking closed ("</think>" and whitespace)? */
static bool ends_closed(const char *p, size_t n)
{
    while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == ' ' || p[n - 1] == '\r' || p[n - 1] == '\t')) n--;
    const size_t k = strlen(THINK_END);
    return n >= k && !memcmp(p + n - k, THINK_END, k);
}

bool srv_reasoning_prepare(struct tern_server *s, struct srv_req *r, char **prompt, size_t *plen,
                           struct tern_text_span **spans, size_t *n_spans, struct srv_err *e)
{
    int budget;
    if (!budget_field(r->body, &budget, e)) return false;
    r->reasoning_ctl = false;
    r->reasoning_budget = budget;
    if (s->flv[r->flavor].rfmt != TERN_REASONING_THINK) return true;
    /* tool calls must come after the thinking (a call inside it is no call); response_format
     * and grammar constrain the whole reply as before unless a budget is given */
    if (budget < 0 && !r->tools) return true; /* the parser alone separates the thinking */
    if (!r->reasoning_open && ends_closed(*prompt, *plen)) return true;
    if (!r->reasoning_open) {
        /* open it as the model would: "<think>" is template markup (a span), so it is the
         * vocabulary's control token where there is one */
        const size_t k = strlen(THINK_OPEN);
        char *np = realloc(*prompt, *plen + k + 1);
        if (!np) {
            srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory opening the reasoning");
            return false;
        }
        memcpy(np + *plen, THINK_OPEN, k + 1);
        struct tern_text_span *ns = realloc(*spans, (*n_spans + 1) * sizeof *ns);
        if (!ns) {
            *prompt = np;
            srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory opening the reasoning");
            return false;
        }
        ns[(*n_spans)++] = (struct tern_text_span){*plen, strlen("<think>")};
        *prompt = np;
        *spans = ns;
        *plen += k;
        r->reasoning_open = true;
    }
    size_t n = 0;
    pthread_mutex_lock(&s->tok_mu);
    tern_status st = tern_tokenize(s->tok_http, THINK_CLOSE, strlen(THINK_CLOSE), TERN_TOK_PARSE_SPECIAL,
                                   r->reasoning_close, sizeof r->reasoning_close / sizeof *r->reasoning_close, &n);
    pthread_mutex_unlock(&s->tok_mu);
    if (st) {
        srv_err_set(e, 500, "server_error", NULL, NULL, "tokenizing the reasoning's close: %s", tern_last_error());
        return false;
    }
    r->n_reasoning_close = (int)n;
    r->reasoning_ctl = true;
    return true;
}

struct tern_reasoning_ctl srv_reasoning_ctl(const struct srv_req *r)
{
    if (!r->reasoning_ctl) return (struct tern_reasoning_ctl){.budget = -1};
    return (struct tern_reasoning_ctl){.open = true, .end = THINK_END, .budget = r->reasoning_budget,
                                       .close = r->reasoning_close, .n_close = r->n_reasoning_close};
}
