/* test_chat_reasoning.c — reasoning switches and reasoning output through the CLI.
 *
 * `tern template --template-vars` renders the 2026 fixture conversations byte for byte as the
 * Hugging Face references in tests/data/template/families. `tern chat` on a fixture model with
 * Qwen3.5's template (--chat-template-file) and a GBNF grammar that forces a known reply (so the
 * model's random weights do not matter): the reasoning comes back as "reasoning_content", the
 * XML tool call after it is parsed, a reply cut off by -n inside the reasoning gives the
 * reasoning and empty content with stop "max_tokens", enable_thinking=false (the prompt closes
 * the think block itself) leaves the same text as content, and the saved history keeps the
 * reasoning for the template to read back. Bad --template-vars: exit 2 with the reason. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char fam[2048], gbnf[2048], msgs[2048], saved[2048];

static void write_file(const char *path, const char *data)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, strlen(data), f), strlen(data));
    assert_int_equal(fclose(f), 0);
}

/* the reply Qwen3.5 would give after its "<think>\n" generation prompt */
static const char REPLY[] = "root ::= \"Need the weather.\\n</think>\\n\\n<tool_call>\\n<function=get_weather>\\n"
                            "<parameter=location>\\nOslo\\n</parameter>\\n<parameter=days>\\n3\\n</parameter>\\n"
                            "</function>\\n</tool_call>\"\n";
static const char TOOLS[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                            "\"object\", \"properties\": {\"location\": {\"type\": \"string\"}, \"days\": {\"type\": "
                            "\"string\"}}}}}]";

static int setup(void **state)
{
    (void)state;
    snprintf(fam, sizeof fam, "%s/tests/data/template/families", test_source_dir());
    snprintf(gbnf, sizeof gbnf, "%s/reply.gbnf", test_tmpdir());
    snprintf(msgs, sizeof msgs, "%s/conv.json", test_tmpdir());
    snprintf(saved, sizeof saved, "%s/saved.json", test_tmpdir());
    write_file(gbnf, REPLY);
    char conv[1024];
    snprintf(conv, sizeof conv, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], \"tools\": %s}", TOOLS);
    write_file(msgs, conv);
    return 0;
}

/* Run `tern <args>` (stdin from /dev/null); stdout and stderr malloc'ed; the exit status. */
static int tern(const char *args, char **out, size_t *out_len, char **err)
{
    char err_path[4096], out_path[4096], cmd[40000];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", test_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s %s < /dev/null > %s 2> %s", test_tern_bin(), args, out_path, err_path);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    *out = test_read_file(out_path, out_len);
    *err = test_read_file(err_path, NULL);
    assert_non_null(*out);
    assert_non_null(*err);
    return rc;
}

/* tern template --template-vars gives the reference bytes (the conversation of the fixture case
 * written to a file, its variables on the command line) */
static void test_template_vars_cli(void **state)
{
    (void)state;
    static const struct {
        const char *tmpl, *cs, *vars;
    } cases[] = {
        {"Qwen-Qwen3-0.6B", "multi_turn@think_off", "{\"enable_thinking\": false}"},
        {"Qwen3.5-4B", "reasoning_history@think_off", "{\"enable_thinking\": false}"},
        {"HuggingFaceTB-SmolLM3-3B", "simple@think_off", "{\"enable_thinking\": false}"},
        {"google-gemma-4-31B-it", "tool_roundtrip@think_on", "{\"enable_thinking\": true}"},
        {"openai-gpt-oss-120b", "simple@effort_low", "{\"reasoning_effort\": \"low\"}"},
    };
    char path[8192];
    snprintf(path, sizeof path, "%s/cases.json", fam);
    char *txt = test_read_file(path, NULL);
    cJSON *all = cJSON_Parse(txt);
    assert_non_null(all);
    snprintf(path, sizeof path, "%s/specials.json", fam);
    char *sp_txt = test_read_file(path, NULL);
    cJSON *specials = cJSON_Parse(sp_txt);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cJSON *c = NULL, *x;
        cJSON_ArrayForEach(x, all) if (!strcmp(cJSON_GetObjectItemCaseSensitive(x, "name")->valuestring, cases[i].cs)) c = x;
        assert_non_null(c);
        cJSON *conv = cJSON_CreateObject();
        cJSON_AddItemToObject(conv, "messages", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "messages"), true));
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
        if (tools) cJSON_AddItemToObject(conv, "tools", cJSON_Duplicate(tools, true));
        char *ctext = cJSON_PrintUnformatted(conv);
        char conv_path[4096];
        snprintf(conv_path, sizeof conv_path, "%s/fam_conv.json", test_tmpdir());
        write_file(conv_path, ctext);
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(specials, cases[i].tmpl);
        char args[16384];
        snprintf(args, sizeof args, "template --template %s/%s.jinja --messages %s --now 1736933400 --bos-token '%s' "
                 "--eos-token '%s' --template-vars '%s'", fam, cases[i].tmpl, conv_path,
                 cJSON_GetObjectItemCaseSensitive(sp, "bos_token")->valuestring,
                 cJSON_GetObjectItemCaseSensitive(sp, "eos_token")->valuestring, cases[i].vars);
        char *out, *err;
        size_t ol;
        int rc = tern(args, &out, &ol, &err);
        if (rc) fail_msg("%s / %s: exit %d: %s", cases[i].tmpl, cases[i].cs, rc, err);
        snprintf(path, sizeof path, "%s/expected/%s/%s.txt", fam, cases[i].tmpl, cases[i].cs);
        size_t wl;
        char *want = test_read_file(path, &wl);
        assert_non_null(want);
        if (ol != wl || memcmp(out, want, wl)) fail_msg("%s / %s: tern template differs from the reference", cases[i].tmpl, cases[i].cs);
        free(want);
        free(out);
        free(err);
        free(ctext);
        cJSON_Delete(conv);
    }
    cJSON_Delete(all);
    cJSON_Delete(specials);
    free(txt);
    free(sp_txt);
}

/* the last JSON line of stdout (the turn) */
static cJSON *turn_json(const char *out)
{
    const char *last = out, *q;
    for (q = out; (q = strstr(q, "{\"turn\"")); q++) last = q;
    return cJSON_Parse(last);
}

static void test_chat_reasoning(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-f16.gguf");
    char args[32768], *out, *err;
    size_t ol;
    /* thinking on (Qwen3.5's prompt ends inside <think>): reasoning apart, the call parsed, the
     * parameter typed by the tools' schema ("3" stays a string) */
    snprintf(args, sizeof args, "chat -m %s --chat-template-file %s/Qwen3.5-4B.jinja --messages %s --grammar %s "
             "-n 200 --json --save-messages %s", model, fam, msgs, gbnf, saved);
    int rc = tern(args, &out, &ol, &err);
    if (rc) fail_msg("exit %d: %s", rc, err);
    cJSON *t = turn_json(out);
    assert_non_null(t);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "reasoning_content")->valuestring, "Need the weather.");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "content")->valuestring, "");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(t, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 1);
    char *args_txt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(calls->child, "function"), "arguments"));
    assert_string_equal(args_txt, "{\"location\":\"Oslo\",\"days\":\"3\"}");
    free(args_txt);
    cJSON_Delete(t);
    free(out);
    free(err);
    /* the saved history keeps the reasoning; Qwen3.5's template renders it back after the last
     * user message */
    char *hist = test_read_file(saved, NULL);
    assert_non_null(hist);
    cJSON *h = cJSON_Parse(hist);
    const cJSON *ans = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(h, "messages"), 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(ans, "reasoning_content")->valuestring, "Need the weather.");
    cJSON_Delete(h);
    free(hist);
    snprintf(args, sizeof args, "template --template %s/Qwen3.5-4B.jinja --messages %s --no-generation-prompt", fam, saved);
    rc = tern(args, &out, &ol, &err);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "<|im_start|>assistant\n<think>\nNeed the weather.\n</think>\n\n<tool_call>\n"
                                "<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n"));
    free(out);
    free(err);

    /* out of tokens inside the reasoning */
    snprintf(args, sizeof args, "chat -m %s --chat-template-file %s/Qwen3.5-4B.jinja --messages %s --grammar %s "
             "-n 3 --json", model, fam, msgs, gbnf);
    rc = tern(args, &out, &ol, &err);
    if (rc) fail_msg("exit %d: %s", rc, err);
    t = turn_json(out);
    assert_non_null(t);
    const char *r = cJSON_GetObjectItemCaseSensitive(t, "reasoning_content")->valuestring;
    assert_true(strlen(r) > 0 && !strncmp("Need the weather.", r, strlen(r)));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "content")->valuestring, "");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "tool_calls")), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "stats"), "stop")->valuestring,
                        "max_tokens");
    cJSON_Delete(t);
    free(out);
    free(err);

    /* enable_thinking false: the prompt closes the block, so the same text is content */
    snprintf(args, sizeof args, "chat -m %s --chat-template-file %s/Qwen3.5-4B.jinja --messages %s --grammar %s "
             "-n 200 --json --show-prompt --template-vars '{\"enable_thinking\": false}'", model, fam, msgs, gbnf);
    rc = tern(args, &out, &ol, &err);
    if (rc) fail_msg("exit %d: %s", rc, err);
    t = turn_json(out);
    assert_non_null(t);
    const char *prompt = cJSON_GetObjectItemCaseSensitive(t, "prompt")->valuestring;
    const char *tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    assert_string_equal(prompt + strlen(prompt) - strlen(tail), tail);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "reasoning_content")->valuestring, "");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "content")->valuestring, "Need the weather.\n</think>\n\n");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "tool_calls")), 1);
    cJSON_Delete(t);
    free(out);
    free(err);
}

static void test_bad_template_vars(void **state)
{
    (void)state;
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"chat -m nosuch.gguf --template-vars '{\"enable_thinking\": fals}'", "--template-vars: invalid JSON at byte"},
        {"chat -m nosuch.gguf --template-vars '[true]'", "--template-vars: expected an object, got an array"},
        {"template --template %s/Qwen3.5-4B.jinja --messages x.json --template-vars '\"x\"'",
         "--template-vars: expected an object, got a string"},
        {"template --template %s/Qwen3.5-4B.jinja --messages x.json --template-vars ''", "--template-vars: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8192], *out, *err;
        size_t ol;
        snprintf(args, sizeof args, cases[i].args, fam);
        int rc = tern(args, &out, &ol, &err);
        if (rc != 2 || !strstr(err, cases[i].msg)) fail_msg("%s: exit %d, stderr [%s]", args, rc, err);
        free(out);
        free(err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template_vars_cli),
        cmocka_unit_test(test_chat_reasoning),
        cmocka_unit_test(test_bad_template_vars),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, NULL));
}
