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

struct cli_gen_opts cli_gen_opts_default(long long n_predict)
{
    struct cli_gen_opts o = {.n_predict = n_predict, .cache_mb = 256};
    o.sampler = tern_sampler_default_params();
    return o;
}

int cli_gen_opt(int argc, char **argv, int *i, struct cli_gen_opts *o)
{
    const char *v;
    long long ll;
    double d;
    int r;
#define OPT(name, alt) ((r = cli_opt(argc, argv, i, name, alt, &v)) != 0)
#define BAD(what) (cli_usage_error(argv[0], "%s '%s' is not valid", what, v), -1)
    if (OPT("-n", "--n-predict")) {
        if (r < 0) return -1;
        return cli_parse_int(v, 0, 1 << 24, &o->n_predict) ? 1 : BAD("-n");
    }
    if (OPT("-c", "--ctx-size")) {
        if (r < 0) return -1;
        return cli_parse_int(v, 1, 1 << 22, &o->n_ctx) ? 1 : BAD("-c");
    }
    if (OPT("-t", "--threads")) {
        if (r < 0) return -1;
        return cli_parse_int(v, 1, 512, &o->threads) ? 1 : BAD("-t");
    }
    if (OPT("--temp", NULL)) {
        if (r < 0 || !cli_parse_float(v, 0, 100, &d)) return r < 0 ? -1 : BAD("--temp");
        o->sampler.temperature = (float)d;
        return 1;
    }
    if (OPT("--top-k", NULL)) {
        if (r < 0 || !cli_parse_int(v, 0, 1 << 24, &ll)) return r < 0 ? -1 : BAD("--top-k");
        o->sampler.top_k = (int)ll;
        return 1;
    }
    if (OPT("--top-p", NULL)) {
        if (r < 0 || !cli_parse_float(v, 0, 1, &d)) return r < 0 ? -1 : BAD("--top-p");
        o->sampler.top_p = (float)d;
        return 1;
    }
    if (OPT("--min-p", NULL)) {
        if (r < 0 || !cli_parse_float(v, 0, 1, &d)) return r < 0 ? -1 : BAD("--min-p");
        o->sampler.min_p = (float)d;
        return 1;
    }
    if (OPT("--repeat-penalty", NULL)) {
        if (r < 0 || !cli_parse_float(v, 0, 100, &d)) return r < 0 ? -1 : BAD("--repeat-penalty");
        o->sampler.repeat_penalty = (float)d;
        return 1;
    }
    if (OPT("--repeat-last-n", NULL)) {
        if (r < 0 || !cli_parse_int(v, 1, 1 << 20, &ll)) return r < 0 ? -1 : BAD("--repeat-last-n");
        o->sampler.repeat_last_n = (int)ll;
        return 1;
    }
    if (OPT("-s", "--seed")) {
        if (r < 0 || !cli_parse_int(v, 0, INT64_MAX, &ll)) return r < 0 ? -1 : BAD("--seed");
        o->sampler.seed = (uint64_t)ll;
        return 1;
    }
    if (OPT("--prompt-cache", NULL)) {
        if (r < 0) return -1;
        o->cache_dir = v;
        return 1;
    }
    if (OPT("--cache-mb", NULL)) {
        if (r < 0) return -1;
        return cli_parse_int(v, 1, 1 << 22, &o->cache_mb) ? 1 : BAD("--cache-mb");
    }
#undef OPT
#undef BAD
    return 0;
}
