/* file.h — reading a whole (small) file into memory: reports, baselines, configuration. */
#ifndef TERN_UTIL_FILE_H
#define TERN_UTIL_FILE_H

#include <stddef.h>

#include "tern.h"

/* Reads path into a NUL-terminated buffer (*out, free()d by the caller; *len bytes without the
 * NUL). A file larger than max_bytes is refused (TERN_ERR_RANGE) rather than read; what names
 * the file's role in messages ("report", "baseline"). */
TERN_NODISCARD tern_status util_read_file(const char *path, size_t max_bytes, const char *what, char **out, size_t *len);

#endif
