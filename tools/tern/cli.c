/* cli.c — argument helpers shared by the subcommands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_report(const char *cmd, tern_status st)
{
    fprintf(stderr, "tern %s: %s: %s\n", cmd, tern_status_name(st), tern_last_error());
    return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tern %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `tern %s --help`)\n", cmd);
    return CLI_EXIT_USAGE;
}

bool cli_parse_int(const char *s, long long min, long long max, long long *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, double min, double max, double *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || isnan(v) || v < min || v > max) return false;
    *out = v;
    return true;
}

bool cli_parse_token_list(const char *s, int32_t **ids, int *n, int *bad_index)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += (*p == ',');
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return false;
    int count = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char buf[32];
        long long x;
        if (len == 0 || len >= sizeof buf) goto bad;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (!cli_parse_int(buf, 0, INT32_MAX, &x)) goto bad;
        v[count++] = (int32_t)x;
        if (!comma) break;
        p = comma + 1;
    }
    *ids = v;
    *n = count;
    return true;
bad:
    *bad_index = count;
    free(v);
    return false;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return NULL;
    if (err) { free(buf); errno = EIO; return NULL; }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char *alt, const char **val)
{
    const char *a = argv[*i];
    if (strcmp(a, name) != 0 && !(alt && strcmp(a, alt) == 0)) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tern %s: option %s needs a value (see `tern %s --help`)\n", argv[0], a,
                argv[0]);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

long cli_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) sscanf(line + 6, "%ld", &kb);
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}
