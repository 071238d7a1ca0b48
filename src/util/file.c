/* file.c — util_read_file: one read loop for the small JSON files tern compares (bench reports,
 * eval reports), with a size cap so a wrong path (a model, /dev/zero) fails fast. */
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

tern_status util_read_file(const char *path, size_t max_bytes, const char *what, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot open %s %s: %s", what, path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 > cap) {
            cap = (n + 65536) * 2;
            char *g = realloc(buf, cap);
            if (!g) {
                free(buf);
                fclose(f);
                return tern_fail(TERN_ERR_NOMEM, "%s %s: out of memory", what, path);
            }
            buf = g;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > max_bytes) {
            free(buf);
            fclose(f);
            return tern_fail(TERN_ERR_RANGE, "%s %s: larger than %zu bytes: not a %s", what, path, max_bytes, what);
        }
        if (got == 0) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return tern_fail(TERN_ERR_IO, "cannot read %s %s", what, path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return TERN_OK;
}
