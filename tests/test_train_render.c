/* test_train_render.c — conversations -> training documents (src/train/train_render.c) and the
 * trainer's validation loss (tern_trainer_eval).
 *
 * Setup writes a 300-conversation corpus and trains a 1024-token vocabulary on it. Checks:
 *   - what the trainer sees is what inference sees: for every assistant message i of the first
 *     80 conversations, the document's tokens up to the turn equal the tokenization of the
 *     prompt tern_chat_render gives for messages[0..i) with the generation prompt (tokenized
 *     whole, as tern chat does), and the trained tokens that follow detokenize to the turn's
 *     text up to and including <|im_end|>; nothing else is trained on
 *   - malformed lines are skipped and counted with FILE:LINE, or fatal with strict; lines
 *     without an assistant turn and documents over max_tokens are counted apart
 *   - a template that rewrites history is refused naming the message
 *   - tern_trainer_eval: an untrained model's loss is near ln(vocab), its token count is the
 *     data's trained tokens, and evaluating between steps changes no bit of training
 *   - tern train --data/--val with .jsonl: val_loss lines; refused without a tokenizer
 *   - with a call validator (tern eval's), an answer whose calls validate is marked token by
 *     token (mask 2, 3, ...), one with an invalid call or plain text is not (1) */
#include "test_support.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tern.h"
#include "tern_bench.h"
#include "tern_train.h"

static char dir[512], corpus[600], tok_path[600], train_path[700];
static struct tern_tokenizer *tok;
static struct tern_chat_template *tmpl;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(corpus, sizeof corpus, "%s/corpus", dir);
    snprintf(train_path, sizeof train_path, "%s/train.jsonl", corpus);
    snprintf(tok_path, sizeof tok_path, "%s/tok.gguf", dir);
    struct tern_corpus_params cp = tern_corpus_default_params();
    cp.seed = 5;
    cp.size = 300;
    if (tern_corpus_toolcalls_write(corpus, &cp, NULL)) return -1;
    const char *files[] = {train_path};
    struct tern_bpe_train_params bp = tern_bpe_train_default_params();
    bp.vocab_size = 1024;
    if (tern_tokenizer_train(files, 1, &bp, tok_path, NULL)) return -1;
    struct tern_gguf *g;
    if (tern_tokenizer_load(tok_path, &tok) || tern_gguf_open(tok_path, &g)) return -1;
    tern_status st = tern_chat_template_from_gguf(g, &tmpl);
    tern_gguf_close(g);
    return st ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    tern_chat_template_free(tmpl);
    tern_tokenizer_free(tok);
    return 0;
}

/* A .tdat file read back by its documented layout. */
struct tdat {
    unsigned char *buf;
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
};

static void tdat_read(const char *path, struct tdat *t)
{
    size_t n;
    t->buf = (unsigned char *)test_read_file(path, &n);
    assert_non_null(t->buf);
    assert_true(n >= 24 && !memcmp(t->buf, "TRND", 4));
    memcpy(&t->n_docs, t->buf + 8, 8);
    memcpy(&t->n_tok, t->buf + 16, 8);
    assert_int_equal(n, 24 + (t->n_docs + 1) * 8 + t->n_tok * 5);
    t->off = (const uint64_t *)(t->buf + 24);
    t->tok = (const int32_t *)(t->buf + 24 + (t->n_docs + 1) * 8);
    t->mask = (const uint8_t *)(t->tok + t->n_tok);
}

static char *render(const char *messages, const char *tools, bool gen)
{
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = messages;
    p.tools_json = tools;
    p.add_generation_prompt = gen;
    p.now_unix = 0;
    char *out;
    size_t len;
    assert_tern_ok(tern_chat_render(tmpl, &p, &out, &len));
    return out;
}

/* messages[0..n) of conversation c as JSON text */
static char *prefix_json(const cJSON *messages, int n)
{
    cJSON *arr = cJSON_CreateArray();
    const cJSON *m = messages->child;
    for (int i = 0; i < n; i++, m = m->next) cJSON_AddItemToArray(arr, cJSON_Duplicate(m, true));
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

static void test_matches_inference(void **state)
{
    (void)state;
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    struct tern_train_render_report r;
    memset(&r, 0, sizeof r);
    assert_tern_ok(tern_train_data_add_jsonl(w, tok, tmpl, train_path, NULL, &r));
    assert_true(r.lines > 200);
    assert_int_equal(r.docs, r.lines);
    assert_int_equal(r.malformed + r.no_assistant + r.too_long, 0);
    assert_true(r.loss_tokens > 0 && r.loss_tokens < r.tokens / 2);
    char path[700];
    snprintf(path, sizeof path, "%s/all.tdat", dir);
    assert_tern_ok(tern_train_data_write(w, path));
    tern_train_data_writer_free(w);
    struct tdat t;
    tdat_read(path, &t);
    assert_int_equal(t.n_docs, (uint64_t)r.docs);
    assert_int_equal(t.n_tok, r.tokens);

    char *lines = test_read_file(train_path, NULL);
    int32_t *ids = malloc(65536 * sizeof *ids);
    char *text = malloc(1 << 20);
    int doc = 0, turns_checked = 0;
    for (char *line = strtok(lines, "\n"); line && doc < 80; line = strtok(NULL, "\n"), doc++) {
        cJSON *c = cJSON_Parse(line);
        const cJSON *messages = cJSON_GetObjectItemCaseSensitive(c, "messages");
        char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c, "tools"));
        const int32_t *dt = t.tok + t.off[doc];
        const uint8_t *dm = t.mask + t.off[doc];
        const size_t dn = t.off[doc + 1] - t.off[doc];
        size_t trained = 0, expect_trained = 0;
        for (size_t k = 0; k < dn; k++) trained += dm[k];
        int i = 0;
        for (const cJSON *m = messages->child; m; m = m->next, i++) {
            if (strcmp(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, "assistant")) continue;
            char *before = prefix_json(messages, i), *upto = prefix_json(messages, i + 1);
            char *prompt = render(before, tools, true), *after = render(upto, tools, false);
            size_t np;
            assert_tern_ok(tern_tokenize(tok, prompt, strlen(prompt),
                                         TERN_TOK_PARSE_SPECIAL | TERN_TOK_ADD_SPECIAL, ids, 65536, &np));
            /* the document starts with the inference prompt, untrained... */
            assert_true(np < dn);
            assert_memory_equal(dt, ids, np * sizeof *ids);
            assert_int_equal(dm[np - 1], 0);
            /* ...and the turn is trained on up to and including <|im_end|> */
            size_t e = np;
            while (e < dn && dm[e]) e++;
            assert_true(e > np);
            assert_true(tern_token_is_eog(tok, dt[e - 1]));
            size_t tl;
            assert_tern_ok(tern_detokenize(tok, dt + np, e - np, TERN_PIECE_SPECIAL, text, 1 << 20, &tl));
            const char *turn = after + strlen(prompt);
            const size_t turn_len = strcspn(turn, "\x01"); /* whole rest; cut at <|im_end|> below */
            size_t cut = 0;
            while (cut + 10 <= turn_len && memcmp(turn + cut, "<|im_end|>", 10)) cut++;
            assert_true(cut + 10 <= turn_len);
            assert_int_equal(tl, cut + 10);
            assert_memory_equal(text, turn, tl);
            expect_trained += e - np;
            turns_checked++;
            free(before), free(upto), free(prompt), free(after);
        }
        assert_int_equal(trained, expect_trained); /* nothing but the turns */
        free(tools);
        cJSON_Delete(c);
    }
    assert_int_equal(doc, 80);
    assert_true(turns_checked > 100);
    free(ids), free(text), free(lines), free(t.buf);
}

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
}

static bool eval_valid(const char *tools, const char *name, const char *args, void *user)
{
    ++*(int *)user;
    return tern_eval_call_valid(tools, name, args, NULL, 0);
}

/* The early tool-call loss's marks: the answer calling get_weather with its required "city" is
 * marked 2, 3, ... over its trained tokens; the same call without "city", and the text answer
 * after the tool's result, are marked 1; without a validator nothing is marked. */
static void test_tool_marks(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/tools.jsonl", dir);
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
                        "\"required\": [\"city\"]}}}]";
    char text[4096];
    snprintf(text, sizeof text,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}, {\"role\": \"assistant\", "
             "\"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": "
             "{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}}]}, {\"role\": \"tool\", "
             "\"tool_call_id\": \"c1\", \"content\": \"{\\\"temp\\\": 3}\"}, {\"role\": \"assistant\", "
             "\"content\": \"It is 3 degrees in Oslo.\"}], \"tools\": %s}\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}, {\"role\": \"assistant\", "
             "\"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": "
             "{\"name\": \"get_weather\", \"arguments\": \"{\\\"town\\\": \\\"Oslo\\\"}\"}}]}], \"tools\": %s}\n",
             tools, tools);
    write_text(path, text);
    for (int with = 0; with < 2; with++) {
        struct tern_train_data_writer *w;
        assert_tern_ok(tern_train_data_writer_create(&w));
        struct tern_train_render_params p = tern_train_render_default_params();
        int calls = 0;
        if (with) p.call_valid = eval_valid, p.call_valid_user = &calls;
        struct tern_train_render_report r;
        memset(&r, 0, sizeof r);
        assert_tern_ok(tern_train_data_add_jsonl(w, tok, tmpl, path, &p, &r));
        assert_int_equal(r.docs, 2);
        assert_int_equal(r.tool_turns, with ? 1 : 0);
        assert_int_equal(calls, with ? 2 : 0);
        char tp[720];
        snprintf(tp, sizeof tp, "%s/tools%d.tdat", dir, with);
        assert_tern_ok(tern_train_data_write(w, tp));
        tern_train_data_writer_free(w);
        struct tdat t;
        tdat_read(tp, &t);
        /* document 0: the first trained run is the call, the second the text answer */
        const uint8_t *m = t.mask + t.off[0];
        const size_t n = t.off[1] - t.off[0];
        size_t i = 0, runs = 0, marked = 0;
        while (i < n) {
            if (!m[i]) {
                i++;
                continue;
            }
            size_t j = i;
            for (; j < n && m[j]; j++) {
                const uint8_t want = with && runs == 0 ? (uint8_t)(2 + (j - i)) : 1;
                assert_int_equal(m[j], want);
                marked += m[j] >= 2;
            }
            runs++;
            i = j;
        }
        assert_int_equal(runs, 2);
        assert_true(with ? marked > 5 : marked == 0);
        /* document 1: the invalid call is trained on, unmarked */
        for (uint64_t k = t.off[1]; k < t.off[2]; k++) assert_true(t.mask[k] <= 1);
        free(t.buf);
    }
}

static void test_bad_lines(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/bad.jsonl", dir);
    write_text(path,
               "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}]}\n"
               "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"\n"
               "\n"
               "{\"messages\": 5}\n"
               "{\"messages\": [{\"role\": \"user\", \"content\": \"only a question\"}]}\n"
               "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": 7}]}\n"
               "[1, 2]\n");
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    struct tern_train_render_report r;
    memset(&r, 0, sizeof r);
    assert_tern_ok(tern_train_data_add_jsonl(w, tok, tmpl, path, NULL, &r));
    assert_int_equal(r.lines, 6); /* the blank line is not one */
    assert_int_equal(r.docs, 1);
    assert_int_equal(r.malformed, 4);
    assert_int_equal(r.no_assistant, 1);
    assert_non_null(strstr(r.first_problem, "bad.jsonl:2: malformed JSON"));
    struct tern_train_render_params p = tern_train_render_default_params();
    p.strict = true;
    assert_int_equal(tern_train_data_add_jsonl(w, tok, tmpl, path, &p, NULL), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "bad.jsonl:2:"));
    /* too long */
    memset(&r, 0, sizeof r);
    p.strict = false;
    p.max_tokens = 5;
    assert_int_equal(tern_train_data_add_jsonl(w, tok, tmpl, path, &p, &r), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "no conversation could be trained on (6 lines: 4 "
                                              "malformed, 1 without an assistant message, 1 too long)"));
    assert_non_null(strstr(tern_last_error(), "first: "));
    assert_int_equal(r.docs, 0);
    assert_int_equal(r.too_long, 1);
    assert_non_null(strstr(r.first_problem, "bad.jsonl:1:"));
    assert_non_null(strstr(r.first_problem, "more than the limit of 5"));
    /* a missing file */
    snprintf(path, sizeof path, "%s/none.jsonl", dir);
    assert_int_equal(tern_train_data_add_jsonl(w, tok, tmpl, path, NULL, NULL), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "none.jsonl"));
    tern_train_data_writer_free(w);
}

static void test_history_rewriting_template(void **state)
{
    (void)state;
    const char *src = "{% for m in messages|reverse %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                      "{% if add_generation_prompt %}assistant: {% endif %}";
    struct tern_chat_template *rev;
    assert_tern_ok(tern_chat_template_create(src, strlen(src), &rev));
    char path[700];
    snprintf(path, sizeof path, "%s/two.jsonl", dir);
    write_text(path, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"},"
                     " {\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"assistant\", \"content\": \"d\"}]}\n");
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    assert_int_equal(tern_train_data_add_jsonl(w, tok, rev, path, NULL, NULL), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "two.jsonl:1: messages[1]"));
    tern_train_data_writer_free(w);
    tern_chat_template_free(rev);
}

static struct tern_train_config small_config(void)
{
    struct tern_train_config c = tern_train_config_default();
    c.n_embd = 32, c.n_layer = 2, c.n_head = 2, c.n_head_kv = 1, c.n_ff = 64;
    c.n_ctx = 2048, c.n_vocab = 1024, c.threads = 2, c.steps = 4, c.warmup = 1;
    snprintf(c.tokenizer, sizeof c.tokenizer, "%s", tok_path);
    return c;
}

static void test_eval(void **state)
{
    (void)state;
    struct tern_train_config c = small_config();
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    struct tern_train_render_params p = tern_train_render_default_params();
    p.max_tokens = c.n_ctx;
    struct tern_train_render_report r;
    memset(&r, 0, sizeof r);
    char val[700];
    snprintf(val, sizeof val, "%s/val.jsonl", corpus);
    assert_tern_ok(tern_train_data_add_jsonl(w, tok, tmpl, val, &p, &r));
    assert_true(r.docs > 5);
    struct tern_train_data *d;
    assert_tern_ok(tern_train_data_from_writer(w, &d));
    tern_train_data_writer_free(w);
    assert_int_equal(tern_train_data_n_tokens(d), r.tokens);

    struct tern_trainer *a, *b;
    assert_tern_ok(tern_trainer_create(&c, &a));
    assert_tern_ok(tern_trainer_create(&c, &b));
    assert_tern_ok(tern_trainer_init(a));
    assert_tern_ok(tern_trainer_init(b));
    double loss;
    long long n;
    assert_tern_ok(tern_trainer_eval(a, d, &loss, &n));
    /* every trained token but a document's first (nothing predicts it) is counted */
    assert_int_equal((uint64_t)n, r.loss_tokens);
    assert_true(fabs(loss - log(1024.0)) < 0.1);
    struct tern_train_step_info si;
    for (int s = 0; s < 3; s++) {
        assert_tern_ok(tern_trainer_step(a, d, &si));
        assert_tern_ok(tern_trainer_eval(a, d, &loss, &n)); /* between every step */
        assert_tern_ok(tern_trainer_step(b, d, &si));
    }
    size_t na, nb;
    const float *wa = tern_trainer_weights(a, &na), *wb = tern_trainer_weights(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(wa, wb, na * sizeof *wa);
    assert_true(loss < log(1024.0));
    tern_trainer_free(a);
    tern_trainer_free(b);
    tern_train_data_free(d);
}

static void test_cli(void **state)
{
    (void)state;
    char cfg[700], cmd[4096], out[16384];
    snprintf(cfg, sizeof cfg, "%s/cfg.json", dir);
    char json[2048];
    snprintf(json, sizeof json, "{\"n_embd\": 32, \"n_layer\": 1, \"n_head\": 2, \"n_ff\": 64, "
             "\"n_ctx\": 1024, \"tokenizer\": \"%s\", \"steps\": 2, \"warmup\": 1, \"threads\": 1}", tok_path);
    write_text(cfg, json);
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s --val %s/val.jsonl --val-every 1 -o %s/m.gguf --json 2>%s/err.txt",
             test_tern_bin(), cfg, train_path, corpus, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    int vals = 0;
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(l);
        assert_non_null(j);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "val_loss");
        if (v) {
            assert_true(cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 10);
            vals++;
        }
        cJSON_Delete(j);
    }
    assert_int_equal(vals, 2);
    snprintf(cmd, sizeof cmd, "%s/err.txt", dir);
    char *err = test_read_file(cmd, NULL);
    assert_non_null(strstr(err, "conversations ->")); /* the render summary, on stderr */
    assert_non_null(strstr(err, "longer than n_ctx 1024"));
    free(err);
    /* the model runs with its own tokenizer and template */
    snprintf(cmd, sizeof cmd, "%s run -m %s/m.gguf -p hello -n 4 --temp 0 2>&1", test_tern_bin(), dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    /* conversations without a tokenizer to render them */
    write_text(cfg, "{\"n_embd\": 32, \"n_layer\": 1, \"n_head\": 2, \"n_ff\": 64, \"n_vocab\": 1024}");
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s/x.gguf 2>&1", test_tern_bin(), cfg, train_path, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "need \"tokenizer\""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_inference), cmocka_unit_test(test_tool_marks),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_history_rewriting_template), cmocka_unit_test(test_eval),
        cmocka_unit_test(test_cli),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
