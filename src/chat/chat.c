/* chat.c — the public chat-template API (include/tern.h, section "chat templates"): compile a
 * template, read and check the caller's messages/tools JSON text, render to a malloc'ed string.
 *
 * Read tmpl.h for the interpreter and chat_json.c for how JSON text becomes template values.
 * This file only adapts: every entry point (tern_chat_validate, tern_chat_render) goes
 * through read_input(), so a malformed conversation gets the same message naming its JSON path
 * whoever asks, instead of surfacing as an obscure template error. It then passes the
 * variables Hugging Face passes: messages, tools (only when given), add_generation_prompt,
 * bos_token, eos_token, plus any extra variables. Two adaptations a string-only template needs:
 * OpenAI content parts are flattened to one string (unless a probe shows the template reads
 * parts itself), and tools given to a template that never reads `tools` are refused rather
 * than dropped. The GGUF entry point and the fallback template live in chat_gguf.c. */
#include "chat/chat.h"
#include "util/check.h"
#include "tokenizer/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define CHAT_ARENA_LIMIT ((size_t)256 << 20) /* the conversation's values and the output */

struct tern_chat_params tern_chat_default_params(void)
{
    struct tern_chat_params p;
    memset(&p, 0, sizeof p);
    p.add_generation_prompt = true;
    p.now_unix = TERN_CHAT_NOW_CLOCK;
    return p;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

tern_status chat_template_new(const char *source, size_t len, const char *bos, const char *eos,
                              const char *warning, struct tern_chat_template **out)
{
    struct tern_chat_template *t = calloc(1, sizeof *t);
    if (!t) return tern_fail(TERN_ERR_NOMEM, "out of memory creating a chat template");
    t->source = dup_n(source, len);
    t->bos = bos ? dup_n(bos, strlen(bos)) : NULL;
    t->eos = eos ? dup_n(eos, strlen(eos)) : NULL;
    t->warning = warning ? dup_n(warning, strlen(warning)) : NULL;
    if (!t->source || (bos && !t->bos) || (eos && !t->eos) || (warning && !t->warning)) {
        tern_chat_template_free(t);
        return tern_fail(TERN_ERR_NOMEM, "out of memory creating a chat template");
    }
    tern_status st = tmpl_compile(source, len, &t->prog);
    if (st != TERN_OK) {
        tern_chat_template_free(t);
        return tern_fail_prefix(st, "chat template: ");
    }
    t->uses_tools = tmpl_program_uses_name(t->prog, "tools");
    atomic_init(&t->typed_content, CHAT_TYPED_UNKNOWN);
    *out = t;
    return TERN_OK;
}

tern_status tern_chat_template_create(const char *source, size_t len,
                                      struct tern_chat_template **out)
{
    if (!source || !out) return tern_fail(TERN_ERR_ARG, "tern_chat_template_create: NULL argument");
    return chat_template_new(source, len, NULL, NULL, NULL, out);
}

void tern_chat_template_free(struct tern_chat_template *t)
{
    if (!t) return;
    tmpl_program_free(t->prog);
    free(t->source);
    free(t->bos);
    free(t->eos);
    free(t->warning);
    free(t);
}

const char *tern_chat_template_source(const struct tern_chat_template *t) { return t->source; }
const char *tern_chat_template_warning(const struct tern_chat_template *t) { return t->warning; }

/* ------------------------------------------------------------------ checking the input */

static const char *json_kind(struct tval v)
{
    switch (v.kind) {
    case TV_UNDEF: return "nothing";
    case TV_STR: return "a string";
    case TV_INT:
    case TV_FLOAT: return "a number";
    case TV_BOOL: return "a boolean";
    case TV_NONE: return "null";
    case TV_LIST: return "an array";
    case TV_DICT: return "an object";
    default: return "an invalid value";
    }
}

static struct tval get(struct tval obj, const char *key)
{
    struct tval *v = obj.kind == TV_DICT ? tmpl_dict_get(obj.u.d, tv_str(key, strlen(key))) : NULL;
    return v ? *v : tv_undef();
}

static bool is_absent(struct tval v) { return v.kind == TV_UNDEF; }

/* "messages[1].content[0].type: expected a string, got a number" */
#define EXPECT(cond, v, what, ...)                                                                  \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            char path_[200];                                                                        \
            snprintf(path_, sizeof path_, __VA_ARGS__);                                             \
            return tern_fail(TERN_ERR_FORMAT, "%s: expected %s, got %s", path_, what, json_kind(v)); \
        }                                                                                           \
    } while (0)

/* The text of a "type" value for a message, quoted and cut short. */
static void quote(char *out, size_t cap, struct tval s)
{
    snprintf(out, cap, "\"%.*s%s\"", (int)(s.u.s.n > 40 ? 40 : s.u.s.n), s.u.s.p, s.u.s.n > 40 ? "..." : "");
}

static tern_status check_content(struct tval content, size_t i)
{
    if (is_absent(content) || content.kind == TV_STR || content.kind == TV_NONE) return TERN_OK;
    EXPECT(content.kind == TV_LIST, content, "a string, null or an array of content parts",
           "messages[%zu].content", i);
    for (size_t k = 0; k < content.u.l->n; k++) {
        struct tval part = content.u.l->v[k], type = get(part, "type");
        EXPECT(part.kind == TV_DICT, part, "an object", "messages[%zu].content[%zu]", i, k);
        EXPECT(type.kind == TV_STR, type, "a string", "messages[%zu].content[%zu].type", i, k);
        if (!tmpl_is_str(type, "text")) {
            char q[64];
            quote(q, sizeof q, type);
            return tern_fail(TERN_ERR_FORMAT, "messages[%zu].content[%zu].type: %s parts are not supported "
                             "(tern's models read text only; send {\"type\": \"text\", \"text\": ...} parts)", i, k, q);
        }
        struct tval text = get(part, "text");
        EXPECT(text.kind == TV_STR, text, "a string", "messages[%zu].content[%zu].text", i, k);
    }
    return TERN_OK;
}

static tern_status check_tool_calls(struct tval tcs, size_t i)
{
    if (is_absent(tcs) || tcs.kind == TV_NONE) return TERN_OK;
    EXPECT(tcs.kind == TV_LIST, tcs, "an array", "messages[%zu].tool_calls", i);
    for (size_t k = 0; k < tcs.u.l->n; k++) {
        struct tval tc = tcs.u.l->v[k];
        EXPECT(tc.kind == TV_DICT, tc, "an object", "messages[%zu].tool_calls[%zu]", i, k);
        struct tval type = get(tc, "type"), id = get(tc, "id"), fn = get(tc, "function");
        EXPECT(is_absent(type) || tmpl_is_str(type, "function"), type, "\"function\"",
               "messages[%zu].tool_calls[%zu].type", i, k);
        EXPECT(is_absent(id) || id.kind == TV_STR, id, "a string", "messages[%zu].tool_calls[%zu].id", i, k);
        EXPECT(fn.kind == TV_DICT, fn, "an object", "messages[%zu].tool_calls[%zu].function", i, k);
        struct tval name = get(fn, "name"), args = get(fn, "arguments");
        EXPECT(name.kind == TV_STR, name, "a string", "messages[%zu].tool_calls[%zu].function.name", i, k);
        EXPECT(is_absent(args) || args.kind == TV_DICT || args.kind == TV_STR, args, "an object or a string",
               "messages[%zu].tool_calls[%zu].function.arguments", i, k);
    }
    return TERN_OK;
}

/* What templates index into without guarding. Roles are not restricted: templates use their
 * own ("ipython", "developer"). */
static tern_status check_messages(struct tval m)
{
    if (m.kind != TV_LIST)
        return tern_fail(TERN_ERR_FORMAT, "messages: expected an array, got %s", json_kind(m));
    for (size_t i = 0; i < m.u.l->n; i++) {
        struct tval msg = m.u.l->v[i];
        EXPECT(msg.kind == TV_DICT, msg, "an object", "messages[%zu]", i);
        struct tval role = get(msg, "role");
        EXPECT(role.kind == TV_STR, role, "a string", "messages[%zu].role", i);
        tern_status st = check_content(get(msg, "content"), i);
        if (st == TERN_OK) st = check_tool_calls(get(msg, "tool_calls"), i);
        if (st != TERN_OK) return st;
        static const char *const strings[] = {"tool_call_id", "name", "reasoning_content"};
        for (size_t s = 0; s < sizeof strings / sizeof strings[0]; s++) {
            struct tval v = get(msg, strings[s]);
            EXPECT(is_absent(v) || v.kind == TV_STR || (s == 2 && v.kind == TV_NONE), v, "a string",
                   "messages[%zu].%s", i, strings[s]);
        }
    }
    return TERN_OK;
}

static tern_status check_tools(struct tval t)
{
    if (t.kind != TV_LIST) return tern_fail(TERN_ERR_FORMAT, "tools: expected an array, got %s", json_kind(t));
    for (size_t i = 0; i < t.u.l->n; i++) {
        struct tval tool = t.u.l->v[i];
        EXPECT(tool.kind == TV_DICT, tool, "an object {\"type\": \"function\", \"function\": {...}}", "tools[%zu]", i);
        struct tval type = get(tool, "type"), fn = get(tool, "function");
        EXPECT(tmpl_is_str(type, "function"), type, "\"function\"", "tools[%zu].type", i);
        EXPECT(fn.kind == TV_DICT, fn, "an object", "tools[%zu].function", i);
        struct tval name = get(fn, "name"), desc = get(fn, "description"), params = get(fn, "parameters");
        EXPECT(name.kind == TV_STR, name, "a string", "tools[%zu].function.name", i);
        EXPECT(is_absent(desc) || desc.kind == TV_STR, desc, "a string", "tools[%zu].function.description", i);
        EXPECT(is_absent(params) || params.kind == TV_DICT, params, "an object (a JSON Schema)",
               "tools[%zu].function.parameters", i);
    }
    return TERN_OK;
}

#undef EXPECT

struct chat_input {
    struct tval messages;
    struct tval tools; /* TV_UNDEF when none were given */
    struct tval extra; /* TV_UNDEF or a dict */
};

static tern_status parse_text(struct tmpl_arena *a, const char *what, const char *text, size_t len,
                              struct tval *out)
{
    if (!len) len = strlen(text);
    return chat_json_parse(a, what, text, len, out);
}

/* The one place the caller's JSON is read and checked (tern_chat_validate and
 * tern_chat_render both come here). */
static tern_status read_input(const struct tern_chat_params *p, struct tmpl_arena *a, struct chat_input *in)
{
    in->tools = in->extra = tv_undef();
    if (!p->messages_json)
        return tern_fail(TERN_ERR_ARG, "messages_json is NULL (give the JSON text of an array of messages)");
    struct tval doc;
    tern_status st = parse_text(a, "messages", p->messages_json, p->messages_len, &doc);
    if (st != TERN_OK) return st;
    in->messages = doc;
    if (doc.kind == TV_DICT) { /* an OpenAI request body */
        in->messages = get(doc, "messages");
        if (is_absent(in->messages))
            return tern_fail(TERN_ERR_FORMAT, "messages: the JSON object has no \"messages\" array");
        struct tval t = get(doc, "tools");
        if (!is_absent(t) && t.kind != TV_NONE) in->tools = t;
    }
    if (p->tools_json) {
        if (!is_absent(in->tools))
            return tern_fail(TERN_ERR_ARG, "tools: given twice (tools_json, and \"tools\" in messages_json)");
        if ((st = parse_text(a, "tools", p->tools_json, p->tools_len, &in->tools)) != TERN_OK) return st;
    }
    if (p->extra_vars_json) {
        if ((st = parse_text(a, "extra_vars", p->extra_vars_json, p->extra_vars_len, &in->extra)) != TERN_OK)
            return st;
        if (in->extra.kind != TV_DICT)
            return tern_fail(TERN_ERR_FORMAT, "extra_vars: expected an object, got %s", json_kind(in->extra));
        /* the variables this API sets from the checked arguments: an extra one must not replace
         * them (a server's chat_template_kwargs would otherwise carry tools past its checks) */
        static const char *const reserved[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};
        for (size_t i = 0; i < in->extra.u.d->n; i++)
            for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++)
                if (tmpl_is_str(in->extra.u.d->k[i], reserved[r]))
                    return tern_fail(TERN_ERR_FORMAT, "extra_vars: '%s' is set by the chat API (from the "
                                     "messages, tools and options given); an extra variable cannot replace it",
                                     reserved[r]);
    }
    if ((st = check_messages(in->messages)) != TERN_OK) return st;
    if (!is_absent(in->tools) && (st = check_tools(in->tools)) != TERN_OK) return st;
    return TERN_OK;
}

tern_status tern_chat_validate(const struct tern_chat_params *p)
{
    if (!p) return tern_fail(TERN_ERR_ARG, "tern_chat_validate: NULL argument");
    struct tmpl_arena arena;
    tmpl_arena_init(&arena, CHAT_ARENA_LIMIT);
    struct chat_input in;
    tern_status st = read_input(p, &arena, &in);
    tmpl_arena_free(&arena);
    return st;
}

/* ------------------------------------------------------------------ content parts */

/* A content value that is an array of parts (checked: all text) -> their texts concatenated,
 * which is what Hugging Face templates that read parts produce for text-only messages. */
static bool flatten_parts(struct tmpl_arena *a, struct tval content, struct tval *out)
{
    size_t n = 0;
    /* check_content accepted only parts whose "text" is a string */
    TERN_ASSERT(content.kind == TV_LIST, "a parts array");
    for (size_t k = 0; k < content.u.l->n; k++) n += get(content.u.l->v[k], "text").u.s.n;
    char *s = tmpl_arena_alloc(a, n + 1);
    if (!s) return false;
    size_t w = 0;
    for (size_t k = 0; k < content.u.l->n; k++) {
        struct tval t = get(content.u.l->v[k], "text");
        TERN_ASSERT(t.kind == TV_STR && w + t.u.s.n <= n, "the parts' texts were summed above");
        memcpy(s + w, t.u.s.p, t.u.s.n);
        w += t.u.s.n;
    }
    *out = tv_str(s, n);
    return true;
}

/* The messages with every parts array replaced by its text, copying only what changes. */
static bool flatten_messages(struct tmpl_arena *a, struct tval msgs, struct tval *out)
{
    *out = msgs;
    bool copied = false;
    for (size_t i = 0; i < msgs.u.l->n; i++) {
        struct tval m = msgs.u.l->v[i];
        TERN_ASSERT(m.kind == TV_DICT, "check_messages let only objects through");
        struct tval *c = tmpl_dict_get(m.u.d, tv_str("content", 7));
        if (!c || c->kind != TV_LIST) continue;
        if (!copied) {
            struct tlist *l = tmpl_arena_alloc(a, sizeof *l);
            struct tval *v = tmpl_arena_alloc(a, msgs.u.l->n * sizeof *v);
            if (!l || !v) return false;
            memcpy(v, msgs.u.l->v, msgs.u.l->n * sizeof *v);
            l->n = l->cap = msgs.u.l->n;
            l->v = v;
            out->u.l = l;
            copied = true;
        }
        struct tdict *d = tmpl_arena_alloc(a, sizeof *d);
        struct tval *vals = tmpl_arena_alloc(a, m.u.d->n * sizeof *vals);
        if (!d || !vals) return false;
        memcpy(vals, m.u.d->v, m.u.d->n * sizeof *vals);
        *d = *m.u.d;
        d->v = vals;
        TERN_ASSERT(c >= m.u.d->v && c < m.u.d->v + m.u.d->n, "the content slot is one of the message's values");
        if (!flatten_parts(a, *c, &vals[c - m.u.d->v])) return false;
        out->u.l->v[i].u.d = d;
    }
    return true;
}

static bool has_parts(struct tval msgs)
{
    for (size_t i = 0; i < msgs.u.l->n; i++)
        if (get(msgs.u.l->v[i], "content").kind == TV_LIST) return true;
    return false;
}

/* Does t render content parts itself (Gemma 3, Llama 4 style: `for part in message.content`)?
 * A probe conversation with one text part answers it: such a template prints the part's
 * text; one that expects a string prints nothing, or the Python repr of the list (with its
 * 'type' key), or fails. Bounded by a small work budget so a hostile template costs little. */
static bool reads_parts(const struct tern_chat_template *t)
{
    static const char probe[] = "tern-probe-8d1f2c";
    int state = atomic_load(&((struct tern_chat_template *)t)->typed_content);
    if (state != CHAT_TYPED_UNKNOWN) return state == CHAT_TYPED_YES;
    struct tmpl_arena a;
    tmpl_arena_init(&a, (size_t)16 << 20);
    struct tval v;
    static const char msgs[] = "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"tern-probe-8d1f2c\"}]}]";
    bool yes = false;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", tern_last_error()); /* the probe must not clobber it */
    if (chat_json_parse(&a, "probe", msgs, sizeof msgs - 1, &v) == TERN_OK) {
        struct tmpl_var vars[4] = {{"messages", v}, {"add_generation_prompt", tv_bool(true)},
                                   {"bos_token", tv_str("", 0)}, {"eos_token", tv_str("", 0)}};
        struct tmpl_render_opts o = {.now_unix = 1, .max_work = 1u << 20};
        const char *out;
        size_t n;
        if (tmpl_render(t->prog, &a, vars, 4, &o, &out, &n) == TERN_OK)
            yes = memmem(out, n, probe, sizeof probe - 1) && !memmem(out, n, "'type'", 6) &&
                  !memmem(out, n, "\"type\"", 6);
    }
    tern_fail(TERN_OK, "%s", saved);
    tmpl_arena_free(&a);
    atomic_store(&((struct tern_chat_template *)t)->typed_content, yes ? CHAT_TYPED_YES : CHAT_TYPED_NO);
    return yes;
}

/* ------------------------------------------------------------------ render */

static tern_status render(const struct tern_chat_template *t, const struct tern_chat_params *p,
                          char **out, size_t *out_len, struct tern_text_span **spans, size_t *n_spans);

tern_status tern_chat_render(const struct tern_chat_template *t, const struct tern_chat_params *p,
                             char **out, size_t *out_len)
{
    return render(t, p, out, out_len, NULL, NULL);
}

tern_status tern_chat_render_spans(const struct tern_chat_template *t, const struct tern_chat_params *p,
                                   char **out, size_t *out_len, struct tern_text_span **spans,
                                   size_t *n_spans)
{
    if (!spans || !n_spans) return tern_fail(TERN_ERR_ARG, "tern_chat_render_spans: NULL argument");
    *spans = NULL;
    *n_spans = 0;
    return render(t, p, out, out_len, spans, n_spans);
}

/* A string the API hands the template as markup (bos_token, eos_token: the model's own). */
static struct tval markup(const char *s)
{
    struct tval v = tv_str(s, strlen(s));
    if (v.u.s.n) v.flags = TVF_MARKUP;
    return v;
}

static tern_status render(const struct tern_chat_template *t, const struct tern_chat_params *p,
                          char **out, size_t *out_len, struct tern_text_span **spans, size_t *n_spans)
{
    if (!t || !p || !out) return tern_fail(TERN_ERR_ARG, "tern_chat_render: NULL argument");
    struct tmpl_arena arena;
    tmpl_arena_init(&arena, CHAT_ARENA_LIMIT);
    struct chat_input in;
    struct tmpl_var *vars = NULL;
    tern_status st = read_input(p, &arena, &in);
    if (st != TERN_OK) goto done;
    if (!is_absent(in.tools) && in.tools.u.l->n > 0 && !t->uses_tools) {
        st = tern_fail(TERN_ERR_UNSUPPORTED, "tools: this chat template never reads `tools`, so the %zu tool%s "
                       "given would be left out of the prompt; use a template with tool support (a GGUF "
                       "without a template gets Qwen2.5's, which has it)", in.tools.u.l->n,
                       in.tools.u.l->n == 1 ? "" : "s");
        goto done;
    }
    struct tval messages = in.messages;
    if (has_parts(messages) && !reads_parts(t) && !flatten_messages(&arena, in.messages, &messages)) {
        st = tern_fail(TERN_ERR_NOMEM, "out of memory converting the messages");
        goto done;
    }
    size_t n_extra = in.extra.kind == TV_DICT ? in.extra.u.d->n : 0;
    vars = calloc(n_extra + 5, sizeof *vars);
    if (!vars) {
        st = tern_fail(TERN_ERR_NOMEM, "out of memory rendering a chat template");
        goto done;
    }
    int nv = 0;
    /* extra variables first (none names a standard one: read_input refused those); names must
     * be C strings */
    for (size_t i = 0; i < n_extra; i++) {
        struct tval k = in.extra.u.d->k[i];
        if (memchr(k.u.s.p, '\0', k.u.s.n)) continue; /* no template can name it */
        vars[nv].name = k.u.s.p;
        vars[nv++].value = in.extra.u.d->v[i];
    }
    vars[nv].name = "messages";
    vars[nv++].value = messages;
    if (!is_absent(in.tools)) {
        vars[nv].name = "tools";
        vars[nv++].value = in.tools;
    }
    vars[nv].name = "add_generation_prompt";
    vars[nv++].value = tv_bool(p->add_generation_prompt);
    const char *bos = p->bos_token ? p->bos_token : t->bos ? t->bos : "";
    const char *eos = p->eos_token ? p->eos_token : t->eos ? t->eos : "";
    vars[nv].name = "bos_token";
    vars[nv++].value = markup(bos);
    vars[nv].name = "eos_token";
    vars[nv++].value = markup(eos);
    struct tmpl_marks marks = {0};
    struct tmpl_render_opts opts = {.now_unix = p->now_unix, .marks = spans ? &marks : NULL};
    const char *text;
    size_t len;
    st = tmpl_render(t->prog, &arena, vars, nv, &opts, &text, &len);
    if (st == TERN_OK) {
        char *r = dup_n(text, len);
        struct tern_text_span *sp = spans && marks.n ? malloc(marks.n * sizeof *sp) : NULL;
        if (!r || (spans && marks.n && !sp)) {
            free(r);
            free(sp);
            st = tern_fail(TERN_ERR_NOMEM, "out of memory copying the rendered prompt");
        } else {
            *out = r;
            if (out_len) *out_len = len;
            if (spans) {
                for (size_t i = 0; i < marks.n; i++) sp[i] = (struct tern_text_span){marks.m[i].off, marks.m[i].len};
                *spans = sp;
                *n_spans = marks.n;
            }
        }
    } else tern_fail_prefix(st, "chat template: ");
done:
    free(vars);
    tmpl_arena_free(&arena);
    return st;
}

unsigned tern_chat_prompt_flags(const struct tern_tokenizer *tok, const char *prompt, size_t len)
{
    unsigned flags = TERN_TOK_PARSE_SPECIAL;
    const int32_t bos = tok ? tern_token_bos(tok) : -1;
    size_t bos_len = 0;
    const char *bos_text = bos >= 0 ? tern_token_text(tok, bos, &bos_len) : NULL;
    if (!bos_text || bos_len == 0 || len < bos_len || memcmp(prompt, bos_text, bos_len) != 0)
        flags |= TERN_TOK_ADD_SPECIAL;
    return flags;
}

tern_status tern_chat_tokenize(struct tern_tokenizer *tok, const char *prompt, size_t len,
                               const struct tern_text_span *spans, size_t n_spans, int32_t **ids,
                               size_t *cap, size_t *n_out)
{
    if (!tok || !ids || !cap || !n_out) return tern_fail(TERN_ERR_ARG, "tern_chat_tokenize: NULL argument");
    unsigned flags = tern_chat_prompt_flags(tok, prompt, len);
    if (!(flags & TERN_TOK_ADD_SPECIAL)) {
        /* the prompt starts with the BOS text: the template's, or content's (then no BOS) */
        size_t bos_len = 0;
        tern_token_text(tok, tern_token_bos(tok), &bos_len);
        if (!n_spans || spans[0].off != 0 || spans[0].len < bos_len) flags |= TERN_TOK_ADD_SPECIAL;
    }
    for (;;) {
        tern_status st = tok_tokenize_spans(tok, prompt, len, flags, spans, n_spans, *ids, *cap, n_out);
        if (st != TERN_ERR_RANGE || *n_out <= *cap) return st;
        int32_t *grown = realloc(*ids, *n_out * sizeof *grown);
        if (!grown) return tern_fail(TERN_ERR_NOMEM, "tokenize: out of memory for %zu ids", *n_out);
        *ids = grown;
        *cap = *n_out;
    }
}
