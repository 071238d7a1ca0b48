/* error.c — per-thread last-error message (see error.h). */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *tern_last_error(void) { return last_error; }

void tern_clear_error(void) { last_error[0] = '\0'; }

tern_status tern_fail(tern_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

tern_status tern_fail_prefix(tern_status status, const char *fmt, ...)
{
    char old[sizeof last_error];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, "%s", old);
    return status;
}

const char *tern_status_name(tern_status s)
{
    switch (s) {
    case TERN_OK: return "ok";
    case TERN_ERR_IO: return "I/O error";
    case TERN_ERR_FORMAT: return "format error";
    case TERN_ERR_UNSUPPORTED: return "unsupported";
    case TERN_ERR_ARG: return "invalid argument";
    case TERN_ERR_NOMEM: return "out of memory";
    case TERN_ERR_RANGE: return "out of range";
    case TERN_ERR_NOT_FOUND: return "not found";
    }
    return "unknown status";
}

const char *tern_version(void) { return "0.1.0"; }
