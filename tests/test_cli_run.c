/* test_cli_run.c — `tern run` and `tern chat` as a user meets them: where generation stops,
 * what --json prints, what happens when stdout's reader goes away, when --save-messages cannot
 * be written, and when the context outgrows the model's training context.
 *
 * The model is a synthetic one (tern_synth_model_write: byte-level vocabulary, ChatML template,
 * random weights, training context 2048), so nothing here needs ../shared. Where a test needs a
 * model that differs in one metadata key (an extra end-of-generation id, a short training
 * context), it writes a copy with tern's GGUF writer. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ------------------------------------------------------------------ helpers */

static const char *synth_model(void)
{
    static char path[4096];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/synth-tiny-q8_0.gguf", test_tmpdir());
        assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 11, path, NULL));
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

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Run `tern <args>` with stdin from `input`; stdout (malloc'ed, *out_len bytes) and stderr
 * (malloc'ed) returned. The exit code is returned. */
static int tern(const char *args, const char *input, char **out, size_t *out_len, char **err)
{
    char in_path[4096], err_path[4096], cmd[32768];
    snprintf(in_path, sizeof in_path, "%s/stdin.txt", test_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    write_file(in_path, input, strlen(input));
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
    int rc = exit_code(pclose(p));
    char *e = test_read_file(err_path, NULL);
    assert_non_null(e);
    print_message("tern %s -> %d\n%s", args, rc, e);
    if (out) *out = buf;
    else free(buf);
    if (out_len) *out_len = n;
    if (err) *err = e;
    else free(e);
    return rc;
}

/* Occurrences of needle in s. */
static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Copy a GGUF with one unsigned metadata key set (added or replaced). */
static void copy_with_u32(const char *src, const char *dst, const char *key, uint32_t value)
{
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(src, &g));
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create((uint32_t)tern_gguf_alignment(g), &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        if (k.len == strlen(key) && !memcmp(k.ptr, key, k.len)) continue;
        assert_tern_ok(tern_gguf_writer_copy_kv(w, g, i));
    }
    assert_tern_ok(tern_gguf_writer_set_u32(w, key, value));
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        assert_tern_ok(tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    assert_tern_ok(tern_gguf_writer_write(w, dst));
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
}

/* "1,2,3\n" -> ids; returns the count. */
static int parse_ids(const char *s, int32_t *ids, int cap)
{
    int n = 0;
    while (*s && *s != '\n' && n < cap) {
        char *end;
        ids[n++] = (int32_t)strtol(s, &end, 10);
        assert_true(end != s);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* Run `tern <args>` with stdout a pipe whose reader has already gone (the `| head -1` case made
 * deterministic) and SIGPIPE at its default, whatever this process inherited: without tern's own
 * handling the first write kills it. stderr into *err (malloc'ed). Returns the exit code
 * (128 + signal if killed). */
static int tern_stdout_closed(const char *args, const char *input, char **err)
{
    char in_path[4096], err_path[4096], cmd[32768];
    snprintf(in_path, sizeof in_path, "%s/stdin-closed.txt", test_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/stderr-closed.txt", test_tmpdir());
    write_file(in_path, input, strlen(input));
    snprintf(cmd, sizeof cmd, "exec %s %s < %s 2> %s", test_tern_bin(), args, in_path, err_path);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    close(fds[0]); /* nobody will ever read */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"sh", "-c", cmd, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ), 0);
    close(fds[1]);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    int rc = exit_code(status);
    *err = test_read_file(err_path, NULL);
    assert_non_null(*err);
    print_message("tern %s (stdout closed) -> %d\n%s", args, rc, *err);
    return rc;
}

static int files_in(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------ stop rules */

/* `--tokens` generation stops at every end-of-generation token (tern_token_is_eog), not only at
 * the metadata eos id: a copy of the model whose tokenizer.ggml.eot_token_id is a token greedy
 * decoding produces must stop right after printing it. Before tern run used the generator it
 * compared ids with eos alone and ran on for all -n tokens. */
static void test_run_stops_at_every_eog(void **state)
{
    (void)state;
    const char *model = synth_model();
    char args[8192], eot_model[4096];
    char *out;
    snprintf(args, sizeof args, "run -m %s --tokens 100,200,300 -n 12 --ignore-eos -t 2", model);
    assert_int_equal(tern(args, "", &out, NULL, NULL), 0);
    int32_t ids[64];
    int n = parse_ids(out, ids, 64);
    free(out);
    assert_int_equal(n, 12);

    /* A token new in the sequence and not already an end token, a few tokens in, so generation
     * visibly goes on before it stops. */
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_tokenizer_load(model, &tok));
    int k = -1;
    for (int i = 2; i < n && k < 0; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= ids[j] == ids[i];
        if (!seen && !tern_token_is_eog(tok, ids[i])) k = i;
    }
    tern_tokenizer_free(tok);
    assert_true(k >= 0);
    print_message("greedy ids: %d of them; eot set to ids[%d] = %d\n", n, k, ids[k]);
    snprintf(eot_model, sizeof eot_model, "%s/synth-eot.gguf", test_tmpdir());
    copy_with_u32(model, eot_model, "tokenizer.ggml.eot_token_id", (uint32_t)ids[k]);

    char expect[1024];
    size_t m = 0;
    for (int i = 0; i <= k; i++) m += (size_t)snprintf(expect + m, sizeof expect - m, "%s%d", i ? "," : "", ids[i]);
    snprintf(expect + m, sizeof expect - m, "\n");
    snprintf(args, sizeof args, "run -m %s --tokens 100,200,300 -n 12 -t 2", eot_model);
    char *err;
    assert_int_equal(tern(args, "", &out, NULL, &err), 0);
    assert_string_equal(out, expect);
    assert_non_null(strstr(err, "stop: eog"));
    free(out);
    free(err);

    /* --json says the same; --ignore-eos still runs to -n */
    snprintf(args, sizeof args, "run -m %s --tokens 100,200,300 -n 12 -t 2 --json", eot_model);
    assert_int_equal(tern(args, "", &out, NULL, NULL), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), k + 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "stop")), "eog");
    assert_int_equal(cJSON_GetObjectItem(j, "n_generated")->valueint, k + 1);
    cJSON_Delete(j);
    free(out);
    snprintf(args, sizeof args, "run -m %s --tokens 100,200,300 -n 12 -t 2 --ignore-eos", eot_model);
    assert_int_equal(tern(args, "", &out, NULL, NULL), 0);
    assert_int_equal(parse_ids(out, ids, 64), 12);
    free(out);
}

/* ------------------------------------------------------------------ --json */

/* Text from the streaming output: stdout minus the final newline, NUL bytes as U+FFFD (what the
 * JSON text holds, since a cJSON string cannot carry NUL). */
static char *as_json_text(const char *s, size_t n)
{
    assert_true(n > 0 && s[n - 1] == '\n');
    char *t = malloc(3 * n + 1);
    assert_non_null(t);
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i]) t[k++] = s[i];
        else {
            memcpy(t + k, "\xEF\xBF\xBD", 3);
            k += 3;
        }
    }
    t[k] = '\0';
    return t;
}

/* run --json is built with cJSON: a model path holding a quote and a backslash, and generated
 * text holding control characters, come out as valid JSON with the exact strings. Random
 * sampling at a high temperature over the byte-level vocabulary produces control bytes; the
 * seeds are fixed, so the test is deterministic. */
static void test_run_json_escapes(void **state)
{
    (void)state;
    char path[4096], args[16384];
    snprintf(path, sizeof path, "%s/we\"ird\\name.gguf", test_tmpdir());
    unlink(path);
    assert_int_equal(symlink(synth_model(), path), 0);
    int found = 0;
    for (int seed = 1; seed <= 20 && !found; seed++) {
        snprintf(args, sizeof args, "run -m '%s' -p 'Hi' -n 48 --temp 50 -s %d --ignore-eos -t 2 --json",
                 path, seed);
        char *out;
        assert_int_equal(tern(args, "", &out, NULL, NULL), 0);
        cJSON *j = cJSON_Parse(out);
        if (!j) fail_msg("not JSON: %s", out);
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(j, "model")));
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "model")), path);
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(j, "text"));
        assert_non_null(text);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), 48);
        for (const char *p = text; *p; p++) found |= (unsigned char)*p < 0x20 && *p != '\n';
        if (found) {
            print_message("seed %d: text with control characters, %zu bytes\n", seed, strlen(text));
            assert_non_null(strstr(out, "\\u00")); /* escaped, not raw */
            /* the same text as the streaming output */
            snprintf(args, sizeof args, "run -m '%s' -p 'Hi' -n 48 --temp 50 -s %d --ignore-eos -t 2",
                     path, seed);
            char *plain;
            size_t n;
            assert_int_equal(tern(args, "", &plain, &n, NULL), 0);
            char *want = as_json_text(plain, n);
            assert_string_equal(text, want);
            free(want);
            free(plain);
        }
        cJSON_Delete(j);
        free(out);
    }
    assert_true(found);

    /* tern chat --json: the same model path, and control characters in a user message that
     * the prompt echoes */
    snprintf(args, sizeof args, "chat -m '%s' -n 4 -t 2 --json --show-prompt", path);
    char *out;
    assert_int_equal(tern(args, "tab\there \x01\x1b[31m \"quoted\" back\\slash\n", &out, NULL, NULL), 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON: %s", out);
    assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(j, "prompt")));
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "prompt")),
                           "tab\there \x01\x1b[31m \"quoted\" back\\slash"));
    cJSON_Delete(j);
    free(out);
}

/* ------------------------------------------------------------------ closed stdout */

/* `tern run ... | head -1`: the reader is gone before the first piece is written. tern must not
 * die of SIGPIPE: it stops generating at the failed write, still saves the prompt cache, and
 * exits 0. Same for chat, which also saves --save-messages (the answer cut where it stopped) and
 * answers no further message. */
static void test_stdout_closed(void **state)
{
    (void)state;
    const char *model = synth_model();
    char args[16384], dir[4096], prompt[512], saved[4096];
    snprintf(dir, sizeof dir, "%s/pc-closed", test_tmpdir());
    for (int i = 0; i < 300; i++) prompt[i] = "abcdefghij"[i % 10];
    prompt[300] = '\0';
    /* sampled at a high temperature: byte tokens (text) come early, not only pieces that print
     * nothing (the synthetic vocabulary's [PAD] tokens, which greedy decoding favours here) */
    snprintf(args, sizeof args, "run -m %s -p %s -n 200 --temp 5 -s 1 --ignore-eos -t 2 "
             "--prompt-cache %s", model, prompt, dir);
    char *err;
    assert_int_equal(tern_stdout_closed(args, "", &err), 0);
    assert_non_null(strstr(err, "stop: output closed"));
    int n_gen = -1;
    const char *g = strstr(err, "generated ");
    assert_non_null(g);
    assert_int_equal(sscanf(g, "generated %d tokens", &n_gen), 1);
    assert_true(n_gen >= 1 && n_gen < 200);
    assert_true(files_in(dir) > 0);
    free(err);

    /* --tokens (ids written as they come) and --json (written at the end) */
    snprintf(args, sizeof args, "run -m %s --tokens 1,2,3 -n 200 --ignore-eos -t 2", model);
    assert_int_equal(tern_stdout_closed(args, "", &err), 0);
    assert_non_null(strstr(err, "generated 1 tokens"));
    free(err);
    snprintf(args, sizeof args, "run -m %s --tokens 1,2,3 -n 4 -t 2 --json", model);
    assert_int_equal(tern_stdout_closed(args, "", &err), 0);
    free(err);

    snprintf(saved, sizeof saved, "%s/closed-chat.json", test_tmpdir());
    snprintf(dir, sizeof dir, "%s/pc-closed-chat", test_tmpdir());
    snprintf(args, sizeof args, "chat -m %s -n 64 -t 2 --save-messages %s --prompt-cache %s "
             "--system %s", model, saved, dir, prompt);
    assert_int_equal(tern_stdout_closed(args, "first message\nsecond message\n", &err), 0);
    assert_non_null(strstr(err, "stop: output closed"));
    assert_null(strstr(err, "turn 2"));
    free(err);
    assert_true(files_in(dir) > 0);
    char *s = test_read_file(saved, NULL);
    assert_non_null(s);
    cJSON *sv = cJSON_Parse(s);
    assert_non_null(sv);
    const cJSON *msgs = cJSON_GetObjectItem(sv, "messages");
    assert_int_equal(cJSON_GetArraySize(msgs), 3); /* system, user, the cut answer */
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "content")),
                        "first message");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2), "role")),
                        "assistant");
    cJSON_Delete(sv);
    free(s);
}

/* ------------------------------------------------------------------ --save-messages */

/* An unwritable --save-messages fails before the model is loaded or anything generated, with
 * the path named (before: after the whole conversation, whose answers were then lost). */
static void test_save_messages_checked_first(void **state)
{
    (void)state;
    const char *model = synth_model();
    char file[4096], args[16384];
    snprintf(file, sizeof file, "%s/plain-file", test_tmpdir());
    write_file(file, "x", 1);
    snprintf(args, sizeof args, "chat -m %s -n 8 -t 2 --save-messages %s/conv.json", model, file);
    char *out, *err;
    assert_int_equal(tern(args, "hello\n", &out, NULL, &err), 1);
    assert_string_equal(out, "");             /* nothing was generated */
    assert_non_null(strstr(err, "plain-file/conv.json"));
    assert_null(strstr(err, "turn 1"));
    free(out);
    free(err);
    /* a directory as the target */
    snprintf(args, sizeof args, "chat -m %s -n 8 -t 2 --save-messages %s", model, test_tmpdir());
    assert_int_equal(tern(args, "hello\n", &out, NULL, &err), 1);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "is a directory"));
    free(out);
    free(err);
    /* a writable target: saved, and no temporary file left beside it */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/save-ok", test_tmpdir());
    assert_int_equal(mkdir(dir, 0777), 0);
    snprintf(args, sizeof args, "chat -m %s -n 4 -t 2 --save-messages %s/conv.json", model, dir);
    assert_int_equal(tern(args, "hello\n", NULL, NULL, NULL), 0);
    assert_int_equal(files_in(dir), 1);
    /* a model that fails to load leaves no temporary file either */
    snprintf(args, sizeof args, "chat -m /nonexistent.gguf --save-messages %s/other.json", dir);
    assert_int_equal(tern(args, "hello\n", NULL, NULL, NULL), 1);
    assert_int_equal(files_in(dir), 1);
}

/* ------------------------------------------------------------------ training context */

/* A context past the model's training context (<arch>.context_length) warns once on stderr:
 * for -c, and for prompt + -n. A copy of the model that claims 8 training positions makes both
 * cheap to reach. */
static void test_training_context_warning(void **state)
{
    (void)state;
    char model[4096], args[16384];
    snprintf(model, sizeof model, "%s/synth-ctx8.gguf", test_tmpdir());
    copy_with_u32(synth_model(), model, "llama.context_length", 8);
    char *err;
    snprintf(args, sizeof args, "run -m %s --tokens 1,2,3 -n 5 -t 2", model);
    assert_int_equal(tern(args, "", NULL, NULL, &err), 0);
    assert_null(strstr(err, "warning"));
    free(err);
    snprintf(args, sizeof args, "run -m %s --tokens 1,2,3 -n 6 -t 2 --ignore-eos", model);
    assert_int_equal(tern(args, "", NULL, NULL, &err), 0);
    assert_int_equal(count(err, "warning"), 1);
    assert_non_null(strstr(err, "(up to 9) exceed the model's training context of 8 tokens (llama.context_length)"));
    free(err);
    snprintf(args, sizeof args, "run -m %s --tokens 1,2,3 -n 2 -c 16 -t 2 --json", model);
    assert_int_equal(tern(args, "", NULL, NULL, &err), 0);
    assert_int_equal(count(err, "warning"), 1);
    assert_non_null(strstr(err, "-c 16 exceeds the model's training context of 8 tokens"));
    free(err);
    snprintf(args, sizeof args, "chat -m %s -c 64 -n 2 -t 2", model);
    assert_int_equal(tern(args, "hi\nagain\n", NULL, NULL, &err), 0);
    assert_int_equal(count(err, "warning: the context size -c 64 exceeds"), 1);
    free(err);
    /* the default chat context is capped at the training context: no warning */
    snprintf(args, sizeof args, "chat -m %s -n 1 -t 2", model);
    tern(args, "", NULL, NULL, &err);
    assert_null(strstr(err, "training context"));
    free(err);
}

/* ------------------------------------------------------------------ sliding-window KV */

/* `tern run` on a model with sliding-window layers (gemma3-tiny, window 32): a prompt long enough
 * that the windowed layers give back rows (past 32 + 128 + 256 positions) and greedy tokens after
 * it come out the same with --swa-full, which keeps every position (test_kv_window holds the
 * logits to the bit; this is the flag end to end). */
static void test_swa_full_same_tokens(void **state)
{
    (void)state;
    char model[4096], args[16384], ids[8192];
    snprintf(model, sizeof model, "%s/synth-gemma3.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("gemma3-tiny", "q8_0", 5, model, NULL));
    size_t n = 0;
    for (int i = 0; i < 600; i++)
        n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%d", i ? "," : "", (i * 37 + 11) % 500);
    char *out[2], *err;
    for (int full = 0; full < 2; full++) {
        snprintf(args, sizeof args, "run -m %s --tokens %s -n 24 -t 2 --ignore-eos --temp 0%s", model, ids,
                 full ? " --swa-full" : "");
        assert_int_equal(tern(args, "", &out[full], NULL, &err), 0);
        free(err);
    }
    assert_true(strlen(out[0]) > 0);
    assert_string_equal(out[0], out[1]);
    free(out[0]);
    free(out[1]);
    remove(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_stops_at_every_eog),
        cmocka_unit_test(test_run_json_escapes),
        cmocka_unit_test(test_stdout_closed),
        cmocka_unit_test(test_save_messages_checked_first),
        cmocka_unit_test(test_training_context_warning),
        cmocka_unit_test(test_swa_full_same_tokens),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
