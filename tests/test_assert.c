/* test_assert.c — the invariant checks of src/util/check.h (docs/assertions.md): a violated
 * TERN_ASSERT prints file:line, the condition and its message and aborts (SIGABRT), in a child
 * process so the test survives it; TERN_NEVER / TERN_ALWAYS abort only on the impossible case
 * and otherwise return their condition; compiled out, the conditions are not evaluated (yet
 * still compiled) and NEVER / ALWAYS fall back to the defensive branch. The last case breaks a
 * precondition inside the library itself (kern_quantize_act_scalar with a partial block), which
 * proves the library of this build carries its checks: `make test` runs with them. */

/* What the build asked for, before this file changes it for the compiled-out part. */
#ifdef TERN_ASSERTS
#define BUILD_HAS_ASSERTS 1
#else
#define BUILD_HAS_ASSERTS 0
#endif

/* ---------------------------------------------------------------- compiled out */
#undef TERN_ASSERTS
#undef TERN_CHECKS
#include "util/check.h"

static int evaluated;
static int touch(void) { return ++evaluated; }

static int off_asserts(void)
{
    TERN_ASSERT(touch() < 0, "not evaluated when compiled out");
    TERN_ASSERT(touch() < 0);
    TERN_ASSERT_SLOW(touch() < 0);
    return evaluated;
}
static int off_never(int x) { return TERN_NEVER(x > 0) ? 1 : 0; }
static int off_always(int x) { return TERN_ALWAYS(x > 0) ? 1 : 0; }

/* ---------------------------------------------------------------- compiled in */
#undef TERN_UTIL_CHECK_H
#undef TERN_ASSERT_PICK_
#undef TERN_ASSERT
#undef TERN_ASSERT1_
#undef TERN_ASSERT2_
#undef TERN_ALWAYS
#undef TERN_NEVER
#undef TERN_ASSERT_SLOW
#define TERN_ASSERTS 1
#include "util/check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "test_support.h"

/* Run fn in a child whose stderr is captured into out[0..cap); returns the wait status. */
static int run_child(void (*fn)(void), char *out, size_t cap)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fn();
        _exit(0); /* the check did not fire */
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd[0], out + n, cap - 1 - n)) > 0) n += (size_t)k;
    out[n] = '\0';
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void expect_abort(int status, const char *out, const char *want)
{
    if (!strstr(out, want)) fail_msg("expected \"%s\" on stderr, got \"%s\"", want, out);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(out, "This is a bug in tern"));
}

static volatile int zero = 0;

/* Each violation and the line it sits on, on one line: the message must name that line. */
static void violate_assert(void) { TERN_ASSERT(zero == 1, "deliberate violation"); } enum { ASSERT_LINE = __LINE__ };
static void violate_assert1(void) { TERN_ASSERT(zero + 1 == 2); } enum { ASSERT1_LINE = __LINE__ };
static void violate_never(void) { if (TERN_NEVER(zero == 0)) _exit(3); } enum { NEVER_LINE = __LINE__ };
static void violate_always(void) { if (!TERN_ALWAYS(zero == 2)) _exit(3); } enum { ALWAYS_LINE = __LINE__ };

static void hold_checks(void)
{
    /* true conditions pass silently, and ALWAYS / NEVER hand back the condition */
    TERN_ASSERT(zero == 0, "holds");
    TERN_ASSERT(zero == 0);
    if (!TERN_ALWAYS(zero == 0)) _exit(4);
    if (TERN_NEVER(zero == 1)) _exit(5);
}

/* A precondition of the library's own code: activation rows are whole Q8_0 blocks of 32. */
static void violate_library(void)
{
    float x[33] = {0};
    unsigned char y[64];
    kern_quantize_act_scalar(TERN_TYPE_Q8_0, x, y, 33);
}

static void test_assert_aborts_with_message(void **state)
{
    (void)state;
    char out[1024], want[256];
    int status = run_child(violate_assert, out, sizeof out);
    snprintf(want, sizeof want, "tests/test_assert.c:%d: tern internal check failed: zero == 1 (deliberate violation)\n",
             (int)ASSERT_LINE);
    expect_abort(status, out, want);
    /* the one-argument form: the condition alone */
    status = run_child(violate_assert1, out, sizeof out);
    snprintf(want, sizeof want, "tests/test_assert.c:%d: tern internal check failed: zero + 1 == 2\n", (int)ASSERT1_LINE);
    expect_abort(status, out, want);
}

static void test_never_always(void **state)
{
    (void)state;
    char out[1024], want[256];
    int status = run_child(violate_never, out, sizeof out);
    snprintf(want, sizeof want, "tests/test_assert.c:%d: tern internal check failed: !(zero == 0) (NEVER)", (int)NEVER_LINE);
    expect_abort(status, out, want);
    status = run_child(violate_always, out, sizeof out);
    snprintf(want, sizeof want, "tests/test_assert.c:%d: tern internal check failed: zero == 2 (ALWAYS)", (int)ALWAYS_LINE);
    expect_abort(status, out, want);
    /* conditions that hold: no output, a normal exit */
    status = run_child(hold_checks, out, sizeof out);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(out, "");
}

static void test_compiled_out(void **state)
{
    (void)state;
    /* TERN_ASSERT / TERN_ASSERT_SLOW: not evaluated at all (sizeof only) */
    evaluated = 0;
    assert_int_equal(off_asserts(), 0);
    /* NEVER / ALWAYS: evaluated, the defensive branch taken, no abort */
    assert_int_equal(off_never(1), 1);
    assert_int_equal(off_never(0), 0);
    assert_int_equal(off_always(0), 0);
    assert_int_equal(off_always(1), 1);
}

static void test_library_checks(void **state)
{
    (void)state;
    if (!BUILD_HAS_ASSERTS) {
        print_message("SKIP: this build has -DTERN_ASSERTS=OFF: the library carries no checks\n");
        return;
    }
    char out[1024];
    const int status = run_child(violate_library, out, sizeof out);
    expect_abort(status, out, "src/kernels/kern_scalar.c:");
    assert_non_null(strstr(out, "tern internal check failed: tr && k % tr->block_size == 0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assert_aborts_with_message),
        cmocka_unit_test(test_never_always),
        cmocka_unit_test(test_compiled_out),
        cmocka_unit_test(test_library_checks),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
