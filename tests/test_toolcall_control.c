/* test_toolcall_control.c — tool-call markup that is a control token (llama-server's "preserved
 * tokens"): Mistral's [TOOL_CALLS] in tekken vocabularies, Llama 3.1's <|python_tag|>,
 * Granite's <|tool_call|>, a Hermes model's <tool_call> / </tool_call>.
 *
 * The model (ctl_model.h) has those as GGUF control tokens (type 3); the references are the
 * texts written into that vocabulary and the call shapes the formats define, never tern's own
 * output. Checked:
 *   tokenizer   tern_token_control_id is the single id tern_tokenize(PARSE_SPECIAL) gives, and
 *               -1 for text that is not exactly one control token; a detokenizer shows exactly
 *               the preserved control tokens (their GGUF text), others stay empty; bad sets are
 *               refused without changing the set;
 *   chat        tern_toolcall_preserved_tokens per format (the vocabulary's ids of its markup);
 *   grammar     Mistral auto arms on the control token (and not on the text spelled out), none
 *               forbids it, required / named force it as the first token and refuse the
 *               spelling; the grammar lists it (control_tokens, trigger_token); Llama 3 auto
 *               arms on <|python_tag|>; Hermes with control tags forces both; a vocabulary
 *               without the token keeps the text opener; random documents show the token's text;
 *   generate    a scripted reply (a test hook puts [TOOL_CALLS] first, then the auto grammar
 *               constrains the call) parses as an OpenAI call, and only while the token is
 *               preserved (hidden otherwise, as llama.cpp does without tools); tool_choice
 *               required through tern_generate and the batcher give the same tokens and text,
 *               [TOOL_CALLS] first, and a Mistral call of a declared tool. */
#include "test_support.h"
#include "ctl_model.h"
#include "gen/gen_hook.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char vocab_path[4200], model_path[4200];
static struct tern_tokenizer *tok;
static struct tern_grammar_vocab *gv;

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}}, \"required\": [\"city\"]}}}, "
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"zone\": {\"enum\": [\"utc\", \"cet\"]}}, \"required\": [\"zone\"]}}}]";

static int setup(void **state)
{
    (void)state;
    snprintf(vocab_path, sizeof vocab_path, "%s/ctl-vocab.gguf", test_tmpdir());
    snprintf(model_path, sizeof model_path, "%s/ctl-tiny-q4_0.gguf", test_tmpdir());
    ctl_model_write(vocab_path, model_path, NULL);
    assert_tern_ok(tern_tokenizer_load(model_path, &tok));
    assert_tern_ok(tern_grammar_vocab_create(tok, &gv));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tern_grammar_vocab_free(gv);
    tern_tokenizer_free(tok);
    return 0;
}

/* ids of plain text (no special tokens parsed) appended to ids[*n] */
static void add_text(const char *s, int32_t *ids, size_t *n, size_t cap)
{
    size_t k;
    assert_tern_ok(tern_tokenize(tok, s, strlen(s), 0, ids + *n, cap - *n, &k));
    *n += k;
}

/* ---------------------------------------------------------------- tokenizer */

static void test_control_id(void **state)
{
    (void)state;
    for (int i = 0; i < 8; i++) {
        const char *t = ctl_texts[i];
        int32_t ids[8];
        size_t n;
        assert_tern_ok(tern_tokenize(tok, t, strlen(t), TERN_TOK_PARSE_SPECIAL, ids, 8, &n));
        assert_int_equal(n, 1);
        assert_int_equal(ids[0], 256 + i);
        assert_int_equal(tern_token_control_id(tok, t, strlen(t)), 256 + i);
    }
    /* more than the token, less, a text token, nothing */
    assert_int_equal(tern_token_control_id(tok, "[TOOL_CALLS][", 13), -1);
    assert_int_equal(tern_token_control_id(tok, "[TOOL_CALLS", 11), -1);
    assert_int_equal(tern_token_control_id(tok, "a", 1), -1);
    assert_int_equal(tern_token_control_id(tok, "", 0), -1);
}

/* Push ids through a detokenizer; the concatenated text into out. */
static void detok_all(struct tern_detokenizer *d, const int32_t *ids, size_t n, char *out, size_t cap)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s;
        size_t sn;
        assert_tern_ok(tern_detokenizer_push(d, ids[i], &s, &sn));
        assert_true(m + sn < cap);
        memcpy(out + m, s, sn);
        m += sn;
    }
    const char *s;
    size_t sn;
    assert_tern_ok(tern_detokenizer_flush(d, &s, &sn));
    memcpy(out + m, s, sn);
    out[m + sn] = 0;
}

static void test_detokenizer_preserve(void **state)
{
    (void)state;
    static const char BODY[] = "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"utc\"}}]";
    int32_t ids[256];
    size_t n = 0;
    ids[n++] = CTL_TOOL_CALLS;
    add_text(BODY, ids, &n, 256);
    ids[n++] = CTL_PYTHON_TAG;
    add_text("x", ids, &n, 256);
    struct tern_detokenizer *d;
    assert_tern_ok(tern_detokenizer_create(tok, 0, &d));
    char out[512], want[512];
    detok_all(d, ids, n, out, sizeof out); /* as llama.cpp without tools: control text hidden */
    snprintf(want, sizeof want, "%sx", BODY);
    assert_string_equal(out, want);

    const int32_t keep[1] = {CTL_TOOL_CALLS};
    assert_tern_ok(tern_detokenizer_preserve(d, keep, 1));
    detok_all(d, ids, n, out, sizeof out);
    snprintf(want, sizeof want, "[TOOL_CALLS]%sx", BODY);
    assert_string_equal(out, want);
    tern_detokenizer_reset(d); /* keeps the set */
    detok_all(d, ids, n, out, sizeof out);
    assert_string_equal(out, want);

    const int32_t both[2] = {CTL_PYTHON_TAG, CTL_TOOL_CALLS};
    assert_tern_ok(tern_detokenizer_preserve(d, both, 2));
    detok_all(d, ids, n, out, sizeof out);
    snprintf(want, sizeof want, "[TOOL_CALLS]%s<|python_tag|>x", BODY);
    assert_string_equal(out, want);

    /* refused sets leave the set as it was */
    const int32_t bad[1] = {CTL_N_VOCAB};
    assert_int_equal(tern_detokenizer_preserve(d, bad, 1), TERN_ERR_ARG);
    int32_t many[TERN_MAX_PRESERVED + 1];
    for (int i = 0; i <= TERN_MAX_PRESERVED; i++) many[i] = 300 + i;
    assert_int_equal(tern_detokenizer_preserve(d, many, TERN_MAX_PRESERVED + 1), TERN_ERR_RANGE);
    detok_all(d, ids, n, out, sizeof out);
    assert_string_equal(out, want);
    assert_tern_ok(tern_detokenizer_preserve(d, NULL, 0));
    detok_all(d, ids, n, out, sizeof out);
    snprintf(want, sizeof want, "%sx", BODY);
    assert_string_equal(out, want);
    tern_detokenizer_free(d);

    /* tern_token_to_piece: the flag per id is the same rule */
    char p[32];
    size_t pn;
    assert_tern_ok(tern_token_to_piece(tok, CTL_TOOL_CALLS, 0, p, sizeof p, &pn));
    assert_int_equal(pn, 0);
    assert_tern_ok(tern_token_to_piece(tok, CTL_TOOL_CALLS, TERN_PIECE_SPECIAL, p, sizeof p, &pn));
    assert_int_equal(pn, 12);
    assert_memory_equal(p, "[TOOL_CALLS]", 12);
}

/* ---------------------------------------------------------------- chat */

static void test_preserved_per_format(void **state)
{
    (void)state;
    int32_t ids[4];
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_MISTRAL, ids, 4), 1);
    assert_int_equal(ids[0], CTL_TOOL_CALLS);
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_LLAMA3, ids, 4), 1);
    assert_int_equal(ids[0], CTL_PYTHON_TAG);
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_GRANITE, ids, 4), 1);
    assert_int_equal(ids[0], CTL_GRANITE);
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_HERMES, ids, 4), 2);
    assert_int_equal(ids[0], CTL_HERMES_OPEN);
    assert_int_equal(ids[1], CTL_HERMES_CLOSE);
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_QWEN_XML, ids, 1), 2); /* count, cap 1 */
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_GEMMA4, ids, 4), 0);  /* not in this vocabulary */
    assert_int_equal(tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_NONE, ids, 4), 0);
}

/* ---------------------------------------------------------------- grammar */

static struct tern_grammar *tools_grammar(int fmt, const char *choice)
{
    struct tern_tool_grammar_params p = tern_tool_grammar_default_params();
    p.format = fmt;
    p.schema.strict_properties = true; /* declared parameters only (as tern serve) */
    assert_tern_ok(tern_tool_choice_parse(choice, &p));
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_from_tools(gv, TOOLS, strlen(TOOLS), &p, &g));
    return g;
}

static bool allowed(struct tern_grammar_matcher *m, int32_t id)
{
    uint32_t mask[CTL_N_VOCAB / 32];
    tern_grammar_matcher_fill_mask(m, mask);
    return (mask[id >> 5] >> (id & 31)) & 1;
}

static void accept_text(struct tern_grammar_matcher *m, const char *s)
{
    int32_t ids[256];
    size_t n = 0;
    add_text(s, ids, &n, 256);
    for (size_t i = 0; i < n; i++) {
        if (!allowed(m, ids[i])) fail_msg("token %zu of '%s' not in the mask", i, s);
        assert_tern_ok(tern_grammar_matcher_accept(m, ids[i], NULL));
    }
}

static void test_grammar_mistral(void **state)
{
    (void)state;
    /* auto: arms on the control token only */
    struct tern_grammar *g = tools_grammar(TERN_TOOLCALL_MISTRAL, "auto");
    struct tern_grammar_info gi;
    tern_grammar_get_info(g, &gi);
    assert_true(gi.lazy);
    assert_int_equal(gi.trigger_token, CTL_TOOL_CALLS);
    assert_string_equal(gi.trigger, "[TOOL_CALLS]");
    assert_int_equal(gi.n_control_tokens, 1);
    assert_int_equal(gi.control_tokens[0], CTL_TOOL_CALLS);
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    accept_text(m, "Sure. [TOOL_CALLS]"); /* spelled out: text, not the token */
    assert_false(tern_grammar_matcher_is_constrained(m));
    assert_true(allowed(m, CTL_TOOL_CALLS));
    assert_tern_ok(tern_grammar_matcher_accept(m, CTL_TOOL_CALLS, NULL));
    assert_true(tern_grammar_matcher_is_constrained(m));
    assert_false(allowed(m, 'x'));                 /* byte tokens are ids 0..255 */
    accept_text(m, "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"cet\"}}");
    assert_true(tern_grammar_matcher_is_constrained(m));
    assert_false(allowed(m, CTL_TOOL_CALLS));      /* only where the grammar names it */
    accept_text(m, "]");
    assert_false(tern_grammar_matcher_is_constrained(m)); /* free again, re-armed */
    assert_tern_ok(tern_grammar_matcher_accept(m, CTL_TOOL_CALLS, NULL));
    assert_true(tern_grammar_matcher_is_constrained(m));
    /* another control token is refused inside the call, with a message naming what was due */
    assert_int_equal(tern_grammar_matcher_accept(m, CTL_PYTHON_TAG, NULL), TERN_ERR_ARG);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    /* none: the token can never be produced */
    g = tools_grammar(TERN_TOOLCALL_MISTRAL, "none");
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_false(allowed(m, CTL_TOOL_CALLS));
    assert_int_equal(tern_grammar_matcher_accept(m, CTL_TOOL_CALLS, NULL), TERN_ERR_ARG);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    /* required / named: the token first (forced), its spelling refused */
    const char *choices[2] = {"required", "get_weather"};
    for (int c = 0; c < 2; c++) {
        g = tools_grammar(TERN_TOOLCALL_MISTRAL, choices[c]);
        tern_grammar_get_info(g, &gi);
        assert_false(gi.lazy);
        assert_int_equal(gi.trigger_token, -1);
        assert_int_equal(gi.n_control_tokens, 1);
        assert_tern_ok(tern_grammar_matcher_create(g, &m));
        assert_int_equal(tern_grammar_matcher_forced_token(m), CTL_TOOL_CALLS);
        assert_false(allowed(m, '['));
        size_t ok;
        assert_int_equal(tern_grammar_matcher_accept_bytes(m, "[TOOL_CALLS]", 12, &ok), TERN_ERR_ARG);
        assert_int_equal(ok, 0);
        char fb[64];
        assert_int_equal(tern_grammar_matcher_forced_bytes(m, fb, sizeof fb), 0); /* a token is not text */
        int32_t f[32];
        int nf = tern_grammar_matcher_forced_tokens(m, f, 32);
        assert_true(nf >= 2);
        assert_int_equal(f[0], CTL_TOOL_CALLS);
        assert_int_equal(f[1], '[');
        assert_tern_ok(tern_grammar_matcher_accept(m, CTL_TOOL_CALLS, NULL));
        accept_text(m, c ? "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]"
                         : "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"utc\"}}, "
                           "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]");
        assert_true(tern_grammar_matcher_is_done(m));
        tern_grammar_matcher_free(m);

        /* a random document shows the token as its text; the Mistral parser reads it */
        char doc[4096];
        size_t dn;
        assert_tern_ok(tern_grammar_generate(g, 11, 60, doc, sizeof doc - 1, &dn));
        doc[dn] = 0;
        assert_true(!strncmp(doc, "[TOOL_CALLS][{", 14));
        struct tern_toolcall_parser *tp;
        assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_MISTRAL, &tp));
        assert_tern_ok(tern_toolcall_feed(tp, doc, dn, NULL));
        assert_tern_ok(tern_toolcall_finish(tp, NULL));
        if (tern_toolcall_count(tp) < 1) fail_msg("no call in '%s'", doc);
        assert_int_equal(tern_toolcall_n_errors(tp), 0);
        tern_toolcall_parser_free(tp);
        tern_grammar_free(g);
    }
}

static void test_grammar_other_formats(void **state)
{
    (void)state;
    /* Llama 3 auto: arms on <|python_tag|> (the call as the format's JSON) */
    struct tern_grammar *g = tools_grammar(TERN_TOOLCALL_LLAMA3, "auto");
    struct tern_grammar_info gi;
    tern_grammar_get_info(g, &gi);
    assert_int_equal(gi.trigger_token, CTL_PYTHON_TAG);
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_tern_ok(tern_grammar_matcher_accept(m, CTL_PYTHON_TAG, NULL));
    accept_text(m, "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"utc\"}}");
    assert_false(tern_grammar_matcher_is_constrained(m));
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    /* Granite required: <|tool_call|> forced */
    g = tools_grammar(TERN_TOOLCALL_GRANITE, "required");
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_int_equal(tern_grammar_matcher_forced_token(m), CTL_GRANITE);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    /* Hermes with control tags: both are tokens, the closer forced after the call */
    g = tools_grammar(TERN_TOOLCALL_HERMES, "get_time");
    tern_grammar_get_info(g, &gi);
    assert_int_equal(gi.n_control_tokens, 2);
    assert_int_equal(gi.control_tokens[0], CTL_HERMES_OPEN);
    assert_int_equal(gi.control_tokens[1], CTL_HERMES_CLOSE);
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_int_equal(tern_grammar_matcher_forced_token(m), CTL_HERMES_OPEN);
    assert_tern_ok(tern_grammar_matcher_accept(m, CTL_HERMES_OPEN, NULL));
    accept_text(m, "\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"cet\"}}\n");
    assert_int_equal(tern_grammar_matcher_forced_token(m), CTL_HERMES_CLOSE);
    assert_false(allowed(m, '<'));
    assert_tern_ok(tern_grammar_matcher_accept(m, CTL_HERMES_CLOSE, NULL));
    assert_true(tern_grammar_matcher_is_complete(m)); /* parallel: "\n" + another call may follow */
    assert_true(allowed(m, CTL_IM_END));
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    /* a vocabulary without those tokens: the text opener, no control tokens (as before) */
    char plain_path[4200];
    snprintf(plain_path, sizeof plain_path, "%s/plain-tiny.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q4_0", 1, plain_path, NULL));
    struct tern_tokenizer *pt;
    struct tern_grammar_vocab *pv;
    assert_tern_ok(tern_tokenizer_load(plain_path, &pt));
    assert_tern_ok(tern_grammar_vocab_create(pt, &pv));
    int32_t ids[4];
    assert_int_equal(tern_toolcall_preserved_tokens(pt, TERN_TOOLCALL_MISTRAL, ids, 4), 0);
    struct tern_tool_grammar_params p = tern_tool_grammar_default_params();
    p.format = TERN_TOOLCALL_MISTRAL;
    assert_tern_ok(tern_grammar_from_tools(pv, TOOLS, strlen(TOOLS), &p, &g));
    tern_grammar_get_info(g, &gi);
    assert_int_equal(gi.trigger_token, -1);
    assert_string_equal(gi.trigger, "[TOOL_CALLS]");
    assert_int_equal(gi.n_control_tokens, 0);
    tern_grammar_free(g);
    p.format = TERN_TOOLCALL_LLAMA3; /* auto: no <|python_tag|> token to wait for */
    assert_int_equal(tern_grammar_from_tools(pv, TOOLS, strlen(TOOLS), &p, &g), TERN_ERR_UNSUPPORTED);
    tern_grammar_vocab_free(pv);
    tern_tokenizer_free(pt);
}

/* ---------------------------------------------------------------- generation */

struct run {
    struct tern_toolcall_parser *tp;
    char text[8192];
    size_t len;
    int32_t toks[512];
    int n_toks;
};

static int on_piece(const char *s, size_t n, void *user)
{
    struct run *r = user;
    assert_true(r->len + n < sizeof r->text);
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = 0;
    return tern_toolcall_feed(r->tp, s, n, NULL) != TERN_OK;
}

static int on_token(int32_t id, void *user)
{
    struct run *r = user;
    if (r->n_toks < 512) r->toks[r->n_toks++] = id;
    return 0;
}

static void run_begin(struct run *r)
{
    memset(r, 0, sizeof *r);
    assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_MISTRAL, &r->tp));
}

/* The call as OpenAI's shape needs it: a declared tool, arguments an object of its parameters. */
static void check_call(const struct tern_toolcall *c)
{
    cJSON *a = cJSON_Parse(c->arguments);
    if (!cJSON_IsObject(a)) fail_msg("arguments are not an object: %s", c->arguments);
    if (!strcmp(c->name, "get_weather")) {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(a, "city")));
    } else {
        assert_string_equal(c->name, "get_time");
        const cJSON *z = cJSON_GetObjectItem(a, "zone");
        assert_true(cJSON_IsString(z) && (!strcmp(z->valuestring, "utc") || !strcmp(z->valuestring, "cet")));
    }
    cJSON_Delete(a);
}

/* the hook: only [TOOL_CALLS] at the first position, then nothing */
struct force {
    int calls;
};
static void force_mask(void *user, float *logits, int n_vocab)
{
    struct force *f = user;
    if (f->calls++ > 0) return;
    for (int i = 0; i < n_vocab; i++)
        if (i != CTL_TOOL_CALLS) logits[i] = -INFINITY;
}

static void prompt_ids(int32_t *ids, int *n)
{
    static const char P[] = "<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n";
    size_t k;
    assert_tern_ok(tern_tokenize(tok, P, strlen(P), TERN_TOK_PARSE_SPECIAL, ids, 256, &k));
    *n = (int)k;
}

static void test_generate_auto(void **state)
{
    (void)state;
    struct tern_model *model;
    struct tern_context *ctx;
    struct tern_generator *gen;
    struct tern_sampler *smp;
    assert_tern_ok(tern_model_load(model_path, NULL, &model));
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    assert_tern_ok(tern_context_create(model, &cp, &ctx));
    assert_tern_ok(tern_generator_create(ctx, tok, &gen));
    struct tern_sampler_params sp = tern_sampler_default_params();
    assert_tern_ok(tern_sampler_create(&sp, CTL_N_VOCAB, &smp));
    int32_t prompt[256];
    int np;
    prompt_ids(prompt, &np);
    int32_t keep[4];
    const int nk = tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_MISTRAL, keep, 4);

    /* without tools: the scripted [TOOL_CALLS] is hidden, the parser sees no call */
    struct force f = {0};
    struct gen_token_hook hk = {.user = &f, .mask = force_mask};
    assert_tern_ok(gen_generator_set_hook(gen, &hk));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 8;
    gp.on_token = on_token;
    struct run r;
    run_begin(&r);
    assert_tern_ok(tern_generate(gen, smp, prompt, np, &gp, on_piece, &r, NULL));
    assert_int_equal(r.toks[0], CTL_TOOL_CALLS);
    assert_null(strstr(r.text, "[TOOL_CALLS]"));
    tern_toolcall_parser_free(r.tp);

    /* preserved: the text shows, and with the auto grammar the call is constrained and parsed */
    struct tern_grammar *g = tools_grammar(TERN_TOOLCALL_MISTRAL, "auto");
    f.calls = 0;
    gp.max_tokens = 120;
    gp.preserve = keep;
    gp.n_preserve = nk;
    gp.grammar = g;
    run_begin(&r);
    struct tern_gen_stats st;
    assert_tern_ok(tern_generate(gen, smp, prompt, np, &gp, on_piece, &r, &st));
    assert_tern_ok(tern_toolcall_finish(r.tp, NULL));
    assert_int_equal(r.toks[0], CTL_TOOL_CALLS);
    if (strncmp(r.text, "[TOOL_CALLS][{\"name\": \"", 23)) fail_msg("reply: %s", r.text);
    assert_true(st.grammar_forced > 0); /* the call's fixed parts after the token */
    if (tern_toolcall_count(r.tp) < 1) fail_msg("no call parsed from: %s", r.text);
    check_call(tern_toolcall_get(r.tp, 0));
    tern_toolcall_parser_free(r.tp);
    assert_tern_ok(gen_generator_set_hook(gen, NULL));
    tern_grammar_free(g);

    /* the same grammar, no preserve given: its control token is still shown */
    f.calls = 0;
    assert_tern_ok(gen_generator_set_hook(gen, &hk));
    g = tools_grammar(TERN_TOOLCALL_MISTRAL, "auto");
    gp.preserve = NULL;
    gp.n_preserve = 0;
    gp.grammar = g;
    gp.max_tokens = 4;
    run_begin(&r);
    assert_tern_ok(tern_generate(gen, smp, prompt, np, &gp, on_piece, &r, NULL));
    assert_true(!strncmp(r.text, "[TOOL_CALLS][", 13));
    tern_toolcall_parser_free(r.tp);
    assert_tern_ok(gen_generator_set_hook(gen, NULL));
    tern_grammar_free(g);

    /* too many preserved ids is an error naming the limit */
    int32_t many[TERN_MAX_PRESERVED + 1];
    for (int i = 0; i <= TERN_MAX_PRESERVED; i++) many[i] = 300 + i;
    gp.grammar = NULL;
    gp.preserve = many;
    gp.n_preserve = TERN_MAX_PRESERVED + 1;
    run_begin(&r);
    assert_int_equal(tern_generate(gen, smp, prompt, np, &gp, on_piece, &r, NULL), TERN_ERR_RANGE);
    tern_toolcall_parser_free(r.tp);

    tern_sampler_free(smp);
    tern_generator_free(gen);
    tern_context_free(ctx);
    tern_model_free(model);
}

struct bdone {
    int done;
    struct tern_gen_stats st;
};
static void on_done(const struct tern_gen_stats *st, void *user)
{
    struct bdone *d = user;
    d->done++;
    d->st = *st;
}
struct brun {
    struct run r;
    struct bdone d;
};
static int b_piece(const char *s, size_t n, void *user) { return on_piece(s, n, &((struct brun *)user)->r); }
static int b_token(int32_t id, void *user) { return on_token(id, &((struct brun *)user)->r); }
static void b_done(const struct tern_gen_stats *st, void *user) { on_done(st, &((struct brun *)user)->d); }

static void test_required_generate_and_batcher(void **state)
{
    (void)state;
    struct tern_model *model;
    assert_tern_ok(tern_model_load(model_path, NULL, &model));
    int32_t prompt[256];
    int np;
    prompt_ids(prompt, &np);
    int32_t keep[4];
    const int nk = tern_toolcall_preserved_tokens(tok, TERN_TOOLCALL_MISTRAL, keep, 4);
    struct tern_grammar *g = tools_grammar(TERN_TOOLCALL_MISTRAL, "required");
    struct tern_sampler_params sp = tern_sampler_default_params();

    /* tern_generate */
    struct tern_context *ctx;
    struct tern_generator *gen;
    struct tern_sampler *smp;
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    assert_tern_ok(tern_context_create(model, &cp, &ctx));
    assert_tern_ok(tern_generator_create(ctx, tok, &gen));
    assert_tern_ok(tern_sampler_create(&sp, CTL_N_VOCAB, &smp));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 150;
    gp.on_token = on_token;
    gp.grammar = g;
    gp.preserve = keep;
    gp.n_preserve = nk;
    struct run a;
    run_begin(&a);
    struct tern_gen_stats st;
    assert_tern_ok(tern_generate(gen, smp, prompt, np, &gp, on_piece, &a, &st));
    assert_tern_ok(tern_toolcall_finish(a.tp, NULL));
    assert_int_equal(a.toks[0], CTL_TOOL_CALLS);
    assert_int_equal(st.stop, TERN_GEN_STOP_DONE);
    assert_true(!strncmp(a.text, "[TOOL_CALLS][{\"name\": \"", 23));
    assert_int_equal(tern_toolcall_count(a.tp), 1);
    size_t cl;
    tern_toolcall_text(a.tp, &cl);
    assert_int_equal(cl, 0); /* nothing left as content */
    check_call(tern_toolcall_get(a.tp, 0));

    /* the batcher, two requests at once (one beside it without tools) */
    struct tern_context *bctx;
    cp.n_seq = 2;
    assert_tern_ok(tern_context_create(model, &cp, &bctx));
    struct tern_batcher *b;
    assert_tern_ok(tern_batcher_create(bctx, tok, NULL, &b));
    struct tern_sampler *s1, *s2;
    assert_tern_ok(tern_sampler_create(&sp, CTL_N_VOCAB, &s1));
    assert_tern_ok(tern_sampler_create(&sp, CTL_N_VOCAB, &s2));
    struct brun x, y;
    memset(&x.d, 0, sizeof x.d);
    memset(&y.d, 0, sizeof y.d);
    run_begin(&x.r);
    run_begin(&y.r);
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = prompt;
    r.n_prompt = np;
    r.sampler = s1;
    r.grammar = g;
    r.preserve = keep;
    r.n_preserve = nk;
    r.max_tokens = 150;
    r.on_piece = b_piece;
    r.on_token = b_token;
    r.on_done = b_done;
    r.user = &x;
    assert_tern_ok(tern_batcher_add(b, &r, NULL));
    struct tern_batch_request r2 = r;
    r2.sampler = s2;
    r2.grammar = NULL;
    r2.preserve = NULL;
    r2.n_preserve = 0;
    r2.max_tokens = 10;
    r2.user = &y;
    assert_tern_ok(tern_batcher_add(b, &r2, NULL));
    while (tern_batcher_n_active(b) > 0) assert_tern_ok(tern_batcher_step(b, NULL));
    assert_int_equal(x.d.done, 1);
    assert_int_equal(x.d.st.stop, TERN_GEN_STOP_DONE);
    assert_tern_ok(tern_toolcall_finish(x.r.tp, NULL));
    assert_int_equal(x.r.n_toks, a.n_toks);
    assert_memory_equal(x.r.toks, a.toks, sizeof(int32_t) * (size_t)a.n_toks);
    assert_string_equal(x.r.text, a.text);
    assert_int_equal(tern_toolcall_count(x.r.tp), 1);
    assert_string_equal(tern_toolcall_get(x.r.tp, 0)->name, tern_toolcall_get(a.tp, 0)->name);
    assert_string_equal(tern_toolcall_get(x.r.tp, 0)->arguments, tern_toolcall_get(a.tp, 0)->arguments);
    assert_int_equal(y.d.done, 1);
    /* a bad preserved id is refused at add */
    const int32_t bad[1] = {-1};
    r.preserve = bad;
    r.n_preserve = 1;
    assert_int_equal(tern_batcher_add(b, &r, NULL), TERN_ERR_ARG);

    tern_toolcall_parser_free(a.tp);
    tern_toolcall_parser_free(x.r.tp);
    tern_toolcall_parser_free(y.r.tp);
    tern_sampler_free(s1);
    tern_sampler_free(s2);
    tern_batcher_free(b);
    tern_context_free(bctx);
    tern_sampler_free(smp);
    tern_generator_free(gen);
    tern_context_free(ctx);
    tern_grammar_free(g);
    tern_model_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_id),
        cmocka_unit_test(test_detokenizer_preserve),
        cmocka_unit_test(test_preserved_per_format),
        cmocka_unit_test(test_grammar_mistral),
        cmocka_unit_test(test_grammar_other_formats),
        cmocka_unit_test(test_generate_auto),
        cmocka_unit_test(test_required_generate_and_batcher),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
