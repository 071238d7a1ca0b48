/* test_template_jinja.c — the Jinja subset beyond the fixture templates, and bad input.
 *
 * 1. tests/data/template/jinja_cases.json: ~70 small templates (whitespace control, loops,
 *    scoping, macros, every supported filter/test/method, printing of Python values, Markup,
 *    errors) rendered by Python Jinja2 configured as Hugging Face does (the generator script is
 *    beside it). tern must produce the same bytes, or fail with the same exception kind.
 * 2. Malformed templates fail with TemplateSyntaxError at the right line:col.
 * 3. Malformed conversations fail naming the JSON path.
 * 4. Recursion and size are bounded: runaway macros, deep nesting, huge ranges fail cleanly.
 * 5. A GGUF's own template and bos/eos text; ChatML fallback with a warning.
 * 6. The `tern template` CLI prints exactly the rendering, or an error and a non-zero exit. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "chat/tmpl.h"

#define FIXTURE_NOW 1736933400 /* 2025-01-15 09:30:00 UTC */

/* Render src with the variables of obj (a JSON object) through the internal API. */
static tern_status render_vars(const char *src, const cJSON *obj, char **out)
{
    struct tmpl_program *prog;
    tern_status st = tmpl_compile(src, strlen(src), &prog);
    if (st != TERN_OK) return st;
    struct tmpl_arena a;
    tmpl_arena_init(&a, 64u << 20);
    struct tmpl_var vars[32];
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, obj) {
        assert_true(n < 32);
        vars[n].name = x->string;
        assert_true(tmpl_from_cjson(&a, x, &vars[n].value));
        n++;
    }
    struct tmpl_render_opts o = {.now_unix = FIXTURE_NOW};
    const char *text;
    size_t len;
    st = tmpl_render(prog, &a, vars, n, &o, &text, &len);
    if (st == TERN_OK) {
        *out = malloc(len + 1);
        memcpy(*out, text, len + 1);
    }
    tmpl_arena_free(&a);
    tmpl_program_free(prog);
    return st;
}

static void test_jinja_reference(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/template/jinja_cases.json", test_source_dir());
    char *txt = test_read_file(path, NULL);
    assert_non_null(txt);
    cJSON *root = cJSON_Parse(txt);
    assert_non_null(root);
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(root, "vars");
    const cJSON *c;
    int n = 0, good = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *src = cJSON_GetObjectItemCaseSensitive(c, "src")->valuestring;
        bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "ok"));
        char *out = NULL;
        tern_status st = render_vars(src, vars, &out);
        n++;
        if (ok) {
            const char *want = cJSON_GetObjectItemCaseSensitive(c, "out")->valuestring;
            if (st != TERN_OK) print_message("%s: failed: %s\n", name, tern_last_error());
            else if (strcmp(out, want)) print_message("%s:\n  got  [%s]\n  want [%s]\n", name, out, want);
            else good++;
        } else {
            const char *kind = cJSON_GetObjectItemCaseSensitive(c, "kind")->valuestring;
            const char *msg = cJSON_GetObjectItemCaseSensitive(c, "msg")->valuestring;
            char needle[512];
            if (!strcmp(kind, "TemplateError")) snprintf(needle, sizeof needle, "TemplateError: %s", msg);
            else snprintf(needle, sizeof needle, "%s: ", kind);
            if (st == TERN_OK) print_message("%s: rendered [%s], Jinja raised %s: %s\n", name, out, kind, msg);
            else if (!strstr(tern_last_error(), needle) || !strstr(tern_last_error(), "line 1:"))
                print_message("%s: error [%s] lacks [%s] or line:col\n", name, tern_last_error(), needle);
            else good++;
        }
        free(out);
    }
    print_message("Jinja2 reference cases: %d/%d match\n", good, n);
    assert_true(n >= 60);
    assert_int_equal(good, n);
    cJSON_Delete(root);
    free(txt);
}

static void test_syntax_errors(void **state)
{
    (void)state;
    static const struct { const char *src, *where, *what; } bad[] = {
        {"{% if x %}abc", "line 1:4:", "never closed"},
        {"a\n{% for x in y %}\n{{ x }}", "line 2:4:", "'endfor'"},
        {"{{ x ", "line 1:1:", "unclosed '{{'"},
        {"ok\n  {% endif %}", "line 2:6:", "unexpected 'endif'"},
        {"{{ x + }}", "line 1:8:", "unexpected '}}'"},
        {"{% set %}", "line 1:8:", "expected a name"},
        {"x\n{{ 'abc }}", "line 2:4:", "unterminated string"},
        {"{# comment", "line 1:1:", "unclosed comment"},
        {"{% include 'x' %}", "line 1:4:", "not supported"},
        {"{{ f(a=1, 2) }}", "line 1:11:", "positional argument after keyword"},
        {"{{ x | }}", "line 1:8:", "expected a name"},
        {"{% macro m(a=1, b) %}{% endmacro %}", "line 1:18:", "non-default argument"},
        {"{{ @ }}", "line 1:4:", "unexpected character"},
        {"{% for x in y %}{% elif z %}{% endfor %}", "line 1:20:", "unexpected 'elif'"},
        {"{% if a %}{% else %}{% elif b %}{% endif %}", "line 1:24:", "unexpected 'elif'"},
        {"{% raw %}never ends", "line 1:1:", "unclosed 'raw'"},
        {"{% bogus %}", "line 1:4:", "unknown or misplaced statement 'bogus'"},
        {"{{ [1, 2 }}", "line 1:10:", "unexpected '}', expected ']'"},
        {"{% for x in y recursive %}{% endfor %}", "line 1:15:", "recursive"},
        {"{{ 99999999999999999999 }}", "line 1:4:", "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct tern_chat_template *t = NULL;
        tern_status st = tern_chat_template_create(bad[i].src, strlen(bad[i].src), &t);
        if (st != TERN_ERR_FORMAT) fail_msg("[%s] compiled (status %d)", bad[i].src, st);
        const char *e = tern_last_error();
        if (!strstr(e, bad[i].where) || !strstr(e, bad[i].what) || !strstr(e, "TemplateSyntaxError"))
            fail_msg("[%s]: error [%s], want [%s] and [%s]", bad[i].src, e, bad[i].where, bad[i].what);
        assert_null(t);
    }
}

static tern_status render_json(const char *src, const char *messages, const char *tools, char **out)
{
    struct tern_chat_template *t;
    tern_status st = tern_chat_template_create(src, strlen(src), &t);
    if (st) return st;
    cJSON *m = cJSON_Parse(messages), *tl = tools ? cJSON_Parse(tools) : NULL;
    assert_non_null(m);
    struct tern_chat_params p = tern_chat_default_params();
    p.messages = m;
    p.tools = tl;
    size_t n;
    *out = NULL;
    st = tern_chat_render(t, &p, out, &n);
    cJSON_Delete(m);
    cJSON_Delete(tl);
    tern_chat_template_free(t);
    return st;
}

static void test_bad_messages(void **state)
{
    (void)state;
    static const struct { const char *msgs, *tools, *path; } bad[] = {
        {"{\"role\": \"user\"}", NULL, "messages: expected an array"},
        {"[{\"role\": \"user\", \"content\": \"a\"}, 5]", NULL, "messages[1]: expected an object"},
        {"[{\"role\": 3}]", NULL, "messages[0].role: expected a string, got a number"},
        {"[{\"content\": \"x\"}]", NULL, "messages[0].role: expected a string, got nothing"},
        {"[{\"role\": \"user\", \"content\": {\"a\": 1}}]", NULL, "messages[0].content"},
        {"[{\"role\": \"assistant\", \"tool_calls\": {}}]", NULL, "messages[0].tool_calls: expected an array"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"1\"}]}]", NULL, "messages[0].tool_calls[0].function: expected an object"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"a\"}}, {\"function\": {\"name\": 1}}]}]", NULL,
         "messages[0].tool_calls[1].function.name"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"a\", \"arguments\": 7}}]}]", NULL,
         "messages[0].tool_calls[0].function.arguments"},
        {"[{\"role\": \"tool\", \"tool_call_id\": 5, \"content\": \"x\"}]", NULL, "messages[0].tool_call_id"},
        {"[]", "{}", "tools: expected an array"},
        {"[]", "[{\"type\": \"function\", \"function\": {\"name\": \"a\"}}, {\"function\": {}}]", "tools[1].function.name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        tern_status st = render_json("{{ messages }}", bad[i].msgs, bad[i].tools, &out);
        assert_int_equal(st, TERN_ERR_FORMAT);
        if (!strstr(tern_last_error(), bad[i].path)) fail_msg("error [%s], want [%s]", tern_last_error(), bad[i].path);
    }
}

static void test_bounds(void **state)
{
    (void)state;
    char *out;
    /* runaway macro recursion */
    assert_int_equal(render_json("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "[]", NULL, &out), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "RecursionError"));
    /* mutual recursion through a namespace-free pair */
    assert_int_equal(render_json("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "[]", NULL, &out),
                     TERN_ERR_FORMAT);
    /* deeply nested expressions and blocks are refused by the parser */
    size_t n = 20000;
    char *src = malloc(2 * n + 16);
    strcpy(src, "{{ ");
    memset(src + 3, '(', n);
    strcpy(src + 3 + n, "1");
    memset(src + 4 + n, ')', n);
    strcpy(src + 4 + 2 * n, " }}");
    struct tern_chat_template *t;
    assert_int_equal(tern_chat_template_create(src, strlen(src), &t), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "nesting"));
    free(src);
    src = malloc(n * 10 + 1);
    for (size_t i = 0; i < n; i++) memcpy(src + i * 10, "{% if 1 %}", 10);
    src[n * 10] = '\0';
    assert_int_equal(tern_chat_template_create(src, strlen(src), &t), TERN_ERR_FORMAT);
    free(src);
    src = malloc(2 * n + 16);
    strcpy(src, "{{ ");
    memset(src + 3, '[', n);
    memset(src + 3 + n, ']', n);
    strcpy(src + 3 + 2 * n, " }}");
    assert_int_equal(tern_chat_template_create(src, strlen(src), &t), TERN_ERR_FORMAT);
    free(src);
    /* deep data is fine: 900 levels of nested arrays through tojson (Python handles this too) */
    size_t d = 900;
    char *msgs = malloc(2 * d + 128);
    int k = sprintf(msgs, "[{\"role\": \"user\", \"content\": \"x\", \"meta\": ");
    memset(msgs + k, '[', d);
    memset(msgs + k + d, ']', d);
    strcpy(msgs + k + 2 * d, "}]");
    assert_tern_ok(render_json("{{ messages[0].meta|tojson }}", msgs, NULL, &out));
    assert_int_equal(strlen(out), 2 * d);
    free(out);
    free(msgs);
    /* big outputs and ranges are bounded */
    assert_int_equal(render_json("{{ range(100001)|length }}", "[]", NULL, &out), TERN_ERR_FORMAT);
    assert_int_equal(render_json("{{ 'x' * 100000000000 }}", "[]", NULL, &out), TERN_ERR_NOMEM);
    assert_int_equal(render_json("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "[]", NULL, &out),
                     TERN_ERR_NOMEM);
}

/* Python ints are unbounded; tern's are int64. Where Python's result does not fit, the render
 * is refused with OverflowError at line:col (never wrapped, never a trap); where Python raises,
 * tern raises the same kind. (Python's results that fit are in jinja_cases.json.) */
static void test_integer_limits(void **state)
{
    (void)state;
    static const struct { const char *src, *want; } bad[] = {
        /* the reported crash: SIGFPE in divisibleby (n % d with INT64_MIN / -1) */
        {"{{ (2 ** 63) is divisibleby(-1) }}", "line 1:7: OverflowError: integer result of 2 ** 63"},
        {"{{ (-9223372036854775807 - 1) // -1 }}", "OverflowError"},
        {"{{ 9223372036854775807 + 1 }}", "OverflowError: integer result of 9223372036854775807 + 1"},
        {"{{ -9223372036854775807 - 2 }}", "OverflowError"},
        {"{{ 4611686018427387904 * 2 }}", "OverflowError"},
        {"{{ 2 ** 64 }}", "OverflowError"},
        {"{{ 3 ** 1000000000000000000 }}", "OverflowError"},
        {"{{ -(-9223372036854775807 - 1) }}", "line 1:4: OverflowError"},
        {"{{ (-9223372036854775807 - 1)|abs }}", "OverflowError"},
        {"{{ 1e300|int }}", "OverflowError: int(1e+300) does not fit"},
        {"{{ '99999999999999999999'|int }}", "OverflowError"},
        {"{{ '-1e19'|int }}", "OverflowError"},
        {"{{ 9223372036854775807|round(-1) }}", "OverflowError"},
        {"{{ 5|round(19, 'floor') }}", "OverflowError"},
        {"{{ [9223372036854775807, 1]|sum }}", "OverflowError"},
        {"{{ (-8) ** 0.5 }}", "ValueError: a negative number raised to a fractional power"},
        {"{{ 1e308 ** 2 }}", "OverflowError"},
        {"{{ 9223372036854775808 }}", "line 1:4: TemplateSyntaxError: integer literal too large"},
        {"{{ range(-9223372036854775807 - 1, 9223372036854775807)|length }}", "OverflowError: Range too big"},
        {"{{ range(0, 9223372036854775807, 1)|length }}", "OverflowError: Range too big"},
        {"{{ 'x' * 1000000000000000000 }}", "MemoryError: repetition result is too large"},
        {"{{ [1, 2] * 1000000000000000000 }}", "MemoryError: repetition result is too large"},
        {"{{ x|int }}", "UndefinedError"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = NULL;
        tern_status st = render_json(bad[i].src, "[]", NULL, &out);
        if (st == TERN_OK) fail_msg("[%s] rendered [%s]", bad[i].src, out);
        if (!strstr(tern_last_error(), bad[i].want))
            fail_msg("[%s]: error [%s], want [%s]", bad[i].src, tern_last_error(), bad[i].want);
    }
    /* in range, exact: the extremes themselves */
    static const struct { const char *src, *want; } good[] = {
        {"{{ -9223372036854775807 - 1 }}", "-9223372036854775808"},
        {"{{ (-9223372036854775807 - 1) % -1 }}", "0"},
        {"{{ (-2) ** 63 }}", "-9223372036854775808"},
        {"{{ (-9223372036854775807 - 1) is divisibleby(-1) }}", "True"},
        {"{{ (-9223372036854775807 - 1)|int }}", "-9223372036854775808"},
        {"{{ '-9223372036854775808'|int }}", "-9223372036854775808"},
        {"{{ 9.2233720368547748e18|int }}", "9223372036854774784"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char *out = NULL;
        tern_status st = render_json(good[i].src, "[]", NULL, &out);
        if (st != TERN_OK) fail_msg("[%s]: %s", good[i].src, tern_last_error());
        if (strcmp(out, good[i].want)) fail_msg("[%s] gave [%s], want [%s]", good[i].src, out, good[i].want);
        free(out);
    }
}

/* Hostile templates end in bounded time and stack: loops that would run for hours hit the work
 * budget, data nested too deep for the recursive walkers and evaluation nested too deep for
 * the C stack fail with RecursionError, all at line:col. */
static void test_runaway(void **state)
{
    (void)state;
    static const struct { const char *src, *want; } bad[] = {
        /* 1e10 empty iterations */
        {"{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",
         "TemplateRuntimeError: the template did more than"},
        /* quadratic scans without allocating: substring, list membership, equality */
        {"{% set s = 'ab' * 30000000 %}{% for i in range(100000) %}{% if 'c' in s %}{% endif %}{% endfor %}",
         "TemplateRuntimeError"},
        {"{% set l = [0] * 1000000 %}{% for i in range(100000) %}{% if 1 in l %}{% endif %}{% endfor %}",
         "TemplateRuntimeError"},
        {"{% set l = [[0] * 10000] * 10000 %}{% for i in range(100000) %}{% if l == l %}{% endif %}{% endfor %}",
         "TemplateRuntimeError"},
        {"{% set l = range(100000)|list %}{{ l|unique|list|length }}", "TemplateRuntimeError"},
        /* data nested 5000 deep: printing, comparing, tojson */
        {"{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
         "RecursionError: values nested deeper than"},
        {"{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x == [ns.x] }}",
         "RecursionError"},
        {"{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x < [ns.x] }}",
         "RecursionError"},
        {"{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}",
         "RecursionError"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = NULL;
        tern_status st = render_json(bad[i].src, "[]", NULL, &out);
        if (st == TERN_OK) fail_msg("[%.80s] rendered", bad[i].src);
        if (!strstr(tern_last_error(), bad[i].want) || !strstr(tern_last_error(), "line 1:"))
            fail_msg("[%.80s]: error [%s], want [%s] at line:col", bad[i].src, tern_last_error(), bad[i].want);
    }
    /* macro recursion (depth 190, under the macro limit) through expressions nested 60 deep:
     * 12000 evaluation frames, refused before they overflow the stack */
    char src[4096];
    int k = snprintf(src, sizeof src, "{%% macro f(n) %%}{%% if n > 0 %%}{{ ");
    for (int i = 0; i < 60; i++) src[k++] = '[';
    k += snprintf(src + k, sizeof src - (size_t)k, "f(n - 1)");
    for (int i = 0; i < 60; i++) src[k++] = ']';
    snprintf(src + k, sizeof src - (size_t)k, " }}{%% endif %%}{%% endmacro %%}{{ f(190) }}");
    char *out = NULL;
    assert_int_equal(render_json(src, "[]", NULL, &out), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "RecursionError: evaluation nested deeper than"));
    /* the template source itself is bounded */
    size_t big = (8u << 20) + 1;
    char *huge = malloc(big);
    memset(huge, 'x', big);
    struct tern_chat_template *t = NULL;
    assert_int_equal(tern_chat_template_create(huge, big, &t), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "at most"));
    free(huge);
}

static void test_gguf_template(void **state)
{
    (void)state;
    const char *tokens[] = {"<unk>", "<s>", "</s>"};
    const char *tmpl = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}";
    for (int with = 0; with < 3; with++) {
        struct tern_gguf_writer *w;
        assert_tern_ok(tern_gguf_writer_create(0, &w));
        assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
        assert_tern_ok(tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 3));
        assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
        assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", with == 2 ? 7 : 2));
        if (with) assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl));
        char path[512];
        snprintf(path, sizeof path, "%s/tmpl%d.gguf", test_tmpdir(), with);
        assert_tern_ok(tern_gguf_writer_write(w, path));
        tern_gguf_writer_free(w);
        struct tern_gguf *g;
        assert_tern_ok(tern_gguf_open(path, &g));
        struct tern_chat_template *t = NULL;
        tern_status st = tern_chat_template_from_gguf(g, &t);
        tern_gguf_close(g);
        if (with == 2) { /* eos id out of range */
            assert_int_equal(st, TERN_ERR_FORMAT);
            assert_non_null(strstr(tern_last_error(), "tokenizer.ggml.eos_token_id"));
            continue;
        }
        assert_tern_ok(st);
        cJSON *m = cJSON_Parse("[{\"role\": \"user\", \"content\": \"hi\"}]");
        struct tern_chat_params p = tern_chat_default_params();
        p.messages = m;
        char *out;
        size_t n;
        assert_tern_ok(tern_chat_render(t, &p, &out, &n));
        if (with) {
            assert_string_equal(out, "<s>[user]hi</s>");
            assert_null(tern_chat_template_warning(t));
        } else {
            assert_string_equal(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
            assert_non_null(strstr(tern_chat_template_warning(t), "ChatML"));
        }
        free(out);
        p.bos_token = "B"; /* caller's text wins */
        p.eos_token = "E";
        assert_tern_ok(tern_chat_render(t, &p, &out, &n));
        if (with) assert_string_equal(out, "B[user]hiE");
        free(out);
        cJSON_Delete(m);
        tern_chat_template_free(t);
    }
}

static int run_cli(const char *args, const char *out_path, const char *err_path)
{
    size_t cap = strlen(args) + strlen(out_path) + strlen(err_path) + strlen(test_tern_bin()) + 64;
    char *cmd = malloc(cap);
    snprintf(cmd, cap, "'%s' template %s > '%s' 2> '%s'", test_tern_bin(), args, out_path, err_path);
    int rc = system(cmd);
    free(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_cli(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir_, "fixtures/templates");
    char dir[4096], conv[4600], out[4600], err[4600], args[16384], want_path[8192];
    snprintf(dir, sizeof dir, "%s", dir_);
    snprintf(conv, sizeof conv, "%s/conv.json", test_tmpdir());
    snprintf(out, sizeof out, "%s/out.txt", test_tmpdir());
    snprintf(err, sizeof err, "%s/err.txt", test_tmpdir());
    /* the tool_roundtrip case of cases.json, as an object with messages + tools */
    char *cases_txt;
    snprintf(want_path, sizeof want_path, "%s/cases.json", dir);
    assert_non_null(cases_txt = test_read_file(want_path, NULL));
    cJSON *cases = cJSON_Parse(cases_txt), *c;
    cJSON_ArrayForEach(c, cases)
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, "tool_roundtrip")) break;
    assert_non_null(c);
    char *js = cJSON_Print(c);
    FILE *f = fopen(conv, "w");
    fputs(js, f);
    fclose(f);
    free(js);
    cJSON_Delete(cases);
    free(cases_txt);

    snprintf(args, sizeof args, "--template '%s/Qwen-Qwen2.5-7B-Instruct.jinja' --eos-token '<|im_end|>' --messages '%s'", dir, conv);
    assert_int_equal(run_cli(args, out, err), 0);
    size_t gl, wl;
    char *got = test_read_file(out, &gl);
    snprintf(want_path, sizeof want_path, "%s/expected/Qwen-Qwen2.5-7B-Instruct/tool_roundtrip.txt", dir);
    char *want = test_read_file(want_path, &wl);
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(gl, wl);
    assert_memory_equal(got, want, wl);
    free(got);
    free(want);

    /* template error: non-zero exit, message on stderr, nothing on stdout */
    snprintf(args, sizeof args, "--template '%s/google-gemma-2-2b-it.jinja' --messages '%s'", dir, conv);
    assert_int_equal(run_cli(args, out, err), 1);
    got = test_read_file(err, NULL);
    assert_non_null(strstr(got, "TemplateError: System role not supported"));
    free(got);
    got = test_read_file(out, &gl);
    assert_int_equal(gl, 0);
    free(got);

    /* malformed JSON file: line:col */
    f = fopen(conv, "w");
    fputs("[\n  {\"role\": \"user\",, }\n]", f);
    fclose(f);
    snprintf(args, sizeof args, "--template '%s/google-gemma-2-2b-it.jinja' --messages '%s'", dir, conv);
    assert_int_equal(run_cli(args, out, err), 1);
    got = test_read_file(err, NULL);
    assert_non_null(strstr(got, "line 2:"));
    free(got);

    /* usage errors */
    assert_int_equal(run_cli("--messages x.json", out, err), 2);
    assert_int_equal(run_cli("--template a --bogus", out, err), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jinja_reference),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_bad_messages),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_integer_limits),
        cmocka_unit_test(test_runaway),
        cmocka_unit_test(test_gguf_template),
        cmocka_unit_test(test_cli),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
