/* test_cli_options.c — the option-table parser of the tern CLI (tools/tern/cli_options.h) on a
 * table of its own: every value kind, ranges and their messages, --opt=value, `--`, positionals,
 * unknown options, missing values, repeated options, environment variables, shared tables
 * included at an offset with per-command notes, and what --help and the markdown reference
 * print from the table. The messages are compared with the text the CLI has always printed
 * (tests/test_cli.c checks the same wording through the binary). */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_options.h"

struct sub_opts {
    long long depth;
    const char *tag;
};

struct t_opts {
    bool flag, toggle, seen_level;
    int mode, level;
    long long big;
    float ratio;
    double precise;
    const char *name, *path, *in, *out;
    const char *items[3];
    int n_items;
    const char *rest[4];
    int n_rest;
    int calls;
    char last_call[32];
    struct sub_opts sub;
};

static const struct cli_choice modes[] = {{"fast", 1}, {"slow", 2}, {"exact", 3}, {NULL, 0}};

static int take_call(const char *cmd, const struct cli_option *o, const char *val, void *opts)
{
    (void)o;
    struct t_opts *t = opts;
    if (!strcmp(val, "bad")) return cli_usage_error(cmd, "--call: 'bad' refused"), -1;
    t->calls++;
    snprintf(t->last_call, sizeof t->last_call, "%s", val);
    return 0;
}

static const struct cli_option sub_table[] = {
    {"-d", "--depth", CLI_INT, "N", CLI_AT(struct sub_opts, depth), CLI_RANGE(0, 100), .group = "Shared",
     .help = "depth"},
    {NULL, "--tag", CLI_STRING, "T", CLI_AT(struct sub_opts, tag), .help = "a tag"},
    {0},
};

#define O struct t_opts
static const struct cli_option t_table[] = {
    {"-f", "--flag", CLI_FLAG, NULL, CLI_AT(O, flag), .help = "a flag"},
    {NULL, "--toggle", CLI_BOOL, "B", CLI_AT(O, toggle), .help = "a bool"},
    {NULL, "--mode", CLI_ENUM, "M", CLI_AT(O, mode), .choices = modes, .help = "the mode"},
    {"-l", "--level", CLI_INT, "N", CLI_AT(O, level), CLI_RANGE(1, 512), CLI_GIVEN(O, seen_level),
     .env = "TEST_CLI_LEVEL", .help = "a level"},
    {NULL, "--big", CLI_INT, "N", CLI_AT(O, big), CLI_RANGE(0, INT64_MAX), .help = "a big number"},
    {NULL, "--ratio", CLI_DOUBLE, "R", CLI_AT(O, ratio), CLI_FRANGE(0, 1), .help = "a ratio"},
    {NULL, "--precise", CLI_DOUBLE, "X", CLI_AT(O, precise), .help = "any number"},
    {"-n", "--name", CLI_STRING, "NAME", CLI_AT(O, name), .def = "nobody", .help = "a name"},
    {NULL, "--path", CLI_PATH, "FILE", CLI_AT(O, path), .help = "a path"},
    {NULL, "--item", CLI_LIST, "X", CLI_AT(O, items), CLI_COUNT(O, n_items, 3), .help = "an item"},
    {NULL, "--call", CLI_CALL, "V", .call = take_call, .flags = CLI_REPEAT, .help = "a callback"},
    {.meta = "IN", .kind = CLI_PATH, CLI_AT(O, in), .flags = CLI_REQUIRED, .help = "input"},
    {.meta = "OUT", .kind = CLI_STRING, CLI_AT(O, out), .help = "output"},
    {.kind = CLI_INCLUDE, .sub = sub_table, CLI_AT(O, sub),
     .notes = (const struct cli_note[]){{"--tag", "untagged", "the including command's tag"}, {NULL}}},
    {0},
};
#undef O

static void t_init(void *p)
{
    *(struct t_opts *)p = (struct t_opts){.level = 4, .ratio = 0.5f, .mode = 2, .sub = {.depth = 7}};
}

static const struct cli_command t_cmd = {"probe-opts", "[options] IN [OUT]", "About text.\n", t_table,
                                         CLI_OPTS(struct t_opts, t_init), "Epilog text.\n"};

static char g_err[8192];

/* cli_parse on the words of line (split at spaces; no quoting), stderr captured in g_err. */
static int parse(const char *line, struct t_opts *o)
{
    static char buf[1024];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "probe-opts";
    for (char *w = strtok(buf, " "); w && argc < 63; w = strtok(NULL, " ")) argv[argc++] = w;
    argv[argc] = NULL;
    t_init(o);
    char path[4096];
    snprintf(path, sizeof path, "%s/stderr.txt", test_tmpdir());
    fflush(stderr);
    const int saved = dup(2);
    FILE *f = fopen(path, "w+");
    assert_non_null(f);
    dup2(fileno(f), 2);
    const int rc = cli_parse(&t_cmd, argc, argv, o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char *text = test_read_file(path, NULL);
    snprintf(g_err, sizeof g_err, "%s", text ? text : "");
    free(text);
    return rc;
}

static void expect_error(const char *line, const char *needle)
{
    struct t_opts o;
    const int rc = parse(line, &o);
    print_message("%s -> %d: %s", line, rc, g_err);
    assert_int_equal(rc, CLI_EXIT_USAGE);
    if (!strstr(g_err, needle)) fail_msg("'%s': expected \"%s\" in \"%s\"", line, needle, g_err);
    /* every usage error names the command and points at its help */
    assert_non_null(strstr(g_err, "tern probe-opts: "));
    assert_non_null(strstr(g_err, "(see `tern probe-opts --help`)"));
}

static void test_kinds(void **state)
{
    (void)state;
    struct t_opts o;
    assert_int_equal(parse("-f --toggle on --mode exact -l 512 --big 9223372036854775807 --ratio 0.25 "
                           "--precise -1e300 -n ann --path p.txt --item a --item b --call x --call y in.gguf out",
                           &o), CLI_PARSED);
    assert_true(o.flag);
    assert_true(o.toggle);
    assert_int_equal(o.mode, 3);
    assert_int_equal(o.level, 512);
    assert_true(o.seen_level);
    assert_true(o.big == INT64_MAX);
    assert_true(o.ratio == 0.25f);
    assert_true(o.precise == -1e300);
    assert_string_equal(o.name, "ann");
    assert_string_equal(o.path, "p.txt");
    assert_int_equal(o.n_items, 2);
    assert_string_equal(o.items[1], "b");
    assert_int_equal(o.calls, 2);
    assert_string_equal(o.last_call, "y");
    assert_string_equal(o.in, "in.gguf");
    assert_string_equal(o.out, "out");
    /* defaults stay where nothing was given */
    assert_int_equal(parse("in", &o), CLI_PARSED);
    assert_false(o.flag);
    assert_int_equal(o.level, 4);
    assert_false(o.seen_level);
    assert_int_equal(o.mode, 2);
    assert_null(o.out);
    assert_int_equal(o.sub.depth, 7);
    /* bool spellings */
    static const char *yes[] = {"true", "on", "yes", "1"}, *no[] = {"false", "off", "no", "0"};
    char line[64];
    for (int i = 0; i < 4; i++) {
        snprintf(line, sizeof line, "--toggle %s in", yes[i]);
        assert_int_equal(parse(line, &o), CLI_PARSED);
        assert_true(o.toggle);
        snprintf(line, sizeof line, "--toggle %s in", no[i]);
        assert_int_equal(parse(line, &o), CLI_PARSED);
        assert_false(o.toggle);
    }
}

static void test_ranges_and_values(void **state)
{
    (void)state;
    expect_error("-l 0 in", "-l: 0 is out of range 1..512");
    expect_error("--level 513 in", "--level: 513 is out of range 1..512"); /* named as typed */
    expect_error("--level abc in", "--level: 'abc' is not an integer (allowed: 1..512)");
    expect_error("-l 1.5 in", "-l: '1.5' is not an integer");
    expect_error("-l 99999999999999999999 in", "-l: 99999999999999999999 is out of range 1..512");
    expect_error("--big -1 in", "--big: -1 is out of range 0..9223372036854775807");
    expect_error("--ratio 2 in", "--ratio: 2 is out of range 0..1");
    expect_error("--ratio nan in", "--ratio: 'nan' is not a number");
    expect_error("--ratio abc in", "--ratio: 'abc' is not a number (allowed: 0..1)");
    expect_error("--ratio inf in", "--ratio: inf is out of range 0..1");
    expect_error("--mode medium in", "--mode: 'medium' is not fast, slow or exact");
    expect_error("--toggle maybe in", "--toggle: 'maybe' is not true or false");
    expect_error("--path= in", "--path: empty path");
    expect_error("--call bad in", "--call: 'bad' refused");
    expect_error("--item a --item b --item c --item d in", "--item: at most 3");
    /* the bounds themselves are accepted; a negative value is a value, not an option */
    struct t_opts o;
    assert_int_equal(parse("-l 1 --ratio 0 --precise -5 in", &o), CLI_PARSED);
    assert_int_equal(o.level, 1);
    assert_true(o.precise == -5);
}

static void test_syntax(void **state)
{
    (void)state;
    struct t_opts o;
    /* --opt=value, also for a value holding '=' and an empty one */
    assert_int_equal(parse("--level=12 --name=a=b --mode=fast --tag= in", &o), CLI_PARSED);
    assert_int_equal(o.level, 12);
    assert_string_equal(o.name, "a=b");
    assert_int_equal(o.mode, 1);
    assert_string_equal(o.sub.tag, "");
    /* -- ends the options: what follows is positional even when it starts with '-' */
    assert_int_equal(parse("-f -- -in- --flag", &o), CLI_PARSED);
    assert_string_equal(o.in, "-in-");
    assert_string_equal(o.out, "--flag");
    /* '-' alone is a positional (stdin) */
    assert_int_equal(parse("- out", &o), CLI_PARSED);
    assert_string_equal(o.in, "-");
    expect_error("--nope in", "unknown option '--nope'");
    expect_error("--nope=3 in", "unknown option '--nope'");
    expect_error("in out extra", "unexpected argument 'extra'");
    expect_error("-- in out -x", "unexpected argument '-x'");
    expect_error("in -l", "option -l needs a value");
    expect_error("in --level", "option --level needs a value");
    expect_error("in --flag=1", "--flag takes no value");
    /* a single-value option given twice keeps the last value (wrappers pass defaults first);
     * a repeatable one collects them all (test_kinds) */
    assert_int_equal(parse("-l 3 --level 4 -f -f --tag a --tag=b in", &o), CLI_PARSED);
    assert_int_equal(o.level, 4);
    assert_true(o.flag);
    assert_string_equal(o.sub.tag, "b");
    expect_error("-f", "missing IN");
}

static void test_include_and_env(void **state)
{
    (void)state;
    struct t_opts o;
    /* a shared table's options land in its struct at the include's offset */
    assert_int_equal(parse("-d 42 --tag x in", &o), CLI_PARSED);
    assert_int_equal(o.sub.depth, 42);
    assert_string_equal(o.sub.tag, "x");
    expect_error("-d 101 in", "-d: 101 is out of range 0..100");
    /* the environment variable is used when the option is not given, and checked the same way */
    setenv("TEST_CLI_LEVEL", "77", 1);
    assert_int_equal(parse("in", &o), CLI_PARSED);
    assert_int_equal(o.level, 77);
    assert_int_equal(parse("-l 5 in", &o), CLI_PARSED);
    assert_int_equal(o.level, 5);
    setenv("TEST_CLI_LEVEL", "0", 1);
    expect_error("in", "TEST_CLI_LEVEL: 0 is out of range 1..512");
    setenv("TEST_CLI_LEVEL", "", 1);
    assert_int_equal(parse("in", &o), CLI_PARSED);
    assert_int_equal(o.level, 4);
    unsetenv("TEST_CLI_LEVEL");
}

/* The help of t_cmd into a malloc'ed string. */
static char *help_text(bool markdown)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/help.txt", test_tmpdir());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (markdown) cli_print_markdown(&t_cmd, f);
    else cli_print_help(&t_cmd, f, 100);
    fclose(f);
    char *text = test_read_file(path, NULL);
    assert_non_null(text);
    return text;
}

static void test_help(void **state)
{
    (void)state;
    char *h = help_text(false);
    print_message("%s", h);
    assert_non_null(strstr(h, "usage: tern probe-opts [options] IN [OUT]\n\nAbout text.\n"));
    /* names, metavariable, aligned help column, range and default from the init'ed struct */
    assert_non_null(strstr(h, "\n  -l, --level N          a level (1..512; default 4; env TEST_CLI_LEVEL)\n"));
    assert_non_null(strstr(h, "\n  --mode M               the mode (fast|slow|exact; default slow)\n"));
    assert_non_null(strstr(h, "\n  --ratio R              a ratio (0..1; default 0.5)\n"));
    assert_non_null(strstr(h, "\n  -n, --name NAME        a name (default nobody)\n"));
    assert_non_null(strstr(h, "\n  --item X               an item (repeatable)\n"));
    assert_non_null(strstr(h, "\n  IN                     input (required)\n"));
    assert_non_null(strstr(h, "\n  -f, --flag             a flag\n"));
    /* a shared table under its heading, with the including command's note */
    assert_non_null(strstr(h, "\nShared:\n  -d, --depth N          depth (0..100; default 7)\n"));
    assert_non_null(strstr(h, "\n  --tag T                the including command's tag (default untagged)\n"));
    assert_non_null(strstr(h, "\nEpilog text.\n"));
    /* no line past 100 columns */
    for (const char *line = h; *line;) {
        const size_t len = strcspn(line, "\n");
        assert_true(len <= 100);
        line += len + (line[len] == '\n');
    }
    free(h);
    char *md = help_text(true);
    print_message("%s", md);
    assert_non_null(strstr(md, "## tern probe-opts\n"));
    assert_non_null(strstr(md, "| `-l`, `--level` | N | a level (1..512; default 4; env TEST_CLI_LEVEL) |\n"));
    assert_non_null(strstr(md, "| `IN` |  | input (required) |\n"));
    assert_non_null(strstr(md, "| `--mode` | M | the mode (fast\\|slow\\|exact; default slow) |\n"));
    assert_non_null(strstr(md, "\nShared:\n\n| option | value | description |\n"));
    free(md);
    /* --help prints that help and is not an error */
    struct t_opts o;
    assert_int_equal(parse("--flag --help", &o), CLI_EXIT_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_ranges_and_values),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_include_and_env),
        cmocka_unit_test(test_help),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
