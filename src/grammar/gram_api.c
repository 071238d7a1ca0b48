/* gram_api.c — the public grammar entry points: parameters, compiling from each source,
 * freeing, info and eager classification. The work is in the files gram_internal.h lists. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"
#include "util/clock.h"

struct tern_grammar_params tern_grammar_default_params(void)
{
    struct tern_grammar_params p;
    memset(&p, 0, sizeof p);
    p.ws = TERN_GRAMMAR_WS_COMPACT;
    return p;
}

size_t tern_grammar_mask_words(const struct tern_grammar_vocab *v)
{
    return v ? v->n_words : 0;
}

void tern_grammar_free(struct tern_grammar *g)
{
    if (!g) return;
    gram_cache_free(g);
    gram_free_tables(g);
    if (g->trig_tokens)
        for (uint32_t k = 0; k < g->trigger_len; k++) free(g->trig_tokens[k]);
    free(g->trig_tokens);
    free(g->n_trig_tokens);
    free(g->kmp);
    free(g->trigger);
    free(g->ctl);
    free(g->warnings);
    free(g);
}

/* IR -> grammar, with the trigger set up when p asks for one. Takes ownership of warn. */
tern_status gram_finish(const struct tern_grammar_vocab *v, struct gram_ir *ir, uint32_t root,
                        const char *trigger, bool forbid, const int32_t *ctl, uint32_t n_ctl,
                        char *warn, double t0, struct tern_grammar **out)
{
    /* a serial, unlike the address, is never reused: a holder of a matcher can tell whether a
     * grammar it is handed is the one the matcher follows (gen_grammar.c keeps matchers) */
    static atomic_uint_fast64_t serials;
    struct tern_grammar *g = calloc(1, sizeof *g);
    if (!g) { free(warn); return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory"); }
    g->serial = atomic_fetch_add(&serials, 1) + 1;
    g->vocab = v;
    g->warnings = warn;
    g->trigger_token = -1;
    if (trigger) g->lazy = true; /* the compiler's classification needs to know */
    tern_status st = TERN_OK;
    if (n_ctl) {
        /* sorted and unique, each a control token of v (gir_token was given only those) */
        if (!(g->ctl = malloc(n_ctl * sizeof *g->ctl))) st = tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
        for (uint32_t i = 0; i < n_ctl && !st; i++) {
            int32_t id = ctl[i];
            TERN_ASSERT(v && id >= 0 && id < v->n_vocab && v->kind[id] == GRAM_TOK_CONTROL);
            uint32_t k = g->n_ctl;
            while (k > 0 && g->ctl[k - 1] > id) k--;
            if (k > 0 && g->ctl[k - 1] == id) continue;
            memmove(g->ctl + k + 1, g->ctl + k, (g->n_ctl - k) * sizeof *g->ctl);
            g->ctl[k] = id;
            g->n_ctl++;
        }
    }
    if (trigger && strlen(trigger) == GRAM_CTL_LEN) { /* a control token's literal (gram_tools) */
        int32_t id = gram_ctl_decode((const uint8_t *)trigger, GRAM_CTL_LEN);
        for (uint32_t i = 0; i < g->n_ctl; i++)
            if (g->ctl[i] == id) g->trigger_token = id;
    }
    if (!st) st = gram_compile(ir, root, v, g);
    if (!st) st = gram_cache_create(g);
    if (!st && trigger) st = gram_setup_trigger(g, trigger, forbid, true);
    if (st) {
        tern_grammar_free(g);
        return st;
    }
    g->table_bytes = sizeof *g + (size_t)g->n_nodes * (sizeof *g->nodes + sizeof *g->cache->slot) +
                     (size_t)g->n_ranges * sizeof *g->ranges + (size_t)g->n_calls * sizeof *g->calls +
                     (size_t)g->n_rules * sizeof *g->rules + (size_t)g->n_follow * 4;
    g->compile_ms = util_now_ms() - t0;
    /* the matcher's classification cache and lazy tables exist for every finished grammar */
    TERN_ASSERT(g->cache && g->n_nodes > 0 && g->root < g->n_rules && (!g->lazy || g->kmp), "a finished grammar is complete");
    *out = g;
    return TERN_OK;
}

tern_status tern_grammar_from_gbnf(const struct tern_grammar_vocab *v, const char *gbnf, size_t len,
                                   const struct tern_grammar_params *p, struct tern_grammar **out)
{
    if (!gbnf || !out) return tern_fail(TERN_ERR_ARG, "gbnf: text and out are required");
    double t0 = util_now_ms();
    struct tern_grammar_params dp = tern_grammar_default_params();
    if (!p) p = &dp;
    struct gram_ir ir;
    gir_init(&ir);
    uint32_t root;
    tern_status st = gram_gbnf_to_ir(gbnf, len, p->root, &ir, &root);
    if (!st) st = gram_finish(v, &ir, root, p->trigger, false, NULL, 0, NULL, t0, out);
    gir_free(&ir);
    return st;
}

tern_status tern_grammar_from_json_schema(const struct tern_grammar_vocab *v, const char *schema,
                                          size_t len, const struct tern_grammar_params *p,
                                          struct tern_grammar **out)
{
    if (!schema || !out) return tern_fail(TERN_ERR_ARG, "json schema: text and out are required");
    double t0 = util_now_ms();
    struct tern_grammar_params dp = tern_grammar_default_params();
    if (!p) p = &dp;
    if ((unsigned)p->ws > TERN_GRAMMAR_WS_ONE_LINE) return tern_fail(TERN_ERR_ARG, "json schema: unknown whitespace policy %d", (int)p->ws);
    struct gram_schema_opts o = {p->lenient, (int)p->ws, p->strict_properties, false};
    struct gram_ir ir;
    gir_init(&ir);
    uint32_t root;
    char *warn = NULL;
    tern_status st = gram_schema_to_ir(schema, len, &o, &ir, &root, &warn);
    if (!st) {
        st = gram_finish(v, &ir, root, p->trigger, false, NULL, 0, warn, t0, out);
        warn = NULL;
    }
    free(warn);
    gir_free(&ir);
    return st;
}

const char *tern_grammar_warnings(const struct tern_grammar *g)
{
    return g && g->warnings && g->warnings[0] ? g->warnings : NULL;
}

void tern_grammar_get_info(const struct tern_grammar *g, struct tern_grammar_info *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!g) return;
    out->compile_ms = g->compile_ms;
    out->serial = g->serial;
    out->table_bytes = g->table_bytes;
    out->cls_bytes = atomic_load(&g->cache->bytes);
    out->n_classified = atomic_load(&g->cache->count);
    out->n_derived = atomic_load(&g->cache->n_derived);
    out->n_shared = atomic_load(&g->cache->n_shared);
    out->n_rules = g->n_rules;
    out->n_nodes = g->n_nodes;
    out->lazy = g->lazy;
    out->trigger_token = g->trigger_token;
    out->trigger = g->trigger_token >= 0 ? gram_vocab_control_text(g->vocab, g->trigger_token) : g->trigger;
    out->control_tokens = g->ctl;
    out->n_control_tokens = (int)g->n_ctl;
    out->n_vocab = g->vocab ? g->vocab->n_vocab : 0;
}

tern_status tern_grammar_precompute(const struct tern_grammar *g)
{
    if (!g) return tern_fail(TERN_ERR_ARG, "grammar: NULL");
    if (!g->vocab) return tern_fail(TERN_ERR_ARG, "grammar: compiled without a vocabulary");
    struct gram_cls_scratch s;
    tern_status st = gram_cls_scratch_init(&s, g);
    if (st) return st;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        if (!g->nodes[i].r_n) continue; /* never the top of a stack */
        bool fresh;
        if (!gram_node_cls(g, i, &s, &fresh)) {
            gram_cls_scratch_free(&s);
            return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
        }
    }
    gram_cls_scratch_free(&s);
    return TERN_OK;
}
