/* error.h — how every room reports failure.
 *
 * A failing function records a message with tern_fail() and returns its status; the public
 * tern_last_error() reads it back. The message must name what was wrong and where (byte offset,
 * key, JSON path, token index) so the CLI can print it as-is. */
#ifndef TERN_UTIL_ERROR_H
#define TERN_UTIL_ERROR_H

#include "tern.h"

/* Record a printf-style message for this thread and return status (for `return tern_fail(...)`). */
tern_status tern_fail(tern_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix the current message with more context ("loading x.gguf: " + old message). */
tern_status tern_fail_prefix(tern_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tern_clear_error(void);

#endif
