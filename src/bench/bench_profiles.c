/* bench_profiles.c — configs/hardware_profiles.yaml, read with Debian's libyaml (its document
 * API: the whole file as a node tree, every node with its line). A profile says which machines
 * it covers (match: arch, vendor, families, isa = the kernel path tern dispatches to, cpus) and
 * what holds on them: how a suite is measured there by default (threads, rounds, noise target),
 * speed bands per model, the batch policy, the KV precision and the gate's limits.
 * Profiles are tried in file order; the first that matches wins, so a catch-all goes last.
 * Every error names FILE:LINE: a syntax error (libyaml's mark), an unknown key (a typo must not
 * silently fall back to a default), a value of the wrong kind. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "bench/bench.h"
#include "util/error.h"

struct yp {
    yaml_document_t doc;
    const char *path;
};

#define LINE(n) ((int)(n)->start_mark.line + 1)
#define BAD(n, ...) bad(y, n, __VA_ARGS__)

static tern_status bad(struct yp *y, yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tern_status bad(struct yp *y, yaml_node_t *n, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_fail(TERN_ERR_FORMAT, "%s:%d: %s", y->path, n ? LINE(n) : 0, msg);
}

static const char *scalar(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static tern_status get_num(struct yp *y, yaml_node_t *n, const char *key, double lo, double hi, double *out)
{
    const char *s = scalar(n);
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno) return BAD(n, "%s must be a number", key);
    if (v < lo || v > hi) return BAD(n, "%s = %g is outside %g..%g", key, v, lo, hi);
    *out = v;
    return TERN_OK;
}

static tern_status get_str(struct yp *y, yaml_node_t *n, const char *key, char *out, size_t cap)
{
    const char *s = scalar(n);
    if (!s || !*s) return BAD(n, "%s must be a non-empty string", key);
    if (strlen(s) >= cap) return BAD(n, "%s is longer than %zu bytes", key, cap - 1);
    snprintf(out, cap, "%s", s);
    return TERN_OK;
}

/* Does scalar-or-sequence node n hold a scalar equal to want (or "any")? */
static tern_status match_list(struct yp *y, yaml_node_t *n, const char *key, const char *want, bool *hit)
{
    *hit = false;
    if (n->type == YAML_SCALAR_NODE) {
        *hit = !strcmp(scalar(n), "any") || !strcmp(scalar(n), want);
        return TERN_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE) return BAD(n, "match.%s must be a value or a list of values", key);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(&y->doc, *it);
        if (!scalar(e)) return BAD(e, "match.%s: every entry must be a value", key);
        if (!strcmp(scalar(e), want) || !strcmp(scalar(e), "any")) *hit = true;
    }
    return TERN_OK;
}

static tern_status parse_pair(struct yp *y, yaml_node_t *n, const char *key, double out[2])
{
    if (n->type != YAML_SEQUENCE_NODE || n->data.sequence.items.top - n->data.sequence.items.start != 2)
        return BAD(n, "%s must be [low, high]", key);
    for (int i = 0; i < 2; i++) {
        yaml_node_t *e = yaml_document_get_node(&y->doc, n->data.sequence.items.start[i]);
        tern_status st = get_num(y, e, key, 0, 1e12, &out[i]);
        if (st) return st;
    }
    if (out[0] > out[1]) return BAD(n, "%s: low %g is above high %g", key, out[0], out[1]);
    return TERN_OK;
}

/* Every key/value pair of a mapping node. Two nested loops: leave them with return, not break. */
#define FOR_PAIRS(map, k, v)                                                                   \
    for (yaml_node_pair_t *p_ = (map)->data.mapping.pairs.start; p_ < (map)->data.mapping.pairs.top; p_++) \
        for (yaml_node_t *k = yaml_document_get_node(&y->doc, p_->key),                       \
                         *v = yaml_document_get_node(&y->doc, p_->value), *once_ = k; once_;   \
             once_ = NULL)

static tern_status parse_bands(struct yp *y, yaml_node_t *n, struct bench_profile *pr)
{
    if (n->type != YAML_SEQUENCE_NODE) return BAD(n, "speed_bands must be a list");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *b = yaml_document_get_node(&y->doc, *it);
        if (b->type != YAML_MAPPING_NODE) return BAD(b, "a speed band must be a mapping");
        if (pr->n_bands == 16) return BAD(b, "more than 16 speed bands");
        struct bench_band *band = &pr->bands[pr->n_bands++];
        memset(band, 0, sizeof *band);
        tern_status st = TERN_OK;
        FOR_PAIRS(b, k, v) {
            const char *key = scalar(k);
            if (!key) st = BAD(k, "keys must be plain values");
            else if (!strcmp(key, "model")) st = get_str(y, v, "model", band->model, sizeof band->model);
            else if (!strcmp(key, "tps_p50")) st = parse_pair(y, v, "tps_p50", band->tps_p50);
            else if (!strcmp(key, "ttft_ms_p50")) st = parse_pair(y, v, "ttft_ms_p50", band->ttft_ms_p50);
            else st = BAD(k, "unknown key '%s' in a speed band (model, tps_p50, ttft_ms_p50)", key);
            if (st) return st;
        }
        if (!band->model[0]) return BAD(b, "a speed band needs model (a glob on the model file's name)");
    }
    return TERN_OK;
}

static tern_status parse_map(struct yp *y, yaml_node_t *n, const char *what, struct bench_profile *pr)
{
    if (n->type != YAML_MAPPING_NODE) return BAD(n, "%s must be a mapping", what);
    tern_status st = TERN_OK;
    FOR_PAIRS(n, k, v) {
        const char *key = scalar(k);
        double d = 0;
        if (!key) return BAD(k, "keys must be plain values");
        if (!strcmp(what, "batch_policy")) {
            if (!strcmp(key, "interactive")) { if (!(st = get_num(y, v, key, 1, 1, &d))) pr->batch_interactive = (int)d; }
            else if (!strcmp(key, "offline")) { if (!(st = get_num(y, v, key, 1, 4, &d))) pr->batch_offline = (int)d; }
            else if (!strcmp(key, "min_tps_gain")) st = get_num(y, v, key, 0, 10, &pr->batch_min_tps_gain);
            else if (!strcmp(key, "max_p95_penalty")) st = get_num(y, v, key, 0, 10, &pr->batch_max_p95_penalty);
            else st = BAD(k, "unknown key '%s' in batch_policy (interactive, offline, min_tps_gain, max_p95_penalty)", key);
        } else if (!strcmp(what, "measure")) {
            struct bench_measure *m = &pr->measure;
            if (!strcmp(key, "threads")) { if (!(st = get_num(y, v, key, 0, 512, &d))) m->threads = (int)d; }
            else if (!strcmp(key, "repetitions")) { if (!(st = get_num(y, v, key, 2, 1000, &d))) m->reps = (int)d; }
            else if (!strcmp(key, "max_repetitions")) { if (!(st = get_num(y, v, key, 2, 1000, &d))) m->max_reps = (int)d; }
            else if (!strcmp(key, "noise_target_pct")) { if (!(st = get_num(y, v, key, 0.01, 50, &d))) m->noise_target = d / 100; }
            else st = BAD(k, "unknown key '%s' in measure (threads, repetitions, max_repetitions, noise_target_pct)", key);
            if (!st && (int)d != d && strcmp(key, "noise_target_pct")) st = BAD(v, "%s must be a whole number", key);
        } else {
            struct bench_gate_limits *g = &pr->gate;
            if (!strcmp(key, "ttft_regress_pct")) st = get_num(y, v, key, 0, 1000, &g->ttft_regress_pct);
            else if (!strcmp(key, "tps_regress_pct")) st = get_num(y, v, key, 0, 100, &g->tps_regress_pct);
            else if (!strcmp(key, "ttfa_p95_max_tokens")) st = get_num(y, v, key, 0, 1e6, &g->ttfa_p95_max_tokens);
            else if (!strcmp(key, "residency_drop_points")) st = get_num(y, v, key, 0, 100, &g->residency_drop_points);
            else st = BAD(k, "unknown key '%s' in gate (ttft_regress_pct, tps_regress_pct, ttfa_p95_max_tokens, residency_drop_points)", key);
        }
        if (st) return st;
    }
    return TERN_OK;
}

struct bench_gate_limits bench_gate_default_limits(void)
{
    return (struct bench_gate_limits){5, 5, 25, 10};
}

/* Parse profile node n into pr; *matches says whether hw (may be NULL) fits its match. */
static tern_status parse_profile(struct yp *y, yaml_node_t *n, const struct bench_hw *hw,
                                 struct bench_profile *pr, bool *matches)
{
    memset(pr, 0, sizeof *pr);
    pr->batch_interactive = pr->batch_offline = 1;
    pr->batch_min_tps_gain = pr->batch_max_p95_penalty = 0.10;
    snprintf(pr->kv_precision, sizeof pr->kv_precision, "f16");
    pr->gate = bench_gate_default_limits();
    pr->measure = (struct bench_measure){.threads = 0, .reps = 3, .max_reps = 0, .noise_target = 0.01};
    snprintf(pr->source, sizeof pr->source, "%s:%d", y->path, LINE(n));
    *matches = true;
    if (n->type != YAML_MAPPING_NODE) return BAD(n, "a profile must be a mapping (name, match, ...)");
    bool have_match = false;
    tern_status st = TERN_OK;
    FOR_PAIRS(n, k, v) {
        const char *key = scalar(k);
        if (!key) return BAD(k, "keys must be plain values");
        if (!strcmp(key, "name")) st = get_str(y, v, "name", pr->name, sizeof pr->name);
        else if (!strcmp(key, "kv_precision")) {
            st = get_str(y, v, "kv_precision", pr->kv_precision, sizeof pr->kv_precision);
            /* the KV cache tern allocates is F16 (tern_kv_bytes); a profile cannot ask for more */
            if (!st && strcmp(pr->kv_precision, "f16")) st = BAD(v, "kv_precision '%s': tern's KV cache is f16", pr->kv_precision);
        } else if (!strcmp(key, "batch_policy") || !strcmp(key, "gate") || !strcmp(key, "measure")) st = parse_map(y, v, key, pr);
        else if (!strcmp(key, "speed_bands")) st = parse_bands(y, v, pr);
        else if (!strcmp(key, "match")) {
            have_match = true;
            if (v->type != YAML_MAPPING_NODE) return BAD(v, "match must be a mapping (arch, vendor, families, isa, cpus)");
            FOR_PAIRS(v, mk, mv) {
                const char *m = scalar(mk);
                bool hit = true;
                char num[16];
                if (!m) return BAD(mk, "keys must be plain values");
                if (!strcmp(m, "arch")) st = match_list(y, mv, m, hw ? hw->arch : "", &hit);
                else if (!strcmp(m, "vendor")) st = match_list(y, mv, m, hw ? hw->vendor : "", &hit);
                else if (!strcmp(m, "isa")) st = match_list(y, mv, m, hw ? hw->kernel_isa : "", &hit);
                else if (!strcmp(m, "families")) {
                    snprintf(num, sizeof num, "%d", hw ? hw->family : -1);
                    st = match_list(y, mv, m, num, &hit);
                } else if (!strcmp(m, "cpus")) {
                    snprintf(num, sizeof num, "%d", hw ? hw->cpus_online : -1);
                    st = match_list(y, mv, m, num, &hit);
                } else st = BAD(mk, "unknown key '%s' in match (arch, vendor, families, isa, cpus)", m);
                if (st) return st;
                *matches = *matches && hit;
            }
        } else st = BAD(k, "unknown key '%s' in a profile (name, match, measure, speed_bands, batch_policy, kv_precision, gate)", key);
        if (st) return st;
    }
    if (!pr->name[0]) return BAD(n, "a profile needs a name");
    if (pr->measure.max_reps && pr->measure.max_reps < pr->measure.reps)
        return BAD(n, "profile '%s': measure.max_repetitions %d is below repetitions %d", pr->name, pr->measure.max_reps,
                   pr->measure.reps);
    if (!have_match) return BAD(n, "profile '%s' needs a match (use {arch: any} for a catch-all)", pr->name);
    return TERN_OK;
}

static tern_status load(const char *path, const struct bench_hw *hw, struct bench_profile *out,
                        int *n_profiles, bool *found)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot open hardware profiles %s: %s", path, strerror(errno));
    yaml_parser_t parser;
    struct yp yy = {.path = path}, *y = &yy;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &y->doc)) {
        tern_status st = tern_fail(TERN_ERR_FORMAT, "%s:%d:%d: %s%s%s", path,
                                   (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1,
                                   parser.problem ? parser.problem : "YAML error",
                                   parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        fclose(f);
        return st;
    }
    yaml_parser_delete(&parser);
    fclose(f);
    tern_status st = TERN_OK;
    yaml_node_t *root = yaml_document_get_root_node(&y->doc), *list = NULL;
    if (!root) st = tern_fail(TERN_ERR_FORMAT, "%s:1: the file is empty", path);
    else if (root->type != YAML_MAPPING_NODE) st = BAD(root, "the top level must be a mapping (version, profiles)");
    double version = 0;
    /* a plain loop: FOR_PAIRS is two nested loops, and a break must end both */
    for (yaml_node_pair_t *pp = st ? NULL : root->data.mapping.pairs.start;
         pp && pp < root->data.mapping.pairs.top && !st; pp++) {
        yaml_node_t *k = yaml_document_get_node(&y->doc, pp->key), *v = yaml_document_get_node(&y->doc, pp->value);
        const char *key = scalar(k);
        if (!key) st = BAD(k, "keys must be plain values");
        else if (!strcmp(key, "version")) st = get_num(y, v, "version", 1, 1, &version);
        else if (!strcmp(key, "profiles")) list = v;
        else st = BAD(k, "unknown top-level key '%s' (version, profiles)", key);
    }
    if (!st && version != 1) st = BAD(root, "version: 1 is required (this tern reads version 1)");
    if (!st && (!list || list->type != YAML_SEQUENCE_NODE)) st = BAD(list ? list : root, "profiles must be a list");
    *n_profiles = 0;
    *found = false;
    if (!st) {
        for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
            struct bench_profile pr;
            bool m;
            if ((st = parse_profile(y, yaml_document_get_node(&y->doc, *it), hw, &pr, &m))) break;
            ++*n_profiles;
            if (m && hw && !*found) { *out = pr; *found = true; }
        }
    }
    yaml_document_delete(&y->doc);
    return st;
}

tern_status bench_profile_match(const char *path, const struct bench_hw *hw, struct bench_profile *out)
{
    int n;
    bool found;
    tern_status st = load(path, hw, out, &n, &found);
    if (st) return st;
    if (!found)
        return tern_fail(TERN_ERR_NOT_FOUND, "%s: none of its %d profiles matches this machine (%s %s family %d, "
                         "kernels %s); add one, or a catch-all {arch: any} last", path, n, hw->arch,
                         hw->vendor, hw->family, hw->kernel_isa);
    return TERN_OK;
}

tern_status bench_profiles_check(const char *path, int *n_profiles)
{
    struct bench_profile pr;
    bool found;
    return load(path, NULL, &pr, n_profiles, &found);
}

void bench_profile_key(const struct bench_profile *p, const struct bench_hw *hw, char *out, size_t n)
{
    snprintf(out, n, "%s/%s-f%d-m%d/%s/%dcpu", p->name, hw->vendor, hw->family, hw->model,
             hw->kernel_isa, hw->cpus_online);
}
