/* fuzz_regex.c — fuzz target for the `pattern` regex subset (scripts/fuzz.sh; replayed by
 * ctest).
 *
 * The input is a regex, put in a schema {"type": "string", "pattern": <input>} (as a JSON
 * string, so any bytes reach the regex parser) and compiled without a vocabulary; a refusal
 * must name the pattern offset or a limit; a grammar that compiles goes through
 * fuzz_grammar_common.h, where generated strings must match. Seeds: tests/fuzz/corpus/regex. */
#include <cjson/cJSON.h>

#include "fuzz_grammar_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *re = malloc(size + 1);
    if (!re) return 0;
    memcpy(re, data, size);
    re[size] = 0;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "string");
    cJSON_AddStringToObject(s, "pattern", re);
    char *text = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    free(re);
    if (!text) return 0;
    struct tern_grammar *g = NULL;
    tern_status st = tern_grammar_from_json_schema(NULL, text, strlen(text), NULL, &g);
    if (st) {
        const char *e = tern_last_error();
        if (!e[0]) abort();
        if (st == TERN_ERR_UNSUPPORTED && !strstr(e, "pattern offset") && !strstr(e, "left recursion")) {
            fprintf(stderr, "unsupported without an offset: %s\n", e);
            abort();
        }
    } else {
        fuzz_exercise(g, data, size);
        tern_grammar_free(g);
    }
    free(text);
    return 0;
}
