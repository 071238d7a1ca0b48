/* test_corpus_data.c — the corpus room's data files (data/corpus/words.txt, kinds.txt,
 * templates.txt) against their schema, checked by the tool that turns them into C at build time
 * (tools/corpus_tables; src/corpus/corpus_tables.h says why they are compiled in):
 *   - the tree's files pass, and the tables compiled into libtern hold as many records as the
 *     files (the build step ran on these files)
 *   - broken copies fail, each error naming file:line and what was wrong: a value outside an
 *     enum, an unknown field (and so a missing required one, at the record's first line), a key
 *     defined twice, a template naming a kind that does not exist, a value with an edge space, a
 *     stray continuation line, invalid UTF-8, a flag given twice
 * The records' meaning (generators exist, enums have values, verb phrases have three forms) is
 * test_corpus's test_tables, on the compiled tables. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/corpus.h"
#include "corpus/corpus_tables.h"

static char out[1 << 16];

static const char *tool(void)
{
    static char p[600];
    snprintf(p, sizeof p, "%s", test_tern_bin());
    char *slash = strrchr(p, '/');
    snprintf(slash + 1, sizeof p - (size_t)(slash + 1 - p), "corpus_tables");
    return p;
}

static int check_dir(const char *dir)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "'%s' --check '%s' 2>&1", tool(), dir);
    return test_run_cmd(cmd, out, sizeof out);
}

static int count_records(const char *file, const char *opener1, const char *opener2)
{
    char p[700];
    snprintf(p, sizeof p, "%s/data/corpus/%s", test_source_dir(), file);
    char *text = test_read_file(p, NULL);
    assert_non_null(text);
    int n = 0;
    for (char *l = text; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        size_t a = strlen(opener1), b = opener2 ? strlen(opener2) : 0;
        if ((!strncmp(l, opener1, a) && l[a] == ' ') || (opener2 && !strncmp(l, opener2, b) && l[b] == ' ')) n++;
    }
    free(text);
    return n;
}

static void test_tree_files_pass(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/data/corpus", test_source_dir());
    if (check_dir(dir)) fail_msg("%s", out);
    assert_non_null(strstr(out, ": ok"));
    assert_int_equal(corpus_n_word_lists, count_records("words.txt", "list", NULL));
    assert_int_equal(corpus_n_kinds(), count_records("kinds.txt", "kind", "result"));
    assert_int_equal(corpus_n_tmpls(), count_records("templates.txt", "op", NULL));
}

/* A copy of the tree's files in which one file's line `find` (the first equal to it) becomes
 * `repl`; returns that line's number, or fails. */
static int broken_copy(const char *dir, const char *file, const char *find, const char *repl)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s'/data/corpus/*.txt '%s'", dir, dir,
             test_source_dir(), dir);
    assert_int_equal(system(cmd), 0);
    char p[1000];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    size_t n;
    char *text = test_read_file(p, &n);
    assert_non_null(text);
    int line = 1;
    char *l = text;
    size_t flen = strlen(find);
    while (l && !(!strncmp(l, find, flen) && (l[flen] == '\n' || !l[flen]))) {
        l = strchr(l, '\n');
        if (l) l++, line++;
    }
    if (!l) fail_msg("%s has no line '%s'", file, find);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fwrite(text, 1, (size_t)(l - text), f);
    fputs(repl, f);
    fputs(l + flen, f);
    fclose(f);
    free(text);
    return line;
}

static void test_broken_files_named(void **state)
{
    (void)state;
    static const struct {
        const char *file, *find, *repl, *says;
        int extra_line; /* a second error expected this many lines before the first (0: none) */
        const char *extra;
    } cases[] = {
        {"kinds.txt", "type string", "type text", "'type' is one of {string integer number boolean array object}, not 'text'", 0, NULL},
        {"kinds.txt", "label city", "lable city", "unknown field 'lable' in kind 'city'", 6, "kind 'city' has no 'label'"},
        {"words.txt", "list city", "list first_name", "'first_name' defined twice (first at line", 0, NULL},
        {"templates.txt", "params city! forecast_date units", "params city! forecast_day units",
         "'params' names kind 'forecast_day', which kinds.txt does not define", 0, NULL},
        {"templates.txt", "np the air quality", "np the air quality ", "'np' starts or ends with a space", 0, NULL},
        {"words.txt", "list region", "+ stray", "a continuation line without a field before it", 0, NULL},
        {"words.txt", "list city", "list ci\xff", "invalid UTF-8 in the line", 0, NULL},
        {"kinds.txt", "flags first", "flags first first", "'flags': flag 'first' twice", 0, NULL},
        {"templates.txt", "op get", "op fetch", "'op' is one of {get list create update delete send control compute}", 0, NULL},
    };
    char dir[700];
    snprintf(dir, sizeof dir, "%s/broken", test_tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int line = broken_copy(dir, cases[i].file, cases[i].find, cases[i].repl);
        int st = check_dir(dir);
        print_message("%s line %d -> %s", cases[i].file, line, out);
        if (st != 1) fail_msg("case %zu: exit %d, expected 1: %s", i, st, out);
        char want[1200];
        snprintf(want, sizeof want, "%s/%s:%d: %s", dir, cases[i].file, line, cases[i].says);
        if (!strstr(out, want)) fail_msg("case %zu: no \"%s\" in:\n%s", i, want, out);
        if (cases[i].extra) {
            snprintf(want, sizeof want, "%s/%s:%d: %s", dir, cases[i].file, line - cases[i].extra_line, cases[i].extra);
            if (!strstr(out, want)) fail_msg("case %zu: no \"%s\" in:\n%s", i, want, out);
        }
        assert_non_null(strstr(out, "corpus_tables: "));
    }
    /* a missing file is named too */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -f '%s/kinds.txt'", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(check_dir(dir), 1);
    char want[800];
    snprintf(want, sizeof want, "%s/kinds.txt:0: cannot open", dir);
    assert_non_null(strstr(out, want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_files_pass),
        cmocka_unit_test(test_broken_files_named),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
