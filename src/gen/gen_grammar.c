/* gen_grammar.c — the generator's side of constrained decoding: one grammar matcher per
 * generator that follows the output token by token, forced tokens, and checking drafts.
 *
 * Read include/tern.h "grammar" (the matcher API) and spec.h (struct gen_grammar, the verifier
 * that masks every position through it) first; generate.c drives these calls. The matcher only
 * ever holds the tokens the output keeps: masks for drafted positions are computed as the
 * verifier walks the kept prefix, drafts are checked ahead of the target pass by accepting them
 * and rolling the matcher back, and forced tokens the caller could not hand over (generation
 * ended among them) are rolled back too. Work is timed in CPU time of the calling thread, the
 * thread that computes masks, so the figures hold on a machine that is busy with other work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/check.h"
#include "gen/spec.h"
#include "util/error.h"
#include "util/clock.h"

double gen_cpu_ms(void) { return util_thread_cpu_ms(); }

tern_status gen_grammar_begin(struct gen_grammar *gr, const struct tern_grammar *g)
{
    /* The matcher is kept for the same grammar, told by its serial and not its address: a
     * matcher kept while the grammar pointer stayed the same followed a freed grammar whose
     * address a new one happened to reuse (it did, in test_gen_grammar: a crash in
     * classification, Release build only). A matcher whose grammar is gone is only freed,
     * which does not read the grammar. */
    struct tern_grammar_info gi;
    tern_grammar_get_info(g, &gi);
    const bool same = g && gr->m && gi.serial != 0 && gr->serial == gi.serial;
    if (!g || same) { /* the same grammar: its matcher reset; none: the matcher kept for later */
        if (same) tern_grammar_matcher_reset(gr->m);
        *gr = (struct gen_grammar){.m = gr->m, .allow = gr->allow, .of = g, .serial = gr->serial, .n_tok = gr->n_tok};
        return TERN_OK;
    }
    tern_grammar_matcher_free(gr->m);
    free(gr->allow);
    *gr = (struct gen_grammar){0};
    gr->n_tok = gi.n_vocab;
    gr->allow = malloc(((size_t)gi.n_vocab + 31) / 32 * sizeof *gr->allow);
    if (!gr->allow) return tern_fail(TERN_ERR_NOMEM, "generate: grammar: out of memory for the mask");
    tern_status st = tern_grammar_matcher_create(g, &gr->m);
    if (st) return tern_fail_prefix(st, "generate: grammar: ");
    gr->of = g;
    gr->serial = gi.serial;
    return TERN_OK;
}

void gen_grammar_free(struct gen_grammar *gr)
{
    tern_grammar_matcher_free(gr->m);
    gr->m = NULL;
    gr->of = NULL;
    free(gr->allow);
    gr->allow = NULL;
}

/* A matcher call that should not fail did (out of memory, or a bug): keep the first message
 * for the generator's error. */
static void failed(struct gen_grammar *gr, tern_status st)
{
    if (gr->failed) return;
    gr->failed = true;
    gr->fail_status = st;
    snprintf(gr->fail_msg, sizeof gr->fail_msg, "%s", tern_last_error());
}

void gen_grammar_accept(struct gen_grammar *gr, int32_t tok)
{
    const double t0 = gen_cpu_ms();
    /* the token came from this matcher's own mask (or was checked against it): a refusal is a
     * bug, reported as an error by the generator rather than silently leaving the grammar */
    tern_status st = tern_grammar_matcher_accept(gr->m, tok, NULL);
    if (st) failed(gr, st);
    gr->ms += gen_cpu_ms() - t0;
}

int gen_grammar_forced(struct gen_grammar *gr, int32_t *out, int cap)
{
    const double t0 = gen_cpu_ms();
    int n = tern_grammar_matcher_forced_tokens(gr->m, out, cap), k = 0;
    tern_status st = TERN_OK;
    while (k < n && (st = tern_grammar_matcher_accept(gr->m, out[k], NULL)) == TERN_OK) k++;
    if (k < n) failed(gr, st); /* forced_tokens promised bytes the matcher takes */
    gr->forced += k;
    gr->ms += gen_cpu_ms() - t0;
    return k;
}

/* How many of d[0..k) the matcher takes in a row from here, left as it was (no counter moves:
 * also spec_admit's filter, whose refused candidates are not drafts). Nothing follows a finished
 * document: a draft past its end is refused like a wrong one. */
static int admit_prefix(void *user, const int32_t *d, int k)
{
    struct tern_grammar_matcher *m = user;
    int ok = 0;
    while (ok < k && !tern_grammar_matcher_is_done(m) && tern_grammar_matcher_accept(m, d[ok], NULL) == TERN_OK)
        ok++;
    if (ok) { /* the tokens just accepted: rolling them back cannot fail */
        const tern_status rs = tern_grammar_matcher_rollback(m, ok);
        TERN_ASSERT(rs == TERN_OK);
        (void)rs;
    }
    return ok;
}

int gen_grammar_check_drafts(struct gen_grammar *gr, const int32_t *d, int k)
{
    const double t0 = gen_cpu_ms();
    const int ok = admit_prefix(gr->m, d, k);
    gr->draft_refused += k - ok;
    gr->ms += gen_cpu_ms() - t0;
    return ok;
}

void gen_grammar_rollback(struct gen_grammar *gr, int n)
{
    tern_status st = n > 0 ? tern_grammar_matcher_rollback(gr->m, n) : TERN_OK;
    if (st) failed(gr, st);
}

tern_status gen_grammar_draft(struct gen_grammar *gr, struct spec_source *src, int32_t *hist, int n, int k,
                              int32_t *out, int *n_out, int *cls)
{
    const double t0 = gen_cpu_ms();
    struct tern_grammar_matcher *m = gr->m;
    const struct spec_admit ad = {.fn = admit_prefix, .user = m};
    int total = 0, depth = 0, lookups = 0;
    tern_status st = TERN_OK;
    *cls = 0;
    while (total < k && !tern_grammar_matcher_is_done(m)) {
        /* what the grammar forces is certain once the drafts before it are kept */
        const int f = tern_grammar_matcher_forced_tokens(m, out + total, k - total);
        int took = 0;
        while (took < f && tern_grammar_matcher_accept(m, out[total + took], NULL) == TERN_OK) took++;
        memcpy(hist + n + total, out + total, sizeof(int32_t) * (size_t)took);
        depth += took;
        total += took;
        if (took < f || total == k) break;
        int got = 0, c = 0;
        src->admit = &ad;
        st = src->ops->propose(src, hist, n + total, k - total, 0, out + total, &got, &c);
        src->admit = NULL;
        if (st) break;
        if (lookups++ == 0) *cls = c;
        int ok = 0; /* the source drafted only what the filter takes */
        while (ok < got && tern_grammar_matcher_accept(m, out[total + ok], NULL) == TERN_OK) ok++;
        memcpy(hist + n + total, out + total, sizeof(int32_t) * (size_t)ok);
        depth += ok;
        total += ok;
        if (ok == 0) break; /* forced tokens come only after a choice: nothing more to add */
    }
    if (depth) { /* the tokens accepted above: rolling them back cannot fail */
        const tern_status rs = tern_grammar_matcher_rollback(m, depth);
        TERN_ASSERT(rs == TERN_OK);
        (void)rs;
    }
    gr->ms += gen_cpu_ms() - t0;
    *n_out = total;
    return st;
}
