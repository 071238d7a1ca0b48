/* test_chat.c — the generation loop (tern_generate) and `tern chat`, end to end.
 *
 * Models: a synthetic one written by tern_synth_model_write (byte-level vocab, ChatML template,
 * random weights) and, when ../shared is present, the qwen2-tiny-q8_0 fixture (GPT-2 vocab, no
 * template: ChatML fallback with a warning). The text they produce is nonsense; what is checked
 * is structure: the prompt sent equals `tern template` byte for byte, the second turn decodes
 * only the new suffix, greedy output repeats exactly, and bad input fails cleanly. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------ helpers */

static const char *synth_model(void)
{
    static char path[4096];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/synth-tiny-q8_0.gguf", test_tmpdir());
        assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 7, path, NULL));
    }
    return path;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Run `tern <args>` with stdin from a file holding `input`; stdout into a malloc'ed buffer,
 * stderr into *err (malloc'ed, may be NULL). Returns the exit code. */
static int tern_cli(const char *args, const char *input, size_t input_len, char **out, char **err)
{
    char in_path[4096], err_path[4096], cmd[16384];
    snprintf(in_path, sizeof in_path, "%s/stdin.txt", test_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    write_file(in_path, input, input_len);
    snprintf(cmd, sizeof cmd, "%s %s < %s 2> %s", test_tern_bin(), args, in_path, err_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((k = fread(buf + n, 1, cap - 1 - n, p)) > 0) {
        n += k;
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    int status = pclose(p);
    *out = buf;
    char *e = test_read_file(err_path, NULL);
    if (err) *err = e;
    else free(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* `tern template -m model --messages <conv>` output. */
static char *template_output(const char *model, const cJSON *messages)
{
    char conv_path[4096], args[8192];
    snprintf(conv_path, sizeof conv_path, "%s/conv.json", test_tmpdir());
    char *s = cJSON_Print(messages);
    write_file(conv_path, s, strlen(s));
    free(s);
    snprintf(args, sizeof args, "template -m %s --messages %s", model, conv_path);
    char *out;
    assert_int_equal(tern_cli(args, "", 0, &out, NULL), 0);
    return out;
}

static void add_message(cJSON *msgs, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
}

static int stat_int(const cJSON *turn, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(turn, "stats"), key);
    assert_true(cJSON_IsNumber(v));
    return v->valueint;
}

/* Split --json output into its turn objects (tool-call lines have no "content"). */
static int parse_turns(char *out, cJSON **turns, int cap)
{
    int n = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) fail_msg("stdout line is not JSON: %s", line);
        if (cJSON_GetObjectItem(j, "content") && n < cap) turns[n++] = j;
        else cJSON_Delete(j);
    }
    return n;
}

/* ------------------------------------------------------------------ library API */

struct collect {
    char text[8192];
    size_t n;
    int pieces;
    int stop_after; /* return 1 after this many pieces (0 = never) */
};

static int collect_piece(const char *text, size_t len, void *user)
{
    struct collect *c = user;
    assert_true(len > 0);
    if (c->n + len < sizeof c->text) {
        memcpy(c->text + c->n, text, len);
        c->n += len;
    }
    c->pieces++;
    return c->stop_after && c->pieces >= c->stop_after;
}

static void test_generate_api(void **state)
{
    (void)state;
    struct tern_model *m;
    assert_tern_ok(tern_model_load(synth_model(), NULL, &m));
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tok));
    struct tern_context_params cp = {.n_ctx = 256, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tok, &g));

    const char *text = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    int32_t ids[256];
    size_t n;
    assert_tern_ok(tern_tokenize(tok, text, strlen(text), TERN_TOK_PARSE_SPECIAL, ids, 256, &n));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 12;
    gp.ignore_eog = true; /* random weights: make the length predictable */
    struct tern_gen_stats st;
    struct collect c1 = {0};
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, collect_piece, &c1, &st));
    assert_int_equal(st.n_prompt, (int)n);
    assert_int_equal(st.n_reused, 0);
    assert_int_equal(st.n_prompt_decoded, (int)n);
    assert_int_equal(st.n_generated, 12);
    assert_int_equal(st.stop, TERN_GEN_STOP_MAX_TOKENS);
    assert_true(st.ttft_ms >= st.prompt_ms);
    /* the record: prompt + the generated tokens that were decoded (not the last one sampled) */
    int n_hist;
    const int32_t *hist = tern_generator_tokens(g, &n_hist);
    assert_int_equal(n_hist, (int)n + 11);
    assert_int_equal(tern_kv_n_pos(ctx), n_hist);
    assert_memory_equal(hist, ids, n * sizeof *ids);

    /* A next turn that extends what is cached decodes only the new tokens. */
    int32_t next[256];
    memcpy(next, hist, (size_t)n_hist * sizeof *next);
    size_t extra;
    const char *more = "<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n";
    assert_tern_ok(tern_tokenize(tok, more, strlen(more), TERN_TOK_PARSE_SPECIAL, next + n_hist,
                                 (size_t)(256 - n_hist), &extra));
    int n_next = n_hist + (int)extra;
    struct collect c2 = {0};
    assert_tern_ok(tern_generate(g, s, next, n_next, &gp, collect_piece, &c2, &st));
    assert_int_equal(st.n_reused, n_hist);
    assert_int_equal(st.n_prompt_decoded, (int)extra);

    /* Same prompt again: everything but the last token is reused (its logits are needed), and
     * the greedy continuation is the same as from a cold cache. */
    struct collect c3 = {0};
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, collect_piece, &c3, &st));
    assert_int_equal(st.n_reused, (int)n - 1);
    assert_int_equal(c3.n, c1.n);
    assert_memory_equal(c3.text, c1.text, c1.n);
    tern_generator_reset(g);
    assert_int_equal(tern_kv_n_pos(ctx), 0);
    struct collect c4 = {0};
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, collect_piece, &c4, &st));
    assert_int_equal(st.n_reused, 0);
    assert_int_equal(c4.n, c1.n);
    assert_memory_equal(c4.text, c1.text, c1.n);

    /* Someone else rewinds the cache: the record follows, only the surviving prefix is reused. */
    assert_tern_ok(tern_kv_truncate(ctx, 3));
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, NULL, NULL, &st));
    assert_int_equal(st.n_reused, 3);

    /* The callback can stop generation. */
    struct collect c5 = {.stop_after = 1};
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, collect_piece, &c5, &st));
    assert_int_equal(st.stop, TERN_GEN_STOP_CALLBACK);
    assert_int_equal(c5.pieces, 1);

    /* max_tokens 0: the prompt is decoded, nothing sampled. */
    gp.max_tokens = 0;
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, collect_piece, &c5, &st));
    assert_int_equal(st.n_generated, 0);
    assert_int_equal(c5.pieces, 1);

    /* A context that fills up stops generation without an error. */
    gp.max_tokens = 1000;
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, NULL, NULL, &st));
    assert_int_equal(st.stop, TERN_GEN_STOP_CONTEXT_FULL);
    assert_int_equal(tern_kv_n_pos(ctx), 256);
    assert_int_equal(st.n_generated, 256 - (int)n + 1);

    /* Bad input: clear errors, the generator stays usable. */
    int32_t big[300] = {0};
    assert_int_equal(tern_generate(g, s, big, 300, &gp, NULL, NULL, &st), TERN_ERR_RANGE);
    assert_non_null(strstr(tern_last_error(), "300 tokens"));
    int32_t bad[3] = {ids[0], 99999999, ids[1]};
    assert_int_equal(tern_generate(g, s, bad, 3, &gp, NULL, NULL, &st), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "index 1"));
    assert_int_equal(tern_generate(g, s, ids, 0, &gp, NULL, NULL, &st), TERN_ERR_ARG);
    gp.max_tokens = 12;
    struct collect c6 = {0};
    tern_generator_reset(g);
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, collect_piece, &c6, &st));
    assert_memory_equal(c6.text, c1.text, c1.n);

    tern_generator_free(g);
    tern_sampler_free(s);
    tern_context_free(ctx);
    tern_tokenizer_free(tok);
    tern_model_free(m);
}

/* ------------------------------------------------------------------ tern chat */

/* Two scripted turns with --json --show-prompt: each prompt equals `tern template` for the
 * conversation so far, turn 2 reuses turn 1's KV, and a second run gives the same answers. */
static void two_turns(const char *model, bool expect_chatml_warning)
{
    char args[32768];
    snprintf(args, sizeof args, "chat -m %s -n 16 -t 2 -c 512 --json --show-prompt --system 'Be brief.'", model);
    const char *input = "Hello there\nWhat is 2+2? \xc3\xa9t\xc3\xa9\n";
    char *out, *err;
    assert_int_equal(tern_cli(args, input, strlen(input), &out, &err), 0);
    if (expect_chatml_warning) assert_non_null(strstr(err, "using ChatML"));
    cJSON *turns[4];
    assert_int_equal(parse_turns(out, turns, 4), 2);

    cJSON *msgs = cJSON_CreateArray();
    add_message(msgs, "system", "Be brief.");
    add_message(msgs, "user", "Hello there");
    char *want = template_output(model, msgs);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(turns[0], "prompt")), want);
    free(want);
    add_message(msgs, "assistant", cJSON_GetStringValue(cJSON_GetObjectItem(turns[0], "content")));
    add_message(msgs, "user", "What is 2+2? \xc3\xa9t\xc3\xa9");
    want = template_output(model, msgs);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(turns[1], "prompt")), want);
    free(want);

    int p1 = stat_int(turns[0], "n_prompt"), p2 = stat_int(turns[1], "n_prompt");
    int r2 = stat_int(turns[1], "n_reused"), d2 = stat_int(turns[1], "n_prompt_decoded");
    print_message("%s: turn 1 prompt %d; turn 2 prompt %d, reused %d, decoded %d\n", model, p1, p2, r2, d2);
    assert_int_equal(stat_int(turns[0], "n_reused"), 0);
    assert_true(r2 >= p1);          /* at least the whole first prompt */
    assert_int_equal(r2 + d2, p2);
    assert_true(d2 < p2);

    /* Determinism: the same script gives the same answers; text mode streams the same content. */
    char *out2;
    assert_int_equal(tern_cli(args, input, strlen(input), &out2, NULL), 0);
    cJSON *turns2[4];
    assert_int_equal(parse_turns(out2, turns2, 4), 2);
    char expect_text[16384];
    size_t k = 0;
    for (int i = 0; i < 2; i++) {
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(turns[i], "content"));
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(turns2[i], "content")), a);
        k += (size_t)snprintf(expect_text + k, sizeof expect_text - k, "%s\n", a);
        cJSON_Delete(turns2[i]);
    }
    snprintf(args, sizeof args, "chat -m %s -n 16 -t 2 -c 512 --system 'Be brief.'", model);
    char *text, *err3;
    assert_int_equal(tern_cli(args, input, strlen(input), &text, &err3), 0);
    assert_string_equal(text, expect_text);
    assert_non_null(strstr(err3, "turn 2: prompt"));
    free(text);
    free(err3);
    for (int i = 0; i < 2; i++) cJSON_Delete(turns[i]);
    cJSON_Delete(msgs);
    free(out);
    free(out2);
    free(err);
}

static void test_chat_synth(void **state)
{
    (void)state;
    two_turns(synth_model(), false);
}

static void test_chat_fixture_chatml_fallback(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char path[4096];
    snprintf(path, sizeof path, "%s", model);
    two_turns(path, true);
}

/* --messages continues a conversation (a trailing user message is answered first), --tools
 * reaches the template (the rendering with tools matches `tern template`), and --save-messages
 * writes the history with the answers appended. The fixture model has no template, so it gets
 * the Qwen2.5 fallback, which lists tools; the synthetic model's plain ChatML template never
 * reads `tools`, so there they are refused instead of silently left out of the prompt. */
static void test_chat_continue_and_save(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model_, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char model[4096];
    snprintf(model, sizeof model, "%s", model_);
    char conv[4096], tools[4096], saved[4096], args[32768];
    snprintf(conv, sizeof conv, "%s/cont.json", test_tmpdir());
    snprintf(tools, sizeof tools, "%s/tools.json", test_tmpdir());
    snprintf(saved, sizeof saved, "%s/saved.json", test_tmpdir());
    const char *conv_json = "[{\"role\": \"user\", \"content\": \"first\"}, "
                            "{\"role\": \"assistant\", \"content\": \"answer\"}, "
                            "{\"role\": \"user\", \"content\": \"second\"}]";
    write_file(conv, conv_json, strlen(conv_json));
    const char *tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                             "\"description\": \"Weather\", \"parameters\": {\"type\": \"object\", "
                             "\"properties\": {\"city\": {\"type\": \"string\"}}}}}]";
    write_file(tools, tools_json, strlen(tools_json));
    snprintf(args, sizeof args, "chat -m %s -n 8 -t 2 -c 1024 --json --show-prompt --messages %s "
             "--tools %s --save-messages %s", model, conv, tools, saved);
    const char *input = "third\n";
    char *out;
    assert_int_equal(tern_cli(args, input, strlen(input), &out, NULL), 0);
    cJSON *turns[4];
    assert_int_equal(parse_turns(out, turns, 4), 2);
    const char *prompt1 = cJSON_GetStringValue(cJSON_GetObjectItem(turns[0], "prompt"));
    assert_non_null(strstr(prompt1, "second"));
    assert_non_null(strstr(prompt1, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""));

    size_t len;
    char *s = test_read_file(saved, &len);
    assert_non_null(s);
    cJSON *sv = cJSON_Parse(s);
    assert_non_null(sv);
    const cJSON *msgs = cJSON_GetObjectItem(sv, "messages");
    assert_int_equal(cJSON_GetArraySize(msgs), 6);
    const char *roles[6] = {"user", "assistant", "user", "assistant", "user", "assistant"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, i), "role")), roles[i]);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 5), "content")),
                        cJSON_GetStringValue(cJSON_GetObjectItem(turns[1], "content")));
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(sv, "tools")));
    /* the saved file continues the same conversation: its rendering is turn 2's prompt minus
     * the final answer, i.e. rendering the first 5 messages gives turn 2's prompt */
    cJSON *five = cJSON_Duplicate(msgs, true);
    cJSON_DeleteItemFromArray(five, 5);
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddItemToObject(obj, "messages", five);
    cJSON_AddItemToObject(obj, "tools", cJSON_Duplicate(cJSON_GetObjectItem(sv, "tools"), true));
    char *want = template_output(model, obj);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(turns[1], "prompt")), want);
    free(want);
    cJSON_Delete(obj);
    cJSON_Delete(sv);
    free(s);
    for (int i = 0; i < 2; i++) cJSON_Delete(turns[i]);
    free(out);

    snprintf(args, sizeof args, "chat -m %s -n 8 -t 2 --messages %s --tools %s", synth_model(), conv, tools);
    char *err;
    /* synthetic models carry the fallback template, which renders tools (templates that never
     * read them are refused: test_tools_never_dropped) */
    assert_int_equal(tern_cli(args, input, strlen(input), &out, &err), 0);
    free(out);
    free(err);
}

static void expect_chat_failure(const char *args, const char *input, size_t input_len, int code,
                                const char *needle)
{
    char *out, *err;
    int rc = tern_cli(args, input, input_len, &out, &err);
    print_message("tern %s -> %d: %s", args, rc, err);
    assert_int_equal(rc, code);
    assert_non_null(strstr(err, needle));
    free(out);
    free(err);
}

static void test_chat_bad_input(void **state)
{
    (void)state;
    const char *model = synth_model();
    char args[32768], path[4096];
    expect_chat_failure("chat -m /nonexistent/model.gguf", "hi\n", 3, 1, "/nonexistent/model.gguf");
    char *vout, *verr; /* a build with an embedded model runs it without -m (test_tern_tool) */
    tern_cli("version", "", 0, &vout, &verr);
    if (!strstr(vout, "embedded model: tern-tool")) expect_chat_failure("chat", "", 0, 2, "missing -m");
    free(vout);
    free(verr);
    expect_chat_failure("chat -m x.gguf --bogus", "", 0, 2, "unknown option");
    expect_chat_failure("chat -m x.gguf -n -1", "", 0, 2, "-n");

    snprintf(path, sizeof path, "%s/bad-tools.json", test_tmpdir());
    write_file(path, "[{\"type\": \"function\",\n  \"function\": {\"name\": }}]", 49);
    snprintf(args, sizeof args, "chat -m %s --tools %s", model, path);
    expect_chat_failure(args, "hi\n", 3, 1, "tools: invalid JSON at byte 45 (line 2:24) in tools[0].function.name: expected a value");
    write_file(path, "{\"type\": \"function\"}", 20);
    expect_chat_failure(args, "hi\n", 3, 1, "tools: expected an array, got an object");
    snprintf(path, sizeof path, "%s/missing.json", test_tmpdir());
    snprintf(args, sizeof args, "chat -m %s --tools %s", model, path);
    expect_chat_failure(args, "hi\n", 3, 1, "missing.json");
    snprintf(path, sizeof path, "%s/bad-conv.json", test_tmpdir());
    write_file(path, "[{\"role\": 5, \"content\": \"x\"}]", 29);
    snprintf(args, sizeof args, "chat -m %s --messages %s -n 4", model, path);
    expect_chat_failure(args, "hi\n", 3, 1, "role");

    /* invalid UTF-8 on stdin: the first line is answered, the second refused with its place */
    snprintf(args, sizeof args, "chat -m %s -n 4 -t 2", model);
    const char bad[] = "hello\nab\xff\xfe" "cd\nnever\n";
    expect_chat_failure(args, bad, sizeof bad - 1, 1, "stdin line 2: invalid UTF-8 at byte 2");
    const char nul[] = "ab\0cd\n";
    expect_chat_failure(args, nul, sizeof nul - 1, 1, "stdin line 1: NUL byte at byte 2");
    /* the conversation outgrows the context */
    snprintf(args, sizeof args, "chat -m %s -n 4 -t 2 -c 16", model);
    expect_chat_failure(args, "a rather long message that does not fit in sixteen tokens\n", 58, 1,
                        "context holds 16");
}

/* `tern chat --messages` checks the conversation with the library's own validation before it
 * loads the model, and refuses it exactly as `tern template` does: it used to accept
 * "role": 1, skip the answer (the last message was not a user one) and exit 0 silently. */
static void test_chat_validates_messages(void **state)
{
    (void)state;
    const char *model = synth_model();
    char conv[4096], args[16384], targs[16384];
    snprintf(conv, sizeof conv, "%s/role1.json", test_tmpdir());
    static const struct { const char *json, *msg; } bad[] = {
        {"[{\"role\": 1, \"content\": \"x\"}]", "messages[0].role: expected a string, got a number"},
        {"[{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"function\": {}}]}]",
         "messages[1].tool_calls[0].function.name: expected a string, got nothing"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
         "messages[0].content[0].type: \"image_url\" parts are not supported"},
        {"{\"messages\": [], \"tools\": [{\"type\": \"function\"}]}", "tools[0].function: expected an object, got nothing"},
        {"[{\"role\": \"user\"},]", "messages: invalid JSON at byte 18 (line 1:19) in messages[1]: expected a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(conv, bad[i].json, strlen(bad[i].json));
        snprintf(args, sizeof args, "chat -m %s -n 4 -t 2 --messages %s", model, conv);
        char *out, *err;
        int rc = tern_cli(args, "", 0, &out, &err);
        print_message("tern chat [%s] -> %d: %s", bad[i].json, rc, err);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(err, bad[i].msg));
        assert_int_equal(strlen(out), 0);
        assert_null(strstr(err, "turn 1")); /* refused before any work */
        /* `tern template` gives the same message */
        snprintf(targs, sizeof targs, "template -m %s --messages %s", model, conv);
        char *tout, *terr;
        assert_int_equal(tern_cli(targs, "", 0, &tout, &terr), 1);
        assert_non_null(strstr(terr, bad[i].msg));
        free(out);
        free(err);
        free(tout);
        free(terr);
    }
    /* content parts are answered, with the prompt `tern template` renders for the same file */
    const char *parts = "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hello \"}, "
                        "{\"type\": \"text\", \"text\": \"there\"}]}]";
    write_file(conv, parts, strlen(parts));
    snprintf(args, sizeof args, "chat -m %s -n 4 -t 2 --json --show-prompt --messages %s", model, conv);
    char *out;
    assert_int_equal(tern_cli(args, "", 0, &out, NULL), 0);
    cJSON *turns[2];
    assert_int_equal(parse_turns(out, turns, 2), 1);
    const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(turns[0], "prompt"));
    assert_non_null(strstr(prompt, "<|im_start|>user\nHello there<|im_end|>"));
    cJSON *msgs = cJSON_Parse(parts);
    char *want = template_output(model, msgs);
    assert_string_equal(prompt, want);
    free(want);
    cJSON_Delete(msgs);
    cJSON_Delete(turns[0]);
    free(out);
}

/* --prompt-cache: a second process finds the first one's system prompt on disk, reuses its KV
 * for the first turn, and answers exactly as the first process did (greedy). */
static void test_chat_prompt_cache_across_runs(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(model, "fixtures/models/qwen2-tiny-q8_0.gguf");
    char dir[4096], args[16384], sys[4096] = "";
    snprintf(dir, sizeof dir, "%s/chat-pc", test_tmpdir());
    for (int i = 0; i < 60; i++) strcat(sys, "You are a helpful assistant. ");
    snprintf(args, sizeof args, "chat -m %s --system \"%s\" -n 8 -t 2 --json --prompt-cache %s",
             model, sys, dir);
    static const char input[] = "Hello there\nWhat is up?\n";
    char *out1, *out2;
    assert_int_equal(tern_cli(args, input, strlen(input), &out1, NULL), 0);
    assert_int_equal(tern_cli(args, input, strlen(input), &out2, NULL), 0);
    cJSON *a = cJSON_Parse(out1), *b = cJSON_Parse(out2); /* first line of each */
    assert_non_null(a);
    assert_non_null(b);
    const cJSON *sa = cJSON_GetObjectItem(a, "stats"), *sb = cJSON_GetObjectItem(b, "stats");
    int reused_a = cJSON_GetObjectItem(sa, "n_reused")->valueint;
    int reused_b = cJSON_GetObjectItem(sb, "n_reused")->valueint;
    int n_prompt = cJSON_GetObjectItem(sb, "n_prompt")->valueint;
    print_message("first run reused %d, second run reused %d of %d prompt tokens on turn 1\n",
                  reused_a, reused_b, n_prompt);
    assert_int_equal(reused_a, 0);
    assert_true(reused_b >= n_prompt / 2);
    /* the whole transcript (both turns) is the same text */
    char *content_a = strstr(out1, "\"content\""), *content_b = strstr(out2, "\"content\"");
    assert_non_null(content_a);
    assert_non_null(content_b);
    const cJSON *ca = cJSON_GetObjectItem(a, "content"), *cb = cJSON_GetObjectItem(b, "content");
    assert_string_equal(ca->valuestring, cb->valuestring);
    char *second_a = strchr(out1, '\n'), *second_b = strchr(out2, '\n');
    cJSON *a2 = cJSON_Parse(second_a + 1), *b2 = cJSON_Parse(second_b + 1);
    assert_non_null(a2);
    assert_non_null(b2);
    assert_string_equal(cJSON_GetObjectItem(a2, "content")->valuestring,
                        cJSON_GetObjectItem(b2, "content")->valuestring);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(a2);
    cJSON_Delete(b2);
    free(out1);
    free(out2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_api),
        cmocka_unit_test(test_chat_synth),
        cmocka_unit_test(test_chat_fixture_chatml_fallback),
        cmocka_unit_test(test_chat_continue_and_save),
        cmocka_unit_test(test_chat_bad_input),
        cmocka_unit_test(test_chat_validates_messages),
        cmocka_unit_test(test_chat_prompt_cache_across_runs),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
