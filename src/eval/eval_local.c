/* eval_local.c — the local runner of `tern eval`: each case answered by a model loaded here,
 * greedily (temperature 0), exactly as `tern chat` would answer it: the model's chat template
 * renders the request, its tokenizer encodes it, tern_generate decodes, and the chat room's
 * tool-call parser separates content from calls as the text streams.
 *
 * One generator serves every case, so a case that shares its beginning with the previous one
 * (the same system prompt and tools) decodes only what differs. TTFA is measured from the start
 * of the case (render, tokenize, prefill included) to the generated piece that completes the
 * first valid call, in tokens generated and milliseconds. With `constrained`, a case's tools
 * become a lazy tool-call grammar (tool_choice auto, the template's call format): free text
 * stays free, and once the model opens a call the call is a tool's name and arguments valid
 * for its parameters. Consecutive cases with the same tools share one compiled grammar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval/eval.h"
#include "util/error.h"
#include "util/clock.h"

struct tern_eval_local_params tern_eval_local_default_params(void)
{
    struct tern_eval_local_params p = {.n_ctx = 0, .n_threads = 0, .max_tokens = 512,
                                       .constrained = false};
    return p;
}

#define EVAL_MAX_LORA 8

struct local {
    struct tern_model *model;
    struct tern_tokenizer *tok;
    struct tern_chat_template *tmpl;
    struct tern_context *ctx;
    struct tern_sampler *smp;
    struct tern_generator *gen;
    enum tern_toolcall_format fmt;
    int32_t *ids;
    size_t cap_ids;
    struct tern_grammar_vocab *gv;  /* constrained: the vocabulary's grammar view */
    struct tern_grammar *grammar;   /* the last case's tools grammar */
    char *grammar_tools;            /* ... and the tools text it was compiled from */
    struct tern_lora *lora[EVAL_MAX_LORA];
    int n_lora;
};

struct case_run {
    struct tern_toolcall_parser *tp;
    double t0;
    int n_tokens;
    int ttfa_tokens;
    double ttfa_ms;
    tern_status feed_status;
};

static int on_token(int32_t id, void *user)
{
    (void)id;
    ((struct case_run *)user)->n_tokens++;
    return 0;
}

static int on_piece(const char *text, size_t len, void *user)
{
    struct case_run *c = user;
    int done = 0;
    if ((c->feed_status = tern_toolcall_feed(c->tp, text, len, &done))) return 1;
    if (c->ttfa_tokens < 0 && tern_toolcall_count(c->tp) > 0) {
        c->ttfa_tokens = c->n_tokens;
        c->ttfa_ms = util_now_ms() - c->t0;
    }
    return 0;
}

static void local_free(struct local *l)
{
    tern_grammar_free(l->grammar);
    free(l->grammar_tools);
    tern_grammar_vocab_free(l->gv);
    tern_generator_free(l->gen);
    tern_sampler_free(l->smp);
    tern_context_free(l->ctx);
    for (int i = 0; i < l->n_lora; i++) tern_lora_free(l->lora[i]);
    tern_chat_template_free(l->tmpl);
    tern_tokenizer_free(l->tok);
    tern_model_free(l->model);
    free(l->ids);
}

/* Control tokens only from the template's markup: a case's content is text (tern_chat_tokenize). */
static tern_status tokenize_prompt(struct local *l, const char *prompt, size_t plen,
                                   const struct tern_text_span *spans, size_t n_spans, size_t *n)
{
    return tern_chat_tokenize(l->tok, prompt, plen, spans, n_spans, &l->ids, &l->cap_ids, n);
}

/* Answer case i into r; a failure of this case alone (a render error, a prompt over the
 * context) is recorded as the case's error, anything else is returned. */
static tern_status answer(struct local *l, struct tern_eval_run *r, int i,
                          const struct tern_eval_local_params *p)
{
    const struct eval_case *cs = &r->set->cases[i];
    struct tern_eval_answer a = {.ttfa_tokens = -1};
    struct case_run c = {.t0 = util_now_ms(), .ttfa_tokens = -1};
    char err[512] = "";
    char *prompt = NULL;
    size_t plen = 0, n = 0;
    struct tern_chat_params cp = tern_chat_default_params();
    cp.messages_json = cs->request_json;
    struct tern_text_span *spans = NULL;
    size_t n_spans = 0;
    tern_status st = tern_chat_render_spans(l->tmpl, &cp, &prompt, &plen, &spans, &n_spans);
    if (st) {
        snprintf(err, sizeof err, "render: %s", tern_last_error());
        st = TERN_OK;
        goto record;
    }
    st = tokenize_prompt(l, prompt, plen, spans, n_spans, &n);
    free(spans);
    if (st) goto out;
    if (n + 1 > (size_t)tern_context_n_ctx(l->ctx)) {
        snprintf(err, sizeof err, "the prompt is %zu tokens; the context holds %d", n,
                 tern_context_n_ctx(l->ctx));
        goto record;
    }
    if ((st = tern_toolcall_parser_create(l->fmt, &c.tp))) goto out;
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = p->max_tokens;
    gp.on_token = on_token;
    int32_t keep[4]; /* the format's control-token markup is shown to the parser (preserved) */
    if (cs->tools_json) {
        gp.n_preserve = tern_toolcall_preserved_tokens(l->tok, l->fmt, keep, 4);
        gp.preserve = keep;
    }
    if (p->constrained && cs->tools_json && cs->tools && cs->tools->child) {
        if (!l->grammar_tools || strcmp(l->grammar_tools, cs->tools_json)) {
            tern_grammar_free(l->grammar);
            free(l->grammar_tools);
            l->grammar = NULL;
            l->grammar_tools = NULL;
            struct tern_tool_grammar_params tg = tern_tool_grammar_default_params();
            tg.format = (int)l->fmt;
            tg.choice = TERN_TOOL_CHOICE_AUTO;
            tg.schema.lenient = true;
            if (tern_grammar_from_tools(l->gv, cs->tools_json, strlen(cs->tools_json), &tg, &l->grammar)) {
                snprintf(err, sizeof err, "tools grammar: %s", tern_last_error());
                goto record;
            }
            if (!(l->grammar_tools = strdup(cs->tools_json))) {
                st = tern_fail(TERN_ERR_NOMEM, "eval: out of memory");
                goto out;
            }
        }
        gp.grammar = l->grammar;
    }
    struct tern_gen_stats gs;
    st = tern_generate(l->gen, l->smp, l->ids, (int)n, &gp, on_piece, &c, &gs);
    if (!st && c.feed_status) st = c.feed_status;
    if (!st) st = tern_toolcall_finish(c.tp, NULL);
    if (!st && c.ttfa_tokens < 0 && tern_toolcall_count(c.tp) > 0) { /* completed at the end */
        c.ttfa_tokens = c.n_tokens;
        c.ttfa_ms = util_now_ms() - c.t0;
    }
    if (st) goto out;
    size_t clen;
    a.content = tern_toolcall_text(c.tp, &clen);
    a.n_calls = tern_toolcall_count(c.tp);
    struct tern_eval_call_in calls[64];
    if (a.n_calls > 64) a.n_calls = 64;
    for (int k = 0; k < a.n_calls; k++) {
        const struct tern_toolcall *tc = tern_toolcall_get(c.tp, k);
        calls[k].name = tc->name;
        calls[k].arguments = tc->arguments;
    }
    a.calls = calls;
    a.n_malformed = tern_toolcall_n_errors(c.tp);
    a.n_tokens = c.n_tokens;
    a.n_prompt = (int)n;
    a.ttfa_tokens = c.ttfa_tokens;
    a.ttfa_ms = c.ttfa_ms;
record:
    a.ms = util_now_ms() - c.t0;
    if (err[0]) a.error = err;
    st = tern_eval_record(r, i, &a);
out:
    tern_toolcall_parser_free(c.tp);
    free(prompt);
    return st;
}

tern_status tern_eval_local(struct tern_eval_run *r, const char *model_path,
                            const struct tern_eval_local_params *p, const int *which, int n_which,
                            tern_eval_progress_fn progress, void *user)
{
    struct local l = {0};
    struct tern_model_params mp = {.prefault = true};
    tern_status st = tern_model_load(model_path, &mp, &l.model);
    if (!st) st = tern_tokenizer_from_gguf(tern_model_gguf(l.model), &l.tok);
    if (p->n_lora < 0 || p->n_lora > EVAL_MAX_LORA)
        st = tern_fail(TERN_ERR_ARG, "eval: %d adapters (at most %d)", p->n_lora, EVAL_MAX_LORA);
    const char *lora_tmpl = NULL;
    for (int i = 0; !st && i < p->n_lora; i++) {
        st = tern_lora_load(l.model, p->lora_paths[i], &l.lora[i]);
        if (!st) l.n_lora++;
        if (!st && !lora_tmpl) lora_tmpl = tern_lora_chat_template(l.lora[i]);
    }
    if (!st)
        st = lora_tmpl ? tern_chat_template_create(lora_tmpl, strlen(lora_tmpl), &l.tmpl)
                       : tern_chat_template_from_gguf(tern_model_gguf(l.model), &l.tmpl);
    if (!st) {
        struct tern_context_params cp = tern_context_default_params();
        cp.n_ctx = p->n_ctx;
        cp.n_threads = p->n_threads;
        st = tern_context_create(l.model, &cp, &l.ctx);
    }
    if (!st && l.n_lora) st = tern_context_set_adapters(l.ctx, l.lora, p->lora_scales, l.n_lora);
    if (!st) {
        struct tern_sampler_params sp = tern_sampler_default_params(); /* greedy */
        st = tern_sampler_create(&sp, tern_model_n_vocab(l.model), &l.smp);
    }
    if (!st) st = tern_generator_create(l.ctx, l.tok, &l.gen);
    if (!st) l.fmt = tern_toolcall_detect(tern_chat_template_source(l.tmpl));
    if (!st && p->constrained) st = tern_grammar_vocab_create(l.tok, &l.gv);
    for (int k = 0; !st && k < n_which; k++) {
        const int i = which ? which[k] : k;
        st = answer(&l, r, i, p);
        if (!st && progress) progress(k + 1, n_which, user);
    }
    local_free(&l);
    return st;
}
