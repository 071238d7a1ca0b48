/* check.c — the failure path of TERN_ASSERT, TERN_ALWAYS and TERN_NEVER (check.h).
 *
 * Kept out of line and cold so a check site costs one compare and a not-taken branch. The path
 * is cut to the part after the source tree's root ("src/grammar/gram_engine.c:285") so the line
 * a user pastes into a bug report is the same on every machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

static const char *short_path(const char *file)
{
    static const char *const roots[] = {"/src/", "/tests/", "/tools/", "/bench/"};
    const char *best = NULL;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        const char *p = strstr(file, roots[i]);
        if (p && (!best || p > best)) best = p;
    }
    return best ? best + 1 : file;
}

void tern_assert_fail(const char *file, int line, const char *expr, const char *msg)
{
    fflush(stdout);
    if (msg && *msg)
        fprintf(stderr, "%s:%d: tern internal check failed: %s (%s)\n", short_path(file), line, expr, msg);
    else
        fprintf(stderr, "%s:%d: tern internal check failed: %s\n", short_path(file), line, expr);
    fputs("This is a bug in tern, not in your input; please report the line above and the "
          "command that led to it.\n",
          stderr);
    abort();
}
