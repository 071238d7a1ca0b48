/* test_batcher.c — continuous batching (src/gen/batcher.c) against the one-sequence generator:
 * requests that join at different steps, share prefixes, are prefilled in small chunks beside a
 * generating request, or are grammar-constrained (JSON schema; tool calls in the hermes, llama3
 * and mistral formats, with forced tokens) each produce at temperature 0 the tokens
 * tern_generate produces for the same prompt alone, with the same grammar (bit-identical logits
 * where the model's kernels are batch-invariant, tern_model_batch_invariant: a Q4_0 tiny model
 * on AVX-512 or the scalar path; elsewhere the token comparison is skipped with a message and
 * the structural checks still run). Also: a shared prefix is reused (kept in its slot or copied from another), a
 * cancel frees the slot with on_done, a full batcher refuses with TERN_ERR_RANGE, and a prefix
 * cache shared by the slots brings back a prompt no slot holds any more; log-probabilities
 * (on_logprob) match the logits of a separate context, log-softmax computed in the test. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char model_path[4096];
static struct tern_model *model;
static struct tern_tokenizer *tok;

enum { MAXGEN = 24, NV_DUMMY = 0 };

struct out {
    int32_t ids[MAXGEN + 1];
    int n;
    char text[4096];
    size_t len;
    bool done;
    struct tern_gen_stats st;
};

static int on_token(int32_t id, void *u)
{
    struct out *o = u;
    if (o->n <= MAXGEN) o->ids[o->n++] = id;
    return 0;
}
static int on_piece(const char *t, size_t n, void *u)
{
    struct out *o = u;
    if (o->len + n < sizeof o->text) {
        memcpy(o->text + o->len, t, n);
        o->len += n;
    }
    return 0;
}
static void on_done(const struct tern_gen_stats *st, void *u)
{
    struct out *o = u;
    assert_false(o->done); /* exactly once */
    o->done = true;
    o->st = *st;
}

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof model_path, "%s/tiny-q4_0.gguf", test_tmpdir());
    if (tern_synth_model_write("tiny", "q4_0", 5, model_path, NULL)) return -1;
    if (tern_model_load(model_path, NULL, &model)) return -1;
    return tern_tokenizer_from_gguf(tern_model_gguf(model), &tok) ? -1 : 0;
}
static int teardown(void **state)
{
    (void)state;
    tern_tokenizer_free(tok);
    tern_model_free(model);
    return 0;
}

static void prompt_of(int which, int n, int32_t *p)
{
    for (int i = 0; i < n; i++) p[i] = (int32_t)(32 + (which * 53 + i * 29) % 90);
}

/* What tern_generate gives for the prompt alone (greedy, max_tokens; with a grammar as
 * tern_gen_params.grammar, stopping at end-of-generation as the batched request does). */
static void reference(const int32_t *p, int n, int max_tokens, struct tern_grammar *g, struct out *o)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(model, &cp, &ctx));
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(model), &s));
    memset(o, 0, sizeof *o);
    struct tern_generator *gen;
    assert_tern_ok(tern_generator_create(ctx, tok, &gen));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = max_tokens;
    gp.on_token = on_token;
    gp.ignore_eog = !g;
    gp.grammar = g;
    assert_tern_ok(tern_generate(gen, s, p, n, &gp, on_piece, o, &o->st));
    o->done = true;
    tern_generator_free(gen);
    tern_sampler_free(s);
    tern_context_free(ctx);
}

static void same_tokens(const struct out *got, const struct out *want, const char *what)
{
    if (!tern_model_batch_invariant(model)) {
        print_message("note: kernels not batch-invariant here: %s token comparison skipped\n", what);
        return;
    }
    if (got->n != want->n || memcmp(got->ids, want->ids, sizeof(int32_t) * (size_t)got->n)) {
        for (int i = 0; i < got->n || i < want->n; i++)
            print_message("%s %d: got %d want %d\n", what, i, i < got->n ? got->ids[i] : -1,
                          i < want->n ? want->ids[i] : -1);
        fail_msg("%s: batched tokens differ from the request alone", what);
    }
    assert_int_equal(got->len, want->len);
    assert_memory_equal(got->text, want->text, got->len);
}

struct rig {
    struct tern_context *ctx;
    struct tern_batcher *b;
    struct tern_sampler *s[8];
};

static void rig_open(struct rig *g, int n_seq, int n_prefill)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    cp.n_seq = n_seq;
    assert_tern_ok(tern_context_create(model, &cp, &g->ctx));
    struct tern_batcher_params bp = tern_batcher_default_params();
    bp.n_prefill = n_prefill;
    assert_tern_ok(tern_batcher_create(g->ctx, tok, &bp, &g->b));
    struct tern_sampler_params sp = tern_sampler_default_params();
    for (int i = 0; i < 8; i++)
        assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(model), &g->s[i]));
}
static void rig_close(struct rig *g)
{
    for (int i = 0; i < 8; i++) tern_sampler_free(g->s[i]);
    tern_batcher_free(g->b);
    tern_context_free(g->ctx);
}
static int add(struct rig *g, int k, const int32_t *p, int n, int max_tokens, struct out *o)
{
    memset(o, 0, sizeof *o);
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.sampler = g->s[k];
    r.max_tokens = max_tokens;
    r.on_piece = on_piece;
    r.on_token = on_token;
    r.on_done = on_done;
    r.user = o;
    r.ignore_eog = true; /* random weights: fixed lengths keep the requests overlapping */
    int slot = -1;
    assert_tern_ok(tern_batcher_add(g->b, &r, &slot));
    return slot;
}

/* Three requests, the third joining after two steps, a fourth refused while all are busy. */
static void test_join_and_match(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, 3, 0);
    int32_t p[3][40];
    const int len[3] = {17, 33, 9};
    for (int k = 0; k < 3; k++) prompt_of(k, len[k], p[k]);
    struct out o[3], ref;
    add(&g, 0, p[0], len[0], MAXGEN, &o[0]);
    add(&g, 1, p[1], len[1], MAXGEN - 5, &o[1]);
    struct tern_batcher_step_info si;
    assert_tern_ok(tern_batcher_step(g.b, &si));
    assert_int_equal(si.n_prefill, len[0] + len[1]);
    assert_int_equal(si.n_decode, 0);
    assert_tern_ok(tern_batcher_step(g.b, &si));
    assert_int_equal(si.n_decode, 2);
    add(&g, 2, p[2], len[2], MAXGEN, &o[2]);
    struct out extra;
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = p[0];
    r.n_prompt = 3;
    r.sampler = g.s[3];
    r.on_done = on_done;
    r.user = &extra;
    assert_int_equal(tern_batcher_add(g.b, &r, NULL), TERN_ERR_RANGE);
    assert_int_equal(tern_batcher_n_active(g.b), 3);
    assert_tern_ok(tern_batcher_step(g.b, &si));
    assert_int_equal(si.n_decode, 2);
    assert_int_equal(si.n_prefill, len[2]);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    for (int k = 0; k < 3; k++) {
        assert_true(o[k].done);
        assert_int_equal(o[k].st.n_prompt, len[k]);
        reference(p[k], len[k], k == 1 ? MAXGEN - 5 : MAXGEN, NULL, &ref);
        assert_int_equal(o[k].st.stop, ref.st.stop);
        assert_int_equal(o[k].st.n_generated, ref.st.n_generated);
        same_tokens(&o[k], &ref, k == 0 ? "request 0" : k == 1 ? "request 1" : "request 2");
    }
    rig_close(&g);
}

/* A prompt extending a finished one reuses that slot's KV; one extending a busy request's
 * prompt gets it copied; the answers stay the request-alone answers. */
static void test_prefix_reuse(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, 2, 0);
    int32_t a[80], c[60];
    prompt_of(7, 80, a);
    prompt_of(8, 60, c);
    struct out o1, o2, o3, o4, ref;
    add(&g, 0, a, 50, 4, &o1);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(o1.st.n_reused, 0);
    /* an unrelated prompt goes to the other (least recently used) slot ... */
    int slot_a = 0;
    int slot_c = add(&g, 1, c, 60, MAXGEN, &o2);
    assert_int_equal(slot_c, 1 - slot_a);
    /* ... so this one has only the slot that ran `a`: its 50 prompt tokens are kept (and the
     * tokens generated after them when they match the longer prompt: they do not) */
    assert_int_equal(add(&g, 2, a, 80, 6, &o3), slot_a);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(o2.st.n_reused, 0);
    assert_int_equal(o3.st.n_reused, 50);
    reference(a, 80, 6, NULL, &ref);
    same_tokens(&o3, &ref, "kept prefix");
    /* copy from a busy slot: c is generating again in one slot, a prompt extending c goes to
     * the other slot and gets c's 60 prompt tokens copied */
    assert_int_equal(add(&g, 0, c, 60, MAXGEN, &o2), slot_c);
    assert_tern_ok(tern_batcher_step(g.b, NULL));
    int32_t c2[70];
    memcpy(c2, c, sizeof c);
    prompt_of(9, 10, c2 + 60);
    assert_int_equal(add(&g, 1, c2, 70, 5, &o4), slot_a);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(o2.st.n_reused, 59); /* its own earlier run: all but the last token */
    assert_int_equal(o4.st.n_reused, 60);
    reference(c2, 70, 5, NULL, &ref);
    same_tokens(&o4, &ref, "copied prefix");
    rig_close(&g);
}

/* A long prompt in chunks of 8 while another request generates: the generating one gets a
 * token in every step. */
static void test_chunked_prefill(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, 2, 8);
    int32_t p[100], q[10];
    prompt_of(3, 100, p);
    prompt_of(4, 10, q);
    struct out o1, o2, ref;
    add(&g, 0, q, 10, MAXGEN, &o1);
    assert_tern_ok(tern_batcher_step(g.b, NULL)); /* q's prompt (10 > 8: two steps) */
    assert_tern_ok(tern_batcher_step(g.b, NULL));
    add(&g, 1, p, 100, 3, &o2);
    int steps = 0;
    while (!o2.done) {
        struct tern_batcher_step_info si;
        assert_tern_ok(tern_batcher_step(g.b, &si));
        assert_true(si.n_prefill <= 8);
        if (!o1.done && o2.n == 0) assert_int_equal(si.n_decode, 1);
        steps++;
    }
    assert_true(steps >= 100 / 8);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    reference(p, 100, 3, NULL, &ref);
    same_tokens(&o2, &ref, "chunked prompt");
    reference(q, 10, MAXGEN, NULL, &ref);
    same_tokens(&o1, &ref, "request beside it");
    rig_close(&g);
}

static void test_cancel(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, 1, 0);
    int32_t p[20];
    prompt_of(5, 20, p);
    struct out o, o2;
    int slot = add(&g, 0, p, 20, MAXGEN, &o);
    assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_tern_ok(tern_batcher_step(g.b, NULL));
    tern_batcher_cancel(g.b, slot);
    assert_true(o.done);
    assert_int_equal(o.st.stop, TERN_GEN_STOP_CALLBACK);
    assert_int_equal(tern_batcher_n_active(g.b), 0);
    tern_batcher_cancel(g.b, slot); /* a free slot: nothing */
    add(&g, 1, p, 20, 2, &o2);      /* the slot is usable again, its prompt kept */
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(o2.st.n_reused, 19);
    assert_int_equal(o2.st.n_generated, 2);
    assert_int_equal(o2.st.stop, TERN_GEN_STOP_MAX_TOKENS);
    rig_close(&g);
}

/* A constrained request as the batcher runs it (grammar g, greedy, stops at end-of-generation). */
static void add_constrained(struct rig *g, int k, const int32_t *p, int n, struct tern_grammar *gr,
                            struct out *o)
{
    memset(o, 0, sizeof *o);
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.sampler = g->s[k];
    r.grammar = gr;
    r.max_tokens = 200;
    r.on_piece = on_piece;
    r.on_token = on_token;
    r.on_done = on_done;
    r.user = o;
    assert_tern_ok(tern_batcher_add(g->b, &r, NULL));
}

/* The batched constrained answer is tern_generate's with the same grammar: the same tokens (where
 * the kernels allow the comparison), text, stop reason and grammar counters (masks, forced). */
static void same_constrained(const struct out *o, const struct out *ref, const char *what)
{
    same_tokens(o, ref, what);
    assert_int_equal(o->len, ref->len);
    assert_memory_equal(o->text, ref->text, o->len);
    assert_int_equal(o->st.stop, ref->st.stop);
    assert_int_equal(o->st.n_generated, ref->st.n_generated);
    assert_int_equal(o->st.grammar_forced, ref->st.grammar_forced);
    assert_int_equal(o->st.grammar_masks, ref->st.grammar_masks);
    assert_int_equal(o->st.incomplete, ref->st.incomplete);
}

/* A JSON-schema grammar: the answer parses and has the required key; a grammar-constrained
 * request beside a free one gives what tern_generate gives it alone. */
static void test_grammar(void **state)
{
    (void)state;
    struct tern_grammar_vocab *v;
    assert_tern_ok(tern_grammar_vocab_create(tok, &v));
    const char *schema = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", "
                         "\"minimum\": 0, \"maximum\": 99}}, \"required\": [\"n\"], "
                         "\"additionalProperties\": false}";
    struct tern_grammar_params gp = tern_grammar_default_params();
    struct tern_grammar *gr;
    assert_tern_ok(tern_grammar_from_json_schema(v, schema, strlen(schema), &gp, &gr));
    struct rig g;
    rig_open(&g, 2, 0);
    int32_t p[30], q[12];
    prompt_of(11, 30, p);
    prompt_of(12, 12, q);
    struct out o, o2, ref;
    add(&g, 0, q, 12, MAXGEN, &o2);
    add_constrained(&g, 1, p, 30, gr, &o);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    o.text[o.len] = 0;
    cJSON *j = cJSON_Parse(o.text);
    if (!j) fail_msg("grammar output is not JSON: %s", o.text);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "n")));
    cJSON_Delete(j);
    assert_true(o.st.stop == TERN_GEN_STOP_EOG || o.st.stop == TERN_GEN_STOP_DONE);
    assert_true(o.st.grammar_forced > 0); /* {"n": is forced */
    assert_true(o.st.grammar_masks > 0);
    assert_false(o.st.incomplete);
    reference(p, 30, 200, gr, &ref);
    same_constrained(&o, &ref, "json schema");
    reference(q, 12, MAXGEN, NULL, &ref);
    same_tokens(&o2, &ref, "free request beside it");
    rig_close(&g);
    tern_grammar_free(gr);
    tern_grammar_vocab_free(v);
}

/* Tool calls in the three call formats, tool_choice required, four constrained requests at once
 * (their forced runs decoded in the same passes as the others' sampled tokens): each is the
 * answer tern_generate gives alone, and it parses as a call of a declared tool. A grammar
 * compiled without a vocabulary is refused at add. */
static void test_tool_grammars(void **state)
{
    (void)state;
    struct tern_grammar_vocab *v;
    assert_tern_ok(tern_grammar_vocab_create(tok, &v));
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}, "
                        "\"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\", \"unit\"]}}}, "
                        "{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}]";
    const int fmts[4] = {TERN_TOOLCALL_HERMES, TERN_TOOLCALL_LLAMA3, TERN_TOOLCALL_MISTRAL, TERN_TOOLCALL_HERMES};
    struct tern_grammar *gr[4];
    for (int k = 0; k < 4; k++) {
        struct tern_tool_grammar_params tp = tern_tool_grammar_default_params();
        tp.format = fmts[k];
        tp.choice = k == 3 ? TERN_TOOL_CHOICE_NAMED : TERN_TOOL_CHOICE_REQUIRED;
        tp.name = k == 3 ? "get_time" : NULL;
        tp.parallel = false;
        tp.schema.strict_properties = true;
        assert_tern_ok(tern_grammar_from_tools(v, tools, strlen(tools), &tp, &gr[k]));
    }
    struct rig g;
    rig_open(&g, 4, 0);
    int32_t p[4][40];
    struct out o[4], ref;
    for (int k = 0; k < 4; k++) {
        prompt_of(20 + k, 20 + 5 * k, p[k]);
        add_constrained(&g, k, p[k], 20 + 5 * k, gr[k], &o[k]);
    }
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    static const char *const names[4] = {"hermes", "llama3", "mistral", "hermes named"};
    for (int k = 0; k < 4; k++) {
        assert_true(o[k].done);
        assert_false(o[k].st.incomplete);
        assert_true(o[k].st.grammar_forced > 0);
        o[k].text[o[k].len] = 0;
        struct tern_toolcall_parser *tp;
        assert_tern_ok(tern_toolcall_parser_create((enum tern_toolcall_format)fmts[k], &tp));
        assert_tern_ok(tern_toolcall_feed(tp, o[k].text, o[k].len, NULL));
        assert_tern_ok(tern_toolcall_finish(tp, NULL));
        if (tern_toolcall_count(tp) != 1) fail_msg("%s: not one call: %s", names[k], o[k].text);
        const char *name = tern_toolcall_get(tp, 0)->name;
        assert_true(!strcmp(name, "get_time") || (k < 3 && !strcmp(name, "get_weather")));
        tern_toolcall_parser_free(tp);
        reference(p[k], 20 + 5 * k, 200, gr[k], &ref);
        same_constrained(&o[k], &ref, names[k]);
    }
    struct tern_grammar *bytes_only;
    assert_tern_ok(tern_grammar_from_tools(NULL, tools, strlen(tools), NULL, &bytes_only));
    struct out x;
    memset(&x, 0, sizeof x);
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = p[0];
    r.n_prompt = 5;
    r.sampler = g.s[0];
    r.grammar = bytes_only;
    r.on_done = on_done;
    r.user = &x;
    assert_int_equal(tern_batcher_add(g.b, &r, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "vocabulary"));
    assert_int_equal(tern_batcher_n_active(g.b), 0);
    tern_grammar_free(bytes_only);
    rig_close(&g);
    for (int k = 0; k < 4; k++) tern_grammar_free(gr[k]);
    tern_grammar_vocab_free(v);
}

/* A prefix cache across slots: a prompt whose slot was overwritten since is restored from the
 * cache (block-aligned), and its answer is still the request-alone answer; a prompt a slot holds
 * more of than the cache keeps the slot's KV. */
static void test_prefix_cache(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, 2, 16);
    struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
    pp.block_tokens = 16;
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pc));
    tern_batcher_set_prefix_cache(g.b, pc);
    int32_t a[90], c[60], d[60];
    prompt_of(30, 90, a);
    prompt_of(31, 60, c);
    prompt_of(32, 60, d);
    struct out o1, o2, o3, o4, o5, ref;
    add(&g, 0, a, 70, 5, &o1);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    struct tern_prefix_cache_stats cs;
    tern_prefix_cache_get_stats(pc, &cs);
    assert_int_equal(cs.n_blocks, 4); /* 70 prompt tokens + 4 generated in the KV: 4 blocks of 16 */
    /* two unrelated prompts take both slots: nothing of `a` is left in any slot */
    add(&g, 0, c, 60, 3, &o2);
    add(&g, 1, d, 60, 3, &o3);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    /* `a` longer: its first 64 tokens come back from the cache (the prompt's first 70 match) */
    add(&g, 0, a, 90, 6, &o4);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(o4.st.n_reused, 64);
    tern_prefix_cache_get_stats(pc, &cs);
    assert_int_equal(cs.hits, 1);
    assert_int_equal(cs.hit_tokens, 64);
    reference(a, 90, 6, NULL, &ref);
    same_tokens(&o4, &ref, "restored from the cache");
    /* the slot that ran `a` holds 89 of its tokens: more than the cache's 80; it is kept */
    add(&g, 1, a, 90, 2, &o5);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(o5.st.n_reused, 89);
    tern_prefix_cache_get_stats(pc, &cs);
    assert_int_equal(cs.hits, 1);
    rig_close(&g);
    tern_prefix_cache_free(pc);
}

/* ---- log-probabilities (tern_batch_request.on_logprob) */
struct lpout {
    struct out o;
    struct tern_token_logprob lp[256];
    int n;
    bool order_ok; /* every on_token came right after its token's on_logprob */
};
static int lp_on_logprob(const struct tern_token_logprob *lp, void *u)
{
    struct lpout *l = u;
    if (l->n < 256) l->lp[l->n++] = *lp;
    return 0;
}
static int lp_on_token(int32_t id, void *u)
{
    struct lpout *l = u;
    if (l->n != l->o.n + 1 || l->lp[l->n - 1].token != id) l->order_ok = false;
    return on_token(id, &l->o);
}
static int lp_on_piece(const char *t, size_t n, void *u) { return on_piece(t, n, &((struct lpout *)u)->o); }
static void lp_on_done(const struct tern_gen_stats *st, void *u) { on_done(st, &((struct lpout *)u)->o); }

static void add_logprobs(struct rig *g, int k, const int32_t *p, int n, struct tern_grammar *gr,
                         int n_top, struct lpout *l)
{
    memset(l, 0, sizeof *l);
    l->order_ok = true;
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.sampler = g->s[k];
    r.grammar = gr;
    r.max_tokens = gr ? 200 : MAXGEN;
    r.ignore_eog = !gr;
    r.on_piece = lp_on_piece;
    r.on_token = lp_on_token;
    r.on_logprob = lp_on_logprob;
    r.n_top_logprobs = n_top;
    r.on_done = lp_on_done;
    r.user = l;
    assert_tern_ok(tern_batcher_add(g->b, &r, NULL));
}

/* Every reported log-prob against the logits of a separate one-sequence context that decodes the
 * prompt and the answer in one batch, log-softmax computed here in double: the token, its
 * log-prob and the top list (ids in order, values). tol: 1e-5 where the kernels are
 * batch-invariant (the same logits bits; float rounding of the log-prob only), else 2e-2. */
static void check_logprobs(const int32_t *p, int n, const struct lpout *l, int n_top)
{
    const double tol = tern_model_batch_invariant(model) ? 1e-5 : 2e-2;
    assert_int_equal(l->n, l->o.n);
    assert_true(l->order_ok);
    const int nt = n + l->n;
    int32_t *ids = malloc(sizeof *ids * (size_t)nt);
    bool *want = malloc(sizeof *want * (size_t)nt);
    memcpy(ids, p, sizeof *ids * (size_t)n);
    for (int i = 0; i < l->n; i++) ids[n + i] = l->o.ids[i];
    for (int i = 0; i < nt; i++) want[i] = i >= n - 1;
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(model, &cp, &ctx));
    const struct tern_batch b = {.n = nt, .tokens = ids, .logits = want};
    assert_tern_ok(tern_decode_batch(ctx, &b));
    const int nv = tern_model_n_vocab(model);
    for (int i = 0; i < l->n; i++) {
        const float *lg = tern_context_logits(ctx, n - 1 + i);
        assert_non_null(lg);
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < nv; v++) mx = lg[v] > mx ? lg[v] : mx;
        for (int v = 0; v < nv; v++) sum += exp(lg[v] - mx);
        const double lse = mx + log(sum);
        const struct tern_token_logprob *x = &l->lp[i];
        assert_int_equal(x->token, l->o.ids[i]);
        if (fabs(x->logprob - (lg[x->token] - lse)) > tol)
            fail_msg("token %d (id %d): log-prob %.7f, reference %.7f", i, x->token, x->logprob,
                     lg[x->token] - lse);
        assert_int_equal(x->n_top, n_top);
        for (int k = 0; k < x->n_top; k++) {
            if (fabs(x->top_logprob[k] - (lg[x->top[k]] - lse)) > tol)
                fail_msg("token %d top %d (id %d): %.7f, reference %.7f", i, k, x->top[k],
                         x->top_logprob[k], lg[x->top[k]] - lse);
            /* no token outside the list is more likely than its last entry (beyond tol) */
            if (k + 1 < x->n_top) assert_true(x->top_logprob[k] >= x->top_logprob[k + 1]);
        }
        if (x->n_top > 0)
            for (int v = 0; v < nv; v++) {
                bool listed = false;
                for (int k = 0; k < x->n_top; k++) listed |= x->top[k] == v;
                if (!listed && lg[v] - lse > x->top_logprob[x->n_top - 1] + tol)
                    fail_msg("token %d: id %d (%.6f) is missing from the top %d", i, v, lg[v] - lse, x->n_top);
            }
    }
    tern_context_free(ctx);
    free(ids);
    free(want);
}

/* A free request (top 5) and a JSON-schema request (top 3) batched together report for every
 * token the model's log-probabilities at its position; greedy tokens are the top of their list;
 * the constrained one takes its forced tokens one per pass, each with its entry, and still
 * gives a document of its schema. A top count outside 0..20 is refused. */
static void test_logprobs(void **state)
{
    (void)state;
    struct tern_grammar_vocab *v;
    assert_tern_ok(tern_grammar_vocab_create(tok, &v));
    const char *schema = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", "
                         "\"minimum\": 0, \"maximum\": 99}}, \"required\": [\"n\"], "
                         "\"additionalProperties\": false}";
    struct tern_grammar_params gp = tern_grammar_default_params();
    struct tern_grammar *gr;
    assert_tern_ok(tern_grammar_from_json_schema(v, schema, strlen(schema), &gp, &gr));
    struct rig g;
    rig_open(&g, 2, 0);
    int32_t p[30], q[12];
    prompt_of(11, 30, p);
    prompt_of(12, 12, q);
    static struct lpout a, c;
    add_logprobs(&g, 0, q, 12, NULL, 5, &a);
    add_logprobs(&g, 1, p, 30, gr, 3, &c);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_true(a.o.done && c.o.done);
    assert_int_equal(a.n, MAXGEN);
    check_logprobs(q, 12, &a, 5);
    for (int i = 0; i < a.n; i++) { /* temperature 0: the most likely token */
        assert_int_equal(a.lp[i].top[0], a.lp[i].token);
        assert_true(a.lp[i].top_logprob[0] == a.lp[i].logprob);
    }
    check_logprobs(p, 30, &c, 3); /* every token, the forced ones too, has its entry */
    assert_int_equal(c.n, c.o.st.n_generated);
    c.o.text[c.o.len] = 0;
    cJSON *j = cJSON_Parse(c.o.text);
    if (!j) fail_msg("grammar output is not JSON: %s", c.o.text);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "n")));
    cJSON_Delete(j);
    /* without logprobs the free request's tokens are the same */
    struct out ref;
    reference(q, 12, MAXGEN, NULL, &ref);
    same_tokens(&a.o, &ref, "free request with logprobs");
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = q;
    r.n_prompt = 12;
    r.sampler = g.s[2];
    r.on_done = on_done;
    r.user = &ref;
    r.n_top_logprobs = TERN_MAX_TOP_LOGPROBS + 1;
    assert_int_equal(tern_batcher_add(g.b, &r, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "n_top_logprobs"));
    rig_close(&g);
    tern_grammar_free(gr);
    tern_grammar_vocab_free(v);
}

/* Step until every request is done, summing the steps' drafted and kept tokens. */
static void run_counting(struct rig *g, int *drafted, int *accepted)
{
    while (tern_batcher_n_active(g->b)) {
        struct tern_batcher_step_info si;
        assert_tern_ok(tern_batcher_step(g->b, &si));
        *drafted += si.n_drafted;
        *accepted += si.n_accepted;
    }
}

/* Four slots drafting by lookup, 5 drafts fixed (no timing-driven controller, so the counts are
 * reproducible); *cp and *bp as used, for tests that make more. */
static void rig_open_lookup(struct rig *g, struct tern_context_params *cp, struct tern_batcher_params *bp)
{
    *cp = tern_context_default_params();
    cp->n_ctx = 256;
    cp->n_threads = 2;
    cp->n_seq = 4;
    assert_tern_ok(tern_context_create(model, cp, &g->ctx));
    *bp = tern_batcher_default_params();
    bp->n_draft = 5;
    bp->n_draft_min = 5;
    assert_tern_ok(tern_batcher_create(g->ctx, tok, bp, &g->b));
    struct tern_sampler_params sp = tern_sampler_default_params();
    for (int i = 0; i < 8; i++) assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(model), &g->s[i]));
}

/* Drafting by n-gram lookup (tern_batcher_params.n_draft): three greedy requests whose prompts
 * repeat themselves (so the lookup finds continuations) and a plain one, batched together, give
 * tern_generate's undrafted tokens; drafts were checked and some kept; a sampled request with
 * drafts finishes with its full length. */
static void test_draft(void **state)
{
    (void)state;
    struct tern_context_params cp;
    struct tern_batcher_params bp;
    struct rig g;
    rig_open_lookup(&g, &cp, &bp);
    int32_t p[3][40], q[10];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 40; i++) p[k][i] = (int32_t)(40 + k * 7 + (i % (3 + k)) * 11);
    prompt_of(5, 10, q);
    struct out o[4], ref;
    for (int k = 0; k < 3; k++) add(&g, k, p[k], 40, MAXGEN, &o[k]);
    add(&g, 3, q, 10, MAXGEN, &o[3]);
    int drafted = 0, accepted = 0;
    run_counting(&g, &drafted, &accepted);
    print_message("drafted %d, kept %d\n", drafted, accepted);
    assert_true(drafted > 0 && accepted > 0 && accepted <= drafted);
    int st_drafted = 0, st_accepted = 0;
    for (int k = 0; k < 4; k++) {
        assert_true(o[k].done);
        if (o[k].st.n_generated != MAXGEN)
            fail_msg("request %d: %d tokens, stop %d: %s", k, o[k].st.n_generated, (int)o[k].st.stop, tern_last_error());
        st_drafted += o[k].st.spec_drafted;
        st_accepted += o[k].st.spec_accepted;
        reference(k < 3 ? p[k] : q, k < 3 ? 40 : 10, MAXGEN, NULL, &ref);
        same_tokens(&o[k], &ref, k < 3 ? "drafted request" : "plain request beside them");
    }
    assert_int_equal(st_drafted, drafted);
    assert_int_equal(st_accepted, accepted);
    /* the slots' KV holds exactly their records: a repeat of a finished request reuses all but
     * its last prompt token and gives the same answer again */
    struct out again;
    add(&g, 4, p[0], 40, MAXGEN, &again);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(again.st.n_reused, 39);
    same_tokens(&again, &o[0], "repeated drafted request");
    /* sampling with drafts: full length, a sane count */
    struct tern_sampler_params sp2 = tern_sampler_default_params();
    sp2.temperature = 0.8f;
    sp2.seed = 7;
    tern_sampler_free(g.s[5]);
    assert_tern_ok(tern_sampler_create(&sp2, tern_model_n_vocab(model), &g.s[5]));
    struct out smp;
    add(&g, 5, p[1], 40, MAXGEN, &smp);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(smp.n, MAXGEN);
    assert_true(smp.st.spec_accepted <= smp.st.spec_drafted);
    rig_close(&g);
    /* out of range */
    bp.n_draft = 65;
    struct tern_batcher *bad;
    assert_tern_ok(tern_context_create(model, &cp, &g.ctx));
    assert_int_equal(tern_batcher_create(g.ctx, tok, &bp, &bad), TERN_ERR_ARG);
    tern_context_free(g.ctx);
}

/* Lookup drafting for constrained requests: three JSON-schema requests whose prompts hold JSON
 * like their answers and a free one, batched with n_draft fixed at 5, each give tern_generate's
 * undrafted answer with the same grammar (tokens, text, stop, forced and mask counts); drafts
 * were made and kept (forced runs drafted through), and the slots' KV holds their records. */
static void test_draft_grammar(void **state)
{
    (void)state;
    struct tern_grammar_vocab *v;
    assert_tern_ok(tern_grammar_vocab_create(tok, &v));
    const char *schema = "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 16}, "
                         "\"n\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 99}}, \"required\": [\"city\", \"n\"], "
                         "\"additionalProperties\": false}";
    struct tern_grammar *gr;
    assert_tern_ok(tern_grammar_from_json_schema(v, schema, strlen(schema), NULL, &gr));
    struct tern_context_params cp;
    struct tern_batcher_params bp;
    struct rig g;
    rig_open_lookup(&g, &cp, &bp);
    static const char *const texts[3] = {
        "{\"city\": \"Oslo\", \"n\": 5} {\"city\": \"Oslo\", \"n\": 5} {\"city\": \"",
        "{\"city\": \"Bergen\", \"n\": 12} and {\"city\": \"Bergen\", \"n\": 12}",
        "cities: Oslo, Bergen, Tromso; {\"city\": \"Tromso\", \"n\": 7}",
    };
    int32_t p[3][96], q[10];
    int np[3];
    for (int k = 0; k < 3; k++) {
        size_t n = 0;
        assert_tern_ok(tern_tokenize(tok, texts[k], strlen(texts[k]), 0, p[k], 96, &n));
        np[k] = (int)n;
    }
    prompt_of(7, 10, q);
    struct out o[4], ref;
    for (int k = 0; k < 3; k++) add_constrained(&g, k, p[k], np[k], gr, &o[k]);
    add(&g, 3, q, 10, MAXGEN, &o[3]);
    int drafted = 0, accepted = 0;
    run_counting(&g, &drafted, &accepted);
    print_message("constrained with lookup drafts: drafted %d, kept %d\n", drafted, accepted);
    assert_true(drafted > 0 && accepted > 0 && accepted <= drafted);
    for (int k = 0; k < 3; k++) {
        assert_true(o[k].done);
        o[k].text[o[k].len] = 0;
        print_message("request %d: %s (%d drafted, %d kept)\n", k, o[k].text, o[k].st.spec_drafted, o[k].st.spec_accepted);
        reference(p[k], np[k], 200, gr, &ref);
        same_constrained(&o[k], &ref, "constrained request with lookup drafts");
    }
    reference(q, 10, MAXGEN, NULL, &ref);
    same_tokens(&o[3], &ref, "free request beside them");
    /* the KV holds exactly the record: a repeat reuses all but its last prompt token */
    struct out again;
    add_constrained(&g, 4, p[0], np[0], gr, &again);
    while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
    assert_int_equal(again.st.n_reused, np[0] - 1);
    same_constrained(&again, &o[0], "repeated constrained request");
    /* sampled with drafts: every drafted position masked, so each answer is valid JSON */
    for (int seed = 1; seed <= 6; seed++) {
        struct tern_sampler_params sp2 = tern_sampler_default_params();
        sp2.temperature = 0.9f;
        sp2.seed = (uint64_t)seed;
        tern_sampler_free(g.s[5]);
        assert_tern_ok(tern_sampler_create(&sp2, tern_model_n_vocab(model), &g.s[5]));
        struct out smp;
        add_constrained(&g, 5, p[seed % 3], np[seed % 3], gr, &smp);
        while (tern_batcher_n_active(g.b)) assert_tern_ok(tern_batcher_step(g.b, NULL));
        smp.text[smp.len] = 0;
        if (smp.st.incomplete) continue; /* ran out of tokens inside a string: says so */
        cJSON *j = cJSON_Parse(smp.text);
        if (!j) fail_msg("sampled constrained answer is not JSON: %s", smp.text);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "city")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "n")));
        cJSON_Delete(j);
    }
    rig_close(&g);
    tern_grammar_free(gr);
    tern_grammar_vocab_free(v);
}

static void test_bad_requests(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, 1, 0);
    int32_t p[300];
    prompt_of(1, 300, p);
    struct out o;
    struct tern_batch_request r = tern_batch_request_default();
    r.prompt = p;
    r.n_prompt = 256; /* = n_ctx: no room to generate */
    r.sampler = g.s[0];
    r.on_done = on_done;
    r.user = &o;
    assert_int_equal(tern_batcher_add(g.b, &r, NULL), TERN_ERR_ARG);
    r.n_prompt = 5;
    p[2] = 1 << 30;
    assert_int_equal(tern_batcher_add(g.b, &r, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "index 2"));
    r.n_prompt = 0;
    assert_int_equal(tern_batcher_add(g.b, &r, NULL), TERN_ERR_ARG);
    assert_int_equal(tern_batcher_n_active(g.b), 0);
    rig_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_and_match), cmocka_unit_test(test_prefix_reuse),
        cmocka_unit_test(test_chunked_prefill), cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_grammar), cmocka_unit_test(test_tool_grammars),
        cmocka_unit_test(test_prefix_cache), cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_logprobs), cmocka_unit_test(test_draft),
        cmocka_unit_test(test_draft_grammar),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
