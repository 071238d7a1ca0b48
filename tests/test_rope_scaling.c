/* test_rope_scaling.c — the two ways a GGUF can scale RoPE reach the same rotation: a
 * `rope_freqs.weight` tensor of frequency factors (Llama-3.x) all equal to 2 divides every
 * angle by 2, exactly as `rope.scaling.type = linear` with factor 2 does. Both models must give
 * bit-identical logits, and both must differ from the unscaled model (so neither is ignored).
 * The models are tern's synthetic tiny Llama, rewritten with the GGUF writer. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum variant { PLAIN, FREQS, LINEAR };

/* Copy src into path, adding the scaling of variant v. */
static void write_variant(const char *src, const char *path, enum variant v)
{
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(src, &g));
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        assert_tern_ok(tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    if (v == FREQS) {
        float f[16]; /* n_rot / 2 for the tiny shape (head_dim 32) */
        for (int i = 0; i < 16; i++) f[i] = 2.0f;
        int64_t ne[1] = {16};
        assert_tern_ok(tern_gguf_writer_add_tensor(w, "rope_freqs.weight", TERN_TYPE_F32, 1, ne, f));
    } else if (v == LINEAR) {
        assert_tern_ok(tern_gguf_writer_set_str(w, "llama.rope.scaling.type", "linear"));
        assert_tern_ok(tern_gguf_writer_set_f32(w, "llama.rope.scaling.factor", 2.0f));
    }
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
}

static float *logits_of(const char *path, int *n_vocab, bool *has_freqs, float *freq_scale)
{
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    *has_freqs = test_hparam(m, "has_rope_freqs") != 0;
    *freq_scale = (float)test_hparam(m, "rope_freq_scale");
    struct tern_context_params cp = {.n_ctx = 64, .n_threads = 1};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = (i * 37 + 5) % 256;
    assert_tern_ok(tern_decode(ctx, toks, 24, 0, TERN_LOGITS_LAST));
    *n_vocab = tern_model_n_vocab(m);
    float *out = malloc(sizeof(float) * (size_t)*n_vocab);
    memcpy(out, tern_context_logits(ctx, 23), sizeof(float) * (size_t)*n_vocab);
    tern_context_free(ctx);
    tern_model_free(m);
    return out;
}

static void test_freqs_equal_linear(void **state)
{
    (void)state;
    char base[4096], paths[3][4096];
    snprintf(base, sizeof base, "%s/tiny.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "f16", 7, base, NULL));
    const char *names[3] = {"plain", "freqs", "linear"};
    float *lg[3];
    int nv = 0;
    for (int v = 0; v < 3; v++) {
        snprintf(paths[v], sizeof paths[v], "%s/tiny-%s.gguf", test_tmpdir(), names[v]);
        write_variant(base, paths[v], (enum variant)v);
        bool freqs;
        float scale;
        lg[v] = logits_of(paths[v], &nv, &freqs, &scale);
        assert_int_equal(freqs, v == FREQS);
        assert_true(scale == (v == LINEAR ? 0.5f : 1.0f));
    }
    double diff_plain = 0;
    for (int i = 0; i < nv; i++) {
        assert_true(lg[FREQS][i] == lg[LINEAR][i]);
        double d = lg[FREQS][i] - lg[PLAIN][i];
        diff_plain += d < 0 ? -d : d;
    }
    print_message("scaled vs unscaled: mean |dlogit| %.3g (must be > 0)\n", diff_plain / nv);
    assert_true(diff_plain / nv > 1e-4);
    for (int v = 0; v < 3; v++) free(lg[v]);
}

/* A rope_freqs tensor of the wrong length is refused at load, naming the tensor. */
static void test_bad_freqs_shape(void **state)
{
    (void)state;
    char base[4096], path[4096];
    snprintf(base, sizeof base, "%s/tiny2.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 7, base, NULL));
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(base, &g));
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        assert_tern_ok(tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    float f[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t ne[1] = {8};
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "rope_freqs.weight", TERN_TYPE_F32, 1, ne, f));
    snprintf(path, sizeof path, "%s/badfreqs.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
    struct tern_model *m = NULL;
    assert_int_equal(tern_model_load(path, NULL, &m), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "rope_freqs.weight"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freqs_equal_linear),
        cmocka_unit_test(test_bad_freqs_shape),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
