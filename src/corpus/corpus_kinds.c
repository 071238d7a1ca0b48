/* corpus_kinds.c — the value kinds: every parameter and result field a template may use, with its
 * JSON type, generator (corpus_values.c), parameter names, descriptions, how it is mentioned, and
 * its JSON Schema. Read corpus.h first. The kinds themselves are records of data/corpus/kinds.txt
 * (its opening comment explains the fields), compiled in through corpus_tables.h; here they are
 * looked up, drawn and turned into JSON Schema. */
#include <stdio.h>
#include <string.h>

#include "corpus/corpus.h"
#include "corpus/corpus_gen.h"
#include "corpus/corpus_tables.h"
#include "util/check.h"

int corpus_n_kinds(void) { return corpus_n_kind_table; }
const struct corpus_kind *corpus_kind_at(int i) { return &corpus_kind_table[i]; }

const struct corpus_kind *corpus_kind_find(const char *key)
{
    for (int i = 0; i < corpus_n_kind_table; i++)
        if (!strcmp(corpus_kind_table[i].key, key)) return &corpus_kind_table[i];
    return NULL;
}

/* ------------------------------------------------------------------ drawing */

static const struct corpus_gen_entry *gen_of(const struct corpus_kind *k)
{
    /* a small table: a linear scan is cheaper than the JSON work around every draw */
    for (const struct corpus_gen_entry *g = corpus_gens; g->name; g++)
        if (!strcmp(g->name, k->gen)) return g;
    return NULL;
}

/* Replace each "%s" of frame with value (frames are ours, values may hold '%'). */
static void frame_subst(char *out, size_t cap, const char *frame, const char *value)
{
    struct corpus_buf b = {0};
    for (const char *p = frame; *p;) {
        const char *s = strstr(p, "%s");
        if (!s) {
            corpus_buf_puts(&b, p);
            break;
        }
        corpus_buf_add(&b, p, (size_t)(s - p));
        corpus_buf_puts(&b, value);
        p = s + 2;
    }
    corpus_fmt(out, cap, "%s", b.p ? b.p : "");
    corpus_buf_free(&b);
}

void corpus_gen(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    memset(v, 0, sizeof *v);
    const struct corpus_gen_entry *g = gen_of(k);
    TERN_ASSERT(g != NULL);
    if (!g) {
        c->oom = true; /* a table bug; never a crash */
        return;
    }
    g->fn(c, k, v);
    if (!v->json) {
        c->oom = true;
        return;
    }
    if (k->frames) {
        char frame[128];
        corpus_pick(&c->rng, k->frames, frame, sizeof frame);
        frame_subst(v->say, CORPUS_SAY, frame, v->bare);
    } else if (!v->say[0]) {
        corpus_put(v->say, v->bare);
    }
    if (!v->show[0]) corpus_put(v->show, v->bare);
}

void corpus_ctx_new_call(struct corpus_ctx *c)
{
    c->currency[0] = '\0';
    c->temp_unit[0] = '\0';
    c->last_person[0] = '\0';
    c->last_day = 0;
    c->last_minute = 0;
    c->last_num = 0;
    c->src_lang = -1;
    c->unit_dim = 0;
    c->unit_from = -1;
    c->call_vals = NULL;
    c->call_kinds = NULL;
    c->call_n = 0;
}

/* ------------------------------------------------------------------ JSON Schema */

static void add_enum_from_arg(cJSON *s, const char *arg)
{
    cJSON *e = cJSON_AddArrayToObject(s, "enum");
    for (const char *p = arg; p && *p;) {
        const char *eq = strchr(p, '='), *semi = strchr(p, ';');
        if (!eq) break;
        char v[64];
        corpus_fmt(v, sizeof v, "%.*s", (int)(eq - p), p);
        cJSON_AddItemToArray(e, cJSON_CreateString(v));
        p = semi ? semi + 1 : NULL;
    }
}

static cJSON *prop(const char *type, const char *desc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    if (desc) cJSON_AddStringToObject(o, "description", desc);
    return o;
}

/* Object kinds: their properties, all required. */
static void object_props(const struct corpus_kind *k, cJSON *s)
{
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    struct {
        const char *name, *type, *desc, *format;
    } f[4] = {{0}};
    int n = 0;
    if (!strcmp(k->gen, "address")) {
        f[0].name = "street", f[0].type = "string";
        f[1].name = "city", f[1].type = "string";
        f[2].name = "postal_code", f[2].type = "string";
        f[3].name = "country", f[3].type = "string", f[3].desc = "ISO 3166-1 alpha-2 code";
        n = 4;
    } else if (!strcmp(k->gen, "coords")) {
        f[0].name = "lat", f[0].type = "number";
        f[1].name = "lon", f[1].type = "number";
        n = 2;
    } else if (!strcmp(k->gen, "time_window")) {
        f[0].name = "start", f[0].type = "string", f[0].format = "date-time";
        f[1].name = "end", f[1].type = "string", f[1].format = "date-time";
        n = 2;
    } else if (!strcmp(k->gen, "dimensions")) {
        f[0].name = "length_cm", f[0].type = "integer";
        f[1].name = "width_cm", f[1].type = "integer";
        f[2].name = "height_cm", f[2].type = "integer";
        n = 3;
    }
    for (int i = 0; i < n; i++) {
        cJSON *p = prop(f[i].type, f[i].desc);
        if (f[i].format) cJSON_AddStringToObject(p, "format", f[i].format);
        cJSON_AddItemToObject(props, f[i].name, p);
        cJSON_AddItemToArray(req, cJSON_CreateString(f[i].name));
    }
}

static cJSON *item_schema(const struct corpus_kind *k)
{
    if (!strcmp(k->gen, "numlist")) return prop("integer", NULL);
    if (!strcmp(k->gen, "order_items")) {
        cJSON *o = prop("object", NULL);
        cJSON *props = cJSON_AddObjectToObject(o, "properties");
        cJSON_AddItemToObject(props, "product", prop("string", "Product name"));
        cJSON *q = prop("integer", "How many");
        cJSON_AddNumberToObject(q, "minimum", 1);
        cJSON_AddItemToObject(props, "quantity", q);
        cJSON *req = cJSON_AddArrayToObject(o, "required");
        cJSON_AddItemToArray(req, cJSON_CreateString("product"));
        cJSON_AddItemToArray(req, cJSON_CreateString("quantity"));
        return o;
    }
    char item[48];
    corpus_arg_field(k->arg, 0, item, sizeof item);
    const struct corpus_kind *ik = corpus_kind_find(item);
    cJSON *s = prop(ik && ik->type == CT_INTEGER ? "integer" : "string", NULL);
    if (ik && ik->format) cJSON_AddStringToObject(s, "format", ik->format);
    return s;
}

cJSON *corpus_kind_schema(const struct corpus_kind *k, const char *desc)
{
    static const char *const type_names[] = {"string", "integer", "number", "boolean", "array", "object"};
    cJSON *s = prop(type_names[k->type], desc);
    if (!strcmp(k->gen, "enum")) add_enum_from_arg(s, k->arg);
    if (!strcmp(k->gen, "lang") || !strcmp(k->gen, "lang_src")) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        bool six = !strcmp(k->gen, "lang_src") || (k->arg && k->arg[0] == '6');
        for (int i = 0; corpus_lang_code(six, i); i++)
            cJSON_AddItemToArray(e, cJSON_CreateString(corpus_lang_code(six, i)));
    }
    if (!strcmp(k->gen, "unit")) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        for (int i = 0; corpus_unit_code(i); i++) cJSON_AddItemToArray(e, cJSON_CreateString(corpus_unit_code(i)));
    }
    if (!strcmp(k->gen, "temp_unit_linked")) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        cJSON_AddItemToArray(e, cJSON_CreateString("celsius"));
        cJSON_AddItemToArray(e, cJSON_CreateString("fahrenheit"));
    }
    if (k->format) cJSON_AddStringToObject(s, "format", k->format);
    if (k->flags & KF_BOUNDS) {
        cJSON_AddNumberToObject(s, "minimum", corpus_arg_int(k->arg, 0, 0));
        cJSON_AddNumberToObject(s, "maximum", corpus_arg_int(k->arg, 1, 100));
    }
    if (k->type == CT_ARRAY) cJSON_AddItemToObject(s, "items", item_schema(k));
    if (k->type == CT_OBJECT) object_props(k, s);
    return s;
}
