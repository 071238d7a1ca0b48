/* test_support.c — fixture paths and small file helpers for the tests (see test_support.h). */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *test_shared_path(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("TERN_SHARED");
    if (!root || !*root) root = TERN_SHARED_DIR;
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    if (stat(buf, &st) != 0) return NULL;
    return buf;
}

const char *test_tern_bin(void) { return TERN_BIN_DIR "/tern"; }
const char *test_source_dir(void) { return TERN_SOURCE_DIR; }

const char *test_tmpdir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tern-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            abort();
        }
    }
    return dir;
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

static int n_skipped;

void test_note_skip(void) { n_skipped++; }

int test_exit_status(int n_failed)
{
    if (n_failed) return n_failed;
    if (n_skipped) {
        fprintf(stderr, "%d test(s) skipped: reported to ctest as skipped, not passed\n", n_skipped);
        return TEST_EXIT_SKIPPED;
    }
    return 0;
}

int test_run_cmd(const char *cmd, char *buf, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p) fail_msg("popen failed: %s", cmd);
    size_t n = fread(buf, 1, cap - 1, p);
    buf[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
