/* test_tokenizer_cli.c — `tern tokenize` / `tern detokenize` print what the library computes:
 * --json, --lines (one array per line, newline excluded), --jsonl (one JSON string per line, a
 * whole document each), --time, --no-bos, --parse-special, -f byte for byte, detokenize writing
 * the exact bytes, and usage / file errors with their exit codes. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Run a shell command, capture stdout (NUL-terminated, malloc'ed) and the exit code. */
static char *run(const char *cmd, int *code)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    size_t r;
    while ((r = fread(out + n, 1, cap - 1 - n, p)) > 0) n += r;
    out[n] = 0;
    int st = pclose(p);
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static void test_tokenize_cli(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(vocab, "fixtures/tokenizer/ggml-vocab-llama-spm.gguf");
    char v[4096];
    snprintf(v, sizeof v, "%s", vocab);
    char cmd[8192];
    int code;

    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p 'Hello world' --json", test_tern_bin(), v);
    char *out = run(cmd, &code);
    assert_int_equal(code, 0);
    assert_string_equal(out, "[1, 15043, 3186]\n"); /* bos + llama.cpp's ids */
    free(out);

    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p 'Hello world' --json --no-bos",
             test_tern_bin(), v);
    out = run(cmd, &code);
    assert_string_equal(out, "[15043, 3186]\n");
    free(out);

    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p '<s>' --json --no-bos --parse-special",
             test_tern_bin(), v);
    out = run(cmd, &code);
    assert_string_equal(out, "[1]\n");
    free(out);

    /* -f: byte for byte (the trailing newline is text); --lines: one array per line */
    char file[512];
    snprintf(file, sizeof file, "%s/lines.txt", test_tmpdir());
    FILE *f = fopen(file, "wb");
    fputs("Hello world\nHello world\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f %s --lines --no-bos", test_tern_bin(), v, file);
    out = run(cmd, &code);
    assert_int_equal(code, 0);
    assert_string_equal(out, "[15043, 3186]\n[15043, 3186]\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f %s --json --no-bos", test_tern_bin(), v, file);
    out = run(cmd, &code);
    struct tern_tokenizer *t;
    assert_tern_ok(tern_tokenizer_load(v, &t));
    int32_t ids[64];
    size_t n;
    const char *text = "Hello world\nHello world\n";
    assert_tern_ok(tern_tokenize(t, text, strlen(text), 0, ids, 64, &n));
    char want[1024] = "[";
    for (size_t i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), i ? ", %d" : "%d", ids[i]);
    strcat(want, "]\n");
    assert_string_equal(out, want);
    free(out);

    /* --jsonl: each line a JSON string holding a document (its newlines escaped): the ids of the
     * whole document, as tern_tokenize gives them; an empty line is skipped */
    snprintf(file, sizeof file, "%s/docs.jsonl", test_tmpdir());
    f = fopen(file, "wb");
    fputs("\"Hello world\\nHello world\\n\"\n\n\"Hello world\"\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f %s --jsonl --no-bos", test_tern_bin(), v, file);
    out = run(cmd, &code);
    assert_int_equal(code, 0);
    char want2[1200];
    want[strlen(want) - 1] = 0;
    snprintf(want2, sizeof want2, "%s\n[15043, 3186]\n", want);
    assert_string_equal(out, want2);
    free(out);
    tern_tokenizer_free(t);
    /* a line that is not a JSON string, or a document with an escaped NUL (cJSON would cut it
     * there): exit 1 naming file and line */
    static const char *const bad_lines[] = {"\"ok\"\n{\"a\": 1}\n", "\"ok\"\n\"a\\u0000b\"\n", "\"ok\"\n\"open\n"};
    for (size_t k = 0; k < sizeof bad_lines / sizeof *bad_lines; k++) {
        f = fopen(file, "wb");
        fputs(bad_lines[k], f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f %s --jsonl 2>&1 >/dev/null", test_tern_bin(), v, file);
        out = run(cmd, &code);
        assert_int_equal(code, 1);
        assert_non_null(strstr(out, "docs.jsonl:2: "));
        free(out);
    }

    /* --time: the counts of the text on stderr, nothing on stdout */
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p 'Hello world' --no-bos --time --cpu-clock --repeat 3 2>&1",
             test_tern_bin(), v);
    out = run(cmd, &code);
    assert_int_equal(code, 0);
    assert_non_null(strstr(out, "11 bytes -> 2 tokens (thread CPU time); cold "));
    assert_non_null(strstr(out, "warm median of 2 "));
    free(out);
    static const char *const bad_flags[] = {"--repeat 3", "--cpu-clock", "--time --repeat 0", "--time --lines",
                                            "--jsonl"};
    for (size_t k = 0; k < sizeof bad_flags / sizeof *bad_flags; k++) {
        snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p x %s 2>/dev/null", test_tern_bin(), v, bad_flags[k]);
        free(run(cmd, &code));
        assert_int_equal(code, 2);
    }

    /* detokenize writes exactly the text (SPM leading space removed, no newline added) */
    snprintf(cmd, sizeof cmd, "%s detokenize -m %s --tokens 1,15043,3186", test_tern_bin(), v);
    out = run(cmd, &code);
    assert_int_equal(code, 0);
    assert_string_equal(out, "Hello world");
    free(out);

    /* errors: usage -> 2, runtime -> 1 */
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s 2>/dev/null", test_tern_bin(), v);
    free(run(cmd, &code));
    assert_int_equal(code, 2);
    snprintf(cmd, sizeof cmd, "%s tokenize -m /nonexistent.gguf -p x 2>/dev/null", test_tern_bin());
    free(run(cmd, &code));
    assert_int_equal(code, 1);
    snprintf(cmd, sizeof cmd, "%s detokenize -m %s --tokens 1,x 2>/dev/null", test_tern_bin(), v);
    free(run(cmd, &code));
    assert_int_equal(code, 2);
    snprintf(cmd, sizeof cmd, "%s detokenize -m %s --tokens 99999 2>/dev/null", test_tern_bin(), v);
    free(run(cmd, &code));
    assert_int_equal(code, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tokenize_cli)};
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
