/* test_spec_api.c — the edges of the speculative decoding API and CLI: pairs that must be
 * refused (another tokenizer, another vocabulary, not a model, unknown types), parameter
 * ranges, a draft attached to the wrong generator, the statistics, the per-token hook a grammar
 * will plug in (masking drafts out, hearing only kept tokens), and `tern run|chat|bench --draft`
 * (same text as without, the stats line and JSON, flag errors). */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gen/gen_hook.h"

static char tiny_path[4096], tiny2_path[4096];

static int setup(void **state)
{
    (void)state;
    snprintf(tiny_path, sizeof tiny_path, "%s/tiny.gguf", test_tmpdir());
    snprintf(tiny2_path, sizeof tiny2_path, "%s/tiny-q4.gguf", test_tmpdir());
    if (tern_synth_model_write("tiny", "q8_0", 7, tiny_path, NULL)) return -1;
    return tern_synth_model_write("tiny", "q4_0", 7, tiny2_path, NULL) ? -1 : 0;
}

static tern_status make(const struct tern_model *m, const char *src, int n_min, int n_max,
                        struct tern_draft **d)
{
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = src;
    dp.n_min = n_min;
    dp.n_max = n_max;
    dp.n_ctx = 128;
    dp.n_threads = 1;
    return tern_draft_create(m, &dp, d);
}

static void test_bad_pairs(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(shared, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    char spm[4096], qwen[4096], vocab[4096]; /* test_shared_path reuses one buffer */
    snprintf(spm, sizeof spm, "%s", shared);
    snprintf(qwen, sizeof qwen, "%s", test_shared_path("fixtures/models/qwen2-tiny-q8_0.gguf"));
    snprintf(vocab, sizeof vocab, "%s", test_shared_path("fixtures/tokenizer/ggml-vocab-llama-spm.gguf"));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(spm, NULL, &m));
    struct tern_draft *d = NULL;
    /* another tokenizer (and vocabulary size): both named */
    assert_int_equal(make(m, qwen, 0, 0, &d), TERN_ERR_ARG);
    print_message("%s\n", tern_last_error());
    assert_non_null(strstr(tern_last_error(), "tokenizer differs"));
    assert_non_null(strstr(tern_last_error(), "32000 tokens"));
    assert_non_null(strstr(tern_last_error(), "50257 tokens"));
    /* the synthetic byte-level vocabulary: same size class, other tokens */
    assert_int_equal(make(m, tiny_path, 0, 0, &d), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "tokenizer differs"));
    /* a vocabulary-only GGUF (same tokenizer, no weights) is not a model */
    assert_int_not_equal(make(m, vocab, 0, 0, &d), TERN_OK);
    assert_non_null(strstr(tern_last_error(), "draft model"));
    /* missing file, unknown self type, empty source, ranges */
    assert_int_equal(make(m, "/nonexistent/drafter.gguf", 0, 0, &d), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "/nonexistent/drafter.gguf"));
    assert_int_equal(make(m, "self:q9_9", 0, 0, &d), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "q9_9"));
    assert_int_equal(make(m, "self:q8_k", 0, 0, &d), TERN_ERR_ARG);
    assert_int_equal(make(m, "", 0, 0, &d), TERN_ERR_ARG);
    assert_int_equal(make(m, "ngram", 0, 65, &d), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "1..64"));
    assert_int_equal(make(m, "ngram", 5, 3, &d), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "n_min 5"));
    assert_null(d);
    /* the same file as drafter is fine (same tokenizer) */
    assert_tern_ok(make(m, spm, 0, 0, &d));
    assert_string_equal(tern_draft_kind(d), "model");
    assert_non_null(tern_draft_model(d));
    tern_draft_free(d);
    tern_model_free(m);
}

static void test_attach(void **state)
{
    (void)state;
    struct tern_model *a, *b;
    assert_tern_ok(tern_model_load(tiny_path, NULL, &a));
    assert_tern_ok(tern_model_load(tiny2_path, NULL, &b));
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(a), &tk));
    struct tern_context_params cp = {.n_ctx = 128, .n_threads = 1};
    struct tern_context *ca, *ca2;
    assert_tern_ok(tern_context_create(a, &cp, &ca));
    assert_tern_ok(tern_context_create(a, &cp, &ca2));
    struct tern_generator *g, *g2;
    assert_tern_ok(tern_generator_create(ca, tk, &g));
    assert_tern_ok(tern_generator_create(ca2, tk, &g2));
    struct tern_draft *db, *da;
    assert_tern_ok(make(b, "ngram", 0, 0, &db)); /* made for model b */
    assert_int_equal(tern_generator_set_draft(g, db), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "another model"));
    assert_tern_ok(make(a, "self:q4_0", 0, 0, &da));
    assert_string_equal(tern_draft_kind(da), "self");
    assert_tern_ok(tern_generator_set_draft(g, da));
    assert_int_equal(tern_generator_set_draft(g2, da), TERN_ERR_ARG); /* one generator at a time */
    assert_non_null(strstr(tern_last_error(), "another generator"));
    assert_tern_ok(tern_generator_set_draft(g, da)); /* again: fine */
    tern_generator_free(g);                        /* releases it */
    assert_tern_ok(tern_generator_set_draft(g2, da));
    assert_tern_ok(tern_generator_set_draft(g2, NULL));
    tern_generator_free(g2);
    tern_draft_free(da);
    tern_draft_free(db);
    tern_context_free(ca);
    tern_context_free(ca2);
    tern_tokenizer_free(tk);
    tern_model_free(a);
    tern_model_free(b);
}

/* ---- the per-token hook ---- */

struct hook_state {
    int32_t banned;
    int32_t heard[256];
    int n_heard;
};
static void hook_mask(void *user, float *logits, int n_vocab)
{
    struct hook_state *h = user;
    if (h->banned >= 0 && h->banned < n_vocab) logits[h->banned] = -INFINITY;
}
static void hook_accept(void *user, int32_t tok)
{
    struct hook_state *h = user;
    if (h->n_heard < 256) h->heard[h->n_heard] = tok;
    h->n_heard++;
}
struct toks {
    int32_t t[256];
    int n;
    int stop_at; /* on_token asks to stop at this index (0 = never) */
};
static int on_tok(int32_t id, void *user)
{
    struct toks *o = user;
    if (o->n < 256) o->t[o->n] = id;
    o->n++;
    return o->stop_at && o->n - 1 == o->stop_at;
}

static void hooked(struct tern_generator *g, struct tern_sampler *s, struct tern_draft *d,
                   const int32_t *p, int n, struct hook_state *h, struct toks *o,
                   struct tern_gen_stats *st)
{
    struct gen_token_hook hk = {.user = h, .mask = hook_mask, .accept = hook_accept};
    assert_tern_ok(gen_generator_set_hook(g, &hk));
    assert_tern_ok(tern_generator_set_draft(g, d));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 48;
    gp.ignore_eog = true;
    gp.on_token = on_tok;
    h->n_heard = 0;
    o->n = 0; /* o->stop_at is the caller's */
    tern_generator_reset(g);
    assert_tern_ok(tern_generate(g, s, p, n, &gp, NULL, o, st));
    assert_tern_ok(gen_generator_set_hook(g, NULL));
    assert_tern_ok(tern_generator_set_draft(g, NULL));
}

static void test_hook(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tk));
    struct tern_context_params cp = {.n_ctx = 256, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tk, &g));
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    struct tern_draft *d;
    assert_tern_ok(make(m, "ngram", 4, 4, &d));
    /* qwen2-tiny repeats 49342 after this prompt; the prompt also holds it, so the lookup keeps
     * drafting it — and the hook bans it */
    int32_t p[16];
    for (int i = 0; i < 16; i++) p[i] = i % 2 ? 49342 : 1000 + i;
    struct hook_state h1 = {.banned = 49342}, h2 = {.banned = 49342};
    struct toks a = {.stop_at = 0}, b = {.stop_at = 0};
    struct tern_gen_stats sa, sb;
    hooked(g, s, NULL, p, 16, &h1, &a, &sa);
    hooked(g, s, d, p, 16, &h2, &b, &sb);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.t, b.t, sizeof(int32_t) * (size_t)a.n);
    for (int i = 0; i < b.n; i++) assert_int_not_equal(b.t[i], 49342);
    /* the hook heard exactly the output, in order (kept drafts included, rejected ones not) */
    assert_int_equal(h2.n_heard, b.n);
    assert_memory_equal(h2.heard, b.t, sizeof(int32_t) * (size_t)b.n);
    print_message("hook: %d tokens, %d drafted, %d accepted\n", b.n, sb.spec_drafted, sb.spec_accepted);
    assert_true(sb.spec_drafted > 0);
    /* without the ban the output repeats 49342 */
    struct hook_state h3 = {.banned = -1};
    hooked(g, s, d, p, 16, &h3, &b, &sb);
    int reps = 0;
    for (int i = 0; i < b.n; i++) reps += b.t[i] == 49342;
    assert_true(reps > b.n / 2);
    assert_true(sb.spec_accepted > 0);
    /* a stop in the middle of a round of kept drafts (on_token at each index 5..20): the hook
     * has heard exactly the tokens handed out, not the later drafts of that round */
    for (int at = 5; at <= 20; at++) {
        struct hook_state h4 = {.banned = -1};
        b.stop_at = at;
        hooked(g, s, d, p, 16, &h4, &b, &sb);
        assert_int_equal(b.n, at + 1);
        assert_int_equal(h4.n_heard, b.n);
        assert_memory_equal(h4.heard, b.t, sizeof(int32_t) * (size_t)b.n);
    }
    tern_draft_free(d);
    tern_sampler_free(s);
    tern_generator_free(g);
    tern_context_free(ctx);
    tern_tokenizer_free(tk);
    tern_model_free(m);
}

/* ---- statistics ---- */

static void test_stats(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tk));
    struct tern_context_params cp = {.n_ctx = 256, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tk, &g));
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    struct tern_draft *d;
    assert_tern_ok(make(m, "ngram", 4, 4, &d));
    assert_tern_ok(tern_generator_set_draft(g, d));
    int32_t p[8] = {11, 22, 33, 44, 55, 66, 77, 88};
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 101;
    gp.ignore_eog = true;
    struct tern_gen_stats st;
    assert_tern_ok(tern_generate(g, s, p, 8, &gp, NULL, NULL, &st));
    /* every pass after the first token is a round or a plain step; each round yields its kept
     * drafts plus one token of the target's */
    assert_int_equal(st.n_generated, 101);
    assert_true(st.spec_rounds > 0 && st.spec_drafted == 4 * st.spec_rounds);
    assert_true(st.spec_accepted <= st.spec_drafted);
    assert_true(st.spec_accepted + st.spec_rounds + st.spec_plain_steps >= 100);
    assert_true(fabs(st.spec_accept_rate - (double)st.spec_accepted / st.spec_drafted) < 1e-12);
    assert_true(fabs(st.spec_mean_accepted - (double)st.spec_accepted / st.spec_rounds) < 1e-12);
    assert_true(st.spec_rollback_p50 >= 0 && st.spec_rollback_p50 <= st.spec_rollback_p95 &&
                st.spec_rollback_p95 <= 1);
    assert_true(st.spec_verify_ms > 0 && st.spec_draft_ms >= 0);
    assert_true(st.spec_exact);
    print_message("stats: %d rounds, %d plain, %d/%d, rollback p50 %.2f p95 %.2f\n", st.spec_rounds,
                  st.spec_plain_steps, st.spec_accepted, st.spec_drafted, st.spec_rollback_p50,
                  st.spec_rollback_p95);
    /* without a draft: all zero */
    assert_tern_ok(tern_generator_set_draft(g, NULL));
    assert_tern_ok(tern_generate(g, s, p, 8, &gp, NULL, NULL, &st));
    assert_int_equal(st.spec_rounds + st.spec_drafted + st.spec_plain_steps, 0);
    assert_false(st.spec_exact);
    tern_draft_free(d);
    tern_sampler_free(s);
    tern_generator_free(g);
    tern_context_free(ctx);
    tern_tokenizer_free(tk);
    tern_model_free(m);
}

/* ---- CLI ---- */

static int sh(const char *cmd, char *out, size_t cap)
{
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void **state)
{
    (void)state;
    static char plain[65536], spec[65536], cmd[16384];
    const char *tern = test_tern_bin();
    /* the same text with and without a draft, and the stats line */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'one two three one two three one two' -n 40 -t 2 2>/dev/null", tern, tiny_path);
    assert_int_equal(sh(cmd, plain, sizeof plain), 0);
    const char *srcs[] = {"ngram", "self:q4_0", tiny2_path};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s run -m %s -p 'one two three one two three one two' -n 40 -t 2 --draft %s "
                 "--draft-max 5 2>%s/err.txt", tern, tiny_path, srcs[i], test_tmpdir());
        assert_int_equal(sh(cmd, spec, sizeof spec), 0);
        assert_string_equal(plain, spec);
        char ep[4200];
        snprintf(ep, sizeof ep, "%s/err.txt", test_tmpdir());
        char *err = test_read_file(ep, NULL);
        assert_non_null(err);
        assert_non_null(strstr(err, "tern run: speculative ("));
        assert_non_null(strstr(err, "greedy output exact"));
        free(err);
    }
    /* --json carries a spec object */
    snprintf(cmd, sizeof cmd, "%s run -m %s --tokens 1,2,3 -n 20 -t 1 --draft ngram --json", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 0);
    assert_non_null(strstr(spec, "\"spec\":{\"draft\":\"ngram\",\"drafted\":"));
    assert_non_null(strstr(spec, "\"rollback_p95\":"));
    /* flag errors */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x --draft-max 0 --draft ngram 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 2);
    assert_non_null(strstr(spec, "--draft-max: 0 is out of range 1..64"));
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x --draft-min 6 --draft-max 3 --draft ngram 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 2);
    assert_non_null(strstr(spec, "exceeds --draft-max"));
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x --draft-max 3 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 2);
    assert_non_null(strstr(spec, "need --draft SRC"));
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x --draft 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 2);
    /* a drafter with another tokenizer: exit 1, both named */
    const char *qwen = test_shared_path("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (qwen) {
        snprintf(cmd, sizeof cmd, "%s run -m %s -p x --draft %s 2>&1", tern, tiny_path, qwen);
        assert_int_equal(sh(cmd, spec, sizeof spec), 1);
        assert_non_null(strstr(spec, "tokenizer differs"));
    }
    /* chat: two turns with a draft give the plain answers */
    snprintf(cmd, sizeof cmd, "printf 'hello\\nagain\\n' | %s chat -m %s -n 24 -t 2 2>/dev/null", tern, tiny_path);
    assert_int_equal(sh(cmd, plain, sizeof plain), 0);
    snprintf(cmd, sizeof cmd, "printf 'hello\\nagain\\n' | %s chat -m %s -n 24 -t 2 --draft self:q8_0 2>%s/err.txt",
             tern, tiny_path, test_tmpdir());
    assert_int_equal(sh(cmd, spec, sizeof spec), 0);
    assert_string_equal(plain, spec);
    snprintf(cmd, sizeof cmd, "printf 'hello\\n' | %s chat -m %s -n 12 -t 1 --draft ngram --json", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 0);
    assert_non_null(strstr(spec, "\"spec\":{\"draft\":\"ngram\""));

    /* bench: one object per prompt (4 built in + a file), identical output, a speed-up; on the
     * layer-scaled copy (written beside the model) the target repeats and drafts are accepted */
    char pf[4200];
    snprintf(pf, sizeof pf, "%s/prompt.txt", test_tmpdir());
    FILE *f = fopen(pf, "w");
    assert_non_null(f);
    fputs("a b c a b c a b c a b", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s bench --draft self:q8_0 --draft-min 3 --draft-max 3 -m %s -n 12 -r 1 -t 1 --prompt-file %s "
             "--scale-layers 0.05 --json 2>/dev/null", tern, tiny_path, pf);
    assert_int_equal(sh(cmd, spec, sizeof spec), 0);
    cJSON *arr = cJSON_Parse(spec);
    assert_non_null(arr);
    assert_int_equal(cJSON_GetArraySize(arr), 6); /* + the verify costs */
    const cJSON *vc = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 5), "verify_cost");
    assert_int_equal(cJSON_GetArraySize(vc), 9);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(vc, 8), "exact_ms")->valuedouble > 0);
    long accepted = 0;
    for (int i = 0; i < 5; i++) {
        const cJSON *o = cJSON_GetArrayItem(arr, i);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "identical")));
        assert_true(cJSON_GetObjectItem(o, "speedup")->valuedouble > 0);
        accepted += (long)cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "accepted")->valuedouble;
    }
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 4), "prompt")), "prompt.txt");
    assert_true(accepted > 0);
    cJSON_Delete(arr);
    char scaled[4200];
    snprintf(scaled, sizeof scaled, "%s/tiny-layers0.05.gguf", test_tmpdir());
    FILE *sf = fopen(scaled, "rb");
    assert_non_null(sf);
    fclose(sf);
    snprintf(cmd, sizeof cmd, "%s bench -m %s --temp 0.5 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, spec, sizeof spec), 2);
    assert_non_null(strstr(spec, "apply to --draft only"));
}

/* --widen-ffn: the copy computes the same function (greedy text equal to the original's, token for
 * token, at 1 and 2 threads) with N times the feed-forward width; bad values are refused. */
static void test_widen_ffn(void **state)
{
    (void)state;
    static char plain[65536], wide[65536], cmd[16384];
    const char *tern = test_tern_bin();
    snprintf(cmd, sizeof cmd, "%s bench --draft ngram --widen-ffn 3 -m %s -n 8 -r 1 -t 1 --json 2>&1 >/dev/null", tern, tiny_path);
    assert_int_equal(sh(cmd, wide, sizeof wide), 0);
    assert_non_null(strstr(wide, "the new rows zero"));
    char widened[4200];
    snprintf(widened, sizeof widened, "%s/tiny-ffnx3.gguf", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s check -m %s | grep '^n_ff'", tern, tiny_path);
    assert_int_equal(sh(cmd, plain, sizeof plain), 0);
    long n_ff = 0;
    assert_int_equal(sscanf(plain, "n_ff: %ld", &n_ff), 1);
    snprintf(cmd, sizeof cmd, "%s check -m %s | grep '^n_ff'", tern, widened);
    assert_int_equal(sh(cmd, wide, sizeof wide), 0);
    long n_ff3 = 0;
    assert_int_equal(sscanf(wide, "n_ff: %ld", &n_ff3), 1);
    assert_int_equal(n_ff3, 3 * n_ff);
    for (int t = 1; t <= 2; t++) {
        snprintf(cmd, sizeof cmd, "%s run -m %s -p 'one two three four' -n 48 -t %d --json 2>/dev/null | jq -c .tokens", tern, tiny_path, t);
        assert_int_equal(sh(cmd, plain, sizeof plain), 0);
        snprintf(cmd, sizeof cmd, "%s run -m %s -p 'one two three four' -n 48 -t %d --json 2>/dev/null | jq -c .tokens", tern, widened, t);
        assert_int_equal(sh(cmd, wide, sizeof wide), 0);
        assert_true(strlen(plain) > 40);
        assert_string_equal(plain, wide);
    }
    snprintf(cmd, sizeof cmd, "%s bench --draft ngram --widen-ffn 1 -m %s 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, wide, sizeof wide), 2);
    assert_non_null(strstr(wide, "--widen-ffn"));
    snprintf(cmd, sizeof cmd, "%s bench --widen-ffn 4 -m %s 2>&1", tern, tiny_path);
    assert_int_equal(sh(cmd, wide, sizeof wide), 2);
    assert_non_null(strstr(wide, "apply to --draft only"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_pairs),
        cmocka_unit_test(test_attach),
        cmocka_unit_test(test_hook),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_widen_ffn),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
