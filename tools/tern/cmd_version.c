/* cmd_version.c — `tern version`: version and the kernels this CPU will use. */
#include <stdio.h>

#include "cli.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tern %s\n", tern_version());
    return CLI_EXIT_OK;
}
