/* cli_options.h — one declarative table of options per subcommand: parsing, range errors,
 * `--help` and the generated option reference (docs/cli-options.md, `tern help --markdown`) all
 * come from it, so the three cannot drift apart (llama.cpp's common/arg.cpp and Redis's config.c
 * work this way).
 *
 * A command describes itself once:
 *
 *     struct run_opts { const char *model; long long n; bool json; };
 *     static const struct cli_option run_table[] = {
 *         {"-m", "--model", CLI_PATH, "FILE", CLI_AT(struct run_opts, model), .help = "GGUF model"},
 *         {"-n", "--n-predict", CLI_INT, "N", CLI_AT(struct run_opts, n), CLI_RANGE(0, 1 << 24),
 *          .help = "tokens to generate"},
 *         {NULL, "--json", CLI_FLAG, NULL, CLI_AT(struct run_opts, json), .help = "print JSON"},
 *         {0}};
 *     static void run_init(void *p) { *(struct run_opts *)p = (struct run_opts){.n = 32}; }
 *     const struct cli_command cli_spec_run = {"run", "[-m MODEL] -p TEXT", "Generates ...",
 *         run_table, CLI_OPTS(struct run_opts, run_init)};
 *
 * and parses with `int rc = cli_parse(&cli_spec_run, argc, argv, &opts);` after initialising
 * opts the same way (CLI_PARSED: go on; anything else is the exit status: 0 after --help, 2
 * after a usage error, which was printed). The defaults shown in help are read from the struct
 * the init function fills, unless .def says them in words ("all CPUs").
 *
 * Values: `--opt value` and `--opt=value` (long names); `--` ends the options; `-` alone is a
 * positional (stdin). A value may begin with '-' (`-n -5` is refused by the range, not taken for
 * an option). A single-value option given twice keeps the last value, as it always has: wrappers
 * (tests/server/serve.mjs, scripts) pass defaults first and let their caller's flags override
 * them. CLI_LIST and CLI_REPEAT options collect every value instead.
 * Entries with neither name are positionals, taken in table order (a CLI_LIST positional takes
 * the rest). Every command has -h/--help. */
#ifndef TERN_CLI_OPTIONS_H
#define TERN_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum cli_kind {
    CLI_END = 0,  /* the {0} that ends a table */
    CLI_FLAG,     /* no value: the bool field becomes true (.ival: the int field becomes .ival) */
    CLI_BOOL,     /* true/false, on/off, yes/no, 1/0 into a bool */
    CLI_INT,      /* an integer in CLI_RANGE into an int, long long, int64_t or size_t field */
    CLI_DOUBLE,   /* a number in CLI_FRANGE into a float or double field (NaN refused) */
    CLI_STRING,   /* the argument itself into a const char * field */
    CLI_PATH,     /* a file or directory: a non-empty string into a const char * field */
    CLI_ENUM,     /* one of .choices; the choice's value into an int-sized field */
    CLI_LIST,     /* repeatable string: appended to a const char *[.max_count] with an int count */
    CLI_CALL,     /* the value is handed to .call */
    CLI_INCLUDE,  /* the options of .sub, whose struct lives at .off in this one */
};

enum {
    CLI_REPEAT = 1,     /* CLI_CALL: each value goes to .call (help says "repeatable") */
    CLI_REQUIRED = 2,   /* must be given (positionals: must be present) */
};

struct cli_choice {
    const char *name;
    int value;
};

/* Replaces, for one command, the default text or help of an option it takes from a shared
 * table (CLI_INCLUDE): chat's -c defaults to the training context, run's to prompt + N. */
struct cli_note {
    const char *name;   /* the option's long name (or short name when it has no long one) */
    const char *def;    /* default text, or NULL to keep */
    const char *help;   /* help text, or NULL to keep */
};

struct cli_option;
/* A CLI_CALL's action: take val for the option (the struct is opts); 0, or -1 after printing
 * a usage error (cli_usage_error). */
typedef int (*cli_call_fn)(const char *cmd, const struct cli_option *o, const char *val, void *opts);

struct cli_option {
    const char *sname, *lname;   /* "-m", "--model": either may be NULL; both NULL: a positional */
    enum cli_kind kind;
    const char *meta;            /* the value's name in help: "FILE", "N" (positionals: "IN") */
    size_t off, size;            /* the field: CLI_AT(type, member) */
    long long imin, imax;        /* CLI_INT bounds (both 0: any long long) */
    double dmin, dmax;           /* CLI_DOUBLE bounds (both 0: any number) */
    const struct cli_choice *choices;  /* CLI_ENUM, ended by {NULL} */
    int max_count;               /* CLI_LIST: capacity of the array */
    size_t count_off;            /* CLI_LIST: offset of its int count */
    cli_call_fn call;            /* CLI_CALL */
    const struct cli_option *sub;      /* CLI_INCLUDE */
    const struct cli_note *notes;      /* CLI_INCLUDE: per-command texts, ended by {NULL} */
    size_t given;                /* CLI_GIVEN(type, member): a bool set when the option is given */
    int ival;                    /* CLI_FLAG into an int field */
    const char *def;             /* default as help shows it; NULL: read from the init'ed struct */
    const char *help;
    const char *env;             /* environment variable used when the option is not given */
    const char *group;           /* heading in help; options after it share it until the next */
    unsigned flags;              /* CLI_REPEAT ... */
};

#define CLI_AT(type, member) .off = offsetof(type, member), .size = sizeof(((type *)0)->member)
#define CLI_RANGE(lo, hi) .imin = (lo), .imax = (hi)
#define CLI_FRANGE(lo, hi) .dmin = (lo), .dmax = (hi)
#define CLI_GIVEN(type, member) .given = offsetof(type, member) + 1
#define CLI_COUNT(type, member, cap) .count_off = offsetof(type, member), .max_count = (cap)

struct cli_command {
    const char *name;            /* "run", "grammar check" */
    const char *usage;           /* what follows "usage: tern NAME " */
    const char *about;           /* paragraphs before the options (may be NULL) */
    const struct cli_option *options;
    size_t opts_size;            /* CLI_OPTS(type, init) */
    void (*init)(void *opts);    /* the defaults (help reads them); NULL: all zero */
    const char *epilog;          /* paragraphs after the options (may be NULL) */
};
#define CLI_OPTS(type, init_fn) sizeof(type), init_fn

/* cli_parse's "go on" result; other results are exit statuses (CLI_EXIT_OK after --help). */
#define CLI_PARSED (-1)

/* Parse argv[1..argc) (argv[0] is the command's name) into opts, which the caller has set to
 * its defaults. Returns CLI_PARSED, CLI_EXIT_OK after printing --help, or CLI_EXIT_USAGE after
 * printing "tern CMD: ..." and the hint to see --help. Environment variables of options not
 * given are applied after argv (their errors name the variable). */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, void *opts);

/* The name errors use: the short name when there is one ("-t: 0 is out of range 1..512"). */
const char *cli_option_name(const struct cli_option *o);

/* The help text: usage, about, the options grouped under their headings in aligned columns
 * wrapped at `width` (ranges, choices, defaults, env), epilog. */
void cli_print_help(const struct cli_command *cmd, FILE *f, int width);
/* The same options as a markdown section (a heading, the usage and a table per group). */
void cli_print_markdown(const struct cli_command *cmd, FILE *f);
/* Every command's table (cli_specs.def), for `tern help --markdown` and `tern help --names`. */
const struct cli_command *const *cli_all_commands(size_t *n);
/* The command whose name is name ("grammar check"), or NULL. */
const struct cli_command *cli_find_command(const char *name);

/* `tern help [--markdown | --options CMD | CMD]`: the option reference of every
 * command, one command's option names, or its --help. */
int cli_help_main(int argc, char **argv);

#endif
