/* cli.c — helpers shared by the subcommands (see cli.h): errors, numbers with their ranges,
 * files, the generating commands' common flags, SIGPIPE, the training-context warning. */
#include "cli.h"
#include "tern_gguf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
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

bool cli_flag_int(const char *cmd, const char *flag, const char *s, long long min, long long max,
                  long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = s && *s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end) {
        cli_usage_error(cmd, "%s: '%s' is not an integer (allowed: %lld..%lld)", flag, s ? s : "", min, max);
        return false;
    }
    if (errno == ERANGE || v < min || v > max) {
        cli_usage_error(cmd, "%s: %s is out of range %lld..%lld", flag, s, min, max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_flag_float(const char *cmd, const char *flag, const char *s, double min, double max,
                    double *out)
{
    char *end = NULL;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || isnan(v)) {
        cli_usage_error(cmd, "%s: '%s' is not a number (allowed: %g..%g)", flag, s ? s : "", min, max);
        return false;
    }
    /* ERANGE on underflow (1e-400) leaves a tiny value that the bounds judge; overflow is inf */
    if (v < min || v > max) {
        cli_usage_error(cmd, "%s: %s is out of range %g..%g", flag, s, min, max);
        return false;
    }
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

void cli_ignore_sigpipe(void)
{
    signal(SIGPIPE, SIG_IGN);
}

void cli_warn_train_ctx(const char *cmd, const struct tern_model *m, long long n_ctx,
                        long long n_need)
{
    const struct tern_model_info *in = tern_model_get_info(m);
    long long train = in->n_ctx_train;
    if (n_ctx <= train && n_need <= train) return;
    /* the loader assumes 2048 when the key is absent: say so rather than cite a missing key */
    char key[96];
    snprintf(key, sizeof key, "%s.context_length", in->arch_name);
    bool stated = tern_gguf_find_key(tern_model_gguf(m), key) >= 0;
    if (n_need > train)
        fprintf(stderr, "tern %s: warning: prompt + generated tokens (up to %lld) exceed the model's "
                "training context of %lld tokens (%s%s); text past position %lld is usually "
                "degraded\n", cmd, n_need, train, key, stated ? "" : " absent, assumed", train);
    else
        fprintf(stderr, "tern %s: warning: the context size -c %lld exceeds the model's training "
                "context of %lld tokens (%s%s); text past position %lld is usually degraded\n",
                cmd, n_ctx, train, key, stated ? "" : " absent, assumed", train);
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

/* The generating commands' numeric flags and their ranges: the bounds are what the library
 * accepts (sampler, context) or what can be allocated sensibly, and are printed when a value
 * falls outside them. */
enum gen_field { GF_N_PREDICT, GF_N_CTX, GF_THREADS, GF_CACHE_MB, GF_TEMP, GF_TOP_K, GF_TOP_P,
                 GF_MIN_P, GF_REPEAT_PENALTY, GF_REPEAT_LAST_N, GF_SEED };
static const struct gen_flag {
    const char *name, *alt;
    enum gen_field field;
    bool is_float;
    double min, max;
} gen_flags[] = {
    {"-n", "--n-predict", GF_N_PREDICT, false, 0, CLI_MAX_N_PREDICT},
    {"-c", "--ctx-size", GF_N_CTX, false, 1, CLI_MAX_N_CTX},
    {"-t", "--threads", GF_THREADS, false, 1, 512},
    {"--cache-mb", NULL, GF_CACHE_MB, false, 1, 1 << 22},
    {"--temp", NULL, GF_TEMP, true, 0, 100},
    {"--top-k", NULL, GF_TOP_K, false, 0, 1 << 24},
    {"--top-p", NULL, GF_TOP_P, true, 0, 1},
    {"--min-p", NULL, GF_MIN_P, true, 0, 1},
    {"--repeat-penalty", NULL, GF_REPEAT_PENALTY, true, 0, 100},
    {"--repeat-last-n", NULL, GF_REPEAT_LAST_N, false, 1, 1 << 20},
    {"-s", "--seed", GF_SEED, false, 0, (double)INT64_MAX},
};

int cli_gen_opt(int argc, char **argv, int *i, struct cli_gen_opts *o)
{
    const char *v;
    int r;
    if ((r = cli_opt(argc, argv, i, "--prompt-cache", NULL, &v)) != 0) {
        if (r < 0) return -1;
        o->cache_dir = v;
        return 1;
    }
    if (!strcmp(argv[*i], "--swa-full")) {
        o->swa_full = true;
        return 1;
    }
    if ((r = cli_lora_opt(argc, argv, i, &o->lora)) != 0) return r;
    for (size_t k = 0; k < sizeof gen_flags / sizeof gen_flags[0]; k++) {
        const struct gen_flag *f = &gen_flags[k];
        if ((r = cli_opt(argc, argv, i, f->name, f->alt, &v)) == 0) continue;
        if (r < 0) return -1;
        long long ll = 0;
        double d = 0;
        /* the seed's upper bound is INT64_MAX exactly, which a double cannot hold */
        long long imax = f->field == GF_SEED ? INT64_MAX : (long long)f->max;
        bool ok = f->is_float ? cli_flag_float(argv[0], f->name, v, f->min, f->max, &d)
                              : cli_flag_int(argv[0], f->name, v, (long long)f->min, imax, &ll);
        if (!ok) return -1;
        switch (f->field) {
        case GF_N_PREDICT: o->n_predict = ll; break;
        case GF_N_CTX: o->n_ctx = ll; break;
        case GF_THREADS: o->threads = ll; break;
        case GF_CACHE_MB: o->cache_mb = ll; break;
        case GF_TEMP: o->sampler.temperature = (float)d; break;
        case GF_TOP_K: o->sampler.top_k = (int)ll; break;
        case GF_TOP_P: o->sampler.top_p = (float)d; break;
        case GF_MIN_P: o->sampler.min_p = (float)d; break;
        case GF_REPEAT_PENALTY: o->sampler.repeat_penalty = (float)d; break;
        case GF_REPEAT_LAST_N: o->sampler.repeat_last_n = (int)ll; break;
        case GF_SEED: o->sampler.seed = (uint64_t)ll; break;
        }
        return 1;
    }
    return 0;
}

double cli_clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int cli_check_template_vars(const char *cmd, const char *text)
{
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = "[]";
    p.extra_vars_json = text;
    if (tern_chat_validate(&p) == TERN_OK) return CLI_EXIT_OK;
    /* the library names the document "extra_vars"; the user wrote a flag */
    const char *msg = tern_last_error();
    if (!strncmp(msg, "extra_vars: ", 12)) msg += 12;
    return cli_usage_error(cmd, "--template-vars: %s", msg);
}
