/* test_template_fixtures.c — every fixture chat template x conversation renders byte for byte
 * as Hugging Face transformers (Jinja2) did, and fails where it failed.
 *
 * Data: ../shared/fixtures/templates (README there): cases.json, specials.json,
 * expected/INDEX.tsv, expected/<template>/<case>.txt|.error. For .error files whose exception
 * is TemplateError (the template's own raise_exception), tern's message must contain the same
 * text; for UndefinedError / TypeError the same exception kind is required. strftime_now is
 * pinned to 2025-01-15 09:30:00 as in the fixtures. One deliberate difference: where a case has
 * tools and the template never names `tools`, Hugging Face drops them silently and tern refuses
 * with TERN_ERR_UNSUPPORTED (docs/tools.md "Chat templates and tool calls"). Prints the number of
 * matches. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE_NOW 1736933400 /* 2025-01-15 09:30:00 UTC */

static char *read_rel(const char *dir, const char *rel, size_t *len)
{
    char path[8192];
    int n = snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    return test_read_file(path, len);
}

/* word occurs in src as a whole identifier ("functools" does not count) */
static bool mentions_word(const char *src, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(src, word); p; p = strstr(p + 1, word)) {
        char before = p > src ? p[-1] : ' ', after = p[n];
        bool id_b = before == '_' || (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                    (before >= '0' && before <= '9');
        bool id_a = after == '_' || (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') ||
                    (after >= '0' && after <= '9');
        if (!id_b && !id_a) return true;
    }
    return false;
}

static const cJSON *find_case(const cJSON *cases, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return c;
    }
    return NULL;
}

/* first differing byte, for a readable failure */
static void show_diff(const char *tmpl, const char *cs, const char *got, size_t gl, const char *want, size_t wl)
{
    size_t i = 0;
    while (i < gl && i < wl && got[i] == want[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    print_message("MISMATCH %s / %s at byte %zu (got %zu bytes, want %zu)\n  got:  [%.*s]\n  want: [%.*s]\n",
                  tmpl, cs, i, gl, wl, (int)((gl - from) > 160 ? 160 : gl - from), got + from,
                  (int)((wl - from) > 160 ? 160 : wl - from), want + from);
}

static void test_fixtures(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir_, "fixtures/templates");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", dir_);
    char *cases_txt = read_rel(dir, "cases.json", NULL);
    char *specials_txt = read_rel(dir, "specials.json", NULL);
    char *index = read_rel(dir, "expected/INDEX.tsv", NULL);
    assert_non_null(cases_txt);
    assert_non_null(specials_txt);
    assert_non_null(index);
    cJSON *cases = cJSON_Parse(cases_txt), *specials = cJSON_Parse(specials_txt);
    assert_non_null(cases);
    assert_non_null(specials);

    int total = 0, ok_match = 0, err_match = 0, failures = 0, n_ok = 0, n_err = 0, n_refused = 0;
    char *save = NULL;
    for (char *line = strtok_r(index, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char tname[256], cname[128], kind[16];
        if (sscanf(line, "%255[^\t]\t%127[^\t]\t%15s", tname, cname, kind) != 3) continue;
        if (!strcmp(tname, "template")) continue; /* header */
        total++;
        char rel[512];
        snprintf(rel, sizeof rel, "%s.jinja", tname);
        size_t slen;
        char *src = read_rel(dir, rel, &slen);
        assert_non_null(src);
        const cJSON *c = find_case(cases, cname);
        assert_non_null(c);
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(specials, tname);
        assert_non_null(sp);

        struct tern_chat_template *t = NULL;
        assert_tern_ok(tern_chat_template_create(src, slen, &t));
        struct tern_chat_params p = tern_chat_default_params();
        char *msgs_json = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c, "messages"));
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
        char *tools_json = tools ? cJSON_PrintUnformatted(tools) : NULL;
        p.messages_json = msgs_json;
        p.tools_json = tools_json;
        const cJSON *agp = cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt");
        if (agp) p.add_generation_prompt = cJSON_IsTrue(agp);
        p.bos_token = cJSON_GetObjectItemCaseSensitive(sp, "bos_token")->valuestring;
        p.eos_token = cJSON_GetObjectItemCaseSensitive(sp, "eos_token")->valuestring;
        p.now_unix = FIXTURE_NOW;
        char *out = NULL;
        size_t out_len = 0;
        tern_status st = tern_chat_render(t, &p, &out, &out_len);

        /* Hugging Face silently drops tools a template never reads; tern refuses them (a prompt
         * without the tools the caller gave is a wrong prompt) */
        bool drops_tools = cJSON_GetArraySize(tools) > 0 && !mentions_word(src, "tools");
        if (drops_tools) {
            n_refused++;
            if (st != TERN_ERR_UNSUPPORTED || !strstr(tern_last_error(), "never reads `tools`")) {
                print_message("FAIL %s / %s: tools not refused (status %d: %s)\n", tname, cname, st,
                              st ? tern_last_error() : "rendered");
                failures++;
            }
        } else if (!strcmp(kind, "ok")) {
            n_ok++;
            snprintf(rel, sizeof rel, "expected/%s/%s.txt", tname, cname);
            size_t wl;
            char *want = read_rel(dir, rel, &wl);
            assert_non_null(want);
            if (st != TERN_OK) {
                print_message("FAIL %s / %s: %s\n", tname, cname, tern_last_error());
                failures++;
            } else if (out_len != wl || memcmp(out, want, wl)) {
                show_diff(tname, cname, out, out_len, want, wl);
                failures++;
            } else ok_match++;
            free(want);
        } else {
            n_err++;
            snprintf(rel, sizeof rel, "expected/%s/%s.error", tname, cname);
            char *want = read_rel(dir, rel, NULL);
            assert_non_null(want);
            char *nl = strchr(want, '\n');
            if (nl) *nl = '\0';
            char *colon = strstr(want, ": ");
            assert_non_null(colon);
            *colon = '\0';
            const char *exc = want, *msg = colon + 2;
            char needle[600];
            if (!strcmp(exc, "TemplateError")) snprintf(needle, sizeof needle, "TemplateError: %s", msg);
            else snprintf(needle, sizeof needle, "%s: ", exc);
            if (st == TERN_OK) {
                print_message("FAIL %s / %s: rendered, but Jinja raised %s: %s\n", tname, cname, exc, msg);
                failures++;
            } else if (!strstr(tern_last_error(), needle)) {
                print_message("FAIL %s / %s: error '%s' does not contain '%s'\n", tname, cname,
                              tern_last_error(), needle);
                failures++;
            } else err_match++;
            free(want);
        }
        free(out);
        free(msgs_json);
        free(tools_json);
        tern_chat_template_free(t);
        free(src);
    }
    print_message("template fixtures: %d/%d renderings match byte for byte, %d/%d expected errors "
                  "reproduced, %d refusals of tools the template would drop, %d/%d total\n", ok_match, n_ok,
                  err_match, n_err, n_refused, ok_match + err_match + n_refused, total);
    cJSON_Delete(cases);
    cJSON_Delete(specials);
    free(cases_txt);
    free(specials_txt);
    free(index);
    assert_int_equal(total, 136);
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
