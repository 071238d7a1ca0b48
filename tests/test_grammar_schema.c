/* test_grammar_schema.c — the JSON Schema corpus (tests/data/grammar/schemas: tool-API shaped
 * schemas, each with valid and invalid instances written for the project).
 *
 * For every instance: the label, an independent validator (grammar_validator.h) and tern must
 * agree. tern is checked three ways: byte level (accept_bytes, then complete?), and token
 * level on the Qwen2 and Llama 3 vocabularies as generation would walk it: at every step the
 * mask is filled and the instance's next token must be in it exactly when the matcher accepts
 * it; a valid instance must get every token allowed and end complete with end-of-generation in
 * the mask; an invalid one must be refused somewhere. Instances are written in tern's compact
 * form (", " and ": ", schema property order); `valid_text` / `invalid_text` hold raw texts. */
#include "test_support.h"

#include <dirent.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_validator.h"

struct inst {
    char *text;
    cJSON *value;  /* NULL for raw texts */
    bool valid;
};

struct scase {
    char name[128];
    char *schema;   /* text */
    cJSON *doc;
    struct inst *inst;
    int n_inst;
};

static struct scase *cases;
static int n_cases;

static int cmp_name(const void *a, const void *b) { return strcmp(((const struct scase *)a)->name, ((const struct scase *)b)->name); }

static void load_corpus(void)
{
    if (cases) return;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/grammar/schemas", test_source_dir());
    DIR *d = opendir(dir);
    assert_non_null(d);
    int cap = 128;
    cases = calloc((size_t)cap, sizeof *cases);
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *txt = test_read_file(path, &len);
        assert_non_null(txt);
        cJSON *j = cJSON_Parse(txt);
        free(txt);
        if (!j) fail_msg("%s: not JSON", path);
        assert_true(n_cases < cap);
        struct scase *c = &cases[n_cases++];
        snprintf(c->name, sizeof c->name, "%.*s", (int)(l - 5), e->d_name);
        c->doc = j;
        c->schema = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "schema"));
        static const char *lists[] = {"valid", "invalid", "valid_text", "invalid_text"};
        int n = 0;
        for (int k = 0; k < 4; k++) n += cJSON_GetArraySize(cJSON_GetObjectItem(j, lists[k]));
        c->inst = calloc((size_t)n + 1, sizeof *c->inst);
        for (int k = 0; k < 4; k++)
            for (cJSON *v = cJSON_GetObjectItem(j, lists[k]) ? cJSON_GetObjectItem(j, lists[k])->child : NULL; v; v = v->next) {
                struct inst *in = &c->inst[c->n_inst++];
                in->valid = k % 2 == 0;
                if (k < 2) { in->value = v; in->text = gv_text(v); }
                else in->text = strdup(v->valuestring);
            }
    }
    closedir(d);
    qsort(cases, (size_t)n_cases, sizeof *cases, cmp_name);
}

/* the corpus itself: enough schemas, every label agrees with the independent validator */
static void test_corpus_labels(void **state)
{
    (void)state;
    load_corpus();
    assert_true(n_cases >= 50);
    int n_valid = 0, n_invalid = 0;
    for (int i = 0; i < n_cases; i++) {
        const cJSON *sch = cJSON_GetObjectItem(cases[i].doc, "schema");
        for (int k = 0; k < cases[i].n_inst; k++) {
            struct inst *in = &cases[i].inst[k];
            if (in->valid) n_valid++; else n_invalid++;
            if (!in->value) continue;
            bool v = gv_valid(sch, sch, in->value, 0);
            if (v != in->valid) fail_msg("%s: label %s but the validator says %s: %s", cases[i].name,
                                         in->valid ? "valid" : "invalid", v ? "valid" : "invalid", in->text);
        }
    }
    print_message("%d schemas, %d valid and %d invalid instances\n", n_cases, n_valid, n_invalid);
}

/* byte level: no vocabulary */
static void test_corpus_bytes(void **state)
{
    (void)state;
    load_corpus();
    int n = 0;
    for (int i = 0; i < n_cases; i++) {
        struct tern_grammar *g;
        struct tern_grammar_params gp = tern_grammar_default_params();
        tern_status st = tern_grammar_from_json_schema(NULL, cases[i].schema, strlen(cases[i].schema), &gp, &g);
        if (st) fail_msg("%s: %s", cases[i].name, tern_last_error());
        struct tern_grammar_matcher *m;
        assert_tern_ok(tern_grammar_matcher_create(g, &m));
        for (int k = 0; k < cases[i].n_inst; k++) {
            struct inst *in = &cases[i].inst[k];
            tern_grammar_matcher_reset(m);
            bool ok = tern_grammar_matcher_accept_bytes(m, in->text, strlen(in->text), NULL) == TERN_OK &&
                      tern_grammar_matcher_is_complete(m);
            if (ok != in->valid)
                fail_msg("%s: %s instance %s by tern (%s): %s", cases[i].name, in->valid ? "valid" : "invalid",
                         ok ? "accepted" : "refused", ok ? "" : tern_last_error(), in->text);
            n++;
        }
        tern_grammar_matcher_free(m);
        tern_grammar_free(g);
    }
    print_message("byte level: %d instances agree\n", n);
}

/* token level on one vocabulary, as generation walks it */
static void corpus_tokens(const char *vocab_file)
{
    TEST_SHARED_OR_SKIP(path, vocab_file);
    load_corpus();
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_tokenizer_load(path, &tok));
    struct tern_grammar_vocab *v;
    assert_tern_ok(tern_grammar_vocab_create(tok, &v));
    uint32_t *mask = malloc(tern_grammar_mask_words(v) * 4);
    int32_t *ids = malloc(65536 * sizeof *ids);
    int32_t eog = -1;
    for (int32_t i = 0; i < tern_tokenizer_n_vocab(tok) && eog < 0; i++)
        if (tern_token_is_eog(tok, i)) eog = i;
    assert_true(eog >= 0);
    int n = 0, n_tokens = 0;
    for (int i = 0; i < n_cases; i++) {
        struct tern_grammar *g;
        struct tern_grammar_params gp = tern_grammar_default_params();
        if (tern_grammar_from_json_schema(v, cases[i].schema, strlen(cases[i].schema), &gp, &g))
            fail_msg("%s: %s", cases[i].name, tern_last_error());
        struct tern_grammar_matcher *m;
        assert_tern_ok(tern_grammar_matcher_create(g, &m));
        for (int k = 0; k < cases[i].n_inst; k++) {
            struct inst *in = &cases[i].inst[k];
            size_t nt;
            assert_tern_ok(tern_tokenize(tok, in->text, strlen(in->text), 0, ids, 65536, &nt));
            tern_grammar_matcher_reset(m);
            bool refused = false;
            for (size_t t = 0; t < nt && !refused; t++) {
                int cnt = tern_grammar_matcher_fill_mask(m, mask);
                bool bit = (mask[ids[t] >> 5] >> (ids[t] & 31)) & 1;
                tern_status st = tern_grammar_matcher_accept(m, ids[t], NULL);
                if ((st == TERN_OK) != bit)
                    fail_msg("%s: token %zu (%d) of %s: mask %d but accept %d (%s)", cases[i].name, t, ids[t], in->text, bit,
                             st == TERN_OK, st ? tern_last_error() : "");
                if (cnt <= 0) fail_msg("%s: empty mask at token %zu of %s", cases[i].name, t, in->text);
                refused = st != TERN_OK;
                n_tokens++;
            }
            bool complete = false;
            if (!refused) {
                tern_grammar_matcher_fill_mask(m, mask);
                bool eog_bit = (mask[eog >> 5] >> (eog & 31)) & 1;
                complete = tern_grammar_matcher_is_complete(m);
                if (complete != eog_bit) fail_msg("%s: complete=%d but end-of-generation in mask=%d: %s", cases[i].name, complete, eog_bit, in->text);
            }
            bool accepted = !refused && complete;
            if (accepted != in->valid)
                fail_msg("%s (%s): %s instance %s at token level: %s", cases[i].name, vocab_file, in->valid ? "valid" : "invalid",
                         accepted ? "accepted" : "refused", in->text);
            n++;
        }
        tern_grammar_matcher_free(m);
        tern_grammar_free(g);
    }
    print_message("%s: %d instances (%d tokens) agree\n", vocab_file, n, n_tokens);
    free(mask);
    free(ids);
    tern_grammar_vocab_free(v);
    tern_tokenizer_free(tok);
}

static void test_corpus_qwen2(void **state)
{
    (void)state;
    corpus_tokens("fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
}

static void test_corpus_llama3(void **state)
{
    (void)state;
    corpus_tokens("fixtures/tokenizer/ggml-vocab-llama3-tiktoken.gguf");
}

int main(void)
{
    setlocale(LC_CTYPE, "C.UTF-8");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_labels),
        cmocka_unit_test(test_corpus_bytes),
        cmocka_unit_test(test_corpus_qwen2),
        cmocka_unit_test(test_corpus_llama3),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
