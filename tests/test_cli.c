/* test_cli.c — the tern binary as a user runs it: `tern run` reproduces llama.cpp's greedy
 * continuations on the F16 fixtures, and bad input (flags, files) gives a clear message and a
 * non-zero exit, never a crash. */
#include "test_support.h"
#include "tern_bench.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Run a shell command; capture stdout (and stderr if merge) into buf; return the exit code. */
static void greedy_matches_reference(const char *name)
{
    char rel[256], model[4096], ref[4096];
    snprintf(rel, sizeof rel, "fixtures/models/%s.gguf", name);
    TEST_SHARED_OR_SKIP(mp, rel);
    snprintf(model, sizeof model, "%s", mp);
    snprintf(rel, sizeof rel, "fixtures/reference/%s.jsonl", name);
    TEST_SHARED_OR_SKIP(rp, rel);
    snprintf(ref, sizeof ref, "%s", rp);
    char *text = test_read_file(ref, NULL);
    assert_non_null(text);
    int seq = 0;
    cJSON *tokens = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
        if (!strcmp(type, "seq")) {
            cJSON_Delete(tokens);
            tokens = cJSON_DetachItemFromObject(j, "tokens");
        } else if (!strcmp(type, "greedy")) {
            static char cmd[16384], out[4096], expect[4096];
            int n = snprintf(cmd, sizeof cmd, "%s run -m %s -n 32 --ignore-eos -t 2 --tokens ",
                             test_tern_bin(), model);
            const cJSON *e;
            int k = 0;
            cJSON_ArrayForEach(e, tokens) n += snprintf(cmd + n, sizeof cmd - n, "%s%d", k++ ? "," : "", e->valueint);
            snprintf(cmd + n, sizeof cmd - n, " 2>/dev/null");
            int m = 0;
            k = 0;
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "tokens"))
                m += snprintf(expect + m, sizeof expect - m, "%s%d", k++ ? "," : "", e->valueint);
            snprintf(expect + m, sizeof expect - m, "\n");
            assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
            print_message("%s seq %d: %s", name, seq, out);
            assert_string_equal(out, expect);
            seq++;
        }
        cJSON_Delete(j);
    }
    cJSON_Delete(tokens);
    assert_int_equal(seq, 3);
    free(text);
}

static void test_run_greedy_llama_f16(void **state)
{
    (void)state;
    greedy_matches_reference("llama-spm-tiny-f16");
}

static void test_run_greedy_qwen2_f16(void **state)
{
    (void)state;
    greedy_matches_reference("qwen2-tiny-f16");
}

/* Expect exit code `code` and `needle` in the combined output. */
static void expect_failure(const char *args, int code, const char *needle)
{
    char cmd[8192], out[8192];
    if (snprintf(cmd, sizeof cmd, "%s %s 2>&1", test_tern_bin(), args) >= (int)sizeof cmd)
        fail_msg("command too long for the test's buffer: %s", args);
    int rc = test_run_cmd(cmd, out, sizeof out);
    print_message("tern %s -> %d: %s", args, rc, out);
    assert_int_equal(rc, code);
    assert_non_null(strstr(out, needle));
}

/* A build that embeds models/tern-tool.gguf runs it without -m (test_tern_tool checks that). */
static bool cli_has_embedded_model(void)
{
    char cmd[2048], out[256] = "";
    snprintf(cmd, sizeof cmd, "%s version", test_tern_bin());
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    return strstr(out, "embedded model: tern-tool") != NULL;
}

static void test_bad_input(void **state)
{
    (void)state;
    char path[4096], args[8192];
    expect_failure("nosuchcommand", 2, "unknown command");
    expect_failure("run -m", 2, "needs a value");
    if (!cli_has_embedded_model()) expect_failure("run --tokens 1,2", 2, "missing -m");
    expect_failure("run -m x.gguf --tokens 1,,2", 2, "entry 1");
    expect_failure("run -m x.gguf --tokens 1 -n -5", 2, "-n: -5 is out of range 0..16777216");
    expect_failure("run -m /nonexistent/model.gguf --tokens 1", 1, "/nonexistent/model.gguf");
    expect_failure("check -m /nonexistent/model.gguf --bogus", 2, "unknown option");
    /* a file that is not GGUF */
    snprintf(path, sizeof path, "%s/not-a-model.gguf", test_tmpdir());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("this is not a gguf file at all, just text\n", f);
    fclose(f);
    snprintf(args, sizeof args, "check -m %s", path);
    expect_failure(args, 1, "magic");
    /* a real model truncated in the middle of its tensor data */
    const char *fx = test_shared_path("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (fx) {
        size_t len;
        char *data = test_read_file(fx, &len);
        assert_non_null(data);
        snprintf(path, sizeof path, "%s/truncated.gguf", test_tmpdir());
        f = fopen(path, "wb");
        fwrite(data, 1, len / 2, f);
        fclose(f);
        free(data);
        snprintf(args, sizeof args, "run -m %s --tokens 1,2,3", path);
        expect_failure(args, 1, "truncated.gguf");
        /* a token id outside the vocabulary */
        snprintf(args, sizeof args, "run -m %s --tokens 1,99999999 -n 1", fx);
        expect_failure(args, 1, "outside the vocabulary");
    }
}

/* Every numeric flag of run/chat names its allowed range when a value falls outside it (a new
 * user got "-t '1000' is not valid" and had to guess). */
static void test_flag_ranges(void **state)
{
    (void)state;
    static const char *cases[][2] = {
        {"-t 1000", "-t: 1000 is out of range 1..512"},
        {"-t 0", "-t: 0 is out of range 1..512"},
        {"--threads abc", "--threads: 'abc' is not an integer (allowed: 1..512)"}, /* named as typed */
        {"-c 100000000", "-c: 100000000 is out of range 1..4194304"},
        {"-c 99999999999999999999", "-c: 99999999999999999999 is out of range 1..4194304"},
        {"-n -5", "-n: -5 is out of range 0..16777216"},
        {"-n 1.5", "-n: '1.5' is not an integer"},
        {"--temp -1", "--temp: -1 is out of range 0..100"},
        {"--temp nan", "--temp: 'nan' is not a number"},
        {"--temp inf", "--temp: inf is out of range 0..100"},
        {"--top-p 2", "--top-p: 2 is out of range 0..1"},
        {"--min-p -0.5", "--min-p: -0.5 is out of range 0..1"},
        {"--top-k -1", "--top-k: -1 is out of range 0..16777216"},
        {"--repeat-penalty 101", "--repeat-penalty: 101 is out of range 0..100"},
        {"--repeat-last-n 0", "--repeat-last-n: 0 is out of range 1..1048576"},
        {"-s -1", "-s: -1 is out of range 0..9223372036854775807"},
        {"--cache-mb 0", "--cache-mb: 0 is out of range 1..4194304"},
    };
    char args[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "run -m x.gguf --tokens 1 %s", cases[i][0]);
        expect_failure(args, 2, cases[i][1]);
        snprintf(args, sizeof args, "chat -m x.gguf %s", cases[i][0]);
        expect_failure(args, 2, cases[i][1]);
    }
    /* the bounds themselves are accepted (parsing gets past the flag to the missing model) */
    expect_failure("run -m /nonexistent.gguf --tokens 1 -t 512 --top-p 1 --temp 0 -n 0", 1, "nonexistent");
}

/* `tern template --now 0` renders strftime_now() at the Unix epoch: 0 is a valid time (it used
 * to be refused, because the API took 0 to mean "the clock"); so are times before it. */
static void test_template_now(void **state)
{
    (void)state;
    char tmpl[4096], msgs[4096], cmd[16384], out[4096];
    snprintf(tmpl, sizeof tmpl, "%s/now.jinja", test_tmpdir());
    snprintf(msgs, sizeof msgs, "%s/now.json", test_tmpdir());
    FILE *f = fopen(tmpl, "wb");
    assert_non_null(f);
    fputs("{{ strftime_now('%Y-%m-%d %H:%M:%S') }}", f);
    fclose(f);
    f = fopen(msgs, "wb");
    assert_non_null(f);
    fputs("[]", f);
    fclose(f);
    static const char *cases[][2] = {
        {"0", "1970-01-01 00:00:00"},
        {"-1", "1969-12-31 23:59:59"},
        {"1736933400", "2025-01-15 09:30:00"},
        {"253402300799", "9999-12-31 23:59:59"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s template --template %s --messages %s --now %s 2>&1",
                 test_tern_bin(), tmpl, msgs, cases[i][0]);
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    snprintf(cmd, sizeof cmd, "template --template %s --messages %s --now 253402300800", tmpl, msgs);
    expect_failure(cmd, 2, "--now: 253402300800 is out of range -62135596800..253402300799");
    /* without --now: the clock (this year, not 1970) */
    snprintf(cmd, sizeof cmd, "%s template --template %s --messages %s 2>&1", test_tern_bin(), tmpl, msgs);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_true(strncmp(out, "1970", 4) != 0 && strlen(out) == 19);
}

static void test_synth_check_run(void **state)
{
    (void)state;
    char cmd[8192], out[16384], path[4096];
    snprintf(path, sizeof path, "%s/tiny.gguf", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s synth tiny:q4_k_m -o %s 2>&1", test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s check -m %s --json", test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "arch")), "llama");
    assert_int_equal(cJSON_GetObjectItem(j, "n_layer")->valueint, 4);
    const cJSON *types = cJSON_GetObjectItem(j, "tensor_types");
    assert_non_null(cJSON_GetObjectItem(types, "Q4_K"));
    assert_non_null(cJSON_GetObjectItem(types, "Q6_K"));
    const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kv_cache"), 3);
    /* 2 (K,V) x 4 layers x 4 kv heads x 32 dims x 4096 positions x 2 bytes */
    assert_int_equal((long long)cJSON_GetObjectItem(kv, "bytes")->valuedouble, 2LL * 4 * 4 * 32 * 4096 * 2);
    cJSON_Delete(j);
    snprintf(cmd, sizeof cmd, "%s run -m %s --tokens 256,72,101 -n 12 --ignore-eos --json 2>&1",
             test_tern_bin(), path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    j = cJSON_Parse(out);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), 12);
    cJSON_Delete(j);
}

/* tern quantize F16 -> Q8_0 gives a model that matches llama.cpp's own Q8_0 reference (made
 * from the F32 weights; ours comes from F16, hence the quantized-model tolerance). */
static void test_quantize(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(src, "fixtures/models/llama-spm-tiny-f16.gguf");
    char cmd[16384], out[4096], path[4096], ref[4096];
    snprintf(path, sizeof path, "%s/q8.gguf", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s quantize %s %s q8_0 2>&1", test_tern_bin(), src, path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    TEST_SHARED_OR_SKIP(r, "fixtures/reference/llama-spm-tiny-q8_0.jsonl");
    snprintf(ref, sizeof ref, "%s", r);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_ref_report rep;
    assert_tern_ok(tern_ref_check(m, ref, 2, 0.05, NULL, &rep));
    print_message("quantized by tern vs llama.cpp's Q8_0 reference: max |d| %.3g, full %.3g\n",
                  rep.max_abs_top, rep.max_abs_full);
    assert_true(rep.pass);
    tern_model_free(m);
    /* wrong type, same file, missing input */
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/x.gguf iq2_xs 2>&1", test_tern_bin(), src, test_tmpdir());
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "iq2_xs"));
    snprintf(cmd, sizeof cmd, "%s quantize %s %s q8_0 2>&1", test_tern_bin(), path, path);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
}

static void put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* `tern quantize SRC OUT keep --head-ids IDS` -> its exit status, its output into out. */
static int quantize_head_ids(const char *src, const char *pruned, const char *ids, char *out, size_t cap)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s quantize %s %s keep --head-ids %s 2>&1", test_tern_bin(), src,
             pruned, ids);
    return test_run_cmd(cmd, out, cap);
}

/* tern quantize --head-ids / --head-data: a drafter's pruned head. The model then writes only
 * kept tokens; the ids come from a list or from the tokens conversations train on. */
static void test_quantize_head(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(src, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char cmd[16384], out[8192], ids[4096], data[4096], pruned[4096];
    snprintf(ids, sizeof ids, "%s/head-ids.txt", test_tmpdir());
    snprintf(data, sizeof data, "%s/head-data.jsonl", test_tmpdir());
    snprintf(pruned, sizeof pruned, "%s/head-pruned.gguf", test_tmpdir());
    put_text(ids, "[262, 11, 13,\n 16903, 50256, 290]\n");
    assert_int_equal(quantize_head_ids(src, pruned, ids, out, sizeof out), 0);
    assert_non_null(strstr(out, "head pruned"));
    snprintf(cmd, sizeof cmd, "%s check -m %s 2>&1", test_tern_bin(), pruned);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "pruned head: 6 of the 50257 tokens"));
    snprintf(cmd, sizeof cmd, "%s run -m %s -p \"Once upon a time\" -n 16 --temp 0.9 -s 3 --ignore-eos "
             "--json 2>/dev/null", test_tern_bin(), pruned);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    const cJSON *toks = cJSON_GetObjectItem(j, "tokens");
    assert_int_equal(cJSON_GetArraySize(toks), 16);
    for (const cJSON *t = toks->child; t; t = t->next) {
        const int id = t->valueint;
        assert_true(id == 11 || id == 13 || id == 262 || id == 290 || id == 16903 || id == 50256);
    }
    cJSON_Delete(j);
    /* from conversations: the most frequent trained tokens, with their coverage */
    FILE *f = fopen(data, "w");
    assert_non_null(f);
    for (int i = 0; i < 20; i++)
        fprintf(f, "{\"messages\": [{\"role\": \"user\", \"content\": \"count %d\"}, "
                "{\"role\": \"assistant\", \"content\": \"one two three %d\"}]}\n", i, i % 3);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s q8_0 --head-data %s --head-size 5 2>&1",
             test_tern_bin(), src, pruned, data);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "head: 5 tokens,"));
    assert_non_null(strstr(out, "% of the trained positions of"));
    /* refusals */
    snprintf(cmd, sizeof cmd, "%s quantize %s %s keep --head-ids %s --head-data %s 2>&1",
             test_tern_bin(), src, pruned, ids, data);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "not both"));
    snprintf(cmd, sizeof cmd, "%s quantize %s %s keep --head-size 9 2>&1", test_tern_bin(), src, pruned);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    put_text(ids, "1 2 x3\n");
    assert_int_equal(quantize_head_ids(src, pruned, ids, out, sizeof out), 1);
    assert_non_null(strstr(out, "byte 4: expected a token id"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_greedy_llama_f16),
        cmocka_unit_test(test_run_greedy_qwen2_f16),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_flag_ranges),
        cmocka_unit_test(test_template_now),
        cmocka_unit_test(test_synth_check_run),
        cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_quantize_head),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
