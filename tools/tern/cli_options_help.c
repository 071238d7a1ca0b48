/* cli_options_help.c — `tern CMD --help` and the markdown reference, both printed from the
 * command's option table (cli_options.h). What the help says about an option beyond its own
 * text — range, choices, default, environment variable, repeatable — is derived here from the
 * table and from the defaults the command's init function sets, so it changes when they do. */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cli_options_flat.h"

/* Column where option help starts, and the longest name column that keeps help beside it. */
enum { HELP_COL = 25 };

/* The note a command gave for e's option, or NULL. */
static const struct cli_note *note_of(const struct cli_flat *e)
{
    for (const struct cli_note *n = e->notes; n && n->name; n++)
        if ((e->o->lname && !strcmp(n->name, e->o->lname)) || (e->o->sname && !strcmp(n->name, e->o->sname)))
            return n;
    return NULL;
}

/* The default as help shows it, into buf (empty: none to show). */
static void default_text(const struct cli_flat *e, char *buf, size_t cap)
{
    const struct cli_option *o = e->o;
    const struct cli_note *nt = note_of(e);
    buf[0] = '\0';
    if (nt && nt->def) { snprintf(buf, cap, "%s", nt->def); return; }
    if (o->def) { snprintf(buf, cap, "%s", o->def); return; }
    if (!e->base) return;
    const void *field = e->base + o->off;
    switch (o->kind) {
    case CLI_INT:
        snprintf(buf, cap, "%lld", o->size == sizeof(int32_t) ? (long long)*(const int32_t *)field
                                                              : (long long)*(const int64_t *)field);
        break;
    case CLI_DOUBLE:
        snprintf(buf, cap, "%g", o->size == sizeof(float) ? (double)*(const float *)field : *(const double *)field);
        break;
    case CLI_STRING:
    case CLI_PATH:
        if (*(const char *const *)field) snprintf(buf, cap, "%s", *(const char *const *)field);
        break;
    case CLI_ENUM: {
        long long v = o->size == sizeof(int64_t) ? (long long)*(const int64_t *)field : *(const int32_t *)field;
        for (const struct cli_choice *c = o->choices; c->name; c++)
            if (c->value == v) { snprintf(buf, cap, "%s", c->name); break; }
        break;
    }
    case CLI_BOOL:
        snprintf(buf, cap, "%s", *(const bool *)field ? "true" : "false");
        break;
    default:
        break;
    }
}

/* "help (1..512; default 4; env X; repeatable)" into buf. */
static void full_help(const struct cli_flat *e, char *buf, size_t cap)
{
    const struct cli_option *o = e->o;
    const struct cli_note *nt = note_of(e);
    char parts[5][640], def[512];
    int np = 0;
    if (o->kind == CLI_INT && (o->imin || o->imax)) snprintf(parts[np++], sizeof parts[0], "%lld..%lld", o->imin, o->imax);
    if (o->kind == CLI_DOUBLE && (o->dmin || o->dmax)) snprintf(parts[np++], sizeof parts[0], "%g..%g", o->dmin, o->dmax);
    if (o->kind == CLI_ENUM) {
        size_t n = 0;
        parts[np][0] = '\0';
        for (const struct cli_choice *c = o->choices; c->name && n < sizeof parts[0]; c++)
            n += (size_t)snprintf(parts[np] + n, sizeof parts[0] - n, "%s%s", c == o->choices ? "" : "|", c->name);
        np++;
    }
    default_text(e, def, sizeof def);
    if (def[0]) snprintf(parts[np++], sizeof parts[0], "default %s", def);
    if (o->flags & CLI_REQUIRED) snprintf(parts[np++], sizeof parts[0], "required");
    if (o->env) snprintf(parts[np++], sizeof parts[0], "env %s", o->env);
    if (o->kind == CLI_LIST || (o->flags & CLI_REPEAT)) snprintf(parts[np++], sizeof parts[0], "repeatable");
    size_t n = (size_t)snprintf(buf, cap, "%s", nt && nt->help ? nt->help : o->help ? o->help : "");
    for (int i = 0; i < np && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s%s", i ? "; " : n ? " (" : "(", parts[i], i == np - 1 ? ")" : "");
}

/* "-m, --model FILE" into buf. */
static void names_text(const struct cli_option *o, char *buf, size_t cap)
{
    if (!o->sname && !o->lname) { snprintf(buf, cap, "%s", o->meta ? o->meta : ""); return; }
    snprintf(buf, cap, "%s%s%s%s%s", o->sname ? o->sname : "", o->sname && o->lname ? ", " : "",
             o->lname ? o->lname : "", o->meta && cli_takes_value(o) ? " " : "",
             o->meta && cli_takes_value(o) ? o->meta : "");
}

/* Write text from column col on, words wrapped before width, continuation lines (and lines
 * after a '\n' in text) indented to indent. */
static void wrap(FILE *f, const char *text, int col, int indent, int width)
{
    const char *p = text;
    bool line_start = true;
    while (*p) {
        if (*p == '\n') {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            line_start = true;
            p++;
            continue;
        }
        if (*p == ' ') { p++; continue; }
        size_t w = strcspn(p, " \n");
        if (!line_start && col + 1 + (int)w > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            line_start = true;
        }
        if (!line_start) { fputc(' ', f); col++; }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
        line_start = false;
    }
    fputc('\n', f);
}

/* The struct with the command's defaults (help reads them); free() it. NULL if out of memory. */
static void *defaults(const struct cli_command *cmd)
{
    void *d = calloc(1, cmd->opts_size ? cmd->opts_size : 1);
    if (d && cmd->init) cmd->init(d);
    return d;
}

void cli_print_help(const struct cli_command *cmd, FILE *f, int width)
{
    fprintf(f, "usage: tern %s %s\n", cmd->name, cmd->usage ? cmd->usage : "[options]");
    if (cmd->about) fprintf(f, "\n%s", cmd->about);
    struct cli_flat fl[CLI_MAX_FLAT];
    void *d = defaults(cmd);
    const int n = cli_flatten(cmd->options, d, NULL, fl, 0, CLI_MAX_FLAT);
    const char *group = NULL;
    static char text[4096];
    fputs("\n  -h, --help             this help\n", f);
    for (int k = 0; k < n; k++) {
        const struct cli_option *o = fl[k].o;
        if (o->group && o->group != group) {
            fprintf(f, "\n%s:\n", o->group);
            group = o->group;
        }
        char names[160];
        names_text(o, names, sizeof names);
        int col = fprintf(f, "  %s", names);
        if (col + 2 > HELP_COL) col += fprintf(f, "  ");
        else col += fprintf(f, "%*s", HELP_COL - col, "");
        full_help(&fl[k], text, sizeof text);
        wrap(f, text, col, HELP_COL, width);
    }
    if (cmd->epilog) fprintf(f, "\n%s", cmd->epilog);
    free(d);
}

/* text with what markdown would take for markup escaped, and newlines as spaces. */
static void md_cell(FILE *f, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '|': fputs("\\|", f); break;
        case '*': fputs("\\*", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '\n': fputc(' ', f); break;
        default: fputc(*p, f);
        }
    }
}

static void md_table_head(FILE *f, const char *group)
{
    if (group) fprintf(f, "\n%s:\n", group);
    fprintf(f, "\n| option | value | description |\n|---|---|---|\n");
}

void cli_print_markdown(const struct cli_command *cmd, FILE *f)
{
    fprintf(f, "## tern %s\n\n```\ntern %s %s\n```\n", cmd->name, cmd->name, cmd->usage ? cmd->usage : "[options]");
    struct cli_flat fl[CLI_MAX_FLAT];
    void *d = defaults(cmd);
    const int n = cli_flatten(cmd->options, d, NULL, fl, 0, CLI_MAX_FLAT);
    const char *group = NULL;
    static char text[4096];
    md_table_head(f, NULL);
    for (int k = 0; k < n; k++) {
        const struct cli_option *o = fl[k].o;
        if (o->group && o->group != group) {
            md_table_head(f, o->group);
            group = o->group;
        }
        fputs("| ", f);
        if (!o->sname && !o->lname) fprintf(f, "`%s`", o->meta ? o->meta : "");
        if (o->sname) fprintf(f, "`%s`%s", o->sname, o->lname ? ", " : "");
        if (o->lname) fprintf(f, "`%s`", o->lname);
        fputs(" | ", f);
        if (o->meta && cli_takes_value(o) && (o->sname || o->lname)) md_cell(f, o->meta);
        fputs(" | ", f);
        full_help(&fl[k], text, sizeof text);
        md_cell(f, text);
        fputs(" |\n", f);
    }
    fputc('\n', f);
    free(d);
}
