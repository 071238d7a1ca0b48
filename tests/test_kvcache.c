/* test_kvcache.c — KV snapshots and the prefix cache (src/kv): a restored or cached prefix gives
 * bit-identical logits and the same greedy tokens as a cold run (partial hits, full hits, after
 * save/load), foreign or damaged cache files are refused and recomputed, and eviction keeps the
 * byte budget, least recently used leaves first. Uses the tiny fixture models. */
#include "test_support.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <nettle/sha2.h>
#include "kv/prefix_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#define QWEN "fixtures/models/qwen2-tiny-q8_0.gguf"
#define LLAMA "fixtures/models/llama-spm-tiny-q8_0.gguf"
#define N_GEN 12

/* One thread: the pool spin-waits, which on a shared CI machine costs far more than it gains
 * on these tiny models (results do not depend on the thread count). */
static struct tern_context *new_ctx(struct tern_model *m, int n_ctx)
{
    struct tern_context_params cp = {.n_ctx = n_ctx, .n_batch = 32, .n_threads = 1};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    return ctx;
}

/* Deterministic pseudo-random prompt; `salt` changes it, `shared` leading tokens come from
 * salt 0 so two prompts can share a prefix of exactly that length. */
static void make_prompt(int32_t *t, int n, int shared, unsigned salt, int n_vocab)
{
    for (int i = 0; i < n; i++) {
        unsigned s = (i < shared ? 0 : salt) * 2654435761u + (unsigned)i * 40503u + 17;
        s ^= s >> 13;
        s *= 0x5bd1e995u;
        s ^= s >> 15;
        t[i] = (int32_t)(s % (unsigned)(n_vocab - 3)) + 3;
    }
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Greedy continuation from the logits of the prompt's last token; copies those first logits. */
static void generate(struct tern_context *ctx, struct tern_model *m, const float *logits, int pos,
                     int32_t *out, float *first_logits)
{
    const int nv = tern_model_n_vocab(m);
    memcpy(first_logits, logits, (size_t)nv * sizeof(float));
    for (int i = 0; i < N_GEN; i++) {
        out[i] = argmax(logits, nv);
        assert_tern_ok(tern_decode(ctx, &out[i], 1, pos + i, TERN_LOGITS_LAST));
        logits = tern_context_logits(ctx, 0);
    }
}

/* Tokens a hit on an n-token prompt restores when `cached` leading tokens are in the cache:
 * whole blocks, leaving at least pc_min_suffix tokens to decode (1 when the model's matmuls are
 * batch-invariant on this kernel path, 16 otherwise), so the tests hold on every path. */
static int expect_reuse(const struct tern_prefix_cache *pc, int n, int cached)
{
    const int ms = pc_min_suffix(pc), lim = n > ms ? (n - ms) / pc->B * pc->B : 0;
    return cached < lim ? cached : lim;
}

/* Cold reference: plain tern_decode of the whole prompt in a fresh context. */
static void cold_run(struct tern_model *m, const int32_t *p, int n, int32_t *out, float *lg)
{
    struct tern_context *ctx = new_ctx(m, 256);
    assert_tern_ok(tern_decode(ctx, p, n, 0, TERN_LOGITS_LAST));
    generate(ctx, m, tern_context_logits(ctx, n - 1), n, out, lg);
    tern_context_free(ctx);
}

static void cached_run(struct tern_prefix_cache *pc, struct tern_model *m, const int32_t *p, int n,
                       int32_t *out, float *lg, int *reused)
{
    struct tern_context *ctx = new_ctx(m, 256);
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, p, n, reused));
    assert_int_equal(tern_kv_n_pos(ctx), n);
    generate(ctx, m, tern_context_logits(ctx, n - 1 - *reused), n, out, lg);
    tern_context_free(ctx);
}

static void assert_same_run(struct tern_model *m, const int32_t *a, const float *la,
                            const int32_t *b, const float *lb)
{
    assert_memory_equal(a, b, N_GEN * sizeof(int32_t));
    assert_memory_equal(la, lb, (size_t)tern_model_n_vocab(m) * sizeof(float));
}

/* ---------------------------------------------------------------- snapshots */

static void snapshot_restore_model(const char *rel)
{
    TEST_SHARED_OR_SKIP(path, rel);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    int32_t p[70];
    make_prompt(p, 70, 0, 1, nv);
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    cold_run(m, p, 70, ref, lr);

    /* snapshot 45 of 70 positions, restore into a fresh context, decode the remaining 25 */
    struct tern_context *a = new_ctx(m, 256), *b = new_ctx(m, 256);
    assert_tern_ok(tern_decode(a, p, 70, 0, TERN_LOGITS_NONE));
    struct tern_kv_snapshot *s;
    assert_tern_ok(tern_kv_snapshot_create(a, 45, &s));
    assert_int_equal(tern_kv_snapshot_n_pos(s), 45);
    const struct tern_model_info *in = tern_model_get_info(m);
    assert_int_equal(tern_kv_snapshot_bytes(s),
                     tern_kv_bytes(in->n_layer, in->n_head_kv, in->head_dim, 45));
    assert_tern_ok(tern_kv_snapshot_restore(b, s));
    assert_int_equal(tern_kv_n_pos(b), 45);
    assert_tern_ok(tern_decode(b, p + 45, 25, 45, TERN_LOGITS_LAST));
    generate(b, m, tern_context_logits(b, 24), 70, got, lg);
    assert_same_run(m, ref, lr, got, lg);

    /* restoring over a longer sequence rewinds it to the snapshot */
    assert_tern_ok(tern_kv_snapshot_restore(a, s));
    assert_int_equal(tern_kv_n_pos(a), 45);
    assert_tern_ok(tern_decode(a, p + 45, 25, 45, TERN_LOGITS_LAST));
    generate(a, m, tern_context_logits(a, 24), 70, got, lg);
    assert_same_run(m, ref, lr, got, lg);

    /* refusals: more positions than held; a context too small */
    struct tern_kv_snapshot *bad = NULL;
    assert_int_equal(tern_kv_snapshot_create(a, 1000, &bad), TERN_ERR_ARG);
    assert_null(bad);
    struct tern_context *small = new_ctx(m, 32);
    assert_int_equal(tern_kv_snapshot_restore(small, s), TERN_ERR_RANGE);
    assert_int_equal(tern_kv_n_pos(small), 0);
    tern_context_free(small);
    tern_kv_snapshot_free(s);
    tern_context_free(a);
    tern_context_free(b);
    free(lr);
    free(lg);
    tern_model_free(m);
}

static void test_snapshot_qwen(void **state) { (void)state; snapshot_restore_model(QWEN); }
static void test_snapshot_llama(void **state) { (void)state; snapshot_restore_model(LLAMA); }

static void test_snapshot_other_model_refused(void **state)
{
    (void)state;
    /* test_shared_path returns a static buffer: load each model before asking for the next */
    struct tern_model *q, *l, *q2;
    TEST_SHARED_OR_SKIP(qp, QWEN);
    assert_tern_ok(tern_model_load(qp, NULL, &q));
    assert_tern_ok(tern_model_load(qp, NULL, &q2));
    TEST_SHARED_OR_SKIP(lp, LLAMA);
    assert_tern_ok(tern_model_load(lp, NULL, &l));
    struct tern_context *cq = new_ctx(q, 64), *cl = new_ctx(l, 64), *cq2 = new_ctx(q2, 64);
    int32_t p[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    assert_tern_ok(tern_decode(cq, p, 8, 0, TERN_LOGITS_NONE));
    struct tern_kv_snapshot *s;
    assert_tern_ok(tern_kv_snapshot_create(cq, 8, &s));
    assert_int_equal(tern_kv_snapshot_restore(cl, s), TERN_ERR_ARG);
    print_message("refusal: %s\n", tern_last_error());
    assert_int_equal(tern_kv_n_pos(cl), 0);
    /* the same file loaded twice is the same model (fingerprints equal) */
    assert_tern_ok(tern_kv_snapshot_restore(cq2, s));
    assert_int_equal(tern_kv_n_pos(cq2), 8);

    uint8_t fq[32], fl[32], fq2[32], tq[32], tl[32];
    assert_tern_ok(tern_model_fingerprint(q, fq));
    assert_tern_ok(tern_model_fingerprint(q2, fq2));
    assert_tern_ok(tern_model_fingerprint(l, fl));
    assert_memory_equal(fq, fq2, 32);
    assert_memory_not_equal(fq, fl, 32);
    assert_tern_ok(tern_tokenizer_fingerprint(q, tq));
    assert_tern_ok(tern_tokenizer_fingerprint(l, tl));
    assert_memory_not_equal(tq, tl, 32);
    /* kv_bytes agrees with the model's own figure */
    const struct tern_model_info *in = tern_model_get_info(q);
    assert_int_equal(tern_kv_bytes(in->n_layer, in->n_head_kv, in->head_dim, 100),
                     tern_model_kv_bytes(q, 100));
    assert_int_equal(tern_kv_bytes(2, 4, 32, 128), 2ull * 2 * 4 * 32 * 128 * 2);

    tern_kv_snapshot_free(s);
    tern_context_free(cq);
    tern_context_free(cl);
    tern_context_free(cq2);
    tern_model_free(q);
    tern_model_free(l);
    tern_model_free(q2);
}

/* ---------------------------------------------------------------- prefix cache */

static void prefix_hits_model(const char *rel)
{
    TEST_SHARED_OR_SKIP(path, rel);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
    pp.block_tokens = 16;
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));

    int32_t p0[60], p1[75];
    make_prompt(p0, 60, 40, 1, nv); /* shares 40 tokens with p1 */
    make_prompt(p1, 75, 40, 2, nv);
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    int reused;

    cold_run(m, p1, 75, ref, lr);
    /* miss: nothing cached; stores blocks 0..2 of p0 (48 tokens) */
    cached_run(pc, m, p0, 60, got, lg, &reused);
    assert_int_equal(reused, 0);
    /* partial hit: p1 shares 40 tokens = 2 full blocks */
    cached_run(pc, m, p1, 75, got, lg, &reused);
    assert_int_equal(reused, 32);
    assert_same_run(m, ref, lr, got, lg);
    /* full hit: all 4 full blocks of p1 are cached (64 of 75 tokens); all 4 are restored when
     * the kernels are batch-invariant, else 3, because at least 16 tokens are then decoded (so
     * the prefill kernels see a batch as in the cold run) */
    assert_int_equal(tern_prefix_cache_match(pc, p1, 75), 64);
    cached_run(pc, m, p1, 75, got, lg, &reused);
    const int full = expect_reuse(pc, 75, 64);
    assert_int_equal(reused, full);
    assert_same_run(m, ref, lr, got, lg);
    /* a block-aligned prompt: the last token is always decoded, never restored */
    cold_run(m, p1, 64, ref, lr);
    cached_run(pc, m, p1, 64, got, lg, &reused);
    assert_int_equal(reused, 48);
    assert_same_run(m, ref, lr, got, lg);

    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    assert_int_equal(st.lookups, 4);
    assert_int_equal(st.hits, 3);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hit_tokens, 32 + full + 48);
    assert_int_equal(st.miss_tokens, 60 + 43 + (75 - full) + 16);
    assert_int_equal(st.n_blocks, 3 + 2); /* p0: 3 blocks; p1 adds blocks 2 and 3 */
    assert_int_equal(st.evicted_blocks, 0);
    free(lr);
    free(lg);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
}

static void test_prefix_hits_qwen(void **state) { (void)state; prefix_hits_model(QWEN); }
static void test_prefix_hits_llama(void **state) { (void)state; prefix_hits_model(LLAMA); }

static void test_eviction_lru_under_budget(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    const struct tern_model_info *in = tern_model_get_info(m);
    const uint64_t block = tern_kv_bytes(in->n_layer, in->n_head_kv, in->head_dim, 16);
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .budget_bytes = 3 * block};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_context *ctx = new_ctx(m, 128);
    int32_t a[40], b[40], c[40];
    make_prompt(a, 40, 0, 1, nv);
    make_prompt(b, 40, 0, 2, nv);
    make_prompt(c, 40, 0, 3, nv);
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, a, 40, &reused)); /* a0 a1 */
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, b, 40, &reused)); /* b0 b1: a1 evicted */
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    assert_int_equal(st.n_blocks, 3);
    assert_int_equal(st.evicted_blocks, 1);
    assert_int_equal(st.evicted_bytes, block);
    assert_true(st.bytes <= pp.budget_bytes);
    assert_int_equal(tern_prefix_cache_match(pc, a, 40), 16); /* a0 is now a leaf */
    assert_int_equal(tern_prefix_cache_match(pc, b, 40), 32);
    /* touch b (both blocks restored with batch-invariant kernels; else one, 24 >= 16 tokens
     * decoded, and b1 is touched as it is stored again), then c needs 2 blocks: a0 goes
     * (oldest leaf), then b1 (c0 is c1's parent) */
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, b, 40, &reused));
    assert_int_equal(reused, expect_reuse(pc, 40, 32));
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, c, 40, &reused));
    assert_int_equal(reused, 0);
    tern_prefix_cache_get_stats(pc, &st);
    assert_true(st.bytes <= pp.budget_bytes);
    assert_int_equal(st.evicted_blocks, 3);
    assert_int_equal(st.evicted_bytes, 3 * block);
    assert_int_equal(tern_prefix_cache_match(pc, a, 40), 0);
    assert_int_equal(tern_prefix_cache_match(pc, c, 40), 32);
    assert_int_equal(tern_prefix_cache_match(pc, b, 40), 16);
    /* eviction never changes results */
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    cold_run(m, c, 40, ref, lr);
    cached_run(pc, m, c, 40, got, lg, &reused);
    assert_int_equal(reused, expect_reuse(pc, 40, 32));
    assert_same_run(m, ref, lr, got, lg);
    /* a budget smaller than one block stores nothing and still works */
    struct tern_prefix_cache *tiny;
    struct tern_prefix_cache_params tp = {.block_tokens = 16, .budget_bytes = block - 1};
    assert_tern_ok(tern_prefix_cache_create(m, &tp, &tiny));
    cached_run(tiny, m, c, 40, got, lg, &reused);
    assert_int_equal(reused, 0);
    assert_same_run(m, ref, lr, got, lg);
    tern_prefix_cache_get_stats(tiny, &st);
    assert_int_equal(st.n_blocks, 0);
    tern_prefix_cache_free(tiny);
    free(lr);
    free(lg);
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
}

/* KV stored by a 2-thread context and restored into a 1-thread one gives the 1-thread cold
 * run's logits: matmuls split output rows and attention splits (token, head) pairs, so no sum
 * depends on the thread count. */
static void test_threads_do_not_change_kv(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, LLAMA);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    struct tern_prefix_cache_params pp = {.block_tokens = 16};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    int32_t p[60]; /* 48 reused and 12 decoded, or 32 and 28 (see expect_reuse) */
    make_prompt(p, 60, 0, 11, nv);
    struct tern_context_params cp2 = {.n_ctx = 128, .n_batch = 32, .n_threads = 2};
    struct tern_context *c2;
    assert_tern_ok(tern_context_create(m, &cp2, &c2));
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, c2, p, 60, &reused));
    tern_context_free(c2);
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    cold_run(m, p, 60, ref, lr);
    cached_run(pc, m, p, 60, got, lg, &reused);
    assert_int_equal(reused, expect_reuse(pc, 60, 48));
    assert_same_run(m, ref, lr, got, lg);
    free(lr);
    free(lg);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
}

/* Hits that leave a suffix of 2 tokens and of 1 token (prompts of 50 and 49 tokens, 3 blocks of
 * 16 cached). Where every layer matmul is batch-invariant (kern_invariant.h: scalar; AVX-512 for
 * the integer formats, whose decode kernels sum in the prefill panels' order) the cache restores
 * all 3 blocks and the 2 or 1 decoded tokens must get exactly the bits of the cold run, which
 * computed them inside a batch of 50. Elsewhere it restores at most n - 16 tokens (2 blocks), so
 * the 18 or 17 decoded tokens go through the prefill kernels as in the cold run: exact too. */
static void test_small_suffix_exact(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, LLAMA);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    const char *isa0 = kern_isa_name();
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    int32_t p[50];
    make_prompt(p, 50, 0, 12, nv);
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!kern_force_isa(isas[i])) continue;
        struct tern_prefix_cache_params pp = {.block_tokens = 16};
        struct tern_prefix_cache *pc;
        assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
        int reused;
        cached_run(pc, m, p, 50, got, lg, &reused); /* a miss: stores 3 blocks */
        for (int n = 50; n >= 49; n--) {
            cold_run(m, p, n, ref, lr);
            cached_run(pc, m, p, n, got, lg, &reused);
            assert_int_equal(reused, expect_reuse(pc, n, 48));
            bool same = !memcmp(ref, got, sizeof ref) && !memcmp(lr, lg, (size_t)nv * sizeof(float));
            print_message("%s kernels: %d-token suffix after a %d-token hit %s\n", isas[i],
                          n - reused, reused,
                          same ? "reproduces the cold run bit for bit" : "DIFFERS from the cold run");
            assert_true(same);
        }
        tern_prefix_cache_free(pc);
    }
    kern_force_isa(isa0);
    free(lr);
    free(lg);
    tern_model_free(m);
}

/* ---------------------------------------------------------------- persistence */

static int list_files(const char *dir, char names[][256], int max)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tkv") && n < max) snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    return n;
}

static const char *make_dir(const char *name)
{
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 1024, "%s/%s", test_tmpdir(), name);
    mkdir(p, 0777);
    int n;
    assert_tern_ok(tern_cache_dir_clear(p, &n));
    return p;
}

static void test_save_load_identical(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    const char *dir = make_dir("kv_saveload");
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = dir};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    int32_t p[70];
    make_prompt(p, 70, 0, 7, nv);
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    int reused;
    cold_run(m, p, 70, ref, lr);
    cached_run(pc, m, p, 70, got, lg, &reused);
    assert_tern_ok(tern_prefix_cache_save(pc));
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    assert_int_equal(st.saved_blocks, 4);
    tern_prefix_cache_free(pc);

    char names[16][256];
    assert_int_equal(list_files(dir, names, 16), 4);
    struct tern_cache_file_info *fi;
    int nf;
    assert_tern_ok(tern_cache_dir_list(dir, &fi, &nf));
    assert_int_equal(nf, 4);
    for (int i = 0; i < nf; i++) {
        assert_true(fi[i].valid);
        assert_int_equal(fi[i].n_tokens, 16);
    }
    free(fi);

    /* a new process-like cache loads all four blocks and reproduces the cold run */
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    tern_prefix_cache_get_stats(pc, &st);
    assert_int_equal(st.loaded_blocks, 4);
    assert_int_equal(st.refused_files, 0);
    cached_run(pc, m, p, 70, got, lg, &reused);
    assert_int_equal(reused, expect_reuse(pc, 70, 64));
    assert_same_run(m, ref, lr, got, lg);
    tern_prefix_cache_free(pc);

    /* a budget of two blocks loads the two shallowest (the ones a walk reaches) */
    const struct tern_model_info *in = tern_model_get_info(m);
    pp.budget_bytes = 2 * tern_kv_bytes(in->n_layer, in->n_head_kv, in->head_dim, 16);
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    assert_int_equal(tern_prefix_cache_match(pc, p, 70), 32);
    tern_prefix_cache_free(pc);

    int removed;
    assert_tern_ok(tern_cache_dir_clear(dir, &removed));
    assert_int_equal(removed, 4);
    assert_int_equal(list_files(dir, names, 16), 0);
    free(lr);
    free(lg);
    tern_model_free(m);
}

static void corrupt(const char *dir, const char *name, long off, int truncate_to)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (truncate_to >= 0) {
        assert_int_equal(truncate(p, truncate_to), 0);
        return;
    }
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

/* Damaged and foreign files are refused with a reason, never used; the prompt is recomputed
 * and the output is still the cold run's. */
static void test_refuse_damaged_and_foreign(void **state)
{
    (void)state;
    struct tern_model *m, *l;
    TEST_SHARED_OR_SKIP(path, QWEN);
    assert_tern_ok(tern_model_load(path, NULL, &m));
    TEST_SHARED_OR_SKIP(lpath, LLAMA);
    assert_tern_ok(tern_model_load(lpath, NULL, &l));
    const int nv = tern_model_n_vocab(m);
    int32_t p[40];
    make_prompt(p, 40, 0, 9, nv < tern_model_n_vocab(l) ? nv : tern_model_n_vocab(l));
    int32_t ref[N_GEN], got[N_GEN];
    float *lr = malloc(nv * sizeof(float)), *lg = malloc(nv * sizeof(float));
    cold_run(m, p, 40, ref, lr);

    struct {
        const char *what;
        long off;       /* byte to flip, or -1 */
        int trunc;      /* truncate to this size, or -1 */
        const char *expect;
    } cases[] = {
        {"payload byte flipped", 256 + 64 + 1000, -1, "checksum mismatch"},
        {"token id flipped", 256 + 4, -1, "checksum mismatch"},
        {"header depth flipped", 116, -1, "checksum mismatch"},
        {"magic damaged", 2, -1, "bad magic"},
        {"truncated", -1, 3000, "truncated"},
        {"truncated header", -1, 100, "truncated"},
        {"empty", -1, 0, "truncated"},
    };
    struct tern_prefix_cache_params pp = {.block_tokens = 16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pp.dir = make_dir("kv_damaged");
        struct tern_prefix_cache *pc;
        int reused;
        assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
        cached_run(pc, m, p, 40, got, lg, &reused);
        assert_tern_ok(tern_prefix_cache_save(pc));
        tern_prefix_cache_free(pc);
        char names[4][256];
        assert_int_equal(list_files(pp.dir, names, 4), 2);
        /* damage the file of block 0 (the one every walk needs) */
        char target[256] = "";
        struct tern_cache_file_info *fi;
        int nf;
        assert_tern_ok(tern_cache_dir_list(pp.dir, &fi, &nf));
        for (int i = 0; i < nf; i++)
            if (fi[i].depth == 0) snprintf(target, sizeof target, "%s", fi[i].name);
        free(fi);
        assert_true(target[0]);
        corrupt(pp.dir, target, cases[c].off, cases[c].trunc);

        assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
        struct tern_prefix_cache_stats st;
        tern_prefix_cache_get_stats(pc, &st);
        print_message("%s: %s\n", cases[c].what, tern_prefix_cache_warning(pc));
        assert_int_equal(st.refused_files, 1);
        assert_int_equal(st.loaded_blocks, 1);
        assert_non_null(strstr(tern_prefix_cache_warning(pc), cases[c].expect));
        assert_non_null(strstr(tern_prefix_cache_warning(pc), target));
        assert_int_equal(tern_prefix_cache_match(pc, p, 40), 0); /* block 1 is unreachable */
        cached_run(pc, m, p, 40, got, lg, &reused);
        assert_int_equal(reused, 0);
        assert_same_run(m, ref, lr, got, lg);
        /* saving rewrites the refused file with good data */
        assert_tern_ok(tern_prefix_cache_save(pc));
        tern_prefix_cache_free(pc);
        assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
        tern_prefix_cache_get_stats(pc, &st);
        assert_int_equal(st.refused_files, 0);
        assert_int_equal(tern_prefix_cache_match(pc, p, 40), 32);
        tern_prefix_cache_free(pc);
    }

    /* files written for the llama model are refused by a qwen2 cache in the same dir */
    pp.dir = make_dir("kv_foreign");
    struct tern_prefix_cache *lc, *pc;
    assert_tern_ok(tern_prefix_cache_create(l, &pp, &lc));
    struct tern_context *lctx = new_ctx(l, 64);
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(lc, lctx, p, 40, &reused));
    assert_tern_ok(tern_prefix_cache_save(lc));
    tern_context_free(lctx);
    tern_prefix_cache_free(lc);
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    print_message("foreign: %s\n", tern_prefix_cache_warning(pc));
    assert_int_equal(st.refused_files, 2);
    assert_int_equal(st.loaded_blocks, 0);
    assert_non_null(strstr(tern_prefix_cache_warning(pc), "another model"));
    cached_run(pc, m, p, 40, got, lg, &reused);
    assert_int_equal(reused, 0);
    assert_same_run(m, ref, lr, got, lg);
    tern_prefix_cache_free(pc);

    /* a cache with another block size refuses the files too */
    pp.block_tokens = 8;
    assert_tern_ok(tern_prefix_cache_create(l, &pp, &lc));
    tern_prefix_cache_get_stats(lc, &st);
    assert_int_equal(st.refused_files, 2);
    assert_non_null(strstr(tern_prefix_cache_warning(lc), "block 16"));
    tern_prefix_cache_free(lc);

    free(lr);
    free(lg);
    tern_model_free(m);
    tern_model_free(l);
}

/* Name of the saved file holding the block at `depth` (tern_cache_dir_list), into name[256]. */
static void file_of_depth(const char *dir, int depth, char *name)
{
    struct tern_cache_file_info *fi;
    int nf;
    name[0] = 0;
    assert_tern_ok(tern_cache_dir_list(dir, &fi, &nf));
    for (int i = 0; i < nf; i++)
        if (fi[i].valid && fi[i].depth == depth) snprintf(name, 256, "%s", fi[i].name);
    free(fi);
    assert_true(name[0]);
}

/* Overwrite the 32-bit little-endian header field at `off` of a saved block and re-seal the
 * file: the SHA-256 at offset 144 is recomputed over the header (that field zeroed) and the
 * payload, as prefix_file.c writes it, so only the checks after the checksum can refuse it. */
static void reseal_field32(const char *dir, const char *name, int off, uint32_t v)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t len;
    uint8_t *b = (uint8_t *)test_read_file(p, &len);
    assert_non_null(b);
    assert_true(len > 256);
    for (int i = 0; i < 4; i++) b[off + i] = (uint8_t)(v >> 8 * i);
    memset(b + 144, 0, 32);
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, b);
    sha256_digest(&c, 32, b + 144);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
    free(b);
}

/* Save the 2 blocks of a 40-token prompt (blocks of 16) into a fresh dir. */
static const char *save_two_blocks(struct tern_model *m, const int32_t *p, const char *dirname)
{
    const char *dir = make_dir(dirname);
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = dir};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_context *ctx = new_ctx(m, 64);
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, p, 40, &reused));
    assert_tern_ok(tern_prefix_cache_save(pc));
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    return dir;
}

/* A block's depth must agree with its parent key (0 exactly for the first block of a prompt)
 * and its positions must be addressable: a sealed file that breaks either was once loaded with
 * a negative or impossible depth. Each is now refused, naming the file and the depth. */
static void test_refuse_inconsistent_depth(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    int32_t p[40];
    make_prompt(p, 40, 0, 21, tern_model_n_vocab(m));
    const struct {
        int block;      /* depth of the file to change */
        uint32_t depth; /* the depth it is given */
    } cases[] = {{1, 0}, {0, 1}, {1, 0x80000000u}, {1, 0xffffffffu}, {1, 0x7fffffffu / 16}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *dir = save_two_blocks(m, p, "kv_depth");
        char name[256];
        file_of_depth(dir, cases[c].block, name);
        reseal_field32(dir, name, 116, cases[c].depth);
        struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = dir};
        struct tern_prefix_cache *pc;
        assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
        struct tern_prefix_cache_stats st;
        tern_prefix_cache_get_stats(pc, &st);
        print_message("depth %u on block %d: %s\n", cases[c].depth, cases[c].block,
                      tern_prefix_cache_warning(pc));
        assert_int_equal(st.refused_files, 1);
        assert_int_equal(st.loaded_blocks, 1);
        assert_non_null(strstr(tern_prefix_cache_warning(pc), name));
        assert_non_null(strstr(tern_prefix_cache_warning(pc), "depth"));
        tern_prefix_cache_free(pc);
    }
    tern_model_free(m);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_kvcache: loading the cache dir hung (blocked on a FIFO?)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

/* Things named *.tkv that are not cache files: a FIFO (opening it for reading blocked until a
 * writer came: the cache load hung), a directory, and a 1 TiB sparse file with a valid header
 * (read whole into memory: out of memory, and the whole cache failed). Each is refused with its
 * name; the real blocks beside them load. */
static void test_refuse_special_files(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    int32_t p[40];
    make_prompt(p, 40, 0, 22, tern_model_n_vocab(m));
    const char *dir = save_two_blocks(m, p, "kv_special");
    char name[256], fifo[1200], sub[1200], huge[1200], src[1200];
    file_of_depth(dir, 0, name);
    snprintf(fifo, sizeof fifo, "%s/fifo.tkv", dir);
    snprintf(sub, sizeof sub, "%s/sub.tkv", dir);
    snprintf(huge, sizeof huge, "%s/huge.tkv", dir);
    snprintf(src, sizeof src, "%s/%s", dir, name);
    assert_int_equal(mkfifo(fifo, 0666), 0);
    assert_int_equal(mkdir(sub, 0777), 0);
    size_t len;
    char *blk = test_read_file(src, &len);
    assert_non_null(blk);
    FILE *f = fopen(huge, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(blk, 1, 256, f), 256); /* a block's header, then 1 TiB of holes */
    fclose(f);
    free(blk);
    const bool have_huge = truncate(huge, 1ll << 40) == 0;
    if (!have_huge) unlink(huge);

    signal(SIGALRM, on_alarm);
    alarm(60);
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = dir};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    alarm(0);
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    print_message("last refusal: %s\n", tern_prefix_cache_warning(pc));
    assert_int_equal(st.loaded_blocks, 2);
    assert_int_equal(st.refused_files, have_huge ? 3 : 2);
    assert_int_equal(tern_prefix_cache_match(pc, p, 40), 32);
    tern_prefix_cache_free(pc);
    unlink(fifo);
    rmdir(sub);
    unlink(huge);
    tern_model_free(m);
}

/* A block loaded without its parent (the parent's file was damaged or deleted) is an orphan;
 * when the parent is stored again it must count the orphan as its child, or eviction takes the
 * parent first and strands the child. */
static void test_orphan_adopted(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    int32_t p[40];
    make_prompt(p, 40, 0, 23, tern_model_n_vocab(m));
    const char *dir = save_two_blocks(m, p, "kv_orphan");
    char name[256], full[1200];
    file_of_depth(dir, 0, name);
    snprintf(full, sizeof full, "%s/%s", dir, name);
    assert_int_equal(unlink(full), 0);
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = dir};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    assert_int_equal(st.loaded_blocks, 1);
    const uint64_t k0 = pc_chain_key(0, p, 16), k1 = pc_chain_key(k0, p + 16, 16);
    assert_non_null(pc_find(pc, k1));
    assert_null(pc_find(pc, k0));
    struct tern_context *ctx = new_ctx(m, 64);
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, p, 40, &reused));
    assert_int_equal(reused, 0);
    struct pc_block *b0 = pc_find(pc, k0);
    assert_non_null(b0);
    assert_int_equal(b0->n_children, 1);
    assert_int_equal(tern_prefix_cache_match(pc, p, 40), 32);
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
}

/* The table under churn: hundreds of prompts sharing prefixes through a budget of 12 blocks of
 * 2 tokens (so nearly every store evicts), starting from a loaded directory with orphans (two
 * first-block files deleted; the first prompts store those blocks again). After every prefill the whole-table check holds (hash links,
 * child and orphan counts, depths, byte counts; in TERN_CHECKS builds the cache also runs it
 * after each insert and eviction), the budget holds, and the prompt's own blocks are all
 * present (a chain never evicts itself). */
static void test_table_churn(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const struct tern_model_info *in = tern_model_get_info(m);
    enum { B = 2, N_STEM = 4, STEM = 8, MAXN = 12 };
    const uint64_t block = tern_kv_bytes(in->n_layer, in->n_head_kv, in->head_dim, B);
    int32_t stems[N_STEM][STEM];
    for (int s = 0; s < N_STEM; s++)
        for (int i = 0; i < STEM; i++) stems[s][i] = 3 + (s * 7 + i * 3) % 5;

    /* a directory holding the stems' blocks, the first block of two of them deleted */
    const char *dir = make_dir("kv_churn");
    struct tern_prefix_cache_params pp = {.block_tokens = B, .dir = dir};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_context *ctx = new_ctx(m, 64);
    int reused;
    for (int s = 0; s < N_STEM; s++)
        assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, stems[s], STEM, &reused));
    assert_tern_ok(tern_prefix_cache_save(pc));
    tern_prefix_cache_free(pc);
    for (int s = 1; s < N_STEM; s += 2) {
        char file[1200], fp[9];
        uint8_t mfp[32];
        assert_tern_ok(tern_model_fingerprint(m, mfp));
        snprintf(fp, sizeof fp, "%02x%02x%02x%02x", mfp[0], mfp[1], mfp[2], mfp[3]);
        snprintf(file, sizeof file, "%s/%s-%016llx.tkv", dir, fp,
                 (unsigned long long)pc_chain_key(0, stems[s], B));
        assert_int_equal(unlink(file), 0);
    }
    pp.budget_bytes = 12 * block; /* loads 12 of the 14 files: the orphans' children too */
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    char why[256];
    if (!pc_check_table(pc, why, sizeof why)) fail_msg("after load: %s", why);
    assert_true(pc->n_orphans > 0);

    unsigned rng = 12345;
    int32_t p[MAXN];
    for (int it = 0; it < 300; it++) {
        rng = rng * 1103515245u + 12345u;
        /* first the stems whose first block is gone (their orphans get a parent), then any */
        const int s = it < 2 ? 1 + 2 * it : (int)(rng >> 16) % N_STEM;
        const int keep = it < 2 ? STEM : (int)(rng >> 20) % (STEM + 1);
        const int n = it < 2 ? STEM : keep + 1 + (int)(rng >> 24) % (MAXN - keep);
        for (int i = 0; i < n; i++) {
            rng = rng * 1103515245u + 12345u;
            p[i] = i < keep ? stems[s][i] : 3 + (int32_t)((rng >> 16) % 6);
        }
        assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, p, n, &reused));
        if (!pc_check_table(pc, why, sizeof why)) fail_msg("after prefill %d: %s", it, why);
        struct tern_prefix_cache_stats st;
        tern_prefix_cache_get_stats(pc, &st);
        assert_true(st.bytes <= pp.budget_bytes);
        assert_int_equal(tern_prefix_cache_match(pc, p, n), n / B * B);
    }
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    print_message("churn: %llu stored, %llu evicted, %llu blocks left, %d orphans\n",
                  (unsigned long long)st.stored_blocks, (unsigned long long)st.evicted_blocks,
                  (unsigned long long)st.n_blocks, pc->n_orphans);
    assert_true(st.evicted_blocks > 100);
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
}

/* The checker itself: each kind of broken bookkeeping is reported, with what broke. */
static void test_table_check_detects(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_prefix_cache_params pp = {.block_tokens = 2};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_context *ctx = new_ctx(m, 64);
    const int32_t p[7] = {5, 6, 7, 8, 9, 10, 11};
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, p, 7, &reused));
    char why[256];
    assert_true(pc_check_table(pc, why, sizeof why));
    struct pc_block *b0 = pc_find(pc, pc_chain_key(0, p, 2));
    assert_non_null(b0);

    b0->n_children++;
    assert_false(pc_check_table(pc, why, sizeof why));
    print_message("%s\n", why);
    assert_non_null(strstr(why, "children"));
    b0->n_children--;
    b0->depth = 1;
    assert_false(pc_check_table(pc, why, sizeof why));
    assert_non_null(strstr(why, "depth"));
    b0->depth = 0;
    pc->n_orphans = 1;
    assert_false(pc_check_table(pc, why, sizeof why));
    assert_non_null(strstr(why, "n_orphans"));
    pc->n_orphans = 0;
    pc->st.bytes += 1;
    assert_false(pc_check_table(pc, why, sizeof why));
    assert_non_null(strstr(why, "bytes"));
    pc->st.bytes -= 1;
    const uint64_t key = b0->key;
    b0->key ^= 1; /* now in the wrong bucket */
    assert_false(pc_check_table(pc, why, sizeof why));
    assert_non_null(strstr(why, "bucket"));
    b0->key = key;
    assert_true(pc_check_table(pc, why, sizeof why));
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
}

/* ---------------------------------------------------------------- CLI */

/* Run a shell command, return its stdout (malloc'ed) and exit status. */
static char *run_cmd(const char *cmd, int *status)
{
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    for (size_t r; (r = fread(out + n, 1, cap - 1 - n, f)) > 0;) n += r;
    out[n] = 0;
    *status = pclose(f);
    return out;
}

/* An integer field of `tern run --json` output (-1 if absent). */
static int json_int(const char *text, const char *key)
{
    cJSON *j = cJSON_Parse(text);
    const cJSON *v = cJSON_GetObjectItem(j, key);
    int r = cJSON_IsNumber(v) ? v->valueint : -1;
    cJSON_Delete(j);
    return r;
}

/* tern run --prompt-cache: the second run reuses the saved prefix and prints the same tokens;
 * tern cache ls flags a damaged file; tern cache clear empties the directory. */
static void test_cli_prompt_cache(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    const char *dir = make_dir("kv_cli");
    char toks[1024] = "", cmd[8192];
    for (int i = 0; i < 70; i++)
        snprintf(toks + strlen(toks), sizeof toks - strlen(toks), "%s%d", i ? "," : "", 100 + i * 37);
    int status;
    char *out[3];
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' --tokens %s -n 6 -t 1 --json%s%s 2>/dev/null",
                 test_tern_bin(), path, toks, k ? " --prompt-cache " : "", k ? dir : "");
        out[k] = run_cmd(cmd, &status);
        assert_int_equal(status, 0);
    }
    print_message("cold: %s2nd: %s3rd: %s", out[0], out[1], out[2]);
    assert_int_equal(json_int(out[1], "n_reused"), 0);
    /* 70 tokens, blocks of 32: 2 restored with batch-invariant kernels, else 1 (16+ decoded) */
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_prefix_cache *pc;
    struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    int want = expect_reuse(pc, 70, 64);
    tern_prefix_cache_free(pc);
    tern_model_free(m);
    assert_int_equal(json_int(out[2], "n_reused"), want);
    /* same generated tokens in all three runs */
    for (int k = 1; k < 3; k++)
        assert_memory_equal(out[0], out[k], (size_t)(strstr(out[0], "]") - out[0]));
    for (int k = 0; k < 3; k++) free(out[k]);

    char names[4][256];
    assert_int_equal(list_files(dir, names, 4), 2);
    corrupt(dir, names[0], 300, -1);
    snprintf(cmd, sizeof cmd, "'%s' cache ls '%s' --json", test_tern_bin(), dir);
    char *ls = run_cmd(cmd, &status);
    assert_int_equal(status, 0);
    cJSON *j = cJSON_Parse(ls);
    assert_non_null(j);
    assert_int_equal(cJSON_GetObjectItem(j, "n_files")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(j, "invalid")->valueint, 1);
    assert_non_null(strstr(ls, "checksum mismatch"));
    cJSON_Delete(j);
    free(ls);
    snprintf(cmd, sizeof cmd, "'%s' cache clear '%s'", test_tern_bin(), dir);
    free(run_cmd(cmd, &status));
    assert_int_equal(status, 0);
    assert_int_equal(list_files(dir, names, 4), 0);
    snprintf(cmd, sizeof cmd, "'%s' cache ls /nonexistent/tern-dir 2>&1", test_tern_bin());
    char *err = run_cmd(cmd, &status);
    assert_int_not_equal(status, 0);
    assert_non_null(strstr(err, "/nonexistent/tern-dir"));
    free(err);
}

/* n_reused of `tern run ... --json` with the prompt cache in dir; env: "VAR=value " or "". */
static int cli_run_reused(const char *env, const char *model, const char *toks, const char *dir)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s'%s' run -m '%s' --tokens %s -n 1 -t 1 --json --prompt-cache '%s' "
             "2>/dev/null", env, test_tern_bin(), model, toks, dir);
    int status;
    char *out = run_cmd(cmd, &status);
    assert_int_equal(status, 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("tern run --json: not JSON: %s", out);
    int n = cJSON_GetObjectItem(j, "n_reused")->valueint;
    cJSON_Delete(j);
    free(out);
    return n;
}

static int json_obj_int(const cJSON *j, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(j, name);
    if (!cJSON_IsNumber(v)) fail_msg("no number \"%s\" in the JSON", name);
    return v->valueint;
}

/* `tern cache ls --json`, parsed; *longest = longest_prefix_tokens; env as for cli_run_reused. */
static cJSON *cli_ls(const char *env, const char *dir, int *longest)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s'%s' cache ls '%s' --json", env, test_tern_bin(), dir);
    int status;
    char *out = run_cmd(cmd, &status);
    assert_int_equal(status, 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("tern cache ls --json: not JSON: %s", out);
    free(out);
    *longest = json_obj_int(j, "longest_prefix_tokens");
    return j;
}

/* The ls entry of the block at `depth` (NULL if none). */
static const cJSON *ls_entry(const cJSON *ls, const char *dir, int depth)
{
    struct tern_cache_file_info *fi;
    int nf;
    char name[64] = "";
    assert_tern_ok(tern_cache_dir_list(dir, &fi, &nf));
    for (int i = 0; i < nf; i++)
        if (fi[i].valid && fi[i].depth == depth) snprintf(name, sizeof name, "%s", fi[i].name);
    free(fi);
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(ls, "files"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), name)) return e;
    return NULL;
}

/* A run reaches block d only through blocks 0..d-1 (chained keys). With a middle block damaged
 * or deleted, `tern cache ls` reports as usable prefix exactly what the next run reuses, marks
 * every later block unusable naming the broken link, and the run's save repairs the chain. */
static void test_cli_ls_usable_prefix(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    char model[4096];
    snprintf(model, sizeof model, "%s", path);
    const char *dir = make_dir("kv_ls_chain");
    char toks[2048] = "";
    for (int i = 0; i < 200; i++) /* 200 tokens: six blocks of 32 */
        snprintf(toks + strlen(toks), sizeof toks - strlen(toks), "%s%d", i ? "," : "", 300 + i * 29);
    assert_int_equal(cli_run_reused("", model, toks, dir), 0);
    char names[8][256];
    assert_int_equal(list_files(dir, names, 8), 6);
    int longest;
    cJSON *ls = cli_ls("", dir, &longest);
    assert_int_equal(longest, 192);
    cJSON_Delete(ls);

    /* damage block 2: blocks 0-1 stay usable, 3-5 cannot be reached */
    const cJSON *e;
    char damaged[64] = "";
    struct tern_cache_file_info *fi;
    int nf;
    assert_tern_ok(tern_cache_dir_list(dir, &fi, &nf));
    for (int i = 0; i < nf; i++)
        if (fi[i].depth == 2) snprintf(damaged, sizeof damaged, "%s", fi[i].name);
    free(fi);
    corrupt(dir, damaged, 256 + 4 * 32 + 100, -1);
    ls = cli_ls("", dir, &longest);
    const int reused = cli_run_reused("", model, toks, dir); /* (its save repairs block 2) */
    print_message("block 2 damaged: ls says %d usable tokens, the run reused %d\n", longest, reused);
    assert_int_equal(longest, reused);
    assert_int_equal(reused, 64);
    assert_int_equal(json_obj_int(ls, "invalid"), 1);
    assert_int_equal(json_obj_int(ls, "unusable"), 4);
    for (int d = 3; d < 6; d++) {
        assert_non_null(e = ls_entry(ls, dir, d));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(e, "valid")));
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(e, "usable")));
        const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(e, "problem"));
        assert_non_null(why);
        assert_non_null(strstr(why, damaged));
    }
    for (int d = 0; d < 2; d++)
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ls_entry(ls, dir, d), "usable")));
    cJSON_Delete(ls);

    /* that run rewrote block 2; now delete block 1 */
    ls = cli_ls("", dir, &longest);
    assert_int_equal(longest, 192);
    assert_int_equal(json_obj_int(ls, "unusable"), 0);
    e = ls_entry(ls, dir, 1);
    char gone[1100];
    snprintf(gone, sizeof gone, "%s/%s", dir, cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")));
    cJSON_Delete(ls);
    assert_int_equal(unlink(gone), 0);
    ls = cli_ls("", dir, &longest);
    const int reused2 = cli_run_reused("", model, toks, dir);
    print_message("block 1 deleted: ls says %d usable tokens, the run reused %d\n", longest, reused2);
    assert_int_equal(longest, reused2);
    assert_int_equal(reused2, 32);
    assert_int_equal(json_obj_int(ls, "unusable"), 4);
    e = ls_entry(ls, dir, 5);
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "problem")), "missing"));
    cJSON_Delete(ls);

    /* under another kernel path a run refuses every file (its KV bits differ), and so does ls */
    if (strcmp(kern_isa_name(), "scalar")) {
        ls = cli_ls("TERN_KERNELS=scalar ", dir, &longest);
        const int reused3 = cli_run_reused("TERN_KERNELS=scalar ", model, toks, dir);
        assert_int_equal(longest, reused3);
        assert_int_equal(reused3, 0);
        assert_int_equal(json_obj_int(ls, "unusable"), json_obj_int(ls, "n_files"));
        e = ls_entry(ls, dir, 0);
        assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "problem")), "kernels"));
        cJSON_Delete(ls);
    }
}

/* A file whose checksum holds but whose depth field is absurd (0x7fffffff: its first position
 * would overflow an int) is refused by a run and listed as invalid by `tern cache ls`, which
 * prints positions without overflowing (the ASan/UBSan build aborts on signed overflow). */
static void test_absurd_depth_refused(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, QWEN);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const char *dir = make_dir("kv_depth");
    struct tern_prefix_cache_params pp = {.block_tokens = 16, .dir = dir};
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    int32_t p[40];
    make_prompt(p, 40, 0, 5, tern_model_n_vocab(m));
    struct tern_context *ctx = new_ctx(m, 64);
    int reused;
    assert_tern_ok(tern_prefix_cache_prefill(pc, ctx, p, 40, &reused));
    assert_tern_ok(tern_prefix_cache_save(pc));
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);

    /* rewrite block 1's depth (offset 116) and re-seal it (SHA-256 at 144 over the header with
     * that field zeroed, then the payload) */
    struct tern_cache_file_info *fi;
    int nf;
    char file[2048] = "";
    assert_tern_ok(tern_cache_dir_list(dir, &fi, &nf));
    for (int i = 0; i < nf; i++)
        if (fi[i].depth == 1) snprintf(file, sizeof file, "%s/%s", dir, fi[i].name);
    free(fi);
    size_t len;
    uint8_t *buf = (uint8_t *)test_read_file(file, &len);
    assert_non_null(buf);
    buf[116] = 0xff, buf[117] = 0xff, buf[118] = 0xff, buf[119] = 0x7f;
    memset(buf + 144, 0, 32);
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, buf);
    sha256_digest(&c, 32, buf + 144);
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);

    assert_tern_ok(tern_prefix_cache_create(m, &pp, &pc));
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    print_message("run: %s\n", tern_prefix_cache_warning(pc));
    assert_int_equal(st.refused_files, 1);
    assert_non_null(strstr(tern_prefix_cache_warning(pc), "depth"));
    tern_prefix_cache_free(pc);
    tern_model_free(m);

    char cmd[8192];
    int status;
    snprintf(cmd, sizeof cmd, "'%s' cache ls '%s' 2>&1", test_tern_bin(), dir);
    char *out = run_cmd(cmd, &status);
    print_message("%s", out);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "INVALID"));
    free(out);
    int longest;
    cJSON *ls = cli_ls("", dir, &longest);
    assert_int_equal(longest, 16);
    assert_int_equal(json_obj_int(ls, "invalid"), 1);
    cJSON_Delete(ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_qwen),
        cmocka_unit_test(test_snapshot_llama),
        cmocka_unit_test(test_snapshot_other_model_refused),
        cmocka_unit_test(test_prefix_hits_qwen),
        cmocka_unit_test(test_prefix_hits_llama),
        cmocka_unit_test(test_eviction_lru_under_budget),
        cmocka_unit_test(test_threads_do_not_change_kv),
        cmocka_unit_test(test_small_suffix_exact),
        cmocka_unit_test(test_save_load_identical),
        cmocka_unit_test(test_refuse_damaged_and_foreign),
        cmocka_unit_test(test_refuse_inconsistent_depth),
        cmocka_unit_test(test_refuse_special_files),
        cmocka_unit_test(test_orphan_adopted),
        cmocka_unit_test(test_table_churn),
        cmocka_unit_test(test_table_check_detects),
        cmocka_unit_test(test_cli_prompt_cache),
        cmocka_unit_test(test_cli_ls_usable_prefix),
        cmocka_unit_test(test_absurd_depth_refused),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
