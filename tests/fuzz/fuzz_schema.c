/* fuzz_schema.c — fuzz target for the JSON Schema compiler (scripts/fuzz.sh; replayed by ctest).
 *
 * The input is schema text, compiled without a vocabulary, plainly and with lenient; a refusal
 * must carry a message (and malformed JSON a line:col); a grammar that compiles goes through
 * fuzz_grammar_common.h. Seeds: tests/fuzz/corpus/schema (tool schemas, every keyword). */
#include "fuzz_grammar_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    for (int lenient = 0; lenient < 2; lenient++) {
        struct tern_grammar_params p = tern_grammar_default_params();
        p.lenient = lenient;
        p.ws = (enum tern_grammar_ws)(size % 3);
        struct tern_grammar *g = NULL;
        tern_status st = tern_grammar_from_json_schema(NULL, (const char *)data, size, &p, &g);
        if (st) {
            const char *e = tern_last_error();
            if (!e[0]) abort();
            /* a JSON syntax error names line:col ("json schema: line 3:7: malformed JSON") */
            size_t n = strlen(e), k = strlen("malformed JSON");
            if (n >= k && !strcmp(e + n - k, "malformed JSON") && strncmp(e, "json schema: line ", 18)) abort();
            continue;
        }
        fuzz_exercise(g, data, size);
        tern_grammar_free(g);
    }
    return 0;
}
