/* gram_tools.c — the grammar of tool calls for an OpenAI `tools` array, in the call format of
 * the model's chat template (tern_toolcall_format):
 *   hermes   <tool_call>\n{"name": "<tool>", "arguments": <that tool's parameters>}\n</tool_call>,
 *            parallel calls separated by "\n" (what Qwen2.5's template renders);
 *   mistral  [TOOL_CALLS][{"name": ..., "arguments": ...}, ...] (the list holds parallel calls);
 *   llama3   {"name": ..., "parameters": ...} as the whole reply (tool_choice required / NAME);
 *            with auto only where <|python_tag|> is a control token (below): the call after it
 *            (a reply that opens with a bare '{' is not constrained: no trigger can wait for it);
 *   granite  <|tool_call|>[{"name": ..., "arguments": ...}, ...] (Mistral's list, Granite's tag);
 *   qwen-xml <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>
 *            \n</tool_call> (Qwen3.5): parameters in the schema's order, the required ones
 *            always, the others optionally; string values are any text up to "\n</parameter>"
 *            (or one of their enum), the others JSON for their schema;
 *   gemma4   <|tool_call>call:NAME{key:value,...}<tool_call|> (Gemma 4): the arguments follow
 *            the tool's schema in Gemma's own value syntax (gram_schema.c: <|"|>raw strings<|"|>,
 *            bare keys in dictsort order, no whitespace), parallel calls back to back.
 * The arguments follow the chosen whitespace policy (the envelope is compact unless minified). tool_choice:
 *   auto      a lazy grammar: free text until the model writes the opener (<tool_call>,
 *             [TOOL_CALLS]), then the rest of the call is constrained, then free text again
 *             (re-armed for the next call);
 *   none      free text in which the opener can never be completed;
 *   required  constrained from the first token: one call, or several when parallel;
 *   NAME      like required, with that tool only.
 * A tool without `parameters` (or with null or {}) takes none: its arguments must be {}.
 *
 * Markup that is a control token of the vocabulary (Mistral's [TOOL_CALLS] in tekken
 * vocabularies, Granite's <|tool_call|>, Llama 3.1's <|python_tag|>, a Hermes model's
 * <tool_call> / </tool_call>) is that token in the grammar (gir_token), not its text: required /
 * named calls produce the token the model was trained on (forced, as the first token), a lazy
 * grammar arms on that token, none forbids it, and no text spelling of it is accepted. The
 * grammar lists those tokens (tern_grammar_info.control_tokens) so the generator shows them. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/gram_internal.h"
#include "util/error.h"
#include "util/clock.h"


struct tern_tool_grammar_params tern_tool_grammar_default_params(void)
{
    struct tern_tool_grammar_params p;
    memset(&p, 0, sizeof p);
    p.format = TERN_TOOLCALL_HERMES;
    p.choice = TERN_TOOL_CHOICE_AUTO;
    p.parallel = true;
    p.schema = tern_grammar_default_params();
    /* a call's arguments hold the declared parameters only, as in OpenAI's strict function
     * calling and llama.cpp's tool grammars: JSON Schema's default (absent additionalProperties
     * admits any key) let a model add parameters no tool has ("travelers" in book_service) */
    p.schema.strict_properties = true;
    /* the model's own spacing: templates print arguments as tojson's ", " / ": " (Qwen2.5) or as
     * the minified string they were given (tern-tool), and forcing the other form pushes a model
     * off what it learned (tern-tool wrote the city "arguments," under compact); any whitespace
     * (flexible) lets a weak model wander into blanks */
    p.schema.ws = TERN_GRAMMAR_WS_ONE_LINE;
    return p;
}

tern_status tern_tool_choice_parse(const char *s, struct tern_tool_grammar_params *p)
{
    if (!s || !*s || !p) return tern_fail(TERN_ERR_ARG, "tool choice: empty");
    p->name = NULL;
    if (!strcmp(s, "auto")) p->choice = TERN_TOOL_CHOICE_AUTO;
    else if (!strcmp(s, "none")) p->choice = TERN_TOOL_CHOICE_NONE;
    else if (!strcmp(s, "required")) p->choice = TERN_TOOL_CHOICE_REQUIRED;
    else { p->choice = TERN_TOOL_CHOICE_NAMED; p->name = s; }
    return TERN_OK;
}

/* separators of the envelope ({"name": ..., "arguments": ...}): minified when the arguments
 * are, else the ", " / ": " every template prints; flexible whitespace applies to the arguments
 * only, so the envelope stays forced text (a weak model cannot wander off into blanks there) */
static uint32_t sep(struct gram_ir *ir, int ws, char ch)
{
    if (ws == TERN_GRAMMAR_WS_MINIFIED) return gir_byte(ir, (uint8_t)ch);
    char t[3] = {ch, ' ', 0};
    return gir_str(ir, t);
}

/* The format's markup `text`: the control token of v whose text it is (recorded in ctl[], at
 * most 4), or the text itself. */
struct ctl_set {
    int32_t id[4];
    uint32_t n;
};
static int32_t markup_token(const struct tern_grammar_vocab *v, const char *text, struct ctl_set *cs)
{
    int32_t id = gram_vocab_control(v, text, strlen(text));
    if (id >= 0 && cs->n < 4) {
        bool seen = false;
        for (uint32_t i = 0; i < cs->n; i++) seen = seen || cs->id[i] == id;
        if (!seen) cs->id[cs->n++] = id;
    }
    return id;
}
static uint32_t markup(struct gram_ir *ir, const struct tern_grammar_vocab *v, const char *text, struct ctl_set *cs)
{
    int32_t id = markup_token(v, text, cs);
    return id >= 0 ? gir_token(ir, id) : gir_str(ir, text);
}

/* Any bytes up to and including the first occurrence of `end` (a KMP automaton: state k = the
 * longest prefix of `end` the text read so far ends with; the last state, the whole of it, is
 * final and has no way out), or with incl false any bytes without `end` (the states short of it
 * are all final, the last one is never reached). NUL never occurs in model text and is left
 * out, and so is 0xFF (never UTF-8; the lead of a control token's literal, which text must not
 * contain). */
uint32_t gram_until(struct gram_ir *ir, const char *end, bool incl)
{
    size_t len = strlen(end);
    struct gram_dfa d;
    gdfa_init(&d);
    uint32_t st[64];
    if (len == 0 || len >= 64) return GRAM_NONE;
    for (size_t k = 0; k <= len; k++) st[k] = gdfa_state(&d, incl ? k == len : k < len);
    d.start = st[0];
    bool ok = true;
    for (size_t k = 0; k < len && ok; k++) {
        /* next state for byte b: the longest prefix of end that end[0..k) + b ends with */
        uint32_t prev = GRAM_NONE;
        unsigned lo = 1;
        for (unsigned b = 1; b <= 256; b++) {
            uint32_t to = GRAM_NONE;
            if (b < 256 && b != GRAM_CTL_LEAD) {
                size_t m = k + 1;
                for (; m > 0; m--) {
                    /* does end[0..m) equal the last m bytes of end[0..k) + b? */
                    if ((unsigned char)end[m - 1] != b) continue;
                    if (m - 1 <= k && !memcmp(end, end + k - (m - 1), m - 1)) break;
                }
                to = !incl && m == len ? GRAM_NONE : st[m];
            }
            if (b > 1 && to != prev) {
                if (prev != GRAM_NONE) ok = ok && gdfa_edge(&d, st[k], (uint8_t)lo, (uint8_t)(b - 1), prev);
                lo = b;
            }
            prev = to;
        }
    }
    if (!ok) {
        gdfa_free(&d);
        ir->oom = true;
        return GRAM_NONE;
    }
    return gir_dfa(ir, &d);
}

static uint32_t until_incl(struct gram_ir *ir, const char *end) { return gram_until(ir, end, true); }

/* A parameter's schema asks for a string written as raw text (Qwen XML): type "string", or no
 * type and a string enum / const. */
static bool text_param(const cJSON *ps)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(ps, "type");
    if (cJSON_IsString(ty)) return !strcmp(ty->valuestring, "string");
    if (ty) return false;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(ps, "enum");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(ps, "const");
    return (e && cJSON_IsString(e->child)) || cJSON_IsString(c);
}

/* <function=NAME>\n (<parameter=KEY>\nVALUE\n</parameter>\n)* </function> for one tool */
static tern_status xml_call(struct gram_ir *ir, const cJSON *params, const char *name, const char *where,
                            const struct gram_schema_opts *o, char **warn, uint32_t *out)
{
    char head[320];
    snprintf(head, sizeof head, "<function=%s>\n", name);
    uint32_t seq = gir_str(ir, head);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    const cJSON *ps;
    cJSON_ArrayForEach(ps, props) {
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, ps->string)) required = true;
        char ph[320];
        snprintf(ph, sizeof ph, "<parameter=%s>\n", ps->string);
        uint32_t value;
        if (text_param(ps)) {
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(ps, "enum"), *c = cJSON_GetObjectItemCaseSensitive(ps, "const");
            if (cJSON_IsString(c) || (e && cJSON_IsArray(e) && e->child)) {
                uint32_t alts[256];
                uint32_t na = 0;
                if (cJSON_IsString(c)) alts[na++] = gir_str(ir, c->valuestring);
                else {
                    const cJSON *x;
                    cJSON_ArrayForEach(x, e) if (cJSON_IsString(x) && na < 256) alts[na++] = gir_str(ir, x->valuestring);
                }
                value = gir_seq2(ir, gir_alt(ir, alts, na), gir_str(ir, "\n</parameter>"));
            } else {
                value = until_incl(ir, "\n</parameter>");
            }
        } else {
            char path[400];
            snprintf(path, sizeof path, "%s.parameters.properties.%.100s", where, ps->string);
            uint32_t rr;
            tern_status st = gram_schema_json_to_ir(ps, path, o, ir, &rr, warn);
            if (st) return st;
            value = gir_seq2(ir, gir_ref(ir, rr), gir_str(ir, "\n</parameter>"));
        }
        uint32_t one = gir_seq3(ir, gir_str(ir, ph), value, gir_byte(ir, '\n'));
        seq = gir_seq2(ir, seq, required ? one : gir_opt(ir, one));
    }
    *out = gir_seq2(ir, seq, gir_str(ir, "</function>"));
    return TERN_OK;
}

/* The arguments of one tool: its "parameters" schema in the format's dialect, or "{}" without. */
static tern_status args_rule(struct gram_ir *ir, const cJSON *params, const char *where,
                             const struct gram_schema_opts *o, char **warn, uint32_t *out)
{
    /* no parameters, null or {} (what clients send for a tool without any): no arguments; as a
     * schema {} would admit any JSON value, and a call's arguments are an object */
    if (!params || cJSON_IsNull(params) || (cJSON_IsObject(params) && !params->child)) {
        *out = gir_str(ir, "{}");
        return TERN_OK;
    }
    char path[96];
    snprintf(path, sizeof path, "%s.parameters", where);
    uint32_t r;
    tern_status st = gram_schema_json_to_ir(params, path, o, ir, &r, warn);
    if (!st) *out = gir_ref(ir, r);
    return st;
}

tern_status tern_grammar_from_tools(const struct tern_grammar_vocab *v, const char *tools, size_t len,
                                    const struct tern_tool_grammar_params *p, struct tern_grammar **out)
{
    if (!tools || !out) return tern_fail(TERN_ERR_ARG, "tools: text and out are required");
    double t0 = util_now_ms();
    struct tern_tool_grammar_params dp = tern_tool_grammar_default_params();
    if (!p) p = &dp;
    const int fmt = p->format;
    const bool lazy = p->choice == TERN_TOOL_CHOICE_AUTO || p->choice == TERN_TOOL_CHOICE_NONE;
    if (fmt != TERN_TOOLCALL_HERMES && fmt != TERN_TOOLCALL_LLAMA3 && fmt != TERN_TOOLCALL_MISTRAL &&
        fmt != TERN_TOOLCALL_GRANITE && fmt != TERN_TOOLCALL_QWEN_XML && fmt != TERN_TOOLCALL_GEMMA4)
        return tern_fail(TERN_ERR_UNSUPPORTED, "tools: no tool-call grammar for format %s (hermes, qwen-xml, llama3, "
                         "mistral, granite and gemma4 have one)",
                         tern_toolcall_format_name((enum tern_toolcall_format)fmt));
    /* A Llama 3 call opens with a leading '{' (no trigger can wait for that) or <|python_tag|>:
     * auto / none have a grammar only where the tag is a control token, armed by it. */
    if (fmt == TERN_TOOLCALL_LLAMA3 && lazy && gram_vocab_control(v, "<|python_tag|>", 14) < 0)
        return tern_fail(TERN_ERR_UNSUPPORTED, "tools: the llama3 tool-call format has a grammar for tool_choice "
                         "required or a tool name only, unless <|python_tag|> is a control token of the "
                         "vocabulary (its calls open with a leading '{' or that tag; a lazy grammar can wait "
                         "for the token only); auto/none stay unconstrained");
    if (p->choice == TERN_TOOL_CHOICE_NAMED && (!p->name || !*p->name))
        return tern_fail(TERN_ERR_ARG, "tools: tool_choice names no tool");
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(tools, len, &end, false);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= tools && at <= tools + len ? (size_t)(at - tools) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (tools[i] == '\n') { line++; col = 1; }
            else if (((unsigned char)tools[i] & 0xC0) != 0x80) col++;
        }
        return tern_fail(TERN_ERR_FORMAT, "tools: line %d:%d: malformed JSON", line, col);
    }
    tern_status st = TERN_OK;
    struct gram_ir ir;
    gir_init(&ir);
    char *warn = NULL;
    uint32_t *calls = NULL;
    if (!cJSON_IsArray(j) || !j->child) {
        st = tern_fail(TERN_ERR_FORMAT, "tools: $ must be a non-empty array of tools");
        goto done;
    }
    int n_tools = cJSON_GetArraySize(j);
    calls = malloc((size_t)n_tools * sizeof *calls);
    if (!calls) { st = tern_fail(TERN_ERR_NOMEM, "tools: out of memory"); goto done; }
    /* Gemma 4 writes its own value syntax with no whitespace, whatever the policy asks */
    const bool gemma = fmt == TERN_TOOLCALL_GEMMA4;
    struct gram_schema_opts o = {p->schema.lenient, gemma ? TERN_GRAMMAR_WS_MINIFIED : (int)p->schema.ws,
                                 p->schema.strict_properties, gemma};
    int n_calls = 0, i = 0;
    bool found = false;
    for (const cJSON *t = j->child; t; t = t->next, i++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        char where[64];
        snprintf(where, sizeof where, "$[%d]%s", i, fn ? ".function" : "");
        if (!fn) fn = t;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !name->valuestring[0]) {
            st = tern_fail(TERN_ERR_FORMAT, "tools: %s: a tool needs a non-empty string \"name\"", where);
            goto done;
        }
        for (const cJSON *u = j->child; u != t; u = u->next) {
            const cJSON *fu = cJSON_GetObjectItemCaseSensitive(u, "function");
            const cJSON *nu = cJSON_GetObjectItemCaseSensitive(fu ? fu : u, "name");
            if (cJSON_IsString(nu) && !strcmp(nu->valuestring, name->valuestring)) {
                st = tern_fail(TERN_ERR_FORMAT, "tools: %s: tool name \"%s\" appears twice", where, name->valuestring);
                goto done;
            }
        }
        if (p->choice == TERN_TOOL_CHOICE_NAMED && strcmp(name->valuestring, p->name)) continue;
        found = true;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (gemma) {
            /* call:NAME{...}: the parser reads the name up to '{' or a space */
            for (const unsigned char *q = (const unsigned char *)name->valuestring; *q; q++)
                if (*q <= 0x20 || *q == 0x7F || *q == '{') {
                    st = tern_fail(TERN_ERR_FORMAT, "tools: %s: tool name \"%.60s\" has a space, '{' or control "
                                   "byte, which Gemma 4's call:NAME{...} cannot write", where, name->valuestring);
                    goto done;
                }
            uint32_t args;
            if ((st = args_rule(&ir, params, where, &o, &warn, &args))) goto done;
            char head[320];
            snprintf(head, sizeof head, "call:%s", name->valuestring);
            uint32_t r = gir_rule_new(&ir, "call:%.60s", name->valuestring);
            gir_rule_set(&ir, r, gir_seq2(&ir, gir_str(&ir, head), args));
            if (r != GRAM_NONE) ir.rules[r].shared = true;
            calls[n_calls++] = gir_ref(&ir, r);
            continue;
        }
        if (fmt == TERN_TOOLCALL_QWEN_XML) {
            uint32_t body;
            if ((st = xml_call(&ir, params, name->valuestring, where, &o, &warn, &body))) goto done;
            uint32_t r = gir_rule_new(&ir, "call:%.60s", name->valuestring);
            gir_rule_set(&ir, r, body);
            if (r != GRAM_NONE) ir.rules[r].shared = true;
            calls[n_calls++] = gir_ref(&ir, r);
            continue;
        }
        uint32_t args;
        if ((st = args_rule(&ir, params, where, &o, &warn, &args))) goto done;
        /* {"name": "<name>", "arguments": <args>} */
        cJSON *nm = cJSON_CreateString(name->valuestring);
        char *enc = nm ? cJSON_PrintUnformatted(nm) : NULL;
        cJSON_Delete(nm);
        if (!enc) { st = tern_fail(TERN_ERR_NOMEM, "tools: out of memory"); goto done; }
        /* Llama 3.1's template teaches "parameters"; Hermes and Mistral say "arguments" */
        uint32_t xs[] = {gir_byte(&ir, '{'), gir_str(&ir, "\"name\""), sep(&ir, (int)p->schema.ws, ':'), gir_str(&ir, enc),
                         sep(&ir, (int)p->schema.ws, ','),
                         gir_str(&ir, fmt == TERN_TOOLCALL_LLAMA3 ? "\"parameters\"" : "\"arguments\""),
                         sep(&ir, (int)p->schema.ws, ':'), args, gir_byte(&ir, '}')};
        free(enc);
        /* one rule per tool, kept as a rule: the calls appear twice below (first call, further
         * calls), and each tool's automaton is determinized on its own */
        uint32_t r = gir_rule_new(&ir, "call:%.60s", name->valuestring);
        gir_rule_set(&ir, r, gir_seq(&ir, xs, 9));
        if (r != GRAM_NONE) ir.rules[r].shared = true;
        calls[n_calls++] = gir_ref(&ir, r);
    }
    if (!found) {
        st = tern_fail(TERN_ERR_ARG, "tools: tool_choice names \"%s\", which is not among the tools", p->name);
        goto done;
    }
    uint32_t call = gir_alt(&ir, calls, (uint32_t)n_calls);
    uint32_t root = gir_rule_new(&ir, "tool_call");
    const char *trigger = NULL;
    struct ctl_set cs = {{0}, 0};
    int32_t opener = -1; /* the opener's control token, or -1 (text) */
    if (fmt == TERN_TOOLCALL_HERMES || fmt == TERN_TOOLCALL_QWEN_XML) {
        trigger = "<tool_call>";
        opener = markup_token(v, trigger, &cs);
        uint32_t close = gir_seq2(&ir, gir_byte(&ir, '\n'), markup(&ir, v, "</tool_call>", &cs));
        if (lazy) {
            /* after the trigger "<tool_call>" */
            gir_rule_set(&ir, root, gir_seq3(&ir, gir_byte(&ir, '\n'), call, close));
        } else {
            uint32_t one = gir_seq3(&ir, gir_seq2(&ir, markup(&ir, v, trigger, &cs), gir_byte(&ir, '\n')), call, close);
            if (p->parallel) {
                uint32_t call2 = gir_alt(&ir, calls, (uint32_t)n_calls);
                uint32_t open2 = gir_seq3(&ir, gir_byte(&ir, '\n'), markup(&ir, v, trigger, &cs), gir_byte(&ir, '\n'));
                uint32_t close2 = gir_seq2(&ir, gir_byte(&ir, '\n'), markup(&ir, v, "</tool_call>", &cs));
                uint32_t more = gir_seq3(&ir, open2, call2, close2);
                one = gir_seq2(&ir, one, gir_rep(&ir, more, 0, GRAM_INF));
            }
            gir_rule_set(&ir, root, one);
        }
    } else if (gemma) {
        /* <|tool_call>call:NAME{...}<tool_call|>, parallel calls back to back (the template
         * writes no separator) */
        trigger = "<|tool_call>";
        opener = markup_token(v, trigger, &cs);
        uint32_t close = markup(&ir, v, "<tool_call|>", &cs);
        if (lazy) {
            gir_rule_set(&ir, root, gir_seq2(&ir, call, close));
        } else {
            uint32_t one = gir_seq3(&ir, markup(&ir, v, trigger, &cs), call, close);
            if (p->parallel) {
                uint32_t call2 = gir_alt(&ir, calls, (uint32_t)n_calls);
                uint32_t more = gir_seq3(&ir, markup(&ir, v, trigger, &cs), call2, markup(&ir, v, "<tool_call|>", &cs));
                one = gir_seq2(&ir, one, gir_rep(&ir, more, 0, GRAM_INF));
            }
            gir_rule_set(&ir, root, one);
        }
    } else if (fmt == TERN_TOOLCALL_MISTRAL || fmt == TERN_TOOLCALL_GRANITE) {
        /* [TOOL_CALLS][{call}, {call}] — the list is the format's way to call in parallel */
        trigger = fmt == TERN_TOOLCALL_GRANITE ? "<|tool_call|>" : "[TOOL_CALLS]";
        opener = markup_token(v, trigger, &cs);
        uint32_t list = call;
        if (p->parallel) {
            uint32_t call2 = gir_alt(&ir, calls, (uint32_t)n_calls);
            list = gir_seq2(&ir, call, gir_rep(&ir, gir_seq2(&ir, sep(&ir, (int)p->schema.ws, ','), call2), 0, GRAM_INF));
        }
        uint32_t body = gir_seq3(&ir, gir_byte(&ir, '['), list, gir_byte(&ir, ']'));
        gir_rule_set(&ir, root, lazy ? body : gir_seq2(&ir, markup(&ir, v, trigger, &cs), body));
    } else {
        /* Llama 3: one JSON call is the whole reply (the template allows no parallel calls);
         * lazy: the call after the control token <|python_tag|> (checked above) */
        if (lazy) {
            trigger = "<|python_tag|>";
            opener = markup_token(v, trigger, &cs);
        }
        gir_rule_set(&ir, root, call);
    }
    /* a lazy grammar whose opener is a control token arms on that token (its literal) */
    char lit[GRAM_CTL_LEN + 1];
    if (lazy && opener >= 0) {
        gram_ctl_encode(opener, (uint8_t *)lit);
        lit[GRAM_CTL_LEN] = 0;
        trigger = lit;
    }
    if ((st = gir_status(&ir, "tools"))) goto done;
    st = gram_finish(v, &ir, root, lazy ? trigger : NULL, p->choice == TERN_TOOL_CHOICE_NONE, cs.id, cs.n, warn, t0, out);
    warn = NULL;
done:
    free(warn);
    free(calls);
    gir_free(&ir);
    cJSON_Delete(j);
    return st;
}
