/* cmd_version.c — `tern version`: the version, and whether a model is embedded (the default of
 * run/chat without -m). */
#include <stdio.h>

#include "cli.h"

static const struct cli_option version_table[] = {{0}};

const struct cli_command cli_spec_version = {
    "version", "",
    "Prints the tern version and whether a model is embedded (the model run and chat use\n"
    "without -m).\n",
    version_table, 0, NULL, NULL,
};

int cmd_version(int argc, char **argv)
{
    const int pr = cli_parse(&cli_spec_version, argc, argv, NULL);
    if (pr != CLI_PARSED) return pr;
    printf("tern %s\n", tern_version());
    printf("embedded model: %s\n", cli_have_embedded_model() ? "tern-tool (run/chat without -m)" : "none");
    return CLI_EXIT_OK;
}
