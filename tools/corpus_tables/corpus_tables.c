/* corpus_tables.c — the corpus room's tables, from data files to C (a build step; read
 * src/corpus/corpus_tables.h first).
 *
 *   corpus_tables --check DIR        validate DIR/{words,kinds,templates}.txt, exit 1 on any error
 *   corpus_tables -o OUT.c DIR       validate, then write the tables as C arrays into OUT.c
 *
 * CMake runs it at every build where a data file changed (CMakeLists.txt, "the corpus room's
 * tables"); tests/test_corpus_data.c runs --check on the tree's files and on broken copies.
 *
 * The format, one file per table (the files' opening comments say it for their reader):
 *   # ...            a comment (only at the start of a line); blank lines separate records
 *   OPENER value     starts a record: "list NAME" (words.txt), "kind KEY" or "result KEY"
 *                    (kinds.txt), "op ACTION" (templates.txt, under the last "domain NAME" line)
 *   field value      one field of the current record; the value is the rest of the line, byte
 *                    for byte (UTF-8, no escapes); "field" alone is the empty string, a field
 *                    left out is NULL where the schema allows it
 *   + more           continues the previous field: "more" is appended as is (long "a|b|c" lists
 *                    wrap after a '|')
 * Every error names file:line and what was expected; all of them are reported, not the first.
 * Standalone on purpose (libc only): it runs before libtern exists. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ schema */

enum vcheck {
    V_TEXT,  /* any text without control characters or edge spaces */
    V_NAME,  /* [a-z0-9_]+: a key other records refer to */
    V_ENUM,  /* one of the field's words */
    V_FLAGS, /* words of the field's set, space-separated, each at most once */
    V_KEYS,  /* space-separated kind keys ('!' suffix allowed when the field says so) */
};

struct field_def {
    const char *name;
    bool required;
    bool nonempty;
    enum vcheck check;
    const char *const *words; /* V_ENUM, V_FLAGS: NULL-terminated; emitted as C through cnames */
    const char *const *cnames;
    bool bang;                /* V_KEYS: "key!" marks a required parameter */
};

static const char *const act_words[] = {"get", "list", "create", "update", "delete", "send", "control", "compute", NULL};
static const char *const act_c[] = {"ACT_GET", "ACT_LIST", "ACT_CREATE", "ACT_UPDATE", "ACT_DELETE", "ACT_SEND",
                                    "ACT_CONTROL", "ACT_COMPUTE"};
static const char *const type_words[] = {"string", "integer", "number", "boolean", "array", "object", NULL};
static const char *const type_c[] = {"CT_STRING", "CT_INTEGER", "CT_NUMBER", "CT_BOOLEAN", "CT_ARRAY", "CT_OBJECT"};
static const char *const flag_words[] = {"last", "linked", "bounds", "nolabel", "first", NULL};
static const char *const flag_c[] = {"KF_LAST", "KF_LINKED", "KF_BOUNDS", "KF_NOLABEL", "KF_FIRST"};

/* A record type: its opener's field (index 0) and the fields that may follow, in the order the
 * C struct wants them. */
enum { MAX_FIELDS = 12 };
struct record_def {
    const char *file;
    int table; /* which table the record belongs to (T_*) */
    struct field_def f[MAX_FIELDS];
};
enum { T_WORDS, T_KINDS, T_TMPLS, T_COUNT };

#define F(n, req, ne, chk) {.name = n, .required = req, .nonempty = ne, .check = chk}
#define FE(n, req, ne, chk, w, c) {.name = n, .required = req, .nonempty = ne, .check = chk, .words = w, .cnames = c}
#define FK(n, req, ne, b) {.name = n, .required = req, .nonempty = ne, .check = V_KEYS, .bang = b}
static const struct record_def defs[] = {
    {"words.txt", T_WORDS, {F("list", true, true, V_NAME), F("words", true, true, V_TEXT)}},
    {"kinds.txt", T_KINDS,
     {F("kind", true, true, V_NAME),
      FE("type", true, true, V_ENUM, type_words, type_c),
      F("gen", true, true, V_NAME),
      F("arg", false, false, V_TEXT),
      F("names", true, true, V_TEXT),
      F("descs", true, false, V_TEXT),
      F("label", true, true, V_TEXT),
      F("frames", false, true, V_TEXT),
      F("format", false, true, V_NAME),
      FE("flags", false, true, V_FLAGS, flag_words, flag_c)}},
    /* a result field: only what a result needs (names = the key, descs "", no frames/format/flags) */
    {"kinds.txt", T_KINDS,
     {F("result", true, true, V_NAME),
      FE("type", true, true, V_ENUM, type_words, type_c),
      F("gen", true, true, V_NAME),
      F("arg", false, false, V_TEXT),
      F("label", true, true, V_TEXT)}},
    {"templates.txt", T_TMPLS,
     {FE("op", true, true, V_ENUM, act_words, act_c),
      F("verbs", true, true, V_TEXT),
      F("objs", true, true, V_TEXT),
      F("vp", false, true, V_TEXT),
      F("np", true, true, V_TEXT),
      FK("params", true, false, true),
      F("results", false, true, V_KEYS),
      F("descs", true, true, V_TEXT)}},
};
#define N_DEFS ((int)(sizeof defs / sizeof defs[0]))
static const char *const table_files[T_COUNT] = {"words.txt", "kinds.txt", "templates.txt"};

/* ------------------------------------------------------------------ records */

struct record {
    const struct record_def *def;
    const char *file;
    int line;                  /* of the opener */
    char *val[MAX_FIELDS];     /* NULL: absent */
    int vline[MAX_FIELDS];
    char *domain;              /* templates: the domain it sits under */
};
static struct record *recs[T_COUNT];
static int n_recs[T_COUNT], cap_recs[T_COUNT];
static int n_errors;
enum { MAX_SHOWN = 40 }; /* errors printed; more are counted (one bad line can cascade) */
static bool unreadable;  /* a file could not be opened: no checks across files */

static void error_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void error_at(const char *file, int line, const char *fmt, ...)
{
    if (n_errors++ >= MAX_SHOWN) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "corpus_tables: out of memory\n");
        exit(2);
    }
    return q;
}
static char *xstrndup(const char *s, size_t n)
{
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Well-formed UTF-8 (no overlongs, no surrogates), no control characters. */
static const char *bad_bytes(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        unsigned c = *p;
        if (c < 0x20 || c == 0x7f) return c == '\t' ? "a tab" : c == '\r' ? "a carriage return" : "a control character";
        if (c < 0x80) { p++; continue; }
        int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
        if (!len || e - p < len) return "invalid UTF-8";
        unsigned cp = c & (0xff >> (len + 1));
        for (int k = 1; k < len; k++) {
            if ((p[k] & 0xc0) != 0x80) return "invalid UTF-8";
            cp = cp << 6 | (p[k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return "invalid UTF-8";
        p += len;
    }
    return NULL;
}

static void check_value(const struct record *r, int fi)
{
    const struct field_def *fd = &r->def->f[fi];
    const char *v = r->val[fi], *file = r->file;
    int line = r->vline[fi];
    size_t n = strlen(v);
    if (fd->nonempty && !n) {
        error_at(file, line, "'%s' must not be empty", fd->name);
        return;
    }
    if (n && (v[0] == ' ' || v[n - 1] == ' ')) error_at(file, line, "'%s' starts or ends with a space", fd->name);
    switch (fd->check) {
    case V_TEXT:
        break;
    case V_NAME:
        for (const char *p = v; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')) {
                error_at(file, line, "'%s' is a name: lower-case letters, digits, '_' or '-', not '%s'", fd->name, v);
                break;
            }
        break;
    case V_ENUM: {
        bool ok = false;
        for (const char *const *w = fd->words; *w; w++) ok |= !strcmp(*w, v);
        if (!ok) {
            char all[256] = "";
            for (const char *const *w = fd->words; *w; w++) snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", *w == fd->words[0] ? "" : " ", *w);
            error_at(file, line, "'%s' is one of {%s}, not '%s'", fd->name, all, v);
        }
        break;
    }
    case V_FLAGS: {
        unsigned seen = 0;
        for (const char *p = v; *p;) {
            const char *e = strchr(p, ' ');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            int k = -1;
            for (int w = 0; fd->words[w]; w++)
                if (strlen(fd->words[w]) == len && !memcmp(fd->words[w], p, len)) k = w;
            if (k < 0) error_at(file, line, "'%s': unknown flag '%.*s'", fd->name, (int)len, p);
            else if (seen & 1u << k) error_at(file, line, "'%s': flag '%.*s' twice", fd->name, (int)len, p);
            else seen |= 1u << k;
            p += len;
            if (*p) p++;
            if (e && !*p) error_at(file, line, "'%s' ends with a space", fd->name);
        }
        break;
    }
    case V_KEYS:
        if (strstr(v, "  ")) error_at(file, line, "'%s': keys are separated by one space", fd->name);
        break; /* the keys themselves are checked against kinds.txt once everything is read */
    }
}

/* ------------------------------------------------------------------ reading */

static char paths[T_COUNT][4096]; /* file names for messages, also of later checks */

static void read_file(const char *dir, int table)
{
    const char *name = table_files[table];
    char *file = paths[table];
    snprintf(file, sizeof paths[table], "%s/%s", dir, name);
    FILE *f = fopen(file, "rb");
    if (!f) {
        error_at(file, 0, "cannot open");
        unreadable = true;
        return;
    }
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    int ln = 0;
    struct record *cur = NULL;
    int last_field = -1;
    char *domain = NULL;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        ln++;
        size_t n = (size_t)got;
        if (n && line[n - 1] == '\n') line[--n] = '\0';
        const char *why = bad_bytes(line, n);
        if (why) {
            error_at(file, ln, "%s in the line", why);
            continue;
        }
        if (!n || line[0] == '#') {
            if (!n) last_field = -1; /* a blank line ends continuations */
            continue;
        }
        if (line[0] == '+') {
            if (line[1] != ' ' || !line[2]) {
                error_at(file, ln, "a continuation is '+ ' followed by text");
                continue;
            }
            if (!cur || last_field < 0) {
                error_at(file, ln, "a continuation line without a field before it");
                continue;
            }
            size_t old = strlen(cur->val[last_field]);
            cur->val[last_field] = xrealloc(cur->val[last_field], old + n - 2 + 1);
            memcpy(cur->val[last_field] + old, line + 2, n - 2 + 1);
            continue;
        }
        char *sp = strchr(line, ' ');
        size_t klen = sp ? (size_t)(sp - line) : n;
        const char *val = sp ? sp + 1 : "";
        if (!strcmp(name, "templates.txt") && klen == 6 && !memcmp(line, "domain", 6)) {
            free(domain);
            domain = xstrndup(val, strlen(val));
            cur = NULL;
            last_field = -1;
            if (!domain[0]) error_at(file, ln, "'domain' needs a name");
            continue;
        }
        /* a record opener? */
        const struct record_def *opened = NULL;
        for (int d = 0; d < N_DEFS; d++)
            if (!strcmp(defs[d].file, name) && strlen(defs[d].f[0].name) == klen && !memcmp(defs[d].f[0].name, line, klen))
                opened = &defs[d];
        if (opened) {
            int t = opened->table;
            if (n_recs[t] == cap_recs[t]) {
                cap_recs[t] = cap_recs[t] ? 2 * cap_recs[t] : 64;
                recs[t] = xrealloc(recs[t], (size_t)cap_recs[t] * sizeof *recs[t]);
            }
            cur = &recs[t][n_recs[t]++];
            memset(cur, 0, sizeof *cur);
            cur->def = opened;
            cur->file = file;
            cur->line = ln;
            cur->val[0] = xstrndup(val, strlen(val));
            cur->vline[0] = ln;
            last_field = 0;
            if (t == T_TMPLS) {
                if (!domain) error_at(file, ln, "'op' before any 'domain' line");
                cur->domain = xstrndup(domain ? domain : "", domain ? strlen(domain) : 0);
            }
            continue;
        }
        if (!cur) {
            char openers[128] = "";
            for (int d = 0; d < N_DEFS; d++)
                if (!strcmp(defs[d].file, name))
                    snprintf(openers + strlen(openers), sizeof openers - strlen(openers), "%s'%s'", openers[0] ? " or " : "", defs[d].f[0].name);
            error_at(file, ln, "'%.*s' outside a record (a record starts with %s)", (int)klen, line, openers);
            continue;
        }
        int fi = -1;
        for (int k = 1; k < MAX_FIELDS && cur->def->f[k].name; k++)
            if (strlen(cur->def->f[k].name) == klen && !memcmp(cur->def->f[k].name, line, klen)) fi = k;
        if (fi < 0) {
            char fields[256] = "";
            for (int k = 1; k < MAX_FIELDS && cur->def->f[k].name; k++)
                snprintf(fields + strlen(fields), sizeof fields - strlen(fields), "%s%s", k > 1 ? " " : "", cur->def->f[k].name);
            error_at(file, ln, "unknown field '%.*s' in %s '%s' (fields: %s)", (int)klen, line, cur->def->f[0].name,
                     cur->val[0], fields);
            last_field = -1;
            continue;
        }
        if (cur->val[fi]) {
            error_at(file, ln, "'%s' twice in %s '%s' (first at line %d)", cur->def->f[fi].name, cur->def->f[0].name,
                     cur->val[0], cur->vline[fi]);
            last_field = -1;
            continue;
        }
        cur->val[fi] = xstrndup(val, strlen(val));
        cur->vline[fi] = ln;
        last_field = fi;
    }
    free(line);
    free(domain);
    fclose(f);
}

/* ------------------------------------------------------------------ checks across records */

static const struct record *find(int t, const char *key)
{
    for (int i = 0; i < n_recs[t]; i++)
        if (!strcmp(recs[t][i].val[0], key)) return &recs[t][i];
    return NULL;
}

static void check_all(void)
{
    for (int t = 0; t < T_COUNT; t++) {
        if (!n_recs[t] && !unreadable) error_at(paths[t], 0, "no records");
        for (int i = 0; i < n_recs[t]; i++) {
            struct record *r = &recs[t][i];
            for (int k = 0; k < MAX_FIELDS && r->def->f[k].name; k++) {
                if (r->val[k]) check_value(r, k);
                else if (r->def->f[k].required)
                    error_at(r->file, r->line, "%s '%s' has no '%s'", r->def->f[0].name, r->val[0], r->def->f[k].name);
            }
            if (t != T_TMPLS) {
                const struct record *first = find(t, r->val[0]);
                if (first != r) error_at(r->file, r->line, "'%s' defined twice (first at line %d)", r->val[0], first->line);
            }
        }
    }
    if (unreadable) return;
    /* kinds drawn from a word list name one */
    for (int i = 0; i < n_recs[T_KINDS]; i++) {
        const struct record *r = &recs[T_KINDS][i];
        if (r->val[2] && (!strcmp(r->val[2], "word") || !strcmp(r->val[2], "word_indexed")) &&
            (!r->val[3] || !find(T_WORDS, r->val[3])))
            error_at(r->file, r->vline[3] ? r->vline[3] : r->line, "%s '%s': gen %s needs 'arg' naming a list of words.txt",
                     r->def->f[0].name, r->val[0], r->val[2]);
    }
    /* templates name kinds that exist */
    for (int i = 0; i < n_recs[T_TMPLS]; i++) {
        const struct record *r = &recs[T_TMPLS][i];
        for (int k = 1; k < MAX_FIELDS && r->def->f[k].name; k++) {
            if (r->def->f[k].check != V_KEYS || !r->val[k]) continue;
            for (const char *p = r->val[k]; *p;) {
                while (*p == ' ') p++;
                size_t len = strcspn(p, " ");
                if (!len) break;
                char key[128];
                size_t kl = len - (r->def->f[k].bang && p[len - 1] == '!');
                snprintf(key, sizeof key, "%.*s", (int)kl, p);
                if (!find(T_KINDS, key))
                    error_at(r->file, r->vline[k], "'%s' names kind '%s', which kinds.txt does not define", r->def->f[k].name, key);
                p += len;
            }
        }
    }
}

/* ------------------------------------------------------------------ writing C */

static void put_str(FILE *o, const char *s)
{
    if (!s) {
        fputs("NULL", o);
        return;
    }
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(o, "\\%c", *p);
        else if (*p == '?') fputs("\\?", o); /* no trigraph can form */
        else fputc(*p, o);                    /* UTF-8 bytes as they are, like the sources */
    }
    fputc('"', o);
}

static void put_enum(FILE *o, const struct field_def *fd, const char *v)
{
    for (int w = 0; fd->words[w]; w++)
        if (!strcmp(fd->words[w], v)) fputs(fd->cnames[w], o);
}

static void put_flags(FILE *o, const struct field_def *fd, const char *v)
{
    if (!v) {
        fputc('0', o);
        return;
    }
    bool any = false;
    for (int w = 0; fd->words[w]; w++) {
        size_t len = strlen(fd->words[w]);
        for (const char *p = v; *p;) {
            size_t l = strcspn(p, " ");
            if (l == len && !memcmp(p, fd->words[w], len)) {
                fprintf(o, "%s%s", any ? " | " : "", fd->cnames[w]);
                any = true;
            }
            p += l;
            if (*p) p++;
        }
    }
}

static int write_c(const char *out)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    FILE *o = fopen(tmp, "w");
    if (!o) {
        fprintf(stderr, "corpus_tables: cannot write %s\n", tmp);
        return 1;
    }
    fputs("/* Generated by tools/corpus_tables from data/corpus/ at build time: edit those files,\n"
          " * not this one (src/corpus/corpus_tables.h says why). */\n"
          "#include <stddef.h>\n\n#include \"corpus/corpus_tables.h\"\n\n",
          o);
    fputs("const struct corpus_word_list corpus_word_lists[] = {\n", o);
    for (int i = 0; i < n_recs[T_WORDS]; i++) {
        const struct record *r = &recs[T_WORDS][i];
        fputs("    {", o);
        put_str(o, r->val[0]);
        fputs(", ", o);
        put_str(o, r->val[1]);
        fputs("},\n", o);
    }
    fprintf(o, "};\nconst int corpus_n_word_lists = %d;\n\n", n_recs[T_WORDS]);

    fputs("const struct corpus_kind corpus_kind_table[] = {\n", o);
    for (int i = 0; i < n_recs[T_KINDS]; i++) {
        const struct record *r = &recs[T_KINDS][i];
        const struct field_def *f = r->def->f;
        bool result = !strcmp(f[0].name, "result");
        /* {key, type, gen, arg, names, descs, label, frames, format, flags} */
        fputs("    {", o);
        put_str(o, r->val[0]);
        fputs(", ", o);
        put_enum(o, &f[1], r->val[1]);
        fputs(", ", o);
        put_str(o, r->val[2]);
        fputs(", ", o);
        put_str(o, r->val[3]);
        fputs(", ", o);
        if (result) {
            put_str(o, r->val[0]);
            fputs(", \"\", ", o);
            put_str(o, r->val[4]);
            fputs(", NULL, NULL, 0", o);
        } else {
            for (int k = 4; k <= 8; k++) {
                put_str(o, r->val[k]);
                fputs(", ", o);
            }
            put_flags(o, &f[9], r->val[9]);
        }
        fputs("},\n", o);
    }
    fprintf(o, "};\nconst int corpus_n_kind_table = %d;\n\n", n_recs[T_KINDS]);

    fputs("const struct corpus_tmpl corpus_tmpl_table[] = {\n", o);
    for (int i = 0; i < n_recs[T_TMPLS]; i++) {
        const struct record *r = &recs[T_TMPLS][i];
        /* {domain, act, verbs, objs, vp, np, params, results, descs} */
        fputs("    {", o);
        put_str(o, r->domain);
        fputs(", ", o);
        put_enum(o, &r->def->f[0], r->val[0]);
        for (int k = 1; k <= 7; k++) {
            fputs(", ", o);
            put_str(o, r->val[k]);
        }
        fputs("},\n", o);
    }
    fprintf(o, "};\nconst int corpus_n_tmpl_table = %d;\n", n_recs[T_TMPLS]);
    if (fclose(o) || rename(tmp, out)) {
        fprintf(stderr, "corpus_tables: cannot write %s\n", out);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *dir = NULL;
    bool check = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = true;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!dir && argv[i][0] != '-') dir = argv[i];
        else dir = NULL, i = argc;
    }
    if (!dir || (!check && !out) || (check && out)) {
        fprintf(stderr, "usage: corpus_tables --check DIR | corpus_tables -o OUT.c DIR\n"
                        "  DIR holds words.txt, kinds.txt and templates.txt (data/corpus)\n");
        return 2;
    }
    for (int t = 0; t < T_COUNT; t++) read_file(dir, t);
    check_all();
    int rc = 0;
    if (n_errors) {
        fprintf(stderr, "corpus_tables: %d error%s in %s%s\n", n_errors, n_errors == 1 ? "" : "s", dir,
                n_errors > MAX_SHOWN ? " (the first shown)" : "");
        rc = 1;
    } else if (out) {
        rc = write_c(out);
    } else {
        printf("corpus_tables: %s: %d word lists, %d kinds, %d templates: ok\n", dir, n_recs[T_WORDS], n_recs[T_KINDS],
               n_recs[T_TMPLS]);
    }
    for (int t = 0; t < T_COUNT; t++) {
        for (int i = 0; i < n_recs[t]; i++) {
            for (int k = 0; k < MAX_FIELDS; k++) free(recs[t][i].val[k]);
            free(recs[t][i].domain);
        }
        free(recs[t]);
    }
    return rc;
}
