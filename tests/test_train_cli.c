/* test_train_cli.c — `tern train` as a user runs it (build/bin/tern):
 * - a run prints one JSON line per step (step, loss, lr, tokens/s, ETA) with --json and writes
 *   an F32 GGUF that tern quantize turns into a Q8_0 model that loads;
 * - the same run split with --until + --resume writes a byte-identical model, in F32 and (on
 *   CPUs with AVX512-BF16) with --matmul bf16;
 * - a malformed config is refused naming the key; a model too big for memory is refused before
 *   training, saying how much it needs;
 * - a run resumed from a checkpoint whose weights hold a NaN stops at the first step, naming it,
 *   and leaves the checkpoint as it was. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kernels/gemm_f32.h"
#include "tern.h"
#include "tern_train.h"

static char dir[512], tok[600], data[600], cfg[600];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void setup_files(void)
{
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(tok, sizeof tok, "%s/tok.gguf", dir);
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 3, tok, NULL));
    snprintf(data, sizeof data, "%s/d.tdat", dir);
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    int32_t t[40];
    uint8_t m[40];
    for (int d = 0; d < 30; d++) {
        const int len = 10 + d % 25;
        for (int i = 0; i < len; i++) t[i] = 260 + (d * 7 + i) % 50, m[i] = i > 3;
        assert_tern_ok(tern_train_data_add(w, t, m, len));
    }
    assert_tern_ok(tern_train_data_write(w, data));
    tern_train_data_writer_free(w);
    snprintf(cfg, sizeof cfg, "%s/model.json", dir);
    char json[2048];
    snprintf(json, sizeof json,
             "{\"arch\": \"llama\", \"n_embd\": 48, \"n_layer\": 2, \"n_head\": 4, \"n_head_kv\": 2,"
             " \"n_ff\": 64, \"n_ctx\": 32, \"tokenizer\": \"%s\", \"lr\": 0.003, \"warmup\": 2,"
             " \"steps\": 6, \"batch_tokens\": 64, \"accum\": 2, \"seed\": 5, \"threads\": 2,"
             " \"ckpt_every\": 2}", tok);
    write_text(cfg, json);
}

static void test_run_json_quantize(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s/a.gguf --json 2>&1",
             test_tern_bin(), cfg, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    int lines = 0;
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
        assert_non_null(strstr(l, "\"step\":"));
        assert_non_null(strstr(l, "\"loss\":"));
        assert_non_null(strstr(l, "\"lr\":"));
        assert_non_null(strstr(l, "\"tokens_per_s\":"));
        assert_non_null(strstr(l, "\"eta_s\":"));
        lines++;
    }
    assert_int_equal(lines, 6);
    snprintf(cmd, sizeof cmd, "%s quantize %s/a.gguf %s/a.q8.gguf q8_0 2>&1", test_tern_bin(), dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    char q8[700];
    snprintf(q8, sizeof q8, "%s/a.q8.gguf", dir);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(q8, NULL, &m));
    assert_int_equal(tern_model_n_vocab(m), 512);
    tern_model_free(m);
    /* the terminal form names step, loss, lr, tokens/s and ETA */
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s/b.gguf --until 1 2>&1",
             test_tern_bin(), cfg, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "step 1/6  loss "));
    assert_non_null(strstr(out, "tok/s  ETA "));
}

/* The run split with --until + --resume writes the same bytes as the whole run, with the
 * matrix products in precision mm ("f32", "bf16") */
static void split_case(const char *mm)
{
    setup_files();
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof cmd, "%s train --config %s --matmul %s --data %s -o %s/full-%s.gguf --json "
             ">/dev/null 2>&1", test_tern_bin(), cfg, mm, data, dir, mm);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s train --config %s --matmul %s --data %s -o %s/half-%s.gguf "
             "--checkpoint-dir %s/split-%s.ckpt --until 3 --json >/dev/null 2>&1", test_tern_bin(), cfg,
             mm, data, dir, mm, dir, mm);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s train --config %s --matmul %s --data %s -o %s/resumed-%s.gguf "
             "--resume %s/split-%s.ckpt --json 2>&1", test_tern_bin(), cfg, mm, data, dir, mm, dir, mm);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"step\":4,"));
    assert_null(strstr(out, "\"step\":3,"));
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/full-%s.gguf", dir, mm);
    snprintf(b, sizeof b, "%s/resumed-%s.gguf", dir, mm);
    size_t na, nb;
    char *fa = test_read_file(a, &na), *fb = test_read_file(b, &nb);
    assert_non_null(fa);
    assert_non_null(fb);
    assert_int_equal(na, nb);
    assert_memory_equal(fa, fb, na);
    free(fa);
    free(fb);
}

static void test_split_run_identical(void **state)
{
    (void)state;
    split_case("f32");
    if (kern_gemm_path_ok(KERN_GEMM_BF16_AVX512)) split_case("bf16");
    else print_message("bf16: no AVX512-BF16 on this CPU, its split run skipped\n");
}

static void test_bad_config(void **state)
{
    (void)state;
    setup_files();
    char path[700], cmd[8192], out[65536];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    write_text(path, "{\"n_embd\": 64, \"n_vocab\": 100, \"warmpu\": 10}");
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s/x.gguf 2>&1", test_tern_bin(),
             path, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "unknown key 'warmpu'"));
    write_text(path, "{\"n_embd\": 8192, \"n_layer\": 400, \"n_head\": 64, \"n_ff\": 32768, "
                     "\"n_vocab\": 100000, \"n_ctx\": 4096}");
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "needs"));
    assert_non_null(strstr(out, "GiB"));
    snprintf(cmd, sizeof cmd, "%s train --config %s --matmul fp8 --data %s -o %s/x.gguf 2>&1",
             test_tern_bin(), cfg, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--matmul: 'fp8'"));
}

/* FNV-1a 64, as the checkpoint's trailer */
static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void test_nan_stops_run(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s/n.gguf --checkpoint-dir "
             "%s/nan.ckpt --until 2 --json >/dev/null 2>&1", test_tern_bin(), cfg, data, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    /* poison one weight (the first float after the header: token_embd[0][0]) and re-seal */
    char path[700];
    snprintf(path, sizeof path, "%s/nan.ckpt/checkpoint.bin", dir);
    size_t n;
    unsigned char *buf = (unsigned char *)test_read_file(path, &n);
    assert_non_null(buf);
    const size_t head = 4 + 4 + 13 * 4 + 4 + 8 + 4 * 8 + 8; /* version 2: 13 shape fields */
    const float nan = __builtin_nanf("");
    memcpy(buf + head, &nan, 4);
    const uint64_t h = fnv(buf, n - 8);
    memcpy(buf + n - 8, &h, 8);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s/n2.gguf --resume %s/nan.ckpt 2>&1",
             test_tern_bin(), cfg, data, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "step 3: the loss is NaN"));
    assert_non_null(strstr(out, "last good checkpoint (step 2)"));
    size_t n2;
    unsigned char *after = (unsigned char *)test_read_file(path, &n2);
    assert_int_equal(n, n2);
    assert_memory_equal(buf, after, n);
    free(buf);
    free(after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_json_quantize),
        cmocka_unit_test(test_split_run_identical),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_nan_stops_run),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
