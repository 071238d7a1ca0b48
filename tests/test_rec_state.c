/* test_rec_state.c — the recurrent state of qwen35's Gated DeltaNet layers takes part in
 * everything the KV cache does, and each of those gives the bits of a run that never did it:
 *  - rollback (speculative decoding): decode a draft batch, truncate to any position inside it,
 *    continue: the logits equal those of a context that only ever saw the kept tokens;
 *  - truncation outside what the state keeps is refused (and tern_kv_seq_can_truncate says so),
 *    truncation to 0 starts afresh;
 *  - snapshots: restore the state with the KV;
 *  - the prefix cache: a restored prefix gives the cold run's logits, also for a longer prompt
 *    that extends it (the next turn of a chat);
 *  - several sequences in one batch: each gets the logits it gets alone;
 *  - tern_kv_seq_copy carries the state.
 * Model: tern synth qwen35-tiny (F16: 3 DeltaNet layers, 1 gated attention layer). Exact
 * batches make every token's matmuls independent of the batch, so comparisons are bitwise. */
#include "test_support.h"

#include <dirent.h>
#include <sys/stat.h>

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/delta.h"
#include "kernels/kernels.h"

static struct tern_model *model;
static int nv;

static int setup(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/rec-qwen35-tiny.gguf", test_tmpdir());
    if (tern_synth_model_write("qwen35-tiny", "f16", 11, path, NULL)) return -1;
    if (tern_model_load(path, NULL, &model)) return -1;
    nv = tern_model_n_vocab(model);
    remove(path);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tern_model_free(model);
    return 0;
}

static struct tern_context *new_ctx(int n_seq, bool exact)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    cp.n_seq = n_seq;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(model, &cp, &ctx));
    tern_context_set_exact_batches(ctx, exact);
    return ctx;
}

static void fill_tokens(int32_t *t, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 7919u + seed * 104729u + 13u) % 500u);
}

/* logits of the last of tokens[0..n) decoded from scratch in one call */
static void cold_logits(const int32_t *tok, int n, float *out, bool exact)
{
    struct tern_context *c = new_ctx(1, exact);
    assert_tern_ok(tern_decode(c, tok, n, 0, TERN_LOGITS_LAST));
    memcpy(out, tern_context_logits(c, n - 1), sizeof(float) * (size_t)nv);
    tern_context_free(c);
}

static int n_diff(const float *a, const float *b)
{
    int d = 0;
    for (int i = 0; i < nv; i++) d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

/* Speculative decoding's rollback: a draft of 9 decoded in one call, then every possible
 * acceptance k (truncate to prompt + k) followed by the next token gives the never-drafted
 * logits; so does going back twice inside the window. */
static void test_rollback_inside_the_last_call(void **state)
{
    (void)state;
    enum { P = 40, D = 9 };
    int32_t tok[P + D + 1];
    fill_tokens(tok, P + D + 1, 1);
    float *want = malloc(sizeof(float) * (size_t)nv), *got = malloc(sizeof(float) * (size_t)nv);
    struct tern_context *ctx = new_ctx(1, true);
    for (int k = 0; k <= D; k++) {
        assert_tern_ok(tern_kv_truncate(ctx, 0));
        assert_tern_ok(tern_decode(ctx, tok, P, 0, TERN_LOGITS_LAST));
        assert_tern_ok(tern_decode(ctx, tok + P, D, P, TERN_LOGITS_ALL)); /* the draft */
        assert_true(tern_kv_seq_can_truncate(ctx, 0, P + k));
        assert_tern_ok(tern_kv_truncate(ctx, P + k));
        /* the token after the kept ones: a different one than the draft had there */
        const int32_t next = (tok[P + k] + 17) % 500;
        assert_tern_ok(tern_decode(ctx, &next, 1, P + k, TERN_LOGITS_LAST));
        memcpy(got, tern_context_logits(ctx, 0), sizeof(float) * (size_t)nv);
        int32_t cold[P + D + 1];
        memcpy(cold, tok, sizeof(int32_t) * (size_t)(P + k));
        cold[P + k] = next;
        cold_logits(cold, P + k + 1, want, true);
        const int d = n_diff(got, want);
        print_message("draft of %d, %d kept: %d of %d logits differ from never drafting\n", D, k, d, nv);
        assert_int_equal(d, 0);
    }
    /* twice inside one window: keep 6, then 2 */
    assert_tern_ok(tern_kv_truncate(ctx, 0));
    assert_tern_ok(tern_decode(ctx, tok, P + D, 0, TERN_LOGITS_LAST));
    assert_tern_ok(tern_decode(ctx, tok + P + D, 1, P + D, TERN_LOGITS_LAST));
    assert_tern_ok(tern_decode(ctx, tok, 1, P + D + 1, TERN_LOGITS_LAST)); /* a one-token call */
    assert_false(tern_kv_seq_can_truncate(ctx, 0, P + D)); /* before the last call */
    tern_status st = tern_kv_truncate(ctx, P + D);
    assert_int_equal(st, TERN_ERR_UNSUPPORTED);
    print_message("refused: %s\n", tern_last_error());
    assert_non_null(strstr(tern_last_error(), "recurrent state"));
    assert_int_equal(tern_kv_n_pos(ctx), P + D + 2); /* unchanged */
    tern_context_free(ctx);
    free(want);
    free(got);
}

/* Truncating to 0 then decoding again equals a fresh context; a call longer than the rollback
 * window still keeps its last tokens. */
static void test_truncate_to_zero_and_long_calls(void **state)
{
    (void)state;
    enum { N = 300 };
    int32_t tok[N];
    fill_tokens(tok, N, 2);
    float *want = malloc(sizeof(float) * (size_t)nv);
    cold_logits(tok, N, want, true);
    struct tern_context *ctx = new_ctx(1, true);
    int32_t other[N];
    fill_tokens(other, N, 3);
    assert_tern_ok(tern_decode(ctx, other, 100, 0, TERN_LOGITS_LAST));
    assert_tern_ok(tern_kv_truncate(ctx, 0));
    assert_tern_ok(tern_decode(ctx, tok, N, 0, TERN_LOGITS_LAST));
    assert_int_equal(n_diff(tern_context_logits(ctx, N - 1), want), 0);
    /* the last call had 300 tokens: the window holds its last ones, not its start */
    assert_true(tern_kv_seq_can_truncate(ctx, 0, N - 10));
    assert_false(tern_kv_seq_can_truncate(ctx, 0, 10));
    assert_true(tern_kv_seq_can_truncate(ctx, 0, 0));
    assert_tern_ok(tern_kv_truncate(ctx, N - 10));
    const int32_t next = 77;
    assert_tern_ok(tern_decode(ctx, &next, 1, N - 10, TERN_LOGITS_LAST));
    int32_t cold[N];
    memcpy(cold, tok, sizeof cold);
    cold[N - 10] = next;
    cold_logits(cold, N - 9, want, true);
    assert_int_equal(n_diff(tern_context_logits(ctx, 0), want), 0);
    tern_context_free(ctx);
    free(want);
}

/* A snapshot holds the state with the KV: restore, continue, get the cold logits. */
static void test_snapshot_restores_the_state(void **state)
{
    (void)state;
    enum { P = 70, M = 20 };
    int32_t tok[P + M];
    fill_tokens(tok, P + M, 4);
    float *want = malloc(sizeof(float) * (size_t)nv);
    cold_logits(tok, P + M, want, true);
    struct tern_context *a = new_ctx(1, true), *b = new_ctx(1, true);
    assert_tern_ok(tern_decode(a, tok, P, 0, TERN_LOGITS_LAST));
    struct tern_kv_snapshot *snap;
    tern_status st = tern_kv_snapshot_create(a, P - 50, &snap); /* no state kept there */
    assert_int_equal(st, TERN_ERR_UNSUPPORTED);
    assert_tern_ok(tern_kv_snapshot_create(a, P, &snap));
    print_message("snapshot of %d positions: %llu bytes (KV and state)\n", P,
                  (unsigned long long)tern_kv_snapshot_bytes(snap));
    int32_t other[P];
    fill_tokens(other, P, 5);
    assert_tern_ok(tern_decode(b, other, P, 0, TERN_LOGITS_LAST)); /* b holds something else */
    assert_tern_ok(tern_kv_snapshot_restore(b, snap));
    assert_tern_ok(tern_decode(b, tok + P, M, P, TERN_LOGITS_LAST));
    assert_int_equal(n_diff(tern_context_logits(b, M - 1), want), 0);
    tern_kv_snapshot_free(snap);
    tern_context_free(a);
    tern_context_free(b);
    free(want);
}

/* The prefix cache: a repeated prompt and an extended one restore a state and give the cold
 * run's logits; without exact batches, as tern promises for the cache; the same through a cache
 * directory saved and loaded again. */
static void test_prefix_cache_restores_the_state(void **state)
{
    (void)state;
    enum { N = 150, X = 60 };
    int32_t tok[N + X];
    fill_tokens(tok, N + X, 6);
    float *want = malloc(sizeof(float) * (size_t)nv);
    struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
    pp.block_tokens = 16;
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pc));
    struct tern_context *ctx = new_ctx(1, false);
    int reused = -1;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, tok, N, &reused));
    assert_int_equal(reused, 0);
    struct tern_prefix_cache_stats s;
    tern_prefix_cache_get_stats(pc, &s);
    print_message("first prefill: %llu blocks, %llu with a state, %llu bytes\n",
                  (unsigned long long)s.n_blocks, (unsigned long long)s.n_states,
                  (unsigned long long)s.bytes);
    assert_int_equal(s.n_states, 1);
    for (int rep = 0; rep < 2; rep++) {
        const int n = rep ? N + X : N; /* the same prompt, then one extending it */
        cold_logits(tok, n, want, false);
        assert_tern_ok(tern_kv_truncate(ctx, 0));
        assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, tok, n, &reused));
        const int d = n_diff(tern_context_logits(ctx, n - 1 - reused), want);
        print_message("prompt of %d: %d restored from the cache, %d of %d logits differ from the "
                      "cold run\n", n, reused, d, nv);
        assert_true(reused >= 112 && reused % 16 == 0);
        assert_int_equal(d, 0);
    }
    /* a cache directory keeps the states: saved, loaded by a new cache (as by the next run), the
     * same prompts restore them and give the cold run's logits */
    char cdir[4200];
    snprintf(cdir, sizeof cdir, "%.4000s/rec-cache", test_tmpdir());
    pp.dir = cdir;
    struct tern_prefix_cache *pf = NULL;
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pf));
    assert_tern_ok(tern_kv_truncate(ctx, 0));
    assert_tern_ok(tern_prefix_cache_prefill(pf, ctx, tok, N, &reused));
    assert_tern_ok(tern_prefix_cache_save(pf));
    tern_prefix_cache_free(pf);
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pf));
    tern_prefix_cache_get_stats(pf, &s);
    print_message("from %s: %llu blocks loaded, %llu with a state\n", cdir,
                  (unsigned long long)s.loaded_blocks, (unsigned long long)s.n_states);
    assert_true(s.loaded_blocks >= 7);
    assert_int_equal(s.n_states, 1);
    for (int rep = 0; rep < 2; rep++) {
        const int n = rep ? N + X : N;
        cold_logits(tok, n, want, false);
        struct tern_context *c2 = new_ctx(1, false);
        assert_tern_ok(tern_prefix_cache_prefill(pf, c2, tok, n, &reused));
        const int d = n_diff(tern_context_logits(c2, n - 1 - reused), want);
        print_message("prompt of %d after a reload: %d restored, %d logits differ\n", n, reused, d);
        assert_true(reused >= 112 && reused % 16 == 0);
        assert_int_equal(d, 0);
        tern_context_free(c2);
    }
    tern_prefix_cache_free(pf);
    /* a damaged state (one byte of the largest file, the block that carries it) is refused with
     * its file, never restored: the prompt then starts from 0 and still gives the cold logits */
    char big[4800] = "";
    long big_size = 0;
    DIR *dd = opendir(cdir);
    assert_non_null(dd);
    for (struct dirent *e; (e = readdir(dd));) {
        char f[4800];
        struct stat sb;
        snprintf(f, sizeof f, "%s/%s", cdir, e->d_name);
        if (stat(f, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > big_size) {
            big_size = (long)sb.st_size;
            snprintf(big, sizeof big, "%s", f);
        }
    }
    closedir(dd);
    FILE *bf = fopen(big, "r+b");
    assert_non_null(bf);
    fseek(bf, big_size - 5, SEEK_SET);
    const int c0 = fgetc(bf);
    fseek(bf, big_size - 5, SEEK_SET);
    fputc(c0 ^ 0x40, bf);
    fclose(bf);
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pf));
    tern_prefix_cache_get_stats(pf, &s);
    assert_int_equal(s.refused_files, 1);
    assert_int_equal(s.n_states, 0);
    print_message("damaged state: %s\n", tern_prefix_cache_warning(pf));
    cold_logits(tok, N, want, false);
    struct tern_context *c3 = new_ctx(1, false);
    assert_tern_ok(tern_prefix_cache_prefill(pf, c3, tok, N, &reused));
    assert_int_equal(reused, 0);
    assert_int_equal(n_diff(tern_context_logits(c3, N - 1), want), 0);
    tern_context_free(c3);
    tern_prefix_cache_free(pf);
    tern_prefix_cache_free(pc);
    tern_context_free(ctx);
    free(want);
}

/* Two sequences interleaved in one batch get what each gets alone; a sequence copy carries
 * the state. */
static void test_sequences_in_one_batch(void **state)
{
    (void)state;
    enum { N = 50 };
    int32_t a[N], b[N];
    fill_tokens(a, N, 7);
    fill_tokens(b, N, 8);
    float *wa = malloc(sizeof(float) * (size_t)nv), *wb = malloc(sizeof(float) * (size_t)nv);
    cold_logits(a, N, wa, true);
    cold_logits(b, N, wb, true);
    struct tern_context *ctx = new_ctx(3, true);
    int32_t tok[2 * N], seq[2 * N];
    bool want_l[2 * N];
    for (int i = 0; i < N; i++) {
        tok[2 * i] = a[i];
        seq[2 * i] = 0;
        tok[2 * i + 1] = b[i];
        seq[2 * i + 1] = 1;
        want_l[2 * i] = want_l[2 * i + 1] = i == N - 1;
    }
    const struct tern_batch bt = {.n = 2 * N, .tokens = tok, .seq = seq, .logits = want_l};
    assert_tern_ok(tern_decode_batch(ctx, &bt));
    assert_int_equal(n_diff(tern_context_logits(ctx, 2 * N - 2), wa), 0);
    assert_int_equal(n_diff(tern_context_logits(ctx, 2 * N - 1), wb), 0);
    /* a copy of the first N/2 positions of sequence 0 (inside its last call: replayed into
     * sequence 2) continues as a cold run of those tokens */
    assert_tern_ok(tern_kv_seq_copy(ctx, 0, 2, N / 2));
    int32_t half[N / 2 + 1];
    memcpy(half, a, sizeof(int32_t) * (N / 2));
    half[N / 2] = 9;
    cold_logits(half, N / 2 + 1, wa, true);
    const int32_t h9 = 9, s2 = 2;
    const bool l1 = true;
    const struct tern_batch bh = {.n = 1, .tokens = &h9, .seq = &s2, .logits = &l1};
    assert_tern_ok(tern_decode_batch(ctx, &bh));
    assert_int_equal(n_diff(tern_context_logits(ctx, 0), wa), 0);
    /* copy sequence 0 to 2 and continue both: same logits */
    assert_tern_ok(tern_kv_seq_copy(ctx, 0, 2, N));
    const int32_t nt[2] = {5, 5}, ns[2] = {0, 2};
    const bool nl[2] = {true, true};
    const struct tern_batch b2 = {.n = 2, .tokens = nt, .seq = ns, .logits = nl};
    assert_tern_ok(tern_decode_batch(ctx, &b2));
    assert_int_equal(n_diff(tern_context_logits(ctx, 0), tern_context_logits(ctx, 1)), 0);
    /* sequence 0's last call started at N: N/2 is out of reach now */
    assert_int_equal(tern_kv_seq_copy(ctx, 0, 2, N / 2), TERN_ERR_UNSUPPORTED);
    tern_context_free(ctx);
    free(wa);
    free(wb);
}

/* Speculative decoding end to end: prompt lookup and a self:q8_0 drafter (itself recurrent)
 * give the plain greedy tokens, and the context afterwards holds the plain run's KV and state
 * (one more token gets the same logits); a second turn extending the first reuses what it can. */
struct gout {
    int32_t tok[256];
    int n;
};
static int on_tok(int32_t id, void *user)
{
    struct gout *o = user;
    if (o->n < 256) o->tok[o->n++] = id;
    return 0;
}

static void run_gen(struct tern_generator *g, struct tern_sampler *smp, struct tern_draft *d,
                    const int32_t *p, int n, struct gout *o, struct tern_gen_stats *st)
{
    assert_tern_ok(tern_generator_set_draft(g, d));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 40;
    gp.ignore_eog = true;
    gp.on_token = on_tok;
    o->n = 0;
    struct tern_gen_stats local;
    assert_tern_ok(tern_generate(g, smp, p, n, &gp, NULL, o, st ? st : &local));
    assert_tern_ok(tern_generator_set_draft(g, NULL));
}

static void test_speculative_decoding(void **state)
{
    (void)state;
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(model), &tk));
    struct tern_context *ctx = new_ctx(1, false);
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tk, &g));
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *smp;
    assert_tern_ok(tern_sampler_create(&sp, nv, &smp));
    static const char *sources[] = {"ngram", "self:q8_0"};
    int32_t p[120];
    for (int i = 0; i < 120; i++) p[i] = i < 6 ? (int32_t)(40 + 31 * i) : p[i - 6]; /* repeats */
    float *pa = malloc(sizeof(float) * (size_t)nv), *pb = malloc(sizeof(float) * (size_t)nv);
    for (int si = 0; si < 2; si++) {
        struct tern_draft_params dp = tern_draft_default_params();
        dp.source = sources[si];
        dp.n_min = dp.n_max = 4;
        dp.n_ctx = 512;
        dp.n_threads = 2;
        struct tern_draft *d;
        assert_tern_ok(tern_draft_create(model, &dp, &d));
        struct gout a, b;
        struct tern_gen_stats sa, sb;
        for (int turn = 0; turn < 2; turn++) {
            /* turn 2: turn 1's prompt, its answer, more */
            int32_t q[240];
            int n = 60;
            memcpy(q, p, sizeof(int32_t) * 60);
            if (turn) {
                memcpy(q + 60, a.tok, sizeof(int32_t) * (size_t)a.n);
                memcpy(q + 60 + a.n, p + 60, sizeof(int32_t) * 30);
                n = 60 + a.n + 30;
            } else {
                tern_generator_reset(g);
            }
            struct gout a2;
            if (turn) {
                /* plain, continuing from the plain first turn */
                tern_generator_reset(g);
                run_gen(g, smp, NULL, p, 60, &a2, &sa);
            }
            run_gen(g, smp, NULL, q, n, &a, &sa);
            const int32_t t = 300;
            int np = tern_kv_n_pos(ctx);
            assert_tern_ok(tern_decode(ctx, &t, 1, np, TERN_LOGITS_LAST));
            memcpy(pa, tern_context_logits(ctx, 0), sizeof(float) * (size_t)nv);
            assert_tern_ok(tern_kv_truncate(ctx, np));
            tern_generator_reset(g);
            if (turn) run_gen(g, smp, d, p, 60, &b, &sb);
            run_gen(g, smp, d, q, n, &b, &sb);
            np = tern_kv_n_pos(ctx);
            assert_tern_ok(tern_decode(ctx, &t, 1, np, TERN_LOGITS_LAST));
            memcpy(pb, tern_context_logits(ctx, 0), sizeof(float) * (size_t)nv);
            assert_tern_ok(tern_kv_truncate(ctx, np));
            print_message("%s, turn %d: plain %d tokens, speculative %d (%d drafted, %d accepted, "
                          "%d reused)\n", sources[si], turn + 1, a.n, b.n, sb.spec_drafted,
                          sb.spec_accepted, sb.n_reused);
            assert_int_equal(a.n, b.n);
            assert_memory_equal(a.tok, b.tok, sizeof(int32_t) * (size_t)a.n);
            assert_true(sb.spec_drafted > 0);
            assert_int_equal(n_diff(pa, pb), 0);
            if (turn) assert_int_equal(sa.n_reused, sb.n_reused);
        }
        tern_draft_free(d);
    }
    free(pa);
    free(pb);
    tern_sampler_free(smp);
    tern_generator_free(g);
    tern_context_free(ctx);
    tern_tokenizer_free(tk);
}

/* The batcher: three requests at once (one sequence each, prefilled in chunks, n-gram drafts
 * verified and rolled back per slot in the shared passes), then the first prompt again (its slot
 * holds a longer history the state cannot go back into): every answer is the one tern_generate
 * gives alone. */
static int n_done;
static void on_done(const struct tern_gen_stats *st, void *user)
{
    (void)st;
    (void)user; /* the request's gout */
    n_done++;
}

static void test_batcher_requests(void **state)
{
    (void)state;
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(model), &tk));
    struct tern_context *ctx = new_ctx(3, true), *solo = new_ctx(1, true);
    struct tern_batcher_params bp = tern_batcher_default_params();
    bp.n_draft = 4;
    bp.n_prefill = 40;
    struct tern_batcher *b;
    assert_tern_ok(tern_batcher_create(ctx, tk, &bp, &b));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(solo, tk, &g));
    enum { NR = 4 };
    int32_t prompts[NR][100];
    int np[NR];
    for (int r = 0; r < 3; r++) {
        np[r] = 50 + 17 * r;
        for (int i = 0; i < np[r]; i++) prompts[r][i] = i < 5 ? (int32_t)(60 + 41 * i + r) : prompts[r][i - 5];
    }
    memcpy(prompts[3], prompts[0], sizeof prompts[0]);
    np[3] = np[0];
    struct gout got[NR], want[NR];
    struct tern_sampler *smp[NR];
    struct tern_sampler_params sp = tern_sampler_default_params();
    long drafted = 0;
    n_done = 0;
    for (int r = 0; r < NR; r++) {
        assert_tern_ok(tern_sampler_create(&sp, nv, &smp[r]));
        if (r == 3) /* after the others finished: a slot with a longer history of this prompt */
            while (tern_batcher_n_active(b) > 0) {
                struct tern_batcher_step_info in;
                assert_tern_ok(tern_batcher_step(b, &in));
                drafted += in.n_drafted;
            }
        struct tern_batch_request rq = tern_batch_request_default();
        rq.prompt = prompts[r];
        rq.n_prompt = np[r];
        rq.sampler = smp[r];
        rq.max_tokens = 30;
        rq.ignore_eog = true;
        rq.on_token = on_tok;
        rq.on_done = on_done;
        got[r].n = 0;
        rq.user = &got[r];
        int slot;
        assert_tern_ok(tern_batcher_add(b, &rq, &slot));
    }
    while (tern_batcher_n_active(b) > 0) {
        struct tern_batcher_step_info in;
        assert_tern_ok(tern_batcher_step(b, &in));
        drafted += in.n_drafted;
    }
    assert_int_equal(n_done, NR);
    for (int r = 0; r < NR; r++) {
        tern_generator_reset(g);
        run_gen(g, smp[r], NULL, prompts[r], np[r], &want[r], NULL);
        print_message("request %d: batcher %d tokens, alone %d\n", r, got[r].n, want[r].n < 30 ? want[r].n : 30);
        assert_true(got[r].n == 30);
        assert_memory_equal(got[r].tok, want[r].tok, 30 * sizeof(int32_t));
    }
    print_message("%ld tokens drafted in the shared passes\n", drafted);
    assert_true(drafted > 0);
    for (int r = 0; r < NR; r++) tern_sampler_free(smp[r]);
    tern_generator_free(g);
    tern_batcher_free(b);
    tern_context_free(ctx);
    tern_context_free(solo);
    tern_tokenizer_free(tk);
}

/* One head's DeltaNet over a run of tokens (kernels/delta.h), on every path this CPU has:
 *  - a run gives the bits of its tokens one at a time (with and without the work buffer, rows
 *    in any order), and its keep copies are the states after their tokens;
 *  - the SIMD paths are within float rounding of the scalar reference (the same sums in the same
 *    order, with fused multiply-adds). */
struct delta_case {
    int hk, hv, m, stride;
    int rows[7];
    float *qkv, *par, *S0, *work;
};

static void delta_run_cols(delta_run_fn fn, const struct delta_case *dc, const int *rows, int m,
                           const float *S0, float *S, float *out, float *const *keep, bool work)
{
    struct delta_run d = {.rows = rows, .m = m, .hk = dc->hk, .hv = dc->hv, .qkv = dc->qkv,
                          .qkv_stride = (size_t)dc->stride, .q_off = 0, .k_off = (size_t)dc->hk,
                          .v_off = 2 * (size_t)dc->hk, .par = dc->par, .par_stride = DELTA_PAR,
                          .out = out, .out_stride = (size_t)dc->hv, .keep = keep, .keep_off = 0,
                          .work = work ? dc->work : NULL};
    for (int j = 0; j < dc->hv; j += DELTA_BLOCK)
        fn(&d, S0, S, j, j + DELTA_BLOCK < dc->hv ? j + DELTA_BLOCK : dc->hv);
}

static void test_delta_runs(void **state)
{
    (void)state;
    struct { delta_run_fn fn; const char *name; } paths[3] = {{delta_run_scalar, "scalar"}};
    int n_paths = 1;
#if defined(__x86_64__)
    const char *isa = kern_isa_name();
    if (!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) paths[n_paths++] = (__typeof__(paths[0])){delta_run_avx2, "avx2"};
    if (!strcmp(isa, "avx512")) paths[n_paths++] = (__typeof__(paths[0])){delta_run_avx512, "avx512"};
#endif
    if (n_paths == 1) print_message("no SIMD DeltaNet paths on this CPU: the scalar one alone\n");
    static const int dims[][2] = {{128, 128}, {64, 64}, {64, 48}, {32, 80}, {16, 144}};
    enum { M = 7 };
    uint64_t x = 12345;
#define RND(lo, hi) (x = x * 6364136223846793005ull + 1442695040888963407ull, \
                     (lo) + ((hi) - (lo)) * (float)(x >> 40) / (float)(1ull << 24))
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        struct delta_case dc = {.hk = dims[di][0], .hv = dims[di][1], .m = M,
                                .rows = {4, 0, 6, 2, 1, 5, 3}};
        const int hk = dc.hk, hv = dc.hv;
        const size_t hs = (size_t)hk * hv;
        dc.stride = 2 * hk + hv;
        dc.qkv = malloc(sizeof(float) * M * dc.stride);
        dc.par = malloc(sizeof(float) * M * DELTA_PAR);
        dc.S0 = malloc(sizeof(float) * hs);
        dc.work = aligned_alloc(64, sizeof(float) * (size_t)hk * DELTA_BLOCK);
        float *S = malloc(sizeof(float) * hs), *Sref = malloc(sizeof(float) * 2 * hs);
        float *Sone = malloc(sizeof(float) * hs), *kept = malloc(sizeof(float) * 2 * hs);
        float *after3 = malloc(sizeof(float) * hs);
        float *out = malloc(sizeof(float) * M * hv), *oref = malloc(sizeof(float) * 2 * M * hv);
        float *oone = malloc(sizeof(float) * M * hv);
        for (size_t i = 0; i < hs; i++) dc.S0[i] = RND(-2.0f, 2.0f);
        for (int r = 0; r < M; r++) {
            float *row = dc.qkv + (size_t)r * dc.stride;
            for (int i = 0; i < 2 * hk; i++) row[i] = RND(-0.11f, 0.11f);
            for (int i = 0; i < hv; i++) row[2 * hk + i] = RND(-2.0f, 2.0f);
            float *p = dc.par + (size_t)r * DELTA_PAR;
            const float beta = RND(0.1f, 0.9f), decay = RND(0.5f, 1.0f);
            p[0] = beta;
            p[1] = beta * decay;
            p[2] = decay;
            p[3] = RND(-0.01f, 0.01f);
            p[4] = decay / sqrtf((float)hk);
        }
        for (int pi = 0; pi < n_paths; pi++) {
            if (hv % (pi == 2 ? 16 : pi == 1 ? 8 : 1)) continue;
            for (int zero = 0; zero < 2; zero++) {
                const float *src = zero ? NULL : dc.S0;
                /* one token at a time, in place after the first */
                for (int i = 0; i < M; i++) {
                    delta_run_cols(paths[pi].fn, &dc, dc.rows + i, 1, i ? Sone : src, Sone, oone, NULL, false);
                    if (i == 3) memcpy(after3, Sone, sizeof(float) * hs);
                }
                for (int work = 0; work < 2; work++) {
                    float *keep[2 * M] = {0};
                    keep[2 * 3 + 1] = kept;
                    keep[2 * 6] = kept + hs;
                    memset(kept, 0, sizeof(float) * 2 * hs);
                    delta_run_cols(paths[pi].fn, &dc, dc.rows, M, src, S, out, keep, work);
                    assert_memory_equal(S, Sone, sizeof(float) * hs);
                    assert_memory_equal(out, oone, sizeof(float) * M * hv);
                    assert_memory_equal(kept, after3, sizeof(float) * hs);
                    assert_memory_equal(kept + hs, S, sizeof(float) * hs);
                }
                const float *sr = Sref + zero * hs, *orf = oref + (size_t)zero * M * hv;
                if (pi == 0) {
                    memcpy(Sref + zero * hs, S, sizeof(float) * hs);
                    memcpy(oref + (size_t)zero * M * hv, out, sizeof(float) * M * hv);
                    continue;
                }
                double ds = 0, dout = 0, big = 0;
                for (size_t i = 0; i < hs; i++) {
                    ds = fmax(ds, fabs((double)sr[i] - S[i]));
                    big = fmax(big, fabs((double)sr[i]));
                }
                for (int i = 0; i < M * hv; i++) dout = fmax(dout, fabs((double)orf[i] - out[i]));
                print_message("%s hk %d hv %d%s: max |d| state %.2g (of %.2g), out %.2g\n", paths[pi].name,
                              hk, hv, zero ? " (zero state)" : "", ds, big, dout);
                assert_true(ds <= 1e-5 * fmax(big, 1.0) && dout <= 1e-5);
                assert_true(big > 0.1);
            }
        }
        free(dc.qkv); free(dc.par); free(dc.S0); free(dc.work); free(S); free(Sref); free(Sone);
        free(kept); free(after3); free(out); free(oref); free(oone);
    }
#undef RND
}

/* The conv's sums (kernels/delta.h) have the same bits on every path: products rounded, then
 * added in tap order, no fused multiply-add. */
static void test_delta_conv_paths_agree(void **state)
{
    (void)state;
    struct { delta_conv_fn fn; const char *name; } paths[2];
    int n_paths = 0;
#if defined(__x86_64__)
    const char *isa = kern_isa_name();
    if (!strcmp(isa, "avx512") || !strcmp(isa, "avx2")) paths[n_paths++] = (__typeof__(paths[0])){delta_conv_avx2, "avx2"};
    if (!strcmp(isa, "avx512")) paths[n_paths++] = (__typeof__(paths[0])){delta_conv_avx512, "avx512"};
#endif
    if (!n_paths) {
        print_message("no SIMD conv paths on this CPU: nothing to compare\n");
        return;
    }
    enum { N = 301, K = 5 };
    float rows[K][N], w[K * N], want[N], got[N];
    uint64_t x = 99;
    for (int j = 0; j < K; j++)
        for (int c = 0; c < N; c++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            rows[j][c] = (float)((int64_t)(x >> 20) % 100003) / 3.7e4f;
            w[j * N + c] = (float)((int64_t)(x >> 37) % 1009) / 811.0f - 0.6f;
        }
    const float *xp[K] = {rows[0], rows[1], rows[2], rows[3], rows[4]};
    for (int k = 1; k <= K; k++)
        for (int n = 1; n <= N; n += 37) {
            delta_conv_scalar(xp, k, w, N, want, n);
            for (int pi = 0; pi < n_paths; pi++) {
                memset(got, 0xff, sizeof got);
                paths[pi].fn(xp, k, w, N, got, n);
                assert_memory_equal(got, want, sizeof(float) * (size_t)n);
                if (n < N) assert_true(isnan(got[n])); /* nothing written past n */
            }
        }
    print_message("%d SIMD path(s) give the scalar conv's bits (taps 1-%d, widths 1-%d)\n", n_paths, K, N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollback_inside_the_last_call),
        cmocka_unit_test(test_truncate_to_zero_and_long_calls),
        cmocka_unit_test(test_snapshot_restores_the_state),
        cmocka_unit_test(test_prefix_cache_restores_the_state),
        cmocka_unit_test(test_sequences_in_one_batch),
        cmocka_unit_test(test_speculative_decoding),
        cmocka_unit_test(test_batcher_requests),
        cmocka_unit_test(test_delta_runs),
        cmocka_unit_test(test_delta_conv_paths_agree),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
