/* test_train_lora.c — LoRA training on a frozen base (tern.h "lora" in struct tern_train_config):
 * - the trainer's forward with adapters equals tern's inference with the exported adapter file
 *   (tern_lora_load + tern_context_set_adapters) on an F32 base, within the F16 KV tolerance
 *   test_train_model uses; llama and qwen2;
 * - a quantized base (Q8_0, Q4_1) is dequantized tile by tile inside the products: logits and
 *   gradients are bit-identical to the run on the same weights stored as F32;
 * - gradients of A and B (with dropout's mask) against central finite differences of the loss;
 * - the frozen base is untouched: only adapter tensors are trained, and the export is an
 *   adapter GGUF carrying alpha and the chat template;
 * - resume = uninterrupted run and 1 thread = 2 threads, bit for bit;
 * - bad input: shape keys with lora, a rank or target that does not exist, a base the trainer
 *   cannot model, a checkpoint of another rank: refused naming what differs. */
#include "test_support.h"
#include "test_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/train_internal.h"

static struct tern_train_config full_config(enum tern_arch arch)
{
    struct tern_train_config c = tern_train_config_default();
    c.arch = arch;
    c.n_embd = 64, c.n_layer = 2, c.n_head = 4, c.n_head_kv = 2, c.n_ff = 96, c.n_ctx = 32;
    c.tied_output = arch == TERN_ARCH_QWEN2;
    c.rope_base = arch == TERN_ARCH_QWEN2 ? 1e6f : 10000.0f;
    c.rms_eps = arch == TERN_ARCH_QWEN2 ? 1e-6f : 1e-5f;
    snprintf(c.tokenizer, sizeof c.tokenizer, "%s", test_train_tokenizer());
    c.n_vocab = 512;
    c.lr = 3e-3f, c.lr_min = 3e-4f, c.warmup = 2, c.steps = 20;
    c.batch_tokens = 64, c.accum = 2, c.threads = 2, c.seed = 42;
    c.init_std_proj = c.init_std / 2.0f;
    return c;
}

/* A base model: a few full-training steps (so norms and biases are not their init), exported
 * as F32 to base_<arch>.gguf; returns its path. */
static const char *make_base(enum tern_arch arch)
{
    static char path[2][600];
    char *p = path[arch == TERN_ARCH_QWEN2];
    snprintf(p, 600, "%s/base_%d.gguf", test_tmpdir(), (int)arch);
    struct tern_train_config c = full_config(arch);
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_open(test_train_write_data("base.tdat", 40, 30, 5, 3), &d));
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    for (int i = 0; i < 4; i++) assert_tern_ok(tern_trainer_step(t, d, NULL));
    assert_tern_ok(tern_trainer_export(t, p));
    tern_trainer_free(t);
    tern_train_data_free(d);
    return p;
}

static struct tern_train_config lora_config(const char *base, int rank, float dropout)
{
    struct tern_train_config c = tern_train_config_default();
    c.n_ctx = 32, c.batch_tokens = 64, c.accum = 2, c.threads = 2, c.seed = 9;
    c.lr = 1e-2f, c.lr_min = 1e-3f, c.warmup = 1, c.steps = 10;
    c.lora_rank = rank;
    c.lora_alpha = 2.0f * rank;
    c.lora_dropout = dropout;
    assert_tern_ok(tern_train_config_set_lora(&c, base));
    return c;
}

/* Fill every adapter tensor (A and B) with seeded values of scale sd: B = 0 at init would hide
 * A's gradient and the adapters' effect. */
static void randomize_adapters(struct tern_trainer *t, float sd)
{
    uint64_t s = 77;
    size_t n;
    float *w = tern_trainer_weights(t, &n);
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = sd * (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

static void one_doc_batch(struct tern_trainer *t, int32_t *toks)
{
    static uint8_t mask[32];
    for (int i = 0; i < 32; i++) toks[i] = (i * 37 + 11) % 512, mask[i] = 1;
    const int32_t *tp[1] = {toks};
    const uint8_t *mp[1] = {mask};
    int len[1] = {32};
    train_batch_from_docs(&t->batch[0], t->T, tp, mp, len, 1);
}

/* ---------------------------------------------------------------- parity with inference */

static void parity_case(enum tern_arch arch)
{
    const char *base = make_base(arch);
    struct tern_train_config c = lora_config(base, 4, 0.0f);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    randomize_adapters(t, 0.3f);
    int32_t toks[32];
    one_doc_batch(t, toks);
    float *ref = malloc((size_t)32 * 512 * sizeof *ref), *plain = malloc((size_t)32 * 512 * sizeof *plain);
    train_forward_logits(t, &t->batch[0], ref, true);
    char ad[700];
    snprintf(ad, sizeof ad, "%s.adapter.gguf", base);
    assert_tern_ok(tern_trainer_export(t, ad));

    struct tern_model *m;
    assert_tern_ok(tern_model_load(base, NULL, &m));
    struct tern_lora *lo;
    assert_tern_ok(tern_lora_load(m, ad, &lo));
    struct tern_lora_info li;
    tern_lora_get_info(lo, &li);
    assert_true(li.alpha == 8.0f);
    assert_int_equal(li.n_targets, 2 * 7);
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 32, cp.n_threads = 2, cp.no_warmup = true;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    for (int with = 0; with < 2; with++) {
        struct tern_lora *ads[1] = {lo};
        assert_tern_ok(tern_context_set_adapters(ctx, ads, NULL, with));
        assert_tern_ok(tern_kv_seq_truncate(ctx, 0, 0));
        assert_tern_ok(tern_decode(ctx, toks, 32, 0, TERN_LOGITS_ALL));
        double worst = 0.0, moved = 0.0;
        for (int i = 0; i < 32; i++) {
            const float *l = tern_context_logits(ctx, i);
            for (int j = 0; j < 512; j++) {
                if (!with) plain[(size_t)i * 512 + j] = l[j];
                worst = fmax(worst, fabs((double)l[j] - ref[(size_t)i * 512 + j]));
                moved = fmax(moved, fabs((double)plain[(size_t)i * 512 + j] - ref[(size_t)i * 512 + j]));
            }
        }
        print_message("arch %d, inference %s the adapter vs the LoRA trainer: max |diff| %.2e\n",
                      (int)arch, with ? "with" : "without", worst);
        if (with) {
            /* the F16 rounding of q/k/v is on in both, but the adapters' sums run in another
             * order, so a rounding can land on the other side: the bound of test_train_model's
             * F32-attention case */
            assert_true(worst < 3e-4);
            assert_true(moved > 0.05); /* the adapters do change the logits */
        } else {
            assert_true(worst > 0.05);
        }
    }
    tern_context_free(ctx);
    tern_lora_free(lo);
    tern_model_free(m);

    /* the adapter file: llama.cpp's keys, the base's architecture, only adapter tensors */
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(ad, &g));
    struct tern_str s;
    assert_tern_ok(tern_gguf_get_str(g, "general.type", &s));
    assert_int_equal(s.len, 7);
    assert_memory_equal(s.ptr, "adapter", 7);
    assert_tern_ok(tern_gguf_get_str(g, "general.architecture", &s));
    assert_memory_equal(s.ptr, arch == TERN_ARCH_QWEN2 ? "qwen2" : "llama", 5);
    assert_int_equal(tern_gguf_n_tensors(g), 2 * 2 * 7);
    tern_gguf_close(g);
    free(ref);
    free(plain);
    tern_trainer_free(t);
}

static void test_parity_llama(void **state)
{
    (void)state;
    parity_case(TERN_ARCH_LLAMA);
}

static void test_parity_qwen2(void **state)
{
    (void)state;
    parity_case(TERN_ARCH_QWEN2);
}

/* ---------------------------------------------------------------- quantized base */

/* One forward + backward on batch 0 of a fresh LoRA trainer on base (adapters randomized):
 * logits of the batch's rows into lg, the gradient into gr (n floats). */
static void logits_and_grad(const char *base, float *lg, float *gr, size_t *n)
{
    struct tern_train_config c = lora_config(base, 4, 0.0f);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    randomize_adapters(t, 0.3f);
    int32_t toks[32];
    one_doc_batch(t, toks);
    train_forward_logits(t, &t->batch[0], lg, false);
    memset(t->g, 0, t->n_params * sizeof *t->g);
    train_forward_backward(t, &t->batch[0], 1.0 / 32);
    *n = t->n_params;
    memcpy(gr, t->g, t->n_params * sizeof *gr);
    tern_trainer_free(t);
}

static void test_quantized_base(void **state)
{
    (void)state;
    const char *base = make_base(TERN_ARCH_LLAMA);
    const char *types[] = {"q8_0", "q4_1", "q4_k"};
    for (int k = 0; k < 3; k++) {
        char q[700], back[760];
        snprintf(q, sizeof q, "%s.%s.gguf", base, types[k]);
        snprintf(back, sizeof back, "%s.f32.gguf", q);
        assert_tern_ok(tern_quantize_model(base, q, types[k], NULL));
        assert_tern_ok(tern_quantize_model(q, back, "f32", NULL)); /* the same weights as F32 */
        float *l1 = malloc(32 * 512 * sizeof *l1), *l2 = malloc(32 * 512 * sizeof *l2);
        float *g1 = malloc(1 << 22), *g2 = malloc(1 << 22);
        size_t n1, n2;
        logits_and_grad(q, l1, g1, &n1);
        logits_and_grad(back, l2, g2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(l1, l2, 32 * 512 * sizeof *l1);
        assert_memory_equal(g1, g2, n1 * sizeof *g1);
        double gn = 0;
        for (size_t i = 0; i < n1; i++) gn += (double)g1[i] * g1[i];
        print_message("%s base: logits and adapter gradients (norm %.3g) bit-identical to the "
                      "F32 copy of its weights\n", types[k], sqrt(gn));
        assert_true(gn > 0);
        free(l1), free(l2), free(g1), free(g2);
    }
}

/* ---------------------------------------------------------------- gradients */

static double loss_of(struct tern_trainer *t)
{
    t->lora_train = true; /* dropout's mask as in the training pass */
    const double l = train_forward_loss(t, &t->batch[0]);
    t->lora_train = false;
    return l;
}

static void grad_case(enum tern_arch arch, float dropout)
{
    const char *base = make_base(arch);
    struct tern_train_config c = lora_config(base, 4, dropout);
    c.threads = 1;
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    randomize_adapters(t, 0.2f);
    int32_t toks[32];
    one_doc_batch(t, toks);
    t->lora_mb = 3;
    memset(t->g, 0, t->n_params * sizeof *t->g);
    train_forward_backward(t, &t->batch[0], 1.0);
    float *g = malloc(t->n_params * sizeof *g);
    memcpy(g, t->g, t->n_params * sizeof *g);
    /* a few entries of every adapter tensor */
    double worst = 0.0;
    int checked = 0;
    for (int ti = 0; ti < t->n_tensors; ti++) {
        const struct train_tensor *x = &t->tensors[ti];
        const size_t n = (size_t)(x->ne[0] * x->ne[1]);
        for (int k = 0; k < 3; k++) {
            const size_t i = x->off + (size_t)((k * 7919 + ti * 31) % (int)n);
            const float w0 = t->w[i];
            const float h = 1e-2f;
            t->w[i] = w0 + h;
            const double lp = loss_of(t);
            t->w[i] = w0 - h;
            const double lm = loss_of(t);
            t->w[i] = w0;
            const double fd = (lp - lm) / (2.0 * h);
            const double e = fabs(fd - g[i]) / fmax(1e-2, fabs(fd) + fabs(g[i]));
            if (e > worst) worst = e;
            checked++;
        }
    }
    print_message("arch %d dropout %.2f: %d adapter gradients vs central differences: worst "
                  "relative error %.2e\n", (int)arch, dropout, checked, worst);
    assert_true(worst < 2e-2);
    free(g);
    tern_trainer_free(t);
}

static void test_gradients(void **state)
{
    (void)state;
    grad_case(TERN_ARCH_LLAMA, 0.0f);
    grad_case(TERN_ARCH_QWEN2, 0.0f);
    grad_case(TERN_ARCH_LLAMA, 0.25f);
}

/* ---------------------------------------------------------------- determinism */

static void test_resume_and_threads(void **state)
{
    (void)state;
    char q[700];
    snprintf(q, sizeof q, "%s.q4_1r.gguf", make_base(TERN_ARCH_QWEN2));
    assert_tern_ok(tern_quantize_model(make_base(TERN_ARCH_QWEN2), q, "q4_1", NULL));
    struct tern_train_config c = lora_config(q, 8, 0.1f);
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_open(test_train_write_data("lora.tdat", 25, 40, 3, 3), &d));
    const int N = 6;
    struct tern_trainer *a, *b, *one;
    assert_tern_ok(tern_trainer_create(&c, &a));
    assert_tern_ok(tern_trainer_init(a));
    double before, after;
    assert_tern_ok(tern_trainer_eval(a, d, &before, NULL));
    for (int i = 0; i < N; i++) assert_tern_ok(tern_trainer_step(a, d, NULL));
    assert_tern_ok(tern_trainer_eval(a, d, &after, NULL));
    print_message("LoRA on a Q4_1 qwen2 base: loss on the data %.4f -> %.4f in %d steps\n", before,
                  after, N);
    assert_true(after < before);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/lora.ckpt", test_tmpdir());
    assert_tern_ok(tern_trainer_create(&c, &b));
    assert_tern_ok(tern_trainer_init(b));
    for (int i = 0; i < N / 2; i++) assert_tern_ok(tern_trainer_step(b, d, NULL));
    assert_tern_ok(tern_trainer_checkpoint_save(b, dir));
    tern_trainer_free(b);
    assert_tern_ok(tern_trainer_create(&c, &b));
    assert_tern_ok(tern_trainer_checkpoint_load(b, dir));
    for (int i = 0; i < N / 2; i++) assert_tern_ok(tern_trainer_step(b, d, NULL));
    size_t n;
    const float *wa = tern_trainer_weights(a, &n);
    assert_memory_equal(wa, tern_trainer_weights(b, NULL), n * sizeof(float));
    struct tern_train_config c1 = c;
    c1.threads = 1;
    assert_tern_ok(tern_trainer_create(&c1, &one));
    assert_tern_ok(tern_trainer_init(one));
    for (int i = 0; i < N; i++) assert_tern_ok(tern_trainer_step(one, d, NULL));
    assert_memory_equal(wa, tern_trainer_weights(one, NULL), n * sizeof(float));
    tern_trainer_free(one);
    /* --lora-init: a new run starts from the exported adapter's A and B exactly */
    char ad[760];
    snprintf(ad, sizeof ad, "%s.adapter.gguf", dir);
    assert_tern_ok(tern_trainer_export(a, ad));
    struct tern_trainer *from;
    assert_tern_ok(tern_trainer_create(&c, &from));
    assert_tern_ok(tern_trainer_init(from));
    assert_tern_ok(tern_trainer_load_adapter(from, ad));
    assert_memory_equal(wa, tern_trainer_weights(from, NULL), n * sizeof(float));
    tern_trainer_free(from);
    /* a checkpoint of another rank is refused naming it */
    struct tern_train_config c2 = lora_config(q, 4, 0.1f);
    struct tern_trainer *x;
    assert_tern_ok(tern_trainer_create(&c2, &x));
    assert_int_equal(tern_trainer_checkpoint_load(x, dir), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "LoRA rank"));
    assert_int_equal(tern_trainer_load_adapter(x, ad), TERN_ERR_ARG); /* alpha 8 vs 16 */
    assert_non_null(strstr(tern_last_error(), "alpha"));
    tern_trainer_free(x);
    tern_trainer_free(a);
    tern_trainer_free(b);
    tern_train_data_free(d);
}

/* ---------------------------------------------------------------- PyTorch's LoRA math */

/* tests/data/lora_train/torch_ref.json (bench/peers/lora_reference.py): PEFT's W x + (alpha/r)
 * B A x on `tern synth tiny:f32 --seed 7`, every matrix adapted at rank 4, A and B from the same
 * LCG as here; the loss and samples of dL/dA, dL/dB computed by autograd in float64. */
static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s;
}

static void test_torch_reference(void **state)
{
    (void)state;
    char ref_path[1024];
    snprintf(ref_path, sizeof ref_path, "%s/tests/data/lora_train/torch_ref.json", test_source_dir());
    size_t len;
    char *text = test_read_file(ref_path, &len);
    assert_non_null(text);
    cJSON *ref = cJSON_Parse(text);
    free(text);
    assert_non_null(ref);
    char base[700];
    snprintf(base, sizeof base, "%s/tiny-f32-7.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "f32", 7, base, NULL));
    struct tern_train_config c = tern_train_config_default();
    c.n_ctx = 32, c.batch_tokens = 32, c.accum = 1, c.threads = 2;
    c.lora_rank = 4, c.lora_alpha = 8.0f;
    assert_tern_ok(tern_train_config_set_lora(&c, base));
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    /* A and B in the script's order: layer by layer, q k v o gate up down, A (r, in) then B */
    uint64_t g = 11;
    for (int l = 0; l < t->L; l++)
        for (int m = 0; m < TERN_LORA_N_TARGETS; m++) {
            const struct train_tensor *ta = NULL, *tb = NULL;
            for (int i = 0; i < t->n_tensors; i++) {
                if (t->tensors[i].off == t->layer[l].lora_a[m]) ta = &t->tensors[i];
                if (t->tensors[i].off == t->layer[l].lora_b[m]) tb = &t->tensors[i];
            }
            assert_non_null(ta);
            assert_non_null(tb);
            for (const struct train_tensor *x = ta; x; x = x == ta ? tb : NULL)
                for (int64_t i = 0; i < x->ne[0] * x->ne[1]; i++)
                    t->w[x->off + i] = (float)(((double)(lcg(&g) >> 11) / 9007199254740992.0 - 0.5) * 0.4);
        }
    int32_t toks[32];
    uint8_t mask[32];
    for (int i = 0; i < 32; i++) toks[i] = (int32_t)(lcg(&g) % 512), mask[i] = i >= 16;
    const int32_t *tp[1] = {toks};
    const uint8_t *mp[1] = {mask};
    int lens[1] = {32};
    train_batch_from_docs(&t->batch[0], t->T, tp, mp, lens, 1);
    memset(t->g, 0, t->n_params * sizeof *t->g);
    const double loss = train_forward_backward(t, &t->batch[0], 1.0 / (double)t->batch[0].n_loss) /
                        (double)t->batch[0].n_loss;
    const double want = cJSON_GetObjectItem(ref, "loss")->valuedouble;
    print_message("loss: tern %.7f, PyTorch %s %.7f\n", loss,
                  cJSON_GetObjectItem(ref, "torch")->valuestring, want);
    assert_true(fabs(loss - want) < 1e-4 * fabs(want));
    double worst_norm = 0.0, worst_val = 0.0;
    const cJSON *gr;
    int n_checked = 0;
    cJSON_ArrayForEach(gr, cJSON_GetObjectItem(ref, "grads")) {
        const char *name = cJSON_GetObjectItem(gr, "tensor")->valuestring;
        const struct train_tensor *x = NULL;
        for (int i = 0; i < t->n_tensors; i++)
            if (!strcmp(t->tensors[i].name, name)) x = &t->tensors[i];
        if (!x) fail_msg("the reference's tensor %s is not the trainer's", name);
        const size_t n = (size_t)(x->ne[0] * x->ne[1]);
        double sq = 0.0;
        for (size_t i = 0; i < n; i++) sq += (double)t->g[x->off + i] * t->g[x->off + i];
        const double rn = cJSON_GetObjectItem(gr, "norm")->valuedouble;
        worst_norm = fmax(worst_norm, fabs(sqrt(sq) - rn) / fmax(rn, 1e-12));
        const cJSON *at = cJSON_GetObjectItem(gr, "at"), *vals = cJSON_GetObjectItem(gr, "values");
        for (int k = 0; k < cJSON_GetArraySize(at); k++) {
            const size_t i = (size_t)cJSON_GetArrayItem(at, k)->valuedouble;
            const double v = cJSON_GetArrayItem(vals, k)->valuedouble;
            worst_val = fmax(worst_val, fabs(t->g[x->off + i] - v) / fmax(rn / sqrt((double)n), 1e-12));
        }
        n_checked++;
    }
    print_message("%d adapter gradients: norms within %.2e (relative), sampled entries within %.2e "
                  "of the tensor's RMS\n", n_checked, worst_norm, worst_val);
    assert_int_equal(n_checked, 2 * 7 * t->L);
    assert_true(worst_norm < 1e-4);
    assert_true(worst_val < 1e-3);
    cJSON_Delete(ref);
    tern_trainer_free(t);
}

/* ---------------------------------------------------------------- bad input */

static void expect_config_error(const char *json, const char *needle)
{
    struct tern_train_config c;
    assert_int_not_equal(tern_train_config_parse(json, strlen(json), &c), TERN_OK);
    if (!strstr(tern_last_error(), needle))
        fail_msg("config %s: error '%s' does not name '%s'", json, tern_last_error(), needle);
}

static void test_bad_input(void **state)
{
    (void)state;
    const char *base = make_base(TERN_ARCH_LLAMA);
    char j[2048];
    snprintf(j, sizeof j, "{\"lora\": {\"base\": \"%s\", \"rank\": 0}}", base);
    expect_config_error(j, "lora.rank");
    snprintf(j, sizeof j, "{\"lora\": {\"base\": \"%s\", \"targets\": [\"q\", \"qq\"]}}", base);
    expect_config_error(j, "'qq' is not a matrix");
    snprintf(j, sizeof j, "{\"lora\": {\"base\": \"%s\"}, \"n_embd\": 128}", base);
    expect_config_error(j, "n_embd");
    snprintf(j, sizeof j, "{\"lora\": {\"rank\": 4}, \"n_vocab\": 512}");
    expect_config_error(j, "'base'");
    snprintf(j, sizeof j, "{\"lora\": {\"base\": \"%s\", \"ranks\": 4}}", base);
    expect_config_error(j, "lora.ranks");
    snprintf(j, sizeof j, "{\"lora\": {\"base\": \"%s/none.gguf\"}}", test_tmpdir());
    expect_config_error(j, "none.gguf");
    /* a valid one takes the base's shape and tokenizer */
    snprintf(j, sizeof j, "{\"lora\": {\"base\": \"%s\", \"rank\": 8, \"targets\": \"q,v\"}, "
             "\"n_ctx\": 16}", base);
    struct tern_train_config c;
    assert_tern_ok(tern_train_config_parse(j, strlen(j), &c));
    assert_int_equal(c.n_embd, 64);
    assert_int_equal(c.n_vocab, 512);
    assert_int_equal(c.n_ctx, 16);
    assert_int_equal(c.lora_rank, 8);
    assert_true(c.lora_alpha == 16.0f);
    assert_int_equal(c.lora_targets, 1u << TERN_LORA_Q | 1u << TERN_LORA_V);
    assert_string_equal(c.tokenizer, base);
    /* a base the trainer cannot model (the synth gemma3 shape) */
    char gemma[700];
    snprintf(gemma, sizeof gemma, "%s/gemma.gguf", test_tmpdir());
    if (tern_synth_model_write("gemma3-tiny", "f32", 1, gemma, NULL) == TERN_OK) {
        struct tern_train_config g = tern_train_config_default();
        assert_int_not_equal(tern_train_config_set_lora(&g, gemma), TERN_OK);
        assert_non_null(strstr(tern_last_error(), "gemma3"));
    }
    /* the config's shape must be the base's when a trainer is made */
    struct tern_train_config bad = lora_config(base, 4, 0.0f);
    bad.n_ff = 128;
    struct tern_trainer *t = NULL;
    assert_int_equal(tern_trainer_create(&bad, &t), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "n_ff"));
    /* QAT would train full weights: refused */
    struct tern_train_config ok = lora_config(base, 4, 0.0f);
    assert_tern_ok(tern_trainer_create(&ok, &t));
    struct tern_distill_recipe r = tern_distill_recipe_default();
    r.qat_start = 0.5f;
    assert_int_equal(tern_trainer_set_distill(t, &r), TERN_ERR_ARG);
    tern_trainer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_llama),
        cmocka_unit_test(test_parity_qwen2),
        cmocka_unit_test(test_quantized_base),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_torch_reference),
        cmocka_unit_test(test_resume_and_threads),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
