/* test_support.c — fixture paths and small file helpers for the tests (see test_support.h). */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/mman.h>
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

char *test_shared_path_copy(const char *rel)
{
    const char *p = test_shared_path(rel);
    return p ? strdup(p) : NULL;
}

const char *test_real_model(const char *name)
{
    static char path[4096];
    char dir[2048], card[4096];
    const char *env = getenv("TERN_MODELS_DIR"), *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/tern/models", xdg);
    else snprintf(dir, sizeof dir, "%s/.local/share/tern/models", home ? home : ".");
    snprintf(card, sizeof card, "%s/%s.json", dir, name);
    char *text = test_read_file(card, NULL);
    if (!text) return NULL;
    /* the card is the install script's JSON: "file": "<name>.gguf" (no slash, no escapes) */
    const char *f = strstr(text, "\"file\"");
    const char *q = f ? strchr(f + 6, '"') : NULL;
    const char *e = q ? strchr(q + 1, '"') : NULL;
    struct stat st;
    if (!e || snprintf(path, sizeof path, "%s/%.*s", dir, (int)(e - q - 1), q + 1) >= (int)sizeof path ||
        stat(path, &st) != 0) {
        free(text);
        return NULL;
    }
    free(text);
    return path;
}

const char *test_tern_bin(void) { return TERN_BIN_DIR "/tern"; }
const char *test_source_dir(void) { return TERN_SOURCE_DIR; }
bool test_sanitized(void) { return getenv("TERN_SANITIZED") != NULL; }

/* The mapping is [base, base + len): data pages, then one PROT_NONE page. The mapping's base and
 * length sit in a header just below the returned pointer (at least 16 bytes of the data pages are
 * kept for it), so test_guarded_free needs only the pointer. */
struct guard_header {
    void *base;
    size_t len;
};

void *test_guarded_alloc(size_t n, size_t align)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (align == 0 || (align & (align - 1)) || align > page) fail_msg("test_guarded_alloc: align %zu", align);
    const size_t data = (n + sizeof(struct guard_header) + align + page - 1) / page * page;
    const size_t len = data + page;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) fail_msg("test_guarded_alloc: mmap of %zu bytes failed", len);
    if (mprotect(base + data, page, PROT_NONE) != 0) fail_msg("test_guarded_alloc: mprotect failed");
    char *p = (char *)(((uintptr_t)(base + data - n)) & ~(uintptr_t)(align - 1));
    struct guard_header h = {base, len};
    memcpy(p - sizeof h, &h, sizeof h);
    return p;
}

void test_guarded_free(void *p)
{
    if (!p) return;
    struct guard_header h;
    memcpy(&h, (char *)p - sizeof h, sizeof h);
    munmap(h.base, h.len);
}

static char tmpdir_made[256];

static const char *test_tmpdir_if_made(void) { return tmpdir_made[0] ? tmpdir_made : NULL; }

const char *test_tmpdir(void)
{
    char *dir = tmpdir_made;
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof tmpdir_made, "%s/tern-test-XXXXXX", base && *base ? base : "/tmp");
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

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* A passing test leaves nothing behind (CI machines and long sessions ran into thousands of
 * stale directories); a failing one keeps its files for the reader, as does TERN_KEEP_TEST_TMP. */
static void cleanup_tmpdir(int n_failed)
{
    const char *dir = test_tmpdir_if_made();
    if (!dir) return;
    const char *keep = getenv("TERN_KEEP_TEST_TMP");
    if (n_failed || (keep && *keep && strcmp(keep, "0"))) {
        fprintf(stderr, "test files kept in %s\n", dir);
        return;
    }
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int test_exit_status(int n_failed)
{
    cleanup_tmpdir(n_failed);
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

double test_hparam(const struct tern_model *m, const char *name)
{
    double v = 0;
    if (!tern_model_hparam(m, name, &v)) fail_msg("the model has no hyperparameter \"%s\"", name);
    return v;
}
