/* test_mtp.c — qwen35's multi-token-prediction layer and the "mtp" draft source against
 * ik_llama.cpp.
 *
 * The references (tests/data/arch/mtp-qwen35-tiny-*.jsonl, README.md there says how they were
 * made) come from ik_llama.cpp running the MTP layer of tern synth's qwen35-tiny (seed 7, the
 * same files test_arch_parity checks by SHA-256) through its own speculative-decoding calls:
 * the target decodes a prompt keeping every row's hidden state; the MTP context decodes the
 * prompt's tokens with those states shifted by one (zeros at position 0), every logit kept;
 * then 8 draft steps, the first from the target's next token and last state, each next one
 * from the previous draft and the MTP's own output state. Checked here:
 *   - tern_decode_mtp's logits at every prompt position and draft step (top-20 and the full
 *     vectors) within the fixture tolerances, and the greedy draft tokens where decisive;
 *   - the "mtp" source's proposal after the prompt is that same draft chain;
 *   - the source stays in step with a history that grows, is rolled back and has pending
 *     tokens the target has not seen; generation with it is the plain greedy output;
 *   - refusals name what is missing. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/spec.h"
#include "util/fp16.h"

enum { N_DRAFT = 8 };

struct mtp_ref_seq {
    int n, first;
    int32_t tok[200];
    float top_id[200][20], top_v[200][20]; /* MTP logits at each prompt position (top-20) */
    int32_t draft[N_DRAFT];
    float dtop_id[N_DRAFT][20], dtop_v[N_DRAFT][20];
};

static void read_top(const cJSON *arr, float *id, float *v)
{
    assert_true(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 20);
    for (int i = 0; i < 20; i++) {
        const cJSON *e = cJSON_GetArrayItem(arr, i);
        id[i] = (float)cJSON_GetArrayItem(e, 0)->valuedouble;
        v[i] = (float)cJSON_GetArrayItem(e, 1)->valuedouble;
    }
}

/* The three sequences of a reference file. */
static void load_ref(const char *name, struct mtp_ref_seq *seqs)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/arch/%s.jsonl", test_source_dir(), name);
    size_t len;
    char *text = test_read_file(path, &len);
    assert_non_null(text);
    int n_mtp = 0, n_draft = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const char *type = cJSON_GetObjectItem(j, "type")->valuestring;
        const cJSON *sj = cJSON_GetObjectItem(j, "seq");
        struct mtp_ref_seq *s = sj ? &seqs[sj->valueint] : NULL;
        if (!strcmp(type, "seq")) {
            s->n = cJSON_GetObjectItem(j, "n")->valueint;
            const cJSON *t = cJSON_GetObjectItem(j, "tokens");
            for (int i = 0; i < s->n; i++) s->tok[i] = cJSON_GetArrayItem(t, i)->valueint;
        } else if (!strcmp(type, "mtp")) {
            const int p = cJSON_GetObjectItem(j, "pos")->valueint;
            read_top(cJSON_GetObjectItem(j, "top"), s->top_id[p], s->top_v[p]);
            n_mtp++;
        } else if (!strcmp(type, "draft")) {
            s->first = cJSON_GetObjectItem(j, "first")->valueint;
            const cJSON *t = cJSON_GetObjectItem(j, "tokens"), *tops = cJSON_GetObjectItem(j, "tops");
            for (int k = 0; k < N_DRAFT; k++) {
                s->draft[k] = cJSON_GetArrayItem(t, k)->valueint;
                read_top(cJSON_GetArrayItem(tops, k), s->dtop_id[k], s->dtop_v[k]);
            }
            n_draft++;
        }
        cJSON_Delete(j);
    }
    free(text);
    assert_int_equal(n_mtp, 8 + 64 + 200);
    assert_int_equal(n_draft, 3);
}

/* The full vectors (.logits.bin, "TRNL" v1): (seq, pos) records; pos n is draft step 0. */
static float *load_full(const char *name, int nv, int *n_rec)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/arch/%s.logits.bin", test_source_dir(), name);
    size_t len;
    char *b = test_read_file(path, &len);
    assert_non_null(b);
    uint32_t hdr[3];
    assert_true(len >= 16 && !memcmp(b, "TRNL", 4));
    memcpy(hdr, b + 4, sizeof hdr);
    assert_int_equal(hdr[0], 1);
    assert_int_equal(hdr[1], (uint32_t)nv);
    *n_rec = (int)hdr[2];
    assert_int_equal(len, 16 + (size_t)*n_rec * (8 + (size_t)nv * 4));
    float *out = malloc((size_t)*n_rec * (2 + (size_t)nv) * sizeof *out);
    assert_non_null(out);
    for (int r = 0; r < *n_rec; r++) {
        const char *rec = b + 16 + (size_t)r * (8 + (size_t)nv * 4);
        uint32_t sp[2];
        memcpy(sp, rec, 8);
        out[(size_t)r * (2 + nv)] = (float)sp[0];
        out[(size_t)r * (2 + nv) + 1] = (float)sp[1];
        memcpy(out + (size_t)r * (2 + nv) + 2, rec + 8, (size_t)nv * 4);
    }
    free(b);
    return out;
}

struct cmp {
    double max_top, sum_top;
    long n_top;
    int greedy_ok, greedy_checked;
};

/* tern's logits against a reference top-20; its greedy choice against the reference's where
 * the reference's margin exceeds 2 tol. */
static void compare_top(struct cmp *c, const float *l, const float *id, const float *v, double tol)
{
    for (int i = 0; i < 20; i++) {
        const double d = fabs((double)l[(int)id[i]] - v[i]);
        if (d > c->max_top) c->max_top = d;
        c->sum_top += d;
        c->n_top++;
    }
    if (v[0] - v[1] > 2 * tol) {
        int best = 0;
        for (int i = 1; i < 512; i++)
            if (l[i] > l[best]) best = i;
        c->greedy_checked++;
        c->greedy_ok += best == (int)id[0];
    }
}

static void make_model(const char *type, char *path, size_t cap, struct tern_model **m)
{
    snprintf(path, cap, "%s/mtp-qwen35-tiny-%s.gguf", test_tmpdir(), type);
    assert_tern_ok(tern_synth_model_write("qwen35-tiny", type, 7, path, NULL));
    assert_tern_ok(tern_model_load(path, NULL, m));
    const char *why = NULL;
    assert_true(tern_model_has_mtp(*m, &why));
    assert_true(test_hparam(*m, "mtp_bytes") > 0);
}

static void check_parity(const char *type, double tol, double mean_tol, int min_greedy, int threads)
{
    char name[64], path[4096];
    snprintf(name, sizeof name, "mtp-qwen35-tiny-%s", type);
    static struct mtp_ref_seq seqs[3];
    load_ref(name, seqs);
    struct tern_model *m;
    make_model(type, path, sizeof path, &m);
    const int nv = tern_model_n_vocab(m), d = tern_model_get_info(m)->n_embd;
    int n_full;
    float *full = load_full(name, nv, &n_full);
    assert_int_equal(n_full, 9);
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = threads;
    struct tern_context *tgt, *mtp;
    assert_tern_ok(tern_context_create(m, &cp, &tgt));
    assert_tern_ok(tern_context_keep_hidden(tgt, true));
    cp.mtp = true;
    assert_tern_ok(tern_context_create(m, &cp, &mtp));
    float *rows = malloc((size_t)200 * d * sizeof *rows);
    assert_non_null(rows);
    struct cmp c = {0};
    double max_full = 0, sum_full = 0;
    long n_fullv = 0;
    for (int s = 0; s < 3; s++) {
        const struct mtp_ref_seq *r = &seqs[s];
        const int n = r->n;
        assert_tern_ok(tern_kv_truncate(tgt, 0));
        assert_tern_ok(tern_kv_truncate(mtp, 0));
        assert_tern_ok(tern_decode(tgt, r->tok, n, 0, TERN_LOGITS_LAST));
        /* token i with the target's state at i - 1 (zeros at 0) */
        memset(rows, 0, sizeof(float) * (size_t)d);
        for (int i = 1; i < n; i++) {
            const float *h = tern_context_hidden(tgt, i - 1);
            assert_non_null(h);
            memcpy(rows + (size_t)i * d, h, sizeof(float) * (size_t)d);
        }
        assert_null(tern_context_hidden(tgt, n)); /* past what the target holds */
        assert_tern_ok(tern_decode_mtp(mtp, r->tok, rows, n, 0, TERN_LOGITS_ALL));
        for (int i = 0; i < n; i++) compare_top(&c, tern_context_logits(mtp, i), r->top_id[i], r->top_v[i], tol);
        for (int k = 0; k < n_full; k++) {
            const float *rec = full + (size_t)k * (2 + nv);
            if ((int)rec[0] != s || (int)rec[1] >= n) continue;
            const float *l = tern_context_logits(mtp, (int)rec[1]);
            for (int v = 0; v < nv; v++) {
                const double dd = fabs((double)l[v] - rec[2 + v]);
                if (dd > max_full) max_full = dd;
                sum_full += dd;
                n_fullv++;
            }
        }
        /* the draft chain, teacher-forced with the reference's tokens */
        int32_t tok = r->first;
        for (int k = 0; k < N_DRAFT; k++) {
            const float *h = tern_context_hidden(k == 0 ? tgt : mtp, n - 1 + k);
            assert_non_null(h);
            assert_tern_ok(tern_decode_mtp(mtp, &tok, h, 1, n + k, TERN_LOGITS_LAST));
            const float *l = tern_context_logits(mtp, 0);
            compare_top(&c, l, r->dtop_id[k], r->dtop_v[k], tol);
            if (k == 0)
                for (int j = 0; j < n_full; j++) {
                    const float *rec = full + (size_t)j * (2 + nv);
                    if ((int)rec[0] != s || (int)rec[1] != n) continue;
                    for (int v = 0; v < nv; v++) {
                        const double dd = fabs((double)l[v] - rec[2 + v]);
                        if (dd > max_full) max_full = dd;
                        sum_full += dd;
                        n_fullv++;
                    }
                }
            tok = r->draft[k];
        }
    }
    print_message("%s t=%d: MTP top-20 max |d| %.3g mean %.3g (%ld values); full vectors max %.3g "
                  "mean %.3g; greedy %d/%d decisive\n", name, threads, c.max_top, c.sum_top / c.n_top,
                  c.n_top, max_full, sum_full / n_fullv, c.greedy_ok, c.greedy_checked);
    assert_int_equal(n_fullv, 9L * nv);
    assert_true(c.max_top <= tol);
    assert_true(max_full <= tol);
    assert_true(sum_full / n_fullv <= mean_tol);
    assert_true(c.greedy_checked >= min_greedy);
    assert_int_equal(c.greedy_ok, c.greedy_checked);
    free(rows);
    free(full);
    tern_context_free(mtp);
    tern_context_free(tgt);
    tern_model_free(m);
    remove(path);
}

/* Bounds as test_arch_parity's for qwen35-tiny (tests/data/arch/README.md). */
static void test_parity_f16(void **state)
{
    (void)state;
    check_parity("f16", 5e-3, 5e-4, 200, 1);
    check_parity("f16", 5e-3, 5e-4, 200, 2);
}

static void test_parity_q8_0(void **state)
{
    (void)state;
    /* Q8_0 activations: differences of a few 1e-2 leave few steps decisive at 2 x 0.1 */
    check_parity("q8_0", 0.1, 1.2e-2, 5, 1);
    check_parity("q8_0", 0.1, 1.2e-2, 5, 2);
}

/* A generator-less round of the source: the target holds hist[0..n_t), hist[n_t..n) pend. */
static void propose(struct spec_source *src, const int32_t *hist, int n, int k, int32_t *out, int *got)
{
    int cls;
    assert_tern_ok(src->ops->propose(src, hist, n, k, 1 << 20, out, got, &cls));
}

/* A target context of n_ctx positions (2 threads) and a greedy "mtp" source attached to it. */
static struct tern_context *target_ctx(struct tern_model *m, int n_ctx)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    return ctx;
}

static struct spec_source *greedy_source(struct tern_model *m, struct tern_context *tgt, int n_max)
{
    struct spec_source *src;
    assert_tern_ok(spec_mtp_create(m, 2, n_max, &src));
    assert_tern_ok(src->ops->attach(src, tgt));
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0.0f;
    assert_tern_ok(src->ops->begin(src, &sp));
    return src;
}

/* The source's first proposal after a prompt is ik_llama.cpp's draft chain: the MTP caught up
 * over the prompt and the pending token from the target's states, then chained its own. */
static void test_source_drafts_reference_chain(void **state)
{
    (void)state;
    static struct mtp_ref_seq seqs[3];
    load_ref("mtp-qwen35-tiny-f16", seqs);
    char path[4096];
    struct tern_model *m;
    make_model("f16", path, sizeof path, &m);
    struct tern_context *tgt = target_ctx(m, 512);
    struct spec_source *src = greedy_source(m, tgt, N_DRAFT);
    assert_string_equal(src->ops->kind, "mtp");
    int32_t hist[256], prev[256], out[N_DRAFT];
    int matched = 0, checked = 0, n_prev = 0;
    for (int s = 0; s < 3; s++) {
        const struct mtp_ref_seq *r = &seqs[s];
        assert_tern_ok(tern_kv_truncate(tgt, 0));
        assert_tern_ok(tern_decode(tgt, r->tok, r->n, 0, TERN_LOGITS_LAST));
        memcpy(hist, r->tok, sizeof(int32_t) * (size_t)r->n);
        hist[r->n] = r->first;
        /* positions the last sequence shares from its start stay (each starts with BOS) */
        int common = 0;
        while (common < n_prev && common < r->n + 1 && prev[common] == hist[common]) common++;
        assert_int_equal(src->ops->lag(src, hist, r->n + 1), r->n + 1 - common);
        int got = 0;
        propose(src, hist, r->n + 1, N_DRAFT, out, &got);
        assert_int_equal(got, N_DRAFT);
        assert_int_equal(src->n_sync, r->n + 1 - common);
        memcpy(prev, hist, sizeof(int32_t) * (size_t)(r->n + 1));
        n_prev = r->n + 1;
        /* decisive steps, up to the first one that is not (the chain follows tern's own) */
        for (int k = 0; k < N_DRAFT; k++) {
            if (!(r->dtop_v[k][0] - r->dtop_v[k][1] > 1e-2)) break;
            checked++;
            matched += out[k] == r->draft[k];
            if (out[k] != r->draft[k]) break;
        }
    }
    print_message("mtp source: %d/%d decisive draft tokens as ik_llama.cpp's chain\n", matched, checked);
    assert_true(checked >= 6);
    assert_int_equal(matched, checked);
    src->ops->free(src);
    tern_context_free(tgt);
    tern_model_free(m);
    remove(path);
}

/* The source keeps its firm positions while the history only grows, drops what a rollback
 * removed, and drafts after pending tokens the target has not seen (forced grammar tokens):
 * each proposal equals a fresh source's on the same history. */
static void test_source_stays_in_step(void **state)
{
    (void)state;
    char path[4096];
    struct tern_model *m;
    make_model("q8_0", path, sizeof path, &m);
    struct tern_context *tgt = target_ctx(m, 256), *tgt2 = target_ctx(m, 256);
    tern_context_set_exact_batches(tgt, true); /* states of the same tokens in any batch: the same bits */
    tern_context_set_exact_batches(tgt2, true);
    struct spec_source *src = greedy_source(m, tgt, 6), *fresh = greedy_source(m, tgt2, 6);
    int32_t hist[200], pass[64], a[6], b[6];
    for (int i = 0; i < 200; i++) hist[i] = (int32_t)((i * 37 + 11) % 500);
    int n_t = 0, ga, gb;
    /* rounds, as a verify pass makes them: the target decodes `take` tokens of the history and
     * `rejected` others after them in one pass, is rolled back to the history, and `pending`
     * tokens follow (more than one: forced grammar tokens) */
    static const int rounds[][3] = {{40, 1, 0}, {3, 1, 2}, {1, 2, 0}, {5, 1, 4}, {2, 1, 6}, {4, 3, 0}, {1, 1, 3}};
    for (size_t r = 0; r < sizeof rounds / sizeof rounds[0]; r++) {
        const int take = rounds[r][0], rej = rounds[r][2];
        memcpy(pass, hist + n_t, sizeof(int32_t) * (size_t)take);
        for (int i = 0; i < rej; i++) pass[take + i] = (int32_t)((hist[n_t + take + i] + 100) % 500);
        assert_tern_ok(tern_decode(tgt, pass, take + rej, n_t, TERN_LOGITS_LAST));
        n_t += take;
        assert_tern_ok(tern_kv_truncate(tgt, n_t));
        const int n = n_t + rounds[r][1];
        const int lag = src->ops->lag(src, hist, n);
        propose(src, hist, n, 6, a, &ga);
        /* a fresh source on a fresh target holding the same history */
        assert_tern_ok(tern_kv_truncate(tgt2, 0));
        assert_tern_ok(tern_decode(tgt2, hist, n_t, 0, TERN_LOGITS_LAST));
        assert_tern_ok(fresh->ops->attach(fresh, tgt2));
        propose(fresh, hist, n, 6, b, &gb);
        print_message("round %zu: target %d, pending %d: lag %d, caught up %d, drafts %d %d %d ...\n",
                      r, n_t, rounds[r][1], lag, src->n_sync, a[0], a[1], a[2]);
        assert_int_equal(lag, src->n_sync);
        if (r > 0) assert_true(src->n_sync <= take + rounds[r][1] + 1);
        assert_int_equal(ga, 6);
        assert_int_equal(gb, 6);
        assert_memory_equal(a, b, sizeof a);
    }
    src->ops->free(src);
    fresh->ops->free(fresh);
    tern_context_free(tgt);
    tern_context_free(tgt2);
    tern_model_free(m);
    remove(path);
}

/* The target keeps the states of its last 4096 positions (a ring): a source catching up on a
 * longer history starts where they begin, and catches up across the ring's wrap. */
static void test_source_past_kept_states(void **state)
{
    (void)state;
    char path[4096];
    struct tern_model *m;
    make_model("q8_0", path, sizeof path, &m);
    struct tern_context *tgt = target_ctx(m, 10000);
    struct spec_source *src = greedy_source(m, tgt, 4);
    enum { N = 5000 };
    int32_t *hist = malloc(sizeof(int32_t) * (N + 8));
    assert_non_null(hist);
    for (int i = 0; i < N + 8; i++) hist[i] = (int32_t)((i * 131 + 7) % 500);
    assert_tern_ok(tern_decode(tgt, hist, N, 0, TERN_LOGITS_LAST));
    assert_null(tern_context_hidden(tgt, N - 4097));
    assert_non_null(tern_context_hidden(tgt, N - 4096));
    assert_non_null(tern_context_hidden(tgt, N - 1));
    int32_t out[4];
    int got = 0, cls;
    assert_tern_ok(src->ops->propose(src, hist, N + 1, 4, 1 << 20, out, &got, &cls));
    /* a fresh start at N - 4095, whose state (N - 4096) the target still has, and a catch-up
     * over the ring's wrap (position 4096 is row 0) */
    print_message("past the kept states: caught up %d of %d, %d drafts\n", src->n_sync, N + 1, got);
    assert_int_equal(src->n_sync, N + 1 - (N - 4095));
    assert_int_equal(got, 4);
    /* the next round continues from there */
    assert_tern_ok(tern_decode(tgt, hist + N, 2, N, TERN_LOGITS_LAST));
    assert_tern_ok(src->ops->propose(src, hist, N + 3, 4, 1 << 20, out, &got, &cls));
    assert_int_equal(src->n_sync, 2);
    assert_int_equal(got, 4);
    free(hist);
    src->ops->free(src);
    tern_context_free(tgt);
    tern_model_free(m);
    remove(path);
}

/* The ring of kept states after a truncation: positions whose rows the truncated ones wrote
 * over are gone, the others and the new ones are the states a fresh context computes. */
static void test_kept_states_after_truncation(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/mtp-ring.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("qwen3-tiny", "f16", 7, path, NULL));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    enum { N = 6000, T = 5000, M = 10 };
    int32_t *tok = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 131 + 7) % 500);
    struct tern_context *a = target_ctx(m, 8192), *b = target_ctx(m, 8192);
    tern_context_set_exact_batches(a, true);
    tern_context_set_exact_batches(b, true);
    assert_tern_ok(tern_context_keep_hidden(a, true));
    assert_tern_ok(tern_context_keep_hidden(b, true));
    assert_tern_ok(tern_decode(a, tok, N, 0, TERN_LOGITS_LAST));
    assert_tern_ok(tern_kv_truncate(a, T));
    for (int i = 0; i < M; i++) tok[T + i] = (int32_t)((tok[T + i] + 50) % 500); /* another continuation */
    assert_tern_ok(tern_decode(a, tok + T, M, T, TERN_LOGITS_LAST));
    assert_tern_ok(tern_decode(b, tok, T + M, 0, TERN_LOGITS_LAST));
    const int d = tern_model_get_info(m)->n_embd;
    /* rows of positions below N - 4096 were written over by positions up to N - 1 */
    int valid = 0;
    for (int p = 0; p < T + M; p++) {
        const float *ha = tern_context_hidden(a, p), *hb = tern_context_hidden(b, p);
        if (p < N - 4096) assert_null(ha);
        else if (p >= T + M - 4096) {
            assert_non_null(ha);
            assert_non_null(hb);
            assert_memory_equal(ha, hb, sizeof(float) * (size_t)d);
            valid++;
        }
    }
    assert_int_equal(valid, T + M - (N - 4096));
    assert_null(tern_context_hidden(a, T + M));
    free(tok);
    tern_context_free(a);
    tern_context_free(b);
    tern_model_free(m);
    remove(path);
}

/* Greedy generation with the "mtp" draft is the plain greedy output, token for token; a sampled
 * one runs its draws through the MTP's distributions. */
static void generate(struct tern_generator *g, struct tern_sampler *s, const int32_t *prompt, int n,
                     int32_t *out, int *n_out, struct tern_gen_stats *st)
{
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 48;
    gp.ignore_eog = true;
    assert_tern_ok(tern_generate(g, s, prompt, n, &gp, NULL, NULL, st));
    int nh;
    const int32_t *h = tern_generator_tokens(g, &nh);
    *n_out = nh - n;
    memcpy(out, h + n, sizeof(int32_t) * (size_t)*n_out);
}

static void test_generation_exact(void **state)
{
    (void)state;
    char path[4096];
    struct tern_model *m;
    make_model("q8_0", path, sizeof path, &m);
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tk));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tk, &g));
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0.0f;
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    int32_t prompt[30];
    for (int i = 0; i < 30; i++) prompt[i] = (int32_t)((i * 53 + 5) % 256);
    struct tern_gen_stats plain, spec;
    int32_t out1[256], out2[256];
    int n1 = 0, n2 = 0;
    generate(g, s, prompt, 30, out1, &n1, &plain);
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = "mtp";
    dp.n_max = dp.n_min = 3;
    struct tern_draft *d;
    assert_tern_ok(tern_draft_create(m, &dp, &d));
    assert_string_equal(tern_draft_kind(d), "mtp");
    assert_null(tern_draft_model(d));
    assert_tern_ok(tern_generator_set_draft(g, d));
    generate(g, s, prompt, 30, out2, &n2, &spec);
    print_message("mtp draft, greedy: %d tokens, %d rounds, %d drafted, %d accepted\n", n2,
                  spec.spec_rounds, spec.spec_drafted, spec.spec_accepted);
    assert_true(n1 >= 47); /* the token that stops generation is not recorded */
    assert_int_equal(n1, n2);
    assert_memory_equal(out1, out2, sizeof(int32_t) * (size_t)n1);
    assert_true(spec.spec_drafted > 0);
    /* sampled: the drafts' distributions go to the verifier */
    tern_sampler_free(s);
    sp.temperature = 0.9f;
    sp.seed = 3;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    generate(g, s, prompt, 30, out2, &n2, &spec);
    assert_true(n2 >= 47);
    assert_true(spec.spec_drafted > 0);
    assert_tern_ok(tern_generator_set_draft(g, NULL));
    tern_draft_free(d);
    tern_sampler_free(s);
    tern_generator_free(g);
    tern_tokenizer_free(tk);
    tern_context_free(ctx);
    tern_model_free(m);
    remove(path);
}

/* ---------------------------------------------------------------- the layer's variants */

/* A copy of src with tensor `name` changed: kind 'd' dropped, 'z' zeroed, '2' doubled (F16),
 * 's' given the wrong shape (its first dimension halved), 'c' replaced by tensor `from`'s data,
 * 'I' replaced by an F32 [I | I] (a (2d -> d) matrix adding the two halves of its input);
 * 'a' adds tensor `name` as tensor `from`'s data doubled (F16). */
static void rewrite(const char *src, const char *dst, const char *name, char kind, const char *from)
{
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(src, &g));
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    const struct tern_gguf_tensor *fr = from ? tern_gguf_find_tensor(g, from) : NULL;
    for (int64_t i = 0; i <= tern_gguf_n_tensors(g); i++) {
        const bool extra = i == tern_gguf_n_tensors(g);
        if (extra && kind != 'a') break;
        const struct tern_gguf_tensor *t = extra ? fr : tern_gguf_tensor(g, i);
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        const bool hit = extra || !strcmp(tn, name);
        if (hit && kind == 'd') continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (hit && kind == 'I') {
            const int64_t d = t->ne[1];
            assert_int_equal(t->ne[0], 2 * d);
            float *id = calloc((size_t)(2 * d * d), sizeof *id);
            for (int64_t j = 0; j < d; j++) id[j * 2 * d + j] = id[j * 2 * d + d + j] = 1.0f;
            assert_tern_ok(tern_gguf_writer_add_tensor(w, tn, TERN_TYPE_F32, 2, ne, id));
            free(id);
            continue;
        }
        unsigned char *data = malloc(t->nbytes);
        assert_non_null(data);
        memcpy(data, hit && kind == 'c' ? fr->data : t->data, t->nbytes);
        if (hit && kind == 'z') memset(data, 0, t->nbytes);
        if (hit && (kind == '2' || kind == 'a')) {
            assert_int_equal(t->type, TERN_TYPE_F16);
            uint16_t *h = (uint16_t *)data;
            for (uint64_t k = 0; k < t->nbytes / 2; k++) h[k] = fp16_from_f32(2.0f * fp16_to_f32(h[k]));
        }
        if (hit && kind == 's') ne[0] /= 2;
        assert_tern_ok(tern_gguf_writer_add_tensor(w, extra ? name : tn, t->type, t->n_dims, ne, data));
        free(data);
    }
    assert_tern_ok(tern_gguf_writer_write(w, dst));
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
}

/* The MTP logits (all rows) of a fixed 40-token prompt, with the target's states. */
static float *mtp_logits(const char *path, int *nv_out)
{
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    const char *why = NULL;
    if (!tern_model_has_mtp(m, &why)) fail_msg("%s: no MTP layer: %s", path, why);
    enum { N = 40 };
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 71 + 3) % 500);
    struct tern_context *tgt = target_ctx(m, 64), *mtp;
    assert_tern_ok(tern_context_keep_hidden(tgt, true));
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.mtp = true;
    assert_tern_ok(tern_context_create(m, &cp, &mtp));
    const int d = tern_model_get_info(m)->n_embd, nv = tern_model_n_vocab(m);
    assert_tern_ok(tern_decode(tgt, tok, N, 0, TERN_LOGITS_LAST));
    float *rows = calloc((size_t)N * d, sizeof *rows);
    for (int i = 1; i < N; i++) memcpy(rows + (size_t)i * d, tern_context_hidden(tgt, i - 1), sizeof(float) * d);
    assert_tern_ok(tern_decode_mtp(mtp, tok, rows, N, 0, TERN_LOGITS_ALL));
    float *out = malloc(sizeof(float) * (size_t)N * nv);
    for (int i = 0; i < N; i++) memcpy(out + (size_t)i * nv, tern_context_logits(mtp, i), sizeof(float) * nv);
    free(rows);
    tern_context_free(mtp);
    tern_context_free(tgt);
    tern_model_free(m);
    *nv_out = nv * N;
    return out;
}

/* The variants ik_llama.cpp accepts, each against a file that spells the same computation out:
 * no attn_q = the last main attention layer's; no FFN = an FFN whose ffn_down is zero; no
 * eh_proj = an F32 eh_proj of [I | I]; output_extra = a second head (doubled: doubled logits).
 * Malformed MTP tensors leave the model loadable and say why the layer is not. */
static void test_variants(void **state)
{
    (void)state;
    char base[4096], a[4200], b[4200];
    struct tern_model *m;
    make_model("f16", base, sizeof base, &m);
    tern_model_free(m);
    snprintf(a, sizeof a, "%s.a.gguf", base);
    snprintf(b, sizeof b, "%s.b.gguf", base);
    int n1, n2;
    float *x, *y;

    rewrite(base, a, "blk.4.attn_q.weight", 'd', NULL);
    rewrite(base, b, "blk.4.attn_q.weight", 'c', "blk.3.attn_q.weight");
    x = mtp_logits(a, &n1);
    y = mtp_logits(b, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(x, y, sizeof(float) * (size_t)n1);
    free(x);
    free(y);

    /* no FFN: drop all three (one alone is malformed) */
    rewrite(base, a, "blk.4.ffn_gate.weight", 'd', NULL);
    rewrite(a, b, "blk.4.ffn_up.weight", 'd', NULL);
    rewrite(b, a, "blk.4.ffn_down.weight", 'd', NULL);
    rewrite(base, b, "blk.4.ffn_down.weight", 'z', NULL);
    x = mtp_logits(a, &n1);
    y = mtp_logits(b, &n2);
    assert_memory_equal(x, y, sizeof(float) * (size_t)n1);
    free(x);
    free(y);

    /* no eh_proj: the normalized halves added, as [I | I] computes them in F32 */
    rewrite(base, a, "blk.4.nextn.eh_proj.weight", 'd', NULL);
    rewrite(base, b, "blk.4.nextn.eh_proj.weight", 'I', NULL);
    x = mtp_logits(a, &n1);
    y = mtp_logits(b, &n2);
    assert_memory_equal(x, y, sizeof(float) * (size_t)n1);
    free(x);
    free(y);

    /* output_extra: a doubled head gives doubled logits (F16 doubling is exact) */
    x = mtp_logits(base, &n1);
    rewrite(base, a, "output_extra.weight", 'a', "token_embd.weight");
    y = mtp_logits(a, &n2);
    for (int i = 0; i < n1; i++)
        if (y[i] != 2.0f * x[i]) fail_msg("output_extra: logit %d is %g, not 2 x %g", i, (double)y[i], (double)x[i]);
    free(x);
    free(y);

    /* malformed: the model loads, the MTP layer does not, and says which tensor */
    static const struct { const char *name; char kind; const char *words; } bad[] = {
        {"blk.4.nextn.enorm.weight", 's', "blk.4.nextn.enorm.weight"},
        {"blk.4.nextn.hnorm.weight", 'd', "blk.4.nextn.hnorm.weight' is missing"},
        {"blk.4.ffn_up.weight", 'd', "all present or all absent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rewrite(base, a, bad[i].name, bad[i].kind, NULL);
        assert_tern_ok(tern_model_load(a, NULL, &m));
        const char *why = NULL;
        assert_false(tern_model_has_mtp(m, &why));
        print_message("%s (%c): %s\n", bad[i].name, bad[i].kind, why);
        assert_non_null(strstr(why, bad[i].words));
        struct tern_draft_params dp = tern_draft_default_params();
        dp.source = "mtp";
        struct tern_draft *d = NULL;
        assert_int_equal(tern_draft_create(m, &dp, &d), TERN_ERR_UNSUPPORTED);
        assert_non_null(strstr(tern_last_error(), bad[i].words));
        tern_model_free(m);
    }
    remove(a);
    remove(b);
    remove(base);
}

/* What is refused names why. */
static void test_refusals(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/mtp-none.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("qwen3-tiny", "f16", 7, path, NULL));
    struct tern_model *plain;
    assert_tern_ok(tern_model_load(path, NULL, &plain));
    const char *why = NULL;
    assert_false(tern_model_has_mtp(plain, &why));
    assert_non_null(strstr(why, "qwen35"));
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = "mtp";
    struct tern_draft *d = NULL;
    assert_int_equal(tern_draft_create(plain, &dp, &d), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "mtp"));
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.mtp = true;
    struct tern_context *ctx = NULL;
    assert_int_equal(tern_context_create(plain, &cp, &ctx), TERN_ERR_UNSUPPORTED);
    tern_model_free(plain);
    remove(path);

    struct tern_model *m;
    make_model("f16", path, sizeof path, &m);
    struct tern_context *mctx, *tctx;
    assert_tern_ok(tern_context_create(m, &cp, &mctx));
    cp.mtp = false;
    assert_tern_ok(tern_context_create(m, &cp, &tctx));
    const int32_t t = 5;
    const float h[128] = {0};
    assert_int_equal(tern_decode(mctx, &t, 1, 0, TERN_LOGITS_LAST), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "tern_decode_mtp"));
    assert_int_equal(tern_decode_mtp(tctx, &t, h, 1, 0, TERN_LOGITS_LAST), TERN_ERR_ARG);
    assert_int_equal(tern_decode_mtp(mctx, &t, NULL, 1, 0, TERN_LOGITS_LAST), TERN_ERR_ARG);
    assert_int_equal(tern_decode_mtp(mctx, &t, h, 1, 3, TERN_LOGITS_LAST), TERN_ERR_ARG);
    assert_tern_ok(tern_decode_mtp(mctx, &t, h, 1, 0, TERN_LOGITS_LAST));
    assert_non_null(tern_context_hidden(mctx, 0));
    assert_null(tern_context_hidden(tctx, 0)); /* not kept */
    /* a batcher cannot take it: its slots are sequences of one context */
    dp.source = "mtp";
    assert_tern_ok(tern_draft_create(m, &dp, &d));
    cp.n_seq = 2;
    struct tern_context *bctx;
    assert_tern_ok(tern_context_create(m, &cp, &bctx));
    struct tern_batcher_params bp = tern_batcher_default_params();
    bp.draft = d;
    struct tern_batcher *b = NULL;
    struct tern_tokenizer *tk;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tk));
    assert_int_equal(tern_batcher_create(bctx, tk, &bp, &b), TERN_ERR_UNSUPPORTED);
    tern_tokenizer_free(tk);
    assert_non_null(strstr(tern_last_error(), "mtp"));
    tern_draft_free(d);
    tern_context_free(bctx);
    tern_context_free(mctx);
    tern_context_free(tctx);
    tern_model_free(m);
    remove(path);
}

/* The CLI: --draft mtp drafts on a file with an MTP layer (greedy output as without), and
 * refuses others and the server, naming why. */
static void test_cli(void **state)
{
    (void)state;
    char path[4096], plain[4096], cmd[12000], out[8192], out2[8192];
    struct tern_model *m;
    make_model("q8_0", path, sizeof path, &m);
    tern_model_free(m);
    snprintf(plain, sizeof plain, "%s/mtp-cli-none.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("qwen3-tiny", "q8_0", 7, plain, NULL));
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'the mtp layer' -n 24 --temp 0 -t 2 --draft mtp "
             "--draft-min 2 --draft-max 2 --ignore-eos 2>&1", test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "speculative (mtp): drafted"));
    assert_non_null(strstr(out, "greedy output exact"));
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'the mtp layer' -n 24 --temp 0 -t 2 --ignore-eos 2>/dev/null",
             test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out2, sizeof out2), 0);
    /* stdout carries the text: the same with and without the draft */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'the mtp layer' -n 24 --temp 0 -t 2 --draft mtp "
             "--draft-min 2 --draft-max 2 --ignore-eos 2>/dev/null", test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_string_equal(out, out2);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 4 --draft mtp 2>&1", test_tern_bin(), plain);
    assert_int_not_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "draft mtp: only qwen35 files"));
    snprintf(cmd, sizeof cmd, "%s serve -m %s --draft mtp --port 0 2>&1", test_tern_bin(), path);
    assert_int_not_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "an \"mtp\" draft drafts for a generator"));
    snprintf(cmd, sizeof cmd, "%s check -m %s 2>&1", test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "MTP layer:     yes"));
    remove(path);
    remove(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_f16),
        cmocka_unit_test(test_parity_q8_0),
        cmocka_unit_test(test_source_drafts_reference_chain),
        cmocka_unit_test(test_source_stays_in_step),
        cmocka_unit_test(test_source_past_kept_states),
        cmocka_unit_test(test_kept_states_after_truncation),
        cmocka_unit_test(test_generation_exact),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
