/* test_distill.c — tern distill's library side on a tiny teacher trained here (tern's trainer,
 * ~3 s) over a Markov-chain "language" whose next token is a fixed function of the current one 80 %
 * of the time (tokens 260..299 of the tiny synthetic vocabulary; documents up to 2.5 n_ctx long,
 * so some are cut into pieces):
 * - the cached teacher signal of a trainer row equals tern's inference run independently on that
 *   row's piece (tern_decode of the tokens from the piece start to the row): every top-k
 *   log-probability and the tail, for rows of shuffled batches, pieces included;
 * - a cache for another k, temperature, teacher or data is refused naming what differs; ensure
 *   rebuilds it only when asked;
 * - a truncated or damaged cache is an error naming the file and a byte offset, never a crash;
 * - distillation moves a smaller student toward the teacher: on held-out documents the KL falls
 *   and the top-1 agreement rises (figures printed, bounds below the measured values);
 * - QAT: after a run whose last half is fake-quantized, the exported model quantized by tern
 *   quantize (Q8_0, Q4_0) gives logits whose cosine with the trainer's QAT forward is >= 0.999,
 *   and at least that of the plain F32 forward;
 * - the latency-aware weights on batch rows: the early tool-call rows (mask bytes 2..) ramped over the
 *   epochs, document weights, unweighted validation, bad document weights refused. */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/distill.h"
#include "train/train_internal.h"

#define T_CTX 32
#define FIRST_TOK 260
#define N_SYM 40

static char dir[512], tok_path[600], teacher_path[600];
static struct tern_train_data *train_d, *val_d;
static struct tern_model *teacher;

static struct tern_train_data *markov_docs(uint64_t seed, int n_docs)
{
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    uint64_t s = seed;
#define RND() (s = s * 6364136223846793005ull + 1442695040888963407ull, (s >> 33))
    for (int d = 0; d < n_docs; d++) {
        int32_t tok[80];
        uint8_t mask[80];
        const int len = 8 + (int)(RND() % 73);
        int x = (int)(RND() % N_SYM);
        for (int i = 0; i < len; i++) {
            tok[i] = FIRST_TOK + x;
            mask[i] = i >= 2;
            x = RND() % 10 < 8 ? (3 * x + 7) % N_SYM : (int)(RND() % N_SYM);
        }
        assert_tern_ok(tern_train_data_add(w, tok, mask, len));
    }
#undef RND
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_from_writer(w, &d));
    tern_train_data_writer_free(w);
    return d;
}

static struct tern_train_config tiny_config(int n_embd, int n_layer, int steps, uint64_t seed)
{
    struct tern_train_config c = tern_train_config_default();
    c.n_embd = n_embd, c.n_layer = n_layer, c.n_head = 4, c.n_head_kv = 2, c.n_ff = 2 * n_embd;
    c.n_ctx = T_CTX, c.batch_tokens = 256, c.lr = 3e-3f, c.lr_min = 3e-4f, c.warmup = 10;
    c.steps = steps, c.seed = seed, c.threads = 2;
    snprintf(c.tokenizer, sizeof c.tokenizer, "%s", tok_path);
    c.n_vocab = 0;
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(tok_path, &g));
    c.n_vocab = (int)tern_gguf_arr_len(g, tern_gguf_find_key(g, "tokenizer.ggml.tokens"));
    tern_gguf_close(g);
    return c;
}

static void setup_teacher(void)
{
    if (teacher) return;
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(tok_path, sizeof tok_path, "%s/tok.gguf", dir);
    assert_tern_ok(tern_synth_model_write("tiny", "f32", 3, tok_path, NULL));
    train_d = markov_docs(1, 300);
    val_d = markov_docs(2, 40);
    struct tern_train_config c = tiny_config(64, 2, 150, 1);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    struct tern_train_step_info si;
    while (tern_trainer_step_index(t) < c.steps) assert_tern_ok(tern_trainer_step(t, train_d, &si));
    double vl;
    assert_tern_ok(tern_trainer_eval(t, val_d, &vl, NULL));
    print_message("teacher: 150 steps, val loss %.3f (the chain's entropy is ~1.2 nats)\n", vl);
    snprintf(teacher_path, sizeof teacher_path, "%s/teacher.gguf", dir);
    assert_tern_ok(tern_trainer_export(t, teacher_path));
    tern_trainer_free(t);
    assert_tern_ok(tern_model_load(teacher_path, NULL, &teacher));
}

static struct tern_distill_cache_params cache_params(int k, float tau, int n_vocab)
{
    struct tern_distill_cache_params p = tern_distill_cache_default_params();
    p.top_k = k, p.temperature = tau, p.n_ctx = T_CTX, p.n_vocab = n_vocab, p.n_threads = 2;
    return p;
}

/* ------------------------------------------------------------------ cache = inference */

static void test_cache_matches_inference(void **state)
{
    (void)state;
    setup_teacher();
    const int V = tern_model_n_vocab(teacher), k = 8;
    const float tau = 2.0f;
    struct tern_distill_cache_params p = cache_params(k, tau, V);
    char path[700];
    snprintf(path, sizeof path, "%s/train.kd", dir);
    struct tern_distill_cache *kd;
    bool built = false;
    assert_tern_ok(tern_distill_cache_ensure(teacher, train_d, &p, path, false, &kd, &built));
    assert_true(built);
    /* a student-shaped trainer only to pack batches exactly as training does */
    struct tern_train_config c = tiny_config(32, 1, 10, 9);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = T_CTX, cp.n_threads = 2, cp.no_warmup = true;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(teacher, &cp, &ctx));
    double worst = 0.0;
    int checked = 0;
    double *ref = malloc((size_t)V * sizeof *ref);
    t->kd = kd;
    for (int bi = 0; bi < 12; bi++) {
        struct train_batch *b = &t->batch[0];
        assert_tern_ok(train_batch_fill(t, train_d, b));
        for (int r = 0; r < t->N; r++) {
            if (b->sig[r] < 0) {
                assert_true(b->weight[r] == 0.0f);
                continue;
            }
            if (r % 5) continue; /* a fifth of the rows: enough, and fast */
            const int s0 = r / T_CTX * T_CTX, first = s0 + b->start[r];
            /* the piece's tokens from its start to r, decoded alone from position 0 */
            assert_tern_ok(tern_kv_truncate(ctx, 0));
            assert_tern_ok(tern_decode(ctx, b->tok + first, r - first + 1, 0, TERN_LOGITS_LAST));
            const float *l = tern_context_logits(ctx, r - first);
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < V; j++) mx = fmax(mx, l[j]);
            for (int j = 0; j < V; j++) sum += exp((l[j] - mx) / tau);
            for (int j = 0; j < V; j++) ref[j] = (l[j] - mx) / tau - log(sum);
            const int32_t *ids;
            const float *lp;
            float tail;
            assert_true(tern_distill_cache_entry(kd, (uint64_t)b->sig[r], &ids, &lp, &tail));
            double top = 0.0;
            for (int i = 0; i < k; i++) {
                worst = fmax(worst, fabs(ref[ids[i]] - lp[i]));
                top += exp(ref[ids[i]]);
                /* nothing outside the top-k is more likely than its last member */
                if (i == k - 1)
                    for (int j = 0; j < V; j++) {
                        bool in = false;
                        for (int m = 0; m < k; m++) in |= ids[m] == j;
                        if (!in) assert_true(ref[j] <= ref[ids[k - 1]] + 1e-4);
                    }
            }
            worst = fmax(worst, fabs((1.0 - top) - tail));
            assert_int_equal(b->target[r], b->tok[r + 1]);
            checked++;
        }
    }
    t->kd = NULL;
    print_message("cache vs tern_decode: %d rows of shuffled batches, max |log-prob or tail diff| %.2e "
                  "(%llu entries)\n", checked, worst,
                  (unsigned long long)tern_distill_cache_n_entries(kd));
    assert_true(checked > 100);
    assert_true(worst < 1e-4);
    free(ref);
    tern_context_free(ctx);
    tern_trainer_free(t);
    tern_distill_cache_free(kd);
}

/* ------------------------------------------------------------------ refusals */

static void test_cache_mismatch(void **state)
{
    (void)state;
    setup_teacher();
    const int V = tern_model_n_vocab(teacher);
    char path[700];
    snprintf(path, sizeof path, "%s/val.kd", dir);
    struct tern_distill_cache_params p = cache_params(4, 1.0f, V);
    struct tern_distill_cache *kd;
    bool built;
    assert_tern_ok(tern_distill_cache_ensure(teacher, val_d, &p, path, false, &kd, &built));
    assert_true(built);
    tern_distill_cache_free(kd);
    /* the same settings read it back without running the teacher */
    assert_tern_ok(tern_distill_cache_ensure(teacher, val_d, &p, path, false, &kd, &built));
    assert_false(built);
    uint8_t tfp[32];
    assert_tern_ok(tern_model_fingerprint(teacher, tfp));
    struct { int k; float tau; int ctx; const char *what; } bad[] = {
        {5, 1.0f, T_CTX, "top_k 4"}, {4, 2.0f, T_CTX, "temperature 1"}, {4, 1.0f, 16, "n_ctx 32"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct tern_distill_cache_params q = cache_params(bad[i].k, bad[i].tau, V);
        q.n_ctx = bad[i].ctx;
        assert_int_equal(tern_distill_cache_check(kd, tfp, val_d, &q), TERN_ERR_ARG);
        print_message("refused: %s\n", tern_last_error());
        assert_non_null(strstr(tern_last_error(), bad[i].what));
    }
    assert_int_equal(tern_distill_cache_check(kd, tfp, train_d, &p), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "other data"));
    uint8_t other[32];
    memcpy(other, tfp, 32);
    other[0] ^= 1;
    assert_int_equal(tern_distill_cache_check(kd, other, val_d, &p), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "another teacher"));
    tern_distill_cache_free(kd);
    /* ensure: a mismatch is refused, naming the fix; with rebuild the teacher runs again */
    struct tern_distill_cache_params q = cache_params(6, 1.0f, V);
    assert_int_equal(tern_distill_cache_ensure(teacher, val_d, &q, path, false, &kd, &built),
                     TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "--rebuild-cache"));
    assert_tern_ok(tern_distill_cache_ensure(teacher, val_d, &q, path, true, &kd, &built));
    assert_true(built);
    tern_distill_cache_free(kd);
}

static void test_cache_corrupt(void **state)
{
    (void)state;
    setup_teacher();
    const int V = tern_model_n_vocab(teacher);
    char path[700], bad[720];
    snprintf(path, sizeof path, "%s/c.kd", dir);
    struct tern_distill_cache_params p = cache_params(4, 1.0f, V);
    assert_tern_ok(tern_distill_cache_build(teacher, val_d, &p, path));
    size_t n;
    unsigned char *buf = (unsigned char *)test_read_file(path, &n);
    assert_non_null(buf);
    snprintf(bad, sizeof bad, "%s/bad.kd", dir);
    const size_t cuts[] = {0, 3, 100, KD_HEADER, KD_HEADER + 8, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *f = fopen(bad, "wb");
        fwrite(buf, 1, cuts[i], f);
        fclose(f);
        struct tern_distill_cache *c = NULL;
        assert_int_equal(tern_distill_cache_open(bad, &c), TERN_ERR_FORMAT);
        assert_non_null(strstr(tern_last_error(), bad));
        assert_non_null(strstr(tern_last_error(), "offset"));
        if (i == sizeof cuts / sizeof cuts[0] - 1) print_message("truncated: %s\n", tern_last_error());
    }
    /* one flipped byte anywhere: refused by a value check or by the checksum */
    const size_t flips[] = {5, 9, 13, 17, 21, 30, 45, 80, 110, KD_HEADER + 3, n - 3, n / 2, n / 3 + 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        buf[flips[i]] ^= 0x40;
        FILE *f = fopen(bad, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        buf[flips[i]] ^= 0x40;
        struct tern_distill_cache *c = NULL;
        const tern_status st = tern_distill_cache_open(bad, &c);
        assert_int_equal(st, TERN_ERR_FORMAT);
        assert_non_null(strstr(tern_last_error(), "offset"));
        print_message("byte %zu flipped: %s\n", flips[i], tern_last_error());
    }
    free(buf);
}

/* ------------------------------------------------------------------ distillation works */

static void eval(struct tern_trainer *t, const struct tern_distill_cache *vkd, struct tern_distill_eval *e)
{
    assert_tern_ok(tern_trainer_eval_distill(t, val_d, vkd, e));
}

static void test_student_moves_toward_teacher(void **state)
{
    (void)state;
    setup_teacher();
    const int V = tern_model_n_vocab(teacher);
    struct tern_distill_recipe r = tern_distill_recipe_default();
    r.top_k = 8, r.temperature = 2.0f, r.kd_weight = 1.0f, r.ce_weight = 0.2f;
    struct tern_distill_cache_params p = cache_params(r.top_k, r.temperature, V);
    char tp[700], vp[700];
    snprintf(tp, sizeof tp, "%s/s-train.kd", dir);
    snprintf(vp, sizeof vp, "%s/s-val.kd", dir);
    struct tern_distill_cache *kd, *vkd;
    assert_tern_ok(tern_distill_cache_ensure(teacher, train_d, &p, tp, false, &kd, NULL));
    assert_tern_ok(tern_distill_cache_ensure(teacher, val_d, &p, vp, false, &vkd, NULL));
    struct tern_train_config c = tiny_config(32, 1, 120, 7);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    assert_tern_ok(tern_trainer_set_distill(t, &r));
    struct tern_distill_eval e0, e1;
    eval(t, vkd, &e0);
    struct tern_train_step_info si;
    while (tern_trainer_step_index(t) < c.steps) {
        assert_tern_ok(tern_trainer_step_distill(t, train_d, kd, &si));
        assert_false(si.qat);
        assert_true(si.kl >= 0.0 && si.agree >= 0.0 && si.agree <= 1.0);
    }
    eval(t, vkd, &e1);
    print_message("student (n_embd 32, 1 layer) on held-out documents, %lld tokens: KL %.3f -> %.3f, "
                  "CE %.3f -> %.3f, top-1 agreement %.1f %% -> %.1f %% after %d steps\n", e1.tokens,
                  e0.kl, e1.kl, e0.ce, e1.ce, 100 * e0.agree, 100 * e1.agree, c.steps);
    assert_true(e1.kl < 0.5 * e0.kl);
    assert_true(e1.agree > e0.agree + 0.3);
    assert_true(e1.ce < e0.ce);
    tern_trainer_free(t);
    tern_distill_cache_free(kd);
    tern_distill_cache_free(vkd);
}

/* ------------------------------------------------------------------ QAT */

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return ab / sqrt(aa * bb);
}

static void qat_case(const char *type)
{
    setup_teacher();
    const int V = tern_model_n_vocab(teacher);
    struct tern_distill_recipe r = tern_distill_recipe_default();
    r.top_k = 8, r.temperature = 2.0f, r.qat_start = 0.5f, r.qat_lr_scale = 0.1f;
    snprintf(r.qat_type, sizeof r.qat_type, "%s", type);
    struct tern_distill_cache_params p = cache_params(r.top_k, r.temperature, V);
    char tp[700], out[700], qout[700];
    snprintf(tp, sizeof tp, "%s/s-train.kd", dir);
    struct tern_distill_cache *kd;
    assert_tern_ok(tern_distill_cache_ensure(teacher, train_d, &p, tp, false, &kd, NULL));
    struct tern_train_config c = tiny_config(64, 1, 40, 11);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    assert_tern_ok(tern_trainer_set_distill(t, &r));
    struct tern_train_step_info si;
    int n_qat = 0;
    double lr_plain = 0, lr_qat = 0;
    while (tern_trainer_step_index(t) < c.steps) {
        assert_tern_ok(tern_trainer_step_distill(t, train_d, kd, &si));
        n_qat += si.qat;
        assert_int_equal(si.qat, si.step > 20);
        if (si.step == 20) lr_plain = si.lr;
        if (si.step == 21) lr_qat = si.lr;
    }
    assert_int_equal(n_qat, 20);
    assert_true(lr_qat < 0.11 * lr_plain); /* scaled by qat_lr_scale */
    snprintf(out, sizeof out, "%s/qat-%s.gguf", dir, type);
    snprintf(qout, sizeof qout, "%s/qat-%s-q.gguf", dir, type);
    assert_tern_ok(tern_trainer_export(t, out));
    assert_tern_ok(tern_quantize_model(out, qout, type, NULL));
    struct tern_model *qm;
    assert_tern_ok(tern_model_load(qout, NULL, &qm));
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = T_CTX, cp.n_threads = 2, cp.no_warmup = true;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(qm, &cp, &ctx));
    /* held-out documents: the trainer's QAT forward and its F32 forward against the file */
    float *qat = malloc((size_t)T_CTX * V * 4), *f32 = malloc((size_t)T_CTX * V * 4);
    double worst_qat = 1.0, worst_f32 = 1.0;
    uint64_t n_docs = tern_train_data_n_docs(val_d);
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
    uint64_t nd, nt;
    train_data_view(val_d, &nd, &nt, &off, &tok, &mask);
    int docs = 0;
    for (uint64_t d = 0; d < n_docs && docs < 6; d++) {
        const int len = (int)(off[d + 1] - off[d]);
        if (len > T_CTX) continue;
        const int32_t *tk = tok + off[d];
        const uint8_t *mk = mask + off[d];
        train_batch_from_docs(&t->batch[0], T_CTX, &tk, &mk, &len, 1);
        train_qat_apply(t);
        t->wf = t->wq;
        train_forward_logits(t, &t->batch[0], qat, false);
        t->wf = t->w;
        train_forward_logits(t, &t->batch[0], f32, false);
        assert_tern_ok(tern_kv_truncate(ctx, 0));
        assert_tern_ok(tern_decode(ctx, tk, len, 0, TERN_LOGITS_ALL));
        for (int i = 0; i < len; i++) {
            const float *l = tern_context_logits(ctx, i);
            worst_qat = fmin(worst_qat, cosine(l, qat + (size_t)i * V, (size_t)V));
            worst_f32 = fmin(worst_f32, cosine(l, f32 + (size_t)i * V, (size_t)V));
        }
        docs++;
    }
    print_message("QAT %s: logits of the exported model quantized by tern quantize vs the trainer's, "
                  "worst over %d held-out documents: QAT forward cosine %.7f (1 - cos %.1e), F32 "
                  "forward %.7f (1 - cos %.1e)\n", type, docs, worst_qat, 1 - worst_qat, worst_f32,
                  1 - worst_f32);
    assert_true(docs >= 3);
    assert_true(worst_qat >= 0.999);
    assert_true(worst_qat >= worst_f32);
    free(qat);
    free(f32);
    tern_context_free(ctx);
    tern_model_free(qm);
    tern_trainer_free(t);
    tern_distill_cache_free(kd);
}

static void test_qat_q8_0(void **state)
{
    (void)state;
    qat_case("q8_0");
}

static void test_qat_q4_0(void **state)
{
    (void)state;
    qat_case("q4_0");
}

/* ------------------------------------------------------------------ recipe */

static void test_recipe(void **state)
{
    (void)state;
    struct tern_distill_recipe r;
    struct tern_train_config c = tern_train_config_default();
    const char *ok = "{\"top_k\": 16, \"temperature\": 2, \"qat_start\": 0.8, \"qat_type\": \"q4_0\","
                     " \"lr\": 0.0005, \"steps\": 77}";
    assert_tern_ok(tern_distill_recipe_parse(ok, strlen(ok), &r, &c));
    assert_int_equal(r.top_k, 16);
    assert_string_equal(r.qat_type, "q4_0");
    assert_int_equal(c.steps, 77);
    const char *p1 = "{\"early_tool_weight\": 0.5, \"early_tool_n\": 12, \"early_tool_warmup_epochs\": 2.5}";
    assert_tern_ok(tern_distill_recipe_parse(p1, strlen(p1), &r, &c));
    assert_true(r.early_tool_weight == 0.5f && r.early_tool_n == 12 && r.early_tool_warmup_epochs == 2.5f);
    const struct tern_distill_recipe def = tern_distill_recipe_default();
    assert_true(def.early_tool_weight == 0.0f && def.early_tool_n == 25 && def.early_tool_warmup_epochs == 1.0f);
    const char *p2 = "{\"length_kd_weight\": 0.05, \"length_kd_hinge\": 0.2, \"length_kd_slope\": 3,"
                     " \"length_kd_every\": 50, \"length_kd_docs\": 32, \"rail_ce_rise\": 0}";
    assert_tern_ok(tern_distill_recipe_parse(p2, strlen(p2), &r, &c));
    assert_true(r.length_kd_weight == 0.05f && r.length_kd_hinge == 0.2f && r.length_kd_slope == 3.0f &&
                r.length_kd_every == 50 && r.length_kd_docs == 32 && r.rail_ce_rise == 0.0f);
    const char *p3 = "{\"shape_buckets\": true}";
    assert_tern_ok(tern_distill_recipe_parse(p3, strlen(p3), &r, &c));
    assert_true(r.n_buckets == 4 && r.bucket_len[0] == 512 && r.bucket_len[3] == 4096 &&
                r.bucket_weight[0] == 0.4f && r.bucket_weight[3] == 0.05f && r.bucket_alpha == 100.0f);
    const char *p4 = "{\"shape_buckets\": [100, 300], \"bucket_weights\": [1, 3], \"bucket_alpha\": 0}";
    assert_tern_ok(tern_distill_recipe_parse(p4, strlen(p4), &r, &c));
    assert_true(r.n_buckets == 2 && r.bucket_len[1] == 300 && r.bucket_weight[0] == 0.25f &&
                r.bucket_weight[1] == 0.75f && r.bucket_alpha == 0.0f);
    const char *p5 = "{\"shape_buckets\": [100, 300, 900]}";
    assert_tern_ok(tern_distill_recipe_parse(p5, strlen(p5), &r, &c));
    assert_true(fabsf(r.bucket_weight[2] - 1.0f / 3) < 1e-7f);
    const char *bad[][2] = {{"{\"early_tool_n\": 0}", "'early_tool_n'"},
                            {"{\"shape_buckets\": [512, 256]}", "'shape_buckets': entry 1"},
                            {"{\"shape_buckets\": [1,2,3,4,5,6,7,8,9]}", "'shape_buckets'"},
                            {"{\"shape_buckets\": \"512\"}", "'shape_buckets'"},
                            {"{\"shape_buckets\": [512, 1024], \"bucket_weights\": [1]}", "'bucket_weights' has 1"},
                            {"{\"shape_buckets\": [512], \"bucket_weights\": [0]}", "all 0"},
                            {"{\"bucket_weights\": [-1]}", "'bucket_weights': entry 0"},
                            {"{\"bucket_alpha\": -1}", "'bucket_alpha'"},
                            {"{\"length_kd_every\": 0}", "'length_kd_every'"},
                            {"{\"length_kd_docs\": 1.5}", "'length_kd_docs'"},
                            {"{\"length_kd_docs\": -1}", "'length_kd_docs'"},
                            {"{\"length_kd_weight\": -0.1}", "'length_kd_weight'"},
                            {"{\"rail_ce_rise\": -1}", "'rail_ce_rise'"},
                            {"{\"early_tool_n\": 254}", "'early_tool_n'"},
                            {"{\"early_tool_weight\": -1}", "'early_tool_weight'"},
                            {"{\"early_tool_warmup_epochs\": \"x\"}", "'early_tool_warmup_epochs'"},
                            {"{\"early_tool_warmup\": 1}", "'early_tool_warmup'"},{"{\"top_k\": 8, \"kd_wieght\": 1}", "'kd_wieght'"},
                            {"{\"n_embd\": 64}", "'n_embd'"},
                            {"{\"temperature\": 0}", "'temperature'"},
                            {"{\"qat_type\": \"q9_9\"}", "'qat_type'"},
                            {"{\"top_k\": 2.5}", "'top_k'"},
                            {"[1]", "not a JSON object"},
                            {"{\"lr\": \"fast\"}", "'lr'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(tern_distill_recipe_parse(bad[i][0], strlen(bad[i][0]), &r, &c), TERN_ERR_FORMAT);
        assert_non_null(strstr(tern_last_error(), bad[i][1]));
    }
    print_message("recipe typo: %s\n", (tern_status_ignore(tern_distill_recipe_parse(bad[0][0], strlen(bad[0][0]), &r, &c)),
                                        tern_last_error()));
}

/* ------------------------------------------------------------------ latency-aware weights */

/* The latency-aware weights on the rows of training batches: a row whose target is token j of a
 * marked tool-call answer (mask byte 2 + j) weighs 1 + early_tool_weight x ramp when j <
 * early_tool_n, else 1; the ramp is the passes over the data so far / early_tool_warmup_epochs,
 * at most 1; document weights multiply; validation batches are unweighted. Checked on every row
 * of every batch against the mask bytes read back from the data file. */
static void test_latency_weights(void **state)
{
    (void)state;
    setup_teacher();
    /* 40 documents of 20 tokens: 4 prompt tokens, then an "answer" marked as a tool call
     * (bytes 2, 3, ...) in even documents and plainly (1) in odd ones */
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    for (int d = 0; d < 40; d++) {
        int32_t tok[20];
        uint8_t mask[20];
        for (int i = 0; i < 20; i++) {
            tok[i] = FIRST_TOK + (d + i) % N_SYM;
            mask[i] = i < 4 ? 0 : d % 2 ? 1 : (uint8_t)(2 + (i - 4));
        }
        assert_tern_ok(tern_train_data_add(w, tok, mask, 20));
    }
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_from_writer(w, &d));
    tern_train_data_writer_free(w);
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tk;
    const uint8_t *mk;
    train_data_view(d, &n_docs, &n_tok, &off, &tk, &mk);
    assert_int_equal(mk[off[2] + 4], 2); /* the writer keeps the bytes */
    assert_int_equal(mk[off[2] + 19], 17);

    struct tern_train_config c = tiny_config(32, 1, 10, 9);
    c.batch_tokens = T_CTX;
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    struct tern_distill_recipe r = tern_distill_recipe_default();
    r.early_tool_weight = 2.0f;
    r.early_tool_n = 5;
    r.early_tool_warmup_epochs = 2.0f;
    assert_tern_ok(tern_trainer_set_distill(t, &r));
    float dw[40];
    for (int i = 0; i < 40; i++) dw[i] = 1.0f + (float)(i % 3);
    assert_tern_ok(tern_trainer_set_doc_weights(t, dw, 40));
    int early_rows = 0;
    double last_ramp = -1;
    for (int b_i = 0; b_i < 120; b_i++) { /* 1 document per sequence (20 + 20 > 32): 3 epochs */
        const double epochs = (double)t->dpos.epoch + (double)t->dpos.cursor / 40.0;
        train_latency_weights(t, d);
        const double ramp = fmin(1.0, epochs / 2.0);
        assert_true(fabs(t->early_ramp - ramp) < 1e-12);
        assert_true(t->early_ramp >= last_ramp);
        last_ramp = t->early_ramp;
        struct train_batch *b = &t->batch[0];
        assert_tern_ok(train_batch_fill(t, d, b));
        const uint64_t used = (uint64_t)(b->tok[0] - FIRST_TOK); /* document d starts with token d */
        for (int row = 0; row < 19; row++) {
            const uint8_t m = mk[off[used] + row + 1];
            double want = m == 0 ? 0.0 : m >= 2 && m - 2 < 5 ? 1.0 + 2.0 * ramp : 1.0;
            want *= dw[used];
            assert_true(fabs(b->weight[row] - want) < 1e-5);
            early_rows += m >= 2 && m - 2 < 5;
        }
        for (int row = 19; row < T_CTX; row++) assert_true(b->weight[row] == 0.0f);
    }
    assert_true(last_ramp == 1.0);
    assert_int_equal(early_rows, 120 / 2 * 5);
    /* validation batches: unweighted */
    uint64_t vdoc = 0, piece = 0;
    assert_true(train_batch_fill_ordered(t, d, &t->batch[0], &vdoc, &piece));
    for (int row = 0; row < T_CTX; row++) assert_true(t->batch[0].weight[row] == 0.0f || t->batch[0].weight[row] == 1.0f);
    /* the safety rail: CE more than rail_ce_rise (0.05) above the best halves the weights'
     * excess over 1; back within, it doubles back up to full */
    const double ces[][2] = {{1.0, 1.0}, {1.04, 1.0}, {1.2, 0.5}, {1.3, 0.25}, {1.02, 0.5},
                             {0.9, 1.0}, {0.94, 1.0}, {NAN, 1.0}, {0.96, 0.5}};
    for (size_t i = 0; i < sizeof ces / sizeof ces[0]; i++) {
        bool moved = true;
        const double before = tern_trainer_latency_rail(t, NAN, NULL);
        assert_true(tern_trainer_latency_rail(t, ces[i][0], &moved) == ces[i][1]);
        assert_true(moved == (before != ces[i][1]));
    }
    /* at scale 0.5 every row's weight is 1 + half its excess, early and document weights alike */
    train_latency_weights(t, d);
    assert_tern_ok(train_batch_fill(t, d, &t->batch[0]));
    {
        const uint64_t used = (uint64_t)(t->batch[0].tok[0] - FIRST_TOK);
        for (int row = 0; row < 19; row++) {
            const uint8_t m = mk[off[used] + row + 1];
            const double want = m == 0 ? 0.0 : (m >= 2 && m - 2 < 5 ? 1.0 + 2.0 * 0.5 : 1.0) *
                                                   (1.0 + (dw[used] - 1.0) * 0.5);
            assert_true(fabs(t->batch[0].weight[row] - want) < 1e-5);
        }
    }
    /* bad document weights */
    dw[3] = 0.5f;
    assert_int_equal(tern_trainer_set_doc_weights(t, dw, 40), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "document 3"));
    dw[3] = NAN;
    assert_int_equal(tern_trainer_set_doc_weights(t, dw, 40), TERN_ERR_ARG);
    /* off: every trained row weighs 1 again */
    assert_tern_ok(tern_trainer_set_doc_weights(t, NULL, 0));
    r.early_tool_weight = 0.0f;
    assert_tern_ok(tern_trainer_set_distill(t, &r));
    train_latency_weights(t, d);
    assert_tern_ok(train_batch_fill(t, d, &t->batch[0]));
    for (int row = 0; row < T_CTX; row++) assert_true(t->batch[0].weight[row] == 0.0f || t->batch[0].weight[row] == 1.0f);
    tern_trainer_free(t);
    tern_train_data_free(d);
}

/* tern_trainer_upcoming_docs (length-aware KD mines the documents the next steps train on): the
 * documents it names are the ones the sampler then draws, batch by batch, across an epoch's end
 * into the next epoch's order. */
static void test_upcoming_docs(void **state)
{
    (void)state;
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    for (int d = 0; d < 40; d++) { /* document d starts with token FIRST_TOK + d */
        int32_t tok[20];
        for (int i = 0; i < 20; i++) tok[i] = FIRST_TOK + (d + i) % N_SYM;
        assert_tern_ok(tern_train_data_add(w, tok, NULL, 20));
    }
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_from_writer(w, &d));
    tern_train_data_writer_free(w);
    struct tern_train_config c = tiny_config(32, 1, 10, 9);
    c.batch_tokens = T_CTX; /* one 20-token document per batch */
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    uint64_t peek[64], n = 0;
    int epochs_crossed = 0;
    for (int round = 0; round < 5; round++) {
        assert_tern_ok(tern_trainer_upcoming_docs(t, d, 64, peek, &n));
        assert_int_equal(n, 40); /* at most the data's documents */
        const uint64_t epoch0 = t->dpos.epoch;
        for (int b = 0; b < 27; b++) { /* draw 27 of the 40 named */
            assert_tern_ok(train_batch_fill(t, d, &t->batch[0]));
            assert_int_equal((uint64_t)(t->batch[0].tok[0] - FIRST_TOK), peek[b]);
        }
        epochs_crossed += t->dpos.epoch != epoch0;
    }
    assert_true(epochs_crossed >= 2);
    tern_trainer_free(t);
    tern_train_data_free(d);
}

/* Length-aware KD's weight: 1 + weight x slope x (excess - hinge) only for an answer longer than
 * the teacher's by more than the hinge that leaves a required argument out. */
static void test_length_kd_weight(void **state)
{
    (void)state;
    struct tern_distill_recipe r = tern_distill_recipe_default();
    assert_true(tern_length_kd_weight(&r, 100, 10, false) == 1.0f); /* off by default */
    r.length_kd_weight = 0.5f;
    r.length_kd_slope = 2.0f;
    r.length_kd_hinge = 0.25f;
    assert_true(fabsf(tern_length_kd_weight(&r, 20, 10, false) - (1.0f + 0.5f * 2.0f * 0.75f)) < 1e-6f);
    assert_true(fabsf(tern_length_kd_weight(&r, 15, 10, false) - (1.0f + 0.5f * 2.0f * 0.25f)) < 1e-6f);
    assert_true(tern_length_kd_weight(&r, 20, 10, true) == 1.0f);    /* covered: exempt */
    assert_true(tern_length_kd_weight(&r, 12, 10, false) == 1.0f);   /* within the hinge */
    assert_true(tern_length_kd_weight(&r, 5, 10, false) == 1.0f);    /* shorter */
    assert_true(tern_length_kd_weight(&r, 20, 0, false) == 1.0f);    /* no teacher answer */
    struct tern_distill_recipe def = tern_distill_recipe_default();
    assert_true(def.length_kd_hinge == 0.15f && def.length_kd_slope == 1.0f &&
                def.length_kd_every == 100 && def.length_kd_docs == 0 && def.rail_ce_rise == 0.05f);
}

/* ------------------------------------------------------------------ length buckets */

/* Documents of lengths 6..120 whose first two tokens name them (index = (t0 - FIRST_TOK) +
 * N_SYM x (t1 - FIRST_TOK)); none of lengths 49..96 when hole is set, so bucket 2 is empty. */
static struct tern_train_data *named_docs(int n_docs, bool hole, int *len_of)
{
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    uint64_t s = 11;
    for (int d = 0; d < n_docs; d++) {
        int32_t tok[128];
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int len = 6 + (int)((s >> 33) % 115);
        if (hole && len > 48 && len <= 96) len -= 48;
        tok[0] = FIRST_TOK + d % N_SYM, tok[1] = FIRST_TOK + d / N_SYM;
        for (int i = 2; i < len; i++) tok[i] = FIRST_TOK + (d * 7 + i) % N_SYM;
        len_of[d] = len;
        assert_tern_ok(tern_train_data_add(w, tok, NULL, len));
    }
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_from_writer(w, &d));
    tern_train_data_writer_free(w);
    return d;
}

static int bucket_of_len(int len)
{
    return len <= 24 ? 0 : len <= 48 ? 1 : len <= 96 ? 2 : 3;
}

/* The bucket sampler checked from the batches it fills: every micro-batch holds documents of one
 * bucket only, laid whole (every piece equal to its document's tokens); bucket frequencies match
 * the weights (chi-square, p = 0.001), an empty bucket is never drawn; a micro-batch's number
 * alone decides it; the documents tern_trainer_upcoming_docs names are the ones drawn; the
 * Dirichlet weights have the mean and variance of Dirichlet(alpha x w). */
static void test_buckets(void **state)
{
    (void)state;
    setup_teacher(); /* the tokenizer */
    for (int hole = 0; hole < 2; hole++) {
        int len_of[400];
        struct tern_train_data *d = named_docs(400, hole, len_of);
        struct tern_train_config c = tiny_config(32, 1, 10, 5);
        c.n_ctx = 128, c.batch_tokens = 512; /* 4 sequences; no document is cut */
        struct tern_trainer *t;
        assert_tern_ok(tern_trainer_create(&c, &t));
        assert_tern_ok(tern_trainer_init(t));
        struct tern_distill_recipe r = tern_distill_recipe_default();
        r.top_k = 8, r.n_buckets = 4, r.bucket_alpha = 0.0f;
        const int lens[4] = {24, 48, 96, 128};
        const float wts[4] = {0.1f, 0.2f, 0.3f, 0.4f};
        memcpy(r.bucket_len, lens, sizeof lens);
        memcpy(r.bucket_weight, wts, sizeof wts);
        assert_tern_ok(tern_trainer_set_distill(t, &r));
        long long count[4] = {0};
        const int M = 3000;
        uint64_t up[64], n_up = 0, up_at = 0;
        for (int m = 0; m < M; m++) {
            if (m % 100 == 0) { /* what the next micro-batches will draw */
                t->micro = (uint64_t)m;
                assert_tern_ok(tern_trainer_upcoming_docs(t, d, 64, up, &n_up));
                assert_int_equal(n_up, 64);
                up_at = 0;
            }
            t->micro = (uint64_t)m;
            struct train_batch *b = &t->batch[0];
            assert_tern_ok(train_batch_fill(t, d, b));
            assert_int_equal(t->micro, (uint64_t)m + 1);
            int bucket = -1;
            for (int row = 0; row < t->N; row++) {
                if (b->pos[row] != 0 || b->tok[row] == 0) continue; /* not a document start, or padding */
                const int doc = (b->tok[row] - FIRST_TOK) + N_SYM * (b->tok[row + 1] - FIRST_TOK);
                assert_true(doc >= 0 && doc < 400);
                if (bucket < 0) bucket = bucket_of_len(len_of[doc]);
                assert_int_equal(bucket_of_len(len_of[doc]), bucket); /* one bucket per micro-batch */
                uint64_t n_docs, n_tok;
                const uint64_t *off;
                const int32_t *tk;
                const uint8_t *mk;
                train_data_view(d, &n_docs, &n_tok, &off, &tk, &mk);
                for (int i = 0; i < len_of[doc]; i++) assert_int_equal(b->tok[row + i], tk[off[doc] + i]);
                if (up_at < n_up) assert_int_equal((uint64_t)doc, up[up_at++]);
            }
            assert_true(bucket >= 0);
            count[bucket]++;
        }
        assert_tern_ok(tern_trainer_upcoming_docs(t, d, 0, up, &n_up)); /* nothing asked: none */
        assert_int_equal(n_up, 0);
        /* the same number, the same micro-batch */
        int32_t first[512];
        t->micro = 17;
        assert_tern_ok(train_batch_fill(t, d, &t->batch[0]));
        memcpy(first, t->batch[0].tok, sizeof first);
        t->micro = 17;
        assert_tern_ok(train_batch_fill(t, d, &t->batch[0]));
        assert_memory_equal(first, t->batch[0].tok, sizeof first);
        double chi = 0.0, total = 0.0;
        for (int i = 0; i < 4; i++) total += hole && i == 2 ? 0.0 : wts[i];
        for (int i = 0; i < 4; i++) {
            if (hole && i == 2) {
                assert_int_equal(count[i], 0);
                continue;
            }
            const double e = M * wts[i] / total;
            chi += (count[i] - e) * (count[i] - e) / e;
        }
        print_message("buckets%s: micro-batches per bucket %lld %lld %lld %lld, chi-square %.2f\n",
                      hole ? " (bucket 2 empty)" : "", count[0], count[1], count[2], count[3], chi);
        assert_true(chi < (hole ? 13.82 : 16.27)); /* p = 0.001 at 2 or 3 degrees of freedom */
        /* Dirichlet weights: mean w, variance w (1 - w) / (alpha + 1) */
        r.bucket_alpha = 50.0f;
        assert_tern_ok(tern_trainer_set_distill(t, &r));
        double mean[4] = {0}, sq[4] = {0};
        const int S = 4000;
        for (int step = 0; step < S; step++) {
            double w[8];
            train_bucket_weights(t, step, w);
            for (int i = 0; i < 4; i++) mean[i] += w[i] / S, sq[i] += w[i] * w[i] / S;
        }
        for (int i = 0; i < 4; i++) {
            const double var = sq[i] - mean[i] * mean[i], want = wts[i] * (1 - wts[i]) / 51.0;
            assert_true(fabs(mean[i] - wts[i]) < 0.01);
            assert_true(fabs(var / want - 1.0) < 0.15);
        }
        tern_trainer_free(t);
        tern_train_data_free(d);
    }
}

/* Validation per bucket adds up to the whole: tokens sum, and CE, KL and agreement are the
 * token-weighted means of the buckets'. */
static void test_bucket_validation(void **state)
{
    (void)state;
    setup_teacher();
    const int V = tern_model_n_vocab(teacher);
    struct tern_distill_recipe r = tern_distill_recipe_default();
    r.top_k = 8, r.temperature = 2.0f, r.n_buckets = 3;
    const int lens[3] = {24, 48, 80};
    memcpy(r.bucket_len, lens, sizeof lens);
    for (int i = 0; i < 3; i++) r.bucket_weight[i] = 1.0f / 3;
    struct tern_distill_cache_params p = cache_params(r.top_k, r.temperature, V);
    char vp[700];
    snprintf(vp, sizeof vp, "%s/b-val.kd", dir);
    struct tern_distill_cache *vkd;
    assert_tern_ok(tern_distill_cache_ensure(teacher, val_d, &p, vp, false, &vkd, NULL));
    struct tern_train_config c = tiny_config(32, 1, 10, 7);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&c, &t));
    assert_tern_ok(tern_trainer_init(t));
    assert_tern_ok(tern_trainer_set_distill(t, &r));
    struct tern_distill_eval all, e;
    assert_tern_ok(tern_trainer_eval_distill(t, val_d, vkd, &all));
    double tok = 0, ce = 0, kl = 0, ag = 0;
    for (int b = 0; b < 3; b++) {
        assert_tern_ok(tern_trainer_eval_distill_bucket(t, val_d, vkd, b, &e));
        assert_true(e.tokens > 0);
        tok += e.tokens, ce += e.ce * e.tokens, kl += e.kl * e.tokens, ag += e.agree * e.tokens;
    }
    assert_true(tok == all.tokens);
    assert_true(fabs(ce / tok - all.ce) < 1e-9 * fabs(all.ce) + 1e-12);
    assert_true(fabs(kl / tok - all.kl) < 1e-9 * fabs(all.kl) + 1e-12);
    assert_true(fabs(ag / tok - all.agree) < 1e-9);
    assert_int_equal(tern_trainer_eval_distill_bucket(t, val_d, vkd, 3, &e), TERN_ERR_ARG);
    tern_trainer_free(t);
    tern_distill_cache_free(vkd);
}

static int teardown(void **state)
{
    (void)state;
    tern_model_free(teacher);
    tern_train_data_free(train_d);
    tern_train_data_free(val_d);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recipe),
        cmocka_unit_test(test_latency_weights),
        cmocka_unit_test(test_length_kd_weight),
        cmocka_unit_test(test_upcoming_docs),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_bucket_validation),
        cmocka_unit_test(test_cache_matches_inference),
        cmocka_unit_test(test_cache_mismatch),
        cmocka_unit_test(test_cache_corrupt),
        cmocka_unit_test(test_student_moves_toward_teacher),
        cmocka_unit_test(test_qat_q8_0),
        cmocka_unit_test(test_qat_q4_0),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, teardown));
}
