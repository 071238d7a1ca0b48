/* gram_matcher.c — one sequence's parse: accept tokens, fill masks, roll back, force bytes.
 *
 * A position is (mode, trigger progress, parse state). Modes: FREE (lazy grammars, outside a
 * call: any token, but a token that completes the trigger must continue validly into the
 * grammar), CALL (constrained), EOG (an end-of-generation token was accepted: nothing more).
 * Every accepted step appends the new position to a history, so rollback(n) is a truncation.
 *
 * Masks in CALL mode: for each distinct top node of the state, the node's accepted tokens
 * (gram_mask.c) are copied in; then the node's uncertain tokens are run against the real stack
 * (feed() below, which also handles leaving the call mid-token in lazy mode). The tokens that
 * pass are cached per state (a small direct-mapped cache keyed by the state's hash and checked
 * for equality), since generation revisits states constantly (inside a string, every token
 * that does not close it leads back to the same state).
 *
 * Control tokens the grammar names (g->ctl, gram_internal.h "control tokens as grammar
 * literals") are fed as their literal bytes like text, and checked against the state at every
 * mask with the uncertain tokens (they are in no trie); a lazy grammar whose trigger is one arms
 * when that token is accepted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"

enum { MODE_FREE = 0, MODE_CALL = 1, MODE_EOG = 2 };
#define MCACHE 64
#define STEPBUF (GRAM_MAX_STACKS + 8)

struct mstep {
    uint32_t off, n;     /* state in hs[off .. off+n) */
    uint32_t kmp;
    uint64_t bytes;      /* document bytes accepted up to here */
    uint8_t mode;
};

struct mcache_ent {
    uint64_t hash;
    bool valid;
    struct gram_stack *st;
    uint32_t n_st, cap_st;
    int32_t *ids;        /* uncertain tokens that passed */
    uint32_t n_ids, cap_ids;
};

struct tern_grammar_matcher {
    const struct tern_grammar *g;
    const struct tern_grammar_vocab *v;
    struct gram_engine eng;
    struct gram_cls_scratch cls;
    bool cls_ready;
    struct gram_stack *ta, *tb;      /* [STEPBUF] step buffers */
    struct gram_stack *init;         /* the grammar's start state */
    uint32_t n_init;
    struct mstep *steps;
    uint32_t n_steps, cap_steps;
    struct gram_stack *hs;
    uint32_t n_hs, cap_hs;
    uint32_t *mask;                  /* own mask (apply, forced_token) */
    const struct gram_cls **node_cls;/* scratch: classification per stack of the state */
    /* counters: each frame's canonical frame (counts saturated, gram_count_canon), for the mask
     * cache and classification; [n_canon) known (GRAM_NONE: not computed yet) */
    uint32_t *canon, n_canon, cap_canon;
    uint32_t *chain, cap_chain;      /* scratch of canon_frame */
    struct gram_stack *cst;          /* [STEPBUF] the canonical state of a mask */
    struct mcache_ent cache[MCACHE];
    struct tern_grammar_stats stats;
};

/* ---------------------------------------------------------------- trigger tables */

/* Is id a control token g names (fed as its literal)? */
static bool listed(const struct tern_grammar *g, int32_t id)
{
    for (uint32_t i = 0; i < g->n_ctl; i++)
        if (g->ctl[i] == id) return true;
    return false;
}

static uint32_t kmp_step(const struct tern_grammar *g, uint32_t k, uint8_t b)
{
    TERN_ASSERT(k < g->trigger_len, "trigger progress stops short of the whole trigger");
    while (k > 0 && (uint8_t)g->trigger[k] != b) k = g->kmp[k];
    if ((uint8_t)g->trigger[k] == b) k++;
    return k;
}

tern_status gram_setup_trigger(struct tern_grammar *g, const char *trigger, bool forbid, bool rearm)
{
    size_t len = strlen(trigger);
    if (len == 0 || len > 256) return tern_fail(TERN_ERR_ARG, "grammar: the trigger must be 1..256 bytes");
    g->trigger = strdup(trigger);
    g->trigger_len = (uint32_t)len;
    g->lazy = true;
    g->forbid_trigger = forbid;
    g->rearm = rearm;
    g->kmp = calloc(len + 1, sizeof *g->kmp);
    g->trig_tokens = calloc(len, sizeof *g->trig_tokens);
    g->n_trig_tokens = calloc(len, sizeof *g->n_trig_tokens);
    if (!g->trigger || !g->kmp || !g->trig_tokens || !g->n_trig_tokens)
        return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    /* kmp[k] = the longest proper border of trigger[0..k) (the state to fall back to) */
    g->kmp[0] = g->kmp[1] = 0;
    for (uint32_t k = 1; k < len; k++) {
        uint32_t j = g->kmp[k];
        while (j > 0 && trigger[j] != trigger[k]) j = g->kmp[j];
        if (trigger[j] == trigger[k] && j != k) j++;
        TERN_ASSERT(j <= k, "a border is shorter than the prefix it borders");
        g->kmp[k + 1] = j;
    }
    const struct tern_grammar_vocab *v = g->vocab;
    if (!v) return TERN_OK;
    uint8_t last = (uint8_t)trigger[len - 1];
    uint32_t *cap = calloc(len, sizeof *cap);
    if (!cap) return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    for (int32_t id = 0; id < v->n_vocab; id++) {
        if (v->kind[id] != GRAM_TOK_TEXT && !(v->kind[id] == GRAM_TOK_CONTROL && listed(g, id))) continue;
        const uint8_t *b = v->bytes + v->off[id];
        uint32_t n = v->off[id + 1] - v->off[id];
        if (!memchr(b, last, n)) continue; /* cannot complete the trigger */
        for (uint32_t k0 = 0; k0 < len; k0++) {
            uint32_t k = k0;
            bool hit = false;
            for (uint32_t i = 0; i < n && !hit; i++) {
                k = kmp_step(g, k, b[i]);
                if (k == len) hit = true;
            }
            if (!hit) continue;
            TERN_ASSERT(g->n_trig_tokens[k0] <= cap[k0]);
            if (g->n_trig_tokens[k0] == cap[k0]) {
                cap[k0] = cap[k0] ? cap[k0] * 2 : 16;
                int32_t *p = realloc(g->trig_tokens[k0], cap[k0] * sizeof *p);
                if (!p) { free(cap); return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory"); }
                g->trig_tokens[k0] = p;
            }
            g->trig_tokens[k0][g->n_trig_tokens[k0]++] = id;
        }
    }
    free(cap);
    return TERN_OK;
}

/* ---------------------------------------------------------------- positions */

static bool state_done(const struct gram_stack *s, uint32_t n)
{
    bool acc = false;
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].node == GRAM_ACCEPT) acc = true;
        else if (!gram_is_marker(s[i].node)) return false;
    }
    return acc;
}

/* Feed bytes b[0..len) from (mode, kmp, st[0..n)). On success returns len and the result in
 * *res / *n_res (one of the matcher's step buffers, or st itself when no constrained byte was
 * consumed). On refusal returns the index of the refused byte; *res / *n_res / *mode then
 * describe the position just before it (for the message). */
static size_t feed(struct tern_grammar_matcher *m, const uint8_t *b, size_t len, uint8_t *mode,
                   uint32_t *kmp, const struct gram_stack *st, uint32_t n,
                   const struct gram_stack **res, uint32_t *n_res)
{
    const struct tern_grammar *g = m->g;
    const struct gram_stack *cur = st;
    uint32_t ncur = n;
    struct gram_stack *bufs[2] = {m->ta, m->tb};
    int which = 0;
    size_t i = 0;
    TERN_ASSERT(*mode <= MODE_EOG && n <= STEPBUF && (n == 0 || st), "feed starts from a real position");
    TERN_ASSERT(*mode != MODE_FREE || (g->lazy && *kmp < g->trigger_len), "free text only in a lazy grammar");
    for (; i < len; i++) {
        if (*mode == MODE_FREE) {
            uint32_t k = kmp_step(g, *kmp, b[i]);
            if (k < g->trigger_len) { *kmp = k; continue; }
            if (g->forbid_trigger) break;
            *kmp = 0;
            *mode = MODE_CALL;
            cur = m->init;
            ncur = m->n_init;
            if (g->rearm && state_done(cur, ncur)) { *mode = MODE_FREE; ncur = 0; }
            continue;
        }
        if (*mode != MODE_CALL) break;
        struct gram_stack *out = bufs[which];
        uint32_t k = gram_engine_step(&m->eng, cur, ncur, b[i], out);
        if (k == 0) break;
        which ^= 1;
        cur = out;
        ncur = k;
        if (g->lazy && state_done(cur, ncur)) { /* the call is over: free text again */
            *mode = MODE_FREE;
            *kmp = 0;
            ncur = 0;
        }
    }
    TERN_ASSERT(*mode != MODE_CALL || ncur > 0 || i < len || n == 0, "a constrained position keeps stacks");
    *res = cur;
    *n_res = ncur;
    return i;
}

static struct mstep *top(struct tern_grammar_matcher *m)
{
    TERN_ASSERT(m->n_steps > 0 && m->steps[m->n_steps - 1].off + m->steps[m->n_steps - 1].n <= m->n_hs);
    return &m->steps[m->n_steps - 1];
}

static const struct gram_stack *cur_state(const struct tern_grammar_matcher *m, uint32_t *n)
{
    TERN_ASSERT(m->n_steps > 0, "the history always holds the start position");
    const struct mstep *s = &m->steps[m->n_steps - 1];
    TERN_ASSERT((uint64_t)s->off + s->n <= m->n_hs && s->mode <= MODE_EOG);
    *n = s->n;
    return s->n ? m->hs + s->off : m->hs; /* an empty state (free text) may have no history yet */
}

/* Append a position to the history. */
static tern_status push_step(struct tern_grammar_matcher *m, uint8_t mode, uint32_t kmp,
                             const struct gram_stack *st, uint32_t n, uint64_t bytes)
{
    if (m->n_steps == m->cap_steps) {
        uint32_t nc = m->cap_steps ? m->cap_steps * 2 : 64;
        struct mstep *p = realloc(m->steps, nc * sizeof *p);
        if (!p) return tern_fail(TERN_ERR_NOMEM, "grammar matcher: out of memory");
        m->steps = p;
        m->cap_steps = nc;
    }
    /* st may point into hs (a step that consumed no constrained byte): keep it as an offset */
    uintptr_t sp = (uintptr_t)st, h0 = (uintptr_t)m->hs;
    bool inside = m->hs && sp >= h0 && sp < h0 + (uintptr_t)m->cap_hs * sizeof *m->hs;
    size_t rel = inside ? (size_t)(st - m->hs) : 0;
    if (m->n_hs + n > m->cap_hs) {
        uint32_t nc = m->cap_hs ? m->cap_hs : 256;
        while (nc < m->n_hs + n) nc *= 2;
        struct gram_stack *p = realloc(m->hs, nc * sizeof *p);
        if (!p) return tern_fail(TERN_ERR_NOMEM, "grammar matcher: out of memory");
        m->hs = p;
        m->cap_hs = nc;
    }
    if (inside) st = m->hs + rel;
    TERN_ASSERT(m->n_steps < m->cap_steps && m->n_hs + n <= m->cap_hs);
    TERN_ASSERT(n <= STEPBUF && mode <= MODE_EOG && (mode != MODE_FREE || n == 0), "free text has no parse state");
    /* a step never un-accepts bytes: the document only grows along the history */
    TERN_ASSERT(m->n_steps == 0 || bytes >= m->steps[m->n_steps - 1].bytes);
    if (n) memmove(m->hs + m->n_hs, st, n * sizeof *st);
    m->steps[m->n_steps++] = (struct mstep){m->n_hs, n, kmp, bytes, mode};
    m->n_hs += n;
    return TERN_OK;
}

void tern_grammar_matcher_reset(struct tern_grammar_matcher *m)
{
    if (!m) return;
    m->n_steps = 0;
    m->n_hs = 0;
    gram_engine_reset(&m->eng);
    m->n_canon = 0;
    /* frames are gone: the start state must be rebuilt, and cached states mean nothing now */
    TERN_ASSERT(m->g->root < m->g->n_rules);
    m->n_init = gram_engine_start(&m->eng, m->g->rules[m->g->root].start, 0, m->init);
    TERN_ASSERT(m->n_init <= GRAM_MAX_STACKS && m->eng.fr.n >= m->eng.fr.n_fixed);
    for (int i = 0; i < MCACHE; i++) m->cache[i].valid = false;
    if (m->g->lazy) push_step(m, MODE_FREE, 0, NULL, 0, 0);
    else push_step(m, MODE_CALL, 0, m->init, m->n_init, 0);
}

void tern_grammar_matcher_free(struct tern_grammar_matcher *m)
{
    if (!m) return;
    gram_engine_free(&m->eng);
    if (m->cls_ready) gram_cls_scratch_free(&m->cls);
    free(m->ta);
    free(m->tb);
    free(m->init);
    free(m->steps);
    free(m->hs);
    free(m->mask);
    free(m->node_cls);
    free(m->canon);
    free(m->chain);
    free(m->cst);
    for (int i = 0; i < MCACHE; i++) {
        free(m->cache[i].st);
        free(m->cache[i].ids);
    }
    free(m);
}

tern_status tern_grammar_matcher_create(const struct tern_grammar *g, struct tern_grammar_matcher **out)
{
    if (!g || !out) return tern_fail(TERN_ERR_ARG, "grammar matcher: grammar and out are required");
    struct tern_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return tern_fail(TERN_ERR_NOMEM, "grammar matcher: out of memory");
    m->g = g;
    m->v = g->vocab;
    tern_status st = gram_engine_init(&m->eng, g, false);
    if (st) { free(m); return st; }
    m->ta = malloc(STEPBUF * sizeof *m->ta);
    m->tb = malloc(STEPBUF * sizeof *m->tb);
    m->init = malloc(STEPBUF * sizeof *m->init);
    m->node_cls = malloc(STEPBUF * sizeof *m->node_cls);
    if (g->n_counters) m->cst = malloc(STEPBUF * sizeof *m->cst);
    if (m->v) m->mask = malloc((size_t)m->v->n_words * sizeof *m->mask);
    if (!m->ta || !m->tb || !m->init || !m->node_cls || (m->v && !m->mask) || (g->n_counters && !m->cst)) {
        tern_grammar_matcher_free(m);
        return tern_fail(TERN_ERR_NOMEM, "grammar matcher: out of memory");
    }
    tern_grammar_matcher_reset(m);
    if (m->n_steps == 0) {
        tern_grammar_matcher_free(m);
        return tern_fail(TERN_ERR_NOMEM, "grammar matcher: out of memory");
    }
    *out = m;
    return TERN_OK;
}

/* ---------------------------------------------------------------- messages */

static void put_byte(char *buf, size_t cap, size_t *k, unsigned c)
{
    if (*k >= cap) return;
    int w;
    if (c == '\n') w = snprintf(buf + *k, cap - *k, "'\\n'");
    else if (c == '\t') w = snprintf(buf + *k, cap - *k, "'\\t'");
    else if (c == '\'') w = snprintf(buf + *k, cap - *k, "\"'\"");
    else if (c >= 0x20 && c < 0x7F) w = snprintf(buf + *k, cap - *k, "'%c'", c);
    else w = snprintf(buf + *k, cap - *k, "0x%02X", c);
    if (w > 0) *k += (size_t)w;
}

/* "'}', ' ', '0'..'9'" for the bytes the state could take. */
static void describe_expected(const struct tern_grammar *g, const struct gram_stack *s, uint32_t n,
                              uint8_t mode, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    if (mode == MODE_EOG) { snprintf(buf, cap, "nothing (end of generation was accepted)"); return; }
    struct gram_bset set;
    gram_engine_next_bytes(g, s, n, &set);
    int shown = 0;
    if (gram_bset_has(&set, GRAM_CTL_LEAD)) { /* a control token's literal: name the token(s) */
        set.w[GRAM_CTL_LEAD >> 6] &= ~(1ull << (GRAM_CTL_LEAD & 63));
        for (uint32_t i = 0; i < g->n_ctl && k < cap; i++, shown++) {
            const char *t = gram_vocab_control_text(g->vocab, g->ctl[i]);
            k += (size_t)snprintf(buf + k, cap - k, "%scontrol token %d %s", shown ? " or " : "", g->ctl[i], t ? t : "");
        }
    }
    for (unsigned b = 0; b < 256 && shown < 12;) {
        if (!gram_bset_has(&set, b)) { b++; continue; }
        unsigned e = b;
        while (e + 1 < 256 && gram_bset_has(&set, e + 1)) e++;
        if (shown) k += (size_t)snprintf(buf + k, k < cap ? cap - k : 0, ", ");
        put_byte(buf, cap, &k, b);
        if (e > b) {
            if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "..");
            put_byte(buf, cap, &k, e);
        }
        shown++;
        b = e + 1;
    }
    if (shown == 12 && k < cap) snprintf(buf + k, cap - k, ", ...");
    if (gram_state_accepting(s, n)) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s the end of the document", shown ? " or" : "");
    } else if (!shown) {
        snprintf(buf, cap, "nothing");
    }
}

/* ---------------------------------------------------------------- accepting */

tern_status tern_grammar_matcher_accept(struct tern_grammar_matcher *m, int32_t token, size_t *refused_at)
{
    if (refused_at) *refused_at = 0;
    if (!m) return tern_fail(TERN_ERR_ARG, "grammar matcher: NULL");
    const struct tern_grammar_vocab *v = m->v;
    if (!v) return tern_fail(TERN_ERR_ARG, "grammar matcher: the grammar was compiled without a vocabulary (use accept_bytes)");
    if (token < 0 || token >= v->n_vocab)
        return tern_fail(TERN_ERR_ARG, "grammar: token %d is out of range (vocabulary of %d)", token, v->n_vocab);
    struct mstep pos = *top(m);
    uint32_t n;
    const struct gram_stack *st = cur_state(m, &n);
    char exp[256];
    if (v->kind[token] == GRAM_TOK_EOG) {
        bool ok = pos.mode == MODE_FREE || (pos.mode == MODE_CALL && gram_state_accepting(st, n));
        if (!ok) {
            m->stats.refused_tokens++;
            describe_expected(m->g, st, n, pos.mode, exp, sizeof exp);
            return tern_fail(TERN_ERR_ARG, "grammar: end-of-generation token %d refused at offset %llu: the document is not complete (expected %s)",
                             token, (unsigned long long)pos.bytes, exp);
        }
        m->stats.accepted_tokens++;
        return push_step(m, MODE_EOG, 0, NULL, 0, pos.bytes);
    }
    if (v->kind[token] == GRAM_TOK_NEVER || (v->kind[token] == GRAM_TOK_CONTROL && !listed(m->g, token))) {
        if (pos.mode == MODE_FREE) {
            m->stats.accepted_tokens++;
            return push_step(m, pos.mode, pos.kmp, NULL, 0, pos.bytes);
        }
        m->stats.refused_tokens++;
        return tern_fail(TERN_ERR_ARG, "grammar: control token %d refused at offset %llu (a grammar admits only text and, when complete, end of generation)",
                         token, (unsigned long long)pos.bytes);
    }
    const uint8_t *b = v->bytes + v->off[token];
    size_t len = v->off[token + 1] - v->off[token];
    uint8_t mode = pos.mode;
    uint32_t kmp = pos.kmp;
    const struct gram_stack *res;
    uint32_t nres;
    size_t k = feed(m, b, len, &mode, &kmp, st, n, &res, &nres);
    if (k < len) {
        m->stats.refused_tokens++;
        if (refused_at) *refused_at = k;
        if (mode == MODE_FREE) snprintf(exp, sizeof exp, "anything but the rest of the trigger \"%s\"",
                                         m->g->trigger_token >= 0 ? gram_vocab_control_text(v, m->g->trigger_token) : m->g->trigger);
        else describe_expected(m->g, res, nres, mode, exp, sizeof exp);
        char shown[8];
        size_t sk = 0;
        put_byte(shown, sizeof shown, &sk, b[k]);
        return tern_fail(TERN_ERR_ARG, "grammar: token %d refused: its byte %zu (%s) is not allowed at offset %llu (expected %s)",
                         token, k, shown, (unsigned long long)(pos.bytes + k), exp);
    }
    m->stats.accepted_tokens++;
    return push_step(m, mode, kmp, res, nres, pos.bytes + len);
}

tern_status tern_grammar_matcher_accept_bytes(struct tern_grammar_matcher *m, const char *s, size_t n,
                                              size_t *n_ok)
{
    if (n_ok) *n_ok = 0;
    if (!m || (!s && n)) return tern_fail(TERN_ERR_ARG, "grammar matcher: NULL argument");
    struct mstep pos = *top(m);
    uint32_t ns;
    const struct gram_stack *st = cur_state(m, &ns);
    uint8_t mode = pos.mode;
    uint32_t kmp = pos.kmp;
    const struct gram_stack *res;
    uint32_t nres;
    size_t k = feed(m, (const uint8_t *)s, n, &mode, &kmp, st, ns, &res, &nres);
    if (n_ok) *n_ok = k;
    if (k < n) {
        char exp[256], shown[8];
        size_t sk = 0;
        if (mode == MODE_FREE) snprintf(exp, sizeof exp, "anything but the rest of the trigger");
        else describe_expected(m->g, res, nres, mode, exp, sizeof exp);
        put_byte(shown, sizeof shown, &sk, (uint8_t)s[k]);
        return tern_fail(TERN_ERR_ARG, "grammar: byte %s not allowed at offset %llu (expected %s)%s", shown,
                         (unsigned long long)(pos.bytes + k), exp,
                         m->eng.overflow ? " [parse too ambiguous: stack limit reached]" : "");
    }
    return push_step(m, mode, kmp, res, nres, pos.bytes + n);
}

/* ---------------------------------------------------------------- masks */

static inline void set_bit(uint32_t *mask, int32_t id) { mask[id >> 5] |= 1u << (id & 31); }
static inline bool get_bit(const uint32_t *mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

static int popcount_mask(const uint32_t *mask, uint32_t words)
{
    int c = 0;
    for (uint32_t i = 0; i < words; i++) c += __builtin_popcount(mask[i]);
    return c;
}

/* Does token id pass from the single stack s (in CALL mode)? */
static bool check_token(struct tern_grammar_matcher *m, const struct gram_stack *s, int32_t id)
{
    const struct tern_grammar_vocab *v = m->v;
    uint8_t mode = MODE_CALL;
    uint32_t kmp = 0;
    const struct gram_stack *res;
    uint32_t nres;
    size_t len = v->off[id + 1] - v->off[id];
    return feed(m, v->bytes + v->off[id], len, &mode, &kmp, s, 1, &res, &nres) == len;
}

static bool same_state(const struct mcache_ent *e, const struct gram_stack *s, uint32_t n)
{
    return e->n_st == n && (!n || !memcmp(e->st, s, n * sizeof *s));
}

/* Appends id to the tokens a mask let through (the classification scratch's unc buffer, grown
 * by doubling); false when out of memory. */
static bool pass_add(struct tern_grammar_matcher *m, uint32_t *n_pass, int32_t id)
{
    if (*n_pass == m->cls.cap_unc) {
        uint32_t nc = m->cls.cap_unc ? m->cls.cap_unc * 2 : 1024;
        int32_t *p = realloc(m->cls.unc, nc * sizeof *p);
        if (!p) return false;
        m->cls.unc = p;
        m->cls.cap_unc = nc;
    }
    m->cls.unc[(*n_pass)++] = id;
    return true;
}

static bool cache_store(struct mcache_ent *e, uint64_t h, const struct gram_stack *s, uint32_t n,
                        const int32_t *ids, uint32_t n_ids)
{
    e->valid = false;
    if (n > e->cap_st) {
        struct gram_stack *p = realloc(e->st, n * sizeof *p);
        if (!p) return false;
        e->st = p;
        e->cap_st = n;
    }
    if (n_ids > e->cap_ids) {
        int32_t *p = realloc(e->ids, n_ids * sizeof *p);
        if (!p) return false;
        e->ids = p;
        e->cap_ids = n_ids;
    }
    if (n) memcpy(e->st, s, n * sizeof *s);
    if (n_ids) memcpy(e->ids, ids, n_ids * sizeof *ids);
    e->n_st = n;
    e->n_ids = n_ids;
    e->hash = h;
    e->valid = true;
    return true;
}

static int free_mask(struct tern_grammar_matcher *m, uint32_t kmp, uint32_t *mask)
{
    const struct tern_grammar_vocab *v = m->v;
    const struct tern_grammar *g = m->g;
    TERN_ASSERT(g->lazy && kmp < g->trigger_len && v->n_words * 32 >= (uint32_t)v->n_vocab);
    m->stats.free_masks++;
    memset(mask, 0xFF, (size_t)v->n_words * 4);
    if (v->n_vocab & 31) mask[v->n_words - 1] = (1u << (v->n_vocab & 31)) - 1;
    int count = v->n_vocab;
    for (uint32_t i = 0; i < g->n_trig_tokens[kmp]; i++) {
        int32_t id = g->trig_tokens[kmp][i];
        uint8_t mode = MODE_FREE;
        uint32_t k = kmp;
        const struct gram_stack *res;
        uint32_t nres;
        size_t len = v->off[id + 1] - v->off[id];
        m->stats.checked_tokens++;
        if (feed(m, v->bytes + v->off[id], len, &mode, &k, NULL, 0, &res, &nres) != len) {
            mask[id >> 5] &= ~(1u << (id & 31));
            count--;
        }
    }
    return count;
}

/* ---------------------------------------------------------------- canonical states (counters) */

/* The canon memo covers every frame interned so far (new entries unknown). */
static bool canon_cover(struct tern_grammar_matcher *m)
{
    uint32_t n = m->eng.fr.n;
    if (m->n_canon >= n) return true;
    if (n > m->cap_canon) {
        uint32_t nc = m->cap_canon ? m->cap_canon : 256;
        while (nc < n) nc *= 2;
        uint32_t *p = realloc(m->canon, (size_t)nc * sizeof *p);
        if (!p) return false;
        m->canon = p;
        m->cap_canon = nc;
    }
    for (uint32_t i = m->n_canon; i < n; i++) m->canon[i] = GRAM_NONE;
    m->n_canon = n;
    return true;
}

/* f with every counter frame of its chain saturated (gram_count_canon): a frame that accepts
 * exactly the same strings of up to the longest token's length. GRAM_NONE when out of memory. */
static uint32_t canon_frame(struct tern_grammar_matcher *m, uint32_t f)
{
    struct gram_frames *fr = &m->eng.fr;
    const struct tern_grammar *g = m->g;
    if (f < fr->n_fixed) return f;
    if (!canon_cover(m)) return GRAM_NONE;
    if (m->canon[f] != GRAM_NONE) return m->canon[f];
    uint32_t k = 0, x = f;
    while (x >= fr->n_fixed && m->canon[x] == GRAM_NONE) {
        if (k == m->cap_chain) {
            uint32_t nc = m->cap_chain ? m->cap_chain * 2 : 64;
            uint32_t *p = realloc(m->chain, (size_t)nc * sizeof *p);
            if (!p) return GRAM_NONE;
            m->chain = p;
            m->cap_chain = nc;
        }
        m->chain[k++] = x;
        x = fr->parent[x];
    }
    uint32_t below = x < fr->n_fixed ? x : m->canon[x];
    TERN_ASSERT(below < fr->n, "a canonical frame is a live frame");
    const uint32_t sat = gram_count_sat(g);
    while (k-- > 0) {
        uint32_t y = m->chain[k], c = fr->cnt[y];
        if (c) {
            const struct gram_rule *r = &g->rules[g->nodes[fr->node[y]].rule];
            TERN_ASSERT(r->counter && (r->cmax == GRAM_INF || c <= r->cmax));
            c = gram_count_canon(c, r->cmin, r->cmax, sat);
            TERN_ASSERT(c > 0, "saturation keeps a counter frame a counter frame");
        }
        uint32_t cy = y;
        if (below != fr->parent[y] || c != fr->cnt[y]) {
            cy = gram_frame_intern(fr, fr->node[y], below, c);
            if (cy == GRAM_NONE || !canon_cover(m)) return GRAM_NONE;
        }
        m->canon[y] = cy;
        m->canon[cy] = cy;
        below = cy;
    }
    return below;
}

static int cmp_stack(const void *a, const void *b)
{
    const struct gram_stack *x = a, *y = b;
    uint64_t kx = (uint64_t)x->node << 32 | x->frame, ky = (uint64_t)y->node << 32 | y->frame;
    return kx < ky ? -1 : kx > ky;
}

/* st[0..n) with canonical frames, sorted and unique, in m->cst; NULL when out of memory. */
static const struct gram_stack *canon_state(struct tern_grammar_matcher *m, const struct gram_stack *st, uint32_t n,
                                            uint32_t *n_out)
{
    bool changed = false;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = gram_is_marker(st[i].node) ? st[i].frame : canon_frame(m, st[i].frame);
        if (f == GRAM_NONE) return NULL;
        m->cst[i] = (struct gram_stack){st[i].node, f};
        changed |= f != st[i].frame;
    }
    *n_out = n;
    if (!changed) return st;
    qsort(m->cst, n, sizeof *m->cst, cmp_stack);
    uint32_t k = n ? 1 : 0;
    for (uint32_t i = 1; i < n; i++)
        if (m->cst[i].node != m->cst[k - 1].node || m->cst[i].frame != m->cst[k - 1].frame) m->cst[k++] = m->cst[i];
    TERN_ASSERT(k <= n);
    *n_out = k;
    return m->cst;
}

/* The counter frame directly below stack s when s's node is in the counter's body rule itself
 * (a string's character: classified with its saturated count, so the text slice is accepted up
 * to the completions left), or 0. A rule the body tail-calls (an array item's object) also sits
 * on that frame but is classified as any node, its end leading to the counter with the count
 * unknown (the few tokens that cross it are checked against the real stack). */
static inline uint32_t count_frame(const struct tern_grammar_matcher *m, const struct gram_stack *s)
{
    const struct gram_frames *fr = &m->eng.fr;
    if (s->frame < fr->n_fixed || !fr->cnt[s->frame]) return 0;
    const struct gram_node *L = &m->g->nodes[fr->node[s->frame]];
    return L->c_n && m->g->calls[L->c_off].rule == m->g->nodes[s->node].rule ? s->frame : 0;
}

int tern_grammar_matcher_fill_mask(struct tern_grammar_matcher *m, uint32_t *mask)
{
    if (!m || !m->v || !mask) return 0;
    const struct tern_grammar_vocab *v = m->v;
    const struct tern_grammar *g = m->g;
    struct mstep pos = *top(m);
    TERN_ASSERT(v->n_words == ((uint32_t)v->n_vocab + 31) / 32, "a mask word per 32 tokens");
    m->stats.masks++;
    if (pos.mode == MODE_EOG) {
        memset(mask, 0, (size_t)v->n_words * 4);
        return 0;
    }
    if (pos.mode == MODE_FREE) return free_mask(m, pos.kmp, mask);
    uint32_t n;
    const struct gram_stack *st = cur_state(m, &n);
    if (!m->cls_ready) {
        if (gram_cls_scratch_init(&m->cls, g)) goto fail;
        m->cls_ready = true;
    }
    /* with counters, the state whose counts are saturated: the same mask, cached once for
     * every position far from the bounds */
    if (g->n_counters && !(st = canon_state(m, st, n, &n))) goto fail;
    /* accepted sets of the distinct top nodes (the state is sorted by node); a node directly
     * on a counter frame is classified with its (saturated) count */
    TERN_ASSERT(n <= STEPBUF, "node_cls holds a classification per stack");
    uint32_t n_nodes = 0;
    const struct gram_cls *single = NULL;
    const struct gram_frames *fr = &m->eng.fr;
    for (uint32_t i = 0; i < n; i++) {
        m->node_cls[i] = NULL;
        if (gram_is_marker(st[i].node)) continue;
        uint32_t cf = count_frame(m, &st[i]);
        if (i && st[i].node == st[i - 1].node) {
            uint32_t pf = count_frame(m, &st[i - 1]);
            if (cf == pf || (cf && pf && fr->node[cf] == fr->node[pf] && fr->cnt[cf] == fr->cnt[pf])) {
                m->node_cls[i] = m->node_cls[i - 1];
                continue;
            }
        }
        bool fresh;
        const struct gram_cls *c = cf ? gram_node_cls_count(g, st[i].node, fr->node[cf], fr->cnt[cf], &m->cls, &fresh)
                                      : gram_node_cls(g, st[i].node, &m->cls, &fresh);
        if (!c) goto fail;
        if (fresh) m->stats.classified_nodes++;
        m->node_cls[i] = c;
        if (n_nodes++ == 0) single = c;
    }
    uint32_t slice_count = 0;
    /* two or more classifications, one of them text (a string under a counter: its characters
     * and, past minLength, the closing quote's stack): the text one fills the mask as if alone
     * and the others' accepted tokens are added, counted as they are new */
    uint32_t added = 0;
    const struct gram_cls *text1 = NULL;
    bool ids_only = n_nodes > 1;
    for (uint32_t i = 0; i < n && ids_only; i++) {
        const struct gram_cls *c = m->node_cls[i];
        if (!c || (i && c == m->node_cls[i - 1])) continue;
        if (c->text && c->text_cap && !text1 && !c->almost) text1 = c;
        else if (c->text && c->text_cap) ids_only = false; /* capacity 0: no slice token, ids only */
    }
    if (ids_only && text1) {
        single = text1;
        n_nodes = 1;
    } else {
        ids_only = false;
    }
    TERN_ASSERT((n_nodes == 0) == (single == NULL));
    if (n_nodes == 1) {
        const struct gram_cls *c = single;
        if (c->text) {
            uint32_t r = c->text_cap;
            if (r >= v->slice_max) {
                memcpy(mask, v->slice_bits, (size_t)v->n_words * 4);
                slice_count = v->n_slice;
            } else {
                uint32_t lo = v->slice_off[r + 1]; /* slice tokens of at most r characters */
                TERN_ASSERT(lo <= v->n_slice);
                if (r < GRAM_SLICE_SMALL) {
                    memcpy(mask, v->slice_upto + (size_t)r * v->n_words, (size_t)v->n_words * 4);
                } else if (lo < v->n_slice - lo) {
                    memset(mask, 0, (size_t)v->n_words * 4);
                    for (uint32_t k = 0; k < lo; k++) set_bit(mask, v->slice_sorted[k]);
                } else {
                    memcpy(mask, v->slice_bits, (size_t)v->n_words * 4);
                    for (uint32_t k = lo; k < v->n_slice; k++) {
                        int32_t id = v->slice_sorted[k];
                        mask[id >> 5] &= ~(1u << (id & 31));
                    }
                }
                slice_count = lo;
            }
            if (c->acc_bits)
                for (uint32_t w = 0; w < v->n_words; w++) mask[w] |= c->acc_bits[w];
            else
                for (uint32_t k = 0; k < c->n_acc; k++) set_bit(mask, c->acc_ids[k]);
        } else if (c->acc_bits) {
            memcpy(mask, c->acc_bits, (size_t)v->n_words * 4);
        } else {
            memset(mask, 0, (size_t)v->n_words * 4);
            for (uint32_t k = 0; k < c->n_acc; k++) set_bit(mask, c->acc_ids[k]);
        }
    } else {
        memset(mask, 0, (size_t)v->n_words * 4);
        for (uint32_t i = 0; i < n; i++) {
            const struct gram_cls *c = m->node_cls[i];
            if (!c || (i && c == m->node_cls[i - 1])) continue;
            if (c->text) {
                const uint32_t *sb = c->text_cap >= v->slice_max ? v->slice_bits
                                     : c->text_cap < GRAM_SLICE_SMALL ? v->slice_upto + (size_t)c->text_cap * v->n_words
                                                                       : NULL;
                if (sb)
                    for (uint32_t w = 0; w < v->n_words; w++) mask[w] |= sb[w];
                else
                    for (uint32_t k = 0; k < v->slice_off[c->text_cap + 1]; k++) set_bit(mask, v->slice_sorted[k]);
            }
            if (c->acc_bits)
                for (uint32_t w = 0; w < v->n_words; w++) mask[w] |= c->acc_bits[w];
            else
                for (uint32_t k = 0; k < c->n_acc; k++) set_bit(mask, c->acc_ids[k]);
        }
    }
    if (ids_only) /* the other classifications' accepted ids */
        for (uint32_t i = 0; i < n; i++) {
            const struct gram_cls *c = m->node_cls[i];
            if (!c || c == single || (i && c == m->node_cls[i - 1])) continue;
            if (c->acc_bits)
                for (uint32_t w = 0; w < v->n_words; w++) {
                    added += (uint32_t)__builtin_popcount(c->acc_bits[w] & ~mask[w]);
                    mask[w] |= c->acc_bits[w];
                }
            else
                for (uint32_t k = 0; k < c->n_acc; k++) {
                    if (get_bit(mask, c->acc_ids[k])) continue;
                    set_bit(mask, c->acc_ids[k]);
                    added++;
                }
        }
    /* uncertain tokens: from the cache, or checked against each stack */
    uint64_t h = gram_state_hash(st, n);
    struct mcache_ent *e = &m->cache[h & (MCACHE - 1)];
    uint32_t extra = 0;
    if (e->valid && e->hash == h && same_state(e, st, n)) {
        m->stats.mask_cache_hits++;
        for (uint32_t k = 0; k < e->n_ids; k++) set_bit(mask, e->ids[k]);
        extra = e->n_ids;
    } else {
        /* the passing ids are collected in the classification scratch's unc buffer */
        uint32_t n_pass = 0;
        for (uint32_t i = 0; i < n; i++) {
            const struct gram_cls *c = m->node_cls[i];
            if (!c) continue;
            for (uint32_t k = 0; k < c->n_unc; k++) {
                int32_t id = c->unc[k];
                if (get_bit(mask, id)) continue;
                m->stats.checked_tokens++;
                if (!check_token(m, &st[i], id)) continue;
                set_bit(mask, id);
                if (!pass_add(m, &n_pass, id)) goto fail;
            }
        }
        /* the control tokens the grammar names: in no trie, so checked here */
        for (uint32_t k = 0; k < g->n_ctl; k++) {
            int32_t id = g->ctl[k];
            for (uint32_t i = 0; i < n && !get_bit(mask, id); i++) {
                if (gram_is_marker(st[i].node)) continue;
                m->stats.checked_tokens++;
                if (!check_token(m, &st[i], id)) continue;
                set_bit(mask, id);
                if (!pass_add(m, &n_pass, id)) goto fail;
            }
        }
        TERN_ASSERT(n_pass <= (uint32_t)v->n_vocab, "a token passes once");
        cache_store(e, h, st, n, m->cls.unc, n_pass);
        extra = n_pass;
    }
    int count;
    if (n_nodes <= 1) count = (int)((single ? single->n_acc : 0) + slice_count + extra + added);
    else count = -1;
    if (gram_state_accepting(st, n))
        for (int i = 0; i < v->n_eog; i++) {
            if (!get_bit(mask, v->eog[i]) && count >= 0) count++;
            set_bit(mask, v->eog[i]);
        }
    if (count < 0) count = popcount_mask(mask, v->n_words);
    /* the counted path adds up disjoint sets; the mask's bits are the truth (O(vocabulary)) */
    TERN_ASSERT_SLOW(count == popcount_mask(mask, v->n_words));
    return count;
fail:
    /* out of memory: refuse everything rather than allow what was not checked */
    memset(mask, 0, (size_t)v->n_words * 4);
    return 0;
}

int tern_grammar_matcher_apply(struct tern_grammar_matcher *m, float *logits)
{
    if (!m || !m->v || !logits) return 0;
    int count = tern_grammar_matcher_fill_mask(m, m->mask);
    const struct tern_grammar_vocab *v = m->v;
    /* Full words (free text, string bodies) are skipped, zero words filled; mixed ones go 8
     * tokens at a time through a table of lane masks, branch-free and in a shape the compiler
     * vectorizes even for baseline SSE2 (a bit-by-bit loop cost ~40 us on a 50k vocabulary). */
    static uint32_t lut[256][8];
    static atomic_int lut_ready;
    if (!atomic_load_explicit(&lut_ready, memory_order_acquire)) {
        for (int i = 0; i < 256; i++)
            for (int b = 0; b < 8; b++) lut[i][b] = (i >> b) & 1 ? 0xFFFFFFFFu : 0;
        atomic_store_explicit(&lut_ready, 1, memory_order_release); /* same values if raced */
    }
    const uint32_t neg_inf = 0xFF800000u; /* -INFINITY's bits */
    const uint32_t full = (uint32_t)v->n_vocab / 32;
    for (uint32_t w = 0; w < full; w++) {
        const uint32_t x = m->mask[w];
        if (x == 0xFFFFFFFFu) continue;
        float *l = logits + (size_t)w * 32;
        if (x == 0) {
            for (uint32_t b = 0; b < 32; b++) l[b] = -INFINITY;
            continue;
        }
        uint32_t bits[32];
        memcpy(bits, l, sizeof bits);
        for (uint32_t q = 0; q < 4; q++) {
            const uint32_t *k = lut[(x >> (8 * q)) & 0xFF];
            for (uint32_t b = 0; b < 8; b++) bits[8 * q + b] = (bits[8 * q + b] & k[b]) | (neg_inf & ~k[b]);
        }
        memcpy(l, bits, sizeof bits);
    }
    for (uint32_t t = full * 32; t < (uint32_t)v->n_vocab; t++)
        if (!((m->mask[t >> 5] >> (t & 31)) & 1)) logits[t] = -INFINITY;
    return count;
}

int32_t tern_grammar_matcher_forced_token(struct tern_grammar_matcher *m)
{
    if (!m || !m->v) return -1;
    if (tern_grammar_matcher_fill_mask(m, m->mask) != 1) return -1;
    for (uint32_t w = 0; w < m->v->n_words; w++)
        if (m->mask[w]) return (int32_t)(w * 32 + (uint32_t)__builtin_ctz(m->mask[w]));
    TERN_ASSERT(0, "a mask counted 1 has a bit set");
    return -1;
}

/* ---------------------------------------------------------------- queries */

size_t tern_grammar_matcher_expected(const struct tern_grammar_matcher *m, char *buf, size_t cap)
{
    if (!m || !buf || !cap) return 0;
    const struct mstep *s = &m->steps[m->n_steps - 1];
    if (s->mode == MODE_FREE) snprintf(buf, cap, "free text (outside the constrained part)");
    else describe_expected(m->g, m->hs + s->off, s->n, s->mode, buf, cap);
    return strlen(buf);
}

bool tern_grammar_matcher_is_complete(const struct tern_grammar_matcher *m)
{
    if (!m) return false;
    const struct mstep *s = &m->steps[m->n_steps - 1];
    if (s->mode == MODE_FREE) return true;
    if (s->mode == MODE_EOG) return false;
    return gram_state_accepting(m->hs + s->off, s->n);
}

bool tern_grammar_matcher_is_done(const struct tern_grammar_matcher *m)
{
    if (!m) return true;
    const struct mstep *s = &m->steps[m->n_steps - 1];
    if (s->mode == MODE_EOG) return true;
    if (s->mode == MODE_FREE) return false;
    return !m->g->lazy && state_done(m->hs + s->off, s->n);
}

bool tern_grammar_matcher_is_constrained(const struct tern_grammar_matcher *m)
{
    return m && m->steps[m->n_steps - 1].mode == MODE_CALL;
}

size_t tern_grammar_matcher_forced_bytes(struct tern_grammar_matcher *m, char *buf, size_t cap)
{
    if (!m) return 0;
    const struct mstep *s = top(m);
    if (s->mode != MODE_CALL) return 0;
    const struct gram_stack *cur = m->hs + s->off;
    uint32_t n = s->n;
    struct gram_stack *bufs[2] = {m->ta, m->tb};
    int which = 0;
    size_t k = 0;
    while (k < cap && !gram_state_accepting(cur, n)) {
        struct gram_bset set;
        gram_engine_next_bytes(m->g, cur, n, &set);
        int only = -1, cnt = 0;
        for (int w = 0; w < 4 && cnt < 2; w++) {
            uint64_t x = set.w[w];
            while (x && cnt < 2) {
                only = w * 64 + __builtin_ctzll(x);
                x &= x - 1;
                cnt++;
            }
        }
        if (cnt != 1 || only == GRAM_CTL_LEAD) break; /* a control token is not text */
        uint32_t nn = gram_engine_step(&m->eng, cur, n, (uint8_t)only, bufs[which]);
        if (!nn) break;
        cur = bufs[which];
        which ^= 1;
        n = nn;
        buf[k++] = (char)only;
    }
    return k;
}

/* Longest token of the `all` trie whose bytes are a prefix of b[0..n): its length, *tok its
 * id (0 if none). Children of node i are i+1 .. node[i].end-1, siblings linked through end. */
static size_t longest_token(const struct tern_grammar_vocab *v, const uint8_t *b, size_t n, int32_t *tok)
{
    if (n && b[0] == GRAM_CTL_LEAD) { /* a control token's literal: that token, whole */
        int32_t id = gram_ctl_decode(b, n);
        if (id < 0 || id >= v->n_vocab || v->kind[id] != GRAM_TOK_CONTROL) return 0;
        *tok = id;
        return GRAM_CTL_LEN;
    }
    const struct gram_trie *t = &v->all;
    uint32_t j = 0, lim = t->n;
    size_t best = 0;
    for (size_t d = 0; d < n && j < lim; d++) {
        while (j < lim && t->node[j].byte != b[d]) j = t->node[j].end;
        if (j >= lim) break;
        if (t->node[j].token >= 0) {
            best = d + 1;
            *tok = t->node[j].token;
        }
        lim = t->node[j].end;
        j++;
    }
    return best;
}

int tern_grammar_matcher_forced_tokens(struct tern_grammar_matcher *m, int32_t *out, int cap)
{
    if (!m || !m->v || !out || cap <= 0) return 0;
    const struct mstep *s = top(m);
    if (s->mode != MODE_CALL) return 0;
    uint8_t buf[GRAM_FORCED_MAX];
    const struct gram_stack *cur = m->hs + s->off;
    uint32_t n = s->n;
    struct gram_stack *bufs[2] = {m->ta, m->tb};
    int which = 0;
    size_t k = 0;
    while (k < sizeof buf && !gram_state_accepting(cur, n)) {
        struct gram_bset set;
        gram_engine_next_bytes(m->g, cur, n, &set);
        int only = -1, cnt = 0;
        for (int w = 0; w < 4 && cnt < 2; w++)
            for (uint64_t x = set.w[w]; x && cnt < 2; x &= x - 1, cnt++) only = w * 64 + __builtin_ctzll(x);
        if (cnt != 1) break;
        uint32_t nn = gram_engine_step(&m->eng, cur, n, (uint8_t)only, bufs[which]);
        if (!nn) break;
        cur = bufs[which];
        which ^= 1;
        n = nn;
        buf[k++] = (uint8_t)only;
    }
    /* the forced run closes the document (or the call): nothing can merge with its last token */
    const bool closes = state_done(cur, n);
    int nt = 0;
    size_t i = 0;
    while (i < k && nt < cap) {
        int32_t id = 0;
        size_t l = longest_token(m->v, buf + i, k - i, &id);
        if (!l) break;
        TERN_ASSERT(l <= k - i && id >= 0 && id < m->v->n_vocab, "a forced token lies within the forced bytes");
        out[nt++] = id;
        i += l;
    }
    if (nt > 0 && !(closes && i == k)) nt--; /* the model may want a longer token from here */
    return nt;
}

tern_status tern_grammar_matcher_rollback(struct tern_grammar_matcher *m, int n)
{
    if (!m) return tern_fail(TERN_ERR_ARG, "grammar matcher: NULL");
    if (n < 0 || (uint32_t)n >= m->n_steps)
        return tern_fail(TERN_ERR_ARG, "grammar: cannot roll back %d steps (%u taken)", n, m->n_steps - 1);
    m->n_steps -= (uint32_t)n;
    const struct mstep *s = top(m);
    /* the history is append-only: the kept position's stacks are the last ones written, so
     * truncating there restores exactly the state the matcher had before those steps */
    TERN_ASSERT(n == 0 || m->steps[m->n_steps].off >= s->off + s->n, "later steps lie after the kept one");
    m->n_hs = s->off + s->n;
    return TERN_OK;
}

int tern_grammar_matcher_n_steps(const struct tern_grammar_matcher *m)
{
    return m ? (int)m->n_steps - 1 : 0;
}

void tern_grammar_matcher_get_stats(const struct tern_grammar_matcher *m, struct tern_grammar_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (m) *out = m->stats;
}

/* ---------------------------------------------------------------- random documents */

/* Fewest bytes from each node to its rule's end (calls cost their callee's minimum). */
static uint32_t *min_costs(const struct tern_grammar *g)
{
    uint32_t *d = malloc(((size_t)g->n_nodes + 1) * sizeof *d);
    if (!d) return NULL;
    for (uint32_t i = 0; i < g->n_nodes; i++) d[i] = (g->nodes[i].flags & GN_FINAL) ? 0 : UINT32_MAX / 4;
    for (int pass = 0; pass < 10000; pass++) {
        bool changed = false;
        for (uint32_t i = g->n_nodes; i-- > 0;) {
            const struct gram_node *nd = &g->nodes[i];
            uint32_t best = d[i];
            if (nd->flags & GN_COUNT) { /* cmin completions of the body */
                const struct gram_rule *r = &g->rules[nd->rule];
                uint64_t c = r->cmin == 0 ? 0 : nd->c_n ? (uint64_t)r->cmin * d[g->rules[g->calls[nd->c_off].rule].start] : UINT32_MAX / 4;
                if (c > UINT32_MAX / 4) c = UINT32_MAX / 4;
                if (c < best) { d[i] = (uint32_t)c; changed = true; }
                continue;
            }
            for (uint32_t k = 0; k < nd->r_n; k++) {
                uint32_t c = 1 + d[g->ranges[nd->r_off + k].to];
                if (c < best) best = c;
            }
            for (uint32_t k = 0; k < nd->c_n; k++) {
                const struct gram_call *cl = &g->calls[nd->c_off + k];
                uint32_t c = d[g->rules[cl->rule].start] + d[cl->ret];
                if (c < best) best = c;
            }
            if (best < d[i]) { d[i] = best; changed = true; }
        }
        if (!changed) break;
    }
    return d;
}

/* Estimated bytes to finish from a state: the cheapest stack (its top plus every frame). */
static uint64_t state_cost(const struct tern_grammar_matcher *m, const uint32_t *d, const struct gram_stack *s,
                           uint32_t n)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].node == GRAM_ACCEPT) return 0;
        if (gram_is_marker(s[i].node)) continue;
        uint64_t c = d[s[i].node];
        const struct gram_frames *fr = &m->eng.fr;
        for (uint32_t f = s[i].frame; f >= fr->n_fixed; f = fr->parent[f]) {
            if (!fr->cnt[f]) { c += d[fr->node[f]]; continue; }
            /* a counter: the completions still needed after this one */
            const struct gram_node *L = &m->g->nodes[fr->node[f]];
            const struct gram_rule *r = &m->g->rules[L->rule];
            if (fr->cnt[f] < r->cmin)
                c += (uint64_t)(r->cmin - fr->cnt[f]) * d[m->g->rules[m->g->calls[L->c_off].rule].start];
        }
        if (c < best) best = c;
    }
    return best;
}

tern_status tern_grammar_generate(const struct tern_grammar *g, uint64_t seed, size_t target_len,
                                  char *buf, size_t cap, size_t *n)
{
    if (!g || !buf || !n) return tern_fail(TERN_ERR_ARG, "grammar generate: NULL argument");
    struct tern_grammar_matcher *m;
    tern_status st = tern_grammar_matcher_create(g, &m);
    if (st) return st;
    uint32_t *d = min_costs(g);
    if (!d) { tern_grammar_matcher_free(m); return tern_fail(TERN_ERR_NOMEM, "grammar generate: out of memory"); }
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    const struct gram_stack *cur = m->init;
    uint32_t nc = m->n_init;
    struct gram_stack *bufs[2] = {m->ta, m->tb};
    int which = 0;
    size_t k = 0;
    uint64_t work = 0; /* parse stacks stepped: a highly ambiguous grammar keeps thousands alive */
    st = TERN_OK;
    for (;;) {
        if (work > GRAM_GENERATE_WORK) {
            st = tern_fail(TERN_ERR_RANGE, "grammar generate: gave up after %zu bytes: the grammar is too ambiguous "
                           "(%u parse stacks alive) to finish a document within the work budget", k, nc);
            break;
        }
        bool acc = gram_state_accepting(cur, nc);
        struct gram_bset set;
        gram_engine_next_bytes(g, cur, nc, &set);
        int cnt = 0;
        for (int w = 0; w < 4; w++) cnt += __builtin_popcountll(set.w[w]);
        if (acc && (cnt == 0 || k >= target_len || RND() % 16 == 0)) break;
        if (cnt == 0 || k == cap) { st = tern_fail(TERN_ERR_RANGE, "grammar generate: no complete document within %zu bytes", cap); break; }
        int pick = -1;
        if (k < target_len) {
            /* mostly printable ASCII where the grammar allows it */
            int n_print = 0;
            for (int b = 0x20; b < 0x7F; b++) n_print += gram_bset_has(&set, (unsigned)b);
            bool ascii = n_print && RND() % 20 != 0;
            int r = (int)(RND() % (uint64_t)(ascii ? n_print : cnt));
            for (int b = 0; b < 256 && pick < 0; b++) {
                if (!gram_bset_has(&set, (unsigned)b) || (ascii && (b < 0x20 || b >= 0x7F))) continue;
                if (r-- == 0) pick = b;
            }
        } else {
            /* finish: the byte whose state is cheapest to complete (ties: the first) */
            uint64_t best = UINT64_MAX;
            for (int b = 0; b < 256; b++) {
                if (!gram_bset_has(&set, (unsigned)b)) continue;
                uint32_t nn = gram_engine_step(&m->eng, cur, nc, (uint8_t)b, bufs[which]);
                work += nc + nn;
                uint64_t c = nn ? state_cost(m, d, bufs[which], nn) : UINT64_MAX;
                if (c < best) { best = c; pick = b; }
            }
        }
        if (pick < 0) { st = tern_fail(TERN_ERR_RANGE, "grammar generate: stuck"); break; }
        uint32_t nn = gram_engine_step(&m->eng, cur, nc, (uint8_t)pick, bufs[which]);
        work += nc + nn;
        if (!nn) { st = tern_fail(TERN_ERR_RANGE, "grammar generate: stuck"); break; }
        cur = bufs[which];
        which ^= 1;
        nc = nn;
        buf[k++] = (char)pick;
    }
#undef RND
    /* control tokens the document holds come out as their text (what a detokenizer that
     * preserves them shows; tokenized with TERN_TOK_PARSE_SPECIAL they are those tokens again) */
    if (!st && g->n_ctl) {
        size_t total = k;
        for (size_t i = 0; i < k; i++)
            if ((uint8_t)buf[i] == GRAM_CTL_LEAD) {
                const char *t = gram_vocab_control_text(g->vocab, gram_ctl_decode((const uint8_t *)buf + i, k - i));
                total += (t ? strlen(t) : GRAM_CTL_LEN) - GRAM_CTL_LEN;
            }
        if (total > cap) {
            st = tern_fail(TERN_ERR_RANGE, "grammar generate: no complete document within %zu bytes", cap);
        } else {
            /* expand from the back so nothing is overwritten before it is moved */
            size_t w = total, i = k;
            while (i > 0) {
                if (i >= GRAM_CTL_LEN && (uint8_t)buf[i - GRAM_CTL_LEN] == GRAM_CTL_LEAD &&
                    gram_ctl_decode((const uint8_t *)buf + i - GRAM_CTL_LEN, GRAM_CTL_LEN) >= 0) {
                    const char *t = gram_vocab_control_text(g->vocab, gram_ctl_decode((const uint8_t *)buf + i - GRAM_CTL_LEN, GRAM_CTL_LEN));
                    size_t tl = t ? strlen(t) : 0;
                    if (t) {
                        memmove(buf + w - tl, t, tl);
                        w -= tl;
                        i -= GRAM_CTL_LEN;
                        continue;
                    }
                }
                buf[--w] = buf[--i];
            }
            k = total;
        }
    }
    free(d);
    tern_grammar_matcher_free(m);
    if (!st) *n = k;
    return st;
}
