/* main.c — the tern CLI: one binary, subcommands listed in commands.def. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
};

static const struct command commands[] = {
#define CMD(name, fn, summary) {name, fn, summary},
#include "commands.def"
#undef CMD
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tern <command> [options]   (tern <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`tern help --markdown` prints the option reference of every command (docs/cli-options.md).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc > 2) return cli_help_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "--help-markdown")) {
        char *md[] = {"help", "--markdown", NULL};
        return cli_help_main(2, md);
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) argv[1] = "version";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            int n = argc - 1;
            char **v = argv + 1;
            int rc = cli_resolve_model_args(&n, &v);
            /* the resolved arguments live for the process: held here, so a leak checker run at
             * exit sees them reachable */
            static char **volatile resolved;
            resolved = v;
            (void)resolved;
            return rc ? rc : commands[i].fn(n, v);
        }
    fprintf(stderr, "tern: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
