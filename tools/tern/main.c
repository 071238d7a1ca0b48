/* main.c — the tern CLI: one binary, subcommands listed in commands.def. */
#include <stdio.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

/* Keep freed memory mapped. glibc hands the top of the heap back to the kernel once 128 KiB
 * of it are free, and serves blocks of 128 KiB or more from mmap, unmapping them on free; the
 * next allocation then touches fresh pages, each a page fault (about 2 us on this project's
 * machines: first-touch memory is slow). Grammar masks are where that showed: the first masks
 * after a compile allocate their tables in the space the compile had just freed, and took 14-24
 * faults each (SmolLM2, a fresh compile per mask: 43 -> 15 us on the mean first key mask, 93 ->
 * 39 us on a string's first mask). The cost is a process that keeps up to 64 MiB of free heap
 * and uses mmap only for blocks of 32 MiB or more (weights and caches, allocated once). */
static void malloc_keep_freed(void)
{
#if defined(__GLIBC__)
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
}

int main(int argc, char **argv)
{
    malloc_keep_freed();
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
