/* fuzz_gbnf.c — fuzz target for the GBNF parser and the grammar compiler (scripts/fuzz.sh;
 * replayed by ctest).
 *
 * The input is GBNF text compiled without a vocabulary; a syntax refusal must name line:col
 * (left recursion, an empty language and limits name the rule or the limit instead); a
 * grammar that compiles goes through fuzz_grammar_common.h. Seeds: tests/fuzz/corpus/gbnf. */
#include "fuzz_grammar_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    struct tern_grammar *g = NULL;
    tern_status st = tern_grammar_from_gbnf(NULL, (const char *)data, size, NULL, &g);
    if (st) {
        const char *e = tern_last_error();
        if (!e[0]) abort();
        if (st == TERN_ERR_FORMAT && !strstr(e, "line ") && !strstr(e, "no rule named") && !strstr(e, "admits no document")) {
            fprintf(stderr, "format error without line:col: %s\n", e);
            abort();
        }
        return 0;
    }
    fuzz_exercise(g, data, size);
    tern_grammar_free(g);
    return 0;
}
