/* fuzz_grammar_common.h — what the three grammar fuzz targets (fuzz_schema, fuzz_gbnf,
 * fuzz_regex) do with a grammar that compiled: a few random documents of it must be accepted
 * by a fresh matcher, byte by byte and as a whole, and the input itself, fed as a document,
 * must be judged without a crash (refusals are fine). Any disagreement aborts, so the fuzzer
 * reports it. Refusals of the grammar text must carry a message. */
#ifndef TERN_FUZZ_GRAMMAR_COMMON_H
#define TERN_FUZZ_GRAMMAR_COMMON_H

#include "tern.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_exercise(const struct tern_grammar *g, const uint8_t *data, size_t size)
{
    struct tern_grammar_matcher *m;
    if (tern_grammar_matcher_create(g, &m)) return;
    char *doc = malloc(4096);
    for (uint64_t seed = 1; doc && seed <= 3; seed++) {
        size_t n;
        if (tern_grammar_generate(g, seed, 24, doc, 4096, &n)) continue; /* may not fit in 4096 */
        tern_grammar_matcher_reset(m);
        if (tern_grammar_matcher_accept_bytes(m, doc, n, NULL) || !tern_grammar_matcher_is_complete(m)) {
            fprintf(stderr, "generated document refused: %s\n", tern_last_error());
            abort();
        }
        /* the same bytes one at a time, with a rollback in the middle */
        tern_grammar_matcher_reset(m);
        for (size_t i = 0; i < n; i++) {
            if (tern_grammar_matcher_accept_bytes(m, doc + i, 1, NULL)) abort();
            if (i == n / 2) {
                if (tern_grammar_matcher_rollback(m, 1) || tern_grammar_matcher_accept_bytes(m, doc + i, 1, NULL)) abort();
            }
        }
        if (!tern_grammar_matcher_is_complete(m)) abort();
        char forced[64];
        tern_grammar_matcher_reset(m);
        size_t k = tern_grammar_matcher_forced_bytes(m, forced, sizeof forced);
        if (k && tern_grammar_matcher_accept_bytes(m, forced, k, NULL)) abort(); /* forced bytes are allowed */
    }
    tern_grammar_matcher_reset(m);
    tern_status_ignore(tern_grammar_matcher_accept_bytes(m, (const char *)data, size > 256 ? 256 : size, NULL));
    char exp[128];
    tern_grammar_matcher_expected(m, exp, sizeof exp);
    free(doc);
    tern_grammar_matcher_free(m);
}

#endif
