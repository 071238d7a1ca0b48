/* test_perplexity.c — `tern perplexity` and the library behind it (tern_perplexity,
 * tern_kl_divergence in include/tern_bench.h): the printed format, the same figures with 1 and
 * 2 threads, the figures against a plain recomputation (each chunk decoded whole, log-softmax in
 * double), refusals (too short a text, missing -f, bad values, unreadable and empty files, a cut
 * or foreign base file), malformed UTF-8 read as llama.cpp reads it, and the KL round trip: a
 * base file written and read back by the same model gives KL 0 and the same top token always.
 *
 * The model is a fixture of ../shared/fixtures/models (llama-spm-tiny-q8_0: SentencePiece, adds
 * BOS, so every chunk starts with BOS; qwen2-tiny-q8_0: byte-level BPE, no BOS); the text is the
 * GPL-3 of every Debian machine (/usr/share/common-licenses/GPL-3). Either missing: skipped.
 * Agreement with llama-perplexity itself is measured by hand (docs/perplexity.md): llama.cpp is
 * not on the machines that run this. */
#include "test_support.h"
#include "tern_bench.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define GPL3 "/usr/share/common-licenses/GPL-3"

static const char *text_or_skip(void)
{
    struct stat sb;
    if (stat(GPL3, &sb) != 0) return NULL;
    return GPL3;
}

#define TEXT_OR_SKIP(var)                                                                     \
    const char *var = text_or_skip();                                                         \
    do {                                                                                      \
        if (!var) TEST_SKIP(GPL3 " not found (the test text of Debian machines)\n");          \
    } while (0)

/* Run `tern <args>`: stdout and stderr (malloc'ed, NUL-terminated) and the exit code. */
static int tern(const char *args, char **out, char **err)
{
    char err_path[4096], cmd[40000];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s %s 2> %s", test_tern_bin(), args, err_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((k = fread(buf + n, 1, cap - 1 - n, p)) > 0) {
        n += k;
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    const int status = pclose(p);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char *e = test_read_file(err_path, NULL);
    assert_non_null(e);
    print_message("tern %s -> %d\n%s", args, rc, e);
    if (out) *out = buf;
    else free(buf);
    if (err) *err = e;
    else free(e);
    return rc;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static cJSON *json_of(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    if (!j) fail_msg("not JSON: %s", s);
    return j;
}

static double num(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(v)) fail_msg("no number \"%s\"", key);
    return v->valuedouble;
}

/* ------------------------------------------------------------------ format, threads */

static void test_format_and_threads(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(mp, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    char model[4096];
    snprintf(model, sizeof model, "%s", mp);
    TEXT_OR_SKIP(text);
    char args[32768], *out, *err;

    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128 --chunks 4 -t 1", model, text);
    assert_int_equal(tern(args, &out, &err), 0);
    /* "[1]x,[2]x,[3]x,[4]x,\nFinal estimate: PPL = X +/- Y\n" */
    double run[4], ppl, unc;
    int idx[4], used = 0;
    const char *p = out;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sscanf(p, "[%d]%lf,%n", &idx[i], &run[i], &used), 2);
        assert_int_equal(idx[i], i + 1);
        p += used;
    }
    assert_int_equal(sscanf(p, "\nFinal estimate: PPL = %lf +/- %lf\n", &ppl, &unc), 2);
    assert_non_null(strstr(p, "Final estimate: PPL = "));
    assert_true(ppl > 1 && unc > 0 && unc < ppl);
    assert_true(fabs(run[3] - ppl) < 1e-9); /* the last running value is the estimate */
    assert_non_null(strstr(err, "4 chunks of 128"));
    free(out);
    free(err);

    /* --json with 1 and 2 threads: the same figures, bit for bit */
    cJSON *j[2];
    for (int t = 0; t < 2; t++) {
        snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128 --chunks 4 -t %d --json", model,
                 text, t + 1);
        assert_int_equal(tern(args, &out, NULL), 0);
        j[t] = json_of(out);
        free(out);
    }
    assert_true(num(j[0], "ppl") == num(j[1], "ppl"));
    assert_true(num(j[0], "ppl_err") == num(j[1], "ppl_err"));
    char *c0 = cJSON_PrintUnformatted(cJSON_GetObjectItem(j[0], "chunks"));
    char *c1 = cJSON_PrintUnformatted(cJSON_GetObjectItem(j[1], "chunks"));
    assert_string_equal(c0, c1);
    free(c0);
    free(c1);
    assert_true(fabs(num(j[0], "ppl") - ppl) < 5e-5); /* the text printed %.4f */
    assert_int_equal((int)num(j[0], "n_ctx"), 128);
    assert_int_equal((int)num(j[0], "n_chunks"), 4);
    assert_int_equal((int)num(j[0], "n_scored"), 4 * 63);
    assert_true(num(j[0], "n_tokens") >= 8 * 128);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j[0], "add_bos")));
    cJSON_Delete(j[0]);
    cJSON_Delete(j[1]);
}

/* ------------------------------------------------------------------ against a recomputation */

/* PPL computed the plain way: every chunk decoded whole with logits for all positions, BOS in
 * front, the second half scored with a log-softmax in double throughout. */
static double plain_ppl(struct tern_model *m, const int32_t *ids, int n_ctx, int n_chunks, int32_t bos)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = cp.n_batch = n_ctx;
    cp.n_threads = 1;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    const int nv = tern_model_n_vocab(m);
    int32_t *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    double nll = 0;
    long count = 0;
    for (int c = 0; c < n_chunks; c++) {
        memcpy(chunk, ids + (size_t)c * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        assert_tern_ok(tern_kv_truncate(ctx, 0));
        assert_tern_ok(tern_decode(ctx, chunk, n_ctx, 0, TERN_LOGITS_ALL));
        for (int pos = n_ctx / 2; pos < n_ctx - 1; pos++) {
            const float *l = tern_context_logits(ctx, pos);
            double max = l[0], sum = 0;
            for (int i = 1; i < nv; i++) max = l[i] > max ? l[i] : max;
            for (int i = 0; i < nv; i++) sum += exp((double)l[i] - max);
            nll += log(sum) - ((double)l[chunk[pos + 1]] - max);
            count++;
        }
    }
    free(chunk);
    tern_context_free(ctx);
    return exp(nll / (double)count);
}

static void test_against_plain(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(mp, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    TEXT_OR_SKIP(text);
    struct tern_model *m;
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_model_load(mp, NULL, &m));
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tok));
    size_t len;
    char *s = test_read_file(text, &len);
    assert_non_null(s);
    int32_t *ids;
    size_t n, bad;
    assert_tern_ok(tern_ppl_tokenize(tok, s, len, &ids, &n, &bad));
    assert_int_equal(bad, 0);
    assert_int_equal(ids[0], tern_token_bos(tok)); /* llama.cpp tokenizes with BOS */

    struct tern_ppl_params p = tern_ppl_default_params();
    p.n_ctx = 96;
    p.n_chunks = 3;
    p.n_threads = 2;
    p.n_batch = 40; /* passes of 32 tokens: scored rows span passes */
    struct tern_ppl_report r;
    assert_tern_ok(tern_perplexity(m, tok, ids, n, &p, &r));
    assert_int_equal(r.n_chunks, 3);
    assert_int_equal(r.n_scored, 3 * 47);
    const double want = plain_ppl(m, ids, 96, 3, tern_token_bos(tok));
    print_message("ppl %.9f, plain %.9f\n", r.ppl, want);
    assert_true(fabs(r.ppl / want - 1) < 1e-5);

    /* too short for the context: refused naming both counts */
    p.n_ctx = (int)(n / 2) + 1;
    assert_int_equal(tern_perplexity(m, tok, ids, n, &p, &r), TERN_ERR_RANGE);
    char needs[64];
    snprintf(needs, sizeof needs, "at least %d", 2 * p.n_ctx);
    assert_non_null(strstr(tern_last_error(), needs));

    free(ids);
    free(s);
    tern_tokenizer_free(tok);
    tern_model_free(m);
}

/* ------------------------------------------------------------------ refusals */

static void test_refusals(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(mp, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    char model[4096];
    snprintf(model, sizeof model, "%s", mp);
    TEXT_OR_SKIP(text);
    char args[32768], path[4096], *err;

    /* too short: exit 1 naming the tokens needed and those the text has */
    snprintf(path, sizeof path, "%s/short.txt", test_tmpdir());
    const char *short_text = "This text is far too short for a context of 512 tokens.\n";
    write_file(path, short_text, strlen(short_text));
    snprintf(args, sizeof args, "perplexity -m %s -f %s", model, path);
    assert_int_equal(tern(args, NULL, &err), 1);
    assert_non_null(strstr(err, "needs at least 1024 tokens"));
    assert_non_null(strstr(err, "tokenizes to "));
    free(err);

    /* usage errors: exit 2 */
    snprintf(args, sizeof args, "perplexity -m %s", model);
    assert_int_equal(tern(args, NULL, &err), 2);
    assert_non_null(strstr(err, "-f"));
    free(err);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 2", model, text);
    assert_int_equal(tern(args, NULL, &err), 2);
    assert_non_null(strstr(err, "out of range 4.."));
    free(err);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -t 0", model, text);
    assert_int_equal(tern(args, NULL, NULL), 2);
    snprintf(args, sizeof args, "perplexity -m %s -f %s --chunks x", model, text);
    assert_int_equal(tern(args, NULL, NULL), 2);
    snprintf(args, sizeof args, "perplexity -m %s --kl-divergence", model);
    assert_int_equal(tern(args, NULL, &err), 2);
    assert_non_null(strstr(err, "--kl-divergence-base"));
    free(err);
    snprintf(args, sizeof args, "perplexity -m %s -f %s --bogus", model, text);
    assert_int_equal(tern(args, NULL, NULL), 2);
    assert_int_equal(tern("perplexity --help", NULL, NULL), 0);

    /* unreadable and empty files: exit 1 */
    snprintf(args, sizeof args, "perplexity -m %s -f %s/missing.txt", model, test_tmpdir());
    assert_int_equal(tern(args, NULL, &err), 1);
    assert_non_null(strstr(err, "missing.txt"));
    free(err);
    snprintf(path, sizeof path, "%s/empty.txt", test_tmpdir());
    write_file(path, "", 0);
    snprintf(args, sizeof args, "perplexity -m %s -f %s", model, path);
    assert_int_equal(tern(args, NULL, &err), 1);
    assert_non_null(strstr(err, "empty"));
    free(err);
}

/* -c past the training context: a warning, as run and chat give, and the run goes on. */
static void test_train_ctx_warning(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(mp, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    TEXT_OR_SKIP(text);
    char path[4096], args[32768], *err;
    snprintf(path, sizeof path, "%s/short-ctx.gguf", test_tmpdir());
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(mp, &g));
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create((uint32_t)tern_gguf_alignment(g), &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        if (k.len == strlen("llama.context_length") && !memcmp(k.ptr, "llama.context_length", k.len)) continue;
        assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    }
    assert_tern_ok(tern_gguf_writer_set_u32(w, "llama.context_length", 64));
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        assert_tern_ok(tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128 --chunks 1 -t 1", path, text);
    assert_int_equal(tern(args, NULL, &err), 0);
    assert_non_null(strstr(err, "exceeds the model's training context of 64"));
    free(err);
}

/* Malformed UTF-8 (byte-level BPE): each bad byte is read as U+FFFD, as llama.cpp reads it. */
static void test_invalid_utf8(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(mp, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char model[4096];
    snprintf(model, sizeof model, "%s", mp);
    TEXT_OR_SKIP(text);
    size_t len;
    char *s = test_read_file(text, &len);
    assert_non_null(s);
    /* a stray continuation byte, a cut 3-byte sequence, a 0xFF: 4 bad bytes; then the same
     * text with U+FFFD written in their place */
    const char *bad = "\x80 word \xE2\x82 word \xFF";
    const char *good = "\xEF\xBF\xBD word \xEF\xBF\xBD\xEF\xBF\xBD word \xEF\xBF\xBD";
    char pb[4096], pg[4096], args[32768], *out, *err;
    snprintf(pb, sizeof pb, "%s/bad.txt", test_tmpdir());
    snprintf(pg, sizeof pg, "%s/good.txt", test_tmpdir());
    for (int k = 0; k < 2; k++) {
        const char *ins = k ? good : bad;
        size_t il = strlen(ins);
        char *t = malloc(len + il);
        memcpy(t, ins, il);
        memcpy(t + il, s, len);
        write_file(k ? pg : pb, t, len + il);
        free(t);
    }
    free(s);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 256 --chunks 2 -t 1 --json", model, pb);
    assert_int_equal(tern(args, &out, &err), 0);
    assert_non_null(strstr(err, "4 bytes that are not valid UTF-8"));
    cJSON *jb = json_of(out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 256 --chunks 2 -t 1 --json", model, pg);
    assert_int_equal(tern(args, &out, NULL), 0);
    cJSON *jg = json_of(out);
    free(out);
    assert_true(num(jb, "n_tokens") == num(jg, "n_tokens"));
    assert_true(num(jb, "ppl") == num(jg, "ppl"));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(jb, "add_bos")));
    cJSON_Delete(jb);
    cJSON_Delete(jg);
}

/* ------------------------------------------------------------------ KL divergence */

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, "base.kld", 8) == 0;
    closedir(d);
    return n;
}

static void test_kld_round_trip(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(mp, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    char model[4096];
    snprintf(model, sizeof model, "%s", mp);
    TEST_SHARED_OR_SKIP(qp, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char other[4096];
    snprintf(other, sizeof other, "%s", qp);
    TEXT_OR_SKIP(text);
    char base[4096], args[32768], *out, *err;
    snprintf(base, sizeof base, "%s/base.kld", test_tmpdir());

    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128 --chunks 2 -t 2 --json "
             "--kl-divergence-base %s", model, text, base);
    assert_int_equal(tern(args, &out, NULL), 0);
    cJSON *jw = json_of(out);
    free(out);
    /* llama.cpp's layout: header, tokens, then 63 rows of (32000 + 4) uint16 per chunk */
    struct stat sb;
    assert_int_equal(stat(base, &sb), 0);
    assert_int_equal((long long)sb.st_size, 20 + 4LL * 2 * 128 + 2LL * 63 * (32000 + 4) * 2);
    assert_int_equal(count_entries(test_tmpdir()), 1); /* no temporary file left behind */

    snprintf(args, sizeof args, "perplexity -m %s --kl-divergence --kl-divergence-base %s -t 1 --json",
             model, base);
    assert_int_equal(tern(args, &out, NULL), 0);
    cJSON *jr = json_of(out);
    free(out);
    const cJSON *k = cJSON_GetObjectItem(jr, "kld");
    assert_non_null(k);
    print_message("kld mean %g max %g, same top %g, ppl %g vs %g\n", num(k, "mean"), num(k, "max"),
                  num(k, "same_top"), num(jr, "ppl"), num(jw, "ppl"));
    /* only the base's 16-bit rounding separates the two distributions */
    assert_true(fabs(num(k, "mean")) < 1e-5);
    assert_true(num(k, "max") < 1e-4);
    assert_true(num(k, "same_top") == 1.0);
    assert_true(fabs(num(k, "ppl_ratio") - 1) < 1e-4);
    assert_true(fabs(num(jr, "ppl") / num(jw, "ppl") - 1) < 1e-6);
    assert_int_equal((int)num(jr, "n_chunks"), 2);
    assert_int_equal((int)num(jr, "n_scored"), 126);
    cJSON_Delete(jw);
    cJSON_Delete(jr);

    /* the text summary prints llama.cpp's sections */
    snprintf(args, sizeof args, "perplexity -m %s --kl-divergence --kl-divergence-base %s -t 1",
             model, base);
    assert_int_equal(tern(args, &out, NULL), 0);
    assert_non_null(strstr(out, "Mean    KLD:"));
    assert_non_null(strstr(out, "Median  KLD:"));
    assert_non_null(strstr(out, "Same top p: 100.000"));
    free(out);

    /* a base of another vocabulary, one cut short, one that is not a base file: exit 1 */
    snprintf(args, sizeof args, "perplexity -m %s --kl-divergence --kl-divergence-base %s", other, base);
    assert_int_equal(tern(args, NULL, &err), 1);
    assert_non_null(strstr(err, "vocabulary of 32000"));
    free(err);
    char cut[4096];
    snprintf(cut, sizeof cut, "%s/cut.kld", test_tmpdir());
    size_t blen;
    char *b = test_read_file(base, &blen);
    assert_non_null(b);
    write_file(cut, b, blen - 1000);
    free(b);
    snprintf(args, sizeof args, "perplexity -m %s --kl-divergence --kl-divergence-base %s", model, cut);
    assert_int_equal(tern(args, NULL, &err), 1);
    assert_non_null(strstr(err, "cut short"));
    free(err);
    snprintf(args, sizeof args, "perplexity -m %s --kl-divergence --kl-divergence-base %s", model, text);
    assert_int_equal(tern(args, NULL, &err), 1);
    assert_non_null(strstr(err, "not a base"));
    free(err);

    /* writing where it cannot: exit 1, nothing left behind */
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128 --chunks 1 --kl-divergence-base "
             "%s/no/such/dir/x.kld", model, text, test_tmpdir());
    assert_int_equal(tern(args, NULL, NULL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_and_threads), cmocka_unit_test(test_against_plain),
        cmocka_unit_test(test_refusals),           cmocka_unit_test(test_train_ctx_warning),
        cmocka_unit_test(test_invalid_utf8),       cmocka_unit_test(test_kld_round_trip),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
