/* test_grammar_cli.c — `tern grammar check` and `tern grammar bench` as a user runs them.
 *
 * check: for several corpus schemas (tests/data/grammar/schemas) the output has one JSON line
 * per document, {"accept": true} exactly for the valid instances (the labels the corpus test
 * cross-checks with an independent validator), refusals carry token, offset and reason; the
 * tool-call grammar with --json-lines documents; GBNF; usage and input errors exit 2 and 1
 * with messages. --masks: each step's allowed-token count and hash against brute force on a
 * two-word language. bench: the --json object has the documented keys. The whole corpus goes
 * through the same library calls in test_grammar_schema. */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "grammar_validator.h"

/* Run a shell command; stdout into *out (malloc'ed), exit status returned. */
static int run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t r; (r = fread(b + n, 1, cap - n - 1, p)) > 0;) {
        n += r;
        if (n + 1 == cap) b = realloc(b, cap *= 2);
    }
    b[n] = 0;
    int st = pclose(p);
    *out = b;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
}

static void check_schema_file(const char *name, const char *vocab)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/schemas/%s.json", test_source_dir(), name);
    size_t len;
    char *txt = test_read_file(path, &len);
    assert_non_null(txt);
    cJSON *d = cJSON_Parse(txt);
    free(txt);
    char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItem(d, "schema"));
    char spath[1024], dpath[1024];
    snprintf(spath, sizeof spath, "%s/%s.schema.json", test_tmpdir(), name);
    snprintf(dpath, sizeof dpath, "%s/%s.docs", test_tmpdir(), name);
    write_file(spath, schema);
    FILE *f = fopen(dpath, "wb");
    int n = 0;
    bool labels[256];
    static const char *lists[] = {"valid", "invalid"};
    for (int k = 0; k < 2; k++)
        for (cJSON *v = cJSON_GetObjectItem(d, lists[k])->child; v; v = v->next) {
            char *t = gv_text(v);
            fprintf(f, "%s\n", t);
            free(t);
            labels[n++] = k == 0;
        }
    fclose(f);
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --json-schema %s %s 2>/dev/null", test_tern_bin(), vocab, spath, dpath);
    assert_int_equal(run(cmd, &out), 0);
    int line = 0;
    for (char *s = out, *nl; *s; s = nl + 1, line++) {
        nl = strchr(s, '\n');
        assert_non_null(nl);
        *nl = 0;
        cJSON *j = cJSON_Parse(s);
        if (!j) fail_msg("%s: not JSON: %s", name, s);
        bool acc = cJSON_IsTrue(cJSON_GetObjectItem(j, "accept"));
        if (line >= n || acc != labels[line]) fail_msg("%s line %d: %s (label %s)", name, line + 1, s, labels[line] ? "valid" : "invalid");
        if (!acc) {
            assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "token")));
            assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "offset")));
            assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "reason")));
        }
        cJSON_Delete(j);
    }
    assert_int_equal(line, n);
    free(out);
    free(schema);
    cJSON_Delete(d);
}

static void test_check_corpus(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(q, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    const char *l3 = test_shared_path("fixtures/tokenizer/ggml-vocab-llama3-tiktoken.gguf");
    check_schema_file("03_create_calendar_event", q);
    check_schema_file("45_payment_method", q);
    check_schema_file("56_regex_features", l3);
    check_schema_file("08_place_order", l3);
}

static void test_check_tools_gbnf(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(q, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    char tools[1024], docs[1024], cmd[4096], *out;
    snprintf(tools, sizeof tools, "%s/tools.json", test_tmpdir());
    snprintf(docs, sizeof docs, "%s/calls.jsonl", test_tmpdir());
    write_file(tools, "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
                      " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"], \"additionalProperties\": false}}}]");
    write_file(docs, "\"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": {\\\"city\\\": \\\"Oslo\\\"}}\\n</tool_call>\"\n"
                     "\"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": {}}\\n</tool_call>\"\n"
                     "\"I think <tool_call>\"\n");
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --tools %s --tool-choice required --json-lines %s 2>/dev/null", test_tern_bin(), q, tools, docs);
    assert_int_equal(run(cmd, &out), 0);
    char *l2 = strchr(out, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    assert_true(!strncmp(out, "{\"accept\": true}\n", 17));
    assert_non_null(strstr(l2, "\"accept\":false"));
    assert_non_null(strstr(l3, "\"accept\":false,\"token\":0,\"offset\":0"));
    free(out);
    /* auto: free text then a call */
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --tools %s --tool-choice auto --json-lines %s 2>/dev/null", test_tern_bin(), q, tools, docs);
    assert_int_equal(run(cmd, &out), 0);
    l2 = strchr(out, '\n') + 1;
    l3 = strchr(l2, '\n') + 1;
    assert_true(!strncmp(out, "{\"accept\": true}\n", 17));
    assert_non_null(strstr(l2, "\"accept\":false"));
    assert_non_null(strstr(l3, "not complete")); /* inside an opened call at the end */
    free(out);
    /* GBNF from stdin, documents with newlines as JSON strings */
    snprintf(cmd, sizeof cmd, "printf -- '\"- a\\\\n- b\\\\n\"\\n\"\"\\n\"* c\\\\n\"\\n' | %s grammar check -m %s --grammar %s/tests/data/grammar/gbnf/list.gbnf --json-lines - 2>/dev/null",
             test_tern_bin(), q, test_source_dir());
    assert_int_equal(run(cmd, &out), 0);
    assert_string_equal(out, "{\"accept\": true}\n"
                             "{\"accept\":false,\"token\":0,\"offset\":0,\"reason\":\"the document is not complete (expected '-')\"}\n"
                             "{\"accept\":false,\"token\":0,\"offset\":0,\"reason\":\"token 9 refused: its byte 0 ('*') is not allowed at offset 0 (expected '-')\"}\n");
    free(out);
}

static void test_bench_json(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(g2, "fixtures/tokenizer/ggml-vocab-gpt-2.gguf");
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s grammar bench -m %s --json-schema %s/tests/fuzz/corpus/schema/01_get_weather.json --n-docs 8 --reps 3 --json",
             test_tern_bin(), g2, test_source_dir());
    assert_int_equal(run(cmd, &out), 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON: %s", out);
    static const char *keys[] = {"compile_ms", "mask_us_p50", "mask_us_p90", "mask_us_p99", "mask_us_max", "n_tokens", "grammar_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!cJSON_IsNumber(cJSON_GetObjectItem(j, keys[i]))) fail_msg("no number %s in %s", keys[i], out);
    assert_true(cJSON_GetObjectItem(j, "n_tokens")->valuedouble > 8);
    assert_int_equal((int)cJSON_GetObjectItem(j, "skipped_docs")->valuedouble, 0);
    cJSON_Delete(j);
    free(out);
}

/* The definition of --masks' hash (docs/tools.md "Comparing masks"): the sum modulo 2^64 of
 * splitmix64's finalizer over the allowed ids. */
static uint64_t id_hash(int32_t id)
{
    uint64_t z = (uint64_t)(uint32_t)id + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* --masks on a language of two words, {"yes", "no"} as JSON strings: at each step the allowed
 * tokens are, by brute force over the vocabulary, the non-control tokens whose piece extends
 * the text so far to a prefix of "yes" or "no" (with quotes); end of generation exactly when a
 * word is complete. Counts, hashes, the id list of --mask-ids and the end-of-generation counts
 * are checked against that, and the pieces of one step by hand. */
static void test_check_masks(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(q, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    char spath[1024], dpath[1024], mpath[1024], cmd[4096], *out;
    snprintf(spath, sizeof spath, "%s/yesno.schema.json", test_tmpdir());
    snprintf(dpath, sizeof dpath, "%s/yesno.docs", test_tmpdir());
    snprintf(mpath, sizeof mpath, "%s/yesno.masks", test_tmpdir());
    write_file(spath, "{\"enum\": [\"yes\", \"no\"]}");
    static const char *docs[] = {"\"yes\"", "\"no\"", "\"maybe\""};
    write_file(dpath, "\"yes\"\n\"no\"\n\"maybe\"\n");
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --json-schema %s --masks %s --mask-ids 1:1,2:3,1:3 %s 2>/dev/null",
             test_tern_bin(), q, spath, mpath, dpath);
    assert_int_equal(run(cmd, &out), 0);
    free(out);
    struct tern_tokenizer *tok;
    assert_int_equal(tern_tokenizer_load(q, &tok), TERN_OK);
    int32_t nv = tern_tokenizer_n_vocab(tok);
    size_t len;
    char *txt = test_read_file(mpath, &len);
    assert_non_null(txt);
    char *line = strtok(txt, "\n");
    cJSON *h = cJSON_Parse(line);
    assert_non_null(h);
    assert_int_equal((int)cJSON_GetObjectItem(h, "n_vocab")->valuedouble, nv);
    int n_eog = 0;
    cJSON *e = cJSON_GetObjectItem(h, "eog")->child;
    for (int32_t i = 0; i < nv; i++)
        if (tern_token_is_eog(tok, i)) {
            assert_non_null(e);
            assert_int_equal((int)e->valuedouble, i);
            e = e->next;
            n_eog++;
        }
    assert_null(e);
    assert_true(n_eog > 0);
    cJSON_Delete(h);
    static const char *words[] = {"\"yes\"", "\"no\""};
    int32_t *expect = malloc((size_t)nv * sizeof *expect);
    for (int d = 0; d < 3; d++) {
        line = strtok(NULL, "\n");
        assert_non_null(line);
        cJSON *j = cJSON_Parse(line);
        if (!j) fail_msg("not JSON: %s", line);
        assert_int_equal((int)cJSON_GetObjectItem(j, "doc")->valuedouble, d + 1);
        bool accepted = d < 2;
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(j, "accept")), accepted);
        int32_t ids[16];
        size_t n_ids;
        assert_int_equal(tern_tokenize(tok, docs[d], strlen(docs[d]), 0, ids, 16, &n_ids), TERN_OK);
        cJSON *toks = cJSON_GetObjectItem(j, "tokens");
        assert_int_equal(cJSON_GetArraySize(toks), (int)n_ids);
        for (size_t i = 0; i < n_ids; i++) assert_int_equal((int)cJSON_GetArrayItem(toks, (int)i)->valuedouble, ids[i]);
        cJSON *jn = cJSON_GetObjectItem(j, "n"), *jh = cJSON_GetObjectItem(j, "hash"), *je = cJSON_GetObjectItem(j, "eog");
        /* accepted: a mask before each token and one at the end; "maybe" is refused at its
         * second token ("m" after the quote), so its masks stop there */
        int steps = accepted ? (int)n_ids + 1 : 2;
        assert_int_equal(cJSON_GetArraySize(jn), steps);
        assert_int_equal(cJSON_GetArraySize(jh), steps);
        assert_int_equal(cJSON_GetArraySize(je), steps);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "us")), steps);
        char prefix[64] = "";
        for (int k = 0; k < steps; k++) {
            size_t pl = strlen(prefix), n_expect = 0;
            uint64_t hash = 0;
            for (int32_t id = 0; id < nv; id++) {
                char piece[256];
                size_t n;
                if (tern_token_is_control(tok, id) || tern_token_is_eog(tok, id)) continue;
                if (tern_token_to_piece(tok, id, 0, piece, sizeof piece - 1, &n) || n == 0 || pl + n > 32) continue;
                char ext[64];
                memcpy(ext, prefix, pl);
                memcpy(ext + pl, piece, n);
                for (int w = 0; w < 2; w++)
                    if (pl + n <= strlen(words[w]) && !memcmp(words[w], ext, pl + n)) {
                        expect[n_expect++] = id;
                        hash += id_hash(id);
                        break;
                    }
            }
            bool complete = !strcmp(prefix, words[0]) || !strcmp(prefix, words[1]);
            assert_int_equal((int)cJSON_GetArrayItem(jn, k)->valuedouble, (int)n_expect);
            assert_int_equal((int)cJSON_GetArrayItem(je, k)->valuedouble, complete ? n_eog : 0);
            char hex[17];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
            assert_string_equal(cJSON_GetArrayItem(jh, k)->valuestring, hex);
            /* --mask-ids 1:1,2:3,1:3: the ids of those steps, exactly the expected ones */
            cJSON *lists = cJSON_GetObjectItem(j, "ids");
            char key[16];
            snprintf(key, sizeof key, "%d", k);
            bool listed = (d == 0 && (k == 1 || k == 3)) || (d == 1 && k == 3);
            assert_int_equal(cJSON_GetObjectItem(lists, key) != NULL, listed);
            if (listed) { /* every allowed id, end-of-generation ones included */
                cJSON *jl = cJSON_GetObjectItem(lists, key);
                int at = 0;
                size_t e_i = 0;
                for (int32_t id = 0; id < nv; id++) {
                    bool allowed = (e_i < n_expect && expect[e_i] == id) || (complete && tern_token_is_eog(tok, id));
                    if (e_i < n_expect && expect[e_i] == id) e_i++;
                    if (!allowed) continue;
                    assert_true(at < cJSON_GetArraySize(jl));
                    assert_int_equal((int)cJSON_GetArrayItem(jl, at++)->valuedouble, id);
                }
                assert_int_equal(at, cJSON_GetArraySize(jl));
            }
            if (d == 0 && k == 1) { /* after the opening quote */
                /* by hand: Qwen2's vocabulary spells the words' starts as these tokens */
                const char *want[] = {"n", "no", "y", "ye", "yes"};
                int seen = 0;
                for (size_t i = 0; i < n_expect; i++) {
                    char piece[64];
                    size_t n;
                    assert_int_equal(tern_token_to_piece(tok, expect[i], 0, piece, sizeof piece - 1, &n), TERN_OK);
                    piece[n] = 0;
                    for (int w = 0; w < 5; w++) seen += !strcmp(piece, want[w]);
                }
                assert_int_equal((int)n_expect, 5);
                assert_int_equal(seen, 5);
            }
            if (k < (int)n_ids) {
                char piece[256];
                size_t n;
                assert_int_equal(tern_token_to_piece(tok, ids[k], 0, piece, sizeof piece - 1, &n), TERN_OK);
                size_t at = strlen(prefix);
                assert_true(at + n < sizeof prefix);
                memcpy(prefix + at, piece, n);
                prefix[at + n] = 0;
            }
        }
        cJSON_Delete(j);
    }
    assert_null(strtok(NULL, "\n"));
    free(expect);
    free(txt);
    /* a step that does not exist: an error, and no file left behind, not even the temporary */
    remove(mpath);
    snprintf(cmd, sizeof cmd, "%s grammar check -m %s --json-schema %s --masks %s --mask-ids 1:0,3:5 %s 2>&1",
             test_tern_bin(), q, spath, mpath, dpath);
    assert_int_equal(run(cmd, &out), 1);
    if (!strstr(out, "--mask-ids 3:5: no such document and step")) fail_msg("%s", out);
    free(out);
    FILE *f = fopen(mpath, "r");
    assert_null(f);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", mpath);
    f = fopen(tmp, "r");
    assert_null(f);
    tern_tokenizer_free(tok);
}

static void test_errors(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(g2, "fixtures/tokenizer/ggml-vocab-gpt-2.gguf");
    char bad[1024], cmd[4096], *out;
    snprintf(bad, sizeof bad, "%s/bad.json", test_tmpdir());
    write_file(bad, "{\"type\": \"object\",\n \"properties\": {\"when\": {\"type\": \"string\", \"format\": \"duration\"}}}");
    static const struct { const char *args; int rc; const char *msg; } t[] = {
        {"check -m %s --json-schema %s -", 1, "$.properties.when.format: unsupported format \"duration\""},
        {"check -m %s --json-schema %s --schema-lenient /dev/null", 0, "warning: $.properties.when.format"},
        {"check -m %s --json-schema %s --grammar x -", 2, "exactly one of"},
        {"check -m %s --json-schema %s", 2, "missing the input"},
        {"check -m %s --json-schema %s --ws pretty -", 2, "--ws: 'pretty'"},
        {"bench -m %s --json-schema %s --n-docs 0", 2, "--n-docs"},
        {"frobnicate -m %s %s", 2, "unknown subcommand"},
        {"check -m %s --json-schema %s --mask-ids 1:0 -", 2, "--mask-ids needs --masks FILE"},
        {"check -m %s --json-schema %s --masks /dev/null --mask-ids 0:1 -", 2, "--mask-ids: '0:1'"},
        {"check -m %s --json-schema %s --masks /dev/null --mask-ids 1 -", 2, "--mask-ids: '1' is not DOC:STEP"},
        {"check -m %s --json-schema %s --masks /dev/null --mask-ids 1:2, -", 2, "--mask-ids: '1:2,' is not DOC:STEP"},
        {"bench -m %s --json-schema %s --masks /dev/null", 2, "unknown option '--masks'"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char args[2048];
        snprintf(args, sizeof args, t[i].args, g2, bad);
        snprintf(cmd, sizeof cmd, "%s grammar %s < /dev/null 2>&1", test_tern_bin(), args);
        int rc = run(cmd, &out);
        if (rc != t[i].rc || !strstr(out, t[i].msg)) fail_msg("%s: exit %d '%s', wanted %d with '%s'", args, rc, out, t[i].rc, t[i].msg);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_check_masks),
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_check_tools_gbnf),
        cmocka_unit_test(test_check_corpus),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
