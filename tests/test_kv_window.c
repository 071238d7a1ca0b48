/* test_kv_window.c — sliding-window layers keep only their window of KV (kv_cache.h).
 *
 * The reference is the same model in a context created with swa_full, which keeps every
 * position of every layer (the behaviour before windows were released): a windowed context must
 * give the same logits bit for bit through long prompts, single-token decoding, rollback,
 * snapshots, sequence copies and the prefix cache (in memory and through its files), hold much
 * less KV in memory (mincore), and refuse what would need released rows (rollback, snapshots
 * below the window) with a message that says why. Model: gemma3-tiny (window 32, 5 of its 6
 * layers sliding), written by tern synth; contexts use exact batches, so runs that cut the same
 * tokens into different calls compare bit for bit. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_CTX = 2048, PROMPT = 1500, MORE = 40 };

static struct tern_model *model;
static char model_path[4096];
static int32_t tok[N_CTX];
static int n_vocab;

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof model_path, "%s/kvwin-gemma3.gguf", test_tmpdir());
    if (tern_synth_model_write("gemma3-tiny", "f16", 3, model_path, NULL)) return -1;
    if (tern_model_load(model_path, NULL, &model)) return -1;
    n_vocab = tern_model_n_vocab(model);
    for (int i = 0; i < N_CTX; i++) tok[i] = (int32_t)((i * 7919 + 13) % n_vocab);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tern_model_free(model);
    remove(model_path);
    return 0;
}

static struct tern_context *make_ctx(bool full, int n_seq)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 2;
    cp.n_seq = n_seq;
    cp.swa_full = full;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(model, &cp, &ctx));
    /* one-token decoding's bits whatever the batches (F16 matmuls are not batch-invariant), so
     * runs that split the same tokens differently compare bit for bit */
    tern_context_set_exact_batches(ctx, true);
    return ctx;
}

/* Decode tok[p0 .. p0+n) into ctx (one call) and return a copy of the last logits. */
static float *decode_copy(struct tern_context *ctx, int p0, int n)
{
    assert_tern_ok(tern_decode(ctx, tok + p0, n, p0, TERN_LOGITS_LAST));
    float *l = malloc((size_t)n_vocab * sizeof *l);
    assert_non_null(l);
    memcpy(l, tern_context_logits(ctx, n - 1), (size_t)n_vocab * sizeof *l);
    return l;
}

static void assert_logits(struct tern_context *ctx, int row, const float *want)
{
    const float *got = tern_context_logits(ctx, row);
    assert_non_null(got);
    assert_memory_equal(got, want, (size_t)n_vocab * sizeof *want);
}

/* A long prompt then single tokens: the same bits as swa_full, and the windowed layers' pages
 * given back (the global layer keeps every position). */
static void test_same_bits_less_memory(void **state)
{
    (void)state;
    struct tern_context *full = make_ctx(true, 1), *win = make_ctx(false, 1);
    float *a = decode_copy(full, 0, PROMPT);
    float *b = decode_copy(win, 0, PROMPT);
    assert_memory_equal(a, b, (size_t)n_vocab * sizeof *a);
    for (int p = PROMPT; p < PROMPT + MORE; p++) {
        free(a);
        free(b);
        a = decode_copy(full, p, 1);
        b = decode_copy(win, p, 1);
        assert_memory_equal(a, b, (size_t)n_vocab * sizeof *a);
    }
    const uint64_t rf = tern_context_kv_resident_bytes(full), rw = tern_context_kv_resident_bytes(win);
    const uint64_t bound = tern_model_kv_bytes_windowed(model, N_CTX, tern_context_n_batch(win));
    const uint64_t held = tern_model_kv_bytes(model, PROMPT + MORE);
    print_message("KV resident after %d positions: swa_full %llu bytes (%llu for those positions), "
                  "windowed %llu (bound %llu)\n", PROMPT + MORE, (unsigned long long)rf,
                  (unsigned long long)held, (unsigned long long)rw, (unsigned long long)bound);
    assert_true(rf >= held);     /* every position of every layer was written */
    assert_true(rw <= bound);    /* the windowed layers hold about a window and a batch */
    assert_true(rw * 2 < rf);    /* 5 of the 6 layers give back most of 1540 positions */
    free(a);
    free(b);
    tern_context_free(full);
    tern_context_free(win);
}

/* Rollback inside the kept reserve gives the same bits again; below the window it is refused
 * (and allowed with swa_full); back to 0 works and decodes as the first time. */
static void test_rollback(void **state)
{
    (void)state;
    struct tern_context *full = make_ctx(true, 1), *win = make_ctx(false, 1);
    float *first = decode_copy(win, 0, 64);
    free(decode_copy(win, 64, PROMPT - 64));
    float *want = decode_copy(full, 0, PROMPT);
    const int back = PROMPT - 60;
    assert_true(tern_kv_seq_can_truncate(win, 0, back));
    assert_tern_ok(tern_kv_truncate(win, back));
    assert_tern_ok(tern_decode(win, tok + back, PROMPT - back, back, TERN_LOGITS_LAST));
    assert_logits(win, PROMPT - back - 1, want);

    assert_false(tern_kv_seq_can_truncate(win, 0, 500));
    assert_int_equal(tern_kv_truncate(win, 500), TERN_ERR_UNSUPPORTED);
    print_message("refused: %s\n", tern_last_error());
    assert_non_null(strstr(tern_last_error(), "sliding-window"));
    assert_int_equal(tern_kv_n_pos(win), PROMPT); /* nothing changed */
    assert_true(tern_kv_seq_can_truncate(full, 0, 500));

    assert_tern_ok(tern_kv_truncate(win, 0));
    assert_tern_ok(tern_decode(win, tok, 64, 0, TERN_LOGITS_LAST));
    assert_logits(win, 63, first);
    free(first);
    free(want);
    tern_context_free(full);
    tern_context_free(win);
}

/* A snapshot of the whole sequence restores into a fresh context and continues as the original;
 * one of a prefix whose window is gone is refused. Sequence copies carry the window too. */
static void test_snapshot_and_copy(void **state)
{
    (void)state;
    struct tern_context *full = make_ctx(true, 1), *win = make_ctx(false, 2), *fresh = make_ctx(false, 1);
    free(decode_copy(full, 0, PROMPT));
    free(decode_copy(win, 0, PROMPT));
    float *want = decode_copy(full, PROMPT, MORE);

    struct tern_kv_snapshot *snap;
    assert_int_equal(tern_kv_snapshot_create(win, 500, &snap), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "sliding-window"));
    assert_tern_ok(tern_kv_snapshot_create(win, PROMPT, &snap));
    assert_tern_ok(tern_kv_snapshot_restore(fresh, snap));
    assert_tern_ok(tern_decode(fresh, tok + PROMPT, MORE, PROMPT, TERN_LOGITS_LAST));
    assert_logits(fresh, MORE - 1, want);
    tern_kv_snapshot_free(snap);

    /* sequence 1 takes a copy of sequence 0 and continues */
    assert_int_equal(tern_kv_seq_copy(win, 0, 1, 500), TERN_ERR_UNSUPPORTED);
    assert_tern_ok(tern_kv_seq_copy(win, 0, 1, PROMPT));
    int32_t seqs[MORE];
    bool logits[MORE] = {false};
    for (int i = 0; i < MORE; i++) seqs[i] = 1;
    logits[MORE - 1] = true;
    const struct tern_batch b = {.n = MORE, .tokens = tok + PROMPT, .seq = seqs, .logits = logits};
    assert_tern_ok(tern_decode_batch(win, &b));
    assert_logits(win, MORE - 1, want);
    free(want);
    tern_context_free(full);
    tern_context_free(win);
    tern_context_free(fresh);
}

/* The prefix cache: a prompt stored from a windowed context restores its continuation exactly;
 * its early blocks were stored without the windowed rows (released by then), so a prompt that
 * shares only them is not restored from them (and still decodes right); the flag survives the
 * cache's files. */
static void test_prefix_cache(void **state)
{
    (void)state;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/kvwin-cache", test_tmpdir());
    struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
    pp.dir = dir;
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pc));
    struct tern_context *full = make_ctx(true, 1), *win = make_ctx(false, 1);
    int reused = -1;
    assert_tern_ok(tern_prefix_cache_prefill(pc, win, tok, PROMPT, &reused));
    assert_int_equal(reused, 0);

    const int n = PROMPT + MORE;
    float *want = decode_copy(full, 0, n);
    assert_tern_ok(tern_prefix_cache_prefill(pc, win, tok, n, &reused));
    print_message("prefix cache: %d of %d tokens restored\n", reused, n);
    assert_true(reused >= PROMPT - 64);
    assert_logits(win, n - 1 - reused, want);

    /* shares the first 700 tokens only: those blocks lack the windowed rows */
    int32_t other[800];
    memcpy(other, tok, 700 * sizeof *other);
    for (int i = 700; i < 800; i++) other[i] = (int32_t)((i * 31 + 5) % n_vocab);
    assert_tern_ok(tern_kv_truncate(full, 0));
    assert_tern_ok(tern_decode(full, other, 800, 0, TERN_LOGITS_LAST));
    float *want2 = malloc((size_t)n_vocab * sizeof *want2);
    memcpy(want2, tern_context_logits(full, 799), (size_t)n_vocab * sizeof *want2);
    assert_tern_ok(tern_prefix_cache_prefill(pc, win, other, 800, &reused));
    assert_int_equal(reused, 0);
    assert_logits(win, 799, want2);

    /* through the files: a new cache restores with the same bits. `other` now finds its own
     * blocks: those from position 640 on (the window's start, 768, minus the reserve when it was
     * stored) hold the windowed rows, and a query at 768 reads them from 736 on, so 768 tokens
     * come back although blocks 0-19 hold only the global layer's rows */
    assert_tern_ok(tern_prefix_cache_save(pc));
    tern_prefix_cache_free(pc);
    assert_tern_ok(tern_prefix_cache_create(model, &pp, &pc));
    struct tern_prefix_cache_stats st;
    tern_prefix_cache_get_stats(pc, &st);
    assert_int_equal(st.refused_files, 0);
    assert_tern_ok(tern_prefix_cache_prefill(pc, win, other, 800, &reused));
    assert_int_equal(reused, 768);
    assert_logits(win, 799 - reused, want2);
    assert_tern_ok(tern_prefix_cache_prefill(pc, win, tok, n, &reused));
    assert_true(reused >= PROMPT - 64);
    assert_logits(win, n - 1 - reused, want);
    free(want);
    free(want2);
    tern_prefix_cache_free(pc);
    tern_context_free(full);
    tern_context_free(win);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits_less_memory),
        cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_snapshot_and_copy),
        cmocka_unit_test(test_prefix_cache),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
