/* test_side_by_side.c — bench/side_by_side.sh with two stand-in engines (small shell scripts
 * that print llama-bench-style JSON with known samples and log their calls): the table holds the
 * medians and ratios those samples give, the engine order flips every round, a model one engine
 * fails on shows that engine's error in its cells, and bad arguments exit 2 with a message.
 * Real engines are not needed (and speed is never asserted). Skips when bash or jq is absent. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char dir[1024], script[1100];
static bool have_tools;

#define NEED_TOOLS()                                                                           \
    do {                                                                                       \
        if (!have_tools) {                                                                     \
            TEST_SKIP("bash or jq not installed (scripts/install-deps.sh has jq)\n");         \
        }                                                                                      \
    } while (0)

static void write_exec(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

/* A stand-in engine: logs "NAME" to $DIR/calls, fails on models whose name contains "bad"
 * (tern only), and prints one pp and one tg result. tern's pp samples go 200, 300, 250 over
 * the rounds (median 250), its tg samples are 20; llama's are always 100 and 10. */
static const char fake_fmt[] =
    "#!/bin/bash\n"
    "name=%s; dir=%s; p=0; n=0; t=1; m=\n"
    "if [ \"$1\" = version ]; then echo fake; exit 0; fi\n"
    "while [ $# -gt 0 ]; do case $1 in -p) p=$2; shift;; -n) n=$2; shift;; -t) t=$2; shift;;\n"
    "  -m) m=$2; shift;; esac; shift; done\n"
    "echo $name >> $dir/calls\n"
    "if [ $name = tern ] && [[ $m == *bad* ]]; then echo \"tern bench: unsupported: tensor type Q9_9\" >&2; exit 1; fi\n"
    "k=$(grep -c \"^$name$\" $dir/calls)\n"
    "if [ $name = tern ]; then pp=(0 200 300 250 250 250 250 250 250); ps=${pp[$k]}; ts=20;\n"
    "else ps=100; ts=10; fi\n"
    "echo \"[{\\\"model_size\\\": 2097152, \\\"n_threads\\\": $t, \\\"n_prompt\\\": $p, \\\"n_gen\\\": 0, \\\"samples_ts\\\": [$ps]},\"\n"
    "echo \" {\\\"model_size\\\": 2097152, \\\"n_threads\\\": $t, \\\"n_prompt\\\": 0, \\\"n_gen\\\": $n, \\\"samples_ts\\\": [$ts]}]\"\n";

static int setup(void **state)
{
    (void)state;
    have_tools = system("command -v jq >/dev/null 2>&1 && command -v bash >/dev/null 2>&1") == 0;
    if (!have_tools) return 0;
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(script, sizeof script, "%s/bench/side_by_side.sh", test_source_dir());
    char path[1024 + 32], text[8192];
    snprintf(text, sizeof text, fake_fmt, "tern", dir);
    snprintf(path, sizeof path, "%s/fake-tern", dir);
    write_exec(path, text);
    snprintf(text, sizeof text, fake_fmt, "llama", dir);
    snprintf(path, sizeof path, "%s/fake-llama", dir);
    write_exec(path, text);
    snprintf(path, sizeof path, "%s/good.gguf", dir);
    write_exec(path, "x");
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    write_exec(path, "x");
    return 0;
}

static void test_table(void **state)
{
    (void)state;
    NEED_TOOLS();
    static char cmd[16384], out[16384];
    snprintf(cmd, sizeof cmd, "rm -f %s/calls; bash %s --llama-bench %s/fake-llama --tern %s/fake-tern "
             "--no-roofline --quiet-wait 0 --retries 0 --max-other 1000 -r 3 -t 2 "
             "%s/good.gguf 2>/dev/null", dir, script, dir, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    print_message("%s", out);
    assert_non_null(strstr(out, "| pp512 tern | pp512 llama.cpp | ratio | tg128 tern | tg128 llama.cpp | ratio |"));
    assert_non_null(strstr(out, "| good | 2.0 MiB | 2 | 250.0 (200.0-300.0) | 100.0 (100.0-100.0) | 2.50x |"
                                " 20.0 (20.0-20.0) | 10.0 (10.0-10.0) | 2.00x |"));
    char calls[4096];
    snprintf(cmd, sizeof cmd, "tr '\\n' ' ' < %s/calls", dir);
    assert_int_equal(test_run_cmd(cmd, calls, sizeof calls), 0);
    assert_string_equal(calls, "tern llama llama tern tern llama ");
}

static void test_failure_and_threads(void **state)
{
    (void)state;
    NEED_TOOLS();
    static char cmd[16384], out[16384];
    snprintf(cmd, sizeof cmd, "rm -f %s/calls; bash %s --llama-bench %s/fake-llama --tern %s/fake-tern "
             "--no-roofline --quiet-wait 0 --retries 0 --max-other 1000 -r 1 -t 2,1 -n 0 "
             "%s/bad.gguf 2>/dev/null", dir, script, dir, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    print_message("%s", out);
    assert_null(strstr(out, "tg0"));
    assert_non_null(strstr(out, "| bad | 2.0 MiB | 2 | failed: tern bench: unsupported: tensor type Q9_9 | "
                                "100.0 (100.0-100.0) | - |"));
    assert_non_null(strstr(out, "| bad | 2.0 MiB | 1 | failed:"));
}

static void test_bad_arguments(void **state)
{
    (void)state;
    NEED_TOOLS();
    static char cmd[16384], out[16384];
    snprintf(cmd, sizeof cmd, "bash %s %s/good.gguf 2>&1", script, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--llama-bench PATH is required"));
    snprintf(cmd, sizeof cmd, "bash %s --llama-bench %s/fake-llama --tern %s/fake-tern -t 2,x %s/good.gguf 2>&1",
             script, dir, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "-t '2,x'"));
    snprintf(cmd, sizeof cmd, "bash %s --llama-bench %s/fake-llama --tern %s/fake-tern %s/absent.gguf 2>&1",
             script, dir, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "absent.gguf' is not a readable file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_failure_and_threads),
        cmocka_unit_test(test_bad_arguments),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
