/* cli_options.c — the option parser of cli_options.h, and the number checks and usage errors
 * every subcommand shares (cli.h declares them). Read cli_options.h first: the table, its kinds
 * and what cli_parse promises. The parser flattens a command's table (CLI_INCLUDE pulls in a
 * shared one, such as the generation options of run and chat, at an offset) into one list of
 * (option, struct base) pairs, so a repeated option is caught across tables alike. */
#include "cli_options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_options_flat.h"

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

/* ---- the flattened table ---- */

int cli_flatten(const struct cli_option *t, char *base, const struct cli_note *notes,
                struct cli_flat *out, int n, int cap)
{
    for (; t->kind != CLI_END; t++) {
        if (t->kind == CLI_INCLUDE) {
            n = cli_flatten(t->sub, base ? base + t->off : NULL, t->notes, out, n, cap);
            if (n < 0) return n;
            continue;
        }
        if (n == cap) return -1;
        out[n++] = (struct cli_flat){t, base, notes};
    }
    return n;
}

const char *cli_option_name(const struct cli_option *o)
{
    return o->sname ? o->sname : o->lname ? o->lname : o->meta;
}

void cli_int_bounds(const struct cli_option *o, long long *lo, long long *hi)
{
    *lo = o->imin;
    *hi = o->imax;
    if (!*lo && !*hi) {
        *lo = o->size == sizeof(int) ? INT_MIN : LLONG_MIN;
        *hi = o->size == sizeof(int) ? INT_MAX : LLONG_MAX;
    }
}

bool cli_takes_value(const struct cli_option *o)
{
    return o->kind != CLI_FLAG;
}

/* Store one value for o in the struct at base; name is what the user wrote (the option's name
 * or the environment variable). false after printing a usage error. */
static bool set_value(const char *cmd, const struct cli_option *o, char *base, const char *name,
                      const char *val)
{
    void *field = base + o->off;
    switch (o->kind) {
    case CLI_FLAG:
        if (o->size == sizeof(bool)) *(bool *)field = true;
        else *(int *)field = o->ival;
        return true;
    case CLI_BOOL: {
        static const char *yes[] = {"true", "on", "yes", "1"}, *no[] = {"false", "off", "no", "0"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(val, yes[i]) || !strcmp(val, no[i])) {
                *(bool *)field = !strcmp(val, yes[i]);
                return true;
            }
        cli_usage_error(cmd, "%s: '%s' is not true or false (also on/off, yes/no, 1/0)", name, val);
        return false;
    }
    case CLI_INT: {
        long long lo, hi, v;
        cli_int_bounds(o, &lo, &hi);
        if (!cli_flag_int(cmd, name, val, lo, hi, &v)) return false;
        if (o->size == sizeof(int32_t)) *(int32_t *)field = (int32_t)v;
        else *(int64_t *)field = v;
        return true;
    }
    case CLI_DOUBLE: {
        double lo = o->dmin, hi = o->dmax, v;
        if (!lo && !hi) lo = -INFINITY, hi = INFINITY;
        if (!cli_flag_float(cmd, name, val, lo, hi, &v)) return false;
        if (o->size == sizeof(float)) *(float *)field = (float)v;
        else *(double *)field = v;
        return true;
    }
    case CLI_PATH:
        if (!*val) {
            cli_usage_error(cmd, "%s: empty path", name);
            return false;
        }
        /* fall through */
    case CLI_STRING:
        *(const char **)field = val;
        return true;
    case CLI_ENUM: {
        for (const struct cli_choice *c = o->choices; c->name; c++)
            if (!strcmp(val, c->name)) {
                if (o->size == sizeof(int64_t)) *(int64_t *)field = c->value;
                else *(int32_t *)field = c->value;
                return true;
            }
        char list[512];
        size_t n = 0;
        list[0] = '\0';
        for (const struct cli_choice *c = o->choices; c->name && n < sizeof list; c++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", c == o->choices ? "" : c[1].name ? ", " : " or ",
                                  c->name);
        cli_usage_error(cmd, "%s: '%s' is not %s", name, val, list);
        return false;
    }
    case CLI_LIST: {
        int *count = (int *)(base + o->count_off);
        if (*count >= o->max_count) {
            cli_usage_error(cmd, "%s: at most %d", name, o->max_count);
            return false;
        }
        ((const char **)field)[(*count)++] = val;
        return true;
    }
    case CLI_CALL:
        return o->call(cmd, o, val, base) == 0;
    case CLI_END:
    case CLI_INCLUDE:
        break;
    }
    return false;
}

/* The entry named by arg (len bytes of it: "--opt" of "--opt=value"), or -1. */
static int find_option(const struct cli_flat *f, int n, const char *arg, size_t len)
{
    for (int k = 0; k < n; k++) {
        const struct cli_option *o = f[k].o;
        if ((o->sname && strlen(o->sname) == len && !strncmp(o->sname, arg, len)) ||
            (o->lname && strlen(o->lname) == len && !strncmp(o->lname, arg, len)))
            return k;
    }
    return -1;
}

static bool is_positional(const struct cli_option *o)
{
    return !o->sname && !o->lname;
}

static void mark_given(const struct cli_flat *e)
{
    if (e->o->given) *(bool *)(e->base + e->o->given - 1) = true;
}

static bool was_given(const struct cli_flat *e, bool seen)
{
    return seen || (e->o->given && *(bool *)(e->base + e->o->given - 1));
}

int cli_parse(const struct cli_command *cmd, int argc, char **argv, void *opts)
{
    struct cli_flat f[CLI_MAX_FLAT];
    bool seen[CLI_MAX_FLAT] = {0};
    const int n = cli_flatten(cmd->options, opts, NULL, f, 0, CLI_MAX_FLAT);
    if (n < 0) {
        fprintf(stderr, "tern %s: more than %d options in the table\n", cmd->name, CLI_MAX_FLAT);
        return CLI_EXIT_FAIL;
    }
    const char *name = cmd->name;
    bool only_positional = false;
    int next_pos = 0; /* index in f from which the next positional is looked for */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_positional && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            cli_print_help(cmd, stdout, 100);
            return CLI_EXIT_OK;
        }
        if (!only_positional && !strcmp(a, "--")) {
            only_positional = true;
            continue;
        }
        if (!only_positional && a[0] == '-' && a[1]) {
            const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
            const size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const int k = find_option(f, n, a, len);
            if (k < 0) return cli_usage_error(name, "unknown option '%.*s'", (int)len, a);
            const struct cli_option *o = f[k].o;
            const char *val = NULL;
            if (!cli_takes_value(o)) {
                if (eq) return cli_usage_error(name, "%.*s takes no value", (int)len, a);
            } else if (eq) {
                val = eq + 1;
            } else {
                if (i + 1 >= argc) return cli_usage_error(name, "option %s needs a value", a);
                val = argv[++i];
            }
            /* errors name the option as it was typed (--size, not its -n) */
            char typed[64];
            snprintf(typed, sizeof typed, "%.*s", (int)len, a);
            if (!set_value(name, o, f[k].base, typed, val)) return CLI_EXIT_USAGE;
            seen[k] = true;
            mark_given(&f[k]);
            continue;
        }
        while (next_pos < n && !is_positional(f[next_pos].o)) next_pos++;
        if (next_pos == n)
            return cli_usage_error(name, !only_positional && a[0] == '-' && a[1] ? "unknown option '%s'"
                                                                                : "unexpected argument '%s'", a);
        const struct cli_flat *p = &f[next_pos];
        if (!set_value(name, p->o, p->base, p->o->meta, a)) return CLI_EXIT_USAGE;
        seen[next_pos] = true;
        mark_given(p);
        if (p->o->kind != CLI_LIST) next_pos++;
    }
    for (int k = 0; k < n; k++) {
        const struct cli_option *o = f[k].o;
        if (!o->env || was_given(&f[k], seen[k])) continue;
        const char *v = getenv(o->env);
        if (!v || !*v) continue;
        if (!set_value(name, o, f[k].base, o->env, v)) return CLI_EXIT_USAGE;
        seen[k] = true;
    }
    for (int k = 0; k < n; k++) {
        const struct cli_option *o = f[k].o;
        if (!(o->flags & CLI_REQUIRED) || was_given(&f[k], seen[k])) continue;
        if (is_positional(o)) return cli_usage_error(name, "missing %s", o->meta);
        return cli_usage_error(name, "missing %s%s%s", cli_option_name(o), o->meta ? " " : "",
                               o->meta ? o->meta : "");
    }
    return CLI_PARSED;
}
