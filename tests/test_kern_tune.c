/* test_kern_tune.c — the tile of 1-3 token calls chosen by measurement at load (kern_tune.h,
 * model_tune.c) changes speed only, is cached per CPU, and survives a damaged cache.
 *
 * - every tile the CPU runs gives the default tile's logits bit for bit (forced with
 *   tern_model_params.decode_tile), for a Q8_0 and a Q4_K_M fixture: a 29-token prompt, 4 tokens
 *   decoded one at a time, then 2 and 3 at once (the matmuls of 1-3 tokens the tile runs);
 * - the first load measures and writes TERN_CACHE_DIR/decode-tiles.tsv, one line per (format, k,
 *   call size: "1" or "2-3") under this CPU's key; the second load reads it ("cached"), whatever
 *   order its lines are in;
 * - a cache file of garbage (binary bytes, a line without a newline, unknown tiles and formats)
 *   is survived: the load measures again and the file is rewritten with valid lines only;
 * - TERN_TUNE=0 measures nothing; a bad tile name or one the CPU cannot run is refused by name.
 * Without packed copies (scalar or NEON paths) there is nothing to choose: the test says so. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_tune.h"
#include "kernels/kernels.h"

#define N_PROMPT 29
#define N_GEN 4
#define N_OUT (1 + N_GEN + 2 + 3) /* logits rows kept: the prompt's last, the single steps, a 2- and a 3-token call */

static float *run(struct tern_model *m)
{
    const int nv = tern_model_n_vocab(m);
    struct tern_context_params cp = {.n_ctx = 64, .n_batch = 32, .n_threads = 2, .no_warmup = true};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    float *out = malloc((size_t)N_OUT * (size_t)nv * sizeof *out);
    assert_non_null(out);
    int32_t toks[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) toks[i] = 1 + (i * 37) % (nv - 1);
    assert_tern_ok(tern_decode(ctx, toks, N_PROMPT, 0, TERN_LOGITS_ALL));
    memcpy(out, tern_context_logits(ctx, N_PROMPT - 1), (size_t)nv * sizeof *out);
    for (int i = 0; i < N_GEN; i++) {
        const int32_t t = 3 + i * 11;
        assert_tern_ok(tern_decode(ctx, &t, 1, N_PROMPT + i, TERN_LOGITS_LAST));
        memcpy(out + (size_t)(1 + i) * nv, tern_context_logits(ctx, 0), (size_t)nv * sizeof *out);
    }
    int pos = N_PROMPT + N_GEN, row = 1 + N_GEN;
    for (int n = 2; n <= 3; n++) { /* the verification-shaped calls */
        int32_t t[3];
        for (int j = 0; j < n; j++) t[j] = 5 + 13 * (pos + j) % (nv - 5);
        assert_tern_ok(tern_decode(ctx, t, n, pos, TERN_LOGITS_ALL));
        for (int j = 0; j < n; j++, row++)
            memcpy(out + (size_t)row * nv, tern_context_logits(ctx, j), (size_t)nv * sizeof *out);
        pos += n;
    }
    tern_context_free(ctx);
    return out;
}

/* Force a tile the way a caller does: a load with tern_model_params.decode_tile. */
static tern_status force(const char *path, const char *tile)
{
    struct tern_model *m = NULL;
    tern_status st = tern_model_load(path, &(struct tern_model_params){.decode_tile = tile}, &m);
    tern_model_free(m);
    return st;
}

static bool has_tiles(void) { return kern_tile_default() != KERN_TILE_AUTO; }

static char cache_dir[4096];

static void use_fresh_cache(const char *name)
{
    snprintf(cache_dir, sizeof cache_dir, "%s/tiles-%s", test_tmpdir(), name);
    setenv("TERN_CACHE_DIR", cache_dir, 1);
}

static char *read_cache(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/decode-tiles.tsv", cache_dir);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    const size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void check_same_bits(const char *rel)
{
    TEST_SHARED_OR_SKIP(path, rel);
    if (!has_tiles()) {
        print_message("%s: no packed copies on the %s path: no tile to choose\n", rel, kern_path_name());
        return;
    }
    use_fresh_cache("bits");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const int nv = tern_model_n_vocab(m);
    float *ref = run(m);
    int tested = 0;
    for (int t = KERN_TILE_ZMM; t < KERN_TILE_COUNT_; t++) {
        bool runs = false;
        for (int w = 0; w < TERN_TYPE_COUNT_; w++) runs = runs || kern_tile_runs(t, w);
        if (!runs) {
            assert_int_not_equal(force(path, kern_tile_name(t)), TERN_OK);
            continue;
        }
        assert_tern_ok(force(path, kern_tile_name(t)));
        float *got = run(m);
        assert_memory_equal(got, ref, (size_t)N_OUT * (size_t)nv * sizeof *ref);
        free(got);
        tested++;
    }
    assert_tern_ok(force(path, "auto"));
    print_message("%s: %d tiles, the same logits bit for bit (%s)\n", rel, tested,
                  tern_model_get_info(m)->decode_tiles);
    /* the 256-bit tile on any AVX2 CPU; a second one with AVX-512 (zmm) or AVX-VNNI */
    const bool two = strcmp(kern_path_name(), "avx512") == 0 || kern_cpu_has_avxvnni();
    assert_true(tested >= (two ? 2 : 1));
    free(ref);
    tern_model_free(m);
}

static void test_same_bits(void **state)
{
    (void)state;
    check_same_bits("fixtures/models/qwen2-tiny-q8_0.gguf");
    check_same_bits("fixtures/models/llama-spm-tiny-q4_k_m.gguf");
}

static void test_cache(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-q4_k_m.gguf");
    if (!has_tiles()) {
        print_message("no packed copies on the %s path: no tile to choose\n", kern_path_name());
        return;
    }
    use_fresh_cache("cache");
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const char *rep = tern_model_get_info(m)->decode_tiles;
    assert_true(!strncmp(rep, "measured: ", 10));
    assert_non_null(strstr(rep, "Q4_K k="));
    assert_non_null(strstr(rep, " x1 "));
    assert_non_null(strstr(rep, " x2-3 "));
    tern_model_free(m);
    char key[256];
    kern_cpu_key(key, sizeof key);
    char *c = read_cache();
    assert_non_null(c);
    assert_non_null(strstr(c, key));
    assert_non_null(strstr(c, "\tQ4_K\t"));
    assert_non_null(strstr(c, "\t1\t"));
    assert_non_null(strstr(c, "\t2-3\t"));
    free(c);
    assert_tern_ok(tern_model_load(path, NULL, &m));
    assert_true(!strncmp(tern_model_get_info(m)->decode_tiles, "cached: ", 8));
    tern_model_free(m);

    /* garbage: the load measures again and keeps only valid lines */
    char file[4200];
    snprintf(file, sizeof file, "%s/decode-tiles.tsv", cache_dir);
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    fprintf(f, "%s\tQ4_K\t256\t1\tnot-a-tile\t\n%s\tNOPE\t256\t1\tzmm\t\n%s\tQ4_K\t256\t7-9\tzmm\t\n"
               "%s\tQ4_K\t256\tzmm\t\n\x01\x02\xff\n", key, key, key, key);
    for (int i = 0; i < 3000; i++) fputc('x', f); /* a long line without a newline */
    fclose(f);
    assert_tern_ok(tern_model_load(path, NULL, &m));
    assert_true(!strncmp(tern_model_get_info(m)->decode_tiles, "measured: ", 10));
    tern_model_free(m);
    c = read_cache();
    assert_non_null(c);
    assert_null(strstr(c, "xxxxxxxx"));
    assert_null(strchr(c, '\x01'));
    assert_non_null(strstr(c, "\tQ4_K\t"));
    free(c);
    unsetenv("TERN_CACHE_DIR");
}

static void test_switches(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    assert_int_equal(force(path, "zmm512"), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "zmm512"));
    if (!has_tiles()) return;
    use_fresh_cache("switches");
    setenv("TERN_TUNE", "0", 1);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    assert_non_null(strstr(tern_model_get_info(m)->decode_tiles, "TERN_TUNE=0"));
    tern_model_free(m);
    unsetenv("TERN_TUNE");
    char *c = read_cache();
    assert_null(c); /* nothing measured, nothing written */
    assert_tern_ok(tern_model_load(path, &(struct tern_model_params){.decode_tile = "ymm"}, &m));
    assert_non_null(strstr(tern_model_get_info(m)->decode_tiles, "forced ymm"));
    tern_model_free(m);
    assert_tern_ok(force(path, "auto"));
    unsetenv("TERN_CACHE_DIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_switches),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
