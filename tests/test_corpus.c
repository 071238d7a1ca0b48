/* test_corpus.c — the synthetic tool-calling corpus (tern corpus toolcalls, src/corpus/).
 *
 * One corpus of 3000 conversations is written once (setup) and read by most tests:
 *   - every line parses; messages follow the OpenAI shape; 1-6 tools; every tool call names an
 *     offered tool and its arguments validate against that tool's JSON Schema (a checker below
 *     for the subset the generator emits: types, required, no unknown keys, enum, nested
 *     objects, arrays, minimum/maximum, formats date/date-time/email); each call is answered
 *     by a tool message and the conversation ends with an assistant answer; the rendered prompt
 *     fits (corpus_render_estimate <= 4000 bytes, so <= 4096 tokens in any byte-level vocab)
 *   - test tools share neither names nor signatures with train/val tools
 *   - at least 300 tools and 25 domains appear; every kind appears
 *   - meta.private strings sit in the system prompt and never in an assistant message
 * and on their own: determinism (same seed -> same bytes, other seed -> other bytes), manifest
 * SHA-256s, the generator tables' consistency, normalization of mentions by the value
 * generators (dates/times relative to today, numbers in words, money, units), bad arguments
 * and the CLI. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "corpus/corpus.h"
#include "corpus/corpus_gen.h"

#define CORPUS_N 3000

static char corpus_dir[512];

static const char *corpus_file(const char *split)
{
    static char p[600];
    snprintf(p, sizeof p, "%s/%s.jsonl", corpus_dir, split);
    return p;
}

static int setup(void **state)
{
    (void)state;
    snprintf(corpus_dir, sizeof corpus_dir, "%s/corpus", test_tmpdir());
    struct tern_corpus_params p = tern_corpus_default_params();
    p.seed = 11;
    p.size = CORPUS_N;
    tern_status st = tern_corpus_toolcalls_write(corpus_dir, &p, NULL);
    if (st) fprintf(stderr, "setup: %s\n", tern_last_error());
    return st ? -1 : 0;
}

/* Lines of a file, split in place. */
static int read_lines(const char *path, char **buf, char ***lines)
{
    *buf = test_read_file(path, NULL);
    assert_non_null(*buf);
    int n = 0, cap = 1024;
    *lines = malloc(sizeof **lines * (size_t)cap);
    for (char *s = *buf; *s;) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = '\0';
        if (n == cap) *lines = realloc(*lines, sizeof **lines * (size_t)(cap *= 2));
        (*lines)[n++] = s;
        if (!nl) break;
        s = nl + 1;
    }
    return n;
}

/* ------------------------------------------------------------------ JSON Schema subset */

static bool valid_date(const char *s)
{
    int y, m, d;
    char tail;
    if (strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3) return false;
    struct corpus_date dt = {y, m, d}, back = corpus_civil_from_days(corpus_days_from_civil(dt));
    return m >= 1 && m <= 12 && back.y == y && back.m == m && back.d == d;
}

static bool valid_datetime(const char *s)
{
    int h, mi, sec;
    char date[11];
    if (strlen(s) != 19 || s[10] != 'T') return false;
    memcpy(date, s, 10);
    date[10] = '\0';
    return valid_date(date) && sscanf(s + 11, "%2d:%2d:%2d", &h, &mi, &sec) == 3 && h < 24 && mi < 60 && sec < 60 &&
           s[13] == ':' && s[16] == ':';
}

static bool valid_email(const char *s)
{
    const char *at = strchr(s, '@');
    return at && at > s && strchr(at + 1, '.') && !strchr(at + 1, '@') && !strchr(s, ' ');
}

/* Returns NULL if v matches schema, else a message naming the JSON path. */
static const char *check(const cJSON *schema, const cJSON *v, const char *path)
{
    static char err[512];
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(schema, "type"));
    if (!type) return snprintf(err, sizeof err, "%s: schema without type", path), err;
    bool ok = !strcmp(type, "string")    ? cJSON_IsString(v)
              : !strcmp(type, "integer") ? cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble
              : !strcmp(type, "number")  ? cJSON_IsNumber(v)
              : !strcmp(type, "boolean") ? cJSON_IsBool(v)
              : !strcmp(type, "array")   ? cJSON_IsArray(v)
              : !strcmp(type, "object")  ? cJSON_IsObject(v)
                                         : false;
    if (!ok) return snprintf(err, sizeof err, "%s: expected %s", path, type), err;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (en) {
        bool in = false;
        const cJSON *e;
        cJSON_ArrayForEach(e, en) in |= cJSON_Compare(e, v, true);
        if (!in) return snprintf(err, sizeof err, "%s: not in enum", path), err;
    }
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(schema, "format"));
    if (fmt && cJSON_IsString(v)) {
        bool good = !strcmp(fmt, "date") ? valid_date(v->valuestring)
                    : !strcmp(fmt, "date-time") ? valid_datetime(v->valuestring)
                    : !strcmp(fmt, "email") ? valid_email(v->valuestring)
                                            : false;
        if (!good) return snprintf(err, sizeof err, "%s: '%s' is not a %s", path, v->valuestring, fmt), err;
    }
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(schema, "minimum");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(schema, "maximum");
    if ((mn && v->valuedouble < mn->valuedouble) || (mx && v->valuedouble > mx->valuedouble))
        return snprintf(err, sizeof err, "%s: %g out of bounds", path, v->valuedouble), err;
    if (cJSON_IsArray(v)) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
        if (!items) return snprintf(err, sizeof err, "%s: array schema without items", path), err;
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            char p[256];
            snprintf(p, sizeof p, "%s[%d]", path, i++);
            const char *r = check(items, e, p);
            if (r) return r;
        }
        if (i == 0) return snprintf(err, sizeof err, "%s: empty array", path), err;
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, e->string);
            if (!ps) return snprintf(err, sizeof err, "%s.%s: not a property of the schema", path, e->string), err;
            char p[256];
            snprintf(p, sizeof p, "%s.%s", path, e->string);
            const char *r = check(ps, e, p);
            if (r) return r;
        }
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(schema, "required")) {
            if (!cJSON_GetObjectItemCaseSensitive(v, e->valuestring))
                return snprintf(err, sizeof err, "%s.%s: required but missing", path, e->valuestring), err;
        }
    }
    return NULL;
}

/* The checker itself must reject what is wrong, or the corpus checks prove nothing. */
static void test_checker_rejects(void **state)
{
    (void)state;
    cJSON *schema = cJSON_Parse(
        "{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},"
        "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5},\"e\":{\"type\":\"string\",\"enum\":[\"a\",\"b\"]},"
        "\"o\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},\"required\":[\"x\"]},"
        "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"format\":\"email\"}}},\"required\":[\"d\"]}");
    static const char *const good[] = {"{\"d\":\"2025-02-28\"}", "{\"d\":\"2024-02-29\",\"n\":5,\"e\":\"b\",\"o\":{\"x\":1.5},\"l\":[\"a@b.c\"]}"};
    static const char *const bad[] = {
        "{}", "{\"d\":\"2025-02-29\"}", "{\"d\":\"2025-02-28\",\"n\":6}", "{\"d\":\"2025-02-28\",\"n\":2.5}",
        "{\"d\":\"2025-02-28\",\"e\":\"c\"}", "{\"d\":\"2025-02-28\",\"o\":{}}", "{\"d\":\"2025-02-28\",\"l\":[\"ab.c\"]}",
        "{\"d\":\"2025-02-28\",\"zz\":1}", "{\"d\":\"2025-02-28\",\"o\":{\"x\":\"1\"}}", "{\"d\":1}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cJSON *v = cJSON_Parse(good[i]);
        const char *r = check(schema, v, "$");
        if (r) fail_msg("good %s rejected: %s", good[i], r);
        cJSON_Delete(v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *v = cJSON_Parse(bad[i]);
        if (!check(schema, v, "$")) fail_msg("bad %s accepted", bad[i]);
        cJSON_Delete(v);
    }
    cJSON_Delete(schema);
}

/* ------------------------------------------------------------------ whole-corpus checks */

static const cJSON *find_tool(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name")), name)) return t;
    }
    return NULL;
}

static void check_conversation(const char *line, const char *where)
{
    cJSON *c = cJSON_Parse(line);
    if (!c) fail_msg("%s: not JSON", where);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(c, "meta");
    assert_true(cJSON_IsArray(msgs) && cJSON_IsArray(tools) && cJSON_IsObject(meta));
    int nt = cJSON_GetArraySize(tools);
    if (nt < 1 || nt > 6) fail_msg("%s: %d tools", where, nt);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type")), "function");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "description")));
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ps, "type")), "object");
    }
    assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "domain")));
    assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "kind")));
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(meta, "private")));
    /* message order: system, then turns; every call answered by a tool message right after */
    const cJSON *m = msgs->child;
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role")), "system");
    const cJSON *last = NULL;
    for (m = m->next; m; m = m->next) {
        last = m;
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        assert_non_null(role);
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (!calls) {
            assert_true(!strcmp(role, "user") || !strcmp(role, "assistant"));
            const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
            if (!content || !content[0]) fail_msg("%s: empty %s message", where, role);
            continue;
        }
        assert_string_equal(role, "assistant");
        const cJSON *call, *resp = m->next;
        cJSON_ArrayForEach(call, calls) {
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(call, "id"));
            assert_true(id && !strncmp(id, "call_", 5));
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(call, "type")), "function");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
            const char *args = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
            const cJSON *tool = name ? find_tool(tools, name) : NULL;
            if (!tool) fail_msg("%s: call to %s, which is not offered", where, name ? name : "?");
            cJSON *a = args ? cJSON_Parse(args) : NULL;
            if (!cJSON_IsObject(a)) fail_msg("%s: arguments of %s are not a JSON object", where, name);
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tool, "function"), "parameters");
            const char *r = check(schema, a, name);
            if (r) fail_msg("%s: %s\n  arguments %s", where, r, args);
            cJSON_Delete(a);
            /* the matching tool message */
            if (!resp) fail_msg("%s: call %s unanswered", where, id);
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "role")), "tool");
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "tool_call_id")), id);
            cJSON *result = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "content")));
            if (!cJSON_IsObject(result)) fail_msg("%s: tool result is not a JSON object", where);
            cJSON_Delete(result);
            resp = resp->next;
        }
        m = resp ? resp->prev : NULL;
        if (!m) break;
    }
    assert_non_null(last);
    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last, "role")), "assistant") ||
        !cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last, "content")))
        fail_msg("%s: does not end with an assistant answer", where);
    size_t est = corpus_render_estimate(c);
    if (est > CORPUS_MAX_RENDER_BYTES) fail_msg("%s: rendered prompt of %zu bytes", where, est);
    cJSON_Delete(c);
}

static void test_lines_valid(void **state)
{
    (void)state;
    static const char *const splits[] = {"train", "val", "test"};
    int total = 0;
    size_t sum_est = 0, max_est = 0;
    for (int s = 0; s < 3; s++) {
        char *buf, **lines;
        int n = read_lines(corpus_file(splits[s]), &buf, &lines);
        for (int i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "%s.jsonl:%d", splits[s], i + 1);
            check_conversation(lines[i], where);
            cJSON *c = cJSON_Parse(lines[i]);
            size_t e = corpus_render_estimate(c);
            sum_est += e;
            if (e > max_est) max_est = e;
            cJSON_Delete(c);
        }
        total += n;
        free(lines);
        free(buf);
    }
    assert_int_equal(total, CORPUS_N);
    print_message("%d conversations valid; rendered prompt bytes: mean %zu, max %zu\n", total,
                  sum_est / (size_t)total, max_est);
}

/* Signature of a tool as the generator defines it: its parameter names, types, required flags. */
static void signature(const cJSON *tool, char *out, size_t cap)
{
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tool, "function"), "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(ps, "properties"), *req = cJSON_GetObjectItemCaseSensitive(ps, "required");
    char items[16][96];
    int n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        bool r = false;
        const cJSON *q;
        cJSON_ArrayForEach(q, req) r |= !strcmp(q->valuestring, p->string);
        snprintf(items[n++], sizeof items[0], "%s:%s:%d", p->string,
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "type")), r);
    }
    for (int i = 1; i < n; i++) /* sorted: order in the schema does not matter */
        for (int j = i; j > 0 && strcmp(items[j - 1], items[j]) > 0; j--) {
            char t[96];
            memcpy(t, items[j], sizeof t);
            memcpy(items[j], items[j - 1], sizeof t);
            memcpy(items[j - 1], t, sizeof t);
        }
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s;", items[i]);
    }
}

struct strset {
    char **s;
    int n, cap;
};
static bool strset_has(const struct strset *set, const char *s)
{
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->s[i], s)) return true;
    return false;
}
static void strset_add(struct strset *set, const char *s)
{
    if (strset_has(set, s)) return;
    if (set->n == set->cap) set->s = realloc(set->s, sizeof *set->s * (size_t)(set->cap = set->cap ? set->cap * 2 : 256));
    set->s[set->n++] = strdup(s);
}
static void strset_free(struct strset *set)
{
    for (int i = 0; i < set->n; i++) free(set->s[i]);
    free(set->s);
}

static void collect(const char *split, struct strset *names, struct strset *sigs, struct strset *domains,
                    struct strset *kinds)
{
    char *buf, **lines;
    int n = read_lines(corpus_file(split), &buf, &lines);
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_Parse(lines[i]);
        const cJSON *t, *meta = cJSON_GetObjectItemCaseSensitive(c, "meta");
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(c, "tools")) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
            strset_add(names, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name")));
            char sig[2048];
            signature(t, sig, sizeof sig);
            strset_add(sigs, sig);
        }
        if (domains) strset_add(domains, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "domain")));
        if (kinds) strset_add(kinds, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "kind")));
        cJSON_Delete(c);
    }
    free(lines);
    free(buf);
}

static void test_split_disjoint(void **state)
{
    (void)state;
    struct strset tn = {0}, ts = {0}, xn = {0}, xs = {0};
    collect("train", &tn, &ts, NULL, NULL);
    collect("val", &tn, &ts, NULL, NULL);
    collect("test", &xn, &xs, NULL, NULL);
    for (int i = 0; i < xn.n; i++)
        if (strset_has(&tn, xn.s[i])) fail_msg("test tool %s also occurs in train/val", xn.s[i]);
    for (int i = 0; i < xs.n; i++)
        if (strset_has(&ts, xs.s[i])) fail_msg("a test tool signature occurs in train/val: %s", xs.s[i]);
    print_message("train+val: %d tools, %d signatures; test: %d tools, %d signatures, none shared\n", tn.n, ts.n,
                  xn.n, xs.n);
    assert_true(xn.n >= 30);
    strset_free(&tn);
    strset_free(&ts);
    strset_free(&xn);
    strset_free(&xs);
}

static void test_minimums(void **state)
{
    (void)state;
    struct strset names = {0}, sigs = {0}, domains = {0}, kinds = {0};
    collect("train", &names, &sigs, &domains, &kinds);
    collect("val", &names, &sigs, &domains, NULL);
    collect("test", &names, &sigs, &domains, NULL);
    print_message("%d distinct tools, %d domains, %d kinds\n", names.n, domains.n, kinds.n);
    assert_true(names.n >= 300);
    assert_true(domains.n >= 25);
    for (int k = 0; k < CK_COUNT; k++)
        if (!strset_has(&kinds, corpus_kind_names[k])) fail_msg("kind %s never occurs in train", corpus_kind_names[k]);
    strset_free(&names);
    strset_free(&sigs);
    strset_free(&domains);
    strset_free(&kinds);
    /* the manifest states the pool */
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", corpus_dir);
    char *text = test_read_file(path, NULL);
    cJSON *m = cJSON_Parse(text);
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(m, "tools");
    assert_true(cJSON_GetObjectItemCaseSensitive(tools, "pool")->valuedouble >= 300);
    assert_true(cJSON_GetObjectItemCaseSensitive(tools, "domains")->valuedouble >= 25);
    cJSON_Delete(m);
    free(text);
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

static void test_private_never_leaks(void **state)
{
    (void)state;
    static const char *const splits[] = {"train", "val", "test"};
    int n_secret = 0;
    for (int s = 0; s < 3; s++) {
        char *buf, **lines;
        int n = read_lines(corpus_file(splits[s]), &buf, &lines);
        for (int i = 0; i < n; i++) {
            cJSON *c = cJSON_Parse(lines[i]);
            const cJSON *priv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "meta"), "private");
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages"), *p;
            cJSON_ArrayForEach(p, priv) {
                n_secret++;
                const char *sys = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(msgs->child, "content"));
                if (!contains(sys, p->valuestring)) fail_msg("%s:%d: private string not in the system prompt", splits[s], i + 1);
                const cJSON *m;
                cJSON_ArrayForEach(m, msgs) {
                    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role")), "assistant")) continue;
                    if (contains(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content")), p->valuestring))
                        fail_msg("%s:%d: assistant message reveals %s", splits[s], i + 1, p->valuestring);
                    const cJSON *call;
                    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
                        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
                        if (contains(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "arguments")), p->valuestring))
                            fail_msg("%s:%d: tool call reveals %s", splits[s], i + 1, p->valuestring);
                    }
                }
            }
            cJSON_Delete(c);
        }
        free(lines);
        free(buf);
    }
    print_message("%d private strings checked\n", n_secret);
    assert_true(n_secret >= 100);
}

/* ------------------------------------------------------------------ determinism and manifest */

static void write_corpus(const char *name, uint64_t seed, int64_t size, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/%s", test_tmpdir(), name);
    struct tern_corpus_params p = tern_corpus_default_params();
    p.seed = seed;
    p.size = size;
    assert_tern_ok(tern_corpus_toolcalls_write(dir, &p, NULL));
}

static bool same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    bool same = na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void test_determinism(void **state)
{
    (void)state;
    char a[512], b[512], c[512], pa[600], pb[600], pc[600];
    write_corpus("det_a", 5, 400, a, sizeof a);
    write_corpus("det_b", 5, 400, b, sizeof b);
    write_corpus("det_c", 6, 400, c, sizeof c);
    static const char *const files[] = {"train.jsonl", "val.jsonl", "test.jsonl", "manifest.json"};
    for (int i = 0; i < 4; i++) {
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        snprintf(pc, sizeof pc, "%s/%s", c, files[i]);
        if (!same_file(pa, pb)) fail_msg("%s differs between two runs with seed 5", files[i]);
        if (same_file(pa, pc)) fail_msg("%s is the same for seeds 5 and 6", files[i]);
    }
}

static void test_manifest_sha(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", corpus_dir);
    char *text = test_read_file(path, NULL);
    cJSON *m = cJSON_Parse(text);
    assert_non_null(m);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(m, "seed")->valuedouble, 11);
    static const char *const splits[] = {"train", "val", "test"};
    int total = 0;
    for (int s = 0; s < 3; s++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "files"), splits[s]);
        size_t n;
        char *data = test_read_file(corpus_file(splits[s]), &n);
        struct sha256_ctx h;
        uint8_t d[32];
        char hex[65];
        sha256_init(&h);
        sha256_update(&h, n, (const uint8_t *)data);
        sha256_digest(&h, 32, d);
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "sha256")), hex);
        assert_int_equal((size_t)cJSON_GetObjectItemCaseSensitive(f, "bytes")->valuedouble, n);
        total += (int)cJSON_GetObjectItemCaseSensitive(f, "conversations")->valuedouble;
        /* per-kind counts add up to the split */
        int sum = 0;
        const cJSON *k;
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "kinds"), splits[s]))
            sum += (int)k->valuedouble;
        assert_int_equal(sum, (int)cJSON_GetObjectItemCaseSensitive(f, "conversations")->valuedouble);
        free(data);
    }
    assert_int_equal(total, CORPUS_N);
    cJSON_Delete(m);
    free(text);
}

/* ------------------------------------------------------------------ tables */

static bool gen_exists(const char *name)
{
    for (const struct corpus_gen_entry *g = corpus_gens; g->name; g++)
        if (!strcmp(g->name, name)) return true;
    return false;
}

static void check_keys(const char *spec, const char *what, int ti)
{
    char key[64];
    for (const char *p = spec; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        snprintf(key, sizeof key, "%.*s", (int)(e - p - (e[-1] == '!')), p);
        if (!corpus_kind_find(key)) fail_msg("template %d (%s): %s kind '%s' does not exist", ti, corpus_tmpl_at(ti)->objs, what, key);
        p = e;
    }
}

static void test_tables(void **state)
{
    (void)state;
    for (int i = 0; i < corpus_n_kinds(); i++) {
        const struct corpus_kind *k = corpus_kind_at(i);
        if (!gen_exists(k->gen)) fail_msg("kind %s: no generator '%s'", k->key, k->gen);
        if (corpus_kind_find(k->key) != k) fail_msg("kind %s defined twice", k->key);
        if (!strcmp(k->gen, "enum") && !strchr(k->arg, '=')) fail_msg("kind %s: enum without values", k->key);
        if (!strcmp(k->gen, "array")) {
            char item[64];
            snprintf(item, sizeof item, "%.*s", (int)strcspn(k->arg, ":"), k->arg);
            if (!corpus_kind_find(item)) fail_msg("kind %s: array of unknown kind '%s'", k->key, item);
        }
    }
    for (int i = 0; i < corpus_n_tmpls(); i++) {
        const struct corpus_tmpl *t = corpus_tmpl_at(i);
        check_keys(t->params, "parameter", i);
        if (t->results) check_keys(t->results, "result", i);
        if (t->vp) {
            char alt[128];
            for (int a = 0; a < corpus_alt_count(t->vp); a++) {
                corpus_alt(t->vp, a, alt, sizeof alt);
                int slashes = 0;
                for (char *s = alt; *s; s++) slashes += *s == '/';
                if (slashes != 2) fail_msg("template %d: verb phrase '%s' is not base/gerund/participle", i, alt);
            }
        }
        assert_true(t->descs[0] >= 'A' && t->descs[0] <= 'Z');
    }
    const char *doms[64];
    assert_true(corpus_domains(doms, 64) >= 25);
}

/* ------------------------------------------------------------------ normalization */

static int word_number(const char *s, const char **end)
{
    static const char *const ones[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                       "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                                       "seventeen", "eighteen", "nineteen"};
    static const char *const tens[] = {"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
    if (isdigit((unsigned char)*s)) {
        int v = 0;
        while (isdigit((unsigned char)*s) || (*s == ',' && isdigit((unsigned char)s[1]))) {
            if (*s != ',') v = v * 10 + (*s - '0');
            s++;
        }
        *end = s;
        return v;
    }
    for (int i = 0; i < 8; i++) {
        size_t l = strlen(tens[i]);
        if (!strncmp(s, tens[i], l)) {
            int v = 20 + 10 * i;
            s += l;
            if (*s == '-')
                for (int k = 1; k < 10; k++)
                    if (!strncmp(s + 1, ones[k], strlen(ones[k]))) {
                        v += k;
                        s += 1 + strlen(ones[k]);
                        break;
                    }
            *end = s;
            return v;
        }
    }
    for (int i = 19; i >= 0; i--) {
        size_t l = strlen(ones[i]);
        if (!strncmp(s, ones[i], l)) {
            *end = s + l;
            return i;
        }
    }
    *end = s;
    return -1;
}

static int month_index(const char *s)
{
    for (int m = 0; m < 12; m++)
        if (!strncmp(s, corpus_month_names[m], strlen(corpus_month_names[m]))) return m + 1;
    return 0;
}

/* An independent reading of the date mentions the generators produce, relative to today. */
static bool parse_date(const char *s, struct corpus_date today, struct corpus_date *out)
{
    int64_t t0 = corpus_days_from_civil(today);
    const char *e;
    int n, y, m, d;
    if (!strcmp(s, "today")) return *out = today, true;
    if (!strcmp(s, "tomorrow")) return *out = corpus_civil_from_days(t0 + 1), true;
    if (!strcmp(s, "yesterday")) return *out = corpus_civil_from_days(t0 - 1), true;
    if (!strcmp(s, "the day after tomorrow")) return *out = corpus_civil_from_days(t0 + 2), true;
    if (!strcmp(s, "a week from today")) return *out = corpus_civil_from_days(t0 + 7), true;
    if (!strcmp(s, "two weeks from today")) return *out = corpus_civil_from_days(t0 + 14), true;
    if (!strncmp(s, "in ", 3) && (n = word_number(s + 3, &e)) >= 0 && !strcmp(e, " days"))
        return *out = corpus_civil_from_days(t0 + n), true;
    if ((n = word_number(s, &e)) >= 0 && e != s && !strcmp(e, " days ago")) return *out = corpus_civil_from_days(t0 - n), true;
    const char *wd = !strncmp(s, "this coming ", 12) ? s + 12 : !strncmp(s, "last ", 5) ? s + 5 : s;
    for (int k = 0; k < 7; k++)
        if (!strcmp(wd, corpus_weekday_names[k])) {
            int step = wd == s + 5 ? -1 : 1;
            int64_t z = t0 + step;
            while (corpus_weekday(corpus_civil_from_days(z)) != k) z += step;
            return *out = corpus_civil_from_days(z), true;
        }
    if (sscanf(s, "%4d-%2d-%2d", &y, &m, &d) == 3 && strlen(s) == 10) return *out = (struct corpus_date){y, m, d}, true;
    y = today.y;
    const char *p = s;
    if (!strncmp(p, "the ", 4)) p += 4;
    if ((m = month_index(p))) { /* "March 5", "March 5th", "March 5, 2026" */
        p += strlen(corpus_month_names[m - 1]) + 1;
        d = (int)strtol(p, (char **)&e, 10);
        while (isalpha((unsigned char)*e)) e++;
        if (*e == ',') y = atoi(e + 2);
        else if (*e) return false;
    } else { /* "5 March", "5 March 2026", "5th of March [2026]" */
        d = (int)strtol(p, (char **)&e, 10);
        while (isalpha((unsigned char)*e)) e++;
        if (!strncmp(e, " of", 3)) e += 3;
        if (*e != ' ' || !(m = month_index(e + 1))) return false;
        e += 1 + strlen(corpus_month_names[m - 1]);
        if (*e == ' ') y = atoi(e + 1);
        else if (*e) return false;
    }
    *out = (struct corpus_date){y, m, d};
    return true;
}

/* "17:30", "5pm", "5:30 pm", "noon", "half past five in the afternoon", "quarter to nine ..." */
static bool parse_time(const char *s, int *h, int *m)
{
    const char *e;
    if (!strcmp(s, "noon")) return *h = 12, *m = 0, true;
    if (isdigit((unsigned char)s[0]) && strlen(s) == 5 && s[2] == ':') return *h = atoi(s), *m = atoi(s + 3), true;
    bool pm = strstr(s, "afternoon") || strstr(s, "evening");
    if (!strncmp(s, "half past ", 10) || !strncmp(s, "quarter past ", 13)) {
        int v = word_number(s + (s[0] == 'h' ? 10 : 13), &e);
        *m = s[0] == 'h' ? 30 : 15;
        *h = (v % 12) + (pm ? 12 : 0);
        return v > 0;
    }
    if (!strncmp(s, "quarter to ", 11)) {
        int v = word_number(s + 11, &e);
        *h = ((v % 12) + (pm ? 12 : 0)) - 1;
        *m = 45;
        return v > 0;
    }
    int v = (int)strtol(s, (char **)&e, 10);
    *m = 0;
    if (*e == ':') *m = (int)strtol(e + 1, (char **)&e, 10);
    if (*e == ' ') e++;
    if (!strcmp(e, "am") || !strcmp(e, "pm")) {
        *h = (v % 12) + (e[0] == 'p' ? 12 : 0);
        return true;
    }
    return false;
}

static void test_normalized_dates(void **state)
{
    (void)state;
    const struct corpus_kind *kd = corpus_kind_find("forecast_date"), *kp = corpus_kind_find("since_date"),
                             *kt = corpus_kind_find("start_datetime");
    assert_non_null(kd);
    assert_non_null(kt);
    int checked = 0;
    for (uint64_t seed = 0; seed < 4000; seed++) {
        struct corpus_ctx c = {0};
        c.rng = corpus_rng_for(seed, 99, 0);
        c.today = corpus_civil_from_days(corpus_days_from_civil((struct corpus_date){2024, 1, 1}) + (int64_t)(seed % 1100));
        c.has_time = seed % 2;
        c.hour = 9 + (int)(seed % 9);
        c.minute = (int)(seed % 60);
        corpus_ctx_new_call(&c);
        const struct corpus_kind *k = seed % 3 == 0 ? kd : seed % 3 == 1 ? kp : kt;
        struct corpus_val v;
        corpus_gen(&c, k, &v);
        assert_true(cJSON_IsString(v.json));
        const char *iso = v.json->valuestring;
        struct corpus_date want;
        if (k != kt) {
            if (!parse_date(v.bare, c.today, &want)) fail_msg("cannot read date mention '%s'", v.bare);
            char exp[16];
            snprintf(exp, sizeof exp, "%04d-%02d-%02d", want.y, want.m, want.d);
            if (strcmp(exp, iso)) fail_msg("'%s' (today %04d-%02d-%02d) normalized to %s, expected %s", v.bare, c.today.y,
                                           c.today.m, c.today.d, iso, exp);
        } else {
            /* "<date> at <time>", "<time>, <date>", "tonight at 8", "this afternoon at 3", "in two hours" */
            char date[CORPUS_SAY] = "", time[CORPUS_SAY] = "";
            int h = -1, m = -1;
            const char *at = strstr(v.bare, " at "), *comma = strstr(v.bare, ", ");
            if (!strncmp(v.bare, "in ", 3) && (strstr(v.bare, "hour") || strstr(v.bare, "minutes"))) {
                int add = strstr(v.bare, "half an hour") ? 30 : strstr(v.bare, "45 minutes") ? 45
                        : strstr(v.bare, "an hour and a half") ? 90 : strstr(v.bare, "an hour") ? 60
                        : strstr(v.bare, "two hours") ? 120 : 180;
                int64_t z = corpus_days_from_civil(c.today) * 1440 + c.hour * 60 + c.minute + add;
                want = corpus_civil_from_days(z / 1440);
                h = (int)(z % 1440) / 60;
                m = (int)(z % 60);
            } else if (!strncmp(v.bare, "tonight at ", 11) || !strncmp(v.bare, "this afternoon at ", 18)) {
                want = c.today;
                const char *t = strstr(v.bare, " at ") + 4;
                h = atoi(t) + 12;
                m = strchr(t, ':') ? atoi(strchr(t, ':') + 1) : 0;
            } else {
                if (at) {
                    snprintf(date, sizeof date, "%.*s", (int)(at - v.bare), v.bare);
                    snprintf(time, sizeof time, "%s", at + 4);
                } else if (comma) {
                    snprintf(time, sizeof time, "%.*s", (int)(comma - v.bare), v.bare);
                    snprintf(date, sizeof date, "%s", comma + 2);
                }
                if (!parse_date(date, c.today, &want) || !parse_time(time, &h, &m))
                    fail_msg("cannot read date-time mention '%s'", v.bare);
            }
            char exp[32];
            snprintf(exp, sizeof exp, "%04d-%02d-%02dT%02d:%02d:00", want.y, want.m, want.d, h, m);
            if (strcmp(exp, iso)) fail_msg("'%s' (today %04d-%02d-%02d %02d:%02d) normalized to %s, expected %s", v.bare,
                                           c.today.y, c.today.m, c.today.d, c.hour, c.minute, iso, exp);
        }
        cJSON_Delete(v.json);
        checked++;
    }
    print_message("%d date and date-time mentions read back to their normalized values\n", checked);
}

/* "$1,250.50", "12,50 €" (decimal comma), "forty euros", "CHF 45" -> the number. */
static double parse_amount(const char *s)
{
    const char *p = s, *e;
    while (*p && !isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'z')) p++;
    if (!isdigit((unsigned char)*p)) return word_number(p, &e);
    char num[64];
    size_t k = 0;
    for (; (isdigit((unsigned char)*p) || *p == ',' || *p == '.') && k + 1 < sizeof num; p++) num[k++] = *p;
    num[k] = '\0';
    const char *comma = strrchr(num, ',');
    bool decimal_comma = comma && !strchr(num, '.') && strlen(comma + 1) == 2;
    char clean[64];
    size_t j = 0;
    for (size_t i = 0; i < k; i++) {
        if (num[i] == ',') {
            if (decimal_comma) clean[j++] = '.';
            continue;
        }
        clean[j++] = num[i];
    }
    clean[j] = '\0';
    return strtod(clean, NULL);
}

static void test_normalized_numbers(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 3000; seed++) {
        struct corpus_ctx c = {0};
        c.rng = corpus_rng_for(seed, 98, 0);
        c.today = (struct corpus_date){2025, 3, 14};
        corpus_ctx_new_call(&c);
        struct corpus_val v;
        const char *e;
        switch (seed % 5) {
        case 0: { /* "three nights" -> 3 */
            corpus_gen(&c, corpus_kind_find("nights"), &v);
            int n = word_number(v.bare, &e);
            if (n != (int)v.json->valuedouble) fail_msg("'%s' normalized to %g", v.bare, v.json->valuedouble);
            break;
        }
        case 1: { /* "an hour and a half" -> 90 minutes */
            corpus_gen(&c, corpus_kind_find("duration"), &v);
            double h = strstr(v.bare, "half an hour") ? 0.5 : strstr(v.bare, "an hour and a half") ? 1.5
                     : strstr(v.bare, "an hour and fifteen") ? 1.25 : !strcmp(v.bare, "an hour") ? 1 : -1;
            if (h < 0) {
                int n = word_number(v.bare, &e);
                if (strstr(v.bare, "two and a half")) h = 2.5;
                else if (!strcmp(v.bare, "1h15")) h = 1.25;
                else if (!strcmp(v.bare, "1.5 hours")) h = 1.5;
                else if (strstr(e, "minutes")) h = n / 60.0;
                else h = n;
            }
            if (h * 60 != v.json->valuedouble) fail_msg("'%s' normalized to %g minutes", v.bare, v.json->valuedouble);
            break;
        }
        case 2: { /* "2.5 km" -> 2500 (meters) */
            corpus_gen(&c, corpus_kind_find("radius"), &v);
            double x = strtod(v.bare, (char **)&e);
            if (strstr(e, "k")) x *= 1000;
            if (x != v.json->valuedouble) fail_msg("'%s' normalized to %g m", v.bare, v.json->valuedouble);
            break;
        }
        case 3: { /* "500 grams" -> 0.5 (kg) */
            corpus_gen(&c, corpus_kind_find("parcel_kg"), &v);
            double x = strtod(v.bare, (char **)&e);
            if (!strstr(e, "k")) x /= 1000;
            if (x != v.json->valuedouble) fail_msg("'%s' normalized to %g kg", v.bare, v.json->valuedouble);
            break;
        }
        default: { /* "€40", "40 euros", "12,50 €", "forty dollars" -> amount + linked currency */
            corpus_gen(&c, corpus_kind_find("amount"), &v);
            struct corpus_val cur;
            corpus_gen(&c, corpus_kind_find("currency"), &cur);
            const char *code = cur.json->valuestring;
            double x = parse_amount(v.bare);
            if (x != v.json->valuedouble) fail_msg("'%s' normalized to %g", v.bare, v.json->valuedouble);
            static const struct {
                const char *mark, *code;
            } marks[] = {{"€", "EUR"}, {"euro", "EUR"}, {"EUR", "EUR"}, {"£", "GBP"}, {"pound", "GBP"}, {"¥", "JPY"},
                         {"yen", "JPY"}, {"CA$", "CAD"}, {"Canadian", "CAD"}, {"R$", "BRL"}, {"₹", "INR"}, {"rupee", "INR"},
                         {"₩", "KRW"}, {"won", "KRW"}, {"Swiss", "CHF"}, {"CHF", "CHF"}, {"yuan", "CNY"}, {"CNY", "CNY"},
                         {"peso", "MXN"}, {"MXN", "MXN"}, {"kronor", "SEK"}, {"SEK", "SEK"}, {"reais", "BRL"},
                         {"BRL", "BRL"}, {"GBP", "GBP"}, {"JPY", "JPY"}, {"INR", "INR"}, {"KRW", "KRW"}, {"CAD", "CAD"},
                         {"$", "USD"}, {"dollar", "USD"}, {"USD", "USD"}};
            const char *want = NULL;
            for (size_t i = 0; i < sizeof marks / sizeof marks[0] && !want; i++)
                if (strstr(v.bare, marks[i].mark)) want = marks[i].code;
            if (!want || strcmp(want, code)) fail_msg("'%s' has currency %s, expected %s", v.bare, code, want ? want : "?");
            cJSON_Delete(cur.json);
            break;
        }
        }
        cJSON_Delete(v.json);
    }
}

/* ------------------------------------------------------------------ errors and CLI */

static void test_bad_args(void **state)
{
    (void)state;
    struct tern_corpus_params p = tern_corpus_default_params();
    p.size = 2;
    assert_int_equal(tern_corpus_toolcalls_write(test_tmpdir(), &p, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "size 2"));
    p.size = 10;
    p.val_percent = 60;
    p.test_percent = 40;
    assert_int_equal(tern_corpus_toolcalls_write(test_tmpdir(), &p, NULL), TERN_ERR_ARG);
    /* a directory that cannot be made: under a file */
    char file[600], dir[700];
    snprintf(file, sizeof file, "%s/plainfile", test_tmpdir());
    FILE *f = fopen(file, "w");
    fputs("x", f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/sub", file);
    p = tern_corpus_default_params();
    p.size = 10;
    assert_int_equal(tern_corpus_toolcalls_write(dir, &p, NULL), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), dir));
}

static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_cli(void **state)
{
    (void)state;
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s corpus toolcalls -o %s/cli --size 60 --seed 3 --json 2>/dev/null", test_tern_bin(), test_tmpdir());
    assert_int_equal(run(cmd, out, sizeof out), 0);
    cJSON *m = cJSON_Parse(out);
    assert_non_null(m);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(m, "size")->valuedouble, 60);
    cJSON_Delete(m);
    snprintf(cmd, sizeof cmd, "%s corpus toolcalls -o %s/cli2 --size zero 2>&1", test_tern_bin(), test_tmpdir());
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--size"));
    snprintf(cmd, sizeof cmd, "%s corpus recipes -o x 2>&1", test_tern_bin());
    assert_int_equal(run(cmd, out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_rejects),   cmocka_unit_test(test_tables),
        cmocka_unit_test(test_lines_valid),       cmocka_unit_test(test_split_disjoint),
        cmocka_unit_test(test_minimums),          cmocka_unit_test(test_private_never_leaks),
        cmocka_unit_test(test_manifest_sha),      cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_normalized_dates),  cmocka_unit_test(test_normalized_numbers),
        cmocka_unit_test(test_bad_args),          cmocka_unit_test(test_cli),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
