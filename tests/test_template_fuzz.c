/* test_template_fuzz.c — seeded mutation fuzzing of the template lexer, parser and evaluator.
 *
 * Each iteration takes a fixture chat template, applies 1-8 random edits (delete / duplicate /
 * swap a span, insert Jinja punctuation or keywords, flip a byte, truncate), compiles it and,
 * when that succeeds, renders it with a tool-using conversation. The outcome must be TERN_OK
 * or a clean error whose message carries "line L:C" (or names the memory limit, or refuses
 * tools a mutant no longer reads): never a crash, hang, leak or sanitizer report (this suite
 * also runs under ASan+UBSan). Reproducible: the seed is fixed; a failing iteration prints its
 * number and mutated source. The coverage-guided counterpart is tests/fuzz/fuzz_template.c. */
#include "test_support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERATIONS 20000

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return n ? (uint32_t)(rng_state % n) : 0;
}

static const char *const snippets[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "(", ")", "[", "]", "{", "}",
    "'", "\"", "\\", ",", ":", "|", ".", "=", "==", "~", "+", "*", "**", "//", " if ", " else ",
    " for ", " in ", " not ", " is ", " and ", " or ", "endif", "endfor", "endmacro", "endset",
    "{% endif %}", "{% endfor %}", "{% else %}", "{% break %}", "loop.", "ns.", "messages[0]",
    "|tojson", "|length", "|items", "|trim", "(1,", "raise_exception('x')", "{% set x = ",
    "{% macro m() %}", "{{ m() }}", "none", "true", "0", "-1", "1e309", "'\\u12'", "\xc3", "\xff",
    "{% raw %}", "{% endraw %}", "range(99999)", "[::-1]", "[1:", "namespace(a=1)",
};

static char *mutate(const char *src, size_t n, size_t *out_n)
{
    size_t cap = n * 2 + 4096;
    char *b = malloc(cap);
    memcpy(b, src, n);
    size_t len = n;
    int edits = 1 + (int)rnd(8);
    for (int e = 0; e < edits; e++) {
        size_t pos = len ? rnd((uint32_t)len) : 0;
        switch (rnd(6)) {
        case 0: { /* delete a span */
            size_t k = 1 + rnd(40);
            if (pos + k > len) k = len - pos;
            memmove(b + pos, b + pos + k, len - pos - k);
            len -= k;
            break;
        }
        case 1: { /* duplicate a span */
            size_t k = 1 + rnd(200);
            if (pos + k > len) k = len - pos;
            if (len + k >= cap) break;
            memmove(b + pos + k, b + pos, len - pos);
            len += k;
            break;
        }
        case 2: { /* insert a snippet */
            const char *s = snippets[rnd(sizeof snippets / sizeof snippets[0])];
            size_t k = strlen(s);
            if (len + k >= cap) break;
            memmove(b + pos + k, b + pos, len - pos);
            memcpy(b + pos, s, k);
            len += k;
            break;
        }
        case 3: /* flip a byte */
            if (len) b[pos] = (char)(b[pos] ^ (1 << rnd(8)));
            break;
        case 4: /* truncate */
            if (rnd(4) == 0) len = pos;
            break;
        default: { /* swap two spans of equal length */
            size_t k = 1 + rnd(30), q = len ? rnd((uint32_t)len) : 0;
            if (pos + k > len || q + k > len || (pos < q + k && q < pos + k)) break;
            char tmp[32];
            memcpy(tmp, b + pos, k);
            memmove(b + pos, b + q, k);
            memcpy(b + q, tmp, k);
            break;
        }
        }
    }
    b[len] = '\0';
    *out_n = len;
    return b;
}

static void test_fuzz(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir_, "fixtures/templates");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", dir_);
    char *srcs[32];
    size_t lens[32];
    int n_src = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) && n_src < 32) {
        size_t l = strlen(de->d_name);
        if (l < 7 || strcmp(de->d_name + l - 6, ".jinja")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        srcs[n_src] = test_read_file(path, &lens[n_src]);
        assert_non_null(srcs[n_src]);
        n_src++;
    }
    closedir(d);
    assert_true(n_src >= 10);
    /* deterministic order regardless of readdir */
    for (int i = 1; i < n_src; i++)
        for (int j = i; j > 0 && strcmp(srcs[j - 1], srcs[j]) > 0; j--) {
            char *t = srcs[j - 1]; srcs[j - 1] = srcs[j]; srcs[j] = t;
            size_t u = lens[j - 1]; lens[j - 1] = lens[j]; lens[j] = u;
        }

    const char *msgs =
        "[{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi \xc3\xa9\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abcdefghi\", \"type\": \"function\","
        "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1}}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"abcdefghi\", \"name\": \"f\", \"content\": \"ok\"}]";
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
                        " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", \"description\": \"x\"}},"
                        " \"required\": [\"a\"]}}}]";
    int compiled = 0, rendered = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        int which = (int)rnd((uint32_t)n_src);
        size_t n;
        char *m = mutate(srcs[which], lens[which], &n);
        struct tern_chat_template *t = NULL;
        tern_status st = tern_chat_template_create(m, n, &t);
        if (st == TERN_OK) {
            compiled++;
            struct tern_chat_params p = tern_chat_default_params();
            p.messages_json = msgs;
            p.tools_json = rnd(2) ? tools : NULL;
            p.now_unix = 1736933400;
            char *out = NULL;
            size_t ol;
            st = tern_chat_render(t, &p, &out, &ol);
            if (st == TERN_OK) {
                rendered++;
                assert_int_equal(out[ol], '\0'); /* NUL-terminated; NULs inside are legal */
                free(out);
            }
            tern_chat_template_free(t);
        }
        if (st != TERN_OK) {
            const char *e = tern_last_error();
            /* tools for a mutant that no longer names `tools`: refused, a clean outcome */
            bool located = strstr(e, "line ") != NULL || st == TERN_ERR_NOMEM ||
                           (st == TERN_ERR_UNSUPPORTED && strstr(e, "never reads `tools`"));
            if (!(st == TERN_ERR_FORMAT || st == TERN_ERR_NOMEM || st == TERN_ERR_UNSUPPORTED) || !located)
                fail_msg("iteration %d: status %d, message [%s] for source:\n%s", it, st, e, m);
        }
        free(m);
    }
    print_message("template fuzz: %d mutations, %d compiled, %d rendered, the rest failed cleanly with line:col\n",
                  ITERATIONS, compiled, rendered);
    assert_true(compiled > ITERATIONS / 20); /* the mutations must reach the evaluator too */
    for (int i = 0; i < n_src; i++) free(srcs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
