/* corpus_tools.c — the tool pool: every template (corpus_domains.c) becomes several tools, and the
 * pool is split so that the test split only sees tools that never occur in train or val.
 *
 * A template's variants differ in name (verb x object: get_forecast, fetch_weather_forecast),
 * parameter names (city / location / city_name), descriptions, and which optional parameters
 * exist; variant 0 keeps them all. Names are unique across the pool.
 *
 * Split: in every domain, about 15% of the templates (at least one) go to the test pool with all
 * their tools, chosen by a seeded hash, so test tools are whole unseen operations. A signature
 * is the sorted list of (parameter name, type, required); a test tool whose signature also
 * occurs in the train pool is dropped, so test tools differ from every train tool in name AND
 * signature (test_corpus checks both). */
#include <stdlib.h>
#include <string.h>

#include "corpus/corpus.h"
#include "util/check.h"
#include "util/error.h"

#define MAX_VARIANTS 5
#define TEST_PERCENT 15

struct parsed_param {
    const struct corpus_kind *kind;
    bool required;
};

/* "city! date units" -> kinds. Unknown keys are table bugs (asserted; skipped in Release). */
static int parse_params(const char *spec, struct parsed_param *out, int cap)
{
    int n = 0;
    const char *p = spec;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        char key[64];
        size_t l = (size_t)(e - p);
        bool req = l > 0 && p[l - 1] == '!';
        if (req) l--;
        corpus_fmt(key, sizeof key, "%.*s", (int)l, p);
        const struct corpus_kind *k = corpus_kind_find(key);
        TERN_ASSERT(k != NULL);
        if (k && n < cap) {
            out[n].kind = k;
            out[n].required = req;
            n++;
        }
        p = e;
    }
    return n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static uint64_t signature(const struct corpus_tool *t)
{
    char items[CORPUS_MAX_PARAMS][64];
    const char *ptr[CORPUS_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) {
        corpus_fmt(items[i], sizeof items[i], "%s:%d:%d", t->p[i].name, t->p[i].kind->type, t->p[i].required);
        ptr[i] = items[i];
    }
    qsort(ptr, (size_t)t->n_params, sizeof ptr[0], cmp_str);
    uint64_t h = CORPUS_HASH0;
    for (int i = 0; i < t->n_params; i++) h = corpus_hash(h, ptr[i], strlen(ptr[i]) + 1);
    return h;
}

static cJSON *tool_json(const struct corpus_tool *t)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(root, "function");
    cJSON_AddStringToObject(fn, "name", t->name);
    cJSON_AddStringToObject(fn, "description", t->desc);
    cJSON *params = cJSON_AddObjectToObject(fn, "parameters");
    cJSON_AddStringToObject(params, "type", "object");
    cJSON *props = cJSON_AddObjectToObject(params, "properties");
    cJSON *req = cJSON_AddArrayToObject(params, "required");
    for (int i = 0; i < t->n_params; i++) {
        cJSON_AddItemToObject(props, t->p[i].name, corpus_kind_schema(t->p[i].kind, t->p[i].desc));
        if (t->p[i].required) cJSON_AddItemToArray(req, cJSON_CreateString(t->p[i].name));
    }
    return root;
}

/* Open-addressing set of tool names (the pool is a few thousand tools). */
struct name_set {
    uint64_t *h;
    size_t cap;
};
static bool name_set_add(struct name_set *s, const char *name)
{
    uint64_t h = corpus_hash(CORPUS_HASH0, name, strlen(name)) | 1;
    size_t i = (size_t)h & (s->cap - 1);
    while (s->h[i]) {
        if (s->h[i] == h) return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->h[i] = h;
    return true;
}

static bool make_variant(struct corpus_rng *r, int ti, const struct corpus_tmpl *tm, int v, int combo,
                         const struct parsed_param *pp, int np, struct corpus_tool *t)
{
    memset(t, 0, sizeof *t);
    t->tmpl = ti;
    char verb[48], obj[64];
    int nv = corpus_alt_count(tm->verbs);
    corpus_alt(tm->verbs, combo % nv, verb, sizeof verb);
    corpus_alt(tm->objs, combo / nv, obj, sizeof obj);
    corpus_fmt(t->name, sizeof t->name, "%s_%s", verb, obj);
    corpus_pick(r, tm->descs, t->desc, sizeof t->desc);
    for (int i = 0; i < np && t->n_params < CORPUS_MAX_PARAMS; i++) {
        if (!pp[i].required && v > 0 && !(pp[i].kind->flags & KF_LINKED) && corpus_chance(r, 30)) continue;
        struct corpus_param *p = &t->p[t->n_params];
        p->kind = pp[i].kind;
        p->required = pp[i].required;
        int nn = corpus_alt_count(p->kind->names), start = v == 0 ? 0 : (int)corpus_below(r, (uint32_t)nn);
        bool ok = false;
        for (int k = 0; k < nn && !ok; k++) { /* a name not taken by an earlier parameter */
            corpus_alt(p->kind->names, (start + k) % nn, p->name, sizeof p->name);
            ok = true;
            for (int j = 0; j < t->n_params; j++) ok &= strcmp(t->p[j].name, p->name) != 0;
        }
        if (!ok) {
            if (p->required) return false;
            continue;
        }
        corpus_pick(r, p->kind->descs, p->desc, sizeof p->desc);
        t->n_params++;
    }
    t->sig = signature(t);
    t->json = tool_json(t);
    if (!t->json) return false;
    struct corpus_buf b = {0};
    corpus_json_py(t->json, &b);
    t->json_py_len = b.n;
    bool oom = b.oom;
    corpus_buf_free(&b);
    return !oom;
}

void corpus_pool_free(struct corpus_pool *pool)
{
    for (int i = 0; i < pool->n; i++) cJSON_Delete(pool->tools[i].json);
    free(pool->tools);
    free(pool->tmpl_first);
    free(pool->tmpl_count);
    free(pool->tmpl_test);
    memset(pool, 0, sizeof *pool);
}

tern_status corpus_pool_build(uint64_t seed, struct corpus_pool *pool)
{
    memset(pool, 0, sizeof *pool);
    int nt = corpus_n_tmpls();
    size_t cap = (size_t)nt * MAX_VARIANTS;
    struct name_set names = {calloc(4096, sizeof(uint64_t)), 4096};
    pool->tools = calloc(cap, sizeof *pool->tools);
    pool->tmpl_first = calloc((size_t)nt, sizeof(int));
    pool->tmpl_count = calloc((size_t)nt, sizeof(int));
    pool->tmpl_test = calloc((size_t)nt, sizeof(bool));
    if (!names.h || !pool->tools || !pool->tmpl_first || !pool->tmpl_count || !pool->tmpl_test) {
        free(names.h);
        corpus_pool_free(pool);
        return tern_fail(TERN_ERR_NOMEM, "corpus: tool pool of %zu tools", cap);
    }
    TERN_ASSERT(cap <= names.cap / 2);

    /* which templates are test-only: per domain, the lowest seeded hashes */
    const char *doms[64];
    int nd = corpus_domains(doms, 64);
    for (int d = 0; d < nd; d++) {
        int idx[64], m = 0;
        uint64_t key[64];
        for (int i = 0; i < nt && m < 64; i++) {
            if (strcmp(corpus_tmpl_at(i)->domain, doms[d])) continue;
            uint64_t h = corpus_hash(seed * 0x9E3779B97F4A7C15ull + 7, &i, sizeof i);
            int j = m++;
            while (j > 0 && key[j - 1] > h) {
                key[j] = key[j - 1];
                idx[j] = idx[j - 1];
                j--;
            }
            key[j] = h;
            idx[j] = i;
        }
        int n_test = (m * TEST_PERCENT + 99) / 100;
        for (int j = 0; j < n_test && j < m; j++) pool->tmpl_test[idx[j]] = true;
    }

    for (int ti = 0; ti < nt; ti++) {
        const struct corpus_tmpl *tm = corpus_tmpl_at(ti);
        struct parsed_param pp[CORPUS_MAX_PARAMS];
        int np = parse_params(tm->params, pp, CORPUS_MAX_PARAMS);
        int combos = corpus_alt_count(tm->verbs) * corpus_alt_count(tm->objs);
        struct corpus_rng r = corpus_rng_for(seed, 1000 + (uint64_t)ti, 0);
        /* the variants walk the verb x object combinations from a seeded start */
        int start = (int)corpus_below(&r, (uint32_t)combos);
        pool->tmpl_first[ti] = pool->n;
        for (int v = 0; v < MAX_VARIANTS && v < combos; v++) {
            struct corpus_tool *t = &pool->tools[pool->n];
            if (!make_variant(&r, ti, tm, v, (start + v) % combos, pp, np, t)) {
                cJSON_Delete(t->json);
                memset(t, 0, sizeof *t);
                continue;
            }
            if (!name_set_add(&names, t->name)) { /* a name another template already uses */
                cJSON_Delete(t->json);
                memset(t, 0, sizeof *t);
                continue;
            }
            t->test = pool->tmpl_test[ti];
            pool->n++;
        }
        pool->tmpl_count[ti] = pool->n - pool->tmpl_first[ti];
    }
    free(names.h);

    /* test tools whose signature a train tool has are dropped (then each template's run is
     * compacted; no tool is moved before every clash is known) */
    bool *drop = calloc((size_t)pool->n + 1, sizeof *drop);
    if (!drop) {
        corpus_pool_free(pool);
        return tern_fail(TERN_ERR_NOMEM, "corpus: tool pool");
    }
    for (int k = 0; k < pool->n; k++)
        for (int j = 0; pool->tools[k].test && j < pool->n && !drop[k]; j++)
            drop[k] = !pool->tools[j].test && pool->tools[j].sig == pool->tools[k].sig;
    int w = 0;
    for (int ti = 0; ti < nt; ti++) {
        int first = pool->tmpl_first[ti], count = pool->tmpl_count[ti];
        pool->tmpl_first[ti] = w;
        for (int k = first; k < first + count; k++) {
            if (drop[k]) {
                cJSON_Delete(pool->tools[k].json);
                continue;
            }
            if (w != k) pool->tools[w] = pool->tools[k];
            w++;
        }
        pool->tmpl_count[ti] = w - pool->tmpl_first[ti];
    }
    free(drop);
    pool->n = w;
    for (int i = 0; i < pool->n; i++) pool->n_test += pool->tools[i].test;
    return TERN_OK;
}
