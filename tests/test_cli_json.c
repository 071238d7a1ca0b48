/* test_cli_json.c — the tern CLI's machine-readable output and its error paths: a probe whose
 * decode is refused (a token outside the vocabulary) reports it and frees its context (under the
 * ASan build any leak report fails the test).
 *
 * Commands run through posix_spawn with an argument vector, not a shell, so arguments reach
 * tern byte for byte. */
#include "test_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL "fixtures/models/qwen2-tiny-q8_0.gguf"

extern char **environ;

static const char *args0(const char **argv) { return argv[1] ? argv[1] : ""; }

/* Run tern with args (NULL-terminated, without argv[0]); *out gets stdout, *err stderr (both
 * malloc'ed, NUL-terminated). Returns the exit code (128 + signal if killed). */
static int run_tern(const char *const *args, char **out, char **err)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = test_tern_bin();
    while (*args && n < 63) argv[n++] = *args++;
    argv[n] = NULL;
    char po[1200], pe[1200];
    snprintf(po, sizeof po, "%s/stdout.txt", test_tmpdir());
    snprintf(pe, sizeof pe, "%s/stderr.txt", test_tmpdir());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *out = test_read_file(po, NULL);
    *err = test_read_file(pe, NULL);
    assert_non_null(*out);
    assert_non_null(*err);
    /* under the ASan build a leak or memory error is reported here (a leak keeps the exit code:
     * ASan's is 1, the same as tern's own failure) */
    if (strstr(*err, "Sanitizer")) fail_msg("tern %s: sanitizer report:\n%s", args0(argv), *err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A token outside the vocabulary: tern_decode refuses it after the context exists; the CLI must
 * say so, exit 1, and free the context (under the ASan build run_tern fails on the leak report). */
static void test_probe_bad_token(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, MODEL);
    char model[4096];
    snprintf(model, sizeof model, "%s", path);
    char *out, *err;
    int rc = run_tern((const char *const[]){"probe", "-m", model, "--tokens", "1,99999999", NULL},
                      &out, &err);
    print_message("exit %d: %s", rc, err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "outside the vocabulary"));
    assert_string_equal(out, "");
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_bad_token),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
