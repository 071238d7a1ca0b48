/* cmd_grammar_masks.c — `tern grammar check --masks FILE`: the allowed-token set at every step of
 * every document, machine-readable, so another engine's masks can be compared step by step
 * (bench/peers/grammar_compare.py does, against XGrammar and LLGuidance).
 *
 * A full set is up to 262k ids, so each step is summarized by the count of allowed ids and an
 * order-independent hash of them: the sum modulo 2^64 of splitmix64's finalizer over each id
 * (cli_masks_id_hash). A sum is what a peer's bitmask gives cheaply with vectorized arithmetic
 * (numpy), and with the count a collision between two different sets is negligible. End-of-
 * generation tokens are kept out of count and hash and counted apart ("eog"), because engines
 * name different stop tokens (tern allows every EOG token of the vocabulary, a peer its one EOS):
 * a comparison then decides explicitly how to treat them. --mask-ids DOC:STEP[,DOC:STEP...] adds
 * the full sorted id lists of those steps (end-of-generation ids included), to see what differs.
 *
 * The file is JSON lines, written to FILE.tmp and renamed when complete:
 *   {"n_vocab": N, "eog": [ids], "hash": "splitmix64-sum"}                    (header)
 *   {"doc": 1, "accept": true, "tokens": [...], "n": [...], "hash": ["%016llx",...], "eog": [...],
 *    "us": [...], "ids": {"STEP": [...]}}                   (per document; "ids" with --mask-ids)
 * Step i is the mask before tokens[i]; an accepted document has one step more than tokens (the
 * mask at its end), a refused one ends with the mask that refused its token (one step per token
 * when the document ended incomplete). "us" is the time of fill_mask (thread CPU time with
 * --cpu-clock). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_grammar.h"

struct cli_masks {
    FILE *f;
    char *path, *tmp;
    const struct tern_tokenizer *tok;
    int32_t n_vocab;
    uint8_t *is_eog;             /* per id */
    const struct cli_mask_at *at; /* --mask-ids: 1-based documents, 0-based steps */
    size_t n_at;
    bool *found;                 /* per --mask-ids entry: its step was reached */
    size_t doc;                  /* documents begun */
    /* the current document's steps */
    size_t n, cap;
    uint32_t *count, *eog;
    uint64_t *hash;
    double *us;
    struct { size_t step, n; int32_t *ids; } *lists; /* the --mask-ids steps of this document */
    size_t n_lists;
    bool failed;
};

uint64_t cli_masks_id_hash(int32_t id)
{
    uint64_t z = (uint64_t)(uint32_t)id + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int cli_masks_parse_at(const char *cmd, const char *s, struct cli_mask_at **at, size_t *n)
{
    *at = NULL;
    *n = 0;
    for (const char *p = s;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[64], *colon;
        long long doc, step;
        if (len == 0 || len >= sizeof item) goto bad;
        memcpy(item, p, len);
        item[len] = 0;
        if (!(colon = strchr(item, ':'))) goto bad;
        *colon = 0;
        if (!cli_parse_int(item, 1, INT32_MAX, &doc) || !cli_parse_int(colon + 1, 0, INT32_MAX, &step)) goto bad;
        struct cli_mask_at *na = realloc(*at, (*n + 1) * sizeof *na);
        if (!na) {
            free(*at);
            *at = NULL;
            return cli_report(cmd, TERN_ERR_NOMEM);
        }
        *at = na;
        (*at)[(*n)++] = (struct cli_mask_at){doc, step};
        if (!end) return 0;
        p = end;
    }
bad:
    free(*at);
    *at = NULL;
    *n = 0;
    return cli_usage_error(cmd, "--mask-ids: '%s' is not DOC:STEP[,DOC:STEP...] (documents from 1, steps from 0)", s);
}

int cli_masks_open(const char *cmd, const char *path, const struct cli_mask_at *at, size_t n_at,
                   const struct tern_tokenizer *tok, struct cli_masks **out)
{
    *out = NULL;
    struct cli_masks *w = calloc(1, sizeof *w);
    if (!w) return cli_report(cmd, TERN_ERR_NOMEM);
    w->tok = tok;
    w->n_vocab = tern_tokenizer_n_vocab(tok);
    w->at = at;
    w->n_at = n_at;
    w->found = calloc(n_at + 1, sizeof *w->found);
    w->path = strdup(path);
    w->tmp = malloc(strlen(path) + 5);
    w->is_eog = calloc((size_t)w->n_vocab + 1, 1);
    if (!w->path || !w->tmp || !w->is_eog || !w->found) {
        cli_masks_abandon(w);
        return cli_report(cmd, TERN_ERR_NOMEM);
    }
    sprintf(w->tmp, "%s.tmp", path);
    w->f = fopen(w->tmp, "w");
    if (!w->f) {
        fprintf(stderr, "tern %s: --masks: cannot write '%s': %s\n", cmd, w->tmp, strerror(errno));
        cli_masks_abandon(w);
        return CLI_EXIT_FAIL;
    }
    fprintf(w->f, "{\"n_vocab\": %d, \"eog\": [", w->n_vocab);
    bool first = true;
    for (int32_t i = 0; i < w->n_vocab; i++)
        if (tern_token_is_eog(tok, i)) {
            w->is_eog[i] = 1;
            fprintf(w->f, "%s%d", first ? "" : ", ", i);
            first = false;
        }
    fprintf(w->f, "], \"hash\": \"splitmix64-sum\"}\n");
    *out = w;
    return -1;
}

static void free_lists(struct cli_masks *w)
{
    for (size_t i = 0; i < w->n_lists; i++) free(w->lists[i].ids);
    free(w->lists);
    w->lists = NULL;
    w->n_lists = 0;
}

void cli_masks_begin(struct cli_masks *w)
{
    w->doc++;
    w->n = 0;
    free_lists(w);
}

/* Whether --mask-ids asks for step `step` of the current document (marking it found). */
static bool wanted(struct cli_masks *w, size_t step)
{
    bool any = false;
    for (size_t i = 0; i < w->n_at; i++)
        if ((size_t)w->at[i].doc == w->doc && (size_t)w->at[i].step == step) any = w->found[i] = true;
    return any;
}

static bool grow(struct cli_masks *w)
{
    size_t cap = w->cap ? w->cap * 2 : 256;
    uint32_t *c = realloc(w->count, cap * sizeof *c);
    if (c) w->count = c;
    uint32_t *e = realloc(w->eog, cap * sizeof *e);
    if (e) w->eog = e;
    uint64_t *h = realloc(w->hash, cap * sizeof *h);
    if (h) w->hash = h;
    double *u = realloc(w->us, cap * sizeof *u);
    if (u) w->us = u;
    if (!c || !e || !h || !u) return false;
    w->cap = cap;
    return true;
}

void cli_masks_step(struct cli_masks *w, const uint32_t *mask, double us)
{
    if (w->failed) return;
    if (w->n == w->cap && !grow(w)) { w->failed = true; return; }
    int32_t *list = NULL;
    size_t n_list = 0;
    if (wanted(w, w->n)) {
        void *nl = realloc(w->lists, (w->n_lists + 1) * sizeof *w->lists);
        list = malloc((size_t)w->n_vocab * sizeof *list);
        if (nl) w->lists = nl;
        if (!nl || !list) { free(list); w->failed = true; return; }
    }
    uint32_t count = 0, eog = 0;
    uint64_t hash = 0;
    size_t words = ((size_t)w->n_vocab + 31) / 32;
    for (size_t k = 0; k < words; k++)
        for (uint32_t bits = mask[k]; bits; bits &= bits - 1) {
            int32_t id = (int32_t)(k * 32 + (size_t)__builtin_ctz(bits));
            if (id >= w->n_vocab) break;
            if (list) list[n_list++] = id;
            if (w->is_eog[id]) { eog++; continue; }
            count++;
            hash += cli_masks_id_hash(id);
        }
    w->count[w->n] = count;
    w->eog[w->n] = eog;
    w->hash[w->n] = hash;
    w->us[w->n] = us;
    if (list) {
        w->lists[w->n_lists].step = w->n;
        w->lists[w->n_lists].n = n_list;
        w->lists[w->n_lists++].ids = list;
    }
    w->n++;
}

void cli_masks_end(struct cli_masks *w, const int32_t *tokens, size_t n_tokens, bool accepted)
{
    if (w->failed) return;
    FILE *f = w->f;
    fprintf(f, "{\"doc\": %zu, \"accept\": %s, \"tokens\": [", w->doc, accepted ? "true" : "false");
    for (size_t i = 0; i < n_tokens; i++) fprintf(f, "%s%d", i ? ", " : "", tokens[i]);
    fprintf(f, "], \"n\": [");
    for (size_t i = 0; i < w->n; i++) fprintf(f, "%s%u", i ? ", " : "", w->count[i]);
    fprintf(f, "], \"hash\": [");
    for (size_t i = 0; i < w->n; i++) fprintf(f, "%s\"%016llx\"", i ? ", " : "", (unsigned long long)w->hash[i]);
    fprintf(f, "], \"eog\": [");
    for (size_t i = 0; i < w->n; i++) fprintf(f, "%s%u", i ? ", " : "", w->eog[i]);
    fprintf(f, "], \"us\": [");
    for (size_t i = 0; i < w->n; i++) fprintf(f, "%s%.3f", i ? ", " : "", w->us[i]);
    fprintf(f, "]");
    if (w->n_lists) {
        fprintf(f, ", \"ids\": {");
        for (size_t k = 0; k < w->n_lists; k++) {
            fprintf(f, "%s\"%zu\": [", k ? ", " : "", w->lists[k].step);
            for (size_t i = 0; i < w->lists[k].n; i++) fprintf(f, "%s%d", i ? ", " : "", w->lists[k].ids[i]);
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "}\n");
}

int cli_masks_close(const char *cmd, struct cli_masks *w)
{
    if (!w) return CLI_EXIT_OK;
    int rc = CLI_EXIT_OK;
    if (w->failed) rc = cli_report(cmd, TERN_ERR_NOMEM);
    for (size_t i = 0; rc == CLI_EXIT_OK && i < w->n_at; i++)
        if (!w->found[i]) {
            fprintf(stderr, "tern %s: --mask-ids %lld:%lld: no such document and step\n", cmd, w->at[i].doc, w->at[i].step);
            rc = CLI_EXIT_FAIL;
        }
    bool ok = !ferror(w->f);
    if (fclose(w->f) != 0) ok = false;
    w->f = NULL;
    if (rc == CLI_EXIT_OK && (!ok || rename(w->tmp, w->path) != 0)) {
        fprintf(stderr, "tern %s: --masks: cannot write '%s': %s\n", cmd, w->path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    cli_masks_abandon(w);
    return rc;
}

void cli_masks_abandon(struct cli_masks *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) remove(w->tmp); /* after a rename there is nothing left to remove */
    free(w->path);
    free(w->tmp);
    free(w->is_eog);
    free(w->found);
    free(w->count);
    free(w->eog);
    free(w->hash);
    free(w->us);
    free_lists(w);
    free(w);
}
