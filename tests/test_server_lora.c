/* test_server_lora.c — tern serve with LoRA adapters resident over one base,
 * over real HTTP on loopback, the server in-process on the qwen2-tiny fixture with two random
 * adapters (tern_lora_write), one of them carrying its own chat template.
 *
 * Checked: /v1/models lists the base and each adapter (with the base as parent); "model" picks
 * the adapter and an adapter changes the answer; the base answers the same before and after
 * adapters ran (switching attaches, it does not reload or leave anything behind); an adapter
 * with a chat template renders with it (another prompt length); a prefix computed with one
 * flavor is never reused for another (cached_tokens 0), while the same flavor reuses its own;
 * requests of all three flavors sent at once each get exactly their solo answer. */
#include "test_support.h"
#include "tern_server.h"
#include "test_http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *model_path;
static char ad1[600], ad2[600];

/* A random adapter of rank 4 on every layer's q, v and ffn_down of model m. */
static void write_adapter(const struct tern_model *m, const char *path, uint64_t seed,
                          const char *tmpl)
{
    const struct tern_model_info *in = tern_model_get_info(m);
    const char *parts[3] = {"attn_q", "attn_v", "ffn_down"};
    const int L = in->n_layer, r = 32;
    struct tern_lora_tensor *t = calloc((size_t)L * 3, sizeof *t);
    char(*names)[64] = calloc((size_t)L * 3, sizeof *names);
    float **bufs = calloc((size_t)L * 6, sizeof *bufs);
    int n = 0;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 3; k++) {
            const int64_t n_in = k == 2 ? in->n_ff : in->n_embd;
            const int64_t n_out = k == 0 ? (int64_t)in->n_head * in->head_dim
                                : k == 1 ? (int64_t)in->n_head_kv * in->head_dim : in->n_embd;
            float *a = malloc((size_t)(r * n_in) * sizeof *a), *b = malloc((size_t)(r * n_out) * sizeof *b);
            for (int64_t i = 0; i < r * n_in; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                a[i] = (float)((double)(seed >> 11) / 9007199254740992.0 - 0.5) * 0.6f;
            }
            for (int64_t i = 0; i < r * n_out; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                b[i] = (float)((double)(seed >> 11) / 9007199254740992.0 - 0.5) * 0.6f;
            }
            snprintf(names[n], sizeof names[n], "blk.%d.%s.weight", l, parts[k]);
            t[n] = (struct tern_lora_tensor){names[n], r, n_in, n_out, a, b};
            bufs[2 * n] = a, bufs[2 * n + 1] = b;
            n++;
        }
    const char *kv[2] = {"tokenizer.chat_template", tmpl};
    assert_tern_ok(tern_lora_write_kv(path, in->arch_name, (float)r, t, n, "f32", kv, tmpl ? 1 : 0));
    for (int i = 0; i < 2 * n; i++) free(bufs[i]);
    free(bufs);
    free(names);
    free(t);
}


static void srv_start(struct test_srv *v, int n_parallel, uint64_t cache_bytes)
{
    static const char *names[2] = {"ad1", "ad2"};
    const char *paths[2] = {ad1, ad2};
    struct tern_server_params p = tern_server_default_params();
    p.model_path = model_path;
    p.port = 0;
    p.n_parallel = n_parallel;
    p.n_ctx = 512;
    p.n_threads = 1;
    p.quiet = true;
    p.cache_bytes = cache_bytes;
    p.lora_names = names;
    p.lora_paths = paths;
    p.n_lora = 2;
    test_srv_start(v, &p);
}

struct answer {
    char text[512];
    int prompt, cached;
};

static void ask(int port, const char *model, const char *q, struct answer *a)
{
    char body[2048];
    snprintf(body, sizeof body, "{\"model\": \"%s\", \"messages\": [{\"role\": \"system\", \"content\": "
             "\"You answer in one short sentence about the weather and nothing else at all.\"}, "
             "{\"role\": \"user\", \"content\": \"%s\"}], \"max_tokens\": 12, \"temperature\": 0}",
             model, q);
    cJSON *j = test_post_chat(port, NULL, body, 200);
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
    const cJSON *t = cJSON_GetObjectItem(c, "content");
    snprintf(a->text, sizeof a->text, "%s", cJSON_IsString(t) ? t->valuestring : "");
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    a->prompt = (int)cJSON_GetObjectItem(u, "prompt_tokens")->valuedouble;
    const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(u, "prompt_tokens_details"), "cached_tokens");
    a->cached = cJSON_IsNumber(d) ? (int)d->valuedouble : 0;
    cJSON_Delete(j);
}

static int setup(void **state)
{
    (void)state;
    model_path = test_shared_path_copy("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (!model_path) return 0;
    struct tern_model *m;
    assert_tern_ok(tern_model_load(model_path, NULL, &m));
    snprintf(ad1, sizeof ad1, "%s/ad1.gguf", test_tmpdir());
    snprintf(ad2, sizeof ad2, "%s/ad2.gguf", test_tmpdir());
    write_adapter(m, ad1, 1, NULL);
    write_adapter(m, ad2, 2, "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\nADAPTER TWO '"
                  " + m.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
                  "{{- '<|im_start|>assistant\\n' }}{%- endif %}");
    tern_model_free(m);
    return 0;
}

static void test_models_and_routing(void **state)
{
    (void)state;
    if (!model_path) TEST_SKIP("../shared (fixtures) not found\n");
    struct test_srv v;
    srv_start(&v, 1, 64u << 20);
    struct test_resp r;
    test_http(v.port, "GET", "/v1/models", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    cJSON *j = cJSON_Parse(r.body);
    free(r.body);
    const cJSON *d = cJSON_GetObjectItem(j, "data");
    assert_int_equal(cJSON_GetArraySize(d), 3);
    const char *base = cJSON_GetObjectItem(cJSON_GetArrayItem(d, 0), "id")->valuestring;
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 1), "id")->valuestring, "ad1");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 2), "id")->valuestring, "ad2");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 1), "parent")->valuestring, base);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 0), "parent"));
    char base_id[256];
    snprintf(base_id, sizeof base_id, "%s", base);
    cJSON_Delete(j);

    struct answer b0, a1, a1b, b1, a2, other;
    ask(v.port, base_id, "Is it raining in Oslo today?", &b0);
    ask(v.port, "ad1", "Is it raining in Oslo today?", &a1);
    ask(v.port, "ad1", "Is it raining in Oslo today?", &a1b);
    ask(v.port, base_id, "Is it raining in Oslo today?", &b1);
    ask(v.port, "ad2", "Is it raining in Oslo today?", &a2);
    ask(v.port, "some-other-name", "Is it raining in Oslo today?", &other);
    print_message("base: '%s' | ad1: '%s' | ad2 (own template, %d vs %d prompt tokens): '%s'\n",
                  b0.text, a1.text, a2.prompt, b0.prompt, a2.text);
    assert_string_not_equal(b0.text, a1.text); /* the adapter changes the answer */
    assert_string_equal(a1.text, a1b.text);
    assert_string_equal(b0.text, b1.text);     /* the base is the base again after ad1 */
    assert_string_equal(b0.text, other.text);  /* other names run the base */
    assert_int_not_equal(a2.prompt, b0.prompt); /* ad2's own template rendered its prompt */
    /* reuse stays within a flavor: ad1 computed after the base shares no KV with it, and its own
     * second request reuses its prefix */
    assert_int_equal(a1.cached, 0);
    assert_true(a1b.cached > 0);
    assert_true(b1.cached > 0);
    test_srv_stop(&v);
}

struct conc {
    int port;
    const char *model;
    struct answer a;
};

static void *conc_thread(void *arg)
{
    struct conc *c = arg;
    ask(c->port, c->model, "Will it snow in Bergen tomorrow?", &c->a);
    return NULL;
}

static void test_concurrent_flavors(void **state)
{
    (void)state;
    if (!model_path) TEST_SKIP("../shared (fixtures) not found\n");
    struct test_srv v;
    srv_start(&v, 3, 0);
    const char *models[3] = {"x-base", "ad1", "ad2"};
    struct answer solo[3];
    for (int i = 0; i < 3; i++) ask(v.port, models[i], "Will it snow in Bergen tomorrow?", &solo[i]);
    struct conc c[9];
    pthread_t th[9];
    for (int i = 0; i < 9; i++) {
        c[i] = (struct conc){.port = v.port, .model = models[i % 3]};
        assert_int_equal(pthread_create(&th[i], NULL, conc_thread, &c[i]), 0);
    }
    for (int i = 0; i < 9; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 9; i++) assert_string_equal(c[i].a.text, solo[i % 3].text);
    test_srv_stop(&v);
}

static void test_bad_adapter(void **state)
{
    (void)state;
    if (!model_path) TEST_SKIP("../shared (fixtures) not found\n");
    /* an adapter for another base (the llama fixture's shapes) is refused naming it */
    const char *other = test_shared_path("fixtures/models/llama-spm-tiny-q8_0.gguf");
    if (!other) TEST_SKIP("fixtures/models/llama-spm-tiny-q8_0.gguf not found\n");
    char bad[700];
    snprintf(bad, sizeof bad, "%s/other.gguf", test_tmpdir());
    struct tern_model *m;
    assert_tern_ok(tern_model_load(other, NULL, &m));
    write_adapter(m, bad, 3, NULL);
    tern_model_free(m);
    const char *names[1] = {"bad"}, *paths[1] = {bad};
    struct tern_server_params p = tern_server_default_params();
    p.model_path = model_path;
    p.port = 0;
    p.quiet = true;
    p.lora_names = names;
    p.lora_paths = paths;
    p.n_lora = 1;
    struct tern_server *s = NULL;
    assert_int_not_equal(tern_server_create(&p, &s), TERN_OK);
    assert_non_null(strstr(tern_last_error(), "other.gguf"));
    tern_server_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_and_routing),
        cmocka_unit_test(test_concurrent_flavors),
        cmocka_unit_test(test_bad_adapter),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
