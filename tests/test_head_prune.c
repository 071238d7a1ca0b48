/* test_head_prune.c — a drafter's pruned output head (tern_quantize_model_head, the key
 * tern.output_token_ids): the pruned file gives every kept token the logit the whole model
 * gives it and every other token -inf, for one row and for batches, on the tied (qwen2) and
 * untied (llama) fixtures, and so does its in-memory quantized copy (the "self:TYPE" drafter);
 * ids out of order or out of the vocabulary, a second pruning and a file whose ids were
 * tampered with are refused with what is wrong. */
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern_gguf.h"

enum { N_TOK = 9 };

static const char *fixtures[] = {"qwen2-tiny-q8_0", "llama-spm-tiny-q8_0", "llama-spm-tiny-q4_k_m"};

/* Every third id, plus the last: kept ids spread over the whole vocabulary. */
static int32_t *pick_ids(int nv, int *n)
{
    int32_t *ids = malloc(sizeof *ids * (size_t)nv);
    assert_non_null(ids);
    int k = 0;
    for (int i = 0; i < nv; i += 3) ids[k++] = i;
    if (ids[k - 1] != nv - 1) ids[k++] = nv - 1;
    *n = k;
    return ids;
}

/* Logits of N_TOK tokens decoded as one batch, every row. */
static float *batch_logits(struct tern_model *m, int nv)
{
    struct tern_context_params cp = {.n_ctx = 64, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t toks[N_TOK];
    for (int i = 0; i < N_TOK; i++) toks[i] = (int32_t)((i * 7919 + 13) % (nv - 300) + 259);
    assert_tern_ok(tern_decode(ctx, toks, N_TOK, 0, TERN_LOGITS_ALL));
    float *out = malloc(sizeof(float) * (size_t)nv * N_TOK);
    assert_non_null(out);
    for (int i = 0; i < N_TOK; i++)
        memcpy(out + (size_t)i * nv, tern_context_logits(ctx, i), sizeof(float) * (size_t)nv);
    tern_context_free(ctx);
    return out;
}

/* Kept ids: the whole model's logit (the same row bytes, copied, and the same kernels: rows in
 * other places of the packed layout sum in the same order); the rest -inf. */
static void expect_pruned(const float *full, const float *pruned, int nv, const int32_t *ids, int n)
{
    int k = 0, kept = 0;
    for (int r = 0; r < N_TOK; r++) {
        k = 0;
        for (int t = 0; t < nv; t++) {
            const float a = full[(size_t)r * nv + t], b = pruned[(size_t)r * nv + t];
            if (k < n && ids[k] == t) {
                if (a != b)
                    fail_msg("row %d token %d (kept %d): %g against %g", r, t, k, (double)b, (double)a);
                k++;
                kept++;
            } else {
                assert_true(isinf(b) && b < 0);
            }
        }
    }
    assert_int_equal(kept, n * N_TOK);
}

static void test_logits_of_pruned_head(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/models");
    (void)dir;
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char rel[128], out[4096];
        snprintf(rel, sizeof rel, "fixtures/models/%s.gguf", fixtures[f]);
        const char *path = test_shared_path(rel);
        snprintf(out, sizeof out, "%s/%s-pruned.gguf", test_tmpdir(), fixtures[f]);
        struct tern_model *m, *p, *copy;
        assert_tern_ok(tern_model_load(path, NULL, &m));
        const int nv = tern_model_n_vocab(m);
        int n;
        int32_t *ids = pick_ids(nv, &n);
        assert_tern_ok(tern_quantize_model_head(path, out, "keep", ids, n, NULL));
        assert_tern_ok(tern_model_load(out, NULL, &p));
        assert_int_equal(tern_model_n_vocab(p), nv);
        assert_int_equal(test_hparam(p, "head_rows"), n);
        assert_int_equal(test_hparam(m, "head_rows"), nv);
        assert_false(test_hparam(p, "tied_output"));
        float *full = batch_logits(m, nv), *pl = batch_logits(p, nv);
        expect_pruned(full, pl, nv, ids, n);
        /* the self:TYPE drafter's copy keeps the pruning */
        assert_tern_ok(tern_model_quantized_copy(p, "q8_0", 2, &copy));
        assert_int_equal(test_hparam(copy, "head_rows"), n);
        float *cl = batch_logits(copy, nv);
        for (int r = 0; r < N_TOK; r++)
            for (int t = 0; t < nv; t++)
                if (t % 3 && t != nv - 1) assert_true(isinf(cl[(size_t)r * nv + t]));
        print_message("%s: %d of %d tokens kept\n", fixtures[f], n, nv);
        free(full);
        free(pl);
        free(cl);
        free(ids);
        tern_model_free(copy);
        tern_model_free(p);
        tern_model_free(m);
    }
}

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The byte offset of the first id of tern.output_token_ids in a file's bytes. */
static size_t ids_offset(const unsigned char *b, size_t size)
{
    const char *key = "tern.output_token_ids";
    const size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 16 < size; i++)
        if (!memcmp(b + i, key, kl)) return i + kl + 4 + 4 + 8; /* type, elem type, count */
    fail_msg("tern.output_token_ids not found");
    return 0;
}

static void test_refusals(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char out[4096], again[4096];
    snprintf(out, sizeof out, "%s/refuse-pruned.gguf", test_tmpdir());
    snprintf(again, sizeof again, "%s/refuse-again.gguf", test_tmpdir());
    const int32_t down[] = {5, 4}, big[] = {1, 50257}, neg[] = {-1, 2}, ok[] = {3, 9, 400};
    assert_int_equal(tern_quantize_model_head(path, out, "keep", down, 2, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "head id 4 (entry 1): the ids must ascend strictly"));
    assert_int_equal(tern_quantize_model_head(path, out, "keep", big, 2, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "[0, 50257)"));
    assert_int_equal(tern_quantize_model_head(path, out, "keep", neg, 2, NULL), TERN_ERR_ARG);
    assert_int_equal(tern_quantize_model_head(path, out, "keep", ok, 0, NULL), TERN_ERR_ARG);
    assert_int_equal(access(out, F_OK), -1); /* nothing written */
    assert_tern_ok(tern_quantize_model_head(path, out, "q4_0", ok, 3, NULL));
    assert_int_equal(tern_quantize_model_head(out, again, "keep", ok, 3, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "already pruned"));
    /* requantizing a pruned file keeps its head */
    assert_tern_ok(tern_quantize_model(out, again, "q8_0", NULL));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(again, NULL, &m));
    assert_int_equal(test_hparam(m, "head_rows"), 3);
    tern_model_free(m);
    /* ids tampered with in the file: refused at load, naming the entry */
    size_t size;
    unsigned char *b = (unsigned char *)test_read_file(out, &size);
    const size_t at = ids_offset(b, size);
    int32_t v = 2; /* 3, 9, 400 -> 3, 2, 400 */
    memcpy(b + at + 4, &v, 4);
    write_bytes(again, b, size);
    assert_int_equal(tern_model_load(again, NULL, &m), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "tern.output_token_ids[1] = 2"));
    v = 1 << 20; /* beyond the vocabulary */
    memcpy(b + at + 4, &v, 4);
    write_bytes(again, b, size);
    assert_int_equal(tern_model_load(again, NULL, &m), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "lie in [0, 50257)"));
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_of_pruned_head),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
