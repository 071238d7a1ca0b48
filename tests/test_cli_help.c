/* test_cli_help.c — the option tables as the built tern uses them: docs/cli-options.md is exactly
 * what `tern help --markdown` prints (so the reference cannot drift from the parsers), every
 * option that reference lists appears in `tern CMD --help`, and every one is known to the
 * command's parser (given without its value it is "needs a value", never "unknown option"), so
 * a table that is printed but not the one the command parses with is caught. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *run_out(const char *args, int *code)
{
    static char buf[1 << 20];
    char cmd[4096];
    /* no installed models: run and chat without -m would otherwise get the default adapter's
     * "-m BASE --lora ADAPTER" appended, and a value option would take "-m" for its value */
    snprintf(cmd, sizeof cmd, "TERN_MODELS_DIR=%s/no-models %s %s </dev/null 2>&1", test_tmpdir(),
             test_tern_bin(), args);
    *code = test_run_cmd(cmd, buf, sizeof buf);
    return buf;
}

static void test_docs_current(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/cli-options.md", test_source_dir());
    char *doc = test_read_file(path, NULL);
    assert_non_null(doc);
    int code;
    char cmd[4096];
    static char md[1 << 20];
    snprintf(cmd, sizeof cmd, "%s help --markdown", test_tern_bin());
    code = test_run_cmd(cmd, md, sizeof md);
    assert_int_equal(code, 0);
    if (strcmp(doc, md) != 0) {
        int line = 1;
        const char *a = doc, *b = md;
        while (*a && *a == *b) line += *a++ == '\n', b++;
        fail_msg("docs/cli-options.md differs from `tern help --markdown` at line %d:\n  doc:   %.80s\n"
                 "  built: %.80s\nregenerate it: build/bin/tern help --markdown > docs/cli-options.md",
                 line, a, b);
    }
    free(doc);
}

struct opt {
    char cmd[64], name[64];
    bool value;
};

/* Every option of the reference: the names in the first cell of each table row under a
 * "## tern CMD" heading, and whether its value cell is filled. */
static int read_options(const char *md, struct opt *out, int cap)
{
    int n = 0;
    char cmd[64] = "";
    for (const char *line = md; *line;) {
        const size_t len = strcspn(line, "\n");
        if (!strncmp(line, "## tern ", 8)) snprintf(cmd, sizeof cmd, "%.*s", (int)(len - 8), line + 8);
        if (cmd[0] && !strncmp(line, "| `-", 4)) {
            const char *end = strstr(line, " | ");
            assert_non_null(end);
            const bool value = strncmp(end, " |  | ", 6) != 0;
            for (const char *p = line; p < end; p++) {
                if (*p != '`' || p[1] != '-') continue;
                const char *q = strchr(p + 1, '`');
                assert_true(n < cap);
                snprintf(out[n].cmd, sizeof out[n].cmd, "%s", cmd);
                snprintf(out[n].name, sizeof out[n].name, "%.*s", (int)(q - p - 1), p + 1);
                out[n++].value = value;
                p = q;
            }
        }
        line += len + (line[len] == '\n');
    }
    return n;
}

static void test_every_option_wired(void **state)
{
    (void)state;
    int code;
    char *md = strdup(run_out("help --markdown", &code));
    assert_int_equal(code, 0);
    static struct opt opts[2048];
    const int n = read_options(md, opts, 2048);
    print_message("%d options in the reference\n", n);
    assert_true(n > 50);
    char args[512], help_of[64] = "";
    static char help[1 << 20];
    for (int i = 0; i < n; i++) {
        const struct opt *o = &opts[i];
        if (strcmp(help_of, o->cmd)) {
            snprintf(args, sizeof args, "%.60s --help", o->cmd);
            snprintf(help, sizeof help, "%s", run_out(args, &code));
            assert_int_equal(code, 0);
            snprintf(help_of, sizeof help_of, "%.60s", o->cmd);
        }
        char needle[80];
        snprintf(needle, sizeof needle, " %s", o->name);
        if (!strstr(help, needle)) fail_msg("tern %s --help does not list %s", o->cmd, o->name);
        /* a value option without its value, a flag before an unknown option: either way the
         * parser must know the option itself */
        snprintf(args, sizeof args, o->value ? "%.60s %.60s" : "%.60s %.60s --zz-not-an-option", o->cmd, o->name);
        const char *out = run_out(args, &code);
        char unknown[96];
        snprintf(unknown, sizeof unknown, "unknown option '%s'", o->name);
        if (strstr(out, unknown) || code == 0 || code >= 128)
            fail_msg("tern %s -> %d: %s", args, code, out);
        if (o->value && !strstr(out, "needs a value")) fail_msg("tern %s -> %d: %s", args, code, out);
    }
    free(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_current),
        cmocka_unit_test(test_every_option_wired),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
