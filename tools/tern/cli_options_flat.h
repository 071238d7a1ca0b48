/* cli_options_flat.h — what the parser and the help printers of cli_options.h share: a
 * command's table flattened (CLI_INCLUDE resolved) into (option, struct base, notes) entries. */
#ifndef TERN_CLI_OPTIONS_FLAT_H
#define TERN_CLI_OPTIONS_FLAT_H

#include "cli_options.h"

#define CLI_MAX_FLAT 256

struct cli_flat {
    const struct cli_option *o;
    char *base;                     /* the struct the option's .off is relative to (or NULL) */
    const struct cli_note *notes;   /* the including command's notes for a shared table */
};

/* Append t's options (recursively) to out[n..cap) with base; the new count, or -1 when full. */
int cli_flatten(const struct cli_option *t, char *base, const struct cli_note *notes,
                struct cli_flat *out, int n, int cap);
/* A CLI_INT's bounds (both 0 in the table: the field type's range). */
void cli_int_bounds(const struct cli_option *o, long long *lo, long long *hi);
bool cli_takes_value(const struct cli_option *o);

#endif
