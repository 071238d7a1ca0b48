/* cmd_version.c — `tern version`: the version, and whether a model is embedded (the default of
 * run/chat without -m). */
#include <stdio.h>

#include "cli.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tern %s\n", tern_version());
    printf("embedded model: %s\n", cli_have_embedded_model() ? "tern-tool (run/chat without -m)" : "none");
    return CLI_EXIT_OK;
}
